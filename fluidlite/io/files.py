"""The files of ``fluid.io``: formats of variable files (Paddle LoDTensor streams or ``.npy``),
combined files, the LoD sidecar, and the checks every loader runs before it allocates."""
from __future__ import annotations

import ast
import io as _io
import json
import logging
import math
import os
import zipfile
import zlib
from typing import IO, Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple
import numpy as np
from ..formats import checkpoint
from ..core import scope as scope_mod
from ..formats.checkpoint import CheckpointError
from ..core.dtypes import VarType, to_numpy_dtype
from ..core.ir import Parameter, Program, Variable, default_main_program
from ..formats.serialize import dumps_program
from ..formats import paddle as paddle_format


_log = logging.getLogger("fluidlite")
_MODEL = "__model__"
_NOT_SAVED = (VarType.FEED_MINIBATCH, VarType.FETCH_LIST, VarType.READER, VarType.RAW)
# issue 18: "paddle" (default) writes what fluid 1.8 writes: a ProgramDesc protobuf and
# LoDTensor-stream tensor files; "json" writes fluidlite's JSON program and .npy / .npz files.
# Loaders read both, whatever the format argument.
SAVE_FORMATS = ("paddle", "json")


def _check_format(format: str) -> str:
    if format not in SAVE_FORMATS:
        raise ValueError(f"format must be one of {SAVE_FORMATS}, got {format!r}")
    return format


def _program_bytes(program: Program, format: str) -> bytes:
    if format == "json":
        return dumps_program(program).encode("utf-8") + b"\n"
    return paddle_format.program_to_bytes(program)


# -- helpers ----------------------------------------------------------------------------------
def _program(main_program: Optional[Program]) -> Program:
    if main_program is None:
        return default_main_program()
    inner = getattr(main_program, "_program", None)
    if isinstance(inner, Program):          # a CompiledProgram, accepted as fluid 1.8 did
        _log.warning("The input is a CompiledProgram, this is not recommended; its Program is "
                     "used.")
        return inner
    if not isinstance(main_program, Program):
        raise TypeError(f"The type of input main_program is invalid, expected type is "
                        f"fluid.Program, but received {type(main_program)}")
    return main_program


def _select(program: Program, vars: Any, predicate: Optional[Callable]) -> List[Variable]:
    if vars is not None:
        if isinstance(vars, (Variable, str)):
            vars = [vars]
        out = []
        for v in vars:
            if isinstance(v, str):
                found = program.global_block()._find_var_recursive(v)
                if found is None:
                    raise ValueError(f"variable '{v}' is not in the program")
                v = found
            elif not isinstance(v, Variable):
                raise TypeError(f"vars must hold Variables or names, got {type(v).__name__}")
            out.append(v)
    else:
        out = [v for v in program.list_vars() if predicate is None or predicate(v)]
    seen, unique = set(), []
    for v in out:
        if v.type in _NOT_SAVED or v.name in seen:
            continue
        seen.add(v.name)
        unique.append(v)
    return unique


def _file_name(name: str) -> str:
    """A variable's file name: its name, a path relative to the directory when the name has
    ``/`` in it (fluid 1.8 saved ``block1/conv/w`` into sub-directories); names that would
    escape the directory are refused."""
    try:
        checkpoint._check_name(name)
    except ValueError as e:
        raise ValueError(f"variable name '{name}' cannot be used as a checkpoint file name: "
                         f"{e.args[0]}; save it in a combined file (filename=...) instead") \
            from None
    return name


def _scope() -> scope_mod.Scope:
    return scope_mod.global_scope()


def _value(scope: scope_mod.Scope, name: str) -> np.ndarray:
    v = scope.find_var(name)
    if v is None or not v.is_initialized():
        raise RuntimeError(f"Cannot save variable '{name}': it has no value in the scope. Run "
                           f"the startup program (exe.run(fluid.default_startup_program())) or "
                           f"load it before saving.")
    return np.asarray(v.get_tensor())


# issue 15: LoD in checkpoints. Paddle's streams hold each tensor's LoD themselves; the
# "json" format keeps the LoD of the variables that have one in a small JSON sidecar,
# {"<name>": [[offsets of level 0], ...]}: the file LOD_SIDECAR next to the .npy files, or
# the member LOD_SIDECAR of the .npz. Written only when some saved variable has a LoD.
LOD_SIDECAR = "__lod__.json"


def _scope_lods(scope: scope_mod.Scope, names: Sequence[str]) -> Dict[str, List[List[int]]]:
    """{name: LoD} of the variables among ``names`` whose scope tensor has a LoD."""
    out = {}
    for name in names:
        v = scope.find_var(name)
        lod = v.get_tensor().lod() if v is not None else None
        if lod:
            out[name] = lod
    return out


def _lod_json(lods: Dict[str, List[List[int]]]) -> bytes:
    return json.dumps({n: lods[n] for n in sorted(lods)}, sort_keys=True).encode()


def _parse_lod_json(data: bytes, source: str) -> Dict[str, List[List[int]]]:
    """The sidecar's {name: LoD}, every level checked to be non-decreasing ints from 0."""
    try:
        raw = json.loads(bytes(data).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise CheckpointError(f"the LoD sidecar {source} is not valid JSON ({e})") from None
    ok = isinstance(raw, dict) and all(
        isinstance(lod, list) and all(
            isinstance(level, list) and level and level[0] == 0 and
            all(isinstance(x, int) and not isinstance(x, bool) for x in level) and
            all(a <= b for a, b in zip(level[:-1], level[1:])) for level in lod)
        for lod in raw.values())
    if not ok:
        raise CheckpointError(f"the LoD sidecar {source} must map variable names to lists of "
                              f"offset levels starting at 0, e.g. {{\"x\": [[0, 2, 5]]}}")
    return raw


def _npy_bytes(arr: np.ndarray) -> bytes:
    buf = _io.BytesIO()
    np.lib.format.write_array(buf, np.ascontiguousarray(arr), allow_pickle=False)
    return buf.getvalue()


_NPY_MAGIC = b"\x93NUMPY"
_MAX_NPY_HEADER = 1 << 16


class _NpyMeta(NamedTuple):
    shape: Tuple[int, ...]
    dtype: np.dtype
    fortran: bool
    offset: int         # where the data starts
    nbytes: int


def _npy_meta(f: IO[bytes], size: int, what: str, source: str) -> _NpyMeta:
    """Parse the ``.npy`` header at the start of ``f`` (a stream of ``size`` bytes) without
    reading the data, and check that the array it describes fills the rest exactly -- so a
    header claiming a huge shape is refused before anything is allocated."""
    def bad(why: str) -> CheckpointError:
        return CheckpointError(f"Cannot load {what}: {source} is truncated or corrupted "
                               f"({why})")
    head = f.read(10)
    if len(head) < 10 or head[:6] != _NPY_MAGIC:
        raise bad("not a .npy array: the file is too short" if len(head) < 10 and
                  _NPY_MAGIC.startswith(head[:6]) else "not a .npy array: bad magic bytes")
    major = head[6]
    if major == 1:
        hlen, start = int.from_bytes(head[8:10], "little"), 10
    elif major in (2, 3):
        more = f.read(2)
        if len(more) < 2:
            raise bad("the header is cut short")
        hlen, start = int.from_bytes(head[8:10] + more, "little"), 12
    else:
        raise bad(f"unsupported .npy format version {major}")
    if hlen > _MAX_NPY_HEADER or start + hlen > size:
        raise bad(f"the header claims {hlen} bytes")
    raw = f.read(hlen)
    if len(raw) < hlen:
        raise bad("the header is cut short")
    try:
        header = ast.literal_eval(raw.decode("utf-8" if major == 3 else "latin1"))
    except (ValueError, SyntaxError, TypeError, UnicodeDecodeError, MemoryError,
            RecursionError):
        raise bad("unreadable header") from None
    if not isinstance(header, dict) or set(header) != {"descr", "fortran_order", "shape"}:
        raise bad("the header lacks descr / fortran_order / shape")
    shape = header["shape"]
    if not isinstance(shape, tuple) or not all(
            isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
        raise bad(f"bad shape {shape!r}")
    if not isinstance(header["fortran_order"], bool):
        raise bad("bad fortran_order")
    try:
        dtype = np.lib.format.descr_to_dtype(header["descr"])
    except (ValueError, TypeError, KeyError, IndexError):
        raise bad(f"bad dtype {header['descr']!r}") from None
    if dtype.kind not in "biuf" or dtype.hasobject or dtype.names or dtype.subdtype:
        raise CheckpointError(f"Cannot load {what}: {source} holds an array of dtype {dtype}, "
                              f"which is not a tensor dtype")
    problem = paddle_format.shape_problem(shape, dtype.itemsize)
    if problem:
        raise bad(problem)
    nbytes = math.prod(shape) * dtype.itemsize
    offset = start + hlen
    if offset + nbytes != size:
        raise CheckpointError(
            f"Cannot load {what}: {source} is truncated or corrupted: its header describes a "
            f"{dtype.name} array of shape {tuple(shape)} ({nbytes} bytes) but it holds "
            f"{size - offset} bytes of data")
    return _NpyMeta(tuple(shape), dtype, header["fortran_order"], offset, nbytes)


def _npy_array(buf: bytearray, meta: _NpyMeta) -> np.ndarray:
    """The array ``meta`` describes, sharing ``buf``'s memory (writable, no copy)."""
    if meta.nbytes == 0:
        return np.zeros(meta.shape, meta.dtype)
    arr = np.frombuffer(buf, dtype=meta.dtype, count=math.prod(meta.shape), offset=meta.offset)
    return arr.reshape(meta.shape, order="F" if meta.fortran else "C")


def _load_npy(reader: checkpoint.Reader, fname: str, name: str,
              var: Optional[Variable] = None, lods: Optional[Dict[str, Any]] = None
              ) -> np.ndarray:
    """Variable ``name`` from the ``.npy`` file ``fname``: size checked against the manifest
    and the header before reading, checksum after; shape/dtype checked against ``var``."""
    what = f"variable '{name}'"
    source = f"file '{reader.display(fname)}'"

    def inspect(f: IO[bytes], size: int) -> None:      # only for files no manifest covers
        if paddle_format.is_foreign(f.read(12)):
            return      # a Paddle stream: parsed below, every size checked against the file
        f.seek(0)
        meta = _npy_meta(f, size, what, source)
        if var is not None:
            _check_meta(var, meta.shape, meta.dtype, source)
    buf = reader.read_bytes(fname, what, inspect=inspect)
    if paddle_format.is_foreign(bytes(buf[:12])):       # issue 18: a Paddle stream
        arr, lod, end = paddle_format.read_tensor(buf, 0, source, name)
        if lod and lods is not None:        # issue 15: the stream's LoD
            lods[name] = lod
        if end != len(buf):
            raise paddle_format.PaddleFormatError(
                f"Cannot load {what}: {source} holds {len(buf) - end} bytes after the tensor "
                f"(a combined file? pass its name as filename=)")
        if var is not None:
            arr = _fit_scalar(var, arr)
            _check_meta(var, arr.shape, arr.dtype, source)
        return arr
    meta = _npy_meta(_io.BytesIO(bytes(buf[:_MAX_NPY_HEADER + 12])), len(buf), what, source)
    if var is not None:
        _check_meta(var, meta.shape, meta.dtype, source)
    return _npy_array(buf, meta)


def _combined_bytes(arrays: Dict[str, np.ndarray], format: str = "paddle",
                    lods: Optional[Dict[str, Any]] = None) -> bytes:
    if format == "paddle":      # issue 18: Paddle's streams, sorted by name
        return paddle_format.combined_to_bytes(arrays, lods)
    buf = _io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_STORED) as zf:
        for name in sorted(arrays):
            zf.writestr(name + ".npy", _npy_bytes(arrays[name]))
        if lods:                # issue 15: the LoD sidecar member
            zf.writestr(LOD_SIDECAR, _lod_json(lods))
    return buf.getvalue()


def _read_combined(f: IO[bytes], names: Optional[Sequence[str]], source: str,
                   variables: Optional[Dict[str, Variable]] = None,
                   lods: Optional[Dict[str, Any]] = None) -> Dict[str, np.ndarray]:
    """Arrays of ``names`` (all members when None) from the combined file ``f``. Each member's
    header is checked against its declared size (and its variable) before the data is read,
    so a compressed member cannot expand beyond what it declares (no decompression bomb)."""
    head = f.read(12)
    f.seek(0)
    if paddle_format.is_foreign(head):       # issue 18: Paddle's combined file
        raw = f.read()      # the reader already checked its size against memory
        out = {}
        for name, arr in paddle_format.read_combined(raw, names, source, lods):
            var = (variables or {}).get(name)
            if var is not None:
                arr = _fit_scalar(var, arr)
                _check_meta(var, arr.shape, arr.dtype, source)
            out[name] = arr
        return out
    try:
        zf = zipfile.ZipFile(f)
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as e:
        raise CheckpointError(f"{source} is not a fluidlite combined checkpoint or is "
                              f"truncated/corrupted ({e})") from None
    out = {}
    with zf:
        members = {i.filename[:-4]: i for i in zf.infolist() if i.filename.endswith(".npy")}
        wanted = sorted(members) if names is None else list(names)
        total = 0
        sidecar = next((i for i in zf.infolist() if i.filename == LOD_SIDECAR), None)
        if sidecar is not None and lods is not None:        # issue 15
            if sidecar.file_size > _MAX_NPY_HEADER * 64:
                raise CheckpointError(f"the LoD sidecar of {source} claims "
                                      f"{sidecar.file_size} bytes")
            try:
                data = zf.read(sidecar)
            except (zipfile.BadZipFile, zlib.error, OSError, EOFError, ValueError) as e:
                raise CheckpointError(f"{source} is truncated or corrupted ({e})") from None
            lods.update((n, lod) for n, lod in _parse_lod_json(data, f"in {source}").items()
                        if n in wanted)
        for name in wanted:
            what = f"variable '{name}'"
            info = members.get(name)
            if info is None:
                raise CheckpointError(f"Cannot load {what}: it is not in {source} "
                                      f"(the file holds {len(members)} variables)")
            total += info.file_size
            if total > checkpoint.memory_limit():
                raise CheckpointError(
                    f"Cannot load {what}: its entry in {source} claims {info.file_size} bytes "
                    f"uncompressed, more than this machine's memory")
            try:
                with zf.open(info) as m:
                    meta = _npy_meta(m, info.file_size, what, source)
                    var = (variables or {}).get(name)
                    if var is not None:
                        _check_meta(var, meta.shape, meta.dtype, source)
                    buf = bytearray(meta.offset + meta.nbytes)
                    view = memoryview(buf)[meta.offset:]
                    got = 0
                    while got < meta.nbytes:
                        n = m.readinto(view[got:])
                        if not n:
                            raise EOFError("the entry ends early")
                        got += n
                    m.read(1)           # reach the end, where the CRC is checked
            except CheckpointError:
                raise
            except (zipfile.BadZipFile, zlib.error, OSError, EOFError, ValueError,
                    NotImplementedError, RuntimeError) as e:
                raise CheckpointError(f"Cannot load {what}: {source} is truncated or "
                                      f"corrupted ({e})") from None
            except MemoryError:
                raise CheckpointError(f"Cannot load {what}: {source} claims "
                                      f"{info.file_size} bytes, more than can be "
                                      f"allocated") from None
            out[name] = _npy_array(buf, meta)
    return out


def _target(dirname: str, filename: str) -> Tuple[str, str]:
    """(directory, plain name) of ``dirname/filename`` (filename may hold subdirectories)."""
    path = os.path.join(os.fspath(dirname), os.fspath(filename))
    directory, name = os.path.split(path)
    if not name:
        raise ValueError(f"filename {filename!r} has no file name")
    return directory or ".", name


def _fit_scalar(var: Variable, arr: np.ndarray) -> np.ndarray:
    """Issue 18: Paddle 2.x saves one-element state such as ``learning_rate_0`` 0-D where
    fluid 1.x programs declare ``[1]`` (and back); one element fits either way."""
    want = tuple(var.shape)
    if arr.shape == () and want == (1,) or arr.shape == (1,) and want == ():
        return arr.reshape(want)
    return arr


def _check(var: Variable, arr: Any, source: str) -> np.ndarray:
    """Return ``arr`` as an ndarray if it fits ``var`` (shape, dtype), else raise."""
    if not isinstance(arr, np.ndarray):
        raise CheckpointError(f"Cannot load variable '{var.name}': {source} holds a "
                              f"{type(arr).__name__}, not an array")
    arr = _fit_scalar(var, arr)
    _check_meta(var, arr.shape, arr.dtype, source)
    return arr


def _check_meta(var: Variable, shape: Sequence[int], dtype: np.dtype, source: str) -> None:
    """Raise unless an array of ``shape`` and ``dtype`` fits ``var``."""
    if dtype.kind not in "biuf":
        raise CheckpointError(f"Cannot load variable '{var.name}': {source} holds an array of "
                              f"dtype {dtype}, which is not a tensor dtype")
    want = tuple(var.shape)
    got = tuple(shape)
    if want and (len(want) != len(got) or any(w >= 0 and w != g for w, g in zip(want, got))):
        what = "parameter" if isinstance(var, Parameter) else "variable"
        raise CheckpointError(
            f"Shape not matching: the Program requires a {what} with a shape of "
            f"({', '.join(map(str, want))}), while the loaded {what} (namely [ {var.name} ]) has "
            f"a shape of ({', '.join(map(str, got))}) in {source}.")
    if var.dtype is not None and var.type == VarType.LOD_TENSOR:
        try:
            want_dt = to_numpy_dtype(var.dtype)
        except ValueError:
            want_dt = None
        if want_dt is not None and dtype != want_dt:
            raise CheckpointError(
                f"Data type not matching: variable '{var.name}' is {want_dt.name} in the "
                f"program, but {source} holds {dtype.name}. Cast the saved array or fix "
                f"the variable's dtype.")


def _assign(arrays: Dict[str, np.ndarray], lods: Optional[Dict[str, Any]] = None) -> None:
    scope = _scope()
    for name, arr in arrays.items():
        tensor = scope.var(name).get_tensor()
        tensor.set(arr, None)
        if lods is not None:    # issue 15: the loaded tensor carries the file's LoD (or none)
            tensor.set_lod(lods.get(name, []))
