"""``save_dygraph`` / ``load_dygraph`` (fluid 1.8): a layer's ``state_dict`` to ``<path>.pdparams``
and an optimizer's to ``<path>.pdopt``, written all-or-nothing and read back with the same
verified, array-only unpickler as ``fluid.save`` / ``fluid.load`` (``fluidlite/io.py``)."""
from __future__ import annotations

import os
from typing import Any, Dict, Optional, Tuple

import numpy as np

from ..io import program_state as _io, variables as _io_vars
from .tensor import ParamBase, VarBase

__all__ = ["save_dygraph", "load_dygraph"]


def _array(value: Any) -> np.ndarray:
    if isinstance(value, VarBase):
        return np.asarray(value.numpy())
    arr = np.asarray(value)
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"save_dygraph: values must be tensors or numeric arrays, got "
                        f"{type(value).__name__}")
    return arr


def save_dygraph(state_dict: Dict[str, Any], model_path: str) -> None:
    """Write ``state_dict`` to ``model_path + '.pdparams'`` when it holds parameters (a
    ``Layer.state_dict()``), else to ``model_path + '.pdopt'`` (an optimizer's
    ``state_dict()``), as fluid 1.8 decides. The file also maps structured names to parameter
    names (``StructuredToParameterName@@``, as Paddle writes it).

    Args:
        state_dict (dict): a layer's ``state_dict()`` (writes ``model_path.pdparams``) or an
            optimizer's (``.pdopt``).
        model_path (str): the path prefix.
    Returns:
        None: the file is written atomically (all-or-nothing).
    Raises:
        ValueError: ``model_path`` ends with a separator (empty file name).
        TypeError: ``state_dict`` is not a dict.
        OSError: the directory cannot be written.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "linear")
        >>> with fluid.dygraph.guard():
        ...     fc = fluid.dygraph.Linear(2, 2)
        ...     fluid.dygraph.save_dygraph(fc.state_dict(), path)
        ...     params, opt_state = fluid.dygraph.load_dygraph(path)
        ...     fc2 = fluid.dygraph.Linear(2, 2)
        ...     fc2.set_dict(params)
        ...     print(sorted(os.path.basename(f) for f in os.listdir(os.path.dirname(path))
        ...                  if not f.startswith(".")),
        ...           np.array_equal(fc.weight.numpy(), fc2.weight.numpy()), opt_state)
        ['linear.pdparams'] True None
    """
    base = os.path.basename(os.fspath(model_path))
    if base == "":
        raise ValueError("The input model_path MUST be format of dirname/filename [dirname\\"
                         "filename in Windows system], but received filename is empty string.")
    if not isinstance(state_dict, dict):
        raise TypeError(f"save_dygraph: state_dict must be a dict, got "
                        f"{type(state_dict).__name__}")
    is_params = any(isinstance(v, ParamBase) for v in state_dict.values())
    arrays = {k: _array(v) for k, v in state_dict.items()}
    suffix = ".pdparams" if is_params else ".pdopt"
    payload: Dict[str, Any] = dict(arrays)
    if is_params:
        payload["StructuredToParameterName@@"] = {
            k: v.name for k, v in state_dict.items() if isinstance(v, VarBase)}
    import pickle
    data = pickle.dumps({k: np.ascontiguousarray(v) if isinstance(v, np.ndarray) else v
                         for k, v in payload.items()}, protocol=2)
    _io_vars._publish(os.path.dirname(os.fspath(model_path)) or ".", {base + suffix: data})


def load_dygraph(model_path: str, keep_name_table: bool = False
                 ) -> Tuple[Optional[Dict[str, np.ndarray]], Optional[Dict[str, np.ndarray]]]:
    """``(param_dict, opt_dict)`` from ``model_path.pdparams`` / ``.pdopt`` (None for a missing
    file; ``FileNotFoundError`` when neither exists). Values are numpy arrays, ready for
    ``Layer.set_dict`` / ``Optimizer.set_dict``.

    Args:
        model_path (str): the prefix ``save_dygraph`` used.
        keep_name_table (bool, default False): keep the parameter name table in the result.
    Returns:
        tuple: ``(parameters, optimizer_state)``, each a dict of arrays or None when its file
        does not exist.
    Raises:
        FileNotFoundError: neither ``model_path.pdparams`` nor ``model_path.pdopt`` exists.
        CheckpointError: a file exists but is truncated, corrupted or not a fluid checkpoint.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "model")
        >>> with fluid.dygraph.guard():
        ...     fc = fluid.dygraph.Linear(2, 2)
        ...     opt = fluid.optimizer.Adam(0.1, parameter_list=fc.parameters())
        ...     fluid.dygraph.save_dygraph(fc.state_dict(), path)
        ...     params, _ = fluid.dygraph.load_dygraph(path)
        ...     print(sorted(params) == sorted(fc.state_dict()))
        True
    """
    directory, base = _io._split_prefix(os.fspath(model_path))
    params = opt = None
    with _io._reader_if_dir(directory) as reader:
        if reader is not None and reader.exists(base + ".pdparams"):
            params = _io._load_pickled_dict(reader, base + ".pdparams")
        if reader is not None and reader.exists(base + ".pdopt"):
            opt = _io._load_pickled_dict(reader, base + ".pdopt")
    if params is None and opt is None:
        raise FileNotFoundError(f"load_dygraph: neither '{_io._strip_suffix(model_path)}"
                                f".pdparams' nor '.pdopt' exists")
    return params, opt
