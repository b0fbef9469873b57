"""``fluid.incubate.fleet.base``: role makers."""
from . import role_maker  # noqa: F401
