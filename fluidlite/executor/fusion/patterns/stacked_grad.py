"""A weight shared by several products: its gradient as one stacked GEMM
(``kernels/stacked_grad.py``).

* ``SHARED_WEIGHT``: ``sum(Y@GRAD_1, ..., Y@GRAD_T) -> W@GRAD``, every input the ``Y@GRAD`` of
  a plain 2-D ``mul_grad`` / ``matmul_grad`` of the same Y (the backward pass's accumulation of
  a weight used T times), each read by the sum alone, becomes ``fused(stacked_weight_grad)`` at
  the sum's position, reading the products' X and Out@GRAD (which nothing may write in
  between). The grad ops stay, their ``Y@GRAD`` now unread. Dygraph's ``backward()``
  stacks the same products (``dygraph/autograd.py``), so the dygraph step replay's plans,
  which must give the eager step's bits, stack them too.
* ``UNREAD_GRADS``: a ``mul_grad`` / ``matmul_grad`` whose ``Y@GRAD`` is a private temporary
  nobody reads computes its ``X@GRAD`` alone (the rule's ``wanted``): one GEMM instead of two.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from ..kernels.stacked_grad import StackedWeightGrad
from ..matcher import Context, FusedOp, Match, P, Pattern, Rewrite

# the grad ops of plain products, with the attrs (and their values) that keep them X @ Y: no
# flattening, transposes, alpha or heads (dygraph's backward stacks the same products:
# dygraph/autograd.py)
PLAIN_PRODUCTS = {
    "mul_grad": {"x_num_col_dims": 1, "y_num_col_dims": 1},
    "matmul_grad": {"transpose_X": False, "transpose_Y": False, "alpha": 1.0,
                    "head_number": 1},
}
_GRAD_TYPES = tuple(PLAIN_PRODUCTS)


def _plain_product(op: Any, cx: Context) -> bool:
    """X @ Y of two declared 2-D float operands of one dtype (``PLAIN_PRODUCTS``' attrs)."""
    plain = all(op.attrs.get(k, v) == v for k, v in PLAIN_PRODUCTS[op.type].items())
    if not plain or not all(op.inputs.get(s) for s in ("X", "Y", "Out@GRAD")):
        return False
    names_ = (op.inputs["X"][0], op.inputs["Y"][0], op.inputs["Out@GRAD"][0])
    vs = [cx.var(n) for n in names_]
    dts = {cx.dtype(n) for n in names_}
    return (all(v is not None and v.shape is not None and len(v.shape) == 2 for v in vs)
            and len(dts) == 1 and next(iter(dts)) in (np.float32, np.float64))


def _shared(m: Match, cx: Context) -> Optional[Rewrite]:
    total, grads, at = m["sum"], m["grads"], m.root
    ws = {g.inputs["Y"][0] for g in grads}
    if len(grads) < 2 or len(ws) != 1:
        return None
    xs, ds = [], []
    for name, g, pos in zip(total.inputs["X"], grads, m.pos["grads"]):
        if (g.outputs.get("Y@GRAD") != [name] or not cx.private(name)
                or cx.readers(name) != [at]):
            return None
        x, d = g.inputs["X"][0], g.inputs["Out@GRAD"][0]
        if cx.written_between((x, d), pos, at):
            return None
        xs.append(x)
        ds.append(d)
    op = FusedOp(StackedWeightGrad(), [total], {"X": xs, "OutGrad": ds},
                 {"Out": list(total.outputs["Out"])})
    return m.replace(op)


def _unread_dw(op: Any, cx: Context) -> bool:
    dw, dx = op.outputs.get("Y@GRAD") or [], op.outputs.get("X@GRAD") or []
    return (len(dw) == 1 and len(dx) == 1 and cx.private(dw[0]) and not cx.readers(dw[0]))


def _dx_alone(m: Match, cx: Context) -> Optional[Rewrite]:
    g = m["grad"]
    outputs = {k: list(v) for k, v in g.outputs.items() if k != "Y@GRAD"}
    return m.replace(FusedOp(cx.opdef(g), [g], {k: list(v) for k, v in g.inputs.items()},
                             outputs))


SHARED_WEIGHT = Pattern("stacked_weight_grad",
                        P("sum", name="sum", each={"X": P(*_GRAD_TYPES, name="grads", keep=True,
                                                          where=_plain_product)}),
                        _shared)
UNREAD_GRADS = Pattern("unread_weight_grad", P(*_GRAD_TYPES, name="grad", where=_unread_dw),
                       _dx_alone)
