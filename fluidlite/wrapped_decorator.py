"""``fluid.wrapped_decorator`` (fluid 1.8): decorators that keep the decorated function's
signature.

A plain ``contextlib.contextmanager`` hides the generator function's parameters behind
``(*args, **kwds)``; fluid wraps its context managers (``program_guard``, ``name_scope``, ...)
so that ``inspect.signature`` and the API docs still show them. fluid 1.8 did this with the
``decorator`` package; here ``functools.wraps`` records the original as ``__wrapped__``, which
``inspect.signature`` follows, so no extra dependency is needed.
"""
from __future__ import annotations

import contextlib
import functools
from typing import Any, Callable, ContextManager, TypeVar

__all__ = ["wrap_decorator", "signature_safe_contextmanager"]

_F = TypeVar("_F", bound=Callable[..., Any])


def wrap_decorator(decorator_func: Callable[[Callable[..., Any]], Callable[..., Any]]
                   ) -> Callable[[_F], _F]:
    """Turn ``decorator_func`` into a decorator whose result keeps the decorated function's
    name, docstring and signature.

    Contract: ``wrap_decorator(d)(f)(*args, **kwargs) == d(f)(*args, **kwargs)`` for every
    call, while ``inspect.signature(wrap_decorator(d)(f)) == inspect.signature(f)``.
    As in fluid 1.8, ``decorator_func`` is applied to ``f`` at each call (a decorator with
    per-application state gets a fresh one every time).

    Args:
        decorator_func: an ordinary decorator (a function from a function to a callable).

    Returns:
        the signature-preserving decorator.

    Example:
        >>> import contextlib, inspect
        >>> from fluidlite.wrapped_decorator import wrap_decorator
        >>> cm = wrap_decorator(contextlib.contextmanager)
        >>> @cm
        ... def guard(name, depth=1):
        ...     yield name * depth
        >>> str(inspect.signature(guard))
        '(name, depth=1)'
        >>> with guard("a", depth=2) as v:
        ...     v
        'aa'
    """
    def decorate(func: _F) -> _F:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            return decorator_func(func)(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    return decorate


#: ``contextlib.contextmanager`` that keeps the generator function's signature (fluid 1.8
#: decorates its guards with it).
signature_safe_contextmanager: Callable[[Callable[..., Any]], Callable[..., ContextManager[Any]]]
signature_safe_contextmanager = wrap_decorator(contextlib.contextmanager)
