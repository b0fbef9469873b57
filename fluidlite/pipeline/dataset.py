"""``fluid.dataset``: ``DatasetFactory``, ``InMemoryDataset``, ``QueueDataset`` and the loop of
``Executor.train_from_dataset`` / ``infer_from_dataset``.

Files are in fluid's **MultiSlot** text format: one sample per line, for each variable of
``set_use_var`` (in order) a count ``n`` followed by ``n`` values. A variable with
``lod_level >= 1`` (a sparse slot) gets a sequence of ``n`` ids; a dense variable gets its ``n``
values reshaped to its per-sample shape. Each file goes through ``set_pipe_command`` (a shell
command reading the file on stdin; ``cat`` by default) before parsing.

``InMemoryDataset`` parses every file on ``load_into_memory()`` (``set_thread`` files at a
time) and can ``local_shuffle`` / ``global_shuffle`` (one process: the same as a local
shuffle); ``QueueDataset`` streams the files on every pass. Batches are converted to feed
dicts in a background thread while the executor runs the previous batch.

**Slots shuffle** (feature-importance evaluation): after ``set_fea_eval(record_candidate_size)``,
``slots_shuffle(["slot", ...])`` replaces, in every sample, the values of those integer (sparse
id) slots with the values of a random earlier-or-same sample: a reservoir of at most
``record_candidate_size`` samples is filled as the samples go by, and each sample takes the
slot values of a random member (fluid's ``RecordCandidateList``). The other slots are left
alone, so comparing a metric (AUC) with and without the shuffle measures how much the model
relies on those slots. Every call starts again from the loaded data (shuffles do not compound),
as fluid's. Float slots are never replaced (fluid shuffles only its uint64 feasigns).
"""
from __future__ import annotations

import logging
import random
import subprocess
import sys
import warnings
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence

import numpy as np

from ..core.dtypes import to_numpy_dtype
from ..core.ir import Program, Variable, default_main_program
from .feed_desc import DataFeedDesc
from .feeder import DataFeeder
from .prefetch import _END, _Prefetcher

__all__ = ["DatasetFactory", "DatasetBase", "InMemoryDataset", "QueueDataset",
           "FileInstantDataset", "DatasetLoader"]

_log = logging.getLogger("fluidlite")


class DatasetFactory:
    """``DatasetFactory().create_dataset("InMemoryDataset" | "QueueDataset")``.

    Args:
        None: the factory takes no arguments.

    Returns:
        DatasetFactory: a factory whose ``create_dataset`` builds the datasets.

    Raises:
        None: the constructor does not raise (``create_dataset`` raises ValueError).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> dataset = fluid.dataset.DatasetFactory().create_dataset("InMemoryDataset")
        >>> type(dataset).__name__
        'InMemoryDataset'
    """

    def create_dataset(self, datafeed_class: str = "QueueDataset") -> "DatasetBase":
        """A new dataset of the named kind: ``"QueueDataset"`` (the default),
        ``"InMemoryDataset"`` or ``"FileInstantDataset"``; ValueError naming the choices for any
        other name.

        Args:
            datafeed_class (str): ``"QueueDataset"``, ``"InMemoryDataset"`` or
                ``"FileInstantDataset"``. Default ``"QueueDataset"``.

        Returns:
            DatasetBase: a new, unconfigured dataset of that kind.

        Raises:
            ValueError: ``datafeed_class`` is not one of the three names.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> factory = fluid.dataset.DatasetFactory()
            >>> [type(factory.create_dataset(kind)).__name__ for kind in ("InMemoryDataset", "QueueDataset")]
            ['InMemoryDataset', 'QueueDataset']
        """
        kinds = {"InMemoryDataset": InMemoryDataset, "QueueDataset": QueueDataset,
                 "FileInstantDataset": FileInstantDataset}
        if datafeed_class not in kinds:
            raise ValueError(f"datafeed class {datafeed_class!r} does not exist; choose one of "
                             f"{sorted(kinds)}")
        return kinds[datafeed_class]()


class DatasetBase:
    """What every dataset shares: files, pipe command, variables, batch size, threads."""

    def __init__(self) -> None:
        self.proto_desc = DataFeedDesc()
        self.filelist: List[str] = []
        self.use_vars: List[Variable] = []
        self.thread_num = 1
        self.drop_last = False
        self.fea_eval = False
        self._record_candidate_size = 0
        self._slots_shuffle_seed: Optional[int] = None   # tests fix the reservoir's draws

    # -- configuration --------------------------------------------------------------------
    def set_pipe_command(self, pipe_command: str) -> None:
        """The shell command each file is piped through before parsing (fluid's ``cat`` default
        reads the file as it is).

        Args:
            pipe_command (str): a shell command reading a file on stdin and writing MultiSlot text
                to stdout; ``"cat"`` (the default) reads the file unchanged.

        Returns:
            None.

        Raises:
            None: this setter does not raise; a failing command raises RuntimeError when the files
                are read (``load_into_memory`` or a pass over a QueueDataset).

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> import os, tempfile
            >>> path = os.path.join(tempfile.mkdtemp(), "part-0")
            >>> # MultiSlot text: per slot, a count then the values
            >>> with open(path, "w") as f:
            ...     for line in ["2 1.0 2.0 1 0", "2 3.0 4.0 1 1", "2 5.0 6.0 1 0"]:
            ...         print(line, file=f)
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup):
            ...     x = fluid.data("x", [-1, 2], "float32")
            ...     y = fluid.data("y", [-1, 1], "int64")
            >>> dataset = fluid.dataset.DatasetFactory().create_dataset("InMemoryDataset")
            >>> dataset.set_use_var([x, y])
            >>> dataset.set_batch_size(2)
            >>> dataset.set_filelist([path])
            >>> dataset.set_pipe_command("cat")
            >>> dataset.proto_desc.pipe_command
            'cat'
        """
        self.proto_desc.pipe_command = str(pipe_command)

    def set_batch_size(self, batch_size: int) -> None:
        """Samples per batch; ValueError when below 1.

        Args:
            batch_size (int): samples per batch, >= 1.

        Returns:
            None.

        Raises:
            ValueError: ``batch_size`` is below 1 or not convertible to int.
            TypeError: ``batch_size`` is not a number (e.g. None).

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> import os, tempfile
            >>> path = os.path.join(tempfile.mkdtemp(), "part-0")
            >>> # MultiSlot text: per slot, a count then the values
            >>> with open(path, "w") as f:
            ...     for line in ["2 1.0 2.0 1 0", "2 3.0 4.0 1 1", "2 5.0 6.0 1 0"]:
            ...         print(line, file=f)
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup):
            ...     x = fluid.data("x", [-1, 2], "float32")
            ...     y = fluid.data("y", [-1, 1], "int64")
            >>> dataset = fluid.dataset.DatasetFactory().create_dataset("InMemoryDataset")
            >>> dataset.set_use_var([x, y])
            >>> dataset.set_batch_size(2)
            >>> dataset.set_filelist([path])
            >>> dataset.proto_desc.batch_size
            2
        """
        if int(batch_size) < 1:
            raise ValueError(f"set_batch_size: batch_size must be >= 1, got {batch_size}")
        self.proto_desc.batch_size = int(batch_size)

    def set_thread(self, thread_num: int) -> None:
        """How many files are parsed at once (at least 1).

        Args:
            thread_num (int): how many files are parsed at once; values below 1 mean 1.

        Returns:
            None.

        Raises:
            ValueError: ``thread_num`` is a string that is not an integer.
            TypeError: ``thread_num`` is not a number (e.g. None).

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> import os, tempfile
            >>> path = os.path.join(tempfile.mkdtemp(), "part-0")
            >>> # MultiSlot text: per slot, a count then the values
            >>> with open(path, "w") as f:
            ...     for line in ["2 1.0 2.0 1 0", "2 3.0 4.0 1 1", "2 5.0 6.0 1 0"]:
            ...         print(line, file=f)
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup):
            ...     x = fluid.data("x", [-1, 2], "float32")
            ...     y = fluid.data("y", [-1, 1], "int64")
            >>> dataset = fluid.dataset.DatasetFactory().create_dataset("InMemoryDataset")
            >>> dataset.set_use_var([x, y])
            >>> dataset.set_batch_size(2)
            >>> dataset.set_filelist([path])
            >>> dataset.set_thread(4)                 # files parsed 4 at a time
            >>> dataset.thread_num
            4
        """
        self.thread_num = max(1, int(thread_num))

    def set_filelist(self, filelist: Sequence[str]) -> None:
        """The MultiSlot text files to read (one sample per line).

        Args:
            filelist (Sequence[str]): paths of the MultiSlot text files, read in this order.

        Returns:
            None.

        Raises:
            TypeError: ``filelist`` is not iterable.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> import os, tempfile
            >>> path = os.path.join(tempfile.mkdtemp(), "part-0")
            >>> # MultiSlot text: per slot, a count then the values
            >>> with open(path, "w") as f:
            ...     for line in ["2 1.0 2.0 1 0", "2 3.0 4.0 1 1", "2 5.0 6.0 1 0"]:
            ...         print(line, file=f)
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup):
            ...     x = fluid.data("x", [-1, 2], "float32")
            ...     y = fluid.data("y", [-1, 1], "int64")
            >>> dataset = fluid.dataset.DatasetFactory().create_dataset("InMemoryDataset")
            >>> dataset.set_use_var([x, y])
            >>> dataset.set_batch_size(2)
            >>> dataset.set_filelist([path])
            >>> [os.path.basename(p) for p in dataset.filelist]
            ['part-0']
        """
        self.filelist = [str(f) for f in filelist]

    def set_use_var(self, var_list: Sequence[Variable]) -> None:
        """The variables each sample fills, in file order: one MultiSlot slot per variable (float
        slots for float variables, uint64 for integer ones; dense when ``lod_level`` is 0).

        Args:
            var_list (Sequence[Variable]): the data variables one sample fills, in the order of the
                slots of a line.

        Returns:
            None.

        Raises:
            AttributeError: an entry is not a Variable (it has no ``name`` / ``dtype`` /
                ``lod_level``).
            TypeError: ``var_list`` is not iterable.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> import os, tempfile
            >>> path = os.path.join(tempfile.mkdtemp(), "part-0")
            >>> # MultiSlot text: per slot, a count then the values
            >>> with open(path, "w") as f:
            ...     for line in ["2 1.0 2.0 1 0", "2 3.0 4.0 1 1", "2 5.0 6.0 1 0"]:
            ...         print(line, file=f)
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup):
            ...     x = fluid.data("x", [-1, 2], "float32")
            ...     y = fluid.data("y", [-1, 1], "int64")
            >>> dataset = fluid.dataset.DatasetFactory().create_dataset("InMemoryDataset")
            >>> dataset.set_use_var([x, y])
            >>> dataset.set_batch_size(2)
            >>> dataset.set_filelist([path])
            >>> [s["name"] for s in dataset.proto_desc.slots]
            ['x', 'y']
        """
        self.use_vars = list(var_list)
        self.proto_desc.slots = [
            {"name": v.name, "type": "float" if np.dtype(to_numpy_dtype(v.dtype)).kind == "f"
             else "uint64", "is_dense": v.lod_level == 0, "is_used": True} for v in var_list]

    def set_hdfs_config(self, fs_name: str, fs_ugi: str) -> None:
        """Accepted for compatibility: files are read from the local file system.

        Args:
            fs_name (str): the HDFS name node address (unused: files are local).
            fs_ugi (str): the HDFS ``user,password`` (unused).

        Returns:
            None.

        Raises:
            None: this method does not raise.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> import os, tempfile
            >>> path = os.path.join(tempfile.mkdtemp(), "part-0")
            >>> # MultiSlot text: per slot, a count then the values
            >>> with open(path, "w") as f:
            ...     for line in ["2 1.0 2.0 1 0", "2 3.0 4.0 1 1", "2 5.0 6.0 1 0"]:
            ...         print(line, file=f)
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup):
            ...     x = fluid.data("x", [-1, 2], "float32")
            ...     y = fluid.data("y", [-1, 1], "int64")
            >>> dataset = fluid.dataset.DatasetFactory().create_dataset("InMemoryDataset")
            >>> dataset.set_use_var([x, y])
            >>> dataset.set_batch_size(2)
            >>> dataset.set_filelist([path])
            >>> dataset.set_hdfs_config("hdfs://example", "user,passwd")   # files stay local
            >>> dataset.load_into_memory()
            >>> dataset.get_memory_data_size()
            3
        """
        _log.info("dataset: set_hdfs_config is ignored (files are local)")

    def set_download_cmd(self, download_cmd: str) -> None:
        self.set_pipe_command(download_cmd)

    def desc(self) -> str:
        """The data-feed description as protobuf text (name, batch size, one ``slots`` entry per
        variable of ``set_use_var``).

        Args:
            None: this method takes no arguments.

        Returns:
            str: the ``DataFeedDesc`` protobuf text of this dataset.

        Raises:
            None: this method does not raise.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> import os, tempfile
            >>> path = os.path.join(tempfile.mkdtemp(), "part-0")
            >>> # MultiSlot text: per slot, a count then the values
            >>> with open(path, "w") as f:
            ...     for line in ["2 1.0 2.0 1 0", "2 3.0 4.0 1 1", "2 5.0 6.0 1 0"]:
            ...         print(line, file=f)
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup):
            ...     x = fluid.data("x", [-1, 2], "float32")
            ...     y = fluid.data("y", [-1, 1], "int64")
            >>> dataset = fluid.dataset.DatasetFactory().create_dataset("InMemoryDataset")
            >>> dataset.set_use_var([x, y])
            >>> dataset.set_batch_size(2)
            >>> dataset.set_filelist([path])
            >>> print(dataset.desc())      # doctest: +ELLIPSIS
            name: "MultiSlotDataFeed"
            batch_size: 2
            multi_slot_desc {
                slots {
                    name: "x"
                    type: "float"
                    is_dense: true
                    is_used: true
                }
                slots {
                    name: "y"
                    type: "uint64"
                    is_dense: true
                    is_used: true
                }
            }
        """
        return self.proto_desc.desc()

    # -- slots shuffle (feature-importance evaluation) ------------------------------------------
    def set_fea_eval(self, record_candidate_size: int, fea_eval: bool = True) -> None:
        """Enable (``fea_eval=True``) the feature-evaluation mode ``slots_shuffle`` needs, with a
        reservoir of ``record_candidate_size`` candidate samples to draw slot values from.

        Args:
            record_candidate_size (int): capacity of the candidate reservoir, >= 1 (checked only
                when ``fea_eval`` is True).
            fea_eval (bool): turn the feature-evaluation mode on (True) or off. Default True.

        Returns:
            None.

        Raises:
            TypeError: ``fea_eval`` is not a bool.
            ValueError: ``fea_eval`` is True and ``record_candidate_size`` is not a positive int.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> import os, tempfile
            >>> path = os.path.join(tempfile.mkdtemp(), "part-0")
            >>> # MultiSlot text: per slot, a count then the values
            >>> with open(path, "w") as f:
            ...     for line in ["2 1.0 2.0 1 0", "2 3.0 4.0 1 1", "2 5.0 6.0 1 0"]:
            ...         print(line, file=f)
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup):
            ...     x = fluid.data("x", [-1, 2], "float32")
            ...     y = fluid.data("y", [-1, 1], "int64")
            >>> dataset = fluid.dataset.DatasetFactory().create_dataset("InMemoryDataset")
            >>> dataset.set_use_var([x, y])
            >>> dataset.set_batch_size(2)
            >>> dataset.set_filelist([path])
            >>> dataset.load_into_memory()
            >>> dataset.set_fea_eval(record_candidate_size=2, fea_eval=True)
            >>> dataset.fea_eval
            True
        """
        if not isinstance(fea_eval, bool):
            raise TypeError(f"set_fea_eval: fea_eval must be a bool, got "
                            f"{type(fea_eval).__name__}")
        if fea_eval:
            if isinstance(record_candidate_size, bool) or not isinstance(
                    record_candidate_size, (int, np.integer)) or record_candidate_size < 1:
                raise ValueError(f"set_fea_eval: record_candidate_size must be a positive int "
                                 f"(the number of candidate samples), got "
                                 f"{record_candidate_size!r}")
            self._record_candidate_size = int(record_candidate_size)
        self.fea_eval = fea_eval

    def slots_shuffle(self, slots: Sequence[str]) -> None:
        """Replace the values of the integer slots named in ``slots`` (variables of
        ``set_use_var``) in every sample with those of a random candidate sample (see the module
        docstring). Without ``set_fea_eval`` first this does nothing (as fluid, with a
        warning in the log).

        Args:
            slots (list[str]): names of variables of ``set_use_var`` whose values are replaced;
                float slots among them are left alone (with a log warning).

        Returns:
            None.

        Raises:
            TypeError: ``slots`` is not a list/tuple/set of strings.
            ValueError: ``set_use_var`` was not called, or a name is not a slot of this dataset.
            RuntimeError: an InMemoryDataset in feature-evaluation mode is not loaded yet.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> import os, tempfile
            >>> path = os.path.join(tempfile.mkdtemp(), "part-0")
            >>> # MultiSlot text: per slot, a count then the values
            >>> with open(path, "w") as f:
            ...     for line in ["2 1.0 2.0 1 0", "2 3.0 4.0 1 1", "2 5.0 6.0 1 0"]:
            ...         print(line, file=f)
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup):
            ...     x = fluid.data("x", [-1, 2], "float32")
            ...     y = fluid.data("y", [-1, 1], "int64")
            >>> dataset = fluid.dataset.DatasetFactory().create_dataset("InMemoryDataset")
            >>> dataset.set_use_var([x, y])
            >>> dataset.set_batch_size(2)
            >>> dataset.set_filelist([path])
            >>> dataset.load_into_memory()
            >>> dataset.set_fea_eval(record_candidate_size=3, fea_eval=True)
            >>> dataset.slots_shuffle(["y"])      # y's values redrawn from candidate samples
            >>> dataset.get_memory_data_size()
            3
        """
        idx = self._shuffle_slot_indices(slots)
        if not self.fea_eval:
            _log.warning("dataset: slots_shuffle ignored: fea eval mode is off; call "
                         "set_fea_eval(record_candidate_size, True) first")
            return
        self._apply_slots_shuffle(idx)

    def _shuffle_slot_indices(self, slots: Sequence[str]) -> List[int]:
        if isinstance(slots, str) or not isinstance(slots, (list, tuple, set, frozenset)) \
                or not all(isinstance(x, str) for x in slots):
            raise TypeError(f"slots_shuffle: slots must be a list of slot (variable) names, "
                            f"got {slots!r}")
        self._check_ready()
        names = [v.name for v in self.use_vars]
        unknown = sorted(set(slots) - set(names))
        if unknown:
            raise ValueError(f"slots_shuffle: {unknown} are not slots of this dataset; "
                             f"set_use_var gave {names}")
        idx = []
        for i, v in enumerate(self.use_vars):
            if v.name not in slots:
                continue
            if np.dtype(to_numpy_dtype(v.dtype)).kind == "f":
                _log.warning("dataset: slots_shuffle leaves float slot '%s' alone (only "
                             "integer id slots are shuffled, as in fluid)", v.name)
                continue
            idx.append(i)
        return idx

    def _apply_slots_shuffle(self, idx: List[int]) -> None:     # overridden per dataset kind
        raise TypeError(f"{type(self).__name__} does not hold samples to shuffle")

    def _slots_shuffled(self, samples: Iterable[tuple], idx: List[int]) -> Iterator[tuple]:
        """``samples`` with the slots ``idx`` taken from reservoir candidates (fluid's
        RecordCandidateList.AddAndGet: the sample joins the reservoir -- always while it is not
        full, then with probability capacity / seen, replacing a random member -- and a
        random member gives its slot values)."""
        rng = random.Random(self._slots_shuffle_seed)
        cap = self._record_candidate_size
        pool: List[tuple] = []
        seen = 0
        for sample in samples:
            seen += 1
            if len(pool) < cap:
                pool.append(sample)
            elif rng.random() < cap / seen:
                pool[rng.randrange(cap)] = sample
            cand = pool[rng.randrange(len(pool))]
            if idx:
                fields = list(sample)
                for i in idx:
                    fields[i] = cand[i]
                sample = tuple(fields)
            yield sample

    # -- reading ----------------------------------------------------------------------------
    def _check_ready(self) -> None:
        if not self.use_vars:
            raise ValueError("dataset: call set_use_var([...]) with the program's data "
                             "variables first")

    def _read_file(self, path: str) -> List[tuple]:
        cmd = self.proto_desc.pipe_command
        with open(path, "rb") as f:
            if cmd.strip() == "cat":
                text = f.read().decode("utf-8")
            else:
                done = subprocess.run(cmd, shell=True, stdin=f, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, check=False)
                if done.returncode != 0:
                    raise RuntimeError(f"dataset: pipe command {cmd!r} failed on {path} (exit "
                                       f"{done.returncode}): {done.stderr.decode()[-500:]}")
                text = done.stdout.decode("utf-8")
        return [self._parse_line(line, path, i) for i, line in enumerate(text.splitlines())
                if line.strip()]

    def _parse_line(self, line: str, path: str, lineno: int) -> tuple:
        tokens = line.split()
        pos, fields = 0, []
        for var in self.use_vars:
            where = f"{path}:{lineno + 1}"
            if pos >= len(tokens):
                raise ValueError(f"dataset: {where}: the line ends before slot '{var.name}'")
            n = int(tokens[pos])
            vals = tokens[pos + 1:pos + 1 + n]
            if len(vals) != n:
                raise ValueError(f"dataset: {where}: slot '{var.name}' announces {n} values, "
                                 f"the line has {len(vals)}")
            pos += 1 + n
            dtype = np.dtype(to_numpy_dtype(var.dtype))
            arr = np.array(vals, dtype=np.float64 if dtype.kind == "f" else np.int64)
            arr = arr.astype(dtype)
            if var.lod_level:
                fields.append(arr.reshape(-1, 1) if len(var.shape) > 1 else arr)
            else:
                shape = [d for d in var.shape[1:]] if var.shape and var.shape[0] < 0 \
                    else list(var.shape)
                if all(d >= 0 for d in shape) and int(np.prod(shape)) != n:
                    raise ValueError(f"dataset: {where}: slot '{var.name}' has {n} values, the "
                                     f"variable expects {shape} per sample")
                fields.append(arr.reshape(shape) if all(d >= 0 for d in shape) else arr)
        if pos != len(tokens):
            raise ValueError(f"dataset: {path}:{lineno + 1}: {len(tokens) - pos} values left "
                             f"after the {len(self.use_vars)} slots of set_use_var")
        return tuple(fields)

    def _samples(self) -> Iterator[tuple]:
        for path in self.filelist:
            yield from self._read_file(path)

    def _run(self, exe: Any, program: Optional[Program], scope: Any,
             fetch_list: Optional[Sequence[Any]], fetch_info: Optional[Sequence[str]],
             print_period: int, fetch_handler: Any, train: bool) -> None:
        """``Executor.train_from_dataset`` / ``infer_from_dataset`` on this dataset."""
        run_from_dataset(exe, program, self, scope, fetch_list, fetch_info, print_period,
                         fetch_handler, train)

    def _loader(self, drop_last: bool = True) -> "DatasetLoader":
        """``DataLoader.from_dataset``'s iterable over this dataset's batches."""
        return DatasetLoader(self, drop_last)

    def _batches(self) -> Iterator[Dict[str, Any]]:
        self._check_ready()
        feeder = DataFeeder(self.use_vars, None, program=self.use_vars[0].block.program)
        size = self.proto_desc.batch_size
        buf: List[tuple] = []
        for sample in self._samples():
            buf.append(sample)
            if len(buf) == size:
                yield feeder.feed(buf)
                buf = []
        if buf and not self.drop_last:
            yield feeder.feed(buf)


class InMemoryDataset(DatasetBase):
    """Samples parsed once into memory (``load_into_memory``), shuffled in memory.

    Args:
        None: the constructor takes no arguments (configure it with the ``set_*`` methods).

    Returns:
        InMemoryDataset: an empty in-memory dataset; ``load_into_memory`` fills it.

    Raises:
        None: the constructor does not raise.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "part-0")
        >>> with open(path, "w") as f:      # MultiSlot text: per slot, a count then the values
        ...     for line in ["2 1.0 2.0 1 0", "2 3.0 4.0 1 1", "2 5.0 6.0 1 0"]:
        ...         print(line, file=f)
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 2], "float32")
        ...     y = fluid.data("y", [-1, 1], "int64")
        ...     total = fluid.layers.reduce_sum(x)
        >>> dataset = fluid.dataset.DatasetFactory().create_dataset("InMemoryDataset")
        >>> dataset.set_use_var([x, y])
        >>> dataset.set_batch_size(2)
        >>> dataset.set_filelist([path])
        >>> dataset.load_into_memory()
        >>> dataset.get_memory_data_size()
        3
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> [exe.run(main, feed=batch, fetch_list=[total])[0].item()
        ...  for batch in fluid.io.DataLoader.from_dataset(dataset, fluid.cpu_places(), drop_last=False)]
        [10.0, 11.0]
    """

    def __init__(self) -> None:
        super().__init__()
        self._memory: Optional[List[tuple]] = None
        self._shuffled = 0
        self._original: Optional[List[tuple]] = None    # the data before any slots_shuffle

    def load_into_memory(self) -> None:
        """Parse every file (``set_thread`` files in parallel).

        Args:
            None: this method takes no arguments.

        Returns:
            None.

        Raises:
            ValueError: ``set_use_var`` was not called, or a line is malformed (too few or too many
                values, a slot whose count does not fit its variable's shape, a non-numeric value).
            OSError: a file of ``set_filelist`` cannot be opened (e.g. FileNotFoundError).
            RuntimeError: the pipe command exits with a non-zero status.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> import os, tempfile
            >>> path = os.path.join(tempfile.mkdtemp(), "part-0")
            >>> # MultiSlot text: per slot, a count then the values
            >>> with open(path, "w") as f:
            ...     for line in ["2 1.0 2.0 1 0", "2 3.0 4.0 1 1", "2 5.0 6.0 1 0"]:
            ...         print(line, file=f)
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup):
            ...     x = fluid.data("x", [-1, 2], "float32")
            ...     y = fluid.data("y", [-1, 1], "int64")
            >>> dataset = fluid.dataset.DatasetFactory().create_dataset("InMemoryDataset")
            >>> dataset.set_use_var([x, y])
            >>> dataset.set_batch_size(2)
            >>> dataset.set_filelist([path])
            >>> dataset.load_into_memory()
            >>> dataset.get_memory_data_size()
            3
        """
        self._check_ready()
        with ThreadPoolExecutor(max_workers=self.thread_num) as pool:
            parts = list(pool.map(self._read_file, self.filelist))
        self._memory = [s for part in parts for s in part]
        self._original = None

    def preload_into_memory(self, thread_num: Optional[int] = None) -> None:
        """``load_into_memory`` with ``thread_num`` reader threads (synchronous here, so
        ``wait_preload_done`` returns at once).

        Args:
            thread_num (int, optional): reader threads (as ``set_thread``); None keeps the current
                setting. Default None.

        Returns:
            None.

        Raises:
            ValueError: as ``load_into_memory`` (no ``set_use_var``, malformed line).
            OSError: a file cannot be opened.
            RuntimeError: the pipe command fails.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> import os, tempfile
            >>> path = os.path.join(tempfile.mkdtemp(), "part-0")
            >>> # MultiSlot text: per slot, a count then the values
            >>> with open(path, "w") as f:
            ...     for line in ["2 1.0 2.0 1 0", "2 3.0 4.0 1 1", "2 5.0 6.0 1 0"]:
            ...         print(line, file=f)
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup):
            ...     x = fluid.data("x", [-1, 2], "float32")
            ...     y = fluid.data("y", [-1, 1], "int64")
            >>> dataset = fluid.dataset.DatasetFactory().create_dataset("InMemoryDataset")
            >>> dataset.set_use_var([x, y])
            >>> dataset.set_batch_size(2)
            >>> dataset.set_filelist([path])
            >>> dataset.preload_into_memory(thread_num=2)
            >>> dataset.wait_preload_done()
            >>> dataset.get_memory_data_size()
            3
        """
        if thread_num:
            self.set_thread(thread_num)
        self.load_into_memory()

    def wait_preload_done(self) -> None:
        """Loading is synchronous: nothing to wait for.

        Args:
            None: this method takes no arguments.

        Returns:
            None.

        Raises:
            None: this method does not raise.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> import os, tempfile
            >>> path = os.path.join(tempfile.mkdtemp(), "part-0")
            >>> # MultiSlot text: per slot, a count then the values
            >>> with open(path, "w") as f:
            ...     for line in ["2 1.0 2.0 1 0", "2 3.0 4.0 1 1", "2 5.0 6.0 1 0"]:
            ...         print(line, file=f)
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup):
            ...     x = fluid.data("x", [-1, 2], "float32")
            ...     y = fluid.data("y", [-1, 1], "int64")
            >>> dataset = fluid.dataset.DatasetFactory().create_dataset("InMemoryDataset")
            >>> dataset.set_use_var([x, y])
            >>> dataset.set_batch_size(2)
            >>> dataset.set_filelist([path])
            >>> dataset.preload_into_memory()
            >>> dataset.wait_preload_done()
            >>> dataset.get_memory_data_size()
            3
        """

    def local_shuffle(self, seed: Optional[int] = None) -> None:
        """Shuffle the samples in memory (``seed`` makes the order reproducible); RuntimeError
        before ``load_into_memory``.

        Args:
            seed (int, optional): seed of the shuffle; None draws a fresh order. Default None.

        Returns:
            None.

        Raises:
            RuntimeError: called before ``load_into_memory``.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> import os, tempfile
            >>> path = os.path.join(tempfile.mkdtemp(), "part-0")
            >>> # MultiSlot text: per slot, a count then the values
            >>> with open(path, "w") as f:
            ...     for line in ["2 1.0 2.0 1 0", "2 3.0 4.0 1 1", "2 5.0 6.0 1 0"]:
            ...         print(line, file=f)
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup):
            ...     x = fluid.data("x", [-1, 2], "float32")
            ...     y = fluid.data("y", [-1, 1], "int64")
            >>> dataset = fluid.dataset.DatasetFactory().create_dataset("InMemoryDataset")
            >>> dataset.set_use_var([x, y])
            >>> dataset.set_batch_size(2)
            >>> dataset.set_filelist([path])
            >>> dataset.load_into_memory()
            >>> dataset.local_shuffle(seed=1)
            >>> dataset.get_shuffle_data_size()
            3
        """
        self._require_memory("local_shuffle")
        random.Random(seed).shuffle(self._memory)     # type: ignore[arg-type]
        self._shuffled = len(self._memory or [])

    def global_shuffle(self, fleet: Any = None, thread_num: int = 12,
                       seed: Optional[int] = None) -> None:
        """One process holds all the data: the same as ``local_shuffle``.

        Args:
            fleet (optional): fluid's fleet handle; unused (one process). Default None.
            thread_num (int): fluid's shuffle threads; unused. Default 12.
            seed (int, optional): seed of the shuffle. Default None.

        Returns:
            None.

        Raises:
            RuntimeError: called before ``load_into_memory``.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> import os, tempfile
            >>> path = os.path.join(tempfile.mkdtemp(), "part-0")
            >>> # MultiSlot text: per slot, a count then the values
            >>> with open(path, "w") as f:
            ...     for line in ["2 1.0 2.0 1 0", "2 3.0 4.0 1 1", "2 5.0 6.0 1 0"]:
            ...         print(line, file=f)
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup):
            ...     x = fluid.data("x", [-1, 2], "float32")
            ...     y = fluid.data("y", [-1, 1], "int64")
            >>> dataset = fluid.dataset.DatasetFactory().create_dataset("InMemoryDataset")
            >>> dataset.set_use_var([x, y])
            >>> dataset.set_batch_size(2)
            >>> dataset.set_filelist([path])
            >>> dataset.load_into_memory()
            >>> dataset.global_shuffle(seed=1)       # one process: a local shuffle
            >>> dataset.get_shuffle_data_size()
            3
        """
        self.local_shuffle(seed)

    def release_memory(self) -> None:
        """Drop the samples held in memory (``load_into_memory`` reads the files again).

        Args:
            None: this method takes no arguments.

        Returns:
            None.

        Raises:
            None: this method does not raise.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> import os, tempfile
            >>> path = os.path.join(tempfile.mkdtemp(), "part-0")
            >>> # MultiSlot text: per slot, a count then the values
            >>> with open(path, "w") as f:
            ...     for line in ["2 1.0 2.0 1 0", "2 3.0 4.0 1 1", "2 5.0 6.0 1 0"]:
            ...         print(line, file=f)
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup):
            ...     x = fluid.data("x", [-1, 2], "float32")
            ...     y = fluid.data("y", [-1, 1], "int64")
            >>> dataset = fluid.dataset.DatasetFactory().create_dataset("InMemoryDataset")
            >>> dataset.set_use_var([x, y])
            >>> dataset.set_batch_size(2)
            >>> dataset.set_filelist([path])
            >>> dataset.load_into_memory()
            >>> dataset.release_memory()
            >>> dataset.get_memory_data_size()
            0
        """
        self._memory = None
        self._original = None
        self._shuffled = 0

    def _apply_slots_shuffle(self, idx: List[int]) -> None:
        self._require_memory("slots_shuffle")
        if self._original is None:
            self._original = list(self._memory or [])
        self._memory = list(self._slots_shuffled(self._original, idx))

    def get_memory_data_size(self, fleet: Any = None) -> int:
        """How many samples are in memory (0 before ``load_into_memory`` or after
        ``release_memory``).

        Args:
            fleet (optional): fluid's fleet handle; unused (one process). Default None.

        Returns:
            int: the number of samples in memory.

        Raises:
            None: this method does not raise.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> import os, tempfile
            >>> path = os.path.join(tempfile.mkdtemp(), "part-0")
            >>> # MultiSlot text: per slot, a count then the values
            >>> with open(path, "w") as f:
            ...     for line in ["2 1.0 2.0 1 0", "2 3.0 4.0 1 1", "2 5.0 6.0 1 0"]:
            ...         print(line, file=f)
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup):
            ...     x = fluid.data("x", [-1, 2], "float32")
            ...     y = fluid.data("y", [-1, 1], "int64")
            >>> dataset = fluid.dataset.DatasetFactory().create_dataset("InMemoryDataset")
            >>> dataset.set_use_var([x, y])
            >>> dataset.set_batch_size(2)
            >>> dataset.set_filelist([path])
            >>> dataset.load_into_memory()
            >>> dataset.get_memory_data_size()
            3
        """
        return len(self._memory or [])

    def get_shuffle_data_size(self, fleet: Any = None) -> int:
        """How many samples the last shuffle covered (0 before any shuffle).

        Args:
            fleet (optional): fluid's fleet handle; unused (one process). Default None.

        Returns:
            int: the number of samples the last shuffle covered.

        Raises:
            None: this method does not raise.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> import os, tempfile
            >>> path = os.path.join(tempfile.mkdtemp(), "part-0")
            >>> # MultiSlot text: per slot, a count then the values
            >>> with open(path, "w") as f:
            ...     for line in ["2 1.0 2.0 1 0", "2 3.0 4.0 1 1", "2 5.0 6.0 1 0"]:
            ...         print(line, file=f)
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup):
            ...     x = fluid.data("x", [-1, 2], "float32")
            ...     y = fluid.data("y", [-1, 1], "int64")
            >>> dataset = fluid.dataset.DatasetFactory().create_dataset("InMemoryDataset")
            >>> dataset.set_use_var([x, y])
            >>> dataset.set_batch_size(2)
            >>> dataset.set_filelist([path])
            >>> dataset.load_into_memory()
            >>> dataset.get_shuffle_data_size()
            0
            >>> dataset.local_shuffle(seed=2)
            >>> dataset.get_shuffle_data_size()
            3
        """
        return self._shuffled

    def set_queue_num(self, queue_num: int) -> None:
        """Accepted for compatibility (one in-process queue).

        Args:
            queue_num (int): fluid's number of shuffle channels; unused.

        Returns:
            None.

        Raises:
            None: this method does not raise.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> import os, tempfile
            >>> path = os.path.join(tempfile.mkdtemp(), "part-0")
            >>> # MultiSlot text: per slot, a count then the values
            >>> with open(path, "w") as f:
            ...     for line in ["2 1.0 2.0 1 0", "2 3.0 4.0 1 1", "2 5.0 6.0 1 0"]:
            ...         print(line, file=f)
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup):
            ...     x = fluid.data("x", [-1, 2], "float32")
            ...     y = fluid.data("y", [-1, 1], "int64")
            >>> dataset = fluid.dataset.DatasetFactory().create_dataset("InMemoryDataset")
            >>> dataset.set_use_var([x, y])
            >>> dataset.set_batch_size(2)
            >>> dataset.set_filelist([path])
            >>> dataset.set_queue_num(4)            # accepted; one in-process queue
        """

    def set_fleet_send_batch_size(self, fleet_send_batch_size: int = 1024) -> None:
        """Accepted for compatibility (no fleet).

        Args:
            fleet_send_batch_size (int): fluid's global-shuffle send size; unused. Default 1024.

        Returns:
            None.

        Raises:
            None: this method does not raise.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> import os, tempfile
            >>> path = os.path.join(tempfile.mkdtemp(), "part-0")
            >>> # MultiSlot text: per slot, a count then the values
            >>> with open(path, "w") as f:
            ...     for line in ["2 1.0 2.0 1 0", "2 3.0 4.0 1 1", "2 5.0 6.0 1 0"]:
            ...         print(line, file=f)
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup):
            ...     x = fluid.data("x", [-1, 2], "float32")
            ...     y = fluid.data("y", [-1, 1], "int64")
            >>> dataset = fluid.dataset.DatasetFactory().create_dataset("InMemoryDataset")
            >>> dataset.set_use_var([x, y])
            >>> dataset.set_batch_size(2)
            >>> dataset.set_filelist([path])
            >>> dataset.set_fleet_send_batch_size(1024)   # accepted; no fleet shuffle
        """

    def set_merge_by_lineid(self, merge_size: int = 2) -> None:
        """fluid merged the instances sharing a line id (parsed with ``parse_ins_id``) after a
        distributed ``global_shuffle``; fluidlite neither parses instance ids nor merges, so
        this warns (``UserWarning``) that the lines stay separate.

        Args:
            merge_size (int): fluid's line-id merge size. Default 2.

        Returns:
            None.

        Raises:
            None: this method only warns.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> import os, tempfile
            >>> path = os.path.join(tempfile.mkdtemp(), "part-0")
            >>> # MultiSlot text: per slot, a count then the values
            >>> with open(path, "w") as f:
            ...     for line in ["2 1.0 2.0 1 0", "2 3.0 4.0 1 1", "2 5.0 6.0 1 0"]:
            ...         print(line, file=f)
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup):
            ...     x = fluid.data("x", [-1, 2], "float32")
            ...     y = fluid.data("y", [-1, 1], "int64")
            >>> dataset = fluid.dataset.DatasetFactory().create_dataset("InMemoryDataset")
            >>> dataset.set_use_var([x, y])
            >>> dataset.set_batch_size(2)
            >>> dataset.set_filelist([path])
            >>> import warnings
            >>> with warnings.catch_warnings(record=True) as caught:
            ...     warnings.simplefilter("always")
            ...     dataset.set_merge_by_lineid(2)
            >>> "not merged" in str(caught[0].message)
            True
        """
        warnings.warn(f"InMemoryDataset.set_merge_by_lineid({merge_size}) has no effect in "
                      f"fluidlite: instances sharing a line id are not merged (fluid did this "
                      f"in a distributed global_shuffle, with parse_ins_id)", stacklevel=2)

    def _require_memory(self, what: str) -> None:
        if self._memory is None:
            raise RuntimeError(f"InMemoryDataset.{what}: call load_into_memory() first")

    def _samples(self) -> Iterator[tuple]:
        self._require_memory("reading")
        return iter(list(self._memory or []))


class QueueDataset(DatasetBase):
    """Samples streamed from the files on every pass (no shuffling, as in fluid).
    ``slots_shuffle`` applies to the stream: every pass replaces the slots as the samples go
    by (a fresh reservoir per pass).

    Args:
        None: the constructor takes no arguments (configure it with the ``set_*`` methods).

    Returns:
        QueueDataset: a streaming dataset that reads its files on every pass.

    Raises:
        None: the constructor does not raise.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "part-0")
        >>> with open(path, "w") as f:
        ...     for line in ["1 1.0", "1 2.0", "1 3.0"]:
        ...         print(line, file=f)
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup), fluid.unique_name.guard():
        ...     x = fluid.data("x", [-1, 1], "float32")
        ...     total = fluid.layers.reduce_sum(x)
        >>> dataset = fluid.dataset.DatasetFactory().create_dataset("QueueDataset")
        >>> dataset.set_use_var([x])
        >>> dataset.set_batch_size(3)
        >>> dataset.set_filelist([path])
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> exe.train_from_dataset(main, dataset, fetch_list=[total], print_period=1)    # doctest: +ELLIPSIS
        batch: 1, reduce_sum_0.tmp_0: 6.0
    """

    def __init__(self) -> None:
        super().__init__()
        self._stream_slots: Optional[List[int]] = None

    def _apply_slots_shuffle(self, idx: List[int]) -> None:
        self._stream_slots = idx

    def _samples(self) -> Iterator[tuple]:
        samples = super()._samples()
        if self._stream_slots is not None and self.fea_eval:
            return self._slots_shuffled(samples, self._stream_slots)
        return samples

    def local_shuffle(self) -> None:
        """Not supported by a streaming dataset (as in fluid): raises NotImplementedError saying
        to use InMemoryDataset.

        Args:
            None: this method takes no arguments.

        Returns:
            None: it never returns normally.

        Raises:
            NotImplementedError: always; shuffle an InMemoryDataset instead.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> dataset = fluid.dataset.DatasetFactory().create_dataset("QueueDataset")
            >>> try:
            ...     dataset.local_shuffle()
            ... except NotImplementedError as e:
            ...     print("use InMemoryDataset")
            use InMemoryDataset
        """
        raise NotImplementedError("QueueDataset does not support local shuffle, please use "
                                  "InMemoryDataset for local_shuffle")

    def global_shuffle(self, fleet: Any = None) -> None:
        """Not supported by a streaming dataset (as in fluid): raises NotImplementedError saying
        to use InMemoryDataset.

        Args:
            fleet (optional): fluid's fleet handle; unused. Default None.

        Returns:
            None: it never returns normally.

        Raises:
            NotImplementedError: always; shuffle an InMemoryDataset instead.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> dataset = fluid.dataset.DatasetFactory().create_dataset("QueueDataset")
            >>> try:
            ...     dataset.global_shuffle()
            ... except NotImplementedError as e:
            ...     print("use InMemoryDataset")
            use InMemoryDataset
        """
        raise NotImplementedError("QueueDataset does not support global shuffle, please use "
                                  "InMemoryDataset for global_shuffle")


class FileInstantDataset(QueueDataset):
    """fluid's FileInstantDataset: a streaming dataset (as QueueDataset here)."""


class DatasetLoader:
    """``DataLoader.from_dataset``: iterate ``[feed_dict]`` batches of a dataset, prefetched."""

    def __init__(self, dataset: DatasetBase, drop_last: bool = True) -> None:
        self.dataset, self.drop_last = dataset, drop_last

    def __call__(self) -> Iterator[List[Dict[str, Any]]]:
        return iter(self)

    def __iter__(self) -> Iterator[List[Dict[str, Any]]]:
        self.dataset.drop_last = self.drop_last
        worker = _Prefetcher(self.dataset._batches, max(2, self.dataset.thread_num))
        try:
            while True:
                item = worker.get()
                if item is _END:
                    return
                yield [item]
        finally:
            worker.stop()


def run_from_dataset(exe: Any, program: Optional[Program], dataset: DatasetBase, scope: Any,
                     fetch_list: Optional[Sequence[Any]], fetch_info: Optional[Sequence[str]],
                     print_period: int, fetch_handler: Any, train: bool) -> None:
    """The loop of ``Executor.train_from_dataset`` / ``infer_from_dataset``: one run per batch;
    every ``print_period`` batches writes ``batch: N, <info>: <values>`` lines to stdout as
    fluid's trainer did (``fetch_info`` names the fetched variables)."""
    if dataset is None:
        raise RuntimeError("dataset is needed and should be initialized")
    program = program if program is not None else default_main_program()
    program = getattr(program, "_program", program)
    if not train:
        program = program.clone(for_test=True)
    fetch_list = list(fetch_list or [])
    infos = list(fetch_info or [getattr(v, "name", str(v)) for v in fetch_list])
    if len(infos) != len(fetch_list):
        raise ValueError("fetch_info must name each variable of fetch_list")
    worker = _Prefetcher(dataset._batches, max(2, dataset.thread_num))
    n = 0
    try:
        while True:
            feed = worker.get()
            if feed is _END:
                break
            values = exe.run(program, feed=feed, fetch_list=fetch_list, scope=scope)
            n += 1
            if fetch_list and print_period and n % print_period == 0:
                _report(n, infos, values, fetch_handler)
    finally:
        worker.stop()


def _report(n: int, infos: List[str], values: List[Any], handler: Any) -> None:
    if handler is not None and callable(getattr(handler, "handler", None)):
        handler.handler(dict(zip(infos, values)))
        return
    parts = [f"{info}: {' '.join(str(v) for v in np.asarray(val).reshape(-1)[:10])}"
             for info, val in zip(infos, values)]
    sys.stdout.write(f"batch: {n}, " + ", ".join(parts) + "\n")   # fluid's trainer output

