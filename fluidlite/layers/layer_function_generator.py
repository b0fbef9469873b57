"""Generate thin ``layers.*`` wrappers for simple registry ops (Paddle's generate_layer_fn).

A "simple" op takes its inputs as positional Variables and its attrs as keywords, and has one
``Out``. ``generate_layer_fn('relu')`` returns ``relu(x, name=None, **attrs)``.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

from ..core.atomic import atomic_layer
from ..core.ir import Variable
from ..core.registry import get_op_def
from ..layer_helper import LayerHelper

__all__ = ["generate_layer_fn", "generate_activation_fn"]


def generate_layer_fn(op_type: str, doc: Optional[str] = None) -> Callable[..., Variable]:
    opdef = get_op_def(op_type)
    slots = [s.name for s in opdef.in_slots]
    out_slot = opdef.out_slots[0].name

    def layer(*args: Any, name: Optional[str] = None, **kwargs: Any) -> Variable:
        inputs = {}
        args = list(args)
        for slot in slots:
            key = slot.lower()
            if args:
                inputs[slot] = args.pop(0)
            elif key in kwargs:
                inputs[slot] = kwargs.pop(key)
            elif slot in kwargs:
                inputs[slot] = kwargs.pop(slot)
        if args:
            raise TypeError(f"{op_type}() takes {len(slots)} positional inputs, got more")
        for slot, v in inputs.items():
            for item in (v if isinstance(v, (list, tuple)) else [v]):
                if not isinstance(item, Variable):
                    raise TypeError(f"{op_type}: input '{slot.lower()}' must be a Variable, but "
                                    f"received {type(item).__name__}")
        helper = LayerHelper(op_type, name=name)
        first = next(iter(inputs.values()))
        first = first[0] if isinstance(first, (list, tuple)) else first
        out = helper.create_variable_for_type_inference(dtype=first.dtype)
        helper.append_op(type=op_type, inputs=inputs, outputs={out_slot: out}, attrs=kwargs)
        return out

    layer.__name__ = op_type
    layer.__doc__ = doc or (opdef.__doc__ or "").strip()
    return atomic_layer(layer)


def generate_activation_fn(op_type: str) -> Callable[..., Variable]:
    """``act(x, name=None, **attrs)`` for a unary op with slots X -> Out."""
    fn = generate_layer_fn(op_type)

    def act(x: Variable, name: Optional[str] = None, **attrs: Any) -> Variable:
        return fn(x, name=name, **attrs)

    act.__name__, act.__doc__ = op_type, fn.__doc__
    return atomic_layer(act)
