"""Step counters: ``increment`` and ``autoincreased_step_counter`` (fluid 1.8 semantics).

fluidlite's IR has no control-flow blocks; schedules that fluid wrote with ``Switch`` are built
from comparison and arithmetic ops instead (see ``learning_rate_scheduler``).
"""
from __future__ import annotations

from typing import Optional

from ..core.ir import Variable
from ..initializer import Constant
from ..layer_helper import LayerHelper, check_int, check_number

__all__ = ["increment", "autoincreased_step_counter"]


def increment(x: Variable, value: float = 1.0, in_place: bool = True) -> Variable:
    """``x + value`` for a one-element ``x`` (op ``increment``); written back into ``x`` when
    ``in_place`` (the default), else into a new variable."""
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
    *prepended* to block 0, so the first run sees ``begin``. Calling it again with the same
    name returns the existing counter (one increment per program)."""
    begin = check_int(begin, "begin", "autoincreased_step_counter")
    step = check_int(step, "step", "autoincreased_step_counter")
    helper = LayerHelper("global_step_counter")
    if counter_name is None:
        counter_name = "@STEP_COUNTER@"
    counter, is_new = helper.create_or_get_global_variable(
        name=counter_name, dtype="int64", shape=[1], persistable=True)
    if is_new:
        helper.set_variable_initializer(counter, initializer=Constant(value=begin - 1,
                                                                      force_cpu=True))
        helper.main_program.global_block()._prepend_op(
            type="increment", inputs={"X": [counter]}, outputs={"Out": [counter]},
            attrs={"step": float(step)})
        counter.stop_gradient = True
    return counter
