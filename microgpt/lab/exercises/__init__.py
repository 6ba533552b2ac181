"""
Learn by doing: exercises that make the learner the author of the engine and of the GPT.

    python -m microgpt.lab exercises start          # ./exercises: one stub per exercise
    python -m microgpt.lab exercises check 1        # then 2, 3, ... (or `check` for all, in order)
    python -m microgpt.lab exercises status         # the path, with what passes
    python -m microgpt.lab exercises hint 13        # the next hint for exercise 13, one level at a time
    python -m microgpt.lab exercises train          # microgpt trained with YOUR engine, beside its own
    python -m microgpt.lab exercises quiz           # questions on the attention examples
    python -m microgpt.lab serve --exercises exercises   # the web lab's Exercises page, with results

One function each, in the reading guide's order (docs/reading-guide.md, "Learn by doing"): the
engine's local derivatives, topological order and backward(); dot, linear, softmax, rmsnorm, one
attention head over the KV cache, gpt(), the loss of a name, Adam, temperature; on the numpy
rung, masked attention and three backwards derived by hand; and against memorizing, decoupled
weight decay beside Adam and inverted dropout.

The files, in the order they are used:
  catalog.py      the exercises, declared once; files/ holds each one's stub and solution
  hints.py        each exercise's hints, one level at a time (`hint N`)
  workspace.py    the learner's folder: start, the checks of what is handed in, results, reset
  checker.py      runs the checks in a subprocess, with time limits, and answers for it
  harness.py      in that subprocess: loading the learner's files, calling them under a time
                  limit, comparing, the report of a failed case
  checks_engine.py, checks_model.py, checks_numpy.py, checks_regularization.py, checks_tokens.py
                  one check per exercise, a module per rung
  trainer.py      `train`: the learner's Value, blocks, gpt() and Adam beside microgpt's
  quiz.py         questions on the attention examples (their numbers: ../example.py)
  report.py, cli.py, web.py   the words printed, the command line, the Exercises page's routes
No learner code ever runs in the process of the command line or of the web server: only in the
checker's subprocess, with its time limits, memory cap and bounded output, so that a mistake
cannot hang or kill either (the house style's rule 19). What that process reports is believed:
the checker does not defend against a learner deceiving themselves.
"""
