"""An fc layer's forward (mul + bias add [+ relu]) as one kernel at plan time
(executor/fusion/patterns/linear_act.py): training gives the unfused ops' bits, the product and
the biased sum are never made, and the fusion stays away from chains whose temporaries something
else reads."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.core import registry
from fluidlite.executor import fusion
from fluidlite.executor.fusion.patterns import linear_act

L = fluid.layers
FEED = {"x": np.random.default_rng(0).standard_normal((6, 4, 5)),
        "y": np.random.default_rng(1).integers(0, 3, (24, 1))}


def build(dtype="float64", fetch_inner=False, act="relu"):
    """x [6, 4, 5] -> fc(relu, 3-D: num_flatten_dims 2) -> fc(act) -> fc -> cross entropy."""
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 7
    with fluid.unique_name.guard(), fluid.program_guard(main, startup):
        x = fluid.data("x", [-1, 4, 5], dtype)
        y = fluid.data("y", [-1, 1], "int64")
        h = L.fc(x, 8, num_flatten_dims=2, act="relu")           # [6, 4, 8]
        h = L.reshape(h, [-1, 8])
        h = L.fc(h, 7, act=act)
        logits = L.fc(h, 3)
        loss = L.mean(L.softmax_with_cross_entropy(logits, y))
        fluid.optimizer.SGD(0.5).minimize(loss)
    fetch = [loss] + ([main.global_block().var("fc_0.tmp_0")] if fetch_inner else [])
    return main, startup, fetch


def train(main, startup, fetch, dtype, steps=4):
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    feed = {"x": FEED["x"].astype(dtype), "y": FEED["y"]}
    out = [exe.run(main, feed=feed, fetch_list=fetch, scope=scope) for _ in range(steps)]
    params = {p.name: np.asarray(scope.find_var(p.name).get_tensor()).copy()
              for p in main.all_parameters()}
    return out, params


def fused_types(main, fetch):
    block = main.global_block()
    return [op.type for op in fusion.fuse(list(block.ops), block, [v.name for v in fetch],
                                          FEED)]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_fc_layers_train_with_the_unfused_bits(dtype, monkeypatch):
    main, startup, fetch = build(dtype)
    types = fused_types(main, fetch)
    assert types.count("fused(mul+elementwise_add+relu)") == 2
    assert types.count("fused(mul+elementwise_add)") == 1
    assert "mul" not in types and "relu" not in types
    got, got_params = train(main, startup, fetch, dtype)
    monkeypatch.setattr(fusion, "PIPELINE", tuple(
        p for p in fusion.PIPELINE if p not in (linear_act.LINEAR_ACT, linear_act.LINEAR)))
    main2, startup2, fetch2 = build(dtype)
    assert "mul" in fused_types(main2, fetch2)
    want, want_params = train(main2, startup2, fetch2, dtype)
    for g, w in zip(got, want):
        assert np.array_equal(g[0], w[0])
    assert got_params.keys() == want_params.keys()
    for k in got_params:
        assert got_params[k].dtype == np.dtype(dtype)
        assert np.array_equal(got_params[k], want_params[k]), k
    assert got[-1][0] < got[0][0]                   # it learns


def test_fc_layer_matches_float64_formula():
    # the fused forward against an independent formula: relu(x @ W + b)
    main, startup, _ = build()
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    test_prog = main.clone(for_test=True)
    tb = test_prog.global_block()
    assert [op.type for op in fusion.fuse(list(tb.ops), tb, ["fc_1.tmp_2"], FEED)].count(
        "fused(mul+elementwise_add+relu)") == 2
    out, = exe.run(test_prog, feed={"x": FEED["x"], "y": FEED["y"]},
                   fetch_list=[test_prog.global_block().var("fc_1.tmp_2")], scope=scope)
    w0, b0, w1, b1 = (np.asarray(scope.find_var(n).get_tensor())
                      for n in ("fc_0.w_0", "fc_0.b_0", "fc_1.w_0", "fc_1.b_0"))
    h0 = np.maximum(FEED["x"] @ w0 + b0, 0).reshape(-1, 8)
    np.testing.assert_allclose(out, np.maximum(h0 @ w1 + b1, 0), rtol=1e-12, atol=1e-12)


def test_a_fetched_product_stays_unfused():
    main, startup, fetch = build(fetch_inner=True)
    types = fused_types(main, fetch)
    assert types.count("fused(mul+elementwise_add+relu)") == 1     # the fetched layer is not
    got, _ = train(main, startup, fetch, "float64", steps=1)
    assert got[0][1].shape == (6, 4, 8) and np.abs(got[0][1]).sum() > 0


def test_a_fetched_biased_sum_keeps_the_relu_apart():
    # fc_0.tmp_1 (product + bias, before the relu) fetched: mul + add fuse, the sum is made
    main, startup, _ = build()
    block = main.global_block()
    fetch = [block.var("fc_0.tmp_1"), block.var("fc_0.tmp_2")]
    types = fused_types(main, fetch)
    assert types.count("fused(mul+elementwise_add+relu)") == 1
    assert types.count("fused(mul+elementwise_add)") == 2
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    pre, post = exe.run(main.clone(for_test=True), feed={"x": FEED["x"], "y": FEED["y"]},
                        fetch_list=fetch, scope=scope)
    assert pre.shape == (6, 4, 8) and np.array_equal(post, np.maximum(pre, 0))
    assert (pre < 0).any()


def test_another_value_reader_keeps_the_chain(monkeypatch):
    # tanh after the add: LINEAR fuses mul + add, the sum is made (tanh's gradient reads its
    # Out, the forward reads the sum); a value reader of the product would stop both
    main, startup, fetch = build(act="tanh")
    types = fused_types(main, fetch)
    assert types.count("fused(mul+elementwise_add)") == 2 and "tanh" in types
    main2, startup2, fetch2 = build(act="tanh")
    block = main2.global_block()
    with fluid.program_guard(main2, startup2):
        extra = L.reduce_sum(block.var("fc_1.tmp_0"))        # reads fc_1's product itself
    ops = fusion.fuse(list(block.ops), block, [fetch2[0].name, extra.name], FEED)
    covered = [n for op in ops for c in getattr(op, "covered", [])
               for n in c.output_arg_names]
    assert "fc_1.tmp_0" not in covered and "fc_0.tmp_0" in covered


@pytest.mark.parametrize("op_type", sorted(
    t for t in registry.all_op_types() if registry.get_op_def(t).shape_only_inputs))
def test_shape_only_inputs_are_never_read(op_type):
    # every declared shape-only input of a grad op: zeros of its shape give the same gradients
    d = registry.get_op_def(op_type)
    fwd = d.forward_def
    rng = np.random.default_rng(2)
    for xs, ys, axis in (((4, 3), (3,), -1), ((2, 3, 4), (3,), 1), ((5, 2), (5, 2), -1)):
        X, Y = rng.standard_normal(xs), rng.standard_normal(ys)
        dout = rng.standard_normal(fwd.forward(X, Y, axis=axis)["Out"].shape)
        real = d.forward(X, Y, dout, axis=axis)
        ins = {"X": X, "Y": Y}
        for slot in d.shape_only_inputs:
            ins[slot] = np.broadcast_to(np.zeros((), ins[slot].dtype), ins[slot].shape)
        stand = d.forward(ins["X"], ins["Y"], dout, axis=axis)
        assert real.keys() == stand.keys()
        for k in real:
            assert np.array_equal(real[k], stand[k])


def _chain(w_shape=(6, 6), b_shape=(6,), axis=-1, y_cols=1, dtype="float64", act=True,
           between=False):
    """x [5, 6] -> mul(W) -> elementwise_add(b, axis) [-> relu], built op by op; ``between``:
    a scale writing W between the mul and the add."""
    main = fluid.Program()
    rng = np.random.default_rng(3)
    with fluid.program_guard(main, fluid.Program()):
        block = main.global_block()
        x = fluid.data("x", [5, 6], dtype)
        w = L.create_parameter(list(w_shape), dtype, name="W")
        b = L.create_parameter(list(b_shape), dtype, name="b")
        p = block.create_var(name="p", dtype=dtype)
        block.append_op("mul", {"X": x, "Y": w}, {"Out": p},
                        {"x_num_col_dims": 1, "y_num_col_dims": y_cols})
        if between:
            block.append_op("scale", {"X": w}, {"Out": w}, {"scale": 2.0})
        s = block.create_var(name="s", dtype=dtype)
        block.append_op("elementwise_add", {"X": p, "Y": b}, {"Out": s}, {"axis": axis})
        out = s
        if act:
            out = block.create_var(name="o", dtype=dtype)
            block.append_op("relu", {"X": s}, {"Out": out}, {})
    values = {"x": rng.standard_normal((5, 6)).astype(dtype),
              "W": rng.standard_normal(w_shape).astype(dtype),
              "b": rng.standard_normal(b_shape).astype(dtype)}
    return main, out.name, values


def _run_chain(main, out, values):
    block = main.global_block()
    types = [op.type for op in fusion.fuse(list(block.ops), block, [out], ["x"])]
    scope = fluid.Scope()
    for k in ("W", "b"):
        scope.var(k).get_tensor().set(values[k], fluid.CPUPlace())
    got, = fluid.Executor().run(main, feed={"x": values["x"]}, fetch_list=[out], scope=scope)
    return types, got


@pytest.mark.parametrize("act", [True, False])
def test_the_chain_fuses_and_computes_fcs_formula(act):
    main, out, v = _chain(act=act)
    types, got = _run_chain(main, out, v)
    assert types == ["fused(mul+elementwise_add+relu)" if act else "fused(mul+elementwise_add)"]
    want = v["x"] @ v["W"] + v["b"]
    np.testing.assert_allclose(got, np.maximum(want, 0) if act else want, rtol=1e-13)


@pytest.mark.parametrize("case", [
    dict(w_shape=(6, 5), b_shape=(5,), axis=0),     # the bias down the rows: not fc's add
    dict(b_shape=(1,)),                             # a broadcast scalar, not a [width] bias
    dict(w_shape=(3, 2, 6), b_shape=(6,), y_cols=2),    # W flattened at its 2nd dim
    dict(dtype="float16"),                          # a float16 product is made in float32
    dict(between=True),                             # W rewritten between the mul and the add
])
def test_chains_fc_does_not_compute_stay_unfused(case):
    main, out, v = _chain(**case)
    types, got = _run_chain(main, out, v)
    assert "mul" in types and not any(t.startswith("fused(mul") for t in types)
    x, w, b = (v[k].astype(np.float64) for k in ("x", "W", "b"))
    if case.get("axis") == 0:
        want = x @ w + b[:, None]
    else:                               # (with ``between`` the mul read W before the scale)
        want = x @ w.reshape(6, -1) + b
    tol = 2e-2 if case.get("dtype") == "float16" else 1e-12
    np.testing.assert_allclose(got, np.maximum(want, 0), rtol=tol, atol=tol)


def test_the_fast_kernel_and_its_stand_ins_follow_the_shape():
    # the lowered fused kernel (fc's fast path): Out as fc computes it, and a zero stand-in of
    # Out's shape and dtype for every call -- also when the batch size changes between calls
    from fluidlite.core.dtypes import VarType
    from fluidlite.core.registry import VarSpec
    from fluidlite.executor.fusion.kernels.linear_act import LinearAct
    fc = registry.get_op_def("fc")
    specs = [VarSpec((-1, 5), VarType.FP64), VarSpec((5, 4), VarType.FP64),
             VarSpec((4,), VarType.FP64)]
    assert fc.lower(specs, {}) is not None          # fc's defaults: no activation
    rng = np.random.default_rng(9)
    w, b = rng.standard_normal((5, 4)), rng.standard_normal(4)
    for act in ("", "relu"):
        fast = LinearAct(1, act, ["Product"]).lower(specs, {})
        for rows in (6, 3, 3, 8):
            x = rng.standard_normal((rows, 5))
            got = fast(x, w, b)
            want = fc.forward(x, w, b, activation_type=act)["Out"]
            assert np.array_equal(got["Out"], want)
            z = got["Product"]
            assert z.shape == (rows, 4) and z.dtype == np.float64 and not z.any()
            assert not z.flags.writeable
        assert LinearAct(1, act, []).lower(specs, {})(x, w, b).shape == (8, 4)
