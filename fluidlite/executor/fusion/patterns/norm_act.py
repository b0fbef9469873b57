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

* ``CENTRED_PAIR``: a batch norm's gradient (fused with its activation's or not) in
  batch-statistics mode and the forward that wrote its SavedMean from the same X, nothing in
  between writing X: the forward also writes X - SavedMean, which it makes anyway, into a
  variable of the plan alone (``<X>@CENTRED<block>.<position>``), and the gradient reads it in
  X's place instead of making it again -- one pass over the map and one batch-sized array
  fewer, and X is no longer held from the forward to the gradient (the centred map is,
  instead). A plain pair becomes ``fused(batch_norm+centred)`` /
  ``fused(centred+batch_norm_grad)``; the fused ones keep their names.

Any layout: batch norm cuts only NCHW maps into channel blocks; on others the fused kernels run
the activation on the whole map, as the unfused ops do.
"""
from __future__ import annotations

from typing import Any, Optional

from ..kernels.norm_act import (ACTS, BN_OUTPUTS, CENTRED, ActBatchNormGrad, BatchNormAct,
                                BatchNormAddAct, BatchNormCentred, BatchNormGradCentred,
                                centred)
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


def _batch_stats(attrs: Any) -> bool:
    """The batch norm normalizes by its batch's statistics (its gradient centres X)."""
    return not (attrs.get("use_global_stats", False)
                or (attrs.get("is_test", False) and not attrs.get("trainable_statistics", False)))


def _centred(m: Match, cx: Context) -> Optional[Rewrite]:
    grad, at = m["grad"], m.root
    x, mean = grad.inputs["X"][0], grad.inputs["SavedMean"][0]
    j = cx.producer(mean, at)
    if j is None:
        return None
    fwd = cx.ops[j]
    fused = isinstance(cx.opdef(fwd), (BatchNormAct, BatchNormAddAct))
    bn = fwd.covered[0] if fused else fwd
    if cx.matches(_BN_FORWARD, j) is None or fwd.inputs.get("X") != [x] \
            or x in fwd.output_arg_names or cx.written_between([x], j, at) \
            or not (_batch_stats(bn.attrs) and _batch_stats(grad.attrs)):
        return None
    name = f"{x}@CENTRED{cx.block.idx}.{j}"
    outputs = {k: list(v) for k, v in fwd.outputs.items()}
    outputs[CENTRED] = [name]
    kernel = centred(fwd.opdef) if fused else BatchNormCentred(bn.attrs)
    new_fwd = FusedOp(kernel, [fwd], {k: list(v) for k, v in fwd.inputs.items()}, outputs)
    inputs = {k: list(v) for k, v in grad.inputs.items()}
    inputs["X"] = [name]
    gkernel = centred(grad.opdef) if isinstance(cx.opdef(grad), ActBatchNormGrad) \
        else BatchNormGradCentred(grad.attrs)
    new_grad = FusedOp(gkernel, [grad], inputs, {k: list(v) for k, v in grad.outputs.items()})
    return Rewrite(j, new_fwd, frozenset(), ((at, new_grad),))


# the forwards that write a SavedMean, and the gradients that read it (their fused forms keep
# their names when they hand over / read the centred map)
_BN_FORWARD = P("batch_norm", *(f"fused(batch_norm+{a})" for a in ACTS),
                *(f"fused(batch_norm+elementwise_add+{a})" for a in ACTS))
CENTRED_PAIR = Pattern("batch_norm_centred", P(
    "batch_norm_grad", *(f"fused({a}_grad+batch_norm_grad)" for a in ACTS), name="grad",
    where=lambda op, cx: not getattr(cx.opdef(op), "centred", False)), _centred)
