"""Gradients through control flow (``while_grad``, ``conditional_block_grad``) and tensor arrays,
checked in float64 against central differences of the same program, and against the unrolled
computation."""
import numpy as np
import pytest

import fluidlite as fluid

L = fluid.layers


def check_grad(build, feeds, wrt, eps=1e-6, atol=1e-7, rtol=1e-6, lods=None):
    """``build(vars) -> loss`` inside a fresh program, ``feeds``: name -> float64 array
    (``lods``: name -> sequence lengths, fed as a LoD tensor). The gradients of ``loss``
    w.r.t. ``wrt`` (fed names) from ``fluid.gradients`` must equal the central differences of
    the loss computed by running the forward program."""
    lods = lods or {}
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        vs = {}
        for n, a in feeds.items():
            shape = [-1] + list(a.shape[1:]) if n in lods else list(a.shape)
            vs[n] = fluid.data(n, shape, str(a.dtype), lod_level=1 if n in lods else 0)
            vs[n].stop_gradient = n not in wrt
        loss = build(vs)
        fwd = main.clone()
        grads = fluid.backward.gradients(loss, [vs[n] for n in wrt])
    main.lint()
    exe = fluid.Executor()
    exe.run(startup)

    def feed_of(fd):
        return {n: fluid.create_lod_tensor(a, [lods[n]], fluid.CPUPlace()) if n in lods else a
                for n, a in fd.items()}
    got = exe.run(main, feed=feed_of(feeds), fetch_list=[g for g in grads])
    check_grad.last_types = {op.type for b in main.blocks for op in b.ops}

    def f(fd):
        return float(exe.run(fwd, feed=feed_of(fd), fetch_list=[loss.name])[0].sum())

    for n, g in zip(wrt, got):
        num = np.zeros_like(feeds[n])
        for k in range(feeds[n].size):
            fp = dict(feeds)
            fp[n] = feeds[n].copy()
            fp[n].flat[k] += eps
            fm = dict(feeds)
            fm[n] = feeds[n].copy()
            fm[n].flat[k] -= eps
            num.flat[k] = (f(fp) - f(fm)) / (2 * eps)
        np.testing.assert_allclose(g, num, atol=atol, rtol=rtol, err_msg=f"d loss / d {n}")
    return got, exe, main


def _loop(h, x, W, steps, body):
    i = L.fill_constant([1], "int64", 0)
    n = L.fill_constant([1], "int64", steps)
    c = L.less_than(i, n)
    loop = L.While(c)
    with loop.block():
        body(h, x, W, i)
        L.increment(i)
        L.less_than(i, n, cond=c)
    return i


def _rnn_step(h, x, W, i):
    L.assign(L.tanh(L.elementwise_add(L.matmul(h, W), x)), h)


RS = np.random.RandomState(0)
FEEDS = {"x": RS.rand(3, 4), "W": RS.rand(4, 4) - 0.5, "h0": RS.rand(3, 4)}


def test_while_grad_matches_numeric():
    """op 'while' / 'while_grad' through 4 iterations: loop-carried h, read-only x and W."""
    def build(v):
        h = L.assign(v["h0"])
        _loop(h, v["x"], v["W"], 4, _rnn_step)
        return L.reduce_sum(L.square(h))
    check_grad(build, FEEDS, ["x", "W", "h0"])
    assert {"while", "while_grad"} <= check_grad.last_types


def test_while_equals_unrolled_values_and_gradients():
    def looped(v):
        h = L.assign(v["h0"])
        _loop(h, v["x"], v["W"], 3, _rnn_step)
        return L.reduce_sum(L.square(h))

    def unrolled(v):
        h = v["h0"]
        for _ in range(3):
            h = L.tanh(L.elementwise_add(L.matmul(h, v["W"]), v["x"]))
        return L.reduce_sum(L.square(h))

    a, *_ = check_grad(looped, FEEDS, ["x", "W", "h0"])
    b, *_ = check_grad(unrolled, FEEDS, ["x", "W", "h0"])
    for ga, gb in zip(a, b):
        np.testing.assert_allclose(ga, gb, rtol=1e-12, atol=1e-14)


def test_while_grad_body_reads_updated_value():
    """The body overwrites h, then reads the new h in the same iteration (SSA versions)."""
    def body(h, x, W, i):
        L.assign(L.elementwise_mul(h, x), h)
        L.assign(L.elementwise_add(L.sin(h), L.matmul(h, W)), h)

    def build(v):
        h = L.assign(v["h0"])
        _loop(h, v["x"], v["W"], 3, body)
        return L.reduce_sum(h)
    check_grad(build, FEEDS, ["x", "W", "h0"])


def test_while_grad_variable_overwritten_without_read():
    """A loop variable written but not read in the body gets no gradient from before the loop
    (its first value is overwritten)."""
    def body(h, x, W, i):
        L.assign(L.scale(x, 2.0), h)

    def build(v):
        h = L.assign(v["h0"])
        _loop(h, v["x"], v["W"], 2, body)
        return L.reduce_sum(L.elementwise_mul(h, v["h0"]))
    (gx, gh), *_ = check_grad(build, FEEDS, ["x", "h0"])
    np.testing.assert_allclose(gx, 2 * FEEDS["h0"])


def test_tensor_array_gradients_through_loop():
    """ops 'write_to_array', 'read_from_array', 'tensor_array_to_tensor' in a loop."""
    def body(h, x, W, i):
        hn = L.tanh(L.elementwise_add(L.matmul(h, W), x))
        L.assign(hn, h)
        L.array_write(hn, i, array=ARR[0])

    def build(v):
        ARR[0] = L.create_array("float64")
        h = L.assign(v["h0"])
        _loop(h, v["x"], v["W"], 3, body)
        out, _ = L.tensor_array_to_tensor(ARR[0], axis=0)
        first = L.array_read(ARR[0], L.fill_constant([1], "int64", 0))
        return L.elementwise_add(L.reduce_sum(L.square(out)), L.reduce_sum(first))
    ARR = [None]
    check_grad(build, FEEDS, ["x", "W", "h0"])
    assert {"write_to_array", "read_from_array", "tensor_array_to_tensor",
            "write_to_array_grad", "read_from_array_grad"} <= check_grad.last_types


def test_array_read_in_loop_gradient():
    """Reading an array filled before the loop, inside the loop (the array gradient is summed
    over iterations position-wise)."""
    def build(v):
        arr = L.create_array("float64")
        for k in range(3):
            L.array_write(L.scale(v["x"], float(k + 1)), L.fill_constant([1], "int64", k),
                          array=arr)
        acc = L.fill_constant([3, 4], "float64", 0.0)
        acc.stop_gradient = False       # a loop variable the loss depends on (else no gradient)

        def body(h, x, W, i):
            L.assign(L.elementwise_add(acc, L.sin(L.array_read(arr, i))), acc)
        _loop(acc, v["x"], v["W"], 3, body)
        return L.reduce_sum(acc)
    check_grad(build, {"x": FEEDS["x"], "W": FEEDS["W"]}, ["x"])


def test_stack_tensor_array_to_tensor_gradient():
    def build(v):
        arr = L.array_write(v["x"], L.fill_constant([1], "int64", 0))
        L.array_write(L.sin(v["x"]), L.fill_constant([1], "int64", 1), array=arr)
        out, idx = L.tensor_array_to_tensor(arr, axis=1, use_stack=True)
        assert list(out.shape)[1] == -1
        return L.reduce_sum(L.square(out))
    check_grad(build, {"x": FEEDS["x"]}, ["x"])


def test_print_passes_values_and_gradients(capsys):
    """op 'print' prints its tensor to stdout (as fluid) and passes the gradient through."""
    def build(v):
        p = L.Print(v["x"], message="xval", summarize=3)
        return L.reduce_sum(L.square(p))
    check_grad(build, {"x": FEEDS["x"]}, ["x"])
    assert {"print", "print_grad"} <= check_grad.last_types
    out = capsys.readouterr().out
    assert "xval" in out and "Tensor[x]" in out and "Tensor[x@GRAD]" in out
    x = np.asarray(FEEDS["x"]).reshape(-1)
    assert "    data: " + "".join(f"{v.item()}," for v in x[:3]) in out


def test_optimizer_trains_through_while():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [3, 4], "float32")
        W = L.create_parameter([4, 4], "float32", name="W",
                               default_initializer=fluid.initializer.Constant(0.1))
        h = L.assign(x)
        _loop(h, x, W, 3, _rnn_step)
        loss = L.reduce_mean(L.square(h))
        fluid.optimizer.Adam(0.05, grad_clip=fluid.clip.GradientClipByGlobalNorm(1.0)).minimize(
            loss)
    main.lint()
    exe = fluid.Executor()
    exe.run(startup)
    xv = RS.rand(3, 4).astype("float32")
    losses = [float(exe.run(main, feed={"x": xv}, fetch_list=[loss])[0][0]) for _ in range(30)]
    assert losses[-1] < 0.5 * losses[0]


def test_cond_gradient_matches_numeric():
    """op 'conditional_block' / 'conditional_block_grad' (both branches, nested in a loop)."""
    for flag in (True, False):
        def build(v):
            p = L.fill_constant([1], "bool", flag)
            out = L.cond(p, lambda: L.matmul(v["h0"], v["W"]),
                         lambda: L.elementwise_mul(L.tanh(v["h0"]), v["x"]))
            return L.reduce_sum(L.square(out))
        got, *_ = check_grad(build, FEEDS, ["x", "W", "h0"])
        assert {"conditional_block", "conditional_block_grad"} <= check_grad.last_types
        # only the taken branch contributes
        assert (np.abs(got[0]).sum() == 0) == flag and (np.abs(got[1]).sum() == 0) != flag


def test_cond_inside_while_gradient():
    def body(h, x, W, i):
        odd = L.equal(L.elementwise_mod(i, L.fill_constant([1], "int64", 2)),
                      L.fill_constant([1], "int64", 1))
        new = L.cond(odd, lambda: L.tanh(L.matmul(h, W)), lambda: L.elementwise_mul(h, x))
        L.assign(new, h)

    def build(v):
        h = L.assign(v["h0"])
        _loop(h, v["x"], v["W"], 4, body)
        return L.reduce_sum(h)
    check_grad(build, FEEDS, ["x", "W", "h0"])


def test_ifelse_rows_values_and_gradient():
    """IfElse: ops 'split_lod_tensor' / 'merge_lod_tensor' around two conditional blocks."""
    def build(v):
        zero = L.fill_constant([3, 1], "float64", 0.0)
        mask = L.less_than(L.slice(v["x"], axes=[1], starts=[0], ends=[1]), zero + 0.5)
        ie = L.IfElse(mask)
        with ie.true_block():
            ie.output(L.scale(L.square(ie.input(v["h0"])), 3.0))
        with ie.false_block():
            ie.output(L.matmul(ie.input(v["h0"]), v["W"]))
        out, = ie()
        return L.reduce_sum(L.elementwise_mul(out, out))
    feeds = {"x": FEEDS["x"], "W": FEEDS["W"], "h0": FEEDS["h0"]}
    check_grad(build, feeds, ["W", "h0"])
    assert {"split_lod_tensor", "merge_lod_tensor", "split_lod_tensor_grad",
            "merge_lod_tensor_grad"} <= check_grad.last_types
    # values: rows where x[:, 0] < 0.5 take 3 h0^2, the others h0 @ W
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        vs = {n: fluid.data(n, list(a.shape), "float64") for n, a in feeds.items()}
        zero = L.fill_constant([3, 1], "float64", 0.5)
        ie = L.IfElse(L.less_than(L.slice(vs["x"], axes=[1], starts=[0], ends=[1]), zero))
        with ie.true_block():
            ie.output(L.scale(L.square(ie.input(vs["h0"])), 3.0))
        with ie.false_block():
            ie.output(L.matmul(ie.input(vs["h0"]), vs["W"]))
        out, = ie()
    got, = fluid.Executor().run(main, feed=feeds, fetch_list=[out])
    m = FEEDS["x"][:, :1] < 0.5
    ref = np.where(m, 3 * FEEDS["h0"] ** 2, FEEDS["h0"] @ FEEDS["W"])
    np.testing.assert_allclose(got, ref)


def _lod_feed(lengths, width=3, seed=3):
    rows = sum(lengths)
    data = np.random.RandomState(seed).rand(rows, width)
    return fluid.create_lod_tensor(data, [lengths], fluid.CPUPlace()), data


def test_rank_table_ops_values():
    from fluidlite.layers import control_flow as cf
    lengths = [2, 4, 1, 4]
    t, data = _lod_feed(lengths)
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [-1, 3], "float64", lod_level=1)
        table = cf.lod_rank_table(x)
        mx = cf.max_sequence_len(table)
        arr = cf.lod_tensor_to_array(x, table)
        back = cf.array_to_lod_tensor(arr, table)
        reo = L.reorder_lod_tensor_by_rank(x, table)
        step1 = L.array_read(arr, L.fill_constant([1], "int64", 1))
        shrunk = cf.shrink_memory(reo, L.fill_constant([1], "int64", 1), table)
        with pytest.raises(TypeError, match="rank table"):
            cf.max_sequence_len(x)
    exe = fluid.Executor()
    m, b, r, s1, sh = exe.run(main, feed={"x": t}, fetch_list=[mx, back, reo, step1, shrunk],
                              return_numpy=False)
    assert np.array(m).tolist() == [4]
    np.testing.assert_array_equal(np.array(b), data)      # round trip in original order
    assert b.lod() == [[0, 2, 6, 7, 11]]
    offs = [0, 2, 6, 7, 11]
    order = [1, 3, 0, 2]                                   # longest first, stable
    np.testing.assert_array_equal(np.array(r), np.concatenate(
        [data[offs[k]:offs[k + 1]] for k in order]))
    # step 1: row 1 of sequences 1, 3, 0 (length > 1)
    np.testing.assert_array_equal(np.array(s1), data[[offs[1] + 1, offs[3] + 1, offs[0] + 1]])
    # shrink_rnn_memory of a LoD tensor keeps its first three sequences (longer than 1)
    # whole, with their LoD (shrink_rnn_memory_op.cc: the top level LoD is shrunk)
    np.testing.assert_array_equal(np.array(sh), np.array(r)[:10])
    assert sh.lod() == [[0, 4, 8, 10]]


def test_rank_table_ops_gradients():
    """Gradients through a DynamicRNN-style pipeline of rank-table ops."""
    from fluidlite.layers import control_flow as cf

    def build(v):
        x = v["x"]
        table = cf.lod_rank_table(x)
        out = cf.array_to_lod_tensor(cf.lod_tensor_to_array(L.sin(x), table), table)
        reo = L.reorder_lod_tensor_by_rank(L.square(x), table)
        shr = cf.shrink_memory(reo, L.fill_constant([1], "int64", 1), table)
        return L.elementwise_add(L.reduce_sum(L.elementwise_mul(out, out)),
                                 L.reduce_sum(L.exp(shr)))
    _, data = _lod_feed([2, 3, 1])
    check_grad(build, {"x": data}, ["x"], lods={"x": [2, 3, 1]})
    assert {"lod_tensor_to_array", "array_to_lod_tensor", "reorder_lod_tensor_by_rank",
            "shrink_rnn_memory", "lod_tensor_to_array_grad", "array_to_lod_tensor_grad",
            "reorder_lod_tensor_by_rank_grad", "shrink_rnn_memory_grad"} <= \
        check_grad.last_types


def test_print_first_n_prints_only_the_first_runs(capsys):
    x = fluid.data("x", [2], "float32")
    y = L.Print(x, first_n=2, message="firstn")
    exe = fluid.Executor()
    for _ in range(4):
        out, = exe.run(feed={"x": np.ones(2, "float32")}, fetch_list=[y])
        assert out.tolist() == [1.0, 1.0]
    printed = capsys.readouterr().out
    assert printed.count("firstn") == 2
    assert "    shape: [2,]\n    dtype: float\n    data: 1.0,1.0," in printed
    with pytest.raises(ValueError, match="print_phase"):
        L.Print(x, print_phase="sideways")


def test_nested_while_gradient():
    """A while inside a while: the inner loop's records are values of the outer iteration."""
    def build(v):
        h = L.assign(v["h0"])

        def outer_body(h, x, W, i):
            j = L.fill_constant([1], "int64", 0)
            two = L.fill_constant([1], "int64", 2)
            c2 = L.less_than(j, two)
            inner = L.While(c2)
            with inner.block():
                L.assign(L.tanh(L.elementwise_add(L.matmul(h, W), x)), h)
                L.increment(j)
                L.less_than(j, two, cond=c2)
            L.assign(L.elementwise_mul(h, x), h)
        _loop(h, v["x"], v["W"], 2, outer_body)
        return L.reduce_sum(L.square(h))

    def unrolled(v):
        h = v["h0"]
        for _ in range(2):
            for _ in range(2):
                h = L.tanh(L.elementwise_add(L.matmul(h, v["W"]), v["x"]))
            h = L.elementwise_mul(h, v["x"])
        return L.reduce_sum(L.square(h))
    a, *_ = check_grad(build, FEEDS, ["x", "W", "h0"])
    b, *_ = check_grad(unrolled, FEEDS, ["x", "W", "h0"])
    for ga, gb in zip(a, b):
        np.testing.assert_allclose(ga, gb, rtol=1e-12, atol=1e-14)


def test_while_inside_cond_gradient():
    def build(v):
        p = L.less_than(L.reduce_sum(v["x"]), L.fill_constant([1], "float64", 100.0))

        def looped():
            h = L.assign(v["h0"])
            _loop(h, v["x"], v["W"], 3, _rnn_step)
            return h
        out = L.cond(p, looped, lambda: L.scale(v["h0"], 2.0))
        return L.reduce_sum(L.square(out))
    check_grad(build, FEEDS, ["x", "W", "h0"])


def test_two_backward_passes_over_one_loop():
    """gradients() and then minimize() on the same loop: both grad ops read the records."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [3, 4], "float64")
        x.stop_gradient = False
        W = L.create_parameter([4, 4], "float64", name="W",
                               default_initializer=fluid.initializer.Constant(0.1))
        h = L.assign(x)
        _loop(h, x, W, 3, _rnn_step)
        loss = L.reduce_sum(L.square(h))
        gx, = fluid.backward.gradients(loss, [x])
        pg = fluid.backward.append_backward(loss)
    exe = fluid.Executor()
    exe.run(startup)
    a, gw = exe.run(main, feed={"x": FEEDS["x"]}, fetch_list=[gx, pg[0][1]])
    assert len([op for op in main.global_block().ops if op.type == "while_grad"]) == 2
    got, *_ = check_grad(lambda v: _square_loop(v), {"x": FEEDS["x"], "W": np.full(
        (4, 4), 0.1)}, ["x", "W"])
    np.testing.assert_allclose(a, got[0], rtol=1e-10)
    np.testing.assert_allclose(gw, got[1], rtol=1e-10)


def _square_loop(v):
    h = L.assign(v["x"])
    _loop(h, v["x"], v["W"], 3, _rnn_step)
    return L.reduce_sum(L.square(h))


@pytest.mark.parametrize("make_opt", [
    lambda: fluid.optimizer.SGD(0.1, grad_clip=fluid.clip.GradientClipByValue(0.5)),
    lambda: fluid.optimizer.Momentum(0.05, 0.9, regularization=fluid.regularizer.L2Decay(1e-3)),
    lambda: fluid.optimizer.RMSProp(0.01, grad_clip=fluid.clip.GradientClipByNorm(1.0)),
    lambda: fluid.optimizer.Adagrad(0.1),
    lambda: fluid.optimizer.Lamb(0.05),
], ids=["sgd-clip-value", "momentum-l2", "rmsprop-clip-norm", "adagrad", "lamb"])
def test_optimizers_train_through_loop_and_branch(make_opt):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [3, 4], "float32")
        W = L.create_parameter([4, 4], "float32", name="W",
                               default_initializer=fluid.initializer.Constant(0.1))
        h = L.assign(x)
        _loop(h, x, W, 3, _rnn_step)
        big = L.less_than(L.fill_constant([1], "float32", 0.0), L.reduce_sum(h))
        out = L.cond(big, lambda: L.square(h), lambda: L.abs(h))
        loss = L.reduce_mean(out)
        make_opt().minimize(loss)
    main.lint()
    exe = fluid.Executor()
    exe.run(startup)
    xv = RS.rand(3, 4).astype("float32")
    losses = [float(exe.run(main, feed={"x": xv}, fetch_list=[loss])[0][0]) for _ in range(15)]
    assert losses[-1] < losses[0]


def test_ifelse_over_sequences():
    """With LoD, the mask selects whole sequences; the merged output keeps the LoD."""
    lengths = [2, 1, 3]

    def build(v):
        x = v["x"]
        mask = L.assign(np.array([[True], [False], [True]]))
        ie = L.IfElse(mask)
        with ie.true_block():
            ie.output(L.scale(L.square(ie.input(x)), 2.0))
        with ie.false_block():
            ie.output(L.sin(ie.input(x)))
        out, = ie()
        return L.reduce_sum(L.elementwise_mul(out, out))
    _, data = _lod_feed(lengths)
    check_grad(build, {"x": data}, ["x"], lods={"x": lengths})
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [-1, 3], "float64", lod_level=1)
        ie = L.IfElse(L.assign(np.array([[True], [False], [True]])))
        with ie.true_block():
            ie.output(L.scale(ie.input(x), 2.0))
        with ie.false_block():
            ie.output(L.scale(ie.input(x), -1.0))
        out, = ie()
    t, _ = _lod_feed(lengths)
    got, = fluid.Executor().run(main, feed={"x": t}, fetch_list=[out], return_numpy=False)
    sign = np.array([2, 2, -1, 2, 2, 2], "float64")[:, None]
    np.testing.assert_allclose(np.array(got), data * sign)
    assert got.lod() == [[0, 2, 3, 6]]


def test_is_test_while_cannot_be_differentiated():
    x = fluid.data("x", [2], "float32")
    x.stop_gradient = False
    h = L.assign(x)
    i = L.fill_constant([1], "int64", 0)
    n = L.fill_constant([1], "int64", 2)
    c = L.less_than(i, n)
    loop = L.While(c, is_test=True)
    with loop.block():
        L.assign(L.sin(h), h)
        L.increment(i)
        L.less_than(i, n, cond=c)
    loss = L.reduce_sum(h)
    before = str(fluid.default_main_program())
    with pytest.raises(ValueError, match="is_test=True"):
        fluid.backward.gradients(loss, [x])
    assert str(fluid.default_main_program()) == before      # the pass changed nothing


# -- state carried through a tensor array (DynamicRNN memories, training-mode dynamic_decode) ----
def _array_carried(v, steps, read_pos=None, write_pos=None):
    """``states[i + 1] = tanh(states[i] @ W + x)`` for ``steps`` iterations (or, with fixed
    ``read_pos`` / ``write_pos``, read and overwrite those entries); returns the last state
    plus the sum of every state written, so each entry's gradient matters."""
    i = L.fill_constant([1], "int64", 0)
    n = L.fill_constant([1], "int64", steps)
    states = L.array_write(v["h0"], L.fill_constant([1], "int64", 0))
    total = L.fill_constant([3, 4], "float64", 0.0)
    total.stop_gradient = False            # a loop variable the loss depends on
    c = L.less_than(i, n)
    loop = L.While(c)
    with loop.block():
        r = i if read_pos is None else L.fill_constant([1], "int64", read_pos)
        h = L.tanh(L.elementwise_add(L.matmul(L.array_read(states, r), v["W"]), v["x"]))
        L.assign(L.elementwise_add(total, L.scale(h, 0.5)), total)
        L.increment(i, 1.0, in_place=True)
        w = i if write_pos is None else L.fill_constant([1], "int64", write_pos)
        L.array_write(h, w, states)
        L.less_than(i, n, cond=c)
    last = i if write_pos is None else L.fill_constant([1], "int64", write_pos)
    return L.elementwise_add(L.reduce_sum(L.square(L.array_read(states, last))),
                             L.reduce_sum(L.sin(total)))


def test_state_carried_through_array_gradient_several_steps():
    """Read at i, written at i + 1, five steps: the gradient of entry i + 1 (from iteration
    i + 1's grad) reaches iteration i's grad, then the entries before the loop."""
    check_grad(lambda v: _array_carried(v, 5), FEEDS, ["x", "W", "h0"])
    assert "clear_tensor_array_entry" in check_grad.last_types


def test_state_overwritten_in_place_in_an_array_gradient():
    """Entry 0 read and overwritten each iteration: the gradient of the overwritten value
    comes only from its own reads (write_to_array's grad clears the entry it replaced)."""
    check_grad(lambda v: _array_carried(v, 3, read_pos=0, write_pos=0), FEEDS,
               ["x", "W", "h0"])


def test_array_entry_overwritten_outside_a_loop_gradient():
    """``a[0] = x; b = a[0]; a[0] = y; c = a[0]``: d/dx sees only b, d/dy only c."""
    def build(v):
        zero = L.fill_constant([1], "int64", 0)
        one = L.fill_constant([1], "int64", 1)
        a = L.array_write(v["x"], zero)
        L.array_write(v["h0"], one, a)
        b = L.array_read(a, zero)
        L.array_write(L.scale(v["W"][:3], 2.0), zero, a)
        c = L.array_read(a, zero)
        d = L.array_read(a, one)
        return L.reduce_sum(L.elementwise_add(L.elementwise_add(L.square(b), L.scale(c, 3.0)),
                                              L.sin(d)))
    got, _, _ = check_grad(build, FEEDS, ["x", "W", "h0"])
    np.testing.assert_allclose(got[0], 2 * FEEDS["x"])
    np.testing.assert_allclose(got[1][:3], np.full((3, 4), 6.0))


def test_clear_tensor_array_entry_kernel():
    op = fluid.core.registry.get_op_def("clear_tensor_array_entry")
    arr = [np.ones(2), np.full(2, 2.0), None]
    out = op.forward(arr, np.array([1], "int64"))["Out"]
    assert out[0] is arr[0] and out[1] is None and out[2] is None and len(out) == 3
    assert arr[1] is not None                     # the input array is not modified
    assert op.forward(arr, np.array([7], "int64"))["Out"] == arr    # past the end: unchanged
    with pytest.raises(ValueError, match="index I must hold one element"):
        op.forward(arr, np.array([0, 1], "int64"))


def test_array_entry_overwritten_by_a_constant_in_a_loop_gradient():
    """Entry 0 overwritten each iteration by a value that needs no gradient: only the first
    iteration's read reaches h0 (the write is on the gradient path to clear the entry)."""
    def build(v):
        i = L.fill_constant([1], "int64", 0)
        n = L.fill_constant([1], "int64", 3)
        zero = L.fill_constant([1], "int64", 0)
        states = L.array_write(v["h0"], zero)
        total = L.fill_constant([3, 4], "float64", 0.0)
        total.stop_gradient = False
        c = L.less_than(i, n)
        loop = L.While(c)
        with loop.block():
            h = L.tanh(L.elementwise_add(L.matmul(L.array_read(states, zero), v["W"]), v["x"]))
            L.assign(L.elementwise_add(total, h), total)
            L.array_write(L.fill_constant([3, 4], "float64", 0.5), zero, states)
            L.increment(i, 1.0, in_place=True)
            L.less_than(i, n, cond=c)
        return L.reduce_sum(L.sin(total))
    check_grad(build, FEEDS, ["x", "W", "h0"])
