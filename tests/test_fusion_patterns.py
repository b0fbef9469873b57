"""The fusion matcher (executor/fusion/matcher.py): what each node flag of the pattern language
means, how matches are applied, the group pattern and the commit tail; the example of the
"Writing a fusion" guide (docs/guides/extending.md) is the real pattern."""
import pathlib
import re

import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.executor import fusion
from fluidlite.executor.fusion import matcher
from fluidlite.executor.fusion.matcher import (Alt, Context, FusedDef, FusedOp, GroupPattern, P,
                                               Pattern)
from fluidlite.executor.fusion.patterns import PIPELINE, clip_scale

# the "Writing a fusion" guide (it was the README's section before issue 33 moved it to docs/)
GUIDE = pathlib.Path(__file__).resolve().parents[1] / "docs" / "guides" / "extending.md"


def _block(*ops, dtype="float32"):
    """A block of ``(type, {slot: [names]}, {slot: [names]}, attrs)`` ops over [4] variables."""
    main = fluid.Program()
    block = main.global_block()
    names_ = {n for _, ins, outs, _ in ops for d in (ins, outs) for ns in d.values() for n in ns}
    for n in sorted(names_):
        block.create_var(name=n, shape=[4], dtype=dtype)
    for t, ins, outs, attrs in ops:
        block.append_op(t, ins, outs, attrs)
    return block


def _cx(block, fetch=(), feed=()):
    return Context(list(block.ops), block, set(fetch), set(feed), {})


CHAIN = [("relu", {"X": ["x"]}, {"Out": ["a"]}, {}),
         ("scale", {"X": ["a"]}, {"Out": ["b"]}, {"scale": 2.0}),
         ("exp", {"X": ["b"]}, {"Out": ["c"]}, {})]
FOLD = P("exp", name="e", src={"X": P("scale", name="s", folded=True)})


def test_folded_needs_a_private_value_only_the_consumer_reads():
    block = _block(*CHAIN)
    m = _cx(block).matches(FOLD, 2)
    assert m is not None and m["s"].type == "scale" and m.covered == {1, 2}
    assert _cx(block, fetch={"b"}).matches(FOLD, 2) is None          # fetched: must stay
    other = _block(*CHAIN, ("tanh", {"X": ["b"]}, {"Out": ["d"]}, {}))
    assert _cx(other).matches(FOLD, 2) is None                       # a second reader


def test_folded_needs_its_inputs_unchanged_until_the_consumer():
    block = _block(CHAIN[0], CHAIN[1], ("sigmoid", {"X": ["x"]}, {"Out": ["a"]}, {}), CHAIN[2])
    assert _cx(block).matches(FOLD, 3) is None


def test_optional_binds_none_and_adjacent_needs_the_op_right_before():
    block = _block(*CHAIN, ("tanh", {"X": ["b"]}, {"Out": ["d"]}, {}))
    opt = P("exp", name="e", src={"X": P("scale", name="s", folded=True, optional=True)})
    m = _cx(block).matches(opt, 2)
    assert m is not None and m["s"] is None and m.covered == {2}
    near = P("exp", src={"X": P("scale", adjacent=True)})
    assert _cx(_block(*CHAIN)).matches(near, 2) is not None
    gap = _block(CHAIN[0], CHAIN[1], ("tanh", {"X": ["x"]}, {"Out": ["d"]}, {}), CHAIN[2])
    assert _cx(gap).matches(near, 3) is None


def test_a_name_met_twice_is_one_op_and_keep_is_not_replaced():
    twice = P("elementwise_add", src={"X": P("relu", name="r"), "Y": P("relu", name="r")})
    same = _block(CHAIN[0], ("elementwise_add", {"X": ["a"], "Y": ["a"]}, {"Out": ["c"]}, {}))
    assert _cx(same).matches(twice, 1) is not None
    two = _block(CHAIN[0], ("relu", {"X": ["x"]}, {"Out": ["a2"]}, {}),
                 ("elementwise_add", {"X": ["a"], "Y": ["a2"]}, {"Out": ["c"]}, {}))
    assert _cx(two).matches(twice, 2) is None
    kept = P("exp", src={"X": P("scale", name="s", keep=True)})
    m = _cx(_block(*CHAIN)).matches(kept, 2)
    assert m.covered == {2} and m.replace("new").drop == frozenset()


def test_each_internal_and_alternatives():
    ops = [("square", {"X": ["x"]}, {"Out": ["q0"]}, {}),
           ("square", {"X": ["y"]}, {"Out": ["q1"]}, {}),
           ("sum", {"X": ["q0", "q1"]}, {"Out": ["s"]}, {})]
    total = P("sum", name="sum", each={"X": P("square", name="q", internal=True)})
    pattern = Pattern("sum_of_squares", total, lambda m, cx: m.replace(("fused", m.pos["q"])))
    block = _block(*ops)
    cx = _cx(block)
    assert cx.matches(total, 2).pos["q"] == (0, 1)
    assert matcher.apply_pattern(pattern, cx) == [("fused", (0, 1))]
    leaked = _block(*ops, ("exp", {"X": ["q1"]}, {"Out": ["e"]}, {}))   # q1 read outside
    assert matcher.apply_pattern(pattern, _cx(leaked)) == list(leaked.ops)
    either = P("exp", src={"X": Alt(P("tanh", name="t"), P("sum", name="u"))})
    m = _cx(_block(*ops, ("exp", {"X": ["s"]}, {"Out": ["e"]}, {}))).matches(either, 3)
    assert m["t"] is None and m["u"].type == "sum"


def test_overlapping_matches_are_applied_once():
    block = _block(("relu", {"X": ["x"]}, {"Out": ["a"]}, {}),
                   ("exp", {"X": ["a"]}, {"Out": ["b"]}, {}),
                   ("exp", {"X": ["a"]}, {"Out": ["c"]}, {}))
    pattern = Pattern("pair", P("exp", src={"X": P("relu")}),
                      lambda m, cx: m.replace(("fused", m.root)))
    out = matcher.apply_pattern(pattern, _cx(block))
    assert out == [("fused", 1), block.ops[2]]


def test_group_pattern_merges_what_can_move_together():
    ops = [("relu", {"X": ["x"]}, {"Out": ["a"]}, {}),
           ("tanh", {"X": ["a"]}, {"Out": ["t"]}, {}),
           ("relu", {"X": ["y"]}, {"Out": ["b"]}, {}),
           ("relu", {"X": ["z"]}, {"Out": ["c"]}, {})]
    group = GroupPattern("relus", P("relu"), lambda op, cx: op.type,
                         lambda ms, cx: [("group", tuple(m.outputs["Out"][0] for m in ms))])
    out = matcher.apply_group(group, _cx(_block(*ops)))
    # the first relu cannot move past the tanh reading its output: a group of its own
    assert [o if isinstance(o, tuple) else o.type for o in out] == \
        [("group", ("a",)), "tanh", ("group", ("b", "c"))]


class _InPlace(FusedDef):
    writes_in_place = True

    def __init__(self):
        super().__init__("fused(test)", ("X",), ("Out",))
        self.inplace = True

    def keep_out_of_place(self):
        self.inplace = False


@pytest.mark.parametrize("after,kept", [("scale", True), ("exp", False)])
def test_commit_tail_keeps_in_place_kernels_only_before_infallible_ops(after, kept):
    block = _block(("relu", {"X": ["x"]}, {"Out": ["a"]}, {}),
                   (after, {"X": ["a"]}, {"Out": ["b"]}, {}))
    kernel = _InPlace()
    ops = [FusedOp(kernel, [block.ops[0]], {"X": ["x"]}, {"Out": ["a"]}), block.ops[1]]
    matcher.commit_tail(ops)
    assert kernel.inplace is kept


def test_every_pipeline_entry_is_a_declared_pattern():
    assert PIPELINE and all(isinstance(p, (Pattern, GroupPattern)) for p in PIPELINE)
    assert len({p.name for p in PIPELINE}) == len(PIPELINE)


def test_a_plain_descent_group_before_a_fallible_op_writes_nothing_in_place():
    """The commit tail turns the sgd group's own all-in-place path off too."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.unique_name.guard(), fluid.program_guard(main, startup):
        x = fluid.data("x", [-1, 8])
        loss = fluid.layers.mean(fluid.layers.fc(x, 4))
        fluid.optimizer.SGD(0.1).minimize(loss)
    block = main.global_block()
    ops = [op for op in block.ops if op.type not in ("feed", "fetch")]
    tail = fusion.fuse(ops, block, fetch_names=set(), feed_names={"x"})
    assert tail[-1].opdef.all_inplace
    later = fusion.fuse(ops + [ops[0]], block, fetch_names=set(), feed_names={"x"})
    (group,) = [op for op in later if op.type == "fused(sgd)"]
    assert not group.opdef.all_inplace and not any(group.opdef.inplace)
    rng = np.random.default_rng(0)
    params = [rng.standard_normal((8, 4)).astype("float32"),
              rng.standard_normal(4).astype("float32")]
    before = [p.copy() for p in params]
    lr = np.array([0.1], "float32")
    grads = [np.ones_like(p) for p in params]
    out = group.opdef.forward(params, [lr, lr], grads)["ParamOut"]
    for p, b, o in zip(params, before, out):
        assert o is not p and p.tobytes() == b.tobytes()
        np.testing.assert_array_equal(o, b - np.float32(0.1))


def test_the_readme_example_is_the_real_pattern():
    text = GUIDE.read_text(encoding="utf-8")
    section = text.split("## Writing a fusion", 1)[1].split("\n## ", 1)[0]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    source = pathlib.Path(clip_scale.__file__).read_text(encoding="utf-8")
    for line in code.splitlines():
        if line.strip() and not line.startswith(("#", "from ", "import ")):
            assert line in source, line
