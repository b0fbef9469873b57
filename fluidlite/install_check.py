"""``fluid.install_check``: ``run_check()`` builds, trains and runs a small program to show
that fluidlite works, printing fluid 1.8's messages."""
from __future__ import annotations

import sys

import numpy as np

from . import layers, optimizer
from .core.ir import Program, program_guard
from .core.scope import CPUPlace, Scope
from .executor import Executor

__all__ = ["run_check"]


def run_check() -> None:
    """Train a 2-layer network one step on the CPU and run it; prints fluid 1.8's lines (it
    raises, naming the step, if anything fails).

    Example:
        >>> import fluidlite as fluid
        >>> fluid.install_check.run_check()  # doctest: +ELLIPSIS
        Running Verify Fluid Program ...
    """
    sys.stdout.write("Running Verify Fluid Program ... \n")
    main, startup = Program(), Program()
    with program_guard(main, startup):
        x = layers.data(name="inp", shape=[2, 2], append_batch_size=False)
        hidden = layers.fc(x, size=3)
        loss = layers.mean(layers.reduce_sum(hidden))
        optimizer.SGD(learning_rate=0.01).minimize(loss)
    exe, scope = Executor(CPUPlace()), Scope()
    exe.run(startup, scope=scope)
    out, = exe.run(main, feed={"inp": np.ones((2, 2), "float32")}, fetch_list=[loss],
                   scope=scope)
    if not np.isfinite(out).all():
        raise RuntimeError("install_check: the check program produced a non-finite loss")
    sys.stdout.write("Your Paddle Fluid works well on SINGLE GPU or CPU.\n")
    sys.stdout.write("Your Paddle Fluid is installed successfully! Let's start deep Learning "
                     "with Paddle Fluid now\n")
