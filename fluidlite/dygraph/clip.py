"""The dygraph branch of gradient clipping: ``fluid.clip``'s objects clip gradient tensors now.

``GradientClip*.__call__`` in dygraph mode hands its pairs to ``clip_pairs`` (registered with
``core.mode`` as ``"clip"``: the clip classes sit below dygraph and cannot import it). Every clip
computes with the kernels of the ops its static pass appends (``tracer.kernel``), in the same
order, so both modes give the same numbers:

* ``GradientClipByValue`` / ``ByNorm``: the ``clip`` / ``clip_by_norm`` kernel per gradient;
* ``GradientClipByGlobalNorm``: float64 ``squared_l2_norm`` per counted gradient, ``sum``,
  ``sqrt``, [``check_finite_norm``], ``elementwise_max`` with ``clip_norm``,
  ``elementwise_div``, ``cast``, then ``elementwise_mul`` per gradient; ``clip.global_norm`` is
  left holding G as a tensor. ``global_norm_scales`` is that chain without the multiplications,
  for the dygraph optimizer's fused in-place updates (``optim.py``).
"""
from __future__ import annotations

from typing import Any, Dict, List, Tuple

from ..clip import GradientClipBase, GradientClipByGlobalNorm
from ..core import mode as _mode
from .tensor import VarBase
from .tracer import kernel

__all__ = ["clip_pairs", "global_norm_scales"]

Pairs = List[Tuple[Any, Any]]


def _array(grad: Any) -> Any:
    """The NumPy array of a dygraph gradient (a tensor, or an array already)."""
    return grad._array() if hasattr(grad, "_array") else grad


def clip_pairs(clip: GradientClipBase, params_grads: Pairs) -> Pairs:
    """``clip(params_grads)`` in dygraph mode: the new ``(param, grad tensor)`` pairs; pairs
    with a None gradient are dropped, gradients ``clip`` does not need pass unchanged."""
    if isinstance(clip, GradientClipByGlobalNorm):
        return _clip_by_global_norm(clip, params_grads)
    op_type, attrs = clip._op_for_one()
    return [(p, VarBase(kernel(op_type, attrs, X=_array(g)), name=g.name)
             if clip._needs(p) else g) for p, g in params_grads if g is not None]


def _clip_by_global_norm(clip: GradientClipByGlobalNorm, params_grads: Pairs) -> Pairs:
    counted = [(p, g) for p, g in params_grads if g is not None and clip._needs(p)]
    if not counted:          # nothing to clip: the input, unchanged (None grads included)
        return list(params_grads)
    scales = global_norm_scales(clip, counted)
    new = {p.name: VarBase(kernel("elementwise_mul", X=_array(g), Y=scales[_array(g).dtype]),
                           name=g.name)
           for p, g in counted}
    return [(p, new.get(p.name, g)) for p, g in params_grads if g is not None]


def global_norm_scales(clip: GradientClipByGlobalNorm, counted: Pairs) -> Dict[Any, Any]:
    """``{grad dtype: clip_norm / max(G, clip_norm)}`` for the counted ``(param, grad)`` pairs
    (the norm chain of the module docstring; sets ``clip.global_norm``). A dygraph optimizer
    with an in-place update multiplies each gradient by it inside the update, as the static
    plan's fused update does."""
    arrays = [_array(g) for _, g in counted]
    squares = [kernel("squared_l2_norm", X=a) for a in arrays]
    total = kernel("sum", {"use_mkldnn": False}, X=squares)
    norm = kernel("sqrt", X=total)
    clip.global_norm = VarBase(norm, name="global_norm")
    checked = norm
    if clip.error_if_nonfinite:
        checked = kernel("check_finite_norm", {"grad_names": [g.name for _, g in counted]},
                         X=norm, Norms=squares)
    # fill_constant is pure: its [1] result is kept per (clip_norm, dtype)
    key = (clip.clip_norm, norm.dtype)
    limit = clip.__dict__.get("_dygraph_limit", {}).get(key)
    if limit is None:
        limit = kernel("fill_constant", {"shape": [1], "dtype": norm.dtype,
                                         "value": clip.clip_norm})
        clip.__dict__["_dygraph_limit"] = {key: limit}
    scale = kernel("elementwise_div", X=limit, Y=kernel("elementwise_max", X=limit, Y=checked))
    scales = {scale.dtype: scale}
    for a in arrays:
        if a.dtype not in scales:
            scales[a.dtype] = kernel("cast", {"in_dtype": scale.dtype, "out_dtype": a.dtype},
                                     X=scale)
    return scales


_mode.register("clip", clip_pairs)
