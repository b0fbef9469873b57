"""The ``fluidlite`` logger. Library code logs; it never prints or configures the root logger."""
import logging

logger = logging.getLogger("fluidlite")
logger.addHandler(logging.NullHandler())


def set_verbosity(level: int = logging.INFO) -> None:
    """Send fluidlite's log records at ``level`` and above to stderr."""
    if not any(isinstance(h, logging.StreamHandler) and not isinstance(h, logging.NullHandler)
               for h in logger.handlers):
        logger.addHandler(logging.StreamHandler())
    logger.setLevel(level)
