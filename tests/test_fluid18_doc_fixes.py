"""fluid 1.8 behaviours its own documented examples rely on (issue 29, doc examples).

Each test fails on fluidlite before the fix: ``cond`` / ``case`` with a ``[-1, 1]`` predicate
and with branches of different shapes (fluid 1.8 checks only their structure), and
the sample path of ``DataLoader`` / ``PyReader`` converting a float field into an int64
variable as fluid 1.8's DataFeeder does (``np.array(data, dtype=var.dtype)``), dygraph's
per-epoch decays (``StepDecay``, ``MultiStepDecay``, ``LambdaDecay``), ``current_step_lr`` of
``ReduceLROnPlateau`` and ``fluid.dygraph.nn.Conv3D``.
"""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite import layers as L


def test_cond_accepts_batch_dim_predicate_and_checks_one_element_at_run_time():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        a = fluid.data(name="a", shape=[-1, 1], dtype="float32")
        b = fluid.data(name="b", shape=[-1, 1], dtype="float32")
        out = L.cond(a < b, lambda: a + a * b, lambda: b * b)
    exe = fluid.Executor(fluid.CPUPlace())
    f = lambda va, vb: {"a": np.array(va, "float32"), "b": np.array(vb, "float32")}  # noqa
    (got,) = exe.run(main, feed=f([[2.0]], [[3.0]]), fetch_list=[out])
    np.testing.assert_array_equal(got, [[8.0]])
    (got,) = exe.run(main, feed=f([[4.0]], [[3.0]]), fetch_list=[out])
    np.testing.assert_array_equal(got, [[9.0]])
    # fluid's conditional_block requires one element when it runs
    with pytest.raises(ValueError, match="conditional_block.*size 1"):
        exe.run(main, feed=f([[4.0], [1.0]], [[3.0], [2.0]]), fetch_list=[out])


def test_cond_still_refuses_a_predicate_known_to_have_many_elements():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = L.fill_constant([3], "bool", True)
        with pytest.raises(TypeError, match=r"pred .* must be a bool scalar.*\[3\]"):
            L.cond(x, lambda: x, lambda: x)


@pytest.mark.parametrize("take_true", [True, False])
def test_cond_branches_may_differ_in_shape(take_true):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = L.fill_constant([1], "float32", 0.1 if take_true else 0.3)
        y = L.fill_constant([1], "float32", 0.23)
        out = L.cond(L.less_than(x, y),
                     lambda: (L.fill_constant([1, 2], "int32", 1),
                              L.fill_constant([2, 3], "bool", True)),
                     lambda: (L.fill_constant([3, 4], "int32", 3),
                              L.fill_constant([4, 5], "bool", False)))
    # declared as the false branch's outputs (fluid 1.8's select_input takes inputs[0])
    assert [list(o.shape) for o in out] == [[3, 4], [4, 5]]
    got = fluid.Executor(fluid.CPUPlace()).run(main, fetch_list=list(out))
    if take_true:
        np.testing.assert_array_equal(got[0], np.ones((1, 2), "int32"))
        assert got[1].shape == (2, 3) and got[1].all()
    else:
        np.testing.assert_array_equal(got[0], np.full((3, 4), 3, "int32"))
        assert got[1].shape == (4, 5) and not got[1].any()


def test_cond_branches_of_different_dtypes_run_fluid18s_documented_example():
    # fluid 1.8's cond docstring: true_fn gives int32 [1, 2] / bool [2, 3], false_fn float32
    # [3, 4] / int64 [4, 5]; both merge into the dtype holding both (a warning says so)
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = L.fill_constant([1], "float32", 0.1)
        y = L.fill_constant([1], "float32", 0.23)
        with pytest.warns(UserWarning, match="output 0 is int32 in true_fn and float32"):
            out = L.cond(L.less_than(x, y),
                         lambda: (L.fill_constant([1, 2], "int32", 1),
                                  L.fill_constant([2, 3], "bool", True)),
                         lambda: (L.fill_constant([3, 4], "float32", 3),
                                  L.fill_constant([4, 5], "int64", 2)))
    r0, r1 = fluid.Executor(fluid.CPUPlace()).run(main, fetch_list=list(out))
    assert r0.dtype == np.float32 and r0.tolist() == [[1.0, 1.0]]
    assert r1.dtype == np.int64 and r1.tolist() == [[1, 1, 1], [1, 1, 1]]


def test_case_and_switch_case_branches_may_differ_in_shape():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = L.fill_constant([1], "float32", 0.3)
        z = L.fill_constant([1], "float32", 0.2)
        fn1 = lambda: L.fill_constant([1, 2], "int32", 1)  # noqa: E731
        fn2 = lambda: L.fill_constant([2, 2], "int32", 2)  # noqa: E731
        fn3 = lambda: L.fill_constant([3], "int32", 3)     # noqa: E731
        out1 = L.case([(L.less_than(z, x), fn1), (L.less_than(x, z), fn2)], default=fn3)
        out2 = L.case([(L.less_than(x, z), fn2), (L.equal(x, z), fn3)])
        index = L.fill_constant([1], "int32", 2)
        out3 = L.switch_case(index, {1: fn1, 2: fn2}, default=fn3)
    r1, r2, r3 = fluid.Executor(fluid.CPUPlace()).run(main, fetch_list=[out1, out2, out3])
    np.testing.assert_array_equal(r1, [[1, 1]])
    np.testing.assert_array_equal(r2, [3, 3, 3])
    np.testing.assert_array_equal(r3, [[2, 2], [2, 2]])


def test_sample_generator_converts_float_fields_like_fluid18_data_feeder():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data(name="x", shape=[None, 4], dtype="float32")
        label = fluid.data(name="label", shape=[None, 1], dtype="int64")
        loader = fluid.io.DataLoader.from_generator([x, label], capacity=2)

    def samples():
        for i in range(3):
            yield np.full([4], i, "float64"), np.array([float(i)])   # float64 label, as 1.8's docs
    loader.set_sample_generator(samples, batch_size=3)
    (batch,) = list(loader())
    got = batch[0] if isinstance(batch, list) else batch
    lab = np.asarray(got["label"])
    assert lab.dtype == np.int64
    np.testing.assert_array_equal(lab, [[0], [1], [2]])
    assert np.asarray(got["x"]).dtype == np.float32

    def text():
        yield np.zeros([4], "float32"), np.array(["a"])
    loader.set_sample_generator(text, batch_size=1)
    with pytest.raises(ValueError, match="field for 'label' has dtype <U1"):
        list(loader())


def _epoch_rates(make, epochs):
    with fluid.dygraph.guard():
        linear = fluid.dygraph.Linear(10, 10)
        x = fluid.dygraph.to_variable(np.random.RandomState(0).uniform(
            -1, 1, [10, 10]).astype("float32"))
        scheduler = make()
        adam = fluid.optimizer.Adam(learning_rate=scheduler,
                                    parameter_list=linear.parameters())
        rates = []
        for _ in range(epochs):
            for _ in range(2):
                adam.minimize(fluid.layers.reduce_mean(linear(x)))
                linear.clear_gradients()
            scheduler.epoch()
            rates.append(adam.current_step_lr())
        return rates


def test_step_multistep_lambda_decays_follow_fluid18_docs():
    # fluid 1.8's get_lr after each epoch() (the constructor is epoch 0; the rate printed
    # after the k-th epoch() is epoch k's)
    np.testing.assert_allclose(
        _epoch_rates(lambda: fluid.dygraph.StepDecay(0.5, step_size=3), 9),
        [0.5, 0.5, 0.05, 0.05, 0.05, 0.005, 0.005, 0.005, 0.0005], rtol=1e-6)
    np.testing.assert_allclose(
        _epoch_rates(lambda: fluid.dygraph.MultiStepDecay(0.5, milestones=[3, 5]), 6),
        [0.5, 0.5, 0.05, 0.05, 0.005, 0.005], rtol=1e-6)
    np.testing.assert_allclose(
        _epoch_rates(lambda: fluid.dygraph.LambdaDecay(0.5, lr_lambda=lambda e: 0.95 ** e), 3),
        [0.475, 0.45125, 0.4286875], rtol=1e-6)
    with pytest.raises(ValueError, match="decay_rate should be < 1.0"):
        fluid.dygraph.StepDecay(0.5, step_size=3, decay_rate=1.5)
    with pytest.raises(ValueError, match="milestones must be increasing"):
        fluid.dygraph.MultiStepDecay(0.5, milestones=[5, 3])
    with pytest.raises(TypeError, match="lr_lambda must be callable"):
        fluid.dygraph.LambdaDecay(0.5, lr_lambda=0.9)


def test_epoch_decay_state_round_trips():
    with fluid.dygraph.guard():
        a = fluid.dygraph.StepDecay(0.5, step_size=1)
        a.epoch()
        b = fluid.dygraph.StepDecay(0.5, step_size=1)
        b.set_dict(a.state_dict())
        assert b.epoch_num == 1
        np.testing.assert_allclose(b().numpy(), [0.05], rtol=1e-6)


def test_current_step_lr_of_reduce_lr_on_plateau_is_its_rate():
    with fluid.dygraph.guard():
        linear = fluid.dygraph.Linear(2, 2)
        sched = fluid.dygraph.ReduceLROnPlateau(learning_rate=1.0, decay_rate=0.5, patience=0)
        adam = fluid.optimizer.Adam(learning_rate=sched, parameter_list=linear.parameters())
        assert adam.current_step_lr() == 1.0
        sched.step(fluid.dygraph.to_variable(np.array([1.0], "float32")))
        sched.step(fluid.dygraph.to_variable(np.array([2.0], "float32")))
        assert adam.current_step_lr() == 0.5


def test_conv3d_layers_importable_from_dygraph_nn_as_in_fluid18():
    from fluidlite.dygraph import nn
    assert nn.Conv3D is fluid.dygraph.Conv3D
    assert nn.Conv3DTranspose is fluid.dygraph.Conv3DTranspose


def test_sequential_indexed_by_name_and_layer_list_insert_as_fluid18():
    with fluid.dygraph.guard():
        x = fluid.dygraph.to_variable(np.ones((2, 10), "float32"))
        l1, l2 = fluid.dygraph.Linear(10, 2), fluid.dygraph.Linear(2, 3)
        seq = fluid.dygraph.Sequential(("l1", l1), ("l2", l2))
        assert seq["l1"] is l1 and seq["l2"] is l2 and seq[1] is l2
        with pytest.raises(KeyError, match="no sublayer named 'l3'"):
            seq["l3"]
        assert seq(x).shape == [2, 3]
        linears = fluid.dygraph.LayerList([fluid.dygraph.Linear(4, 4) for _ in range(3)])
        before = list(linears)
        another = fluid.dygraph.Linear(4, 4)
        linears.insert(1, another)
        assert list(linears) == [before[0], another, before[1], before[2]]
        assert len(linears.parameters()) == 8
        with pytest.raises(IndexError, match=r"\[0, 4\)"):
            linears.insert(4, another)


def test_program_global_seed_sets_the_seed_of_later_programs():
    prog = fluid.Program()
    assert prog.random_seed == 0
    try:
        prog.global_seed(102)
        assert prog.random_seed == 102 and fluid.Program().random_seed == 102
        with pytest.raises(ValueError, match="integer"):
            prog.global_seed(1.5)
        assert fluid.Program().random_seed == 102
    finally:
        prog.global_seed(0)
    assert fluid.Program().random_seed == 0
