"""``GradientClipByGlobalNorm``'s chain as one kernel (``kernels/global_norm.py``).

The chain: N ``squared_l2_norm`` + ``sum`` + ``sqrt`` [+ ``check_finite_norm``] +
``fill_constant`` (the clip norm) + ``elementwise_max`` + ``elementwise_div`` [+ the ``cast`` of
the scale to the gradients' dtype] becomes ``fused(global_norm)`` at the position of its last
op. Its internal values must be private temporaries only the chain reads; the global norm,
the scale and the cast scale stay outputs when something else reads them (or sees them: fetched,
persistable), and nothing may write the gradients between the chain's first and last op.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional

import numpy as np

from ..kernels.global_norm import GlobalNorm
from ..matcher import Alt, Context, FusedOp, Match, P, Pattern, Rewrite


def _constant_limit(fill: Any, cx: Context) -> bool:
    return not any(fill.inputs.values()) and list(fill.attrs.get("shape", [])) == [1]


_NORM = P("sqrt", name="sqrt", src={"X": P("sum", name="sum", internal=True, each={
    "X": P("squared_l2_norm", name="squares", internal=True)})})
_LIMIT = P("fill_constant", name="fill", where=_constant_limit, internal=True)
ROOT = P("elementwise_div", name="div", src={
    "X": _LIMIT,
    "Y": P("elementwise_max", name="max", internal=True, src={
        "X": _LIMIT,
        "Y": Alt(P("check_finite_norm", name="check", internal=True, src={"X": _NORM}),
                 _NORM)})})
_SCALE_CAST = P("cast")         # the scale cast to the gradients' dtype (its first such reader)


def _build(m: Match, cx: Context) -> Optional[Rewrite]:
    check, total = m["check"], m["sum"]
    squares = total.inputs["X"]
    if check is not None and check.inputs.get("Norms", []) != squares:
        return None
    scale = m["div"].outputs["Out"][0]
    k = cx.first_reader(scale, _SCALE_CAST)
    chain = set(m.covered) | ({k} if k is not None else set())
    anchor = max(chain)
    outs = _outputs(m, cx, chain, anchor, k)
    grads = [q.inputs["X"][0] for q in m["squares"]]
    if outs is None or any(set(grads).intersection(cx.ops[i].output_arg_names)
                           for i in range(min(chain), anchor) if i not in chain):
        return None             # the chain moves to ``anchor``: the gradients must hold
    dtype = _chain_dtype(m, cx)
    if dtype is None:
        return None
    square = None
    if dtype == np.float64:                 # the op's own kernels: bit-identical
        square = [_kernel(q, cx) for q in m["squares"]]
    cast_to = cx.dtype(cx.ops[k].outputs["Out"][0]) if k is not None else None
    grad_names = list(check.attrs.get("grad_names", [])) if check is not None else None
    opdef = GlobalNorm(square, dtype, float(m["fill"].attrs.get("value", 0.0)), cast_to,
                       grad_names, list(outs))
    fused = FusedOp(opdef, [cx.ops[i] for i in sorted(chain)], {"X": grads}, outs)
    return m.replace(fused, at=anchor, also=chain)


def _outputs(m: Match, cx: Context, chain: set, anchor: int,
             k: Optional[int]) -> Optional[Dict[str, List[str]]]:
    """The values the fused op must write (read outside the chain, or visible), or None when
    one is read before the chain's new position."""
    named = [("Norm", m["sqrt"].outputs["Out"][0]), ("Scale", m["div"].outputs["Out"][0])]
    if k is not None:
        named.append(("ScaleCast", cx.ops[k].outputs["Out"][0]))
    outs: Dict[str, List[str]] = {}
    for slot, n in named:
        outside = [r for r in cx.readers(n) if r not in chain]
        if any(r < anchor for r in outside):
            return None
        if outside or not cx.private(n):
            outs[slot] = [n]
    if not outs:
        outs["Scale"] = [named[1][1]]
    return outs


def _chain_dtype(m: Match, cx: Context) -> Optional[np.dtype]:
    """The one float dtype of every value in the chain, or None."""
    names_ = list(m["sum"].inputs["X"]) + [
        m[n].outputs["Out"][0] for n in ("sum", "sqrt", "fill", "max", "div")]
    dtypes = {cx.dtype(n) for n in names_}
    if len(dtypes) != 1 or next(iter(dtypes)) not in (np.float32, np.float64):
        return None
    return next(iter(dtypes))


def _kernel(op: Any, cx: Context) -> Any:
    """The plan's callable for the single-input, single-output ``op``."""
    v = cx.var(op.inputs["X"][0])
    bound = cx.opdef(op).bind([v.spec if v is not None else None], {}, frozenset({"Out"}))
    fn = bound.fn
    return fn if bound.single else (lambda a: fn(a)["Out"])


PATTERN = Pattern("global_norm", ROOT, _build, reverse=True)
