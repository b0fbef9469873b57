"""File formats: fluidlite's JSON programs (``serialize``), Paddle's ProgramDesc protobuf and
LoDTensor files (``paddle``) and all-or-nothing checkpoint directories (``checkpoint``).

Importing this package registers the codecs behind ``Program.to_dict`` / ``from_dict`` /
``parse_from_string`` / ``desc`` with the IR (``core.ir.provide``): the IR itself knows no
file format.
"""
from . import checkpoint, paddle, serialize  # noqa: F401  (serialize registers the codecs)
