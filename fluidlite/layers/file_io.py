"""``fluid.layers.load``: a ``load`` op filling a Variable from a tensor file at run time."""
from __future__ import annotations

from typing import Optional

from ..core.ir import Variable
from ..layer_helper import LayerHelper

__all__ = ["load"]


def load(out: Variable, file_path: str, load_as_fp16: Optional[bool] = None) -> None:
    """Append a ``load`` op writing the tensor stored in ``file_path`` (Paddle's LoDTensor
    stream layout, as ``fluid.io.save_vars`` writes one variable) into ``out`` when the program
    runs; with ``load_as_fp16`` the values are converted to float16.

    Args:
        out (Variable): the variable the loaded tensor is written into.
        file_path (str): the file to read (written by ``fluid.io.save_vars`` / the ``save``
            op).
        load_as_fp16 (bool | None, default None): convert the values to float16.
    Returns:
        None: the ``load`` op is appended to the current program.
    Raises:
        TypeError: ``out`` is not a Variable, or ``file_path`` is not a non-empty str.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> import os, tempfile
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     w = fluid.layers.create_parameter([2], "float32", name="w",
        ...                                       default_initializer=fluid.initializer.Constant(4.0))
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> path = tempfile.mkdtemp()
        >>> fluid.io.save_vars(exe, path, main_program=main, vars=[w])
        >>> loader = fluid.Program()
        >>> with fluid.program_guard(loader):
        ...     out = loader.global_block().create_var(name="w", shape=[2], dtype="float32",
        ...                                            persistable=True)
        ...     fluid.layers.load(out, os.path.join(path, "w"))
        >>> scope = fluid.Scope()
        >>> with fluid.scope_guard(scope):
        ...     _ = exe.run(loader)
        ...     print(np.array(scope.find_var("w").get_tensor()))
        [4. 4.]
    """
    if not isinstance(out, Variable):
        raise TypeError(f"load: out must be a Variable, but received {type(out).__name__}")
    if not isinstance(file_path, str) or not file_path:
        raise TypeError(f"load: file_path must be a non-empty str, but received {file_path!r}")
    attrs = {"file_path": file_path}
    if load_as_fp16 is not None:
        attrs["load_as_fp16"] = bool(load_as_fp16)
    LayerHelper("load").append_op(type="load", inputs={}, outputs={"Out": [out]}, attrs=attrs)
