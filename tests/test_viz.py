"""Graph view (to_networkx) and its writers: DOT, GraphML, JSON, SVG/PNG, HTML, diff; fluid's
debugger and net_drawer names."""
import builtins
import json
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET

import networkx as nx
import numpy as np
import pytest

import fluidlite as fluid
import fluidlite.viz as viz
from fluidlite.viz import dot as dot_mod

needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="graphviz `dot` not installed")


def build():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data(name="x", shape=[-1, 4], dtype="float32")
        with fluid.name_scope("encoder"):
            h = fluid.layers.fc(input=x, size=6, act="relu",
                                param_attr=fluid.ParamAttr(
                                    regularizer=fluid.regularizer.L2Decay(1e-3)))
        loss = fluid.layers.mean(fluid.layers.fc(input=h, size=1))
        before = main.clone()
        opt = fluid.optimizer.SGD(learning_rate=0.1,
                                  grad_clip=fluid.clip.GradientClipByGlobalNorm(1.0))
        opt.minimize(loss)
    return main, startup, before, loss


def test_graph_nodes_edges_and_namespaced_attrs():
    main, startup, before, loss = build()
    g = viz.to_networkx(main)
    assert isinstance(g, nx.MultiDiGraph)
    block = main.global_block()
    assert g.number_of_nodes() == len(block.vars) + len(block.ops)
    for n, d in g.nodes(data=True):
        assert all(k.startswith("fl_") for k in d), d
        assert all(isinstance(v, (str, int, float, bool)) for v in d.values())
    mul = g.nodes["op:0:0"]
    assert (mul["fl_type"], mul["fl_role"], mul["fl_pass"]) == ("mul", "forward", "forward")
    assert mul["fl_namescope"] == "/encoder/"
    assert g.nodes["var:fc_0.w_0"]["fl_category"] == "parameter"
    assert g.nodes["var:fc_0.w_0"]["fl_shape"] == "[4, 6]"
    assert g.nodes["var:fc_0.w_0"]["fl_dtype"] == "float32"
    assert g.nodes["var:x"]["fl_category"] == "data"
    assert g.nodes["var:learning_rate_0"]["fl_category"] == "persistable"
    assert g.nodes["var:fc_0.w_0@GRAD"]["fl_category"] == "gradient"
    assert g.nodes["var:fc_0.w_0@GRAD"]["fl_pass"] == "backward"
    slots = {(u, d["fl_slot"]) for u, v, d in g.in_edges("op:0:0", data=True)}
    assert slots == {("var:x", "X"), ("var:fc_0.w_0", "Y")}
    assert [d["fl_slot"] for _, _, d in g.out_edges("op:0:0", data=True)] == ["Out"]
    groups = {d["fl_group"] for _, d in g.nodes(data=True) if d["fl_kind"] == "op"}
    assert {"forward", "loss", "backward", "gradient_clip", "regularization",
            "optimize"} <= groups
    # ids are stable: the same program gives the same graph
    assert list(viz.to_networkx(main).nodes) == list(g.nodes)


def test_hide_and_highlight_and_block_option():
    main, startup, before, loss = build()
    g = viz.to_networkx(main, hide_backward=True, hide_optimizer=True, highlight=r"^fc_0\.w")
    roles = {d["fl_role"] for _, d in g.nodes(data=True) if d["fl_kind"] == "op"}
    assert roles == {"forward", "loss"}
    assert not any("@GRAD" in n for n in g.nodes)
    assert "var:learning_rate_0" not in g            # only optimizer ops used it
    assert g.nodes["var:fc_0.w_0"]["fl_highlight"] and not g.nodes["var:x"]["fl_highlight"]
    assert all(d["fl_highlight"] for u, v, d in g.edges(data=True) if u == "var:fc_0.w_0")
    with pytest.raises(IndexError, match="1 block"):
        viz.to_networkx(main, block=3)
    with pytest.raises(ValueError, match="regular expression"):
        viz.to_networkx(main, highlight="(")
    with pytest.raises(TypeError, match="Program or Block"):
        viz.to_networkx("main")


def test_dot_quotes_every_id():
    prog = fluid.Program()
    with fluid.program_guard(prog):
        x = fluid.data(name='we"ird\\name', shape=[2], dtype="float32")
        prog.global_block().create_var(name="fc_0.w_0@GRAD@RENAME@0", shape=[2],
                                       dtype="float32")
        prog.global_block().append_op("sum", inputs={"X": [x, "fc_0.w_0@GRAD@RENAME@0"]},
                                      outputs={"Out": "a:b c"})
    text = viz.to_dot(prog)
    assert '"var:fc_0.w_0@GRAD@RENAME@0"' in text
    assert '"var:we\\"ird\\\\name"' in text
    assert '"var:a:b c"' in text
    quoted = r'"(?:[^"\\]|\\.)*"'
    for line in text.splitlines()[1:-1]:
        stmt = line.strip()
        if stmt.startswith(("graph [", "node [", "edge [", "}")):
            continue
        if stmt.startswith("subgraph"):
            assert re.fullmatch(r"subgraph " + quoted + r" \{", stmt), stmt
        else:
            assert re.match(quoted + r"( -> " + quoted + r")? \[", stmt), stmt
    if shutil.which("dot"):
        svg = viz.render(text, "svg").decode()
        assert "var:fc_0.w_0@GRAD@RENAME@0" in svg and "var:a:b c" in svg


@needs_dot
def test_dot_renders_with_graphviz(tmp_path):
    main, startup, before, loss = build()
    path = tmp_path / "g.dot"
    viz.export(main, path)
    proc = subprocess.run(["dot", "-Tsvg", str(path)], capture_output=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert b"Warning" not in proc.stderr
    assert b"<svg" in proc.stdout
    viz.export(main, tmp_path / "g.png")
    assert (tmp_path / "g.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    svg = viz.render(viz.to_dot(main, rankdir="LR"), "svg")
    assert b"gradient clip op" in svg and b"regularization op" in svg   # the legend


def test_graphml_reads_back_with_networkx(tmp_path):
    main, startup, before, loss = build()
    g = viz.to_networkx(main)
    path = tmp_path / "g.graphml"
    viz.export(main, path)
    back = nx.read_graphml(path, force_multigraph=True)
    assert set(back.nodes) == set(g.nodes)
    assert back.number_of_edges() == g.number_of_edges()
    assert back.nodes["op:0:0"]["fl_type"] == "mul"
    assert back.nodes["var:fc_0.w_0"]["fl_persistable"] is True
    assert back.graph["fl_format"] == "fluidlite.graph/1"


def test_node_link_json(tmp_path):
    main, startup, before, loss = build()
    path = tmp_path / "g.json"
    viz.export(main, path, hide_backward=True)
    doc = json.loads(path.read_text())
    assert doc["directed"] and doc["multigraph"]
    g = viz.to_networkx(main, hide_backward=True)
    assert {n["id"] for n in doc["nodes"]} == set(g.nodes)
    assert len(doc["edges"]) == g.number_of_edges()
    assert {"source", "target", "key", "fl_slot"} <= set(doc["edges"][0])
    back = nx.MultiDiGraph()
    for n in doc["nodes"]:
        back.add_node(n["id"], **{k: v for k, v in n.items() if k != "id"})
    for e in doc["edges"]:
        back.add_edge(e["source"], e["target"], key=e["key"])
    assert nx.is_isomorphic(back, g)


@needs_dot
def test_html_is_self_contained_with_inline_svg(tmp_path):
    main, startup, before, loss = build()
    path = tmp_path / "g.html"
    viz.export(main, path, format="html-static", title="my <net>")
    page = path.read_text()
    assert page.startswith("<!DOCTYPE html>") and "<svg" in page and "</svg>" in page
    assert "<script" not in page.lower()
    assert not re.search(r'(src|href)\s*=\s*"(https?:)?//', page)
    assert "<?xml" not in page and "<!DOCTYPE svg" not in page
    assert "my &lt;net&gt;" in page
    assert "gradient_clip" in page and "regularization" in page and "sgd" in page
    assert "fc_0.w_0@GRAD" in page                        # the variable table
    assert page.count("<svg") == 1


def _viewer_data(page):
    m = re.search(r'<script id="fl-data" type="application/json">(.*?)</script>', page, re.S)
    assert m, "no embedded data"
    view = json.loads(m.group(1))["views"][0]
    for n in view["nodes"]:                 # the page resolves interned strings the same way
        n["ns"] = view["strs"][n["ns"]]
        if "cs" in n:
            n["cs"] = view["strs"][n["cs"]]
    return view


def sub_block_program():
    prog = fluid.Program()
    with fluid.program_guard(prog):
        x = fluid.data(name="x", shape=[-1, 2], dtype="float32")
        y = fluid.layers.relu(x)
        sub = prog._create_block()
        sub.create_var(name="inner", shape=[-1, 2], dtype="float32")
        sub.append_op("relu", inputs={"X": y}, outputs={"Out": "inner"})
        prog._rollback()
    prog.global_block().ops[0].attrs["sub_block"] = sub
    return prog


def test_interactive_html_holds_every_block(tmp_path):
    prog = sub_block_program()
    page = viz.to_interactive_html(prog)
    m = re.search(r'<script id="fl-data" type="application/json">(.*?)</script>', page, re.S)
    doc = json.loads(m.group(1))
    assert doc["multi"] and [v["block"] for v in doc["views"]] == [0, 1]
    outer = next(n for n in doc["views"][0]["nodes"] if n["k"] == "o")
    assert outer["sb"] == [1]                          # the panel links to block 1
    inner = doc["views"][1]
    assert inner["parent"] == 0 and {n["t"] for n in inner["nodes"]} >= {"relu", "inner"}
    one = json.loads(re.search(r'type="application/json">(.*?)</script>',
                               viz.to_interactive_html(prog, block=1), re.S).group(1))
    assert not one["multi"] and one["views"][0]["block"] == 1


@pytest.mark.parametrize("engine", ["auto", "layered"])
def test_interactive_html_is_one_offline_file(tmp_path, engine):
    main, startup, before, loss = build()
    path = viz.export(main, tmp_path / "net.html", title="my </script> net", layout=engine)
    page = open(path).read()
    assert page.startswith("<!DOCTYPE html>") and page.count("<script") == 2
    assert not re.search(r'(src|href)\s*=\s*"(https?:)?//', page)   # nothing to fetch
    assert "fetch(" not in page and "XMLHttpRequest" not in page and "@import" not in page
    data = _viewer_data(page)
    assert data["title"] == "my </script> net" and "my &lt;/script&gt; net" in page
    g = viz.to_networkx(main)
    assert len(data["nodes"]) == g.number_of_nodes()
    assert data["engine"] == ("dot" if engine == "auto" and shutil.which("dot") else "layered")
    by_id = {n["id"]: n for n in data["nodes"]}
    sgd = next(n for n in data["nodes"] if n["k"] == "o" and n["t"] == "sgd")
    assert sgd["g"] == "optimize" and sgd["i"]["Param"] and sgd["o"]["ParamOut"]
    mul = next(n for n in data["nodes"] if n["k"] == "o" and n["t"] == "mul")
    assert "test_viz.py" in mul["cs"] and mul["rn"] == "forward"
    clip = [n for n in data["nodes"] if n["k"] == "o" and n["g"] == "gradient_clip"]
    assert clip and all(n["ns"].startswith("/gradient_clip") for n in clip)
    w = by_id["var:fc_0.w_0"]
    assert w["g"] == "parameter" and w["sh"] and w["dt"] == "float32" and w["nc"] == 1
    for n in data["nodes"]:                            # every node has a finite place and size
        assert all(isinstance(n[k], (int, float)) for k in ("x", "y", "w", "h"))
    ids = [n["id"] for n in data["nodes"]]
    pairs = {(ids[e[0]], ids[e[1]]) for e in data["edges"]}
    assert pairs == {(u, v) for u, v in g.edges()}
    assert {s["p"] for s in data["scopes"]} >= {"/gradient_clip/", "/regularization/"}


def test_interactive_layout_options(tmp_path, monkeypatch):
    main, startup, before, loss = build()
    import importlib
    layout_mod = importlib.import_module("fluidlite.viz.layout")   # viz.layout is the function
    monkeypatch.setattr(layout_mod, "DOT_MAX_NODES", 10)     # big graphs skip dot
    assert viz.layout(viz.to_networkx(main)).engine == "layered"
    monkeypatch.undo()
    with pytest.raises(ValueError, match="layout engine"):
        viz.to_interactive_html(main, layout="spring")
    with pytest.raises(ValueError, match="rankdir"):
        viz.to_interactive_html(main, rankdir="XY")
    lay = viz.layout(viz.to_networkx(main), "layered")
    g = viz.to_networkx(main)
    for op in (n for n, d in g.nodes(data=True) if d["fl_kind"] == "op"):
        for v in g.successors(op):       # a new output sits below the op that first wrote it
            if next(iter(g.predecessors(v))) == op and not g.has_edge(v, op):
                assert lay.pos[v][1] > lay.pos[op][1]
    rows = {}
    for n, (x, y, w, h) in lay.pos.items():        # no two nodes overlap within a layer
        rows.setdefault(y, []).append((x - w / 2, x + w / 2))
    for spans in rows.values():
        spans.sort()
        assert all(a[1] <= b[0] + 1e-6 for a, b in zip(spans, spans[1:]))


@pytest.fixture
def no_graphviz(monkeypatch):
    """A machine without Graphviz: no `dot` on PATH and no pygraphviz."""
    real_which, real_import = shutil.which, builtins.__import__
    monkeypatch.setattr(dot_mod.shutil, "which",
                        lambda name, *a, **k: None if name == "dot" else real_which(name, *a, **k))

    def no_pygraphviz(name, *args, **kwargs):
        if name == "pygraphviz":
            raise ImportError("no pygraphviz")
        return real_import(name, *args, **kwargs)
    monkeypatch.setattr(builtins, "__import__", no_pygraphviz)
    assert not viz.graphviz_available()


def _svg_doc(text):
    """The parsed SVG (ElementTree raises on anything that is not well-formed XML)."""
    root = ET.fromstring(text.encode("utf-8") if isinstance(text, str) else text)
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    return root


def _titles(root):
    return [t.text for t in root.iter("{http://www.w3.org/2000/svg}title")]


def test_without_graphviz_svg_is_drawn_by_fluidlite(no_graphviz, tmp_path):
    main, startup, before, loss = build()
    # PNG and PDF need Graphviz: the error says what to install and what works without it
    with pytest.raises(viz.GraphvizNotFoundError,
                       match=r"apt-get install graphviz.*fluidlite\[viz\].*pygraphviz.*SVG"):
        viz.export(main, tmp_path / "g.png")
    assert not (tmp_path / "g.png").exists()
    with pytest.raises(viz.GraphvizNotFoundError):
        viz.export(main, tmp_path / "g.svg", renderer="graphviz")
    # SVG: fluidlite draws it, and says so in the file
    path = viz.export(main, tmp_path / "g.svg", title="my <net> & co")
    text = open(path, encoding="utf-8").read()
    assert text.startswith("<?xml") and viz.svg.GENERATOR in text
    root = _svg_doc(text)
    titles = _titles(root)
    assert titles[0] == "my <net> & co"
    g = viz.to_networkx(main, sub_blocks=True)
    assert set(g.nodes) <= set(titles)              # every node drawn, named by its id
    for label in ("gradient clip op", "regularization op", "parameter", "backward op"):
        assert label in text                        # the legend of the classes present
    assert "/gradient_clip/" in text                # name scopes
    # the static page gets the same picture; the interactive page needs no Graphviz either
    page = viz.to_html(main)
    assert page.count("<svg") == 1 and "(Graphviz was not used)" in page
    assert "elementwise_add" in page
    assert "<?xml" not in page
    with pytest.raises(viz.GraphvizNotFoundError):
        viz.to_html(main, require_svg=True)
    with pytest.raises(viz.GraphvizNotFoundError):
        viz.to_html(main, renderer="graphviz")
    data = _viewer_data(viz.to_interactive_html(main))    # the viewer lays out in the page
    assert data["engine"] == "elk" and data["nodes"] and data["groups"]
    data = _viewer_data(viz.to_interactive_html(main, layout="auto"))   # the flat one: Python
    assert data["engine"] == "layered" and data["nodes"]


@pytest.mark.parametrize("renderer", ["builtin", "graphviz"])
def test_svg_is_well_formed_xml_whatever_the_names(renderer, tmp_path):
    if renderer == "graphviz" and not viz.graphviz_available():
        pytest.skip("graphviz not installed")
    weird = ["ctl\x00\x01\x1b\x7f\x85end", 'q"uo\'te<&>', "tab\there", "new\nline\rcr",
             "sur\udc80rogate", "non\ufffechar", "émoji😀", "]]>--", "back\\x00slash"]
    prog = fluid.Program()
    block = prog.global_block()
    for name in weird:
        block.create_var(name=name, shape=[2], dtype="float32")
    block.create_var(name="out", shape=[2], dtype="float32")
    block.append_op("sum", inputs={"X": weird}, outputs={"Out": "out"})
    prog.global_block().ops[0].attrs["op_namescope"] = "/scope\x02</"
    text = viz.svg.svg_text(prog, renderer=renderer, title="t\x00<&>")
    root = _svg_doc(text)
    titles = _titles(root)
    nodes = [e.find("{http://www.w3.org/2000/svg}title").text
             for e in root.iter("{http://www.w3.org/2000/svg}g")
             if "node" in (e.get("class") or "").split()]
    nodes = [n for n in nodes if n != "legend:table"]      # Graphviz's legend is a node
    assert len(nodes) == len(weird) + 2             # every var and the op: nothing dropped
    assert len(set(nodes)) == len(nodes)            # two names, two ids
    if renderer == "builtin":
        assert "var:ctl\\x00\\x01\\x1b\\x7f\\x85end" in titles
        assert "var:q\"uo'te<&>" in titles and "var:sur\\udc80rogate" in titles
        assert "var:émoji😀" in titles and "var:new\\nline\\rcr" in titles
    viz.export(prog, tmp_path / "w.svg", renderer=renderer)
    _svg_doc((tmp_path / "w.svg").read_bytes())
    page = viz.to_html(prog, renderer=renderer)
    svg = page[page.index("<svg"):page.index("</svg>") + 6]
    _svg_doc(svg)


def test_builtin_svg_options_diff_and_sub_blocks():
    main, startup, before, loss = build()
    diff = viz.to_svg(viz.diff_graph(before, main), rankdir="LR", edge_labels=False,
                      legend=False)
    root = _svg_doc(diff)
    assert "+ sgd" in diff and "Legend" not in diff and 'class="slot"' not in diff
    assert "#00A651" in diff                        # the added ops' green border
    hl = viz.to_svg(main, highlight=r"^fc_0\.w_0$")
    assert "#FF8C00" in hl and "highlighted" in hl
    with pytest.raises(ValueError, match="rankdir"):
        viz.to_svg(main, rankdir="XY")
    with pytest.raises(ValueError, match="renderer"):
        viz.export(main, "never.svg", renderer="cairo")
    # sub-blocks: drawn in a box of their own beside the op owning them, as Graphviz clusters
    prog = sub_block_program()
    text = viz.to_svg(prog)
    _svg_doc(text)
    assert "block 1 (relu op:0:0)" in text and "var:inner" in text
    lay = viz.layout(viz.to_networkx(prog, sub_blocks=True), "layered")
    x0, y0, x1, y1 = lay.blocks[1]
    inner = lay.pos["op:1:0"]
    assert x0 < inner[0] < x1 and y0 < inner[1] < y1
    for n in ("op:0:0", "var:x"):                   # the outer block's nodes stay outside
        assert not x0 <= lay.pos[n][0] <= x1
    # BT mirrors TB
    g = viz.to_networkx(main)
    tb, bt = viz.layout(g, "layered", "TB"), viz.layout(g, "layered", "BT")
    assert tb.pos["var:x"][1] < tb.pos["op:0:0"][1] and bt.pos["var:x"][1] > bt.pos["op:0:0"][1]


def test_render_rejects_unknown_format():
    with pytest.raises(ValueError, match="cannot render format"):
        viz.render("digraph {}", "exe; rm -rf /")


def test_diff_marks_what_minimize_added(tmp_path):
    main, startup, before, loss = build()
    g = viz.diff_graph(before, main)
    status = {n: d["fl_diff"] for n, d in g.nodes(data=True)}
    forward = [n for n, d in g.nodes(data=True)
               if d["fl_kind"] == "op" and d["fl_role"] == "forward"]
    assert forward and all(status[n] == "same" for n in forward)
    added_groups = {d["fl_group"] for n, d in g.nodes(data=True)
                    if d["fl_kind"] == "op" and d["fl_diff"] == "added"}
    assert {"backward", "gradient_clip", "regularization", "optimize"} <= added_groups
    assert status["var:fc_0.w_0@GRAD"] == "added" and status["var:x"] == "same"
    loss_op = next(n for n, d in g.nodes(data=True) if d.get("fl_role") == "loss")
    assert status[loss_op] == "changed"                  # append_backward set op_role=256
    summary = json.loads(g.graph["fl_diff_summary"])
    assert "squared_l2_norm" in summary["added_ops"] and "sgd" in summary["added_ops"]
    text = viz.to_dot(g)
    assert '"+ sgd"' in text or 'label="+ sgd"' in text
    reverse = viz.diff_graph(main, before)
    removed = [d for _, d in reverse.nodes(data=True) if d["fl_diff"] == "removed"]
    assert any(d.get("fl_type") == "sgd" for d in removed)
    viz.export(g, tmp_path / "diff.dot")
    if shutil.which("dot"):
        page = viz.to_html(g)
        assert "added ops" in page and "<svg" in page


def test_export_format_errors(tmp_path):
    main, startup, before, loss = build()
    with pytest.raises(ValueError, match="cannot tell the export format"):
        viz.export(main, tmp_path / "g.xyz")
    with pytest.raises(ValueError, match="apply when building the graph"):
        viz.to_dot(viz.to_networkx(main), hide_backward=True)
    viz.export(main, tmp_path / "p.txt")
    assert (tmp_path / "p.txt").read_text().startswith("{ // block 0")


# -- fluid names --------------------------------------------------------------------------------
def test_draw_block_graphviz(tmp_path):
    main, startup, before, loss = build()
    path = tmp_path / "block.dot"
    assert fluid.debugger.draw_block_graphviz(main.global_block(), highlights=["fc_0.w_0"],
                                              path=str(path)) == str(path)
    text = path.read_text()
    assert text.startswith("digraph") and "#FF8C00" in text      # highlighted
    if shutil.which("dot"):
        assert (tmp_path / "block.pdf").read_bytes()[:4] == b"%PDF"


def test_pprint_codes():
    main, startup, before, loss = build()
    text = fluid.debugger.pprint_program_codes(main)
    assert text.startswith("// block-0  parent--1\n// variables\n")
    assert "Tensor fc_0.w_0 (tensor(type=float32, shape=[4, 6]))" in text
    assert "fc_0.tmp_0 = mul(X=x, Y=fc_0.w_0) [{x_num_col_dims=1,y_num_col_dims=1}]" in text
    assert "@GRAD" not in text
    full = fluid.debugger.pprint_block_codes(main.global_block(), show_backward=True)
    assert "mul_grad" in full and "= 1.0 [shape=[1]]" in full
    assert main._to_readable_code() == str(main)


def test_net_drawer_draw_graph(tmp_path):
    main, startup, before, loss = build()
    path = tmp_path / "net.gv"
    g = fluid.net_drawer.draw_graph(startup, main, filename=str(path),
                                    graph_attr={"rankdir": "LR"})
    assert path.read_text() == g.source
    assert '"mul_0" [label="mul"]' in g.source
    assert '"Feed" -> "mul_0" [label="X(x)"]' in g.source
    assert 'rankdir="LR"' in g.source
    # parameters come from their init op in the startup program
    assert re.search(r'"(uniform_random|fill_constant)_\d+" -> "mul_0" \[label="Y\(fc_0.w_0\)"\]',
                     g.source)
    with pytest.raises(TypeError, match="unexpected keyword"):
        fluid.net_drawer.draw_graph(startup, main, colour="red")


def test_visualize_sample_writes_its_views(tmp_path):
    import importlib.util
    import os
    path = os.path.join(os.path.dirname(__file__), "..", "samples", "visualize.py")
    spec = importlib.util.spec_from_file_location("visualize_sample", path)
    sample = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sample)
    main, startup, before, loss = sample.build()
    written = sample.write_views(main, before, str(tmp_path))
    names = {os.path.basename(p) for p in written}
    assert {"mlp_program.html", "mlp_program_static.html", "mlp_minimize_diff.html",
            "mlp_forward.dot", "mlp_program.svg", "mlp_minimize_diff.svg"} <= names
    _svg_doc((tmp_path / "mlp_minimize_diff.svg").read_bytes())      # with or without Graphviz
    page = (tmp_path / "mlp_program_static.html").read_text()
    assert "<svg" in page and "<script" not in page
    for label in ("forward op", "backward op", "gradient clip op", "regularization op",
                  "optimizer update op", "LR schedule op"):
        assert label in page
    data = _viewer_data((tmp_path / "mlp_program.html").read_text())
    assert {n["g"] for n in data["nodes"] if n["k"] == "o"} >= {
        "forward", "backward", "gradient_clip", "regularization", "optimize", "lr_schedule"}
    g = viz.diff_graph(before, main)
    added = {d["fl_group"] for _, d in g.nodes(data=True)
             if d["fl_kind"] == "op" and d["fl_diff"] == "added"}
    assert {"backward", "gradient_clip", "regularization", "lr_schedule", "optimize"} <= added


def _load_sample(name):
    import importlib.util
    import os
    path = os.path.join(os.path.dirname(__file__), "..", "samples", f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"{name}_sample", path)
    sample = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sample)
    return sample


def test_quick_start_trains_clips_and_writes_its_files(tmp_path, capsys):
    sample = _load_sample("quick_start")
    hist = sample.train(epochs=2, clip_norm=0.5, out_dir=str(tmp_path))
    out = capsys.readouterr().out
    assert "epoch 1/2 [" in out and "epoch 2/2 [" in out and "before clip" in out
    assert "quick_start_program.html" in out
    assert len(hist["loss"]) == 2 * 63 and len(hist["test_acc"]) == 2
    assert np.mean(hist["loss"][-20:]) < np.mean(hist["loss"][:20])      # it learns
    before, after = np.array(hist["norm_before"]), np.array(hist["norm_after"])
    assert (before > 0.5).any()                                          # the clip acts ...
    np.testing.assert_allclose(after, np.minimum(before, 0.5), rtol=1e-4)  # ... exactly so
    page = (tmp_path / "quick_start_program.html").read_text()
    types = {n["t"] for n in _viewer_data(page)["nodes"] if n["k"] == "o"}
    assert {"squared_l2_norm", "momentum", "mul_grad"} <= types
    png = tmp_path / "quick_start_curves.png"
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert not png.exists() and 'pip install "fluidlite[plot]"' in out
    else:
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and "training curves:" in out


def test_plot_curves_without_matplotlib_says_how(tmp_path, monkeypatch, capsys):
    sample = _load_sample("_common")
    real_import = builtins.__import__

    def no_mpl(name, *args, **kwargs):
        if name.startswith("matplotlib"):
            raise ImportError("no matplotlib")
        return real_import(name, *args, **kwargs)
    monkeypatch.setattr(builtins, "__import__", no_mpl)
    assert sample.plot_curves(str(tmp_path / "c.png"), {"loss": [1.0], "acc": [0.5]}, "t") is None
    assert 'pip install "fluidlite[plot]"' in capsys.readouterr().out
    assert not (tmp_path / "c.png").exists()


def test_recognize_digits_writes_its_curves(tmp_path, monkeypatch, capsys):
    import os
    import runpy
    import sys
    pytest.importorskip("matplotlib", reason="the plot extra (matplotlib) is not installed")
    path = os.path.join(os.path.dirname(__file__), "..", "samples", "recognize_digits.py")
    monkeypatch.setattr(sys, "argv", [path, "--epochs", "1", "--data", "generated",
                                      "--train-size", "64", "--batch-size", "32",
                                      "--save-dir", str(tmp_path / "model")])
    runpy.run_path(path, run_name="__main__")
    png = tmp_path / "recognize_digits_curves.png"
    assert f"training curves: {png}" in capsys.readouterr().out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_writes_the_viewer_and_the_static_page(tmp_path, capsys):
    from fluidlite import cli
    from fluidlite.formats import serialize
    main, startup, before, loss = build()
    serialize.save_program(main, tmp_path / "train.json")
    serialize.save_program(before, tmp_path / "before.json")
    assert cli.main(["viz", str(tmp_path / "train.json"), "-o", str(tmp_path / "v.html"),
                     "--diff-against", str(tmp_path / "before.json")]) == 0
    data = _viewer_data((tmp_path / "v.html").read_text())
    assert data["diff"] and data["summary"]["added_ops"]
    assert {n["d"] for n in data["nodes"]} >= {0, 1}                # same and added marks
    assert cli.main(["viz", str(tmp_path / "train.json"), "-f", "html"]) == 0
    assert _viewer_data(capsys.readouterr().out)["nodes"]
    assert cli.main(["viz", str(tmp_path / "train.json"), "-f", "html-static"]) == 0
    assert "<script" not in capsys.readouterr().out


@pytest.mark.parametrize("name", ["dygraph_clip", "grad_clip"])
def test_clip_samples_write_their_curves(name, tmp_path, monkeypatch, capsys):
    """Both clip samples draw loss and the global norm before/after the clip through
    ``plot_curves``; grad_clip (a classifier) also its batch accuracy."""
    import os
    import runpy
    import sys
    pytest.importorskip("matplotlib", reason="the plot extra (matplotlib) is not installed")
    import matplotlib.pyplot as plt
    seen = {}
    real_subplots = plt.subplots

    def spy(*args, **kwargs):                 # record which panels were drawn
        fig, axes = real_subplots(*args, **kwargs)
        seen["axes"] = axes
        return fig, axes
    monkeypatch.setattr(plt, "subplots", spy)
    png = tmp_path / f"{name}_curves.png"
    path = os.path.join(os.path.dirname(__file__), "..", "samples", f"{name}.py")
    monkeypatch.setattr(sys, "argv", [path, "--curves", str(png)])
    runpy.run_path(path, run_name="__main__")
    assert f"training curves: {png}" in capsys.readouterr().out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    titles = [ax.get_title() for ax in seen["axes"][0]]
    expected = ["training loss"] + (["accuracy"] if name == "grad_clip" else [])
    assert titles == expected + ["global gradient norm"]
    before, after = (line.get_ydata() for line in seen["axes"][0][-1].get_lines()[:2])
    assert len(before) == (5 if name == "dygraph_clip" else 15)
    assert (np.asarray(after) < np.asarray(before)).all()        # the clip shrank every step
