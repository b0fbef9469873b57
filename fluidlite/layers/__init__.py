"""``fluid.layers``: every module in this package contributes its ``__all__``."""
import importlib as _importlib
import pkgutil as _pkgutil

__all__ = []
for _mod in sorted(_pkgutil.iter_modules(__path__), key=lambda m: m.name):
    _m = _importlib.import_module(f"{__name__}.{_mod.name}")
    for _name in getattr(_m, "__all__", ()):
        globals()[_name] = getattr(_m, _name)
        __all__.append(_name)
