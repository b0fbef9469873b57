"""``OpTest``: Paddle's op-test contract for fluidlite (public; used by tests/ and by users).

Subclass, set ``op_type``, ``inputs`` (slot -> array, or for a duplicable slot a list of
``(name, array)``), ``attrs`` and ``outputs`` (slot -> NumPy reference), then call
``check_infer()``, ``check_output()`` and ``check_grad(['X'], 'Out')``. Every check builds a
one-op Program and runs it through the real Executor; ``check_grad`` appends the backward pass
on ``mean(Out)`` and compares with central differences computed in float64;
``check_double_grad`` checks second derivatives (the grad op's own gradient rule) the same way.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from .core import names
from .core.ir import Program, Variable, program_guard
from .core.registry import get_op_def
from .core.scope import CPUPlace, Scope
from .executor import Executor

__all__ = ["OpTest", "check_grad", "check_double_grad", "numeric_grad", "assert_grads_close"]


def _dtype_of(expected: Any) -> Any:
    """The dtype of an expected output (an array, or an (array, lod) pair), else None."""
    if isinstance(expected, tuple) and expected:
        expected = expected[0]
    return expected.dtype if isinstance(expected, np.ndarray) else None


def _entries(value: Any, slot: str) -> List[Tuple[str, np.ndarray]]:
    if isinstance(value, list):
        return [(n, np.asarray(a)) for n, a in value]
    return [(slot.lower() if slot != "X" else "x", np.asarray(value))]


class OpTest:
    """Base class for single-op tests (pytest style; call ``setup`` yourself or via fixture)."""

    op_type: str = ""
    inputs: Dict[str, Any] = {}
    attrs: Dict[str, Any] = {}
    outputs: Dict[str, Any] = {}

    # -- helpers for subclasses -------------------------------------------------------------
    @staticmethod
    def rand(*shape: int, low: float = -1.0, high: float = 1.0, avoid: Optional[float] = None,
             dtype: str = "float64", seed: int = 0) -> np.ndarray:
        """Uniform test data; ``avoid`` keeps values at least 0.05 away from a kink."""
        rng = np.random.default_rng(seed)
        x = rng.uniform(low, high, size=shape)
        if avoid is not None:
            close = np.abs(x - avoid) < 0.05
            x[close] = avoid + 0.1 * np.sign(x[close] - avoid + 1e-12)
        return x.astype(dtype)

    # -- program construction ---------------------------------------------------------------
    def _build(self, dtype: Optional[str] = None, requires_grad: Sequence[str] = ()
               ) -> Tuple[Program, Dict[str, np.ndarray], Dict[str, List[Variable]], Any]:
        opdef = get_op_def(self.op_type)
        prog = Program()
        feed: Dict[str, np.ndarray] = {}
        in_vars: Dict[str, Any] = {}
        block = prog.global_block()
        for slot, value in self.inputs.items():
            dup = isinstance(value, list)
            vs = []
            for name, arr in _entries(value, slot):
                if dtype is not None and arr.dtype.kind == "f":
                    arr = arr.astype(dtype)
                v = block.create_var(name=name, shape=arr.shape, dtype=arr.dtype, is_data=True,
                                     stop_gradient=name not in requires_grad)
                feed[name] = arr
                vs.append(v)
            in_vars[slot] = vs if dup else vs[0]
        out_vars: Dict[str, Any] = {}
        for s in opdef.out_slots:
            ref = self.outputs.get(s.name)
            # declared with the expected dtype, as a user declares an op's outputs; an op
            # with shape inference overrides it, one without (py_func) keeps it
            if isinstance(ref, list):
                out_vars[s.name] = [block.create_var(name=n, dtype=_dtype_of(a))
                                    for n, a in ref]
            else:
                out_vars[s.name] = block.create_var(name=s.name.lower() + "_out",
                                                    dtype=_dtype_of(ref))
        with program_guard(prog, Program()):
            block.append_op(self.op_type, in_vars, out_vars, dict(self.attrs))
        return prog, feed, out_vars, in_vars

    def _fetch_names(self, out_vars: Dict[str, Any], slots: Sequence[str]) -> List[str]:
        names_ = []
        for s in slots:
            v = out_vars[s]
            names_ += [x.name for x in v] if isinstance(v, list) else [v.name]
        return names_

    # -- checks -----------------------------------------------------------------------------
    def check_infer(self) -> None:
        """Shapes/dtypes inferred at build time agree with the reference outputs."""
        prog, _, out_vars, _ = self._build()
        for slot, ref in self.outputs.items():
            vs = out_vars[slot] if isinstance(out_vars[slot], list) else [out_vars[slot]]
            refs = [a for _, a in ref] if isinstance(ref, list) else [ref]
            for v, r in zip(vs, refs):
                r = np.asarray(r)
                assert len(v.shape) == r.ndim and all(
                    d < 0 or d == e for d, e in zip(v.shape, r.shape)), \
                    f"{self.op_type}: inferred shape of {slot} {v.shape} != reference {r.shape}"

    def check_output(self, atol: float = 1e-5, rtol: float = 1e-5,
                     no_check_set: Sequence[str] = ()) -> None:
        """Run the op through the Executor; compare every output with its reference."""
        prog, feed, out_vars, _ = self._build()
        slots = [s for s in self.outputs if s not in no_check_set]
        fetch = self._fetch_names(out_vars, slots)
        got = Executor(CPUPlace()).run(prog, feed=feed, fetch_list=fetch, scope=Scope())
        refs = []
        for s in slots:
            ref = self.outputs[s]
            refs += [a for _, a in ref] if isinstance(ref, list) else [ref]
        for name, g, r in zip(fetch, got, refs):
            r = np.asarray(r)
            assert g.shape == r.shape, f"{self.op_type}: {name} shape {g.shape} != {r.shape}"
            np.testing.assert_allclose(g, r, atol=atol, rtol=rtol,
                                       err_msg=f"{self.op_type}: output {name}")

    def check_grad(self, inputs_to_check: Sequence[str], output_names: Union[str, Sequence[str]],
                   max_relative_error: float = 0.005, no_grad_set: Optional[Sequence[str]] = None,
                   delta: float = 1e-3, weighted: bool = True,
                   allow_zero_grad: bool = False, symmetric: Sequence[str] = ()) -> None:
        """Analytic gradients (via append_backward and the Executor) vs central differences,
        both in float64. ``inputs_to_check`` are slot names (or var names of duplicable
        entries). By default (``weighted=True``) the checked scalar is ``sum(output * R)`` for
        a fixed random ``R`` of the output's run-time shape: the upstream gradient is random
        and of order one per element, so a rule whose error cancels under a uniform one -- a
        zero gradient where the mean of the output does not depend on the input (softmax),
        normalizations -- fails. ``weighted=False`` checks ``mean(output)``, Paddle's own
        contract. Either way the check refuses to pass vacuously: when the numeric gradient is
        so small that an all-zero analytic gradient would pass too, it fails unless
        ``allow_zero_grad`` (an op whose gradient is zero, e.g. ``sign``). Inputs named in
        ``symmetric`` are (batches of) symmetric matrices that the op reads as such (``eigh``
        reads one triangle): they are perturbed along symmetric directions only, and the
        symmetric part of the analytic gradient must equal the numeric one."""
        from . import backward, layers
        output_names = [output_names] if isinstance(output_names, str) else list(output_names)
        var_names = self._check_var_names(inputs_to_check)
        prog, feed, out_vars, _ = self._build("float64", requires_grad=var_names)
        block = prog.global_block()
        with program_guard(prog, Program()):
            outs = []
            for s in output_names:
                v = out_vars[s]
                outs += v if isinstance(v, list) else [v]
            if weighted:        # R of each output's run-time shape (an OutSize may win)
                shapes = [a.shape for a in Executor(CPUPlace()).run(
                    prog, feed=feed, fetch_list=[o.name for o in outs], scope=Scope())]
                outs = [self._project(block, o, i, feed, s)
                        for i, (o, s) in enumerate(zip(outs, shapes))]
            means = [layers.reduce_sum(o) if weighted else layers.mean(o) for o in outs]
            loss = means[0]
            if len(means) > 1:
                loss = block.create_var(name="check_grad_loss")
                block.append_op("sum", {"X": means}, {"Out": loss})
        fwd = prog.clone()
        with program_guard(prog, Program()):
            backward.append_backward(loss, parameter_list=[], no_grad_set=no_grad_set)
        grad_names = [names.grad_var_name(n) for n in var_names]
        for g in grad_names:
            assert block.has_var(g), f"{self.op_type}: no gradient was produced for {g}"
        exe = Executor(CPUPlace())
        analytic = exe.run(prog, feed=feed, fetch_list=grad_names, scope=Scope())

        def f(fd: Dict[str, np.ndarray]) -> float:
            return float(exe.run(fwd, feed=fd, fetch_list=[loss.name], scope=Scope())[0][0])

        symmetric_vars = set(self._check_var_names(symmetric)) if symmetric else set()
        for name, a in zip(var_names, analytic):
            if name in symmetric_vars:  # only a's symmetric part acts on symmetric inputs
                n = numeric_grad_symmetric(f, feed, name, delta)
                a = (a + np.swapaxes(a, -1, -2)) / 2
            else:
                n = numeric_grad(f, feed, name, delta)
            assert_grads_close(a, n, max_relative_error, f"{self.op_type}: d{name}")
            if not allow_zero_grad:
                _assert_not_vacuous(n, max_relative_error, f"{self.op_type}: d{name}")

    @staticmethod
    def _project(block: Any, out: Variable, k: int, feed: Dict[str, np.ndarray],
                 shape: Optional[Sequence[int]] = None) -> Variable:
        """``out * R_k`` with a fixed random ``R_k`` of ``out``'s run-time ``shape`` fed as
        data, or ``flatten(out) @ r_k`` when the shape is not known."""
        from . import layers
        rng = np.random.default_rng(7 + k)
        if shape is not None and len(shape) > 0:
            name = f"check_grad_w{k}"
            feed[name] = rng.uniform(-1, 1, tuple(shape))
            static = list(out.shape) if len(out.shape) == len(shape) else list(shape)
            declared = [d if d == r else -1 for d, r in zip(static, shape)]   # as out's
            w = block.create_var(name=name, shape=tuple(declared), dtype="float64",
                                 is_data=True, stop_gradient=True)
            return layers.elementwise_mul(out, w)
        width = int(np.prod(out.shape[1:])) if len(out.shape) > 1 else 1
        name = f"check_grad_r{k}"
        feed[name] = rng.uniform(-1, 1, (width, 1))
        r = block.create_var(name=name, shape=(width, 1), dtype="float64", is_data=True,
                             stop_gradient=True)
        flat = out if len(out.shape) > 1 else layers.unsqueeze(out, [1])
        return layers.mul(flat, r)

    def check_double_grad(self, inputs_to_check: Sequence[str],
                          output_names: Union[str, Sequence[str]],
                          max_relative_error: float = 0.005, delta: float = 1e-3,
                          seed: int = 0) -> None:
        """Second-order check of the op's gradient rules (its ``<type>_grad`` and the grad op's
        ``double_grad``), as Paddle's ``double_grad_check``: the upstream gradients ``dOut``
        are fed variables, ``g = fluid.gradients(outputs, inputs, target_gradients=dOut)``, and
        the analytic gradient of ``s = sum_i <g_i, w_i>`` (fixed random ``w_i``) w.r.t. the
        inputs *and* ``dOut`` (a second ``fluid.gradients`` call) is compared with central
        differences of ``s``, all in float64."""
        from . import backward
        output_names = [output_names] if isinstance(output_names, str) else list(output_names)
        var_names = self._check_var_names(inputs_to_check)
        prog, feed, out_vars, _ = self._build("float64", requires_grad=var_names)
        block = prog.global_block()
        rng = np.random.default_rng(seed)
        outs = []
        for s in output_names:
            v = out_vars[s]
            outs += v if isinstance(v, list) else [v]
        xs = [block.var(n) for n in var_names]
        with program_guard(prog, Program()):
            douts = []
            for o in outs:
                if any(d < 0 for d in o.shape):
                    raise ValueError(f"{self.op_type}: output '{o.name}' has an unknown dim "
                                     f"{list(o.shape)}; check_double_grad needs static shapes")
                d = block.create_var(name=o.name + "@DOUT", shape=o.shape, dtype=o.dtype,
                                     is_data=True, stop_gradient=False)
                feed[d.name] = rng.uniform(-1.0, 1.0, size=o.shape)
                douts.append(d)
            first = backward.gradients(outs, xs, target_gradients=douts)
            missing = [x.name for x, g in zip(xs, first) if g is None]
            assert not missing, f"{self.op_type}: no first-order gradient for {missing}"
            ws = []
            for x in xs:
                w = block.create_var(name=x.name + "@W", shape=x.shape, dtype=x.dtype,
                                     is_data=True, stop_gradient=True)
                feed[w.name] = rng.uniform(-1.0, 1.0, size=x.shape)
                ws.append(w)
            first_prog = prog.clone()
            wrt = xs + douts
            second = backward.gradients(first, wrt, target_gradients=ws)
        exe = Executor(CPUPlace())
        fetch = [g.name for g in second if g is not None]
        got = dict(zip(fetch, exe.run(prog, feed=feed, fetch_list=fetch, scope=Scope())))
        first_names = [g.name for g in first]

        def f(fd: Dict[str, np.ndarray]) -> float:
            gs = exe.run(first_prog, feed=fd, fetch_list=first_names, scope=Scope())
            return float(sum(np.sum(g * fd[w.name]) for g, w in zip(gs, ws)))

        for v, g in zip(wrt, second):
            n = numeric_grad(f, feed, v.name, delta)
            a = got[g.name] if g is not None else np.zeros_like(n)
            assert_grads_close(a, n, max_relative_error,
                               f"{self.op_type}: second-order d{v.name}")

    def _check_var_names(self, inputs_to_check: Sequence[str]) -> List[str]:
        out = []
        for key in inputs_to_check:
            if key in self.inputs:
                out += [n for n, _ in _entries(self.inputs[key], key)]
            else:
                out.append(key)
        return out


def numeric_grad(f: Any, feed: Dict[str, np.ndarray], name: str, delta: float = 1e-3) -> np.ndarray:
    """Central differences of scalar ``f(feed)`` w.r.t. ``feed[name]`` (float64)."""
    base = feed[name].astype(np.float64)
    grad = np.zeros_like(base)
    flat, gflat = base.reshape(-1), grad.reshape(-1)
    for i in range(flat.size):
        orig = flat[i]
        flat[i] = orig + delta
        hi = f({**feed, name: base.copy()})
        flat[i] = orig - delta
        lo = f({**feed, name: base.copy()})
        flat[i] = orig
        gflat[i] = (hi - lo) / (2 * delta)
    return grad


def numeric_grad_symmetric(f: Any, feed: Dict[str, np.ndarray], name: str,
                           delta: float = 1e-3) -> np.ndarray:
    """Central differences of ``f`` along the symmetric directions of ``feed[name]`` (a batch
    of square matrices): entry (i, j) and (j, i) move together, so the result ``G`` (itself
    symmetric) satisfies <G, E> = df for every symmetric perturbation E."""
    base = feed[name].astype(np.float64)
    n = base.shape[-1]
    grad = np.zeros_like(base)
    for batch in np.ndindex(base.shape[:-2]):
        for i in range(n):
            for j in range(i, n):
                step = np.zeros_like(base)
                step[batch + (i, j)] = step[batch + (j, i)] = delta
                d = (f({**feed, name: base + step}) - f({**feed, name: base - step})) / (2 * delta)
                grad[batch + (i, j)] = grad[batch + (j, i)] = d if i == j else d / 2
    return grad


def _assert_not_vacuous(numeric: np.ndarray, max_relative_error: float, what: str) -> None:
    """A gradient check must be able to fail: an all-zero analytic gradient has to be
    rejected by ``assert_grads_close`` against ``numeric``."""
    if numeric.size and float(np.abs(numeric).max()) <= max_relative_error:
        raise AssertionError(
            f"{what}: the numeric gradient is at most {float(np.abs(numeric).max()):.3g} "
            f"everywhere, so an all-zero gradient rule would pass this check too; choose "
            f"inputs where the gradient is not ~0, or pass allow_zero_grad=True for an op "
            f"whose gradient is zero")


def assert_grads_close(analytic: np.ndarray, numeric: np.ndarray, max_relative_error: float,
                       what: str = "gradient") -> None:
    """Paddle's criterion: ``|a - n| / max(|a|, 1e-3 -> 1)`` must stay below the bound."""
    analytic = np.asarray(analytic, dtype=np.float64)
    assert analytic.shape == numeric.shape, f"{what}: shape {analytic.shape} != {numeric.shape}"
    scale = np.abs(analytic).copy()
    scale[scale < 1e-3] = 1.0
    diff = np.abs(analytic - numeric) / scale
    worst = float(diff.max()) if diff.size else 0.0
    assert worst <= max_relative_error, (
        f"{what}: max relative error {worst:.3g} > {max_relative_error} "
        f"(at index {np.unravel_index(int(diff.argmax()), diff.shape)}; analytic "
        f"{analytic.reshape(-1)[int(diff.argmax())]:.6g}, numeric "
        f"{numeric.reshape(-1)[int(diff.argmax())]:.6g})")


def _functional(op_type: str, inputs: Dict[str, Any], attrs: Optional[Dict[str, Any]],
                inputs_to_check: Optional[Sequence[str]]) -> Tuple[OpTest, List[str]]:
    t = OpTest()
    t.op_type, t.inputs, t.attrs = op_type, dict(inputs), dict(attrs or {})
    t.outputs = {}
    slots = list(inputs_to_check) if inputs_to_check else [
        s for s, v in inputs.items()
        if not isinstance(v, list) and np.asarray(v).dtype.kind == "f"]
    return t, slots


def check_grad(op_type: str, inputs: Dict[str, Any], output: Union[str, Sequence[str]],
               attrs: Optional[Dict[str, Any]] = None,
               inputs_to_check: Optional[Sequence[str]] = None,
               max_relative_error: float = 0.005, delta: float = 1e-3,
               weighted: bool = False) -> None:
    """Functional form: numeric gradient check of one op (see ``OpTest.check_grad``)."""
    t, slots = _functional(op_type, inputs, attrs, inputs_to_check)
    t.check_grad(slots, output, max_relative_error=max_relative_error, delta=delta,
                 weighted=weighted)


def check_double_grad(op_type: str, inputs: Dict[str, Any], output: Union[str, Sequence[str]],
                      attrs: Optional[Dict[str, Any]] = None,
                      inputs_to_check: Optional[Sequence[str]] = None,
                      max_relative_error: float = 0.005, delta: float = 1e-3) -> None:
    """Functional form: second-order check of one op (see ``OpTest.check_double_grad``)."""
    t, slots = _functional(op_type, inputs, attrs, inputs_to_check)
    t.check_double_grad(slots, output, max_relative_error=max_relative_error, delta=delta)
