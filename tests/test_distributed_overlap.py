"""The all-reduce overlapped with backward (``c_allreduce_start`` / ``c_allreduce_wait``),
LocalSGD (fleet's ``use_local_sgd`` and ``fluid.transpiler.collective.LocalSGD``) and the
launcher's hostfile path.

One process: the ops, where the pass puts them, the error paths. One real 2-rank job (marked
slow), started through the launcher with a hostfile naming ``localhost slots=2``: overlap and
blocking modes give bit-identical parameters, LocalSGD makes ranks identical exactly every k
steps and equals gradient averaging for SGD with k = 1.

This file is also the worker of that job: ``python tests/test_distributed_overlap.py OUT``.
"""
import os
import subprocess
import sys

import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.core.dtypes import VarType
from fluidlite.core.ir import OpRole
from fluidlite.core.registry import get_op_def

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_distributed import (_data, _have_mpi, _optimizer, build,  # noqa: E402
                              train_single)

HERE = os.path.abspath(__file__)
K = 3                      # LocalSGD period in the job


def _fleet(opt, **strategy):
    from fluidlite.incubate.fleet.collective import DistributedStrategy, fleet
    fleet.init()
    st = DistributedStrategy()
    for k, v in strategy.items():
        setattr(st, k, v)
    return fleet.distributed_optimizer(opt, st)


def _dp_ops(main):
    return [o for o in main.global_block().ops if o.attrs.get("op_namescope") ==
            "/data_parallel/"]


# -- the ops ---------------------------------------------------------------------------------
def test_start_and_wait_ops_alone_are_the_identity_and_check_their_input():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    req = get_op_def("c_allreduce_start").forward(x, ring_id=0)["Request"]
    assert "done" in repr(req)
    out = get_op_def("c_allreduce_wait").forward(req)["Out"]
    np.testing.assert_array_equal(out, x)
    assert get_op_def("c_allreduce_wait").forward(req)["Out"] is out      # waiting twice
    with pytest.raises(TypeError, match="c_allreduce_wait: input Request must be the request "
                                        "written by c_allreduce_start, got ndarray"):
        get_op_def("c_allreduce_wait").forward(x)
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        v = fluid.data("v", [-1, 3])
        r = main.global_block().create_var(name="r", type=VarType.RAW)
        with pytest.raises(ValueError, match="reduce_type must be one of .*got 'mean'"):
            main.global_block().append_op(type="c_allreduce_start", inputs={"X": v},
                                          outputs={"Request": r},
                                          attrs={"reduce_type": "mean"})


def test_start_and_wait_run_in_a_program():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [-1, 3])
        block = main.global_block()
        req = block.create_var(name="req", type=VarType.RAW)
        block.append_op(type="c_allreduce_start", inputs={"X": x}, outputs={"Request": req},
                        attrs={"reduce_type": "max"})
        out = block.create_var(name="out", dtype="float32", shape=[-1, 3])
        block.append_op(type="c_allreduce_wait", inputs={"Request": req},
                        outputs={"Out": out})
        y = fluid.layers.scale(out, 2.0)
    main.lint()
    assert out.shape == (-1, 3)
    got, = fluid.Executor(fluid.CPUPlace()).run(main, feed={"x": np.ones((2, 3), "float32")},
                                                fetch_list=[y])
    np.testing.assert_array_equal(got, np.full((2, 3), 2.0, np.float32))


# -- the pass --------------------------------------------------------------------------------
def test_overlap_starts_after_the_last_producer_and_waits_before_the_first_reader():
    opt = _fleet(_optimizer("momentum", "global_norm", "l2"), fuse_grad_size_in_MB=1e-4,
                 nccl_comm_num=2)
    main, startup, loss, params = build(opt, seed=11, extra_layer=True)
    main.lint()
    ops = main.global_block().ops
    types = [o.type for o in ops]
    starts = [i for i, t in enumerate(types) if t == "c_allreduce_start"]
    waits = [i for i, t in enumerate(types) if t == "c_allreduce_wait"]
    assert "c_allreduce_sum" not in types and len(starts) == len(waits) > 2
    backward = [i for i, o in enumerate(ops) if o.attrs["op_role"] == OpRole.Backward
                and o.attrs.get("op_namescope") != "/data_parallel/"]
    # communication starts inside backward: the first start comes before backward ends
    assert starts[0] < max(backward) and max(backward) < waits[0]
    assert types[max(waits) + 1:].index("squared_l2_norm") >= 0
    first_optimize = min(i for i, o in enumerate(ops) if o.attrs["op_role"] & OpRole.Optimize)
    assert max(waits) < first_optimize
    # each start sits right after the op writing the last gradient of its bucket (or the
    # packing of that bucket), and every bucket's request is waited for exactly once
    for s in starts:
        req = ops[s].outputs["Request"][0]
        assert [i for i in waits if ops[i].inputs["Request"] == [req]] != []
        j = s - 1
        while ops[j].attrs.get("op_namescope") == "/data_parallel/":
            j -= 1
        assert ops[j].attrs["op_role"] == OpRole.Backward
    rings = sorted({ops[i].attrs["ring_id"] for i in starts})
    assert rings == [0, 1]
    assert all(o.attrs["op_role"] == OpRole.Backward for o in _dp_ops(main))
    reduced = set()
    for o in _dp_ops(main):
        if o.type == "c_allreduce_wait" or (o.type == "reshape2" and
                                             o.outputs["Out"][0].endswith("@GRAD")):
            reduced.update(o.outputs["Out"])
    assert {p + "@GRAD" for p in params} <= reduced | {
        o.inputs["X"][0] for o in _dp_ops(main) if o.type == "c_allreduce_start"}


def test_blocking_mode_is_kept_behind_a_flag():
    opt = _fleet(_optimizer("sgd", None, None), overlap_allreduce=False)
    main, _, _, params = build(opt, seed=11)
    types = [o.type for o in _dp_ops(main)]
    assert "c_allreduce_start" not in types and types.count("c_allreduce_sum") >= 1
    from fluidlite.distributed import data_parallel
    main, _, _, params = build(_optimizer("sgd", None, None), seed=11)
    clone = main.clone()
    data_parallel.insert_before_optimize(clone, overlap=False)
    assert "c_allreduce_start" not in [o.type for o in clone.global_block().ops]
    data_parallel.insert_before_optimize(main)                       # default: overlap
    types = [o.type for o in main.global_block().ops]
    assert types.index("c_allreduce_start") < types.index("c_allreduce_wait") < \
        types.index("sgd")
    main.lint()


def test_overlap_alone_trains_exactly_like_the_plain_optimizer():
    ref = train_single("adam", "global_norm", "l2")
    opt = _fleet(_optimizer("adam", "global_norm", "l2"), fuse_grad_size_in_MB=1e-4)
    main, startup, loss, params = build(opt, seed=11)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    X, Y = _data()
    for _ in range(3):
        exe.run(main, feed={"x": X, "y": Y}, fetch_list=[loss], scope=scope)
    for p in params:
        np.testing.assert_array_equal(np.array(scope.find_var(p).get_tensor()), ref[p])


def test_overlapped_and_local_sgd_programs_round_trip():
    """The start/wait ops and their RAW request variables survive the JSON-like dict and the
    Paddle binary form (what exports and checkpoints of the program carry)."""
    for strategy in ({"fuse_grad_size_in_MB": 1e-4},
                     {"use_local_sgd": True, "local_sgd_steps": 2}):
        main, _, _, _ = build(_fleet(_optimizer("sgd", None, None), **strategy), seed=11)
        for back in (fluid.Program.from_dict(main.to_dict()),
                     fluid.Program.parse_from_string(main.desc.serialize_to_string())):
            back.lint()
            for b0, b1 in zip(main.blocks, back.blocks):
                assert [(o.type, o.inputs, o.outputs, o.attrs.get("op_role")) for o in b0.ops] \
                    == [(o.type, o.inputs, o.outputs, o.attrs.get("op_role")) for o in b1.ops]
            reqs = [v for v in back.global_block().vars.values()
                    if v.name.startswith("allreduce_request")]
            assert all(v.type == VarType.RAW for v in reqs)
            assert bool(reqs) != bool(strategy.get("use_local_sgd"))


# -- LocalSGD, one process --------------------------------------------------------------------
def test_local_sgd_program_structure():
    opt = _fleet(_optimizer("momentum", None, None), use_local_sgd=True, local_sgd_steps=4,
                 local_sgd_is_warm_steps=2)
    main, startup, loss, params = build(opt, seed=11)
    main.lint()
    startup.lint()
    types = [o.type for o in main.global_block().ops]
    assert "c_allreduce_start" not in types and "c_allreduce_sum" not in types  # no grads
    assert types[-1] == "conditional_block" and "increment" in types
    sub = main.block(1)
    assert [o.type for o in sub.ops[:5]] == ["elementwise_sub", "c_allreduce_sum", "scale",
                                             "elementwise_sub", "assign"]
    assert all(o.attrs["op_role"] == OpRole.Optimize for o in sub.ops)
    assert sorted(o.outputs["Out"][0] for o in sub.ops if o.type == "assign") == \
        sorted(p + "@SNAPSHOT" for p in params)
    stypes = [o.type for o in startup.global_block().ops]
    assert stypes.count("assign") == len(params)
    assert stypes.index("c_broadcast") < stypes.index("assign")   # snapshot after broadcast
    # k = 1: the averaging is unconditional (fluid 1.8's LocalSGD transpiler)
    opt = _fleet(_optimizer("sgd", None, None), use_local_sgd=True,
                 local_sgd_config={"local_sgd_steps": 1})
    main, startup, loss, params = build(opt, seed=11)
    assert main.num_blocks == 1
    assert [o.type for o in main.global_block().ops].count("c_allreduce_sum") == len(params)


def test_local_sgd_alone_trains_like_the_plain_optimizer():
    ref = train_single("momentum", "global_norm", "l2", steps=4)
    opt = _fleet(_optimizer("momentum", "global_norm", "l2"), use_local_sgd=True,
                 local_sgd_steps=2)
    main, startup, loss, params = build(opt, seed=11)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    X, Y = _data()
    for _ in range(4):
        exe.run(main, feed={"x": X, "y": Y}, fetch_list=[loss], scope=scope)
    for p in params:
        np.testing.assert_allclose(np.array(scope.find_var(p).get_tensor()), ref[p],
                                   rtol=1e-6, atol=1e-7)
    assert int(np.array(scope.find_var("@LOCAL_SGD_STEP@").get_tensor())[0]) == 4


def test_local_sgd_errors():
    with pytest.raises(ValueError, match=r"local_sgd_steps \(k_steps\) must be an int >= 1, "
                                         r"got 0"):
        build(_fleet(_optimizer("sgd", None, None), use_local_sgd=True, local_sgd_steps=0),
              seed=1)
    with pytest.raises(ValueError, match=r"local_sgd_is_warm_steps \(begin_step\) must be an "
                                         r"int >= 0, got -1"):
        fluid.transpiler.collective.LocalSGD(k_steps=2, begin_step=-1)
    main, startup, loss, params = build(_optimizer("sgd", None, None), seed=1)
    t = fluid.transpiler.collective.LocalSGD(nrings=1)
    with pytest.raises(ValueError, match="no update op"):
        t.transpile(fluid.Program(), fluid.Program(), 0, "127.0.0.1:6170", "127.0.0.1:6170")
    t.transpile(startup, main, 0, "127.0.0.1:6170", "127.0.0.1:6170")
    assert [o.type for o in main.global_block().ops][-5:] == [
        "elementwise_sub", "c_allreduce_sum", "scale", "elementwise_sub", "assign"]
    assert t.snapshot_name("w") == "w@SNAPSHOT"


# -- the launcher with a hostfile, and the real 2-rank job -------------------------------------
@pytest.mark.parametrize("cores,local,setting,on", [
    (2, 2, "auto", False), (4, 2, "auto", True), (2, None, "auto", True),
    (1, None, "auto", False), (2, 2, "1", True), (8, 2, "0", False)])
def test_progress_thread_runs_only_with_a_spare_core_by_default(monkeypatch, cores, local,
                                                                 setting, on):
    from fluidlite.distributed import comm
    monkeypatch.setattr(comm.os, "sched_getaffinity", lambda pid: set(range(cores)),
                        raising=False)
    for var in ("OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "MV2_COMM_WORLD_LOCAL_SIZE"):
        monkeypatch.delenv(var, raising=False)
    if local is not None:
        monkeypatch.setenv("OMPI_COMM_WORLD_LOCAL_SIZE", str(local))
    monkeypatch.setenv("FLUIDLITE_PROGRESS_THREAD", setting)
    assert comm._Progress().enabled is on


def test_launcher_hostfile_command(tmp_path):
    from fluidlite.distributed import launch
    if _have_mpi() is not None:
        pytest.skip(_have_mpi())
    script = tmp_path / "t.py"
    script.write_text("")
    hostfile = tmp_path / "hosts"
    hostfile.write_text("localhost slots=2\n")
    cmd = launch.mpirun_command(2, str(script), ["a"], hostfile=str(hostfile))
    assert cmd[cmd.index("--hostfile") + 1] == str(hostfile)
    assert cmd[cmd.index("--npernode") + 1] == "2" and "-n" not in cmd
    r = subprocess.run([sys.executable, "-m", "fluidlite.distributed.launch", "--hostfile",
                        str(tmp_path / "nohosts"), str(script)], capture_output=True, text=True)
    assert r.returncode == 2 and "hostfile not found" in r.stderr


@pytest.mark.slow
@pytest.mark.skipif(_have_mpi() is not None, reason=_have_mpi() or "")
def test_two_ranks_overlap_local_sgd_through_a_hostfile(tmp_path):
    hostfile = tmp_path / "hosts"
    hostfile.write_text("# one machine, two processes\nlocalhost slots=2\n")
    r = subprocess.run([sys.executable, "-m", "fluidlite.distributed.launch",
                        "--nproc_per_node", "2", "--hostfile", str(hostfile), HERE,
                        str(tmp_path)], capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stdout + r.stderr
    # overlap == blocking, bit for bit, and both == one process on the whole batch
    ref = train_single("momentum", "global_norm", "l2")
    for rank in range(2):
        got = np.load(tmp_path / f"overlap-rank{rank}.npz")
        blocking = np.load(tmp_path / f"blocking-rank{rank}.npz")
        for p, v in ref.items():
            np.testing.assert_array_equal(got[p], blocking[p])
            np.testing.assert_allclose(got[p], v, rtol=2e-5, atol=2e-6)
    # LocalSGD, k = 3: ranks differ after steps 1 and 2, are identical after step 3, and hold
    # the mean of two independent local trainings on the shards
    same = (tmp_path / "localsgd-same.txt").read_text().split()
    assert same == ["0", "0", "1", "0", "0", "1"], same
    X, Y = _data()
    runs = [_local_train(X[r::2], Y[r::2], K) for r in range(2)]
    got = np.load(tmp_path / "localsgd-k3-rank1.npz")
    for p in runs[0]:
        np.testing.assert_allclose(got[p], (runs[0][p] + runs[1][p]) / 2, rtol=2e-5,
                                   atol=2e-6)
    # k = 1 with SGD (fleet and the transpiler) == gradient averaging == one process
    ref = train_single("sgd", None, None)
    for name in ("localsgd-k1", "transpiler-localsgd"):
        for rank in range(2):
            got = np.load(tmp_path / f"{name}-rank{rank}.npz")
            for p, v in ref.items():
                np.testing.assert_allclose(got[p], v, rtol=2e-5, atol=2e-6,
                                           err_msg=f"{name} rank {rank} {p}")


def _local_train(X, Y, steps):
    """One rank of LocalSGD between two averagings: the plain optimizer on its shard."""
    main, startup, loss, params = build(_optimizer("momentum", None, None), seed=11)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    for _ in range(steps):
        exe.run(main, feed={"x": X, "y": Y}, fetch_list=[loss], scope=scope)
    return {p: np.array(scope.find_var(p).get_tensor()) for p in params}


def worker(out):
    from fluidlite.distributed import comm
    world = comm.world()
    r, n = world.rank, world.size
    X, Y = _data()
    feed = {"x": X[r::n], "y": Y[r::n]}

    def train(opt, steps, seed=None, after_step=None, transpile=None):
        main, startup, loss, params = build(opt, seed=11 + 5 * r if seed is None else seed)
        if transpile is not None:
            transpile(main, startup)
        exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
        exe.run(startup, scope=scope)
        for step in range(steps):
            exe.run(main, feed=feed, fetch_list=[loss], scope=scope)
            if after_step:
                after_step({p: np.array(scope.find_var(p).get_tensor()) for p in params})
        return {p: np.array(scope.find_var(p).get_tensor()) for p in params}

    def save(name, params):
        np.savez(os.path.join(out, f"{name}-rank{r}.npz"), **params)

    for mode, overlap in (("overlap", True), ("blocking", False)):
        save(mode, train(_fleet(_optimizer("momentum", "global_norm", "l2"),
                                overlap_allreduce=overlap, fuse_grad_size_in_MB=1e-4,
                                nccl_comm_num=2), 3))
    same = []

    def record(params):
        others = world.allgather_object(params)
        same.append(int(all(np.array_equal(o[p], params[p]) for o in others for p in params)))
    for k, opt_name, steps in ((K, "momentum", 2 * K), (1, "sgd", 3)):
        params = train(_fleet(_optimizer(opt_name, None, None), use_local_sgd=True,
                              local_sgd_steps=k), steps, after_step=record if k == K else None)
        save(f"localsgd-k{k}", params)
        if k == K:
            # after 2K steps the saved parameters are those after the second averaging; save
            # the first averaging's result instead: re-run K steps
            save(f"localsgd-k{k}", train(_fleet(_optimizer(opt_name, None, None),
                                                use_local_sgd=True, local_sgd_steps=k), K))

    def transpile(main, startup):
        fluid.transpiler.collective.LocalSGD(nrings=2).transpile(
            startup, main, r, ["127.0.0.1:6170", "127.0.0.1:6171"], "", wait_port=False)
    save("transpiler-localsgd", train(_optimizer("sgd", None, None), 3, transpile=transpile))
    if r == 0:
        with open(os.path.join(out, "localsgd-same.txt"), "w") as f:
            f.write(" ".join(map(str, same)))


if __name__ == "__main__":
    worker(sys.argv[1])
