"""``fluid.contrib.op_freq_statistic``: how often each op type, and each producer -> consumer
pair of op types, occurs in a program's global block (fluid 1.8's ``contrib/op_frequence.py``,
a pure-Python program statistic)."""
from __future__ import annotations

import logging
from typing import Dict, List, Tuple

from ..core.ir import Program

__all__ = ["op_freq_statistic"]

_log = logging.getLogger("fluidlite")


def op_freq_statistic(program: Program) -> Tuple[List[Tuple[str, int]], List[Tuple[str, int]]]:
    """Count the op types of ``program``'s global block and the adjacent pairs of them.

    ``uni_op_freq``: each op type with the number of its ops that write at least one variable
    other than a parameter (an op writing only parameters, e.g. an optimizer update, is not
    counted). ``adj_2_op_freq``: ``"producer->consumer"`` with how many times an op of type
    ``consumer`` reads a non-parameter variable last written by an op of type ``producer``
    (inputs nobody in the block writes, such as feeds, are skipped). Both lists are sorted by
    count, largest first; equal counts keep the order of first appearance (as fluid 1.8).

    Args:
        program (Program): the program to count.
    Returns:
        tuple: ``(uni_op_freq, adj_2_op_freq)``, two lists of ``(name, count)`` pairs.
    Raises:
        TypeError: ``program`` is not a ``fluid.Program``.

    Example:
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 4])
        ...     y = fluid.layers.relu(fluid.layers.fc(x, 3))
        >>> uni, adj = fluid.contrib.op_freq_statistic(main)
        >>> uni
        [('mul', 1), ('elementwise_add', 1), ('relu', 1)]
        >>> adj
        [('mul->elementwise_add', 1), ('elementwise_add->relu', 1)]
    """
    if not isinstance(program, Program):
        raise TypeError(f"op_freq_statistic: program must be a fluid.Program, but received "
                        f"{type(program).__name__}")
    parameters = {p.name for p in program.global_block().all_parameters()}
    ops = program.global_block().ops
    uni: Dict[str, int] = {}
    for op in ops:
        if any(n not in parameters for n in op.output_arg_names):
            uni[op.type] = uni.get(op.type, 0) + 1
    producers: Dict[str, List[str]] = {}       # variable -> the op types that wrote it
    in_ops: Dict[str, List[str]] = {}          # op type -> producer types of what it read
    for op in ops:
        for name in op.input_arg_names:
            if name in parameters:
                continue
            if name in producers:
                in_ops.setdefault(op.type, []).append(producers[name][-1])
            else:
                _log.debug("op_freq_statistic: no op of the block writes '%s' (read by %s)",
                           name, op.type)
        for name in op.output_arg_names:
            producers.setdefault(name, []).append(op.type)
    adj: Dict[str, int] = {}
    for consumer, types in in_ops.items():
        for producer in types:
            pair = f"{producer}->{consumer}"
            adj[pair] = adj.get(pair, 0) + 1
    return (sorted(uni.items(), key=lambda kv: kv[1], reverse=True),
            sorted(adj.items(), key=lambda kv: kv[1], reverse=True))
