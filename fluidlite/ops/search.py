"""fluid 1.8's text-matching ("search") ops over LoD batches of 2-D match maps:
``match_matrix_tensor``, ``var_conv_2d`` and ``sequence_topk_avg_pooling`` (operators/
match_matrix_tensor_op.cc, var_conv_2d_op.cc, sequence_ops/sequence_topk_avg_pooling_op.cc;
fluid.contrib's layers of the same names build them). Sample i of a batch is a map of
``ROW``'s i-th sequence length by ``COLUMN``'s i-th sequence length (ROW / COLUMN only supply
their LoD); a map with C channels is stored flat, channel-major then row-major, as one
sequence of X ([rows * cols * C, 1]).
"""
from __future__ import annotations

from typing import Any, Dict, List, Tuple

import numpy as np

from ..core.dtypes import VarType
from ..core.registry import OpDef, VarSpec, register


def _lens(op: str, lod: Any, slot: str) -> np.ndarray:
    x = (lod or {}).get(slot)
    if not x:
        raise ValueError(f"{op}: input {slot} has no LoD; feed a LoDTensor "
                         f"(fluid.create_lod_tensor(data, lengths, place))")
    return np.diff(np.asarray(x[-1], np.int64))


def _offsets(lens: Any) -> Tuple[int, ...]:
    return tuple(int(v) for v in np.concatenate([[0], np.cumsum(lens)]))


def _check_maps(op: str, x_lens: np.ndarray, rows: np.ndarray, cols: np.ndarray,
                channels: int) -> None:
    if not x_lens.size == rows.size == cols.size:
        raise ValueError(f"{op}: X, ROW and COLUMN must hold the same number of sequences, got "
                         f"{x_lens.size}, {rows.size} and {cols.size}")
    want = rows * cols * channels
    bad = np.nonzero(x_lens != want)[0]
    if bad.size:
        i = int(bad[0])
        raise ValueError(f"{op}: sequence {i} of X must hold ROW length * COLUMN length * "
                         f"channels = {rows[i]} * {cols[i]} * {channels} = {want[i]} values, "
                         f"got {x_lens[i]}")


# -- match_matrix_tensor -------------------------------------------------------------------------
@register
class MatchMatrixTensor(OpDef):
    """Per pair i of sequences x_i [m, h] of X and y_i [n, h] of Y:
    Out_i[t, a, b] = sum_{k, l} x_i[a, k] W[k, t, l] y_i[b, l] (W [h, dim_t, h]), flattened to
    dim_t * m * n rows of Out [-1, 1], one sequence per pair; Tmp = X @ W (as [h, dim_t * h]),
    flattened. Gradients: X, Y and W by the product rule."""
    type, inputs, outputs = "match_matrix_tensor", ("X", "Y", "W"), ("Out", "Tmp")
    grad_uses = ("X", "Y", "W")
    lod_aware = True

    def infer(self, X, Y, W, *, dim_t=1):
        h = X.shape[-1]
        if X.ndim != 2 or Y.ndim != 2 or W.ndim != 3 or (
                h >= 0 and (W.shape[0] not in (h, -1) or W.shape[2] not in (h, -1))) or (
                W.shape[1] >= 0 and W.shape[1] != dim_t):
            raise ValueError(f"{self.type}: X [M, h], Y [N, h] and W [h, dim_t, h] = "
                             f"[{h}, {dim_t}, {h}] expected, got X {list(X.shape)}, Y "
                             f"{list(Y.shape)}, W {list(W.shape)}")
        return {"Out": VarSpec((-1, 1), X.dtype, 1), "Tmp": VarSpec((-1, 1), X.dtype)}

    def _pairs(self, X, Y, lod):
        xl, yl = _lens(self.type, lod, "X"), _lens(self.type, lod, "Y")
        if xl.size != yl.size:
            raise ValueError(f"{self.type}: X and Y must hold the same number of sequences, got "
                             f"{xl.size} and {yl.size}")
        return _offsets(xl), _offsets(yl)

    def forward(self, X, Y, W, lod=None, *, dim_t=1):
        xo, yo = self._pairs(X, Y, lod)
        h = X.shape[1]
        tmp = (X @ W.reshape(h, -1)).reshape(X.shape[0], dim_t, h)       # [M, t, h]
        outs, sizes = [], []
        for i in range(len(xo) - 1):
            t = tmp[xo[i]:xo[i + 1]]
            o = np.einsum("atl,bl->tab", t, Y[yo[i]:yo[i + 1]])
            outs.append(o.reshape(-1))
            sizes.append(o.size)
        out = np.concatenate(outs) if outs else np.zeros(0, X.dtype)
        return {"Out": out.reshape(-1, 1).astype(X.dtype, copy=False),
                "Tmp": tmp.reshape(-1, 1), "lod": {"Out": (_offsets(sizes),)}}

    def backward(self, X, Y, W, dOut, dTmp=None, lod=None, *, dim_t=1):
        xo, yo = self._pairs(X, Y, lod)
        h = X.shape[1]
        Wm = W.reshape(h, dim_t, h)
        tmp = np.einsum("ak,ktl->atl", X, Wm)
        dtmp = np.zeros_like(tmp)
        dY = np.zeros_like(Y)
        g = dOut.reshape(-1)
        pos = 0
        for i in range(len(xo) - 1):
            m, n = xo[i + 1] - xo[i], yo[i + 1] - yo[i]
            G = g[pos:pos + dim_t * m * n].reshape(dim_t, m, n)
            pos += dim_t * m * n
            y = Y[yo[i]:yo[i + 1]]
            dtmp[xo[i]:xo[i + 1]] = np.einsum("tab,bl->atl", G, y)
            dY[yo[i]:yo[i + 1]] = np.einsum("tab,atl->bl", G, tmp[xo[i]:xo[i + 1]])
        if dTmp is not None:
            dtmp = dtmp + dTmp.reshape(dtmp.shape)
        return {"X": np.einsum("atl,ktl->ak", dtmp, Wm).astype(X.dtype, copy=False),
                "Y": dY,
                "W": np.einsum("ak,atl->ktl", X, dtmp).reshape(W.shape).astype(W.dtype,
                                                                            copy=False)}


# -- var_conv_2d ---------------------------------------------------------------------------------
class _Conv:
    """The geometry of one sample of ``var_conv_2d``: output positions every ``stride``
    pixels, the kernel centred with ``kernel // 2`` pixels before it (zeros outside)."""

    def __init__(self, h: int, w: int, kh: int, kw: int, sh: int, sw: int) -> None:
        self.oh = (h - 1) // sh + 1 if h else 0
        self.ow = (w - 1) // sw + 1 if w else 0
        iy = np.arange(self.oh)[None, :] * sh + np.arange(kh)[:, None] - kh // 2  # [kh, oh]
        ix = np.arange(self.ow)[None, :] * sw + np.arange(kw)[:, None] - kw // 2  # [kw, ow]
        vy, vx = (iy >= 0) & (iy < h), (ix >= 0) & (ix < w)
        # flat pixel index per (ky, kx, oy, ox) and whether it lies inside the map
        self.idx = (np.clip(iy, 0, max(h - 1, 0))[:, None, :, None] * w
                    + np.clip(ix, 0, max(w - 1, 0))[None, :, None, :])
        self.valid = vy[:, None, :, None] & vx[None, :, None, :]
        self.size = self.oh * self.ow

    def cols(self, img: np.ndarray) -> np.ndarray:
        """[C * kh * kw, oh * ow] (fluid's Col layout) of ``img`` [C, h * w]."""
        c = img[:, self.idx] * self.valid.astype(img.dtype)
        return c.reshape(img.shape[0] * self.idx.shape[0] * self.idx.shape[1], self.size)

    def scatter(self, dcols: np.ndarray, channels: int, pixels: int) -> np.ndarray:
        """The adjoint of ``cols``: [C, h * w]."""
        d = dcols.reshape((channels,) + self.idx.shape) * self.valid
        out = np.zeros((channels, pixels), dcols.dtype)
        for z in range(channels):
            np.add.at(out[z], self.idx[self.valid], d[z][self.valid])
        return out


@register
class VarConv2d(OpDef):
    """A 2-D convolution over maps of per-sample size (ROW length x COLUMN length, the LoD of
    ROW and COLUMN), X holding each map flat ([InputChannel, rows, cols] per sequence):
    stride (StrideH, StrideW), kernel (KernelH, KernelW) centred (KernelH // 2 rows before),
    zeros outside; Out_i = W @ Col_i (W [OutputChannel, InputChannel * KernelH * KernelW]),
    flattened to [OutputChannel * out_h * out_w, 1] per sequence; Col holds the im2col
    matrices. Gradients: X and W."""
    type, inputs, outputs = "var_conv_2d", ("X", "ROW", "COLUMN", "W"), ("Out", "Col")
    grad_uses = ("X", "ROW", "COLUMN", "W")
    lod_aware = True

    def infer(self, X, ROW, COLUMN, W, *, InputChannel=1, OutputChannel=1, StrideH=1,
              StrideW=1, KernelH=1, KernelW=1):
        if min(StrideH, StrideW, KernelH, KernelW, InputChannel, OutputChannel) < 1:
            raise ValueError(f"{self.type}: strides, kernel sizes and channel counts must be "
                             f">= 1")
        want = (OutputChannel, InputChannel * KernelH * KernelW)
        if W.ndim != 2 or any(a >= 0 and a != b for a, b in zip(W.shape, want)):
            raise ValueError(f"{self.type}: W must be [OutputChannel, InputChannel * KernelH * "
                             f"KernelW] = {list(want)}, got {list(W.shape)}")
        return {"Out": VarSpec((-1, 1), X.dtype, 1), "Col": VarSpec((-1, 1), X.dtype, 1)}

    def _samples(self, X, lod, ci, kh, kw, sh, sw) -> List[Tuple[int, int, _Conv]]:
        xl = _lens(self.type, lod, "X")
        rows, cols = _lens(self.type, lod, "ROW"), _lens(self.type, lod, "COLUMN")
        _check_maps(self.type, xl, rows, cols, ci)
        off = _offsets(xl)
        return [(off[i], int(rows[i] * cols[i]),
                 _Conv(int(rows[i]), int(cols[i]), kh, kw, sh, sw)) for i in range(xl.size)]

    def forward(self, X, ROW, COLUMN, W, lod=None, *, InputChannel=1, OutputChannel=1,
                StrideH=1, StrideW=1, KernelH=1, KernelW=1):
        flat = X.reshape(-1)
        outs, cols, osz, csz = [], [], [], []
        for start, px, g in self._samples(X, lod, InputChannel, KernelH, KernelW, StrideH,
                                          StrideW):
            c = g.cols(flat[start:start + InputChannel * px].reshape(InputChannel, px))
            outs.append((W @ c).reshape(-1))
            cols.append(c.reshape(-1))
            osz.append(OutputChannel * g.size)
            csz.append(c.size)
        cat = (lambda a: np.concatenate(a) if a else np.zeros(0, X.dtype))      # noqa: E731
        return {"Out": cat(outs).reshape(-1, 1).astype(X.dtype, copy=False),
                "Col": cat(cols).reshape(-1, 1).astype(X.dtype, copy=False),
                "lod": {"Out": (_offsets(osz),), "Col": (_offsets(csz),)}}

    def backward(self, X, ROW, COLUMN, W, dOut, dCol=None, lod=None, *, InputChannel=1,
                 OutputChannel=1, StrideH=1, StrideW=1, KernelH=1, KernelW=1):
        flat, g_out = X.reshape(-1), dOut.reshape(-1)
        dX = np.zeros_like(flat)
        dW = np.zeros_like(W)
        pos = 0
        for start, px, g in self._samples(X, lod, InputChannel, KernelH, KernelW, StrideH,
                                          StrideW):
            n = InputChannel * px
            c = g.cols(flat[start:start + n].reshape(InputChannel, px))
            G = g_out[pos:pos + OutputChannel * g.size].reshape(OutputChannel, g.size)
            pos += OutputChannel * g.size
            dW += G @ c.T
            dX[start:start + n] = g.scatter(W.T @ G, InputChannel, px).reshape(-1)
        return {"X": dX.reshape(X.shape), "W": dW}


# -- sequence_topk_avg_pooling --------------------------------------------------------------------
@register
class SequenceTopkAvgPooling(OpDef):
    """For each sample's map (channel_num channels of ROW length x COLUMN length, flat in X)
    and each channel and row: the mean of the k largest values of the row, for every k in
    ``topks`` (sum of the available ones / k when the row is shorter than k). Out
    [sum of row lengths, len(topks) * channel_num] (per row: channel-major, then k) with ROW's
    LoD; pos (int32) holds, per row, channel and rank < max(topks), the column picked or -1.
    Gradient: dX[picked] += dOut / k."""
    type, inputs = "sequence_topk_avg_pooling", ("X", "ROW", "COLUMN")
    outputs = ("Out", "pos")
    grad_uses = ("X", "ROW", "COLUMN", "pos")
    lod_aware = True

    def infer(self, X, ROW, COLUMN, *, topks, channel_num):
        if not topks or min(topks) < 1 or list(topks) != sorted(topks):
            raise ValueError(f"{self.type}: topks must be increasing positive ints, got "
                             f"{list(topks)}")
        if channel_num < 1:
            raise ValueError(f"{self.type}: channel_num must be >= 1, got {channel_num}")
        return {"Out": VarSpec((-1, len(topks) * channel_num), X.dtype, 1),
                "pos": VarSpec((-1,), VarType.INT32)}

    def _maps(self, lod, channel_num) -> Tuple[Any, np.ndarray, np.ndarray]:
        xl = _lens(self.type, lod, "X")
        rows, cols = _lens(self.type, lod, "ROW"), _lens(self.type, lod, "COLUMN")
        _check_maps(self.type, xl, rows, cols, channel_num)
        return _offsets(xl), rows, cols

    def forward(self, X, ROW, COLUMN, lod=None, *, topks=(1,), channel_num=1):
        off, rows, cols = self._maps(lod, channel_num)
        flat, K, kmax = X.reshape(-1), len(topks), topks[-1]
        outs: List[np.ndarray] = []
        poss: List[np.ndarray] = []
        for i in range(rows.size):
            r, c = int(rows[i]), int(cols[i])
            m = flat[off[i]:off[i + 1]].reshape(channel_num, r, c)
            # largest first; equal values keep the later column first (fluid's sort order)
            order = np.argsort(m, axis=2, kind="stable")[:, :, ::-1][:, :, :kmax]
            vals = np.take_along_axis(m, order, axis=2)
            have = order.shape[2]
            csum = np.concatenate([np.zeros((channel_num, r, 1), X.dtype),
                                   np.cumsum(vals, axis=2)], axis=2)
            idx = np.minimum(np.asarray(topks), have)
            avg = csum[:, :, idx] / np.asarray(topks, X.dtype)
            outs.append(avg.transpose(1, 0, 2).reshape(r, K * channel_num))
            pos = np.full((channel_num, r, kmax), -1, np.int32)
            pos[:, :, :have] = order
            poss.append(pos.transpose(1, 0, 2).reshape(-1))
        out = np.concatenate(outs) if outs else np.zeros((0, K * channel_num), X.dtype)
        return {"Out": out.astype(X.dtype, copy=False),
                "pos": np.concatenate(poss) if poss else np.zeros(0, np.int32),
                "lod": {"Out": (_offsets(rows),)}}

    def backward(self, X, ROW, COLUMN, pos, dOut, dpos=None, lod=None, *, topks=(1,),
                 channel_num=1):
        off, rows, cols = self._maps(lod, channel_num)
        flat_d = np.zeros(X.size, X.dtype)
        K, kmax = len(topks), topks[-1]
        ranks = np.arange(kmax)
        # weight of rank j in output k: 1 / topks[k] when j < topks[k]
        wk = (ranks[None, :] < np.asarray(topks)[:, None]) / np.asarray(topks, X.dtype)[:, None]
        p_at = r_at = 0
        for i in range(rows.size):
            r, c = int(rows[i]), int(cols[i])
            P = pos[p_at:p_at + r * channel_num * kmax].reshape(r, channel_num, kmax)
            G = dOut[r_at:r_at + r].reshape(r, channel_num, K)
            p_at, r_at = p_at + r * channel_num * kmax, r_at + r
            grad = np.einsum("rck,kj->rcj", G, wk.astype(X.dtype))      # [r, C, kmax]
            base = off[i] + (np.arange(channel_num)[None, :, None] * r
                             + np.arange(r)[:, None, None]) * c
            hit = P >= 0
            np.add.at(flat_d, (base + P)[hit], grad[hit])
        return {"X": flat_d.reshape(X.shape)}
