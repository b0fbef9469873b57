"""The hierarchical viewer's group tree (fluidlite/viz/hierarchy.py) and its one-file page
(fluidlite/viz/viewer.py with the vendored elkjs); the browser side is in
tests/test_viz_elk_browser.py."""
import hashlib
import importlib.util
import json
import os
import re

import pytest

import fluidlite as fluid
import fluidlite.viz as viz
from fluidlite.viz import viewer
from fluidlite.viz.hierarchy import group_tree, natural_key

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _bench():
    spec = importlib.util.spec_from_file_location(
        "viz_scale", os.path.join(ROOT, "bench", "viz_scale.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def resnet():
    with fluid.unique_name.guard():
        return _bench().build_resnet50(image_size=32, classes=10)


def _tree(g):
    groups, where = group_tree(g)
    kids = {}
    for i, gr in enumerate(groups):
        kids.setdefault(gr["p"], []).append(i)
    return groups, where, kids


def test_resnet_groups_passes_stages_and_series(resnet):
    g = viz.to_networkx(resnet)
    groups, where, kids = _tree(g)
    top = [groups[i]["n"] for i in kids[-1]]
    assert top == ["forward", "backward", "gradient clip", "optimizer"]
    n_params = sum(p.trainable for p in resnet.global_block().all_parameters())   # 161
    n_ops = len(resnet.global_block().ops)
    # every op is in exactly one group, the counts add up
    assert len(where) == n_ops
    assert sum(groups[i]["c"] for i in kids[-1]) + sum(1 for w in where.values() if w < 0) \
        == n_ops
    fwd = kids[-1][0]
    assert [groups[i]["n"] for i in kids[fwd]] == ["conv1", "res2", "res3", "res4", "res5"]
    # the backward pass mirrors the forward stages (grad ops take their forward op's scope)
    bwd = kids[-1][1]
    assert [groups[i]["n"] for i in kids[bwd]] == ["conv1", "res2", "res3", "res4", "res5"]
    conv_grads = [o for o, w in where.items() if g.nodes[o]["fl_type"] == "conv2d_grad"]
    assert all(w != bwd and groups[w]["n"] in ("conv1", "branch1", "branch2")
               for w in (where[o] for o in conv_grads))
    # per-parameter clip chains and momentum updates: one series each
    clip, opt = kids[-1][2], kids[-1][3]
    series = [i for i in kids[clip] if groups[i]["k"] == "series"]
    assert len(series) == 1 and groups[series[0]]["x"] == n_params
    assert groups[series[0]]["n"] == f"squared_l2_norm + elementwise_mul \u00d7{n_params}"
    assert [groups[i]["n"] for i in kids[opt]] == [f"momentum \u00d7{n_params}"]
    # alike residual blocks: res4's block1..block5 are one series, numbered in order
    res4 = kids[fwd][3]
    names = [groups[i]["n"] for i in kids[res4]]
    assert names == ["block0", "block_* \u00d75"]
    inst = [groups[i]["n"] for i in kids[kids[res4][1]]]
    assert inst == ["block1", "block2", "block3", "block4", "block5"]


def test_numbered_scopes_sort_numerically_and_group():
    prog = fluid.Program()
    with fluid.program_guard(prog):
        h = fluid.data("x", [-1, 4], "float32")
        for i in [0, 1, 2, 10, 11, 3]:
            with fluid.name_scope(f"layer{i}"):
                h = fluid.layers.relu(fluid.layers.scale(h, 2.0))
    groups, where, kids = _tree(viz.to_networkx(prog))
    fwd = kids[-1][0]
    (series,) = kids[fwd]
    assert groups[series]["k"] == "series" and groups[series]["x"] == 6
    assert [groups[i]["n"] for i in kids[series]] == \
        ["layer0", "layer1", "layer2", "layer3", "layer10", "layer11"]
    assert sorted(["b10", "b2", "a1"], key=natural_key) == ["a1", "b2", "b10"]


def test_regularization_chains_and_empty_program():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("x", [-1, 4], "float32")
        h = x
        for _ in range(3):
            h = fluid.layers.fc(h, size=4)
        loss = fluid.layers.mean(h)
        fluid.optimizer.SGD(0.1, regularization=fluid.regularizer.L2Decay(1e-4)).minimize(loss)
    groups, where, kids = _tree(viz.to_networkx(main))
    reg = next(i for i in kids[-1] if groups[i]["n"] == "regularization")
    (series,) = kids[reg]
    assert groups[series]["x"] == 6 and groups[series]["n"].startswith("scale + sum")
    assert group_tree(viz.to_networkx(fluid.Program())) == ([], {})


def _data_of(page):
    return json.loads(re.search(r'<script id="fl-data" type="application/json">(.*?)</script>',
                                page, re.S).group(1))


def test_elk_page_is_one_offline_file_with_the_vendored_engine(tmp_path, resnet):
    path = viz.export(resnet, tmp_path / "r.html", title="resnet </script><!--")
    page = open(path, encoding="utf-8").read()
    assert page.count("<script") == 2 and page.count("</script>") == 2
    assert "<!--" not in page and "<title>resnet &lt;/script&gt;&lt;!--</title>" in page
    assert not re.search(r'(src|href)\s*=\s*"(https?:)?//', page)
    elk = open(viewer.ELK_FILE, encoding="utf-8").read()
    assert "function flElkWorker(){\n" + elk in page      # the engine, inlined verbatim
    assert "new Worker(URL.createObjectURL(new Blob(" in page
    doc = _data_of(page)
    data = doc["views"][0]
    assert data["engine"] == "elk" and data["title"] == "resnet </script><!--"
    ops = [n for n in data["nodes"] if n["k"] == "o"]
    assert len(ops) == len(resnet.global_block().ops)
    assert all(-1 <= n["gp"] < len(data["groups"]) for n in ops)
    assert {"forward", "backward", "gradient clip", "optimizer"} <= \
        {gr["n"] for gr in data["groups"] if gr["p"] == -1}
    # the vendored library: pinned version, licence next to it, installed with the package
    version = open(viewer.ELK_VERSION_FILE).read()
    assert version.startswith("elkjs 0.11.0") and "EPL-2.0" in version
    # the file is the one vendor/update.sh copied from the pinned npm tarball, unedited
    digest = hashlib.sha256(elk.encode("utf-8")).hexdigest()
    assert f"elk-worker.min.js sha256 {digest}" in version
    assert "VERSION=0.11.0" in open(os.path.join(os.path.dirname(viewer.ELK_FILE),
                                                 "update.sh")).read()
    assert "Eclipse Public License - v 2.0" in open(
        os.path.join(os.path.dirname(viewer.ELK_FILE), "elkjs-LICENSE.md")).read()
    # setup.cfg ships them (one name a line: a multi-line value is not split at commas)
    setupcfg = pytest.importorskip("setuptools.config.setupcfg")
    data = setupcfg.read_configuration(os.path.join(ROOT, "setup.cfg"))["options"][
        "package_data"]["fluidlite.viz"]
    assert {"static/viewer.js", "static/viewer.css", "vendor/elk-worker.min.js",
            "vendor/elkjs-LICENSE.md", "vendor/ELKJS_VERSION"} <= set(data)
    here = os.path.dirname(viewer.__file__)
    assert all(os.path.isfile(os.path.join(here, f)) for f in data)


def test_layout_option_is_checked():
    with pytest.raises(ValueError, match="layout engine must be elk, auto, dot or layered"):
        viz.to_interactive_html(fluid.Program(), layout="dagre")


def test_hostile_names_are_data_in_the_elk_page():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("<!--<script>\x01x\x1b[31m", [2], "float32")
        with fluid.name_scope("</script><b>&"):
            fluid.layers.scale(x, 2.0, name="</script><img src=x onerror=alert(1)>")
    page = viz.to_interactive_html(main)
    assert "<!--" not in page and "</script><b>" not in page and "<img" not in page
    assert page.count("</script>") == page.count("<script") == 2
    names = {n.get("t") for n in _data_of(page)["views"][0]["nodes"]}
    assert "<!--<script>\x01x\x1b[31m" in names


def test_profile_overlay_data_and_errors(tmp_path):
    import numpy as np
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [-1, 3], "float32")
        loss = fluid.layers.mean(fluid.layers.fc(x, size=2))
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    exe.run(main, feed={"x": np.ones((2, 3), "float32")}, fetch_list=[loss], profile=True)
    prof = _data_of(viz.to_interactive_html(main, profile=exe.last_profile))["views"][0]["prof"]
    # by the plan's steps: the fc layer's mul and bias add ran as one fused kernel
    assert set(prof) == {"fused(mul+elementwise_add)", "mean"}
    assert all(ms >= 0 and calls == 1 for ms, calls, total in prof.values())
    # per op of the Program (block:index), a fused step's time split between its ops
    data = _data_of(viz.to_interactive_html(main, profile=exe.last_profile))["views"][0]
    ops = main.global_block().ops
    assert set(data["profop"]) == {f"0:{i}" for i in range(len(ops))}
    assert all(ms >= 0 and calls == 1 for ms, calls, total in data["profop"].values())
    by_pos, by_type = exe.last_profile.by_pos, exe.last_profile.by_type
    assert abs(sum(s.total for s in by_pos.values())
               - sum(s.total for s in by_type.values())) < 1e-9
    with pytest.raises(TypeError, match="fluidlite.profiler.Profile"):
        viz.to_interactive_html(main, profile={"mul": 1.0})
    with pytest.raises(ValueError, match="ELK viewer"):
        viz.to_interactive_html(main, profile=exe.last_profile, layout="layered")
    with pytest.raises(ValueError, match="interactive html viewer only"):
        viz.export(main, tmp_path / "a.svg", profile=exe.last_profile)
    assert not (tmp_path / "a.svg").exists()


def _clip_momentum_run():
    """A small training program whose plan fuses the global-norm clip (one step, 9 ops);
    profiled once."""
    import numpy as np
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [-1, 4], "float32")
        h = fluid.layers.fc(x, size=8, act="relu")
        loss = fluid.layers.mean(fluid.layers.fc(h, size=1))
        fluid.optimizer.Momentum(0.1, 0.9, grad_clip=fluid.clip.GradientClipByGlobalNorm(1.0)
                                 ).minimize(loss)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    exe.run(main, feed={"x": np.ones((8, 4), "float32")}, fetch_list=[loss], profile=True)
    return main, exe.last_profile


def test_profile_times_each_op_and_splits_a_fused_step():
    main, prof = _clip_momentum_run()
    from fluidlite.executor import plan
    if not plan.ENABLE_FUSION:
        pytest.skip("plan-time fusion is switched off")
    ops = main.global_block().ops
    fused = prof.by_type.get("fused(global_norm)")
    assert fused is not None and fused.calls == 1, sorted(prof.by_type)
    members = [i for i, op in enumerate(ops) if op.type in ("squared_l2_norm", "sqrt")]
    assert len(members) >= 5
    # the fused step's time is split evenly between the ops it replaced
    shares = {prof.by_pos[(0, i)].total for i in members}
    assert len({round(s, 15) for s in shares}) == 1
    assert abs(shares.pop() * 9 - fused.total) < 1e-12
    # every step's time is filed under some op: the per-op times add up to the per-type ones
    assert abs(sum(s.total for s in prof.by_pos.values())
               - sum(s.total for s in prof.by_type.values())) < 1e-9
    assert all(s.calls == 1 for s in prof.by_pos.values())
    assert set(prof.by_pos) <= {(0, i) for i in range(len(ops))}
    data = _data_of(viz.to_interactive_html(main, profile=prof))["views"][0]
    assert set(data["profop"]) == {f"{b}:{i}" for b, i in prof.by_pos}
    b, i = next(iter(prof.by_pos))
    assert data["profop"][f"{b}:{i}"][0] == round(prof.by_pos[(b, i)].ave * 1e3, 4)


def test_profile_without_per_op_records_still_draws_by_type():
    """``Profile.add_run(types, times)`` (no plan steps), as before per-op records: the page
    carries the per-type times only and the viewer colours ops by their type's average."""
    from fluidlite import profiler
    main, _ = _clip_momentum_run()
    prof = profiler.Profile()
    prof.add_run(["mul", "relu"], [0.002, 0.001])
    prof.add_run(["mul", "relu"], [0.004, 0.001])
    assert prof.by_pos == {} and prof.by_type["mul"].calls == 2
    assert viewer.profile_op_times(prof) == {}
    assert viewer.profile_times(prof)["mul"] == [3.0, 2, 6.0]
    data = _data_of(viz.to_interactive_html(main, profile=prof))["views"][0]
    assert "profop" not in data and set(data["prof"]) == {"mul", "relu"}
    # with plan steps (as the executor passes them): a step covering two ops halves its time
    # between them, runs accumulate per op, positions a plan could not place (-1) are skipped
    from fluidlite.executor.records import StepInfo
    steps = [StepInfo("fused(x)", (("mul", 0), ("relu", 1)), None, ()),
             StepInfo("mean", (("mean", -1),), None, ())]
    prof.add_run(["fused(x)", "mean"], [0.004, 0.001], steps)
    prof.add_run(["fused(x)", "mean"], [0.002, 0.001], steps)
    assert set(prof.by_pos) == {(0, 0), (0, 1)}
    assert prof.by_pos[(0, 0)].calls == 2 and abs(prof.by_pos[(0, 1)].total - 0.003) < 1e-12
    assert viewer.profile_op_times(prof) == {"0:0": [1.5, 2, 3.0], "0:1": [1.5, 2, 3.0]}
