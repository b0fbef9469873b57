"""The command line, run as a subprocess (``python -m fluidlite`` and the console script)."""
import contextlib
import io
import json
import shutil
import subprocess
import sys

import networkx as nx
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite import cli
from fluidlite.core import serialize


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
    assert "fetches: fc_1.tmp_2 [-1, 2] float32" in text
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
