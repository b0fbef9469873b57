"""fluid 1.8 behaviours its own documented examples rely on, second round (issue 29).

Each test fails on fluidlite before the fix: ``unique_name.switch`` returning fluid 1.8's
``(generator, parameter-name checker)`` pair (and dygraph refusing a parameter name twice);
``ProgramTranslator.get_program_cache`` / ``save_inference_model``;
``fluid.contrib.op_freq_statistic``; ``pow`` of int32/int64 (1.8's integer kernels);
``RecomputeOptimizer.load`` raising ``NotImplementedError``; ``detection_output(return_index=)``;
``roi_align(rois_lod=)``; 1.8's ``prroi_pool`` (not position-sensitive, ``batch_roi_nums``);
``InMemoryDataset.set_parse_ins_id / set_parse_content / set_parse_logkey`` and its page
views (``set_merge_by_sid``, ``set_enable_pv_merge``, ``preprocess_instance``); dygraph
``DataLoader.from_generator`` / ``PyReader`` without ``feed_list``; a loader over several places
and the partial last step of an inference program; ``cpu_places()`` reading ``CPU_NUM``;
``fluid.dygraph.static_runner.StaticModelRunner``; a ``[3]`` feed for a ``[3, 1]`` variable;
``to_variable`` of a complex array (``ComplexVariable``).
"""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite import layers as L


# -- unique_name.switch ------------------------------------------------------------------------
def test_switch_returns_generator_and_parameter_name_checker_as_fluid18():
    a, b = fluid.unique_name.generate("fc"), fluid.unique_name.generate("fc")
    assert (a, b) == ("fc_0", "fc_1")
    pre_generator, pre_checker = fluid.unique_name.switch()
    assert isinstance(pre_generator, fluid.unique_name.UniqueNameGenerator)
    assert isinstance(pre_checker, fluid.unique_name.DygraphParameterNameChecker)
    assert fluid.unique_name.generate("fc") == "fc_0"
    fluid.unique_name.switch(pre_generator, pre_checker)
    assert fluid.unique_name.generate("fc") == "fc_2"
    with pytest.raises(TypeError, match="switch returns the pair"):
        fluid.unique_name.switch((pre_generator, pre_checker))


def test_dygraph_refuses_a_parameter_name_twice_within_one_guard():
    with fluid.dygraph.guard():
        fluid.dygraph.Linear(2, 2, param_attr=fluid.ParamAttr(name="shared_w"))
        with pytest.raises(ValueError, match=r"parameter name \[shared_w\] has already been "
                                             r"used"):
            fluid.dygraph.Linear(2, 2, param_attr=fluid.ParamAttr(name="shared_w"))
    with fluid.dygraph.guard():         # a new guard: a new name space (1.8's switch)
        fluid.dygraph.Linear(2, 2, param_attr=fluid.ParamAttr(name="shared_w"))
    for _ in range(2):                  # and so does each enable_dygraph session
        fluid.enable_dygraph()
        try:
            fluid.dygraph.Linear(2, 2, param_attr=fluid.ParamAttr(name="shared_w"))
        finally:
            fluid.disable_dygraph()


# -- ProgramTranslator ------------------------------------------------------------------------
class _Net(fluid.dygraph.Layer):
    def __init__(self):
        super().__init__()
        self._linear = fluid.dygraph.Linear(3, 3)

    @fluid.dygraph.declarative
    def forward(self, x):
        z = self._linear(self._linear(x))
        return z, L.mean(z)


def test_program_cache_last_and_save_inference_model(tmp_path):
    translator = fluid.dygraph.ProgramTranslator()
    x = np.random.RandomState(0).rand(4, 3).astype("float32")
    with fluid.dygraph.guard():
        net = _Net()
        z, _ = net(fluid.dygraph.to_variable(x))
        want = z.numpy()
        key, concrete = translator.get_program_cache().last()
        assert key[0] == "forward"
        assert [v.name for v in concrete.inputs] == ["feed_0"]
        assert len(concrete.outputs) == 2
        assert {p.name for p in concrete.parameters} == {p.name for p in net.parameters()}
    translator.save_inference_model(str(tmp_path), fetch=[0])
    exe = fluid.Executor(fluid.CPUPlace())
    with fluid.scope_guard(fluid.Scope()):
        program, feeds, fetches = fluid.io.load_inference_model(str(tmp_path), exe)
        assert feeds == ["feed_0"] and len(fetches) == 1
        (got,) = exe.run(program, feed={"feed_0": x}, fetch_list=fetches)
    np.testing.assert_allclose(got, want, rtol=1e-6)


# -- contrib.op_freq_statistic ------------------------------------------------------------------
def test_op_freq_statistic_counts_ops_and_producer_consumer_pairs():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [-1, 4])
        h = L.relu(L.fc(x, 3))
        y = L.relu(L.fc(h, 2))
        loss = L.mean(y)
        fluid.optimizer.SGD(0.1).minimize(loss)
    uni, adj = fluid.contrib.op_freq_statistic(main)
    uni = dict(uni)
    # the sgd ops write only parameters: not counted (fluid 1.8's rule)
    assert "sgd" not in uni and uni["relu"] == 2 and uni["mul"] == 2 and uni["mean"] == 1
    adj = dict(adj)
    assert adj["mul->elementwise_add"] == 2 and adj["elementwise_add->relu"] == 2
    assert adj["relu->mul"] == 1
    with pytest.raises(TypeError, match="must be a fluid.Program"):
        fluid.contrib.op_freq_statistic("main")


# -- pow on integers ------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_pow_of_integers_keeps_the_dtype_as_fluid18_kernels(dtype):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [-1, 4], dtype)
        sq = L.pow(x, 2.0)
        frac = L.pow(x, 2.7)                      # the exponent cast to int: 2
        inv = L.pow(x, -1.0)                      # std::pow then truncation
        cube = L.pow(x, L.fill_constant([1], "float32", 3.0))
    xv = np.array([[1, -2, 3, 4]], dtype)
    got = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": xv},
                                               fetch_list=[sq, frac, inv, cube])
    for g in got:
        assert g.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got[0], xv ** 2)
    np.testing.assert_array_equal(got[1], xv ** 2)
    np.testing.assert_array_equal(got[2], [[1, 0, 0, 0]])
    np.testing.assert_array_equal(got[3], xv ** 3)
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        with pytest.raises(TypeError, match="pow"):
            L.pow(fluid.data("b", [2], "bool"), 2.0)


def test_recompute_optimizer_load_raises_not_implemented_as_fluid18():
    opt = fluid.optimizer.RecomputeOptimizer(fluid.optimizer.Adam(0.01))
    with pytest.raises(NotImplementedError, match="load function is not supported"):
        opt.load({})


# -- detection / roi layers -----------------------------------------------------------------------
def test_detection_output_return_index_gives_the_kept_rows():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        loc = fluid.data("loc", [-1, 2, 4])
        scores = fluid.data("scores", [-1, 2, 2])
        prior = fluid.data("prior", [2, 4])
        prior_var = fluid.data("prior_var", [2, 4])
        plain = L.detection_output(loc, scores, prior, prior_var, score_threshold=0.1)
        out, index = L.detection_output(loc, scores, prior, prior_var, score_threshold=0.1,
                                        return_index=True)
        with pytest.raises(TypeError, match="return_index must be a bool"):
            L.detection_output(loc, scores, prior, prior_var, return_index=1)
    assert index.dtype == fluid.core.VarDesc.VarType.INT32
    feed = {"loc": np.zeros((2, 2, 4), "float32"),
            "scores": np.array([[[0.1, 0.9], [0.8, 0.2]], [[0.9, 0.1], [0.2, 0.8]]],
                               "float32"),
            "prior": np.array([[0, 0, 0.5, 0.5], [0.5, 0.5, 1, 1]], "float32"),
            "prior_var": np.full((2, 4), 0.1, "float32")}
    a, b, idx = fluid.Executor(fluid.CPUPlace()).run(main, feed=feed,
                                                     fetch_list=[plain, out, index],
                                                     return_numpy=False)
    np.testing.assert_array_equal(np.array(a), np.array(b))
    boxes = np.tile(feed["prior"], (2, 1))           # zero offsets decode to the priors
    np.testing.assert_allclose(boxes[np.array(idx).ravel()], np.array(b)[:, 2:], rtol=1e-6)
    assert idx.lod() == b.lod()


def test_roi_align_rois_lod_replaces_the_rois_lod():
    rng = np.random.RandomState(1)
    xv = rng.rand(2, 2, 6, 6).astype("float32")
    rois = np.array([[0, 0, 3, 3], [1, 1, 5, 4], [2, 0, 5, 5]], "float32")
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [-1, 2, 6, 6])
        r_lod = fluid.data("r_lod", [-1, 4], lod_level=1)
        r_plain = fluid.data("r_plain", [-1, 4])
        offsets = fluid.data("offsets", [-1], "int64")
        with_lod = L.roi_align(x, r_lod, 2, 2, 0.5, 2)
        with_offsets = L.roi_align(x, r_plain, 2, 2, 0.5, 2, rois_lod=offsets)
        with pytest.raises(TypeError, match="rois_lod"):
            L.roi_align(x, r_plain, rois_lod=fluid.data("f", [-1], "float32"))
    feed = {"x": xv, "r_lod": fluid.create_lod_tensor(rois, [[1, 2]], fluid.CPUPlace()),
            "r_plain": rois, "offsets": np.array([0, 1, 3], "int64")}
    a, b = fluid.Executor(fluid.CPUPlace()).run(main, feed=feed,
                                                fetch_list=[with_lod, with_offsets])
    np.testing.assert_array_equal(a, b)


def test_prroi_pool_is_fluid18s_per_channel_op_with_batch_roi_nums():
    xv = np.arange(2 * 3 * 4 * 4, dtype="float32").reshape(2, 3, 4, 4)
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [2, 3, 4, 4])
        rois = fluid.data("rois", [-1, 4])
        nums = fluid.data("nums", [2], "int64")
        out = L.prroi_pool(x, rois, 1.0, 1, 1, batch_roi_nums=nums)     # 1.8's doc call
    assert out.shape == (-1, 3, 1, 1)                # the input's channels
    feed = {"x": xv, "rois": np.array([[0, 0, 3, 3], [0, 0, 3, 3]], "float32"),
            "nums": np.array([1, 1], "int64")}
    (got,) = fluid.Executor(fluid.CPUPlace()).run(main, feed=feed, fetch_list=[out])
    # over [0, 3] x [0, 3] the bilinear interpolant of a linear map averages to its centre
    want = xv[:, :, 0, 0] + 1.5 * 4 + 1.5
    np.testing.assert_allclose(got[:, :, 0, 0], want, rtol=1e-6)


# -- datasets -----------------------------------------------------------------------------------
def test_in_memory_dataset_parses_ins_id_content_and_logkey(tmp_path):
    path = tmp_path / "part-0"
    logkey = "0" * 11 + "01a" + "05" + "00000000000000ff"
    path.write_text(f"1 ins_a 1 text_a 1 {logkey} 2 1.0 2.0\n"
                    f"1 ins_b 1 text_b 1 {logkey} 2 3.0 4.0\n")
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.data("x", [-1, 2], "float32")
    ds = fluid.DatasetFactory().create_dataset("InMemoryDataset")
    ds.set_use_var([x])
    ds.set_filelist([str(path)])
    ds.set_parse_ins_id(True)
    ds.set_parse_content(True)
    ds.set_parse_logkey(True)
    ds.load_into_memory()
    recs = list(ds._samples())
    assert [r.ins_id for r in recs] == ["ins_a", "ins_b"]
    assert [r.content for r in recs] == ["text_a", "text_b"]
    assert (recs[0].search_id, recs[0].cmatch, recs[0].rank) == (255, 0x1a, 5)
    np.testing.assert_array_equal(recs[1][0], [3.0, 4.0])
    with pytest.raises(TypeError, match="must be a bool"):
        ds.set_parse_ins_id(1)
    bad = fluid.DatasetFactory().create_dataset("InMemoryDataset")
    bad.set_use_var([x])
    bad.set_filelist([str(path)])
    bad.set_parse_logkey(True)                     # the line starts with the ins id
    with pytest.raises(ValueError, match="log key 'ins_a'"):
        bad.load_into_memory()


def test_pv_merge_groups_by_search_id_and_shuffles_page_views(tmp_path):
    path = tmp_path / "part-0"
    key = lambda sid: "0" * 16 + "%016x" % sid                         # noqa: E731
    rows = [(7, 1.0), (9, 2.0), (7, 3.0), (5, 4.0), (9, 5.0)]
    path.write_text("".join(f"1 {key(sid)} 1 {v}\n" for sid, v in rows))
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.data("x", [-1, 1], "float32")

    plain = tmp_path / "part-plain"
    plain.write_text("1 1.0\n1 2.0\n")

    def loaded(**flags):
        logkey = flags.pop("logkey", True)
        ds = fluid.DatasetFactory().create_dataset("InMemoryDataset")
        ds.set_use_var([x])
        ds.set_filelist([str(path if logkey else plain)])
        ds.set_parse_logkey(logkey)
        ds.load_into_memory()
        for name, value in flags.items():
            getattr(ds, "set_" + name)(value)
        return ds

    ds = loaded(enable_pv_merge=True)
    ds.preprocess_instance(seed=3)
    assert ds.get_pv_data_size() == 3 and ds.get_memory_data_size() == 0
    with pytest.raises(RuntimeError, match="postprocess_instance"):
        list(ds._samples())
    ds.postprocess_instance()
    sids = [r.search_id for r in ds._samples()]
    assert sorted(sids) == [5, 7, 7, 9, 9]
    runs = [sid for i, sid in enumerate(sids) if i == 0 or sids[i - 1] != sid]
    assert len(runs) == 3                           # each page view's samples stay together
    ds = loaded(enable_pv_merge=True, merge_by_sid=False)
    ds.preprocess_instance(seed=3)
    assert ds.get_pv_data_size() == 5               # one page view per sample
    with pytest.raises(ValueError, match="set_parse_logkey"):
        loaded(logkey=False, enable_pv_merge=True).preprocess_instance()
    with pytest.raises(TypeError, match="must be a bool"):
        ds.set_merge_by_sid("yes")


# -- loaders ------------------------------------------------------------------------------------
def test_dygraph_from_generator_yields_tensors_without_feed_list():
    def samples():
        for i in range(4):
            yield np.full([3], i, "float32"), np.array([i], "int64")

    with fluid.dygraph.guard():
        loader = fluid.io.DataLoader.from_generator(capacity=2, return_list=True)
        loader.set_sample_generator(samples, batch_size=2, places=fluid.CPUPlace())
        got = [(x.shape, y.shape, float(x.numpy().sum())) for x, y in loader()]
        reader = fluid.io.PyReader(capacity=2, return_list=True)
        reader.decorate_sample_list_generator(fluid.io.batch(samples, 4), fluid.CPUPlace())
        (x, y), = list(reader())
        assert isinstance(x, fluid.dygraph.VarBase) and x.stop_gradient
    assert got == [([2, 3], [2, 1], 3.0), ([2, 3], [2, 1], 15.0)]
    assert x.shape == [4, 3] and y.numpy().ravel().tolist() == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="feed_list must name"):
        fluid.io.DataLoader.from_generator(capacity=2)          # static mode needs it


def test_loader_over_places_and_partial_inference_step(monkeypatch):
    monkeypatch.setenv("CPU_NUM", "2")
    assert len(fluid.cpu_places()) == 2
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [None], "float32")
        y = x * x
    exe = fluid.Executor(fluid.CPUPlace())

    def run(drop_last):
        loader = fluid.io.DataLoader.from_generator(feed_list=[x], capacity=8,
                                                    drop_last=drop_last)
        loader.set_batch_generator(
            lambda: ((np.array([i + 1], "float32"),) for i in range(3)), fluid.cpu_places())
        prog = fluid.CompiledProgram(main).with_data_parallel()
        out = []
        for data in loader():
            assert len(data) in (1, 2)
            out.extend(exe.run(prog, feed=data, fetch_list=[y])[0].tolist())
        return out

    assert run(True) == [1.0, 4.0]
    assert run(False) == [1.0, 4.0, 9.0]


def test_partial_feed_refused_for_a_training_program(monkeypatch):
    monkeypatch.setenv("CPU_NUM", "2")
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [-1, 2], "float32")
        loss = L.mean(L.fc(x, 1))
        fluid.optimizer.SGD(0.1).minimize(loss)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    prog = fluid.CompiledProgram(main).with_data_parallel(loss_name=loss.name)
    with pytest.raises(ValueError, match="set drop_last=True"):
        exe.run(prog, feed=[{"x": np.ones((1, 2), "float32")}], fetch_list=[loss])


def test_cpu_places_refuses_a_bad_cpu_num(monkeypatch):
    monkeypatch.setenv("CPU_NUM", "two")
    with pytest.raises(ValueError, match="CPU_NUM"):
        fluid.cpu_places()
    assert len(fluid.cpu_places(3)) == 3


# -- StaticModelRunner ----------------------------------------------------------------------------
def test_static_model_runner_matches_the_static_model_and_trains(tmp_path):
    rng = np.random.RandomState(3)
    xv, lv = rng.rand(8, 5).astype("float32"), rng.randint(0, 3, (8, 1)).astype("int64")
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        img = fluid.data("img", [-1, 5], "float32")
        label = fluid.data("label", [-1, 1], "int64")
        pred = L.fc(L.fc(img, 4, act="relu"), 3, act="softmax")
        loss = L.mean(L.cross_entropy(pred, label))
        params = [p.name for p in main.global_block().all_parameters()]
        grads = fluid.gradients(loss, [main.global_block().var(n) for n in params])
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    want_pred, want_loss, *want_grads = exe.run(main, feed={"img": xv, "label": lv},
                                                fetch_list=[pred, loss] + grads)
    fluid.io.save_inference_model(str(tmp_path), ["img"], [pred], exe, main_program=main)
    with fluid.dygraph.guard():
        runner = fluid.dygraph.static_runner.StaticModelRunner(str(tmp_path))
        assert sorted(p.name for p in runner.parameters()) == sorted(
            n + "@LOADED" for n in params)
        out = runner(fluid.dygraph.to_variable(xv))
        np.testing.assert_allclose(out.numpy(), want_pred, rtol=1e-6)
        avg = L.mean(L.cross_entropy(out, fluid.dygraph.to_variable(lv)))
        np.testing.assert_allclose(avg.numpy(), want_loss, rtol=1e-6)
        avg.backward()
        by_name = {p.name: p.gradient() for p in runner.parameters()}
        for n, g in zip(params, want_grads):
            np.testing.assert_allclose(by_name[n + "@LOADED"], g, rtol=1e-5, atol=1e-7)
        sgd = fluid.optimizer.SGD(0.5, parameter_list=runner.parameters())
        sgd.minimize(avg)
        runner.clear_gradients()
        after = L.mean(L.cross_entropy(runner(xv), fluid.dygraph.to_variable(lv)))
        assert after.numpy().item() < avg.numpy().item()
        with pytest.raises(ValueError, match="takes 1 input"):
            runner([xv, xv])
    with pytest.raises(RuntimeError, match="dygraph mode"):
        fluid.dygraph.static_runner.StaticModelRunner(str(tmp_path))


# -- feeds and complex tensors ------------------------------------------------------------------
def test_lower_rank_feed_with_declared_trailing_ones_is_accepted():
    main, other = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("x", [3, 1], "float32")
        y = x * 2.0
    with fluid.program_guard(other, fluid.Program()):
        z = fluid.data("z", [-1, 4], "float32")
        w = L.reduce_sum(z)
    exe = fluid.Executor(fluid.CPUPlace())
    (got,) = exe.run(main, feed={"x": np.array([1, 2, 3], "float32")}, fetch_list=[y])
    assert got.shape == (3, 1)                      # the declared shape holds
    with pytest.raises(ValueError, match=r"'z' should have dimensions = 2"):
        exe.run(other, feed={"z": np.ones(4, "float32")}, fetch_list=[w])   # unbatched


def test_to_variable_of_a_complex_array_is_a_complex_variable():
    a = np.array([1.0 + 2.0j, 0.2])
    with fluid.dygraph.guard():
        var = fluid.dygraph.to_variable(a, name="new_var")
        assert isinstance(var, fluid.framework.ComplexVariable)
        assert var.name == {"real": "new_var.real", "imag": "new_var.imag"}
        assert var.dtype == "complex128" and var.shape == [2]
        np.testing.assert_array_equal(var.numpy(), a)
        np.testing.assert_array_equal(var.real.numpy(), [1.0, 0.2])
        c64 = fluid.dygraph.to_variable(a.astype("complex64"))
        assert c64.dtype == "complex64" and c64.numpy().dtype == np.complex64
        with pytest.raises(TypeError, match="complex value takes no dtype"):
            fluid.dygraph.to_variable(a, dtype="float32")
