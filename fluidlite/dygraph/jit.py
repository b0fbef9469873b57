"""``fluid.dygraph.jit``: fluid 1.8's module of the dygraph-to-static tools -- ``TracedLayer``
(``traced.py``: record a dygraph run, replay it into a static Program) and the
``declarative`` / ``to_static`` decorator with its ``ProgramTranslator`` (``declarative.py``,
which builds on ``traced.py``)."""
from __future__ import annotations

from .declarative import ProgramTranslator, declarative, to_static  # noqa: F401
from .traced import TracedLayer, _build  # noqa: F401  (_build: autograd/functional.py)

__all__ = ["TracedLayer", "ProgramTranslator", "declarative", "to_static"]
