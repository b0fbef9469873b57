"""Run a training script as ``__main__`` on one rank of a launch (used by ``launch``).

Joins the launch before the script starts (so the abort-on-failure hook of
``comm.world()`` is installed even if the script fails before its first collective), then runs
the script with ``runpy`` and its own ``sys.argv``.
"""
from __future__ import annotations

import os
import runpy
import sys

from . import comm


def main() -> None:
    script = sys.argv[1]
    sys.argv = sys.argv[1:]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    comm.world()
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
