"""
safetensors, written and read with the standard library: the binary format the ecosystem keeps
weights in, for checkpoints too large for JSON.

A .safetensors file is three parts:

    8 bytes   N, the length of the header, an unsigned little-endian integer
    N bytes   a JSON object: {name: {"dtype": "F64", "shape": [n_out, n_in],
                                     "data_offsets": [begin, end]}, ...,
                              "__metadata__": {string: string}}
    the rest  every tensor's numbers back to back, little-endian, row after row; tensor `name`
              is the bytes [begin, end) counted from the end of the header

A microgpt checkpoint in it (checkpoint.py chooses this format for a path ending in
.safetensors) holds the state_dict under microgpt's names, float64 [n_out, n_in]; the
training state's Adam moments as two more tensors, `adam.m` and `adam.v`, flat in GPT.params
order; and in the metadata, as JSON text, what JSON checkpoints hold beside the weights: format,
version, config, vocab, and the rest of train_state. `checkpoint_dict` turns a file back into
the very dictionary a JSON checkpoint parses to, so checkpoint.py validates both alike.

Every way a file can lie is one line here before a number is read: a header length past the
file, a header that is not a JSON object, a dtype this reader does not know, a shape whose
size disagrees with its offsets, tensors that overlap, leave gaps, or run past the end of the
file. It reads F64, F32, F16 and BF16 tensors (a library may have written any of them) and
writes F64, so a resumed run continues bit for bit. Pure standard library, like microgpt/.
"""

import json
import os
import stat
import struct
import sys
from array import array

from .errors import UserError
from .files import read_head
from .jsonio import parse_json

EXTENSION = '.safetensors'
MAX_BYTES = 1 << 31          # 2 GiB: a model's weights and Adam moments at 24 bytes a parameter,
                             # about 89M parameters; a file is read whole into Python floats
MAX_HEADER_BYTES = 100_000_000  # what the safetensors library itself accepts
# dtype -> (array or struct typecode, bytes per number); BF16 has none: the upper half of a float32
DTYPES = {'F64': ('d', 8), 'F32': ('f', 4), 'F16': ('e', 2), 'BF16': (None, 2)}
ADAM_TENSORS = ('adam.m', 'adam.v')
MAX_DIMS = 8  # microgpt's tensors have 1 or 2; other programs' weights have up to 5 or so


# ---------------------------------------------------------------------------- sizes
def file_bytes(n_numbers, n_rows, vocab_size):
    """The most bytes a checkpoint of n_numbers float64s can take: 8 each, plus a header of
    at most 96 bytes per tensor (one per matrix; its rows cost nothing), and the vocabulary in
    the metadata (a character escaped twice, as a JSON string inside a JSON string, is at most
    26 bytes with its separator), and 8 KiB for the rest of the metadata."""
    n_tensors = n_rows  # a bound: a matrix has at least one row
    return 8 * n_numbers + 96 * n_tensors + 26 * vocab_size + 8192


# ---------------------------------------------------------------------------- writing
def write(f, tensors, metadata):
    """Write {name: (shape, rows)} (rows: a matrix [[float]] or a flat [float]) as float64,
    with metadata {str: str}, to the binary file f."""
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
        numbers = array('d')
        if len(shape) == 2:
            for row in rows:
                numbers.extend(row)
        else:
            numbers.extend(rows)
        if sys.byteorder == 'big':  # the format is little-endian everywhere
            numbers.byteswap()
        f.write(numbers.tobytes())


def checkpoint_tensors(ckpt):
    """A checkpoint dictionary (checkpoint.checkpoint_dict's) as (tensors, metadata) for write()."""
    config = ckpt['config']
    tensors = {name: ((len(m), len(m[0]) if m else 0), m) for name, m in ckpt['state_dict'].items()}
    train_state = ckpt['train_state']
    if train_state is not None and 'adam' in train_state:
        adam = dict(train_state['adam'])
        for name in ADAM_TENSORS:
            tensors[name] = ((len(adam[name[-1]]),), adam.pop(name[-1]))
        train_state = {**train_state, 'adam': adam}  # t stays in the metadata
    metadata = {'format': ckpt['format'], 'version': json.dumps(ckpt['version']),
                'config': json.dumps(config), 'vocab': json.dumps(ckpt['vocab']),
                'train_state': json.dumps(train_state, allow_nan=False),
                'data_mode': ckpt.get('data_mode', 'lines')}  # names or running text (checkpoint.py checks it)
    return tensors, metadata


# ---------------------------------------------------------------------------- reading
def read(path):
    """(tensors {name: nested lists of float, shaped as stored}, metadata {str: str}) from a
    .safetensors file, or a one-line UserError saying what is wrong with it."""
    with _open(path) as f:
        size = os.fstat(f.fileno()).st_size
        if size > MAX_BYTES:
            raise UserError(f"{path} is {size:,} bytes, more than the {MAX_BYTES >> 20:,} MiB microgpt "
                            "reads as safetensors: is it really a checkpoint?")
        head = f.read(8)
        if len(head) < 8:
            raise UserError(f"{path} is {len(head)} bytes long, too short for a safetensors file "
                            "(8-byte header length first): it is truncated or not safetensors")
        n = struct.unpack('<Q', head)[0]
        if n > min(MAX_HEADER_BYTES, size - 8):
            raise UserError(f"{path}: its first 8 bytes give a header of {n:,} bytes, but the file holds "
                            f"{size - 8:,} after them: it is truncated, or not a safetensors file")
        header = _parse_header(path, f.read(n))
        entries = _check_entries(path, header, size - 8 - n)
        tensors = {}
        for name, (typecode, width, shape, begin, end) in entries:
            raw = f.read(end - begin)
            if len(raw) != end - begin:  # the file shrank while we read it
                raise UserError(f"{path} is truncated in tensor {name}: retrain it or restore a copy")
            tensors[name] = _unflatten(_numbers(raw, typecode), shape)
    return tensors, header.get('__metadata__') or {}


def checkpoint_dict(path):
    """The checkpoint dictionary a JSON checkpoint of the same run parses to (format, version,
    config, vocab, state_dict, train_state), from a .safetensors file: checkpoint.py validates
    it from there on as it validates JSON."""
    tensors, metadata = read(path)
    if metadata.get('format') is None or 'config' not in metadata:
        raise UserError(f"{path} holds tensors but no microgpt metadata (format, config, vocab): it is "
                        "not a microgpt checkpoint; microgpt reads the .safetensors files it writes")
    ckpt = {'format': metadata['format']}
    if 'data_mode' in metadata:  # a plain string; absent from files written before running text
        ckpt['data_mode'] = metadata['data_mode']
    for key in ('version', 'config', 'vocab', 'train_state'):
        if key in metadata:
            ckpt[key] = parse_json(metadata[key], f"{path}: the metadata's {key}")
    train_state = ckpt.get('train_state')
    adam = [name for name in ADAM_TENSORS if name in tensors]
    if adam:
        if len(adam) != 2 or not (isinstance(train_state, dict) and isinstance(train_state.get('adam'), dict)):
            raise UserError(f"{path} has {' and '.join(adam)} but not the rest of Adam's state: "
                            "it cannot be resumed; start a new run with --init")
        ckpt['train_state'] = {**train_state, 'adam': {**train_state['adam'],
                                                       'm': tensors.pop('adam.m'), 'v': tensors.pop('adam.v')}}
    ckpt['state_dict'] = tensors
    return ckpt


def is_ours(path, fmt):
    """True if path starts like a .safetensors checkpoint microgpt wrote: its header's first
    entry is the metadata, and its first field names the format `fmt`. Reads 64 bytes at most."""
    head = read_head(path, 64)
    return head is not None and head[8:].startswith(b'{"__metadata__":{"format":"' + fmt.encode() + b'"')


def _open(path):
    """The file, opened for reading, if it is a regular file (a pipe would block, a device
    read forever); the same refusals as errors.read_user_file's, in one line each."""
    hint = f"train one first with `python train.py --out {path}`"
    try:
        mode = os.stat(path).st_mode  # before opening: opening a named pipe would block
        if stat.S_ISDIR(mode):
            raise UserError(f"checkpoint {path} is a directory: give the file itself")
        if not stat.S_ISREG(mode):
            raise UserError(f"checkpoint {path} is not a regular file (a device, pipe or socket): give a file")
        f = open(path, 'rb')
    except FileNotFoundError:
        raise UserError(f"checkpoint {path} does not exist: {hint}") from None
    except OSError as e:
        raise UserError(f"cannot read checkpoint {path}: {e.strerror}") from None
    except ValueError:
        raise UserError(f"checkpoint path {path!r} contains a NUL character") from None
    if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):  # replaced since the stat
        f.close()
        raise UserError(f"checkpoint {path} is not a regular file: give a file")
    return f


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
    """[(name, (typecode, width, shape, begin, end))] in file order, after checking that the
    tensors tile the data exactly: sizes that match their shapes, no overlap, no gap, no excess."""
    entries = []
    for name, e in header.items():
        if name == '__metadata__':
            continue
        if not (isinstance(e, dict) and isinstance(e.get('dtype'), str) and isinstance(e.get('shape'), list)
                and all(_is_count(d) for d in e['shape']) and isinstance(e.get('data_offsets'), list)
                and len(e['data_offsets']) == 2 and all(_is_count(o) for o in e['data_offsets'])):
            raise UserError(f"{path}: tensor {name!r} lacks a dtype, a shape of counts or two data "
                            "offsets in the header: the file is damaged")
        if len(e['shape']) > MAX_DIMS or 0 in e['shape']:
            raise UserError(f"{path}: tensor {name!r} has shape {e['shape'][:MAX_DIMS + 1]}: microgpt reads "
                            f"tensors of at most {MAX_DIMS} dimensions, none of them 0")
        if e['dtype'] not in DTYPES:
            raise UserError(f"{path}: tensor {name!r} has dtype {e['dtype'][:20]!r}, which microgpt "
                            f"does not read ({', '.join(DTYPES)}): convert it to F64 or F32")
        typecode, width = DTYPES[e['dtype']]
        begin, end = e['data_offsets']
        if end - begin != width * _count(e['shape']):
            raise UserError(f"{path}: tensor {name!r} has shape {e['shape']} of {e['dtype']}, "
                            f"{width * _count(e['shape']):,} bytes, but its offsets span {end - begin:,}: "
                            "the header is damaged")
        entries.append((name, (typecode, width, e['shape'], begin, end)))
    entries.sort(key=lambda entry: entry[1][3])
    at = 0
    for name, (_, _, _, begin, end) in entries:
        if begin != at:
            raise UserError(f"{path}: tensor {name!r} starts at byte {begin:,} of the data, where the "
                            f"tensors before it end at {at:,} (they {'overlap' if begin < at else 'leave a gap'}): "
                            "the header is damaged")
        at = end
    if at != data_bytes:
        raise UserError(f"{path}: the header's tensors take {at:,} bytes but the file holds {data_bytes:,} "
                        f"after the header: it is {'truncated' if at > data_bytes else 'damaged'}")
    return entries


def _is_count(x):
    return isinstance(x, int) and not isinstance(x, bool) and x >= 0


def _count(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def _numbers(raw, typecode):
    """The floats in raw little-endian bytes of one dtype."""
    if typecode == 'e':  # F16: array has no typecode for it, struct has
        return list(struct.unpack(f'<{len(raw) // 2}e', raw))
    if typecode is None:  # BF16: the upper two bytes of a float32, so put two zero bytes below
        wide = bytearray(2 * len(raw))
        wide[2::4], wide[3::4] = raw[0::2], raw[1::2]
        raw, typecode = bytes(wide), 'f'
    numbers = array(typecode)
    numbers.frombytes(raw)
    if sys.byteorder == 'big':
        numbers.byteswap()
    return numbers.tolist()


def _unflatten(flat, shape):
    """A flat list as nested lists of `shape` (a matrix as its rows); shape has at most
    MAX_DIMS dimensions, none 0 (_check_entries), so this builds no more lists than numbers."""
    if len(shape) <= 1:
        return flat
    step = _count(shape[1:])
    return [_unflatten(flat[i * step:(i + 1) * step], shape[1:]) for i in range(shape[0])]
