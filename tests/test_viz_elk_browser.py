"""The hierarchical viewer (ELK layout in a web worker) in real headless Chromium.

The quick start's training program and a ResNet-50-style training program (bench/viz_scale.py):
first-view grouping, expand / collapse re-layout keeping the clicked node in place, search,
trace, minimap, PNG / SVG export, role hiding, dark mode, hostile names. Skipped (with the
reason) only when selenium, Chromium or chromedriver is missing; .ci/run installs them.
"""
import base64
import importlib.util
import os
import shutil
import tempfile
import time

import pytest

import fluidlite as fluid
import fluidlite.viz as viz

selenium = pytest.importorskip("selenium", reason="selenium not installed (pip install selenium)")
from selenium import webdriver  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WINDOW = (1600, 1000)
CHROME_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
               "--disable-background-networking", "--disable-component-update",
               "--disable-sync", "--hide-scrollbars"]


def _load(path, name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, path))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def browser():
    chrome = shutil.which("chromium") or shutil.which("chromium-browser") \
        or shutil.which("google-chrome")
    driver_path = shutil.which("chromedriver")
    if not chrome or not driver_path:
        pytest.skip("no headless browser: install Debian's `chromium` and `chromium-driver` "
                    "(apt-get install -y chromium chromium-driver)")
    profile = tempfile.mkdtemp(prefix="fluidlite-chromium-")
    opts = webdriver.ChromeOptions()
    opts.binary_location = chrome
    for a in CHROME_ARGS + [f"--user-data-dir={profile}",
                            f"--window-size={WINDOW[0]},{WINDOW[1]}"]:
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    drv = webdriver.Chrome(options=opts, service=webdriver.ChromeService(
        executable_path=driver_path))
    inner = drv.execute_script("return [window.innerWidth, window.innerHeight]")
    drv.set_window_size(WINDOW[0] * 2 - inner[0], WINDOW[1] * 2 - inner[1])
    try:
        yield drv
    finally:
        drv.quit()
        shutil.rmtree(profile, ignore_errors=True)


def _js(drv, expr, *args):
    return drv.execute_script("return " + expr, *args)


def _open(drv, path):
    drv.get("file://" + os.path.abspath(path))
    end = time.monotonic() + 30
    while not _js(drv, "!!(window.fluidliteViewer && fluidliteViewer.ready)"):
        assert time.monotonic() < end, f"the viewer did not become ready: {_errors(drv)}"
        time.sleep(0.02)
    assert _js(drv, "window.innerWidth") == WINDOW[0]


def _idle(drv, layouts_before=None):
    """Wait until the worker has answered (and, given the count before, a new layout ran)."""
    end = time.monotonic() + 30
    while _js(drv, "fluidliteViewer.busy()") or (
            layouts_before is not None and _js(drv, "fluidliteViewer.layouts()") <= layouts_before):
        assert time.monotonic() < end, "the layout did not finish"
        time.sleep(0.02)


def _errors(drv):
    return [e for e in drv.get_log("browser") if e.get("level") == "SEVERE"]


def _units(drv):
    return set(_js(drv, "fluidliteViewer.units()"))


def _group(drv, name):
    g = _js(drv, "fluidliteViewer.findGroup(arguments[0])", name)
    assert g >= 0, name
    return g


def _rect(drv, unit):
    return _js(drv, "(function(r){return [r.left, r.top]})(document.querySelector("
                    "'[data-u=\"'+arguments[0]+'\"]').getBoundingClientRect())", unit)


def _label_px(drv):
    """Rendered size of the visible node labels: font size x zoom, min over those on screen."""
    return _js(drv, """(function(){var W=innerWidth,H=innerHeight,out=[];
      document.querySelectorAll('#gn .u .t1, #gn .u .t1b, #gg .gx>text').forEach(function(t){
       var r=t.getBoundingClientRect();if(r.right<0||r.left>W||r.bottom<0||r.top>H)return;
       out.push(parseFloat(getComputedStyle(t).fontSize)*fluidliteViewer.view.k);});
      return out;})()""")


def _quick_start():
    shots = _load("docs/make_screenshots.py", "make_screenshots")
    with shots._fresh_names():
        main, *_ = shots._sample("quick_start").build(clip_norm=0.5, lr=0.1)
    return main


def test_quick_start_groups_expand_search_trace_minimap_export(browser, tmp_path):
    main = _quick_start()
    _open(browser, viz.export(main, tmp_path / "qs.html", title="quick start"))
    assert _errors(browser) == []
    units = _units(browser)
    groups = _js(browser, "fluidliteViewer.groups")
    tops = [i for i, g in enumerate(groups) if g["p"] == -1]
    assert {groups[i]["n"] for i in tops} == {"forward", "backward", "gradient clip", "optimizer"}
    boxes = _js(browser, "fluidliteViewer.boxes()")
    for i in tops:                                  # every pass is drawn, as a box or open
        assert f"g{i}" in boxes or f"G{i}" in boxes
    assert min(_label_px(browser)) >= 10

    # expand a collapsed group by clicking it twice (select, then open): re-laid out, its ops
    # drawn, and the group stays where it was on the screen
    # (the gradient clip pass, collapsed at first: its ops and the per-parameter series)
    series = next(i for i in tops if groups[i]["n"] == "gradient clip")
    assert f"g{series}" in units
    before = _rect(browser, f"g{series}")
    n = _js(browser, "fluidliteViewer.layouts()")
    el = browser.find_element(By.CSS_SELECTOR, f'#gn [data-u="g{series}"]')
    el.click()
    assert "group gradient clip" in browser.find_element(By.ID, "panel").text
    el.click()
    _idle(browser, n)
    after = _rect(browser, f"G{series}")
    assert abs(after[0] - before[0]) < 2 and abs(after[1] - before[1]) < 2
    inner = _units(browser) - units
    kids = {f"g{i}" for i, g in enumerate(groups) if g["p"] == series}
    assert kids and kids <= inner                 # the per-parameter series, collapsed ...
    ops = {_js(browser, "fluidliteViewer.opType(arguments[0])", int(u[1:]))
           for u in inner if u[0] == "o"}
    assert {"sqrt", "sum", "cast", "elementwise_max"} <= ops      # ... and the shared ops
    # collapse it again by its title
    n = _js(browser, "fluidliteViewer.layouts()")
    browser.find_element(By.CSS_SELECTOR, f'#gg [data-u="G{series}"] > text').click()
    _idle(browser, n)
    assert _units(browser) == units

    # search lists results without moving the view; Enter goes to the first one
    view = _js(browser, "[fluidliteViewer.view.x, fluidliteViewer.view.y, fluidliteViewer.view.k]")
    box = browser.find_element(By.ID, "search")
    box.send_keys("clip")
    end = time.monotonic() + 5
    while not browser.find_element(By.ID, "results").is_displayed():
        assert time.monotonic() < end
        time.sleep(0.02)
    first = browser.find_element(By.CSS_SELECTOR, "#results div[data-j='0']").text
    assert first.startswith("group gradient clip")
    assert view == _js(browser, "[fluidliteViewer.view.x, fluidliteViewer.view.y, "
                                "fluidliteViewer.view.k]")
    box.send_keys(Keys.ENTER)
    _idle(browser)
    assert browser.find_element(By.ID, "ptype").text == "gradient clip"
    assert browser.find_element(By.ID, "hits").text.startswith("1 of ")
    box.send_keys(Keys.ESCAPE)

    def results(query):
        browser.execute_script("var s=document.getElementById('search');s.value='';"
                               "s.dispatchEvent(new Event('input'));")
        end = time.monotonic() + 5
        while browser.find_element(By.ID, "hits").text:
            assert time.monotonic() < end
            time.sleep(0.02)
        box.send_keys(query)
        end = time.monotonic() + 5
        while not browser.find_element(By.ID, "hits").text:
            assert time.monotonic() < end
            time.sleep(0.02)
        return [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#results div[data-j]")]
    # attributes, name scopes and op_role are searched too
    assert results("ignore_index")[0].startswith("op softmax_with_cross_entropy")
    assert any(r.startswith("op mul") for r in results("/mlp/"))
    n_opt = sum(op.attrs.get("op_role") == 2 and op.type == "momentum"
                for op in main.global_block().ops)
    assert sum(r.startswith("op momentum") for r in results("optimize")) == n_opt > 0
    box.send_keys(Keys.ESCAPE)

    # trace from the loss op: its ancestors (the mlp) and descendants (backward through the
    # softmax it saves, the clip, the momentum updates)
    xent = next(k for k, op in enumerate(main.global_block().ops)
                if op.type == "softmax_with_cross_entropy")
    i = _js(browser, "fluidliteViewer.find(arguments[0])", f"op:0:{xent}")
    browser.execute_script("fluidliteViewer.reveal(arguments[0])", i)
    _idle(browser)
    browser.find_element(By.TAG_NAME, "body").send_keys("t")
    traced = _js(browser, "Object.keys(fluidliteViewer.trace().units)")
    shown = _units(browser)
    mlp_fw = next(u for u in shown if u[0] == "g" and groups[int(u[1:])]["n"] == "mlp"
                  and groups[groups[int(u[1:])]["p"]]["n"] == "forward")
    momentum = next(u for u in shown if u[0] == "g" and groups[int(u[1:])]["g"] == "optimize")
    assert {f"o{i}", mlp_fw, momentum} <= set(traced)
    lone = [u for u in shown if u[0] == "o" and _js(
        browser, "fluidliteViewer.opType(arguments[0])", int(u[1:])) == "accuracy"]
    assert lone and not set(lone) & set(traced)       # accuracy is neither
    lit = browser.find_elements(By.CSS_SELECTOR, "#vp.tracing #gn .u.tr")
    assert len(lit) == len([u for u in traced if u in _units(browser)])
    assert len(lit) < len(_units(browser))
    browser.find_element(By.TAG_NAME, "body").send_keys(Keys.ESCAPE)
    assert not browser.find_elements(By.CSS_SELECTOR, "#vp.tracing")

    # minimap: a click there centres the view on that point of the graph
    mini = browser.find_element(By.ID, "mini")
    webdriver.ActionChains(browser).move_to_element_with_offset(mini, 30, 40).click().perform()
    x, y, k = _js(browser, "[fluidliteViewer.view.x, fluidliteViewer.view.y, "
                           "fluidliteViewer.view.k]")
    t = _js(browser, "fluidliteViewer.miniTransform()")
    gx, gy = ((110 + 30) - t[1]) / t[0], ((75 + 40) - t[2]) / t[0]   # offsets from the centre
    stage = _js(browser, "[document.getElementById('stage').clientWidth,"
                         "document.getElementById('stage').clientHeight]")
    assert abs(stage[0] / 2 - (gx * k + x)) < 2 and abs(stage[1] / 2 - (gy * k + y)) < 2

    # PNG and SVG of the current view
    png = browser.execute_async_script(
        "var done=arguments[0];fluidliteViewer.exportPNG().then(done,function(e){done(String(e))})")
    assert png.startswith("data:image/png;base64,")
    raw = base64.b64decode(png.split(",", 1)[1])
    assert raw[:8] == b"\x89PNG\r\n\x1a\n" and len(raw) > 5000
    assert int.from_bytes(raw[16:20], "big") >= WINDOW[0] - 240 - 2   # the stage's width
    svg = _js(browser, "fluidliteViewer.exportSVG()")
    assert svg.startswith("<svg") and "softmax_with_cross_entropy" in svg

    # hiding a role re-lays out without its ops; dark mode; the help overlay
    n = _js(browser, "fluidliteViewer.layouts()")
    browser.find_element(By.CSS_SELECTOR, '#roles input[data-g="backward"]').click()
    _idle(browser, n)
    bw = _group(browser, "backward")
    assert f"g{bw}" not in _units(browser) and f"G{bw}" not in _js(browser,
                                                                   "fluidliteViewer.boxes()")
    body = browser.find_element(By.TAG_NAME, "body")
    body.send_keys("D")
    assert "dark" in body.get_attribute("class")
    body.send_keys("?")
    assert "Keyboard shortcuts" in browser.find_element(By.ID, "help").text
    body.send_keys(Keys.ESCAPE)
    assert _errors(browser) == []


def test_resnet50_first_view_is_legible_and_clip_is_found(browser, tmp_path):
    with fluid.unique_name.guard():
        prog = _load("bench/viz_scale.py", "viz_scale").build_resnet50()
    assert len(prog.global_block().ops) > 800
    _open(browser, viz.export(prog, tmp_path / "resnet.html", title="ResNet-50"))
    assert _errors(browser) == []
    units = _units(browser)
    groups = _js(browser, "fluidliteViewer.groups")
    names = {groups[int(u[1:])]["n"] for u in units if u[0] == "g"}
    # the forward stages, backward, gradient clip and optimizer, as groups, legible
    assert {"conv1", "res2", "res3", "res4", "res5", "backward", "gradient clip",
            "optimizer"} <= names
    assert len([u for u in units if u[0] == "g"]) <= 40
    px = _label_px(browser)
    assert px and min(px) >= 10
    # everything is on screen at the first view (no scrolling needed)
    assert _js(browser, """(function(){var s=document.getElementById('stage')
      .getBoundingClientRect(),ok=true;document.querySelectorAll('#gn .u').forEach(function(e){
      var r=e.getBoundingClientRect();if(r.left<s.left-1||r.right>s.right+1||r.top<s.top-1||
      r.bottom>s.bottom+1)ok=false;});return ok;})()""")
    # "clip" finds the clip group; "e" opens it and its ops can be read
    box = browser.find_element(By.ID, "search")
    box.send_keys("clip", Keys.ENTER)
    _idle(browser)
    assert browser.find_element(By.ID, "ptype").text == "gradient clip"
    n = _js(browser, "fluidliteViewer.layouts()")
    browser.find_element(By.TAG_NAME, "body").send_keys("e")
    _idle(browser, n)
    texts = [e.get_attribute("textContent")
             for e in browser.find_elements(By.CSS_SELECTOR, "#gn .u.o .t1")]
    assert {"sqrt", "sum", "elementwise_max", "elementwise_div"} <= set(texts)
    assert min(_label_px(browser)) >= 6
    # 161 momentum updates opened: packed in rows inside the series' box, not one long line
    n_params = sum(p.trainable for p in prog.global_block().all_parameters())
    for name in ("optimizer", f"momentum \u00d7{n_params}"):
        n = _js(browser, "fluidliteViewer.layouts()")
        g = _group(browser, name)
        browser.execute_script("fluidliteViewer.toggleGroup(arguments[0], 'g'+arguments[0])", g)
        _idle(browser, n)
    boxes = _js(browser, "fluidliteViewer.boxes()")
    series = boxes[f"G{g}"]
    assert series["w"] < 4 * series["h"]
    ups = [b for u, b in boxes.items() if u[0] == "o" and
           _js(browser, "fluidliteViewer.opType(arguments[0])", int(u[1:])) == "momentum"]
    assert len(ups) == n_params == 161
    assert all(series["x"] <= b["x"] and b["x"] + b["w"] <= series["x"] + series["w"] and
               series["y"] <= b["y"] and b["y"] + b["h"] <= series["y"] + series["h"] for b in ups)
    assert _errors(browser) == []


def test_hostile_names_stay_text(browser, tmp_path):
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("<!--<script>\x01x\x1b[31m", [2], "float32")
        with fluid.name_scope("</script><img src=x onerror=alert(1)>"):
            y = fluid.layers.scale(x, 2.0, name="<b>bold</b>&amp;")
            fluid.layers.relu(y)
    _open(browser, viz.export(main, tmp_path / "hostile.html", title="<i>t</i>"))
    assert _errors(browser) == []
    assert not browser.find_elements(By.CSS_SELECTOR, "img, b b, #gn b, i")
    labels = [e.get_attribute("textContent") for e in
              browser.find_elements(By.CSS_SELECTOR, "#gn .vn .t1, #gn .gc .t1b, #gg .gx>text")]
    assert "<!--<script>\\x01x\\x1b[31m" in labels
    # the scope's "/" splits it into two levels of groups: "<" and the rest
    assert any("script><img src=x onerror=alert(1)>" in t for t in labels)
    box = browser.find_element(By.ID, "search")
    box.send_keys("<img", Keys.ENTER)
    _idle(browser)
    assert "<img" in browser.find_element(By.ID, "ptype").text
    assert browser.title == "<i>t</i>"


def test_sub_block_opens_inside_its_op_without_overlap(browser, tmp_path):
    """[+] / double-click / "e" on an op owning a block draws the block's ops inside the op's
    box (an ELK compound node), so nothing is drawn over other nodes; titles fit their boxes."""
    prog = fluid.Program()
    with fluid.program_guard(prog):
        x = fluid.data(name="x", shape=[-1, 2], dtype="float32")
        y = fluid.layers.relu(x)
        fluid.layers.tanh(y)
        sub = prog._create_block()
        sub.create_var(name="inner", shape=[-1, 2], dtype="float32")
        sub.create_var(name="inner2", shape=[-1, 2], dtype="float32")
        sub.append_op("scale", inputs={"X": y}, outputs={"Out": "inner"})
        sub.append_op("tanh", inputs={"X": "inner"}, outputs={"Out": "inner2"})
        prog._rollback()
    prog.global_block().ops[0].attrs["sub_block"] = sub
    _open(browser, viz.export(prog, tmp_path / "sub.html"))
    i = _js(browser, "fluidliteViewer.find('op:0:0')")
    op = browser.find_element(By.CSS_SELECTOR, f'#gn [data-u="o{i}"]')
    assert op.find_element(By.CSS_SELECTOR, "text.sbt").text == "[+]"
    op.click()
    assert "expand inline" in browser.find_element(By.ID, "panel").text
    n = _js(browser, "fluidliteViewer.layouts()")
    browser.find_element(By.TAG_NAME, "body").send_keys("e")
    _idle(browser, n)
    boxes = _js(browser, "fluidliteViewer.boxes()")
    inner = {k: v for k, v in boxes.items() if k.startswith("s1_")}
    assert len(inner) == 2 and sorted(
        e.get_attribute("textContent")
        for e in browser.find_elements(By.CSS_SELECTOR, "#gn .so .t1")) == ["scale", "tanh"]
    outer = boxes[f"o{i}"]
    for b in inner.values():                       # inside the op's box ...
        assert outer["x"] <= b["x"] and b["x"] + b["w"] <= outer["x"] + outer["w"]
        assert outer["y"] <= b["y"] and b["y"] + b["h"] <= outer["y"] + outer["h"]
    for k, b in boxes.items():                     # ... which overlaps no other node
        if k[0] in "ov" and k != f"o{i}":
            assert (b["x"] >= outer["x"] + outer["w"] or b["x"] + b["w"] <= outer["x"]
                    or b["y"] >= outer["y"] + outer["h"] or b["y"] + b["h"] <= outer["y"])
    fits = _js(browser, """Array.prototype.map.call(document.querySelectorAll('#gg .gx'),
      function(g){return g.querySelector('text').getBoundingClientRect().right<=
      g.querySelector('rect').getBoundingClientRect().right+1;})""")
    assert fits and all(fits)
    assert "block 1, inline" in browser.find_element(By.CSS_SELECTOR, "#gg .sbx").text
    # the title closes it again
    n = _js(browser, "fluidliteViewer.layouts()")
    browser.find_element(By.CSS_SELECTOR, "#gg .sbx > text").click()
    _idle(browser, n)
    assert not [k for k in _js(browser, "fluidliteViewer.boxes()") if k.startswith("s1_")]
    # "open block 1" shows the block as a view of its own
    browser.execute_script("fluidliteViewer.select(arguments[0])", f"o{i}")
    browser.find_element(By.CSS_SELECTOR, '#panel a.bl[data-b="1"]').click()
    end = time.monotonic() + 20
    while "#block=1" not in browser.current_url or not _js(
            browser, "!!(window.fluidliteViewer && fluidliteViewer.ready)"):
        assert time.monotonic() < end, "block 1 did not open"
        time.sleep(0.02)
    assert "block 1 of 2" in browser.find_element(By.ID, "info").text
    assert {_js(browser, "fluidliteViewer.opType(arguments[0])", int(u[1:]))
            for u in _units(browser) if u[0] == "o"} == {"scale", "tanh"}
    assert _errors(browser) == []


def test_diff_marks_and_only_what_changed(browser, tmp_path):
    shots = _load("docs/make_screenshots.py", "make_screenshots")
    with shots._fresh_names():
        main, _, before, _ = shots._sample("visualize").build()
    _open(browser, viz.export(viz.diff_graph(before, main), tmp_path / "diff.html"))
    added = len(main.global_block().ops) - len(before.global_block().ops)
    assert f"added ops: {added}" in browser.find_element(By.ID, "diffbox").text
    assert browser.find_elements(By.CSS_SELECTOR, "#gn .u.o.d1")           # added ops marked
    badges = [e.get_attribute("textContent") for e in
              browser.find_elements(By.CSS_SELECTOR, "#gn .gc .dd")]
    assert badges and all(b.strip().startswith(("+", "~")) for b in badges)
    n = _js(browser, "fluidliteViewer.layouts()")
    browser.find_element(By.ID, "donly").click()
    _idle(browser, n)
    same = [u for u in _units(browser) if u[0] == "o" and
            _js(browser, "fluidliteViewer.nodeDiff(arguments[0])", int(u[1:])) == 0]
    assert same == []
    assert _errors(browser) == []


def test_time_overlay_from_a_profiled_run(browser, tmp_path):
    import numpy as np
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [-1, 16], "float32")
        h = fluid.layers.fc(x, size=64, act="relu")
        loss = fluid.layers.mean(fluid.layers.fc(h, size=1))
        fluid.optimizer.SGD(0.1).minimize(loss)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    exe.run(main, feed={"x": np.ones((8, 16), "float32")}, fetch_list=[loss], profile=True)
    _open(browser, viz.export(main, tmp_path / "prof.html", profile=exe.last_profile))
    mul = next(k for k, op in enumerate(main.global_block().ops) if op.type == "mul")
    i = _js(browser, "fluidliteViewer.find(arguments[0])", f"op:0:{mul}")
    browser.execute_script("fluidliteViewer.reveal(arguments[0])", i)
    _idle(browser)
    assert "ms per call" in browser.find_element(By.ID, "panel").text
    assert "(this op, 1 timed run)" in browser.find_element(By.ID, "panel").text
    own = exe.last_profile.by_pos[(0, mul)].ave * 1e3
    shown = float(browser.find_element(By.ID, "ptime").text.split()[0])
    assert abs(shown - round(own, 4)) < 1e-3

    def fills():
        return _js(browser, "Array.prototype.map.call(document.querySelectorAll("
                            "'#gn .u.o > rect.bx'),function(r){return r.getAttribute('fill')})")
    before = fills()
    browser.find_element(By.TAG_NAME, "body").send_keys("T")
    after = fills()
    assert browser.find_element(By.ID, "otime").is_selected()
    assert all(f.startswith("rgb(") for f in after) and after != before
    assert len(set(after)) > 1                          # not all alike: a heat scale
    assert _errors(browser) == []


def test_time_overlay_per_op_of_a_fused_step_and_open_group_titles(browser, tmp_path):
    """Each op of a fused plan step shows its share of the step's time; an op no step ran
    says so; groups show the sum of their ops. An open group's title is drawn on an opaque
    bar above the edges (#gt after #ge / #gl), one bar per open group, at its box's top."""
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
    prof = exe.last_profile
    _open(browser, viz.export(main, tmp_path / "fused.html", profile=prof))
    ops = main.global_block().ops
    sqrt = next(k for k, op in enumerate(ops) if op.type == "sqrt")
    i = _js(browser, "fluidliteViewer.find(arguments[0])", f"op:0:{sqrt}")
    browser.execute_script("fluidliteViewer.reveal(arguments[0])", i)
    _idle(browser)
    shown = float(browser.find_element(By.ID, "ptime").text.split()[0])
    assert abs(shown - round(prof.by_pos[(0, sqrt)].ave * 1e3, 4)) < 1e-3
    untimed = [k for k in range(len(ops)) if (0, k) not in prof.by_pos]
    if untimed:                 # e.g. the clip's cast, absorbed by the fused global norm
        i = _js(browser, "fluidliteViewer.find(arguments[0])", f"op:0:{untimed[0]}")
        browser.execute_script("fluidliteViewer.reveal(arguments[0])", i)
        _idle(browser)
        assert "not timed" in browser.find_element(By.ID, "panel").text
    # the clip group, opened: its title bar lies over the edges, at the group box's top
    n = _js(browser, "fluidliteViewer.layouts()")
    g = _group(browser, "gradient clip")
    if f"G{g}" not in _js(browser, "fluidliteViewer.boxes()"):
        browser.execute_script("fluidliteViewer.toggleGroup(arguments[0], 'g'+arguments[0])", g)
        _idle(browser, n)
    assert _js(browser, """(function(){var ids=Array.prototype.map.call(
      document.getElementById('vp').children,function(e){return e.id;});
      return ids.indexOf('gt')>ids.indexOf('ge')&&ids.indexOf('gt')>ids.indexOf('gl')&&
      ids.indexOf('gt')<ids.indexOf('gn');})()""")
    bars = _js(browser, """Array.prototype.map.call(document.querySelectorAll('#gt .tb>rect'),
      function(r){var s=getComputedStyle(r);return [+r.getAttribute('x'),+r.getAttribute('y'),
      s.fill,s.fillOpacity,s.opacity];})""")
    frames = _js(browser, """Array.prototype.map.call(document.querySelectorAll('#gg .gx>rect'),
      function(r){return [+r.getAttribute('x'),+r.getAttribute('y')];})""")
    assert bars and len(bars) == len(frames)
    for (bx, by, fill, fop, op), (fx, fy) in zip(bars, frames):
        assert abs(bx - fx - 1.5) < 1e-6 and abs(by - fy - 1.5) < 1e-6
        assert fill not in ("none", "transparent") and "rgba" not in fill
        assert float(fop) == 1 and float(op) == 1
    # the overlay colours the opened group's ops, and groups carry their summed time
    browser.find_element(By.TAG_NAME, "body").send_keys("T")
    fills = _js(browser, "Array.prototype.map.call(document.querySelectorAll("
                         "'#gn .u.o > rect.bx'),function(r){return r.getAttribute('fill')})")
    assert fills and all(f.startswith("rgb(") for f in fills)
    for k in untimed:           # an op no step ran: grey, not the fastest op's colour
        i = _js(browser, "fluidliteViewer.find(arguments[0])", f"op:0:{k}")
        el = browser.find_elements(By.CSS_SELECTOR, f'#gn [data-u="o{i}"] > rect.bx')
        if el:
            assert el[0].get_attribute("fill") == "rgb(229,231,233)"
    # the clip group's time: the sum of its ops', so at least the fused global norm's (all
    # of whose ops are clip ops) and at most the whole run's
    browser.execute_script("fluidliteViewer.select(arguments[0])", f"G{g}")
    gms = float(browser.find_element(By.ID, "ptime").text.split()[0])
    fused = prof.by_type["fused(global_norm)"].total * 1e3 if "fused(global_norm)" in \
        prof.by_type else 0.0
    run = sum(s.total for s in prof.by_pos.values()) * 1e3
    assert fused - 2e-3 <= gms <= run + 2e-3 and gms > 0
    assert _errors(browser) == []
