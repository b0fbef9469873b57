"""The fused op types the inference passes create: ``fc`` and ``conv2d_fusion``.

They are Paddle's names for the same fusions (``fc_fuse_pass`` makes ``fc``,
``conv_elementwise_add_act_fuse_pass`` makes ``conv2d_fusion``), so a program optimised here
and saved still names ops Paddle Inference knows. The kernels reuse the registered ``mul`` and
``conv2d`` kernels and add the bias and activation in place on the fresh product, which is
what the fusion saves: one temporary and one pass over memory per fused op.

Inference-only: ``no_grad`` (the passes run on test-mode programs). Registered on import of
``fluidlite.inference``.
"""
from __future__ import annotations

from typing import Any, Dict

import numpy as np

from ..core.registry import OpDef, get_op_def, register

__all__ = ["ACTIVATIONS", "Conv2DFusion"]


def _sigmoid(x: np.ndarray) -> np.ndarray:
    # in place on the fresh product; exp of -x without overflow warnings for large |x|
    with np.errstate(over="ignore"):
        np.negative(x, out=x)
        np.exp(x, out=x)
    x += 1
    np.reciprocal(x, out=x)
    return x


def _relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0, out=x)


def _tanh(x: np.ndarray) -> np.ndarray:
    return np.tanh(x, out=x)


# activation attr value -> in-place kernel ("" / "identity": none)
ACTIVATIONS = {"": None, "identity": None, "relu": _relu, "sigmoid": _sigmoid, "tanh": _tanh}


def _activate(out: np.ndarray, activation: str, op_type: str) -> np.ndarray:
    if activation not in ACTIVATIONS:
        raise ValueError(f"{op_type}: activation '{activation}' is not supported "
                         f"(supported: {sorted(k for k in ACTIVATIONS if k)})")
    fn = ACTIVATIONS[activation]
    return out if fn is None else fn(out)


@register
class Conv2DFusion(OpDef):
    """Output = act(conv2d(Input, Filter) + Bias[channel]) (Paddle's ``conv2d_fusion``;
    ``activation`` identity, relu, sigmoid or tanh; NCHW or NHWC as ``data_format``)."""
    type, inputs, outputs = "conv2d_fusion", ("Input", "Filter", "Bias?"), ("Output",)
    no_grad = True
    extra_attrs = {"use_cudnn": False, "use_mkldnn": False, "workspace_size_MB": 512,
                   "exhaustive_search": False, "split_channels": [], "is_test": True}

    def infer(self, Input: Any, Filter: Any, Bias: Any = None, *, strides: Any = (1, 1),
              paddings: Any = (0, 0), padding_algorithm: str = "EXPLICIT", groups: int = 1,
              dilations: Any = (1, 1), data_format: str = "NCHW",
              activation: str = "identity") -> Dict[str, Any]:
        return get_op_def("conv2d").run_infer(
            [Input, Filter], dict(strides=strides, paddings=paddings,
                                  padding_algorithm=padding_algorithm, groups=groups,
                                  dilations=dilations, data_format=data_format))

    def forward(self, Input: np.ndarray, Filter: np.ndarray, Bias: Any = None, *,
                strides: Any = [1, 1], paddings: Any = [0, 0],
                padding_algorithm: str = "EXPLICIT", groups: int = 1, dilations: Any = [1, 1],
                data_format: str = "NCHW", activation: str = "identity"
                ) -> Dict[str, np.ndarray]:
        out = get_op_def("conv2d").forward(
            Input, Filter, strides=strides, paddings=paddings,
            padding_algorithm=padding_algorithm, groups=groups, dilations=dilations,
            data_format=data_format)["Output"]
        if not out.flags.writeable:
            out = out.copy()
        if Bias is not None:
            last = data_format in ("NHWC", "NDHWC")
            b = Bias.reshape(-1)
            out += b if last else b.reshape(-1, 1, 1)
        return {"Output": _activate(out, activation, self.type)}
