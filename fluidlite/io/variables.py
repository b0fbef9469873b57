"""``fluid.io``'s variable checkpoints: ``save_vars`` / ``save_params`` / ``save_persistables`` and
their loaders, the variable predicates, and ``get_parameter_value``."""
from __future__ import annotations

import io as _io
import os
import warnings
from typing import IO, Any, Callable, Dict, List, Optional, Sequence, Tuple, Union
import numpy as np
from ..formats import checkpoint
from ..core.dtypes import VarType
from ..core.ir import Parameter, Program, Variable, default_main_program
from ..formats import paddle as paddle_format
from .files import (LOD_SIDECAR, _assign, _check, _check_format, _combined_bytes, _file_name,
                    _load_npy, _lod_json, _npy_bytes, _parse_lod_json, _program,
                    _read_combined, _scope, _scope_lods, _select, _target, _value)


# -- predicates -------------------------------------------------------------------------------
def is_parameter(var: Variable) -> bool:
    """True when ``var`` is a Parameter (the predicate of ``save_params``/``load_params``).

    Args:
        var (Variable): the variable.
    Returns:
        bool: ``var`` is a Parameter.

    Raises:
        None: this predicate does not raise (any object is accepted).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup), fluid.unique_name.guard():
        ...     x = fluid.data("x", [-1, 2])
        ...     y = fluid.layers.fc(x, size=1)
        >>> sorted(v.name for v in main.list_vars() if fluid.io.is_parameter(v))
        ['fc_0.b_0', 'fc_0.w_0']
    """
    return isinstance(var, Parameter)


def is_persistable(var: Variable) -> bool:
    """True for a variable that outlives a run (parameters, optimizer state, LR, counters),
    false for feed/fetch/reader variables; the predicate of ``save_persistables``.

    Args:
        var (Variable): the variable.
    Returns:
        bool: ``var`` is persistable (and not a feed, fetch or reader variable).

    Raises:
        AttributeError: ``var`` is not a Variable (it has no ``type`` / ``persistable``).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup), fluid.unique_name.guard():
        ...     x = fluid.data("x", [-1, 2])
        ...     y = fluid.layers.fc(x, size=1)
        >>> fluid.io.is_persistable(x), fluid.io.is_persistable(main.global_block().var("fc_0.w_0"))
        (False, True)
    """
    if var.type in (VarType.FEED_MINIBATCH, VarType.FETCH_LIST, VarType.READER):
        return False
    return bool(var.persistable)


def is_belong_to_optimizer(var: Variable) -> bool:
    """Persistable, not a Parameter, not a ``fluid.data`` input: accumulators, LR, counters.

    Args:
        var (Variable): the variable.
    Returns:
        bool: persistable, and neither a Parameter nor a data input.

    Raises:
        AttributeError: ``var`` is not a Variable (it has no ``need_check_feed``).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup), fluid.unique_name.guard():
        ...     x = fluid.data("x", [-1, 2])
        ...     pred = fluid.layers.fc(x, size=1, param_attr=fluid.ParamAttr(
        ...         name="w", initializer=fluid.initializer.Constant(1.0)), bias_attr=False)
        ...     loss = fluid.layers.mean(pred)
        ...     _ = fluid.optimizer.Momentum(0.1, momentum=0.9).minimize(loss)
        >>> sorted(v.name for v in main.list_vars() if fluid.io.is_belong_to_optimizer(v))
        ['learning_rate_0', 'w_velocity_0']
    """
    if not (isinstance(var, Parameter) or var.need_check_feed):
        return is_persistable(var)
    return False


def get_program_parameter(program: Program) -> List[Variable]:
    """Every Parameter of ``program`` (all blocks), as ``list_vars`` orders them.

    Args:
        program (Program): the program.
    Returns:
        list of Variable: its Parameters.

    Raises:
        AttributeError: ``program`` is not a Program (it has no ``list_vars``).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup), fluid.unique_name.guard():
        ...     y = fluid.layers.fc(fluid.data("x", [-1, 2]), size=1)
        >>> [p.name for p in fluid.io.get_program_parameter(main)]
        ['fc_0.w_0', 'fc_0.b_0']
    """
    return list(filter(is_parameter, program.list_vars()))


def get_program_persistable_vars(program: Program) -> List[Variable]:
    """Every persistable variable of ``program`` (parameters, optimizer state, learning rate,
    counters): what ``save_persistables`` writes.

    Args:
        program (Program): the program.
    Returns:
        list of Variable: its persistable variables.

    Raises:
        AttributeError: ``program`` is not a Program (it has no ``list_vars``).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup), fluid.unique_name.guard():
        ...     x = fluid.data("x", [-1, 2])
        ...     pred = fluid.layers.fc(x, size=1, param_attr=fluid.ParamAttr(
        ...         name="w", initializer=fluid.initializer.Constant(1.0)), bias_attr=False)
        ...     loss = fluid.layers.mean(pred)
        ...     _ = fluid.optimizer.Momentum(0.1, momentum=0.9).minimize(loss)
        >>> sorted(v.name for v in fluid.io.get_program_persistable_vars(main))
        ['learning_rate_0', 'w', 'w_velocity_0']
    """
    return list(filter(is_persistable, program.list_vars()))


# -- save / load vars -------------------------------------------------------------------------
def save_vars(executor: Any, dirname: Optional[str], main_program: Optional[Program] = None,
              vars: Any = None, predicate: Optional[Callable[[Variable], bool]] = None,
              filename: Optional[str] = None, *, format: str = "paddle") -> Optional[bytes]:
    """Save ``vars`` (or every var of ``main_program`` matching ``predicate``) from the global
    scope: one file per variable under ``dirname``, or all of them in the combined file
    ``dirname/filename``, all-or-nothing (see the module docstring). With ``dirname=None``
    and ``filename=None`` the combined bytes are returned instead of written. ``format``:
    ``"paddle"`` (Paddle's tensor streams, as fluid 1.8 writes) or ``"json"`` (``.npy``
    files, ``.npz`` combined).

    Args:
        executor (Executor): the executor whose scope holds the values.
        dirname (str | None): the directory (None with ``filename=None``: return the combined
            bytes instead of writing).
        main_program (Program | None): the program (default: the default main program).
        vars (list of Variable | None): the variables to save.
        predicate (callable | None): ``predicate(var) -> bool`` selects them instead.
        filename (str | None): one combined file instead of one file per variable.
        format (str, default "paddle"): ``"paddle"`` or ``"json"``.
    Returns:
        bytes | None: the combined bytes when ``dirname`` is None, else None.

    Raises:
        ValueError: ``format`` is unknown, a name in ``vars`` is not in the program, ``filename`` is
            given without ``dirname`` or has no file name.
        TypeError: ``main_program`` is not a Program / CompiledProgram, or ``vars`` holds something
            other than Variables and names.
        RuntimeError: a selected variable has no value in the scope (run the startup program first).
        OSError: ``dirname`` cannot be created or written.

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
        >>> fluid.io.save_vars(exe, path, main_program=main, vars=[main.global_block().var("w")])
        >>> sorted(f for f in os.listdir(path) if not f.startswith("."))
        ['w']
    """
    _check_format(format)
    program = _program(main_program)
    selected = _select(program, vars, predicate)
    if not selected:
        warnings.warn("no variable in your model, please ensure there are any variables in "
                      "your model to save", stacklevel=3)
        return None
    scope = _scope()
    arrays = {v.name: _value(scope, v.name) for v in selected}
    lods = _scope_lods(scope, list(arrays))     # issue 15
    if dirname is None and filename is None:
        return _combined_bytes(arrays, format, lods)
    if dirname is None:
        raise ValueError("save_vars: dirname is required when filename is given")
    directory, files = _var_files(os.fspath(dirname), arrays, filename, format, lods)
    _publish(directory, files)
    return None


def _var_files(dirname: str, arrays: Dict[str, np.ndarray], filename: Optional[str],
               format: str = "paddle", lods: Optional[Dict[str, Any]] = None
               ) -> Tuple[str, Dict[str, bytes]]:
    """(directory, {file name: content}) of a save_vars-style checkpoint."""
    lods = lods or {}
    if filename is not None:
        directory, name = _target(dirname, filename)
        return directory, {name: _combined_bytes(arrays, format, lods)}
    if format == "paddle":
        return dirname, {_file_name(name): paddle_format.tensor_to_bytes(arr, lods.get(name))
                         for name, arr in arrays.items()}
    files = {_file_name(name): _npy_bytes(arr) for name, arr in arrays.items()}
    if lods:                    # issue 15: the LoD sidecar file
        if LOD_SIDECAR in files:
            raise ValueError(f"a variable named {LOD_SIDECAR!r} clashes with the LoD sidecar "
                             f"of the json format; save it with format='paddle'")
        files[LOD_SIDECAR] = _lod_json(lods)
    return dirname, files


def _publish(directory: str, files: Dict[str, bytes]) -> None:
    """Write ``files`` into ``directory`` all-or-nothing (``formats/checkpoint.py``)."""
    os.makedirs(directory, exist_ok=True)
    checkpoint.publish(directory, files)


def save_params(executor: Any, dirname: Optional[str], main_program: Optional[Program] = None,
                filename: Optional[str] = None, *, format: str = "paddle") -> Optional[bytes]:
    """Save every Parameter of ``main_program`` (see ``save_vars``).

    Args:
        executor (Executor): the executor whose scope holds the values.
        dirname (str | None): the directory (None with ``filename=None``: return the combined
            bytes instead of writing).
        main_program (Program | None): the program (default: the default main program).
        filename (str | None): one combined file instead of one file per parameter.
        format (str, default "paddle"): ``"paddle"`` or ``"json"``.
    Returns:
        bytes | None: the combined bytes when ``dirname`` is None, else None.

    Raises:
        ValueError: ``format`` is unknown, or ``filename`` is given without ``dirname``.
        TypeError: ``main_program`` is not a Program / CompiledProgram.
        RuntimeError: a parameter has no value in the scope (run the startup program first).
        OSError: ``dirname`` cannot be created or written.

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
        >>> fluid.io.save_params(exe, path, main_program=main)
        >>> sorted(f for f in os.listdir(path) if not f.startswith("."))
        ['w']
    """
    return save_vars(executor, dirname, main_program, predicate=is_parameter, filename=filename,
                     format=format)


def save_persistables(executor: Any, dirname: Optional[str],
                      main_program: Optional[Program] = None,
                      filename: Optional[str] = None, *,
                      format: str = "paddle") -> Optional[bytes]:
    """Save every persistable variable (parameters, optimizer state, LR, counters).

    Args:
        executor (Executor): the executor whose scope holds the values.
        dirname (str | None): the directory (one file per variable), or None with
            ``filename=None`` to get the combined bytes back.
        main_program (Program | None): the program (default: the default main program).
        filename (str | None): one combined file in ``dirname`` instead of one per variable.
        format (str, default "paddle"): ``"paddle"`` (fluid 1.8's tensor files) or ``"json"``
            (``.npy``).
    Returns:
        bytes | None: the combined bytes when ``dirname`` is None, else None.

    Raises:
        ValueError: ``format`` is unknown, or ``filename`` is given without ``dirname``.
        TypeError: ``main_program`` is not a Program / CompiledProgram.
        RuntimeError: a persistable variable has no value in the scope (run the startup program
            first).
        OSError: ``dirname`` cannot be created or written.

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
        >>> fluid.io.save_persistables(exe, path, main_program=main)
        >>> sorted(f for f in os.listdir(path) if not f.startswith("."))
        ['w']
        >>> fluid.global_scope().find_var("w").get_tensor().set(np.zeros((2, 1), "float32"),
        ...                                                      fluid.CPUPlace())
        >>> fluid.io.load_persistables(exe, path, main_program=main)
        >>> fluid.global_scope().find_var("w").get_tensor().__array__().ravel()
        array([0.5, 0.5], dtype=float32)
    """
    return save_vars(executor, dirname, main_program, predicate=is_persistable,
                     filename=filename, format=format)


def _read_vars(selected: Sequence[Variable], dirname: Optional[str],
               filename: Union[None, str, bytes],
               lods: Optional[Dict[str, Any]] = None) -> Dict[str, np.ndarray]:
    """The checked arrays of ``selected``; their LoD goes into ``lods`` when given."""
    if dirname is None:
        if not isinstance(filename, (bytes, bytearray)):
            raise ValueError("The directory path and params cannot be None at the same time.")
        return _checked(selected, _io.BytesIO(bytes(filename)), "the given bytes", lods)
    dirname = os.fspath(dirname)
    if not os.path.isdir(dirname):
        raise FileNotFoundError(f"checkpoint directory '{dirname}' does not exist")
    if filename is not None:
        directory, name = _target(dirname, filename)
        with checkpoint.Reader(directory) as reader:
            return _read_combined_file(reader, name, selected, lods)
    with checkpoint.Reader(dirname) as reader:
        return _read_var_files(reader, selected, lods)


def _read_var_files(reader: checkpoint.Reader, selected: Sequence[Variable],
                    lods: Optional[Dict[str, Any]] = None) -> Dict[str, np.ndarray]:
    out = {v.name: _check(v, _load_npy(reader, _file_name(v.name), v.name, v, lods),
                          f"file '{reader.display(v.name)}'") for v in selected}
    if lods is not None and reader.exists(LOD_SIDECAR) and \
            not any(v.name == LOD_SIDECAR for v in selected):      # issue 15: json format
        data = reader.read_bytes(LOD_SIDECAR, "the LoD sidecar")
        lods.update((n, lod) for n, lod in
                    _parse_lod_json(data, f"'{reader.display(LOD_SIDECAR)}'").items()
                    if n in out and n not in lods)
    return out


def _read_combined_file(reader: checkpoint.Reader, name: str, selected: Sequence[Variable],
                        lods: Optional[Dict[str, Any]] = None) -> Dict[str, np.ndarray]:
    path = reader.display(name)
    if not reader.exists(name):
        raise FileNotFoundError(f"combined checkpoint file '{path}' does not exist")
    f, _ = reader.open_verified(name, "the combined checkpoint")
    with f:
        return _checked(selected, f, f"combined file '{path}'", lods)


def _read_combined_buffer(data: bytes, selected: Sequence[Variable],
                          source: str) -> Dict[str, np.ndarray]:
    """``_read_combined_file`` of a combined file's bytes held in memory."""
    return _checked(selected, _io.BytesIO(data), source)


def _checked(selected: Sequence[Variable], f: IO[bytes], source: str,
             lods: Optional[Dict[str, Any]] = None) -> Dict[str, np.ndarray]:
    raw = _read_combined(f, [v.name for v in selected], source, {v.name: v for v in selected},
                         lods)
    return {v.name: _check(v, raw[v.name], source) for v in selected}


def load_vars(executor: Any, dirname: Optional[str], main_program: Optional[Program] = None,
              vars: Any = None, predicate: Optional[Callable[[Variable], bool]] = None,
              filename: Union[None, str, bytes] = None) -> None:
    """Load ``vars`` (or the vars matching ``predicate``) into the global scope from the files
    ``save_vars`` wrote (``filename`` may also be the bytes ``save_vars`` returned, with
    ``dirname=None``). Everything is read and checked before the scope is touched.

    Args:
        executor (Executor): the executor whose scope receives the values.
        dirname (str | None): the directory written by the matching save (None with the bytes
            in ``filename``).
        main_program (Program | None): the program (default: the default main program).
        vars (list of Variable | None): the variables to load.
        predicate (callable | None): ``predicate(var) -> bool`` selects them instead.
        filename (str | bytes | None): the combined file's name (or its bytes).

    Returns:
        None.

    Raises:
        FileNotFoundError: ``dirname`` or a variable's file does not exist.
        CheckpointError: (a RuntimeError) a file is corrupt or does not match its variable's
            shape or dtype; the scope is unchanged.
        ValueError: ``dirname`` and ``filename`` are both None (or ``filename`` is not bytes
            with ``dirname=None``), or a name in ``vars`` is not in the program.
        TypeError: ``main_program`` is not a Program / CompiledProgram, or ``vars`` holds
            something other than Variables and names.

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
        >>> is_param = lambda v: isinstance(v, fluid.framework.Parameter)
        >>> fluid.io.save_vars(exe, path, main_program=main, predicate=is_param)
        >>> fluid.global_scope().find_var("w").get_tensor().set(np.zeros((2, 1), "float32"),
        ...                                                      fluid.CPUPlace())
        >>> fluid.io.load_vars(exe, path, main_program=main, predicate=is_param)
        >>> fluid.global_scope().find_var("w").get_tensor().__array__().ravel()
        array([0.5, 0.5], dtype=float32)
    """
    program = _program(main_program)
    selected = _select(program, vars, predicate)
    if not selected:
        warnings.warn("no variable to load: the program has none matching the predicate",
                      stacklevel=3)
        return
    lods: Dict[str, Any] = {}       # issue 15: LoD read with the values
    _assign(_read_vars(selected, dirname, filename, lods), lods)


def load_params(executor: Any, dirname: Optional[str], main_program: Optional[Program] = None,
                filename: Union[None, str, bytes] = None) -> None:
    """Load every Parameter of ``main_program`` from what ``save_params`` wrote (see
    ``load_vars``: one file per parameter in ``dirname``, or the combined file ``filename``;
    bytes of a combined file with ``dirname=None``).

    Args:
        executor (Executor): the executor whose scope receives the values.
        dirname (str | None): the directory written by the matching save (None with the bytes
            in ``filename``).
        main_program (Program | None): the program (default: the default main program).
        filename (str | bytes | None): the combined file's name (or its bytes).

    Returns:
        None.

    Raises:
        FileNotFoundError: ``dirname`` or a parameter's file does not exist.
        CheckpointError: (a RuntimeError) a file is corrupt or does not match its parameter's shape
            or dtype (the message names both); the scope is unchanged.
        ValueError: ``dirname`` and ``filename`` are both None (or ``filename`` is not bytes with
            ``dirname=None``).
        TypeError: ``main_program`` is not a Program / CompiledProgram.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> import tempfile
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 2])
        ...     y = fluid.layers.fc(x, size=1, param_attr=fluid.ParamAttr(
        ...         name="w", initializer=fluid.initializer.Constant(0.5)), bias_attr=False)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> path = tempfile.mkdtemp()
        >>> fluid.io.save_params(exe, path, main_program=main)
        >>> w = fluid.global_scope().find_var("w").get_tensor()
        >>> w.set(np.zeros((2, 1), "float32"), fluid.CPUPlace())
        >>> fluid.io.load_params(exe, path, main_program=main)
        >>> np.array(w).ravel()
        array([0.5, 0.5], dtype=float32)
    """
    load_vars(executor, dirname, main_program, predicate=is_parameter, filename=filename)


def load_persistables(executor: Any, dirname: Optional[str],
                      main_program: Optional[Program] = None,
                      filename: Union[None, str, bytes] = None) -> None:
    """Load every persistable variable of ``main_program`` (parameters, optimizer state, LR,
    counters) from what ``save_persistables`` wrote (see ``load_vars``), e.g. to resume
    training.

    Args:
        executor (Executor): the executor whose scope receives the values.
        dirname (str | None): the directory ``save_persistables`` wrote (None with the bytes in
            ``filename``).
        main_program (Program | None): the program whose persistables to load.
        filename (str | bytes | None): the combined file's name (or its bytes).

    Returns:
        None.

    Raises:
        FileNotFoundError: ``dirname`` or a variable's file does not exist.
        CheckpointError: (a RuntimeError) a file is corrupt or does not match its variable's
            shape or dtype (the message names the variable and the file); the scope is
            unchanged.
        ValueError: ``dirname`` and ``filename`` are both None (or ``filename`` is not bytes
            with ``dirname=None``).
        TypeError: ``main_program`` is not a Program / CompiledProgram.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> import tempfile
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 2])
        ...     y = fluid.layers.fc(x, size=1, param_attr=fluid.ParamAttr(
        ...         name="w", initializer=fluid.initializer.Constant(0.5)), bias_attr=False)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> path = tempfile.mkdtemp()
        >>> fluid.io.save_persistables(exe, path, main_program=main, filename="all_vars")
        >>> w = fluid.global_scope().find_var("w").get_tensor()
        >>> w.set(np.zeros((2, 1), "float32"), fluid.CPUPlace())
        >>> fluid.io.load_persistables(exe, path, main_program=main, filename="all_vars")
        >>> np.array(w).ravel()
        array([0.5, 0.5], dtype=float32)
    """
    load_vars(executor, dirname, main_program, predicate=is_persistable, filename=filename)


# -- issue 16: fluid 1.8's parameter-value helpers (fluid/io.py there) --------------------------


def get_parameter_value(para: Parameter, executor: Any) -> np.ndarray:
    """The current value of parameter ``para`` in the global scope, as a NumPy array (a copy).

    TypeError if ``para`` is not a Parameter (fluid asserted "The input variable is not
    parameter."), RuntimeError if it has no value yet (run the startup program first).
    ``executor`` is accepted as in fluid; the value comes from the global scope, as fluid's.

    Args:
        para (Parameter): the parameter.
        executor (Executor): the executor whose scope holds it.
    Returns:
        numpy.ndarray: a copy of its value.

    Raises:
        TypeError: ``para`` is not a Parameter.
        RuntimeError: the parameter has no value in the global scope (run the startup program).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     y = fluid.layers.fc(fluid.data("x", [-1, 2]), size=1, bias_attr=False,
        ...         param_attr=fluid.ParamAttr(name="w", initializer=fluid.initializer.Constant(2.0)))
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> fluid.io.get_parameter_value(main.global_block().var("w"), exe).ravel()
        array([2., 2.], dtype=float32)
    """
    if not is_parameter(para):
        raise TypeError(f"get_parameter_value: The input variable is not parameter: expected "
                        f"a fluid Parameter, received {type(para).__name__} "
                        f"{getattr(para, 'name', para)!r}")
    v = _scope().find_var(para.name)
    if v is None or not v.is_initialized():
        raise RuntimeError(f"get_parameter_value: parameter '{para.name}' has no value in the "
                           f"global scope; run the startup program (or load it) first")
    return np.array(v.get_tensor(), copy=True)


def get_parameter_value_by_name(name: str, executor: Any,
                                program: Optional[Program] = None) -> np.ndarray:
    """``get_parameter_value`` of the parameter called ``name`` in ``program``'s global block
    (default: the default main program). ValueError if the program has no such variable,
    TypeError if it is not a parameter.

    Args:
        name (str): the parameter's name.
        executor (Executor): the executor whose scope holds it.
        program (Program | None): where to look the name up (default: the default main
            program).
    Returns:
        numpy.ndarray: a copy of the value.

    Raises:
        ValueError: ``program``'s global block has no variable ``name``.
        TypeError: the variable is not a Parameter, or ``name`` is unhashable (e.g. a list).
        RuntimeError: the parameter has no value in the global scope (run the startup program).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     y = fluid.layers.fc(fluid.data("x", [-1, 2]), size=1, bias_attr=fluid.ParamAttr(
        ...         name="b", initializer=fluid.initializer.Constant(0.25)))
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> fluid.io.get_parameter_value_by_name("b", exe, main)
        array([0.25], dtype=float32)
    """
    program = default_main_program() if program is None else program
    block = program.global_block()
    if not block.has_var(name):
        raise ValueError(f"get_parameter_value_by_name: the program has no variable named "
                         f"{name!r}")
    return get_parameter_value(block.var(name), executor)
