"""Every ```python block of README.md and of the guides in docs/ runs, as a new user would run it.

The README is the front door; the longer sections live in docs/ (docs/guides/*.md,
docs/architecture.md, ...), so their blocks are collected too, README first, then the docs
pages in name order.

Blocks that continue an earlier example (they use ``main_program``, ``loss``, ``net`` ...) get
the smallest prelude that defines those names; each block runs in its own namespace, all of
them in one fresh interpreter in a temporary directory (the viz block writes files there).
A block the README adds later needs an entry in ``PRELUDES`` only if it is such a fragment.
"""
import os
import re
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(ROOT, "README.md")

_PROGRAM = """
import numpy as np
import fluidlite as fluid
main_program, startup = fluid.Program(), fluid.Program()
with fluid.program_guard(main_program, startup):
    x = fluid.data("x", [-1, 4]); label = fluid.data("label", [-1, 1], "int64")
    loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(
        fluid.layers.fc(x, 3), label))
"""
_NET = """
import numpy as np
import fluidlite as fluid
with fluid.dygraph.guard():
    _fc = fluid.dygraph.Linear(3, 1)
    def net(x, y):
        logits = _fc(x)
        return fluid.layers.reduce_sum(logits * y), logits
    net.parameters = _fc.parameters
    x = fluid.dygraph.to_variable(np.array([[1., 2., 3.]], np.float32))
    y = fluid.dygraph.to_variable(np.array([[2.]], np.float32))
"""
# first line of a block -> (prelude, epilogue)
PRELUDES = {
    # relu exists: the example registers the same class under another type and runs it
    "@register": ("import numpy as np\nfrom fluidlite.core.registry import OpDef, register\n"
                  "import fluidlite\n",
                  "from fluidlite.testing import OpTest\n"
                  "class T(OpTest):\n    op_type = 'readme_relu'\n"
                  "t = T(); x = t.rand(3, 5, avoid=0.0)\n"
                  "t.inputs, t.outputs = {'X': x}, {'Out': np.maximum(x, 0)}\n"
                  "t.check_output(); t.check_grad(['X'], 'Out')\n"),
    "class TestRelu(OpTest):": ("import numpy as np\nfrom fluidlite.testing import OpTest\n",
                                "TestRelu().test_all()\n"),
    "from fluidlite.core import rewrite": (_PROGRAM + "with fluid.program_guard(main_program, "
                                           "startup):\n    pass\n", "assert params_grads\n"),
    "import fluidlite.viz as viz": (_PROGRAM, ""),
    "from fluidlite.autograd import grad, value_and_grad": (_NET, ""),
    "opt = fluid.contrib.mixed_precision.decorate(": (_PROGRAM, ""),
}


def _pages():
    docs = os.path.join(ROOT, "docs")
    pages = [README]
    for sub in ("", "guides"):
        folder = os.path.join(docs, sub)
        pages += sorted(os.path.join(folder, f) for f in os.listdir(folder) if f.endswith(".md"))
    return pages


def _blocks():
    blocks = []
    for page in _pages():
        text = open(page, encoding="utf-8").read()
        # a snippet shown on two pages runs once
        blocks += [b for b in re.findall(r"```python\n(.*?)```", text, re.S) if b not in blocks]
    return blocks


def _script(blocks):
    parts = []
    for i, block in enumerate(blocks):
        first = block.splitlines()[0]
        prelude, epilogue = next(((p, e) for k, (p, e) in PRELUDES.items()
                                  if first.startswith(k)), ("", ""))
        if first.startswith("@register"):
            block = block.replace('"relu"', '"readme_relu"')
        code = prelude + block + epilogue
        if "opt = fluid.contrib" in first:      # a build fragment: inside the program's guard
            code = prelude + "with fluid.program_guard(main_program, startup):\n" + \
                textwrap.indent(block + epilogue, "    ")
        parts.append(f"exec(compile({code!r}, 'README.md block {i}', 'exec'), "
                     f"{{'__name__': 'ex'}})\n")
    return "".join(parts) + "print('README OK')\n"


def test_every_python_block_of_the_readme_runs(tmp_path):
    blocks = _blocks()
    assert len(blocks) >= 8
    res = subprocess.run([sys.executable, "-c", _script(blocks)], cwd=tmp_path,
                         capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, PYTHONPATH=ROOT + os.pathsep +
                                  os.environ.get("PYTHONPATH", "")))
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.stdout.rstrip().endswith("README OK")
    assert (tmp_path / "net.html").exists() and (tmp_path / "minimize.html").exists()
    # the SVG the README exports: Graphviz's when installed, else fluidlite's; XML either way
    svg = ET.parse(tmp_path / "net.svg").getroot()
    assert svg.tag == "{http://www.w3.org/2000/svg}svg"


@pytest.mark.parametrize("first", sorted(PRELUDES))
def test_every_prelude_still_matches_a_block(first):
    assert any(b.splitlines()[0].startswith(first) for b in _blocks()), \
        f"no README block starts with {first!r}: update PRELUDES"
