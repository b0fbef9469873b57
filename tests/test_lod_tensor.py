"""create_lod_tensor / create_random_int_lodtensor, and lod metadata through the executor."""
import numpy as np
import pytest

import fluidlite as fluid


def test_from_list_of_sequences():
    t = fluid.create_lod_tensor([[1, 2, 3], [4, 5]], [[3, 2]], fluid.CPUPlace())
    assert isinstance(t, fluid.LoDTensor)
    arr = np.array(t)
    assert arr.dtype == np.int64 and arr.shape == (5, 1)
    np.testing.assert_array_equal(arr.ravel(), [1, 2, 3, 4, 5])
    assert t.lod() == [[0, 3, 5]] and t.recursive_sequence_lengths() == [[3, 2]]
    f = fluid.create_lod_tensor([[0.5], [1.5, 2.5]], [[1, 2]], fluid.CPUPlace())
    assert np.array(f).dtype == np.float32


def test_from_array_and_from_lod_tensor_two_levels():
    data = np.arange(12, dtype="float32").reshape(6, 2)
    t = fluid.create_lod_tensor(data, [[2, 1], [1, 3, 2]], fluid.CPUPlace())
    assert t.lod() == [[0, 2, 3], [0, 1, 4, 6]] and t.has_valid_recursive_sequence_lengths()
    t2 = fluid.create_lod_tensor(t, [[4, 2]], fluid.CPUPlace())
    np.testing.assert_array_equal(np.array(t2), data)
    assert t2.recursive_sequence_lengths() == [[4, 2]]
    data[0, 0] = 99.0                        # the tensor holds its own copy
    assert np.array(t)[0, 0] == 0.0


def test_invalid_lengths_are_rejected():
    with pytest.raises(ValueError, match="invalid for data of shape"):
        fluid.create_lod_tensor(np.zeros((5, 1)), [[2, 2]], fluid.CPUPlace())
    with pytest.raises(ValueError, match="do not match"):
        fluid.create_lod_tensor([[1, 2], [3]], [[1, 2]], fluid.CPUPlace())
    with pytest.raises(ValueError, match="level lengths"):
        fluid.create_lod_tensor(np.zeros((3, 1)), [[1, 2], [1, 1]], fluid.CPUPlace())
    with pytest.raises(TypeError, match="list of lists"):
        fluid.create_lod_tensor(np.zeros((3, 1)), [3], fluid.CPUPlace())
    with pytest.raises(TypeError, match="LoDTensor, a Numpy array or a list"):
        fluid.create_lod_tensor("abc", [[3]], fluid.CPUPlace())


def test_random_int_lodtensor():
    t = fluid.create_random_int_lodtensor([[2, 3]], [4], fluid.CPUPlace(), low=1, high=3,
                                          seed=0)
    arr = np.array(t)
    assert arr.shape == (5, 4) and arr.dtype == np.int64
    assert arr.min() >= 1 and arr.max() <= 3 and set(np.unique(arr)) == {1, 2, 3}
    assert t.recursive_sequence_lengths() == [[2, 3]]
    again = fluid.create_random_int_lodtensor([[2, 3]], [4], fluid.CPUPlace(), 1, 3, seed=0)
    np.testing.assert_array_equal(np.array(again), arr)


def test_lod_is_kept_through_the_executor_and_ignored_by_ops():
    words = fluid.data("words", [None, 1], "int64", lod_level=1)
    emb = fluid.embedding(words, size=[10, 3])
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(fluid.default_startup_program())
    t = fluid.create_lod_tensor([[1, 2, 3], [4, 5]], [[3, 2]], fluid.CPUPlace())
    got_words, got_emb = exe.run(feed={"words": t}, fetch_list=[words, emb], return_numpy=False)
    assert got_words.lod() == [[0, 3, 5]]
    assert got_emb.shape() == [5, 3]
    table = np.array(fluid.global_scope().find_var("embedding_0.w_0").get_tensor())
    np.testing.assert_array_equal(np.array(got_emb), table[[1, 2, 3, 4, 5]])
