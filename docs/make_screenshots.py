"""Regenerate the README's screenshots of the interactive viewer with headless Chromium.

* ``docs/images/viewer_quick_start.png``: the quick start's training program
  (``samples/quick_start.py``), searched for ``squared_l2_norm`` with the clip's ``sqrt`` op
  selected (its side panel open);
* ``docs/images/viewer_diff.png``: ``viz.diff_graph`` of ``samples/visualize.py``'s program
  before and after ``minimize``, with "show only what changed" on.

Needs selenium, Chromium and chromedriver (Debian: ``apt-get install -y chromium
chromium-driver``; ``pip install selenium``), the same as ``tests/test_viz_browser.py``, and uses
its browser flags. Run from anywhere:

    python docs/make_screenshots.py [--out docs/images] [--layout auto|dot|layered]
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
# the browser tests' flags (tests/test_viz_browser.py), with the README pictures' window size
CHROME_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
               "--disable-background-networking", "--disable-component-update",
               "--disable-sync", "--hide-scrollbars"]
WINDOW = (1400, 677)


def _sample(name: str):
    path = os.path.join(ROOT, "samples", f"{name}.py")
    sys.path.insert(0, os.path.dirname(path))        # samples import training_curves
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


def _browser(profile: str):
    from selenium import webdriver
    chrome = shutil.which("chromium") or shutil.which("chromium-browser") \
        or shutil.which("google-chrome")
    driver = shutil.which("chromedriver")
    if not chrome or not driver:
        sys.exit("no headless browser: apt-get install -y chromium chromium-driver")
    opts = webdriver.ChromeOptions()
    opts.binary_location = chrome
    for a in CHROME_ARGS + [f"--user-data-dir={profile}",
                            f"--window-size={WINDOW[0]},{WINDOW[1]}"]:
        opts.add_argument(a)
    drv = webdriver.Chrome(options=opts, service=webdriver.ChromeService(executable_path=driver))
    # the window includes the (headless) browser frame: grow it until the page is WINDOW
    inner = drv.execute_script("return [window.innerWidth, window.innerHeight]")
    drv.set_window_size(WINDOW[0] * 2 - inner[0], WINDOW[1] * 2 - inner[1])
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


def make(out_dir: str, layout: str = "auto") -> List[str]:
    """Write both screenshots into ``out_dir``; returns their paths."""
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
    ap.add_argument("--layout", default="auto", choices=["auto", "dot", "layered"])
    args = ap.parse_args()
    for path in make(args.out, args.layout):
        print(path)


if __name__ == "__main__":
    main()
