"""Build transactions: ``atomic(*programs)`` undoes every change to the given programs (and to
the unique-name counters) when its body raises; ``atomic_layer`` makes a layer function atomic.

Design (cost O(changes), never O(program size)):

* entering records, per program, a handful of scalars (``version``, ``current_block_idx``,
  ``random_seed``, the op-role state) and the length of the program's undo journal;
* while a transaction is active, ``program._journal`` is a list and every IR mutator in
  ``core/ir.py`` (``create_var``, ``create_parameter``, ``append_op``, ``_insert_op``,
  ``_remove_op``, ``_remove_var``, ``_rename_var``, ``_create_block``, ``Operator._set_attr``
  / ``_remove_attr`` / ``_rename_input`` / ``_rename_output`` and every overwrite of an existing
  ``Variable`` attribute such as ``shape``, ``stop_gradient`` or ``persistable``) appends a
  closure that undoes its own change; ``UniqueNameGenerator`` and ``name_scope`` journal their
  counters in a per-thread log the same way;
* on an exception the journals are replayed backwards down to the recorded lengths, the
  scalars are put back, and the exception propagates unchanged; on success the outermost
  transaction simply drops its journals.

Nesting is allowed: an inner failure caught by the caller rolls back only the inner part, and
the outer transaction still covers everything. Direct writes that bypass the mutators (for
example ``op.attrs[k] = v`` or ``block.ops.append(op)``) are not journaled: code that runs
inside a transaction must use the mutators. A program is meant to be built by one thread at a
time; the name-counter journal is per thread, and a rollback never takes back a name another
thread has drawn since (that leaves a gap, never a duplicate). ``program.version`` is restored
to its old number, but later edits get numbers never used before (``Program._bump``), so a plan
cached inside a rolled-back transaction can never match the program's new content.
"""
from __future__ import annotations

import functools
from types import TracebackType
from typing import Any, Callable, Dict, List, Optional, Tuple, Type, TypeVar

from . import mode as _mode, names
from .ir import Program, Variable, default_main_program, default_startup_program

__all__ = ["atomic", "atomic_layer", "in_transaction"]

_F = TypeVar("_F", bound=Callable[..., Any])


def _undo(journal: List[Callable[[], Any]], mark: int) -> None:
    """Run the journal's closures from the end down to ``mark`` and truncate it there."""
    while len(journal) > mark:
        journal.pop()()


class _Transaction:
    """The context manager returned by :func:`atomic` (one use)."""

    __slots__ = ("_programs", "_states", "_names_mark", "_names_owner", "_generator",
                 "_name_scope")

    def __init__(self, programs: List[Program]) -> None:
        self._programs = programs               # distinct Programs (see atomic / atomic_layer)
        self._states: List[Tuple[Any, ...]] = []

    def __enter__(self) -> None:
        states = []
        for p in self._programs:
            owner = p._journal is None          # outermost transaction on this program
            if owner:
                p._journal = []
            states.append((p, owner, len(p._journal), p._version, p.current_block_idx,
                           p._seed, p._current_role, p._op_role_var,
                           p._appending_grad_times))
        self._states = states
        tls = names._tls
        self._names_owner = getattr(tls, "journal", None) is None
        if self._names_owner:
            tls.journal = []
        self._names_mark = len(tls.journal)
        self._generator, self._name_scope = names.generator, names._name_scope

    def __exit__(self, exc_type: Optional[Type[BaseException]],
                 exc: Optional[BaseException], tb: Optional[TracebackType]) -> bool:
        try:
            if exc_type is not None:
                self._rollback()
        finally:                                # the outermost transaction ends journaling
            for p, owner, *_ in self._states:
                if owner:
                    p._journal = None
            if self._names_owner:
                names._tls.journal = None
        return False                            # never swallow the exception

    def _rollback(self) -> None:
        for (p, _owner, mark, version, block_idx, seed, role, role_var,
             grad_times) in reversed(self._states):
            journal = p._journal
            p._journal = None                   # undo closures must not journal themselves
            try:
                _undo(journal, mark)
            finally:
                p._journal = journal
            p._version, p.current_block_idx, p._seed = version, block_idx, seed
            p._current_role, p._op_role_var = role, role_var
            p._appending_grad_times = grad_times
        tls = names._tls
        journal = tls.journal
        tls.journal = None
        try:
            _undo(journal, self._names_mark)
        finally:
            tls.journal = journal
        names.generator, names._name_scope = self._generator, self._name_scope


def atomic(*programs: Program) -> _Transaction:
    """Build transaction: if the body raises, every given program is restored exactly as it
    was -- its blocks, ops (and their attrs/inputs/outputs), variables (and their changed
    properties), current block, random seed and ``program.version`` -- and the unique-name
    counters too, then the exception propagates unchanged. Nested use is allowed (inner
    failures caught by the caller roll back only the inner part).

    Cost: O(1) to enter and leave plus O(1) per change made inside (O(vars of the block) for a
    ``_remove_var`` / ``_rename_var``); a rollback costs what the changes cost.

    Usage::

        with atomic(main, startup):
            hidden = fluid.layers.fc(x, size=10, act=act)
    """
    unique: List[Program] = []
    for p in programs:
        if p is None:
            continue
        if not isinstance(p, Program):
            raise TypeError(f"atomic() takes Programs, but received {type(p).__name__}")
        if not any(p is q for q in unique):
            unique.append(p)
    return _Transaction(unique)


def in_transaction(program: Program) -> bool:
    """Whether ``program`` is inside an active :func:`atomic` block."""
    return program._journal is not None


def _programs_of(args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> List[Program]:
    """The default main and startup programs plus those of the Variable arguments (top level
    or in a list / tuple argument), each once."""
    main, startup = default_main_program(), default_startup_program()
    progs = [main] if startup is main else [main, startup]
    for values in (args, kwargs.values()):
        for value in values:
            if isinstance(value, Variable):
                p = value.block.program
                if p is not main and p is not startup and p not in progs:
                    progs.append(p)
            elif isinstance(value, (list, tuple)):
                for item in value:
                    if isinstance(item, Variable):
                        p = item.block.program
                        if p is not main and p is not startup and p not in progs:
                            progs.append(p)
    return progs


def atomic_layer(fn: _F) -> _F:
    """Wrap a layer function (or a Variable operator method) so that a failing call leaves the
    default main and startup programs -- and the programs of its Variable arguments -- exactly
    as they were (see :func:`atomic`). Idempotent; keeps the name, docstring and signature."""
    if getattr(fn, "__fluidlite_atomic__", False):
        return fn

    @functools.wraps(fn)
    def layer(*args: Any, **kwargs: Any) -> Any:
        if _mode.tracer is not None:        # dygraph: no program is built, nothing to undo
            return fn(*args, **kwargs)
        with _Transaction(_programs_of(args, kwargs)):
            return fn(*args, **kwargs)

    layer.__fluidlite_atomic__ = True  # type: ignore[attr-defined]
    return layer  # type: ignore[return-value]
