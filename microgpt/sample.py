"""`python -m microgpt.sample`: the sampling program, whose source is microgpt/programs/sample.py."""

from .programs.sample import command

if __name__ == '__main__':
    command()
