"""fluidlite ``Program`` <-> Paddle's ``ProgramDesc`` protobuf (``__model__``, ``*.pdmodel``).

Writing produces what fluid 1.8 writes: one ``ProgramDesc`` message (blocks, vars, ops with typed
attrs, ``version``), plus the Paddle 2.x VarDesc flags ``is_parameter`` / ``stop_gradient`` so a
Parameter comes back as a Parameter (fluid 1.8 readers skip those fields). Attribute types follow
the values: Python ints are INT (LONG when they do not fit int32, and always for
``padding_idx``, which Paddle declares int64), floats FLOAT (float32 in ``f``, as in Paddle; a
float that float32 does not hold exactly also goes into the 2.x field ``float64``, which Paddle
ignores for a FLOAT attr, so fluidlite reads back the exact value), VarTypes INT codes, Blocks
BLOCK indices; a list whose values do not tell its element type (empty, or whole numbers)
takes the type Paddle declares (``skip_eager_deletion_vars`` STRINGS, ``prior_box``'s sizes
FLOATS), ``cross_entropy2_grad`` is written as Paddle's ``cross_entropy_grad2``, and a
``squared_l2_norm`` that sums a float32 gradient in float64 (the global-norm clip) gets a
``cast`` to float64 before it (Paddle's op keeps its input's dtype; read back as one op). A FLOAT
read without ``float64`` is the shortest decimal of its float32 (a ``0.2`` written by Paddle
reads as ``0.2``); an INT or FLOAT where the op declares a bool (fluid <= 1.6's ``is_test``
0/1) reads as that bool, as Paddle's ``ExtractAttribute<bool>`` converts it.

Reading accepts what fluid 1.x and Paddle 2.x write: unknown proto fields are skipped (1.x's
``op_compatible_map``, 2.x's ``op_version_map``), attributes fluidlite's op does not declare
(``use_mkldnn``, ``with_quant_attr``...) and empty dispensable slots it lacks (``ScaleTensor``,
``Seed``, ``MomentumTensor``...) are dropped, and Paddle 2.x spellings are mapped onto
fluidlite's ops by ``_map_op`` (``matmul_v2`` -> ``matmul``, ``fill_constant`` ``str_value``,
``gather`` with ``axis``, ``softmax_with_cross_entropy`` without softmax, ``clip`` with tensors,
``reduce_*`` ``out_dtype``, 2.x ``momentum``/``adamw``; one Paddle op may become several); a grad
op ``<type>_grad`` maps as its forward op. Ops with no fluid 1.x equivalent are real ops
(``ops/paddle2.py``). The table is in docs/file_formats.md. An op type fluidlite lacks, a
malformed message, or a var type/dtype it cannot hold raises ``PaddleFormatError`` naming the
file.
"""
from __future__ import annotations

import logging
import math
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from ...core import registry
from ..checkpoint import CheckpointError
from ...core.dtypes import VarType, convert_np_dtype_to_dtype_
from ...core.ir import Block, Operator, Parameter, Program, Variable
from ..tree import check_parent, check_tree
from . import while_grad as _while_grad
from .proto import messages

__all__ = ["PaddleFormatError", "program_to_bytes", "program_from_bytes", "is_json_program",
           "PROGRAM_VERSION"]

_log = logging.getLogger("fluidlite")

# ProgramDesc.version.version fluid 1.8 wrote (kCurProgramVersion = 0 up to 1.8)
PROGRAM_VERSION = 0

# AttrType codes
INT, FLOAT, STRING, INTS, FLOATS, STRINGS, BOOLEAN, BOOLEANS, BLOCK, LONG, BLOCKS, LONGS = \
    range(12)
FLOAT64S, VAR, VARS, FLOAT64, SCALAR, SCALARS = 12, 13, 14, 15, 16, 17
_LONG_ATTRS = frozenset({"padding_idx",
                         "num_rows", "num_columns"})     # eye's int64 attrs (issue 16)
# int lists Paddle declares int64 (2.6 writes them as LONGS; see docs/file_formats.md)
_LONGS_ATTRS = {"fill_constant": {"shape"}, "uniform_random": {"shape"},
                "gaussian_random": {"shape"},
                # issue 16: roll and randint declare their int lists int64 as well
                "roll": {"shifts", "dims"}, "randint": {"shape"}}
_I32 = (-(1 << 31), (1 << 31) - 1)
# attributes that only steer Paddle's implementation (kernels, devices, distribution,
# quantization, precision) -- dropping them never changes a result; any other dropped attribute
# with a non-neutral value is logged as a warning when a program is read
_HINT_ATTRS = frozenset({
    "with_quant_attr", "use_mkldnn", "use_cudnn", "mkldnn_data_type", "use_quantizer",
    "Scale_out", "Scale_x", "Scale_y", "scale_out", "scale_x", "scale_y", "Scale_in",
    "Scale_in_eltwise", "Scale_weights", "force_fp32_output", "exhaustive_search", "use_addto",
    "workspace_size_MB", "fuse_with_relu", "fuse_relu", "fuse_residual_connection",
    "fuse_activation", "fuse_alpha", "fuse_beta", "fuse_relu_before_depthwise_conv",
    "fix_seed", "seed", "is_test", "epmap", "height_sections", "is_distributed", "is_sparse",
    "remote_prefetch", "slot", "table_names", "trainer_id", "entry_config", "entry",
    "head_number", "fused_reshape_X", "fused_reshape_Y", "fused_reshape_Out",
    "fused_transpose_X", "fused_transpose_Y", "fused_transpose_Out", "place_type",
    "force_cpu", "multi_precision", "numeric_stable_mode", "use_calc_stream", "ring_id",
    "x_data_format", "y_data_format", "grad_inplace", "sorted", "overwrite"})
_NEUTRAL = (None, False, 0, 0.0, "", -1, "AnyLayout", "NCHW")     # NCHW: the default layout
_TENSOR_TYPES = (VarType.LOD_TENSOR, VarType.SELECTED_ROWS, VarType.LOD_TENSOR_ARRAY)


# Found by running fluidlite-written training programs in the real Paddle 2.6
# (tests/test_real_paddle.py): Paddle fills the declared defaults of a forward op's attributes
# when it loads a program, but not those of a grad op, whose kernel still reads them; the
# writer adds these when the op lacks them, and the reader drops them again when they hold
# exactly these values (so fluidlite round trips are unchanged).
_PADDLE_GRAD_ATTRS: Dict[str, Dict[str, Any]] = {
    "softmax_with_cross_entropy_grad": {"use_softmax": True},
    # StaticRNN's step input (a gather at the step counter) inside a while's grad block:
    # "gather_grad raises an exception std::out_of_range, map::at" without it
    "gather_grad": {"axis": 0},
}
_REDUCE_GRAD_ATTRS = {"in_dtype": -1, "out_dtype": -1}
# Paddle 2.6's batch_norm kernel in training mode (is_test false) writes its ReserveSpace
# output unconditionally and fails with "Required tensor shall not be nullptr" without one;
# the writer declares a temporary var with this suffix for it, the reader skips such vars
_RESERVE_SUFFIX = "@RESERVE_SPACE"
_WIDEN_SUFFIX = "@WIDENED"      # the cast the writer puts before a widening squared_l2_norm
# grad op -> (forward op, a slot both share: the forward's output, the grad's input; forward
# input or output slots Paddle 2.6's grad kernel also reads): layer_norm_grad sizes Bias@GRAD
# from the Bias input ("Expected output size=8, but received 0" without it); lstm_grad reads
# the forward's BatchCellPreAct ("No Input(BatchCellPreAct) found for LSTM@Grad operator"),
# which fluidlite's rule does not need; gru_grad the forward's Hidden ("No Input(Hidden)
# found for GRU@Grad operator"). The reader drops them.
_PADDLE_GRAD_INPUTS = {"layer_norm_grad": ("layer_norm", "Mean", ("Bias",)),
                       "lstm_grad": ("lstm", "Hidden", ("BatchCellPreAct",)),
                       "gru_grad": ("gru", "BatchGate", ("Hidden",))}


# attributes Paddle 2.x renamed: fluid 1.8's name -> 2.x's; the writer stores both (Paddle 2.6
# rejects a flip without ``axis``: "Attribute (axis) is not set correctly"), the reader maps
# the 2.x name back (``_map_one``)
# ops whose FLOAT ``value`` attribute fluid 1.8's layers doubled with ``str_value``, the exact
# decimal the kernels prefer (a float32 ``value`` rounds 0.002 and every int64 above 2^24)
_STR_VALUE_OPS = ("fill_constant", "fill_constant_batch_size_like")
_INT_VAR_TYPES = (VarType.INT8, VarType.INT16, VarType.INT32, VarType.INT64, VarType.UINT8)


def _exact_str_value(value: Any, dtype: Any) -> str:
    """fluid 1.8's ``str_value``: ``str(int(value))`` for integer dtypes, else
    ``str(float(value))`` (Python's shortest round-trip repr)."""
    integer = dtype is not None and not isinstance(dtype, bool) and dtype in _INT_VAR_TYPES
    return str(int(value)) if integer else str(float(value))


def _str_value(text: str, dtype: Any) -> Any:
    """The number a ``str_value`` spells, as fluidlite's ``value`` attribute holds it: a float,
    or an int for an integer dtype beyond 2^53 (where a float would round)."""
    integer = dtype is not None and not isinstance(dtype, bool) and dtype in _INT_VAR_TYPES
    try:
        if integer and text.strip().lstrip("+-").isdigit():
            number = int(text)
            return float(number) if abs(number) <= 2 ** 53 else number
        return float(text)
    except ValueError:
        raise ValueError(f"str_value {text!r} is not a number") from None


_PADDLE2_ATTR_NAMES = {"flip": {"dims": "axis"}, "roll": {"dims": "axis"},
                       "trace": {"dim1": "axis1", "dim2": "axis2"}}

# attributes Paddle 2.x added to ops fluid 1.8 had, which fluidlite's ops do not declare:
# the value under which dropping one computes fluid's numbers exactly. A file giving another
# value is refused (``_check_paddle2_attrs``) -- never dropped with a warning, which would run
# a different computation. ``_ANY_VALUE`` marks attributes a mapping consumes when it can
# express them (softplus's beta / threshold): any value still there is refused.
_ANY_VALUE = object()
_PADDLE2_NEUTRAL_ATTRS = {
    "data_norm": {"enable_scale_and_shift": False},
    "fusion_gru": {"origin_mode": False},
    "lars_momentum": {"epsilon": 0.0, "rescale_grad": 1.0},
    "fake_channel_wise_quantize_abs_max": {"quant_axis": 0},
    "fake_channel_wise_dequantize_max_abs": {"quant_axis": 0, "x_num_col_dims": 1},
    "softplus": {"beta": _ANY_VALUE, "threshold": _ANY_VALUE},
}


# grad op types Paddle registers under another name than ``<forward>_grad``: the writer uses
# Paddle's (real Paddle 2.6 rejects "cross_entropy2_grad": "Operator cross_entropy2_grad has
# not been registered"), the reader maps it back (``_map_one``). Paddle 2.6's op registry has
# no other grad type that does not end in ``_grad``.
_PADDLE_GRAD_TYPES = {"cross_entropy2_grad": "cross_entropy_grad2"}
_FLUID_GRAD_TYPES = {v: k for k, v in _PADDLE_GRAD_TYPES.items()}
# the attribute naming the fluidlite op an OpDesc written in fluid's form stands for
# (``_paddle_array_grad``); Paddle ignores attributes its op does not declare
_FLUIDLITE_FORM = "fluidlite_form"

# list attributes whose element type the value cannot tell: an empty list, or whole numbers
# where Paddle declares floats (``prior_box(min_sizes=[2, 4])``). Paddle 2.6's op protos
# declare these names with one list type for every op fluidlite shares with it (checked by
# tests/test_real_paddle.py against the real registry); Paddle converts INTS only to LONGS, so
# an empty ``skip_eager_deletion_vars`` written as INTS fails ("Cannot get attribute
# (skip_eager_deletion_vars) by type std::vector<std::string>, its type is std::vector<int>").
_STRINGS_ATTRS = frozenset({
    "op_role_var", "op_callstack", "skip_eager_deletion_vars", "epmap", "table_names",
    "backward_skip_vars", "ex_states", "states", "block_in_grads", "functor_list",
    "original_output_grad"})     # while_grad's (a grad op: no proto to check it against)
_FLOATS_ATTRS = frozenset({
    "Scale_weights", "anchor_sizes", "aspect_ratios", "bbox_reg_weights", "fixed_ratios",
    "fixed_sizes", "fp32_values", "max_sizes", "min_sizes", "variance", "variances"})
# (op type, attr) pairs of the same kind where the name alone is ambiguous
_FLOATS_OP_ATTRS = frozenset({("anchor_generator", "stride"), ("fill", "value")})
_FLOAT64S_ATTRS = frozenset({"fp64_values"})
# (op type, attr) pairs Paddle 2.5+ declares SCALARS (a list of tagged scalars)
_SCALARS_OP_ATTRS = frozenset({("set_value", "values")})
_SCALAR_TAGS = {bool: (1, "b"), int: (2, "i"), float: (3, "r")}    # Scalar.Type, its field


def _paddle_grad_attrs(op_type: str) -> Dict[str, Any]:
    """Attributes Paddle 2.6 needs on ``op_type`` that fluidlite may not store (see above)."""
    if op_type.startswith("reduce_") and op_type.endswith("_grad"):
        return _REDUCE_GRAD_ATTRS
    return _PADDLE_GRAD_ATTRS.get(op_type, {})


class PaddleFormatError(CheckpointError, ValueError):
    """A Paddle-format file that cannot be read or a value it cannot hold (names the file and
    the variable/op). A ``CheckpointError`` like every other load failure of ``fluidlite.io``,
    and a ``ValueError`` like ``ProgramFormatError``."""


def is_json_program(data: bytes) -> bool:
    """True when ``data`` is a fluidlite JSON program (else it is taken as a ProgramDesc)."""
    return data.lstrip()[:1] == b"{"


# -- writing ----------------------------------------------------------------------------------
def _f32(x: float) -> float:
    return float(np.float32(x))


def _set_attr(attr: Any, name: str, value: Any, where: str, op_type: str = "") -> None:
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, bool):
        attr.type, attr.b = BOOLEAN, value
    elif isinstance(value, VarType):
        attr.type, attr.i = INT, int(value)
    elif isinstance(value, int):
        if name in _LONG_ATTRS or not _I32[0] <= value <= _I32[1]:
            attr.type, attr.l = LONG, value
        else:
            attr.type, attr.i = INT, value
    elif isinstance(value, float):
        attr.type, attr.f = FLOAT, value
        if _shortest_f32(value) != value and math.isfinite(value):
            attr.float64 = value        # exact value for fluidlite; Paddle reads f
    elif isinstance(value, str):
        attr.type, attr.s = STRING, value.encode("utf-8")
    elif isinstance(value, Block):
        attr.type, attr.block_idx = BLOCK, value.idx
    elif isinstance(value, (list, tuple)):
        items = [v.item() if isinstance(v, np.generic) else v for v in value]
        if _declared_list(attr, name, op_type, items):
            return
        if all(isinstance(v, bool) for v in items) and items:
            attr.type = BOOLEANS
            attr.bools.extend(items)
        elif all(isinstance(v, (int, VarType)) and not isinstance(v, bool) for v in items):
            ints = [int(v) for v in items]
            if name in _LONG_ATTRS or name in _LONGS_ATTRS.get(op_type, ()) or \
                    any(not _I32[0] <= v <= _I32[1] for v in ints):
                attr.type = LONGS
                attr.longs.extend(ints)
            else:
                attr.type = INTS
                attr.ints.extend(ints)
        elif all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in items):
            attr.type = FLOATS
            attr.floats.extend(float(v) for v in items)
            if any(_shortest_f32(float(v)) != float(v) for v in items):
                attr.float64s.extend(float(v) for v in items)
        elif all(isinstance(v, str) for v in items):
            attr.type = STRINGS
            attr.strings.extend(v.encode("utf-8") for v in items)
        elif all(isinstance(v, Block) for v in items):
            attr.type = BLOCKS
            attr.blocks_idx.extend(v.idx for v in items)
        else:
            raise PaddleFormatError(f"{where}: attribute '{name}' holds a list Paddle's format "
                                    f"cannot store ({value!r}); save with format='json'")
    else:
        raise PaddleFormatError(f"{where}: attribute '{name}' is a {type(value).__name__}, "
                                f"which Paddle's format cannot store; save with format='json'")


def _declared_list(attr: Any, name: str, op_type: str, items: List[Any]) -> bool:
    """Store ``items`` with the list type Paddle declares for ``name`` (see
    ``_STRINGS_ATTRS``) when the values themselves allow it; False when Paddle's declaration
    is not known here or does not fit (the caller then types the list by its values)."""
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in items)
    if name in _STRINGS_ATTRS and all(isinstance(v, str) for v in items):
        attr.type = STRINGS
        attr.strings.extend(v.encode("utf-8") for v in items)
    elif (name in _FLOATS_ATTRS or (op_type, name) in _FLOATS_OP_ATTRS) and numbers:
        attr.type = FLOATS
        attr.floats.extend(float(v) for v in items)
        if any(_shortest_f32(float(v)) != float(v) for v in items):
            attr.float64s.extend(float(v) for v in items)
    elif name in _FLOAT64S_ATTRS and numbers:
        attr.type = FLOAT64S
        attr.float64s.extend(float(v) for v in items)
    elif (op_type, name) in _SCALARS_OP_ATTRS and \
            all(type(v) in _SCALAR_TAGS for v in items):
        attr.type = SCALARS
        for v in items:
            tag, field = _SCALAR_TAGS[type(v)]
            x = attr.scalars.add()
            x.type = tag
            setattr(x, field, v)
    else:
        return False
    return True


def _tensor_desc(desc: Any, var: Any) -> None:
    desc.data_type = int(var.dtype) if var.dtype is not None else int(VarType.FP32)
    desc.dims.extend(int(d) for d in var.shape)


def program_to_desc(program: Any) -> Any:
    """The ``ProgramDesc`` message of ``program``."""
    msg = messages()["ProgramDesc"]()
    for b in program.blocks:
        bd = msg.blocks.add(idx=b.idx, parent_idx=b.parent_idx)
        if b.forward_block_idx != -1:
            bd.forward_block_idx = b.forward_block_idx
        hidden = _while_grad.forward_locals(program, b)     # Paddle's while_grad form
        for name, v in b.vars.items():
            if name in hidden:
                continue
            vd = bd.vars.add(name=name)
            vd.type.type = int(v.type)
            if v.type == VarType.LOD_TENSOR:
                _tensor_desc(vd.type.lod_tensor.tensor, v)
                if not isinstance(v, Parameter) or v.lod_level:    # as Paddle: params omit it
                    vd.type.lod_tensor.lod_level = int(v.lod_level or 0)
            elif v.type == VarType.SELECTED_ROWS:
                _tensor_desc(vd.type.selected_rows, v)
            elif v.type == VarType.LOD_TENSOR_ARRAY:
                _tensor_desc(vd.type.tensor_array.tensor, v)
                vd.type.tensor_array.lod_level = int(v.lod_level or 0)
            vd.persistable = bool(v.persistable)
            if v.need_check_feed:
                vd.need_check_feed = True
            if isinstance(v, Parameter):
                vd.is_parameter = True
                vd.stop_gradient = not v.trainable
            else:
                vd.stop_gradient = bool(v.stop_gradient)
        extra: List[Tuple[str, Any, Any]] = []
        for i, op_type, inputs, outputs, attrs in _paddle_block_ops(program, b, extra):
            _write_op(bd, f"block {b.idx} op #{i} '{op_type}'", op_type, inputs, outputs,
                      attrs)
        for name, like, dtype in extra:         # temporaries the written ops added
            vd = bd.vars.add(name=name)
            vd.type.type = int(VarType.LOD_TENSOR)
            vd.type.lod_tensor.tensor.data_type = int(dtype)
            vd.type.lod_tensor.tensor.dims.extend(int(d) for d in like.shape)
            vd.type.lod_tensor.lod_level = 0
            vd.persistable = False
            vd.stop_gradient = True
    msg.version.version = PROGRAM_VERSION
    return msg


def _paddle_block_ops(program: Any, b: Any, extra: List[Tuple[str, Any, Any]]) -> Any:
    """``_paddle_ops`` of block ``b``; the grad block of a ``while`` in Paddle's form
    (``while_grad.py``; an inserted op carries the index of the op it precedes)."""
    ops = _fold_zero_arrays(list(_paddle_ops(b, extra)))
    if not _while_grad.forward_locals(program, b):
        return ops
    out, k = [], 0          # the written ops keep their order; the inserted ones are extra
    for op in _while_grad.paddle_grad_block(b, [o[1:] for o in ops]):
        out.append((ops[min(k, len(ops) - 1)][0],) + tuple(op))
        if op[3].get(_FLUIDLITE_FORM) != _while_grad.STEP_FORM:
            k += 1
    return out


# attr naming the all-zero array gradients (``sum_tensor_array`` of no arrays) fluidlite makes
# just before the op carrying it: Paddle has no such op ("sum" needs inputs) and needs none --
# an array variable nothing wrote is an empty array there, which its readers take as zeros
_ZERO_ARRAYS = "fluidlite_zero_arrays"


def _fold_zero_arrays(ops: List[Tuple[Any, ...]]) -> List[Tuple[Any, ...]]:
    """The written ops with each ``sum_tensor_array`` of no inputs left out and its output
    named in the next op's ``_ZERO_ARRAYS`` attr (the reader puts it back there); one at the
    end of a block is kept."""
    out: List[Tuple[Any, ...]] = []
    pending: List[str] = []
    for op in ops:
        i, op_type, inputs, outputs, attrs = op
        if op_type == "sum_tensor_array" and not inputs.get("X") and outputs.get("Out"):
            pending += outputs["Out"]
            continue
        if pending:
            op = (i, op_type, inputs, outputs, dict(attrs, **{_ZERO_ARRAYS: pending}))
            pending = []
        out.append(op)
    if pending:                         # nothing follows: written as it is
        out += [o for o in ops if o[1] == "sum_tensor_array" and not o[2].get("X")
                and o[3].get("Out", [None])[0] in pending]
    return out


def _paddle_ops(b: Any, extra: List[Tuple[str, Any, Any]]) -> Any:
    """Yield ``(index, type, inputs, outputs, attrs)`` per OpDesc to write for block ``b``:
    fluidlite's ops, with the array-gradient ops Paddle lacks in fluid's form
    (``_paddle_array_grad``), a widening ``squared_l2_norm`` as ``cast`` + the op
    (``_paddle_widened_norm``; its temporaries go into ``extra``) and the additions Paddle 2.6
    needs (``_paddle_grad_inputs``, ``_paddle_grad_attrs``, 2.x attribute names)."""
    ops = list(b.ops)
    skip = set()
    for i, op in enumerate(ops):
        if i in skip:
            continue
        widened = _paddle_widened_norm(b, op, extra)
        if widened is not None:
            for op_type, inputs, outputs, attrs in widened:
                yield i, op_type, inputs, outputs, attrs
            continue
        nxt = ops[i + 1] if i + 1 < len(ops) else None
        folded = _paddle_array_grad(op, nxt)
        if folded is not None:
            op_type, inputs, outputs, attrs, used_next = folded
            if used_next:
                skip.add(i + 1)
            yield i, op_type, inputs, outputs, attrs
            continue
        inputs = {k: list(v) for k, v in op.inputs.items()}
        inputs.update(_paddle_grad_inputs(b, op))
        attrs = dict(op.attrs)
        if op.type in _STR_VALUE_OPS and not attrs.get("str_value"):
            attrs["str_value"] = _exact_str_value(attrs.get("value", 0.0), attrs.get("dtype"))
            attrs["value"] = float(attrs.get("value", 0.0))        # Paddle declares FLOAT
        if op.type == "while_grad":
            attrs = _while_grad.while_grad_attrs(inputs, attrs)
        for name, value in _paddle_grad_attrs(op.type).items():
            if attrs.get(name) is None:
                attrs[name] = value
        for old_name, new_name in _PADDLE2_ATTR_NAMES.get(op.type, {}).items():
            if attrs.get(old_name) is not None and new_name not in attrs:
                attrs[new_name] = attrs[old_name]
        yield (i, _PADDLE_GRAD_TYPES.get(op.type, op.type), inputs,
               {k: list(v) for k, v in op.outputs.items()}, attrs)


def _paddle_widened_norm(b: Any, op: Any, extra: List[Tuple[str, Any, Any]]
                         ) -> Optional[List[Tuple[str, Dict[str, List[str]],
                                                  Dict[str, List[str]], Dict[str, Any]]]]:
    """fluidlite's global-norm clip sums a float32 gradient's squares into a float64
    ``squared_l2_norm`` (docs/compatibility.md); Paddle's op returns its input's dtype and
    refuses that. Written as Paddle can run it: a ``cast`` of the gradient to the output's
    dtype, then the op on the cast (the same sum, accumulated in float64 throughout). None for
    any other op."""
    if op.type != "squared_l2_norm":
        return None
    x, out = b._find_var_recursive(op.input("X")[0]), b._find_var_recursive(op.output("Out")[0])
    if x is None or out is None or x.dtype is None or out.dtype is None or x.dtype == out.dtype:
        return None
    tmp = x.name + _WIDEN_SUFFIX
    extra.append((tmp, x, out.dtype))
    role = {k: v for k, v in op.attrs.items() if k.startswith("op_")}
    return [("cast", {"X": [x.name]}, {"Out": [tmp]},
             dict(role, in_dtype=int(x.dtype), out_dtype=int(out.dtype))),
            ("squared_l2_norm", {"X": [tmp]}, {k: list(v) for k, v in op.outputs.items()},
             dict(op.attrs))]


def _write_op(bd: Any, where: str, op_type: str, inputs: Dict[str, List[str]],
              outputs: Dict[str, List[str]], attrs: Dict[str, Any]) -> None:
    """Append one OpDesc to the BlockDesc ``bd`` (``where`` names it in errors)."""
    od = bd.ops.add(type=op_type)
    for slot, args in inputs.items():
        od.inputs.add(parameter=slot, arguments=list(args))
    for slot, args in outputs.items():
        od.outputs.add(parameter=slot, arguments=list(args))
    for name in sorted(attrs):
        value = attrs[name]
        if value is None:           # unset optional attr: restored from the default
            continue
        _set_attr(od.attrs.add(name=name, type=INT), name, value, where, op_type)
    if op_type == "batch_norm" and not attrs.get("is_test") and \
            not outputs.get("ReserveSpace") and outputs.get("Y"):
        _reserve_space(bd, od, outputs["Y"][0])


def _paddle_array_grad(op: Any, nxt: Any) -> Optional[Tuple[str, Dict[str, List[str]],
                                                            Dict[str, List[str]],
                                                            Dict[str, Any], bool]]:
    """fluid's form of a fluidlite array-gradient op Paddle 2.6 does not register, or None:
    ``write_to_array_grad`` is fluid's ``read_from_array`` of the array gradient with ``X_W``
    (zeros when the entry is missing), ``read_from_array_grad`` a ``write_to_array`` of the
    gradient, ``sum_tensor_array`` a ``sum`` of arrays. The ``clear_tensor_array_entry`` that
    follows a write_to_array_grad (fluidlite's: an overwritten entry passes no gradient back)
    has no Paddle op and is folded into the same OpDesc, so Paddle computes fluid's gradient
    there. The attribute ``_FLUIDLITE_FORM`` names fluidlite's form for the reader."""
    ins, outs, attrs = op.inputs, op.outputs, dict(op.attrs)
    if op.type == "write_to_array_grad":
        clear = nxt is not None and nxt.type == "clear_tensor_array_entry" and \
            nxt.inputs.get("X") == ins.get("Out@GRAD") and nxt.inputs.get("I") == ins.get("I") \
            and nxt.outputs.get("Out") == ins.get("Out@GRAD")
        attrs[_FLUIDLITE_FORM] = op.type + ("+clear" if clear else "")
        return ("read_from_array", {"X": list(ins["Out@GRAD"]), "I": list(ins["I"]),
                                    "X_W": list(ins["X"])},
                {"Out": list(outs["X@GRAD"])}, attrs, clear)
    if op.type == "read_from_array_grad":
        attrs[_FLUIDLITE_FORM] = op.type
        return ("write_to_array", {"X": list(ins["Out@GRAD"]), "I": list(ins["I"])},
                {"Out": list(outs["X@GRAD"])}, attrs, False)
    if op.type == "sum_tensor_array" and ins.get("X"):
        attrs[_FLUIDLITE_FORM] = op.type
        return "sum", {"X": list(ins["X"])}, {"Out": list(outs["Out"])}, attrs, False
    return None


def _fluidlite_array_grad(op_type: str, inputs: Dict[str, List[str]],
                          outputs: Dict[str, List[str]], attrs: Dict[str, Any]
                          ) -> Optional[List[Tuple[str, Dict[str, List[str]],
                                                   Dict[str, List[str]], Dict[str, Any]]]]:
    """The inverse of ``_paddle_array_grad`` for an OpDesc carrying ``_FLUIDLITE_FORM``, and
    Paddle's own gradient of ``write_to_array`` (a ``read_from_array`` with ``X_W``, which
    fluidlite's read_from_array lacks) as ``write_to_array_grad``; None for any other op."""
    form = attrs.get(_FLUIDLITE_FORM)
    if form is None and op_type == "read_from_array" and \
            [a for a in inputs.get("X_W", []) if a != "@EMPTY@"]:
        form = "write_to_array_grad"
    if not isinstance(form, str):
        return None
    attrs = {k: v for k, v in attrs.items() if k != _FLUIDLITE_FORM}
    if op_type == "read_from_array" and form.startswith("write_to_array_grad"):
        dout, index = inputs.get("X", []), inputs.get("I", [])
        ops = [("write_to_array_grad", {"X": inputs.get("X_W", []), "I": index,
                                        "Out@GRAD": dout},
                {"X@GRAD": outputs.get("Out", [])}, attrs)]
        if form.endswith("+clear"):
            common = {k: v for k, v in attrs.items() if k in registry.COMMON_ATTRS}
            ops.append(("clear_tensor_array_entry", {"X": dout, "I": index}, {"Out": dout},
                        common))
        return ops
    if op_type == "write_to_array" and form == "read_from_array_grad":
        return [(form, {"I": inputs.get("I", []), "Out@GRAD": inputs.get("X", [])},
                 {"X@GRAD": outputs.get("Out", [])}, attrs)]
    if op_type == "sum" and form == "sum_tensor_array":
        return [(form, inputs, outputs, attrs)]
    return None


def _paddle_grad_inputs(block: Any, op: Any) -> Dict[str, List[str]]:
    """The inputs of ``_PADDLE_GRAD_INPUTS`` that grad ``op`` lacks, taken from the forward op
    in ``block`` that wrote the shared variable."""
    if op.type not in _PADDLE_GRAD_INPUTS:
        return {}
    fwd_type, shared, slots = _PADDLE_GRAD_INPUTS[op.type]
    key = op.inputs.get(shared)
    missing = [s for s in slots if not op.inputs.get(s)]
    if not key or not missing:
        return {}
    for fwd in block.ops:
        if fwd.type == fwd_type and fwd.outputs.get(shared) == key:
            return {s: list(fwd.inputs.get(s) or fwd.outputs[s]) for s in missing
                    if fwd.inputs.get(s) or fwd.outputs.get(s)}
    return {}


def _reserve_space(bd: Any, od: Any, y_name: str) -> None:
    """Give a training-mode ``batch_norm`` OpDesc the ``ReserveSpace`` output Paddle 2.6's
    kernel writes (a float32 [-1] temporary, as Paddle declares it)."""
    name = y_name + _RESERVE_SUFFIX
    if not any(v.name == name for v in bd.vars):
        vd = bd.vars.add(name=name)
        vd.type.type = int(VarType.LOD_TENSOR)
        vd.type.lod_tensor.tensor.data_type = int(VarType.FP32)
        vd.type.lod_tensor.tensor.dims.append(-1)
        vd.type.lod_tensor.lod_level = 0
        vd.persistable = False
        vd.stop_gradient = True
    od.outputs.add(parameter="ReserveSpace", arguments=[name])


def program_to_bytes(program: Any) -> bytes:
    """Serialized ``ProgramDesc`` of ``program`` (what fluid 1.8 writes to ``__model__``)."""
    return program_to_desc(program).SerializeToString(deterministic=True)


# -- reading ----------------------------------------------------------------------------------
def _shortest_f32(x: float) -> float:
    """The float a float32 attr was written from, when that float is the shortest decimal
    that rounds to it (0.2 comes back as 0.2, not 0.20000000298)."""
    if not math.isfinite(x):
        return x
    return float(str(np.float32(x)))


def _attr_value(a: Any, block_ref: Any) -> Any:
    t = a.type
    if t == INT:
        return a.i
    if t == FLOAT:
        return a.float64 if a.HasField("float64") else _shortest_f32(a.f)
    if t == STRING:
        return a.s.decode("utf-8", errors="replace")
    if t == INTS:
        return list(a.ints)
    if t == FLOATS:
        if len(a.float64s) == len(a.floats) and a.float64s:
            return list(a.float64s)
        return [_shortest_f32(f) for f in a.floats]
    if t == STRINGS:
        return [s.decode("utf-8", errors="replace") for s in a.strings]
    if t == BOOLEAN:
        return a.b
    if t == BOOLEANS:
        return list(a.bools)
    if t == BLOCK:
        return block_ref(a.block_idx)
    if t == LONG:
        return a.l
    if t == BLOCKS:
        return [block_ref(i) for i in a.blocks_idx]
    if t == LONGS:
        return list(a.longs)
    if t == FLOAT64S:
        return list(a.float64s)
    if t == VAR:
        return a.var_name
    if t == VARS:
        return list(a.vars_name)
    if t == FLOAT64:
        return a.float64
    if t == SCALAR:
        return _scalar(a.scalar)
    if t == SCALARS:
        return [_scalar(x) for x in a.scalars]
    raise ValueError(f"unknown attribute type {t}")


def _scalar(x: Any) -> Any:
    """A Paddle 2.5+ Scalar attr: the value of whichever field is set."""
    for name in ("b", "i", "r"):
        if x.HasField(name):
            return getattr(x, name)
    raise ValueError("a SCALAR attribute holds no value fluidlite can read (complex?)")


_OpTuple = Tuple[str, Dict[str, List[str]], Dict[str, List[str]], Dict[str, Any]]


class _Rewriter:
    """What an op mapping may ask of the block being read: a declared var's shape/dtype, and
    new temporaries (declared in the block, named ``<base>.paddle2_tmp_<n>``)."""

    def __init__(self, program: Any, block: Any) -> None:
        self.program, self.block = program, block

    def var(self, name: str) -> Any:
        b = self.block
        while b is not None:
            if name in b.vars:
                return b.vars[name]
            b = self.program.blocks[b.parent_idx] if 0 <= b.parent_idx < len(
                self.program.blocks) else None
        return None

    def tmp(self, base: str, like: str, dtype: Any = None, shape: Any = None) -> str:
        src = self.var(like)
        n = 0
        while f"{base}.paddle2_tmp_{n}" in self.block.vars:
            n += 1
        name = f"{base}.paddle2_tmp_{n}"
        # its dtype is the mapping's choice, not the file's (_adopt_kernel_dtypes keeps it)
        self.program.__dict__.setdefault("_loader_mapped", set()).add(name)
        self.block.vars[name] = Variable(
            self.block, name=name,
            shape=shape if shape is not None else (src.shape if src is not None else ()),
            dtype=dtype if dtype is not None else (src.dtype if src is not None else None),
            lod_level=src.lod_level if src is not None else 0)
        return name


def _one(slots: Dict[str, List[str]], name: str) -> Optional[str]:
    args = [a for a in slots.get(name, []) if a != "@EMPTY@"]
    return args[0] if args else None


def _matmul_v2_attrs(attrs: Dict[str, Any]) -> Dict[str, Any]:
    attrs = dict(attrs)
    attrs["transpose_X"] = bool(attrs.pop("trans_x", False))
    attrs["transpose_Y"] = bool(attrs.pop("trans_y", False))
    attrs["alpha"] = 1.0
    return attrs


# ops whose full reduction Paddle 2.x declares 0-D where fluid (and fluidlite) give [1]
_ZERO_D_OPS = ("mean", "arg_max", "arg_min", "reduce_sum", "reduce_mean", "reduce_max",
               "reduce_min", "reduce_prod", "reduce_all", "reduce_any", "logsumexp")


def _map_op(op_type: str, inputs: Dict[str, List[str]], outputs: Dict[str, List[str]],
            attrs: Dict[str, Any], rw: Optional[_Rewriter] = None) -> List[_OpTuple]:
    """Paddle 2.x op spellings -> fluidlite's op(s) computing the same numbers (a grad op
    ``<type>_grad`` maps as its forward op does). Raises ValueError for a combination fluidlite
    cannot express. A full reduction whose output the file declares 0-D (Paddle 2.x) is
    followed by a ``reshape2`` to ``[]``, so fetched values have Paddle's shape."""
    ops = [_check_paddle2_attrs(*op) for op in _map_one(op_type, inputs, outputs, attrs, rw)]
    last_type, last_in, last_out, last_attrs = ops[-1]
    out = _one(last_out, "Out")
    ov = rw.var(out) if rw is not None and out else None
    if last_type in _ZERO_D_OPS and ov is not None and ov.shape == () and rw is not None:
        t = rw.tmp(out, out, shape=(1,))
        xshape = rw.tmp(out, out, shape=(0, 1))
        common = {k: v for k, v in last_attrs.items() if k in registry.COMMON_ATTRS}
        ops[-1] = (last_type, last_in, dict(last_out, Out=[t]), last_attrs)
        ops.append(("reshape2", {"X": [t]}, {"Out": [out], "XShape": [xshape]},
                    dict(common, shape=[])))
    return ops


def _check_paddle2_attrs(op_type: str, inputs: Dict[str, List[str]],
                         outputs: Dict[str, List[str]], attrs: Dict[str, Any]) -> _OpTuple:
    """The op without the Paddle 2.x attributes of ``_PADDLE2_NEUTRAL_ATTRS`` that hold their
    neutral value; a ValueError for one that does not (fluidlite would compute another
    function)."""
    base = op_type[:-len("_grad")] if op_type.endswith("_grad") else op_type
    neutral = _PADDLE2_NEUTRAL_ATTRS.get(base)
    if not neutral or not any(k in attrs for k in neutral):
        return op_type, inputs, outputs, attrs
    kept, bad = dict(attrs), []
    for name, want in neutral.items():
        if name not in kept:
            continue
        value = kept.pop(name)
        same = want is not _ANY_VALUE and (
            list(value) == list(want) if isinstance(want, list) and
            isinstance(value, (list, tuple)) else value == want)
        if not same:
            bad.append((name, value, "these values" if want is _ANY_VALUE else repr(want)))
    if bad:
        raise ValueError(f"{op_type} has the Paddle 2.x attribute(s) "
                         f"{', '.join(f'{n}={v!r}' for n, v, _ in bad)}, which fluidlite's "
                         f"{base} does not implement (it computes fluid 1.8's {base}: "
                         f"{', '.join(f'{n} {w}' for n, _, w in bad)} fluid cannot express)")
    return op_type, inputs, outputs, kept


def _map_one(op_type: str, inputs: Dict[str, List[str]], outputs: Dict[str, List[str]],
             attrs: Dict[str, Any], rw: Optional[_Rewriter] = None) -> List[_OpTuple]:
    """The op mapping proper (see ``_map_op``): the first of ``_MAPPINGS`` that knows the op
    decides; an op none of them knows is kept as it is."""
    folded = _fluidlite_array_grad(op_type, inputs, outputs, attrs)
    if folded is not None:
        return folded
    if op_type == "sum" and rw is not None and inputs.get("X") and all(
            getattr(rw.var(n), "type", None) == VarType.LOD_TENSOR_ARRAY for n in inputs["X"]):
        # Paddle's sum of array gradients (an array read twice) is fluidlite's position-wise
        # sum_tensor_array
        return [("sum_tensor_array", inputs, outputs, attrs)]
    op_type = _FLUID_GRAD_TYPES.get(op_type, op_type)
    grad = op_type.endswith("_grad")
    base = op_type[:-len("_grad")] if grad else op_type
    for mapping in _MAPPINGS:
        mapped = mapping(op_type, base, grad, inputs, outputs, attrs, rw)
        if mapped is not None:
            return mapped
    return [(op_type, inputs, outputs, attrs)]


def _map_paddle2_attrs(op_type: str, base: str, grad: bool, inputs: Dict[str, List[str]],
                       outputs: Dict[str, List[str]], attrs: Dict[str, Any],
                       rw: Optional[_Rewriter]) -> Optional[List[_OpTuple]]:
    """fluid ops that Paddle 2.x spells with other attributes (``matmul_v2``'s ``trans_x``,
    ``str_value``, ``output_padding``, ``target_shape``, ``start_axis``/``stop_axis``, flip's
    ``axis``, softplus's ``beta``/``threshold``), or None when the op is not one of them."""
    sfx = "_grad" if grad else ""
    if base == "matmul_v2":
        return _map_matmul_v2(grad, inputs, outputs, attrs, rw)
    if op_type in _STR_VALUE_OPS and attrs.get("str_value"):
        attrs = dict(attrs)
        attrs["value"] = _str_value(attrs["str_value"], attrs.get("dtype"))
        del attrs["str_value"]          # now in value exactly; the writer spells it again
        return [(op_type, inputs, outputs, attrs)]
    if base in ("conv2d_transpose", "depthwise_conv2d_transpose"):
        return _map_conv2d_transpose(grad, inputs, outputs, attrs, rw)
    if op_type == "allclose" and any(isinstance(attrs.get(k), str) for k in ("rtol", "atol")):
        # Paddle 2.x declares allclose's tolerances STRING ("1e-05"), fluid 1.8 FLOAT
        attrs = dict(attrs)
        for k in ("rtol", "atol"):
            if isinstance(attrs.get(k), str):
                try:
                    attrs[k] = float(attrs[k])
                except ValueError:
                    raise ValueError(f"allclose's {k} {attrs[k]!r} is not a number") from None
        return [(op_type, inputs, outputs, attrs)]
    if base == "expand_as_v2" and attrs.get("target_shape"):
        attrs = dict(attrs)
        attrs["shape"] = [int(d) for d in attrs.pop("target_shape")]
        return [("expand_v2" + sfx, {k: v for k, v in inputs.items() if k != "Y"}, outputs,
                 attrs)]
    if base == "flatten_contiguous_range":
        # flattening dims 1..last is fluid's flatten2(axis=1) (same XShape, same grad slots),
        # which every consumer of fluid programs (ONNX export included) knows
        src = _one(inputs, "XShape" if grad else "X")
        sv = rw.var(src) if rw is not None and src else None
        rank = (len(sv.shape) - (1 if grad else 0)) if sv is not None else 0
        start, stop = int(attrs.get("start_axis", 1)), int(attrs.get("stop_axis", 1))
        if rank >= 2 and start % rank == 1 and stop % rank == rank - 1:
            attrs = {k: v for k, v in attrs.items() if k not in ("start_axis", "stop_axis")}
            return [("flatten2" + sfx, inputs, outputs, dict(attrs, axis=1))]
    renames = _PADDLE2_ATTR_NAMES.get(base, {})
    if any(new in attrs for new in renames.values()):
        # Paddle 2.x renamed these (flip's and roll's ``dims`` -> ``axis``, trace's ``dim1`` /
        # ``dim2`` -> ``axis1`` / ``axis2``; found with real 2.6 files: read without them a
        # roll rolls the flattened tensor); fluidlite writes both names, reads either
        attrs = dict(attrs)
        for old_name, new_name in renames.items():
            if new_name not in attrs:
                continue
            value = attrs.pop(new_name)
            if isinstance(value, (list, tuple)) or base in ("flip", "roll"):
                value = [int(v) for v in (value if isinstance(value, (list, tuple)) else [value])]
            have = attrs.get(old_name)
            if have is None or (isinstance(have, (list, tuple)) and not have):
                attrs[old_name] = value
            elif (list(have) if isinstance(have, (list, tuple)) else have) != value:
                raise ValueError(f"{base} has {old_name} {have} and {new_name} {value}, which "
                                 f"differ")
        return [(op_type, inputs, outputs, attrs)]
    if base == "softplus" and float(attrs.get("beta", 1.0)) == 1.0 and \
            float(attrs.get("threshold", 20.0)) >= 15.0:
        # Paddle 2.x: x when beta*x > threshold, else ln(1+exp(beta*x))/beta. With beta 1 and
        # a threshold >= 15 that is fluid's ln(1+exp(x)) in float32 (they differ by
        # ln(1+exp(-t)) <= 3.1e-7, below float32's spacing at t); other values are refused
        # (``_PADDLE2_NEUTRAL_ATTRS``)
        attrs = {k: v for k, v in attrs.items() if k not in ("beta", "threshold")}
        return [(op_type, inputs, outputs, attrs)]
    return None


def _map_matmul_v2(grad: bool, inputs: Dict[str, List[str]], outputs: Dict[str, List[str]],
                   attrs: Dict[str, Any], rw: Optional[_Rewriter]) -> List[_OpTuple]:
    """``matmul_v2`` (and its grad) -> fluid's ``matmul``; a 1-D . 1-D product the file
    declares 0-D gets a ``reshape2`` to ``[]`` after it."""
    x, y, out = _one(inputs, "X"), _one(inputs, "Y"), _one(outputs, "Out")
    xv, yv, ov = (rw.var(n) if rw is not None and n else None for n in (x, y, out))
    if not grad and xv is not None and yv is not None and ov is not None and \
            len(xv.shape) == len(yv.shape) == 1 and ov.shape == ():
        # 1-D . 1-D is 0-D in Paddle 2.5+ (fluid's matmul gives [1]): reshape it to []
        assert rw is not None
        t, xshape = rw.tmp(out, x, shape=(1,)), rw.tmp(out, x, shape=(0, 1))
        common = {k: v for k, v in attrs.items() if k in registry.COMMON_ATTRS}
        return [("matmul", inputs, {"Out": [t]}, _matmul_v2_attrs(attrs)),
                ("reshape2", {"X": [t]}, {"Out": [out], "XShape": [xshape]},
                 dict(common, shape=[]))]
    return [("matmul" + ("_grad" if grad else ""), inputs, outputs, _matmul_v2_attrs(attrs))]


def _map_conv2d_transpose(grad: bool, inputs: Dict[str, List[str]],
                          outputs: Dict[str, List[str]], attrs: Dict[str, Any],
                          rw: Optional[_Rewriter]) -> List[_OpTuple]:
    """``conv2d_transpose`` / ``depthwise_conv2d_transpose`` (and grads) -> fluid's
    ``conv2d_transpose``. Depthwise is conv2d_transpose with groups = channels; 2.x's
    ``output_padding`` extends the output at the bottom/right, which fluid expresses as a
    larger ``output_size`` (read from the output's declared spatial dims)."""
    attrs = dict(attrs)
    extra = [int(v) for v in attrs.pop("output_padding", []) or []]
    if any(extra) and not attrs.get("output_size"):
        out = _one(inputs, "Output@GRAD") if grad else _one(outputs, "Output")
        ov = rw.var(out) if rw is not None and out else None
        layout = str(attrs.get("data_format", "NCHW")).upper()
        dims = tuple(ov.shape[2:4] if layout != "NHWC" else ov.shape[1:3]) \
            if ov is not None and len(ov.shape) == 4 else ()
        if len(dims) != 2 or any(d <= 0 for d in dims):
            raise ValueError(f"output_padding {extra} needs the output's spatial size, "
                             f"which the program does not declare (got "
                             f"{list(ov.shape) if ov is not None else None})")
        attrs["output_size"] = [int(d) for d in dims]
    return [("conv2d_transpose" + ("_grad" if grad else ""), inputs, outputs, attrs)]


def _map_renamed_ops(op_type: str, base: str, grad: bool, inputs: Dict[str, List[str]],
                     outputs: Dict[str, List[str]], attrs: Dict[str, Any],
                     rw: Optional[_Rewriter]) -> Optional[List[_OpTuple]]:
    """Paddle 2.x ops that are a fluid op under another name (``sync_batch_norm``, ``empty``,
    ``silu``, ``unbind``, ``*_interp_v2``, ``gather`` with ``axis``, ``memcpy``, the XShape-less
    ``reshape`` / ``transpose`` of fluid's first versions), or None."""
    sfx = "_grad" if grad else ""
    if base == "sync_batch_norm":   # one process: the statistics of the whole batch
        return [("batch_norm" + sfx, inputs, outputs, attrs)]
    if op_type == "empty":          # uninitialized memory in Paddle; zeros here
        return [("fill_constant", inputs, outputs,
                 {k: v for k, v in attrs.items() if k != "value"})]
    if op_type in ("reshape", "transpose"):   # the first versions: no XShape output
        return [(op_type + "2", inputs, outputs, attrs)]
    if op_type == "memcpy":         # a copy to another place: one place here
        return [("assign", inputs, outputs, {k: v for k, v in attrs.items()
                                             if k != "dst_place_type"})]
    if base == "silu":              # 2.x's x * sigmoid(x) is fluid's swish with beta 1
        return [("swish" + sfx, inputs, outputs, dict(attrs, beta=1.0))]
    if op_type == "unbind":         # its gradient is written as a stack op by Paddle
        return [("unstack", inputs, {"Y": outputs.get("Out", [])},
                 dict(attrs, num=len(outputs.get("Out", []))))]
    if base in ("bilinear_interp_v2", "nearest_interp_v2", "linear_interp_v2",
                "trilinear_interp_v2", "bicubic_interp_v2"):
        x = _one(inputs, "X")
        xv = rw.var(x) if rw is not None and x else None
        return [(base[:-len("_v2")] + sfx, inputs, outputs,
                 _interp_v2_attrs(attrs, xv.shape if xv is not None else None, inputs))]
    if base == "gather" and attrs.get("axis", 0) not in (0, None):
        # Paddle 2.x gather along ``axis`` is index_select (same slots, same numbers)
        attrs = dict(attrs)
        attrs["dim"] = int(attrs.pop("axis"))
        attrs.pop("overwrite", None)
        return [("index_select" + sfx, inputs, outputs, attrs)]
    return None


def _map_composites(op_type: str, base: str, grad: bool, inputs: Dict[str, List[str]],
                    outputs: Dict[str, List[str]], attrs: Dict[str, Any],
                    rw: Optional[_Rewriter]) -> Optional[List[_OpTuple]]:
    """Paddle 2.x ops that become several fluid ops (softmax_with_cross_entropy without
    softmax, clip with tensors, ``reduce_*`` with ``out_dtype``, 2.x ``momentum`` / ``adamw``)
    or that fluidlite refuses (adam with ``use_global_beta_pow``), or None."""
    if base == "softmax_with_cross_entropy" and attrs.get("use_softmax", True) is False:
        return _cross_entropy_without_softmax(grad, inputs, outputs, attrs, rw)
    if base == "clip" and (_one(inputs, "Min") or _one(inputs, "Max")):
        if grad:
            raise ValueError("clip_grad with Min/Max tensors is not supported by fluidlite "
                             "(only the forward op maps, onto elementwise_max/min)")
        return _clip_tensors(inputs, outputs, attrs, rw)
    if base.startswith("reduce_") and attrs.get("out_dtype", -1) not in (-1, None):
        mapped = _reduce_out_dtype(op_type, grad, inputs, outputs, attrs, rw)
        if mapped is not None:
            return mapped
    if op_type == "momentum":
        return _momentum(inputs, outputs, attrs, rw)
    if op_type == "adam" and attrs.get("use_global_beta_pow"):
        raise ValueError("adam with use_global_beta_pow=True (beta pows updated by a separate "
                         "op) is not supported by fluidlite")
    if op_type == "adamw":
        return _adamw(inputs, outputs, attrs, rw)
    return None


def _reduce_out_dtype(op_type: str, grad: bool, inputs: Dict[str, List[str]],
                      outputs: Dict[str, List[str]], attrs: Dict[str, Any],
                      rw: Optional[_Rewriter]) -> Optional[List[_OpTuple]]:
    """A ``reduce_*`` (grad) op with an ``out_dtype`` other than X's: a ``cast`` to it before
    the reduction (the grad: the gradient arrives in ``out_dtype``, so X@GRAD is cast back to
    X's dtype after it). None when the dtypes agree or are not declared."""
    x = _one(inputs, "X")
    xv = rw.var(x) if rw is not None and x else None
    want = VarType(int(attrs["out_dtype"]))
    if xv is None or xv.dtype is None or xv.dtype == want:
        return None
    attrs = dict(attrs, in_dtype=-1, out_dtype=-1)
    if not grad:
        cast = rw.tmp(_one(outputs, "Out"), x, dtype=want)
        return [("cast", {"X": [x]}, {"Out": [cast]}, {"in_dtype": xv.dtype, "out_dtype": want}),
                (op_type, dict(inputs, X=[cast]), outputs, attrs)]
    dx = _one(outputs, "X@GRAD")
    if dx is None:
        return None
    t = rw.tmp(dx, x, dtype=want)
    return [(op_type, inputs, {"X@GRAD": [t]}, attrs),
            ("cast", {"X": [t]}, {"Out": [dx]}, {"in_dtype": want, "out_dtype": xv.dtype})]


# the Paddle 2.x -> fluid op mappings, tried in this order by ``_map_one``
_MAPPINGS = (_map_paddle2_attrs, _map_renamed_ops, _map_composites)


def _interp_v2_attrs(attrs: Dict[str, Any], x_shape: Optional[Tuple[int, ...]],
                     inputs: Dict[str, List[str]]) -> Dict[str, Any]:
    """``*_interp_v2``'s per-dim ``scale`` list -> fluid's one ``scale`` (the sizes ``out_*`` and
    the size tensors carry over unchanged).

    With a scale and ``align_corners`` false, Paddle 2.x maps output to input coordinates by
    1/scale where fluid uses in/out; the two agree exactly when in * scale is an integer, which
    is checked on the input's static spatial dims (a non-integer product is refused)."""
    attrs = dict(attrs)
    scales = attrs.pop("scale", []) or []
    if not isinstance(scales, list):
        scales = [scales]
    scales = [float(x) for x in scales if float(x) > 0]
    if scales:
        if any(x != scales[0] for x in scales):
            raise ValueError(f"per-dim scales {scales} differ; fluidlite's interpolation takes "
                             f"one scale (give out sizes instead)")
        attrs["scale"] = scales[0]
        sized = any(int(attrs.get(k, -1) or -1) > 0 for k in ("out_d", "out_h", "out_w")) or \
            _one(inputs, "OutSize") or _one(inputs, "SizeTensor")
        if x_shape is not None and not attrs.get("align_corners", True) and not sized:
            nchw = str(attrs.get("data_layout", "NCHW")).upper().startswith("NC")
            spatial = x_shape[2:] if nchw else x_shape[1:-1]
            bad = [d for d in spatial if d > 0 and (d * scales[0]) != int(d * scales[0])]
            if bad:
                raise ValueError(f"scale {scales[0]} times input size {bad[0]} is not an "
                                 f"integer: Paddle 2.x's 1/scale sampling then differs from "
                                 f"fluid's in/out ratio (give out sizes instead)")
    return attrs


def _cross_entropy_without_softmax(grad: bool, inputs: Dict[str, List[str]],
                                   outputs: Dict[str, List[str]], attrs: Dict[str, Any],
                                   rw: Optional[_Rewriter]) -> List[_OpTuple]:
    """``softmax_with_cross_entropy(use_softmax=False)``: Logits already are probabilities, so
    Loss = cross_entropy(Logits, Label) and Softmax = Logits (Paddle 2.x
    ``F.cross_entropy(..., use_softmax=False)``); its grad is cross_entropy_grad on Softmax."""
    ce = {"soft_label": bool(attrs.get("soft_label", False)),
          "ignore_index": int(attrs.get("ignore_index", -100))}
    common = {k: v for k, v in attrs.items() if k in registry.COMMON_ATTRS}
    axis = int(attrs.get("axis", -1))
    probs = _one(inputs, "Softmax" if grad else "Logits")
    v = rw.var(probs) if rw is not None and probs else None
    if axis != -1 and not (v is not None and axis == len(v.shape) - 1):
        raise ValueError(f"use_softmax=False with axis={axis} (not the last dim) is not "
                         f"supported by fluidlite")
    if grad:
        return [("cross_entropy_grad",
                 {"X": inputs.get("Softmax", []), "Label": inputs.get("Label", []),
                  "Y@GRAD": inputs.get("Loss@GRAD", [])},
                 {"X@GRAD": outputs.get("Logits@GRAD", [])}, dict(ce, **common))]
    ops: List[_OpTuple] = [("cross_entropy", {"X": inputs["Logits"], "Label": inputs["Label"]},
                            {"Y": outputs.get("Loss", [])}, dict(ce, **common))]
    if _one(outputs, "Softmax"):
        ops.append(("assign", {"X": inputs["Logits"]}, {"Out": outputs["Softmax"]}, common))
    return ops


def _clip_tensors(inputs: Dict[str, List[str]], outputs: Dict[str, List[str]],
                  attrs: Dict[str, Any], rw: Optional[_Rewriter]) -> List[_OpTuple]:
    """clip with ``Min``/``Max`` tensors (1 element each): Out = min(max(X, Min), Max) (the
    ``min``/``max`` attrs for an absent tensor). The gradient of the pair equals clip's
    (dOut where Min < X < Max)."""
    assert rw is not None
    common = {k: v for k, v in attrs.items() if k in registry.COMMON_ATTRS}
    x, out = _one(inputs, "X"), _one(outputs, "Out")
    lo, hi = _one(inputs, "Min"), _one(inputs, "Max")
    ops: List[_OpTuple] = []
    cur = x
    if lo is None:
        mid = rw.tmp(out, x)
        ops.append(("clip", {"X": [x]}, {"Out": [mid]},
                    dict(common, min=float(attrs.get("min", 0.0)), max=float("inf"))))
        cur = mid
    else:
        mid = rw.tmp(out, x)
        ops.append(("elementwise_max", {"X": [x], "Y": [lo]}, {"Out": [mid]},
                    dict(common, axis=-1)))
        cur = mid
    if hi is None:
        ops.append(("clip", {"X": [cur]}, {"Out": [out]},
                    dict(common, min=float("-inf"), max=float(attrs.get("max", 0.0)))))
    else:
        ops.append(("elementwise_min", {"X": [cur], "Y": [hi]}, {"Out": [out]},
                    dict(common, axis=-1)))
    return ops


def _momentum(inputs: Dict[str, List[str]], outputs: Dict[str, List[str]],
              attrs: Dict[str, Any], rw: Optional[_Rewriter]) -> List[_OpTuple]:
    """Paddle 2.x momentum folds ``rescale_grad`` and an L2 ``regularization_method`` into the
    op: Grad' = rescale_grad * Grad + regularization_coeff * Param, then fluid's momentum."""
    attrs = dict(attrs)
    rescale = float(attrs.pop("rescale_grad", 1.0))
    method = attrs.pop("regularization_method", "") or ""
    coeff = float(attrs.pop("regularization_coeff", 0.0))
    if method not in ("", "l2_decay"):
        raise ValueError(f"momentum regularization_method {method!r} is not supported by "
                         f"fluidlite (expected '' or 'l2_decay')")
    common = {k: v for k, v in attrs.items() if k in registry.COMMON_ATTRS}
    ops: List[_OpTuple] = []
    g, param = _one(inputs, "Grad"), _one(inputs, "Param")
    if rescale != 1.0 and g is not None:
        assert rw is not None
        t = rw.tmp(g, g)
        ops.append(("scale", {"X": [g]}, {"Out": [t]}, dict(common, scale=rescale)))
        g = t
    if method == "l2_decay" and coeff != 0.0 and g is not None and param is not None:
        assert rw is not None
        d = rw.tmp(g, param)
        ops.append(("scale", {"X": [param]}, {"Out": [d]}, dict(common, scale=coeff)))
        t = rw.tmp(g, g)
        ops.append(("elementwise_add", {"X": [g], "Y": [d]}, {"Out": [t]}, dict(common)))
        g = t
    if g is not None:
        inputs = dict(inputs, Grad=[g])
    ops.append(("momentum", inputs, outputs, attrs))
    return ops


def _adamw(inputs: Dict[str, List[str]], outputs: Dict[str, List[str]],
           attrs: Dict[str, Any], rw: Optional[_Rewriter]) -> List[_OpTuple]:
    """Paddle 2.x adamw: with ``with_decay``, Param *= 1 - lr * lr_ratio * coeff first, then
    adam with learning rate lr * lr_ratio."""
    assert rw is not None
    attrs = dict(attrs)
    coeff = float(attrs.pop("coeff", 0.01))
    ratio = float(attrs.pop("lr_ratio", 1.0))
    decay = bool(attrs.pop("with_decay", False))
    common = {k: v for k, v in attrs.items() if k in registry.COMMON_ATTRS}
    if attrs.get("use_global_beta_pow"):
        raise ValueError("adamw with use_global_beta_pow=True is not supported by fluidlite")
    ops: List[_OpTuple] = []
    lr, param = _one(inputs, "LearningRate"), _one(inputs, "Param")
    if ratio != 1.0:
        t = rw.tmp(lr, lr)
        ops.append(("scale", {"X": [lr]}, {"Out": [t]}, dict(common, scale=ratio)))
        lr = t
        inputs = dict(inputs, LearningRate=[lr])
    if decay and coeff != 0.0:
        f = rw.tmp(param, lr)
        ops.append(("scale", {"X": [lr]}, {"Out": [f]},
                    dict(common, scale=-coeff, bias=1.0, bias_after_scale=True)))
        ops.append(("elementwise_mul", {"X": [param], "Y": [f]}, {"Out": [param]},
                    dict(common, axis=-1)))
    ops.append(("adam", inputs, outputs, attrs))
    return ops


def program_from_bytes(data: bytes, source: str = "<bytes>") -> Any:
    """Rebuild a Program from a serialized ``ProgramDesc``; ``PaddleFormatError`` names
    ``source`` (and the block/var/op) on any problem."""
    msg = _parse_program_desc(data, source)
    p = Program()
    p.blocks = []
    nblocks = len(msg.blocks)

    def block_ref(i: int) -> Any:
        # a placeholder: the block may not be built yet; _resolve_blocks swaps it in at the end
        if not 0 <= i < nblocks:
            raise PaddleFormatError(f"{source}: a block attribute refers to block {i}, but "
                                    f"the program has {nblocks}")
        return ("@block", i)

    ops: List[Any] = []
    for bi, bd in enumerate(msg.blocks):
        where = f"{source}: block {bi}"
        if bd.idx != bi:
            raise PaddleFormatError(f"{where}: bad idx {bd.idx}")
        check_parent(bi, bd.parent_idx, lambda why: PaddleFormatError(f"{source}: {why}"))
        b = Block(p, bi, bd.parent_idx)
        b.forward_block_idx = bd.forward_block_idx if bd.HasField("forward_block_idx") else -1
        for vd in bd.vars:
            if vd.name.endswith((_RESERVE_SUFFIX, _WIDEN_SUFFIX)):
                continue        # what the writer added for Paddle (ReserveSpace, widening)
            _read_var(b, vd, f"{where} variable '{vd.name}'")
        if b.forward_block_idx != -1:       # a grad block written in Paddle's form
            _while_grad.redeclare_forward_locals(
                p, b, [a for od in bd.ops for v in list(od.inputs) + list(od.outputs)
                       for a in v.arguments], lambda n, b=b: _declared(p, b, n))
        widened: Dict[str, str] = {}        # the writer's widening casts: cast output -> X
        for oi, od in enumerate(bd.ops):
            cast_to = [a for v in od.outputs for a in v.arguments] if od.type == "cast" else []
            if len(cast_to) == 1 and cast_to[0].endswith(_WIDEN_SUFFIX):
                widened[cast_to[0]] = next(a for v in od.inputs for a in v.arguments)
                continue
            if widened:             # (the parsed message is this reader's own)
                for v in od.inputs:
                    for j, a in enumerate(v.arguments):
                        if a in widened:
                            v.arguments[j] = widened[a]
            for op in _read_op(p, b, od, block_ref, source, bi, oi):
                ops.append(op)
                b.ops.append(op)
        p.blocks.append(b)
    for op in ops:
        for k, a in list(op.attrs.items()):
            op.attrs[k] = _resolve_blocks(p, a)
    check_tree(p, lambda why: PaddleFormatError(f"{source}: {why}"))
    _mark_fed_vars(p)
    _adopt_kernel_dtypes(p)
    p._relink()
    p.current_block_idx = 0
    p._version = 0
    return p


def _mark_fed_vars(p: Any) -> None:
    """The program's inputs are data, as when the program was built: the variables the file's
    ``feed`` ops write, and (a training program saved without feed ops) the non-persistable
    tensors of block 0 that ops read and no op writes. The executor then checks a feed's
    shape only where the file sets ``need_check_feed`` (``fluid.data`` /
    ``paddle.static.data``), as Paddle's ``Executor.run`` does: a variable of
    ``fluid.layers.data`` or of a fluid <= 1.5 file takes other sizes than the saved ones (a
    fully-convolutional model on a larger image), and every shape is inferred again from what
    is fed when the program runs."""
    block = p.blocks[0]
    written = {n for b in p.blocks for op in b.ops if op.type != "feed"
               for n in op.output_arg_names}
    inputs = {n for b in p.blocks for op in b.ops
              for n in (op.output_arg_names if op.type == "feed" else op.input_arg_names)}
    for name, var in block.vars.items():
        if name in inputs and name not in written and not var.persistable and \
                var.type == VarType.LOD_TENSOR:
            var.__dict__["is_data"] = True      # no journal: the program is new


def _adopt_kernel_dtypes(p: Any) -> None:
    """Give each op's non-persistable outputs the dtype fluidlite's inference declares, where
    Paddle's file says otherwise. Paddle leaves some intermediate outputs declared with a dtype
    its kernels never write (``sequence_pool``'s MaxIndex is declared like the input but is
    int32; the ``rnn`` op's Reserve is declared uint8 but holds what the kernel saves for the
    backward): the declaration follows what the kernel produces, so the plan's dtype contract
    holds for loaded programs too. An op whose inference needs what the file does not say
    keeps the file's dtypes."""
    mapped = p.__dict__.pop("_loader_mapped", set())
    for b in p.blocks:
        for op in b.ops:
            if not registry.has_op(op.type):
                continue
            opdef = registry.get_op_def(op.type)
            if getattr(opdef, "sub_block_op", False):
                continue
            try:
                specs = [_in_spec(b, op, s) for s in opdef.in_slots]
                result = opdef.run_infer(specs, {k: v for k, v in op.attrs.items()
                                                 if k not in registry.COMMON_ATTRS}) or {}
            except Exception:        # noqa: BLE001 -- best effort: the file's dtypes stay
                continue
            for slot, spec in result.items():
                specs_out = spec if isinstance(spec, list) else [spec]
                for n, sp in zip(op.outputs.get(slot, []), specs_out):
                    var = b._find_var_recursive(n)
                    dtype = getattr(sp, "dtype", None)
                    if var is None or var.persistable or dtype is None or var.dtype is None \
                            or n in mapped:
                        continue
                    dtype = convert_np_dtype_to_dtype_(dtype)
                    if var.dtype != dtype:
                        var._dtype = dtype


def _in_spec(b: Any, op: Any, slot: Any) -> Any:
    names_ = op.inputs.get(slot.name) or []
    specs = [None if n == "@EMPTY@" else b._spec_of(op, n) for n in names_]
    if slot.duplicable:
        return specs
    return specs[0] if specs else None


def _parse_program_desc(data: bytes, source: str) -> Any:
    """The ``ProgramDesc`` message in ``data``; PaddleFormatError when it does not parse or
    has no blocks."""
    from google.protobuf.message import DecodeError
    msg = messages()["ProgramDesc"]()
    try:
        msg.ParseFromString(bytes(data))
    except (DecodeError, RuntimeError, ValueError) as e:
        raise PaddleFormatError(f"{source} is not a valid Paddle ProgramDesc (truncated or "
                                f"corrupted protobuf: {e})") from None
    if not msg.blocks:
        raise PaddleFormatError(f"{source} is not a valid Paddle ProgramDesc: it has no blocks")
    _check_text(msg, source)
    return msg


def _check_text(msg: Any, source: str) -> None:
    """Every string field of ``msg`` is text: protobuf hands proto2 strings that are not
    UTF-8 back as bytes, which no name may be."""
    stack = [msg]
    while stack:
        m = stack.pop()
        for fd, value in m.ListFields():
            repeated = getattr(fd, "is_repeated", None)     # protobuf >= 6; older: label
            if repeated is None:
                repeated = fd.label == fd.LABEL_REPEATED
            values = value if repeated else [value]
            if fd.type == fd.TYPE_MESSAGE:
                stack.extend(values)
            elif fd.type == fd.TYPE_STRING and any(not isinstance(v, str) for v in values):
                raise PaddleFormatError(f"{source} is not a valid Paddle ProgramDesc: field "
                                        f"'{fd.full_name}' holds bytes that are not UTF-8 "
                                        f"text")


def _read_var(b: Any, vd: Any, vwhere: str) -> None:
    """Declare the VarDesc ``vd`` in block ``b``: a Parameter when the file marks it one and
    its shape is fully known, else a Variable. PaddleFormatError (naming ``vwhere``) for a var
    type or dtype fluidlite cannot hold, or a name declared twice."""
    try:
        vtype = VarType(vd.type.type)
    except ValueError:
        raise PaddleFormatError(f"{vwhere}: var type {vd.type.type} is not supported "
                                f"by fluidlite") from None
    shape: Tuple[int, ...] = ()
    dtype = None
    lod_level = 0
    tdesc = None
    if vtype == VarType.LOD_TENSOR and vd.type.HasField("lod_tensor"):
        tdesc, lod_level = vd.type.lod_tensor.tensor, vd.type.lod_tensor.lod_level
    elif vtype == VarType.SELECTED_ROWS and vd.type.HasField("selected_rows"):
        tdesc = vd.type.selected_rows
    elif vtype == VarType.LOD_TENSOR_ARRAY and vd.type.HasField("tensor_array"):
        tdesc, lod_level = vd.type.tensor_array.tensor, vd.type.tensor_array.lod_level
    if tdesc is not None:
        try:
            dtype = convert_np_dtype_to_dtype_(VarType(tdesc.data_type))
        except ValueError:
            raise PaddleFormatError(f"{vwhere}: data type {tdesc.data_type} is not "
                                    f"supported by fluidlite") from None
        # Paddle 2.6 declares some outputs with dims below -1 (instance_norm's
        # SavedMean is [-2]): every negative dim is an unknown one
        shape = tuple(max(int(d), -1) for d in tdesc.dims)
    if vd.name in b.vars:
        raise PaddleFormatError(f"{vwhere}: declared twice")
    kw: Dict[str, Any] = dict(type=vtype, name=vd.name, shape=shape, dtype=dtype,
                              lod_level=lod_level, need_check_feed=bool(vd.need_check_feed))
    if vd.is_parameter and tdesc is not None and shape and all(d > 0 for d in shape):
        v = Parameter(b, kw.pop("shape"), kw.pop("dtype"), trainable=not vd.stop_gradient,
                      **kw)
    else:
        v = Variable(b, persistable=bool(vd.persistable), stop_gradient=bool(vd.stop_gradient),
                     **kw)
    b.vars[vd.name] = v


def _read_op(p: Any, b: Any, od: Any, block_ref: Any, source: str, bi: int,
             oi: int) -> List[Any]:
    """The fluidlite Operator(s) of the OpDesc ``od`` (op ``oi`` of block ``bi``): its attrs
    decoded (block attrs as ``block_ref`` placeholders), then mapped by ``_map_op``."""
    owhere = f"{source}: block {bi} op #{oi} '{od.type}'"
    try:
        raw = {a.name: _attr_value(a, block_ref) for a in od.attrs}
    except ValueError as e:     # PaddleFormatError from block_ref included: it names the op
        raise PaddleFormatError(f"{owhere}: {e}") from None
    inputs = {v.parameter: list(v.arguments) for v in od.inputs}
    outputs = {v.parameter: list(v.arguments) for v in od.outputs}
    try:
        # the writer's Paddle form of a while's grad block (while_grad.py)
        restored = _while_grad.from_paddle(inputs, raw)
        if restored is None:
            return []
        inputs = restored
        if od.type == "while_grad":
            _while_grad.while_grad_from_paddle(raw)
        zero = raw.pop(_ZERO_ARRAYS, None) or []        # _fold_zero_arrays's
        mapped = _map_op(od.type, inputs, outputs, raw, _Rewriter(p, b))
    except ValueError as e:
        raise PaddleFormatError(f"{owhere}: {e}") from None
    role = {k: v for k, v in raw.items() if k in ("op_role", "op_namescope", "op_device")}
    mapped = [("sum_tensor_array", {"X": []}, {"Out": [str(n)]}, role) for n in zero] + mapped
    return [_make_op(p, b, op_type, ins, outs, attrs, source, owhere, od.type, bi, oi)
            for op_type, ins, outs, attrs in mapped]


def _make_op(p: Any, b: Any, op_type: str, inputs: Dict[str, List[str]],
             outputs: Dict[str, List[str]], raw: Dict[str, Any], source: str, owhere: str,
             file_type: str, bi: int, oi: int) -> Any:
    """One fluidlite Operator from a (mapped) OpDesc: slots and attrs fluidlite's op does not
    declare are dropped (they must be empty for forward inputs and grad outputs)."""
    if not registry.has_op(op_type):
        raise PaddleFormatError(f"{source}: op type '{file_type}' (block {bi} op #{oi}) "
                                f"is not supported by fluidlite")
    opdef = registry.get_op_def(op_type)
    grad = op_type.endswith("_grad")
    # a grad op may read more than fluidlite's rule needs (layer_norm_grad's Bias); a forward
    # op may write more (XShape, Mask, ReserveSpace) -- but nothing a grad op writes is dropped
    inputs = _known_slots(opdef.in_slots, inputs, owhere, "input", strict=not grad)
    outputs = _known_slots(opdef.out_slots, outputs, owhere, "output", strict=grad)
    outputs = _complete_outputs(p, b, opdef, inputs, outputs)
    known = set(registry.COMMON_ATTRS) | set(opdef.attr_defaults) | set(opdef.extra_attrs)
    raw = dict(raw)
    defaults = {**opdef.attr_defaults, **opdef.extra_attrs}
    for k, v in _paddle_grad_attrs(file_type).items():      # what the writer added for Paddle
        if k in raw and type(raw[k]) is type(v) and raw[k] == v and \
                (k not in known or defaults.get(k) == v):   # (the op's default: same result)
            del raw[k]
    dropped = sorted(set(raw) - known)
    if dropped:
        _log.debug("%s: dropping attributes fluidlite does not use: %s", owhere, dropped)
        risky = {k: raw[k] for k in dropped
                 if k not in _HINT_ATTRS and raw[k] not in _NEUTRAL and raw[k] != []}
        if risky:
            _log.warning("%s: attributes fluidlite's '%s' does not implement were dropped: "
                         "%s; the results may differ from Paddle's", owhere, op_type, risky)
    kept = {k: _as_declared(v, defaults.get(k)) for k, v in raw.items() if k in known}
    try:
        attrs = opdef.check_attrs(kept)
    except (TypeError, ValueError) as e:
        raise PaddleFormatError(f"{owhere}: {e}") from None
    for slot, args in list(inputs.items()) + list(outputs.items()):
        for arg in args:
            if arg != "@EMPTY@" and not _declared(p, b, arg):   # kEmptyVarName
                raise PaddleFormatError(f"{owhere}: slot '{slot}' refers to variable "
                                        f"'{arg}', which the program does not declare "
                                        f"(corrupted file?)")
    return Operator(b, op_type, inputs, outputs, attrs)


# required outputs Paddle's inference export prunes when nothing reads them: the spec of the
# variable the reader declares instead, from the op's X (shape, dtype)
_PRUNED_OUTPUTS = {"XShape": lambda x: ((0,) + tuple(x.shape), x.dtype),
                   "Mask": lambda x: (tuple(x.shape), VarType.UINT8)}


def _complete_outputs(p: Any, b: Any, opdef: Any, inputs: Dict[str, List[str]],
                      outputs: Dict[str, List[str]]) -> Dict[str, List[str]]:
    """``outputs`` with a fresh variable for each required ``XShape`` / ``Mask`` output the
    file leaves out (``_PRUNED_OUTPUTS``): an inference pass re-creating such an op checks its
    slots, so a loaded program must have them all."""
    present = [a for args in outputs.values() for a in args if a != "@EMPTY@"]
    rw = _Rewriter(p, b)
    x = _one(inputs, "X")
    xv = rw.var(x) if x else None
    out = outputs
    for s in opdef.out_slots:
        if s.dispensable or s.duplicable or s.name not in _PRUNED_OUTPUTS or xv is None or \
                not present or [a for a in outputs.get(s.name, []) if a != "@EMPTY@"]:
            continue
        shape, dtype = _PRUNED_OUTPUTS[s.name](xv)
        out = dict(out, **{s.name: [rw.tmp(f"{present[0]}@{s.name}", x, dtype=dtype,
                                           shape=shape)]})
    return out


def _as_declared(value: Any, default: Any) -> Any:
    """``value`` converted as Paddle's ``ExtractAttribute<bool>`` converts a stored attribute
    when the op declares a bool: an INT or FLOAT becomes ``value != 0``. fluid <= 1.6 wrote
    boolean attributes (``is_test``, ``use_global_stats``...) as INT 0/1 and Paddle loads those
    files; every other mismatch (a BOOLEAN where an int is declared) stays an error, as in
    Paddle ("Cannot get attribute (axis) by type int, its type is bool")."""
    if isinstance(default, bool) and isinstance(value, (int, float)) and \
            not isinstance(value, bool):
        return value != 0
    return value


def _declared(p: Any, block: Any, name: str) -> bool:
    """``name`` is declared in ``block`` or an ancestor (blocks are built in order, and a
    parent always precedes its children in Paddle's files)."""
    while block is not None:
        if name in block.vars:
            return True
        parent = block.parent_idx
        block = p.blocks[parent] if 0 <= parent < len(p.blocks) else None
    return False


def _resolve_blocks(p: Any, v: Any) -> Any:
    if isinstance(v, tuple) and len(v) == 2 and v[0] == "@block":
        return p.blocks[v[1]]
    if isinstance(v, list):
        return [_resolve_blocks(p, x) for x in v]
    return v


def _known_slots(slots: Any, given: Dict[str, List[str]], where: str,
                 kind: str, strict: bool) -> Dict[str, List[str]]:
    """``given`` without the slots the OpDef lacks; with ``strict`` those must be empty
    (Paddle's optional tensor slots such as ``ScaleTensor``), else they are dropped."""
    names = {s.name for s in slots}
    out = {}
    for slot, args in given.items():
        if slot in names:
            out[slot] = args
        elif strict and [a for a in args if a != "@EMPTY@"]:
            raise PaddleFormatError(f"{where}: {kind} slot '{slot}' ({args}) is not supported "
                                    f"by fluidlite's op")
        elif args:
            _log.debug("%s: dropping %s slot %s %s", where, kind, slot, args)
    return out
