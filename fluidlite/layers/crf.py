"""``fluid.layers.linear_chain_crf`` and ``crf_decoding`` (ops in ``ops/crf.py``)."""
from __future__ import annotations

from typing import Any, Optional

from ..core.dtypes import VarType
from ..core.ir import Variable
from ..layer_helper import LayerHelper
from ..param_attr import ParamAttr

__all__ = ["linear_chain_crf", "crf_decoding"]


def linear_chain_crf(input: Variable, label: Variable, param_attr: Any = None,
                     length: Optional[Variable] = None) -> Variable:
    """Negative log-likelihood [num_seqs, 1] of ``label`` under a linear-chain CRF over the
    emission scores ``input`` ([N, D], LoD); creates the ``[D + 2, D]`` transition parameter
    (name it with ``param_attr`` to share it with ``crf_decoding``)."""
    if not isinstance(input, Variable) or not isinstance(label, Variable):
        raise TypeError("linear_chain_crf: input and label must be Variables")
    if length is not None:
        raise ValueError("linear_chain_crf: fluidlite takes LoD input; pass the sequences as a "
                         "LoDTensor instead of padded data with length")
    if len(input.shape) != 2 or input.shape[1] < 1:
        raise ValueError(f"linear_chain_crf: input must be [N, D] with a known D, got "
                         f"{list(input.shape)}")
    helper = LayerHelper("linear_chain_crf", param_attr=param_attr)
    size = input.shape[1]
    transition = helper.create_parameter(attr=helper.param_attr, shape=[size + 2, size],
                                         dtype=input.dtype)
    outs = {k: helper.create_variable_for_type_inference(input.dtype)
            for k in ("Alpha", "EmissionExps", "TransitionExps", "LogLikelihood")}
    helper.append_op(type="linear_chain_crf",
                     inputs={"Emission": input, "Transition": transition, "Label": label},
                     outputs=outs)
    return outs["LogLikelihood"]


def crf_decoding(input: Variable, param_attr: Any, label: Optional[Variable] = None,
                 length: Optional[Variable] = None) -> Variable:
    """The Viterbi tags ([N, 1] int64) with the transition parameter named by
    ``param_attr`` (the one ``linear_chain_crf`` created); with ``label``, 1 where they
    agree."""
    if length is not None:
        raise ValueError("crf_decoding: fluidlite takes LoD input (no length)")
    name = param_attr.name if isinstance(param_attr, ParamAttr) else param_attr
    helper = LayerHelper("crf_decoding")
    transition = helper.get_parameter(name)
    path = helper.create_variable_for_type_inference(VarType.INT64, stop_gradient=True)
    inputs = {"Emission": input, "Transition": transition}
    if label is not None:
        inputs["Label"] = label
    helper.append_op(type="crf_decoding", inputs=inputs, outputs={"ViterbiPath": path})
    return path
