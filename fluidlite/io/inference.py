"""``fluid.io``'s inference models: ``save_inference_model`` (a pruned program with feed/fetch
ops and its persistables, one all-or-nothing publish) and ``load_inference_model``."""
from __future__ import annotations

import os
import warnings
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union
from ..formats import checkpoint
from ..formats.checkpoint import CheckpointError
from ..core.dtypes import VarType
from ..core import rewrite
from ..core.ir import OpRole, Program, Variable
from ..core.prune import inference_optimize, prune_with_input
from ..formats.serialize import loads_program
from ..formats import paddle as paddle_format
from .files import (_MODEL, _assign, _check_format, _program, _program_bytes, _scope,
                    _select, _value)
from .variables import (_publish, _read_combined_buffer, _read_combined_file, _read_var_files,
                        _var_files, is_persistable)


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


def _scale_targets(program: Program, target_names: Sequence[str]) -> List[str]:
    """fluid 1.8 fetches ``save_infer_model/scale_<i>`` = scale(target_i, 1.0), so that a
    target that is also an op's input (or a feed) survives inference passes; returns those
    names. Unlike 1.8 the scale ops go into the saved copy, not the caller's program."""
    block, out = program.global_block(), []
    with rewrite.role(program, OpRole.Forward):
        for i, name in enumerate(target_names):
            src = block.var(name)
            dst = block.create_var(name=f"save_infer_model/scale_{i}", dtype=src.dtype,
                                   shape=src.shape, lod_level=src.lod_level)
            rewrite.append(block, "scale", {"X": [src]}, {"Out": [dst]},
                           {"scale": 1.0, "bias": 0.0, "bias_after_scale": True})
            out.append(dst.name)
    return out


def save_inference_model(dirname: str, feeded_var_names: Union[str, Sequence[str]],
                         target_vars: Union[Variable, Sequence[Variable]], executor: Any,
                         main_program: Optional[Program] = None,
                         model_filename: Optional[str] = None,
                         params_filename: Optional[str] = None,
                         export_for_deployment: bool = True,
                         program_only: bool = False, *, format: str = "paddle") -> List[str]:
    """Prune ``main_program`` to what computes ``target_vars`` from ``feeded_var_names``, switch
    it to test mode, add feed/fetch ops, and write it to ``dirname/__model__`` (or
    ``model_filename``) plus its persistables (one file each, or ``params_filename``), all in
    one all-or-nothing publish. Returns the fetched names: as fluid 1.8, each target is fetched
    through ``save_infer_model/scale_<i>`` (a ``scale`` by 1). ``main_program`` may be a
    ``CompiledProgram``. ``format``: ``"paddle"``
    (ProgramDesc protobuf and tensor streams, as fluid 1.8) or ``"json"`` (see save_vars).

    Args:
        dirname (str): the directory to write (created if needed).
        feeded_var_names (str | list of str): the inputs the pruned program keeps.
        target_vars (Variable | list of Variable): the outputs.
        executor (Executor): the executor whose scope holds the parameters.
        main_program (Program | None): the program (default: the default main program).
        model_filename (str | None): the program's file name (default ``__model__``).
        params_filename (str | None): one combined parameter file instead of one file per
            parameter.
        export_for_deployment (bool, default True): prune to what the targets need.
        program_only (bool, default False): write the program but no parameters.
        format (str, default "paddle"): ``"paddle"`` (what fluid 1.8 writes) or ``"json"``.
    Returns:
        list of str: the names of the fetch targets in the saved program.

    Raises:
        ValueError: ``format`` is unknown; ``feeded_var_names`` is not a str or list of str;
            ``target_vars`` is not a (non-empty list of) Variable; ``dirname`` or ``model_filename``
            is empty; a feed name is not in the program; or the program file name clashes with a
            parameter file.
        TypeError: ``main_program`` is neither a Program nor a CompiledProgram.
        RuntimeError: a persistable to save has no value in the scope (run the startup program
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
        >>> fluid.io.save_inference_model(path, ["x"], [y], exe, main_program=main)
        ['save_infer_model/scale_0']
        >>> sorted(f for f in os.listdir(path) if not f.startswith("."))
        ['__model__', 'w']
    """
    _check_format(format)
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
    if export_for_deployment:
        pruned = prune_with_input(program, list(feeded_var_names), list(target_vars))
        pruned = inference_optimize(pruned, prune_read_op=True)
        target_names = _scale_targets(pruned, target_names)
        _prepend_feed_ops(pruned, feeded_var_names)
        _append_fetch_ops(pruned, target_names)
    else:
        pruned = program.clone()
        model_basename += ".main_program"
    files: Dict[str, bytes] = {}
    if program_only:
        warnings.warn("save_inference_model specified the param `program_only` to True, It "
                      "will not save params of Program.", stacklevel=2)
    else:
        selected = _select(pruned, None, is_persistable)
        if not selected:
            warnings.warn("no variable in your model, please ensure there are any variables "
                          "in your model to save", stacklevel=2)
        scope = _scope()
        arrays = {v.name: _value(scope, v.name) for v in selected}
        params_basename = os.path.basename(params_filename) if params_filename else None
        if arrays:
            files = _var_files(dirname, arrays, params_basename, format)[1]
    if model_basename in files:
        raise ValueError(f"save_inference_model: the program file '{model_basename}' would "
                         f"overwrite a parameter file of the same name; pass another "
                         f"model_filename or params_filename")
    files[model_basename] = _program_bytes(pruned, format)
    _publish(dirname, files)
    return target_names


def load_inference_model(dirname: str, executor: Any, model_filename: Optional[str] = None,
                         params_filename: Optional[str] = None,
                         pserver_endpoints: Optional[List[str]] = None) -> List[Any]:
    """Load what ``save_inference_model`` wrote into the global scope; returns
    ``[program, feed_target_names, fetch_targets]`` (fetch targets are Variables).

    Args:
        dirname (str): the directory ``save_inference_model`` wrote (fluidlite's, fluid 1.x's
            or Paddle 2.x's).
        executor (Executor): the executor whose scope receives the parameters.
        model_filename (str | None): the program's file name if not ``__model__``.
        params_filename (str | None): the combined parameter file, if one was written.
        pserver_endpoints (list | None): accepted for fluid's signature.
    Returns:
        list: ``[program, feed_target_names, fetch_targets]``.
    Raises:
        ValueError: ``dirname`` does not exist, or a file is missing, corrupt or does not
            match the program; the message names it.

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
        >>> _ = fluid.io.save_inference_model(path, ["x"], [y], exe, main_program=main)
        >>> program, feed_names, fetch_targets = fluid.io.load_inference_model(path, exe)
        >>> feed_names
        ['x']
        >>> exe.run(program, feed={"x": np.array([[1, 2]], "float32")}, fetch_list=fetch_targets)
        [array([[1.5]], dtype=float32)]
    """
    dirname = os.fspath(dirname) if dirname is not None else dirname
    if dirname is not None and not os.path.isdir(dirname) and \
            os.path.isfile(dirname + ".pdmodel") and model_filename is None:
        # issue 18: Paddle 2.x's path prefix: <prefix>.pdmodel + <prefix>.pdiparams
        prefix = os.path.basename(dirname)
        dirname = os.path.dirname(dirname) or "."
        model_filename = prefix + ".pdmodel"
        if params_filename is None and os.path.isfile(os.path.join(dirname,
                                                                   prefix + ".pdiparams")):
            params_filename = prefix + ".pdiparams"
    if dirname is None or not os.path.isdir(dirname):
        raise ValueError(f"There is no directory named '{dirname}'")
    model_basename = os.path.basename(model_filename) if model_filename else _MODEL
    params_basename = os.path.basename(params_filename) if params_filename else None
    with checkpoint.Reader(dirname) as reader:      # one consistent view: program and values
        # issue 18: as Paddle 2.x, "model" means model.pdmodel / model.pdiparams when only
        # those exist
        if not reader.exists(model_basename) and reader.exists(model_basename + ".pdmodel"):
            model_basename += ".pdmodel"
        if params_basename and not reader.exists(params_basename) and \
                reader.exists(params_basename + ".pdiparams"):
            params_basename += ".pdiparams"
        program = _read_program(reader, model_basename)
        selected = _select(program, None, is_persistable)
        if params_basename:
            arrays = _read_combined_file(reader, params_basename, selected)
        else:
            arrays = _read_var_files(reader, selected)
    _assign(arrays)
    feed_target_names, fetch_targets = feed_fetch_targets(program)
    return [program, feed_target_names, fetch_targets]


def _read_program(reader: checkpoint.Reader, name: str) -> Program:
    path = reader.display(name)
    if not reader.exists(name):
        raise FileNotFoundError(f"program file '{path}' does not exist")
    data = reader.read_bytes(name, "the program")
    return _program_of(data, f"program file '{path}'", name.endswith(".json"))


def _program_of(data: bytes, source: str, json_name: bool = False) -> Program:
    """The program in ``data``: a ProgramDesc protobuf (issue 18) or fluidlite's JSON."""
    if not paddle_format.is_json_program(data):
        try:
            return paddle_format.program_from_bytes(data, source=source)
        except paddle_format.PaddleFormatError:
            if not json_name:
                raise           # else: JSON's own error says why it is not a JSON program
    return loads_program(data, source=source)


def load_inference_buffers(model_buffer: bytes, params_buffer: bytes) -> List[Any]:
    """``load_inference_model`` from memory (fluid's ``AnalysisConfig.set_model_buffer``):
    ``model_buffer`` holds a program file's bytes (a ProgramDesc protobuf, ``__model__`` /
    ``.pdmodel``, or fluidlite's JSON program), ``params_buffer`` a combined parameter file's
    (``params_filename=`` of ``save_inference_model``: Paddle's format or fluidlite's). Every
    value is read and checked before the global scope receives them.

    Returns:
        list: ``[program, feed_target_names, fetch_targets]``, as ``load_inference_model``.

    Raises:
        PaddleFormatError / ValueError: the program buffer holds no readable program.
        CheckpointError: the params buffer is empty, corrupt or does not match the program's
            persistable variables (the message names the buffer and the variable)."""
    program = _program_of(bytes(model_buffer), "the program buffer")
    selected = _select(program, None, is_persistable)
    arrays: Dict[str, Any] = {}
    if selected:
        if not params_buffer:
            raise CheckpointError(f"the params buffer is empty, but the program has "
                                  f"{len(selected)} persistable variables "
                                  f"('{selected[0].name}', ...) to load from it")
        arrays = _read_combined_buffer(bytes(params_buffer), selected, "the params buffer")
    _assign(arrays)
    feed_target_names, fetch_targets = feed_fetch_targets(program)
    return [program, feed_target_names, fetch_targets]


def read_program(path: str) -> Program:
    """The program in the file ``path`` (``__model__``, ``.pdmodel``, ``save_program``
    output), read through its directory's checkpoint manifest like every loader."""
    directory, name = os.path.split(os.fspath(path))
    with checkpoint.Reader(directory or ".") as reader:
        return _read_program(reader, name)


def feed_fetch_targets(program: Program) -> Tuple[List[str], List[Variable]]:
    """The feed variable names and fetch Variables of an inference program, by ``col``."""
    block = program.global_block()
    feeds = sorted((op.attrs.get("col", 0), op.output("Out")[0]) for op in block.ops
                   if op.type == "feed")
    fetches = sorted((op.attrs.get("col", 0), op.input("X")[0]) for op in block.ops
                     if op.type == "fetch")
    return [n for _, n in feeds], [block.var(n) for _, n in fetches]
