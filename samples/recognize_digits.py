"""Recognize digits with the PaddlePaddle book's LeNet-style network, written as fluid 1.x code.

Data: scikit-learn's bundled 8x8 digit images (no download) scaled up to 28x28 when scikit-learn
is installed; otherwise generated digit-like images (seven-segment strokes with random
position, size, slant, thickness and noise). Trains with Adam, prints a progress bar and the
test accuracy after every epoch, then saves an inference model and reloads it to classify a
few test images. Writes the training curves (loss, train/test accuracy) to
``recognize_digits_curves.png`` beside the saved model (needs matplotlib:
``pip install "fluidlite[plot]"``).

Run: python samples/recognize_digits.py [--epochs 5] [--data auto|sklearn|generated] [--out DIR]
                                        [--save-dir DIR] [--curves FILE.png]
(files go to --out, else $FLUIDLITE_SAMPLES_OUT, else ./samples_out)
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Iterator, Tuple

import numpy as np

import fluidlite as fluid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import add_out_argument, out_dir, plot_curves  # noqa: E402

Arrays = Tuple[np.ndarray, np.ndarray]


# -- data ---------------------------------------------------------------------------------------
def sklearn_digits(seed: int = 0) -> Tuple[Arrays, Arrays]:
    """scikit-learn's 1797 8x8 digits, each pixel tripled to 24x24 and padded to 28x28."""
    from sklearn.datasets import load_digits   # bundled with scikit-learn, no download
    d = load_digits()
    imgs = np.kron(d.images.astype(np.float32) / 16.0, np.ones((3, 3), np.float32))
    imgs = np.pad(imgs, ((0, 0), (2, 2), (2, 2)))[:, None] * 2.0 - 1.0
    labels = d.target.astype(np.int64)[:, None]
    order = np.random.default_rng(seed).permutation(len(imgs))
    imgs, labels = imgs[order], labels[order]
    cut = int(0.8 * len(imgs))
    return (imgs[:cut], labels[:cut]), (imgs[cut:], labels[cut:])


_SEGMENTS = {"a": (0.0, 0.0, 0.0, 1.0), "b": (0.0, 1.0, 0.5, 1.0), "c": (0.5, 1.0, 1.0, 1.0),
             "d": (1.0, 0.0, 1.0, 1.0), "e": (0.5, 0.0, 1.0, 0.0), "f": (0.0, 0.0, 0.5, 0.0),
             "g": (0.5, 0.0, 0.5, 1.0)}
_DIGITS = ["abcdef", "bc", "abged", "abgcd", "fgbc", "afgcd", "afgedc", "abc", "abcdefg",
           "abcdfg"]


def generated_digits(n: int, seed: int) -> Arrays:
    """``n`` 28x28 seven-segment digits in [-1, 1] with labels."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 10, n)
    yy, xx = np.mgrid[0:28, 0:28].astype(np.float32)
    imgs = np.zeros((n, 28, 28), np.float32)
    for k, lab in enumerate(labels):
        h, w = rng.uniform(14, 20), rng.uniform(8, 13)
        top, left = rng.uniform(3, 25 - h), rng.uniform(4, 24 - w)
        slant, thick = rng.uniform(-0.25, 0.25), rng.uniform(0.9, 1.6)
        for s in _DIGITS[lab]:
            y0, x0, y1, x1 = _SEGMENTS[s]
            p0 = np.array([top + y0 * h, left + x0 * w + slant * (0.5 - y0) * h])
            p1 = np.array([top + y1 * h, left + x1 * w + slant * (0.5 - y1) * h])
            d = p1 - p0
            t = np.clip(((yy - p0[0]) * d[0] + (xx - p0[1]) * d[1]) / (d @ d), 0, 1)
            dist = np.hypot(yy - p0[0] - t * d[0], xx - p0[1] - t * d[1])
            imgs[k] = np.maximum(imgs[k], np.clip(thick + 0.5 - dist, 0, 1))
    imgs += rng.normal(0, 0.15, imgs.shape).astype(np.float32)
    return (imgs * 2 - 1)[:, None].astype(np.float32), labels[:, None].astype(np.int64)


def load_data(kind: str, train_size: int) -> Tuple[str, Arrays, Arrays]:
    if kind in ("auto", "sklearn"):
        try:
            train, test = sklearn_digits()
            return "scikit-learn digits (8x8 scaled to 28x28)", train, test
        except ImportError:
            if kind == "sklearn":
                raise SystemExit("scikit-learn is not installed; use --data generated")
    return ("generated seven-segment digits", generated_digits(train_size, 1),
            generated_digits(max(train_size // 5, 200), 2))


def minibatches(data: Arrays, batch_size: int, rng: np.random.Generator) -> Iterator[Arrays]:
    order = rng.permutation(len(data[0]))
    for i in range(0, len(order), batch_size):
        idx = order[i:i + batch_size]
        yield data[0][idx], data[1][idx]


# -- the book's network -------------------------------------------------------------------------
def convolutional_neural_network(img: fluid.Variable) -> fluid.Variable:
    conv_pool_1 = fluid.nets.simple_img_conv_pool(
        input=img, filter_size=5, num_filters=20, pool_size=2, pool_stride=2, act="relu")
    conv_pool_1 = fluid.layers.batch_norm(conv_pool_1)
    conv_pool_2 = fluid.nets.simple_img_conv_pool(
        input=conv_pool_1, filter_size=5, num_filters=50, pool_size=2, pool_stride=2,
        act="relu")
    return fluid.layers.fc(input=conv_pool_2, size=10, act="softmax")


def progress(epoch: int, epochs: int, done: int, total: int, loss: float, acc: float,
             start: float) -> None:
    width = 30
    filled = int(width * done / total)
    rate = done / max(time.perf_counter() - start, 1e-9)
    line = (f"\repoch {epoch}/{epochs} [{'=' * filled}{'.' * (width - filled)}] {done}/{total}"
            f"  loss {loss:.4f}  acc {acc:.3f}  {rate:.1f} batch/s")
    if sys.stdout.isatty():
        sys.stdout.write(line)
        sys.stdout.flush()
    elif done == total:
        sys.stdout.write(line.lstrip("\r"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.001)
    ap.add_argument("--data", choices=["auto", "sklearn", "generated"], default="auto")
    ap.add_argument("--train-size", type=int, default=3000,
                    help="number of generated training images (generated data only)")
    add_out_argument(ap)
    ap.add_argument("--save-dir", default=None,
                    help="where to save the inference model (default: "
                    "recognize_digits.inference.model in the output folder)")
    ap.add_argument("--curves", default=None,
                    help="PNG of the training curves (default: recognize_digits_curves.png "
                    "in the folder that holds --save-dir; '' to skip)")
    args = ap.parse_args()
    if args.save_dir is None:
        args.save_dir = os.path.join(out_dir(args.out), "recognize_digits.inference.model")
    if args.curves is None:
        args.curves = os.path.join(os.path.dirname(os.path.abspath(args.save_dir)),
                                   "recognize_digits_curves.png")

    source, train, test = load_data(args.data, args.train_size)
    print(f"data: {source}: {len(train[0])} train / {len(test[0])} test images")

    main_program, startup = fluid.Program(), fluid.Program()
    main_program.random_seed = startup.random_seed = 90
    with fluid.program_guard(main_program, startup):
        img = fluid.data(name="img", shape=[None, 1, 28, 28], dtype="float32")
        label = fluid.data(name="label", shape=[None, 1], dtype="int64")
        prediction = convolutional_neural_network(img)
        avg_loss = fluid.layers.mean(fluid.layers.cross_entropy(input=prediction, label=label))
        acc = fluid.layers.accuracy(input=prediction, label=label)
        test_program = main_program.clone(for_test=True)
        fluid.optimizer.Adam(learning_rate=args.lr).minimize(avg_loss)

    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    rng = np.random.default_rng(0)
    n_batches = -(-len(train[0]) // args.batch_size)
    history = {"loss": [], "acc": [], "test_acc": []}
    for epoch in range(1, args.epochs + 1):
        start = time.perf_counter()
        for i, (x, y) in enumerate(minibatches(train, args.batch_size, rng), 1):
            loss, a = exe.run(main_program, feed={"img": x, "label": y},
                              fetch_list=[avg_loss, acc])
            progress(epoch, args.epochs, i, n_batches, float(loss[0]), float(a[0]), start)
            history["loss"].append(float(loss[0]))
            history["acc"].append(float(a[0]))
        correct, seen = 0.0, 0
        for x, y in minibatches(test, 256, rng):
            a, = exe.run(test_program, feed={"img": x, "label": y}, fetch_list=[acc])
            correct += float(a[0]) * len(x)
            seen += len(x)
        print(f"  | test accuracy {correct / seen:.4f}  ({time.perf_counter() - start:.1f}s)")
        history["test_acc"].append(correct / seen)
    if args.curves and plot_curves(args.curves, history, f"recognize digits: {source}"):
        print(f"training curves: {args.curves}")

    fluid.io.save_inference_model(args.save_dir, ["img"], [prediction], exe,
                                  main_program=main_program)
    print(f"saved inference model to {args.save_dir}/")
    with fluid.scope_guard(fluid.Scope()):
        infer_exe = fluid.Executor(fluid.CPUPlace())
        prog, feed_names, fetch_targets = fluid.io.load_inference_model(args.save_dir, infer_exe)
        probs, = infer_exe.run(prog, feed={feed_names[0]: test[0][:10]},
                               fetch_list=fetch_targets)
    print("reloaded model on 10 test images:")
    print("  predicted:", " ".join(str(int(p)) for p in probs.argmax(axis=1)))
    print("  actual:   ", " ".join(str(int(t)) for t in test[1][:10, 0]))


if __name__ == "__main__":
    main()
