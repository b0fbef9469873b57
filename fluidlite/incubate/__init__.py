"""``fluid.incubate``: fleet's collective (data-parallel) mode on MPI."""
from . import fleet  # noqa: F401
