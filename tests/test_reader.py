"""DataLoader / PyReader / py_reader: iterable and non-iterable epochs, the same parameters as
exe.run feeding, errors surfacing with the generator's traceback, and no thread left behind."""
import threading
import time
import traceback

import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.core.threads import POOL_PREFIX

N, BATCH = 24, 6


def _samples():
    rng = np.random.default_rng(0)
    xs = rng.uniform(-1, 1, (N, 4)).astype("float32")
    ys = (xs[:, :1] > 0).astype("int64")
    return xs, ys


def _net():
    main, start = fluid.Program(), fluid.Program()
    main.random_seed = start.random_seed = 7
    with fluid.program_guard(main, start):
        x = fluid.data("x", [-1, 4], "float32")
        y = fluid.data("y", [-1, 1], "int64")
        prob = fluid.layers.fc(x, 2, act="softmax")
        loss = fluid.layers.mean(fluid.layers.cross_entropy(prob, y))
        fluid.optimizer.SGD(0.5).minimize(loss)
    return main, start, x, y, loss


def _params(main, scope):
    """Parameter values in creation order (names differ between programs)."""
    return [np.array(scope.find_var(p.name).get_tensor())
            for p in main.global_block().all_parameters()]


def _reader_threads():
    # the kernels' intra-op pool (core/threads.py) lives as long as the process, by design
    return [t for t in threading.enumerate()
            if t.name.startswith("fluidlite-") and not t.name.startswith(POOL_PREFIX)]


def _train(feeding):
    """Two epochs of the same loop; ``feeding(main, x, y, exe, scope, loss)`` runs one."""
    main, start, x, y, loss = _net()
    scope, exe = fluid.Scope(), fluid.Executor()
    exe.run(start, scope=scope)
    losses = []
    for _ in range(2):
        losses += feeding(main, x, y, exe, scope, loss)
    return _params(main, scope), losses


def _by_exe_run(main, x, y, exe, scope, loss):
    xs, ys = _samples()
    return [float(exe.run(main, feed={"x": xs[i:i + BATCH], "y": ys[i:i + BATCH]},
                          fetch_list=[loss], scope=scope)[0][0]) for i in range(0, N, BATCH)]


def _sample_gen():
    xs, ys = _samples()
    for i in range(N):
        yield xs[i], ys[i]


def _batch_gen():
    xs, ys = _samples()
    for i in range(0, N, BATCH):
        yield xs[i:i + BATCH], ys[i:i + BATCH]


def _iterable(kind):
    def feeding(main, x, y, exe, scope, loss):
        loader = fluid.io.DataLoader.from_generator(feed_list=[x, y], capacity=2)
        if kind == "sample":
            loader.set_sample_generator(_sample_gen, BATCH)
        elif kind == "list":
            loader.set_sample_list_generator(fluid.io.batch(_sample_gen, BATCH))
        else:
            loader.set_batch_generator(_batch_gen)
        return [float(exe.run(main, feed=d, fetch_list=[loss], scope=scope)[0][0])
                for d in loader()]
    return feeding


def _non_iterable(make):
    def feeding(main, x, y, exe, scope, loss):
        loader = make(x, y)
        loader.start()
        out = []
        try:
            while True:
                out.append(float(exe.run(main, fetch_list=[loss], scope=scope)[0][0]))
        except fluid.core.EOFException:
            loader.reset()
        return out
    return feeding


def _dl_non_iterable(x, y):
    loader = fluid.io.DataLoader.from_generator(feed_list=[x, y], capacity=3, iterable=False)
    loader.set_batch_generator(_batch_gen)
    return loader


def _pyreader(x, y):
    reader = fluid.io.PyReader(feed_list=[x, y], capacity=3, iterable=False)
    reader.decorate_sample_list_generator(fluid.io.batch(_sample_gen, BATCH))
    return reader


@pytest.mark.parametrize("feeding", [
    _iterable("sample"), _iterable("list"), _iterable("batch"),
    _non_iterable(_dl_non_iterable), _non_iterable(_pyreader)],
    ids=["sample", "sample_list", "batch", "non_iterable", "pyreader"])
def test_same_parameters_as_exe_run(feeding):
    want, want_losses = _train(_by_exe_run)
    got, losses = _train(feeding)
    assert len(losses) == 2 * N // BATCH
    np.testing.assert_allclose(losses, want_losses, rtol=1e-6)
    assert len(got) == len(want) == 2
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-6)
    assert not _reader_threads()


def test_py_reader_and_read_file_give_the_same_parameters():
    xs, ys = _samples()
    want, _ = _train(_by_exe_run)
    main, start = fluid.Program(), fluid.Program()
    main.random_seed = start.random_seed = 7
    with fluid.program_guard(main, start):
        reader = fluid.layers.py_reader(capacity=4, shapes=[[-1, 4], [-1, 1]],
                                        dtypes=["float32", "int64"])
        x, y = fluid.layers.read_file(fluid.layers.double_buffer(reader))
        prob = fluid.layers.fc(x, 2, act="softmax")
        loss = fluid.layers.mean(fluid.layers.cross_entropy(prob, y))
        fluid.optimizer.SGD(0.5).minimize(loss)
    reader.decorate_tensor_provider(_batch_gen)
    scope, exe = fluid.Scope(), fluid.Executor()
    exe.run(start, scope=scope)
    steps = 0
    for _ in range(2):
        reader.start()
        with pytest.raises(fluid.core.EOFException):
            while True:
                exe.run(main, fetch_list=[loss], scope=scope)
                steps += 1
        reader.reset()
    assert steps == 2 * N // BATCH
    got = _params(main, scope)
    assert len(got) == len(want) == 2
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-6)


def test_return_list_gives_arrays_in_feed_order():
    main, start, x, y, loss = _net()
    loader = fluid.io.DataLoader.from_generator([x, y], capacity=2, return_list=True)
    loader.set_batch_generator(_batch_gen)
    batches = list(loader())
    assert len(batches) == N // BATCH
    assert batches[0][0].shape == (BATCH, 4) and batches[0][1].dtype == np.int64


def test_generator_error_surfaces_with_its_traceback():
    main, start, x, y, loss = _net()

    def broken():
        yield from _sample_gen()
        raise KeyError("bad record 17")

    loader = fluid.io.DataLoader.from_generator([x, y], capacity=2)
    loader.set_sample_generator(broken, BATCH)
    with pytest.raises(KeyError, match="bad record 17") as info:
        for _ in loader():
            pass
    frames = [f.name for f in traceback.extract_tb(info.value.__traceback__)]
    assert "broken" in frames
    assert not _reader_threads()


def test_sample_mismatch_names_variable_and_sample():
    main, start, x, y, loss = _net()

    def bad():
        yield np.zeros(4, "float32"), np.array([1])
        yield np.zeros(5, "float32"), np.array([1])

    loader = fluid.io.DataLoader.from_generator([x, y], capacity=2)
    loader.set_sample_generator(bad, 1)
    with pytest.raises(ValueError, match=r"sample 1: the field for 'x' has shape \[5\]"):
        list(loader())
    loader.set_batch_generator(lambda: iter([(np.zeros((2, 4), "float32"),
                                              np.zeros((2, 1), "float32"))]))
    with pytest.raises(ValueError, match="batch 0: the array for 'y' has dtype float32"):
        list(loader())
    assert not _reader_threads()


def test_break_and_interrupt_stop_the_worker():
    main, start, x, y, loss = _net()

    def endless():
        while True:
            time.sleep(0.001)
            yield np.zeros(4, "float32"), np.array([0])

    loader = fluid.io.DataLoader.from_generator([x, y], capacity=2)
    loader.set_sample_generator(endless, 2)
    it = loader()
    next(it)
    assert _reader_threads()
    it.close()                                  # what `break` does to the loop's iterator
    assert not _reader_threads()
    with pytest.raises(KeyboardInterrupt):
        for i, _ in enumerate(loader()):
            if i == 2:
                raise KeyboardInterrupt         # Ctrl-C inside the training loop
    assert not _reader_threads()
    ni = fluid.io.DataLoader.from_generator([x, y], capacity=2, iterable=False)
    ni.set_sample_generator(endless, 2)
    ni.start()
    assert _reader_threads()
    ni.reset()
    assert not _reader_threads()


def test_misuse_is_explained():
    main, start, x, y, loss = _net()
    loader = fluid.io.DataLoader.from_generator([x, y], capacity=2)
    with pytest.raises(RuntimeError, match="set a data source first"):
        list(loader())
    with pytest.raises(RuntimeError, match="non-iterable"):
        loader.start()
    ni = fluid.io.DataLoader.from_generator([x, y], capacity=2, iterable=False)
    with pytest.raises(RuntimeError, match="not iterable"):
        iter(ni).__next__()
    with pytest.raises(ValueError, match="capacity"):
        fluid.io.DataLoader.from_generator([x, y], capacity=0)


def test_reader_decorators():
    r = lambda: iter(range(10))                                       # noqa: E731
    assert list(fluid.io.batch(r, 4)()) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert list(fluid.io.batch(r, 4, drop_last=True)()) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert sorted(fluid.io.shuffle(r, 4, seed=0)()) == list(range(10))
    assert list(fluid.io.buffered(r, 2)()) == list(range(10))
    assert list(fluid.io.chain(r, r)()) == list(range(10)) * 2
    assert list(fluid.io.compose(r, r)())[3] == (3, 3)
    assert list(fluid.io.map_readers(lambda a, b: a * b, r, r)())[3] == 9
    assert list(fluid.io.firstn(r, 3)()) == [0, 1, 2]
    assert list(fluid.io.xmap_readers(lambda v: -v, r, 3, 4, order=True)()) == \
        [-v for v in range(10)]
    assert sorted(fluid.io.xmap_readers(lambda v: -v, r, 3, 4)()) == sorted(-v for v in range(10))
    assert sorted(fluid.io.multiprocess_reader([r, r])()) == sorted(list(range(10)) * 2)
    calls = []

    def counted():
        calls.append(1)
        return iter(range(3))
    c = fluid.io.cache(counted)
    assert list(c()) == list(c()) == [0, 1, 2] and len(calls) == 1

    def failing():
        yield 1
        raise IOError("disk")
    with pytest.raises(IOError, match="disk"):
        list(fluid.io.buffered(failing, 2)())
    with pytest.raises(fluid.io.compose.__globals__["ComposeNotAligned"]):
        list(fluid.io.compose(r, fluid.io.firstn(r, 3))())
    assert not _reader_threads()


def test_shuffle_permutes_within_its_windows_and_is_seeded():
    """fluid.io.shuffle reorders: the output is a permutation, not the input order, each
    window of buf_size samples stays within itself, a seed repeats the order, and over seeds
    every sample of a window reaches every position of it."""
    r = lambda: iter(range(40))
    got = list(fluid.io.shuffle(r, 8, seed=3)())
    assert sorted(got) == list(range(40)) and got != list(range(40))
    for w in range(0, 40, 8):
        assert sorted(got[w:w + 8]) == list(range(w, w + 8))
    assert got == list(fluid.io.shuffle(r, 8, seed=3)())
    assert got != list(fluid.io.shuffle(r, 8, seed=4)())
    seen = {pos: set() for pos in range(8)}
    for seed in range(200):
        for pos, v in enumerate(list(fluid.io.shuffle(lambda: iter(range(8)), 8, seed=seed)())):
            seen[pos].add(v)
    assert all(vs == set(range(8)) for vs in seen.values())


def test_use_multiprocess_same_parameters_errors_and_no_process_left():
    import multiprocessing
    want, want_losses = _train(_by_exe_run)

    def feeding(main, x, y, exe, scope, loss):
        loader = fluid.io.DataLoader.from_generator([x, y], capacity=2, use_multiprocess=True)
        loader.set_sample_generator(_sample_gen, BATCH)
        return [float(exe.run(main, feed=d, fetch_list=[loss], scope=scope)[0][0])
                for d in loader()]

    got, losses = _train(feeding)
    np.testing.assert_allclose(losses, want_losses, rtol=1e-6)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-6)
    main, start, x, y, loss = _net()

    def broken():
        yield from _sample_gen()
        raise KeyError("bad record in a worker process")

    loader = fluid.io.DataLoader.from_generator([x, y], capacity=2, use_multiprocess=True)
    loader.set_sample_generator(broken, BATCH)
    with pytest.raises(KeyError, match="bad record") as info:
        list(loader())
    assert "in broken" in "".join(getattr(info.value, "__notes__", []))
    it = iter(loader.set_sample_generator(_sample_gen, 1)())
    next(it)
    it.close()                                   # leaving the loop early ends the process
    assert not multiprocessing.active_children()


def _drain_in_thread(loader, timeout=20.0):
    """Iterate ``loader`` in a thread: (finished, the exception it raised, batches seen)."""
    import threading
    out = {"error": None, "n": 0}

    def run():
        try:
            for _ in loader():
                out["n"] += 1
        except BaseException as e:          # noqa: BLE001 -- inspected by the test
            out["error"] = e
    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(timeout)
    return not t.is_alive(), out["error"], out["n"]


@pytest.mark.parametrize("where", ["between_batches", "in_a_large_batch"])
def test_a_killed_multiprocess_worker_is_noticed_and_named(where):
    """The out-of-memory killer ends a worker with SIGKILL, maybe while it writes a batch:
    the loop raises within seconds, naming the worker and the signal (it used to hang)."""
    import multiprocessing
    import os
    import signal
    import threading
    import time
    main, start, x, y, loss = _net()
    big = where == "in_a_large_batch"

    def doomed_samples():
        yield from _sample_gen()
        os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(60)

    def doomed_batches():
        yield from _batch_gen()
        # die while one of these large batches is being written into the pipe
        threading.Timer(0.02, os.kill, (os.getpid(), signal.SIGKILL)).start()
        for _ in range(50):
            yield [np.zeros((1 << 16, 4), "float32"), np.zeros((1 << 16, 1), "int64")]
        time.sleep(60)

    loader = fluid.io.DataLoader.from_generator([x, y], capacity=2, use_multiprocess=True)
    if big:
        loader.set_batch_generator(doomed_batches)
    else:
        loader.set_sample_generator(doomed_samples, BATCH)
    t0 = time.perf_counter()
    finished, error, n = _drain_in_thread(loader)
    assert finished, "the training loop hangs on a killed DataLoader worker"
    assert time.perf_counter() - t0 < 15
    assert isinstance(error, RuntimeError), error
    assert "DataLoader worker process (pid" in str(error) and "SIGKILL" in str(error)
    assert not multiprocessing.active_children()


def test_an_unpicklable_worker_exception_keeps_its_type_name_and_message():
    import multiprocessing
    main, start, x, y, loss = _net()

    class Unpicklable(Exception):
        def __init__(self, msg):
            super().__init__(msg)
            self.callback = lambda: None        # lambdas do not pickle

    def broken():
        yield from _sample_gen()
        raise Unpicklable("record 17 is corrupt")

    loader = fluid.io.DataLoader.from_generator([x, y], capacity=2, use_multiprocess=True)
    loader.set_sample_generator(broken, BATCH)
    finished, error, n = _drain_in_thread(loader)
    assert finished and n > 0
    assert isinstance(error, RuntimeError)
    assert "Unpicklable: record 17 is corrupt" in str(error)
    assert "exit code" not in str(error)
    assert not multiprocessing.active_children()


def test_interrupt_while_waiting_in_exe_run_stops_a_non_iterable_loader():
    from fluidlite.core import readers
    main, start, x, y, loss = _net()
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(start, scope=scope)

    def interrupted():
        yield from _sample_gen()
        raise KeyboardInterrupt               # what Ctrl-C delivers while the loop waits

    loader = fluid.io.DataLoader.from_generator([x, y], capacity=2, iterable=False)
    loader.set_sample_generator(interrupted, BATCH)
    loader.start()
    with pytest.raises(KeyboardInterrupt):
        while True:
            exe.run(main, fetch_list=[loss], scope=scope)
    assert not _reader_threads() and not readers.ACTIVE
    loader.start()                            # the loader is usable again
    loader.reset()
