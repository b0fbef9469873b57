"""Crash a saving process at every file operation (or at random) and report what loads after.

Run by tests/test_checkpoint_atomic.py as ``python checkpoint_crash_worker.py MODE ROOT``; prints
one JSON document. One interpreter per mode: every crashing save runs in a ``fork()``ed child,
so fluidlite is imported and the programs are built once.

``inject``: for every save API, start from a complete checkpoint of state A, then for k = 1, 2,
... fork a child that saves state B and ``os._exit``s right after its k-th file operation
(file create, write -- torn: half the bytes are written first --, fsync, rename, unlink, mkdir,
rmdir), until a child finishes its save without reaching k. After each crash the directory is
loaded with the API's loader and classified as "old" (exactly A), "new" (exactly B) or what
else it is. Then a second child saves state C and crashes at a random operation (the result
must be the first outcome or C), and a last, complete save of state D must leave no staging
leftovers and load as D.

``kill``: a child saves a 300-variable checkpoint in a loop, state 1, 2, 3, ...; the parent
SIGKILLs it after a random delay, loads, and checks that every variable holds the same state.
"""
import json
import os
import random
import shutil
import signal
import sys
import time

import numpy as np

import fluidlite as fluid

CRASH = 77
_COUNTED = ("write", "fsync", "replace", "rename", "unlink", "rmdir", "mkdir")


def crash_after(k):
    """Make this process exit right after its k-th file operation."""
    count = [0]
    real_open, real_write = os.open, os.write

    def tick():
        count[0] += 1
        if count[0] == k:
            os._exit(CRASH)

    def wrap(fn):
        def op(*args, **kwargs):
            out = fn(*args, **kwargs)
            tick()
            return out
        return op

    def write(fd, data):
        if count[0] + 1 == k:                   # torn write: half the bytes, then die
            real_write(fd, bytes(data[:len(data) // 2]))
            os._exit(CRASH)
        out = real_write(fd, data)
        tick()
        return out

    def open_(path, flags, *args, **kwargs):
        fd = real_open(path, flags, *args, **kwargs)
        if flags & os.O_CREAT:
            tick()
        return fd

    for name in _COUNTED:
        setattr(os, name, wrap(getattr(os, name)))
    os.write = write
    os.open = open_


# -- the model and its states --------------------------------------------------------------------
def build():
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 3
    with fluid.program_guard(main, startup):
        x = fluid.data(name="x", shape=[-1, 3], dtype="float32")
        # a name with '/' (issue 29): its file lies in sub-directories, which a crash at any
        # mkdir/rename/rmdir must leave as the old or the new state too
        h = fluid.layers.fc(input=x, size=4, act="relu",
                            param_attr=fluid.ParamAttr(name="block1/fc/w"))
        pred = fluid.layers.fc(input=h, size=2)
        loss = fluid.layers.mean(pred)
        fluid.optimizer.Momentum(learning_rate=0.1, momentum=0.9).minimize(loss)
    return main, startup, h, pred


def persistables(program):
    return [v.name for v in program.list_vars() if fluid.io.is_persistable(v)]


def set_state(scope, names, base, shift):
    for n in names:
        scope.var(n).get_tensor().set(base[n] + shift)


def classify(got, states):
    """Which of ``states`` (label -> {name: array}) ``got`` is exactly, else a description."""
    for label, want in states.items():
        if got.keys() == want.keys() and all(np.array_equal(got[n], want[n]) for n in want):
            return label
    per_var = {n: [label for label, want in states.items()
                   if n in want and np.array_equal(got[n], want[n])] for n in got}
    return "MIXED " + json.dumps(per_var, sort_keys=True)


class Api:
    """One save API: how to save state ``shift`` and what the directory then loads as."""

    def __init__(self, name, save, load):
        self.name, self.save, self.load = name, save, load


def apis(main, h, pred, exe):
    params = [p.name for p in main.all_parameters()]
    some = params[:2] + ["learning_rate_0"]

    def values(scope, names):
        return {n: np.array(scope.find_var(n).get_tensor()) for n in names}

    def load_vars(d, names, **kw):
        s = fluid.Scope()
        with fluid.scope_guard(s):
            fluid.io.load_vars(exe, d, main, vars=names, **kw)
        return values(s, names)

    def load_inference(d, **kw):
        s = fluid.Scope()
        with fluid.scope_guard(s):
            program, feeds, fetches = fluid.io.load_inference_model(d, exe, **kw)
        out = values(s, persistables(program))
        out["@fetch"] = np.array([0 if fetches[0].name == pred.name else 1])
        return out

    def save_inference(d, shift, **kw):
        target = pred if shift == 0 else h       # the program changes too
        fluid.io.save_inference_model(d, ["x"], [target], exe, main, **kw)

    def load_fluid(d):
        s = fluid.Scope()
        with fluid.scope_guard(s):
            fluid.load(main, os.path.join(d, "model"), exe)
        state = fluid.io.load_program_state(os.path.join(d, "model"))
        out = values(s, persistables(main))
        assert state.keys() == out.keys() and all(np.array_equal(state[k], out[k]) for k in out)
        return out

    return [
        Api("save_vars", lambda d, s: fluid.io.save_vars(exe, d, main, vars=some),
            lambda d: load_vars(d, some)),
        Api("save_params", lambda d, s: fluid.io.save_params(exe, d, main),
            lambda d: load_vars(d, params)),
        Api("save_persistables", lambda d, s: fluid.io.save_persistables(exe, d, main),
            lambda d: load_vars(d, persistables(main))),
        Api("save_persistables(filename)",
            lambda d, s: fluid.io.save_persistables(exe, d, main, filename="all.npz"),
            lambda d: load_vars(d, persistables(main), filename="all.npz")),
        Api("save_inference_model", lambda d, s: save_inference(d, s),
            lambda d: load_inference(d)),
        Api("save_inference_model(params_filename)",
            lambda d, s: save_inference(d, s, params_filename="__params__"),
            lambda d: load_inference(d, params_filename="__params__")),
        Api("fluid.save", lambda d, s: fluid.save(main, os.path.join(d, "model")),
            lambda d: load_fluid(d)),
    ]


def expected(api, d, scope, names, base, shift):
    """What ``api`` loads after a complete save of state ``shift`` (computed, not assumed)."""
    ref = d + ".ref"
    shutil.rmtree(ref, ignore_errors=True)
    set_state(scope, names, base, shift)
    api.save(ref, shift)
    out = api.load(ref)
    shutil.rmtree(ref)
    return out


def run_child(fn):
    pid = os.fork()
    if pid == 0:
        try:
            fn()
        except BaseException:       # noqa: B036 - report any failure as a distinct code
            os._exit(3)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def load_label(api, d, states):
    try:
        return classify(api.load(d), states)
    except Exception as e:          # a load error is a finding, reported as such
        return f"ERROR {type(e).__name__}: {e}"


def pending(d):
    """Files a committed but unfinished publish still holds in its staging directory."""
    try:
        with open(os.path.join(d, ".fluidlite-manifest.json")) as f:
            staging = json.load(f)["staging"]
        return len(os.listdir(os.path.join(d, staging)))
    except (OSError, TypeError):
        return 0


def leftovers(d):
    return sorted(n for n in os.listdir(d) if n.startswith(".") and
                  n != ".fluidlite-manifest.json")


def inject(root):
    # a crashed *process* leaves the page cache intact, so fsync changes nothing these tests
    # can observe; it still counts as an operation to crash after, it just costs no I/O
    os.fsync = lambda fd: None
    main, startup, h, pred = build()
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.global_scope()
    exe.run(startup)
    names = persistables(main)
    base = {n: np.array(scope.find_var(n).get_tensor()) for n in names}
    rng = random.Random(0)
    report = {}
    for api in apis(main, h, pred, exe):
        d = os.path.join(root, api.name.replace("(", "_").replace(")", ""))
        pristine = d + ".old"
        states = {label: expected(api, d, scope, names, base, shift)
                  for label, shift in (("old", 0), ("new", 1), ("C", 2), ("D", 3))}
        set_state(scope, names, base, 0)
        api.save(pristine, 0)
        outcomes, staged, second, clean = [], [], [], []
        k = 0
        while True:
            k += 1
            shutil.rmtree(d, ignore_errors=True)
            shutil.copytree(pristine, d, symlinks=True)

            def save_new():
                set_state(scope, names, base, 1)
                crash_after(k)
                api.save(d, 1)
            code = run_child(save_new)
            if code == 0:
                final = load_label(api, d, states)
                break
            if code != CRASH:
                outcomes.append(f"CHILD FAILED ({code})")
                break
            first = load_label(api, d, states)
            outcomes.append(first)
            staged.append(pending(d))
            # crash a second save (state C) at a random operation: previous state or C
            j = rng.randint(1, 4 * len(names) + 12)

            def save_c():
                set_state(scope, names, base, 2)
                crash_after(j)
                api.save(d, 2)
            run_child(save_c)
            second.append([first, load_label(api, d, states)])
            # a complete save cleans up after both crashes and loads exactly
            set_state(scope, names, base, 3)
            api.save(d, 3)
            clean.append([load_label(api, d, {"D": states["D"]}), leftovers(d)])
        report[api.name] = {"crash_points": len(outcomes), "outcomes": outcomes,
                            "pending": staged,
                            "final": final, "second": second, "clean": clean}
    return report


def kill(root, iterations, max_delay, n=300):
    main = fluid.Program()
    block = main.global_block()
    names = [f"layer_{i}.w" for i in range(n)]
    for name in names:
        block.create_var(name=name, shape=[4, 8], dtype="float32", persistable=True)
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.global_scope()
    d = os.path.join(root, "ckpt")

    def save_state(step):
        for name in names:
            scope.var(name).get_tensor().set(np.full((4, 8), step, np.float32))
        fluid.io.save_persistables(exe, d, main)
    save_state(0)
    t = time.perf_counter()
    save_state(0)
    one_save = time.perf_counter() - t
    rng = random.Random(1)
    results = []
    for it in range(iterations):
        first = 1000 * (it + 1)
        pid = os.fork()
        if pid == 0:
            step = first
            while True:
                save_state(step)
                step += 1
        time.sleep(rng.uniform(0, max_delay))
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        try:
            s = fluid.Scope()
            with fluid.scope_guard(s):
                fluid.io.load_persistables(exe, d, main)
            steps = {float(np.array(s.find_var(nm).get_tensor())[0, 0]) for nm in names}
            whole = all(np.all(np.array(s.find_var(nm).get_tensor()) == next(iter(steps)))
                        for nm in names)
            results.append({"steps": sorted(steps), "uniform": whole and len(steps) == 1,
                            "pending": pending(d),
                            "staged": [x for x in os.listdir(d) if x.startswith(".") and
                                       x != ".fluidlite-manifest.json"]})
        except Exception as e:
            results.append({"error": f"{type(e).__name__}: {e}"})
    return {"one_save_seconds": one_save, "results": results}


if __name__ == "__main__":
    mode, root = sys.argv[1], sys.argv[2]
    if mode == "inject":
        out = inject(root)
    else:
        out = kill(root, int(sys.argv[3]), float(sys.argv[4]), *map(int, sys.argv[5:6]))
    print(json.dumps(out))
