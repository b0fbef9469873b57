"""``fused(slice_grads)``: the sum of the ``slice_grad``s of one tensor as one scatter.

A tensor cut into T slices (an unrolled recurrent layer reading its input one time step at a
time) gets T ``slice_grad``s, each a zero tensor of the input's shape with its slice's
gradient written in, and a T-input ``sum`` over them: T allocations and T - 1 passes over the
whole input's size for what is one tensor of gradients. Here that tensor is made once and each
slice's gradient added into its window, in the sum's order: the same sums (a value plus the
zeros of the other slices is that value), made in one pass over the input's size. (One
difference in the sign of a zero: where every slice covers an element and every gradient there
is -0.0, the unfused sum starts from the first and keeps -0.0, this one gives +0.0.)
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Sequence

import numpy as np

from ....core import registry
from ..matcher import FusedDef

# the window attrs of a static slice (what ``slice``'s ``_window`` takes besides the tensors)
WINDOW_ATTRS = ("axes", "starts", "ends", "decrease_axis")


class SliceGradSum(FusedDef):
    """Out = sum_t slice_grad(Input, OutGrad[t]; windows[t]): zeros of Input's shape (OutGrad's
    dtype), then ``OutGrad[t]`` added into window t, for t in order."""

    def __init__(self, windows: Sequence[Mapping[str, Any]]) -> None:
        super().__init__("fused(slice_grads)", ("Input", "OutGrad*"), ("Out",))
        self.windows: List[Dict[str, List[int]]] = [
            {k: list(w.get(k, ())) for k in WINDOW_ATTRS} for w in windows]
        self.window = registry.get_op_def("slice")._window

    def forward(self, Input: np.ndarray, OutGrad: Sequence[np.ndarray]) -> Dict[str, np.ndarray]:
        if len(OutGrad) != len(self.windows):
            raise ValueError(f"fused(slice_grads): {len(OutGrad)} OutGrad for "
                             f"{len(self.windows)} slices")
        out = np.zeros(Input.shape, OutGrad[0].dtype)
        for w, d in zip(self.windows, OutGrad):
            idx, full = self.window(Input, None, None, None, None, **w)
            view = out[idx]
            if view.size != d.size:
                raise ValueError(f"fused(slice_grads): a gradient of shape {list(d.shape)} "
                                 f"for a slice of shape {list(view.shape)} of "
                                 f"{list(Input.shape)}")
            view += d.reshape(full)
        return {"Out": out}
