"""The op lists of automatic mixed precision (fluid 1.8's ``fp16_lists.py``).

* **white**: numerically safe and worth float16 (matrix products, convolutions): always float16;
* **black**: numerically dangerous in float16 (exp/log, reductions, softmax, losses): always
  float32 (float16 inputs are cast back);
* **gray**: harmless either way: float16 when an input comes from a white (float16) op,
  float32 when one comes from a black op, untouched otherwise;
* any other op is treated as black (float32), "for numerical safety" as fluid puts it.
"""
from __future__ import annotations

import copy
from typing import Iterable, Optional, Set

__all__ = ["AutoMixedPrecisionLists", "CustomOpLists", "white_list", "black_list", "gray_list"]

white_list = {"conv2d", "matmul", "mul"}

black_list = {"exp", "square", "log", "mean", "sum", "cos_sim", "softmax",
              "softmax_with_cross_entropy", "sigmoid_cross_entropy_with_logits",
              "cross_entropy", "cross_entropy2"}

gray_list = {"elementwise_add", "elementwise_sub", "elementwise_mul", "elementwise_div",
             "elementwise_max", "elementwise_min", "elementwise_pow", "elementwise_mod",
             "elementwise_floordiv", "batch_norm", "tanh", "sigmoid", "lookup_table", "top_k",
             "pool2d", "pool3d", "dropout", "relu", "relu6", "leaky_relu", "soft_relu",
             "flatten2", "stack", "unstack", "uniform_random_batch_size_like", "gaussian_random",
             "gaussian_random_batch_size_like", "slice", "rank", "scale", "transpose2",
             "reshape2", "gather", "fill_constant", "get_tensor_from_selected_rows", "sign",
             "cast"}


def _names(arg: str, value: Optional[Iterable[str]]) -> Set[str]:
    if value is None:
        return set()
    if isinstance(value, str) or not all(isinstance(v, str) for v in value):
        raise TypeError(f"AutoMixedPrecisionLists: {arg} must be a set/list of op type names "
                        f"(strings), but received {value!r}")
    return set(value)


class AutoMixedPrecisionLists:
    """The white/black/gray op lists, updated with the user's lists: an op of
    ``custom_white_list`` moves to the white list (out of black/gray), one of
    ``custom_black_list`` to the black list; an op in both raises ``ValueError``. Every op
    reading or writing a variable of ``custom_black_varnames`` runs in float32.

    Args:
        custom_white_list (set | list of str | None): op types to run in float16 always.
        custom_black_list (set | list of str | None): op types to run in float32 always.
        custom_black_varnames (set | list of str | None): variable names whose reading or writing
            ops run in float32.
    Returns:
        AutoMixedPrecisionLists: the lists (``white_list``, ``black_list``, ``gray_list``,
        ``black_varnames``), for ``decorate(amp_lists=)``.
    Raises:
        TypeError: a custom list is a str or holds a non-string.
        ValueError: an op type is in both ``custom_white_list`` and ``custom_black_list``.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> lists = fluid.contrib.mixed_precision.AutoMixedPrecisionLists(
        ...     custom_white_list=["tanh"], custom_black_list=["conv2d"])
        >>> "tanh" in lists.white_list, "conv2d" in lists.black_list
        (True, True)
    """

    def __init__(self, custom_white_list: Optional[Iterable[str]] = None,
                 custom_black_list: Optional[Iterable[str]] = None,
                 custom_black_varnames: Optional[Iterable[str]] = None) -> None:
        self._custom_white_list = _names("custom_white_list", custom_white_list)
        self._custom_black_list = _names("custom_black_list", custom_black_list)
        self.white_list = copy.copy(white_list)
        self.black_list = copy.copy(black_list)
        self.gray_list = copy.copy(gray_list)
        self.black_varnames = _names("custom_black_varnames", custom_black_varnames)
        self._update_list()

    def _update_list(self) -> None:
        both = self._custom_white_list & self._custom_black_list
        if both:
            raise ValueError(f"Custom white list overlap custom black list: {sorted(both)} "
                             f"appear in both custom_white_list and custom_black_list")
        for op in self._custom_white_list:
            self.black_list.discard(op)
            self.gray_list.discard(op)
            self.white_list.add(op)
        for op in self._custom_black_list:
            self.white_list.discard(op)
            self.gray_list.discard(op)
            self.black_list.add(op)

    def __repr__(self) -> str:
        return (f"AutoMixedPrecisionLists(white={sorted(self.white_list)}, "
                f"black={sorted(self.black_list)}, gray={len(self.gray_list)} ops)")


CustomOpLists = AutoMixedPrecisionLists
