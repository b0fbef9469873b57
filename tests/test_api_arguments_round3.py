"""Issue 28, items 9, 10 and 12: silent wrong results and API arguments that were accepted.

The tests of this round's fixes fail on the code before them: a second ``minimize`` doubling
the step, empty batches moving Adam's state, a data-parallel step half-committed,
``fetch_list=[loss, None]`` returning one value, feeds keyed by Variables / big-endian /
``np.matrix`` / masked, non-finite learning rates, negative decays, zero strides and
dilations, integer losses, nd indices wrapping around, a ``grad_clip`` silently dropped. The
others pin what the issue listed and an earlier round fixed (mixed-dtype ``concat``, ``gather``
of negative rows, the NaN mean of nothing, dims below -1, ``Print`` printing, pool strides,
a single-place step failing after its updates).
"""
from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import fluidlite as fluid

RNG = np.random.default_rng(28)
X = RNG.uniform(-1, 1, (6, 4)).astype("float32")


def _net(dtype: str = "float32"):
    x = fluid.data("x", [-1, 4], dtype)
    return fluid.layers.mean(fluid.layers.fc(x, 3, act="tanh"))


def _state(program: fluid.Program, scope: fluid.Scope):
    return {v.name: np.array(scope.find_var(v.name).get_tensor()).copy()
            for v in program.list_vars()
            if v.persistable and scope.find_var(v.name) is not None
            and scope.find_var(v.name).is_initialized()}


def _assert_same_state(before, after):
    assert before.keys() == after.keys()
    changed = [n for n in before if not np.array_equal(before[n], after[n], equal_nan=True)]
    assert not changed, f"the failed step changed {changed}"


def _training(opt_fn, net=_net):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        loss = net()
        opt_fn().minimize(loss)
    scope = fluid.Scope()
    exe = fluid.Executor()
    exe.run(startup, scope=scope)
    return main, exe, scope, loss


# -- item 9: minimize twice ------------------------------------------------------------------
@pytest.mark.parametrize("second", ["same optimizer", "new optimizer", "apply_gradients"])
def test_a_second_update_of_a_parameter_is_refused_and_the_program_is_unchanged(second):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        loss = _net()
        opt = fluid.optimizer.SGD(0.1)        # no accumulator: nothing else would notice
        opt.minimize(loss)
        n_ops, version, n_start = len(main.global_block().ops), main.version, \
            len(startup.global_block().ops)
        if second == "apply_gradients":
            pg = fluid.backward.append_backward(loss)
            n_ops, version = len(main.global_block().ops), main.version
            with pytest.raises(RuntimeError, match=r"apply_gradients: parameter 'fc_0\.\w_0' is "
                                                   r"already updated by the 'sgd' op"):
                fluid.optimizer.SGD(0.1).apply_gradients(pg)
        else:
            other = opt if second == "same optimizer" else fluid.optimizer.Adam(0.1)
            with pytest.raises(RuntimeError, match=rf"minimize\(loss '{loss.name}'\): parameter "
                                                   r"'fc_0\.\w_0' is already updated.*clone"):
                other.minimize(loss)
    assert len(main.global_block().ops) == n_ops and main.version == version
    assert len(startup.global_block().ops) == n_start


def test_disjoint_parameter_groups_may_each_have_an_optimizer():
    """One loss, two optimizers on disjoint parameter lists: each parameter moves once."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        loss = _net()
        w, b = main.global_block().all_parameters()
        fluid.optimizer.SGD(0.5).minimize(loss, parameter_list=[w])
        fluid.optimizer.SGD(0.5).minimize(loss, parameter_list=[b])
    updates = [op for op in main.global_block().ops if op.type == "sgd"]
    assert sorted(op.inputs["Param"][0] for op in updates) == sorted([w.name, b.name])


# -- item 9: concat of mixed dtypes ----------------------------------------------------------
def test_concat_of_float32_and_int64_is_refused_at_build():
    a = fluid.data("a", [-1, 2], "float32")
    b = fluid.data("b", [-1, 2], "int64")
    with pytest.raises((TypeError, ValueError), match="float32.*int64|int64.*float32"):
        fluid.layers.concat([a, b])


# -- item 9 / 12: empty batches and the mean of nothing ----------------------------------------
def test_an_empty_batch_does_not_move_adam_and_says_why():
    main, exe, scope, loss = _training(lambda: fluid.optimizer.Adam(0.1))
    exe.run(main, feed={"x": X}, fetch_list=[loss], scope=scope)   # moments are non-zero now
    before = _state(main, scope)
    with pytest.raises(ValueError, match=r"Empty batch.*'x' \[0, 4\].*moment.*Skip empty "
                                         r"batches"):
        exe.run(main, feed={"x": X[:0]}, fetch_list=[loss], scope=scope)
    _assert_same_state(before, _state(main, scope))
    exe.run(main, feed={"x": X}, fetch_list=[loss], scope=scope)   # and training goes on


def test_an_empty_batch_still_runs_a_program_that_writes_nothing():
    x = fluid.data("x", [-1, 4], "float32")
    mean = fluid.layers.mean(x)
    rmean = fluid.layers.reduce_mean(x, dim=0)
    exe = fluid.Executor()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)     # NumPy's "Mean of empty slice"
        m, r = exe.run(feed={"x": X[:0]}, fetch_list=[mean, rmean])
    assert m.shape == (1,) and math.isnan(m[0])              # NaN as in NumPy and fluid, not 0
    assert r.shape == (4,) and np.isnan(r).all()


def test_a_batch_with_rows_next_to_an_empty_feed_is_a_real_step():
    """Only a step where *every* batch feed is empty is refused (an image batch with no
    boxes still trains)."""
    def net():
        x = fluid.data("x", [-1, 4], "float32")
        box = fluid.data("box", [-1, 4], "float32")
        return fluid.layers.mean(fluid.layers.fc(x, 3)) + \
            fluid.layers.reduce_sum(box) * 0.0
    main, exe, scope, loss = _training(lambda: fluid.optimizer.Adam(0.1), net)
    before = _state(main, scope)
    exe.run(main, feed={"x": X, "box": np.zeros((0, 4), "float32")}, scope=scope)
    assert any(not np.array_equal(before[n], v) for n, v in _state(main, scope).items())


# -- item 9: a step is all-or-nothing, on one place and on several ------------------------------
def _failing_after_update_net():
    x = fluid.data("x", [-1, 4], "float32")
    idx = fluid.data("idx", [-1, 1], "int64")
    h = fluid.layers.batch_norm(fluid.layers.fc(x, 3))
    g = fluid.layers.gather(h, idx)                        # fails on a row number >= 6
    return fluid.layers.mean(h) + fluid.layers.reduce_sum(g) * 0.0


@pytest.mark.parametrize("places", [1, 2])
def test_a_failing_step_leaves_parameters_statistics_and_moments_untouched(places):
    main, exe, scope, loss = _training(lambda: fluid.optimizer.Adam(0.1),
                                       _failing_after_update_net)
    prog = main if places == 1 else fluid.CompiledProgram(main).with_data_parallel(
        loss_name=loss.name, places=list(range(places)))
    ok = np.zeros((6, 1), "int64")
    exe.run(prog, feed={"x": X, "idx": ok}, fetch_list=[loss], scope=scope)
    before = _state(main, scope)
    bad = ok.copy()
    bad[-1] = 9                                            # only the last place's rows fail
    with pytest.raises(IndexError, match="gather"):
        exe.run(prog, feed={"x": X, "idx": bad}, fetch_list=[loss], scope=scope)
    _assert_same_state(before, _state(main, scope))
    exe.run(prog, feed={"x": X, "idx": ok}, fetch_list=[loss], scope=scope)
    assert any(not np.array_equal(before[n], v) for n, v in _state(main, scope).items())


def test_a_failed_data_parallel_step_leaves_the_dropout_streams_as_they_were():
    """ok, failed, ok gives the parameters of ok, ok: the failed step drew no dropout mask."""
    def net():
        x = fluid.data("x", [-1, 4], "float32")
        idx = fluid.data("idx", [-1, 1], "int64")
        h = fluid.layers.dropout(fluid.layers.fc(x, 3), 0.5)
        g = fluid.layers.gather(h, idx)
        return fluid.layers.mean(h) + fluid.layers.reduce_sum(g) * 0.0
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 7
    with fluid.program_guard(main, startup):
        loss = net()
        fluid.optimizer.SGD(0.5).minimize(loss)
    prog = fluid.CompiledProgram(main).with_data_parallel(loss_name=loss.name, places=[0, 1])
    exe = fluid.Executor()
    ok = {"x": X, "idx": np.zeros((6, 1), "int64")}
    bad = {"x": X, "idx": np.array([[0]] * 5 + [[9]], "int64")}
    finals = []
    for steps in ([ok, bad, ok], [ok, ok]):
        scope = fluid.Scope()
        exe.run(startup, scope=scope)
        for feed in steps:
            try:
                exe.run(prog, feed=feed, fetch_list=[loss], scope=scope)
            except IndexError:
                assert feed is bad
        finals.append(_state(main, scope))
    _assert_same_state(finals[1], finals[0])


# -- item 9: fetch lists -----------------------------------------------------------------------
@pytest.mark.parametrize("fetch, where", [
    (lambda loss: [loss, None], r"fetch_list\[1\]"),
    (lambda loss: [None], r"fetch_list\[0\]"),
    (lambda loss: [[loss, None]], r"fetch_list\[0\]\[1\]"),
])
def test_a_none_in_fetch_list_is_a_type_error_naming_its_index(fetch, where):
    x = fluid.data("x", [-1, 4], "float32")
    loss = fluid.layers.mean(x)
    with pytest.raises(TypeError, match=where + " 's type shall be one of.*NoneType"):
        fluid.Executor().run(feed={"x": X}, fetch_list=fetch(loss))


# -- item 12: feeds ----------------------------------------------------------------------------
def _forward():
    x = fluid.data("x", [-1, 4], "float32")
    y = fluid.layers.fc(x, 2)
    exe = fluid.Executor()
    exe.run(fluid.default_startup_program())
    return x, y, exe


@pytest.mark.parametrize("key, what", [("var", r"keyed by the Variable 'x' itself; write "
                                                r"\{'x': array\}"),
                                       (1, "the key 1 of type int"),
                                       (b"x", "the key b'x' of type bytes")])
def test_feed_keys_must_be_names(key, what):
    x, y, exe = _forward()
    key = x if key == "var" else key
    with pytest.raises(TypeError, match="feed keys must be variable names \\(str\\).*" + what):
        exe.run(feed={key: X}, fetch_list=[y])


def test_big_endian_and_matrix_feeds_run_as_native_arrays():
    x, y, exe = _forward()
    (want,) = exe.run(feed={"x": X}, fetch_list=[y])
    (big,) = exe.run(feed={"x": X.astype(">f4")}, fetch_list=[y])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PendingDeprecationWarning)     # np.matrix itself
        mat_x = np.matrix(X)
    (mat,) = exe.run(feed={"x": mat_x}, fetch_list=[y])
    for got in (big, mat):
        assert type(got) is np.ndarray and got.dtype == np.dtype("float32")
        assert got.dtype.isnative and got.shape == want.shape
        np.testing.assert_array_equal(got, want)


def test_a_masked_array_feed_is_refused():
    x, y, exe = _forward()
    with pytest.raises(TypeError, match="'x' is a numpy masked array.*filled"):
        exe.run(feed={"x": np.ma.masked_less(X, 0)}, fetch_list=[y])


def test_a_big_endian_feed_of_the_wrong_type_names_the_real_difference():
    x, y, exe = _forward()
    with pytest.raises(ValueError, match="must be 'float32', but received 'float64'"):
        exe.run(feed={"x": X.astype(">f8")}, fetch_list=[y])


# -- item 12: hyper-parameters -----------------------------------------------------------------
@pytest.mark.parametrize("make, arg", [
    (lambda v: fluid.optimizer.SGD(v), "learning_rate"),
    (lambda v: fluid.optimizer.Adam(v), "learning_rate"),
    (lambda v: fluid.optimizer.Momentum(v, 0.9), "learning_rate"),
    (lambda v: fluid.optimizer.Momentum(0.1, v), "momentum"),
    (lambda v: fluid.optimizer.Adam(0.1, epsilon=v), "epsilon"),
    (lambda v: fluid.optimizer.Lamb(0.1, lamb_weight_decay=v), "lamb_weight_decay"),
])
@pytest.mark.parametrize("value", [math.inf, math.nan, np.float32("inf")])
def test_non_finite_hyper_parameters_are_refused(make, arg, value):
    with pytest.raises(ValueError, match=rf"{arg} must be a number in .*received"):
        make(value)


@pytest.mark.parametrize("make", [
    lambda: fluid.layers.exponential_decay(math.inf, 10, 0.5),
    lambda: fluid.layers.natural_exp_decay(0.1, math.inf, 0.5),
    lambda: fluid.layers.polynomial_decay(math.nan, 10),
    lambda: fluid.layers.piecewise_decay([10], [0.1, math.nan]),
    lambda: fluid.layers.cosine_decay(math.inf, 10, 3),
])
def test_non_finite_learning_rate_schedules_are_refused(make):
    n = len(fluid.default_main_program().global_block().ops)
    with pytest.raises(ValueError, match="must be (a finite number|> 0), but received"):
        make()
    assert len(fluid.default_main_program().global_block().ops) == n


@pytest.mark.parametrize("fn", ["exponential_decay", "natural_exp_decay", "inverse_time_decay"])
def test_negative_decay_rates_are_refused(fn):
    with pytest.raises(ValueError, match=f"{fn}: decay_rate must be >= 0, but received -0.5"):
        getattr(fluid.layers, fn)(0.1, 10, -0.5)


@pytest.mark.parametrize("cls", [fluid.regularizer.L2Decay, fluid.regularizer.L1Decay])
def test_negative_regularization_coefficients_are_refused(cls):
    with pytest.raises(ValueError, match="regularization_coeff must be >= 0, got -0.1"):
        cls(-0.1)
    with pytest.raises(ValueError, match="regularization_coeff must be >= 0"):
        fluid.ParamAttr(regularizer=cls(np.float32(-1)))
    assert cls(0.0)._regularization_coeff == 0.0


# -- item 12: shapes, strides, losses, indices ---------------------------------------------------
@pytest.mark.parametrize("make", [
    lambda: fluid.data("d", [-2, 3], "float32"),
    lambda: fluid.layers.data("d", [3, -5], dtype="float32", append_batch_size=False),
    lambda: fluid.layers.fill_constant([-2, 3], "float32", 1.0),
])
def test_dims_below_minus_one_are_refused(make):
    with pytest.raises(ValueError, match="-2|-5"):
        make()


def _img(rank):
    return fluid.data("img", [-1, 3] + [8] * rank, "float32")


@pytest.mark.parametrize("build, arg", [
    (lambda: fluid.layers.conv2d(_img(2), 4, 3, stride=0), "strides"),
    (lambda: fluid.layers.conv2d(_img(2), 4, 3, stride=[1, 0]), "strides"),
    (lambda: fluid.layers.conv2d(_img(2), 4, 3, stride=-1), "strides"),
    (lambda: fluid.layers.conv2d(_img(2), 4, 3, dilation=0), "dilations"),
    (lambda: fluid.layers.conv2d(_img(2), 3, 3, groups=3, dilation=[0, 1]), "dilations"),
    (lambda: fluid.layers.conv2d_transpose(_img(2), 4, filter_size=3, stride=0), "strides"),
    (lambda: fluid.layers.conv2d_transpose(_img(2), 4, filter_size=3, dilation=0),
     "dilations"),
    (lambda: fluid.layers.conv3d(_img(3), 4, 3, stride=0), "strides"),
    (lambda: fluid.layers.conv3d(_img(3), 4, 3, dilation=0), "dilations"),
    (lambda: fluid.layers.conv3d_transpose(_img(3), 4, filter_size=3, stride=0), "strides"),
    (lambda: fluid.layers.deformable_conv(_img(2), fluid.data("off", [-1, 18, 8, 8]), None,
                                          4, 3, stride=0, modulated=False), "strides"),
    (lambda: fluid.layers.deformable_conv(_img(2), fluid.data("off", [-1, 18, 8, 8]),
                                          fluid.data("mask", [-1, 9, 8, 8]), 4, 3,
                                          dilation=[1, 0]), "dilations"),
    (lambda: fluid.layers.im2sequence(_img(2), filter_size=2, stride=[0, 1]), "strides"),
    (lambda: fluid.layers.pool2d(_img(2), 2, pool_stride=0), "strides"),
    (lambda: fluid.layers.pool3d(_img(3), 2, pool_stride=0), "strides"),
])
def test_zero_strides_and_dilations_are_value_errors_at_build(build, arg):
    main = fluid.default_main_program()
    with pytest.raises(ValueError, match=arg):
        build()
    assert not any(op.type.startswith(("conv", "pool", "depthwise", "deformable", "im2seq"))
                   for op in main.global_block().ops)


def test_append_backward_of_an_integer_loss_is_a_type_error():
    x = fluid.data("x", [-1, 4], "float32")
    y = fluid.layers.fc(x, 1)
    loss = fluid.layers.cast(fluid.layers.reduce_sum(y), "int64")
    n = len(fluid.default_main_program().global_block().ops)
    with pytest.raises(TypeError, match=rf"the loss '{loss.name}' is int64, but a loss must be "
                                        r"float16, float32 or float64"):
        fluid.backward.append_backward(loss)
    with pytest.raises(TypeError, match="is int64"):
        fluid.optimizer.SGD(0.1).minimize(loss)
    assert len(fluid.default_main_program().global_block().ops) == n


@pytest.mark.parametrize("index", [[-1], [0, -3], [3]])
def test_gather_never_wraps_negative_or_large_indices(index):
    x = fluid.data("x", [-1, 2], "float32")
    i = fluid.data("i", [-1], "int64")
    out = fluid.layers.gather(x, i)
    with pytest.raises(IndexError, match=r"outside \[0, 3\).*do not wrap around"):
        fluid.Executor().run(feed={"x": np.arange(6, dtype="float32").reshape(3, 2),
                                   "i": np.array(index, "int64")}, fetch_list=[out])


@pytest.mark.parametrize("op, build, feed", [
    ("gather_nd", lambda x, i, u: fluid.layers.gather_nd(x, i), [[-1]]),
    ("scatter_nd_add", lambda x, i, u: fluid.layers.scatter_nd_add(x, i, u), [[-1]]),
    ("scatter_nd_add", lambda x, i, u: fluid.layers.scatter_nd_add(x, i, u), [[3]]),
])
def test_nd_indices_never_wrap(op, build, feed):
    """Paddle raises for a negative gather_nd / scatter_nd_add index; NumPy indexing would
    read or add to the last row."""
    x = fluid.data("x", [3, 2], "float32")
    i = fluid.data("i", [1, 1], "int64")
    u = fluid.data("u", [1, 2], "float32")
    out = build(x, i, u)
    with pytest.raises(IndexError, match=rf"{op}: Index holds -?\d, outside \[0, 3\) \(dim 0"):
        fluid.Executor().run(feed={"x": np.ones((3, 2), "float32"), "i": np.array(feed, "int64"),
                                   "u": np.ones((1, 2), "float32")}, fetch_list=[out])


def test_index_sample_never_wraps():
    x = fluid.data("x", [3, 2], "float32")
    i = fluid.data("i", [3, 1], "int64")
    out = fluid.layers.index_sample(x, i)
    with pytest.raises(IndexError, match=r"index_sample: Index holds -1, outside \[0, 2\)"):
        fluid.Executor().run(feed={"x": np.ones((3, 2), "float32"),
                                   "i": np.array([[0], [-1], [1]], "int64")}, fetch_list=[out])


# -- item 10: what the user must see -------------------------------------------------------------
def test_a_grad_clip_given_twice_warns_which_wins():
    loss = _net()
    own = fluid.clip.GradientClipByValue(1.0)
    given = fluid.clip.GradientClipByNorm(1.0)
    with pytest.warns(UserWarning, match=r"minimize\(grad_clip=.*Norm.*\) is ignored: the "
                                         r"optimizer was built with grad_clip=.*Value.*wins"):
        fluid.optimizer.SGD(0.1, grad_clip=own).minimize(loss, grad_clip=given)
    ops = [op.type for op in fluid.default_main_program().global_block().ops]
    assert "clip" in ops and "clip_by_norm" not in ops          # the optimizer's clip ran


def test_the_same_grad_clip_given_twice_does_not_warn():
    loss = _net()
    clip = fluid.clip.GradientClipByValue(1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fluid.optimizer.SGD(0.1, grad_clip=clip).minimize(loss, grad_clip=clip)


def test_print_writes_to_stdout(capfd):
    x = fluid.data("x", [-1, 2], "float32")
    out = fluid.layers.Print(x, message="round3-print")
    fluid.Executor().run(feed={"x": np.ones((2, 2), "float32")}, fetch_list=[out])
    printed = capfd.readouterr().out
    assert "round3-print" in printed and "shape: [2,2,]" in printed
