"""Name generation: fluid's ``unique_name`` counters, ``name_scope`` and gradient suffixes."""
from __future__ import annotations

import contextlib
import threading
from typing import Any, Callable, Iterator, List, Optional, Tuple, Union

GRAD_SUFFIX = "@GRAD"
RENAME_SUFFIX = "@RENAME@"
EMPTY_VAR_NAME = "@EMPTY@"

# undo log of this thread's active build transaction (fluidlite.core.atomic), else None
class _Local(threading.local):
    journal: Optional[List[Callable[[], Any]]] = None     # (a class default: no failed lookup)


_tls = _Local()


def _journal(undo: Callable[[], Any]) -> None:
    j = _tls.journal
    if j is not None:
        j.append(undo)


def _uncount(ids: "dict[str, int]", key: str, n: int) -> None:
    # only when no other thread drew this key since: never hand out a name twice
    if ids.get(key) == n + 1:
        if n:
            ids[key] = n
        else:
            del ids[key]


class UniqueNameGenerator:
    """Per-key counters: ``generate('fc')`` -> ``'fc_0'``, then ``'fc_1'``, ..."""

    def __init__(self, prefix: Optional[str] = None) -> None:
        self.ids: dict[str, int] = {}
        self.prefix = prefix or ""

    def __call__(self, key: str) -> str:
        ids = self.ids
        n = ids.get(key, 0)
        if _tls.journal is not None:
            _journal(lambda: _uncount(ids, key, n))
        ids[key] = n + 1
        return f"{self.prefix}{key}_{n}"


generator = UniqueNameGenerator()


def generate(key: str) -> str:
    """Return a program-wide unique name ``'{prefix}{key}_{n}'`` (counters are global).

    Args:
        key (str): the name's stem.
    Returns:
        str: ``key`` followed by ``_N``, N counting per key in the current generator.

    Raises:
        None: this function does not raise (any ``key`` is formatted with ``str``).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> with fluid.unique_name.guard():
        ...     print(fluid.unique_name.generate("tmp"), fluid.unique_name.generate("tmp"))
        tmp_0 tmp_1
    """
    return generator(key)


generate_with_ignorable_key = generate


class OpStem:
    """The names of one dygraph layer call, drawn from the counters when first read: ``name``
    is ``generate(key)`` and ``str(stem)`` is ``'<name>.tmp'``, the stem its outputs are
    named after (``<name>.tmp_N``, see ``VarBase.name``). An eager step seldom reads its
    temporaries' names, and drawing one per layer call took ~8 % of an LSTM's traced
    forward; a key's numbers still go to its layer calls in the order their names are read.

    Example:
        >>> from fluidlite.core import names
        >>> with names.guard():
        ...     a, b = names.OpStem("relu"), names.OpStem("relu")
        ...     print(str(b), a.name)
        relu_0.tmp relu_1
    """
    __slots__ = ("key", "_name")

    def __init__(self, key: str) -> None:
        self.key = key
        self._name: Optional[str] = None

    @property
    def name(self) -> str:
        if self._name is None:
            self._name = generate(self.key)
        return self._name

    def __str__(self) -> str:
        return self.name + ".tmp"

    def __repr__(self) -> str:
        return f"OpStem({self.key!r}, name={self._name!r})"


class SoleStem:
    """The stem of every dygraph layer call of ``key`` whose op has one output: ``str(stem)``
    draws ``generate(key)`` afresh and is ``'<key>_N.tmp'``, what ``str(OpStem(key))`` is for a
    new call. Its one tensor reads it once, when its name is first read (``VarBase.name``), so
    one object per key (``sole_stem``) names every such call the way an ``OpStem`` each would
    -- and an eager step makes no object per call for it (a replayed LSTM step made ~560).

    Example:
        >>> from fluidlite.core import names
        >>> with names.guard():
        ...     stem = names.sole_stem("relu")
        ...     print(str(stem), str(stem), stem is names.sole_stem("relu"))
        relu_0.tmp relu_1.tmp True
    """
    __slots__ = ("key",)

    def __init__(self, key: str) -> None:
        self.key = key

    def __str__(self) -> str:
        return generate(self.key) + ".tmp"

    def __repr__(self) -> str:
        return f"SoleStem({self.key!r})"


_SOLE_STEMS: "dict[str, SoleStem]" = {}


def sole_stem(key: str) -> SoleStem:
    """The ``SoleStem`` of ``key`` (one per key, made on first use)."""
    stem = _SOLE_STEMS.get(key)
    if stem is None:
        stem = _SOLE_STEMS.setdefault(key, SoleStem(key))
    return stem


class DygraphParameterNameChecker:
    """The parameter names dygraph has created in the current name space: ``checker(name)``
    records ``name`` and says whether it was already used (fluid 1.8 refuses a second dygraph
    parameter of one ``ParamAttr`` name)."""

    def __init__(self) -> None:
        self._name_set: set = set()

    def __call__(self, name: str) -> bool:
        if name in self._name_set:
            return True
        self._name_set.add(name)
        names_set = self._name_set
        _journal(lambda: names_set.discard(name))
        return False


dygraph_parameter_name_checker = DygraphParameterNameChecker()


def switch(new_generator: Optional[UniqueNameGenerator] = None,
           new_para_name_checker: Optional[DygraphParameterNameChecker] = None
           ) -> Tuple[UniqueNameGenerator, DygraphParameterNameChecker]:
    """Install ``new_generator`` and ``new_para_name_checker`` (fresh ones when None) and
    return the previous pair, as fluid 1.8.

    Args:
        new_generator (UniqueNameGenerator | None): the generator to install; None installs a fresh
            one (counters from 0, no prefix). Default None.
        new_para_name_checker (DygraphParameterNameChecker | None): the record of dygraph
            parameter names to install; None installs an empty one. Default None.

    Returns:
        tuple: ``(UniqueNameGenerator, DygraphParameterNameChecker)`` active before (pass them
        back to ``switch`` to restore them).

    Raises:
        TypeError: ``new_generator`` or ``new_para_name_checker`` is of another type.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> old, old_checker = fluid.unique_name.switch()     # a fresh generator
        >>> fluid.unique_name.generate("fc")
        'fc_0'
        >>> _ = fluid.unique_name.switch(old, old_checker)    # back to the previous counters
    """
    global generator, dygraph_parameter_name_checker
    if new_generator is not None and not isinstance(new_generator, UniqueNameGenerator):
        raise TypeError(f"unique_name.switch: new_generator must be a UniqueNameGenerator or "
                        f"None, but received {type(new_generator).__name__}; switch returns "
                        f"the pair (generator, checker): restore with switch(*previous)")
    if new_para_name_checker is not None and not isinstance(new_para_name_checker,
                                                            DygraphParameterNameChecker):
        raise TypeError(f"unique_name.switch: new_para_name_checker must be a "
                        f"DygraphParameterNameChecker or None, but received "
                        f"{type(new_para_name_checker).__name__}")
    old = generator, dygraph_parameter_name_checker
    generator = new_generator or UniqueNameGenerator()
    dygraph_parameter_name_checker = new_para_name_checker or DygraphParameterNameChecker()
    return old


@contextlib.contextmanager
def guard(new_generator: Union[None, str, bytes, UniqueNameGenerator] = None) -> Iterator[None]:
    """Use a fresh generator (str/bytes: used as name prefix) inside the with-block.

    Args:
        new_generator (str | bytes | UniqueNameGenerator | None): a prefix for a fresh
            generator, or the generator to use.

    Returns:
        contextmanager: a context manager yielding None; the previous generator is restored on
        exit, also when the block raises.

    Raises:
        UnicodeDecodeError: ``new_generator`` is bytes that are not UTF-8.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> with fluid.unique_name.guard():
        ...     a = fluid.unique_name.generate("fc")
        >>> with fluid.unique_name.guard():
        ...     b = fluid.unique_name.generate("fc")
        >>> a, b                                   # each guard starts its own counters
        ('fc_0', 'fc_0')
    """
    if isinstance(new_generator, bytes):
        new_generator = new_generator.decode()
    if isinstance(new_generator, str):
        new_generator = UniqueNameGenerator(new_generator)
    old = switch(new_generator)
    try:
        yield
    finally:
        switch(*old)


def live(name: Any) -> Optional[str]:
    """A gradient name a grad maker may use, or None for an absent / ``@EMPTY@`` one."""
    if name is None or (isinstance(name, str) and name.startswith(EMPTY_VAR_NAME)):
        return None
    return name


def grad_var_name(name: str) -> str:
    return name + GRAD_SUFFIX



# -- name_scope -------------------------------------------------------------------------------
class _NameScope:
    """One entered scope. A parent keeps only how many children of each prefix it has had
    (the next ``prefix`` is ``prefix_<count>``), not the children: an exited scope is freed, so
    building many programs does not grow the tree."""

    def __init__(self, name: str = "", parent: Optional["_NameScope"] = None) -> None:
        self.name, self.parent = name, parent
        self.children: dict[str, int] = {}

    def child(self, prefix: str) -> "_NameScope":
        children = self.children
        count = children.get(prefix, 0)
        name = prefix if not count else f"{prefix}_{count}"
        children[prefix] = count + 1
        _journal(lambda: children.__setitem__(prefix, count) if count else
                 children.pop(prefix, None))
        return _NameScope(name, self)

    def path(self) -> str:
        parts, node = [], self
        while node.parent is not None:
            parts.append(node.name)
            node = node.parent
        return "/" + "".join(p + "/" for p in reversed(parts))


_name_scope = _NameScope()


@contextlib.contextmanager
def name_scope(prefix: Optional[str] = None) -> Iterator[None]:
    """Hierarchical scope recorded on every op as ``op_namescope`` (``'/s1/s2/'``).

    Args:
        prefix (str | None): the scope's name; nested scopes join with ``/``.

    Returns:
        contextmanager: a context manager yielding None; the enclosing scope is restored on
        exit. Re-entering a prefix at the same level names it ``prefix_1``, ``prefix_2``, ...

    Raises:
        AssertionError: ``prefix`` is None or empty.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 2])
        ...     with fluid.name_scope("encoder"):
        ...         y = fluid.layers.scale(x, 2.0)
        >>> main.global_block().ops[-1].attr("op_namescope")
        '/encoder/'
    """
    global _name_scope
    assert prefix, "namescope prefix can not be empty."
    old = _name_scope
    _name_scope = old.child(prefix)
    try:
        yield
    finally:
        _name_scope = old


def current_name_scope() -> str:
    return _name_scope.path()


def reset_name_scope() -> None:
    """Forget all scopes (tests use this for a clean slate)."""
    global _name_scope
    _name_scope = _NameScope()
