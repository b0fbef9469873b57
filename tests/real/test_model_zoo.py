"""fluid 1.8 model-zoo networks against the real PaddlePaddle 2.6, both directions (issue 29).

* Paddle -> fluidlite: paddle_zoo.py (run with ``FLUIDLITE_PADDLE_PYTHON``) builds ResNet,
  MobileNet v1, the text CNN and word2vec in Paddle 2.6's static API and saves them with
  ``paddle.static.save_inference_model``; fluidlite loads each and reproduces Paddle's outputs
  (within 1e-5 of each element or of the output's largest magnitude: ``_close``) on the saved
  feed and on a second feed of another batch size -- and, for the CNNs, another image size,
  their input being declared [-1, 3, -1, -1].
* fluidlite -> Paddle: the networks of zoo_nets.py (fluid 1.x code after the zoo's: ResNet,
  MobileNet, text CNN, LSTM classifier, word2vec, a GRU encoder-decoder whose prediction is
  a greedy While decoding) are built, trained two steps with the zoo's optimizers and saved
  by fluidlite (``save_inference_model`` and ``fluid.save``); Paddle runs the inference model
  and twenty more steps of the whole training program (forward, backward -- cross_entropy2's
  grad as Paddle's cross_entropy_grad2, lstm_grad and gru_grad with the inputs Paddle reads
  -- and optimizer ops) and must give fluidlite's outputs, the twenty losses (rtol 1e-4) and
  the parameters after the first step (rtol 1e-5) and the last.

Skips with the reason when ``FLUIDLITE_PADDLE_PYTHON`` is unset (.ci/run sets it to
/tmp/paddle-venv/bin/python). The whole module takes 30-60 s on a busy 2-core machine (the
fluidlite -> Paddle half, which trains the six networks, is marked slow):

    FLUIDLITE_PADDLE_PYTHON=/tmp/paddle-venv/bin/python python -m pytest -q tests/real
"""
import json
import os
import subprocess
from typing import Any, Dict

import numpy as np
import pytest

import fluidlite as fluid

from . import zoo_nets

HERE = os.path.dirname(os.path.abspath(__file__))
RTOL, ATOL = 1e-5, 1e-6
PADDLE_NETS = ("resnet", "mobilenet", "text_cnn", "word2vec")
# training steps compared after the checkpoint (the bar: losses within 1e-4 relative
# per step on the same weights and batch; once a small batch is learned and the loss is a
# hundredth of its first value, the float32 rounding of two implementations decides the rest
# of the trajectory: within LOSS_ATOL of the first step's loss. On an Intel Xeon with NumPy
# 1.23.5's OpenBLAS the ResNet's losses agreed within 1.3e-4 relative for six steps (0.62 to
# 0.0096), then 0.00556 against 0.00585 at step 6 (4.7e-4 of the first loss), 0.6 to 3e-5
# apart after -- the old tolerance, 1e-6 absolute, held on the AMD EPYC machine only)
STEPS, LOSS_RTOL, LOSS_ATOL = 20, 1e-4, 1e-3


def _paddle_python() -> str:
    python = os.environ.get("FLUIDLITE_PADDLE_PYTHON")
    if not python:
        pytest.skip("FLUIDLITE_PADDLE_PYTHON is not set (an interpreter with paddlepaddle 2.6; "
                    ".ci/run makes one in /tmp/paddle-venv)")
    if not os.path.exists(python):
        pytest.skip(f"FLUIDLITE_PADDLE_PYTHON={python!r} does not exist")
    return python


def _paddle(mode: str, path: str) -> None:
    proc = subprocess.run([_paddle_python(), os.path.join(HERE, "paddle_zoo.py"), mode, path],
                          capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, GLOG_minloglevel="2"))
    if proc.returncode != 0 and "No module named 'paddle'" in proc.stderr:
        pytest.skip("FLUIDLITE_PADDLE_PYTHON cannot import paddle")
    assert proc.returncode == 0, f"paddle_zoo.py {mode} failed:\n{proc.stderr[-3000:]}"


def _close(got: Any, want: np.ndarray, what: str) -> None:
    """Within RTOL of each element, or of the output's largest magnitude: fluidlite and Paddle
    are two float32 implementations whose sums run in other orders, so a deep network's small
    outputs carry the absolute error of its large ones (the zoo ResNet's softmax on an Intel
    Xeon, the old and the new code alike: 2.3e-6 off a probability of 0.119, 1.9e-5 of it and
    2.9e-6 of the largest; the peers of bench/inference.py differ by 3e-5 among themselves)."""
    got = np.asarray(got)
    assert got.shape == want.shape, f"{what}: shape {got.shape}, expected {want.shape}"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype}, expected {want.dtype}"
    scale = float(np.max(np.abs(want))) if want.size else 0.0
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=max(ATOL, RTOL * scale),
                               err_msg=what)


def _feed(d: str, stem: str) -> Any:
    arr = np.load(os.path.join(d, f"feed_{stem}.npy"))
    lod = os.path.join(d, f"lod_{stem}.json")
    if os.path.exists(lod):
        with open(lod) as f:
            return fluid.create_lod_tensor(arr, json.load(f), fluid.CPUPlace())
    return arr


# -- Paddle -> fluidlite ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def paddle_zoo(tmp_path_factory) -> str:
    out = str(tmp_path_factory.mktemp("paddle_zoo") / "out")
    _paddle("export", out)
    return out


@pytest.mark.parametrize("feed_set", ["a", "b"])
@pytest.mark.parametrize("net", PADDLE_NETS)
def test_paddle_zoo_model_runs_in_fluidlite(paddle_zoo, net, feed_set):
    d = os.path.join(paddle_zoo, net)
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        exe = fluid.Executor(fluid.CPUPlace())
        program, feed_names, targets = fluid.io.load_inference_model(
            os.path.join(d, "model"), exe)
        feeds = {n: _feed(d, f"{feed_set}_{i}") for i, n in enumerate(feed_names)}
        outs = exe.run(program, feed=feeds, fetch_list=targets)
    for i, got in enumerate(outs):
        _close(got, np.load(os.path.join(d, f"fetch_{feed_set}_{i}.npy")),
               f"{net} feed set {feed_set} fetch {i}")


# -- fluidlite -> Paddle ---------------------------------------------------------------------
def _write(path: str, lines) -> None:
    with open(path, "w") as f:
        f.write("\n".join(lines))


def _save_feeds(d: str, feeds: Dict[str, Any], names) -> None:
    os.makedirs(d, exist_ok=True)
    for i, n in enumerate(names):
        value = feeds[n]
        if isinstance(value, tuple):
            value, lengths = value
            with open(os.path.join(d, f"lod_{i}.json"), "w") as f:
                json.dump(lengths, f)
        np.save(os.path.join(d, f"feed_{i}.npy"), value)


def _lod_feeds(feeds: Dict[str, Any]) -> Dict[str, Any]:
    return {n: fluid.create_lod_tensor(v[0], v[1], fluid.CPUPlace()) if isinstance(v, tuple)
            else v for n, v in feeds.items()}


def _build_case(root: str, net: str) -> None:
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        feed_names, feeds, prob, loss = zoo_nets.NETS[net](fluid, np.random.RandomState(11))
        test = main.clone(for_test=True)
        kind, lr = zoo_nets.OPTIMIZERS[net]
        opt = getattr(fluid.optimizer, kind)
        (opt(lr, 0.9) if kind == "Momentum" else opt(lr)).minimize(loss)
    case = os.path.join(root, net)
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        exe = fluid.Executor(fluid.CPUPlace())
        exe.run(startup)
        for _ in range(2):
            exe.run(main, feed=_lod_feeds(feeds), fetch_list=[loss])
        fluid.save(main, os.path.join(case, "train", "ckpt"))
        # one combined parameter file (tests/test_real_paddle.py covers the other layouts)
        fluid.io.save_inference_model(os.path.join(case, "infer"), feed_names, [prob], exe,
                                      test, params_filename="__params__")
        (out,) = exe.run(test, feed=_lod_feeds(feeds), fetch_list=[prob])
        names = [p.name for p in main.all_parameters()]
        for step in range(STEPS):
            (step_loss,) = exe.run(main, feed=_lod_feeds(feeds), fetch_list=[loss])
            np.save(os.path.join(case, f"fluidlite_loss_{step}.npy"), step_loss)
            stem = "fluidlite_param" if step == 0 else "fluidlite_final"
            for i, n in enumerate(names):
                np.save(os.path.join(case, f"{stem}_{i}.npy"),
                        np.asarray(scope.find_var(n).get_tensor()))
    _save_feeds(case, feeds, feed_names)
    _save_feeds(os.path.join(case, "train"), feeds, list(feeds))
    np.save(os.path.join(case, "fluidlite_0.npy"), out)
    _write(os.path.join(case, "steps.txt"), [str(STEPS)])
    _write(os.path.join(case, "train_feeds.txt"), list(feeds))
    _write(os.path.join(case, "loss_name.txt"), [loss.name])
    _write(os.path.join(case, "names.txt"), names)


@pytest.fixture(scope="module")
def fluidlite_zoo(tmp_path_factory) -> str:
    _paddle_python()
    root = str(tmp_path_factory.mktemp("fluidlite_zoo"))
    for net in zoo_nets.NETS:
        _build_case(root, net)
    _paddle("run", root)
    return root


def _error(case: str, what: str) -> None:
    path = os.path.join(case, f"error_{what}.txt")
    if os.path.exists(path):
        with open(path) as f:
            pytest.fail(f"Paddle could not {what} on {os.path.basename(case)}:\n{f.read()}")


@pytest.mark.slow
@pytest.mark.parametrize("net", sorted(zoo_nets.NETS))
def test_fluidlite_zoo_inference_runs_in_paddle(fluidlite_zoo, net):
    case = os.path.join(fluidlite_zoo, net)
    _error(case, "infer")
    _close(np.load(os.path.join(case, "paddle_0.npy")),
           np.load(os.path.join(case, "fluidlite_0.npy")), f"{net} inference")


@pytest.mark.slow
@pytest.mark.parametrize("net", sorted(zoo_nets.NETS))
def test_fluidlite_zoo_training_program_trains_in_paddle(fluidlite_zoo, net):
    """``STEPS`` steps of fluidlite's saved training program in Paddle's executor give
    fluidlite's losses (rtol 1e-4 per step; 1e-3 of the first loss once the loss nears 0,
    ``LOSS_ATOL``), its parameters after the first step (rtol 1e-5)
    and after the last (rtol 1e-2, atol 1e-2 of the parameter's largest magnitude, at least
    1e-3: a wrong update rule fails the first-step check and this one, while float32 rounding
    differences, which grow over the steps -- to 2e-4 in a ResNet filter whose batch-norm
    channel has a small variance on the AMD EPYC machine; on the Intel Xeon with NumPy 1.23.5,
    where the ResNet's trajectory parts from Paddle's at step 6 once its loss is near 0, to
    3.3e-3 in a batch-norm mean of magnitude up to 8 and 1.9e-3 in one up to 1.3 -- pass).
    Paddle's mean is 0-D where fluid's is [1]."""
    case = os.path.join(fluidlite_zoo, net)
    _error(case, "train")
    first = np.abs(np.load(os.path.join(case, "fluidlite_loss_0.npy"))).max()
    for step in range(STEPS):
        np.testing.assert_allclose(
            np.load(os.path.join(case, f"paddle_loss_{step}.npy")).reshape(-1),
            np.load(os.path.join(case, f"fluidlite_loss_{step}.npy")).reshape(-1),
            rtol=LOSS_RTOL, atol=LOSS_ATOL * first, err_msg=f"{net} step {step}")
    with open(os.path.join(case, "names.txt")) as f:
        names = f.read().split()
    assert names
    for i, n in enumerate(names):
        _close(np.load(os.path.join(case, f"paddle_param_{i}.npy")),
               np.load(os.path.join(case, f"fluidlite_param_{i}.npy")), f"{net}: {n}")
        want = np.load(os.path.join(case, f"paddle_final_{i}.npy"))
        np.testing.assert_allclose(want, np.load(os.path.join(case, f"fluidlite_final_{i}.npy")),
                                   rtol=1e-2, atol=1e-2 * max(0.1, float(np.abs(want).max())),
                                   err_msg=f"{net}: {n} at the end")


# -- no Paddle needed ------------------------------------------------------------------------
@pytest.mark.parametrize("net", sorted(zoo_nets.NETS))
def test_zoo_training_program_round_trips_through_paddle_format(net, caplog):
    """What the writer adds for Paddle (cross_entropy_grad2, lstm_grad's BatchCellPreAct,
    batch_norm's ReserveSpace, STRINGS lists) reads back as the same program, silently."""
    from fluidlite.formats.paddle import program as pf
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        loss = zoo_nets.NETS[net](fluid, np.random.RandomState(0))[3]
        kind, lr = zoo_nets.OPTIMIZERS[net]
        opt = getattr(fluid.optimizer, kind)
        (opt(lr, 0.9) if kind == "Momentum" else opt(lr)).minimize(loss)
    desc = pf.program_to_desc(main)
    types = {od.type for od in desc.blocks[0].ops}
    assert "cross_entropy2_grad" not in types
    if any(op.type == "cross_entropy2" for op in main.global_block().ops):
        assert "cross_entropy_grad2" in types
    with caplog.at_level("WARNING", logger="fluidlite"):
        back = pf.program_from_bytes(pf.program_to_bytes(main))
    assert str(back) == str(main)
    assert not [r for r in caplog.records if r.levelname == "WARNING"]
