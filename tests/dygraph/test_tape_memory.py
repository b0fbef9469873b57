"""Memory the dygraph tracer keeps after a call (issue 31, item 5): a parameter made from a
NumPy array (``NumpyArrayInitializer``, which runs ``assign_value`` with every weight as an
attr value) must not leave those values in the tracer's kernel cache. Before the fix the cache
key froze each value into a tuple kept for the process's life -- about 85 bytes per weight,
1.2 GB for ResNet-18 -- which made the dygraph benchmarks use twice static's peak memory."""
import gc
import tracemalloc

import numpy as np

import fluidlite as fluid
from fluidlite import dygraph
from fluidlite.dygraph import tracer


def _linear(w):
    attr = fluid.ParamAttr(initializer=fluid.initializer.NumpyArrayInitializer(w))
    return dygraph.Linear(w.shape[0], w.shape[1], param_attr=attr, bias_attr=False)


def _retained_bytes(w):
    """Bytes still allocated after making (and dropping) a Linear layer from ``w``."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        with dygraph.guard():
            layer = _linear(w)
            np.testing.assert_array_equal(layer.weight.numpy(), w)
            del layer
        gc.collect()
        return tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()


def test_numpy_initialized_parameter_leaves_no_cache_entry_with_its_values():
    rng = np.random.default_rng(0)
    # the first layer warms the lazily built state (imports, the other ops' kernel cache
    # entries); the second, with other values of the same shape, must leave nothing behind
    _retained_bytes(rng.standard_normal((300, 200)).astype("float32"))
    retained = _retained_bytes(rng.standard_normal((300, 200)).astype("float32"))
    # the frozen key alone held 9 MB (60,000 x (a tuple + a float)); what may remain is small
    # bookkeeping (the unique-name counter), independent of the weight count
    assert retained < 64 * 1024, f"{retained} bytes retained after dropping the layer"
    assert not any(k[0] == "assign_value" and any(
        len(v) > tracer._MAX_KEY_VALUES for _, v in k[1] if isinstance(v, tuple))
        for k in tracer._KERNELS), "assign_value's weights are in the kernel cache key"


def test_small_list_attrs_still_use_the_kernel_cache():
    """Attrs with few values (shapes, small constants) keep being cached: the second call of
    the same op with the same attrs binds nothing new."""
    w = np.arange(6, dtype="float32").reshape(2, 3)
    with dygraph.guard():
        _linear(w)
        n = len(tracer._KERNELS)
        layer = _linear(w)
        assert len(tracer._KERNELS) == n
        np.testing.assert_array_equal(layer.weight.numpy(), w)


def test_uncached_call_computes_the_same_value_every_time():
    """A call kept out of the cache (a large attr) still runs its checked kernel each time."""
    rng = np.random.default_rng(1)
    with dygraph.guard():
        for _ in range(2):
            w = rng.standard_normal((tracer._MAX_KEY_VALUES + 1, 2)).astype("float32")
            np.testing.assert_array_equal(_linear(w).weight.numpy(), w)


def test_param_attr_copies_share_a_numpy_initializers_array():
    """layer_helper deep-copies every ParamAttr; the initial weights must not be duplicated
    (42.6 MiB on ResNet-18)"""
    import copy

    import fluidlite as fluid
    value = np.arange(6, dtype="float32").reshape(2, 3)
    attr = fluid.ParamAttr(initializer=fluid.initializer.NumpyArrayInitializer(value))
    clone = copy.deepcopy(attr)
    assert clone.initializer is not attr.initializer
    assert clone.initializer._value is value
