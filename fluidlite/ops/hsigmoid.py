"""``hierarchical_sigmoid`` (fluid.layers.hsigmoid) over fluid's default complete binary tree
or a custom tree.

Class c has code ``c + num_classes``; its path visits the internal nodes
``(code >> (j + 1)) - 1`` for ``j < bit_length(code) - 1`` with the bits ``(code >> j) & 1``.
With pre_j = W[node_j] . x + b[node_j] (clipped to [-40, 40] as in fluid), the loss is
``sum_j softplus(pre_j) - bit_j * pre_j`` = -log p(class). All samples are handled at once
through one [N, code_length] node index and a mask.

As fluid's kernel, PreOut is ``log(1 + exp(pre))`` over all ``code_length`` columns
(``(num_classes - 1).bit_length()``, or PathTable's width), the columns past a sample's path
holding pre = 0, and Out adds every column of PreOut: a path shorter than ``code_length``
costs ``log 2`` per missing node (fluid's loss, Paddle 2.6's too).

Custom tree (fluid's ``PathTable`` / ``PathCode`` inputs, ``is_custom=True``): row i of
PathTable [N, L] lists the internal nodes (rows of W) on sample i's path, ended by the first
negative entry; PathCode [N, L] holds the matching bits. Label is then not read.
"""
from __future__ import annotations

from typing import Tuple

import numpy as np

from ..core.registry import OpDef, VarSpec, register


def _paths(label: np.ndarray, num_classes: int) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    code = label.reshape(-1).astype(np.int64) + num_classes
    if code.size and (code.min() < num_classes or code.max() >= 2 * num_classes):
        raise ValueError(f"hierarchical_sigmoid: labels must lie in [0, {num_classes})")
    length = np.floor(np.log2(np.maximum(code, 1))).astype(np.int64)   # bit_length - 1
    depth = max(int(num_classes) - 1, 0).bit_length()    # fluid's code_length: FindLastSet
    j = np.arange(depth)[None, :]
    mask = j < length[:, None]
    node = np.where(mask, (code[:, None] >> (j + 1)) - 1, 0)
    bit = ((code[:, None] >> j) & 1) * mask
    return node, bit.astype(np.float64), mask


def _custom_paths(PathTable: np.ndarray, PathCode: np.ndarray, n: int, num_nodes: int
                  ) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    table = np.asarray(PathTable).astype(np.int64, copy=False)
    code = np.asarray(PathCode)
    if table.ndim != 2 or table.shape[0] != n or code.shape != table.shape:
        raise ValueError(f"hierarchical_sigmoid: PathTable and PathCode must both be [N, L] "
                         f"with N = {n} (the rows of X), got {list(table.shape)} and "
                         f"{list(code.shape)}")
    # a path ends at its first negative node (fluid's CustomCode::get_length)
    mask = np.cumprod(table >= 0, axis=1).astype(bool)
    node = np.where(mask, table, 0)
    if node.size and node.max() >= num_nodes:
        raise ValueError(f"hierarchical_sigmoid: PathTable nodes must lie in [0, {num_nodes}) "
                         f"(the rows of W), got {int(node.max())}")
    bit = np.where(mask, code, 0).astype(np.float64)
    return node, bit, mask


@register
class HierarchicalSigmoid(OpDef):
    """Out[i] = sum_j softplus(pre_ij) - bit_ij * pre_ij over the path of Label[i], plus log 2
    per column past the path (fluid's kernel, module docstring); PreOut = softplus(pre).
    dpre = (1 - 1 / exp(PreOut) - bit) * dOut (= sigmoid(pre) - bit), then dX = dpre W[node],
    dW[node] += dpre x, dBias[node] += dpre."""
    type = "hierarchical_sigmoid"
    inputs = ("X", "W", "Label", "PathTable?", "PathCode?", "Bias?")
    outputs = ("Out", "PreOut?", "W_Out?")
    grad_uses = ("X", "W", "Label", "PathTable", "PathCode", "Bias")
    extra_attrs = {"is_sparse": False, "remote_prefetch": False, "trainer_id": 0,
                   "height_sections": [], "epmap": [], "table_names": []}

    def infer(self, X, W, Label, PathTable, PathCode, Bias, *, num_classes):
        if (PathTable is None) != (PathCode is None):
            raise ValueError("hierarchical_sigmoid: PathTable and PathCode must be given "
                             "together (a custom tree)")
        width = -1 if PathTable is None else PathTable.shape[-1]
        return {"Out": VarSpec((X.shape[0], 1), X.dtype),
                "PreOut": VarSpec((X.shape[0], width), X.dtype), "W_Out": W}

    def _pre(self, X, W, Label, Bias, num_classes, PathTable=None, PathCode=None):
        if PathTable is not None:
            node, bit, mask = _custom_paths(PathTable, PathCode, X.shape[0], W.shape[0])
        else:
            node, bit, mask = _paths(Label, num_classes)
        pre = np.einsum("nd,njd->nj", X, W[node])
        if Bias is not None:
            pre = pre + Bias.reshape(-1)[node]
        return np.clip(pre, -40.0, 40.0) * mask, node, bit, mask

    def forward(self, X, W, Label, PathTable=None, PathCode=None, Bias=None, *,
                num_classes=2):
        pre, node, bit, mask = self._pre(X, W, Label, Bias, num_classes, PathTable, PathCode)
        pre = pre.astype(X.dtype, copy=False)
        one = pre.dtype.type(1)
        soft = np.log(one + np.exp(pre))         # fluid's softrelu of every column (|pre| <= 40)
        out = -(bit * pre).sum(1, keepdims=True) + soft.sum(1, keepdims=True)
        return {"Out": out.astype(X.dtype), "PreOut": soft, "W_Out": W}

    def backward(self, X, W, Label, Bias, dOut, dPreOut=None, dW_Out=None, PathTable=None,
                 PathCode=None, *, num_classes=2):
        pre, node, bit, mask = self._pre(X, W, Label, Bias, num_classes, PathTable, PathCode)
        pre = pre.astype(X.dtype, copy=False)
        one = pre.dtype.type(1)
        soft = np.log(one + np.exp(pre))         # PreOut, then fluid's 1 - 1 / exp(PreOut)
        dpre = (one - one / np.exp(soft) - bit) * mask * dOut.reshape(-1, 1)
        dX = np.einsum("nj,njd->nd", dpre, W[node])
        dW = np.zeros_like(W)
        np.add.at(dW, node[mask], (dpre[..., None] * X[:, None, :])[mask])
        res = {"X": dX.astype(X.dtype, copy=False), "W": dW}
        if Bias is not None:
            dB = np.zeros(Bias.size, Bias.dtype)
            np.add.at(dB, node[mask], dpre[mask])
            res["Bias"] = dB.reshape(Bias.shape)
        return res
