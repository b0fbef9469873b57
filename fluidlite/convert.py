"""Format conversion behind ``fluidlite convert`` and ``fluidlite export-onnx`` (issue 18).

``convert(src, dst, to)`` rewrites a saved model in the other format without running it:

* ``src`` an inference-model directory (``__model__`` or one ``*.pdmodel``; parameters one
  file each, or one combined ``__params__`` / ``*.pdiparams`` file) or a Paddle 2.x path
  prefix (``<prefix>.pdmodel`` + ``<prefix>.pdiparams``): ``dst`` becomes a directory with
  ``__model__`` and the parameters laid out as in ``src`` (combined stays combined, as
  ``__params__``), in format ``to``;
* ``src`` a single program file (e.g. a ``fluid.save`` ``.pdmodel``): ``dst`` is that program
  in format ``to``.

``to`` is ``"paddle"`` (ProgramDesc protobuf, LoDTensor streams) or ``"json"`` (fluidlite's
versioned JSON program, ``.npy`` / ``.npz`` tensors). Values are copied bit for bit; the
written files go through the same all-or-nothing publish as every save.
"""
from __future__ import annotations

import os
from typing import Any, List, Optional, Tuple

from . import io as fio
from .formats import checkpoint
from .core import scope as scope_mod

__all__ = ["convert", "load_model_dir", "export_onnx"]


def _layout(src: str) -> Tuple[str, str, Optional[str]]:
    """(directory, program file, combined params file or None) of a saved inference model."""
    if not os.path.isdir(src) and os.path.isfile(src + ".pdmodel"):
        directory, prefix = os.path.split(src)
        directory = directory or "."
        params = prefix + ".pdiparams"
        return directory, prefix + ".pdmodel", \
            params if os.path.isfile(os.path.join(directory, params)) else None
    if not os.path.isdir(src):
        raise FileNotFoundError(f"'{src}' is neither a model directory nor a Paddle path "
                                f"prefix (<prefix>.pdmodel)")
    with checkpoint.Reader(src) as reader:
        names = reader.names()
    if "__model__" in names:
        model = "__model__"
    else:
        models = sorted(n for n in names if n.endswith(".pdmodel"))
        if len(models) != 1:
            raise FileNotFoundError(f"directory '{src}' holds no __model__ file"
                                    + (f" and several .pdmodel files {models}" if models
                                       else ""))
        model = models[0]
    combined = [n for n in ("__params__", model[:-len(".pdmodel")] + ".pdiparams")
                if n in names]
    return src, model, combined[0] if combined else None


def load_model_dir(src: str, scope: Any) -> Tuple[Any, List[str], List[Any], Optional[str]]:
    """``load_inference_model`` for any saved layout (see ``_layout``), into ``scope``:
    (program, feed names, fetch Variables, combined params file name or None)."""
    directory, model, params = _layout(src)
    exe = None
    with scope_mod.scope_guard(scope):
        program, feeds, fetches = fio.load_inference_model(directory, exe, model_filename=model,
                                                           params_filename=params)
    return program, feeds, fetches, params


def convert(src: str, dst: str, to: str) -> str:
    """Write the model (or program file) ``src`` to ``dst`` in format ``to``; returns what
    was written ("model" or "program")."""
    fio.files._check_format(to)
    if os.path.isfile(src) and not os.path.isfile(src + ".pdmodel"):
        program = fio.read_program(src)
        checkpoint.write_file(dst, fio.files._program_bytes(program, to))
        return "program"
    scope = scope_mod.Scope()
    program, _, _, params = load_model_dir(src, scope)
    arrays = {v.name: fio.files._value(scope, v.name)
              for v in fio.files._select(program, None, fio.is_persistable)}
    files = fio.variables._var_files(dst, arrays, "__params__" if params else None, to)[1] \
        if arrays else {}
    files["__model__"] = fio.files._program_bytes(program, to)
    fio.variables._publish(dst, files)
    return "model"


def export_onnx(src: str, out: str, opset_version: int = 17) -> Any:
    """Export the saved inference model ``src`` to the ONNX file ``out``."""
    from .onnx import export
    scope = scope_mod.Scope()
    program, feeds, fetches, _ = load_model_dir(src, scope)
    return export(program, out, feeds, [v.name for v in fetches], opset_version=opset_version,
                  scope=scope)
