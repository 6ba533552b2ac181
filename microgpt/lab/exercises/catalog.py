"""
The exercises, declared once: their order, files, functions, the reading they follow, the lab
page that shows each idea, and which of the learner's other exercises each one calls. The command
line, the checker, the Exercises page and the reading guide's table (tests/test_exercises.py) are
read from EXERCISES below. Each exercise's text is files/STEM.py, the module the learner gets with
its reference solution between `# solution` and `# end solution`: one file gives the stub and the
solution, so they never drift apart. Standard library only: `start` and `status` never load numpy.
"""

import os
import re
from dataclasses import dataclass

# The version of this set of exercises, written into every workspace (workspace.py). Raise it
# when a stub is added, removed or renamed, or a function's signature changes: a workspace
# made by another version is then refused with the way to move on, never checked wrongly.
VERSION = 3  # 2: exercises 21 to 25, weight decay and dropout, the byte-pair tokenizer; 3: 26 to 28

FILES_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'files')
SOLUTION_START = '# solution'
SOLUTION_END = '# end solution'


@dataclass(frozen=True)
class Exercise:
    number: int
    stem: str          # the file is STEM.py, in the package's files/ and in the workspace
    function: str      # the one function the learner writes
    signature: str     # its parameters, as the stub's def line has them
    title: str         # what it computes, in a few words
    rung: str          # the part of the path, a key of RUNGS: its check is in checks_RUNG.py
    reading: str       # where docs/reading-guide.md reads the idea
    real: str          # the project's own code for that piece
    page: str          # the web lab's page that shows the idea (a name of registry.pages())
    command: str       # the lab command that shows it in a terminal
    uses: tuple = ()   # the learner's other exercises it calls
    budget: float = 30.0  # seconds the whole check may take before the checker stops it
    numpy_check: bool = False  # its check uses numpy off the numpy rung: the port as oracle, or arrays

    @property
    def needs_numpy(self):
        """Whether its check imports numpy: the numpy rung's, and those marked numpy_check. A
        Python without numpy checks every other exercise (cli.py says why not these)."""
        return self.rung == 'numpy' or self.numpy_check

    @property
    def filename(self):
        return self.stem + '.py'

    @property
    def label(self):
        """'exercise 4 (log)': how every message names it."""
        return f"exercise {self.number} ({self.function})"


ENGINE = "docs/reading-guide.md section 1, file 1"
MEMORIZES = "docs/lessons.md, When the model memorizes"
TOKENS = "docs/reading-guide.md section 14"
MODERN = "docs/modern.md"
EXERCISES = [
    Exercise(1, 'ex01_mul', 'mul', 'a, b', "the local derivatives of a * b", 'engine', ENGINE,
             "microgpt/engine.py, Value.__mul__", 'autograd',
             'python -m microgpt.lab autograd "(a + b) * c" a=2 b=-3 c=10'),
    Exercise(2, 'ex02_power', 'power', 'x, n', "the local derivative of x ** n", 'engine', ENGINE,
             "microgpt/engine.py, Value.__pow__", 'autograd',
             'python -m microgpt.lab autograd "a / b" a=1 b=4'),
    Exercise(3, 'ex03_exp', 'exp', 'x', "the local derivative of exp", 'engine', ENGINE,
             "microgpt/engine.py, Value.exp", 'autograd', 'python -m microgpt.lab autograd "exp(a)" a=1'),
    Exercise(4, 'ex04_log', 'log', 'x', "the local derivative of ln", 'engine', ENGINE,
             "microgpt/engine.py, Value.log", 'autograd', 'python -m microgpt.lab autograd "log(a)" a=4'),
    Exercise(5, 'ex05_relu', 'relu', 'x', "the local derivative of ReLU", 'engine', ENGINE,
             "microgpt/engine.py, Value.relu", 'autograd',
             'python -m microgpt.lab autograd "relu(x * w + b)" x=1 w=-2 b=0.5'),
    Exercise(6, 'ex06_topological_order', 'topological_order', 'root',
             "a graph's nodes, children before parents", 'engine',
             "docs/reading-guide.md section 1, files 1 and 2", "microgpt/engine.py, topological_order",
             'autograd', 'python -m microgpt.lab autograd "a * a + a" a=3'),
    Exercise(7, 'ex07_backward', 'backward', 'root', "backward(): the chain rule, gradients added",
             'engine', "docs/reading-guide.md section 1, file 1; section 2, autograd",
             "microgpt/engine.py, Value.backward", 'autograd',
             'python -m microgpt.lab autograd "a * a + a" a=3', uses=(6,)),
    Exercise(8, 'ex08_dot', 'dot', 'a, b', "a dot product of Values", 'model',
             "docs/reading-guide.md section 1, file 5", "microgpt/ops.py, dot", 'attention',
             'python -m microgpt.lab attention anna'),
    Exercise(9, 'ex09_linear', 'linear', 'x, w', "a linear layer, w @ x", 'model',
             "docs/reading-guide.md section 1, files 5 and 6", "microgpt/ops.py, linear", 'phases',
             'python -m microgpt.lab phases anna', uses=(8,)),
    Exercise(10, 'ex10_softmax', 'softmax', 'logits', "softmax, with the max subtracted", 'model',
             "docs/reading-guide.md section 1, file 5", "microgpt/ops.py, softmax", 'byhand',
             'python -m microgpt.lab scaling'),
    Exercise(11, 'ex11_rmsnorm', 'rmsnorm', 'x, eps=1e-5', "rmsnorm", 'model',
             "docs/reading-guide.md section 1, files 5 and 6", "microgpt/ops.py, rmsnorm", 'step',
             'python -m microgpt.lab step anna'),
    Exercise(12, 'ex12_attention_head', 'attention_head', 'q, keys, values',
             "one head of causal attention over the KV cache", 'model',
             "docs/reading-guide.md section 1, file 6; section 2, attention",
             "microgpt/model.py, gpt() step 2 (the head loop)", 'byhand',
             'python -m microgpt.lab attention anna', uses=(8, 10)),
    Exercise(13, 'ex13_gpt', 'gpt', 'token_id, pos_id, keys, values, state_dict, config',
             "gpt(): one position end to end", 'model', "docs/reading-guide.md section 1, file 6",
             "microgpt/model.py, GPT.gpt", 'phases', 'python -m microgpt.lab phases anna',
             uses=(9, 11, 12), budget=60.0, numpy_check=True),
    Exercise(14, 'ex14_name_loss', 'name_loss', 'tokens, state_dict, config',
             "the cross-entropy of a name", 'model', "docs/reading-guide.md section 1, file 7",
             "microgpt/training.py, doc_loss", 'overview', 'python -m microgpt.lab overview anna',
             uses=(10, 13), budget=60.0, numpy_check=True),
    Exercise(15, 'ex15_adam', 'adam_step', 'params, m, v, t, lr, beta1=0.85, beta2=0.99, eps=1e-8',
             "one Adam update, with bias correction", 'model',
             "docs/reading-guide.md section 1, file 8; section 5", "microgpt/optim.py, Adam.step", 'step',
             'python -m microgpt.lab step anna'),
    Exercise(16, 'ex16_probabilities', 'probabilities', 'logits, temperature',
             "temperature: logits to the probabilities to draw from", 'model',
             "docs/reading-guide.md section 1, file 9; section 6", "microgpt/sampling.py, probabilities",
             'sampling', 'python -m microgpt.lab sampling'),
    Exercise(17, 'ex17_masked_attention', 'masked_attention', 'q, k, v',
             "one causal head over a whole sequence, masked", 'numpy',
             "docs/reading-guide.md section 1, file 13", "src/inference/attention.py, masked_attention",
             'attention', 'python -m microgpt.lab attention anna --query 2'),
    Exercise(18, 'ex18_linear_backward', 'linear_backward', 'dy, x, w', "a linear layer's backward",
             'numpy', "docs/reading-guide.md section 9, file 1", "src/backprop/layers.py, linear_backward",
             'step', 'python -m microgpt.lab step anna --engine numpy'),
    Exercise(19, 'ex19_softmax_backward', 'softmax_backward', 'dp, p', "a softmax's backward", 'numpy',
             "docs/reading-guide.md section 9, file 1",
             "src/backprop/layers.py, attention_backward (the softmax lines)", 'scaling',
             'python -m microgpt.lab scaling'),
    Exercise(20, 'ex20_attention_backward', 'attention_backward', 'dout, q, k, v',
             "one attention head's backward", 'numpy', "docs/reading-guide.md section 9, file 1",
             "src/backprop/layers.py, attention_backward", 'step',
             'python -m microgpt.lab step anna --engine numpy', uses=(17, 19)),
    Exercise(21, 'ex21_adamw', 'adamw_step', 'params, m, v, t, lr, weight_decay, beta1=0.85, beta2=0.99, eps=1e-8',
             "decoupled weight decay beside your Adam", 'regularization', MEMORIZES,
             "microgpt/optim.py, Adam.step (weight_decay)", 'step', 'python -m microgpt.lab step anna',
             uses=(15,)),
    Exercise(22, 'ex22_dropout', 'dropout', 'x, kept, p, dy', "inverted dropout, forward and backward",
             'regularization', MEMORIZES + "; docs/reading-guide.md section 9, file 1",
             "src/backprop/layers.py, dropout_forward and dropout_backward", 'loss',
             'python -m microgpt.lab loss out/model.log.jsonl', numpy_check=True),
    Exercise(23, 'ex23_get_stats', 'get_stats', 'ids', "how often each adjacent pair of ids occurs",
             'tokens', TOKENS, "microgpt/bpe.py, get_stats", 'tokens',
             'python -m microgpt.lab tokens "the king"'),
    Exercise(24, 'ex24_merge', 'merge', 'ids, pair, new_id', "one merge: a pair replaced by a new token",
             'tokens', TOKENS, "microgpt/bpe.py, merge", 'tokens', 'python -m microgpt.lab tokens "the king"'),
    Exercise(25, 'ex25_encode', 'encode', 'text, merges', "text to token ids with a learned merge table",
             'tokens', TOKENS, "microgpt/bpe.py, BPETokenizer.encode", 'tokens',
             'python -m microgpt.lab tokens "the king"', uses=(23, 24)),
    Exercise(26, 'ex26_rotate', 'rotate', 'x, pos_id', "RoPE: one head's q or k turned by its position",
             'modern', MODERN + ", RoPE", "microgpt/model.py, rotate", 'attention',
             'python -m microgpt.lab attention anna'),
    Exercise(27, 'ex27_rope_backward', 'rope_backward', 'dy, pos', "RoPE's backward: the turn back",
             'modern', MODERN + ", RoPE; docs/reading-guide.md section 9, file 1",
             "src/backprop/layers.py, rope_backward", 'step', 'python -m microgpt.lab step anna --engine numpy',
             numpy_check=True),
    Exercise(28, 'ex28_grouped_attention', 'grouped_attention', 'q, keys, values, n_head, n_kv_head',
             "grouped-query attention: query heads sharing kv heads", 'modern', MODERN + ", grouped-query attention",
             "microgpt/model.py, gpt() step 2 (the head loop, with n_kv_head)", 'phases',
             'python -m microgpt.lab phases anna', uses=(12,), numpy_check=True),
]

# The parts of the path, in its order: each exercise's rung is one of them.
RUNGS = {'engine': "the engine (microgpt/engine.py)", 'model': "the GPT, on Values",
         'numpy': "the numpy rung (src/inference, src/backprop)",
         'regularization': "when the model memorizes: weight decay and dropout",
         'tokens': "the byte-pair tokenizer (microgpt/bpe.py)",
         'modern': "toward a modern GPT: RoPE and grouped-query attention (docs/modern.md)"}
# What `exercises train` substitutes for the project's own: the engine's and the model's rungs,
# your Value (1-7), blocks (8-12), gpt() (13), loss (14), Adam (15) and sampling (16). train.py's
# defaults have no weight decay, no dropout and characters for tokens, so the later rungs are not
# among them.
TRAIN_USES = tuple(e.number for e in EXERCISES if e.rung in ('engine', 'model'))
NUMBERS = [e.number for e in EXERCISES]  # the path's numbers, in its order
# Where to go once the whole path passes: `status` and the Exercises page say it.
WHAT_NEXT = ("the modern rungs you did not write (GELU, SwiGLU, norm gains, QK-norm, tied embeddings): "
             "docs/modern.md",
             "the numpy rung's every backward, derived by hand: docs/engines.md",
             "a larger model, and what each size costs: docs/training.md",
             "running text: README's Shakespeare recipe, `python bench/shakespeare.py`")
STEM_PATTERN = re.compile(r'^ex\d\d_\w+\.py$')  # what counts as an exercise file in a workspace


def get(number):
    return EXERCISES[NUMBERS.index(number)]


def source(number):
    """files/STEM.py, the stub and its solution in one."""
    with open(os.path.join(FILES_DIR, get(number).filename), encoding='utf-8') as f:
        return f.read()


def _solution_lines(text):
    """(start, end) line indexes of the `# solution` and `# end solution` marker lines."""
    lines = text.split('\n')
    start = next(i for i, line in enumerate(lines) if line.strip() == SOLUTION_START)
    end = next(i for i, line in enumerate(lines) if line.strip() == SOLUTION_END)
    return lines, start, end


def stub_text(number):
    """The file a learner starts from: the solution's lines replaced by one raise."""
    e = get(number)
    lines, start, end = _solution_lines(source(number))
    indent = lines[start][:len(lines[start]) - len(lines[start].lstrip())]
    todo = (f'{indent}raise NotImplementedError("exercise {e.number}: write {e.function}() here, then '
            f'run: python -m microgpt.lab exercises check {e.number}")')
    return '\n'.join(lines[:start] + [todo] + lines[end + 1:])


def solution_text(number):
    """The whole reference file, markers removed: what a workspace with it solved holds."""
    lines, start, end = _solution_lines(source(number))
    return '\n'.join(lines[:start] + lines[start + 1:end] + lines[end + 1:])


def solution_body(number):
    """The lines between the markers, dedented: what `exercises solution N` prints."""
    lines, start, end = _solution_lines(source(number))
    body = lines[start + 1:end]
    indent = min(len(l) - len(l.lstrip()) for l in body if l.strip())
    return '\n'.join(l[indent:] for l in body)
