"""``fluid.average``: a running weighted mean of Python-side values (e.g. per-batch metrics)."""
from __future__ import annotations

import warnings
from typing import Any, Optional

import numpy as np

__all__ = ["WeightedAverage"]


def _is_number(x: Any) -> bool:
    return not isinstance(x, bool) and isinstance(x, (int, float, np.integer, np.floating)) or \
        (isinstance(x, np.ndarray) and x.shape == (1,))


def _is_number_or_matrix(x: Any) -> bool:
    return _is_number(x) or isinstance(x, np.ndarray)


class WeightedAverage:
    """``sum(value_i * weight_i) / sum(weight_i)`` over the ``add`` calls since ``reset``.

    Deprecated in fluid 1.8 in favour of ``fluid.metrics``; kept for old scripts.
    """

    def __init__(self) -> None:
        warnings.warn("The WeightedAverage is deprecated, please use fluid.metrics.Accuracy "
                      "instead.", DeprecationWarning, stacklevel=2)
        self.numerator: Optional[Any] = None
        self.denominator: Optional[Any] = None

    def reset(self) -> None:
        self.numerator = None
        self.denominator = None

    def add(self, value: Any, weight: Any) -> None:
        """Accumulate ``value`` (a number or array) with ``weight`` (a number)."""
        if not _is_number_or_matrix(value):
            raise ValueError(f"The 'value' must be a number(int, float) or a numpy ndarray, but "
                             f"received {value!r}")
        if not _is_number(weight):
            raise ValueError(f"The 'weight' must be a number(int, float), but received "
                             f"{weight!r}")
        if self.numerator is None or self.denominator is None:
            self.numerator = value * weight
            self.denominator = weight
        else:
            self.numerator = self.numerator + value * weight
            self.denominator = self.denominator + weight

    def eval(self) -> Any:
        """The weighted mean; ValueError before the first ``add``."""
        if self.numerator is None or self.denominator is None:
            raise ValueError("There is no data in WeightedAverage, please check the input data")
        return self.numerator / self.denominator
