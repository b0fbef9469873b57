"""``fused(batch_norm+<act>)`` and ``fused(<act>_grad+batch_norm_grad)``: a batch norm and the
activation after it (relu, relu6) as one kernel, forward and backward; and
``fused(batch_norm+elementwise_add+<act>)``, a residual block's end (``BatchNormAddAct``).

On big maps batch norm runs in cache-sized channel blocks (``ops/norm.py``). Fused, the
forward applies the activation to each block of Y right after normalizing it, in place, and
the backward makes each block of dY = act_grad(Out, dOut) right before batch_norm_grad reads
it -- instead of a separate op streaming the whole map through memory once more (relu6_grad
alone was 8 % of a MobileNetV2 training step). Both call the two ops' own kernels on the
blocks. The forward gives the unfused ops' bits (an elementwise activation does not care how
the map is cut). In the backward each dY block is a contiguous array where the unfused kernel
reads a strided view of the whole dY, and einsum may order a channel's sums differently for
the two layouts: dScale, dBias and dX can differ from the unfused ops' by float rounding (a few
ulps). On maps batch norm does not cut the activation runs on the whole map, as unfused.

``centred()`` gives a fused forward (or ``BatchNormCentred``, a batch norm alone) that also
writes X - SavedMean -- which its kernel makes anyway -- and a fused gradient (or
``BatchNormGradCentred``) that reads it in X's place instead of making it again: one pass
over the map and one batch-sized array fewer in every batch norm's gradient
(``patterns/norm_act.py``'s ``CENTRED_PAIR``); the same operations, so the same bits.
"""
from __future__ import annotations

import copy
import functools
from typing import AbstractSet, Any, Callable, Dict, Mapping, Optional, Sequence

import numpy as np

from ....core import registry
from ....core.registry import Binding, Slot
from ..matcher import FusedDef

# the activations fused: their gradient reads Out only, so batch_norm's Y is read by the
# activation alone and never has to exist on its own
ACTS = ("relu", "relu6")
BN_OUTPUTS = ("MeanOut", "VarianceOut", "SavedMean", "SavedVariance")
CENTRED = "Centred"     # the slot of X - SavedMean (a forward's output, read as its grad's X)


def centred(kernel: Any) -> Any:
    """A copy of the fused forward or gradient ``kernel`` that also writes, or reads as X,
    X - SavedMean (``CENTRED``)."""
    new = copy.copy(kernel)
    new.centred = True
    if not isinstance(kernel, ActBatchNormGrad):
        new.out_slots = kernel.out_slots + (Slot(CENTRED),)
    return new


class BatchNormAct(FusedDef):
    """Out = act(batch_norm(X)), with batch_norm's other outputs (running and saved
    statistics) as they are."""

    def __init__(self, act: str, bn_attrs: Mapping[str, Any],
                 act_attrs: Mapping[str, Any]) -> None:
        super().__init__(f"fused(batch_norm+{act})",
                         ("X", "Scale", "Bias", "Mean", "Variance", "MomentumTensor?"),
                         ("Out",) + BN_OUTPUTS)
        self.bn, self.act = registry.get_op_def("batch_norm"), registry.get_op_def(act)
        self.bn_kw = self.bn.kernel_attrs(bn_attrs)
        self.centred = False
        act_kw = self.act.kernel_attrs(act_attrs)
        self.then: Callable[[np.ndarray], None] = (
            functools.partial(self.act.forward_into, **act_kw) if act_kw
            else self.act.forward_into)

    def forward(self, X: np.ndarray, Scale: np.ndarray, Bias: np.ndarray, Mean: np.ndarray,
                Variance: np.ndarray, MomentumTensor: Optional[np.ndarray] = None
                ) -> Dict[str, Any]:
        out = self.bn.forward_then(self.then, X, Scale, Bias, Mean, Variance, MomentumTensor,
                                   centred=self.centred, **self.bn_kw)
        out["Out"] = out.pop("Y")
        return out


class BatchNormAddAct(BatchNormAct):
    """Out = act(batch_norm(X) + Residual) (a residual block's end: ``elementwise_add`` of
    batch_norm's Y and the shortcut, then the activation), with batch_norm's other outputs:
    each block of Y gets its block of the shortcut added and the activation applied while it
    is in cache -- the bits of the three ops (an elementwise add and activation do not care how
    the map is cut), two passes over the map fewer."""

    def __init__(self, act: str, bn_attrs: Mapping[str, Any],
                 act_attrs: Mapping[str, Any], stand_in: bool = False) -> None:
        super().__init__(act, bn_attrs, act_attrs)
        FusedDef.__init__(self, f"fused(batch_norm+elementwise_add+{act})",
                          ("X", "Scale", "Bias", "Mean", "Variance", "Residual",
                           "MomentumTensor?"), ("Out",) + BN_OUTPUTS + (
                              ("Y",) if stand_in else ()))
        self.stand_in = stand_in
        self.add = registry.get_op_def("elementwise_add")

    def forward(self, X: np.ndarray, Scale: np.ndarray, Bias: np.ndarray, Mean: np.ndarray,
                Variance: np.ndarray, Residual: np.ndarray,
                MomentumTensor: Optional[np.ndarray] = None) -> Dict[str, Any]:
        """(``stand_in``: batch_norm's Y, never made, is read by the add's gradient for its
        shape alone: a zero stand-in of that shape takes its place.) A shortcut that is not
        of Y's shape and dtype at run time (the declared shapes matched: a batch of one
        broadcast against the map's) goes through the add's own kernel, as unfused."""
        if Residual.shape == X.shape and Residual.dtype == X.dtype:
            out = self.bn.forward_then(self.then, X, Scale, Bias, Mean, Variance,
                                       MomentumTensor, residual=Residual,
                                       centred=self.centred, **self.bn_kw)
        else:
            out = self.bn.forward_then(None, X, Scale, Bias, Mean, Variance, MomentumTensor,
                                       centred=self.centred, **self.bn_kw)
            out["Y"] = self.add.forward(out["Y"], Residual)["Out"]
            self.then(out["Y"])
        out["Out"] = y = out.pop("Y")
        if self.stand_in:
            out["Y"] = np.broadcast_to(np.zeros((), y.dtype), y.shape)
        return out


class ActBatchNormGrad(FusedDef):
    """batch_norm_grad of dY = act_grad(Out, dOut): dX, dScale, dBias (those the plan reads)."""

    def __init__(self, act: str, act_attrs: Mapping[str, Any],
                 bn_attrs: Mapping[str, Any]) -> None:
        super().__init__(f"fused({act}_grad+batch_norm_grad)",
                         ("X", "Scale", "SavedMean", "SavedVariance", "Out", "Out@GRAD"),
                         ("X@GRAD?", "Scale@GRAD?", "Bias@GRAD?"))
        self.act = registry.get_op_def(act)
        self.bn_grad = registry.get_op_def("batch_norm_grad")
        self.act_kw = self.act.kernel_attrs(act_attrs)
        self.bn_kw = self.bn_grad.kernel_attrs(bn_attrs)
        self.centred = False        # (X is X - SavedMean: ``centred``)

    def bind(self, in_specs: Sequence[Any], attrs: Mapping[str, Any],
             outputs_present: AbstractSet[str]) -> Binding:
        """``forward`` told which gradients the plan reads (as batch_norm_grad's own bind)."""
        return Binding(functools.partial(self.forward, wanted=frozenset(outputs_present)),
                       False)

    def forward(self, X: np.ndarray, Scale: np.ndarray, SavedMean: np.ndarray,
                SavedVariance: np.ndarray, Out: np.ndarray, dOut: np.ndarray,
                wanted: Optional[AbstractSet[str]] = None) -> Any:
        backward, kw = self.act.backward, self.act_kw

        def dy(lo: Optional[int], hi: Optional[int]) -> np.ndarray:
            if lo is None:
                return backward(Out, dOut, **kw)["X"]
            return backward(Out[:, lo:hi], dOut[:, lo:hi], **kw)["X"]
        return self.bn_grad.forward(X, Scale, SavedMean, SavedVariance, dy, wanted,
                                    self.centred, **self.bn_kw)


class BatchNormCentred(FusedDef):
    """batch_norm alone, also writing X - SavedMean (``CENTRED``) for its gradient."""

    def __init__(self, bn_attrs: Mapping[str, Any]) -> None:
        super().__init__("fused(batch_norm+centred)",
                         ("X", "Scale", "Bias", "Mean", "Variance", "MomentumTensor?"),
                         ("Y",) + BN_OUTPUTS + (CENTRED,))
        self.bn = registry.get_op_def("batch_norm")
        self.bn_kw = self.bn.kernel_attrs(bn_attrs)

    def forward(self, X: np.ndarray, Scale: np.ndarray, Bias: np.ndarray, Mean: np.ndarray,
                Variance: np.ndarray, MomentumTensor: Optional[np.ndarray] = None
                ) -> Dict[str, Any]:
        return self.bn.forward_then(None, X, Scale, Bias, Mean, Variance, MomentumTensor,
                                    centred=True, **self.bn_kw)


class BatchNormGradCentred(FusedDef):
    """batch_norm_grad reading X - SavedMean (``BatchNormCentred``'s) as its X."""

    def __init__(self, bn_attrs: Mapping[str, Any]) -> None:
        super().__init__("fused(centred+batch_norm_grad)",
                         ("X", "Scale", "SavedMean", "SavedVariance", "Y@GRAD"),
                         ("X@GRAD?", "Scale@GRAD?", "Bias@GRAD?"))
        self.bn_grad = registry.get_op_def("batch_norm_grad")
        self.bn_kw = self.bn_grad.kernel_attrs(bn_attrs)

    def bind(self, in_specs: Sequence[Any], attrs: Mapping[str, Any],
             outputs_present: AbstractSet[str]) -> Binding:
        """``forward`` told which gradients the plan reads (as batch_norm_grad's own bind)."""
        return Binding(functools.partial(self.forward, wanted=frozenset(outputs_present)),
                       False)

    def forward(self, X: np.ndarray, Scale: np.ndarray, SavedMean: np.ndarray,
                SavedVariance: np.ndarray, dY: np.ndarray,
                wanted: Optional[AbstractSet[str]] = None) -> Any:
        return self.bn_grad.forward(X, Scale, SavedMean, SavedVariance, dY, wanted, True,
                                    **self.bn_kw)
