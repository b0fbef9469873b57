"""``python -m fluidlite.distributed.launch --nproc_per_node N [--hostfile F] train.py args...``

Runs ``train.py`` in N processes per machine under Open MPI's ``mpirun``. One machine (no
hostfile): ``mpirun -n N`` over shared memory (``--mca btl self,vader``). Several machines:
a hostfile lists them (``node1 slots=2``, one per line; passwordless ssh between them, the
same Python environment and script path on each) and N processes start on each
(``--npernode N``), talking over TCP. As root, the flags and environment Open MPI needs are
added (``--allow-run-as-root``), and ``--oversubscribe`` allows more processes than cores
(it also makes a waiting rank yield its core: on a machine shared with other work that beats
busy-polling, measured with ``bench/data_parallel.py``). All-reduces use Open MPI's ring
algorithm. Each process runs one BLAS thread unless ``OMP_NUM_THREADS`` /
``OPENBLAS_NUM_THREADS`` is set, and one MPI progress thread advancing the overlapped
all-reduces when the machine has a core to spare for it (``FLUIDLITE_PROGRESS_THREAD``: ``auto``,
``1`` or ``0``; ``fluidlite.distributed.comm``).

Every process runs the script through ``fluidlite.distributed._run``, which aborts the whole
job when the script raises on any rank (naming that rank), so no rank waits for a dead one.
The launcher's exit code is ``mpirun``'s. Errors in the arguments (missing script, N < 1, no
``mpirun`` or mpi4py) are one line on stderr and exit code 2.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import subprocess
import sys
from typing import List, Optional, Sequence

__all__ = ["main", "mpirun_command"]

_ROOT_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


class _Usage(Exception):
    pass


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m fluidlite.distributed.launch",
                                description="Run a fluidlite training script data-parallel "
                                            "under mpirun.")
    p.add_argument("--nproc_per_node", type=int, default=1,
                   help="processes per machine (default 1)")
    p.add_argument("--hostfile", default=None,
                   help="Open MPI hostfile listing the machines (default: this machine only)")
    p.add_argument("--mpirun", default=None, help="mpirun executable (default: from PATH)")
    p.add_argument("script", help="the training script")
    p.add_argument("args", nargs=argparse.REMAINDER, help="the script's arguments")
    return p


def mpirun_command(nproc: int, script: str, args: Sequence[str], hostfile: Optional[str] = None,
                   mpirun: Optional[str] = None) -> List[str]:
    """The ``mpirun`` command line the launcher runs (raises ``_Usage`` on bad arguments)."""
    if nproc < 1:
        raise _Usage(f"--nproc_per_node must be >= 1, got {nproc}")
    if not os.path.isfile(script):
        raise _Usage(f"training script not found: {script}")
    if hostfile is not None and not os.path.isfile(hostfile):
        raise _Usage(f"hostfile not found: {hostfile}")
    if importlib.util.find_spec("mpi4py") is None:
        raise _Usage("mpi4py is not installed: pip install 'fluidlite[dist]' (and Open MPI: "
                     "apt-get install openmpi-bin libopenmpi-dev)")
    exe = mpirun or shutil.which("mpirun")
    if not exe:
        raise _Usage("mpirun not found: install Open MPI (apt-get install openmpi-bin "
                     "libopenmpi-dev) and mpi4py (pip install 'fluidlite[dist]')")
    cmd = [exe]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    cmd += ["--oversubscribe", "--bind-to", "none"]
    # ring all-reduce (2(N-1)/N of the bytes per rank, the README's scaling model): twice as
    # fast as Open MPI's default choice for 23 MB on 2 ranks here (bench/data_parallel.py)
    cmd += ["--mca", "coll_tuned_use_dynamic_rules", "1",
            "--mca", "coll_tuned_allreduce_algorithm", "4"]
    if hostfile is None:
        cmd += ["-n", str(nproc), "--mca", "btl", "self,vader"]
    else:
        cmd += ["--hostfile", hostfile, "--npernode", str(nproc)]
    for var in ("PYTHONPATH", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                "FLUIDLITE_COLLECTIVE_TIMEOUT", "FLUIDLITE_PROGRESS_THREAD",
                "FLUIDLITE_PROGRESS_INTERVAL"):
        cmd += ["-x", var]
    cmd += [sys.executable, "-u", "-m", "fluidlite.distributed._run", script, *args]
    return cmd


def main(argv: Optional[Sequence[str]] = None) -> int:
    ns = _parser().parse_args(argv)
    try:
        cmd = mpirun_command(ns.nproc_per_node, ns.script, ns.args, ns.hostfile, ns.mpirun)
    except _Usage as e:
        sys.stderr.write(f"fluidlite.distributed.launch: error: {e}\n")
        return 2
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    env.setdefault("FLUIDLITE_COLLECTIVE_TIMEOUT", "300")
    env.setdefault("FLUIDLITE_PROGRESS_THREAD", "auto")
    env.setdefault("FLUIDLITE_PROGRESS_INTERVAL", "0.0005")
    env.setdefault("PYTHONPATH", "")
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        env.update(_ROOT_ENV)
    return subprocess.call(cmd, env=env)


if __name__ == "__main__":
    sys.exit(main())
