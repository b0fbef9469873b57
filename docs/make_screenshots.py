"""Regenerate the viewer screenshots of docs/guides/viewer.md with headless Chromium.

The hierarchical viewer (``--layout elk``, the default; 1600x1000 pictures):

* ``docs/images/viewer_resnet50.png``: the first view of a ResNet-50-style training program
  (``bench/viz_scale.py``'s ``build_resnet50``): passes and stages as groups;
* ``docs/images/viewer_resnet50_clip.png``: the same after typing "clip", Enter and ``e``:
  the gradient-clip group open and centred at zoom 1, its panel on the right;
* ``docs/images/viewer_quick_start.png``: the quick start's training program
  (``samples/quick_start.py``), the loss op selected and traced (``t``);
* ``docs/images/viewer_diff.png``: ``viz.diff_graph`` of ``samples/visualize.py``'s program
  before and after ``minimize``, in dark mode.

The flat viewer (``--layout auto|dot|layered``; 1400x677): ``viewer_quick_start.png`` searched
for ``squared_l2_norm`` with the clip's ``sqrt`` op selected, and ``viewer_diff.png`` with
"show only what changed" on.

Needs selenium, Chromium and chromedriver (Debian: ``apt-get install -y chromium
chromium-driver``; ``pip install selenium``), the same as ``tests/test_viz_browser.py``, and uses
its browser flags. Run from anywhere:

    python docs/make_screenshots.py [--out docs/images] [--layout elk|auto|dot|layered]
"""
from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import shutil
import sys
import tempfile
import time
from typing import Iterator, List

import fluidlite as fluid
import fluidlite.viz as viz
from fluidlite.core import names

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# the browser tests' flags (tests/test_viz_browser.py), with the viewer guide pictures' window size
CHROME_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
               "--disable-background-networking", "--disable-component-update",
               "--disable-sync", "--hide-scrollbars"]
WINDOW = (1400, 677)
WINDOW_ELK = (1600, 1000)


def _sample(name: str):
    path = os.path.join(ROOT, "samples", f"{name}.py")
    sys.path.insert(0, os.path.dirname(path))        # samples import _common
    spec = importlib.util.spec_from_file_location(f"{name}_sample", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)                     # type: ignore[union-attr]
    return mod


@contextlib.contextmanager
def _fresh_names() -> Iterator[None]:
    """Names and name scopes as in a fresh process, so each picture shows what its sample
    prints (``/mlp/``, not ``/mlp_1/`` after the other sample's build)."""
    saved = names._name_scope
    names._name_scope = names._NameScope()
    try:
        with fluid.unique_name.guard():
            yield
    finally:
        names._name_scope = saved


def _browser(profile: str, window=WINDOW):
    from selenium import webdriver
    chrome = shutil.which("chromium") or shutil.which("chromium-browser") \
        or shutil.which("google-chrome")
    driver = shutil.which("chromedriver")
    if not chrome or not driver:
        sys.exit("no headless browser: apt-get install -y chromium chromium-driver")
    opts = webdriver.ChromeOptions()
    opts.binary_location = chrome
    for a in CHROME_ARGS + [f"--user-data-dir={profile}",
                            f"--window-size={window[0]},{window[1]}"]:
        opts.add_argument(a)
    drv = webdriver.Chrome(options=opts, service=webdriver.ChromeService(executable_path=driver))
    # the window includes the (headless) browser frame: grow it until the page is WINDOW
    inner = drv.execute_script("return [window.innerWidth, window.innerHeight]")
    drv.set_window_size(window[0] * 2 - inner[0], window[1] * 2 - inner[1])
    return drv


def _open(drv, path: str) -> None:
    drv.get("file://" + os.path.abspath(path))
    end = time.monotonic() + 30
    while not drv.execute_script("return !!(window.fluidliteViewer && fluidliteViewer.ready)"):
        if time.monotonic() > end:
            sys.exit(f"the viewer in {path} did not become ready")
        time.sleep(0.05)


def _op_index(drv, program, op_type: str) -> int:
    idx = next(k for k, op in enumerate(program.global_block().ops) if op.type == op_type)
    return drv.execute_script("return fluidliteViewer.find(arguments[0])", f"op:0:{idx}")


def _idle(drv) -> None:
    """Wait for the ELK viewer's worker to finish laying out."""
    end = time.monotonic() + 30
    time.sleep(0.05)
    while drv.execute_script("return fluidliteViewer.busy()"):
        if time.monotonic() > end:
            sys.exit("the viewer did not finish its layout")
        time.sleep(0.05)


def _resnet50():
    spec = importlib.util.spec_from_file_location(
        "viz_scale", os.path.join(ROOT, "bench", "viz_scale.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)                     # type: ignore[union-attr]
    with _fresh_names():
        return mod.build_resnet50()


def make_elk(out_dir: str) -> List[str]:
    """The hierarchical viewer's four screenshots (see the module docstring)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    os.makedirs(out_dir, exist_ok=True)
    work = tempfile.mkdtemp(prefix="fluidlite-shots-")
    drv = _browser(os.path.join(work, "profile"), WINDOW_ELK)
    written = []
    try:
        prog = _resnet50()
        title = "ResNet-50-style training: Momentum + GradientClipByGlobalNorm"
        _open(drv, viz.export(prog, os.path.join(work, "resnet50.html"), title=title))
        written.append(os.path.join(out_dir, "viewer_resnet50.png"))
        drv.save_screenshot(written[-1])
        drv.find_element(By.ID, "search").send_keys("clip", Keys.ENTER)
        _idle(drv)
        drv.find_element(By.TAG_NAME, "body").send_keys("e")
        _idle(drv)
        drv.execute_script("fluidliteViewer.centre('G'+fluidliteViewer.findGroup('gradient clip'))")
        written.append(os.path.join(out_dir, "viewer_resnet50_clip.png"))
        drv.save_screenshot(written[-1])

        with _fresh_names():
            main, *_ = _sample("quick_start").build(clip_norm=0.5, lr=0.1)
        _open(drv, viz.export(main, os.path.join(work, "quick_start_program.html"),
                              title="quick start: MLP + GradientClipByGlobalNorm + Momentum"))
        i = _op_index(drv, main, "softmax_with_cross_entropy")
        drv.execute_script("fluidliteViewer.reveal(arguments[0])", i)
        _idle(drv)
        drv.find_element(By.TAG_NAME, "body").send_keys("t")
        drv.execute_script("fluidliteViewer.fit()")
        written.append(os.path.join(out_dir, "viewer_quick_start.png"))
        drv.save_screenshot(written[-1])

        with _fresh_names():
            main, _, before, _ = _sample("visualize").build()
        diff = viz.diff_graph(before, main, title="what minimize() added")
        _open(drv, viz.export(diff, os.path.join(work, "mlp_minimize_diff.html")))
        drv.find_element(By.TAG_NAME, "body").send_keys("D")
        written.append(os.path.join(out_dir, "viewer_diff.png"))
        drv.save_screenshot(written[-1])
        errors = [e for e in drv.get_log("browser") if e.get("level") == "SEVERE"]
        if errors:
            sys.exit(f"JavaScript errors in the viewer: {errors}")
    finally:
        drv.quit()
        shutil.rmtree(work, ignore_errors=True)
    return written


def make(out_dir: str, layout: str = "elk") -> List[str]:
    """Write the screenshots into ``out_dir``; returns their paths. ``layout="elk"``: the
    hierarchical viewer's (``make_elk``); else the flat viewer's two."""
    if layout == "elk":
        return make_elk(out_dir)
    from selenium.webdriver.common.by import By
    os.makedirs(out_dir, exist_ok=True)
    work = tempfile.mkdtemp(prefix="fluidlite-shots-")
    drv = _browser(os.path.join(work, "profile"))
    written = []
    try:
        with _fresh_names():
            main, *_ = _sample("quick_start").build(clip_norm=0.5, lr=0.1)
        page = viz.export(main, os.path.join(work, "quick_start_program.html"), layout=layout,
                          title="quick start: MLP + GradientClipByGlobalNorm + Momentum")
        _open(drv, page)
        drv.find_element(By.ID, "search").send_keys("squared_l2_norm")   # centres match 1
        drv.execute_script("fluidliteViewer.select(arguments[0])",     # panel, centred
                           _op_index(drv, main, "sqrt"))
        written.append(os.path.join(out_dir, "viewer_quick_start.png"))
        drv.save_screenshot(written[-1])

        with _fresh_names():
            main, _, before, _ = _sample("visualize").build()
        diff = viz.diff_graph(before, main, title="what minimize() added")
        _open(drv, viz.export(diff, os.path.join(work, "mlp_minimize_diff.html"), layout=layout))
        drv.find_element(By.ID, "donly").click()          # show only what changed (and fit)
        written.append(os.path.join(out_dir, "viewer_diff.png"))
        drv.save_screenshot(written[-1])
        errors = [e for e in drv.get_log("browser") if e.get("level") == "SEVERE"]
        if errors:
            sys.exit(f"JavaScript errors in the viewer: {errors}")
    finally:
        drv.quit()
        shutil.rmtree(work, ignore_errors=True)
    return written


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "images"))
    ap.add_argument("--layout", default="elk", choices=["elk", "auto", "dot", "layered"])
    args = ap.parse_args()
    for path in make(args.out, args.layout):
        print(path)


if __name__ == "__main__":
    main()
