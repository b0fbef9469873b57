"""``GradientMergeOptimizer``: gradient accumulation over ``k_steps`` runs (fluid 1.8's
``fluid.optimizer.GradientMergeOptimizer``).

``minimize(loss)`` is one pass (one build transaction):

1. the inner optimizer's backward: ``(param, grad)`` pairs;
2. a persistable int32 step counter ``gradient_merge_step``: ``step = (step + 1) % k_steps``,
   ``apply = (step == 0)``; one persistable accumulator ``<param>@GRAD@GradientMerge`` (zeros)
   per parameter: ``acc += grad`` on every run (a sparse embedding's SelectedRows gradient
   is scatter-added into its dense accumulator, which the inner optimizer then updates with
   as a dense gradient; fluid 1.8 refused sparse gradients here);
3. the inner optimizer's ``apply_gradients`` on ``acc / k_steps`` (``avg=True``) or ``acc``:
   its ``grad_clip``, regularization and update ops;
4. ``amp/guard.py``: every state write of step 3 (parameters, moments, beta powers, the
   learning-rate counter) takes effect only on the ``apply`` run;
5. the accumulators are reset to zeros on the ``apply`` run.

So ``k_steps`` runs on micro-batches equal one run of the inner optimizer on the whole batch
(with ``avg=True`` and a mean loss over equal micro-batches), clip and regularization included,
and the runs in between change no parameter and no optimizer state. fluid 1.8 put step 3 in a
``conditional_block``; this pass reaches the same effect with plain ops (see ``amp/guard.py``).
One deviation: fluid advanced a learning-rate schedule on every run; here it advances once per
``k_steps`` runs, like the inner optimizer's own state.

In dygraph mode gradients accumulate by themselves: call ``loss.backward()`` on ``k`` micro-batches
(scaling each loss by ``1 / k`` for a mean), then ``optimizer.minimize(loss)`` once and
``model.clear_gradients()``; ``GradientMergeOptimizer`` itself raises there, as in fluid.
"""
from __future__ import annotations

import numbers
from typing import Any, List, Optional, Sequence, Tuple

import numpy as np

from ..amp.guard import skip_state_updates
from ..core import mode as _mode, names, rewrite
from ..core.dtypes import VarType
from ..core.ir import (Operator, OpRole, Parameter, Program, Variable, default_main_program,
                      default_startup_program, program_guard)

__all__ = ["GradientMergeOptimizer"]

Pairs = List[Tuple[Parameter, Optional[Variable]]]


class GradientMergeOptimizer:
    """Accumulate gradients over ``k_steps`` runs, then apply ``inner_optimizer`` once
    (module docstring). ``avg``: apply the mean (True) or the sum (False) of the gradients."""

    def __init__(self, inner_optimizer: Any, k_steps: int = 1, avg: bool = True) -> None:
        if _mode.tracer is not None:
            raise RuntimeError(
                "In dygraph, we don't support GradientMergeOptimizer. You can do Gradient merge "
                "by yourself with k-times forward + backward, and one-time optimizer.minimize()")
        if inner_optimizer is None or not hasattr(inner_optimizer, "apply_gradients"):
            raise ValueError(f"GradientMergeOptimizer: inner_optimizer must be a fluid optimizer "
                             f"(e.g. fluid.optimizer.SGD(0.01)), but received "
                             f"{inner_optimizer!r}")
        if isinstance(k_steps, (bool, np.bool_)) or not isinstance(k_steps, numbers.Integral) \
                or k_steps < 1:
            raise ValueError(f"GradientMergeOptimizer: k_steps should be a positive integer "
                             f"(>= 1), but received {k_steps!r}")
        self.inner_optimizer = inner_optimizer
        self.k_steps = int(k_steps)
        self.avg = bool(avg)
        self.type = "gradient_merge"
        self._optimize_ops: List[Operator] = []

    def minimize(self, loss: Variable, startup_program: Optional[Program] = None,
                 parameter_list: Optional[Sequence[Any]] = None, no_grad_set: Any = None
                 ) -> Tuple[List[Operator], Pairs]:
        """The pass (module docstring), one transaction; returns
        ``(optimize_ops, params_grads)`` with the raw gradients of the backward pass."""
        if not isinstance(loss, Variable):
            raise TypeError(f"The loss should be an Variable, but received "
                            f"{type(loss).__name__}")
        if parameter_list is not None:
            raise ValueError("The parameter_list should be None when using "
                             "GradientMergeOptimizer")
        if no_grad_set is not None:
            raise ValueError("The no_grad_set should be None when using GradientMergeOptimizer")
        program = loss.block.program
        startup = startup_program if startup_program is not None else default_startup_program()
        with rewrite.transaction(program, startup), program_guard(program, startup):
            params_grads = self.backward(loss, startup_program=startup)
            self.apply_gradients(params_grads)
        return self._optimize_ops, params_grads

    # -- the two halves, for wrappers that insert passes in between (fleet's all-reduce) -----
    _parameter_list = None          # fleet reads it: a merge optimizer takes no parameter list

    @property
    def _grad_clip(self) -> Any:
        return getattr(self.inner_optimizer, "_grad_clip", None)

    def backward(self, loss: Variable, startup_program: Optional[Program] = None,
                 parameter_list: Optional[Sequence[Any]] = None, no_grad_set: Any = None,
                 callbacks: Any = None) -> Pairs:
        """The inner optimizer's backward."""
        return self.inner_optimizer.backward(loss, startup_program, parameter_list, no_grad_set,
                                             callbacks)

    def apply_gradients(self, params_grads: Pairs) -> List[Operator]:
        """Steps 2-5 of the module docstring, in the default main/startup programs."""
        self._optimize_ops = self._merge_and_apply(default_main_program(),
                                                   default_startup_program(), params_grads)
        return self._optimize_ops

    def apply_optimize(self, loss: Variable, startup_program: Optional[Program],
                       params_grads: Pairs) -> List[Operator]:
        with program_guard(loss.block.program, startup_program):
            return self.apply_gradients(params_grads)

    def _apply_optimize(self, loss: Variable, startup_program: Optional[Program],
                        params_grads: Pairs, grad_clip: Any = None) -> List[Operator]:
        """fleet's entry point (after its all-reduce); the inner optimizer's own clip
        applies."""
        return self.apply_optimize(loss, startup_program, params_grads)

    def _merge_and_apply(self, program: Program, startup: Program, params_grads: Pairs
                         ) -> List[Operator]:
        block = program.global_block()
        k = self.k_steps
        pairs = [(p, g) for p, g in params_grads if g is not None]
        with rewrite.role(program, OpRole.Optimize, name_scope="gradient_merge"):
            step = rewrite.global_var(program, startup,
                                      names.generate("gradient_merge_step"), [1], 0,
                                      VarType.INT32)
            rewrite.append(block, "increment", {"X": step}, {"Out": step}, {"step": 1.0})
            k_var = rewrite.op(block, "fill_constant", dtype=VarType.INT32,
                               attrs={"shape": [1], "dtype": VarType.INT32, "value": float(k)})
            rewrite.append(block, "elementwise_mod", {"X": step, "Y": k_var}, {"Out": step})
            zero = rewrite.op(block, "fill_constant", dtype=VarType.INT32,
                              attrs={"shape": [1], "dtype": VarType.INT32, "value": 0.0})
            apply = rewrite.op(block, "equal", X=step, Y=zero, dtype=VarType.BOOL)
            skip = rewrite.op(block, "logical_not", X=apply)
        accs: List[Variable] = []
        merged: Pairs = []
        for p, g in pairs:
            with rewrite.role(program, OpRole.Optimize, [p, g], name_scope="gradient_merge"):
                acc = rewrite.global_var(program, startup, p.name + "@GRAD@GradientMerge",
                                         list(p.shape), 0.0, g.dtype)
                rewrite.append(block, "elementwise_add", {"X": acc, "Y": g}, {"Out": acc})
                new_g = acc
                if self.avg and k != 1:
                    new_g = rewrite.op(block, "scale", X=acc, attrs={"scale": 1.0 / k})
            accs.append(acc)
            merged.append((p, new_g))
        done = {p.name for p, _ in pairs}
        merged += [(p, g) for p, g in params_grads if p.name not in done]
        start = len(block.ops)
        optimize_ops = self.inner_optimizer.apply_gradients(merged)
        skip_state_updates(block, skip, start, exclude=[step.name] + [a.name for a in accs],
                           name_scope="gradient_merge")
        with rewrite.role(program, OpRole.Optimize, name_scope="gradient_merge"):
            keep = rewrite.op(block, "cast", X=skip, dtype=VarType.INT32,
                              attrs={"in_dtype": VarType.BOOL, "out_dtype": VarType.INT32})
            for acc in accs:
                zeros = rewrite.op(block, "fill_zeros_like", X=acc)
                rewrite.append(block, "select_input", {"X": [zeros, acc], "Mask": keep},
                               {"Out": acc})
        return list(optimize_ops)
