"""Tests written from mutation testing (issue 28, docs/mutation.md) for
``fluidlite/ops/sequence.py``: the kernels of sequence_pool, sequence_softmax, sequence_expand,
sequence_expand_as, sequence_pad / unpad, sequence_reshape, sequence_concat / slice / reverse /
enumerate / scatter, lod_reset and sequence_mask, called directly with their LoD, against
float64 loops over the sequences written here from fluid 1.8's kernels
(sequence_pooling.cc, sequence_softmax_op.h, sequence_expand_op.h, sequence_padding.cc, ...),
with random upstream gradients, multi-dimensional rows, empty sequences and ties; and their
build-time rules and error messages."""
import re

import numpy as np
import pytest

from fluidlite.core.dtypes import VarType
from fluidlite.core.registry import VarSpec, get_op_def

LENS = [3, 0, 1, 4, 2]
OFF = (0, 3, 3, 4, 8, 10)


def op(name):
    return get_op_def(name)


def segs(x, off):
    return [x[off[i]:off[i + 1]] for i in range(len(off) - 1)]


def ties(shape, seed=0):
    return np.random.default_rng(seed).integers(-2, 3, shape).astype(np.float64)


def rand(shape, seed=1):
    return np.random.default_rng(seed).standard_normal(shape)


# -- sequence_pool ----------------------------------------------------------------------------
def ref_pool(x, off, kind, dout, pad_value=0.0):
    """(Out, MaxIndex, dX) by a loop over the sequences (fluid's pooling functors)."""
    feat = x.shape[1:]
    out, idx, dx = [], [], np.zeros(x.shape)
    for i, s in enumerate(segs(x, off)):
        n, o = len(s), off[i]
        if n == 0:
            out.append(np.full(feat, pad_value))
            idx.append(np.full(feat, -1))
            continue
        if kind == "SUM":
            out.append(s.sum(0))
            dx[o:o + n] += dout[i]
        elif kind == "AVERAGE":
            out.append(s.sum(0) / n)
            dx[o:o + n] += dout[i] / n
        elif kind == "SQRT":
            out.append(s.sum(0) / np.sqrt(n))
            dx[o:o + n] += dout[i] / np.sqrt(n)
        elif kind == "MAX":
            m = np.full(feat, -np.inf)
            at = np.zeros(feat, int)
            for t in range(n):          # fluid: the first row holding the maximum
                better = s[t] > m
                m = np.where(better, s[t], m)
                at = np.where(better, o + t, at)
            out.append(m)
            idx.append(at)
            for f in np.ndindex(feat):
                dx[(at[f],) + f] += dout[(i,) + f]
        elif kind == "LAST":
            out.append(s[-1])
            dx[o + n - 1] += dout[i]
        else:
            out.append(s[0])
            dx[o] += dout[i]
        if kind != "MAX":
            idx.append(np.zeros(feat, int))
    return np.array(out), np.array(idx), dx


@pytest.mark.parametrize("kind", ["SUM", "AVERAGE", "SQRT", "MAX", "LAST", "FIRST"])
@pytest.mark.parametrize("pad_value", [0.0, 2.5])
def test_sequence_pool_forward_max_index_and_backward(kind, pad_value):
    x = ties((10, 2, 3))
    dout = rand((5, 2, 3))
    res = op("sequence_pool").forward(x, lod={"X": (OFF,)}, pooltype=kind.lower(),
                                      pad_value=pad_value)
    want, want_idx, want_dx = ref_pool(x, OFF, kind, dout, pad_value)
    np.testing.assert_allclose(res["Out"], want, rtol=1e-14)
    assert res["Out"].dtype == np.float64 and "lod" not in res
    assert res["MaxIndex"].dtype == np.int32 and res["MaxIndex"].shape == (5, 2, 3)
    if kind == "MAX":
        np.testing.assert_array_equal(res["MaxIndex"], want_idx)
    dx = op("sequence_pool").backward(x, res["MaxIndex"], dout, lod={"X": (OFF,)},
                                      pooltype=kind, pad_value=pad_value)["X"]
    np.testing.assert_allclose(dx, want_dx, rtol=1e-14)
    assert dx.shape == x.shape and dx.dtype == np.float64
    if kind == "MAX":           # MaxIndex not kept by the program: recomputed
        dx = op("sequence_pool").backward(x, None, dout, lod={"X": (OFF,)}, pooltype=kind)["X"]
        np.testing.assert_allclose(dx, want_dx, rtol=1e-14)


@pytest.mark.parametrize("kind", ["SUM", "AVERAGE", "SQRT", "MAX", "LAST", "FIRST"])
def test_sequence_pool_without_empty_sequences_and_in_float32(kind):
    off = (0, 2, 3, 7)
    x = ties((7, 3), seed=2).astype(np.float32)
    dout = rand((3, 3), seed=3).astype(np.float32)
    res = op("sequence_pool").forward(x, lod={"X": (off,)}, pooltype=kind)
    want, want_idx, want_dx = ref_pool(x.astype(np.float64), off, kind, dout.astype(np.float64))
    assert res["Out"].dtype == np.float32
    np.testing.assert_allclose(res["Out"], want, rtol=1e-6)
    if kind == "MAX":
        np.testing.assert_array_equal(res["MaxIndex"], want_idx)
    dx = op("sequence_pool").backward(x, res["MaxIndex"], dout, lod={"X": (off,)},
                                      pooltype=kind)["X"]
    assert dx.dtype == np.float32
    np.testing.assert_allclose(dx, want_dx, rtol=1e-6)


def test_sequence_pool_max_of_an_empty_batch_and_of_only_empty_sequences():
    x = np.zeros((0, 2))
    res = op("sequence_pool").forward(x, lod={"X": ((0, 0, 0),)}, pooltype="MAX", pad_value=1.5)
    np.testing.assert_array_equal(res["Out"], np.full((2, 2), 1.5))
    np.testing.assert_array_equal(res["MaxIndex"], np.full((2, 2), -1))
    dx = op("sequence_pool").backward(x, res["MaxIndex"], np.ones((2, 2)), lod={"X": ((0, 0, 0),)},
                                      pooltype="MAX")["X"]
    assert dx.shape == (0, 2)


def test_sequence_pool_two_levels_keeps_the_upper_level_and_infers():
    x = rand((5, 2))
    lod = ((0, 2, 3), (0, 1, 3, 5))
    res = op("sequence_pool").forward(x, lod={"X": lod}, pooltype="SUM")
    assert res["lod"] == {"Out": ((0, 2, 3),)}
    np.testing.assert_allclose(res["Out"], [x[0], x[1] + x[2], x[3] + x[4]])
    infer = op("sequence_pool").infer
    specs = infer(VarSpec([-1, 4, 2], "float32", 2), pooltype="max")
    assert list(specs["Out"].shape) == [-1, 4, 2] and specs["Out"].lod_level == 1
    assert specs["Out"].dtype == VarType.FP32
    assert list(specs["MaxIndex"].shape) == [-1, 4, 2] and specs["MaxIndex"].dtype == VarType.INT32
    assert infer(VarSpec([7, 3], "float64", 1), pooltype="SUM")["Out"].lod_level == 0
    assert infer(VarSpec([7, 3], "float64", 0), pooltype="SUM")["Out"].lod_level == 0
    msg = ("sequence_pool: pooltype must be one of ['AVERAGE', 'SUM', 'SQRT', 'MAX', 'LAST', "
           "'FIRST'], got 'MEAN'")
    with pytest.raises(ValueError, match="^" + re.escape(msg) + "$"):
        infer(VarSpec([7, 3], "float64", 1), pooltype="MEAN")
    with pytest.raises(ValueError, match=re.escape("sequence_pool: unknown pooltype 'MEAN'")):
        op("sequence_pool").forward(x, lod={"X": ((0, 5),)}, pooltype="MEAN")
    msg = ("sequence_pool: input X has no LoD; feed a LoDTensor (fluid.create_lod_tensor(data, "
           "lengths, place)) to a variable declared with lod_level >= 1")
    with pytest.raises(ValueError, match="^" + re.escape(msg) + "$"):
        op("sequence_pool").forward(x, pooltype="SUM")


# -- sequence_softmax -------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(10,), (10, 1)])
def test_sequence_softmax_forward_and_backward(shape):
    x = rand(shape, seed=4)
    dout = rand(shape, seed=5)
    res = op("sequence_softmax").forward(x, lod={"X": (OFF,)})
    want, want_dx = np.zeros(10), np.zeros(10)
    xf, df = x.reshape(-1), dout.reshape(-1)
    for i in range(5):
        a, b = OFF[i], OFF[i + 1]
        e = np.exp(xf[a:b])
        p = e / e.sum()
        want[a:b] = p
        want_dx[a:b] = p * (df[a:b] - (df[a:b] * p).sum())
    np.testing.assert_allclose(res["Out"], want.reshape(shape), rtol=1e-14)
    assert res["Out"].shape == shape and res["lod"] == {"Out": (OFF,)}
    dx = op("sequence_softmax").backward(x, res["Out"], dout, lod={"X": (OFF,)})["X"]
    np.testing.assert_allclose(dx, want_dx.reshape(shape), rtol=1e-12, atol=1e-15)
    assert dx.shape == shape
    out32 = op("sequence_softmax").forward(x.astype(np.float32), lod={"X": (OFF,)})["Out"]
    assert out32.dtype == np.float32


def test_sequence_softmax_shapes_are_checked():
    infer = op("sequence_softmax").infer
    for shape in ([6, 2], [6, 1, 1]):
        with pytest.raises(ValueError, match="^" + re.escape(
                f"sequence_softmax: X must be [N] or [N, 1], got {shape}") + "$"):
            infer(VarSpec(shape, "float32", 1))
    for shape in ([6], [6, 1], [-1, -1]):
        spec = VarSpec(shape, "float32", 1)
        assert infer(spec)["Out"] == spec


# -- sequence_expand / sequence_expand_as -----------------------------------------------------
def ref_expand(x, xoff, reps, dout=None):
    rows, lens = [], []
    for i, r in enumerate(reps):
        for _ in range(r):
            rows += list(range(xoff[i], xoff[i + 1]))
            lens.append(xoff[i + 1] - xoff[i])
    out = x[rows]
    dx = np.zeros(x.shape)
    if dout is not None:
        for k, r in enumerate(rows):
            dx[r] += dout[k]
    return out, lens, dx


def test_sequence_expand_with_x_lod_and_a_two_level_y():
    x = rand((6, 2), seed=6)
    xoff = (0, 2, 2, 5, 6)
    cases = [(0, ((0, 1, 3, 4, 6), (0, 2, 3, 3, 5, 6, 9))),     # level 0 matches X's 4
             (-1, ((0, 2, 4), (0, 1, 3, 3, 5))),                  # the last level matches
             (1, ((0, 2, 4), (0, 1, 3, 3, 5)))]
    for ref_level, ylod in cases:
        lv = ylod[ref_level]
        out = op("sequence_expand").forward(x, None, lod={"X": (xoff,), "Y": ylod},
                                            ref_level=ref_level)
        want, lens, _ = ref_expand(x, xoff, np.diff(lv))
        np.testing.assert_array_equal(out["Out"], want)
        assert out["lod"] == {"Out": (tuple(np.concatenate([[0], np.cumsum(lens)])),)}
        dout = rand(want.shape, seed=7)
        dx = op("sequence_expand").backward(x, None, dout, lod={"X": (xoff,), "Y": ylod},
                                            ref_level=ref_level)["X"]
        np.testing.assert_allclose(dx, ref_expand(x, xoff, np.diff(lv), dout)[2], rtol=1e-14)
    ylod = cases[0][1]
    msg = "sequence_expand: X has 4 sequences but Y's level 1 has 6; they must match"
    for ref_level in (-1, 1):
        with pytest.raises(ValueError, match="^" + re.escape(msg) + "$"):
            op("sequence_expand").forward(x, None, lod={"X": (xoff,), "Y": ylod},
                                          ref_level=ref_level)
    for bad in (2, -2):     # fluid: -1 or [0, levels)
        with pytest.raises(ValueError, match="^" + re.escape(
                f"sequence_expand: ref_level {bad} out of range for Y's 2 LoD level(s) (-1 or 0 "
                "to 1)") + "$"):
            op("sequence_expand").forward(x, None, lod={"X": (xoff,), "Y": ylod}, ref_level=bad)
    with pytest.raises(ValueError, match="^sequence_expand: Y has no LoD; it gives the repeat "
                                         "counts$"):
        op("sequence_expand").forward(x, None, lod={"X": (xoff,)})


def test_sequence_expand_rows_without_x_lod():
    x = rand((3, 2, 2), seed=8)
    yoff = (0, 2, 2, 5)
    out = op("sequence_expand").forward(x, None, lod={"Y": (yoff,)})
    want, lens, _ = ref_expand(x, (0, 1, 2, 3), [2, 0, 3])
    np.testing.assert_array_equal(out["Out"], want)
    assert out["lod"] == {"Out": ((0, 1, 2, 3, 4, 5),)}
    dout = rand(want.shape, seed=9).astype(np.float32)
    dx = op("sequence_expand").backward(x, None, dout, lod={"Y": (yoff,)})["X"]
    assert dx.dtype == np.float32
    np.testing.assert_allclose(dx, ref_expand(x, (0, 1, 2, 3), [2, 0, 3], dout)[2], rtol=1e-6)
    spec = op("sequence_expand").infer(VarSpec([3, 2, 2], "float32"), VarSpec([5, 1], "float32", 1),
                                       ref_level=-1)["Out"]
    assert list(spec.shape) == [-1, 2, 2] and spec.lod_level == 1
    spec = op("sequence_expand").infer(VarSpec([3, 2], "float64", 2), VarSpec([5, 1], "float32", 1),
                                       ref_level=0)["Out"]
    assert spec.lod_level == 2 and spec.dtype == VarType.FP64


def test_sequence_expand_as():
    x = rand((5, 3), seed=10)
    out = op("sequence_expand_as").forward(x, None, lod={"Y": (OFF,)})
    np.testing.assert_array_equal(out["Out"], np.repeat(x, LENS, axis=0))
    assert out["lod"] == {"Out": (OFF,)}
    dout = rand((10, 3), seed=11)
    dx = op("sequence_expand_as").backward(x, None, dout, lod={"Y": (OFF,)})["X"]
    want = np.array([s.sum(0) if len(s) else np.zeros(3) for s in segs(dout, OFF)])
    np.testing.assert_allclose(dx, want, rtol=1e-14)
    dx = op("sequence_expand_as").backward(x.astype(np.float32), None,
                                           dout.astype(np.float32), lod={"Y": (OFF,)})["X"]
    assert dx.dtype == np.float32
    with pytest.raises(ValueError, match="^" + re.escape(
            "sequence_expand_as: X has 4 rows but Y has 5 sequences; they must match") + "$"):
        op("sequence_expand_as").forward(x[:4], None, lod={"Y": (OFF,)})
    with pytest.raises(ValueError, match="^sequence_expand_as: input Y has no LoD"):
        op("sequence_expand_as").forward(x, None, lod={"X": (OFF,)})
    spec = op("sequence_expand_as").infer(VarSpec([5, 3], "float64"), VarSpec([10, 1], "float32", 2))
    assert list(spec["Out"].shape) == [-1, 3] and spec["Out"].lod_level == 1
    assert spec["Out"].dtype == VarType.FP64


# -- sequence_pad / sequence_unpad ------------------------------------------------------------
def ref_pad(x, off, width, pad):
    n = len(off) - 1
    out = np.empty((n, width) + x.shape[1:])
    out[...] = pad
    for i, s in enumerate(segs(x, off)):
        out[i, :len(s)] = s
    return out


@pytest.mark.parametrize("padded_length", [-1, 4, 6])
@pytest.mark.parametrize("row_pad", [False, True])
def test_sequence_pad_forward_and_backward(padded_length, row_pad):
    x = rand((10, 2, 3), seed=12)
    pad = rand((2, 3), seed=13) if row_pad else np.array([0.75])
    res = op("sequence_pad").forward(x, pad, lod={"X": (OFF,)}, padded_length=padded_length)
    width = 4 if padded_length < 0 else padded_length
    np.testing.assert_array_equal(res["Out"], ref_pad(x, OFF, width, pad.reshape(
        (2, 3) if row_pad else ())))
    assert res["Length"].dtype == np.int64
    np.testing.assert_array_equal(res["Length"], LENS)
    dout = rand(res["Out"].shape, seed=14)
    g = op("sequence_pad").backward(x, pad, dout, lod={"X": (OFF,)},
                                    padded_length=padded_length)
    want = np.concatenate([dout[i, :n] for i, n in enumerate(LENS)])
    np.testing.assert_array_equal(g["X"], want)
    np.testing.assert_array_equal(g["PadValue"], np.zeros_like(pad))
    assert g["PadValue"].shape == pad.shape


def test_sequence_pad_refuses_a_short_padded_length_and_infers():
    x = rand((10, 2), seed=15)
    msg = "sequence_pad: padded_length 3 is shorter than the longest sequence (4)"
    with pytest.raises(ValueError, match="^" + re.escape(msg) + "$"):
        op("sequence_pad").forward(x, np.zeros(1), lod={"X": (OFF,)}, padded_length=3)
    res = op("sequence_pad").forward(np.zeros((0, 2)), np.zeros(1), lod={"X": ((0, 0, 0),)})
    assert res["Out"].shape == (2, 0, 2)
    specs = op("sequence_pad").infer(VarSpec([-1, 2], "float32", 1), VarSpec([1], "float32"),
                                     padded_length=5)
    assert list(specs["Out"].shape) == [-1, 5, 2] and specs["Out"].dtype == VarType.FP32
    assert list(specs["Length"].shape) == [-1] and specs["Length"].dtype == VarType.INT64


@pytest.mark.parametrize("feat", [(), (3,), (2, 2)])
def test_sequence_unpad_forward_and_backward(feat):
    x = rand((5, 4) + feat, seed=16)
    length = np.array([3, 0, 1, 4, 2], np.int64)
    res = op("sequence_unpad").forward(x, length)
    want = np.concatenate([x[i, :n] for i, n in enumerate(length)])
    if not feat:
        want = want.reshape(-1, 1)      # fluid resizes [N, T] to [sum, 1]
    np.testing.assert_array_equal(res["Out"], want)
    assert res["lod"] == {"Out": ((0, 3, 3, 4, 8, 10),)}
    dout = rand(want.shape, seed=17)
    dx = op("sequence_unpad").backward(x, length, dout)["X"]
    wdx = np.zeros(x.shape)
    k = 0
    for i, n in enumerate(length):
        wdx[i, :n] = dout[k:k + n].reshape((n,) + feat)
        k += n
    np.testing.assert_array_equal(dx, wdx)
    spec = op("sequence_unpad").infer(VarSpec([5, 4] + list(feat), "float64"),
                                      VarSpec([5], "int64"))["Out"]
    assert list(spec.shape) == [-1] + (list(feat) or [1]) and spec.lod_level == 1


def test_sequence_unpad_refuses_lengths_that_do_not_fit():
    x = rand((3, 4), seed=18)
    for bad in ([1, 2], [1, 5, 0], [1, -1, 2]):
        msg = f"sequence_unpad: Length {bad} does not fit X of shape [3, 4]"
        with pytest.raises(ValueError, match="^" + re.escape(msg) + "$"):
            op("sequence_unpad").forward(x, np.array(bad))
    res = op("sequence_unpad").forward(x, np.array([4, 0, 4]))
    assert res["Out"].shape == (8, 1)


# -- sequence_reshape -------------------------------------------------------------------------
def test_sequence_reshape():
    x = rand((6, 4), seed=19)
    lod = ((0, 1, 2), (0, 2, 2, 6))
    res = op("sequence_reshape").forward(x, lod={"X": lod}, new_dim=8)
    np.testing.assert_array_equal(res["Out"], x.reshape(3, 8))
    assert res["lod"] == {"Out": ((0, 1, 2), (0, 1, 1, 3))}
    res = op("sequence_reshape").forward(x, lod={"X": ((0, 1, 6),)}, new_dim=2)
    assert res["lod"] == {"Out": ((0, 2, 12),)}
    np.testing.assert_array_equal(res["Out"], x.reshape(12, 2))
    dout = rand((12, 2), seed=20)
    dx = op("sequence_reshape").backward(x, dout, lod={"X": ((0, 1, 6),)}, new_dim=2)["X"]
    np.testing.assert_array_equal(dx, dout.reshape(6, 4))
    msg = ("sequence_reshape: a sequence of 4-wide rows does not split into rows of width 3 "
           "(lengths [1, 5])")
    with pytest.raises(ValueError, match="^" + re.escape(msg) + "$"):
        op("sequence_reshape").forward(x, lod={"X": ((0, 1, 6),)}, new_dim=3)
    with pytest.raises(ValueError, match="^" + re.escape(
            "sequence_reshape: X must be 2-D [N, D], got [6, 4, 1]") + "$"):
        op("sequence_reshape").infer(VarSpec([6, 4, 1], "float32", 1), new_dim=2)
    spec = op("sequence_reshape").infer(VarSpec([6, 4], "float32", 2), new_dim=2)["Out"]
    assert list(spec.shape) == [-1, 2] and spec.lod_level == 2


# -- sequence_concat / slice / reverse / enumerate / scatter ----------------------------------
def test_sequence_concat_interleaves_the_sequences():
    a, b, c = rand((4, 2), seed=21), rand((3, 2), seed=22), rand((2, 2), seed=23)
    lods = [((0, 1, 1, 4),), ((0, 0, 2, 3),), ((0, 2, 2, 2),)]
    res = op("sequence_concat").forward([a, b, c], lod={"X": lods})
    want, lens = [], []
    for i in range(3):
        parts = [segs(t, l[0])[i] for t, l in zip((a, b, c), lods)]
        want += parts
        lens.append(sum(len(p) for p in parts))
    want = np.concatenate(want)
    np.testing.assert_array_equal(res["Out"], want)
    assert res["lod"] == {"Out": (tuple(np.concatenate([[0], np.cumsum(lens)])),)}
    dout = rand(want.shape, seed=24)
    da, db, dc = op("sequence_concat").backward([a, b, c], dout, lod={"X": lods})["X"]
    # the gradient of each input is its rows of dOut: concat(dx) puts them back
    np.testing.assert_array_equal(
        op("sequence_concat").forward([da, db, dc], lod={"X": lods})["Out"], dout)
    assert (da.shape, db.shape, dc.shape) == (a.shape, b.shape, c.shape)
    with pytest.raises(ValueError, match="^sequence_concat: every input must have the same "
                                         "number of sequences$"):
        op("sequence_concat").forward([a, b], lod={"X": [((0, 4),), ((0, 1, 3),)]})
    spec = op("sequence_concat").infer([VarSpec([4, 2], "float64", 1), VarSpec([3, 2], "float64", 1)])
    assert list(spec["Out"].shape) == [-1, 2] and spec["Out"].lod_level == 1


def test_sequence_slice():
    x = rand((10, 2), seed=25)
    offset, length = np.array([[1], [0], [0], [1], [0]]), np.array([[2], [0], [1], [3], [2]])
    res = op("sequence_slice").forward(x, offset, length, lod={"X": (OFF,)})
    want = np.concatenate([s[o:o + n] for s, o, n in zip(segs(x, OFF), offset[:, 0],
                                                          length[:, 0])])
    np.testing.assert_array_equal(res["Out"], want)
    assert res["lod"] == {"Out": ((0, 2, 2, 3, 6, 8),)}
    dout = rand(want.shape, seed=26)
    dx = op("sequence_slice").backward(x, offset, length, dout, lod={"X": (OFF,)})["X"]
    wdx = np.zeros(x.shape)
    k = 0
    for i, (o, n) in enumerate(zip(offset[:, 0], length[:, 0])):
        wdx[OFF[i] + o:OFF[i] + o + n] = dout[k:k + n]
        k += n
    np.testing.assert_array_equal(dx, wdx)
    for o, n in [([0, 0, 0, 2, 0], [3, 0, 1, 3, 2]), ([0, 0, -1, 0, 0], [1, 0, 1, 1, 1]),
                 ([0, 0, 0, 0, 0], [1, 0, -1, 1, 1])]:
        msg = (f"sequence_slice: slices (offset {o}, length {n}) exceed the sequence lengths "
               f"{LENS}")
        with pytest.raises(ValueError, match="^" + re.escape(msg) + "$"):
            op("sequence_slice").forward(x, np.array(o), np.array(n), lod={"X": (OFF,)})
    for o, n in [([0] * 4, [0] * 5), ([0] * 5, [0] * 4)]:
        with pytest.raises(ValueError, match="^" + re.escape(
                "sequence_slice: Offset and Length need one entry per sequence (5)") + "$"):
            op("sequence_slice").forward(x, np.array(o), np.array(n), lod={"X": (OFF,)})
    # a slice reaching the end exactly is allowed
    res = op("sequence_slice").forward(x, np.array([1, 0, 0, 0, 0]), np.array([2, 0, 1, 4, 2]),
                                       lod={"X": (OFF,)})
    assert res["Out"].shape == (9, 2)


def test_sequence_reverse():
    x = rand((10, 3), seed=27)
    res = op("sequence_reverse").forward(x, lod={"X": (OFF,)})
    np.testing.assert_array_equal(res["Y"], np.concatenate([s[::-1] for s in segs(x, OFF)]))
    assert res["lod"] == {"Y": (OFF,)}
    dy = rand((10, 3), seed=28)
    dx = op("sequence_reverse").backward(x, dy, lod={"X": (OFF,)})["X"]
    np.testing.assert_array_equal(dx, np.concatenate([s[::-1] for s in segs(dy, OFF)]))


def test_sequence_enumerate():
    x = np.arange(1, 11).reshape(10, 1).astype(np.int64)
    res = op("sequence_enumerate").forward(x, lod={"X": (OFF,)}, win_size=3, pad_value=-7)
    want = []
    for s in segs(x.reshape(-1), OFF):
        for t in range(len(s)):
            want.append([s[t + j] if t + j < len(s) else -7 for j in range(3)])
    np.testing.assert_array_equal(res["Out"], want)
    assert res["Out"].dtype == np.int64 and res["lod"] == {"Out": (OFF,)}
    res = op("sequence_enumerate").forward(x[:3], lod={"X": ((0, 3),)})    # win 2, pad 0
    np.testing.assert_array_equal(res["Out"], [[1, 2], [2, 3], [3, 0]])
    res = op("sequence_enumerate").forward(np.zeros((0, 1), np.int32), lod={"X": ((0, 0),)},
                                           win_size=2)
    assert res["Out"].shape == (0, 2) and res["Out"].dtype == np.int32
    spec = op("sequence_enumerate").infer(VarSpec([-1, 1], "int64", 1), win_size=4)["Out"]
    assert list(spec.shape) == [-1, 4] and spec.lod_level == 1


def test_sequence_scatter():
    x = rand((3, 5), seed=29)
    ids = np.array([[0], [4], [0], [2], [1], [1]], np.int64)
    upd = rand((6, 1), seed=30)
    lod = {"Ids": ((0, 3, 3, 6),), "Updates": ((0, 3, 3, 6),)}
    res = op("sequence_scatter").forward(x, ids, upd, lod=lod)
    want = x.copy()
    rows = [0, 0, 0, 2, 2, 2]
    for j in range(6):
        want[rows[j], ids[j, 0]] += upd[j, 0]
    np.testing.assert_allclose(res["Out"], want, rtol=1e-15)
    assert not np.shares_memory(res["Out"], x)
    dout = rand((3, 5), seed=31)
    g = op("sequence_scatter").backward(x, ids, upd, dout, lod=lod)
    np.testing.assert_array_equal(g["X"], dout)
    np.testing.assert_array_equal(g["Updates"], [[dout[rows[j], ids[j, 0]]] for j in range(6)])
    with pytest.raises(ValueError, match="^" + re.escape(
            "sequence_scatter: Ids has 2 sequences, X has 3 rows; they must match") + "$"):
        op("sequence_scatter").forward(x, ids, upd, lod={"Ids": ((0, 3, 6),)})
    for bad in (5, -1):
        with pytest.raises(ValueError, match="^" + re.escape(
                "sequence_scatter: ids must lie in [0, 5)") + "$"):
            op("sequence_scatter").forward(x, np.array([[bad], [0], [0], [0], [0], [0]]), upd,
                                           lod=lod)


# -- lod_reset / sequence_mask ----------------------------------------------------------------
def test_lod_reset_from_y_values_target_lod_and_append():
    x = rand((6, 2), seed=32)
    lr = op("lod_reset")
    res = lr.forward(x, np.array([0, 2, 6]), lod={"X": ((0, 3, 6),)})
    assert res["lod"] == {"Out": ((0, 2, 6),)} and res["Out"] is x
    res = lr.forward(x, None, lod={"X": ((0, 3, 6),)}, target_lod=[0, 1, 6])
    assert res["lod"] == {"Out": ((0, 1, 6),)}
    res = lr.forward(x, None, lod={"X": ((0, 1, 3),)}, target_lod=[0, 1, 4, 6], append=True)
    assert res["lod"] == {"Out": ((0, 1, 3), (0, 1, 4, 6))}
    ylod = ((0, 1, 2), (0, 4, 6))
    res = lr.forward(x, rand((6, 1)), lod={"X": ((0, 6),), "Y": ylod})
    assert res["lod"] == {"Out": ylod}
    errors = [
        (dict(Y=None, target_lod=[]), "lod_reset: give Y or target_lod (the new offsets)"),
        (dict(Y=None, target_lod=[1, 6]), "lod_reset: offsets must start at 0 and never "
                                          "decrease, got [1, 6]"),
        (dict(Y=None, target_lod=[0, 4, 3, 6]), "lod_reset: offsets must start at 0 and never "
                                                "decrease, got [0, 4, 3, 6]"),
        (dict(Y=None, target_lod=[0, 5]), "lod_reset: the offsets [0, 5] must end at the row "
                                          "count 6"),
        (dict(Y=None, target_lod=[0, 5], append=True), "lod_append: the offsets [0, 5] must end "
                                                       "at the row count 6"),
        (dict(Y=None, target_lod=[0, 2, 6], append=True), "lod_append: X's last level ends at "
                                                          "3 sequences, the appended level has 2"),
    ]
    for kw, msg in errors:
        y = kw.pop("Y")
        with pytest.raises(ValueError, match="^" + re.escape(msg) + "$"):
            lr.forward(x, y, lod={"X": ((0, 1, 2, 3),)}, **kw)
    with pytest.raises(ValueError, match="^" + re.escape(
            "lod_reset: the last level of Y's LoD [0, 4, 5] must end at X's row count 6") + "$"):
        lr.forward(x, rand((5, 1)), lod={"Y": ((0, 4, 5),)})
    dout = rand((6, 2))
    assert lr.backward(x, dout, lod={"X": ((0, 6),)})["X"] is dout
    # infer: Y's level count when Y is given; else 1, or X's levels + 1 with append
    spec = lambda n: VarSpec([6, 2], "float32", n)                     # noqa: E731
    assert lr.infer(spec(2), spec(3), append=False)["Out"].lod_level == 3
    assert lr.infer(spec(2), spec(0), append=False)["Out"].lod_level == 1
    assert lr.infer(spec(2), None, append=False)["Out"].lod_level == 1
    assert lr.infer(spec(2), None, append=True)["Out"].lod_level == 3
    assert list(lr.infer(spec(2), None, append=True)["Out"].shape) == [6, 2]


def test_sequence_mask():
    x = np.array([[3, 0], [1, 4]], np.int64)
    sm = op("sequence_mask")
    y = sm.forward(x)["Y"]
    np.testing.assert_array_equal(y, (np.arange(4) < x[..., None]).astype(np.int64))
    assert y.dtype == np.int64 and y.shape == (2, 2, 4)
    y = sm.forward(x, maxlen=6, out_dtype=VarType.FP32)["Y"]
    assert y.dtype == np.float32 and y.shape == (2, 2, 6)
    np.testing.assert_array_equal(y, np.arange(6) < x[..., None])
    y = sm.forward(x, np.array([2, 9]), maxlen=6)["Y"]
    assert y.shape == (2, 2, 2)
    np.testing.assert_array_equal(y, np.arange(2) < x[..., None])
    assert sm.forward(np.zeros((0,), np.int64))["Y"].shape == (0, 0)
    with pytest.raises(ValueError, match="^sequence_mask: MaxLenTensor is empty; feed a \\[1\\] "
                                         "tensor holding maxlen$"):
        sm.forward(x, np.zeros(0, np.int64))
    spec = sm.infer(VarSpec([2, 2], "int64"), maxlen=5, out_dtype=VarType.INT32)["Y"]
    assert list(spec.shape) == [2, 2, 5] and spec.dtype == VarType.INT32
    assert list(sm.infer(VarSpec([2], "int64"), maxlen=-1, out_dtype=VarType.INT64)["Y"].shape) \
        == [2, -1]
    assert list(sm.infer(VarSpec([2], "int64"), VarSpec([1], "int64"), maxlen=5,
                         out_dtype=VarType.INT64)["Y"].shape) == [2, -1]


# -- what the reruns of the surviving mutants asked for ---------------------------------------
def _raises(msg, fn, *args, **kw):
    with pytest.raises(ValueError, match="^" + re.escape(msg) + "$"):
        fn(*args, **kw)


def test_every_kernel_without_its_lod_says_which_op_and_slot():
    x = rand((4, 1), seed=40)
    hint = ("has no LoD; feed a LoDTensor (fluid.create_lod_tensor(data, lengths, place)) to a "
            "variable declared with lod_level >= 1")
    cases = [
        ("sequence_pool", "X", lambda o: o.backward(x, None, rand((2, 1)), lod={},
                                                    pooltype="SUM")),
        ("sequence_softmax", "X", lambda o: o.forward(x)),
        ("sequence_softmax", "X", lambda o: o.backward(x, x, x)),
        ("sequence_expand_as", "Y", lambda o: o.backward(x, None, x, lod={"X": ((0, 4),)})),
        ("sequence_pad", "X", lambda o: o.forward(x, np.zeros(1))),
        ("sequence_pad", "X", lambda o: o.backward(x, np.zeros(1), rand((1, 4, 1)))),
        ("sequence_reshape", "X", lambda o: o.forward(x, new_dim=1)),
        ("sequence_conv", "X", lambda o: o.forward(x, rand((3, 2)), contextLength=3)),
        ("sequence_enumerate", "X", lambda o: o.forward(x.astype(np.int64), win_size=2)),
        ("sequence_concat", "X[1]", lambda o: o.forward([x, x], lod={"X": [((0, 4),), None]})),
    ]
    for name, slot, call in cases:
        _raises(f"{name}: input {slot} {hint}", call, op(name))


def test_sequence_pool_defaults_three_levels_and_a_single_row():
    x = rand((5, 2), seed=41)
    lod = ((0, 1, 2), (0, 2, 3), (0, 1, 3, 5))
    res = op("sequence_pool").forward(x, lod={"X": lod})            # AVERAGE by default
    np.testing.assert_allclose(res["Out"], [x[0], x[1:3].mean(0), x[3:5].mean(0)])
    assert res["lod"] == {"Out": ((0, 1, 2), (0, 2, 3))}
    dout = rand((3, 2), seed=42)
    dx = op("sequence_pool").backward(x, None, dout, lod={"X": lod})["X"]
    np.testing.assert_allclose(dx, [dout[0], dout[1] / 2, dout[1] / 2, dout[2] / 2, dout[2] / 2])
    one = rand((1, 3), seed=43)                                     # one row, one sequence
    res = op("sequence_pool").forward(one, lod={"X": ((0, 1),)}, pooltype="MAX")
    np.testing.assert_array_equal(res["Out"], one)
    np.testing.assert_array_equal(res["MaxIndex"], [[0, 0, 0]])
    res = op("sequence_pool").forward(np.zeros((0, 2)), lod={"X": ((0, 0),)}, pooltype="MAX")
    assert res["MaxIndex"].dtype == np.int32


def test_sequence_softmax_of_a_huge_logit_is_nan_silently():
    """fluid's unshifted kernel: exp(1000) overflows, inf / inf is NaN -- without warnings."""
    import warnings
    x = np.array([1000.0, 0.0, 1.0, 2.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = op("sequence_softmax").forward(x, lod={"X": ((0, 2, 4),)})["Out"]
    assert np.isnan(out[0])
    e = np.exp([1.0, 2.0])
    np.testing.assert_allclose(out[2:], e / e.sum())


@pytest.mark.parametrize("name", ["sequence_expand", "sequence_slice", "sequence_conv"])
def test_build_time_specs_keep_the_dtype_and_set_the_lod_level(name):
    f32 = VarType.FP32
    if name == "sequence_expand":
        spec = op(name).infer(VarSpec([3, 2], "float32"), VarSpec([5, 1], "float64", 1),
                              ref_level=-1)["Out"]
        assert spec.dtype == f32
    elif name == "sequence_slice":
        spec = op(name).infer(VarSpec([6, 2, 3], "float32", 2), VarSpec([2, 1], "int64"),
                              VarSpec([2, 1], "int64"))["Out"]
        assert spec.dtype == f32 and spec.lod_level == 1 and list(spec.shape) == [-1, 2, 3]
    else:
        spec = op(name).infer(VarSpec([6, 2], "float32", 2), VarSpec([6, 5], "float32"), None,
                              contextLength=3)["Out"]
        assert spec.dtype == f32 and spec.lod_level == 2 and list(spec.shape) == [-1, 5]
        spec = op(name).infer(VarSpec([6, 2], "float32"), VarSpec([6, 5], "float32"), None,
                              contextLength=3)["Out"]
        assert spec.lod_level == 1


def test_sequence_conv_build_time_checks():
    infer = op("sequence_conv").infer
    X, F = VarSpec([6, 2], "float32", 1), VarSpec([6, 5], "float32")
    msg = "sequence_conv: X must be [N, D] and Filter [contextLength * D, M]"
    _raises(msg, infer, VarSpec([6, 2, 1], "float32", 1), F, None, contextLength=3)
    _raises(msg, infer, X, VarSpec([6], "float32"), None, contextLength=3)
    _raises("sequence_conv: Filter height 6 must be contextLength * D = 2 * 2", infer, X, F,
            None, contextLength=2)
    # unknown widths are checked when the data arrives
    infer(VarSpec([6, -1], "float32", 1), F, None, contextLength=2)
    infer(X, VarSpec([-1, 5], "float32"), None, contextLength=2)
    _raises("sequence_conv: paddingTrainable=True needs the PaddingData input ([2, 2])", infer,
            X, F, None, contextLength=3, contextStart=-1, paddingTrainable=True)
    msg = ("sequence_conv: PaddingData must be [up_pad + down_pad, D] = [2, 2] for "
           "contextStart=-1, contextLength=3, got {}")
    for bad in ([3, 2], [2, 3], [2, 2, 1]):
        _raises(msg.format(bad), infer, X, F, VarSpec(bad, "float32"), contextLength=3,
                contextStart=-1, paddingTrainable=True)
    for ok in ([-1, 2], [2, -1]):
        infer(X, F, VarSpec(ok, "float32"), contextLength=3, contextStart=-1,
              paddingTrainable=True)
    infer(VarSpec([6, -1], "float32", 1), VarSpec([-1, 5], "float32"), VarSpec([2, 7], "float32"),
          contextLength=3, contextStart=-1, paddingTrainable=True)
    _raises("sequence_conv: only contextStride = 1 is supported (as in fluid)",
            op("sequence_conv").forward, rand((4, 2)), rand((6, 5)), lod={"X": ((0, 4),)},
            contextLength=3, contextStride=2)


def ref_seq_conv(x, off, f, length, start):
    n, d = x.shape
    cols = np.zeros((n, length * d))
    for i in range(len(off) - 1):
        for t in range(off[i], off[i + 1]):
            for j in range(length):
                r = t + start + j
                if off[i] <= r < off[i + 1]:
                    cols[t, j * d:(j + 1) * d] = x[r]
    return cols @ f


def test_sequence_conv_defaults_and_a_one_row_batch():
    """contextStart 0, contextStride 1, no trainable padding by default; a batch of one row
    reads zeros around it (also in the gradient)."""
    x, f = rand((5, 2), seed=44), rand((6, 4), seed=45)
    off = (0, 2, 5)
    out = op("sequence_conv").forward(x, f, lod={"X": (off,)}, contextLength=3)["Out"]
    np.testing.assert_allclose(out, ref_seq_conv(x, off, f, 3, 0), rtol=1e-12)
    dout = rand(out.shape, seed=46)
    g = op("sequence_conv").backward(x, f, None, dout, lod={"X": (off,)}, contextLength=3)
    # the adjoint: <dOut, conv(dx)> = <dX, dx> for any dx
    probe = rand(x.shape, seed=47)
    np.testing.assert_allclose((ref_seq_conv(probe, off, f, 3, 0) * dout).sum(),
                               (g["X"] * probe).sum(), rtol=1e-10)
    assert "PaddingData" not in g
    one = rand((1, 2), seed=48)
    out = op("sequence_conv").forward(one, f, lod={"X": ((0, 1),)}, contextLength=3,
                                      contextStart=-1)["Out"]
    np.testing.assert_allclose(out, ref_seq_conv(one, (0, 1), f, 3, -1), rtol=1e-12)
    g = op("sequence_conv").backward(one, f, None, np.ones((1, 4)), lod={"X": ((0, 1),)},
                                     contextLength=3, contextStart=-1)
    np.testing.assert_allclose(g["X"], f[2:4].sum(1)[None, :], rtol=1e-12)


def test_float32_gradients_stay_float32():
    x = rand((10, 3), seed=49).astype(np.float32)
    d32 = lambda shape: rand(shape, seed=50).astype(np.float32)         # noqa: E731
    lod = {"X": (OFF,)}
    dx = op("sequence_slice").backward(x, np.zeros(5, np.int64), np.array([1, 0, 1, 1, 1]),
                                       d32((4, 3)), lod=lod)["X"]
    assert dx.dtype == np.float32
    xp = rand((5, 4, 3), seed=51).astype(np.float32)
    length = np.array([3, 0, 1, 4, 2])
    dx = op("sequence_unpad").backward(xp, length, d32((10, 3)))["X"]
    assert dx.dtype == np.float32
    out = op("sequence_unpad").forward(xp, length.reshape(5, 1))["Out"]     # Length [N, 1]
    assert out.shape == (10, 3)
    dx = op("sequence_unpad").backward(xp, length.reshape(5, 1), d32((10, 3)))["X"]
    np.testing.assert_array_equal(dx[1], 0)                  # the empty sequence


def test_sequence_reshape_defaults_and_integer_offsets():
    x = rand((4, 2), seed=52)
    res = op("sequence_reshape").forward(x, lod={"X": ((0, 1, 4),)})       # new_dim 1
    np.testing.assert_array_equal(res["Out"], x.reshape(8, 1))
    assert res["lod"] == {"Out": ((0, 2, 8),)}
    res = op("sequence_reshape").forward(x, lod={"X": ((0, 2, 4),)}, new_dim=4)
    assert all(isinstance(v, (int, np.integer)) for v in res["lod"]["Out"][-1])


def test_sequence_pad_padded_length_zero_and_no_sequences():
    x = rand((3, 2), seed=53)
    _raises("sequence_pad: padded_length 0 is shorter than the longest sequence (2)",
            op("sequence_pad").forward, x, np.zeros(1), lod={"X": ((0, 2, 3),)},
            padded_length=0)
    res = op("sequence_pad").forward(np.zeros((0, 2)), np.zeros(1), lod={"X": ((0,),)})
    assert res["Out"].shape == (0, 0, 2) and res["Length"].shape == (0,)


def test_sequence_concat_and_slice_specs_and_messages():
    spec = op("sequence_concat").infer([VarSpec([4, 2], "float32", 1),
                                        VarSpec([3, 5], "float64", 1)])["Out"]
    assert list(spec.shape) == [-1, 2] and spec.dtype == VarType.FP32
    x = rand((4, 2), seed=54)
    _raises("sequence_slice: Offset and Length need one entry per sequence (2)",
            op("sequence_slice").backward, x, np.zeros(1), np.zeros(2), rand((1, 2)),
            lod={"X": ((0, 1, 4),)})


def test_more_kernels_without_lod_and_edge_sizes():
    x = rand((4, 2), seed=55)
    hint = ("has no LoD; feed a LoDTensor (fluid.create_lod_tensor(data, lengths, place)) to a "
            "variable declared with lod_level >= 1")
    _raises(f"sequence_reverse: input X {hint}", op("sequence_reverse").forward, x)
    _raises(f"sequence_slice: input X {hint}", op("sequence_slice").forward, x,
            np.zeros(1), np.ones(1))
    _raises(f"sequence_scatter: input Ids {hint}", op("sequence_scatter").forward, x,
            np.zeros((1, 1), np.int64), np.ones((1, 1)))
    # one id: the window past it reads pad_value
    res = op("sequence_enumerate").forward(np.array([[7]]), lod={"X": ((0, 1),)}, win_size=3,
                                           pad_value=-1)
    np.testing.assert_array_equal(res["Out"], [[7, -1, -1]])
    # maxlen 0 is an empty mask (only a negative maxlen means max(X))
    y = op("sequence_mask").forward(np.array([2, 0]), maxlen=0)["Y"]
    assert y.shape == (2, 0)
    spec = op("sequence_mask").infer(VarSpec([2], "int64"), maxlen=0, out_dtype=VarType.INT64)
    assert list(spec["Y"].shape) == [2, 0]


def test_lod_reset_offsets_with_empty_sequences_and_a_decrease_at_the_end():
    x = rand((6, 2), seed=56)
    res = op("lod_reset").forward(x, None, target_lod=[0, 2, 2, 6])
    assert res["lod"] == {"Out": ((0, 2, 2, 6),)}
    _raises("lod_reset: offsets must start at 0 and never decrease, got [0, 2, 7, 6]",
            op("lod_reset").forward, x, None, target_lod=[0, 2, 7, 6])
    spec = op("lod_reset").infer(VarSpec([6, 2], "float32", 1), None, append=False)["Out"]
    assert spec.dtype == VarType.FP32
    spec = op("lod_reset").infer(VarSpec([6, 2], "float32", 1), VarSpec([3], "int32", 2),
                                 append=False)["Out"]
    assert spec.dtype == VarType.FP32 and spec.lod_level == 2


def test_sequence_conv_padding_rows_and_an_unused_padding_input():
    """contextStart -1, contextLength 2: one trainable padding row (above each sequence);
    PaddingData given without paddingTrainable is not read and gets a zero gradient."""
    x, f = rand((4, 2), seed=57), rand((4, 3), seed=58)
    pad = rand((1, 2), seed=59)
    off = (0, 3, 4)
    attrs = dict(contextLength=2, contextStart=-1)
    out = op("sequence_conv").forward(x, f, pad, lod={"X": (off,)}, paddingTrainable=True,
                                      **attrs)["Out"]
    cols = np.zeros((4, 4))
    for t in range(4):
        s = 0 if t < 3 else 3
        cols[t, :2] = x[t - 1] if t - 1 >= s else pad[0]
        cols[t, 2:] = x[t]
    np.testing.assert_allclose(out, cols @ f, rtol=1e-12)
    dout = rand((4, 3), seed=60)
    g = op("sequence_conv").backward(x, f, pad, dout, lod={"X": (off,)}, paddingTrainable=True,
                                     **attrs)
    np.testing.assert_allclose(g["PaddingData"], (dout @ f.T)[[0, 3], :2].sum(0, keepdims=True),
                               rtol=1e-12)
    g = op("sequence_conv").backward(x, f, pad, dout, lod={"X": (off,)}, **attrs)
    np.testing.assert_array_equal(g["PaddingData"], np.zeros((1, 2)))
