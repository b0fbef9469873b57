"""``fluid.optimizer``: the optimizer pass and fluid 1.8's optimizers.

* ``base.py`` -- ``Optimizer``: ``minimize`` = ``append_backward`` + the ``grad_clip`` rewrite +
  regularization + one update op per parameter, every step tagged with its ``op_role``;
* ``optimizers.py`` -- the update-rule table: SGD, Momentum, Adagrad, Adam, Adamax,
  DecayedAdagrad, Adadelta, RMSProp, Ftrl, Lamb, LarsMomentum;
* ``special.py`` -- optimizers with their own passes: Dpsgd, DGCMomentum, Pipeline;
* ``wrappers.py`` -- optimizers around another one: ModelAverage, ExponentialMovingAverage,
  Lookahead, Recompute;
* ``gradient_merge.py`` -- GradientMergeOptimizer (gradient accumulation over k micro-batches).
"""
from __future__ import annotations

from .base import Optimizer
from .gradient_merge import GradientMergeOptimizer
from .optimizers import (SGD, Adadelta, AdadeltaOptimizer, Adagrad, AdagradOptimizer, Adam,
                         AdamOptimizer, Adamax, AdamaxOptimizer, DecayedAdagrad,
                         DecayedAdagradOptimizer, Ftrl, FtrlOptimizer, Lamb, LambOptimizer,
                         LarsMomentum, LarsMomentumOptimizer, Momentum, MomentumOptimizer,
                         RMSProp, RMSPropOptimizer, SGDOptimizer)
from .special import DGCMomentumOptimizer, Dpsgd, DpsgdOptimizer, PipelineOptimizer
from .wrappers import (ExponentialMovingAverage, LookaheadOptimizer, ModelAverage,
                       RecomputeOptimizer)

__all__ = ["SGD", "Momentum", "Adagrad", "Adam", "Adamax", "DecayedAdagrad", "Adadelta",
           "RMSProp", "Ftrl", "Lamb", "LarsMomentum", "SGDOptimizer", "MomentumOptimizer",
           "AdagradOptimizer", "AdamOptimizer", "AdamaxOptimizer", "DecayedAdagradOptimizer",
           "AdadeltaOptimizer", "RMSPropOptimizer", "FtrlOptimizer", "LambOptimizer",
           "LarsMomentumOptimizer", "ModelAverage", "ExponentialMovingAverage",
           "LookaheadOptimizer", "RecomputeOptimizer", "Optimizer", "GradientMergeOptimizer",
           "DpsgdOptimizer", "Dpsgd", "DGCMomentumOptimizer", "PipelineOptimizer"]
