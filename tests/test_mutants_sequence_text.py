"""Tests written from mutation testing (issue 28, docs/mutation.md) for
``fluidlite/ops/sequence_text.py``: row_conv, ctc_align, edit_distance, sequence_erase,
chunk_eval and im2sequence, their kernels called directly with their LoD (and a few through a
program), against float64 loops written here from fluid 1.8's kernels (row_conv_op.cc,
ctc_align_op.h, edit_distance_op.h, sequence_erase_op.h, chunk_eval_op.h's GetSegments,
im2sequence_op.h / im2col), with random upstream gradients, empty sequences, two-level LoDs
and padded forms; and their build-time rules and error messages."""
import re

import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.core.dtypes import VarType
from fluidlite.core.registry import VarSpec, get_op_def


def op(name):
    return get_op_def(name)


def offsets(lens):
    return tuple(int(v) for v in np.concatenate([[0], np.cumsum(list(lens))]))


def segs(x, lens):
    off = offsets(lens)
    return [x[off[i]:off[i + 1]] for i in range(len(lens))]


def rand(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


# -- row_conv ---------------------------------------------------------------------------------
def ref_row_conv(x, lens, w, dout):
    """(Out, dX, dFilter) by loops over each sequence (fluid's RowConvKernel and its grad)."""
    out, dx, dw = np.zeros(x.shape), np.zeros(x.shape), np.zeros(w.shape)
    at = 0
    for n in lens:
        for t in range(n):
            for j in range(w.shape[0]):
                if t + j < n:
                    out[at + t] += x[at + t + j] * w[j]
                    dx[at + t + j] += dout[at + t] * w[j]
                    dw[j] += dout[at + t] * x[at + t + j]
        at += n
    return out, dx, dw


@pytest.mark.parametrize("lens", [[3, 0, 1, 5, 2], [1, 1], [6]])
def test_row_conv_lod_forward_and_backward_against_loops(lens):
    x, w = rand((sum(lens), 3), 1), rand((4, 3), 2)         # context 4 > some sequences
    dout = rand(x.shape, 3)
    lod = {"X": (offsets(lens),)}
    got = op("row_conv").forward(x, w, lod=lod)
    want, dx, dw = ref_row_conv(x, lens, w, dout)
    np.testing.assert_allclose(got["Out"], want, rtol=1e-12, atol=1e-12)
    assert got["lod"] == {"Out": lod["X"]}
    g = op("row_conv").backward(x, w, dout, lod=lod)
    np.testing.assert_allclose(g["X"], dx, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(g["Filter"], dw, rtol=1e-12, atol=1e-12)
    assert g["X"].shape == x.shape and g["Filter"].shape == w.shape


def test_row_conv_two_level_lod_uses_the_last_level_and_keeps_both():
    x, w = rand((6, 2), 4), rand((2, 2), 5)
    lod = {"X": ((0, 1, 3), (0, 2, 3, 3, 6))}
    got = op("row_conv").forward(x, w, lod=lod)
    np.testing.assert_allclose(got["Out"], ref_row_conv(x, [2, 1, 0, 3], w, x)[0], atol=1e-12)
    assert got["lod"]["Out"] == lod["X"]


def test_row_conv_padded_batch_forward_and_backward():
    """fluid 1.8's tensor form: X [B, T, D] without LoD, each of the B rows a sequence."""
    x, w = rand((3, 4, 2), 6), rand((3, 2), 7)
    dout = rand(x.shape, 8)
    want, dx, dw = ref_row_conv(x.reshape(12, 2), [4, 4, 4], w, dout.reshape(12, 2))
    got = op("row_conv").forward(x, w)
    assert "lod" not in got and got["Out"].shape == (3, 4, 2)
    np.testing.assert_allclose(got["Out"].reshape(12, 2), want, atol=1e-12)
    # an empty LoD dict counts as no LoD
    np.testing.assert_allclose(op("row_conv").forward(x, w, lod={})["Out"], got["Out"])
    g = op("row_conv").backward(x, w, dout, lod={"X": ()})
    assert g["X"].shape == x.shape
    np.testing.assert_allclose(g["X"].reshape(12, 2), dx, atol=1e-12)
    np.testing.assert_allclose(g["Filter"], dw, atol=1e-12)


def test_row_conv_keeps_float32():
    x, w = rand((5, 3), 1).astype(np.float32), rand((2, 3), 2).astype(np.float32)
    lod = {"X": ((0, 2, 5),)}
    assert op("row_conv").forward(x, w, lod=lod)["Out"].dtype == np.float32
    g = op("row_conv").backward(x, w, x, lod=lod)
    assert g["X"].dtype == np.float32 and g["Filter"].dtype == np.float32


def test_row_conv_kernel_errors():
    x, w = rand((2, 3, 4), 1), rand((2, 4), 2)
    with pytest.raises(ValueError, match=re.escape(
            "row_conv: a LoD X must be [T, D], got [2, 3, 4]")):
        op("row_conv").forward(x, w, lod={"X": ((0, 1, 2),)})
    with pytest.raises(ValueError, match="row_conv: input X has no LoD"):
        op("row_conv").forward(rand((3, 4)), w)


@pytest.mark.parametrize("x,f", [([5, 3], [2, 3]), ([2, 5, 3], [1, 3]), ([-1, 3], [2, -1]),
                                 ([-1, -1], [2, 3]), ([-1, 4, 3], [2, 3])])
def test_row_conv_infer_accepts(x, f):
    spec = VarSpec(x, "float32", 1)
    assert op("row_conv").infer(spec, VarSpec(f, "float32")) == {"Out": spec}


@pytest.mark.parametrize("x,f", [([5], [2, 5]), ([1, 2, 3, 3], [2, 3]), ([5, 3], [3]),
                                 ([5, 3], [1, 2, 3]), ([5, 3], [2, 4]), ([2, 5, 3], [2, 2])])
def test_row_conv_infer_refuses(x, f):
    msg = (f"row_conv: X must be [T, D] (with LoD) or [B, T, D] and Filter "
           f"[future_context + 1, D], got X {x} and Filter {f}")
    with pytest.raises(ValueError, match=re.escape(msg)):
        op("row_conv").infer(VarSpec(x, "float32", 1), VarSpec(f, "float32"))


# -- ctc_align --------------------------------------------------------------------------------
def ref_ctc_align(seqs, blank, merge):
    """fluid's CTCAlignKernel per sequence: skip blanks, and with merge_repeated an id equal to
    the previous token of the same sequence (blank or not)."""
    out = []
    for s in seqs:
        kept, prev = [], None
        for v in s:
            if v != blank and not (merge and v == prev):
                kept.append(v)
            prev = v
        out.append(kept)
    return out


@pytest.mark.parametrize("merge", [True, False])
@pytest.mark.parametrize("blank", [0, 2])
def test_ctc_align_lod_against_a_loop(merge, blank):
    # sequences end and start with the same id (5 | 5): the next sequence's first id is kept
    seqs = [[], [1, 1, 0, 1, 2, 2, 5], [5, 5, 2], [], [2, 2, 2], [3], [0, 0, 4, 4, 0, 4]]
    ids = np.array(sum(seqs, []), np.int64).reshape(-1, 1)
    got = op("ctc_align").forward(ids, lod={"Input": (offsets([len(s) for s in seqs]),)},
                                  blank=blank, merge_repeated=merge)
    want = ref_ctc_align(seqs, blank, merge)
    assert got["Output"].ravel().tolist() == sum(want, [])
    assert got["Output"].shape == (sum(map(len, want)), 1)
    assert got["lod"] == {"Output": (offsets([len(s) for s in want]),)}


def test_ctc_align_defaults_and_corner_cases():
    f = op("ctc_align").forward
    ids = np.array([[3], [3], [0], [3]], np.int32)
    # defaults: blank 0, merge_repeated true; the dtype is kept
    got = f(ids, lod={"Input": ((0, 4),)})
    assert got["Output"].ravel().tolist() == [3, 3] and got["Output"].dtype == np.int32
    # every id a blank, and no rows at all
    got = f(np.zeros((3, 1), np.int64), lod={"Input": ((0, 1, 3),)})
    assert got["Output"].shape == (0, 1) and got["lod"] == {"Output": ((0, 0, 0),)}
    got = f(np.zeros((0, 1), np.int64), lod={"Input": ((0, 0, 0),)})
    assert got["Output"].shape == (0, 1) and got["lod"] == {"Output": ((0, 0, 0),)}
    with pytest.raises(ValueError, match="ctc_align: input Input has no LoD"):
        f(ids)


@pytest.mark.parametrize("merge", [True, False])
def test_ctc_align_padded_form(merge):
    rows = np.array([[1, 1, 0, 2, 2, 9], [4, 0, 4, 4, 9, 9], [7, 7, 7, 7, 7, 7],
                     [9, 9, 9, 9, 9, 9]], np.int32)
    lens = [5, 4, 6, 0]
    want = ref_ctc_align([r[:n].tolist() for r, n in zip(rows, lens)], 0, merge)
    for inp in (rows, rows[..., None]):          # [B, L] or [B, L, 1]
        got = op("ctc_align").forward(inp, np.array(lens, np.int64).reshape(-1, 1),
                                      merge_repeated=merge, padding_value=-3)
        assert got["Output"].shape == (4, 6) and got["Output"].dtype == np.int32
        assert got["OutputLength"].dtype == np.int64
        assert got["OutputLength"].ravel().tolist() == [len(w) for w in want]
        assert got["OutputLength"].shape == (4, 1)
        assert got["Output"].tolist() == [w + [-3] * (6 - len(w)) for w in want]
        assert "lod" not in got
    got = op("ctc_align").forward(rows, np.array(lens))     # padding_value defaults to 0
    assert got["Output"][3].tolist() == [0] * 6 and got["Output"][2].tolist() == [7, 0, 0, 0,
                                                                                   0, 0]


@pytest.mark.parametrize("shape", [[6], [2, 3, 2], [2, 3, 1, 1]])
def test_ctc_align_padded_form_refuses_other_shapes(shape):
    msg = (f"ctc_align: with InputLength, Input must be [batch, max_len] (or [batch, max_len, "
           f"1]), got {shape}")
    with pytest.raises(ValueError, match=re.escape(msg)):
        op("ctc_align").forward(np.zeros(shape, np.int64), np.array([1, 1]))


def test_ctc_align_infer():
    infer = op("ctc_align").infer
    got = infer(VarSpec([-1, 1], "int32", 1), None, blank=0)
    assert got == {"Output": VarSpec((-1, 1), VarType.INT32, 1)}
    for shape in ([4, 7], [4, 7, 1], [-1, 7]):
        got = infer(VarSpec(shape, "int64"), VarSpec([shape[0], 1], "int64"), blank=0)
        assert got["Output"] == VarSpec(tuple(shape[:2]), VarType.INT64, 0)
        assert got["OutputLength"] == VarSpec((shape[0], 1), VarType.INT64, 0)
    for shape in ([7], [1, 2, 3, 4]):
        with pytest.raises(ValueError, match=re.escape(
                f"ctc_align: with InputLength, Input must be [batch, max_len] (or [batch, "
                f"max_len, 1]), got {shape}")):
            infer(VarSpec(shape, "int64"), VarSpec([1], "int64"), blank=0)


# -- edit_distance ----------------------------------------------------------------------------
def levenshtein(a, b):
    """fluid's EditDistanceKernel table: dels, ins, subs (cost 1 when the ids differ)."""
    d = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i in range(len(a) + 1):
        d[i][0] = i
    for j in range(len(b) + 1):
        d[0][j] = j
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1,
                          d[i - 1][j - 1] + (a[i - 1] != b[j - 1]))
    return d[len(a)][len(b)]


HYPS = [[1, 2, 3, 4, 5], [], [7], [1, 1, 2], [], [2, 3], [9, 8, 7, 6]]
REFS = [[1, 3, 5], [4, 4], [], [1, 2, 1, 2, 2, 1], [], [3, 2], [6, 7, 8, 9]]


def _flat(seqs, dtype=np.int64):
    return np.array(sum(seqs, []), dtype).reshape(-1, 1)


def test_edit_distance_lod_against_the_table():
    want = np.array([levenshtein(h, r) for h, r in zip(HYPS, REFS)], np.float32)
    got = op("edit_distance").forward(
        _flat(HYPS), _flat(REFS), lod={"Hyps": (offsets(map(len, HYPS)),),
                                       "Refs": (offsets(map(len, REFS)),)})
    assert got["Out"].dtype == np.float32 and got["Out"].shape == (7, 1)
    np.testing.assert_array_equal(got["Out"].ravel(), want)
    assert got["SequenceNum"].tolist() == [7] and got["SequenceNum"].dtype == np.int64


def test_edit_distance_normalized_divides_by_the_reference_length():
    hyps, refs = [h for h, r in zip(HYPS, REFS) if r], [r for r in REFS if r]
    got = op("edit_distance").forward(
        _flat(hyps), _flat(refs), lod={"Hyps": (offsets(map(len, hyps)),),
                                       "Refs": (offsets(map(len, refs)),)}, normalized=True)
    want = [levenshtein(h, r) / len(r) for h, r in zip(hyps, refs)]
    np.testing.assert_allclose(got["Out"].ravel(), want, rtol=1e-6)
    assert got["Out"].dtype == np.float32


def test_edit_distance_normalized_refuses_an_empty_reference():
    """fluid 1.8's EditDistanceKernel enforces a non-empty reference when ``normalized``
    ("Reference string %d is empty."); Paddle 2.6.2 raises the same for refs lengths [0, 2]
    (checked with the real Paddle). It used to divide by 1 and return the hyp's length."""
    lod = {"Hyps": (offsets(map(len, HYPS)),), "Refs": (offsets(map(len, REFS)),)}
    with pytest.raises(ValueError, match=re.escape(
            "edit_distance: with normalized=True every reference must be non-empty (the "
            "distance is divided by its length); reference 2 (0-based) of 7 is empty")):
        op("edit_distance").forward(_flat(HYPS), _flat(REFS), lod=lod, normalized=True)
    # the padded form too
    with pytest.raises(ValueError, match="reference 0 \\(0-based\\) of 2 is empty"):
        op("edit_distance").forward(np.ones((2, 3), np.int64), np.ones((2, 3), np.int64),
                                    np.array([2, 1]), np.array([0, 2]), normalized=True)
    # not normalized: the distance to an empty reference is the hyp's length
    got = op("edit_distance").forward(np.ones((2, 3), np.int64), np.ones((2, 3), np.int64),
                                      np.array([2, 1]), np.array([0, 2]))
    assert got["Out"].ravel().tolist() == [2.0, 1.0]


def test_edit_distance_normalized_empty_reference_through_a_program():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        h, r = fluid.data("h", [None, 3], "int64"), fluid.data("r", [None, 3], "int64")
        hl, rl = fluid.data("hl", [None], "int64"), fluid.data("rl", [None], "int64")
        dist, _ = fluid.layers.edit_distance(h, r, normalized=True, input_length=hl,
                                             label_length=rl)
    feed = {"h": np.array([[1, 2, 0], [3, 0, 0]]), "r": np.array([[1, 0, 0], [3, 4, 0]]),
            "hl": np.array([2, 1]), "rl": np.array([1, 2])}
    got, = fluid.Executor().run(main, feed=feed, fetch_list=[dist], scope=fluid.Scope())
    np.testing.assert_allclose(got.ravel(), [1.0, 0.5])
    with pytest.raises(ValueError, match="reference 0 \\(0-based\\) of 2 is empty"):
        fluid.Executor().run(main, feed=dict(feed, rl=np.array([0, 2])), fetch_list=[dist],
                             scope=fluid.Scope())


@pytest.mark.parametrize("normalized", [False, True])
def test_edit_distance_padded_against_the_table(normalized):
    rng = np.random.default_rng(5)
    B, Lh, Lr = 6, 5, 4
    hyps, refs = rng.integers(0, 3, (B, Lh, 1)), rng.integers(0, 3, (B, Lr))
    hl, rl = np.array([5, 0, 2, 4, 1, 3]), np.array([4, 2, 1, 4, 3, 1])
    got = op("edit_distance").forward(hyps, refs, hl.reshape(-1, 1), rl, normalized=normalized)
    want = [levenshtein(hyps[b, :hl[b], 0].tolist(), refs[b, :rl[b]].tolist())
            / (rl[b] if normalized else 1) for b in range(B)]
    np.testing.assert_allclose(got["Out"].ravel(), want, rtol=1e-6)
    assert got["SequenceNum"].tolist() == [6]


def test_edit_distance_kernel_errors():
    f = op("edit_distance").forward
    x = np.zeros((3, 1), np.int64)
    for kw in ({"HypsLength": np.array([1])}, {"RefsLength": np.array([1])}):
        with pytest.raises(ValueError, match="^edit_distance: HypsLength and RefsLength must "
                                             "be given together$"):
            f(x, x, lod={"Hyps": ((0, 3),), "Refs": ((0, 3),)}, **kw)
    with pytest.raises(ValueError, match=re.escape(
            "edit_distance: Hyps [2, 4] and Refs [3, 4] must have the same batch size")):
        f(np.zeros((2, 4), np.int64), np.zeros((3, 4), np.int64), np.array([1, 1]),
          np.array([1, 1, 1]))
    with pytest.raises(ValueError, match="^edit_distance: Hyps and Refs must have the same "
                                         "number of sequences$"):
        f(x, x, lod={"Hyps": ((0, 3),), "Refs": ((0, 1, 3),)})
    with pytest.raises(ValueError, match="edit_distance: input Hyps has no LoD"):
        f(x, x, lod={"Refs": ((0, 3),)})
    with pytest.raises(ValueError, match="edit_distance: input Refs has no LoD"):
        f(x, x, lod={"Hyps": ((0, 3),)})
    with pytest.raises(ValueError, match="edit_distance: every HypsLength must lie in"):
        f(np.zeros((2, 4), np.int64), np.zeros((2, 4), np.int64), np.array([1, 5]),
          np.array([1, 1]))
    with pytest.raises(ValueError, match="edit_distance: every RefsLength must lie in"):
        f(np.zeros((2, 4), np.int64), np.zeros((2, 4), np.int64), np.array([1, 1]),
          np.array([1, 5]))


def test_edit_distance_infer():
    infer = op("edit_distance").infer
    h = VarSpec([-1, 1], "int64", 1)
    got = infer(h, h, None, None, normalized=True)
    assert got == {"Out": VarSpec((-1, 1), VarType.FP32),
                   "SequenceNum": VarSpec((1,), VarType.INT64)}
    n = VarSpec([-1], "int64")
    assert infer(h, h, n, n, normalized=False) == got
    for a, b in ((n, None), (None, n)):
        with pytest.raises(ValueError, match="^edit_distance: HypsLength and RefsLength must be "
                                             "given together$"):
            infer(h, h, a, b, normalized=False)


# -- sequence_erase ---------------------------------------------------------------------------
def test_sequence_erase_against_a_loop():
    seqs = [[4, 0, 4, 2], [], [0, 0], [1, 5, 4, 3, 0], [7]]
    x = _flat(seqs, np.int32)
    got = op("sequence_erase").forward(x, lod={"X": (offsets(map(len, seqs)),)},
                                       tokens=[0, 4])
    want = [[v for v in s if v not in (0, 4)] for s in seqs]
    assert got["Out"].ravel().tolist() == sum(want, []) and got["Out"].dtype == np.int32
    assert got["Out"].shape == (sum(map(len, want)), 1)
    assert got["lod"] == {"Out": (offsets(map(len, want)),)}
    # no tokens (the default): nothing is erased
    got = op("sequence_erase").forward(x, lod={"X": (offsets(map(len, seqs)),)})
    np.testing.assert_array_equal(got["Out"], x)
    assert got["lod"] == {"Out": (offsets(map(len, seqs)),)}
    with pytest.raises(ValueError, match="sequence_erase: input X has no LoD"):
        op("sequence_erase").forward(x, tokens=[0])


def test_sequence_erase_infer():
    infer = op("sequence_erase").infer
    assert infer(VarSpec([9, 1], "int64", 1)) == {"Out": VarSpec((-1, 1), VarType.INT64, 1)}
    assert infer(VarSpec([9, 1], "int32", 2)) == {"Out": VarSpec((-1, 1), VarType.INT32, 2)}
    assert infer(VarSpec([9], "int64", 0)) == {"Out": VarSpec((-1,), VarType.INT64, 1)}


# -- chunk_eval -------------------------------------------------------------------------------
SCHEMES = {"plain": (1, -1, -1, -1, -1), "IOB": (2, 0, 1, -1, -1), "IOE": (2, -1, 0, 1, -1),
           "IOBES": (4, 0, 1, 2, 3)}


def ref_segments(labels, scheme, n_types, excluded=()):
    """fluid's ChunkEvalKernel::GetSegments with its ChunkBegin / ChunkEnd, one tag at a time
    (a label >= n_types * ntag is "other")."""
    ntag, b, i_, e, s = SCHEMES[scheme]
    other = n_types

    def chunk_end(pt, pty, t, ty):
        if pty == other:
            return False
        if ty == other or ty != pty:
            return True
        if pt == b or pt == i_:
            return t == b or t == s
        return pt == e or pt == s

    def chunk_begin(pt, pty, t, ty):
        if pty == other:
            return ty != other
        if ty == other:
            return False
        if ty != pty or t == b or t == s:
            return True
        if t == i_ or t == e:
            return pt == e or pt == s
        return False

    out, tag, typ, start, inside = [], -1, other, 0, False
    for k, lab in enumerate(labels):
        pt, pty = tag, typ
        tag, typ = (lab % ntag, lab // ntag) if lab < other * ntag else (-1, other)
        if inside and chunk_end(pt, pty, tag, typ):
            out.append((start, k - 1, pty))
            inside = False
        if chunk_begin(pt, pty, tag, typ):
            start, inside = k, True
    if inside:
        out.append((start, len(labels) - 1, typ))
    return [c for c in out if c[2] not in excluded]


def ref_chunk_eval(inf, lab, lens, scheme, n_types, excluded=()):
    got, want, at = set(), set(), 0
    for n in lens:
        got |= {(at + a, at + b, t) for a, b, t in ref_segments(inf[at:at + n], scheme,
                                                                 n_types, excluded)}
        want |= {(at + a, at + b, t) for a, b, t in ref_segments(lab[at:at + n], scheme,
                                                                  n_types, excluded)}
        at += n
    ok = len(got & want)
    p = ok / len(got) if got else 0.0
    r = ok / len(want) if want else 0.0
    return p, r, (2 * p * r / (p + r) if ok else 0.0), len(got), len(want), ok


OUTS = ("Precision", "Recall", "F1-Score", "NumInferChunks", "NumLabelChunks",
        "NumCorrectChunks")


def _check_chunk_outputs(got, want):
    for name, w in zip(OUTS, want):
        assert got[name].shape == (1,), name
        assert got[name].dtype == (np.float32 if name[0] in "PRF" else np.int64), name
        np.testing.assert_allclose(got[name][0], w, rtol=1e-6, err_msg=name)


@pytest.mark.parametrize("scheme", sorted(SCHEMES))
@pytest.mark.parametrize("n_types,excluded", [(1, ()), (3, ()), (3, (1,)), (3, (0, 2))])
def test_chunk_eval_lod_against_fluids_token_loop(scheme, n_types, excluded):
    rng = np.random.default_rng(11)
    ntag = SCHEMES[scheme][0]
    lens = [6, 0, 9, 1, 12, 4, 7]
    # labels up to 2 past the "other" range: every label >= n_types * ntag is "other"
    inf = rng.integers(0, n_types * ntag + 2, sum(lens))
    lab = np.where(rng.random(sum(lens)) < 0.7, inf, rng.integers(0, n_types * ntag + 2,
                                                                  sum(lens)))
    got = op("chunk_eval").forward(inf.reshape(-1, 1), lab.reshape(-1, 1),
                                   lod={"Inference": (offsets(lens),), "Label": (offsets(lens),)},
                                   num_chunk_types=n_types, chunk_scheme=scheme,
                                   excluded_chunk_types=list(excluded))
    want = ref_chunk_eval(inf.tolist(), lab.tolist(), lens, scheme, n_types, excluded)
    assert want[3] > 0 and want[5] > 0
    _check_chunk_outputs(got, want)


def test_chunk_eval_defaults_and_degenerate_scores():
    f = op("chunk_eval").forward
    lod = {"Inference": ((0, 4),)}
    # defaults: IOB with one chunk type (0 = B, 1 = I, 2 and up = O)
    inf, lab = np.array([[0], [1], [2], [0]]), np.array([[0], [1], [2], [2]])
    got = f(inf, lab, lod=lod)
    _check_chunk_outputs(got, ref_chunk_eval([0, 1, 2, 0], [0, 1, 2, 2], [4], "IOB", 1))
    assert got["NumInferChunks"][0] == 2 and got["NumCorrectChunks"][0] == 1
    # no chunk at all: every score is 0
    o = np.full((4, 1), 2)
    _check_chunk_outputs(f(o, o, lod=lod), (0.0, 0.0, 0.0, 0, 0, 0))
    # chunks but none correct: precision / recall 0 and F1 0 (no 0 / 0)
    _check_chunk_outputs(f(np.array([[0], [2], [2], [2]]), np.array([[2], [0], [2], [2]]),
                           lod=lod), (0.0, 0.0, 0.0, 1, 1, 0))
    # inferred chunks only / label chunks only
    _check_chunk_outputs(f(inf, o, lod=lod), (0.0, 0.0, 0.0, 2, 0, 0))
    _check_chunk_outputs(f(o, inf, lod=lod), (0.0, 0.0, 0.0, 0, 2, 0))
    # the LoD is read from Inference only
    with pytest.raises(ValueError, match="chunk_eval: input Inference has no LoD"):
        f(inf, lab, lod={"Label": ((0, 4),)})


def test_chunk_eval_padded_form_against_the_token_loop():
    rng = np.random.default_rng(3)
    lens = [5, 0, 7, 3]
    inf, lab = rng.integers(0, 6, (4, 7, 1)), rng.integers(0, 6, (4, 7))
    got = op("chunk_eval").forward(inf, lab, np.array(lens).reshape(-1, 1), num_chunk_types=2,
                                   chunk_scheme="IOB")
    def flat(a):
        return sum((a.reshape(4, 7)[b, :n].tolist() for b, n in enumerate(lens)), [])

    _check_chunk_outputs(got, ref_chunk_eval(flat(inf), flat(lab), lens, "IOB", 2))


def test_chunk_eval_errors():
    f = op("chunk_eval").forward
    x = np.zeros((3, 1), np.int64)
    with pytest.raises(ValueError, match=re.escape(
            "chunk_eval: chunk_scheme must be one of ['plain', 'IOB', 'IOE', 'IOBES'], got "
            "'BIO'")):
        f(x, x, lod={"Inference": ((0, 3),)}, chunk_scheme="BIO")
    for a, b in (((2, 3), (2, 4)), ((2, 3), (3, 3)), ((6,), (6,)), ((2, 3, 1, 1), (2, 3))):
        with pytest.raises(ValueError, match=re.escape(
                f"chunk_eval: with SeqLength, Inference and Label must both be [batch, max_len] "
                f"(or [batch, max_len, 1]), got {list(a)} and {list(b)}")):
            f(np.zeros(a, np.int64), np.zeros(b, np.int64), np.array([1, 1]))
    infer = op("chunk_eval").infer
    s = VarSpec([-1, 1], "int64", 1)
    with pytest.raises(ValueError, match=re.escape(
            "chunk_eval: chunk_scheme must be one of ['plain', 'IOB', 'IOE', 'IOBES'], got "
            "'iob'")):
        infer(s, s, None, chunk_scheme="iob")
    for shape in ([7], [2, 3, 1, 1]):
        with pytest.raises(ValueError, match=re.escape(
                f"chunk_eval: with SeqLength, Inference must be padded [batch, max_len] (or "
                f"[batch, max_len, 1]), got {shape}")):
            infer(VarSpec(shape, "int64"), VarSpec(shape, "int64"), VarSpec([2], "int64"))
    fs, i = VarSpec((1,), VarType.FP32), VarSpec((1,), VarType.INT64)
    want = {"Precision": fs, "Recall": fs, "F1-Score": fs, "NumInferChunks": i,
            "NumLabelChunks": i, "NumCorrectChunks": i}
    assert infer(s, s, None) == want
    assert infer(VarSpec([2, 3], "int64"), VarSpec([2, 3], "int64"), VarSpec([2], "int64"),
                 chunk_scheme="plain") == want


# -- im2sequence ------------------------------------------------------------------------------
def ref_im2seq(x, k, s, p, dout=None):
    """(Out rows, lens, dX): every image's patches over the zero-padded image, row-major over
    output positions, each row C * kh * kw values (fluid's im2col, OCF layout); output size by
    C++ truncating division; patches past the padding read zeros."""
    n, c, h, w = x.shape
    up, left, down, right = p
    oh = int((h + up + down - k[0]) / s[0]) + 1
    ow = int((w + left + right - k[1]) / s[1]) + 1
    rows, dx, r = [], np.zeros(x.shape), 0
    for b in range(n):
        for i in range(oh):
            for j in range(ow):
                row = np.zeros((c, k[0], k[1]))
                for ci in range(c):
                    for a in range(k[0]):
                        for e in range(k[1]):
                            y, z = i * s[0] + a - up, j * s[1] + e - left
                            if 0 <= y < h and 0 <= z < w:
                                row[ci, a, e] = x[b, ci, y, z]
                                if dout is not None:
                                    dx[b, ci, y, z] += dout[r].reshape(c, k[0], k[1])[ci, a, e]
                rows.append(row.reshape(-1))
                r += 1
    return np.array(rows), [oh * ow] * n, dx


@pytest.mark.parametrize("k,s,p", [([2, 3], [1, 2], [1, 2, 0, 1]), ([3, 2], [2, 3], [0, 1, 2, 0]),
                                   ([1, 1], [1, 1], [0, 0, 0, 0]), ([4, 5], [3, 3], [2, 1, 2, 1])])
def test_im2sequence_against_a_loop(k, s, p):
    x = rand((2, 3, 5, 6), 1)
    attrs = {"kernels": k, "strides": s, "paddings": p}
    want, lens, _ = ref_im2seq(x, k, s, p)
    got = op("im2sequence").forward(x, **attrs)
    np.testing.assert_array_equal(got["Out"], want)
    assert got["lod"] == {"Out": (offsets(lens),)}
    dout = rand(want.shape, 2)
    np.testing.assert_allclose(op("im2sequence").backward(x, None, dout, **attrs)["X"],
                               ref_im2seq(x, k, s, p, dout)[2], atol=1e-12)


def test_im2sequence_defaults_and_float32():
    x = rand((2, 2, 3, 3), 3).astype(np.float32)
    got = op("im2sequence").forward(x)          # kernels 1 x 1, strides 1, no padding
    np.testing.assert_array_equal(got["Out"], x.transpose(0, 2, 3, 1).reshape(18, 2))
    assert got["Out"].dtype == np.float32 and got["lod"] == {"Out": (offsets([9, 9]),)}
    g = op("im2sequence").backward(x, None, got["Out"])
    assert g["X"].dtype == np.float32
    np.testing.assert_array_equal(g["X"], x)


def test_im2sequence_real_sizes_backward_against_a_loop():
    """With Y (real sizes) each image keeps its top-left oh_i x ow_i patches; the dropped
    positions get no gradient; a real size past X reads (and scatters into) zeros."""
    x = rand((3, 1, 4, 5), 4)
    k, s, p = [2, 2], [1, 2], [0, 1, 1, 0]
    Y = np.array([[4, 5], [2, 3], [6, 2]])
    got = op("im2sequence").forward(x, Y, kernels=k, strides=s, paddings=p)
    full, _, _ = ref_im2seq(np.pad(x, ((0, 0), (0, 0), (0, 2), (0, 0))), k, s, p)
    # image i: oh_i = (h_i + 1 - 2) + 1, ow_i = trunc((w_i + 1 - 2) / 2) + 1
    dims = [(4, 3), (2, 2), (6, 1)]
    per = full.shape[0] // 3
    og = (6 + 1 - 2) // 1 + 1, (5 + 1 - 2) // 2 + 1            # the grid of the 6 x 5 canvas
    want = np.concatenate([full[b * per:(b + 1) * per].reshape(og[0], og[1], -1)[:a, :c]
                           .reshape(a * c, -1) for b, (a, c) in enumerate(dims)])
    np.testing.assert_array_equal(got["Out"], want)
    assert got["lod"] == {"Out": (offsets([a * c for a, c in dims]),)}
    dout = rand(want.shape, 5)
    # reference gradient: scatter dOut into the full grid (zeros elsewhere), then the loop
    dfull = np.zeros((3, og[0], og[1], full.shape[1]))
    at = 0
    for b, (a, c) in enumerate(dims):
        dfull[b, :a, :c] = dout[at:at + a * c].reshape(a, c, -1)
        at += a * c
    _, _, dx = ref_im2seq(np.pad(x, ((0, 0), (0, 0), (0, 2), (0, 0))), k, s, p,
                          dfull.reshape(-1, full.shape[1]))
    np.testing.assert_allclose(op("im2sequence").backward(x, Y, dout, kernels=k, strides=s,
                                                          paddings=p)["X"], dx[:, :, :4],
                               atol=1e-12)


def test_im2sequence_errors():
    x = rand((2, 1, 3, 3), 1)
    with pytest.raises(ValueError, match=re.escape(
            "im2sequence: kernel [4, 2] does not fit the padded image [3, 4]")):
        op("im2sequence").forward(x, kernels=[4, 2], paddings=[0, 1, 0, 0])
    with pytest.raises(ValueError, match=re.escape(
            "im2sequence: kernel [2, 5] does not fit the padded image [4, 3]")):
        op("im2sequence").forward(x, kernels=[2, 5], paddings=[0, 0, 1, 0])
    with pytest.raises(ValueError, match=re.escape(
            "im2sequence: Y (input_image_size) must be [N, 2] = [2, 2] (the real height and "
            "width of each image), got 3 values")):
        op("im2sequence").forward(x, np.ones((1, 3)), kernels=[1, 1])
    with pytest.raises(ValueError, match=re.escape(
            "im2sequence: each image's real size (Y [[3, 3], [1, 4]], divided by out_stride "
            "[1, 2]) must give at least 1 x 1 patches, got [(2, 1), (0, 1)]")):
        op("im2sequence").forward(x, np.array([[3, 3], [1, 4]]), kernels=[2, 2],
                                  out_stride=[1, 2])
    with pytest.raises(ValueError, match=re.escape("got [(2, 0), (2, 1)]")):
        op("im2sequence").forward(x, np.array([[3, 1], [3, 4]]), kernels=[2, 2],
                                  out_stride=[1, 2])
    infer = op("im2sequence").infer
    with pytest.raises(ValueError, match=re.escape(
            "im2sequence: X must be [N, C, H, W], got [2, 3, 4]")):
        infer(VarSpec([2, 3, 4], "float32"), None, kernels=[1, 1])
    for kw in ({"kernels": [0, 1]}, {"kernels": [1, 0]}, {"kernels": [1, 1], "strides": [1, 0]},
               {"kernels": [1, 1], "strides": [0, 1]}, {"kernels": [1, 1], "out_stride": [0, 1]},
               {"kernels": [1, 1], "out_stride": [1, 0]}):
        full = {"strides": [1, 1], "out_stride": [1, 1], **kw}
        with pytest.raises(ValueError, match=re.escape(
                f"im2sequence: every value of kernels, strides and out_stride must be >= 1, got "
                f"{full['kernels']}, {full['strides']} and {full['out_stride']}")):
            infer(VarSpec([2, 3, 4, 4], "float32"), None, **kw)


def test_im2sequence_infer():
    infer = op("im2sequence").infer
    got = infer(VarSpec([-1, 3, 8, 8], "float32"), None, kernels=[2, 3])
    assert got == {"Out": VarSpec((-1, 18), VarType.FP32, 1)}
    got = infer(VarSpec([4, 2, 8, 8], "float64"), VarSpec([4, 2], "float32"), kernels=[1, 4],
                strides=[2, 2], out_stride=[2, 1])
    assert got == {"Out": VarSpec((-1, 8), VarType.FP64, 1)}


# -- second pass: the survivors of the first rerun ---------------------------------------------
def test_chunk_eval_one_token_sequences_and_a_trailing_empty_sequence():
    """Every sequence starts afresh (fluid runs GetSegments per sequence): B-0 | I-0 are two
    chunks even though I-0 would continue B-0 within one sequence; an empty last sequence."""
    f = op("chunk_eval").forward
    lab = np.array([[0], [1], [1], [2], [0], [1]])                 # IOB, 1 type: B I I O B I
    for lens in ([1, 1, 1, 1, 1, 1], [1, 2, 1, 2, 0], [3, 3, 0, 0], [0, 1, 1, 4, 0]):
        lod = {"Inference": (offsets(lens),)}
        got = f(lab, np.full((6, 1), 2), lod=lod)
        want = ref_chunk_eval(lab.ravel().tolist(), [2] * 6, lens, "IOB", 1)
        assert got["NumInferChunks"][0] == want[3], lens
    got = f(lab, lab, lod={"Inference": (offsets([1, 1, 1, 1, 1, 1]),)})
    assert got["NumInferChunks"][0] == 5 and got["NumCorrectChunks"][0] == 5


def test_chunk_eval_padded_form_with_trailing_unit_dims():
    rng = np.random.default_rng(9)
    lens = [2, 5, 0]
    inf, lab = rng.integers(0, 5, (3, 5, 1)), rng.integers(0, 5, (3, 5, 1))
    got = op("chunk_eval").forward(inf, lab, np.array(lens), num_chunk_types=2,
                                   chunk_scheme="IOB")
    flat = lambda a: sum((a[b, :n, 0].tolist() for b, n in enumerate(lens)), [])  # noqa: E731
    _check_chunk_outputs(got, ref_chunk_eval(flat(inf), flat(lab), lens, "IOB", 2))


def test_ctc_align_padded_length_errors_name_the_op_and_slot():
    with pytest.raises(ValueError, match=re.escape(
            "ctc_align: every InputLength must lie in [0, 3] (the padded length), got [1, 4]")):
        op("ctc_align").forward(np.zeros((2, 3), np.int64), np.array([1, 4]))
    with pytest.raises(ValueError, match=re.escape(
            "ctc_align: InputLength must have one length per sequence (2, the first dim of the "
            "padded input), got 3")):
        op("ctc_align").forward(np.zeros((2, 3, 1), np.int64), np.array([1, 1, 1]))


def test_edit_distance_of_no_sequences():
    got = op("edit_distance").forward(np.zeros((0, 1), np.int64), np.zeros((0, 1), np.int64),
                                      lod={"Hyps": ((0,),), "Refs": ((0,),)})
    assert got["Out"].shape == (0, 1) and got["SequenceNum"].tolist() == [0]


@pytest.mark.parametrize("x,f", [([-1, 3], [2, 4]), ([2, -1, 3], [2, 4]), ([5, 0], [2, 3]),
                                 ([5, 3], [2, 0])])
def test_row_conv_infer_checks_the_width_whenever_both_are_known(x, f):
    with pytest.raises(ValueError, match=re.escape(f"got X {x} and Filter {f}")):
        op("row_conv").infer(VarSpec(x, "float32", 1), VarSpec(f, "float32"))


@pytest.mark.parametrize("k,s,p", [([2, 4], [1, 1], [0, 1, 0, 1]),      # ow == 1
                                   ([3, 2], [1, 1], [0, 0, 0, 0]),      # oh == 1
                                   ([2, 3], [1, 2], [0, 0, 0, 0])])     # width truncated
def test_im2sequence_single_patch_rows_and_columns(k, s, p):
    x = rand((2, 2, 3, 2), 7)
    want, lens, _ = ref_im2seq(x, k, s, p)
    got = op("im2sequence").forward(x, kernels=k, strides=s, paddings=p)
    np.testing.assert_array_equal(got["Out"], want)
    assert got["lod"] == {"Out": (offsets(lens),)}
    dout = rand(want.shape, 8)
    np.testing.assert_allclose(op("im2sequence").backward(x, None, dout, kernels=k, strides=s,
                                                          paddings=p)["X"],
                               ref_im2seq(x, k, s, p, dout)[2], atol=1e-12)


def test_im2sequence_error_names_the_padded_size():
    x = rand((2, 1, 3, 3), 1)
    with pytest.raises(ValueError, match=re.escape(
            "im2sequence: kernel [5, 2] does not fit the padded image [4, 5]")):
        op("im2sequence").forward(x, kernels=[5, 2], paddings=[1, 0, 0, 2])


def test_im2sequence_real_sizes_ceil_division_top_padding_and_a_tall_kernel():
    """oh_i = trunc((ceil(h_i / out_stride) + up + down - kh) / sh) + 1 (and likewise ow_i)
    with a non-square kernel, a top padding and real sizes out_stride does not divide."""
    x = rand((3, 1, 6, 6), 2)
    k, s, p, ost = [3, 1], [1, 1], [1, 0, 0, 0], [2, 3]
    Y = np.array([[7, 5], [9, 8], [4, 3]])
    # ceil: (4, 2), (5, 3), (2, 1) -> oh = size + 1 - 3 + 1, ow = size - 1 + 1
    dims = [(3, 2), (4, 3), (1, 1)]
    got = op("im2sequence").forward(x, Y, kernels=k, strides=s, paddings=p, out_stride=ost)
    full, _, _ = ref_im2seq(x, k, s, p)
    og = (6 + 1 - 3) + 1, 6
    per = og[0] * og[1]
    want = np.concatenate([full[b * per:(b + 1) * per].reshape(og[0], og[1], -1)[:a, :c]
                           .reshape(a * c, -1) for b, (a, c) in enumerate(dims)])
    assert got["lod"] == {"Out": (offsets([a * c for a, c in dims]),)}
    np.testing.assert_array_equal(got["Out"], want)


def test_edit_distance_of_sequences_of_at_most_one_id():
    hyps, refs = [[1], [2], [], [5]], [[1], [3], [4], []]
    got = op("edit_distance").forward(
        _flat(hyps), _flat(refs), lod={"Hyps": (offsets(map(len, hyps)),),
                                       "Refs": (offsets(map(len, refs)),)})
    assert got["Out"].ravel().tolist() == [levenshtein(h, r) for h, r in zip(hyps, refs)] \
        == [0.0, 1.0, 1.0, 1.0]
