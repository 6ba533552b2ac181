"""
The edge: where what a user hands in is read, checked and written, before the lesson sees it:
the data (data.py, text.py), checkpoints (checkpoint.py, safetensors.py), the files behind both
(files.py), the sizes (limits.py) and values a user typed (checks.py). A problem is one
`errors.UserError` naming the fix. These files import the core, never the programs above them.
"""
