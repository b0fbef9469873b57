"""``fluidlite.nn``: Paddle 2 / PyTorch spellings for dygraph code (``nn.utils``)."""
from __future__ import annotations

from . import utils  # noqa: F401
