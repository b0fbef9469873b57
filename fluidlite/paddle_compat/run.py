"""``fluidlite run SCRIPT.py [args...]``: run an unchanged fluid 1.x script on fluidlite.

For the lifetime of this process only, ``import paddle`` resolves to ``fluidlite.paddle_compat``,
``import paddle.fluid`` to ``fluidlite`` and every ``paddle.fluid.X`` / ``paddle.X`` below them to
``fluidlite.X`` / ``fluidlite.paddle_compat.X`` (an import hook placed first on
``sys.meta_path``). The script runs as ``__main__`` with ``sys.argv = [SCRIPT, args...]``, as
``python SCRIPT.py args...`` would run it. Nothing outside ``fluidlite run`` is changed: a
PaddlePaddle installed on the machine is still what ``python SCRIPT.py`` imports.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import os
import runpy
import sys
import types
from typing import List, Optional, Sequence

__all__ = ["PaddleAlias", "main", "target_of"]


def target_of(fullname: str) -> Optional[str]:
    """The fluidlite module that stands for ``fullname`` (None: not a paddle module)."""
    if fullname == "paddle":
        return "fluidlite.paddle_compat"
    if fullname == "paddle.fluid" or fullname.startswith("paddle.fluid."):
        return "fluidlite" + fullname[len("paddle.fluid"):]
    if fullname.startswith("paddle."):
        return "fluidlite.paddle_compat" + fullname[len("paddle"):]
    return None


class PaddleAlias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``paddle`` and ``paddle.*`` as aliases of fluidlite's modules."""

    def find_spec(self, fullname: str, path: Optional[Sequence[str]] = None,
                  target: Optional[types.ModuleType] = None
                  ) -> Optional[importlib.machinery.ModuleSpec]:
        name = target_of(fullname)
        if name is None:
            return None
        try:
            importlib.util.find_spec(name)
        except (ImportError, ValueError):
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        # the alias *is* fluidlite's module: `paddle.fluid.layers is fluidlite.layers`
        return importlib.import_module(target_of(spec.name))     # type: ignore[arg-type]

    def exec_module(self, module: types.ModuleType) -> None:
        """Already executed as fluidlite's module. For ``paddle`` itself, ``paddle.fluid`` is
        imported too: ``from paddle import fluid`` looks the name up as an attribute and
        otherwise imports ``<module.__name__>.fluid``, i.e. ``fluidlite.paddle_compat.fluid``,
        which does not exist -- fluid 1.x's own ``paddle/__init__.py`` imports ``fluid``."""
        if module.__name__ == "fluidlite.paddle_compat" and "paddle.fluid" not in sys.modules:
            importlib.import_module("paddle.fluid")


def main(argv: Sequence[str]) -> int:
    """Run ``argv[0]`` (a script path) with ``argv[1:]`` as its arguments; returns the exit
    status (the script's ``sys.exit`` code, 0 when it ends normally)."""
    if not argv or argv[0] in ("-h", "--help"):
        sys.stdout.write("usage: fluidlite run SCRIPT.py [args...]\n\n" + __doc__.split("\n\n")[1]
                         + "\n")
        return 0 if argv else 2
    script = argv[0]
    if not os.path.isfile(script):
        sys.stderr.write(f"fluidlite run: error: '{script}' is not a file\n")
        return 2
    if "paddle" in sys.modules and not getattr(sys.modules["paddle"], "__name__", "").startswith(
            "fluidlite"):
        sys.stderr.write("fluidlite run: error: a real 'paddle' is already imported in this "
                         "process; run the script in a fresh process\n")
        return 2
    sys.meta_path.insert(0, PaddleAlias())
    sys.argv = [script, *argv[1:]]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        code = e.code
        if code is None or isinstance(code, int):
            return int(code or 0)
        sys.stderr.write(f"{code}\n")
        return 1
    return 0


def _entry(argv: Optional[List[str]] = None) -> int:    # python -m fluidlite.paddle_compat.run
    return main(sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    raise SystemExit(_entry())
