"""The kernels that set the inference ratios of issue 30, each against PyTorch and a
hand-written NumPy version on the same arrays, in one run.

``bench/inference.py`` times whole models; this splits MobileNetV2's and BERT-mini's ratios
into the few kernels that make them, so that a gap can be told apart from what NumPy allows:

* ``gemm``        BERT-mini's FFN fc, [B*128, 256] x [256, 1024] + bias (fluidlite's ``fc``
                  kernel; hand-written: ``x @ w + b`` on two row halves);
* ``gelu``        fluid's exact GELU on [B*128, 1024] (``gelu`` op kernel; hand-written: one
                  ``np.exp`` pass over the array -- less than any accurate GELU needs);
* ``layer_norm``  [B*128, 256] rows (hand-written: mean, centre, variance, scale, shift);
* ``softmax``     attention scores [B, 4, 128, 128] (fluid's softmax kernel; hand-written:
                  max, subtract, exp, sum, divide);
* ``depthwise``   the 17 depthwise 3x3 layers of MobileNetV2 at 224x224 with their batch
                  norm and relu6, summed (``conv2d_fusion`` with the banded filters the
                  inference passes make; hand-written: the 9 taps as multiply-adds on a
                  zero-padded map, the bias, a clip; torch: conv2d, batch_norm, relu6).

float32, ``--threads`` threads for each: fluidlite's kernels as a compiled plan runs them
(``core.threads.using`` and ``hot``), PyTorch with ``set_num_threads``, the hand-written rows
as two halves on a ``ThreadPoolExecutor`` (BLAS on one thread each, as fluidlite holds it from
its first parallel call on). The engines run interleaved in blocks, each after ``--settle``
seconds of idle (the spinning threads of the engine before fall asleep) and as many seconds of
untimed calls (this one's wake). Printed are medians per call, the time per element (per
output pixel for ``depthwise``) and the ratios fluidlite / torch and NumPy / torch (> 1 =
slower than PyTorch). A report, never an assertion.

    python bench/op_floors.py                # batch 1 and 16
    python bench/op_floors.py --batch 16 --rounds 5
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Dict, List

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("--batch", type=int, nargs="+", default=[1, 16])
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--rounds", type=int, default=7, help="interleaved rounds (medians over them)")
ap.add_argument("--calls", type=int, default=5, help="calls per engine per round")
ap.add_argument("--settle", type=float, default=0.2, help="idle seconds before each block")
ARGS = ap.parse_args()
for _name in ("threads", "rounds", "calls"):
    if getattr(ARGS, _name) < 1:
        ap.error(f"--{_name} must be >= 1, got {getattr(ARGS, _name)}")
if ARGS.settle < 0 or any(b < 1 for b in ARGS.batch):
    ap.error(f"--settle must be >= 0 and every --batch >= 1, got {ARGS.settle} and "
             f"{ARGS.batch}")
for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_v] = str(ARGS.threads)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _blas  # noqa: E402

import numpy as np  # noqa: E402

import fluidlite.inference  # noqa: E402,F401  (registers conv2d_fusion)
from fluidlite.core import memory, threads  # noqa: E402
from fluidlite.core.registry import get_op_def  # noqa: E402
from fluidlite.ops import _conv_kernels as K  # noqa: E402
from fluidlite.ops.conv import _geom  # noqa: E402

# MobileNetV2's depthwise layers at 224x224: (channels, input size, stride, how many)
DEPTHWISE = [(32, 112, 1, 1), (96, 112, 2, 1), (144, 56, 1, 1), (144, 56, 2, 1),
             (192, 28, 1, 2), (192, 28, 2, 1), (384, 14, 1, 4), (576, 14, 1, 2),
             (576, 14, 2, 1), (960, 7, 1, 3)]
Runner = Callable[[], object]


POOL = ThreadPoolExecutor(max(1, ARGS.threads - 1))


def halves(fn: Callable[[int, int], None], n: int) -> None:
    """``fn(lo, hi)`` on two halves of ``range(n)``: one on the pool, one here."""
    if ARGS.threads < 2:
        fn(0, n)
        return
    job = POOL.submit(fn, n // 2, n)
    fn(0, n // 2)
    job.result()


def case_gemm(rng, b):
    x = rng.standard_normal((b * 128, 256)).astype(np.float32)
    w = (rng.standard_normal((256, 1024)) * 0.05).astype(np.float32)
    bias = rng.standard_normal(1024).astype(np.float32)
    fc = get_op_def("fc")

    out = np.empty((x.shape[0], 1024), np.float32)

    def rows(lo, hi):
        np.matmul(x[lo:hi], w, out=out[lo:hi])
        out[lo:hi] += bias

    def numpy():
        halves(rows, x.shape[0])
        return out
    return (x.shape[0] * 1024, lambda: fc.forward(x, w, bias)["Out"], numpy,
            lambda T: T.addmm(T.from_numpy(bias), T.from_numpy(x), T.from_numpy(w)))


def case_gelu(rng, b):
    x = rng.standard_normal((b * 128, 1024)).astype(np.float32)
    gelu, out = get_op_def("gelu"), np.empty_like(x)

    def numpy():
        halves(lambda lo, hi: np.exp(x[lo:hi], out=out[lo:hi]), x.shape[0])
        return out
    return (x.size, lambda: gelu.forward(x)["Out"], numpy,
            lambda T: T.nn.functional.gelu(T.from_numpy(x)))


def case_layer_norm(rng, b):
    x = rng.standard_normal((b * 128, 256)).astype(np.float32)
    s, t = rng.standard_normal(256).astype(np.float32), rng.standard_normal(256).astype(np.float32)
    ln, out = get_op_def("layer_norm"), np.empty_like(x)

    def rows(lo, hi):
        r = x[lo:hi]
        c = r - r.mean(axis=1, keepdims=True)
        c *= 1.0 / np.sqrt((c * c).mean(axis=1, keepdims=True) + np.float32(1e-5))
        c *= s
        np.add(c, t, out=out[lo:hi])

    def numpy():
        halves(rows, x.shape[0])
        return out
    return (x.size, lambda: ln.forward(x, s, t, epsilon=1e-5, begin_norm_axis=1)["Y"], numpy,
            lambda T: T.nn.functional.layer_norm(T.from_numpy(x), (256,), T.from_numpy(s),
                                                 T.from_numpy(t), 1e-5))


def case_softmax(rng, b):
    x = rng.standard_normal((b, 4, 128, 128)).astype(np.float32)
    sm, out = get_op_def("softmax"), np.empty_like(x)
    rows_in, rows_out = x.reshape(-1, 128), out.reshape(-1, 128)

    def rows(lo, hi):
        e = np.subtract(rows_in[lo:hi], rows_in[lo:hi].max(axis=1, keepdims=True),
                        out=rows_out[lo:hi])
        np.exp(e, out=e)
        e /= e.sum(axis=1, keepdims=True)

    def numpy():
        halves(rows, rows_in.shape[0])
        return out
    return (x.size, lambda: sm.forward(x, axis=-1)["Out"], numpy,
            lambda T: T.softmax(T.from_numpy(x), -1))


def case_depthwise(rng, b):
    """Each layer as the optimised inference program runs it: conv + bias + relu6 in one op
    (hand-written: the taps, the bias, a clip; torch: as ``bench/inference.py`` replays the
    saved model, conv2d, batch_norm, relu6)."""
    fusion = get_op_def("conv2d_fusion")
    layers, outputs = [], 0
    for c, h, s, times in DEPTHWISE:
        x = rng.standard_normal((b, c, h, h)).astype(np.float32)
        w = (rng.standard_normal((c, 1, 3, 3)) * 0.3).astype(np.float32)
        bias = rng.standard_normal(c).astype(np.float32)
        bn = [rng.uniform(0.5, 1.5, c).astype(np.float32) for _ in range(4)]
        g = _geom((h, h), (3, 3), (s, s), [1, 1], (1, 1), "EXPLICIT", c)
        band = K.band_filter(w, g) if K.uses_band(g, np.float32) else None
        layers.append((x, w, bias, g, band, s, times, bn))
        outputs += b * c * g.oh * g.ow * times

    def ours():
        for x, w, bias, g, band, s, times, _ in layers:
            for _ in range(times):
                fusion.forward(x, w, bias, None, band, strides=[s, s], paddings=[1, 1],
                               groups=x.shape[1], activation="relu6")

    def taps(x, w, bias, g, out, lo, hi):
        pad = np.zeros((x.shape[0], hi - lo, g.Hp, g.Wp), np.float32)
        pad[:, :, 1:1 + g.H, 1:1 + g.W] = x[:, lo:hi]
        acc, tmp = out[:, lo:hi], np.empty_like(out[:, lo:hi])
        for k in range(9):
            i, j = divmod(k, 3)
            v = pad[:, :, i:i + g.sh * (g.oh - 1) + 1:g.sh, j:j + g.sw * (g.ow - 1) + 1:g.sw]
            np.multiply(v, w[lo:hi, 0, i, j, None, None], out=acc if k == 0 else tmp)
            if k:
                acc += tmp
        acc += bias[lo:hi, None, None]
        np.clip(acc, np.float32(0), np.float32(6), out=acc)

    def numpy():
        for x, w, bias, g, _, s, times, _ in layers:
            out = np.empty((x.shape[0], x.shape[1], g.oh, g.ow), np.float32)
            for _ in range(times):
                halves(lambda lo, hi: taps(x, w, bias, g, out, lo, hi), x.shape[1])

    def torch(T):
        F = T.nn.functional
        for x, w, _, g, _, s, times, bn in layers:
            xt, wt = T.from_numpy(x), T.from_numpy(w)
            mean, var, scale, shift = (T.from_numpy(v) for v in bn)
            for _ in range(times):
                y = F.conv2d(xt, wt, None, s, 1, 1, x.shape[1])
                F.relu6(F.batch_norm(y, mean, var, scale, shift, False, 0.0, 1e-5))
    return outputs, ours, numpy, torch


CASES = {"gemm": case_gemm, "gelu": case_gelu, "layer_norm": case_layer_norm,
         "softmax": case_softmax, "depthwise": case_depthwise}


def interleave(runners: Dict[str, Runner]) -> Dict[str, float]:
    """Median seconds per call of each runner, over ``--rounds`` rounds of ``--calls``."""
    for run in runners.values():
        run()                                               # warm: caches, pages, threads
    per: Dict[str, List[float]] = {k: [] for k in runners}
    for _ in range(ARGS.rounds):
        for k, run in runners.items():
            time.sleep(ARGS.settle)
            t = time.perf_counter()
            run()
            while time.perf_counter() - t < ARGS.settle:    # wake the engine's threads
                run()
            t = time.perf_counter()
            for _ in range(ARGS.calls):
                run()
            per[k].append((time.perf_counter() - t) / ARGS.calls)
    return {k: statistics.median(v) for k, v in per.items()}


def main() -> None:
    # what the first Executor of any fluidlite process does (``core/memory.py``), here for
    # every engine alike: freed buffers stay in the heap, so no engine pays fresh pages for
    # its outputs (PyTorch's depthwise layers of MobileNetV2 at batch 16 took 6x their time
    # faulting in 25 MB outputs without it -- as in ``bench/inference.py``'s process, where
    # the predictors are made first)
    memory.tune_malloc()
    try:
        import torch as T
        T.set_num_threads(ARGS.threads)
    except ImportError:
        T = None
    print(f"NumPy {np.__version__}, OpenBLAS {_blas.describe()}, {ARGS.threads} threads; "
          f"medians of {ARGS.rounds} interleaved rounds; ratios > 1 = slower than PyTorch")
    print(f"{'kernel':<11} {'batch':>5} {'fluidlite':>10} {'numpy':>9} {'torch':>9}  "
          f"{'ns/elem fl':>10} {'torch':>6}  {'fl/torch':>8} {'np/torch':>8}")
    rng = np.random.default_rng(0)
    for b in ARGS.batch:
        for name, make in CASES.items():
            size, ours, numpy, torch = make(rng, b)

            def fluidlite(f=ours):
                with threads.using(ARGS.threads), threads.hot():
                    return f()
            runners = {"fluidlite": fluidlite, "numpy": numpy}
            if T is not None:
                runners["torch"] = (lambda f: lambda: f(T))(torch)
                with T.inference_mode():
                    med = interleave(runners)
            else:
                med = interleave(runners)
            tt = med.get("torch")
            cells = [f"{med[k] * 1e3:9.3f}" for k in ("fluidlite", "numpy")]
            cells.append(f"{tt * 1e3:9.3f}" if tt else f"{'-':>9}")
            per = [f"{med['fluidlite'] / size * 1e9:10.2f}",
                   f"{tt / size * 1e9:6.2f}" if tt else f"{'-':>6}"]
            ratios = [f"{med[k] / tt:8.2f}" if tt else f"{'-':>8}"
                      for k in ("fluidlite", "numpy")]
            print(f"{name:<11} {b:>5} {cells[0]:>10} {cells[1]} {cells[2]}  "
                  f"{per[0]} {per[1]}  {ratios[0]} {ratios[1]}")


if __name__ == "__main__":
    main()
