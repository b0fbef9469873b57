"""Sequence ops over LoD input: pool, softmax, expand, pad/unpad, reshape, conv.

Every op here is ``lod_aware`` (see ``core/lod.py``): its kernel receives ``lod`` (input slot ->
offsets) and returns the LoD of its outputs. Kernels are vectorised over all sequences at once
(segment reductions with ``ufunc.reduceat``, gathers with one ragged index): no Python loop per
sequence. ``off`` below is always the last LoD level's offsets as an int64 array, ``lens`` its
differences. Empty sequences are allowed wherever fluid allows them.
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

import numpy as np

from ..core.dtypes import VarType
from ..core.registry import OpDef, VarSpec, register


# -- helpers ----------------------------------------------------------------------------------
def _off(op: str, lod: Any, slot: str = "X", level: int = -1) -> np.ndarray:
    if not lod:
        raise ValueError(f"{op}: input {slot} has no LoD; feed a LoDTensor "
                         f"(fluid.create_lod_tensor(data, lengths, place)) to a variable declared "
                         f"with lod_level >= 1")
    return np.asarray(lod[level], dtype=np.int64)


def _seg_reduce(ufunc: np.ufunc, x: np.ndarray, off: np.ndarray, empty: float) -> np.ndarray:
    """``ufunc`` over each segment ``x[off[i]:off[i+1]]``; ``empty`` for empty segments."""
    lens = np.diff(off)
    if lens.size and lens.min() > 0:
        return ufunc.reduceat(x, off[:-1], axis=0)
    out = np.full((lens.size,) + x.shape[1:], empty, dtype=x.dtype)
    nz = lens > 0
    if nz.any():
        out[nz] = ufunc.reduceat(x, off[:-1][nz], axis=0)
    return out


def _ragged_index(starts: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """Concatenation of ``arange(starts[i], starts[i] + lens[i])`` over i, without a loop."""
    total = int(lens.sum())
    if total == 0:
        return np.zeros(0, np.int64)
    out_starts = np.concatenate([[0], np.cumsum(lens)[:-1]])
    return np.repeat(starts - out_starts, lens) + np.arange(total)


def _seg_ids(lens: np.ndarray) -> np.ndarray:
    return np.repeat(np.arange(lens.size), lens)


def _offsets(lens: np.ndarray) -> Tuple[int, ...]:
    return tuple(int(v) for v in np.concatenate([[0], np.cumsum(lens)]))


def _lengths(op: str, Length: Any, slot: str, num: int, width: int) -> np.ndarray:
    """The per-sequence lengths of a padded input (fluid's ``Length`` / ``SeqLength`` inputs:
    shape [num] or [num, 1], each in [0, width]) as an int64 vector."""
    lens = np.asarray(Length).reshape(-1)
    if lens.dtype.kind not in "iu":
        raise ValueError(f"{op}: {slot} must hold integer lengths, got dtype {lens.dtype}")
    lens = lens.astype(np.int64)
    if lens.size != num:
        raise ValueError(f"{op}: {slot} must have one length per sequence ({num}, the first "
                         f"dim of the padded input), got {lens.size}")
    if lens.size and (lens.min() < 0 or lens.max() > width):
        raise ValueError(f"{op}: every {slot} must lie in [0, {width}] (the padded length), "
                         f"got {lens.tolist()}")
    return lens


def _unpad_rows(op: str, X: np.ndarray, Length: Any, slot: str
                ) -> Tuple[np.ndarray, Tuple[Tuple[int, ...]], np.ndarray]:
    """A padded batch X [num, width, ...] as its valid rows concatenated (what the LoD form of
    the op takes), the equivalent one-level LoD, and the flat positions of those rows in the
    [num * width] grid (to scatter results or gradients back)."""
    if X.ndim < 2:
        raise ValueError(f"{op}: with {slot}, the input must be padded [batch, max_len, ...], "
                         f"got shape {list(X.shape)}")
    lens = _lengths(op, Length, slot, X.shape[0], X.shape[1])
    idx = _pad_index(lens, X.shape[1])
    return X.reshape((-1,) + X.shape[2:])[idx], (_offsets(lens),), idx


def _rows(n: int, x: np.ndarray) -> np.ndarray:
    """Per-row broadcast shape for a per-sequence scale."""
    return np.asarray(n).reshape((-1,) + (1,) * (x.ndim - 1))


# -- sequence_pool ----------------------------------------------------------------------------
_POOLS = ("AVERAGE", "SUM", "SQRT", "MAX", "LAST", "FIRST")


@register
class SequencePool(OpDef):
    """Out[i] = pool(X[off[i]:off[i+1]]) for pooltype SUM, AVERAGE (sum / len), SQRT
    (sum / sqrt(len)), MAX (MaxIndex: the row of each maximum), LAST, FIRST; an empty sequence
    gives ``pad_value``. Out's LoD is X's without its last level. dX spreads dOut back: SUM
    repeats it, AVERAGE / SQRT scale it, MAX / LAST / FIRST route it to the chosen row."""
    type, inputs, outputs = "sequence_pool", ("X",), ("Out", "MaxIndex?")
    grad_uses = ("X", "MaxIndex")
    lod_aware = True

    def infer(self, X, *, pooltype):
        if pooltype.upper() not in _POOLS:
            raise ValueError(f"sequence_pool: pooltype must be one of {list(_POOLS)}, got "
                             f"{pooltype!r}")
        shape = (-1,) + tuple(X.shape[1:])
        return {"Out": VarSpec(shape, X.dtype, max(X.lod_level - 1, 0)),
                "MaxIndex": VarSpec(shape, VarType.INT32)}

    def forward(self, X, lod=None, *, pooltype="AVERAGE", is_test=False, pad_value=0.0):
        off = _off(self.type, (lod or {}).get("X"))
        lens = np.diff(off)
        kind = pooltype.upper()
        max_index = None
        if kind in ("SUM", "AVERAGE", "SQRT"):
            out = _seg_reduce(np.add, X, off, 0.0)
            if kind == "AVERAGE":
                out = out / _rows(np.maximum(lens, 1), X).astype(X.dtype)
            elif kind == "SQRT":
                out = out / np.sqrt(_rows(np.maximum(lens, 1), X)).astype(X.dtype)
        elif kind == "MAX":
            out = _seg_reduce(np.maximum, X, off, 0.0)
            max_index = self._argmax(X, off, lens, out)
        elif kind in ("LAST", "FIRST"):
            out = np.zeros((lens.size,) + X.shape[1:], X.dtype)
            nz = lens > 0
            out[nz] = X[off[1:][nz] - 1] if kind == "LAST" else X[off[:-1][nz]]
        else:
            raise ValueError(f"sequence_pool: unknown pooltype {pooltype!r}")
        if pad_value and (lens == 0).any():
            out[lens == 0] = pad_value
        full = (lod or {}).get("X")
        res: Dict[str, Any] = {"Out": out.astype(X.dtype, copy=False),
                               "MaxIndex": max_index if max_index is not None
                               else np.zeros(out.shape, np.int32)}
        if full and len(full) > 1:
            res["lod"] = {"Out": full[:-1]}
        return res

    @staticmethod
    def _argmax(X: np.ndarray, off: np.ndarray, lens: np.ndarray, mx: np.ndarray) -> np.ndarray:
        """The first row of each segment holding its maximum, per feature (absolute rows)."""
        if X.shape[0] == 0:
            return np.full(mx.shape, -1, np.int32)
        rows = np.arange(X.shape[0]).reshape((-1,) + (1,) * (X.ndim - 1))
        hit = X == np.repeat(mx, lens, axis=0)
        cand = np.where(hit, rows, X.shape[0])
        idx = _seg_reduce(np.minimum, cand, off, -1)
        return idx.astype(np.int32)

    def backward(self, X, MaxIndex, dOut, dMaxIndex=None, lod=None, *, pooltype="AVERAGE",
                 is_test=False, pad_value=0.0):
        off = _off(self.type, (lod or {}).get("X"))
        lens = np.diff(off)
        kind = pooltype.upper()
        if kind in ("SUM", "AVERAGE", "SQRT"):
            g = dOut
            if kind == "AVERAGE":
                g = dOut / _rows(np.maximum(lens, 1), dOut)
            elif kind == "SQRT":
                g = dOut / np.sqrt(_rows(np.maximum(lens, 1), dOut))
            return {"X": np.repeat(g, lens, axis=0).astype(X.dtype, copy=False)}
        dX = np.zeros_like(X)
        nz = lens > 0
        if kind == "MAX":
            if MaxIndex is None:         # MaxIndex not kept by the program: recompute it
                MaxIndex = self._argmax(X, off, lens, _seg_reduce(np.maximum, X, off, 0.0))
            flat_idx = MaxIndex.reshape(MaxIndex.shape[0], -1)[nz]
            cols = np.broadcast_to(np.arange(flat_idx.shape[1]), flat_idx.shape)
            # the row width spelled out: reshape(0, -1) of an empty batch is ambiguous
            width = int(np.prod(X.shape[1:]))
            dX.reshape(X.shape[0], width)[flat_idx, cols] = dOut.reshape(dOut.shape[0], -1)[nz]
        else:
            rows = off[1:][nz] - 1 if kind == "LAST" else off[:-1][nz]
            dX[rows] = dOut[nz]
        return {"X": dX}


# -- sequence_softmax -------------------------------------------------------------------------
@register
class SequenceSoftmax(OpDef):
    """Softmax over the rows of each sequence (X is [N] or [N, 1]); keeps X's LoD. As fluid's
    CPU kernel, exp(x) / sum(exp(x)) without a max shift: a logit beyond exp's range gives
    inf / inf = NaN there, as in fluid. dX = Out * (dOut - segsum(dOut * Out))."""
    type, inputs, outputs = "sequence_softmax", ("X",), ("Out",)
    grad_uses = ("X", "Out")
    lod_aware = True
    extra_attrs = {"use_cudnn": False, "data_format": "AnyLayout"}

    def infer(self, X):
        if X.ndim == 2 and X.shape[1] not in (1, -1) or X.ndim > 2:
            raise ValueError(f"sequence_softmax: X must be [N] or [N, 1], got {list(X.shape)}")
        return {"Out": X}

    def forward(self, X, lod=None):
        full = (lod or {}).get("X")
        off = _off(self.type, full)
        lens = np.diff(off)
        x = X.reshape(-1)
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            e = np.exp(x)
            s = _seg_reduce(np.add, e, off, 1.0)
            out = e / np.repeat(s, lens)
        return {"Out": out.reshape(X.shape).astype(X.dtype, copy=False),
                "lod": {"Out": full}}

    def backward(self, X, Out, dOut, lod=None):
        off = _off(self.type, (lod or {}).get("X"))
        lens = np.diff(off)
        o, d = Out.reshape(-1), dOut.reshape(-1)
        s = _seg_reduce(np.add, d * o, off, 0.0)
        return {"X": (o * (d - np.repeat(s, lens))).reshape(X.shape)}


# -- sequence_expand / sequence_expand_as -----------------------------------------------------
@register
class SequenceExpand(OpDef):
    """Repeat the i-th sequence of X (each row when X has no LoD) r_i times, r_i the length of
    the i-th sequence of Y's LoD level ``ref_level`` (-1: the last). Out's LoD has one sequence
    per repetition. dX sums dOut over the repetitions."""
    type, inputs, outputs = "sequence_expand", ("X", "Y"), ("Out",)
    grad_uses = ("X", "Y")
    lod_aware = True

    def infer(self, X, Y, *, ref_level):
        return {"Out": VarSpec((-1,) + tuple(X.shape[1:]), X.dtype, max(X.lod_level, 1))}

    def _index(self, X: np.ndarray, lod: Dict[str, Any], ref_level: int
               ) -> Tuple[np.ndarray, np.ndarray]:
        ylod = lod.get("Y")
        if not ylod:
            raise ValueError("sequence_expand: Y has no LoD; it gives the repeat counts")
        # fluid 1.8: ref_level is -1 (the last level) or in [0, levels); -2 is refused
        level = len(ylod) - 1 if ref_level == -1 else ref_level
        if not 0 <= level < len(ylod):
            raise ValueError(f"sequence_expand: ref_level {ref_level} out of range for Y's "
                             f"{len(ylod)} LoD level(s) (-1 or 0 to {len(ylod) - 1})")
        reps = np.diff(np.asarray(ylod[level], np.int64))
        xlod = lod.get("X")
        xoff = np.asarray(xlod[-1], np.int64) if xlod else np.arange(X.shape[0] + 1)
        if reps.size != xoff.size - 1:
            raise ValueError(f"sequence_expand: X has {xoff.size - 1} sequences but Y's level "
                             f"{level} has {reps.size}; they must match")
        seq = np.repeat(np.arange(reps.size), reps)            # source sequence per output seq
        xlens = np.diff(xoff)
        out_lens = xlens[seq]
        return _ragged_index(xoff[:-1][seq], out_lens), out_lens

    def forward(self, X, Y, lod=None, *, ref_level=-1):
        idx, out_lens = self._index(X, lod or {}, ref_level)
        return {"Out": X[idx], "lod": {"Out": (_offsets(out_lens),)}}

    def backward(self, X, Y, dOut, lod=None, *, ref_level=-1):
        idx, _ = self._index(X, lod or {}, ref_level)
        dX = np.zeros(X.shape, dOut.dtype)
        np.add.at(dX, idx, dOut)
        return {"X": dX}


@register
class SequenceExpandAs(OpDef):
    """Row i of X is repeated len_i times, len_i the length of Y's i-th (last-level) sequence;
    Out takes Y's last LoD level. dX[i] = sum of dOut over Y's i-th sequence."""
    type, inputs, outputs = "sequence_expand_as", ("X", "Y"), ("Out",)
    grad_uses = ("X", "Y")
    grad_outputs = ("X",)       # Paddle's SequenceExpandAsOpGradOpMaker: X@GRAD only
    lod_aware = True

    def infer(self, X, Y):
        return {"Out": VarSpec((-1,) + tuple(X.shape[1:]), X.dtype, 1)}

    def forward(self, X, Y, lod=None):
        yoff = _off(self.type, (lod or {}).get("Y"), "Y")
        if yoff.size - 1 != X.shape[0]:
            raise ValueError(f"sequence_expand_as: X has {X.shape[0]} rows but Y has "
                             f"{yoff.size - 1} sequences; they must match")
        return {"Out": np.repeat(X, np.diff(yoff), axis=0), "lod": {"Out": (tuple(yoff),)}}

    def backward(self, X, Y, dOut, lod=None):
        yoff = _off(self.type, (lod or {}).get("Y"), "Y")
        return {"X": _seg_reduce(np.add, dOut, yoff, 0.0).astype(X.dtype, copy=False)}


# -- sequence_pad / sequence_unpad ------------------------------------------------------------
def _pad_index(lens: np.ndarray, width: int) -> np.ndarray:
    """Flat positions in a [num_seqs, width] grid of each row of the concatenated sequences."""
    return _ragged_index(np.arange(lens.size) * width, lens)


@register
class SequencePad(OpDef):
    """Out[i, t] = X[off[i] + t] for t < len_i, else PadValue (a scalar or one row);
    ``padded_length`` -1 pads to the longest sequence. Length[i] = len_i. dX gathers dOut."""
    type, inputs, outputs = "sequence_pad", ("X", "PadValue"), ("Out", "Length")
    grad_uses = ("X", "PadValue")
    lod_aware = True

    def infer(self, X, PadValue, *, padded_length):
        return {"Out": VarSpec((-1, padded_length) + tuple(X.shape[1:]), X.dtype),
                "Length": VarSpec((-1,), VarType.INT64)}

    def forward(self, X, PadValue, lod=None, *, padded_length=-1):
        off = _off(self.type, (lod or {}).get("X"))
        lens = np.diff(off)
        width = int(lens.max(initial=0)) if padded_length < 0 else int(padded_length)
        if lens.size and lens.max() > width:
            raise ValueError(f"sequence_pad: padded_length {padded_length} is shorter than the "
                             f"longest sequence ({int(lens.max())})")
        feat = X.shape[1:]
        pad = np.asarray(PadValue, X.dtype)
        out = np.empty((lens.size * width,) + feat, X.dtype)
        out[...] = pad.reshape(()) if pad.size == 1 else pad.reshape(feat)
        out[_pad_index(lens, width)] = X
        return {"Out": out.reshape((lens.size, width) + feat), "Length": lens.astype(np.int64)}

    def backward(self, X, PadValue, dOut, dLength=None, lod=None, *, padded_length=-1):
        off = _off(self.type, (lod or {}).get("X"))
        lens = np.diff(off)
        flat = dOut.reshape((-1,) + dOut.shape[2:])
        # fluid gives PadValue no gradient: it is a constant of the padding
        return {"X": flat[_pad_index(lens, dOut.shape[1])], "PadValue": np.zeros_like(PadValue)}


@register
class SequenceUnpad(OpDef):
    """The inverse of sequence_pad: Out = the first Length[i] rows of X[i], concatenated, with
    LoD from Length (X [N, T] gives Out [sum(Length), 1], as fluid's kernel resizes it). dX
    scatters dOut into zeros."""
    type, inputs, outputs = "sequence_unpad", ("X", "Length"), ("Out",)
    grad_uses = ("X", "Length")
    lod_aware = True

    def infer(self, X, Length):
        return {"Out": VarSpec((-1,) + (tuple(X.shape[2:]) or (1,)), X.dtype, 1)}

    def forward(self, X, Length, lod=None):
        lens = np.asarray(Length, np.int64).reshape(-1)
        if lens.size != X.shape[0] or (lens.size and (lens.min() < 0 or lens.max() > X.shape[1])):
            raise ValueError(f"sequence_unpad: Length {lens.tolist()} does not fit X of shape "
                             f"{list(X.shape)}")
        flat = X.reshape((-1,) + (X.shape[2:] or (1,)))
        return {"Out": flat[_pad_index(lens, X.shape[1])], "lod": {"Out": (_offsets(lens),)}}

    def backward(self, X, Length, dOut, lod=None):
        lens = np.asarray(Length, np.int64).reshape(-1)
        dX = np.zeros((X.shape[0] * X.shape[1],) + X.shape[2:], dOut.dtype)
        dX[_pad_index(lens, X.shape[1])] = dOut.reshape((-1,) + X.shape[2:])
        return {"X": dX.reshape(X.shape)}


# -- sequence_reshape -------------------------------------------------------------------------
@register
class SequenceReshape(OpDef):
    """Each sequence of X [N, D] (len_i * D values) becomes len_i * D / new_dim rows of width
    ``new_dim``; the data is one reshape, the LoD offsets scale by D / new_dim."""
    type, inputs, outputs = "sequence_reshape", ("X",), ("Out",)
    grad_uses = ("X",)
    lod_aware = True

    def infer(self, X, *, new_dim):
        if X.ndim != 2:
            raise ValueError(f"sequence_reshape: X must be 2-D [N, D], got {list(X.shape)}")
        return {"Out": VarSpec((-1, new_dim), X.dtype, X.lod_level)}

    def forward(self, X, lod=None, *, new_dim=1):
        full = (lod or {}).get("X")
        off = _off(self.type, full)
        total = off * X.shape[1]
        if (total % new_dim).any():
            raise ValueError(f"sequence_reshape: a sequence of {X.shape[1]}-wide rows does not "
                             f"split into rows of width {new_dim} (lengths "
                             f"{np.diff(off).tolist()})")
        return {"Out": X.reshape(-1, new_dim),
                "lod": {"Out": tuple(full[:-1]) + (tuple(total // new_dim),)}}

    def backward(self, X, dOut, lod=None, *, new_dim=1):
        return {"X": dOut.reshape(X.shape)}


# -- sequence_conv ----------------------------------------------------------------------------
def _context(X: np.ndarray, off: np.ndarray, length: int, start: int
             ) -> Tuple[np.ndarray, np.ndarray]:
    """For each row t and context slot j: the source row t + start + j and whether it lies in
    t's own sequence (rows outside read zeros, fluid's padding)."""
    lens = np.diff(off)
    seq = _seg_ids(lens)
    rows = np.arange(X.shape[0])[:, None] + start + np.arange(length)[None, :]
    valid = (rows >= off[:-1][seq][:, None]) & (rows < off[1:][seq][:, None])
    return np.where(valid, rows, 0), valid


def _pad_rows(off: np.ndarray, n: int, length: int, start: int) -> np.ndarray:
    """For each row t and context slot j, the PaddingData row a trainable padding reads when
    t + start + j falls outside t's sequence (fluid's ContextProject): ``up_pad + p`` above the
    start (p < 0 the position in the sequence), ``up_pad + p - len`` past the end."""
    lens = np.diff(off)
    seq = _seg_ids(lens)
    pos = np.arange(n)[:, None] - off[:-1][seq][:, None] + start + np.arange(length)[None, :]
    up = max(0, -start)
    return np.where(pos < 0, up + pos, up + pos - lens[seq][:, None])


@register
class SequenceConv(OpDef):
    """Out[t] = concat_j X[t + contextStart + j] (zeros outside t's sequence, j < contextLength)
    @ Filter, Filter [contextLength * D, M]; keeps X's LoD. With ``paddingTrainable`` the rows
    outside the sequence read learned rows of PaddingData [up_pad + down_pad, D] instead of
    zeros (up_pad = max(0, -contextStart), down_pad = max(0, contextStart + contextLength - 1)).
    Gradients: dFilter = colsᵀ dOut, dX scatter-adds (dOut Filterᵀ) back to the source rows,
    dPaddingData gathers the padded slots' share of it."""
    type, inputs, outputs = "sequence_conv", ("X", "Filter", "PaddingData?"), ("Out",)
    grad_uses = ("X", "Filter", "PaddingData")
    lod_aware = True

    def infer(self, X, Filter, PaddingData, *, contextLength, contextStart=0,
              paddingTrainable=False):
        if X.ndim != 2 or Filter.ndim != 2:
            raise ValueError("sequence_conv: X must be [N, D] and Filter [contextLength * D, M]")
        if X.shape[1] >= 0 and Filter.shape[0] >= 0 and \
                Filter.shape[0] != contextLength * X.shape[1]:
            raise ValueError(f"sequence_conv: Filter height {Filter.shape[0]} must be "
                             f"contextLength * D = {contextLength} * {X.shape[1]}")
        if paddingTrainable:
            self._check_padding(PaddingData, X.shape[1], contextLength, contextStart)
        return {"Out": VarSpec((-1, Filter.shape[1]), X.dtype, max(X.lod_level, 1))}

    @staticmethod
    def _check_padding(P: Any, d: int, length: int, start: int) -> None:
        rows = max(0, -start) + max(0, start + length - 1)
        if P is None:
            raise ValueError("sequence_conv: paddingTrainable=True needs the PaddingData input "
                             f"([{rows}, {d}])")
        shape = tuple(P.shape)
        if len(shape) != 2 or (shape[0] >= 0 and shape[0] != rows) or \
                (d >= 0 and shape[1] >= 0 and shape[1] != d):
            raise ValueError(f"sequence_conv: PaddingData must be [up_pad + down_pad, D] = "
                             f"[{rows}, {d}] for contextStart={start}, contextLength={length}, "
                             f"got {list(shape)}")

    def _cols(self, X: np.ndarray, PaddingData: Any, lod: Any, contextLength: int,
              contextStart: int, contextStride: int, trainable: bool
              ) -> Tuple[np.ndarray, np.ndarray, np.ndarray, Optional[np.ndarray]]:
        if contextStride != 1:
            raise ValueError("sequence_conv: only contextStride = 1 is supported (as in fluid)")
        off = _off(self.type, (lod or {}).get("X"))
        idx, valid = _context(X, off, contextLength, contextStart)
        cols = X[idx] * valid[:, :, None].astype(X.dtype)
        prow = None
        if trainable:
            self._check_padding(PaddingData, X.shape[1], contextLength, contextStart)
            prow = _pad_rows(off, X.shape[0], contextLength, contextStart)
            cols = np.where(valid[:, :, None], cols, PaddingData[np.where(valid, 0, prow)])
        return cols.reshape(X.shape[0], -1), idx, valid, prow

    def forward(self, X, Filter, PaddingData=None, lod=None, *, contextLength=3,
                contextStart=0, contextStride=1, paddingTrainable=False):
        cols, _, _, _ = self._cols(X, PaddingData, lod, contextLength, contextStart,
                                   contextStride, paddingTrainable)
        return {"Out": (cols @ Filter).astype(X.dtype, copy=False), "lod": {"Out": lod["X"]}}

    def backward(self, X, Filter, PaddingData=None, dOut=None, lod=None, *, contextLength=3,
                 contextStart=0, contextStride=1, paddingTrainable=False):
        cols, idx, valid, prow = self._cols(X, PaddingData, lod, contextLength, contextStart,
                                            contextStride, paddingTrainable)
        dcols = (dOut @ Filter.T).reshape(X.shape[0], contextLength, X.shape[1])
        dX = np.zeros_like(X)
        np.add.at(dX, idx[valid], dcols[valid])
        res = {"X": dX, "Filter": (cols.T @ dOut).astype(Filter.dtype, copy=False)}
        if PaddingData is not None:
            dP = np.zeros_like(PaddingData)
            if prow is not None:         # zero padding: PaddingData is not read, no gradient
                np.add.at(dP, prow[~valid], dcols[~valid])
            res["PaddingData"] = dP
        return res


# -- sequence_concat / slice / reverse / enumerate / scatter ----------------------------------
@register
class SequenceConcat(OpDef):
    """Out's i-th sequence is the i-th sequences of X[0], X[1], ... one after the other (all
    inputs have the same number of sequences). dX[k] takes its rows back from dOut."""
    type, inputs, outputs = "sequence_concat", ("X*",), ("Out",)
    grad_uses = ("X",)
    lod_aware = True

    def infer(self, X):
        return {"Out": VarSpec((-1,) + tuple(X[0].shape[1:]), X[0].dtype, 1)}

    @staticmethod
    def _order(X: Any, lods: Any) -> Tuple[np.ndarray, np.ndarray]:
        offs = [_off("sequence_concat", l, f"X[{k}]") for k, l in enumerate(lods)]
        if len({o.size for o in offs}) != 1:
            raise ValueError("sequence_concat: every input must have the same number of "
                             "sequences")
        seq = np.concatenate([_seg_ids(np.diff(o)) for o in offs])
        which = np.concatenate([np.full(x.shape[0], k) for k, x in enumerate(X)])
        order = np.lexsort((which, seq))     # by sequence, then input (rows stay in order)
        lens = sum(np.diff(o) for o in offs)
        return order, lens

    def forward(self, X, lod=None):
        order, lens = self._order(X, (lod or {}).get("X") or [None] * len(X))
        return {"Out": np.concatenate(X)[order], "lod": {"Out": (_offsets(lens),)}}

    def backward(self, X, dOut, lod=None):
        order, _ = self._order(X, (lod or {}).get("X") or [None] * len(X))
        flat = np.empty_like(dOut)
        flat[order] = dOut
        return {"X": np.split(flat, np.cumsum([x.shape[0] for x in X])[:-1])}


@register
class SequenceSlice(OpDef):
    """Out's i-th sequence = rows [Offset[i], Offset[i] + Length[i]) of X's i-th sequence;
    dX scatters dOut back into zeros."""
    type, inputs, outputs = "sequence_slice", ("X", "Offset", "Length"), ("Out",)
    grad_uses = ("X", "Offset", "Length")
    lod_aware = True

    def infer(self, X, Offset, Length):
        return {"Out": VarSpec((-1,) + tuple(X.shape[1:]), X.dtype, 1)}

    def _index(self, X: np.ndarray, Offset: np.ndarray, Length: np.ndarray, lod: Any
               ) -> Tuple[np.ndarray, np.ndarray]:
        off = _off(self.type, (lod or {}).get("X"))
        start, length = Offset.reshape(-1).astype(np.int64), Length.reshape(-1).astype(np.int64)
        lens = np.diff(off)
        if start.size != lens.size or length.size != lens.size:
            raise ValueError(f"sequence_slice: Offset and Length need one entry per sequence "
                             f"({lens.size})")
        if (start < 0).any() or (length < 0).any() or (start + length > lens).any():
            raise ValueError(f"sequence_slice: slices (offset {start.tolist()}, length "
                             f"{length.tolist()}) exceed the sequence lengths {lens.tolist()}")
        return _ragged_index(off[:-1] + start, length), length

    def forward(self, X, Offset, Length, lod=None):
        idx, length = self._index(X, Offset, Length, lod)
        return {"Out": X[idx], "lod": {"Out": (_offsets(length),)}}

    def backward(self, X, Offset, Length, dOut, lod=None):
        idx, _ = self._index(X, Offset, Length, lod)
        dX = np.zeros(X.shape, dOut.dtype)
        dX[idx] = dOut
        return {"X": dX}


@register
class SequenceReverse(OpDef):
    """Reverse the rows of each sequence; keeps X's LoD. dX reverses dOut the same way."""
    type, inputs, outputs = "sequence_reverse", ("X",), ("Y",)
    grad_uses = ("X",)
    lod_aware = True

    def infer(self, X):
        return {"Y": X}

    @staticmethod
    def _index(X: np.ndarray, lod: Any) -> np.ndarray:
        off = _off("sequence_reverse", (lod or {}).get("X"))
        lens = np.diff(off)
        seq = _seg_ids(lens)
        return off[:-1][seq] + off[1:][seq] - 1 - np.arange(X.shape[0])

    def forward(self, X, lod=None):
        return {"Y": X[self._index(X, lod)], "lod": {"Y": lod["X"]}}

    def backward(self, X, dY, lod=None):
        return {"X": dY[self._index(X, lod)]}


@register
class SequenceEnumerate(OpDef):
    """Out[t] = [X[t], X[t + 1], ..., X[t + win_size - 1]] within t's sequence, ``pad_value``
    past its end (ids: not differentiable); keeps X's LoD."""
    type, inputs, outputs = "sequence_enumerate", ("X",), ("Out",)
    no_grad = True
    lod_aware = True

    def infer(self, X, *, win_size):
        return {"Out": VarSpec((-1, win_size), X.dtype, X.lod_level)}

    def forward(self, X, lod=None, *, win_size=2, pad_value=0):
        off = _off(self.type, (lod or {}).get("X"))
        x = X.reshape(-1)
        seq = _seg_ids(np.diff(off))
        rows = np.arange(x.size)[:, None] + np.arange(win_size)[None, :]
        valid = rows < off[1:][seq][:, None]
        out = np.where(valid, x[np.minimum(rows, max(x.size - 1, 0))] if x.size else rows,
                       pad_value)
        return {"Out": out.astype(X.dtype), "lod": {"Out": lod["X"]}}


@register
class SequenceScatter(OpDef):
    """Out = X; then Out[i, Ids[j]] += Updates[j] for every j of the i-th sequence of Ids (Ids
    and Updates share one LoD). dX = dOut, dUpdates[j] = dOut[i, Ids[j]]."""
    type, inputs, outputs = "sequence_scatter", ("X", "Ids", "Updates"), ("Out",)
    grad_uses = ("X", "Ids", "Updates")
    lod_aware = True

    def infer(self, X, Ids, Updates):
        return {"Out": X}

    def _rows_cols(self, X: np.ndarray, Ids: np.ndarray, lod: Any
                   ) -> Tuple[np.ndarray, np.ndarray]:
        off = _off(self.type, (lod or {}).get("Ids"), "Ids")
        if off.size - 1 != X.shape[0]:
            raise ValueError(f"sequence_scatter: Ids has {off.size - 1} sequences, X has "
                             f"{X.shape[0]} rows; they must match")
        cols = Ids.reshape(-1).astype(np.int64)
        if cols.size and (cols.min() < 0 or cols.max() >= X.shape[1]):
            raise ValueError(f"sequence_scatter: ids must lie in [0, {X.shape[1]})")
        return _seg_ids(np.diff(off)), cols

    def forward(self, X, Ids, Updates, lod=None):
        rows, cols = self._rows_cols(X, Ids, lod)
        out = X.copy()
        np.add.at(out, (rows, cols), Updates.reshape(-1))
        return {"Out": out}

    def backward(self, X, Ids, Updates, dOut, lod=None):
        rows, cols = self._rows_cols(X, Ids, lod)
        return {"X": dOut, "Updates": dOut[rows, cols].reshape(Updates.shape)}


# -- lod_reset (also lod_append) --------------------------------------------------------------
@register
class LodReset(OpDef):
    """Out = X with a new LoD: Y's whole LoD (every level) when Y has one, else Y's values as
    offsets, else the ``target_lod`` attr (offsets); with ``append`` the new offsets are added
    below X's levels (``lod_append``). dX = dOut."""
    type, inputs, outputs = "lod_reset", ("X", "Y?"), ("Out",)
    grad_uses = ("X",)
    lod_aware = True

    def infer(self, X, Y, *, append):
        if Y is not None:       # fluid 1.8's LoDResetOpVarTypeInference: Y's level count
            return {"Out": VarSpec(X.shape, X.dtype, max(Y.lod_level, 1))}
        return {"Out": VarSpec(X.shape, X.dtype, (X.lod_level if append else 0) + 1)}

    def forward(self, X, Y=None, lod=None, *, target_lod=[], append=False):  # noqa: B006
        lod = lod or {}
        if Y is not None and lod.get("Y"):
            # fluid 1.8's kernel: Out takes Y's LoD as it is, all levels (``append`` aside);
            # beam_search reads the source level of ``lod_reset(accu_scores, pre_ids)``
            y_lod = tuple(tuple(int(v) for v in lv) for lv in lod["Y"])
            if y_lod[-1][-1] != X.shape[0]:
                raise ValueError(f"lod_reset: the last level of Y's LoD {list(y_lod[-1])} must "
                                 f"end at X's row count {X.shape[0]}")
            return {"Out": X, "lod": {"Out": y_lod}}
        if Y is not None:
            level = tuple(int(v) for v in np.asarray(Y).reshape(-1))
        elif target_lod:
            level = tuple(int(v) for v in target_lod)
        else:
            raise ValueError("lod_reset: give Y or target_lod (the new offsets)")
        if level[0] != 0 or any(b < a for a, b in zip(level[:-1], level[1:])):
            raise ValueError(f"lod_reset: offsets must start at 0 and never decrease, got "
                             f"{list(level)}")
        if level[-1] != X.shape[0]:
            raise ValueError(f"{'lod_append' if append else 'lod_reset'}: the offsets "
                             f"{list(level)} must end at the row count {X.shape[0]}")
        old = tuple(lod.get("X") or ()) if append else ()
        if old and old[-1][-1] != len(level) - 1:
            raise ValueError(f"lod_append: X's last level ends at {old[-1][-1]} sequences, the "
                             f"appended level has {len(level) - 1}")
        new = old + (level,)
        return {"Out": X, "lod": {"Out": new}}

    def backward(self, X, dOut, lod=None, *, target_lod=[], append=False):  # noqa: B006
        return {"X": dOut}


@register
class SequenceMask(OpDef):
    """Y[..., j] = (j < X[...]) for j < maxlen (-1: max(X)); X holds lengths. With the
    ``MaxLenTensor`` input (fluid 1.8's ``sequence_mask(maxlen=Variable)``) its first value is
    maxlen, read when the op runs (so Y's last dim is unknown until then). Not
    differentiable."""
    type, inputs, outputs = "sequence_mask", ("X", "MaxLenTensor?"), ("Y",)
    no_grad = True

    def infer(self, X, MaxLenTensor=None, *, maxlen, out_dtype):
        n = -1 if MaxLenTensor is not None or maxlen < 0 else maxlen
        return {"Y": VarSpec(tuple(X.shape) + (n,), out_dtype)}

    def forward(self, X, MaxLenTensor=None, *, maxlen=-1, out_dtype=VarType.INT64):
        from ..core.dtypes import to_numpy_dtype
        if MaxLenTensor is not None:
            if MaxLenTensor.size == 0:
                raise ValueError("sequence_mask: MaxLenTensor is empty; feed a [1] tensor "
                                 "holding maxlen")
            maxlen = int(MaxLenTensor.reshape(-1)[0])
        n = int(X.max(initial=0)) if maxlen < 0 else int(maxlen)
        return {"Y": (np.arange(n) < X[..., None]).astype(to_numpy_dtype(out_dtype))}
