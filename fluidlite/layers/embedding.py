"""``embedding``: a lookup table parameter ``[vocab, dim]`` (``fluid.embedding``, the v2 form,
is in ``fluidlite/input.py``)."""
from __future__ import annotations

from typing import Any, Optional, Sequence

from ..core.dtypes import VarType, convert_np_dtype_to_dtype_, is_float
from ..core.ir import Variable
from ..layer_helper import LayerHelper, check_int, is_int

__all__ = ["embedding"]


def embedding(input: Variable, size: Sequence[int], is_sparse: bool = False,
              is_distributed: bool = False, padding_idx: Optional[int] = None,
              param_attr: Any = None, dtype: Any = "float32") -> Variable:
    """``fluid.layers.embedding``: see ``lookup``; op ``lookup_table`` for ids whose last dim
    is 1, ``lookup_table_v2`` otherwise.

    Args:
        input (Variable): int64 ids; fluid 1.x's form has a last dim of 1 (``[N, 1]`` or
            ``[N, T, 1]``).
        size (list of 2 ints): ``[vocab_size, emb_dim]``, the table's shape.
        is_sparse (bool, default False): fluid's sparse-gradient switch (see ``lookup`` for
            what fluidlite does with it).
        is_distributed (bool, default False): accepted for fluid's signature.
        padding_idx (int | None): this id (negative counts from ``vocab_size``) looks up zeros
            and gets no gradient.
        param_attr (ParamAttr | str | None): the table's attribute.
        dtype (str, default "float32"): the table's dtype.
    Returns:
        Variable: the ids' shape with the last dim 1 replaced by ``emb_dim``.
    Raises:
        TypeError: ``input`` is not an int64 Variable, ``size`` is not two ints, ``dtype`` is not
            a float type, or ``padding_idx`` is not an int.
        ValueError: ``size`` has a non-positive entry, or ``padding_idx`` is outside
            [-vocab_size, vocab_size).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     ids = fluid.data("ids", [-1, 1], "int64")
        ...     emb = fluid.layers.embedding(ids, size=[10, 4], padding_idx=0)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> out, = exe.run(main, feed={"ids": np.array([[3], [0]], "int64")}, fetch_list=[emb])
        >>> out.shape, out[1]                    # the padding id looks up zeros
        ((2, 4), array([0., 0., 0., 0.], dtype=float32))
    """
    return lookup(input, size, is_sparse, is_distributed, padding_idx, param_attr, dtype)


def lookup(input: Variable, size: Sequence[int], is_sparse: bool = False,
           is_distributed: bool = False, padding_idx: Optional[int] = None,
           param_attr: Any = None, dtype: Any = "float32", v2: bool = False) -> Variable:
    """Look up rows of ``W`` (``size = [vocab_size, emb_dim]``, default Xavier init).

    Ids whose last dim is 1 (fluid.layers.embedding's form) use op ``lookup_table`` and give
    ``ids.shape[:-1] + [emb_dim]``; other id shapes (fluid.embedding's form) use
    ``lookup_table_v2`` and give ``ids.shape + [emb_dim]``. ``padding_idx`` rows (negative
    values count from the end) output zeros and get no gradient. ``is_sparse`` is accepted; the
    gradient is dense.
    """
    if not isinstance(input, Variable):
        raise TypeError(f"embedding: input must be a Variable of int64 ids, got "
                        f"{type(input).__name__}")
    if input.dtype not in (VarType.INT64, VarType.INT32):
        raise TypeError(f"embedding: input '{input.name}' must hold int64 ids, got "
                        f"{input.dtype.name.lower() if input.dtype is not None else None}; "
                        f"declare it with dtype='int64'")
    if not isinstance(size, (list, tuple)) or not all(is_int(s) for s in size):
        raise TypeError(f"embedding: size must be [vocab_size, emb_dim] (two ints), but "
                        f"received {size!r}")
    size = [int(s) for s in size]
    if len(size) != 2 or min(size) <= 0:
        raise ValueError(f"embedding: size must be two positive ints [vocab_size, emb_dim], got "
                         f"{size}")
    dtype = convert_np_dtype_to_dtype_(dtype)
    if not is_float(dtype):
        raise TypeError(f"embedding: dtype must be float16/32/64, got {dtype.name.lower()}")
    if padding_idx is None:
        padding_idx = -1
    elif not -size[0] <= check_int(padding_idx, "padding_idx", "embedding") < size[0]:
        raise ValueError(f"embedding: padding_idx must be in [{-size[0]}, {size[0]}), got "
                         f"{padding_idx}")
    elif padding_idx < 0:
        padding_idx = int(padding_idx) + size[0]
    else:
        padding_idx = int(padding_idx)
    helper = LayerHelper("embedding", param_attr=param_attr)
    w = helper.create_parameter(attr=helper.param_attr, shape=size, dtype=dtype)
    out = helper.create_variable_for_type_inference(dtype)
    op_type = "lookup_table" if not v2 and input.shape and input.shape[-1] == 1 \
        else "lookup_table_v2"
    remote_prefetch = bool(is_sparse) and not is_distributed
    helper.append_op(type=op_type, inputs={"Ids": input, "W": w}, outputs={"Out": out},
                     attrs={"is_sparse": bool(is_sparse), "is_distributed": bool(is_distributed),
                            "remote_prefetch": remote_prefetch, "padding_idx": padding_idx})
    return out
