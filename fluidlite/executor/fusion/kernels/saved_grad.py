"""``fused(<op>+saved)`` / ``fused(saved+<op>_grad)``: a forward op that saves a value for its
gradient, and the grad op that reads it (``OpDef.saves_for_grad``).

GELU's gradient evaluates the erf and the exp its forward evaluated: unfused, a BERT layer's
GELU costs two such evaluations per step. Paired, the forward also writes the slope GELU'(X)
(``forward_saving``) into a plan-only variable, and the grad op multiplies it by dOut
(``backward_saved``): one pass instead of ~20. Swish saves its slope from its one sigmoid
the same way. A 3x3 convolution run by the Winograd kernels saves its transformed input
tiles, which its filter gradient multiplies by dY's tiles (a fifth of its gradient's time
not spent again), and is told which gradients to make. A layer norm saves its normalized rows
(X - Mean) / sqrt(Variance + eps), which its forward makes on the way to Y and its gradient
would make again (two passes over X). The operations are the unfused ops',
so the bits are too; the price is the saved value held from the forward to its gradient:
one array of X's size for an activation, 4x the input for a convolution (ResNet-18 at batch
32: peak RSS 872 -> 1093 MiB; ResNet-50 at batch 8: 2230 -> 2365 MiB).
"""
from __future__ import annotations

import functools
import inspect
from typing import AbstractSet, Any, Dict, Mapping, Sequence

from ....core import names
from ....core.registry import Binding, OpDef, Slot
from ..matcher import FusedDef

SAVED = "Saved"       # the slot of the saved value (the forward's output, the grad's input)


class SavedForward(FusedDef):
    """``fwd``'s forward with ``attrs``, plus its saved value in ``SAVED``."""

    def __init__(self, fwd: OpDef, attrs: Dict[str, Any]) -> None:
        super().__init__(f"fused({fwd.type}+saved)", (), ())
        self.in_slots = fwd.in_slots
        self.out_slots = fwd.out_slots + (Slot(SAVED),)
        self.fwd, self.kw = fwd, fwd.kernel_attrs(attrs)

    def forward(self, *arrays: Any) -> Dict[str, Any]:
        outs, saved = self.fwd.forward_saving(*arrays, **self.kw)
        outs = dict(outs)
        outs[SAVED] = saved
        return outs


class SavedGrad(FusedDef):
    """The ``<type>_grad`` op ``grad`` from the saved value (first input) and its own."""

    def __init__(self, grad: OpDef, attrs: Dict[str, Any]) -> None:
        fwd = grad.forward_def
        assert fwd is not None
        super().__init__(f"fused(saved+{grad.type})", (), ())
        self.in_slots = (Slot(SAVED),) + grad.in_slots
        self.out_slots = grad.out_slots
        self.fwd, self.kw = fwd, fwd.kernel_attrs(attrs)

    def bind(self, in_specs: Sequence[Any], attrs: Mapping[str, Any],
             outputs_present: AbstractSet[str]) -> Binding:
        """``forward`` told which input gradients the program writes (``wanted``: input slot
        names) when the forward definition's ``backward_saved`` takes it (a convolution
        then computes those alone)."""
        if "wanted" not in inspect.signature(self.fwd.backward_saved).parameters:
            return super().bind(in_specs, attrs, outputs_present)
        wanted = frozenset(s[:-len(names.GRAD_SUFFIX)] for s in outputs_present)
        return Binding(functools.partial(self.forward, wanted=wanted), False)

    def forward(self, saved: Any, *arrays: Any, wanted: Any = None) -> Dict[str, Any]:
        kw = self.kw if wanted is None else dict(self.kw, wanted=wanted)
        got = self.fwd.backward_saved(saved, *arrays, **kw)
        return {k + names.GRAD_SUFFIX: v for k, v in got.items()}
