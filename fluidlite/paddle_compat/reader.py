"""``paddle.reader``: fluid 1.x's reader decorators (``fluidlite/pipeline/decorators.py``)."""
from __future__ import annotations

from ..pipeline.decorators import (ComposeNotAligned, buffered, cache, chain, compose, firstn,
                                   map_readers, multiprocess_reader, shuffle, xmap_readers)

__all__ = ["ComposeNotAligned", "buffered", "cache", "chain", "compose", "firstn",
           "map_readers", "multiprocess_reader", "shuffle", "xmap_readers"]
