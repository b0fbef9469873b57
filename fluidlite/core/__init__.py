"""fluidlite's IR core, also serving as fluid's ``fluid.core`` namespace."""
from __future__ import annotations

import types as _types

from . import dtypes, names, registry  # noqa: F401
from . import lint, prune  # noqa: F401  (they register Program.lint / _prune with the IR)
from .dtypes import VarType
from .errors import EnforceNotMet
from .ir import OpRole
from .readers import EOFException  # noqa: F401  (fluid.core.EOFException; core/readers.py)
from .scope import (CPUPlace, CUDAPinnedPlace, CUDAPlace, LoDTensor, Scope, cpu_places,
                    cuda_places, is_compiled_with_cuda)
from .threads import get_num_threads, set_num_threads


__all__ = ["VarType", "VarDesc", "OpRole", "op_proto_and_checker_maker", "EnforceNotMet",
           "Scope", "LoDTensor", "CPUPlace", "CUDAPlace", "CUDAPinnedPlace", "cpu_places",
           "cuda_places", "is_compiled_with_cuda", "get_cuda_device_count", "dtypes", "names",
           "registry", "get_num_threads", "set_num_threads"]


class VarDesc:
    """``core.VarDesc.VarType`` spelling used by fluid scripts."""
    VarType = VarType


op_proto_and_checker_maker = _types.SimpleNamespace(
    OpRole=OpRole,
    kOpRoleAttrName=lambda: "op_role",
    kOpRoleVarAttrName=lambda: "op_role_var",
    kOpNameScopeAttrName=lambda: "op_namescope",
    kOpCreationCallstackAttrName=lambda: "op_callstack",
    kOpDeviceAttrName=lambda: "op_device",
)


def get_cuda_device_count() -> int:
    return 0


def kEmptyVarName() -> str:
    return names.EMPTY_VAR_NAME


def kGradVarSuffix() -> str:
    return names.GRAD_SUFFIX
