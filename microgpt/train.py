"""`python -m microgpt.train`: the training program, whose source is microgpt/programs/train.py."""

if __name__ == '__main__':
    import signal
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # Ctrl-C while it imports: a quiet end, no traceback
    from .programs.train import command
    command()
