"""``fluid.layers.py_func``: a Python function as an op of the program (fluid 1.8)."""
from __future__ import annotations

from typing import Any, Callable, List, Optional, Sequence, Union

from ..core.ir import Variable
from ..layer_helper import LayerHelper
from ..ops.py_func import register_callable

__all__ = ["py_func"]

_Vars = Union[Variable, Sequence[Variable], None]


def _var_list(value: _Vars, arg: str) -> List[Variable]:
    if value is None:
        return []
    values = [value] if isinstance(value, Variable) else list(value)
    for v in values:
        if not isinstance(v, Variable):
            raise TypeError(f"py_func: {arg} must be a Variable or a list/tuple of Variables, "
                            f"but received an element of type {type(v).__name__}")
    return values


def py_func(func: Callable[..., Any], x: _Vars, out: _Vars,
            backward_func: Optional[Callable[..., Any]] = None,
            skip_vars_in_backward_input: _Vars = None) -> _Vars:
    """Run ``func(*x)`` as an op writing ``out`` (Variables you created, with their shapes and
    dtypes). ``func`` receives one LoDTensor per ``x`` (``np.array(t)`` reads it) and returns
    one array per ``out``. ``backward_func(*x, *out, *out_grads)`` -- without the variables in
    ``skip_vars_in_backward_input`` -- returns the gradients of ``x``; without it the op is not
    differentiable (its outputs stop the gradient). Returns ``out``.

    Args:
        func (callable): the forward function, ``func(*x) -> arrays`` (one per ``out``).
        x (Variable | list of Variable | None): the inputs.
        out (Variable | list of Variable | None): the outputs, created beforehand with their
            shapes and dtypes.
        backward_func (callable | None, default None): the backward function; None: the op
            is not differentiable.
        skip_vars_in_backward_input (Variable | list of Variable | None, default None): inputs
            or outputs not passed to ``backward_func``.
    Returns:
        Variable | list of Variable | None: ``out`` as given.
    Raises:
        TypeError: ``func`` / ``backward_func`` is not callable, or ``x`` / ``out`` /
            ``skip_vars_in_backward_input`` holds a non-Variable.
        ValueError: a variable of ``skip_vars_in_backward_input`` is neither an input nor an
            output.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 2])
        ...     out = main.global_block().create_var(name="doubled", shape=[-1, 2], dtype="float32")
        ...     _ = fluid.layers.py_func(func=lambda a: np.asarray(a) * 2, x=x, out=out)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> exe.run(main, feed={"x": np.array([[1, 2]], "float32")}, fetch_list=[out])[0]
        array([[2., 4.]], dtype=float32)
    """
    if not callable(func):
        raise TypeError(f"py_func: func must be callable, but received {func!r}")
    if backward_func is not None and not callable(backward_func):
        raise TypeError(f"py_func: backward_func must be callable, but received "
                        f"{backward_func!r}")
    xs = _var_list(x, "x")
    outs = _var_list(out, "out")
    skip = _var_list(skip_vars_in_backward_input, "skip_vars_in_backward_input")
    known = {v.name for v in xs + outs}
    for v in skip:
        if v.name not in known:
            raise ValueError(f"py_func: variable '{v.name}' in skip_vars_in_backward_input is "
                             f"neither an input nor an output of py_func")
    fwd_id = register_callable(func)
    bwd_id = register_callable(backward_func) if backward_func is not None else -1
    helper = LayerHelper("py_func")
    helper.append_op(type="py_func", inputs={"X": xs}, outputs={"Out": outs},
                     attrs={"forward_callable_id": fwd_id, "backward_callable_id": bwd_id,
                            "backward_skip_vars": [v.name for v in skip]})
    if backward_func is None:
        for v in outs:
            v.stop_gradient = True
    return out
