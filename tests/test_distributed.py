"""Data-parallel training on MPI: the pass (structure, roles, clip ordering), fleet's collective
API and ``with_data_parallel`` in one process, the launcher's argument errors, and a few real
2-rank ``mpirun`` jobs (marked slow): N ranks on shards end with the parameters of one process
on the whole batch, a failing rank aborts the job naming itself, mismatched programs are caught
at start-up.

This file is also the worker those jobs run: ``python tests/test_distributed.py MODE OUT``.
"""
import os
import shutil
import subprocess
import sys
import time

import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.core.ir import OpRole

HERE = os.path.abspath(__file__)
STEPS = 3
BATCH = 8
# (optimizer, clip, weight decay): every optimizer, every clip type, L2 decay
CONFIGS = [("sgd", None, None), ("sgd", "value", "l2"), ("momentum", "norm", None),
           ("momentum", "global_norm", "l2"), ("adam", "global_norm", None), ("adam", None, "l2")]


def _optimizer(name, clip, decay):
    clip_obj = {None: None, "value": fluid.clip.GradientClipByValue(0.02),
                "norm": fluid.clip.GradientClipByNorm(0.05),
                "global_norm": fluid.clip.GradientClipByGlobalNorm(0.05)}[clip]
    reg = fluid.regularizer.L2Decay(0.01) if decay else None
    if name == "sgd":
        return fluid.optimizer.SGD(0.5, regularization=reg, grad_clip=clip_obj)
    if name == "momentum":
        return fluid.optimizer.Momentum(0.2, 0.9, regularization=reg, grad_clip=clip_obj)
    return fluid.optimizer.Adam(0.05, regularization=reg, grad_clip=clip_obj)


def _data():
    rng = np.random.default_rng(7)
    return (rng.standard_normal((BATCH, 6)).astype("float32"),
            rng.integers(0, 3, (BATCH, 1)).astype("int64"))


def build(opt, seed, extra_layer=False):
    """An MLP 6-10-3 (optionally one more layer) with softmax cross-entropy and ``opt``."""
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = seed
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [-1, 6])
        y = fluid.data("y", [-1, 1], dtype="int64")
        h = fluid.layers.fc(x, 10, act="tanh")
        if extra_layer:
            h = fluid.layers.fc(h, 10, act="tanh")
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(
            fluid.layers.fc(h, 3), y))
        ops, pairs = opt.minimize(loss)
    return main, startup, loss, [p.name for p, _ in pairs]


def train_single(name, clip, decay, steps=STEPS):
    """One process, the whole batch, the plain optimizer: the reference."""
    main, startup, loss, params = build(_optimizer(name, clip, decay), seed=11)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    X, Y = _data()
    for _ in range(steps):
        exe.run(main, feed={"x": X, "y": Y}, fetch_list=[loss], scope=scope)
    return {p: np.array(scope.find_var(p).get_tensor()) for p in params}


# -- the pass, in one process -------------------------------------------------------------------
def _fleet_build(opt, seed=11, fuse=False, overlap=True):
    from fluidlite.incubate.fleet.base import role_maker
    from fluidlite.incubate.fleet.collective import DistributedStrategy, fleet
    fleet.init(role_maker.PaddleCloudRoleMaker(is_collective=True))
    strategy = DistributedStrategy()
    strategy.fuse_all_reduce_ops = fuse
    strategy.overlap_allreduce = overlap
    dist = fleet.distributed_optimizer(opt, strategy=strategy)
    main, startup, loss, params = build(dist, seed)
    return fleet, main, startup, loss, params


def test_pass_puts_allreduce_and_scale_between_backward_and_clip():
    # the blocking mode (overlap: tests/test_distributed_overlap.py)
    fleet, main, startup, loss, params = _fleet_build(_optimizer("momentum", "global_norm",
                                                                 "l2"), overlap=False)
    assert fleet.main_program is main and fleet.startup_program is startup
    ops = main.global_block().ops
    types = [o.type for o in ops]
    first_ar, last_ar = types.index("c_allreduce_sum"), len(types) - 1 - \
        types[::-1].index("c_allreduce_sum")
    backward = [i for i, o in enumerate(ops) if o.attrs["op_role"] & OpRole.Backward
                and o.attrs.get("op_namescope") != "/data_parallel/"]
    optimize = [i for i, o in enumerate(ops) if o.attrs["op_role"] & OpRole.Optimize]
    assert max(backward) < first_ar and last_ar < min(optimize)
    assert types[min(optimize)] == "squared_l2_norm"          # the clip reads averaged grads
    dp = [o for o in ops if o.attrs.get("op_namescope") == "/data_parallel/"]
    assert [o.type for o in dp[:3]] == ["c_sync_calc_stream", "c_allreduce_sum", "scale"]
    assert dp[-1].type == "c_sync_comm_stream"
    assert all(o.attrs["op_role"] == OpRole.Backward for o in dp)
    reduced = {o.inputs["X"][0]: o for o in dp if o.type == "c_allreduce_sum"}
    assert sorted(reduced) == sorted(p + "@GRAD" for p in params)
    for g, o in reduced.items():
        assert o.outputs["Out"] == [g] and o.attrs["op_role_var"] == [g[:-5], g]
    scales = [o for o in dp if o.type == "scale"]
    assert len(scales) == len(params) and all(o.attrs["scale"] == 1.0 for o in scales)  # 1/1
    stypes = [o.type for o in startup.global_block().ops]
    assert stypes.count("c_broadcast") == len(params)
    assert stypes.index("c_comm_init") > stypes.index("c_gen_nccl_id")
    bc = [o for o in startup.global_block().ops if o.type == "c_broadcast"]
    assert all(o.attrs["root"] == 0 and o.attrs["op_role"] == OpRole.Forward for o in bc)
    main.lint()
    startup.lint()


def test_small_gradients_are_reduced_in_one_bucket():
    fleet, main, startup, loss, params = _fleet_build(_optimizer("adam", "global_norm", None),
                                                      fuse=True, overlap=False)
    dp = [o for o in main.global_block().ops if o.attrs.get("op_namescope") == "/data_parallel/"]
    types = [o.type for o in dp]
    assert types.count("c_allreduce_sum") == 1 and types.count("scale") == 1
    concat = dp[types.index("concat")]
    split = dp[types.index("split")]
    assert dp[types.index("c_allreduce_sum")].inputs["X"] == concat.outputs["Out"]
    unpacked = [o.outputs["Out"][0] for o in dp[types.index("split"):] if o.type == "reshape2"]
    assert sorted(unpacked) == sorted(p + "@GRAD" for p in params)
    sizes = {p.name: int(np.prod(p.shape)) for p in main.global_block().all_parameters()}
    assert sum(split.attrs["sections"]) == sum(sizes.values())
    assert all(o.attrs["op_role"] == OpRole.Backward for o in dp)
    main.lint()
    # a gradient of 1 MB or more is reduced in place, on its own
    from fluidlite.distributed.data_parallel import _buckets
    big = fluid.Program().global_block().create_var(name="big@GRAD", shape=[512, 512],
                                                    dtype="float32")
    small = fluid.Program().global_block().create_var(name="s@GRAD", shape=[4],
                                                      dtype="float32")
    assert [len(b) for b in _buckets([("a", small), ("b", small), ("c", big), ("d", small)],
                                     32 << 20)] == [2, 1, 1]


def test_fleet_alone_trains_exactly_like_the_plain_optimizer():
    ref = train_single("adam", "global_norm", "l2")
    fleet, main, startup, loss, params = _fleet_build(_optimizer("adam", "global_norm", "l2"))
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(fleet.startup_program, scope=scope)
    X, Y = _data()
    for _ in range(STEPS):
        exe.run(fleet.main_program, feed={"x": X, "y": Y}, fetch_list=[loss], scope=scope)
    for p in params:
        np.testing.assert_array_equal(np.array(scope.find_var(p).get_tensor()), ref[p])
    assert (fleet.worker_index(), fleet.worker_num(), fleet.is_first_worker()) == (0, 1, True)


def test_fleet_saves_persistables_and_a_collective_free_inference_model(tmp_path):
    fleet, main, startup, loss, params = _fleet_build(_optimizer("adam", None, "l2"), fuse=True)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(fleet.startup_program)
    X, Y = _data()
    exe.run(fleet.main_program, feed={"x": X, "y": Y}, fetch_list=[loss])
    fleet.save_persistables(exe, str(tmp_path / "ckpt"))
    logits = [o for o in main.global_block().ops if o.type == "softmax_with_cross_entropy"][0]
    fleet.save_inference_model(exe, str(tmp_path / "model"), ["x"],
                               [main.global_block().var(logits.inputs["Logits"][0])])
    with fluid.scope_guard(fluid.Scope()):
        prog, feeds, fetches = fluid.io.load_inference_model(str(tmp_path / "model"), exe)
        assert not [o.type for o in prog.global_block().ops if o.type.startswith("c_")]
        out, = exe.run(prog, feed={"x": X}, fetch_list=fetches)
    w = np.array(fluid.global_scope().find_var(params[0]).get_tensor())
    with fluid.scope_guard(fluid.Scope()):
        fluid.io.load_persistables(exe, str(tmp_path / "ckpt"), main)
        np.testing.assert_array_equal(
            np.array(fluid.global_scope().find_var(params[0]).get_tensor()), w)
    assert out.shape == (BATCH, 3)


def test_minimize_is_one_transaction():
    from fluidlite.incubate.fleet.collective import DistributedStrategy, fleet
    fleet.init()
    strategy = DistributedStrategy()
    strategy.nccl_comm_num = 0                        # refused by the pass, after backward
    dist = fleet.distributed_optimizer(fluid.optimizer.SGD(0.1), strategy)
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [-1, 4])
        loss = fluid.layers.mean(fluid.layers.fc(x, 2))
        n_main, n_start, v = len(main.global_block().ops), len(startup.global_block().ops), \
            main.version
        with pytest.raises(ValueError, match="nrings .* must be >= 1"):
            dist.minimize(loss)
    assert (len(main.global_block().ops), len(startup.global_block().ops), main.version) == \
        (n_main, n_start, v)
    strategy = DistributedStrategy()
    strategy.use_amp = True
    with fluid.program_guard(main, startup), \
            pytest.raises(ValueError, match="use_amp is not provided"):
        fleet.distributed_optimizer(fluid.optimizer.SGD(0.1), strategy).minimize(loss)


def test_role_makers_check_the_launch(monkeypatch):
    from fluidlite.incubate.fleet.base import role_maker
    from fluidlite.incubate.fleet.collective import fleet
    monkeypatch.setenv("PADDLE_TRAINER_ID", "1")
    monkeypatch.setenv("PADDLE_TRAINERS_NUM", "2")
    with pytest.raises(ValueError, match="trainer 1 of 2, but this process is rank 0 of 1"):
        fleet.init(role_maker.PaddleCloudRoleMaker(is_collective=True))
    monkeypatch.delenv("PADDLE_TRAINER_ID")
    monkeypatch.delenv("PADDLE_TRAINERS_NUM")
    with pytest.raises(ValueError, match="collective mode only"):
        role_maker.PaddleCloudRoleMaker()
    fleet.init(role_maker.UserDefinedCollectiveRoleMaker(0, ["127.0.0.1:6170"]))
    assert fleet.worker_endpoints(to_string=True) == "127.0.0.1:6170"
    fleet.init(role_maker.UserDefinedRoleMaker(current_id=0, role=role_maker.Role.WORKER,
                                               worker_num=1))
    assert fleet.worker_num() == 1
    with pytest.raises(ValueError, match="workers only"):
        fleet.init(role_maker.UserDefinedRoleMaker(role=role_maker.Role.SERVER))


def test_with_data_parallel_alone_changes_nothing():
    main, startup, loss, params = build(_optimizer("sgd", None, None), seed=11)
    compiled = fluid.CompiledProgram(main).with_data_parallel(loss_name=loss.name)
    assert compiled._program is main
    assert "c_allreduce_sum" not in [o.type for o in main.global_block().ops]


def test_insert_before_optimize_on_a_minimized_program():
    from fluidlite.distributed import data_parallel
    main, startup, loss, params = build(_optimizer("momentum", "global_norm", None), seed=11)
    clone = main.clone()
    pairs = data_parallel.insert_before_optimize(clone)
    assert sorted(p.name for p, _ in pairs) == sorted(params)
    types = [o.type for o in clone.global_block().ops]
    assert types.index("c_allreduce_wait") < types.index("squared_l2_norm")
    assert "c_allreduce_start" not in [o.type for o in main.global_block().ops]
    clone.lint()
    with pytest.raises(ValueError, match="no backward pass"):
        data_parallel.insert_before_optimize(fluid.Program())


def test_transpiler_grad_allreduce_alone():
    ref = train_single("momentum", "global_norm", "l2")
    main, startup, loss, params = build(_optimizer("momentum", "global_norm", "l2"), seed=11)
    t = fluid.transpiler.collective.GradAllReduce(nrings=2)
    t.transpile(startup_program=startup, main_program=main, rank=0,
                endpoints="127.0.0.1:6170", current_endpoint="127.0.0.1:6170", wait_port=False)
    types = [o.type for o in main.global_block().ops]
    rings = [o.attrs["ring_id"] for o in main.global_block().ops
             if o.type == "c_allreduce_start"]
    assert types.index("c_allreduce_wait") < types.index("squared_l2_norm")
    assert sorted(set(rings)) == [0, 1] and len(rings) == len(params)
    assert [o.type for o in startup.global_block().ops].count("c_comm_init") == 2
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    X, Y = _data()
    for _ in range(STEPS):
        exe.run(main, feed={"x": X, "y": Y}, fetch_list=[loss], scope=scope)
    for p in params:
        np.testing.assert_array_equal(np.array(scope.find_var(p).get_tensor()), ref[p])
    with pytest.raises(ValueError, match="rank 0 of 2 endpoints, but this process is rank 0 "
                                         "of 1"):
        t.transpile(startup, main, 0, ["a:1", "b:2"], "a:1")


# -- the launcher's argument errors (no MPI job starts) ---------------------------------------
def _launch(*args, timeout=60):
    return subprocess.run([sys.executable, "-m", "fluidlite.distributed.launch", *args],
                          capture_output=True, text=True, timeout=timeout)


def test_launcher_rejects_missing_script_and_bad_n(tmp_path):
    r = _launch("--nproc_per_node", "2", str(tmp_path / "nope.py"))
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0
    assert "training script not found" in r.stderr
    script = tmp_path / "t.py"
    script.write_text("print('hi')\n")
    r = _launch("--nproc_per_node", "0", str(script))
    assert r.returncode == 2 and r.stderr.strip() == \
        "fluidlite.distributed.launch: error: --nproc_per_node must be >= 1, got 0"


# -- real 2-rank jobs ----------------------------------------------------------------------------
def _have_mpi():
    if shutil.which("mpirun") is None:
        return "mpirun not found (apt-get install openmpi-bin libopenmpi-dev)"
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return "mpi4py not installed (pip install 'fluidlite[dist]')"
    return None


mpi = pytest.mark.skipif(_have_mpi() is not None, reason=_have_mpi() or "")


def _job(mode, out, nproc=2, timeout=120, env=None):
    t0 = time.monotonic()
    e = dict(os.environ, **(env or {}))
    r = _launch("--nproc_per_node", str(nproc), HERE, mode, str(out), timeout=timeout) \
        if env is None else subprocess.run(
            [sys.executable, "-m", "fluidlite.distributed.launch", "--nproc_per_node",
             str(nproc), HERE, mode, str(out)], capture_output=True, text=True,
            timeout=timeout, env=e)
    return r, time.monotonic() - t0


@pytest.mark.slow
@mpi
def test_two_ranks_match_one_process_on_the_whole_batch(tmp_path):
    r, _ = _job("equiv", tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    for name, clip, decay in CONFIGS:
        ref = train_single(name, clip, decay)
        for rank in range(2):
            got = np.load(tmp_path / f"{name}-{clip}-{decay}-rank{rank}.npz")
            for p, v in ref.items():
                np.testing.assert_allclose(got[p], v, rtol=2e-5, atol=2e-6,
                                           err_msg=f"{name} {clip} {decay} rank {rank} {p}")
    _check_dygraph(tmp_path, 2)
    # the collective kernels themselves, and with_data_parallel, checked inside the job
    assert (tmp_path / "collectives-ok").read_text() == "ok"
    ref = train_single("momentum", "global_norm", None)
    got = np.load(tmp_path / "compiled-rank1.npz")
    for p, v in ref.items():
        np.testing.assert_allclose(got[p], v, rtol=2e-5, atol=2e-6)
    # the checkpoint rank 0 wrote loads in one process and continues identically
    main, startup, loss, params = build(_optimizer("adam", None, "l2"), seed=99)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    with fluid.scope_guard(scope):
        fluid.io.load_persistables(exe, str(tmp_path / "ckpt"), main)
    X, Y = _data()
    exe.run(main, feed={"x": X, "y": Y}, fetch_list=[loss], scope=scope)
    ref = train_single("adam", None, "l2", steps=STEPS + 1)
    for p, v in ref.items():
        np.testing.assert_allclose(np.array(scope.find_var(p).get_tensor()), v, rtol=2e-5,
                                   atol=2e-6)


def _check_dygraph(tmp_path, nranks):
    """DataParallel on shards == dygraph alone on the whole batch, from rank 0's weights."""
    X, Y = _data()
    runs = [np.load(tmp_path / f"dygraph-rank{r}.npz") for r in range(nranks)]
    k = len([key for key in runs[0].files if key.startswith("start")])
    init = [runs[0][f"start{i}"] for i in range(k)]
    _, ref = dygraph_train(X, Y, init=init)
    for run in runs:
        for i in range(k):
            np.testing.assert_array_equal(run[f"start{i}"], init[i])   # broadcast from rank 0
            np.testing.assert_allclose(run[f"end{i}"], ref[i], rtol=2e-5, atol=2e-6)


@pytest.mark.slow
@mpi
def test_four_ranks_static_and_dygraph(tmp_path):
    r, _ = _job("equiv4", tmp_path, nproc=4, timeout=180)
    assert r.returncode == 0, r.stdout + r.stderr
    ref = train_single("momentum", "global_norm", "l2")
    for rank in range(4):
        got = np.load(tmp_path / f"momentum-global_norm-l2-rank{rank}.npz")
        for p, v in ref.items():
            np.testing.assert_allclose(got[p], v, rtol=2e-5, atol=2e-6)
    _check_dygraph(tmp_path, 4)


@pytest.mark.slow
@mpi
def test_a_failing_rank_aborts_every_rank_promptly(tmp_path):
    r, seconds = _job("fault", tmp_path, timeout=90)
    out = r.stdout + r.stderr
    assert r.returncode != 0
    assert "rank 1 of 2 failed with RuntimeError: injected failure at step 1" in out
    assert seconds < 30, seconds
    assert not (tmp_path / "rank0-finished").exists()


@pytest.mark.slow
@mpi
def test_a_killed_or_vanished_rank_ends_the_job_within_a_bound(tmp_path):
    r, seconds = _job("kill", tmp_path, timeout=90)
    assert r.returncode != 0 and seconds < 30
    assert "process rank 1" in r.stdout + r.stderr and "signal 9" in r.stdout + r.stderr
    # a rank that exits without error mid-training: MPI would wait forever, the collective's
    # timeout (FLUIDLITE_COLLECTIVE_TIMEOUT) ends the job
    r, seconds = _job("stop", tmp_path, timeout=90, env={"FLUIDLITE_COLLECTIVE_TIMEOUT": "2"})
    assert r.returncode != 0 and seconds < 30
    assert "rank 0 of 2 waited 2 s (FLUIDLITE_COLLECTIVE_TIMEOUT)" in r.stdout + r.stderr
    assert not (tmp_path / "rank0-finished").exists()


@pytest.mark.slow
@mpi
def test_mismatched_programs_are_detected_at_startup(tmp_path):
    r, seconds = _job("mismatch", tmp_path, timeout=90)
    out = r.stdout + r.stderr
    assert r.returncode != 0 and seconds < 30
    assert "rank 0 has 4 gradients, rank 1 has 6" in out
    assert "first difference at gradient #" in out


# -- the worker (runs under mpirun) --------------------------------------------------------------
def _params(scope, names_):
    return {p: np.array(scope.find_var(p).get_tensor()) for p in names_}


def _check_collectives(comm_mod):
    """Every c_* kernel on 2 ranks, rings 0 and 1."""
    from fluidlite.core.registry import get_op_def
    world = comm_mod.world()
    r, n = world.rank, world.size
    x = np.arange(6, dtype=np.float32).reshape(3, 2) + 10 * r
    k = lambda op, *a, **kw: get_op_def(op).forward(*a, **kw)["Out"]
    np.testing.assert_array_equal(k("c_allreduce_sum", x), sum(
        np.arange(6, dtype=np.float32).reshape(3, 2) + 10 * i for i in range(n)))
    np.testing.assert_array_equal(k("c_allreduce_max", x), x - 10 * r + 10 * (n - 1))
    np.testing.assert_array_equal(k("c_allreduce_min", x), x - 10 * r)
    np.testing.assert_array_equal(k("c_allreduce_prod", x),
                                  np.prod([x - 10 * r + 10 * i for i in range(n)], axis=0))
    np.testing.assert_array_equal(k("c_broadcast", x, root=1), x - 10 * r + 10)
    np.testing.assert_array_equal(k("c_allgather", x, nranks=n),
                                  np.concatenate([x - 10 * r + 10 * i for i in range(n)]))
    y = np.ones((4, 2), np.float64) * (r + 1)
    np.testing.assert_array_equal(k("c_reducescatter", y, nranks=n),
                                  np.full((4 // n, 2), sum(range(1, n + 1)), np.float64))
    get_op_def("c_comm_init").forward(None, nranks=n, rank=r, ring_id=1)
    np.testing.assert_array_equal(k("c_allreduce_sum", x, ring_id=1),
                                  k("c_allreduce_sum", x, ring_id=0))


def _check_shm_allreduce(comm_mod):
    """All-reduces of 64 KB and more go through the shared-memory window: per element the
    rank-order fold ``v0 op v1 op ...`` (bit for bit, on every rank), in place or not, times a
    scale, over several rounds of the window and a short last one; the deferred non-blocking
    form and the data-parallel pass's fused all-reduce+scale kernel give the same bits."""
    from fluidlite.executor.fusion import _ReduceScale
    world = comm_mod.world()
    r, n = world.rank, world.size
    assert isinstance(world._window(np.empty(1 << 16, np.uint8)), comm_mod._NodeWindow)
    rng = np.random.default_rng(100 + r)
    size = 3 * comm_mod._SHM_CHUNK // 4 // n * n + 1001         # 3 rounds, a short last one
    cases = [(np.float32, "sum"), (np.float64, "max"), (np.float64, "min"),
             (np.float32, "prod"), (np.int64, "sum")]
    for dtype, op in cases:
        x = (rng.standard_normal(size) * 3).astype(dtype)
        xs = world.allgather_object(x)
        want = xs[0].copy()
        fold = {"sum": np.add, "max": np.maximum, "min": np.minimum, "prod": np.multiply}[op]
        for other in xs[1:]:
            want = fold(want, other)
        got = world.allreduce(x, op)
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(x, xs[r])                # the input is untouched
        y = x.copy()
        same = world.allreduce(y, op, inplace=True)
        assert same is y
        np.testing.assert_array_equal(same.reshape(-1), want)
        req = world.iallreduce(x, op)
        np.testing.assert_array_equal(req.wait(), want)
    x = rng.standard_normal((size // 5, 5)).astype(np.float32)
    xs = world.allgather_object(x)
    want = sum(xs[1:], xs[0])
    half = np.float32(1.0 / n)
    np.testing.assert_array_equal(world.allreduce(x, scale=half), want * half)
    fused = _ReduceScale(wait=False, ring_id=0, scale=1.0 / n).lower((), {})
    np.testing.assert_array_equal(fused(x), want * half)
    waited = _ReduceScale(wait=True, ring_id=0, scale=1.0 / n).lower((), {})
    req = world.iallreduce(x)
    np.testing.assert_array_equal(waited(req), want * half)
    np.testing.assert_array_equal(req.wait(), want * half)          # waiting twice: same
    owned = _ReduceScale(wait=True, ring_id=0, scale=1.0 / n, inplace=True).lower((), {})
    y = x.copy()
    req = world.iallreduce(y)
    assert "in flight" in repr(req)
    got = owned(req)
    np.testing.assert_array_equal(got, want * half)
    assert got is y or not isinstance(req.req, comm_mod._Deferred)  # reduced in y's buffer
    np.testing.assert_array_equal(world.allreduce(np.asfortranarray(x)), want)


class _DyMLP:
    """Built lazily (dygraph imports): Linear 6-10 tanh, Linear 10-3."""

    @staticmethod
    def make():
        from fluidlite import dygraph

        class MLP(dygraph.Layer):
            def __init__(self):
                super().__init__()
                self.fc1 = dygraph.Linear(6, 10, act="tanh")
                self.fc2 = dygraph.Linear(10, 3)

            def forward(self, x):
                return self.fc2(self.fc1(x))
        return MLP()


def dygraph_train(X, Y, init=None, parallel=False, steps=STEPS):
    """Momentum + global-norm clip + L2 decay in dygraph; ``parallel``: DataParallel on this
    rank's shard. Returns (initial parameters, final parameters)."""
    from fluidlite import dygraph
    from fluidlite.dygraph import parallel as dp
    with dygraph.guard():
        if parallel:             # a different seed per rank: DataParallel must broadcast
            from fluidlite.distributed import get_rank
            dygraph.seed(100 + get_rank())
        net = _DyMLP.make()
        if init is not None:
            for p, v in zip(net.parameters(), init):
                p.set_value(v)
        if parallel:
            strategy = dp.prepare_context()
            net = dp.DataParallel(net, strategy)
        start = [p.numpy().copy() for p in net.parameters()]
        opt = _optimizer("momentum", "global_norm", "l2")
        opt = type(opt)(0.2, 0.9, regularization=fluid.regularizer.L2Decay(0.01),
                        grad_clip=fluid.clip.GradientClipByGlobalNorm(0.05),
                        parameter_list=net.parameters())
        for _ in range(steps):
            loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(
                net(dygraph.to_variable(X)), dygraph.to_variable(Y)))
            if parallel:
                loss = net.scale_loss(loss)
                loss.backward()
                net.apply_collective_grads()
            else:
                loss.backward()
            opt.minimize(loss)
            net.clear_gradients()
        return start, [p.numpy().copy() for p in net.parameters()]


def worker(mode, out):
    from fluidlite.distributed import comm as comm_mod
    from fluidlite.incubate.fleet.base import role_maker
    from fluidlite.incubate.fleet.collective import DistributedStrategy, fleet
    fleet.init(role_maker.PaddleCloudRoleMaker(is_collective=True))
    r, n = fleet.worker_index(), fleet.worker_num()
    X, Y = _data()
    if mode == "mismatch":
        dist = fleet.distributed_optimizer(fluid.optimizer.SGD(0.1))
        build(dist, seed=11, extra_layer=(r == 1))
        return
    if mode == "equiv4":                        # 4 ranks: one config each API
        configs = [("momentum", "global_norm", "l2")]
    else:
        configs = CONFIGS if mode == "equiv" else [("sgd", None, None)]
    for name, clip, decay in configs:
        strategy = DistributedStrategy()
        strategy.nccl_comm_num = 2 if name == "sgd" else 1          # gradients on 2 rings
        strategy.fuse_all_reduce_ops = name != "sgd"                 # buckets, and in place
        dist = fleet.distributed_optimizer(_optimizer(name, clip, decay), strategy)
        # different seeds per rank: the start-up broadcast must make them equal
        main, startup, loss, params = build(dist, seed=11 + 5 * r)
        exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
        exe.run(fleet.startup_program, scope=scope)
        for step in range(STEPS):
            if mode == "fault" and r == 1 and step == 1:
                raise RuntimeError("injected failure at step 1")
            if mode == "kill" and r == 1 and step == 1:
                os.kill(os.getpid(), 9)
            if mode == "stop" and r == 1 and step == 1:
                sys.exit(0)                 # leaves quietly: rank 0 waits in its all-reduce
            exe.run(fleet.main_program, feed={"x": X[r::n], "y": Y[r::n]}, fetch_list=[loss],
                    scope=scope)
            mine = _params(scope, params)
            for other in comm_mod.world().allgather_object(mine):
                for p in params:                       # all ranks identical at every step
                    np.testing.assert_array_equal(other[p], mine[p])
        np.savez(os.path.join(out, f"{name}-{clip}-{decay}-rank{r}.npz"), **mine)
        if (name, clip, decay) == ("adam", None, "l2"):
            with fluid.scope_guard(scope):
                fleet.save_persistables(exe, os.path.join(out, "ckpt"), main)
    if mode in ("equiv", "equiv4"):
        _check_shm_allreduce(comm_mod)
        start, end = dygraph_train(X[r::n], Y[r::n], parallel=True)
        np.savez(os.path.join(out, f"dygraph-rank{r}.npz"),
                 **{f"start{i}": v for i, v in enumerate(start)},
                 **{f"end{i}": v for i, v in enumerate(end)})
    if mode == "equiv":
        _check_collectives(comm_mod)
        # CompiledProgram.with_data_parallel on a minimized program
        with fluid.scope_guard(fluid.Scope()):
            main, startup, loss, params = build(_optimizer("momentum", "global_norm", None),
                                                seed=11 + 5 * r)
            exe = fluid.Executor(fluid.CPUPlace())
            exe.run(startup)
            compiled = fluid.CompiledProgram(main).with_data_parallel(loss_name=loss.name)
            for _ in range(STEPS):
                exe.run(compiled, feed={"x": X[r::n], "y": Y[r::n]}, fetch_list=[loss])
            np.savez(os.path.join(out, f"compiled-rank{r}.npz"),
                     **_params(fluid.global_scope(), params))
        if r == 0:
            with open(os.path.join(out, "collectives-ok"), "w") as f:
                f.write("ok")
    if r == 0 and mode in ("fault", "kill", "stop"):
        with open(os.path.join(out, "rank0-finished"), "w") as f:
            f.write("finished")


if __name__ == "__main__":
    worker(sys.argv[1], sys.argv[2])
