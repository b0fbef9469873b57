"""``paddle.compat``: fluid 1.x's Python 2/3 string and number helpers (Python 3 semantics).

Scripts and Paddle's own unit tests use it as ``import paddle.compat as cpt``:
``cpt.to_text(b"x")``, ``cpt.to_bytes("x")``, ``cpt.round(2.5)``, ``cpt.floor_division``,
``cpt.get_exception_message(e)``, ``cpt.long_type`` / ``cpt.int_type``.
"""
from __future__ import annotations

import math
from typing import Any

__all__ = ["long_type", "int_type", "to_text", "to_bytes", "round", "floor_division",
           "get_exception_message"]

int_type = int
long_type = int


def _text(obj: Any, encoding: str) -> Any:
    if isinstance(obj, bytes):
        return obj.decode(encoding)
    if isinstance(obj, (str, bool, float)):
        return obj
    return str(obj)


def _bytes(obj: Any, encoding: str) -> Any:
    if isinstance(obj, str):
        return obj.encode(encoding)
    if isinstance(obj, bytes):
        return obj
    return str(obj).encode(encoding)


def _convert(obj: Any, one: Any, encoding: str, inplace: bool, dicts: bool) -> Any:
    """Apply ``one`` to ``obj``, to each item of a list or set, or (``dicts``) to each key
    and value of a dict; ``inplace`` changes the container itself and returns it."""
    if obj is None:
        return None
    if isinstance(obj, list):
        items = [one(v, encoding) for v in obj]
        if inplace:
            obj[:] = items
            return obj
        return items
    if isinstance(obj, set):
        items = {one(v, encoding) for v in obj}
        if inplace:
            obj.clear()
            obj.update(items)
            return obj
        return items
    if dicts and isinstance(obj, dict):
        new = {one(k, encoding): one(v, encoding) for k, v in obj.items()}
        if inplace:
            obj.clear()
            obj.update(new)
            return obj
        return new
    return one(obj, encoding)


def to_text(obj: Any, encoding: str = "utf-8", inplace: bool = False) -> Any:
    """``obj`` as ``str``: bytes are decoded with ``encoding``; str, bool and float are kept;
    anything else becomes ``str(obj)``. Lists, sets and dicts (keys and values) are converted
    item by item, in place when ``inplace``. ``None`` stays ``None``.

    Example:
        >>> import fluidlite.paddle_compat.compat as cpt
        >>> cpt.to_text([b"a", "b"]), cpt.to_text({b"k": b"v"})
        (['a', 'b'], {'k': 'v'})
    """
    return _convert(obj, _text, encoding, inplace, dicts=True)


def to_bytes(obj: Any, encoding: str = "utf-8", inplace: bool = False) -> Any:
    """``obj`` as ``bytes``: str is encoded with ``encoding``, bytes kept, anything else
    encoded from ``str(obj)``. Lists and sets are converted item by item (in place when
    ``inplace``). ``None`` stays ``None``.

    Example:
        >>> import fluidlite.paddle_compat.compat as cpt
        >>> cpt.to_bytes(["a", b"b"])
        [b'a', b'b']
    """
    return _convert(obj, _bytes, encoding, inplace, dicts=False)


def round(x: float, d: int = 0) -> float:
    """Round half away from zero to ``d`` decimals (Python 2's ``round``; Python 3's rounds
    half to even). Returns a float; ``round(-0.0)`` is ``-0.0``.

    Example:
        >>> import fluidlite.paddle_compat.compat as cpt
        >>> cpt.round(2.5), cpt.round(-2.5), cpt.round(1.25, 1)
        (3.0, -3.0, 1.3)
    """
    if x == 0.0:
        return math.copysign(0.0, x)
    p = 10 ** d
    shifted = x * p + math.copysign(0.5, x)
    return float(math.floor(shifted) if x > 0 else math.ceil(shifted)) / p


def floor_division(x: Any, y: Any) -> Any:
    """``x // y``."""
    return x // y


def get_exception_message(exc: BaseException) -> str:
    """The message of exception ``exc`` (``str(exc)``)."""
    if exc is None:
        raise TypeError("get_exception_message: exc must be an exception, got None")
    return str(exc)
