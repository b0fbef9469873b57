"""``fluid.dygraph.static_runner.StaticModelRunner``: an inference model saved by
``fluid.io.save_inference_model`` (or ``TracedLayer`` / ``ProgramTranslator``) loaded as a
dygraph ``Layer`` that can be run and fine-tuned (fluid 1.8).

The saved persistable variables become the layer's parameters (``ParamBase`` named
``<name>@LOADED``, as fluid 1.8 names them, holding the saved values); calling the layer runs
the program's ops one by one on dygraph tensors through the tracer, so ``loss.backward()``
reaches those parameters and a dygraph optimizer built on ``runner.parameters()`` trains them.
Ops with an ``is_test`` attribute (dropout, batch norm) run in training form after
``train()`` and in inference form after ``eval()`` (fluid 1.8 switched ``is_test`` the same
way); a layer starts in training mode. Programs with control-flow sub-blocks
(``conditional_block``, ``while``) are refused: they have no op-by-op dygraph form here.
"""
from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from ..core import mode as _mode
from ..core.ir import Block, Program
from ..core.scope import CPUPlace, Scope, scope_guard
from .base import to_variable
from .layers import Layer
from .tensor import ParamBase, VarBase

__all__ = ["StaticModelRunner"]

_LOADED = "@LOADED"
_SKIPPED_OPS = ("feed", "fetch")


class StaticModelRunner(Layer):
    """A saved inference model as a trainable dygraph ``Layer`` (see the module docstring).

    Args:
        model_dir (str): the directory ``save_inference_model`` wrote.
        model_filename (str | None): the program file's name in it (None: ``__model__``).
        params_filename (str | None): the single parameters file, when the model was saved
            with one (None: one file per variable).
    Returns:
        StaticModelRunner: call it with the model's inputs (one tensor or numpy array per feed
        target, in their saved order) to get its outputs (one tensor, or a list).
    Raises:
        RuntimeError: created outside dygraph mode (``fluid.dygraph.guard()``).
        ValueError: ``model_dir`` is not a directory, or the program has control-flow
            sub-blocks.
        OSError: the model files cannot be read (from ``fluid.io.load_inference_model``).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> import tempfile
        >>> path = tempfile.mkdtemp()
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 3])
        ...     y = fluid.layers.fc(x, 2)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> _ = fluid.io.save_inference_model(path, ["x"], [y], exe, main_program=main)
        >>> with fluid.dygraph.guard():
        ...     runner = fluid.dygraph.static_runner.StaticModelRunner(path)
        ...     out = runner(np.ones((4, 3), "float32"))
        ...     fluid.layers.mean(out).backward()
        ...     print(out.shape, [p.gradient().shape for p in runner.parameters()])
        [4, 2] [(3, 2), (2,)]
    """

    def __init__(self, model_dir: str, model_filename: Optional[str] = None,
                 params_filename: Optional[str] = None) -> None:
        super().__init__()
        if _mode.tracer is None:
            raise RuntimeError("StaticModelRunner: create it in dygraph mode, inside "
                               "fluid.dygraph.guard()")
        if not isinstance(model_dir, str) or not os.path.isdir(model_dir):
            raise ValueError(f"StaticModelRunner: model_dir must be the directory "
                             f"save_inference_model wrote, but {model_dir!r} is not a "
                             f"directory")
        program, feed_names, fetch_vars, values = _load(model_dir, model_filename,
                                                        params_filename)
        block = program.global_block()
        for op in block.ops:
            if any(isinstance(v, Block) for v in op.attrs.values()):
                raise ValueError(f"StaticModelRunner: the program in '{model_dir}' has the "
                                 f"control-flow op '{op.type}' with a sub-block, which runs "
                                 f"only as a static program; load it with "
                                 f"fluid.io.load_inference_model and an Executor instead")
        self._program = program
        self._feed_names: List[str] = list(feed_names)
        self._fetch_names: List[str] = [v.name for v in fetch_vars]
        self._loaded: Dict[str, ParamBase] = {}
        for name, value in values.items():
            param = ParamBase(value.shape, value.dtype, name=name + _LOADED)
            param.set_value(value)
            self._loaded[name] = param
            self.add_parameter(name.replace(".", "_"), param)

    def forward(self, inputs: Any) -> Any:
        """Run the program on ``inputs`` (one tensor / array, or a list of them in feed
        order); returns the fetch targets' tensors (one, or a list)."""
        ins = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
        if len(ins) != len(self._feed_names):
            raise ValueError(f"StaticModelRunner: the model takes {len(self._feed_names)} "
                             f"input(s) {self._feed_names}, but received {len(ins)}")
        env: Dict[str, VarBase] = dict(self._loaded)
        for name, value in zip(self._feed_names, ins):
            env[name] = value if isinstance(value, VarBase) else to_variable(np.asarray(value))
        tracer = _mode.tracer
        for op in self._program.global_block().ops:
            if op.type in _SKIPPED_OPS:
                continue
            inputs_ = {slot: [_read(env, n, op.type) for n in names]
                       for slot, names in op.inputs.items() if names}
            outputs = {slot: [env.setdefault(n, VarBase(None, name=n)) for n in names]
                       for slot, names in op.outputs.items() if names}
            attrs = dict(op.attrs)
            if "is_test" in attrs:
                attrs["is_test"] = not self.training
            tracer.trace_op(op.type, inputs_, outputs, attrs)
        outs = [_read(env, n, "fetch") for n in self._fetch_names]
        return outs[0] if len(outs) == 1 else outs


def _read(env: Dict[str, VarBase], name: str, op_type: str) -> VarBase:
    var = env.get(name)
    if var is None:
        raise ValueError(f"StaticModelRunner: op '{op_type}' reads '{name}', which neither a "
                         f"feed, a saved parameter nor an earlier op provides")
    return var


def _load(model_dir: str, model_filename: Optional[str], params_filename: Optional[str]
          ) -> Any:
    """``(program, feed names, fetch Variables, {persistable name: value})`` of the saved
    model, read with a private scope and executor (static mode for the duration)."""
    from ..executor import Executor
    from ..io import load_inference_model
    scope = Scope()
    saved, _mode.tracer = _mode.tracer, None
    try:
        with scope_guard(scope):
            program, feeds, fetches = load_inference_model(
                model_dir, Executor(CPUPlace()), model_filename=model_filename,
                params_filename=params_filename)
    finally:
        _mode.tracer = saved
    values = {}
    for var in _persistables(program):
        held = scope.find_var(var.name)
        if held is not None and held.is_initialized():
            values[var.name] = np.array(held.get_tensor())
    return program, feeds, fetches, values


def _persistables(program: Program) -> Sequence[Any]:
    return [v for v in program.list_vars()
            if v.persistable and v.name not in ("feed", "fetch")]
