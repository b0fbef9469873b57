"""More LoD sequence ops used by speech and text models: ``row_conv`` (lookahead
convolution), ``ctc_align`` (the CTC greedy decoder's merge step) and ``edit_distance``.

Like ``ops/sequence.py``, every kernel works on all sequences at once: ``row_conv`` gathers one
context index, ``ctc_align`` keeps rows by a mask, and ``edit_distance`` runs its dynamic program
over positions, vectorised across the sequence pairs.
"""
from __future__ import annotations

from typing import Any, Tuple

import numpy as np

from ..core.dtypes import VarType
from ..core.registry import OpDef, VarSpec, register
from .conv import c_div
from .sequence import _context, _off, _offsets, _pad_index, _seg_reduce, _unpad_rows


@register
class RowConv(OpDef):
    """Out[t] = sum_j X[t + j] * Filter[j] for j <= future_context (rows past the end of t's
    sequence count as zero). X is a LoD tensor [T, D] (keeps its LoD) or, without LoD, a padded
    batch [B, T, D] whose B rows are each one sequence of T steps (fluid 1.8's tensor form).
    dFilter[j] = sum_t dOut[t] * X[t + j], dX scatter-adds dOut[t] * Filter[j] to row t + j."""
    type, inputs, outputs = "row_conv", ("X", "Filter"), ("Out",)
    grad_uses = ("X", "Filter")
    lod_aware = True

    def infer(self, X, Filter):
        if X.ndim not in (2, 3) or Filter.ndim != 2 or (
                X.shape[-1] >= 0 and Filter.shape[1] >= 0 and X.shape[-1] != Filter.shape[1]):
            raise ValueError(f"row_conv: X must be [T, D] (with LoD) or [B, T, D] and Filter "
                             f"[future_context + 1, D], got X {list(X.shape)} and Filter "
                             f"{list(Filter.shape)}")
        return {"Out": X}

    def _rows(self, X: np.ndarray, lod: Any) -> Tuple[np.ndarray, np.ndarray]:
        """(X as [rows, D], sequence offsets): the LoD's, or B sequences of T rows."""
        x_lod = (lod or {}).get("X")
        if X.ndim == 3 and not x_lod:
            B, T = X.shape[:2]
            return X.reshape(B * T, X.shape[2]), np.arange(B + 1, dtype=np.int64) * T
        if X.ndim != 2:
            raise ValueError(f"row_conv: a LoD X must be [T, D], got {list(X.shape)}")
        return X, _off(self.type, x_lod)

    def _gather(self, X2: np.ndarray, off: np.ndarray, Filter: np.ndarray):
        idx, valid = _context(X2, off, Filter.shape[0], 0)
        return idx, valid, X2[idx] * valid[..., None].astype(X2.dtype)

    def forward(self, X, Filter, lod=None):
        X2, off = self._rows(X, lod)
        _, _, ctx = self._gather(X2, off, Filter)
        out = {"Out": (ctx * Filter[None]).sum(1).reshape(X.shape)}
        if (lod or {}).get("X"):
            out["lod"] = {"Out": lod["X"]}
        return out

    def backward(self, X, Filter, dOut, lod=None):
        X2, off = self._rows(X, lod)
        d2 = dOut.reshape(X2.shape)
        idx, valid, ctx = self._gather(X2, off, Filter)
        dX = np.zeros_like(X2)
        np.add.at(dX, idx[valid], (d2[:, None, :] * Filter[None])[valid])
        return {"X": dX.reshape(X.shape), "Filter": (d2[:, None, :] * ctx).sum(0)}


@register
class CtcAlign(OpDef):
    """Within each sequence of ids: merge runs of the same id (``merge_repeated``), then drop
    ``blank``. Output: the remaining ids [M, 1] with one (possibly empty) sequence per input
    sequence. Padded form (``InputLength`` given, fluid 1.8): Input [B, L] (or [B, L, 1]),
    Output [B, L] holding each sequence's ids then ``padding_value``, OutputLength [B, 1]."""
    type, inputs, outputs = "ctc_align", ("Input", "InputLength?"), ("Output", "OutputLength?")
    no_grad = True
    lod_aware = True

    def infer(self, Input, InputLength, *, blank):
        if InputLength is not None:
            if len(Input.shape) not in (2, 3):
                raise ValueError(f"ctc_align: with InputLength, Input must be [batch, max_len] "
                                 f"(or [batch, max_len, 1]), got {list(Input.shape)}")
            return {"Output": VarSpec(tuple(Input.shape[:2]), Input.dtype),
                    "OutputLength": VarSpec((Input.shape[0], 1), VarType.INT64)}
        return {"Output": VarSpec((-1, 1), Input.dtype, 1)}

    def forward(self, Input, InputLength=None, lod=None, *, blank=0, merge_repeated=True,
                padding_value=0):
        scatter = None
        if InputLength is not None:
            if Input.ndim not in (2, 3) or (Input.ndim == 3 and Input.shape[2] != 1):
                raise ValueError(f"ctc_align: with InputLength, Input must be [batch, max_len] "
                                 f"(or [batch, max_len, 1]), got {list(Input.shape)}")
            shape = Input.shape[:2]
            ids, full, scatter = _unpad_rows(self.type, Input.reshape(shape), InputLength,
                                             "InputLength")
        else:
            full = (lod or {}).get("Input")
            ids = Input
        off = _off(self.type, full, "Input")
        ids = ids.reshape(-1)
        keep = ids != blank
        if merge_repeated and ids.size:
            first = np.zeros(ids.size, bool)
            first[off[:-1][np.diff(off) > 0]] = True
            same = np.concatenate([[False], ids[1:] == ids[:-1]])
            keep &= first | ~same
        lens = _seg_reduce(np.add, keep.astype(np.int64), off, 0)
        if scatter is None:
            return {"Output": ids[keep].reshape(-1, 1), "lod": {"Output": (_offsets(lens),)}}
        out = np.full(shape[0] * shape[1], padding_value, Input.dtype)
        out[_pad_index(lens, shape[1])] = ids[keep]
        return {"Output": out.reshape(shape), "OutputLength": lens.reshape(-1, 1)}


@register
class EditDistance(OpDef):
    """Out[i] = Levenshtein distance between the i-th sequences of Hyps and Refs (divided by
    the reference length when ``normalized``, which refuses an empty reference as fluid does);
    SequenceNum = the number of pairs. Padded form (``HypsLength`` and ``RefsLength`` given,
    fluid 1.8): Hyps [B, max_len] (or [B, max_len, 1]) and Refs likewise, only the first
    length ids of each row counting."""
    type, inputs, outputs = "edit_distance", ("Hyps", "Refs", "HypsLength?", "RefsLength?"), \
        ("Out", "SequenceNum")
    no_grad = True
    lod_aware = True

    def infer(self, Hyps, Refs, HypsLength, RefsLength, *, normalized):
        if (HypsLength is None) != (RefsLength is None):
            raise ValueError("edit_distance: HypsLength and RefsLength must be given together")
        return {"Out": VarSpec((-1, 1), VarType.FP32),
                "SequenceNum": VarSpec((1,), VarType.INT64)}

    def forward(self, Hyps, Refs, HypsLength=None, RefsLength=None, lod=None, *,
                normalized=False):
        lod = dict(lod or {})
        if (HypsLength is None) != (RefsLength is None):
            raise ValueError("edit_distance: HypsLength and RefsLength must be given together")
        if HypsLength is not None:
            if Hyps.shape[0] != Refs.shape[0]:
                raise ValueError(f"edit_distance: Hyps {list(Hyps.shape)} and Refs "
                                 f"{list(Refs.shape)} must have the same batch size")
            Hyps, lod["Hyps"], _ = _unpad_rows(self.type, Hyps, HypsLength, "HypsLength")
            Refs, lod["Refs"], _ = _unpad_rows(self.type, Refs, RefsLength, "RefsLength")
        hoff = _off(self.type, lod.get("Hyps"), "Hyps")
        roff = _off(self.type, lod.get("Refs"), "Refs")
        if hoff.size != roff.size:
            raise ValueError("edit_distance: Hyps and Refs must have the same number of "
                             "sequences")
        hl, rl = np.diff(hoff), np.diff(roff)
        if normalized and (rl == 0).any():
            # fluid 1.8 (and Paddle 2.6) refuse it: the distance is divided by that length
            raise ValueError(f"edit_distance: with normalized=True every reference must be "
                             f"non-empty (the distance is divided by its length); reference "
                             f"{int(np.argmax(rl == 0))} (0-based) of {rl.size} is empty; pass "
                             f"normalized=False or drop the empty references")
        S, Lh, Lr = hl.size, int(hl.max(initial=0)), int(rl.max(initial=0))
        H = np.full(S * max(Lh, 1), -1, np.int64)
        H[_pad_index(hl, max(Lh, 1))] = Hyps.reshape(-1)
        R = np.full(S * max(Lr, 1), -2, np.int64)
        R[_pad_index(rl, max(Lr, 1))] = Refs.reshape(-1)
        H, R = H.reshape(S, max(Lh, 1)), R.reshape(S, max(Lr, 1))     # S may be 0
        # prev[s, j]: distance between the first i hyp ids and the first j ref ids
        prev = np.tile(np.arange(Lr + 1), (S, 1))
        rows = [prev]
        for i in range(1, Lh + 1):
            cur = np.empty_like(prev)
            cur[:, 0] = i
            for j in range(1, Lr + 1):
                cost = (H[:, i - 1] != R[:, j - 1]).astype(np.int64)
                cur[:, j] = np.minimum(np.minimum(prev[:, j] + 1, cur[:, j - 1] + 1),
                                       prev[:, j - 1] + cost)
            rows.append(cur)
            prev = cur
        table = np.stack(rows, 1)                    # [S, Lh + 1, Lr + 1]
        dist = table[np.arange(S), hl, rl].astype(np.float32)
        if normalized:
            dist = dist / rl.astype(np.float32)
        return {"Out": dist.reshape(-1, 1), "SequenceNum": np.array([S], np.int64)}



@register
class SequenceErase(OpDef):
    """Out = X's ids with every id in ``tokens`` removed, each sequence shrinking accordingly
    (its LoD recomputed; a sequence may become empty). Used by edit_distance's
    ``ignored_tokens``; not differentiable (ids)."""
    type, inputs, outputs = "sequence_erase", ("X",), ("Out",)
    no_grad = True
    lod_aware = True

    def infer(self, X):
        return {"Out": VarSpec((-1,) + tuple(X.shape[1:]), X.dtype, max(X.lod_level, 1))}

    def forward(self, X, lod=None, *, tokens=[]):  # noqa: B006
        x_lod = (lod or {}).get("X")
        off = _off(self.type, x_lod)
        keep = ~np.isin(X.reshape(X.shape[0], -1)[:, 0], np.asarray(tokens, X.dtype))
        lens = _seg_reduce(np.add, keep.astype(np.int64), off, 0)
        # fluid keeps the upper LoD levels and rewrites the last one
        upper = tuple(tuple(int(v) for v in level) for level in x_lod[:-1])
        return {"Out": X[keep], "lod": {"Out": upper + (_offsets(lens),)}}


# -- chunk_eval -------------------------------------------------------------------------------
_SCHEMES = {"plain": (1, -1, -1, -1, -1), "IOB": (2, 0, 1, -1, -1), "IOE": (2, -1, 0, 1, -1),
            "IOBES": (4, 0, 1, 2, 3)}     # (tag types, begin, inside, end, single)


def _chunks(labels: np.ndarray, off: np.ndarray, scheme: str, num_chunk_types: int,
            excluded: Any) -> np.ndarray:
    """The chunks of every sequence as int64 keys ``(start, end, type)`` packed in one array,
    with fluid's ChunkBegin / ChunkEnd rules evaluated for all tokens at once."""
    ntag, begin, inside, end, single = _SCHEMES[scheme]
    other = num_chunk_types
    lab = labels.reshape(-1).astype(np.int64)
    tag = np.where(lab < other * ntag, lab % ntag, -1)
    typ = np.minimum(lab // ntag, other)
    n = lab.size
    first = np.zeros(n, bool)
    first[off[:-1][np.diff(off) > 0]] = True
    ptag = np.where(first, -1, np.roll(tag, 1))
    ptyp = np.where(first, other, np.roll(typ, 1))
    diff, p_other, c_other = typ != ptyp, ptyp == other, typ == other
    is_b, is_i, is_e, is_s = tag == begin, tag == inside, tag == end, tag == single
    pb, pi, pe, ps = ptag == begin, ptag == inside, ptag == end, ptag == single
    same = ~p_other & ~c_other & ~diff
    starts_here = np.where(p_other, ~c_other, ~c_other & (diff | (
        same & (is_b | is_s | ((is_i | is_e) & (pe | ps))))))
    ends_before = ~first & ~p_other & (c_other | diff | (
        same & (((pb | pi) & (is_b | is_s)) | pe | ps)))
    last = np.zeros(n, bool)
    last[off[1:][np.diff(off) > 0] - 1] = True
    end_pos = np.sort(np.concatenate([np.nonzero(ends_before)[0] - 1,
                                      np.nonzero(last & ~c_other)[0]]))
    start_pos = np.nonzero(starts_here)[0]
    stop = end_pos[np.searchsorted(end_pos, start_pos)] if start_pos.size else start_pos
    ctype = typ[start_pos]
    keep = ~np.isin(ctype, np.asarray(excluded or [], np.int64))
    return (start_pos[keep] * n + stop[keep]) * (other + 1) + ctype[keep]


@register
class ChunkEval(OpDef):
    """Chunk-level precision, recall and F1 of the tagged sequences Inference against Label
    (schemes plain, IOB, IOE, IOBES; ``num_chunk_types`` types, larger labels are "other"); a
    chunk counts as correct when its start, end and type all match. Padded form (``SeqLength``,
    fluid 1.8): Inference and Label [batch, max_len], only the first SeqLength[b] tags count."""
    type, inputs = "chunk_eval", ("Inference", "Label", "SeqLength?")
    outputs = ("Precision", "Recall", "F1-Score", "NumInferChunks", "NumLabelChunks",
               "NumCorrectChunks")
    no_grad = True
    lod_aware = True

    def infer(self, Inference, Label, SeqLength, *, chunk_scheme="IOB"):
        if chunk_scheme not in _SCHEMES:
            raise ValueError(f"chunk_eval: chunk_scheme must be one of {list(_SCHEMES)}, got "
                             f"{chunk_scheme!r}")
        if SeqLength is not None and len(Inference.shape) not in (2, 3):
            raise ValueError(f"chunk_eval: with SeqLength, Inference must be padded [batch, "
                             f"max_len] (or [batch, max_len, 1]), got {list(Inference.shape)}")
        f, i = VarSpec((1,), VarType.FP32), VarSpec((1,), VarType.INT64)
        return {"Precision": f, "Recall": f, "F1-Score": f, "NumInferChunks": i,
                "NumLabelChunks": i, "NumCorrectChunks": i}

    def forward(self, Inference, Label, SeqLength=None, lod=None, *, num_chunk_types=1,
                chunk_scheme="IOB", excluded_chunk_types=[]):  # noqa: B006
        if chunk_scheme not in _SCHEMES:
            raise ValueError(f"chunk_eval: chunk_scheme must be one of {list(_SCHEMES)}, got "
                             f"{chunk_scheme!r}")
        if SeqLength is not None:             # fluid 1.8's padded form
            if Label.shape[:2] != Inference.shape[:2] or Inference.ndim not in (2, 3):
                raise ValueError(f"chunk_eval: with SeqLength, Inference and Label must both "
                                 f"be [batch, max_len] (or [batch, max_len, 1]), got "
                                 f"{list(Inference.shape)} and {list(Label.shape)}")
            Inference, full, idx = _unpad_rows(self.type, Inference, SeqLength, "SeqLength")
            Label = Label.reshape(-1)[idx]
            off = np.asarray(full[0], np.int64)
        else:
            off = _off(self.type, (lod or {}).get("Inference"), "Inference")
        got = _chunks(Inference, off, chunk_scheme, num_chunk_types, excluded_chunk_types)
        want = _chunks(Label, off, chunk_scheme, num_chunk_types, excluded_chunk_types)
        correct = np.intersect1d(got, want).size
        p = correct / got.size if got.size else 0.0
        r = correct / want.size if want.size else 0.0
        f1 = 2 * p * r / (p + r) if correct else 0.0
        as_f = lambda v: np.array([v], np.float32)          # noqa: E731
        as_i = lambda v: np.array([v], np.int64)            # noqa: E731
        return {"Precision": as_f(p), "Recall": as_f(r), "F1-Score": as_f(f1),
                "NumInferChunks": as_i(got.size), "NumLabelChunks": as_i(want.size),
                "NumCorrectChunks": as_i(correct)}


# -- im2sequence ------------------------------------------------------------------------------
def _im2seq_index(shape: Any, kernels: Any, strides: Any, paddings: Any, grid: Any = None):
    """Gather indices into the zero-padded image for every (output position, patch element);
    ``grid`` (oh, ow) overrides the full image's patch grid (real sizes larger than X)."""
    _, c, h, w = shape
    kh, kw = kernels
    sh, sw = strides
    up, left, down, right = paddings
    oh = c_div(h + up + down - kh, sh) + 1          # fluid's Im2SeqOutputSize (C++ int division)
    ow = c_div(w + left + right - kw, sw) + 1
    if grid is not None:
        oh, ow = grid
    if oh < 1 or ow < 1:
        raise ValueError(f"im2sequence: kernel {list(kernels)} does not fit the padded image "
                         f"{[h + up + down, w + left + right]}")
    ys = (np.arange(oh) * sh)[:, None, None, None] + np.arange(kh)[None, None, :, None]
    xs = (np.arange(ow) * sw)[None, :, None, None] + np.arange(kw)[None, None, None, :]
    return oh, ow, np.broadcast_to(ys, (oh, ow, kh, kw)), np.broadcast_to(xs, (oh, ow, kh, kw))


def _im2seq_pads(shape: Any, paddings: Any, ys: np.ndarray, xs: np.ndarray):
    """(up, left, down, right) of the zero canvas: down/right grow when the truncating output
    size lets the last patch reach past the padding (fluid's im2col reads zeros there)."""
    up, left, down, right = paddings
    return (up, left, max(down, int(ys.max()) + 1 - shape[2] - up),
            max(right, int(xs.max()) + 1 - shape[3] - left))


def _im2seq_real(Y: Any, n: int, kernels: Any, strides: Any, paddings: Any,
                 out_stride: Any) -> Tuple[np.ndarray, np.ndarray]:
    """Each image's patch grid (oh_i, ow_i) from its real size Y[i] = (h_i, w_i) (fluid's
    ``Y`` input) divided by ``out_stride`` (rounded up). A real size beyond X's is allowed: as
    fluid's im2col, the patches there read zeros."""
    real = np.asarray(Y).reshape(-1)
    if real.size != 2 * n:
        raise ValueError(f"im2sequence: Y (input_image_size) must be [N, 2] = [{n}, 2] (the "
                         f"real height and width of each image), got {real.size} values")
    real = real.reshape(n, 2).astype(np.int64)
    size = -(-real // np.asarray(out_stride, np.int64))              # ceil division
    up, left, down, right = paddings
    # C++ int division (truncated toward zero), as fluid's Im2SeqOutputSize
    ohs = np.trunc((size[:, 0] + up + down - kernels[0]) / strides[0]).astype(np.int64) + 1
    ows = np.trunc((size[:, 1] + left + right - kernels[1]) / strides[1]).astype(np.int64) + 1
    if (ohs < 1).any() or (ows < 1).any():
        raise ValueError(f"im2sequence: each image's real size (Y {real.tolist()}, divided by "
                         f"out_stride {list(out_stride)}) must give at least 1 x 1 patches, "
                         f"got {list(zip(ohs.tolist(), ows.tolist()))}")
    return ohs, ows


def _im2seq_layout(X: np.ndarray, Y: Any, kernels: Any, strides: Any, paddings: Any,
                   out_stride: Any) -> Tuple[int, int, np.ndarray, np.ndarray, Any]:
    """(oh, ow, ys, xs, keep): the patch grid and gather indices, and with real sizes the
    [N, oh, ow] mask of the top-left oh_i x ow_i positions image i keeps (None without).
    fluid reads Y only for a batch of more than one image."""
    if Y is None or X.shape[0] <= 1:
        return (*_im2seq_index(X.shape, kernels, strides, paddings), None)
    ohs, ows = _im2seq_real(Y, X.shape[0], kernels, strides, paddings, out_stride)
    oh, ow, _, _ = _im2seq_index(X.shape, kernels, strides, paddings)
    grid = (max(oh, int(ohs.max())), max(ow, int(ows.max())))
    oh, ow, ys, xs = _im2seq_index(X.shape, kernels, strides, paddings, grid)
    keep = (np.arange(oh)[None, :, None] < ohs[:, None, None]) & \
        (np.arange(ow)[None, None, :] < ows[:, None, None])
    return oh, ow, ys, xs, keep


@register
class Im2Sequence(OpDef):
    """Each image of X [N, C, H, W] becomes a sequence of its kernel patches (row-major over
    output positions), each row the patch's C * kh * kw values: Out [N * oh * ow, C*kh*kw] with
    one sequence per image. dX adds every patch gradient back at its pixels. With Y (fluid's
    ``input_image_size``, [N, 2] real heights and widths) and N > 1 (fluid ignores Y for a
    single image) image i gives the top-left oh_i x ow_i patches, oh_i / ow_i computed from
    ceil(Y[i] / out_stride) like oh / ow (patches beyond X read zeros, as fluid's im2col)."""
    type, inputs, outputs = "im2sequence", ("X", "Y?"), ("Out",)
    grad_uses = ("X", "Y")
    lod_aware = True

    def infer(self, X, Y, *, kernels, strides=(1, 1), out_stride=(1, 1)):
        if X.ndim != 4:
            raise ValueError(f"im2sequence: X must be [N, C, H, W], got {list(X.shape)}")
        if min(kernels) < 1 or min(strides) < 1 or min(out_stride) < 1:   # 0: division by 0
            raise ValueError(f"im2sequence: every value of kernels, strides and out_stride "
                             f"must be >= 1, got {list(kernels)}, {list(strides)} and "
                             f"{list(out_stride)}")
        return {"Out": VarSpec((-1, X.shape[1] * kernels[0] * kernels[1]), X.dtype, 1)}

    def forward(self, X, Y=None, lod=None, *, kernels=[1, 1], strides=[1, 1],  # noqa: B006
                paddings=[0, 0, 0, 0], out_stride=[1, 1]):  # noqa: B006
        oh, ow, ys, xs, keep = _im2seq_layout(X, Y, kernels, strides, paddings, out_stride)
        up, left, down, right = _im2seq_pads(X.shape, paddings, ys, xs)
        padded = np.pad(X, ((0, 0), (0, 0), (up, down), (left, right)))
        patches = padded[:, :, ys, xs]                       # [N, C, oh, ow, kh, kw]
        grid = patches.transpose(0, 2, 3, 1, 4, 5).reshape(X.shape[0], oh, ow, -1)
        if keep is None:
            lens = np.full(X.shape[0], oh * ow)
            return {"Out": grid.reshape(X.shape[0] * oh * ow, -1),
                    "lod": {"Out": (_offsets(lens),)}}
        return {"Out": grid[keep], "lod": {"Out": (_offsets(keep.sum((1, 2))),)}}

    def backward(self, X, Y=None, dOut=None, lod=None, *, kernels=[1, 1],  # noqa: B006
                 strides=[1, 1], paddings=[0, 0, 0, 0], out_stride=[1, 1]):  # noqa: B006
        n, c, h, w = X.shape
        oh, ow, ys, xs, keep = _im2seq_layout(X, Y, kernels, strides, paddings, out_stride)
        up, left, down, right = _im2seq_pads(X.shape, paddings, ys, xs)
        if keep is not None:            # the dropped positions get no gradient
            full = np.zeros((n, oh, ow, dOut.shape[1]), dOut.dtype)
            full[keep] = dOut
            dOut = full
        g = dOut.reshape(n, oh, ow, c, kernels[0], kernels[1]).transpose(0, 3, 1, 2, 4, 5)
        dpad = np.zeros((n, c, h + up + down, w + left + right), dOut.dtype)
        np.add.at(dpad, (slice(None), slice(None), ys, xs), g)
        return {"X": dpad[:, :, up:up + h, left:left + w]}
