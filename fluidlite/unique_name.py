"""``fluid.unique_name``: generate / guard / switch."""
from .core.names import (UniqueNameGenerator, generate, generate_with_ignorable_key,  # noqa: F401
                         guard, switch)

__all__ = ["generate", "generate_with_ignorable_key", "guard", "switch", "UniqueNameGenerator"]
