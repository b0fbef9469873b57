"""uniform_random, gaussian_random, truncated_gaussian_random: distributions, dtypes, seeding."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.core.registry import get_op_def


def draw(op_type, runs=1, program_seed=0, **attrs):
    prog = fluid.Program()
    prog.random_seed = program_seed
    block = prog.global_block()
    out = block.create_var(name="out")
    block.append_op(op_type, outputs={"Out": out}, attrs=attrs)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    return [exe.run(prog, fetch_list=[out], scope=scope)[0] for _ in range(runs)]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_uniform_random_range_dtype_and_mean(dtype):
    (v,) = draw("uniform_random", shape=[200, 50], min=-0.5, max=1.5, dtype=dtype)
    assert v.shape == (200, 50) and v.dtype == np.dtype(dtype)
    assert v.min() >= -0.5 and v.max() < 1.5
    assert abs(v.mean() - 0.5) < 0.02 and abs(v.std() - 2 / np.sqrt(12)) < 0.02


def test_gaussian_random_moments():
    (v,) = draw("gaussian_random", shape=[400, 50], mean=2.0, std=0.5)
    assert v.dtype == np.float32
    assert abs(v.mean() - 2.0) < 0.01 and abs(v.std() - 0.5) < 0.01


def test_truncated_gaussian_random_stays_within_two_std():
    (v,) = draw("truncated_gaussian_random", shape=[400, 50], mean=1.0, std=0.25)
    assert v.shape == (400, 50) and v.dtype == np.float32
    assert v.min() >= 1.0 - 0.5 - 1e-6 and v.max() <= 1.0 + 0.5 + 1e-6
    # a normal truncated at 2 sigma has std ~0.88 sigma
    assert abs(v.std() / 0.25 - 0.880) < 0.02 and abs(v.mean() - 1.0) < 0.01


@pytest.mark.parametrize("op_type", ["uniform_random", "gaussian_random",
                                     "truncated_gaussian_random"])
def test_seeding(op_type):
    # seed=0: a per-op stream seeded by the program's random_seed; a new draw every run
    a1, a2 = draw(op_type, runs=2, program_seed=3, shape=[64])
    b1, _ = draw(op_type, runs=2, program_seed=3, shape=[64])
    c1, _ = draw(op_type, runs=2, program_seed=4, shape=[64])
    assert a1.tobytes() == b1.tobytes() and a1.tobytes() != a2.tobytes()
    assert a1.tobytes() != c1.tobytes()
    # a fixed seed reseeds every run, as in fluid
    f1, f2 = draw(op_type, runs=2, shape=[64], seed=11)
    assert f1.tobytes() == f2.tobytes()


@pytest.mark.parametrize("op_type", ["uniform_random", "gaussian_random",
                                     "truncated_gaussian_random"])
def test_random_ops_are_declared_non_differentiable(op_type):
    d = get_op_def(op_type)
    assert d.no_grad and not d.differentiable and d.uses_rng


def test_uniform_random_diagonal_init():
    """fluid 1.8's diag_num / diag_step / diag_val: flat elements i * (diag_step + 1) set."""
    (v,) = draw("uniform_random", shape=[3, 4], min=-0.5, max=0.5, diag_num=3, diag_step=4,
                diag_val=7.0)
    flat = np.asarray(v).reshape(-1)
    assert flat[[0, 5, 10]].tolist() == [7.0, 7.0, 7.0]
    assert np.all(np.abs(np.delete(flat, [0, 5, 10])) <= 0.5)
    with pytest.raises(ValueError, match="outside the 12 elements"):
        draw("uniform_random", shape=[3, 4], diag_num=4, diag_step=4)
