"""
The autograd explorer: type an expression, see the graph of Values it builds and every grad.

    python -m microgpt.lab autograd "(a + b) * c" a=2 b=-3 c=10
    python -m microgpt.lab autograd "relu(x * w + b)" x=1.5 w=-2 b=4 --dot graph.dot

The expression is parsed WITHOUT eval(): ast.parse makes a tree, `check` accepts only an
allow-list of node types (refusing anything else with its column, before a Value is made), and
`build` turns it into engine.Value operations. The table is the engine's real graph: a - b is
a + (b * -1) and a / b is a * b**-1, as in micrograd, so those appear as extra nodes.
"""

import ast
import math
import shutil
import subprocess

from ..engine import Value
from ..edge.checks import short
from ..edge.errors import UserError
from ..graph import graph_rows, graph_table, to_dot
from . import pictures, registry
from .limits import MAX_EXPRESSION, MAX_EXPRESSION_DEPTH
from .render import number as format_number  # (number() here parses a literal)

# The whole language. Anything not named here is an error.
FUNCTIONS = {'exp': Value.exp, 'log': Value.log, 'relu': Value.relu}
BINARY_OPS = {ast.Add: '+', ast.Sub: '-', ast.Mult: '*', ast.Div: '/', ast.Pow: '**'}
ALLOWED = "numbers, variables, + - * / **, unary minus, exp(), log(), relu() and parentheses"

# What to call the node types a learner is most likely to try, for the error message.
NODE_NAMES = {
    ast.Attribute: 'attribute access', ast.Subscript: 'indexing', ast.Lambda: 'lambda',
    ast.List: 'a list', ast.Tuple: 'a tuple', ast.Set: 'a set', ast.Dict: 'a dict',
    ast.IfExp: 'a conditional expression (x if c else y)', ast.Compare: 'a comparison',
    ast.BoolOp: 'and/or', ast.NamedExpr: 'assignment (:=)', ast.JoinedStr: 'an f-string',
    ast.ListComp: 'a comprehension', ast.GeneratorExp: 'a generator', ast.Starred: 'unpacking (*)',
    ast.Await: 'await', ast.Yield: 'yield', ast.Slice: 'a slice',
}


# ---------------------------------------------------------------------------- parsing
def parse_expression(text):
    """The checked syntax tree of `text` and its variable names in order of first use."""
    if len(text) > MAX_EXPRESSION:
        raise UserError(f"the expression is {len(text)} characters long; the explorer takes at "
                        f"most {MAX_EXPRESSION}")
    if not text.strip():
        raise UserError(f"the expression is empty: write one with {ALLOWED}")
    try:
        tree = ast.parse(text.strip(), mode='eval')
    except SyntaxError as e:
        where = f" at column {e.offset}" if e.offset else ''
        raise UserError(f"cannot parse {short(text)}: {e.msg}{where}") from None
    except (RecursionError, MemoryError, ValueError):  # absurd nesting, or a NUL byte
        raise UserError(f"cannot parse the expression: it is nested too deeply or contains "
                        f"characters that are not allowed; use {ALLOWED}") from None
    variables = []
    check(tree.body, text.strip(), variables)
    return tree.body, variables


def check(node, source, variables, depth=0):
    """Accept `node` only if every part of it is in the allow-list; collect variable names."""
    if depth > MAX_EXPRESSION_DEPTH:
        raise UserError(f"the expression is nested more than {MAX_EXPRESSION_DEPTH} levels deep")
    if isinstance(node, ast.Constant):
        number(node, source)
    elif isinstance(node, ast.Name):
        if node.id in FUNCTIONS:
            raise UserError(f"{node.id} is a function: call it on one argument, as {node.id}(x)")
        if node.id.startswith('_'):
            raise UserError(f"{short(node.id)} is not allowed: variable names may not start with '_'")
        if node.id not in variables:
            variables.append(node.id)
    elif isinstance(node, ast.BinOp):
        if type(node.op) not in BINARY_OPS:
            raise _refuse(node, source, f"the operator {OTHER_OPS.get(type(node.op), '?')} is not allowed")
        check(node.left, source, variables, depth + 1)
        if isinstance(node.op, ast.Pow):
            constant(node.right, source, depth + 1)  # the engine's ** takes a plain number only
        else:
            check(node.right, source, variables, depth + 1)
    elif isinstance(node, ast.UnaryOp):
        if not isinstance(node.op, ast.USub):
            raise _refuse(node, source, "only unary minus is allowed")
        check(node.operand, source, variables, depth + 1)
    elif isinstance(node, ast.Call):
        if not (isinstance(node.func, ast.Name) and node.func.id in FUNCTIONS):
            raise _refuse(node, source, "only exp(), log() and relu() may be called")
        if len(node.args) != 1 or node.keywords:
            raise _refuse(node, source, f"{node.func.id}() takes exactly one argument")
        check(node.args[0], source, variables, depth + 1)
    else:
        what = NODE_NAMES.get(type(node), f"a {type(node).__name__} expression")
        raise _refuse(node, source, f"{what} is not allowed")


def number(node, source):
    """A literal's value as a finite float; strings, booleans, complex numbers are refused."""
    value = node.value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _refuse(node, source, f"the literal {short(value)} is not a number")
    try:
        value = float(value)
    except OverflowError:  # an integer literal beyond the float range
        value = math.inf
    if not math.isfinite(value):
        raise _refuse(node, source, "this number is not finite (it overflows a float)")
    return value


def constant(node, source, depth=0):
    """The plain float an exponent stands for (numbers, + - * / ** and minus), in floats, so
    that 10 ** 10 ** 10 overflows at once instead of building an enormous integer."""
    if depth > MAX_EXPRESSION_DEPTH:
        raise UserError(f"the exponent is nested more than {MAX_EXPRESSION_DEPTH} levels deep")
    if isinstance(node, ast.Constant):
        return number(node, source)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -constant(node.operand, source, depth + 1)
    if isinstance(node, ast.BinOp) and type(node.op) in BINARY_OPS:
        a, b = constant(node.left, source, depth + 1), constant(node.right, source, depth + 1)
        try:
            out = {ast.Add: lambda: a + b, ast.Sub: lambda: a - b, ast.Mult: lambda: a * b,
                   ast.Div: lambda: a / b, ast.Pow: lambda: a ** b}[type(node.op)]()
        except ZeroDivisionError:
            raise _refuse(node, source, "this exponent divides by zero") from None
        except OverflowError:
            raise _refuse(node, source, "this exponent overflows a float") from None
        if isinstance(out, complex) or not math.isfinite(out):
            raise _refuse(node, source, "this exponent is not a finite real number")
        return out
    raise UserError(f"the exponent {_segment(node, source)} must be a number, as in x ** 2 or "
                    "x ** -0.5: the engine raises a Value to a plain number only "
                    "(write b ** x as exp(x * log(b)))")


def _refuse(node, source, problem):
    return UserError(f"{problem} (column {node.col_offset + 1}: {_segment(node, source)}); "
                     f"the explorer knows only {ALLOWED}")


def _segment(node, source):
    """The part of the expression a node came from, quoted and cut short for a message."""
    return short(ast.get_source_segment(source, node) or type(node).__name__)


# The operators Python has but the explorer refuses, by their symbol, for the error message.
OTHER_OPS = {ast.Mod: '%', ast.FloorDiv: '//', ast.MatMult: '@', ast.BitAnd: '&',
             ast.BitOr: '|', ast.BitXor: '^', ast.LShift: '<<', ast.RShift: '>>'}


# ---------------------------------------------------------------------------- variables
def parse_assignments(items):
    """['a=2', 'b=-3'] -> {'a': 2.0, 'b': -3.0}, with a clear error for anything else."""
    return check_names(registry.read_values(items, registry.get('autograd').param('values'), 'NAME=VALUE'))


def check_names(values):
    for name in values:
        if not (isinstance(name, str) and name.isidentifier()) or name in FUNCTIONS or name.startswith('_'):
            raise UserError(f"{short(name)} cannot be a variable name")
    return values


def listed(names, most=3):
    """Names for a message: the first few, then how many more."""
    more = f" and {len(names) - most} more" if len(names) > most else ''
    return ', '.join(names[:most]) + more


# ---------------------------------------------------------------------------- building
def build(node, source, leaves, names):
    """The Value for a checked tree. leaves: {name: Value}; names collects node labels."""
    if isinstance(node, ast.Constant):
        leaf = Value(number(node, source))
        names[leaf] = format_number(leaf.data, 'g')
        return leaf
    if isinstance(node, ast.Name):
        return leaves[node.id]
    if isinstance(node, ast.UnaryOp):
        if isinstance(node.operand, ast.Constant):  # -3 is one number, not 3 * -1
            leaf = Value(-number(node.operand, source))
            names[leaf] = format_number(leaf.data, 'g')
            return leaf
        return -build(node.operand, source, leaves, names)
    if isinstance(node, ast.Call):
        return FUNCTIONS[node.func.id](build(node.args[0], source, leaves, names))
    left = build(node.left, source, leaves, names)
    if isinstance(node.op, ast.Pow):
        exponent = constant(node.right, source)
        if exponent.is_integer() and abs(exponent) < 2 ** 53:
            exponent = int(exponent)  # so the node reads **2, not **2.0
        return left ** exponent
    right = build(node.right, source, leaves, names)
    op = type(node.op)
    if op is ast.Add:
        return left + right
    if op is ast.Sub:
        return left - right
    if op is ast.Mult:
        return left * right
    return left / right


def explore(text, assignments):
    """Parse, build, backward. Returns (root Value, {variable: leaf Value}, {Value: label})."""
    return graph_of(text, parse_assignments(assignments))


def graph_of(text, values, lenient=False):
    """explore() for values already read: {name: number}. lenient (the web page, as its learner
    types): a variable without a value starts at 1, and a value whose variable is gone is dropped."""
    tree, variables = parse_expression(text)
    check_names(values)
    if lenient:
        values = {n: values.get(n, 1.0) for n in variables}
    missing = [v for v in variables if v not in values]
    if missing:
        raise UserError(f"no value for {listed(missing)}: add {listed([m + '=VALUE' for m in missing])}")
    unused = [v for v in values if v not in variables]
    if unused:
        raise UserError(f"given a value but not used in the expression: {listed(unused)}")
    leaves = {name: Value(float(values[name])) for name in variables}
    names = {leaf: name for name, leaf in leaves.items()}
    shown = short(text.strip())
    try:
        root = build(tree, text.strip(), leaves, names)
    except OverflowError:  # exp(1000), 1e200 ** 2: math refuses what a float cannot hold
        raise UserError(f"cannot compute {shown} at these values: a result overflows a float") from None
    except ZeroDivisionError:  # 0 ** -1, and the slope of x ** 0.5 at 0
        raise UserError(f"cannot compute {shown} at these values: it divides by zero (a value "
                        "or the slope is undefined there)") from None
    except (ValueError, TypeError) as e:  # log(-1): math domain error
        raise UserError(f"cannot compute {shown} at these values: {e}") from None
    except RecursionError:
        raise UserError("the expression is nested too deeply to compute") from None
    # the engine computes what floats compute and checks nothing: the explorer shows only
    # real, finite numbers, so a product that overflowed to inf, or (-2) ** 0.5, stops here
    for node, op, data, _, _ in graph_rows(root):
        for number_ in (data, *node._local_grads):
            if not _is_finite_real(number_):
                what = 'the value' if number_ is data else 'the slope'
                raise UserError(f"cannot compute {shown} at these values: {what} of "
                                f"'{op or 'leaf'}' is {number_!r}, not a finite real number")
    root.backward()
    for node, op, data, _, _ in graph_rows(root):
        if not op and node not in names:  # a constant the engine added, e.g. the -1 in a - b
            names[node] = format_number(data, 'g')
    return root, leaves, names


def _is_finite_real(x):
    try:
        return not isinstance(x, complex) and math.isfinite(x)
    except OverflowError:  # an int too big for any float
        return False


# ---------------------------------------------------------------------------- the command
def compute(expression, values, lenient=False):
    """The graph's nodes in topological order, each with data and grad and the nodes it reads,
    the value, and each variable's value and grad; for the terminal, the table and the DOT text."""
    root, leaves, names = graph_of(expression, values, lenient)
    nodes = [{'label': names.get(node) or op or 'leaf', 'op': op, 'data': data, 'grad': grad,
              'inputs': children, 'variable': next((n for n, l in leaves.items() if l is node), None)}
             for node, op, data, grad, children in graph_rows(root)]
    return {'expression': expression.strip(), 'value': root.data, 'nodes': nodes,
            'variables': {n: {'value': l.data, 'grad': l.grad} for n, l in leaves.items()},
            '_table': graph_table(root, names=names), '_dot': to_dot(root, names=names)}


def render(d):
    given = ', '.join(f"{n} = {format_number(v['value'], 'g')}" for n, v in d['variables'].items())
    lines = [f"expression: {d['expression']}" + (f"   with {given}" if given else ''),
             f"value: {format_number(d['value'], '.6g')}",
             f"nodes: {len(d['nodes'])}",
             '',
             "The graph in topological order: every node comes after its inputs, so backward()",
             "can walk it from the bottom up. grad = d(output)/d(node); a node used twice (a",
             "diamond) adds up the grads from both uses.",
             d['_table']]
    if d['variables']:
        lines += ['', "gradients of the inputs: " +
                  '   '.join(f"{n}.grad = {format_number(v['grad'], '.6g')}" for n, v in d['variables'].items())]
    return '\n'.join(lines)


def picture(path, d, source):
    """Write the DOT file; render it to PNG beside it when Graphviz's `dot` is installed."""
    return '\n'.join(write_dot(path, d['_dot']))


def write_dot(path, dot_text):
    """Write the DOT file; render it to PNG beside it when Graphviz's `dot` is installed."""
    pictures.write(path, dot_text.encode('utf-8'), '--dot')
    lines = [f"wrote {path} (Graphviz DOT)"]
    dot = shutil.which('dot')
    picture = pictures.beside(path)
    if dot is None:
        lines.append(f"Graphviz is not installed, so it was not rendered; with it: "
                     f"dot -Tpng {path} -o {picture}")
        return lines
    done = subprocess.run([dot, '-Tpng', path], capture_output=True)  # the PNG on stdout, written whole
    if done.returncode != 0:
        raise UserError(f"dot could not render {path}: {done.stderr.decode(errors='replace').strip() or 'no message'}")
    pictures.write(picture, done.stdout, '--png')
    lines.append(f"rendered {picture}")
    return lines
