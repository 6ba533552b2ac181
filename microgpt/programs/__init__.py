"""
The programs: train.py, sample.py and convert.py, and what runs and guards them: settings.py
settles a run, run.py keeps it safe to stop and resume, cli.py turns every expected failure into
one line. The lab sits above; the edge and the numpy and PyTorch engines below.
"""
