"""Variables of the Program IR: ``Variable`` and ``Parameter`` (re-exported by ``core/ir.py``),
and the build-transaction journal every IR mutator writes to (``fluidlite.core.atomic``)."""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence

from . import names
from .dtypes import VarType, convert_np_dtype_to_dtype_
from .registry import VarSpec

# core/ir.py builds on this module, so this one names ir's classes without importing them
# (not even under TYPE_CHECKING: the package keeps no import cycle of any kind)
_Block = _Operator = _Program = Any


# -- build-transaction journal (fluidlite.core.atomic) -----------------------------------------
# While ``atomic(program)`` is active, ``program._journal`` is a list and every mutator below
# appends a closure that undoes its change; outside a transaction it is None and costs one check.
def _journal(program: _Program, undo: Callable[[], Any]) -> None:
    j = program._journal
    if j is not None:
        j.append(undo)


def _restore_dict(d: Dict[str, Any], items: List[Any]) -> None:
    d.clear()
    d.update(items)


# -- Variable ---------------------------------------------------------------------------------
class Variable:
    """A named tensor slot in a Block. ``shape`` uses -1 for unknown dims (the batch dim).

    Args:
        block (Block): the block the variable belongs to (use ``block.create_var``, not this
            constructor, to register it).
        type (VarType): the variable kind. Default ``VarType.LOD_TENSOR``.
        name (str | None): the name; None generates a unique ``_generated_var_N``. Default None.
        shape (Sequence[int] | None): the shape, -1 (or None) for unknown dims. Default None
            (``()``).
        dtype (str | numpy.dtype | VarType | None): the element type. Default None.
        lod_level (int | None): the LoD depth. Default None (0).
        capacity (Any): fluid's capacity field; unused. Default None.
        persistable (bool | None): kept in the scope across runs. Default None (False).
        error_clip (Any): an error clip applied to this variable's gradient. Default None.
        stop_gradient (bool): no gradient flows into this variable. Default False.
        is_data (bool): the variable is a feed target. Default False.
        need_check_feed (bool): the executor checks fed shapes/dtypes against it. Default False.
        belong_to_optimizer (bool): an optimizer state (accumulator). Default False.
        **kwargs: other fluid keywords, accepted and unused.

    Returns:
        Variable: the variable (not yet registered in ``block``).

    Raises:
        TypeError: ``dtype`` is not a known data type (UnknownDtypeError, also a ValueError), or a
            dim of ``shape`` is not a number.
        ValueError: ``dtype`` names an unsupported numpy dtype, or a dim is a non-integer string.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 3])
        ...     y = (x + 1.0) * 2.0               # operators append elementwise ops
        >>> x.name, x.shape, y.dtype == fluid.core.VarDesc.VarType.FP32
        ('x', (-1, 3), True)
        >>> fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": np.zeros((1, 3), "float32")},
        ...                                      fetch_list=[y])[0]
        array([[2., 2., 2.]], dtype=float32)
    """

    op: Optional[_Operator]        # the op that last wrote this variable (None: not written)

    def __init__(self, block: _Block, type: VarType = VarType.LOD_TENSOR,
                 name: Optional[str] = None, shape: Optional[Sequence[int]] = None,
                 dtype: Any = None, lod_level: Optional[int] = None, capacity: Any = None,
                 persistable: Optional[bool] = None, error_clip: Any = None,
                 stop_gradient: bool = False, is_data: bool = False,
                 need_check_feed: bool = False, belong_to_optimizer: bool = False,
                 **kwargs: Any) -> None:
        # one dict update: plain stores would each pay for the journaling __setattr__ below
        self.__dict__.update(
            block=block,
            _name=name if name is not None else names.generate("_generated_var"),
            type=type,
            _shape=tuple(int(d) if d is not None else -1 for d in shape) if shape is not None
            else (),
            _dtype=convert_np_dtype_to_dtype_(dtype) if dtype is not None else None,
            lod_level=lod_level or 0, _persistable=bool(persistable),
            _stop_gradient=bool(stop_gradient), is_data=is_data,
            need_check_feed=need_check_feed, belong_to_optimizer=belong_to_optimizer,
            error_clip=error_clip, op=None)

    # properties that affect execution bump the program version
    def _touch(self) -> None:
        self.block.program._bump()

    def __setattr__(self, key: str, value: Any) -> None:
        # journal attribute writes (shape, dtype, stop_gradient, op, ...) for core.atomic;
        # __init__ fills __dict__ directly, and clone() re-homing a copy's block is no edit
        d = self.__dict__
        block = d.get("block")
        j = block.program._journal if block is not None and key != "block" else None
        if j is not None:
            if key in d:
                old = d[key]
                j.append(lambda: object.__setattr__(self, key, old))
            elif not hasattr(type(self), key):          # a new attribute, not a property
                j.append(lambda: d.pop(key, None))
        object.__setattr__(self, key, value)

    @property
    def name(self) -> str:
        return self._name

    @name.setter
    def name(self, new: str) -> None:
        self.block._rename_var(self._name, new)

    @property
    def shape(self) -> tuple:
        return self._shape

    @property
    def dtype(self) -> Optional[VarType]:
        return self._dtype

    @property
    def persistable(self) -> bool:
        return self._persistable

    @persistable.setter
    def persistable(self, value: bool) -> None:
        self._persistable = bool(value)
        self._touch()

    @property
    def stop_gradient(self) -> bool:
        return self._stop_gradient

    @stop_gradient.setter
    def stop_gradient(self, value: bool) -> None:
        self._stop_gradient = bool(value)
        self._touch()

    @property
    def spec(self) -> VarSpec:
        # VarType.BOOL is 0 (falsy): test for None, or bool variables would read as float32
        dtype = self._dtype if self._dtype is not None else VarType.FP32
        return VarSpec(self._shape, dtype, self.lod_level)

    @property
    def ndim(self) -> int:
        return len(self._shape)

    def _set_spec(self, spec: VarSpec) -> None:
        self._shape, self._dtype = tuple(spec.shape), spec.dtype
        if spec.lod_level:
            self.lod_level = spec.lod_level

    def _set_error_clip(self, error_clip: Any) -> None:
        self.error_clip = error_clip

    @property
    def grad_name(self) -> str:
        return names.grad_var_name(self._name)

    def _kind(self) -> str:
        return "var"

    def to_string(self, throw_on_error: bool = False, with_details: bool = False) -> str:
        """One line describing the variable: name, type, shape and dtype (with ``with_details``:
        ``stop_gradient`` and the error clip too).

        Args:
            throw_on_error (bool): fluid's flag to raise when a field is unset; unused (every field
                has a value). Default False.
            with_details (bool): also print ``stop_gradient`` and the error clip. Default False.

        Returns:
            str: ``[persist ]var NAME : fluid.VarType.TYPE.shape(...).astype(DTYPE)``.

        Raises:
            None: this method does not raise.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> main = fluid.Program()
            >>> with fluid.program_guard(main):
            ...     x = fluid.data("x", [-1, 2])
            >>> print(x.to_string(throw_on_error=True))
            var x : fluid.VarType.LOD_TENSOR.shape(-1, 2).astype(VarType.FP32)
        """
        head = "persist " if self._persistable else ""
        if self.type not in (VarType.LOD_TENSOR, VarType.SELECTED_ROWS):
            line = f"{head}{self._kind()} {self._name} : fluid.VarType.{self.type.name})"
        else:
            shape = ", ".join(str(d) for d in self._shape)
            line = (f"{head}{self._kind()} {self._name} : fluid.VarType.{self.type.name}"
                    f".shape({shape}).astype({self._dtype})")
        if with_details:
            line += f"  stop_gradient: {self._stop_gradient}"
            if self.error_clip is not None:
                line += f"  error_clip: {self.error_clip}"
        return line

    # fluid 1.8's dygraph-only Variable methods: in a static program they say so
    def _dygraph_only(self, method: str) -> Any:
        raise RuntimeError(
            f"Variable '{self.name}' is a static-graph Variable: {method}() is only supported in "
            f"dygraph mode. Run it inside fluid.dygraph.guard(), or fetch the value with "
            f"exe.run(program, fetch_list=[{self.name!r}]).")

    def numpy(self) -> Any:
        """The value of a dygraph tensor as a NumPy array.

        Dygraph only: on a static-graph Variable it raises RuntimeError naming the variable and saying to
        run inside ``fluid.dygraph.guard()`` or to fetch the value with ``exe.run``.

        Args:
            None: this method takes no arguments.

        Returns:
            numpy.ndarray: in dygraph mode (VarBase), a copy of the value.

        Raises:
            RuntimeError: called on a static-graph Variable.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> with fluid.dygraph.guard():
            ...     t = fluid.dygraph.to_variable(np.array([1.0, 2.0], "float32"))
            ...     print(t.numpy())
            [1. 2.]
        """
        return self._dygraph_only("numpy")

    def backward(self, backward_strategy: Any = None) -> Any:
        """Backpropagate from this dygraph tensor (a loss), accumulating gradients into every
        tensor it depends on that has ``stop_gradient=False``.

        Dygraph only: on a static-graph Variable it raises RuntimeError naming the variable and saying to
        run inside ``fluid.dygraph.guard()`` or to fetch the value with ``exe.run``.

        Args:
            backward_strategy (BackwardStrategy | None): fluid 1.8's strategy object; accepted and
                unused. Default None.

        Returns:
            None.

        Raises:
            RuntimeError: called on a static-graph Variable.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> with fluid.dygraph.guard():
            ...     x = fluid.dygraph.to_variable(np.array([1.0, 2.0, 3.0], "float32"))
            ...     x.stop_gradient = False
            ...     loss = fluid.layers.reduce_sum(x * x)
            ...     loss.backward()
            ...     print(x.gradient())
            [2. 4. 6.]
        """
        return self._dygraph_only("backward")

    def gradient(self) -> Any:
        """The accumulated gradient of a dygraph tensor as a NumPy array (None before
        ``backward``).

        Dygraph only: on a static-graph Variable it raises RuntimeError naming the variable and saying to
        run inside ``fluid.dygraph.guard()`` or to fetch the value with ``exe.run``.

        Args:
            None: this method takes no arguments.

        Returns:
            numpy.ndarray | None: in dygraph mode, the accumulated gradient (a ``(values, rows)``
            tuple for a sparse embedding's), None before ``backward``.

        Raises:
            RuntimeError: called on a static-graph Variable.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> with fluid.dygraph.guard():
            ...     x = fluid.dygraph.to_variable(np.array([3.0], "float32"))
            ...     x.stop_gradient = False
            ...     (x * x).backward()
            ...     print(x.gradient())
            [6.]
        """
        return self._dygraph_only("gradient")

    def clear_gradient(self) -> Any:
        """Drop this dygraph tensor's accumulated gradient.

        Dygraph only: on a static-graph Variable it raises RuntimeError naming the variable and saying to
        run inside ``fluid.dygraph.guard()`` or to fetch the value with ``exe.run``.

        Args:
            None: this method takes no arguments.

        Returns:
            None.

        Raises:
            RuntimeError: called on a static-graph Variable.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> with fluid.dygraph.guard():
            ...     x = fluid.dygraph.to_variable(np.array([3.0], "float32"))
            ...     x.stop_gradient = False
            ...     (x * x).backward()
            ...     x.clear_gradient()
            ...     print(x.gradient())
            None
        """
        return self._dygraph_only("clear_gradient")

    def detach(self) -> Any:
        """A dygraph tensor sharing this value with no autograd history (``stop_gradient=True``).

        Dygraph only: on a static-graph Variable it raises RuntimeError naming the variable and saying to
        run inside ``fluid.dygraph.guard()`` or to fetch the value with ``exe.run``.

        Args:
            None: this method takes no arguments.

        Returns:
            VarBase: in dygraph mode, a new tensor sharing the value with ``stop_gradient=True``.

        Raises:
            RuntimeError: called on a static-graph Variable.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> with fluid.dygraph.guard():
            ...     x = fluid.dygraph.to_variable(np.array([3.0], "float32"))
            ...     x.stop_gradient = False
            ...     y = (x * 2).detach()
            ...     print(y.stop_gradient, y.numpy())
            True [6.]
        """
        return self._dygraph_only("detach")

    def set_value(self, value: Any) -> Any:
        """Replace a dygraph tensor's value with ``value`` (same shape).

        Dygraph only: on a static-graph Variable it raises RuntimeError naming the variable and saying to
        run inside ``fluid.dygraph.guard()`` or to fetch the value with ``exe.run``.

        Args:
            value (numpy.ndarray | VarBase): the new value, same shape; cast to the tensor's dtype.

        Returns:
            None.

        Raises:
            RuntimeError: called on a static-graph Variable.
            ValueError: (dygraph) the shape of ``value`` differs from the tensor's.
            TypeError: (dygraph) ``value`` is an object array.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> with fluid.dygraph.guard():
            ...     fc = fluid.dygraph.Linear(2, 1)
            ...     fc.weight.set_value(np.array([[1.0], [2.0]], "float32"))
            ...     print(fc.weight.numpy().ravel())
            [1. 2.]
        """
        return self._dygraph_only("set_value")

    def __str__(self) -> str:
        return self.to_string()

    __repr__ = __str__


class Parameter(Variable):
    """A persistable, trainable Variable of the global block (with a startup-program twin)."""

    def __init__(self, block: _Block, shape: Sequence[int], dtype: Any, **kwargs: Any) -> None:
        name = kwargs.get("name")
        if shape is None:
            raise ValueError("The shape of Parameter should not be None")
        if dtype is None:
            raise ValueError("The dtype of Parameter should not be None")
        if len(shape) == 0:
            raise ValueError("The dimensions of shape for Parameter must be greater than 0")
        for d in shape:
            if d is None or d < 0:
                raise ValueError(f"Each dimension of shape for Parameter {name} must be greater "
                                 f"than 0, but received {list(shape)}; a parameter's shape "
                                 f"should not be related with batch-size")
        self.__dict__.update(
            trainable=kwargs.pop("trainable", True),
            optimize_attr=kwargs.pop("optimize_attr", {"learning_rate": 1.0}),
            regularizer=kwargs.pop("regularizer", None),
            gradient_clip_attr=kwargs.pop("gradient_clip_attr", None),
            do_model_average=kwargs.pop("do_model_average", None),
            need_clip=kwargs.pop("need_clip", True),
            is_distributed=kwargs.pop("is_distributed", False),
            initializer=kwargs.pop("initializer", None))
        kwargs["persistable"] = True
        super().__init__(block, shape=shape, dtype=dtype, **kwargs)

    def _kind(self) -> str:
        return ("trainable " if self.trainable else "") + "param"

    def to_string(self, throw_on_error: bool = False, with_details: bool = False) -> str:
        line = super().to_string(throw_on_error, with_details)
        if with_details:
            line += (f"  trainable: {self.trainable}  optimize_attr: {self.optimize_attr}"
                     f"  regularizer: {self.regularizer}  gradient_clip_attr: "
                     f"{self.gradient_clip_attr}  do_model_average: {self.do_model_average}"
                     f"  need_clip: {self.need_clip}")
        return line

    _PY_ATTRS = ("trainable", "optimize_attr", "regularizer", "gradient_clip_attr",
                 "do_model_average", "need_clip", "is_distributed")
