"""
The lessons' notebooks (notebooks/NN_*.py, jupytext percent scripts) run top to bottom as "Run
All" runs them: one nbclient kernel, each notebook from an emptied namespace in its own folder; a
cell that raises or writes to stderr fails, and the notebooks assert their key numbers in their
own cells. Each source converts, by the Makefile's jupytext command, to an .ipynb and back unchanged.
"""

import difflib
import glob
import importlib
import importlib.util
import os
import re
import time

import pytest

from helpers import REPO_DIR, read_repo_file as source

pytestmark = pytest.mark.notebooks

NOTEBOOKS = sorted(glob.glob(os.path.join(REPO_DIR, 'notebooks', '[0-9][0-9]_*.py')))
NAMES = [os.path.basename(path) for path in NOTEBOOKS]
CELL_TIMEOUT = 120  # seconds a cell may take before the run counts as hung (each takes a few)
EXTRA = "needs the notebooks extra: pip install -e '.[notebooks]'"
MARKERS = ('# %%', '# %% [markdown]')  # a code cell, a cell of prose (docs/notebooks.md)


def notebook_tools(needed=('jupytext', 'nbclient', 'ipykernel', 'matplotlib')):
    """jupytext and nbclient (None where not needed), or a skip naming the first of `needed` that
    is missing (looked up before any is imported: they take seconds to import)."""
    for name in needed:
        if importlib.util.find_spec(name) is None:
            pytest.skip(f"{name} is not installed: {EXTRA}")
    return (importlib.import_module('jupytext'),
            importlib.import_module('nbclient') if 'nbclient' in needed else None)


@pytest.fixture(scope='module')
def kernel(tmp_path_factory):
    """One running kernel of this Python, this checkout's packages on its path, held by a client."""
    jupytext, nbclient = notebook_tools()
    client = nbclient.NotebookClient(jupytext.read(NOTEBOOKS[0]), timeout=CELL_TIMEOUT, kernel_name='python3')
    with client.setup_kernel(env=dict(os.environ, PYTHONPATH=REPO_DIR), cwd=str(tmp_path_factory.mktemp('kernel'))):
        yield client


@pytest.mark.parametrize('path', NOTEBOOKS, ids=NAMES)
def test_each_notebook_runs_top_to_bottom_in_an_emptied_kernel(path, tmp_path, kernel, measured):
    import nbformat
    kernel.nb = notebook = notebook_tools()[0].read(path)
    # magics bind no name: the notebook starts from an empty namespace, in its folder, its workspace fresh,
    # the kernel's own objects frozen out of the gc's sweeps (as tests/conftest.py does before a test)
    notebook.cells.insert(0, nbformat.v4.new_code_cell(
        f"%reset -f\n%cd -q {tmp_path}\n%env MICROGPT_EXERCISES={tmp_path / 'exercises'}\n"
        "__import__('gc').collect(); __import__('gc').freeze();"))
    started = time.perf_counter()
    kernel.execute(cleanup_kc=False)  # raises CellExecutionError, with the cell and its traceback, at the first error
    seconds = time.perf_counter() - started
    code = [cell for cell in notebook.cells[1:] if cell.cell_type == 'code']
    assert code and all(cell.get('execution_count') for cell in code), "a code cell did not run"
    warned = [(cell.source[:60], out.text) for cell in code for out in cell.outputs
              if out.output_type == 'stream' and out.name == 'stderr']
    assert not warned, warned
    pictures = sum(out.output_type == 'display_data' and 'image/png' in out.data
                   for cell in code for out in cell.outputs)
    assert pictures >= 1, "a lesson's notebook shows at least one picture inline"
    measured(f" {seconds:.1f} s in the shared kernel, {len(code)} code cells, {pictures} pictures")


def makefile_conversion():
    """The arguments `make notebooks` gives jupytext to make notebooks/NN_*.ipynb from its source:
    the recipe of the Makefile's notebooks/%.ipynb rule, less the program and the `$<`."""
    makefile = source(os.path.join(REPO_DIR, 'Makefile'))
    assert 'wildcard notebooks/[0-9][0-9]_*.py' in makefile, "make converts the notebooks this file runs"
    found = re.search(r'^notebooks/%\.ipynb: notebooks/%\.py.*\n\t\S*/jupytext (.*) \$<$', makefile, flags=re.M)
    assert found, "the Makefile makes notebooks/%.ipynb from notebooks/%.py with jupytext"
    return found.group(1).split()


def out_of_sync(jupytext, path, folder):
    """What differs ([] where nothing) between the script at path and the .ipynb `make notebooks`
    makes from it, written back as a percent script (jupytext's version note aside): its lines, a
    cell marker other than the sources' two, prose turned into a code cell of comments."""
    ipynb = os.path.join(folder, os.path.basename(path)[:-len('.py')] + '.ipynb')
    assert jupytext.cli.jupytext([*makefile_conversion(), path, '--output', ipynb]) in (0, None)
    notebook = jupytext.read(ipynb)
    notebook.metadata['jupytext'] = {'notebook_metadata_filter': '-jupytext'}
    text, back = source(path), jupytext.writes(notebook, fmt='py:percent')
    found = [] if back == text else [''.join(list(difflib.unified_diff(
        text.splitlines(True), back.splitlines(True), 'the source', 'its .ipynb written back', n=1))[:12])]
    found += [f"cell marker {line!r}: {' or '.join(map(repr, MARKERS))}" for line in text.splitlines()
              if re.match(r'#\s*%%', line) and line not in MARKERS]
    found += [f"a code cell of comments only, prose: {cell.source[:60]!r}" for cell in notebook.cells
              if cell.cell_type == 'code' and all(not line.strip() or line.lstrip().startswith('#')
                                                  for line in cell.source.splitlines())]
    return found


def test_each_notebook_is_in_sync_with_the_ipynb_make_converts_it_to(tmp_path):
    jupytext = pytest.importorskip('jupytext', reason=f"jupytext is not installed: {EXTRA}")
    importlib.import_module('jupytext.cli')
    for path in NOTEBOOKS:
        assert out_of_sync(jupytext, path, tmp_path) == [], os.path.basename(path)
    # negative controls: copies of the first broken by hand are caught (a marker without its space,
    # a misspelt cell type, a prose cell marked as code, a line of prose without its `# `)
    text = source(NOTEBOOKS[0])
    # the first line of prose after the title
    prose = re.search(r'^# ([A-Z][a-z].*)$', text[text.index(MARKERS[1]):], flags=re.M).group(1)
    (tmp_path / 'broken').mkdir()
    broken = tmp_path / 'broken' / os.path.basename(NOTEBOOKS[0])
    for good, bad in (('\n# %%\n', '\n#%%\n'), ('\n# %% [markdown]\n', '\n# %% [markdwn]\n'),
                      ('\n# %% [markdown]\n', '\n# %%\n'), (f'\n# {prose}\n', f'\n{prose}\n')):
        assert good in text
        broken.write_text(text.replace(good, bad, 1), encoding='utf-8')
        assert out_of_sync(jupytext, str(broken), broken.parent), bad


def exercises_checked(text):
    """The exercise numbers a notebook's last cell checks, its LESSON_EXERCISES (a lesson that
    leads to none has `()`); None where it names none."""
    found = re.search(r'^LESSON_EXERCISES = \(([\d, ]*)\)', text, flags=re.M)
    return [int(n) for n in found.group(1).replace(',', ' ').split()] if found else None


@pytest.mark.parametrize('path', NOTEBOOKS, ids=NAMES)
def test_each_notebook_opens_with_its_lesson_and_ends_with_its_exercises(path):
    jupytext, _ = notebook_tools(('jupytext',))
    cells = jupytext.read(path).cells
    assert cells[0].cell_type == 'markdown' and cells[0].source.startswith('# '), "the first cell names the lesson"
    last = cells[-1]
    assert last.cell_type == 'code' and 'check_exercises(LESSON_EXERCISES)' in last.source, "the last cell checks the exercises"
    assert exercises_checked(last.source) is not None, "the last cell names the lesson's exercises in LESSON_EXERCISES"


def test_the_notebooks_lead_to_every_exercise_once():
    from microgpt.lab.exercises.catalog import EXERCISES
    checked = [n for path in NOTEBOOKS for n in exercises_checked(source(path)) or ()]
    assert sorted(checked) == [e.number for e in EXERCISES], checked
    assert exercises_checked("LESSON_EXERCISES = (8, 9, 11)\n") == [8, 9, 11]  # the reading can fail
    assert exercises_checked("LESSON_EXERCISES = ()\n") == []
    assert exercises_checked("exercises = (8, 9)\n") is None


def test_docs_list_every_notebook_and_no_other():
    listed = set(re.findall(r'notebooks/(\d\d_\w+\.py)', source(os.path.join(REPO_DIR, 'docs', 'notebooks.md'))))
    assert listed == set(NAMES) and len(NAMES) >= 4


def test_a_notebook_checks_no_exercise_before_the_ones_it_uses():
    """Was: notebook 2 ended with exercise 13, whose gpt() calls 10 and 12 from notebook 3."""
    from microgpt.lab.exercises.catalog import get
    seen = set()
    for path in NOTEBOOKS:
        checked = exercises_checked(source(path)) or []
        for n in checked:
            assert set(get(n).uses) - {n} <= seen | set(checked), (os.path.basename(path), n, get(n).uses)
        seen |= set(checked)
