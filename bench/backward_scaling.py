"""Scaling of the backward pass and plan compilation with program size.

Builds an MLP of depth 10, 100, 1000, 5000 (``fc`` + relu per layer, width 4, mean loss), then
times ``append_backward`` and the compilation of the Executor plan for the full program (forward
+ backward, all parameter grads fetched). Prints the time per op at each depth; the cost must
grow linearly (the 5000-deep per-op figure within 2x of the 100-deep one).

Times are the process's CPU time (``time.process_time``), best of ``--repeat`` runs with the
garbage collector paused, so that other processes on a shared machine disturb them little.

    python bench/backward_scaling.py [--depths 10 100 1000 5000] [--repeat 3] [--check]

``--check`` exits with status 1 if the linearity criterion fails.
"""
from __future__ import annotations

import argparse
import gc
import sys
import time
from typing import Dict, List

import fluidlite as fluid
from fluidlite import layers
from fluidlite.backward import append_backward
from fluidlite.executor.plan import Plan


def build(depth: int, width: int = 4):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [None, width])
        h = x
        for _ in range(depth):
            h = layers.fc(h, width, act="relu")
        loss = layers.mean(h)
    return main, loss


def measure(depth: int, repeat: int) -> Dict[str, float]:
    best: Dict[str, float] = {}
    for _ in range(repeat):
        main, loss = build(depth)
        n_fwd = len(main.global_block().ops)
        gc.collect()
        gc.disable()
        try:
            t0 = time.process_time()
            with fluid.program_guard(main, fluid.Program()):
                params_grads = append_backward(loss)
            t1 = time.process_time()
            plan = Plan(main, 0, ["x"], [g.name for _, g in params_grads])
            t2 = time.process_time()
        finally:
            gc.enable()
        assert len(params_grads) == 2 * depth and plan.kernels
        n_all = len(main.global_block().ops)
        run = {"fwd_ops": n_fwd, "bwd_ops": n_all - n_fwd, "all_ops": n_all,
               "backward_s": t1 - t0, "plan_s": t2 - t1}
        for k, v in run.items():
            if k.endswith("_s"):
                best[k] = min(best.get(k, float("inf")), v)
            else:
                best[k] = v
    best["backward_us_per_op"] = 1e6 * best["backward_s"] / best["bwd_ops"]
    best["plan_us_per_op"] = 1e6 * best["plan_s"] / best["all_ops"]
    best["total_us_per_op"] = 1e6 * (best["backward_s"] + best["plan_s"]) / best["all_ops"]
    return best


def main(argv: List[str] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--depths", type=int, nargs="+", default=[10, 100, 1000, 5000])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args(argv)
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10000))
    rows = {}
    header = (f"{'depth':>6} {'fwd ops':>8} {'bwd ops':>8} {'backward ms':>12} "
              f"{'us/bwd op':>10} {'plan ms':>9} {'us/op':>7} {'total us/op':>12}")
    print(header)
    print("-" * len(header))
    for d in args.depths:
        r = rows[d] = measure(d, args.repeat)
        print(f"{d:>6} {r['fwd_ops']:>8} {r['bwd_ops']:>8} {1e3 * r['backward_s']:>12.1f} "
              f"{r['backward_us_per_op']:>10.1f} {1e3 * r['plan_s']:>9.1f} "
              f"{r['plan_us_per_op']:>7.1f} {r['total_us_per_op']:>12.1f}")
    ok = True
    if 100 in rows and max(rows) > 100:
        deepest = max(rows)
        ratio = rows[deepest]["total_us_per_op"] / rows[100]["total_us_per_op"]
        ok = ratio <= 2.0
        print(f"\nper-op cost, depth {deepest} vs 100: {ratio:.2f}x "
              f"({'linear: OK' if ok else 'NOT linear: > 2x'})")
    return 0 if ok or not args.check else 1


if __name__ == "__main__":
    sys.exit(main())
