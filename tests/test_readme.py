"""
README and docs/ say what the code does: their examples and commands run, their flags, links,
log lines, checkpoint and recipes are the code's. Each checker also meets a stale text, and fails.
"""

import contextlib
import functools
import glob
import io
import json
import os
import re
import shlex
import subprocess
import sys

import pytest

from helpers import DOC_TEXTS as TEXTS, REPO_DIR, TINY_NAMES, bench_script, read_repo_file as read

BLOCKS = [block for name in TEXTS for block in re.findall(r'```python\n(.*?)```', read(name), flags=re.S)]


def copy_of_the_checkout(folder):
    """The source checkout's programs copied into folder, their bytecode too (a learner's first
    command compiles it once; here every command of a fresh copy would, seconds in all)."""
    import shutil
    for name in ('microgpt', 'src'):
        shutil.copytree(os.path.join(REPO_DIR, name), folder / name)
    for name in ('train.py', 'sample.py'):
        shutil.copy(os.path.join(REPO_DIR, name), folder / name)
    return folder


@pytest.fixture(scope='module')
def checkout(tmp_path_factory):
    """A copy of the source checkout with a trained out/model.json and a names.txt, as a
    learner's folder is after `make run` and README's download: where the examples run too."""
    folder = copy_of_the_checkout(tmp_path_factory.mktemp('checkout'))
    (folder / 'names.txt').write_text('\n'.join(TINY_NAMES) + '\n')
    result = subprocess.run([sys.executable, 'train.py', '--data', 'names.txt', '--steps', '3',
                             '--num-samples', '0', '--val-size', '0'], cwd=folder, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return folder


def test_the_docs_have_python_examples():
    assert len(BLOCKS) >= 2


@pytest.mark.parametrize('index', range(len(BLOCKS)))
def test_each_python_example_runs_as_written(checkout, index):
    env = dict(os.environ, PYTHONPATH=REPO_DIR)
    result = subprocess.run([sys.executable, '-c', BLOCKS[index]], cwd=checkout, env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, f"python block {index} failed:\n{BLOCKS[index]}\n{result.stderr}"


def shell_lines(text):
    """The lines of a text's ```bash blocks, continuation lines joined, comments dropped."""
    lines = []
    for block in re.findall(r'```bash\n(.*?)```', text, flags=re.S):
        for line in block.replace('\\\n', ' ').split('\n'):
            line = re.split(r'\s#\s', line)[0].strip()
            if line:
                lines.append(line)
    return lines


def test_readmes_commands_work_or_name_the_fix_without_the_environment(checkout):
    """Typed in a shell without .venv (a Python with no site-packages, no src/ on its path), each
    command works or says in one line what is missing and how to get it, never a traceback
    (`exercises check` reports on stdout an exercise not yet passed, exit status 1)."""
    commands = [line for name in TEXTS for line in shell_lines(read(name))
                if line.startswith('python ') and '...' not in line]  # a `...` placeholder left out
    assert len(commands) > 20
    # one command per program (and lab subcommand): a Python without the environment stops each
    # where the program starts, whatever its flags
    firsts = {}
    for command in commands:
        firsts.setdefault(tuple(program_of(command)[0]) if program_of(command) else command, command)
    commands = list(firsts.values())
    bare = [sys.executable, '-S', '-s', '-E']  # no site-packages, no user site, no PYTHON* variables
    for command in commands:
        argv = bare + shlex.split(command)[1:]
        result = subprocess.run(argv, cwd=checkout, capture_output=True, text=True, timeout=120)
        err = result.stderr
        assert 'Traceback' not in err + result.stdout, (command, err)
        if result.returncode != 0 and err:
            assert err.startswith('error: ') and err.count('\n') == 1, (command, err)
        if result.returncode != 0 and not err:
            assert 'exercises check' in command and result.returncode == 1, (command, result.stdout)


# ---------------------------------------------------------------------------- flags
def inline_commands(text):
    """`python ...` commands written inline in the prose, as `python -m microgpt.lab loss X`."""
    return [span for span in re.findall(r'`([^`\n]+)`', text) if span.startswith('python ') and '...' not in span]


def program_of(line):
    """(the program's words, its argv after them) of a shell line that runs one of ours, or None:
    `python train.py ...`, `torchrun ... train.py ...`, `RANK=1 ... python -m microgpt.lab step ...`."""
    words = shlex.split(line)
    for i, word in enumerate(words):
        if word in ('train.py', 'sample.py') or word.startswith(('bench/', 'tools/')):
            return [word], words[i + 1:]
        if word == '-m' and i + 1 < len(words) and words[i + 1].startswith('microgpt'):
            module, rest = words[i + 1], words[i + 2:]
            if module == 'microgpt.lab':
                depth = 2 if rest[:1] == ['exercises'] else 1
                return [module] + rest[:depth], rest[depth:]
            return [module], rest
    return None


@functools.cache
def help_text(program):
    """The --help of a program, a tuple of words (in this process for microgpt's own, a child for a script)."""
    parsers = {'train.py': 'microgpt.programs.settings', 'microgpt.train': 'microgpt.programs.settings',
               'sample.py': 'microgpt.programs.sample', 'microgpt.sample': 'microgpt.programs.sample',
               'microgpt.convert': 'microgpt.programs.convert', 'microgpt.lab': 'microgpt.lab.__main__'}
    if program[0] not in parsers:
        return subprocess.run([sys.executable, program[0], '--help'], cwd=REPO_DIR, capture_output=True, text=True,
                              timeout=120).stdout
    import importlib
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        importlib.import_module(parsers[program[0]]).parse_args([*program[1:], '--help'])
    return out.getvalue()


def unknown_flags(lines):
    """(line, flag) for each --flag of a line that its program's --help does not list."""
    found = []
    for line in lines:
        run = program_of(line)
        if run is None:
            continue
        program, argv = run
        listed = set(re.findall(r'(?<![\w-])(--[a-z][\w-]*)', help_text(tuple(program))))
        for word in argv:
            flag = word.split('=')[0]
            if flag.startswith('--') and flag not in listed:
                found.append((line, flag))
    return found


def test_every_flag_the_docs_show_is_in_its_programs_help():
    lines = [line for name in TEXTS for line in shell_lines(read(name)) + inline_commands(read(name))]
    assert len([line for line in lines if program_of(line)]) > 80
    assert unknown_flags(lines) == []


def test_the_flag_check_finds_a_flag_that_is_gone():
    stale = ['python train.py --steps 10 --learning-rate 0.01', 'python -m microgpt.lab exercises check 1 --fast']
    assert unknown_flags(stale) == [(stale[0], '--learning-rate'), (stale[1], '--fast')]


# ---------------------------------------------------------------------------- links
def slug(heading):
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r'[^\w\- ]', '', heading.strip().lower()).replace(' ', '-')


def broken_links(name, text):
    """Each relative link of `text` (a file at `name`) whose file or heading is not there."""
    broken = []
    folder = os.path.dirname(os.path.join(REPO_DIR, name))
    for target in re.findall(r'\]\(([^)\s]+)\)', text):
        if re.match(r'[a-z]+:', target):
            continue  # a web address: not ours to check offline
        path, _, anchor = target.partition('#')
        full = os.path.normpath(os.path.join(folder, path)) if path else os.path.join(REPO_DIR, name)
        if not os.path.exists(full):
            broken.append(target)
        elif anchor and full.endswith('.md'):
            headings = re.findall(r'^#+ (.*)$', re.sub(r'```.*?```', '', read(full), flags=re.S), flags=re.M)
            if anchor not in {slug(h) for h in headings}:
                broken.append(target)
    return broken


@pytest.mark.parametrize('name', TEXTS)
def test_every_relative_link_resolves(name):
    assert broken_links(name, read(name)) == []


def test_the_link_check_finds_a_moved_file_and_a_renamed_heading():
    stale = ('[the guide](docs/reading-guide.md#1-the-reading-order) [gone](docs/gone.md) '
             '[renamed](docs/training.md#the-numpy-recipe) ![a picture](docs/img/lab-overview.png)')
    assert broken_links('README.md', stale) == ['docs/gone.md', 'docs/training.md#the-numpy-recipe']


def unlinked(name, text):
    """The docs/ files (but `name` itself) that `text`, a file at `name`, links to nowhere."""
    folder = os.path.dirname(os.path.join(REPO_DIR, name))
    linked = {os.path.relpath(os.path.normpath(os.path.join(folder, target.split('#')[0])), REPO_DIR)
              for target in re.findall(r'\]\(([^)\s#]+)(?:#[^)\s]*)?\)', text)}
    return sorted(doc for doc in TEXTS if doc.startswith('docs') and doc != name and doc not in linked)


@pytest.mark.parametrize('name', ['README.md', os.path.join('docs', 'reading-guide.md')])
def test_every_docs_file_is_one_click_from(name):
    assert unlinked(name, read(name)) == []


def test_the_one_click_check_finds_a_file_left_out():
    stale = '[the guide](docs/reading-guide.md) [training](docs/training.md#the-names-recipe---engine-numpy)'
    assert 'docs/lab.md' in unlinked('README.md', stale)
    assert 'docs/training.md' not in unlinked('README.md', stale)
    assert unlinked(os.path.join('docs', 'reading-guide.md'), '[lessons](lessons.md)')[0] == 'docs/api.md'


def test_readme_is_a_front_door():
    assert read('README.md').count('\n') <= 250


# ---------------------------------------------------------------------------- formats
def shown_fields(text):
    """The key lists of the log lines training.md shows: `{"step", "loss", "lr"}` and the like."""
    return [re.findall(r'"(\w+)"', group) for group in re.findall(r'`\{("\w+"(?:, "\w+")*)\}`', text)]


def test_the_log_lines_shown_are_what_train_py_writes(checkout):
    subprocess.run([sys.executable, os.path.join(REPO_DIR, 'train.py'), '--data', 'names.txt', '--steps', '2',
                    '--eval-every', '2', '--val-size', '2', '--num-samples', '0', '--out', 'logged.json'],
                   cwd=checkout, capture_output=True, text=True, timeout=120, check=True)
    with open(checkout / 'logged.log.jsonl', encoding='utf-8') as f:
        written = {tuple(json.loads(line)) for line in f}
    shown = shown_fields(read(os.path.join('docs', 'training.md')))
    assert {tuple(fields) for fields in shown} == written
    assert shown_fields('`{"step", "val_loss"}` per evaluation') != [list(k) for k in written]  # a stale copy differs


def checkpoint_example(text):
    """The keys, in order, of the checkpoint training.md shows: top level, then train_state."""
    example = text.split('The checkpoint is one JSON file')[1].split('```json\n')[1].split('```')[0]
    first, *others = example.strip().split('\n')  # the first line's keys, then one key a line
    top = re.findall(r'"(\w+)":', first) + [re.match(r'\s*"(\w+)":', line).group(1) for line in others]
    state = re.findall(r'"(\w+)":', example.split('"train_state": {')[1].split('"adam"')[0]) + ['adam']
    return top, state


def test_the_checkpoint_shown_is_what_train_py_writes(checkout):
    with open(checkout / 'out' / 'model.json', encoding='utf-8') as f:
        written = json.load(f)
    top, state = checkpoint_example(read(os.path.join('docs', 'training.md')))
    assert top == list(written)
    assert state == list(written['train_state'])
    assert sorted(re.findall(r'"(\w+)": \d', read(os.path.join('docs', 'training.md')).split('"config": {')[1]
                             .split('}')[0])) == sorted(written['config'])


def test_the_checkpoint_check_finds_a_field_left_out():
    stale = ('The checkpoint is one JSON file:\n```json\n{"format": "microgpt", "version": 1,\n "config": {},\n'
             ' "vocab": [],\n "state_dict": {},\n "train_state": {"step": 1, "run": {}, "adam": {}}}\n```\n')
    assert checkpoint_example(stale) == (['format', 'version', 'config', 'vocab', 'state_dict', 'train_state'],
                                         ['step', 'run', 'adam'])


# ---------------------------------------------------------------------------- in order
TINY_TEXT = ("ROMEO:\nBut soft, what light through yonder window breaks?\nIt is the east, and Juliet is the sun.\n\n"
             "JULIET:\nO Romeo, Romeo, wherefore art thou Romeo?\nDeny thy father and refuse thy name.\n\n") * 20


def shrunk(argv):
    """A README command as this test runs it: every --steps N becomes N // 1000 (at least 1; the
    default 1000 too), so that the recipes take seconds and a resume still asks for more steps
    than the run before; a --length N of running text becomes N // 100; a --batch-size above 16
    becomes 16, as the stand-in names are few."""
    out = list(argv)
    if out[:1] == ['train.py'] and '--steps' not in out:
        out += ['--steps', '1000']
    for i, word in enumerate(out[:-1]):
        if word == '--steps':
            out[i + 1] = str(max(1, int(out[i + 1]) // 1000))
        if word == '--length':
            out[i + 1] = str(max(1, int(out[i + 1]) // 100))
        if word == '--batch-size':
            out[i + 1] = str(min(16, int(out[i + 1])))
    return out


def makefile_recipe(target):
    """The command lines of a Makefile target, with $(PY) as this Python."""
    lines = read('Makefile').split(f'\n{target}:')[1].split('\n')[1:]
    recipe = []
    for line in lines:
        if not line.startswith('\t'):
            break
        recipe.append(line.strip().replace('$(PY)', sys.executable))
    return recipe


def test_readmes_commands_work_in_the_order_it_gives_them(tmp_path):
    """Typed one after the other in a fresh checkout, each works (a `curl` gets a small stand-in,
    steps are shrunk, no server starts); `exercises check 1` on a stub exits 1, `exercises train` 2."""
    copy_of_the_checkout(tmp_path)
    (tmp_path / 'my_names.txt').write_text('\n'.join(TINY_NAMES) + '\n')  # the reader's own names
    ran = []
    for line in shell_lines(read('README.md')):
        words = shlex.split(line)
        if words[0] == 'make' and words[1].startswith('test') or 'serve' in words:
            continue  # this suite itself, or part of it; a server (tests/test_lab_serve.py starts one)
        if words[0] == 'curl':
            name = words[words.index('-o') + 1] if '-o' in words else words[-1].rsplit('/', 1)[1]
            (tmp_path / name).write_text('\n'.join(TINY_NAMES) + '\n' if name == 'names.txt' else TINY_TEXT)
            continue
        argvs = ([shlex.split(c)[1:] for c in makefile_recipe('run')] if words[:2] == ['make', 'run']
                 else [words[1:]])
        for argv in argvs:
            result = subprocess.run([sys.executable, *shrunk(argv)], cwd=tmp_path, capture_output=True, text=True,
                                    timeout=300)
            ran.append(line)
            if argv[-2:] == ['check', '1']:
                assert result.returncode == 1 and 'exercise 1 (mul)' in result.stdout, (line, result.stdout)
            elif argv[-1] == 'train' and 'exercises' in argv:
                assert result.returncode == 2 and result.stderr.startswith('error: train needs your exercises 1 to 16')
            else:
                assert result.returncode == 0, (line, result.stderr)
    assert len(ran) >= 15


# ---------------------------------------------------------------------------- bench
def bench_scripts():
    """The bench/ scripts that run on their own (common.py is what they share; the baseline is
    what train_speed.py measures against)."""
    scripts = set()
    for path in glob.glob(os.path.join(REPO_DIR, 'bench', '*.py')):
        if "if __name__ == '__main__':" in read(path):
            scripts.add(os.path.basename(path))
    return scripts


def left_out_of_make_bench(text):
    """The scripts a text says `make bench` does not run: "`make bench` runs all but `a.py`, `b.py`
    and `c.py`", one set per such sentence."""
    return [set(re.findall(r'`(\w+\.py)`', words))
            for words in re.findall(r'`make bench` runs all but ((?:`\w+\.py`(?:,| and) ?)*`\w+\.py`)', text)]


def test_the_scripts_make_bench_leaves_out_are_the_ones_the_docs_name():
    ran = {os.path.basename(shlex.split(line)[1]) for line in makefile_recipe('bench')}
    assert ran <= bench_scripts()
    for name in ('performance.md', 'layout.md'):
        said = left_out_of_make_bench(read(os.path.join('docs', name)))
        assert said == [bench_scripts() - ran], name
    stale = left_out_of_make_bench('`make bench` runs all but `engines_speed.py`.')
    assert stale and stale != [bench_scripts() - ran]  # a stale copy differs


def test_layouts_bench_row_names_every_bench_script():
    row = next(line for line in read(os.path.join('docs', 'layout.md')).split('\n') if line.startswith('| `bench/`'))
    assert {os.path.basename(p) for p in glob.glob(os.path.join(REPO_DIR, 'bench', '*.py'))} <= set(
        re.findall(r'`(\w+\.py)`', row))


# ---------------------------------------------------------------------------- figures
FIGURE = re.compile(r'\b\d+(?:\.\d+)?(?: to \d+(?:\.\d+)?)? ?(?:s|ms|seconds|minutes)\b'  # a time
                    r'|(?<![\w.=])\d\.\d{2,}\b(?!\.| or newer)')  # a loss, nats or bits (1.9616), not a version
COMMAND = re.compile(r'`(?:python |make |train\.py |sample\.py )[^`]*`')


def unmeasured_figures(text):
    """(figure, where) for each time or loss in `text`'s prose whose paragraph (or table row)
    names no command that measures it: `python ...`, `make ...`, `train.py ...`. Code blocks
    are what a command printed, and are left out."""
    prose = re.sub(r'```.*?```', '', text, flags=re.S)
    units = []
    for paragraph in prose.split('\n\n'):
        lines = paragraph.split('\n')
        units += [line for line in lines if line.startswith('|')]
        units.append(' '.join(line for line in lines if not line.startswith('|')))
    return [(figure, unit[:80]) for unit in units if not COMMAND.search(unit) for figure in FIGURE.findall(unit)]


def test_every_figure_in_readme_names_the_command_that_measures_it():
    assert len(FIGURE.findall(re.sub(r'```.*?```', '', read('README.md'), flags=re.S))) >= 8
    assert unmeasured_figures(read('README.md')) == []


def test_the_figure_check_finds_a_figure_nothing_measures():
    stale = ('The recipe reaches **1.9616** in 42 to 56 s.\n\n'
             '| recipe | loss |\n|---|---|\n| names | 1.9616 |\n| names (`python bench/recipe.py`) | 1.9616 |\n\n'
             '`make run` takes about 12 seconds. The model has 4192 parameters.')
    assert unmeasured_figures(stale) == [('1.9616', 'The recipe reaches **1.9616** in 42 to 56 s.'),
                                         ('42 to 56 s', 'The recipe reaches **1.9616** in 42 to 56 s.'),
                                         ('1.9616', '| names | 1.9616 |')]


def flag_values(words):
    """{'--steps': '12000', '--rope': '', ...}: each flag with the word after it, or '' for a switch."""
    return {w: '' if v.startswith('--') else v for w, v in zip(words, words[1:] + ['--']) if w.startswith('--')}


def bench_recipe(script):
    """The train.py flags of a bench script's recipe ({'--steps': '12000', '--qk-norm': '', ...})."""
    return flag_values(bench_script(script).recipe_flags())


def recipe_differences(command, recipe):
    """What a shown train.py command sets otherwise than a bench script's recipe: a flag the recipe
    sets that the command leaves at another value (train.py's default counts as left), and a flag
    the command adds (its --data and --out aside)."""
    from microgpt.programs.settings import flag_default
    shown = flag_values(shlex.split(command)[2:])
    differ = []
    for flag, value in recipe.items():
        default = flag_default(flag[2:].replace('-', '_'))
        if shown.get(flag, str(default)) != value:
            differ.append((flag, shown.get(flag), value))
    differ += [(flag, value, None) for flag, value in shown.items() if flag not in recipe and flag not in ('--data', '--out')]
    return differ


@pytest.mark.parametrize('script, data_file', [('recipe', 'names.txt'), ('shakespeare', 'tinyshakespeare.txt')])
def test_readmes_recipes_are_the_ones_their_bench_scripts_measure(script, data_file):
    """The figures beside a recipe are the bench script's: README and docs/training.md show its very flags."""
    recipe = bench_recipe(script)
    for name in ('README.md', 'docs/training.md'):
        commands = [line for line in shell_lines(read(name)) if line.startswith('python train.py')
                    and f'--data {data_file}' in line and '--reproduce-original' not in line]
        assert commands, f"{name} shows no train.py command on {data_file}"
        assert recipe_differences(commands[0], recipe) == [], (name, commands[0])


def test_the_recipe_check_finds_a_flag_changed_added_or_left_out():
    recipe = {'--engine': 'numpy', '--steps': '12000', '--dropout': '0.05', '--block-size': '16'}
    same = 'python train.py --engine numpy --data names.txt --steps 12000 --dropout 0.05 --out out/n.json'
    assert recipe_differences(same, recipe) == []  # --block-size 16 is train.py's default
    assert recipe_differences(same.replace('12000', '5500'), recipe) == [('--steps', '5500', '12000')]
    assert recipe_differences(same.replace(' --dropout 0.05', ''), recipe) == [('--dropout', None, '0.05')]
    assert recipe_differences(same + ' --lr 0.01', recipe) == [('--lr', '0.01', None)]


def test_the_reading_guides_list_of_lab_commands_names_every_command():
    """Was: section 4 left out byhand, phases and tokens."""
    from microgpt.lab import registry
    section = read(os.path.join('docs', 'reading-guide.md')).split('## 4. The lab')[1].split('\n## ')[0]
    listed = set(re.findall(r'^python -m microgpt\.lab (\w+)', section, re.M))
    assert {s.name for s in registry.SANDBOXES} | {'serve', 'exercises'} <= listed
