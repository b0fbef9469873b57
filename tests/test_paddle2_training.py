"""Training programs in Paddle's ProgramDesc format (issue 18): backward ops (``*_grad`` with
``X@GRAD`` / ``Out@GRAD`` slots) and optimizer ops load and train exactly as the program they
came from; a hand-built Paddle 2.x-style training program (matmul_v2_grad, elementwise_add_grad,
adam with its 2.x slots and attrs) trains as a NumPy reference."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.formats import paddle as pf

from test_paddle2_programs import Long, Longs, add_op, add_var, new_program


def _build(opt):
    main, start = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, start):
        x = fluid.data("x", [-1, 4])
        label = fluid.data("label", [-1, 1], "int64")
        h = fluid.layers.fc(x, 6, act="tanh")
        h = fluid.layers.dropout(h, 0.0, dropout_implementation="upscale_in_train")
        w = fluid.layers.create_parameter([6, 3], "float32", name="w2")
        logits = fluid.layers.matmul(h, w)
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, label))
        opt.minimize(loss)
    return main, start, loss


def _train(program, state, loss_name, steps=3):
    rng = np.random.default_rng(5)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    losses = []
    with fluid.scope_guard(scope):
        for name, arr in state.items():
            scope.var(name).get_tensor().set(arr.copy(), fluid.CPUPlace())
        for _ in range(steps):
            feed = {"x": rng.standard_normal((8, 4)).astype("float32"),
                    "label": rng.integers(0, 3, (8, 1))}
            losses.append(exe.run(program, feed=feed, fetch_list=[loss_name])[0])
        return losses, {n: np.array(scope.find_var(n).get_tensor()) for n in state}


@pytest.mark.parametrize("make_opt", [lambda: fluid.optimizer.Adam(0.05),
                                      lambda: fluid.optimizer.Momentum(0.1, 0.9),
                                      lambda: fluid.optimizer.SGD(0.1)],
                         ids=["adam", "momentum", "sgd"])
def test_fluidlite_training_program_round_trip(tmp_path, make_opt):
    main, start, loss = _build(make_opt())
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        exe.run(start)
        fluid.save(main, str(tmp_path / "ckpt"))
    state = {v.name: np.array(scope.find_var(v.name).get_tensor())
             for v in main.list_vars() if v.persistable and scope.find_var(v.name) is not None}
    data = (tmp_path / "ckpt.pdmodel").read_bytes()
    assert not pf.is_json_program(data)            # a ProgramDesc protobuf
    loaded = fluid.io.read_program(str(tmp_path / "ckpt.pdmodel"))
    assert str(loaded) == str(main)
    assert any(op.type.endswith("_grad") for op in loaded.global_block().ops)
    assert pf.program_to_bytes(loaded) == pf.program_to_bytes(main)
    losses_a, params_a = _train(main, state, loss.name)
    losses_b, params_b = _train(loaded, state, loss.name)
    assert losses_a == losses_b and losses_a[-1] != losses_a[0]
    for name in params_a:
        assert params_a[name].tobytes() == params_b[name].tobytes(), name
    # the checkpoint's state loads into the loaded program as well
    with fluid.scope_guard(fluid.Scope()):
        fluid.load(loaded, str(tmp_path / "ckpt"), exe)
        got = np.array(fluid.global_scope().find_var("w2").get_tensor())
    np.testing.assert_array_equal(got, state["w2"])


def _paddle2_training_program(beta1=0.9, beta2=0.999, eps=1e-8):
    """loss = mean((x @ w + b - y)^2), as Paddle 2.6's static mode writes it with Adam:
    forward ops, the loss@GRAD seed (op_role 257), grad ops with empty unused-gradient slots,
    adam ops with empty MasterParam/SkipUpdate slots and 2.x attrs."""
    msg, b = new_program()
    add_var(b, "x", [-1, 4])
    add_var(b, "y", [-1, 3])
    add_var(b, "w", [4, 3], persistable=True, parameter=True)
    add_var(b, "b", [3], persistable=True, parameter=True)
    for n, shape in [("h", [-1, 3]), ("z", [-1, 3]), ("d", [-1, 3]), ("sq", [-1, 3]),
                     ("loss", [])]:
        add_var(b, n, shape)
        add_var(b, n + "@GRAD", shape)
    add_var(b, "w@GRAD", [4, 3])
    add_var(b, "b@GRAD", [3])
    add_var(b, "learning_rate_0", [], persistable=True)
    for p, shape in [("w", [4, 3]), ("b", [3])]:
        for acc in ("moment1_0", "moment2_0"):
            add_var(b, f"{p}_{acc}", shape, persistable=True)
        for acc in ("beta1_pow_acc_0", "beta2_pow_acc_0"):
            add_var(b, f"{p}_{acc}", [1], persistable=True)
    add_op(b, "matmul_v2", {"X": ["x"], "Y": ["w"]}, {"Out": ["h"]},
           {"trans_x": False, "trans_y": False})
    add_op(b, "elementwise_add", {"X": ["h"], "Y": ["b"]}, {"Out": ["z"]}, {"axis": -1})
    add_op(b, "elementwise_sub", {"X": ["z"], "Y": ["y"]}, {"Out": ["d"]}, {"axis": -1})
    add_op(b, "square", {"X": ["d"]}, {"Out": ["sq"]})
    add_op(b, "reduce_mean", {"X": ["sq"]}, {"Out": ["loss"]},
           {"dim": [], "keep_dim": False, "reduce_all": True, "in_dtype": -1, "out_dtype": -1},
           role=256)
    add_op(b, "fill_constant", {}, {"Out": ["loss@GRAD"]},
           {"shape": Longs([]), "value": 1.0, "str_value": "1.0", "dtype": 5,
            "force_cpu": False, "place_type": -1}, role=257)
    add_op(b, "reduce_mean_grad", {"X": ["sq"], "Out@GRAD": ["loss@GRAD"]},
           {"X@GRAD": ["sq@GRAD"]},
           {"dim": [], "keep_dim": False, "reduce_all": True, "in_dtype": -1, "out_dtype": -1},
           role=1)
    add_op(b, "square_grad", {"X": ["d"], "Out@GRAD": ["sq@GRAD"]}, {"X@GRAD": ["d@GRAD"]},
           role=1)
    add_op(b, "elementwise_sub_grad", {"X": ["z"], "Y": ["y"], "Out@GRAD": ["d@GRAD"]},
           {"X@GRAD": ["z@GRAD"], "Y@GRAD": []}, {"axis": -1}, role=1)
    add_op(b, "elementwise_add_grad", {"X": ["h"], "Y": ["b"], "Out@GRAD": ["z@GRAD"]},
           {"X@GRAD": ["h@GRAD"], "Y@GRAD": ["b@GRAD"]},
           {"axis": -1, "op_role_var": ["b", "b@GRAD"]}, role=1)
    add_op(b, "matmul_v2_grad", {"X": ["x"], "Y": ["w"], "Out@GRAD": ["h@GRAD"]},
           {"X@GRAD": [], "Y@GRAD": ["w@GRAD"]},
           {"trans_x": False, "trans_y": False, "op_role_var": ["w", "w@GRAD"]}, role=1)
    for p in ("b", "w"):
        add_op(b, "adam",
               {"Param": [p], "Grad": [p + "@GRAD"], "LearningRate": ["learning_rate_0"],
                "Moment1": [p + "_moment1_0"], "Moment2": [p + "_moment2_0"],
                "Beta1Pow": [p + "_beta1_pow_acc_0"], "Beta2Pow": [p + "_beta2_pow_acc_0"],
                "MasterParam": [], "SkipUpdate": [], "Beta1Tensor": [], "Beta2Tensor": [],
                "EpsilonTensor": []},
               {"ParamOut": [p], "Moment1Out": [p + "_moment1_0"],
                "Moment2Out": [p + "_moment2_0"], "Beta1PowOut": [p + "_beta1_pow_acc_0"],
                "Beta2PowOut": [p + "_beta2_pow_acc_0"], "MasterParamOut": []},
               {"beta1": beta1, "beta2": beta2, "epsilon": eps, "lazy_mode": False,
                "min_row_size_to_use_multithread": Long(1000), "multi_precision": False,
                "use_global_beta_pow": False, "op_role_var": [p, p + "@GRAD"]}, role=2)
    return msg.SerializeToString()


def _adam_reference(state, batches, lr, beta1=0.9, beta2=0.999, eps=1e-8):
    s = {k: v.astype(np.float64) for k, v in state.items()}
    for x, y in batches:
        d = x @ s["w"] + s["b"] - y
        g = 2.0 * d / d.size
        grads = {"w": x.T @ g, "b": g.sum(0)}
        for p in ("w", "b"):
            m1 = beta1 * s[p + "_moment1_0"] + (1 - beta1) * grads[p]
            m2 = beta2 * s[p + "_moment2_0"] + (1 - beta2) * grads[p] ** 2
            b1p, b2p = s[p + "_beta1_pow_acc_0"], s[p + "_beta2_pow_acc_0"]
            lr_t = lr * np.sqrt(1 - b2p) / (1 - b1p)
            s[p] = s[p] - lr_t * m1 / (np.sqrt(m2) + eps * np.sqrt(1 - b2p))
            s[p + "_moment1_0"], s[p + "_moment2_0"] = m1, m2
            s[p + "_beta1_pow_acc_0"], s[p + "_beta2_pow_acc_0"] = b1p * beta1, b2p * beta2
    return s


def test_paddle2_training_program_trains_as_numpy(tmp_path):
    path = tmp_path / "model.pdmodel"
    path.write_bytes(_paddle2_training_program())
    program = fluid.io.read_program(str(path))
    types = [op.type for op in program.global_block().ops]
    assert "matmul_grad" in types and "elementwise_add_grad" in types
    assert types.count("adam") == 2
    rng = np.random.default_rng(3)
    state = {"w": rng.standard_normal((4, 3)).astype("float32"),
             "b": rng.standard_normal(3).astype("float32"),
             "learning_rate_0": np.array(0.05, np.float32)}
    for p, shape in [("w", (4, 3)), ("b", (3,))]:
        state[p + "_moment1_0"] = np.zeros(shape, np.float32)
        state[p + "_moment2_0"] = np.zeros(shape, np.float32)
        state[p + "_beta1_pow_acc_0"] = np.array([0.9], np.float32)
        state[p + "_beta2_pow_acc_0"] = np.array([0.999], np.float32)
    batches = [(rng.standard_normal((5, 4)).astype("float32"),
                rng.standard_normal((5, 3)).astype("float32")) for _ in range(3)]
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        for name, arr in state.items():
            scope.var(name).get_tensor().set(arr.copy(), fluid.CPUPlace())
        losses = [float(np.asarray(exe.run(program, feed={"x": x, "y": y},
                                           fetch_list=["loss"])[0]).reshape(()))
                  for x, y in batches]
        got = {n: np.array(scope.find_var(n).get_tensor()) for n in state}
    want = _adam_reference(state, batches, 0.05)
    for name in ("w", "b", "w_moment1_0", "b_moment2_0", "w_beta1_pow_acc_0"):
        np.testing.assert_allclose(got[name].reshape(want[name].shape), want[name],
                                   rtol=2e-5, atol=1e-6, err_msg=name)
    x, y = batches[0]
    np.testing.assert_allclose(losses[0], np.mean((x @ state["w"] + state["b"] - y) ** 2),
                               rtol=1e-5)


def test_paddle2_momentum_l2_decay_and_rescale_grad():
    msg, b = new_program()
    for n in ("p", "g", "v"):
        add_var(b, n, [3], persistable=n != "g")
    add_var(b, "lr", [1], persistable=True)
    add_op(b, "momentum", {"Param": ["p"], "Grad": ["g"], "Velocity": ["v"],
                           "LearningRate": ["lr"], "MasterParam": []},
           {"ParamOut": ["p"], "VelocityOut": ["v"], "MasterParamOut": []},
           {"mu": 0.9, "use_nesterov": False, "regularization_method": "l2_decay",
            "regularization_coeff": 0.01, "multi_precision": False, "rescale_grad": 0.5},
           role=2)
    program = pf.program_from_bytes(msg.SerializeToString(), "momentum.pdmodel")
    p0, v0 = np.array([1.0, -2.0, 3.0], np.float32), np.array([0.1, 0.2, -0.3], np.float32)
    g = np.array([0.5, 0.25, -1.0], np.float32)
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        for n, a in (("p", p0), ("v", v0), ("lr", np.array([0.1], np.float32))):
            scope.var(n).get_tensor().set(a, fluid.CPUPlace())
        fluid.Executor().run(program, feed={"g": g})
        p1 = np.array(scope.find_var("p").get_tensor())
    v1 = 0.9 * v0 + (0.5 * g + 0.01 * p0)
    np.testing.assert_allclose(p1, p0 - 0.1 * v1, rtol=1e-6)


def test_paddle2_adamw_decays_then_adam():
    msg, b = new_program()
    for n in ("p", "m1", "m2"):
        add_var(b, n, [2], persistable=True)
    add_var(b, "g", [2])
    for n in ("b1p", "b2p", "lr"):
        add_var(b, n, [1], persistable=True)
    add_op(b, "adamw", {"Param": ["p"], "Grad": ["g"], "LearningRate": ["lr"],
                        "Moment1": ["m1"], "Moment2": ["m2"], "Beta1Pow": ["b1p"],
                        "Beta2Pow": ["b2p"], "MasterParam": [], "SkipUpdate": []},
           {"ParamOut": ["p"], "Moment1Out": ["m1"], "Moment2Out": ["m2"],
            "Beta1PowOut": ["b1p"], "Beta2PowOut": ["b2p"], "MasterParamOut": []},
           {"beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8, "coeff": 0.1, "lr_ratio": 1.0,
            "with_decay": True, "lazy_mode": False, "multi_precision": False,
            "min_row_size_to_use_multithread": Long(1000)}, role=2)
    program = pf.program_from_bytes(msg.SerializeToString(), "adamw.pdmodel")
    p0, g = np.array([1.0, -2.0], np.float32), np.array([0.3, -0.1], np.float32)
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        init = {"p": p0, "m1": np.zeros(2, np.float32), "m2": np.zeros(2, np.float32),
                "b1p": np.array([0.9], np.float32), "b2p": np.array([0.999], np.float32),
                "lr": np.array([0.01], np.float32)}
        for n, a in init.items():
            scope.var(n).get_tensor().set(a, fluid.CPUPlace())
        fluid.Executor().run(program, feed={"g": g})
        p1 = np.array(scope.find_var("p").get_tensor())
    decayed = p0 * (1 - 0.01 * 0.1)
    m1, m2 = 0.1 * g, 0.001 * g * g
    lr_t = 0.01 * np.sqrt(1 - 0.999) / (1 - 0.9)
    want = decayed - lr_t * m1 / (np.sqrt(m2) + 1e-8 * np.sqrt(1 - 0.999))
    np.testing.assert_allclose(p1, want, rtol=1e-5)


def test_adam_use_global_beta_pow_is_refused():
    msg, b = new_program()
    add_var(b, "p", [2], persistable=True)
    add_op(b, "adam", {"Param": ["p"]}, {"ParamOut": ["p"]}, {"use_global_beta_pow": True})
    with pytest.raises(pf.PaddleFormatError, match=r"g\.pdmodel.*'adam'.*use_global_beta_pow"):
        pf.program_from_bytes(msg.SerializeToString(), "g.pdmodel")


def test_save_inference_model_not_for_deployment_keeps_training_program(tmp_path):
    main, start, loss = _build(fluid.optimizer.Adam(0.05))
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        exe.run(start)
        fluid.io.save_inference_model(str(tmp_path), ["x", "label"], [loss], exe,
                                      main_program=main, export_for_deployment=False)
    state = {v.name: np.array(scope.find_var(v.name).get_tensor())
             for v in main.list_vars() if v.persistable and scope.find_var(v.name) is not None}
    loaded = fluid.io.read_program(str(tmp_path / "__model__.main_program"))
    assert str(loaded) == str(main)
    with fluid.scope_guard(fluid.Scope()):
        fluid.io.load_persistables(exe, str(tmp_path), loaded)
        back = {n: np.array(fluid.global_scope().find_var(n).get_tensor()) for n in state}
    assert all(back[n].tobytes() == state[n].tobytes() for n in state)
    losses_a, params_a = _train(main, state, loss.name)
    losses_b, params_b = _train(loaded, back, loss.name)
    assert losses_a == losses_b
    assert all(params_a[n].tobytes() == params_b[n].tobytes() for n in params_a)


def _paddle2ify(data):
    """Rewrite a fluidlite ProgramDesc the way Paddle 2.x spells the same training program:
    matmul_v2(_grad), flatten_contiguous_range(_grad), batch_norm with MomentumTensor and
    ReserveSpace, the extra inputs Paddle's batch_norm_grad / layer_norm_grad read, 2.x momentum
    slots and attrs, with_quant_attr on every op."""
    from test_paddle2_programs import set_attr
    msg = pf.messages()["ProgramDesc"]()
    msg.ParseFromString(data)
    block = msg.blocks[0]
    add_var(block, "bn.reserve_space", [-1])

    def slot(op, kind, name):
        for v in getattr(op, kind):
            if v.parameter == name:
                return list(v.arguments)
        return []

    for op in block.ops:
        set_attr(op.attrs.add(), "with_quant_attr", False)
        if op.type in ("matmul", "matmul_grad"):
            keep = [a for a in op.attrs if a.name not in ("transpose_X", "transpose_Y", "alpha")]
            del op.attrs[:]
            op.attrs.extend(keep)
            set_attr(op.attrs.add(), "trans_x", False)
            set_attr(op.attrs.add(), "trans_y", False)
            op.type = op.type.replace("matmul", "matmul_v2")
        elif op.type in ("flatten2", "flatten2_grad"):
            keep = [a for a in op.attrs if a.name != "axis"]
            del op.attrs[:]
            op.attrs.extend(keep)
            set_attr(op.attrs.add(), "start_axis", 1)
            set_attr(op.attrs.add(), "stop_axis", -1)
            op.type = op.type.replace("flatten2", "flatten_contiguous_range")
        elif op.type == "batch_norm":
            op.inputs.add(parameter="MomentumTensor")
            op.outputs.add(parameter="ReserveSpace", arguments=["bn.reserve_space"])
            bn_slots = {k: slot(op, "inputs", k) for k in ("Bias", "Mean", "Variance")}
        elif op.type == "batch_norm_grad":
            for k, args in bn_slots.items():
                op.inputs.add(parameter=k, arguments=args)
            op.inputs.add(parameter="ReserveSpace", arguments=["bn.reserve_space"])
        elif op.type == "layer_norm_grad":
            op.inputs.add(parameter="Bias", arguments=["layer_norm_0.b_0"])
        elif op.type == "momentum":
            op.inputs.add(parameter="MasterParam")
            op.outputs.add(parameter="MasterParamOut")
            for k, v in (("regularization_method", ""), ("regularization_coeff", 0.0),
                         ("multi_precision", False), ("rescale_grad", 1.0)):
                set_attr(op.attrs.add(), k, v)
    return msg.SerializeToString()


def test_paddle2_spelled_cnn_training_program_trains_identically():
    main, start = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, start):
        x = fluid.data("x", [-1, 2, 4, 4])
        label = fluid.data("label", [-1, 1], "int64")
        c = fluid.layers.conv2d(x, 3, 3, padding=1)
        bn = fluid.layers.batch_norm(c, act="relu")
        p = fluid.layers.pool2d(bn, 2, pool_stride=2)
        ln = fluid.layers.layer_norm(fluid.layers.flatten(p, 1))
        w = fluid.layers.create_parameter([12, 3], "float32", name="w")
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(
            fluid.layers.matmul(ln, w), label))
        fluid.optimizer.Momentum(0.1, 0.9).minimize(loss)
    data = _paddle2ify(pf.program_to_bytes(main))
    loaded = pf.program_from_bytes(data, "cnn.pdmodel")
    types = {op.type for op in loaded.global_block().ops}
    assert {"flatten2_grad", "matmul_grad", "batch_norm_grad"} <= types
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        exe.run(start)
    state = {v.name: np.array(scope.find_var(v.name).get_tensor())
             for v in main.list_vars() if v.persistable and scope.find_var(v.name) is not None}
    rng = np.random.default_rng(2)
    batches = [{"x": rng.standard_normal((4, 2, 4, 4)).astype("float32"),
                "label": rng.integers(0, 3, (4, 1))} for _ in range(3)]
    results = []
    for program in (main, loaded):
        s = fluid.Scope()
        with fluid.scope_guard(s):
            for n, a in state.items():
                s.var(n).get_tensor().set(a.copy(), fluid.CPUPlace())
            losses = [exe.run(program, feed=f, fetch_list=[loss.name])[0] for f in batches]
            results.append((losses, {n: np.array(s.find_var(n).get_tensor()) for n in state}))
    (la, pa), (lb, pb) = results
    assert [v.tobytes() for v in la] == [v.tobytes() for v in lb]
    for n in pa:
        assert pa[n].tobytes() == pb[n].tobytes(), n
