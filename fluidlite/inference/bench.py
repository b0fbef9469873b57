"""``fluidlite bench MODEL_DIR``: latency and throughput of an inference model per engine.

For each batch size and each engine -- ``numpy`` (ir_optim off), ``numpy+ir_optim`` and,
when onnx and onnxruntime are importable, ``onnxruntime`` -- it times ``predictor.run`` on
random inputs shaped like the feeds and prints median and p90 latency and throughput (samples
/ s at the median). It also checks that every engine's outputs match the plain NumPy run (max
abs difference, printed).

The inputs: a feed's first dim, when free (-1), is the batch size; its other free dims (an
image model's height and width, say) must be given with ``--shape NAME=D,D,...`` (the dims
after the batch dim) -- without them the run stops with an error naming the input, as a
benchmark on 1x1 images would measure nothing. A feed with a LoD (``lod_level`` >= 1, a
sequence model's words) gets ``batch`` sequences of ``--seq-len`` tokens each: its first dim
is their total, its LoD their offsets. Float feeds are uniform in [0, 1), integer feeds zeros
(a valid id for every embedding).

Usage: ``python -m fluidlite.inference.bench MODEL_DIR [--batch 1 8 32] [--repeat 50]
[--warmup 5] [--threads 1] [--shape x=3,224,224] [--seq-len 16]
[--model-file F --params-file F]``.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from ..core.dtypes import to_numpy_dtype
from .config import AnalysisConfig
from .predictor import AnalysisPredictor, create_paddle_predictor
from .tensor import PaddleTensor

__all__ = ["main", "measure"]


def _config(args: argparse.Namespace) -> AnalysisConfig:
    if args.model_file:
        params = os.path.join(args.model_dir, args.params_file) if args.params_file else None
        c = AnalysisConfig(os.path.join(args.model_dir, args.model_file), params)
        if params is None:
            c.set_prog_file(os.path.join(args.model_dir, args.model_file))
    else:
        c = AnalysisConfig(args.model_dir)
    c.set_cpu_math_library_num_threads(args.threads)
    return c


class _Usage(ValueError):
    """A bad option for this model (--shape, --batch): exit code 2, as argparse's errors."""


class _Feed(NamedTuple):
    """How one feed is made: its name, numpy dtype, LoD level, its declared first dim (< 0:
    the batch; None: a scalar feed) and the dims after it (all fixed: declared or given with
    --shape)."""
    name: str
    dtype: np.dtype
    lod_level: int
    first: Optional[int]
    tail: Tuple[int, ...]

    @property
    def batched(self) -> bool:
        return self.lod_level > 0 or (self.first is not None and self.first < 0)


def _parse_shape(text: str) -> Tuple[str, Tuple[int, ...]]:
    """``NAME=D,D,...`` -> (NAME, dims); argparse's type for --shape."""
    name, sep, dims = text.partition("=")
    try:
        if not sep or not name:
            raise ValueError
        parsed = tuple(int(d) for d in dims.split(",")) if dims.strip() else ()
        if any(d < 1 for d in parsed):
            raise ValueError
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--shape {text!r}: expected NAME=D,D,... with positive dims after the batch dim, "
            f"e.g. x=3,224,224") from None
    return name, parsed


def _feeds(predictor: AnalysisPredictor, shapes: Dict[str, Tuple[int, ...]]) -> List[_Feed]:
    """The feeds of ``predictor`` with their free dims resolved from ``shapes`` (--shape);
    ``_Usage`` naming the input and the fix when a dim stays free or a given one contradicts
    the declaration -- checked before the other engines are built and anything runs."""
    block = predictor.program().global_block()
    declared = predictor.get_input_tensor_shape()
    unknown = sorted(set(shapes) - set(declared))
    if unknown:
        raise _Usage(f"--shape names {unknown}, which are not inputs of the model; its "
                     f"inputs are {list(declared)}")
    feeds = []
    for name, shape in declared.items():
        var = block.var(name)
        lod_level = int(var.lod_level or 0)
        first = int(shape[0]) if shape else None
        tail = tuple(shape[1:])
        if name in shapes:
            given = shapes[name]
            if len(given) != len(tail):
                raise _Usage(f"--shape {name}: input '{name}' is declared {list(shape)}, "
                             f"so --shape gives its {len(tail)} dim(s) after the first; "
                             f"got {len(given)}: {list(given)}")
            for i, (d, g) in enumerate(zip(tail, given), start=1):
                if d >= 0 and d != g:
                    raise _Usage(f"--shape {name}: input '{name}' is declared "
                                 f"{list(shape)}; its dim {i} is fixed at {d}, --shape "
                                 f"gave {g}")
            tail = given
        elif any(d < 0 for d in tail):
            example = ",".join(str(d) if d >= 0 else "N" for d in tail)
            raise _Usage(f"input '{name}' is declared {list(shape)}: dims after the first "
                         f"are free (-1); give them with --shape {name}={example} "
                         f"(each N a size, e.g. an image's height and width)")
        feeds.append(_Feed(name, np.dtype(to_numpy_dtype(var.dtype)), lod_level, first,
                           tuple(int(d) for d in tail)))
    return feeds


def _inputs(feeds: Sequence[_Feed], batch: int, seq_len: int, rng: np.random.Generator
            ) -> List[PaddleTensor]:
    """One PaddleTensor per feed at ``batch`` (see the module docstring)."""
    out = []
    for f in feeds:
        lod: List[List[int]] = []
        first = f.first
        if f.lod_level:
            first = batch * seq_len
            lod = [list(range(batch + 1))] * (f.lod_level - 1) + \
                [list(range(0, first + 1, seq_len))]
        elif f.batched:
            first = batch
        dims = () if first is None else (first,) + f.tail
        arr = (rng.random(dims).astype(f.dtype) if f.dtype.kind == "f"
               else np.zeros(dims, f.dtype))
        out.append(PaddleTensor(arr, name=f.name, lod=lod))
    return out


def measure(predictor: AnalysisPredictor, inputs: Sequence[PaddleTensor], repeat: int,
            warmup: int) -> Tuple[float, float, List[np.ndarray]]:
    """(median seconds, p90 seconds, outputs) of ``predictor.run(inputs)`` over ``repeat``
    timed runs after ``warmup`` untimed ones.

    Args:
        predictor: the predictor to time.
        inputs: its inputs.
        repeat: timed runs (>= 1).
        warmup: untimed runs first (plan compilation, caches).

    Example:
        >>> med, p90, outs = measure(predictor, inputs, repeat=20, warmup=2)
    """
    outs = [t.as_ndarray() for t in predictor.run(list(inputs))]
    for _ in range(warmup):
        predictor.run(list(inputs))
    times = []
    for _ in range(max(repeat, 1)):
        start = time.perf_counter()
        predictor.run(list(inputs))
        times.append(time.perf_counter() - start)
    return float(np.median(times)), float(np.percentile(times, 90)), outs


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the benchmark (see the module docstring); prints one table; returns 0 (2 for
    options this model cannot take, 1 when it cannot be loaded or run).

    Args:
        argv: command-line arguments (default: ``sys.argv[1:]``).

    Example:
        >>> main(["./infer_model", "--batch", "1", "16"])
    """
    parser = argparse.ArgumentParser(prog="fluidlite bench",
                                     description="inference latency and throughput per engine")
    parser.add_argument("model_dir", help="directory written by save_inference_model")
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 8, 32],
                        help="batch sizes to time, one table row each (default: 1 8 32)")
    parser.add_argument("--repeat", type=int, default=50,
                        help="timed runs per engine and batch size; the table reports their "
                             "median and 90th percentile (default: 50)")
    parser.add_argument("--warmup", type=int, default=5,
                        help="untimed runs before them (default: 5)")
    parser.add_argument("--threads", type=int, default=1,
                        help="cpu_math_library_num_threads: the threads fluidlite computes on "
                             "(onnxruntime: its intra-op threads)")
    parser.add_argument("--shape", type=_parse_shape, action="append", default=[],
                        metavar="NAME=D,D,...",
                        help="the dims after the batch dim of input NAME, for inputs declared "
                             "with free ones (e.g. --shape x=3,640,640 for [-1, 3, -1, -1]); "
                             "repeat for several inputs")
    parser.add_argument("--seq-len", type=int, default=16,
                        help="tokens per sequence of inputs with a LoD (lod_level >= 1): "
                             "each batch row is one sequence of this length")
    parser.add_argument("--model-file", default=None, help="program file name in MODEL_DIR")
    parser.add_argument("--params-file", default=None, help="combined params file name")
    args = parser.parse_args(argv)
    if args.seq_len < 1 or min(args.batch) < 1:
        parser.error("--batch sizes and --seq-len must be positive")
    if args.repeat < 1 or args.warmup < 0 or args.threads < 1:
        parser.error(f"--repeat and --threads must be >= 1 and --warmup >= 0, got "
                     f"--repeat {args.repeat}, --warmup {args.warmup}, --threads {args.threads}")
    try:
        return _run(args)
    except _Usage as e:
        sys.stderr.write(f"fluidlite bench: error: {e}\n")
        return 2
    except (ValueError, OSError, RuntimeError) as e:
        # the CLI contract (fluidlite/cli.py): one line on stderr and an exit code
        sys.stderr.write(f"fluidlite bench: error: {' '.join(str(e).split())}\n")
        return 1


def _run(args: argparse.Namespace) -> int:
    engines: Dict[str, AnalysisPredictor] = {}
    plain = _config(args)
    plain.switch_ir_optim(False)
    engines["numpy"] = create_paddle_predictor(plain)
    declared = engines["numpy"].get_input_tensor_shape()
    feeds = _feeds(engines["numpy"], dict(args.shape))        # (errors before the engines)
    if not any(f.batched for f in feeds):
        # every input fixed (a model exported for one batch size): its first dim is the batch
        fixed = next((d[0] for d in declared.values() if d), 1)
        if args.batch != [fixed]:
            raise _Usage(f"no input of the model has a free first dim (inputs {declared}): "
                             f"it runs at batch {fixed} only; give --batch {fixed}")
    engines["numpy+ir_optim"] = create_paddle_predictor(_config(args))
    ort = _config(args)
    ort.enable_onnxruntime()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        p = create_paddle_predictor(ort)
    if p.engine() == "onnxruntime":
        engines["onnxruntime"] = p
    else:
        why = str(caught[-1].message) if caught else "unavailable"
        print(f"onnxruntime: skipped ({why})")

    rng = np.random.default_rng(0)
    print(f"model {args.model_dir}: inputs {declared}, "
          f"{args.repeat} runs after {args.warmup} warm-up, threads {args.threads}")
    print(f"{'engine':<16}{'batch':>6}{'median ms':>11}{'p90 ms':>9}{'samples/s':>12}"
          f"{'max |diff|':>12}")
    for batch in args.batch:
        inputs = _inputs(feeds, batch, args.seq_len, rng)
        print("inputs: " + ", ".join(
            f"{t.name} {list(t.shape)}" + (f" ({len(t.lod[-1]) - 1} sequences)" if t.lod else "")
            for t in inputs))
        reference: Optional[List[np.ndarray]] = None
        for name, predictor in engines.items():
            med, p90, outs = measure(predictor, inputs, args.repeat, args.warmup)
            if reference is None:
                reference = outs
            diff = max((float(np.max(np.abs(a.astype(np.float64) - b)))
                        for a, b in zip(outs, reference) if a.size), default=0.0)
            print(f"{name:<16}{batch:>6}{med * 1e3:>11.3f}{p90 * 1e3:>9.3f}"
                  f"{batch / med:>12.1f}{diff:>12.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
