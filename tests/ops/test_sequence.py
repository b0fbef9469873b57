"""Sequence ops on ragged batches: outputs against per-sequence NumPy references (loops are
fine here, the kernels are vectorised), LoD of the outputs, and numeric gradient checks."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.testing import assert_grads_close, numeric_grad

RNG = np.random.default_rng(0)
LENS = [3, 0, 1, 4]                       # an empty sequence included


def _lod_tensor(arr, lens):
    return fluid.create_lod_tensor(np.asarray(arr), [list(lens)], fluid.CPUPlace())


def _entries(inputs):
    """slot -> (array, lens or None), or for a duplicable slot a list of (name, array, lens):
    as {slot: (duplicable, [(var name, array, lens)])}."""
    return {slot: (True, list(v)) if isinstance(v, list) else (False, [(slot.lower(), *v)])
            for slot, v in inputs.items()}


def _build(op_type, inputs, attrs, outs, lod_levels):
    """One-op program; returns program, feed, output variables."""
    prog = fluid.Program()
    block = prog.global_block()
    feed, in_vars = {}, {}
    for slot, (dup, entries) in _entries(inputs).items():
        vs = []
        for name, arr, lens in entries:
            vs.append(block.create_var(name=name, shape=arr.shape, dtype=arr.dtype,
                                       is_data=True, lod_level=lod_levels.get(slot, 0),
                                       stop_gradient=False))
            feed[name] = _lod_tensor(arr, lens) if lens is not None else arr
        in_vars[slot] = vs if dup else vs[0]
    opdef = fluid.core.registry.get_op_def(op_type)
    required = [s.name for s in opdef.out_slots if not s.dispensable]
    out_vars = {s: block.create_var(name=s.lower() + "_out") for s in list(outs) + required}
    with fluid.program_guard(prog, fluid.Program()):
        block.append_op(op_type, in_vars, out_vars, dict(attrs))
    return prog, feed, out_vars


def _levels(inputs):
    return {slot: 1 for slot, (_, entries) in _entries(inputs).items()
            if any(lens is not None for _, _, lens in entries)}


def run(op_type, inputs, attrs=None, outs=("Out",), lod_levels=None):
    prog, feed, out_vars = _build(op_type, inputs, attrs or {}, outs,
                                  lod_levels or _levels(inputs))
    return fluid.Executor().run(prog, feed=feed, fetch_list=[out_vars[s] for s in outs],
                                scope=fluid.Scope(), return_numpy=False)


def check_grad(op_type, inputs, wrt, attrs=None, out="Out", delta=1e-3, tol=5e-3):
    """Analytic gradient of sum(Out * P) (P random) vs central differences, for input ``wrt``
    (a slot, or the variable name of one entry of a duplicable slot)."""
    f64 = lambda a: a.astype(np.float64) if a.dtype.kind == "f" else a       # noqa: E731
    inputs = {s: [(n, f64(a), l) for n, a, l in v] if isinstance(v, list) else (f64(v[0]), v[1])
              for s, v in inputs.items()}
    prog, feed, out_vars = _build(op_type, inputs, attrs or {}, [out], _levels(inputs))
    exe, o = fluid.Executor(), out_vars[out]
    shape = np.asarray(exe.run(prog, feed=feed, fetch_list=[o], scope=fluid.Scope())[0]).shape
    with fluid.program_guard(prog, fluid.Program()):
        p = fluid.data(name="proj", shape=list(shape), dtype="float64")
        loss = fluid.layers.reduce_sum(fluid.layers.elementwise_mul(o, p))
        x = prog.global_block().var(wrt.lower())
        grad, = fluid.gradients(loss, [x])
    feed["proj"] = np.random.default_rng(3).uniform(-1, 1, shape)
    analytic = exe.run(prog, feed=feed, fetch_list=[grad], scope=fluid.Scope())[0]
    arr, lens = next((a, l) for _, entries in _entries(inputs).values()
                     for n, a, l in entries if n == wrt.lower())
    key = wrt.lower()

    def f(fd):
        value = fd[key]
        fd = dict(feed, **{key: _lod_tensor(value, lens) if lens is not None else value})
        got = exe.run(prog, feed=fd, fetch_list=[loss], scope=fluid.Scope())[0]
        return float(np.asarray(got).reshape(-1)[0])

    numeric = numeric_grad(f, {key: arr}, key, delta)
    assert_grads_close(analytic, numeric, tol, f"{op_type} d{wrt}")


def _x(lens=LENS, width=3):
    return RNG.uniform(-1, 1, (sum(lens), width))


def _split(x, lens):
    return np.split(x, np.cumsum(lens)[:-1])


# -- sequence_pool ----------------------------------------------------------------------------
POOL_REF = {
    "SUM": lambda s: s.sum(0), "AVERAGE": lambda s: s.mean(0),
    "SQRT": lambda s: s.sum(0) / np.sqrt(len(s)), "MAX": lambda s: s.max(0),
    "LAST": lambda s: s[-1], "FIRST": lambda s: s[0],
}


@pytest.mark.parametrize("pooltype", sorted(POOL_REF))
def test_sequence_pool_matches_reference(pooltype):
    x = _x()
    out, = run("sequence_pool", {"X": (x, LENS)}, {"pooltype": pooltype, "pad_value": 0.5})
    want = np.stack([POOL_REF[pooltype](s) if len(s) else np.full(3, 0.5)
                     for s in _split(x, LENS)])
    np.testing.assert_allclose(np.array(out), want, rtol=1e-6)
    assert out.lod() == []


@pytest.mark.parametrize("pooltype", sorted(POOL_REF))
def test_sequence_pool_grad(pooltype):
    check_grad("sequence_pool", {"X": (_x(), LENS)}, "X", {"pooltype": pooltype})


def test_sequence_pool_two_levels_keeps_upper_level():
    x = _x([1, 2, 2], 2)
    t = fluid.create_lod_tensor(x, [[2, 1], [1, 2, 2]], None)
    prog, feed, outs = _build("sequence_pool", {"X": (x, [1, 2, 2])}, {"pooltype": "SUM"},
                              ["Out"], {"X": 2})
    feed["x"] = t
    out, = fluid.Executor().run(prog, feed=feed, fetch_list=[outs["Out"]], return_numpy=False,
                                scope=fluid.Scope())
    assert out.lod() == [[0, 2, 3]]
    np.testing.assert_allclose(np.array(out), [x[0], x[1] + x[2], x[3] + x[4]])


def test_sequence_pool_without_lod_says_what_to_do():
    with pytest.raises(ValueError, match="has no LoD"):
        run("sequence_pool", {"X": (_x(), None)}, {"pooltype": "SUM"}, lod_levels={"X": 1})


# -- sequence_softmax -------------------------------------------------------------------------
def test_sequence_softmax():
    x = _x(width=1)
    out, = run("sequence_softmax", {"X": (x, LENS)})
    want = np.concatenate([np.exp(s - s.max()) / np.exp(s - s.max()).sum()
                           for s in _split(x, LENS) if len(s)])
    np.testing.assert_allclose(np.array(out), want, rtol=1e-6)
    assert out.recursive_sequence_lengths() == [LENS]
    check_grad("sequence_softmax", {"X": (x, LENS)}, "X")


# -- sequence_expand / expand_as --------------------------------------------------------------
def test_sequence_expand_with_x_lod():
    x = _x([2, 1], 2)
    y = _x([2, 0], 1)
    out, = run("sequence_expand", {"X": (x, [2, 1]), "Y": (y, [2, 0])}, {"ref_level": 0})
    np.testing.assert_allclose(np.array(out), np.concatenate([x[:2], x[:2]]))
    assert out.recursive_sequence_lengths() == [[2, 2]]
    check_grad("sequence_expand", {"X": (_x([2, 1, 3], 2), [2, 1, 3]),
                                   "Y": (_x([2, 0, 3], 1), [2, 0, 3])}, "X")


def test_sequence_expand_rows_without_x_lod():
    x = _x([3], 2)
    out, = run("sequence_expand", {"X": (x, None), "Y": (_x([2, 0, 3], 1), [2, 0, 3])},
               lod_levels={"Y": 1})
    np.testing.assert_allclose(np.array(out), x[[0, 0, 2, 2, 2]])
    assert out.recursive_sequence_lengths() == [[1, 1, 1, 1, 1]]


def test_sequence_expand_as():
    x = _x([4], 3)
    out, = run("sequence_expand_as", {"X": (x, None), "Y": (_x(LENS, 1), LENS)},
               lod_levels={"Y": 1})
    np.testing.assert_allclose(np.array(out), np.repeat(x, LENS, axis=0))
    assert out.recursive_sequence_lengths() == [LENS]
    check_grad("sequence_expand_as", {"X": (x, None), "Y": (_x(LENS, 1), LENS)}, "X")


# -- sequence_pad / unpad ---------------------------------------------------------------------
def test_sequence_pad_and_unpad_round_trip():
    x = _x()
    pad = np.array([9.0])
    out, length = run("sequence_pad", {"X": (x, LENS), "PadValue": (pad, None)},
                      {"padded_length": 5}, outs=("Out", "Length"), lod_levels={"X": 1})
    out = np.array(out)
    assert out.shape == (4, 5, 3)
    np.testing.assert_array_equal(np.array(length), LENS)
    for i, s in enumerate(_split(x, LENS)):
        np.testing.assert_allclose(out[i, :len(s)], s)
        assert (out[i, len(s):] == 9.0).all()
    back, = run("sequence_unpad", {"X": (out, None), "Length": (np.array(LENS), None)})
    np.testing.assert_allclose(np.array(back), x)
    assert back.recursive_sequence_lengths() == [LENS]
    check_grad("sequence_pad", {"X": (x, LENS), "PadValue": (pad, None)}, "X",
               {"padded_length": -1})
    check_grad("sequence_unpad", {"X": (out, None), "Length": (np.array(LENS), None)}, "X")


def test_sequence_unpad_of_a_2d_input_gives_one_column_as_fluid():
    """fluid 1.8's kernel resizes Out to [sum(Length), 1] when X is [N, T]."""
    x = np.arange(12, dtype="float64").reshape(3, 4)
    lens = np.array([2, 4, 1])
    back, = run("sequence_unpad", {"X": (x, None), "Length": (lens, None)})
    assert np.array(back).shape == (7, 1)
    np.testing.assert_array_equal(np.array(back)[:, 0], [0, 1, 4, 5, 6, 7, 8])
    assert back.recursive_sequence_lengths() == [[2, 4, 1]]
    check_grad("sequence_unpad", {"X": (x, None), "Length": (lens, None)}, "X")


def test_sequence_pad_too_short_is_an_error():
    with pytest.raises(ValueError, match="shorter than the longest"):
        run("sequence_pad", {"X": (_x(), LENS), "PadValue": (np.array([0.0]), None)},
            {"padded_length": 2}, outs=("Out", "Length"), lod_levels={"X": 1})


# -- sequence_reshape -------------------------------------------------------------------------
def test_sequence_reshape():
    x = _x([2, 0, 4], 3)
    out, = run("sequence_reshape", {"X": (x, [2, 0, 4])}, {"new_dim": 6})
    np.testing.assert_allclose(np.array(out), x.reshape(-1, 6))
    assert out.recursive_sequence_lengths() == [[1, 0, 2]]
    check_grad("sequence_reshape", {"X": (x, [2, 0, 4])}, "X", {"new_dim": 6})
    with pytest.raises(ValueError, match="does not split"):
        run("sequence_reshape", {"X": (_x([1, 2], 3), [1, 2])}, {"new_dim": 2})


# -- sequence_conv ----------------------------------------------------------------------------
def _seq_conv_ref(x, lens, w, length, start):
    out = []
    for s in _split(x, lens):
        for t in range(len(s)):
            ctx = [s[t + start + j] if 0 <= t + start + j < len(s) else np.zeros(x.shape[1])
                   for j in range(length)]
            out.append(np.concatenate(ctx) @ w)
    return np.array(out).reshape(-1, w.shape[1])


def test_sequence_conv():
    x, w = _x(), RNG.uniform(-1, 1, (9, 2))
    attrs = {"contextLength": 3, "contextStart": -1, "contextStride": 1}
    out, = run("sequence_conv", {"X": (x, LENS), "Filter": (w, None)}, attrs,
               lod_levels={"X": 1})
    np.testing.assert_allclose(np.array(out), _seq_conv_ref(x, LENS, w, 3, -1), rtol=1e-6)
    assert out.recursive_sequence_lengths() == [LENS]
    for slot in ("X", "Filter"):
        check_grad("sequence_conv", {"X": (x, LENS), "Filter": (w, None)}, slot, attrs)


def _seq_conv_pad_ref(x, lens, w, pad, length, start):
    """Trainable padding as fluid's ContextProject documents it: a slot before the sequence
    start reads padding row up_pad + p, one past its end row up_pad + (p - len)."""
    up, out = max(0, -start), []
    for s in _split(x, lens):
        for t in range(len(s)):
            ctx = []
            for j in range(length):
                p = t + start + j
                ctx.append(s[p] if 0 <= p < len(s) else pad[up + p] if p < 0
                           else pad[up + p - len(s)])
            out.append(np.concatenate(ctx) @ w)
    return np.array(out).reshape(-1, w.shape[1])


@pytest.mark.parametrize("length,start", [(3, -1), (4, -3), (3, 1), (5, -1)])
def test_sequence_conv_trainable_padding(length, start):
    lens = [3, 0, 1, 5]
    x, w = _x(lens), RNG.uniform(-1, 1, (3 * length, 2))
    rows = max(0, -start) + max(0, start + length - 1)
    pad = RNG.uniform(-1, 1, (rows, 3))
    attrs = {"contextLength": length, "contextStart": start, "contextStride": 1,
             "paddingTrainable": True}
    inputs = {"X": (x, lens), "Filter": (w, None), "PaddingData": (pad, None)}
    out, = run("sequence_conv", inputs, attrs, lod_levels={"X": 1})
    np.testing.assert_allclose(np.array(out), _seq_conv_pad_ref(x, lens, w, pad, length, start),
                               rtol=1e-10)
    for slot in ("X", "Filter", "PaddingData"):
        check_grad("sequence_conv", inputs, slot, attrs)


def test_sequence_conv_trainable_padding_fluid_example():
    """fluid's doc example: start -1, length 3, X rows a b c | d -> w1 a b, a b c, b c w2 |
    w1 d w2 (Filter = identity, so Out = the context columns)."""
    x = np.arange(8, dtype=np.float64).reshape(4, 2)
    pad = np.array([[-1.0, -2.0], [-3.0, -4.0]])
    out, = run("sequence_conv", {"X": (x, [3, 1]), "Filter": (np.eye(6), None),
                                 "PaddingData": (pad, None)},
               {"contextLength": 3, "contextStart": -1, "paddingTrainable": True},
               lod_levels={"X": 1})
    a, b, c, d = x
    w1, w2 = pad
    np.testing.assert_array_equal(np.array(out), [np.r_[w1, a, b], np.r_[a, b, c],
                                                  np.r_[b, c, w2], np.r_[w1, d, w2]])


def test_sequence_conv_trainable_padding_errors_and_layer():
    x = _x()
    with pytest.raises(ValueError, match=r"PaddingData must be \[up_pad \+ down_pad, D\] = "
                                         r"\[2, 3\].*got \[1, 3\]"):
        run("sequence_conv", {"X": (x, LENS), "Filter": (RNG.uniform(size=(9, 2)), None),
                              "PaddingData": (np.zeros((1, 3)), None)},
            {"contextLength": 3, "contextStart": -1, "paddingTrainable": True},
            lod_levels={"X": 1})
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        v = fluid.data("v", [None, 3], "float32", lod_level=1)
        out = fluid.layers.sequence_conv(v, 2, filter_size=3, padding_trainable=True)
        loss = fluid.layers.mean(out)
        fluid.optimizer.SGD(0.1).minimize(loss)
    pads = [p for p in main.global_block().all_parameters() if p.shape == (2, 3)]
    assert len(pads) == 1
    op = next(o for o in main.global_block().ops if o.type == "sequence_conv")
    assert op.attr("paddingTrainable") is True
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    before = np.array(scope.find_var(pads[0].name).get_tensor())
    exe.run(main, feed={"v": _lod_tensor(x.astype("float32"), LENS)}, fetch_list=[loss],
            scope=scope)
    assert not np.allclose(np.array(scope.find_var(pads[0].name).get_tensor()), before)


# -- sequence_concat / slice / reverse / enumerate / scatter / mask, lod_reset ---------------
def test_sequence_concat():
    a, b = _x([2, 0, 1], 2), _x([1, 3, 0], 2)
    inputs = {"X": [("a", a, [2, 0, 1]), ("b", b, [1, 3, 0])]}
    got, = run("sequence_concat", inputs)
    want = np.concatenate([a[0:2], b[0:1], b[1:4], a[2:3]])
    np.testing.assert_allclose(np.array(got), want)
    assert got.recursive_sequence_lengths() == [[3, 3, 1]]
    for name in ("a", "b"):
        check_grad("sequence_concat", inputs, name)


def test_sequence_slice():
    x = _x()
    off, length = np.array([[1], [0], [0], [1]]), np.array([[2], [0], [1], [3]])
    out, = run("sequence_slice", {"X": (x, LENS), "Offset": (off, None),
                                  "Length": (length, None)}, lod_levels={"X": 1})
    np.testing.assert_allclose(np.array(out), np.concatenate([x[1:3], x[3:4], x[5:8]]))
    assert out.recursive_sequence_lengths() == [[2, 0, 1, 3]]
    check_grad("sequence_slice", {"X": (x, LENS), "Offset": (off, None),
                                  "Length": (length, None)}, "X")
    with pytest.raises(ValueError, match="exceed the sequence lengths"):
        run("sequence_slice", {"X": (x, LENS), "Offset": (off + 2, None),
                               "Length": (length, None)}, lod_levels={"X": 1})


def test_sequence_reverse():
    x = _x()
    y, = run("sequence_reverse", {"X": (x, LENS)}, outs=("Y",))
    np.testing.assert_allclose(np.array(y), np.concatenate([s[::-1] for s in _split(x, LENS)]))
    assert y.recursive_sequence_lengths() == [LENS]
    check_grad("sequence_reverse", {"X": (x, LENS)}, "X", out="Y")


def test_sequence_enumerate_and_mask():
    ids = np.array([[1], [2], [3], [4], [5]], "int64")
    out, = run("sequence_enumerate", {"X": (ids, [3, 2])}, {"win_size": 2, "pad_value": 0})
    np.testing.assert_array_equal(np.array(out), [[1, 2], [2, 3], [3, 0], [4, 5], [5, 0]])
    assert out.recursive_sequence_lengths() == [[3, 2]]
    mask, = run("sequence_mask", {"X": (np.array([2, 0, 3]), None)},
                {"maxlen": 4, "out_dtype": "float32"}, outs=("Y",))
    np.testing.assert_array_equal(np.array(mask), [[1, 1, 0, 0], [0, 0, 0, 0], [1, 1, 1, 0]])
    assert np.array(mask).dtype == np.float32


def test_sequence_scatter():
    x = _x([3], 4)
    ids = np.array([[0], [2], [2], [1]], "int64")
    upd = RNG.uniform(-1, 1, (4, 1))
    out, = run("sequence_scatter", {"X": (x, None), "Ids": (ids, [2, 0, 2]),
                                    "Updates": (upd, [2, 0, 2])},
               lod_levels={"Ids": 1, "Updates": 1})
    want = x.copy()
    want[0, 0] += upd[0, 0]
    want[0, 2] += upd[1, 0]
    want[2, 2] += upd[2, 0]
    want[2, 1] += upd[3, 0]
    np.testing.assert_allclose(np.array(out), want)
    for slot in ("X", "Updates"):
        check_grad("sequence_scatter", {"X": (x, None), "Ids": (ids, [2, 0, 2]),
                                        "Updates": (upd, [2, 0, 2])}, slot)


def test_lod_reset_and_append():
    x = _x([2, 3], 1)
    out, = run("lod_reset", {"X": (x, [2, 3])}, {"target_lod": [0, 1, 5]})
    assert out.lod() == [[0, 1, 5]]
    np.testing.assert_array_equal(np.array(out), x)
    out, = run("lod_reset", {"X": (x, None), "Y": (_x([4, 1], 1), [4, 1])},
               lod_levels={"Y": 1})
    assert out.recursive_sequence_lengths() == [[4, 1]]
    out, = run("lod_reset", {"X": (x, [3, 2]), "Y": (np.array([0, 2, 5]), None)},
               lod_levels={"X": 1})
    assert out.lod() == [[0, 2, 5]]
    check_grad("lod_reset", {"X": (x, [2, 3])}, "X", {"target_lod": [0, 4, 5]})
    prog = fluid.Program()
    with fluid.program_guard(prog, fluid.Program()):
        v = fluid.data("v", [-1, 1], "float64", lod_level=1)
        two = fluid.layers.lod_append(v, [0, 1, 2, 3, 4, 5])
    prog_bad = fluid.Program()
    with fluid.program_guard(prog_bad, fluid.Program()):
        v = fluid.data("v", [-1, 1], "float64", lod_level=1)
        bad = fluid.layers.lod_reset(v, target_lod=[0, 4])
    got, = fluid.Executor().run(prog, feed={"v": _lod_tensor(x, [5])}, fetch_list=[two],
                                return_numpy=False, scope=fluid.Scope())
    assert got.lod() == [[0, 5], [0, 1, 2, 3, 4, 5]]
    assert got.has_valid_recursive_sequence_lengths()
    with pytest.raises(ValueError, match="must end at the row count 5"):
        fluid.Executor().run(prog_bad, feed={"v": _lod_tensor(x, [5])}, fetch_list=[bad],
                             scope=fluid.Scope())
    prog3 = fluid.Program()
    with fluid.program_guard(prog3, fluid.Program()):
        v = fluid.data("v", [-1, 1], "float64", lod_level=1)
        three = fluid.layers.lod_append(v, [0, 2, 3, 5])
    got, = fluid.Executor().run(prog3, feed={"v": x}, fetch_list=[three], return_numpy=False,
                                scope=fluid.Scope())       # no LoD yet: the level is the LoD
    assert got.lod() == [[0, 2, 3, 5]]
    with pytest.raises(ValueError, match="appended level has 3"):
        fluid.Executor().run(prog3, feed={"v": _lod_tensor(x, [2, 3])}, fetch_list=[three],
                             scope=fluid.Scope())


def test_sequence_layers_build_and_run():
    prog, start = fluid.Program(), fluid.Program()
    with fluid.program_guard(prog, start):
        L = fluid.layers
        x = fluid.data("x", [-1, 3], "float32", lod_level=1)
        y = fluid.data("y", [-1, 1], "float32", lod_level=1)
        first, last = L.sequence_first_step(x), L.sequence_last_step(x)
        sm = L.sequence_softmax(L.reduce_sum(x, dim=1, keep_dim=True))
        padded, length = L.sequence_pad(x, L.assign(np.array([0.0], "float32")))
        unpadded = L.sequence_unpad(padded, length)
        rev = L.sequence_reverse(x)
        cat = L.sequence_concat([x, rev])
        exp = L.sequence_expand_as(first, y)
        resh = L.sequence_reshape(x, 1)
    x_t = _lod_tensor(_x([2, 3], 3).astype("float32"), [2, 3])
    y_t = _lod_tensor(np.zeros((4, 1), "float32"), [3, 1])
    exe = fluid.Executor()
    res = exe.run(prog, feed={"x": x_t, "y": y_t},
                  fetch_list=[first, last, sm, unpadded, cat, exp, resh], return_numpy=False,
                  scope=fluid.Scope())
    xa = np.array(x_t)
    np.testing.assert_allclose(np.array(res[0]), xa[[0, 2]])
    np.testing.assert_allclose(np.array(res[1]), xa[[1, 4]])
    assert res[2].recursive_sequence_lengths() == [[2, 3]]
    np.testing.assert_allclose(np.array(res[3]), xa)
    assert res[4].recursive_sequence_lengths() == [[4, 6]]
    np.testing.assert_allclose(np.array(res[5]), xa[[0, 0, 0, 2]])
    assert res[6].recursive_sequence_lengths() == [[6, 9]]


# -- row_conv, ctc_align / ctc_greedy_decoder, edit_distance (ops/sequence_text.py) ----------
def test_row_conv():
    x, w = _x(), RNG.uniform(-1, 1, (3, 3))
    out, = run("row_conv", {"X": (x, LENS), "Filter": (w, None)}, lod_levels={"X": 1})
    want = []
    for s in _split(x, LENS):
        for t in range(len(s)):
            want.append(sum(s[t + j] * w[j] for j in range(3) if t + j < len(s)))
    np.testing.assert_allclose(np.array(out), np.array(want).reshape(-1, 3), rtol=1e-6)
    assert out.recursive_sequence_lengths() == [LENS]
    for slot in ("X", "Filter"):
        check_grad("row_conv", {"X": (x, LENS), "Filter": (w, None)}, slot)


def test_row_conv_on_a_padded_batch():
    """fluid 1.8's tensor form: X [B, T, D] without LoD, each of the B rows one sequence."""
    x, w = RNG.uniform(-1, 1, (2, 4, 3)), RNG.uniform(-1, 1, (2, 3))
    out, = run("row_conv", {"X": (x, None), "Filter": (w, None)})
    want = [[sum(x[b, t + j] * w[j] for j in range(2) if t + j < 4) for t in range(4)]
            for b in range(2)]
    np.testing.assert_allclose(np.array(out), np.array(want), rtol=1e-12)
    for slot in ("X", "Filter"):
        check_grad("row_conv", {"X": (x, None), "Filter": (w, None)}, slot)


def _levenshtein(a, b):
    d = np.arange(len(b) + 1)
    for i, x in enumerate(a, 1):
        prev, d[0] = d.copy(), i
        for j, y in enumerate(b, 1):
            d[j] = min(prev[j] + 1, d[j - 1] + 1, prev[j - 1] + (x != y))
    return d[-1]


def test_ctc_align_and_edit_distance():
    ids = np.array([[0], [1], [1], [0], [2], [2], [0], [0], [3], [3]], "int64")
    out, = run("ctc_align", {"Input": (ids, [6, 1, 3])}, {"blank": 0}, outs=("Output",))
    assert np.array(out).ravel().tolist() == [1, 2, 3]
    assert out.recursive_sequence_lengths() == [[2, 0, 1]]
    hyps = [[1, 2, 3], [], [4, 4], [5]]
    refs = [[1, 3], [2], [4, 4], [6, 7, 8]]
    flat = lambda seqs: np.array([v for s in seqs for v in s], "int64").reshape(-1, 1)  # noqa
    for normalized in (False, True):
        dist, num = run("edit_distance", {"Hyps": (flat(hyps), [len(s) for s in hyps]),
                                          "Refs": (flat(refs), [len(s) for s in refs])},
                        {"normalized": normalized}, outs=("Out", "SequenceNum"))
        want = np.array([_levenshtein(h, r) for h, r in zip(hyps, refs)], "float32")
        if normalized:
            want = want / np.array([len(r) for r in refs])
        np.testing.assert_allclose(np.array(dist).ravel(), want, rtol=1e-6)
        assert np.array(num).tolist() == [4]


def test_ctc_greedy_decoder_and_row_conv_layers():
    prog, start = fluid.Program(), fluid.Program()
    with fluid.program_guard(prog, start):
        probs = fluid.data("probs", [-1, 4], "float32", lod_level=1)
        decoded = fluid.layers.ctc_greedy_decoder(probs, blank=0)
        rc = fluid.layers.row_conv(probs, future_context_size=1)
        label = fluid.data("label", [-1, 1], "int64", lod_level=1)
        dist, _ = fluid.layers.edit_distance(decoded, label, normalized=False)
    p = np.eye(4, dtype="float32")[[1, 1, 0, 2, 3, 3]]
    exe = fluid.Executor()
    exe.run(start)
    got, d, r = exe.run(prog, feed={"probs": _lod_tensor(p, [4, 2]),
                                    "label": _lod_tensor(np.array([[1], [2], [3]]), [2, 1])},
                        fetch_list=[decoded, dist, rc], return_numpy=False)
    assert np.array(got).ravel().tolist() == [1, 2, 3]
    assert got.recursive_sequence_lengths() == [[2, 1]]
    assert np.array(d).ravel().tolist() == [0.0, 0.0]
    assert r.recursive_sequence_lengths() == [[4, 2]]


# -- chunk_eval: the vectorised rules against fluid's token loop ------------------------------
SCHEMES = {"plain": (1, -1, -1, -1, -1), "IOB": (2, 0, 1, -1, -1), "IOE": (2, -1, 0, 1, -1),
           "IOBES": (4, 0, 1, 2, 3)}


def _segments(labels, scheme, n_types):
    """fluid's GetSegments, one token at a time."""
    ntag, b, i_, e, s = SCHEMES[scheme]
    other = n_types

    def end(pt, pty, t, ty):
        if pty == other:
            return False
        if ty == other or ty != pty:
            return True
        if pt in (b, i_):
            return t in (b, s)
        return pt in (e, s)

    def begin(pt, pty, t, ty):
        if pty == other:
            return ty != other
        if ty == other:
            return False
        if ty != pty or t in (b, s):
            return True
        if t in (i_, e):
            return pt in (e, s)
        return False

    segs, tag, typ, start, inside = [], -1, other, 0, False
    for k, lab in enumerate(labels):
        pt, pty = tag, typ
        tag, typ = (lab % ntag, lab // ntag) if lab < other * ntag else (-1, other)
        if inside and end(pt, pty, tag, typ):
            segs.append((start, k - 1, pty))
            inside = False
        if begin(pt, pty, tag, typ):
            start, inside = k, True
    if inside:
        segs.append((start, len(labels) - 1, typ))
    return segs


@pytest.mark.parametrize("scheme", sorted(SCHEMES))
def test_chunk_eval_matches_fluid_rules(scheme):
    rng = np.random.default_rng(4)
    n_types = 3
    ntag = SCHEMES[scheme][0]
    lens = [5, 0, 7, 1, 9]
    inf = rng.integers(0, n_types * ntag + 1, (sum(lens), 1))
    lab = inf.copy()
    lab[rng.random(lab.shape) < 0.3] = n_types * ntag            # some tokens become "O"
    outs = run("chunk_eval", {"Inference": (inf, lens), "Label": (lab, lens)},
               {"num_chunk_types": n_types, "chunk_scheme": scheme},
               outs=("Precision", "Recall", "F1-Score", "NumInferChunks", "NumLabelChunks",
                     "NumCorrectChunks"))
    p, r, f1, n_inf, n_lab, n_ok = (np.array(o).item() for o in outs)
    want_inf, want_lab, at = set(), set(), 0
    for n in lens:
        want_inf |= {(at + a, at + b, t) for a, b, t in _segments(inf[at:at + n, 0], scheme,
                                                                     n_types)}
        want_lab |= {(at + a, at + b, t) for a, b, t in _segments(lab[at:at + n, 0], scheme,
                                                                     n_types)}
        at += n
    ok = len(want_inf & want_lab)
    assert (n_inf, n_lab, n_ok) == (len(want_inf), len(want_lab), ok)
    assert p == pytest.approx(ok / len(want_inf)) and r == pytest.approx(ok / len(want_lab))
    assert f1 == pytest.approx(2 * p * r / (p + r), rel=1e-5)


def test_chunk_eval_perfect_and_excluded():
    lab = np.array([[0], [1], [4], [2], [3], [3]])                # IOB, 2 types: B0 I0 O B1 I1 I1
    outs = run("chunk_eval", {"Inference": (lab, [6]), "Label": (lab, [6])},
               {"num_chunk_types": 2, "chunk_scheme": "IOB"},
               outs=("F1-Score", "NumLabelChunks"))
    assert np.array(outs[0]).item() == 1.0 and np.array(outs[1]).item() == 2
    outs = run("chunk_eval", {"Inference": (lab, [6]), "Label": (lab, [6])},
               {"num_chunk_types": 2, "chunk_scheme": "IOB", "excluded_chunk_types": [1]},
               outs=("NumLabelChunks",))
    assert np.array(outs[0]).item() == 1


def test_im2sequence():
    x = RNG.uniform(-1, 1, (2, 2, 4, 5))
    attrs = {"kernels": [2, 3], "strides": [2, 1], "paddings": [1, 0, 0, 1]}
    out, = run("im2sequence", {"X": (x, None)}, attrs)
    pad = np.pad(x, ((0, 0), (0, 0), (1, 0), (0, 1)))
    want = [pad[n, :, i:i + 2, j:j + 3].reshape(-1)
            for n in range(2) for i in range(0, 4, 2) for j in range(0, 4)]
    np.testing.assert_allclose(np.array(out), np.array(want))
    assert out.recursive_sequence_lengths() == [[8, 8]]
    check_grad("im2sequence", {"X": (x, None)}, "X", attrs)


def _im2seq_real_ref(x, sizes, k, s, p, out_stride):
    """Per image: ceil(real size / out_stride) -> its own patch grid (oh_i, ow_i); its patches
    are the full padded image's patches at those top-left grid positions."""
    up, left, down, right = p
    pad = np.pad(x, ((0, 0), (0, 0), (up, down), (left, right)))
    rows, lens = [], []
    for n, (h, w) in enumerate(sizes):
        h, w = -(-int(h) // out_stride[0]), -(-int(w) // out_stride[1])
        oh, ow = (h + up + down - k[0]) // s[0] + 1, (w + left + right - k[1]) // s[1] + 1
        for i in range(oh):
            for j in range(ow):
                rows.append(pad[n, :, i * s[0]:i * s[0] + k[0], j * s[1]:j * s[1] + k[1]]
                            .reshape(-1))
        lens.append(oh * ow)
    return np.array(rows), lens


@pytest.mark.parametrize("out_stride", [[1, 1], [2, 1]])
def test_im2sequence_real_image_size(out_stride):
    x = RNG.uniform(-1, 1, (3, 2, 6, 5))
    sizes = np.array([[6, 5], [3, 4], [4, 2]], np.float64) * [out_stride[0], 1]
    sizes = np.minimum(sizes, [6 * out_stride[0], 5])
    attrs = {"kernels": [2, 2], "strides": [1, 1], "paddings": [0, 0, 1, 1],
             "out_stride": out_stride}
    out, = run("im2sequence", {"X": (x, None), "Y": (sizes, None)}, attrs)
    want, lens = _im2seq_real_ref(x, sizes, [2, 2], [1, 1], [0, 0, 1, 1], out_stride)
    np.testing.assert_allclose(np.array(out), want)
    assert out.recursive_sequence_lengths() == [lens] and len(set(lens)) == 3
    check_grad("im2sequence", {"X": (x, None), "Y": (sizes, None)}, "X", attrs)


def test_im2sequence_real_image_size_layer_and_errors():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        img = fluid.data("img", [None, 1, 4, 4], "float32")
        size = fluid.data("size", [None, 2], "float32")
        out = fluid.layers.im2sequence(img, filter_size=2, stride=2, input_image_size=size,
                                       out_stride=2)
        with pytest.raises(ValueError, match=r"input_image_size must be \[N, 2\]"):
            fluid.layers.im2sequence(img, input_image_size=fluid.data("s3", [None, 3],
                                                                      "float32"))
    x = np.arange(32, dtype="float32").reshape(2, 1, 4, 4)
    got, = fluid.Executor().run(main, feed={"img": x, "size": np.array([[8, 8], [4, 6]],
                                                                      "float32")},
                                fetch_list=[out], scope=fluid.Scope(), return_numpy=False)
    # image 0: ceil(8/2)=4 -> 2 x 2 patches; image 1: (2, 3) -> 1 x 1 patch
    assert got.recursive_sequence_lengths() == [[4, 1]]
    np.testing.assert_array_equal(np.array(got)[4], x[1, 0, :2, :2].reshape(-1))
    # a real size beyond the image (fluid 1.8's Case6): ceil(20/2) = 10 -> 5 patch rows, the
    # rows past the 4 x 4 image read zeros (fluid's im2col bounds check)
    got, = fluid.Executor().run(main, feed={"img": x, "size": np.array([[8, 8], [20, 6]],
                                                                      "float32")},
                                fetch_list=[out], scope=fluid.Scope(), return_numpy=False)
    assert got.recursive_sequence_lengths() == [[4, 5]]
    np.testing.assert_array_equal(np.array(got)[4], x[1, 0, :2, :2].reshape(-1))
    assert not np.array(got)[6:].any()
    with pytest.raises(ValueError, match=r"im2sequence: each image's real size \(Y"):
        fluid.Executor().run(main, feed={"img": x, "size": np.array([[8, 8], [0, 6]],
                                                                   "float32")},
                             fetch_list=[out], scope=fluid.Scope())
    # fluid reads Y only for a batch of several images
    one, = fluid.Executor().run(main, feed={"img": x[:1], "size": np.array([[2, 2]],
                                                                          "float32")},
                                fetch_list=[out], scope=fluid.Scope(), return_numpy=False)
    assert one.recursive_sequence_lengths() == [[4]]


def test_im2sequence_truncated_output_size():
    """fluid's Im2SeqOutputSize in C++: (2 - 3) / 2 + 1 = 1 patch row (floor gave 0, an
    error); the patch reaches past the image, where fluid's im2col reads zeros."""
    x = RNG.uniform(-1, 1, (2, 2, 2, 5))
    attrs = {"kernels": [3, 2], "strides": [2, 2], "paddings": [0, 0, 0, 0]}
    out, = run("im2sequence", {"X": (x, None)}, attrs)
    pad = np.pad(x, ((0, 0), (0, 0), (0, 1), (0, 0)))
    want = [pad[n, :, 0:3, j:j + 2].reshape(-1) for n in range(2) for j in (0, 2)]
    np.testing.assert_allclose(np.array(out), np.array(want))
    assert out.recursive_sequence_lengths() == [[2, 2]]
    check_grad("im2sequence", {"X": (x, None)}, "X", attrs)


def test_sequence_softmax_is_fluids_unshifted_kernel():
    """fluid's CPU sequence_softmax computes exp(x) / sum(exp(x)) with no max shift: a logit
    beyond exp's float32 range gives NaN in its sequence (Paddle 2.6: [0, nan, 0, 0 | nan,
    0, 0]); moderate logits give the usual softmax."""
    x = np.array([[0.0], [100.0], [-50.0], [3.0], [200.0], [-300.0], [0.5]], np.float32)
    out, = run("sequence_softmax", {"X": (x, [4, 3])}, {})
    out = np.array(out).ravel()
    assert out.dtype == np.float32
    np.testing.assert_array_equal(np.isnan(out), [False, True, False, False, True, False,
                                                  False])
    np.testing.assert_array_equal(out[[0, 2, 3, 5, 6]], 0.0)
    x = RNG.uniform(-3, 3, (5, 1))
    out, = run("sequence_softmax", {"X": (x, [2, 3])}, {})
    want = np.concatenate([np.exp(x[:2]) / np.exp(x[:2]).sum(),
                           np.exp(x[2:]) / np.exp(x[2:]).sum()])
    np.testing.assert_allclose(np.array(out), want, rtol=1e-12)
