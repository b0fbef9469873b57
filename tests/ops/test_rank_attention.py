"""rank_attention (ops/ctr.py) against a loop transcription of fluid 1.8's kernels
(expand_input_by_rank / expand_rank_attention_param, then a per-instance product), its
RankParam gradient (float64 numeric check, random upstream gradient; fluid gives X none), and
fluid.contrib.layers.rank_attention."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.core.registry import get_op_def
from fluidlite.testing import OpTest

MAX_RANK = 3


def _rank_offset(rng, pv_nums=4):
    groups, n = [], 0
    for _ in range(pv_nums):
        size = int(rng.integers(1, MAX_RANK + 2))          # 1..4 ads, rank 4 is "no rank"
        groups.append((n, list(rng.permutation(np.arange(1, size + 1)))))
        n += size
    ro = np.full((n, 2 * MAX_RANK + 1), -1, np.int32)
    for start, ranks in groups:
        for j, r in enumerate(ranks):
            ro[start + j, 0] = r if r <= MAX_RANK else -1
            if r <= MAX_RANK:
                for k, fr in enumerate(ranks):
                    if fr <= MAX_RANK:
                        ro[start + j, 2 * (fr - 1) + 1] = fr
                        ro[start + j, 2 * (fr - 1) + 2] = start + k
    return ro


def _reference(x, ro, param):
    n, c = x.shape
    out = np.zeros((n, param.shape[1]))
    for i in range(n):
        lower = int(ro[i, 0]) - 1
        for k in range(MAX_RANK):
            faster = int(ro[i, 2 * k + 1]) - 1
            if lower < 0 or faster < 0:
                continue
            start = (lower * MAX_RANK + faster) * c
            out[i] += x[ro[i, 2 * k + 2]] @ param[start:start + c]
    return out


class TestRankAttention(OpTest):
    op_type = "rank_attention"

    def setup_method(self, *_):
        rng = np.random.default_rng(5)
        self.ro = _rank_offset(rng)
        n = self.ro.shape[0]
        self.x = self.rand(n, 4, seed=6)
        self.param = self.rand(MAX_RANK * MAX_RANK * 4, 3, seed=7)
        self.inputs = {"X": self.x, "RankOffset": self.ro, "RankParam": self.param}
        self.attrs = {"MaxRank": MAX_RANK}
        self.outputs = {"Out": _reference(self.x, self.ro, self.param)}

    def test_output(self):
        assert (self.ro[:, 0] == -1).any()              # some instances have no rank
        self.check_output(atol=1e-12, rtol=1e-12)

    def test_param_grad(self):
        self.check_grad(["RankParam"], "Out")

    def test_bad_offsets(self):
        with pytest.raises(ValueError, match=r"RankOffset must be \[\d+, 2 \* MaxRank"):
            get_op_def(self.op_type).forward(self.x, self.ro[:, :5], self.param, MaxRank=3)


def test_contrib_layer():
    rng = np.random.default_rng(1)
    ro = _rank_offset(rng)
    x = rng.uniform(-1, 1, (ro.shape[0], 2)).astype("float32")
    param = rng.uniform(-1, 1, (MAX_RANK * MAX_RANK * 2, 5)).astype("float32")
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        xv = fluid.data("x", [-1, 2], "float32")
        rv = fluid.data("ro", [-1, 2 * MAX_RANK + 1], "int32")
        out = fluid.contrib.layers.rank_attention(
            xv, rv, rank_param_shape=[MAX_RANK * MAX_RANK * 2, 5],
            rank_param_attr=fluid.ParamAttr(
                initializer=fluid.initializer.NumpyArrayInitializer(param)),
            max_rank=MAX_RANK)
        with pytest.raises(ValueError, match="rank_param_shape"):
            fluid.contrib.layers.rank_attention(xv, rv, [7, 5], None, max_rank=MAX_RANK)
    exe = fluid.Executor()
    exe.run(startup)
    got, = exe.run(main, feed={"x": x, "ro": ro}, fetch_list=[out])
    np.testing.assert_allclose(got, _reference(x.astype(np.float64), ro, param), rtol=1e-5,
                               atol=1e-6)
