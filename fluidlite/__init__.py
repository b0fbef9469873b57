"""fluidlite: PaddlePaddle fluid 1.x's static-graph API on NumPy. ``import fluidlite as fluid``."""
from __future__ import annotations

import importlib as _importlib
from typing import Any

from . import _log  # noqa: F401
from . import ops as _ops  # noqa: F401  (registers every op)
# the collective ops' communicators (distributed/comm.py), imported when a collective first runs
_ops.collective.set_backend_loader(
    lambda: _importlib.import_module(".distributed.comm", __name__))
from . import core, formats  # noqa: F401  (formats registers the Program codecs)
# fluid.core's inference API (fluidlite/inference, the tools layer), imported on first use:
# core itself may not import upward, so the package root wires the names into its namespace
_CORE_INFERENCE = frozenset({"AnalysisConfig", "NativeConfig", "PaddlePredictor",
                             "AnalysisPredictor", "NativePaddlePredictor",
                             "create_paddle_predictor", "PaddleTensor", "PaddleBuf",
                             "PaddleDType", "PaddlePlace", "ZeroCopyTensor",
                             "paddle_dtype_size"})


def _core_getattr(name: str) -> Any:
    if name in _CORE_INFERENCE:
        return getattr(_importlib.import_module(f"{__name__}.inference"), name)
    raise AttributeError(f"module 'fluidlite.core' has no attribute '{name}'")


core.__getattr__ = _core_getattr  # type: ignore[attr-defined]
from . import framework, initializer, layers, unique_name  # noqa: F401
# clips and regularizers register their serialized forms with formats/serialize.py on import
from . import clip, regularizer  # noqa: F401
from .compiler import BuildStrategy, CompiledProgram, ExecutionStrategy  # noqa: F401
from .core.dtypes import VarType  # noqa: F401
from .core.ir import (Block, Operator, Parameter, Program, Variable,  # noqa: F401
                      default_main_program, default_startup_program, program_guard,
                      switch_main_program, switch_startup_program)
from .core.names import name_scope  # noqa: F401
from .core.scope import (CPUPlace, CUDAPinnedPlace, CUDAPlace, LoDTensor, Scope,  # noqa: F401
                         cpu_places, cuda_places, global_scope, is_compiled_with_cuda,
                         scope_guard)
from .executor import Executor  # noqa: F401
from .framework import in_dygraph_mode  # noqa: F401
# issue 16: fluid 1.8's other top-level names (framework.py)
from .framework import (LoDTensorArray, Tensor, cuda_pinned_places, device_guard,  # noqa: F401
                        get_flags, require_version, set_flags)
from .framework import ComplexVariable  # noqa: F401,E402  (issue 29: fluid 1.8's top level)
from .layers.io import fluid_data as data  # noqa: F401
from .param_attr import ParamAttr, WeightNormParamAttr  # noqa: F401
from .core.version import __version__  # noqa: F401

# submodules and names imported on first use (keeps `import fluidlite` light and acyclic)
_LAZY_MODULES = {"backward", "optimizer", "io", "nets", "debugger",
                 "net_drawer", "data_feeder", "testing", "metrics", "viz", "average", "profiler",
                 "cli", "lod_tensor", "compiler", "param_attr", "layer_helper",
                 "dygraph", "autograd", "nn",   # dygraph: imperative mode (fluidlite/dygraph/)
                 "dataset", "reader", "data_feed_desc", "pipeline",   # the data pipeline
                 "install_check"}
# issue 17: fleet collective mode (fluid.incubate.fleet), data parallel on MPI, transpiler
_LAZY_MODULES |= {"incubate", "distributed", "transpiler"}
_LAZY_MODULES |= {"evaluator", "wrapped_decorator"}   # fluid.evaluator, fluid.wrapped_decorator
# issue 13: loss scaling (fluidlite.amp) and fluid.contrib.mixed_precision (fluidlite/contrib/
# says which other contrib parts are not provided)
_LAZY_MODULES |= {"amp", "contrib"}
_NOT_PROVIDED: dict = {}
_LAZY_NAMES = {
    "gradients": ("backward", "gradients"),
    "DataFeeder": ("data_feeder", "DataFeeder"),
    "save": ("io", "save"), "load": ("io", "load"),
    "embedding": ("input", "embedding"),     # the v2 forms (fluid 1.8's fluid/input.py)
    "one_hot": ("input", "one_hot"),
    "create_lod_tensor": ("lod_tensor", "create_lod_tensor"),
    "create_random_int_lodtensor": ("lod_tensor", "create_random_int_lodtensor"),
    "DataFeedDesc": ("data_feed_desc", "DataFeedDesc"),    # issue 15: fluid.dataset's feed desc
    "ParallelExecutor": ("compiler", "ParallelExecutor"),
    # dygraph mode switches (issue 12)
    "enable_dygraph": ("dygraph", "enable_dygraph"),
    "disable_dygraph": ("dygraph", "disable_dygraph"),
    "enable_imperative": ("dygraph", "enable_imperative"),
    "disable_imperative": ("dygraph", "disable_imperative"),
    "seed": ("dygraph", "seed"),
    "save_dygraph": ("dygraph", "save_dygraph"),
    "set_global_initializer": ("initializer", "set_global_initializer"),
    "load_dygraph": ("dygraph", "load_dygraph"),
}

# issue 16: fluid 1.8 re-exported these at the top level
_LAZY_NAMES.update({
    "load_program_state": ("io", "load_program_state"),
    "set_program_state": ("io", "set_program_state"),
    "memory_optimize": ("transpiler", "memory_optimize"),
    "release_memory": ("transpiler", "release_memory"),
    "DistributeTranspiler": ("transpiler", "DistributeTranspiler"),
    "DistributeTranspilerConfig": ("transpiler", "DistributeTranspilerConfig"),
})

# issue 29: fluid 1.8's package did `from .dygraph.nn import *`, `from .dygraph.layers import *`
# and `from .dataset import *`, so fluid.Linear, fluid.Layer, fluid.DatasetFactory... exist
_LAZY_NAMES.update({n: ("dygraph", n) for n in (
    "Conv2D", "Conv3D", "Pool2D", "Linear", "BatchNorm", "Dropout", "Embedding", "GRUUnit",
    "InstanceNorm", "LayerNorm", "NCE", "PRelu", "BilinearTensorProduct", "Conv2DTranspose",
    "Conv3DTranspose", "GroupNorm", "SpectralNorm", "TreeConv", "Layer")})
_LAZY_NAMES.update({n: ("dataset", n) for n in ("DatasetFactory", "InMemoryDataset",
                                                "QueueDataset")})


def __getattr__(name: str) -> Any:
    if name in _LAZY_MODULES:
        return _importlib.import_module(f"{__name__}.{name}")
    if name in _LAZY_NAMES:
        mod, attr = _LAZY_NAMES[name]
        return getattr(_importlib.import_module(f"{__name__}.{mod}"), attr)
    if name in _NOT_PROVIDED:
        raise AttributeError(_NOT_PROVIDED[name])
    raise AttributeError(f"module 'fluidlite' has no attribute '{name}'")
