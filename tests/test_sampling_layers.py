"""``layers.nce`` and ``layers.sampled_softmax_with_cross_entropy``: the layer wires its op as
fluid 1.8 does (checked against the op's own kernel on the same weights), trains, and rejects bad
arguments before building anything."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.core.registry import get_op_def

RNG = np.random.default_rng(0)
XB = RNG.standard_normal((6, 4)).astype("float32")
YB = RNG.integers(0, 12, (6, 1)).astype("int64")


def _run(build):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [-1, 4])
        y = fluid.data("y", [-1, 1], "int64")
        out = build(x, y)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    return main, exe, scope, out


@pytest.mark.parametrize("sampler,dist", [("uniform", None), ("log_uniform", None),
                                          ("custom_dist", [1.0 / 12] * 12)])
def test_nce_layer_matches_its_op(sampler, dist):
    main, exe, scope, cost = _run(lambda x, y: fluid.layers.nce(
        x, y, 12, num_neg_samples=3, sampler=sampler, custom_dist=dist, seed=7))
    got, = exe.run(main, feed={"x": XB, "y": YB}, fetch_list=[cost], scope=scope)
    op = [o for o in main.global_block().ops if o.type == "nce"][0]
    w = np.array(scope.find_var(op.input("Weight")[0]).get_tensor())
    b = np.array(scope.find_var(op.input("Bias")[0]).get_tensor())
    assert w.shape == (12, 4) and b.shape == (12, 1)
    probs = np.asarray(dist, np.float32) if dist else None
    want = get_op_def("nce").forward(XB, YB, w, b, None, probs, num_total_classes=12,
                                     num_neg_samples=3, sampler=op.attr("sampler"), seed=7)
    np.testing.assert_allclose(got, want["Cost"], rtol=1e-6)
    assert got.shape == (6, 1)


def test_nce_and_sampled_softmax_train():
    def build(x, y):
        a = fluid.layers.nce(x, y, 12, num_neg_samples=4, seed=1)
        logits = fluid.layers.fc(x, 12)
        b = fluid.layers.sampled_softmax_with_cross_entropy(logits, y, num_samples=4, seed=2)
        loss = fluid.layers.mean(a) + fluid.layers.mean(b)
        fluid.optimizer.SGD(0.5).minimize(loss)
        return loss
    main, exe, scope, loss = _run(build)
    losses = [exe.run(main, feed={"x": XB, "y": YB}, fetch_list=[loss], scope=scope)[0][0]
              for _ in range(20)]
    assert losses[-1] < 0.6 * losses[0]
    main.lint()


def test_sampled_softmax_is_softmax_ce_over_sampled_logits():
    def build(x, y):
        logits = fluid.layers.fc(x, 12)
        return fluid.layers.sampled_softmax_with_cross_entropy(logits, y, num_samples=5, seed=3)
    main, exe, scope, loss = _run(build)
    op = [o for o in main.global_block().ops if o.type == "sample_logits"][0]
    got, sl = exe.run(main, feed={"x": XB, "y": YB},
                      fetch_list=[loss, op.output("SampledLogits")[0]], scope=scope)
    z = sl.astype(np.float64)
    want = np.log(np.exp(z - z.max(1, keepdims=True)).sum(1)) + z.max(1) - z[:, 0]
    np.testing.assert_allclose(got[:, 0], want, rtol=1e-5)


@pytest.mark.parametrize("call, match", [
    (lambda x, y, z: fluid.layers.nce(x, y, 12, sampler="zipf"), "sampler must be one of"),
    (lambda x, y, z: fluid.layers.nce(x, y, 12, sampler="custom_dist", custom_dist=[0.5, 0.5]),
     "custom_dist must hold 12"),
    (lambda x, y, z: fluid.layers.nce(x, y, 12, custom_dist=[1.0] * 12), "exactly when"),
    (lambda x, y, z: fluid.layers.sampled_softmax_with_cross_entropy(
        z, y, 4, use_customized_samples=True), "customized_samples"),
])
def test_bad_arguments_change_nothing(call, match):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [-1, 4])
        y = fluid.data("y", [-1, 1], "int64")
        z = fluid.layers.fc(x, 12)
        before = (main.version, str(main), str(startup))
        with pytest.raises(ValueError, match=match):
            call(x, y, z)
        assert (main.version, str(main), str(startup)) == before
