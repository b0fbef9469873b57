"""Data-parallel scaling on MPI: samples/s with 1 process vs N processes (fleet collective).

Configs (the MLPs of ``bench/mlp_step.py``, softmax cross-entropy, global-norm clip 1.0, SGD):
A 784-512-512-10 with a global batch of 128, D 784-2048-2048-10 with 256, and the LeNet step
of ``bench/conv_step.py`` (Adam, batch 64). The global batch is fixed (strong scaling): with N
processes each rank trains on batch/N through ``fleet.distributed_optimizer``, in the blocking
mode (all-reduces after backward) and in the overlap mode (``c_allreduce_start`` after the
backward op producing a bucket's last gradient, ``c_allreduce_wait`` before the clip; the
default, with the MPI progress thread when the machine has a core to spare for it, or as
``--thread 1/0`` says) — and, with ``--no-thread-too``, the overlap mode without the progress
thread (``FLUIDLITE_PROGRESS_THREAD=0``); the 1-process baseline is the
plain optimizer on the whole batch. Every process runs 1 BLAS thread. Reports samples/s, the
speed-up and the share of rank 0's step time spent inside the all-reduce calls (blocking: the
whole collective, which includes waiting for the slower rank; overlap: starting plus waiting,
i.e. the communication time not hidden behind backward); medians of ``--rounds`` interleaved
runs, and every run's samples/s as one JSON line per config. Then it measures the all-reduce
latency and bandwidth the README's scaling model uses. First it measures the machine's parallel
capacity (N independent NumPy processes vs one): on a machine shared with other work that, not
the framework, bounds the speed-up.

    python bench/data_parallel.py                  # configs A D conv, 1 vs 2 processes
    python bench/data_parallel.py -c D --nproc 2 --rounds 5 --no-thread-too
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")           # before numpy is imported

import numpy as np  # noqa: E402

HERE = os.path.abspath(__file__)
CONFIGS = {"A": ((784, 512, 512, 10), 128), "D": ((784, 2048, 2048, 10), 256),
           "conv": (None, 64)}
STEPS = {"A": 150, "D": 25, "conv": 60}        # ~2 s per run on one process


MODES = {"0": "1 proc", "1": "blocking", "2": "overlap", "3": "overlap,no thread"}


def build(config: str, fleet_opt: bool, overlap: bool = True):
    import fluidlite as fluid
    sizes, batch = CONFIGS[config]
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 1
    with fluid.program_guard(main, startup):
        if sizes is None:
            x = fluid.data("x", [None, 1, 28, 28], "float32")
            y = fluid.data("y", [None, 1], "int64")
            c = fluid.nets.simple_img_conv_pool(x, num_filters=20, filter_size=5, pool_size=2,
                                                pool_stride=2, act="relu")
            c = fluid.layers.batch_norm(c)
            c = fluid.nets.simple_img_conv_pool(c, num_filters=50, filter_size=5, pool_size=2,
                                                pool_stride=2, act="relu")
            pred = fluid.layers.fc(c, size=10, act="softmax")
            loss = fluid.layers.mean(fluid.layers.cross_entropy(pred, y))
            opt = fluid.optimizer.Adam(learning_rate=0.001)
        else:
            x = fluid.data("x", [None, sizes[0]], "float32")
            y = fluid.data("y", [None, 1], "int64")
            h = x
            for n in sizes[1:-1]:
                h = fluid.layers.fc(h, n, act="relu")
            logits = fluid.layers.fc(h, sizes[-1])
            loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, y))
            opt = fluid.optimizer.SGD(0.01, grad_clip=fluid.clip.GradientClipByGlobalNorm(1.0))
        if fleet_opt:
            from fluidlite.incubate.fleet.collective import fleet
            from fluidlite.incubate.fleet.collective import DistributedStrategy
            fleet.init()
            strategy = DistributedStrategy()
            strategy.overlap_allreduce = overlap
            opt = fleet.distributed_optimizer(opt, strategy)
        opt.minimize(loss)
    rng = np.random.default_rng(0)
    shape = (batch, 1, 28, 28) if sizes is None else (batch, sizes[0])
    data = (rng.standard_normal(shape).astype("float32"),
            rng.integers(0, 10, (batch, 1)).astype("int64"))
    return main, startup, loss, data


def worker(config: str, steps: int, mode: str) -> None:
    import fluidlite as fluid
    from fluidlite.distributed import comm
    world = comm.world()
    r, n = world.rank, world.size
    main, startup, loss, (X, Y) = build(config, mode != "0", overlap=mode in ("2", "3"))
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    feed = {"x": X[r::n], "y": Y[r::n]}
    for _ in range(3):
        exe.run(main, feed=feed, fetch_list=[loss], scope=scope)
    world.barrier()
    comm.reset_stats()
    t0 = time.perf_counter()
    for _ in range(steps):
        exe.run(main, feed=feed, fetch_list=[loss], scope=scope)
    world.barrier()
    seconds = time.perf_counter() - t0
    st = comm.stats()
    if r == 0:
        print(json.dumps({"config": config, "mode": MODES[mode], "nproc": n, "steps": steps,
                          "seconds": seconds,
                          "samples_per_s": CONFIGS[config][1] * steps / seconds,
                          "allreduce_s": st["seconds"], "allreduce_bytes": st["bytes"]}))


def probe() -> None:
    """All-reduce time of 4 B and 23 MB (config D's gradients) messages on this launch."""
    from fluidlite.distributed import comm
    world = comm.world()
    out = {}
    for nbytes, reps in ((4, 200), (23_300_000, 10)):
        x = np.ones(nbytes // 4, np.float32)
        world.allreduce(x)
        world.barrier()
        t0 = time.perf_counter()
        for _ in range(reps):
            world.allreduce(x)
        out[nbytes] = (time.perf_counter() - t0) / reps
    if world.rank == 0:
        n = world.size
        alpha = out[4]
        big = 23_300_000
        bw = 2 * (n - 1) / n * big / max(out[big] - alpha, 1e-12)
        print(json.dumps({"probe": True, "nproc": n, "latency_s": alpha,
                          "t_23MB_s": out[big], "bandwidth_Bps": bw}))


def capacity(nproc: int) -> float:
    """Throughput of ``nproc`` independent single-threaded NumPy processes relative to one,
    measured now: the speed-up ceiling this machine offers (below ``nproc`` when other work
    shares the cores)."""
    code = ("import numpy as np, time; a = np.random.rand(768, 768).astype(np.float32); "
            "t = time.perf_counter(); [a @ a for _ in range(60)]; "
            "print(time.perf_counter() - t)")

    def run(k: int) -> float:
        procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                                  text=True) for _ in range(k)]
        return max(float(p.communicate()[0]) for p in procs)
    one = min(run(1) for _ in range(2))
    many = min(run(nproc) for _ in range(2))
    return nproc * one / many


def _run(cmd, env=None):
    res = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if res.returncode != 0:
        sys.stderr.write(res.stdout + res.stderr)
        raise SystemExit(f"benchmark worker failed: {' '.join(cmd)}")
    return [json.loads(line) for line in res.stdout.splitlines() if line.startswith("{")][-1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-c", "--configs", nargs="+", default=["A", "D", "conv"],
                    choices=list(CONFIGS))
    ap.add_argument("--nproc", type=int, default=2)
    ap.add_argument("--steps", type=int, default=0, help="timed steps (0: per config)")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved runs; medians reported")
    ap.add_argument("--thread", choices=["auto", "1", "0"], default=None,
                    help="FLUIDLITE_PROGRESS_THREAD for the overlap mode (default: auto, the "
                         "progress thread runs when the machine has more cores than ranks)")
    ap.add_argument("--no-thread-too", action="store_true",
                    help="also time the overlap mode without the MPI progress thread")
    ap.add_argument("--worker", nargs=2, metavar=("CONFIG", "MODE"), help=argparse.SUPPRESS)
    ap.add_argument("--probe", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.probe:
        return probe()
    if args.worker:
        return worker(args.worker[0], args.steps or STEPS[args.worker[0]], args.worker[1])
    launch = [sys.executable, "-m", "fluidlite.distributed.launch", "--nproc_per_node",
              str(args.nproc), HERE]
    print(f"machine capacity now: {args.nproc} independent processes run at "
          f"{capacity(args.nproc):.2f}x the throughput of one (the speed-up ceiling)")
    modes = ["1", "2"] + (["3"] if args.no_thread_too else [])
    print(f"{'config':>6} {'mode':>15} {'samples/s':>10} {'speed-up':>9} "
          f"{'all-reduce share':>17}   ms/step: compute + all-reduce")
    for config in args.configs:
        steps = str(args.steps or STEPS[config])
        runs = {m: [] for m in ["0"] + modes}
        for _ in range(args.rounds):          # interleaved: machine load hits every mode alike
            runs["0"].append(_run([sys.executable, HERE, "--steps", steps, "--worker", config,
                                   "0"]))
            for m in modes:
                env = dict(os.environ)
                if m == "3":
                    env["FLUIDLITE_PROGRESS_THREAD"] = "0"
                elif args.thread:
                    env["FLUIDLITE_PROGRESS_THREAD"] = args.thread
                runs[m].append(_run(launch + ["--steps", steps, "--worker", config, m],
                                    env=env))
        med = {m: sorted(rs, key=lambda r: r["samples_per_s"])[len(rs) // 2]
               for m, rs in runs.items()}
        one = med["0"]
        ms = lambda r, t: 1e3 * t / r["steps"]
        for m in ["0"] + modes:
            r = med[m]
            ar = r["allreduce_s"] if m != "0" else 0.0
            label = MODES[m] if m == "0" else f"{args.nproc} {MODES[m]}"
            print(f"{config:>6} {label:>15} {r['samples_per_s']:10.0f} "
                  f"{r['samples_per_s'] / one['samples_per_s']:8.2f}x {ar / r['seconds']:16.0%}"
                  f"   {ms(r, r['seconds'] - ar):7.1f} + {ms(r, ar):.1f}")
        print(json.dumps({"config": config, **{MODES[m]: [round(x["samples_per_s"], 1)
                                                          for x in runs[m]] for m in runs}}))
    p = _run(launch + ["--probe"])
    print(f"all-reduce on {p['nproc']} processes: latency {p['latency_s'] * 1e6:.0f} us, "
          f"23 MB in {p['t_23MB_s'] * 1e3:.1f} ms, bus bandwidth "
          f"{p['bandwidth_Bps'] / 1e9:.2f} GB/s")


if __name__ == "__main__":
    main()
