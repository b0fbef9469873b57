"""fluid.dataset: MultiSlot files -> InMemoryDataset / QueueDataset -> train_from_dataset, which
must give the parameters of the same loop fed by exe.run; DataFeedDesc round trip."""
import threading

import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.core.threads import POOL_PREFIX

N, BATCH = 12, 4


def _data():
    rng = np.random.default_rng(0)
    words = [rng.integers(0, 10, rng.integers(1, 5)) for _ in range(N)]
    dense = rng.uniform(-1, 1, (N, 3)).round(4)
    labels = (dense[:, 0] > 0).astype(int)
    return words, dense, labels


def _write(tmp_path, n_files=2):
    words, dense, labels = _data()
    paths, per = [], N // n_files
    for f in range(n_files):
        lines = []
        for i in range(f * per, (f + 1) * per):
            lines.append(" ".join([str(len(words[i])), *map(str, words[i]),
                                   "3", *map(str, dense[i]), "1", str(labels[i])]))
        p = tmp_path / f"part-{f}.txt"
        p.write_text("\n".join(lines) + "\n")
        paths.append(str(p))
    return paths


def _net():
    main, start = fluid.Program(), fluid.Program()
    main.random_seed = start.random_seed = 3
    with fluid.program_guard(main, start):
        words = fluid.data("words", [None, 1], "int64", lod_level=1)
        dense = fluid.data("dense", [None, 3], "float32")
        label = fluid.data("label", [None, 1], "int64")
        bow = fluid.layers.sequence_pool(fluid.layers.embedding(words, [10, 4]), "average")
        prob = fluid.layers.fc([bow, dense], 2, act="softmax")
        loss = fluid.layers.mean(fluid.layers.cross_entropy(prob, label))
        fluid.optimizer.SGD(0.3).minimize(loss)
    return main, start, [words, dense, label], loss


def _params(main, scope):
    return [np.array(scope.find_var(p.name).get_tensor())
            for p in main.global_block().all_parameters()]


def _by_exe_run():
    main, start, vars_, loss = _net()
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(start, scope=scope)
    words, dense, labels = _data()
    for i in range(0, N, BATCH):
        w = words[i:i + BATCH]
        feed = {"words": fluid.create_lod_tensor(np.concatenate(w).reshape(-1, 1),
                                                 [[len(s) for s in w]], None),
                "dense": dense[i:i + BATCH].astype("float32"),
                "label": labels[i:i + BATCH].reshape(-1, 1).astype("int64")}
        exe.run(main, feed=feed, scope=scope)
    return _params(main, scope)


@pytest.mark.parametrize("kind", ["InMemoryDataset", "QueueDataset"])
def test_train_from_dataset_matches_exe_run(tmp_path, kind, capsys):
    main, start, vars_, loss = _net()
    ds = fluid.dataset.DatasetFactory().create_dataset(kind)
    ds.set_use_var(vars_)
    ds.set_batch_size(BATCH)
    ds.set_thread(2)
    ds.set_filelist(_write(tmp_path))
    ds.set_pipe_command("cat")
    if kind == "InMemoryDataset":
        ds.load_into_memory()
        assert ds.get_memory_data_size() == N
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(start, scope=scope)
    exe.train_from_dataset(main, ds, scope=scope, fetch_list=[loss], fetch_info=["loss"],
                           print_period=1)
    out = capsys.readouterr().out.splitlines()
    assert len(out) == N // BATCH and out[0].startswith("batch: 1, loss: ")
    for got, want in zip(_params(main, scope), _by_exe_run()):
        np.testing.assert_allclose(got, want, rtol=1e-5)
    assert not [t for t in threading.enumerate()
                if t.name.startswith("fluidlite-") and not t.name.startswith(POOL_PREFIX)]


def test_train_from_dataset_debug_prints_the_per_op_report(tmp_path, capsys):
    main, start, vars_, loss = _net()
    ds = fluid.dataset.DatasetFactory().create_dataset("QueueDataset")
    ds.set_use_var(vars_)
    ds.set_batch_size(BATCH)
    ds.set_filelist(_write(tmp_path))
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(start, scope=scope)
    exe.train_from_dataset(main, ds, scope=scope, debug=True)
    out = capsys.readouterr().out
    assert "Profiling Report" in out and f"({N // BATCH} run(s)" in out
    assert "sgd" in out and "lookup_table" in out
    assert fluid.profiler.active() is None         # the debug profile ended with the runs
    exe.train_from_dataset(main, ds, scope=scope)
    assert "Profiling Report" not in capsys.readouterr().out


def test_in_memory_shuffle_pipe_command_and_infer(tmp_path):
    main, start, vars_, loss = _net()
    ds = fluid.dataset.DatasetFactory().create_dataset("InMemoryDataset")
    ds.set_use_var(vars_)
    ds.set_batch_size(5)
    ds.set_filelist(_write(tmp_path, 3))
    ds.set_pipe_command("head -n 2")              # the command sees each file on stdin
    ds.load_into_memory()
    assert ds.get_memory_data_size() == 6
    before = list(ds._memory)
    ds.local_shuffle(seed=1)
    assert sorted(map(repr, ds._memory)) == sorted(map(repr, before))
    orders = set()
    for seed in range(20):                  # shuffling reorders, and the seed decides how
        ds._memory = list(before)
        ds.local_shuffle(seed=seed)
        orders.add(tuple(map(repr, ds._memory)))
    assert len(orders) > 10
    ds._memory = list(before)
    ds.local_shuffle(seed=1)
    ds.global_shuffle(seed=2)
    assert ds.get_shuffle_data_size() == 6
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(start, scope=scope)
    params = _params(main, scope)
    exe.infer_from_dataset(main, ds, scope=scope)
    for a, b in zip(params, _params(main, scope)):        # infer never updates
        np.testing.assert_array_equal(a, b)
    batches = list(fluid.io.DataLoader.from_dataset(ds, drop_last=False)())
    assert [np.array(b[0]["dense"]).shape[0] for b in batches] == [5, 1]
    assert batches[0][0]["words"].lod()[0][0] == 0
    ds.release_memory()
    assert ds.get_memory_data_size() == 0
    with pytest.raises(RuntimeError, match="load_into_memory"):
        ds.local_shuffle()


def test_bad_lines_name_file_and_slot(tmp_path):
    main, start, vars_, loss = _net()
    p = tmp_path / "bad.txt"
    p.write_text("2 1 2 3 0.1 0.2 0.3 1 0\n1 4 2 0.5 0.5 1 1\n")
    ds = fluid.dataset.DatasetFactory().create_dataset("QueueDataset")
    ds.set_use_var(vars_)
    ds.set_filelist([str(p)])
    with pytest.raises(ValueError, match=r"bad.txt:2: slot 'dense' has 2 values"):
        fluid.Executor().train_from_dataset(main, ds, scope=fluid.Scope())
    with pytest.raises(NotImplementedError, match="InMemoryDataset"):
        ds.local_shuffle()
    with pytest.raises(ValueError, match="does not exist"):
        fluid.dataset.DatasetFactory().create_dataset("NoSuchDataset")


def test_data_feed_desc_round_trip(tmp_path):
    text = ('name: "MultiSlotDataFeed"\nbatch_size: 2\nmulti_slot_desc {\n    slots {\n'
            '        name: "words"\n        type: "uint64"\n        is_dense: false\n'
            '        is_used: false\n    }\n    slots {\n        name: "label"\n'
            '        type: "uint64"\n        is_dense: false\n        is_used: false\n'
            '    }\n}\n')
    path = tmp_path / "data.proto"
    path.write_text(text)
    desc = fluid.DataFeedDesc(str(path))
    assert desc.batch_size == 2 and [s["name"] for s in desc.slots] == ["words", "label"]
    desc.set_batch_size(128)
    desc.set_dense_slots(["label"])
    desc.set_use_slots(["words", "label"])
    out = desc.desc()
    assert "batch_size: 128" in out and out.count("is_used: true") == 2
    assert "is_dense: true" in out
    path.write_text(out)
    again = fluid.DataFeedDesc(str(path))
    assert again.slots == desc.slots and again.batch_size == 128
    with pytest.raises(ValueError, match="no slot named"):
        desc.set_use_slots(["nope"])
