"""Weight decay regularizers (the pass that applies them lives in ``optimizer``'s helper)."""
from __future__ import annotations

__all__ = ["L1Decay", "L2Decay", "L1DecayRegularizer", "L2DecayRegularizer",
           "WeightDecayRegularizer"]


class WeightDecayRegularizer:
    """Base class: ``_term(block, param)`` appends ops computing the decay term of ``param``."""

    def __init__(self, regularization_coeff: float = 0.0) -> None:
        if isinstance(regularization_coeff, bool) or \
                not isinstance(regularization_coeff, (int, float)):
            raise TypeError(f"regularization_coeff must be a float, got {regularization_coeff!r}")
        self._regularization_coeff = float(regularization_coeff)


class L2DecayRegularizer(WeightDecayRegularizer):
    """term = coeff * param."""

    def __str__(self) -> str:
        return "L2Decay, regularization_coeff=%f" % self._regularization_coeff


class L1DecayRegularizer(WeightDecayRegularizer):
    """term = coeff * sign(param)."""

    def __str__(self) -> str:
        return "L1Decay, regularization_coeff=%f" % self._regularization_coeff


L1Decay = L1DecayRegularizer
L2Decay = L2DecayRegularizer
