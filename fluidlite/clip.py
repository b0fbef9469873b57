"""Gradient clipping (``fluid.clip``), fluid 1.8 semantics plus two additions users asked for.

A clip object rewrites ``(param, grad)`` pairs: ``clip(params_grads)`` appends ops to the grads'
block and returns new pairs. ``Optimizer.apply_gradients`` calls it after sorting the pairs by
parameter name and before regularization. Ops inserted (all in ``name_scope('gradient_clip')``,
op_role Optimize, op_role_var ``[param, new_grad]``), each writing a *new* variable so the raw
``X@GRAD`` stays fetchable:

* ``GradientClipByValue``: one ``clip`` per gradient -> ``clip_N.tmp_0``;
* ``GradientClipByNorm``: one ``clip_by_norm`` per gradient -> ``clip_by_norm_N.tmp_0``;
* ``GradientClipByGlobalNorm``: ``squared_l2_norm`` per counted gradient, ``sum``, ``sqrt``
  (the global norm), [``check_finite_norm`` when ``error_if_nonfinite``], ``fill_constant``
  (clip_norm), ``elementwise_max``, ``elementwise_div`` (the scale), then ``elementwise_mul``
  per counted gradient.

A gradient whose parameter is excluded (``need_clip(param)`` returns False, or
``ParamAttr(need_clip=False)``) passes unchanged and is not counted in the global norm. Pairs
with a ``None`` gradient are dropped.

Beyond fluid:
* the global norm is a Variable you can fetch every step: ``clip.global_norm`` after the clip
  ran, or ``fluid.clip.get_global_norm(program)``;
* ``GradientClipByGlobalNorm(..., error_if_nonfinite=True)`` raises ``FloatingPointError`` at
  run time naming the non-finite gradients, before any parameter is updated.

Legacy attachment (``set_gradient_clip`` / ``ParamAttr(gradient_clip=)``) is applied by
``append_gradient_clip_ops`` only when the optimizer has no ``grad_clip``; each parameter uses
its own clip (fluid 1.8 applied the last parameter's clip to all; see docs/compatibility.md).
"""
from __future__ import annotations

import copy
import math
import numbers
import warnings
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from .core import mode as _mode, rewrite
from .formats import serialize
from .core.ir import Block, OpRole, Parameter, Program, Variable, default_main_program
from .core.dtypes import VarType
from .core.names import name_scope

__all__ = ["set_gradient_clip", "ErrorClipByValue", "GradientClipByValue",
           "GradientClipByNorm", "GradientClipByGlobalNorm", "ClipByValue", "ClipByNorm",
           "ClipByGlobalNorm", "ClipGradByValue", "ClipGradByNorm", "ClipGradByGlobalNorm",
           "GradientClipBase", "BaseErrorClipAttr", "error_clip_callback",
           "append_gradient_clip_ops", "get_global_norm", "global_norm_vars",
           "clip_by_value", "clip_by_global_norm"]   # issue 13: functional clipping

PairList = List[Tuple[Parameter, Optional[Variable]]]


def _clip_role(param: Parameter, clipped: Any) -> Any:
    """Role context of a clip op: Optimize, ``op_role_var = [param, clipped grad]``."""
    return rewrite.role(param.block.program, OpRole.Optimize, [param, clipped])


def _number(cls: str, arg: str, value: Any) -> float:
    """``value`` as a float: any real number (Python or NumPy scalar), not bool, not NaN."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real) or \
            math.isnan(float(value)):
        raise ValueError(f"{cls}: {arg} must be a number, but received {value!r} of type "
                         f"{type(value).__name__}")
    return float(value)


def _value_range(cls: str, max: Any, min: Any) -> Tuple[float, float]:
    """Validated ``(min, max)`` of a by-value clip: ``min`` defaults to ``-max`` (``max`` must
    then be > 0) and may not exceed ``max``."""
    max = _number(cls, "max", max)
    if min is None:
        if max <= 0:
            raise ValueError(f"{cls}: max must be > 0 when min is omitted (min defaults to "
                             f"-max), but received max = {max}")
        min = -max
    min = _number(cls, "min", min)
    if min > max:
        raise ValueError(f"{cls}: min ({min}) must not be greater than max ({max})")
    return min, max


# -- error clip (clips back-propagated errors during append_backward) -------------------------
class BaseErrorClipAttr:
    """Base of error clips: attached to a forward Variable (``var._set_error_clip``), applied to
    its gradient by ``error_clip_callback`` while the backward pass is built."""

    def _append_clip_op(self, block: Block, grad_name: str) -> None:
        raise NotImplementedError(f"{type(self).__name__} must define _append_clip_op")


@serialize.config_type("clip", "ErrorClipByValue")
class ErrorClipByValue(BaseErrorClipAttr):
    """Clip the gradient flowing back through a variable to ``[min, max]`` (min defaults to
    ``-max``), in place, right after the grad op that produced it.

    Args:
        max (float): the upper bound of the back-propagated error.
        min (float | None): the lower bound (default ``-max``; ``max`` must then be > 0).
    Returns:
        ErrorClipByValue: the error clip; attach it with ``var._set_error_clip(clip)`` before
        ``append_backward`` / ``minimize``.
    Raises:
        ValueError: ``max`` or ``min`` is not a number (or NaN), ``min`` is omitted while
            ``max <= 0``, or ``min > max``.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 2])
        ...     hidden = fluid.layers.fc(x, size=2)
        ...     hidden.error_clip = fluid.clip.ErrorClipByValue(max=0.5, min=-0.5)
        ...     loss = fluid.layers.mean(fluid.layers.fc(hidden, size=1))
        ...     _ = fluid.backward.append_backward(loss, callbacks=[fluid.clip.error_clip_callback])
        >>> "clip" in [op.type for op in main.global_block().ops]
        True
    """

    def __init__(self, max: float, min: Optional[float] = None) -> None:
        min, max = _value_range("ErrorClipByValue", max, min)
        self.max, self.min = max, min

    def __str__(self) -> str:
        return "ByValue, min=%f, max=%f" % (self.min, self.max)

    def to_config(self) -> Dict[str, Any]:
        return {"max": self.max, "min": self.min}

    @classmethod
    def from_config(cls, config: Dict[str, Any]) -> "ErrorClipByValue":
        return cls(**config)

    def _append_clip_op(self, block: Block, grad_name: str) -> None:
        rewrite.append(block, "clip", {"X": [grad_name]}, {"Out": [grad_name]},
                       {"min": self.min, "max": self.max})


def error_clip_callback(block: Block, context: Dict[str, Any]) -> None:
    """append_backward callback: after each grad op, clip the gradients it wrote whose forward
    variable carries an ``error_clip``. ``context`` maps grad names to forward var names and
    holds the new op under ``'__current_op_desc__'``."""
    op = context.get("__current_op_desc__")
    if op is None:
        op = block.ops[-1]
    for grad_n in [n for n in op.output_arg_names if n in context]:
        fwd = block._find_var_recursive(context[grad_n])
        error_clip = getattr(fwd, "error_clip", None) if fwd is not None else None
        if error_clip is None:
            continue
        if not isinstance(error_clip, BaseErrorClipAttr):
            raise TypeError("Variable's error_clip should be an instance of BaseErrorClipAttr "
                            f"or None, but variable '{fwd.name}' has {error_clip!r}")
        error_clip._append_clip_op(block, grad_n)


# -- gradient clips ---------------------------------------------------------------------------
class GradientClipBase:
    """Base of gradient clips. ``need_clip``: None (clip every gradient) or a callable
    ``(Parameter) -> bool`` selecting the parameters whose gradients are clipped."""

    def __init__(self, need_clip: Optional[Callable[[Parameter], bool]] = None) -> None:
        if need_clip is not None and not callable(need_clip):
            raise TypeError(f"{type(self).__name__}: need_clip must be None or a function taking "
                            f"a Parameter and returning True (clip its gradient) or False, but "
                            f"received {need_clip!r} of type {type(need_clip).__name__}")
        self._need_clip_func = need_clip

    def __str__(self) -> str:
        raise NotImplementedError(f"{type(self).__name__} must define __str__")

    def __call__(self, params_grads: Sequence[Tuple[Parameter, Optional[Variable]]]) -> PairList:
        """Append the clip ops for ``params_grads`` and return the new pairs."""
        for p, g in params_grads:
            if getattr(p, "gradient_clip_attr", None) is not None:
                warnings.warn("'set_gradient_clip' (or ParamAttr(gradient_clip=)) will be "
                              "ineffective, because 'grad_clip' is set in the optimizer; remove "
                              "the redundant legacy setting.")
                break
        if _mode.tracer is not None:        # dygraph: clip the gradient tensors now, with the
            # op kernels of the static ops below (fluidlite/dygraph/clip.py)
            return _mode.implementation("clip")(self, list(params_grads))
        with name_scope("gradient_clip"):
            return self._clip_pairs(list(params_grads))

    def _needs(self, param: Parameter) -> bool:
        """Whether ``param``'s gradient is clipped (and, for the global norm, counted)."""
        if getattr(param, "need_clip", True) is False:
            return False
        if self._need_clip_func is None:
            return True
        return bool(self._need_clip_func(param))

    def _clip_pairs(self, params_grads: PairList) -> PairList:
        """The new pairs: each needed gradient clipped alone (``_clip_one``); None grads
        dropped."""
        return [(p, self._clip_one(p, g) if self._needs(p) else g)
                for p, g in params_grads if g is not None]

    def _clip_one(self, param: Parameter, grad: Variable) -> Variable:
        """Append the ops clipping ``grad`` alone; returns the clipped gradient."""
        op_type, attrs = self._op_for_one()
        block = grad.block
        out = rewrite.tmp(block, op_type, grad.dtype)
        with _clip_role(param, out):
            return rewrite.op(block, op_type, out=out, attrs=attrs, X=grad)

    def _op_for_one(self) -> Tuple[str, Dict[str, Any]]:
        raise TypeError(f"{type(self).__name__} does not clip gradients one at a time")

    # -- serialization (ParamAttr(gradient_clip=), error clips) ------------------------------
    def to_config(self) -> Dict[str, Any]:
        """The constructor arguments that rebuild this clip (``need_clip`` is not stored)."""
        raise TypeError(f"{type(self).__name__} cannot be serialized")

    @classmethod
    def from_config(cls, config: Dict[str, Any]) -> "GradientClipBase":
        return cls(**config)


@serialize.config_type("clip", "GradientClipByValue", "ClipGradByValue", "ClipByValue")
class GradientClipByValue(GradientClipBase):
    """``g' = min(max(g, min), max)`` per element. ``min`` defaults to ``-max`` (``max`` must then
    be > 0).

    Args:
        max (float): the upper bound.
        min (float | None): the lower bound (default ``-max``; ``max`` must then be > 0).
        need_clip (callable | None): ``need_clip(param) -> bool`` selects the clipped gradients.
    Returns:
        GradientClipByValue: the clip; pass it as ``grad_clip=`` to an optimizer (calling it on
        ``params_grads`` appends one ``clip`` op per gradient and returns the new pairs).
    Raises:
        ValueError: ``max`` or ``min`` is not a number (or NaN), ``min`` is omitted while
            ``max <= 0``, or ``min > max``.
        TypeError: ``need_clip`` is neither None nor callable.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 2])
        ...     y = fluid.data("y", [-1, 1])
        ...     pred = fluid.layers.fc(x, size=1, param_attr=fluid.ParamAttr(
        ...         name="w", initializer=fluid.initializer.Constant(1.0)), bias_attr=False)
        ...     loss = fluid.layers.mean(fluid.layers.square_error_cost(pred, y))
        ...     _ = fluid.optimizer.SGD(0.1, grad_clip=fluid.clip.GradientClipByValue(max=1.0)).minimize(loss)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> feed = {"x": np.array([[1, 2]], "float32"), "y": np.array([[1]], "float32")}
        >>> _ = exe.run(main, feed=feed, fetch_list=[loss])
        >>> # the gradient [4, 8] is clipped to [1, 1]
        >>> fluid.global_scope().find_var("w").get_tensor().__array__().ravel().round(4)
        array([0.9, 0.9], dtype=float32)
    """

    def __init__(self, max: float, min: Optional[float] = None,
                 need_clip: Optional[Callable[[Parameter], bool]] = None) -> None:
        super().__init__(need_clip)
        min, max = _value_range("GradientClipByValue", max, min)
        self.max, self.min = max, min

    def __str__(self) -> str:
        return "Gradient Clip By Value, min = %f, max=%f" % (self.min, self.max)

    def _op_for_one(self) -> Tuple[str, Dict[str, Any]]:
        return "clip", {"min": self.min, "max": self.max}

    def to_config(self) -> Dict[str, Any]:
        return {"max": self.max, "min": self.min}


@serialize.config_type("clip", "GradientClipByNorm", "ClipGradByNorm", "ClipByNorm")
class GradientClipByNorm(GradientClipBase):
    """Per gradient: ``g' = g * clip_norm / ||g||`` when ``||g|| > clip_norm``, else ``g``.

    Args:
        clip_norm (float): the largest norm allowed for each gradient (> 0).
        need_clip (callable | None): ``need_clip(param) -> bool`` selects the clipped gradients.
    Returns:
        GradientClipByNorm: the clip; pass it as ``grad_clip=`` to an optimizer (calling it on
        ``params_grads`` appends one ``clip_by_norm`` op per gradient and returns the new pairs).
    Raises:
        ValueError: ``clip_norm`` is not a number or not > 0.
        TypeError: ``need_clip`` is neither None nor callable.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 2])
        ...     y = fluid.data("y", [-1, 1])
        ...     pred = fluid.layers.fc(x, size=1, param_attr=fluid.ParamAttr(
        ...         name="w", initializer=fluid.initializer.Constant(1.0)), bias_attr=False)
        ...     loss = fluid.layers.mean(fluid.layers.square_error_cost(pred, y))
        ...     _ = fluid.optimizer.SGD(1.0, grad_clip=fluid.clip.GradientClipByNorm(clip_norm=1.0)).minimize(loss)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> feed = {"x": np.array([[1, 2]], "float32"), "y": np.array([[1]], "float32")}
        >>> _ = exe.run(main, feed=feed, fetch_list=[loss])
        >>> # [4, 8] / ||[4, 8]||
        >>> fluid.global_scope().find_var("w").get_tensor().__array__().ravel().round(4)
        array([0.5528, 0.1056], dtype=float32)
    """

    def __init__(self, clip_norm: float,
                 need_clip: Optional[Callable[[Parameter], bool]] = None) -> None:
        super().__init__(need_clip)
        clip_norm = _number("GradientClipByNorm", "clip_norm", clip_norm)
        if clip_norm <= 0:
            raise ValueError(f"GradientClipByNorm: clip_norm must be > 0, but received "
                             f"{clip_norm}")
        self.clip_norm = clip_norm

    def __str__(self) -> str:
        return "Gradient Clip By Norm, clip_norm=%f" % self.clip_norm

    def _op_for_one(self) -> Tuple[str, Dict[str, Any]]:
        return "clip_by_norm", {"max_norm": self.clip_norm}

    def to_config(self) -> Dict[str, Any]:
        return {"clip_norm": self.clip_norm}


@serialize.config_type("clip", "GradientClipByGlobalNorm", "ClipGradByGlobalNorm",
                       "ClipByGlobalNorm")
class GradientClipByGlobalNorm(GradientClipBase):
    """``G = sqrt(sum_i ||g_i||^2)`` over the counted gradients; each is scaled by
    ``clip_norm / max(G, clip_norm)`` (exactly 1 when ``G <= clip_norm``).

    ``global_norm`` (after the clip ran) is the Variable holding ``G``: fetch it to log the norm.
    ``error_if_nonfinite=True`` makes a step whose ``G`` is NaN/Inf raise ``FloatingPointError``
    naming the offending gradients, before any parameter is updated.

    Args:
        clip_norm (float): the largest global norm allowed (> 0).
        group_name (str, default "default_group"): clips with the same group name share one
            global norm.
        need_clip (callable | None): ``need_clip(param) -> bool`` selects the gradients that are
            counted and clipped (default: all).
        error_if_nonfinite (bool, default False): raise instead of propagating a non-finite
            norm.
    Returns:
        GradientClipByGlobalNorm: the clip; pass it as ``grad_clip=`` to an optimizer (calling it
        on ``params_grads`` appends the global-norm ops and returns the new pairs).
    Raises:
        ValueError: ``clip_norm`` is not a number or not > 0.
        TypeError: ``group_name`` is not a str, ``error_if_nonfinite`` is not a bool or
            ``need_clip`` is neither None nor callable.
        FloatingPointError: at run time, with ``error_if_nonfinite=True``, the global norm is
            NaN or Inf.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 2])
        ...     y = fluid.data("y", [-1, 1])
        ...     pred = fluid.layers.fc(x, size=1, param_attr=fluid.ParamAttr(
        ...         name="w", initializer=fluid.initializer.Constant(1.0)), bias_attr=False)
        ...     loss = fluid.layers.mean(fluid.layers.square_error_cost(pred, y))
        ...     _ = fluid.optimizer.SGD(1.0, grad_clip=fluid.clip.GradientClipByGlobalNorm(clip_norm=1.0)).minimize(loss)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> feed = {"x": np.array([[1, 2]], "float32"), "y": np.array([[1]], "float32")}
        >>> _ = exe.run(main, feed=feed, fetch_list=[loss])
        >>> # every gradient scaled by 1 / global norm
        >>> fluid.global_scope().find_var("w").get_tensor().__array__().ravel().round(4)
        array([0.5528, 0.1056], dtype=float32)
    """

    def __init__(self, clip_norm: float, group_name: str = "default_group",
                 need_clip: Optional[Callable[[Parameter], bool]] = None,
                 error_if_nonfinite: bool = False) -> None:
        super().__init__(need_clip)
        clip_norm = _number("GradientClipByGlobalNorm", "clip_norm", clip_norm)
        if clip_norm <= 0:
            raise ValueError(f"GradientClipByGlobalNorm: clip_norm must be > 0, but received "
                             f"{clip_norm}")
        if not isinstance(group_name, str):
            raise TypeError(f"GradientClipByGlobalNorm: group_name must be a str, but received "
                            f"{group_name!r}")
        if not isinstance(error_if_nonfinite, bool):
            raise TypeError(f"GradientClipByGlobalNorm: error_if_nonfinite must be a bool, but "
                            f"received {error_if_nonfinite!r}")
        self.clip_norm = clip_norm
        self.group_name = group_name
        self.error_if_nonfinite = error_if_nonfinite
        self.global_norm: Optional[Variable] = None

    def __str__(self) -> str:
        return "Gradient Clip By GlobalNorm, global_norm=%f" % self.clip_norm

    def __deepcopy__(self, memo: Dict[int, Any]) -> "GradientClipByGlobalNorm":
        new = copy.copy(self)     # share need_clip; a copy has not run yet
        new.global_norm = None
        return new

    def to_config(self) -> Dict[str, Any]:
        return {"clip_norm": self.clip_norm, "group_name": self.group_name,
                "error_if_nonfinite": self.error_if_nonfinite}

    def _clip_pairs(self, params_grads: PairList) -> PairList:
        counted = [(p, g) for p, g in params_grads if g is not None and self._needs(p)]
        if not counted:          # nothing to clip: the input, unchanged (None grads included)
            return list(params_grads)
        clipped = _scale_by_global_norm(self, counted)
        return [(p, clipped.get(p.name, g)) for p, g in params_grads if g is not None]


def _scale_by_global_norm(clip: GradientClipByGlobalNorm, counted: PairList
                          ) -> Dict[str, Variable]:
    """Append the global-norm ops for ``counted`` and one ``elementwise_mul`` per gradient;
    returns ``{param name: clipped grad}`` and sets ``clip.global_norm``.

    The norm chain (``squared_l2_norm`` ... ``elementwise_div``) runs in the dtype the
    ``squared_l2_norm`` op produces (float64 for float32 gradients: a float32 sum of squares
    overflows for norms above ~1.8e19), and the scale is cast back to each gradient's dtype.
    Each op's ``op_role_var`` is ``[param, clipped grad]`` (the last pair's for shared ops)."""
    block = counted[-1][1].block
    out_names = {p.name: rewrite.tmp_name("elementwise_mul") for p, _ in counted}
    last_p = counted[-1][0]
    squares = []
    for p, g in counted:
        with _clip_role(p, out_names[p.name]):
            x = g
            if g.type == VarType.SELECTED_ROWS:     # fluid: the norm of the merged rows' values
                x = rewrite.op(block, "get_tensor_from_selected_rows",
                               X=rewrite.op(block, "merge_selected_rows", X=g))
            squares.append(rewrite.op(block, "squared_l2_norm", X=x))
    with _clip_role(last_p, out_names[last_p.name]):
        total = rewrite.op(block, "sum", X=squares, attrs={"use_mkldnn": False})
        norm = clip.global_norm = rewrite.op(block, "sqrt", X=total)
        checked = norm
        if clip.error_if_nonfinite:
            checked = rewrite.op(block, "check_finite_norm", X=norm, Norms=squares,
                                 attrs={"grad_names": [g.name for _, g in counted]})
        scales = _norm_scales(block, checked, clip.clip_norm, counted)
    return _apply_scales(block, counted, out_names, scales, _clip_role)


# shared with the functional clip_by_global_norm(use_norm=...) (_scale_by_norm below)
def _norm_scales(block: Block, norm: Variable, clip_norm: float, pairs: PairList
                 ) -> Dict[Any, Variable]:
    """``clip_norm / max(norm, clip_norm)`` in ``norm``'s dtype, cast to each gradient dtype
    of ``pairs``: ``{dtype: scale}``."""
    limit = rewrite.op(block, "fill_constant", dtype=norm.dtype, attrs={
        "shape": [1], "dtype": norm.dtype, "value": clip_norm})
    biggest = rewrite.op(block, "elementwise_max", X=limit, Y=norm)
    scale = rewrite.op(block, "elementwise_div", X=limit, Y=biggest)
    scales = {scale.dtype: scale}
    for _, g in pairs:
        if g.dtype not in scales:
            scales[g.dtype] = rewrite.op(block, "cast", dtype=g.dtype, X=scale, attrs={
                "in_dtype": scale.dtype, "out_dtype": g.dtype})
    return scales


def _apply_scales(block: Block, pairs: PairList, out_names: Dict[str, str],
                  scales: Dict[Any, Variable], role: Callable[[Any, Variable], Any]
                  ) -> Dict[str, Variable]:
    """One ``elementwise_mul`` per pair, ``g * scales[g.dtype]`` into ``out_names[key.name]``
    under ``role(key, out)``: ``{key name: result}``."""
    new = {}
    for key, g in pairs:
        out = rewrite.tmp(block, "elementwise_mul", g.dtype, name=out_names[key.name])
        with role(key, out):
            new[key.name] = rewrite.op(block, "elementwise_mul", out=out, X=g,
                                       Y=scales[g.dtype])
    return new


# 1.8 short aliases and 2.x names
ClipByValue = ClipGradByValue = GradientClipByValue
ClipByNorm = ClipGradByNorm = GradientClipByNorm
ClipByGlobalNorm = ClipGradByGlobalNorm = GradientClipByGlobalNorm


# -- finding the global norm ------------------------------------------------------------------
def global_norm_vars(program: Optional[Program] = None) -> List[Variable]:
    """Every global-norm Variable that gradient clipping put in ``program`` (default: the default
    main program), in program order. Each can be fetched: ``exe.run(fetch_list=[...])``."""
    program = program if program is not None else default_main_program()
    block = program.global_block()
    found = []
    for op in block.ops:
        if op.type == "sqrt" and "gradient_clip" in (op.attr("op_namescope") or ""):
            found.append(block.var(op.output("Out")[0]))
    return found


def get_global_norm(program: Optional[Program] = None) -> Variable:
    """The (last) global gradient norm computed by ``GradientClipByGlobalNorm`` in ``program``;
    ValueError when the program has none."""
    found = global_norm_vars(program)
    if not found:
        raise ValueError("the program computes no global gradient norm: attach "
                         "GradientClipByGlobalNorm to the optimizer (grad_clip=...) and call "
                         "minimize first")
    return found[-1]


# -- legacy attachment ------------------------------------------------------------------------
def set_gradient_clip(clip: GradientClipBase, param_list: Optional[Sequence[Any]] = None,
                      program: Optional[Program] = None) -> None:
    """Legacy (<= 1.7): give each parameter of ``param_list`` (names or Parameters; default:
    all parameters of ``program``) its own copy of ``clip``. Used only when the optimizer has no
    ``grad_clip``. Prefer ``Optimizer(..., grad_clip=clip)``.

    Args:
        clip (GradientClipBase): the clip copied to each parameter.
        param_list (list of Parameter | str | None): the parameters (or their names) to clip
            (default: every parameter of ``program``).
        program (Program | None): the program holding them (default: the default main program).
    Returns:
        None: each parameter's ``gradient_clip_attr`` is set; a warning recommends
        ``Optimizer(grad_clip=)`` instead.
    Raises:
        TypeError: ``clip`` is not a ``GradientClipBase`` or ``param_list`` holds something other
            than a Parameter or a name.
        ValueError: a name in ``param_list`` is not a variable of the program's global block.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     loss = fluid.layers.mean(fluid.layers.fc(fluid.data("x", [-1, 2]), size=1))
        ...     fluid.clip.set_gradient_clip(fluid.clip.GradientClipByNorm(clip_norm=1.0))
        ...     _ = fluid.optimizer.SGD(0.1).minimize(loss)
        >>> sorted({op.type for op in main.global_block().ops if "clip" in op.type})
        ['clip_by_norm']
    """
    warnings.warn("Caution! 'set_gradient_clip' is not recommended and may be deprecated in "
                  "future! We recommend a new strategy: set 'grad_clip' when initializing the "
                  "'optimizer'. This method can reduce the mistakes, please refer to "
                  "documention of 'optimizer'.")
    if not isinstance(clip, GradientClipBase):
        raise TypeError(f"'clip' should be an instance of GradientClipBase's derived class, but "
                        f"received {clip!r}")
    program = program if program is not None else default_main_program()
    block = program.global_block()
    for op in block.ops:
        if "optimizer" in (op.attr("op_namescope") or ""):
            warnings.warn("'minimize' has been invoked before, this will make "
                          "'set_gradient_clip' be ineffective! Please invoke "
                          "'set_gradient_clip' before 'minimize'.")
            break
    if param_list is None:
        param_list = block.all_parameters()
    params = []
    for item in param_list:
        if isinstance(item, str):
            item = block.var(item)
        if not isinstance(item, Parameter):
            raise TypeError("'param_list' should be a list of Parameter or basestring(parameter's "
                            f"name), but it contains {item!r}")
        params.append(item)
    for param in params:
        param.gradient_clip_attr = copy.deepcopy(clip)


def append_gradient_clip_ops(param_grads: Sequence[Tuple[Parameter, Optional[Variable]]]
                             ) -> PairList:
    """Apply the legacy per-parameter clips (``param.gradient_clip_attr``): each parameter uses
    its own clip; parameters without one pass through. ``GradientClipByGlobalNorm`` clips sharing
    a ``group_name`` compute one norm per group (their ``clip_norm`` must agree). Returns the
    input unchanged when no parameter with a gradient has a clip."""
    param_grads = list(param_grads)
    attrs: Dict[str, GradientClipBase] = {}
    for p, g in param_grads:
        attr = getattr(p, "gradient_clip_attr", None)
        if g is None or attr is None:
            continue
        if not isinstance(attr, GradientClipBase):
            raise TypeError(f"the gradient clip attribute of parameter '{p.name}' should be an "
                            f"instance of GradientClipBase, but it is {attr!r}")
        attrs[p.name] = attr
    if not attrs:
        return param_grads
    new_grads: Dict[str, Variable] = {}
    groups: Dict[str, List[Tuple[Parameter, Variable]]] = {}
    with name_scope("gradient_clip_@CLIP"):
        for p, g in param_grads:
            attr = attrs.get(p.name)
            if attr is None or not attr._needs(p):
                continue
            if isinstance(attr, GradientClipByGlobalNorm):
                groups.setdefault(attr.group_name, []).append((p, g))
                continue
            new_grads[p.name] = attr._clip_one(p, g)
        for group_name, pairs in groups.items():
            norms = {attrs[p.name].clip_norm for p, _ in pairs}
            if len(norms) > 1:
                raise ValueError(f"All parameters' 'clip_norm' of a same group should be the "
                                 f"same: group '{group_name}' has {sorted(norms)}")
            lead: GradientClipByGlobalNorm = attrs[pairs[0][0].name]  # type: ignore[assignment]
            new_grads.update(_scale_by_global_norm(lead, pairs))
            for p, _ in pairs[1:]:
                attrs[p.name].global_norm = lead.global_norm  # type: ignore[attr-defined]
    return [(p, new_grads.get(p.name, g)) for p, g in param_grads if g is not None]


# -- functional clipping (issue 13): MindSpore's ops.clip_by_value / ops.clip_by_global_norm ---
# Both take a tensor or a (nested) tuple/list of them (None items pass through) and return the
# same structure. Dygraph tensors are clipped now, through the tracer (so the results are
# differentiable); static Variables get the ops appended to their block, op_role Optimize in
# name_scope('gradient_clip') like the GradientClip* passes, each op_role_var naming the input
# and its clipped result (the functional form has no parameter to name).
def _clip_leaves(api: str, x: Any) -> Tuple[List[Any], Callable[[List[Any]], Any]]:
    """The leaves of ``x`` (a tensor/Variable, None, or a nested tuple/list) and a function
    rebuilding the structure from new leaves. NumPy arrays are converted in dygraph mode."""
    leaves: List[Any] = []

    def walk(item: Any, path: str) -> Any:
        if isinstance(item, (tuple, list)):
            parts = [walk(v, f"{path}[{i}]") for i, v in enumerate(item)]
            return lambda it: type(item)(p(it) for p in parts)
        if isinstance(item, np.ndarray) and _mode.tracer is not None:
            item = _mode.implementation("to_variable")(item)
        if item is not None and not isinstance(item, Variable):
            raise TypeError(f"{api}: x{path} must be a tensor, a static Variable, None or a "
                            f"tuple/list of them, but received {type(item).__name__}"
                            + (" (numpy arrays are accepted in dygraph mode only)"
                               if isinstance(item, np.ndarray) else ""))
        leaves.append(item)
        return lambda it: next(it)

    build = walk(x, "")
    kinds = {_mode.is_tensor(v) for v in leaves if v is not None}
    if len(kinds) > 1:
        raise TypeError(f"{api}: x mixes dygraph tensors and static Variables")
    return leaves, lambda new: build(iter(new))


def _run_functional(fn: Callable[[], Any], leaves: List[Any]) -> Any:
    """Run ``fn`` in dygraph mode when the leaves are dygraph tensors and no guard is open (a
    temporary guard, as the functional ``grad`` does), else as is."""
    if _mode.tracer is None and any(v is not None and _mode.is_tensor(v) for v in leaves):
        with _mode.implementation("guard")():
            return fn()
    return fn()


def clip_by_value(x: Any, clip_value_min: Optional[float] = None,
                  clip_value_max: Optional[float] = None) -> Any:
    """``min(max(x, clip_value_min), clip_value_max)`` per element of every tensor in ``x`` (a
    tensor or a nested tuple/list), with the ``clip`` op of ``GradientClipByValue``. A bound left
    None is not applied (at least one is needed); ``clip_value_min <= clip_value_max``."""
    api = "clip_by_value"
    if clip_value_min is None and clip_value_max is None:
        raise ValueError(f"{api}: clip_value_min and clip_value_max cannot both be None")
    lo = -math.inf if clip_value_min is None else _number(api, "clip_value_min", clip_value_min)
    hi = math.inf if clip_value_max is None else _number(api, "clip_value_max", clip_value_max)
    if lo > hi:
        raise ValueError(f"{api}: clip_value_min ({lo}) must not be greater than clip_value_max "
                         f"({hi})")
    leaves, rebuild = _clip_leaves(api, x)

    def run() -> Any:
        out = []
        with name_scope("gradient_clip"):
            for v in leaves:
                if v is None:
                    out.append(None)
                    continue
                block = v.block
                res = rewrite.tmp(block, "clip", v.dtype)
                with rewrite.role(block.program, OpRole.Optimize, [v, res]):
                    out.append(rewrite.op(block, "clip", out=res, X=v,
                                          attrs={"min": lo, "max": hi}))
        return rebuild(out)
    return _run_functional(run, leaves)


def clip_by_global_norm(x: Any, clip_norm: float = 1.0, use_norm: Any = None) -> Any:
    """Scale every tensor of ``x`` (a tensor or a nested tuple/list) by
    ``clip_norm / max(G, clip_norm)``, ``G = sqrt(sum_i ||x_i||^2)`` over all of them (or
    ``use_norm`` when given: a number or a one-element tensor/Variable): the tensors are
    unchanged when ``G <= clip_norm``. ``G`` is computed by ``GradientClipByGlobalNorm``'s own
    op chain (float64 ``squared_l2_norm`` ... ``elementwise_div``); a tensor given twice counts
    once."""
    api = "clip_by_global_norm"
    clip_norm = _number(api, "clip_norm", clip_norm)
    if clip_norm <= 0:
        raise ValueError(f"{api}: clip_norm must be > 0, but received {clip_norm}")
    if use_norm is not None and not isinstance(use_norm, Variable):
        use_norm = _number(api, "use_norm", use_norm)
        if use_norm < 0:
            raise ValueError(f"{api}: use_norm is a norm, it must be >= 0, but received "
                             f"{use_norm}")
    leaves, rebuild = _clip_leaves(api, x)
    present = [v for v in leaves if v is not None]
    if not present:
        return rebuild(leaves)
    if len({v.block.program for v in present if not _mode.is_tensor(v)}) > 1:
        raise ValueError(f"{api}: the Variables of x belong to different Programs")

    def run() -> Any:
        # _scale_by_global_norm keys pairs by parameter: here each distinct tensor is its own
        # key (a static Variable itself; a named stand-in for a dygraph tensor, whose names
        # need not be unique)
        keys: Dict[int, Any] = {}
        for v in present:
            if id(v) not in keys:
                if _mode.is_tensor(v):
                    keys[id(v)] = _mode.tracer.new_var(name=rewrite.tmp_name(api))
                else:
                    keys[id(v)] = v
        pairs = [(keys[i], v) for i, v in {id(v): v for v in present}.items()]
        with name_scope("gradient_clip"):
            if use_norm is None:
                new = _scale_by_global_norm(GradientClipByGlobalNorm(clip_norm), pairs)
            else:
                new = _scale_by_norm(use_norm, clip_norm, pairs)
        return rebuild([None if v is None else new[keys[id(v)].name] for v in leaves])
    return _run_functional(run, leaves)


def _scale_by_norm(norm: Any, clip_norm: float, pairs: PairList) -> Dict[str, Variable]:
    """The tail of ``_scale_by_global_norm`` with a given norm (a number or a Variable):
    ``g * clip_norm / max(norm, clip_norm)`` per pair, ``{key name: result}``."""
    block = pairs[-1][1].block
    out_names = {key.name: rewrite.tmp_name("elementwise_mul") for key, _ in pairs}
    last = pairs[-1][0]
    with rewrite.role(block.program, OpRole.Optimize, [last, out_names[last.name]]):
        if not isinstance(norm, Variable):
            norm = rewrite.op(block, "fill_constant", dtype="float64", attrs={
                "shape": [1], "dtype": "float64", "value": norm})
        scales = _norm_scales(block, norm, clip_norm, pairs)
    return _apply_scales(block, pairs, out_names, scales, lambda key, out: rewrite.role(
        block.program, OpRole.Optimize, [key, out]))
