"""Python operators on ``Variable`` (fluid's ``monkey_patch_variable``, applied at import).

* ``+ - * /`` with a Python number fold into one ``scale`` op: ``x + c -> scale(1, bias=c)``,
  ``c - x -> scale(-1, bias=c)``, ``x * c -> scale(c)``, ``x / c -> scale(1/c)``;
* other operators (``** % //``, comparisons, reflected ``/ ** % //``) use the elementwise op
  (``elementwise_pow``, ``less_than``, ...) with the number as a ``fill_constant`` of shape [1]
  and the Variable's dtype; a Variable of another dtype is cast to the left operand's dtype;
* ``-x`` is ``scale(-1)``, ``x.astype(d)`` a ``cast`` op, ``x[...]`` a ``slice`` (or
  ``strided_slice`` for steps other than 1) op.

Results are ``tmp_N`` variables in the current block. ``==`` builds an ``equal`` op, so
Variables keep identity hashing (``__hash__ = object.__hash__``), and the truth value of a
comparison result raises (``v in list`` would otherwise silently answer True): compare names or
use ``is`` for identity.
"""
from __future__ import annotations

import numbers
from typing import Any, Callable, List, Optional, Tuple

import numpy as np

from ..core import names
from ..core.atomic import atomic_layer
from ..core.dtypes import INTS, VarType, convert_dtype, convert_np_dtype_to_dtype_
from ..core.ir import Block, Variable

__all__: List[str] = []

_BIG = 10000000          # fluid's "to the end" sentinel for slice ends
_COMPARE_OPS = {"equal": "==", "not_equal": "!=", "less_than": "<", "less_equal": "<=",
                "greater_than": ">", "greater_equal": ">="}


def _block(var: Variable) -> Block:
    return var.block.program.current_block()


def _tmp(var: Variable, dtype: Any) -> Variable:
    return _block(var).create_var(name=names.generate("tmp"), dtype=dtype)


def _is_number(v: Any) -> bool:
    return isinstance(v, numbers.Number) and not isinstance(v, complex) and (
        not isinstance(v, np.ndarray))


def _py(v: Any) -> Any:
    return v.item() if isinstance(v, np.generic) else v


def _check_int_scalar(var: Variable, value: Any, op: str) -> None:
    if var.dtype in INTS and isinstance(value, float) and value != int(value):
        raise TypeError(f"{convert_dtype(var.dtype)} Variable '{var.name}' {op} {value}: a "
                        f"non-integral float cannot be applied to an integer Variable; cast it "
                        f"first, e.g. {var.name}.astype('float32') {op} {value}")


def _scale(var: Variable, scale: float, bias: float) -> Variable:
    out = _tmp(var, var.dtype)
    _block(var).append_op("scale", {"X": [var]}, {"Out": [out]},
                          {"scale": float(scale), "bias": float(bias)})
    return out


def _scalar_var(ref: Variable, value: Any, dtype: Any) -> Variable:
    out = _tmp(ref, dtype)
    out.stop_gradient = True
    _block(ref).append_op("fill_constant", outputs={"Out": [out]},
                          attrs={"shape": [1], "dtype": dtype, "value": float(value)})
    return out


def astype(self: Variable, dtype: Any) -> Variable:
    """A ``cast`` of this Variable to ``dtype`` (a ``tmp_N`` Variable).

    Args:
        dtype (str | numpy dtype | VarType): the target dtype.
    Returns:
        Variable: a new Variable of this one's shape and dtype ``dtype``.
    Raises:
        TypeError: ``dtype`` is not a data type.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 2])
        ...     i = x.astype("int64")
        >>> fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": np.array([[1.5, 2.5]], "float32")},
        ...                                      fetch_list=[i])[0]
        array([[1, 2]])
    """
    try:
        dtype = convert_np_dtype_to_dtype_(dtype)
    except (TypeError, ValueError, KeyError):
        raise TypeError(f"astype: {dtype!r} is not a data type (use e.g. 'float32', 'int64')") \
            from None
    out = _tmp(self, dtype)
    _block(self).append_op("cast", {"X": [self]}, {"Out": [out]},
                           {"in_dtype": self.dtype, "out_dtype": dtype})
    return out


def _binary(op_type: str, symbol: str, reverse: bool = False,
            scalar: Optional[Callable[[Variable, Any], Variable]] = None) -> Callable:
    def impl(self: Variable, other: Any) -> Any:
        if isinstance(other, Variable):
            if other.block.program is not self.block.program:
                raise ValueError(f"'{self.name}' {symbol} '{other.name}': the Variables belong to "
                                 f"different Programs")
        elif _is_number(other):
            other = _py(other)
            if scalar is not None and not (op_type == "elementwise_div" and self.dtype in INTS):
                _check_int_scalar(self, other, symbol)
                return scalar(self, other)
            other = _scalar_var(self, other, self.dtype)
        elif isinstance(other, np.ndarray) and other.size == 1 and other.dtype.kind in "biuf":
            # fluid 1.8 fills a [1] tensor with float(other) for any non-Variable operand, so a
            # one-element array acts as its number (its dygraph RL scripts multiply by one)
            other = _scalar_var(self, float(other.reshape(())), self.dtype)
        elif op_type in ("equal", "not_equal"):
            return NotImplemented    # x == None, x == "a": Python's identity comparison
        else:
            kind = type(other).__name__
            hint = (" (wrap arrays with fluid.layers.assign(array))"
                    if isinstance(other, np.ndarray) else "")
            raise TypeError(f"unsupported operand for {symbol}: Variable '{self.name}' and "
                            f"{kind}{hint}")
        if other.dtype != self.dtype:
            other = astype(other, self.dtype)
        x, y = (other, self) if reverse else (self, other)
        axis = -1
        if len(x.shape) > len(y.shape) >= 1 and y.shape[0] == -1:
            axis = 0                 # fluid: a batch-leading smaller operand aligns at dim 0
        out = _tmp(self, VarType.BOOL if op_type in _COMPARE_OPS else self.dtype)
        _block(self).append_op(op_type, {"X": [x], "Y": [y]}, {"Out": [out]}, {"axis": axis})
        if op_type in _COMPARE_OPS:
            out.stop_gradient = True
            out._compare_expr = f"{x.name} {symbol} {y.name}"
        return out

    expr = f"other {symbol} self" if reverse else f"self {symbol} other"
    impl.__name__ = f"_{op_type}_{'r' if reverse else ''}impl"
    impl.__doc__ = f"``{expr}`` as op ``{op_type}``."
    return impl


def _neg(self: Variable) -> Variable:
    """``-self`` as ``scale(-1)``."""
    return _scale(self, -1.0, 0.0)


def _bool(self: Variable) -> bool:
    expr = getattr(self, "_compare_expr", None)
    if expr is not None:
        raise TypeError(f"the truth value of the comparison Variable '{self.name}' ({expr}) is "
                        f"not known while building the program: the comparison is an op that "
                        f"runs later. To test identity use `a is b`, to compare variables by "
                        f"name `a.name == b.name`; do not use `in`, list.index or list.remove "
                        f"on lists of Variables (they call ==)")
    return True


# -- indexing -----------------------------------------------------------------------------------
def _index_error(var: Variable, msg: str) -> IndexError:
    return IndexError(f"Variable '{var.name}' of shape {list(var.shape)}: {msg}")


def _as_int(var: Variable, v: Any, what: str) -> Optional[int]:
    if v is None:
        return None
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (numbers.Integral,)):
        raise TypeError(f"Variable '{var.name}': slice {what} must be an int or None, but "
                        f"received {v!r} (Variable or float indices are not supported; use "
                        f"fluid.layers.slice / gather)")
    return int(v)


def _expand_item(var: Variable, item: Any) -> Tuple[Any, ...]:
    item = item if isinstance(item, tuple) else (item,)
    n_ell = sum(1 for it in item if it is Ellipsis)
    if n_ell > 1:
        raise _index_error(var, "an index can only have a single ellipsis ('...')")
    if n_ell:
        at = item.index(Ellipsis)
        fill = len(var.shape) - (len(item) - 1)
        item = item[:at] + (slice(None),) * max(fill, 0) + item[at + 1:]
    if len(item) > len(var.shape):
        raise _index_error(var, f"too many indices: {len(item)} given for {len(var.shape)} "
                                f"dims")
    return item


def _getitem(self: Variable, item: Any) -> Variable:
    """``x[i]``, ``x[a:b]``, ``x[a:b:s]``, tuples of those and ``...``: a ``slice`` op (axes,
    starts, ends, decrease_axis) or, with a step other than 1, a ``strided_slice`` op. Integer
    indices drop their dim; negative values count from the end; unknown (-1) dims pass through.
    """
    item = _expand_item(self, item)
    axes: List[int] = []
    starts: List[int] = []
    ends: List[int] = []
    steps: List[int] = []
    decrease: List[int] = []
    for dim, it in enumerate(item):
        size = self.shape[dim]
        if isinstance(it, slice):
            start, stop = _as_int(self, it.start, "start"), _as_int(self, it.stop, "stop")
            step = _as_int(self, it.step, "step")
            step = 1 if step is None else step
            if step == 0:
                raise ValueError(f"Variable '{self.name}': slice step cannot be zero")
            if start is None and stop is None and step == 1:
                continue
            if step > 0:
                start = 0 if start is None else start
                stop = _BIG if stop is None else stop
            else:
                # strided_slice with a negative stride: end -1 means "through index 0"
                start = -1 if start is None else start
                if stop is None:
                    stop = -1
                elif stop < 0:
                    if size < 0:
                        if stop == -1:
                            raise _index_error(self, f"slice {it} on dim {dim} of unknown size "
                                                     f"is empty")
                    else:
                        stop = stop + size if stop + size >= 0 else -1
        elif isinstance(it, (numbers.Integral,)) and not isinstance(it, (bool, np.bool_)):
            it = int(it)
            if size >= 0:
                if not -size <= it < size:
                    raise _index_error(self, f"index {it} is out of bounds for dim {dim} with "
                                             f"size {size}")
                it = it + size if it < 0 else it
            start, stop, step = it, (it + 1 if it != -1 else _BIG), 1
            decrease.append(dim)
        elif it is None:
            raise TypeError(f"Variable '{self.name}': None (newaxis) indices are not supported; "
                            f"use fluid.layers.unsqueeze")
        else:
            raise TypeError(f"Variable '{self.name}': unsupported index {it!r} of type "
                            f"{type(it).__name__}; use ints, slices and '...' (for tensor "
                            f"indices use fluid.layers.gather)")
        axes.append(dim)
        starts.append(start)
        ends.append(stop)
        steps.append(step)
    if not axes:
        return self
    strided = any(s != 1 for s in steps)
    op_type = "strided_slice" if strided else "slice"
    out = _block(self).create_var(name=names.generate(f"{self.name}_{op_type}"),
                                  dtype=self.dtype)
    attrs = {"axes": axes, "starts": starts, "ends": ends, "infer_flags": [1] * len(axes),
             "decrease_axis": decrease}
    if strided:
        attrs["strides"] = steps
    _block(self).append_op(op_type, {"Input": [self]}, {"Out": [out]}, attrs)
    return out


# -- installation -------------------------------------------------------------------------------
def _scalar_add(var: Variable, c: Any) -> Variable:
    return _scale(var, 1.0, c)


def _scalar_sub(var: Variable, c: Any) -> Variable:
    return _scale(var, 1.0, -c)


def _scalar_rsub(var: Variable, c: Any) -> Variable:
    return _scale(var, -1.0, c)


def _scalar_mul(var: Variable, c: Any) -> Variable:
    return _scale(var, c, 0.0)


def _scalar_div(var: Variable, c: Any) -> Variable:
    if c == 0:
        raise ZeroDivisionError(f"Variable '{var.name}' / 0")
    return _scale(var, 1.0 / c, 0.0)


_METHODS = [
    ("__add__", "elementwise_add", "+", False, _scalar_add),
    ("__radd__", "elementwise_add", "+", False, _scalar_add),
    ("__sub__", "elementwise_sub", "-", False, _scalar_sub),
    ("__rsub__", "elementwise_sub", "-", True, _scalar_rsub),
    ("__mul__", "elementwise_mul", "*", False, _scalar_mul),
    ("__rmul__", "elementwise_mul", "*", False, _scalar_mul),
    ("__truediv__", "elementwise_div", "/", False, _scalar_div),
    ("__div__", "elementwise_div", "/", False, _scalar_div),
    ("__rtruediv__", "elementwise_div", "/", True, None),
    ("__rdiv__", "elementwise_div", "/", True, None),
    ("__pow__", "elementwise_pow", "**", False, None),
    ("__rpow__", "elementwise_pow", "**", True, None),
    ("__floordiv__", "elementwise_floordiv", "//", False, None),
    ("__rfloordiv__", "elementwise_floordiv", "//", True, None),
    ("__mod__", "elementwise_mod", "%", False, None),
    ("__rmod__", "elementwise_mod", "%", True, None),
    ("__eq__", "equal", "==", False, None),
    ("__ne__", "not_equal", "!=", False, None),
    ("__lt__", "less_than", "<", False, None),
    ("__le__", "less_equal", "<=", False, None),
    ("__gt__", "greater_than", ">", False, None),
    ("__ge__", "greater_equal", ">=", False, None),
]


def monkey_patch_variable() -> None:
    """Install the operators on ``Variable`` (idempotent; done when fluidlite is imported)."""
    # every method that builds ops is atomic: a failing `x / y` or `x[i]` leaves no ops behind
    for method, op_type, symbol, reverse, scalar in _METHODS:
        setattr(Variable, method, atomic_layer(_binary(op_type, symbol, reverse, scalar)))
    Variable.__neg__ = atomic_layer(_neg)
    Variable.__hash__ = object.__hash__
    Variable.__bool__ = _bool
    Variable.__array_ufunc__ = None        # numpy scalars/arrays defer to our reflected ops
    Variable.astype = atomic_layer(astype)
    Variable.__getitem__ = atomic_layer(_getitem)


monkey_patch_variable()
