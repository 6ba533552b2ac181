"""`python -m microgpt.sample`: the sampling program, whose source is microgpt/programs/sample.py."""

if __name__ == '__main__':
    import signal
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # Ctrl-C while it imports: a quiet end, no traceback
    from .programs.sample import command
    command()
