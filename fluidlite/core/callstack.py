"""Where ops come from: the user's source lines recorded on every op (``op_callstack``)."""
from __future__ import annotations

import linecache
import os
import sys
from typing import List, Optional, Sequence

_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def user_callstack(limit: int = 8) -> List[str]:
    """The innermost ``limit`` frames outside fluidlite, formatted like a traceback (outermost
    first): ``'  File "f.py", line 3, in main'`` followed by ``'    source line'``."""
    frames = []
    f = sys._getframe(1)
    while f is not None and len(frames) < limit:
        fn = f.f_code.co_filename
        if not fn.startswith(_PKG_DIR) and not fn.startswith("<fluidlite"):
            frames.append((fn, f.f_lineno, f.f_code.co_name))
        f = f.f_back
    out = []
    for fn, line, func in reversed(frames):
        out.append(f'  File "{fn}", line {line}, in {func}')
        src = linecache.getline(fn, line).strip()
        if src:
            out.append("    " + src)
    return out


def user_stacklevel() -> int:
    """The ``stacklevel`` for ``warnings.warn`` called by this function's caller that names
    the innermost frame outside fluidlite (the user's line, however deep the library call)."""
    level, f = 1, sys._getframe(1)
    while f is not None and (f.f_code.co_filename.startswith(_PKG_DIR)
                             or f.f_code.co_filename.startswith("<fluidlite")):
        f = f.f_back
        level += 1
    return level


def creation_site(callstack: Optional[Sequence[str]]) -> str:
    """The user's innermost source line from an ``op_callstack`` attr (for error messages)."""
    if not callstack:
        return "(unknown location)"
    lines = list(callstack)
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].startswith("  File"):
            return "\n".join(x.strip() for x in lines[i:i + 2])
    return lines[-1].strip()
