"""``fluid.layers``: every module in this package contributes its ``__all__``.

Every public layer function is made atomic here, once, at import (``core.atomic.atomic_layer``):
a call that raises leaves the default main and startup programs -- and the programs of its
Variable arguments -- exactly as before (ops, variables, ``version``, name counters). The
wrapped function replaces the original in its module too, so ``fluid.data``,
``fluid.embedding`` and calls between layer modules get the same guarantee.
"""
import importlib as _importlib
import inspect as _inspect
import pkgutil as _pkgutil

from ..core.atomic import atomic_layer as _atomic_layer

# public functions that a module exports without listing them in its __all__
_EXTRA_PUBLIC = {"io": ["fluid_data"]}
# factories, not layers (the layers they make are atomic themselves)
_NOT_LAYERS = {"generate_layer_fn", "generate_activation_fn"}

__all__ = []
for _mod in sorted(_pkgutil.iter_modules(__path__), key=lambda m: m.name):
    _m = _importlib.import_module(f"{__name__}.{_mod.name}")
    for _name in list(getattr(_m, "__all__", ())) + _EXTRA_PUBLIC.get(_mod.name, []):
        _obj = getattr(_m, _name)
        if _inspect.isfunction(_obj) and _name not in _NOT_LAYERS:
            _obj = _atomic_layer(_obj)
            setattr(_m, _name, _obj)
        if _name in getattr(_m, "__all__", ()):
            globals()[_name] = _obj
            __all__.append(_name)
