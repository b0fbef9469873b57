"""``quantize_linear`` / ``dequantize_linear``: the quantization ops of PaddleSlim 2.x's
quantized inference exports (each checked against Paddle 2.6 in
tests/ops/test_paddle_oracle.py).

With ``bin_cnt = 2^(bit_length - 1) - 1`` and ``s`` the scale (one per tensor, or one per
index of ``quant_axis`` >= 0):

* quantize, ``round_type`` 0 (halves to even): ``Y = clip(rint(bin_cnt X / s), -bin_cnt - 1,
  bin_cnt)``; ``round_type`` 1 (halves away from zero): ``Y = round(bin_cnt clip(X, -s, s) /
  s)`` -- Paddle 2.6's two kernels, so a value far below -s gives -128 with the first and
  -127 with the second at 8 bits; the integer grid is kept in X's float dtype;
  ``only_observer`` passes X through;
* dequantize: ``Y = X * s / bin_cnt``.

``ZeroPoint`` is Paddle's symmetric zero (it is read and must be 0); ``OutScale`` /
``OutAccum`` / ``OutState``, when a program names them, keep ``Scale`` / ``InAccum`` /
``InState`` (``is_test`` updates nothing). Only ``is_test`` programs
run: the training form updates moving-average scales (``InAccum`` / ``InState``), which
quantized *inference* models do not hold, and is refused -- and so, like fluid 1.8's
fake-quantize ops (ops/quant.py), they have no gradient here.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from ..core.registry import OpDef, register


def _scale(op: str, X: np.ndarray, Scale: Any, quant_axis: int) -> np.ndarray:
    """The scale broadcast against X: one value, or one per index of ``quant_axis``."""
    s = np.asarray(Scale, np.float64).reshape(-1)
    if quant_axis < 0:
        if s.size != 1:
            raise ValueError(f"{op}: a per-tensor Scale (quant_axis {quant_axis}) holds one "
                             f"value, got {s.size}")
        return s.reshape(())
    if quant_axis >= X.ndim or s.size != X.shape[quant_axis]:
        raise ValueError(f"{op}: Scale must hold one value per index of dim {quant_axis} of X "
                         f"{list(X.shape)}, got {s.size}")
    shape = [1] * X.ndim
    shape[quant_axis] = s.size
    return s.reshape(shape)


class _Linear(OpDef):
    inputs = ("X", "Scale", "ZeroPoint?", "InAccum?", "InState?")
    outputs = ("Y", "OutState?", "OutAccum?", "OutScale?")
    no_grad = True

    def infer(self, X, Scale, ZeroPoint=None, InAccum=None, InState=None, **attrs):
        if not attrs.get("is_test", True):
            raise ValueError(f"{self.type}: only inference programs (is_test=True) run in "
                             f"fluidlite; the training form updates moving-average scales")
        return {"Y": X}

    def _check(self, ZeroPoint: Optional[np.ndarray], bit_length: int) -> float:
        if ZeroPoint is not None and np.any(np.asarray(ZeroPoint) != 0):
            raise ValueError(f"{self.type}: ZeroPoint must be 0 (Paddle's quantization is "
                             f"symmetric), got {np.asarray(ZeroPoint).reshape(-1)[:4].tolist()}")
        if not 2 <= bit_length <= 32:
            raise ValueError(f"{self.type}: bit_length must be in [2, 32], got {bit_length}")
        return float(2 ** (bit_length - 1) - 1)

    @staticmethod
    def _state(y: np.ndarray, Scale: Any, InAccum: Any, InState: Any) -> dict:
        """Y and the state outputs an inference program may name: unchanged (is_test)."""
        keep = lambda v: np.array(v, copy=True) if v is not None else np.zeros(1, y.dtype)  # noqa
        return {"Y": y, "OutScale": np.array(Scale, copy=True), "OutAccum": keep(InAccum),
                "OutState": keep(InState)}


@register
class QuantizeLinear(_Linear):
    """Y = X on the signed ``bit_length`` grid of scale s (see the module docstring)."""
    type = "quantize_linear"

    def forward(self, X, Scale, ZeroPoint=None, InAccum=None, InState=None, *, quant_axis=0,
                bit_length=8, round_type=0, is_test=True, only_observer=False):
        bin_cnt = self._check(ZeroPoint, bit_length)
        if only_observer:
            return self._state(X.copy(), Scale, InAccum, InState)
        s = _scale(self.type, X, Scale, quant_axis)
        # in X's dtype and Paddle's order, (bin_cnt * (1 / s)) * x: a value on a rounding
        # half lands where Paddle's float32 arithmetic puts it
        t = X.dtype.type
        s = s.astype(X.dtype)
        with np.errstate(divide="ignore", invalid="ignore"):
            k = t(bin_cnt) * (t(1) / s)
            if round_type == 0:
                v = np.clip(np.rint(k * X), t(-bin_cnt - 1), t(bin_cnt))
            else:
                v = k * np.clip(X, -s, s)
                v = np.sign(v) * np.floor(np.abs(v) + t(0.5))
        return self._state(np.nan_to_num(v).astype(X.dtype, copy=False), Scale, InAccum,
                           InState)



@register
class DequantizeLinear(_Linear):
    """Y = X s / bin_cnt (see the module docstring)."""
    type = "dequantize_linear"

    def forward(self, X, Scale, ZeroPoint=None, InAccum=None, InState=None, *, quant_axis=0,
                bit_length=8, round_type=0, is_test=True, only_observer=False):
        bin_cnt = self._check(ZeroPoint, bit_length)
        if only_observer:
            return self._state(X.copy(), Scale, InAccum, InState)
        s = _scale(self.type, X, Scale, quant_axis).astype(X.dtype)
        return self._state((X * s / X.dtype.type(bin_cnt)).astype(X.dtype, copy=False), Scale,
                           InAccum, InState)

