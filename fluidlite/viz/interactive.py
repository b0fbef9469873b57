"""The interactive HTML viewer: one self-contained file (inline JavaScript and CSS, no network).

``to_interactive_html(program_or_graph)`` (``layout="elk"``, the default) writes the
hierarchical viewer of ``viewer.py``: groups first, laid out in the page by the vendored ELK
engine. ``layout="auto"|"dot"|"layered"`` writes the flat viewer described here: it lays the
graph out in Python (``layout.py``: Graphviz ``dot`` when present and the graph is small
enough, else a layered layout) and embeds the positions and every node's details as JSON; the
inline script draws the SVG and adds:

* pan (drag), zoom (wheel, ``+``/``-``), fit to screen (``f``);
* a search box (regex over op types and variable names, case-insensitive) that highlights the
  matches and centres them one by one (Enter / ``n``);
* click an op or variable: a side panel with attributes, inputs/outputs by slot with shapes
  and dtypes, ``op_role``, the user source line that created it, producers and consumers
  (each clickable);
* a show/hide toggle per role group (forward, loss, backward, gradient clip, regularization,
  optimizer, LR schedule, feed/fetch); variables only hidden ops touch are hidden too;
* collapse/expand name scopes (click the scope label or its box in the side bar);
* expand/collapse an op's sub-block inline (the ``[+]`` badge on the op, or "expand inline" in
  its panel): the sub-block's ops and variables are drawn, with its own layout, in a cluster
  beside the op; "open block N" still opens the sub-block as its own view;
* for ``diff_graph`` input: added/changed/removed marks, counts by role and "show only what
  changed";
* keyboard shortcuts listed in a help overlay (``?``).

The page sets ``window.fluidliteViewer.ready`` when it is interactive (the tests and
``bench/viz_scale.py`` wait for it).
"""
from __future__ import annotations

import html
import json
from typing import Any, Dict, List, Optional

import networkx as nx

from .dot import OP_STYLES, VAR_STYLES, _cluster_of, as_graph
from ..core.ir import Program
from .graph import op_slots, to_networkx
from .layout import layout as compute_layout
from .viewer import add_groups, elk_page, profile_op_times, profile_times

__all__ = ["to_interactive_html"]

_DIFF = {"same": 0, "added": 1, "changed": 2, "removed": 3}


def _data(g: nx.MultiDiGraph, lay: Any, legend: bool) -> Dict[str, Any]:
    """The viewer's JSON of ``g``: node records (with the positions of ``lay``; without any
    when ``lay`` is None, for the ELK viewer, which lays out in the page), edges, scopes."""
    ids = list(g.nodes)
    index = {n: i for i, n in enumerate(ids)}
    scopes = sorted(lay.scopes) if lay is not None else []
    scope_index = {p: i for i, p in enumerate(scopes)}
    nodes: List[Dict[str, Any]] = []
    strs: Dict[str, int] = {}      # callsites and name scopes repeat: sent once, by index

    def intern(text: str) -> int:
        return strs.setdefault(text, len(strs))
    for n in ids:
        d = g.nodes[n]
        path = _cluster_of(d)
        rec: Dict[str, Any] = {"id": n, "d": _DIFF.get(d.get("fl_diff", "same"), 0),
                               "s": scope_index.get(path, -1),
                               "ns": intern(d.get("fl_namescope", ""))}
        if lay is not None:
            cx, cy, w, h = lay.pos[n]
            rec.update(x=cx, y=cy, w=w, h=h)
        if d.get("fl_highlight"):
            rec["hl"] = 1
        if d["fl_kind"] == "op":
            ins, outs = op_slots(g, n)
            rec.update(k="o", t=d["fl_type"], g=d["fl_group"], r=d["fl_op_role"],
                       rn=d["fl_role"], p=d["fl_pass"], ix=d["fl_index"], b=d["fl_block"],
                       a=d["fl_attrs"], cs=intern(d.get("fl_callsite", "")),
                       rv=d.get("fl_role_var", ""), i=ins, o=outs)
            if d.get("fl_sub_blocks"):
                rec["sb"] = [int(b) for b in str(d["fl_sub_blocks"]).split(",")]
        else:
            rec.update(k="v", t=d["fl_name"], g=d.get("fl_category", "temporary"),
                       sh=d.get("fl_shape", ""), dt=d.get("fl_dtype", ""),
                       vt=d.get("fl_type", ""), ps=int(bool(d.get("fl_persistable"))),
                       sg=int(bool(d.get("fl_stop_gradient"))), ll=d.get("fl_lod_level", 0),
                       p=d.get("fl_pass", ""))
            if d.get("fl_category") == "parameter":
                rec.update(tr=int(bool(d.get("fl_trainable"))),
                           nc=int(bool(d.get("fl_need_clip"))), rg=d.get("fl_regularizer", ""))
        nodes.append(rec)
    edges = []
    seen = set()
    for u, v, d in g.edges(data=True):
        key = (u, v)
        if key in seen:       # one drawn edge per (var, op) pair; slots are in the panel
            continue
        seen.add(key)
        e: List[Any] = [index[u], index[v], _DIFF.get(d.get("fl_diff", "same"), 0)]
        pts = lay.edges.get(key) if lay is not None else None
        if pts:
            e.append([c for p in pts for c in p])
        edges.append(e)
    summary = json.loads(g.graph.get("fl_diff_summary", "{}")) if g.graph.get("fl_diff") else {}
    return {"title": g.graph.get("fl_title", "program"),
            "engine": lay.engine if lay is not None else "elk",
            "diff": bool(g.graph.get("fl_diff")), "summary": summary, "legend": legend,
            "block": g.graph.get("fl_block", 0), "nblocks": g.graph.get("fl_num_blocks", 1),
            "parent": g.graph.get("fl_parent", 0),
            "scopes": [{"p": "/" + "/".join(p) + "/", "bb": lay.scopes[p]} for p in scopes],
            "nodes": nodes, "edges": edges, "strs": list(strs),
            "opStyles": {k: list(v) for k, v in OP_STYLES.items()},
            "varStyles": {k: list(v) for k, v in VAR_STYLES.items()}}


def to_interactive_html(obj: Any, *, title: Optional[str] = None, layout: str = "elk",
                        legend: bool = True, clusters: bool = True, edge_labels: bool = True,
                        rankdir: str = "TB", profile: Any = None, **graph_opts: Any) -> str:
    """The interactive page for a Program/Block (``graph_opts`` go to ``to_networkx``) or a
    graph from ``to_networkx`` / ``diff_graph``.

    Args:
        obj: a Program, a Block, or a graph from ``to_networkx`` / ``diff_graph``.
        title: the page title (default: the graph's).
        layout: ``elk`` (default): the hierarchical viewer (``viewer.py``): passes, name
            scopes, per-parameter chains and series of alike subgraphs as expandable groups,
            laid out in the page by the vendored ELK layered algorithm in a web worker.
            ``auto``, ``dot``, ``layered``: the flat viewer of every node laid out in Python
            (``auto``: Graphviz ``dot`` when present and the graph has at most
            ``layout.DOT_MAX_NODES`` nodes, else the layered layout).
        legend, clusters, rankdir: the flat viewer's picture (the ELK viewer always draws
            top-down, with a legend, groups instead of scope boxes). ``edge_labels`` is
            accepted for the static exports' signature: slots are listed in the side panel.
        profile: a ``fluidlite.profiler.Profile`` (``Executor.last_profile`` after
            ``exe.run(..., profile=True)``): the ELK viewer can colour each op by its own
            measured average time per call (``Profile.by_pos``; a fused step's time split
            evenly between its ops; an op no step ran, e.g. one folded into a fused kernel,
            is drawn grey as "not timed"), groups by the sum of their ops ("time overlay");
            the side panel also gives the op type's average (``Profile.by_type``). A profile
            without per-op records colours ops by their type's average. ``TypeError`` for
            anything else.
        **graph_opts: ``block``, ``hide_backward``, ``hide_optimizer``, ``highlight``.

    Returns:
        The page: one self-contained HTML file (no network access).

    Example:
        >>> import fluidlite as fluid, fluidlite.viz as viz
        >>> viz.to_interactive_html(fluid.Program()).startswith("<!DOCTYPE html>")
        True
    """
    if rankdir not in ("TB", "LR", "BT", "RL"):
        raise ValueError(f"rankdir must be one of TB, LR, BT, RL; got {rankdir!r}")
    if layout not in ("elk", "auto", "dot", "layered"):
        raise ValueError(f"layout engine must be elk, auto, dot or layered; got {layout!r}")
    prof = profile_times(profile)
    prof_ops = profile_op_times(profile)
    if prof and layout != "elk":
        raise ValueError(f"the time overlay (profile=) is drawn by the ELK viewer; pass "
                         f"layout='elk' instead of {layout!r}")
    views = []
    if isinstance(obj, Program) and graph_opts.get("block") is None and len(obj.blocks) > 1:
        graphs = [to_networkx(obj, k, **{k2: v for k2, v in graph_opts.items()
                                         if k2 != "block"}) for k in range(len(obj.blocks))]
    else:
        # one view per block: sub-blocks are views of their own, expanded inline
        graphs = [as_graph(obj, **dict(graph_opts, sub_blocks=False))]
    for g in graphs:
        if layout == "elk":
            data = _data(g, None, legend)
            add_groups(data, g)
        else:
            data = _data(g, compute_layout(g, layout, rankdir=rankdir, clusters=clusters), legend)
        if title:
            data["title"] = title
        if prof:
            data["prof"] = prof
        if prof_ops:
            data["profop"] = prof_ops
        views.append(data)
    # names are data: inside the <script> element no "<", ">" or "&" may appear as such
    # ("</script>" would end it, "<!--" switch the parser's state), nor U+2028/9 (line ends
    # for older JavaScript); JSON's \u escapes say the same string
    doc = {"views": views, "multi": len(views) > 1}
    blob = json.dumps(doc, separators=(",", ":")).translate(_SCRIPT_SAFE)
    data = views[0]
    if layout == "elk":
        return elk_page(blob, str(data["title"]))
    return (_PAGE.replace("%TITLE%", html.escape(str(data["title"])))
            .replace("%CSS%", _CSS).replace("%JS%", _JS).replace("%DATA%", blob))


_SCRIPT_SAFE = {ord("<"): "\\u003c", ord(">"): "\\u003e", ord("&"): "\\u0026",
                0x2028: "\\u2028", 0x2029: "\\u2029"}

_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>%TITLE%</title>
<style>%CSS%</style></head><body>
<header><b id="title">%TITLE%</b><input id="search" type="search" placeholder="search op type or
 variable (regex) — press /" autocomplete="off"><span id="hits"></span>
<button id="fit" title="fit to screen (f)">fit</button><button id="zin">+</button>
<button id="zout">&minus;</button><button id="helpbtn" title="keyboard shortcuts (?)">?</button>
</header>
<aside id="side"><section id="info"></section><h3>Show</h3><div id="roles"></div>
<div id="diffbox"></div><h3>Name scopes</h3><div id="scopes"></div><div id="legend"></div>
</aside>
<main id="stage"><svg id="svg" xmlns="http://www.w3.org/2000/svg"><defs><marker id="arr"
 viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse">
<path d="M0,0L10,5L0,10z" fill="#666"/></marker></defs><g id="vp"><g id="gs"></g><g id="ge"></g>
<g id="gp"></g><g id="gn"></g><g id="gx"></g></g></svg></main>
<aside id="panel" hidden><button id="close" title="close (Esc)">&times;</button>
<div id="pbody"></div></aside>
<div id="help" hidden><div><h2>Keyboard shortcuts</h2><table>
<tr><td>/</td><td>focus the search box (regex over op types and variable names)</td></tr>
<tr><td>Enter, n / N</td><td>centre the next / previous match</td></tr>
<tr><td>f</td><td>fit the graph to the window</td></tr>
<tr><td>+ / &minus;</td><td>zoom in / out (or the mouse wheel; drag to pan)</td></tr>
<tr><td>b</td><td>show / hide backward ops</td></tr>
<tr><td>o</td><td>show / hide optimizer, clip, regularization and LR-schedule ops</td></tr>
<tr><td>c</td><td>collapse / expand all name scopes</td></tr>
<tr><td>[+] / [&minus;]</td><td>(click) draw / hide an op's sub-block beside it</td></tr>
<tr><td>d</td><td>diff view: show only what changed</td></tr>
<tr><td>Esc</td><td>close the panel, clear the search, close this help</td></tr>
<tr><td>?</td><td>show / hide this help</td></tr></table>
<p>Click an op or a variable for its details; names in the panel are clickable.
Click a name-scope label to collapse or expand it.</p></div></div>
<script id="fl-data" type="application/json">%DATA%</script>
<script>%JS%</script>
</body></html>
"""

_CSS = """
*{box-sizing:border-box}body{margin:0;font:13px Helvetica,Arial,sans-serif;color:#1B2631;
overflow:hidden;height:100vh;display:grid;grid-template-columns:250px 1fr auto;
grid-template-rows:40px 1fr}
header{grid-column:1/4;display:flex;gap:6px;align-items:center;padding:0 10px;
background:#1B2631;color:#fff}header b{margin-right:12px;white-space:nowrap;overflow:hidden;
max-width:40vw}#search{flex:0 1 360px;padding:4px 6px}#search.bad{background:#FADBD8}
#hits{min-width:110px;font-size:12px}button{cursor:pointer}
#side{overflow:auto;padding:6px 10px;border-right:1px solid #D5D8DC;background:#FBFCFC}
#side h3{font-size:12px;margin:10px 0 4px;text-transform:uppercase;color:#566573}
#side label{display:block;white-space:nowrap;font-size:12px}
.sw{display:inline-block;width:11px;height:11px;margin:0 4px -1px 0;border:1px solid #555}
#stage{position:relative;overflow:hidden;background:#fff;cursor:grab}
#stage.drag{cursor:grabbing}#svg{width:100%;height:100%;display:block;user-select:none}
#panel{width:380px;overflow:auto;padding:8px 12px;border-left:1px solid #D5D8DC;
background:#FDFEFE;grid-row:2;grid-column:3}#panel[hidden]{display:none}
#close{float:right}#panel h2{font-size:15px;margin:4px 0}#panel table{border-collapse:collapse;
font-size:12px;width:100%}#panel td{border-top:1px solid #EAECEE;padding:2px 4px;
vertical-align:top;word-break:break-all}#panel td:first-child{color:#566573;width:34%;
word-break:normal}a.nl{color:#1F618D;cursor:pointer;text-decoration:underline}
code{font-size:11px}.n{cursor:pointer}.n text{font-size:10px;pointer-events:none}
.n .sh2,.sn .sh2{font-size:8.5px}
.sn text{font-size:10px;pointer-events:none}.n text.sbt{pointer-events:auto;cursor:pointer;
font:bold 11px monospace;fill:#1F618D}.sbx>rect{fill:#F4F6F7;fill-opacity:.85;stroke:#1F618D;
stroke-dasharray:6 3;rx:8}.sbx>text{font-size:11px;fill:#1F618D}.sbl{stroke:#1F618D;
stroke-dasharray:3 3;fill:none}.e{fill:none;stroke:#777;stroke-width:1}
.e.d1{stroke:#00A651;stroke-width:2}.e.d3{stroke:#999;stroke-dasharray:4 3}
.fade .n.d0{opacity:.45}.fade .e.d0{opacity:.35}
.n.d1 .bx{stroke:#00A651;stroke-width:4}.n.d2 .bx{stroke:#2E86C1;stroke-width:4}
.n.d3 .bx{stroke:#999;stroke-dasharray:5 3;fill:#fff}.n.d3 text{fill:#7F8C8D}
.n.hit .bx{stroke:#FF8C00;stroke-width:5}.n.sel .bx{stroke:#E91E63;stroke-width:5}
.n.hl .bx{stroke:#FF8C00;stroke-width:3}
.sc rect{fill:none;stroke:#7F8C8D;stroke-dasharray:5 4;rx:8}
.sc text{font-size:11px;fill:#566573;cursor:pointer}.sc.col rect{fill:#EBEDEF;
stroke-dasharray:none}.px{stroke:#888;stroke-dasharray:2 3;fill:none}
#help{position:fixed;inset:0;background:rgba(0,0,0,.45);display:flex;align-items:center;
justify-content:center;z-index:9}#help[hidden]{display:none}#help>div{background:#fff;
padding:14px 22px;border-radius:6px;max-width:620px}#help td{padding:2px 10px 2px 0}
#help td:first-child{font-weight:bold;white-space:nowrap}
.cnt td{padding:1px 6px 1px 0;font-size:12px}
"""

_JS = r"""
(function(){
"use strict";
var ALL=JSON.parse(document.getElementById("fl-data").textContent);
var VI=+((location.hash.match(/block=(\d+)/)||[0,0])[1]);if(!ALL.views[VI])VI=0;
var D=ALL.views[VI];
function openBlock(b){for(var k=0;k<ALL.views.length;k++)if(ALL.views[k].block===b){
 location.hash="block="+b;location.reload();return;}}
var N=D.nodes,E=D.edges,S=D.scopes;
N.forEach(function(n){n.ns=D.strs[n.ns];if(n.cs!==undefined)n.cs=D.strs[n.cs];});
var $=function(id){return document.getElementById(id);};
var svg=$("svg"),vp=$("vp"),stage=$("stage");
var view={x:0,y:0,k:1},groupOn={},diffOnly=false,collapsed={},hits=[],hitAt=-1,sel=-1;
var adj=N.map(function(){return [];}),nodeEl=[],edgeEl=[],scopeEl=[],vis=[];
E.forEach(function(e,j){adj[e[0]].push(j);adj[e[1]].push(j);});
function esc(s){return String(s).replace(/[&<>"]/g,function(c){return {"&":"&amp;","<":"&lt;",
">":"&gt;",'"':"&quot;"}[c];});}
var GROUP_LABEL={io:"feed / fetch",forward:"forward",loss:"loss",backward:"backward",
gradient_clip:"gradient clip",regularization:"regularization",optimize:"optimizer",
lr_schedule:"LR schedule",distributed:"distributed"};
function style(n){return n.k==="o"?D.opStyles[n.g]||D.opStyles.forward:
 D.varStyles[n.g]||D.varStyles.temporary;}
function shape(n){var w=n.w/2,h=n.h/2,st=style(n),fill,stroke,sh;
 if(n.k==="o"){fill=st[0];stroke="#1B2631";sh=st[2];}else{fill=st[0];stroke=st[1];sh=st[3];}
 var a=' class="bx" fill="'+fill+'" stroke="'+stroke+'" stroke-width="'+(n.k==="o"?1.5:1)+'"';
 if(sh==="ellipse")return '<ellipse rx="'+w+'" ry="'+h+'"'+a+'/>';
 if(sh==="hexagon")return '<polygon points="'+[-w,0,-w+10,-h,w-10,-h,w,0,w-10,h,-w+10,h]+'"'+a+'/>';
 if(sh==="octagon")return '<polygon points="'+[-w,-h+6,-w+6,-h,w-6,-h,w,-h+6,w,h-6,w-6,h,-w+6,h,
  -w,h-6]+'"'+a+'/>';
 if(sh==="invhouse")return '<polygon points="'+[-w,-h,w,-h,w,h-7,0,h,-w,h-7]+'"'+a+'/>';
 return '<rect x="'+(-w)+'" y="'+(-h)+'" width="'+n.w+'" height="'+n.h+'" rx="4"'+a+'/>';}
function label(n){var st=style(n),fc=n.k==="o"?st[1]:st[2],pre=["","+ ","~ ","- "][n.d];
 if(n.k==="v"&&(n.sh||n.dt))return '<text text-anchor="middle" y="-2" fill="'+fc+'">'+
  esc(pre+n.t)+'</text><text class="sh2" text-anchor="middle" y="10" fill="'+fc+'">'+
  esc((n.sh+" "+n.dt).trim())+'</text>';
 return '<text text-anchor="middle" y="3.5" fill="'+fc+'">'+esc(pre+n.t)+'</text>';}
function edgePath(e,nodes){var p=e[3],a=(nodes||N)[e[0]],b=(nodes||N)[e[1]];
 if(p&&p.length>=8){var s="M"+p[0]+","+p[1]+"C";for(var i=2;i<p.length;i++)s+=(i>2?",":"")+p[i];
  return s;}
 var x1=a.x,y1=a.y+a.h/2,x2=b.x,y2=b.y-b.h/2;
 if(y2<y1){y1=a.y-a.h/2;y2=b.y+b.h/2;}var m=(y1+y2)/2;
 return "M"+x1+","+y1+"C"+x1+","+m+","+x2+","+m+","+x2+","+y2;}
function draw(){
 var h=[];S.forEach(function(s,i){var b=s.bb;h.push('<g class="sc" data-s="'+i+'"><rect x="'+
  b[0]+'" y="'+b[1]+'" width="'+(b[2]-b[0])+'" height="'+(b[3]-b[1])+'"/><text x="'+(b[0]+6)+
  '" y="'+(b[1]+12)+'">'+esc(s.p)+'</text></g>');});
 $("gs").innerHTML=h.join("");h=[];
 E.forEach(function(e){h.push('<path class="e d'+e[2]+'" marker-end="url(#arr)" d="'+edgePath(e)+
  '"/>');});
 $("ge").innerHTML=h.join("");h=[];
 N.forEach(function(n,i){h.push('<g class="n d'+n.d+(n.hl?" hl":"")+' '+n.k+'" data-i="'+i+
  '" transform="translate('+n.x+','+n.y+')">'+shape(n)+label(n)+badge(n)+'</g>');});
 $("gn").innerHTML=h.join("");
 nodeEl=Array.prototype.slice.call($("gn").children);
 edgeEl=Array.prototype.slice.call($("ge").children);
 scopeEl=Array.prototype.slice.call($("gs").children);
 if(D.diff)svg.classList.add("fade");}
// -- sub-blocks drawn inline: expanded["<op index>:<block>"] = 1
var expanded={},inlineBox=[];    // inlineBox: [op index, x0, y0, x1, y1] per drawn cluster
function subView(b){for(var k=0;k<ALL.views.length;k++)if(ALL.views[k].block===b&&k!==VI)
 return ALL.views[k];return null;}
function inlineBlocks(n){return (n.sb||[]).filter(function(b){return !!subView(b);});}
function badge(n){if(n.k!=="o"||!inlineBlocks(n).length)return "";
 return '<text class="sbt" x="'+(n.w/2+3)+'" y="'+(-n.h/2+6)+'">[+]</text>';}
function isExpanded(i){return inlineBlocks(N[i]).some(function(b){return expanded[i+":"+b];});}
function toggleInline(i,b,on){var bs=b===undefined?inlineBlocks(N[i]):[b];
 if(on===undefined)on=!bs.some(function(x){return expanded[i+":"+x];});
 bs.forEach(function(x){if(on)expanded[i+":"+x]=1;else delete expanded[i+":"+x];});
 var t=nodeEl[i]&&nodeEl[i].querySelector(".sbt");if(t)t.textContent=isExpanded(i)?"[−]":"[+]";
 drawInline();computeVis();if(sel===i)select(i,true);}
function drawInline(){var h=[],right={};inlineBox=[];Object.keys(expanded).forEach(function(key){
 var i=+key.split(":")[0],b=+key.split(":")[1],n=N[i],V=subView(b);if(!V)return;
 var x0=1e18,y0=1e18,x1=-1e18,y1=-1e18;V.nodes.forEach(function(m){x0=Math.min(x0,m.x-m.w/2);
  x1=Math.max(x1,m.x+m.w/2);y0=Math.min(y0,m.y-m.h/2);y1=Math.max(y1,m.y+m.h/2);});
 if(x0>x1){x0=y0=0;x1=120;y1=20;}
 // beside the op, to the right of any cluster already drawn for it
 var cap='block '+b+' of '+n.t+' #'+n.ix+' (inline)',bw=Math.max(x1-x0+28,cap.length*6.6+16);
 var left=right[i]||n.x+n.w/2+60,dx=left+14-x0,dy=n.y-n.h/2+26-y0;right[i]=left+bw+40;
 inlineBox.push([i,left,n.y-n.h/2,left+bw,n.y-n.h/2+y1-y0+40]);
 h.push('<path class="sbl" data-i="'+i+'" d="M'+(n.x+n.w/2)+','+n.y+'L'+left+','+
  (n.y-n.h/2+13)+'"/>');
 h.push('<g class="sbx" data-i="'+i+'" data-b="'+b+'" transform="translate('+dx+','+dy+')">'+
  '<rect x="'+(x0-14)+'" y="'+(y0-26)+'" width="'+bw+'" height="'+(y1-y0+40)+'"/>'+
  '<text x="'+(x0-6)+'" y="'+(y0-10)+'">'+esc(cap)+'</text>');
 V.edges.forEach(function(e){h.push('<path class="e" marker-end="url(#arr)" d="'+
  edgePath(e,V.nodes)+'"/>');});
 V.nodes.forEach(function(m){h.push('<g class="sn '+m.k+'" data-id="'+esc(m.id)+
  '" transform="translate('+m.x+','+m.y+')"><title>'+esc(m.id)+'</title>'+shape(m)+label(m)+
  '</g>');});
 h.push('</g>');});
 $("gx").innerHTML=h.join("");}
function apply(){vp.setAttribute("transform","translate("+view.x+","+view.y+") scale("+view.k+")");}
function bounds(only){var x0=1e18,y0=1e18,x1=-1e18,y1=-1e18;N.forEach(function(n,i){
 if(only&&!vis[i])return;x0=Math.min(x0,n.x-n.w/2);x1=Math.max(x1,n.x+n.w/2);
 y0=Math.min(y0,n.y-n.h/2);y1=Math.max(y1,n.y+n.h/2);});
 inlineBox.forEach(function(c){if(only&&!(vis[c[0]]&&rep[c[0]]<0))return;
  x0=Math.min(x0,c[1]);y0=Math.min(y0,c[2]);x1=Math.max(x1,c[3]);y1=Math.max(y1,c[4]);});
 if(x0>x1)return [0,0,100,100];return [x0,y0,x1,y1];}
function fit(){var b=bounds(true),W=stage.clientWidth||800,H=stage.clientHeight||600;
 var k=Math.min(W/(b[2]-b[0]+40),H/(b[3]-b[1]+40),2);k=Math.max(k,0.02);
 view.k=k;view.x=(W-(b[2]+b[0])*k)/2;view.y=(H-(b[3]+b[1])*k)/2;apply();}
function zoom(f,cx,cy){var W=stage.clientWidth,H=stage.clientHeight;
 if(cx===undefined){cx=W/2;cy=H/2;}var k=Math.max(0.02,Math.min(8,view.k*f));
 view.x=cx-(cx-view.x)*k/view.k;view.y=cy-(cy-view.y)*k/view.k;view.k=k;apply();}
function centre(i){var n=N[i],W=stage.clientWidth,H=stage.clientHeight;
 if(view.k<0.8)view.k=1;view.x=W/2-n.x*view.k;view.y=H/2-n.y*view.k;apply();}
// -- visibility: role toggles, collapsed scopes, "only what changed"
function scopeOf(i){var s=N[i].s,best=-1;if(s<0)return -1;var p=S[s].p;
 for(var c in collapsed){if(collapsed[c]&&p.indexOf(S[c].p)===0&&
  (best<0||S[c].p.length<S[best].p.length))best=+c;}return best;}
var rep=[];
function computeVis(){
 N.forEach(function(n,i){if(n.k==="o")vis[i]=groupOn[n.g]!==false&&(!diffOnly||n.d>0);});
 N.forEach(function(n,i){if(n.k!=="o"){var any=false,opAdj=false;adj[i].forEach(function(j){
  var e=E[j],o=e[0]===i?e[1]:e[0];if(N[o].k==="o"){opAdj=true;if(vis[o])any=true;}});
  vis[i]=(!opAdj||any)&&(!diffOnly||n.d>0||any);}});
 N.forEach(function(n,i){rep[i]=scopeOf(i);});
 var proxies={};
 nodeEl.forEach(function(el,i){el.style.display=vis[i]&&rep[i]<0?"":"none";});
 edgeEl.forEach(function(el,j){var e=E[j],a=e[0],b=e[1],ok=vis[a]&&vis[b];
  el.style.display=ok&&rep[a]<0&&rep[b]<0?"":"none";
  if(ok&&rep[a]!==rep[b]&&(rep[a]>=0||rep[b]>=0))proxies[(rep[a]<0?"n"+a:"s"+rep[a])+" "+
   (rep[b]<0?"n"+b:"s"+rep[b])]=1;});
 scopeEl.forEach(function(el,s){var c=scopeOf2(s);el.style.display=c>=0&&c!==s?"none":"";
  el.classList.toggle("col",!!collapsed[s]);
  var r=el.firstChild,b=S[s].bb;if(collapsed[s]){r.setAttribute("height","30");
   r.setAttribute("width",Math.min(b[2]-b[0],Math.max(120,S[s].p.length*7+20)));}
  else{r.setAttribute("height",b[3]-b[1]);r.setAttribute("width",b[2]-b[0]);}});
 var h=[];Object.keys(proxies).forEach(function(k){var pr=k.split(" ").map(pt);
  h.push('<path class="px" marker-end="url(#arr)" d="M'+pr[0]+"L"+pr[1]+'"/>');});
 $("gp").innerHTML=h.join("");
 Array.prototype.forEach.call($("gx").children,function(el){
  var i=+el.getAttribute("data-i");
  el.style.display=vis[i]&&rep[i]<0?"":"none";});
 if(sel>=0&&(!vis[sel]||rep[sel]>=0))closePanel();
 updateHits();}
function scopeOf2(s){var best=-1,p=S[s].p;for(var c in collapsed){if(collapsed[c]&&
 p.indexOf(S[c].p)===0&&(best<0||S[c].p.length<S[best].p.length))best=+c;}return best;}
function pt(k){if(k[0]==="n"){var n=N[+k.slice(1)];return n.x+","+n.y;}
 var b=S[+k.slice(1)].bb;return (b[0]+60)+","+(b[1]+15);}
// -- side bar
function buildSide(){var cnt={},h=[];N.forEach(function(n){if(n.k==="o")cnt[n.g]=(cnt[n.g]||0)+1;});
 Object.keys(D.opStyles).forEach(function(g){if(!cnt[g])return;
  h.push('<label><input type="checkbox"'+
  ' data-g="'+g+'" checked><span class="sw" style="background:'+D.opStyles[g][0]+'"></span>'+
  GROUP_LABEL[g]+' ops ('+cnt[g]+')</label>');});
 $("roles").innerHTML=h.join("");
 $("roles").addEventListener("change",function(ev){var g=ev.target.getAttribute("data-g");
  groupOn[g]=ev.target.checked;computeVis();});
 var nops=N.filter(function(n){return n.k==="o";}).length;
 $("info").innerHTML='<p>block '+D.block+' of '+D.nblocks+' &middot; '+nops+' ops &middot; '+
  (N.length-nops)+' variables &middot; layout: '+D.engine+'</p>'+(ALL.multi?'<p>blocks: '+
  ALL.views.map(function(v){return v.block===D.block?'<b>'+v.block+'</b>':'<a class="bl nl" '+
  'data-b="'+v.block+'">'+v.block+'</a>';}).join(" ")+(D.block>0?' (parent: <a class="bl nl" '+
  'data-b="'+D.parent+'">'+D.parent+'</a>)':"")+'</p>':"");
 $("info").addEventListener("click",function(ev){var bl=ev.target.closest("a.bl");
  if(bl)openBlock(+bl.getAttribute("data-b"));});
 h=[];S.forEach(function(s,i){h.push('<label><input type="checkbox" data-s="'+i+'"> collapse '+
  esc(s.p)+'</label>');});$("scopes").innerHTML=h.join("")||"<i>none</i>";
 $("scopes").addEventListener("change",function(ev){collapsed[ev.target.getAttribute("data-s")]=
  ev.target.checked;computeVis();});
 if(D.diff){var rows={},tot=[0,0,0,0];N.forEach(function(n){if(n.k!=="o"||!n.d)return;
  rows[n.g]=rows[n.g]||[0,0,0,0];rows[n.g][n.d]++;tot[n.d]++;});
  h=['<h3>Changes</h3><p>added ops: '+tot[1]+' &middot; changed: '+tot[2]+' &middot; removed: '+
   tot[3]+'</p><table class="cnt"><tr><td></td><td>+</td><td>~</td><td>&minus;</td></tr>'];
  Object.keys(rows).forEach(function(g){h.push('<tr><td><span class="sw" style="background:'+
   D.opStyles[g][0]+'"></span>'+GROUP_LABEL[g]+'</td><td>'+rows[g][1]+'</td><td>'+rows[g][2]+
   '</td><td>'+rows[g][3]+'</td></tr>');});
  h.push('</table><label><input type="checkbox" id="donly"> show only what changed (d)</label>');
  $("diffbox").innerHTML=h.join("");
  $("donly").addEventListener("change",function(ev){diffOnly=ev.target.checked;computeVis();
  fit();});}
 if(D.legend){h=['<h3>Legend</h3>'];Object.keys(D.opStyles).forEach(function(g){if(cnt[g])
  h.push('<label><span class="sw" style="background:'+D.opStyles[g][0]+'"></span>'+
  esc(D.opStyles[g][3])+'</label>');});
  var cats={};N.forEach(function(n){if(n.k==="v")cats[n.g]=1;});
  Object.keys(D.varStyles).forEach(function(c){if(cats[c])h.push('<label><span class="sw" '+
  'style="background:'+D.varStyles[c][0]+'"></span>'+esc(D.varStyles[c][4])+'</label>');});
  if(D.diff)h.push(
  '<label><span class="sw" style="border:3px solid #00A651"></span>+ added</label>'+
  '<label><span class="sw" style="border:3px solid #2E86C1"></span>~ changed</label>'+
  '<label><span class="sw" style="border:2px dashed #999"></span>&minus; removed</label>');
  $("legend").innerHTML=h.join("");}}
// -- panel
function link(i){var n=N[i];return '<a class="nl" data-i="'+i+'">'+esc(n.k==="o"?n.t+" #"+n.ix:n.t)+
 '</a>'+(n.k==="v"&&(n.sh||n.dt)?' <code>'+esc(n.sh+" "+n.dt)+'</code>':'');}
var byName={};N.forEach(function(n,i){if(n.k==="v")byName[n.t]=i;});
function slots(t){var h=[];Object.keys(t).forEach(function(k){h.push('<tr><td>'+esc(k)+'</td><td>'+
 t[k].map(function(v){return byName[v]!==undefined?link(byName[v]):esc(v);}).join("<br>")+
 '</td></tr>');});return h.join("")||'<tr><td colspan="2"><i>none</i></td></tr>';}
function row(k,v){return '<tr><td>'+esc(k)+'</td><td>'+v+'</td></tr>';}
function select(i,keep){var n=N[i];if(sel>=0&&nodeEl[sel])nodeEl[sel].classList.remove("sel");
 sel=i;nodeEl[i].classList.add("sel");var h=[];
 var st=["","added","changed","removed"][n.d];
 if(n.k==="o"){var a={};try{a=JSON.parse(n.a);}catch(err){}
  h.push('<h2>op <span id="ptype">'+esc(n.t)+'</span></h2><table>'+row("index","#"+n.ix+
   " in block "+n.b)+row("op_role",esc(n.rn)+" ("+n.r+")")+row("group",esc(GROUP_LABEL[n.g]||n.g))+
   row("pass",esc(n.p))+row("name scope",'<code>'+esc(n.ns||"/")+'</code>')+
   row("created at",'<code id="pcall">'+esc(n.cs||"(unknown)")+'</code>')+
   (n.rv?row("op_role_var",'<code>'+esc(n.rv)+'</code>'):"")+(n.sb?row("sub-blocks",
   n.sb.map(function(b){return (ALL.multi?'<a class="bl" data-b="'+b+'">open block '+b+'</a>':
   "block "+b)+(subView(b)?' &middot; <a class="sx nl" data-b="'+b+'">'+
   (expanded[i+":"+b]?"collapse inline":"expand inline")+'</a>':"");}).join("<br>")):"")+
   (st?row("diff",st):"")+'</table>');
  h.push('<h3>Inputs</h3><table>'+slots(n.i)+'</table><h3>Outputs</h3><table>'+slots(n.o)+
   '</table><h3>Attributes</h3><table>');
  Object.keys(a).forEach(function(k){h.push(row(k,'<code>'+esc(JSON.stringify(a[k]))+'</code>'));});
  if(!Object.keys(a).length)h.push('<tr><td colspan="2"><i>none</i></td></tr>');h.push('</table>');}
 else{var prod=[],cons=[];adj[i].forEach(function(j){var e=E[j];
  if(e[1]===i)prod.push(e[0]);else cons.push(e[1]);});
  h.push('<h2>variable <span id="ptype">'+esc(n.t)+'</span></h2><table>'+row("category",esc(n.g))+
   row("type",esc(n.vt))+row("shape",'<code>'+esc(n.sh)+'</code>')+row("dtype",esc(n.dt))+
   row("persistable",n.ps?"yes":"no")+row("stop_gradient",n.sg?"yes":"no")+
   row("lod_level",n.ll)+row("created by",esc(n.p))+(n.tr!==undefined?row("trainable",
   n.tr?"yes":"no")+row("need_clip",n.nc?"yes":"no")+row("regularizer",esc(n.rg||"none")):"")+
   (st?row("diff",st):"")+'</table>');
  h.push('<h3>Producers ('+prod.length+')</h3><div id="prod">'+(prod.map(link).join("<br>")||
   "<i>none (fed or persistable)</i>")+'</div><h3>Consumers ('+cons.length+')</h3><div id="cons">'+
   (cons.map(link).join("<br>")||"<i>none</i>")+'</div>');}
 $("pbody").innerHTML=h.join("");$("panel").hidden=false;if(!keep)centre(i);}
function closePanel(){$("panel").hidden=true;
 if(sel>=0&&nodeEl[sel])nodeEl[sel].classList.remove("sel");
 sel=-1;}
$("pbody").addEventListener("click",function(ev){var sx=ev.target.closest("a.sx");
 if(sx){toggleInline(sel,+sx.getAttribute("data-b"));return;}var bl=ev.target.closest("a.bl");
 if(bl){openBlock(+bl.getAttribute("data-b"));return;}var t=ev.target.closest("a.nl");if(!t)return;
 var i=+t.getAttribute("data-i");if(!vis[i]||rep[i]>=0)reveal(i);select(i);});
function reveal(i){var n=N[i];if(n.k==="o")groupOn[n.g]=true;diffOnly=false;
 if($("donly"))$("donly").checked=false;for(var c in collapsed)
 if(collapsed[c]&&n.s>=0&&S[n.s].p.indexOf(S[c].p)===0){collapsed[c]=false;
 var cb=document.querySelector('#scopes input[data-s="'+c+'"]');if(cb)cb.checked=false;}
 var cb2=document.querySelector('#roles input[data-g="'+n.g+'"]');if(cb2)cb2.checked=true;
 computeVis();}
$("close").onclick=closePanel;
// -- search
function updateHits(){var q=$("search").value,re=null;hits.forEach(function(i){
 nodeEl[i].classList.remove("hit");});hits=[];$("search").classList.remove("bad");
 if(!q){$("hits").textContent="";return;}
 try{re=new RegExp(q,"i");}catch(err){$("search").classList.add("bad");
  $("hits").textContent="bad regex";return;}
 var hidden=0;N.forEach(function(n,i){if(re.test(n.t)||re.test(n.id)){if(vis[i]&&rep[i]<0){
  hits.push(i);nodeEl[i].classList.add("hit");}else hidden++;}});
 $("hits").textContent=hits.length+" match"+(hits.length===1?"":"es")+(hidden?" (+"+hidden+
  " hidden)":"");}
function nextHit(d){if(!hits.length)return;hitAt=(hitAt+d+hits.length)%hits.length;
 centre(hits[hitAt]);$("hits").textContent=(hitAt+1)+" of "+hits.length;}
$("search").addEventListener("input",function(){hitAt=-1;updateHits();if(hits.length)nextHit(1);});
$("search").addEventListener("keydown",function(ev){if(ev.key==="Enter"){nextHit(ev.shiftKey?-1:1);
 ev.preventDefault();}else if(ev.key==="Escape"){this.value="";updateHits();this.blur();}});
// -- pan, zoom, click
var drag=null;
stage.addEventListener("pointerdown",function(ev){drag={x:ev.clientX,y:ev.clientY,vx:view.x,
 vy:view.y,moved:false};});
window.addEventListener("pointermove",function(ev){if(!drag)return;var dx=ev.clientX-drag.x,
 dy=ev.clientY-drag.y;if(Math.abs(dx)+Math.abs(dy)>3){drag.moved=true;stage.classList.add("drag");}
 if(drag.moved){view.x=drag.vx+dx;view.y=drag.vy+dy;apply();}});
window.addEventListener("pointerup",function(ev){var d=drag;drag=null;
 stage.classList.remove("drag");
 if(!d||d.moved)return;var t=ev.target.closest?ev.target.closest(".sbt,.n,.sc text"):null;
 if(!t)return;if(t.classList.contains("sbt")){toggleInline(+t.parentNode.getAttribute("data-i"));
  return;}
 if(t.tagName==="text"){var s=+t.parentNode.getAttribute("data-s");collapsed[s]=!collapsed[s];
  var cb=document.querySelector('#scopes input[data-s="'+s+'"]');if(cb)cb.checked=!!collapsed[s];
  computeVis();return;}
 select(+t.getAttribute("data-i"),true);});
stage.addEventListener("wheel",function(ev){ev.preventDefault();var r=stage.getBoundingClientRect();
 zoom(Math.pow(1.0015,-ev.deltaY),ev.clientX-r.left,ev.clientY-r.top);},{passive:false});
$("fit").onclick=fit;$("zin").onclick=function(){zoom(1.25);};
$("zout").onclick=function(){zoom(0.8);};
$("helpbtn").onclick=function(){$("help").hidden=!$("help").hidden;};
$("help").onclick=function(){$("help").hidden=true;};
function toggleGroups(gs){var on=gs.some(function(g){return groupOn[g]===false;});
 gs.forEach(function(g){groupOn[g]=on;var cb=document.querySelector('#roles input[data-g="'+g+'"]');
 if(cb)cb.checked=on;});computeVis();}
document.addEventListener("keydown",function(ev){if(ev.target.tagName==="INPUT"||ev.ctrlKey||
 ev.metaKey||ev.altKey)return;var k=ev.key;
 if(k==="/"){$("search").focus();ev.preventDefault();}else if(k==="f")fit();
 else if(k==="+"||k==="=")zoom(1.25);else if(k==="-")zoom(0.8);
 else if(k==="n")nextHit(1);else if(k==="N")nextHit(-1);
 else if(k==="b")toggleGroups(["backward"]);
 else if(k==="o")toggleGroups(["optimize","gradient_clip","regularization","lr_schedule"]);
 else if(k==="c"){var any=S.some(function(s,i){return !collapsed[i];});S.forEach(function(s,i){
  collapsed[i]=any;});document.querySelectorAll("#scopes input").forEach(function(cb){
  cb.checked=any;});computeVis();}
 else if(k==="d"&&$("donly")){$("donly").checked=!$("donly").checked;diffOnly=$("donly").checked;
  computeVis();fit();}
 else if(k==="?")$("help").hidden=!$("help").hidden;
 else if(k==="Escape"){$("help").hidden=true;closePanel();$("search").value="";updateHits();}});
draw();buildSide();computeVis();fit();
window.fluidliteViewer={ready:true,readyAt:performance.now(),nodes:N.length,edges:E.length,
 select:select,fit:fit,view:view,toggleInline:toggleInline,expanded:expanded,
 visible:function(i){return !!vis[i]&&rep[i]<0;},
 find:function(id){for(var i=0;i<N.length;i++)if(N[i].id===id)return i;return -1;}};
document.body.setAttribute("data-ready","1");
})();
"""
