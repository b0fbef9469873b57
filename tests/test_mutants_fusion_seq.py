"""Tests written from mutation testing (issue 28, docs/mutation.md) for
``fluidlite/ops/fusion_seq.py``: fusion_seqpool_concat, fusion_seqpool_cvm_concat,
fusion_seqexpand_concat_fc, fusion_seqconv_eltadd_relu, fusion_repeated_fc_relu,
fusion_squared_mat_sub and fused_embedding_seq_pool, their kernels called directly with their
LoD, against float64 loops written here from the unfused chains fluid 1.8's fuse passes
replace (sequence_pool, cvm, sequence_expand + concat + fc, sequence_conv + add + relu, fc +
relu, the squared-mat-sub formula, lookup_table + sequence_pool SUM) -- empty sequences,
two-level LoDs, float32 kept -- and their build-time rules and error messages."""
import re

import numpy as np
import pytest

from fluidlite.core.dtypes import VarType
from fluidlite.core.registry import VarSpec, get_op_def


def op(name):
    return get_op_def(name)


def offsets(lens):
    return tuple(int(v) for v in np.concatenate([[0], np.cumsum(list(lens))]))


def rand(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def spec(shape, dtype="float32", lod_level=0):
    return VarSpec(shape, dtype, lod_level)


# -- fusion_seqpool_concat / fusion_seqpool_cvm_concat ---------------------------------------
def ref_pool(x, lens, kind):
    """fluid's jit SeqPool per sequence (an empty sequence gives zeros)."""
    out, at = [], 0
    for n in lens:
        s = x[at:at + n].sum(0) if n else np.zeros(x.shape[1])
        out.append(s / n if kind == "AVERAGE" and n else s / np.sqrt(n) if kind == "SQRT" and n
                   else s)
        at += n
    return np.array(out).reshape(len(lens), x.shape[1])


def ref_cvm(p):
    """fluid's cvm (use_cvm) on a pooled [N, w] block: log(show + 1), log(click + 1) - that."""
    q = p.copy()
    q[:, 0] = np.log(p[:, 0] + 1)
    q[:, 1] = np.log(p[:, 1] + 1) - q[:, 0]
    return q


LENS0, LENS1, LENS2 = [3, 0, 2, 1], [1, 2, 0, 4], [0, 0, 1, 1]


def _three(w=3, dtype=np.float64):
    xs = [np.abs(rand((sum(ls), w), k)).astype(dtype) for k, ls in enumerate((LENS0, LENS1,
                                                                             LENS2))]
    lods = [(offsets(ls),) for ls in (LENS0, LENS1, LENS2)]
    return xs, lods


@pytest.mark.parametrize("kind", ["SUM", "AVERAGE", "SQRT"])
@pytest.mark.parametrize("cvm", [False, True])
def test_seqpool_concat_against_pooling_loops(kind, cvm):
    xs, lods = _three()
    name = "fusion_seqpool_cvm_concat" if cvm else "fusion_seqpool_concat"
    args = (xs, np.ones((4, 2))) if cvm else (xs,)
    got = op(name).forward(*args, lod={"X": lods}, pooltype=kind)
    parts = [ref_pool(x, ls, kind) for x, ls in zip(xs, (LENS0, LENS1, LENS2))]
    want = np.concatenate([ref_cvm(p) if cvm else p for p in parts], 1)
    np.testing.assert_allclose(got["Out"], want, rtol=1e-12, atol=1e-12)
    assert got["lod"] == {"Out": ((0, 1, 2, 3, 4),)}


def test_seqpool_concat_defaults_float32_and_two_level_lods():
    xs, lods = _three(dtype=np.float32)
    got = op("fusion_seqpool_concat").forward(xs, lod={"X": lods})          # SUM
    assert got["Out"].dtype == np.float32
    np.testing.assert_allclose(got["Out"], np.concatenate(
        [ref_pool(x.astype(np.float64), ls, "SUM") for x, ls in zip(xs, (LENS0, LENS1,
                                                                          LENS2))], 1),
        rtol=1e-6)
    got = op("fusion_seqpool_cvm_concat").forward(xs, None, lod={"X": lods})
    assert got["Out"].dtype == np.float32
    # the last LoD level is pooled
    x = rand((5, 2), 3)
    got = op("fusion_seqpool_concat").forward([x], lod={"X": [((0, 1, 2), (0, 2, 5))]},
                                              pooltype="AVERAGE")
    np.testing.assert_allclose(got["Out"], ref_pool(x, [2, 3], "AVERAGE"))
    assert got["lod"] == {"Out": ((0, 1, 2),)}


def test_seqpool_concat_kernel_errors():
    f = op("fusion_seqpool_concat").forward
    xs, lods = _three()
    with pytest.raises(ValueError, match=re.escape(
            "fusion_seqpool_concat: every X must be [T, 3] (X[0]'s width), got X[1] [3, 4]")):
        f([xs[0], rand((3, 4))], lod={"X": lods[:2]})
    with pytest.raises(ValueError, match=re.escape(
            "fusion_seqpool_concat: every X must be [T, 3] (X[0]'s width), got X[2] [2]")):
        f([xs[0], xs[1], np.zeros(2)], lod={"X": lods})
    with pytest.raises(ValueError, match=re.escape(
            "fusion_seqpool_concat: every X must hold the same number of sequences; X[0] has "
            "4, X[1] has 2")):
        f(xs[:2], lod={"X": [lods[0], ((0, 3, 7),)]})
    with pytest.raises(ValueError, match=re.escape(
            "fusion_seqpool_concat: X[1] must be [T, w] with T = 7 rows (its LoD), got [6, 3]")):
        f([xs[0], rand((6, 3))], lod={"X": lods[:2]})
    with pytest.raises(ValueError, match=re.escape("fusion_seqpool_concat: input X[0] has no "
                                                   "LoD")):
        f(xs)
    with pytest.raises(ValueError, match=re.escape("fusion_seqpool_cvm_concat: input X[1] has "
                                                   "no LoD")):
        op("fusion_seqpool_cvm_concat").forward(xs[:2], None, lod={"X": [lods[0], None]})


def test_seqpool_concat_infer():
    infer = op("fusion_seqpool_concat").infer
    a, b = spec([-1, 3], "float64", 1), spec([7, 3], "float64", 1)
    assert infer([a, b]) == {"Out": VarSpec((-1, 6), VarType.FP64, 1)}
    assert infer([a, b, a], pooltype="SQRT") == {"Out": VarSpec((-1, 9), VarType.FP64, 1)}
    assert infer([spec([-1, -1], "float32", 1)] * 2) == {"Out": VarSpec((-1, -1), VarType.FP32,
                                                                       1)}
    with pytest.raises(ValueError, match=re.escape(
            "fusion_seqpool_concat: only axis=1 is supported (as in fluid), got axis=0")):
        infer([a], axis=0)
    with pytest.raises(ValueError, match=re.escape(
            "fusion_seqpool_concat: pooltype must be one of ['SUM', 'AVERAGE', 'SQRT'], got "
            "'MAX'")):
        infer([a], pooltype="MAX")
    with pytest.raises(ValueError, match=re.escape(
            "fusion_seqpool_concat: X must hold at least one LoDTensor")):
        infer([])
    with pytest.raises(ValueError, match=re.escape(
            "fusion_seqpool_concat: the inputs must be 2-D [T, w], got X[0] [-1, 3, 1]")):
        infer([spec([-1, 3, 1], "float32", 1)])


def test_seqpool_cvm_concat_infer():
    infer = op("fusion_seqpool_cvm_concat").infer
    a = spec([-1, 4], "float32", 1)
    cvm = spec([-1, 2])
    assert infer([a, a], cvm) == {"Out": VarSpec((-1, 8), VarType.FP32, 1)}
    assert infer([spec([-1, 2], "float32", 1)], cvm, pooltype="AVERAGE") == {
        "Out": VarSpec((-1, 2), VarType.FP32, 1)}
    assert infer([spec([-1, -1], "float32", 1)], cvm) == {"Out": VarSpec((-1, -1),
                                                                        VarType.FP32, 1)}
    with pytest.raises(ValueError, match=re.escape(
            "fusion_seqpool_cvm_concat: only use_cvm=True is supported (as in fluid); use "
            "sequence_pool + cvm(use_cvm=False) + concat instead")):
        infer([a], cvm, use_cvm=False)
    with pytest.raises(ValueError, match=re.escape(
            "fusion_seqpool_cvm_concat: the inputs need at least the 2 cvm columns (show, "
            "click), got width 1")):
        infer([spec([-1, 1], "float32", 1)], cvm)
    with pytest.raises(ValueError, match="fusion_seqpool_cvm_concat: pooltype must be one of"):
        infer([a], cvm, pooltype="LAST")
    with pytest.raises(ValueError, match="fusion_seqpool_cvm_concat: only axis=1"):
        infer([a], cvm, axis=2)


# -- fusion_seqexpand_concat_fc ---------------------------------------------------------------
ACTS = {"identity": lambda v: v, "relu": lambda v: np.maximum(v, 0), "tanh": np.tanh,
        "sigmoid": lambda v: 1 / (1 + np.exp(-v))}


@pytest.mark.parametrize("act", sorted(ACTS))
@pytest.mark.parametrize("bias", [None, "1d", "2d"])
def test_seqexpand_concat_fc_against_the_unfused_chain(act, bias):
    lens = [2, 0, 3, 1]
    x0, x1, x2 = rand((6, 3), 1), rand((4, 2), 2), rand((4, 1), 3)
    w = rand((6, 5), 4)
    b = None if bias is None else rand((5,) if bias == "1d" else (1, 5), 5)
    lod = {"X": [(offsets(lens),), None, None]}
    got = op("fusion_seqexpand_concat_fc").forward([x0, x1, x2], w, b, lod=lod,
                                                   fc_activation=act)
    rows = np.repeat(np.arange(4), lens)
    full = np.concatenate([x0, x1[rows], x2[rows]], 1)
    pre = full @ w + (0 if b is None else b.reshape(1, -1))
    np.testing.assert_allclose(got["Out"], ACTS[act](pre), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got["FCOut"], np.concatenate([x1, x2], 1) @ w[3:],
                               rtol=1e-12, atol=1e-12)
    assert got["lod"] == {"Out": (offsets(lens),)}


def test_seqexpand_concat_fc_default_activation_and_float32():
    x0, x1 = rand((3, 2), 1).astype(np.float32), rand((2, 2), 2).astype(np.float32)
    w = rand((4, 3), 3).astype(np.float32)
    got = op("fusion_seqexpand_concat_fc").forward([x0, x1], w, None,
                                                   lod={"X": [((0, 1, 3),), None]})
    want = np.concatenate([x0, x1[[0, 1, 1]]], 1).astype(np.float64) @ w
    # a float32 product: within 1e-6 of each element or of the largest (one of 0.2 was 3.3e-7
    # off on an Intel Xeon with NumPy 1.23.5's OpenBLAS); identity, negatives kept
    np.testing.assert_allclose(got["Out"], want, rtol=1e-6, atol=1e-6 * np.abs(want).max())
    assert (got["Out"] < 0).any()
    assert got["Out"].dtype == np.float32 and got["FCOut"].dtype == np.float32


def test_seqexpand_concat_fc_kernel_errors():
    f = op("fusion_seqexpand_concat_fc").forward
    x0, w = rand((5, 2), 1), rand((5, 3), 2)
    with pytest.raises(ValueError, match=re.escape(
            "fusion_seqexpand_concat_fc: X[2] must have one row per sequence of X[0] (2), got "
            "[3, 2]")):
        f([x0, rand((2, 1)), rand((3, 2))], rand((5, 3)), None, lod={"X": [((0, 2, 5),)]})
    with pytest.raises(ValueError, match=re.escape("fusion_seqexpand_concat_fc: input X[0] has "
                                                   "no LoD")):
        f([x0, rand((2, 3))], w, None)
    with pytest.raises(ValueError, match=re.escape(
            "fusion_seqexpand_concat_fc: attribute fc_activation must be one of ['sigmoid', "
            "'tanh', 'relu', 'identity'], got 'gelu'")):
        f([x0, rand((2, 3))], w, None, lod={"X": [((0, 2, 5),)]}, fc_activation="gelu")


def test_seqexpand_concat_fc_infer():
    infer = op("fusion_seqexpand_concat_fc").infer
    x0, x1 = spec([-1, 3], "float64", 1), spec([-1, 2], "float64")
    got = infer([x0, x1], spec([5, 4]), spec([4]))
    assert got == {"Out": VarSpec((-1, 4), VarType.FP64, 1),
                   "FCOut": VarSpec((-1, 4), VarType.FP64, 0)}
    got = infer([spec([7, 3], "float32", 2), x1], spec([5, 4]), None, fc_activation="relu")
    assert got["Out"] == VarSpec((7, 4), VarType.FP32, 2)
    # unknown widths and an unknown D are accepted
    assert infer([spec([-1, -1], "float32", 1), x1], spec([5, 4]), spec([1, 4]))["Out"].shape \
        == (-1, 4)
    assert infer([x0, x1], spec([-1, -1]), spec([1, 3]))["Out"].shape == (-1, -1)
    msg = "fusion_seqexpand_concat_fc: "
    with pytest.raises(ValueError, match=re.escape(msg + "X must hold at least 2 inputs, got 1")):
        infer([x0], spec([3, 4]), None)
    with pytest.raises(ValueError, match=re.escape(msg + "X and FCWeight must be 2-D")):
        infer([x0, x1], spec([5, 4, 1]), None)
    with pytest.raises(ValueError, match=re.escape(msg + "X and FCWeight must be 2-D")):
        infer([x0, spec([-1, 2, 1])], spec([5, 4]), None)
    with pytest.raises(ValueError, match=re.escape(
            msg + "FCWeight must have sum of the X widths = 5 rows, got [6, 4]")):
        infer([x0, x1], spec([6, 4]), None)
    for b in ([5], [2, 4], [1, 3]):
        with pytest.raises(ValueError, match=re.escape(
                msg + f"FCBias must be [4] or [1, 4], got {b}")):
            infer([x0, x1], spec([5, 4]), spec(b))
    with pytest.raises(ValueError, match=re.escape(
            msg + "attribute fc_activation must be one of")):
        infer([x0, x1], spec([5, 4]), None, fc_activation="softmax")


# -- fusion_seqconv_eltadd_relu ---------------------------------------------------------------
def ref_seqconv(x, lens, filt, bias, length, start):
    """sequence_conv (zeros outside each sequence) + bias + relu, and the context columns."""
    cols, at = [], 0
    for n in lens:
        for t in range(n):
            row = []
            for j in range(length):
                p = t + start + j
                row.append(x[at + p] if 0 <= p < n else np.zeros(x.shape[1]))
            cols.append(np.concatenate(row))
        at += n
    cols = np.array(cols).reshape(-1, length * x.shape[1])
    return np.maximum(cols @ filt + bias.reshape(1, -1), 0), cols


@pytest.mark.parametrize("length,start", [(3, -1), (2, 0), (4, -3), (3, 1), (1, 0)])
def test_seqconv_eltadd_relu_against_the_unfused_chain(length, start):
    lens = [3, 0, 1, 4, 2]
    x = rand((10, 2), 1)
    filt, b = rand((2 * length, 3), 2), rand((1, 3), 3)
    got = op("fusion_seqconv_eltadd_relu").forward(x, filt, b, lod={"X": (offsets(lens),)},
                                                   contextLength=length, contextStart=start)
    out, cols = ref_seqconv(x, lens, filt, b, length, start)
    np.testing.assert_allclose(got["Out"], out, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got["ColMat"], cols, rtol=1e-12, atol=1e-12)
    assert got["lod"] == {"Out": (offsets(lens),)}
    assert (got["Out"] == 0).any() and (got["Out"] > 0).any()


def test_seqconv_eltadd_relu_defaults_float32_and_errors():
    x = rand((5, 2), 4).astype(np.float32)
    filt, b = rand((6, 2), 5).astype(np.float32), rand((2,), 6).astype(np.float32)
    got = op("fusion_seqconv_eltadd_relu").forward(x, filt, b, lod={"X": ((0, 2, 5),)})
    want, _ = ref_seqconv(x.astype(np.float64), [2, 3], filt, b, 3, 0)   # length 3, start 0
    np.testing.assert_allclose(got["Out"], want, rtol=1e-5, atol=1e-6)
    assert got["Out"].dtype == np.float32 and got["ColMat"].dtype == np.float32
    with pytest.raises(ValueError, match=re.escape(
            "fusion_seqconv_eltadd_relu: input X has no LoD")):
        op("fusion_seqconv_eltadd_relu").forward(x, filt, b)
    infer = op("fusion_seqconv_eltadd_relu").infer
    got = infer(spec([-1, 2], "float64", 1), spec([6, 4]), spec([1, 4]), contextLength=3)
    assert got == {"Out": VarSpec((-1, 4), VarType.FP64, 1),
                   "ColMat": VarSpec((-1, 6), VarType.FP64, 0)}
    got = infer(spec([9, -1], "float32", 2), spec([6, 4]), spec([1, 4]), contextLength=3,
                contextStart=-1, contextStride=1)
    assert got["Out"] == VarSpec((9, 4), VarType.FP32, 2)
    msg = "fusion_seqconv_eltadd_relu: "
    with pytest.raises(ValueError, match=re.escape(
            msg + "only contextStride = 1 is supported (as in fluid), got 2")):
        infer(spec([-1, 2], lod_level=1), spec([6, 4]), spec([1, 4]), contextLength=3,
              contextStride=2)
    for xs, fs in (([-1, 2, 1], [6, 4]), ([-1, 2], [6, 4, 1])):
        with pytest.raises(ValueError, match=re.escape(
                msg + "X must be [T, M] and Filter [contextLength * M, D]")):
            infer(spec(xs, lod_level=1), spec(fs), spec([1, 4]), contextLength=3)
    with pytest.raises(ValueError, match=re.escape(
            msg + "Filter height 6 must be contextLength * M = 2 * 2")):
        infer(spec([-1, 2], lod_level=1), spec([6, 4]), spec([1, 4]), contextLength=2)


# -- fusion_repeated_fc_relu ------------------------------------------------------------------
def test_repeated_fc_relu_against_fc_relu_loops():
    x = rand((3, 2, 2), 1)                       # flattened to [3, 4]
    ws = [rand((4, 5), 2), rand((5, 3), 3), rand((3, 2), 4)]
    bs = [rand((1, 5), 5), rand((3,), 6), rand((1, 2), 7)]
    got = op("fusion_repeated_fc_relu").forward(x, ws, bs)
    y, want = x.reshape(3, 4), []
    for w, b in zip(ws, bs):
        y = np.maximum(y @ w + b.reshape(1, -1), 0)
        want.append(y)
    np.testing.assert_allclose(got["Out"], want[-1], rtol=1e-12)
    assert len(got["ReluOut"]) == 2
    for g, w in zip(got["ReluOut"], want[:-1]):
        np.testing.assert_allclose(g, w, rtol=1e-12)
    got32 = op("fusion_repeated_fc_relu").forward(x.astype(np.float32),
                                                  [w.astype(np.float32) for w in ws],
                                                  [b.astype(np.float32) for b in bs])
    assert got32["Out"].dtype == np.float32
    assert all(r.dtype == np.float32 for r in got32["ReluOut"])


def test_repeated_fc_relu_infer():
    infer = op("fusion_repeated_fc_relu").infer
    x = spec([-1, 2, 2], "float64")
    got = infer(x, [spec([4, 5]), spec([5, 3]), spec([3, 2])], [spec([1, 5])] * 3)
    assert got == {"Out": VarSpec((-1, 2), VarType.FP64),
                   "ReluOut": [VarSpec((-1, 5), VarType.FP64), VarSpec((-1, 3), VarType.FP64)]}
    # an unknown width is accepted for the first layer
    assert infer(spec([-1, -1]), [spec([7, 5]), spec([5, 3])], [spec([5])] * 2)["Out"].shape \
        == (-1, 3)
    msg = "fusion_repeated_fc_relu: "
    for W, B in (([spec([4, 5])], [spec([5])]), ([spec([4, 5]), spec([5, 3])], [spec([5])])):
        with pytest.raises(ValueError, match=re.escape(
                msg + f"W and Bias must hold the same number (>= 2) of tensors, got {len(W)} and "
                f"{len(B)}")):
            infer(x, W, B)
    with pytest.raises(ValueError, match=re.escape(
            msg + "W[0] must be [4, O0] (the previous layer's width), got [5, 5]")):
        infer(x, [spec([5, 5]), spec([5, 3])], [spec([5])] * 2)
    with pytest.raises(ValueError, match=re.escape(
            msg + "W[1] must be [5, O1] (the previous layer's width), got [4, 3]")):
        infer(x, [spec([4, 5]), spec([4, 3])], [spec([5])] * 2)
    with pytest.raises(ValueError, match=re.escape(
            msg + "W[1] must be [5, O1] (the previous layer's width), got [5]")):
        infer(x, [spec([4, 5]), spec([5])], [spec([5])] * 2)


# -- fusion_squared_mat_sub -------------------------------------------------------------------
def test_squared_mat_sub_against_the_formula():
    x, y = rand((3, 4), 1), rand((4, 2), 2)
    got = op("fusion_squared_mat_sub").forward(x, y, scalar=-0.25)
    want = np.zeros((3, 2))
    for i in range(3):
        for j in range(2):
            xy = sum(x[i, k] * y[k, j] for k in range(4))
            want[i, j] = (xy * xy - sum(x[i, k] ** 2 * y[k, j] ** 2 for k in range(4))) * -0.25
    np.testing.assert_allclose(got["Out"], want, rtol=1e-12)
    np.testing.assert_allclose(got["SquaredX"], x ** 2)
    np.testing.assert_allclose(got["SquaredY"], y ** 2)
    np.testing.assert_allclose(got["SquaredXY"], (x @ y) ** 2, rtol=1e-12)
    one = op("fusion_squared_mat_sub").forward(x.astype(np.float32), y.astype(np.float32))
    np.testing.assert_allclose(one["Out"], want / -0.25, rtol=1e-5, atol=1e-5)   # scalar 1
    assert one["Out"].dtype == np.float32


def test_squared_mat_sub_infer():
    infer = op("fusion_squared_mat_sub").infer
    x, y = spec([-1, 4], "float64"), spec([4, 3], "float64")
    assert infer(x, y) == {"Out": VarSpec((-1, 3), VarType.FP64), "SquaredX": x, "SquaredY": y,
                           "SquaredXY": VarSpec((-1, 3), VarType.FP64)}
    assert infer(spec([2, -1]), spec([5, 3]), scalar=2.0)["Out"].shape == (2, 3)
    for a, b in (([2, 4], [5, 3]), ([2, 4, 1], [4, 3]), ([2, 4], [4]), ([4], [4, 3])):
        with pytest.raises(ValueError, match=re.escape(
                f"fusion_squared_mat_sub: X must be [M, K] and Y [K, N], got {a} and {b}")):
            infer(spec(a), spec(b))


# -- fused_embedding_seq_pool -----------------------------------------------------------------
def ref_emb_pool(w, ids, lens, padding_idx, dout):
    """(Out, dW): per sequence, the sum over its rows of the k looked-up rows side by side;
    the padding id (when not -1) contributes nothing."""
    k, D = ids.shape[1], w.shape[1]
    out, dw, at = np.zeros((len(lens), k * D)), np.zeros(w.shape), 0
    for s, n in enumerate(lens):
        for t in range(at, at + n):
            for j in range(k):
                i = ids[t, j]
                if padding_idx != -1 and i == padding_idx:
                    continue
                out[s, j * D:(j + 1) * D] += w[i]
                dw[i] += dout[s, j * D:(j + 1) * D]
        at += n
    return out, dw


@pytest.mark.parametrize("padding_idx", [-1, 0, 3, 5])
def test_fused_embedding_seq_pool_against_loops(padding_idx):
    lens = [2, 0, 3, 1, 0]
    w = rand((6, 3), 1)
    ids = np.random.default_rng(2).integers(0, 6, (6, 2, 1))
    ids[0, 0, 0] = ids[4, 1, 0] = 0
    ids[2, 0, 0] = ids[3, 1, 0] = 5
    lod = {"Ids": (offsets(lens),)}
    dout = rand((5, 6), 3)
    want, dw = ref_emb_pool(w, ids[..., 0], lens, padding_idx, dout)
    got = op("fused_embedding_seq_pool").forward(w, ids, lod=lod, padding_idx=padding_idx)
    np.testing.assert_allclose(got["Out"], want, rtol=1e-12, atol=1e-12)
    g = op("fused_embedding_seq_pool").backward(w, ids, dout, lod=lod, padding_idx=padding_idx)
    np.testing.assert_allclose(g["W"], dw, rtol=1e-12, atol=1e-12)


def test_fused_embedding_seq_pool_defaults_dtype_and_errors():
    w = rand((4, 2), 1).astype(np.float32)
    ids = np.array([[0], [3], [0]], np.int64)
    lod = {"Ids": ((0, 3),)}
    got = op("fused_embedding_seq_pool").forward(w, ids, lod=lod)       # padding_idx -1: none
    np.testing.assert_allclose(got["Out"], (w[0] + w[3] + w[0])[None], rtol=1e-6)
    assert got["Out"].dtype == np.float32
    g = op("fused_embedding_seq_pool").backward(w, ids, np.ones((1, 2), np.float32), lod=lod)
    assert g["W"].dtype == np.float32
    np.testing.assert_allclose(g["W"], [[2, 2], [0, 0], [0, 0], [1, 1]])
    f = op("fused_embedding_seq_pool").forward
    for bad, first in (([[0], [4], [5]], 4), ([[1], [-2], [9]], -2)):
        with pytest.raises(ValueError, match=re.escape(
                f"fused_embedding_seq_pool: Ids must lie in [0, 4) (the rows of W), got "
                f"{first}")):
            f(w, np.array(bad), lod=lod)
    # the padding id itself may lie outside W (it is never looked up)
    got = f(w, np.array([[0], [7], [7]]), lod=lod, padding_idx=7)
    np.testing.assert_allclose(got["Out"], w[:1], rtol=1e-6)
    with pytest.raises(ValueError, match="fused_embedding_seq_pool: input Ids has no LoD"):
        f(w, ids)


def test_fused_embedding_seq_pool_infer():
    infer = op("fused_embedding_seq_pool").infer
    w = spec([10, 4], "float64")
    assert infer(w, spec([-1, 1], "int64", 1)) == {"Out": VarSpec((-1, 4), VarType.FP64)}
    assert infer(w, spec([-1, 3, 1], "int64", 1), padding_idx=2) == {
        "Out": VarSpec((-1, 12), VarType.FP64)}
    assert infer(w, spec([-1, -1, 1], "int64", 1))["Out"].shape == (-1, -1)
    assert infer(w, spec([-1, 2, -1], "int64", 1))["Out"].shape == (-1, -1)
    msg = "fused_embedding_seq_pool: "
    with pytest.raises(ValueError, match=re.escape(
            msg + "only combiner='sum' is supported (as in fluid), got 'mean'")):
        infer(w, spec([-1, 1], "int64", 1), combiner="mean")
    for ws, i in (([10], [-1, 1]), ([10, 4, 1], [-1, 1]), ([10, 4], [-1]), ([10, 4], [-1, 2])):
        with pytest.raises(ValueError, match=re.escape(
                msg + f"W must be [V, D] and Ids [T, ..., 1], got W {ws} and Ids {i}")):
            infer(spec(ws), spec(i, "int64", 1))
    for lvl in (0, 2):
        with pytest.raises(ValueError, match=re.escape(
                msg + f"Ids must be a LoD tensor of lod_level 1, got lod_level {lvl}")):
            infer(w, spec([-1, 1], "int64", lvl))


# -- second pass: the survivors of the first rerun ---------------------------------------------
@pytest.mark.parametrize("kind", ["AVERAGE", "SQRT"])
def test_seqpool_concat_keeps_float32_when_dividing(kind):
    xs, lods = _three(dtype=np.float32)
    for name, args in (("fusion_seqpool_concat", (xs,)),
                       ("fusion_seqpool_cvm_concat", (xs, None))):
        got = op(name).forward(*args, lod={"X": lods}, pooltype=kind)
        assert got["Out"].dtype == np.float32, name


def test_seqpool_concat_infer_zero_and_unknown_widths():
    f32 = "float32"
    infer = op("fusion_seqpool_concat").infer
    # X[0]'s width sets the output width (fluid's InferShape reads ins_dims[0])
    assert infer([spec([-1, 3], f32, 1), spec([-1, -1], f32, 1)])["Out"].shape == (-1, 6)
    assert infer([spec([-1, 0], f32, 1)] * 2)["Out"].shape == (-1, 0)
    cvm = op("fusion_seqpool_cvm_concat").infer
    assert cvm([spec([-1, -1], f32, 1)] * 2, spec([-1, 2]))["Out"].shape == (-1, -1)
    with pytest.raises(ValueError, match=re.escape(
            "fusion_seqpool_cvm_concat: the inputs need at least the 2 cvm columns (show, "
            "click), got width 0")):
        cvm([spec([-1, 0], f32, 1)], spec([-1, 2]))


def test_fused_embedding_seq_pool_ids_minus_one_and_a_one_row_table():
    w = rand((3, 2), 1)
    lod = {"Ids": ((0, 2),)}
    # padding_idx -1 (the default) means no padding: an id of -1 is out of range
    with pytest.raises(ValueError, match=re.escape(
            "fused_embedding_seq_pool: Ids must lie in [0, 3) (the rows of W), got -1")):
        op("fused_embedding_seq_pool").forward(w, np.array([[0], [-1]]), lod=lod)
    with pytest.raises(ValueError, match=re.escape("got -1")):
        op("fused_embedding_seq_pool").forward(w, np.array([[1], [-1]]), lod=lod,
                                               padding_idx=1)
    # padding_idx 1 pads id 1
    got = op("fused_embedding_seq_pool").forward(w, np.array([[1], [2]]), lod=lod,
                                                 padding_idx=1)
    np.testing.assert_allclose(got["Out"], w[2:], rtol=1e-12)
    # a table of one row, with padding ids outside it
    one = rand((1, 2), 2)
    ids = np.array([[0], [7], [0]])
    got = op("fused_embedding_seq_pool").forward(one, ids, lod={"Ids": ((0, 3),)},
                                                 padding_idx=7)
    np.testing.assert_allclose(got["Out"], 2 * one, rtol=1e-12)
    g = op("fused_embedding_seq_pool").backward(one, ids, np.ones((1, 2)),
                                                lod={"Ids": ((0, 3),)}, padding_idx=7)
    np.testing.assert_allclose(g["W"], [[2.0, 2.0]])


def test_fused_embedding_seq_pool_infer_dtype_and_dims():
    infer = op("fused_embedding_seq_pool").infer
    w = spec([10, 4], "float32")
    assert infer(w, spec([-1, 1], "int64", 1)) == {"Out": VarSpec((-1, 4), VarType.FP32)}
    assert infer(w, spec([-1, -1, -1], "int64", 1))["Out"].shape == (-1, -1)
    assert infer(w, spec([-1, 0, 1], "int64", 1))["Out"].shape == (-1, 0)


def test_repeated_fc_relu_infer_dtype_and_dims():
    infer = op("fusion_repeated_fc_relu").infer
    got = infer(spec([-1, 4], "float32"), [spec([4, 5]), spec([5, 3])], [spec([5])] * 2)
    assert got == {"Out": VarSpec((-1, 3), VarType.FP32),
                   "ReluOut": [VarSpec((-1, 5), VarType.FP32)]}
    # unknown dims anywhere in X: the first layer's height is not checked
    assert infer(spec([-1, -1, 2]), [spec([7, 5]), spec([5, 3])], [spec([5])] * 2)[
        "Out"].shape == (-1, 3)
    # an unknown W height is not checked either
    assert infer(spec([-1, 4]), [spec([-1, 5]), spec([5, 3])], [spec([5])] * 2)[
        "Out"].shape == (-1, 3)
    m = "fusion_repeated_fc_relu: "
    with pytest.raises(ValueError, match=re.escape(
            m + "W[0] must be [0, O0] (the previous layer's width), got [3, 5]")):
        infer(spec([-1, 0]), [spec([3, 5]), spec([5, 3])], [spec([5])] * 2)
    with pytest.raises(ValueError, match=re.escape(
            m + "W[1] must be [5, O1] (the previous layer's width), got [0, 3]")):
        infer(spec([-1, 4]), [spec([4, 5]), spec([0, 3])], [spec([5])] * 2)


def test_seqconv_eltadd_relu_infer_dtype_and_dims():
    infer = op("fusion_seqconv_eltadd_relu").infer
    got = infer(spec([-1, 2], "float32", 1), spec([6, 4]), spec([1, 4]), contextLength=3)
    assert got["ColMat"] == VarSpec((-1, 6), VarType.FP32)
    assert got["Out"] == VarSpec((-1, 4), VarType.FP32, 1)
    # an unknown Filter height is accepted
    assert infer(spec([-1, 2], lod_level=1), spec([-1, 4]), spec([1, 4]),
                 contextLength=3)["Out"].shape == (-1, 4)
    m = "fusion_seqconv_eltadd_relu: "
    with pytest.raises(ValueError, match=re.escape(
            m + "Filter height 6 must be contextLength * M = 3 * 0")):
        infer(spec([-1, 0], lod_level=1), spec([6, 4]), spec([1, 4]), contextLength=3)
    with pytest.raises(ValueError, match=re.escape(
            m + "Filter height 0 must be contextLength * M = 3 * 2")):
        infer(spec([-1, 2], lod_level=1), spec([0, 4]), spec([1, 4]), contextLength=3)


def test_seqexpand_concat_fc_infer_dtype_and_dims():
    infer = op("fusion_seqexpand_concat_fc").infer
    x0, x1 = spec([-1, 3], "float32", 1), spec([-1, 2], "float32")
    got = infer([x0, x1], spec([5, 4]), None)
    assert got == {"Out": VarSpec((-1, 4), VarType.FP32, 1),
                   "FCOut": VarSpec((-1, 4), VarType.FP32)}
    # an unknown FCWeight height is accepted
    assert infer([x0, x1], spec([-1, 4]), spec([4]))["Out"].shape == (-1, 4)
    m = "fusion_seqexpand_concat_fc: "
    with pytest.raises(ValueError, match=re.escape(
            m + "FCWeight must have sum of the X widths = 3 rows, got [5, 4]")):
        infer([x0, spec([-1, 0])], spec([5, 4]), None)
    with pytest.raises(ValueError, match=re.escape(
            m + "FCWeight must have sum of the X widths = 5 rows, got [0, 4]")):
        infer([x0, x1], spec([0, 4]), None)
    with pytest.raises(ValueError, match=re.escape(m + "FCBias must be [4] or [1, 4], got [0]")):
        infer([x0, x1], spec([5, 4]), spec([0]))
    with pytest.raises(ValueError, match=re.escape(m + "FCBias must be [0] or [1, 0], got [3]")):
        infer([x0, x1], spec([5, 0]), spec([3]))


def test_squared_mat_sub_infer_dtype_and_dims():
    infer = op("fusion_squared_mat_sub").infer
    x, y = spec([-1, 4], "float32"), spec([4, 3], "float32")
    got = infer(x, y)
    assert got["Out"] == VarSpec((-1, 3), VarType.FP32)
    assert got["SquaredXY"] == VarSpec((-1, 3), VarType.FP32)
    assert infer(spec([2, 4]), spec([-1, 3]))["Out"].shape == (2, 3)
    for a, b in (([2, 0], [3, 3]), ([2, 3], [0, 3])):
        with pytest.raises(ValueError, match=re.escape(
                f"fusion_squared_mat_sub: X must be [M, K] and Y [K, N], got {a} and {b}")):
            infer(spec(a), spec(b))


def test_repeated_fc_relu_infer_skips_the_first_check_whenever_x_has_an_unknown_dim():
    infer = op("fusion_repeated_fc_relu").infer
    for x in ([-1, -1, -1, 2], [-1, -1, 0], [4, 2, -1]):
        assert infer(spec(x), [spec([7, 5]), spec([5, 3])], [spec([5])] * 2)["Out"].shape == (
            x[0], 3), x
