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
    return _ProtoParser(text).file()


class _ProtoParser:
    """A recursive-descent reader of the proto2 subset ``framework.proto`` uses, filling one
    ``FileDescriptorProto``. Field types that name a message or enum are resolved once the
    whole file is read (a field may name a type declared after it)."""

    def __init__(self, text: str) -> None:
        from google.protobuf import descriptor_pb2
        self.toks = _tokens(text)
        self.pos = 0
        self.fdp = descriptor_pb2.FileDescriptorProto(name="fluidlite_paddle_framework.proto",
                                                      syntax="proto2")
        self.unresolved: List[Tuple[Any, str, str]] = []     # (field, type name, scope)
        self.kinds: Dict[str, str] = {}                       # full name -> "message" | "enum"

    def take(self, expected: str = "") -> str:
        """The next token (ValueError unless it is ``expected``, when given)."""
        tok = self.toks[self.pos]
        if expected and tok != expected:
            raise ValueError(f"framework.proto: expected {expected!r}, got {tok!r}")
        self.pos += 1
        return tok

    def file(self) -> Any:
        """Read the top-level statements (syntax, package, messages, enums), then resolve."""
        toks, fdp = self.toks, self.fdp
        while self.pos < len(toks):
            tok = self.take()
            if tok == "syntax":
                self.take("=")
                self.take()
                self.take(";")
            elif tok == "package":
                fdp.package = self.take()
                self.take(";")
            elif tok == "message":
                self.message(fdp.message_type, "." + fdp.package)
            elif tok == "enum":
                self.enum(fdp.enum_type, "." + fdp.package)
            else:
                raise ValueError(f"framework.proto: unexpected {tok!r}")
        self.resolve()
        return fdp

    def enum(self, container: Any, scope: str) -> None:
        """``enum Name { A = 0; ... }`` (after the ``enum`` keyword) into ``container``."""
        e = container.add(name=self.take())
        self.kinds[f"{scope}.{e.name}"] = "enum"
        self.take("{")
        while self.toks[self.pos] != "}":
            name = self.take()
            self.take("=")
            e.value.add(name=name, number=int(self.take()))
            self.take(";")
        self.take("}")

    def message(self, container: Any, scope: str) -> None:
        """``message Name { ... }`` (after the ``message`` keyword) into ``container``: nested
        messages and enums, and labelled fields."""
        m = container.add(name=self.take())
        full = f"{scope}.{m.name}"
        self.kinds[full] = "message"
        self.take("{")
        while self.toks[self.pos] != "}":
            tok = self.take()
            if tok == "message":
                self.message(m.nested_type, full)
            elif tok == "enum":
                self.enum(m.enum_type, full)
            else:
                self.field(m, tok, full)
            if self.toks[self.pos] == ";":
                self.take(";")
        self.take("}")
        if self.pos < len(self.toks) and self.toks[self.pos] == ";":
            self.take(";")

    def field(self, m: Any, label: str, scope: str) -> None:
        """``<label> <type> name = N [default = v];`` (after the label) into message ``m``;
        a non-scalar type waits in ``unresolved``."""
        f = m.field.add(label=_LABELS[label])
        type_name = self.take()
        f.name = self.take()
        self.take("=")
        f.number = int(self.take())
        if self.toks[self.pos] == "[":
            self.take("[")
            self.take("default")
            self.take("=")
            f.default_value = self.take()
            self.take("]")
        self.take(";")
        if type_name in _SCALARS:
            f.type = _SCALARS[type_name]
        else:
            self.unresolved.append((f, type_name, scope))

    def resolve(self) -> None:
        """Give each message/enum field its full type name, innermost scope first (as protoc
        does); ValueError for a type the file does not declare."""
        for f, type_name, scope in self.unresolved:
            parts = scope.split(".")
            for i in range(len(parts), 0, -1):
                cand = ".".join(parts[:i]) + "." + type_name
                if cand in self.kinds:
                    f.type_name = cand
                    f.type = 11 if self.kinds[cand] == "message" else 14
                    break
            else:
                raise ValueError(f"framework.proto: unknown type {type_name!r}")


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
