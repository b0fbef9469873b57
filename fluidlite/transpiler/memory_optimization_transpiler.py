"""``fluid.memory_optimize`` / ``fluid.release_memory``: deprecated no-ops, as in fluid 1.8.

fluid 1.6 replaced these program rewrites (variable reuse by liveness analysis) with memory
strategies that are always on; from then on both functions only logged a warning and left the
program unchanged. fluidlite does the same: NumPy frees an intermediate as soon as the compiled
plan drops its last reference, so there is nothing to rewrite.
"""
from __future__ import annotations

import warnings
from typing import Any, Optional

__all__ = ["memory_optimize", "release_memory"]

def memory_optimize(input_program: Any, skip_opt_set: Optional[Any] = None,
                    print_log: bool = False, level: int = 0, skip_grads: bool = True) -> None:
    """Deprecated since fluid 1.6: warns (DeprecationWarning) and leaves ``input_program``
    unchanged.

    Args:
        input_program (Program): the program (left unchanged).
        skip_opt_set (set | None): accepted for fluid's signature.
        print_log (bool, default False): accepted for fluid's signature.
        level (int, default 0): accepted for fluid's signature.
        skip_grads (bool, default True): accepted for fluid's signature.
    Returns:
        None: only a ``DeprecationWarning`` is issued.
    Raises:
        None: this deprecated no-op does not raise.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> import warnings
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always")
        ...     fluid.memory_optimize(fluid.Program())      # deprecated in fluid 1.8: does nothing
        >>> len(caught) >= 1
        True
    """
    warnings.warn("fluid.memory_optimize() is deprecated and does nothing: it does not change "
                  "the Program. Memory is managed for you (fluidlite releases every "
                  "intermediate as soon as the plan no longer needs it); remove the call.",
                  DeprecationWarning, stacklevel=2)


def release_memory(input_program: Any, skip_opt_set: Optional[Any] = None) -> None:
    """Deprecated since fluid 1.6: warns (DeprecationWarning) and leaves ``input_program``
    unchanged.

    Args:
        input_program (Program): the program (left unchanged).
        skip_opt_set (set | None): accepted for fluid's signature.
    Returns:
        None: only a ``DeprecationWarning`` is issued.
    Raises:
        None: this deprecated no-op does not raise.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> import warnings
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always")
        ...     fluid.release_memory(fluid.Program())      # deprecated in fluid 1.8: does nothing
        >>> len(caught) >= 1
        True
    """
    warnings.warn("fluid.release_memory() is deprecated and does nothing: it does not change "
                  "the Program; remove the call.", DeprecationWarning, stacklevel=2)
