"""``ParamAttr``: how a layer creates a parameter (name, initializer, lr, regularizer, clip...)."""
from __future__ import annotations

import numbers
import warnings
from typing import Any, Dict, List, Optional, Union

import numpy as np

__all__ = ["ParamAttr", "WeightNormParamAttr"]


class ParamAttr:
    """Parameter attributes (fluid 1.8, plus 2.0's ``need_clip`` and pre-1.8 ``gradient_clip``).

    Args:
        name (str | None): the parameter's name (share a parameter by giving two layers the
            same name).
        initializer (Initializer | None): how it is initialized.
        learning_rate (float, default 1.0): multiplies the optimizer's learning rate for it.
        regularizer (WeightDecayRegularizer | None): its own weight decay (overrides the
            optimizer's).
        trainable (bool, default True): whether the optimizer updates it.
        gradient_clip (GradientClipBase | None): pre-1.8 per-parameter clip.
        do_model_average (bool, default True): included by ``ModelAverage``.
        need_clip (bool, default True): whether the optimizer's ``grad_clip`` clips it.
    Returns:
        ParamAttr: the attribute object, passed as ``param_attr=`` / ``bias_attr=`` to a layer.
    Raises:
        ValueError: ``name`` is not a non-empty str, or ``learning_rate`` is negative.
        TypeError: ``learning_rate`` is not a number, or ``regularizer`` is a class instead of an
            instance.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 3])
        ...     y = fluid.layers.fc(x, size=2, param_attr=fluid.ParamAttr(
        ...         name="fc_weight", initializer=fluid.initializer.Constant(0.1),
        ...         regularizer=fluid.regularizer.L2Decay(1e-4), learning_rate=0.5))
        >>> w = main.global_block().var("fc_weight")
        >>> w.shape, w.optimize_attr["learning_rate"], type(w.regularizer).__name__
        ((3, 2), 0.5, 'L2DecayRegularizer')
    """

    def __init__(self, name: Optional[str] = None, initializer: Any = None,
                 learning_rate: float = 1.0, regularizer: Any = None, trainable: bool = True,
                 gradient_clip: Any = None, do_model_average: bool = True,
                 need_clip: bool = True) -> None:
        if name is not None and (not isinstance(name, str) or name == ""):
            raise ValueError(f"ParamAttr name must be a non-empty str, got {name!r}")
        # numbers.Real: Python and numpy numbers (np.float32(0.5)) alike
        if isinstance(learning_rate, (bool, np.bool_)) or \
                not isinstance(learning_rate, numbers.Real):
            raise TypeError(f"ParamAttr learning_rate must be a number, but received "
                            f"{learning_rate!r} of type {type(learning_rate).__name__}")
        if not learning_rate >= 0:
            raise ValueError(f"ParamAttr learning_rate must be >= 0 (a multiplier of the "
                             f"optimizer's learning rate), but received {learning_rate}")
        if isinstance(regularizer, type):
            raise TypeError(f"ParamAttr regularizer must be an instance such as "
                            f"{regularizer.__name__}(1e-4), not the class itself")
        if gradient_clip is not None:
            warnings.warn("ParamAttr(gradient_clip=...) is deprecated; pass grad_clip to the "
                          "optimizer instead", DeprecationWarning, stacklevel=2)
        self.name = name
        self.initializer = initializer
        self.learning_rate = float(learning_rate)
        self.regularizer = regularizer
        self.trainable = bool(trainable)
        self.gradient_clip = gradient_clip
        self.do_model_average = do_model_average
        self.need_clip = bool(need_clip)

    def _set_default_initializer(self, initializer: Any) -> None:
        if self.initializer is None:
            self.initializer = initializer

    def _set_default_param_initializer(self) -> None:
        from .initializer import Xavier
        self._set_default_initializer(Xavier())

    def _set_default_bias_initializer(self) -> None:
        from .initializer import Constant
        self._set_default_initializer(Constant(0.0))

    @staticmethod
    def _to_attr(arg: Any, what: str = "param_attr") -> Union["ParamAttr", bool, List["ParamAttr"]]:
        """None -> default; str -> name; Initializer -> initializer; regularizer -> regularizer;
        False -> no parameter; list -> one per input. ``what`` names the argument in errors."""
        from .initializer import Initializer
        from .regularizer import WeightDecayRegularizer
        if arg is None:
            return ParamAttr()
        if isinstance(arg, (list, tuple)):
            return [ParamAttr._to_attr(a, f"{what}[{i}]") for i, a in enumerate(arg)]
        if isinstance(arg, ParamAttr):
            return arg
        if isinstance(arg, str):
            return ParamAttr(name=arg)
        if isinstance(arg, Initializer):
            return ParamAttr(initializer=arg)
        if isinstance(arg, WeightDecayRegularizer):
            return ParamAttr(regularizer=arg)
        if isinstance(arg, bool):
            return ParamAttr() if arg else False
        if isinstance(arg, type) and issubclass(arg, (Initializer, WeightDecayRegularizer)):
            raise TypeError(f"{what} must be an instance such as {arg.__name__}(), not the "
                            f"class {arg.__name__} itself")
        raise TypeError(f"{what} must be a ParamAttr, a parameter name (str), an Initializer, a "
                        f"regularizer, True/False or None -- or a list of those, one per input "
                        f"-- but received {arg!r} of type {type(arg).__name__}; e.g. "
                        f"fluid.ParamAttr(name='w', initializer=fluid.initializer.Xavier())")

    def _to_kwargs(self, with_initializer: bool = False) -> Dict[str, Any]:
        kw: Dict[str, Any] = {
            "name": self.name, "optimize_attr": {"learning_rate": self.learning_rate},
            "regularizer": self.regularizer, "trainable": self.trainable,
            "gradient_clip_attr": self.gradient_clip, "do_model_average": self.do_model_average,
            "need_clip": self.need_clip}
        if with_initializer:
            kw["initializer"] = self.initializer
        return kw

    def __repr__(self) -> str:
        return (f"ParamAttr(name={self.name!r}, initializer={self.initializer!r}, "
                f"learning_rate={self.learning_rate}, regularizer={self.regularizer!r}, "
                f"trainable={self.trainable}, need_clip={self.need_clip})")


class WeightNormParamAttr(ParamAttr):
    """Weight normalization: the weight is ``w = g * v / ||v||``, trained through the
    parameters ``<name>_g`` and ``<name>_v`` (see ``LayerHelper._create_weight_normalize``).

    Args:
        dim (int|None): the dim that keeps its own scale ``g``; None: one scale for the whole
            weight. The other arguments are ``ParamAttr``'s, applied to g and v.
    Returns:
        WeightNormParamAttr: the attribute object; a layer given it creates ``<name>_g`` and
        ``<name>_v`` and computes its weight from them.
    Raises:
        ValueError: ``name`` is not a non-empty str, or ``learning_rate`` is negative.
        TypeError: ``learning_rate`` is not a number, or ``regularizer`` is a class instead of an
            instance.

    Example:
        >>> import fluidlite as fluid
        >>> x = fluid.data("x", [-1, 4], "float32")
        >>> y = fluid.layers.fc(x, 3, param_attr=fluid.WeightNormParamAttr(dim=1, name="w"))
    """

    def __init__(self, dim: Optional[int] = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.dim = dim
