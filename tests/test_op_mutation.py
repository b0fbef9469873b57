"""Changing an op after a run -- through ``_set_attr``, ``op.attrs[k] = v``, a slot's list or a
whole new dict -- moves its program's version: a cached plan never computes the old op.
Inside a transaction the change is undone when the build fails."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.core import atomic


def _scale_program():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [2], "float32")
        z = fluid.data("z", [2], "float32")
        y = fluid.layers.scale(x, scale=2.0)
    return main, y, main.global_block().ops[-1]


FEED = {"x": np.ones(2, "float32"), "z": np.full(2, 3.0, "float32")}


@pytest.mark.parametrize("edit, want", [
    (lambda op: op._set_attr("scale", 5.0), 5.0),
    (lambda op: op.attrs.__setitem__("scale", 7.0), 7.0),
    (lambda op: op.attrs.update(scale=4.0), 4.0),
    (lambda op: op.attrs.pop("scale"), 1.0),
    (lambda op: op.inputs["X"].__setitem__(0, "z"), 6.0),
    (lambda op: op.inputs.__setitem__("X", ["z"]), 6.0),
    (lambda op: op._rename_input("x", "z"), 6.0),
    (lambda op: setattr(op, "attrs", dict(op.attrs, scale=9.0)), 9.0),
])
def test_an_edit_after_a_run_reaches_the_next_run(edit, want):
    main, y, op = _scale_program()
    exe = fluid.Executor()
    first, = exe.run(main, feed=FEED, fetch_list=[y])
    np.testing.assert_array_equal(first, [2.0, 2.0])
    version = main.version
    edit(op)
    assert main.version != version
    got, = exe.run(main, feed=FEED, fetch_list=[y])
    np.testing.assert_array_equal(got, [want, want])


def test_a_failed_transaction_undoes_direct_edits():
    main, y, op = _scale_program()
    before = (dict(op.attrs), {k: list(v) for k, v in op.inputs.items()}, main.version)
    with pytest.raises(RuntimeError):
        with atomic.atomic(main):
            op.attrs["scale"] = 11.0
            op.inputs["X"].append("z")
            del op.attrs["bias"]
            raise RuntimeError("boom")
    assert (dict(op.attrs), {k: list(v) for k, v in op.inputs.items()}) == before[:2]
    got, = fluid.Executor().run(main, feed=FEED, fetch_list=[y])
    np.testing.assert_array_equal(got, [2.0, 2.0])


def test_clones_hold_plain_containers_of_their_own():
    main, _, op = _scale_program()
    clone = main.clone()
    cop = clone.global_block().ops[-1]
    cop.attrs["scale"] = 3.0
    assert op.attrs["scale"] == 2.0
    version = main.version
    cop.inputs["X"][0] = "z"
    assert main.version == version and op.inputs["X"] == ["x"]
