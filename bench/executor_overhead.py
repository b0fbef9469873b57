"""Executor overhead: a 1000-op chain of small ops through ``Executor.run`` vs hand-written NumPy.

Builds ``x -> (elementwise_add b_i -> relu) x 500`` on [16, 64] float32, runs it with the plan
cached, and runs the same NumPy calls written by hand, interleaved, in one process. Prints the
median time per step of each and the ratio (target: <= 1.5x, i.e. ~1 us framework cost per op).

    python bench/executor_overhead.py [--ops 1000] [--repeat 30]
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import fluidlite as fluid


def build(n_ops: int, shape=(16, 64)):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", list(shape), "float32")
        h = x
        for i in range(n_ops // 2):
            b = fluid.layers.create_global_var(shape=list(shape), value=0.01 * (i % 7),
                                               dtype="float32", persistable=True,
                                               name=f"b{i}")
            h = fluid.layers.relu(fluid.layers.elementwise_add(h, b))
    return main, startup, h


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=30)
    args = ap.parse_args()
    shape = (16, 64)
    main_prog, startup, out = build(args.ops, shape)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    xv = np.random.default_rng(0).normal(size=shape).astype("float32")
    bs = [np.asarray(scope.find_var(f"b{i}").get_tensor()) for i in range(args.ops // 2)]

    def hand():
        h = xv
        for b in bs:
            h = np.maximum(np.add(h, b), 0)
        return h

    def framework():
        return exe.run(main_prog, feed={"x": xv}, fetch_list=[out], scope=scope)[0]

    np.testing.assert_allclose(framework(), hand(), rtol=1e-6)
    t_fw, t_np = [], []
    for _ in range(args.repeat):      # interleaved so both see the same machine state
        t0 = time.perf_counter(); framework(); t_fw.append(time.perf_counter() - t0)
        t0 = time.perf_counter(); hand(); t_np.append(time.perf_counter() - t0)
    fw, hn = statistics.median(t_fw), statistics.median(t_np)
    n = len(main_prog.global_block().ops)
    print(f"ops in program:      {n}")
    print(f"hand-written NumPy:  {hn * 1e3:8.3f} ms/step  ({hn / n * 1e6:.2f} us/op)")
    print(f"fluidlite Executor:  {fw * 1e3:8.3f} ms/step  ({fw / n * 1e6:.2f} us/op)")
    print(f"framework cost/op:   {(fw - hn) / n * 1e6:8.3f} us")
    print(f"ratio fluidlite/NumPy: {fw / hn:.3f}  (target <= 1.5)")


if __name__ == "__main__":
    main()
