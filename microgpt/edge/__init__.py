"""
The edge: where what a user hands in is read, checked and written, before the lesson sees it.

The core (the ten files in microgpt/) trusts its arguments, as micrograd and microgpt do.
Everything from outside passes through here first: the data (data.py, text.py), checkpoints
(checkpoint.py, safetensors.py), the files behind both (files.py), the caps on every
size (limits.py) and the checks of values a user typed (checks.py). A problem is one
`errors.UserError` naming the fix. These files import the core and each other, never the
programs above them (tests/test_layout.py).
"""
