"""Sampled losses: ``fluid.layers.nce`` and ``sampled_softmax_with_cross_entropy`` (fluid 1.8)."""
from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np

from ..core.ir import Variable
from ..pipeline.feeder import check_variable_and_dtype
from ..layer_helper import LayerHelper, check_int
from .tensor import assign

__all__ = ["nce", "sampled_softmax_with_cross_entropy"]

_SAMPLERS = {"uniform": 0, "log_uniform": 1, "custom_dist": 2}


def nce(input: Variable, label: Variable, num_total_classes: int,
        sample_weight: Optional[Variable] = None, param_attr: Any = None, bias_attr: Any = None,
        num_neg_samples: Optional[int] = None, name: Optional[str] = None,
        sampler: str = "uniform", custom_dist: Optional[Sequence[float]] = None, seed: int = 0,
        is_sparse: bool = False) -> Variable:
    """Noise-contrastive estimation cost [N, 1] (op ``nce``; weights ``[num_total_classes, D]``,
    bias ``[num_total_classes, 1]``); ``sampler`` is 'uniform', 'log_uniform' or
    'custom_dist' (``custom_dist``: one probability per class).

    Args:
        input (Variable): float32/float64 features [N, D].
        label (Variable): int64 true classes [N, num_true].
        num_total_classes (int): the number of classes (>= 2).
        sample_weight (Variable | None, default None): [N, 1] per-sample weights.
        param_attr (ParamAttr | None, default None): attribute of the weights.
        bias_attr (ParamAttr | bool | None, default None): attribute of the bias; False: no
            bias.
        num_neg_samples (int | None, default None): negatives per sample (>= 1; None: 10).
        name (str | None, default None): name prefix of the parameters.
        sampler (str, default "uniform"): ``"uniform"``, ``"log_uniform"`` or
            ``"custom_dist"``.
        custom_dist (list of float | None, default None): with ``"custom_dist"``, one
            probability per class.
        seed (int, default 0): the sampler's seed (>= 0).
        is_sparse (bool, default False): make the weight gradient sparse (SelectedRows).
    Returns:
        Variable: [N, 1] costs, dtype of ``input``.
    Raises:
        TypeError: ``input`` or ``label`` is not a Variable, or an int argument is not an int.
        ValueError: ``num_total_classes`` < 2, ``num_neg_samples`` < 1, ``seed`` < 0, an
            unknown ``sampler``, ``custom_dist`` given without ``"custom_dist"`` (or missing
            with it), or ``custom_dist`` not ``num_total_classes`` non-negative values.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 4])
        ...     label = fluid.data("label", [-1, 1], "int64")
        ...     loss = fluid.layers.nce(x, label, num_total_classes=10, num_neg_samples=3, seed=1)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> exe.run(main, feed={"x": np.ones((2, 4), "float32"), "label": np.array([[1], [5]], "int64")},
        ...         fetch_list=[loss])[0].shape
        (2, 1)
    """
    if not isinstance(input, Variable) or not isinstance(label, Variable):
        raise TypeError("nce: input and label must be Variables")
    check_variable_and_dtype(input, "input", ["float32", "float64"], "nce")   # fluid 1.8's
    check_variable_and_dtype(label, "label", ["int64"], "nce")
    num_total_classes = check_int(num_total_classes, "num_total_classes", "nce", minimum=2)
    num_neg_samples = 10 if num_neg_samples is None else \
        check_int(num_neg_samples, "num_neg_samples", "nce", minimum=1)
    seed = check_int(seed, "seed", "nce", minimum=0)
    if sampler not in _SAMPLERS:
        raise ValueError(f"nce: sampler must be one of {sorted(_SAMPLERS)}, but received "
                         f"{sampler!r}")
    if (sampler == "custom_dist") != (custom_dist is not None):
        raise ValueError("nce: custom_dist must be given exactly when sampler='custom_dist'")
    probs = None
    if custom_dist is not None:
        probs = np.asarray(custom_dist, np.float32).reshape(-1)
        if probs.size != num_total_classes or (probs < 0).any() or not probs.sum() > 0:
            raise ValueError(f"nce: custom_dist must hold {num_total_classes} non-negative "
                             f"probabilities (one per class), but received {probs.size} values")
    helper = LayerHelper("nce", input=input, param_attr=param_attr, bias_attr=bias_attr,
                         name=name)
    dtype = helper.input_dtype()
    w = helper.create_parameter(attr=helper.param_attr,
                                shape=[num_total_classes, input.shape[-1]], dtype=dtype)
    inputs = {"Input": input, "Label": label, "Weight": w}
    if helper.bias_attr is not False:
        inputs["Bias"] = helper.create_parameter(attr=helper.bias_attr,
                                                 shape=[num_total_classes, 1], dtype=dtype,
                                                 is_bias=True)
    if sample_weight is not None:
        inputs["SampleWeight"] = sample_weight
    if probs is not None:
        dist = assign(probs)
        dist.stop_gradient = True
        inputs["CustomDistProbs"] = dist
    cost = helper.create_variable_for_type_inference(dtype)
    logits = helper.create_variable_for_type_inference(dtype, stop_gradient=True)
    labels = helper.create_variable_for_type_inference("int64", stop_gradient=True)
    helper.append_op(type="nce", inputs=inputs,
                     outputs={"Cost": cost, "SampleLogits": logits, "SampleLabels": labels},
                     attrs={"num_total_classes": num_total_classes,
                            "num_neg_samples": num_neg_samples, "sampler": _SAMPLERS[sampler],
                            "seed": seed, "is_sparse": bool(is_sparse)})
    return cost


def sampled_softmax_with_cross_entropy(logits: Variable, label: Variable, num_samples: int,
                                       num_true: int = 1, remove_accidental_hits: bool = True,
                                       use_customized_samples: bool = False,
                                       customized_samples: Optional[Variable] = None,
                                       customized_probabilities: Optional[Variable] = None,
                                       seed: int = 0) -> Variable:
    """Softmax cross-entropy over each row's true labels and ``num_samples`` log-uniform
    negatives (op ``sample_logits``, then ``softmax_with_cross_entropy`` on the sampled logits,
    as fluid 1.8); returns the loss [N, 1].

    Args:
        logits (Variable): float32/float64 [N, K] unscaled logits.
        label (Variable): int64 [N, num_true] true classes.
        num_samples (int): the number of sampled negatives (>= 1).
        num_true (int, default 1): the true classes per sample (only 1 is supported).
        remove_accidental_hits (bool, default True): mask sampled negatives equal to a true
            class.
        use_customized_samples (bool, default False): use ``customized_samples`` /
            ``customized_probabilities`` instead of sampling.
        customized_samples (Variable | None, default None): int64 [N, num_true + num_samples].
        customized_probabilities (Variable | None, default None): their sampling
            probabilities, same shape.
        seed (int, default 0): the sampler's seed (>= 0).
    Returns:
        Variable: [N, 1] losses, dtype of ``logits``.
    Raises:
        TypeError: ``logits`` or ``label`` is not a Variable, or an int argument is not an int.
        ValueError: ``num_samples`` or ``num_true`` is below 1, ``seed`` is negative,
            ``use_customized_samples`` lacks the customized inputs, or ``num_true`` > 1.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     logits = fluid.data("logits", [-1, 10])
        ...     label = fluid.data("label", [-1, 1], "int64")
        ...     loss = fluid.layers.sampled_softmax_with_cross_entropy(logits, label, num_samples=4, seed=1)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> exe.run(main, feed={"logits": np.zeros((2, 10), "float32"), "label": np.array([[1], [5]], "int64")},
        ...         fetch_list=[loss])[0].shape
        (2, 1)
    """
    from .loss import softmax_with_cross_entropy
    if not isinstance(logits, Variable) or not isinstance(label, Variable):
        raise TypeError("sampled_softmax_with_cross_entropy: logits and label must be Variables")
    api = "sampled_softmax_with_cross_entropy"
    num_samples = check_int(num_samples, "num_samples", api, minimum=1)
    num_true = check_int(num_true, "num_true", api, minimum=1)
    seed = check_int(seed, "seed", api, minimum=0)
    if use_customized_samples and (customized_samples is None
                                   or customized_probabilities is None):
        raise ValueError(f"{api}: use_customized_samples=True needs customized_samples and "
                         f"customized_probabilities")
    helper = LayerHelper("sample_logits")
    inputs = {"Logits": logits, "Labels": label}
    if use_customized_samples:
        inputs.update(CustomizedSamples=customized_samples,
                      CustomizedProbabilities=customized_probabilities)
    samples = helper.create_variable_for_type_inference("int64", stop_gradient=True)
    probs = helper.create_variable_for_type_inference(logits.dtype, stop_gradient=True)
    sampled_logits = helper.create_variable_for_type_inference(logits.dtype)
    sampled_label = helper.create_variable_for_type_inference("int64", stop_gradient=True)
    logits_dim = helper.create_variable_for_type_inference("int64", stop_gradient=True)
    labels_dim = helper.create_variable_for_type_inference("int64", stop_gradient=True)
    helper.append_op(type="sample_logits", inputs=inputs,
                     outputs={"Samples": samples, "Probabilities": probs,
                              "SampledLogits": sampled_logits, "SampledLabels": sampled_label,
                              "LogitsDim": logits_dim, "LabelsDim": labels_dim},
                     attrs={"num_samples": num_samples, "seed": seed, "uniq": True,
                            "remove_accidental_hits": bool(remove_accidental_hits),
                            "use_customized_samples": bool(use_customized_samples)})
    if num_true == 1:
        return softmax_with_cross_entropy(sampled_logits, sampled_label)
    raise ValueError(f"{api}: num_true > 1 needs soft labels over the true columns, which "
                     f"fluid 1.8's layer did not support either; use num_true=1")
