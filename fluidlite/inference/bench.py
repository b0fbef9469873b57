"""``fluidlite bench MODEL_DIR``: latency and throughput of an inference model per engine.

For each batch size and each engine -- ``numpy`` (ir_optim off), ``numpy+ir_optim`` and,
when onnx and onnxruntime are importable, ``onnxruntime`` -- it times ``predictor.run`` on
random inputs shaped like the feeds (free dims = the batch size; int inputs are zeros) and
prints median and p90 latency and throughput (samples / s at the median). It also checks that
every engine's outputs match the plain NumPy run (max abs difference, printed).

Usage: ``python -m fluidlite.inference.bench MODEL_DIR [--batch 1 8 32] [--repeat 50]
[--warmup 5] [--threads 1] [--model-file F --params-file F]``.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from typing import Dict, List, Optional, Sequence, Tuple

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


def _inputs(predictor: AnalysisPredictor, batch: int, rng: np.random.Generator
            ) -> List[PaddleTensor]:
    block = predictor.program().global_block()
    out = []
    for name, shape in predictor.get_input_tensor_shape().items():
        dims = [batch if d < 0 else d for d in shape]
        dtype = to_numpy_dtype(block.var(name).dtype)
        arr = (rng.random(dims).astype(dtype) if dtype.kind == "f"
               else np.zeros(dims, dtype))
        out.append(PaddleTensor(arr, name=name))
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
    """Run the benchmark (see the module docstring); prints one table; returns 0.

    Args:
        argv: command-line arguments (default: ``sys.argv[1:]``).

    Example:
        >>> main(["./infer_model", "--batch", "1", "16"])
    """
    parser = argparse.ArgumentParser(prog="fluidlite bench",
                                     description="inference latency and throughput per engine")
    parser.add_argument("model_dir", help="directory written by save_inference_model")
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--repeat", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1,
                        help="cpu_math_library_num_threads: the threads fluidlite computes on "
                             "(onnxruntime: its intra-op threads)")
    parser.add_argument("--model-file", default=None, help="program file name in MODEL_DIR")
    parser.add_argument("--params-file", default=None, help="combined params file name")
    args = parser.parse_args(argv)
    try:
        return _run(args)
    except (ValueError, OSError, RuntimeError) as e:
        # the CLI contract (fluidlite/cli.py): one line on stderr and an exit code
        sys.stderr.write(f"fluidlite bench: error: {' '.join(str(e).split())}\n")
        return 1


def _run(args: argparse.Namespace) -> int:
    engines: Dict[str, AnalysisPredictor] = {}
    plain = _config(args)
    plain.switch_ir_optim(False)
    engines["numpy"] = create_paddle_predictor(plain)
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
    print(f"model {args.model_dir}: inputs {engines['numpy'].get_input_tensor_shape()}, "
          f"{args.repeat} runs after {args.warmup} warm-up, threads {args.threads}")
    print(f"{'engine':<16}{'batch':>6}{'median ms':>11}{'p90 ms':>9}{'samples/s':>12}"
          f"{'max |diff|':>12}")
    for batch in args.batch:
        inputs = _inputs(engines["numpy"], batch, rng)
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
