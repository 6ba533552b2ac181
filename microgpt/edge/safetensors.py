"""
safetensors, written and read with the standard library: the binary format the ecosystem keeps
weights in. This file knows the container; what a checkpoint puts in it is checkpoint.py's.

    8 bytes   N, the length of the header, an unsigned little-endian integer
    N bytes   JSON: {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {str: str}}
    the rest  every tensor's numbers back to back, little-endian, row after row

Reading is in two steps, so that nothing is allocated before the file is known to be what it
claims: `read_header` checks every way a header can lie (a length past the file, a dtype it does
not know, sizes that disagree with shapes, tensors that overlap or leave gaps), and only then
`read_tensor` reads one tensor into an array of float64 (8 bytes a number, not a Python float
each). It reads F64, F32, F16 and BF16, and writes F64, so a resumed run continues bit for bit.
"""

import json
import struct
import sys
from array import array
from typing import NamedTuple

from .checks import Range, short
from .errors import UserError
from .files import read_head
from .files import parse_json
from .limits import MAX_SAFETENSORS_HEADER, MAX_TENSOR_DIMS

EXTENSION = '.safetensors'
# dtype -> (array typecode, bytes per number); BF16 has none: it is the upper half of a float32
DTYPES = {'F64': ('d', 8), 'F32': ('f', 4), 'F16': ('e', 2), 'BF16': (None, 2)}


class Entry(NamedTuple):
    """One tensor as the header describes it; begin and end count from the end of the header."""
    dtype: str
    shape: tuple
    begin: int
    end: int


def file_bytes(n_numbers, n_rows, vocab_size):
    """The most bytes a checkpoint of n_numbers float64s can take: 8 each, plus a header of
    at most 96 bytes per tensor (one per matrix; its rows cost nothing), and the vocabulary in
    the metadata (a character escaped twice, as a JSON string inside a JSON string, is at most
    26 bytes with its separator), and 8 KiB for the rest of the metadata."""
    n_tensors = n_rows  # a bound: a matrix has at least one row
    return 8 * n_numbers + 96 * n_tensors + 26 * vocab_size + 8192


# ---------------------------------------------------------------------------- writing
def write(f, tensors, metadata):
    """Write {name: (shape, rows)} (rows: a matrix's rows, or a flat sequence of numbers) as
    float64, with metadata {str: str}, to the binary file f."""
    header, offset = {'__metadata__': metadata}, 0
    for name, (shape, _) in tensors.items():
        size = 8 * _count(shape)
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
    """(metadata {str: str}, {name: Entry} in file order, where the data starts) of the open
    file f of `size` bytes, every entry checked against the file; or a one-line UserError."""
    head = f.read(8)
    if len(head) < 8:
        raise UserError(f"{path} is {len(head)} bytes long, too short for a safetensors file "
                        "(8-byte header length first): it is truncated or not safetensors")
    n = struct.unpack('<Q', head)[0]
    if n > min(MAX_SAFETENSORS_HEADER, size - 8):
        raise UserError(f"{path}: its first 8 bytes give a header of {n:,} bytes, but the file holds "
                        f"{size - 8:,} after them: it is truncated, or not a safetensors file")
    header = _parse_header(path, f.read(n))
    metadata = header.pop('__metadata__', None) or {}
    return metadata, _check_entries(path, header, size - 8 - n), 8 + n


def read_tensor(f, path, name, entry, data_start):
    """Tensor `name`'s numbers as one flat array of float64, whatever dtype it is stored in."""
    f.seek(data_start + entry.begin)
    raw = f.read(entry.end - entry.begin)
    if len(raw) != entry.end - entry.begin:  # the file shrank while we read it
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


def header_metadata(path):
    """The metadata of a .safetensors file, or None if it is not one (never an error): what a
    writer asks before replacing a file. The header is parsed whole, so that metadata written
    by any program (the safetensors library sorts its keys) is read."""
    head = read_head(path, 8)
    if head is None or len(head) < 8:
        return None
    n = struct.unpack('<Q', head)[0]
    if n > MAX_SAFETENSORS_HEADER:
        return None
    try:
        header = json.loads(read_head(path, 8 + n)[8:].decode('utf-8'))
        metadata = header.get('__metadata__')
    except (ValueError, RecursionError, AttributeError, TypeError):
        return None
    return metadata if isinstance(metadata, dict) else None


def _parse_header(path, raw):
    try:
        text = raw.decode('utf-8')
    except UnicodeDecodeError:
        raise UserError(f"{path}: the safetensors header is not UTF-8 text: the file is damaged") from None
    header = parse_json(text, f"{path}: the safetensors header", "the file is damaged")
    if not isinstance(header, dict):
        raise UserError(f"{path}: the safetensors header is not a JSON object: the file is damaged")
    metadata = header.get('__metadata__')
    if metadata is not None and not (isinstance(metadata, dict)
                                     and all(isinstance(v, str) for v in metadata.values())):
        raise UserError(f"{path}: the safetensors metadata must map names to strings: the file is damaged")
    return header


def _check_entries(path, header, data_bytes):
    """{name: Entry} in file order, after checking that the tensors tile the data exactly:
    sizes that match their shapes, no overlap, no gap, no excess."""
    entries = []
    for name, e in header.items():
        if not (isinstance(e, dict) and isinstance(e.get('dtype'), str) and isinstance(e.get('shape'), list)
                and all(Range(int, 0).holds(d) for d in e['shape']) and isinstance(e.get('data_offsets'), list)
                and len(e['data_offsets']) == 2 and all(Range(int, 0).holds(o) for o in e['data_offsets'])):
            raise UserError(f"{path}: tensor {short(name)} lacks a dtype, a shape of counts or two data "
                            "offsets in the header: the file is damaged")
        shape = tuple(e['shape'])
        if len(shape) > MAX_TENSOR_DIMS or 0 in shape:
            raise UserError(f"{path}: tensor {short(name)} has shape {short(list(shape))}: microgpt reads "
                            f"tensors of at most {MAX_TENSOR_DIMS} dimensions, none of them 0")
        if e['dtype'] not in DTYPES:
            raise UserError(f"{path}: tensor {short(name)} has dtype {short(e['dtype'])}, which microgpt "
                            f"does not read ({', '.join(DTYPES)}): convert it to F64 or F32")
        begin, end = e['data_offsets']
        size = DTYPES[e['dtype']][1] * _count(shape)
        if end - begin != size:
            raise UserError(f"{path}: tensor {short(name)} has shape {list(shape)} of {e['dtype']}, "
                            f"{size:,} bytes, but its offsets span {end - begin:,}: the header is damaged")
        entries.append((name, Entry(e['dtype'], shape, begin, end)))
    entries.sort(key=lambda item: item[1].begin)
    at = 0
    for name, entry in entries:
        if entry.begin != at:
            raise UserError(f"{path}: tensor {short(name)} starts at byte {entry.begin:,} of the data, "
                            f"where the tensors before it end at {at:,} (they "
                            f"{'overlap' if entry.begin < at else 'leave a gap'}): the header is damaged")
        at = entry.end
    if at != data_bytes:
        raise UserError(f"{path}: the header's tensors take {at:,} bytes but the file holds {data_bytes:,} "
                        f"after the header: it is {'truncated' if at > data_bytes else 'damaged'}")
    return dict(entries)


def _count(shape):
    n = 1
    for d in shape:
        n *= d
    return n
