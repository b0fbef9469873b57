"""fluid 1.8 reader names: ``fluid.io.ComposeNotAligned`` (raised by ``compose`` when readers'
lengths differ) and ``PyReader.next()`` / ``next(loader)`` (the iterator protocol of iterable
loaders), including that no worker thread outlives an epoch."""
import gc
import threading
import time

import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.core.threads import POOL_PREFIX


def _reader(n, start=0):
    return lambda: iter(range(start, start + n))


def _reader_threads():
    # (the kernels' intra-op pool lives as long as the process, by design)
    return [t for t in threading.enumerate()
            if t.name.startswith("fluidlite-") and not t.name.startswith(POOL_PREFIX)]


def _wait_no_threads(timeout=2.0):
    end = time.time() + timeout
    while _reader_threads() and time.time() < end:
        time.sleep(0.01)
    return _reader_threads()


# -- ComposeNotAligned ------------------------------------------------------------------------
def test_compose_not_aligned_is_exported_and_raised():
    assert fluid.io.ComposeNotAligned is fluid.pipeline.decorators.ComposeNotAligned
    assert issubclass(fluid.io.ComposeNotAligned, ValueError)      # as fluid 1.8's class
    composed = fluid.io.compose(_reader(3), _reader(2, 10))
    got = []
    with pytest.raises(fluid.io.ComposeNotAligned, match="not aligned"):
        for sample in composed():
            got.append(sample)
    assert got == [(0, 10), (1, 11)]          # the aligned prefix came out before the error


def test_compose_aligned_or_unchecked_does_not_raise():
    assert list(fluid.io.compose(_reader(2), _reader(2, 5))()) == [(0, 5), (1, 6)]
    unchecked = fluid.io.compose(_reader(3), _reader(1, 7), check_alignment=False)
    assert list(unchecked()) == [(0, 7)]


def test_compose_not_aligned_caught_as_value_error():
    with pytest.raises(ValueError):
        list(fluid.io.compose(_reader(1), _reader(0))())


# -- PyReader.next --------------------------------------------------------------------------
def _py_reader(n_batches=3, return_list=False, iterable=True):
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("x", [-1, 2], "float32")
    reader = fluid.io.PyReader(feed_list=[x], capacity=2, iterable=iterable,
                               return_list=return_list)

    def batches():
        for i in range(n_batches):
            yield (np.full((2, 2), i, "float32"),)
    reader.decorate_batch_generator(batches)
    return reader


def test_pyreader_next_reads_the_epoch_iter_started():
    reader = _py_reader(3)
    it = iter(reader)
    first = reader.next()
    np.testing.assert_array_equal(np.asarray(first[0]["x"]), np.zeros((2, 2)))
    second = next(it)                       # the same epoch: batch 1 follows batch 0
    np.testing.assert_array_equal(np.asarray(second[0]["x"]), np.ones((2, 2)))
    third = next(reader)
    np.testing.assert_array_equal(np.asarray(third[0]["x"]), np.full((2, 2), 2.0))
    with pytest.raises(StopIteration):
        reader.next()
    del it
    assert _wait_no_threads() == []


def test_pyreader_next_without_iter_starts_an_epoch_and_ends_it():
    reader = _py_reader(2, return_list=True)
    values = [reader.next()[0][0, 0] for _ in range(2)]
    assert values == [0.0, 1.0]
    with pytest.raises(StopIteration):
        reader.next()
    assert _wait_no_threads() == []
    assert reader.next()[0][0, 0] == 0.0        # after StopIteration: a fresh epoch
    reader.__del__()
    assert _wait_no_threads() == []


def test_pyreader_for_loop_left_early_leaves_no_thread():
    reader = _py_reader(5)
    for i, _ in enumerate(reader()):
        if i == 1:
            break
    gc.collect()
    assert _wait_no_threads() == []
    assert [float(np.asarray(d[0]["x"])[0, 0]) for d in reader()] == [0, 1, 2, 3, 4]


def test_new_iter_closes_the_epoch_next_started():
    reader = _py_reader(4)
    assert float(np.asarray(reader.next()[0]["x"])[0, 0]) == 0.0
    assert [float(np.asarray(d[0]["x"])[0, 0]) for d in reader()] == [0, 1, 2, 3]
    assert _wait_no_threads() == []


def test_dataloader_from_generator_has_next_too():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("x", [-1, 1], "int64")
    loader = fluid.io.DataLoader.from_generator(feed_list=[x], capacity=2, return_list=True)
    loader.set_sample_generator(lambda: iter([(np.array([i]),) for i in range(4)]), 2)
    assert loader.next()[0].tolist() == [[0], [1]]
    assert loader.next()[0].tolist() == [[2], [3]]
    with pytest.raises(StopIteration):
        loader.next()


def test_pyreader_next_errors():
    reader = _py_reader(iterable=False)
    with pytest.raises(RuntimeError, match="not iterable"):
        reader.next()
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("x", [-1, 2], "float32")
    empty = fluid.io.PyReader(feed_list=[x], capacity=2, iterable=True)
    with pytest.raises(RuntimeError, match="set a data source first"):
        empty.next()
