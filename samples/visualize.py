"""See what a static graph is, and what each pass inserted into it.

Builds a small MLP classifier, clones the program, then lets ``Momentum.minimize`` add the
backward pass, a ``GradientClipByGlobalNorm`` clip, L2 weight decay, an exponential LR schedule
and the parameter updates. Writes:

* ``mlp_program.html`` - the interactive viewer (one self-contained file: pan/zoom, regex
  search, click an op or variable for its attributes, slots, shapes and the line of this
  script that created it; show/hide each role; collapse name scopes; ``?`` lists the keys);
* ``mlp_program_static.html`` - the static page: the picture (inline SVG, ops coloured by
  role: forward / loss / backward / gradient clip / regularization / update / LR schedule) plus
  tables of every operator and variable;
* ``mlp_program.svg`` - the picture alone;
* ``mlp_minimize_diff.html`` / ``.svg`` - the program against its clone from before
  ``minimize``: everything ``minimize`` added has a thick green border and a ``+`` (the
  viewer also counts the changes by role and can show only what changed);
* ``mlp_forward.dot`` - the forward part only (``hide_backward`` / ``hide_optimizer``),
  highlighting the first layer's parameters.

Then it trains a few steps to show the program runs. Nothing here needs Graphviz: with it
(``dot`` on PATH, or pygraphviz) Graphviz lays out the pictures, without it fluidlite draws
them with its own layered layout. Only ``--png`` needs Graphviz.

Run: python samples/visualize.py [--out DIR] [--png FILE]
(files go to --out, else $FLUIDLITE_SAMPLES_OUT, else ./samples_out)
(the README picture: python samples/visualize.py --png docs/images/visualize_mlp.png)
"""
import argparse
import os
import sys

import numpy as np

import fluidlite as fluid
import fluidlite.viz as viz

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import add_out_argument, out_dir as samples_out  # noqa: E402


def build():
    main_prog, startup_prog = fluid.Program(), fluid.Program()
    main_prog.random_seed = startup_prog.random_seed = 3
    with fluid.program_guard(main_prog, startup_prog):
        x = fluid.data(name="x", shape=[-1, 4], dtype="float32")
        label = fluid.data(name="label", shape=[-1, 1], dtype="int64")
        with fluid.name_scope("mlp"):
            hidden = fluid.layers.fc(input=x, size=8, act="relu")
            logits = fluid.layers.fc(input=hidden, size=3)
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, label))
        before_minimize = main_prog.clone()
        lr = fluid.layers.exponential_decay(learning_rate=0.1, decay_steps=10, decay_rate=0.9)
        optimizer = fluid.optimizer.Momentum(
            learning_rate=lr, momentum=0.9,
            regularization=fluid.regularizer.L2Decay(1e-4),
            grad_clip=fluid.clip.GradientClipByGlobalNorm(clip_norm=1.0))
        optimizer.minimize(loss)
    return main_prog, startup_prog, before_minimize, loss


def write_views(main_prog, before, out_dir, png=None):
    os.makedirs(out_dir, exist_ok=True)
    written = []
    title = "MLP + GradientClipByGlobalNorm + L2Decay + Momentum"
    written.append(viz.export(main_prog, os.path.join(out_dir, "mlp_program.html"),
                              title=title))
    written.append(viz.export(main_prog, os.path.join(out_dir, "mlp_program_static.html"),
                              format="html-static", title=title))
    diff = viz.diff_graph(before, main_prog, title="what minimize() added")
    written.append(viz.export(diff, os.path.join(out_dir, "mlp_minimize_diff.html")))
    written.append(viz.export(main_prog, os.path.join(out_dir, "mlp_forward.dot"),
                              hide_backward=True, hide_optimizer=True, highlight=r"^fc_0\."))
    # SVG: Graphviz's drawing when it is installed, fluidlite's own otherwise
    written.append(viz.export(main_prog, os.path.join(out_dir, "mlp_program.svg"),
                              title=title))
    written.append(viz.export(diff, os.path.join(out_dir, "mlp_minimize_diff.svg")))
    if png:
        if viz.graphviz_available():
            written.append(viz.export(main_prog, png, title=title, dpi=72))
        else:
            print("note: PNG needs Graphviz (apt-get install graphviz, or pip install "
                  "\"fluidlite[viz]\"); the SVG files were drawn without it")
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_out_argument(parser)
    parser.add_argument("--png", help="also render the program to this PNG file")
    args = parser.parse_args()

    main_prog, startup_prog, before, loss = build()
    for path in write_views(main_prog, before, samples_out(args.out), args.png):
        print("wrote", path)

    summary = viz.diff_graph(before, main_prog)
    added = [d for _, d in summary.nodes(data=True)
             if d["fl_kind"] == "op" and d["fl_diff"] == "added"]
    print(f"\nminimize() added {len(added)} ops:")
    for group in ("backward", "gradient_clip", "regularization", "lr_schedule", "optimize"):
        types = [d["fl_type"] for d in added if d["fl_group"] == group]
        if types:
            print(f"  {group:<15} {len(types):>3}  {', '.join(sorted(set(types)))}")

    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup_prog)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 4)).astype("float32")
    y = (x[:, :3].argmax(axis=1)).astype("int64").reshape(-1, 1)
    print("\ntraining:")
    for step in range(5):
        (value,) = exe.run(main_prog, feed={"x": x, "label": y}, fetch_list=[loss])
        print(f"  step {step}: loss {float(value[0]):.4f}")


if __name__ == "__main__":
    main()
