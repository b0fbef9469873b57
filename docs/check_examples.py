"""Which documented names lack a runnable example.

    python docs/check_examples.py            # the count, and the names without an example
    python docs/check_examples.py --count    # the count only
    python docs/check_examples.py --run      # also run every example (doctest) and report failures
    python docs/check_examples.py --sections # also count names without Args/Returns/Raises
    python docs/check_examples.py --write-allowlist  # record today's missing sections

A name "has an example" when its docstring has an ``Example:`` (or ``Examples:``) section with
at least one ``>>>`` line. The names are those of the API reference (``docs/apigen.py``): every
name ``docs/api_coverage.md`` marks provided, deviation or partial, the documented methods of
those classes, ``fluidlite.autograd`` and the inference API; a name bound to the same object as
an earlier one is counted once. ``tests/test_docs_examples.py`` runs the examples and keeps the
count of names without one from growing (``MISSING_EXAMPLES_MAX`` there).

Sections are a ratchet too: ``docs/sections_allowlist.txt`` records, one ``name: Args Returns``
line per name, the sections each name still lacks. A name missing a section that is not recorded
there fails ``tests/test_docs_examples.py`` and the Sphinx build (``docs/conf.py``); when you add
a section, remove it from the list (``--write-allowlist`` rewrites the file from the docstrings).
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


SECTIONS = ("Args", "Returns", "Raises")
ALLOWLIST = os.path.join(HERE, "sections_allowlist.txt")


def missing_sections() -> Dict[str, List[str]]:
    """{name: [sections its docstring lacks]} for every documented name lacking one."""
    out: Dict[str, List[str]] = {}
    for name, obj in unique_objects():
        lack = [s for s in SECTIONS if not has_section(obj, s)]
        if lack:
            out[name] = lack
    return out


def read_allowlist(path: str = ALLOWLIST) -> Dict[str, List[str]]:
    allowed: Dict[str, List[str]] = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                name, _, secs = line.partition(":")
                allowed[name.strip()] = secs.split()
    return allowed


def write_allowlist(path: str = ALLOWLIST) -> int:
    lacking = missing_sections()
    with open(path, "w", encoding="utf-8") as f:
        f.write("# Documented names and the docstring sections they still lack (a ratchet:\n"
                "# docs/check_examples.py). Remove a line's section when you add it;\n"
                "# never add one.\n")
        for name in sorted(lacking):
            f.write(f"{name}: {' '.join(lacking[name])}\n")
    return len(lacking)


def section_problems() -> Tuple[List[str], List[str]]:
    """(new gaps: 'name: Section' not in the allow-list, stale allow-list entries)."""
    lacking, allowed = missing_sections(), read_allowlist()
    new = [f"{n}: {s}" for n, secs in lacking.items() for s in secs
           if s not in allowed.get(n, ())]
    stale = [f"{n}: {s}" for n, secs in allowed.items() for s in secs
             if s not in lacking.get(n, ())]
    return new, stale


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
    ap.add_argument("--write-allowlist", action="store_true",
                    help=f"rewrite {os.path.relpath(ALLOWLIST)} from the docstrings")
    args = ap.parse_args(argv)
    if args.write_allowlist:
        print(f"{write_allowlist()} names lack a section; recorded in {ALLOWLIST}")
        return 0
    names = list(unique_objects())
    if args.sections:
        for section in ("Args", "Returns", "Raises"):
            n = sum(not has_section(o, section) for _, o in names)
            print(f"{n} of {len(names)} documented names have no {section}: section")
        new, stale = section_problems()
        for line in new:
            print(f"missing section, not in the allow-list: {line}")
        for line in stale:
            print(f"allow-list entry no longer needed: {line}")
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
