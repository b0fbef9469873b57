"""ONNX export of sizes known only at run time: reshape2's ``Shape`` / ``ShapeTensor`` inputs,
the interpolate ops' ``OutSize`` / ``SizeTensor`` / ``Scale`` inputs and scales of maps whose
height and width are free, NHWC resizes, and flatten_contiguous_range over several free dims
(as in PaddleOCR's published detection / recognition / direction models). Each program is
exported once, and onnxruntime reproduces fluidlite's NumPy executor on inputs of two sizes."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.core import rewrite

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from fluidlite.onnx import export  # noqa: E402

L = fluid.layers


def img(layout="NCHW"):
    return fluid.data("x", [None, 3, None, None] if layout == "NCHW" else [None, None, None, 3],
                      "float32")


def _dims_of(x, start, stop):
    """x's dims start..stop-1 as a run-time int32 tensor (shape + slice, as Paddle exports)."""
    return L.slice(L.shape(x), axes=[0], starts=[start], ends=[stop])


def _reshape_shape_tensor():
    x = img()
    n = L.reshape(_dims_of(x, 0, 1), [1])
    return L.reshape(x, [n, 3, -1])          # a Variable in the list: the ShapeTensor input


def _reshape_actual_shape():
    x = img()
    return L.reshape(x, [-1, 3, 1], actual_shape=L.concat(
        [_dims_of(x, 0, 2), L.fill_constant([1], "int32", -1)], axis=0))


def _reshape_both():
    # Paddle's kernel (2.6, checked) takes the ShapeTensor list over the Shape tensor
    x = img()
    block = fluid.default_main_program().global_block()
    out = rewrite.tmp(block, "reshape2", "float32")
    shape = L.concat([_dims_of(x, 0, 1), L.fill_constant([1], "int32", -1)], axis=0)
    tensors = [L.fill_constant([1], "int32", 3), L.fill_constant([1], "int32", -1)]
    rewrite.append(block, "reshape2", {"X": [x], "Shape": [shape], "ShapeTensor": tensors},
                   {"Out": [out], "XShape": [rewrite.tmp(block, "xshape", "float32")]},
                   {"shape": [-1]})
    return out


def _flatten_free_dims():
    x = fluid.data("x", [None, 3, None, 4], "float32")
    block = fluid.default_main_program().global_block()
    out = rewrite.tmp(block, "flatten", "float32")
    rewrite.append(block, "flatten_contiguous_range", {"X": [x]},
                   {"Out": [out], "XShape": [rewrite.tmp(block, "xshape", "float32")]},
                   {"start_axis": 1, "stop_axis": 2})
    return out


CASES = {
    "reshape_shape_tensor": _reshape_shape_tensor,
    "reshape_actual_shape": _reshape_actual_shape,
    "reshape_shape_tensor_over_shape": _reshape_both,
    "flatten_free_dims": _flatten_free_dims,
    "nearest_scale_free_hw": lambda: L.resize_nearest(img(), scale=2.0, align_corners=False),
    "nearest_scale_align": lambda: L.resize_nearest(img(), scale=1.5),
    "bilinear_scale_free_hw": lambda: L.resize_bilinear(img(), scale=0.5, align_corners=False,
                                                        align_mode=0),
    "bilinear_scale_tensor": lambda: L.resize_bilinear(
        img(), scale=L.fill_constant([1], "float32", 1.5), align_corners=False),
    "bilinear_out_size_tensor": lambda: L.resize_bilinear(
        img(), out_shape=L.assign(np.array([5, 7], "int32"))),
    "nearest_size_tensor_list": lambda: L.resize_nearest(
        img(), out_shape=[L.fill_constant([1], "int32", 6), 4], align_corners=False),
    "bilinear_nhwc": lambda: L.resize_bilinear(img("NHWC"), out_shape=[5, 9],
                                               data_format="NHWC"),
    "nearest_nhwc_scale": lambda: L.resize_nearest(img("NHWC"), scale=2.0,
                                                   align_corners=False, data_format="NHWC"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_run_time_sizes_export_and_onnxruntime_agrees(tmp_path, name):
    main, start = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, start):
        out = CASES[name]()
        x = main.global_block().var("x")
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(start, scope=scope)
    path = str(tmp_path / "m.onnx")
    with fluid.scope_guard(scope):
        export(main, path, ["x"], [out.name])
    onnx.checker.check_model(onnx.load(path), full_check=True)
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(5)
    for sizes in ((2, 6, 8), (3, 5, 4)):       # one exported model, two input sizes
        free = iter(sizes)                      # the free dims in order: batch, height, width
        shape = [next(free) if d < 0 else d for d in x.shape]
        feed = {"x": rng.uniform(-1, 1, shape).astype("float32")}
        (want,) = exe.run(main, feed=feed, fetch_list=[out], scope=scope)
        got = session.run(None, feed)[0]
        assert got.shape == want.shape, (name, shape)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
