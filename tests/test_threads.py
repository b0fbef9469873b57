"""fluidlite/core/threads.py: the intra-op thread pool, BLAS's thread count around it, and
fluid's ``fluid.core.set_num_threads``.

The contract under test: every item runs exactly once, results reach ``sink`` in item order
whatever thread made them, an item's exception surfaces in the caller (and no further items
start), nested calls run inline, BLAS is held to one thread from the first run on (and the
default thread count is what BLAS had before), and kernels built on ``parallel`` give
bit-identical results for every thread count -- also two executors running at once.
"""
import contextlib
import ctypes
import functools
import sys
import threading
import weakref
import time

import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.core import threads as T

needs_blas_control = pytest.mark.skipif(not T.blas_available(),
                                        reason="threadpoolctl is not installed")


@pytest.fixture(autouse=True)
def _restore_setting():
    saved = list(T._setting)
    yield
    T._setting[:] = saved
    T.shutdown()


def test_fluid_core_names_the_functions():
    assert fluid.core.set_num_threads is T.set_num_threads
    assert fluid.core.get_num_threads is T.get_num_threads


@pytest.mark.parametrize("most", [1, 2, 3, 5, 11, 64])
@pytest.mark.parametrize("least", [1, 2])
def test_even_ranges_cut_into_an_even_count_of_near_equal_slices(most, least):
    """``range(n)`` in order, each slice at most ``most`` (and at most one apart), as few
    slices as that allows (at least ``least``), their count even when above one unless
    there are not that many items."""
    assert T.even_ranges(0, most, least) == []
    for n in range(1, 40):
        cuts = T.even_ranges(n, most, least)
        assert [i for lo, hi in cuts for i in range(lo, hi)] == list(range(n))
        sizes = [hi - lo for lo, hi in cuts]
        assert min(sizes) >= 1 and max(sizes) - min(sizes) <= 1
        assert max(sizes) <= most
        count = len(cuts)
        assert count >= min(n, least)
        assert count in (1, n) or count % 2 == 0
        # the fewest: two slices fewer (one, from an odd minimum) could not hold n items
        fewer = count - 2 if count > 2 else count - 1
        assert fewer < max(1, least) or fewer * most < n or (count == n and count % 2)


@pytest.mark.parametrize("bad", [0, -1, 1.5, "2", True, None])
def test_bad_thread_counts_are_refused(bad):
    with pytest.raises(ValueError, match="thread count must be an int >= 1"):
        T.set_num_threads(bad)
    if bad is not None:         # using(None) means "the process setting"
        with pytest.raises(ValueError, match="thread count must be an int >= 1"):
            with T.using(bad):
                pass


def test_env_variable_is_validated(monkeypatch):
    monkeypatch.setenv("FLUIDLITE_NUM_THREADS", "two")
    T._setting.clear()
    with pytest.raises(ValueError, match="FLUIDLITE_NUM_THREADS must be an integer"):
        T.get_num_threads()
    monkeypatch.setenv("FLUIDLITE_NUM_THREADS", "3")
    T._setting.clear()
    assert T.get_num_threads() == 3


def test_using_is_per_thread_and_nests():
    T.set_num_threads(3)
    seen = {}
    with T.using(1):
        assert T.get_num_threads() == 1
        with T.using(2):
            assert T.get_num_threads() == 2
        assert T.get_num_threads() == 1
        t = threading.Thread(target=lambda: seen.setdefault("other", T.get_num_threads()))
        t.start()
        t.join()
    assert seen["other"] == 3 and T.get_num_threads() == 3


# the hand-offs between runs (events) and inside a compiled plan's run (spinning bells)
MODES = [pytest.param(contextlib.nullcontext, id="events"), pytest.param(T.hot, id="hot")]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("threads", [1, 2, 4])
def test_every_item_once_and_sink_in_order(threads, mode):
    ran, sunk = [], []
    lock = threading.Lock()

    def item(i):
        time.sleep(0.002 * ((7 * i) % 5))          # finish out of order
        with lock:
            ran.append(i)
        return i * i

    with T.using(threads), mode():
        T.parallel(item, 23, lambda i, r: sunk.append((i, r)))
    assert sorted(ran) == list(range(23))
    assert sunk == [(i, i * i) for i in range(23)]


@needs_blas_control
@pytest.mark.parametrize("mode", MODES)
def test_items_run_on_two_threads_and_nested_calls_inline(mode):
    names, inner = set(), []
    lock = threading.Lock()

    def item(i):
        time.sleep(0.01)
        with lock:
            names.add(threading.current_thread().name)
        T.parallel(lambda j: inner.append((i, j, threading.current_thread().name)), 2)

    with T.using(2), mode():
        T.parallel(item, 6)
    assert len(names) == 2 and any(n.startswith("fluidlite-op") for n in names)
    # a nested call ran on the thread of its item, in order
    by_item = {}
    for i, j, name in inner:
        by_item.setdefault(i, []).append((j, name))
    assert all([j for j, _ in v] == [0, 1] and len({n for _, n in v}) == 1
               for v in by_item.values())


@needs_blas_control
@pytest.mark.parametrize("mode", MODES)
def test_error_stops_hand_out_and_is_raised_after_running_items(mode):
    started = []

    def item(i):
        started.append(i)
        if i == 1:
            raise KeyError("item 1 failed")
        time.sleep(0.01)

    with T.using(2), mode():
        with pytest.raises(KeyError, match="item 1 failed"):
            T.parallel(item, 50)
    assert len(started) < 50


@needs_blas_control
def test_blas_is_held_to_one_thread_from_two_threads_on():
    inside = []
    with T.using(2):
        T.parallel(lambda i: inside.append(T._blas_threads()), 4)
    assert inside == [1] * 4 and T._held[0]
    T.set_num_threads(3)                    # fluidlite's threads; BLAS stays held
    assert T.get_num_threads() == 3 and T._blas_threads() == 1


def test_two_executors_at_once_give_the_sequential_bits():
    """(OpenBLAS switched between thread counts around each run gave concurrent callers other
    bits than a sequential run: the hold never switches.)"""
    rng = np.random.default_rng(5)
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [-1, 300])
        h = fluid.layers.fc(x, size=400, act="relu")
        loss = fluid.layers.mean(fluid.layers.fc(h, size=300))
        fluid.optimizer.SGD(0.1).minimize(loss)
    feeds = [[{"x": rng.standard_normal((256, 300)).astype(np.float32)} for _ in range(3)]
             for _ in range(2)]

    def train(feed_list, out):
        scope = fluid.Scope()
        exe = fluid.Executor()
        exe.run(startup, scope=scope)
        out.extend(exe.run(main, feed=f, fetch_list=[loss], scope=scope)[0].tobytes()
                   for f in feed_list)

    T.set_num_threads(2)                            # GEMMs cut into parallel parts
    seq = [[], []]
    for f, o in zip(feeds, seq):
        train(f, o)
    got = [[], []]
    if True:
        ts = [threading.Thread(target=train, args=(f, o)) for f, o in zip(feeds, got)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    assert got == seq


@pytest.mark.parametrize("op, shapes, attrs", [
    ("conv2d", ((8, 16, 12, 12), (16, 16, 3, 3)), {"paddings": [1, 1]}),      # Winograd
    ("conv2d", ((6, 5, 40, 40), (7, 5, 3, 3)), {"strides": [2, 2]}),          # im2col blocks
    ("conv2d", ((4, 8, 16, 16), (12, 8, 1, 1)), {}),                          # 1x1 per image
    ("depthwise_conv2d", ((4, 6, 20, 20), (6, 1, 3, 3)),
     {"paddings": [1, 1], "groups": 6}),
])
def test_conv_results_bit_identical_for_any_thread_count(op, shapes, attrs, monkeypatch):
    from fluidlite.core.registry import get_op_def
    from fluidlite.ops import conv
    monkeypatch.setattr(conv, "_COLS_BUDGET", 1 << 16)      # several im2col blocks
    rng = np.random.default_rng(11)
    x, w = (rng.standard_normal(s).astype(np.float32) for s in shapes)
    y0 = get_op_def(op).forward(x, w, **attrs)["Output"]
    dy = rng.standard_normal(y0.shape).astype(np.float32)
    runs = []
    for n in (1, 2, 3):
        with T.using(n):
            y = get_op_def(op).forward(x, w, **attrs)["Output"]
            g = get_op_def(op + "_grad").forward(x, w, dy, **attrs)
            runs.append((y, g["Input@GRAD"], g["Filter@GRAD"]))
    for run in runs[1:]:
        for a, b in zip(runs[0], run):
            assert a.dtype == np.float32 and np.array_equal(a, b)


def test_predictor_sets_the_process_threads_only_when_told(tmp_path):
    from fluidlite.inference import AnalysisConfig, create_paddle_predictor
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [-1, 4])
        y = fluid.layers.fc(x, size=3)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    fluid.io.save_inference_model(str(tmp_path), ["x"], [y], exe, main_program=main)
    T.set_num_threads(1)                                # BLAS not held
    if not T.blas_available():
        return
    for c in T._controllers():
        c.set_num_threads(2)
    create_paddle_predictor(AnalysisConfig(str(tmp_path)))
    assert T._blas_threads() == 2 and T.get_num_threads() == 1     # never called: as it was
    config = AnalysisConfig(str(tmp_path))
    config.set_cpu_math_library_num_threads(2)          # fluidlite's threads, BLAS held
    predictor = create_paddle_predictor(config)
    assert T.get_num_threads() == 2
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    predictor.run([fluid.core.PaddleTensor(x)])
    assert T._blas_threads() == 1 and T._blas_before == [2]
    create_paddle_predictor(AnalysisConfig(str(tmp_path)))
    assert T.get_num_threads() == 2 and T._blas_threads() == 1     # never called: as it was
    config.set_cpu_math_library_num_threads(1)          # one thread in all
    create_paddle_predictor(config)
    assert T.get_num_threads() == 1 and T._blas_threads() == 1 and not T._held[0]
    T.set_blas_threads(2)


@needs_blas_control
def test_a_forked_child_runs_parallel_items():
    """The child of a fork (a multiprocess data-loader worker) has no pool threads: its first
    parallel call must start new ones, not wait for the parent's."""
    import multiprocessing
    with T.using(2):
        T.parallel(lambda i: None, 4)                  # the parent's pool exists
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()

    def child():
        out = []
        with T.using(2):
            T.parallel(lambda i: time.sleep(0.01), 4, lambda i, r: out.append(i))
        q.put(out)

    p = ctx.Process(target=child)
    p.start()
    p.join(timeout=30)
    assert p.exitcode == 0 and q.get(timeout=5) == [0, 1, 2, 3]


@pytest.fixture
def fresh_state(monkeypatch):
    """The module's probed state cleared (restored after): what a new process starts with."""
    saved = (list(T._blas), list(T._blas_before), list(T._setting), T._held[0])
    T._blas.clear()
    T._blas_before.clear()
    T._setting.clear()
    T._held[0] = False
    monkeypatch.delenv("FLUIDLITE_NUM_THREADS", raising=False)
    yield
    T._blas[:], T._blas_before[:], T._setting[:] = saved[0], saved[1], saved[2]
    T._held[0] = saved[3]
    for c in T._controllers():
        c.set_num_threads(1)                 # held again, as the rest of the suite runs


@needs_blas_control
def test_first_hold_records_blas_count_then_holds_one(fresh_state):
    import threadpoolctl
    for c in threadpoolctl.ThreadpoolController().select(user_api="blas").lib_controllers:
        c.set_num_threads(2)
    assert T.blas_available() and isinstance(T._blas[0], list) and T._blas[0]
    assert T._blas_threads() == 2
    assert T.get_num_threads() == 1          # the default: one thread, nothing held
    T.hold()
    assert T._held[0] is False and T._blas_threads() == 2
    T.set_num_threads(2)
    T.hold()
    assert T._held[0] is True and T._blas_before == [2] and T._blas_threads() == 1
    for c in T._controllers():
        c.set_num_threads(3)                 # a second hold is a no-op once held
    T.hold()
    assert T._blas_threads() == 3 and T._blas_before == [2]
    T.set_num_threads(1)                     # BLAS's own threads back
    assert T._held[0] is False and T._blas_threads() == 2


def test_without_threadpoolctl_items_run_on_the_caller(fresh_state, monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, "threadpoolctl", None)     # import fails
    assert not T.blas_available() and T._blas == [[]]
    assert T._blas_threads() == 1 and T.get_num_threads() == 1
    T.hold()                                                     # nothing to hold
    names = []
    with T.using(2):
        T.parallel(lambda i: names.append(threading.current_thread().name), 4)
    assert names == [threading.current_thread().name] * 4


def test_env_thread_count_of_one_is_accepted(fresh_state, monkeypatch):
    monkeypatch.setenv("FLUIDLITE_NUM_THREADS", "1")
    assert T.get_num_threads() == 1
    T._setting.clear()
    monkeypatch.setenv("FLUIDLITE_NUM_THREADS", "0")
    with pytest.raises(ValueError, match="FLUIDLITE_NUM_THREADS must be >= 1, got 0"):
        T.get_num_threads()


def test_set_num_threads_names_itself_in_errors():
    with pytest.raises(ValueError, match=r"^set_num_threads: the thread count"):
        T.set_num_threads(0)


@needs_blas_control
def test_items_know_they_are_items_and_the_pool_is_reused():
    flags = []
    with T.using(2):
        T.parallel(lambda i: flags.append(T._tls.busy), 4)
        pool = T._pool[2]
        T.parallel(lambda i: None, 4)
        assert T._pool[2] is pool and len(pool) == 1     # workers - 1 threads
        assert len(T._pool) == 1
        threads_ = [h.thread for h in pool]
        assert all(t.is_alive() and t.name.startswith(T.POOL_PREFIX) for t in threads_)
    assert flags == [True] * 4 and getattr(T._tls, "busy", False) is False
    T.shutdown()
    assert not T._pool and not any(t.is_alive() for t in threads_)


@needs_blas_control
def test_a_new_thread_uses_the_pool_and_nested_calls_never_do(monkeypatch):
    runs = []
    real_go = T._Run.go
    monkeypatch.setattr(T._Run, "go", lambda self, w: (runs.append(self.n), real_go(self, w)))
    names = []
    lock = threading.Lock()

    def item(i):
        time.sleep(0.02)
        with lock:
            names.append(threading.current_thread().name)
        T.parallel(lambda j: None, 3)                   # nested: inline, no second run

    def caller():
        with T.using(2):
            T.parallel(item, 4)

    t = threading.Thread(target=caller)                 # never ran an item before
    t.start()
    t.join()
    assert runs == [4]
    assert any(n.startswith(T.POOL_PREFIX) for n in names)


@pytest.mark.skipif(not T.blas_available(), reason="parallel items need threadpoolctl")
def test_kernels_cut_their_gemms_only_outside_items():
    """Inside a ``parallel`` item nested parts would run one after another, so kernels do not
    cut there (a GEMM's row blocks would pack its other operand once per block)."""
    seen = []
    with T.using(2):
        assert T.splitting()
        T.parallel(lambda i: seen.append(T.splitting()), 2)
        assert T.splitting()
    with T.using(1):
        assert not T.splitting()
    assert seen == [False, False]


@needs_blas_control
@pytest.mark.parametrize("mode", MODES)
def test_a_helper_that_comes_late_finds_nothing_and_the_caller_never_waits_for_it(mode):
    """Two callers share one helper: whichever call it does not join runs every item on its
    caller (a helper's hand-off is replaced, or comes after the call ended): no item runs
    twice, none is lost, and the helper stays usable."""
    with T.using(2), mode():
        T.parallel(lambda i: None, 2)                    # the pool exists
        (helper,) = T._pool[2]
        ran = []
        gate = threading.Event()

        def first_call():
            with T.using(2), mode():    # an item that blocks: the helper, or this caller, waits
                T.parallel(lambda i: gate.wait(5) if i == 1 else None, 2)
        first = threading.Thread(target=first_call)
        first.start()
        time.sleep(0.05)
        T.parallel(lambda i: ran.append(i), 5)
        gate.set()
        first.join()
        assert sorted(ran) == list(range(5))
        for _ in range(20):                              # later calls still share items
            T.parallel(lambda i: time.sleep(0.001), 4)
        assert helper.thread.is_alive()


@needs_blas_control
@pytest.mark.parametrize("mode", MODES)
def test_an_error_in_a_helpers_item_reaches_the_caller_after_the_items_end(mode):
    done = []

    def item(i):
        if threading.current_thread().name.startswith(T.POOL_PREFIX):
            time.sleep(0.01)
            raise KeyError("from the helper")
        time.sleep(0.05)
        done.append(i)
    with T.using(2), mode():
        for _ in range(5):
            try:
                T.parallel(item, 2)
            except KeyError as e:
                assert "from the helper" in str(e)
                break
        else:
            pytest.skip("the helper never took an item")
    assert done                                          # the caller's item ran to its end


@needs_blas_control
def test_a_finished_call_is_not_kept_alive_by_the_pool():
    """A helper drops the call it helped with (its items' closures hold the kernel's arrays)."""
    class Payload:
        pass
    obj = Payload()
    ref = weakref.ref(obj)
    item = functools.partial(lambda payload, i: time.sleep(0.005), obj)   # holds obj itself
    with T.using(2):
        T.parallel(item, 4)
    del obj, item
    for _ in range(100):
        if ref() is None:
            break
        time.sleep(0.01)
    assert ref() is None


needs_spin = pytest.mark.skipif(T._SPIN is None or T._cores() < 2 or not T.blas_available(),
                                reason="spinning hand-offs need glibc, two cores, threadpoolctl")


def _until(cond, seconds=2.0):
    end = time.perf_counter() + seconds
    while not cond() and time.perf_counter() < end:
        time.sleep(0.001)
    return cond()


@needs_spin
def test_inside_a_run_helpers_spin_then_doze_when_calls_stop_and_sleep_after(monkeypatch):
    monkeypatch.setattr(T, "_SPIN_IDLE", 0.05)
    sums = []
    with T.using(2):
        T.parallel(lambda i: None, 2)
        (helper,) = T._pool[2]
        assert not helper.spinning                       # between runs: its event
        with T.hot():
            T.parallel(lambda i: None, 2)
            assert _until(lambda: helper.spinning)      # waits on its bell
            assert _until(lambda: not helper.spinning) and T._doze[0]   # no calls: dozes
            x = np.arange(1 << 16, dtype=np.float64)
            T.parallel(lambda i: x[i::2].sum(), 2, lambda i, r: sums.append(r))
            assert not T._doze[0]                         # a call wakes spinning up again
            assert _until(lambda: helper.spinning)
        assert T._hot[0] == 0 and _until(lambda: not helper.spinning)
    assert sums == [x[0::2].sum(), x[1::2].sum()]


@needs_spin
def test_runs_from_two_threads_spin_and_join_correctly():
    """Two callers inside runs at once share the helper (one waits on its own bell for the
    items the helper took): every call gets its own items' results, in order."""
    errors = []

    def caller(seed):
        rng = np.random.default_rng(seed)
        try:
            with T.using(2), T.hot():
                for _ in range(200):
                    n = int(rng.integers(2, 7))
                    out = []
                    T.parallel(lambda i: (time.sleep(1e-4 * (i % 2)), i * seed)[1], n,
                               lambda i, r: out.append((i, r)))
                    assert out == [(i, i * seed) for i in range(n)]
        except BaseException as e:       # noqa: B902 -- reported by the main thread
            errors.append(e)
    ts = [threading.Thread(target=caller, args=(k,)) for k in (3, 5)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(60)
    assert not errors and not any(t.is_alive() for t in ts) and T._hot[0] == 0


def test_no_spinning_with_one_thread_more_threads_than_cores_or_when_turned_off(monkeypatch):
    with T.using(1), T.hot():
        assert T._hot[0] == 0 and not T._spin_now()
    monkeypatch.setattr(T, "_cores", lambda: 1)
    with T.using(2), T.hot():
        assert T._hot[0] == 0 and not T._spin_now()
    monkeypatch.setenv("FLUIDLITE_SPIN", "0")
    assert T._spin_functions() is None


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc / musl spin locks")
def test_the_spin_lock_probe_finds_the_c_librarys_functions(monkeypatch):
    """On Linux the probe must find pthread_spin_* (else every run would silently fall back
    to events: the spinning tests above would skip, not fail), typed to take an address."""
    monkeypatch.delenv("FLUIDLITE_SPIN", raising=False)
    fns = T._spin_functions()
    assert fns is not None and T._SPIN is not None
    init, lock, unlock = fns
    assert init.argtypes == [ctypes.c_void_p, ctypes.c_int] and init.restype is ctypes.c_int
    assert lock.argtypes == unlock.argtypes == [ctypes.c_void_p]
    bell = T._Bell()
    bell.ring()
    bell.ring()                                          # two rings before a wait: one signal
    bell.wait()
    taken = []
    waiter = threading.Thread(target=lambda: (bell.wait(), taken.append(1)), daemon=True)
    waiter.start()
    time.sleep(0.05)
    assert not taken                                     # no second signal: it spins
    bell.ring()
    waiter.join(5)
    assert taken == [1]
    monkeypatch.setenv("FLUIDLITE_SPIN", " 0 ")
    assert T._spin_functions() is None


# -- blas_threads: BLAS's own threads for a run ---------------------------------------------------
@needs_blas_control
def test_blas_threads_runs_items_on_the_caller_with_blas_threaded_then_restores():
    T.set_num_threads(3)
    me = threading.current_thread()
    seen = []
    with T.blas_threads():
        assert T.get_num_threads() == 1 and T._blas_threads() == T.BLAS_THREADS
        T.parallel(lambda i: seen.append(threading.current_thread()), 4)
        assert not T.splitting()                    # one thread: GEMMs are not cut
    assert seen == [me] * 4
    assert T.get_num_threads() == 3 and T._blas_threads() == 1 and T._held[0]
    with pytest.raises(KeyError), T.blas_threads():  # an error inside: restored all the same
        raise KeyError("x")
    assert T.get_num_threads() == 3 and T._blas_threads() == 1


@needs_blas_control
def test_blas_threads_with_one_thread_gives_blas_its_count_back():
    T.set_num_threads(1)
    T.set_blas_threads(1)
    with T.blas_threads():
        assert T._blas_threads() == T.BLAS_THREADS
    assert T._blas_threads() == 1 and T.get_num_threads() == 1
    T.set_blas_threads(2)


def test_blas_threads_blocks_never_overlap():
    inside, spans = threading.Event(), []

    def block(hold_for):
        with T.blas_threads():
            t0 = time.perf_counter()
            inside.set()
            time.sleep(hold_for)
            spans.append((t0, time.perf_counter()))
    first = threading.Thread(target=block, args=(0.1,))
    first.start()
    inside.wait()
    block(0.0)                              # waits for the first block to end
    first.join()
    (a0, a1), (b0, b1) = sorted(spans)
    assert a1 <= b0


def _fc_model(tmp_path, width):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [-1, width])
        y = fluid.layers.fc(fluid.layers.fc(x, size=width, act="relu"), size=8)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    with fluid.scope_guard(scope):
        fluid.io.save_inference_model(str(tmp_path), ["x"], [y], exe, main_program=main)
    return main, scope, y


@needs_blas_control
def test_predictor_runs_small_runs_with_blas_threads_and_large_ones_on_the_pool(
        tmp_path, monkeypatch):
    """The mode follows the largest variable at the run's input sizes (the 1024-wide fc:
    1024 elements a row): one row is far below ``_POOL_MIN_ELEMENTS``, 600 rows above."""
    from fluidlite.inference import AnalysisConfig, create_paddle_predictor, predictor as P
    main, scope, y = _fc_model(tmp_path, 1024)
    config = AnalysisConfig(str(tmp_path))
    config.set_cpu_math_library_num_threads(2)
    pred = create_paddle_predictor(config)
    assert pred._shared.widest == 1024 and pred._shared.feed_sizes == {"x": 1024}
    assert P._POOL_MIN_ELEMENTS == 512 * 1024
    modes = []
    real = T.blas_threads

    @contextlib.contextmanager
    def recording():
        with real():
            modes.append(T._blas_threads())
            yield
    monkeypatch.setattr(P.threads, "blas_threads", recording)
    rng = np.random.default_rng(3)
    for rows, blas in ((1, True), (600, False), (40, True), (511, True), (512, False)):
        x = rng.standard_normal((rows, 1024)).astype(np.float32)
        del modes[:]
        got = [pred.run([fluid.core.PaddleTensor(x)])[0].as_ndarray() for _ in range(2)]
        assert modes == ([T.BLAS_THREADS] * 2 if blas else [])
        assert np.array_equal(got[0], got[1])                       # same inputs, same bits
        with T.using(1):                                            # the plain executor
            want = fluid.Executor().run(main, feed={"x": x}, fetch_list=[y], scope=scope)[0]
        np.testing.assert_allclose(got[0], want, rtol=1e-5, atol=1e-6)
    assert T.get_num_threads() == 2 and T._blas_threads() == 1
    del modes[:]
    one = [fluid.core.PaddleTensor(np.ones((1, 1024), np.float32))]
    with T.using(1):                            # one thread: never BLAS's mode
        pred.run(one)
    assert modes == []
    monkeypatch.setattr(P, "_POOL_MIN_ELEMENTS", 1025)     # the bound itself: 1024 < 1025
    pred.run(one)
    monkeypatch.setattr(P, "_POOL_MIN_ELEMENTS", 1024)
    pred.run(one)
    assert modes == [T.BLAS_THREADS]
