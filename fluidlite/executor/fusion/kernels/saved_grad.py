"""``fused(<op>+saved)`` / ``fused(saved+<op>_grad)``: a forward op that saves a value for its
gradient, and the grad op that reads it (``OpDef.saves_for_grad``).

GELU's gradient evaluates the erf and the exp its forward evaluated: unfused, a BERT layer's
GELU costs two such evaluations per step. Paired, the forward also writes the slope GELU'(X)
(``forward_saving``) into a plan-only variable, and the grad op multiplies it by dOut
(``backward_saved``): one pass instead of ~20. Swish saves its slope from its one sigmoid
the same way. The operations are the unfused ops', so the bits are too; the price is one
array of X's size held from the forward to its gradient.
"""
from __future__ import annotations

from typing import Any, Dict

from ....core import names
from ....core.registry import OpDef, Slot
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

    def forward(self, saved: Any, *arrays: Any) -> Dict[str, Any]:
        got = self.fwd.backward_saved(saved, *arrays, **self.kw)
        return {k + names.GRAD_SUFFIX: v for k, v in got.items()}
