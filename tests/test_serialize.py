"""Program serialization (versioned JSON) and inference pruning."""
import json
import math

import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.formats import serialize
from fluidlite.core.dtypes import VarType
from fluidlite.formats.serialize import ProgramFormatError


def build(with_optimizer=True):
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 11
    with fluid.program_guard(main, startup):
        x = fluid.data(name="x", shape=[-1, 4], dtype="float32")
        with fluid.name_scope("encoder"):
            h = fluid.layers.fc(
                input=x, size=6, act="relu",
                param_attr=fluid.ParamAttr(name="w_enc", learning_rate=0.5,
                                           regularizer=fluid.regularizer.L2Decay(1e-3)),
                bias_attr=fluid.ParamAttr(need_clip=False,
                                          regularizer=fluid.regularizer.L1Decay(2e-4)))
        out = fluid.layers.fc(input=h, size=1,
                              param_attr=fluid.ParamAttr(trainable=False))
        loss = fluid.layers.mean(out)
        if with_optimizer:
            opt = fluid.optimizer.SGD(learning_rate=0.05,
                                      grad_clip=fluid.clip.GradientClipByGlobalNorm(1.0))
            opt.minimize(loss)
    return main, startup, x, out, loss


def test_round_trip_prints_identically_with_details():
    main, startup, *_ = build()
    for prog in (main, startup):
        back = fluid.Program.from_dict(prog.to_dict())
        assert str(back) == str(prog)
        assert back.to_string(with_details=True) == prog.to_string(with_details=True)
        assert back.random_seed == prog.random_seed
        assert back._appending_grad_times == prog._appending_grad_times


def test_parameter_attributes_survive():
    main, *_ = build()
    back = fluid.Program.from_dict(json.loads(json.dumps(main.to_dict())))
    w = back.global_block().var("w_enc")
    assert isinstance(w, fluid.Parameter)
    assert w.optimize_attr == {"learning_rate": 0.5}
    assert isinstance(w.regularizer, fluid.regularizer.L2DecayRegularizer)
    assert w.regularizer._regularization_coeff == pytest.approx(1e-3)
    b = back.global_block().var("fc_0.b_0")
    assert b.need_clip is False
    assert isinstance(b.regularizer, fluid.regularizer.L1DecayRegularizer)
    assert back.global_block().var("fc_1.w_0").trainable is False
    d = main.to_dict()["blocks"][0]["vars"]
    enc = next(v for v in d if v["name"] == "w_enc")
    assert enc["regularizer"] == {"type": "L2Decay", "coeff": 1e-3}
    assert back.global_block().var("x").is_data and back.global_block().var("x").need_check_feed


def test_op_roles_and_namescopes_survive():
    main, *_ = build()
    back = fluid.Program.from_dict(main.to_dict())
    for a, b in zip(main.global_block().ops, back.global_block().ops):
        assert a.type == b.type and a.inputs == b.inputs and a.outputs == b.outputs
        assert a.attrs == b.attrs
    roles = {op.attr("op_role") for op in back.global_block().ops}
    assert {0, 1, 2, 256, 257} <= roles
    assert any("gradient_clip" in op.attr("op_namescope") for op in back.global_block().ops)


def test_round_trip_gives_the_same_results():
    main, startup, x, out, loss = build()
    back_main = fluid.Program.from_dict(main.to_dict())
    back_startup = fluid.Program.from_dict(startup.to_dict())
    feed = {"x": np.random.default_rng(0).normal(size=(5, 4)).astype("float32")}
    results = []
    for m, s in ((main, startup), (back_main, back_startup)):
        exe = fluid.Executor(fluid.CPUPlace())
        with fluid.scope_guard(fluid.Scope()):
            exe.run(s)
            steps = [exe.run(m, feed=feed, fetch_list=[loss.name, out.name]) for _ in range(3)]
        results.append(steps)
    for (l1, o1), (l2, o2) in zip(*results):
        np.testing.assert_array_equal(l1, l2)
        np.testing.assert_array_equal(o1, o2)


def test_special_attr_values_round_trip():
    prog = fluid.Program()
    with fluid.program_guard(prog):
        fluid.data(name="x", shape=[2], dtype="float32")
    op = prog.global_block().append_op("fill_constant", outputs={"Out": "c"},
                                       attrs={"shape": [2], "dtype": VarType.INT64,
                                              "value": float("nan")})
    op.attrs["custom_tuple"] = (1, "a")
    op.attrs["custom_dict"] = {"k": [1.5, VarType.FP16]}
    op.attrs["custom_np"] = np.float32(0.25)
    op.attrs["custom_arr"] = np.arange(6, dtype=np.int32).reshape(2, 3)
    op.attrs["custom_inf"] = -math.inf
    text = serialize.dumps_program(prog)
    assert "NaN" not in text and "Infinity" not in text     # strict JSON
    back = serialize.loads_program(text).global_block().ops[0].attrs
    assert back["dtype"] is VarType.INT64 and math.isnan(back["value"])
    assert back["custom_tuple"] == (1, "a")
    assert back["custom_dict"] == {"k": [1.5, VarType.FP16]}
    assert back["custom_np"] == np.float32(0.25) and isinstance(back["custom_np"], np.float32)
    np.testing.assert_array_equal(back["custom_arr"], op.attrs["custom_arr"])
    assert back["custom_arr"].dtype == np.int32
    assert back["custom_inf"] == -math.inf


def test_parse_from_string_and_desc_shim():
    main, *_ = build(with_optimizer=False)
    data = main.desc.serialize_to_string()
    assert isinstance(data, bytes)
    assert main.desc.num_blocks() == 1
    back = fluid.Program.parse_from_string(data)
    assert str(back) == str(main)
    assert isinstance(back.global_block().var("w_enc"), fluid.Parameter)


def test_save_and_load_program_file(tmp_path):
    main, *_ = build()
    path = tmp_path / "prog.json"
    serialize.save_program(main, path)
    assert str(serialize.load_program(path)) == str(main)
    assert [p.name for p in tmp_path.iterdir()] == ["prog.json"]   # no temp file left


def test_clip_attributes_by_type():
    main, *_ = build(with_optimizer=False)
    w = main.global_block().var("w_enc")
    w.gradient_clip_attr = fluid.clip.GradientClipByValue(max=2.0, min=-1.0)
    x = main.global_block().var("x")
    x._set_error_clip(fluid.clip.ErrorClipByValue(max=3.0))
    d = main.to_dict()
    back = fluid.Program.from_dict(d)
    clip = back.global_block().var("w_enc").gradient_clip_attr
    assert type(clip).__name__ == "GradientClipByValue" and (clip.min, clip.max) == (-1.0, 2.0)
    err = back.global_block().var("x").error_clip
    assert type(err).__name__ == "ErrorClipByValue" and err.min == -3.0


def test_newer_format_version_is_rejected():
    main, *_ = build(with_optimizer=False)
    d = main.to_dict()
    d["version"] = serialize.FORMAT_VERSION + 1
    with pytest.raises(ProgramFormatError, match="format version 2.*Upgrade fluidlite"):
        fluid.Program.from_dict(d)


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d.pop("format"), "not a fluidlite program"),
    (lambda d: d.update(blocks=[]), "blocks"),
    (lambda d: d["blocks"][0]["vars"][0].update(shape="abc"), "shape"),
    (lambda d: d["blocks"][0]["vars"][0].update(dtype="FLOAT99"), "unknown dtype"),
    (lambda d: d["blocks"][0]["ops"][0].update(type="no_such_op"), "not registered"),
    (lambda d: d["blocks"][0]["ops"][0].update(inputs={"X": "x"}), "list of variable names"),
    (lambda d: d["blocks"][0]["ops"][0]["attrs"].update(bad={"@evil": 1}), "unknown tag"),
    (lambda d: d["blocks"][0]["vars"][1].update(regularizer={"type": "Nope", "coeff": 1}),
     "unknown regularizer"),
])
def test_malformed_documents_raise_clear_errors(mutate, message):
    main, *_ = build(with_optimizer=False)
    d = json.loads(json.dumps(main.to_dict()))
    mutate(d)
    with pytest.raises(ProgramFormatError, match=message):
        fluid.Program.from_dict(d)


def test_malformed_text_and_truncated_file(tmp_path):
    main, *_ = build(with_optimizer=False)
    text = serialize.dumps_program(main)
    with pytest.raises(ProgramFormatError, match="truncated"):
        serialize.loads_program(text[: len(text) // 2])
    with pytest.raises(ProgramFormatError, match="not UTF-8"):
        serialize.loads_program(b"\x08\x01\x12\xff\xfe protobuf bytes")
    path = tmp_path / "__model__"
    path.write_bytes(text[:100].encode())
    with pytest.raises(ProgramFormatError, match="__model__"):
        serialize.load_program(path)
    with pytest.raises(FileNotFoundError):
        serialize.load_program(tmp_path / "missing")


def test_unserializable_attr_names_the_op():
    prog = fluid.Program()
    with fluid.program_guard(prog):
        x = fluid.data(name="x", shape=[2], dtype="float32")
        fluid.layers.relu(x)
    prog.global_block().ops[0].attrs["bad"] = object()
    with pytest.raises(ProgramFormatError, match="op #0 'relu' attr 'bad'"):
        prog.to_dict()


# -- pruning ------------------------------------------------------------------------------------
def test_prune_with_input_keeps_only_the_target_path():
    main, startup, x, out, loss = build()
    pruned = main._prune_with_input(["x"], [out])
    types = [op.type for op in pruned.global_block().ops]
    assert types == ["mul", "elementwise_add", "relu", "mul", "elementwise_add"]
    names = set(pruned.global_block().vars)
    assert "learning_rate_0" not in names and not any("@GRAD" in n for n in names)
    assert {"x", "w_enc", "fc_1.w_0", out.name} <= names
    assert len(main.global_block().ops) > len(types)          # original untouched


def test_prune_cuts_at_fed_variables():
    main, startup, x, out, loss = build(with_optimizer=False)
    hidden = main.global_block().ops[2].output("Out")[0]      # relu output
    pruned = main._prune_with_input([hidden], [out])
    assert [op.type for op in pruned.global_block().ops] == ["mul", "elementwise_add"]
    assert "x" not in pruned.global_block().vars
    assert [op.type for op in main._prune([loss]).global_block().ops][-1] == "mean"


def test_prune_rejects_bad_arguments():
    main, startup, x, out, loss = build(with_optimizer=False)
    with pytest.raises(ValueError, match="can only be str"):
        main._prune_with_input([x], [out])
    with pytest.raises(ValueError, match="Variable or Operator"):
        main._prune_with_input(["x"], [3])
    with pytest.raises(ValueError, match="'nope' is not in the program"):
        main._prune_with_input(["nope"], [out])


def test_inference_optimize_sets_is_test_on_a_copy():
    main, *_ = build(with_optimizer=False)
    op = main.global_block().ops[0]
    op.attrs["is_test"] = False
    opt = main._inference_optimize()
    assert opt.global_block().ops[0].attr("is_test") is True
    assert op.attr("is_test") is False


def test_sub_blocks_and_block_attrs_round_trip():
    prog = fluid.Program()
    with fluid.program_guard(prog):
        x = fluid.data(name="x", shape=[-1, 2], dtype="float32")
        y = fluid.layers.relu(x)
        sub = prog._create_block()
        sub.create_var(name="inner", shape=[-1, 2], dtype="float32")
        sub.append_op("relu", inputs={"X": y}, outputs={"Out": "inner"})
        prog._rollback()
    prog.global_block().ops[0].attrs["sub_block"] = sub
    back = fluid.Program.from_dict(prog.to_dict())
    assert back.num_blocks == 2 and back.block(1).parent_idx == 0
    assert back.global_block().ops[0].attrs["sub_block"] is back.block(1)
    assert str(back) == str(prog)
    import fluidlite.viz as viz
    g = viz.to_networkx(back, block=1)
    assert g.nodes["var:" + y.name]["fl_block"] == 0 and "op:1:0" in g   # from the parent
    assert g.nodes["var:inner"]["fl_block"] == 1
