"""Quick start: train a small classifier with a gradient clip attached, and look at it.

Builds an MLP for 4 classes of generated 2-D points (two interleaved spirals per pair of
classes), attaches ``GradientClipByGlobalNorm`` to a Momentum optimizer, and trains for a few
epochs with a progress bar. Every epoch prints loss, accuracy and the global gradient norm
before and after clipping. Writes:

* ``quick_start_program.html`` - the training program in the interactive viewer (open it in a
  browser: pan/zoom, search, click an op; the clip ops are the yellow hexagons);
* ``quick_start_curves.png`` - loss, accuracy and the gradient norm before/after the clip
  (needs matplotlib: ``pip install "fluidlite[plot]"``).

Run: python samples/quick_start.py [--epochs 8] [--clip-norm 1.0] [--out DIR]
(files go to --out, else $FLUIDLITE_SAMPLES_OUT, else ./samples_out)
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import Dict, List, Tuple

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import Progress, add_out_argument, out_dir as samples_out, plot_curves  # noqa: E402

import fluidlite as fluid  # noqa: E402
import fluidlite.viz as viz  # noqa: E402

CLASSES = 4


def spirals(n: int, seed: int) -> Tuple[np.ndarray, np.ndarray]:
    """``n`` points of 4 interleaved spiral arms in [-1, 1]^2 with labels 0..3."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, CLASSES, n)
    t = rng.uniform(0.15, 1.0, n)
    angle = 2 * np.pi * (y / CLASSES) + 5.5 * t
    x = np.stack([t * np.cos(angle), t * np.sin(angle)], 1) + rng.normal(0, 0.04, (n, 2))
    return x.astype(np.float32), y.astype(np.int64)[:, None]


def build(clip_norm: float, lr: float):
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 7
    with fluid.program_guard(main, startup):
        x = fluid.data(name="x", shape=[-1, 2], dtype="float32")
        label = fluid.data(name="label", shape=[-1, 1], dtype="int64")
        with fluid.name_scope("mlp"):
            h = fluid.layers.fc(input=x, size=64, act="relu")
            h = fluid.layers.fc(input=h, size=64, act="relu")
            logits = fluid.layers.fc(input=h, size=CLASSES)
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, label))
        acc = fluid.layers.accuracy(input=fluid.layers.softmax(logits), label=label)
        test_program = main.clone(for_test=True)
        clip = fluid.clip.GradientClipByGlobalNorm(clip_norm=clip_norm)
        optimizer = fluid.optimizer.Momentum(learning_rate=lr, momentum=0.9, grad_clip=clip)
        optimizer.minimize(loss)
    return main, startup, test_program, loss, acc, clip


def train(epochs: int = 8, clip_norm: float = 0.5, lr: float = 0.1, batch_size: int = 32,
          out_dir: str = ".", verbose: bool = True) -> Dict[str, List[float]]:
    main, startup, test_program, loss, acc, clip = build(clip_norm, lr)
    block = main.global_block()
    # the gradients the updates read are the clipped ones; the clip's global_norm is the norm
    # of the raw gradients
    clipped = [op.input("Grad")[0] for op in block.ops if op.type == "momentum"]
    fetch = [loss, acc, clip.global_norm] + clipped
    (xtr, ytr), (xte, yte) = spirals(2000, 0), spirals(500, 1)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    rng = np.random.default_rng(0)
    history: Dict[str, List[float]] = {"loss": [], "acc": [], "norm_before": [],
                                       "norm_after": [], "test_acc": []}
    n_batches = -(-len(xtr) // batch_size)
    for epoch in range(1, epochs + 1):
        order = rng.permutation(len(xtr))
        batches = (order[i:i + batch_size] for i in range(0, len(order), batch_size))
        bar = Progress(batches, n_batches, f"epoch {epoch}/{epochs}") if verbose \
            else batches
        first = len(history["loss"])
        for idx in bar:
            out = exe.run(main, feed={"x": xtr[idx], "label": ytr[idx]}, fetch_list=fetch)
            history["loss"].append(float(out[0][0]))
            history["acc"].append(float(out[1][0]))
            history["norm_before"].append(float(out[2][0]))
            history["norm_after"].append(float(np.sqrt(sum(float((g.astype(np.float64) ** 2)
                                                                 .sum()) for g in out[3:]))))
            if verbose:
                bar.set(loss=history["loss"][-1], acc=history["acc"][-1])
        test_acc, = exe.run(test_program, feed={"x": xte, "label": yte}, fetch_list=[acc])
        history["test_acc"].append(float(test_acc[0]))
        if verbose:
            ep = slice(first, None)
            print(f"  loss {np.mean(history['loss'][ep]):.4f}  "
                  f"train acc {np.mean(history['acc'][ep]):.3f}  "
                  f"test acc {history['test_acc'][-1]:.3f}  |  global grad norm: "
                  f"before clip mean {np.mean(history['norm_before'][ep]):.3f} "
                  f"max {np.max(history['norm_before'][ep]):.3f}, after clip max "
                  f"{np.max(history['norm_after'][ep]):.3f} (clip_norm {clip_norm:g})")
    os.makedirs(out_dir, exist_ok=True)
    html_path = viz.export(main, os.path.join(out_dir, "quick_start_program.html"),
                           title="quick start: MLP + GradientClipByGlobalNorm + Momentum")
    png = plot_curves(os.path.join(out_dir, "quick_start_curves.png"), history,
                      f"quick start: spirals, GradientClipByGlobalNorm(clip_norm={clip_norm:g})",
                      clip_norm=clip_norm)
    if verbose:
        print(f"interactive program view: {html_path}  (open it in a browser; press ? for keys)")
        if png:
            print(f"training curves: {png}")
    history["files"] = [html_path] + ([png] if png else [])      # type: ignore[list-item]
    return history


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=8)
    ap.add_argument("--clip-norm", type=float, default=0.5)
    ap.add_argument("--lr", type=float, default=0.1)
    add_out_argument(ap)
    args = ap.parse_args()
    train(args.epochs, args.clip_norm, args.lr, out_dir=samples_out(args.out))


if __name__ == "__main__":
    main()
