"""Shared pieces of the book tests: local data and the save/reload check."""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence

import numpy as np

import fluidlite as fluid

# seven-segment strokes of the digits 0-9: (segments, then per segment (y0, x0, y1, x1) on a
# unit box); images look like (blocky) handwritten digits and are cheap to make
_SEGMENTS = {"a": (0.0, 0.0, 0.0, 1.0), "b": (0.0, 1.0, 0.5, 1.0), "c": (0.5, 1.0, 1.0, 1.0),
             "d": (1.0, 0.0, 1.0, 1.0), "e": (0.5, 0.0, 1.0, 0.0), "f": (0.0, 0.0, 0.5, 0.0),
             "g": (0.5, 0.0, 0.5, 1.0)}
_DIGITS = ["abcdef", "bc", "abged", "abgcd", "fgbc", "afgcd", "afgedc", "abc", "abcdefg",
           "abcdfg"]


def digits(n: int, seed: int = 0, size: int = 28):
    """``n`` digit-like images [n, 1, size, size] in [-1, 1] (float32) and labels [n, 1]
    (int64): seven-segment strokes with random position, size, slant, thickness and noise."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 10, n)
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32)
    images = np.zeros((n, size, size), np.float32)
    for k, lab in enumerate(labels):
        h, w = rng.uniform(0.5, 0.7) * size, rng.uniform(0.3, 0.45) * size
        top = rng.uniform(0.1 * size, size - h - 0.1 * size)
        left = rng.uniform(0.15 * size, size - w - 0.15 * size)
        slant, thick = rng.uniform(-0.25, 0.25), rng.uniform(0.9, 1.6) * size / 28
        for s in _DIGITS[lab]:
            y0, x0, y1, x1 = _SEGMENTS[s]
            p0 = np.array([top + y0 * h, left + x0 * w + slant * (0.5 - y0) * h])
            p1 = np.array([top + y1 * h, left + x1 * w + slant * (0.5 - y1) * h])
            d = p1 - p0
            t = np.clip(((yy - p0[0]) * d[0] + (xx - p0[1]) * d[1]) / (d @ d), 0, 1)
            dist = np.hypot(yy - p0[0] - t * d[0], xx - p0[1] - t * d[1])
            images[k] = np.maximum(images[k], np.clip(thick + 0.5 - dist, 0, 1))
    images += rng.normal(0, 0.15, images.shape).astype(np.float32)
    return (images * 2 - 1)[:, None].astype(np.float32), labels[:, None].astype(np.int64)


def batches(arrays: Sequence[np.ndarray], batch_size: int, steps: int):
    """``steps`` minibatches cycling through ``arrays`` (all with the same first dim)."""
    n = arrays[0].shape[0]
    for s in range(steps):
        idx = np.arange(s * batch_size, (s + 1) * batch_size) % n
        yield [a[idx] for a in arrays]


def assert_decreases(losses: Sequence[float], window: int = 3, factor: float = 0.9) -> None:
    """The mean of the last ``window`` losses is clearly below the mean of the first."""
    losses = [float(np.asarray(v).reshape(-1)[0]) for v in losses]
    first, last = np.mean(losses[:window]), np.mean(losses[-window:])
    assert np.all(np.isfinite(losses)), losses
    assert last < factor * first, f"loss did not decrease: {losses}"


def reload_and_compare(dirname: str, feed_names: List[str], targets: list,
                       exe: fluid.Executor, program: fluid.Program,
                       feed: Dict[str, np.ndarray], test_program: fluid.Program,
                       extra_feed: Optional[Dict[str, np.ndarray]] = None) -> List:
    """Save an inference model of ``program``, load it into a fresh scope with a new executor,
    and check it reproduces ``test_program``'s outputs exactly (``extra_feed``: what the test
    program needs beyond the model inputs, e.g. labels); returns the reloaded outputs."""
    fluid.io.save_inference_model(dirname, feed_names, targets, exe, main_program=program)
    expected = exe.run(test_program, feed=dict(feed, **(extra_feed or {})), fetch_list=targets)
    with fluid.scope_guard(fluid.Scope()):
        infer_exe = fluid.Executor(fluid.CPUPlace())
        prog, feed_targets, fetch_targets = fluid.io.load_inference_model(dirname, infer_exe)
        assert feed_targets == feed_names
        got = infer_exe.run(prog, feed={n: feed[n] for n in feed_targets},
                            fetch_list=fetch_targets)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        np.testing.assert_array_equal(g, e)
    return got
