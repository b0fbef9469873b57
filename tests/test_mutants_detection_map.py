"""Mutation-round tests for fluidlite/ops/detection_map.py.

Reference: Paddle 2.6.2's detection_map op (fluid 1.8's C++ kernel, detection_map_op.h) run on
24 cases -- random boxes per image (LoD), 2-4 classes, difficult flags, both ``ap_type``s,
``evaluate_difficult`` on and off, background -1 / 0, 6- and 5-column labels, a class whose
only detection hits a difficult box, and the accumulated state fed back (HasState = 1). The
inputs and Paddle's outputs (MAP, AccumPosCount, AccumTruePos / AccumFalsePos and their LoD)
are stored in tests/fixtures/detection_map_paddle26.json.

Left out by design: fluid's ``CalcMAP`` compares a class's positive *count* with
``background_label`` (fluidlite skips the background class and classes without positives, see
the op's comment), so a state with zero-count classes and background -1, or a class whose
count equals background_label, give other means than Paddle's.
"""
import json
import os

import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.core.registry import get_op_def

with open(os.path.join(os.path.dirname(__file__), "fixtures",
                       "detection_map_paddle26.json")) as f:
    CASES = json.load(f)


def _off(lens):
    return (tuple(np.concatenate([[0], np.cumsum(lens)]).astype(int).tolist()),)


def _run(c):
    lod = {"DetectRes": _off(c["det_lens"]), "Label": _off(c["gt_lens"])}
    args = [np.array(c["det"], "float32").reshape(-1, 6),
            np.array(c["gt"], "float32").reshape(len(c["gt"]), -1)]
    if c.get("state"):
        s = c["state"]
        args += [np.array([1], "int32"), np.array(s["pos"], "int32").reshape(-1, 1),
                 np.array(s["tp"], "float32").reshape(-1, 2),
                 np.array(s["fp"], "float32").reshape(-1, 2)]
        lod["TruePos"], lod["FalsePos"] = _off(s["tp_lens"]), _off(s["fp_lens"])
    return get_op_def("detection_map").forward(*args, lod=lod, **c["attrs"])


@pytest.mark.parametrize("k", range(len(CASES)))
def test_detection_map_matches_paddle(k):
    c, want = CASES[k]["inputs"], CASES[k]["paddle"]
    got = _run(c)
    assert got["MAP"].dtype == np.float32 and got["MAP"].shape == (1,)
    np.testing.assert_allclose(got["MAP"][0], want["map"], rtol=1e-6, atol=1e-7)
    assert got["AccumPosCount"].dtype == np.int32
    assert got["AccumPosCount"].shape == (c["attrs"]["class_num"], 1)
    assert got["AccumPosCount"].reshape(-1).tolist() == want["pos"]
    for slot, key in (("AccumTruePos", "tp"), ("AccumFalsePos", "fp")):
        arr = np.asarray(got[slot])
        assert arr.dtype == np.float32
        np.testing.assert_allclose(arr.reshape(-1, 2), np.array(want[key]).reshape(-1, 2),
                                   rtol=1e-6)
        lens = want[key + "_lens"]
        assert got["lod"][slot] == _off(lens + [0] * (c["attrs"]["class_num"] - len(lens)))


def _infer(det_shape, gt_shape, **attrs):
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        det = fluid.data("det", det_shape, "float32", lod_level=1)
        gt = fluid.data("gt", gt_shape, "float32", lod_level=1)
        block = main.global_block()
        outs = {s: block.create_var(name="dm_" + s) for s in
                ("MAP", "AccumPosCount", "AccumTruePos", "AccumFalsePos")}
        block.append_op("detection_map", {"DetectRes": det, "Label": gt}, outs, attrs)
    return outs


def test_inference():
    outs = _infer([-1, 6], [-1, 5], class_num=4, ap_type="11point")
    assert tuple(outs["MAP"].shape) == (1,) and outs["MAP"].dtype == fluid.core.VarDesc.VarType.FP32
    assert tuple(outs["AccumPosCount"].shape) == (4, 1)
    assert outs["AccumPosCount"].dtype == fluid.core.VarDesc.VarType.INT32
    for s in ("AccumTruePos", "AccumFalsePos"):
        assert tuple(outs[s].shape) == (-1, 2) and outs[s].lod_level == 1
        assert outs[s].dtype == fluid.core.VarDesc.VarType.FP32
    _infer([3, 6], [2, 6], class_num=1)                     # the smallest valid class_num


@pytest.mark.parametrize("det, gt, attrs, msg", [
    ([-1, 6], [-1, 6], {"class_num": 2, "ap_type": "11Point"},
     "ap_type must be 'integral' or '11point', got '11Point'"),
    ([-1, 6], [-1, 6], {"class_num": 0}, "class_num must be > 0, got 0"),
    ([-1, 5], [-1, 6], {"class_num": 2}, r"DetectRes must be \[M, 6\], got \[-1, 5\]"),
    ([2, 6, 1], [-1, 6], {"class_num": 2}, r"DetectRes must be \[M, 6\], got \[2, 6, 1\]"),
    ([-1, 6], [-1, 4], {"class_num": 2}, r"Label must be \[G, 6\] or \[G, 5\], got \[-1, 4\]"),
    ([-1, 6], [3, 6, 1], {"class_num": 2}, r"Label must be \[G, 6\] or \[G, 5\], got \[3, 6, 1\]"),
])
def test_inference_errors(det, gt, attrs, msg):
    with pytest.raises(ValueError, match="detection_map: " + msg):
        _infer(det, gt, **attrs)


def test_images_must_agree():
    det = np.array([[1, 0.9, 0.1, 0.1, 0.3, 0.3], [1, 0.8, 0.1, 0.1, 0.3, 0.3]], "float32")
    gt = np.array([[1, 0, 0.1, 0.1, 0.3, 0.3]], "float32")
    with pytest.raises(ValueError, match=r"^detection_map: DetectRes holds 2 images \(its LoD\) "
                                         r"but Label 1$"):
        get_op_def("detection_map").forward(det, gt, lod={"DetectRes": ((0, 1, 2),),
                                                          "Label": ((0, 1),)}, class_num=2)


def test_no_positives_give_map_0_and_the_background_is_skipped():
    op = get_op_def("detection_map")
    det = np.array([[1, 0.9, 0.1, 0.1, 0.3, 0.3]], "float32")
    difficult_only = np.array([[1, 1, 0.1, 0.1, 0.3, 0.3]], "float32")
    got = op.forward(det, difficult_only, lod={"DetectRes": ((0, 1),), "Label": ((0, 1),)},
                     class_num=2, evaluate_difficult=False)
    assert got["MAP"].tolist() == [0.0] and got["AccumPosCount"].reshape(-1).tolist() == [0, 0]
    # class 0 is the background (skipped, not the end of the loop): class 2 still counts
    det = np.array([[0, 0.9, 0.1, 0.1, 0.3, 0.3], [2, 0.8, 0.5, 0.5, 0.9, 0.9]], "float32")
    gt = np.array([[0, 0, 0.6, 0.6, 0.7, 0.7], [2, 0, 0.5, 0.5, 0.9, 0.9]], "float32")
    got = op.forward(det, gt, lod={"DetectRes": ((0, 2),), "Label": ((0, 2),)}, class_num=3,
                     background_label=0)
    assert got["MAP"].tolist() == [1.0]


def test_detections_are_clipped_to_the_unit_square():
    # a detection reaching outside [0, 1] matches its ground truth after clipping (IoU 1)
    op = get_op_def("detection_map")
    det = np.array([[1, 0.9, -0.5, -0.5, 1.5, 1.5]], "float32")
    gt = np.array([[1, 0, 0.0, 0.0, 1.0, 1.0]], "float32")
    got = op.forward(det, gt, lod={"DetectRes": ((0, 1),), "Label": ((0, 1),)}, class_num=2,
                     overlap_threshold=0.99)
    assert got["MAP"].tolist() == [1.0]
