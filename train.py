"""
Train a tiny GPT: `python train.py --help`. The program itself is microgpt/programs/train.py (read it
there); this file only lets a source checkout run it from the top of the repository. Installed
with pip, the same program is the `microgpt-train` command, or `python -m microgpt.train`.
"""

if __name__ == '__main__':
    import signal
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # Ctrl-C while it imports: a quiet end, no traceback
    from microgpt.programs.train import command
    command()
