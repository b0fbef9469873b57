"""Issue 31: fluid's L2 decay (``scale`` of the parameter, ``sum`` with the clipped gradient)
folded into the fused update group of an op declaring ``folds_l2_decay`` -- bit for bit the
unfused plan's numbers, and left alone wherever its terms are seen or cannot be folded."""
import numpy as np
import pytest

import fluidlite as fluid
import fluidlite.executor.plan as plan_mod
from fluidlite.executor import fusion
from fluidlite.ops import inplace
from fluidlite.ops.optim import Momentum

OPTS = {"momentum": lambda **kw: fluid.optimizer.Momentum(0.05, 0.9, **kw),
        "nesterov": lambda **kw: fluid.optimizer.Momentum(0.05, 0.9, use_nesterov=True, **kw),
        "adam": lambda **kw: fluid.optimizer.Adam(0.01, **kw),
        "sgd": lambda **kw: fluid.optimizer.SGD(0.05, **kw),
        "lars": lambda **kw: fluid.optimizer.LarsMomentum(0.05, 0.9, **kw)}
UPDATE = {"nesterov": "momentum", "lars": "lars_momentum"}


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch):
    """Chunked in-place updates (and chunk boundaries) on small arrays: w0 (2400) and w1
    (1600) in place, the biases not."""
    monkeypatch.setattr(inplace, "CHUNK", 1024)
    monkeypatch.setattr(fusion, "_INPLACE_MIN", 1024)


def _program(opt, clip=True, coeffs=(1e-2, 1e-2), dtype="float32", sparse=False):
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 5
    with fluid.unique_name.guard(), fluid.program_guard(main, startup):
        x = fluid.data("x", [-1, 60], dtype)
        label = fluid.data("label", [-1, 1], "int64")
        if sparse:
            ids = fluid.data("ids", [-1, 1], "int64")
            emb = fluid.embedding(ids, [50, 60], is_sparse=True, dtype=dtype)
            x = x + fluid.layers.reshape(emb, [-1, 60])
        h = fluid.layers.fc(x, 40, act="relu", param_attr=fluid.ParamAttr(
            regularizer=fluid.regularizer.L2Decay(coeffs[0])))
        h = fluid.layers.fc(h, 40, act="tanh")
        logits = fluid.layers.fc(h, 3)
        if dtype != "float32":
            logits = fluid.layers.cast(logits, "float32")
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, label))
        gc = fluid.clip.GradientClipByGlobalNorm(0.5) if clip else None
        OPTS[opt](grad_clip=gc, regularization=fluid.regularizer.L2Decay(coeffs[1])
                  ).minimize(loss)
    return main, startup, loss


def _feeds(steps, dtype="float32", sparse=False):
    rng = np.random.default_rng(1)
    out = []
    for _ in range(steps):
        f = {"x": rng.normal(size=(8, 60)).astype(dtype),
             "label": rng.integers(0, 3, (8, 1)).astype("int64")}
        if sparse:
            f["ids"] = rng.integers(0, 50, (8, 1)).astype("int64")
        out.append(f)
    return out


def _train(fusion_on, opt, steps=4, fetch=(), feed_extra=None, **kw):
    old, plan_mod.ENABLE_FUSION = plan_mod.ENABLE_FUSION, fusion_on
    try:
        main, startup, loss = _program(opt, **kw)
        exe, scope = fluid.Executor(), fluid.Scope()
        exe.run(startup, scope=scope)
        outs = []
        for f in _feeds(steps, kw.get("dtype", "float32"), kw.get("sparse", False)):
            if feed_extra is not None:
                f.update(feed_extra(scope))
            outs.append(exe.run(main, feed=f, fetch_list=[loss, *fetch], scope=scope))
        state = {v.name: np.array(scope.find_var(v.name).get_tensor())
                 for v in main.list_vars()
                 if v.persistable and scope.find_var(v.name) is not None}
        (plan,) = exe.cached_plans(main)
        return outs, state, plan.step_types
    finally:
        plan_mod.ENABLE_FUSION = old


def _same_bits(got, ref):
    (outs, state, _), (ref_outs, ref_state, _) = got, ref
    assert set(state) == set(ref_state)
    for n, v in ref_state.items():
        assert state[n].tobytes() == v.tobytes(), n
    for a, b in zip(outs, ref_outs):
        assert [np.asarray(x).tobytes() for x in a] == [np.asarray(x).tobytes() for x in b]


@pytest.mark.parametrize("clip", [True, False], ids=["clip", "noclip"])
@pytest.mark.parametrize("opt", ["momentum", "nesterov", "adam"])
def test_decay_is_folded_into_the_group_with_the_unfused_bits(opt, clip):
    got, ref = _train(True, opt, clip=clip), _train(False, opt, clip=clip)
    _same_bits(got, ref)
    types, ref_types = got[2], ref[2]
    name = "+".join((["elementwise_mul"] if clip else []) + ["l2_decay", UPDATE.get(opt, opt)])
    assert types.count(f"fused({name})") == 1, types
    # six parameters, each with its scale + sum unfused; w0 and w1 (in place) lose theirs
    assert ref_types.count("scale") == 6 and ref_types.count("sum") >= 6
    assert types.count("scale") == 4
    assert types.count("sum") == ref_types.count("sum") - 2 - (1 if clip else 0)


@pytest.mark.parametrize("opt", ["momentum", "adam"])
def test_parameters_of_one_chunk_fold_their_decay_too(monkeypatch, opt):
    """A parameter of at most ``CHUNK`` elements is updated as one piece in its own shape."""
    monkeypatch.setattr(inplace, "CHUNK", 1 << 17)
    for clip in (True, False):
        got, ref = _train(True, opt, clip=clip), _train(False, opt, clip=clip)
        _same_bits(got, ref)
        assert any("l2_decay" in t for t in got[2])


def test_per_parameter_coefficients_and_float64():
    for kw in ({"coeffs": (3e-2, 1e-3)}, {"coeffs": (0.0, 5e-4)},
               {"dtype": "float64", "coeffs": (1e-2, 2e-3)}):
        got, ref = _train(True, "momentum", **kw), _train(False, "momentum", **kw)
        _same_bits(got, ref)
        assert "fused(elementwise_mul+l2_decay+momentum)" in got[2]


def _decay_vars(main):
    block = main.global_block()
    (sc,) = [op for op in block.ops if op.type == "scale" and op.input("X") == ["fc_0.w_0"]]
    (total,) = [op for op in block.ops if op.type == "sum"
                and sc.output("Out")[0] in op.input("X")]
    return sc.output("Out")[0], total.output("Out")[0]


@pytest.mark.parametrize("which", [0, 1], ids=["decay_term", "decayed_grad"])
def test_a_fetched_term_keeps_its_ops_and_values(which):
    main, _, _ = _program("momentum")
    name = _decay_vars(main)[which]
    got = _train(True, "momentum", fetch=[name])
    ref = _train(False, "momentum", fetch=[name])
    _same_bits(got, ref)
    # w0's decay stays unfused (its term is seen), w1's is folded
    assert got[2].count("scale") == 5 and "fused(elementwise_mul+l2_decay+momentum)" in got[2]


def test_a_fed_parameter_runs_out_of_place_with_the_unfused_bits():
    def feed_w0(scope):
        w = np.array(scope.find_var("fc_0.w_0").get_tensor())
        w.flags.writeable = False          # the caller's array: never written
        return {"fc_0.w_0": w}
    got = _train(True, "adam", feed_extra=feed_w0)
    ref = _train(False, "adam", feed_extra=feed_w0)
    _same_bits(got, ref)


@pytest.mark.parametrize("clip", [True, False], ids=["clip", "noclip"])
def test_sparse_gradients_keep_their_own_decay(monkeypatch, clip):
    """A SELECTED_ROWS gradient's decay is never folded; with the clip its rows are scaled
    one by one, duplicates apart, as fluid's elementwise_mul does (the unfused plan's bits)."""
    got = _train(True, "momentum", sparse=True, clip=clip)
    _same_bits(got, _train(False, "momentum", sparse=True, clip=clip))
    monkeypatch.setattr(Momentum, "folds_l2_decay", False)
    _same_bits(got, _train(True, "momentum", sparse=True, clip=clip))
    emb = [t for t in got[2] if t in ("scale", "sum")]
    assert len(emb) == 2 * 5        # the embedding's and the four small parameters' decays


@pytest.mark.parametrize("opt", ["sgd", "lars"])
def test_ops_that_do_not_declare_it_keep_their_decay_ops(opt):
    got, ref = _train(True, opt), _train(False, opt)
    np.testing.assert_allclose(got[1]["fc_0.w_0"], ref[1]["fc_0.w_0"], rtol=1e-6, atol=1e-7)
    assert got[2].count("scale") == 6
    assert not any("l2_decay" in t for t in got[2])
