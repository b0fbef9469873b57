"""``fluid.layers.linear_chain_crf`` and ``crf_decoding`` (ops in ``ops/crf.py``)."""
from __future__ import annotations

from typing import Any, Optional

from ..core.dtypes import VarType
from ..core.ir import Variable
from ..layer_helper import LayerHelper
from ..param_attr import ParamAttr

__all__ = ["linear_chain_crf", "crf_decoding"]


def _check_length(length: Optional[Variable], layer: str) -> None:
    """fluid 1.8's padded form: ``length`` is an int64 Variable [B] (or [B, 1])."""
    if length is None:
        return
    if not isinstance(length, Variable):
        raise TypeError(f"{layer}: length must be a Variable (int64 [batch_size]), got "
                        f"{type(length).__name__}")
    if length.dtype != VarType.INT64:
        raise TypeError(f"{layer}: length must be int64, got {length.dtype}")


def linear_chain_crf(input: Variable, label: Variable, param_attr: Any = None,
                     length: Optional[Variable] = None) -> Variable:
    """Negative log-likelihood [num_seqs, 1] of ``label`` under a linear-chain CRF over the
    emission scores ``input`` ([N, D], LoD); creates the ``[D + 2, D]`` transition parameter
    (name it with ``param_attr`` to share it with ``crf_decoding``). Padded form (fluid 1.8):
    with ``length`` (int64 [B]), ``input`` is [B, L, D] and ``label`` [B, L] or [B, L, 1]; only
    the first ``length[b]`` steps of sequence b count (an empty sequence costs 0).

    Args:
        input (Variable): emission scores ``[T, num_tags]`` (LoD) or padded ``[N, T, num_tags]``
            with ``length``.
        label (Variable): int64 gold tags.
        param_attr (ParamAttr | str | None): the transition parameter ``[num_tags + 2,
            num_tags]`` (start, end and tag-to-tag scores).
        length (Variable | None): sequence lengths for padded input.
    Returns:
        Variable: the negative log-likelihood per sequence ``[N, 1]``.
    Raises:
        TypeError: ``input`` or ``label`` is not a Variable, or ``length`` is not an int64
            Variable.
        ValueError: ``input`` is not [N, D] (LoD form) or [B, L, D] (with ``length``) with a
            known D.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     emission = fluid.data("emission", [-1, 3], lod_level=1)
        ...     label = fluid.data("label", [-1, 1], "int64", lod_level=1)
        ...     nll = fluid.layers.linear_chain_crf(emission, label, param_attr=fluid.ParamAttr(name="crfw"))
        ...     path = fluid.layers.crf_decoding(emission, param_attr=fluid.ParamAttr(name="crfw"))
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> place = fluid.CPUPlace()
        >>> e = fluid.create_lod_tensor(np.eye(3, dtype="float32") * 5, [[3]], place)
        >>> y = fluid.create_lod_tensor(np.array([[0], [1], [2]], "int64"), [[3]], place)
        >>> cost, best = exe.run(main, feed={"emission": e, "label": y}, fetch_list=[nll, path])
        >>> cost.shape, best.ravel()
        ((1, 1), array([0, 1, 2]))
    """
    if not isinstance(input, Variable) or not isinstance(label, Variable):
        raise TypeError("linear_chain_crf: input and label must be Variables")
    _check_length(length, "linear_chain_crf")
    rank = 2 if length is None else 3
    if len(input.shape) != rank or input.shape[-1] < 1:
        form = "[N, D] (LoD input)" if length is None else "[B, L, D] (padded, with length)"
        raise ValueError(f"linear_chain_crf: input must be {form} with a known D, got "
                         f"{list(input.shape)}")
    helper = LayerHelper("linear_chain_crf", param_attr=param_attr)
    size = input.shape[-1]
    transition = helper.create_parameter(attr=helper.param_attr, shape=[size + 2, size],
                                         dtype=input.dtype)
    outs = {k: helper.create_variable_for_type_inference(input.dtype)
            for k in ("Alpha", "EmissionExps", "TransitionExps", "LogLikelihood")}
    inputs = {"Emission": input, "Transition": transition, "Label": label}
    if length is not None:
        inputs["Length"] = length
    helper.append_op(type="linear_chain_crf", inputs=inputs, outputs=outs)
    return outs["LogLikelihood"]


def crf_decoding(input: Variable, param_attr: Any, label: Optional[Variable] = None,
                 length: Optional[Variable] = None) -> Variable:
    """The Viterbi tags ([N, 1] int64) with the transition parameter named by
    ``param_attr`` (the one ``linear_chain_crf`` created); with ``label``, 1 where they
    agree. With ``length`` (int64 [B]) the input is padded [B, L, D] and the result [B, L],
    0 past each length.

    Args:
        input (Variable): emission scores, as for ``linear_chain_crf``.
        param_attr (ParamAttr | str): the transition parameter (the CRF's, by name).
        label (Variable | None): with gold tags, returns 1 where the decoded tag is right.
        length (Variable | None): sequence lengths for padded input.
    Returns:
        Variable: int64 best tag path (Viterbi).
    Raises:
        TypeError: ``length`` is not an int64 Variable.
        ValueError: ``length`` is given but ``input`` is not 3-D, or no parameter named by
            ``param_attr`` exists in the program (build ``linear_chain_crf`` first).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     emission = fluid.data("emission", [-1, 3], lod_level=1)
        ...     label = fluid.data("label", [-1, 1], "int64", lod_level=1)
        ...     _ = fluid.layers.linear_chain_crf(emission, label, param_attr=fluid.ParamAttr(name="crfw"))
        ...     path = fluid.layers.crf_decoding(emission, param_attr=fluid.ParamAttr(name="crfw"))
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> place = fluid.CPUPlace()
        >>> e = fluid.create_lod_tensor(np.array([[5, 0, 0], [0, 0, 5], [0, 5, 0]], "float32"), [[3]], place)
        >>> y = fluid.create_lod_tensor(np.zeros((3, 1), "int64"), [[3]], place)
        >>> # best tags
        >>> exe.run(main, feed={"emission": e, "label": y}, fetch_list=[path])[0].ravel()
        array([0, 2, 1])
    """
    _check_length(length, "crf_decoding")
    if length is not None and len(input.shape) != 3:
        raise ValueError(f"crf_decoding: with length, input must be padded [B, L, D], got "
                         f"{list(input.shape)}")
    name = param_attr.name if isinstance(param_attr, ParamAttr) else param_attr
    helper = LayerHelper("crf_decoding")
    transition = helper.get_parameter(name)
    path = helper.create_variable_for_type_inference(VarType.INT64, stop_gradient=True)
    inputs = {"Emission": input, "Transition": transition}
    if label is not None:
        inputs["Label"] = label
    if length is not None:
        inputs["Length"] = length
    helper.append_op(type="crf_decoding", inputs=inputs, outputs={"ViterbiPath": path})
    return path
