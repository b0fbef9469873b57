"""fluid 1.8's ``AnalysisConfig``: where the model is and how the predictor runs it.

Mirrors ``paddle/fluid/inference/api/paddle_analysis_config.h`` (release/1.8). This engine is
CPU-only and pure NumPy (or onnxruntime, ``enable_onnxruntime``), so some switches have
nothing to act on: they are accepted, recorded and answered by their getters, and their
docstrings say "no effect here" (docs/compatibility.md lists them). ``enable_use_gpu`` and
``enable_tensorrt_engine`` are refused: silently running on the CPU a model configured for a
GPU would hide a deployment mistake.
"""
from __future__ import annotations

import copy
import os
from typing import List, Optional

from .passes import DEFAULT_PASSES, PASSES

__all__ = ["AnalysisConfig", "PassStrategy"]


class PassStrategy:
    """The ordered list of optimisation passes a predictor runs (fluid's ``pass_builder()``).

    Args:
        passes: pass names, in order (default: every pass of ``fluidlite.inference.passes``).

    Returns:
        PassStrategy: the pass list; edit it with ``append_pass`` / ``insert_pass`` /
        ``delete_pass``.

    Raises:
        TypeError: ``passes`` is not iterable (the constructor does not check the names;
            ``append_pass`` / ``insert_pass`` raise ValueError for an unknown one).

    Example:
        >>> from fluidlite.inference import AnalysisConfig
        >>> config = AnalysisConfig()
        >>> config.pass_builder().all_passes()
        ['is_test_pass', 'simplify_with_basic_ops_pass', ...]
        >>> config.pass_builder().delete_pass("fc_fuse_pass")
        >>> "fc_fuse_pass" in config.pass_builder().all_passes()
        False
    """

    def __init__(self, passes: Optional[List[str]] = None) -> None:
        self._passes = list(DEFAULT_PASSES if passes is None else passes)
        self._debug = False

    def all_passes(self) -> List[str]:
        """The pass names, in the order they run."""
        return list(self._passes)

    def delete_pass(self, name: str) -> None:
        """Remove every occurrence of ``name`` (an unknown name is ignored, as in fluid)."""
        self._passes = [p for p in self._passes if p != name]

    def append_pass(self, name: str) -> None:
        """Run ``name`` last; it must be one of ``fluidlite.inference.passes.PASSES``."""
        self._check(name)
        self._passes.append(name)

    def insert_pass(self, idx: int, name: str) -> None:
        """Run ``name`` at position ``idx``."""
        self._check(name)
        self._passes.insert(idx, name)

    def turn_on_debug(self) -> None:
        """Record the switch (no effect here: print ``predictor.program()`` instead)."""
        self._debug = True

    def debug_enabled(self) -> bool:
        """Whether ``turn_on_debug`` was called."""
        return self._debug

    @staticmethod
    def _check(name: str) -> None:
        if name not in PASSES:
            raise ValueError(f"unknown inference pass '{name}' (known: {', '.join(PASSES)})")

    def __repr__(self) -> str:
        return f"PassStrategy({self._passes})"


class AnalysisConfig:
    """Configuration of an inference predictor (fluid 1.8's ``AnalysisConfig``).

    Args:
        model_dir_or_prog_file: a directory written by ``save_inference_model`` (its
            ``__model__`` and parameter files), or, with ``params_file``, the program file.
        params_file: the combined parameter file (``params_filename=`` of the save).

    Returns:
        AnalysisConfig: the configuration, to pass to ``create_paddle_predictor``.

    Raises:
        TypeError: ``model_dir_or_prog_file`` or ``params_file`` is not a str or path-like.

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
        >>> config.disable_gpu(); config.switch_ir_optim(True)
        >>> predictor = create_paddle_predictor(config)
        >>> predictor.get_input_names(), len(predictor.get_output_names())
        (['x'], 1)
    """

    def __init__(self, model_dir_or_prog_file: Optional[str] = None,
                 params_file: Optional[str] = None) -> None:
        self._model_dir = ""
        self._prog_file = ""
        self._params_file = ""
        if model_dir_or_prog_file is not None:
            self.set_model(model_dir_or_prog_file, params_file)
        self._ir_optim = True
        self._passes = PassStrategy()
        self._threads = 1
        self._threads_set = False
        self._feed_fetch_ops = True
        self._specify_input_names = False
        self._memory_optim = False
        self._profile = False
        self._glog_info = True
        self._mkldnn = False
        self._ir_debug = False
        self._onnxruntime = False
        self._specialize = True
        self._specialize_capacity = 8

    # -- the model ------------------------------------------------------------------------
    def set_model(self, model_dir_or_prog_file: str, params_file: Optional[str] = None) -> None:
        """A model directory, or (with ``params_file``) a program file and its combined
        parameter file."""
        if params_file is None:
            self._model_dir = os.fspath(model_dir_or_prog_file)
            self._prog_file = self._params_file = ""
        else:
            self._model_dir = ""
            self._prog_file = os.fspath(model_dir_or_prog_file)
            self._params_file = os.fspath(params_file)

    def set_prog_file(self, x: str) -> None:
        """Set the program file alone (its parameters: ``set_params_file``)."""
        self._prog_file = os.fspath(x)

    def set_params_file(self, x: str) -> None:
        """Set the combined parameter file."""
        self._params_file = os.fspath(x)

    def model_dir(self) -> str:
        """The model directory ('' when a program file was given)."""
        return self._model_dir

    def prog_file(self) -> str:
        """The program file ('' when a model directory was given)."""
        return self._prog_file

    def params_file(self) -> str:
        """The combined parameter file ('' when parameters are one file each)."""
        return self._params_file

    # -- devices --------------------------------------------------------------------------
    def disable_gpu(self) -> None:
        """Run on the CPU (always the case here)."""

    def use_gpu(self) -> bool:
        """False: this engine runs on the CPU only."""
        return False

    def gpu_device_id(self) -> int:
        """0 (no GPU)."""
        return 0

    def memory_pool_init_size_mb(self) -> int:
        """0 (no GPU memory pool)."""
        return 0

    def enable_use_gpu(self, memory_pool_init_size_mb: int = 100, device_id: int = 0) -> None:
        """Refused: fluidlite runs on the CPU only (use ``disable_gpu()``)."""
        raise RuntimeError("AnalysisConfig.enable_use_gpu: fluidlite runs inference on the CPU "
                           "only (NumPy, or onnxruntime with enable_onnxruntime()); remove "
                           "the call or use disable_gpu()")

    def enable_tensorrt_engine(self, *args: object, **kwargs: object) -> None:
        """Refused: TensorRT needs a GPU."""
        raise RuntimeError("AnalysisConfig.enable_tensorrt_engine: TensorRT needs a GPU; "
                           "fluidlite runs inference on the CPU only")

    def tensorrt_engine_enabled(self) -> bool:
        """False."""
        return False

    def enable_mkldnn(self) -> None:
        """Record the switch (no effect here: the kernels are NumPy's)."""
        self._mkldnn = True

    def mkldnn_enabled(self) -> bool:
        """Whether ``enable_mkldnn`` was called."""
        return self._mkldnn

    def set_mkldnn_cache_capacity(self, capacity: int = 0) -> None:
        """Accepted (no effect here)."""

    def set_mkldnn_op(self, op_list: object) -> None:
        """Accepted (no effect here)."""

    def set_cpu_math_library_num_threads(self, cpu_math_library_num_threads: int) -> None:
        """Threads of the math library. The NumPy engine: creating the predictor makes
        fluidlite compute on this many threads, process-wide, as Paddle's predictor sets its
        math library's threads at creation (``fluidlite.core.threads.set_math_threads``: from
        2 on, fluidlite's own intra-op threads with BLAS on one thread per part -- or, for a
        run whose largest variable is small, the kernels on the calling thread and BLAS
        threading its GEMMs, see ``predictor._POOL_MIN_ELEMENTS``; 1, one thread and BLAS on
        one thread; needs ``threadpoolctl``, the ``threads`` extra). Left as they are when
        this was never called. onnxruntime: its intra-op threads.

        Args:
            cpu_math_library_num_threads: threads, >= 1.

        Example:
            >>> import fluidlite as fluid
            >>> config = fluid.core.AnalysisConfig("infer_model")
            >>> config.set_cpu_math_library_num_threads(2)
        """
        n = int(cpu_math_library_num_threads)
        if n < 1:
            raise ValueError(f"cpu_math_library_num_threads must be >= 1, got {n}")
        self._threads = n
        self._threads_set = True

    def cpu_math_library_num_threads(self) -> int:
        """The value of ``set_cpu_math_library_num_threads`` (default 1)."""
        return self._threads

    # -- onnxruntime (fluidlite's own engine switch) -----------------------------------------
    def enable_onnxruntime(self) -> None:
        """Run the model with onnxruntime (needs ``pip install 'fluidlite[onnx]'``): the
        predictor exports the loaded program with ``fluidlite.onnx`` and runs it with
        ``cpu_math_library_num_threads`` intra-op threads. A model whose ops the exporter does
        not cover, or a missing onnxruntime, falls back to the NumPy engine with a warning
        naming the reason. Not in fluid 1.8 (Paddle 2.x has the same switch)."""
        self._onnxruntime = True

    def disable_onnxruntime(self) -> None:
        """Run the model with the NumPy engine (the default)."""
        self._onnxruntime = False

    def use_onnxruntime(self) -> bool:
        """Whether ``enable_onnxruntime`` is on."""
        return self._onnxruntime

    # -- graph optimisation ----------------------------------------------------------------
    def switch_ir_optim(self, x: bool = True) -> None:
        """Run the inference passes (``pass_builder().all_passes()``) on the loaded program
        when the predictor is created (default on); off runs the program as saved."""
        self._ir_optim = bool(x)

    def ir_optim(self) -> bool:
        """Whether the inference passes run."""
        return self._ir_optim

    def switch_shape_specialization(self, x: bool = True, capacity: int = 8) -> None:
        """Optimise the program again for input sizes that recur (default on, ``capacity``
        8). A model saved with free map sizes (``[-1, 3, -1, -1]``, as PP-OCR's) leaves the
        passes that need them idle -- the channels-last layout, the separable-block fusion,
        the banded depthwise filters. With this on, the second run of an input shape (every
        dim but the first, the batch) has the passes run on a copy of the loaded program
        given those sizes, and that shape's runs use it from then on; other shapes keep the
        program made at creation. At most ``capacity`` specialised programs are kept, the
        least recently used dropped first (each holds its own folded weights). Only with
        ``ir_optim`` and the NumPy engine, for programs of one block and inputs without LoD.
        Not in fluid 1.8 (fluidlite's).

        Args:
            x: on or off.
            capacity: the most specialised programs kept (>= 1).

        Raises:
            ValueError: ``capacity`` is not a positive int.

        Example:
            >>> from fluidlite.inference import AnalysisConfig
            >>> config = AnalysisConfig("ocr_det_model")
            >>> config.switch_shape_specialization(True, capacity=4)
            >>> config.shape_specialization_enabled(), config.shape_specialization_capacity()
            (True, 4)
            >>> # predictor = create_paddle_predictor(config); after two runs of one size,
            >>> # predictor.specializations() -> [({'x': [-1, 3, 640, 640]}, program, passes)]
        """
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
            raise ValueError(f"switch_shape_specialization: capacity must be an int >= 1, "
                             f"got {capacity!r}")
        self._specialize = bool(x)
        self._specialize_capacity = capacity

    def shape_specialization_enabled(self) -> bool:
        """Whether ``switch_shape_specialization`` is on."""
        return self._specialize

    def shape_specialization_capacity(self) -> int:
        """The most specialised programs a predictor keeps."""
        return self._specialize_capacity

    def switch_ir_debug(self, x: bool = True) -> None:
        """Record the switch (no effect here: print ``predictor.program()`` instead)."""
        self._ir_debug = bool(x)

    def pass_builder(self) -> PassStrategy:
        """The pass list (``delete_pass``, ``append_pass``, ``all_passes``)."""
        return self._passes

    def delete_pass(self, name: str) -> None:
        """Do not run the pass ``name`` (Paddle 2.x's shortcut for
        ``pass_builder().delete_pass``)."""
        self._passes.delete_pass(name)

    def enable_memory_optim(self) -> None:
        """Record the switch (no effect here: the executor's plans already free each
        temporary after its last reader)."""
        self._memory_optim = True

    def memory_optim_enabled(self) -> bool:
        """Whether ``enable_memory_optim`` was called."""
        return self._memory_optim

    # -- feeding --------------------------------------------------------------------------
    def switch_use_feed_fetch_ops(self, x: bool = True) -> None:
        """Record the switch. Fluid turns it off for the zero-copy API; here both ``run``
        and ``zero_copy_run`` work whatever its value."""
        self._feed_fetch_ops = bool(x)

    def use_feed_fetch_ops_enabled(self) -> bool:
        """The value of ``switch_use_feed_fetch_ops``."""
        return self._feed_fetch_ops

    def switch_specify_input_names(self, x: bool = True) -> None:
        """On: ``run`` matches its ``PaddleTensor`` inputs to feeds by ``name``; off (the
        default): by position."""
        self._specify_input_names = bool(x)

    def specify_input_name(self) -> bool:
        """The value of ``switch_specify_input_names``."""
        return self._specify_input_names

    # -- diagnostics -----------------------------------------------------------------------
    def enable_profile(self) -> None:
        """Record run times per ``run``/``zero_copy_run`` (``predictor.profile()`` reads
        them); fluid prints an op profile instead."""
        self._profile = True

    def profile_enabled(self) -> bool:
        """Whether ``enable_profile`` was called."""
        return self._profile

    def disable_glog_info(self) -> None:
        """Accepted (no effect here: fluidlite logs nothing while predicting)."""
        self._glog_info = False

    def glog_info_disabled(self) -> bool:
        """Whether ``disable_glog_info`` was called."""
        return not self._glog_info

    def set_optim_cache_dir(self, opt_cache_dir: str) -> None:
        """Accepted (no effect here: nothing is cached on disk)."""

    def _copy(self) -> "AnalysisConfig":
        """A deep copy (a predictor keeps its own: changing the config later does not
        change it)."""
        return copy.deepcopy(self)

    def __repr__(self) -> str:
        where = self._model_dir or f"{self._prog_file}, {self._params_file}"
        return (f"AnalysisConfig({where!r}, ir_optim={self._ir_optim}, "
                f"onnxruntime={self._onnxruntime}, threads={self._threads})")
