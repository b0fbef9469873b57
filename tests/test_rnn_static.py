"""StaticRNN (a While over tensor arrays): the same computation unrolled by hand and with
StaticRNN gives identical values and gradients; fluid 1.8's documented usage (memory from
shape + batch_ref, several outputs); numeric float64 gradients; errors as fluid raises them."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.testing import assert_grads_close, numeric_grad

L = fluid.layers
T, B, D, H = 4, 3, 2, 5


def _attrs():
    return dict(param_attr=[fluid.ParamAttr(name="W", initializer=fluid.initializer.Normal(
        0, 0.5, seed=1)), fluid.ParamAttr(name="U", initializer=fluid.initializer.Normal(
            0, 0.5, seed=3))],
        bias_attr=fluid.ParamAttr(name="b", initializer=fluid.initializer.Normal(0, 0.5, seed=2)))


def build(static, dtype="float64"):
    """h_t = tanh([x_t, h_{t-1}] W + b), two outputs per step (h and h * x-sum)."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [T, B, D], dtype=dtype)
        h0 = fluid.data("h0", [B, H], dtype=dtype)
        x.stop_gradient = h0.stop_gradient = False
        if static:
            rnn = L.StaticRNN()
            with rnn.step():
                w = rnn.step_input(x)
                prev = rnn.memory(init=h0)
                h = L.fc([w, prev], H, act="tanh", **_attrs())
                rnn.update_memory(prev, h)
                rnn.output(h, L.elementwise_mul(h, L.reduce_sum(w, dim=1, keep_dim=True)))
            out, out2 = rnn()
        else:
            prev, outs, outs2 = h0, [], []
            for t in range(T):
                w = L.squeeze(L.slice(x, [0], [t], [t + 1]), [0])
                prev = L.fc([w, prev], H, act="tanh", **_attrs())
                outs.append(prev)
                outs2.append(L.elementwise_mul(prev, L.reduce_sum(w, dim=1, keep_dim=True)))
            out, out2 = L.stack(outs, 0), L.stack(outs2, 0)
        loss = L.reduce_sum(L.square(out)) + L.reduce_mean(out2)
        blk = main.global_block()
        grads = fluid.gradients(loss, [x, h0, blk.var("W"), blk.var("U"), blk.var("b")])
    return main, startup, loss, [out, out2] + grads


FEED = {"x": np.random.default_rng(0).uniform(-1, 1, (T, B, D)),
        "h0": np.random.default_rng(1).uniform(-1, 1, (B, H))}


def run(main, startup, fetch, feed=FEED):
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    return exe.run(main, feed=feed, fetch_list=fetch, scope=scope)


def test_static_rnn_equals_unrolled_values_and_gradients():
    m1, s1, _, f1 = build(True)
    m2, s2, _, f2 = build(False)
    a, b = run(m1, s1, f1), run(m2, s2, f2)
    assert a[0].shape == (T, B, H)
    for i, (x, y) in enumerate(zip(a, b)):
        if i in (4, 5):     # W and U: the unrolled plan stacks a shared weight's T products
            np.testing.assert_allclose(x, y, rtol=1e-13, atol=1e-15)   # into one GEMM
        else:
            np.testing.assert_array_equal(x, y)
    types = [op.type for op in m1.global_block().ops]
    assert "while" in types and "while_grad" in types


def test_static_rnn_gradient_is_numeric():
    main, startup, loss, fetch = build(True)
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    gx, gh0 = exe.run(main, feed=FEED, fetch_list=fetch[2:4], scope=scope)

    def f(fd):
        return float(exe.run(main, feed=fd, fetch_list=[loss], scope=scope)[0].reshape(-1)[0])

    assert_grads_close(gx, numeric_grad(f, dict(FEED), "x", 1e-5), 1e-5, "StaticRNN dx")
    assert_grads_close(gh0, numeric_grad(f, dict(FEED), "h0", 1e-5), 1e-5, "StaticRNN dh0")


def test_fluid_doc_example_memory_from_batch_ref_trains():
    vocab, hidden = 20, 8
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [None, 5, 1], dtype="int64")
        emb = L.embedding(x, size=[vocab, hidden])
        emb = L.transpose(emb, perm=[1, 0, 2])               # time major
        rnn = L.StaticRNN()
        with rnn.step():
            word = rnn.step_input(emb)
            prev = rnn.memory(shape=[-1, hidden], batch_ref=word)
            h = L.fc(input=[word, prev], size=hidden, act="relu")
            rnn.update_memory(prev, h)
            rnn.step_output(h)
        result = rnn()
        loss = L.mean(L.square(result - 0.5))
        fluid.optimizer.Adam(0.05).minimize(loss)
    exe = fluid.Executor()
    exe.run(startup)
    xv = np.random.default_rng(4).integers(0, vocab, (6, 5, 1)).astype("int64")
    losses = [exe.run(main, feed={"x": xv}, fetch_list=[loss])[0].item() for _ in range(15)]
    assert result.shape[0] == 5 and losses[-1] < 0.5 * losses[0]
    out, = exe.run(main, feed={"x": xv}, fetch_list=[result])
    assert out.shape == (5, 6, hidden)


def test_memory_init_is_not_overwritten():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [3, 2, 1], dtype="float32")
        boot = L.fill_constant([2, 1], "float32", 1.0)
        rnn = L.StaticRNN()
        with rnn.step():
            w = rnn.step_input(x)
            acc = rnn.memory(init=boot)
            new = acc + w
            rnn.update_memory(acc, new)
            rnn.step_output(new)
        out = rnn()
        last = rnn.final_memories()[0]
    xv = np.arange(6, dtype="float32").reshape(3, 2, 1)
    o, b, fin = run(main, startup, [out, boot, last], {"x": xv})
    np.testing.assert_allclose(o, 1 + np.cumsum(xv, 0))
    np.testing.assert_allclose(b, np.ones((2, 1)))
    np.testing.assert_allclose(fin, o[-1])


def test_errors():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("x", [3, 2, 4], dtype="float32")
        y = fluid.data("y", [5, 2, 4], dtype="float32")
        rnn = L.StaticRNN()
        with pytest.raises(ValueError, match="You must invoke step_input in rnn block"):
            rnn.step_input(x)
        with pytest.raises(ValueError, match="RNN output can only be retrieved after rnn block"):
            rnn()
        n_ops = len(main.global_block().ops)
        with pytest.raises(ValueError, match="Static RNN only take fix seq_len input"):
            with rnn.step():
                rnn.step_input(x)
                rnn.step_input(y)
        assert len(main.global_block().ops) == n_ops and len(main.blocks) == 1
        rnn = L.StaticRNN()
        with pytest.raises(ValueError, match="memory 'assign.*' is never updated"):
            with rnn.step():
                w = rnn.step_input(x)
                rnn.memory(shape=[-1, 4], batch_ref=w)
                rnn.step_output(w)
        rnn = L.StaticRNN()
        with pytest.raises(ValueError, match="is not a memory of this StaticRNN"):
            with rnn.step():
                w = rnn.step_input(x)
                rnn.update_memory(w, w)
        rnn = L.StaticRNN()
        with pytest.raises(ValueError, match="if init is None, memory at least need shape"):
            with rnn.step():
                rnn.step_input(x)
                rnn.memory()
        rnn = L.StaticRNN()
        with pytest.raises(ValueError, match="must have the shape and dtype of memory"):
            with rnn.step():
                w = rnn.step_input(x)
                m = rnn.memory(shape=[-1, 3], batch_ref=w)
                rnn.update_memory(m, w)


# -- DynamicRNN -------------------------------------------------------------------------------
LENS = [3, 1, 4, 2]


def _drnn_program(need_reorder=True, dtype="float64"):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [None, 3], dtype=dtype, lod_level=1)
        boot = fluid.data("boot", [None, 5], dtype=dtype)
        x.stop_gradient = boot.stop_gradient = False
        drnn = L.DynamicRNN()
        with drnn.block():
            w = drnn.step_input(x)
            m = drnn.memory(init=boot, need_reorder=need_reorder)
            acc = drnn.memory(shape=[5], value=0.5, dtype=dtype)
            h = L.fc([w, m], 5, act="tanh", param_attr=[fluid.ParamAttr(name="W"),
                                                        fluid.ParamAttr(name="U")],
                     bias_attr=fluid.ParamAttr(name="b"))
            drnn.update_memory(m, h)
            drnn.update_memory(acc, acc + h)
            drnn.output(h, acc)
        out, accs = drnn()
        loss = L.reduce_sum(L.square(out)) + L.reduce_mean(accs)
        gx, gb = fluid.gradients(loss, [x, boot])
    return main, startup, out, accs, loss, gx, gb


def _per_sequence(xv, bootv, W, U, b, boot_rows, lens=LENS):
    outs, accs = [], []
    for k, s in enumerate(np.split(xv, np.cumsum(lens)[:-1])):
        h, acc = bootv[boot_rows[k]], np.full(5, 0.5)
        for t in range(len(s)):
            accs.append(acc)                   # the memory as the step starts
            h = np.tanh(s[t] @ W + h @ U + b)
            acc = acc + h
            outs.append(h)
    return np.array(outs), np.array(accs)


@pytest.mark.parametrize("need_reorder,lens", [(True, LENS), (False, LENS),
                                               (True, [3, 0, 2, 1])])
def test_dynamic_rnn_equals_per_sequence_loop(need_reorder, lens):
    rng = np.random.default_rng(0)
    xv, bootv = rng.uniform(-1, 1, (sum(lens), 3)), rng.uniform(-1, 1, (4, 5))
    main, startup, out, accs, loss, gx, gb = _drnn_program(need_reorder)
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    feed = {"x": fluid.create_lod_tensor(xv, [lens], fluid.CPUPlace()), "boot": bootv}
    o, a = exe.run(main, feed=feed, fetch_list=[out, accs], scope=scope, return_numpy=False)
    assert o.recursive_sequence_lengths() == [lens] == a.recursive_sequence_lengths()
    W, U, b = [np.array(scope.find_var(n).get_tensor()) for n in "WUb"]
    # without need_reorder fluid hands boot row k to the k-th longest sequence
    rank = np.argsort(-np.array(lens), kind="stable")
    rows = list(range(4)) if need_reorder else [int(np.where(rank == k)[0][0])
                                                for k in range(4)]
    ro, ra = _per_sequence(xv, bootv, W, U, b, rows, lens)
    np.testing.assert_allclose(np.asarray(o), ro, atol=1e-12)
    np.testing.assert_allclose(np.asarray(a), ra, atol=1e-12)


def test_dynamic_rnn_gradient_is_numeric():
    rng = np.random.default_rng(1)
    xv, bootv = rng.uniform(-1, 1, (sum(LENS), 3)), rng.uniform(-1, 1, (4, 5))
    main, startup, out, accs, loss, gx, gb = _drnn_program()
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)

    def feed(x, boot):
        return {"x": fluid.create_lod_tensor(x, [LENS], fluid.CPUPlace()), "boot": boot}

    ax, ab = exe.run(main, feed=feed(xv, bootv), fetch_list=[gx, gb], scope=scope)

    def f(fd):
        return float(exe.run(main, feed=feed(fd["x"], fd["boot"]), fetch_list=[loss],
                             scope=scope)[0].reshape(-1)[0])

    base = {"x": xv, "boot": bootv}
    assert_grads_close(np.asarray(ax), numeric_grad(f, dict(base), "x", 1e-5), 1e-5,
                       "DynamicRNN dx")
    assert_grads_close(np.asarray(ab), numeric_grad(f, dict(base), "boot", 1e-5), 1e-5,
                       "DynamicRNN dboot")


def test_dynamic_rnn_fluid_doc_decoder_example_trains():
    """fluid 1.8's static_input example: encoder projection + gru_unit memory + softmax."""
    rng = np.random.default_rng(2)
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        sentence = fluid.data(name="sentence", shape=[None, 8], dtype="float32", lod_level=1)
        encoder_proj = fluid.data(name="encoder_proj", shape=[None, 8], dtype="float32")
        decoder_boot = fluid.data(name="boot", shape=[None, 10], dtype="float32")
        label = fluid.data(name="label", shape=[None, 1], dtype="int64", lod_level=1)
        drnn = L.DynamicRNN()
        with drnn.block():
            current_word = drnn.step_input(sentence)
            encoder_word = drnn.static_input(encoder_proj)
            memory = drnn.memory(init=decoder_boot, need_reorder=True)
            decoder_inputs = L.fc(input=encoder_word, size=30) + L.fc(input=current_word,
                                                                      size=30)
            hidden, _, _ = L.gru_unit(input=decoder_inputs, hidden=memory, size=30)
            drnn.update_memory(ex_mem=memory, new_mem=hidden)
            out = L.fc(input=hidden, size=4, bias_attr=True, act="softmax")
            drnn.output(out)
        rnn_output = drnn()
        last = L.sequence_last_step(rnn_output)
        loss = L.mean(L.cross_entropy(rnn_output, label))
        fluid.optimizer.Adam(0.05).minimize(loss)
    exe = fluid.Executor()
    exe.run(startup)
    lens = [2, 5, 3]
    xv = rng.uniform(-1, 1, (10, 8)).astype("float32")
    feed = {"sentence": fluid.create_lod_tensor(xv, [lens], fluid.CPUPlace()),
            "encoder_proj": rng.uniform(-1, 1, (3, 8)).astype("float32"),
            "boot": np.zeros((3, 10), "float32"),
            "label": fluid.create_lod_tensor((xv[:, :1] > 0).astype("int64") * 2, [lens],
                                             fluid.CPUPlace())}
    losses = [exe.run(main, feed=feed, fetch_list=[loss])[0].item() for _ in range(20)]
    assert losses[-1] < 0.3 * losses[0]
    lv, = exe.run(main, feed=feed, fetch_list=[last])
    assert lv.shape == (3, 4)


# paragraphs of sentences of words: 3 paragraphs of 2, 1, 3 sentences of 2, 3, 1, 1, 2, 2 words
NESTED = [[2, 1, 3], [2, 3, 1, 1, 2, 2]]


def _nested_program(level):
    """A DynamicRNN over ``x``'s LoD ``level``: level 0 steps over sentences (each step the
    current sentence of every running paragraph, a LoD tensor pooled to one row), level 1 over
    the words of every sentence."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [None, 3], dtype="float64", lod_level=2)
        x.stop_gradient = False
        drnn = L.DynamicRNN()
        with drnn.block():
            step = drnn.step_input(x, level=level)
            vec = L.sequence_pool(step, "sum") if level == 0 else step
            m = drnn.memory(shape=[4], value=0.1, dtype="float64")
            h = L.fc([vec, m], 4, act="tanh", param_attr=[fluid.ParamAttr(name="W"),
                                                          fluid.ParamAttr(name="U")],
                     bias_attr=fluid.ParamAttr(name="b"))
            drnn.update_memory(m, h)
            drnn.output(h, L.scale(step, 2.0))
        out, twice = drnn()
        loss = L.reduce_sum(L.square(out))
        gx, = fluid.gradients(loss, [x])
    return main, startup, out, twice, loss, gx


def _nested_reference(xv, W, U, b, level):
    """Per paragraph (level 0: the RNN runs over its sentences' word sums) or per sentence
    (level 1: over its words), the hidden states in input order."""
    word_offs = np.concatenate([[0], np.cumsum(NESTED[1])])
    sent_offs = np.concatenate([[0], np.cumsum(NESTED[0])])
    seqs = []
    if level == 0:
        for p in range(len(NESTED[0])):
            seqs.append([xv[word_offs[s]:word_offs[s + 1]].sum(0)
                         for s in range(sent_offs[p], sent_offs[p + 1])])
    else:
        seqs = [list(xv[word_offs[s]:word_offs[s + 1]]) for s in range(len(NESTED[1]))]
    outs = []
    for seq in seqs:
        h = np.full(4, 0.1)
        for v in seq:
            h = np.tanh(v @ W + h @ U + b)
            outs.append(h)
    return np.array(outs)


@pytest.mark.parametrize("level", [0, 1])
def test_dynamic_rnn_over_nested_sequences(level):
    """fluid's hierarchical DynamicRNN: the rank table ranks x's LoD ``level`` by its count of
    next-level elements, a step of level 0 is a whole sentence with its LoD, and the outputs
    come back in the input's order with the LoD above the stepped level (lod_tensor_to_array /
    array_to_lod_tensor / shrink_rnn_memory of fluid 1.8)."""
    rng = np.random.default_rng(7)
    xv = rng.uniform(-1, 1, (sum(NESTED[1]), 3))
    main, startup, out, twice, loss, gx = _nested_program(level)
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)

    def feed(x):
        return {"x": fluid.create_lod_tensor(x, NESTED, fluid.CPUPlace())}

    o, t, g = exe.run(main, feed=feed(xv), fetch_list=[out, twice, gx], scope=scope,
                      return_numpy=False)
    W, U, b = [np.array(scope.find_var(n).get_tensor()) for n in "WUb"]
    np.testing.assert_allclose(np.asarray(o), _nested_reference(xv, W, U, b, level), atol=1e-12)
    # one state per step of the stepped level, grouped by the level above it
    assert o.recursive_sequence_lengths() == NESTED[:level + 1]
    # a step output that is itself a LoD tensor (level 0) or a row (level 1) reassembles into x
    np.testing.assert_allclose(np.asarray(t), 2 * xv, atol=0)
    assert t.recursive_sequence_lengths() == NESTED

    def f(fd):
        return float(exe.run(main, feed=feed(fd["x"]), fetch_list=[loss],
                             scope=scope)[0].reshape(-1)[0])
    assert_grads_close(np.asarray(g), numeric_grad(f, {"x": xv}, "x", 1e-5), 1e-5,
                       f"nested DynamicRNN dx (level {level})")


def test_dynamic_rnn_errors():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("x", [None, 3], lod_level=1)
        drnn = L.DynamicRNN()
        with pytest.raises(ValueError, match="step_input can only be invoked inside rnn block"):
            drnn.step_input(x)
        with pytest.raises(ValueError, match="can only be visited outside the rnn block"):
            drnn()
        with pytest.raises(RuntimeError, match="static_input\\(\\) must be called after"):
            with drnn.block():
                drnn.static_input(x)
        with pytest.raises(ValueError, match="block\\(\\) can only be invoke once"):
            drnn.block()
        drnn = L.DynamicRNN()
        with pytest.raises(ValueError, match="Please invoke memory before update_memory"):
            with drnn.block():
                w = drnn.step_input(x)
                drnn.update_memory(w, w)
        drnn = L.DynamicRNN()
        x2 = fluid.data("x2", [None, 3], lod_level=2)
        with pytest.raises(ValueError, match=r"level must be an LoD level of 'x2', in \[0, 2\) "
                                             r"for its lod_level 2, but received 2"):
            with drnn.block():
                drnn.step_input(x2, level=2)
        drnn = L.DynamicRNN()
        with pytest.raises(TypeError, match="step_input\\(\\) can only take a Variable"):
            with drnn.block():
                drnn.step_input(np.zeros(3))
        assert len(main.blocks) == 1 and not main.global_block().ops


def test_state_carried_through_an_array_has_the_numeric_gradient():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        h0 = fluid.data("h0", [2, 3], dtype="float64")
        h0.stop_gradient = False
        i = L.fill_constant([1], "int64", 0)
        n = L.fill_constant([1], "int64", 3)
        states = L.array_write(h0, L.fill_constant([1], "int64", 0))
        cond = L.less_than(i, n)
        loop = L.While(cond)
        with loop.block():
            h = L.tanh(L.array_read(states, i) * 1.5 + 0.1)
            L.increment(i, 1.0, in_place=True)
            L.array_write(h, i, states)
            L.less_than(i, n, cond=cond)
        loss = L.reduce_sum(L.square(L.array_read(states, i)))
        g, = fluid.gradients(loss, [h0])
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    feed = {"h0": np.random.default_rng(0).uniform(-1, 1, (2, 3))}
    a, = exe.run(main, feed=feed, fetch_list=[g], scope=scope)

    def f(fd):
        return float(exe.run(main, feed=fd, fetch_list=[loss], scope=scope)[0].reshape(-1)[0])

    assert_grads_close(a, numeric_grad(f, dict(feed), "h0", 1e-6), 1e-5, "array-carried state")
