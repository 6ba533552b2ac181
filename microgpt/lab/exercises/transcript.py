"""
What crosses from the learner's process to the checker's: the learner's values, as plain data.

The process that runs the learner's code (runner.py) records every call of a learner's function
during a check: what it returned, and what it left in its arguments (backward() fills .grad,
an Adam step moves .data, gpt() appends to its caches), written down as numbers, lists and
strings by `Recorder`, inside the call's time limit (every attribute read of a learner's object,
and a kind_of() that names one, happens there). That process's word is never the verdict: for
an exercise it says passed, the checker's own process (checker.py) runs the same check again
with verdict.Replay, whose call() hands back the recorded values instead of running anything, and
microgpt's own answers and the oracles are computed there, where no learner code ever ran. A
transcript that lies can only put numbers in the learner's name, and they are judged as theirs.

    calls = []                                   # in runner.py, per exercise
    t = harness.Check(e, workspace, seconds, calls)
    ...
    result = verdict.replay(number, calls, ...)  # in checker.py: the verdict
"""

from ...engine import Value

MAX_NUMBERS = 2_000_000  # numbers one call may hand back (a gpt() forward on Values is ~20,000 nodes)
MAX_TEXT = 200           # characters kept of a str the learner returned (a report shows 40)


class Unreadable(Exception):
    """A returned value too large to write down: it is reported as the learner's."""


class Opaque:
    """A learner's object that is not plain data, as the checker's process sees it: its kind only."""
    __slots__ = ('kind',)

    def __init__(self, kind):
        self.kind = kind


def values_in(args):
    """The Values of the arguments, in one order both processes agree on: depth first through
    exact lists, tuples and dicts (the check builds its arguments from them), and through the
    _children of a Value passed itself (a root: topological_order and backward walk its graph;
    the Values in a cache or a state_dict stand for themselves, their history is not walked)."""
    seen, order, stack = set(), [], [(a, type(a) is Value) for a in reversed(args)]
    while stack:
        x, whole = stack.pop()
        kind = type(x)
        if kind is Value:
            if id(x) in seen:
                continue
            seen.add(id(x))
            order.append(x)
            children = x._children
            if whole and type(children) in (tuple, list):
                stack.extend((c, True) for c in reversed(children))
        elif kind in (list, tuple):
            stack.extend((y, False) for y in reversed(x))
        elif kind is dict:
            stack.extend((y, False) for y in reversed(list(x.values())))
    return order


# ---------------------------------------------------------------------------- in the learner's process
class Recorder:
    """Writes one call down: the Values of its arguments are numbered before it runs (known);
    the Values it made are a table of new nodes; a Value is coded i >= 0 (known) or -(j + 1)."""

    def __init__(self, args, graph, describe):
        """graph=False: a new Value is written down as its numbers alone, without the graph
        under it (a finite difference reads only .data: the check says so, in both processes).
        describe(obj): the words for an object that is not plain data (harness.kind_of)."""
        self.graph, self.describe = graph, describe
        self.known = values_in(args)
        self.index = {id(v): i for i, v in enumerate(self.known)}
        self.before = [(v.data, v.grad) for v in self.known]
        self.nodes, self.new, self.left = [], {}, MAX_NUMBERS

    def spend(self, n=1):
        self.left -= n
        if self.left < 0:
            raise Unreadable(f"more than {MAX_NUMBERS:,} numbers")

    def entry(self, args, got):
        """The record of the call: the known nodes the call changed ([i, data, grad]), the new
        nodes, the arguments after it and what it returned."""
        state = [[i, self.scalar_or_kind(v.data), self.scalar_or_kind(v.grad)]
                 for i, (v, (data, grad)) in enumerate(zip(self.known, self.before))
                 if v.data is not data or v.grad is not grad]
        self.spend(3 * len(state))
        return {'n': len(self.known), 'known': state, 'args': self.encode(list(args)), 'ret': self.encode(got),
                'nodes': self.nodes}

    def scalar(self, x):
        """A plain number (or a numpy one, named), else None."""
        kind = type(x)
        if kind is float or kind is bool:
            return x
        if kind is int:
            return x if abs(x) <= 1.7976931348623157e308 else None
        np = numpy_if_loaded()
        if np is not None and kind in numpy_scalars(np):
            return {'np': np.dtype(kind).name, 'x': x.item()}
        return None

    def scalar_or_kind(self, x):
        s = self.scalar(x)
        return s if s is not None else {'o': self.describe(x)}

    def encode(self, x):
        self.spend()
        kind = type(x)
        if x is None or kind is bool or kind is float:
            return x
        if kind is int:
            if abs(x) <= 1.7976931348623157e308:
                return x
            return {'o': f"an int of {x.bit_length() * 30103 // 100000 + 1} digits (too large for a float)"}
        if kind is str:
            return {'s': x[:MAX_TEXT]}
        if kind is list:
            return [self.encode(y) for y in x]
        if kind is tuple:
            return {'t': [self.encode(y) for y in x]}
        if kind is dict and all(type(k) is str for k in x):
            return {'d': [[k[:MAX_TEXT], self.encode(v)] for k, v in x.items()]}
        if kind is dict and all(type(k) is tuple and all(type(i) is int for i in k) for k in x):
            return {'m': [[self.encode(k), self.encode(v)] for k, v in x.items()]}  # get_stats' {(a, b): n}
        if kind is Value:
            try:
                return {'v': self.value(x)}
            except Unreadable as why:
                return {'o': f"a Value whose graph holds {why}"}
        np = numpy_if_loaded()
        if np is not None:
            if kind is np.ndarray and x.dtype.kind in 'biuf' and x.dtype.itemsize <= 8:
                self.spend(x.size)
                return {'a': list(x.shape), 'dt': x.dtype.name, 'x': x.ravel().tolist()}
            if kind in numpy_scalars(np):
                return self.scalar(x)
        return {'o': self.describe(x)}

    def value(self, root):
        """The code of a Value, its new nodes written first (children before parents, no recursion)."""
        stack = [(root, False)]
        while stack:
            v, ready = stack.pop()
            if id(v) in self.index or id(v) in self.new:
                continue
            children, local = v._children, v._local_grads
            if type(children) not in (tuple, list) or type(local) not in (tuple, list) or len(children) != len(local):
                raise Unreadable("a node whose _children and _local_grads do not pair up")
            if not self.graph:
                children = local = ()
            if not ready:
                stack.append((v, True))
                for c in children:
                    if type(c) is not Value:
                        raise Unreadable(f"a child that is {self.describe(c)}")
                    stack.append((c, False))
                continue
            data, grad, grads = self.scalar(v.data), self.scalar(v.grad), [self.scalar(g) for g in local]
            if data is None or grad is None or any(g is None for g in grads):
                raise Unreadable(f"a node whose data or gradient is {self.describe(v.data)}")
            self.spend(3 + 2 * len(children))
            op = v._op if type(v._op) is str else ''
            self.nodes.append([data, grad, op[:20], [self.code(c) for c in children], grads])
            self.new[id(v)] = len(self.nodes) - 1
        return self.code(root)

    def code(self, v):
        i = self.index.get(id(v))
        return i if i is not None else -(self.new[id(v)] + 1)


def numpy_if_loaded():
    import sys
    return sys.modules.get('numpy')


def numpy_scalars(np):
    return {np.float64, np.float32, np.float16, np.int64, np.int32, np.int16, np.int8,
            np.uint64, np.uint32, np.uint16, np.uint8, np.bool_}


# ---------------------------------------------------------------------------- in the checker's process
class Decoder:
    def __init__(self, known, entry):
        self.known = known
        if type(entry) is not dict or entry.get('n') != len(known):
            raise ValueError("the arguments' Values do not match")
        self.new = []
        for data, grad, op, children, local in entry['nodes']:
            if len(children) != len(local) or type(op) is not str:
                raise ValueError("a malformed node")
            node = Value(self.number(data), tuple(self.node(c) for c in children),
                         tuple(self.number(g) for g in local), op)
            node.grad = self.number(grad)
            self.new.append(node)
        self.entry = entry

    def number(self, x):
        if type(x) in (int, float, bool):
            return x
        if type(x) is dict and set(x) == {'np', 'x'}:
            import numpy as np
            return np.dtype(str(x['np'])).type(x['x'])
        raise ValueError("not a number")

    def node(self, code):
        if type(code) is not int:
            raise ValueError("not a node")
        if code >= 0:
            return self.known[code]
        if -code - 1 >= len(self.new):
            raise ValueError("a node not yet made")
        return self.new[-code - 1]

    def apply(self, args):
        """Leave in `args` what the learner's call left in its own, and return what it returned."""
        for i, data, grad in self.entry['known']:
            v = self.node(i if type(i) is int and i >= 0 else 'not a known node')
            v.data, v.grad = self.number_or_kind(data), self.number_or_kind(grad)
        after = self.decode(self.entry['args'])
        if type(after) is not list or len(after) != len(args):
            raise ValueError("the arguments do not match")
        for mine, theirs in zip(args, after):
            merge(mine, theirs)
        return self.decode(self.entry['ret'])

    def number_or_kind(self, x):
        if type(x) is dict and set(x) == {'o'}:
            return Opaque(str(x['o']))
        return self.number(x)

    def decode(self, x):
        kind = type(x)
        if x is None or kind in (bool, int, float):
            return x
        if kind is list:
            return [self.decode(y) for y in x]
        if kind is not dict or len(x) not in (1, 2, 3):
            raise ValueError("not a recorded value")
        if 't' in x:
            return tuple(self.decode(y) for y in x['t'])
        if 'd' in x:
            return {str(k): self.decode(v) for k, v in x['d']}
        if 'm' in x:  # keys of ints in tuples only, as recorded: anything else is not a recorded value
            keys = [self.decode(k) for k, _ in x['m']]
            if not all(type(k) is tuple and all(type(i) is int for i in k) for k in keys):
                raise ValueError("not a recorded value")
            return {k: self.decode(v) for k, (_, v) in zip(keys, x['m'])}
        if 's' in x:
            return str(x['s'])
        if 'v' in x:
            return self.node(x['v'])
        if 'o' in x:
            return Opaque(str(x['o']))
        if 'a' in x:
            import numpy as np
            shape = tuple(int(n) for n in x['a'])
            return np.array(x['x'], dtype=np.dtype(str(x['dt']))).reshape(shape)  # shape: as recorded
        if 'np' in x:
            return self.number(x)
        raise ValueError("not a recorded value")


def merge(mine, theirs):
    """Change the check's argument `mine` in place into what the learner left (`theirs`): a list
    stays the same list (the check may hold it), its items merged in turn."""
    if type(mine) is list and type(theirs) is list:
        mine[:] = [merge(mine[i], b) if i < len(mine) else b for i, b in enumerate(theirs)]
        return mine
    if type(mine) is dict and type(theirs) is dict and set(mine) == set(theirs):
        for k in mine:
            mine[k] = merge(mine[k], theirs[k])
        return mine
    return theirs
