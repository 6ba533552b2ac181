"""
microgpt: a GPT built from scratch on a scalar autograd engine, in pure standard-library Python.

Read in this order: engine.py (Value and backward), then the model and training files as they
are listed in README's reading guide.
"""

from .engine import Value

__all__ = ['Value']
