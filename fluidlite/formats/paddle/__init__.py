"""PaddlePaddle's own file formats: the ``ProgramDesc`` protobuf (``__model__``, ``*.pdmodel``)
and the LoDTensor stream (per-variable files, combined ``__params__`` / ``*.pdiparams``).

``fluidlite.io`` (and ``Program.parse_from_string``) reads both automatically and writes them
by default; see ``docs/file_formats.md`` for the byte layouts.
"""
from .proto import ProtobufMissing, messages
from .program import (PaddleFormatError, is_json_program, program_from_bytes,
                      program_to_bytes)
from .tensor import (combined_to_bytes, is_foreign, looks_like_tensor, read_combined,
                     read_tensor, shape_problem, tensor_to_bytes)

__all__ = ["PaddleFormatError", "ProtobufMissing", "messages", "program_to_bytes",
           "program_from_bytes", "is_json_program", "tensor_to_bytes", "combined_to_bytes",
           "read_tensor", "read_combined", "looks_like_tensor", "is_foreign",
           "shape_problem"]
