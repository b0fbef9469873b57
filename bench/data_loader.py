"""Data pipeline benchmarks: DataLoader overlap, and sequence_pool against ``np.add.reduceat``.

1. **Overlap.** A batch generator that spends ``t_data`` per batch (``time.sleep``: reading and
   decoding, which releases the GIL) feeds a training step that computes for ``t_step`` (an MLP
   sized to take about that long). Measured: the plain loop (prepare, then run: about
   ``t_data + t_step`` per batch) and the same epoch through ``DataLoader.from_generator``
   (capacity 4), whose background thread prepares the next batch during the step. Reports the
   overlap ratio ``epoch / max(total t_data, total t_step)``, both as measured inside the plain
   loop (1.0 = perfect overlap; the plain loop is about 2.0 when they are equal), and the
   speed-up over the plain loop.
2. **sequence_pool.** ``sequence_pool(x, "sum")`` over 10k sequences (lengths 1..20, width 32)
   through ``Executor.run`` vs a hand-written ``np.add.reduceat`` on the same data (median of
   interleaved runs; target: within 3x).

    python bench/data_loader.py [--batches 40] [--t-data SECONDS] [--seqs 10000]
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import fluidlite as fluid


def _mlp(width: int):
    main, start = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, start):
        x = fluid.data("x", [-1, width], "float32")
        y = fluid.data("y", [-1, 1], "int64")
        h = fluid.layers.fc(x, width, act="relu")
        h = fluid.layers.fc(h, width, act="relu")
        loss = fluid.layers.mean(fluid.layers.cross_entropy(fluid.layers.fc(h, 10, act="softmax"),
                                                            y))
        fluid.optimizer.SGD(0.01).minimize(loss)
    return main, start, x, y, loss


def overlap(batches: int, t_data: "float | None") -> None:
    width, bs = 256, 128
    main, start, x, y, loss = _mlp(width)
    exe = fluid.Executor()
    exe.run(start)
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((bs, width)).astype("float32")
    ys = rng.integers(0, 10, (bs, 1)).astype("int64")

    def gen():
        for _ in range(batches):
            time.sleep(t_data)
            yield xs, ys

    for _ in range(3):
        exe.run(main, feed={"x": xs, "y": ys}, fetch_list=[loss])
    t0 = time.perf_counter()
    for _ in range(10):
        exe.run(main, feed={"x": xs, "y": ys}, fetch_list=[loss])
    t_step = (time.perf_counter() - t0) / 10
    t_data = t_step if t_data is None else t_data      # default: as long as the step

    t0 = time.perf_counter()
    in_step = 0.0
    for bx, by in gen():
        t1 = time.perf_counter()
        exe.run(main, feed={"x": bx, "y": by}, fetch_list=[loss])
        in_step += time.perf_counter() - t1
    plain = time.perf_counter() - t0

    loader = fluid.io.DataLoader.from_generator(feed_list=[x, y], capacity=4)
    loader.set_batch_generator(gen)
    t0 = time.perf_counter()
    for data in loader():
        exe.run(main, feed=data, fetch_list=[loss])
    piped = time.perf_counter() - t0
    # the ideal uses the times measured inside the plain loop: a step right after a sleep is
    # slower than one in a tight loop (cold caches, sleeping BLAS threads)
    ideal = max(plain - in_step, in_step)
    print(f"t_data {t_data * 1e3:.1f} ms (sleep), t_step {t_step * 1e3:.1f} ms (tight loop), "
          f"{batches} batches")
    print(f"  plain loop   {plain:.3f} s  ({plain / batches * 1e3:.1f} ms/batch; in the step "
          f"{in_step / batches * 1e3:.1f} ms, in the generator "
          f"{(plain - in_step) / batches * 1e3:.1f} ms)")
    print(f"  DataLoader   {piped:.3f} s  ({piped / batches * 1e3:.1f} ms/batch)")
    print(f"  overlap ratio {piped / ideal:.2f} (1.0 = max(t_data, t_step) per batch, plain "
          f"loop {plain / ideal:.2f}), "
          f"speed-up over the plain loop {plain / piped:.2f}x")


def seq_pool(n_seqs: int, repeat: int) -> None:
    rng = np.random.default_rng(0)
    lens = rng.integers(1, 21, n_seqs)
    x = rng.standard_normal((int(lens.sum()), 32)).astype("float32")
    t = fluid.create_lod_tensor(x, [lens.tolist()], None)
    main, start = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, start):
        v = fluid.data("x", [-1, 32], "float32", lod_level=1)
        out = fluid.layers.sequence_pool(v, "sum")
    exe = fluid.Executor()
    offsets = np.concatenate([[0], np.cumsum(lens)[:-1]])
    got = exe.run(main, feed={"x": t}, fetch_list=[out])[0]
    np.testing.assert_allclose(got, np.add.reduceat(x, offsets, axis=0), rtol=1e-5)
    fl, ref = [], []
    for _ in range(repeat):
        t0 = time.perf_counter()
        exe.run(main, feed={"x": t}, fetch_list=[out])
        fl.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        np.add.reduceat(x, offsets, axis=0)
        ref.append(time.perf_counter() - t0)
    a, b = statistics.median(fl), statistics.median(ref)
    print(f"sequence_pool sum, {n_seqs} sequences ({x.shape[0]} rows x 32): fluidlite "
          f"{a * 1e3:.2f} ms, np.add.reduceat {b * 1e3:.2f} ms, ratio {a / b:.2f}x")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", type=int, default=40)
    ap.add_argument("--t-data", type=float, default=None,
                    help="seconds per batch in the generator (default: the measured t_step)")
    ap.add_argument("--seqs", type=int, default=10000)
    ap.add_argument("--repeat", type=int, default=30)
    args = ap.parse_args()
    overlap(args.batches, args.t_data)
    seq_pool(args.seqs, args.repeat)


if __name__ == "__main__":
    main()
