"""Every op test's gradient check, again in dygraph: for each ``OpTest`` in ``tests/ops`` whose
test calls ``check_grad``, the op is run by the tracer on float64 tensors and the gradient of
``mean(output)`` from eager backward must equal the static backward's (``append_backward`` +
Executor) -- the same gradient rule run two ways."""
import importlib
import inspect
import pkgutil

import numpy as np
import pytest

import tests.ops
from fluidlite import backward, dygraph, layers
from fluidlite.core import names
from fluidlite.core.ir import Program, program_guard
from fluidlite.core.registry import get_op_def
from fluidlite.core.scope import CPUPlace, Scope
from fluidlite.executor import Executor
from fluidlite.testing import OpTest, _entries


def _expand(fn, skip_self):
    """Argument dicts for ``fn`` from its ``pytest.mark.parametrize`` marks (one {} if none)."""
    params = list(inspect.signature(fn).parameters)[1 if skip_self else 0:]
    combos = [{}]
    for mark in getattr(fn, "pytestmark", []):
        if mark.name != "parametrize":
            continue
        argnames, argvalues = mark.args[0], mark.args[1]
        argnames = [a.strip() for a in argnames.split(",")] if isinstance(argnames, str) \
            else list(argnames)
        new = []
        for combo in combos:
            for v in argvalues:
                v = v.values if hasattr(v, "values") and not isinstance(v, dict) else v
                vals = v if len(argnames) > 1 else (v[0] if isinstance(v, tuple) and
                                                    len(v) == 1 and hasattr(v, "count")
                                                    and False else v,)
                new.append(dict(combo, **dict(zip(argnames, vals))))
        combos = new
    return [c for c in combos if set(c) == set(params)]


def _cases():
    out = []
    for info in pkgutil.iter_modules(tests.ops.__path__):
        if info.name == "test_sequence":      # LoD ops: static only (as fluid 1.8's dygraph)
            continue
        mod = importlib.import_module(f"tests.ops.{info.name}")
        for cname, obj in vars(mod).items():
            if inspect.isfunction(obj) and cname.startswith("test") and \
                    "check_grad" in inspect.getsource(obj):
                for i, kw in enumerate(_expand(obj, False)):
                    out.append(pytest.param(None, obj, kw, id=f"{info.name}.{cname}[{i}]"))
            if not (inspect.isclass(obj) and issubclass(obj, OpTest) and obj is not OpTest
                    and obj.__module__ == mod.__name__):
                continue
            for mname, fn in vars(obj).items():
                if mname.startswith("test") and callable(fn) and \
                        "check_grad" in inspect.getsource(fn):
                    for i, kw in enumerate(_expand(fn, True)):
                        out.append(pytest.param(obj, mname, kw,
                                                id=f"{info.name}.{cname}.{mname}[{i}]"))
    return out


def _static_grads(test, var_names, output_names, no_grad_set):
    prog, feed, out_vars, _ = test._build("float64", requires_grad=var_names)
    block = prog.global_block()
    with program_guard(prog, Program()):
        outs = []
        for s in output_names:
            v = out_vars[s]
            outs += v if isinstance(v, list) else [v]
        means = [layers.mean(o) for o in outs]
        loss = means[0]
        if len(means) > 1:
            loss = block.create_var(name="check_grad_loss")
            block.append_op("sum", {"X": means}, {"Out": loss})
        backward.append_backward(loss, parameter_list=[], no_grad_set=no_grad_set)
    grads = [names.grad_var_name(n) for n in var_names]
    return feed, Executor(CPUPlace()).run(prog, feed=feed, fetch_list=grads, scope=Scope())


def _dygraph_grads(test, var_names, output_names, feed):
    opdef = get_op_def(test.op_type)
    with dygraph.guard():
        tensors, ins = {}, {}
        for slot, value in test.inputs.items():
            vs = []
            for name, _ in _entries(value, slot):
                t = dygraph.to_variable(feed[name], name=name)
                t.stop_gradient = name not in var_names
                tensors[name] = t
                vs.append(t)
            ins[slot] = vs if isinstance(value, list) else vs[0]
        outs = {}
        for s in opdef.out_slots:
            ref = test.outputs.get(s.name)
            n = len(ref) if isinstance(ref, list) else 1
            outs[s.name] = [dygraph.VarBase(None) for _ in range(n)]
        from fluidlite.core import mode
        mode.tracer.trace_op(test.op_type, ins, outs, dict(test.attrs))
        means = [layers.mean(o) for s in output_names for o in outs[s]]
        loss = means[0]
        for m in means[1:]:
            loss = loss + m
        return dygraph.grad(loss, [tensors[n] for n in var_names], allow_unused=True)


@pytest.mark.parametrize("cls,method,kwargs", _cases())
def test_dygraph_gradient_equals_static(cls, method, kwargs, monkeypatch):
    checked = []

    def check_grad(self, inputs_to_check, output_names, max_relative_error=0.005,
                   no_grad_set=None, delta=1e-3, weighted=True, allow_zero_grad=False):
        output_names = [output_names] if isinstance(output_names, str) else list(output_names)
        var_names = self._check_var_names(inputs_to_check)
        feed, static = _static_grads(self, var_names, output_names, no_grad_set)
        dy = _dygraph_grads(self, var_names, output_names, feed)
        for name, s, d in zip(var_names, static, dy):
            assert d is not None, f"{self.op_type}: no dygraph gradient for {name}"
            np.testing.assert_allclose(d.numpy(), s, rtol=1e-9, atol=1e-12,
                                       err_msg=f"{self.op_type}: d{name}")
        checked.append(self.op_type)

    monkeypatch.setattr(OpTest, "check_grad", check_grad)
    monkeypatch.setattr(OpTest, "check_output", lambda self, *a, **k: None)
    monkeypatch.setattr(OpTest, "check_double_grad", lambda self, *a, **k: None)
    monkeypatch.setattr(OpTest, "check_infer", lambda self, *a, **k: None)
    if cls is None:
        method(**kwargs)
    else:
        inst = cls()
        for hook in ("setup_method", "setup"):
            if hasattr(inst, hook):
                getattr(inst, hook)(getattr(inst, method))
                break
        getattr(inst, method)(**kwargs)
    if not checked:
        pytest.skip("this case checks no gradient (a non-differentiable op)")
