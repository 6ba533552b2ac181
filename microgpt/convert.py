"""`python -m microgpt.convert`: checkpoint conversion, whose source is microgpt/programs/convert.py."""

if __name__ == '__main__':
    import signal
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # Ctrl-C while it imports: a quiet end, no traceback
    from .programs.convert import command
    command()
