"""Model files and directories from strangers: block trees that would hang or recurse, manifests
that lead outside their directory, FIFOs, and saves interrupted after their commit."""
import copy
import json
import os
import threading

import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.formats import checkpoint
from fluidlite.formats.paddle import PaddleFormatError, program_from_bytes, program_to_bytes
from fluidlite.formats.serialize import ProgramFormatError, loads_program


def loop_program():
    """A program of two blocks: a While loop counting to 3."""
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        i = fluid.layers.fill_constant([1], "int64", 0)
        n = fluid.layers.fill_constant([1], "int64", 3)
        cond = fluid.layers.less_than(i, n)
        w = fluid.layers.While(cond)
        with w.block():
            fluid.layers.increment(i, in_place=True)
            fluid.layers.less_than(i, n, cond=cond)
    return main


def _finishes(fn, seconds=5.0):
    """Run fn in a thread: (finished in time, its exception)."""
    out = {}

    def run():
        try:
            fn()
        except BaseException as e:          # noqa: BLE001 -- inspected by the test
            out["e"] = e
    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(seconds)
    return not t.is_alive(), out.get("e")


def _json_variants():
    doc = loop_program().to_dict()
    cyclic = copy.deepcopy(doc)
    cyclic["blocks"].append(dict(copy.deepcopy(doc["blocks"][1]), idx=2, parent_idx=1))
    cyclic["blocks"][1]["parent_idx"] = 2                       # 1 -> 2 -> 1
    own = copy.deepcopy(doc)
    for op in own["blocks"][0]["ops"]:
        if op["type"] == "while":
            op["attrs"]["sub_block"] = {"@block": 0}              # the while runs its own block
    deep = copy.deepcopy(doc)
    for k in range(2, 102):                                       # 100 nested levels
        deep["blocks"].append({"idx": k, "parent_idx": k - 1, "forward_block_idx": -1,
                               "vars": [], "ops": []})
    return {"cyclic parents": cyclic, "sub-block is its own block": own, "100 deep": deep}


@pytest.mark.parametrize("case", sorted(_json_variants()))
def test_json_programs_with_a_bad_block_tree_are_refused_at_once(case):
    text = json.dumps(_json_variants()[case])
    done, error = _finishes(lambda: loads_program(text, "m.json"))
    assert done, f"{case}: loading hangs"
    assert isinstance(error, ProgramFormatError), error
    assert "block" in str(error)


@pytest.mark.parametrize("case", ["cyclic parents", "sub-block is its own block"])
def test_protobuf_programs_with_a_bad_block_tree_are_refused_at_once(case):
    from fluidlite.formats.paddle.proto import messages
    msg = messages()["ProgramDesc"]()
    msg.ParseFromString(bytes(program_to_bytes(loop_program())))
    if case == "cyclic parents":
        extra = msg.blocks.add()
        extra.CopyFrom(msg.blocks[1])
        extra.idx, extra.parent_idx = 2, 1
        msg.blocks[1].parent_idx = 2
    else:
        for op in msg.blocks[0].ops:
            if op.type == "while":
                for a in op.attrs:
                    if a.name == "sub_block":
                        a.block_idx = 0
    done, error = _finishes(lambda: program_from_bytes(msg.SerializeToString(), "__model__"))
    assert done, f"{case}: loading hangs"
    assert isinstance(error, PaddleFormatError), error


def test_a_well_formed_loop_still_loads_and_runs():
    main = loop_program()
    for back in (loads_program(json.dumps(main.to_dict())),
                 program_from_bytes(bytes(program_to_bytes(main)), "m")):
        assert len(back.blocks) == 2


def _save(tmp_path, value):
    checkpoint.publish(tmp_path, {"w": np.full(4, value, "float32").tobytes()})


def test_a_staging_symlink_never_moves_a_file_from_outside_into_the_directory(tmp_path):
    d, outside = tmp_path / "model", tmp_path / "secret"
    d.mkdir()
    outside.mkdir()
    _save(d, 1.0)
    (outside / "w").write_bytes(b"S" * 16)                     # same size as the real "w"
    staging = ".fluidlite-staging-0123456789abcdef"
    os.symlink(outside, d / staging)
    manifest = json.loads((d / checkpoint.MANIFEST_NAME).read_text())
    manifest["staging"] = staging
    (d / checkpoint.MANIFEST_NAME).write_text(json.dumps(manifest))
    with checkpoint.Reader(d) as r:                             # loaders do not follow it
        assert r.read_bytes("w") == np.full(4, 1.0, "float32").tobytes()
    _save(d, 2.0)                                               # nor does the next save
    assert (outside / "w").read_bytes() == b"S" * 16
    assert (d / "w").read_bytes() == np.full(4, 2.0, "float32").tobytes()
    assert os.path.exists(outside)


def test_an_error_after_the_commit_keeps_the_new_checkpoint(tmp_path, monkeypatch):
    _save(tmp_path, 1.0)
    real = checkpoint._fsync_dir
    calls = {"n": 0}

    def flaky(directory):
        calls["n"] += 1
        if calls["n"] == 2:             # the fsync right after the manifest's rename
            raise KeyboardInterrupt
        real(directory)
    monkeypatch.setattr(checkpoint, "_fsync_dir", flaky)
    with pytest.raises(KeyboardInterrupt):
        _save(tmp_path, 2.0)
    monkeypatch.setattr(checkpoint, "_fsync_dir", real)
    with checkpoint.Reader(tmp_path) as r:
        assert r.read_bytes("w") == np.full(4, 2.0, "float32").tobytes()


def test_a_fifo_manifest_or_file_is_refused_not_read(tmp_path):
    _save(tmp_path, 1.0)
    os.mkfifo(tmp_path / "fifo")
    done, error = _finishes(lambda: checkpoint.Reader(tmp_path).__enter__().read_bytes("fifo"))
    assert done and isinstance(error, checkpoint.CheckpointError)
    os.unlink(tmp_path / checkpoint.MANIFEST_NAME)
    os.mkfifo(tmp_path / checkpoint.MANIFEST_NAME)
    done, error = _finishes(lambda: checkpoint.Reader(tmp_path).__enter__())
    assert done, "a FIFO manifest hangs the loader"
    assert isinstance(error, checkpoint.CheckpointError) and "not a regular file" in str(error)


def _hostile_program():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("<!--<script>\x01x\x1b[31m", [2], "float32")
        fluid.layers.scale(x, 2.0, name="</script><b>&")
    return main


def test_the_html_viewer_carries_hostile_names_as_data():
    from fluidlite.viz.interactive import to_interactive_html
    page = to_interactive_html(_hostile_program())
    script = page[page.index("<script"):]
    # only the page's own tags: no name can open or close an element or a comment
    assert "<!--" not in page and "</script><b>" not in page
    assert script.count("</script>") == page.count("<script")


def test_graphml_with_control_characters_is_well_formed_xml():
    import xml.dom.minidom
    from fluidlite import viz
    doc = viz.to_graphml(_hostile_program())
    xml.dom.minidom.parseString(doc.encode("utf-8"))
    assert "\\x01x" in doc


def test_info_never_writes_a_models_escape_sequences_to_the_terminal(tmp_path):
    import subprocess
    import sys
    main = _hostile_program()
    x = main.global_block().var("<!--<script>\x01x\x1b[31m")
    y = main.global_block().ops[-1].output("Out")[0]
    with pytest.warns(UserWarning):
        fluid.io.save_inference_model(str(tmp_path), [x.name], [main.global_block().var(y)],
                                      fluid.Executor(), main_program=main)
    out = subprocess.run([sys.executable, "-m", "fluidlite", "info", str(tmp_path)],
                         capture_output=True, text=True, check=True).stdout
    assert "\x1b" not in out and "\x01" not in out and "\\x1b[31m" in out


def _inference_dir(tmp_path, fmt):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [-1, 4], "float32")
        w = fluid.layers.create_parameter([4], "float32", name="w0")
        y = fluid.layers.elementwise_add(x, w)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    d = tmp_path / fmt
    kwargs = {} if fmt == "paddle" else {"model_filename": "model.json", "format": "json"}
    fluid.io.save_inference_model(str(d), ["x"], [y], exe, main_program=main, **kwargs)
    return d, exe


# (op type, slot kind, slot): the one variable a feed / fetch op names
_TARGET_SLOTS = [("feed", "outputs", "Out"), ("fetch", "inputs", "X")]


@pytest.mark.parametrize("op_type,kind,slot", _TARGET_SLOTS)
@pytest.mark.parametrize("how", ["empty slot", "no slot", "two variables"])
def test_feed_and_fetch_ops_without_one_argument_are_refused_naming_the_file(
        tmp_path, op_type, kind, slot, how):
    from fluidlite.formats.paddle.proto import messages
    d, exe = _inference_dir(tmp_path, "paddle")
    msg = messages()["ProgramDesc"]()
    msg.ParseFromString((d / "__model__").read_bytes())
    op = next(o for o in msg.blocks[0].ops if o.type == op_type)
    slots = getattr(op, kind)
    if how == "no slot":
        del slots[:]
    else:
        arg = next(s for s in slots if s.parameter == slot)
        arg.arguments[:] = [] if how == "empty slot" else [arg.arguments[0]] * 2
    (d / "__model__").write_bytes(msg.SerializeToString())
    os.unlink(d / checkpoint.MANIFEST_NAME)             # as a stranger's directory comes
    with pytest.raises(PaddleFormatError) as e:         # not IndexError, not at run time
        fluid.io.load_inference_model(str(d), exe)
    assert "__model__" in str(e.value) and f"'{op_type}'" in str(e.value)
    assert f"slot '{slot}'" in str(e.value)


@pytest.mark.parametrize("op_type,kind,slot", _TARGET_SLOTS)
@pytest.mark.parametrize("how", ["empty slot", "no slot", "negative col", "string col"])
def test_json_feed_and_fetch_ops_are_checked_like_protobuf_ones(tmp_path, op_type, kind,
                                                                slot, how):
    d, exe = _inference_dir(tmp_path, "json")
    doc = json.loads((d / "model.json").read_text())
    op = next(o for o in doc["blocks"][0]["ops"] if o["type"] == op_type)
    if how == "empty slot":
        op[kind][slot] = []
    elif how == "no slot":
        op[kind] = {}
    else:
        op["attrs"]["col"] = -1 if how == "negative col" else "0"
    (d / "model.json").write_text(json.dumps(doc))
    os.unlink(d / checkpoint.MANIFEST_NAME)
    with pytest.raises(ProgramFormatError) as e:
        fluid.io.load_inference_model(str(d), exe, model_filename="model.json")
    assert "model.json" in str(e.value) and f"'{op_type}'" in str(e.value)
    assert ("attribute 'col'" if "col" in how else f"slot '{slot}'") in str(e.value)


def test_well_formed_inference_directories_still_load(tmp_path):
    for fmt, kwargs in [("paddle", {}), ("json", {"model_filename": "model.json"})]:
        d, exe = _inference_dir(tmp_path, fmt)
        program, feeds, fetches = fluid.io.load_inference_model(str(d), exe, **kwargs)
        assert feeds == ["x"] and len(fetches) == 1
        out, = exe.run(program, feed={"x": np.ones((2, 4), "float32")}, fetch_list=fetches)
        assert out.shape == (2, 4)
