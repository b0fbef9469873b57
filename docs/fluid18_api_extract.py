"""Rebuild ``docs/fluid18_api.txt`` (fluid 1.8's public names) from the PaddlePaddle/docs repo.

This is a one-off maintenance tool, not used by the tests: the list it writes is checked in.
It needs a git clone of https://github.com/PaddlePaddle/docs with the ``release/1.8`` branch::

    python docs/fluid18_api_extract.py --git-dir /path/to/docs/.git > docs/fluid18_api.txt

Sources (facts only: module, name, kind, signature):

* the English API reference, ``doc/fluid/api/<module>/<name>.rst``: its ``autofunction`` /
  ``autoclass`` lines give the documented names of every module (this is fluid 1.8's
  documented API: 350 names under ``fluid.layers``, 50 at the top level, ...);
* the Chinese API reference, ``doc/fluid/api_cn/**``: its ``py:function`` / ``py:class``
  directives give the signatures (the English pages take them from the code with autodoc);
* the methods of the documented classes: the headings of their Chinese pages
  (``run(program=None, feed=None, ...)`` underlined), recorded as ``Class.method``;
* ``SUPPLEMENT`` below: modules fluid 1.8 shipped without a page in the reference
  (``fluid.layers.distributions``, ``fluid.data_feeder``, the main ``fluid.contrib`` and
  ``fluid.incubate.fleet`` names), taken from fluid 1.8's package ``__init__`` files (and
  the inference API's ``fluid.core`` names from its pybind module); their
  signatures are not recorded (``-``), so only their existence is checked.
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
from typing import Dict, List, Tuple

BRANCH = "release/1.8"

# module -> names, for modules fluid 1.8 shipped but did not document in the API reference
SUPPLEMENT: Dict[str, Tuple[str, ...]] = {
    # fluid/__init__.py re-exports these from fluid.io; io.py defines the get_* helpers
    "fluid": ("load_program_state(model_path, var_list=None)",
              "set_program_state(program, state_dict)"),
    "fluid.io": ("get_parameter_value(para, executor)",
                 "get_parameter_value_by_name(name, executor, program=None)",
                 "is_parameter(var)", "is_persistable(var)", "is_belong_to_optimizer(var)"),
    "fluid.layers.distributions": ("Uniform", "Normal", "Categorical", "MultivariateNormalDiag"),
    "fluid.data_feeder": ("DataFeeder",),
    # in fluid 1.8's optimizer.__all__ without a page in the reference
    "fluid.optimizer": ("PipelineOptimizer(optimizer, num_microbatches=1, start_cpu_core_id=0)",),
    "fluid.contrib": ("InitState", "StateCell", "TrainingDecoder", "BeamSearchDecoder",
                      "memory_usage", "op_freq_statistic", "QuantizeTranspiler",
                      "extend_with_decoupled_weight_decay", "summary", "mixed_precision",
                      "fused_elemwise_activation", "sequence_topk_avg_pooling", "var_conv_2d",
                      "match_matrix_tensor", "tree_conv", "fused_embedding_seq_pool",
                      "multiclass_nms2", "search_pyramid_hash", "shuffle_batch",
                      "partial_concat", "partial_sum", "tdm_child", "rank_attention",
                      "tdm_sampler", "batch_fc", "basic_gru", "basic_lstm", "BasicGRUUnit",
                      "BasicLSTMUnit", "ctr_metric_bundle"),
    "fluid.contrib.mixed_precision": ("decorate", "AutoMixedPrecisionLists"),
    "fluid.incubate.fleet.base.role_maker": ("Role", "RoleMakerBase", "MPIRoleMaker",
                                             "MPISymetricRoleMaker", "UserDefinedRoleMaker",
                                             "UserDefinedCollectiveRoleMaker",
                                             "PaddleCloudRoleMaker", "GeneralRoleMaker"),
    "fluid.incubate.fleet.base.fleet_base": ("Fleet", "Mode", "DistributedOptimizer"),
    "fluid.incubate.fleet.collective": ("fleet", "DistributedStrategy", "CollectiveOptimizer"),
    "fluid.incubate.fleet.parameter_server.distribute_transpiler": ("fleet",),
    # the inference API: pybind names of fluid.core (paddle/fluid/pybind/inference_api.cc),
    # documented in the deployment guide, not in the API reference
    "fluid.core": ("AnalysisConfig", "create_paddle_predictor(config)", "PaddleTensor",
                   "PaddleDType", "PaddleBuf", "ZeroCopyTensor"),
}
# supplement names whose signature is the one documented under another module
SIGNATURE_FROM = {"fluid.layers.distributions": "fluid.layers", "fluid.data_feeder": "fluid"}


# typos of the Chinese pages, checked against fluid 1.8's code
CORRECTIONS = {"fluid.layers.chunk_eval": ("sqe_length", "seq_length"),   # the code's name
               "fluid.initializer.BilinearInitializer": ("())", "()"),
               "fluid.dataset.InMemoryDataset.set_pipe_command": ("coommand", "command"),
               "fluid.dataset.QueueDataset.set_pipe_command": ("coommand", "command")}


def _git(git_dir: str, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", git_dir, *args], check=True,
                          capture_output=True, text=True).stdout


def _documented(git_dir: str) -> List[Tuple[str, str, str]]:
    """(module, name, kind) for every autofunction/autoclass of the English reference."""
    out = _git(git_dir, "grep", "-h", "-E", r"^\.\.\s+auto(function|class)::", BRANCH, "--",
               "doc/fluid/api/*")
    rows = set()
    for line in out.splitlines():
        directive, target = line.split("::", 1)
        kind = "class" if "autoclass" in directive else "function"
        full = target.strip()
        if not full.startswith("paddle.fluid."):
            continue                     # paddle.dataset.* (the v2 data sets) is not fluid
        module, name = full[len("paddle."):].rsplit(".", 1)
        rows.add((module, name, kind))
    return sorted(rows)


def _signatures(git_dir: str) -> Dict[str, str]:
    """full name ('fluid.layers.fc') -> '(input, size, ...)' from the Chinese reference."""
    out = _git(git_dir, "grep", "-h", "-E", r"^\s*\.\.\s+py:(function|class)::", BRANCH, "--",
               "doc/fluid/api_cn")
    sigs: Dict[str, str] = {}
    for line in out.splitlines():
        target = line.split("::", 1)[1].strip()
        m = re.match(r"paddle\.(fluid[\w.]*)\s*(\(.*\))?\s*$", target)
        if not m:
            continue
        sig = (m.group(2) or "").replace("’", "'").replace("‘", "'").replace("“", '"')
        sig = sig.replace("”", '"').replace("，", ",")
        if m.group(1) in CORRECTIONS:
            sig = sig.replace(*CORRECTIONS[m.group(1)])
        sigs.setdefault(m.group(1), sig)
    return sigs


_HEADING_RULE = re.compile(r"^('{4,}|\^{4,})\s*$")
_METHOD = re.compile(r"^([A-Za-z_]\w*)(\(.*\))\s*(?:(?:→|->).*)?$")


def _methods(git_dir: str, classes: set) -> List[Tuple[str, str, str]]:
    """(module, 'Class.method', signature) for the method headings (a line underlined with
    quotes or carets) of each documented class's Chinese page; attribute headings (no
    parentheses) are skipped, and signatures that are not Python are not recorded."""
    files = _git(git_dir, "grep", "-l", "-E", r"^\s*\.\.\s+py:class::", BRANCH, "--",
                 "doc/fluid/api_cn").split()
    rows = []
    for ref in files:
        text = _git(git_dir, "show", ref)
        m = re.search(r"^\s*\.\.\s+py:class::\s*paddle\.(fluid[\w.]*)", text, flags=re.M)
        if not m:
            continue
        module, cls = m.group(1).rsplit(".", 1)
        if (module, cls) not in classes:
            continue
        lines = text.splitlines()
        for heading, rule in zip(lines, lines[1:]):
            hm = _METHOD.match(heading.strip())
            if _HEADING_RULE.match(rule) and hm and not hm.group(1).startswith("_"):
                sig = hm.group(2).replace("’", "'").replace("‘", "'")
                try:
                    compile(f"def f{sig}: pass", "<sig>", "exec")
                except SyntaxError:
                    sig = ""
                fix = CORRECTIONS.get(f"{module}.{cls}.{hm.group(1)}")
                rows.append((module, f"{cls}.{hm.group(1)}", sig.replace(*fix) if fix else sig))
    return sorted(set(rows))


def _signature(sigs: Dict[str, str], module: str, name: str) -> str:
    """The documented signature; short aliases (``SGD``, ``Constant``, ``L2Decay``) have the
    one of the class they name (``SGDOptimizer``, ``ConstantInitializer``, ...)."""
    for suffix in ("", "Optimizer", "Initializer", "Regularizer"):
        if f"{module}.{name}{suffix}" in sigs:
            return sigs[f"{module}.{name}{suffix}"]
    return ""


def main(argv: List[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--git-dir", required=True, help="git dir of a PaddlePaddle/docs clone")
    args = ap.parse_args(argv)
    sigs = _signatures(args.git_dir)
    rows = [(m, n, k, _signature(sigs, m, n), "docs") for m, n, k in _documented(args.git_dir)]
    classes = {(m, n) for m, n, k, _, _ in rows if k == "class"}
    rows += [(m, n, "method", sig, "docs") for m, n, sig in _methods(args.git_dir, classes)]
    for module, names in SUPPLEMENT.items():
        for name in names:
            name, _, known = name.partition("(")
            doc_module = SIGNATURE_FROM.get(module)
            sig = sigs.get(f"{doc_module}.{name}", "") if doc_module else ""
            sig = "(" + known if known else sig
            kind = "class" if name[:1].isupper() else "function"
            if module == "fluid.contrib" and name == "mixed_precision":
                kind = "module"
            rows.append((module, name, kind, sig, "package"))
    print("# fluid 1.8's public names: module<TAB>name<TAB>kind<TAB>signature<TAB>source")
    print("# source 'docs': PaddlePaddle/docs release/1.8 API reference (signature from its")
    print("# Chinese pages); 'package': fluid 1.8 package __init__ files (no page, no signature).")
    print("# Regenerate with docs/fluid18_api_extract.py; '-' means no recorded signature.")
    for module, name, kind, sig, source in sorted(rows):
        print("\t".join((module, name, kind, sig or "-", source)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
