"""A batch norm and the activation after it, forward and backward (``kernels/norm_act.py``).

* ``FORWARD``: ``batch_norm -> Y -> relu/relu6 -> Out``, the activation right after the batch
  norm and the only reader of its Y (a private temporary), becomes ``fused(batch_norm+<act>)``
  at the activation's position, writing Out and batch_norm's statistics.
* ``BACKWARD``: ``relu/relu6_grad -> dY -> batch_norm_grad``, where dY is a private temporary
  only batch_norm_grad reads and nothing in between writes the activation gradient's inputs,
  becomes ``fused(<act>_grad+batch_norm_grad)`` at batch_norm_grad's position.

Any layout: batch norm cuts only NCHW maps into channel blocks; on others the fused kernels run
the activation on the whole map, as the unfused ops do.
"""
from __future__ import annotations

from typing import Optional

from ..kernels.norm_act import ACTS, BN_OUTPUTS, ActBatchNormGrad, BatchNormAct
from ..matcher import Context, FusedOp, Match, P, Pattern, Rewrite


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
BACKWARD = Pattern("act_grad_batch_norm_grad",
                   P("batch_norm_grad", name="bn",
                     src={"Y@GRAD": P(*(a + "_grad" for a in ACTS), name="act", folded=True)}),
                   _backward)
