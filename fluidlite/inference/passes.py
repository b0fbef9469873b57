"""The inference optimisation passes a predictor runs when ``ir_optim`` is on.

Every pass is a function ``pass(ctx) -> int`` (how many rewrites it made) registered in
``PASSES`` under Paddle Inference's name for the same rewrite, and runs in its own
``rewrite.transaction`` on the predictor's private copy of the program: if a pass raises, the
program is as before it. Passes rewrite with the verbs of ``fluidlite/core/rewrite.py``
(``replace_op``, ``remove_ops``, ``Uses``); they compute no numbers themselves -- folding a
``batch_norm`` into a weight builds a small program of ``scale``/``sqrt``/``elementwise_*``
ops and runs it through the ``Executor`` on the predictor's scope, which writes the folded
weights as new persistables there (never into the model files or the caller's scope).

``describe()`` lists the passes with what they do; ``config.delete_pass(name)`` drops one;
``config.switch_ir_optim(False)`` runs none.

Scope of the patterns: block 0 only, and a variable read in a sub-block is never rewired; a
fusion needs the intermediate results to have exactly one reader and the weights/biases to be
persistables of the expected rank (anything else is left as it is).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple

from ..core import rewrite
from ..core.ir import Block, Operator, OpRole, Program
from ..core.dtypes import VarType, to_numpy_dtype
from ..ops._conv_kernels import LAST_WIDTH as DEPTHWISE_LAST_WIDTH
from ..ops._winograd import MIN_CHANNELS as MIN_WINOGRAD_CHANNELS
from ..ops.conv import band_filter_shape, channels_last_filter_shape, channels_last_kernel
from . import rows
from .ops import ACTIVATION_ATTRS, ACTIVATIONS

__all__ = ["PASSES", "DEFAULT_PASSES", "PassContext", "describe", "run_passes"]


@dataclasses.dataclass
class PassContext:
    """What a pass works on.

    Attributes:
        program: the predictor's own copy of the inference program (rewritten in place).
        scope: the predictor's scope holding the parameters (folded weights go here).
        fold: ``fold(build)`` runs a constant-folding program built by ``build(block)``
            through the executor on ``scope``.
        protected: names that must keep their producer (feeds and fetch targets).
    """
    program: Program
    scope: Any
    fold: Callable[[Callable[[Block], None]], None]
    protected: Set[str]

    @property
    def block(self) -> Block:
        return self.program.global_block()


# -- helpers ----------------------------------------------------------------------------------
def _slots(op: Operator, outputs: bool = False) -> Dict[str, List[str]]:
    names = op.output_names if outputs else op.input_names
    return {s: list(op.output(s) if outputs else op.input(s)) for s in names}


def _attrs(op: Operator, **changes: Any) -> Dict[str, Any]:
    out = dict(op.attrs)
    out.update(changes)
    return out


def _sub_block_names(program: Program) -> Set[str]:
    """Names any op of a sub-block reads or writes: never rewired by a pass."""
    names: Set[str] = set()
    for blk in program.blocks[1:]:
        for o in blk.ops:
            names.update(o.input_arg_names)
            names.update(o.output_arg_names)
    return names


def _replace(block: Block, op: Operator, type: Optional[str] = None,
             inputs: Optional[Dict[str, Any]] = None, outputs: Optional[Dict[str, Any]] = None,
             attrs: Optional[Dict[str, Any]] = None) -> Operator:
    """``rewrite.replace_op`` keeping whatever of ``op`` is not overridden."""
    return rewrite.replace_op(block, op, type or op.type,
                              inputs if inputs is not None else _slots(op),
                              outputs if outputs is not None else _slots(op, True),
                              attrs if attrs is not None else dict(op.attrs))


def _rename_in(slots: Dict[str, List[str]], old: str, new: str) -> Dict[str, List[str]]:
    return {s: [new if n == old else n for n in ns] for s, ns in slots.items()}


def _persistable(block: Block, name: str, ndim: Optional[int] = None) -> bool:
    v = block.vars.get(name)
    return v is not None and v.persistable and (ndim is None or len(v.shape) == ndim)


def _only_reader(uses: rewrite.Uses, name: str, ctx: PassContext, skip: Set[str]) -> bool:
    """``name`` is an intermediate the fusion may swallow: one writer, one reader, not a
    feed/fetch, not persistable, not touched by a sub-block."""
    return (uses.reader_count(name) == 1 and len(uses.producers.get(name, ())) == 1
            and name not in ctx.protected and name not in skip
            and not _persistable(ctx.block, name))


def _fresh(block: Block, base: str) -> str:
    """``base``, or ``base_1``, ``base_2``... : a name no variable of the program has (a
    weight shared by two folded layers gets two folded copies)."""
    name, k = base, 0
    while any(name in b.vars for b in block.program.blocks):
        k += 1
        name = f"{base}_{k}"
    return name


def _next(uses: rewrite.Uses, name: str) -> Optional[Operator]:
    readers = uses.readers.get(name, ())
    return uses.ops[readers[0]] if len(readers) == 1 else None


# -- the passes -------------------------------------------------------------------------------
def _fuse_each(ctx: PassContext,
               fuse: Callable[[rewrite.Uses, Operator, Set[str]], bool]) -> int:
    """Apply ``fuse(uses, op, skip)`` -- True when it rewrote the block at ``op`` -- until no
    op matches: each rewrite changes the block, so its uses are indexed again and the scan
    starts over (``skip``: the names a sub-block touches, never rewired). Returns the count of
    rewrites."""
    block, skip, count = ctx.block, _sub_block_names(ctx.program), 0
    while True:
        uses = rewrite.Uses(block)
        if not any(fuse(uses, op, skip) for op in uses.ops):
            return count
        count += 1


def is_test_pass(ctx: PassContext) -> int:
    """Set ``is_test`` on every op that has it (dropout, batch_norm, ...): inference mode."""
    count = 0
    for op in list(ctx.block.ops):
        if op.has_attr("is_test") and op.attr("is_test") is not True:
            _replace(ctx.block, op, attrs=_attrs(op, is_test=True))
            count += 1
    return count


def simplify_with_basic_ops_pass(ctx: PassContext) -> int:
    """Test-mode ``dropout``: ``upscale_in_train`` is the identity (an ``assign``, removed by
    ``identity_op_clean_pass``), ``downgrade_in_infer`` is ``scale`` by ``1 - p``."""
    count = 0
    for op in list(ctx.block.ops):
        if op.type != "dropout" or not op.attrs.get("is_test", False):
            continue
        x, out = op.input("X")[0], op.output("Out")[0]
        if op.attrs.get("dropout_implementation", "downgrade_in_infer") == "upscale_in_train":
            _replace(ctx.block, op, "assign", {"X": [x]}, {"Out": [out]}, {})
        else:
            p = float(op.attrs.get("dropout_prob", 0.5))
            _replace(ctx.block, op, "scale", {"X": [x]}, {"Out": [out]},
                     {"scale": 1.0 - p, "bias": 0.0, "bias_after_scale": True})
        count += 1
    return count


def _is_identity(op: Operator) -> bool:
    if op.type == "assign":
        return len(op.input("X")) == 1
    if op.type == "scale":
        return (not op.input("ScaleTensor") if "ScaleTensor" in op.input_names else True) and \
            float(op.attrs.get("scale", 1.0)) == 1.0 and float(op.attrs.get("bias", 0.0)) == 0.0
    return False


def identity_op_clean_pass(ctx: PassContext) -> int:
    """Remove ``assign`` and ``scale`` by 1 + 0: readers of the output read the input instead;
    when the output is fetched, the input's producer writes the output name directly."""
    block = ctx.block

    def fuse(uses: rewrite.Uses, op: Operator, skip: Set[str]) -> bool:
        if not _is_identity(op):
            return False
        x, y = op.input("X")[0], op.output("Out")[0]
        if x == y or x in skip or y in skip or len(uses.producers.get(y, ())) != 1 \
                or len(uses.producers.get(x, ())) > 1 or _persistable(block, y):
            return False
        if y not in ctx.protected:
            # readers of y read x (x is never rewritten: at most one producer, before op)
            for r in list(uses.readers.get(y, ())):
                reader = uses.ops[r]
                _replace(block, reader, inputs=_rename_in(_slots(reader), y, x))
            rewrite.remove_ops(block, op.idx)
        elif (x not in ctx.protected and not _persistable(block, x)
              and uses.reader_count(x) == 1 and uses.producer(x) is not None
              and uses.ops[uses.producer(x)].type != "feed"):
            prod = uses.ops[uses.producer(x)]
            _replace(block, prod, outputs=_rename_in(_slots(prod, True), x, y))
            rewrite.remove_ops(block, op.idx)
        else:
            return False
        return True
    return _fuse_each(ctx, fuse)


def _bias_add(uses: rewrite.Uses, block: Block, out: str, axes: Sequence[int]
              ) -> Optional[Operator]:
    """The ``elementwise_add(X=out, Y=<1-D persistable>)`` reading ``out``, if that is what
    reads it (``axis`` among ``axes``)."""
    add = _next(uses, out)
    if add is None or add.type != "elementwise_add" or add.input("X") != [out]:
        return None
    if not _persistable(block, add.input("Y")[0], 1) or add.attrs.get("axis", -1) not in axes:
        return None
    return add


def _bn_candidates(ctx: PassContext, uses: "rewrite.Uses", skip: Set[str],
                   producer_types: Tuple[str, ...]) -> List[Tuple[Any, ...]]:
    """(producer op, its weight, the weight's output-channel axis, the bias add or None, the
    test-mode batch_norm) for every producer whose output only a batch_norm (after an
    optional bias add) reads, with persistable weight and statistics."""
    block = ctx.block
    plans = []
    for op in uses.ops:
        if op.type not in producer_types:
            continue
        if op.type == "mul":
            w, out = op.input("Y")[0], op.output("Out")[0]
            ok = (_persistable(block, w, 2) and op.attrs.get("x_num_col_dims", 1) == 1
                  and op.attrs.get("y_num_col_dims", 1) == 1)
            w_axis, add_axes = 1, (1, -1)
        else:
            w, out = op.input("Filter")[0], op.output("Output")[0]
            ok = (_persistable(block, w, 4)
                  and op.attrs.get("data_format", "NCHW") in ("NCHW", "AnyLayout"))
            # a transposed conv's filter is [C_in, C_out / groups, kh, kw]: its output
            # channels are axis 1, and all of them only without groups
            w_axis, add_axes = (1 if op.type == "conv2d_transpose" else 0), (1,)
            ok = ok and (op.type != "conv2d_transpose" or op.attrs.get("groups", 1) == 1)
        if not ok or not _only_reader(uses, out, ctx, skip):
            continue
        add = _bias_add(uses, block, out, add_axes)
        bn_in = out
        if add is not None:
            bn_in = add.output("Out")[0]
            if not _only_reader(uses, bn_in, ctx, skip):
                continue
        bn = _next(uses, bn_in)
        if bn is None or bn.type != "batch_norm" or bn.input("X") != [bn_in] or \
                bn.attrs.get("data_layout", "NCHW") not in ("NCHW", "AnyLayout") or \
                not (bn.attrs.get("is_test") or bn.attrs.get("use_global_stats")) or \
                len(block.var(out).shape) not in ((2,) if op.type == "mul" else (4,)):
            continue
        if any(uses.reader_count(n) for s in ("SavedMean", "SavedVariance")
               for n in bn.output(s)):
            continue
        if any(not _persistable(block, bn.input(s)[0], 1)
               for s in ("Scale", "Bias", "Mean", "Variance")):
            continue
        plans.append((op, w, w_axis, add, bn))
    return plans


def _bn_fuse(ctx: PassContext, producer_types: Tuple[str, ...]) -> int:
    count, block = 0, ctx.block
    skip = _sub_block_names(ctx.program)
    uses = rewrite.Uses(block)
    plans = _bn_candidates(ctx, uses, skip, producer_types)
    for op, w, w_axis, add, bn in plans:
        wvar = block.var(w)
        stat = block.var(bn.input("Scale")[0])
        new_w = _fresh(block, w + "@bn_fold")
        new_b = _fresh(block, bn.input("Bias")[0] + "@bn_fold")
        block.create_var(name=new_w, shape=wvar.shape, dtype=wvar.dtype, persistable=True)
        block.create_var(name=new_b, shape=stat.shape, dtype=stat.dtype, persistable=True)
        old_b = add.input("Y")[0] if add is not None else None
        eps = float(bn.attrs.get("epsilon", 1e-5))

        def build(fb: Block, bn: Operator = bn, w: str = w, w_axis: int = w_axis,
                  old_b: Optional[str] = old_b, new_w: str = new_w, new_b: str = new_b,
                  eps: float = eps) -> None:
            # alpha = Scale / sqrt(Variance + eps); W' = W * alpha (per output channel);
            # b' = (b - Mean) * alpha + Bias  (b = 0 without a preceding bias add)
            src = {n: fb.create_var(name=n, shape=block.var(n).shape,
                                    dtype=block.var(n).dtype, persistable=True)
                   for n in [w, old_b] + [bn.input(s)[0] for s in
                                          ("Scale", "Bias", "Mean", "Variance")] if n}
            dst_w = fb.create_var(name=new_w, shape=block.var(new_w).shape,
                                  dtype=block.var(new_w).dtype, persistable=True)
            dst_b = fb.create_var(name=new_b, shape=block.var(new_b).shape,
                                  dtype=block.var(new_b).dtype, persistable=True)
            std = rewrite.op(fb, "sqrt", X=rewrite.op(
                fb, "scale", X=src[bn.input("Variance")[0]],
                attrs={"scale": 1.0, "bias": eps, "bias_after_scale": True}))
            alpha = rewrite.op(fb, "elementwise_div", X=src[bn.input("Scale")[0]], Y=std)
            rewrite.op(fb, "elementwise_mul", out=dst_w, X=src[w], Y=alpha,
                       attrs={"axis": w_axis})
            mean = src[bn.input("Mean")[0]]
            if old_b is not None:
                shifted = rewrite.op(fb, "elementwise_sub", X=src[old_b], Y=mean)
                scaled = rewrite.op(fb, "elementwise_mul", X=shifted, Y=alpha)
                rewrite.op(fb, "elementwise_add", out=dst_b, X=scaled,
                           Y=src[bn.input("Bias")[0]])
            else:
                scaled = rewrite.op(fb, "elementwise_mul", X=mean, Y=alpha)
                rewrite.op(fb, "elementwise_sub", out=dst_b, X=src[bn.input("Bias")[0]],
                           Y=scaled)

        ctx.fold(build)
        slot = "Y" if op.type == "mul" else "Filter"
        _replace(block, op, inputs={**_slots(op), slot: [new_w]})
        y = bn.output("Y")[0]
        out = op.output("Out" if op.type == "mul" else "Output")[0]
        axis = 1
        if add is not None:
            _replace(block, add, inputs={"X": [out], "Y": [new_b]}, outputs={"Out": [y]},
                     attrs=_attrs(add, axis=axis))
            rewrite.remove_ops(block, bn.idx)
        else:
            _replace(block, bn, "elementwise_add", {"X": [out], "Y": [new_b]}, {"Out": [y]},
                     {"axis": axis})
        count += 1
    return count


def conv_bn_fuse_pass(ctx: PassContext) -> int:
    """Fold an inference ``batch_norm`` (and a bias add before it) into the preceding
    ``conv2d``'s filter and a bias add: W' = W * s, b' = (b - mean) * s + beta with
    s = scale / sqrt(var + eps), folded through the executor into new persistables."""
    return _bn_fuse(ctx, ("conv2d",))


def conv_transpose_bn_fuse_pass(ctx: PassContext) -> int:
    """``conv_bn_fuse_pass`` for ``conv2d_transpose`` without groups: its filter
    [C_in, C_out, kh, kw] is scaled along its output channels, axis 1 (fluid's
    conv_transpose_bn_fuse_pass and conv_transpose_eltwiseadd_bn_fuse_pass in one)."""
    return _bn_fuse(ctx, ("conv2d_transpose",))


def depthwise_conv_bn_fuse_pass(ctx: PassContext) -> int:
    """``conv_bn_fuse_pass`` for ``depthwise_conv2d``."""
    return _bn_fuse(ctx, ("depthwise_conv2d",))


def fc_bn_fuse_pass(ctx: PassContext) -> int:
    """``conv_bn_fuse_pass`` for ``mul`` (an fc layer) on a 2-D input: the weight's columns
    are scaled."""
    return _bn_fuse(ctx, ("mul",))


def _act_after(uses: rewrite.Uses, name: str, ctx: PassContext, skip: Set[str]
               ) -> Optional[Operator]:
    if not _only_reader(uses, name, ctx, skip):
        return None
    act = _next(uses, name)
    if act is None or act.type not in ACTIVATIONS or not act.type or act.input("X") != [name]:
        return None
    if any(float(act.attrs.get(k, v)) != v for k, v in ACTIVATION_ATTRS.get(act.type,
                                                                          {}).items()):
        return None         # the fused kernels have fluid's default attrs only
    return act


def fc_fuse_pass(ctx: PassContext) -> int:
    """``mul`` + ``elementwise_add`` (a 1-D persistable bias) + an optional relu -> one ``fc``
    op (fluid's, ``ops/math_more.py``: its activation is '' or relu)."""
    block = ctx.block

    def fuse(uses: rewrite.Uses, op: Operator, skip: Set[str]) -> bool:
        if op.type != "mul" or op.attrs.get("y_num_col_dims", 1) != 1 or \
                not _persistable(block, op.input("Y")[0], 2):
            return False
        out, k = op.output("Out")[0], op.attrs.get("x_num_col_dims", 1)
        if not _only_reader(uses, out, ctx, skip):
            return False
        add = _bias_add(uses, block, out, (k, -1))
        if add is None:
            return False
        act = _act_after(uses, add.output("Out")[0], ctx, skip)
        if act is not None and act.type != "relu":      # fluid's fc: '' or relu
            act = None
        final = act.output("Out")[0] if act is not None else add.output("Out")[0]
        inputs = {"Input": op.input("X"), "W": op.input("Y"), "Bias": add.input("Y")}
        attrs = {"in_num_col_dims": k, "activation_type": act.type if act else ""}
        if act is not None:
            rewrite.remove_ops(block, act.idx)
        rewrite.remove_ops(block, add.idx)
        _replace(block, op, "fc", inputs, {"Out": [final]}, attrs)
        return True
    return _fuse_each(ctx, fuse)


def fc_act_mkldnn_fuse_pass(ctx: PassContext) -> int:
    """``fc`` (no activation) + ``gelu`` -> one ``fc`` with ``activation_type`` gelu_erf (or
    gelu_tanh for the approximate form): the GELU runs on each block of the product as its
    GEMM part makes it, in cache (Paddle's pass of this name does the same for its oneDNN
    fc; here on the NumPy engine)."""
    block = ctx.block

    def fuse(uses: rewrite.Uses, op: Operator, skip: Set[str]) -> bool:
        if op.type != "fc" or op.attrs.get("activation_type", ""):
            return False
        out = op.output("Out")[0]
        if not _only_reader(uses, out, ctx, skip):
            return False
        act = _next(uses, out)
        if act is None or act.type != "gelu" or act.input("X") != [out]:
            return False
        xv, wv = block.vars.get(op.input("Input")[0]), block.vars.get(op.input("W")[0])
        if xv is None or wv is None or xv.dtype != wv.dtype:
            return False                        # a GELU on fc's cast output: not the same
        gelu = "gelu_tanh" if act.attrs.get("approximate", False) else "gelu_erf"
        rewrite.remove_ops(block, act.idx)
        _replace(block, op, outputs={"Out": act.output("Out")},
                 attrs=_attrs(op, activation_type=gelu))
        return True
    return _fuse_each(ctx, fuse)


def fc_elementwise_layernorm_fuse_pass(ctx: PassContext) -> int:
    """``fc`` + ``elementwise_add`` (of a second input of fc's output shape) + ``layer_norm``
    (over fc's columns, persistable Scale and Bias) -> one ``fused_fc_elementwise_layernorm``:
    a transformer's output projection, residual add and norm, the add and the norm done on
    each block of the product as its GEMM part makes it (Paddle's pass and op of these
    names). The norm's Mean and Variance stay outputs when something reads them."""
    block = ctx.block

    def fuse(uses: rewrite.Uses, op: Operator, skip: Set[str]) -> bool:
        if op.type != "fc" or op.attrs.get("padding_weights", False) or \
                not _persistable(block, op.input("W")[0], 2) or \
                len(op.input("Bias")) != 1 or not _persistable(block, op.input("Bias")[0]):
            return False
        out = op.output("Out")[0]
        add = _next(uses, out) if _only_reader(uses, out, ctx, skip) else None
        if add is None or add.type != "elementwise_add" or out not in add.input_arg_names:
            return False
        xs, ys = add.input("X"), add.input("Y")
        other = ys[0] if xs == [out] else xs[0]
        if other == out or other in skip or \
                tuple(block.var(other).shape) != tuple(block.var(out).shape) or \
                any(i > op.idx for i in uses.producers.get(other, ())):
            return False                # (the fused op runs at fc's place: Y must be made)
        summed = add.output("Out")[0]
        ln = _next(uses, summed) if _only_reader(uses, summed, ctx, skip) else None
        if ln is None or ln.type != "layer_norm" or ln.input("X") != [summed] or \
                len(ln.input("Scale")) != 1 or len(ln.input("Bias")) != 1 or \
                not _persistable(block, ln.input("Scale")[0], 1) or \
                not _persistable(block, ln.input("Bias")[0], 1):
            return False
        shape, axis = block.var(out).shape, ln.attrs.get("begin_norm_axis", 1)
        width = shape[axis:] if 0 < axis < len(shape) else ()
        if len(width) != 1 or width[0] != block.var(op.input("W")[0]).shape[1] or \
                not 0.0 <= float(ln.attrs.get("epsilon", 1e-5)) <= 1e-3:
            return False
        outputs = {"Out": ln.output("Y")}
        for slot in ("Mean", "Variance"):       # kept when read (or fetched)
            names = [n for n in ln.output(slot)
                     if uses.reader_count(n) or n in ctx.protected or n in skip]
            if names:
                outputs[slot] = names
        inputs = {"X": op.input("Input"), "W": op.input("W"), "Bias0": op.input("Bias"),
                  "Y": [other], "Scale": ln.input("Scale"), "Bias1": ln.input("Bias")}
        attrs = {"x_num_col_dims": op.attrs.get("in_num_col_dims", 1),
                 "activation_type": op.attrs.get("activation_type", ""),
                 "epsilon": float(ln.attrs.get("epsilon", 1e-5)), "begin_norm_axis": axis}
        rewrite.remove_ops(block, ln.idx)
        rewrite.remove_ops(block, add.idx)
        _replace(block, op, "fused_fc_elementwise_layernorm", inputs, outputs, attrs)
        return True
    return _fuse_each(ctx, fuse)


_CONV_ATTRS = ("strides", "paddings", "padding_algorithm", "groups", "dilations",
               "data_format")


def conv_elementwise_add_act_fuse_pass(ctx: PassContext) -> int:
    """``conv2d`` / ``depthwise_conv2d`` + bias ``elementwise_add`` (axis 1) + optional
    relu / relu6 / sigmoid / tanh / hard_swish -> one ``conv2d_fusion`` op (NCHW)."""
    block = ctx.block

    def fuse(uses: rewrite.Uses, op: Operator, skip: Set[str]) -> bool:
        if op.type not in ("conv2d", "depthwise_conv2d") or \
                op.attrs.get("data_format", "NCHW") not in ("NCHW", "AnyLayout"):
            return False
        out = op.output("Output")[0]
        if not _only_reader(uses, out, ctx, skip):
            return False
        add = _bias_add(uses, block, out, (1,))
        if add is None:
            return False
        act = _act_after(uses, add.output("Out")[0], ctx, skip)
        final = act.output("Out")[0] if act is not None else add.output("Out")[0]
        attrs = {k: op.attrs[k] for k in _CONV_ATTRS if k in op.attrs}
        attrs["data_format"] = "NCHW"
        attrs["activation"] = act.type if act is not None else "identity"
        inputs = {"Input": op.input("Input"), "Filter": op.input("Filter"),
                  "Bias": add.input("Y")}
        if act is not None:
            rewrite.remove_ops(block, act.idx)
        rewrite.remove_ops(block, add.idx)
        _replace(block, op, "conv2d_fusion", inputs, {"Output": [final]}, attrs)
        return True
    return _fuse_each(ctx, fuse)


def _scalar_operand(block: Block, op: Operator, other: str) -> Optional[str]:
    """The one-element persistable operand of the elementwise ``op`` whose other operand is
    ``other`` (either side), or None."""
    xs, ys = op.input("X"), op.input("Y")
    for mine, theirs in ((ys, xs), (xs, ys)):
        if theirs == [other] and len(mine) == 1 and _persistable(block, mine[0]):
            v = block.var(mine[0])
            if v.dtype == block.var(other).dtype and all(int(d) == 1 for d in v.shape):
                return mine[0]
    return None


def conv_affine_act_fuse_pass(ctx: PassContext) -> int:
    """``conv2d_fusion`` (a bias, no activation or residual yet) times a one-element
    persistable ``a``, plus a one-element persistable ``c`` (a learnable affine after a
    convolution, as PP-LCNetV3's in PaddleOCR's v4 models), then an optional activation ->
    one ``conv2d_fusion`` with the affine folded into its filter and bias: W' = a W,
    b' = a b + c (two passes over the output, and the activation's, saved)."""
    block = ctx.block

    def fuse(uses: rewrite.Uses, op: Operator, skip: Set[str]) -> bool:
        # (a filter already laid out at load -- FilterTiles, FilterBand -- would be stale)
        if op.type != "conv2d_fusion" or not op.input("Bias") or _has_affine(op) or any(
                op.input(s) for s in ("ResidualData", "FilterTiles", "FilterBand")) \
                or op.attrs.get("activation", "identity") not in ("identity", ""):
            return False
        out = op.output("Output")[0]
        mul = _next(uses, out) if _only_reader(uses, out, ctx, skip) else None
        a = _scalar_operand(block, mul, out) \
            if mul is not None and mul.type == "elementwise_mul" else None
        if a is None:
            return False
        mid = mul.output("Out")[0]
        add = _next(uses, mid) if _only_reader(uses, mid, ctx, skip) else None
        c = _scalar_operand(block, add, mid) \
            if add is not None and add.type == "elementwise_add" else None
        if c is None or tuple(block.var(add.output("Out")[0]).shape) != \
                tuple(block.var(out).shape):
            return False
        act = _act_after(uses, add.output("Out")[0], ctx, skip)
        final = act.output("Out")[0] if act is not None else add.output("Out")[0]
        w, b = op.input("Filter")[0], op.input("Bias")[0]
        new_w, new_b = _fresh(block, w + "@affine_fold"), _fresh(block, b + "@affine_fold")
        for new, old_ in ((new_w, w), (new_b, b)):
            v = block.var(old_)
            block.create_var(name=new, shape=v.shape, dtype=v.dtype, persistable=True)

        def build(fb: Block) -> None:
            src = {n: fb.create_var(name=n, shape=block.var(n).shape, dtype=block.var(n).dtype,
                                    persistable=True) for n in (w, b, a, c, new_w, new_b)}
            rewrite.op(fb, "elementwise_mul", out=src[new_w], X=src[w], Y=src[a])
            rewrite.op(fb, "elementwise_add", out=src[new_b], Y=src[c],
                       X=rewrite.op(fb, "elementwise_mul", X=src[b], Y=src[a]))
        ctx.fold(build)
        attrs = _attrs(op, activation=act.type if act is not None else "identity")
        inputs = {**_slots(op), "Filter": [new_w], "Bias": [new_b]}
        for extra in sorted((x.idx for x in (mul, add, act) if x is not None), reverse=True):
            rewrite.remove_ops(block, extra)
        _replace(block, op, inputs=inputs, outputs={"Output": [final]}, attrs=attrs)
        return True
    return _fuse_each(ctx, fuse)


def affine_conv_fuse_pass(ctx: PassContext) -> int:
    """A map times a one-element persistable ``a``, plus a one-element persistable ``c``,
    read only as the input of a ``conv2d_fusion`` with a bias that pads nothing
    (PP-LCNetV3's learnable affine after an activation, before a 1x1 convolution, in
    PaddleOCR's v4 models) -> that convolution with the affine folded into its filter and
    bias: W' = a W, b' = b + c sum W over each filter's input channels and taps (two passes
    over its input saved). Every output of an unpadded convolution reads kh*kw input pixels
    of each channel, so the c every pixel carries adds c times the filter's sum; a padded
    one's border outputs read fewer pixels: not folded."""
    block = ctx.block

    def fuse(uses: rewrite.Uses, mul: Operator, skip: Set[str]) -> bool:
        if mul.type != "elementwise_mul" or len(mul.input("X")) != 1 \
                or len(mul.input("Y")) != 1:
            return False
        src = a = None
        for cand in (mul.input("X")[0], mul.input("Y")[0]):
            a = _scalar_operand(block, mul, cand)
            if a is not None and not _persistable(block, cand):
                src = cand
                break
        mid = mul.output("Out")[0]
        if src is None or not _only_reader(uses, mid, ctx, skip):
            return False
        add = _next(uses, mid)
        c = _scalar_operand(block, add, mid) \
            if add is not None and add.type == "elementwise_add" else None
        aff = add.output("Out")[0] if c is not None else None
        if aff is None or not _only_reader(uses, aff, ctx, skip) or \
                tuple(block.var(aff).shape) != tuple(block.var(src).shape):
            return False
        conv = _next(uses, aff)
        if conv is None or conv.type != "conv2d_fusion" or conv.input("Input") != [aff] \
                or any(aff in conv.input(s) for s in conv.input_names if s != "Input") \
                or any(conv.input(s) for s in ("FilterTiles", "FilterBand")):
            return False
        w, bias = conv.input("Filter")[0], conv.input("Bias")
        if not bias or not _persistable(block, w, 4) or not _persistable(block, bias[0]) \
                or block.var(w).dtype != block.var(aff).dtype \
                or any(int(p) for p in conv.attrs.get("paddings", [0, 0])) \
                or conv.attrs.get("padding_algorithm", "EXPLICIT") == "SAME":
            return False
        wv = block.var(w)
        new_w = _fresh(block, w + "@affine_in_fold")
        new_b = _fresh(block, bias[0] + "@affine_in_fold")
        block.create_var(name=new_w, shape=wv.shape, dtype=wv.dtype, persistable=True)
        block.create_var(name=new_b, shape=block.var(bias[0]).shape, dtype=wv.dtype,
                         persistable=True)

        def build(fb: Block) -> None:
            src_ = {n: fb.create_var(name=n, shape=block.var(n).shape, dtype=block.var(n).dtype,
                                     persistable=True) for n in (w, bias[0], a, c, new_w, new_b)}
            rewrite.op(fb, "elementwise_mul", out=src_[new_w], X=src_[w], Y=src_[a])
            sums = rewrite.op(fb, "reduce_sum", X=src_[w],
                              attrs={"dim": [1, 2, 3], "keep_dim": False})
            rewrite.op(fb, "elementwise_add", out=src_[new_b], X=src_[bias[0]],
                       Y=rewrite.op(fb, "elementwise_mul", X=sums, Y=src_[c]))
        ctx.fold(build)
        inputs = {**_slots(conv), "Input": [src], "Filter": [new_w], "Bias": [new_b]}
        _replace(block, conv, inputs=inputs)
        for i in sorted((mul.idx, add.idx), reverse=True):
            rewrite.remove_ops(block, i)
        return True
    return _fuse_each(ctx, fuse)


def _has_affine(op: Operator) -> bool:
    """``op`` (a ``conv2d_fusion``) applies an affine after its activation already."""
    return bool(op.input("ActScale") or op.input("ActShift"))


def conv_act_affine_fuse_pass(ctx: PassContext) -> int:
    """``conv2d_fusion`` (any activation, no affine yet) times a one-element persistable
    ``a``, plus a one-element persistable ``c`` -> one ``conv2d_fusion`` with ``a`` and ``c``
    as its ``ActScale`` and ``ActShift``: Output = act(...) * a + c in the convolution's
    epilogue while each block is in cache (fluidlite's own slots). This is PP-LCNetV3's
    learnable affine after a hard_swish (PaddleOCR's v4 models) where the passes before
    could not fold it into a filter: it feeds a padded depthwise layer, or more than one
    reader. Two passes over the map saved, and in NHWC blocks the two transposes around
    them. The same bits: the same product and sum, rounded alike."""
    block = ctx.block

    def fuse(uses: rewrite.Uses, op: Operator, skip: Set[str]) -> bool:
        if op.type != "conv2d_fusion" or _has_affine(op):
            return False
        out = op.output("Output")[0]
        mul = _next(uses, out) if _only_reader(uses, out, ctx, skip) else None
        a = _scalar_operand(block, mul, out) \
            if mul is not None and mul.type == "elementwise_mul" else None
        mid = mul.output("Out")[0] if a is not None else None
        add = _next(uses, mid) if mid is not None and _only_reader(uses, mid, ctx, skip) \
            else None
        c = _scalar_operand(block, add, mid) \
            if add is not None and add.type == "elementwise_add" else None
        if c is None or block.var(out).dtype != block.var(op.input("Filter")[0]).dtype \
                or tuple(block.var(add.output("Out")[0]).shape) != tuple(block.var(out).shape):
            return False
        inputs = {**_slots(op), "ActScale": [a], "ActShift": [c]}
        for extra in sorted((mul.idx, add.idx), reverse=True):
            rewrite.remove_ops(block, extra)
        _replace(block, op, inputs=inputs, outputs={"Output": add.output("Out")})
        return True
    return _fuse_each(ctx, fuse)


def conv_elementwise_add2_act_fuse_pass(ctx: PassContext) -> int:
    """``conv2d_fusion`` (no activation yet) + ``elementwise_add`` of a tensor of the output's
    shape + optional relu / relu6 / sigmoid / tanh / hard_swish -> one ``conv2d_fusion`` with
    that tensor as its ``ResidualData`` (a ResNet block's shortcut added and activated in the
    convolution's epilogue, image by image while the output is in cache). The fused op takes
    the add's place: the shortcut may be computed after the convolution."""
    block = ctx.block

    def fuse(uses: rewrite.Uses, op: Operator, skip: Set[str]) -> bool:
        if op.type != "conv2d_fusion" or op.input("ResidualData") or _has_affine(op) \
                or op.attrs.get("activation", "identity") not in ("identity", ""):
            return False
        out = op.output("Output")[0]
        if not _only_reader(uses, out, ctx, skip):
            return False
        add = _next(uses, out)
        if add is None or add.type != "elementwise_add":
            return False
        xs, ys = add.input("X"), add.input("Y")
        other = ys[0] if xs == [out] else xs[0] if ys == [out] else None
        if other is None or other == out or other not in block.vars:
            return False
        ov, rv = block.var(out), block.var(other)
        if tuple(ov.shape) != tuple(rv.shape) or ov.dtype != rv.dtype \
                or any(d < 0 for d in ov.shape[1:]) or len(ov.shape) != 4:
            return False                    # a broadcast add is not a residual
        act = _act_after(uses, add.output("Out")[0], ctx, skip)
        final = act.output("Out")[0] if act is not None else add.output("Out")[0]
        attrs = _attrs(op, activation=act.type if act is not None else "identity")
        inputs = {**_slots(op), "ResidualData": [other]}
        if act is not None:
            rewrite.remove_ops(block, act.idx)
        _replace(block, add, "conv2d_fusion", inputs, {"Output": [final]}, attrs)
        rewrite.remove_ops(block, op.idx)
        return True
    return _fuse_each(ctx, fuse)


_TO_NHWC, _TO_NCHW = [0, 2, 3, 1], [0, 3, 1, 2]


def conv2d_fusion_layout_transfer_pass(ctx: PassContext) -> int:
    """Run depthwise-separable stacks of ``conv2d_fusion`` channels-last (NHWC): each
    connected group of NCHW ops that have a channels-last kernel (1x1, depthwise and the
    im2col shapes, float32/64, of known map sizes: ``conv.channels_last_kernel``), holding a
    depthwise and a 1x1 layer at least, gets ``data_format`` NHWC and its filters laid out
    for those kernels at load (``channels_last_filter``, the op's ``FilterLast``), and
    ``transpose2`` ops convert at its edges only -- the group's inputs made elsewhere, and its
    outputs read elsewhere or fetched (which keep their names and NCHW shapes). A depthwise
    layer then runs its taps as one einsum over contiguous channels and a 1x1 layer one GEMM
    of the pixels, with no transposes between them (MobileNetV2: 51 ops in NHWC, 2
    transposes; 0.81x the time at batch 1, 0.78x at batch 16).

    Paddle 2.5's pass of this name does the same for GPU float16 convolutions (with
    ``transfer_layout`` ops). Counted: the ops put in NHWC."""
    block, skip = ctx.block, _sub_block_names(ctx.program)
    uses = rewrite.Uses(block)
    kinds = {i: k for i, op in enumerate(uses.ops) for k in [_nhwc_kind(uses, block, op, skip)]
             if k}
    out_of = {uses.ops[i].output("Output")[0]: i for i in kinds}
    parent = {i: i for i in kinds}                      # groups: union-find over the links

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i
    for i in kinds:
        for n in _nhwc_inputs(uses.ops[i]):
            if n in out_of:
                parent[root(i)] = root(out_of[n])
    groups: Dict[int, Set[str]] = {}
    for i, k in kinds.items():
        groups.setdefault(root(i), set()).add(k)
    chosen = sorted(i for i in kinds if {"pointwise", "depthwise"} <= groups[root(i)])
    if not chosen:
        return 0
    chosen_set = set(chosen)
    nhwc = {v: _nhwc_var(block, v) for v in (uses.ops[i].output("Output")[0] for i in chosen)}
    inserts: List[Tuple[int, str, str, List[int]]] = []     # (index, src, dst, axis)
    for i in chosen:            # results read elsewhere or fetched: back to NCHW, same name
        v = uses.ops[i].output("Output")[0]
        if v in ctx.protected or any(r not in chosen_set or v not in
                                     _nhwc_inputs(uses.ops[r]) or v in _other_inputs(uses.ops[r])
                                     for r in uses.readers.get(v, ())):
            inserts.append((i + 1, nhwc[v], v, _TO_NCHW))
    made: Dict[str, str] = {}
    for i in chosen:            # inputs made elsewhere: to NHWC before their first reader
        for n in _nhwc_inputs(uses.ops[i]):
            if n not in nhwc and n not in made:
                made[n] = _nhwc_var(block, n)
                inserts.append((i, n, made[n], _TO_NHWC))
    laid: Dict[Tuple[str, Tuple[Any, ...]], str] = {}      # (filter, attrs): one layout each
    for i in chosen:
        op = uses.ops[i]
        slots = {s: [nhwc.get(n) or made.get(n, n) for n in ns] for s, ns in _slots(op).items()}
        slots["FilterLast"] = [_lay_out_last(ctx, op, laid)]
        _replace(block, op, inputs=slots, outputs={"Output": [nhwc[op.output("Output")[0]]]},
                 attrs=_attrs(op, data_format="NHWC"))
    for index, src, dst, axis in sorted(inserts, key=lambda t: -t[0]):
        xshape = _fresh(block, dst + "@XShape")
        block.create_var(name=xshape, dtype=block.var(src).dtype, persistable=False)
        rewrite.insert(block, index, "transpose2", {"X": [src]},
                       {"Out": [dst], "XShape": [xshape]}, {"axis": axis})
    return len(chosen)


_NHWC_SLOTS = ("Input", "ResidualData")


def _lay_out_last(ctx: PassContext, op: Operator,
                  done: Dict[Tuple[str, Tuple[Any, ...]], str]) -> str:
    """The persistable ``channels_last_filter`` of ``op``'s filter for its NHWC input,
    folded once per filter and attributes; returns its name."""
    block = ctx.block
    w = op.input("Filter")[0]
    shape, geom = _nhwc_args(block, op)
    attrs: Dict[str, Any] = {"input_shape": shape, **geom}
    key = (w, tuple((k, repr(v)) for k, v in sorted(attrs.items())))
    if key not in done:
        wvar = block.var(w)
        dst = _fresh(block, w + "@last")
        block.create_var(name=dst, dtype=wvar.dtype, persistable=True,
                         shape=channels_last_filter_shape(wvar.shape, to_numpy_dtype(wvar.dtype),
                                                          shape, **geom))

        def build(fb: Block) -> None:
            src = fb.create_var(name=w, shape=wvar.shape, dtype=wvar.dtype, persistable=True)
            out = fb.create_var(name=dst, shape=block.var(dst).shape, dtype=wvar.dtype,
                                persistable=True)
            rewrite.op(fb, "channels_last_filter", out=out, attrs=attrs, Filter=src)
        ctx.fold(build)
        done[key] = dst
    return done[key]


_GEOM_ATTRS = ("strides", "paddings", "padding_algorithm", "groups", "dilations")


def _nhwc_args(block: Block, op: Operator) -> Tuple[List[int], Dict[str, Any]]:
    """(the NHWC shape [N, H, W, C] of the NCHW ``conv2d_fusion`` ``op``'s input, its
    geometry attributes)."""
    n, c, h, w = block.var(op.input("Input")[0]).shape
    return [int(d) for d in (n, h, w, c)], {k: op.attrs[k] for k in _GEOM_ATTRS}


def _nhwc_var(block: Block, name: str) -> str:
    """A new variable for ``name``'s NCHW value laid out NHWC; returns its name."""
    like = block.var(name)
    new = _fresh(block, name + "@NHWC")
    block.create_var(name=new, shape=[like.shape[d] for d in _TO_NHWC], dtype=like.dtype,
                     persistable=False)
    return new


def _nhwc_inputs(op: Operator) -> List[str]:
    return [n for s in _NHWC_SLOTS for n in op.input(s)]


def _other_inputs(op: Operator) -> List[str]:
    return [n for s in op.input_names if s not in _NHWC_SLOTS for n in op.input(s)]


def _nhwc_kind(uses: rewrite.Uses, block: Block, op: Operator, skip: Set[str]) -> str:
    """The channels-last kernel ``op`` would run in NHWC (``channels_last_kernel``), or ""
    when it is not an NCHW ``conv2d_fusion`` of known map sizes whose output only it writes
    and that no sub-block touches."""
    if op.type != "conv2d_fusion" or op.attrs["data_format"] not in ("NCHW", "AnyLayout") \
            or op.input("FilterTiles") or op.input("FilterBand"):
        return ""       # (a filter laid out for an NCHW kernel: an optimised program's)
    w, x, out = op.input("Filter")[0], op.input("Input")[0], op.output("Output")[0]
    names = [x, out] + op.input("ResidualData")
    if not _persistable(block, w, 4) or any(n in skip or n not in block.vars for n in names):
        return ""
    if min(block.var(x).shape[1:]) < 1 or block.var(out).lod_level \
            or len(uses.producers.get(out, ())) != 1:
        return ""
    wv = block.var(w)
    shape, geom = _nhwc_args(block, op)
    return channels_last_kernel(shape, wv.shape, to_numpy_dtype(wv.dtype), **geom,
                                data_format="NHWC")


def depthwise_separable_fuse_pass(ctx: PassContext) -> int:
    """Fuse NHWC ``conv2d_fusion`` chains [1x1 ->] depthwise -> 1x1 (MobileNet's blocks, put
    channels-last by ``conv2d_fusion_layout_transfer_pass``) into one
    ``depthwise_separable_fusion``: the three layers then run strip by strip of rows, their
    expanded maps never whole, one hand-off to the threads per block instead of three
    (MobileNetV2's blocks: 0.7-0.8x the time at batch 1, 0.87x at batch 16).

    Fused when each intermediate has one reader and is neither fetched nor persistable, the
    1x1 layers have stride 1 and no padding, the depthwise and expanding ones add no residual
    and no affine (the projecting one's ``ActScale`` / ``ActShift`` carry over), and every
    layer has its ``FilterLast``. fluidlite's own pass (Paddle's kernels fuse no such
    chain). Counted: the blocks fused."""
    block = ctx.block

    def fuse(uses: rewrite.Uses, op: Operator, skip: Set[str]) -> bool:
        if not _separable_layer(block, op, "depthwise") or op.input("ResidualData") \
                or _has_affine(op):
            return False
        mid = op.output("Output")[0]
        proj = _next(uses, mid)
        if not _only_reader(uses, mid, ctx, skip) or proj is None \
                or not _separable_layer(block, proj, "pointwise") or proj.input("Input") != [mid] \
                or mid in proj.input("ResidualData"):
            return False
        x = op.input("Input")[0]
        made = uses.producers.get(x, ())
        expand = uses.ops[made[0]] if len(made) == 1 else None
        if expand is None or not _only_reader(uses, x, ctx, skip) \
                or not _separable_layer(block, expand, "pointwise") \
                or expand.input("ResidualData") or _has_affine(expand) \
                or any(p > expand.idx for p in uses.producers.get(expand.input("Input")[0], ())):
            expand = None
        inputs = {"Input": expand.input("Input") if expand else [x],
                  "DepthwiseFilter": op.input("Filter"), "ProjectFilter": proj.input("Filter"),
                  "DepthwiseBias": op.input("Bias"), "DepthwiseFilterLast": op.input("FilterLast"),
                  "ProjectBias": proj.input("Bias"), "ProjectFilterLast": proj.input("FilterLast"),
                  "ResidualData": proj.input("ResidualData"),
                  "ActScale": proj.input("ActScale"), "ActShift": proj.input("ActShift")}
        attrs = {k: op.attrs[k] for k in ("strides", "paddings", "padding_algorithm",
                                           "dilations")}
        attrs.update(depthwise_activation=op.attrs["activation"],
                     activation=proj.attrs["activation"])
        if expand is not None:
            inputs.update(ExpandFilter=expand.input("Filter"), ExpandBias=expand.input("Bias"),
                          ExpandFilterLast=expand.input("FilterLast"))
            attrs["expand_activation"] = expand.attrs["activation"]
        gone = sorted([op.idx] + ([expand.idx] if expand else []), reverse=True)
        _replace(block, proj, "depthwise_separable_fusion", inputs,
                 {"Output": proj.output("Output")}, attrs)
        for i in gone:
            rewrite.remove_ops(block, i)
        return True
    return _fuse_each(ctx, fuse)


def _separable_layer(block: Block, op: Operator, kind: str) -> bool:
    """``op`` is an NHWC ``conv2d_fusion`` with its ``FilterLast`` that runs the ``kind``
    channels-last kernel -- a "pointwise" one of stride 1 without padding."""
    if op.type != "conv2d_fusion" or op.attrs["data_format"] != "NHWC" \
            or not op.input("FilterLast") or op.input("FilterTiles") or op.input("FilterBand"):
        return False
    x, w = block.var(op.input("Input")[0]), block.var(op.input("Filter")[0])
    geom = {k: op.attrs[k] for k in _GEOM_ATTRS}
    if kind == "pointwise" and list(geom["strides"]) != [1, 1]:
        return False            # (the "pointwise" kernel itself has no padding)
    return channels_last_kernel(x.shape, w.shape, to_numpy_dtype(w.dtype), **geom,
                                data_format="NHWC") == kind


def conv_winograd_filter_pass(ctx: PassContext) -> int:
    """Transform the constant 3x3 filters of ``conv2d_fusion`` ops that can run the Winograd
    F(2x2, 3x3) kernel (groups 1, stride 1, dilation 1, NCHW, float32/64, at least 16 input
    and output channels) once, at load: a ``winograd_filter_tiles`` op folded into a new
    persistable ``[16, K, C]`` becomes the op's ``FilterTiles`` (16/9 of the filter's memory;
    the kernel still chooses per run, by the batch and the map size, whether Winograd pays:
    large maps and maps of few channels run a GEMM per tap instead, leaving the tiles
    unread -- ``ops/_conv_kernels.use_taps``)."""
    block = ctx.block
    done: Dict[str, str] = {}           # a filter shared by several convolutions: one transform
    count = 0
    for op in list(block.ops):
        if op.type != "conv2d_fusion" or op.input("FilterTiles"):
            continue
        w = op.input("Filter")[0]
        if not _persistable(block, w, 4) or not _winograd_fits(block.var(w), op):
            continue
        if w not in done:
            wvar = block.var(w)
            tiles = _fresh(block, w + "@winograd")
            block.create_var(name=tiles, shape=(16,) + tuple(wvar.shape[:2]),
                             dtype=wvar.dtype, persistable=True)

            def build(fb: Block, w: str = w, tiles: str = tiles) -> None:
                src = fb.create_var(name=w, shape=block.var(w).shape,
                                    dtype=block.var(w).dtype, persistable=True)
                dst = fb.create_var(name=tiles, shape=block.var(tiles).shape,
                                    dtype=block.var(tiles).dtype, persistable=True)
                rewrite.op(fb, "winograd_filter_tiles", out=dst, Filter=src)
            ctx.fold(build)
            done[w] = tiles
        _replace(block, op, inputs={**_slots(op), "FilterTiles": [done[w]]})
        count += 1
    return count


def _winograd_fits(wvar: Any, op: Operator) -> bool:
    """The filter and the attributes of a ``conv2d_fusion`` are those of the Winograd kernel
    (``ops/_winograd.use_winograd``, all but the batch-dependent part)."""
    a = op.attrs
    shape = tuple(wvar.shape)
    return (shape[2:] == (3, 3) and min(shape[:2]) >= MIN_WINOGRAD_CHANNELS
            and int(a.get("groups", 1) or 1) == 1
            and list(a.get("strides", [1, 1])) == [1, 1]
            and list(a.get("dilations", [1, 1])) == [1, 1]
            and a.get("data_format", "NCHW") in ("NCHW", "AnyLayout")
            and wvar.dtype in (VarType.FP32, VarType.FP64))


def conv_band_filter_pass(ctx: PassContext) -> int:
    """Lay out the constant filters of depthwise ``conv2d_fusion`` ops on small maps (the
    banded-GEMM kernel: at most 1024 output pixels, more than 8 wide, float32/64, NCHW) once,
    at load: a ``depthwise_band_filter`` op folded into a new persistable ``[C, K, m*tw]``
    becomes the op's ``FilterBand`` (MobileNetV2 at batch 1 ran 0.95x the time: 17 layers
    that built their band on every run). The band depends on the output's width only; an
    input of free width and known height gets the full-tile band, cut to each run's width
    by the kernel
    (PP-OCRv4's recognizer at 48x320: 0.87x the time, the same bits)."""
    block = ctx.block
    done: Dict[Tuple[str, Tuple[Any, ...]], str] = {}   # (filter, attrs): one band each
    count = 0
    for op in list(block.ops):
        if op.type != "conv2d_fusion" or op.input("FilterBand"):
            continue
        w, x = op.input("Filter")[0], op.input("Input")[0]
        if not _persistable(block, w, 4) or x not in block.vars \
                or op.attrs.get("data_format", "NCHW") not in ("NCHW", "AnyLayout"):
            continue
        wvar, xshape = block.var(w), tuple(block.var(x).shape)
        if len(xshape) != 4 or wvar.dtype not in (VarType.FP32, VarType.FP64):
            continue
        attrs = {"input_size": [int(d) for d in xshape[2:]]}
        attrs.update({k: op.attrs[k] for k in _CONV_ATTRS if k in op.attrs
                      and k != "data_format"})        # (the band is made for NCHW)
        shape = band_filter_shape(
            xshape[2:], wvar.shape, to_numpy_dtype(wvar.dtype), attrs.get("strides", [1, 1]),
            attrs.get("paddings", [0, 0]), attrs.get("padding_algorithm", "EXPLICIT"),
            int(attrs.get("groups", 1) or 1), attrs.get("dilations", [1, 1]))
        # (tile width m*tw / m: the output's width up to 16; the forward of maps at most
        # DEPTHWISE_LAST_WIDTH wide runs its taps, never the band)
        if shape is None or shape[2] // max(wvar.shape[0] // shape[0], 1) \
                <= DEPTHWISE_LAST_WIDTH:
            continue
        key = (w, tuple((k, repr(v)) for k, v in sorted(attrs.items())))
        if key not in done:
            band = _fresh(block, w + "@band")
            block.create_var(name=band, shape=shape, dtype=wvar.dtype, persistable=True)

            def build(fb: Block, w: str = w, band: str = band,
                      attrs: Dict[str, Any] = attrs) -> None:
                src = fb.create_var(name=w, shape=block.var(w).shape,
                                    dtype=block.var(w).dtype, persistable=True)
                dst = fb.create_var(name=band, shape=block.var(band).shape,
                                    dtype=block.var(band).dtype, persistable=True)
                rewrite.op(fb, "depthwise_band_filter", out=dst, attrs=attrs, Filter=src)
            ctx.fold(build)
            done[key] = band
        _replace(block, op, inputs={**_slots(op), "FilterBand": [done[key]]})
        count += 1
    return count


def _attention_head(uses: rewrite.Uses, ctx: PassContext, skip: Set[str], mm1: Operator
                    ) -> Optional[Tuple[List[Operator], float, Optional[str], Operator]]:
    """From the scores ``matmul``: ([ops to remove], alpha, mask name, the softmax) when an
    optional bias-free ``scale``, an optional mask ``elementwise_add`` and a last-axis
    ``softmax`` follow, each the only reader of what it reads."""
    block, chain = ctx.block, [mm1]
    alpha = float(mm1.attrs.get("alpha", 1.0))
    cur, mask = mm1.output("Out")[0], None
    rank = len(block.var(cur).shape)
    nxt = _next(uses, cur) if _only_reader(uses, cur, ctx, skip) else None
    if nxt is not None and nxt.type == "scale" and nxt.input("X") == [cur] and \
            not nxt.input("ScaleTensor") and float(nxt.attrs.get("bias", 0.0)) == 0.0:
        alpha *= float(nxt.attrs.get("scale", 1.0))
        chain.append(nxt)
        cur = nxt.output("Out")[0]
        nxt = _next(uses, cur) if _only_reader(uses, cur, ctx, skip) else None
    if nxt is not None and nxt.type == "elementwise_add" and nxt.input("X") == [cur]:
        m = nxt.input("Y")[0]
        mrank = len(block.var(m).shape)
        if nxt.attrs.get("axis", -1) not in (-1, rank - mrank) or m in skip:
            return None
        mask = m
        chain.append(nxt)
        cur = nxt.output("Out")[0]
        nxt = _next(uses, cur) if _only_reader(uses, cur, ctx, skip) else None
    if nxt is None or nxt.type != "softmax" or nxt.input("X") != [cur] or \
            nxt.attrs.get("axis", -1) not in (-1, rank - 1):
        return None
    return chain, alpha, mask, nxt


def attention_fuse_pass(ctx: PassContext) -> int:
    """``matmul(Q, K)`` [* ``scale``] [+ mask] -> ``softmax`` -> ``matmul(., V)`` -> one
    ``scaled_dot_product_attention`` op: the score matrix is written once and normalised in
    place, the softmax's division moves to the smaller result (``inference/ops.py``)."""
    block = ctx.block

    def fuse(uses: rewrite.Uses, mm1: Operator, skip: Set[str]) -> bool:
        if mm1.type != "matmul" or mm1.attrs.get("transpose_X", False):
            return False
        q, k = mm1.input("X")[0], mm1.input("Y")[0]
        if min(len(block.var(q).shape), len(block.var(k).shape)) < 2:
            return False
        head = _attention_head(uses, ctx, skip, mm1)
        if head is None:
            return False
        chain, alpha, mask, softmax = head
        p = softmax.output("Out")[0]
        mm2 = _next(uses, p) if _only_reader(uses, p, ctx, skip) else None
        if mm2 is None or mm2.type != "matmul" or mm2.input("X") != [p] or \
                mm2.attrs.get("transpose_X") or mm2.attrs.get("transpose_Y") or \
                float(mm2.attrs.get("alpha", 1.0)) != 1.0 or \
                len(block.var(mm2.input("Y")[0]).shape) < 2:
            return False
        inputs = {"Q": [q], "K": [k], "V": mm2.input("Y")}
        if mask is not None:
            inputs["Mask"] = [mask]
        _replace(block, mm2, "scaled_dot_product_attention", inputs,
                 {"Out": mm2.output("Out")},
                 {"alpha": alpha, "transpose_k": bool(mm1.attrs.get("transpose_Y", False))})
        for o in sorted(chain + [softmax], key=lambda o: o.idx, reverse=True):
            rewrite.remove_ops(block, o.idx)
        return True
    return _fuse_each(ctx, fuse)


def _plain_slice(op: Operator) -> bool:
    """A ``slice`` along one axis by constant bounds that keeps its rank."""
    return (op.type == "slice" and len(op.attrs.get("axes", ())) == 1
            and not op.attrs.get("decrease_axis") and len(op.input("Input")) == 1
            and not any(op.input(t) for t in op.input_names if t != "Input"))


def _same_slice(a: Operator, b: Operator) -> bool:
    return all(list(a.attrs.get(k, ())) == list(b.attrs.get(k, ()))
               for k in ("axes", "starts", "ends"))


def _merge_slices(block: Block, uses: rewrite.Uses, first: Operator, ctx: PassContext,
                  skip: Set[str]) -> bool:
    """The later slices of ``first``'s Input with its bounds go: their readers read
    ``first``'s output instead (True when any went)."""
    readers = [uses.ops[i] for i in uses.readers.get(first.input("Input")[0], ())]
    dups = [r for r in readers if r.idx > first.idx and _plain_slice(r)
            and _same_slice(r, first) and r.output("Out")[0] not in ctx.protected
            and r.output("Out")[0] not in skip]
    kept, olds = first.output("Out")[0], [d.output("Out")[0] for d in dups]
    for i in sorted({i for old in olds for i in uses.readers.get(old, ())}):
        reader = uses.ops[i]
        ins = _slots(reader)
        for old in olds:
            ins = _rename_in(ins, old, kept)
        _replace(block, reader, inputs=ins)
    for d in sorted(dups, key=lambda o: o.idx, reverse=True):
        rewrite.remove_ops(block, d.idx)
    return bool(dups)


def slice_pushdown_pass(ctx: PassContext) -> int:
    """A ``slice`` along one axis moves above the op that made what it slices when that op's
    rows along the axis come from rows of its inputs (``inference/rows.py``: fc, layer_norm
    and their fused forms, activations, residual adds, reshape2 / transpose2 keeping the axis
    apart, an attention's queries), so that the op computes only the rows kept: a BERT
    classifier's last layer for its [CLS] token alone, but for the keys and values its
    attention reads. Slices with one Input and the same bounds merge into one first.
    fluidlite's own pass."""
    block = ctx.block

    def push(uses: rewrite.Uses, op: Operator, skip: Set[str]) -> bool:
        if not _plain_slice(op):
            return False
        v = op.input("Input")[0]
        var = block.vars.get(v)
        if var is None or var.lod_level or v in skip or v in ctx.protected or var.persistable:
            return False
        if uses.reader_count(v) > 1:        # read whole too: only its equal slices merge
            return _merge_slices(block, uses, op, ctx, skip)
        made = uses.producers.get(v, ())
        if len(made) != 1:
            return False
        src = uses.ops[made[0]]
        slot = rows.row_output(src)
        axis = int(op.attrs["axes"][0]) % max(len(var.shape), 1)
        cut = rows.row_inputs(src, block, axis) if src.output(slot) == [v] else None
        if not cut or any(uses.reader_count(n) or n in ctx.protected or n in skip
                          for s in src.output_names if s != slot for n in src.output(s)):
            return False            # not row-wise here, or another output of it is read
        if any(len(src.input(s)) != 1 or src.input(s)[0] in skip
               or block.var(src.input(s)[0]).lod_level for s in cut):
            return False            # (a sequence's rows are its LoD's: never cut here)
        ins = _slots(src)
        at = src.idx
        for s, b in cut.items():
            u = block.var(src.input(s)[0])
            part = rewrite.tmp(block, "slice", u.dtype)
            rewrite.insert(block, at, "slice", {"Input": [u.name]}, {"Out": [part.name]},
                           {"axes": [b], "starts": list(op.attrs["starts"]),
                            "ends": list(op.attrs["ends"]), "decrease_axis": []})
            at += 1
            ins[s] = [part.name]
        outs = _slots(src, True)
        outs[slot] = op.output("Out")
        rewrite.remove_ops(block, op.idx)
        _replace(block, src, inputs=ins, outputs=outs)
        return True
    return _fuse_each(ctx, push)


def fc_group_fuse_pass(ctx: PassContext) -> int:
    """``fc`` ops reading one Input (the same ``in_num_col_dims``, each with a persistable W
    and Bias, no padded weights) -> one ``fc_group`` at the first one's place: the GEMM calls
    of all of them share one parallel call instead of paying a thread hand-off each (a
    transformer's Q, K and V projections; ``inference/ops.py``)."""
    block = ctx.block

    def fuse(uses: rewrite.Uses, op: Operator, skip: Set[str]) -> bool:
        if op.type != "fc" or op.input("Input")[0] in skip:
            return False
        x, k = op.input("Input")[0], op.attrs.get("in_num_col_dims", 1)
        if any(p > op.idx for p in uses.producers.get(x, ())):
            return False                            # Input is written again after the first

        def mate(o: Operator) -> bool:
            outs = o.output("Out")
            return (o.type == "fc" and o.input("Input") == [x]
                    and o.attrs.get("in_num_col_dims", 1) == k
                    and not o.attrs.get("padding_weights", False)
                    and _persistable(block, o.input("W")[0], 2)
                    and len(o.input("Bias")) == 1 and _persistable(block, o.input("Bias")[0])
                    and len(outs) == 1 and outs[0] not in skip
                    and len(uses.producers.get(outs[0], ())) == 1)
        group = [o for o in (uses.ops[i] for i in uses.readers.get(x, ())) if mate(o)]
        group = list({o.idx: o for o in group}.values())        # an op reading x twice: once
        if len(group) < 2 or group[0] is not op:
            return False
        inputs = {"Input": [x], "W": [o.input("W")[0] for o in group],
                  "Bias": [o.input("Bias")[0] for o in group]}
        attrs = {"in_num_col_dims": k,
                 "activation_types": [o.attrs.get("activation_type", "") for o in group]}
        outs = [o.output("Out")[0] for o in group]
        rest = sorted((o.idx for o in group[1:]), reverse=True)
        _replace(block, op, "fc_group", inputs, {"Out": outs}, attrs)
        for i in rest:
            rewrite.remove_ops(block, i)
        return True
    return _fuse_each(ctx, fuse)


_ELEWISE_ACTS = ("relu", "tanh", "sigmoid")     # fused_elemwise_activation's unaries (no attrs)


def fuse_elewise_add_act_pass(ctx: PassContext) -> int:
    """``elementwise_add`` (X, Y of one dtype) + relu / tanh / sigmoid on its result, its only
    reader -> one ``fused_elemwise_activation`` (fluid 1.8's op and pass name; functor_list
    [act, "elementwise_add"]): the activation runs in place on the sum, one allocation and
    one pass over memory less -- a bias add and relu after a ``conv2d_transpose``, as in
    PaddleOCR's detector head. Runs last, after the passes that fuse an add and activation
    into a convolution or an fc. The same values: the same sum, then the same activation."""
    block = ctx.block

    def fuse(uses: rewrite.Uses, add: Operator, skip: Set[str]) -> bool:
        if add.type != "elementwise_add" or len(add.input("X")) != 1 \
                or len(add.input("Y")) != 1:
            return False
        # (X and Y are read as before, never rewired: a sub-block's use of them is no bar)
        x, y = add.input("X")[0], add.input("Y")[0]
        if block.var(x).dtype != block.var(y).dtype:
            return False
        act = _act_after(uses, add.output("Out")[0], ctx, skip)
        if act is None or act.type not in _ELEWISE_ACTS:
            return False
        attrs = {"axis": add.attrs.get("axis", -1), "scale": 0.0,
                 "save_intermediate_out": False, "functor_list": [act.type, "elementwise_add"]}
        rewrite.remove_ops(block, act.idx)
        _replace(block, add, "fused_elemwise_activation", {"X": [x], "Y": [y]},
                 {"Out": act.output("Out")}, attrs)
        return True
    return _fuse_each(ctx, fuse)


# name -> pass, in the default order
PASSES: Dict[str, Callable[[PassContext], int]] = {
    "is_test_pass": is_test_pass,
    "simplify_with_basic_ops_pass": simplify_with_basic_ops_pass,
    "identity_op_clean_pass": identity_op_clean_pass,
    "conv_bn_fuse_pass": conv_bn_fuse_pass,
    "depthwise_conv_bn_fuse_pass": depthwise_conv_bn_fuse_pass,
    "conv_transpose_bn_fuse_pass": conv_transpose_bn_fuse_pass,
    "fc_bn_fuse_pass": fc_bn_fuse_pass,
    "conv_elementwise_add_act_fuse_pass": conv_elementwise_add_act_fuse_pass,
    "conv_affine_act_fuse_pass": conv_affine_act_fuse_pass,
    "affine_conv_fuse_pass": affine_conv_fuse_pass,
    "conv_elementwise_add2_act_fuse_pass": conv_elementwise_add2_act_fuse_pass,
    "conv_act_affine_fuse_pass": conv_act_affine_fuse_pass,
    "conv2d_fusion_layout_transfer_pass": conv2d_fusion_layout_transfer_pass,
    "depthwise_separable_fuse_pass": depthwise_separable_fuse_pass,
    "conv_winograd_filter_pass": conv_winograd_filter_pass,
    "conv_band_filter_pass": conv_band_filter_pass,
    "fc_fuse_pass": fc_fuse_pass,
    "fc_act_mkldnn_fuse_pass": fc_act_mkldnn_fuse_pass,
    "fc_elementwise_layernorm_fuse_pass": fc_elementwise_layernorm_fuse_pass,
    "attention_fuse_pass": attention_fuse_pass,
    "slice_pushdown_pass": slice_pushdown_pass,
    "fc_group_fuse_pass": fc_group_fuse_pass,
    "fuse_elewise_add_act_pass": fuse_elewise_add_act_pass,
}
DEFAULT_PASSES: List[str] = list(PASSES)


def describe(names: Optional[Sequence[str]] = None) -> str:
    """One line per pass: its name and what it does (the first line of its docstring).

    Args:
        names: the passes to list (default: all, in the default order).

    Returns:
        str: ``"name: summary"`` lines joined by newlines, in the order of ``names``.

    Raises:
        KeyError: a name is not one of ``fluidlite.inference.passes.PASSES``.

    Example:
        >>> from fluidlite.inference import describe_passes
        >>> print(describe_passes(["is_test_pass"]))    # doctest: +ELLIPSIS
        is_test_pass...
    """
    lines = []
    for n in (DEFAULT_PASSES if names is None else names):
        doc = (PASSES[n].__doc__ or "").strip().split("\n\n")[0]
        lines.append(f"{n}: {' '.join(doc.split())}")
    return "\n".join(lines)


def run_passes(ctx: PassContext, names: Sequence[str],
               after: Optional[Callable[[int, str, Program], None]] = None
               ) -> List[Tuple[str, int]]:
    """Run the passes ``names`` in order on ``ctx.program``, each in its own transaction
    (a failing pass leaves the program as it was and the error propagates); returns
    ``[(name, rewrites made)]``.

    Args:
        ctx: the program, scope and folding hook (see ``PassContext``).
        names: pass names from ``PASSES``.
        after: ``after(i, name, program)`` once the i-th pass has run (``switch_ir_debug``
            writes the program there).

    Example:
        >>> run_passes(ctx, ["is_test_pass", "fc_fuse_pass"])
        [('is_test_pass', 0), ('fc_fuse_pass', 2)]
    """
    done = []
    for n in names:
        if n not in PASSES:
            raise ValueError(f"unknown inference pass '{n}' (known: {', '.join(PASSES)})")
        with rewrite.transaction(ctx.program), \
                rewrite.role(ctx.program, OpRole.Forward, name_scope="inference_" + n):
            done.append((n, PASSES[n](ctx)))
        if after is not None:
            after(len(done) - 1, n, ctx.program)
    return done
