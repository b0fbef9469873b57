"""Training-step speed: fluidlite vs hand-written NumPy vs PyTorch eager, in one process.

Model: MLP with ReLU, softmax cross-entropy (mean), global-norm gradient clipping (1.0) and an
optimizer chosen with ``--optimizer``: ``sgd`` (lr 0.01), ``momentum`` (lr 0.01, mu 0.9, fluid's
``Momentum`` = PyTorch's ``SGD(momentum=)``) or ``adam`` (lr 1e-3, betas 0.9/0.999, eps 1e-8).
All implementations start from the same weights and data; the loss trajectories are checked to
agree (float32 tolerance) before timing. The PyTorch column uses ``clip_grad_norm_`` and, for
momentum and adam, ``torch.optim`` with its default implementation (for sgd a plain ``p.add_``).
The NumPy reference accumulates the global norm as NumPy users write it (float32 ``vdot`` per
gradient, summed as Python floats); fluidlite accumulates it in float64 (overflow-safe).
Runs are warmed up and interleaved; the report gives median ms/step (wall clock), the
fluidlite/NumPy and fluidlite/PyTorch ratios, the same two ratios of median thread CPU time
(robust when a VM steals cycles), and (``--rss``) the peak RSS of each implementation measured
in its own subprocess.

    python bench/mlp_step.py                 # all configs, 1 thread
    python bench/mlp_step.py -c A D --threads 2 --rounds 5 --rss
    python bench/mlp_step.py --optimizer adam -c A B D
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

CONFIGS = {   # name: (layer sizes, batch)
    "A": ((784, 512, 512, 10), 128),
    "B": ((784, 512, 512, 10), 32),
    "C": ((64, 64, 10), 16),
    "D": ((784, 2048, 2048, 10), 256),
}
CLIP = 1.0
LRS = {"sgd": 0.01, "momentum": 0.01, "adam": 1e-3}
MU = 0.9                                   # momentum
BETA1, BETA2, EPS = 0.9, 0.999, 1e-8        # adam


def parse() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-c", "--configs", nargs="+", default=list(CONFIGS), choices=list(CONFIGS))
    ap.add_argument("--optimizer", default="sgd", choices=["sgd", "momentum", "adam"])
    ap.add_argument("--threads", type=int, default=1, help="BLAS / torch threads")
    ap.add_argument("--steps", type=int, default=0, help="timed steps per round (0: auto)")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved timing rounds")
    ap.add_argument("--rss", action="store_true", help="measure peak RSS per implementation")
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--child", nargs=2, metavar=("IMPL", "CONFIG"), help=argparse.SUPPRESS)
    return ap.parse_args()


ARGS = parse()
OPT = ARGS.optimizer
LR = LRS[OPT]
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = str(ARGS.threads)   # before numpy is imported

import numpy as np  # noqa: E402


from _mlp_common import init_weights, make_data  # noqa: E402,F401


# -- (b) hand-written NumPy: preallocated buffers, in-place updates ---------------------------
class NumpyMLP:
    def __init__(self, sizes, batch, ws, bs):
        self.ws = [w.copy() for w in ws]
        self.bs = [b.copy() for b in bs]
        self.acts = [np.empty((batch, n), np.float32) for n in sizes[1:]]
        self.dacts = [np.empty((batch, n), np.float32) for n in sizes[1:]]
        self.dws = [np.empty_like(w) for w in ws]
        self.dbs = [np.empty_like(b) for b in bs]
        self.rows = np.arange(batch)
        params = self.ws + self.bs
        self.tmps = [np.empty_like(p) for p in params]
        self.vel = [np.zeros_like(p) for p in params]          # momentum / adam moment 1
        self.m2 = [np.zeros_like(p) for p in params]           # adam moment 2
        self.t = 0

    def step(self, x, label):
        ws, bs, acts, dacts = self.ws, self.bs, self.acts, self.dacts
        n_layers = len(ws)
        h = x
        for i in range(n_layers):                       # forward
            np.matmul(h, ws[i], out=acts[i])
            acts[i] += bs[i]
            if i < n_layers - 1:
                np.maximum(acts[i], 0, out=acts[i])
            h = acts[i]
        logits = acts[-1]                               # softmax cross-entropy, mean
        logits -= logits.max(axis=1, keepdims=True)
        np.exp(logits, out=logits)
        logits /= logits.sum(axis=1, keepdims=True)
        lab = label[:, 0]
        loss = -np.log(logits[self.rows, lab]).mean()
        d = dacts[-1]                                   # backward
        np.copyto(d, logits)
        d[self.rows, lab] -= 1.0
        d *= np.float32(1.0 / x.shape[0])
        for i in range(n_layers - 1, -1, -1):
            prev = acts[i - 1] if i > 0 else x
            np.matmul(prev.T, d, out=self.dws[i])
            d.sum(axis=0, out=self.dbs[i])
            if i > 0:
                np.matmul(d, ws[i].T, out=dacts[i - 1])
                dacts[i - 1] *= acts[i - 1] > 0
                d = dacts[i - 1]
        self.update(ws + bs, self.dws + self.dbs)
        return float(loss)

    def update(self, params, grads):
        """Global-norm clip (float32 vdot per gradient, summed as Python floats) + the optimizer,
        in place."""
        norm = np.sqrt(sum(float(np.vdot(g, g)) for g in grads))
        clip = CLIP / max(norm, CLIP)
        if OPT == "sgd":
            scale = np.float32(-LR * clip)
            for p, g in zip(params, grads):
                g *= scale
                p += g
            return
        scale = np.float32(clip)
        if OPT == "momentum":           # v = mu * v + g;  p -= lr * v
            for p, g, v, tmp in zip(params, grads, self.vel, self.tmps):
                g *= scale
                v *= np.float32(MU)
                v += g
                np.multiply(v, np.float32(LR), out=tmp)
                p -= tmp
            return
        self.t += 1                     # adam (fluid's formula = torch's, rearranged)
        c2 = np.sqrt(1.0 - BETA2 ** self.t)
        lr_t = np.float32(LR * c2 / (1.0 - BETA1 ** self.t))
        eps_t = np.float32(EPS * c2)
        for p, g, m1, m2, tmp in zip(params, grads, self.vel, self.m2, self.tmps):
            g *= scale
            m1 *= np.float32(BETA1)
            np.multiply(g, np.float32(1.0 - BETA1), out=tmp)
            m1 += tmp
            m2 *= np.float32(BETA2)
            np.multiply(g, g, out=tmp)
            tmp *= np.float32(1.0 - BETA2)
            m2 += tmp
            np.sqrt(m2, out=tmp)
            tmp += eps_t
            np.divide(m1, tmp, out=tmp)
            tmp *= lr_t
            p -= tmp


# -- (c) PyTorch eager ------------------------------------------------------------------------
class TorchMLP:
    def __init__(self, sizes, batch, ws, bs):
        import torch
        torch.set_num_threads(ARGS.threads)
        self.torch = torch
        self.params = [torch.tensor(a, requires_grad=True) for a in ws + bs]
        self.n = len(ws)
        self.opt = None
        if OPT == "momentum":
            self.opt = torch.optim.SGD(self.params, lr=LR, momentum=MU)
        elif OPT == "adam":
            self.opt = torch.optim.Adam(self.params, lr=LR, betas=(BETA1, BETA2), eps=EPS)

    def step(self, x, label):
        torch = self.torch
        F = torch.nn.functional
        h = torch.from_numpy(x)
        ws, bs = self.params[:self.n], self.params[self.n:]
        for i in range(self.n):
            h = h @ ws[i] + bs[i]
            if i < self.n - 1:
                h = F.relu(h)
        loss = F.cross_entropy(h, torch.from_numpy(label[:, 0]))
        for p in self.params:
            p.grad = None
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.params, CLIP)
        if self.opt is not None:
            self.opt.step()
        else:
            with torch.no_grad():
                for p in self.params:
                    p.add_(p.grad, alpha=-LR)
        return float(loss.detach())


# -- (a) fluidlite through Executor.run --------------------------------------------------------
class FluidMLP:
    def __init__(self, sizes, batch, ws, bs):
        import fluidlite as fluid
        self.fluid = fluid
        main, startup = fluid.Program(), fluid.Program()
        with fluid.unique_name.guard(), fluid.program_guard(main, startup):
            x = fluid.data("x", [-1, sizes[0]], "float32")
            label = fluid.data("label", [-1, 1], "int64")
            h = x
            for i, n in enumerate(sizes[1:]):
                act = "relu" if i < len(sizes) - 2 else None
                h = fluid.layers.fc(h, n, act=act,
                                    param_attr=fluid.ParamAttr(name=f"w{i}"),
                                    bias_attr=fluid.ParamAttr(name=f"b{i}"))
            loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(h, label))
            clip = fluid.clip.GradientClipByGlobalNorm(CLIP)
            if OPT == "sgd":
                opt = fluid.optimizer.SGD(learning_rate=LR, grad_clip=clip)
            elif OPT == "momentum":
                opt = fluid.optimizer.Momentum(learning_rate=LR, momentum=MU, grad_clip=clip)
            else:
                opt = fluid.optimizer.Adam(learning_rate=LR, beta1=BETA1, beta2=BETA2,
                                           epsilon=EPS, grad_clip=clip)
            opt.minimize(loss)
        self.main, self.loss = main, loss
        self.exe = fluid.Executor(fluid.CPUPlace())
        self.scope = fluid.Scope()
        self.exe.run(startup, scope=self.scope)
        for i, (w, b) in enumerate(zip(ws, bs)):
            self.scope.var(f"w{i}").get_tensor().set(w, fluid.CPUPlace())
            self.scope.var(f"b{i}").get_tensor().set(b, fluid.CPUPlace())

    def step(self, x, label):
        out = self.exe.run(self.main, feed={"x": x, "label": label}, fetch_list=[self.loss],
                           scope=self.scope)
        return float(out[0][0])


IMPLS = {"fluidlite": FluidMLP, "numpy": NumpyMLP, "torch": TorchMLP}


def torch_available() -> bool:
    if ARGS.no_torch:
        return False
    try:
        import torch  # noqa: F401
        return True
    except ImportError:
        return False


def peak_rss_child(impl: str, config: str) -> None:
    import resource
    sizes, batch = CONFIGS[config]
    ws, bs = init_weights(sizes)
    data = make_data(sizes, batch)
    model = IMPLS[impl](sizes, batch, ws, bs)
    del ws, bs
    for i in range(20):
        model.step(*data[i % len(data)])
    # VmHWM is this process image's own peak; ru_maxrss can report the parent's peak after exec
    try:
        with open("/proc/self/status") as f:
            kib = next(int(l.split()[1]) for l in f if l.startswith("VmHWM:"))
    except (OSError, StopIteration):
        kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(kib / 1024.0)   # MiB


def measure_rss(impl: str, config: str) -> float:
    cmd = [sys.executable, __file__, "--child", impl, config, "--threads", str(ARGS.threads),
           "--optimizer", OPT]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return float(out.strip().splitlines()[-1])


def run_config(name: str, impls) -> dict:
    sizes, batch = CONFIGS[name]
    ws, bs = init_weights(sizes)
    data = make_data(sizes, batch)
    models = {k: IMPLS[k](sizes, batch, ws, bs) for k in impls}
    # same loss trajectory from the same weights (checked on fresh copies of the models)
    traj = {k: [m.step(*data[i % len(data)]) for i in range(5)] for k, m in models.items()}
    ref = np.array(traj["numpy"])
    for k, t in traj.items():
        if not np.allclose(t, ref, rtol=2e-4, atol=2e-5):
            raise SystemExit(f"config {name}: {k} loss trajectory {t} != numpy {list(ref)}")
    steps = ARGS.steps or max(5, min(200, int(0.4 / max(estimate(models['numpy'], data), 1e-5))))
    for m in models.values():     # warm-up
        for i in range(3):
            m.step(*data[i % len(data)])
    wall = {k: [] for k in models}
    cpu = {k: [] for k in models}     # thread CPU time: immune to the VM stealing cycles
    block = 10     # alternate implementations every few steps: drift hits all alike
    for _ in range(ARGS.rounds):
        for start in range(0, steps, block):
            for k, m in models.items():
                for i in range(start, min(start + block, steps)):
                    t0, c0 = time.perf_counter(), time.thread_time()
                    m.step(*data[i % len(data)])
                    cpu[k].append(time.thread_time() - c0)
                    wall[k].append(time.perf_counter() - t0)
    med = {k: statistics.median(v) * 1e3 for k, v in wall.items()}
    med_cpu = {k: statistics.median(v) * 1e3 for k, v in cpu.items()}
    return {"config": name, "median_ms": med, "median_cpu_ms": med_cpu, "losses": traj,
            "steps": steps}


def estimate(model, data) -> float:
    t0 = time.perf_counter()
    model.step(*data[0])
    return time.perf_counter() - t0


def main() -> None:
    if ARGS.child:
        peak_rss_child(*ARGS.child)
        return
    impls = ["fluidlite", "numpy"] + (["torch"] if torch_available() else [])
    if "torch" not in impls:
        print("note: PyTorch not importable; skipping the PyTorch column "
              "(pip install torch==2.13.0 to add it)")
    import platform
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                if l.startswith("model name")), platform.processor()) \
        if os.path.exists("/proc/cpuinfo") else platform.processor()
    print(f"CPU: {cpu}, {os.cpu_count()} cores; threads={ARGS.threads}; numpy {np.__version__}; "
          f"optimizer={OPT} + global-norm clip")
    header = f"{'config':<7}{'numpy ms':>10}{'fluid ms':>10}{'torch ms':>10}" \
             f"{'fluid/np':>10}{'fluid/torch':>12}{'cpu f/np':>10}{'cpu f/torch':>12}"
    if ARGS.rss:
        header += f"{'rss np MiB':>12}{'rss fluid':>11}{'fluid/np':>10}"
    print(header)
    for name in ARGS.configs:
        r = run_config(name, impls)
        m = r["median_ms"]
        t = m.get("torch")
        t_txt = f"{t:.3f}" if t else "-"
        ratio_t = f"{m['fluidlite'] / t:.3f}" if t else "-"
        c = r["median_cpu_ms"]
        cpu_t = f"{c['fluidlite'] / c['torch']:.3f}" if "torch" in c else "-"
        line = (f"{name:<7}{m['numpy']:>10.3f}{m['fluidlite']:>10.3f}{t_txt:>10}"
                f"{m['fluidlite'] / m['numpy']:>10.3f}{ratio_t:>12}"
                f"{c['fluidlite'] / c['numpy']:>10.3f}{cpu_t:>12}")
        if ARGS.rss:
            rn, rf = measure_rss("numpy", name), measure_rss("fluidlite", name)
            line += f"{rn:>12.1f}{rf:>11.1f}{rf / rn:>10.3f}"
        print(line, flush=True)


if __name__ == "__main__":
    main()
