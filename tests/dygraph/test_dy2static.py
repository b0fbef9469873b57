"""dy2static: a tensor ``if`` / ``while`` in a ``@declarative`` function becomes
``fluid.layers.cond`` / ``while_loop`` in its traced program (fluidlite/dygraph/dy2static.py)."""
import functools

import numpy as np
import pytest

import fluidlite as fluid
from fluidlite import dygraph
from fluidlite.dygraph import ProgramTranslator, declarative
from fluidlite.dygraph.dy2static import UNDEFINED, convert_function

L = fluid.layers


def _ops(program):
    return [op.type for b in program.blocks for op in b.ops]


def _var(a, stop_gradient=True):
    v = dygraph.to_variable(np.asarray(a))
    v.stop_gradient = stop_gradient
    return v


def _plain(fn, *args):
    """``fn`` run as plain dygraph (translation disabled)."""
    pt = ProgramTranslator()
    pt.enable(False)
    try:
        return fn(*args)
    finally:
        pt.enable(True)


def _compiled(caplog, sf, *args, call=None):
    """``sf(*args)`` (or ``call(*args)``, which runs ``sf``), asserting that it ran its traced
    program (no eager fallback)."""
    with caplog.at_level("INFO", logger="fluidlite"):
        out = (call or sf)(*args)
    assert "reads the value" not in caplog.text
    assert "cannot be traced" not in caplog.text
    assert not sf._last.eager
    return out


def test_tensor_if_else_several_variables_both_branches(caplog):
    @declarative
    def f(x):
        y = x * 2.0
        if L.mean(x) > 0:
            y = y + 1.0
            z = y * 3.0
        else:
            y = y - 1.0
            z = L.exp(y)
        return y, z

    with dygraph.guard():
        for sign in (1.0, -1.0, 1.0):
            xv = sign * np.arange(1, 7, dtype="float32").reshape(2, 3)
            y, z = _compiled(caplog, f, _var(xv))
            ey, ez = _plain(f, _var(xv))
            np.testing.assert_allclose(y.numpy(), ey.numpy(), rtol=1e-6)
            np.testing.assert_allclose(z.numpy(), ez.numpy(), rtol=1e-6)
        assert sign * xv.mean() > 0 and np.allclose(y.numpy(), 2 * xv + 1)
        assert f.cache_size == 1            # one program takes either branch
        ops = _ops(f.program)
        assert ops.count("conditional_block") == 2 and "logical_not" in ops


def test_if_without_else_and_branch_temporary(caplog):
    @declarative
    def f(x):
        y = x
        if L.reduce_sum(x) > 1.0:
            t = x * x              # a temporary of the true branch only
            y = t + 1.0
        return y * 2.0

    with dygraph.guard():
        for v in (np.full((2, 2), 1.0, "float32"), np.full((2, 2), 0.1, "float32")):
            out = _compiled(caplog, f, _var(v))
            np.testing.assert_allclose(out.numpy(), _plain(f, _var(v)).numpy(), rtol=1e-6)
        assert "conditional_block" in _ops(f.program)


def test_nested_if_and_boolean_operators(caplog):
    @declarative
    def f(x, y):
        s = L.reduce_sum(x)
        if s > 0 and not (L.reduce_sum(y) > 0):
            if s > 10.0:
                out = x * 10.0
            else:
                out = x + y
        elif s < -5.0 or L.reduce_max(y) > 100.0:
            out = x - y
        else:
            out = y * 0.5
        return out

    cases = [(3.0, -1.0), (30.0, -1.0), (-10.0, 1.0), (-1.0, 1.0), (-1.0, 1000.0), (1.0, 1.0)]
    with dygraph.guard():
        for a, b in cases:
            xv, yv = np.full((2,), a, "float32"), np.full((2,), b, "float32")
            out = _compiled(caplog, f, _var(xv), _var(yv))
            np.testing.assert_allclose(out.numpy(), _plain(f, _var(xv), _var(yv)).numpy(),
                                       rtol=1e-6, err_msg=str((a, b)))
        assert f.cache_size == 1
        ops = _ops(f.program)
        assert ops.count("conditional_block") == 6     # three ifs, two blocks each
        assert "logical_and" in ops and "logical_or" in ops


def test_tensor_while_loop_sums_until_a_tensor_limit(caplog):
    @declarative
    def f(x, n):
        i = L.fill_constant([1], "int64", 0)
        s = L.zeros_like(x)
        while i < n:
            s = s + x
            i = i + 1
        return s, i

    def plain(x, n):            # the same loop with Python numbers
        return x * n, n

    with dygraph.guard():
        xv = np.arange(1, 5, dtype="float32").reshape(2, 2)
        for k in (3, 0, 5):
            s, i = _compiled(caplog, f, _var(xv), _var(np.array([k], "int64")))
            es, ei = plain(xv, k)
            np.testing.assert_allclose(s.numpy(), es, rtol=1e-6)
            assert i.numpy().tolist() == [ei]
            ps, pi = _plain(f, _var(xv), _var(np.array([k], "int64")))
            np.testing.assert_allclose(s.numpy(), ps.numpy(), rtol=1e-6)
        assert f.cache_size == 1
        assert "while" in _ops(f.program)


def test_while_with_python_loop_variable_inside_tensor_if(caplog):
    @declarative
    def f(x):
        y = x
        while L.reduce_sum(y) < 100.0:      # doubles until the sum reaches 100
            y = y * 2.0
        if L.reduce_max(y) > 50.0:
            y = y - 50.0
        return y

    with dygraph.guard():
        for v in (0.5, 3.0, 200.0):
            xv = np.full((3,), v, "float32")
            out = _compiled(caplog, f, _var(xv))
            np.testing.assert_allclose(out.numpy(), _plain(f, _var(xv)).numpy(), rtol=1e-6)


class _Net(dygraph.Layer):
    def __init__(self):
        super().__init__()
        self.fc = dygraph.Linear(3, 3)

    @declarative
    def forward(self, x):
        h = self.fc(x)
        if L.reduce_sum(h) > 0:
            h = L.relu(h) * 2.0
        else:
            h = h * h
        return L.reduce_mean(h)


def test_gradients_through_a_converted_if_match_dygraph(caplog):
    with dygraph.guard():
        net = _Net()
        w = net.fc.weight.numpy()
        net.fc.weight.set_value(np.abs(w))
        for sign in (1.0, -1.0):
            xv = sign * (np.arange(6, dtype="float64").reshape(2, 3) + 1.0).astype("float32")
            x = _var(xv, stop_gradient=False)
            loss = _compiled(caplog, net.forward, x, call=net)
            loss.backward()
            gw, gb, gx = (net.fc.weight.gradient().copy(), net.fc.bias.gradient().copy(),
                          x.gradient().copy())
            net.clear_gradients()
            x2 = _var(xv, stop_gradient=False)
            loss2 = _plain(net, x2)
            loss2.backward()
            np.testing.assert_allclose(loss.numpy(), loss2.numpy(), rtol=1e-6)
            np.testing.assert_allclose(gw, net.fc.weight.gradient(), rtol=1e-5, atol=1e-7)
            np.testing.assert_allclose(gb, net.fc.bias.gradient(), rtol=1e-5, atol=1e-7)
            np.testing.assert_allclose(gx, x2.gradient(), rtol=1e-5, atol=1e-7)
            net.clear_gradients()
        assert net.forward.cache_size == 1
        assert "conditional_block_grad" in _ops(net.forward._last.traced.program)


def test_gradient_through_a_converted_while(caplog):
    @declarative
    def f(x, n):
        i = L.fill_constant([1], "int64", 0)
        y = x
        while i < n:
            y = y * x
            i = i + 1
        return L.reduce_sum(y)

    with dygraph.guard():
        xv = np.array([1.5, -0.5, 2.0], "float32")
        for k in (2, 0):
            x = _var(xv, stop_gradient=False)
            loss = _compiled(caplog, f, x, _var(np.array([k], "int64")))
            loss.backward()
            np.testing.assert_allclose(loss.numpy(), [np.sum(xv ** (k + 1))], rtol=1e-5)
            np.testing.assert_allclose(x.gradient(), (k + 1) * xv ** k, rtol=1e-5)


def test_python_conditions_stay_python(caplog):
    @declarative
    def f(x, scale, flag):
        if flag and x.shape[0] > 1:
            x = x * scale
        n = 0
        while n < 3:
            x = x + 1.0
            n += 1
        return x

    with dygraph.guard():
        xv = np.ones((2, 2), "float32")
        a = _compiled(caplog, f, _var(xv), 2.0, True)
        b = _compiled(caplog, f, _var(xv), 2.0, False)
        np.testing.assert_allclose(a.numpy(), xv * 2 + 3)
        np.testing.assert_allclose(b.numpy(), xv + 3)
        assert f.cache_size == 2
        ops = _ops(f.program)
        assert "conditional_block" not in ops and "while" not in ops


def test_unconvertible_code_still_runs_eagerly(caplog):
    @declarative
    def f(x):
        if L.mean(x) > 0:       # return inside: left unconverted
            return x - 1.0
        return x + 1.0

    assert "convert_ifelse" not in ProgramTranslator().get_code(f)
    with dygraph.guard():
        with caplog.at_level("WARNING", logger="fluidlite"):
            pos = f(_var(np.ones((1, 2), "float32")))
        assert "reads the value" in caplog.text
        neg = f(_var(-np.ones((1, 2), "float32")))
        np.testing.assert_allclose(pos.numpy(), [[0.0, 0.0]])
        np.testing.assert_allclose(neg.numpy(), [[0.0, 0.0]])


def test_branches_that_disagree_fall_back_to_the_original(caplog):
    @declarative
    def f(x):
        if L.mean(x) > 0:
            y = x * 2.0
            k = 1
        else:
            y = x * 3.0
            k = 2               # a Python value differing per branch: not a static cond
        return y + k

    @declarative
    def g(x):
        if L.mean(x) > 0:
            y = x * 2.0         # defined in one branch only, used after
        return y

    with dygraph.guard():
        for v in (1.0, -1.0):
            xv = np.full((2,), v, "float32")
            with caplog.at_level("INFO", logger="fluidlite"):
                out = f(_var(xv))
            np.testing.assert_allclose(out.numpy(), _plain(f, _var(xv)).numpy())
        assert "cannot be traced" in caplog.text and f._last.eager
        out = g(_var(np.ones((2,), "float32")))
        np.testing.assert_allclose(out.numpy(), [2.0, 2.0])
        assert g._last.eager


def test_get_code_and_get_func_in_static_mode():
    def f(x):
        if L.mean(x) > 0:
            x = x * 2.0
        else:
            x = x - 1.0
        return x

    pt = ProgramTranslator()
    code = pt.get_code(declarative(f))
    assert "convert_ifelse" in code and "def f(x)" in code
    static_f = pt.get_func(declarative(f))
    prog = fluid.Program()
    with fluid.program_guard(prog, fluid.Program()):
        v = fluid.data("v", [2], "float32")
        o = static_f(v)
    assert "conditional_block" in _ops(prog)
    exe = fluid.Executor(fluid.CPUPlace())
    for xv, want in (([1.0, 2.0], [2.0, 4.0]), ([-1.0, -2.0], [-2.0, -3.0])):
        (res,) = exe.run(prog, feed={"v": np.array(xv, "float32")}, fetch_list=[o])
        np.testing.assert_allclose(res, want)


def test_converted_function_keeps_python_semantics_outside_a_trace():
    scale = 3.0

    def f(x, n=2):
        total = 0
        while n > 0:
            if n % 2 == 0:
                total = total + x * scale      # a closure variable
            else:
                extra = 1                       # defined in one branch only
                total = total + extra
            n = n - 1
        return total

    conv = convert_function(f)
    assert conv is not None and conv.function is not f
    assert conv.function(1.0) == f(1.0) == 4.0
    assert conv.function(2.0, n=4) == f(2.0, n=4)
    with dygraph.guard():       # eager dygraph: tensor conditions are read as in Python
        x = _var(np.array([2.0], "float32"))
        np.testing.assert_allclose(conv.function(x).numpy(), f(x).numpy())
    assert convert_function(lambda v: v) is None
    assert convert_function(len) is None
    assert repr(UNDEFINED) == "UNDEFINED"


def test_undefined_python_name_after_if_raises_like_python():
    def f(flag):
        if flag:
            y = 1
        return y

    conv = convert_function(f).function
    assert conv(True) == 1
    with pytest.raises(NameError):
        conv(False)


class _BranchNet(dygraph.Layer):
    """Each branch has its own parameters (and a batch norm in one): a parameter of the branch
    not taken gets no gradient, as in dygraph, so Adam leaves it alone."""

    def __init__(self, static):
        super().__init__()
        self.a = dygraph.Linear(3, 3)
        self.b = dygraph.Linear(3, 3)
        self.bn = dygraph.BatchNorm(3)
        self.static = static

    @declarative
    def traced(self, x):
        if L.mean(x) > 0:
            h = self.a(x)
        else:
            h = self.bn(self.b(x))
        return L.reduce_mean(h * h)

    def forward(self, x):
        return self.traced(x) if self.static else _plain(self.traced, x)


def _train_branch_net(static, xs):
    with dygraph.guard():
        fluid.default_main_program().random_seed = 3
        net = _BranchNet(static)
        opt = fluid.optimizer.Adam(learning_rate=0.1, parameter_list=net.parameters())
        losses, grads = [], []
        for x in xs:
            loss = net(_var(x))
            loss.backward()
            grads.append(net.a.weight.gradient() is None)
            opt.minimize(loss)
            net.clear_gradients()
            losses.append(loss.numpy())
        if static:
            assert net.traced.cache_size == 1 and not net.traced._last.eager
        return losses, grads, {k: v.numpy() for k, v in net.state_dict().items()}


def test_branch_parameters_train_like_dygraph_with_adam():
    rng = np.random.RandomState(1)
    xs = [np.abs(rng.randn(4, 3)).astype("float32") * s for s in (1, -1, -1, 1, -1)]
    l_static, g_static, p_static = _train_branch_net(True, xs)
    l_eager, g_eager, p_eager = _train_branch_net(False, xs)
    assert g_static == g_eager == [False, True, True, False, True]
    np.testing.assert_allclose(np.ravel(l_static), np.ravel(l_eager), rtol=1e-5, atol=1e-6)
    assert p_static.keys() == p_eager.keys()
    for k in p_eager:       # includes batch norm's moving mean / variance
        np.testing.assert_allclose(p_static[k], p_eager[k], rtol=1e-5, atol=1e-6, err_msg=k)


def _clip_positive(v):          # a helper with its own tensor if (converted via convert_call)
    if L.reduce_sum(v) > 0:
        v = L.clip(v, 0.0, 1.0)
    return v


class _Gate(dygraph.Layer):
    """A sub-layer whose plain ``forward`` has a tensor if."""

    def __init__(self):
        super().__init__()
        self.fc = dygraph.Linear(2, 2)

    def forward(self, x):
        h = self.fc(x)
        if L.mean(h) > L.mean(x):
            h = h - x
        else:
            h = h + x
        return h


class _Outer(dygraph.Layer):
    def __init__(self):
        super().__init__()
        self.gate = _Gate()
        self.calls = []
        self.gate.register_forward_post_hook(lambda layer, ins, outs: self.calls.append(1))

    @declarative
    def forward(self, x):
        return _clip_positive(self.gate(x)) * 2.0


def test_called_functions_and_sublayers_convert_too(caplog):
    with dygraph.guard():
        net = _Outer()
        for v in ([[3.0, 4.0]], [[-3.0, -4.0]], [[0.5, -0.25]]):
            xv = np.array(v, "float32")
            out = _compiled(caplog, net.forward, _var(xv), call=net)
            np.testing.assert_allclose(out.numpy(), _plain(net, _var(xv)).numpy(), rtol=1e-6)
        assert net.forward.cache_size == 1
        assert _ops(net.forward.program).count("conditional_block") == 4
        assert net.calls             # the sub-layer's hooks still run (when tracing)
        assert "forward" not in net.gate.__dict__
        assert "convert_call" in ProgramTranslator().get_code(net.forward)


def test_layers_cond_and_while_loop_called_directly_compile(caplog):
    @declarative
    def f(x, n):
        pred = L.mean(x) > 0
        y = L.cond(pred, lambda: x * 2.0, lambda: x - 1.0)
        i = L.fill_constant([1], "int64", 0)
        i, y = L.while_loop(lambda i, y: i < n, lambda i, y: [i + 1, y + x], [i, y])
        return y

    with dygraph.guard():
        for v, k in ((1.0, 2), (-1.0, 3), (2.0, 0)):
            xv = np.full((2,), v, "float32")
            nv = np.array([k], "int64")
            out = _compiled(caplog, f, _var(xv), _var(nv))
            want = (xv * 2.0 if v > 0 else xv - 1.0) + k * xv
            np.testing.assert_allclose(out.numpy(), want, rtol=1e-6)
            np.testing.assert_allclose(_plain(f, _var(xv), _var(nv)).numpy(), want, rtol=1e-6)
        assert f.cache_size == 1
        ops = _ops(f.program)
        assert "conditional_block" in ops and "while" in ops


class _DoubledLinear(dygraph.Linear):
    """A user subclass of a fluidlite layer: ``super().forward`` in a converted forward."""

    def forward(self, x):
        h = super().forward(x)
        if L.mean(h) > 0:
            h = h * 2.0
        return h


class _Private(dygraph.Layer):
    def __init__(self):
        super().__init__()
        self.__k = 2.0

    def forward(self, x):
        return x * self.__k


def _twice(f):
    @functools.wraps(f)
    def wrapper(*a, **k):
        return f(*a, **k) * 2.0
    return wrapper


@_twice
def _wrapped(x):
    if L.mean(x) > 0:
        x = x + 1.0
    return x


def _star(*args, scale=1.0, **kw):
    y = args[0]
    if L.mean(y) > 0:
        y = y * scale
    return y


def test_conversion_corner_cases(caplog):
    # private (mangled) names and decorator wrappers are left alone (still run correctly)
    assert convert_function(_Private.forward) is None
    assert convert_function(_wrapped) is None
    assert convert_function(_DoubledLinear.forward) is not None

    @declarative
    def f(x):
        return _star(_DoubledLinear(2, 2)(x), scale=3.0)

    with dygraph.guard():
        fluid.default_main_program().random_seed = 5
        lin = _DoubledLinear(2, 2)
        priv = _Private()

        @declarative
        def g(x):
            return _star(lin(priv(x)), scale=3.0)

        for v in (1.0, -1.0):
            xv = np.full((1, 2), v, "float32")
            out = _compiled(caplog, g, _var(xv))
            np.testing.assert_allclose(out.numpy(), _plain(g, _var(xv)).numpy(), rtol=1e-6)
            np.testing.assert_allclose(_wrapped(_var(xv)).numpy(),
                                       (xv + (v > 0)) * 2.0)
        assert _ops(g.program).count("conditional_block") == 4
        assert "convert_call" in ProgramTranslator().get_code(f)


def test_statements_left_unconverted():
    def side_effects_only(x, log):
        if L.mean(x) > 0:
            log.append(1)       # nothing a cond could select: stays a Python if
        return x

    def loop_with_break(x):
        while L.mean(x) < 10.0:
            x = x * 2.0
            if L.mean(x) > 5.0:
                break
        return x

    def attribute_store(obj, x):
        if L.mean(x) > 0:
            obj.last = x
        return x

    for fn in (side_effects_only, loop_with_break, attribute_store):
        code = ProgramTranslator().get_code(fn)
        assert "convert_ifelse" not in code and "convert_while" not in code, fn.__name__
    # the inner `if` of loop_with_break holds the break: neither statement converts, but the
    # calls do, so the function is still rewritten (convert_call)
    assert "convert_call" in ProgramTranslator().get_code(loop_with_break)
    with dygraph.guard():
        f = declarative(loop_with_break)
        out = f(_var(np.array([1.0], "float32")))
        np.testing.assert_allclose(out.numpy(), [8.0])
        assert f._last.eager


def _n(k):
    return _var(np.array([k], "int64"))


def test_tensor_for_range_becomes_a_while_loop(caplog):
    @declarative
    def f(x, n):
        s = L.zeros_like(x)
        for i in range(n):
            s = s * 0.5 + x     # (the plain dygraph run's i is a Python int)
        return s, i

    assert "convert_for_range" in ProgramTranslator().get_code(f)
    with dygraph.guard():
        xv = np.array([1.0, -2.0, 0.5], "float32")
        for k in (3, 1, 5, 0):
            s, i = _compiled(caplog, f, _var(xv), _n(k))
            np.testing.assert_allclose(s.numpy(), xv * (2.0 - 2.0 ** (1 - k)), rtol=1e-6)
            if k:       # Python's loop variable: the last index taken
                ps, pi = _plain(f, _var(xv), _n(k))
                np.testing.assert_allclose(s.numpy(), ps.numpy(), rtol=1e-6)
                assert i.numpy().tolist() == [k - 1] == [pi]
            else:       # no iteration: start (Python would leave i unbound)
                assert i.numpy().tolist() == [0]
        assert f.cache_size == 1
        assert "while" in _ops(f.program)


def test_gradient_through_a_tensor_for_range(caplog):
    @declarative
    def f(x, n):
        y = x
        for _ in range(n):
            y = y * x
        return L.reduce_sum(y)

    with dygraph.guard():
        xv = np.array([1.5, -0.5, 2.0], "float32")
        for k in (2, 0, 3):
            x = _var(xv, stop_gradient=False)
            loss = _compiled(caplog, f, x, _n(k))
            loss.backward()
            x2 = _var(xv, stop_gradient=False)
            loss2 = _plain(f, x2, _n(k))
            loss2.backward()
            np.testing.assert_allclose(loss.numpy(), loss2.numpy(), rtol=1e-6)
            np.testing.assert_allclose(x.gradient(), x2.gradient(), rtol=1e-5)
            np.testing.assert_allclose(x.gradient(), (k + 1) * xv ** k, rtol=1e-5)
        assert f.cache_size == 1
        assert "while_grad" in _ops(f._last.traced.program)


def test_tensor_range_with_start_stop_and_step(caplog):
    @declarative
    def up(x, n):
        s = L.zeros_like(x)
        for j in range(2, n, 3):
            s = s + x * L.cast(j, "float32")
        return s

    @declarative
    def down(x, n):
        s = L.zeros_like(x)
        for j in range(10, n, -3):
            s = s + x * L.cast(j, "float32")
        return s, j

    @declarative
    def from_tensor(x, a):
        s = x
        for j in range(a, 6):
            s = s * 2.0
        return s

    with dygraph.guard():
        xv = np.array([1.0, 2.0], "float32")
        for k in (0, 2, 3, 6, 9, 12):
            out = _compiled(caplog, up, _var(xv), _n(k))
            np.testing.assert_allclose(out.numpy(), xv * sum(range(2, k, 3)), rtol=1e-6)
            out, j = _compiled(caplog, down, _var(xv), _n(k))
            np.testing.assert_allclose(out.numpy(), xv * sum(range(10, k, -3)), rtol=1e-6)
            if range(10, k, -3):
                assert j.numpy().tolist() == [list(range(10, k, -3))[-1]]
            out = _compiled(caplog, from_tensor, _var(xv), _n(k))
            np.testing.assert_allclose(out.numpy(), xv * 2.0 ** len(range(k, 6)), rtol=1e-6)
        for sf in (up, down, from_tensor):
            assert sf.cache_size == 1 and "while" in _ops(sf.program)


def test_python_ranges_keep_python_semantics(caplog):
    def f(start, stop, step):
        total = 0
        for i in range(start, stop, step):
            total = total + i
        return total, i

    def rebind():
        seen = []
        for i in range(3):
            seen = seen + [i]
            i = i * 10          # does not change the next index, but is i after the loop
        return seen, i

    def kept(n):
        i = "before"
        for i in range(n):
            i = i + 1
        return i

    conv = convert_function(f).function
    for args in ((0, 5, 1), (5, 0, -2), (1, 10, 4), (-3, 3, 2)):
        assert conv(*args) == f(*args), args
    assert conv(0, 3, 1) == (3, 2)          # i is the last index, not the stop
    for args in ((3, 3, 1), (0, 5, -1)):    # no iteration: i stays unbound, as in Python
        with pytest.raises(NameError):
            f(*args)
        with pytest.raises(NameError):
            conv(*args)
    with pytest.raises(ValueError):
        conv(0, 5, 0)
    with pytest.raises(TypeError):
        conv(0, 2.5, 1)
    assert convert_function(rebind).function() == rebind() == ([0, 1, 2], 20)
    kept_c = convert_function(kept).function
    assert kept_c(0) == kept(0) == "before" and kept_c(4) == kept(4) == 4

    @declarative
    def g(x, n):
        for i in range(n):
            x = x + 1.0
        return x, i

    with dygraph.guard():
        for k in (3, 1):
            out, i = _compiled(caplog, g, _var(np.zeros(2, "float32")), k)
            np.testing.assert_allclose(out.numpy(), [k, k])
            assert i == k - 1 and isinstance(i, int)
        assert g.cache_size == 2 and "while" not in _ops(g.program)


def test_tensor_for_range_in_static_mode():
    def f(x, n):
        for i in range(1, n):
            x = x * 2.0
        return x

    static_f = ProgramTranslator().get_func(declarative(f))
    prog = fluid.Program()
    with fluid.program_guard(prog, fluid.Program()):
        v = fluid.data("v", [2], "float32")
        n = fluid.data("n", [1], "int64")
        o = static_f(v, n)
    assert "while" in _ops(prog)
    exe = fluid.Executor(fluid.CPUPlace())
    for k in (0, 1, 4):
        (res,) = exe.run(prog, feed={"v": np.array([1.0, 3.0], "float32"),
                                     "n": np.array([k], "int64")}, fetch_list=[o])
        np.testing.assert_allclose(res, np.array([1.0, 3.0]) * 2.0 ** len(range(1, k)))


def test_for_range_left_unconverted_or_falling_back(caplog):
    def with_break(x, n):
        for i in range(n):
            x = x * 2.0
            if i >= 2:
                break
        return x

    def with_else(x, n):
        for i in range(n):
            x = x + 1.0
        else:
            x = x * 10.0
        return x

    def over_a_list(x, vals):
        for v in vals:
            x = x + v
        return x

    def index_only(log, n):
        for i in range(n):
            log.append(i)       # no name assigned but the index: a Python loop
        return log

    for fn in (with_break, with_else, over_a_list, index_only):
        assert "convert_for_range" not in ProgramTranslator().get_code(fn), fn.__name__

    @declarative
    def tensor_step(x, n, s):
        for i in range(0, n, s):
            x = x + 1.0
        return x

    with dygraph.guard():
        xv = np.ones(2, "float32")
        f = declarative(with_break)
        with caplog.at_level("WARNING", logger="fluidlite"):
            out = f(_var(xv), _n(5))
        assert f._last.eager and "reads the value" in caplog.text
        np.testing.assert_allclose(out.numpy(), xv * 8.0)
        g = declarative(with_else)
        np.testing.assert_allclose(g(_var(xv), _n(2)).numpy(), (xv + 2.0) * 10.0)
        # a tensor step: its sign would choose the condition -- the original runs eagerly
        out = tensor_step(_var(xv), _n(5), _n(2))
        np.testing.assert_allclose(out.numpy(), xv + 3.0)
        assert tensor_step._last.eager


def test_tensor_while_swapping_loop_variables(caplog):
    @declarative
    def fib(n):
        a = L.fill_constant([1], "int64", 1)
        b = L.fill_constant([1], "int64", 0)
        for _ in range(n):
            a, b = a + b, a     # b takes a's incoming value, not its new one
        return b

    @declarative
    def fib_while(n):
        a = L.fill_constant([1], "int64", 1)
        b = L.fill_constant([1], "int64", 0)
        while n > 0:
            a, b = a + b, a
            n = n - 1
        return b

    with dygraph.guard():
        for sf in (fib, fib_while):
            got = [_compiled(caplog, sf, _n(k)).numpy().tolist() for k in range(8)]
            assert got == [[0], [1], [1], [2], [3], [5], [8], [13]]
            assert sf.cache_size == 1 and "while" in _ops(sf.program)
