"""``fluid.incubate.fleet``: ``base.role_maker`` and ``collective`` (fleet on MPI)."""
from . import base, collective  # noqa: F401
