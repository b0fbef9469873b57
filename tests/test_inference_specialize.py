"""Shape specialisation of the inference predictor (``AnalysisConfig
.switch_shape_specialization``): a model saved with free map sizes gets the shape-dependent
passes on the second run of a shape, in a program of its own whose folded weights never touch
the creation's; and ``Block.infer_shapes``, which gives a copy of the program those sizes."""
from __future__ import annotations

import os
import threading
import warnings

import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.inference import AnalysisConfig, PaddleTensor, create_paddle_predictor
from fluidlite.core import rewrite
from fluidlite.inference import passes as passes_mod
from fluidlite.inference import predictor as predictor_mod

from test_hostile_models import loop_program
from test_inference_kernels import _close, _save

SHAPE_PASSES = ("conv2d_fusion_layout_transfer_pass", "depthwise_separable_fuse_pass")


def _net():
    """A conv stem, a MobileNet block and a 2x2 / 2 up-sampling, on maps of free size."""
    x = fluid.data("x", [-1, 3, -1, -1])
    h = fluid.layers.batch_norm(fluid.layers.conv2d(x, 16, 3, padding=1, bias_attr=False),
                                act="relu", is_test=True)
    e = fluid.layers.batch_norm(fluid.layers.conv2d(h, 32, 1, bias_attr=False),
                                act="relu6", is_test=True)
    dw = fluid.layers.batch_norm(
        fluid.layers.conv2d(e, 32, 3, padding=1, groups=32, bias_attr=False),
        act="relu6", is_test=True)
    pr = fluid.layers.batch_norm(fluid.layers.conv2d(dw, 16, 1, bias_attr=False),
                                 is_test=True)
    up = fluid.layers.conv2d_transpose(pr, 8, filter_size=2, stride=2)
    return [fluid.layers.batch_norm(up, act="relu", is_test=True)]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return _save(tmp_path_factory.mktemp("free_hw"), _net, ["x"])


def _predictor(d, **switch):
    c = AnalysisConfig(d)
    if switch:
        c.switch_shape_specialization(**switch)
    return create_paddle_predictor(c)


def _reference(d, x):
    c = AnalysisConfig(d)
    c.switch_ir_optim(False)
    return create_paddle_predictor(c).run([PaddleTensor(x)])[0].as_ndarray()


def _x(n, h, w, seed=0):
    return np.random.default_rng(seed).standard_normal((n, 3, h, w)).astype("float32")


def _fired(applied):
    return {n: k for n, k in applied if k}


def _run(p, x):
    return p.run([PaddleTensor(x)])[0].as_ndarray()


def test_second_run_of_a_shape_specialises(model, caplog):
    caplog.set_level("INFO", logger="fluidlite.inference.predictor")
    p = _predictor(model)
    assert p.get_input_tensor_shape() == {"x": [-1, 3, -1, -1]}
    assert not any(_fired(p.applied_passes()).get(n) for n in SHAPE_PASSES)
    x = _x(2, 16, 16)
    ref = _reference(model, x)
    _close([_run(p, x)], [ref])
    assert p.specializations() == []                 # a first sight builds nothing
    _close([_run(p, x)], [ref])
    (shapes, program, applied), = p.specializations()
    assert shapes == {"x": [-1, 3, 16, 16]}          # the batch stays free
    assert "shape specialisation: {'x': [-1, 3, 16, 16]} -> [" in caplog.text
    assert "conv2d_fusion_layout_transfer_pass" in caplog.text
    fired = _fired(applied)
    assert all(fired.get(n) for n in SHAPE_PASSES), fired
    types = [op.type for op in program.global_block().ops]
    assert "depthwise_separable_fusion" in types
    assert program is not p.program()
    assert "depthwise_separable_fusion" not in [op.type for op in p.program().global_block().ops]
    _close([_run(p, x)], [ref])
    y = _x(3, 16, 16, seed=1)                        # another batch: the same program
    _close([_run(p, y)], [_reference(model, y)])
    assert len(p.specializations()) == 1


def test_specialised_runs_leave_the_creation_program_alone(model):
    """The specialised program folds the same weights under the same names into its own
    scope: the creation's program gives the same bits after as before."""
    p = _predictor(model)
    other = _x(1, 12, 20, seed=2)

    def creation():            # the creation's program itself, in the predictor's scope
        got = p._exe.run(p.program(), feed={"x": other}, fetch_list=p.get_output_names(),
                         scope=p._scope)
        return np.asarray(got[0])
    before = creation()
    x = _x(1, 16, 16)
    for _ in range(3):
        _run(p, x)
    assert len(p.specializations()) == 1
    np.testing.assert_array_equal(creation(), before)
    np.testing.assert_array_equal(_run(p, x), _run(p, x.copy()))


def test_a_build_in_progress_is_not_started_twice(model, monkeypatch):
    """While one thread builds a shape's program, a run of that shape in another thread runs
    the creation's program instead of building it again."""
    started, release, calls = threading.Event(), threading.Event(), []
    build = predictor_mod._Shared._specialize

    def slow(self, key):
        calls.append(key)
        started.set()
        release.wait(5)
        return build(self, key)
    monkeypatch.setattr(predictor_mod._Shared, "_specialize", slow)
    p = _predictor(model)
    x = _x(1, 16, 16)
    _run(p, x)
    worker = threading.Thread(target=_run, args=(p.clone(), x))
    worker.start()
    assert started.wait(5)
    assert p._shared.variant({"x": (x, [])}) is None         # not a second build
    release.set()
    worker.join()
    assert len(calls) == 1 and len(p.specializations()) == 1
    assert p._shared.variant({"x": (x, [])}) is p._shared.variants()[0]


def test_shapes_seen_once_are_remembered_up_to_a_bound(model, monkeypatch):
    monkeypatch.setattr(predictor_mod, "_SEEN_KEEP", 4)
    p = _predictor(model)
    shared = p._shared

    def seen_once(h):
        return shared.variant({"x": (_x(1, h, 8), [])})
    assert seen_once(8) is None
    for h in (9, 10, 11):                    # 4 shapes seen once: 8 still remembered
        assert seen_once(h) is None
    assert seen_once(8) is not None          # its second run
    assert seen_once(12) is None             # 9, 10, 11, 12 now
    assert seen_once(13) is None             # 10, 11, 12, 13: 9 forgotten
    assert seen_once(9) is None              # a first sight again
    assert seen_once(13) is not None


def test_capacity_drops_the_least_recently_used(model):
    p = _predictor(model, capacity=2)
    sizes = [(8, 8), (12, 12), (16, 8)]
    for h, w in sizes:
        for _ in range(2):
            out = _run(p, _x(1, h, w))
        _close([out], [_reference(model, _x(1, h, w))])
    kept = [s["x"][2:] for s, _, _ in p.specializations()]
    assert kept == [[12, 12], [16, 8]]
    _run(p, _x(1, 12, 12))                           # used: now the most recent
    assert [s["x"][2:] for s, _, _ in p.specializations()] == [[16, 8], [12, 12]]
    _run(p, _x(1, 8, 8))                             # dropped: counted afresh, first sight
    assert len(p.specializations()) == 2 and [8, 8] not in \
        [s["x"][2:] for s, _, _ in p.specializations()]
    _run(p, _x(1, 8, 8))
    assert [s["x"][2:] for s, _, _ in p.specializations()] == [[12, 12], [8, 8]]


def test_switched_off_or_without_ir_optim_nothing_is_specialised(model):
    p = _predictor(model, x=False)
    x = _x(1, 16, 16)
    for _ in range(3):
        _run(p, x)
    assert p.specializations() == []
    c = AnalysisConfig(model)
    c.switch_ir_optim(False)
    q = create_paddle_predictor(c)
    for _ in range(3):
        _run(q, x)
    assert q.specializations() == []


def test_clones_share_the_specialised_programs(model):
    p = _predictor(model)
    x = _x(2, 16, 16)
    _run(p, x), _run(p, x)
    q = p.clone()
    assert [s for s, _, _ in q.specializations()] == [{"x": [-1, 3, 16, 16]}]
    np.testing.assert_array_equal(_run(q, x), _run(p, x))


def test_clones_in_threads_on_one_shape(model):
    p = _predictor(model)
    x = _x(1, 16, 16)
    ref = _reference(model, x)
    got, errors = [], []

    def work(q):
        try:
            for _ in range(4):
                got.append(_run(q, x))
        except Exception as e:       # (reported below)
            errors.append(e)
    workers = [threading.Thread(target=work, args=(q,)) for q in (p, p.clone(), p.clone())]
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    assert not errors
    assert len(got) == 12 and len(p.specializations()) == 1
    _close(got, [ref] * len(got))


def test_a_failing_specialisation_warns_and_keeps_serving(model, monkeypatch):
    calls = []

    def fails_on_sizes(ctx):
        calls.append(1)
        if ctx.block.var("x").shape[2] > 0:
            raise RuntimeError("no such sizes here")
        return 0
    monkeypatch.setitem(passes_mod.PASSES, "fails_on_sizes_pass", fails_on_sizes)
    c = AnalysisConfig(model)
    c.pass_builder().append_pass("fails_on_sizes_pass")
    p = create_paddle_predictor(c)
    x = _x(1, 16, 16)
    ref = _reference(model, x)
    _close([_run(p, x)], [ref])
    with pytest.warns(RuntimeWarning,
                      match=r"\{'x': \[-1, 3, 16, 16\]\}.*RuntimeError: no such sizes") as got:
        out = p.run([PaddleTensor(x)])[0].as_ndarray()
    # the run's caller, not a line of fluidlite (this file; mutmut's trampoline under it)
    assert not got[0].filename.startswith(os.path.dirname(fluid.__file__))
    _close([out], [ref])
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # not tried again
        _close([_run(p, x)], [ref])
    assert len(calls) == 2 and p.specializations() == []


def test_lod_inputs_and_other_ranks_are_not_specialised(model):
    p = _predictor(model)
    shared = p._shared
    x = _x(1, 16, 16)
    for _ in range(3):
        assert shared.variant({"x": (x, [[0, 1]])}) is None
        assert shared.variant({"x": (x[0], [])}) is None
    assert p.specializations() == []


def test_a_model_of_static_sizes_is_not_specialisable(tmp_path):
    def net():
        x = fluid.data("x", [-1, 3, 8, 8])
        return [fluid.layers.conv2d(x, 4, 3, padding=1, act="relu")]
    p = _predictor(_save(tmp_path, net, ["x"]))
    assert not p._shared.specializable


@pytest.mark.parametrize("capacity", [0, -1, True, 2.0, "8"])
def test_capacity_must_be_a_positive_int(capacity):
    c = AnalysisConfig()
    with pytest.raises(ValueError, match="capacity must be an int >= 1"):
        c.switch_shape_specialization(True, capacity)
    assert c.shape_specialization_enabled() and c.shape_specialization_capacity() == 8


def test_switch_and_getters():
    c = AnalysisConfig()
    c.switch_shape_specialization(True, 1)
    assert c.shape_specialization_capacity() == 1
    c.switch_shape_specialization(False, 3)
    assert not c.shape_specialization_enabled() and c.shape_specialization_capacity() == 3
    c.switch_shape_specialization()
    assert c.shape_specialization_enabled() and c.shape_specialization_capacity() == 8


# -- Block.infer_shapes -----------------------------------------------------------------------
def _conv_program():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("x", [-1, 3, -1, -1])
        y = fluid.layers.conv2d(x, 4, 3, stride=2, padding=1)
        z = fluid.layers.pool2d(y, 2, pool_stride=2)
    return main, y, z


def test_infer_shapes_follows_the_new_sizes():
    main, y, z = _conv_program()
    block = main.global_block()
    assert block.var(y.name).shape == (-1, 4, -1, -1)
    block.infer_shapes({"x": [-1, 3, 17, 32]})
    assert block.var("x").shape == (-1, 3, 17, 32)
    assert block.var(y.name).shape == (-1, 4, 9, 16)
    assert block.var(z.name).shape == (-1, 4, 4, 8)


def test_infer_shapes_refusals():
    main, _, _ = _conv_program()
    block = main.global_block()
    with pytest.raises(ValueError, match="'nope' is not a variable of block 0"):
        block.infer_shapes({"nope": [1]})
    with pytest.raises(ValueError, match="op 'conv2d' shape inference failed"):
        block.infer_shapes({"x": [-1, 5, 8, 8]})        # 5 channels into a 3-channel filter
    with pytest.raises(ValueError, match="only a program of one block"):
        loop_program().global_block().infer_shapes({})


def _held(scope):
    return {n: scope.find_var(n).get_tensor()._array for n in scope.local_var_names()
            if scope.find_var(n).is_initialized()}


def test_specialised_builds_and_runs_write_nothing_of_the_creation(model):
    """Neither the folding for a shape nor that shape's runs write a variable of the loaded
    weights' scope (the creation's folded weights and temporaries): the executor writes into
    an ancestor's variable of the same name, and both builds fold under the same names."""
    p = _predictor(model)
    params = p._shared.params
    before = _held(params)
    x = _x(1, 16, 16)
    for _ in range(3):
        _run(p, x)
    assert len(p.specializations()) == 1
    after = _held(params)
    assert after.keys() == before.keys()
    assert all(after[n] is before[n] for n in before), \
        [n for n in before if after[n] is not before[n]]


def test_folding_for_a_shape_goes_to_its_own_scope(model, monkeypatch):
    """A folded constant whose value follows the sizes (as a banded filter follows the map
    width) keeps the creation's value in the creation's scope."""
    def fold_width(ctx):
        width = float(ctx.block.var("x").shape[3])

        def build(fb):
            out = fb.create_var(name="width@fold", shape=[1], dtype="float32",
                                persistable=True)
            rewrite.op(fb, "fill_constant", out=out,
                       attrs={"shape": [1], "dtype": out.dtype, "value": width})
        ctx.fold(build)
        return 1
    monkeypatch.setitem(passes_mod.PASSES, "fold_width_pass", fold_width)
    c = AnalysisConfig(model)
    c.pass_builder().append_pass("fold_width_pass")
    p = create_paddle_predictor(c)
    held = p._shared.params.find_var("width@fold")
    assert float(np.asarray(held.get_tensor())[0]) == -1.0
    x = _x(1, 16, 24)
    _run(p, x), _run(p, x)
    (_, _, applied), = p.specializations()
    assert dict(applied)["fold_width_pass"] == 1
    variant = p._shared.variants()[0]
    assert float(np.asarray(variant.scope.find_var("width@fold").get_tensor())[0]) == 24.0
    assert float(np.asarray(p._shared.params.find_var("width@fold").get_tensor())[0]) == -1.0
