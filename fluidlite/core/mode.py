"""Which mode fluidlite runs in: static graph (default) or imperative (``fluid.dygraph``).

``tracer`` is the active ``fluidlite.dygraph.tracer.Tracer`` inside ``fluid.dygraph.guard()``
(None in static mode). It lives in ``core`` so that ``core.atomic`` and ``layer_helper`` can test
the mode with one attribute read, without importing the dygraph package.
"""
from __future__ import annotations

from typing import Any

tracer: Any = None
