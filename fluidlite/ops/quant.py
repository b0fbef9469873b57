"""fluid 1.8's quantization ops (paddle/fluid/operators/fake_quantize_op.*,
fake_dequantize_op.*, dequantize_abs_max_op.cc), written by fluid's quantization passes
(contrib.slim QuantizationTransformPass / QuantizationFreezePass) and found in the int8
inference models they save: ``fake_quantize_abs_max``, ``fake_channel_wise_quantize_abs_max``,
``fake_quantize_range_abs_max``, ``fake_quantize_moving_average_abs_max``,
``fake_quantize_dequantize_moving_average_abs_max``, ``moving_average_abs_max_scale``,
``fake_dequantize_max_abs``, ``fake_channel_wise_dequantize_max_abs``, ``dequantize_abs_max``.

Quantizing to ``bit_length`` bits uses bin_cnt = 2^(bit_length-1) - 1 and fluid's
ClipAndFakeQuantFunctor: Out = round(bin_cnt * inv(s) * clip(X, -s, s)), inv(s) = 1 / s, or
1 / (s + 1e-6) when s <= 1e-30, rounding halves away from zero (Eigen's ``round``). fluid
registers no gradient for any of them (EmptyGradOpMaker): its passes rewrite the backward
graph themselves; so ``no_grad``.
"""
from __future__ import annotations

from typing import Any, Dict

import numpy as np

from ..core.dtypes import VarType
from ..core.registry import OpDef, VarSpec, register


def _bins(op: str, bit_length: int) -> int:
    if not 1 <= int(bit_length) <= 16:
        raise ValueError(f"{op}: bit_length must be in [1, 16] (fluid's check), got "
                         f"{bit_length}")
    return (1 << (int(bit_length) - 1)) - 1


def _abs_max(x: np.ndarray) -> np.ndarray:
    """fluid's FindAbsMaxFunctor: max |x| (0 for an empty tensor), as a 1-element array."""
    return np.array([np.abs(x).max() if x.size else 0], dtype=x.dtype)


def _round(x: np.ndarray) -> np.ndarray:
    """Eigen's / std::round: halves away from zero (NumPy's ``round`` goes to even)."""
    return np.copysign(np.floor(np.abs(x) + x.dtype.type(0.5)), x)


def _inv(s: Any) -> Any:
    # fluid's inverse(): ``s <= 1e-30`` compares in double (float32(1e-30) is above 1e-30)
    t = type(s)
    return t(1) / (s + t(1e-6)) if float(s) <= 1e-30 else t(1) / s


def _quant(x: np.ndarray, s: Any, bins: int, dequant: bool = False) -> np.ndarray:
    """fluid's ClipAndFakeQuantFunctor (``dequant``: ClipAndFakeQuantDequantFunctor, which
    multiplies back by s / bin_cnt)."""
    t = x.dtype.type
    s = t(s)
    q = _round(t(bins) * _inv(s) * np.clip(x, -s, s))
    return (s / t(bins)) * q if dequant else q


def _moving(x: np.ndarray, accum: Any, state: Any, rate: float) -> Dict[str, np.ndarray]:
    """fluid's FindMovingAverageAbsMaxFunctor: state' = rate * state + 1, accum' = rate *
    accum + max|x|, scale = accum' / state'."""
    if accum is None or state is None:
        raise ValueError("moving-average quantization in training (is_test=False) needs the "
                         "InAccum and InState inputs")
    t = x.dtype.type
    r = t(rate)
    st = r * t(np.asarray(state).reshape(-1)[0]) + t(1)
    ac = r * t(np.asarray(accum).reshape(-1)[0]) + _abs_max(x)[0]
    one = lambda v: np.array([v], x.dtype)      # noqa: E731
    return {"OutState": one(st), "OutAccum": one(ac), "OutScale": one(ac / st)}


def _kept(accum: Any, state: Any) -> Dict[str, np.ndarray]:
    """OutAccum / OutState of an ``is_test`` step: the inputs, unchanged (in fluid's programs
    they are the same persistable variables)."""
    out = {}
    if accum is not None:
        out["OutAccum"] = np.array(accum)
    if state is not None:
        out["OutState"] = np.array(state)
    return out


def _same(X: VarSpec) -> Dict[str, VarSpec]:
    return {"Out": X, "OutScale": VarSpec((1,), X.dtype)}


@register
class FakeQuantizeAbsMax(OpDef):
    """scale = max|X|; Out = round(X / scale * bin_cnt) (fluid's clip-and-round; X float32),
    OutScale [1] = scale. Inference / pass op: no gradient."""
    type, inputs, outputs = "fake_quantize_abs_max", ("X",), ("Out", "OutScale")
    no_grad = True

    def infer(self, X, *, bit_length=8):
        _bins(self.type, bit_length)
        return _same(X)

    def forward(self, X, *, bit_length=8):
        s = _abs_max(X)
        return {"Out": _quant(X, s[0], _bins(self.type, bit_length)), "OutScale": s}


@register
class FakeChannelWiseQuantizeAbsMax(OpDef):
    """Per channel c of X's first dimension: scale_c = max|X_c|, Out_c = round(X_c / scale_c *
    bin_cnt); OutScale [C]. No gradient."""
    type, inputs = "fake_channel_wise_quantize_abs_max", ("X",)
    outputs = ("Out", "OutScale")
    no_grad = True

    def infer(self, X, *, bit_length=8):
        _bins(self.type, bit_length)
        return {"Out": X, "OutScale": VarSpec((X.shape[0],), X.dtype)}

    def forward(self, X, *, bit_length=8):
        bins = _bins(self.type, bit_length)
        flat = X.reshape(X.shape[0], -1)
        s = np.abs(flat).max(axis=1) if flat.shape[1] else np.zeros(X.shape[0], X.dtype)
        out = np.empty_like(flat)
        for c in range(flat.shape[0]):
            out[c] = _quant(flat[c], s[c], bins)
        return {"Out": out.reshape(X.shape), "OutScale": s.astype(X.dtype, copy=False)}


@register
class FakeQuantizeRangeAbsMax(OpDef):
    """Training: cur = max|X| is written to OutScales[Iter % window_size] (the window of recent
    scales); scale = max(InScale, cur), or, when the value leaving the window was the
    maximum, the window's maximum; Out = round(clip(X, ±scale) / scale * bin_cnt), OutScale
    = scale. ``is_test``: Out quantized with InScale. No gradient."""
    type, inputs = "fake_quantize_range_abs_max", ("X", "InScale", "Iter?")
    outputs = ("Out", "OutScale", "OutScales?")
    reads_outputs = ("OutScales",)     # the window of recent scales, kept between steps
    no_grad = True

    def infer(self, X, InScale, Iter, *, window_size=10000, bit_length=8, is_test=False):
        _bins(self.type, bit_length)
        return dict(_same(X), OutScales=VarSpec((window_size,), X.dtype))

    def forward(self, X, InScale, Iter, OutScales=None, *, window_size=10000, bit_length=8,
                is_test=False):
        bins = _bins(self.type, bit_length)
        last = np.asarray(InScale).reshape(-1)[:1].astype(X.dtype)
        if is_test:         # the window is left as it is
            keep = np.array(OutScales, dtype=X.dtype).reshape(-1) if OutScales is not None \
                else np.zeros(window_size, X.dtype)
            return {"Out": _quant(X, last[0], bins), "OutScale": last, "OutScales": keep}
        if Iter is None:
            raise ValueError(f"{self.type}: training (is_test=False) needs the Iter input")
        if window_size < 1:
            raise ValueError(f"{self.type}: window_size must be >= 1, got {window_size}")
        it = int(np.asarray(Iter).reshape(-1)[0])
        # fluid's kernel keeps the window in the OutScales buffer between steps (a fresh one,
        # before the first step, holds zeros)
        if OutScales is not None and np.size(OutScales) == window_size:
            scales = np.array(OutScales, dtype=X.dtype).reshape(-1)
        else:
            scales = np.zeros(window_size, X.dtype)
        cur = _abs_max(X)[0]
        idx = it % window_size
        removed, scales[idx] = scales[idx], cur
        mx = last[0]
        if mx < cur:
            mx = cur
        elif abs(removed - mx) < 1e-6:
            size = window_size if it > window_size else it
            mx = np.abs(scales[:size]).max() if size > 0 else X.dtype.type(0)
        s = np.array([mx], X.dtype)
        return {"Out": _quant(X, mx, bins), "OutScale": s, "OutScales": scales}


class _MovingQuant(OpDef):
    """Shared by the two moving-average quantizers (fluid's
    FakeQuantOrWithDequantMovingAverageAbsMaxOp)."""
    inputs = ("X", "InScale", "InAccum?", "InState?")
    outputs = ("Out", "OutScale", "OutState?", "OutAccum?")
    no_grad = True
    dequant = False

    def infer(self, X, InScale, InAccum, InState, *, moving_rate=0.9, bit_length=8,
              is_test=False):
        _bins(self.type, bit_length)
        one = VarSpec((1,), X.dtype)
        return {"Out": X, "OutScale": one, "OutState": one, "OutAccum": one}

    def forward(self, X, InScale, InAccum=None, InState=None, *, moving_rate=0.9,
                bit_length=8, is_test=False):
        bins = _bins(self.type, bit_length)
        if is_test:         # quantized with InScale; the moving state is left as it is
            s = np.asarray(InScale).reshape(-1)[:1].astype(X.dtype)
            return dict(_kept(InAccum, InState), Out=_quant(X, s[0], bins, self.dequant),
                        OutScale=s)
        res = _moving(X, InAccum, InState, moving_rate)
        res["Out"] = _quant(X, res["OutScale"][0], bins, self.dequant)
        return res


@register
class FakeQuantizeMovingAverageAbsMax(_MovingQuant):
    """Training: state' = rate * InState + 1, accum' = rate * InAccum + max|X|, scale =
    accum' / state'; Out = round(clip(X, ±scale) / scale * bin_cnt). ``is_test``: quantized
    with InScale. No gradient."""
    type = "fake_quantize_moving_average_abs_max"


@register
class FakeQuantizeDequantizeMovingAverageAbsMax(_MovingQuant):
    """As ``fake_quantize_moving_average_abs_max``, then dequantized back:
    Out = round(clip(X, ±scale) / scale * bin_cnt) * scale / bin_cnt. No gradient."""
    type = "fake_quantize_dequantize_moving_average_abs_max"
    dequant = True


@register
class MovingAverageAbsMaxScale(OpDef):
    """Out = X; in training also the moving-average scale (state' = rate * InState + 1,
    accum' = rate * InAccum + max|X|, OutScale = accum' / state'). No gradient."""
    type, inputs = "moving_average_abs_max_scale", ("X", "InAccum?", "InState?")
    outputs = ("Out", "OutScale?", "OutState?", "OutAccum?")
    no_grad = True

    def infer(self, X, InAccum, InState, *, moving_rate=0.9, is_test=False):
        one = VarSpec((1,), X.dtype)
        return {"Out": X, "OutScale": one, "OutState": one, "OutAccum": one}

    def forward(self, X, InAccum=None, InState=None, *, moving_rate=0.9, is_test=False):
        if is_test:         # the state is left as it is; OutScale is its scale
            res = dict(_kept(InAccum, InState), Out=X.copy())
            if InAccum is not None and InState is not None:
                res["OutScale"] = (np.asarray(InAccum, X.dtype).reshape(-1)[:1]
                                   / np.asarray(InState, X.dtype).reshape(-1)[:1])
            return res
        return dict(_moving(X, InAccum, InState, moving_rate), Out=X.copy())


@register
class FakeDequantizeMaxAbs(OpDef):
    """Out = Scale * X / max_range (Scale: one value). No gradient."""
    type, inputs, outputs = "fake_dequantize_max_abs", ("X", "Scale"), ("Out",)
    no_grad = True

    def infer(self, X, Scale, *, max_range):
        return {"Out": X}

    def forward(self, X, Scale, *, max_range=1.0):
        t = X.dtype.type
        s = t(np.asarray(Scale).reshape(-1)[0])
        return {"Out": s * X / t(max_range)}


@register
class FakeChannelWiseDequantizeMaxAbs(OpDef):
    """One scale tensor (weights): Out[c] = Scales[0][c] * X[c] / (2^(quant_bits[0]-1) - 1)
    per channel c of X's first dimension. Two (conv / mul outputs): Out[:, c] = Scales[0][c] *
    Scales[1][0] * X[:, c] / ((2^(quant_bits[0]-1) - 1) * (2^(quant_bits[1]-1) - 1)).
    No gradient."""
    type, inputs, outputs = "fake_channel_wise_dequantize_max_abs", ("X", "Scales*"), ("Out",)
    no_grad = True

    def infer(self, X, Scales, *, quant_bits=(8,)):
        if len(Scales) not in (1, 2) or len(quant_bits) < len(Scales):
            raise ValueError(f"{self.type}: Scales must hold 1 or 2 tensors and quant_bits one "
                             f"bit width per scale tensor, got {len(Scales)} scales and "
                             f"quant_bits={list(quant_bits)}")
        return {"Out": X}

    def forward(self, X, Scales, *, quant_bits=(8,)):
        t = X.dtype.type
        rng = [(1 << (int(b) - 1)) - 1 for b in quant_bits]
        s0 = np.asarray(Scales[0]).reshape(-1).astype(X.dtype)
        axis = 0 if len(Scales) == 1 else 1
        if s0.size != X.shape[axis]:
            raise ValueError(f"{self.type}: Scales[0] must hold one value per X.shape[{axis}] "
                             f"= {X.shape[axis]}, got {s0.size}")
        shape = [1] * X.ndim
        shape[axis] = -1
        if len(Scales) == 1:
            return {"Out": s0.reshape(shape) * X / t(rng[0])}
        s1 = t(np.asarray(Scales[1]).reshape(-1)[0])
        return {"Out": (s0 * s1).reshape(shape) * X / t(rng[0] * rng[1])}


@register
class DequantizeLog(OpDef):
    """Out (float32) = Dict[X] for X >= 0, -Dict[X + 128] for X < 0: the inverse of fluid's
    log quantizer for an int8 X, ``Dict`` holding the 128 magnitudes. No gradient."""
    type, inputs, outputs = "dequantize_log", ("X", "Dict"), ("Out",)
    no_grad = True

    def infer(self, X, Dict):
        if X.dtype != VarType.INT8:
            raise TypeError(f"dequantize_log: X must be int8, but it is {X.dtype.name}; "
                            f"it holds the codes of fluid's log quantizer")
        return {"Out": VarSpec(X.shape, VarType.FP32, X.lod_level)}

    def forward(self, X, Dict):
        table = np.asarray(Dict, dtype=np.float32).reshape(-1)
        if table.size < 128:
            raise ValueError(f"dequantize_log: Dict must hold 128 values (one per int8 code "
                             f"magnitude), but it holds {table.size}")
        code = np.asarray(X).astype(np.int64)
        neg = code < 0
        # int8 codes: 0..127 index Dict directly, -128..-1 index it at code + 128, negated
        out = table[np.where(neg, code + 128, code)]
        return {"Out": np.where(neg, -out, out).astype(np.float32, copy=False)}


@register
class DequantizeAbsMax(OpDef):
    """Out (float32) = Scale * X / max_range for an int8 X (fluid's int8 inference
    dequantizer). No gradient."""
    type, inputs, outputs = "dequantize_abs_max", ("X", "Scale"), ("Out",)
    no_grad = True

    def infer(self, X, Scale, *, max_range):
        return {"Out": VarSpec(X.shape, VarType.FP32, X.lod_level)}

    def forward(self, X, Scale, *, max_range=1.0):
        s = np.float32(np.asarray(Scale).reshape(-1)[0])
        return {"Out": s * X.astype(np.float32) / np.float32(max_range)}
