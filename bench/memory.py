"""Memory: RSS over many distinct programs on one Executor, and over a long training run.

Part 1 builds ``--programs`` distinct programs (a small MLP with SGD and global-norm clipping,
main + startup each), runs each once on ONE Executor in a fresh scope and drops it. A bounded
executor keeps at most ``Executor.cache_size`` plans and frees every dropped program, so RSS
stays flat. A baseline loop builds and drops the same programs without running them (graph
building has its own small growth: fluid's global name-scope tree keeps every scope entered).
Part 2 runs ``--steps`` training steps (Adam, global-norm clip, dropout) of one program and reports
RSS along the way. Reports RSS (MiB) at checkpoints, the growth after the
warm-up, the live Program objects and the cached plans. A benchmark, not a timed test.

    python bench/memory.py [--programs 1000] [--steps 10000]
"""
from __future__ import annotations

import argparse
import gc
import os
import time

import numpy as np

import fluidlite as fluid


def rss_mib() -> float:
    """Resident set size of this process (Linux /proc; falls back to the peak RSS)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2 ** 20
    except OSError:
        import resource
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def live_programs() -> int:
    return sum(isinstance(o, fluid.Program) for o in gc.get_objects())


def build(optimizer: str, in_dim: int = 64, width: int = 64, dropout: bool = False):
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 1
    with fluid.unique_name.guard(), fluid.program_guard(main, startup):
        x = fluid.data("x", [-1, in_dim])
        label = fluid.data("label", [-1, 1], "int64")
        h = fluid.layers.fc(x, width, act="relu")
        if dropout:
            h = fluid.layers.dropout(h, 0.1)
        logits = fluid.layers.fc(h, 10)
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, label))
        clip = fluid.clip.GradientClipByGlobalNorm(1.0)
        opt = (fluid.optimizer.Adam(1e-3, grad_clip=clip) if optimizer == "adam"
               else fluid.optimizer.SGD(0.1, grad_clip=clip))
        opt.minimize(loss)
    return main, startup, loss


def feed(rng: np.random.Generator, batch: int = 16, in_dim: int = 64) -> dict:
    return {"x": rng.normal(size=(batch, in_dim)).astype("float32"),
            "label": rng.integers(0, 10, (batch, 1)).astype("int64")}


def distinct_programs(n: int, every: int, run: bool = True) -> float:
    """Returns the RSS growth (MiB) after the first ``every`` programs."""
    exe = fluid.Executor(fluid.CPUPlace())
    rng = np.random.default_rng(0)
    data = feed(rng)
    if run:
        print(f"== {n} distinct programs (main + startup) run once each on one Executor "
              f"(cache_size={getattr(exe, 'cache_size', 'unbounded')}) ==")
    else:
        print(f"== baseline: {n} distinct programs built and dropped, never run ==")
    print(f"{'programs':>9} {'RSS MiB':>9} {'live Programs':>14} {'cached plans':>13}")
    base = None
    t0 = time.perf_counter()
    for i in range(1, n + 1):
        main, startup, loss = build("sgd")
        scope = fluid.Scope()
        if run:
            exe.run(startup, scope=scope)
            exe.run(main, feed=data, fetch_list=[loss], scope=scope)
        del main, startup, loss, scope
        if i % every == 0 or i == n:
            gc.collect()
            rss = rss_mib()
            base = rss if base is None else base
            plans = len(exe.cached_plans()) if hasattr(exe, "cached_plans") else "?"
            print(f"{i:>9} {rss:>9.1f} {live_programs():>14} {plans:>13}")
    growth = rss_mib() - base
    print(f"growth after the first {every}: {growth:+.1f} MiB ({time.perf_counter() - t0:.1f} s)")
    return growth


def training_steps(n: int, every: int) -> None:
    main, startup, loss = build("adam", dropout=True)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    rng = np.random.default_rng(1)
    batches = [feed(rng) for _ in range(16)]
    print(f"== {n} training steps (64-64-10 MLP, batch 16, Adam + global-norm clip, dropout) ==")
    print(f"{'steps':>9} {'RSS MiB':>9}")
    base = None
    t0 = time.perf_counter()
    for i in range(1, n + 1):
        exe.run(main, feed=batches[i % len(batches)], fetch_list=[loss], scope=scope)
        if i % every == 0 or i == n:
            gc.collect()
            rss = rss_mib()
            base = rss if base is None else base
            print(f"{i:>9} {rss:>9.1f}")
    print(f"growth after the first {every}: {rss_mib() - base:+.1f} MiB "
          f"({time.perf_counter() - t0:.1f} s)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--programs", type=int, default=1000)
    ap.add_argument("--steps", type=int, default=10000)
    args = ap.parse_args()
    print(f"start: RSS {rss_mib():.1f} MiB")
    every = max(1, args.programs // 10)
    built = distinct_programs(args.programs, every, run=False)
    ran = distinct_programs(args.programs, every)
    print(f"growth due to running (run minus baseline): {ran - built:+.1f} MiB")
    training_steps(args.steps, max(1, args.steps // 10))


if __name__ == "__main__":
    main()
