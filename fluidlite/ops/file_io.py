"""``load``: read one tensor from a file in Paddle's LoDTensor stream layout (what
``fluid.io.save_vars`` / ``save_persistables`` write per variable) each time the op runs."""
from __future__ import annotations

import numpy as np

from ..formats.paddle import tensor as _tensor
from ..core.registry import OpDef, register


@register
class Load(OpDef):
    """Out = the tensor stored at ``file_path`` (float16 when ``load_as_fp16``); the file is
    read on every run, so a file rewritten between runs is picked up."""
    type, inputs, outputs = "load", (), ("Out",)
    no_grad = True
    extra_attrs = {"model_from_memory": False}

    def infer(self, *, file_path="", load_as_fp16=False):
        if not file_path:
            raise ValueError("load: file_path is empty; pass the path of a tensor file written "
                             "by fluid.io.save_vars / save_persistables")
        return {}

    def forward(self, *, file_path="", load_as_fp16=False):
        try:
            with open(file_path, "rb") as f:
                data = f.read()
        except OSError as e:
            raise ValueError(f"load: cannot read the tensor file {file_path!r}: "
                             f"{e.strerror}") from None
        array, _, _ = _tensor.read_tensor(data, 0, file_path, "Out")
        array = np.array(array)                 # own the memory, not the file buffer
        return {"Out": array.astype(np.float16) if load_as_fp16 else array}
