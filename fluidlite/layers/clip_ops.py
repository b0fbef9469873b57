"""``layers.clip`` and ``layers.clip_by_norm`` (thin wrappers over the ops of the same name)."""
from __future__ import annotations

from typing import Optional

from ..core import mode as _mode
from ..core.ir import Variable
from ..layer_helper import LayerHelper, check_number
from ..pipeline.feeder import check_dtype

__all__ = ["clip", "clip_by_norm"]


def _variable(layer: str, x: object) -> Variable:
    if not isinstance(x, Variable):
        raise TypeError(f"{layer}: x must be a Variable, but received {type(x).__name__}; "
                        f"build it with fluid.data or another layer")
    return x


def clip(x: Variable, min: float, max: float, name: Optional[str] = None) -> Variable:
    """Elementwise ``min(max(x, min), max)`` (op ``clip``); gradient flows where min < x < max.

    Args:
        x (Variable): the input.
        min (float): the lower bound.
        max (float): the upper bound.
        name (str | None): name prefix of the output.
    Returns:
        Variable: ``x`` clipped to ``[min, max]``.
    Raises:
        TypeError: ``x`` is not a Variable, or ``min`` / ``max`` is not a number.
        ValueError: ``min`` is greater than ``max``.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 3], "float32")
        ...     out = fluid.layers.clip(x, min=-1.0, max=1.0)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"x": np.array([[-2.0, 0.0, 3.0]], "float32")}
        >>> res, = exe.run(main, feed=feed, fetch_list=[out])
        >>> res.round(4)
        array([[-1.,  0.,  1.]], dtype=float32)
    """
    x = _variable("clip", x)
    if _mode.tracer is None:              # fluid 1.8's static list (its dygraph checked none)
        check_dtype(x.dtype, "x", ["float16", "float32", "float64"], "clip")
    lo, hi = check_number(min, "min", "clip"), check_number(max, "max", "clip")
    if lo > hi:
        raise ValueError(f"clip: min ({lo}) must not be greater than max ({hi})")
    helper = LayerHelper("clip", name=name)
    out = helper.create_variable_for_type_inference(dtype=x.dtype)
    helper.append_op(type="clip", inputs={"X": x}, outputs={"Out": out},
                     attrs={"min": lo, "max": hi})
    return out


def clip_by_norm(x: Variable, max_norm: float, name: Optional[str] = None) -> Variable:
    """``x * max_norm / ||x||_2`` when ``||x||_2 > max_norm``, else ``x`` (op ``clip_by_norm``).

    Args:
        x (Variable): the input.
        max_norm (float): the largest L2 norm allowed.
        name (str | None): name prefix of the output.
    Returns:
        Variable: ``x * max_norm / ||x||`` when ``||x|| > max_norm``, else ``x``.
    Raises:
        TypeError: ``x`` is not a Variable, or ``max_norm`` is not a number.
        ValueError: ``max_norm`` is not positive.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 2], "float32")
        ...     out = fluid.layers.clip_by_norm(x, max_norm=1.0)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> res, = exe.run(main, feed={"x": np.array([[3.0, 4.0]], "float32")}, fetch_list=[out])
        >>> res.round(4)
        array([[0.6, 0.8]], dtype=float32)
    """
    x = _variable("clip_by_norm", x)
    max_norm = check_number(max_norm, "max_norm", "clip_by_norm", positive=True)
    helper = LayerHelper("clip_by_norm", name=name)
    out = helper.create_variable_for_type_inference(dtype=x.dtype)
    helper.append_op(type="clip_by_norm", inputs={"X": x}, outputs={"Out": out},
                     attrs={"max_norm": max_norm})
    return out
