"""Loss ops: cross_entropy (legacy), cross_entropy2, softmax_with_cross_entropy,
sigmoid_cross_entropy_with_logits. (square_error_cost is a layer: elementwise_sub + square.)

Hard labels are int64 with a trailing (class-axis) dim of 1; rows whose label equals
``ignore_index`` get loss 0 and no gradient. Kernels are vectorized over the batch.

NaN and Inf propagate as in fluid's kernels. The only masking is fluid's own: ignored rows give
0 whatever their input, and the cross-entropy terms go through ``TolerableValue`` (+-inf from
-log(0) or -log(inf) becomes +-1e20, so a 0 soft label times log(0) adds 0); a NaN is never
replaced.
"""
from __future__ import annotations

import functools
from typing import Dict, Tuple

import numpy as np

from ..core import shape as S
from ..core import threads
from ..core.dtypes import INTS, to_numpy_dtype
from ..core.registry import OpDef, VarSpec, register
from .activation import _big, fluid_softmax
from .tensor import emit_grad_op, norm_axis

_BIG = 1e20   # fluid's TolerableValue bound (kApproInf) for -log(0)


def _tolerable(y: np.ndarray) -> np.ndarray:
    """fluid's ``TolerableValue``: +-inf -> +-1e20 (+-max for float16, where 1e20 overflows, as
    fluid's float16 specialization); NaN and finite values pass through unchanged."""
    inf = np.isinf(y)
    if not inf.any():
        return y
    bound = min(_BIG, float(np.finfo(y.dtype).max))
    return np.where(inf, np.copysign(y.dtype.type(bound), y), y)


def _neg_log(p: np.ndarray) -> np.ndarray:
    """-TolerableValue(log(p)), fluid's cross-entropy term: -log(0) = 1e20 (so a 0 soft label
    times it stays 0), but log of a NaN or a negative "probability" is NaN and stays NaN."""
    with np.errstate(divide="ignore", invalid="ignore"):
        y = -np.log(p)
    return _tolerable(y)            # (in p's dtype: -log and _tolerable keep it)


def _hard_labels(op_type: str, label: np.ndarray, n_class: int, ignore_index: int):
    """(labels with ignored entries replaced by 0, ignored mask or None); ValueError naming the
    op for a label outside [0, n_class)."""
    if _all_valid(label, n_class, ignore_index):
        return label, None          # the common case: every label valid, none ignored
    lo, hi = label.min(initial=0), label.max(initial=0)
    if 0 <= lo and hi < n_class and not lo <= ignore_index <= hi:
        return label, None          # valid, and an in-range ignore_index matches none
    ign = label == ignore_index
    any_ign = bool(ign.any())
    bad = (label < 0) | (label >= n_class)
    if any_ign:
        bad &= ~ign
    if bad.any():
        v = label[bad][0]
        raise ValueError(f"{op_type}: label {v} is out of range [0, {n_class}) (ignore_index="
                         f"{ignore_index}); labels must be class indices")
    if any_ign:
        return np.where(ign, label.dtype.type(0), label), ign
    return label, None


def _all_valid(label: np.ndarray, n_class: int, ignore_index: int) -> bool:
    """Every label in [0, n_class) and none equal to ``ignore_index``, decided with one
    reduction: the max of the labels viewed as unsigned (a negative label wraps to a huge value),
    so the check costs one pass, not a min and a max. False also for what it cannot decide that
    way (an ``ignore_index`` inside the class range, an empty or non-integer label): the caller
    then takes the general path, which finds ignored rows and names a bad label."""
    kind = label.dtype.kind
    if label.size == 0 or 0 <= ignore_index < n_class or kind not in "iu":
        return False
    if kind == "i":
        label = label.view(_UNSIGNED[label.dtype.itemsize])
    return int(np.maximum.reduce(label, axis=None)) < n_class


_UNSIGNED = {1: np.dtype(np.uint8), 2: np.dtype(np.uint16), 4: np.dtype(np.uint32),
             8: np.dtype(np.uint64)}
_OFFSETS: Dict[Tuple[int, int], np.ndarray] = {}   # (rows, classes) -> arange(rows) * classes


def _flat_index(idx: np.ndarray, n_class: int) -> np.ndarray:
    """Flat positions ``row * n_class + idx[row]`` of the labelled entries of a C-contiguous
    ``(..., n_class)`` array (``idx``: ``(..., 1)`` valid class indices). One 1-D gather or
    scatter at these positions is ~2x cheaper than ``take_along_axis`` or 2-D fancy indexing
    on small batches; the row offsets are cached per shape (read-only)."""
    rows = idx.size
    off = _OFFSETS.get((rows, n_class))
    if off is None:
        off = np.arange(rows, dtype=np.int64) * n_class
        off.flags.writeable = False
        if len(_OFFSETS) < 256:         # a bounded cache: shapes vary little in practice
            _OFFSETS[(rows, n_class)] = off
    flat = idx.ravel()
    if flat.dtype != np.int64:      # int64 + uint64 would promote to float64
        flat = flat.astype(np.int64)
    return off + flat


def _hard_2d(x: VarSpec, label: VarSpec, attrs: Dict[str, object]) -> bool:
    """Hard int64 labels ``[N, 1]`` for 2-D float32/float64 ``x`` on its last axis: the case
    the loss ops' fast paths take."""
    return (x is not None and label is not None and len(x.shape) == 2 and
            len(label.shape) == 2 and not attrs.get("soft_label", False) and
            attrs.get("axis", -1) in (-1, 1) and to_numpy_dtype(label.dtype) == np.int64 and
            to_numpy_dtype(x.dtype) in (np.float32, np.float64))


def _squeezed_label(X: VarSpec, Label: VarSpec, soft: bool) -> bool:
    """fluid's CrossEntropyOpBase also takes hard labels of rank N-1 (X [N, C], Label [N]):
    Y then has the label's shape."""
    return not soft and len(Label.shape) == len(X.shape) - 1 >= 1 and all(
        S.dims_match(a, b) for a, b in zip(X.shape[:-1], Label.shape))


def _with_class_dim(Label: np.ndarray, X: np.ndarray) -> np.ndarray:
    """A rank N-1 hard label as [..., 1] (a view)."""
    return Label[..., None] if Label.ndim == X.ndim - 1 else Label


def _check_label(op_type: str, X: VarSpec, Label: VarSpec, soft: bool, axis: int = -1,
                 squeezed_ok: bool = False) -> None:
    if squeezed_ok and _squeezed_label(X, Label, soft):
        if Label.dtype not in INTS:
            raise ValueError(f"{op_type}: hard labels must be an integer tensor (int64), got "
                             f"{Label.dtype}")
        return
    if len(Label.shape) != len(X.shape):
        hint = (" or, for hard labels, the input's shape without its last dim"
                if squeezed_ok and not soft else "")
        raise ValueError(f"{op_type}: Label {list(Label.shape)} must have the rank of the input "
                         f"{list(X.shape)}{hint}")
    a = norm_axis(op_type, axis, len(X.shape))
    for i, (d, e) in enumerate(zip(X.shape, Label.shape)):
        want = d if (soft or i != a) else 1
        if not S.dims_match(want, e):
            kind = "the input's shape" if soft else f"the input's shape with dim {a} = 1"
            raise ValueError(f"{op_type}: Label shape {list(Label.shape)} must equal {kind} "
                             f"(input {list(X.shape)}, soft_label={soft})")
    if not soft and Label.dtype not in INTS:
        raise ValueError(f"{op_type}: hard labels must be an integer tensor (int64), got "
                         f"{Label.dtype}; cast with .astype('int64') or pass soft_label=True")


@register
class CrossEntropy2(OpDef):
    """Y = -log(X[label]) over the last dim (hard labels; Y, MatchX = X[label] have last dim 1;
    ignored rows give 0);  dX = -dY / MatchX at the label position."""
    type, inputs, outputs = "cross_entropy2", ("X", "Label"), ("Y", "XShape", "MatchX")
    grad_uses = ("XShape", "Label", "MatchX")

    def infer(self, X, Label, *, ignore_index=-100):
        _check_label(self.type, X, Label, soft=False, squeezed_ok=True)
        y = VarSpec(tuple(X.shape[:-1]) + (1,), X.dtype, X.lod_level)
        out = VarSpec(Label.shape, X.dtype, X.lod_level) if _squeezed_label(X, Label, False) \
            else y
        return {"Y": out, "MatchX": y, "XShape": VarSpec((0,) + tuple(X.shape), X.dtype)}

    def forward(self, X, Label, *, ignore_index=-100):
        lab, ign = _hard_labels(self.type, _with_class_dim(Label, X), X.shape[-1], ignore_index)
        match = np.take_along_axis(X, lab, axis=-1)
        if ign is not None:
            match = np.where(ign, X.dtype.type(0), match)
        y = _neg_log(match)
        if ign is not None:
            y[ign] = 0
        return {"Y": y.reshape(Label.shape),            # [..., 1], or a rank N-1 label's shape
                "XShape": np.empty((0,) + X.shape, X.dtype), "MatchX": match}

    def backward(self, XShape, Label, MatchX, dY, dXShape=None, dMatchX=None, *,
                 ignore_index=-100):
        shape = XShape.shape[1:]
        dx = np.zeros(shape, dtype=dY.dtype)
        if Label.ndim == len(shape) - 1:            # a rank N-1 label: Y, dY have its shape
            Label, dY = Label[..., None], dY.reshape(Label.shape + (1,))
        lab, ign = _hard_labels(self.type, Label, shape[-1], ignore_index)
        with np.errstate(divide="ignore", invalid="ignore"):
            g = -dY / MatchX
        if ign is not None:
            g = np.where(ign, g.dtype.type(0), g)
        np.put_along_axis(dx, lab, g, axis=-1)         # (cast to dx's dtype, dY's)
        return {"X": dx}

    def make_grad(self, g, **attrs):
        emit_grad_op(g, self.type, attrs, uses=self.grad_uses, out_grads=("Y",))


@register
class CrossEntropy(OpDef):
    """Legacy cross_entropy on probabilities X: hard labels Y = -log(X[label]) (ignored rows 0),
    soft labels Y = -sum(Label * log(X)) over the last dim;  dX = -dY / X at the label (hard)
    or -dY * Label / X (soft); soft labels also get dLabel = -dY * log(X)."""
    type, inputs, outputs = "cross_entropy", ("X", "Label"), ("Y",)

    def infer(self, X, Label, *, soft_label=False, ignore_index=-100):
        _check_label(self.type, X, Label, soft=soft_label, squeezed_ok=True)
        if _squeezed_label(X, Label, soft_label):          # fluid: Y has the label's shape
            return {"Y": VarSpec(Label.shape, X.dtype, X.lod_level)}
        return {"Y": VarSpec(tuple(X.shape[:-1]) + (1,), X.dtype, X.lod_level)}

    def forward(self, X, Label, *, soft_label=False, ignore_index=-100):
        if soft_label:
            return {"Y": np.sum(Label * _neg_log(X), axis=-1, keepdims=True, dtype=X.dtype)}
        lab, ign = _hard_labels(self.type, _with_class_dim(Label, X), X.shape[-1], ignore_index)
        y = _neg_log(np.take_along_axis(X, lab, axis=-1))
        if ign is not None:
            y[ign] = 0
        return {"Y": y.reshape(Label.shape)}           # [..., 1], or a rank N-1 label's shape

    def backward(self, X, Label, dY, *, soft_label=False, ignore_index=-100):
        with np.errstate(divide="ignore", invalid="ignore"):
            if soft_label:
                return {"X": (-dY * Label / X).astype(dY.dtype, copy=False),
                        "Label": (dY * _neg_log(X)).astype(dY.dtype, copy=False)}
            if Label.ndim == X.ndim - 1:            # a rank N-1 label: Y, dY have its shape
                Label, dY = Label[..., None], dY.reshape(Label.shape + (1,))
            lab, ign = _hard_labels(self.type, Label, X.shape[-1], ignore_index)
            g = -dY / np.take_along_axis(X, lab, axis=-1)
        if ign is not None:
            g = np.where(ign, g.dtype.type(0), g)
        dx = np.zeros(X.shape, dtype=dY.dtype)
        np.put_along_axis(dx, lab, g, axis=-1)         # (cast to dx's dtype, dY's)
        return {"X": dx}

    def make_grad(self, g, *, soft_label=False, ignore_index=-100, **attrs):
        attrs = dict(attrs, soft_label=soft_label, ignore_index=ignore_index)
        emit_grad_op(g, self.type, attrs, uses=("X", "Label"), out_grads=("Y",),
                     in_grads=("X", "Label") if soft_label else ("X",))


@register
class SoftmaxWithCrossEntropy(OpDef):
    """Softmax = softmax(Logits, axis) (fluid's, shifted logits clipped at -64); Loss =
    -log(Softmax[label]) (hard; ignored rows 0) or -sum(Label * log(Softmax)) (soft), the logs
    through TolerableValue as fluid's CrossEntropyFunctor;
    dLogits = (Softmax - onehot(label)) * dLoss (soft: Softmax - Label), and for soft labels
    dLabel = -log(Softmax) * dLoss."""
    type, inputs, outputs = "softmax_with_cross_entropy", ("Logits", "Label"), ("Softmax", "Loss")
    grad_uses = ("Label", "Softmax")

    def infer(self, Logits, Label, *, soft_label=False, ignore_index=-100, axis=-1):
        _check_label(self.type, Logits, Label, soft=soft_label, axis=axis)
        a = norm_axis(self.type, axis, len(Logits.shape))
        loss = tuple(1 if i == a else d for i, d in enumerate(Logits.shape))
        return {"Softmax": Logits, "Loss": VarSpec(loss, Logits.dtype, Logits.lod_level)}

    def forward(self, Logits, Label, *, soft_label=False, ignore_index=-100,
                numeric_stable_mode=True, axis=-1):
        # fluid 1.8's CPU kernel: SoftmaxFunctor (shifted logits clipped at -64), then
        # CrossEntropyFunctor on those probabilities: -TolerableValue(log(p)), so the loss of a
        # badly wrong class is at most ~64 + log(classes) and its gradient finite
        last = axis in (-1, Logits.ndim - 1)
        x = Logits if last else np.moveaxis(Logits, axis, -1)
        lab = Label if last else np.moveaxis(Label, axis, -1)
        softmax = fluid_softmax(x)
        if soft_label:
            loss = np.sum(lab * _neg_log(softmax), axis=-1, keepdims=True, dtype=x.dtype)
        else:
            idx, ign = _hard_labels(self.type, lab, x.shape[-1], ignore_index)
            # gather softmax[..., idx] with one flat take (softmax is fresh and C-ordered)
            loss = _neg_log(softmax.ravel()[_flat_index(idx, softmax.shape[-1])]
                            .reshape(idx.shape))
            if ign is not None:
                loss[ign] = 0
        if not last:
            softmax, loss = np.moveaxis(softmax, -1, axis), np.moveaxis(loss, -1, axis)
        return {"Softmax": softmax, "Loss": loss}

    def lower(self, in_specs, attrs):
        """Hard labels on the last axis of 2-D logits (a classifier's loss): ``forward``'s
        operations without its dispatch; other labels take ``forward``."""
        logits, label = in_specs[0], in_specs[1]
        if not _hard_2d(logits, label, attrs):
            return None
        general = functools.partial(self.forward, **attrs)
        ignore_index = attrs.get("ignore_index", -100)
        log = np.log

        def fast(Logits, Label):
            c = Logits.shape[1]
            if not _all_valid(Label, c, ignore_index) or Logits.ndim != 2:
                return general(Logits, Label)
            softmax = fluid_softmax(Logits)         # (row blocks in parallel when large)
            p = softmax.ravel()[_flat_index(Label, c)].reshape(Label.shape)
            # p >= exp(-64) / c > 0 (the clip above): no log(0) here, nothing to silence
            loss = -log(p)
            return {"Softmax": softmax, "Loss": _tolerable(loss)}
        return fast

    def lower_grad(self, in_specs, attrs, wanted):
        """Hard labels on the last axis of 2-D logits: ``backward``'s operations without its
        dispatch."""
        label, softmax = in_specs[0], in_specs[1]
        if wanted != {"Logits"} or not _hard_2d(softmax, label, attrs):
            return None
        general = functools.partial(self.backward, **attrs)
        ignore_index = attrs.get("ignore_index", -100)

        def fast(Label, Softmax, dSoftmax, dLoss):     # (the grad op's slot order)
            c = Softmax.shape[1]
            if (not _all_valid(Label, c, ignore_index) or Softmax.ndim != 2 or
                    dSoftmax is not None or not Softmax.flags.c_contiguous):
                return general(Label, Softmax, dLoss, dSoftmax)
            if Softmax.dtype == dLoss.dtype and _big(Softmax):    # row blocks in parallel
                dx = np.empty(Softmax.shape, Softmax.dtype)
                threads.parallel_ranges(lambda lo, hi: np.multiply(
                    Softmax[lo:hi], dLoss[lo:hi], out=dx[lo:hi]), Softmax.shape[0])
            else:
                dx = Softmax * dLoss
            flat = dx.ravel()
            flat[_flat_index(Label, c)] -= dLoss.ravel()     # p * dl - dl at the label
            return {"Logits": dx.astype(dLoss.dtype, copy=False)}
        return fast

    def backward(self, Label, Softmax, dLoss, dSoftmax=None, *, soft_label=False,
                 ignore_index=-100, numeric_stable_mode=True, axis=-1):
        last = axis in (-1, Softmax.ndim - 1)
        p = Softmax if last else np.moveaxis(Softmax, axis, -1)
        lab = Label if last else np.moveaxis(Label, axis, -1)
        dl = dLoss if last else np.moveaxis(dLoss, axis, -1)
        out = {}
        if soft_label:
            dx = (p - lab) * dl
            out["Label"] = (_neg_log(p) * dl).astype(dLoss.dtype, copy=False)
        else:
            c = p.shape[-1]
            idx, ign = _hard_labels(self.type, lab, c, ignore_index)
            dx = np.ascontiguousarray(p * dl)      # a fresh array (a no-op unless axis != -1)
            flat = dx.ravel()                      # a view: dx is C-contiguous
            flat[_flat_index(idx, c)] -= dl.ravel()     # p * dl - dl at the label
            if ign is not None:
                dx.reshape(-1, c)[ign.ravel()] = 0
        if not last:
            dx = np.moveaxis(dx, -1, axis)
            if "Label" in out:
                out["Label"] = np.moveaxis(out["Label"], -1, axis)
        out["Logits"] = dx.astype(dLoss.dtype, copy=False)
        return out

    def make_grad(self, g, *, soft_label=False, **attrs):
        attrs = dict(attrs, soft_label=soft_label)
        emit_grad_op(g, self.type, attrs, uses=("Label", "Softmax"), out_grads=("Loss",),
                     in_grads=("Logits", "Label") if soft_label else ("Logits",))


@register
class SigmoidCrossEntropyWithLogits(OpDef):
    """Out = max(X, 0) - X * Label + log(1 + exp(-|X|)) elementwise (0 where Label ==
    ignore_index; ``normalize`` divides by the number of non-ignored entries);
    dX = (sigmoid(X) - Label) * dOut, dLabel = -X * dOut (same masking/normalization)."""
    type, inputs, outputs = "sigmoid_cross_entropy_with_logits", ("X", "Label"), ("Out",)

    def infer(self, X, Label, *, ignore_index=-100, normalize=False):
        if len(X.shape) != len(Label.shape) or not all(
                S.dims_match(a, b) for a, b in zip(X.shape, Label.shape)):
            raise ValueError(f"{self.type}: Label shape {list(Label.shape)} must equal X's shape "
                             f"{list(X.shape)}")
        return {"Out": X}

    @staticmethod
    def _mask_norm(Label, ignore_index, normalize, dtype):
        keep = Label != ignore_index
        all_kept = bool(keep.all())
        norm = None
        if normalize:
            norm = dtype.type(max(float(np.count_nonzero(keep)), 1e-5))
        return (None if all_kept else keep), norm

    def forward(self, X, Label, *, ignore_index=-100, normalize=False):
        # fluid's functor, literally: max(x, 0) - x * label + log(1 + exp(-|x|))
        one = X.dtype.type(1)
        out = np.maximum(X, 0) - X * Label + np.log(one + np.exp(-np.abs(X)))
        keep, norm = self._mask_norm(Label, ignore_index, normalize, X.dtype)
        if keep is not None:
            out = np.where(keep, out, X.dtype.type(0))
        if norm is not None:
            out = out / norm
        return {"Out": out.astype(X.dtype, copy=False)}

    def backward(self, X, Label, dOut, *, ignore_index=-100, normalize=False):
        one = X.dtype.type(1)
        with np.errstate(over="ignore"):             # fluid's 1 / (1 + exp(-x))
            sig = one / (one + np.exp(-X))
        dx, dlab = (sig - Label) * dOut, -X * dOut
        keep, norm = self._mask_norm(Label, ignore_index, normalize, X.dtype)
        if keep is not None:
            dx, dlab = np.where(keep, dx, dx.dtype.type(0)), np.where(keep, dlab, dlab.dtype.type(0))
        if norm is not None:
            dx, dlab = dx / norm, dlab / norm
        return {"X": dx.astype(dOut.dtype, copy=False), "Label": dlab.astype(dOut.dtype,
                                                                             copy=False)}
