"""``fluid.evaluator`` (fluid 1.8): ChunkEvaluator, EditDistance and DetectionMAP accumulate
in persistable states of the program; ``reset`` zeroes them and ``eval`` reads the metric over
every batch since."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import fluidlite as fluid
import fluidlite.evaluator as evaluator

PLACE = fluid.CPUPlace()


def _lod(seqs, dtype="int64"):
    flat = np.concatenate([np.asarray(s) for s in seqs]).reshape(-1, 1).astype(dtype)
    return fluid.create_lod_tensor(flat, [[len(s) for s in seqs]], PLACE)


# IOB with 2 chunk types: B-0 = 0, I-0 = 1, B-1 = 2, I-1 = 3, O = 4
def _chunks(tags):
    """(start, end, type) of the IOB chunks of one sequence (the reference)."""
    out, cur = [], None
    for t, tag in enumerate(list(tags) + [4]):
        if tag == 4 or tag % 2 == 0 or (cur is not None and tag // 2 != cur[2]):
            if cur is not None:
                out.append((cur[0], t, cur[2]))
            cur = (t, None, tag // 2) if tag != 4 else None
    return set(out)


def _well_formed_iob(rng, n):
    """n IOB tags where an I-k only follows B-k or I-k (so the chunks are unambiguous)."""
    tags = []
    for _ in range(n):
        if tags and tags[-1] != 4 and rng.rand() < 0.5:
            tags.append(tags[-1] // 2 * 2 + 1)
        else:
            tags.append(int(rng.choice([0, 2, 4])))
    return np.array(tags)


def _chunk_counts(preds, golds):
    n_inf = sum(len(_chunks(p)) for p in preds)
    n_lab = sum(len(_chunks(g)) for g in golds)
    n_cor = sum(len(_chunks(p) & _chunks(g)) for p, g in zip(preds, golds))
    return n_inf, n_lab, n_cor


def test_chunk_evaluator_accumulates_over_batches_and_resets():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        pred = fluid.data("pred", [-1, 1], "int64", lod_level=1)
        gold = fluid.data("gold", [-1, 1], "int64", lod_level=1)
        with pytest.warns(Warning, match="use fluid.metrics.ChunkEvaluator instead"):
            ev = evaluator.ChunkEvaluator(pred, gold, "IOB", num_chunk_types=2)
    assert [s.persistable for s in ev.states] == [True] * 3 and len(ev.metrics) == 3
    exe = fluid.Executor(PLACE)
    scope = fluid.Scope()
    rng = np.random.RandomState(0)
    with fluid.scope_guard(scope):
        exe.run(startup)
        ev.reset(exe)
        seen = [0, 0, 0]
        for step in range(4):
            golds = [_well_formed_iob(rng, n) for n in (5, 3, 6)]
            preds = [g if rng.rand() < 0.4 else _well_formed_iob(rng, len(g)) for g in golds]
            p_b, r_b, f_b = exe.run(main, feed={"pred": _lod(preds), "gold": _lod(golds)},
                                    fetch_list=ev.metrics)
            counts = _chunk_counts(preds, golds)
            seen = [a + b for a, b in zip(seen, counts)]
            if counts[0]:
                np.testing.assert_allclose(p_b, [counts[2] / counts[0]], rtol=1e-6)
            precision, recall, f1 = ev.eval(exe)
            want_p = seen[2] / seen[0] if seen[0] else 0.0
            want_r = seen[2] / seen[1] if seen[1] else 0.0
            want_f = 2 * want_p * want_r / (want_p + want_r) if seen[2] else 0.0
            assert precision.dtype == np.float32 and precision.shape == (1,)
            np.testing.assert_allclose([precision[0], recall[0], f1[0]],
                                       [want_p, want_r, want_f], rtol=1e-6)
        ev.reset(exe)
        assert [float(v[0]) for v in ev.eval(exe)] == [0.0, 0.0, 0.0]


def test_chunk_evaluator_known_values():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pred = fluid.data("pred", [-1, 1], "int64", lod_level=1)
        gold = fluid.data("gold", [-1, 1], "int64", lod_level=1)
        ev = evaluator.ChunkEvaluator(pred, gold, "IOB", 2)
    exe = fluid.Executor(PLACE)
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        exe.run(startup)          # the states start at zero without a reset, too
        feed = {"pred": _lod([[0, 1, 4, 2], [2, 3]]), "gold": _lod([[0, 1, 4, 4], [2, 3]])}
        exe.run(main, feed=feed)
        exe.run(main, feed=feed)
        precision, recall, f1 = ev.eval(exe)
    # 3 chunks inferred, 2 labelled, 2 correct per batch
    np.testing.assert_allclose([precision[0], recall[0], f1[0]], [2 / 3, 1.0, 0.8], rtol=1e-6)


def test_edit_distance_evaluator():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        hyp = fluid.data("hyp", [-1, 1], "int64", lod_level=1)
        ref = fluid.data("ref", [-1, 1], "int64", lod_level=1)
        with pytest.warns(Warning, match="EditDistance is deprecated"):
            ev = evaluator.EditDistance(hyp, ref, ignored_tokens=[0])
    exe = fluid.Executor(PLACE)
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        exe.run(startup)
        ev.reset(exe)
        # distances (normalized by the reference length, token 0 ignored): 1/3, 0, 2/2
        batch = {"hyp": _lod([[1, 2, 3], [5, 0], [7, 8]]), "ref": _lod([[1, 2, 4], [5], [9, 9]])}
        total, errors = exe.run(main, feed=batch, fetch_list=ev.metrics)
        np.testing.assert_allclose(total, [1 / 3 + 0 + 1.0], rtol=1e-6)
        assert int(np.asarray(errors).reshape(-1)[0]) == 2
        exe.run(main, feed={"hyp": _lod([[4]]), "ref": _lod([[4]])})
        avg_distance, avg_error = ev.eval(exe)
        np.testing.assert_allclose(avg_distance, [(1 / 3 + 1.0) / 4], rtol=1e-6)
        np.testing.assert_allclose(avg_error, [2 / 4], rtol=1e-6)
        ev.reset(exe)
        exe.run(main, feed={"hyp": _lod([[4]]), "ref": _lod([[4]])})
        avg_distance, avg_error = ev.eval(exe)
        np.testing.assert_allclose([avg_distance[0], avg_error[0]], [0.0, 0.0])


def test_detection_map_evaluator_matches_metrics_detection_map():
    from tests.ops.test_detection import _map_case, ref_map
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        det = fluid.data("det", [None, 6], "float32", lod_level=1)
        gt_label = fluid.data("gt_label", [None, 1], "int32", lod_level=1)
        gt_diff = fluid.data("gt_diff", [None, 1], "int32", lod_level=1)
        gt_box = fluid.data("gt_box", [None, 4], "float32", lod_level=1)
        with pytest.warns(Warning, match="DetectionMAP is deprecated"):
            ev = evaluator.DetectionMAP(det, gt_label, gt_box, gt_diff, class_num=3,
                                        overlap_threshold=0.5, evaluate_difficult=False)
        cur, accum = ev.get_map_var()
    assert len(ev.states) == 3 and all(s.persistable for s in ev.states)
    assert ev.has_state.persistable
    exe = fluid.Executor(PLACE)
    scope = fluid.Scope()

    def feed(dets, gts):
        d = np.concatenate(dets).astype("float32")
        g = np.concatenate(gts)
        lens_d, lens_g = [[len(x) for x in dets]], [[len(x) for x in gts]]
        return {"det": fluid.create_lod_tensor(d, lens_d, PLACE),
                "gt_label": fluid.create_lod_tensor(g[:, :1].astype("int32"), lens_g, PLACE),
                "gt_diff": fluid.create_lod_tensor(g[:, 1:2].astype("int32"), lens_g, PLACE),
                "gt_box": fluid.create_lod_tensor(g[:, 2:].astype("float32"), lens_g, PLACE)}

    with fluid.scope_guard(scope):
        exe.run(startup)
        seen_d, seen_g = [], []
        for k, (dets, gts) in enumerate(_map_case(s) for s in (3, 4, 5)):
            if k == 2:
                ev.reset(exe)
                seen_d, seen_g = [], []
            seen_d += dets
            seen_g += gts
            c, a = exe.run(main, feed=feed(dets, gts), fetch_list=[cur, accum])
            np.testing.assert_allclose(c, [ref_map(dets, gts, 0.5, False)], rtol=1e-4)
            np.testing.assert_allclose(a, [ref_map(seen_d, seen_g, 0.5, False)], rtol=1e-4)


def test_evaluators_are_built_in_the_root_block_only():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        x = fluid.data("x", [-1, 1], "int64", lod_level=1)
        cond = fluid.layers.fill_constant([1], "bool", True)
        with fluid.layers.While(cond).block():
            with pytest.raises(ValueError, match="only invoke Evaluator in root block"):
                evaluator.ChunkEvaluator(x, x, "IOB", 2)
            fluid.layers.assign(fluid.layers.fill_constant([1], "bool", False), cond)


def test_base_class_reset_zeroes_custom_states():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), warnings.catch_warnings():
        warnings.simplefilter("ignore")

        class Count(evaluator.Evaluator):
            def __init__(self, x):
                super().__init__("count")
                self.n = self._create_state("n", "float32", [1])
                fluid.layers.sums([self.n, fluid.layers.reduce_sum(x)], out=self.n)

        x = fluid.data("x", [-1], "float32")
        ev = Count(x)
    assert ev.n.name.startswith("count_") and ev.n.name.endswith("_n")
    exe = fluid.Executor(PLACE)
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        exe.run(startup)
        for _ in range(3):
            exe.run(main, feed={"x": np.ones(2, "float32")})
        assert np.asarray(scope.find_var(ev.n.name).get_tensor())[0] == 6.0
        ev.reset(exe)
        assert np.asarray(scope.find_var(ev.n.name).get_tensor())[0] == 0.0
        with pytest.raises(NotImplementedError):
            ev.eval(exe)
