"""The command line, run as a subprocess (``python -m fluidlite`` and the console script)."""
import contextlib
import io
import json
import os
import shutil
import subprocess
import sys

import networkx as nx
import pytest

import fluidlite as fluid
from fluidlite import cli
from fluidlite.formats import checkpoint, serialize


class Result:
    def __init__(self, returncode, stdout, stderr):
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


def run(*args, check_rc=None):
    """``fluidlite ARGS`` in this process (fast); ``run_subprocess`` spawns the real thing."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = cli.main([str(a) for a in args])
        except SystemExit as e:          # argparse: --help, --version, usage errors
            rc = e.code if isinstance(e.code, int) else 1
    res = Result(rc, out.getvalue(), err.getvalue())
    if check_rc is not None:
        assert rc == check_rc, (rc, res.stdout, res.stderr)
    return res


def run_subprocess(*args, check_rc=None):
    proc = subprocess.run([sys.executable, "-m", "fluidlite", *map(str, args)],
                          capture_output=True, text=True, timeout=120)
    if check_rc is not None:
        assert proc.returncode == check_rc, (proc.returncode, proc.stdout, proc.stderr)
    return proc


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """An inference-model dir, a training program file and its pre-minimize clone."""
    root = tmp_path_factory.mktemp("cli")
    main, startup = fluid.Program(), fluid.Program()
    with fluid.unique_name.guard(), fluid.program_guard(main, startup):
        x = fluid.data(name="x", shape=[-1, 3], dtype="float32")
        h = fluid.layers.fc(input=x, size=4, act="relu")
        pred = fluid.layers.fc(input=h, size=2, act="softmax")
        loss = fluid.layers.mean(pred)
        before = main.clone()
        fluid.optimizer.SGD(0.1, grad_clip=fluid.clip.GradientClipByGlobalNorm(1.0)).minimize(
            loss)
    exe = fluid.Executor(fluid.CPUPlace())
    with fluid.scope_guard(fluid.Scope()):
        exe.run(startup)
        fluid.io.save_inference_model(str(root / "model"), ["x"], [pred], exe, main)
        fluid.save(main, str(root / "ckpt" / "train"))
    serialize.save_program(main, root / "train.json")
    serialize.save_program(before, root / "before.json")
    return root


def test_through_a_subprocess(saved, tmp_path):
    proc = run_subprocess("--help", check_rc=0)
    assert "usage: fluidlite" in proc.stdout and "viz" in proc.stdout
    proc = run_subprocess("viz", saved / "model", "--block", "x", check_rc=2)
    assert len(proc.stderr.strip().splitlines()) == 1 and "invalid int value" in proc.stderr
    run_subprocess("viz", saved / "train.json", "-o", tmp_path / "g.graphml", check_rc=0)
    assert nx.read_graphml(tmp_path / "g.graphml", force_multigraph=True).number_of_nodes()


def test_help_everywhere():
    for args in ([], ["viz"], ["info"], ["ops"]):
        proc = run(*args, "--help", check_rc=0)
        assert "usage: fluidlite" in proc.stdout
    assert "--hide-backward" in run("viz", "--help").stdout
    assert run("--version", check_rc=0).stdout.startswith("fluidlite ")


@pytest.mark.parametrize("args", [[], ["bogus"], ["viz"], ["viz", "x", "--block", "one"],
                                  ["viz", "x", "-f", "gif"], ["info", "/no/such/file"],
                                  ["ops", "("]])
def test_bad_arguments_exit_2_with_one_line(args):
    proc = run(*args, check_rc=2)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "error:" in lines[0], proc.stderr
    assert proc.stdout == ""


def test_info_of_an_inference_model(saved):
    text = run("info", saved / "model", check_rc=0).stdout
    assert "parameters: 4 (26 values)" in text
    assert "fc_0.w_0" in text and "[3, 4]" in text
    assert "feeds: x [-1, 3] float32" in text
    assert "fetches: save_infer_model/scale_0 [-1, 2] float32" in text
    info = json.loads(run("info", saved / "ckpt" / "train.pdparams", "--json",
                          check_rc=0).stdout)
    assert info["parameter_count"] == 26
    assert {"forward", "loss", "backward", "gradient_clip", "optimize"} <= \
        set(info["ops_by_role"])
    assert info["optimizer_state"] == ["learning_rate_0"]


def test_ops_listing():
    text = run("ops", "^mul$", check_rc=0).stdout
    assert "inputs:   X, Y" in text and "x_num_col_dims=1" in text
    assert "gradient: mul_grad" in text and text.strip().endswith("1 op(s)")
    entries = json.loads(run("ops", "--json", check_rc=0).stdout)
    by_type = {e["type"]: e for e in entries}
    assert by_type["sum"]["inputs"] == ["X*"] and by_type["sum"]["has_gradient"]
    assert by_type["fill_constant"]["has_gradient"] is False
    assert not any(t.endswith("_grad") for t in by_type)
    with_grads = json.loads(run("ops", "relu", "--with-grad-ops", "--json", check_rc=0).stdout)
    assert "relu_grad" in {e["type"] for e in with_grads}


def test_viz_exports(saved, tmp_path):
    dot_text = run("viz", saved / "model", check_rc=0).stdout
    assert dot_text.startswith("digraph") and '"op:0:0"' in dot_text
    run("viz", saved / "train.json", "-o", tmp_path / "g.graphml", "--hide-backward",
        check_rc=0)
    g = nx.read_graphml(tmp_path / "g.graphml", force_multigraph=True)
    assert not any(d.get("fl_role") == "backward" for _, d in g.nodes(data=True))
    doc = json.loads(run("viz", saved / "train.json", "-f", "json", check_rc=0).stdout)
    assert doc["multigraph"] and doc["nodes"]
    txt = run("viz", saved / "model", "-f", "txt", check_rc=0).stdout
    assert txt.startswith("{ // block 0") and "feed(" in txt


@pytest.fixture
def no_graphviz(monkeypatch):
    """A machine without Graphviz: no `dot` on PATH and no pygraphviz."""
    import builtins
    from fluidlite.viz import dot as dot_mod
    real_which, real_import = shutil.which, builtins.__import__
    monkeypatch.setattr(dot_mod.shutil, "which",
                        lambda name, *a, **k: None if name == "dot" else real_which(name, *a, **k))

    def no_pygraphviz(name, *args, **kwargs):
        if name == "pygraphviz":
            raise ImportError("no pygraphviz")
        return real_import(name, *args, **kwargs)
    monkeypatch.setattr(builtins, "__import__", no_pygraphviz)


def test_viz_help_says_what_needs_graphviz():
    text = " ".join(run("viz", "--help", check_rc=0).stdout.split())
    assert "Only PNG and PDF need Graphviz" in text and "apt-get install graphviz" in text
    assert "SVG is drawn by Graphviz when it is installed and by fluidlite's own" in text
    assert "DOT, GraphML, JSON and text need nothing" in text and "--renderer" in text


def test_viz_without_graphviz(saved, tmp_path, no_graphviz):
    import xml.etree.ElementTree as ET
    from fluidlite.viz.svg import GENERATOR
    run("viz", saved / "train.json", "-o", tmp_path / "g.svg", "--highlight", "fc_0",
        check_rc=0)
    text = (tmp_path / "g.svg").read_text()
    assert text.startswith("<?xml") and GENERATOR in text
    ET.fromstring(text.encode())
    out = run("viz", saved / "train.json", "-f", "svg", "--rankdir", "LR", check_rc=0).stdout
    assert GENERATOR in out and "op:0:0" in ET.fromstring(out.encode()).findtext(
        ".//{http://www.w3.org/2000/svg}g/{http://www.w3.org/2000/svg}title")
    page = run("viz", saved / "train.json", "-f", "html-static", check_rc=0).stdout
    assert "<svg" in page and "(Graphviz was not used)" in page
    for fmt in ("png", "pdf"):
        proc = run("viz", saved / "train.json", "-o", tmp_path / f"g.{fmt}", check_rc=1)
        assert len(proc.stderr.strip().splitlines()) == 1
        assert f"Rendering {fmt.upper()} needs Graphviz" in proc.stderr
        assert "apt-get install graphviz" in proc.stderr and "fluidlite[viz]" in proc.stderr
        assert not (tmp_path / f"g.{fmt}").exists()
    proc = run("viz", saved / "train.json", "-f", "svg", "--renderer", "graphviz", check_rc=1)
    assert "needs Graphviz" in proc.stderr and proc.stdout == ""


def test_viz_builtin_renderer_and_diff(saved, tmp_path):
    run("viz", saved / "train.json", "--diff-against", saved / "before.json", "-o",
        tmp_path / "d.svg", "--renderer", "builtin", "--title", "after minimize", check_rc=0)
    text = (tmp_path / "d.svg").read_text()
    assert "after minimize" in text and "+ sgd" in text


@pytest.mark.skipif(shutil.which("dot") is None, reason="graphviz `dot` not installed")
def test_viz_pictures_and_diff(saved, tmp_path):
    run("viz", saved / "train.json", "-o", tmp_path / "g.svg", "--highlight", "fc_0",
        check_rc=0)
    assert (tmp_path / "g.svg").read_text().lstrip().startswith("<?xml")
    run("viz", saved / "train.json", "--diff-against", saved / "before.json", "-o",
        tmp_path / "d.html", "--title", "after minimize", check_rc=0)
    page = (tmp_path / "d.html").read_text()
    assert "<svg" in page and "after minimize" in page and "added ops" in page


def test_viz_errors(saved, tmp_path):
    proc = run("viz", saved / "model", "--block", "5", check_rc=2)
    assert "out of range" in proc.stderr
    proc = run("viz", saved / "model", "-f", "png", check_rc=2)
    assert "-o" in proc.stderr
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "fluidlite.program", "version": 99, "blocks": []}')
    proc = run("viz", bad, check_rc=1)
    assert "version 99" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    trunc = tmp_path / "trunc.json"
    trunc.write_text((saved / "train.json").read_text()[:200])
    proc = run("info", trunc, check_rc=1)
    assert "truncated" in proc.stderr
    empty = tmp_path / "empty_dir"
    empty.mkdir()
    assert "no __model__" in run("info", empty, check_rc=2).stderr


@pytest.mark.skipif(shutil.which("fluidlite") is None, reason="console script not installed")
def test_console_script(saved):
    proc = subprocess.run(["fluidlite", "info", str(saved / "model")], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0 and "feeds: x" in proc.stdout


# -- exit codes: 2 for usage errors, 1 for unreadable or corrupt inputs; one line, no traceback --
def _setup_inputs(saved, tmp):
    """Inputs for the exit-code table (paths relative to ``tmp``)."""
    shutil.copytree(saved / "model", tmp / "model")
    (tmp / "garbage.json").write_bytes(b"\x00\xff\x13 not a program")
    (tmp / "deep.json").write_text("[" * 100_000)
    (tmp / "trunc.json").write_text((saved / "train.json").read_text()[:300])
    (tmp / "newer.json").write_text('{"format": "fluidlite.program", "version": 99, '
                                    '"blocks": []}')
    (tmp / "unknown_op.json").write_text(
        '{"format": "fluidlite.program", "version": 1, "blocks": [{"idx": 0, "parent_idx": -1,'
        ' "vars": [], "ops": [{"type": "no_such_op"}]}]}')
    (tmp / "dir_model" / "__model__").mkdir(parents=True)
    (tmp / "two").mkdir()
    for n in ("a", "b"):
        shutil.copy(saved / "train.json", tmp / "two" / f"{n}.pdmodel")
    (tmp / "orphan.pdparams").write_bytes(b"x")
    shutil.copytree(saved / "model", tmp / "tampered")
    model = tmp / "tampered" / "__model__"
    model.write_bytes(model.read_bytes().replace(b"fc_0.w_0", b"fc_0.w_9", 1))   # same size
    (tmp / "out").mkdir()


@pytest.mark.parametrize("args, code, message", [
    (["info", "missing.json"], 2, "input 'missing.json' does not exist"),
    (["info", "orphan.pdparams"], 2, "input 'orphan.pdmodel' does not exist"),
    (["info", "out"], 2, "directory 'out' holds no __model__ file"),
    (["info", "two"], 2, "several .pdmodel files"),
    (["viz", "model", "--diff-against", "missing.json"], 2, "'missing.json' does not exist"),
    (["viz", "model", "-o", "no/such/dir/g.dot"], 2, "directory of output"),
    (["viz", "model", "-o", "out"], 2, "is a directory"),
    (["viz", "model", "-o", "g.bogus"], 2, "cannot tell the export format"),
    (["viz", "model", "--block", "7"], 2, "out of range"),
    (["viz", "model", "--highlight", "("], 2, "not a valid regex"),
    (["info", "garbage.json"], 1, "not UTF-8 JSON"),
    (["info", "deep.json"], 1, "deep.json' is not a valid fluidlite program: it is nested"),
    (["info", "trunc.json"], 1, "looks truncated"),
    (["info", "newer.json"], 1, "version 99"),
    (["info", "unknown_op.json"], 1, "'no_such_op' is not registered"),
    (["info", "dir_model"], 1, "is not a regular file"),
    (["info", "/dev/null"], 1, "is not a regular file"),
    (["info", "tampered"], 1, "does not match the checksum in the checkpoint manifest"),
])
def test_exit_codes(saved, tmp_path, monkeypatch, args, code, message):
    _setup_inputs(saved, tmp_path)
    monkeypatch.chdir(tmp_path)
    proc = run(*args, check_rc=code)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    if code == 2:
        assert lines[0].endswith("--help')")


def test_unexpected_failures_and_interrupts_are_one_line_too(saved, monkeypatch):
    def boom(program):
        raise KeyError("feeds")
    monkeypatch.setattr(cli, "_info", boom)
    proc = run("info", saved / "model", check_rc=1)
    assert proc.stderr == "fluidlite info: error: KeyError: 'feeds'\n"

    def interrupted(program):
        raise KeyboardInterrupt
    monkeypatch.setattr(cli, "_info", interrupted)
    assert run("info", saved / "model", check_rc=130).stderr == "fluidlite info: interrupted\n"


def test_unwritable_output_exits_1(saved, tmp_path, monkeypatch):
    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(serialize, "_write_file", full)
    proc = run("viz", saved / "model", "-o", tmp_path / "g.dot", check_rc=1)
    assert proc.stderr.strip().endswith("g.dot': No space left on device")


def test_reads_a_checkpoint_whose_publish_was_interrupted(saved, tmp_path, monkeypatch):
    """The CLI reads programs like fluid.io: a committed but unfinished save is read from its
    staging directory (here: the first save into the directory, so __model__ is nowhere else)."""
    real_replace, calls = os.replace, []

    def crash_on_second_replace(src, dst):
        calls.append(dst)
        if len(calls) == 2:
            raise KeyboardInterrupt
        real_replace(src, dst)
    program = fluid.io.read_program(str(saved / "model" / "__model__"))
    monkeypatch.setattr(os, "replace", crash_on_second_replace)
    with pytest.raises(KeyboardInterrupt):
        (tmp_path / "ck").mkdir()
        checkpoint.publish(tmp_path / "ck", {"__model__": serialize.dumps_program(
            program).encode(), "other": b"x"})
    monkeypatch.setattr(os, "replace", real_replace)
    assert not (tmp_path / "ck" / "__model__").exists()
    assert "feeds: x" in run("info", tmp_path / "ck", check_rc=0).stdout


def test_ops_says_where_each_op_is_defined(capsys):
    from fluidlite.cli import main
    assert main(["ops", "^relu$"]) == 0
    assert "    defined in: fluidlite/ops/activation.py (Relu)" in capsys.readouterr().out
