"""How fast a large program's interactive HTML opens in headless Chromium (issue 19).

Builds a deep MLP trained with Momentum + GradientClipByGlobalNorm (forward, backward, clip
and update ops: about 12 ops per layer), writes ``viz.export(program, "big.html")`` and loads
it in headless Chromium, timing from navigation start to ``window.fluidliteViewer.ready``
(the page has drawn every node and edge, built the side bar, fitted the view and wired its
handlers). Then it times a search and a role toggle. Target: under 2 s for 5,000 ops, a file
of a few MB at most.

Run: python bench/viz_scale.py [--ops 5000] [--repeat 3] [--keep big.html]
Needs selenium, chromium and chromedriver (see .ci/run).
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

import fluidlite as fluid
import fluidlite.viz as viz

ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--window-size=1400,900"]


def build(target_ops: int) -> fluid.Program:
    def make(layers: int) -> fluid.Program:
        main, startup = fluid.Program(), fluid.Program()
        with fluid.program_guard(main, startup):
            x = fluid.data(name="x", shape=[-1, 8], dtype="float32")
            label = fluid.data(name="label", shape=[-1, 1], dtype="int64")
            h = x
            for i in range(layers):
                with fluid.name_scope(f"stage{i // 20}"):
                    h = fluid.layers.fc(input=h, size=8, act="relu")
            logits = fluid.layers.fc(input=h, size=3)
            loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, label))
            fluid.optimizer.Momentum(
                learning_rate=0.1, momentum=0.9,
                grad_clip=fluid.clip.GradientClipByGlobalNorm(clip_norm=1.0)).minimize(loss)
        return main
    a, b = (len(make(k).global_block().ops) for k in (10, 20))
    prog = make(max(1, int((target_ops - a) / ((b - a) / 10.0)) + 10))
    while len(prog.global_block().ops) < target_ops:       # the estimate can fall short
        prog = make(int(len(prog.global_block().ops) / 12) + 10 + 5)
    return prog


def _wait_ready(drv, timeout: float = 60.0) -> bool:
    end = time.perf_counter() + timeout
    while time.perf_counter() < end:
        if drv.execute_script("return !!(window.fluidliteViewer&&fluidliteViewer.ready)"):
            return True
        time.sleep(0.01)
    return False


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, default=5000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--keep", help="also copy the HTML file here")
    args = ap.parse_args()
    from selenium import webdriver

    prog = build(args.ops)
    n_ops = len(prog.global_block().ops)
    tmp = tempfile.mkdtemp(prefix="fluidlite-vizbench-")
    path = os.path.join(tmp, "big.html")
    t0 = time.perf_counter()
    viz.export(prog, path)
    t_export = time.perf_counter() - t0
    size = os.path.getsize(path)
    if args.keep:
        shutil.copy(path, args.keep)

    opts = webdriver.ChromeOptions()
    opts.binary_location = shutil.which("chromium") or shutil.which("google-chrome") or ""
    for a in ARGS + [f"--user-data-dir={os.path.join(tmp, 'profile')}"]:
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    drv = webdriver.Chrome(options=opts, service=webdriver.ChromeService(
        executable_path=shutil.which("chromedriver")))
    ready, wall, search, toggle = [], [], [], []
    try:
        for _ in range(args.repeat):
            drv.get("about:blank")
            t0 = time.perf_counter()
            drv.get("file://" + path)        # returns after the load event (scripts have run)
            ok = _wait_ready(drv)
            wall.append(time.perf_counter() - t0)
            if not ok:
                sys.exit("the viewer did not become ready: "
                         + repr(drv.execute_script("return [location.href, document.readyState]"))
                         + repr(drv.get_log("browser")[:3]))
            ready.append(drv.execute_script("return fluidliteViewer.readyAt") / 1000.0)
            search.append(drv.execute_script(
                "var t=performance.now(),s=document.getElementById('search');s.value='relu';"
                "s.dispatchEvent(new Event('input'));return (performance.now()-t)/1000;"))
            toggle.append(drv.execute_script(
                "var t=performance.now();document.querySelector("
                "'#roles input[data-g=\"backward\"]').click();return (performance.now()-t)/1000;"))
        info = drv.execute_script("return [fluidliteViewer.nodes, fluidliteViewer.edges, "
                                  "document.getElementById('info').textContent]")
        errors = [e for e in drv.get_log("browser") if e.get("level") == "SEVERE"]
    finally:
        drv.quit()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"program: {n_ops} ops; graph: {info[0]} nodes, {info[1]} edges ({info[2]})")
    print(f"export (layout + HTML): {t_export:.2f} s; file size {size / 1e6:.2f} MB")
    print(f"ready after navigation start (page clock): median {statistics.median(ready):.2f} s "
          f"(runs: {', '.join(f'{r:.2f}' for r in ready)})")
    print(f"driver.get -> ready (wall clock):          median {statistics.median(wall):.2f} s")
    print(f"search 'relu': {statistics.median(search) * 1000:.0f} ms; hide backward: "
          f"{statistics.median(toggle) * 1000:.0f} ms; console errors: {len(errors)}")
    print("target: ready < 2 s, file a few MB at most -> "
          + ("OK" if statistics.median(ready) < 2.0 and size < 8e6 else "MISSED"))


if __name__ == "__main__":
    main()
