"""Mutation-round tests for fluidlite/ops/distributed_ids.py (split_ids, merge_ids,
ref_by_trainer_id, fake_init).

References: fluid 1.8's operators/distributed_ops/merge_ids_op.h (row j of Out[i] is the row of
the shard whose Rows entry equals Ids[i][j]) and split_ids_op.h (a std::set of the ids, then
``id % shard_num``), written as loops; the InferShape checks' messages are the ops' own.
"""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.core.registry import get_op_def

MERGE = get_op_def("merge_ids")


def ref_merge(ids, rows, xs):
    table = {}
    for r, x in zip(rows, xs):
        for rid, row in zip(np.asarray(r).reshape(-1), x):
            table[int(rid)] = row
    return [np.array([table[int(i)] for i in np.asarray(t).reshape(-1)]).reshape(-1, xs[0].shape[1])
            for t in ids]


def test_merge_ids_against_a_loop():
    rng = np.random.default_rng(0)
    rows = [np.array([[4], [0], [8]], "int64"), np.array([[5], [1]], "int64"),
            np.array([[2]], "int64")]
    xs = [rng.normal(size=(len(r), 3)).astype("float32") for r in rows]
    ids = [np.array([[8], [1], [4], [8], [2]], "int64"), np.array([[5], [0]], "int64")]
    got = MERGE.forward(ids, rows, xs, lod={"Ids": [((0, 2, 5),)]})
    for g, w in zip(got["Out"], ref_merge(ids, rows, xs)):
        np.testing.assert_array_equal(g, w)
        assert g.dtype == np.float32
    assert got["lod"]["Out"] == [((0, 2, 5),), None]
    # an empty Ids tensor
    got = MERGE.forward([np.zeros((0, 1), "int64")], rows, xs)
    assert got["Out"][0].shape == (0, 3)


def test_merge_ids_errors():
    rows = [np.array([[4], [0]], "int64"), np.array([[5]], "int64")]
    xs = [np.zeros((2, 3)), np.zeros((1, 3))]
    with pytest.raises(ValueError, match=r"^merge_ids: id 7 of Ids\[1\] is in none of the "
                                         r"Rows$"):
        MERGE.forward([np.array([[4]]), np.array([[0], [7]])], rows, xs)
    with pytest.raises(ValueError, match=r"^merge_ids: id 9 of Ids\[0\] is in none of the "
                                         r"Rows$"):
        MERGE.forward([np.array([[9]])], rows, xs)       # past every row
    with pytest.raises(ValueError, match=r"^merge_ids: id 3 of Ids\[0\] is in none"):
        MERGE.forward([np.array([[3]])], [np.zeros((0, 1), "int64")], [np.zeros((0, 3))])
    with pytest.raises(ValueError, match=r"^merge_ids: the ids of Rows must be distinct across "
                                         r"all shards$"):
        MERGE.forward([np.array([[4]])], [rows[0], np.array([[4]], "int64")], xs)
    with pytest.raises(ValueError, match=r"^merge_ids: X\[1\] \[1, 2\] must be \[len\(Rows\[1\]\) "
                                         r"= 1, 3\] \(all X share the embedding size\)$"):
        MERGE.forward([np.array([[4]])], rows, [xs[0], np.zeros((1, 2))])
    with pytest.raises(ValueError, match=r"^merge_ids: X\[0\] \[3, 3\] must be \[len\(Rows\[0\]\) "
                                         r"= 2, 3\]"):
        MERGE.forward([np.array([[4]])], rows, [np.zeros((3, 3)), xs[1]])


def _merge_prog(ids_shape, rows_shapes, x_shapes, x_dtype="float64"):
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        ids = fluid.data("ids", ids_shape, "int64", lod_level=1)
        ids2 = fluid.data("ids2", [7, 1], "int64")
        rows = [fluid.data(f"r{k}", s, "int64") for k, s in enumerate(rows_shapes)]
        xs = [fluid.data(f"x{k}", s, x_dtype) for k, s in enumerate(x_shapes)]
        block = main.global_block()
        outs = [block.create_var(name="mi_0"), block.create_var(name="mi_1")]
        block.append_op("merge_ids", {"Ids": [ids, ids2], "Rows": rows, "X": xs}, {"Out": outs})
    return outs


def test_merge_ids_inference():
    outs = _merge_prog([-1, 1], [[3, 1], [2, 1]], [[3, 8], [2, 8]])
    assert [tuple(o.shape) for o in outs] == [(-1, 8), (7, 8)]
    assert [o.lod_level for o in outs] == [1, 0]
    assert all(o.dtype == fluid.core.VarDesc.VarType.FP64 for o in outs)
    _merge_prog([4, -1], [[3, 1]], [[3, 8]])


@pytest.mark.parametrize("ids, rows, xs, msg", [
    ([4], [[3, 1]], [[3, 8]], r"Ids must be \[batch, 1\], got shape \[4\]"),
    ([4, 2], [[3, 1]], [[3, 8]], r"Ids must be \[batch, 1\], got shape \[4, 2\]"),
    ([4, 1], [[3, 1], [2, 1]], [[3, 8]], r"Rows and X must have as many tensors \(one per "
                                         r"shard\), got 2 and 1"),
])
def test_merge_ids_inference_errors(ids, rows, xs, msg):
    with pytest.raises(ValueError, match="merge_ids: " + msg):
        _merge_prog(ids, rows, xs)


def test_split_ids_and_others():
    d = get_op_def("split_ids")
    with pytest.raises(ValueError, match=r"^split_ids: the number of outputs Out \(the shard "
                                         r"count\) is unknown; give Out one variable per shard$"):
        d.forward([np.array([[1]], "int64")])
    outs = d.forward([np.array([[7], [3], [7]], "int64"), np.array([[4], [0]], "int64")],
                     n_out=2)["Out"]
    assert [o.reshape(-1).tolist() for o in outs] == [[0, 4], [3, 7]]
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        bad = fluid.data("bad", [4], "int64")
        with pytest.raises(ValueError, match=r"split_ids: Ids must be 2-D \[batch, 1\], got "
                                             r"shape \[4\]"):
            main.global_block().append_op("split_ids", {"Ids": [bad]},
                                          {"Out": [main.global_block().create_var(name="s0")]})
    with pytest.raises(ValueError, match=r"^ref_by_trainer_id: TrainerId -1 must index one of "
                                         r"the 2 tensors of X$"):
        get_op_def("ref_by_trainer_id").forward([np.ones(1), np.ones(1)], np.array([-1]))
    x = [np.ones(2), np.full(2, 3.0)]
    out = get_op_def("ref_by_trainer_id").forward(x, np.array([1], "int64"))["Out"]
    assert out.tolist() == [3.0, 3.0] and out is not x[1]
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        xv = fluid.data("x", [2, 5], "float32")
        tid = fluid.data("tid", [1], "int32")
        with pytest.raises(ValueError, match=r"ref_by_trainer_id: TrainerId must be int64, got"):
            main.global_block().append_op("ref_by_trainer_id", {"X": [xv], "TrainerId": tid},
                                          {"Out": main.global_block().create_var(name="rt")})
        out = main.global_block().create_var(name="fi")
        main.global_block().append_op("fake_init", {}, {"Out": out}, {"shape": [3, 0, 2]})
        assert tuple(out.shape) == (3, 0, 2) and out.dtype == fluid.core.VarDesc.VarType.FP32
        with pytest.raises(ValueError, match=r"fake_init: shape must have dims >= 0, got "
                                             r"\[3, -1\]"):
            main.global_block().append_op("fake_init", {}, {"Out": out}, {"shape": [3, -1]})
