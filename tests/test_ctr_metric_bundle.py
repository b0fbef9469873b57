"""fluid.contrib.layers.ctr_metric_bundle: the six running sums against NumPy over two batches,
with a float label and with fluid 1.8's documented int32 label (cast to the input's dtype; 1.8
itself subtracted the int tensor from the float one and failed when run)."""
import numpy as np
import pytest

import fluidlite as fluid


@pytest.mark.parametrize("label_dtype", ["float32", "int32", "int64"])
def test_ctr_metric_bundle_sums_over_batches(label_dtype):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        pred = fluid.data("pred", [-1, 1], "float32")
        label = fluid.data("label", [-1, 1], label_dtype)
        outs = fluid.contrib.layers.ctr_metric_bundle(pred, label)
    assert all(v.dtype == fluid.core.VarDesc.VarType.FP32 for v in outs)
    exe = fluid.Executor()
    exe.run(startup)
    rng = np.random.default_rng(3)
    batches = [(rng.uniform(0, 1, (n, 1)).astype("float32"),
                rng.integers(0, 2, (n, 1)).astype(label_dtype)) for n in (4, 3)]
    for p, lab in batches:
        got = exe.run(main, feed={"pred": p, "label": lab}, fetch_list=list(outs))
    p = np.concatenate([b[0] for b in batches]).astype(np.float64)
    lab = np.concatenate([b[1] for b in batches]).astype(np.float64)
    want = [((p - lab) ** 2).sum(), np.abs(p - lab).sum(), p.sum(),
            (1 / (1 + np.exp(-p))).sum(), lab.sum(), len(p)]
    np.testing.assert_allclose([float(v[0]) for v in got], want, rtol=1e-5)
