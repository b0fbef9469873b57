"""fluid 1.8's documented examples on fluidlite (tests/real/fluid18_doc_examples.py).

The self-tests below always run: they check the extraction and the classification on
docstrings and failures written here. The run over fluid 1.8's own docstrings is skipped
unless ``FLUIDLITE_PADDLE18_SRC`` names a checkout of PaddlePaddle/Paddle (a directory with
python/paddle/fluid) or a git directory of it (then ``release/1.8`` is read with git archive;
Paddle's code is not vendored). About 40 s on two busy cores:

    FLUIDLITE_PADDLE18_SRC=/work/.mirror/windstamp+Paddle/repo python -m pytest -q \\
        tests/real/test_fluid18_doc_examples.py -m slow
"""
import ast
import os
import textwrap

import pytest

from . import fluid18_doc_examples as docex

# measured 2026-11-29 on release/1.8 (a2dae548): 710 examples, 511-513 pass, 45-47 fail, 88
# skipped by rule, 64 broken in the docs (one example, Conv3DTranspose, is near the 20 s
# timeout on busy cores); after the second round 540-542 pass, 6-8 fail, 90 skipped, 72
# broken; session 40: 544 pass, 4 fail (3 the mixed-dtype cond deviation, a timeout), 90
# skipped, 72 broken; session 41 (mixed-dtype cond branches merged, conv3d by kernel offset):
# 548 pass, 0 fail, 90 skipped, 72 broken; the run must not fall below this
MIN_PASSED = 546


def _ex(code, qualname="f", module="paddle.fluid.layers.nn"):
    return docex.Example(module, qualname, 0, textwrap.dedent(code).strip("\n"))


def test_code_blocks_are_dedented_over_code_lines_and_prompts_stripped():
    doc = textwrap.dedent('''
        Summary.

        Examples:
            .. code-block:: python

                import paddle.fluid as fluid
              # a comment left of the code
                x = 1

            .. code-block:: text

                not python
            ''')
    assert docex.code_blocks(doc) == ["import paddle.fluid as fluid\n# a comment left of the "
                                      "code\nx = 1"]
    prompts = "Examples:\n    >>> a = 1\n    >>> print(a)\n"
    assert docex.code_blocks(prompts) == ["a = 1\nprint(a)"]


def test_public_api_only(tmp_path):
    pkg = tmp_path / "python" / "paddle" / "fluid"
    (pkg / "tests").mkdir(parents=True)
    doc = '    """Doc.\n\n    .. code-block:: python\n\n        x = 1\n    """\n'
    (pkg / "__init__.py").write_text("")
    deeper = doc.replace("    ", "        ")
    (pkg / "mod.py").write_text('__all__ = ["Pub"]\n'
                                'def hidden():\n' + doc + 'class Pub:\n' + doc +
                                '    def method(self):\n' + deeper +
                                '    def _private(self):\n' + deeper)
    (pkg / "tests" / "test_x.py").write_text("def f():\n" + doc)
    got = [(e.module, e.qualname, e.code) for e in docex.examples(str(tmp_path))]
    assert got == [("paddle.fluid.mod", "Pub", "x = 1"),
                   ("paddle.fluid.mod", "Pub.method", "x = 1")]


def _facts(tmp_path, source):
    pkg = tmp_path / "python" / "paddle" / "fluid"
    pkg.mkdir(parents=True, exist_ok=True)
    (pkg / "__init__.py").write_text("from .layers import *\n")
    (pkg / "layers.py").write_text(textwrap.dedent(source))
    root = str(tmp_path)
    return docex.fluid18_names(root), docex.fluid18_facts(root)


SOURCE_18 = '''
    __all__ = ["retinanet", "fc"]
    def retinanet(gt_labels, name=None):
        check_variable_and_dtype(gt_labels, 'gt_labels', ['int32'], 'retinanet')
    def fc(input, size):
        pass
    '''


@pytest.mark.parametrize("raw, status, klass", [
    ({"ok": True}, "pass", ""),
    ({"ok": False, "type": "NameError", "message": "name 'exe' is not defined",
      "in_example": True}, "broken", "undefined_name"),
    ({"ok": False, "type": "TypeError", "in_example": True,
      "message": "unsupported operand type(s) for >>: 'builtin_function_or_method' and "
                 "'_io.TextIOWrapper'"}, "broken", "python2_print"),
    ({"ok": False, "type": "TypeError", "in_example": False,
      "message": "The data type of 'gt_labels' in retinanet must be ['int32'], but received "
                 "float32."}, "broken", "rejected_by_fluid18_check"),
    ({"ok": False, "type": "TypeError", "in_example": False,
      "message": "fc() got an unexpected keyword argument 'act2'"},
     "broken", "no_such_argument_in_fluid18"),
    ({"ok": False, "type": "TypeError", "in_example": False,
      "message": "fc() got an unexpected keyword argument 'size'"}, "fail",
     "TypeError: fc# got an unexpected keyword argument '*'"),
    ({"ok": False, "type": "AttributeError", "in_example": True,
      "message": "module 'fluidlite' has no attribute 'assign'"}, "broken", "not_in_fluid18"),
    ({"ok": False, "type": "AttributeError", "in_example": True,
      "message": "module 'fluidlite' has no attribute 'fc'"}, "fail",
     "AttributeError: module '*' has no attribute '*'"),
    ({"ok": False, "type": "ValueError", "in_example": False,
      "message": "The fed Variable 'x' should have dimensions = 2, shape = [-1, 3], but "
                 "received fed shape [4, 5]. Reshape"}, "broken", "rejected_by_fluid18_check"),
    ({"ok": False, "type": "ValueError", "in_example": False,
      "message": "The fed Variable 'x' should have dimensions = 2, shape = [4, 1], but "
                 "received fed shape [4]. Reshape"}, "fail",
     "ValueError: The fed Variable '*' should have dimensions = #, shape = #, but received "
     "fed shape #. Resh"),
    ({"ok": False, "type": "FileNotFoundError", "message": "No such file: 'a.txt'"},
     "skip", "missing_file"),
    ({"ok": False, "type": "Timeout", "message": "no end within 20 s"}, "fail",
     "Timeout: no end within # s"),
])
def test_classify_failures_with_evidence(tmp_path, raw, status, klass):
    names, facts = _facts(tmp_path, SOURCE_18)
    ex = _ex("import paddle.fluid as fluid\nx = fluid.data(name='x', shape=[-1, 3])\nexe.run()")
    got = docex.classify(ex, raw, names, facts)
    assert (got.status, got.klass) == (status, klass)


def test_static_rules():
    names = set()
    assert docex.classify(_ex("print 'x'"), None, names)[1:3] == ("broken", "syntax")
    assert docex.classify(_ex("from paddle.fluid.incubate.fleet.base import fleet"), None,
                          names)[1:3] == ("skip", "distributed")
    assert docex.classify(_ex("import paddle\nr = paddle.dataset.mnist.train()"), None,
                          names)[1:3] == ("skip", "downloads_data")
    assert docex.classify(_ex("x = 1"), None, names)[1] == "run"


def test_fluid18_feed_check_follows_its_cxx():
    assert docex.fluid18_feed_differs([-1, 32, 32], [8, 3, 32, 32])
    assert docex.fluid18_feed_differs([-1, 3], [8, 4])
    assert not docex.fluid18_feed_differs([3, 1], [3])       # only the fed dims are compared
    assert not docex.fluid18_feed_differs([-1, 3], [8, 3])


def test_runs_blocks_in_forked_processes_with_the_paddle_alias():
    items = [_ex("import paddle.fluid as fluid\nimport fluidlite\n"
                 "assert fluid is fluidlite\nprint('hello')"),
             _ex("raise KeyError('boom')"),
             _ex("import time\ntime.sleep(30)")]
    raw = docex.run_all(items, jobs=2, timeout=3)
    assert raw[0] == {"ok": True}
    assert raw[1]["type"] == "KeyError" and raw[1]["in_example"]
    assert raw[2]["type"] == "Timeout"


def test_example_source_is_visible_to_inspect_as_a_script_file():
    """dygraph-to-static reads the function's source (inspect.getsource), as it would from
    the script file the example is: the block's source is in linecache."""
    raw = docex.run_all([_ex("import inspect\ndef f(x):\n    return x\n"
                             "assert 'return x' in inspect.getsource(f)")], jobs=1, timeout=10)
    assert raw[0] == {"ok": True}


def test_numpy_scalar_conversion_in_the_example_is_skipped_by_rule():
    raw = {"ok": False, "type": "TypeError", "in_example": True,
           "message": "only 0-dimensional arrays can be converted to Python scalars"}
    got = docex.classify(_ex("print('%f' % out[0])"), raw, set(), None)
    assert (got.status, got.klass) == ("skip", "numpy_removed_scalar_conversion")
    inside = dict(raw, in_example=False)       # raised by fluidlite itself: a failure
    assert docex.classify(_ex("x = 1"), inside, set(), None).status == "fail"


def test_known_broken_examples_carry_their_evidence():
    ex = docex.Example("paddle.fluid.layers.detection", "ssd_loss", 0, "x = 1")
    raw = {"ok": False, "type": "ValueError", "in_example": False, "message": "shapes"}
    got = docex.classify(ex, raw, set(), None)
    assert got.status == "broken" and got.klass == "known_broken"
    assert "num, num_prior, num_class = confidence.shape" in got.detail
    for key, evidence in docex.KNOWN_BROKEN.items():
        assert key.count("#") == 1 and len(evidence) > 60, key
    assert docex.classify(_ex("ds.set_fleet_send_sleep_seconds(2)"), None,
                          set())[1:3] == ("skip", "distributed")


def test_harness_source_parses():
    ast.parse(open(docex.__file__).read())


@pytest.mark.slow
def test_fluid18_doc_examples(capsys):
    src = os.environ.get("FLUIDLITE_PADDLE18_SRC")
    if not src:
        pytest.skip("FLUIDLITE_PADDLE18_SRC is not set (a PaddlePaddle/Paddle checkout or git "
                    "directory with release/1.8)")
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        outcomes = docex.run(docex.source_root(src, "release/1.8", tmp), None, 2, 20.0)
    totals = docex.report(outcomes, verbose=True)
    assert totals["pass"] >= MIN_PASSED, totals
