"""
The project's layout, read with `ast` from every module's source (deferred imports too): the core
imports only the standard library and itself (engine.py nothing of the project), the layers
core < edge < arrays (src/) < programs < lab only look down, nothing imports in a circle, and
the code stays within its budgets.
"""

import ast
import io
import os
import subprocess
import sys
import tokenize

import pytest

from helpers import LAYERS, REPO_DIR, layer_of, project_modules, read_repo_file

CORE = {'engine', 'ops', 'fused', 'graph', 'model', 'tokenizer', 'bpe', 'bpe_fast', 'training', 'optim', 'sampling'}
# The core is read in one sitting: its code (not its comments) fits in about as many lines as
# microgpt's single file, and the engine in fewer than micrograd's 94-line engine.py (559 with
# weight decay, dropout and the byte-pair tokenizer, bpe.py's 88, besides; 56 more for the six
# modern rungs, each a flag of gpt()).
CORE_CODE_LINES, ENGINE_CODE_LINES = 615, 80
# What runs and guards the programs stays in proportion to the lesson it protects: its code at
# most about 3.9 times the core's budget (nanoGPT's train.py, with DDP and checkpointing, is 336
# lines); counted in code lines for the core's reason, so that no explanation is cut to fit.
PROGRAM_CODE_LINES = 2150


def imported_names(module, path, modules):
    """Every module `module` imports (project modules by their full name, others by their top
    name). `from pkg import x` names pkg.x where that is a module, else pkg itself."""
    tree = ast.parse(read_repo_file(path))
    package = module.split('.') if path.endswith('__init__.py') else module.split('.')[:-1]
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from . import x, from ..errors import y
                base = package[:len(package) - node.level + 1]
                source = '.'.join(base + ([node.module] if node.module else []))
            else:
                source = node.module
            for alias in node.names:
                names.add(f'{source}.{alias.name}' if f'{source}.{alias.name}' in modules else source)
    return names


def import_graph():
    modules = project_modules()
    return modules, {name: {i for i in imported_names(name, path, modules) if i != name}
                     for name, path in modules.items()}


def test_the_core_imports_only_the_standard_library_and_itself():
    modules, graph = import_graph()
    for name in sorted(CORE):
        module = f'microgpt.{name}'
        assert module in modules, f"core module {module} is missing"
        for imported in graph[module]:
            top = imported.split('.')[0]
            if imported in modules:
                assert layer_of(imported) == 'core', f"{module} imports {imported}, outside the core"
            else:
                assert top in sys.stdlib_module_names, f"{module} imports {imported}, not the standard library"
    engine = {i for i in graph['microgpt.engine'] if i in modules}
    assert engine == set(), f"engine.py imports {engine} from the project"


def test_no_import_cycle_between_modules():
    modules, graph = import_graph()
    project = {name: {i for i in deps if i in modules} for name, deps in graph.items()}
    # a depth-first search that reports the first cycle it walks into
    state = {}

    def visit(module, path):
        state[module] = 'open'
        for dep in sorted(project[module]):
            if state.get(dep) == 'open':
                cycle = path[path.index(dep):] + [dep]
                pytest.fail(f"import cycle: {' -> '.join(cycle)}")
            if dep not in state:
                visit(dep, path + [dep])
        state[module] = 'done'
    for module in sorted(project):
        if module not in state:
            visit(module, [module])


def test_layers_only_import_downwards():
    modules, graph = import_graph()
    for module, deps in sorted(graph.items()):
        for dep in sorted(d for d in deps if d in modules):
            if dep in ('microgpt',):  # the package facade (microgpt/__init__.py) is a program
                continue
            assert LAYERS.index(layer_of(dep)) <= LAYERS.index(layer_of(module)), \
                f"{module} ({layer_of(module)}) imports {dep} ({layer_of(dep)}), a layer above it"


def test_the_layout_checks_can_fail(tmp_path):
    """Negative controls: a core module that imported the lab or numpy would be seen."""
    probe = tmp_path / 'probe.py'
    probe.write_text("from . import engine\nfrom .lab import step\nimport numpy\n")
    modules = {'microgpt.engine': '', 'microgpt.lab': '', 'microgpt.lab.step': ''}
    names = imported_names('microgpt.probe', str(probe), modules)
    assert {'microgpt.engine', 'microgpt.lab.step', 'numpy'} <= names
    assert layer_of('microgpt.lab.step') == 'lab' and layer_of('microgpt.engine') == 'core'
    assert 'numpy' not in sys.stdlib_module_names


def code_lines(path):
    """The lines of a Python file that hold code: not blank, not only a comment, not part of a
    docstring. What the budgets count, so that a comment is never cut and no lines are joined
    to make a budget."""
    source = read_repo_file(path)
    docstrings = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                docstrings.update(range(first.lineno, first.end_lineno + 1))
    lines = set()
    skip = (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER)
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type not in skip:
            lines.update(range(token.start[0], token.end[0] + 1))
    return len(lines - docstrings)


def program_layer():
    """Every file of the layer that runs and guards the programs: microgpt/'s own files outside the
    core (the front door, the `python -m` entry points), microgpt/edge/ and microgpt/programs/."""
    top = os.path.join(REPO_DIR, 'microgpt')
    files = [os.path.join(top, f) for f in os.listdir(top) if f.endswith('.py') and f[:-3] not in CORE]
    for folder in ('edge', 'programs'):
        files += [os.path.join(top, folder, f) for f in os.listdir(os.path.join(top, folder)) if f.endswith('.py')]
    return sorted(files)


def test_the_core_is_small_enough_to_read_in_a_sitting():
    core = [os.path.join(REPO_DIR, 'microgpt', f'{name}.py') for name in sorted(CORE)]
    engine = code_lines(os.path.join(REPO_DIR, 'microgpt', 'engine.py'))  # CORE is a set: no first
    assert engine <= ENGINE_CODE_LINES, f"engine.py has {engine} lines of code"
    total = sum(map(code_lines, core))
    assert total <= CORE_CODE_LINES, f"the core has {total} lines of code"


def test_what_runs_and_guards_the_programs_stays_in_proportion():
    total = sum(map(code_lines, program_layer()))
    assert total <= PROGRAM_CODE_LINES, f"microgpt/edge, microgpt/programs and the entry points have {total} lines of code"


def test_the_budgets_count_code_and_see_the_whole_layer(tmp_path):
    """Negative controls: docstrings, comments and blank lines are not code; a line joined
    with ; still counts once, so joining gains nothing over a comment; the layer has its files."""
    probe = tmp_path / 'probe.py'
    probe.write_text('"""A docstring\nover two lines."""\n\n# a comment\n\n\ndef f(x):\n'
                     '    """Its docstring."""\n    y = x + 1  # a note\n    return (y +\n            1)\n')
    assert code_lines(probe) == 4  # def, y =, and the return over two lines
    names = {os.path.relpath(p, REPO_DIR) for p in program_layer()}
    assert {'microgpt/edge/checkpoint.py', 'microgpt/programs/train.py', 'microgpt/train.py'} <= names
    assert not any(n.startswith('microgpt/lab') or os.path.basename(n)[:-3] in CORE for n in names)


def test_the_reading_guides_line_counts_are_true():
    """Every 'About N lines' in the reading guide's table is within 10% of the file it names."""
    import re
    guide = read_repo_file(os.path.join('docs', 'reading-guide.md'))
    rows = [line for line in guide.split('\n') if line.startswith('|') and 'lines' in line]
    claims = []
    for row in rows:
        match = re.search(r'`([\w/]+\.py)`.*?[Aa]bout (\d+) lines', row)
        if match:
            claims.append((match.group(1), int(match.group(2))))
    assert claims, "the guide states no line count"
    for path, stated in claims:
        actual = read_repo_file(path).count('\n')
        assert abs(actual - stated) <= 0.1 * stated, f"the guide says {path} has about {stated} lines: {actual}"


def test_importing_the_lesson_loads_no_module_of_the_edge_layer():
    """The core trusts its arguments and reads alone: `import microgpt.engine` (and the package's
    front door, which every import of it passes) loads the lesson's files only; load_checkpoint,
    from edge/, is imported when first asked for."""
    code = ("import sys, microgpt.engine, microgpt.model, microgpt.optim, microgpt.sampling, microgpt.training\n"
            "print(' '.join(sorted(m for m in sys.modules if m.startswith('microgpt.'))))\n"
            "from microgpt import load_checkpoint\n"
            "print('microgpt.edge.checkpoint' in sys.modules)")
    out = subprocess.run([sys.executable, '-c', code], cwd=REPO_DIR, capture_output=True, text=True,
                         check=True).stdout.splitlines()
    loaded = out[0].split()
    assert 'microgpt.engine' in loaded and not [m for m in loaded if m.startswith(('microgpt.edge', 'microgpt.programs',
                                                                                 'microgpt.lab'))], loaded
    assert out[1] == 'False'  # load_checkpoint imports the edge when called, not before


def function_code_lines(path, qualname):
    """code_lines of one function of a file (Class.method or function), its docstring aside."""
    source = read_repo_file(path)
    tree, (owner, _, name) = ast.parse(source), qualname.rpartition('.')
    scope = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == owner) if owner else tree
    func = next(n for n in scope.body if isinstance(n, ast.FunctionDef) and n.name == name)
    lines = source.splitlines()[func.lineno - 1:func.end_lineno]
    doc = func.body[0]
    skip = set(range(doc.lineno, doc.end_lineno + 1)) if isinstance(doc, ast.Expr) else set()
    return sum(1 for i, line in enumerate(lines, func.lineno)
               if i not in skip and line.strip() and not line.strip().startswith('#'))


def test_gpt_and_the_training_step_hold_the_models_lines_and_run_what_is_read():
    """gpt() near the original microgpt.py's (about 40 lines of code), the lesson's step three
    lines and its return: no captures, dropout, tape or collector in them. And a GPT built as a
    reader builds it runs ops.py's blocks, the ones gpt()'s calls name when read."""
    from microgpt import ops
    from microgpt.model import GPT, GPTConfig
    model_py, training_py = (os.path.join(REPO_DIR, 'microgpt', f) for f in ('model.py', 'training.py'))
    assert function_code_lines(model_py, 'GPT.gpt') <= 45
    assert function_code_lines(training_py, 'batch_step') <= 6
    gpt_source = read_repo_file(model_py).split('    def gpt(')[1].split('\n    def ')[0]
    for word in ('capture', 'dropout', 'Tape', 'gc.'):
        assert word not in gpt_source, word
    assert GPT(GPTConfig(vocab_size=5)).blocks is ops


def test_no_test_file_imports_another():
    """Helpers shared by tests live in tests/helpers.py (fixtures in conftest.py): a test file
    that imports from another would run that file's module-level set-up as a side effect."""
    import re
    offenders = []
    for name in sorted(os.listdir(os.path.join(REPO_DIR, 'tests'))):
        if name.endswith('.py'):
            offenders += [f"{name}: {line.strip()}" for line in read_repo_file(f'tests/{name}').split('\n')
                          if re.match(r'\s*(from|import) (test_\w+|conftest)\b', line)]
    assert offenders == []
