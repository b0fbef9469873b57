"""Control flow layers (fluid 1.8 names and semantics): step counters (``increment``,
``autoincreased_step_counter``), loops (``While``, ``while_loop``), branches (``cond``, ``case``,
``switch_case``, ``Switch``, ``IfElse``), tensor arrays (``create_array``, ``array_write``,
``array_read``, ``array_length``, ``tensor_array_to_tensor``), ``Print`` and ``Assert``.

Static mode builds sub-blocks: the body of a ``While`` or a branch is a Block whose
``parent_idx`` is the block it is written in, owned by a ``while`` / ``conditional_block`` op
appended to the parent when the body ends. The ops list every outer variable the body reads
(``X`` / ``Input``) and writes (``Out``). Dygraph mode runs the same functions with Python
control flow, as fluid 1.8 did (``cond`` calls the taken branch only, ``while_loop`` loops in
Python, arrays are Python lists).
"""
from __future__ import annotations

import contextlib
import warnings
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..core import control_flow as _cf
from ..core import mode as _mode
from ..core import names as _names
from ..core import rewrite
from ..core.callstack import user_stacklevel
from ..core.dtypes import VarType, convert_np_dtype_to_dtype_, to_numpy_dtype
from ..core.ir import Variable, default_main_program, default_startup_program
from ..pipeline.feeder import check_type, check_variable_and_dtype
from ..layer_helper import LayerHelper, check_int, check_number

__all__ = ["increment", "autoincreased_step_counter", "While", "create_array", "array_write",
           "array_read", "array_length", "tensor_array_to_tensor", "Print", "Assert"]


def increment(x: Variable, value: float = 1.0, in_place: bool = True) -> Variable:
    """``x + value`` for a one-element ``x`` (op ``increment``); written back into ``x`` when
    ``in_place`` (the default), else into a new variable.

    Args:
        x (Variable): a one-element tensor.
        value (float, default 1.0): the amount added.
        in_place (bool, default True): write the result into ``x``.
    Returns:
        Variable: ``x + value`` (``x`` itself with ``in_place``).
    Raises:
        TypeError: ``x`` is not a Variable, or ``value`` is not a number.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     counter = fluid.layers.fill_constant(shape=[1], dtype="int64", value=0)
        ...     counter = fluid.layers.increment(counter, value=5, in_place=True)
        >>> fluid.Executor(fluid.CPUPlace()).run(main, fetch_list=[counter])[0]
        array([5])
    """
    if not isinstance(x, Variable):
        raise TypeError(f"increment: x must be a Variable, but received {type(x).__name__}")
    value = check_number(value, "value", "increment")
    helper = LayerHelper("increment")
    out = x if in_place else helper.create_variable_for_type_inference(dtype=x.dtype)
    helper.append_op(type="increment", inputs={"X": [x]}, outputs={"Out": [out]},
                     attrs={"step": float(value)})
    return out


def autoincreased_step_counter(counter_name: Optional[str] = None, begin: int = 1,
                               step: int = 1) -> Variable:
    """A persistable int64 [1] counter (default name ``@STEP_COUNTER@``) that counts runs of the
    main program: initialised to ``begin - 1`` in the startup program, with an ``increment`` op
    *prepended* to block 0, so the first run sees ``begin - 1 + step`` (``begin`` with the
    default step 1). Calling it again with the same name returns the existing counter (one
    increment per program). The optimizers' passes build theirs with the same verb
    (``rewrite.step_counter``).

    Args:
        counter_name (str | None): the persistable counter's name (default
            ``@STEP_COUNTER@``).
        begin (int, default 1): the value of the first run.
        step (int, default 1): the increment per run.
    Returns:
        Variable: int64 ``[1]``, increased before each run of the program.
    Raises:
        TypeError: ``begin`` or ``step`` is not an int.
        RuntimeError: called in dygraph mode.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     step = fluid.layers.autoincreased_step_counter(begin=1)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> [int(exe.run(main, fetch_list=[step])[0][0]) for _ in range(3)]
        [1, 2, 3]
    """
    begin = check_int(begin, "begin", "autoincreased_step_counter")
    step = check_int(step, "step", "autoincreased_step_counter")
    if _mode.tracer is not None:
        raise RuntimeError("fluid.layers.autoincreased_step_counter counts the runs of a static "
                           "Program and cannot be used in dygraph mode; count the steps in "
                           "Python instead")
    return rewrite.step_counter(default_main_program(), default_startup_program(),
                                "@STEP_COUNTER@" if counter_name is None else counter_name,
                                begin, step)


# -- sub-blocks -------------------------------------------------------------------------------
class BlockGuard:
    """``with BlockGuard(program):`` builds ops into a new block of ``program`` whose parent is
    the current block; the current block is restored on exit."""

    def __init__(self, main_program: Any) -> None:
        if main_program is None or not hasattr(main_program, "_create_block"):
            raise TypeError("BlockGuard takes a program")
        self.main_program = main_program

    def __enter__(self) -> Any:
        self.block = self.main_program._create_block()
        return self.block

    def __exit__(self, exc_type: Any, exc_val: Any, exc_tb: Any) -> bool:
        self.main_program._rollback()
        return False


def _numel(shape: Sequence[int]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _check_bool_scalar(cond: Any, arg: str, api: str, batch_ok: bool = False) -> None:
    """``cond`` is a one-element bool Variable. ``batch_ok``: -1 dims pass (fluid 1.8's
    ``cond`` / ``case`` check only the dtype when building; conditional_block then requires
    one element when it runs, e.g. a ``[-1, 1]`` comparison fed a batch of one)."""
    check_variable_and_dtype(cond, arg, ["bool"], api)
    shape = [d for d in cond.shape if not (batch_ok and d == -1)]
    if _numel(shape) != 1:
        raise TypeError(f"{api}: {arg} '{cond.name}' must be a bool scalar (shape [1] or []), "
                        f"but its shape is {list(cond.shape)}")


def _outer_specs(block: Any) -> Dict[str, Tuple[Tuple[int, ...], Any]]:
    """Shape and dtype of every variable visible from ``block`` (to detect loop variables
    whose shape a loop body changes)."""
    out: Dict[str, Tuple[Tuple[int, ...], Any]] = {}
    prog = block.program
    b = block
    while b is not None:
        for n, v in b.vars.items():
            if n not in out and v.type == VarType.LOD_TENSOR:
                out[n] = (tuple(v.shape), v.dtype)
        b = prog.blocks[b.parent_idx] if b.parent_idx >= 0 else None
    return out


def _check_loop_vars(block: Any, before: Dict[str, Tuple[Tuple[int, ...], Any]],
                     written: Sequence[str], api: str) -> None:
    for n in written:
        if n not in before:
            continue
        var = block._find_var_recursive(n)
        old_shape, old_dtype = before[n]
        new_shape, new_dtype = tuple(var.shape), var.dtype
        same_rank = len(old_shape) == len(new_shape)
        shape_ok = not old_shape or not new_shape or (same_rank and all(
            a == b or a == -1 or b == -1 for a, b in zip(old_shape, new_shape)))
        if not shape_ok or (old_dtype is not None and new_dtype != old_dtype):
            var._set_spec(var.spec.with_(shape=old_shape, dtype=old_dtype))
            raise ValueError(
                f"{api}: loop variable '{n}' changes inside the loop body: it is "
                f"{list(old_shape)} {_dt(old_dtype)} before the loop but the body writes "
                f"{list(new_shape)} {_dt(new_dtype)}. A loop variable must keep its shape and "
                f"dtype across iterations; write the new value to a new variable instead")


def _dt(dtype: Any) -> str:
    from ..core.dtypes import convert_dtype
    try:
        return convert_dtype(dtype)
    except (TypeError, ValueError, KeyError):
        return str(dtype)


class While:
    """``while cond: body``: ops created inside ``with loop.block():`` form the loop body.

    ``cond`` is a bool Variable of one element; the body must update it (e.g.
    ``fluid.layers.less_than(i, n, cond=cond)``). Outer variables the body writes (with
    ``assign(x, output=var)``, ``increment(i)``, ``array_write``) are the loop-carried
    variables and must keep their shape and dtype. ``is_test`` drops what the backward pass
    would need (nothing is recorded per iteration unless the program holds ``while_grad``).

    Args:
        cond (Variable): a bool ``[1]`` tensor; the body runs while it is true (update it in
            the body).
        is_test (bool, default False): accepted for fluid's signature.
        name (str | None): name prefix.
    Returns:
        While: the loop; ``with loop.block():`` builds its body (the ``while`` op is appended
        when the block closes).
    Raises:
        RuntimeError: constructed in dygraph mode.
        TypeError: ``cond`` is not a one-element bool Variable, or ``is_test`` is not a bool.
        ValueError: (when the body block closes) the body never updates ``cond``, or it changes
            the shape or dtype of a loop-carried variable; ``block()`` entered twice.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     i = fluid.layers.fill_constant([1], "int64", 0)
        ...     limit = fluid.layers.fill_constant([1], "int64", 4)
        ...     total = fluid.layers.fill_constant([1], "int64", 0)
        ...     cond = fluid.layers.less_than(i, limit)
        ...     loop = fluid.layers.While(cond)
        ...     with loop.block():
        ...         _ = fluid.layers.assign(total + i, total)
        ...         _ = fluid.layers.increment(i, in_place=True)
        ...         _ = fluid.layers.less_than(i, limit, cond=cond)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> exe.run(main, fetch_list=[total])[0]
        array([6])
    """

    BEFORE_WHILE_BLOCK, IN_WHILE_BLOCK, AFTER_WHILE_BLOCK = 0, 1, 2
    # constructing one changes nothing; ``with loop.block():`` is one build transaction
    __fluidlite_atomic__ = True

    def __init__(self, cond: Variable, is_test: bool = False, name: Optional[str] = None) -> None:
        _static_only("While", "a Python while loop (or fluid.layers.while_loop)")
        self.helper = LayerHelper("while", name=name)
        self.status = While.BEFORE_WHILE_BLOCK
        _check_bool_scalar(cond, "cond", "fluid.layers.While")
        check_type(is_test, "is_test", bool, "fluid.layers.While")
        self.cond_var = cond
        self.is_test = is_test

    def block(self) -> "contextlib.AbstractContextManager[Any]":
        return _WhileGuard(self)

    def _complete(self, block: Any, before: Dict[str, Any]) -> None:
        prog = block.program
        parent = prog.block(block.parent_idx)
        reads, writes = _cf.outer_reads_writes(block)
        _check_loop_vars(block, before, writes, "fluid.layers.While")
        if self.cond_var.name not in writes:
            raise ValueError(
                f"fluid.layers.While: the loop body never updates the condition "
                f"'{self.cond_var.name}', so the loop would never end; recompute it inside the "
                f"body, e.g. fluid.layers.less_than(i, n, cond={self.cond_var.name})")
        step_scope = parent.create_var(type=VarType.STEP_SCOPES,
                                       name=_unique(f"{self.helper.name}.step_scopes"))
        # a loop-carried variable is an input too: after zero iterations it is unchanged
        x = [n for n in reads + [w for w in writes if w not in reads and _cf.has_value(block, w)]
             if n != self.cond_var.name]
        parent.append_op(type="while", inputs={"X": x, "Condition": [self.cond_var]},
                         outputs={"Out": writes, "StepScopes": [step_scope]},
                         attrs={"sub_block": block, "is_test": self.is_test})


def _static_only(api: str, instead: str) -> None:
    if _mode.tracer is not None:
        raise RuntimeError(f"fluid.layers.{api} builds a sub-block of a static Program and "
                           f"cannot be used in dygraph mode; use {instead} instead")


def _unique(prefix: str) -> str:
    return _names.generate(prefix)


class _WhileGuard(_cf.BlockBuild):
    def __init__(self, while_op: While) -> None:
        if not isinstance(while_op, While):
            raise TypeError("WhileGuard takes a while op")
        self.while_op = while_op

    def __enter__(self) -> Any:
        if self.while_op.status != While.BEFORE_WHILE_BLOCK:
            raise ValueError("fluid.layers.While: block() can be entered only once")
        prog = self.while_op.helper.main_program
        self.before = _outer_specs(prog.current_block())
        self.while_op.status = While.IN_WHILE_BLOCK
        return self._open(prog)

    def _complete(self) -> None:
        self.while_op.status = While.AFTER_WHILE_BLOCK
        self.while_op._complete(self.block, self.before)


# -- tensor arrays ----------------------------------------------------------------------------
def create_array(dtype: Any) -> Variable:
    """An empty tensor array (``VarType.LOD_TENSOR_ARRAY``) of ``dtype`` elements; in dygraph
    mode a Python list.

    Args:
        dtype (str | numpy dtype): the dtype of the elements.
    Returns:
        Variable: an empty tensor array (``array_write`` / ``array_read``).
    Raises:
        TypeError: ``dtype`` is not a known dtype.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     arr = fluid.layers.create_array("float32")
        ...     i = fluid.layers.fill_constant([1], "int64", 0)
        ...     arr = fluid.layers.array_write(fluid.layers.fill_constant([2], "float32", 5.0), i, array=arr)
        ...     n = fluid.layers.array_length(arr)
        ...     first = fluid.layers.array_read(arr, i)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> exe.run(main, fetch_list=[n, first])
        [array([1]), array([5., 5.], dtype=float32)]
    """
    if _mode.tracer is not None:
        return []
    helper = LayerHelper("array")
    return helper.create_variable(name=f"{helper.name}.out", type=VarType.LOD_TENSOR_ARRAY,
                                  dtype=dtype)


def _check_index(i: Any, api: str) -> None:
    check_variable_and_dtype(i, "i", ["int64"], api)
    if _numel(i.shape) != 1:
        raise TypeError(f"{api}: i '{i.name}' must hold one element, but its shape is "
                        f"{list(i.shape)}")


def array_write(x: Variable, i: Variable, array: Optional[Variable] = None) -> Variable:
    """``array[i] = x`` (op ``write_to_array``); creates the array when ``array`` is None and
    returns it. The array grows to ``i + 1`` entries.

    Args:
        x (Variable): the tensor to write (bool, float or int32/int64).
        i (Variable): the position, an int64 tensor of shape ``[1]``.
        array (Variable, optional): a LoDTensorArray (``create_array``); None creates one.
            In dygraph mode a Python list. Default None.

    Returns:
        Variable: ``array`` (the new one when it was None).

    Raises:
        TypeError: ``x`` or ``i`` is not a Variable of a supported dtype, or ``array`` is not a
            tensor array.
        IndexError: in dygraph mode, ``i`` is past the end of the list.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     arr = fluid.layers.array_write(fluid.layers.fill_constant([2], "float32", 1.0),
        ...                                    fluid.layers.fill_constant([1], "int64", 0))
        ...     arr = fluid.layers.array_write(fluid.layers.fill_constant([2], "float32", 2.0),
        ...                                    fluid.layers.fill_constant([1], "int64", 1), array=arr)
        ...     n = fluid.layers.array_length(arr)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> exe.run(main, fetch_list=[n])[0]
        array([2])
    """
    if _mode.tracer is not None:
        idx = int(np.asarray(i.numpy()).reshape(-1)[0])
        if array is None:
            array = []
        check_type(array, "array", list, "array_write")
        if idx < len(array):
            array[idx] = x
        elif idx == len(array):
            array.append(x)
        else:
            raise IndexError(f"array_write: index {idx} is past the end of the array (length "
                             f"{len(array)}); in dygraph mode write positions in order")
        return array
    check_variable_and_dtype(x, "x", ["bool", "float16", "float32", "float64", "int32",
                                      "int64"], "array_write")
    _check_index(i, "array_write")
    helper = LayerHelper("array_write")
    if array is None:
        array = helper.create_variable(name=f"{helper.name}.out",
                                       type=VarType.LOD_TENSOR_ARRAY, dtype=x.dtype)
    elif not (isinstance(array, Variable) and array.type == VarType.LOD_TENSOR_ARRAY):
        raise TypeError(f"array_write: array must be a tensor array Variable "
                        f"(fluid.layers.create_array), but received {_what(array)}")
    helper.append_op(type="write_to_array", inputs={"X": [x], "I": [i]},
                     outputs={"Out": [array]})
    return array


def _what(x: Any) -> str:
    if isinstance(x, Variable):
        return f"Variable '{x.name}' of type {x.type.name}"
    return type(x).__name__


def array_read(array: Variable, i: Variable) -> Variable:
    """``array[i]`` (op ``read_from_array``); reading past the end raises an IndexError
    naming the array and its length.

    Args:
        array (Variable): a LoDTensorArray (``create_array``); in dygraph mode a Python list.
        i (Variable): the position, an int64 tensor of shape ``[1]``.

    Returns:
        Variable: the tensor at position ``i``, the array's dtype.

    Raises:
        TypeError: ``array`` is not a tensor array, or ``i`` is not an int64 Variable.
        IndexError: ``i`` is out of the array's range (when the program runs; at once in
            dygraph mode).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     arr = fluid.layers.create_array("float32")
        ...     i = fluid.layers.fill_constant([1], "int64", 1)
        ...     arr = fluid.layers.array_write(fluid.layers.fill_constant([2], "float32", 7.0), i, array=arr)
        ...     item = fluid.layers.array_read(arr, i)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> exe.run(main, fetch_list=[item])[0]
        array([7., 7.], dtype=float32)
    """
    if _mode.tracer is not None:
        check_type(array, "array", list, "array_read")
        idx = int(np.asarray(i.numpy()).reshape(-1)[0])
        if not 0 <= idx < len(array):
            raise IndexError(f"array_read: index {idx} is out of range of the array (length "
                             f"{len(array)})")
        return array[idx]
    if not (isinstance(array, Variable) and array.type == VarType.LOD_TENSOR_ARRAY):
        raise TypeError(f"array_read: array must be a tensor array Variable "
                        f"(fluid.layers.create_array), but received {_what(array)}")
    _check_index(i, "array_read")
    helper = LayerHelper("array_read")
    out = helper.create_variable_for_type_inference(dtype=array.dtype)
    helper.append_op(type="read_from_array", inputs={"X": [array], "I": [i]},
                     outputs={"Out": [out]})
    return out


def array_length(array: Variable) -> Variable:
    """The number of entries of ``array`` (int64, shape [1]; op ``lod_array_length``).

    Args:
        array (Variable): a LoDTensorArray (``create_array``); in dygraph mode a Python list.

    Returns:
        Variable: an int64 tensor of shape ``[1]`` holding the number of entries.

    Raises:
        TypeError: ``array`` is not a tensor array.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     arr = fluid.layers.create_array("float32")
        ...     for k in range(3):
        ...         _ = fluid.layers.array_write(fluid.layers.fill_constant([1], "float32", 0.0),
        ...                                      fluid.layers.fill_constant([1], "int64", k), array=arr)
        ...     n = fluid.layers.array_length(arr)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> exe.run(main, fetch_list=[n])[0]
        array([3])
    """
    if _mode.tracer is not None:
        check_type(array, "array", list, "array_length")
        return _mode.implementation("to_variable")(np.array([len(array)], np.int64))
    if not (isinstance(array, Variable) and array.type == VarType.LOD_TENSOR_ARRAY):
        raise TypeError(f"array_length: array must be a tensor array Variable "
                        f"(fluid.layers.create_array), but received {_what(array)}")
    helper = LayerHelper("array_length")
    out = helper.create_variable_for_type_inference(dtype="int64")
    out.stop_gradient = True
    helper.append_op(type="lod_array_length", inputs={"X": [array]}, outputs={"Out": [out]})
    return out


def tensor_array_to_tensor(input: Variable, axis: int = 1, name: Optional[str] = None,
                           use_stack: bool = False) -> Tuple[Variable, Variable]:
    """Concatenate (``use_stack``: stack) the entries of a tensor array along ``axis``; returns
    ``(out, out_index)``, ``out_index`` holding each entry's size along ``axis`` (int32).

    Args:
        input (Variable): a tensor array (``create_array``; in dygraph mode a list of tensors).
        axis (int, default 1): the axis to concatenate (or stack) along.
        name (str | None, default None): name prefix of the outputs.
        use_stack (bool, default False): stack the entries on a new ``axis`` instead of
            concatenating them.
    Returns:
        tuple of Variable: ``(out, out_index)``: the joined tensor (dtype of the entries) and
        int32 [len(array)] sizes of the entries along ``axis``.
    Raises:
        TypeError: ``axis`` is not an int, or ``input`` is not a tensor array Variable (a list
            in dygraph mode).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     arr = fluid.layers.create_array("float32")
        ...     for k in range(3):
        ...         idx = fluid.layers.fill_constant([1], "int64", k)
        ...         _ = fluid.layers.array_write(fluid.layers.fill_constant([1, 2], "float32", float(k)), idx,
        ...                                      array=arr)
        ...     out, sizes = fluid.layers.tensor_array_to_tensor(arr, axis=0)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> exe.run(main, fetch_list=[out, sizes])
        [array([[0., 0.],
               [1., 1.],
               [2., 2.]], dtype=float32), array([1, 1, 1], dtype=int32)]
    """
    axis = check_int(axis, "axis", "tensor_array_to_tensor")
    if _mode.tracer is not None:
        check_type(input, "input", list, "tensor_array_to_tensor")
        from . import tensor as _tensor
        if use_stack:
            out = _tensor.stack(input, axis=axis) if hasattr(_tensor, "stack") else None
        else:
            out = _tensor.concat(input, axis=axis)
        sizes = [1 if use_stack else x.shape[axis] for x in input]
        return out, _mode.implementation("to_variable")(np.array(sizes, np.int32))
    if not (isinstance(input, Variable) and input.type == VarType.LOD_TENSOR_ARRAY):
        raise TypeError(f"tensor_array_to_tensor: input must be a tensor array Variable, but "
                        f"received {_what(input)}")
    helper = LayerHelper("tensor_array_to_tensor", name=name)
    out = helper.create_variable_for_type_inference(dtype=input.dtype)
    out_index = helper.create_variable_for_type_inference(dtype="int32")
    helper.append_op(type="tensor_array_to_tensor", inputs={"X": [input]},
                     outputs={"Out": [out], "OutIndex": [out_index]},
                     attrs={"axis": axis, "use_stack": bool(use_stack)})
    return out, out_index


# -- Print / Assert ---------------------------------------------------------------------------
def Print(input: Variable, first_n: int = -1, message: Optional[str] = None,
          summarize: int = 20, print_tensor_name: bool = True, print_tensor_type: bool = True,
          print_tensor_shape: bool = True, print_tensor_lod: bool = True,
          print_phase: str = "both") -> Variable:
    """Log ``input`` (name, dtype, shape, LoD, the first ``summarize`` values) each time the
    program runs, on the ``fluidlite`` logger at INFO; returns a Variable equal to ``input``
    (use it so the op is kept). ``print_phase``: 'forward', 'backward' or 'both' (the gradient
    is logged when it is computed).

    Args:
        input (Variable): the float32/float64/int32/int64/bool tensor to log.
        first_n (int, default -1): log only the first ``first_n`` runs (-1: every run).
        message (str | None, default None): a text logged before the tensor.
        summarize (int, default 20): how many values to log (-1: all).
        print_tensor_name (bool, default True): log the variable's name.
        print_tensor_type (bool, default True): log its dtype.
        print_tensor_shape (bool, default True): log its shape.
        print_tensor_lod (bool, default True): log its LoD.
        print_phase (str, default "both"): ``"forward"``, ``"backward"`` or ``"both"``.
    Returns:
        Variable: a copy of ``input`` (same shape and dtype).
    Raises:
        TypeError: ``input`` is not a Variable of one of the dtypes above.
        ValueError: ``print_phase`` is not one of the three names.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 2])
        ...     y = fluid.layers.Print(x, message="x is", summarize=4)      # prints when it runs
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> import contextlib, io
        >>> printed = io.StringIO()
        >>> with contextlib.redirect_stdout(printed):
        ...     _ = exe.run(main, feed={"x": np.ones((1, 2), "float32")}, fetch_list=[y])
        >>> "x is" in printed.getvalue(), "data: 1.0,1.0," in printed.getvalue()
        (True, True)
    """
    check_variable_and_dtype(input, "input", ["float32", "float64", "int32", "int64", "bool"],
                             "fluid.layers.Print")
    if print_phase.lower() not in ("forward", "backward", "both"):
        raise ValueError(f"fluid.layers.Print: print_phase must be 'forward', 'backward' or "
                         f"'both', but received {print_phase!r}")
    helper = LayerHelper("print_" + input.name)
    out = helper.create_variable_for_type_inference(dtype=input.dtype)
    helper.append_op(type="print", inputs={"In": [input]}, outputs={"Out": [out]},
                     attrs={"first_n": int(first_n), "summarize": int(summarize),
                            "message": message or "", "print_tensor_name": print_tensor_name,
                            "print_tensor_type": print_tensor_type,
                            "print_tensor_shape": print_tensor_shape,
                            "print_tensor_lod": print_tensor_lod,
                            "print_phase": print_phase.lower(), "var_name": input.name})
    return out


def Assert(cond: Variable, data: Optional[Sequence[Variable]] = None, summarize: int = 20,
           name: Optional[str] = None) -> Any:
    """Stop the run with a ValueError when ``cond`` (a bool scalar) is False, showing the first
    ``summarize`` values of each of ``data``."""
    _check_bool_scalar(cond, "cond", "fluid.layers.Assert")
    check_type(summarize, "summarize", int, "fluid.layers.Assert")
    data = list(data or [])
    for k, d in enumerate(data):
        check_type(d, f"data[{k}]", Variable, "fluid.layers.Assert")
    helper = LayerHelper("assert", name=name)
    return helper.append_op(type="assert", inputs={"Cond": [cond], "Data": data},
                            attrs={"summarize": summarize})


# -- conditional blocks -----------------------------------------------------------------------
class ConditionalBlock:
    """Ops created inside ``with cb.block():`` run only when the condition holds: with
    ``is_scalar_condition`` when ``inputs[0]`` (a bool scalar) is true, otherwise when every
    Variable of ``inputs`` is non-empty (fluid's ``ConditionalBlock``)."""

    def __init__(self, inputs: Sequence[Variable], is_scalar_condition: bool = False,
                 name: Optional[str] = None) -> None:
        _static_only("ConditionalBlock", "a Python if (or fluid.layers.cond)")
        for k, v in enumerate(inputs):
            check_type(v, f"inputs[{k}]", Variable, "ConditionalBlock")
        self.inputs = list(inputs)
        self.is_scalar_condition = is_scalar_condition
        self.helper = LayerHelper("conditional_block", name=name)

    def block(self) -> _cf.Conditional:
        """``with cb.block():`` -- one build transaction, like ``While.block()``."""
        return _cf.Conditional(self.inputs, self.is_scalar_condition, self.helper.name)


def _flatten(x: Any) -> List[Any]:
    if isinstance(x, (list, tuple)):
        return [y for item in x for y in _flatten(item)]
    if isinstance(x, dict):
        return [y for k in sorted(x) for y in _flatten(x[k])]
    return [x]


def _structure(x: Any) -> Any:
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, [_structure(y) for y in x])
    if isinstance(x, dict):
        return ("dict", [(k, _structure(x[k])) for k in sorted(x)])
    return "Variable" if isinstance(x, Variable) else type(x).__name__


def _pack(template: Any, flat: List[Any]) -> Any:
    it = iter(flat)

    def rebuild(t: Any) -> Any:
        if isinstance(t, (list, tuple)):
            return type(t)(rebuild(y) for y in t)
        if isinstance(t, dict):
            return {k: rebuild(t[k]) for k in sorted(t)}
        return next(it)
    return rebuild(template)


def _scalar_true(pred: Any) -> bool:
    return bool(np.asarray(pred.numpy()).reshape(-1)[0])


def cond(pred: Variable, true_fn: Optional[Callable[[], Any]] = None,
         false_fn: Optional[Callable[[], Any]] = None, name: Optional[str] = None) -> Any:
    """``true_fn()`` if ``pred`` (a bool scalar) else ``false_fn()``.

    Static mode builds both branches as conditional blocks; only the taken one runs, and
    gradients flow only through it. Both branches must return the same structure of Variables
    (else a ValueError naming both branches), or both None; as in fluid 1.8 their shapes may
    differ: the output is declared with the false branch's shape and holds the value of the
    branch taken. Branches of different dtypes are both cast to the dtype that holds both (a
    float over an int over bool, else the wider), with a warning: fluid 1.8 handed on the
    taken branch's own dtype, so a value's dtype could differ from its variable's. Dygraph
    mode calls the taken function only.

    Args:
        pred (Variable): a bool tensor of one element (a ``-1`` dim is checked when it runs).
        true_fn (callable | None): builds the branch taken when ``pred`` is true.
        false_fn (callable | None): builds the other branch.
        name (str | None): name prefix.
    Returns:
        The outputs of the branch taken (both branches must return the same structure).
    Raises:
        TypeError: ``pred`` is not a one-element bool Variable, ``true_fn`` / ``false_fn`` is
            neither callable nor None, or a branch returns something other than Variables.
        ValueError: the branches return different structures (or only one returns None).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [1])
        ...     zero = fluid.layers.fill_constant([1], "float32", 0.0)
        ...     y = fluid.layers.cond(fluid.layers.greater_than(x, zero),
        ...                           lambda: fluid.layers.scale(x, 2.0), lambda: x * -1)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> [exe.run(main, feed={"x": np.array([v], "float32")}, fetch_list=[y])[0] for v in (3, -3)]
        [array([6.], dtype=float32), array([3.], dtype=float32)]
    """
    if _mode.tracer is not None:
        if _scalar_true(pred):
            return true_fn() if true_fn is not None else None
        return false_fn() if false_fn is not None else None
    _check_bool_scalar(pred, "pred", "fluid.layers.cond", batch_ok=True)
    for arg, fn in (("true_fn", true_fn), ("false_fn", false_fn)):
        if fn is not None and not callable(fn):
            raise TypeError(f"fluid.layers.cond: {arg} must be callable or None, but received "
                            f"{type(fn).__name__}")
    helper = LayerHelper("cond", name=name)
    outs: Optional[List[Variable]] = None
    template: Any = None
    true_ret = false_ret = None
    if true_fn is not None:
        with ConditionalBlock([pred], is_scalar_condition=True).block():
            true_ret = true_fn()
            if true_ret is not None:
                template = true_ret
                flat = _check_vars(_flatten(true_ret), "true_fn")
                outs = [helper.main_program.block(
                    helper.main_program.current_block().parent_idx).create_var(
                        name=_unique(f"{helper.name}.tmp"), dtype=v.dtype, shape=v.shape,
                        lod_level=v.lod_level) for v in flat]
                true_block = helper.main_program.current_block()
                true_copies = []
                for v, o in zip(flat, outs):
                    assign(v, o)
                    true_copies.append(true_block.ops[-1])
    if false_fn is not None:
        not_pred = logical_not(pred)
        with ConditionalBlock([not_pred], is_scalar_condition=True).block():
            false_ret = false_fn()
            if true_ret is None and false_ret is not None:
                raise ValueError("Incompatible return values of true_fn and false_fn in cond: "
                                 "true_fn returns None while false_fn returns non-None")
            if true_ret is not None and false_ret is None:
                raise ValueError("Incompatible return values of true_fn and false_fn in cond: "
                                 "true_fn returns non-None while false_fn returns None")
            if false_ret is not None:
                if _structure(true_ret) != _structure(false_ret):
                    raise ValueError(
                        f"Incompatible return values of true_fn and false_fn in cond: true_fn "
                        f"returns {_describe(true_ret)} while false_fn returns "
                        f"{_describe(false_ret)}; both branches must return the same "
                        f"structure")
                flat = _check_vars(_flatten(false_ret), "false_fn")
                # fluid 1.8 checks only the structure: the branches may differ in shape; the
                # merged output is declared as the false branch's (select_input's inputs[0])
                # and holds the taken branch's value
                for k, (t, f) in enumerate(zip(outs, flat)):
                    if t.dtype == f.dtype:
                        assign(f, t)
                        continue
                    _merge_branch_dtypes(k, t, f, true_block, true_copies[k])
    if true_ret is None and false_ret is None:
        return None
    if outs is None:      # only false_fn given and it returned values: no value if pred holds
        raise ValueError("Incompatible return values of true_fn and false_fn in cond: true_fn "
                         "is None while false_fn returns non-None")
    return _pack(template, outs)


def _describe(x: Any) -> str:
    if isinstance(x, Variable):
        return f"Variable '{x.name}' {list(x.shape)} {_dt(x.dtype)}"
    if isinstance(x, (list, tuple)):
        inner = ", ".join(_describe(y) for y in x)
        return f"{type(x).__name__} of {len(x)} ({inner})"
    if isinstance(x, dict):
        return "dict with keys " + str(sorted(x))
    return type(x).__name__


def _check_vars(flat: List[Any], fn: str) -> List[Variable]:
    for k, v in enumerate(flat):
        if not isinstance(v, Variable):
            raise TypeError(f"fluid.layers.cond: {fn} must return Variables (or nested "
                            f"lists/tuples/dicts of them), but output {k} is "
                            f"{type(v).__name__}")
    return flat


_KIND_RANK = {"b": 0, "u": 1, "i": 1, "f": 2}


def _common_dtype(a: Any, b: Any) -> Optional[np.dtype]:
    """The dtype holding both branches' values: a float over an int over bool, else the wider
    of one kind (``np.promote_types`` within a kind: it is value-independent, the same on
    NumPy 1.x and 2.x); None for dtypes without such an order (e.g. a string)."""
    try:
        na, nb = to_numpy_dtype(a), to_numpy_dtype(b)
    except (TypeError, ValueError, KeyError):
        return None
    ra, rb = _KIND_RANK.get(na.kind), _KIND_RANK.get(nb.kind)
    if ra is None or rb is None:
        return None
    if ra != rb:
        return na if ra > rb else nb
    return np.promote_types(na, nb)


def _merge_branch_dtypes(k: int, t: Variable, f: Variable, true_block: Any,
                         true_copy: Any) -> None:
    """Output ``k`` of a cond whose branches return different dtypes: both values are cast to
    the common dtype. fluid 1.8 declared the false branch's dtype and handed on whichever
    branch ran, so the value's dtype could differ from its variable's (docs/compatibility.md);
    here the output always has the dtype it declares, and no value is truncated."""
    common = _common_dtype(t.dtype, f.dtype)
    if common is None:
        raise ValueError(
            f"Incompatible return values of true_fn and false_fn in cond: output {k} of "
            f"true_fn is {list(t.shape)} {_dt(t.dtype)} while output {k} of false_fn is "
            f"'{f.name}' {list(f.shape)} {_dt(f.dtype)}, and no dtype holds both (cast one, "
            f"e.g. fluid.layers.cast(x, '{_dt(f.dtype)}'))")
    want = convert_np_dtype_to_dtype_(common)
    warnings.warn(f"fluid.layers.cond: output {k} is {_dt(t.dtype)} in true_fn and "
                  f"{_dt(f.dtype)} in false_fn; both are cast to {_dt(want)} (fluid 1.8 "
                  f"returned the dtype of whichever branch ran)", stacklevel=user_stacklevel())
    if want != t.dtype:       # the true branch's copy into the output becomes a cast
        src = true_copy.input("X")[0]
        t._dtype = want          # a journaled attribute write (core.atomic), as AMP does
        rewrite.replace_op(true_block, true_copy, "cast", {"X": [src]}, {"Out": [t]},
                           {"in_dtype": true_block._var_recursive(src).dtype, "out_dtype": want})
    if want == f.dtype:
        assign(f, t)
    else:
        rewrite.append(default_main_program().current_block(), "cast", {"X": [f]},
                       {"Out": [t]}, {"in_dtype": f.dtype, "out_dtype": want})


def case(pred_fn_pairs: Sequence[Tuple[Variable, Callable[[], Any]]],
         default: Optional[Callable[[], Any]] = None, name: Optional[str] = None) -> Any:
    """The function of the first pair whose predicate is true (fluid 1.8 ``case``): nested
    ``cond``s; without ``default`` the last pair's function is the default.

    Args:
        pred_fn_pairs (list of (Variable, callable)): bool ``[1]`` conditions and the branch
            built when it is the first true one.
        default (callable | None): the branch when none is true (default: the last pair's).
        name (str | None): name prefix.
    Returns:
        The outputs of the branch taken.
    Raises:
        TypeError: ``pred_fn_pairs`` is not a list/tuple of (bool one-element Variable, callable)
            pairs, or ``default`` is not callable.
        ValueError: ``pred_fn_pairs`` is empty, or the branches return incompatible outputs.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [1])
        ...     one = fluid.layers.fill_constant([1], "float32", 1.0)
        ...     y = fluid.layers.case([(x < one, lambda: fluid.layers.fill_constant([1], "float32", -1.0))],
        ...                           default=lambda: fluid.layers.fill_constant([1], "float32", 1.0))
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> [exe.run(main, feed={"x": np.array([v], "float32")}, fetch_list=[y])[0] for v in (0, 2)]
        [array([-1.], dtype=float32), array([1.], dtype=float32)]
    """
    check_type(pred_fn_pairs, "pred_fn_pairs", (list, tuple), "case")
    pairs = list(pred_fn_pairs)
    for k, pair in enumerate(pairs):
        if not isinstance(pair, tuple) or len(pair) != 2:
            raise TypeError(f"case: pred_fn_pairs[{k}] must be a (pred, fn) tuple, but received "
                            f"{_what(pair)}")
        pred, fn = pair
        if _mode.tracer is None:
            _check_bool_scalar(pred, f"pred_fn_pairs[{k}][0]", "case", batch_ok=True)
        if not callable(fn):
            raise TypeError(f"case: the fn of pred_fn_pairs[{k}] must be callable, but received "
                            f"{type(fn).__name__}")
    if not pairs:
        raise ValueError("case: pred_fn_pairs must not be empty")
    if default is None:
        default = pairs[-1][1]
        pairs = pairs[:-1]
    elif not callable(default):
        raise TypeError(f"case: default must be callable, but received "
                        f"{type(default).__name__}")
    fn = default
    for pred, true_fn in reversed(pairs):
        fn = (lambda p, t, f: (lambda: cond(p, t, f)))(pred, true_fn, fn)
    return fn()


def switch_case(branch_index: Variable, branch_fns: Any,
                default: Optional[Callable[[], Any]] = None, name: Optional[str] = None) -> Any:
    """The function of ``branch_fns`` whose key equals ``branch_index`` (an int32/int64
    scalar); ``branch_fns`` is a dict ``{int: fn}``, a list of ``(int, fn)`` or a list of
    functions (keys 0, 1, ...). Without ``default`` the function of the largest key is the
    default (fluid 1.8 ``switch_case``).

    Args:
        branch_index (Variable): int ``[1]`` tensor selecting the branch.
        branch_fns (dict | list): ``{index: fn}`` or a list of ``(index, fn)`` / fns.
        default (callable | None): the branch for any other index (default: the largest
            index's).
        name (str | None): name prefix.
    Returns:
        The outputs of the branch taken.
    Raises:
        TypeError: ``branch_index`` is not a one-element int32/int64 Variable, ``branch_fns`` is
            not a dict/list/tuple of int keys and callables, or ``default`` is not callable.
        ValueError: ``branch_fns`` is empty or repeats a key, or the branches return
            incompatible outputs.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     idx = fluid.data("idx", [1], "int64")
        ...     y = fluid.layers.switch_case(idx, {
        ...         0: lambda: fluid.layers.fill_constant([1], "float32", 10.0),
        ...         1: lambda: fluid.layers.fill_constant([1], "float32", 11.0)},
        ...         default=lambda: fluid.layers.fill_constant([1], "float32", -1.0))
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> [exe.run(main, feed={"idx": np.array([v], "int64")}, fetch_list=[y])[0] for v in (1, 7)]
        [array([11.], dtype=float32), array([-1.], dtype=float32)]
    """
    if _mode.tracer is None:
        check_variable_and_dtype(branch_index, "branch_index", ["int32", "int64"],
                                 "switch_case")
        if _numel(branch_index.shape) != 1:
            raise TypeError(f"switch_case: branch_index '{branch_index.name}' must hold one "
                            f"element, but its shape is {list(branch_index.shape)}")
    if isinstance(branch_fns, dict):
        items = list(branch_fns.items())
    elif isinstance(branch_fns, (list, tuple)):
        if all(callable(f) for f in branch_fns):
            items = list(enumerate(branch_fns))
        else:
            items = []
            for k, item in enumerate(branch_fns):
                if not (isinstance(item, tuple) and len(item) == 2):
                    raise TypeError(f"switch_case: branch_fns[{k}] must be a (int, fn) tuple, "
                                    f"but received {_what(item)}")
                items.append(item)
    else:
        raise TypeError(f"switch_case: branch_fns must be a dict, list or tuple, but received "
                        f"{type(branch_fns).__name__}")
    keys = set()
    for key, fn in items:
        if not isinstance(key, int) or isinstance(key, bool):
            raise TypeError(f"switch_case: the key of each branch must be an int, but received "
                            f"{key!r}")
        if key in keys:
            raise ValueError(f"switch_case: key {key} appears twice in branch_fns")
        keys.add(key)
        if not callable(fn):
            raise TypeError(f"switch_case: the fn of key {key} must be callable, but received "
                            f"{type(fn).__name__}")
    if not items:
        raise ValueError("switch_case: branch_fns must not be empty")
    items.sort(key=lambda kv: kv[0])
    if _mode.tracer is not None:
        idx = int(np.asarray(branch_index.numpy()).reshape(-1)[0])
        for key, fn in items:
            if key == idx:
                return fn()
        return default() if default is not None else items[-1][1]()
    if default is None:
        default = items[-1][1]
        items = items[:-1]
    pairs = [(equal(branch_index, fill_constant([1], branch_index.dtype, key)), fn)
             for key, fn in items]
    if not pairs:
        return default()
    return case(pairs, default)


class Switch:
    """``with Switch() as s: with s.case(cond): ...; with s.default(): ...`` -- the body of the
    first case whose condition (a bool scalar) holds runs, else the default's (fluid 1.8
    ``Switch``, written with conditional blocks).

    Args:
        name (str | None): name prefix.
    Returns:
        Switch: the builder; use it as ``with Switch() as switch:`` with ``switch.case(cond)``
        and ``switch.default()`` blocks.
    Raises:
        RuntimeError: constructed in dygraph mode.
        TypeError: a ``case`` condition is not a one-element bool Variable.
        ValueError: ``case`` is called outside the ``with`` statement, or ``default`` before any
            ``case``.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     step = fluid.data("step", [1], "float32")
        ...     lr = fluid.layers.create_global_var([1], 0.0, "float32", persistable=True, name="lr")
        ...     with fluid.layers.Switch() as switch:
        ...         with switch.case(step < fluid.layers.fill_constant([1], "float32", 10.0)):
        ...             _ = fluid.layers.assign(fluid.layers.fill_constant([1], "float32", 1.0), lr)
        ...         with switch.default():
        ...             _ = fluid.layers.assign(fluid.layers.fill_constant([1], "float32", 0.1), lr)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> [round(float(exe.run(main, feed={"step": np.array([s], "float32")}, fetch_list=[lr])[0][0]), 4)
        ...  for s in (3, 30)]
        [1.0, 0.1]
    """

    # constructing one changes nothing; each case / default block is one build transaction
    __fluidlite_atomic__ = True

    def __init__(self, name: Optional[str] = None) -> None:
        _static_only("Switch", "Python if/elif (or fluid.layers.case)")
        self.helper = LayerHelper("switch", name=name)
        self.inside_scope = False
        self.pre_not_conditions: List[Variable] = []

    def case(self, condition: Variable) -> _cf.Conditional:
        if not self.inside_scope:
            raise ValueError("Switch.case should be called inside `with Switch() as switch:`")
        _check_bool_scalar(condition, "condition", "Switch.case")
        if not self.pre_not_conditions:
            block = ConditionalBlock([condition], is_scalar_condition=True)
            self.pre_not_conditions.append(logical_not(condition))
        else:
            pre_not = self.pre_not_conditions[-1]
            self.pre_not_conditions.append(logical_and(pre_not, logical_not(condition)))
            block = ConditionalBlock([logical_and(pre_not, condition)],
                                     is_scalar_condition=True)
        return block.block()

    def default(self) -> _cf.Conditional:
        if not self.pre_not_conditions:
            raise ValueError("Switch.default: there should be at least one condition (a "
                             "case) before the default")
        return ConditionalBlock([self.pre_not_conditions[-1]],
                                is_scalar_condition=True).block()

    def __enter__(self) -> "Switch":
        self.inside_scope = True
        return self

    def __exit__(self, exc_type: Any, exc_val: Any, exc_tb: Any) -> bool:
        self.inside_scope = False
        return False


def while_loop(cond: Callable[..., Variable], body: Callable[..., Any],
               loop_vars: Sequence[Any], is_test: bool = False,
               name: Optional[str] = None) -> List[Any]:
    """``while cond(*loop_vars): loop_vars = body(*loop_vars)``; returns the final loop_vars.
    ``body`` must return as many values as ``loop_vars``, each with its loop variable's shape
    and dtype. Dygraph mode loops in Python.

    Args:
        cond (callable): ``cond(*loop_vars)`` builds a bool ``[1]`` tensor.
        body (callable): ``body(*loop_vars)`` builds the next values (same structure).
        loop_vars (list): the initial values: Variables, or lists / tuples / dicts of them
            (the body returns the same structure).
        is_test (bool, default False): accepted for fluid's signature.
        name (str | None): name prefix.
    Returns:
        list: the loop variables after the last iteration.
    Raises:
        TypeError: ``cond`` or ``body`` is not callable, ``loop_vars`` is not a list/tuple of
            Variables, ``cond`` does not return a one-element bool Variable, or ``body`` returns
            a non-Variable.
        ValueError: ``loop_vars`` is empty, ``body`` returns a different number of values, or a
            loop variable changes shape or dtype in the body.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     i = fluid.layers.fill_constant([1], "int64", 0)
        ...     s = fluid.layers.fill_constant([1], "int64", 0)
        ...     limit = fluid.layers.fill_constant([1], "int64", 5)
        ...     i, s = fluid.layers.while_loop(lambda i, s: i < limit, lambda i, s: [i + 1, s + i], [i, s])
        >>> fluid.Executor(fluid.CPUPlace()).run(main, fetch_list=[i, s])
        [array([5]), array([10])]
    """
    if not callable(cond):
        raise TypeError("while_loop: cond in while_loop should be callable")
    if not callable(body):
        raise TypeError("while_loop: body in while_loop should be callable")
    check_type(loop_vars, "loop_vars", (list, tuple), "fluid.layers.while_loop")
    if len(loop_vars) == 0:
        raise ValueError("while_loop: loop_vars in while_loop should not be empty")
    if _mode.tracer is not None:
        loop_vars = list(loop_vars)
        while _scalar_true(cond(*loop_vars)):
            out = body(*loop_vars)
            out = list(out) if isinstance(out, (list, tuple)) else [out]
            if len(out) != len(loop_vars):
                raise ValueError(f"while_loop: body should return the same arity as loop_vars "
                                 f"({len(loop_vars)}), but returned {len(out)} value(s)")
            loop_vars = out
        return loop_vars
    pre_cond = cond(*loop_vars)
    if not isinstance(pre_cond, Variable):
        raise TypeError(f"while_loop: cond should return a bool Variable, but returned "
                        f"{type(pre_cond).__name__}")
    _check_bool_scalar(pre_cond, "the result of cond", "fluid.layers.while_loop")
    loop = While(pre_cond, is_test, name)
    with loop.block():
        # as fluid 1.8: loop_vars may nest lists / tuples / dicts of Variables (the
        # transformer's per-layer caches); the body gets copies of the containers, so that it
        # may change them without changing loop_vars, and returns the same structure
        body_vars = _nest.copy_mutable_vars(loop_vars) if _nest.hold_mutable_vars(loop_vars) \
            else loop_vars
        out = body(*body_vars)
        out = list(out) if isinstance(out, (list, tuple)) else [out]
        if len(out) != len(loop_vars):
            raise ValueError(f"while_loop: body in while_loop should return the same arity "
                             f"(length and structure) as loop_vars: {len(loop_vars)} loop "
                             f"variable(s), but body returned {len(out)}")
        try:
            _nest.assert_same_structure(out, list(loop_vars), check_types=False)
        except ValueError as e:
            raise ValueError(f"while_loop: body in while_loop should return the same arity "
                             f"(length and structure) as loop_vars: {e}") from None
        now_cond = cond(*out)
        out, flat_vars = _nest.flatten(out), _nest.flatten(list(loop_vars))
        # an output that is itself another loop variable (``lambda a, b: [a + 1, a]``) is read
        # before any loop variable is written: copied first (1.8 assigned in order, so ``b``
        # got the new ``a``)
        names = {v.name for v in flat_vars if isinstance(v, Variable)}
        out = [assign(new) if isinstance(new, Variable) and new is not var and new.name in names
               and getattr(var, "type", None) != VarType.LOD_TENSOR_ARRAY else new
               for new, var in zip(out, flat_vars)]
        for k, (new, var) in enumerate(zip(out, flat_vars)):
            if not isinstance(var, Variable):
                raise TypeError(f"while_loop: loop_vars[{k}] must be a Variable, but received "
                                f"{type(var).__name__}")
            if var.type == VarType.LOD_TENSOR_ARRAY or new is var:
                continue
            if not isinstance(new, Variable):
                raise TypeError(f"while_loop: body output {k} must be a Variable, but is "
                                f"{type(new).__name__}")
            assign(new, var)
        assign(now_cond, pre_cond)
    return list(loop_vars)


class IfElse:
    """Row-wise if/else (fluid 1.8 ``IfElse``): ``cond`` is a [N, 1] bool mask; inside
    ``with ie.true_block():`` ``ie.input(x)`` is the rows of ``x`` where the mask holds (in the
    false block, where it does not), and ``ie.output(y)`` collects the branch's result;
    ``ie()`` merges both branches' outputs back into row order (``split_lod_tensor`` /
    ``merge_lod_tensor``). A branch runs only when its rows are not empty.

    Args:
        cond (Variable): bool ``[N, 1]``: which rows go to the true block.
        name (str | None): name prefix.
    Returns:
        IfElse: the builder; ``true_block()`` / ``false_block()`` build the branches,
        ``input(x)`` / ``output(*outs)`` route rows, and calling it returns the merged outputs
        (list of Variable).
    Raises:
        RuntimeError: constructed in dygraph mode.
        TypeError: ``cond`` is not a Variable, ``name`` is not a str, or ``input`` / ``output``
            gets a non-Variable.
        ValueError: ``input`` / ``output`` is called outside a branch, or the object is called
            inside a branch, with no outputs, or with different output counts per branch.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 1])
        ...     cond = fluid.layers.greater_than(x, fluid.layers.zeros_like(x))
        ...     ie = fluid.layers.IfElse(cond)
        ...     with ie.true_block():
        ...         ie.output(ie.input(x) * 10)
        ...     with ie.false_block():
        ...         ie.output(fluid.layers.zeros_like(ie.input(x)))
        ...     out, = ie()
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> exe.run(main, feed={"x": np.array([[1.0], [-2.0], [3.0]], "float32")}, fetch_list=[out])[0]
        array([[10.],
               [ 0.],
               [30.]], dtype=float32)
    """

    OUT_IF_ELSE_BLOCKS, IN_IF_ELSE_TRUE_BLOCKS, IN_IF_ELSE_FALSE_BLOCKS = 0, 1, 2
    # constructing one changes nothing; each branch block is one build transaction
    __fluidlite_atomic__ = True

    def __init__(self, cond: Variable, name: Optional[str] = None) -> None:
        _static_only("IfElse", "Python if/else on the rows (or fluid.layers.cond)")
        check_type(cond, "cond", Variable, "fluid.layers.IfElse")
        check_type(name, "name", (str, type(None)), "fluid.layers.IfElse")
        self.helper = LayerHelper("ifelse", name=name)
        self.cond = cond
        self.input_table: Dict[int, Tuple[Variable, Variable]] = {}
        self.status = IfElse.OUT_IF_ELSE_BLOCKS
        self.conditional_true_block = ConditionalBlock(inputs=[cond])
        self.conditional_false_block = ConditionalBlock(inputs=[cond])
        self.output_table: Tuple[List[Variable], List[Variable]] = ([], [])  # (false, true)

    def _parent_block(self) -> Any:
        prog = self.helper.main_program
        return prog.block(prog.current_block().parent_idx)

    def input(self, x: Variable) -> Variable:
        if self.status == IfElse.OUT_IF_ELSE_BLOCKS:
            raise ValueError("IfElse.input must be called inside true_block() / false_block()")
        check_type(x, "x", Variable, "fluid.layers.IfElse.input")
        if id(x) not in self.input_table:
            parent = self._parent_block()
            out_true = parent.create_var(name=_unique(f"ifelse_input{self.helper.name}"),
                                         dtype=x.dtype)
            out_false = parent.create_var(name=_unique(f"ifelse_input{self.helper.name}"),
                                          dtype=x.dtype)
            parent.append_op(type="split_lod_tensor", inputs={"X": x, "Mask": self.cond},
                             outputs={"OutTrue": out_true, "OutFalse": out_false},
                             attrs={"level": 0})
            self.input_table[id(x)] = (out_true, out_false)
        out_true, out_false = self.input_table[id(x)]
        return out_true if self.status == IfElse.IN_IF_ELSE_TRUE_BLOCKS else out_false

    def true_block(self) -> "_IfElseGuard":
        return _IfElseGuard(True, self)

    def false_block(self) -> "_IfElseGuard":
        return _IfElseGuard(False, self)

    def output(self, *outs: Variable) -> None:
        if self.status == self.OUT_IF_ELSE_BLOCKS:
            raise ValueError("IfElse.output can only be invoked inside true_block() / "
                             "false_block()")
        table = self.output_table[1 if self.status == self.IN_IF_ELSE_TRUE_BLOCKS else 0]
        parent = self._parent_block()
        for k, each in enumerate(outs):
            check_type(each, f"outs[{k}]", Variable, "fluid.layers.IfElse.output")
            outside = parent.create_var(name=_unique(f"{self.helper.name}_output"),
                                        dtype=each.dtype)
            table.append(outside)
            assign(each, outside)

    def __call__(self) -> List[Variable]:
        if self.status != self.OUT_IF_ELSE_BLOCKS:
            raise ValueError("IfElse() must be called outside the true/false blocks")
        false_len, true_len = map(len, self.output_table)
        if false_len == 0 and true_len == 0:
            raise ValueError("IfElse: call true_block()/false_block() with outputs before "
                             "calling it")
        if false_len != true_len and false_len != 0 and true_len != 0:
            raise ValueError(f"IfElse: the true block has {true_len} output(s) and the false "
                             f"block {false_len}; both sides must have the same outputs")
        if false_len == 0 or true_len == 0:
            return self.output_table[0 if false_len != 0 else 1]
        helper = LayerHelper("merge_lod_tensor")
        out = []
        for false_var, true_var in zip(*self.output_table):
            merged = helper.create_variable_for_type_inference(dtype=true_var.dtype)
            helper.append_op(type="merge_lod_tensor",
                             inputs={"X": self.cond, "Mask": self.cond, "InTrue": true_var,
                                     "InFalse": false_var},
                             outputs={"Out": merged}, attrs={"level": 0})
            out.append(merged)
        return out


class _IfElseGuard:
    def __init__(self, is_true: bool, ifelse: IfElse) -> None:
        self.ifelse = ifelse
        self.is_true = is_true
        cb = ifelse.conditional_true_block if is_true else ifelse.conditional_false_block
        self.guard = cb.block()

    def __enter__(self) -> Any:
        self.ifelse.status = (IfElse.IN_IF_ELSE_TRUE_BLOCKS if self.is_true
                              else IfElse.IN_IF_ELSE_FALSE_BLOCKS)
        return self.guard.__enter__()

    def __exit__(self, exc_type: Any, exc_val: Any, exc_tb: Any) -> bool:
        try:
            return self.guard.__exit__(exc_type, exc_val, exc_tb)
        finally:
            self.ifelse.status = IfElse.OUT_IF_ELSE_BLOCKS


def is_empty(x: Variable, cond: Optional[Variable] = None) -> Variable:
    """A bool [1] Variable: whether ``x`` has no elements (op ``is_empty``); written into
    ``cond`` when given.

    Args:
        x (Variable): the tensor.
        cond (Variable | None): an existing bool variable to write.
    Returns:
        Variable: bool ``[1]``: ``x`` has no elements.
    Raises:
        TypeError: ``x`` is not a float32/float64/int32/int64 Variable, or ``cond`` is neither a
            Variable nor None.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 2])
        ...     e = fluid.layers.is_empty(x)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> exe.run(main, feed={"x": np.zeros((0, 2), "float32")}, fetch_list=[e])[0]
        array([ True])
    """
    check_variable_and_dtype(x, "x", ["float32", "float64", "int32", "int64"], "is_empty")
    check_type(cond, "cond", (Variable, type(None)), "is_empty")
    if cond is not None:
        check_variable_and_dtype(cond, "cond", ["bool"], "is_empty")
    helper = LayerHelper("is_empty")
    if cond is None:
        cond = helper.create_variable_for_type_inference(dtype="bool")
    cond.stop_gradient = True
    helper.append_op(type="is_empty", inputs={"X": [x]}, outputs={"Out": [cond]})
    return cond


# -- rank tables (fluid's DynamicRNN machinery) -------------------------------------------------
def _rank_table_op(op_type: str, inputs: Dict[str, Any], dtype: Any, out_type: Any = None,
                   attrs: Optional[Dict[str, Any]] = None) -> Variable:
    helper = LayerHelper(op_type)
    if out_type is None:
        out = helper.create_variable_for_type_inference(dtype=dtype)
    else:
        out = helper.create_variable(name=_unique(f"{op_type}.out"), type=out_type, dtype=dtype)
    helper.append_op(type=op_type, inputs=inputs, outputs={"Out": [out]}, attrs=attrs or {})
    return out


def _check_table(table: Any, api: str) -> None:
    if not (isinstance(table, Variable) and table.type == VarType.LOD_RANK_TABLE):
        raise TypeError(f"{api}: the rank table must be a Variable made by "
                        f"fluid.layers.control_flow.lod_rank_table, but received "
                        f"{_what(table)}")


def lod_rank_table(x: Variable, level: int = 0) -> Variable:
    """The rank table of ``x``'s sequences at LoD ``level``: (index, length) of each, longest
    first (op ``lod_rank_table``)."""
    check_type(x, "x", Variable, "lod_rank_table")
    level = check_int(level, "level", "lod_rank_table", minimum=0)
    table = _rank_table_op("lod_rank_table", {"X": [x]}, None, VarType.LOD_RANK_TABLE,
                           {"level": level})
    table.stop_gradient = True
    return table


def max_sequence_len(rank_table: Variable) -> Variable:
    """The length of the longest sequence of a rank table (int64 [1])."""
    _check_table(rank_table, "max_sequence_len")
    out = _rank_table_op("max_sequence_len", {"RankTable": [rank_table]}, "int64")
    out.stop_gradient = True
    return out


def lod_tensor_to_array(x: Variable, table: Variable) -> Variable:
    """Time-major slices of ``x``'s sequences in rank-table order: entry t holds row t of each
    sequence longer than t, longest first (op ``lod_tensor_to_array``)."""
    check_type(x, "x", Variable, "lod_tensor_to_array")
    _check_table(table, "lod_tensor_to_array")
    return _rank_table_op("lod_tensor_to_array", {"X": [x], "RankTable": [table]}, x.dtype,
                          VarType.LOD_TENSOR_ARRAY)


def array_to_lod_tensor(x: Variable, table: Variable) -> Variable:
    """The inverse of ``lod_tensor_to_array``: sequences in their original order, with LoD."""
    if not (isinstance(x, Variable) and x.type == VarType.LOD_TENSOR_ARRAY):
        raise TypeError(f"array_to_lod_tensor: x must be a tensor array Variable, but received "
                        f"{_what(x)}")
    _check_table(table, "array_to_lod_tensor")
    out = _rank_table_op("array_to_lod_tensor", {"X": [x], "RankTable": [table]}, x.dtype)
    out.lod_level = max(out.lod_level, 1)
    return out


def reorder_lod_tensor_by_rank(x: Variable, rank_table: Variable) -> Variable:
    """``x``'s sequences (rows when it has no LoD) in the order of ``rank_table`` (op
    ``reorder_lod_tensor_by_rank``).

    Args:
        x (Variable): the tensor to reorder (its sequences, or its rows without LoD).
        rank_table (Variable): a rank table made by ``lod_rank_table``.
    Returns:
        Variable: ``x`` reordered, same dtype.
    Raises:
        TypeError: ``x`` is not a Variable, or ``rank_table`` is not a rank table Variable.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> from fluidlite.layers.control_flow import lod_rank_table
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 1], lod_level=1)
        ...     table = lod_rank_table(x)                    # sequences by length, longest first
        ...     out = fluid.layers.reorder_lod_tensor_by_rank(x, table)
        >>> t = fluid.create_lod_tensor(np.array([[1], [2], [3]], "float32"), [[1, 2]], fluid.CPUPlace())
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> exe.run(main, feed={"x": t}, fetch_list=[out])[0].ravel()
        array([2., 3., 1.], dtype=float32)
    """
    check_type(x, "x", Variable, "reorder_lod_tensor_by_rank")
    _check_table(rank_table, "reorder_lod_tensor_by_rank")
    return _rank_table_op("reorder_lod_tensor_by_rank", {"X": [x], "RankTable": [rank_table]},
                          x.dtype)


def shrink_memory(x: Variable, i: Variable, table: Variable) -> Variable:
    """The first rows of ``x``: one per sequence of ``table`` longer than step ``i`` (op
    ``shrink_rnn_memory``)."""
    check_type(x, "x", Variable, "shrink_memory")
    _check_index(i, "shrink_memory")
    _check_table(table, "shrink_memory")
    return _rank_table_op("shrink_rnn_memory", {"X": [x], "I": [i], "RankTable": [table]},
                          x.dtype)


from .tensor import assign, fill_constant  # noqa: E402  (layers import each other)
from . import utils as _nest  # noqa: E402
from .ops import equal, logical_and, logical_not  # noqa: E402

__all__ += ["cond", "case", "switch_case", "Switch", "while_loop", "is_empty", "IfElse",
            "reorder_lod_tensor_by_rank"]


# -- fluid 1.8's module-level control-flow helpers (not in fluid.layers' __all__: fluid's own
# tests and IfElse import them from fluid.layers.control_flow) -------------------------------
def select_output(input: Variable, outputs: Sequence[Variable], mask: Variable
                  ) -> Sequence[Variable]:
    """Copy ``input`` to ``outputs[mask]`` (op ``select_output``; ``mask``: an int32 tensor of
    one element in ``[0, len(outputs))``); the other outputs are not written.

    Args:
        input (Variable): the value to route.
        outputs (list | tuple of Variable): the candidate destinations.
        mask (Variable): int32, one element: the index of the destination.
    Returns:
        list | tuple of Variable: ``outputs``.
    Raises:
        TypeError: ``input`` is not a Variable, ``outputs`` not a list or tuple, or ``mask``
            not an int32 Variable.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> from fluidlite.layers.control_flow import select_input, select_output
        >>> main = fluid.Program()
        >>> with fluid.program_guard(main, fluid.Program()):
        ...     x = fluid.data("x", [2])
        ...     m = fluid.data("m", [1], "int32")
        ...     outs = [main.current_block().create_var(dtype="float32") for _ in range(3)]
        ...     y = select_input(select_output(x, outs, m), m)
        >>> fluid.Executor().run(main, feed={"x": np.array([1.5, 2], "float32"),
        ...                                  "m": np.array([2], "int32")}, fetch_list=[y])[0]
        array([1.5, 2. ], dtype=float32)
    """
    check_type(input, "input", Variable, "select_output")
    check_variable_and_dtype(mask, "mask", ["int32"], "select_output")
    check_type(outputs, "outputs", (list, tuple), "select_output")
    LayerHelper("select_output").append_op(type="select_output",
                                           inputs={"X": [input], "Mask": [mask]},
                                           outputs={"Out": list(outputs)})
    return outputs


def select_input(inputs: Sequence[Variable], mask: Variable) -> Variable:
    """``inputs[mask]`` (op ``select_input``; ``mask``: an int32 tensor of one element in
    ``[0, len(inputs))``); the output has ``inputs[0]``'s dtype and shape.

    Args:
        inputs (list | tuple of Variable): the candidates.
        mask (Variable): int32, one element: the index of the one to output.
    Returns:
        Variable: the selected input's value.
    Raises:
        TypeError: ``inputs`` is not a list or tuple, or ``mask`` not an int32 Variable.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> from fluidlite.layers.control_flow import select_input
        >>> main = fluid.Program()
        >>> with fluid.program_guard(main, fluid.Program()):
        ...     a, b = fluid.data("a", [1]), fluid.data("b", [1])
        ...     m = fluid.data("m", [1], "int32")
        ...     y = select_input([a, b], m)
        >>> fluid.Executor().run(main, feed={"a": np.array([1.0], "float32"),
        ...                                  "b": np.array([2.0], "float32"),
        ...                                  "m": np.array([1], "int32")}, fetch_list=[y])[0]
        array([2.], dtype=float32)
    """
    check_type(inputs, "inputs", (list, tuple), "select_input")
    check_variable_and_dtype(mask, "mask", ["int32"], "select_input")
    helper = LayerHelper("select_input")
    out = helper.create_variable(dtype=inputs[0].dtype, shape=inputs[0].shape,
                                 type=inputs[0].type)
    helper.append_op(type="select_input", inputs={"X": list(inputs), "Mask": [mask]},
                     outputs={"Out": [out]})
    return out


def split_lod_tensor(input: Variable, mask: Variable, level: int = 0
                     ) -> Tuple[Variable, Variable]:
    """The rows (sequences at LoD ``level``) of ``input`` whose ``mask`` entry is true, and
    those whose entry is false (op ``split_lod_tensor``, what IfElse splits its inputs with).

    Args:
        input (Variable): the tensor to split.
        mask (Variable): bool column vector, one entry per row (per sequence at ``level``).
        level (int): the LoD level whose sequences are split.
    Returns:
        tuple(Variable, Variable): ``(out_true, out_false)``.
    Raises:
        TypeError: ``input`` or ``mask`` is not a Variable, or ``level`` not an int.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> from fluidlite.layers.control_flow import merge_lod_tensor, split_lod_tensor
        >>> main = fluid.Program()
        >>> with fluid.program_guard(main, fluid.Program()):
        ...     x = fluid.data("x", [-1, 1])
        ...     m = fluid.data("m", [-1, 1], "bool")
        ...     t, f = split_lod_tensor(x, m)
        ...     y = merge_lod_tensor(t, f, x, m)
        >>> fluid.Executor().run(main, feed={"x": np.array([[1], [2]], "float32"),
        ...                                  "m": np.array([[True], [False]])},
        ...                      fetch_list=[t, y])[0]
        array([[1.]], dtype=float32)
    """
    check_type(input, "input", Variable, "fluid.layers.split_lod_tensor")
    check_type(mask, "mask", Variable, "fluid.layers.split_lod_tensor")
    check_type(level, "level", int, "fluid.layers.split_lod_tensor")
    helper = LayerHelper("split_lod_tensor")
    out_true = helper.create_variable_for_type_inference(dtype=input.dtype)
    out_false = helper.create_variable_for_type_inference(dtype=input.dtype)
    helper.append_op(type="split_lod_tensor", inputs={"X": [input], "Mask": [mask]},
                     outputs={"OutTrue": [out_true], "OutFalse": [out_false]},
                     attrs={"level": level})
    return out_true, out_false


def merge_lod_tensor(in_true: Variable, in_false: Variable, x: Variable, mask: Variable,
                     level: int = 0) -> Variable:
    """The inverse of ``split_lod_tensor``: rows of ``in_true`` where ``mask`` is true and of
    ``in_false`` elsewhere, in ``x``'s row order and LoD (op ``merge_lod_tensor``).

    Args:
        in_true (Variable): the true branch's rows.
        in_false (Variable): the false branch's rows.
        x (Variable): the tensor that was split (its LoD orders the result).
        mask (Variable): the bool column vector it was split by.
        level (int): the LoD level it was split at.
    Returns:
        Variable: the merged tensor.
    Raises:
        TypeError: an argument is not a Variable, or ``level`` not an int.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> from fluidlite.layers.control_flow import merge_lod_tensor, split_lod_tensor
        >>> main = fluid.Program()
        >>> with fluid.program_guard(main, fluid.Program()):
        ...     x = fluid.data("x", [-1, 1])
        ...     m = fluid.data("m", [-1, 1], "bool")
        ...     t, f = split_lod_tensor(x, m)
        ...     y = merge_lod_tensor(fluid.layers.scale(t, 10.0), f, x, m)
        >>> fluid.Executor().run(main, feed={"x": np.array([[1], [2]], "float32"),
        ...                                  "m": np.array([[True], [False]])},
        ...                      fetch_list=[y])[0]
        array([[10.],
               [ 2.]], dtype=float32)
    """
    for arg, name in ((x, "x"), (mask, "mask"), (in_true, "in_true"), (in_false, "in_false")):
        check_type(arg, name, Variable, "fluid.layers.merge_lod_tensor")
    check_type(level, "level", int, "fluid.layers.merge_lod_tensor")
    helper = LayerHelper("merge_lod_tensor")
    out = helper.create_variable_for_type_inference(dtype=in_true.dtype)
    helper.append_op(type="merge_lod_tensor",
                     inputs={"X": [x], "Mask": [mask], "InTrue": [in_true],
                             "InFalse": [in_false]},
                     outputs={"Out": [out]}, attrs={"level": level})
    return out
