"""Dygraph tensors: ``VarBase`` (fluid 1.8's imperative tensor) and ``ParamBase``.

A ``VarBase`` holds a NumPy array (``numpy()``), its accumulated gradient (``gradient()``) and,
when an op that needs gradients produced it, the autograd node of that op (``_node``). It is a
``Variable`` subclass so that every ``fluid.layers`` function (which type-checks ``Variable``)
and the Variable operators of ``layers/math_op_patch.py`` accept it: its ``block`` is the
*eager block*, whose ``create_var`` makes a ``VarBase`` and whose ``append_op`` runs the op at
once through the tracer (one implementation of every operator and of ``x[...]``/``astype``).

``stop_gradient`` follows fluid: True for ``to_variable`` results and for outputs of ops none of
whose inputs needs a gradient, False for parameters.
"""
from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator, Optional, Sequence

import numpy as np

from ..core import mode as _mode
from ..core import names
from ..core.dtypes import VarType, convert_dtype, convert_np_dtype_to_dtype_, to_numpy_dtype
from ..core.ir import Parameter, Variable
from ..core.registry import VarSpec
from ..core.selected_rows import SelectedRows

__all__ = ["VarBase", "ParamBase", "EAGER_BLOCK"]


def _tracer() -> Any:
    tracer = _mode.tracer
    if tracer is None:
        raise RuntimeError("this dygraph operation needs dygraph mode: run it inside "
                           "`with fluid.dygraph.guard():` (or after fluid.enable_dygraph())")
    return tracer


class _EagerProgram:
    """What ``var.block.program`` is for a dygraph tensor: no ops are kept, nothing to undo."""

    _journal = None
    random_seed = 0

    def current_block(self) -> "_EagerBlock":
        return EAGER_BLOCK

    def global_block(self) -> "_EagerBlock":
        return EAGER_BLOCK

    def _bump(self) -> None:
        pass

    @contextlib.contextmanager
    def _role_guard(self, role: int = 0, role_var: Sequence[str] = ()) -> Iterator[None]:
        # op roles describe program sections; eager ops have none (rewrite.role still works,
        # so the static clip and regularizer code runs unchanged on dygraph gradients)
        yield

    _lr_schedule_guard = _optimized_guard = _backward_role_guard = _role_guard


class _EagerBlock:
    """The block of every dygraph tensor: ``append_op`` runs the op now (``Tracer.trace_op``),
    ``create_var`` returns an empty ``VarBase`` for the op to fill."""

    idx = 0
    program = _EagerProgram()

    def create_var(self, name: Optional[str] = None, dtype: Any = None,
                   shape: Optional[Sequence[int]] = None, persistable: bool = False,
                   stop_gradient: bool = False, **_: Any) -> "VarBase":
        return VarBase(None, name=name, persistable=persistable, stop_gradient=stop_gradient,
                       shape=shape, dtype=dtype)

    def append_op(self, type: str, inputs: Any = None, outputs: Any = None, attrs: Any = None,
                  stop_gradient: bool = False) -> Any:
        return _tracer().trace_op(type, inputs, outputs, attrs, stop_gradient)

    def _find_var_recursive(self, name: str) -> None:
        return None

    def has_var(self, name: str) -> bool:
        return False

    vars: dict = {}


EAGER_BLOCK = _EagerBlock()


_VARTYPES: dict = {}     # numpy dtype -> VarType (VarBase.dtype)


def _no_autograd(*args: Any, **kwargs: Any) -> None:
    raise RuntimeError("fluidlite.dygraph.autograd is not loaded (import fluidlite.dygraph)")


# ``VarBase.backward``'s reverse pass, ``autograd.run_backward``: autograd builds on the
# tracer's nodes, which build on this module, so it installs itself here when imported (the
# dygraph package imports it) instead of being imported from here
_run_backward: Callable[..., None] = _no_autograd


def install_backward(run_backward: Callable[..., None]) -> None:
    """Set the function ``VarBase.backward`` runs: ``(tensors, grad_tensors, retain_graph)``."""
    global _run_backward
    _run_backward = run_backward


def _settle() -> None:
    """Materialize the step being replayed, if any (before something it must not see)."""
    tracer = _mode.tracer
    if tracer is not None and tracer._replay.active is not None:
        tracer._replay.active.materialize()


def _note_read(t: Any) -> None:
    """Python reads ``t``'s value: a ``@declarative`` trace in progress must know (its
    control flow may depend on the value; see declarative.py)."""
    tracer = _mode.tracer
    if tracer is not None and tracer.recorder is not None:
        on_read = getattr(tracer.recorder, "on_read", None)
        if on_read is not None:
            on_read(t)


class VarBase(Variable):
    """An imperative tensor (see the module docstring).

    A replayed step's pending output (replay.py; always a plain ``VarBase``) has ``_pending``
    set and no ``_value`` attribute at all, so that reading ``_value`` anywhere runs the step
    (``__getattr__``); its shape and dtype are the recorded ``_decl``. A parameter whose
    gradient is pending has ``_pending`` set and no ``_grad``, and keeps its ``_value``. The
    hot paths read attributes, never ``__dict__``: CPython keeps an instance's attributes
    without a dict until ``__dict__`` is asked for, and a dict is one more object for the
    collector to trace (a replayed LSTM step makes ~700 tensors).
    """

    # plain attribute stores: there is no program to journal (Variable journals its writes)
    __setattr__ = object.__setattr__
    _dygraph_tensor = True           # what core.mode.is_tensor reads (passes cannot import this)
    type = VarType.LOD_TENSOR
    lod_level = 0
    op = None
    error_clip = None
    is_data = False
    _hint = "generated_tensor"       # what an unnamed tensor is named after (on first use)
    _pending = None                  # the replayed step this tensor waits for (replay.py)

    def __init__(self, value: Optional[np.ndarray] = None, name: Optional[str] = None,
                 stop_gradient: bool = True, persistable: bool = False,
                 shape: Optional[Sequence[int]] = None, dtype: Any = None) -> None:
        self._value = value
        self._name = name
        self._grad = None
        self._node = None
        self._stop_gradient = stop_gradient
        self._persistable = persistable
        self._decl = (shape, dtype)

    def __getattr__(self, name: str) -> Any:
        # only reached for attributes missing from the instance: the value of a tensor a
        # replayed step has not computed yet, or a gradient it has not (replay.py)
        d = self.__dict__
        if name in ("_value", "_grad") and "_pending" in d:
            d["_pending"].materialize()
            return d[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    # -- identity and metadata ------------------------------------------------------------
    @property
    def block(self) -> _EagerBlock:
        """The eager block (dygraph mode only: a dygraph tensor has no place in a Program)."""
        if _mode.tracer is None:
            raise TypeError(f"the dygraph tensor '{self.name}' cannot be used in a static "
                            f"Program (it only exists in dygraph mode); use its value "
                            f"({self.name}.numpy()) as a feed or with fluid.layers.assign")
        return EAGER_BLOCK

    @property
    def name(self) -> str:
        if self._name is None:
            # (a str, a names.OpStem or a names.SoleStem)
            self._name = names.generate(str(self._hint))
        return self._name

    @name.setter
    def name(self, new: str) -> None:
        self._name = new

    @property
    def shape(self) -> list:
        # (a pending output has no _value and knows its shape: _decl; see the class docstring)
        v = self._value if self._pending is None or self.__class__ is not VarBase else None
        if v is not None:
            return list(v.shape)
        shape = self._decl[0]
        return [int(s) for s in shape] if shape is not None else []

    @property
    def _shape(self) -> tuple:
        return tuple(self.shape)

    @property
    def dtype(self) -> Optional[VarType]:
        v = self._value if self._pending is None or self.__class__ is not VarBase else None
        if v is not None:
            dt = v.dtype
            vt = _VARTYPES.get(dt)
            if vt is None:          # a dict hit is ~30x cheaper than the conversion
                vt = _VARTYPES[dt] = convert_np_dtype_to_dtype_(dt)
            return vt
        dt = self._decl[1]
        if dt.__class__ is VarType:         # (a pending tensor's, as replay.py records it)
            return dt
        return convert_np_dtype_to_dtype_(dt) if dt is not None else None

    @property
    def _dtype(self) -> Optional[VarType]:
        return self.dtype

    @property
    def spec(self) -> VarSpec:
        return VarSpec(self.shape, self.dtype or VarType.FP32)

    @property
    def ndim(self) -> int:
        # (without building the shape list)
        v = self._value if self._pending is None or self.__class__ is not VarBase else None
        if v is not None:
            return v.ndim
        shape = self._decl[0]
        return len(shape) if shape is not None else 0

    @property
    def size(self) -> int:
        return int(np.prod(self.shape))

    # ``persistable`` and ``stop_gradient`` are Variable's properties: their setters call
    # ``_touch``, which bumps a program's version -- a tensor has no program to recompile
    def _touch(self) -> None:
        pass

    @property
    def is_leaf(self) -> bool:
        return self._node is None

    # -- values -----------------------------------------------------------------------------
    def _array(self) -> np.ndarray:
        if self._value is None:
            raise ValueError(f"tensor '{self.name}' has no value yet (it was declared but no "
                             f"op has written it)")
        return self._value

    def numpy(self) -> np.ndarray:
        """A copy of the value as a NumPy array (as fluid 1.8: later in-place updates of the
        tensor, e.g. by an optimizer, do not show in it)."""
        _note_read(self)
        return np.array(self._array())

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        _note_read(self)
        a = np.asarray(self._array())
        return a.astype(dtype) if dtype is not None else a

    def set_value(self, value: Any) -> None:
        """Replace the value (same shape; cast to this tensor's dtype), as fluid's ``set_value``."""
        arr = np.asarray(value.numpy() if isinstance(value, VarBase) else value)
        if arr.dtype == object:
            raise TypeError(f"set_value of '{self.name}': cannot use an object array")
        _settle()           # a replayed step read the old value: it runs before the change
        if self._value is not None and tuple(arr.shape) != tuple(self._value.shape):
            raise ValueError(f"set_value of '{self.name}': the shape {list(arr.shape)} differs "
                             f"from the tensor's shape {list(self._value.shape)}")
        dt = self._value.dtype if self._value is not None else (
            to_numpy_dtype(self._decl[1]) if self._decl[1] is not None else arr.dtype)
        self._value = np.array(arr, dtype=dt)

    def gradient(self) -> Any:
        """The accumulated gradient as a NumPy array (None before any backward). A sparse
        embedding's (``Embedding(is_sparse=True)``) gradient is, as in fluid 1.8, the tuple
        ``(values, rows)`` of its SelectedRows: one value row per looked-up id."""
        g = self._grad
        if type(g) is SelectedRows:
            return np.array(g.value), np.array(g.rows)
        return g

    @property
    def grad(self) -> Optional["VarBase"]:
        """The accumulated gradient as a tensor (None before any backward)."""
        g = self._grad
        return None if g is None else VarBase(g, name=self.name + names.GRAD_SUFFIX)

    def clear_gradient(self) -> None:
        """Forget the accumulated gradient (the next backward starts from zero)."""
        if self._pending is not None:       # a deferred backward: it happened before this
            self._pending.materialize()
        self._grad = None

    def detach(self) -> "VarBase":
        """A new tensor sharing the value, with no autograd history (stop_gradient=True)."""
        return VarBase(self._array(), stop_gradient=True)

    def backward(self, retain_graph: bool = False, grad_tensor: Any = None) -> None:
        """Accumulate d(self)/d(leaf) into every leaf tensor that needs a gradient. ``self``
        must be a scalar (one element) unless ``grad_tensor`` is given. The graph is released
        afterwards unless ``retain_graph=True``."""
        if retain_graph.__class__ is not bool:      # fluid 1.8: backward(BackwardStrategy())
            retain_graph = False
        step = self._pending
        if step is not None:                # a replayed step's loss: minimize runs it
            if not retain_graph and grad_tensor is None and step.defer_backward(self):
                return
            step.materialize()
        _run_backward([self], None if grad_tensor is None else [grad_tensor], retain_graph)

    # -- conversions ------------------------------------------------------------------------
    def __float__(self) -> float:
        return float(self._scalar())

    def __int__(self) -> int:
        return int(self._scalar())

    def __index__(self) -> int:
        return int(self._scalar())

    def __bool__(self) -> bool:
        # fluid 1.8's VarBase.__nonzero__ (and Paddle 2.x's): a one-element tensor is true
        # when its value is > 0, so a tensor holding -1 is false
        return bool(self._scalar() > 0)

    def _scalar(self) -> Any:
        _note_read(self)
        a = self._array()
        if a.size != 1:
            raise ValueError(f"tensor '{self.name}' of shape {list(a.shape)} has more than one "
                             f"element: its truth value / number is ambiguous")
        return a.reshape(()).item()

    def __len__(self) -> int:
        return self.shape[0]

    def __repr__(self) -> str:
        if self._value is None:
            return f"Tensor(name={self.name}, no value)"
        body = np.array2string(np.asarray(self._value), separator=", ", prefix="       ")
        return (f"Tensor(name={self.name}, shape={self.shape}, "
                f"dtype={convert_dtype(self._value.dtype)}, "
                f"stop_gradient={self._stop_gradient},\n       {body})")

    __str__ = __repr__

    def to_string(self, throw_on_error: bool = False, with_details: bool = False) -> str:
        return repr(self)

    def _kind(self) -> str:
        return "tensor"


class ParamBase(VarBase, Parameter):
    """A dygraph parameter: a persistable ``VarBase`` with ``stop_gradient=False`` and the
    ``Parameter`` attributes (``trainable``, ``optimize_attr``, ``regularizer``, ``need_clip``)
    the optimizers and clips read. ``trainable = False`` also stops its gradient (as fluid)."""

    def __init__(self, shape: Sequence[int], dtype: Any, name: Optional[str] = None,
                 trainable: bool = True, optimize_attr: Any = None, regularizer: Any = None,
                 gradient_clip_attr: Any = None, do_model_average: Any = None,
                 need_clip: bool = True, initializer: Any = None, **_: Any) -> None:
        super().__init__(None, name=name if name is not None else names.generate("param"),
                         stop_gradient=not trainable, persistable=True,
                         shape=[int(s) for s in shape], dtype=dtype)
        d = self.__dict__
        d["optimize_attr"] = optimize_attr if optimize_attr is not None else {
            "learning_rate": 1.0}
        d["regularizer"] = regularizer
        d["gradient_clip_attr"] = gradient_clip_attr
        d["do_model_average"] = do_model_average
        d["need_clip"] = need_clip
        d["_version"] = 0       # bumped by in-place optimizer updates (autograd checks it)
        d["is_distributed"] = False
        d["initializer"] = initializer

    @property
    def trainable(self) -> bool:
        return not self._stop_gradient

    @trainable.setter
    def trainable(self, value: bool) -> None:
        self._stop_gradient = not bool(value)

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()

    __str__ = __repr__

    def _kind(self) -> str:
        return "param"
