"""Run single legacy ops in real PaddlePaddle 2.6 (static mode) for tests/ops/test_paddle_oracle.py.

Not a test module: executed by the interpreter named in ``FLUIDLITE_PADDLE_PYTHON`` as
``python paddle_oracle.py cases.pkl results.pkl``. Each case is a dict ``type``, ``inputs``
(slot -> array, or (array, sequence lengths) for a LoD input), ``attrs``, ``outputs`` (slot ->
dtype, or a list of dtypes for a duplicable slot), and optionally ``grads`` (input slots) with
``douts`` (output slot -> upstream gradient). The result per case is ``{"outputs": {slot:
[arrays]}, "grads": {slot: [arrays]}}`` or ``{"error": message}``.
"""
import pickle
import sys

import numpy as np


def _run(paddle, case):
    main, startup = paddle.static.Program(), paddle.static.Program()
    feed, ins = {}, {}
    with paddle.static.program_guard(main, startup):
        block = main.global_block()
        for slot, value in case["inputs"].items():
            entries = value if isinstance(value, list) else [value]
            ins[slot] = []
            for i, entry in enumerate(entries):
                arr, lens = entry if isinstance(entry, tuple) else (entry, None)
                arr = np.asarray(arr)
                name = f"{slot}_{i}"
                shape = [-1] + list(arr.shape[1:]) if lens else list(arr.shape)
                var = paddle.static.data(name, shape, str(arr.dtype), lod_level=1 if lens else 0)
                var.stop_gradient = slot not in case.get("grads", ())
                if lens:
                    t = paddle.base.core.LoDTensor()
                    t.set(arr, paddle.CPUPlace())
                    t.set_recursive_sequence_lengths([list(lens)])
                    feed[name] = t
                else:
                    feed[name] = arr
                ins[slot].append(var)
        outs = {}
        for slot, dtypes in case["outputs"].items():
            dts = dtypes if isinstance(dtypes, list) else [dtypes]
            outs[slot] = [block.create_var(name=f"out_{slot}_{i}", dtype=d)
                          for i, d in enumerate(dts)]
        block.append_op(type=case["type"], inputs=ins, outputs=outs, attrs=case["attrs"])
        grads = []
        if case.get("grads"):
            targets, target_grads = [], []
            for slot, d in case["douts"].items():
                tshape = list(outs[slot][0].shape)
                if len(tshape) != d.ndim and all(v >= 0 for v in tshape) and \
                        int(np.prod(tshape)) == d.size:
                    d = d.reshape(tshape)        # 2.x's 0-D result where fluid 1.8 has [1]
                dv = paddle.static.data("dout_" + slot,
                                        tshape if len(tshape) == d.ndim else list(d.shape),
                                        str(d.dtype))
                feed["dout_" + slot] = d
                targets.append(outs[slot][0])
                target_grads.append(dv)
            xs = [v for s in case["grads"] for v in ins[s]]
            grads = paddle.static.gradients(targets, xs, target_gradients=target_grads)
    fetch = [v for s in case["outputs"] for v in outs[s]]
    exe = paddle.static.Executor(paddle.CPUPlace())
    exe.run(startup)
    vals = [np.array(v) for v in exe.run(main, feed=feed, return_numpy=False,
                                         fetch_list=fetch + [g for g in grads if g is not None])]
    res, k = {"outputs": {}, "grads": {}}, 0
    for slot in case["outputs"]:
        res["outputs"][slot] = vals[k:k + len(outs[slot])]
        k += len(outs[slot])
    gi = 0
    for slot in case.get("grads", ()):
        res["grads"][slot] = []
        for _ in ins[slot]:
            g = grads[gi]
            gi += 1
            res["grads"][slot].append(None if g is None else vals[k])
            k += g is not None
    return res


def main():
    import paddle
    paddle.enable_static()
    with open(sys.argv[1], "rb") as f:
        cases = pickle.load(f)
    results = []
    for case in cases:
        try:
            results.append(_run(paddle, case))
        except Exception as exc:             # one failing case must not hide the others
            results.append({"error": f"{type(exc).__name__}: {str(exc)[-600:]}"})
    with open(sys.argv[2], "wb") as f:
        pickle.dump(results, f)


if __name__ == "__main__":
    main()
