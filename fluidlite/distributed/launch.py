"""``python -m fluidlite.distributed.launch --nproc_per_node N [--hostfile F] train.py args...``

Runs ``train.py`` in N processes per machine under Open MPI's ``mpirun``. One machine (no
hostfile): ``mpirun -n N`` over shared memory (``--mca btl self,vader``). Several machines:
a hostfile lists them (``node1 slots=2``, one per line; passwordless ssh between them, the
same Python environment and script path on each, a host name of its own for each machine)
and N processes start on each (``--npernode N``), talking over TCP; ``--network`` names the
interfaces or subnets that traffic uses (Open MPI's ``btl_tcp_if_include`` and
``oob_tcp_if_include``; by default every interface but loopback). As root, the flags and
environment Open MPI needs are added (``--allow-run-as-root``), and ``--oversubscribe``
allows more processes than cores (it also makes a waiting rank yield its core: on a machine
shared with other work that beats busy-polling, measured with ``bench/data_parallel.py``).
All-reduces use Open MPI's ring algorithm. Each process runs one BLAS thread unless
``OMP_NUM_THREADS`` / ``OPENBLAS_NUM_THREADS`` is set, and one MPI progress thread advancing the
overlapped all-reduces when the machine has a core to spare for it
(``FLUIDLITE_PROGRESS_THREAD``: ``auto``, ``1`` or ``0``; ``fluidlite.distributed.comm``).
The launcher's ``PYTHONPATH`` and its ``FLUIDLITE_*``, NumPy and BLAS settings (``NPY_*``,
``OMP_*``, ``OPENBLAS_*``, ``MKL_*``, ...; ``forwarded_env``) reach every rank on every machine
(``mpirun -x``); any other Open MPI setting can be given as ``OMPI_MCA_<name>`` in the
environment.

Every process runs the script through ``fluidlite.distributed._run``, which aborts the whole
job when the script raises on any rank (naming that rank and its host), so no rank waits for a
dead one. The launcher's exit code is ``mpirun``'s (128 + N when signal N ended it). Errors in
the arguments (missing script, N < 1, no ``mpirun`` or mpi4py) are one line on stderr and exit
code 2.

Signals: ``mpirun`` runs in a session of its own, and SIGTERM, SIGINT (Ctrl-C) and SIGHUP to
the launcher are forwarded to it once (``mpirun`` then stops the ranks on every machine). If
the job has not ended ``--term_timeout`` seconds later (default 10), or a second signal comes,
the launcher SIGKILLs ``mpirun``'s process group and every local process of the job; it also
SIGKILLs the job's local processes that outlive ``mpirun`` (Open MPI gives each rank a process
group of its own, and a rank that ignores SIGTERM can outlive ``mpirun``). The launcher then
exits with 128 + the signal's number (143 for SIGTERM, 130 for SIGINT), never 0. A launcher
killed outright (SIGKILL) cannot forward anything: on Linux ``mpirun`` then gets SIGTERM from
the kernel (``PR_SET_PDEATHSIG``) and stops the job all the same.
"""
from __future__ import annotations

import argparse
import ctypes
import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import time
from typing import Callable, Dict, List, Optional, Sequence, Set, Tuple

__all__ = ["main", "mpirun_command", "run_job", "forwarded_env"]

_ROOT_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
# the settings every rank needs, on this machine and the others (an ssh-started daemon on
# another machine has only its login environment): the import path, fluidlite's settings, and
# those of NumPy and the BLAS, which change results -- OPENBLAS_CORETYPE picks OpenBLAS's GEMM
# kernel, and a rank on a machine without it computes other bits (tests/test_multihost.py)
_FORWARDED = ("PYTHONPATH", "PYTHONHASHSEED", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS")
_FORWARDED_PREFIXES = ("FLUIDLITE_", "OMP_", "OPENBLAS_", "GOTO_", "MKL_", "BLIS_", "NPY_")
_SIGNALS = tuple(getattr(signal, s) for s in ("SIGTERM", "SIGINT", "SIGHUP")
                 if hasattr(signal, s))
_PREFIX = "fluidlite.distributed.launch"


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
    p.add_argument("--network", default=None,
                   help="comma-separated interfaces and/or CIDR subnets the job's TCP traffic "
                        "uses, e.g. eth1 or 10.1.0.0/16 (default: every interface but "
                        "loopback)")
    p.add_argument("--term_timeout", type=float, default=10.0,
                   help="seconds the job gets to end after a forwarded SIGTERM/SIGINT/SIGHUP "
                        "before it is killed (default 10)")
    p.add_argument("--mpirun", default=None, help="mpirun executable (default: from PATH)")
    p.add_argument("script", help="the training script")
    p.add_argument("args", nargs=argparse.REMAINDER, help="the script's arguments")
    return p


def forwarded_env(env: Dict[str, str]) -> List[str]:
    """The names of the variables of ``env`` that ``mpirun -x`` passes to every rank on every
    machine: those of ``PYTHONPATH``, ``PYTHONHASHSEED``, ``OMP_NUM_THREADS`` and
    ``OPENBLAS_NUM_THREADS`` that are set, then every ``FLUIDLITE_*``, ``OMP_*``,
    ``OPENBLAS_*``, ``GOTO_*``, ``MKL_*``, ``BLIS_*`` and ``NPY_*`` variable (sorted, so the
    command line is reproducible)."""
    first = [v for v in _FORWARDED if v in env]
    return first + sorted(v for v in env if v.startswith(_FORWARDED_PREFIXES)
                          and v not in first)


def mpirun_command(nproc: int, script: str, args: Sequence[str], hostfile: Optional[str] = None,
                   mpirun: Optional[str] = None, network: Optional[str] = None,
                   env: Optional[Dict[str, str]] = None) -> List[str]:
    """The ``mpirun`` command line the launcher runs (raises ``_Usage`` on bad arguments).
    ``env`` (default ``os.environ``) decides which variables are forwarded
    (``forwarded_env``)."""
    if nproc < 1:
        raise _Usage(f"--nproc_per_node must be >= 1, got {nproc}")
    if not os.path.isfile(script):
        raise _Usage(f"training script not found: {script}")
    if hostfile is not None and not os.path.isfile(hostfile):
        raise _Usage(f"hostfile not found: {hostfile}")
    if network is not None and not [n for n in network.split(",") if n.strip()]:
        raise _Usage("--network needs at least one interface or CIDR subnet, e.g. eth1 or "
                     "10.1.0.0/16")
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
    # ring all-reduce (2(N-1)/N of the bytes per rank, the scaling model of docs/guides/distributed.md): twice as
    # fast as Open MPI's default choice for 23 MB on 2 ranks here (bench/data_parallel.py)
    cmd += ["--mca", "coll_tuned_use_dynamic_rules", "1",
            "--mca", "coll_tuned_allreduce_algorithm", "4"]
    if hostfile is None:
        cmd += ["-n", str(nproc), "--mca", "btl", "self,vader"]
    else:
        cmd += ["--hostfile", hostfile, "--npernode", str(nproc)]
    if network is not None:
        nets = ",".join(n.strip() for n in network.split(",") if n.strip())
        # both layers: MPI's messages (btl) and the daemons' wire-up (oob); a machine with a
        # second network (docker0, a VPN) otherwise offers an address the others cannot reach
        cmd += ["--mca", "btl_tcp_if_include", nets, "--mca", "oob_tcp_if_include", nets]
    for var in forwarded_env(os.environ if env is None else env):
        cmd += ["-x", var]
    cmd += [sys.executable, "-u", "-m", "fluidlite.distributed._run", script, *args]
    return cmd


def _process_table() -> Dict[int, Tuple[int, str, str]]:
    """pid -> (parent pid, start time, state letter) of every process (Linux ``/proc``; empty
    elsewhere)."""
    table: Dict[int, Tuple[int, str, str]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return table
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:             # gone meanwhile
            continue
        # fields after the command name (which may hold spaces and parentheses): state,
        # ppid, ..., starttime (field 22 of proc(5))
        fields = stat[stat.rindex(")") + 2:].split()
        table[int(entry)] = (int(fields[1]), fields[19], fields[0])
    return table


def _descendants(pid: int) -> Set[Tuple[int, str]]:
    """(pid, start time) of every process below ``pid``. Open MPI puts each rank in a process
    group of its own, so killing ``mpirun``'s group does not reach them: they are found
    through their parents instead. The start time tells a process from a later one that
    reuses its pid."""
    table = _process_table()
    children: Dict[int, List[int]] = {}
    for p, (ppid, _, _) in table.items():
        children.setdefault(ppid, []).append(p)
    found: Set[Tuple[int, str]] = set()
    stack = [pid]
    while stack:
        for c in children.get(stack.pop(), []):
            found.add((c, table[c][1]))
            stack.append(c)
    return found


def _kill_alive(procs: Set[Tuple[int, str]]) -> int:
    """SIGKILL the processes of ``procs`` that still run (same pid and start time, not a
    zombie); how many."""
    table = _process_table()
    killed = 0
    for pid, start in procs:
        if pid in table and table[pid][1] == start and table[pid][2] != "Z":
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except OSError:
                pass
    return killed


def _die_with_launcher() -> Optional[Callable[[], None]]:
    """A ``preexec_fn`` giving ``mpirun`` SIGTERM when the launcher dies (Linux's
    ``PR_SET_PDEATHSIG``), or None elsewhere. A launcher killed outright (SIGKILL, an OOM kill,
    a crash) forwards nothing, and ``mpirun``, in its own session, would run on with its ranks;
    with this it stops them as on a forwarded SIGTERM."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    launcher = os.getpid()

    def arm() -> None:                  # in the child, between fork and exec
        prctl(1, int(signal.SIGTERM), 0, 0, 0)          # 1: PR_SET_PDEATHSIG
        if os.getppid() != launcher:    # the launcher died before the line above took effect
            os.kill(os.getpid(), signal.SIGTERM)
    return arm


def run_job(cmd: Sequence[str], env: Dict[str, str], term_timeout: float = 10.0) -> int:
    """Run ``cmd`` (an ``mpirun`` command line) and return its exit code (128 + N when a
    signal N ended ``mpirun``, as a shell reports it). On SIGTERM, SIGINT or SIGHUP: end the
    job and return 128 + that signal's number (module docstring: the signal is forwarded once;
    SIGKILL after ``term_timeout`` seconds or at a second signal; no local process of the job
    is left running when this returns). Signal handlers are installed only in the main thread
    (elsewhere Python refuses them) and restored on return."""
    received: List[int] = []

    def on_signal(signum: int, frame: object) -> None:
        received.append(signum)     # acted on by the loop below: never mid-Popen

    previous: Dict[int, object] = {}
    for s in _SIGNALS:
        try:
            previous[s] = signal.signal(s, on_signal)
        except ValueError:          # not the main thread
            break
    try:
        # a session of its own: a terminal's Ctrl-C reaches only the launcher, which forwards
        # it once (mpirun takes a second SIGINT as "exit now", leaving its ranks behind), and
        # the final SIGKILL of mpirun's group cannot hit the launcher
        proc = subprocess.Popen(list(cmd), env=env, start_new_session=True,
                                preexec_fn=_die_with_launcher())
        job: Set[Tuple[int, str]] = set()
        deadline: Optional[float] = None
        killed = False
        while True:
            try:
                rc = proc.wait(timeout=0.1 if received else 0.5)
                break
            except subprocess.TimeoutExpired:
                pass
            if received:
                # every round: ranks mpirun was still starting when the signal came count too
                job |= _descendants(proc.pid)
            if received and deadline is None:
                sig = received[0]
                sys.stderr.write(f"{_PREFIX}: {signal.Signals(sig).name} received: stopping "
                                 f"the job (mpirun pid {proc.pid}; killed if still running "
                                 f"after {term_timeout:g} s)\n")
                sys.stderr.flush()
                try:
                    os.kill(proc.pid, sig)
                except OSError:
                    pass
                deadline = time.monotonic() + term_timeout
            elif deadline is not None and not killed and (
                    time.monotonic() >= deadline or len(received) > 1):
                why = (f"a second signal ({signal.Signals(received[1]).name})"
                       if len(received) > 1 else f"the job did not end within "
                       f"{term_timeout:g} s of {signal.Signals(received[0]).name}")
                sys.stderr.write(f"{_PREFIX}: {why}: killing mpirun (pid {proc.pid}) and its "
                                 f"{len(job)} local process(es)\n")
                sys.stderr.flush()
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except OSError:
                    pass
                _kill_alive(job)
                killed = True
        if not received:
            return rc if rc >= 0 else 128 - rc
        # mpirun has ended, but a rank that ignored its SIGTERM may still run (orphaned)
        left = _kill_alive(job)
        if left:
            sys.stderr.write(f"{_PREFIX}: killed {left} process(es) of the job that outlived "
                             f"mpirun\n")
        sys.stderr.write(f"{_PREFIX}: job stopped by {signal.Signals(received[0]).name} "
                         f"(mpirun exit code {rc})\n")
        sys.stderr.flush()
        return 128 + received[0]
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """The command line (module docstring); returns the exit code."""
    ns = _parser().parse_args(argv)
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    env.setdefault("FLUIDLITE_COLLECTIVE_TIMEOUT", "300")
    env.setdefault("FLUIDLITE_PROGRESS_THREAD", "auto")
    env.setdefault("FLUIDLITE_PROGRESS_INTERVAL", "0.0005")
    env.setdefault("PYTHONPATH", "")
    try:
        if not ns.term_timeout >= 0:
            raise _Usage(f"--term_timeout must be >= 0 seconds, got {ns.term_timeout}")
        cmd = mpirun_command(ns.nproc_per_node, ns.script, ns.args, ns.hostfile, ns.mpirun,
                             ns.network, env)
    except _Usage as e:
        sys.stderr.write(f"{_PREFIX}: error: {e}\n")
        return 2
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        env.update(_ROOT_ENV)
    return run_job(cmd, env, ns.term_timeout)


if __name__ == "__main__":
    sys.exit(main())
