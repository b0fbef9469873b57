"""save_dygraph / load_dygraph and optimizer state: a resumed run equals an uninterrupted one."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite import dygraph


def make():
    lin = dygraph.Linear(4, 3)
    opt = fluid.optimizer.Adam(0.01, parameter_list=lin.parameters())
    return lin, opt


def step(lin, opt, seed):
    x = dygraph.to_variable(np.random.RandomState(seed).rand(5, 4).astype("float32"))
    loss = fluid.layers.reduce_mean(lin(x) * lin(x))
    loss.backward()
    opt.minimize(loss)
    lin.clear_gradients()


def test_save_load_resume_matches_uninterrupted(tmp_path):
    with dygraph.guard():
        lin, opt = make()
        init = {k: v.numpy().copy() for k, v in lin.state_dict().items()}
        for s in range(4):
            step(lin, opt, s)
        expected = lin.weight.numpy().copy()
    with dygraph.guard():
        lin, opt = make()
        lin.set_dict(init)
        for s in range(2):
            step(lin, opt, s)
        dygraph.save_dygraph(lin.state_dict(), str(tmp_path / "ck"))
        dygraph.save_dygraph(opt.state_dict(), str(tmp_path / "ck"))
        assert sorted(opt.state_dict()) == sorted(
            f"linear_0.{p}_0_{a}_0" for p in "bw"
            for a in ("beta1_pow_acc", "beta2_pow_acc", "moment1", "moment2"))
    assert (tmp_path / "ck.pdparams").exists() and (tmp_path / "ck.pdopt").exists()
    with dygraph.guard():
        lin, opt = make()
        params, opt_state = dygraph.load_dygraph(str(tmp_path / "ck"))
        assert set(params) == {"weight", "bias"}
        lin.set_dict(params)
        opt.set_dict(opt_state)
        for s in range(2, 4):
            step(lin, opt, s)
        np.testing.assert_array_equal(lin.weight.numpy(), expected)


def test_load_missing_raises(tmp_path):
    with pytest.raises(FileNotFoundError, match="pdparams"):
        dygraph.load_dygraph(str(tmp_path / "nothing"))
