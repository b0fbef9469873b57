"""``fluid.contrib.layers`` (fluid 1.8): the contrib layers fluidlite provides.

Provided: ``rnn_impl`` -- ``BasicGRUUnit``, ``basic_gru``, ``BasicLSTMUnit``, ``basic_lstm``
(GRU / LSTM from basic operators, multi-layer and bidirectional). The rest of fluid 1.8's
contrib layers (``contrib.layers.nn``: fused / CTR / text-matching / tree-retrieval ops with
their own C++ kernels, and ``metric_op.ctr_metric_bundle``) are not provided; asking for one
says so (docs/api_coverage.md, "Sub-module paths", gives the reasons).
"""
from __future__ import annotations

from typing import Any

from . import rnn_impl  # noqa: F401
from .rnn_impl import BasicGRUUnit, BasicLSTMUnit, basic_gru, basic_lstm  # noqa: F401

__all__ = ["BasicGRUUnit", "basic_gru", "BasicLSTMUnit", "basic_lstm"]

# fluid 1.8's other contrib layers, by the module that defined them
_NOT_PROVIDED = {
    "nn": ("fused_elemwise_activation", "sequence_topk_avg_pooling", "var_conv_2d",
           "match_matrix_tensor", "tree_conv", "fused_embedding_seq_pool", "multiclass_nms2",
           "search_pyramid_hash", "shuffle_batch", "partial_concat", "partial_sum",
           "tdm_child", "rank_attention", "tdm_sampler"),
    "metric_op": ("ctr_metric_bundle",),
}


def __getattr__(name: str) -> Any:
    # fluid 1.8's other contrib layers say that they are not provided, not a bare
    # "no attribute"
    if name.startswith("__"):
        raise AttributeError(name)
    for module, names in _NOT_PROVIDED.items():
        if name == module or name in names:
            raise AttributeError(
                f"fluid.contrib.layers.{name} is not provided by fluidlite (of fluid 1.8's "
                f"contrib layers only rnn_impl's BasicGRUUnit, basic_gru, BasicLSTMUnit and "
                f"basic_lstm are; see docs/api_coverage.md)")
    raise AttributeError(f"module 'fluidlite.contrib.layers' has no attribute '{name}'")
