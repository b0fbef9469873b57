"""Tensor creation ops of fluid 1.8: range, linspace, diag and eye (none is differentiable)."""
from __future__ import annotations

import math

import numpy as np

from ..core.dtypes import VarType, to_numpy_dtype
from ..core.registry import OpDef, VarSpec, register


def _scalar(op_type: str, slot: str, t) -> float:
    a = np.asarray(t).reshape(-1)
    if a.size != 1:
        raise ValueError(f"{op_type}: {slot} must hold exactly one value, but it has shape "
                         f"{list(np.shape(t))}")
    return a[0].item()


def range_size(start, end, step, dtype=None) -> int:
    """fluid's element count of ``range``; ValueError for a zero or wrong-signed step. With a
    float ``dtype`` the count is fluid's ``ceil(|(end - start) / step|)`` in that type (float32
    arithmetic for a float32 range), else in Python's."""
    if step == 0:
        raise ValueError("range: step must not be 0")
    if (start < end and step < 0) or (start > end and step > 0):
        raise ValueError(f"range: step ({step}) must be > 0 when start ({start}) < end ({end}) "
                         f"and < 0 when start > end")
    if all(isinstance(v, int) for v in (start, end, step)):
        return (abs(end - start) + abs(step) - 1) // abs(step)
    if dtype is not None and np.dtype(dtype).kind == "f":
        t = np.dtype(dtype).type
        return int(np.ceil(np.abs((t(end) - t(start)) / t(step))))
    return int(math.ceil(abs((end - start) / step)))


@register
class Range(OpDef):
    """Out = [Start, Start + Step, ...] up to (excluding) End; Start, End and Step are
    one-element tensors of Out's dtype."""
    type, inputs, outputs = "range", ("Start", "End", "Step"), ("Out",)
    no_grad = True

    def infer(self, Start, End, Step):
        for slot, spec in (("End", End), ("Step", Step)):
            if spec.dtype != Start.dtype:
                raise ValueError(f"range: {slot} must have the dtype of Start ({Start.dtype}), "
                                 f"but received {spec.dtype}")
        return {"Out": VarSpec((-1,), Start.dtype)}

    def forward(self, Start, End, Step):
        start, end, step = (_scalar("range", s, t) for s, t in
                            (("Start", Start), ("End", End), ("Step", Step)))
        dtype = np.asarray(Start).dtype
        n = range_size(start, end, step, dtype)
        if dtype.kind != "f":
            return {"Out": (start + step * np.arange(n, dtype=np.int64)).astype(dtype)}
        # fluid's kernel accumulates in the output type: ``out[i] = value; value += step``
        out = np.full(n, dtype.type(step), dtype)
        if n:
            out[0] = dtype.type(start)
        return {"Out": np.add.accumulate(out, dtype=dtype)}


@register
class Linspace(OpDef):
    """Out = Num evenly spaced values from Start to Stop inclusive (Out[i] = Start + i * (Stop -
    Start) / (Num - 1); Num == 1 gives [Start])."""
    type, inputs, outputs = "linspace", ("Start", "Stop", "Num"), ("Out",)
    no_grad = True

    def infer(self, Start, Stop, Num, *, dtype=VarType.FP32):
        if Num.dtype not in (VarType.INT32, VarType.INT64):
            raise ValueError(f"linspace: Num must be int32 or int64, but received {Num.dtype}")
        return {"Out": VarSpec((-1,), dtype)}

    def forward(self, Start, Stop, Num, *, dtype=VarType.FP32):
        start, stop = _scalar("linspace", "Start", Start), _scalar("linspace", "Stop", Stop)
        num = int(_scalar("linspace", "Num", Num))
        if num <= 0:
            raise ValueError(f"linspace: Num must be > 0, but received {num}")
        step = (stop - start) / (num - 1) if num > 1 else 0.0
        out = start + step * np.arange(num, dtype=np.float64)
        return {"Out": out.astype(to_numpy_dtype(dtype))}


@register
class Diag(OpDef):
    """Out = the square matrix with the 1-D Diagonal on its diagonal and zeros elsewhere."""
    type, inputs, outputs = "diag", ("Diagonal",), ("Out",)
    no_grad = True

    def infer(self, Diagonal):
        if len(Diagonal.shape) != 1:
            raise ValueError(f"diag: Diagonal must be 1-D, but its shape is "
                             f"{list(Diagonal.shape)}")
        n = Diagonal.shape[0]
        return {"Out": VarSpec((n, n), Diagonal.dtype)}

    def forward(self, Diagonal):
        return {"Out": np.diag(Diagonal)}


@register
class Eye(OpDef):
    """Out = the [num_rows, num_columns] identity (ones on the main diagonal; num_columns -1
    means num_rows)."""
    type, inputs, outputs = "eye", (), ("Out",)
    no_grad = True

    @staticmethod
    def _dims(num_rows, num_columns):
        cols = num_rows if num_columns == -1 else num_columns
        if num_rows < 0 or cols < 0:
            raise ValueError(f"eye: num_rows and num_columns must be >= 0, but received "
                             f"{num_rows} and {num_columns}")
        return num_rows, cols

    def infer(self, *, num_rows=0, num_columns=-1, dtype=VarType.FP32):
        return {"Out": VarSpec(self._dims(num_rows, num_columns), dtype)}

    def forward(self, *, num_rows=0, num_columns=-1, dtype=VarType.FP32):
        rows, cols = self._dims(num_rows, num_columns)
        return {"Out": np.eye(rows, cols, dtype=to_numpy_dtype(dtype))}
