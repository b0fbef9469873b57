"""``fluid.save`` / ``fluid.load`` (``.pdparams`` / ``.pdopt`` / ``.pdmodel``), ``load_program_state``
and ``set_program_state``; pickles are read with a restricted unpickler that only rebuilds
arrays."""
from __future__ import annotations

import math
import os
import pickle
import struct
from typing import Any, Dict, Optional, Sequence, Tuple
import numpy as np
from ..formats import checkpoint
from ..formats.checkpoint import CheckpointError
from ..core.ir import Program, Variable
from ..formats import paddle as paddle_format
from .files import (_assign, _check, _check_format, _file_name, _load_npy, _log, _program_bytes,
                    _read_combined, _scope, _select, _value)
from .variables import (_publish, _read_var_files, _read_vars, is_belong_to_optimizer,
                        is_parameter, is_persistable)


# -- fluid.save / fluid.load ------------------------------------------------------------------
class _ArrayUnpickler(pickle._Unpickler):  # type: ignore[name-defined]
    """Rebuilds numpy arrays and dtypes only; any other global is refused, and every array
    constructor is bounded by the data actually in the file (no pickle bomb). Built on the
    pure-Python unpickler: the C one allocates a counted string's claimed length (up to 4 GiB
    for BINBYTES) and a memo array as long as the largest BINPUT index *before* reading, so a
    300-byte file could make it allocate gigabytes; this one reads through ``_Bounded`` and
    keeps its memo in a dict."""

    def __init__(self, f: Any, source: str, encoding: str = "ASCII") -> None:
        super().__init__(f, encoding=encoding)
        self._source = source

    def find_class(self, module: str, name: str) -> Any:
        allowed = _allowed_globals()
        if (module, name) in allowed:
            return allowed[(module, name)]
        raise CheckpointError(f"{self._source} refers to '{module}.{name}'; fluidlite only "
                              f"loads pickles of numpy arrays, and refuses others because "
                              f"unpickling them can run code")

    def persistent_load(self, pid: Any) -> Any:
        raise CheckpointError(f"{self._source} uses persistent ids; refusing to load it")


class _Bounded:
    """A file view whose ``read(n)`` never asks for more than the file still holds: a pickle
    opcode claiming a 512 MiB string in a 300-byte file would otherwise make the unpickler's
    ``read(n)`` allocate the whole claimed size before finding the file short."""

    def __init__(self, f: Any, size: int) -> None:
        self._f, self._size = f, size

    def read(self, n: int = -1) -> bytes:
        left = max(0, self._size - self._f.tell())
        return self._f.read(left if n is None or n < 0 else min(n, left))

    def readline(self, limit: int = -1) -> bytes:
        return self._f.readline(limit)


class _NdarrayClass:
    """Stands for ``numpy.ndarray`` in a pickle: only ``_reconstruct`` accepts it, so a pickle
    cannot call ``ndarray(shape)`` to allocate an array of any size it likes."""

    def __new__(cls, *args: Any, **kwargs: Any) -> "_NdarrayClass":
        raise CheckpointError(f"refusing to call numpy.ndarray{args!r} from a pickle (numpy's "
                              f"own pickles never do; it can allocate any size)")


class _PickledArray(np.ndarray):
    """The array ``_reconstruct`` makes; its ``__setstate__`` (the pickle's BUILD) checks that
    the state's data has exactly the bytes its shape and dtype need before numpy allocates."""

    def __setstate__(self, state: Any) -> None:
        if not isinstance(state, tuple) or len(state) not in (4, 5):
            raise CheckpointError("malformed array state")
        shape, dtype, data = state[-4], state[-3], state[-1]
        if not isinstance(dtype, np.dtype) or dtype.hasobject or dtype.kind not in "biuf":
            raise CheckpointError(f"refusing to rebuild an array of dtype {dtype!r}")
        if not isinstance(shape, tuple) or not all(
                isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
            raise CheckpointError(f"malformed array shape {shape!r}")
        if not isinstance(data, (bytes, bytearray)) or \
                len(data) != math.prod(shape) * dtype.itemsize:
            raise CheckpointError(f"an array claims shape {shape} of {dtype} "
                                  f"({math.prod(shape) * dtype.itemsize} bytes) but holds "
                                  f"{len(data) if isinstance(data, (bytes, bytearray)) else 0}"
                                  f" bytes")
        super().__setstate__(state)


def _allowed_globals() -> Dict[Tuple[str, str], Any]:
    out: Dict[Tuple[str, str], Any] = {("numpy", "ndarray"): _NdarrayClass,
                                       ("numpy", "dtype"): _dtype,
                                       ("_codecs", "encode"): _latin1_encode}
    for mod in ("numpy.core.multiarray", "numpy._core.multiarray"):
        out[(mod, "_reconstruct")] = _reconstruct
        out[(mod, "scalar")] = _scalar
    for mod in ("numpy.core.numeric", "numpy._core.numeric"):
        out[(mod, "_frombuffer")] = _frombuffer
    return out


def _multiarray() -> Any:
    try:
        from numpy._core import multiarray as ma
    except ImportError:  # numpy < 2
        from numpy.core import multiarray as ma  # type: ignore[no-redef]
    return ma


def _reconstruct(cls: Any, shape: Any, dtype: Any) -> np.ndarray:
    # numpy pickles an array as _reconstruct(ndarray, (0,), b'b') + BUILD(state)
    if cls is not _NdarrayClass or not isinstance(shape, tuple) or \
            not all(isinstance(d, int) and 0 <= d <= 1 for d in shape) or len(shape) > 1:
        raise CheckpointError(f"refusing to start an array of shape {shape!r} (numpy's own "
                              f"pickles start arrays empty and then fill them with their data)")
    return _multiarray()._reconstruct(_PickledArray, shape, dtype)


def _dtype(*args: Any) -> np.dtype:
    # numpy pickles a dtype as dtype(str, False, True); anything else is not numpy's
    if not (1 <= len(args) <= 3 and isinstance(args[0], str)
            and all(isinstance(a, bool) for a in args[1:])):
        raise CheckpointError(f"refusing to rebuild dtype{args!r} (numpy pickles a dtype as "
                              f"dtype(str, bool, bool))")
    dt = np.dtype(*args)
    if dt.hasobject:
        raise CheckpointError(f"refusing to rebuild an array of dtype {dt}")
    return dt


def _scalar(dtype: Any, data: Any = None) -> Any:
    if not isinstance(dtype, np.dtype) or dtype.kind not in "biuf" or dtype.hasobject:
        raise CheckpointError(f"refusing to rebuild a scalar of dtype {dtype!r}")
    return _multiarray().scalar(dtype, data)


def _latin1_encode(text: Any, encoding: str = "utf-8") -> bytes:
    # protocol 2 stores bytes as _codecs.encode(str, 'latin1'); refuse every other codec
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise CheckpointError(f"refusing _codecs.encode(..., {encoding!r})")
    return text.encode("latin1")


def _frombuffer(buf: Any, dtype: Any, shape: Any, order: str) -> np.ndarray:
    # numpy's pickle protocol-5 path: np.core.numeric._frombuffer(buf, dtype, shape, order)
    if not isinstance(dtype, np.dtype) or dtype.kind not in "biuf" or dtype.hasobject:
        raise CheckpointError(f"refusing to rebuild an array of dtype {dtype!r}")
    return np.frombuffer(buf, dtype=dtype).reshape(shape, order=order).copy()


def _load_pickled_dict(reader: checkpoint.Reader, name: str) -> Dict[str, np.ndarray]:
    """A ``{name: ndarray}`` pickle (``.pdparams`` / ``.pdopt``), verified and bounded."""
    source = f"file '{reader.display(name)}'"
    f, size = reader.open_verified(name, "the fluid.save checkpoint")
    with f:
        try:
            data = _ArrayUnpickler(_Bounded(f, size), source).load()
        except CheckpointError as e:
            if str(e).startswith(source):
                raise
            raise CheckpointError(f"{source} is corrupted: {e}") from None
        except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError,
                IndexError, KeyError, UnicodeDecodeError, OverflowError, RecursionError,
                struct.error) as e:
            raise CheckpointError(f"{source} is truncated or corrupted, or not a fluid "
                                  f"checkpoint ({type(e).__name__}: {e})") from None
        except MemoryError:
            raise CheckpointError(f"{source} describes more data than can be allocated; it "
                                  f"is corrupted or not a fluid checkpoint") from None
    if not isinstance(data, dict):
        raise CheckpointError(f"{source} should hold a dict of name -> array, got "
                              f"{type(data).__name__}")
    out = {}
    for k, v in data.items():
        if k == "StructuredToParameterName@@":      # Paddle 2.x dygraph name map
            continue
        if not isinstance(k, str) or not isinstance(v, np.ndarray) or v.dtype.kind not in "biuf":
            raise CheckpointError(f"{source}: entry {k!r} is not a numeric array")
        out[k] = v.view(np.ndarray) if type(v) is not np.ndarray else v
    return out


def _pickle_bytes(arrays: Dict[str, np.ndarray]) -> bytes:
    return pickle.dumps({k: np.ascontiguousarray(v) for k, v in arrays.items()}, protocol=2)


def _strip_suffix(model_path: str) -> str:
    for suffix in (".pdparams", ".pdopt", ".pdmodel"):
        if model_path.endswith(suffix):
            return model_path[:-len(suffix)]
    return model_path


def _split_prefix(model_path: str) -> Tuple[str, str]:
    """(directory, base name) of the ``fluid.save`` prefix in ``model_path``."""
    directory, base = os.path.split(_strip_suffix(model_path))
    return directory or ".", base


def save(program: Program, model_path: str, *, format: str = "paddle") -> None:
    """Write ``model_path.pdparams`` (all Parameters), ``.pdopt`` (optimizer state: the other
    persistables) and ``.pdmodel`` (the program: a ProgramDesc protobuf, or JSON with
    ``format="json"``), all-or-nothing.

    Args:
        program (Program): the program whose parameters and optimizer state to save.
        model_path (str): the path prefix (``model_path.pdparams`` etc.).
        format (str, default "paddle"): ``"paddle"`` or ``"json"`` for the program file.

    Returns:
        None.

    Raises:
        ValueError: ``format`` is unknown, or ``model_path`` ends with a separator (no file name).
        TypeError: ``program`` is not a Program.
        RuntimeError: a parameter or optimizer variable has no value in the scope (run the startup
            program first).
        OSError: the directory cannot be created or written.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> import os, tempfile
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 2])
        ...     y = fluid.layers.fc(x, size=1, param_attr=fluid.ParamAttr(
        ...         name="w", initializer=fluid.initializer.Constant(0.5)), bias_attr=False)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> path = tempfile.mkdtemp()
        >>> fluid.save(main, os.path.join(path, "model"))
        >>> sorted(f for f in os.listdir(path) if not f.startswith("."))
        ['model.pdmodel', 'model.pdopt', 'model.pdparams']
    """
    _check_format(format)
    if not isinstance(program, Program):
        raise TypeError(f"fluid.save expects a Program, got {type(program).__name__}")
    model_path = os.fspath(model_path)
    base_name = os.path.basename(model_path)
    if base_name == "":
        raise ValueError("The input model_path MUST be format of dirname/filename [dirname\\"
                         "filename in Windows system], but received filename is empty string.")
    scope = _scope()
    params = {v.name: _value(scope, v.name) for v in _select(program, None, is_parameter)}
    opt = {v.name: _value(scope, v.name) for v in _select(program, None, is_belong_to_optimizer)}
    _publish(os.path.dirname(model_path) or ".", {
        base_name + ".pdparams": _pickle_bytes(params),
        base_name + ".pdopt": _pickle_bytes(opt),
        base_name + ".pdmodel": _program_bytes(program, format)})


def load(program: Program, model_path: str, executor: Any = None,
         var_list: Optional[Sequence[Variable]] = None) -> None:
    """Load what ``fluid.save`` wrote into the global scope. Every Parameter must be in
    ``.pdparams``; if the program has optimizer state, ``.pdopt`` must exist. Without a
    ``.pdparams`` file, falls back to a ``save_vars``-style directory (or combined file, with
    ``var_list``).

    Args:
        program (Program): the program whose variables to fill.
        model_path (str): the prefix ``fluid.save`` used.
        executor (Executor | None): fluid's executor argument (the values go to the global
            scope).
        var_list (list of Variable | None): the variables to load from a ``save_vars``-style
            directory or combined file.

    Returns:
        None.

    Raises:
        TypeError: ``program`` is not a Program.
        CheckpointError: (a RuntimeError) a file is corrupted or not a fluid checkpoint, a variable
            is missing from it, or a saved array does not match its variable's shape or dtype;
            nothing is assigned then.
        FileNotFoundError: neither ``model_path.pdparams`` nor a ``save_vars`` directory/file
            exists, or the ``.pdopt`` file the program's optimizer state needs is missing.
        ValueError: ``model_path`` is a combined file and ``var_list`` is None.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> import os, tempfile
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 2])
        ...     y = fluid.layers.fc(x, size=1, param_attr=fluid.ParamAttr(
        ...         name="w", initializer=fluid.initializer.Constant(0.5)), bias_attr=False)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> path = tempfile.mkdtemp()
        >>> fluid.save(main, os.path.join(path, "model"))
        >>> fluid.global_scope().find_var("w").get_tensor().set(np.zeros((2, 1), "float32"),
        ...                                                      fluid.CPUPlace())
        >>> fluid.load(main, os.path.join(path, "model"), exe)
        >>> fluid.global_scope().find_var("w").get_tensor().__array__().ravel()
        array([0.5, 0.5], dtype=float32)
    """
    if not isinstance(program, Program):
        raise TypeError(f"fluid.load expects a Program, got {type(program).__name__}")
    model_path = os.fspath(model_path)
    directory, base = _split_prefix(model_path)
    arrays: Dict[str, np.ndarray] = {}
    with _reader_if_dir(directory) as reader:
        if reader is None or not reader.exists(base + ".pdparams"):
            reader = None
        else:
            params_file = reader.display(base + ".pdparams")
            state = _load_pickled_dict(reader, base + ".pdparams")
            for v in _select(program, None, is_parameter):
                if v.name not in state:
                    raise CheckpointError(f"Can not find [{v.name}] in model file "
                                          f"[{params_file}]")
                arrays[v.name] = _check(v, state[v.name], f"file '{params_file}'")
            opt_vars = _select(program, None, is_belong_to_optimizer)
            if opt_vars:
                opt_file = reader.display(base + ".pdopt")
                if not reader.exists(base + ".pdopt"):
                    raise FileNotFoundError(f"Optimizer file [{opt_file}] not exits")
                opt_state = _load_pickled_dict(reader, base + ".pdopt")
                for v in opt_vars:
                    if v.name not in opt_state:
                        raise CheckpointError(f"Can not find [{v.name}] in model file "
                                              f"[{opt_file}]")
                    arrays[v.name] = _check(v, opt_state[v.name], f"file '{opt_file}'")
    if reader is None:
        _load_fallback(program, model_path, executor, var_list)
        return
    _assign(arrays)


class _reader_if_dir:
    """``checkpoint.Reader(directory)``, or None when the directory does not exist."""

    def __init__(self, directory: str) -> None:
        self._reader = checkpoint.Reader(directory) if os.path.isdir(directory) else None

    def __enter__(self) -> Optional[checkpoint.Reader]:
        return self._reader.__enter__() if self._reader is not None else None

    def __exit__(self, *exc: Any) -> None:
        if self._reader is not None:
            self._reader.__exit__(*exc)


def _load_fallback(program: Program, model_path: str, executor: Any,
                   var_list: Optional[Sequence[Variable]]) -> None:
    if os.path.isdir(model_path):
        with checkpoint.Reader(model_path) as reader:
            files = reader.names()
            selected = [v for v in _select(program, None, is_persistable) if v.name in files]
            if not selected:
                raise FileNotFoundError(f"No parameter file found in '{model_path}' and "
                                        f"'{_strip_suffix(model_path)}.pdparams' does not "
                                        f"exist")
            arrays = _read_var_files(reader, selected)
        _assign(arrays)
    elif os.path.isfile(model_path) or _listed(model_path):
        if var_list is None:
            raise ValueError("var_list is required when loading model file saved with "
                             "[ save_params, save_persistables, save_vars ]")
        selected = _select(program, list(var_list), None)
        _assign(_read_vars(selected, os.path.dirname(model_path) or ".",
                           os.path.basename(model_path)))
    else:
        raise FileNotFoundError(f"'{_strip_suffix(model_path)}.pdparams' does not exist and "
                                f"'{model_path}' is neither a checkpoint directory nor a file")


def _listed(path: str) -> bool:
    """True when ``path`` is a file of a committed checkpoint (maybe still being published)."""
    directory, name = os.path.split(path)
    if not name or not os.path.isdir(directory or "."):
        return False
    with checkpoint.Reader(directory or ".") as reader:
        return reader.exists(name)


def load_program_state(model_path: str,
                       var_list: Optional[Sequence[Variable]] = None) -> Dict[str, np.ndarray]:
    """``{name: ndarray}`` from ``fluid.save`` files, a ``save_vars`` directory, or a combined
    file (``var_list`` picks the names to read from directories/combined files).

    Args:
        model_path (str): the prefix ``fluid.save`` used, or a ``save_vars``-style directory.
        var_list (list of Variable | None): the variables to read from a directory or combined
            file.
    Returns:
        dict: ``{name: numpy array}``.

    Raises:
        FileNotFoundError: neither ``model_path.pdparams`` nor a directory/file ``model_path``
            exists, or a name of ``var_list`` has no file in the directory.
        CheckpointError: (a RuntimeError) a file is corrupted or not a fluid checkpoint, or a
            name of ``var_list`` is missing from a combined file.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> import os, tempfile
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     y = fluid.layers.fc(fluid.data("x", [-1, 2]), size=1, param_attr=fluid.ParamAttr(
        ...         name="w", initializer=fluid.initializer.Constant(0.5)), bias_attr=False)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> path = os.path.join(tempfile.mkdtemp(), "model")
        >>> fluid.save(main, path)
        >>> state = fluid.load_program_state(path)
        >>> state["w"].ravel()
        array([0.5, 0.5], dtype=float32)
    """
    model_path = os.fspath(model_path)
    directory, base = _split_prefix(model_path)
    with _reader_if_dir(directory) as reader:
        if reader is not None and reader.exists(base + ".pdparams"):
            state = _load_pickled_dict(reader, base + ".pdparams")
            if reader.exists(base + ".pdopt"):
                state.update(_load_pickled_dict(reader, base + ".pdopt"))
            return state
    names = None if var_list is None else [v.name if isinstance(v, Variable) else str(v)
                                           for v in var_list]
    if os.path.isdir(model_path):
        with checkpoint.Reader(model_path) as reader:
            if names is None:
                names = sorted(n for n in reader.names()
                               if not n.startswith("__") and _is_npy(reader.path(n)))
            return {n: _load_npy(reader, _file_name(n), n) for n in names}
    if os.path.isfile(model_path) or _listed(model_path):
        directory, name = os.path.split(model_path)
        with checkpoint.Reader(directory or ".") as reader:
            f, _ = reader.open_verified(name, "the combined checkpoint")
            with f:
                return _read_combined(f, names, f"combined file '{model_path}'")
    raise FileNotFoundError(f"'{_strip_suffix(model_path)}.pdparams' does not exist and "
                            f"'{model_path}' is neither a checkpoint directory nor a file")


def _is_npy(path: str) -> bool:
    """A tensor file: ``.npy`` or (issue 18) a Paddle tensor stream."""
    try:
        with open(path, "rb") as f:
            head = f.read(12)
            return head[:6] == b"\x93NUMPY" or paddle_format.looks_like_tensor(head)
    except OSError:
        return False


def set_program_state(program: Program, state_dict: Dict[str, Any]) -> None:
    """Write ``state_dict`` values into the global scope for the persistables of ``program``
    (shape and dtype checked for all first). Unused keys are logged.

    Args:
        program (Program): the program whose variables to fill.
        state_dict (dict): ``{name: array}``, e.g. from ``load_program_state``.

    Returns:
        None.

    Raises:
        TypeError: ``program`` is not a Program or ``state_dict`` is not a dict.
        CheckpointError: (a RuntimeError) a value does not match its variable's shape or dtype;
            nothing is assigned then.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     y = fluid.layers.fc(fluid.data("x", [-1, 2]), size=1, param_attr=fluid.ParamAttr(
        ...         name="w"), bias_attr=False)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> fluid.set_program_state(main, {"w": np.array([[1.0], [2.0]], "float32")})
        >>> np.array(fluid.global_scope().find_var("w").get_tensor()).ravel()
        array([1., 2.], dtype=float32)
    """
    if not isinstance(program, Program):
        raise TypeError(f"set_program_state expects a Program, got {type(program).__name__}")
    if not isinstance(state_dict, dict):
        raise TypeError(f"state_dict must be a dict of name -> ndarray, got "
                        f"{type(state_dict).__name__}")
    arrays: Dict[str, np.ndarray] = {}
    for v in _select(program, None, is_persistable):
        if v.name in state_dict:
            value = state_dict[v.name]
            if not isinstance(value, np.ndarray):
                value = np.asarray(value)
            arrays[v.name] = _check(v, value, "state_dict")
    unused = sorted(set(state_dict) - set(arrays))
    if unused:
        _log.warning("This list is not set, Because of Paramerter not found in program. There "
                     "are: %s", " ".join(unused))
    _assign(arrays)
