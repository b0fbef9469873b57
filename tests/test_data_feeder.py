"""fluid.DataFeeder and the data_feeder argument checkers."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.core.scope import LoDTensor
from fluidlite.data_feeder import (DataFeeder, check_dtype, check_type,
                                   check_variable_and_dtype, convert_dtype)


def test_feed_reshapes_samples_to_var_shape():
    main = fluid.Program()
    with fluid.program_guard(main):
        img = fluid.layers.data("img", [784])
        fluid.layers.data("label", [1], dtype="int64")
    feeder = fluid.DataFeeder(feed_list=[img, "label"], place=fluid.CPUPlace(), program=main)
    batch = [(np.full((28, 28), i, np.float64), i) for i in range(3)]
    out = feeder.feed(batch)
    assert set(out) == {"img", "label"}
    assert isinstance(out["img"], LoDTensor)
    arr, lab = np.array(out["img"]), np.array(out["label"])
    assert arr.shape == (3, 784) and arr.dtype == np.float32
    assert lab.shape == (3, 1) and lab.dtype == np.int64
    np.testing.assert_array_equal(lab.ravel(), [0, 1, 2])
    np.testing.assert_array_equal(arr[2], np.full(784, 2.0))


def test_feed_runs_through_executor():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", [2, 2])
        s = fluid.layers.reduce_sum(x, dim=[1, 2])
    feeder = DataFeeder([x], fluid.CPUPlace())
    feed = feeder.feed([([1, 2, 3, 4],), ([5, 6, 7, 8],)])
    exe = fluid.Executor(fluid.CPUPlace())
    got, = exe.run(main, feed=feed, fetch_list=[s])
    np.testing.assert_allclose(got, [10, 26])


def test_shape_mismatch_message():
    x = fluid.layers.data("x", [3])
    feeder = DataFeeder([x], fluid.CPUPlace())
    with pytest.raises(ValueError, match=r"Shape not match. What is defined in data layer is "
                                         r"\[-1, 3\], but receive \[2, 4\]"):
        feeder.feed([([1, 2, 3, 4],), ([1, 2, 3, 4],)])
    with pytest.raises(ValueError, match="Reshape error"):
        feeder.feed([(np.ones((2, 2)),)])


def test_field_count_and_types():
    x = fluid.layers.data("x", [1])
    y = fluid.layers.data("y", [1])
    feeder = DataFeeder([x, y], fluid.CPUPlace())
    with pytest.raises(ValueError, match=r"number of fields in data \(1\) does not match "
                                         r"len\(feed_list\) \(2\)"):
        feeder.feed([(1.0,)])
    with pytest.raises(TypeError, match="feed_list"):
        DataFeeder(x, fluid.CPUPlace())
    with pytest.raises(TypeError, match="Feed list should contain a list of variable"):
        DataFeeder([x, 3], fluid.CPUPlace())


def test_lod_level_sequences():
    words = fluid.layers.data("words", [1], dtype="int64", lod_level=1)
    feeder = DataFeeder([words], fluid.CPUPlace())
    t = feeder.feed([([[1], [2], [3]],), ([[4], [5]],)])["words"]
    assert t.recursive_sequence_lengths() == [[3, 2]]
    np.testing.assert_array_equal(np.array(t).ravel(), [1, 2, 3, 4, 5])


def test_feed_parallel_and_decorate_reader():
    x = fluid.layers.data("x", [2])
    feeder = DataFeeder([x], fluid.CPUPlace())
    batches = [[([1, 2],)], [([3, 4],), ([5, 6],)]]
    assert [np.array(d["x"]).shape for d in feeder.feed_parallel(batches, num_places=2)] == \
        [(1, 2), (2, 2)]
    reader = feeder.decorate_reader(lambda: iter(batches), multi_devices=False)
    assert [np.array(d["x"]).shape[0] for d in reader()] == [1, 2]


def test_feed_parallel_needs_one_minibatch_per_device(monkeypatch):
    """fluid 1.8: as many minibatches as devices -- num_places, else CPU_NUM (default 1)"""
    x = fluid.layers.data("x", [2])
    feeder = DataFeeder([x], fluid.CPUPlace())
    batches = [[([1, 2],)], [([3, 4],)]]
    monkeypatch.delenv("CPU_NUM", raising=False)
    with pytest.raises(ValueError, match=r"devices: 1, mini-batches: 2"):
        list(feeder.feed_parallel(batches))
    monkeypatch.setenv("CPU_NUM", "2")
    assert len(list(feeder.feed_parallel(batches))) == 2
    with pytest.raises(ValueError, match=r"devices: 3, mini-batches: 2"):
        list(feeder.feed_parallel(batches, num_places=3))


def test_decorate_reader_groups_minibatches_per_device():
    x = fluid.layers.data("x", [2])
    feeder = DataFeeder([x], fluid.CPUPlace())
    batches = [[([i, i],)] for i in range(5)]
    reader = feeder.decorate_reader(lambda: iter(batches), multi_devices=True, num_places=2)
    groups = list(reader())
    assert [len(g) for g in groups] == [2, 2]            # the fifth minibatch is dropped
    assert [[float(np.array(d["x"])[0, 0]) for d in g] for g in groups] == [[0, 1], [2, 3]]
    strict = feeder.decorate_reader(lambda: iter(batches), multi_devices=True, num_places=2,
                                    drop_last=False)
    with pytest.raises(ValueError, match="1 mini-batch\\(es\\) left over"):
        list(strict())


def test_checkers_and_convert_dtype():
    assert convert_dtype(fluid.core.VarDesc.VarType.FP32) == "float32"
    assert fluid.data_feeder.convert_dtype("int64") == "int64"
    with pytest.raises(TypeError, match="The type of 'x' in my_layer must be Variable, but "
                                        "received int"):
        check_variable_and_dtype(3, "x", ["float32"], "my_layer")
    with pytest.raises(TypeError, match="The data type of 'x' in my_layer must be "
                                        r"\['float32'\], but received int64"):
        check_dtype("int64", "x", ["float32"], "my_layer")
    check_type(3, "n", (int, float), "my_layer")
