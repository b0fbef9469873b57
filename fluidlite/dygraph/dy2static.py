"""Dygraph to static source conversion (fluid 1.8's ``dygraph_to_static``, the common cases).

``convert_function(fn)`` parses ``fn``'s source (``inspect.getsource`` + ``ast``) and rewrites

* ``if <test>: A [else: B]`` into ::

      def __dy2s_true_0(v1, v2): A; return (v1, v2)
      def __dy2s_false_0(v1, v2): B; return (v1, v2)
      v1, v2 = __dy2s.convert_ifelse(<test>, __dy2s_true_0, __dy2s_false_0,
                                     (__dy2s.ld(lambda: v1), __dy2s.ld(lambda: v2)), names)

  where ``v1, v2`` are the names either branch assigns (a name with no value before the
  statement is passed as ``UNDEFINED`` and deleted again afterwards if it is still undefined,
  so Python's own semantics are kept);
* ``while <test>: body`` into ``v1, v2 = __dy2s.convert_while(cond_fn, body_fn, (v1, v2),
  names)`` (``v1, v2``: the names the body assigns);
* ``for i in range(<1 to 3 arguments>): body`` into ``i, v1, v2 = __dy2s.convert_for_range(
  range, (<arguments>), body_fn, (i, v1, v2), names)``: a Python loop unless ``range`` is the
  builtin and an argument is a tensor (traced / static); then ``c = start; while c < stop
  (c > stop for a negative step): i = c; body; c += step`` through ``convert_while``, the step
  being a Python int. ``i`` ends as the last index taken, as in Python (``start``, a tensor,
  when no iteration ran, where Python would leave ``i`` as it was);
* ``and`` / ``or`` / ``not`` in those tests into ``convert_logical_and/or/not`` (lazy, so a
  Python operand short-circuits as before);
* every call ``f(...)`` into ``__dy2s.convert_call(f)(...)``, which converts user functions,
  methods and user ``Layer``s' ``forward`` the same way (recursively, cached per function);
  fluidlite's own layers and functions, builtins and ``@declarative`` functions are called
  unchanged.

At run time the ``convert_*`` functions use Python control flow unless the condition is a
tensor being traced by ``@declarative`` (then the tracer records both branches / one loop
body, which become ``fluid.layers.cond`` / ``fluid.layers.while_loop`` in the traced program)
or a static ``Variable`` (then they call ``fluid.layers.cond`` / ``while_loop`` directly).

Conservative: a statement is left as it is when its blocks contain ``return``, ``break`` /
``continue`` (of the converted loop), ``yield``, ``await``, ``global`` / ``nonlocal``,
``del``, function or class definitions, ``try``, imports, assignment expressions, or stores to
attributes / subscripts (``self.x = ...``, ``a[i] = ...``: both branches of a tensor ``if``
run once while tracing, so such side effects would happen twice), when it assigns no name
(only side effects; for a ``for``: none but its loop variable), or for a ``while`` /
``for`` with an ``else``. Only a ``for`` over a direct ``range(...)`` call (no ``*args``)
with a name as its target converts; other ``for`` loops (over a tensor, a list,
``enumerate``...) stay Python loops.
Generators, coroutines, lambdas, decorator wrappers (``__wrapped__``), functions without
source and functions using private (name-mangled) names are not converted at all
(``convert_function`` returns None). A tensor ``if`` whose branches leave a name with different
kinds of values (a tensor in one, a Python value in the other; a tensor in one and nothing in
the other for a name defined before), a tensor loop whose body changes a Python value, or a
tensor ``range`` with a tensor step or a bound that is not a one-element integer tensor,
raises ``Dy2StaticError`` while tracing; ``@declarative`` then traces the original function
(whose value reads make it run eagerly), so nothing is lost. A name assigned in only one
branch and undefined before is a branch temporary: it is undefined after a tensor ``if``.
"""
from __future__ import annotations

import ast
import inspect
import logging
import math
import sys
import textwrap
import types
import weakref
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ..core import mode as _mode
from ..core.ir import Variable
from .tensor import VarBase

__all__ = ["convert_function", "convert_ifelse", "convert_while", "convert_for_range",
           "convert_call",
           "convert_logical_and",
           "convert_logical_or", "convert_logical_not", "UNDEFINED", "Dy2StaticError",
           "ConvertedFunction"]

_log = logging.getLogger("fluidlite")
_PREFIX = "__dy2s_"
_HELPER = "__dy2s"


class Dy2StaticError(Exception):
    """A converted statement cannot become static control flow for these values."""


class _Undefined:
    """The value of a name that had none before a converted statement."""

    _inst: Optional["_Undefined"] = None

    def __new__(cls) -> "_Undefined":
        if cls._inst is None:
            cls._inst = super().__new__(cls)
        return cls._inst

    def __repr__(self) -> str:
        return "UNDEFINED"

    def __bool__(self) -> bool:
        raise Dy2StaticError("a variable with no value (defined in only one branch of a "
                             "converted if, or first assigned in a converted loop body) was "
                             "used as a condition")


UNDEFINED = _Undefined()


def ld(getter: Callable[[], Any]) -> Any:
    """``getter()`` (a ``lambda: name``), or ``UNDEFINED`` when the name has no value yet."""
    try:
        return getter()
    except NameError:           # includes UnboundLocalError
        return UNDEFINED


# -- run time ------------------------------------------------------------------------------------
def _recorder() -> Any:
    """The ``@declarative`` trace recorder in progress (None outside a trace)."""
    tracer = _mode.tracer
    rec = getattr(tracer, "recorder", None) if tracer is not None else None
    return rec if hasattr(rec, "trace_cond") else None


def _kind(x: Any) -> str:
    """``"traced"``: a tensor whose value the ``@declarative`` trace depends on (an input, a
    parameter or an op result); ``"static"``: a static-mode Variable; else ``"python"``."""
    if isinstance(x, VarBase):
        rec = _recorder()
        return "traced" if rec is not None and rec.is_traced(x) else "python"
    if isinstance(x, Variable) and _mode.tracer is None:
        return "static"
    return "python"


def _is_tensor(x: Any) -> bool:
    return isinstance(x, Variable)


def _same_python(a: Any, b: Any) -> bool:
    if a is b:
        return True
    try:
        return type(a) is type(b) and bool(a == b)
    except Exception:       # noqa: BLE001 -- arbitrary user objects: not the same
        return False


def convert_ifelse(pred: Any, true_fn: Callable[..., Tuple[Any, ...]],
                   false_fn: Callable[..., Tuple[Any, ...]], args: Tuple[Any, ...],
                   names: Sequence[str]) -> Tuple[Any, ...]:
    """``true_fn(*args)`` if ``pred`` else ``false_fn(*args)``; both return the new values of
    ``names``. A traced tensor / static Variable ``pred`` builds ``fluid.layers.cond``."""
    kind = _kind(pred)
    if kind == "python":
        return true_fn(*args) if pred else false_fn(*args)

    def select(t: Tuple[Any, ...], f: Tuple[Any, ...]) -> List[int]:
        """Positions of the tensor outputs; raises if the branches disagree otherwise. A name
        one branch leaves undefined (and that had no value before) is a branch temporary: it
        is no output and stays undefined after the statement (a later use fails the trace,
        which then retries the original function)."""
        pos = []
        for k, (n, a, b) in enumerate(zip(names, t, f)):
            if args[k] is UNDEFINED and (a is UNDEFINED or b is UNDEFINED):
                continue
            if _is_tensor(a) != _is_tensor(b):
                raise Dy2StaticError(
                    f"the tensor if sets '{n}' to {_what(a)} in the true branch but to "
                    f"{_what(b)} in the false branch; give it a tensor value in both")
            if not _is_tensor(a) and not _same_python(a, b):
                raise Dy2StaticError(
                    f"the tensor if sets the Python value '{n}' differently in its branches "
                    f"({a!r} / {b!r}); a static cond can only select tensors")
            if _is_tensor(a):
                pos.append(k)
        return pos

    if kind == "traced":
        outs, pos, t = _recorder().trace_cond(pred, lambda: tuple(true_fn(*args)),
                                              lambda: tuple(false_fn(*args)), select)
    else:
        from ..layers import control_flow
        got: Dict[str, Tuple[Any, ...]] = {}

        def branch(key: str, fn: Callable[..., Tuple[Any, ...]]) -> Callable[[], List[Any]]:
            def run() -> List[Any]:
                res = got[key] = tuple(fn(*args))
                return [v for v in res if _is_tensor(v)]
            return run
        outs = control_flow.cond(pred, branch("t", true_fn), branch("f", false_fn)) or []
        t = got["t"]
        pos = select(t, got["f"])
        if len(pos) != len(outs):
            raise Dy2StaticError("a variable of a static if is a tensor in only one branch")
    # Python values agree in both branches (checked); branch temporaries stay undefined
    result = [UNDEFINED if args[k] is UNDEFINED and k not in pos else v
              for k, v in enumerate(t)]
    for k, o in zip(pos, outs):
        result[k] = o
    return tuple(result)


def _what(v: Any) -> str:
    if v is UNDEFINED:
        return "nothing"
    return "a tensor" if _is_tensor(v) else f"the Python value {v!r}"


def convert_while(cond_fn: Callable[..., Any], body_fn: Callable[..., Tuple[Any, ...]],
                  loop_vars: Tuple[Any, ...], names: Sequence[str]) -> Tuple[Any, ...]:
    """``while cond_fn(*v): v = body_fn(*v)``; returns the final ``v``. A condition that is a
    traced tensor / static Variable builds ``fluid.layers.while_loop`` over the tensor loop
    variables (names the body assigns that had no value before are body temporaries)."""
    vals = tuple(loop_vars)
    rec = _recorder()
    if rec is not None:
        first = rec.trace_while_probe(cond_fn, vals)
        if _kind(first) == "traced":
            return _tensor_while(cond_fn, body_fn, vals, names, rec)
    else:
        first = cond_fn(*vals)
        if _kind(first) == "static":
            return _tensor_while(cond_fn, body_fn, vals, names, None)
    # Python loop (the first condition is already evaluated)
    go = first
    while go:
        vals = tuple(body_fn(*vals))
        go = cond_fn(*vals)
    return vals


def _tensor_while(cond_fn: Callable[..., Any], body_fn: Callable[..., Tuple[Any, ...]],
                  vals: Tuple[Any, ...], names: Sequence[str], rec: Any) -> Tuple[Any, ...]:
    pos = [k for k, v in enumerate(vals) if _is_tensor(v)]

    def merge(tensors: Sequence[Any]) -> List[Any]:
        full = list(vals)
        for k, t in zip(pos, tensors):
            full[k] = t
        return full

    def cond_w(*tensors: Any) -> Any:
        return cond_fn(*merge(tensors))

    def body_w(*tensors: Any) -> List[Any]:
        res = tuple(body_fn(*merge(tensors)))
        for k, (n, old, new) in enumerate(zip(names, vals, res)):
            if k in pos:
                if not _is_tensor(new):
                    raise Dy2StaticError(f"the tensor while loop turns the tensor '{n}' into "
                                         f"{_what(new)}")
            elif old is not UNDEFINED and not _same_python(old, new):
                raise Dy2StaticError(
                    f"the tensor while loop changes the Python value '{n}' ({old!r} -> "
                    f"{new!r}); make it a tensor (fluid.layers.fill_constant) to carry it")
        outs = [res[k] for k in pos]
        # a loop variable set to another one's incoming value (``a, b = b, a``) gets a copy:
        # the while loop writes its variables back one after the other, so the original
        # would already hold its new value
        ins = {id(t): j for j, t in enumerate(tensors)}
        from ..layers.tensor import assign
        return [assign(o) if ins.get(id(o), j) != j else o for j, o in enumerate(outs)]

    if rec is not None:
        outs = rec.trace_while(cond_w, body_w, [vals[k] for k in pos])
    else:
        from ..layers import control_flow
        outs = control_flow.while_loop(cond_w, body_w, [vals[k] for k in pos])
    full = list(vals)
    for k, t in zip(pos, outs):
        full[k] = t
    # a body temporary has no defined value after a static loop
    return tuple(full)



def convert_for_range(rng: Any, args: Tuple[Any, ...],
                      body_fn: Callable[..., Tuple[Any, ...]], loop_vars: Tuple[Any, ...],
                      names: Sequence[str]) -> Tuple[Any, ...]:
    """``for v[0] in rng(*args): v = body_fn(*v)``; returns the final ``v`` (``v[0]``: the
    loop variable, ``names[0]`` its name).

    When ``rng`` is the builtin ``range`` and an argument is a traced tensor / static
    Variable, the loop becomes ``c = start; t = start; while c < stop (c > stop for a
    negative step): t = c; body; c = c + step`` through ``convert_while`` (a
    ``fluid.layers.while_loop``): the loop variable ``t`` ends as the last index taken, as in
    Python (``start`` when no iteration ran). The step must then be a Python int (its sign
    chooses the comparison). Otherwise this is exactly the Python ``for`` loop."""
    import builtins
    if rng is not builtins.range or all(_kind(a) == "python" for a in args):
        vals = tuple(loop_vars)
        for v in rng(*args):
            vals = tuple(body_fn(v, *vals[1:]))
        return vals
    return _tensor_range(args, body_fn, tuple(loop_vars), names)


def _tensor_range(args: Tuple[Any, ...], body_fn: Callable[..., Tuple[Any, ...]],
                  vals: Tuple[Any, ...], names: Sequence[str]) -> Tuple[Any, ...]:
    import operator

    from ..core.dtypes import INTS
    from ..layers import tensor as _lt
    if not 1 <= len(args) <= 3:
        raise TypeError(f"range expected 1 to 3 arguments, got {len(args)}")
    start, stop, step = (0, args[0], 1) if len(args) == 1 else \
        (args[0], args[1], 1) if len(args) == 2 else args
    # Python arguments must be ints as for range() itself (same TypeError)
    start, stop, step = (a if _is_tensor(a) else operator.index(a)
                         for a in (start, stop, step))
    if _is_tensor(step):
        raise Dy2StaticError(f"the step of 'for {names[0]} in range(...)' is a tensor; its "
                             f"sign chooses the loop condition, so it must be a Python int")
    if step == 0:
        raise ValueError("range() arg 3 must not be zero")
    bound = [a for a in (start, stop) if _is_tensor(a)]
    for a in bound:
        if a.dtype not in INTS or math.prod(d for d in a.shape if d > 0) != 1:
            raise Dy2StaticError(
                f"'for {names[0]} in range(...)' has a tensor bound of dtype {a.dtype} and "
                f"shape {list(a.shape)}; a tensor range bound must be an integer tensor of "
                f"one element")
    if _is_tensor(start):
        counter, target = _lt.assign(start), _lt.assign(start)
    else:
        dtype = stop.dtype
        counter = _lt.fill_constant([1], dtype, start)
        target = _lt.fill_constant([1], dtype, start)

    def cond_fn(c: Any, *rest: Any) -> Any:
        return c < stop if step > 0 else c > stop

    def body(c: Any, t: Any, *rest: Any) -> Tuple[Any, ...]:
        # the body sees the index as its loop variable; rebinding it does not move the counter
        return (c + step,) + tuple(body_fn(c, *rest))

    out = convert_while(cond_fn, body, (counter, target) + vals[1:],
                        (f"range counter of '{names[0]}'",) + tuple(names))
    return tuple(out[1:])


_SKIP_MODULES = ("fluidlite", "numpy", "builtins", "functools", "typing", "collections")


def _user_function(fn: Any) -> bool:
    mod = getattr(fn, "__module__", None) or ""
    return isinstance(fn, types.FunctionType) and \
        not any(mod == m or mod.startswith(m + ".") for m in _SKIP_MODULES)


def convert_call(fn: Any) -> Any:
    """What a call in converted code calls (fluid 1.8's ``convert_call``): a user function or
    method -- converted (its own tensor ``if`` / ``while`` convert too) -- or a user ``Layer``
    whose ``forward`` is converted for this call; anything else (fluidlite's layers and
    functions, builtins, classes, ``@declarative`` functions) unchanged."""
    from ..layers import control_flow as cf
    from .layers import Layer
    if fn is cf.cond:
        return _cond
    if fn is cf.while_loop:
        return _while_loop
    if isinstance(fn, types.MethodType) and _user_function(fn.__func__):
        conv = convert_function(fn.__func__)
        return fn if conv is None else types.MethodType(conv.function, fn.__self__)
    if _user_function(fn):
        conv = convert_function(fn)
        return fn if conv is None else conv.function
    if isinstance(fn, Layer) and "forward" not in fn.__dict__:
        fwd = getattr(type(fn), "forward", None)
        if _user_function(fwd):
            conv = convert_function(fwd)
            if conv is not None:
                return _LayerCall(fn, types.MethodType(conv.function, fn))
    return fn


def _cond(pred: Any, true_fn: Optional[Callable[[], Any]] = None,
          false_fn: Optional[Callable[[], Any]] = None, name: Optional[str] = None) -> Any:
    """``fluid.layers.cond`` called in converted code: on a traced tensor both branches are
    traced into a cond of the program (the dygraph ``cond`` would read the condition's value
    and make the trace run eagerly); otherwise ``fluid.layers.cond`` itself."""
    from ..layers import control_flow as cf
    if _kind(pred) != "traced":
        return cf.cond(pred, true_fn, false_fn, name)
    res: Dict[str, Any] = {}

    def wrap(key: str, fn: Optional[Callable[[], Any]]) -> Callable[[], Tuple[Any, ...]]:
        def run() -> Tuple[Any, ...]:
            r = res[key] = fn() if fn is not None else None
            return () if r is None else tuple(cf._flatten(r))
        return run

    def select(t: Tuple[Any, ...], f: Tuple[Any, ...]) -> List[int]:
        if (res["t"] is None) != (res["f"] is None) or \
                cf._structure(res["t"]) != cf._structure(res["f"]):
            raise Dy2StaticError(
                f"Incompatible return values of true_fn and false_fn in cond: true_fn returns "
                f"{cf._describe(res['t'])} while false_fn returns {cf._describe(res['f'])}")
        for k, v in enumerate(t + f):
            if not _is_tensor(v):
                raise Dy2StaticError(f"fluid.layers.cond: the branches must return tensors, "
                                     f"but output {k % max(len(t), 1)} is {type(v).__name__}")
        return list(range(len(t)))

    outs, _, _ = _recorder().trace_cond(pred, wrap("t", true_fn), wrap("f", false_fn), select)
    return None if res["t"] is None else cf._pack(res["t"], list(outs))


def _while_loop(cond: Callable[..., Any], body: Callable[..., Any], loop_vars: Sequence[Any],
                is_test: bool = False, name: Optional[str] = None) -> List[Any]:
    """``fluid.layers.while_loop`` called in converted code: a condition that is a traced
    tensor traces the loop into a while_loop of the program; otherwise
    ``fluid.layers.while_loop`` itself."""
    from ..layers import control_flow as cf
    rec = _recorder()
    vals = list(loop_vars) if isinstance(loop_vars, (list, tuple)) else loop_vars
    if rec is None or not callable(cond) or not callable(body) or \
            not isinstance(vals, list) or not vals or \
            not all(isinstance(v, VarBase) for v in vals) or \
            _kind(rec.trace_while_probe(cond, vals)) != "traced":
        return cf.while_loop(cond, body, loop_vars, is_test, name)

    def body_w(*vs: Any) -> List[Any]:
        out = body(*vs)
        out = list(out) if isinstance(out, (list, tuple)) else [out]
        if len(out) != len(vals):
            raise ValueError(f"while_loop: body should return the same arity as loop_vars "
                             f"({len(vals)}), but returned {len(out)} value(s)")
        return out

    return list(rec.trace_while(cond, body_w, vals))


class _LayerCall:
    """``layer(*args)`` (its hooks included) with ``forward`` replaced for the call."""

    def __init__(self, layer: Any, forward: Callable) -> None:
        self.layer, self.forward = layer, forward

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        d = self.layer.__dict__
        d["forward"] = self.forward       # an instance attribute shadows the class method
        try:
            return self.layer(*args, **kwargs)
        finally:
            d.pop("forward", None)


def convert_logical_and(lhs_fn: Callable[[], Any], rhs_fn: Callable[[], Any]) -> Any:
    """``lhs and rhs`` (``rhs`` evaluated lazily); ``fluid.layers.logical_and`` when both are
    traced tensors / static Variables."""
    lhs = lhs_fn()
    if _kind(lhs) == "python":
        return lhs and rhs_fn()
    rhs = rhs_fn()
    if _kind(rhs) == "python":        # tensor and Python value: the truth is one of them
        return lhs if rhs else rhs
    from ..layers import logical_and
    return logical_and(lhs, rhs)


def convert_logical_or(lhs_fn: Callable[[], Any], rhs_fn: Callable[[], Any]) -> Any:
    """``lhs or rhs`` (``rhs`` evaluated lazily); ``fluid.layers.logical_or`` when both are
    traced tensors / static Variables."""
    lhs = lhs_fn()
    if _kind(lhs) == "python":
        return lhs or rhs_fn()
    rhs = rhs_fn()
    if _kind(rhs) == "python":
        return rhs if rhs else lhs
    from ..layers import logical_or
    return logical_or(lhs, rhs)


def convert_logical_not(x: Any) -> Any:
    """``not x``; ``fluid.layers.logical_not`` for a traced tensor / static Variable."""
    if _kind(x) == "python":
        return not x
    from ..layers import logical_not
    return logical_not(x)


# -- source conversion ---------------------------------------------------------------------------
class _Unsupported(Exception):
    pass


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.ListComp,
           ast.SetComp, ast.DictComp, ast.GeneratorExp)
_BANNED = (ast.Return, ast.Yield, ast.YieldFrom, ast.Await, ast.Global, ast.Nonlocal,
           ast.Delete, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Try,
           ast.Import, ast.ImportFrom, ast.NamedExpr, ast.AsyncFor, ast.AsyncWith)


def _generated(node: ast.AST) -> bool:
    return getattr(node, "_dy2s", False)


def _check_block(stmts: Sequence[ast.stmt]) -> None:
    """Raise ``_Unsupported`` if ``stmts`` (a branch or loop body) hold something the
    conversion does not handle (see the module docstring); ``break``/``continue`` are fine
    only inside a loop nested in ``stmts``."""

    def visit(node: ast.AST, in_loop: bool) -> None:
        if _generated(node):
            return
        if isinstance(node, _BANNED) or isinstance(node, (ast.Break, ast.Continue)) \
                and not in_loop:
            raise _Unsupported(type(node).__name__)
        if isinstance(node, (ast.Attribute, ast.Subscript)) and \
                isinstance(node.ctx, (ast.Store, ast.Del)):
            raise _Unsupported("store to an attribute or subscript")
        if isinstance(node, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp,
                             ast.GeneratorExp)):
            for sub in ast.walk(node):
                if isinstance(sub, (ast.Yield, ast.YieldFrom, ast.Await, ast.NamedExpr)):
                    raise _Unsupported(type(sub).__name__)
            return
        inner = in_loop or isinstance(node, (ast.For, ast.While))
        for child in ast.iter_child_nodes(node):
            # a nested loop's else clause is not inside that loop
            is_else = isinstance(node, (ast.For, ast.While)) and child in node.orelse
            visit(child, in_loop if is_else else inner)

    for s in stmts:
        visit(s, False)


def _assigned(stmts: Sequence[ast.stmt]) -> List[str]:
    """Names bound by ``stmts`` in the enclosing function's scope, in order of appearance."""
    out: List[str] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            if node.id not in out and not node.id.startswith(_PREFIX):
                out.append(node.id)
        if isinstance(node, _SCOPES):
            return
        for child in ast.iter_child_nodes(node):
            visit(child)

    for s in stmts:
        visit(s)
    return out


def _mark(node: ast.AST) -> ast.AST:
    for sub in ast.walk(node):
        sub._dy2s = True         # type: ignore[attr-defined]
    return node


def _helper(attr: str) -> ast.expr:
    return ast.Attribute(value=ast.Name(id=_HELPER, ctx=ast.Load()), attr=attr, ctx=ast.Load())


def _call(attr: str, *args: ast.expr) -> ast.expr:
    return ast.Call(func=_helper(attr), args=list(args), keywords=[])


def _lazy(e: ast.expr) -> ast.expr:
    return ast.Lambda(args=ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[],
                                         kw_defaults=[], kwarg=None, defaults=[]), body=e)


def _names_tuple(names: Sequence[str], ctx: ast.expr_context) -> ast.expr:
    return ast.Tuple(elts=[ast.Name(id=n, ctx=ctx) for n in names], ctx=ctx)


def _fn(name: str, params: Sequence[str], body: List[ast.stmt], ret: ast.expr
        ) -> ast.FunctionDef:
    args = ast.arguments(posonlyargs=[], args=[ast.arg(arg=p) for p in params], vararg=None,
                         kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[])
    return ast.FunctionDef(name=name, args=args, body=list(body) + [ast.Return(value=ret)],
                           decorator_list=[], returns=None, type_params=[])


class _Transformer(ast.NodeTransformer):
    def __init__(self) -> None:
        self.count = 0          # converted if / while / for statements
        self.calls = 0          # calls routed through convert_call

    def visit_Call(self, node: ast.Call) -> Any:
        self.generic_visit(node)
        f = node.func
        helper = isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and \
            f.value.id == _HELPER
        named = isinstance(f, ast.Name) and f.id != "super" and not f.id.startswith(_PREFIX)
        if _generated(node) or helper or not (named or isinstance(f, ast.Attribute)):
            return node
        self.calls += 1
        node.func = _call("convert_call", f)
        return node

    def _test(self, e: ast.expr) -> ast.expr:
        """Rewrite ``and``/``or``/``not`` of a condition into the lazy converters."""
        if isinstance(e, ast.BoolOp):
            attr = "convert_logical_and" if isinstance(e.op, ast.And) else "convert_logical_or"
            values = [self._test(v) for v in e.values]
            acc = values[0]
            for v in values[1:]:
                acc = _call(attr, _lazy(acc), _lazy(v))
            return acc
        if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.Not):
            return _call("convert_logical_not", self._test(e.operand))
        return e

    def _tail(self, names: Sequence[str], value: ast.expr) -> List[ast.stmt]:
        assign = ast.Assign(targets=[_names_tuple(names, ast.Store())], value=value)
        dels = [ast.If(test=ast.Compare(left=ast.Name(id=n, ctx=ast.Load()), ops=[ast.Is()],
                                        comparators=[_helper("UNDEFINED")]),
                       body=[ast.Delete(targets=[ast.Name(id=n, ctx=ast.Del())])], orelse=[])
                for n in names]
        return [assign] + [_mark(d) for d in dels]     # type: ignore[misc]

    def _args(self, names: Sequence[str]) -> ast.expr:
        return ast.Tuple(elts=[_call("ld", _lazy(ast.Name(id=n, ctx=ast.Load())))
                               for n in names], ctx=ast.Load())

    def visit_If(self, node: ast.If) -> Any:
        self.generic_visit(node)
        try:
            _check_block(node.body)
            _check_block(node.orelse)
        except _Unsupported:
            return node
        names = _assigned(node.body + node.orelse)
        if not names:
            return node         # only side effects: nothing a cond could select
        k = self.count
        self.count += 1
        # (a nested converted statement may have deleted a name the branch left undefined)
        ret = self._args(names)
        tfn = _fn(f"{_PREFIX}true_{k}", names, node.body, ret)
        ffn = _fn(f"{_PREFIX}false_{k}", names, node.orelse or [ast.Pass()], ret)
        call = _call("convert_ifelse", self._test(node.test),
                     ast.Name(id=tfn.name, ctx=ast.Load()),
                     ast.Name(id=ffn.name, ctx=ast.Load()), self._args(names),
                     ast.Tuple(elts=[ast.Constant(n) for n in names], ctx=ast.Load()))
        for f in (tfn, ffn):
            f._dy2s = True          # type: ignore[attr-defined]
        return [tfn, ffn] + self._tail(names, call)

    def visit_While(self, node: ast.While) -> Any:
        self.generic_visit(node)
        if node.orelse:
            return node
        try:
            _check_block(node.body)
        except _Unsupported:
            return node
        names = _assigned(node.body)
        if not names:
            return node
        k = self.count
        self.count += 1
        cfn = _fn(f"{_PREFIX}cond_{k}", names, [], self._test(node.test))
        bfn = _fn(f"{_PREFIX}body_{k}", names, node.body, self._args(names))
        call = _call("convert_while", ast.Name(id=cfn.name, ctx=ast.Load()),
                     ast.Name(id=bfn.name, ctx=ast.Load()), self._args(names),
                     ast.Tuple(elts=[ast.Constant(n) for n in names], ctx=ast.Load()))
        for f in (cfn, bfn):
            f._dy2s = True          # type: ignore[attr-defined]
        return [cfn, bfn] + self._tail(names, call)


    def visit_For(self, node: ast.For) -> Any:
        # `for <name> in range(<1 to 3 plain arguments>): body` (no else), checked before the
        # children are visited (which routes the range call through convert_call)
        it = node.iter
        is_range = isinstance(node.target, ast.Name) and \
            not node.target.id.startswith(_PREFIX) and not node.orelse and \
            isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and \
            it.func.id == "range" and 1 <= len(it.args) <= 3 and not it.keywords and \
            not any(isinstance(a, ast.Starred) for a in it.args)
        self.generic_visit(node)
        if not is_range:
            return node
        try:
            _check_block(node.body)
        except _Unsupported:
            return node
        target = node.target.id
        rest = [n for n in _assigned(node.body) if n != target]
        if not rest:
            return node         # only side effects (or only the index): a Python loop
        names = [target] + rest
        k = self.count
        self.count += 1
        bfn = _fn(f"{_PREFIX}for_{k}", names, node.body, self._args(names))
        bfn._dy2s = True            # type: ignore[attr-defined]
        call = _call("convert_for_range", ast.Name(id="range", ctx=ast.Load()),
                     ast.Tuple(elts=list(it.args), ctx=ast.Load()),
                     ast.Name(id=bfn.name, ctx=ast.Load()), self._args(names),
                     ast.Tuple(elts=[ast.Constant(n) for n in names], ctx=ast.Load()))
        return [bfn] + self._tail(names, call)


class ConvertedFunction:
    """The result of ``convert_function``: ``function`` (same globals, closure cells and
    defaults as the original) and its ``source``."""

    def __init__(self, function: Callable, source: str) -> None:
        self.function = function
        self.source = source


_CACHE: "weakref.WeakKeyDictionary[Any, Optional[ConvertedFunction]]" = \
    weakref.WeakKeyDictionary()


def convert_function(fn: Callable) -> Optional[ConvertedFunction]:
    """``fn`` with its tensor-convertible ``if`` / ``while`` statements rewritten (see the
    module docstring); None when nothing was converted or ``fn`` cannot be (no source, a
    lambda, a generator, a syntax the rewriter does not know). Cached per function."""
    try:
        return _CACHE[fn]
    except (KeyError, TypeError):
        pass
    try:
        got: Optional[ConvertedFunction] = _convert(fn)
    except Exception as e:      # noqa: BLE001 -- any failure: the function is used as-is
        _log.debug("dy2static: '%s' is not converted: %s", getattr(fn, "__name__", fn), e)
        got = None
    try:
        _CACHE[fn] = got
    except TypeError:
        pass
    return got


def _convert(fn: Callable) -> Optional[ConvertedFunction]:
    if not isinstance(fn, types.FunctionType):
        return None
    code = fn.__code__
    if code.co_flags & (inspect.CO_GENERATOR | inspect.CO_COROUTINE |
                        inspect.CO_ASYNC_GENERATOR):
        return None
    if hasattr(fn, "__wrapped__"):
        return None         # a decorator's wrapper: getsource would give the wrapped function
    try:
        lines, first = inspect.getsourcelines(fn)
    except (OSError, TypeError):
        return None
    if first != code.co_firstlineno:
        return None         # the source found is not this code object's
    tree = ast.parse(textwrap.dedent("".join(lines)))
    for sub in ast.walk(tree):
        ident = getattr(sub, "id", None) or getattr(sub, "attr", None) or \
            getattr(sub, "arg", None)
        if isinstance(ident, str) and ident.startswith("__") and not ident.endswith("__"):
            return None     # a private name: compiled outside its class it would not mangle
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.FunctionDef) or \
            tree.body[0].name != fn.__name__:
        return None
    fdef = tree.body[0]
    for sub in ast.walk(fdef):
        if isinstance(sub, (ast.Global, ast.Nonlocal)):
            return None          # rebinding rules the nested branch functions would break
    fdef.decorator_list = []
    # defaults and annotations were evaluated once already: reuse the original's values
    fdef.args.defaults = []
    fdef.args.kw_defaults = [None] * len(fdef.args.kwonlyargs)
    for a in fdef.args.posonlyargs + fdef.args.args + fdef.args.kwonlyargs + \
            [fdef.args.vararg, fdef.args.kwarg]:
        if a is not None:
            a.annotation = None
    fdef.returns = None
    tr = _Transformer()
    tr.visit(fdef)
    if tr.count == 0 and tr.calls == 0:
        return None
    # a factory whose parameters are the original free variables and the helper module, so
    # they are closure cells of the converted function (rebound to the original cells below)
    free = list(code.co_freevars)
    factory = ast.FunctionDef(
        name=f"{_PREFIX}factory",
        args=ast.arguments(posonlyargs=[], args=[ast.arg(arg=n) for n in free + [_HELPER]],
                           vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None,
                           defaults=[]),
        body=[fdef, ast.Return(value=ast.Name(id=fdef.name, ctx=ast.Load()))],
        decorator_list=[], returns=None, type_params=[])
    module = ast.Module(body=[factory], type_ignores=[])
    ast.fix_missing_locations(module)
    source = ast.unparse(fdef)
    filename = code.co_filename
    ast.increment_lineno(module, code.co_firstlineno - 1)
    compiled = compile(module, filename, "exec")
    fcode = next(c for c in compiled.co_consts if isinstance(c, types.CodeType))
    new_code = next(c for c in fcode.co_consts if isinstance(c, types.CodeType)
                    and c.co_name == fn.__name__)
    cells = dict(zip(code.co_freevars, fn.__closure__ or ()))
    cells[_HELPER] = types.CellType(sys.modules[__name__])
    missing = [n for n in new_code.co_freevars if n not in cells]
    if missing:
        return None
    new = types.FunctionType(new_code, fn.__globals__, fn.__name__, fn.__defaults__,
                             tuple(cells[n] for n in new_code.co_freevars))
    new.__kwdefaults__ = fn.__kwdefaults__
    new.__qualname__ = fn.__qualname__
    new.__module__ = fn.__module__
    new.__doc__ = fn.__doc__
    new.__dict__.update(fn.__dict__)
    return ConvertedFunction(new, source)
