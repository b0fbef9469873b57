"""Issue 15 acceptance: one training loop over one ragged (LoD) dataset, fed by every path
fluid 1.8 offers -- exe.run(feed=...), DataLoader.from_generator (iterable with sample, sample
list and batch generators; non-iterable), PyReader (iterable and not), py_reader + read_file,
and train_from_dataset -- from the same initial weights gives the same parameters."""
import threading

import numpy as np

import fluidlite as fluid
from fluidlite.core.threads import POOL_PREFIX

N, BATCH, EPOCHS = 12, 4, 2
DIM = 3


def _data():
    """Variable-length word sequences (one has length 1), a dense feature and a label."""
    rng = np.random.default_rng(5)
    words = [rng.integers(0, 10, rng.integers(1, 5)).astype("int64") for _ in range(N)]
    dense = rng.uniform(-1, 1, (N, DIM)).round(4).astype("float32")
    labels = ((dense[:, 0] > 0) ^ (np.array([w[0] for w in words]) > 4)).astype("int64")
    return words, dense, labels.reshape(-1, 1)


def _model(words, dense, label):
    bow = fluid.layers.sequence_pool(fluid.layers.embedding(words, [10, 4]), "average")
    prob = fluid.layers.fc([bow, dense], 2, act="softmax")
    loss = fluid.layers.mean(fluid.layers.cross_entropy(prob, label))
    fluid.optimizer.SGD(0.3).minimize(loss)
    return loss


def _net():
    main, start = fluid.Program(), fluid.Program()
    main.random_seed = start.random_seed = 11
    with fluid.program_guard(main, start):
        words = fluid.data("words", [None, 1], "int64", lod_level=1)
        dense = fluid.data("dense", [None, DIM], "float32")
        label = fluid.data("label", [None, 1], "int64")
        loss = _model(words, dense, label)
    return main, start, [words, dense, label], loss


def _batches():
    """(LoDTensor words, dense, label) per batch, in order."""
    words, dense, labels = _data()
    for i in range(0, N, BATCH):
        w = words[i:i + BATCH]
        yield (fluid.create_lod_tensor(np.concatenate(w).reshape(-1, 1),
                                       [[len(s) for s in w]], fluid.CPUPlace()),
               dense[i:i + BATCH], labels[i:i + BATCH])


def _samples():
    words, dense, labels = _data()
    for i in range(N):
        yield words[i].reshape(-1, 1), dense[i], labels[i]


def _params(main, scope):
    return [np.array(scope.find_var(p.name).get_tensor())
            for p in main.global_block().all_parameters()]


def _run_epochs(main, exe, scope, loss, epoch):
    """``epoch()`` yields feeds (dicts) or None (the program reads by itself) per step."""
    losses = []
    for _ in range(EPOCHS):
        losses += epoch()
    return losses


def _iterable(main, vars_, exe, scope, loss, how):
    def epoch():
        if how == "pyreader":
            loader = fluid.io.PyReader(feed_list=vars_, capacity=2, iterable=True)
            loader.decorate_batch_generator(_batches)
        else:
            loader = fluid.io.DataLoader.from_generator(feed_list=vars_, capacity=2)
            if how == "sample":
                loader.set_sample_generator(_samples, BATCH)
            elif how == "sample_list":
                loader.set_sample_list_generator(fluid.io.batch(_samples, BATCH))
            else:
                loader.set_batch_generator(_batches)
        return [float(exe.run(main, feed=d, fetch_list=[loss], scope=scope)[0][0])
                for d in loader()]
    return epoch


def _until_eof(main, exe, scope, loss, loader):
    def epoch():
        out = []
        loader.start()
        try:
            while True:
                out.append(float(exe.run(main, fetch_list=[loss], scope=scope)[0][0]))
        except fluid.core.EOFException:
            loader.reset()
        return out
    return epoch


def _train(path, tmp_path):
    exe, scope = fluid.Executor(), fluid.Scope()
    if path == "py_reader":
        main, start = fluid.Program(), fluid.Program()
        main.random_seed = start.random_seed = 11
        with fluid.program_guard(main, start):
            reader = fluid.layers.py_reader(capacity=4, shapes=[[-1, 1], [-1, DIM], [-1, 1]],
                                            dtypes=["int64", "float32", "int64"],
                                            lod_levels=[1, 0, 0])
            words, dense, label = fluid.layers.read_file(fluid.layers.double_buffer(reader))
            loss = _model(words, dense, label)
        reader.decorate_tensor_provider(_batches)
        exe.run(start, scope=scope)
        losses = _run_epochs(main, exe, scope, loss, _until_eof(main, exe, scope, loss, reader))
        return _params(main, scope), losses
    main, start, vars_, loss = _net()
    exe.run(start, scope=scope)
    if path == "exe_run":
        def epoch():
            return [float(exe.run(main, feed=dict(zip(["words", "dense", "label"], b)),
                                  fetch_list=[loss], scope=scope)[0][0]) for b in _batches()]
    elif path in ("sample", "sample_list", "batch", "pyreader"):
        epoch = _iterable(main, vars_, exe, scope, loss, path)
    elif path == "loader_non_iterable":
        loader = fluid.io.DataLoader.from_generator(feed_list=vars_, capacity=3, iterable=False)
        loader.set_sample_list_generator(fluid.io.batch(_samples, BATCH))
        epoch = _until_eof(main, exe, scope, loss, loader)
    elif path == "pyreader_non_iterable":
        reader = fluid.io.PyReader(feed_list=vars_, capacity=3, iterable=False)
        reader.decorate_sample_generator(_samples, BATCH)
        epoch = _until_eof(main, exe, scope, loss, reader)
    else:       # train_from_dataset over fluid's MultiSlot text format
        words, dense, labels = _data()
        lines = [" ".join([str(len(w)), *map(str, w), str(DIM), *map(repr, map(float, d)),
                           "1", str(int(y[0]))]) for w, d, y in zip(words, dense, labels)]
        f = tmp_path / "part-0.txt"
        f.write_text("\n".join(lines) + "\n")
        ds = fluid.dataset.DatasetFactory().create_dataset(path)
        ds.set_use_var(vars_)
        ds.set_batch_size(BATCH)
        ds.set_thread(1)
        ds.set_filelist([str(f)])
        if path == "InMemoryDataset":
            ds.load_into_memory()
        for _ in range(EPOCHS):
            exe.train_from_dataset(main, ds, scope=scope)
        return _params(main, scope), None
    losses = _run_epochs(main, exe, scope, loss, epoch)    # train first, then read
    return _params(main, scope), losses


PATHS = ["sample", "sample_list", "batch", "pyreader", "loader_non_iterable",
         "pyreader_non_iterable", "py_reader", "InMemoryDataset", "QueueDataset"]


def _check_paths(tmp_path, paths):
    want, want_losses = _train("exe_run", tmp_path)
    assert len(want_losses) == EPOCHS * N // BATCH
    assert want_losses[-1] < want_losses[0]         # it does train
    _, start, _, _ = _net()
    init = fluid.Scope()
    fluid.Executor().run(start, scope=init)
    moved = [np.abs(w - np.array(init.find_var(p.name).get_tensor())).max()
             for w, p in zip(want, start.global_block().all_parameters())]
    assert min(moved) > 1e-3, moved                 # the weights compared are trained ones
    for path in paths:
        got, losses = _train(path, tmp_path)
        if losses is not None:
            np.testing.assert_allclose(losses, want_losses, rtol=1e-5, err_msg=path)
        assert len(got) == len(want) == 4, path     # embedding, fc: a weight per input, bias
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-7, err_msg=path)
    assert not [t for t in threading.enumerate()
                if t.name.startswith("fluidlite-") and not t.name.startswith(POOL_PREFIX)]


def test_every_feeding_path_gives_the_same_parameters(tmp_path):
    _check_paths(tmp_path, PATHS)
