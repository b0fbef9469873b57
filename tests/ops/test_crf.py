"""linear_chain_crf and crf_decoding against brute force over every tag path, numeric
gradients, and a CRF tagger that learns a synthetic tagging task."""
import itertools

import numpy as np
import pytest

import fluidlite as fluid
from tests.ops.test_sequence import check_grad, run

LENS, D = [2, 3, 1], 3
RNG = np.random.default_rng(5)


def _score(e, t, path):
    s = t[0, path[0]] + t[1, path[-1]] + sum(e[i, p] for i, p in enumerate(path))
    return s + sum(t[2 + a, b] for a, b in zip(path[:-1], path[1:]))


def _brute(e, t, lens):
    nll, best, start = [], [], 0
    for n in lens:
        seq = e[start:start + n]
        paths = list(itertools.product(range(D), repeat=n))
        scores = np.array([_score(seq, t, p) for p in paths])
        nll.append(scores)
        best += list(paths[int(scores.argmax())])
        start += n
    return nll, np.array(best)


def _inputs():
    e = RNG.uniform(-1, 1, (sum(LENS), D))
    t = RNG.uniform(-1, 1, (D + 2, D))
    y = RNG.integers(0, D, (sum(LENS), 1))
    return e, t, y


def test_linear_chain_crf_matches_brute_force():
    e, t, y = _inputs()
    out, = run("linear_chain_crf", {"Emission": (e, LENS), "Transition": (t, None),
                                    "Label": (y, LENS)}, outs=("LogLikelihood",))
    all_scores, _ = _brute(e, t, LENS)
    start, want = 0, []
    for n, scores in zip(LENS, all_scores):
        gold = _score(e[start:start + n], t, list(y[start:start + n, 0]))
        want.append(np.log(np.exp(scores).sum()) - gold)
        start += n
    np.testing.assert_allclose(np.array(out).ravel(), want, rtol=1e-6)


@pytest.mark.parametrize("slot", ["Emission", "Transition"])
def test_linear_chain_crf_grad(slot):
    e, t, y = _inputs()
    check_grad("linear_chain_crf", {"Emission": (e, LENS), "Transition": (t, None),
                                    "Label": (y, LENS)}, slot, out="LogLikelihood")


def test_crf_decoding_is_the_best_path():
    e, t, y = _inputs()
    path, = run("crf_decoding", {"Emission": (e, LENS), "Transition": (t, None)},
                outs=("ViterbiPath",), lod_levels={"Emission": 1})
    _, best = _brute(e, t, LENS)
    np.testing.assert_array_equal(np.array(path).ravel(), best)
    assert path.recursive_sequence_lengths() == [LENS]
    ok, = run("crf_decoding", {"Emission": (e, LENS), "Transition": (t, None),
                               "Label": (best.reshape(-1, 1), LENS)}, outs=("ViterbiPath",),
              lod_levels={"Emission": 1, "Label": 1})
    assert np.array(ok).ravel().tolist() == [1] * sum(LENS)


def _tag_batch(rng, n=16):
    """Tag = word % 3, except that a word 0 forces the next tag to 2 (needs transitions)."""
    lens = rng.integers(2, 7, n)
    words = rng.integers(0, 12, int(lens.sum()))
    tags = words % 3
    starts = np.concatenate([[0], np.cumsum(lens)[:-1]])
    follow = np.nonzero((words[:-1] == 0))[0] + 1
    follow = follow[~np.isin(follow, starts)]
    tags[follow] = 2
    w = fluid.create_lod_tensor(words.reshape(-1, 1), [lens.tolist()], None)
    t = fluid.create_lod_tensor(tags.reshape(-1, 1).astype("int64"), [lens.tolist()], None)
    return {"word": w, "tag": t}


def test_crf_tagger_learns():
    main, start = fluid.Program(), fluid.Program()
    main.random_seed = start.random_seed = 2
    with fluid.program_guard(main, start):
        word = fluid.data("word", [None, 1], "int64", lod_level=1)
        tag = fluid.data("tag", [None, 1], "int64", lod_level=1)
        emb = fluid.layers.embedding(word, [12, 16])
        feat = fluid.layers.sequence_conv(emb, 16, filter_size=3, act="tanh")
        emission = fluid.layers.fc(feat, 3)
        cost = fluid.layers.linear_chain_crf(emission, tag,
                                             param_attr=fluid.ParamAttr(name="crfw"))
        loss = fluid.layers.mean(cost)
        fluid.optimizer.Adam(0.05).minimize(loss)
        decoded = fluid.layers.crf_decoding(emission, param_attr=fluid.ParamAttr(name="crfw"))
    exe, scope, rng = fluid.Executor(), fluid.Scope(), np.random.default_rng(0)
    exe.run(start, scope=scope)
    for _ in range(80):
        exe.run(main, feed=_tag_batch(rng), fetch_list=[loss], scope=scope)
    test = main.clone(for_test=True)
    feed = _tag_batch(rng, 64)
    got, = exe.run(test, feed=feed, fetch_list=[decoded], scope=scope)
    acc = (got.ravel() == np.array(feed["tag"]).ravel()).mean()
    assert acc > 0.95, acc


def test_alpha_output_is_fluids_normalized_forward_variables():
    """fluid's kernel writes Alpha as each step's forward variables L1-normalized (it works
    in exp space): row t = softmax_j(log alpha_t(j)); Paddle 2.6 gives the same Alpha,
    EmissionExps, TransitionExps and LogLikelihood on this input."""
    from fluidlite.core.registry import get_op_def
    rng = np.random.default_rng(0)
    em, tr = rng.uniform(-2, 2, (7, 3)), rng.uniform(-1, 1, (5, 3))
    lab = rng.integers(0, 3, (7, 1)).astype(np.int64)
    out = get_op_def("linear_chain_crf").forward(em, tr, lab, lod={"Emission": ((0, 3, 7),),
                                                                  "Label": ((0, 3, 7),)})
    alpha = out["Alpha"]
    np.testing.assert_allclose(alpha.sum(1), np.ones(7))
    for start in (0, 3):                    # the first step: softmax(start weights + E[0])
        a0 = np.exp(tr[0] + em[start])
        np.testing.assert_allclose(alpha[start], a0 / a0.sum())
    a1 = (alpha[0] @ np.exp(tr[2:])) * np.exp(em[1])        # the recursion, exp space
    np.testing.assert_allclose(alpha[1], a1 / a1.sum())


def test_linear_chain_crf_alpha_and_emission_exps_as_fluid():
    """Alpha and EmissionExps carry Emission's LoD (fluid shares it); EmissionExps is
    exp(E - row max) of every row -- also the padding rows of a padded Emission."""
    e, t, y = _inputs()
    alpha, exps = run("linear_chain_crf", {"Emission": (e, LENS), "Transition": (t, None),
                                           "Label": (y, LENS)}, outs=("Alpha", "EmissionExps"))
    assert alpha.recursive_sequence_lengths() == [LENS]
    assert exps.recursive_sequence_lengths() == [LENS]
    np.testing.assert_allclose(np.array(alpha).sum(1), 1.0, rtol=1e-12)   # normalised steps
    np.testing.assert_allclose(np.array(exps), np.exp(e - e.max(1, keepdims=True)))
    padded = RNG.uniform(-1, 1, (3, 4, D))
    labels = RNG.integers(0, D, (3, 4))
    exps, = run("linear_chain_crf", {"Emission": (padded, None), "Transition": (t, None),
                                     "Label": (labels, None), "Length": (np.array([2, 4, 1]),
                                                                          None)},
                outs=("EmissionExps",))
    np.testing.assert_allclose(np.array(exps), np.exp(padded - padded.max(2, keepdims=True)))
