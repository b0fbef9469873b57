"""Reader and feed helpers that lost or changed data silently (found while documenting them)."""
import pytest

import fluidlite as fluid
from fluidlite.pipeline import decorators

PROTO = ('name: "MultiSlotDataFeed"\nbatch_size: 2\nmulti_slot_desc {\n    slots {\n'
         '        name: "words"\n        type: "uint64"\n        is_dense: false\n'
         '        is_used: false\n    }\n    slots {\n        name: "label"\n'
         '        type: "uint64"\n        is_dense: false\n        is_used: false\n    }\n}\n')


def test_cache_keeps_nothing_from_a_failed_first_read():
    calls = [0]

    def flaky():
        calls[0] += 1
        yield 1
        if calls[0] == 1:
            raise IOError("disk went away")
        yield 2

    cached = fluid.io.cache(flaky)
    with pytest.raises(IOError):
        list(cached())
    assert list(cached()) == [1, 2]          # was [1, 1, 2]
    assert list(cached()) == [1, 2] and calls[0] == 2


@pytest.mark.parametrize("size, error", [(0, ValueError), (-3, ValueError), (None, TypeError),
                                         (2.5, TypeError)])
def test_shuffle_refuses_a_window_that_cannot_shuffle(size, error):
    reader = lambda: iter(range(10))     # noqa: E731
    with pytest.raises(error, match="buf"):
        fluid.io.shuffle(reader, size)
    with pytest.raises(error, match="buf_size"):
        decorators.shuffle(reader, size)


def test_shuffle_with_a_window_of_one_keeps_the_order_and_larger_ones_shuffle():
    reader = lambda: iter(range(50))     # noqa: E731
    assert list(fluid.io.shuffle(reader, 1)()) == list(range(50))
    got = list(fluid.io.shuffle(reader, 50, seed=3)())
    assert sorted(got) == list(range(50)) and got != list(range(50))


@pytest.mark.parametrize("method", ["set_dense_slots", "set_use_slots"])
def test_data_feed_desc_marks_nothing_when_a_name_is_unknown(tmp_path, method):
    path = tmp_path / "data.proto"
    path.write_text(PROTO)
    desc = fluid.DataFeedDesc(str(path))
    before = [dict(s) for s in desc.slots]
    with pytest.raises(ValueError, match="no slot named 'nope'"):
        getattr(desc, method)(["words", "nope"])
    assert desc.slots == before


@pytest.mark.parametrize("option", ["Default", "OpDetail", "AllOpDetail"])
def test_profiler_takes_fluids_tracer_options(option, capsys):
    import numpy as np
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        y = fluid.layers.relu(fluid.data("x", [-1, 2]))
    exe = fluid.Executor(fluid.CPUPlace())
    with fluid.profiler.profiler("CPU", tracer_option=option) as prof:
        exe.run(main, feed={"x": np.ones((1, 2), "float32")}, fetch_list=[y])
    assert "relu" in prof.report()


def test_profiler_refuses_an_unknown_tracer_option():
    with pytest.raises(ValueError, match="tracer_option must be one of"):
        fluid.profiler.start_profiler("CPU", tracer_option="Everything")
