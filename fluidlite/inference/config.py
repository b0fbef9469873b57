"""fluid 1.8's ``AnalysisConfig`` and ``NativeConfig``: where the model is and how the
predictor runs it.

Mirrors ``paddle/fluid/inference/api/paddle_analysis_config.h`` (release/1.8). This engine is
CPU-only and pure NumPy (or onnxruntime, ``enable_onnxruntime``), so some switches have
nothing to act on: they are accepted, recorded and answered by their getters, and their
docstrings say "no effect here" (docs/compatibility.md lists them). ``enable_use_gpu``,
``enable_tensorrt_engine`` and ``enable_quantizer`` are refused: silently running on the CPU,
or in float32, a model configured for a GPU or for int8 would hide a deployment mistake.
"""
from __future__ import annotations

import copy
import enum
import os
from typing import Any, List, Optional, Tuple

from .passes import DEFAULT_PASSES, PASSES

__all__ = ["AnalysisConfig", "NativeConfig", "PassStrategy"]


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

    def set_passes(self, passes: List[str]) -> None:
        """Run exactly ``passes``, in this order (each one of
        ``fluidlite.inference.passes.PASSES``; nothing changes when one is unknown)."""
        passes = list(passes)
        for name in passes:
            self._check(name)
        self._passes = passes

    def debug_string(self) -> str:
        """The pass list as fluid prints it: ``Passes to apply:`` then one ``  - name`` line
        per pass."""
        return "Passes to apply:\n" + "".join(f"  - {p}\n" for p in self._passes)

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
        """Write the program after each pass as a Graphviz file when the predictor is made
        (``AnalysisConfig.switch_ir_debug`` says where), as fluid's graph_viz_pass after
        every pass."""
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


class _Precision(enum.IntEnum):
    """``AnalysisConfig.Precision``: the precision ``enable_tensorrt_engine`` takes (fluid
    1.8's enum; TensorRT is refused here, the names exist so that such a call reaches that
    clear refusal)."""
    Float32 = 0
    Int8 = 1
    Half = 2


def _buffer(data: Any, size: Any, what: str) -> bytes:
    """The first ``size`` bytes of the bytes-like ``data`` (``set_model_buffer``)."""
    if isinstance(data, str):
        raise TypeError(f"AnalysisConfig.set_model_buffer: the {what} must be bytes (read the "
                        f"file in binary mode, open(path, 'rb')), got str")
    try:
        view = memoryview(data).cast("B")
    except TypeError:
        raise TypeError(f"AnalysisConfig.set_model_buffer: the {what} must be bytes, "
                        f"bytearray or memoryview, got {type(data).__name__}") from None
    if isinstance(size, bool) or not isinstance(size, int) or not 0 <= size <= len(view):
        raise ValueError(f"AnalysisConfig.set_model_buffer: the {what} size must be an int "
                         f"from 0 to the buffer's length {len(view)}, got {size!r}")
    return bytes(view[:size])


class AnalysisConfig:
    """Configuration of an inference predictor (fluid 1.8's ``AnalysisConfig``).

    Args:
        model_dir_or_prog_file: a directory written by ``save_inference_model`` (its
            ``__model__`` and parameter files), or, with ``params_file``, the program file;
            or another ``AnalysisConfig``, copied (fluid's copy constructor).
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

    Precision = _Precision
    Float32, Int8, Half = _Precision.Float32, _Precision.Int8, _Precision.Half

    def __init__(self, model_dir_or_prog_file: Any = None,
                 params_file: Optional[str] = None) -> None:
        if isinstance(model_dir_or_prog_file, AnalysisConfig):
            if params_file is not None:
                raise TypeError("AnalysisConfig(config) copies a config and takes no "
                                "params_file")
            self.__dict__.update(model_dir_or_prog_file._copy().__dict__)
            return
        self._model_dir = ""
        self._prog_file = ""
        self._params_file = ""
        self._buffers: Optional[Tuple[bytes, bytes]] = None
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
        self._optim_cache_dir = ""
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
        self._buffers = None

    def set_prog_file(self, x: str) -> None:
        """Set the program file alone (its parameters: ``set_params_file``)."""
        self._prog_file = os.fspath(x)
        self._buffers = None

    def set_params_file(self, x: str) -> None:
        """Set the combined parameter file."""
        self._params_file = os.fspath(x)
        self._buffers = None

    def set_model_buffer(self, prog_buffer: bytes, prog_buffer_size: int,
                         params_buffer: bytes, params_buffer_size: int) -> None:
        """Load the model from memory: the first ``prog_buffer_size`` bytes of ``prog_buffer``
        are the program file's contents (``__model__`` / ``.pdmodel``, or fluidlite's JSON
        program), the first ``params_buffer_size`` of ``params_buffer`` the combined
        parameter file's (``params_filename=`` of ``save_inference_model``; Paddle's format or
        fluidlite's) -- e.g. a model decrypted in memory, never written to disk. The config
        keeps a copy. A later ``set_model`` / ``set_prog_file`` / ``set_params_file`` names
        files again. ``prog_file()`` / ``params_file()`` answer '' meanwhile (fluid returns
        the buffers' bytes there).

        Args:
            prog_buffer: the program's bytes (bytes, bytearray or memoryview).
            prog_buffer_size: how many of them, 0 to ``len(prog_buffer)``.
            params_buffer: the combined parameters' bytes.
            params_buffer_size: how many of them, 0 to ``len(params_buffer)``.

        Raises:
            TypeError: a buffer is not bytes-like (a ``str``: read the file with ``'rb'``).
            ValueError: a size is not an int from 0 to its buffer's length. Nothing changes.

        Example:
            >>> import os, tempfile
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> from fluidlite.inference import (AnalysisConfig, PaddleTensor,
            ...                                  create_paddle_predictor)
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup):
            ...     x = fluid.data("x", [-1, 4])
            ...     y = fluid.layers.fc(x, size=3, act="softmax")
            >>> exe = fluid.Executor(fluid.CPUPlace())
            >>> _ = exe.run(startup)
            >>> d = tempfile.mkdtemp()
            >>> _ = fluid.io.save_inference_model(d, ["x"], [y], exe, main_program=main,
            ...                                   params_filename="params")
            >>> prog = open(os.path.join(d, "__model__"), "rb").read()
            >>> params = open(os.path.join(d, "params"), "rb").read()
            >>> config = AnalysisConfig()
            >>> config.set_model_buffer(prog, len(prog), params, len(params))
            >>> config.model_from_memory()
            True
            >>> predictor = create_paddle_predictor(config)
            >>> predictor.run([PaddleTensor(np.ones((2, 4), "float32"))])[0].shape
            [2, 3]
        """
        buffers = (_buffer(prog_buffer, prog_buffer_size, "program buffer"),
                   _buffer(params_buffer, params_buffer_size, "params buffer"))
        self._buffers = buffers
        self._model_dir = self._prog_file = self._params_file = ""

    def model_from_memory(self) -> bool:
        """Whether the model comes from ``set_model_buffer``."""
        return self._buffers is not None

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

    def fraction_of_gpu_memory_for_pool(self) -> float:
        """0.0 (no GPU memory pool; fluid answers the same without CUDA)."""
        return 0.0

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

    def enable_quantizer(self) -> None:
        """Refused: MKL-DNN's post-training int8 quantizer is not available (the kernels are
        float32). Quantized models saved by PaddleSlim run as they are."""
        raise RuntimeError("AnalysisConfig.enable_quantizer: MKL-DNN's int8 quantizer is not "
                           "available, fluidlite runs float32 kernels; remove the call, or "
                           "quantize with PaddleSlim and load the quantized model it saves")

    def quantizer_config(self) -> None:
        """Refused, as ``enable_quantizer``."""
        self.enable_quantizer()

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
        """On: creating the predictor writes the program after each inference pass as a
        Graphviz DOT file, ``<i>_ir_<pass>.dot`` for the i-th pass (from 0), as fluid's
        ``graph_viz_pass`` did, into ``set_optim_cache_dir``'s directory, else the current
        one (render one with ``dot -Tsvg``; ``fluidlite.viz.export`` draws a program as
        SVG or an explorable HTML page too). Each file is written atomically.

        Args:
            x: on or off.

        Example:
            >>> import os, tempfile
            >>> import fluidlite as fluid
            >>> from fluidlite.inference import AnalysisConfig, create_paddle_predictor
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup):
            ...     x = fluid.data("x", [-1, 4])
            ...     y = fluid.layers.fc(x, size=3, act="relu")
            >>> exe = fluid.Executor(fluid.CPUPlace())
            >>> _ = exe.run(startup)
            >>> d = tempfile.mkdtemp()
            >>> _ = fluid.io.save_inference_model(d, ["x"], [y], exe, main_program=main)
            >>> config = AnalysisConfig(d)
            >>> config.pass_builder().set_passes(["identity_op_clean_pass", "fc_fuse_pass"])
            >>> config.switch_ir_debug(True)
            >>> config.set_optim_cache_dir(os.path.join(d, "ir_debug"))
            >>> _ = create_paddle_predictor(config)
            >>> sorted(os.listdir(os.path.join(d, "ir_debug")))
            ['0_ir_identity_op_clean_pass.dot', '1_ir_fc_fuse_pass.dot']
        """
        self._ir_debug = bool(x)

    def ir_debug_enabled(self) -> bool:
        """Whether the passes' graphs are written (``switch_ir_debug`` or
        ``pass_builder().turn_on_debug()``)."""
        return self._ir_debug or self._passes.debug_enabled()

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
        """The directory ``switch_ir_debug`` writes its graphs into (made when needed; fluid
        also caches TensorRT engines there, which has no counterpart here)."""
        self._optim_cache_dir = os.fspath(opt_cache_dir)

    def to_native_config(self) -> "NativeConfig":
        """The ``NativeConfig`` of the same model files and settings (fluid's
        ``ToNativeConfig``): model_dir / prog_file / param_file, ``specify_input_name`` and the
        math library threads.

        Raises:
            ValueError: the model comes from ``set_model_buffer`` (a NativeConfig names files).

        Example:
            >>> from fluidlite.inference import AnalysisConfig
            >>> AnalysisConfig("infer_model").to_native_config().model_dir
            'infer_model'
        """
        if self._buffers is not None:
            raise ValueError("AnalysisConfig.to_native_config: this config holds its model in "
                             "memory (set_model_buffer); a NativeConfig names model files")
        native = NativeConfig()
        native.model_dir, native.prog_file = self._model_dir, self._prog_file
        native.param_file = self._params_file
        native.specify_input_name = self._specify_input_names
        if self._threads_set:
            native.set_cpu_math_library_num_threads(self._threads)
        return native

    def _copy(self) -> "AnalysisConfig":
        """A deep copy (a predictor keeps its own: changing the config later does not
        change it)."""
        return copy.deepcopy(self)

    def __repr__(self) -> str:
        where = ("<model in memory>" if self._buffers is not None
                 else self._model_dir or f"{self._prog_file}, {self._params_file}")
        return (f"AnalysisConfig({where!r}, ir_optim={self._ir_optim}, "
                f"onnxruntime={self._onnxruntime}, threads={self._threads})")


class NativeConfig:
    """Configuration of fluid's native predictor (fluid 1.8's ``NativeConfig``): the model run
    as saved, without the analysis passes. ``create_paddle_predictor(native_config)`` gives a
    ``NativePaddlePredictor``. Its fields are attributes, set directly as in fluid.

    Args:
        None: the constructor takes no argument; set the attributes below.

    Returns:
        NativeConfig: an empty configuration (no model named yet, one math library thread).

    Raises:
        None: the fields are checked when the predictor is created
            (``to_analysis_config``).

    Attributes:
        model_dir (str): a directory written by ``save_inference_model``.
        prog_file (str): the program file instead (then ``param_file``: its combined
            parameter file, '' for one file per parameter next to it).
        param_file (str): the combined parameter file.
        use_gpu (bool): must stay False (fluidlite runs on the CPU; True is refused when the
            predictor is created).
        device (int): the GPU id (no effect here).
        fraction_of_gpu_memory (float): the GPU memory share (no effect here).
        specify_input_name (bool): ``run`` matches its inputs to feeds by ``name`` (default:
            by position).

    Example:
        >>> import fluidlite as fluid
        >>> config = fluid.core.NativeConfig()
        >>> config.model_dir = "infer_model"
        >>> config.use_gpu = False
        >>> config.set_cpu_math_library_num_threads(2)
        >>> # predictor = fluid.core.create_paddle_predictor(config)
    """

    def __init__(self) -> None:
        self.model_dir = ""
        self.prog_file = ""
        self.param_file = ""
        self.use_gpu = False
        self.device = 0
        self.fraction_of_gpu_memory = -1.0
        self.specify_input_name = False
        self._threads = 1
        self._threads_set = False

    def set_cpu_math_library_num_threads(self, cpu_math_library_num_threads: int) -> None:
        """Threads of the math library, as ``AnalysisConfig.set_cpu_math_library_num_threads``.

        Args:
            cpu_math_library_num_threads: threads, >= 1.
        """
        n = int(cpu_math_library_num_threads)
        if n < 1:
            raise ValueError(f"cpu_math_library_num_threads must be >= 1, got {n}")
        self._threads, self._threads_set = n, True

    def cpu_math_library_num_threads(self) -> int:
        """The value of ``set_cpu_math_library_num_threads`` (default 1)."""
        return self._threads

    def to_analysis_config(self) -> AnalysisConfig:
        """The ``AnalysisConfig`` a native predictor runs: these files, ``ir_optim`` off, the
        NumPy engine (fluidlite's; what ``create_paddle_predictor`` uses).

        Raises:
            TypeError: a field has the wrong type (``model_dir`` not a str, ...).
            RuntimeError: ``use_gpu`` is True.
            ValueError: neither ``model_dir`` nor ``prog_file`` is set.
        """
        for field in ("model_dir", "prog_file", "param_file"):
            value = getattr(self, field)
            if not isinstance(value, (str, os.PathLike)):
                raise TypeError(f"NativeConfig.{field} must be a str, got "
                                f"{type(value).__name__}")
        if self.use_gpu:
            raise RuntimeError("NativeConfig.use_gpu: fluidlite runs inference on the CPU only; "
                               "set use_gpu = False")
        if not (os.fspath(self.model_dir) or os.fspath(self.prog_file)):
            raise ValueError("NativeConfig names no model: set model_dir, or prog_file (and "
                             "param_file for a combined parameter file)")
        config = AnalysisConfig()
        if os.fspath(self.prog_file):
            config.set_prog_file(self.prog_file)
            if os.fspath(self.param_file):
                config.set_params_file(self.param_file)
        else:
            config.set_model(self.model_dir)
            if os.fspath(self.param_file):
                config.set_params_file(self.param_file)
        config.switch_ir_optim(False)
        config.switch_specify_input_names(bool(self.specify_input_name))
        if self._threads_set:
            config.set_cpu_math_library_num_threads(self._threads)
        return config

    def __repr__(self) -> str:
        where = self.model_dir or f"{self.prog_file}, {self.param_file}"
        return f"NativeConfig({where!r}, threads={self._threads})"
