"""Which mode fluidlite runs in: static graph (default) or imperative (``fluid.dygraph``), and
what the modules below dygraph may ask of it.

``tracer`` is the active ``fluidlite.dygraph.tracer.Tracer`` inside ``fluid.dygraph.guard()``
(None in static mode). It lives in ``core`` so that ``core.atomic`` and ``layer_helper`` can test
the mode with one attribute read, without importing the dygraph package.

The same clip, regularizer and optimizer objects serve both modes (fluid 1.8's API), but the
passes sit below the front-ends (docs/architecture.md, "Layout") and never import ``fluidlite.dygraph``. So
dygraph *registers* what it does differently here when it is imported (``register``), and a
static module calls it through ``implementation(name)``. Dygraph mode is entered, and dygraph
tensors are made, only through the dygraph package, so whenever a module meets a dygraph tensor
(``is_tensor``) or runs with ``tracer`` set, the implementations are there.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, TypeVar

tracer: Any = None

_F = TypeVar("_F", bound=Callable[..., Any])
_IMPLEMENTATIONS: Dict[str, Callable[..., Any]] = {}


def register(name: str, fn: _F) -> _F:
    """Make ``fn`` dygraph's implementation of ``name`` (called by ``fluidlite.dygraph`` modules
    at import; a second registration replaces the first). Returns ``fn``."""
    _IMPLEMENTATIONS[name] = fn
    return fn


def implementation(name: str) -> Callable[..., Any]:
    """Dygraph's implementation registered as ``name``. RuntimeError when nothing registered it
    (``fluidlite.dygraph`` was never imported: no dygraph tensor or mode can exist then)."""
    fn = _IMPLEMENTATIONS.get(name)
    if fn is None:
        raise RuntimeError(f"no dygraph implementation of {name!r}: it is registered when "
                           f"fluidlite.dygraph is imported (fluid.dygraph.guard() does that)")
    return fn


def is_tensor(value: Any) -> bool:
    """Whether ``value`` is a dygraph tensor (``VarBase`` / ``ParamBase``: their class sets
    ``_dygraph_tensor = True``), as opposed to a static ``Variable`` or anything else."""
    return getattr(type(value), "_dygraph_tensor", False) is True
