"""fluid 1.8's sub-module paths (issues 27 and 29): every public name of a fluid 1.8 module
(``docs/fluid18_modules.txt``) imports from the same path under ``fluidlite`` -- the object
``fluid.layers.<name>`` is, for a ``fluid.layers`` module -- except the pairs
``docs/api_coverage.md`` ("Sub-module paths") lists as missing. Also the real code behind new
paths: ``fluid.layers.utils``, ``fluid.wrapped_decorator``, ``fluid.reader.default_collate_fn``
and the extractor that wrote the list."""
from __future__ import annotations

import collections
import importlib
import importlib.util
import inspect
import os

import numpy as np
import pytest

import fluidlite as fluid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, "docs", f"{name}.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)                                   # type: ignore[union-attr]
    return mod


ac = _load("api_coverage")
extract = _load("fluid18_modules_extract")

PAIRS = ac.read_module_list()
MISSING = {(m, n): why for m, n, why in ac.read_module_path_table()}
# the fluid.layers modules whose __all__ fluid 1.8's layers/__init__ re-exported: their names
# must be the very objects fluid.layers.<name> is (utils and layer_function_generator are not
# re-exported: utils.flatten is not the flatten layer)
REEXPORTED = {"nn", "io", "tensor", "control_flow", "ops", "device", "math_op_patch", "loss",
              "detection", "metric_op", "learning_rate_scheduler", "collective",
              "distributions", "sequence_lod", "rnn"}


def _fluidlite_path(module: str) -> str:
    return "fluidlite" + module[len("fluid"):]


# -- the list -----------------------------------------------------------------------------------
def test_list_is_sorted_unique_and_covers_the_modules_scripts_use():
    assert PAIRS == sorted(set(PAIRS))
    per = collections.Counter(m for m, _ in PAIRS)
    for module in ("layers.nn", "layers.tensor", "layers.control_flow", "layers.io",
                   "layers.ops", "layers.utils", "layers.learning_rate_scheduler",
                   "layers.detection", "layers.sequence_lod", "layers.rnn", "layers.loss",
                   "layers.metric_op", "layers.math_op_patch", "layers.distributions",
                   "evaluator", "wrapped_decorator", "contrib.layers", "contrib.layers.nn",
                   "contrib.layers.rnn_impl", "contrib.layers.metric_op", "framework"):
        assert per[f"fluid.{module}"] > 0, module
    assert per["fluid.layers.nn"] > 150 and per["fluid.layers.tensor"] > 25
    assert ("fluid.layers.control_flow", "StaticRNN") in PAIRS
    assert ("fluid.layers.utils", "map_structure") in PAIRS
    assert ("fluid.contrib.layers.rnn_impl", "basic_lstm") in PAIRS
    with open(ac.MODULES_FILE, encoding="utf-8") as f:
        head = f.readline()
    assert head.startswith("# fluid 1.8's sub-module public names")


def test_missing_pairs_are_pairs_of_the_list_with_a_reason():
    assert MISSING, "docs/api_coverage.md has no 'Sub-module paths' section: regenerate it"
    assert set(MISSING) <= set(PAIRS)
    for pair, why in MISSING.items():
        assert why.strip() and why != "not yet provided", pair
    # the names this work provides are not excused
    for pair in [("fluid.layers.utils", "flatten"), ("fluid.evaluator", "ChunkEvaluator"),
                 ("fluid.wrapped_decorator", "signature_safe_contextmanager"),
                 ("fluid.contrib.layers", "basic_lstm"), ("fluid.reader", "default_collate_fn"),
                 ("fluid.layers.nn", "cos_sim"), ("fluid.layers.tensor", "cast")]:
        assert pair not in MISSING, pair


def test_section_counts_match_the_list():
    with open(ac.TABLE_FILE, encoding="utf-8") as f:
        text = f.read()
    n_missing = len(MISSING)
    assert f"| **all** | {len(PAIRS) - n_missing} | {n_missing} | {len(PAIRS)} |" in text


# -- every pair resolves ------------------------------------------------------------------------
@pytest.mark.parametrize("module,name", [p for p in PAIRS if p not in MISSING],
                         ids=lambda x: x)
def test_pair_resolves(module, name):
    mod = importlib.import_module(_fluidlite_path(module))
    assert hasattr(mod, name), (
        f"{module}.{name}: fluidlite provides no {_fluidlite_path(module)}.{name} (and "
        f"docs/api_coverage.md does not list it as missing)")
    obj = getattr(mod, name)
    parts = module.split(".")
    if parts[1] == "layers" and len(parts) == 3 and parts[2] in REEXPORTED \
            and hasattr(fluid.layers, name):
        assert obj is getattr(fluid.layers, name), f"{module}.{name} is not fluid.layers.{name}"
    if len(parts) == 2:               # a top-level module: the same object as fluid.<name>
        try:
            top = getattr(fluid, name)
        except AttributeError:
            top = None
        if top is not None and not inspect.ismodule(top):
            assert obj is top, f"{module}.{name} is not fluid.{name}"


def test_from_imports_of_real_scripts():
    from fluidlite.layers.control_flow import StaticRNN, While
    from fluidlite.layers import utils
    from fluidlite.contrib.layers import basic_lstm
    from fluidlite.wrapped_decorator import signature_safe_contextmanager
    import fluidlite.evaluator as evaluator
    assert StaticRNN is fluid.layers.StaticRNN and While is fluid.layers.While
    assert fluid.layers.tensor.cast is fluid.layers.cast
    assert fluid.layers.nn.cos_sim is fluid.layers.cos_sim
    assert fluid.layers.learning_rate_scheduler.noam_decay is fluid.layers.noam_decay
    assert fluid.layers.sequence_lod.sequence_pool is fluid.layers.sequence_pool
    assert fluid.layers.utils.flatten is utils.flatten
    assert utils.flatten is not fluid.layers.flatten        # the nest helper, not the layer
    assert fluid.contrib.layers.basic_lstm is basic_lstm is fluid.contrib.basic_lstm
    assert evaluator.ChunkEvaluator.__module__ == "fluidlite.evaluator"
    assert callable(signature_safe_contextmanager)


def test_builtin_named_layers_do_not_shadow_the_builtins_in_fluidlite_modules():
    """fluid 1.8 defined range, sum, slice, pow, hash, abs, round as layers; their module
    paths resolve, but the modules' own code still sees Python's builtins."""
    tensor = importlib.import_module("fluidlite.layers.tensor")
    nn = importlib.import_module("fluidlite.layers.nn")
    from fluidlite.layers.tensor import range as range_layer
    from fluidlite.layers.nn import slice as slice_layer, sum as sum_layer
    assert range_layer is fluid.layers.range and sum_layer is fluid.layers.sum
    assert slice_layer is fluid.layers.slice
    for mod, names in ((tensor, ["range"]), (nn, ["sum", "slice", "pow", "hash"])):
        for n in names:
            own = vars(mod).get(n)
            # a global of that name may only be the module's own definition
            assert own is None or getattr(own, "__module__", None) == mod.__name__, (mod, n)
    with pytest.raises(AttributeError, match="no attribute 'no_such_layer'"):
        nn.no_such_layer                                          # noqa: B018
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):       # split iterates with the builtin range
        x = fluid.data("x", [2, 6], "float32")
        parts = fluid.layers.split(x, num_or_sections=3, dim=1)
    assert len(parts) == 3


def test_contrib_layers_names_the_missing_ones():
    import fluidlite.contrib.layers as cl
    assert cl.tree_conv is cl.nn.tree_conv is fluid.contrib.tree_conv
    assert cl.ctr_metric_bundle is cl.metric_op.ctr_metric_bundle
    with pytest.raises(AttributeError, match="search_pyramid_hash is not provided by "):
        cl.search_pyramid_hash                                    # noqa: B018
    with pytest.raises(AttributeError, match="not provided by fluidlite"):
        fluid.contrib.slim                                        # noqa: B018


# -- fluid.layers.utils -------------------------------------------------------------------------
def test_utils_flatten_and_pack_round_trip():
    from fluidlite.layers import utils
    Pair = collections.namedtuple("Pair", ["a", "b"])
    s = [1, (2, {"z": 4, "y": 3}), Pair(5, [6])]
    flat = utils.flatten(s)
    assert flat == [1, 2, 3, 4, 5, 6]
    back = utils.pack_sequence_as(s, flat)
    assert back == s and isinstance(back[2], Pair) and isinstance(back[1], tuple)
    assert list(back[1][1]) == ["z", "y"]                  # the dict keeps its key order
    assert utils.flatten("abc") == ["abc"] and utils.flatten(np.ones(2))[0].shape == (2,)
    assert utils.pack_sequence_as(7, ["x"]) == "x"
    od = collections.OrderedDict([("b", 1), ("a", 2)])
    assert utils.flatten(od) == [2, 1]                      # sorted keys, as a plain dict
    assert utils.pack_sequence_as(od, [20, 10]) == collections.OrderedDict([("b", 10),
                                                                            ("a", 20)])


def test_utils_errors_are_fluids():
    from fluidlite.layers import utils
    with pytest.raises(TypeError, match="flat_sequence must be a sequence"):
        utils.pack_sequence_as([1], 5)
    with pytest.raises(ValueError, match="Structure is a scalar but len"):
        utils.pack_sequence_as(1, [1, 2])
    with pytest.raises(ValueError, match="Structure had 2 elements, but flat_sequence had 3"):
        utils.pack_sequence_as([1, 2], [1, 2, 3])
    with pytest.raises(TypeError, match="sortable keys"):
        utils.flatten({1: "a", "b": 2})


def test_utils_map_structure_and_structure_checks():
    from fluidlite.layers import utils
    assert utils.map_structure(lambda a, b: a * b, [1, (2, 3)], [4, (5, 6)]) == [4, (10, 18)]
    assert utils.map_structure(str, {"k": [1]}) == {"k": ["1"]}
    utils.assert_same_structure([1, (2, 3)], ["a", ("b", "c")])
    utils.assert_same_structure([1, 2], (3, 4), check_types=False)
    with pytest.raises(TypeError, match="same sequence type"):
        utils.assert_same_structure([1, 2], (3, 4))
    with pytest.raises(ValueError, match="same number of elements"):
        utils.assert_same_structure([1, 2], [1])
    with pytest.raises(ValueError, match="same nested structure"):
        utils.assert_same_structure([1, [2]], [[1], 2])
    with pytest.raises(ValueError, match="same set of keys"):
        utils.assert_same_structure({"a": 1}, {"b": 1})
    assert utils.is_sequence([]) and utils.is_sequence({}) and not utils.is_sequence("s")
    assert not utils.is_sequence(np.ones(3)) and not utils.is_sequence(5)
    assert utils.hold_mutable_vars([1, [2]]) and not utils.hold_mutable_vars([1, 2])
    s = [1, [2, {"a": [3]}]]
    c = utils.copy_mutable_vars(s)
    assert c == s and c[1] is not s[1] and c[1][1]["a"] is not s[1][1]["a"]


def test_utils_convert_to_list():
    from fluidlite.layers import utils
    assert utils.convert_to_list(2, 3, "stride") == [2, 2, 2]
    assert utils.convert_to_list([1, 2], 2, "stride") == [1, 2]
    assert utils.convert_to_list(0.5, 2, "scale", dtype=float) == [0.5, 0.5]
    with pytest.raises(ValueError, match="The stride's type must be list or tuple"):
        utils.convert_to_list(None, 2, "stride")
    with pytest.raises(ValueError, match="The stride's length must be 2"):
        utils.convert_to_list([1, 2, 3], 2, "stride")
    with pytest.raises(ValueError, match="including element x"):
        utils.convert_to_list([1, "x"], 2, "stride")


def test_utils_carries_decoder_states_through_a_program():
    """What the RNN code uses the helpers for: nested Variables in, nested Variables out."""
    from fluidlite.layers import utils
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        h = fluid.data("h", [-1, 3], "float32")
        c = fluid.data("c", [-1, 3], "float32")
        states = {"lstm": [h, c], "step": h}
        doubled = utils.map_structure(lambda v: fluid.layers.scale(v, scale=2.0), states)
    utils.assert_same_structure(states, doubled)
    exe = fluid.Executor(fluid.CPUPlace())
    feed = {"h": np.ones((2, 3), "float32"), "c": np.full((2, 3), 3.0, "float32")}
    out = exe.run(main, feed=feed, fetch_list=utils.flatten(doubled))
    np.testing.assert_allclose(out[0], 2.0)       # lstm[0] = h
    np.testing.assert_allclose(out[1], 6.0)       # lstm[1] = c
    np.testing.assert_allclose(out[2], 2.0)       # step = h


# -- fluid.wrapped_decorator --------------------------------------------------------------------
def test_signature_safe_contextmanager_keeps_the_signature():
    from fluidlite.wrapped_decorator import signature_safe_contextmanager, wrap_decorator
    log = []

    @signature_safe_contextmanager
    def guard(prefix, depth=1):
        """Enter a scope."""
        log.append(("enter", prefix))
        yield prefix * depth
        log.append(("exit", prefix))

    assert str(inspect.signature(guard)) == "(prefix, depth=1)"
    assert guard.__name__ == "guard" and guard.__doc__ == "Enter a scope."
    with guard("a", depth=3) as v:
        assert v == "aaa"
    assert log == [("enter", "a"), ("exit", "a")]
    with pytest.raises(TypeError):
        with guard():                               # the generator's own argument check
            pass

    applied = []

    def counting(fn):
        applied.append(fn.__name__)
        return fn

    @wrap_decorator(counting)
    def add(x, y=1):
        return x + y

    assert str(inspect.signature(add)) == "(x, y=1)"
    assert add(1) == 2 and add(2, y=3) == 5
    assert applied == ["add", "add"]          # applied at each call, as fluid 1.8 did


# -- fluid.reader.default_collate_fn ------------------------------------------------------------
def test_default_collate_fn_stacks_fields():
    from fluidlite.reader import default_collate_fn
    batch = [[np.full((2,), i, "float32"), np.array([i], "int64")] for i in range(3)]
    img, label = default_collate_fn(batch)
    assert img.shape == (3, 2) and label.shape == (3, 1)
    np.testing.assert_array_equal(label[:, 0], [0, 1, 2])
    (only,) = default_collate_fn([np.zeros((2, 2)), np.ones((2, 2))])
    assert only.shape == (2, 2, 2)
    with pytest.raises(ValueError, match="every sample must have 2 fields"):
        default_collate_fn([[1, 2], [3]])


# -- the extractor ------------------------------------------------------------------------------
def _write(root, rel, text):
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_extractor_evaluates_all_statically(tmp_path, monkeypatch, capsys):
    """__all__ as literals, +=, module-level lists and other modules' __all__; a module
    without __all__ gives its public functions and classes."""
    fl = "python/paddle/fluid"
    _write(tmp_path, f"{fl}/__init__.py", "")
    _write(tmp_path, f"{fl}/layers/__init__.py", "")
    _write(tmp_path, f"{fl}/layers/ops.py",
           "_acts = ['exp', 'tanh']\n__all__ = []\n__all__ += _acts\n__all__ += ['gelu']\n"
           "__all__ += ['exp']\n")
    _write(tmp_path, f"{fl}/layers/utils.py",
           "import os\ndef flatten(n): pass\ndef _hidden(): pass\nclass Nest: pass\nX = 1\n")
    _write(tmp_path, f"{fl}/contrib/__init__.py", "")
    _write(tmp_path, f"{fl}/contrib/layers/__init__.py",
           "from . import nn\nfrom .nn import *\nfrom .rnn_impl import *\n__all__ = []\n"
           "__all__ += nn.__all__\n__all__ += rnn_impl.__all__\n")
    _write(tmp_path, f"{fl}/contrib/layers/nn.py", "__all__ = ['tree_conv']\n")
    _write(tmp_path, f"{fl}/contrib/layers/rnn_impl.py",
           "__all__ = ('basic_lstm', 'basic_gru')\n")
    rows = extract.rows(str(tmp_path), ("layers.ops", "layers.utils", "contrib.layers"))
    assert rows == [("fluid.contrib.layers", "basic_gru"), ("fluid.contrib.layers", "basic_lstm"),
                    ("fluid.contrib.layers", "tree_conv"), ("fluid.layers.ops", "exp"),
                    ("fluid.layers.ops", "gelu"), ("fluid.layers.ops", "tanh"),
                    ("fluid.layers.utils", "Nest"), ("fluid.layers.utils", "flatten")]
    # an unpacked wheel (paddle/fluid at the top, version.py naming the commit) works too
    wheel = tmp_path / "wheel"
    _write(wheel, "paddle/fluid/__init__.py", "")
    _write(wheel, "paddle/fluid/evaluator.py", "__all__ = ['ChunkEvaluator']\n")
    _write(wheel, "paddle/version.py", "full_version = '1.8.5'\ncommit = 'abc'\n")
    assert extract.rows(str(wheel), ("evaluator",)) == [("fluid.evaluator", "ChunkEvaluator")]
    assert extract.source_note(str(wheel)) == "paddlepaddle 1.8.5, commit abc"
    # the command line: the header, then module<TAB>name rows
    monkeypatch.setattr(extract, "MODULES", ("evaluator", "layers.device"))
    _write(wheel, "paddle/fluid/layers/device.py", "__all__ = []\n")
    assert extract.main([str(wheel)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# fluid 1.8's sub-module public names")
    assert "(read from paddlepaddle 1.8.5, commit abc)" in out
    assert "Modules with no public name: fluid.layers.device." in out
    assert out.endswith("fluid.evaluator\tChunkEvaluator\n")
