"""One training step of the book's LeNet-style digit network: fluidlite vs PyTorch eager.

Network (recognize_digits ``convolutional_neural_network``): conv5x5(20)+relu -> maxpool2 ->
batch_norm -> conv5x5(50)+relu -> maxpool2 -> fc(10, softmax) -> cross_entropy -> mean, Adam.
Batch 64 of 1x28x28 float32. Both frameworks run in this process, interleaved in short blocks
so that machine load affects them alike; prints the median and the best step time of each and
their ratios (target: fluidlite <= 2x PyTorch eager). PyTorch is optional; without it only
fluidlite runs.

    python bench/conv_step.py [--batch 64] [--repeat 40] [--threads N]
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import fluidlite as fluid


def build_fluid(batch: int):
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 1
    with fluid.program_guard(main, startup):
        img = fluid.data("img", [None, 1, 28, 28], "float32")
        label = fluid.data("label", [None, 1], "int64")
        c1 = fluid.nets.simple_img_conv_pool(img, num_filters=20, filter_size=5, pool_size=2,
                                             pool_stride=2, act="relu")
        c1 = fluid.layers.batch_norm(c1)
        c2 = fluid.nets.simple_img_conv_pool(c1, num_filters=50, filter_size=5, pool_size=2,
                                             pool_stride=2, act="relu")
        pred = fluid.layers.fc(c2, size=10, act="softmax")
        loss = fluid.layers.mean(fluid.layers.cross_entropy(pred, label))
        fluid.optimizer.Adam(learning_rate=0.001).minimize(loss)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    rng = np.random.default_rng(0)
    feed = {"img": rng.standard_normal((batch, 1, 28, 28)).astype("float32"),
            "label": rng.integers(0, 10, (batch, 1)).astype("int64")}

    def step() -> float:
        return float(exe.run(main, feed=feed, fetch_list=[loss], scope=scope)[0][0])
    return step


def build_torch(batch: int):
    try:
        import torch
    except ImportError:
        return None
    import torch.nn as nn
    import torch.nn.functional as F
    torch.manual_seed(0)

    class LeNet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.c1, self.bn = nn.Conv2d(1, 20, 5), nn.BatchNorm2d(20, momentum=0.1)
            self.c2, self.fc = nn.Conv2d(20, 50, 5), nn.Linear(800, 10)

        def forward(self, x):
            x = self.bn(F.max_pool2d(F.relu(self.c1(x)), 2, 2))
            x = F.max_pool2d(F.relu(self.c2(x)), 2, 2)
            return F.softmax(self.fc(x.flatten(1)), dim=1)

    net = LeNet()
    opt = torch.optim.Adam(net.parameters(), lr=0.001)
    rng = np.random.default_rng(0)
    x = torch.from_numpy(rng.standard_normal((batch, 1, 28, 28)).astype("float32"))
    y = torch.from_numpy(rng.integers(0, 10, (batch,)).astype("int64"))

    def step() -> float:
        opt.zero_grad()
        prob = net(x)
        loss = -torch.log(prob.gather(1, y[:, None])).mean()
        loss.backward()
        opt.step()
        return float(loss.detach())
    return step


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=40)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--block", type=int, default=5,
                    help="steps per framework before switching (BLAS / OpenMP worker threads "
                         "of one library spin for a while after it ran and slow the other)")
    ap.add_argument("--threads", type=int, default=0,
                    help="torch.set_num_threads (0: leave the default)")
    args = ap.parse_args()
    runners = {"fluidlite": build_fluid(args.batch)}
    torch_step = build_torch(args.batch)
    if torch_step is not None:
        if args.threads:
            import torch
            torch.set_num_threads(args.threads)
        runners["pytorch"] = torch_step
    times = {k: [] for k in runners}
    losses = {k: [] for k in runners}
    for _ in range(args.warmup):
        for k, f in runners.items():
            losses[k].append(f())
    for _ in range(-(-args.repeat // args.block)):
        for k, f in runners.items():
            f()                          # let the other library's worker threads go idle
            for _ in range(args.block):
                t0 = time.perf_counter()
                losses[k].append(f())
                times[k].append(time.perf_counter() - t0)
    med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
    best = {k: min(v) * 1e3 for k, v in times.items()}
    print(f"LeNet-style training step, batch {args.batch}x1x28x28, {args.repeat} steps "
          f"(interleaved in blocks of {args.block})")
    for k in runners:
        print(f"  {k:10s} median {med[k]:8.2f} ms/step   best {best[k]:8.2f} ms/step   "
              f"(loss {losses[k][0]:.3f} -> {losses[k][-1]:.3f})")
    if "pytorch" in med:
        print(f"  ratio fluidlite / pytorch = {med['fluidlite'] / med['pytorch']:.2f}x median, "
              f"{best['fluidlite'] / best['pytorch']:.2f}x best (target <= 2x)")
    else:
        print("  (PyTorch not installed: no ratio)")


if __name__ == "__main__":
    main()
