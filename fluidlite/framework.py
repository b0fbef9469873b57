"""``fluid.framework``: the IR classes and the default-program state."""
from __future__ import annotations

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
           "convert_np_dtype_to_dtype_", "cpu_places", "cuda_places", "is_compiled_with_cuda"]


def in_dygraph_mode() -> bool:
    """Whether ops run imperatively (inside ``fluid.dygraph.guard()`` or after
    ``enable_dygraph()``)."""
    return _mode.tracer is not None
