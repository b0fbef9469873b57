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

**Line prefixes** (``InMemoryDataset``, fluid 1.8's ``MultiSlotInMemoryDataFeed``): with
``set_parse_ins_id(True)`` / ``set_parse_content(True)`` / ``set_parse_logkey(True)`` each line
starts, in this order, with ``1 <ins_id>``, ``1 <content>``, ``1 <logkey>`` before the slots;
the parsed values are kept on each loaded sample (a ``Record``: ``ins_id``, ``content``, and from
the hexadecimal log key ``search_id`` = chars 16..31, ``cmatch`` = chars 11..13, ``rank`` =
chars 14..15).

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
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from ..core.dtypes import to_numpy_dtype
from ..core.ir import Program, Variable, default_main_program
from .feed_desc import DataFeedDesc
from .feeder import DataFeeder
from .prefetch import _END, _Prefetcher

__all__ = ["DatasetFactory", "DatasetBase", "InMemoryDataset", "QueueDataset",
           "FileInstantDataset", "DatasetLoader", "Record"]

_log = logging.getLogger("fluidlite")


class Record(tuple):
    """One parsed line: the tuple of its slot arrays (in ``set_use_var`` order), plus what the
    line prefixes gave (``ins_id``, ``content``: str or None; ``search_id``, ``cmatch``,
    ``rank``: int or None, from the log key)."""

    ins_id: Optional[str] = None
    content: Optional[str] = None
    search_id: Optional[int] = None
    cmatch: Optional[int] = None
    rank: Optional[int] = None


def _logkey_fields(log_key: str, where: str) -> Dict[str, int]:
    """fluid 1.8's GetMsgFromLogKey: hexadecimal search id (chars 16..31), cmatch (11..13) and
    rank (14..15) of a log key."""
    try:
        if len(log_key) < 32:
            raise ValueError
        return {"search_id": int(log_key[16:32], 16), "cmatch": int(log_key[11:14], 16),
                "rank": int(log_key[14:16], 16)}
    except ValueError:
        raise ValueError(f"dataset: {where}: log key {log_key!r} must be at least 32 "
                         f"hexadecimal characters (cmatch at 11..13, rank at 14..15, search id "
                         f"at 16..31)") from None


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
        # line prefixes before the slots (InMemoryDataset's set_parse_*), in this order
        self._prefixes: Dict[str, bool] = {"ins_id": False, "content": False, "logkey": False}

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
                shuffled = type(sample)(fields)
                if isinstance(sample, Record):      # the line prefixes stay the sample's own
                    shuffled.__dict__.update(sample.__dict__)
                sample = shuffled
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

    def _parse_prefixes(self, tokens: List[str], where: str) -> Tuple[int, Dict[str, Any]]:
        """The ``1 <value>`` prefixes enabled by ``set_parse_*``: (tokens used, the fields)."""
        pos, meta = 0, {}
        for key in ("ins_id", "content", "logkey"):
            if not self._prefixes[key]:
                continue
            if pos + 1 >= len(tokens) or tokens[pos] != "1":
                got = tokens[pos] if pos < len(tokens) else "the end of the line"
                raise ValueError(f"dataset: {where}: set_parse_{key}(True) needs the line to "
                                 f"continue with '1 <{key}>' but found {got!r}")
            value = tokens[pos + 1]
            pos += 2
            if key == "logkey":
                meta.update(_logkey_fields(value, where))
            else:
                meta[key] = value
        return pos, meta

    def _parse_line(self, line: str, path: str, lineno: int) -> tuple:
        tokens = line.split()
        pos, meta = self._parse_prefixes(tokens, f"{path}:{lineno + 1}")
        fields: List[Any] = []
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
        if not meta:
            return tuple(fields)
        record = Record(fields)
        for key, value in meta.items():
            setattr(record, key, value)
        return record

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
        # page views (fluid 1.8's PvInstance): preprocess_instance groups the samples into
        # them, postprocess_instance turns them back into samples
        self._merge_by_sid = True
        self._enable_pv_merge = False
        self._pv: Optional[List[List[tuple]]] = None

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
        self._pv = None

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

    def _set_prefix(self, key: str, value: Any) -> None:
        if not isinstance(value, bool):
            raise TypeError(f"InMemoryDataset.set_parse_{key}: parse_{key} must be a bool, but "
                            f"received {type(value).__name__}")
        self._prefixes[key] = value

    def set_parse_ins_id(self, parse_ins_id: bool) -> None:
        """Each line starts with ``1 <ins_id>`` (an instance id token) before the slots; the
        id is kept on the loaded sample (``Record.ins_id``). Applies to the next
        ``load_into_memory``.

        Args:
            parse_ins_id (bool): parse the instance id or not.

        Returns:
            None.

        Raises:
            TypeError: ``parse_ins_id`` is not a bool.

        Example:
            >>> import fluidlite as fluid
            >>> import os, tempfile
            >>> path = os.path.join(tempfile.mkdtemp(), "part-0")
            >>> with open(path, "w") as f:
            ...     print("1 ins_a 2 1.0 2.0", file=f)
            >>> with fluid.program_guard(fluid.Program(), fluid.Program()):
            ...     x = fluid.data("x", [-1, 2], "float32")
            >>> dataset = fluid.DatasetFactory().create_dataset("InMemoryDataset")
            >>> dataset.set_use_var([x])
            >>> dataset.set_filelist([path])
            >>> dataset.set_parse_ins_id(True)
            >>> dataset.load_into_memory()
            >>> dataset.get_memory_data_size()
            1
        """
        self._set_prefix("ins_id", parse_ins_id)

    def set_parse_content(self, parse_content: bool) -> None:
        """Each line has ``1 <content>`` (after the instance id, when parsed) before the slots;
        the token is kept on the loaded sample (``Record.content``).

        Args:
            parse_content (bool): parse the content token or not.

        Returns:
            None.

        Raises:
            TypeError: ``parse_content`` is not a bool.

        Example:
            >>> import fluidlite as fluid
            >>> dataset = fluid.DatasetFactory().create_dataset("InMemoryDataset")
            >>> dataset.set_parse_content(True)
        """
        self._set_prefix("content", parse_content)

    def set_parse_logkey(self, parse_logkey: bool) -> None:
        """Each line has ``1 <logkey>`` (after the instance id and content, when parsed) before
        the slots: a hexadecimal log key giving the sample's ``search_id`` (chars 16..31),
        ``cmatch`` (11..13) and ``rank`` (14..15), kept on the loaded sample (``Record``).

        Args:
            parse_logkey (bool): parse the log key or not.

        Returns:
            None.

        Raises:
            TypeError: ``parse_logkey`` is not a bool.

        Example:
            >>> import fluidlite as fluid
            >>> dataset = fluid.DatasetFactory().create_dataset("InMemoryDataset")
            >>> dataset.set_parse_logkey(True)
        """
        self._set_prefix("logkey", parse_logkey)

    def set_merge_by_sid(self, merge_by_sid: bool) -> None:
        """Whether ``preprocess_instance`` (with ``set_enable_pv_merge(True)``) merges the
        samples of one search id (from the log key, ``set_parse_logkey(True)``) into one page
        view; False: every sample is its own page view. Default True, as in fluid 1.8.

        Args:
            merge_by_sid (bool): merge by search id or not.

        Returns:
            None.

        Raises:
            TypeError: ``merge_by_sid`` is not a bool.

        Example:
            >>> import fluidlite as fluid
            >>> dataset = fluid.DatasetFactory().create_dataset("InMemoryDataset")
            >>> dataset.set_merge_by_sid(True)
        """
        if not isinstance(merge_by_sid, bool):
            raise TypeError(f"InMemoryDataset.set_merge_by_sid: merge_by_sid must be a bool, "
                            f"but received {type(merge_by_sid).__name__}")
        self._merge_by_sid = merge_by_sid

    def set_enable_pv_merge(self, enable_pv_merge: bool) -> None:
        """Whether ``preprocess_instance`` groups the samples into page views (see
        ``set_merge_by_sid``) and shuffles whole page views; False: it shuffles samples.
        Default False, as in fluid 1.8.

        Args:
            enable_pv_merge (bool): merge page views or not.

        Returns:
            None.

        Raises:
            TypeError: ``enable_pv_merge`` is not a bool.

        Example:
            >>> import fluidlite as fluid
            >>> dataset = fluid.DatasetFactory().create_dataset("InMemoryDataset")
            >>> dataset.set_enable_pv_merge(True)
        """
        if not isinstance(enable_pv_merge, bool):
            raise TypeError(f"InMemoryDataset.set_enable_pv_merge: enable_pv_merge must be a "
                            f"bool, but received {type(enable_pv_merge).__name__}")
        self._enable_pv_merge = enable_pv_merge

    def preprocess_instance(self, seed: Optional[int] = None) -> None:
        """fluid 1.8's ``PreprocessInstance``: with ``set_enable_pv_merge(True)`` the loaded
        samples are sorted by search id, grouped into page views (one per search id with
        ``set_merge_by_sid(True)``, else one per sample) and the page views shuffled; they stay
        page views (``get_pv_data_size``) until ``postprocess_instance``. Without PV merge it is
        ``local_shuffle``.

        Args:
            seed (int, optional): seed of the shuffle; None draws a fresh order. Default None.

        Returns:
            None.

        Raises:
            RuntimeError: called before ``load_into_memory``.
            ValueError: merging by search id, but a sample has none (parse the log key with
                ``set_parse_logkey(True)`` before ``load_into_memory``).

        Example:
            >>> import fluidlite as fluid
            >>> import os, tempfile
            >>> path = os.path.join(tempfile.mkdtemp(), "part-0")
            >>> key = lambda sid: "0" * 16 + "%016x" % sid
            >>> with open(path, "w") as f:
            ...     for sid, v in [(7, 1.0), (9, 2.0), (7, 3.0)]:
            ...         print("1", key(sid), "1", v, file=f)
            >>> with fluid.program_guard(fluid.Program(), fluid.Program()):
            ...     x = fluid.data("x", [-1, 1], "float32")
            >>> dataset = fluid.DatasetFactory().create_dataset("InMemoryDataset")
            >>> dataset.set_use_var([x])
            >>> dataset.set_filelist([path])
            >>> dataset.set_parse_logkey(True)
            >>> dataset.load_into_memory()
            >>> dataset.set_enable_pv_merge(True)
            >>> dataset.preprocess_instance(seed=0)
            >>> dataset.get_pv_data_size()               # search ids 7 and 9
            2
            >>> dataset.postprocess_instance()
            >>> dataset.get_memory_data_size()
            3
        """
        self._require_memory("preprocess_instance")
        if not self._enable_pv_merge:
            self.local_shuffle(seed)
            return
        samples = list(self._memory or [])
        if self._merge_by_sid and any(getattr(r, "search_id", None) is None for r in samples):
            raise ValueError("InMemoryDataset.preprocess_instance: merging page views by search "
                             "id (set_merge_by_sid(True)) needs each sample's search id: call "
                             "set_parse_logkey(True) before load_into_memory()")
        samples.sort(key=lambda r: getattr(r, "search_id", None) or 0)
        pvs: List[List[tuple]] = []
        for r in samples:
            if self._merge_by_sid and pvs and pvs[-1][0].search_id == r.search_id:
                pvs[-1].append(r)
            else:
                pvs.append([r])
        random.Random(seed).shuffle(pvs)
        self._pv, self._memory = pvs, []

    def postprocess_instance(self) -> None:
        """fluid 1.8's ``PostprocessInstance``: the page views of ``preprocess_instance`` back
        into samples, in page-view order (a page view's samples stay together).

        Returns:
            None.

        Raises:
            RuntimeError: called before ``load_into_memory``.

        Example:
            >>> import fluidlite as fluid
            >>> dataset = fluid.DatasetFactory().create_dataset("InMemoryDataset")
            >>> dataset.get_pv_data_size()
            0
        """
        self._require_memory("postprocess_instance")
        if self._pv is not None:
            self._memory = [r for pv in self._pv for r in pv]
            self._pv = None

    def get_pv_data_size(self) -> int:
        """How many page views ``preprocess_instance`` holds (0 when none).

        Returns:
            int: the number of page views.

        Example:
            >>> import fluidlite as fluid
            >>> dataset = fluid.DatasetFactory().create_dataset("InMemoryDataset")
            >>> dataset.get_pv_data_size()
            0
        """
        return len(self._pv or [])

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
        if self._pv is not None:
            raise RuntimeError("InMemoryDataset: preprocess_instance() holds the samples as "
                               "page views; call postprocess_instance() to read them as "
                               "samples (fluid's feed of page-view batches, PaddleBox's join "
                               "phase, is not provided)")
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

