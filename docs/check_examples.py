"""Which documented names lack a runnable example.

    python docs/check_examples.py            # the count, and the names without an example
    python docs/check_examples.py --count    # the count only
    python docs/check_examples.py --run      # also run every example (doctest) and report failures
    python docs/check_examples.py --sections # also count names without Args/Returns/Raises

A name "has an example" when its docstring has an ``Example:`` (or ``Examples:``) section with
at least one ``>>>`` line. The names are those of the API reference (``docs/apigen.py``): every
name ``docs/api_coverage.md`` marks provided, deviation or partial, the documented methods of
those classes, ``fluidlite.autograd`` and the inference API; a name bound to the same object as
an earlier one is counted once. ``tests/test_docs_examples.py`` runs the examples and keeps the
count of names without one from growing (``MISSING_EXAMPLES_MAX`` there).
"""
from __future__ import annotations

import argparse
import doctest
import inspect
import os
import re
import sys
from typing import Any, Dict, Iterator, List, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import apigen  # noqa: E402

_EXAMPLE = re.compile(r"^\s*Examples?:\s*\n(?:\s*\n)*(?:.*\n)*?\s*>>> ", re.M)


def has_example(obj: Any) -> bool:
    # the object's own docstring: a subclass does not inherit its base's example for this count
    doc = inspect.cleandoc(getattr(obj, "__doc__", None) or "")
    return bool(_EXAMPLE.search(doc + "\n"))


def unique_objects() -> Iterator[Tuple[str, Any]]:
    """(dotted name, object) of every documented name and method, each object once."""
    seen: Dict[int, str] = {}
    for names in apigen.documented_names().values():
        for n in names:
            if n.kind in ("module", "data") or id(n.obj) in seen:
                continue
            seen[id(n.obj)] = n.target
            yield n.target, n.obj
            for m in n.members:
                meth = inspect.getattr_static(n.obj, m, None)
                meth = getattr(meth, "__func__", meth)
                if meth is None or id(meth) in seen:
                    continue
                seen[id(meth)] = f"{n.target}.{m}"
                yield f"{n.target}.{m}", getattr(n.obj, m)


def has_section(obj: Any, section: str) -> bool:
    doc = inspect.cleandoc(getattr(obj, "__doc__", None) or "")
    return re.search(rf"^\s*{section}:\s*$", doc, re.M) is not None


def missing() -> List[str]:
    return [name for name, obj in unique_objects() if not has_example(obj)]


def run_examples(name: str, obj: Any) -> Tuple[int, int, str]:
    """Run ``obj``'s docstring examples; (attempted, failed, report)."""
    finder = doctest.DocTestFinder(recurse=False)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    import numpy as np
    globs = {"np": np}
    out: List[str] = []
    for test in finder.find(obj, name, globs=dict(globs)):
        test.docstring = test.docstring or ""
        runner.run(test, out=out.append)
    res = runner.summarize(verbose=False)
    return res.attempted, res.failed, "".join(out)


def main(argv: List[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--count", action="store_true", help="print the count only")
    ap.add_argument("--run", action="store_true", help="run the examples too")
    ap.add_argument("--sections", action="store_true",
                    help="also count the names without an Args: / Returns: section")
    args = ap.parse_args(argv)
    names = list(unique_objects())
    if args.sections:
        for section in ("Args", "Returns", "Raises"):
            n = sum(not has_section(o, section) for _, o in names)
            print(f"{n} of {len(names)} documented names have no {section}: section")
    lacking = [n for n, o in names if not has_example(o)]
    if args.count:
        print(len(lacking))
        return 0
    for n in lacking:
        print(n)
    print(f"{len(lacking)} of {len(names)} documented names have no example")
    if args.run:
        failed = 0
        for n, o in names:
            attempted, nfail, report = run_examples(n, o)
            if nfail:
                failed += 1
                print(report)
        print(f"{failed} names with a failing example")
        return 1 if failed else 0
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
