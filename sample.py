"""
Generate from a trained checkpoint: `python sample.py --help`. The program itself is
microgpt/programs/sample.py (read it there); this file only lets a source checkout run it from the top
of the repository. Installed with pip, the same program is the `microgpt-sample` command, or
`python -m microgpt.sample`.
"""

if __name__ == '__main__':
    import signal
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # Ctrl-C while it imports: a quiet end, no traceback
    from microgpt.programs.sample import command
    command()
