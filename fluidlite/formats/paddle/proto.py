"""Protobuf message classes for Paddle's ``ProgramDesc``, built from ``framework.proto``.

The schema is the ``.proto`` file next to this module (fluidlite's own, with Paddle's field
numbers and types). It is turned into a ``FileDescriptorProto`` by the small loader below, which
understands exactly the proto2 subset that file uses (messages, nested messages, enums, labelled
scalar/message/enum fields, ``[default = ...]``), so no ``protoc`` step or generated code is
needed. The wire format itself is handled by the ``protobuf`` package.
"""
from __future__ import annotations

import functools
import os
import re
from typing import Any, Dict, List, Tuple

__all__ = ["messages", "ProtobufMissing", "PROTO_PATH"]

PROTO_PATH = os.path.join(os.path.dirname(__file__), "framework.proto")
_PACKAGE_HINT = "pip install protobuf  (or: pip install fluidlite)"


class ProtobufMissing(ImportError):
    """The ``protobuf`` package, needed for Paddle's program format, is not installed."""


_SCALARS = {"double": 1, "float": 2, "int64": 3, "uint64": 4, "int32": 5, "fixed64": 6,
            "fixed32": 7, "bool": 8, "string": 9, "bytes": 12, "uint32": 13, "sfixed32": 15,
            "sfixed64": 16, "sint32": 17, "sint64": 18}
_LABELS = {"optional": 1, "required": 2, "repeated": 3}
_TOKEN = re.compile(r'\s+|//[^\n]*|"[^"]*"|-?\d+|[A-Za-z_][\w.]*|[{}\[\];=]')


def _tokens(text: str) -> List[str]:
    out, pos = [], 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise ValueError(f"framework.proto: unexpected character at offset {pos}")
        tok = m.group()
        pos = m.end()
        if not tok.isspace() and not tok.startswith("//"):
            out.append(tok)
    return out


def _parse(text: str) -> Any:
    """``FileDescriptorProto`` of the proto2 subset used by ``framework.proto``."""
    from google.protobuf import descriptor_pb2
    toks = _tokens(text)
    pos = 0

    def take(expected: str = "") -> str:
        nonlocal pos
        tok = toks[pos]
        if expected and tok != expected:
            raise ValueError(f"framework.proto: expected {expected!r}, got {tok!r}")
        pos += 1
        return tok

    fdp = descriptor_pb2.FileDescriptorProto(name="fluidlite_paddle_framework.proto",
                                             syntax="proto2")
    unresolved: List[Tuple[Any, str, str]] = []     # (field, type name, scope)
    kinds: Dict[str, str] = {}                       # full name -> "message" | "enum"

    def enum(container: Any, scope: str) -> None:
        e = container.add(name=take())
        kinds[f"{scope}.{e.name}"] = "enum"
        take("{")
        while toks[pos] != "}":
            name = take()
            take("=")
            e.value.add(name=name, number=int(take()))
            take(";")
        take("}")

    def message(container: Any, scope: str) -> None:
        m = container.add(name=take())
        full = f"{scope}.{m.name}"
        kinds[full] = "message"
        take("{")
        while toks[pos] != "}":
            tok = take()
            if tok == "message":
                message(m.nested_type, full)
            elif tok == "enum":
                enum(m.enum_type, full)
            else:
                f = m.field.add(label=_LABELS[tok])
                type_name = take()
                f.name = take()
                take("=")
                f.number = int(take())
                if toks[pos] == "[":
                    take("[")
                    take("default")
                    take("=")
                    f.default_value = take()
                    take("]")
                take(";")
                if type_name in _SCALARS:
                    f.type = _SCALARS[type_name]
                else:
                    unresolved.append((f, type_name, full))
            if toks[pos] == ";":
                take(";")
        take("}")
        if pos < len(toks) and toks[pos] == ";":
            take(";")

    while pos < len(toks):
        tok = take()
        if tok == "syntax":
            take("=")
            take()
            take(";")
        elif tok == "package":
            fdp.package = take()
            take(";")
        elif tok == "message":
            message(fdp.message_type, "." + fdp.package)
        elif tok == "enum":
            enum(fdp.enum_type, "." + fdp.package)
        else:
            raise ValueError(f"framework.proto: unexpected {tok!r}")
    for f, type_name, scope in unresolved:      # innermost scope first, as protoc does
        parts = scope.split(".")
        for i in range(len(parts), 0, -1):
            cand = ".".join(parts[:i]) + "." + type_name
            if cand in kinds:
                f.type_name = cand
                f.type = 11 if kinds[cand] == "message" else 14
                break
        else:
            raise ValueError(f"framework.proto: unknown type {type_name!r}")
    return fdp


@functools.lru_cache(maxsize=None)
def messages() -> Dict[str, Any]:
    """``{message name: class}`` for the top-level messages (``ProgramDesc``, ``VarType``...).
    Raises ``ProtobufMissing`` (with the install command) when protobuf is absent."""
    try:
        from google.protobuf import descriptor_pool, message_factory
    except ImportError:
        raise ProtobufMissing(f"reading or writing Paddle's program format (__model__, "
                              f".pdmodel) needs the protobuf package: {_PACKAGE_HINT}") from None
    with open(PROTO_PATH, encoding="utf-8") as f:
        fdp = _parse(f.read())
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    out = {}
    for m in fdp.message_type:
        desc = pool.FindMessageTypeByName(f"{fdp.package}.{m.name}")
        if hasattr(message_factory, "GetMessageClass"):         # protobuf >= 4.21
            out[m.name] = message_factory.GetMessageClass(desc)
        else:                                                     # protobuf 3.20
            out[m.name] = message_factory.MessageFactory(pool).GetPrototype(desc)
    return out
