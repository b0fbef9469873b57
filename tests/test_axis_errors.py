"""Out-of-range dims and axes raise at build time (shape inference), naming the op, the dim and
the valid range (issue 11), for every op that takes a dim/axis or a list of them."""
import pytest

from fluidlite.core.ir import Program, program_guard


def append(op_type, inputs, attrs, outs=("Out",)):
    prog = Program()
    block = prog.global_block()
    in_vars = {}
    for slot, shape in inputs.items():
        if isinstance(shape, list):
            in_vars[slot] = [block.create_var(name=f"{slot}{i}", shape=s, dtype="float32")
                             for i, s in enumerate(shape)]
        else:
            dtype = "int64" if slot == "Label" else "float32"
            in_vars[slot] = block.create_var(name=slot, shape=shape, dtype=dtype)
    out_vars = {s: block.create_var(name=s + "_out") for s in outs}
    with program_guard(prog, Program()):
        block.append_op(op_type, in_vars, out_vars, attrs)


X = {"X": (2, 3)}
CASES = [
    ("reduce_sum", X, {"dim": [0, 5], "reduce_all": True}, ("Out",), "dim 5", "-2..1"),
    ("reduce_mean", X, {"dim": [5, 0]}, ("Out",), "dim 5", "-2..1"),
    ("reduce_max", X, {"dim": [-3]}, ("Out",), "dim -3", "-2..1"),
    ("reduce_min", X, {"dim": [1, 2]}, ("Out",), "dim 2", "-2..1"),
    ("squeeze2", {"X": (2, 1)}, {"axes": [1, 5]}, ("Out", "XShape"), "axes entry 5", "-2..1"),
    ("unsqueeze2", X, {"axes": [5]}, ("Out", "XShape"), "axes entry 5", "-3..2"),
    ("slice", {"Input": (2, 3)}, {"axes": [0, 5], "starts": [0, 0], "ends": [1, 1]}, ("Out",),
     "axes entry 5", "-2..1"),
    ("strided_slice", {"Input": (2, 3)},
     {"axes": [5], "starts": [0], "ends": [1], "strides": [1]}, ("Out",), "axes entry 5",
     "-2..1"),
    ("concat", {"X": [(2, 3), (2, 3)]}, {"axis": 2}, ("Out",), "axis 2", "-2..1"),
    ("stack", {"X": [(2, 3), (2, 3)]}, {"axis": -4}, ("Y",), "axis -4", "-3..2"),
    ("arg_max", X, {"axis": 2}, ("Out",), "axis 2", "-2..1"),
    ("arg_min", X, {"axis": -3}, ("Out",), "axis -3", "-2..1"),
    ("softmax", X, {"axis": 2}, ("Out",), "axis 2", "-2..1"),
    ("norm", X, {"axis": 2}, ("Out", "Norm"), "axis 2", "-2..1"),
    ("softmax_with_cross_entropy", {"Logits": (2, 3), "Label": (2, 1)}, {"axis": 2},
     ("Softmax", "Loss"), "axis 2", "-2..1"),
]


@pytest.mark.parametrize("op_type,inputs,attrs,outs,what,valid", CASES,
                         ids=[c[0] for c in CASES])
def test_out_of_range_axis_raises_at_build_time(op_type, inputs, attrs, outs, what, valid):
    with pytest.raises(ValueError) as e:
        append(op_type, inputs, attrs, outs)
    msg = str(e.value)
    assert f"{op_type}: {what} is out of range for input of rank" in msg
    assert f"(valid: {valid})" in msg


def test_transpose_names_the_permutation():
    with pytest.raises(ValueError, match=r"transpose2: axis \[0, 5\] is not a permutation"):
        append("transpose2", X, {"axis": [0, 5]}, ("Out", "XShape"))
