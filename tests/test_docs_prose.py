"""
The docs read in short sentences (over README.md and docs/*.md, at most 22 words on average and
one in ten past 35; code, tables and headings aside), and no page a learner reads sends them to
the lesson texts the project grew from: docs/lessons.md is the one place that credits those.
"""

import glob
import os
import re

from helpers import DOC_TEXTS, REPO_DIR, read_repo_file

MEAN_WORDS, LONG, LONG_SHARE = 22, 35, 0.10
# the names of the texts a learner does not have: a Czech lesson, a Russian one, a 3D tutorial
ELSEWHERE = re.compile(r"\b(?:Czech|Russian) (?:lessons?|one)\b|\bCzech and (?:a |the )?Russian\b|\b3D tutorial|"
                       r"\bthe lessons? (?:texts?|prints?|gives?|says?|writes?)\b", re.I)
CREDITS = os.path.join('docs', 'lessons.md')


def sentences(markdown):
    """The prose sentences of a markdown text, each a list of its words."""
    text = re.sub(r'```.*?```', '\n\n', markdown, flags=re.S)     # fenced code
    text = re.sub(r'<!--.*?-->', ' ', text, flags=re.S)           # comments
    text = '\n'.join('' if line.startswith('    ') or line.lstrip().startswith(('|', '#')) else line
                     for line in text.split('\n'))                 # indented code, tables, headings
    text = re.sub(r'!\[[^\]]*\]\([^)]*\)', ' ', text)              # images
    text = re.sub(r'\[([^\]]*)\]\([^)]*\)', r'\1', text)           # links: their words
    text = re.sub(r'`[^`]*`', 'CODE', text)                        # a code span: one word
    out = []
    for block in re.split(r'\n\s*\n|\n\s*(?:[-*]|\d+\.) ', text):  # paragraphs and list items
        flat = ' '.join(block.split())
        for s in re.split(r'(?<=[.!?])\s+(?=[A-Z0-9"“(*])', flat):
            words = [w for w in s.split() if re.search(r'\w', w)]
            if len(words) >= 3:
                out.append(words)
    return out


def stats(texts):
    """(sentences, mean words, share longer than LONG) over the texts together."""
    lengths = [len(s) for t in texts for s in sentences(t)]
    return len(lengths), sum(lengths) / len(lengths), sum(n > LONG for n in lengths) / len(lengths)


def test_the_docs_sentences_are_short():
    per_file = {name: stats([read_repo_file(name)]) for name in DOC_TEXTS}
    count, mean, share = stats([read_repo_file(name) for name in DOC_TEXTS])
    detail = '\n'.join(f"{name}: {n} sentences, {m:.1f} words, {s:.0%} past {LONG}"
                       for name, (n, m, s) in per_file.items())
    assert mean <= MEAN_WORDS and share <= LONG_SHARE, f"all: {count} sentences, {mean:.1f} words, {share:.0%}\n{detail}"


def test_the_measure_splits_sentences_and_leaves_code_out():
    text = ("One two three. Four five six seven: eight nine ten; eleven. Version 2.13.0 is e.g. fine here!\n\n"
            "```\nnot prose at all, however long the line runs on and on\n```\n"
            "| a | table | row |\n- `a long code span counted as one` word here\n")
    assert [len(s) for s in sentences(text)] == [3, 8, 6, 3]
    long = ' '.join(['word'] * 40) + '.'
    assert stats([long + ' Short one here.'])[2] == 0.5  # one of two past 35: a rule that can fail


def learner_pages():
    """What a learner reads: README, the docs, the notebooks, the lab's web pages, the exercises'
    stubs, hints and quiz."""
    patterns = ['README.md', 'docs/*.md', 'notebooks/*.py', 'microgpt/lab/web/*.html', 'microgpt/lab/web/*.js',
                'microgpt/lab/exercises/files/*.py', 'microgpt/lab/exercises/hints.py', 'microgpt/lab/exercises/quiz.py']
    return sorted({os.path.relpath(p, REPO_DIR) for pattern in patterns
                   for p in glob.glob(os.path.join(REPO_DIR, pattern))} - {CREDITS})


def test_no_page_sends_the_learner_to_a_text_the_project_does_not_hold():
    found = [(name, n, line.strip()) for name in learner_pages()
             for n, line in enumerate(read_repo_file(name).split('\n'), 1) if ELSEWHERE.search(line)]
    assert found == [], '\n'.join(f"{name}:{n}: {line}" for name, n, line in found[:40]) + f"\n({len(found)} in all)"


def test_the_check_finds_a_sentence_that_sends_the_learner_away():
    assert ELSEWHERE.search("As the Czech lesson shows, the weights are 0.309, 0.297 and 0.394.")
    assert ELSEWHERE.search("the lesson prints 0.9997")
    assert not ELSEWHERE.search("Three tokens by hand: head_dim 4, the query of token 3.")
