"""ops/paddle2_ext.py: Paddle 2.x ops of exported models. Values and analytic gradients are
compared with Paddle 2.6 in tests/ops/test_paddle_oracle.py; here every differentiable one
gets float64 central differences with random upstream weights (OpTest.check_grad), plus the
values a reference written here gives, and the errors."""
import math

import numpy as np
import pytest

from fluidlite.core.registry import VarSpec, get_op_def
from fluidlite.testing import OpTest

RNG = np.random.default_rng(40)


def _u(*shape, low=-1.0, high=1.0):
    return RNG.uniform(low, high, shape)


def _check(op_type, inputs, attrs, out_slot, grads, **kw):
    op = get_op_def(op_type)
    res = op.forward(*[inputs.get(s.name) for s in op.in_slots], **attrs)

    class T(OpTest):
        pass
    T.op_type, T.inputs, T.attrs = op_type, inputs, attrs
    T.outputs = {out_slot: res[out_slot]}
    T().check_output(atol=1e-12, rtol=1e-12)
    if grads:
        T().check_grad(grads, out_slot, **kw)
    return res[out_slot]


UNARY = [("tan", np.tan, {}, (-1, 1)), ("sinh", np.sinh, {}, (-1, 1)),
         ("cosh", np.cosh, {}, (-1, 1)), ("asinh", np.arcsinh, {}, (-3, 3)),
         ("acosh", np.arccosh, {}, (1.2, 4)), ("atanh", np.arctanh, {}, (-0.9, 0.9)),
         ("log2", np.log2, {}, (0.1, 5)), ("log10", np.log10, {}, (0.1, 5)),
         ("expm1", np.expm1, {}, (-1, 1)),
         ("celu", lambda x: np.where(x > 0, x, 0.75 * (np.exp(x / 0.75) - 1)), {"alpha": 0.75},
          (-3, 2)),
         ("logit", lambda x: np.log(x / (1 - x)), {"eps": 0.0}, (0.05, 0.95))]


@pytest.mark.parametrize("op_type,ref,attrs,bounds", UNARY)
def test_unary_values_and_gradients(op_type, ref, attrs, bounds):
    x = _u(3, 4, low=bounds[0], high=bounds[1])
    got = _check(op_type, {"X": x}, attrs, "Out", ["X"])
    np.testing.assert_allclose(got, ref(x), rtol=1e-12, atol=1e-14)


def test_erfinv_inverts_erf_and_its_gradient():
    from math import erf
    y = _u(3, 4, low=-0.999, high=0.999)
    got = _check("erfinv", {"X": y}, {}, "Out", ["X"])
    np.testing.assert_allclose(np.vectorize(erf)(got), y, rtol=0, atol=1e-15)
    edge = get_op_def("erfinv").forward(np.array([-1.0, 1.0, 1.5, 0.0]))["Out"]
    assert edge[0] == -np.inf and edge[1] == np.inf and np.isnan(edge[2]) and edge[3] == 0


def test_trunc_logit_clip_and_celu_alpha():
    x = np.array([-2.7, -0.5, 0.3, 0.5, 2.7])
    got = _check("trunc", {"X": x}, {}, "Out", ["X"], allow_zero_grad=True)   # (Paddle: 0)
    assert got.tolist() == [-2.0, -0.0, 0.0, 0.0, 2.0]
    lg = get_op_def("logit")
    out = lg.forward(np.array([0.01, 0.5, 0.99]), eps=0.1)["Out"]
    e = float(np.float32(0.1))                          # a FLOAT attribute, 32 bits
    np.testing.assert_allclose(out, [math.log(e / (1 - e)), 0.0, math.log((1 - e) / e)])
    g = lg.backward(np.array([0.01, 0.5, 0.99]), np.ones(3), eps=0.1)["X"]
    assert g.tolist() == [0.0, 4.0, 0.0]
    with pytest.raises(ValueError, match="celu: alpha must not be 0"):
        get_op_def("celu").infer(VarSpec((2,), "float32"), alpha=0.0)


def test_binary_ternary_and_scan_gradients():
    x1, x2 = _u(3, 4), _u(3, 4)
    np.testing.assert_allclose(_check("atan2", {"X1": x1, "X2": x2}, {}, "Out",
                                      ["X1", "X2"]), np.arctan2(x1, x2))
    x, y, w = _u(3, 4), _u(3, 4), _u(4)
    np.testing.assert_allclose(_check("lerp", {"X": x, "Y": y, "Weight": w}, {}, "Out",
                                      ["X", "Y", "Weight"]), x + w * (y - x))
    z = np.array([[1.5, 0.0, 2.0, -1.0], [0.5, 2.0, 0.0, 0.0], [0.3, -0.7, 1.1, 0.9]])
    got = _check("cumprod", {"X": z}, {"dim": 1}, "Out", ["X"])
    np.testing.assert_allclose(got, [[1.5, 0, 0, 0], [0.5, 1.0, 0, 0],
                                     [0.3, -0.21, -0.231, -0.2079]], atol=1e-15)


@pytest.mark.parametrize("op_type", ["reduce_amax", "reduce_amin"])
def test_extreme_reductions_share_the_gradient_among_ties(op_type):
    x = np.array([[1.0, 3.0, 3.0], [-2.0, -2.0, 0.5]])
    op = get_op_def(op_type)
    out = op.forward(x, dim=[1])["Out"]
    assert out.tolist() == ([3.0, 0.5] if op_type == "reduce_amax" else [1.0, -2.0])
    g = op.backward(x, out, np.array([2.0, 4.0]), dim=[1])["X"]
    want = [[0, 1, 1], [0, 0, 4]] if op_type == "reduce_amax" else [[2, 0, 0], [2, 2, 0]]
    assert g.tolist() == want
    _check(op_type, {"X": RNG.permutation(24).reshape(2, 3, 4) * 0.1},
           {"dim": [0, 2], "keep_dim": True, "reduce_all": False}, "Out", ["X"])


def test_diagonal_and_layout_ops():
    a = _u(3, 4, 5)
    got = _check("diagonal", {"Input": a}, {"offset": 1, "axis1": 2, "axis2": 0}, "Out",
                 ["Input"])
    np.testing.assert_array_equal(got, np.diagonal(a, 1, 2, 0))
    x = np.arange(2 * 6 * 2 * 2, dtype=np.float64).reshape(2, 6, 2, 2)
    got = _check("channel_shuffle", {"X": x}, {"groups": 3, "data_format": "NCHW"}, "Out", ["X"])
    np.testing.assert_array_equal(got[0, :, 0, 0], x[0, [0, 2, 4, 1, 3, 5], 0, 0])
    x = np.arange(16, dtype=np.float64).reshape(1, 1, 4, 4)
    got = _check("pixel_unshuffle", {"X": x}, {"downscale_factor": 2, "data_format": "NCHW"},
                 "Out", ["X"])
    assert got.shape == (1, 4, 2, 2) and got[0, :, 0, 0].tolist() == [0, 1, 4, 5]
    _check("pixel_unshuffle", {"X": _u(1, 4, 6, 2)},
           {"downscale_factor": 2, "data_format": "NHWC"}, "Out", ["X"])
    with pytest.raises(ValueError, match="must be divisible by downscale_factor"):
        get_op_def("pixel_unshuffle").infer(VarSpec((1, 1, 3, 4), "float32"),
                                            downscale_factor=2)


def test_index_ops():
    x = _u(3, 4, 5)
    idx = RNG.integers(0, 4, (2, 6, 5)).astype(np.int64)
    got = _check("take_along_axis", {"Input": x, "Index": idx}, {"Axis": 1}, "Result",
                 ["Input"])
    ref = np.array([[[x[i, idx[i, j, k], k] for k in range(5)] for j in range(6)]
                    for i in range(2)])
    np.testing.assert_array_equal(got, ref)
    inp, val = _u(3, 4), _u(1, 4)
    index = np.array([[0, 2, 2, 1]], np.int64)
    got = _check("put_along_axis", {"Input": inp, "Index": index, "Value": val},
                 {"Axis": 0, "Reduce": "add", "Include_self": True}, "Result",
                 ["Input", "Value"])
    ref = inp.copy()
    for j in range(4):
        ref[index[0, j], j] += val[0, j]
    np.testing.assert_allclose(got, ref)
    with pytest.raises(ValueError, match="Reduce 'mean' is not supported"):
        get_op_def("put_along_axis").infer(VarSpec((3, 4), "float64"),
                                           VarSpec((1, 4), "int64"),
                                           VarSpec((1, 4), "float64"), Reduce="mean")
    got = _check("index_add", {"X": _u(4, 3), "Index": np.array([2, 0, 2], np.int64),
                               "AddValue": _u(3, 3)}, {"axis": 0}, "Out", ["X", "AddValue"])
    got = _check("repeat_interleave", {"X": _u(3, 4),
                                       "RepeatsTensor": np.array([2, 0, 3], np.int64)},
                 {"dim": 0}, "Out", ["X"])
    assert got.shape == (5, 4)
    with pytest.raises(ValueError, match="index values must be in \\[-4, 4\\)"):
        get_op_def("take_along_axis").forward(x, np.full((3, 1, 5), 4, np.int64), Axis=1)


def test_set_value_slices_values_and_gradients():
    x = _u(3, 5)
    got = _check("set_value", {"Input": x, "ValueTensor": _u(1, 3)},
                 dict(axes=[0, 1], starts=[1, 0], ends=[3, 5], steps=[1, 2]), "Out",
                 ["Input", "ValueTensor"])
    assert (got[1:, ::2] == got[1, ::2]).all() and (got[0] == x[0]).all()
    # Paddle <= 2.5 files: <dtype>_values; an int index (decrease_axes) and negative steps
    op = get_op_def("set_value")
    out = op.forward(x, axes=[0, 1], starts=[0, 1], ends=[1, 3], steps=[1, 1],
                     decrease_axes=[0], shape=[2], fp64_values=[7.0, -2.0])["Out"]
    assert out[0, 1:3].tolist() == [7.0, -2.0] and (out[1:] == x[1:]).all()
    out = op.forward(_u(4, 3), axes=[0], starts=[-1], ends=[-5], steps=[-2], shape=[1],
                     values=[0.5])["Out"]
    assert out[[3, 1]].ravel().tolist() == [0.5] * 6
    with pytest.raises(ValueError, match="cannot be assigned to a slice of shape \\[2, 5\\]"):
        op.forward(x, np.ones((3,)), axes=[0], starts=[1], ends=[3], steps=[1])


@pytest.mark.parametrize("bos", [True, False])
def test_viterbi_decode_against_enumeration(bos):
    pot, trans = _u(3, 4, 4), _u(4, 4)
    lengths = np.array([4, 1, 3], np.int64)
    res = get_op_def("viterbi_decode").forward(pot, trans, lengths, include_bos_eos_tag=bos)
    path = _check("viterbi_decode", {"Input": pot, "Transition": trans, "Length": lengths},
                  {"include_bos_eos_tag": bos}, "Path", [])
    assert path.dtype == np.int64 and path.shape == (3, 4)
    import itertools
    for b, n in enumerate(lengths):
        best, arg = -np.inf, None
        for tags in itertools.product(range(4), repeat=int(n)):
            s = sum(pot[b, t, k] for t, k in enumerate(tags))
            s += sum(trans[tags[t - 1], tags[t]] for t in range(1, len(tags)))
            if bos:
                s += trans[3, tags[0]] + trans[2, tags[-1]]       # rows N-1 and N-2
            if s > best + 1e-12:
                best, arg = s, tags
        assert res["Path"][b, :n].tolist() == list(arg) and not res["Path"][b, n:].any()
        np.testing.assert_allclose(res["Scores"][b], best, rtol=1e-12)


@pytest.mark.parametrize("pixel_offset", [True, False])
def test_generate_proposals_v2_properties(pixel_offset):
    """(Paddle 2.6's own numbers: tests/ops/test_paddle_oracle.py) Run through a program:
    boxes inside the image, at least min_size, scores sorted, NMS respected, RpnRoisNum
    counting the LoD."""
    import fluidlite as fluid
    from fluidlite.ops.detection import iou_matrix
    a, h, w = 2, 3, 4
    anchors = RNG.uniform(0, 20, (h, w, a, 2))
    anchors = np.concatenate([anchors, anchors + RNG.uniform(4, 12, (h, w, a, 2))], -1)
    main = fluid.Program()
    blk = main.global_block()
    feed = {"scores": RNG.permutation(2 * a * h * w).reshape(2, a, h, w) * 0.01,
            "deltas": _u(2, 4 * a, h, w) * 0.3, "im": np.array([[24.0, 30.0], [20.0, 26.0]]),
            "anchors": anchors, "var": np.ones((h, w, a, 4))}
    ins = {k: blk.create_var(name=k, shape=v.shape, dtype="float64", is_data=True)
           for k, v in feed.items()}
    outs = {n: blk.create_var(name=n) for n in ("rois", "probs", "num")}
    blk.append_op("generate_proposals_v2",
                  {"Scores": ins["scores"], "BboxDeltas": ins["deltas"], "ImShape": ins["im"],
                   "Anchors": ins["anchors"], "Variances": ins["var"]},
                  {"RpnRois": outs["rois"], "RpnRoiProbs": outs["probs"],
                   "RpnRoisNum": outs["num"]},
                  dict(pre_nms_topN=20, post_nms_topN=10, nms_thresh=0.5, min_size=3.0,
                       pixel_offset=pixel_offset))
    rois, probs, num = fluid.Executor().run(main, feed=feed, fetch_list=["rois", "probs", "num"],
                                            return_numpy=False)
    rois, probs, num = np.array(rois), np.array(probs), np.array(num)
    off = 1.0 if pixel_offset else 0.0
    assert num.dtype == np.int32 and num.sum() == rois.shape[0] and (num <= 10).all()
    start = 0
    for i, n in enumerate(num.tolist()):
        b, s = rois[start:start + n], probs[start:start + n, 0]
        start += n
        ih, iw = feed["im"][i]
        assert (b[:, [0, 2]] >= 0).all() and (b[:, [0, 2]] <= iw - off).all()
        assert (b[:, [1, 3]] >= 0).all() and (b[:, [1, 3]] <= ih - off).all()
        assert (b[:, 2] - b[:, 0] + off >= 3.0 - 1e-9).all() and (np.diff(s) <= 0).all()
        iou = iou_matrix(b, b, normalized=not pixel_offset)
        assert (iou[np.triu_indices(len(b), 1)] <= 0.5).all()


def test_mutation_gaps_shapes_modes_and_messages():
    """Kills the first mutation sample's real survivors: inference with unknown dims, the
    'assign' mode, a values attribute of two dims, cumprod over a leading dim, the errors."""
    f32 = "float32"
    spec = get_op_def("lerp").infer(VarSpec((-1, 4), f32), VarSpec((3, 4), f32),
                                    VarSpec((4,), f32))["Out"]
    assert spec == VarSpec((-1, -1), f32)
    pu = get_op_def("pixel_unshuffle").infer(VarSpec((1, 2, 4, 6), f32), downscale_factor=2)
    assert pu == {"Out": VarSpec((1, 8, 2, 3), f32)}
    pu = get_op_def("pixel_unshuffle").infer(VarSpec((1, 4, 6, 2), f32), downscale_factor=2,
                                             data_format="NHWC")
    assert pu == {"Out": VarSpec((1, 2, 3, 8), f32)}
    vd = get_op_def("viterbi_decode").infer(VarSpec((2, 5, 4), f32), VarSpec((4, 4), f32),
                                            VarSpec((2,), "int64"))
    assert vd == {"Scores": VarSpec((2,), f32), "Path": VarSpec((2, -1), "int64")}
    with pytest.raises(ValueError, match="Input must be \\[batch, steps, tags\\]"):
        get_op_def("viterbi_decode").infer(VarSpec((2, 5), f32), VarSpec((4, 4), f32),
                                           VarSpec((2,), "int64"))
    with pytest.raises(ValueError, match="the 6 channels must be divisible by groups \\(4\\)"):
        get_op_def("channel_shuffle").infer(VarSpec((1, 6, 2, 2), f32), groups=4)
    # cumprod along a leading dim of a 3-D tensor (the scan moves it last)
    z = _u(3, 2, 4)
    got = _check("cumprod", {"X": z}, {"dim": 0}, "Out", ["X"])
    np.testing.assert_allclose(got, np.cumprod(z, axis=0))
    # put_along_axis 'assign': the value replaces, its gradient is the result's there
    inp, val = _u(3, 4), _u(1, 4)
    index = np.array([[0, 2, 2, 1]], np.int64)
    got = _check("put_along_axis", {"Input": inp, "Index": index, "Value": val},
                 {"Axis": 0, "Reduce": "assign", "Include_self": True}, "Result",
                 ["Input", "Value"])
    ref = inp.copy()
    ref[index[0], np.arange(4)] = val[0]
    np.testing.assert_array_equal(got, ref)
    # set_value from a values attribute shaped [2, 1]
    x = _u(3, 4)
    out = get_op_def("set_value").forward(x, axes=[0, 1], starts=[0, 1], ends=[2, 2],
                                          steps=[1, 1], shape=[2, 1], values=[5.0, 6.0])["Out"]
    assert out[:2, 1].tolist() == [5.0, 6.0] and (out[2] == x[2]).all()
    for op_type, kw, msg in (("cumprod", {"dim": 2}, "cumprod: dim 2 is out of range"),
                             ("diagonal", {"axis1": 0, "axis2": 2},
                              "diagonal: axis2 2 is out of range"),
                             ("repeat_interleave", {"Repeats": 1, "dim": 3},
                              "repeat_interleave: dim 3 is out of range")):
        with pytest.raises(ValueError, match=msg):
            get_op_def(op_type).forward(_u(2, 2), **kw)
    with pytest.raises(ValueError, match="take_along_axis: Axis 2 is out of range"):
        get_op_def("take_along_axis").infer(VarSpec((2, 2), f32), VarSpec((2, 2), "int64"),
                                            Axis=2)
    with pytest.raises(ValueError, match="set_value: decrease_axes entry 5 is out of range"):
        get_op_def("set_value").forward(x, axes=[0], starts=[0], ends=[1], steps=[1],
                                        decrease_axes=[5], values=[1.0], shape=[1])
    # matrix_power's gradient keeps a float32 input's dtype
    m = _u(3, 3).astype(np.float32)
    g = get_op_def("matrix_power").backward(m, np.ones((3, 3), np.float32), n=3)["X"]
    assert g.dtype == np.float32
