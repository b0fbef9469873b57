"""Exception types shared across fluidlite."""
from __future__ import annotations


class EnforceNotMet(RuntimeError):
    """fluid's run-time check failure (``core.EnforceNotMet``): raised when an op's kernel fails;
    the message names the op type, its input shapes and the user's line that created it."""


class InvalidArgument(ValueError, EnforceNotMet):
    """An op argument fluid's kernel refuses with ``platform::errors::InvalidArgument``: a
    ``ValueError`` (Python's kind for a bad value), and a ``core.EnforceNotMet`` as fluid 1.x
    scripts catch it."""
