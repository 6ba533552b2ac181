"""`python -m microgpt.convert`: checkpoint conversion, whose source is microgpt/programs/convert.py."""

from .programs.convert import command

if __name__ == '__main__':
    command()
