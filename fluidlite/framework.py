"""``fluid.framework``: the IR classes and the default-program state."""
from __future__ import annotations

from typing import Any, Dict, List

import numpy as np

from .core import mode as _mode
from .core.dtypes import convert_np_dtype_to_dtype_  # noqa: F401
from .core.ir import (Block, Operator, OpRole, Parameter, Program, Variable,  # noqa: F401
                      default_main_program, default_startup_program, program_guard,
                      switch_main_program, switch_startup_program)
from .core.names import grad_var_name, name_scope  # noqa: F401
from .core.scope import cpu_places, cuda_places, is_compiled_with_cuda  # noqa: F401

__all__ = ["Program", "Block", "Variable", "Parameter", "Operator", "OpRole", "program_guard",
           "default_main_program", "default_startup_program", "switch_main_program",
           "switch_startup_program", "name_scope", "in_dygraph_mode", "grad_var_name",
           "convert_np_dtype_to_dtype_", "cpu_places", "cuda_places", "is_compiled_with_cuda",
           "ComplexVariable"]


def in_dygraph_mode() -> bool:
    """Whether ops run imperatively (inside ``fluid.dygraph.guard()`` or after
    ``enable_dygraph()``).

    Args:
        None: this function takes no arguments.

    Returns:
        bool: True in dygraph mode, False in static mode.

    Raises:
        None: this function does not raise.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> fluid.in_dygraph_mode()
        False
        >>> with fluid.dygraph.guard():
        ...     print(fluid.in_dygraph_mode())
        True
    """
    return _mode.tracer is not None


# -- issue 16: the rest of fluid 1.8's top-level names (fluid/framework.py there) ---------------
import contextlib as _contextlib  # noqa: E402
import logging as _logging  # noqa: E402
import os as _os  # noqa: E402
import re as _re  # noqa: E402
from typing import Any as _Any, Dict as _Dict, Iterator as _Iterator, List as _List  # noqa: E402
from typing import Optional as _Optional, Sequence as _Sequence, Union as _Union  # noqa: E402

from .core.scope import CUDAPinnedPlace as _CUDAPinnedPlace, LoDTensor  # noqa: E402

__all__ += ["Tensor", "LoDTensorArray", "get_flags", "set_flags", "require_version",
            "device_guard", "cuda_pinned_places", "FLUID_API_VERSION"]

_log = _logging.getLogger("fluidlite")

#: ``fluid.Tensor`` is ``fluid.LoDTensor`` in fluid 1.8 (one pybind class with two names).
Tensor = LoDTensor


class LoDTensorArray(list):
    """``fluid.LoDTensorArray``: a list of ``LoDTensor`` (what a tensor-array variable holds).

    Like fluid 1.8's pybind type it supports ``len``, indexing, item assignment and ``append``;
    only ``LoDTensor`` items are accepted (TypeError otherwise, as fluid).

    Args:
        items (Sequence[LoDTensor]): the initial tensors, appended in order. Default ``()`` (empty).

    Returns:
        LoDTensorArray: a list subclass holding the tensors.

    Raises:
        TypeError: an item is not a LoDTensor.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> arr = fluid.LoDTensorArray()
        >>> t = fluid.LoDTensor()
        >>> t.set(np.ones((2, 2), "float32"), fluid.CPUPlace())
        >>> arr.append(t)
        >>> len(arr), arr[0].shape()
        (1, [2, 2])
    """

    def __init__(self, items: _Sequence[LoDTensor] = ()) -> None:
        super().__init__()
        for item in items:
            self.append(item)

    @staticmethod
    def _check(item: _Any, where: str) -> LoDTensor:
        if not isinstance(item, LoDTensor):
            raise TypeError(f"LoDTensorArray.{where}: the item must be a fluid.LoDTensor, but "
                            f"received {type(item).__name__}")
        return item

    def append(self, tensor: LoDTensor) -> None:  # type: ignore[override]
        """Append ``tensor`` (a LoDTensor) at the end.

        Args:
            tensor (LoDTensor): the tensor to append.

        Returns:
            None.

        Raises:
            TypeError: ``tensor`` is not a LoDTensor.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> arr = fluid.LoDTensorArray()
            >>> for k in range(3):
            ...     t = fluid.LoDTensor()
            ...     t.set(np.full((1,), k, "float32"), fluid.CPUPlace())
            ...     arr.append(t)
            >>> [float(np.array(t)[0]) for t in arr]
            [0.0, 1.0, 2.0]
        """
        super().append(self._check(tensor, "append"))

    def __setitem__(self, index: _Any, tensor: _Any) -> None:
        if isinstance(index, slice):
            tensor = [self._check(t, "__setitem__") for t in tensor]
        else:
            self._check(tensor, "__setitem__")
        super().__setitem__(index, tensor)

    def _move_to_list(self) -> _List[LoDTensor]:
        """The items as a plain list (fluid 1.8's name); the array is left empty."""
        items = list(self)
        self.clear()
        return items


# -- global flags ------------------------------------------------------------------------------
# fluid 1.8's public FLAGS_* (gflags exported to Python) with their defaults. fluidlite keeps
# their values so scripts that tune them run unchanged; none of them changes what fluidlite
# computes (they configure fluid's allocators, GPU libraries, thread pools and profilers).
# Like fluid, a flag's start value can come from the environment (FLAGS_x=... python train.py).
_FLAG_DEFAULTS: _Dict[str, _Any] = {
    "FLAGS_allocator_strategy": "auto_growth", "FLAGS_benchmark": False,
    "FLAGS_check_nan_inf": False, "FLAGS_conv_workspace_size_limit": 512,
    "FLAGS_cpu_deterministic": False, "FLAGS_cudnn_batchnorm_spatial_persistent": False,
    "FLAGS_cudnn_deterministic": False, "FLAGS_cudnn_exhaustive_search": False,
    "FLAGS_dist_threadpool_size": 0, "FLAGS_dygraph_debug": 0,
    "FLAGS_eager_delete_scope": True, "FLAGS_eager_delete_tensor_gb": 0.0,
    "FLAGS_enable_parallel_graph": False, "FLAGS_enable_unused_var_check": False,
    "FLAGS_fast_eager_deletion_mode": True, "FLAGS_fraction_of_cpu_memory_to_use": 1.0,
    "FLAGS_fraction_of_cuda_pinned_memory_to_use": 0.5,
    "FLAGS_fraction_of_gpu_memory_to_use": 0.92, "FLAGS_free_idle_chunk": False,
    "FLAGS_free_when_no_cache_hit": False, "FLAGS_fuse_parameter_groups_size": 3,
    "FLAGS_fuse_parameter_memory_size": -1.0, "FLAGS_gpu_allocator_retry_time": 2000,
    "FLAGS_gpu_memory_limit_mb": 0, "FLAGS_init_allocated_mem": False,
    "FLAGS_initial_cpu_memory_in_mb": 500, "FLAGS_initial_gpu_memory_in_mb": 0,
    "FLAGS_inner_op_parallelism": 0, "FLAGS_local_exe_sub_scope_limit": 256.0,
    "FLAGS_max_inplace_grad_add": 0, "FLAGS_memory_fraction_of_eager_deletion": 1.0,
    "FLAGS_paddle_num_threads": 1, "FLAGS_pe_profile_fname": "",
    "FLAGS_print_sub_graph_dir": "", "FLAGS_reader_queue_speed_test_mode": False,
    "FLAGS_reallocate_gpu_memory_in_mb": 0, "FLAGS_rpc_deadline": 180000,
    "FLAGS_selected_gpus": "", "FLAGS_sort_sum_gradient": False,
    "FLAGS_sync_nccl_allreduce": True, "FLAGS_tracer_profile_fname": "xxgperf",
    "FLAGS_use_mkldnn": False, "FLAGS_use_ngraph": False, "FLAGS_use_pinned_memory": True,
    "FLAGS_use_system_allocator": False,
}


def _parse_env_flag(name: str, default: _Any, text: str) -> _Any:
    try:
        if isinstance(default, bool):
            return text.strip().lower() in ("1", "true", "yes", "on")
        if isinstance(default, int):
            return int(text)
        if isinstance(default, float):
            return float(text)
    except ValueError:
        _log.warning("ignoring environment %s=%r: expected a %s", name, text,
                     type(default).__name__)
        return default
    return text


_flags: _Dict[str, _Any] = {name: _parse_env_flag(name, v, _os.environ[name])
                            if name in _os.environ else v for name, v in _FLAG_DEFAULTS.items()}


def _coerce_flag(name: str, value: _Any) -> _Any:
    default = _FLAG_DEFAULTS[name]
    kind = type(default)
    if isinstance(default, bool):
        ok = isinstance(value, (bool, int)) and not isinstance(value, float)
    elif isinstance(default, (int, float)):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        ok = ok and (kind is float or float(value).is_integer())
    else:
        ok = isinstance(value, str)
    if not ok:
        raise TypeError(f"set_flags: {name} takes a {kind.__name__}, but received "
                        f"{value!r} ({type(value).__name__})")
    return kind(value)


def set_flags(flags: _Dict[str, _Any]) -> None:
    """Set global flags, e.g. ``fluid.set_flags({'FLAGS_eager_delete_tensor_gb': 1.0})``.

    ``flags`` must be a dict (TypeError otherwise) of fluid 1.8's public flags (ValueError for
    any other name, as fluid: "Flag X cannot set its value through this function."). Values
    are checked against the flag's type (TypeError). The values are kept and returned by
    ``get_flags``; fluidlite's computation does not depend on them (see ``_FLAG_DEFAULTS``).

    Args:
        flags (dict): ``{flag name: value}``, names among fluid 1.8's public flags.

    Returns:
        None. Either every flag is set or, when one is rejected, none.

    Raises:
        TypeError: ``flags`` is not a dict, or a value does not have its flag's type.
        ValueError: a name is not one of fluid 1.8's public flags.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> fluid.set_flags({"FLAGS_check_nan_inf": True})
        >>> fluid.get_flags("FLAGS_check_nan_inf")
        {'FLAGS_check_nan_inf': True}
        >>> fluid.set_flags({"FLAGS_check_nan_inf": False})
    """
    if not isinstance(flags, dict):
        raise TypeError(f"flags in set_flags should be a dict, but received "
                        f"{type(flags).__name__}")
    new = {}
    for key, value in flags.items():
        if key not in _FLAG_DEFAULTS:
            raise ValueError(f"Flag {key} cannot set its value through this function.")
        new[key] = _coerce_flag(key, value)
    _flags.update(new)                  # all or nothing: every flag was checked first


def get_flags(flags: _Union[str, _Sequence[str]]) -> _Dict[str, _Any]:
    """``{flag: value}`` for one flag name or a list/tuple of names, e.g.
    ``fluid.get_flags(['FLAGS_eager_delete_tensor_gb'])``. TypeError for another argument type,
    ValueError for a name that is not one of fluid 1.8's public flags (fluid's messages).

    Args:
        flags (str|list|tuple): one flag name, or a list/tuple of names.

    Returns:
        dict: ``{flag name: value}`` for each name asked for.

    Raises:
        TypeError: ``flags`` is not a str, list or tuple.
        ValueError: a name is not one of fluid 1.8's public flags.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> flags = fluid.get_flags(["FLAGS_check_nan_inf"])
        >>> list(flags)
        ['FLAGS_check_nan_inf']
    """
    if isinstance(flags, str):
        flags = [flags]
    elif not isinstance(flags, (list, tuple)):
        raise TypeError(f"Flags in get_flags should be a list, tuple or string, but received "
                        f"{type(flags).__name__}")
    out = {}
    for key in flags:
        if key not in _flags:
            raise ValueError(f"Flag {key} cannot get its value through this function.")
        out[key] = _flags[key]
    return out


# -- require_version ---------------------------------------------------------------------------
#: The fluid release whose API fluidlite implements; ``require_version`` compares with it.
FLUID_API_VERSION = "1.8.5"
_VERSION_RE = _re.compile(r"\d+(\.\d+){0,3}")


class VersionError(Exception):
    """Raised by ``require_version`` (fluid 1.8 raised a plain Exception with this text)."""


def _version_key(version: str) -> _List[int]:
    parts = [int(p) for p in version.split(".")]
    return parts + [0] * (4 - len(parts))


def require_version(min_version: str, max_version: _Optional[str] = None) -> None:
    """Check that the fluid API fluidlite provides (``FLUID_API_VERSION``, 1.8.5) is at least
    ``min_version`` (and at most ``max_version``); versions are 1 to 4 dot-separated integers
    ('1.8', '1.5.2.0'), compared component-wise with missing components 0.

    TypeError for a non-str version, ValueError for a badly formatted one, and
    ``VersionError`` (an Exception, as fluid) when the range excludes 1.8.5.

    Args:
        min_version (str): the lowest acceptable version, e.g. ``"1.6"``.
        max_version (str, optional): the highest acceptable version. Default None (no upper
            bound).

    Returns:
        None, when 1.8.5 is in the range.

    Raises:
        TypeError: a version is not a str (``max_version`` may be None).
        ValueError: a version is not 1 to 4 dot-separated integers.
        VersionError: 1.8.5 is below ``min_version`` or above ``max_version``.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> fluid.require_version("1.6.0")      # fluidlite provides fluid 1.8's API: passes
    """
    if not isinstance(min_version, str):
        raise TypeError(f"The type of 'min_version' in require_version must be str, but "
                        f"received {type(min_version)}.")
    if not isinstance(max_version, (str, type(None))):
        raise TypeError(f"The type of 'max_version' in require_version must be str or "
                        f"type(None), but received {type(max_version)}.")
    for arg, value in (("min_version", min_version), ("max_version", max_version)):
        if value is not None and not _VERSION_RE.fullmatch(value):
            raise ValueError(f"The value of '{arg}' in require_version must be in format "
                             f"'\\d+(\\.\\d+){{0,3}}', like '1.5.2.0', but received {value}")
    installed = _version_key(FLUID_API_VERSION)
    if max_version is not None:
        if not _version_key(min_version) <= installed <= _version_key(max_version):
            raise VersionError(f"VersionError: PaddlePaddle version in [{min_version}, "
                               f"{max_version}] required, but {FLUID_API_VERSION} installed "
                               f"(fluidlite implements the fluid {FLUID_API_VERSION} API).")
    elif installed < _version_key(min_version):
        raise VersionError(f"VersionError: PaddlePaddle version {min_version} or higher is "
                           f"required, but {FLUID_API_VERSION} installed (fluidlite implements "
                           f"the fluid {FLUID_API_VERSION} API).")


# -- device_guard ------------------------------------------------------------------------------
_current_device: _Optional[str] = None


@_contextlib.contextmanager
def device_guard(device: _Optional[str] = None) -> _Iterator[None]:
    """Ops created inside get the attribute ``op_device`` = ``device`` ('cpu', 'gpu' or
    'gpu:N'), as fluid 1.8 (which used it to place ops and to cut pipeline stages). fluidlite
    runs every op on the CPU whatever the attribute says; it is kept so programs (and their
    exports) carry the same annotations. ValueError for any other device string, and for
    'cpu:N' ("Should not set device id for cpu.").

    Args:
        device (str | None): ``"cpu"`` or ``"gpu"`` / ``"gpu:N"``, recorded on the ops as
            ``op_device``.

    Returns:
        contextmanager: a context manager yielding None; ops created inside carry ``op_device``
        and the previous device is restored on exit.

    Raises:
        ValueError: ``device`` is not ``"cpu"``, ``"gpu"``, ``"gpu:N"``, ``""`` or None (also for
            ``"cpu:N"`` and a non-integer id), raised on entering the block.
        TypeError: ``device`` is neither a str nor None.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 2])
        ...     with fluid.device_guard("cpu"):
        ...         y = fluid.layers.relu(x)
        >>> main.global_block().ops[-1].attr("op_device")
        'cpu'
    """
    global _current_device
    name, index = device, None
    if device and ":" in device:
        name, index = device.split(":", 1)
        if name == "cpu":
            raise ValueError("Should not set device id for cpu.")
    if name not in ("cpu", "gpu", "", None):
        raise ValueError(f"The Attr(device) should be 'cpu' or 'gpu', and it can also be empty "
                         f"string or None when there is no need to specify device. But "
                         f"received {device}")
    if index is not None and not index.isdigit():
        raise ValueError(f"device_guard: the device id in {device!r} must be an integer")
    programs = (default_main_program(), default_startup_program())
    before = {id(op) for program in programs for block in program.blocks for op in block.ops}
    previous, _current_device = _current_device, device
    try:
        yield
    finally:
        _current_device = previous
        if device:       # ops created inside (also parameter initializers in startup)
            for program in programs:
                for block in program.blocks:
                    for op in block.ops:
                        if id(op) not in before and not op.attrs.get("op_device"):
                            op.attrs["op_device"] = device


def cuda_pinned_places(device_count: _Optional[int] = None) -> _List[_CUDAPinnedPlace]:
    """``device_count`` (default 1) ``CUDAPinnedPlace`` objects. Like ``cuda_places``, these
    places are accepted everywhere and everything runs on the CPU (fluid 1.8 asserted a CUDA
    build).

    Args:
        device_count (int, optional): how many places, >= 1. Default None (1).

    Returns:
        list[CUDAPinnedPlace]: ``device_count`` places.

    Raises:
        ValueError: ``device_count`` is not a positive int or None.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> fluid.cuda_pinned_places(2)
        [CUDAPinnedPlace, CUDAPinnedPlace]
    """
    if device_count is not None and (isinstance(device_count, bool)
                                     or not isinstance(device_count, int) or device_count < 1):
        raise ValueError(f"cuda_pinned_places: device_count must be a positive int or None, "
                         f"but received {device_count!r}")
    return [_CUDAPinnedPlace() for _ in range(device_count or 1)]


class ComplexVariable:
    """A complex tensor as fluid 1.8 held one in dygraph: two real tensors of one shape and
    dtype, ``real`` and ``imag`` (what ``fluid.dygraph.to_variable`` returns for a complex
    numpy array). ``dtype`` is ``'complex64'`` for float16/float32 parts and ``'complex128'``
    otherwise; ``name`` is ``{'real': ..., 'imag': ...}``; ``numpy()`` is ``real + 1j * imag``.
    As in fluid 1.8, fluid's layers take its parts (``var.real``, ``var.imag``), not the pair.

    Args:
        real: the real part (a dygraph tensor).
        imag: the imaginary part, of ``real``'s shape and dtype.
    Returns:
        ComplexVariable: the pair.
    Raises:
        ValueError: the parts differ in shape or dtype.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> with fluid.dygraph.guard():
        ...     var = fluid.dygraph.to_variable(np.array([1.0 + 2.0j, 0.5]), name="z")
        ...     print(var.name, var.dtype, var.shape)
        ...     print(var.numpy())
        {'real': 'z.real', 'imag': 'z.imag'} complex128 [2]
        [1. +2.j 0.5+0.j]
    """

    def __init__(self, real: Any, imag: Any) -> None:
        if list(real.shape) != list(imag.shape):
            raise ValueError(f"ComplexVariable: the real part has shape {list(real.shape)} but "
                             f"the imaginary part {list(imag.shape)}; they must be the same")
        if real.dtype != imag.dtype:
            raise ValueError(f"ComplexVariable: the real part has dtype {real.dtype} but the "
                             f"imaginary part {imag.dtype}; they must be the same")
        self.real, self.imag = real, imag
        single = convert_np_dtype_to_dtype_("float32"), convert_np_dtype_to_dtype_("float16")
        self._dtype = "complex64" if real.dtype in single else "complex128"

    @property
    def dtype(self) -> str:
        return self._dtype

    @property
    def shape(self) -> List[int]:
        return list(self.real.shape)

    @property
    def name(self) -> Dict[str, str]:
        return {"real": self.real.name, "imag": self.imag.name}

    @name.setter
    def name(self, name: Any) -> None:
        if isinstance(name, dict):
            self.real.name, self.imag.name = name["real"], name["imag"]
        else:
            self.real.name, self.imag.name = f"{name}.real", f"{name}.imag"

    def numpy(self) -> Any:
        """The complex numpy array ``real + 1j * imag``."""
        real = self.real.numpy()
        out = np.empty(real.shape, np.complex64 if self._dtype == "complex64" else np.complex128)
        out.real, out.imag = real, self.imag.numpy()
        return out

    def __repr__(self) -> str:
        return f"ComplexVariable(name={self.name}, dtype={self._dtype}, shape={self.shape})"
