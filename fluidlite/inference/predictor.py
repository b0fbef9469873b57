"""fluid 1.8's inference predictor: ``create_paddle_predictor(config)``.

A predictor loads the model named by an ``AnalysisConfig`` into its own scope (the caller's
global scope is never touched), copies the program and, with ``ir_optim`` on, runs the passes
of ``fluidlite.inference.passes`` on the copy (folded weights go into the predictor's scope,
never into the model files). It runs with the NumPy ``Executor``, or with onnxruntime when the
config says ``enable_onnxruntime()`` (the *loaded* program is exported with
``fluidlite.onnx``: onnxruntime does its own graph optimisation, and the fused ops the passes
create have no ONNX converter).

Two APIs, as in fluid 1.8: ``run([PaddleTensor]) -> [PaddleTensor]``, and the zero-copy one
(``get_input_tensor(name).copy_from_cpu(a)``, ``zero_copy_run()``,
``get_output_tensor(name).copy_to_cpu()``).

Threads: one predictor per thread. ``clone()`` gives a predictor that shares the program, the
loaded (and folded) weights and the onnxruntime session, all read-only, and has its own scope
for intermediate values, its own executor and its own input/output slots.
"""
from __future__ import annotations

import collections
import contextlib
import logging
import os
import threading
import time
import warnings
import weakref
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple

import numpy as np

from ..core import names, threads
from ..core.callstack import user_stacklevel
from ..core import scope as scope_mod
from ..core.dtypes import to_numpy_dtype
from ..core.ir import Program
from ..executor import Executor
from ..io.inference import load_inference_buffers, load_inference_model
from . import ops as _ops  # noqa: F401  (registers fc / conv2d_fusion)
from .config import AnalysisConfig, NativeConfig
from .passes import PassContext, run_passes
from .tensor import PaddleTensor, ZeroCopyTensor

__all__ = ["PaddlePredictor", "AnalysisPredictor", "NativePaddlePredictor",
           "create_paddle_predictor"]

_log = logging.getLogger(__name__)

# scope_guard is process-global: loading predictors from two threads at once must not mix
# the scopes their parameters land in
_LOAD_LOCK = threading.Lock()


def _load(config: AnalysisConfig, scope: scope_mod.Scope) -> Tuple[Program, List[str], List[str]]:
    if config.model_from_memory():
        with _LOAD_LOCK, scope_mod.scope_guard(scope):
            program, feeds, fetches = load_inference_buffers(*config._buffers)
        return program, list(feeds), [v.name for v in fetches]
    if config.model_dir():
        dirname, model, params = config.model_dir(), None, config.params_file() or None
    elif config.prog_file():
        dirname = os.path.dirname(config.prog_file()) or "."
        model = os.path.basename(config.prog_file())
        params = None
        if config.params_file():
            pdir = os.path.dirname(config.params_file()) or "."
            if os.path.abspath(pdir) != os.path.abspath(dirname):
                raise ValueError(f"AnalysisConfig: the params file '{config.params_file()}' "
                                 f"must be in the directory of the program file "
                                 f"'{config.prog_file()}' (one model directory, read "
                                 f"through its checkpoint manifest)")
            params = os.path.basename(config.params_file())
    else:
        raise ValueError("AnalysisConfig names no model: pass a model directory, or a "
                         "program file and a params file (AnalysisConfig(dir) / "
                         "config.set_model(prog_file, params_file))")
    with _LOAD_LOCK, scope_mod.scope_guard(scope):
        program, feeds, fetches = load_inference_model(dirname, None, model, params)
    return program, list(feeds), [v.name for v in fetches]


def _graph_writer(config: AnalysisConfig) -> Callable[[int, str, Program], None]:
    """``switch_ir_debug``'s hook: the program after the i-th pass as the DOT file
    ``<i>_ir_<pass>.dot`` (fluid's graph_viz_pass names) in the optim cache directory, else
    the current one; written atomically."""
    # (imported here: the viewers cost a predictor that does not debug ~0.1-0.25 s of import)
    from ..viz import export
    directory = config._optim_cache_dir or "."

    def write(i: int, name: str, program: Program) -> None:
        os.makedirs(directory, exist_ok=True)
        path = os.path.join(directory, f"{i}_ir_{name}.dot")
        export(program, path, title=f"after {name}")
        _log.info("switch_ir_debug: wrote %s", path)
    return write


# Runs whose largest variable has fewer elements than this compute with the kernels on the
# calling thread and BLAS threading the GEMMs (``threads.blas_threads``), when fluidlite has two
# threads or more: their parallel work comes in pieces too short to pay for the pool's
# hand-offs. Whole models, that mode's time / the pool's (2 threads, AMD EPYC, alternated in
# one process): BERT-mini at batch 1 (largest variable 131K elements) 0.87-0.98, an LSTM tagger
# (4K a sample) at batch 1 0.88-0.92 and at batch 16 0.92-1.15, MobileNetV2 at batch 1 (1.2M)
# 0.99, ResNet-50 at batch 1 (803K) 1.05, BERT-mini at batch 16 (2.1M) 1.17.
_POOL_MIN_ELEMENTS = 1 << 19


def _elements(shape: Sequence[int]) -> int:
    """Elements of a declared shape, a free dim (-1) counted as 1."""
    return int(np.prod([max(int(d), 1) for d in shape], dtype=np.int64))


def _sizes(program: Program, feeds: Sequence[str]) -> Tuple[int, Dict[str, int]]:
    """(elements of the program's largest non-persistable variable, {feed: elements}), free
    dims counted as 1: a run's sizes are these times its inputs' free dims
    (``AnalysisPredictor._blas_run``)."""
    widest = max((_elements(v.shape) for b in program.blocks for v in b.vars.values()
                  if not v.persistable and v.shape is not None), default=0)
    block = program.global_block()
    return widest, {n: _elements(block.var(n).shape) for n in feeds}


# Shape specialisation (``AnalysisConfig.switch_shape_specialization``): the run of an input
# shape that has the passes run for it -- the second, so that a stream of sizes that never
# recur (a detector fed images as they come) never pays for passes it would not reuse --
# and how many shapes' run counts are remembered.
_SPECIALIZE_AT = 2
_SEEN_KEEP = 64

_Key = Tuple[Tuple[int, ...], ...]     # the feeds' dims after the first, in feed order


class _Variant:
    """The program the passes made for one input shape, with the scope of the weights they
    folded for it (a child of the loaded weights' scope)."""
    __slots__ = ("key", "program", "scope", "applied", "__weakref__")

    def __init__(self, key: _Key, program: Program, scope: scope_mod.Scope,
                 applied: List[Tuple[str, int]]) -> None:
        self.key, self.program, self.scope, self.applied = key, program, scope, applied


class _Shared:
    """What clones share: read-only after creation, but for the specialised programs, which
    ``variant`` adds under a lock."""

    def __init__(self, config: AnalysisConfig) -> None:
        self.config = config
        self.params = scope_mod.Scope()
        self.loaded, self.feeds, self.fetches = _load(config, self.params)
        self.program = self.loaded
        self.applied: List[Tuple[str, int]] = []
        if config.ir_optim():
            self.program = self.loaded.clone()
            debug = _graph_writer(config) if config.ir_debug_enabled() else None
            self.applied = self._optimize(self.program, self.params, after=debug)
        self.session: Any = None
        self.engine = "numpy"
        if config.use_onnxruntime():
            self.session = self._onnx_session(config)
            self.engine = "onnxruntime" if self.session is not None else "numpy"
        if self.engine == "numpy" and config._threads_set:
            threads.set_math_threads(config.cpu_math_library_num_threads())
        # the loaded model's sizes: an intermediate a pass fused away (an expanded map inside
        # a depthwise_separable_fusion) still bounds the work of the op that took it in
        self.widest, self.feed_sizes = _sizes(self.loaded, self.feeds)
        block = self.loaded.global_block()
        self.declared = [list(block.var(n).shape) for n in self.feeds]
        self.specializable = (config.ir_optim() and config.shape_specialization_enabled()
                              and self.engine == "numpy" and len(self.loaded.blocks) == 1
                              and any(d < 0 for shape in self.declared for d in shape[1:]))
        self._lock = threading.Lock()
        # key -> the variant, or None where the passes changed nothing the creation's had
        # not (that shape runs the creation's program), in least-recently-used order
        self._variants: "collections.OrderedDict[_Key, Optional[_Variant]]" = \
            collections.OrderedDict()
        self._seen: "collections.OrderedDict[_Key, int]" = collections.OrderedDict()
        self._busy: Set[_Key] = set()       # being built (by one thread; the others wait not)
        self._failed: Set[_Key] = set()
        self._serial = 0                    # specialisations built (their names' prefix)

    def _optimize(self, program: Program, scope: scope_mod.Scope,
                  prefix: str = "inference_pass_",
                  after: Optional[Callable[[int, str, Program], None]] = None
                  ) -> List[Tuple[str, int]]:
        """Run the config's passes on ``program`` (in place), their folded weights going into
        ``scope`` and the names they make starting with ``prefix``, ``after(i, pass,
        program)`` after each; returns ``[(pass, rewrites)]``."""
        fold_exe = Executor(scope_mod.CPUPlace())
        protected = set(self.feeds) | set(self.fetches)

        def fold(build: Any) -> None:
            fold_prog = Program()
            block = fold_prog.global_block()
            build(block)
            # what a folding writes is made in ``scope`` itself: the executor writes into a
            # parent's variable of the same name where one exists, and a specialised
            # program's scope sits on the creation's, whose folded weights must stay as
            # they are (both programs fold ``w`` into ``w@bn_fold``)
            for op in block.ops:
                for n in op.output_arg_names:
                    scope.var(n)
            fold_exe.run(fold_prog, scope=scope)

        # a private name generator: the passes' temporaries neither advance the caller's
        # unique-name counters nor collide with the model's names (nor, with a prefix of
        # their own, a specialised program's with the creation's folding temporaries in the
        # parent scope, where the executor would write them)
        with names.guard(prefix):
            return run_passes(PassContext(program, scope, fold, protected),
                              self.config.pass_builder().all_passes(), after)

    def variant(self, values: Dict[str, Tuple[np.ndarray, List[List[int]]]]
                ) -> Optional[_Variant]:
        """The specialised program for the shapes of ``values``, or None to run the
        creation's program: specialisation is off or does not apply, the shape is new
        (its first run: ``_SPECIALIZE_AT``), another thread is building it, building it
        failed before, or the passes found nothing more to do at those sizes. Builds it
        here, on this run, when this is the shape's run that does."""
        if not self.specializable or any(lod for _, lod in values.values()):
            return None
        key = tuple(tuple(int(d) for d in np.shape(values[n][0])[1:]) for n in self.feeds)
        if any(len(k) != len(d) - 1 for k, d in zip(key, self.declared)):
            return None         # (the run's own check names the wrong rank)
        with self._lock:
            if key in self._variants:
                self._variants.move_to_end(key)
                return self._variants[key]
            if key in self._busy or key in self._failed:
                return None
            seen = self._seen.pop(key, 0) + 1
            self._seen[key] = seen
            while len(self._seen) > _SEEN_KEEP:
                self._seen.popitem(last=False)
            if seen < _SPECIALIZE_AT:
                return None
            self._busy.add(key)
        try:
            made = self._specialize(key)
        except Exception as e:      # any pass's or shape inference's error: keep serving
            warnings.warn(f"shape specialisation: the passes failed for input shapes "
                          f"{self._shapes(key)}; those runs keep the program made at "
                          f"creation ({type(e).__name__}: {e})", RuntimeWarning,
                          stacklevel=user_stacklevel())      # (the run's caller)
            with self._lock:
                self._busy.discard(key)
                self._failed.add(key)
            return None
        with self._lock:
            self._busy.discard(key)
            self._seen.pop(key, None)
            self._variants[key] = made
            while len(self._variants) > self.config.shape_specialization_capacity():
                self._variants.popitem(last=False)
        return made

    def _shapes(self, key: _Key) -> Dict[str, List[int]]:
        """The feeds' shapes a key stands for, their first dim as declared."""
        return {n: [d[0]] + list(k) for n, k, d in zip(self.feeds, key, self.declared)}

    def _specialize(self, key: _Key) -> Optional[_Variant]:
        """The loaded program given the key's sizes (shape inference re-run over it), through
        the passes, folding into a child scope of the loaded weights; None when the passes
        make no more rewrites than at creation."""
        program = self.loaded.clone()
        program.global_block().infer_shapes(self._shapes(key))
        scope = scope_mod.Scope(self.params)
        with self._lock:
            self._serial += 1
            prefix = f"inference_pass_s{self._serial}_"
        applied = self._optimize(program, scope, prefix)
        if applied == self.applied:
            return None
        _log.info("shape specialisation: %s -> %s", self._shapes(key),
                  [(n, k) for n, k in applied if k])
        return _Variant(key, program, scope, applied)

    def variants(self) -> List[_Variant]:
        """The specialised programs kept, least recently used first."""
        with self._lock:
            return [v for v in self._variants.values() if v is not None]

    def _onnx_session(self, config: AnalysisConfig) -> Any:
        """An onnxruntime session of the loaded program, or None (warned: the NumPy engine
        runs the model)."""
        try:
            import onnxruntime as ort
            from ..onnx import OnnxExportError, to_model
        except ImportError as e:
            warnings.warn(f"enable_onnxruntime: onnxruntime / onnx is not importable ({e}); "
                          f"running with the NumPy engine. Install them with "
                          f"pip install 'fluidlite[onnx]'", RuntimeWarning, stacklevel=4)
            return None
        try:
            model = to_model(self.loaded, self.feeds, self.fetches, scope=self.params)
        except OnnxExportError as e:
            warnings.warn(f"enable_onnxruntime: the model cannot be exported to ONNX, running "
                          f"with the NumPy engine instead: {e}", RuntimeWarning, stacklevel=4)
            return None
        options = ort.SessionOptions()
        options.intra_op_num_threads = config.cpu_math_library_num_threads()
        options.inter_op_num_threads = 1
        try:
            return ort.InferenceSession(model.SerializeToString(), options,
                                        providers=["CPUExecutionProvider"])
        except Exception as e:      # onnxruntime's own exception types (pybind11's)
            warnings.warn(f"enable_onnxruntime: onnxruntime refused the exported model, running "
                          f"with the NumPy engine instead (an exporter defect: please report "
                          f"it with the model): {type(e).__name__}: {e}", RuntimeWarning,
                          stacklevel=4)
            return None


class PaddlePredictor:
    """A loaded model ready to run (fluid 1.8's ``PaddlePredictor``, the base of
    ``AnalysisPredictor`` and ``NativePaddlePredictor``); made by
    ``create_paddle_predictor(config)``.

    Args:
        shared (_Shared): the loaded model state; internal -- build predictors with
            ``create_paddle_predictor(config)`` (or ``predictor.clone()``), not this constructor.

    Returns:
        PaddlePredictor: a predictor with its own scope for intermediates, executor and
        input/output slots.

    Raises:
        None: the constructor does not raise (loading errors come from ``create_paddle_predictor``).

    Example:
        >>> import numpy as np, tempfile
        >>> import fluidlite as fluid
        >>> from fluidlite.inference import AnalysisConfig, create_paddle_predictor, PaddleTensor
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 4])
        ...     y = fluid.layers.fc(x, size=3, act="softmax")
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> model_dir = tempfile.mkdtemp()
        >>> _ = fluid.io.save_inference_model(model_dir, ["x"], [y], exe, main_program=main)
        >>> predictor = create_paddle_predictor(AnalysisConfig(model_dir))
        >>> out = predictor.run([PaddleTensor(np.ones((2, 4), "float32"))])
        >>> out[0].as_ndarray().shape
        (2, 3)
    """

    def __init__(self, shared: _Shared) -> None:
        self._shared = shared
        self._scope = shared.params.new_scope()     # intermediates; weights found in parent
        # a specialised program's intermediates: a scope on its folded weights' scope, gone
        # with the program when the shared cache drops it
        self._variant_scopes: "weakref.WeakKeyDictionary[_Variant, scope_mod.Scope]" = \
            weakref.WeakKeyDictionary()
        self._exe = Executor(scope_mod.CPUPlace())
        self._inputs: Dict[str, Tuple[Optional[np.ndarray], List[List[int]]]] = {}
        self._outputs: Dict[str, Tuple[Optional[np.ndarray], List[List[int]]]] = {}
        self._times: List[float] = []

    # -- names ----------------------------------------------------------------------------
    def get_input_names(self) -> List[str]:
        """The feed variable names, in the order ``run`` takes its inputs."""
        return list(self._shared.feeds)

    def get_output_names(self) -> List[str]:
        """The fetch variable names, in the order ``run`` returns its outputs."""
        return list(self._shared.fetches)

    def get_input_tensor_shape(self) -> Dict[str, List[int]]:
        """{feed name: declared shape} (-1 for a free dim, e.g. the batch)."""
        block = self._shared.loaded.global_block()
        return {n: list(block.var(n).shape) for n in self._shared.feeds}

    # -- the PaddleTensor API -------------------------------------------------------------
    def run(self, inputs: Sequence[PaddleTensor]) -> List[PaddleTensor]:
        """Run the model on ``inputs`` (one ``PaddleTensor`` per feed: by position, or by
        ``name`` when the config's ``switch_specify_input_names`` is on) and return one
        ``PaddleTensor`` per output, named after the fetched variable.

        Args:
            inputs: the input tensors.
        """
        feeds = self._shared.feeds
        if len(inputs) != len(feeds):
            raise ValueError(f"predictor.run: the model has {len(feeds)} input(s) {feeds}, "
                             f"got {len(inputs)} PaddleTensor(s)")
        if self._shared.config.specify_input_name():
            by_name = {t.name: t for t in inputs}
            missing = [n for n in feeds if n not in by_name]
            if missing:
                raise ValueError(f"predictor.run: no PaddleTensor named {missing} (inputs are "
                                 f"matched by name: switch_specify_input_names is on)")
            ordered = [by_name[n] for n in feeds]
        else:
            ordered = list(inputs)
        values = {n: (t.as_ndarray(), t.lod) for n, t in zip(feeds, ordered)}
        out = self._execute(values)
        result = []
        for n in self._shared.fetches:
            arr, lod = out[n]
            t = PaddleTensor(np.asarray(arr), name=n, lod=lod)
            result.append(t)
        return result

    # -- the zero-copy API ----------------------------------------------------------------
    def get_input_tensor(self, name: str) -> ZeroCopyTensor:
        """The input slot ``name`` (a feed name)."""
        if name not in self._shared.feeds:
            raise ValueError(f"get_input_tensor: '{name}' is not an input of the model "
                             f"(inputs: {self._shared.feeds})")
        return ZeroCopyTensor(name, self._inputs, True)

    def get_output_tensor(self, name: str) -> ZeroCopyTensor:
        """The output slot ``name`` (a fetch name), filled by ``zero_copy_run``."""
        if name not in self._shared.fetches:
            raise ValueError(f"get_output_tensor: '{name}' is not an output of the model "
                             f"(outputs: {self._shared.fetches})")
        return ZeroCopyTensor(name, self._outputs, False)

    def zero_copy_run(self) -> None:
        """Run on the values set through ``get_input_tensor``; results go to the output
        tensors."""
        missing = [n for n in self._shared.feeds
                   if self._inputs.get(n, (None, []))[0] is None]
        if missing:
            raise RuntimeError(f"zero_copy_run: input(s) {missing} have no value: call "
                               f"get_input_tensor(name).copy_from_cpu(array) first")
        out = self._execute({n: self._inputs[n] for n in self._shared.feeds})
        self._outputs.clear()
        self._outputs.update(out)

    # -- threads --------------------------------------------------------------------------
    def clone(self) -> "PaddlePredictor":
        """A predictor (of this one's class) for another thread: shares the program, the
        weights and the onnxruntime session (read-only), owns its scope, executor and
        tensors."""
        return type(self)(self._shared)

    def scope(self) -> scope_mod.Scope:
        """This predictor's own scope, the one its runs execute in (the NumPy engine; the
        executor frees each temporary after its last reader), a child of the scope holding
        the loaded weights, which clones share read-only."""
        return self._scope

    # -- introspection (fluidlite additions) ----------------------------------------------
    def program(self) -> Program:
        """The program the NumPy engine runs (after the passes; print it to see them)."""
        return self._shared.program

    def get_serialized_program(self) -> bytes:
        """The program as a Paddle ProgramDesc protobuf (what ``__model__`` holds)."""
        from ..formats import paddle as paddle_format
        return paddle_format.program_to_bytes(self._shared.program)

    def applied_passes(self) -> List[Tuple[str, int]]:
        """``[(pass name, rewrites made)]`` from creation (empty with ``ir_optim`` off)."""
        return list(self._shared.applied)

    def specializations(self) -> List[Tuple[Dict[str, List[int]], Program,
                                            List[Tuple[str, int]]]]:
        """The programs made for recurring input shapes (``AnalysisConfig
        .switch_shape_specialization``), least recently used first: ``[(the feeds' shapes,
        the program, [(pass name, rewrites made)])]``; shared with clones."""
        shared = self._shared
        return [(shared._shapes(v.key), v.program, list(v.applied)) for v in shared.variants()]

    def engine(self) -> str:
        """``"numpy"`` or ``"onnxruntime"`` (after any fallback)."""
        return self._shared.engine

    def profile(self) -> List[float]:
        """Seconds per ``run`` / ``zero_copy_run`` (recorded with ``enable_profile()``)."""
        return list(self._times)

    # -- engines --------------------------------------------------------------------------
    def _execute(self, values: Dict[str, Tuple[np.ndarray, List[List[int]]]]
                 ) -> Dict[str, Tuple[np.ndarray, List[List[int]]]]:
        start = time.perf_counter()
        shared = self._shared
        # LoD inputs have no ONNX form: such a call runs on the NumPy engine
        if shared.session is not None and not any(lod for _, lod in values.values()):
            block = shared.loaded.global_block()
            # onnxruntime checks input types exactly; the NumPy engine casts as fluid does
            feed = {n: np.asarray(a, dtype=to_numpy_dtype(block.var(n).dtype))
                    for n, (a, _) in values.items()}
            arrays = shared.session.run(shared.fetches, feed)
            out = {n: (a, []) for n, a in zip(shared.fetches, arrays)}
        else:
            feed = {n: (scope_mod.LoDTensor(np.asarray(a), lod) if lod else a)
                    for n, (a, lod) in values.items()}
            program, scope = shared.program, self._scope
            variant = shared.variant(values)
            if variant is not None:
                scope = self._variant_scopes.get(variant)
                if scope is None:
                    scope = self._variant_scopes[variant] = scope_mod.Scope(variant.scope)
                program = variant.program
            mode = threads.blas_threads() if self._blas_run(values) else contextlib.nullcontext()
            with mode:
                got = self._exe.run(program, feed=feed, fetch_list=list(shared.fetches),
                                    scope=scope, return_numpy=False)
            out = {}
            for n, t in zip(shared.fetches, got):
                lod = t.lod() if hasattr(t, "lod") else []
                out[n] = (np.asarray(t), [list(l) for l in (lod or [])])
        if shared.config.profile_enabled():
            self._times.append(time.perf_counter() - start)
        return out

    def _blas_run(self, values: Dict[str, Tuple[np.ndarray, List[List[int]]]]) -> bool:
        """Whether this run computes with BLAS's own threads (``_POOL_MIN_ELEMENTS``): two
        threads or more, and the loaded model's largest variable, scaled by how much larger
        than declared (free dims as 1) the largest input is, below the bound. A function of
        the model, the inputs' shapes and the thread count: the same inputs always take the
        same mode, so the same bits."""
        if threads.get_num_threads() < 2:
            return False
        shared = self._shared
        scale = max((np.size(a) / shared.feed_sizes[n] for n, (a, _) in values.items()),
                    default=1.0)
        return shared.widest * max(scale, 1.0) < _POOL_MIN_ELEMENTS


class AnalysisPredictor(PaddlePredictor):
    """The predictor of an ``AnalysisConfig`` (fluid 1.8's ``AnalysisPredictor``): the loaded
    program after the inference passes (with ``ir_optim``), on the NumPy engine or
    onnxruntime. Everything is ``PaddlePredictor``'s.

    Args:
        shared (_Shared): internal; made by ``create_paddle_predictor(AnalysisConfig(...))``.

    Returns:
        AnalysisPredictor: the predictor.

    Raises:
        None: loading errors come from ``create_paddle_predictor``.

    Example:
        >>> import tempfile
        >>> import fluidlite as fluid
        >>> from fluidlite.inference import (AnalysisConfig, AnalysisPredictor,
        ...                                  create_paddle_predictor)
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 4])
        ...     y = fluid.layers.fc(x, size=3, act="relu")
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> d = tempfile.mkdtemp()
        >>> _ = fluid.io.save_inference_model(d, ["x"], [y], exe, main_program=main)
        >>> predictor = create_paddle_predictor(AnalysisConfig(d))
        >>> isinstance(predictor, AnalysisPredictor)
        True
        >>> [(name, n) for name, n in predictor.applied_passes() if n]
        [('identity_op_clean_pass', 1), ('fc_fuse_pass', 1)]
    """


class NativePaddlePredictor(PaddlePredictor):
    """The predictor of a ``NativeConfig`` (fluid 1.8's ``NativePaddlePredictor``): the model
    run as saved, no passes, on the NumPy engine. Everything is ``PaddlePredictor``'s.

    Args:
        shared (_Shared): internal; made by ``create_paddle_predictor(native_config)``.

    Returns:
        NativePaddlePredictor: the predictor.

    Raises:
        None: loading errors come from ``create_paddle_predictor``.

    Example:
        >>> import tempfile
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> from fluidlite.inference import NativeConfig, PaddleTensor, create_paddle_predictor
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 4])
        ...     y = fluid.layers.fc(x, size=3, act="relu")
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> config = NativeConfig()
        >>> config.model_dir = tempfile.mkdtemp()
        >>> _ = fluid.io.save_inference_model(config.model_dir, ["x"], [y], exe,
        ...                                   main_program=main)
        >>> predictor = create_paddle_predictor(config)
        >>> type(predictor).__name__, predictor.applied_passes()
        ('NativePaddlePredictor', [])
        >>> predictor.run([PaddleTensor(np.ones((2, 4), "float32"))])[0].shape
        [2, 3]
    """


def create_paddle_predictor(config: Any) -> PaddlePredictor:
    """Load the model ``config`` names and prepare it to run (fluid 1.8's
    ``fluid.core.create_paddle_predictor``).

    Args:
        config: where the model is and how to run it: an ``AnalysisConfig`` (model files or
            ``set_model_buffer``), or a ``NativeConfig`` (the model run as saved, no passes).
            The predictor keeps a copy: changing ``config`` afterwards does not change it.

    Returns:
        PaddlePredictor: an ``AnalysisPredictor`` (the loaded and, with ``ir_optim``,
        optimised model) or, for a NativeConfig, a ``NativePaddlePredictor``.

    Raises:
        TypeError: ``config`` is neither an AnalysisConfig nor a NativeConfig.
        RuntimeError: a NativeConfig with ``use_gpu`` set.
        ValueError: ``config`` names no model, its params file is not in the program file's
            directory, or the model directory or a file (or buffer) is missing, corrupt or
            does not match the program (as ``load_inference_model``).

    Example:
        >>> import numpy as np, tempfile
        >>> import fluidlite as fluid
        >>> from fluidlite.inference import AnalysisConfig, create_paddle_predictor, PaddleTensor
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 4])
        ...     y = fluid.layers.fc(x, size=3, act="softmax")
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> model_dir = tempfile.mkdtemp()
        >>> _ = fluid.io.save_inference_model(model_dir, ["x"], [y], exe, main_program=main)
        >>> config = AnalysisConfig(model_dir)
        >>> predictor = create_paddle_predictor(config)
        >>> predictor.get_input_names()
        ['x']
    """
    if isinstance(config, NativeConfig):
        return NativePaddlePredictor(_Shared(config.to_analysis_config()))
    if not isinstance(config, AnalysisConfig):
        raise TypeError(f"create_paddle_predictor expects an AnalysisConfig or a NativeConfig, "
                        f"got {type(config).__name__}")
    return AnalysisPredictor(_Shared(config._copy()))
