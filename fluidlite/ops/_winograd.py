"""Winograd F(2x2, 3x3) kernels for 3x3, stride-1, undilated, ungrouped convolutions.

The output is cut into 2x2 tiles; tile t of image n reads the 4x4 patch ``d`` of the padded
input at (2*ti, 2*tj). With the transforms (Lavin & Gray, 2016)

    B^T = [[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]]
    G   = [[1, 0, 0], [1/2, 1/2, 1/2], [1/2, -1/2, 1/2], [0, 0, 1]]
    A^T = [[1, 1, 1, 0], [0, 1, -1, -1]]

a tile of one output channel is ``Y = A^T [ sum_c (G W_c G^T) .* (B^T d_c B) ] A``. Each of the
16 positions (a, b) of the 4x4 products is one GEMM over the channels, stored column-major as
position xi = 4b + a (the order in which the column stage below writes its outputs),
``M[xi] = U[xi] (K x C) @ V[xi] (C x P)`` (P = tiles of all images), so a 3x3 layer costs
16*K*C*P = 4*K*C*N*oh*ow multiply-adds instead of im2col's 9*K*C*N*oh*ow, and the 4x4 input
patches overlap by half where im2col copies every pixel nine times.

The gradients are the exact adjoints of that forward (the same bilinear map, so they are the
true convolution gradients): ``dM[xi] = A dY_tile A^T``, then ``dU[xi] = dM[xi] @ V[xi]^T``
(``dW = G^T dU G``) and ``dV[xi] = U[xi]^T @ dM[xi]`` (``dX = B dV B^T``, the overlapping
patches added back through the even/odd phases of the padded rows and columns).

The transforms are adds over whole blocks of feature maps, never per tile. Padded row 2i + k
of the input is row i + k//2 of phase k%2, so the canvases are stored with their rows and
columns split by phase, phases first: ``[2 (row phase), 2 (column phase), lead, b, rows,
cols * u]``, each phase plane in the channel-major layout of ``conv.py``'s im2col with the
batch either second (``u = 1``) or, for narrow maps, innermost (``b = 1``, ``u`` = images).
Within a phase plane every transform stage is then a shift along one flat axis: tile row i + 1
is ``(tw + 1) * u`` entries on, tile column j + 1 is ``u`` entries on. With the batch second
each plane row carries one extra tile column whose values are discarded (``wide``; its dY is
zero, so it adds nothing to the gradients), and a column stage is one shift along all the
planes laid end to end. Its inputs and outputs are laid out for that -- the row stage writes
column phase first, the transformed tiles are position-major -- because a ufunc over the
short rows of a strided view costs 3-5x one over the same entries laid flat: NumPy gathers
runs shorter than its ufunc buffer into the buffer first (NumPy 1.23 and 2.4 alike: 208K
float32 in rows of 812, 114 against 28 us). The row stages, whose runs are one plane, run
inside ``broadcast.whole_runs`` (unbuffered from 256 entries a run: 64 channels at 56x56,
0.18 -> 0.10 ms). The interleaving into and out of NCHW is done once, by the copies that move
a block in and out of the canvas. Blocks hold as many images as keep the transformed tiles
within ``_BUDGET`` bytes; the filter gradient adds the blocks' products in batch order.
Results are deterministic (a fixed order of operations) and equal the direct convolution to
within float rounding (a few ulps of the sums' magnitude).
"""
from __future__ import annotations

from typing import Any, Callable, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from ..core import threads
from .broadcast import whole_runs
from .linalg import _bmm, _mm

__all__ = ["use_winograd", "winograd_fwd", "winograd_fwd_tiles", "winograd_grads", "winograd_dx",
           "winograd_dw", "tiles_fit"]

_BUDGET = 4 << 20        # bytes of transformed tiles (16 x C x tiles) per block of images
MIN_CHANNELS = 16       # below this the per-position GEMMs are too thin to beat one im2col GEMM
_MIN_TILES = 48          # output pixels / 4 over the batch (``use_winograd``)
# maps narrower than this put the batch innermost: at 16 and 20 columns the spare tile
# column of the batch-second planes (1/8, 1/10 of the GEMMs) costs more than batch-innermost
# copies (a 128-channel 16x16 layer, batch 32: forward 12.6 -> 11.2 ms, gradients 28.0 ->
# 25.1 ms); from 28 columns batch-second is as fast or faster
_NARROW = 24
_WIDE_MIN = 4            # tile columns from which a batch-second plane row carries a spare one


def use_winograd(g: Any, N: int, C: int, F: int, dtype: np.dtype) -> bool:
    """The Winograd kernels apply: a 3x3 filter, stride 1, dilation 1, groups 1, a canvas of
    exactly the output size + 2 (not a transposed convolution's larger one), float32 or
    float64, at least ``MIN_CHANNELS`` input and output channels, and outputs worth at least
    ``_MIN_TILES`` full tiles over the batch (the filter's transform, 16 x F x C, is paid per
    call: a 512-channel 7x7 layer at batch 1 ran 1.9x slower than im2col, 0.82x at 14x14)."""
    return ((g.kh, g.kw, g.sh, g.sw, g.dh, g.dw, g.groups) == (3, 3, 1, 1, 1, 1, 1)
            and g.Hp == g.oh + 2 and g.Wp == g.ow + 2      # every padded row is read
            and C >= MIN_CHANNELS and F >= MIN_CHANNELS
            and N * g.oh * g.ow >= 4 * _MIN_TILES
            and np.dtype(dtype) in (np.float32, np.float64))


class _Plan(NamedTuple):
    """Tiling of one block of ``b`` images: th x tw tiles of 2x2 outputs."""
    th: int
    tw: int
    b: int
    bl: bool                          # batch innermost: u = b entries per pixel, one "image"

    @property
    def u(self) -> int:
        return self.b if self.bl else 1

    @property
    def nb(self) -> int:              # the batch axis' length in the canvases
        return 1 if self.bl else self.b

    @property
    def wide(self) -> bool:           # plane rows carry a spare tile column (module docstring)
        return not self.bl and self.tw >= _WIDE_MIN

    @property
    def row(self) -> int:             # entries per canvas row of one phase plane
        return (self.tw + 1) * self.u

    @property
    def wc(self) -> int:              # entries per tile row of the transformed tiles
        return self.row if self.wide else self.tw * self.u

    def images(self, a: np.ndarray) -> np.ndarray:
        """A canvas [2, 2, lead, nb, r, c*u] seen as [lead, b, 2, 2, r, c] (a view)."""
        if not self.bl:
            return a.transpose(2, 3, 0, 1, 4, 5)
        _, _, lead, _, r, cu = a.shape
        return a.reshape(2, 2, lead, r, cu // self.b, self.b).transpose(2, 5, 0, 1, 3, 4)

    def tile_images(self, a: np.ndarray) -> np.ndarray:
        """Tiles [lead, nb, th, wc] seen as [lead, b, th, tw'] (tw' = wc / u)."""
        if not self.bl:
            return a
        return a.reshape(a.shape[0], self.th, -1, self.b).transpose(0, 3, 1, 2)


def _blocks(g: Any, N: int, C: int, itemsize: int) -> List[Tuple[int, _Plan]]:
    """One plan per block of images: (first image, plan)."""
    th, tw = (g.oh + 1) // 2, (g.ow + 1) // 2
    fit = _BUDGET // max(16 * C * th * (tw + 1) * itemsize, 1)
    # an even count of equal blocks (``threads.even_ranges``): 3 blocks left one of two
    # threads idle for a third of a ResNet-18 layer
    return [(lo, _Plan(th, tw, hi - lo, g.ow < _NARROW and hi - lo > 1))
            for lo, hi in threads.even_ranges(N, fit)]


def _phases(canvas: np.ndarray, block: np.ndarray, offsets: Tuple[int, int], put: bool) -> None:
    """Copy between a block [lead, b, h, w] and a phase-split canvas view
    [lead, b, 2, 2, r, c]: pixel (y, x) sits at canvas row y + offsets[0], column
    x + offsets[1]. ``put``: block -> canvas, else canvas -> block."""
    h, w = block.shape[-2:]
    for p in range(2):
        y0 = (p - offsets[0]) % 2
        nr, r0 = len(range(y0, h, 2)), (y0 + offsets[0]) // 2
        for q in range(2):
            x0 = (q - offsets[1]) % 2
            nc, c0 = len(range(x0, w, 2)), (x0 + offsets[1]) // 2
            view = canvas[:, :, p, q, r0:r0 + nr, c0:c0 + nc]
            if put:
                view[...] = block[:, :, y0::2, x0::2]
            else:
                block[:, :, y0::2, x0::2] = view


# -- the transform stages: shifts along the last axis -------------------------------------------
def _input_stage(e: np.ndarray, o: np.ndarray, shift: int, n: int,
                 out: Sequence[np.ndarray]) -> None:
    """``out[k] = (B^T d)[k]`` for patches of rows (2i, 2i+1, 2i+2, 2i+3) = (e[i], o[i],
    e[i+1], o[i+1]), tile i + 1 being ``shift`` entries after tile i along the last axis of
    the even / odd phases ``e`` / ``o``; ``n`` entries of each output."""
    e0, o0, e1, o1 = e[..., :n], o[..., :n], e[..., shift:shift + n], o[..., shift:shift + n]
    np.subtract(e0, e1, out=out[0])
    np.add(o0, e1, out=out[1])
    np.subtract(e1, o0, out=out[2])
    np.subtract(o0, o1, out=out[3])


def _adjoint_input_stage(v: Sequence[np.ndarray], shift: int, e: np.ndarray,
                         o: np.ndarray) -> None:
    """The adjoint of ``_input_stage``: the patches' (B v)[k] added back onto their rows
    (even phase ``e``, odd phase ``o``; as long as v plus ``shift``, or as long as v when
    v's last ``shift`` entries are zero). Row 2i gets patch i's k=0 and patch i-1's k=2 term,
    row 2i+1 patch i's k=1 and patch i-1's k=3 term."""
    v0, v1, v2, v3 = v
    n = min(v0.shape[-1], e.shape[-1])
    np.copyto(e[..., :n], v0[..., :n])                              # (B v)[0] = v0
    e[..., n:] = 0
    t = np.add(v1, v2)
    t -= v0                                                         # (B v)[2] = v1 + v2 - v0
    e[..., shift:] += t[..., :e.shape[-1] - shift]
    np.subtract(v1, v2, out=t)
    t += v3                                                         # (B v)[1] = v1 - v2 + v3
    np.copyto(o[..., :n], t[..., :n])
    o[..., n:] = 0
    o[..., shift:] -= v3[..., :o.shape[-1] - shift]                 # (B v)[3] = -v3


def _output_stage(m: Sequence[np.ndarray], out0: np.ndarray, out1: np.ndarray) -> None:
    """(A^T m)[0] = m0 + m1 + m2 and (A^T m)[1] = m1 - m2 - m3, into ``out0`` / ``out1``."""
    np.add(m[0], m[1], out=out0)
    out0 += m[2]
    np.subtract(m[1], m[2], out=out1)
    out1 -= m[3]


def _adjoint_output_stage(d0: np.ndarray, d1: np.ndarray, out: np.ndarray) -> None:
    """``out[a] = (A d)[a]``: d0, d0 + d1, d0 - d1, -d1 (the adjoint of ``_output_stage``)."""
    np.copyto(out[0], d0)
    np.add(d0, d1, out=out[1])
    np.subtract(d0, d1, out=out[2])
    np.negative(d1, out=out[3])


# -- the four transforms ------------------------------------------------------------------------
def filter_tiles(w: np.ndarray) -> np.ndarray:
    """U [16, K, C] = G W G^T for a filter [K, C, 3, 3], position (a, b) at 4b + a: one GEMM
    with G (x) G, [16, 9] @ [9, K*C] (the filter seen transposed, so no copy)."""
    K, C = w.shape[:2]
    return _mm(_gg(w.dtype), w.reshape(K * C, 9).T).reshape(16, K, C)


def _gg(dtype: np.dtype) -> np.ndarray:
    """G (x) G [16, 9], rows column-major: row 4b + a, column 3i + j holds G[a, i] * G[b, j]."""
    half = 0.5
    gm = np.array([[1, 0, 0], [half, half, half], [half, -half, half], [0, 0, 1]], np.float64)
    return np.kron(gm, gm).reshape(4, 4, 9).transpose(1, 0, 2).reshape(16, 9).astype(dtype)


def _input_tiles(x: np.ndarray, pl: _Plan, pads: Tuple[int, int]) -> np.ndarray:
    """V [16, C, P] = B^T d B of every patch of the images ``x`` [b, C, h, w] placed at
    ``pads`` (top, left) on a zero canvas of (2th+2) x (2tw+2) pixels."""
    C = x.shape[1]
    th, R, u = pl.th, pl.row, pl.u
    canvas = np.zeros((2, 2, C, pl.nb, th + 1, R), x.dtype)
    _phases(pl.images(canvas), x.transpose(1, 0, 2, 3), pads, put=True)
    flat = canvas.reshape(2, 2, C, pl.nb, (th + 1) * R)
    rows = np.empty((2, 4, C, pl.nb, th * R), x.dtype)         # [column phase, k, ...]
    with whole_runs(th * R, rows.size):          # runs of th * R (see the module docstring)
        _input_stage(flat[0], flat[1], R, th * R, [rows[:, k] for k in range(4)])
    # the column stage of the four row-stage outputs k at once: out[l] = V[4l + k] over k
    v = np.empty((4, 4, C, pl.nb, th, pl.wc), x.dtype)
    if pl.wide:                 # the planes end to end; each row's last tile column is spare
        n = v[0].size
        flat_v = v.reshape(4, n)
        _input_stage(rows[0].reshape(n), rows[1].reshape(n), u, n - u,
                     [flat_v[l, :-u] for l in range(4)])
        # (the last tile column of each plane's last row read the next plane: zero, as the
        # one tile column past the whole array)
        v.reshape(4, 4, C, pl.nb, th * R)[..., -u:] = 0
    else:
        r = rows.reshape(2, 4, C, pl.nb, th, R)
        _input_stage(r[0], r[1], u, pl.tw * u, [v[l] for l in range(4)])
    return v.reshape(16, C, -1)


def _output_tiles(m: np.ndarray, pl: _Plan, y: np.ndarray) -> None:
    """A^T m A of every tile, m [4 (b), 4 (a), K, P], into the block ``y`` [b, K, oh, ow]
    (each stage over all four columns / both rows of the tiles at once: 8 NumPy calls, not
    24)."""
    rows = np.empty((2, 4) + m.shape[2:], m.dtype)
    # rows[r, b] = (A^T m[b, :])[r]
    _output_stage(m.transpose(1, 0, 2, 3), rows[0], rows[1])
    out = np.empty((2, 2) + m.shape[2:], m.dtype)
    K = m.shape[2]
    _output_stage(rows.transpose(1, 0, 2, 3), out[:, 0], out[:, 1])
    for r in range(2):
        for s in range(2):
            dst = y[:, :, r::2, s::2]
            t = pl.tile_images(out[r, s].reshape(K, pl.nb, pl.th, pl.wc))
            dst[...] = t.transpose(1, 0, 2, 3)[:, :, :dst.shape[2], :dst.shape[3]]


def _grad_tiles(dy: np.ndarray, pl: _Plan) -> np.ndarray:
    """dM [16, K, P] = A dY_tile A^T of every 2x2 output tile of the block ``dy``
    [b, K, oh, ow] (tiles past the map's edge, spare ones included, read zeros)."""
    K = dy.shape[1]
    canvas = np.zeros((2, 2, K, pl.nb, pl.th, pl.wc), dy.dtype)
    _phases(pl.images(canvas), dy.transpose(1, 0, 2, 3), (0, 0), put=True)
    flat = canvas.reshape(2, 2, -1)                   # [row phase, column phase, the planes]
    rows = np.empty((4, 2, flat.shape[-1]), dy.dtype)
    _adjoint_output_stage(flat[0], flat[1], rows)
    dm = np.empty((4, 4, flat.shape[-1]), dy.dtype)   # dM[4b + a]: the column stage over all a
    _adjoint_output_stage(rows[:, 0], rows[:, 1], dm)
    return dm.reshape(16, K, -1)


def _input_grad(dv: np.ndarray, pl: _Plan, dx: np.ndarray, pads: Tuple[int, int]) -> None:
    """B dV B^T of every patch from dV [4 (b), 4 (a), C, P], the overlapping patches added,
    cropped into the block ``dx`` [b, C, h, w] (placed at ``pads`` on the canvas)."""
    C = dv.shape[2]
    th, R, u = pl.th, pl.row, pl.u
    cols = np.empty((2, 4, C, pl.nb, th, R), dv.dtype)         # [column phase, a, ...]
    # the column stage of all four rows a of dV at once (dV[b, a] over a, for each b)
    if pl.wide:                 # the planes end to end (the spare tile columns' dV is zero)
        v = dv.reshape(4, -1)
        c = cols.reshape(2, -1)
    else:
        v = dv.reshape(4, 4, C, pl.nb, th, pl.wc)
        c = cols
    _adjoint_input_stage(list(v), u, c[0], c[1])
    canvas = np.empty((2, 2, C, pl.nb, (th + 1) * R), dv.dtype)
    c = cols.reshape(2, 4, C, pl.nb, th * R)
    with whole_runs(th * R, canvas.size):
        _adjoint_input_stage([c[:, a] for a in range(4)], R, canvas[0], canvas[1])
    _phases(pl.images(canvas.reshape(2, 2, C, pl.nb, th + 1, R)), dx.transpose(1, 0, 2, 3),
            pads, put=False)


# -- the kernels ---------------------------------------------------------------------------------
def winograd_fwd(x: np.ndarray, w: np.ndarray, g: Any, u: Optional[np.ndarray] = None,
                 epilogue: Optional[Callable[[np.ndarray, tuple], Any]] = None) -> np.ndarray:
    """Y [N, K, oh, ow] = conv2d(x [N, C, H, W], w [K, C, 3, 3]) with the paddings of ``g``
    (the blocks of images in parallel); ``u``: ``filter_tiles(w)`` when the caller has it
    already (an inference program transforms its constant filters once, at load);
    ``epilogue(Y3[where], where)`` (Y3 = Y as [N, K, oh*ow], ``where`` = (images,)) on each
    block of images as soon as it is made (``conv.conv2d_forward``)."""
    return winograd_fwd_tiles(x, w, g, u, epilogue)[0]


def winograd_fwd_tiles(x: np.ndarray, w: np.ndarray, g: Any, u: Optional[np.ndarray] = None,
                       epilogue: Optional[Callable[[np.ndarray, tuple], Any]] = None
                       ) -> Tuple[np.ndarray, Tuple[np.ndarray, ...]]:
    """``winograd_fwd``'s Y and the transformed input tiles V [16, C, P] of each block of
    images, which ``winograd_grads`` takes as ``tiles`` instead of transforming the input
    again (the same arrays, so the same bits)."""
    N, C = x.shape[:2]
    K = w.shape[0]
    if u is None:
        u = filter_tiles(w)
    elif u.shape != (16, K, C) or u.dtype != w.dtype:
        raise ValueError(f"winograd: the filter tiles must be {w.dtype} [16, {K}, {C}] (the "
                         f"transform of the filter {list(w.shape)}), got {u.dtype} "
                         f"{list(u.shape)}")
    y = np.empty((N, K, g.oh, g.ow), x.dtype)
    blocks = _blocks(g, N, C, x.dtype.itemsize)
    tiles: List[Any] = [None] * len(blocks)

    def one(i: int) -> None:
        lo, pl = blocks[i]
        tiles[i] = _input_tiles(x[lo:lo + pl.b], pl, (g.pt, g.pl))
        m = _bmm(u, tiles[i])                                           # [16, K, P]
        _output_tiles(m.reshape(4, 4, K, -1), pl, y[lo:lo + pl.b])
        if epilogue is not None:                # (the block is still in cache)
            where = (slice(lo, lo + pl.b),)
            epilogue(y3[where], where)
    y3 = y.reshape(N, K, g.oh * g.ow)
    threads.parallel(one, len(blocks))
    return y, tuple(tiles)


def winograd_grads(dy: np.ndarray, g: Any, w: Optional[np.ndarray] = None,
                   x: Optional[np.ndarray] = None,
                   tiles: Optional[Sequence[np.ndarray]] = None
                   ) -> Tuple[Optional[np.ndarray], Optional[np.ndarray]]:
    """The gradients of ``winograd_fwd`` from dY [N, K, oh, ow]: (dX [N, C, H, W] when the
    filter ``w`` is given, dW [K, C, 3, 3] when the input ``x`` is given; None otherwise).
    Each block's dM = A dY A^T is made once for both: dV = U^T dM gives dX = B dV B^T, and
    dU = the blocks' dM V^T summed in batch order gives dW = G^T dU G (the blocks run in
    parallel; their dU are added in order whatever thread made them). ``tiles``: the blocks'
    V of ``x`` as ``winograd_fwd_tiles`` made them (then not made again here)."""
    N, K = dy.shape[:2]
    C = (w.shape[1] if w is not None else x.shape[1])
    # U^T [16, C, K]: the transform of w^T is U with its two channel axes swapped (a view;
    # transforming w^T itself would first copy the transposed filter)
    ut = None if w is None else filter_tiles(w).transpose(0, 2, 1)
    dx = None if w is None else np.empty((N, C, g.H, g.W), dy.dtype)
    blocks = _blocks(g, N, C, dy.dtype.itemsize)
    du: List[np.ndarray] = []

    def one(i: int) -> Optional[np.ndarray]:
        lo, pl = blocks[i]
        hi = lo + pl.b
        dm = _grad_tiles(dy[lo:hi], pl)                                   # [16, K, P]
        if dx is not None:
            dv = _bmm(ut, dm)                                        # [16, C, P]
            _input_grad(dv.reshape(4, 4, C, -1), pl, dx[lo:hi], (g.pt, g.pl))
        if x is None:
            return None
        v = _input_tiles(x[lo:hi], pl, (g.pt, g.pl)) if tiles is None else tiles[i]
        return _bmm(dm, v.transpose(0, 2, 1))                       # [16, K, C]

    def add(i: int, part: Optional[np.ndarray]) -> None:
        if part is None:
            return
        if du:
            du[0] += part
        else:
            du.append(part)
    threads.parallel(one, len(blocks), add)
    dw = None if not du else _mm(du[0].reshape(16, K * C).T, _gg(dy.dtype))   # [K*C, 9]
    return dx, None if dw is None else dw.reshape(K, C, 3, 3)


def tiles_fit(tiles: Any, x: np.ndarray, g: Any) -> bool:
    """Whether ``tiles`` can be ``winograd_grads``' tiles of ``x``: one V [16, C, P] of
    ``x``'s dtype per block of images ``_blocks`` cuts ``x`` into (what
    ``winograd_fwd_tiles`` returns for an input of its shape and dtype)."""
    N, C = x.shape[:2]
    blocks = _blocks(g, N, C, x.dtype.itemsize)
    return (isinstance(tiles, tuple) and len(tiles) == len(blocks)
            and all(isinstance(v, np.ndarray) and v.dtype == x.dtype
                    and v.shape == (16, C, pl.nb * pl.th * pl.wc)
                    for v, (_, pl) in zip(tiles, blocks)))


def winograd_dx(dy: np.ndarray, w: np.ndarray, g: Any) -> np.ndarray:
    """dX [N, C, H, W] of ``winograd_fwd`` from dY [N, K, oh, ow]."""
    return winograd_grads(dy, g, w=w)[0]


def winograd_dw(x: np.ndarray, dy: np.ndarray, g: Any, w_shape: Sequence[int]) -> np.ndarray:
    """dW [K, C, 3, 3] of ``winograd_fwd``."""
    return winograd_grads(dy, g, x=x)[1].reshape(w_shape)
