"""Entering and leaving dygraph mode, ``no_grad`` and ``to_variable`` (fluid 1.8's
``fluid.dygraph.base``)."""
from __future__ import annotations

import contextlib
import functools
from typing import Any, Callable, Iterator, Optional

import numpy as np

from ..core import mode as _mode
from ..core import names, threads
from ..core.ir import Program, Variable, default_main_program, program_guard
from ..framework import ComplexVariable
from .tensor import VarBase
from .tracer import Tracer

__all__ = ["BackwardStrategy", "guard",
           "enable_dygraph", "disable_dygraph", "enabled", "no_grad", "to_variable",
           "to_tensor", "seed", "enable_imperative", "disable_imperative"]

_seed: Optional[int] = None


def _new_tracer() -> Tracer:
    s = default_main_program().random_seed or _seed
    return Tracer(seed=s)


@contextlib.contextmanager
def guard(place: Any = None) -> Iterator[None]:
    """Run the body in dygraph mode: ops execute immediately. The random stream is seeded from
    ``fluid.default_main_program().random_seed`` (or ``fluidlite.seed(n)``) when set, so two runs
    give the same numbers bit for bit. Parameter and temporary names restart (``linear_0``)
    inside each guard, as fluid 1.8's guard does with a fresh unique-name generator, and the
    default programs are fresh ones (set ``random_seed`` on them inside the guard).

    Args:
        place (Place | None): accepted for fluid's signature (everything runs on the CPU).
    Returns:
        contextmanager: a context in which dygraph mode is on (with fresh default programs and
        name generator); the previous mode is restored on exit.
    Raises:
        None: entering and leaving the guard do not raise (errors of the body propagate).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> with fluid.dygraph.guard():
        ...     x = fluid.dygraph.to_variable(np.array([1.0, 2.0], "float32"))
        ...     y = fluid.layers.scale(x, scale=3.0)        # runs now
        ...     print(y.numpy())
        [3. 6.]
    """
    old = _mode.tracer
    # BLAS on one thread, as for the plans a replayed step runs: an eager step and its replay
    # give the same bits
    threads.hold()
    with program_guard(Program(), Program()), names.guard():
        tracer = _new_tracer()
        _mode.tracer = tracer
        try:
            yield
        finally:
            _mode.tracer = old


def enable_dygraph(place: Any = None) -> None:
    """Switch to dygraph mode until ``disable_dygraph()`` (Paddle 2's ``disable_static``).

    Args:
        place (Place | None): accepted for fluid's signature.
    Returns:
        None: dygraph mode is on (unchanged if it already was).
    Raises:
        None: this switch does not raise.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> fluid.enable_dygraph()
        >>> fluid.in_dygraph_mode()
        True
        >>> fluid.disable_dygraph()
        >>> fluid.in_dygraph_mode()
        False
    """
    if _mode.tracer is None:
        _mode.tracer = _new_tracer()
        # a fresh record of dygraph parameter names per session, as fluid 1.8's enable_dygraph
        # (its guard switched unique_name); the name counters go on
        names.switch(names.generator)
        threads.hold()          # (as in guard)


def disable_dygraph() -> None:
    """Back to static mode.

    Args:
        None: this function takes no arguments.
    Returns:
        None: static mode is on.
    Raises:
        None: this switch does not raise.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> fluid.enable_dygraph()
        >>> fluid.disable_dygraph()                      # back to building programs
        >>> fluid.in_dygraph_mode()
        False
    """
    _mode.tracer = None


enable_imperative, disable_imperative = enable_dygraph, disable_dygraph


def enabled() -> bool:
    """Whether dygraph mode is on.

    Args:
        None: this function takes no arguments.
    Returns:
        bool: True in dygraph mode.
    Raises:
        None: this query does not raise.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> fluid.dygraph.enabled()
        False
        >>> with fluid.dygraph.guard():
        ...     print(fluid.dygraph.enabled())
        True
    """
    return _mode.tracer is not None


def seed(n: int) -> None:
    """Seed the dygraph random stream (now, if in dygraph mode, and at every later guard)."""
    global _seed
    _seed = int(n)
    if _mode.tracer is not None:
        _mode.tracer.seed(_seed)


class _NoGrad:
    """``with no_grad():`` / ``@no_grad`` / ``@no_grad()``: ops run without recording autograd
    nodes; their outputs have ``stop_gradient=True``.

    Args:
        func (callable | None): the function to run without gradient recording (the
            ``@no_grad`` decorator form); None for ``with no_grad():`` / ``@no_grad()``.
    Returns:
        no_grad: a context manager, or (decorating) a function that runs ``func`` without
        recording.
    Raises:
        TypeError: ``no_grad()`` is called with something other than one function to decorate.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> with fluid.dygraph.guard():
        ...     x = fluid.dygraph.to_variable(np.ones(2, "float32"))
        ...     x.stop_gradient = False
        ...     with fluid.dygraph.no_grad():
        ...         y = x * 2
        ...     print(y.stop_gradient)
        True
    """

    def __init__(self, func: Optional[Callable] = None) -> None:
        self._func = func
        self._saved: list = []
        if func is not None:
            functools.update_wrapper(self, func)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._func is None:            # @no_grad() used as a decorator factory
            if len(args) == 1 and callable(args[0]) and not kwargs:
                return _NoGrad(args[0])
            raise TypeError("no_grad() takes a function to decorate")
        with _NoGrad():
            return self._func(*args, **kwargs)

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        if obj is None:
            return self
        return functools.partial(self.__call__, obj)

    def __enter__(self) -> None:
        tracer = _mode.tracer
        self._saved.append(tracer.has_grad if tracer is not None else None)
        if tracer is not None:
            tracer.has_grad = False

    def __exit__(self, *exc: Any) -> None:
        saved = self._saved.pop()
        if _mode.tracer is not None and saved is not None:
            _mode.tracer.has_grad = saved


no_grad = _NoGrad


def to_variable(value: Any, name: Optional[str] = None, zero_copy: Optional[bool] = None,
                dtype: Any = None) -> Any:
    """A dygraph tensor holding ``value`` (ndarray, number, list, or a tensor, returned as is),
    with ``stop_gradient=True`` as in fluid. ``zero_copy=True`` shares the ndarray's memory.

    Args:
        value (numpy.ndarray | number | list | tensor): the data.
        name (str | None): the tensor's name.
        zero_copy (bool | None): share the ndarray's memory instead of copying it.
        dtype (str | None): convert to this dtype.
    Returns:
        VarBase: a dygraph tensor (``stop_gradient=True``); for a complex value fluid 1.8's
        ``ComplexVariable`` of two such tensors, ``<name>.real`` and ``<name>.imag``.
    Raises:
        TypeError: ``value`` is a static Variable, an object array or holds strings, or
            ``dtype`` is unknown (or given for a complex value).
        RuntimeError: called outside dygraph mode.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> with fluid.dygraph.guard():
        ...     t = fluid.dygraph.to_variable(np.arange(3, dtype="float32"))
        ...     print(t.shape, t.dtype == fluid.core.VarDesc.VarType.FP32, t.numpy())
        [3] True [0. 1. 2.]
    """
    if isinstance(value, VarBase):
        return value
    if isinstance(value, Variable):
        raise TypeError(f"to_variable: '{value.name}' is a static Variable; to_variable takes a "
                        f"numpy array (static Variables cannot be used in dygraph mode)")
    if not _mode.tracer:
        raise RuntimeError("to_variable must be called in dygraph mode: inside "
                           "`with fluid.dygraph.guard():`")
    is_array = isinstance(value, np.ndarray)
    arr = np.array(value, copy=not zero_copy) if is_array else np.asarray(value)
    kind = arr.dtype.kind
    if kind == "O":
        raise TypeError(f"to_variable: the value{' ' + repr(name) if name else ''} is an object "
                        f"array (ragged lists or non-numeric items?); pass a numeric ndarray")
    if kind in "USV":       # a tensor holds numbers: ["a", 1] would become a string array
        raise TypeError(f"to_variable: the value{' ' + repr(name) if name else ''} holds "
                        f"strings or bytes (numpy dtype {arr.dtype}); pass numbers")
    if kind == "c":         # fluid 1.8: a ComplexVariable, two real tensors
        if dtype is not None:
            raise TypeError(f"to_variable: a complex value takes no dtype (its parts keep "
                            f"the precision of {arr.dtype}), but received dtype={dtype!r}")
        stem = name or names.generate("_generated_var")
        return ComplexVariable(
            VarBase(np.ascontiguousarray(arr.real), name=stem + ".real", stop_gradient=True),
            VarBase(np.ascontiguousarray(arr.imag), name=stem + ".imag", stop_gradient=True))
    if dtype is not None:
        from ..core.dtypes import to_numpy_dtype
        arr = arr.astype(to_numpy_dtype(dtype))
    elif kind == "f" and not is_array and arr.dtype == np.float64:
        arr = arr.astype(np.float32)          # Python floats: fluid's default float32
    return VarBase(arr, name=name, stop_gradient=True)     # unnamed: generated_tensor_N on use


def to_tensor(data: Any, dtype: Any = None, place: Any = None,
              stop_gradient: bool = True) -> VarBase:
    """Paddle 2's spelling of ``to_variable`` (with ``stop_gradient``)."""
    t = to_variable(data, dtype=dtype)
    if t is data:
        t = VarBase(t._array())
    t._stop_gradient = bool(stop_gradient)
    return t


class BackwardStrategy:
    """fluid 1.7/1.8's ``fluid.dygraph.BackwardStrategy`` (``loss.backward(strategy)``).
    ``sort_sum_gradient``: fluidlite always sums a tensor's gradient contributions in a fixed
    order (newest op first), so both settings give the same, deterministic result.

    Args:
        None: the constructor takes no arguments; set ``sort_sum_gradient`` (default False)
            afterwards.
    Returns:
        BackwardStrategy: the strategy for ``loss.backward(strategy)``.
    Raises:
        None: the constructor does not raise.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> with fluid.dygraph.guard():
        ...     strategy = fluid.dygraph.BackwardStrategy()
        ...     strategy.sort_sum_gradient = True
        ...     x = fluid.dygraph.to_variable(np.array([2.0], "float32"))
        ...     x.stop_gradient = False
        ...     y = x * x + x * 3
        ...     y.backward(strategy)
        ...     print(x.gradient())
        [7.]
    """

    def __init__(self) -> None:
        self.sort_sum_gradient = False


# what the modules below dygraph (clips, fluid.layers' control flow) use in dygraph mode
_mode.register("to_variable", to_variable)
_mode.register("guard", guard)
