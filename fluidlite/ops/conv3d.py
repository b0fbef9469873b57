"""3-D convolution: ``conv3d`` and ``conv3d_transpose`` (NCDHW or NDHWC), fluid 1.8's ops.

Same structure as the 2-D ops in ``conv.py``, written once for any number of spatial axes:

* ``conv_nd_fwd``  Y = W (*) X: an im2col copy made through ``as_strided`` plus ONE (grouped)
  GEMM;
* ``conv_nd_dx``   dX from dY: one GEMM, then col2im as prod(kernel) strided adds;
* ``conv_nd_dw``   dW from X and dY: the same im2col copy plus one GEMM.

``conv3d_transpose`` is the adjoint of ``conv3d``: its forward is ``conv_nd_dx`` and its input
gradient ``conv_nd_fwd``. Paddings are ``[pd, ph, pw]`` (symmetric) or
``[front, back, top, bottom, left, right]``; ``padding_algorithm`` SAME pads so that
``out = ceil(in / stride)`` (dilation 1), VALID uses no padding.
"""
from __future__ import annotations

import itertools
from typing import List, NamedTuple, Sequence, Tuple

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ..core.registry import OpDef, VarSpec, get_op_def, register
from .conv import LazyOutputs, _check_conv_specs, _ConvBase, c_div

__all__ = ["NdGeom", "nd_paddings", "conv_nd_fwd", "conv_nd_dx", "conv_nd_dw"]

_EXTRA = {"use_cudnn": False, "use_mkldnn": False, "fuse_relu": False,
          "fuse_residual_connection": False, "workspace_size_MB": 4096,
          "exhaustive_search": False, "force_fp32_output": False}


class NdGeom(NamedTuple):
    """Geometry of one N-d convolution: kernel, strides, dilations, (before, after) paddings,
    unpadded input sizes, output sizes, groups."""
    k: Tuple[int, ...]
    s: Tuple[int, ...]
    d: Tuple[int, ...]
    pads: Tuple[Tuple[int, int], ...]
    size: Tuple[int, ...]
    out: Tuple[int, ...]
    groups: int


def nd_paddings(paddings: Sequence[int], n: int, what: str = "paddings") -> List[Tuple[int, int]]:
    """fluid paddings (``n`` symmetric values or ``2n`` before/after values) -> pairs."""
    p = [int(v) for v in paddings]
    if len(p) == n:
        return [(v, v) for v in p]
    if len(p) == 2 * n:
        return [(p[2 * i], p[2 * i + 1]) for i in range(n)]
    raise ValueError(f"{what} must have {n} or {2 * n} values, got {list(paddings)}")


def _resolve(size: Sequence[int], k: Sequence[int], strides: Sequence[int],
             paddings: Sequence[int], dilations: Sequence[int], algorithm: str, op: str
             ) -> Tuple[List[Tuple[int, int]], List[int]]:
    n = len(k)
    pads, dil = nd_paddings(paddings, n, f"{op}: paddings"), [int(v) for v in dilations]
    if algorithm == "SAME":
        for i in range(n):
            if size[i] < 0:
                continue
            out = (size[i] + strides[i] - 1) // strides[i]
            total = max((out - 1) * strides[i] + k[i] - size[i], 0)
            pads[i] = (total // 2, total - total // 2)
            dil[i] = 1
    elif algorithm == "VALID":
        pads = [(0, 0)] * n
    elif algorithm != "EXPLICIT":
        raise ValueError(f"{op}: padding_algorithm must be 'EXPLICIT', 'SAME' or 'VALID', got "
                         f"{algorithm!r}")
    return pads, dil


def _out_size(size: int, k: int, pad: Tuple[int, int], s: int, d: int) -> int:
    """fluid's ``ConvOutputSize`` (C++ int division: truncated toward zero)."""
    if size < 0:
        return -1
    return c_div(size + pad[0] + pad[1] - (d * (k - 1) + 1), s) + 1


def _geom(size, k, strides, paddings, dilations, algorithm, groups, op) -> NdGeom:
    pads, dil = _resolve(size, k, strides, paddings, dilations, algorithm, op)
    out = tuple(_out_size(size[i], k[i], pads[i], strides[i], dil[i]) for i in range(len(k)))
    if any(o <= 0 for o in out):
        raise ValueError(f"{op}: the output of the convolution would be empty: input "
                         f"{list(size)}, kernel {list(k)}, paddings {pads}, strides "
                         f"{list(strides)}, dilations {dil}")
    # truncation may let the last window reach past the end padding: zeros there, as fluid's
    # im2col reads (the input gradient crops them away)
    pads = [(b, a + max((out[i] - 1) * int(strides[i]) + dil[i] * (k[i] - 1) + 1
                        - (size[i] + b + a), 0)) for i, (b, a) in enumerate(pads)]
    return NdGeom(tuple(k), tuple(int(v) for v in strides), tuple(dil), tuple(pads),
                  tuple(size), out, groups)


def _pad(x: np.ndarray, g: NdGeom) -> np.ndarray:
    if all(p == (0, 0) for p in g.pads):
        return x
    return np.pad(x, [(0, 0), (0, 0)] + list(g.pads))


# im2col matrices above this many elements are not built: the kernels then loop over the
# kernel offsets with one GEMM each, a few images at a time so that the sums they add into
# stay in cache (a 12^3 filter over a 5 x 3 x 12 x 32^2 input -- fluid 1.8's Conv3DTranspose
# example -- would need a 5 GB column matrix: 28 s one way, about 1 s the other)
_MAX_COLS = 1 << 25
_BLOCK_BYTES = 1 << 22


def _cols_view(x: np.ndarray, g: NdGeom) -> np.ndarray:
    """The im2col view of ``x`` [N, C, *size]: ``[C, *k, N, *out]`` (no copy)."""
    xp = _pad(x, g)
    st = xp.strides
    n = len(g.k)
    shape = (xp.shape[1],) + g.k + (xp.shape[0],) + g.out
    strides = ((st[1],) + tuple(g.d[i] * st[2 + i] for i in range(n)) + (st[0],)
               + tuple(g.s[i] * st[2 + i] for i in range(n)))
    return as_strided(xp, shape, strides, writeable=False)


def _cols(x: np.ndarray, g: NdGeom) -> np.ndarray:
    """im2col of ``x`` [N, C, *size]: ``[C * prod(k), N * prod(out)]`` (rows c-major, then
    kernel offsets; columns n-major, then output positions)."""
    return _cols_view(x, g).reshape(x.shape[1] * int(np.prod(g.k)), -1)


def _offsets(g: NdGeom) -> "itertools.product":
    return itertools.product(*(range(k) for k in g.k))


def _image_blocks(g: NdGeom, channels: int, N: int, per_image: int) -> List[slice]:
    """``[]`` when the im2col matrix of ``channels`` is small enough to build; otherwise the
    image ranges whose ``per_image`` elements of running sums stay within ``_BLOCK_BYTES``."""
    if channels * int(np.prod(g.k)) * N * int(np.prod(g.out)) <= _MAX_COLS:
        return []
    step = max(1, _BLOCK_BYTES // (4 * per_image))
    return [slice(n, min(n + step, N)) for n in range(0, N, step)]


def _w_tap(w: np.ndarray, off: Tuple[int, ...], G: int) -> np.ndarray:
    """``w`` [F, C/G, *k] at kernel offset ``off``, per group: [G, F/G, C/G]."""
    return w[(slice(None), slice(None)) + off].reshape(G, w.shape[0] // G, w.shape[1])


def conv_nd_fwd(x: np.ndarray, w: np.ndarray, g: NdGeom) -> np.ndarray:
    """Y [N, F, *out] = grouped correlation of ``x`` [N, C, *size] with ``w`` [F, C/G, *k]."""
    N, C, F, G = x.shape[0], x.shape[1], w.shape[0], g.groups
    blocks = _image_blocks(g, C, N, F * int(np.prod(g.out)))
    if blocks:
        view = _cols_view(x, g)
        y = np.empty((G, F // G, N) + g.out, np.result_type(x, w))
        for b in blocks:
            acc = np.zeros((G, F // G, (b.stop - b.start) * int(np.prod(g.out))), y.dtype)
            for off in _offsets(g):
                tap = view[(slice(None),) + off + (b,)].reshape(G, C // G, -1)
                acc += np.matmul(_w_tap(w, off, G), tap)
            y[:, :, b] = acc.reshape((G, F // G, -1) + g.out)
    else:
        cols = _cols(x, g)
        y = np.matmul(w.reshape(G, F // G, -1), cols.reshape(G, cols.shape[0] // G, -1))
    y = y.reshape((F, N) + g.out)
    return np.ascontiguousarray(np.moveaxis(y, 0, 1))


def _rows(dy: np.ndarray) -> np.ndarray:
    """dY [N, F, *out] -> [F, N * prod(out)] in the column order of ``_cols``."""
    return np.ascontiguousarray(np.moveaxis(dy, 1, 0)).reshape(dy.shape[1], -1)


def conv_nd_dx(dy_rows: np.ndarray, w: np.ndarray, g: NdGeom, N: int) -> np.ndarray:
    """dX [N, C, *size] from dY rows [F, N*prod(out)]: one GEMM, then col2im (for a column
    matrix above ``_MAX_COLS``: one GEMM per kernel offset, added in place, by image blocks)."""
    G, F = g.groups, w.shape[0]
    C = w.shape[1] * G
    n = len(g.k)
    padded = tuple(g.size[i] + g.pads[i][0] + g.pads[i][1] for i in range(n))
    buf = np.zeros((C, N) + padded, dy_rows.dtype)
    dyg = dy_rows.reshape(G, F // G, N, -1)

    def window(off: Tuple[int, ...]) -> Tuple[slice, ...]:
        return tuple(slice(off[i] * g.d[i], off[i] * g.d[i] + g.s[i] * (g.out[i] - 1) + 1,
                           g.s[i]) for i in range(n))

    blocks = _image_blocks(g, C, N, C * int(np.prod(padded)))
    if blocks:
        for b in blocks:
            nb = b.stop - b.start
            rows = np.ascontiguousarray(dyg[:, :, b]).reshape(G, F // G, -1)
            for off in _offsets(g):
                tap = np.matmul(_w_tap(w, off, G).transpose(0, 2, 1), rows)
                buf[(slice(None), b) + window(off)] += tap.reshape((C, nb) + g.out)
    else:
        wg = w.reshape(G, F // G, -1).transpose(0, 2, 1)
        dcols = np.matmul(wg, dyg.reshape(G, F // G, -1)).reshape((C,) + g.k + (N,) + g.out)
        for off in _offsets(g):
            buf[(slice(None), slice(None)) + window(off)] += dcols[(slice(None),) + off]
    crop = tuple(slice(g.pads[i][0], g.pads[i][0] + g.size[i]) for i in range(n))
    return np.ascontiguousarray(np.moveaxis(buf[(slice(None), slice(None)) + crop], 0, 1))


def conv_nd_dw(x: np.ndarray, dy_rows: np.ndarray, g: NdGeom,
               w_shape: Sequence[int]) -> np.ndarray:
    """dW [F, C/G, *k] = dY rows @ im2col(X)^T, per group (per kernel offset for a column
    matrix above ``_MAX_COLS``)."""
    G, N, C = g.groups, x.shape[0], x.shape[1]
    dyg = dy_rows.reshape(G, dy_rows.shape[0] // G, -1)
    if _image_blocks(g, C, N, 1):
        view = _cols_view(x, g)
        dw = np.empty((w_shape[0], w_shape[1]) + g.k, np.result_type(x, dy_rows))
        for off in _offsets(g):
            tap = view[(slice(None),) + off].reshape(G, C // G, -1)
            dw[(slice(None), slice(None)) + off] = np.matmul(
                dyg, tap.transpose(0, 2, 1)).reshape(w_shape[0], w_shape[1])
        return dw
    cols = _cols(x, g)
    dw = np.matmul(dyg, cols.reshape(G, cols.shape[0] // G, -1).transpose(0, 2, 1))
    return dw.reshape(w_shape)


# -- layout -------------------------------------------------------------------------------------
def _channels_last(op: str, data_format: str) -> bool:
    # fluid 1.8's kernels read the layout as channel-first / channel-last: conv3d tests
    # `data_format == "NHWC" || "NDHWC"`, conv3d_transpose maps the string through
    # StringToDataLayout (NCHW, NHWC, AnyLayout; fluid.layers writes NCHW / NHWC for 3-D)
    if data_format in ("NCDHW", "NCHW", "AnyLayout"):
        return False
    if data_format in ("NDHWC", "NHWC"):
        return True
    raise ValueError(f"{op}: data_format must be 'NCDHW' or 'NDHWC' (or fluid's 'NCHW' / "
                     f"'NHWC' for channel-first / channel-last), got {data_format!r}")


def _to_first(x: np.ndarray, last: bool) -> np.ndarray:
    return np.moveaxis(x, -1, 1) if last else x


def _from_first(x: np.ndarray, last: bool) -> np.ndarray:
    return np.ascontiguousarray(np.moveaxis(x, 1, -1)) if last else x


def _triple(v: Sequence[int], name: str, op: str) -> List[int]:
    v = [int(a) for a in v]
    if len(v) != 3:
        raise ValueError(f"{op}: {name} must have 3 values, got {v}")
    if min(v) < 1:      # strides and dilations: 0 would divide by zero, < 0 walks backwards
        raise ValueError(f"{op}: every value of {name} must be >= 1, got {v}")
    return v


class _Conv3DBase(_ConvBase):
    """conv2d's slots and gradient op (``<type>_grad`` reading Input, Filter, Output@GRAD);
    the 3-D ops' own extra attributes."""
    extra_attrs = _EXTRA


class _Conv3DGradBase(OpDef):
    inputs = ("Input", "Filter", "Output@GRAD")
    outputs = ("Input@GRAD?", "Filter@GRAD?")
    no_grad = True          # no double-grad rule for 3-D convolutions
    extra_attrs = _EXTRA

    def infer(self, *specs, **attrs):
        return {}


@register
class Conv3D(_Conv3DBase):
    """Output[n,f,z,y,x] = sum_{c,a,i,j} Input[n, g*C/G + c, z*sd + a*dd - pf, y*sh + i*dh - pt,
    x*sw + j*dw - pl] * Filter[f,c,a,i,j] (zero padding; g the group of f);
    dInput, dFilter by the adjoint."""
    type = "conv3d"

    def infer(self, Input, Filter, *, strides=(1, 1, 1), paddings=(0, 0, 0),
              padding_algorithm="EXPLICIT", groups=1, dilations=(1, 1, 1),
              data_format="NCDHW"):
        last = _channels_last(self.type, data_format)
        _check_conv_specs(self.type, Input, Filter, groups, last, False, dims=3)
        strides = _triple(strides, "strides", self.type)
        dilations = _triple(dilations, "dilations", self.type)
        size = Input.shape[1:4] if last else Input.shape[2:]
        pads, dil = _resolve(size, Filter.shape[2:], strides, paddings, dilations,
                             padding_algorithm, self.type)
        out = [_out_size(size[i], Filter.shape[2 + i], pads[i], strides[i], dil[i])
               for i in range(3)]
        if any(size[i] >= 0 and out[i] < 1 for i in range(3)):
            raise ValueError(f"{self.type}: output size {out} is not positive for input "
                             f"{list(Input.shape)}, filter {list(Filter.shape)}, paddings "
                             f"{pads}, strides {strides}, dilations {dil}")
        F = Filter.shape[0]
        shape = [Input.shape[0]] + out + [F] if last else [Input.shape[0], F] + out
        return {"Output": VarSpec(shape, Input.dtype)}

    def forward(self, Input, Filter, *, strides=[1, 1, 1], paddings=[0, 0, 0],
                padding_algorithm="EXPLICIT", groups=1, dilations=[1, 1, 1],
                data_format="NCDHW"):
        last = _channels_last(self.type, data_format)
        x = _to_first(Input, last)
        g = _geom(x.shape[2:], Filter.shape[2:], strides, paddings, dilations,
                  padding_algorithm, groups, self.type)
        return {"Output": _from_first(conv_nd_fwd(x, Filter, g), last)}


@register
class Conv3DGrad(_Conv3DGradBase):
    """Gradient of conv3d: dInput = conv3d^T(dOutput, Filter), dFilter = dOutput (x) Input."""
    type = "conv3d_grad"

    def forward(self, Input, Filter, dOutput, *, strides=[1, 1, 1], paddings=[0, 0, 0],
                padding_algorithm="EXPLICIT", groups=1, dilations=[1, 1, 1],
                data_format="NCDHW"):
        last = _channels_last(self.type, data_format)
        x, dy = _to_first(Input, last), _to_first(dOutput, last)
        g = _geom(x.shape[2:], Filter.shape[2:], strides, paddings, dilations,
                  padding_algorithm, groups, self.type)
        rows = _rows(dy)
        return LazyOutputs({
            "Input@GRAD": lambda: _from_first(conv_nd_dx(rows, Filter, g, x.shape[0]), last),
            "Filter@GRAD": lambda: conv_nd_dw(x, rows, g, Filter.shape)})


Conv3DGrad.forward_def = get_op_def("conv3d")


def _transpose_geom(size: Sequence[int], k: Sequence[int], output_size: Sequence[int],
                    strides, paddings, dilations, algorithm, groups, op: str) -> NdGeom:
    """The geometry of the conv3d whose adjoint this transposed conv is (its input = our
    output)."""
    n = len(k)
    pads, dil = nd_paddings(paddings, n, f"{op}: paddings"), [int(v) for v in dilations]
    if algorithm == "SAME":
        # fluid's UpdatePaddingAndDilation on the input sizes (the padding of ceil(in / s)
        # windows), as conv2d_transpose
        pads = []
        for i in range(n):
            n_out = c_div(size[i] + strides[i] - 1, strides[i])
            total = max((n_out - 1) * strides[i] + k[i] - size[i], 0)
            pads.append((total // 2, total - total // 2))
        dil = [1] * n
    elif algorithm == "VALID":
        pads = [(0, 0)] * n
    elif algorithm != "EXPLICIT":
        raise ValueError(f"{op}: padding_algorithm must be 'EXPLICIT', 'SAME' or 'VALID', got "
                         f"{algorithm!r}")
    natural = [(size[i] - 1) * strides[i] - pads[i][0] - pads[i][1] + dil[i] * (k[i] - 1) + 1
               for i in range(n)]
    out = list(natural)
    if output_size:
        if len(output_size) != n:
            raise ValueError(f"{op}: output_size must have {n} values, got "
                             f"{list(output_size)}")
        for i in range(n):
            want = int(output_size[i])
            if not natural[i] <= want < natural[i] + strides[i]:
                raise ValueError(f"{op}: output_size {list(output_size)} is not reachable from "
                                 f"input {list(size)}: along axis {i} it must lie in "
                                 f"[{natural[i]}, {natural[i] + strides[i] - 1}]")
            out[i] = want
    if any(o <= 0 for o in out):
        raise ValueError(f"{op}: the output size {out} must be positive (input {list(size)}, "
                         f"kernel {list(k)}, paddings {pads})")
    flat = [v for p in pads for v in p]
    return _geom(out, k, strides, flat, dil, "EXPLICIT", groups, op)


@register
class Conv3DTranspose(_Conv3DBase):
    """Output = conv3d^T(Input, Filter): the adjoint (input gradient) of conv3d with the same
    strides/paddings/dilations; Filter is [C_in, C_out/groups, kd, kh, kw];
    dInput = conv3d(dOutput, Filter), dFilter = Input (x) dOutput."""
    type = "conv3d_transpose"

    def infer(self, Input, Filter, *, output_size=(), strides=(1, 1, 1), paddings=(0, 0, 0),
              padding_algorithm="EXPLICIT", groups=1, dilations=(1, 1, 1),
              data_format="NCDHW"):
        last = _channels_last(self.type, data_format)
        _check_conv_specs(self.type, Input, Filter, groups, last, True, dims=3)
        strides = _triple(strides, "strides", self.type)
        dilations = _triple(dilations, "dilations", self.type)
        size = list(Input.shape[1:4] if last else Input.shape[2:])
        F = Filter.shape[1] * groups
        if any(s < 0 for s in size):
            out = list(output_size) if output_size else [-1, -1, -1]
        else:
            g = _transpose_geom(size, Filter.shape[2:], output_size, strides, paddings,
                                dilations, padding_algorithm, groups, self.type)
            out = list(g.size)
        shape = [Input.shape[0]] + out + [F] if last else [Input.shape[0], F] + out
        return {"Output": VarSpec(shape, Input.dtype)}

    def forward(self, Input, Filter, *, output_size=[], strides=[1, 1, 1],
                paddings=[0, 0, 0], padding_algorithm="EXPLICIT", groups=1,
                dilations=[1, 1, 1], data_format="NCDHW"):
        last = _channels_last(self.type, data_format)
        x = _to_first(Input, last)
        g = _transpose_geom(x.shape[2:], Filter.shape[2:], output_size, strides, paddings,
                            dilations, padding_algorithm, groups, self.type)
        return {"Output": _from_first(conv_nd_dx(_rows(x), Filter, g, x.shape[0]), last)}


@register
class Conv3DTransposeGrad(_Conv3DGradBase):
    """Gradient of conv3d_transpose: dInput = conv3d(dOutput, Filter), dFilter = the conv3d
    filter gradient with the roles of Input and dOutput swapped."""
    type = "conv3d_transpose_grad"

    def forward(self, Input, Filter, dOutput, *, output_size=[], strides=[1, 1, 1],
                paddings=[0, 0, 0], padding_algorithm="EXPLICIT", groups=1,
                dilations=[1, 1, 1], data_format="NCDHW"):
        last = _channels_last(self.type, data_format)
        x, dy = _to_first(Input, last), _to_first(dOutput, last)
        g = _transpose_geom(x.shape[2:], Filter.shape[2:], output_size, strides, paddings,
                            dilations, padding_algorithm, groups, self.type)
        return LazyOutputs({
            "Input@GRAD": lambda: _from_first(conv_nd_fwd(dy, Filter, g), last),
            "Filter@GRAD": lambda: conv_nd_dw(dy, _rows(x), g, Filter.shape)})


Conv3DTransposeGrad.forward_def = get_op_def("conv3d_transpose")
