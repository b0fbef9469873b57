"""A batch norm and the activation after it, forward and backward (``kernels/norm_act.py``).

* ``FORWARD``: ``batch_norm -> Y -> relu/relu6 -> Out``, the activation right after the batch
  norm and the only reader of its Y (a private temporary), becomes ``fused(batch_norm+<act>)``
  at the activation's position, writing Out and batch_norm's statistics.
* ``ADD_FORWARD``: ``batch_norm -> Y``, ``elementwise_add(Y, S) -> Z`` (either order, S of
  Y's declared shape and dtype: a residual block's shortcut), ``relu/relu6(Z) -> Out``, each op
  right after the one before (the batch norm before the add may follow the shortcut's ops), Y
  and Z private temporaries read only by the next op -- and Y by ops after the fused one that
  read its shape alone (the add's gradient: it gets a zero stand-in) --, becomes
  ``fused(batch_norm+elementwise_add+<act>)`` at the activation's position.
* ``BACKWARD``: ``relu/relu6_grad -> dY -> batch_norm_grad``, where dY is a private temporary
  only batch_norm_grad reads and nothing in between writes the activation gradient's inputs,
  becomes ``fused(<act>_grad+batch_norm_grad)`` at batch_norm_grad's position.

Any layout: batch norm cuts only NCHW maps into channel blocks; on others the fused kernels run
the activation on the whole map, as the unfused ops do.
"""
from __future__ import annotations

from typing import Optional

from ..kernels.norm_act import ACTS, BN_OUTPUTS, ActBatchNormGrad, BatchNormAct, BatchNormAddAct
from ..matcher import Alt, Context, FusedOp, Match, P, Pattern, Rewrite


def _forward(m: Match, cx: Context) -> Optional[Rewrite]:
    bn, act = m["bn"], m["act"]
    y = bn.outputs["Y"][0]
    if act.inputs["X"][0] != y or not cx.private(y) or cx.readers(y) != [m.root]:
        return None
    outputs = {"Out": list(act.outputs["Out"])}
    outputs.update((k, list(bn.outputs[k])) for k in BN_OUTPUTS if bn.outputs.get(k))
    op = FusedOp(BatchNormAct(act.type, bn.attrs, act.attrs), [bn, act],
                 {k: list(v) for k, v in bn.inputs.items()}, outputs)
    return m.replace(op)


def _add_forward(m: Match, cx: Context) -> Optional[Rewrite]:
    bn, add, act = m["bn"], m["add"], m["act"]
    y, z = bn.outputs["Y"][0], add.outputs["Out"][0]
    xs = add.inputs["X"] + add.inputs["Y"]
    if len(xs) != 2 or xs.count(y) != 1 or act.inputs["X"][0] != z:
        return None
    res = xs[1 - xs.index(y)]
    vy, vr = cx.var(y), cx.var(res)
    at, root = m.pos["add"], m.root
    if vy is None or vr is None or tuple(vy.shape) != tuple(vr.shape) \
            or vy.dtype != vr.dtype or len(vy.shape) < 2 \
            or add.attrs.get("axis", -1) not in (-1, 0) \
            or not all(cx.private(n) for n in (y, z)) or cx.readers(z) != [root] \
            or not all(r == at or (r > root and cx.reads_shape_only(r, y))
                       for r in cx.readers(y)):
        return None
    outputs = {"Out": list(act.outputs["Out"])}
    outputs.update((k, list(bn.outputs[k])) for k in BN_OUTPUTS if bn.outputs.get(k))
    stand_in = cx.readers(y) != [at]        # the add's gradient reads its shape
    if stand_in:
        outputs["Y"] = [y]
    inputs = {k: list(v) for k, v in bn.inputs.items()}
    inputs["Residual"] = [res]
    op = FusedOp(BatchNormAddAct(act.type, bn.attrs, act.attrs, stand_in), [bn, add, act],
                 inputs, outputs)
    return m.replace(op)


def _backward(m: Match, cx: Context) -> Optional[Rewrite]:
    bn, act = m["bn"], m["act"]
    inputs = {k: list(bn.inputs[k]) for k in ("X", "Scale", "SavedMean", "SavedVariance")}
    inputs["Out"], inputs["Out@GRAD"] = list(act.inputs["Out"]), list(act.inputs["Out@GRAD"])
    op = FusedOp(ActBatchNormGrad(act.type[:-len("_grad")], act.attrs, bn.attrs), [act, bn],
                 inputs, {k: list(v) for k, v in bn.outputs.items()})
    return m.replace(op)


FORWARD = Pattern("batch_norm_act",
                  P(*ACTS, name="act", src={"X": P("batch_norm", name="bn", adjacent=True)}),
                  _forward)
# the batch norm is the add's X (an identity shortcut) or its Y (a projection shortcut: its
# batch norm comes right before the add)
_BN = P("batch_norm", name="bn", adjacent=True)
ADD_FORWARD = Pattern("batch_norm_add_act", P(*ACTS, name="act", src={"X": Alt(
    P("elementwise_add", name="add", adjacent=True, src={"X": _BN}),
    P("elementwise_add", name="add", adjacent=True, src={"Y": _BN}))}), _add_forward)
BACKWARD = Pattern("act_grad_batch_norm_grad",
                   P("batch_norm_grad", name="bn",
                     src={"Y@GRAD": P(*(a + "_grad" for a in ACTS), name="act", folded=True)}),
                   _backward)
