"""fluid 1.8's ``fluid.transpiler.HashName`` / ``RoundRobin``: which endpoint gets each
variable (``DistributeTranspilerConfig.split_method``).

``HashName`` hashes the variable's name with CRC-32 so that every process computes the same
endpoint (fluid 1.8 used Python's ``hash``, which Python 3 randomizes per process unless
``PYTHONHASHSEED`` is fixed, so two trainers could disagree); ``RoundRobin`` deals the
variables out in turn.
"""
from __future__ import annotations

import zlib
from typing import Any, List, Sequence

__all__ = ["PSDispatcher", "HashName", "RoundRobin"]


def _name(var: Any) -> str:
    """A variable's name: ``var.name()`` (fluid's VarBlock), ``var.name`` or the str itself."""
    if isinstance(var, str):
        return var
    name = getattr(var, "name", None)
    if callable(name):
        name = name()
    if not isinstance(name, str):
        raise TypeError(f"dispatch: expected variables (or names), but received {var!r}")
    return name


class PSDispatcher:
    """Base class: ``dispatch(varlist)`` returns one endpoint of ``pserver_endpoints`` per
    variable; ``reset()`` restarts a stateful dispatcher."""

    def __init__(self, pserver_endpoints: Sequence[str]) -> None:
        if isinstance(pserver_endpoints, str) or not pserver_endpoints or not all(
                isinstance(e, str) for e in pserver_endpoints):
            raise ValueError(f"{type(self).__name__}: pserver_endpoints must be a non-empty "
                             f"list of 'ip:port' strings, but received {pserver_endpoints!r}")
        self._eps = list(pserver_endpoints)
        self._step = 0

    @property
    def eps(self) -> List[str]:
        return self._eps

    def reset(self) -> None:
        """Nothing to reset: name hashing keeps no state (fluid's dispatcher interface).

        Args:
            None: this method takes no arguments.
        Returns:
            None: the dispatcher restarts (``RoundRobin`` from the first endpoint).
        Raises:
            None: this method does not raise.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> h = fluid.transpiler.HashName(["127.0.0.1:6170"])
            >>> h.reset()                        # stateless: nothing to forget
        """
        self._step = 0

    def dispatch(self, varlist: Sequence[Any]) -> List[str]:
        raise TypeError(f"{type(self).__name__} is the abstract PSDispatcher: use HashName or "
                        f"RoundRobin")


class HashName(PSDispatcher):
    """The endpoint of a variable is ``eps[crc32(name) % len(eps)]``.

    Args:
        pserver_endpoints (list of str): the ``"ip:port"`` endpoints to choose from.
    Returns:
        HashName: the dispatcher; ``dispatch(varlist)`` returns one endpoint per variable (or
        name).
    Raises:
        ValueError: ``pserver_endpoints`` is not a non-empty list of strings.
        TypeError: ``dispatch`` gets an item that is neither a name nor a named variable.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> h = fluid.transpiler.HashName(["127.0.0.1:6170", "127.0.0.1:6171"])
        >>> class Var:                               # anything with a .name
        ...     def __init__(self, name): self.name = name
        >>> [h.dispatch([Var("fc_0.w_0")])[0] in h._eps for _ in range(2)]
        [True, True]
    """

    def _hash_block(self, block_str: str, total: int) -> int:
        return zlib.crc32(block_str.encode("utf-8")) % total

    def dispatch(self, varlist: Sequence[Any]) -> List[str]:
        return [self._eps[self._hash_block(_name(v), len(self._eps))] for v in varlist]


class RoundRobin(PSDispatcher):
    """The endpoints in turn, continuing where the previous ``dispatch`` stopped."""

    def dispatch(self, varlist: Sequence[Any]) -> List[str]:
        out = []
        for v in varlist:
            _name(v)
            out.append(self._eps[self._step])
            self._step = (self._step + 1) % len(self._eps)
        return out
