"""Forward-only MLP classifier: build a fluid 1.x program, initialise it, score a batch.

Run: python samples/mlp_forward.py
"""
import numpy as np

import fluidlite as fluid


def build(num_features: int = 4, hidden: int = 16, num_classes: int = 3):
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 7
    with fluid.program_guard(main, startup):
        x = fluid.data(name="x", shape=[-1, num_features], dtype="float32")
        h = fluid.layers.fc(input=x, size=hidden, act="relu")
        prob = fluid.layers.fc(input=h, size=num_classes, act="softmax")
    return main, startup, prob


def main() -> None:
    main_prog, startup, prob = build()
    print("Program (forward only):")
    print(main_prog)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    batch = np.random.default_rng(0).normal(size=(5, 4)).astype("float32")
    (p,) = exe.run(main_prog, feed={"x": batch}, fetch_list=[prob])
    print("\nclass probabilities for a batch of 5:")
    for i, row in enumerate(p):
        bar = " ".join(f"{v:.3f}" for v in row)
        print(f"  sample {i}: [{bar}]  -> class {int(row.argmax())}")
    print(f"\nrows sum to 1: {np.allclose(p.sum(axis=1), 1.0)}")


if __name__ == "__main__":
    main()
