"""Dygraph training-step speed: fluidlite dygraph vs PyTorch eager vs fluidlite static.

Same model, data and weights as ``bench/mlp_step.py`` (configs A-D: MLP with ReLU, softmax
cross-entropy (mean), global-norm clipping 1.0, ``--optimizer`` sgd / adam / momentum). The
dygraph step is the fluid 1.8 idiom: ``Linear`` layers, ``loss.backward()``,
``opt.minimize(loss)`` with ``parameter_list`` and ``grad_clip``, ``clear_gradients()``. Loss
trajectories are checked against each other before timing; timings are interleaved, medians of
wall and thread-CPU ms/step are reported with the dygraph/torch and dygraph/static ratios.
``--rss-steps N`` also runs N dygraph steps and reports RSS at the start and end (flat = no
graph retained after backward). From the third step on the dygraph steps are replayed
(``fluidlite/dygraph/replay.py``); ``FLUIDLITE_STEP_REPLAY=0`` measures every op eagerly.

    python bench/dygraph_step.py -c A B C
    python bench/dygraph_step.py -c C --optimizer adam --rss-steps 10000
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

CONFIGS = {"A": ((784, 512, 512, 10), 128), "B": ((784, 512, 512, 10), 32),
           "C": ((64, 64, 10), 16), "D": ((784, 2048, 2048, 10), 256)}
CLIP = 1.0
LRS = {"sgd": 0.01, "momentum": 0.01, "adam": 1e-3}

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("-c", "--configs", nargs="+", default=["A", "B", "C"], choices=list(CONFIGS))
ap.add_argument("--optimizer", default="sgd", choices=list(LRS))
ap.add_argument("--threads", type=int, default=1)
ap.add_argument("--steps", type=int, default=0)
ap.add_argument("--rounds", type=int, default=3)
ap.add_argument("--rss-steps", type=int, default=0)
ARGS = ap.parse_args()
for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_v] = str(ARGS.threads)

import numpy as np  # noqa: E402

import fluidlite as fluid  # noqa: E402
from fluidlite import dygraph  # noqa: E402

OPT, LR = ARGS.optimizer, LRS[ARGS.optimizer]


from _mlp_common import init_weights, make_data  # noqa: E402,F401


def make_opt(**kw):
    clip = fluid.clip.GradientClipByGlobalNorm(CLIP)
    if OPT == "sgd":
        return fluid.optimizer.SGD(learning_rate=LR, grad_clip=clip, **kw)
    if OPT == "momentum":
        return fluid.optimizer.Momentum(learning_rate=LR, momentum=0.9, grad_clip=clip, **kw)
    return fluid.optimizer.Adam(learning_rate=LR, grad_clip=clip, **kw)


class DygraphMLP:
    def __init__(self, sizes, batch, ws, bs):
        dygraph.enable_dygraph()
        try:
            n = len(sizes) - 1
            self.layers = [dygraph.Linear(a, b, act="relu" if i < n - 1 else None)
                           for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:]))]
            for layer, w, b in zip(self.layers, ws, bs):
                layer.weight.set_value(w)
                layer.bias.set_value(b)
            self.params = [p for layer in self.layers for p in layer.parameters()]
            self.opt = make_opt(parameter_list=self.params)
        finally:
            dygraph.disable_dygraph()

    def step(self, x, label):
        dygraph.enable_dygraph()
        try:
            h = dygraph.to_variable(x)
            for layer in self.layers:
                h = layer(h)
            loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(
                h, dygraph.to_variable(label)))
            loss.backward()
            self.opt.minimize(loss)
            for p in self.params:
                p.clear_gradient()
            return float(loss)
        finally:
            dygraph.disable_dygraph()


class StaticMLP:
    def __init__(self, sizes, batch, ws, bs):
        main, startup = fluid.Program(), fluid.Program()
        with fluid.unique_name.guard(), fluid.program_guard(main, startup):
            x = fluid.data("x", [-1, sizes[0]], "float32")
            label = fluid.data("label", [-1, 1], "int64")
            h = x
            for i, n in enumerate(sizes[1:]):
                h = fluid.layers.fc(h, n, act="relu" if i < len(sizes) - 2 else None,
                                    param_attr=fluid.ParamAttr(name=f"w{i}"),
                                    bias_attr=fluid.ParamAttr(name=f"b{i}"))
            loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(h, label))
            make_opt().minimize(loss)
        self.main, self.loss = main, loss
        self.exe, self.scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
        self.exe.run(startup, scope=self.scope)
        for i, (w, b) in enumerate(zip(ws, bs)):
            self.scope.var(f"w{i}").get_tensor().set(w, fluid.CPUPlace())
            self.scope.var(f"b{i}").get_tensor().set(b, fluid.CPUPlace())

    def step(self, x, label):
        return float(self.exe.run(self.main, feed={"x": x, "label": label},
                                  fetch_list=[self.loss], scope=self.scope)[0][0])


class TorchMLP:
    def __init__(self, sizes, batch, ws, bs):
        import torch
        torch.set_num_threads(ARGS.threads)
        self.torch = torch
        self.params = [torch.tensor(a, requires_grad=True) for a in ws + bs]
        self.n = len(ws)
        self.opt = {"sgd": lambda: torch.optim.SGD(self.params, lr=LR),
                    "momentum": lambda: torch.optim.SGD(self.params, lr=LR, momentum=0.9),
                    "adam": lambda: torch.optim.Adam(self.params, lr=LR)}[OPT]()

    def step(self, x, label):
        torch, F = self.torch, self.torch.nn.functional
        h = torch.from_numpy(x)
        ws, bs = self.params[:self.n], self.params[self.n:]
        for i in range(self.n):
            h = h @ ws[i] + bs[i]
            if i < self.n - 1:
                h = F.relu(h)
        loss = F.cross_entropy(h, torch.from_numpy(label[:, 0]))
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.params, CLIP)
        self.opt.step()
        return float(loss.detach())


def rss_mib() -> float:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024.0


def run(name):
    sizes, batch = CONFIGS[name]
    ws, bs = init_weights(sizes)
    data = make_data(sizes, batch)
    impls = {"dygraph": DygraphMLP, "static": StaticMLP}
    try:
        import torch  # noqa: F401
        impls["torch"] = TorchMLP
    except ImportError:
        print("note: torch not importable; no PyTorch column")
    models = {k: cls(sizes, batch, ws, bs) for k, cls in impls.items()}
    traj = {k: [m.step(*data[i % 4]) for i in range(5)] for k, m in models.items()}
    for k, t in traj.items():
        if not np.allclose(t, traj["static"], rtol=2e-4, atol=2e-5):
            raise SystemExit(f"config {name}: {k} losses {t} != static {traj['static']}")
    t0 = time.perf_counter()
    models["dygraph"].step(*data[0])
    one = time.perf_counter() - t0
    steps = ARGS.steps or max(10, min(300, int(0.5 / max(one, 1e-5))))
    wall = {k: [] for k in models}
    cpu = {k: [] for k in models}
    for _ in range(ARGS.rounds):
        for start in range(0, steps, 10):
            for k, m in models.items():
                for i in range(start, min(start + 10, steps)):
                    t0, c0 = time.perf_counter(), time.thread_time()
                    m.step(*data[i % 4])
                    cpu[k].append(time.thread_time() - c0)
                    wall[k].append(time.perf_counter() - t0)
    med = {k: statistics.median(v) * 1e3 for k, v in wall.items()}
    mcpu = {k: statistics.median(v) * 1e3 for k, v in cpu.items()}
    t = med.get("torch")
    dy_t = f"{med['dygraph'] / t:.3f}" if t else "-"
    cpu_t = f"{mcpu['dygraph'] / mcpu['torch']:.3f}" if t else "-"
    t_ms = f"{t:.3f}" if t else "-"
    print(f"{name:<7}{med['dygraph']:>10.3f}{med['static']:>10.3f}{t_ms:>10}{dy_t:>12}"
          f"{cpu_t:>12}{med['dygraph'] / med['static']:>12.3f}", flush=True)
    if ARGS.rss_steps:
        m = models["dygraph"]
        for i in range(200):
            m.step(*data[i % 4])
        before = rss_mib()
        for i in range(ARGS.rss_steps):
            m.step(*data[i % 4])
        print(f"        RSS after 200 steps {before:.1f} MiB, after {ARGS.rss_steps} more "
              f"{rss_mib():.1f} MiB")


def main():
    print(f"threads={ARGS.threads}; optimizer={OPT} + global-norm clip {CLIP}; "
          f"numpy {np.__version__}; python {sys.version.split()[0]}")
    print(f"{'config':<7}{'dy ms':>10}{'static ms':>10}{'torch ms':>10}{'dy/torch':>12}"
          f"{'cpu dy/t':>12}{'dy/static':>12}")
    for name in ARGS.configs:
        run(name)


if __name__ == "__main__":
    main()
