"""Weight decay (``fluid.regularizer``): ``L1Decay`` / ``L2Decay`` and the pass applying them.

``append_regularization_ops(params_grads, regularization)`` runs inside
``Optimizer.apply_gradients`` *after* gradient clipping, so the decay term is never clipped nor
counted in a global norm. Per parameter (``ParamAttr(regularizer=)`` wins over the optimizer's):

* L2: ``scale(param, coeff)`` -> term;  L1: ``sign(param)`` then ``scale(coeff)`` -> term;
* ``sum([grad, term])`` written in place into ``grad`` (as fluid: a fetched ``X@GRAD`` then
  includes the decay when no clip rewrote it); a sparse (SELECTED_ROWS) gradient is summed
  into a new dense ``<grad>@NEWGRAD`` instead, as fluid 1.8 does (the whole table decays).

All ops are in ``name_scope('regularization')`` with op_role Optimize and op_role_var
``[param, grad]``.
"""
from __future__ import annotations

import logging
import math
import numbers
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from .core import rewrite
from .core.dtypes import VarType
from .core.ir import Block, OpRole, Parameter, Variable
from .core.names import name_scope
from .formats.serialize import config_type

__all__ = ["L1Decay", "L2Decay", "L1DecayRegularizer", "L2DecayRegularizer",
           "WeightDecayRegularizer", "append_regularization_ops"]

_log = logging.getLogger("fluidlite")


class WeightDecayRegularizer:
    """Base class: ``__call__(param, grad, block)`` appends the ops computing the decay term of
    ``param`` to ``block`` and returns the term's Variable."""

    def __init__(self, regularization_coeff: float = 0.0) -> None:
        if isinstance(regularization_coeff, (bool, np.bool_)) or \
                not isinstance(regularization_coeff, numbers.Real) or \
                not math.isfinite(regularization_coeff):
            raise TypeError(f"regularization_coeff must be a float (finite), got "
                            f"{regularization_coeff!r}")
        if regularization_coeff < 0:   # a negative decay pushes weights away from zero
            raise ValueError(f"{type(self).__name__}: regularization_coeff must be >= 0, got "
                             f"{regularization_coeff!r} (the decay term is added to the "
                             f"gradient; use 0 for no decay)")
        self._regularization_coeff = float(regularization_coeff)

    def __call__(self, param: Parameter, grad: Variable, block: Block) -> Variable:
        raise NotImplementedError(f"{type(self).__name__} must define __call__")

    def to_config(self) -> Dict[str, Any]:
        """What a saved program stores: ``{"coeff": regularization_coeff}``."""
        return {"coeff": self._regularization_coeff}

    @classmethod
    def from_config(cls, config: Dict[str, Any]) -> "WeightDecayRegularizer":
        if set(config) != {"coeff"}:
            raise ValueError(f"a regularizer stores exactly {{'coeff'}}, got {sorted(config)}")
        return cls(config["coeff"])

    def _term_var(self, block: Block, param: Parameter) -> Variable:
        # fluid's decay variable; the op writing it infers its shape
        return block.create_var(dtype=param.dtype, lod_level=param.lod_level)


@config_type("regularizer", "L2Decay")
class L2DecayRegularizer(WeightDecayRegularizer):
    """term = coeff * param (one ``scale`` op); adds ``coeff * ||param||^2 / 2`` to the loss.

    Args:
        regularization_coeff (float, default 0.0): the coefficient.
    Returns:
        L2DecayRegularizer: the regularizer, for ``ParamAttr(regularizer=)`` or an optimizer's
        ``regularization=``.
    Raises:
        TypeError: ``regularization_coeff`` is not a finite real number.
        ValueError: ``regularization_coeff`` is negative.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 2])
        ...     y = fluid.data("y", [-1, 1])
        ...     pred = fluid.layers.fc(x, size=1, param_attr=fluid.ParamAttr(
        ...         name="w", initializer=fluid.initializer.Constant(1.0)), bias_attr=False)
        ...     loss = fluid.layers.mean(fluid.layers.square_error_cost(pred, y))
        ...     _ = fluid.optimizer.SGD(0.1, regularization=fluid.regularizer.L2Decay(0.5)).minimize(loss)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> feed = {"x": np.array([[1, 2]], "float32"), "y": np.array([[1]], "float32")}
        >>> _ = exe.run(main, feed=feed, fetch_list=[loss])
        >>> fluid.global_scope().find_var("w").get_tensor().__array__().ravel().round(4)      # w -= 0.1 * (grad + 0.5 * w)
        array([0.55, 0.15], dtype=float32)
    """

    def __call__(self, param: Parameter, grad: Variable, block: Block) -> Variable:
        decay = self._term_var(block, param)
        rewrite.append(block, "scale", {"X": param}, {"Out": decay},
                       {"scale": self._regularization_coeff})
        return decay

    def __str__(self) -> str:
        return "L2Decay, regularization_coeff=%f" % self._regularization_coeff


@config_type("regularizer", "L1Decay")
class L1DecayRegularizer(WeightDecayRegularizer):
    """term = coeff * sign(param) (``sign`` then ``scale``); adds ``coeff * ||param||_1``.

    Args:
        regularization_coeff (float, default 0.0): the coefficient.
    Returns:
        L1DecayRegularizer: the regularizer, for ``ParamAttr(regularizer=)`` or an optimizer's
        ``regularization=``.
    Raises:
        TypeError: ``regularization_coeff`` is not a finite real number.
        ValueError: ``regularization_coeff`` is negative.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 2])
        ...     y = fluid.data("y", [-1, 1])
        ...     pred = fluid.layers.fc(x, size=1, param_attr=fluid.ParamAttr(
        ...         name="w", initializer=fluid.initializer.Constant(1.0)), bias_attr=False)
        ...     loss = fluid.layers.mean(fluid.layers.square_error_cost(pred, y))
        ...     _ = fluid.optimizer.SGD(0.1, regularization=fluid.regularizer.L1Decay(0.5)).minimize(loss)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> feed = {"x": np.array([[1, 2]], "float32"), "y": np.array([[1]], "float32")}
        >>> _ = exe.run(main, feed=feed, fetch_list=[loss])
        >>> fluid.global_scope().find_var("w").get_tensor().__array__().ravel().round(4)      # w -= 0.1 * (grad + 0.5 * sign(w))
        array([0.55, 0.15], dtype=float32)
    """

    def __call__(self, param: Parameter, grad: Variable, block: Block) -> Variable:
        sign = self._term_var(block, param)
        decay = self._term_var(block, param)
        rewrite.append(block, "sign", {"X": param}, {"Out": sign})
        rewrite.append(block, "scale", {"X": sign}, {"Out": decay},
                       {"scale": self._regularization_coeff})
        return decay

    def __str__(self) -> str:
        return "L1Decay, regularization_coeff=%f" % self._regularization_coeff


L1Decay = L1DecayRegularizer
L2Decay = L2DecayRegularizer


def check_regularizer(value: Any, where: str) -> Optional[WeightDecayRegularizer]:
    """None or a regularizer instance; a class (``L2Decay`` instead of ``L2Decay(1e-4)``) or any
    other object raises a TypeError saying how to fix it."""
    if value is None or isinstance(value, WeightDecayRegularizer):
        return value
    if isinstance(value, type):
        short = value.__name__.replace("Regularizer", "")
        raise TypeError(f"{where} must be a regularizer instance such as "
                        f"{short}(regularization_coeff=1e-4), but received the class "
                        f"{value.__name__} itself; call it with a coefficient")
    raise TypeError(f"{where} must be an instance of fluid.regularizer.L1Decay or L2Decay (or "
                    f"None), but received {value!r} of type {type(value).__name__}")


def _regularized_grad(param: Parameter, grad: Variable,
                      regularization: Optional[WeightDecayRegularizer]) -> Variable:
    own = check_regularizer(getattr(param, "regularizer", None),
                            f"the regularizer of parameter '{param.name}'")
    reg = own if own is not None else regularization
    if reg is None:
        return grad
    block = grad.block
    term = reg(param, grad, block)
    out = grad
    if grad.type == VarType.SELECTED_ROWS:
        # fluid 1.8: a sparse gradient plus the (dense, whole-table) decay is a new dense
        # gradient ``<grad>@NEWGRAD`` (kNewGradSuffix): every row decays, touched or not
        # (its shape comes from the sum's inference)
        out = rewrite.tmp(block, "sum", param.dtype, name=grad.name + "@NEWGRAD")
    rewrite.append(block, "sum", {"X": [grad, term]}, {"Out": out}, {"use_mkldnn": False})
    return out


def append_regularization_ops(parameters_and_grads: Sequence[Tuple[Parameter, Optional[Variable]]],
                              regularization: Optional[WeightDecayRegularizer] = None
                              ) -> List[Tuple[Parameter, Optional[Variable]]]:
    """Add each parameter's decay term to its gradient (see the module docstring); returns the
    ``(param, grad)`` pairs (a None grad stays None)."""
    regularization = check_regularizer(regularization, "regularization")
    out: List[Tuple[Parameter, Optional[Variable]]] = []
    warned = False
    with name_scope("regularization"):
        for param, grad in parameters_and_grads:
            if grad is None:
                out.append((param, grad))
                continue
            if not warned and regularization is not None and \
                    getattr(param, "regularizer", None) is not None:
                warned = True
                _log.info("If regularizer of a Parameter has been set by 'fluid.ParamAttr' or "
                          "'fluid.WeightNormParamAttr' already. The Regularization[%s] in "
                          "Optimizer will not take effect, and it will only be applied to other "
                          "Parameters!", regularization)
            with rewrite.role(param.block.program, OpRole.Optimize, [param, grad]):
                out.append((param, _regularized_grad(param, grad, regularization)))
    return out
