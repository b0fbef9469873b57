"""Functional gradients: MindSpore's ``grad`` / ``value_and_grad`` on fluidlite's two engines.

``grad(fn, grad_position=0, weights=None, has_aux=False)`` returns a function computing, for
the same arguments as ``fn``, the gradients of ``fn``'s output w.r.t. the inputs selected by
``grad_position`` and/or the Parameters in ``weights``; ``value_and_grad`` returns
``(fn's output, gradients)``. The structure of the result (seed 003's table):

================  ========  ===================================  ==============================
grad_position     weights   ``grad`` returns                     ``value_and_grad`` returns
================  ========  ===================================  ==============================
``i``             None      grad of input i                      (out, grad of input i)
``(i, j)``        None      (gi, gj)                             (out, (gi, gj))
None              weights   (weight grads,)                      (out, (weight grads,))
``i``             weights   (gi, (weight grads,))                (out, (gi, (weight grads,)))
``(i, j)``        weights   ((gi, gj), (weight grads,))          (out, ((gi, gj), (weight grads,)))
None              None      ``ValueError`` naming both           same
================  ========  ===================================  ==============================

A single Parameter (not a list) as ``weights`` gives its gradient alone instead of a 1-tuple.
Outputs: with ``has_aux=False`` every output of ``fn`` is differentiated, each seeded with ones
of its shape (the gradient of the sum of all their elements); with ``has_aux=True`` only the
first one, and ``grad`` returns ``(gradients, aux)`` with ``aux`` the tuple of the other
outputs (``value_and_grad`` returns ``((out0, *aux), gradients)``). A selected input or weight
``fn`` does not depend on gets zeros. Gradients are in fluid's layouts (a ``Linear`` weight's
gradient is ``[in, out]``), as dygraph tensors (``stop_gradient=True``).

Two engines give the same numbers:

* eager (default): ``fn`` runs on dygraph tensors (numpy arrays and Python numbers are
  converted) and ``fluid.dygraph.grad`` differentiates the recorded graph. Outside
  ``fluid.dygraph.guard()`` the call runs in a temporary guard, as fluid's dygraph functions
  would need. Calls nest: ``grad(grad(f))`` gives second derivatives (the inner call then keeps
  its gradient graph).
* compiled (``jit=True``, MindSpore's graph mode): per input signature (each argument's shape
  and dtype; other arguments by value) ``fn`` is traced once into a static ``Program``
  (``fluid.dygraph.TracedLayer``'s record-and-replay: inputs become feeds ``arg_<i>``, dygraph
  parameters become Parameters of the same names) whose backward ops are appended by
  ``fluid.gradients``; the program is cached and every call runs it with the ``Executor``,
  reading the parameters' current values. ``grad_fn.program(*args)`` returns that program (print
  it, or export it with ``fluidlite.viz.export``: the backward ops have op_role Backward),
  ``grad_fn.last_program`` the last one used, and ``grad_fn.save_inference_model(dirname,
  *args)`` saves it with the parameters for ``fluid.io.load_inference_model``. As in any
    tracing compiler, Python control flow on tensor values is fixed at trace time, and tensors
  ``fn`` reads from outside that are not
  Parameters (its closure) are captured as constants at trace time.
  Called inside another functional ``grad`` (nested), a compiled function runs eagerly so the
  outer one can differentiate through it.
"""
from __future__ import annotations

import numbers
import threading
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from ..core import mode as _mode
from ..core.ir import Parameter, Program, Variable, program_guard

__all__ = ["grad", "value_and_grad", "GradFunction"]

Positions = Union[None, int, Sequence[int]]
Weights = Union[None, Parameter, Sequence[Parameter]]

_NESTING = threading.local()      # how many functional-grad calls are running (nesting)


def _depth() -> int:
    return getattr(_NESTING, "depth", 0)


class _Nested:
    """Count a running functional-grad call (the inner ones keep their gradient graph)."""

    def __enter__(self) -> None:
        _NESTING.depth = _depth() + 1

    def __exit__(self, *exc: Any) -> None:
        _NESTING.depth = _depth() - 1


def _check_fn(api: str, fn: Any) -> None:
    if isinstance(fn, Variable):
        raise TypeError(
            f"{api}: fn must be a function or a dygraph Layer to differentiate, but received "
            f"the tensor '{fn.name}'. To differentiate tensors already computed, use "
            f"fluid.dygraph.grad(outputs, inputs) (dygraph) or fluid.gradients(targets, inputs) "
            f"(static)")
    if not callable(fn):
        raise TypeError(f"{api}: fn must be a function or a dygraph Layer, but received "
                        f"{fn!r} of type {type(fn).__name__}")


def _check_positions(api: str, grad_position: Any) -> Optional[Tuple[int, ...]]:
    """``grad_position`` as a tuple of input indices (None stays None)."""
    if grad_position is None:
        return None
    items = grad_position if isinstance(grad_position, (tuple, list)) else (grad_position,)
    if isinstance(grad_position, (tuple, list)) and not grad_position:
        raise ValueError(f"{api}: grad_position must be an int, a non-empty tuple of ints or "
                         f"None, but received an empty {type(grad_position).__name__}")
    for p in items:
        if isinstance(p, (bool, np.bool_)) or not isinstance(p, numbers.Integral):
            raise TypeError(f"{api}: grad_position must be an int, a tuple of ints or None, but "
                            f"received {grad_position!r} (item {p!r} of type "
                            f"{type(p).__name__})")
        if p < 0:
            raise ValueError(f"{api}: grad_position must hold input indices >= 0, but received "
                             f"{grad_position!r}")
    return tuple(int(p) for p in items)


def _check_weights(api: str, weights: Any) -> Optional[List[Parameter]]:
    if weights is None:
        return None
    if isinstance(weights, Parameter):
        return [weights]
    if isinstance(weights, Variable) or not hasattr(weights, "__iter__"):
        raise TypeError(f"{api}: weights must be a Parameter or a list/tuple of Parameters (e.g. "
                        f"net.parameters()), but received {_describe(weights)}")
    found = list(weights)
    for i, w in enumerate(found):
        if not isinstance(w, Parameter):
            raise TypeError(f"{api}: weights must be Parameters (e.g. net.parameters()), but "
                            f"weights[{i}] is {_describe(w)}")
    return found


def _describe(x: Any) -> str:
    if isinstance(x, Variable):
        return f"the tensor '{x.name}' (not a Parameter)"
    return f"{x!r} of type {type(x).__name__}"


def _as_array(x: Any) -> Optional[np.ndarray]:
    """The array an argument stands for (as ``to_variable`` converts it: Python floats become
    float32), or None for an argument that is not numeric (passed to ``fn`` unchanged)."""
    from ..dygraph.tensor import VarBase
    if isinstance(x, VarBase):
        return x._array()
    if isinstance(x, np.ndarray):
        return x if x.dtype != object else None
    if isinstance(x, np.generic):
        return np.asarray(x)
    if isinstance(x, (bool, numbers.Number)) and not isinstance(x, complex):
        arr = np.asarray(x)
        return arr.astype(np.float32) if arr.dtype == np.float64 else arr
    return None


class GradFunction:
    """The function ``grad`` / ``value_and_grad`` return (see the module docstring).

    ``program(*args)`` traces (or finds in the cache) and returns the static Program computing
    the outputs and gradients for these arguments' signature, whichever engine the calls use;
    ``last_program`` is the last program a compiled call ran (None before); ``cache_size`` how
    many signatures were traced; ``clear_cache()`` forgets them; ``save_inference_model``
    saves one for ``fluid.io.load_inference_model``.

    Args:
        fn (callable): the function (or dygraph Layer) to differentiate.
        grad_position (int | tuple of int | None): the inputs to differentiate.
        weights (Parameter | list of Parameter | None): the parameters to differentiate.
        has_aux (bool): only the first output is differentiated; the others are returned.
        return_value (bool): the call returns ``(output, gradients)`` (``value_and_grad``).
        jit (bool): trace ``fn`` into a cached static Program and run it with the Executor.
    Returns:
        GradFunction: a callable; ``gf(*args)`` returns the gradients (or ``(value, gradients)``)
        arranged as the module docstring's table.
    Raises:
        TypeError: ``fn`` is a tensor or not callable, ``grad_position`` holds a non-int,
            ``weights`` holds a non-Parameter, or ``has_aux`` / ``jit`` is not a bool; when
            called, an argument is a static Variable or a selected input is not numeric.
        ValueError: ``grad_position`` and ``weights`` are both None, or ``grad_position`` is
            empty or negative; when called, a position is out of range.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> from fluidlite.autograd import grad
        >>> def f(x):
        ...     return fluid.layers.reduce_sum(x * x)
        >>> with fluid.dygraph.guard():
        ...     g = grad(f, jit=True)                    # a GradFunction
        ...     x = fluid.dygraph.to_variable(np.array([1.0, 2.0], "float32"))
        ...     print(g(x).numpy(), g.cache_size)
        ...     ops = [op.type for op in g.program(x).global_block().ops]
        ...     print("square" in ops or "elementwise_mul" in ops)
        [2. 4.] 1
        True
    """

    def __init__(self, fn: Any, grad_position: Positions, weights: Weights, has_aux: bool,
                 return_value: bool, jit: bool) -> None:
        api = "value_and_grad" if return_value else "grad"
        _check_fn(api, fn)
        positions = _check_positions(api, grad_position)
        weight_list = _check_weights(api, weights)
        if positions is None and weight_list is None:
            raise ValueError(f"{api}: grad_position and weights cannot both be None: select the "
                             f"inputs to differentiate (grad_position, e.g. 0 or (0, 1)) and/or "
                             f"the Parameters (weights, e.g. net.parameters())")
        if not isinstance(has_aux, bool):
            raise TypeError(f"{api}: has_aux must be a bool, but received {has_aux!r}")
        if not isinstance(jit, bool):
            raise TypeError(f"{api}: jit must be a bool, but received {jit!r}")
        self._api = api
        self._fn = fn
        self._single_position = positions is not None and not isinstance(grad_position,
                                                                           (tuple, list))
        self._positions = positions
        self._single_weight = isinstance(weights, Parameter)
        self._weights = weight_list
        self._has_aux = has_aux
        self._return_value = return_value
        self._jit = jit
        self._cache: Dict[Any, "_Compiled"] = {}
        self.last_program: Optional[Program] = None
        self.__wrapped__ = fn

    def __repr__(self) -> str:
        name = getattr(self._fn, "__name__", type(self._fn).__name__)
        return (f"<{self._api} of {name}: grad_position={self._positions}, "
                f"{len(self._weights or ())} weights, has_aux={self._has_aux}, jit={self._jit}>")

    @property
    def cache_size(self) -> int:
        return len(self._cache)

    def clear_cache(self) -> None:
        """Forget the traced programs (e.g. after switching a Layer that ``fn`` closes over
        between ``train()`` and ``eval()``: only ``fn``'s own mode is part of the signature)."""
        self._cache.clear()
        self.last_program = None

    # -- calling ----------------------------------------------------------------------------
    def __call__(self, *args: Any) -> Any:
        self._check_args(args)
        if self._jit and _depth() == 0:
            return self._compiled(args)
        if _mode.tracer is None:
            from ..dygraph.base import guard
            with guard():
                return self._eager(args)
        return self._eager(args)

    def program(self, *args: Any) -> Program:
        """The static Program (forward ops, then the backward ops ``fluid.gradients`` appended)
        for the signature of ``args``: traced on first use, then cached."""
        self._check_args(args)
        return self._entry(args)[0].program

    def save_inference_model(self, dirname: str, *args: Any, **kwargs: Any) -> List[str]:
        """Save ``program(*args)`` with ``fluid.io.save_inference_model`` (parameters
        included): its feeds are the numeric arguments (``arg_<i>``), its fetch targets
        ``fn``'s tensor outputs then the gradients (those of the inputs, then of the weights;
        a gradient that is identically zero because ``fn`` does not use that input is not
        fetched). ``kwargs`` go to ``save_inference_model``; returns the fetch names."""
        self._check_args(args)
        entry = self._entry(args)[0]
        entry.traced.save_inference_model(dirname, **kwargs)
        return [v.name for v in entry.traced._fetch_vars]

    def _check_args(self, args: Sequence[Any]) -> None:
        from ..dygraph.tensor import VarBase
        for i, a in enumerate(args):
            if isinstance(a, Variable) and not isinstance(a, VarBase):
                raise TypeError(f"{self._api}: input {i} is the static Variable '{a.name}': the "
                                f"function runs on dygraph tensors, numpy arrays or numbers "
                                f"(jit=True compiles it into its own static Program); to "
                                f"differentiate inside a static Program use "
                                f"fluid.gradients(targets, inputs)")
        for p in self._positions or ():
            if p >= len(args):
                raise ValueError(f"{self._api}: grad_position {p} is out of range: fn was "
                                 f"called with {len(args)} input(s) (valid: 0 to "
                                 f"{len(args) - 1})")
        for p in self._positions or ():
            if _as_array(args[p]) is None:
                raise TypeError(f"{self._api}: input {p} (selected by grad_position) must be a "
                                f"tensor, a numpy array or a number, but received "
                                f"{args[p]!r} of type {type(args[p]).__name__}")

    def _split(self, out: Any) -> Tuple[List[Any], List[Any]]:
        """(all outputs, the outputs to differentiate)."""
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        if self._has_aux and len(outs) < 2:
            raise ValueError(f"{self._api}: has_aux=True needs fn to return at least two outputs "
                             f"(the first is differentiated, the others are returned as aux), "
                             f"but it returned {len(outs)}")
        targets = outs[:1] if self._has_aux else outs
        from ..dygraph.tensor import VarBase
        for i, t in enumerate(targets):
            if not isinstance(t, VarBase):
                raise TypeError(f"{self._api}: output {i} of fn must be a tensor to be "
                                f"differentiated, but it is {_describe(t)}"
                                + ("" if self._has_aux else
                                   " (use has_aux=True to return other values after the first "
                                   "output)"))
        return outs, targets

    def _pack(self, out: Any, outs: List[Any], grads: List[Any]) -> Any:
        """Arrange the gradients (inputs', then weights') as the table says."""
        n = len(self._positions or ())
        result: Any = None
        if self._positions is not None:
            result = grads[0] if self._single_position else tuple(grads[:n])
        if self._weights is not None:
            wgrads = grads[n] if self._single_weight else tuple(grads[n:])
            result = wgrads if self._positions is None else (result, wgrads)
        if self._return_value:
            return out, result
        if self._has_aux:
            return result, tuple(outs[1:])
        return result

    # -- eager ------------------------------------------------------------------------------
    def _eager(self, args: Sequence[Any]) -> Any:
        from ..dygraph.autograd import grad as tensor_grad
        from ..dygraph.tensor import VarBase
        nested = _depth() > 0
        positions = set(self._positions or ())
        ins = []
        for i, a in enumerate(args):
            arr = _as_array(a)
            if arr is None:
                ins.append(a)
            elif i not in positions:
                ins.append(a if isinstance(a, VarBase) else VarBase(arr))
            elif nested and isinstance(a, VarBase) and not a.stop_gradient:
                ins.append(a)         # part of an outer call's graph: differentiate through it
            else:                     # a fresh leaf sharing the value (the caller's is untouched)
                ins.append(VarBase(arr, name=a._name if isinstance(a, VarBase) else None,
                                   stop_gradient=False))
        tracer = _mode.tracer
        has_grad, tracer.has_grad = tracer.has_grad, True
        try:
            with _Nested():
                out = self._fn(*ins)
        finally:
            tracer.has_grad = has_grad
        outs, targets = self._split(out)
        wrt = [ins[p] for p in self._positions or ()] + list(self._weights or ())
        for i, w in enumerate(self._weights or ()):
            if not isinstance(w, VarBase):
                raise TypeError(f"{self._api}: weights[{i}] '{w.name}' is a static Parameter; "
                                f"grad differentiates dygraph code: pass the Parameters of "
                                f"dygraph Layers (net.parameters())")
        seeds = [np.ones_like(t._array()) for t in targets]
        found = tensor_grad(targets, wrt, grad_outputs=seeds, retain_graph=nested,
                            create_graph=nested, allow_unused=True)
        grads = [g if g is not None else
                 VarBase(np.zeros_like(w._array()), name=w.name + "@GRAD", stop_gradient=True)
                 for g, w in zip(found, wrt)]
        if not nested:    # values come back as plain tensors, like the gradients
            outs = [o.detach() if isinstance(o, VarBase) else o for o in outs]
            out = type(out)(outs) if isinstance(out, (tuple, list)) else outs[0]
        return self._pack(out, outs, grads)

    # -- compiled ---------------------------------------------------------------------------
    def _signature(self, args: Sequence[Any]) -> Tuple[Any, ...]:
        key: List[Any] = []
        for a in args:
            arr = _as_array(a)
            key.append(("const", repr(a)) if arr is None else (arr.shape, arr.dtype.str))
        key.append(getattr(self._fn, "training", None))    # a Layer's train()/eval() mode
        return tuple(key)

    def _entry(self, args: Sequence[Any]) -> Tuple["_Compiled", Tuple[Any, ...]]:
        key = self._signature(args)
        entry = self._cache.get(key)
        if entry is None:
            if _mode.tracer is None:
                from ..dygraph.base import guard
                with guard():
                    entry = self._trace(args)
            else:
                entry = self._trace(args)
            self._cache[key] = entry
        return entry, key

    def _trace(self, args: Sequence[Any]) -> "_Compiled":
        from ..dygraph.jit import _build
        from ..dygraph.tensor import VarBase
        positions = set(self._positions or ())
        ins: List[Any] = []
        for i, a in enumerate(args):
            arr = _as_array(a)
            ins.append(a if arr is None else
                       VarBase(np.array(arr), name=f"arg_{i}", stop_gradient=i not in positions))
        tracer = _mode.tracer
        record: List[Any] = []
        saved = tracer.recorder, tracer.has_grad
        tracer.recorder, tracer.has_grad = record, True
        try:
            with _Nested():
                out = self._fn(*ins)
        finally:
            tracer.recorder, tracer.has_grad = saved
        outs, targets = self._split(out)
        feeds = [t for t in ins if isinstance(t, VarBase)]
        tensor_outs = [o for o in outs if isinstance(o, VarBase)]
        traced = _build(record, feeds, tensor_outs)
        program = traced.program
        block = program.global_block()
        fetch = list(traced._fetch_vars)
        wrt_names = [f"arg_{p}" for p in self._positions or ()]
        wrt_names += [w.name for w in self._weights or ()]
        wrt_vars = [block.vars.get(n) for n in wrt_names]
        for p in self._positions or ():
            block.var(f"arg_{p}").stop_gradient = False
        present = [v for v in wrt_vars if v is not None]
        by_id = {id(o): v for o, v in zip(tensor_outs, fetch)}
        target_vars = [by_id[id(t)] for t in targets]
        from ..backward import gradients
        saved_tracer, _mode.tracer = _mode.tracer, None
        try:
            with program_guard(program):
                found = iter(gradients(target_vars, present) if present else [])
        finally:
            _mode.tracer = saved_tracer
        grad_vars = [next(found) if v is not None else None for v in wrt_vars]
        # the traced layer fetches the outputs, then the gradients (its save_inference_model)
        traced._fetch_vars.extend(g for g in grad_vars if g is not None)
        out_shapes = [o._array().shape for o in tensor_outs]
        return _Compiled(traced, fetch, grad_vars, out_shapes, out, outs)

    def _compiled(self, args: Sequence[Any]) -> Any:
        from ..dygraph.tensor import VarBase
        entry, _ = self._entry(args)
        self.last_program = entry.program
        feed = {}
        for i, a in enumerate(args):
            arr = _as_array(a)
            if arr is not None:
                feed[f"arg_{i}"] = arr
        values, grad_values = entry.run(feed)
        wrt = [(args[p], f"arg_{p}") for p in self._positions or ()]
        wrt += [(w, w.name) for w in self._weights or ()]
        grads = []
        for (w, name), g in zip(wrt, grad_values):
            like = _as_array(w)
            arr = np.zeros_like(like) if g is None else np.asarray(g).reshape(like.shape)
            name = w.name if isinstance(w, VarBase) else name
            grads.append(VarBase(arr, name=name + "@GRAD", stop_gradient=True))
        it = iter(values)
        outs = [VarBase(next(it)) if isinstance(o, VarBase) else o for o in entry.outs]
        out = type(entry.out)(outs) if isinstance(entry.out, (tuple, list)) else outs[0]
        return self._pack(out, outs, grads)


class _Compiled:
    """One traced signature: the program, what to fetch, and how to run it."""

    def __init__(self, traced: Any, fetch: List[Variable], grad_vars: List[Optional[Variable]],
                 out_shapes: List[Tuple[int, ...]], out: Any, outs: List[Any]) -> None:
        self.traced = traced
        self.program = traced.program
        self.fetch = fetch
        self.grad_vars = grad_vars
        self.out_shapes = out_shapes
        self.out, self.outs = out, outs       # the traced outputs (structure; aux constants)
        self._exe: Any = None

    def run(self, feed: Dict[str, np.ndarray]) -> Tuple[List[np.ndarray], List[Any]]:
        """(output values, gradient values or None) for ``feed``, with the parameters' current
        values."""
        from ..executor import Executor
        from ..core.scope import CPUPlace
        if self._exe is None:
            self._exe = Executor(CPUPlace())
        self.traced._sync()
        fetch_list = self.fetch + [g for g in self.grad_vars if g is not None]
        saved, _mode.tracer = _mode.tracer, None     # the executor builds nothing eagerly
        try:
            res = self._exe.run(self.program, feed=feed, fetch_list=fetch_list,
                                scope=self.traced._scope)
        finally:
            _mode.tracer = saved
        values = [np.asarray(v).reshape(s) for v, s in zip(res, self.out_shapes)]
        rest = iter(res[len(self.fetch):])
        return values, [None if g is None else next(rest) for g in self.grad_vars]


def grad(fn: Any, grad_position: Positions = 0, weights: Weights = None,
         has_aux: bool = False, *, jit: bool = False) -> GradFunction:
    """MindSpore's ``grad``: a function returning the gradients of ``fn`` w.r.t. the inputs at
    ``grad_position`` (an int, a tuple of ints, or None) and the Parameters ``weights`` (one, a
    list/tuple, or None), arranged as the module docstring's table; ``has_aux=True``: only the
    first output is differentiated and the call returns ``(gradients, other outputs)``.
    ``jit=True`` traces ``fn`` once per input signature into a cached static Program (see
    ``GradFunction.program``).

    Args:
        fn (callable): a function of dygraph tensors returning a tensor (or a tuple whose first
            item is differentiated with ``has_aux``).
        grad_position (int | tuple of int | None, default 0): which positional inputs to
            differentiate; None: none.
        weights (Parameter | list of Parameter | None): parameters to differentiate too.
        has_aux (bool, default False): only the first output is differentiated; the others
            are returned as they are.
        jit (bool, default False): trace ``fn`` into a cached static Program and run that.
    Returns:
        GradFunction: called with ``fn``'s arguments, it returns the gradients (one per
        position, then the weights' gradients, as MindSpore arranges them).
    Raises:
        TypeError: ``fn`` is a tensor or not callable, ``grad_position`` holds a non-int,
            ``weights`` holds a non-Parameter, or ``has_aux`` / ``jit`` is not a bool; when
            called, an argument is a static Variable, a selected input is not numeric, or an
            output to differentiate is not a tensor.
        ValueError: ``grad_position`` and ``weights`` are both None, ``grad_position`` is empty
            or negative; when called, a position is out of range or ``has_aux`` is set while
            ``fn`` returns fewer than two outputs.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> from fluidlite.autograd import grad
        >>> def f(x, y):
        ...     return fluid.layers.reduce_sum(x * x * y)
        >>> with fluid.dygraph.guard():
        ...     x = fluid.dygraph.to_variable(np.array([1.0, 2.0], "float32"))
        ...     y = fluid.dygraph.to_variable(np.array([3.0, 4.0], "float32"))
        ...     dx, dy = grad(f, grad_position=(0, 1))(x, y)
        ...     print(dx.numpy(), dy.numpy())        # 2xy, x^2
        [ 6. 16.] [1. 4.]
    """
    return GradFunction(fn, grad_position, weights, has_aux, return_value=False, jit=jit)


def value_and_grad(fn: Any, grad_position: Positions = 0, weights: Weights = None,
                   has_aux: bool = False, *, jit: bool = False) -> GradFunction:
    """MindSpore's ``value_and_grad``: as ``grad``, but the call returns ``(fn's output,
    gradients)`` (with ``has_aux=True`` the output is the tuple of all of ``fn``'s outputs).

    Args:
        fn (callable): a function of dygraph tensors.
        grad_position (int | tuple of int | None, default 0): which inputs to differentiate.
        weights (Parameter | list of Parameter | None): parameters to differentiate too.
        has_aux (bool, default False): only the first output is differentiated.
        jit (bool, default False): compile into a cached static Program.
    Returns:
        GradFunction: called with ``fn``'s arguments, it returns ``(value, gradients)``.
    Raises:
        TypeError: ``fn`` is a tensor or not callable, ``grad_position`` holds a non-int,
            ``weights`` holds a non-Parameter, or ``has_aux`` / ``jit`` is not a bool; when
            called, an argument is a static Variable, a selected input is not numeric, or an
            output to differentiate is not a tensor.
        ValueError: ``grad_position`` and ``weights`` are both None, ``grad_position`` is empty
            or negative; when called, a position is out of range or ``has_aux`` is set while
            ``fn`` returns fewer than two outputs.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> from fluidlite.autograd import value_and_grad
        >>> with fluid.dygraph.guard():
        ...     fc = fluid.dygraph.Linear(2, 1, param_attr=fluid.ParamAttr(
        ...         initializer=fluid.initializer.Constant(1.0)))
        ...     def loss_fn(x):
        ...         out = fc(x)
        ...         return fluid.layers.reduce_sum(out * out), out
        ...     f = value_and_grad(loss_fn, grad_position=None, weights=fc.parameters(), has_aux=True)
        ...     (loss, out), (dw, db) = f(fluid.dygraph.to_variable(np.array([[1, 2]], "float32")))
        ...     print(loss.numpy(), dw.numpy().ravel(), db.numpy())
        [9.] [ 6. 12.] [6.]
    """
    return GradFunction(fn, grad_position, weights, has_aux, return_value=True, jit=jit)
