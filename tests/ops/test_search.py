"""fluid 1.8's text-matching ops (ops/search.py): ``match_matrix_tensor``, ``var_conv_2d``,
``sequence_topk_avg_pooling`` against per-sample NumPy loops written from the formulas, their
LoD, numeric float64 gradient checks (random upstream gradients) and argument errors."""
import numpy as np
import pytest

from tests.ops.test_rnn import build, check_grad, rand, run


def test_match_matrix_tensor_forward_and_lod():
    h, t = 3, 2
    xl, yl = [1, 2], [3, 1]
    x, y, w = rand(3, h, seed=1), rand(4, h, seed=2), rand(h, t, h, seed=3)
    out, tmp = run("match_matrix_tensor", {"X": (x, xl), "Y": (y, yl), "W": w}, {"dim_t": t},
                   ["Out", "Tmp"], return_numpy=False)
    want, xs, ys = [], np.split(x, [1]), np.split(y, [3])
    for xi, yi in zip(xs, ys):
        o = np.zeros((t, len(xi), len(yi)))
        for tt in range(t):
            for a in range(len(xi)):
                for b in range(len(yi)):
                    o[tt, a, b] = xi[a] @ w[:, tt, :] @ yi[b]
        want.append(o.reshape(-1))
    np.testing.assert_allclose(np.asarray(out).reshape(-1), np.concatenate(want), atol=1e-12)
    assert out.recursive_sequence_lengths() == [[2 * 1 * 3, 2 * 2 * 1]]
    np.testing.assert_allclose(np.asarray(tmp).reshape(-1),
                               (x @ w.reshape(h, -1)).reshape(-1), atol=1e-12)


def test_match_matrix_tensor_grad():
    check_grad("match_matrix_tensor", {"X": (rand(3, 2, seed=1), [1, 2]),
                                       "Y": (rand(4, 2, seed=2), [3, 1]),
                                       "W": rand(2, 2, 2, seed=3)}, {"dim_t": 2}, ["Out"],
               ["X", "Y", "W"])


def _var_conv_ref(img, kh, kw, sh, sw, w):
    """img [C, H, W]: plain loops over output pixels and kernel taps, the kernel centred
    (kh // 2 rows and kw // 2 columns before the pixel), zeros outside; an empty map gives
    no output pixels."""
    C, H, W_ = img.shape
    oh = (H - 1) // sh + 1 if H else 0
    ow = (W_ - 1) // sw + 1 if W_ else 0
    col = np.zeros((C, kh, kw, oh, ow))
    for z in range(C):
        for oy in range(oh):
            for ox in range(ow):
                for ky in range(kh):
                    for kx in range(kw):
                        iy, ix = oy * sh + ky - kh // 2, ox * sw + kx - kw // 2
                        if 0 <= iy < H and 0 <= ix < W_:
                            col[z, ky, kx, oy, ox] = img[z, iy, ix]
    col = col.reshape(C * kh * kw, oh * ow)
    return (w @ col).reshape(-1), col.reshape(-1)


def _var_conv_inputs(ci=2, co=3, rows=(2, 3), cols=(3, 1), kh=3, kw=2, seed=0):
    sizes = [r * c * ci for r, c in zip(rows, cols)]
    return {"X": (rand(sum(sizes), 1, seed=seed), sizes),
            "ROW": (rand(sum(rows), 2, seed=seed + 1), list(rows)),
            "COLUMN": (rand(sum(cols), 2, seed=seed + 2), list(cols)),
            "W": rand(co, ci * kh * kw, seed=seed + 3)}


@pytest.mark.parametrize("stride", [(1, 1), (2, 1)])
def test_var_conv_2d_forward(stride):
    ins = _var_conv_inputs()
    attrs = {"InputChannel": 2, "OutputChannel": 3, "KernelH": 3, "KernelW": 2,
             "StrideH": stride[0], "StrideW": stride[1]}
    out, col = run("var_conv_2d", ins, attrs, ["Out", "Col"], return_numpy=False)
    x, start, want_o, want_c = ins["X"][0].reshape(-1), 0, [], []
    for r, c in zip((2, 3), (3, 1)):
        img = x[start:start + 2 * r * c].reshape(2, r, c)
        start += 2 * r * c
        o, cc = _var_conv_ref(img, 3, 2, stride[0], stride[1], ins["W"])
        want_o.append(o)
        want_c.append(cc)
    np.testing.assert_allclose(np.asarray(out).reshape(-1), np.concatenate(want_o), atol=1e-12)
    np.testing.assert_allclose(np.asarray(col).reshape(-1), np.concatenate(want_c), atol=1e-12)
    assert out.recursive_sequence_lengths() == [[len(o) for o in want_o]]


def test_var_conv_2d_grad():
    check_grad("var_conv_2d", _var_conv_inputs(), {"InputChannel": 2, "OutputChannel": 3,
                                                   "KernelH": 3, "KernelW": 2, "StrideH": 2},
               ["Out"], ["X", "W"])


def test_var_conv_2d_errors():
    ins = _var_conv_inputs()
    with pytest.raises(ValueError, match=r"W must be \[OutputChannel, InputChannel \* KernelH"):
        build("var_conv_2d", ins, {"InputChannel": 2, "OutputChannel": 3, "KernelH": 1,
                                   "KernelW": 1}, ["Out"])
    with pytest.raises(ValueError, match=r"sequence 0 of X must hold ROW length \* COLUMN "):
        run("var_conv_2d", ins, {"InputChannel": 1, "OutputChannel": 3, "KernelH": 3,
                                 "KernelW": 4}, ["Out"])


def _topk_inputs(rows=(2, 1), cols=(4, 2), ch=2, seed=0):
    sizes = [r * c * ch for r, c in zip(rows, cols)]
    x = np.random.default_rng(seed).permutation(sum(sizes)).astype(float).reshape(-1, 1)
    return {"X": (x, sizes), "ROW": (rand(sum(rows), 2), list(rows)),
            "COLUMN": (rand(sum(cols), 2), list(cols))}


def test_sequence_topk_avg_pooling_forward():
    ins, topks = _topk_inputs(), [1, 3]
    out, pos = run("sequence_topk_avg_pooling", ins, {"topks": topks, "channel_num": 2},
                   ["Out", "pos"], return_numpy=False)
    x, start, want, want_pos = ins["X"][0].reshape(-1), 0, [], []
    for r, c in zip((2, 1), (4, 2)):
        m = x[start:start + 2 * r * c].reshape(2, r, c)
        start += 2 * r * c
        for row in range(r):
            vals = []
            for z in range(2):
                s = sorted(m[z, row], reverse=True)
                vals += [sum(s[:k]) / k for k in topks]
                p = list(np.argsort(-m[z, row])[:3]) + [-1] * (3 - min(c, 3))
                want_pos += p
            want.append(vals)
    np.testing.assert_allclose(np.asarray(out), want, atol=1e-12)
    np.testing.assert_array_equal(np.asarray(pos), want_pos)
    assert out.recursive_sequence_lengths() == [[2, 1]]


def test_sequence_topk_avg_pooling_grad():
    check_grad("sequence_topk_avg_pooling", _topk_inputs(seed=1),
               {"topks": [1, 2], "channel_num": 2}, ["Out"], ["X"])
