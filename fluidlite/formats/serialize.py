"""Program serialization: a versioned JSON document (``Program.to_dict`` / ``from_dict``).

Format ``fluidlite.program`` version 1::

    {"format": "fluidlite.program", "version": 1, "fluidlite_version": "0.1.0",
     "random_seed": 0, "appending_grad_times": 1, "is_distributed": false,
     "blocks": [{"idx": 0, "parent_idx": -1, "forward_block_idx": -1,
                 "vars": [{"name": "fc_0.w_0", "kind": "parameter", "type": "LOD_TENSOR",
                           "shape": [4, 16], "dtype": "FP32", "lod_level": 0,
                           "persistable": true, "stop_gradient": false, ...,
                           "trainable": true, "optimize_attr": {"learning_rate": 1.0},
                           "regularizer": {"type": "L2Decay", "coeff": 0.0001},
                           "need_clip": true, ...}],
                 "ops": [{"type": "mul", "inputs": {"X": ["x"], "Y": ["fc_0.w_0"]},
                          "outputs": {"Out": ["fc_0.tmp_0"]}, "attrs": {...}}]}]}

Everything the printed program shows survives the round trip exactly (names, shapes, dtypes,
flags, op attrs including ``op_role``/``op_namescope``/``op_callstack``), plus the Python-side
Parameter attributes. Attr values JSON cannot hold are tagged one-key objects: ``{"@vartype":
"FP32"}``, ``{"@float": "nan"}``, ``{"@tuple": [...]}``, ``{"@dict": {...}}``, ``{"@block": 1}``,
``{"@ndarray": {...}}``, ``{"@npscalar": {...}}``. Regularizers and clip attributes are stored by
type and coefficients (``{"type": "L2Decay", "coeff": 1e-4}``); initializers are not stored (the
startup program holds the init ops). Loading never evaluates code: it only builds IR objects, and
every op type must be registered. A newer ``version`` or a malformed document raises
``ProgramFormatError`` naming the offending field.
"""
from __future__ import annotations

import json
import math
import os
from typing import Any, Callable, Dict, List, Optional, Union

import numpy as np

from ..core import registry
from .checkpoint import read_file, write_file as _write_file
from ..core.version import __version__
from ..core.dtypes import VarType, convert_np_dtype_to_dtype_
from ..core.ir import Block, Operator, Parameter, Program, Variable, provide
from .paddle import PaddleFormatError, program_from_bytes, shape_problem
from .tree import check_parent, check_tree

FORMAT_NAME = "fluidlite.program"
FORMAT_VERSION = 1

__all__ = ["FORMAT_NAME", "FORMAT_VERSION", "ProgramFormatError", "program_to_dict",
           "program_from_dict", "dumps_program", "loads_program", "parse_from_string",
           "save_program", "load_program", "ProgramDescShim", "atomic_write"]


class ProgramFormatError(ValueError):
    """A serialized program is malformed, truncated, or from a newer format version."""


# -- files ------------------------------------------------------------------------------------
def atomic_write(path: Union[str, "os.PathLike[str]"], data: bytes) -> None:
    """Write ``data`` to ``path`` atomically: readers see either the old file or the complete
    new one, never a partial write. A temp file in the same directory is fsynced and moved into
    place with ``os.replace`` under the directory's ``flock``; in a fluidlite checkpoint
    directory the write goes through ``checkpoint.publish`` so the manifest stays true. Temp
    files of crashed writes to ``path`` are removed by the next one (``formats/checkpoint.py``)."""
    _write_file(path, data)


# -- encoding ---------------------------------------------------------------------------------
def _fluidlite_version() -> str:
    return __version__


def _enc_value(v: Any, where: str) -> Any:
    """Attr value -> JSON value (tagged objects for what JSON cannot hold)."""
    if v is None or isinstance(v, (bool, str)):
        return v
    if isinstance(v, VarType):
        return {"@vartype": v.name}
    if isinstance(v, int):
        return v
    if isinstance(v, float):        # also np.float64, a float subclass: stored as a float
        if math.isnan(v) or math.isinf(v):
            return {"@float": repr(float(v))}      # NumPy 2's repr is 'np.float64(nan)'
        return float(v)
    if isinstance(v, np.generic):
        return {"@npscalar": {"dtype": v.dtype.str, "value": _enc_value(v.item(), where)}}
    if isinstance(v, np.ndarray):
        if v.dtype.kind not in "biuf":
            raise ProgramFormatError(f"{where}: cannot serialize an ndarray of dtype {v.dtype}")
        return {"@ndarray": {"dtype": v.dtype.str, "shape": list(v.shape),
                             "data": [_enc_value(x, where) for x in v.ravel().tolist()]}}
    if isinstance(v, list):
        return [_enc_value(x, where) for x in v]
    if isinstance(v, tuple):
        return {"@tuple": [_enc_value(x, where) for x in v]}
    if isinstance(v, dict):
        if not all(isinstance(k, str) for k in v):
            raise ProgramFormatError(f"{where}: dict attrs need str keys, got {list(v)!r}")
        return {"@dict": {k: _enc_value(x, where) for k, x in v.items()}}
    if isinstance(v, Block):
        return {"@block": v.idx}
    if isinstance(v, Variable):
        return {"@var": v.name}
    raise ProgramFormatError(f"{where}: value {v!r} of type {type(v).__name__} cannot be "
                             f"serialized (supported: bool, int, float, str, None, VarType, "
                             f"numpy scalars/arrays, lists, tuples, str-keyed dicts, Blocks)")


def _dec_value(v: Any, where: str, ctx: "_DecodeCtx") -> Any:
    if v is None or isinstance(v, (bool, str, int, float)):
        return v
    if isinstance(v, list):
        return [_dec_value(x, f"{where}[{i}]", ctx) for i, x in enumerate(v)]
    if isinstance(v, dict):
        if len(v) != 1:
            raise ProgramFormatError(f"{where}: expected a tagged value such as "
                                     f"{{\"@vartype\": \"FP32\"}}, got an object with keys "
                                     f"{sorted(v)}")
        (tag, body), = v.items()
        if tag == "@vartype":
            if not isinstance(body, str) or body not in VarType.__members__:
                raise ProgramFormatError(f"{where}: unknown VarType {body!r}")
            return VarType[body]
        if tag == "@float":
            if body not in ("nan", "inf", "-inf"):
                raise ProgramFormatError(f"{where}: bad special float {body!r}")
            return float(body)
        if tag == "@tuple":
            _expect(isinstance(body, list), where, "@tuple body must be a list")
            return tuple(_dec_value(x, f"{where}[{i}]", ctx) for i, x in enumerate(body))
        if tag == "@dict":
            _expect(isinstance(body, dict), where, "@dict body must be an object")
            return {k: _dec_value(x, f"{where}.{k}", ctx) for k, x in body.items()}
        if tag == "@npscalar":
            _expect(isinstance(body, dict) and "dtype" in body and "value" in body, where,
                    "@npscalar needs 'dtype' and 'value'")
            dt = _np_dtype(body["dtype"], where)
            return _np_item(dt, _dec_value(body["value"], where, ctx), where, "@npscalar")
        if tag == "@ndarray":
            return _dec_ndarray(body, where, ctx)
        if tag == "@block":
            _expect(isinstance(body, int) and not isinstance(body, bool) and
                    0 <= body < ctx.num_blocks, where, f"@block index {body!r} out of range")
            return ctx.block_ref(body)
        if tag == "@var":
            _expect(isinstance(body, str), where, "@var body must be a variable name")
            return ctx.var_ref(body, where)
        raise ProgramFormatError(f"{where}: unknown tag {tag!r}")
    raise ProgramFormatError(f"{where}: unexpected JSON value {v!r}")


def _dec_ndarray(body: Any, where: str, ctx: "_DecodeCtx") -> np.ndarray:
    """An ``{"@ndarray": {"dtype", "shape", "data"}}`` body: every element must fit the dtype
    (``_np_item``) and the shape must hold exactly the data, checked before the array is
    built."""
    _expect(isinstance(body, dict) and {"dtype", "shape", "data"} <= set(body), where,
            "@ndarray needs 'dtype', 'shape' and 'data'")
    dt = _np_dtype(body["dtype"], where)
    shape, data = body["shape"], body["data"]
    _expect(isinstance(data, list), where, "@ndarray 'data' must be a list")
    _expect(isinstance(shape, list) and all(isinstance(d, int) and not isinstance(d, bool)
                                            for d in shape), where,
            f"@ndarray 'shape' must be a list of integers, got {shape!r}")
    problem = shape_problem(shape, dt.itemsize)
    _expect(problem is None, where, f"bad @ndarray shape: {problem}")
    _expect(math.prod(shape) == len(data), where,
            f"@ndarray shape {shape} holds {math.prod(shape)} elements, 'data' has {len(data)}")
    items = [_np_item(dt, _dec_value(x, where, ctx), where, "@ndarray element") for x in data]
    return np.array(items, dtype=dt).reshape(shape)


def _np_item(dt: np.dtype, v: Any, where: str, what: str) -> Any:
    """``v`` as a NumPy scalar of ``dt``, refusing what the type cannot hold exactly as
    the encoder writes it: a bool for ``b``, an integer within the type's range for ``i`` /
    ``u``, a number that stays finite (unless it was an ``@float`` special) for ``f``.
    NumPy would instead raise OverflowError, wrap around (NumPy 1), truncate 1.5 to 1 or
    turn 1e300 into inf silently."""
    def bad(why: str) -> ProgramFormatError:
        return ProgramFormatError(f"{where}: {what} value {v!r} {why} (dtype {dt})")
    if dt.kind == "b":
        if not isinstance(v, bool):
            raise bad("is not a bool")
        return dt.type(v)
    if type(v) not in (int, float):       # not bool, nor an IntEnum such as VarType
        raise bad("is not a number")
    if dt.kind in "iu":
        info = np.iinfo(dt)
        if type(v) is not int:
            raise bad("is not an integer")
        if not info.min <= v <= info.max:
            raise bad(f"is outside the type's range [{info.min}, {info.max}]")
        return dt.type(v)
    try:
        x = float(v)
    except OverflowError:
        raise bad("overflows a float") from None
    with np.errstate(over="ignore"):
        out = dt.type(x)
    if math.isfinite(x) and not np.isfinite(out):
        raise bad("overflows the type")
    return out


def _np_dtype(s: Any, where: str) -> np.dtype:
    try:
        dt = np.dtype(s)
    except TypeError:
        raise ProgramFormatError(f"{where}: bad numpy dtype {s!r}") from None
    if dt.kind not in "biuf":
        raise ProgramFormatError(f"{where}: numpy dtype {dt} is not allowed")
    return dt


def _expect(cond: bool, where: str, what: str) -> None:
    if not cond:
        raise ProgramFormatError(f"malformed program: {where}: {what}")


# -- objects that serialize themselves (clips, regularizers) ---------------------------------
_CONFIG_TYPES: Dict[str, Any] = {}       # stored type name -> class


def config_type(kind: str, *type_names: str) -> Callable[[Any], Any]:
    """Class decorator for attribute objects stored in programs (a Parameter's regularizer and
    gradient clip, a Variable's error clip) as ``{"type": name, **obj.to_config()}`` and rebuilt
    by ``cls.from_config(fields)``. ``type_names[0]`` is the name written, the others are
    accepted when reading (aliases). ``kind`` is checked when reading, so a regularizer is never
    decoded where a clip belongs. This keeps core/ free of the passes that define them."""
    def deco(cls: Any) -> Any:
        cls._config_kind, cls._config_name = kind, type_names[0]
        for n in type_names:
            _CONFIG_TYPES[n] = cls
        return cls
    return deco


def _enc_config(obj: Any, kind: str, where: str) -> Any:
    if obj is None:
        return None
    if getattr(type(obj), "_config_kind", None) != kind:
        known = sorted(n for n, c in _CONFIG_TYPES.items() if c._config_kind == kind)
        raise ProgramFormatError(f"{where}: {kind} {obj!r} of type {type(obj).__name__} cannot "
                                 f"be serialized; supported: {known}")
    try:
        fields = obj.to_config()
    except TypeError as e:
        raise ProgramFormatError(f"{where}: {e}") from None
    return {"type": type(obj)._config_name,
            **{k: _enc_value(v, where) for k, v in fields.items()}}


def _dec_config(d: Any, kind: str, where: str) -> Any:
    if d is None:
        return None
    _expect(isinstance(d, dict) and isinstance(d.get("type"), str), where,
            f"{kind} must be {{\"type\": ..., ...}}")
    cls = _CONFIG_TYPES.get(d["type"])
    _expect(cls is not None and cls._config_kind == kind, where,
            f"unknown {kind} type {d['type']!r}")
    fields = {k: v for k, v in d.items() if k != "type"}
    try:
        return cls.from_config(fields)
    except (TypeError, ValueError, KeyError) as e:
        raise ProgramFormatError(f"{where}: cannot rebuild {d['type']}({fields}): {e}") from None


# -- program -> dict --------------------------------------------------------------------------
_VAR_FLAGS = ("persistable", "stop_gradient", "is_data", "need_check_feed",
              "belong_to_optimizer")


def program_to_dict(program: Any) -> Dict[str, Any]:
    """The JSON-ready document of ``program`` (see the module docstring)."""
    blocks = []
    for b in program.blocks:
        vars_ = []
        for name, v in b.vars.items():
            where = f"block {b.idx} var '{name}'"
            d: Dict[str, Any] = {
                "name": name, "kind": "parameter" if isinstance(v, Parameter) else "var",
                "type": v.type.name, "shape": [int(s) for s in v.shape],
                "dtype": v.dtype.name if v.dtype is not None else None,
                "lod_level": int(v.lod_level)}
            d.update((f, bool(getattr(v, f, False))) for f in _VAR_FLAGS)
            d["error_clip"] = _enc_config(v.error_clip, "clip", where + " error_clip")
            if isinstance(v, Parameter):
                d["trainable"] = bool(v.trainable)
                d["optimize_attr"] = _enc_value(dict(v.optimize_attr or {}), where)
                d["regularizer"] = _enc_config(v.regularizer, "regularizer", where)
                d["gradient_clip_attr"] = _enc_config(v.gradient_clip_attr, "clip", where)
                d["do_model_average"] = v.do_model_average
                d["need_clip"] = bool(v.need_clip)
                d["is_distributed"] = bool(v.is_distributed)
            vars_.append(d)
        ops = []
        for i, op in enumerate(b.ops):
            where = f"block {b.idx} op #{i} '{op.type}'"
            ops.append({"type": op.type,
                        "inputs": {k: list(v) for k, v in op.inputs.items()},
                        "outputs": {k: list(v) for k, v in op.outputs.items()},
                        "attrs": {k: _enc_value(a, f"{where} attr '{k}'")
                                  for k, a in op.attrs.items()}})
        blocks.append({"idx": b.idx, "parent_idx": b.parent_idx,
                       "forward_block_idx": b.forward_block_idx, "vars": vars_, "ops": ops})
    return {"format": FORMAT_NAME, "version": FORMAT_VERSION,
            "fluidlite_version": _fluidlite_version(),
            "random_seed": program.random_seed,
            "appending_grad_times": program._appending_grad_times,
            "is_distributed": bool(program._is_distributed), "blocks": blocks}


# -- dict -> program --------------------------------------------------------------------------
class _DecodeCtx:
    """What decoding a value needs of the program being built: its block count (to check
    ``@block`` indices) and placeholders for blocks and variables not built yet."""

    def __init__(self, program: Any, num_blocks: int) -> None:
        self.program, self.num_blocks = program, num_blocks

    def block_ref(self, idx: int) -> Any:
        return _LazyBlock(self.program, idx)

    def var_ref(self, name: str, where: str) -> Any:
        return _LazyVar(self.program, name, where)


class _LazyBlock:
    """Placeholder for a block attr; replaced by the real Block once all blocks exist."""

    def __init__(self, program: Any, idx: int) -> None:
        self.program, self.idx = program, idx


class _LazyVar:
    def __init__(self, program: Any, name: str, where: str) -> None:
        self.program, self.name, self.where = program, name, where


def _resolve(v: Any) -> Any:
    if isinstance(v, _LazyBlock):
        return v.program.blocks[v.idx]
    if isinstance(v, _LazyVar):
        for b in v.program.blocks:
            if v.name in b.vars:
                return b.vars[v.name]
        raise ProgramFormatError(f"{v.where}: refers to variable '{v.name}', which no block "
                                 f"declares")
    if isinstance(v, list):
        return [_resolve(x) for x in v]
    if isinstance(v, tuple):
        return tuple(_resolve(x) for x in v)
    if isinstance(v, dict):
        return {k: _resolve(x) for k, x in v.items()}
    return v


def _int(d: Dict[str, Any], key: str, where: str) -> int:
    v = d.get(key)
    _expect(isinstance(v, int) and not isinstance(v, bool), where,
            f"'{key}' must be an int, got {v!r}")
    return v


def _bool(d: Dict[str, Any], key: str, where: str, default: Optional[bool] = None) -> bool:
    if key not in d and default is not None:
        return default
    v = d.get(key)
    _expect(isinstance(v, bool), where, f"'{key}' must be true/false, got {v!r}")
    return v


def _slots(d: Any, where: str) -> Dict[str, List[str]]:
    _expect(isinstance(d, dict), where, "must be an object of slot -> list of names")
    out = {}
    for k, v in d.items():
        _expect(isinstance(v, list) and all(isinstance(n, str) for n in v), f"{where}.{k}",
                "must be a list of variable names")
        out[k] = list(v)
    return out


def check_header(data: Any) -> None:
    """Raise ProgramFormatError unless ``data`` is a fluidlite program document we can read."""
    if not isinstance(data, dict):
        raise ProgramFormatError(f"not a fluidlite program: expected a JSON object, got "
                                 f"{type(data).__name__}")
    if data.get("format") != FORMAT_NAME:
        raise ProgramFormatError(f"not a fluidlite program: 'format' is {data.get('format')!r}, "
                                 f"expected {FORMAT_NAME!r}")
    version = data.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise ProgramFormatError(f"malformed program: 'version' must be a positive int, got "
                                 f"{version!r}")
    if version > FORMAT_VERSION:
        raise ProgramFormatError(
            f"this program was written in format version {version} (by fluidlite "
            f"{data.get('fluidlite_version', '?')}); this fluidlite ({_fluidlite_version()}) "
            f"reads versions up to {FORMAT_VERSION}. Upgrade fluidlite to load it.")


def program_from_dict(data: Dict[str, Any]) -> Any:
    """Rebuild a Program from ``program_to_dict`` output (validating every field)."""
    check_header(data)
    blocks = data.get("blocks")
    _expect(isinstance(blocks, list) and blocks, "blocks", "must be a non-empty list")
    p = Program()
    p.blocks = []
    seed = data.get("random_seed", 0)
    _expect(isinstance(seed, int) and not isinstance(seed, bool), "random_seed", "must be int")
    p._seed = seed
    times = data.get("appending_grad_times", 0)
    _expect(isinstance(times, int) and not isinstance(times, bool), "appending_grad_times",
            "must be int")
    p._appending_grad_times = times
    p._is_distributed = _bool(data, "is_distributed", "program", default=False)
    ctx = _DecodeCtx(p, len(blocks))
    for bi, bd in enumerate(blocks):
        p.blocks.append(_dec_block(p, bi, bd, len(blocks), ctx))
    # block and variable references were decoded as placeholders (a block may name a later
    # block or a variable declared further on): swap in the real objects
    for b in p.blocks:
        for v in b.vars.values():
            if getattr(v, "optimize_attr", None):
                v.optimize_attr = _resolve(v.optimize_attr)
        for op in b.ops:
            op.attrs = {k: _resolve(a) for k, a in op.attrs.items()}
    check_tree(p, lambda why: ProgramFormatError(f"blocks: {why}"))
    p._relink()
    p.current_block_idx = 0
    p._version = 0
    return p


def _dec_block(p: Any, bi: int, bd: Any, num_blocks: int, ctx: "_DecodeCtx") -> Any:
    """Block ``bi`` of the document (its vars, then its ops), checked field by field."""
    where = f"blocks[{bi}]"
    _expect(isinstance(bd, dict), where, "must be an object")
    _expect(bd.get("idx") == bi, where, f"'idx' must be {bi}, got {bd.get('idx')!r}")
    parent = _int(bd, "parent_idx", where)
    check_parent(bi, parent, lambda why: ProgramFormatError(f"{where}: {why}"))
    b = Block(p, bi, parent)
    b.forward_block_idx = _int(bd, "forward_block_idx", where) if \
        "forward_block_idx" in bd else -1
    _expect(isinstance(bd.get("vars"), list), where, "'vars' must be a list")
    _expect(isinstance(bd.get("ops"), list), where, "'ops' must be a list")
    for vi, vd in enumerate(bd["vars"]):
        v = _dec_var(b, vd, f"{where}.vars[{vi}]", ctx)
        b.vars[v.name] = v
    for oi, od in enumerate(bd["ops"]):
        b.ops.append(_dec_op(b, od, f"{where}.ops[{oi}]", ctx))
    return b


def _dec_var(b: Any, vd: Any, vwhere: str, ctx: "_DecodeCtx") -> Any:
    """The Variable or Parameter (``kind``) a var entry of block ``b`` describes; its name
    must be new in ``b``."""
    _expect(isinstance(vd, dict), vwhere, "must be an object")
    name = vd.get("name")
    _expect(isinstance(name, str) and name != "", vwhere, "'name' must be a non-empty "
            "string")
    vwhere = f"{vwhere} ('{name}')"
    _expect(name not in b.vars, vwhere, "duplicate variable name")
    vtype = vd.get("type")
    _expect(isinstance(vtype, str) and vtype in VarType.__members__, vwhere,
            f"unknown var type {vtype!r}")
    shape = vd.get("shape")
    _expect(isinstance(shape, list) and all(
        isinstance(s, int) and not isinstance(s, bool) and s >= -1 for s in shape),
        vwhere, f"'shape' must be a list of ints >= -1, got {shape!r}")
    dtype = vd.get("dtype")
    _expect(dtype is None or (isinstance(dtype, str) and dtype in VarType.__members__),
            vwhere, f"unknown dtype {dtype!r}")
    kw: Dict[str, Any] = dict(
        type=VarType[vtype], name=name, shape=shape,
        dtype=convert_np_dtype_to_dtype_(VarType[dtype]) if dtype else None,
        lod_level=_int(vd, "lod_level", vwhere),
        error_clip=_dec_config(vd.get("error_clip"), "clip", vwhere + " error_clip"))
    for f in _VAR_FLAGS:
        kw[f] = _bool(vd, f, vwhere, default=False)
    kind = vd.get("kind", "var")
    if kind == "parameter":
        return _dec_parameter(b, vd, vwhere, ctx, kw)
    if kind == "var":
        return Variable(b, **kw)
    raise ProgramFormatError(f"malformed program: {vwhere}: unknown kind {kind!r}")


def _dec_parameter(b: Any, vd: Dict[str, Any], vwhere: str, ctx: "_DecodeCtx",
                   kw: Dict[str, Any]) -> Any:
    """The Parameter of a ``kind: parameter`` var entry, ``kw`` holding the fields every var
    has (a parameter needs a dtype and a fully known shape)."""
    shape = kw["shape"]
    _expect(bool(shape) and all(s > 0 for s in shape) and vd.get("dtype") is not None,
            vwhere, "a parameter needs a dtype and a fully known positive shape")
    opt = _dec_value(vd.get("optimize_attr", {"@dict": {"learning_rate": 1.0}}),
                     vwhere, ctx)
    _expect(isinstance(opt, dict), vwhere, "'optimize_attr' must be a @dict")
    dma = vd.get("do_model_average")
    _expect(dma is None or isinstance(dma, bool), vwhere,
            "'do_model_average' must be true/false/null")
    kw.pop("persistable")
    return Parameter(b, kw.pop("shape"), kw.pop("dtype"),
                     trainable=_bool(vd, "trainable", vwhere, default=True),
                     optimize_attr=opt,
                     regularizer=_dec_config(vd.get("regularizer"), "regularizer", vwhere),
                     gradient_clip_attr=_dec_config(vd.get("gradient_clip_attr"), "clip",
                                                    vwhere),
                     do_model_average=dma,
                     need_clip=_bool(vd, "need_clip", vwhere, default=True),
                     is_distributed=_bool(vd, "is_distributed", vwhere, default=False),
                     **kw)


def _dec_op(b: Any, od: Any, owhere: str, ctx: "_DecodeCtx") -> Any:
    """The Operator an op entry of block ``b`` describes; its type must be registered."""
    _expect(isinstance(od, dict), owhere, "must be an object")
    op_type = od.get("type")
    _expect(isinstance(op_type, str), owhere, "'type' must be a string")
    if not registry.has_op(op_type):
        raise ProgramFormatError(
            f"{owhere}: op type '{op_type}' is not registered in this fluidlite "
            f"({_fluidlite_version()}); the program needs a version that provides it")
    attrs = od.get("attrs", {})
    _expect(isinstance(attrs, dict), owhere, "'attrs' must be an object")
    return Operator(b, op_type, _slots(od.get("inputs", {}), owhere + ".inputs"),
                    _slots(od.get("outputs", {}), owhere + ".outputs"),
                    {k: _dec_value(a, f"{owhere}.attrs.{k}", ctx) for k, a in attrs.items()})


# -- text / bytes / files ---------------------------------------------------------------------
def dumps_program(program: Any) -> str:
    """Compact JSON text of ``program`` (strict JSON: no NaN tokens)."""
    return json.dumps(program_to_dict(program), separators=(",", ":"), allow_nan=False)


def loads_program(text: Union[str, bytes, bytearray], source: str = "<string>") -> Any:
    """Parse JSON text/bytes into a Program; ProgramFormatError names ``source`` on failure."""
    if isinstance(text, (bytes, bytearray)):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as e:
            raise ProgramFormatError(f"{source} is not a fluidlite program: not UTF-8 JSON "
                                     f"({e.reason} at byte {e.start}); is it a Paddle protobuf "
                                     f"program? fluidlite reads only its own JSON format") \
                from None
    if not isinstance(text, str):
        raise TypeError(f"expected str or bytes, got {type(text).__name__}")
    try:
        data = json.loads(text, parse_constant=_reject_constant)
    except RecursionError:
        raise ProgramFormatError(f"{source} is not a valid fluidlite program: it is nested "
                                 f"deeper than Python can parse") from None
    except json.JSONDecodeError as e:
        stripped = text.rstrip()
        truncated = e.pos >= len(stripped) or "Unterminated" in e.msg or \
            (stripped.startswith("{") and not stripped.endswith("}"))
        hint = " (the file looks truncated)" if truncated else ""
        raise ProgramFormatError(f"{source} is not a valid fluidlite program: bad JSON at line "
                                 f"{e.lineno} column {e.colno}: {e.msg}{hint}") from None
    try:
        return program_from_dict(data)
    except ProgramFormatError as e:
        raise ProgramFormatError(f"{source}: {e}") from None


def _reject_constant(token: str) -> Any:
    raise ProgramFormatError(f"non-standard JSON constant {token!r} in program file")


def parse_from_string(binary_str: Union[str, bytes, bytearray]) -> Any:
    """``Program.parse_from_string``: the inverse of ``program.desc.serialize_to_string()``.
    Unlike fluid's protobuf, Parameter attributes survive. Also reads (issue 18) Paddle's
    ProgramDesc protobuf, e.g. a fluid 1.8 ``__model__``."""
    if isinstance(binary_str, (bytes, bytearray)) and binary_str.lstrip()[:1] != b"{":
        return program_from_bytes(bytes(binary_str), source="the given bytes")
    return loads_program(binary_str)


def save_program(program: Any, path: Union[str, "os.PathLike[str]"]) -> None:
    """Write ``program`` as JSON to ``path`` atomically."""
    atomic_write(path, dumps_program(program).encode("utf-8") + b"\n")


def load_program(path: Union[str, "os.PathLike[str]"]) -> Any:
    """Read a program written by ``save_program`` (or ``save_inference_model``'s ``__model__``),
    verified against its directory's checkpoint manifest when there is one."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"program file '{path}' does not exist")
    data = bytes(read_file(path, "program"))
    if data.lstrip()[:1] != b"{":      # issue 18: a ProgramDesc protobuf
        try:
            return program_from_bytes(data, source=f"program file '{path}'")
        except PaddleFormatError:
            if not path.endswith(".json"):
                raise
    return loads_program(data, source=f"program file '{path}'")


class ProgramDescShim:
    """``program.desc``: what fluid scripts use of the C++ ProgramDesc."""

    def __init__(self, program: Any) -> None:
        self._program = program

    def serialize_to_string(self) -> bytes:
        return dumps_program(self._program).encode("utf-8")

    def num_blocks(self) -> int:
        return len(self._program.blocks)

    def block(self, idx: int) -> Any:
        return self._program.blocks[idx]

    def _set_version(self) -> None:
        """No-op: the JSON document carries its own version."""

    def flush(self) -> None:
        """No-op (fluid syncs the C++ desc here)."""


provide("to_dict", program_to_dict)
provide("from_dict", program_from_dict)
provide("parse_from_string", parse_from_string)
provide("desc", ProgramDescShim)
