"""
The quiz (microgpt/lab/exercises/quiz.py) accepts the lessons' own answers, as they round and
write numbers, and refuses wrong ones; its computed answers are computed here again.
"""

import math

import pytest

from microgpt.lab.exercises import quiz
from microgpt.lab.example import KEYS, Q, VALUES
from helpers import lab

# question -> (answers the lesson itself gives or would accept, wrong answers)
ANSWERS = {
    'byhand-1': (['0.2, 0.8, 0.0, 0.1', '[0,2; 0,8; 0; 0,1]', '0.2 0.8 0 0.1'], ['0.309, 0.356, 0.444, 0.189', '0.2, 0.8']),
    'byhand-weights': (['0.309, 0.297, 0.394', '0.309, 0.297, 0.395', '[0,309; 0,297; 0,394]'],
                      ['0.31, 0.30, 0.40', '0.485, 0.445, 0.730', '0.333, 0.333, 0.333']),
    'byhand-out3': (['0.309, 0.356, 0.444, 0.189'], ['0.309, 0.356, 0.444, 0.2', '0.2, 0.8, 0, 0.1']),
    'byhand-2': (['0.051', '0,051', '0.0506', '0.05'], ['0.297', '0.075', '0.06', 'six times']),
    'byhand-2b': (['0.874', '0,874'], ['0.395', '0.9']),
    'byhand-3': (['33554432', '33,554,432', '33 554 432'], ['33554431', '4096', '1048576']),
    'byhand-3b': (['64', '64 MiB', '64MiB'], ['128', '0.0625', '32']),
    'byhand-why-sqrt': (['b', 'B', 'b)', '(b)'], ['a', 'c', 'd', '']),
    'byhand-mask': (['b'], ['a']),
    'byhand-wo': (['c'], ['a', 'b']),
    'sqrtd-variance': (['64', '64.0'], ['8', '1']),
    'sqrtd-spread': (['32'], ['1024', '31.9']),
    'sqrtd-entropy': (['3', '3 bits'], ['8', '2.295']),
    'sqrtd-widget': (['a'], ['c']),
    'sqrtd-cost': (['0.67', '0,67', '0.667'], ['0.6', '0.7', '1.5']),
    'sqrtd-crossover': (['1536', '1,536', '1 536'], ['768', '1024']),
    'sqrtd-einsum': (['49152', '49,152'], ['3145728', '4096']),
    'sqrtd-einsum-macs': (['3,145,728', '3145728'], ['49152']),
    'phases-first': (['1', '1.0', '1,0'], ['0', '0.5']),
    'phases-heads': (['b'], ['a']),
    'phases-mask': (['1'], ['0.5', '0']),
}


def test_every_question_is_tested_and_names_its_topic():
    assert sorted(ANSWERS) == sorted(q.id for q in quiz.QUESTIONS)
    for q in quiz.QUESTIONS:
        assert any(q.topic.startswith(topic) for topic in quiz.TOPICS)
        assert q.see and q.why and ('python -m microgpt.lab' in q.see or 'web lab' in q.see)
        assert (q.kind == 'choice') == bool(q.choices)


@pytest.mark.parametrize('qid', sorted(ANSWERS))
def test_the_lessons_answers_are_right_and_wrong_ones_are_not(qid):
    q = quiz.get(qid)
    right, wrong = ANSWERS[qid]
    for answer in right:
        assert quiz.grade(q, answer)[0], (qid, answer)
    for answer in wrong:
        assert not quiz.grade(q, answer)[0], (qid, answer)


def test_the_computed_answers_are_what_the_lessons_numbers_give():
    def softmax(z):
        e = [math.exp(x - max(z)) for x in z]
        return [x / sum(e) for x in e]
    scores = [sum(a * b for a, b in zip(Q[2], k)) / 2 for k in KEYS]
    weights = softmax(scores)
    assert quiz.get('byhand-weights').answer == pytest.approx(weights, abs=1e-8)
    out3 = [sum(w * v[d] for w, v in zip(weights, VALUES)) for d in range(4)]
    assert quiz.get('byhand-out3').answer == pytest.approx(out3, abs=1e-8)
    ten = softmax([10 * s for s in [0.97 / 2, 0.89 / 2, 1.46 / 2]])  # the lesson's rounded scores, x10
    assert quiz.get('byhand-2').answer == pytest.approx(min(ten)) and quiz.get('byhand-2b').answer == pytest.approx(max(ten))
    assert quiz.get('byhand-3').answer == 32 * 1024 * 1024 and quiz.get('byhand-3b').answer * 2 ** 20 == 32 * 1024 * 1024 * 2
    assert quiz.get('sqrtd-cost').answer == pytest.approx(1024 / (2 * 768))
    assert quiz.get('sqrtd-einsum').answer * 64 == quiz.get('sqrtd-einsum-macs').answer == 12 * 64 ** 3


def test_the_quiz_command_grades_one_answer_and_asks_them_all(capsys, monkeypatch):
    status, out, _ = lab(['quiz', 'byhand-2', '0,051'], capsys)
    assert status == 0 and 'right.' in out and 'why: ' in out and 'scaling' in out
    status, out, _ = lab(['quiz', 'byhand-2', '0.297'], capsys)
    assert status == 1 and "not quite (read as 0.297): the answer is 0.051" in out
    status, _, err = lab(['quiz', 'no-such'], capsys)
    assert status == 2 and err.startswith("error: no question 'no-such'")
    first = ANSWERS[quiz.QUESTIONS[0].id][0][0]
    wrong = ANSWERS[quiz.QUESTIONS[1].id][1][0]
    status, out, _ = lab(['quiz'], capsys, answers=[first, wrong, ''], monkeypatch=monkeypatch)
    assert status == 0 and out.count('right.') == 1 and 'not quite' in out and 'skipped' in out
    assert out.rstrip().endswith('1 of 3 right')  # the answers ran out: the quiz ends with the score


# ---------------------------------------------------------------------------- answers of another form
def test_an_answer_not_of_the_kind_asked_is_not_graded_but_told_the_form():
    czech = quiz.get('byhand-1')
    assert 'not a number' in quiz.unreadable(czech, 'b') and 'answer with 4 numbers' in quiz.unreadable(czech, 'b')
    assert 'has 2 numbers' in quiz.unreadable(czech, '0.2, 0.8')
    assert quiz.unreadable(czech, '0.2, 0.8, 0, 0.1') == ''
    widget = quiz.get('sqrtd-widget')
    assert 'letter of a choice, a to d' in quiz.unreadable(widget, 'entropy goes down and max weight goes up')
    assert quiz.grade(widget, 'the entropy falls and the max weight rises') == (True, 'a')  # a choice typed out
    assert quiz.grade(widget, 'a) the entropy falls') == (True, 'a')
    assert 'one number' in quiz.unreadable(quiz.get('byhand-2'), 'six times')
    for q in quiz.QUESTIONS:  # every lesson's answer is of its own form, and so is every wrong one tested
        for answer in ANSWERS[q.id][0]:
            assert quiz.unreadable(q, answer) == '', (q.id, answer)


def test_the_command_refuses_to_grade_an_answer_of_another_form_in_one_line(capsys, monkeypatch):
    status, out, err = lab(['quiz', 'byhand-1', 'b'], capsys)
    assert status == 2 and 'not quite' not in out and err.startswith("error: 'b' is not graded: ")
    assert err.count('\n') == 1 and 'answer with 4 numbers' in err and 'quiz byhand-1 "0.1, 0.1, 0.1, 0.1"' in err
    status, out, err = lab(['quiz', 'sqrtd-widget', 'entropy goes down and max weight goes up'], capsys)
    assert status == 2 and 'not quite' not in out and 'letter of a choice' in err
    # asked in turn, it is asked again, and the letter then graded
    status, out, _ = lab(['quiz', 'sqrtd-widget'], capsys, answers=['entropy goes down', 'a'], monkeypatch=monkeypatch)
    assert status == 0 and out.count('not graded: answer with the letter of a choice') == 1 and 'right.' in out


@pytest.mark.parametrize('form', ['id-answer', 'id-asked', 'all-asked', 'list'])
def test_a_choice_question_shows_its_choices_before_any_grading(form, capsys, monkeypatch):
    q = quiz.get('byhand-why-sqrt')
    argv = {'id-answer': ['quiz', q.id, 'a'], 'id-asked': ['quiz', q.id], 'all-asked': ['quiz'],
            'list': ['quiz', '--list']}[form]
    answers = {'id-asked': ['a'], 'all-asked': [''] * 7 + ['a']}.get(form)
    _, out, _ = lab(argv, capsys, answers=answers, monkeypatch=monkeypatch if answers else None)
    at = out.index(q.text)
    for letter, choice in zip('abcd', q.choices):
        assert f"{letter}) {choice.split()[0]}" in out[at:], (form, letter)
    if form != 'list':
        verdict = out.index('not quite', at)  # 'a' is wrong: graded after the choices were shown
        assert all(out.index(f"{letter}) ", at) < verdict for letter in 'abcd')
