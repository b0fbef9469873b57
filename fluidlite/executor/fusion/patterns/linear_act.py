"""An fc layer's forward: ``mul -> elementwise_add(bias) [-> relu]`` as one kernel
(``kernels/linear_act.py``).

* ``LINEAR_ACT``: ``mul -> P -> elementwise_add(P, b) -> S -> relu -> Out`` becomes
  ``fused(mul+elementwise_add+relu)`` at the relu's position.
* ``LINEAR``: ``mul -> P -> elementwise_add(P, b) -> Out`` (no relu after it, or one that
  cannot fuse) becomes ``fused(mul+elementwise_add)`` at the add's position.

When: the mul multiplies by a 2-D weight (``y_num_col_dims`` 1); the add's Y is a 1-D bias of
the weight's width added on the product's last axis; X, the weight and the bias share one
dtype, float32 or float64 (a float16 product is made in float32 and rounded, not fused); P
is a private temporary that, besides the add, only ops reading its shape alone read
(``Context.reads_shape_only``: the add's gradient), all after the fused op; S is a private
temporary only the relu reads; nothing in between writes the chain's inputs.
"""
from __future__ import annotations

from typing import Dict, List, Optional

import numpy as np

from ..kernels.linear_act import LinearAct
from ..matcher import Context, FusedOp, Match, P, Pattern, Rewrite

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def _only_shape_read_after(cx: Context, name: str, by: int, at: int) -> bool:
    """``name`` is private and every reader but op ``by`` reads its shape alone, after ``at``."""
    return cx.private(name) and all(
        r == by or (r > at and cx.reads_shape_only(r, name)) for r in cx.readers(name))


def _build(m: Match, cx: Context) -> Optional[Rewrite]:
    mul, add, act = m["mul"], m["add"], m["act"]
    x, w, prod = mul.inputs["X"][0], mul.inputs["Y"][0], mul.outputs["Out"][0]
    bias, total = add.inputs["Y"][0], add.outputs["Out"][0]
    xnc = mul.attrs.get("x_num_col_dims", 1)
    wv, bv, pv = cx.var(w), cx.var(bias), cx.var(prod)
    if (add.inputs["X"][0] != prod or mul.attrs.get("y_num_col_dims", 1) != 1
            or wv is None or bv is None or pv is None
            or len(wv.shape) != 2 or len(bv.shape) != 1 or bv.shape[0] != wv.shape[1]
            or wv.shape[1] < 0 or len(pv.shape) != xnc + 1
            or add.attrs.get("axis", -1) not in (-1, xnc)):
        return None
    dtypes = {cx.dtype(n) for n in (x, w, bias, prod, total)}
    if len(dtypes) != 1 or dtypes.pop() not in _FLOATS:
        return None
    root, first = m.root, m.pos["mul"]
    if not _only_shape_read_after(cx, prod, m.pos["add"], root):
        return None
    # (anything reading the biased sum but the relu reads its values: a forward op)
    if act is not None and (act.inputs["X"][0] != total or not cx.private(total)
                            or cx.readers(total) != [root]):
        return None
    if cx.written_between((x, w, bias), first, root):
        return None
    outputs: Dict[str, List[str]] = {
        "Out": list(act.outputs["Out"]) if act is not None else [total]}
    if cx.readers(prod) != [m.pos["add"]]:          # a stand-in only where it is read
        outputs["Product"] = [prod]
    op = FusedOp(LinearAct(xnc, act.type if act is not None else "",
                           ["Product"] if "Product" in outputs else []),
                 [o for o in (mul, add, act) if o is not None],
                 {"X": [x], "Y": [w], "Bias": [bias]}, outputs)
    return m.replace(op)


_CHAIN = P("elementwise_add", name="add", src={"X": P("mul", name="mul")})
LINEAR_ACT = Pattern("linear_act", P("relu", name="act", src={"X": _CHAIN}), _build)
LINEAR = Pattern("linear", _CHAIN, _build)
