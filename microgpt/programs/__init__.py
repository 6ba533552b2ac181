"""
The programs: train.py, sample.py and convert.py, and what runs and guards them.

Each program reads top to bottom: settle its flags into one record, read (or lock) what it
works on, compute with the core, write. settings.py settles a run, run.py keeps it safe to stop
and resume, cli.py turns every expected failure into one line. The lab (microgpt/lab/) sits
above; the edge (microgpt/edge/) and the numpy and PyTorch engines (src/) below.
"""
