"""``fluid.data_feed_desc`` (DataFeedDesc):
the fluid 1.8 module path; the code lives in ``fluidlite/pipeline/feed_desc.py``."""
from .pipeline.feed_desc import (  # noqa: F401
    DataFeedDesc)

__all__ = ["DataFeedDesc"]
