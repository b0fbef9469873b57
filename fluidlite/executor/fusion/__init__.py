"""Plan-time fusion: cheaper kernels for common op sequences; the Program is never changed.

``fuse(ops, block, fetch_names, feed_names)`` returns the plan's op list with fusable sequences
replaced by ``FusedOp``s, each one kernel call with the inputs and outputs of the ops it covers.
The matcher (``matcher.py``) knows no op type: it applies the declared patterns of
``patterns/`` in the order of ``patterns.PIPELINE``; what a fused op computes is in
``kernels/``. The fusions:

* **A shared weight's gradient** (``patterns/stacked_grad.py``): the ``sum`` of the dW of T
  plain products of one weight (an unrolled recurrent layer) as one GEMM over the stacked rows
  of their X and dOut; the products' grad ops then compute dX alone (dygraph's ``backward()``
  stacks the same products, so a replayed step keeps the eager bits).
* **A sliced tensor's gradient** (``patterns/slice_grads.py``): the ``sum`` of the
  ``slice_grad``s of one tensor as one zero tensor with each slice's gradient added in.
* **An fc layer's forward** (``patterns/linear_act.py``): ``mul``, the bias
  ``elementwise_add`` and a ``relu`` after it as the fc kernel, which adds the bias and applies
  the relu to each block of the product right after its GEMM; the product and the biased sum
  are never made (the add's gradient reads the product for its shape alone:
  ``OpDef.shape_only_inputs``).
* **A forward and its gradient** (``patterns/saved_grad.py``): an op declaring
  ``saves_for_grad`` (GELU, swish, conv2d, layer_norm) also writes, for its grad op, a value
  it makes anyway; the grad op reads it instead of making it again -- GELU's and swish's slope
  instead of the erf and exp (the sigmoid), a Winograd convolution's transformed input tiles
  instead of transforming the input again for the filter gradient, a layer norm's normalized
  rows instead of centring and scaling X again.
* **Batch norm + activation** (``patterns/norm_act.py``): relu / relu6 applied to each channel
  block of a batch norm's output as it is made, and the activation's gradient made block by
  block right before batch_norm_grad reads it (one pass over memory fewer each way; maps batch
  norm does not cut into blocks run the activation on the whole map, as unfused); at a residual
  block's end, the shortcut's ``elementwise_add`` too, block by block before the activation
  (two passes fewer; the add's gradient reads a stand-in for the normalized map's shape).
  Every training batch norm (fused or not) also hands its gradient X - SavedMean, which its
  forward makes anyway, in X's place (one pass fewer in the gradient; ResNet-18 0.96x).
* **All-reduce + scale** (``patterns/allreduce_scale.py``): the data-parallel averaging, in the
  reduction's own buffer (in the gradient's when the plan proves it owned).
* **Global norm** (``patterns/global_norm_clip.py``): ``GradientClipByGlobalNorm``'s chain as
  one kernel, bit-identical on float64 chains, float64-accumulated on float32 ones.
* **Clip scale** (``patterns/clip_scale.py``): the clip's multiply folded into the update op
  reading it, or ``fused(clip_scale)`` (tiny-scale safe) when something else reads it.
* **Updates** (``patterns/update_group.py``, ``guard_skip.py``): every optimizer update op
  with the same type, slots and clip scale as one in-place kernel for all parameters (with the
  skip-on-overflow guard's commits folded back in, and fluid's L2 decay -- ``scale`` of the
  parameter, ``sum`` with the gradient -- for ops declaring ``folds_l2_decay``).

In-place writes happen only in the plan's *commit tail* (``matcher.commit_tail``): an update
group is written in place only when everything after it is an update group or an op declared
``infallible`` (``scale``, ``increment``, the guard's ``select_input``), so every op that can
fail has run before and a failing step leaves the scope untouched. Within a group, members that
cannot be updated in place are computed out of place first. Fed names are never written in
place.
"""
from __future__ import annotations

from typing import Any, Iterable, List, Optional, Sequence

from ...core.ir import Block, Operator
from . import matcher
from .kernels.global_norm import GlobalNorm as _GlobalNorm
from .kernels.reduce_scale import ReduceScale as _ReduceScale
from .kernels.scale import grad_scale
from .kernels.scale import lr_times_scale as _lr_times_scale
from .kernels.scale import scaled as _scaled
from .kernels.update_group import INPLACE_MIN as _INPLACE_MIN
from .kernels.update_group import SMALL as _SMALL
from .kernels.update_group import UpdateGroup as _UpdateGroup
from .matcher import FusedOp
from .patterns import PIPELINE


def fuse(ops: Sequence[Operator], block: Block, fetch_names: Iterable[str] = (),
         feed_names: Optional[Iterable[str]] = None) -> List[Any]:
    """Return the plan's op list with fusable sequences replaced by ``FusedOp``s.

    ``fetch_names`` stay materialised; ``feed_names`` are never updated in place. (Called as
    ``fuse(ops, block, protected)`` by older plans: ``protected`` is then both.) The module's
    ``_INPLACE_MIN`` (read on every call) is the parameter size from which an update runs in
    place.
    """
    fetch = set(fetch_names)
    feed = set(fetch) if feed_names is None else set(feed_names)
    return matcher.run(list(ops), block, fetch, feed, PIPELINE,
                       {"inplace_min": _INPLACE_MIN})


# the kernels under their former names: the dygraph optimizers run the same group and norm
# kernels (dygraph/optim.py), and tests build them directly
__all__ = ["FusedOp", "fuse", "grad_scale", "_GlobalNorm", "_INPLACE_MIN", "_ReduceScale",
           "_SMALL", "_UpdateGroup", "_lr_times_scale", "_scaled"]
