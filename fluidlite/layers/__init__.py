"""``fluid.layers``: every module in this package contributes its ``__all__``.

Every public layer function is made atomic here, once, at import (``core.atomic.atomic_layer``):
a call that raises leaves the default main and startup programs -- and the programs of its
Variable arguments -- exactly as before (ops, variables, ``version``, name counters). The
wrapped function replaces the original in its module too, so ``fluid.data``,
``fluid.embedding`` and calls between layer modules get the same guarantee.

Then each name is bound on the module fluid 1.8 defined it in (``_fluid_paths.FLUID_PATHS``):
``fluid.layers.nn.cos_sim``, ``from fluidlite.layers.control_flow import StaticRNN`` and
``fluid.layers.tensor.cast`` are the very objects ``fluid.layers.<name>`` is.
"""
import builtins as _builtins
import importlib as _importlib
import inspect as _inspect
import pkgutil as _pkgutil
import types as _types

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


# fluid 1.8's module paths (see _fluid_paths.py): bound last, when every name above exists.
# A module's own attribute is kept unless it is the unwrapped original of the atomic layer; a
# name fluidlite lacks is skipped (docs/api_coverage.md lists it as missing). A name that is
# also a Python builtin (range, sum, slice, ...) is served by the module's __getattr__ instead
# of becoming one of its globals, which would shadow the builtin in that module's own code.
from ._fluid_paths import FLUID_PATHS as _FLUID_PATHS  # noqa: E402


def _serve_by_getattr(module: _types.ModuleType, extra: dict) -> None:
    own = vars(module).get("__getattr__")

    def __getattr__(name: str) -> object:
        if name in extra:
            return extra[name]
        if own is not None:
            return own(name)
        raise AttributeError(f"module {module.__name__!r} has no attribute {name!r}")

    module.__getattr__ = __getattr__  # type: ignore[attr-defined]


for _modname, _names in _FLUID_PATHS.items():
    _m = _importlib.import_module(f"{__name__}.{_modname}")
    _by_getattr = {}
    for _name in _names:
        _obj = globals().get(_name)
        if _obj is None:
            continue
        _own = vars(_m).get(_name)
        if _own is None and hasattr(_builtins, _name):
            _by_getattr[_name] = _obj
        elif _own is None or getattr(_obj, "__wrapped__", None) is _own:
            setattr(_m, _name, _obj)
    if _by_getattr:
        _serve_by_getattr(_m, _by_getattr)
