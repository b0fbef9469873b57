"""The fluid 1.8 model zoo's own code on fluidlite, checked against real PaddlePaddle 2.6.

Runs PaddlePaddle/models at branch release/1.8 (pinned commit ``ZOO_COMMIT``), directory
``PaddleCV/image_classification``, unchanged: its ``models`` package, ``build_model.create_model``
(data, softmax, cross_entropy, accuracy) and ``utils.optimizer.create_optimizer`` (piecewise
decay Momentum with L2 decay) with the arguments of its own ``utils.utility.parse_args``, imported
as ``paddle.fluid`` through ``fluidlite run``'s import hook. The zoo's code is never copied into
this repository: point the runner at a checkout of it.

Per model (one of every file of ``models/``; images of ``SIZES`` pixels, 10 classes, batch 4):

* ``build``: ``train.py``'s ``build_program`` -- the model, loss and optimizer;
* ``zoo_lr``: 5 steps at the zoo's own learning rate (0.1) keep the loss finite;
* ``learn``: 20 steps at ``--lr 0.002`` on one fixed batch bring the loss (the mean of the last
  five) at least 5 % below its start;
* ``round_trip``: ``save_inference_model`` / ``load_inference_model`` into a fresh scope gives
  the same outputs, and ``fluid.save`` / ``fluid.load`` of the training state gives the same
  next step;
* ``paddle_infer`` (with ``FLUIDLITE_PADDLE_PYTHON``): Paddle 2.6 runs the saved inference model
  and gives fluidlite's outputs (rtol 1e-5, atol 1e-5 of the largest output);
* ``paddle_train``: Paddle 2.6 runs fluidlite's saved training program (forward, backward,
  regularization and Momentum ops) for the 20 steps of ``learn`` and gives its losses within
  1e-4 relative, or within 3x the rounding noise both frameworks show on the reversed batch
  (fluidlite's from parameters a few ulps away) by the next step (``paddle_stages``); the
  detail reports how many steps met 1e-4.
* ``paddle_train64``: the same 20 steps with the whole training program in float64
  (``_to_float64``: every float32 variable and dtype attribute, feeds included), in fluidlite
  and in Paddle 2.6 from the same float64 weights; every step's loss within 1e-4 relative.
  Batch norm over four small images turns float32 rounding into 0.1-10 % loss differences
  within a few steps (see ``paddle_train``); in float64 that noise starts at ~1e-15, so this
  stage checks the arithmetic of the whole training step. Some nets are chaotic even in
  float64: fluidlite's own run from parameters a few ulps away departs by 10-10^5x per step
  (the tiny depthwise nets, DARTS, HRNet, Inception, ResNeXt). A step also passes when Paddle
  is no farther from fluidlite than that ulp-perturbed run gets by the next step (a
  systematic difference leads it by many steps); once the ulp run is 1 % away, the two runs
  are unrelated and the rest is reported, not judged. Paddle's avg-pool gradient scales by a
  float32 ``1 / pool_size`` even in float64; fluidlite's run here does the same
  (``_paddle_avg_pool_grad``).

Usage (about 2-4 minutes on an idle 2-core machine; prints a table, writes ``summary.json``)::

    git clone https://github.com/PaddlePaddle/models zoo && git -C zoo checkout ZOO_COMMIT
    FLUIDLITE_PADDLE_PYTHON=/tmp/paddle-venv/bin/python \\
        python -m tests.real.zoo18 zoo [--models ResNet50 VGG11] [--out DIR]

``tests/real/test_zoo18.py`` runs the same when ``FLUIDLITE_ZOO18`` names such a checkout.
``ZOO18_ONLY64=1`` runs the build and the float64 training comparison only.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
ZOO_COMMIT = "b71cf6322ad8bd293c052cbbe45f7a382fcb73ae"     # PaddlePaddle/models release/1.8
ZOO_SUBDIR = os.path.join("PaddleCV", "image_classification")
# one model of every file of models/ (the smallest variant); image side in pixels: 64 where the
# architecture allows it, 224 where it ends in a fixed 7x7 pool
SIZES = {
    "AlexNet": 64, "DARTS_4M": 64, "DarkNet53": 64, "DenseNet121": 64, "DPN68": 224,
    "EfficientNetB0": 64, "FastImageNet": 64, "GoogLeNet": 64, "HRNet_W18_C": 64,
    "InceptionV4": 64, "MobileNetV1_x0_25": 64, "MobileNetV2_x0_25": 64,
    "MobileNetV3_small_x0_25": 64, "Res2Net50_26w_4s": 64, "Res2Net50_vd_26w_4s": 64,
    "ResNet18": 64, "ResNet18_ACNet": 64, "ResNet50_vc": 64, "ResNet18_vd": 64,
    "ResNeXt50_32x4d": 64, "ResNeXt101_32x8d_wsl": 64, "ResNeXt50_vd_32x4d": 64,
    "SE_ResNet18_vd": 64, "SE_ResNeXt50_32x4d": 64, "SE_ResNeXt50_vd_32x4d": 64,
    "ShuffleNetV2_x0_25": 224, "ShuffleNetV2_x0_5_swish": 224, "SqueezeNet1_0": 64,
    "VGG11": 64, "Xception41": 64, "Xception41_deeplab": 64,
}
REVERSED = "@reversed"
FLOAT64 = "@float64"
STAGES = ("build", "zoo_lr", "learn", "round_trip", "paddle_infer", "paddle_train",
          "paddle_train64")
BATCH, CLASSES, STEPS, ZOO_LR_STEPS = 4, 10, 20, 5
LEARN_LR = float(os.environ.get("ZOO18_LR", "0.002"))   # low enough not to thrash
LOSS_RTOL, LATE_RTOL, RTOL, NOISE_FACTOR = 1e-4, 1e-3, 1e-5, 3.0


# -- one model, in its own process (the import hook and the zoo's modules stay in it) ---------
def _zoo_modules(zoo: str) -> Any:
    from fluidlite.paddle_compat.run import PaddleAlias
    sys.meta_path.insert(0, PaddleAlias())
    sys.path.insert(0, os.path.join(zoo, ZOO_SUBDIR))
    import build_model
    import models
    from utils import optimizer, utility
    return models, build_model, optimizer, utility


def _build(mods: Any, model: str, size: int, lr: Optional[float]) -> Dict[str, Any]:
    """``train.py``'s ``build_program(is_train=True)``, plus the test clone taken before the
    optimizer (as its ``build_program(is_train=False)`` would build it)."""
    import paddle.fluid as fluid
    models, build_model, optimizer, utility = mods
    argv = ["train.py", f"--model={model}", f"--class_dim={CLASSES}", f"--batch_size={BATCH}",
            "--image_shape", "3", str(size), str(size)] + ([f"--lr={lr}"] if lr else []) + \
        os.environ.get("ZOO18_ARGS", "").split()
    saved, sys.argv = sys.argv, argv
    try:
        args = utility.parse_args()
    finally:
        sys.argv = saved
    def net(is_test: bool) -> Any:
        if model.startswith("EfficientNet"):
            return models.__dict__[model](
                is_test=is_test, padding_type=args.padding_type, use_se=args.use_se,
                override_params={"drop_connect_rate": args.drop_connect_rate})
        return models.__dict__[model]()
    main, startup, test = fluid.Program(), fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 7
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        _, loss_out = build_model.create_model(net(is_test=False), args, True)
        optimizer.create_optimizer(args).minimize(loss_out[0])
    # train.py builds the test program as a second build_program(is_train=False) on the same
    # startup program, then clones it for test
    with fluid.program_guard(test, startup), fluid.unique_name.guard():
        build_model.create_model(net(is_test=True), args, False)
    test = test.clone(for_test=True)
    # the probabilities: what the (first) cross_entropy reads
    ce = next(op for op in test.global_block().ops if op.type.startswith("cross_entropy"))
    return {"main": main, "startup": startup, "test": test, "loss": loss_out[0],
            "prob": test.global_block().var(ce.input("X")[0])}


def _deterministic(program: Any) -> None:
    """fluidlite's and Paddle's random generators differ, so for the step-by-step comparison
    the training program's random ops are made constant: dropout keeps everything
    (``dropout_prob`` 0, forward and gradient) and EfficientNet's drop-connect draw
    (``uniform_random_batch_size_like``) gives 1 (keep). The inference program is untouched."""
    for op in program.global_block().ops:
        if op.type in ("dropout", "dropout_grad"):
            op._set_attr("dropout_prob", 0.0)
        elif op.type.startswith("uniform_random"):
            op._set_attr("min", 1.0)
            op._set_attr("max", 1.0)


def _to_float64(*programs: Any) -> None:
    """Every float32 variable of ``programs`` (all blocks: piecewise decay's sub-blocks too)
    becomes float64, and so does every float32 ``dtype`` / ``in_dtype`` / ``out_dtype``
    attribute (fill_constant, the random initialisers, casts), so that the parameters, their
    initial values, the learning rate and the Momentum state are all float64 -- in fluidlite
    and in the program Paddle loads. Every float attribute is rounded to float32 first:
    Paddle holds FLOAT attributes (momentum's ``mu``, the L2 coefficient, batch norm's
    epsilon) at 32 bits, fluidlite at 64 (docs/compatibility.md), which in a float64 program
    alone moves the losses by ~1e-8; rounded, both compute with the same constants. Then
    every op's shape inference runs again, so that an output whose dtype the op fixes stays
    what its kernel makes (``accuracy``'s float32 Accuracy, in fluid 1.8 and Paddle 2.6
    alike). Done before anything runs."""
    from fluidlite.core import registry
    from fluidlite.core.dtypes import VarType
    from fluidlite.core.registry import VarSpec
    for program in programs:
        for block in program.blocks:
            for var in block.vars.values():
                if var.dtype == VarType.FP32 and var.dtype is not None:
                    var._set_spec(VarSpec(var.shape, VarType.FP64, var.lod_level))
            for op in block.ops:
                for key, value in list(op.attrs.items()):
                    if isinstance(value, float):
                        op._set_attr(key, float(np.float32(value)))
                for key in ("dtype", "in_dtype", "out_dtype"):
                    value = op.attrs.get(key)
                    if value is not None and not isinstance(value, bool) and \
                            value == VarType.FP32:
                        op._set_attr(key, VarType.FP64)
        for block in program.blocks:
            for op in block.ops:
                if registry.has_op(op.type):
                    block._infer(registry.get_op_def(op.type), op)


def _feeds(size: int) -> Dict[str, np.ndarray]:
    rng = np.random.RandomState(11)
    return {"feed_image": rng.rand(BATCH, 3, size, size).astype("float32"),
            "feed_label": rng.randint(0, CLASSES, (BATCH, 1)).astype("int64")}


def _save(path: str, arr: Any) -> None:
    np.save(path, np.asarray(arr))


def _write(path: str, lines: List[str]) -> None:
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def build_case(zoo: str, model: str, case: str) -> Dict[str, Any]:
    """Run the fluidlite stages of ``model`` and leave in ``case`` what ``paddle_zoo.py run``
    reads (tests/real/paddle_zoo.py): ``infer/`` (``__model__`` + ``__params__``) and its
    ``feed_0.npy``, ``train/ckpt.*`` and its feeds, ``steps.txt``, ``loss_name.txt``,
    ``names.txt``, and fluidlite's outputs and losses."""
    size = SIZES[model]
    os.makedirs(os.path.join(case, "train"), exist_ok=True)
    result: Dict[str, Any] = {"model": model, "size": size}

    def stage(name: str, fn: Any) -> bool:
        t = time.time()
        try:
            detail = fn()
            result[name] = {"ok": True, "detail": detail}
        except Exception as e:
            result[name] = {"ok": False, "detail": f"{type(e).__name__}: {e}"[:2000],
                            "trace": traceback.format_exc()[-3000:]}
        result[name]["seconds"] = round(time.time() - t, 2)
        return result[name]["ok"]

    mods: List[Any] = []
    if not stage("build", lambda: mods.append(_zoo_modules(zoo)) or
                 len(_build(mods[0], model, size, None)["main"].global_block().ops)):
        return result
    import paddle.fluid as fluid
    feeds = _feeds(size)
    if os.environ.get("ZOO18_ONLY64"):      # the float64 comparison alone (about 1/3 the time)
        stage("train64", lambda: _float64_case(mods[0], model, size, feeds, case + FLOAT64))
        return result

    def zoo_lr() -> List[float]:
        b = _build(mods[0], model, size, None)
        exe = fluid.Executor(fluid.CPUPlace())
        with fluid.scope_guard(fluid.Scope()):
            exe.run(b["startup"])
            losses = [float(np.ravel(exe.run(b["main"], feed=feeds, fetch_list=[b["loss"]])[0])[0])
                      for _ in range(ZOO_LR_STEPS)]
        if not np.all(np.isfinite(losses)):
            raise FloatingPointError(f"losses at the zoo's learning rate: {losses}")
        return [round(v, 4) for v in losses]
    stage("zoo_lr", zoo_lr)

    b = _build(mods[0], model, size, LEARN_LR)
    _deterministic(b["main"])
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    with fluid.scope_guard(scope):
        exe.run(b["startup"])
        ckpt = os.path.join(case, "train", "ckpt")
        fluid.save(b["main"], ckpt)
        fluid.io.save_inference_model(os.path.join(case, "infer"), ["feed_image"], [b["prob"]],
                                      exe, b["test"], params_filename="__params__")
        (prob,) = exe.run(b["test"], feed=feeds, fetch_list=[b["prob"]])
        names = [p.name for p in b["main"].all_parameters()]
        losses: List[float] = []

        def learn() -> List[float]:
            for step in range(STEPS):
                (loss,) = exe.run(b["main"], feed=feeds, fetch_list=[b["loss"]])
                _save(os.path.join(case, f"fluidlite_loss_{step}.npy"), loss)
                losses.append(float(np.ravel(loss)[0]))
                if step == 0:       # the parameters after one step, as paddle_zoo.py saves
                    for i, n in enumerate(names):
                        _save(os.path.join(case, f"fluidlite_param_{i}.npy"),
                              scope.find_var(n).get_tensor())
            # falls: by a quarter for most nets within 20 steps; the nets without batch norm
            # (AlexNet) move slower at this rate, so the bar is the last five steps' mean 5 %
            # below the start (a zero or sign-flipped gradient cannot pass it)
            if not np.mean(losses[-5:]) < 0.95 * losses[0]:
                raise AssertionError(f"the loss did not fall 5 % below {losses[0]:.4g}: "
                                     f"{[round(v, 4) for v in losses]}")
            return [round(v, 4) for v in losses]
        stage("learn", learn)

        def noise() -> List[float]:
            """The same steps on the batch in reverse order from parameters moved by a few
            units in the last place: the same mathematics (a mean over the batch, batch
            statistics) summed in another order, from the state another correct float32
            implementation (other GEMM blockings, Winograd against im2col) reaches after its
            first op -- how far float32 rounding alone moves this training run, the noise
            floor the Paddle comparison is held to once it exceeds 1e-4. (Reordering alone
            barely perturbs the nets without batch norm: VGG11's reversed run stayed 1e-5
            from fluidlite's at step 4 while rounding grows 60x a step there, and Paddle was
            8e-3 away; in float64 the two agree to 2e-14 over all 20 steps.)"""
            out = []
            reverse = {k: np.ascontiguousarray(v[::-1]) for k, v in feeds.items()}
            ulps = np.random.RandomState(5)
            with fluid.scope_guard(fluid.Scope()):
                exe.run(b["startup"])
                fluid.load(b["main"], ckpt, exe)
                scope = fluid.global_scope()
                for p in b["main"].all_parameters():
                    t = scope.find_var(p.name).get_tensor()
                    w = np.array(t)
                    moved = w * (1.0 + 4 * np.finfo(w.dtype).eps
                                 * ulps.uniform(-1, 1, w.shape).astype(w.dtype))
                    t.set(moved.astype(w.dtype), fluid.CPUPlace())
                for step in range(STEPS):
                    (loss,) = exe.run(b["main"], feed=reverse, fetch_list=[b["loss"]])
                    _save(os.path.join(case, f"noise_loss_{step}.npy"), loss)
                    out.append(round(float(np.ravel(loss)[0]), 4))
            return out
        stage("noise", noise)

        def round_trip() -> str:
            with fluid.scope_guard(fluid.Scope()):
                program, feed_names, fetches = fluid.io.load_inference_model(
                    os.path.join(case, "infer"), exe, params_filename="__params__")
                (got,) = exe.run(program, feed={feed_names[0]: feeds["feed_image"]},
                                 fetch_list=fetches)
            np.testing.assert_array_equal(got, prob, err_msg="reloaded inference model")
            # the whole training state (parameters, BN statistics, velocities, LR counter)
            state = [v for v in b["main"].list_vars() if fluid.io.is_persistable(v) and
                     scope.find_var(v.name) is not None]
            before = {v.name: np.array(scope.find_var(v.name).get_tensor()) for v in state}
            fluid.save(b["main"], os.path.join(case, "resume"))
            fresh = fluid.Scope()
            with fluid.scope_guard(fresh):
                exe.run(b["startup"])
                fluid.load(b["main"], os.path.join(case, "resume"), exe)
                for n, v in before.items():
                    np.testing.assert_array_equal(np.array(fresh.find_var(n).get_tensor()), v,
                                                  err_msg=f"{n} after fluid.load")
                (again,) = exe.run(b["test"], feed=feeds, fetch_list=[b["prob"]])
            (now,) = exe.run(b["test"], feed=feeds, fetch_list=[b["prob"]])
            np.testing.assert_array_equal(again, now, err_msg="test output after fluid.load")
            return f"{len(fetches)} output(s); {len(before)} persistables restored exactly"
        stage("round_trip", round_trip)
    _save(os.path.join(case, "fluidlite_0.npy"), prob)
    _save(os.path.join(case, "feed_0.npy"), feeds["feed_image"])
    for i, v in enumerate(feeds.values()):
        _save(os.path.join(case, "train", f"feed_{i}.npy"), v)
    _write(os.path.join(case, "train_feeds.txt"), list(feeds))
    _write(os.path.join(case, "steps.txt"), [str(STEPS)])
    _write(os.path.join(case, "loss_name.txt"), [b["loss"].name])
    _write(os.path.join(case, "names.txt"), names)
    _reversed_case(case, feeds)
    if result.get("learn", {}).get("ok"):
        stage("train64", lambda: _float64_case(mods[0], model, size, feeds, case + FLOAT64))
    return result


@contextlib.contextmanager
def _paddle_avg_pool_grad() -> Iterator[None]:
    """fluidlite's float64 avg-pool gradient with Paddle's rounding, for the float64 stage only.

    Paddle's CPU pooling gradient (``Pool2dGradFunctor``, operators/math/pooling.cc, kept in
    2.6) spreads dOut with ``float scale = 1.0 / pool_size``: 1/9 or 1/49 rounded to float32
    even in a float64 program, 2-3e-8 relative (fluidlite's gradient is the exact transpose of
    the average). DARTS and Res2Net have dozens of 3x3 average pools, and that alone takes
    their float64 runs 1e-4 apart within 5 steps; with this the stage compares the rest of the
    arithmetic. Here fluidlite divides by ``1 / float32(1 / n)`` instead of ``n``.
    """
    from fluidlite.ops import pool
    counts, bwd = pool._counts, pool._pool_bwd

    def paddle_counts(g: Any, exclusive: bool, dtype: np.dtype) -> np.ndarray:
        n = counts(g, exclusive, np.dtype(np.float64))
        with np.errstate(divide="ignore"):
            return (1.0 / (1.0 / n).astype(np.float32).astype(np.float64)).astype(dtype)

    def paddle_bwd(*args: Any) -> np.ndarray:
        pool._counts = paddle_counts
        try:
            return bwd(*args)
        finally:
            pool._counts = counts

    pool._pool_bwd = paddle_bwd
    try:
        yield
    finally:
        pool._pool_bwd = bwd


def _float64_case(mods: Any, model: str, size: int, feeds: Dict[str, np.ndarray],
                  case: str) -> List[float]:
    """``<case>@float64``: the ``learn`` steps with the training program in float64
    (``_to_float64``), fluidlite's losses saved, and what ``paddle_zoo.py run`` trains from the
    same float64 checkpoint (no ``infer/``: only its training half runs)."""
    import paddle.fluid as fluid
    os.makedirs(os.path.join(case, "train"), exist_ok=True)
    b = _build(mods, model, size, LEARN_LR)
    _deterministic(b["main"])
    _to_float64(b["main"], b["startup"])
    feeds64 = {k: v.astype(np.float64) if v.dtype == np.float32 else v for k, v in feeds.items()}
    exe = fluid.Executor(fluid.CPUPlace())
    losses = []
    ckpt = os.path.join(case, "train", "ckpt")
    with _paddle_avg_pool_grad(), fluid.scope_guard(fluid.Scope()):
        exe.run(b["startup"])
        fluid.save(b["main"], ckpt)
        for step in range(STEPS):
            (loss,) = exe.run(b["main"], feed=feeds64, fetch_list=[b["loss"]])
            if loss.dtype != np.float64:
                raise AssertionError(f"the float64 program's loss came back {loss.dtype}")
            _save(os.path.join(case, f"fluidlite_loss_{step}.npy"), loss)
            losses.append(float(np.ravel(loss)[0]))
    # float64 rounding's own envelope: the same steps on the batch in reverse order from
    # parameters moved by a few units in the last place -- what another correct float64
    # implementation (other GEMM blockings, other summation orders) starts every op with;
    # chaotic training runs (the tiny depthwise and dual-path nets) grow it ~10x per step
    reverse = {k: np.ascontiguousarray(v[::-1]) for k, v in feeds64.items()}
    ulps = np.random.RandomState(5)
    with _paddle_avg_pool_grad(), fluid.scope_guard(fluid.Scope()):
        exe.run(b["startup"])
        fluid.load(b["main"], ckpt, exe)
        scope = fluid.global_scope()
        for p in b["main"].all_parameters():
            t = scope.find_var(p.name).get_tensor()
            w = np.array(t)
            t.set(w * (1.0 + 4 * np.finfo(np.float64).eps * ulps.uniform(-1, 1, w.shape)),
                  fluid.CPUPlace())
        for step in range(STEPS):
            (loss,) = exe.run(b["main"], feed=reverse, fetch_list=[b["loss"]])
            _save(os.path.join(case, f"noise_loss_{step}.npy"), loss)
    for i, v in enumerate(feeds64.values()):
        _save(os.path.join(case, "train", f"feed_{i}.npy"), v)
    _write(os.path.join(case, "train_feeds.txt"), list(feeds64))
    _write(os.path.join(case, "steps.txt"), [str(STEPS)])
    _write(os.path.join(case, "loss_name.txt"), [b["loss"].name])
    _write(os.path.join(case, "names.txt"), [p.name for p in b["main"].all_parameters()])
    return [round(v, 6) for v in losses]


def _reversed_case(case: str, feeds: Dict[str, np.ndarray]) -> None:
    """``<case>@reversed``: the same training case on the batch in reverse order, which
    ``paddle_zoo.py run`` trains as well -- Paddle's own sensitivity to the summation order,
    the other half of the rounding-noise floor (``paddle_stages``)."""
    rev = case + REVERSED
    os.makedirs(os.path.join(rev, "train"), exist_ok=True)
    for name in os.listdir(os.path.join(case, "train")):
        if name.startswith("ckpt."):
            shutil.copyfile(os.path.join(case, "train", name), os.path.join(rev, "train", name))
    for i, v in enumerate(feeds.values()):
        _save(os.path.join(rev, "train", f"feed_{i}.npy"), v[::-1])
    for name in ("train_feeds.txt", "steps.txt", "loss_name.txt", "names.txt"):
        shutil.copyfile(os.path.join(case, name), os.path.join(rev, name))


# -- Paddle's side and the verdicts -----------------------------------------------------------
def paddle_stages(case: str, result: Dict[str, Any]) -> None:
    """Fill ``paddle_infer`` / ``paddle_train`` from what ``paddle_zoo.py run`` left in
    ``case``."""
    def verdict(name: str, check: Any) -> None:
        err = os.path.join(case, f"error_{name.split('_')[1]}.txt")
        if os.path.exists(err):
            with open(err) as f:
                result[name] = {"ok": False, "detail": f.read()[-1500:]}
            return
        try:
            result[name] = {"ok": True, "detail": check()}
        except (AssertionError, OSError) as e:
            result[name] = {"ok": False, "detail": str(e)[:1500]}

    def infer() -> str:
        got = np.load(os.path.join(case, "paddle_0.npy"))
        want = np.load(os.path.join(case, "fluidlite_0.npy"))
        scale = float(np.max(np.abs(want))) or 1.0      # probabilities: at most 1
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=RTOL * scale)
        return f"max abs diff {float(np.max(np.abs(got - want))):.2g}"

    def train() -> str:
        """Every step's loss within 1e-4 relative of fluidlite's, or within ``NOISE_FACTOR``
        times the rounding noise of this run up to the next step (and, after the first two
        steps, within 1e-3 when that is larger): how far reversing the batch -- the same
        mathematics summed in another order -- moves fluidlite's run and Paddle's own. Batch
        norm over four small images is ill-conditioned: reordering alone moves some nets'
        losses by 0.1-10 % within two steps (MobileNetV2: 3e-5 at step 1, 7e-2 at step 2), so
        1e-4 is only meaningful where the runs themselves are that stable; as in the float64
        stage, a lead of one step over that noise is rounding's own growth (the float64 stage
        checks the arithmetic itself)."""
        rows, noise = [], []
        rev = case + REVERSED
        for step in range(STEPS):
            p, f, n = (float(np.ravel(np.load(os.path.join(case, f"{who}_loss_{step}.npy")))[0])
                       for who in ("paddle", "fluidlite", "noise"))
            scale = max(abs(f), 1e-6)
            moved = abs(n - f) / scale
            p_rev = os.path.join(rev, f"paddle_loss_{step}.npy")
            if os.path.exists(p_rev):
                moved = max(moved, abs(float(np.ravel(np.load(p_rev))[0]) - p) / scale)
            rows.append((p, f, n))
            noise.append(moved)
        strict, bad, worst = 0, [], 0.0
        for step, (p, f, n) in enumerate(rows):
            rel = abs(p - f) / max(abs(f), 1e-6)
            worst = max(worst, rel)
            envelope = max(noise[:step + 2])
            if abs(p - f) <= LOSS_RTOL * abs(f) + 1e-6:
                strict += 1
            elif rel > NOISE_FACTOR * envelope and (step < 2 or rel > LATE_RTOL):
                bad.append(f"step {step}: Paddle {p:.6g}, fluidlite {f:.6g}, "
                           f"fluidlite on the reversed batch from ulps away {n:.6g}")
        if bad:
            raise AssertionError("; ".join(bad))
        return (f"{strict}/{STEPS} steps within 1e-4, worst {worst:.2g} (the reversed batch "
                f"from ulps away moves fluidlite's own run by up to {max(noise):.2g})")

    def train64() -> str:
        """Every float64 step within 1e-4 relative (1e-6 absolute near 0), or, once float64
        rounding has grown chaotically, no farther from fluidlite than fluidlite's own run
        from parameters a few ulps away (``noise_loss_*``) gets by the next step: in the
        chaotic nets both differences grow alike from ~1e-14, by 10 to 10^5 a step
        (ResNeXt50_vd: Paddle 4e-6, 4e-3, 7e-2 at steps 5-7, the ulp run 2e-6, 7e-7, 6e-2),
        so a one-step lead is rounding, while a systematic difference leads by many (DPN68
        before Paddle's avg-pool rounding was emulated: 6e-6 .. 1e-2 against an ulp run that
        stayed below 5e-15)."""
        c64 = case + FLOAT64
        if not result.get("train64", {}).get("ok"):
            raise AssertionError(f"fluidlite's float64 run failed: "
                                 f"{result.get('train64', {}).get('detail')}")
        err = os.path.join(c64, "error_train.txt")
        if os.path.exists(err):
            with open(err) as f:
                raise AssertionError(f"Paddle's float64 run failed: {f.read()[-1500:]}")
        rel, noise, losses = [], [], []
        for step in range(STEPS):
            p, f, n = (float(np.ravel(np.load(os.path.join(c64, f"{who}_loss_{step}.npy")))[0])
                       for who in ("paddle", "fluidlite", "noise"))
            scale = max(abs(f), 1e-6)
            rel.append(abs(p - f) / scale)
            noise.append(abs(n - f) / scale)
            losses.append((p, f))
        # judged until the ulp run is 1 % away: from there on the two runs are unrelated
        judged = next((s for s, v in enumerate(noise) if v > 1e-2), STEPS)
        for step in range(judged):
            envelope = max(noise[:step + 2])
            if rel[step] > max(LOSS_RTOL, envelope):
                p, f = losses[step]
                raise AssertionError(
                    f"step {step}: Paddle {p:.9g}, fluidlite {f:.9g} (relative "
                    f"{rel[step]:.2g}) while float64 rounding moves the run by {envelope:.2g} "
                    f"at most by step {min(step + 1, STEPS - 1)}")
        strict = next((s for s, v in enumerate(rel) if v > LOSS_RTOL), STEPS)
        tail = "" if strict == STEPS else (
            f"; then within float64 rounding's own growth (the ulp-perturbed run: "
            f"{noise[strict]:.2g} at step {strict}, up to {max(noise):.2g}; Paddle: "
            f"{rel[strict]:.2g}, up to {max(rel):.2g})")
        return (f"steps 0-{strict - 1} within 1e-4 (worst {max(rel[:strict] or [0.0]):.2g})"
                f"{tail}")

    if result.get("learn", {}).get("ok") is not None:
        verdict("paddle_infer", infer)
        verdict("paddle_train", train)
    if "train64" in result:
        verdict("paddle_train64", train64)


def run_workers(module: str, zoo: str, models: List[str], out: str, timeout: float,
                env: Optional[Dict[str, str]] = None) -> Dict[str, Dict[str, Any]]:
    """``python -m <module> --worker MODEL CASE ZOO`` for every model, each in a process of
    its own (the import hook and the zoo's modules stay there); its ``result.json``, or a
    failed ``build`` stage naming the crash or the timeout."""
    results: Dict[str, Dict[str, Any]] = {}
    for i, model in enumerate(models):
        case = os.path.join(out, model)
        os.makedirs(case, exist_ok=True)
        sys.stderr.write(f"[{i + 1}/{len(models)}] {model}\n")
        cmd = [sys.executable, "-m", module, "--worker", model, case, zoo]
        try:
            proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True,
                                  timeout=timeout, env=env)
            failure = None if proc.returncode == 0 else proc.stderr[-2000:]
        except subprocess.TimeoutExpired:
            failure = f"timed out after {timeout} s"
        path = os.path.join(case, "result.json")
        if failure is None and os.path.exists(path):
            with open(path) as f:
                results[model] = json.load(f)
        else:
            results[model] = {"model": model, "build": {"ok": False, "detail": failure}}
    return results


def run(zoo: str, models: List[str], out: str, paddle: Optional[str],
        timeout: float = 1800) -> Dict[str, Dict[str, Any]]:
    """Every model in a worker process of its own, then Paddle over all cases."""
    results = run_workers("tests.real.zoo18", zoo, models, out, timeout)
    if paddle:
        sys.stderr.write("Paddle 2.6: inference and training of the saved programs\n")
        proc = subprocess.run([paddle, os.path.join(HERE, "paddle_zoo.py"), "run", out],
                              capture_output=True, text=True, timeout=timeout * 2,
                              env=dict(os.environ, GLOG_minloglevel="2"))
        if proc.returncode != 0:
            raise RuntimeError(f"paddle_zoo.py failed:\n{proc.stderr[-3000:]}")
        for model, result in results.items():
            if "learn" in result or "train64" in result:
                paddle_stages(os.path.join(out, model), result)
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(results, f, indent=1)
    return results


def table(results: Dict[str, Dict[str, Any]], stages: Sequence[str] = STAGES) -> str:
    """A markdown table model x stage (ok / FAIL / - not reached / n/a: a stage a harness marks
    ``{"na": reason}`` as not applicable) with a "passed" row (out of the applicable)."""
    rows = ["| model | " + " | ".join(stages) + " |", "|---" * (len(stages) + 1) + "|"]
    for model, r in results.items():
        cells = ["n/a" if r.get(s, {}).get("na") else
                 "ok" if r.get(s, {}).get("ok") else ("FAIL" if s in r else "-")
                 for s in stages]
        rows.append(f"| {model} | " + " | ".join(cells) + " |")
    passed = {s: sum(1 for r in results.values() if r.get(s, {}).get("ok")) for s in stages}
    applicable = {s: sum(1 for r in results.values() if not r.get(s, {}).get("na"))
                  for s in stages}
    rows.append("| passed | " + " | ".join(f"{passed[s]}/{applicable[s]}" for s in stages) +
                " |")
    return "\n".join(rows)


def failures(results: Dict[str, Dict[str, Any]], stages: Sequence[str] = STAGES) -> str:
    """One line per failed (or not applicable: ``na``) stage of every case."""
    lines = []
    for name, r in results.items():
        for s in stages:
            if s in r and not r[s]["ok"]:
                why = r[s].get("na") or r[s].get("detail")
                lines.append(f"{name} {s}{' n/a' if r[s].get('na') else ''}: {str(why)[:300]}\n")
    return "".join(lines)


def cli(argv: List[str], *, doc: str, names: Sequence[str], needs: str, prefix: str,
        worker: Callable[[str, str, str], Dict[str, Any]],
        run_all: Callable[[str, List[str], str], Dict[str, Dict[str, Any]]],
        report: Callable[[Dict[str, Dict[str, Any]]], str],
        rescore: Optional[Callable[[str, Dict[str, Any]], None]] = None) -> int:
    """The command line the zoo harnesses share: ``--worker NAME CASE ZOO`` runs one case (in
    the process ``run_workers`` starts) into ``CASE/result.json``; ``--rescore DIR`` gives a
    finished run's verdicts again (for harnesses with a ``rescore`` step); otherwise ``ZOO
    [--models ...] [--out DIR]`` runs the cases (``ZOO`` must contain ``needs``) and prints
    ``report`` (the table and the failures) and where the cases went."""
    if argv[:1] == ["--worker"]:
        name, case, zoo = argv[1:4]
        result = worker(os.path.abspath(zoo), name, case)
        with open(os.path.join(case, "result.json"), "w") as f:
            json.dump(result, f, indent=1)
        return 0
    if rescore is not None and argv[:1] == ["--rescore"]:
        with open(os.path.join(argv[1], "summary.json")) as f:
            results = json.load(f)
        for name, result in results.items():
            rescore(os.path.join(argv[1], name), result)
        sys.stdout.write(report(results))
        return 0
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("zoo", help="a checkout of PaddlePaddle/models at release/1.8")
    ap.add_argument("--models", nargs="+", default=list(names), choices=list(names))
    ap.add_argument("--out", help="where the cases go (default: a new temporary directory)")
    a = ap.parse_args(argv)
    if not os.path.isdir(os.path.join(a.zoo, needs)):
        ap.error(f"'{a.zoo}' has no {needs}: check out PaddlePaddle/models at {ZOO_COMMIT}")
    out = a.out or tempfile.mkdtemp(prefix=prefix)
    results = run_all(os.path.abspath(a.zoo), a.models, out)
    sys.stdout.write(report(results) + f"cases and summary.json in {out}\n")
    return 0


def main(argv: List[str]) -> int:
    return cli(argv, doc=__doc__, names=sorted(SIZES),
               needs=os.path.join(ZOO_SUBDIR, "models"), prefix="zoo18-",
               worker=lambda zoo, model, case: build_case(zoo, model, case),
               run_all=lambda zoo, models, out: run(
                   zoo, models, out, os.environ.get("FLUIDLITE_PADDLE_PYTHON")),
               report=lambda results: table(results) + "\n" + failures(results),
               rescore=paddle_stages)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
