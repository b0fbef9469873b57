"""``fluid.unique_name``: generate / guard / switch."""
from .core.names import (DygraphParameterNameChecker, UniqueNameGenerator,  # noqa: F401
                         generate, generate_with_ignorable_key, guard, switch)

__all__ = ["generate", "generate_with_ignorable_key", "guard", "switch", "UniqueNameGenerator"]
