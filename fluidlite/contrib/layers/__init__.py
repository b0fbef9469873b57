"""``fluid.contrib.layers`` (fluid 1.8): the contrib layers fluidlite provides.

Provided: ``rnn_impl`` -- ``BasicGRUUnit``, ``basic_gru``, ``BasicLSTMUnit``, ``basic_lstm``
(GRU / LSTM from basic operators, multi-layer and bidirectional); ``nn`` -- the fused / CTR /
text-matching / tree-retrieval layers over their own ops (``fused_elemwise_activation``,
``var_conv_2d``, ``match_matrix_tensor``, ``sequence_topk_avg_pooling``, ``tree_conv``,
``fused_embedding_seq_pool``, ``multiclass_nms2``, ``shuffle_batch``, ``partial_concat``,
``partial_sum``, ``tdm_child``, ``tdm_sampler``, ``rank_attention``); ``metric_op`` --
``ctr_metric_bundle``. fluid 1.8's ``search_pyramid_hash`` is not provided; asking for it
says so (docs/api_coverage.md, "Sub-module paths", gives the reasons).
"""
from __future__ import annotations

from typing import Any

from . import metric_op, nn, rnn_impl  # noqa: F401
from .metric_op import *  # noqa: F401,F403
from .nn import *  # noqa: F401,F403
from .rnn_impl import BasicGRUUnit, BasicLSTMUnit, basic_gru, basic_lstm  # noqa: F401

__all__ = (["BasicGRUUnit", "basic_gru", "BasicLSTMUnit", "basic_lstm"] + nn.__all__
           + metric_op.__all__)

# fluid 1.8's other contrib layers, by the module that defined them
_NOT_PROVIDED = {"nn": ("search_pyramid_hash",)}


def __getattr__(name: str) -> Any:
    # fluid 1.8's other contrib layers say that they are not provided, not a bare
    # "no attribute"
    if name.startswith("__"):
        raise AttributeError(name)
    for module, names in _NOT_PROVIDED.items():
        if name == module or name in names:
            raise AttributeError(
                f"fluid.contrib.layers.{name} is not provided by fluidlite (of fluid 1.8's "
                f"contrib layers all but search_pyramid_hash are; see "
                f"docs/api_coverage.md)")
    raise AttributeError(f"module 'fluidlite.contrib.layers' has no attribute '{name}'")
