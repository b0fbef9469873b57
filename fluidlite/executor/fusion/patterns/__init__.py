"""The fusion patterns, in the order the matcher applies them (``PIPELINE``).

Each module declares its patterns (``fusion/matcher.py``'s language) and the builder of their
fused op; adding a fusion is adding a module and its entry here (docs/guides/extending.md, "Writing a fusion").
The order matters where one pattern consumes another's result: a shared weight's stacked
gradient leaves its grad ops' Y@GRAD unread, so they compute X@GRAD alone; the clip's
multiplies fold into update members before the standalone ones are fused and the dead casts
dropped; the global-norm chain is matched on what remains; the guard's commits fold into
members before members group.
"""
from __future__ import annotations

from typing import Tuple, Union

from ..matcher import GroupPattern, Pattern
from . import (allreduce_scale, clip_scale, global_norm_clip, guard_skip, linear_act, norm_act,
               saved_grad, slice_grads, stacked_grad, update_group)

PIPELINE: Tuple[Union[Pattern, GroupPattern], ...] = (
    stacked_grad.SHARED_WEIGHT,     # sum of a shared weight's mul/matmul_grad Y@GRADs
    stacked_grad.UNREAD_GRADS,      # ... whose grad ops then compute X@GRAD alone
    slice_grads.SUM,                # sum of the slice_grads of one tensor
    linear_act.LINEAR_ACT,          # mul + bias elementwise_add + relu (an fc layer)
    linear_act.LINEAR,              # ... without a relu
    saved_grad.SAVED_GRAD,          # gelu / swish and their grad op: the slope made once
    norm_act.ADD_FORWARD,           # batch_norm + elementwise_add + relu / relu6
    norm_act.FORWARD,               # batch_norm + relu / relu6
    norm_act.BACKWARD,              # relu / relu6 grad + batch_norm_grad
    norm_act.CENTRED_PAIR,          # ... and its forward, which hands it X - SavedMean
    allreduce_scale.PATTERN,        # c_allreduce_sum / _wait + scale(1/nranks)
    update_group.MEMBERS,           # every update op a member, its clip multiply folded in
    clip_scale.PATTERN,             # the other clip multiplies by a float64 scale
    clip_scale.DEAD_CASTS,          # casts nobody reads any more
    global_norm_clip.PATTERN,       # squared_l2_norm ... elementwise_div [cast]
    guard_skip.PATTERN,             # issue 13: the guard's select_input commits
    update_group.GROUPS,            # members -> one in-place kernel per op type
)
