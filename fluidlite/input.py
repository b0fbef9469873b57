"""``fluid.one_hot`` and ``fluid.embedding`` (fluid 1.8's ``fluid/input.py``): the v2 forms of
``fluid.layers.one_hot`` / ``fluid.layers.embedding``, on ops ``one_hot_v2`` and
``lookup_table_v2`` — ids of any shape, no trailing-1 dimension (ids ``[N, 1]`` give
``[N, 1, D]``)."""
from __future__ import annotations

from typing import Any, Optional, Sequence, Union

from .core.atomic import atomic_layer
from .core.ir import Variable
from .layers.embedding import lookup as _lookup
from .layers.nn import _one_hot

__all__ = ["one_hot", "embedding"]


@atomic_layer
def one_hot(input: Variable, depth: Union[int, Variable],
            allow_out_of_range: bool = False) -> Variable:
    """Out[..., j] = 1.0 if input[...] == j else 0.0; Out has input's shape + [depth]
    (float32, no gradient). An index outside [0, depth) is an error unless
    ``allow_out_of_range`` (then its row is all zeros).

    Args:
        input (Variable): int32/int64 indices of any shape.
        depth (int | Variable): the number of classes (>= 1), or a [1] int Variable holding it.
        allow_out_of_range (bool, default False): map an index outside [0, depth) to a row of
            zeros instead of raising at run time.
    Returns:
        Variable: float32, shape ``input.shape + [depth]``, with no gradient.
    Raises:
        TypeError: ``input`` is not an int32/int64 Variable, or ``depth`` is not an int or
            Variable.
        ValueError: ``depth < 1``; at run time, an index is out of range without
            ``allow_out_of_range``.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     ids = fluid.data("ids", [-1], "int64")
        ...     oh = fluid.one_hot(ids, depth=3)            # 2.0 form: no trailing 1 dim needed
        >>> fluid.Executor(fluid.CPUPlace()).run(main, feed={"ids": np.array([2, 0], "int64")},
        ...                                      fetch_list=[oh])[0]
        array([[0., 0., 1.],
               [1., 0., 0.]], dtype=float32)
    """
    return _one_hot("one_hot_v2", input, depth, allow_out_of_range)


@atomic_layer
def embedding(input: Variable, size: Sequence[int], is_sparse: bool = False,
              is_distributed: bool = False, padding_idx: Optional[int] = None,
              param_attr: Any = None, dtype: Any = "float32") -> Variable:
    """Out = W[input] with W a ``size = [vocab_size, emb_dim]`` parameter; Out has input's shape
    + [emb_dim]. ``padding_idx`` rows are zero and get no gradient (negative counts from the
    end); the gradient is dense (``is_sparse`` is accepted).

    Args:
        input (Variable): int64 ids of any shape.
        size (list | tuple of int): ``[vocab_size, emb_dim]``, both positive.
        is_sparse (bool, default False): accepted for fluid's signature; the gradient is dense.
        is_distributed (bool, default False): accepted for fluid's signature (one process).
        padding_idx (int | None): the id whose row is zero and gets no gradient, in
            ``[-vocab_size, vocab_size)`` (negative counts from the end); None: no padding.
        param_attr (ParamAttr | str | None): the table's attribute.
        dtype (str, default "float32"): the table's dtype (float16/32/64).
    Returns:
        Variable: ``input.shape + [emb_dim]``, dtype ``dtype``.
    Raises:
        TypeError: ``input`` is not a Variable of int64 ids, ``size`` is not two ints, or
            ``dtype`` is not a float type.
        ValueError: ``size`` holds a non-positive value, or ``padding_idx`` is out of range.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     ids = fluid.data("ids", [-1, 2], "int64")
        ...     emb = fluid.embedding(ids, size=[10, 4])     # 2.0 form: any id shape
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> exe.run(main, feed={"ids": np.array([[1, 2]], "int64")}, fetch_list=[emb])[0].shape
        (1, 2, 4)
    """
    return _lookup(input, size, is_sparse, is_distributed, padding_idx, param_attr, dtype,
                   v2=True)
