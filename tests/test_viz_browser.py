"""The interactive viewer in a real browser: headless Chromium driven by selenium.

One browser session serves every test in this module. Skipped (with the reason) only when
selenium, Chromium or chromedriver is missing; ``.ci/run`` installs them.
"""
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

CHROME_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
               "--disable-background-networking", "--disable-component-update",
               "--disable-sync", "--window-size=1400,900"]


def _browser_paths():
    chrome = shutil.which("chromium") or shutil.which("chromium-browser") \
        or shutil.which("google-chrome")
    driver = shutil.which("chromedriver")
    return chrome, driver


@pytest.fixture(scope="module")
def browser():
    chrome, driver_path = _browser_paths()
    if not chrome or not driver_path:
        pytest.skip("no headless browser: install Debian's `chromium` and `chromium-driver` "
                    "(apt-get install -y chromium chromium-driver)")
    profile = tempfile.mkdtemp(prefix="fluidlite-chromium-")
    opts = webdriver.ChromeOptions()
    opts.binary_location = chrome
    for a in CHROME_ARGS + [f"--user-data-dir={profile}"]:
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = webdriver.ChromeService(executable_path=driver_path)
    drv = webdriver.Chrome(options=opts, service=service)
    try:
        yield drv
    finally:
        drv.quit()
        shutil.rmtree(profile, ignore_errors=True)


def build():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data(name="x", shape=[-1, 4], dtype="float32")
        label = fluid.data(name="label", shape=[-1, 1], dtype="int64")
        with fluid.name_scope("mlp"):
            hidden = fluid.layers.fc(input=x, size=8, act="relu")
            logits = fluid.layers.fc(input=hidden, size=3)
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, label))
        before = main.clone()
        fluid.optimizer.SGD(learning_rate=0.1, regularization=fluid.regularizer.L2Decay(1e-4),
                            grad_clip=fluid.clip.GradientClipByGlobalNorm(1.0)).minimize(loss)
    return main, before


def _open(drv, path):
    drv.get("file://" + os.path.abspath(path))
    _open_wait(drv)


def _open_wait(drv):
    end = time.monotonic() + 20
    while not drv.execute_script("return !!(window.fluidliteViewer && fluidliteViewer.ready)"):
        assert time.monotonic() < end, f"the viewer did not become ready: {_errors(drv)}"
        time.sleep(0.02)


def _errors(drv):
    return [e for e in drv.get_log("browser") if e.get("level") == "SEVERE"]


def _node(drv, node_id):
    i = drv.execute_script("return fluidliteViewer.find(arguments[0])", node_id)
    assert i >= 0, node_id
    return i, drv.find_element(By.CSS_SELECTOR, f'#gn g[data-i="{i}"]')


@pytest.mark.parametrize("engine", ["dot", "layered"])
def test_click_search_toggle_in_chromium(browser, tmp_path, engine):
    if engine == "dot" and not shutil.which("dot"):
        pytest.skip("graphviz `dot` not installed")
    main, before = build()
    path = viz.export(main, tmp_path / "net.html", layout=engine)
    _open(browser, path)
    assert _errors(browser) == []
    assert f"layout: {engine}" in browser.find_element(By.ID, "info").text

    # click an op: the panel shows its type, role, creation line and slots with links
    idx = next(i for i, op in enumerate(main.global_block().ops) if op.type == "mul")
    i, el = _node(browser, f"op:0:{idx}")
    browser.execute_script("fluidliteViewer.fit()")
    el.click()
    panel = browser.find_element(By.ID, "panel")
    assert panel.is_displayed()
    text = panel.text
    assert "op mul" in text and "forward (0)" in text and "fc_0.w_0" in text
    assert "test_viz_browser.py" in browser.find_element(By.ID, "pcall").text
    # follow the link to the weight: a variable panel with its consumers (incl. the update)
    panel.find_element(By.XPATH, ".//a[starts-with(text(), 'fc_0.w_0')]").click()
    text = browser.find_element(By.ID, "panel").text
    assert "variable fc_0.w_0" in text and "parameter" in text and "[4, 8]" in text
    assert "sgd" in browser.find_element(By.ID, "cons").text

    # search (regex): matches highlighted and counted
    box = browser.find_element(By.ID, "search")
    box.send_keys("^squared_l2")
    n_sq = sum(op.type == "squared_l2_norm" for op in main.global_block().ops)
    n_vars = sum(v.startswith("squared_l2") for v in main.global_block().vars)
    assert len(browser.find_elements(By.CSS_SELECTOR, "#gn g.o.hit")) == n_sq > 0
    assert len(browser.find_elements(By.CSS_SELECTOR, "#gn g.v.hit")) == n_vars > 0
    assert f"1 of {n_sq + n_vars}" in browser.find_element(By.ID, "hits").text
    box.send_keys(Keys.CONTROL, "a")
    box.send_keys("([")                                   # a bad regex: no exception
    assert browser.find_element(By.ID, "hits").text == "bad regex"
    box.send_keys(Keys.ESCAPE)

    # toggle backward ops off: every backward op node is hidden, forward ones stay
    browser.find_element(By.CSS_SELECTOR, '#roles input[data-g="backward"]').click()
    shown = browser.execute_script(
        "var out={};document.querySelectorAll('#gn g').forEach(function(el){"
        "var i=+el.getAttribute('data-i');"
        "out[i]=el.style.display!=='none';});return out;")
    g = viz.to_networkx(main)
    ids = list(g.nodes)
    for k, nid in enumerate(ids):
        d = g.nodes[nid]
        if d["fl_kind"] == "op" and d["fl_group"] == "backward":
            assert not shown[str(k)], nid
        if d["fl_kind"] == "op" and d["fl_group"] == "forward":
            assert shown[str(k)], nid
    only_bw = [n for n in ids if g.nodes[n]["fl_kind"] == "var" and g.degree(n)
               and all(g.nodes[o]["fl_group"] == "backward"
                       for o in set(g.predecessors(n)) | set(g.successors(n)))]
    assert only_bw and not any(shown[str(ids.index(n))] for n in only_bw)
    assert shown[str(ids.index("var:fc_0.w_0@GRAD"))]       # the clip and sgd still read it
    # keyboard: "b" brings them back, "?" opens the help overlay
    browser.find_element(By.TAG_NAME, "body").send_keys("b")
    assert browser.find_element(By.CSS_SELECTOR, '#roles input[data-g="backward"]').is_selected()
    browser.find_element(By.TAG_NAME, "body").send_keys("?")
    assert browser.find_element(By.ID, "help").is_displayed()
    assert "Keyboard shortcuts" in browser.find_element(By.ID, "help").text
    browser.find_element(By.TAG_NAME, "body").send_keys(Keys.ESCAPE)
    assert not browser.find_element(By.ID, "help").is_displayed()

    # wheel zooms in around the cursor, a drag pans, "f" fits everything back in the window
    browser.find_element(By.TAG_NAME, "body").send_keys("f")
    k0 = browser.execute_script("return fluidliteViewer.view.k")
    browser.execute_script(
        "var s=document.getElementById('stage');s.dispatchEvent(new WheelEvent('wheel',"
        "{deltaY:-300,clientX:600,clientY:400,bubbles:true,cancelable:true}));")
    k1 = browser.execute_script("return fluidliteViewer.view.k")
    assert k1 > k0 * 1.5
    x0 = browser.execute_script("return fluidliteViewer.view.x")
    stage = browser.find_element(By.ID, "stage")
    webdriver.ActionChains(browser).move_to_element(stage).click_and_hold() \
        .move_by_offset(120, 0).release().perform()
    assert abs(browser.execute_script("return fluidliteViewer.view.x") - x0 - 120) < 2
    browser.find_element(By.TAG_NAME, "body").send_keys("f")
    assert abs(browser.execute_script("return fluidliteViewer.view.k") - k0) < 1e-9
    assert _errors(browser) == []


def test_diff_view_and_scopes_in_chromium(browser, tmp_path):
    main, before = build()
    path = viz.export(viz.diff_graph(before, main), tmp_path / "diff.html", layout="layered")
    _open(browser, path)
    diffbox = browser.find_element(By.ID, "diffbox").text
    added = sum(1 for op in main.global_block().ops) - len(before.global_block().ops)
    assert f"added ops: {added}" in diffbox and "gradient clip" in diffbox
    n_same = len(browser.find_elements(By.CSS_SELECTOR, "#gn g.o.d0"))
    assert n_same > 0
    browser.find_element(By.ID, "donly").click()
    visible_same = browser.execute_script(
        "return Array.prototype.filter.call(document.querySelectorAll('#gn g.o.d0'),"
        "function(el){return el.style.display!=='none';}).length")
    visible_added = browser.execute_script(
        "return Array.prototype.filter.call(document.querySelectorAll('#gn g.o.d1'),"
        "function(el){return el.style.display!=='none';}).length")
    assert visible_same == 0 and visible_added == added
    # collapse the /mlp/ scope: its ops are hidden, the scope box stays
    browser.find_element(By.ID, "donly").click()
    box = browser.find_element(By.XPATH, "//div[@id='scopes']//label[contains(., '/mlp/')]/input")
    box.click()
    mul_i = browser.execute_script("return fluidliteViewer.find('op:0:0')")
    assert mul_i >= 0
    hidden = browser.execute_script("return fluidliteViewer.visible(arguments[0])", mul_i)
    assert hidden is False
    assert browser.find_elements(By.CSS_SELECTOR, "#gs g.sc.col")
    assert _errors(browser) == []


def test_sub_block_link_opens_the_block(browser, tmp_path):
    prog = fluid.Program()
    with fluid.program_guard(prog):
        x = fluid.data(name="x", shape=[-1, 2], dtype="float32")
        y = fluid.layers.relu(x)
        sub = prog._create_block()
        sub.create_var(name="inner", shape=[-1, 2], dtype="float32")
        sub.append_op("scale", inputs={"X": y}, outputs={"Out": "inner"})
        prog._rollback()
    prog.global_block().ops[0].attrs["sub_block"] = sub
    _open(browser, viz.export(prog, tmp_path / "blocks.html", layout="layered"))
    i, el = _node(browser, "op:0:0")
    el.click()
    browser.find_element(By.CSS_SELECTOR, '#panel a.bl[data-b="1"]').click()
    end = time.monotonic() + 20        # the link reloads the page with #block=1
    while "#block=1" not in browser.current_url or not browser.execute_script(
            "return !!(window.fluidliteViewer && fluidliteViewer.ready)"):
        assert time.monotonic() < end, "block 1 did not open"
        time.sleep(0.02)
    assert "block 1 of 2" in browser.find_element(By.ID, "info").text
    assert browser.execute_script("return fluidliteViewer.find('op:1:0')") >= 0
    assert _errors(browser) == []


def test_make_screenshots_script_writes_both_pictures(browser, tmp_path):
    """docs/make_screenshots.py regenerates the viewer guide's pictures (1400x677 PNGs)."""
    import importlib.util
    path = os.path.join(os.path.dirname(__file__), "..", "docs", "make_screenshots.py")
    spec = importlib.util.spec_from_file_location("make_screenshots", path)
    shots = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(shots)
    written = shots.make(str(tmp_path), layout="layered")
    assert [os.path.basename(p) for p in written] == ["viewer_quick_start.png", "viewer_diff.png"]
    for p in written:
        head = open(p, "rb").read(24)
        assert head[:8] == b"\x89PNG\r\n\x1a\n"
        assert (int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")) \
            == shots.WINDOW


def test_sub_block_expands_inline_and_collapses(browser, tmp_path):
    """The op's [+] badge / "expand inline" draws the sub-block's ops beside the op in the same
    view; collapsing removes them; the "open block" link stays in the panel."""
    prog = fluid.Program()
    with fluid.program_guard(prog):
        x = fluid.data(name="x", shape=[-1, 2], dtype="float32")
        y = fluid.layers.relu(x)
        sub = prog._create_block()
        sub.create_var(name="inner", shape=[-1, 2], dtype="float32")
        sub.create_var(name="inner2", shape=[-1, 2], dtype="float32")
        sub.append_op("scale", inputs={"X": y}, outputs={"Out": "inner"})
        sub.append_op("tanh", inputs={"X": "inner"}, outputs={"Out": "inner2"})
        prog._rollback()
    prog.global_block().ops[0].attrs["sub_block"] = sub
    _open(browser, viz.export(prog, tmp_path / "inline.html", layout="layered"))

    def inline_ops():              # op types drawn in a shown inline cluster (by CSS display)
        return browser.execute_script(
            "var out=[];document.querySelectorAll('#gx g.sbx').forEach(function(c){"
            "if(getComputedStyle(c).display==='none')return;c.querySelectorAll('g.sn.o')"
            ".forEach(function(o){out.push(o.querySelector('text').textContent);});});"
            "return out;")
    assert inline_ops() == []
    i, el = _node(browser, "op:0:0")
    badge = el.find_element(By.CSS_SELECTOR, "text.sbt")
    assert badge.text == "[+]"
    browser.execute_script("fluidliteViewer.fit()")
    badge.click()                                           # the badge expands ...
    assert sorted(inline_ops()) == ["scale", "tanh"]
    assert "block 1 of relu #0 (inline)" in browser.find_element(By.CSS_SELECTOR, "#gx g.sbx").text
    assert len(browser.find_elements(By.CSS_SELECTOR, "#gx g.sbx path.e")) == 4
    assert badge.text == "[\u2212]"
    # ... the cluster lies beside the op, not over the main graph
    box = browser.execute_script(
        "var b=document.querySelector('#gx g.sbx').getBBox(),t=document.querySelector("
        "'#gx g.sbx').transform.baseVal.consolidate().matrix;return [b.x+t.e,b.y+t.f];")
    n = browser.execute_script("var n=JSON.parse(document.getElementById('fl-data').textContent)"
                               ".views[0].nodes[arguments[0]];return [n.x+n.w/2,n.y];", i)
    assert box[0] > n[0]
    badge.click()                                           # ... and collapses
    assert inline_ops() == [] and badge.text == "[+]"

    # the panel: "expand inline" next to "open block 1"; hiding the op's role hides the cluster
    el.click()
    panel = browser.find_element(By.ID, "panel")
    assert panel.find_element(By.CSS_SELECTOR, 'a.bl[data-b="1"]').text == "open block 1"
    panel.find_element(By.CSS_SELECTOR, 'a.sx[data-b="1"]').click()
    assert sorted(inline_ops()) == ["scale", "tanh"]
    assert panel.find_element(By.CSS_SELECTOR, 'a.sx[data-b="1"]').text == "collapse inline"
    browser.find_element(By.CSS_SELECTOR, '#roles input[data-g="forward"]').click()
    assert inline_ops() == []
    browser.find_element(By.CSS_SELECTOR, '#roles input[data-g="forward"]').click()
    assert sorted(inline_ops()) == ["scale", "tanh"]
    browser.execute_script("fluidliteViewer.toggleInline(arguments[0])", i)
    assert inline_ops() == []
    assert _errors(browser) == []
