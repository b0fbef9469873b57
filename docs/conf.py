"""Sphinx configuration: fluidlite's API reference and user guides.

    pip install ".[docs]"
    sphinx-build -W --keep-going -b html docs docs/_build/html     # the site, zero warnings
    sphinx-build -b doctest docs docs/_build/doctest               # run every example

The API pages (``docs/api/``) are generated when the build starts from the names
``docs/api_coverage.md`` marks provided (``docs/apigen.py``); the guides are Markdown (MyST).
Docstrings are Google style (``Args:``, ``Returns:``, ``Raises:``, ``Example:``), read by
napoleon; their ``>>>`` examples are doctests.
"""
import os
import re
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))      # document the checkout, not an installed copy
sys.path.insert(0, HERE)

import apigen  # noqa: E402

project = "fluidlite"
author = "fluidlite contributors"
copyright = "fluidlite contributors"
extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.doctest",
    "myst_parser",
]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "images", "**/__pycache__"]
html_theme = "furo"
html_title = "fluidlite"

# autodoc / napoleon: Google-style sections, signatures as written, members in source order
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_preserve_defaults = False
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False

# MyST: GitHub-style heading anchors, so `compatibility.md#core-...` links resolve
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence"]

# doctest: examples are self-contained (their own imports, NumPy's default printing), so they
# run the same here, in tests/test_docs_examples.py and pasted into a Python prompt. The
# folders their `tempfile.mkdtemp()` calls make go into one scratch folder, removed with the
# build (a docs build used to leave ~250 folders in /tmp).
_SCRATCH = tempfile.mkdtemp(prefix="fluidlite-doctest-")
doctest_global_setup = f"import tempfile as _tempfile; _tempfile.tempdir = {_SCRATCH!r}"
doctest_global_cleanup = "_tempfile.tempdir = None"
doctest_default_flags = (__import__("doctest").ELLIPSIS
                         | __import__("doctest").NORMALIZE_WHITESPACE)


def _generate_api(app):
    apigen.write_pages()


def _check_sections(app):
    """A documented name lacking an Args:/Returns:/Raises: section that
    ``docs/sections_allowlist.txt`` does not record is a warning, so ``-W`` fails the build."""
    import check_examples
    from sphinx.util import logging
    log = logging.getLogger(__name__)
    new, _ = check_examples.section_problems()
    for line in new:
        log.warning("docstring section missing (not in docs/sections_allowlist.txt): %s", line)


# plain-text docstrings write absolute values as |x|, which reST reads as a substitution
_ABS = re.compile(r"(?<![\\|`])\|(?=[^\s|])([^|`\n]*?[^\s|\\])\|(?![|_`])")


def _escape_bars(app, what, name, obj, options, lines):
    for i, line in enumerate(lines):
        if not line.lstrip().startswith((">>>", "...")):
            lines[i] = _ABS.sub(r"\\|\1\\|", line)


def setup(app):
    app.connect("builder-inited", _generate_api)
    app.connect("builder-inited", _check_sections)
    app.connect("autodoc-process-docstring", _escape_bars)
    app.connect("build-finished", lambda app, exc: shutil.rmtree(_SCRATCH, ignore_errors=True))
