"""
Learn by doing: exercises that make the learner the author of the engine and of the GPT.

    python -m microgpt.lab exercises start          # ./exercises: one stub per exercise
    python -m microgpt.lab exercises check 1        # then 2, 3, ... (`--help` lists the rest)

One function each, in the reading guide's order (docs/reading-guide.md, "Learn by doing"). The
files, in the order they are used: catalog.py declares the exercises (files/ holds each one's stub
and solution), hints.py their hints, workspace.py the learner's folder; checker.py runs the checks
in a subprocess and harness.py is its half beside the learner's code; checks_RUNG.py hold one check
per exercise; trainer.py is `train`, quiz.py the quiz; report.py, cli.py and web.py the words, the
command line and the Exercises page's routes.
No learner code ever runs in the process of the command line or of the web server: only in the
checker's subprocess, with its time limits, memory cap and bounded output, so that a mistake
cannot hang or kill either (the house style's rule 19). What that process reports is believed:
the checker does not defend against a learner deceiving themselves.
"""
