"""Program IR: names, dtypes, blocks, ops, roles, printing, clone, lint, version counter."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.core.registry import UnknownAttributeWarning
from fluidlite.core.dtypes import VarType, convert_dtype, convert_np_dtype_to_dtype_
from fluidlite.core.ir import OpRole


def mlp():
    x = fluid.data("x", [-1, 4], "float32")
    h = fluid.layers.fc(x, 8, act="relu")
    return x, fluid.layers.fc(h, 3, act="softmax")


# -- dtypes -----------------------------------------------------------------------------------
@pytest.mark.parametrize("spelling", ["float32", np.float32, np.dtype("float32"), VarType.FP32, 5])
def test_vartype_equals_every_spelling(spelling):
    assert VarType.FP32 == spelling
    assert convert_np_dtype_to_dtype_(spelling) is VarType.FP32


def test_vartype_prints_like_fluid_and_is_hashable():
    assert str(VarType.INT64) == "VarType.INT64"
    assert fluid.core.VarDesc.VarType.INT64 == "int64"
    assert {VarType.FP32: 1}[VarType.FP32] == 1
    assert convert_dtype(VarType.FP64) == "float64"
    assert VarType.FP32 != "int64"


def test_unsupported_dtype_raises_value_error():
    with pytest.raises(ValueError, match="Not supported numpy dtype"):
        convert_np_dtype_to_dtype_("complex128")


# -- names ------------------------------------------------------------------------------------
def test_layers_get_fluid_names():
    x, y = mlp()
    block = fluid.default_main_program().global_block()
    assert [p.name for p in block.all_parameters()] == [
        "fc_0.w_0", "fc_0.b_0", "fc_1.w_0", "fc_1.b_0"]
    assert "fc_0.tmp_0" in block.vars and y.name == "fc_1.tmp_2"


def test_unique_name_guard_and_switch():
    with fluid.unique_name.guard():
        assert fluid.unique_name.generate("fc") == "fc_0"
        assert fluid.unique_name.generate("fc") == "fc_1"
    with fluid.unique_name.guard("pre_"):
        assert fluid.unique_name.generate("fc") == "pre_fc_0"
    old = fluid.unique_name.switch()       # fluid 1.8: (generator, parameter-name checker)
    assert fluid.unique_name.generate("a") == "a_0"
    fluid.unique_name.switch(*old)


def test_counters_are_global_across_programs():
    for _ in range(2):
        with fluid.program_guard(fluid.Program(), fluid.Program()):
            fluid.layers.fc(fluid.data("x", [-1, 2]), 2)
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        fluid.layers.fc(fluid.data("x", [-1, 2]), 2)
        assert fluid.default_main_program().global_block().has_var("fc_2.w_0")


def test_name_scope_is_recorded_hierarchically():
    x = fluid.data("x", [-1, 4])
    with fluid.name_scope("s1"):
        with fluid.name_scope("s2"):
            y = fluid.layers.fc(x, 2)
    with fluid.name_scope("s1"):
        z = fluid.layers.fc(x, 2)
    assert y.op.attr("op_namescope") == "/s1/s2/"
    assert z.op.attr("op_namescope") == "/s1_1/"
    with pytest.raises(AssertionError):
        with fluid.name_scope(""):
            pass


# -- program structure ------------------------------------------------------------------------
def test_program_guard_type_errors():
    with pytest.raises(TypeError, match="main_program should be Program"):
        with fluid.program_guard(1):
            pass
    with pytest.raises(TypeError, match="startup_program should be Program"):
        with fluid.program_guard(fluid.Program(), 1):
            pass


def test_program_guard_restores_defaults():
    before = fluid.default_main_program()
    p = fluid.Program()
    with fluid.program_guard(p):
        assert fluid.default_main_program() is p
    assert fluid.default_main_program() is before
    prev = fluid.switch_main_program(p)
    assert fluid.default_main_program() is p and prev is before
    fluid.switch_main_program(before)


def test_block_accessors_and_errors():
    mlp()
    prog = fluid.default_main_program()
    block = prog.global_block()
    assert prog.block(0) is block is prog.current_block() and prog.num_blocks == 1
    assert block.var("x").shape == (-1, 4) and block.has_var("x")
    with pytest.raises(ValueError, match="var nope not in this block"):
        block.var("nope")
    with pytest.raises(TypeError, match="var require string"):
        block.var(3)
    assert [v.name for v in prog.list_vars()][0] == "x"
    assert len(prog.all_parameters()) == 4


def test_variable_attributes():
    x, y = mlp()
    assert x.is_data and x.stop_gradient and not x.persistable
    w = fluid.default_main_program().global_block().var("fc_0.w_0")
    assert isinstance(w, fluid.Parameter) and w.persistable and w.trainable
    assert w.shape == (4, 8) and w.dtype == "float32"
    assert y.op.type == "softmax"
    assert fluid.layers.data("img", [784]).shape == (-1, 784)
    assert fluid.layers.data("raw", [3, 4], append_batch_size=False).shape == (3, 4)
    assert fluid.layers.data("n", [None, 4]).shape == (-1, 4)


def test_create_var_redeclare_conflict():
    block = fluid.default_main_program().global_block()
    a = block.create_var(name="a", shape=[2, 3], dtype="float32")
    assert block.create_var(name="a", shape=[2, 3], dtype="float32") is a
    with pytest.raises(ValueError, match="has been created before"):
        block.create_var(name="a", shape=[4], dtype="float32")


def test_parameter_validation():
    block = fluid.default_main_program().global_block()
    with pytest.raises(ValueError, match="batch-size"):
        block.create_parameter(name="p", shape=[-1, 3], dtype="float32")
    with pytest.raises(ValueError):
        block.create_parameter(name="p", shape=[], dtype="float32")


def test_random_seed_setter():
    p = fluid.Program()
    p.random_seed = 5
    assert p.random_seed == 5
    with pytest.raises(ValueError, match="Seed must be a integer"):
        p.random_seed = 1.5


def test_auto_op_attrs_and_roles():
    _, y = mlp()
    op = y.op
    assert op.attr("op_role") == OpRole.Forward == 0
    assert op.attr("op_namescope") == "/"
    stack = op.attr("op_callstack")
    assert any("test_ir.py" in line for line in stack)
    prog = fluid.default_main_program()
    with prog._optimized_guard(["fc_0.w_0", "fc_0.w_0@GRAD"]):
        o = prog.global_block().append_op("scale", {"X": y}, {"Out": "s"}, {"scale": 2.0})
    assert o.attr("op_role") == OpRole.Optimize and o.attr("op_role_var") == [
        "fc_0.w_0", "fc_0.w_0@GRAD"]
    with prog._lr_schedule_guard(is_with_opt=True):
        o = prog.global_block().append_op("scale", {"X": y}, {"Out": "s2"})
    assert o.attr("op_role") == OpRole.LRSched | OpRole.Optimize == 18
    roles = fluid.core.op_proto_and_checker_maker.OpRole
    assert (roles.Backward, roles.Loss, roles.LRSched) == (1, 256, 16)


def test_operator_accessors():
    _, y = mlp()
    mul = fluid.default_main_program().global_block().ops[0]
    assert mul.type == "mul" and mul.input("X") == ["x"] and mul.output("Out") == ["fc_0.tmp_0"]
    assert mul.input_names == ["X", "Y"] and mul.output_arg_names == ["fc_0.tmp_0"]
    assert mul.attr("x_num_col_dims") == 1 and mul.has_attr("y_num_col_dims")
    assert mul.idx == 0 and "x_num_col_dims" in mul.all_attrs()
    assert str(mul).startswith("{Out=['fc_0.tmp_0']} = mul(inputs={X=['x'], Y=['fc_0.w_0']}")


def test_insert_remove_op_and_version_bumps():
    prog = fluid.default_main_program()
    v0 = prog.version
    x, y = mlp()
    v1 = prog.version
    assert v1 > v0
    block = prog.global_block()
    n = len(block.ops)
    block._insert_op(0, "fill_constant", outputs={"Out": "c"},
                     attrs={"shape": [1], "value": 1.0, "dtype": "float32"})
    assert block.ops[0].type == "fill_constant" and len(block.ops) == n + 1
    v2 = prog.version
    block._remove_op(0)
    assert prog.version > v2 and len(block.ops) == n
    v3 = prog.version
    y.persistable = True
    assert prog.version > v3
    v4 = prog.version
    block.ops[0]._set_attr("x_num_col_dims", 1)
    assert prog.version > v4


def test_print_program_readable_like_fluid_1_8():
    mlp()
    text = str(fluid.default_main_program())
    assert text.startswith("{ // block 0")
    assert "var x : fluid.VarType.LOD_TENSOR.shape(-1, 4).astype(VarType.FP32)" in text
    assert "persist trainable param fc_0.w_0 : fluid.VarType.LOD_TENSOR.shape(4, 8)" in text
    assert "op_callstack" not in text
    assert "x_num_col_dims = 1, y_num_col_dims = 1)" in text
    assert fluid.default_main_program()._to_readable_code() == text


def test_clone_is_deep_and_keeps_parameter_attributes():
    x = fluid.data("x", [-1, 4])
    fluid.layers.fc(x, 2, param_attr=fluid.ParamAttr(learning_rate=0.5, trainable=False))
    prog = fluid.default_main_program()
    c = prog.clone()
    assert str(c) == str(prog)
    w = c.global_block().var("fc_0.w_0")
    assert isinstance(w, fluid.Parameter) and not w.trainable
    assert w.optimize_attr == {"learning_rate": 0.5} and w.block is c.global_block()
    c.global_block().ops[0]._set_attr("x_num_col_dims", 1)
    c.global_block()._remove_op(0)
    assert len(prog.global_block().ops) == 2
    assert c.global_block().var("fc_0.tmp_1").op is c.global_block().ops[-1]


def test_clone_for_test_drops_backward_and_sets_is_test():
    x, y = mlp()
    loss = fluid.layers.mean(y)
    prog = fluid.default_main_program()
    fluid.backward.append_backward(loss)
    test_prog = prog.clone(for_test=True)
    roles = [op.attr("op_role") for op in test_prog.global_block().ops]
    assert all(not (r & (OpRole.Backward | OpRole.Optimize)) for r in roles)
    assert not any("@GRAD" in n for n in test_prog.global_block().vars)
    assert len(test_prog.global_block().ops) == 7


def test_lint_accepts_valid_and_reports_problems():
    mlp()
    prog = fluid.default_main_program()
    assert prog.lint() is prog
    block = prog.global_block()
    block.create_var(name="orphan", shape=[2], dtype="float32")
    block.append_op("scale", {"X": "orphan"}, {"Out": "o2"})
    block.ops[0].inputs["Bogus"] = ["x"]
    with pytest.raises(ValueError) as e:
        prog.lint()
    msg = str(e.value)
    assert "input 'orphan' is used before any op produces it" in msg
    assert "unknown input slot 'Bogus'" in msg


# -- op validation at build time --------------------------------------------------------------
def test_unknown_op_type():
    with pytest.raises(ValueError, match='Operator "reluu" has not been registered'):
        fluid.default_main_program().global_block().append_op("reluu", {"X": "x"}, {"Out": "y"})


def test_missing_slot_names_op_and_line():
    block = fluid.default_main_program().global_block()
    with pytest.raises(ValueError) as e:
        block.append_op("mul", {"X": fluid.data("x", [2, 3])}, {"Out": "o"})
    assert "Input Y not found" in str(e.value) and "'mul'" in str(e.value)
    assert "test_ir.py" in str(e.value)


def test_unknown_and_ill_typed_attrs():
    x = fluid.data("x", [2, 3])
    block = fluid.default_main_program().global_block()
    # fluid 1.8 dropped attributes an op does not declare; fluidlite too, with a warning
    # naming the user's line, the attribute and the op's attributes
    with pytest.warns(UnknownAttributeWarning,
                      match=r"op 'scale' has no attribute 'scal' \(its attributes are "
                            r"\['bias', 'bias_after_scale', 'scale'") as rec:
        op = block.append_op("scale", {"X": x}, {"Out": "o"}, {"scal": 2.0})
    assert rec[0].filename == __file__
    assert "scal" not in op.attrs and op.attr("scale") == 1.0
    with pytest.raises(TypeError, match="attribute 'scale' expects float.*'two'"):
        block.append_op("scale", {"X": x}, {"Out": "o"}, {"scale": "two"})
    with pytest.raises(TypeError, match="expects bool"):
        block.append_op("scale", {"X": x}, {"Out": "o"}, {"bias_after_scale": 1})


def test_shape_mismatch_at_build_names_op_shapes_and_line():
    x = fluid.data("x", [-1, 3])
    w = fluid.data("w", [4, 5])
    with pytest.raises(ValueError) as e:
        fluid.default_main_program().global_block().append_op("mul", {"X": x, "Y": w},
                                                               {"Out": "o"})
    msg = str(e.value)
    assert "'mul'" in msg and "[-1, 3]" in msg and "[4, 5]" in msg and "test_ir.py" in msg


def test_duplicable_slot_count_checked():
    a, b = fluid.data("a", [2]), fluid.data("b", [2])
    with pytest.raises(ValueError, match="expects only one input, but 2 are given"):
        fluid.default_main_program().global_block().append_op("relu", {"X": [a, b]},
                                                               {"Out": "o"})


def test_fc_shapes_with_list_input_and_num_flatten_dims():
    a = fluid.data("a", [-1, 2, 3])
    b = fluid.data("b", [-1, 2, 5])
    out = fluid.layers.fc([a, b], 4, num_flatten_dims=2)
    assert out.shape == (-1, 2, 4)
    ops = [op.type for op in fluid.default_main_program().global_block().ops]
    assert ops == ["mul", "mul", "sum", "elementwise_add"]
    with pytest.raises(ValueError, match="num_flatten_dims"):
        fluid.layers.fc(a, 2, num_flatten_dims=3)


def test_param_attr_sharing_and_bias_false():
    x = fluid.data("x", [-1, 4])
    y1 = fluid.layers.fc(x, 3, param_attr=fluid.ParamAttr(name="shared_w"), bias_attr=False)
    y2 = fluid.layers.fc(x, 3, param_attr=fluid.ParamAttr(name="shared_w"), bias_attr=False)
    block = fluid.default_main_program().global_block()
    assert [p.name for p in block.all_parameters()] == ["shared_w"]
    startup = fluid.default_startup_program().global_block()
    assert [op.type for op in startup.ops] == ["uniform_random"]
    assert y1.op.type == y2.op.type == "mul"


def test_unknown_attr_is_dropped_with_a_warning_in_dygraph_too():
    # the 1.8 zoo's dygraph LAC model passes is_test to crf_decoding, which never had it
    from fluidlite import dygraph
    from fluidlite.layer_helper import LayerHelper
    with dygraph.guard():
        x = dygraph.to_variable(np.ones((2, 3), "float32"))
        helper = LayerHelper("scale")
        out = helper.create_variable_for_type_inference(x.dtype)
        with pytest.warns(UnknownAttributeWarning, match="op 'scale' has no attribute 'is_test'"):
            helper.append_op(type="scale", inputs={"X": [x]}, outputs={"Out": [out]},
                             attrs={"scale": 3.0, "is_test": True})
        np.testing.assert_array_equal(out.numpy(), np.full((2, 3), 3.0, "float32"))
