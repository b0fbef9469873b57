"""The dygraph branch of ``fluid.optimizer``'s methods: clip, regularize and update now.

The same objects do the work as in static mode: the optimizer's ``grad_clip`` (``clip.py`` runs
the kernels of the ops its static pass appends: ``clip``, ``clip_by_norm``, the float64
``squared_l2_norm`` global norm ...), the parameters' or the optimizer's regularizer (its
``scale``/``sign`` ops and the ``sum`` into the gradient), and the optimizer's update op
(``sgd``, ``momentum``, ``adam`` ...) with its accumulators (``_accs``) held as tensors per
parameter, created at the first step with the static start values.

``Optimizer`` (``optimizer/base.py``) sits below dygraph and does not import this module: the
functions here register with ``core.mode`` as ``optimizer.<method>`` (bottom of the file), and
its ``minimize`` / ``backward`` / ``apply_gradients`` / ``state_dict`` / ``set_dict`` (and
``Dpsgd.minimize``) call them in dygraph mode.
"""
from __future__ import annotations

import operator
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..clip import GradientClipByGlobalNorm
from ..core import mode as _mode
from ..core import names
from ..core.dtypes import to_numpy_dtype
from ..core.ir import Variable
from ..core.registry import VarSpec, get_op_def
from ..core.selected_rows import SelectedRows
from ..executor.fusion import _GlobalNorm, _scaled, _UpdateGroup, grad_scale
from ..ops.inplace import Update
from ..optimizer.base import Optimizer
from ..regularizer import check_regularizer
from .base import no_grad
from .clip import global_norm_scales
from .tensor import EAGER_BLOCK, ParamBase, VarBase
from .tracer import kernel

__all__ = ["minimize", "backward", "apply_gradients", "state_dict", "set_dict",
           "dpsgd_minimize", "NO_PARAMETER_LIST"]

NO_PARAMETER_LIST = ("parameter_list argument given to the Optimizer should not be None in "
                     "dygraph mode.")


def _no_grad_names(no_grad_set: Any) -> set:
    if no_grad_set is None:
        return set()
    return {v.name if isinstance(v, Variable) else str(v) for v in no_grad_set}


def _global_lr(opt: Any) -> float:
    """The step's global learning rate (a dygraph decay is called once: it advances)."""
    lr = opt._learning_rate
    if getattr(lr, "_fluidlite_dygraph_lr", False):
        value = lr()
        return float(np.asarray(value.numpy() if isinstance(value, VarBase) else value)
                     .reshape(-1)[0])
    if isinstance(lr, VarBase):
        return float(lr.numpy().reshape(-1)[0])
    if isinstance(lr, Variable):
        raise TypeError(f"{type(opt).__name__}: in dygraph mode learning_rate must be a float or "
                        f"a dygraph learning-rate decay, but received the static Variable "
                        f"'{lr.name}'")
    return float(lr)


def _learning_rate(opt: Any, param: ParamBase, value: float) -> np.ndarray:
    """The [1] learning-rate array of ``param``'s update op: ``value`` times its
    ``ParamAttr(learning_rate=)`` (multiplied in float32, as the static ``scale`` op)."""
    scale = param.optimize_attr.get("learning_rate", 1.0)
    cache = opt.__dict__.setdefault("_dygraph_lr", {})
    key = (value, scale, opt._dtype)
    arr = cache.get(key)
    if arr is None:
        dtype = to_numpy_dtype(opt._dtype) if opt._dtype is not None else np.float32
        arr = np.array([value], dtype=dtype)
        if scale != 1.0:
            arr = (arr * np.float32(scale)).astype(dtype)
        if len(cache) > 64:
            cache.clear()
        cache[key] = arr
    return arr


def _accumulators(opt: Any, param: ParamBase) -> Dict[str, VarBase]:
    """The parameter's accumulators (created at its first update, with the static start
    values), also visible through ``opt._get_accumulator(name, param)``."""
    out = {}
    for acc in opt._accs:
        name = opt._name + "_" + acc.name if opt._name is not None else acc.name
        var = opt._accumulators[name].get(param.name)
        if var is None:
            fill = acc.fill(opt) if callable(acc.fill) else acc.fill
            shape = [1] if acc.scalar else param.shape
            var_name = names.generate(param.name + "_" + name)
            loaded = opt.__dict__.get("_dygraph_pending", {})
            # fluid 1.8's _add_accumulator: once a state is loaded, every accumulator created
            # afterwards must be in it (its names come from unique_name, as when it was saved)
            if loaded and var_name not in loaded:
                raise ValueError(
                    f"Optimizer set error: the state loaded with set_dict has no accumulator "
                    f"'{var_name}' for parameter '{param.name}' (it holds "
                    f"{sorted(loaded)[:4]}...). Accumulator names come from unique_name at "
                    f"the first minimize: build the model and optimizer and run that step in "
                    f"the same unique_name space as when the state was saved (a new process, "
                    f"or fluid.unique_name.guard())")
            value = loaded.get(var_name)
            if value is None:
                value = np.full(shape, fill, dtype=param._array().dtype)
            var = VarBase(np.array(value, dtype=param._array().dtype), name=var_name,
                          persistable=True)
            opt._accumulators[name][param.name] = var
            opt._opti_name_list.append(var_name)
        out[acc.name] = var
    return out


def _regularize(opt: Any, params_grads: List[Tuple[ParamBase, VarBase]]
                ) -> List[Tuple[ParamBase, VarBase]]:
    if opt.regularization is None and \
            all(getattr(p, "regularizer", None) is None for p, _ in params_grads):
        return params_grads             # the common case: nothing to add
    out = []
    for p, g in params_grads:
        reg = check_regularizer(getattr(p, "regularizer", None),
                                f"the regularizer of parameter '{p.name}'") or opt.regularization
        if reg is not None:
            term = reg(p, g, EAGER_BLOCK)
            new = VarBase(None, name=g.name)
            _mode.tracer.trace_op("sum", {"X": [g, term]}, {"Out": new}, {"use_mkldnn": False})
            g = new
        out.append((p, g))
    return out


def _writable(a: Any, like: np.ndarray) -> bool:
    flags = a.flags
    return (a.base is None and flags.c_contiguous and flags.writeable
            and a.shape == like.shape and a.dtype == like.dtype)


def _update(opt: Any, p: ParamBase, g: VarBase, lr: float, scale: Any = None) -> None:
    """One parameter's update op (``opt.type``). In place (the op's ``update_in_place``, the
    same operations as its kernel, as the static plan's fused update) when the parameter and
    accumulators own plain float buffers; else the kernel, whose outputs (``ParamOut``, the
    accumulators' ``*Out``) replace the tensors' values. The parameter's ``_version`` is
    bumped either way."""
    pa, ga = p._array(), g._array()
    inputs: Dict[str, Any] = {"Param": pa, "Grad": ga,
                              "LearningRate": _learning_rate(opt, p, lr)}
    accs = _accumulators(opt, p)
    targets = {"ParamOut": p}
    for acc in opt._accs:
        inputs[acc.slot] = accs[acc.name]._array()
        if acc.out is not None:
            targets[acc.out] = accs[acc.name]
    for k, v in opt._extra_inputs.items():
        if isinstance(v, VarBase):
            inputs[k] = v._array()
    p._version += 1
    opdef = get_op_def(opt.type)
    if type(ga) is SelectedRows:        # a sparse embedding's gradient (ops/inplace.py)
        if isinstance(opdef, Update):
            _update_sparse(opt, opdef, p, inputs, targets, scale)
            return
        ga = inputs["Grad"] = ga.to_dense()     # an op without a sparse form: dense
    state_slots = getattr(opdef, "state_slots", None)
    if state_slots is not None and pa.dtype.kind == "f" and ga.shape == pa.shape and \
            ga.dtype == pa.dtype and _writable(pa, pa) and \
            all(_writable(inputs[i], pa) for i, _ in state_slots if inputs.get(i) is not None):
        attrs = _op_attr_list(opt, [p])[0]
        try:
            rest = opdef.update_in_place(inputs, scale, attrs)
        except NotImplementedError:
            rest = None
        if rest is not None:
            done = {"ParamOut"} | {o for _, o in state_slots}
            for slot, t in targets.items():
                if slot not in done and rest.get(slot) is not None:
                    t._value = rest[slot]
            return
    if scale is not None:               # the clip's elementwise_mul, unfused
        inputs["Grad"] = kernel("elementwise_mul", X=ga, Y=scale)
    outs = tuple(targets)
    res = kernel(opt.type, opt._op_attrs(p), outputs=outs, **inputs)
    if len(outs) == 1:
        res = {outs[0]: res}
    for slot, t in targets.items():
        t._value = res[slot]


def _update_sparse(opt: Any, opdef: Any, p: ParamBase, inputs: Dict[str, Any],
                   targets: Dict[str, Any], scale: Any) -> None:
    """``_update`` for a SelectedRows gradient: the op's sparse update (fluid 1.8's sparse
    kernels: only the gradient's rows for sgd, adagrad and lazy adam), in place when the
    parameter and accumulators own plain buffers, else out of place."""
    attrs = _op_attr_list(opt, [p])[0]
    pa = inputs["Param"]
    slots = [("Param", "ParamOut")] + [s for s in getattr(opdef, "state_slots", ())
                                       if inputs.get(s[0]) is not None]
    in_place = type(opdef).update_in_place is not Update.update_in_place or \
        opdef.sparse_rows_only(attrs)
    if in_place and all(_writable(inputs[i], pa) for i, _ in slots):
        res = opdef.sparse_in_place(inputs, scale, attrs)
        res.update({o: inputs[i] for i, o in slots})
    else:
        if scale is not None:
            inputs["Grad"] = inputs["Grad"] * scale
        res = opdef.sparse_forward(inputs, attrs)
    for slot, t in targets.items():
        if res.get(slot) is not None and res[slot] is not t._array():
            t._value = res[slot]


def _sparse(params_grads: List[Any]) -> bool:
    return any(g is not None and type(g._array()) is SelectedRows for _, g in params_grads)


def _fusable(opt: Any, grad_clip: Any, params_grads: List[Any]) -> bool:
    """Whether the global-norm clip can be folded into the updates: exactly
    ``GradientClipByGlobalNorm``, an update op with an in-place form, no regularizer (it adds
    to the clipped gradient) and no legacy per-parameter clip attrs."""
    if type(grad_clip) is not GradientClipByGlobalNorm or opt.regularization is not None \
            or _sparse(params_grads):       # a sparse gradient: the clip's own ops
        return False
    if getattr(get_op_def(opt.type), "state_slots", None) is None:
        return False
    return all(getattr(p, "regularizer", None) is None and
               getattr(p, "gradient_clip_attr", None) is None for p, _ in params_grads)


def _groupable(opt: Any, grad_clip: Any, params_grads: List[Any]) -> bool:
    """Whether ``_apply_group`` may run the step: no clip or exactly the global-norm clip
    (``_fusable``'s conditions otherwise: an in-place update op, no regularizer, no legacy
    per-parameter clip attrs)."""
    if _sparse(params_grads):               # the per-parameter path (_update_sparse)
        return False
    if grad_clip is None:
        if opt.regularization is not None or \
                getattr(get_op_def(opt.type), "state_slots", None) is None:
            return False
        return all(getattr(p, "regularizer", None) is None and
                   getattr(p, "gradient_clip_attr", None) is None for p, _ in params_grads)
    return _fusable(opt, grad_clip, params_grads)


_BASE_OP_ATTRS = Optimizer._op_attrs      # (an optimizer whose update attrs are its _attrs)


def minimize(opt: Any, loss: Any, parameter_list: Optional[Sequence[Any]] = None,
             no_grad_set: Any = None, grad_clip: Any = None) -> Tuple[List[Any], List[Any]]:
    """``opt.minimize(loss)`` in dygraph mode (see the module docstring). Reads the
    gradients accumulated by ``loss.backward()``; returns ``([], params_grads)`` (no ops are
    kept in dygraph mode)."""
    params = _listed(opt, parameter_list)
    replay = _mode.tracer._replay if _mode.tracer is not None else None
    step = replay.active if replay is not None else None
    if step is not None:                # a replayed step (replay.py): run its plan
        listed = step.c.param_list
        if (getattr(loss, "_pending", None) is step and no_grad_set is None
                and grad_clip is opt._grad_clip and len(params) == len(listed)
                and all(map(operator.is_, params, listed))):
            pairs = step.commit(opt)
            if pairs is not None:
                replay.start_step()
                return [], pairs
        else:
            step.materialize()
    params_grads = _accumulated(opt, params, no_grad_set)
    if isinstance(loss, VarBase) and loss._value is not None and opt._dtype is None:
        opt._dtype = loss.dtype
    if replay is not None:              # the update's own ops are not part of the step
        tape, replay.tape = replay.tape, None
    used = _apply(opt, params_grads, grad_clip)
    if replay is not None:
        replay.tape = tape
        replay.eager_minimize(opt, loss, params, grad_clip is opt._grad_clip and
                              no_grad_set is None)
    return [], used


def backward(opt: Any, parameter_list: Optional[Sequence[Any]] = None,
             no_grad_set: Any = None) -> List[Tuple[ParamBase, VarBase]]:
    """``opt.backward(loss)`` in dygraph mode (fluid 1.8): the ``(param, grad)`` pairs of the
    trainable parameters whose gradient ``loss.backward()`` accumulated (no backward pass is
    run here), for ``apply_gradients`` / ``apply_optimize``."""
    params = _listed(opt, parameter_list)
    blocked = _no_grad_names(no_grad_set)
    return [(p, VarBase(p._grad, name=p.name + names.GRAD_SUFFIX)) for p in params
            if isinstance(p, ParamBase) and p.trainable and p.name not in blocked
            and p._grad is not None]


def _listed(opt: Any, parameter_list: Optional[Sequence[Any]]) -> Sequence[Any]:
    """The parameters a dygraph step updates: ``parameter_list`` or the optimizer's."""
    params = parameter_list if parameter_list else opt._parameter_list
    if params is None:
        raise AttributeError(NO_PARAMETER_LIST)
    return params


def _accumulated(opt: Any, params: Sequence[Any], no_grad_set: Any
                 ) -> List[Tuple[ParamBase, VarBase]]:
    """``(param, its accumulated gradient)`` for the trainable ``params`` that have one and are
    not in ``no_grad_set``; TypeError for anything that is not a dygraph parameter."""
    blocked = _no_grad_names(no_grad_set)
    params_grads = []
    for p in params:
        if not isinstance(p, ParamBase):
            raise TypeError(f"{type(opt).__name__}: parameter_list must hold dygraph parameters "
                            f"(e.g. layer.parameters()), but received {type(p).__name__}")
        if not p.trainable or p.name in blocked or p._grad is None:
            continue
        params_grads.append((p, VarBase(p._grad, name=p.name + names.GRAD_SUFFIX)))
    return params_grads


def dpsgd_minimize(opt: Any, parameter_list: Optional[Sequence[Any]] = None,
                   no_grad_set: Any = None) -> Tuple[List[Any], List[Any]]:
    """``DpsgdOptimizer.minimize`` in dygraph mode: update the parameters now from the
    gradients of ``loss.backward()`` (regularized as ``minimize`` does), drawing the noise
    from the tracer's generator (``fluid.dygraph.guard`` / ``program.random_seed`` seed it):
    the ``dpsgd`` kernel is called with it, which ``_update`` does not hand to kernels.
    Returns ``([], params_grads)``."""
    pairs = _accumulated(opt, _listed(opt, parameter_list), no_grad_set)
    forward = get_op_def("dpsgd").forward
    with no_grad():
        pairs = _regularize(opt, sorted(pairs, key=lambda pg: pg[0].name))
        lr = _global_lr(opt)
        for p, g in pairs:
            out = forward(p._array(), g._array(), _learning_rate(opt, p, lr),
                          rng=_mode.tracer.rng, **opt._attrs)
            p._version += 1
            p._value = out["ParamOut"]
    return [], pairs


def apply_gradients(opt: Any, params_grads: Sequence[Any], grad_clip: Any = None
                    ) -> List[Any]:
    """``opt.apply_gradients(params_grads)`` in dygraph mode: update each parameter with the
    gradient paired with it (dygraph tensors or arrays, e.g. from
    ``fluidlite.autograd.grad(net, None, weights=params)``), through the same clip,
    regularization and update path as ``minimize``; the parameters' own ``gradient()`` is
    neither read nor changed. Pairs whose gradient is None are skipped. Returns ``[]`` (no
    ops are kept in dygraph mode)."""
    name = type(opt).__name__
    if isinstance(params_grads, tuple) and len(params_grads) == 2 and \
            isinstance(params_grads[0], ParamBase):
        params_grads = [params_grads]
    pairs = []
    for i, pg in enumerate(params_grads):
        if not isinstance(pg, (tuple, list)) or len(pg) != 2:
            raise TypeError(f"{name}.apply_gradients: params_grads must be (parameter, "
                            f"gradient) pairs, but item {i} is {type(pg).__name__}")
        p, g = pg
        if not isinstance(p, ParamBase):
            raise TypeError(f"{name}.apply_gradients: item {i} must pair a dygraph parameter "
                            f"(e.g. from layer.parameters()) with its gradient, but its first "
                            f"element is {type(p).__name__}")
        if g is None or not p.trainable:
            continue
        if isinstance(g, Variable) and not isinstance(g, VarBase):
            raise TypeError(f"{name}.apply_gradients: the gradient of '{p.name}' is the static "
                            f"Variable '{g.name}'; in dygraph mode pass tensors or arrays")
        arr = g._array() if isinstance(g, VarBase) else np.asarray(g)
        if arr.dtype == object or arr.dtype.kind not in "fiu":
            raise TypeError(f"{name}.apply_gradients: the gradient of '{p.name}' must be a "
                            f"numeric tensor or array, but received dtype {arr.dtype}")
        if tuple(arr.shape) != tuple(p._array().shape):
            raise ValueError(f"{name}.apply_gradients: the gradient of '{p.name}' has shape "
                             f"{list(arr.shape)}, but the parameter has shape "
                             f"{list(p._array().shape)}")
        pdt = p._array().dtype
        if arr.dtype != pdt:
            arr = arr.astype(pdt)
        pairs.append((p, VarBase(arr, name=p.name + names.GRAD_SUFFIX)))
    if opt._dtype is None and pairs:
        opt._dtype = pairs[0][1].dtype
    _apply(opt, pairs, grad_clip)
    return []


def _apply(opt: Any, params_grads: List[Any], grad_clip: Any) -> List[Any]:
    """Clip, regularize and update (the common part of ``minimize`` and
    ``apply_gradients``); returns the ``(param, grad)`` pairs used."""
    with no_grad():
        params_grads = sorted(params_grads, key=lambda pg: pg[0].name)
        if _groupable(opt, grad_clip, params_grads) and \
                _apply_group(opt, params_grads, grad_clip):
            opt._finish_update(EAGER_BLOCK, params_grads)
            return params_grads
        scales: Dict[str, Any] = {}
        if _fusable(opt, grad_clip, params_grads):
            # global-norm clip fused into in-place updates (as the static plan fuses them):
            # the same norm ops, then each update multiplies its gradient by the scale
            counted = [(p, g) for p, g in params_grads if grad_clip._needs(p)]
            if counted:
                by_dtype = global_norm_scales(grad_clip, counted)
                scales = {p.name: by_dtype[g._array().dtype] for p, g in counted}
        elif grad_clip is not None:
            params_grads = grad_clip(params_grads)
        params_grads = _regularize(opt, params_grads)
        lr = _global_lr(opt)
        for p, g in params_grads:
            if g is None or not p.trainable:
                continue
            _update(opt, p, g, lr, scales.get(p.name))
        opt._finish_update(EAGER_BLOCK, params_grads)
    return params_grads


# -- one group kernel for every parameter ---------------------------------------------------------
class _GroupPlan:
    """What does not change between steps of ``_apply_group`` for one parameter set: the
    static plan's fused kernels (``executor/fusion.py``: ``_GlobalNorm`` with the
    ``squared_l2_norm`` kernels, ``_UpdateGroup`` of the update op), the input/output slots
    and, per parameter, the accumulator tables to read. Built for one key (``_group_key``);
    holds the parameters and the clip, so the ids in the key stay theirs."""

    __slots__ = ("key", "params", "clip", "norm", "group", "in_slots", "acc_slots",
                 "out_targets", "extra", "counted")

    def __init__(self, key: Any, params: List[ParamBase], grads: List[np.ndarray],
                 counted: List[bool], opt: Any, clip: Any, attrs: List[Dict[str, Any]]
                 ) -> None:
        self.key, self.params, self.clip, self.counted = key, params, clip, counted
        self.norm = None
        if clip is not None and any(counted):
            sq = get_op_def("squared_l2_norm")
            square = []
            for g, c in zip(grads, counted):
                if c:
                    b = sq.bind([VarSpec(g.shape, g.dtype)], {}, frozenset({"Out"}))
                    fn = b.fn
                    square.append(fn if b.single else (lambda a, f=fn: f(a)["Out"]))
            check = [p.name + names.GRAD_SUFFIX for p, c in zip(params, counted) if c] \
                if clip.error_if_nonfinite else None
            # the squares are float64 for every float gradient (squared_l2_norm): the chain
            # is the unfused ops' double arithmetic, bit for bit
            self.norm = _GlobalNorm(square, np.dtype(np.float64), float(clip.clip_norm), None,
                                    check, ["Norm", "Scale"])
        update = get_op_def(opt.type)
        present = {"Param", "Grad", "LearningRate"} | {a.slot for a in opt._accs}
        self.extra = tuple(k for k, v in opt._extra_inputs.items() if isinstance(v, VarBase))
        present |= set(self.extra)
        self.in_slots = [s.name for s in update.in_slots if s.name in present]
        # per input slot after Param/Grad/LearningRate: the accumulator table's key
        acc_key = {a.slot: (opt._name + "_" + a.name if opt._name is not None else a.name)
                   for a in opt._accs}
        self.acc_slots = tuple((s, acc_key.get(s)) for s in self.in_slots)
        outs = {a.out: acc_key[a.slot] for a in opt._accs if a.out is not None}
        self.out_targets = tuple((s.name, outs.get(s.name)) for s in update.out_slots
                                 if s.name == "ParamOut" or s.name in outs)
        # the clip's scale goes into the group kernel when every gradient is clipped (else
        # the clipped ones are scaled first, see ``_apply_group``)
        self.group = _UpdateGroup(opt.type, self.in_slots, [o for o, _ in self.out_targets],
                                  attrs, [True] * len(params),
                                  self.norm is not None and all(counted))


def _op_attr_list(opt: Any, params: List[ParamBase]) -> List[Dict[str, Any]]:
    """The update op's kernel attrs per parameter (checked once per distinct attrs)."""
    opdef = get_op_def(opt.type)
    cache = opt.__dict__.setdefault("_dygraph_kattrs", {})
    out = []
    for p in params:
        raw = opt._op_attrs(p)
        key = tuple(sorted((k, _freeze_attr(v)) for k, v in raw.items()))
        attrs = cache.get(key)
        if attrs is None:
            if len(cache) > 64:
                cache.clear()
            attrs = cache[key] = opdef.kernel_attrs(opdef.check_attrs(dict(raw)))
        out.append(attrs)
    return out


def _freeze_attr(v: Any) -> Any:
    if isinstance(v, (list, tuple)):
        return tuple(_freeze_attr(x) for x in v)
    if isinstance(v, Variable):
        return ("var", id(v))
    return v


def _apply_group(opt: Any, params_grads: List[Any], grad_clip: Any) -> bool:
    """Every parameter's update as one ``_UpdateGroup`` call, the global-norm clip's scale
    from one ``_GlobalNorm`` (the static plan's fused kernels, so both modes compute the same
    numbers). The plan is cached per (parameters, gradient shapes/dtypes, which are clipped,
    update attrs, clip settings); False (nothing done) when the step does not fit: a
    parameter listed twice or a gradient unlike its parameter -- the per-parameter path
    then runs."""
    params, grads, counted = [], [], []
    clip = grad_clip
    for p, g in params_grads:
        if g is None or not p.trainable:
            continue
        params.append(p)
        grads.append(g._array())
        counted.append(clip is not None and clip._needs(p))
    if not params:
        return False
    if type(opt)._op_attrs is _BASE_OP_ATTRS:
        attrs_key: Any = tuple((k, _freeze_attr(v)) for k, v in opt._attrs.items())
        attrs = None
    else:
        attrs = _op_attr_list(opt, params)
        attrs_key = tuple(id(a) for a in attrs)
    key = (tuple(id(p) for p in params), tuple((g.shape, g.dtype.char) for g in grads),
           tuple(counted), attrs_key, opt.type, tuple(opt._extra_inputs),
           None if clip is None else (id(clip), clip.clip_norm, clip.error_if_nonfinite))
    plan = opt.__dict__.get("_dygraph_group")
    if plan is None or plan.key != key:
        if len({id(p) for p in params}) != len(params) or any(
                g.shape != tuple(p._array().shape) or g.dtype != p._array().dtype
                for p, g in zip(params, grads)):
            return False
        if attrs is None:
            attrs = _op_attr_list(opt, params)
        plan = _GroupPlan(key, params, grads, counted, opt, clip, attrs)
        opt.__dict__["_dygraph_group"] = plan
    scale = None
    if plan.norm is not None:
        norm, s = plan.norm.values([g for g, c in zip(grads, counted) if c])
        clip.global_norm = VarBase(np.array([norm]), name="global_norm")
        s64 = np.array([s])
        if plan.group.scaled:
            scale = s64
        else:                           # need_clip leaves some gradients unscaled
            grads = [_scaled(g, grad_scale(s64, g.dtype)) if c else g
                     for g, c in zip(grads, counted)]
    _run_group(opt, plan, params, grads, scale)
    return True


def _run_group(opt: Any, plan: _GroupPlan, params: List[ParamBase], grads: List[np.ndarray],
               scale: Optional[np.ndarray]) -> None:
    lr = _global_lr(opt)
    cols: List[List[Any]] = []
    accs: Dict[str, List[VarBase]] = {}
    for slot, table in plan.acc_slots:
        if slot == "Param":
            cols.append([p._value for p in params])
        elif slot == "Grad":
            cols.append(grads)
        elif slot == "LearningRate":
            cols.append([_learning_rate(opt, p, lr) for p in params])
        elif table is not None:
            tab = opt._accumulators[table]
            vs = []
            for p in params:
                v = tab.get(p.name)
                if v is None:               # first update: created with the start values
                    _accumulators(opt, p)
                    v = tab[p.name]
                vs.append(v)
            accs[table] = vs
            cols.append([v._value for v in vs])
        else:                           # Beta1Tensor ...: one tensor for every parameter
            a = opt._extra_inputs[slot]._array()
            cols.append([a] * len(params))
    if scale is not None:
        cols.append(scale)
    for p in params:
        p._version += 1
    res = plan.group.forward(*cols)
    for slot, table in plan.out_targets:
        vals = res[slot]
        targets = params if table is None else accs[table]
        for t, v in zip(targets, vals):
            if v is not None:
                t._value = v


def state_dict(opt: Any) -> Dict[str, VarBase]:
    """``{accumulator name: tensor}`` of every accumulator created so far (fluid 1.8's
    dygraph ``Optimizer.state_dict``), plus the learning-rate decay's state when it has one."""
    out: Dict[str, Any] = {}
    for table in opt._accumulators.values():
        for var in table.values():
            if isinstance(var, VarBase):
                out[var.name] = var
    lr = opt._learning_rate
    if hasattr(lr, "state_dict") and not isinstance(lr, Variable):
        for k, v in lr.state_dict().items():
            out["LR_Scheduler@" + k] = VarBase(np.asarray(v))
    return out


def set_dict(opt: Any, state: Dict[str, Any]) -> None:
    """Load ``state_dict`` values: existing accumulators are overwritten now, the others when
    the optimizer creates them (same names in a model built the same way). As fluid 1.8: a
    ValueError when an existing accumulator is missing from ``state``, and later when an
    accumulator created after loading is not in it."""
    existing = {var.name: var for table in opt._accumulators.values()
                for var in table.values() if isinstance(var, VarBase)}
    missing = sorted(k for k in existing if k not in state)
    if missing:                     # fluid 1.8: "optimizer variable {} not found"
        raise ValueError(f"optimizer variable {missing[0]} not found in the state given to "
                         f"set_dict ({len(missing)} of the optimizer's {len(existing)} "
                         f"accumulators are missing): pass the state_dict() of an optimizer "
                         f"of the same type over the same parameters")
    # kept whole, as fluid 1.8's _accumulators_holder: accumulators created later (at their
    # parameter's first update) take their value from it
    pending = opt.__dict__["_dygraph_pending"] = {}
    lr_state = {}
    for k, v in state.items():
        arr = np.asarray(v.numpy() if isinstance(v, VarBase) else v)
        if k.startswith("LR_Scheduler@"):
            lr_state[k[len("LR_Scheduler@"):]] = arr
            continue
        if k in existing:
            existing[k].set_value(arr)
        pending[k] = arr
    lr = opt._learning_rate
    if lr_state and hasattr(lr, "set_dict"):
        lr.set_dict(lr_state)


# the dygraph branch of fluid.optimizer's methods (optimizer/base.py, special.py call them)
for _name, _fn in (("minimize", minimize), ("backward", backward),
                   ("apply_gradients", apply_gradients), ("state_dict", state_dict),
                   ("set_dict", set_dict), ("dpsgd_minimize", dpsgd_minimize)):
    _mode.register("optimizer." + _name, _fn)
