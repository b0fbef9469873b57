"""``core.atomic``: build transactions restore programs and name counters exactly, nest, and
cost O(changes) (checked by counting, not timing)."""
import threading

import pytest

import fluidlite as fluid
from fluidlite.core import names
from fluidlite.core.atomic import atomic, atomic_layer, in_transaction


def snapshot(*programs):
    """Everything a rollback must restore, in comparable form."""
    state = []
    for p in programs:
        state.append((p.version, str(p), p.to_string(with_details=True), p.current_block_idx,
                      p.random_seed, p.num_blocks,
                      [(n, v.op) for b in p.blocks for n, v in b.vars.items()],
                      [(op.type, dict(op.attrs), {k: list(v) for k, v in op.inputs.items()},
                        {k: list(v) for k, v in op.outputs.items()})
                       for b in p.blocks for op in b.ops]))
    state.append(dict(names.generator.ids))
    state.append(names.current_name_scope())
    return state


@pytest.fixture
def progs():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [-1, 4])
        h = fluid.layers.fc(x, 3, act="relu")
        fluid.layers.fc(h, 2)
    return main, startup, x, h


def test_rollback_restores_every_kind_of_change(progs):
    main, startup, x, h = progs
    before = snapshot(main, startup)
    block = main.global_block()
    err = RuntimeError("boom")
    with pytest.raises(RuntimeError) as info:
        with atomic(main, startup):
            with fluid.program_guard(main, startup):
                fluid.layers.fc(h, 5, act="tanh")              # vars, params, ops, startup ops
                with fluid.name_scope("s"):
                    fluid.layers.relu(h)
            h.stop_gradient = True                            # Variable setters
            x.persistable = True
            h.lod_level = 3                                   # plain attribute
            h.user_note = "added"                             # a new attribute
            main.random_seed = 7
            block.ops[0]._set_attr("x_num_col_dims", 2)
            block.ops[1]._remove_attr("axis")
            block.ops[0]._rename_input("x", "renamed_x")
            block._rename_var(h.name, "h_renamed")
            block._remove_var("x")
            block._remove_op(1, 3)
            block._insert_op(0, type="scale", inputs={"X": "h_renamed"},
                             outputs={"Out": "h_renamed"}, attrs={"scale": 2.0})
            block._prepend_op(type="scale", inputs={"X": "h_renamed"},
                              outputs={"Out": "h_renamed"})
            sub = main._create_block()
            sub.create_var(name="in_sub", shape=[1], dtype="float32")
            startup.global_block().create_var(name="extra", shape=[2], dtype="float32")
            names.generate("fc")
            raise err
    assert info.value is err                                  # propagates unchanged
    assert snapshot(main, startup) == before
    assert h.name == "fc_0.tmp_2" and not h.stop_gradient and h.lod_level == 0
    assert not hasattr(h, "user_note")
    assert block.var("x") is x and not x.persistable
    assert not in_transaction(main) and not in_transaction(startup)


def test_success_keeps_changes_and_ends_the_transaction(progs):
    main, startup, _, h = progs
    v0 = main.version
    with atomic(main, startup):
        assert in_transaction(main) and in_transaction(startup)
        with fluid.program_guard(main, startup):
            out = fluid.layers.fc(h, 4)
    assert main.version > v0 and out.name in main.global_block().vars
    assert main._journal is None and startup._journal is None
    assert getattr(names._tls, "journal", None) is None


def test_names_and_seed_and_current_block_are_restored():
    main = fluid.Program()
    names.generate("k")
    with pytest.raises(KeyError):
        with atomic(main):
            names.generate("k")
            names.generate("fresh")
            with fluid.unique_name.guard("pre_"):     # a switched generator is put back too
                names.generate("k")
                main._create_block()
                main.random_seed = 5
                raise KeyError("x")
    assert names.generate("k") == "k_1"
    assert names.generate("fresh") == "fresh_0"
    assert main.current_block_idx == 0 and main.num_blocks == 1 and main.random_seed == 0


def test_nested_inner_failure_rolls_back_only_the_inner_part(progs):
    main, startup, _, h = progs
    with atomic(main, startup), fluid.program_guard(main, startup):
        a = fluid.layers.fc(h, 4)
        mid = snapshot(main, startup)
        with pytest.raises(ValueError):
            with atomic(main, startup):
                fluid.layers.fc(a, 5)
                fluid.layers.fc(a, 6, act="nope")
        assert snapshot(main, startup) == mid
        b = fluid.layers.fc(a, 7)
    assert b.name == "fc_3.tmp_1"        # the rolled-back fc_3 / fc_4 names are reused
    assert [op.type for op in main.global_block().ops][-4:] == ["mul", "elementwise_add",
                                                                "mul", "elementwise_add"]


def test_nested_success_then_outer_failure_undoes_both(progs):
    main, startup, _, h = progs
    before = snapshot(main, startup)
    with pytest.raises(ZeroDivisionError):
        with atomic(main, startup), fluid.program_guard(main, startup):
            with atomic(main, startup):
                fluid.layers.fc(h, 4)
            assert in_transaction(main)           # the inner exit kept the outer journal
            fluid.layers.fc(h, 5)
            1 / 0
    assert snapshot(main, startup) == before


def test_transaction_on_one_program_leaves_others_alone(progs):
    main, startup, _, h = progs
    other = fluid.Program()
    other.global_block().create_var(name="o", shape=[1], dtype="float32")
    with pytest.raises(RuntimeError):
        with atomic(main):
            other.global_block().create_var(name="o2", shape=[1], dtype="float32")
            raise RuntimeError
    assert "o2" in other.global_block().vars


def test_atomic_rejects_non_programs():
    with pytest.raises(TypeError, match="atomic\\(\\) takes Programs"):
        atomic(fluid.Program(), "main")


def test_atomic_layer_is_idempotent_and_keeps_metadata():
    def my_layer(x, size=3):
        """doc"""
        return x
    wrapped = atomic_layer(my_layer)
    assert atomic_layer(wrapped) is wrapped
    assert wrapped.__name__ == "my_layer" and wrapped.__doc__ == "doc"
    assert wrapped.__wrapped__ is my_layer
    assert fluid.layers.fc.__wrapped__.__name__ == "fc"


def test_atomic_layer_covers_the_programs_of_variable_arguments():
    other, other_startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(other, other_startup):
        y = fluid.data("y", [-1, 3])
        z = fluid.data("z", [-1, 5], dtype="int64")
    before = snapshot(other)
    # y's program is not the default one; `+` first casts z (an op), then fails on shapes
    with pytest.raises(ValueError, match="elementwise_add"):
        y + z  # noqa: B018
    assert snapshot(other) == before


# -- cost: counted, never timed ------------------------------------------------------------
class _CountingDict(dict):
    iterations = 0

    def __iter__(self):
        type(self).iterations += 1
        return super().__iter__()

    def items(self):
        type(self).iterations += 1
        return super().items()

    def values(self):
        type(self).iterations += 1
        return super().values()

    def keys(self):
        type(self).iterations += 1
        return super().keys()


class _CountingList(list):
    iterations = 0

    def __iter__(self):
        type(self).iterations += 1
        return super().__iter__()


def _build(n):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        h = fluid.data("x", [-1, 4])
        for block in (main.global_block(), startup.global_block()):
            block.vars = _CountingDict(block.vars)
            block.ops = _CountingList(block.ops)
        _CountingDict.iterations = _CountingList.iterations = 0
        for _ in range(n):
            h = fluid.layers.fc(h, 4, act="relu") * 2.0
    return main


def test_wrapped_layer_calls_never_walk_the_program():
    _build(30)
    # entering / leaving a transaction or committing it never iterates vars or ops, so an
    # N-layer build stays O(N)
    assert _CountingDict.iterations == 0
    assert _CountingList.iterations == 0
    main = _build(1)
    list(main.global_block().vars), list(main.global_block().ops)    # the probes do count
    assert _CountingDict.iterations == 1 and _CountingList.iterations == 1


def test_journal_grows_by_a_constant_per_layer_and_rollback_replays_exactly_that():
    def entries(n):
        main, startup = fluid.Program(), fluid.Program()
        with fluid.program_guard(main, startup), atomic(main, startup):
            h = fluid.data("x", [-1, 4])
            for _ in range(n):
                h = fluid.layers.fc(h, 4, act="relu")
            return len(main._journal) + len(startup._journal)
    per_layer = entries(2) - entries(1)
    assert per_layer > 0
    assert entries(10) - entries(1) == 9 * per_layer
    assert entries(40) - entries(10) == 30 * per_layer


def test_failed_call_replays_only_its_own_journal_entries(monkeypatch):
    import fluidlite.core.atomic as A
    real, replayed = A._undo, []

    def counting(journal, mark):
        replayed.append(len(journal) - mark)
        real(journal, mark)
    monkeypatch.setattr(A, "_undo", counting)

    def failing_fc_after(n_layers):
        replayed.clear()
        main, startup = fluid.Program(), fluid.Program()
        with fluid.program_guard(main, startup), fluid.unique_name.guard():
            h = fluid.data("x", [-1, 4])
            for _ in range(n_layers):
                h = fluid.layers.fc(h, 4)
            # the first input's weight, init op and product are built, then the second input's
            # weight clashes with the shared fc_0.w_0 ([4, 4], not [4, 3])
            with pytest.raises(ValueError, match="is shared but declared with shape"):
                fluid.layers.fc([h, h], 3, param_attr=[None, "fc_0.w_0"])
        return sum(replayed)
    # the undo work of a failed call depends on the call, not on the program's size
    small = failing_fc_after(1)
    assert 10 < small < 60
    assert failing_fc_after(25) == small


def test_name_journal_is_per_thread():
    main = fluid.Program()
    got = []
    started, release = threading.Event(), threading.Event()

    def other_thread():
        started.wait()
        got.append(names.generate("t"))     # not journaled by the main thread's transaction
        release.set()

    t = threading.Thread(target=other_thread)
    t.start()
    with pytest.raises(RuntimeError):
        with atomic(main):
            names.generate("mine")
            started.set()
            release.wait(5)
            raise RuntimeError
    t.join()
    assert got == ["t_0"] and names.generate("t") == "t_1"
    assert names.generate("mine") == "mine_0"


def test_versions_are_never_reused_after_a_rollback(progs):
    """A plan cached at a version seen inside a rolled-back transaction must never match the
    program's later content: rollback restores the old version, new edits get fresh numbers."""
    main, startup, _, h = progs
    v0 = main.version
    seen = []
    with pytest.raises(RuntimeError):
        with atomic(main, startup), fluid.program_guard(main, startup):
            fluid.layers.fc(h, 4)
            seen.append(main.version)
            raise RuntimeError
    assert main.version == v0
    with fluid.program_guard(main, startup):
        fluid.layers.relu(h)
    assert main.version > max(seen)


def test_rollback_never_takes_back_a_name_another_thread_drew():
    main = fluid.Program()
    started, release = threading.Event(), threading.Event()
    got = []

    def other_thread():
        started.wait()
        got.append(names.generate("shared"))       # drawn after the transaction's own draw
        release.set()

    t = threading.Thread(target=other_thread)
    t.start()
    with pytest.raises(RuntimeError):
        with atomic(main):
            assert names.generate("shared") == "shared_0"
            started.set()
            release.wait(5)
            raise RuntimeError
    t.join()
    assert got == ["shared_1"]
    assert names.generate("shared") == "shared_2"    # a gap, never a duplicate
