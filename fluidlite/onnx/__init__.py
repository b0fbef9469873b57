"""ONNX export of a fluidlite inference program: ``fluidlite.onnx.export``.

``export(program, path, feed_names, fetch_names, opset_version=17)`` translates the ops that
compute ``fetch_names`` from ``feed_names`` (feed/fetch ops and everything else not needed are
left out) into an ONNX graph whose initializers are the persistable values in ``scope`` (the
global scope by default). Dims that are ``-1`` in the program (the batch dim) stay symbolic, so
the model accepts any batch size. The graph has inference semantics: ``batch_norm`` uses its
moving statistics and ``dropout`` is its test-mode form (``downgrade_in_infer`` scales by
``1 - p``, ``upscale_in_train`` is the identity), whatever the ops' ``is_test`` attrs say.

Before anything is written every needed op is checked: a program with ops that cannot be
exported raises ``OnnxExportError`` listing all of them (type and output), and no file is
created. The model passes ``onnx.checker`` before it is written (atomically, through
``formats/checkpoint.write_file``). Needs the ``onnx`` extra: ``pip install fluidlite[onnx]``.

Control flow (``fluidlite/onnx/control.py``): ``cond`` / ``case`` / ``switch_case`` / ``Switch``
become ``If`` (nested blocks nested subgraphs), ``while`` / ``while_loop`` become ``Loop``;
variables a program writes more than once are renamed (ONNX values are single-assignment);
tensor arrays become ONNX sequences (``StaticRNN`` exports). LoD arrays (``DynamicRNN``) and
``IfElse`` are refused.

Layout: ``common`` (the converter registry, the conversion context, shared helpers), the
converters in ``basic`` (the basic op set), ``more`` (fluid 1.8's wider set) and ``control``
(sub-blocks, tensor arrays), and ``exporter`` (the pipeline: ``to_model`` / ``export``). This
module only re-exports the public API.

Numerics: fluid's ``elementwise_*`` ``axis`` broadcasting becomes an explicit ``Unsqueeze`` of
Y; ``mul`` flattens with ``Flatten`` and restores the leading dims; ``lookup_table`` with
``padding_idx`` multiplies by a mask (rows equal to the padding id are zeros, as in fluid).
"""
from __future__ import annotations

from .common import ONNX_INSTALL_HINT, OnnxExportError, supported_ops
# to_model is public (callers import it) but has never been in __all__
from .exporter import export, to_model  # noqa: F401

__all__ = ["export", "OnnxExportError", "supported_ops", "ONNX_INSTALL_HINT"]
