"""NaN and Inf propagate through every loss and reduction kernel (issue 11), as fluid's kernels
do, all through the real Executor. The only masking kept is fluid's own:

* TolerableValue in the cross-entropy kernels: -log(0) = +inf becomes 1e20 and -log(+inf) =
  -inf becomes -1e20 (so a 0 soft label times log(0) adds 0, not NaN); NaN is never touched;
* rows/entries whose label equals ``ignore_index`` give loss 0 (and gradient 0) whatever X is;
* reduce_max/min gradients flow to the entries equal to the result (X == Out), so a NaN row
  gets gradient 0 there, exactly fluid's mask.
"""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.core.ir import Program, program_guard

# IEEE invalid/overflow warnings are the expected by-product of NaN/Inf inputs here
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")
NAN, INF = np.nan, np.inf
EXE = fluid.Executor(fluid.CPUPlace())


def run_op(op_type, inputs, attrs=None, outs=("Out",), grads=()):
    """Run one op on fed arrays; returns {out slot: array} plus {"d" + input slot: gradient of
    sum(first output) w.r.t. that input} for each slot in ``grads``."""
    main = Program()
    block = main.global_block()
    with program_guard(main, Program()):
        in_vars = {}
        for slot, arr in inputs.items():
            in_vars[slot] = block.create_var(name=slot.lower(), shape=arr.shape, dtype=arr.dtype,
                                             is_data=True, stop_gradient=slot not in grads)
        out_vars = {s: block.create_var(name=s.lower() + "_out") for s in outs}
        block.append_op(op_type, in_vars, out_vars, dict(attrs or {}))
        fetch = [out_vars[s] for s in outs]
        if grads:
            loss = fluid.layers.reduce_sum(out_vars[outs[0]])
            fetch += fluid.backward.gradients([loss], [in_vars[s] for s in grads])
    got = EXE.run(main, feed={s.lower(): a for s, a in inputs.items()}, fetch_list=fetch,
                  scope=fluid.Scope())
    keys = list(outs) + ["d" + s for s in grads]
    return dict(zip(keys, got))


def f32(*rows):
    return np.array(rows, dtype=np.float32)


LAB = np.array([[0], [1], [2]], np.int64)
PROBS = f32([0.7, 0.2, 0.1], [0.3, 0.4, 0.3], [0.1, 0.1, 0.8])


# -- cross_entropy2 (the hard-label layer) and legacy cross_entropy --------------------------
@pytest.mark.parametrize("op_type,outs", [("cross_entropy2", ("Y", "XShape", "MatchX")),
                                          ("cross_entropy", ("Y",))])
def test_hard_label_cross_entropy_propagates_nan_and_negative(op_type, outs):
    x = PROBS.copy()
    x[0, 1] = NAN          # a NaN off the label: the row's loss does not read it (as fluid)
    x[1, 1] = NAN          # a NaN at the label: NaN loss, NaN gradient
    x[2, 2] = -0.5         # a negative "probability": log of it is NaN
    r = run_op(op_type, {"X": x, "Label": LAB}, outs=outs, grads=("X",))
    y = r["Y"][:, 0]
    assert y[0] == pytest.approx(-np.log(0.7)) and np.isnan(y[1]) and np.isnan(y[2])
    assert np.isnan(r["dX"][1, 1]) and r["dX"][2, 2] == pytest.approx(2.0)
    assert np.isfinite(np.delete(r["dX"][1], 1)).all()


@pytest.mark.parametrize("op_type,outs", [("cross_entropy2", ("Y", "XShape", "MatchX")),
                                          ("cross_entropy", ("Y",))])
def test_hard_label_cross_entropy_keeps_fluids_tolerable_value(op_type, outs):
    x = PROBS.copy()
    x[0, 0], x[1, 1] = 0.0, INF
    r = run_op(op_type, {"X": x, "Label": LAB}, outs=outs, grads=("X",))
    y = r["Y"][:, 0]
    assert y[0] == np.float32(1e20)            # -log(0) = inf -> 1e20 (TolerableValue)
    assert y[1] == np.float32(-1e20)           # -log(inf) = -inf -> -1e20
    assert r["dX"][0, 0] == -INF               # the gradient has no such bound: -dY / 0
    assert r["dX"][1, 1] == 0.0                # -1 / inf


def test_cross_entropy_layer_nan_row_gives_nan_mean():
    """The issue's case: a NaN row made mean(cross_entropy) look normal (0.73)."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [-1, 3], "float32")
        lab = fluid.data("lab", [-1, 1], "int64")
        loss = fluid.layers.mean(fluid.layers.cross_entropy(fluid.layers.softmax(x), lab))
    xv = f32([1, 2, 3], [NAN, 0, 0], [0, 0, 1])
    got, = EXE.run(main, feed={"x": xv, "lab": LAB}, fetch_list=[loss], scope=fluid.Scope())
    assert np.isnan(got[0])


def test_soft_label_cross_entropy():
    lab = f32([0.5, 0.5, 0.0], [0.2, 0.3, 0.5], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0])
    x = f32([NAN, 0.5, 0.5], [0.2, -0.3, 1.1], [0.5, 0.0, 0.5], [0.5, 0.0, 0.5])
    r = run_op("cross_entropy", {"X": x, "Label": lab}, {"soft_label": True}, outs=("Y",),
               grads=("X", "Label"))
    y = r["Y"][:, 0]
    assert np.isnan(y[0]) and np.isnan(y[1])          # NaN prob; negative prob with label 0.3
    assert y[2] == pytest.approx(-np.log(0.5))        # 0 label times log(0): 0, not NaN
    assert y[3] == np.float32(1e20)                   # label 1 on prob 0: TolerableValue
    assert np.isnan(r["dX"][0, 0]) and np.isnan(r["dLabel"][0, 0])
    assert r["dLabel"][2, 1] == np.float32(1e20)      # d/dLabel of the tolerable forward
    lab2 = lab.copy()
    lab2[2, 1] = NAN                                  # a NaN label poisons its row
    r = run_op("cross_entropy", {"X": x, "Label": lab2}, {"soft_label": True}, outs=("Y",))
    assert np.isnan(r["Y"][2, 0]) and r["Y"][3, 0] == np.float32(1e20)


# -- softmax_with_cross_entropy ---------------------------------------------------------------
SWCE_OUTS = ("Loss", "Softmax")


def test_softmax_with_cross_entropy_hard():
    logits = f32([NAN, 1, 2], [INF, 0, 0], [0, -INF, 1], [-INF, 0, 1])
    lab = np.array([[2], [1], [0], [0]], np.int64)
    r = run_op("softmax_with_cross_entropy", {"Logits": logits, "Label": lab},
               outs=SWCE_OUTS, grads=("Logits",))
    loss = r["Loss"][:, 0]
    assert np.isnan(loss[0]) and np.isnan(r["Softmax"][0]).all()   # NaN logit: NaN row
    assert np.isnan(loss[1])                                       # +inf - max(+inf): NaN
    assert loss[2] == pytest.approx(np.log(1 + np.e))              # -inf off the label: exact
    # -inf at the label: fluid clips the shifted logit at -64 (ValueClip), so the loss is
    # 64 + log(sum), finite (it was 1e20 before issue 29)
    assert loss[3] == pytest.approx(64 + np.log(1 + np.exp(-1.0)), rel=1e-6)
    assert np.isnan(r["dLogits"][0]).all() and np.isfinite(r["dLogits"][2]).all()


def test_softmax_with_cross_entropy_soft():
    logits = f32([NAN, 1, 2], [0, -INF, 1], [0, -INF, 1])
    lab = f32([0.2, 0.3, 0.5], [0.5, 0.0, 0.5], [0.5, 0.25, 0.25])
    r = run_op("softmax_with_cross_entropy", {"Logits": logits, "Label": lab},
               {"soft_label": True}, outs=SWCE_OUTS, grads=("Logits", "Label"))
    loss = r["Loss"][:, 0]
    assert np.isnan(loss[0]) and np.isnan(r["dLogits"][0]).all()
    ls = np.log(1 + np.e)
    assert loss[1] == pytest.approx(0.5 * ls + 0.5 * (ls - 1))     # 0 label on a -inf logit
    # a 0.25 label on a -inf logit: -log(e^-64 / sum) = 64 + log(sum) (fluid's ValueClip)
    s2 = 1 + np.exp(-1.0) + np.exp(-65.0)
    assert loss[2] == pytest.approx(0.5 * (1 + np.log(s2)) + 0.25 * (64 + np.log(s2))
                                    + 0.25 * np.log(s2), rel=1e-6)
    lab2 = lab.copy()
    lab2[1, 0] = NAN
    r = run_op("softmax_with_cross_entropy", {"Logits": logits, "Label": lab2},
               {"soft_label": True}, outs=SWCE_OUTS)
    assert np.isnan(r["Loss"][1, 0])


# -- sigmoid_cross_entropy_with_logits ------------------------------------------------------
def test_sigmoid_cross_entropy_with_logits():
    x = f32(NAN, 1.0, INF, -INF, NAN)
    lab = f32(1.0, NAN, 0.0, 1.0, -100.0)     # the last entry is ignored (ignore_index)
    r = run_op("sigmoid_cross_entropy_with_logits", {"X": x, "Label": lab}, grads=("X",))
    out, dx = r["Out"], r["dX"]
    assert np.isnan(out[:3]).all()               # NaN in, or inf * 0 in x*label: NaN, as
    assert out[3] == INF                         # fluid's max(x,0) - x*label + log1p(...)
    assert out[4] == 0.0 and dx[4] == 0.0        # ignored: 0 even for a NaN logit
    assert np.isnan(dx[0]) and np.isnan(dx[1])
    r = run_op("sigmoid_cross_entropy_with_logits", {"X": x[1:2], "Label": f32(INF)})
    assert r["Out"][0] == -INF                   # an infinite label gives an infinite loss


# -- square_error_cost (a layer: elementwise_sub + square) ----------------------------------
def test_square_error_cost():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("x", [-1, 1], "float32")
        y = fluid.data("y", [-1, 1], "float32")
        cost = fluid.layers.square_error_cost(x, y)
        avg = fluid.layers.mean(cost)
    xv, yv = f32([NAN], [INF], [1.0], [INF]), f32([0.0], [0.0], [-INF], [INF])
    c, a = EXE.run(main, feed={"x": xv, "y": yv}, fetch_list=[cost, avg], scope=fluid.Scope())
    assert np.isnan(c[0, 0]) and c[1, 0] == INF and c[2, 0] == INF and np.isnan(c[3, 0])
    assert np.isnan(a[0])


# -- reductions -----------------------------------------------------------------------------
X_NAN = f32([1.0, NAN, 3.0], [4.0, 5.0, 6.0])
X_INF = f32([1.0, INF, 3.0], [4.0, 5.0, -INF])


@pytest.mark.parametrize("op_type", ["reduce_sum", "reduce_mean", "reduce_max", "reduce_min"])
@pytest.mark.parametrize("dim,reduce_all", [([1], False), ([0], False), ([0], True)])
def test_reductions_propagate_nan(op_type, dim, reduce_all):
    r = run_op(op_type, {"X": X_NAN}, {"dim": dim, "reduce_all": reduce_all}, grads=("X",))
    out = r["Out"]
    if reduce_all:
        assert np.isnan(out).all()
    elif dim == [1]:
        assert np.isnan(out[0]) and np.isfinite(out[1])
    else:
        assert np.isnan(out[1]) and np.isfinite(out[[0, 2]]).all()
    dx = r["dX"]
    if op_type in ("reduce_sum", "reduce_mean"):
        assert np.isfinite(dx).all()              # linear: the gradient does not read X
    else:
        assert not np.isnan(dx).any()             # fluid's mask X == Out: 0 where Out is NaN


@pytest.mark.parametrize("op_type,want", [
    ("reduce_sum", ([INF, -INF], [5.0, INF, -INF], NAN)),
    ("reduce_mean", ([INF, -INF], [2.5, INF, -INF], NAN)),
    ("reduce_max", ([INF, 5.0], [4.0, INF, 3.0], INF)),
    ("reduce_min", ([1.0, -INF], [1.0, 5.0, -INF], -INF))])
def test_reductions_propagate_inf(op_type, want):
    rows, cols, every = want
    np.testing.assert_array_equal(run_op(op_type, {"X": X_INF}, {"dim": [1]})["Out"], rows)
    np.testing.assert_array_equal(run_op(op_type, {"X": X_INF}, {"dim": [0]})["Out"], cols)
    np.testing.assert_array_equal(run_op(op_type, {"X": X_INF}, {"reduce_all": True})["Out"],
                                  [every])                # inf + -inf: NaN (IEEE, as fluid)


def test_mean_and_sum_ops():
    assert np.isnan(run_op("mean", {"X": X_NAN}, grads=("X",))["Out"][0])
    assert run_op("mean", {"X": f32([1.0, INF])})["Out"][0] == INF
    assert np.isnan(run_op("mean", {"X": X_INF})["Out"][0])
    r = EXE.run(*_sum_program(), scope=fluid.Scope())
    assert np.isnan(r[0][0]) and r[0][1] == INF and np.isnan(r[0][2])


def _sum_program():
    main = Program()
    block = main.global_block()
    names = ["a", "b"]
    vs = [block.create_var(name=n, shape=(3,), dtype="float32", is_data=True) for n in names]
    out = block.create_var(name="s")
    with program_guard(main, Program()):
        block.append_op("sum", {"X": vs}, {"Out": out}, {})
    feed = {"a": f32(NAN, INF, INF), "b": f32(1.0, 1.0, -INF)}
    return main, feed, [out]


def test_squared_l2_norm_and_clip_by_norm():
    sq = run_op("squared_l2_norm", {"X": f32([1.0, NAN])}, grads=("X",))
    assert np.isnan(sq["Out"][0]) and sq["dX"][0, 0] == 2 and np.isnan(sq["dX"][0, 1])
    assert run_op("squared_l2_norm", {"X": f32([1.0, -INF])})["Out"][0] == INF
    assert np.isnan(run_op("clip_by_norm", {"X": f32([1.0, NAN])}, {"max_norm": 1.0})["Out"]).all()


# -- gradient masks are products, not selects (fluid: dX = dOut * (X > Y)) -------------------
@pytest.mark.parametrize("op_type", ["elementwise_max", "elementwise_min", "hard_sigmoid"])
def test_masked_gradients_keep_a_nan_upstream_gradient(op_type):
    """d/dX sum(op(X[, Y]) * W) with a NaN in W: the NaN upstream gradient reaches dX (and dY)
    even where the mask is 0 (NaN * 0 = NaN), as in fluid's multiplicative kernels."""
    main = Program()
    block = main.global_block()
    xv, yv = f32(1.0, 5.0, 9.0), f32(2.0, 3.0, 0.0)
    wv = f32(NAN, NAN, 1.0)
    with program_guard(main, Program()):
        x = fluid.data("x", [3], "float32")
        y = fluid.data("y", [3], "float32")
        w = fluid.data("w", [3], "float32")
        x.stop_gradient = y.stop_gradient = False
        out = block.create_var(name="out")
        if op_type == "hard_sigmoid":
            block.append_op(op_type, {"X": x}, {"Out": out}, {})
        else:
            block.append_op(op_type, {"X": x, "Y": y}, {"Out": out}, {})
        loss = fluid.layers.reduce_sum(fluid.layers.elementwise_mul(out, w))
        wrt = [x] if op_type == "hard_sigmoid" else [x, y]
        grads = fluid.backward.gradients([loss], wrt)
    got = EXE.run(main, feed={"x": xv, "y": yv, "w": wv}, fetch_list=grads, scope=fluid.Scope())
    for g in got:
        assert np.isnan(g[:2]).all() and np.isfinite(g[2])


def test_softmax_nan_row_and_infinite_logits():
    """NaN poisons its row only; -inf gives probability e^-64 / sum (fluid floors the shifted
    logits at -64 with ValueClip, as fluidlite since issue 29); +inf gives a NaN row."""
    x = f32([NAN, 0, 1], [0, -INF, 0], [INF, 0, 0], [1, 2, 3])
    out = run_op("softmax", {"X": x}, {"axis": -1}, grads=("X",))["Out"]
    assert np.isnan(out[0]).all() and np.isnan(out[2]).all()
    e64 = np.exp(-64.0) / (2 + np.exp(-64.0))
    np.testing.assert_allclose(out[1], [0.5, e64, 0.5], rtol=1e-6)
    assert np.isfinite(out[3]).all()


@pytest.mark.parametrize("pool_type", ["max", "avg"])
def test_pool2d_window_reductions_propagate_nan(pool_type):
    x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    x[0, 0, 0, 0] = NAN
    x[0, 0, 3, 3] = INF
    r = run_op("pool2d", {"X": x}, {"pooling_type": pool_type, "ksize": [2, 2],
                                    "strides": [2, 2]}, grads=("X",))
    out = r["Out"][0, 0]
    assert np.isnan(out[0, 0]) and out[1, 1] == INF and np.isfinite([out[0, 1], out[1, 0]]).all()
