"""Paddle's LoDTensor stream: the per-variable tensor files and combined ``__params__`` /
``*.pdiparams`` files (layout in ``docs/file_formats.md``).

One stream, all integers little-endian::

    u32 version (0) | u64 lod_levels L | L x (u64 nbytes B, B/8 x u64 offsets)
    | u32 tensor version (0) | i32 D | D bytes VarType.TensorDesc protobuf | data (C order)

A combined file is the streams of its variables back to back, in sorted name order, with no
names or count: the reader must know the variable list, and the last stream ends at EOF.

Every size field is checked against the bytes that remain before anything is allocated, so a
lying header can never make the reader allocate more than the file holds.
"""
from __future__ import annotations

import math
import struct
import sys
from typing import List, Optional, Sequence, Tuple

import numpy as np

from ...core.dtypes import VarType
from .proto import messages
from .program import PaddleFormatError

__all__ = ["tensor_to_bytes", "combined_to_bytes", "read_tensor", "read_combined",
           "looks_like_tensor", "is_foreign", "shape_problem", "MAX_DIMS"]

_DTYPES = {0: np.dtype(np.bool_), 1: np.dtype(np.int16), 2: np.dtype(np.int32),
           3: np.dtype(np.int64), 4: np.dtype(np.float16), 5: np.dtype(np.float32),
           6: np.dtype(np.float64), 20: np.dtype(np.uint8), 21: np.dtype(np.int8)}
_CODES = {v: k for k, v in _DTYPES.items()}
_MAX_LOD_LEVELS = 64
_MAX_DESC = 1 << 16
# NumPy 1.x's NPY_MAXDIMS (NumPy 2 allows 64); Paddle's own DDim holds at most 9
MAX_DIMS = 32


def shape_problem(shape: Sequence[int], itemsize: int) -> Optional[str]:
    """Why ``shape`` read from a file cannot be an array of ``itemsize``-byte elements, or
    None: more than ``MAX_DIMS`` dims, a negative dim, or non-zero dims that multiply past
    the largest array NumPy can address (NumPy refuses ``[0, 2**62]`` although it holds no
    byte). Checked before anything is allocated.

    Example:
        >>> shape_problem([0, 2**62], 4)
        'dims [0, 4611686018427387904] exceed the largest array NumPy can address'
    """
    if len(shape) > MAX_DIMS:
        return f"{len(shape)} dims; at most {MAX_DIMS} are accepted"
    if any(d < 0 for d in shape):
        return f"negative dims {list(shape)}"
    if math.prod(max(d, 1) for d in shape) * itemsize > sys.maxsize:
        return f"dims {list(shape)} exceed the largest array NumPy can address"
    return None


def is_foreign(head: bytes) -> bool:
    """True when ``head`` (a file's first bytes) is neither a ``.npy`` nor a zip (``.npz``)
    file: a tensor file is then read as a Paddle stream, so a damaged one gets the stream's
    own error (wrong version, sizes) rather than "not a .npy file"."""
    return not head.startswith(b"\x93NUMPY") and not head.startswith(b"PK")


def looks_like_tensor(head: bytes) -> bool:
    """True when ``head`` (a file's first bytes) starts a Paddle tensor stream (version 0,
    then a plausible LoD level count) rather than a ``.npy`` or zip file."""
    return len(head) >= 12 and head[:4] == b"\0\0\0\0" and \
        int.from_bytes(head[4:12], "little") <= _MAX_LOD_LEVELS


def tensor_to_bytes(arr: np.ndarray, lod: Optional[Sequence[Sequence[int]]] = None) -> bytes:
    """One tensor stream of ``arr`` (with LoD offsets ``lod``, outermost level first)."""
    arr = np.asarray(arr)           # not ascontiguousarray: it makes 0-D tensors 1-D
    code = _CODES.get(arr.dtype)
    if code is None:
        raise PaddleFormatError(f"Paddle's tensor format has no code for dtype {arr.dtype}")
    parts = [struct.pack("<IQ", 0, len(lod or ()))]
    for level in lod or ():
        offs = np.asarray(level, dtype="<u8")
        parts.append(struct.pack("<Q", offs.nbytes))
        parts.append(offs.tobytes())
    desc = messages()["VarType"].TensorDesc(data_type=code, dims=list(arr.shape))
    dbytes = desc.SerializeToString(deterministic=True)
    parts.append(struct.pack("<Ii", 0, len(dbytes)))
    parts.append(dbytes)
    parts.append(arr.astype(arr.dtype.newbyteorder("<"), copy=False).tobytes(order="C"))
    return b"".join(parts)


def combined_to_bytes(arrays: dict, lods: Optional[dict] = None) -> bytes:
    """A combined file: the streams of ``arrays`` in sorted name order, each with its LoD
    from ``lods`` (name -> offsets; issue 15) when given."""
    lods = lods or {}
    return b"".join(tensor_to_bytes(arrays[name], lods.get(name)) for name in sorted(arrays))


def read_tensor(buf: bytes, offset: int, source: str, name: str
                ) -> Tuple[np.ndarray, List[List[int]], int]:
    """``(array, lod, end offset)`` of the stream at ``offset`` in ``buf``. The array shares
    ``buf``'s memory. Raises ``PaddleFormatError`` naming ``source`` and variable ``name``."""
    from google.protobuf.message import DecodeError
    size = len(buf)
    what = f"variable '{name}' in {source}"

    def need(n: int, field: str) -> None:
        if n < 0 or offset + n > size:
            raise PaddleFormatError(f"Cannot load {what}: the file is truncated or corrupted "
                                    f"({field} needs {n} bytes at offset {offset}, the file "
                                    f"has {size - offset} left)")

    need(12, "the header")
    version, levels = struct.unpack_from("<IQ", buf, offset)
    if version != 0:
        raise PaddleFormatError(f"Cannot load {what}: unsupported tensor version {version} "
                                f"(Paddle writes 0)")
    if levels > _MAX_LOD_LEVELS:
        raise PaddleFormatError(f"Cannot load {what}: corrupted header ({levels} LoD levels)")
    offset += 12
    lod: List[List[int]] = []
    for _ in range(levels):
        need(8, "a LoD level size")
        (nbytes,) = struct.unpack_from("<Q", buf, offset)
        offset += 8
        if nbytes % 8:
            raise PaddleFormatError(f"Cannot load {what}: corrupted LoD level of {nbytes} "
                                    f"bytes")
        need(nbytes, "a LoD level")
        lod.append([int(x) for x in np.frombuffer(buf, "<u8", nbytes // 8, offset)])
        offset += nbytes
    need(8, "the tensor header")
    tversion, dsize = struct.unpack_from("<Ii", buf, offset)
    if tversion != 0:
        raise PaddleFormatError(f"Cannot load {what}: unsupported tensor version {tversion} "
                                f"(Paddle writes 0)")
    offset += 8
    if dsize > _MAX_DESC:
        raise PaddleFormatError(f"Cannot load {what}: corrupted tensor description size "
                                f"{dsize}")
    need(dsize, "the tensor description")
    desc = messages()["VarType"].TensorDesc()
    try:
        desc.ParseFromString(bytes(buf[offset:offset + dsize]))
    except DecodeError as e:
        raise PaddleFormatError(f"Cannot load {what}: corrupted tensor description "
                                f"({e})") from None
    offset += dsize
    dtype = _DTYPES.get(desc.data_type)
    if dtype is None:
        try:
            label = VarType(desc.data_type).name
        except ValueError:
            label = str(desc.data_type)
        raise PaddleFormatError(f"Cannot load {what}: unknown or unsupported data type "
                                f"{label} (code {desc.data_type})")
    shape = tuple(int(d) for d in desc.dims)
    problem = shape_problem(shape, dtype.itemsize)
    if problem:
        raise PaddleFormatError(f"Cannot load {what}: corrupted tensor description "
                                f"({problem})")
    count = math.prod(shape)
    need(count * dtype.itemsize, f"a {dtype.name} tensor of shape {list(shape)}")
    arr = np.frombuffer(buf, dtype.newbyteorder("<"), count, offset).reshape(shape)
    if arr.dtype != dtype:
        arr = arr.astype(dtype)
    return arr, lod, offset + count * dtype.itemsize


def read_combined(buf: bytes, names: Optional[Sequence[str]], source: str,
                  lods: Optional[dict] = None) -> List[Tuple[str, np.ndarray]]:
    """The tensors of a combined file, paired with ``sorted(names)``; the file must hold
    exactly that many streams and end with the last one. A non-empty LoD read for a
    variable is stored in ``lods[name]`` when ``lods`` is given (issue 15)."""
    if names is None:
        raise PaddleFormatError(f"{source} is a Paddle combined parameter file, which holds no "
                                f"variable names: pass the program or var_list to read it")
    order = sorted(names)
    if order and bytes(buf[:4]) != b"\0\0\0\0":
        raise PaddleFormatError(f"Cannot load variable '{order[0]}': {source} is not a "
                                f"combined checkpoint (neither Paddle tensor streams, which "
                                f"start with version 0, nor a fluidlite .npz)")
    out = []
    offset = 0
    for name in order:
        if offset >= len(buf):
            raise PaddleFormatError(f"Cannot load variable '{name}': {source} ends after "
                                    f"{len(out)} of the {len(order)} variables expected "
                                    f"(missing parameter)")
        arr, lod, offset = read_tensor(buf, offset, source, name)
        if lod and lods is not None:
            lods[name] = lod
        out.append((name, arr))
    if offset != len(buf):
        raise PaddleFormatError(f"{source} holds {len(buf) - offset} bytes after the "
                                f"{len(order)} variables expected ({', '.join(order[:5])}"
                                f"{'...' if len(order) > 5 else ''}): it was saved for "
                                f"another variable list, or is corrupted")
    return out
