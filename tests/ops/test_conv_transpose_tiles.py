"""conv2d_transpose whose windows tile the output (stride = filter size: U-Net and PP-OCR
up-sampling): the one-GEMM-and-copy kernel (``conv._transpose_tiles``) against a float64
direct reference, the cases it must leave to col2im, the same bits on any thread count, and
``conv_transpose_bn_fuse_pass``."""
from __future__ import annotations

import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.core import threads
from fluidlite.core.registry import get_op_def
from fluidlite.ops import conv as C
from fluidlite.inference import AnalysisConfig, PaddleTensor, create_paddle_predictor

from tests.ops.test_conv import ref_conv_transpose

OP = get_op_def("conv2d_transpose")


def _case(n, c, f, h, w, k, dtype, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((n, c, h, w)).astype(dtype),
            rng.standard_normal((c, f) + tuple(k)).astype(dtype))


def _forward(x, w, **attrs):
    return OP.forward(x, w, **attrs)["Output"]


def _tol(dtype):
    return dict(rtol=1e-5, atol=1e-5) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n,c,f,h,w,k", [
    (1, 24, 24, 20, 20, (2, 2)),     # PP-OCR's head, smaller
    (1, 24, 1, 16, 16, (2, 2)),      # one output channel
    (3, 4, 6, 5, 7, (3, 3)),         # a batch, odd sizes, 3x3 / 3
    (2, 5, 3, 4, 6, (2, 3)),         # a rectangular filter (strides 2, 3)
    (1, 1, 2, 1, 1, (2, 2)),         # one input pixel
    (1, 16, 8, 96, 96, (2, 2)),      # two strips of rows (from K._COPY_MIN outputs)
])
def test_tiles_match_the_direct_reference(n, c, f, h, w, k, dtype):
    x, wt = _case(n, c, f, h, w, k, dtype)
    g = C._transpose_geom((h, w), k, [], list(k), [0, 0], [1, 1], "EXPLICIT", 1, "t")
    assert C._tiles_output(g, 1)
    got = _forward(x, wt, strides=list(k))
    assert got.dtype == dtype and got.shape == (n, f, h * k[0], w * k[1])
    ref = ref_conv_transpose(x.astype(np.float64), wt.astype(np.float64), k)
    np.testing.assert_allclose(got, ref, **_tol(dtype))


def test_tiles_give_the_same_bits_on_every_thread_count_from_two():
    """The strips are cut by the shapes alone, so every thread count from 2 on gives the same
    bits (``core.threads``: one thread leaves large GEMMs uncut, on BLAS's own threads); the
    values are col2im's to rounding (a GEMM over a strip's columns may sum in another order:
    OpenBLAS 0.3.2x)."""
    x, wt = _case(2, 16, 8, 96, 64, (2, 2), np.float32, seed=3)
    g = C._transpose_geom((96, 64), (2, 2), [], [2, 2], [0, 0], [1, 1], "EXPLICIT", 1, "t")
    col2im = C._conv_dx_nchw(x, wt, g)
    with threads.using(1):
        np.testing.assert_allclose(_forward(x, wt, strides=[2, 2]), col2im, rtol=1e-5,
                                   atol=1e-5)
    with threads.using(2):
        two = _forward(x, wt, strides=[2, 2])
    np.testing.assert_allclose(two, col2im, rtol=1e-5, atol=1e-5)
    with threads.using(3):
        np.testing.assert_array_equal(_forward(x, wt, strides=[2, 2]), two)


@pytest.mark.parametrize("dtype,groups,tiled", [
    (np.float32, 1, True), (np.float64, 1, True), (np.float16, 1, False),
    (np.float32, 2, False)])
def test_which_kernel_runs(monkeypatch, dtype, groups, tiled):
    ran = []
    tiles = C._transpose_tiles
    monkeypatch.setattr(C, "_transpose_tiles", lambda *a: ran.append(1) or tiles(*a))
    x, wt = _case(1, 4, 3, 5, 5, (2, 2), dtype, seed=8)
    _forward(x, wt, strides=[2, 2], groups=groups)
    assert bool(ran) == tiled


def test_channels_last_input():
    x, wt = _case(2, 6, 4, 5, 3, (2, 2), np.float64, seed=4)
    got = _forward(np.ascontiguousarray(x.transpose(0, 2, 3, 1)), wt, strides=[2, 2],
                   data_format="NHWC")
    np.testing.assert_allclose(got.transpose(0, 3, 1, 2), ref_conv_transpose(x, wt, (2, 2)),
                               rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("attrs,ref_args", [
    (dict(strides=[2, 2], paddings=[1, 1]), dict(strides=(2, 2), pads=(1, 1, 1, 1))),
    (dict(strides=[1, 1]), dict(strides=(1, 1))),
    (dict(strides=[3, 3]), dict(strides=(3, 3))),                   # gaps between windows
    (dict(strides=[2, 2], dilations=[2, 2]), dict(strides=(2, 2), dil=(2, 2))),
    (dict(strides=[2, 2], groups=2), dict(strides=(2, 2), groups=2)),
])
def test_other_geometries_keep_col2im(attrs, ref_args):
    c = 4
    x, wt = _case(2, c, 3, 5, 6, (2, 2), np.float64, seed=5)
    g = C._transpose_geom((5, 6), (2, 2), [], attrs["strides"], attrs.get("paddings", [0, 0]),
                          attrs.get("dilations", [1, 1]), "EXPLICIT", attrs.get("groups", 1),
                          "t")
    assert not C._tiles_output(g, attrs.get("groups", 1))
    got = _forward(x, wt, **attrs)
    np.testing.assert_allclose(got, ref_conv_transpose(x, wt, **ref_args), rtol=1e-12,
                               atol=1e-12)


def test_a_larger_output_size_keeps_col2im():
    x, wt = _case(1, 3, 2, 4, 4, (2, 2), np.float64, seed=6)
    g = C._transpose_geom((4, 4), (2, 2), [9, 9], [2, 2], [0, 0], [1, 1], "EXPLICIT", 1, "t")
    assert not C._tiles_output(g, 1)
    got = _forward(x, wt, strides=[2, 2], output_size=[9, 9])
    ref = ref_conv_transpose(x, wt, (2, 2), out_hw=(9, 9))
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12)


def test_float16_keeps_col2im():
    x, wt = _case(1, 4, 3, 6, 6, (2, 2), np.float16, seed=7)
    got = _forward(x, wt, strides=[2, 2])
    ref = ref_conv_transpose(x.astype(np.float64), wt.astype(np.float64), (2, 2))
    assert got.dtype == np.float16
    np.testing.assert_allclose(got.astype(np.float64), ref, rtol=2e-2, atol=2e-2)


# -- conv_transpose_bn_fuse_pass ----------------------------------------------------------------
def _save_deconv(tmp_path, groups, bias):
    main, startup = fluid.Program(), fluid.Program()
    scope = fluid.Scope()
    with fluid.program_guard(main, startup), fluid.scope_guard(scope), \
            fluid.unique_name.guard():
        x = fluid.data("x", [-1, 4, 6, 6])
        y = fluid.layers.conv2d_transpose(x, 6, filter_size=2, stride=2, groups=groups,
                                          bias_attr=None if bias else False)
        y = fluid.layers.batch_norm(y, act="relu", is_test=True)
        exe = fluid.Executor(fluid.CPUPlace())
        exe.run(startup)
        rng = np.random.default_rng(0)
        for name, var in main.global_block().vars.items():
            held = scope.find_var(name)
            if var.persistable and held is not None and held.is_initialized():
                shape = np.asarray(held.get_tensor()).shape
                # signed filter and bias; batch-norm statistics positive (variances)
                low = -1.0 if name.startswith("conv2d_transpose") else 0.5
                held.set(rng.uniform(low, 1.5, shape).astype("float32"))
        fluid.io.save_inference_model(str(tmp_path), ["x"], [y], exe, main_program=main)
    return str(tmp_path)


def _predict(d, x, ir_optim=True):
    c = AnalysisConfig(d)
    c.switch_ir_optim(ir_optim)
    p = create_paddle_predictor(c)
    return p, p.run([PaddleTensor(x)])[0].as_ndarray()


@pytest.mark.parametrize("bias", [True, False])
def test_bn_folds_into_the_transposed_filter(tmp_path, bias):
    d = _save_deconv(tmp_path, 1, bias)
    x = np.random.default_rng(1).standard_normal((2, 4, 6, 6)).astype("float32")
    p, got = _predict(d, x)
    _, ref = _predict(d, x, ir_optim=False)
    assert dict(p.applied_passes())["conv_transpose_bn_fuse_pass"] == 1
    types = [op.type for op in p.program().global_block().ops]
    assert "batch_norm" not in types and "conv2d_transpose" in types
    assert np.max(np.abs(got - ref)) <= 1e-5 * np.max(np.abs(ref))
    assert np.max(np.abs(ref)) > 0


def test_grouped_transposed_conv_keeps_its_bn(tmp_path):
    d = _save_deconv(tmp_path, 2, True)
    x = np.random.default_rng(2).standard_normal((1, 4, 6, 6)).astype("float32")
    p, got = _predict(d, x)
    _, ref = _predict(d, x, ir_optim=False)
    assert dict(p.applied_passes())["conv_transpose_bn_fuse_pass"] == 0
    assert "batch_norm" in [op.type for op in p.program().global_block().ops]
    np.testing.assert_array_equal(got, ref)
