"""
The programs: train.py, sample.py and convert.py, and what runs and guards them.

Each program reads top to bottom: parse its flags, lock what it will write (train.py locks
--out before it reads the checkpoint there), settle the flags into one record, compute with the
core, write. settings.py settles a run, run.py keeps it safe to stop
and resume, cli.py turns every expected failure into one line. The lab (microgpt/lab/) sits
above; the edge (microgpt/edge/) and the numpy and PyTorch engines (src/: microgpt.inference, microgpt.backprop, microgpt.torchgpt) below.
"""
