"""Helpers the samples share; not a sample itself (running it does nothing).

* ``add_out_argument`` / ``out_dir``: the output-folder convention. Every sample writes its
  files (HTML views, PNG curves, saved models) into one folder: ``--out DIR``, else the
  ``FLUIDLITE_SAMPLES_OUT`` environment variable, else ``./samples_out`` in the current
  directory; never next to the sources.
* ``Progress``: a dependency-free progress bar (tqdm when installed).
* ``plot_curves``: the PNG of the training curves (matplotlib, the ``plot`` extra:
  ``pip install "fluidlite[plot]"``).

Not part of the library: samples import it from their own folder.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Dict, Iterable, Iterator, List, Optional, Sequence, TypeVar

T = TypeVar("T")

PLOT_HINT = ('matplotlib is not installed, so no PNG of the training curves was written; '
             'get it with: pip install "fluidlite[plot]"  (or: pip install matplotlib)')


OUT_ENV = "FLUIDLITE_SAMPLES_OUT"
DEFAULT_OUT = "samples_out"


def add_out_argument(parser: argparse.ArgumentParser) -> None:
    """Add ``--out DIR`` (default: ``$FLUIDLITE_SAMPLES_OUT``, else ``./samples_out``)."""
    parser.add_argument("--out", default=None,
                        help=f"folder for the files this sample writes (default: ${OUT_ENV}, "
                             f"else ./{DEFAULT_OUT})")


def out_dir(out: Optional[str] = None) -> str:
    """The output folder (``out``, else ``$FLUIDLITE_SAMPLES_OUT``, else ``./samples_out``),
    created if needed."""
    path = out or os.environ.get(OUT_ENV) or DEFAULT_OUT
    os.makedirs(path, exist_ok=True)
    return path


class Progress:
    """``for batch in Progress(batches, total, "epoch 1/5"): ...; bar.set(loss=..)``.

    Uses tqdm when it is importable; otherwise one line redrawn with ``\\r`` on a terminal,
    or a single final line when the output is not a terminal (logs stay readable)."""

    def __init__(self, items: Iterable[T], total: int, desc: str, width: int = 30) -> None:
        self.items, self.total, self.desc, self.width = items, total, desc, width
        self.stats: Dict[str, float] = {}
        self._tqdm = None
        try:
            from tqdm import tqdm
            self._tqdm = tqdm(total=total, desc=desc, leave=True, file=sys.stdout)
        except ImportError:
            pass

    def set(self, **stats: float) -> None:
        self.stats.update(stats)
        if self._tqdm is not None:
            self._tqdm.set_postfix({k: f"{v:.4f}" for k, v in self.stats.items()})

    def __iter__(self) -> Iterator[T]:
        start = time.perf_counter()
        done = 0
        for item in self.items:
            yield item
            done += 1
            if self._tqdm is not None:
                self._tqdm.update(1)
            else:
                self._draw(done, start)
        if self._tqdm is not None:
            self._tqdm.close()
        elif done != self.total:          # stopped early: show where it stopped
            self._draw(done, start, final=True)

    def _draw(self, done: int, start: float, final: bool = False) -> None:
        filled = int(self.width * done / max(self.total, 1))
        rate = done / max(time.perf_counter() - start, 1e-9)
        stats = "  ".join(f"{k} {v:.4f}" for k, v in self.stats.items())
        line = (f"{self.desc} [{'=' * filled}{'.' * (self.width - filled)}] "
                f"{done}/{self.total}  {stats}  {rate:.0f} it/s")
        if sys.stdout.isatty():
            sys.stdout.write("\r" + line + ("\n" if done == self.total else ""))
            sys.stdout.flush()
        elif final or done == self.total:
            sys.stdout.write(line + "\n")


def plot_curves(path: str, history: Dict[str, Sequence[float]], title: str,
                clip_norm: Optional[float] = None) -> Optional[str]:
    """Write ``path`` (PNG): loss, accuracy, and when ``history`` has ``norm_before`` /
    ``norm_after``, the global gradient norm before and after clipping with the threshold
    ``clip_norm`` as a dashed line. Returns the path, or None (with ``PLOT_HINT`` printed)
    when matplotlib is missing. Keys: ``loss`` (per step), optional ``acc`` (per step; a model
    without accuracy, e.g. a regression, leaves it out and gets no accuracy panel),
    ``test_acc`` (per epoch), ``norm_before``, ``norm_after``."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(PLOT_HINT)
        return None
    panels: List[str] = (["loss"] + (["acc"] if history.get("acc") else [])
                         + (["norm"] if history.get("norm_before") else []))
    fig, axes_ = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.4), squeeze=False)
    axes = dict(zip(panels, axes_[0]))
    steps = range(1, len(history["loss"]) + 1)
    axes["loss"].plot(steps, history["loss"], color="#3B5B92", lw=1)
    axes["loss"].set(title="training loss", xlabel="step", ylabel="loss")
    if "acc" in panels:
        ax = axes["acc"]
        ax.plot(steps, history["acc"], color="#1E8449", lw=1, label="train (batch)")
        if history.get("test_acc"):
            per_epoch = len(history["loss"]) / len(history["test_acc"])
            xs = [per_epoch * (k + 1) for k in range(len(history["test_acc"]))]
            ax.plot(xs, history["test_acc"], "o-", color="#7D3C98", label="test (epoch)")
        ax.set(title="accuracy", xlabel="step", ylabel="accuracy", ylim=(0, 1.02))
        ax.legend(loc="lower right", fontsize=8)
    if "norm" in panels:
        ax = axes["norm"]
        ax.plot(steps, history["norm_before"], color="#B03A2E", lw=1, label="before clip")
        ax.plot(steps, history["norm_after"], color="#D4AC0D", lw=1.5, label="after clip")
        if clip_norm is not None:
            ax.axhline(clip_norm, color="#17202A", ls="--", lw=1,
                       label=f"clip_norm = {clip_norm:g}")
        ax.set(title="global gradient norm", xlabel="step", ylabel="||g||")
        ax.set_yscale("log")
        ax.legend(loc="upper right", fontsize=8)
    for ax in axes.values():
        ax.grid(alpha=0.3)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


if __name__ == "__main__":
    sys.exit("samples/_common.py holds helpers the samples import; it is not a sample. Run one "
             "of the others, e.g. python samples/quick_start.py (docs/guides/samples.md).")
