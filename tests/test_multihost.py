"""Data parallel across machines, on one machine: two Linux network namespaces joined by a veth
pair stand for two hosts (addresses from TEST-NET-1, 192.0.2.0/24, which routes nowhere), each
with a host name of its own, and Open MPI reaches the second one through tests/netns_rsh.sh
instead of ssh. The launcher (``python -m fluidlite.distributed.launch --hostfile``) runs on
the first, as it would on a real head node.

* trained parameters: 2 ranks on 2 hosts == 2 ranks on 1 host, bit for bit, and 4 ranks, 2 per
  host == 4 ranks on one host with the shared-memory all-reduce off;
* the shared-memory all-reduce is on within one host and off across hosts
  (``Communicator.shm_allreduce`` / ``shm_reason`` and its log line);
* killing a rank (or the Open MPI daemon) on one host ends the job on both, naming the rank and
  the host, and leaves no process in either namespace;
* SIGTERM (or SIGINT) to the launcher ends mpirun and every rank (one host; and across hosts),
  even ranks that ignore SIGTERM (killed after ``--term_timeout`` or at a second signal), and a
  launcher killed outright takes its job with it.

Needs root, ``ip`` (iproute2), ``unshare`` (util-linux), ``mpirun`` (Open MPI) and mpi4py; the
namespace tests skip with the reason otherwise. This file is also the worker the jobs run:
``python tests/test_multihost.py MODE OUT``.
"""
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np
import pytest

HERE = os.path.abspath(__file__)
ROOT = os.path.dirname(os.path.dirname(HERE))
RSH = os.path.join(os.path.dirname(HERE), "netns_rsh.sh")
STEPS = 4
BATCH = 16
NET = "192.0.2.0/24"                         # TEST-NET-1 (RFC 5737): never a real network
ADDRS = ("192.0.2.1", "192.0.2.2")


# -- what the machine offers ----------------------------------------------------------------------
def _mpi_missing():
    if shutil.which("mpirun") is None:
        return "mpirun not found (apt-get install openmpi-bin libopenmpi-dev)"
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return "mpi4py not installed (pip install 'fluidlite[dist]')"
    return None


def _netns_missing():
    if sys.platform != "linux":
        return "network namespaces are Linux only"
    if os.geteuid() != 0:
        return "creating network namespaces needs root"
    for tool, pkg in (("ip", "iproute2"), ("unshare", "util-linux")):
        if shutil.which(tool) is None:
            return f"`{tool}` not found (apt-get install {pkg})"
    return _mpi_missing()


mpi = pytest.mark.skipif(_mpi_missing() is not None, reason=_mpi_missing() or "")


def _sh(*cmd, check=True):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=check)


def _state(pid):
    """The process's state letter (``ps``), or None when it is gone; a zombie ("Z") has ended
    and only waits for its parent to collect it."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def _running(pid):
    return _state(pid) not in (None, "Z")


def _comm(pid):
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return None


def _ns_pids(ns):
    """The live processes in network namespace ``ns``."""
    r = _sh("ip", "netns", "pids", ns, check=False)
    return [int(p) for p in r.stdout.split() if _running(int(p))]


class Hosts:
    """Two "machines": network namespaces ``ns[i]`` with address ``ADDRS[i]`` and host name
    ``names[i]``; ``launch_cmd(...)`` runs the launcher on the first one."""

    def __init__(self, tag):
        self.ns = [f"{tag}a", f"{tag}b"]
        self.names = [f"{tag}-host1", f"{tag}-host2"]
        self.veth = [f"{tag}a0", f"{tag}b0"]       # interface names: 15 characters at most

    def up(self):
        a, b = self.ns
        for ns in self.ns:
            # (a namespace of this name is a crashed earlier run's: the name holds our pid)
            _sh("ip", "netns", "del", ns, check=False)
            _sh("ip", "netns", "add", ns)
            # a new namespace has nothing, not even loopback (Open MPI's daemons use it)
            _sh("ip", "-n", ns, "link", "set", "lo", "up")
        _sh("ip", "link", "add", self.veth[0], "netns", a, "type", "veth", "peer", "name",
            self.veth[1], "netns", b)
        for ns, dev, addr in zip(self.ns, self.veth, ADDRS):
            _sh("ip", "-n", ns, "addr", "add", f"{addr}/24", "dev", dev)
            _sh("ip", "-n", ns, "link", "set", dev, "up")
        # what every job does: enter a namespace, with a host name of its own
        _sh("ip", "netns", "exec", a, "unshare", "--uts", "hostname", self.names[0])

    def down(self):
        for ns in self.ns:
            for pid in _ns_pids(ns):          # only this module's jobs run there
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            _sh("ip", "netns", "del", ns, check=False)    # takes the veth pair with it
        # Open MPI's session directories, named after the host names (ours alone): a daemon or
        # rank killed by a test leaves its own behind, and here both "machines" share /tmp
        for tmp in {"/tmp", tempfile.gettempdir()}:
            for name in self.names:
                for d in glob.glob(os.path.join(tmp, f"ompi.{name}.*")):
                    shutil.rmtree(d, ignore_errors=True)

    def hostfile(self, path, slots):
        path.write_text("".join(f"{a} slots={slots}\n" for a in ADDRS))
        return str(path)

    def env(self):
        return dict(os.environ, PYTHONPATH=ROOT,
                    # the rsh agent: host -> namespace and host name (tests/netns_rsh.sh)
                    FLUIDLITE_TEST_NETNS=" ".join(
                        f"{a}={ns}={name}" for a, ns, name in zip(ADDRS, self.ns, self.names)),
                    OMPI_MCA_plm_rsh_agent=f"sh {RSH}")

    def launch_cmd(self, *args):
        """The launcher, started on host 1 (its namespace and its own host name)."""
        return ["ip", "netns", "exec", self.ns[0], "unshare", "--uts", "sh", "-c",
                'hostname "$0" && exec "$@"', self.names[0],
                sys.executable, "-m", "fluidlite.distributed.launch", "--network", NET, *args]


@pytest.fixture(scope="module")
def hosts():
    missing = _netns_missing()
    if missing:
        pytest.skip(missing)
    h = Hosts(f"fl{os.getpid()}")
    try:
        h.up()
    except subprocess.CalledProcessError as e:
        h.down()
        pytest.skip(f"cannot create network namespaces here: {' '.join(e.cmd)}: "
                    f"{e.stderr.strip()}")
    yield h
    h.down()
    assert not [ns for ns in h.ns if ns in _sh("ip", "netns", "list").stdout]


# -- the jobs ---------------------------------------------------------------------------------
def _run(cmd, env=None, timeout=90):
    t0 = time.monotonic()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                       env=env or dict(os.environ, PYTHONPATH=ROOT))
    return r, time.monotonic() - t0


def _local_cmd(nproc, mode, out, *extra):
    return [sys.executable, "-m", "fluidlite.distributed.launch", *extra, "--nproc_per_node",
            str(nproc), HERE, mode, str(out)]


def _results(out, n):
    return ([dict(np.load(out / f"params-rank{r}.npz")) for r in range(n)],
            [json.loads((out / f"info-rank{r}.json").read_text()) for r in range(n)])


@pytest.fixture(scope="module")
def two_rank_runs(hosts, tmp_path_factory):
    """The same 2-rank training on one host and on two (one rank each)."""
    one, two = tmp_path_factory.mktemp("one_host"), tmp_path_factory.mktemp("two_hosts")
    r1, t1 = _run(_local_cmd(2, "train", one))
    assert r1.returncode == 0, r1.stdout + r1.stderr
    r2, t2 = _run(hosts.launch_cmd("--hostfile", hosts.hostfile(two / "hosts", 1),
                                   "--nproc_per_node", "1", HERE, "train", str(two)),
                  env=hosts.env())
    assert r2.returncode == 0, r2.stdout + r2.stderr
    sys.stderr.write(f"2 ranks: one host {t1:.1f} s, two hosts {t2:.1f} s\n")
    return (one, r1), (two, r2), hosts


def test_two_hosts_train_exactly_like_one_host(two_rank_runs):
    (one, _), (two, _), _ = two_rank_runs
    ref, _ = _results(one, 2)
    got, info = _results(two, 2)
    assert sorted(ref[0]) == sorted(got[0]) and len(ref[0]) == 4
    for rank in range(2):
        for p in ref[0]:
            # 2 ranks: each element is one addition v0 + v1, whichever path reduces it
            np.testing.assert_array_equal(got[rank][p], ref[0][p], err_msg=f"rank {rank} {p}")
            np.testing.assert_array_equal(ref[rank][p], ref[0][p])
    # the parameters moved, from rank 0's (broadcast) initial values
    assert all(i["moved"] for i in info)


def test_shared_memory_allreduce_is_on_within_a_host_and_off_across(two_rank_runs):
    (one, r1), (two, r2), hosts = two_rank_runs
    _, local = _results(one, 2)
    _, remote = _results(two, 2)
    assert [i["shm_allreduce"] for i in local] == [True, True]
    assert local[0]["shm_reason"].startswith("on: the 2 ranks run on one host, ")
    assert [i["host"] for i in remote] == hosts.names
    assert len({i["node"] for i in remote}) == 2            # each namespace: a node of its own
    want = (f"off: the 2 ranks run on 2 hosts: {hosts.names[0]} (rank 0), {hosts.names[1]} "
            f"(rank 1)")
    assert [i["shm_allreduce"] for i in remote] == [False, False]
    assert [i["shm_reason"] for i in remote] == [want, want]
    # the decision is logged (INFO, logger "fluidlite") on every rank
    assert "ring 0, rank 1: shared-memory all-reduce " + want in r2.stderr
    assert "ring 0, rank 0: shared-memory all-reduce on: the 2 ranks" in r1.stderr


def test_four_ranks_on_two_hosts_match_four_on_one(hosts, tmp_path):
    # more than 2 ranks: Open MPI's ring adds in another order than the shared-memory
    # window's rank-order fold, so the one-host run turns the window off for equal bits
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    r1, t1 = _run(_local_cmd(4, "train", one), env=dict(
        os.environ, PYTHONPATH=ROOT, FLUIDLITE_SHM_ALLREDUCE="0"), timeout=120)
    assert r1.returncode == 0, r1.stdout + r1.stderr
    r2, t2 = _run(hosts.launch_cmd("--hostfile", hosts.hostfile(two / "hosts", 2),
                                   "--nproc_per_node", "2", HERE, "train", str(two)),
                  env=hosts.env(), timeout=120)
    assert r2.returncode == 0, r2.stdout + r2.stderr
    sys.stderr.write(f"4 ranks: one host {t1:.1f} s, two hosts {t2:.1f} s\n")
    ref, local = _results(one, 4)
    got, remote = _results(two, 4)
    for rank in range(4):
        for p in ref[0]:
            np.testing.assert_array_equal(got[rank][p], ref[0][p], err_msg=f"rank {rank} {p}")
    assert [i["host"] for i in remote] == [hosts.names[0]] * 2 + [hosts.names[1]] * 2
    assert remote[0]["shm_reason"] == (f"off: the 4 ranks run on 2 hosts: {hosts.names[0]} "
                                       f"(ranks 0-1), {hosts.names[1]} (ranks 2-3)")
    assert local[0]["shm_reason"] == "off: FLUIDLITE_SHM_ALLREDUCE=0"


def _wait_for(paths, proc, timeout=60):
    deadline = time.monotonic() + timeout
    while not all(p.exists() for p in paths):
        if proc.poll() is not None or time.monotonic() > deadline:
            out, err = proc.communicate(timeout=30)
            pytest.fail(f"the job ended or stalled before its ranks started "
                        f"(exit {proc.returncode}):\n{out}{err}")
        time.sleep(0.05)
    return [json.loads(p.read_text()) for p in paths]


def _reap(proc, pids):
    """After a test: nothing of its job may outlive it (whatever the assertions said)."""
    if proc.poll() is None:
        proc.kill()
        proc.communicate(timeout=30)
    for pid in pids:
        if _running(pid):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("victim", ["rank", "daemon"])
def test_killing_a_rank_on_one_host_ends_the_job_on_both(hosts, tmp_path, victim):
    # victim "daemon": host 2's Open MPI daemon (orted) dies, as when the machine vanishes
    proc = subprocess.Popen(hosts.launch_cmd("--hostfile", hosts.hostfile(tmp_path / "hosts", 1),
                                             "--nproc_per_node", "1", HERE, "hang",
                                             str(tmp_path)),
                            env=hosts.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    ranks = []
    try:
        ranks = _wait_for([tmp_path / f"pid-rank{r}.json" for r in range(2)], proc)
        assert [r["host"] for r in ranks] == hosts.names
        pid = ranks[1]["pid"]                              # the rank on host 2
        if victim == "daemon":
            pid = [p for p in _ns_pids(hosts.ns[1]) if _comm(p) == "orted"][0]
        t0 = time.monotonic()
        os.kill(pid, signal.SIGKILL)
        out, err = proc.communicate(timeout=60)
        seconds = time.monotonic() - t0
    finally:
        _reap(proc, [r["pid"] for r in ranks])
    text = out + err
    assert proc.returncode != 0, text
    assert seconds < 20, seconds
    # mpirun names the rank (or the daemon) and its host, as the hostfile writes it
    if victim == "rank":
        assert re.search(rf"process rank 1 with PID {pid} on node {ADDRS[1]} exited on "
                         rf"signal 9", text), text
    else:
        assert "lost communication with a remote daemon" in text, text
        assert re.search(rf"Remote daemon: \S+ on node {ADDRS[1]}", text), text
    sys.stderr.write(f"{victim} killed on host 2: the job ended {seconds:.1f} s later\n")
    assert not (tmp_path / "rank0-finished").exists()
    deadline = time.monotonic() + 10
    while any(_ns_pids(ns) for ns in hosts.ns) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert [_ns_pids(ns) for ns in hosts.ns] == [[], []]
    assert not _running(ranks[0]["pid"])


def _sigterm_job(cmd, env, out, n, sig=signal.SIGTERM, then=None):
    """Start ``cmd`` (a launch of mode hang/ignore_term), send ``sig`` to the launcher once its
    ``n`` ranks run (and signal ``then`` half a second later); return (exit code, output,
    seconds from the signal to the launcher's exit, the ranks' pid files)."""
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    ranks = []
    try:
        ranks = _wait_for([out / f"pid-rank{r}.json" for r in range(n)], proc)
        t0 = time.monotonic()
        proc.send_signal(sig)
        if then is not None:
            time.sleep(0.5)
            proc.send_signal(then)
        stdout, stderr = proc.communicate(timeout=60)
        seconds = time.monotonic() - t0
        # the launcher's exit is the end: no rank may run a moment later
        left = [r["pid"] for r in ranks if _running(r["pid"])]
    finally:
        _reap(proc, [r["pid"] for r in ranks])
    assert not left, f"ranks {left} outlived the launcher:\n{stdout}{stderr}"
    return proc.returncode, stdout + stderr, seconds, ranks


@mpi
@pytest.mark.parametrize("mode", ["hang", "ignore_term"])
def test_sigterm_to_the_launcher_ends_mpirun_and_every_rank(tmp_path, mode):
    # (hang: the launcher's defaults, as a user runs it)
    cmd = _local_cmd(2, mode, tmp_path, *(["--term_timeout", "2"] if mode == "ignore_term" else []))
    rc, text, seconds, ranks = _sigterm_job(cmd, dict(os.environ, PYTHONPATH=ROOT), tmp_path, 2)
    assert rc == 128 + signal.SIGTERM, text
    assert "fluidlite.distributed.launch: SIGTERM received: stopping the job" in text
    assert seconds < 15, seconds


# an mpirun that ignores SIGTERM and SIGINT, with two "ranks" in process groups of their own (as
# Open MPI starts them) that ignore SIGTERM too: only the launcher's SIGKILL ends this job
_STUBBORN_RANK = """
import json, os, signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
path = os.path.join(sys.argv[1], 'pid-rank' + sys.argv[2] + '.json')
with open(path + '.tmp', 'w') as f:     # renamed when whole: the test polls for the name
    json.dump({'pid': os.getpid(), 'host': 'here'}, f)
os.replace(path + '.tmp', path)
time.sleep(60)
"""
_STUBBORN_MPIRUN = f"""
import os, signal, subprocess, sys
signal.signal(signal.SIGTERM, signal.SIG_IGN)
signal.signal(signal.SIGINT, signal.SIG_IGN)
out = sys.argv[-1]
ranks = [subprocess.Popen([sys.executable, '-c', {_STUBBORN_RANK!r}, out, str(r)],
                          start_new_session=True) for r in range(2)]
for r in ranks:
    r.wait()
"""


@mpi
@pytest.mark.parametrize("second", [False, True])
def test_a_job_that_ignores_sigterm_is_killed(tmp_path, second):
    # after --term_timeout seconds, or at once on a second signal (Ctrl-C twice)
    fake = tmp_path / "mpirun"
    fake.write_text(f"#!{sys.executable}\n" + _STUBBORN_MPIRUN)
    fake.chmod(0o755)
    cmd = _local_cmd(2, "hang", tmp_path, "--mpirun", str(fake), "--term_timeout",
                     "30" if second else "1.5")
    rc, text, seconds, ranks = _sigterm_job(cmd, dict(os.environ, PYTHONPATH=ROOT), tmp_path, 2,
                                            then=signal.SIGINT if second else None)
    assert rc == 128 + signal.SIGTERM, text
    why = "a second signal \\(SIGINT\\)" if second else \
        "the job did not end within 1.5 s of SIGTERM"
    assert re.search(why + r": killing mpirun \(pid \d+\) and its 2 local process\(es\)",
                     text), text
    assert (seconds < 5) if second else (1.5 <= seconds < 10), seconds


@mpi
def test_a_killed_launcher_takes_its_job_with_it(tmp_path):
    # SIGKILL: nothing to forward; mpirun gets SIGTERM from the kernel (PR_SET_PDEATHSIG)
    if not sys.platform.startswith("linux"):
        pytest.skip("PR_SET_PDEATHSIG is Linux only")
    proc = subprocess.Popen(_local_cmd(2, "hang", tmp_path),
                            env=dict(os.environ, PYTHONPATH=ROOT), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    ranks = []
    try:
        ranks = _wait_for([tmp_path / f"pid-rank{r}.json" for r in range(2)], proc)
        proc.kill()
        proc.communicate(timeout=30)
        deadline = time.monotonic() + 15
        while any(_running(r["pid"]) for r in ranks) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = [r["pid"] for r in ranks if _running(r["pid"])]
    finally:
        _reap(proc, [r["pid"] for r in ranks])
    assert not left, f"ranks {left} outlived a killed launcher by 15 s"


@mpi
def test_sigint_to_the_launcher_ends_the_job(tmp_path):
    cmd = _local_cmd(2, "hang", tmp_path)
    rc, text, seconds, _ = _sigterm_job(cmd, dict(os.environ, PYTHONPATH=ROOT), tmp_path, 2,
                                        sig=signal.SIGINT)
    assert rc == 128 + signal.SIGINT and seconds < 15, text


def test_sigterm_to_the_launcher_ends_the_job_on_every_host(hosts, tmp_path):
    cmd = hosts.launch_cmd("--hostfile", hosts.hostfile(tmp_path / "hosts", 1),
                           "--nproc_per_node", "1", "--term_timeout", "5", HERE, "hang",
                           str(tmp_path))
    # (SIGTERM to ip netns exec / unshare / sh: each exec'd, so it is the launcher's pid)
    rc, text, seconds, ranks = _sigterm_job(cmd, hosts.env(), tmp_path, 2)
    assert rc == 128 + signal.SIGTERM and seconds < 15, text
    deadline = time.monotonic() + 10
    while any(_ns_pids(ns) for ns in hosts.ns) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert [_ns_pids(ns) for ns in hosts.ns] == [[], []]


# -- the launcher's command line (no job starts) ------------------------------------------------
@mpi
def test_launcher_network_and_forwarded_environment(tmp_path):
    from fluidlite.distributed import launch
    script = tmp_path / "t.py"
    script.write_text("")
    hostfile = tmp_path / "hosts"
    hostfile.write_text("n1 slots=1\nn2 slots=1\n")
    env = {"PYTHONPATH": "/x", "FLUIDLITE_SHM_ALLREDUCE": "0", "FLUIDLITE_COLLECTIVE_TIMEOUT":
           "9", "HOME": "/root", "OMP_NUM_THREADS": "1"}
    cmd = launch.mpirun_command(1, str(script), [], hostfile=str(hostfile),
                                network="eth1, 10.1.0.0/16", env=env)
    i = cmd.index("btl_tcp_if_include")
    assert cmd[i + 1] == "eth1,10.1.0.0/16"
    assert cmd[cmd.index("oob_tcp_if_include") + 1] == "eth1,10.1.0.0/16"
    forwarded = [cmd[k + 1] for k, a in enumerate(cmd) if a == "-x"]
    # every FLUIDLITE_* setting reaches the ranks on the other machines (FLUIDLITE_SHM_ALLREDUCE
    # must be the same on every rank)
    assert forwarded == ["PYTHONPATH", "OMP_NUM_THREADS", "FLUIDLITE_COLLECTIVE_TIMEOUT",
                         "FLUIDLITE_SHM_ALLREDUCE"]
    r = subprocess.run([sys.executable, "-m", "fluidlite.distributed.launch", "--network", ",",
                        str(script)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--network needs at least one interface" in r.stderr


def test_node_identity_and_host_description():
    from fluidlite.distributed import comm
    me = comm.node_identity()
    assert me == comm.node_identity() and me
    if sys.platform == "linux":
        boot, mnt, net = me.split()
        assert mnt.startswith("mnt:[") and net.startswith("net:[")
    assert comm.describe_hosts(["a", "a"], ["x", "x"]) == "one host, a"
    assert comm.describe_hosts(["a", "a", "b", "a"], ["x", "x", "y", "x"]) == \
        "2 hosts: a (ranks 0-1, 3), b (rank 2)"
    # two nodes under one host name (clones, containers): told apart
    assert comm.describe_hosts(["vm", "vm"], ["x", "y"]) == "2 hosts: vm (rank 0), vm#2 (rank 1)"


# -- the worker (runs under mpirun) ---------------------------------------------------------------
def _build(seed):
    """An MLP 64-512-3 (a 128 KB weight gradient: past the shared-memory all-reduce's 64 KB
    threshold), Adam and a global-norm clip, through fleet."""
    import fluidlite as fluid
    from fluidlite.incubate.fleet.base import role_maker
    from fluidlite.incubate.fleet.collective import fleet
    fleet.init(role_maker.PaddleCloudRoleMaker(is_collective=True))
    opt = fleet.distributed_optimizer(fluid.optimizer.Adam(
        0.01, grad_clip=fluid.clip.GradientClipByGlobalNorm(1.0)))
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = seed
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [-1, 64])
        y = fluid.data("y", [-1, 1], dtype="int64")
        h = fluid.layers.fc(x, 512, act="tanh")
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(
            fluid.layers.fc(h, 3), y))
        _, pairs = opt.minimize(loss)
    return fleet, loss, [p.name for p, _ in pairs]


def worker(mode, out):
    import logging
    import fluidlite as fluid
    from fluidlite.distributed import comm
    logging.basicConfig(level=logging.INFO, format="%(message)s")   # the shm decision's line
    world = comm.world()
    r, n = world.rank, world.size
    if mode in ("hang", "ignore_term"):
        if mode == "ignore_term":
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        path = os.path.join(out, f"pid-rank{r}.json")
        with open(path + ".tmp", "w") as f:    # renamed when whole: the test polls for the name
            json.dump({"pid": os.getpid(), "host": comm.host_name()}, f)
        os.replace(path + ".tmp", path)
        # bounded, whatever happens to the test: after 60 s (10 collectives per second) the
        # job ends itself -- at the same step on every rank, so none waits in a collective
        x = np.ones(4, np.float32)
        for _ in range(600):
            if mode == "hang":
                world.allreduce(x)                 # a collective each step, as training does
            time.sleep(0.1)
        if r == 0 and os.path.isdir(out):
            open(os.path.join(out, "rank0-finished"), "w").close()
        world.barrier()
        from mpi4py import MPI
        MPI.COMM_WORLD.Abort(3)
    fleet, loss, params = _build(seed=11 + 7 * r)   # rank 0's parameters are broadcast
    rng = np.random.default_rng(5)
    X = rng.standard_normal((BATCH, 64)).astype("float32")
    Y = rng.integers(0, 3, (BATCH, 1)).astype("int64")
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(fleet.startup_program, scope=scope)
    start = {p: np.array(scope.find_var(p).get_tensor()) for p in params}
    for _ in range(STEPS):
        exe.run(fleet.main_program, feed={"x": X[r::n], "y": Y[r::n]}, fetch_list=[loss],
                scope=scope)
    end = {p: np.array(scope.find_var(p).get_tensor()) for p in params}
    np.savez(os.path.join(out, f"params-rank{r}.npz"), **end)
    with open(os.path.join(out, f"info-rank{r}.json"), "w") as f:
        json.dump({"rank": r, "host": comm.host_name(), "node": comm.node_identity(),
                   "shm_allreduce": world.shm_allreduce, "shm_reason": world.shm_reason,
                   "moved": all(not np.array_equal(start[p], end[p]) for p in params)}, f)


if __name__ == "__main__":
    worker(sys.argv[1], sys.argv[2])
