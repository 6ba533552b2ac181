"""`python -m microgpt.train`: the training program, whose source is microgpt/programs/train.py."""

from .programs.train import command

if __name__ == '__main__':
    command()
