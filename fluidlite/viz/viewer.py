"""The hierarchical viewer page (``to_interactive_html(..., layout="elk")``, the default).

One offline HTML file: the program's graph and its group tree (``hierarchy.group_tree``) as
JSON, the viewer's script and style (``static/viewer.js``, ``static/viewer.css``) and the
vendored ELK layout engine (``vendor/elk-worker.min.js``: elkjs, EPL-2.0; re-vendor with
``vendor/update.sh``), which the page runs in a Web Worker made from a Blob URL. The ELK source
is inlined as the body of a function (``flElkWorker``) of the page's script, whose text the
page hands to the worker, so the file has one script element and one JSON data element.

The page opens with passes and name scopes collapsed into groups (as many opened as keep the
labels legible), lays out only what is visible, and re-lays out on every expand / collapse /
role toggle keeping the clicked node where it was on screen. See ``static/viewer.js``.
"""
from __future__ import annotations

import html
import os
from functools import lru_cache
from typing import Any, Dict, List

import networkx as nx

from .hierarchy import group_tree

__all__ = ["add_groups", "elk_page", "profile_times", "profile_op_times", "ELK_VERSION_FILE", "ELK_FILE"]

_HERE = os.path.dirname(os.path.abspath(__file__))
ELK_FILE = os.path.join(_HERE, "vendor", "elk-worker.min.js")
ELK_VERSION_FILE = os.path.join(_HERE, "vendor", "ELKJS_VERSION")


@lru_cache(maxsize=None)
def _asset(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise FileNotFoundError(
            f"the viewer's asset {path} is missing ({e.strerror}); reinstall fluidlite, or "
            f"in a source checkout run `sh fluidlite/viz/vendor/update.sh` (needs npm) to "
            f"re-vendor elkjs") from None
    low = text.lower()
    # inlined into a <script>: these would end the element or change the parser's state
    if "</script" in low or "<!--" in low:
        raise ValueError(f"{path} contains '</script' or '<!--' and cannot be inlined in the "
                         f"page's <script> element")
    return text


def add_groups(data: Dict[str, Any], g: nx.MultiDiGraph) -> None:
    """Add the group tree of ``g`` to the viewer JSON ``data`` (built by ``interactive._data``
    from the same graph, so node i of ``data`` is the i-th node of ``g``): ``data["groups"]``
    and each op record's ``gp`` (innermost group, -1 for the top level)."""
    groups, where = group_tree(g)
    data["groups"] = groups
    for rec in data["nodes"]:
        if rec.get("k") == "o":
            rec["gp"] = where.get(rec["id"], -1)


def profile_times(profile: Any) -> Dict[str, List[float]]:
    """``{op type: [average ms per call, calls, total ms]}`` of a ``fluidlite.profiler.Profile``
    (empty for None). The profile times op types (``Profile.by_type``); every op of a type is
    drawn with that type's average."""
    if profile is None:
        return {}
    stats = getattr(profile, "by_type", None)
    if not isinstance(stats, dict):
        raise TypeError(f"profile= takes a fluidlite.profiler.Profile (Executor.last_profile "
                        f"after exe.run(..., profile=True)); got {type(profile).__name__}")
    return {str(t): [round(st.ave * 1e3, 4), int(st.calls), round(st.total * 1e3, 3)]
            for t, st in stats.items() if st.calls}


def profile_op_times(profile: Any) -> Dict[str, List[float]]:
    """``{"block:op index": [average ms per call, calls, total ms]}`` of a
    ``fluidlite.profiler.Profile`` (``Profile.by_pos``: the time of each op of the Program;
    a fused plan step's time is split evenly between the ops it replaced). Empty for None or
    a profile without per-op records; the viewer then colours ops by their type's average."""
    stats = getattr(profile, "by_pos", None) if profile is not None else None
    if not isinstance(stats, dict):
        return {}
    return {f"{b}:{i}": [round(st.ave * 1e3, 4), int(st.calls), round(st.total * 1e3, 3)]
            for (b, i), st in stats.items() if st.calls}


def elk_page(blob: str, title: str) -> str:
    """The page around the (script-safe) JSON text ``blob`` of ``{"views": [...], ...}``."""
    js = _asset(os.path.join(_HERE, "static", "viewer.js"))
    css = _asset(os.path.join(_HERE, "static", "viewer.css"))
    elk = _asset(ELK_FILE)
    parts: List[str] = [
        _PAGE_HEAD.replace("%TITLE%", html.escape(title)).replace("%CSS%", css),
        '<script id="fl-data" type="application/json">', blob, "</script>\n<script>\n",
        "function flElkWorker(){\n", elk, "\n}\n", js, "</script>\n</body></html>\n"]
    return "".join(parts)


_PAGE_HEAD = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>%TITLE%</title>
<meta name="generator" content="fluidlite.viz (hierarchical viewer, ELK layered layout)">
<style>%CSS%</style></head><body>
<header><b id="title">%TITLE%</b><input id="search" type="search"
 placeholder="search ops, variables, scopes, roles, attributes \u2014 press /"
 autocomplete="off"><span id="hits"></span>
<div id="results" hidden></div>
<button id="fit" title="fit to screen (f)">fit</button>
<button id="zin" title="zoom in (+)">+</button>
<button id="zout" title="zoom out (-)">&minus;</button>
<button id="savepng" title="save the current view as PNG">PNG</button>
<button id="savesvg" title="save the current view as SVG">SVG</button>
<button id="darkbtn" title="dark mode (D)">&#9680;</button>
<button id="helpbtn" title="keyboard shortcuts (?)">?</button>
</header>
<aside id="side"><section id="info"></section>
<h3>Groups</h3><div id="tree"></div>
<h3>Show</h3><div id="roles"></div>
<label><input type="checkbox" id="oparams" checked> parameters inside their op (p)</label>
<label><input type="checkbox" id="oshapes" checked> tensor shapes on edges (s)</label>
<div id="diffbox"></div><div id="legend"></div>
</aside>
<main id="stage"><svg id="svg" xmlns="http://www.w3.org/2000/svg"><defs><marker id="arr"
 viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse">
<path d="M0,0L10,5L0,10z" fill="#7B8794"/></marker></defs><g id="vp"><g id="gg"></g><g id="ge"></g>
<g id="gl"></g><g id="gt"></g><g id="gn"></g></g></svg><div id="busy" hidden>laying out\u2026</div>
<canvas id="mini" width="220" height="150" title="minimap: click or drag to move the view"></canvas>
</main>
<aside id="panel" hidden><button id="close" title="close (Esc)">&times;</button>
<div id="pbody"></div></aside>
<div id="help" hidden><div><h2>Keyboard shortcuts</h2><table>
<tr><td>/</td><td>search op types, variable names, name scopes, op_role, passes, attributes
 and group names (text, or a regex when it has regex characters)</td></tr>
<tr><td>Enter, n / N, &darr; / &uarr;</td><td>go to the next / previous result (opens its
 groups); typing only lists the results</td></tr>
<tr><td>click / double-click</td><td>select (details in the side panel) / expand a group;
 click an open group's title to collapse it</td></tr>
<tr><td>e</td><td>expand / collapse the selected group</td></tr>
<tr><td>t</td><td>trace: highlight every ancestor and descendant of the selection</td></tr>
<tr><td>f, + / &minus;</td><td>fit, zoom (or the wheel; drag to pan; the minimap moves the
 view)</td></tr>
<tr><td>b / o</td><td>hide / show backward ops; optimizer, clip, regularization and LR ops</td></tr>
<tr><td>p / s</td><td>parameters inside their op; tensor shapes on edges</td></tr>
<tr><td>c</td><td>back to the first view (groups collapsed)</td></tr>
<tr><td>T</td><td>time overlay: ops coloured by their measured time (pages exported with
 <code>profile=exe.last_profile</code>)</td></tr>
<tr><td>D</td><td>dark mode</td></tr>
<tr><td>Esc</td><td>close the panel, end the trace, clear the search, close this help</td></tr>
<tr><td>?</td><td>show / hide this help</td></tr></table>
<p>PNG / SVG save what the window shows. Layout: ELK layered (elkjs, EPL-2.0), in a web
worker.</p></div></div>
"""
