"""Dygraph to static: ``TracedLayer`` (fluid 1.8's ``fluid.dygraph.TracedLayer``; users import it
from ``fluid.dygraph`` or ``fluid.dygraph.jit``).

``TracedLayer.trace(layer, inputs)`` runs ``layer(*inputs)`` once in dygraph mode while the
tracer records every op (type, the tensors of each slot, the checked attrs), then replays the
record into a static ``Program``: traced inputs become ``fluid.data`` feeds, parameters become
``Parameter``s of the same names, tensors made outside the trace (constants) become persistable
variables, everything else is a temporary named like its tensor. The program can be printed,
exported with ``fluidlite.viz``, run (``traced(inputs)``, with the layer's current parameter
values) and saved with ``save_inference_model``.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..core import mode as _mode
from ..core import names
from ..core.ir import Program, program_guard
from ..core.scope import Scope

from .tensor import ParamBase, VarBase

__all__ = ["TracedLayer", "feed_vars"]


def _as_list(x: Any) -> List[Any]:
    return list(x) if isinstance(x, (list, tuple)) else [x]


class TracedLayer:
    """A static program traced from a dygraph layer (see the module docstring).

    Args:
        program (Program): the traced static program.
        parameters (dict): ``{name: ParamBase}``, the dygraph parameters the program reads.
        feed_names (list of str): the program's feed variables, one per traced input.
        fetch_names (list of str | Variable): the fetched outputs (names or Variables).
        constants (dict | None): ``{name: ndarray}``, non-parameter values the program reads.
    Returns:
        TracedLayer: calling it with the inputs runs the static program and returns the outputs
        as numpy arrays; ``program`` is the traced Program. Usually built by
        ``TracedLayer.trace(layer, inputs)``, which returns ``(outputs, traced_layer)``.
    Raises:
        ValueError: a name in ``fetch_names`` is not a variable of the program; when called, the
            number of inputs differs from the traced one.
        RuntimeError: ``trace`` is called outside dygraph mode.
        TypeError: ``trace`` gets an input that is not a dygraph tensor.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> with fluid.dygraph.guard():
        ...     fc = fluid.dygraph.Linear(3, 2)
        ...     x = fluid.dygraph.to_variable(np.ones((1, 3), "float32"))
        ...     out, static_layer = fluid.dygraph.TracedLayer.trace(fc, inputs=[x])
        ...     print([op.type for op in static_layer.program.global_block().ops])
        ...     print(np.allclose(static_layer([x])[0], out.numpy()))
        ['mul', 'elementwise_add']
        True
    """

    def __init__(self, program: Program, parameters: Dict[str, ParamBase],
                 feed_names: List[str], fetch_names: List[Any],
                 constants: Optional[Dict[str, np.ndarray]] = None) -> None:
        """fluid 1.8's signature; ``fetch_names`` may also hold the fetched Variables, and
        ``constants`` are the non-parameter values the traced program reads."""
        self._program = program
        self._params = parameters
        self._constants = dict(constants or {})
        self._feed_names = feed_names
        block = program.global_block()
        self._fetch_vars = [block.var(f) if isinstance(f, str) else f for f in fetch_names]
        self._scope = Scope()
        self._exe = None

    def set_strategy(self, build_strategy: Any = None, exec_strategy: Any = None) -> None:
        """Accepted as fluid 1.8's (the strategies tune multi-device graph execution; a
        fluidlite plan runs on one CPU and ignores them); checks their types as fluid did.

        Args:
            build_strategy (BuildStrategy | None): fluid's graph-build settings (type-checked, then
                ignored).
            exec_strategy (ExecutionStrategy | None): fluid's execution settings (type-checked, then
                ignored).
        Returns:
            None: the strategies are stored.
        Raises:
            TypeError: ``build_strategy`` is not a ``BuildStrategy`` or ``exec_strategy`` not an
                ``ExecutionStrategy``.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> with fluid.dygraph.guard():
            ...     fc = fluid.dygraph.Linear(2, 2)
            ...     x = fluid.dygraph.to_variable(np.ones((1, 2), "float32"))
            ...     out, traced = fluid.dygraph.TracedLayer.trace(fc, inputs=[x])
            ...     traced.set_strategy(build_strategy=fluid.BuildStrategy(),
            ...                         exec_strategy=fluid.ExecutionStrategy())
            ...     print(np.allclose(traced([x])[0], out.numpy()))
            True
        """
        from ..compiler import BuildStrategy, ExecutionStrategy
        if build_strategy is not None and not isinstance(build_strategy, BuildStrategy):
            raise TypeError(f"build_strategy must be a fluid.BuildStrategy, but received "
                            f"{type(build_strategy).__name__}")
        if exec_strategy is not None and not isinstance(exec_strategy, ExecutionStrategy):
            raise TypeError(f"exec_strategy must be a fluid.ExecutionStrategy, but received "
                            f"{type(exec_strategy).__name__}")
        self._build_strategy, self._exec_strategy = build_strategy, exec_strategy

    @property
    def program(self) -> Program:
        return self._program

    @staticmethod
    def trace(layer: Any, inputs: Any) -> Tuple[Any, "TracedLayer"]:
        """``(layer(*inputs), traced_layer)``; must be called in dygraph mode."""
        tracer = _mode.tracer
        if tracer is None:
            raise RuntimeError("TracedLayer.trace must be called in dygraph mode (inside "
                               "`with fluid.dygraph.guard():`)")
        ins = _as_list(inputs)
        for x in ins:
            if not isinstance(x, VarBase):
                raise TypeError(f"TracedLayer.trace: inputs must be dygraph tensors, got "
                                f"{type(x).__name__}")
        record: List[Any] = []
        tracer.recorder = record
        try:
            outputs = layer(*ins)
        finally:
            tracer.recorder = None
        traced = _build(record, ins, _as_list(outputs))
        return outputs, traced

    def _sync(self) -> None:
        for name, p in self._params.items():
            self._scope.var(name).get_tensor().set(p._array())
        for name, value in self._constants.items():
            self._scope.var(name).get_tensor().set(value)

    def __call__(self, inputs: Any) -> List[np.ndarray]:
        """Run the static program on ``inputs`` (arrays or tensors) with the layer's current
        parameters; returns the outputs as arrays."""
        from ..executor import Executor
        from ..core.scope import CPUPlace
        ins = _as_list(inputs)
        if len(ins) != len(self._feed_names):
            raise ValueError(f"TracedLayer: expected {len(self._feed_names)} inputs, got "
                             f"{len(ins)}")
        if self._exe is None:
            self._exe = Executor(CPUPlace())
        self._sync()
        feed = {n: np.asarray(x.numpy() if isinstance(x, VarBase) else x)
                for n, x in zip(self._feed_names, ins)}
        saved, _mode.tracer = _mode.tracer, None     # the executor builds nothing eagerly
        try:
            return self._exe.run(self._program, feed=feed, fetch_list=self._fetch_vars,
                                 scope=self._scope)
        finally:
            _mode.tracer = saved

    def save_inference_model(self, dirname: str, feed: Optional[Sequence[int]] = None,
                             fetch: Optional[Sequence[int]] = None, **kwargs: Any) -> List[str]:
        """``fluid.io.save_inference_model`` of the traced program: ``feed``/``fetch`` select
        inputs/outputs by index (default: all).

        Args:
            dirname (str): the directory to write.
            feed (list of int | None): indices of the inputs to keep as feeds (default: all).
            fetch (list of int | None): indices of the outputs to fetch (default: all).
            **kwargs: further arguments of ``fluid.io.save_inference_model`` (e.g.
                ``model_filename``, ``params_filename``).
        Returns:
            list of str: the names of the saved fetch targets.
        Raises:
            IndexError: an index in ``feed`` / ``fetch`` is out of range.
            OSError: ``dirname`` cannot be written (the errors of ``fluid.io.save_inference_model``
                propagate).

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> import tempfile
            >>> path = tempfile.mkdtemp()
            >>> with fluid.dygraph.guard():
            ...     fc = fluid.dygraph.Linear(3, 2)
            ...     x = fluid.dygraph.to_variable(np.ones((1, 3), "float32"))
            ...     out, traced = fluid.dygraph.TracedLayer.trace(fc, inputs=[x])
            ...     traced.save_inference_model(path)
            ['save_infer_model/scale_0']
            >>> exe = fluid.Executor(fluid.CPUPlace())
            >>> program, feeds, fetches = fluid.io.load_inference_model(path, exe)
            >>> np.allclose(exe.run(program, feed={feeds[0]: np.ones((1, 3), "float32")},
            ...                     fetch_list=fetches)[0], out.numpy())
            True
        """
        from ..executor import Executor
        from ..core.scope import CPUPlace, scope_guard
        from .. import io
        feeds = [self._feed_names[i] for i in (feed if feed is not None
                                               else range(len(self._feed_names)))]
        fetches = [self._fetch_vars[i] for i in (fetch if fetch is not None
                                                 else range(len(self._fetch_vars)))]
        self._sync()
        saved, _mode.tracer = _mode.tracer, None
        try:
            with scope_guard(self._scope):
                return io.save_inference_model(dirname, feeds, fetches, Executor(CPUPlace()),
                                               main_program=self._program, **kwargs)
        finally:
            _mode.tracer = saved


def feed_vars(block: Any, inputs: Sequence[VarBase], vars_: Dict[int, Any]) -> List[str]:
    """One data variable per traced input tensor (its name, else ``feed_i``; batch dim -1),
    recorded in ``vars_`` under the tensor's id; returns the feed names in order."""
    names_ = []
    for i, x in enumerate(inputs):
        name = f"feed_{i}" if x._name is None else x._name
        vars_[id(x)] = block.create_var(name=name, shape=[-1] + x.shape[1:] if x.shape else [],
                                        dtype=x.dtype, is_data=True, need_check_feed=True,
                                        stop_gradient=True)
        names_.append(name)
    return names_


def _build(record: List[Any], inputs: List[VarBase], outputs: List[Any]) -> TracedLayer:
    program, startup = Program(), Program()
    block = program.global_block()
    vars_: Dict[int, Any] = {}
    params: Dict[str, ParamBase] = {}
    constants: Dict[str, np.ndarray] = {}
    produced = {id(v) for _, _, outs, _ in record for vs in outs.values() for v in vs}
    feed_names = []
    saved, _mode.tracer = _mode.tracer, None
    try:
        with program_guard(program, startup):
            feed_names.extend(feed_vars(block, inputs, vars_))

            def static(t: VarBase) -> Any:
                got = vars_.get(id(t))
                if got is not None:
                    return got
                if isinstance(t, ParamBase):
                    got = block.create_parameter(name=t.name, shape=t.shape, dtype=t.dtype,
                                                 trainable=t.trainable)
                    params[t.name] = t
                elif id(t) in produced:
                    got = block.create_var(name=t._name or names.generate("traced.tmp"),
                                           dtype=t.dtype, shape=t.shape)
                else:
                    got = block.create_var(name=t._name or names.generate("traced.const"),
                                           dtype=t.dtype, shape=t.shape, persistable=True)
                    constants[got.name] = np.array(t._array())
                vars_[id(t)] = got
                return got

            for op_type, ins, outs, attrs in record:
                block.append_op(type=op_type,
                                inputs={k: [static(t) for t in vs] for k, vs in ins.items()},
                                outputs={k: [static(t) for t in vs] for k, vs in outs.items()},
                                attrs=dict(attrs))
            fetch = [static(o) for o in outputs]
    finally:
        _mode.tracer = saved
    return TracedLayer(program, params, feed_names, fetch, constants)
