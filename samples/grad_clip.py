"""Gradient clipping attached to an optimizer (the fluid 1.8 GradientClipByValue example).

A softmax classifier (fc + cross entropy) on unscaled inputs in [-100, 100], trained with SGD
whose gradients are clipped to [-1, 1] -- only for the weight ``fc_0.w_0`` (``need_clip``), the
bias gradient passes untouched. Prints what the clip inserted into the program, then per step
the loss and the global gradient norm before and after clipping. Writes those curves (and the
batch accuracy) as a PNG through ``_common.plot_curves`` (needs matplotlib:
``pip install "fluidlite[plot]"``), by default ``grad_clip_curves.png`` in the samples' output
folder (``--out``, else $FLUIDLITE_SAMPLES_OUT, else ./samples_out).

Run: python samples/grad_clip.py [--out DIR] [--curves FILE.png]
"""
import argparse
import os
import sys
from typing import Optional

import numpy as np

import fluidlite as fluid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import add_out_argument, out_dir, plot_curves  # noqa: E402


def build():
    main_prog, startup_prog = fluid.Program(), fluid.Program()
    main_prog.random_seed = startup_prog.random_seed = 1
    with fluid.program_guard(main_program=main_prog, startup_program=startup_prog):
        image = fluid.data(name="x", shape=[-1, 2], dtype="float32")
        label = fluid.data(name="label", shape=[-1, 1], dtype="int64")
        logits = fluid.layers.fc(input=image, size=3)      # parameters fc_0.w_0, fc_0.b_0
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, label))

        def fileter_func(param):
            return param.name == "fc_0.w_0"

        clip = fluid.clip.GradientClipByValue(min=-1, max=1, need_clip=fileter_func)
        sgd_optimizer = fluid.optimizer.SGDOptimizer(learning_rate=0.05, grad_clip=clip)
        _, params_grads = sgd_optimizer.minimize(loss)
    return main_prog, startup_prog, loss, params_grads, logits


def data(rng, n=32):
    """Three classes by the sign pattern of a linear score (unscaled features)."""
    x = rng.uniform(-100, 100, (n, 2)).astype("float32")
    score = x[:, 0] - 0.5 * x[:, 1]
    y = np.digitize(score, [-40.0, 40.0]).astype("int64").reshape(-1, 1)
    return x, y


def main(curves: Optional[str] = None) -> None:
    """Train 15 steps; ``curves``: where to write the PNG (None or '' for none)."""
    main_prog, startup_prog, loss, params_grads, logits = build()
    block = main_prog.global_block()

    print("ops the clip inserted (name_scope /gradient_clip/):")
    for op in block.ops:
        if "gradient_clip" in op.attr("op_namescope"):
            print(f"  {op.type}(X={op.input('X')}) -> {op.output('Out')}  "
                  f"min={op.attr('min')} max={op.attr('max')} op_role={op.attr('op_role')}")
    update_grad = {op.input("Param")[0]: op.input("Grad")[0] for op in block.ops
                   if op.type == "sgd"}
    print("gradients the SGD updates read:")
    for p, g in sorted(update_grad.items()):
        print(f"  {p} <- {g}")

    raw = [g.name for _, g in params_grads]            # the unclipped X@GRAD, still fetchable
    used = [update_grad[p.name] for p, _ in params_grads]
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup_prog)
    rng = np.random.default_rng(0)
    print("\nstep   loss      |g| before clip   |g| after clip")
    history = {"loss": [], "acc": [], "norm_before": [], "norm_after": []}
    for step in range(15):
        x, y = data(rng)
        out = exe.run(main_prog, feed={"x": x, "label": y},
                      fetch_list=[loss, logits] + raw + used)
        loss_v, logits_v, grads = out[0], out[1], out[2:]
        before = np.sqrt(sum(float((g ** 2).sum()) for g in grads[:len(raw)]))
        after = np.sqrt(sum(float((g ** 2).sum()) for g in grads[len(raw):]))
        print(f"{step:4d}  {loss_v[0]:8.4f}   {before:14.4f}   {after:14.4f}")
        history["loss"].append(float(loss_v[0]))
        history["acc"].append(float((logits_v.argmax(1) == y[:, 0]).mean()))
        history["norm_before"].append(float(before))
        history["norm_after"].append(float(after))
    # clip by value has no norm threshold: the norm panel draws no dashed line
    if curves and plot_curves(curves, history, "fc + GradientClipByValue(-1, 1) on fc_0.w_0"):
        print(f"training curves: {curves}")


if __name__ == "__main__":
    # parse_known_args: tests run this file in-process, with pytest's own argv
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    add_out_argument(ap)
    ap.add_argument("--curves", help="PNG of the training curves (default: grad_clip_curves.png "
                    "in the output folder; '' for none)")
    args = ap.parse_known_args()[0]
    main(os.path.join(out_dir(args.out), "grad_clip_curves.png") if args.curves is None
         else args.curves)
