"""More shape manipulation ops of fluid 1.8: unstack, reversing (flip, reverse), roll,
expand_as and meshgrid (padding and cropping are in pad_crop.py)."""
from __future__ import annotations

import numpy as np

from ..core.names import live
from ..core.registry import OpDef, VarSpec, register
from .tensor import emit_grad_op, norm_axis


def _live_outputs(g, targets) -> list:
    """Output names for a double-grad op writing a duplicable slot: entries nobody needs
    (``@EMPTY@``) get a throw-away temporary."""
    return [t if live(t) is not None else g.tmp("unused") for t in targets]


def _axes(op_type: str, axes, rank: int, what: str) -> list:
    """Normalised axes; ValueError when one is out of range or repeated."""
    out = [norm_axis(op_type, int(a), rank, f"{what} entry") for a in axes]
    if len(set(out)) != len(out):
        raise ValueError(f"{op_type}: {what} {list(axes)} names an axis twice")
    return out


# -- unstack ----------------------------------------------------------------------------------
@register
class Unstack(OpDef):
    """Y[i] = X taken at index i of ``axis`` (``num`` pieces);  dX = stack(dY, axis)."""
    type, inputs, outputs = "unstack", ("X",), ("Y*",)
    grad_uses = ("X",)

    def infer(self, X, *, axis=0, num=1):
        a = norm_axis("unstack", axis, len(X.shape))
        if X.shape[a] >= 0 and X.shape[a] != num:
            raise ValueError(f"unstack: num ({num}) must equal the size {X.shape[a]} of axis "
                             f"{axis} of X (shape {list(X.shape)})")
        piece = VarSpec(X.shape[:a] + X.shape[a + 1:], X.dtype)
        return {"Y": [piece] * num}

    def forward(self, X, *, axis=0, num=1):
        a = norm_axis("unstack", axis, X.ndim)
        return {"Y": [np.take(X, i, axis=a) for i in range(X.shape[a])]}

    def backward(self, X, dY, *, axis=0, num=1):
        a = norm_axis("unstack", axis, X.ndim)
        parts = [d if d is not None else np.zeros(X.shape[:a] + X.shape[a + 1:], X.dtype)
                 for d in dY]
        return {"X": np.stack(parts, axis=a)}

    def double_grad(self, g, **attrs):
        """unstack_grad stacks Y@GRAD (linear): its gradient unstacks ddX."""
        dd, targets = live(g.output_grad("X@GRAD")), g.input_grad("Y@GRAD")
        if dd is not None and targets is not None:
            g.append("unstack", {"X": dd}, {"Y": _live_outputs(g, targets)}, attrs)


# -- reversing and rolling ----------------------------------------------------------------------
class _FlipBase(OpDef):
    inputs, outputs = ("X",), ("Out",)
    grad_uses = ()
    attr = "dims"

    def infer(self, X, **attrs):
        _axes(self.type, attrs.get(self.attr, ()), len(X.shape), self.attr)
        return {"Out": X}

    def _flip(self, X, axes):
        return np.flip(X, _axes(self.type, axes, X.ndim, self.attr)).copy()

    def make_grad(self, g, **attrs):      # the gradient of a flip is the same flip
        if g.input_grad("X") is not None:
            g.append(self.type, {"X": g.output_grad("Out")}, {"Out": g.input_grad("X")}, attrs)


@register
class Flip(_FlipBase):
    """Out = X reversed along every axis in ``dims``;  dX = flip(dOut, dims)."""
    type = "flip"

    def forward(self, X, *, dims=[]):
        return {"Out": self._flip(X, dims)}


@register
class Reverse(_FlipBase):
    """Out = X reversed along every axis in ``axis``;  dX = reverse(dOut, axis)."""
    type, attr = "reverse", "axis"

    def forward(self, X, *, axis=[]):
        return {"Out": self._flip(X, axis)}


@register
class Roll(OpDef):
    """Out = X rolled by ``shifts[i]`` along ``dims[i]`` (elements leaving one end re-enter at
    the other; empty dims: roll the flattened tensor);  dX = roll(dOut, -shifts, dims).
    ``ShiftsTensor`` (Paddle 2.x's, an integer tensor), when given, holds the shifts."""
    type, inputs, outputs = "roll", ("X", "ShiftsTensor?"), ("Out",)
    grad_uses = ()

    def infer(self, X, ShiftsTensor=None, *, shifts=(), dims=()):
        n = len(shifts) if ShiftsTensor is None else \
            (ShiftsTensor.shape[0] if len(ShiftsTensor.shape) == 1 else -1)
        if dims and n != -1 and len(dims) != n:
            raise ValueError(f"roll: shifts {list(shifts) if ShiftsTensor is None else n} and "
                             f"dims {list(dims)} must have the same length")
        if not dims and n not in (1, -1):
            raise ValueError(f"roll: without dims, shifts must hold one value (the flattened "
                             f"tensor is rolled), but received {list(shifts)}")
        for d in dims:
            norm_axis("roll", int(d), len(X.shape), "dims entry")
        return {"Out": X}

    def forward(self, X, ShiftsTensor=None, *, shifts=[], dims=[]):
        if ShiftsTensor is not None:
            shifts = [int(v) for v in np.asarray(ShiftsTensor).reshape(-1)]
            if len(shifts) != (len(dims) or 1):
                raise ValueError(f"roll: ShiftsTensor holds {len(shifts)} shift(s) but dims is "
                                 f"{list(dims)}; give one shift per dim (one without dims)")
        if not dims:
            return {"Out": np.roll(X.reshape(-1), int(shifts[0])).reshape(X.shape)}
        return {"Out": np.roll(X, [int(s) for s in shifts], [int(d) for d in dims])}

    def make_grad(self, g, *, shifts=[], dims=[], **_):
        if g.input_grad("X") is None:
            return
        tensor = g.input("ShiftsTensor")
        if tensor:                     # the shifts of the run, negated
            neg = g.tmp("shifts")
            g.append("scale", {"X": tensor}, {"Out": neg}, scale=-1.0)
            g.append("roll", {"X": g.output_grad("Out"), "ShiftsTensor": neg},
                     {"Out": g.input_grad("X")}, shifts=list(shifts), dims=list(dims))
        else:
            g.append("roll", {"X": g.output_grad("Out")}, {"Out": g.input_grad("X")},
                     shifts=[-int(s) for s in shifts], dims=list(dims))


# -- broadcasting helpers ---------------------------------------------------------------------
@register
class ExpandAs(OpDef):
    """Out = tile(X, target.shape / X.shape) (every target dim a multiple of X's);
    dX = dOut summed over the tiles."""
    type, inputs, outputs = "expand_as", ("X", "target_tensor"), ("Out",)
    grad_uses = ("X", "target_tensor")

    def infer(self, X, target_tensor):
        t = target_tensor.shape
        if len(t) != len(X.shape):
            raise ValueError(f"expand_as: target_tensor must have the rank of X, but X has shape "
                             f"{list(X.shape)} and target_tensor {list(t)}")
        for i, (a, b) in enumerate(zip(X.shape, t)):
            if a > 0 and b >= 0 and b % a:
                raise ValueError(f"expand_as: target_tensor.shape[{i}] = {b} is not a multiple "
                                 f"of X.shape[{i}] = {a}")
        return {"Out": VarSpec(t, X.dtype, X.lod_level)}

    @staticmethod
    def _times(X, target):
        times = []
        for i, (a, b) in enumerate(zip(X.shape, target.shape)):
            if a == 0 or b % a:
                raise ValueError(f"expand_as: target_tensor.shape[{i}] = {b} is not a multiple "
                                 f"of X.shape[{i}] = {a}")
            times.append(b // a)
        return times

    def forward(self, X, target_tensor):
        return {"Out": np.tile(X, self._times(X, target_tensor))}

    def backward(self, X, target_tensor, dOut):
        inter = []
        for t, d in zip(self._times(X, target_tensor), X.shape):
            inter += [t, d]
        d = dOut.reshape(inter).sum(axis=tuple(range(0, 2 * X.ndim, 2)))
        return {"X": d.reshape(X.shape)}

    def make_grad(self, g, **attrs):
        emit_grad_op(g, "expand_as", attrs, uses=self.grad_uses)

    def double_grad(self, g, **attrs):
        """expand_as_grad sums the tiles of Out@GRAD (linear): its gradient tiles ddX."""
        dd, target = live(g.output_grad("X@GRAD")), g.input_grad("Out@GRAD")
        if dd is not None and target is not None:
            g.append("expand_as", {"X": dd, "target_tensor": g.input("target_tensor")},
                     {"Out": target}, attrs)


@register
class Meshgrid(OpDef):
    """Out[i] = X[i] broadcast along dim i of the grid shaped (len(X[0]), ..., len(X[k-1]))
    ("ij" indexing);  dX[i] = dOut[i] summed over every other dim."""
    type, inputs, outputs = "meshgrid", ("X*",), ("Out*",)
    grad_uses = ("X",)

    def infer(self, X):
        if not X:
            raise ValueError("meshgrid: X is empty; pass at least one 1-D Variable")
        for i, x in enumerate(X):
            if len(x.shape) != 1:
                raise ValueError(f"meshgrid: every input must be 1-D, but input {i} has shape "
                                 f"{list(x.shape)}")
        shape = [x.shape[0] for x in X]
        return {"Out": [VarSpec(shape, x.dtype) for x in X]}

    def forward(self, X):
        return {"Out": [np.array(g) for g in np.meshgrid(*X, indexing="ij")]}

    def double_grad(self, g, **attrs):
        """meshgrid_grad sums each Out@GRAD over the other dims (linear): its gradient is the
        meshgrid of ddX (zeros for inputs without one)."""
        dds, targets = g.output_grad("X@GRAD"), g.input_grad("Out@GRAD")
        if not dds or targets is None or all(live(d) is None for d in dds):
            return
        parts = []
        for d, x in zip(dds, g.input("X")):
            if live(d) is None:
                d = g.tmp("zeros")
                g.append("fill_zeros_like", {"X": x}, {"Out": d})
            parts.append(d)
        g.append("meshgrid", {"X": parts}, {"Out": _live_outputs(g, targets)}, attrs)

    def backward(self, X, dOut):
        grads = []
        for i, (x, d) in enumerate(zip(X, dOut)):
            if d is None:
                grads.append(np.zeros_like(x))
                continue
            other = tuple(a for a in range(len(X)) if a != i)
            grads.append(d.sum(axis=other).reshape(x.shape))
        return {"X": grads}



# -- triangles and diagonals --------------------------------------------------------------------
@register
class TrilTriu(OpDef):
    """Out = X with the entries above (``lower``: tril) or below (triu) the ``diagonal``-th
    diagonal of its last two dims zeroed;  dOut masked the same way gives dX."""
    type, inputs, outputs = "tril_triu", ("X",), ("Out",)
    grad_uses = ()

    def infer(self, X, *, diagonal=0, lower=True):
        if len(X.shape) < 2:
            raise ValueError(f"tril_triu: X must have at least 2 dims, but its shape is "
                             f"{list(X.shape)}")
        return {"Out": X}

    def forward(self, X, *, diagonal=0, lower=True):
        return {"Out": np.tril(X, diagonal) if lower else np.triu(X, diagonal)}

    def make_grad(self, g, **attrs):       # masking is linear: the gradient is the same mask
        if g.input_grad("X") is not None:
            g.append("tril_triu", {"X": g.output_grad("Out")}, {"Out": g.input_grad("X")},
                     attrs)


def _diag_plane(op_type: str, rank: int, offset: int, dim1: int, dim2: int):
    """(d1, d2) of the output (rank + 1 dims) holding the diagonal; ValueError if invalid."""
    d1 = norm_axis(op_type, dim1, rank + 1, "dim1")
    d2 = norm_axis(op_type, dim2, rank + 1, "dim2")
    if d1 == d2:
        raise ValueError(f"{op_type}: dim1 ({dim1}) and dim2 ({dim2}) must name different "
                         f"dims of the output (rank {rank + 1})")
    return d1, d2


@register
class DiagEmbed(OpDef):
    """Out[..., i, i + offset] (in the plane of dims dim1 and dim2) = Input[..., i]: a new
    square plane of side n + |offset| whose diagonal is the last dim of Input, zeros
    elsewhere;  dInput = that diagonal of dOut."""
    type, inputs, outputs = "diag_embed", ("Input",), ("Out",)
    grad_uses = ("Input",)

    def infer(self, Input, *, offset=0, dim1=-2, dim2=-1):
        d1, d2 = _diag_plane("diag_embed", len(Input.shape), offset, dim1, dim2)
        n = Input.shape[-1]
        side = n + abs(offset) if n >= 0 else -1
        rest = list(Input.shape[:-1])
        out = []
        for i in range(len(rest) + 2):
            out.append(side if i in (d1, d2) else rest.pop(0))
        return {"Out": VarSpec(out, Input.dtype)}

    @staticmethod
    def _index(shape, offset, d1, d2):
        """Index tuple of the diagonal entries in an output of rank len(shape) + 1."""
        n, lead = shape[-1], shape[:-1]
        rows = np.arange(n) + max(-offset, 0)
        cols = np.arange(n) + max(offset, 0)
        grids = np.meshgrid(*[np.arange(d) for d in lead], np.arange(n), indexing="ij")
        idx, k = [], 0
        for i in range(len(shape) + 1):
            if i == d1:
                idx.append(rows[grids[-1]])
            elif i == d2:
                idx.append(cols[grids[-1]])
            else:
                idx.append(grids[k])
                k += 1
        return tuple(idx)

    def forward(self, Input, *, offset=0, dim1=-2, dim2=-1):
        d1, d2 = _diag_plane("diag_embed", Input.ndim, offset, dim1, dim2)
        side = Input.shape[-1] + abs(offset)
        shape = [side if i in (d1, d2) else None for i in range(Input.ndim + 1)]
        lead = iter(Input.shape[:-1])
        shape = [s if s is not None else next(lead) for s in shape]
        out = np.zeros(shape, dtype=Input.dtype)
        out[self._index(Input.shape, offset, d1, d2)] = Input
        return {"Out": out}

    def backward(self, Input, dOut, *, offset=0, dim1=-2, dim2=-1):
        d1, d2 = _diag_plane("diag_embed", Input.ndim, offset, dim1, dim2)
        return {"Input": dOut[self._index(Input.shape, offset, d1, d2)]}

    def double_grad(self, g, **attrs):
        """diag_embed_grad reads a diagonal of Out@GRAD (linear): its gradient embeds ddInput."""
        dd, target = live(g.output_grad("Input@GRAD")), g.input_grad("Out@GRAD")
        if dd is not None and target is not None:
            g.append("diag_embed", {"Input": dd}, {"Out": target}, attrs)


# -- label smoothing ----------------------------------------------------------------------------
@register
class LabelSmooth(OpDef):
    """Out = (1 - epsilon) * X + epsilon * PriorDist (PriorDist: [1, K], broadcast over rows;
    uniform 1/K when absent);  dX = (1 - epsilon) * dOut."""
    type, inputs, outputs = "label_smooth", ("X", "PriorDist?"), ("Out",)
    grad_uses = ()

    def infer(self, X, PriorDist, *, epsilon=0.0):
        if PriorDist is not None and PriorDist.shape[-1] not in (X.shape[-1], -1):
            raise ValueError(f"label_smooth: PriorDist must have X's last dim "
                             f"({X.shape[-1]}), but its shape is {list(PriorDist.shape)}")
        return {"Out": X}

    def forward(self, X, PriorDist, *, epsilon=0.0):
        prior = PriorDist if PriorDist is not None else 1.0 / X.shape[-1]
        return {"Out": ((1 - epsilon) * X + epsilon * prior).astype(X.dtype)}

    def make_grad(self, g, *, epsilon=0.0, **_):
        if g.input_grad("X") is not None:
            g.append("scale", {"X": g.output_grad("Out")}, {"Out": g.input_grad("X")},
                     scale=1.0 - epsilon)
