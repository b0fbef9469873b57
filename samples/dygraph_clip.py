"""The fluid 1.8 ``GradientClipByValue`` dygraph example, trained for a few steps.

``Linear(10, 10)`` on uniform inputs, loss ``reduce_mean(out)`` (fluid 1.8's documented
example, verbatim up to the training loop), SGD (lr 0.1) with ``GradientClipByValue(min=-1, max=1)``. The inputs are
scaled by 50 here so that some gradients exceed the clip range. Per step it prints the loss,
the largest gradient before clipping, the largest clipped gradient (what the clip object returns
for the same ``(param, grad)`` pairs) and checks that SGD moved each weight by exactly
``-0.1 * clip(grad, -1, 1)``. Writes the training curves (loss, global gradient norm before and
after the clip) as a PNG through ``_common.plot_curves`` (needs matplotlib:
``pip install "fluidlite[plot]"``), by default ``dygraph_clip_curves.png`` in the samples' output
folder (``--out``, else $FLUIDLITE_SAMPLES_OUT, else ./samples_out).

Run: python samples/dygraph_clip.py [--out DIR] [--curves FILE.png]
"""
import argparse
import os
import sys

import numpy as np

import fluidlite as fluid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import add_out_argument, out_dir, plot_curves  # noqa: E402

# parse_known_args: the sample is also run in-process by tests, whose argv is pytest's own
ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
add_out_argument(ap)
ap.add_argument("--curves", help="PNG of the training curves (default: "
                "dygraph_clip_curves.png in the output folder; '' for none)")
args, _ = ap.parse_known_args()
if args.curves is None:
    args.curves = os.path.join(out_dir(args.out), "dygraph_clip_curves.png")
history = {"loss": [], "norm_before": [], "norm_after": []}

with fluid.dygraph.guard():
    fluid.default_main_program().random_seed = 1          # same numbers on every run
    linear = fluid.dygraph.Linear(10, 10)     # trainable parameters: linear_0.w_0, linear_0.b_0
    clip = fluid.clip.GradientClipByValue(min=-1, max=1)
    sgd_optimizer = fluid.optimizer.SGD(
        learning_rate=0.1, parameter_list=linear.parameters(), grad_clip=clip)
    print("parameters:", [p.name for p in linear.parameters()])
    for step in range(5):
        inputs = fluid.layers.uniform_random([32, 10]).astype('float32') * 50
        out = linear(fluid.dygraph.to_variable(inputs))
        loss = fluid.layers.reduce_mean(out * out)
        loss.backward()
        before = {p.name: p.numpy().copy() for p in linear.parameters()}
        grads = [(p, p.grad) for p in linear.parameters()]
        clipped = clip(grads)                    # the same object the optimizer applies
        gmax = max(float(np.abs(g.numpy()).max()) for _, g in grads)
        cmax = max(float(np.abs(g.numpy()).max()) for _, g in clipped)
        sgd_optimizer.minimize(loss)
        for p, g in grads:
            expected = before[p.name] - np.float32(0.1) * np.clip(g.numpy(), -1, 1)
            assert np.array_equal(p.numpy(), expected), p.name
        linear.clear_gradients()
        history["loss"].append(float(loss))
        history["norm_before"].append(
            float(np.sqrt(sum(float((g.numpy() ** 2).sum()) for _, g in grads))))
        history["norm_after"].append(
            float(np.sqrt(sum(float((g.numpy() ** 2).sum()) for _, g in clipped))))
        print(f"step {step}: loss {float(loss):10.4f}   max |grad| before clip {gmax:9.4f}"
              f"   after clip {cmax:.4f}")
    print("every update was exactly -0.1 * clip(grad, -1, 1)")

# GradientClipByValue has no norm threshold, so the norm panel has no dashed line
title = "dygraph Linear + GradientClipByValue(-1, 1)"
if args.curves and plot_curves(args.curves, history, title):
    print(f"training curves: {args.curves}")
