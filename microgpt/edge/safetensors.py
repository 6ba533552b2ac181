"""
safetensors, written and read with the standard library: the binary format the ecosystem keeps
weights in. This file knows the container; what a checkpoint puts in it is checkpoint.py's.

    8 bytes   N, the length of the header, an unsigned little-endian integer
    N bytes   JSON: {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {str: str}}
    the rest  every tensor's numbers back to back, little-endian, row after row

Reading is in steps: `read_header`, then `entry` checks one tensor's entry, then `read_tensor`
reads it into an array of float64. It reads F64, F32, F16 and BF16, and writes F64, so a
resumed run continues bit for bit.
"""

import json
import math
import struct
import sys
from array import array
from typing import NamedTuple

from .checks import Range, short
from .errors import UserError
from .files import parse_json

EXTENSION = '.safetensors'
# dtype -> (array typecode, bytes per number); BF16 has none: it is the upper half of a float32
DTYPES = {'F64': ('d', 8), 'F32': ('f', 4), 'F16': ('e', 2), 'BF16': (None, 2)}


class Entry(NamedTuple):
    """One tensor as the header describes it; begin and end count from the end of the header."""
    dtype: str
    shape: tuple
    begin: int
    end: int


# ---------------------------------------------------------------------------- writing
def write(f, tensors, metadata):
    """Write {name: (shape, rows or a flat sequence)} as float64, with metadata {str: str}, to f."""
    header, offset = {'__metadata__': metadata}, 0
    for name, (shape, _) in tensors.items():
        size = 8 * math.prod(shape)
        header[name] = {'dtype': 'F64', 'shape': list(shape), 'data_offsets': [offset, offset + size]}
        offset += size
    text = json.dumps(header, separators=(',', ':')).encode('utf-8')
    text += b' ' * (-(8 + len(text)) % 8)  # padded with spaces, so the numbers start 8-byte aligned
    f.write(struct.pack('<Q', len(text)))
    f.write(text)
    for shape, rows in tensors.values():
        for row in (rows if len(shape) == 2 else [rows]):
            numbers = array('d', row)
            if sys.byteorder == 'big':  # the format is little-endian everywhere
                numbers.byteswap()
            f.write(numbers.tobytes())


# ---------------------------------------------------------------------------- reading
def read_header(f, path, size):
    """(metadata {str: str}, {name: its entry}, where the data starts) of the open file f."""
    head = f.read(8)
    n = struct.unpack('<Q', head)[0] if len(head) == 8 else size
    if n > size - 8:
        raise UserError(f"{path} is not a safetensors file, or is truncated: its first 8 bytes do not give "
                        "the length of a header it holds")
    try:
        header = parse_json(f.read(n).decode('utf-8'), f"{path}: the safetensors header", "the file is damaged")
    except UnicodeDecodeError:
        raise UserError(f"{path}: the safetensors header is not UTF-8 text: the file is damaged") from None
    if not isinstance(header, dict):
        raise UserError(f"{path}: the safetensors header is not a JSON object: the file is damaged")
    metadata = header.pop('__metadata__', None) or {}
    if not (isinstance(metadata, dict) and all(isinstance(v, str) for v in metadata.values())):
        raise UserError(f"{path}: the safetensors metadata must map names to strings: the file is damaged")
    return metadata, header, 8 + n


def entry(path, name, e):
    """The Entry of one tensor, once its dtype is one microgpt reads and its offsets span its shape."""
    if not (isinstance(e, dict) and isinstance(e.get('dtype'), str) and e['dtype'] in DTYPES and isinstance(e.get('shape'), list)
            and all(Range(int, 0).holds(d) for d in e['shape']) and isinstance(e.get('data_offsets'), list)
            and len(e['data_offsets']) == 2 and all(Range(int, 0).holds(o) for o in e['data_offsets'])):
        raise UserError(f"{path}: tensor {short(name)} lacks a dtype microgpt reads ({', '.join(DTYPES)}), "
                        "a shape or two data offsets: the file is damaged, or not one microgpt reads")
    begin, end = e['data_offsets']
    if end - begin != DTYPES[e['dtype']][1] * math.prod(e['shape']):
        raise UserError(f"{path}: tensor {short(name)}'s offsets do not span its shape {e['shape']}: "
                        "the header is damaged")
    return Entry(e['dtype'], tuple(e['shape']), begin, end)


def read_tensor(f, path, name, entry, data_start):
    """Tensor `name`'s numbers as one flat array of float64, whatever dtype it is stored in."""
    f.seek(data_start + entry.begin)
    raw = f.read(entry.end - entry.begin)
    if len(raw) != entry.end - entry.begin:
        raise UserError(f"{path} is truncated in tensor {short(name)}: retrain it or restore a copy")
    typecode, _ = DTYPES[entry.dtype]
    if typecode is None:  # BF16: the upper two bytes of a float32, so put two zero bytes below
        wide = bytearray(2 * len(raw))
        wide[2::4], wide[3::4] = raw[0::2], raw[1::2]
        raw, typecode = wide, 'f'
    if typecode == 'e':  # F16: array has no typecode for it; struct reads it, one at a time
        return array('d', (x for (x,) in struct.iter_unpack('<e', raw)))
    numbers = array(typecode)
    numbers.frombytes(raw)
    if sys.byteorder == 'big':
        numbers.byteswap()
    return numbers if typecode == 'd' else array('d', numbers)
