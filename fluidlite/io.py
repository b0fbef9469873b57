"""``fluid.io``: checkpoints (save/load vars, params, persistables), inference models, and
``fluid.save`` / ``fluid.load`` / ``load_program_state`` / ``set_program_state``.

File layout follows fluid: one file per variable named exactly after it (or one combined file),
``__model__`` for an inference program, ``<path>.pdparams`` / ``.pdopt`` / ``.pdmodel`` for
``fluid.save``. The contents are fluidlite's own, safe formats:

* a variable file is a NumPy ``.npy`` file; a combined file is a zip of ``<name>.npy`` members
  (an ``.npz``); both are read with ``allow_pickle=False``;
* ``__model__`` / ``.pdmodel`` hold the program as versioned JSON (``core/serialize.py``);
* ``.pdparams`` / ``.pdopt`` are pickled ``{name: ndarray}`` dicts (protocol 2) like fluid's, so
  they are the same kind of file; they are read with a restricted unpickler that only rebuilds
  numpy arrays and dtypes and rejects every other global, so loading one never runs code.

Every write goes to a temp file in the target directory and is moved into place with
``os.replace`` (a checkpoint of several files is staged completely before the first rename).
Loading reads and checks every value first — missing or truncated files, wrong shapes or
dtypes raise an error naming the variable and the file — and writes to the scope only when all
of them are fine, so a failed load leaves the scope untouched.
"""
from __future__ import annotations

import contextlib
import io as _io
import logging
import os
import pickle
import tempfile
import zipfile
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from .core import scope as scope_mod
from .core.dtypes import VarType, to_numpy_dtype
from .core.ir import Parameter, Program, Variable, default_main_program
from .core.prune import inference_optimize, prune_with_input
from .core.serialize import atomic_write, dumps_program, load_program

__all__ = ["is_parameter", "is_persistable", "is_belong_to_optimizer", "get_program_parameter",
           "get_program_persistable_vars", "save_vars", "save_params", "save_persistables",
           "load_vars", "load_params", "load_persistables", "save_inference_model",
           "load_inference_model", "save", "load", "load_program_state", "set_program_state",
           "CheckpointError"]

_log = logging.getLogger("fluidlite")
_MODEL = "__model__"
_NOT_SAVED = (VarType.FEED_MINIBATCH, VarType.FETCH_LIST, VarType.READER, VarType.RAW)


class CheckpointError(RuntimeError):
    """A checkpoint file is corrupted or truncated, or a value does not match its variable."""


# -- predicates -------------------------------------------------------------------------------
def is_parameter(var: Variable) -> bool:
    return isinstance(var, Parameter)


def is_persistable(var: Variable) -> bool:
    if var.type in (VarType.FEED_MINIBATCH, VarType.FETCH_LIST, VarType.READER):
        return False
    return bool(var.persistable)


def is_belong_to_optimizer(var: Variable) -> bool:
    """Persistable, not a Parameter, not a ``fluid.data`` input: accumulators, LR, counters."""
    if not (isinstance(var, Parameter) or var.need_check_feed):
        return is_persistable(var)
    return False


def get_program_parameter(program: Program) -> List[Variable]:
    return list(filter(is_parameter, program.list_vars()))


def get_program_persistable_vars(program: Program) -> List[Variable]:
    return list(filter(is_persistable, program.list_vars()))


# -- helpers ----------------------------------------------------------------------------------
def _program(main_program: Optional[Program]) -> Program:
    if main_program is None:
        return default_main_program()
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
    """A variable's file name; names that would escape the directory are refused."""
    bad = name in ("", ".", "..") or "/" in name or "\\" in name or "\0" in name
    if bad:
        raise ValueError(f"variable name '{name}' cannot be used as a checkpoint file name "
                         f"(it contains a path separator or is empty); save it in a combined "
                         f"file (filename=...) instead")
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


def _npy_bytes(arr: np.ndarray) -> bytes:
    buf = _io.BytesIO()
    np.lib.format.write_array(buf, np.ascontiguousarray(arr), allow_pickle=False)
    return buf.getvalue()


def _read_npy(data: Union[bytes, Any], name: str, source: str) -> np.ndarray:
    f = _io.BytesIO(data) if isinstance(data, (bytes, bytearray)) else data
    try:
        arr = np.lib.format.read_array(f, allow_pickle=False)
    except (ValueError, OSError, EOFError) as e:
        raise CheckpointError(f"Cannot load variable '{name}': {source} is truncated or "
                              f"corrupted ({e})") from None
    return arr


def _combined_bytes(arrays: Dict[str, np.ndarray]) -> bytes:
    buf = _io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_STORED) as zf:
        for name in sorted(arrays):
            zf.writestr(name + ".npy", _npy_bytes(arrays[name]))
    return buf.getvalue()


def _read_combined(data: Union[str, bytes], names: Optional[Sequence[str]],
                   source: str) -> Dict[str, np.ndarray]:
    """Arrays of ``names`` (all members when None) from a combined file or its bytes."""
    try:
        zf = zipfile.ZipFile(_io.BytesIO(data) if isinstance(data, (bytes, bytearray)) else data)
    except (zipfile.BadZipFile, OSError, EOFError) as e:
        raise CheckpointError(f"{source} is not a fluidlite combined checkpoint or is "
                              f"truncated/corrupted ({e})") from None
    out = {}
    with zf:
        members = {m[:-4] for m in zf.namelist() if m.endswith(".npy")}
        wanted = sorted(members) if names is None else list(names)
        for name in wanted:
            if name not in members:
                raise CheckpointError(f"Cannot load variable '{name}': it is not in {source} "
                                      f"(the file holds {len(members)} variables)")
            try:
                raw = zf.read(name + ".npy")
            except (zipfile.BadZipFile, OSError, EOFError, ValueError) as e:
                raise CheckpointError(f"Cannot load variable '{name}': {source} is truncated "
                                      f"or corrupted ({e})") from None
            out[name] = _read_npy(raw, name, source)
    return out


class _Staged:
    """Write several files to temp names, then move them all into place (``commit``)."""

    def __init__(self) -> None:
        self.items: List[Tuple[str, str]] = []

    def add(self, path: str, data: bytes) -> None:
        directory = os.path.dirname(os.path.abspath(path))
        fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp",
                                   dir=directory)
        self.items.append((tmp, path))
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)

    def commit(self) -> None:
        for tmp, path in self.items:
            os.replace(tmp, path)
        self.items = []

    def abort(self) -> None:
        for tmp, _ in self.items:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        self.items = []


def _check(var: Variable, arr: Any, source: str) -> np.ndarray:
    """Return ``arr`` as an ndarray if it fits ``var`` (shape, dtype), else raise."""
    if not isinstance(arr, np.ndarray):
        raise CheckpointError(f"Cannot load variable '{var.name}': {source} holds a "
                              f"{type(arr).__name__}, not an array")
    if arr.dtype.kind not in "biuf":
        raise CheckpointError(f"Cannot load variable '{var.name}': {source} holds an array of "
                              f"dtype {arr.dtype}, which is not a tensor dtype")
    want = tuple(var.shape)
    got = tuple(arr.shape)
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
        if want_dt is not None and arr.dtype != want_dt:
            raise CheckpointError(
                f"Data type not matching: variable '{var.name}' is {want_dt.name} in the "
                f"program, but {source} holds {arr.dtype.name}. Cast the saved array or fix "
                f"the variable's dtype.")
    return arr


def _assign(arrays: Dict[str, np.ndarray]) -> None:
    scope = _scope()
    for name, arr in arrays.items():
        scope.var(name).get_tensor().set(arr, None)


# -- save / load vars -------------------------------------------------------------------------
def save_vars(executor: Any, dirname: Optional[str], main_program: Optional[Program] = None,
              vars: Any = None, predicate: Optional[Callable[[Variable], bool]] = None,
              filename: Optional[str] = None) -> Optional[bytes]:
    """Save ``vars`` (or every var of ``main_program`` matching ``predicate``) from the global
    scope: one ``.npy`` file per variable under ``dirname``, or all of them in the combined
    file ``dirname/filename``. With ``dirname=None`` and ``filename=None`` the combined bytes
    are returned instead of written."""
    program = _program(main_program)
    selected = _select(program, vars, predicate)
    if not selected:
        _log.warning("no variable in your model, please ensure there are any variables in your "
                     "model to save")
        return None
    scope = _scope()
    arrays = {v.name: _value(scope, v.name) for v in selected}
    if dirname is None and filename is None:
        return _combined_bytes(arrays)
    if dirname is None:
        raise ValueError("save_vars: dirname is required when filename is given")
    os.makedirs(dirname, exist_ok=True)
    if filename is not None:
        atomic_write(os.path.join(dirname, filename), _combined_bytes(arrays))
        return None
    staged = _Staged()
    try:
        for name, arr in arrays.items():
            staged.add(os.path.join(dirname, _file_name(name)), _npy_bytes(arr))
        staged.commit()
    except BaseException:
        staged.abort()
        raise
    return None


def save_params(executor: Any, dirname: Optional[str], main_program: Optional[Program] = None,
                filename: Optional[str] = None) -> Optional[bytes]:
    """Save every Parameter of ``main_program`` (see ``save_vars``)."""
    return save_vars(executor, dirname, main_program, predicate=is_parameter, filename=filename)


def save_persistables(executor: Any, dirname: Optional[str],
                      main_program: Optional[Program] = None,
                      filename: Optional[str] = None) -> Optional[bytes]:
    """Save every persistable variable (parameters, optimizer state, LR, counters)."""
    return save_vars(executor, dirname, main_program, predicate=is_persistable,
                     filename=filename)


def _read_vars(selected: Sequence[Variable], dirname: Optional[str],
               filename: Union[None, str, bytes]) -> Dict[str, np.ndarray]:
    if dirname is None:
        if not isinstance(filename, (bytes, bytearray)):
            raise ValueError("The directory path and params cannot be None at the same time.")
        raw = _read_combined(bytes(filename), [v.name for v in selected], "the given bytes")
        return {v.name: _check(v, raw[v.name], "the given bytes") for v in selected}
    if not os.path.isdir(dirname):
        raise FileNotFoundError(f"checkpoint directory '{dirname}' does not exist")
    if filename is not None:
        path = os.path.join(dirname, filename)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"combined checkpoint file '{path}' does not exist")
        source = f"combined file '{path}'"
        raw = _read_combined(path, [v.name for v in selected], source)
        return {v.name: _check(v, raw[v.name], source) for v in selected}
    out = {}
    for v in selected:
        path = os.path.join(dirname, _file_name(v.name))
        if not os.path.isfile(path):
            raise FileNotFoundError(f"Cannot load variable '{v.name}': file '{path}' does not "
                                    f"exist")
        source = f"file '{path}'"
        with open(path, "rb") as f:
            out[v.name] = _check(v, _read_npy(f.read(), v.name, source), source)
    return out


def load_vars(executor: Any, dirname: Optional[str], main_program: Optional[Program] = None,
              vars: Any = None, predicate: Optional[Callable[[Variable], bool]] = None,
              filename: Union[None, str, bytes] = None) -> None:
    """Load ``vars`` (or the vars matching ``predicate``) into the global scope from the files
    ``save_vars`` wrote (``filename`` may also be the bytes ``save_vars`` returned, with
    ``dirname=None``). Everything is read and checked before the scope is touched."""
    program = _program(main_program)
    selected = _select(program, vars, predicate)
    if not selected:
        _log.warning("no variable to load: the program has none matching the predicate")
        return
    _assign(_read_vars(selected, dirname, filename))


def load_params(executor: Any, dirname: Optional[str], main_program: Optional[Program] = None,
                filename: Union[None, str, bytes] = None) -> None:
    load_vars(executor, dirname, main_program, predicate=is_parameter, filename=filename)


def load_persistables(executor: Any, dirname: Optional[str],
                      main_program: Optional[Program] = None,
                      filename: Union[None, str, bytes] = None) -> None:
    load_vars(executor, dirname, main_program, predicate=is_persistable, filename=filename)


# -- inference models -------------------------------------------------------------------------
def _prepend_feed_ops(program: Program, feed_names: Sequence[str]) -> None:
    block = program.global_block()
    holder = block.create_var(name="feed", type=VarType.FEED_MINIBATCH, persistable=True)
    for i, name in enumerate(feed_names):
        if not block.has_var(name):
            raise ValueError(
                f"The feeded_var_names[{i}]: '{name}' doesn't exist in pruned inference "
                f"program. Please check whether '{name}' is a valid feed_var name, or remove it "
                f"from feeded_var_names if '{name}' is not involved in the target_vars "
                f"calculation.")
        block._prepend_op(type="feed", inputs={"X": [holder]}, outputs={"Out": [name]},
                          attrs={"col": i})


def _append_fetch_ops(program: Program, fetch_names: Sequence[str]) -> None:
    block = program.global_block()
    holder = block.create_var(name="fetch", type=VarType.FETCH_LIST, persistable=True)
    for i, name in enumerate(fetch_names):
        block.append_op(type="fetch", inputs={"X": [name]}, outputs={"Out": [holder]},
                        attrs={"col": i})


def save_inference_model(dirname: str, feeded_var_names: Union[str, Sequence[str]],
                         target_vars: Union[Variable, Sequence[Variable]], executor: Any,
                         main_program: Optional[Program] = None,
                         model_filename: Optional[str] = None,
                         params_filename: Optional[str] = None,
                         export_for_deployment: bool = True,
                         program_only: bool = False) -> List[str]:
    """Prune ``main_program`` to what computes ``target_vars`` from ``feeded_var_names``, switch
    it to test mode, add feed/fetch ops, and write it to ``dirname/__model__`` (or
    ``model_filename``) plus its persistables (one file each, or ``params_filename``).
    Returns the target variable names."""
    if isinstance(feeded_var_names, str):
        feeded_var_names = [feeded_var_names]
    elif feeded_var_names:
        if not isinstance(feeded_var_names, (list, tuple)) or \
                not all(isinstance(n, str) for n in feeded_var_names):
            raise ValueError("'feed_var_names' should be a list of str.")
    else:
        feeded_var_names = []
    if isinstance(target_vars, Variable):
        target_vars = [target_vars]
    elif not isinstance(target_vars, (list, tuple)) or not target_vars or \
            not all(isinstance(v, Variable) for v in target_vars):
        raise ValueError("'target_vars' should be a list of Variable.")
    program = _program(main_program)
    if not isinstance(dirname, (str, os.PathLike)) or str(dirname) == "":
        raise ValueError(f"dirname must be a directory path, got {dirname!r}")
    dirname = os.fspath(dirname)
    target_names = [v.name for v in target_vars]
    model_basename = os.path.basename(model_filename) if model_filename else _MODEL
    if not model_basename:
        raise ValueError(f"model_filename {model_filename!r} has no file name")
    os.makedirs(dirname, exist_ok=True)
    if export_for_deployment:
        pruned = prune_with_input(program, list(feeded_var_names), list(target_vars))
        pruned = inference_optimize(pruned, prune_read_op=True)
        _prepend_feed_ops(pruned, feeded_var_names)
        _append_fetch_ops(pruned, target_names)
        model_path = os.path.join(dirname, model_basename)
    else:
        pruned = program.clone()
        model_path = os.path.join(dirname, model_basename + ".main_program")
    if program_only:
        atomic_write(model_path, dumps_program(pruned).encode("utf-8") + b"\n")
        _log.warning("save_inference_model specified the param `program_only` to True, It "
                     "will not save params of Program.")
        return target_names
    params_basename = os.path.basename(params_filename) if params_filename else None
    save_persistables(executor, dirname, pruned, params_basename)
    atomic_write(model_path, dumps_program(pruned).encode("utf-8") + b"\n")
    return target_names


def load_inference_model(dirname: str, executor: Any, model_filename: Optional[str] = None,
                         params_filename: Optional[str] = None,
                         pserver_endpoints: Optional[List[str]] = None) -> List[Any]:
    """Load what ``save_inference_model`` wrote into the global scope; returns
    ``[program, feed_target_names, fetch_targets]`` (fetch targets are Variables)."""
    dirname = os.fspath(dirname) if dirname is not None else dirname
    if dirname is None or not os.path.isdir(dirname):
        raise ValueError(f"There is no directory named '{dirname}'")
    model_basename = os.path.basename(model_filename) if model_filename else _MODEL
    program = load_program(os.path.join(dirname, model_basename))
    params_basename = os.path.basename(params_filename) if params_filename else None
    load_persistables(executor, dirname, program, params_basename)
    feed_target_names, fetch_targets = feed_fetch_targets(program)
    return [program, feed_target_names, fetch_targets]


def feed_fetch_targets(program: Program) -> Tuple[List[str], List[Variable]]:
    """The feed variable names and fetch Variables of an inference program, by ``col``."""
    block = program.global_block()
    feeds = sorted((op.attrs.get("col", 0), op.output("Out")[0]) for op in block.ops
                   if op.type == "feed")
    fetches = sorted((op.attrs.get("col", 0), op.input("X")[0]) for op in block.ops
                     if op.type == "fetch")
    return [n for _, n in feeds], [block.var(n) for _, n in fetches]


# -- fluid.save / fluid.load ------------------------------------------------------------------
class _ArrayUnpickler(pickle.Unpickler):
    """Rebuilds numpy arrays and dtypes only; any other global is refused."""

    def __init__(self, f: Any, source: str) -> None:
        super().__init__(f)
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


def _allowed_globals() -> Dict[Tuple[str, str], Any]:
    import codecs
    try:
        from numpy._core import multiarray as ma
    except ImportError:  # numpy < 2
        from numpy.core import multiarray as ma  # type: ignore[no-redef]
    out: Dict[Tuple[str, str], Any] = {("numpy", "ndarray"): np.ndarray,
                                       ("numpy", "dtype"): np.dtype,
                                       ("_codecs", "encode"): codecs.encode}
    for mod in ("numpy.core.multiarray", "numpy._core.multiarray"):
        out[(mod, "_reconstruct")] = ma._reconstruct
        out[(mod, "scalar")] = ma.scalar
    for mod in ("numpy.core.numeric", "numpy._core.numeric"):
        out[(mod, "_frombuffer")] = _frombuffer
    return out


def _frombuffer(buf: Any, dtype: Any, shape: Any, order: str) -> np.ndarray:
    # numpy's pickle protocol-5 path: np.core.numeric._frombuffer(buf, dtype, shape, order)
    if not isinstance(dtype, np.dtype) or dtype.kind not in "biuf":
        raise CheckpointError(f"refusing to rebuild an array of dtype {dtype!r}")
    return np.frombuffer(buf, dtype=dtype).reshape(shape, order=order).copy()


def _load_pickled_dict(path: str) -> Dict[str, np.ndarray]:
    source = f"file '{path}'"
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path} does not exist")
    with open(path, "rb") as f:
        try:
            data = _ArrayUnpickler(f, source).load()
        except CheckpointError:
            raise
        except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError,
                IndexError, KeyError, MemoryError, UnicodeDecodeError) as e:
            raise CheckpointError(f"{source} is truncated or corrupted, or not a fluid "
                                  f"checkpoint ({type(e).__name__}: {e})") from None
    if not isinstance(data, dict):
        raise CheckpointError(f"{source} should hold a dict of name -> array, got "
                              f"{type(data).__name__}")
    out = {}
    for k, v in data.items():
        if k == "StructuredToParameterName@@":      # Paddle 2.x dygraph name map
            continue
        if not isinstance(k, str) or not isinstance(v, np.ndarray) or v.dtype.kind not in "biuf":
            raise CheckpointError(f"{source}: entry {k!r} is not a numeric array")
        out[k] = v
    return out


def _pickle_bytes(arrays: Dict[str, np.ndarray]) -> bytes:
    return pickle.dumps({k: np.ascontiguousarray(v) for k, v in arrays.items()}, protocol=2)


def _strip_suffix(model_path: str) -> str:
    for suffix in (".pdparams", ".pdopt", ".pdmodel"):
        if model_path.endswith(suffix):
            return model_path[:-len(suffix)]
    return model_path


def save(program: Program, model_path: str) -> None:
    """Write ``model_path.pdparams`` (all Parameters), ``.pdopt`` (optimizer state: the other
    persistables) and ``.pdmodel`` (the program, JSON)."""
    if not isinstance(program, Program):
        raise TypeError(f"fluid.save expects a Program, got {type(program).__name__}")
    model_path = os.fspath(model_path)
    base_name = os.path.basename(model_path)
    if base_name == "":
        raise ValueError("The input model_path MUST be format of dirname/filename [dirname\\"
                         "filename in Windows system], but received filename is empty string.")
    dir_name = os.path.dirname(model_path)
    if dir_name:
        os.makedirs(dir_name, exist_ok=True)
    scope = _scope()
    params = {v.name: _value(scope, v.name) for v in _select(program, None, is_parameter)}
    opt = {v.name: _value(scope, v.name) for v in _select(program, None, is_belong_to_optimizer)}
    staged = _Staged()
    try:
        staged.add(model_path + ".pdparams", _pickle_bytes(params))
        staged.add(model_path + ".pdopt", _pickle_bytes(opt))
        staged.add(model_path + ".pdmodel", dumps_program(program).encode("utf-8") + b"\n")
        staged.commit()
    except BaseException:
        staged.abort()
        raise


def load(program: Program, model_path: str, executor: Any = None,
         var_list: Optional[Sequence[Variable]] = None) -> None:
    """Load what ``fluid.save`` wrote into the global scope. Every Parameter must be in
    ``.pdparams``; if the program has optimizer state, ``.pdopt`` must exist. Without a
    ``.pdparams`` file, falls back to a ``save_vars``-style directory (or combined file, with
    ``var_list``)."""
    if not isinstance(program, Program):
        raise TypeError(f"fluid.load expects a Program, got {type(program).__name__}")
    model_path = os.fspath(model_path)
    prefix = _strip_suffix(model_path)
    params_file = prefix + ".pdparams"
    if not os.path.exists(params_file):
        _load_fallback(program, model_path, executor, var_list)
        return
    state = _load_pickled_dict(params_file)
    arrays: Dict[str, np.ndarray] = {}
    for v in _select(program, None, is_parameter):
        if v.name not in state:
            raise CheckpointError(f"Can not find [{v.name}] in model file [{params_file}]")
        arrays[v.name] = _check(v, state[v.name], f"file '{params_file}'")
    opt_vars = _select(program, None, is_belong_to_optimizer)
    if opt_vars:
        opt_file = prefix + ".pdopt"
        if not os.path.exists(opt_file):
            raise FileNotFoundError(f"Optimizer file [{opt_file}] not exits")
        opt_state = _load_pickled_dict(opt_file)
        for v in opt_vars:
            if v.name not in opt_state:
                raise CheckpointError(f"Can not find [{v.name}] in model file [{opt_file}]")
            arrays[v.name] = _check(v, opt_state[v.name], f"file '{opt_file}'")
    _assign(arrays)


def _load_fallback(program: Program, model_path: str, executor: Any,
                   var_list: Optional[Sequence[Variable]]) -> None:
    if os.path.isdir(model_path):
        files = set(os.listdir(model_path))
        selected = [v for v in _select(program, None, is_persistable) if v.name in files]
        if not selected:
            raise FileNotFoundError(f"No parameter file found in '{model_path}' and "
                                    f"'{_strip_suffix(model_path)}.pdparams' does not exist")
        _assign(_read_vars(selected, model_path, None))
    elif os.path.isfile(model_path):
        if var_list is None:
            raise ValueError("var_list is required when loading model file saved with "
                             "[ save_params, save_persistables, save_vars ]")
        selected = _select(program, list(var_list), None)
        _assign(_read_vars(selected, os.path.dirname(model_path) or ".",
                           os.path.basename(model_path)))
    else:
        raise FileNotFoundError(f"'{_strip_suffix(model_path)}.pdparams' does not exist and "
                                f"'{model_path}' is neither a checkpoint directory nor a file")


def load_program_state(model_path: str,
                       var_list: Optional[Sequence[Variable]] = None) -> Dict[str, np.ndarray]:
    """``{name: ndarray}`` from ``fluid.save`` files, a ``save_vars`` directory, or a combined
    file (``var_list`` picks the names to read from directories/combined files)."""
    model_path = os.fspath(model_path)
    prefix = _strip_suffix(model_path)
    if os.path.exists(prefix + ".pdparams"):
        state = _load_pickled_dict(prefix + ".pdparams")
        if os.path.exists(prefix + ".pdopt"):
            state.update(_load_pickled_dict(prefix + ".pdopt"))
        return state
    names = None if var_list is None else [v.name if isinstance(v, Variable) else str(v)
                                           for v in var_list]
    if os.path.isdir(model_path):
        if names is None:
            names = sorted(n for n in os.listdir(model_path)
                           if not n.startswith(("__", ".")) and _is_npy(os.path.join(model_path,
                                                                                     n)))
        out = {}
        for n in names:
            path = os.path.join(model_path, _file_name(n))
            if not os.path.isfile(path):
                raise FileNotFoundError(f"Cannot load variable '{n}': file '{path}' does not "
                                        f"exist")
            with open(path, "rb") as f:
                out[n] = _read_npy(f.read(), n, f"file '{path}'")
        return out
    if os.path.isfile(model_path):
        return _read_combined(model_path, names, f"combined file '{model_path}'")
    raise FileNotFoundError(f"'{prefix}.pdparams' does not exist and '{model_path}' is neither "
                            f"a checkpoint directory nor a file")


def _is_npy(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(6) == b"\x93NUMPY"
    except OSError:
        return False


def set_program_state(program: Program, state_dict: Dict[str, Any]) -> None:
    """Write ``state_dict`` values into the global scope for the persistables of ``program``
    (shape and dtype checked for all first). Unused keys are logged."""
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
