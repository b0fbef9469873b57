"""The ``fluidlite`` logger and how a user sees it.

What a user must see (an argument ignored, a deprecated call, a model file's dropped
attributes) is a Python warning (``warnings.warn``): shown once per place by default, turned
into errors with ``-W error``, filtered with the ``warnings`` module. Everything else --
progress and diagnostics -- goes to the ``fluidlite`` logger, silent by default, as a library's
logger should be. The one switch for it: the environment variable ``FLUIDLITE_LOG_LEVEL``
(``DEBUG``, ``INFO``, ``WARNING``, ...) sends the records at that level and above to stderr;
``logging.getLogger("fluidlite")`` is there for anything finer.
"""
import logging
import os

logger = logging.getLogger("fluidlite")
logger.addHandler(logging.NullHandler())


def _from_environment() -> None:
    level = os.environ.get("FLUIDLITE_LOG_LEVEL", "").strip().upper()
    if not level:
        return
    value = logging.getLevelName(level)
    if not isinstance(value, int):
        import warnings
        warnings.warn(f"FLUIDLITE_LOG_LEVEL={level!r} is not a logging level (DEBUG, INFO, "
                      f"WARNING, ERROR); fluidlite's logger stays silent", stacklevel=2)
        return
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(value)


_from_environment()
