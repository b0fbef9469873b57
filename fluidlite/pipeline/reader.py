"""fluid's data pipeline: ``DataLoader.from_generator``, ``PyReader`` and ``py_reader``'s reader.

A loader turns a user generator into feed dicts in a **background thread** (a forked worker
process with ``use_multiprocess=True``) that fills a bounded queue (``capacity`` batches), so
preparing the next batch overlaps the current step.

* **Iterable** (``iterable=True``): ``for data in loader(): exe.run(main, feed=data, ...)``;
  ``data`` is ``[feed_dict]`` (one dict per place, fluid's form) or, with ``return_list=True``,
  the list of arrays in ``feed_list`` order.
* **Non-iterable**: ``loader.start()``; then ``exe.run(main, fetch_list=...)`` without a feed
  takes the next batch (``core/readers.py``) and raises ``fluid.core.EOFException`` when the
  epoch is over; ``loader.reset()`` before the next ``start()``.

Failures: an exception raised by the user's generator is re-raised in the training loop (the
same exception object, so its traceback shows the generator's line); a sample whose shape or
dtype does not fit its variable raises ``ValueError`` naming the variable and the sample index.
The worker (thread or process) stops when the epoch ends, on ``reset()``, when the loop is
left early (``break``, an exception, Ctrl-C: the iterator's ``finally`` stops and joins it) and
when the loader is collected; it never outlives the loader. (From a worker process the
exception arrives pickled, with the worker's traceback attached as a note.)
"""
from __future__ import annotations

import logging
import multiprocessing
import queue
import signal
import threading
import traceback
import weakref
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence

import numpy as np

from ..core import mode as _mode
from ..core import readers as _readers
from ..core.dtypes import to_numpy_dtype
from ..core.ir import Variable
from ..core.readers import EOFException
from ..core.scope import LoDTensor
from .feeder import DataFeeder
from .decorators import batch as _batch
from .prefetch import _END, _Failure, _Prefetcher

__all__ = ["DataLoader", "PyReader", "GeneratorLoader", "EOFException"]

_log = logging.getLogger("fluidlite")


def _child(make: Callable[[], Iterable[Any]], conn: Any, stop: Any) -> None:
    """Body of a ``use_multiprocess`` worker process: batches, then the end or the error, sent
    through ``conn`` (pickled here, synchronously: an item or an exception that does not
    pickle becomes an error the parent can read)."""
    try:
        for item in make():
            if stop.is_set():
                return
            conn.send(("item", item))
        conn.send(("end", None))
    except BaseException as e:          # noqa: BLE001 -- handed to the parent
        text = traceback.format_exc()
        try:
            conn.send(("error", (e, text)))
        except Exception:               # an unpicklable exception: send its text
            conn.send(("error", (RuntimeError(f"{type(e).__name__}: {e}"), text)))
    finally:
        conn.close()


def _death(pid: int, exitcode: Optional[int]) -> str:
    """How worker ``pid`` ended, for the error message."""
    if exitcode is None:
        return f"DataLoader worker process (pid {pid}) stopped sending without exiting"
    if exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        hint = " (the kernel's out-of-memory killer sends SIGKILL)" if -exitcode == 9 else ""
        return f"DataLoader worker process (pid {pid}) was killed by {name}{hint}"
    return f"DataLoader worker process (pid {pid}) exited with code {exitcode}"


class _ProcessPrefetcher:
    """``_Prefetcher``'s interface over one worker **process** (``use_multiprocess=True``).

    Batches are prepared in a forked process and sent back through a pipe whose only write end
    is the worker's: a pump thread in the parent reads it into a bounded queue (``capacity``
    batches). When the worker dies -- killed by a signal, even in the middle of a batch, or
    exiting -- the read ends at once (end of file), and ``get`` raises a RuntimeError naming
    the worker and how it ended. The generator's own exception is re-raised in the parent
    with the worker's traceback attached as a note; ``stop()`` ends and joins the process."""

    def __init__(self, make: Callable[[], Iterable[Any]], capacity: int) -> None:
        ctx = multiprocessing.get_context("fork")
        reader, writer = ctx.Pipe(duplex=False)
        self._stop = ctx.Event()
        self._done = False
        self._proc = ctx.Process(target=_child, args=(make, writer, self._stop),
                                 daemon=True, name="fluidlite-reader-process")
        self._proc.start()
        writer.close()                  # the worker holds the only write end now
        self._items: "queue.Queue[Any]" = queue.Queue(maxsize=max(1, capacity))
        self._pump_stop = threading.Event()
        self._pump = threading.Thread(target=self._read, args=(reader,), daemon=True,
                                      name="fluidlite-reader-pump")
        self._pump.start()

    def _put(self, message: Any) -> bool:
        while not self._pump_stop.is_set():
            try:
                self._items.put(message, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def _read(self, reader: Any) -> None:
        try:
            while True:
                message = reader.recv()
                if not self._put(message) or message[0] != "item":
                    return
        except (EOFError, OSError):     # the worker is gone (maybe in mid-message)
            self._put(("died", None))
        except Exception as e:          # noqa: BLE001 -- a message that does not unpickle
            self._put(("error", (e, traceback.format_exc())))
        finally:
            reader.close()

    def get(self) -> Any:
        if self._done:
            return _END
        kind, payload = self._items.get()
        if kind == "item":
            return payload
        self._done = True
        self.stop()
        if kind == "died":
            raise RuntimeError(_death(self._proc.pid, self._proc.exitcode) + "; the batch it was "
                               "preparing is lost") from None
        if kind == "error":
            error, text = payload
            error.add_note("Traceback in the DataLoader worker process:\n" + text.rstrip())
            raise error
        return _END

    def stop(self) -> None:
        self._stop.set()
        self._pump_stop.set()           # the pump stops waiting for room in the queue
        self._proc.join(timeout=2.0)
        if self._proc.is_alive():       # blocked sending into the full pipe
            self._proc.terminate()
            self._proc.join()
        self._pump.join(timeout=2.0)

    @property
    def alive(self) -> bool:
        return self._proc.is_alive()


# -- conversion -----------------------------------------------------------------------------
class _Converter:
    """Samples / sample lists / batches -> feed dicts, checked against the feed variables."""

    def __init__(self, feed_list: Sequence[Variable]) -> None:
        self.vars = list(feed_list)
        self.names = [v.name for v in self.vars]
        self.feeder = DataFeeder(self.vars, None, program=self.vars[0].block.program)
        self._count = 0

    def _check_sample(self, sample: Any, index: int) -> None:
        if not isinstance(sample, (list, tuple)) or len(sample) != len(self.vars):
            n = len(sample) if isinstance(sample, (list, tuple)) else 1
            raise ValueError(f"DataLoader: sample {index} has {n} field(s), but feed_list has "
                             f"{len(self.vars)} variables {self.names}")
        for var, field in zip(self.vars, sample):
            if var.lod_level:
                continue
            dtype = np.dtype(to_numpy_dtype(var.dtype))
            # fluid 1.8's DataFeeder converts every numeric field with
            # np.array(data, dtype=var.dtype) (a float label 1.0 into int64 is 1); only
            # non-numeric fields are refused
            try:
                arr = np.asarray(field)
                ok = arr.dtype.kind in "biuf"
            except (TypeError, ValueError):
                ok = False
            if not ok:
                raise ValueError(f"DataLoader: sample {index}: the field for '{var.name}' has "
                                 f"dtype {np.asarray(field).dtype}, which does not convert to "
                                 f"the variable's {dtype.name}")
            want = [d for d in var.shape[1:]] if var.shape and var.shape[0] < 0 else None
            if want is not None and all(d >= 0 for d in want) and \
                    arr.size != int(np.prod(want)):
                raise ValueError(f"DataLoader: sample {index}: the field for '{var.name}' has "
                                 f"shape {list(arr.shape)}, but the variable expects "
                                 f"{want} per sample (shape {list(var.shape)})")

    def samples(self, batch: Sequence[Any]) -> Dict[str, LoDTensor]:
        for sample in batch:
            self._check_sample(sample, self._count)
            self._count += 1
        return self.feeder.feed(batch)

    def batch(self, fields: Any, index: int) -> Dict[str, Any]:
        if isinstance(fields, dict):
            fields = [fields[n] for n in self.names]
        if not isinstance(fields, (list, tuple)) or len(fields) != len(self.vars):
            raise ValueError(f"DataLoader: batch {index} must have one array per variable of "
                             f"feed_list {self.names}")
        out = {}
        for var, value in zip(self.vars, fields):
            if not isinstance(value, LoDTensor):
                value = np.asarray(value)
                want = np.dtype(to_numpy_dtype(var.dtype))
                if value.dtype != want:
                    if value.dtype.kind == want.kind or value.dtype.kind in "iub" and \
                            want.kind == "f":
                        value = value.astype(want)
                    else:
                        raise ValueError(f"DataLoader: batch {index}: the array for "
                                         f"'{var.name}' has dtype {value.dtype}, the variable "
                                         f"is {want.name}")
                shape = list(var.shape)
                if len(shape) != value.ndim or any(
                        w >= 0 and w != g for w, g in zip(shape, value.shape)):
                    raise ValueError(f"DataLoader: batch {index}: the array for '{var.name}' "
                                     f"has shape {list(value.shape)}, the variable expects "
                                     f"{shape} (-1 matches any size)")
            out[var.name] = value
        return out


def _count_places(places: Any) -> int:
    """How many places a data source feeds: ``len(places)`` of a list, else one."""
    return len(places) if isinstance(places, (list, tuple)) and places else 1


def _regular_array(value: Any, batch: int, field: int) -> Any:
    """A dygraph loader's field: a LoDTensor as it is, else a regular ndarray (fluid 1.8's
    ``_check_input_array``)."""
    if isinstance(value, LoDTensor):
        return value
    arr = np.asarray(value)
    if arr.dtype == object:
        raise TypeError(f"DataLoader: field {field} of batch {batch} does not convert to a "
                        f"regular ndarray (nested lists of different lengths?); use "
                        f"fluid.create_lod_tensor for variable-length data")
    return arr


def _stack_samples(samples: Any, batch: int) -> list:
    """A list of samples (tuples of fields) as one array per field, the samples stacked
    along a new first axis (fluid 1.8's dygraph ``set_sample_list_generator``)."""
    samples = list(samples)
    if not samples:
        raise ValueError(f"DataLoader: batch {batch} holds no samples")
    width = len(samples[0])
    for k, sample in enumerate(samples):
        if len(sample) != width:
            raise ValueError(f"DataLoader: sample {k} of batch {batch} has {len(sample)} "
                             f"fields, sample 0 has {width}")
    return [_regular_array([sample[j] for sample in samples], batch, j) for j in range(width)]


# -- the loader -----------------------------------------------------------------------------
class GeneratorLoader:
    """What ``DataLoader.from_generator`` returns (see the module docstring)."""

    def __init__(self, feed_list: Optional[Sequence[Variable]] = None, capacity: int = 64,
                 use_double_buffer: bool = True, iterable: bool = True,
                 return_list: bool = False, use_multiprocess: bool = False,
                 drop_last: bool = True) -> None:
        # fluid 1.8: made in dygraph mode, the loader is its DygraphGeneratorLoader: no
        # feed_list, iterable, each batch a list of dygraph tensors (one per field)
        self._dygraph = _mode.tracer is not None
        if self._dygraph and feed_list:
            raise ValueError("DataLoader.from_generator: in dygraph mode the loader yields "
                             "dygraph tensors, one per field of each batch; omit feed_list "
                             "(it names static variables)")
        if not feed_list and not self._dygraph:
            raise ValueError("DataLoader.from_generator: feed_list must name the variables the "
                             "loader feeds (the fluid.data variables of the program); only in "
                             "dygraph mode (inside fluid.dygraph.guard()) is it omitted")
        if not all(isinstance(v, Variable) for v in feed_list or []):
            raise TypeError("DataLoader.from_generator: feed_list must hold Variables")
        if capacity is None or int(capacity) < 1:
            raise ValueError(f"DataLoader.from_generator: capacity must be >= 1, got "
                             f"{capacity!r}")
        if self._dygraph and not (iterable and return_list):
            _log.warning("DataLoader.from_generator in dygraph mode is iterable and returns "
                         "lists of tensors (fluid 1.8: imperative mode supports only these); "
                         "iterable=%s, return_list=%s changed to True", iterable, return_list)
            iterable = return_list = True
        self.feed_list = list(feed_list or [])
        self.feed_names = [v.name for v in self.feed_list]
        self.capacity = int(capacity)
        self.iterable = bool(iterable)
        self.return_list = bool(return_list)
        self.drop_last = bool(drop_last)
        # use_multiprocess: batches are prepared in a forked worker process (not on Windows)
        self.use_multiprocess = bool(use_multiprocess) and \
            "fork" in multiprocessing.get_all_start_methods()
        self._program = self.feed_list[0].block.program if self.feed_list else None
        self._num_places = 1            # the places of the data source (set_*_generator)
        self._make: Optional[Callable[[], Iterator[Any]]] = None
        self._running: Optional[_Prefetcher] = None
        self._current: Optional["weakref.ReferenceType[Any]"] = None   # iter()'s epoch
        self._owned: Optional[Iterator[Any]] = None      # an epoch next() started itself

    # -- sources ------------------------------------------------------------------------------
    def set_sample_generator(self, reader: Callable[[], Iterable[Any]], batch_size: int,
                             drop_last: bool = True, places: Any = None) -> "GeneratorLoader":
        """``reader()`` yields one sample at a time (a tuple, one field per variable)."""
        if int(batch_size) < 1:
            raise ValueError(f"set_sample_generator: batch_size must be >= 1, got {batch_size}")
        return self.set_sample_list_generator(_batch(reader, int(batch_size), drop_last),
                                              places)

    def set_sample_list_generator(self, reader: Callable[[], Iterable[Any]],
                                  places: Any = None) -> "GeneratorLoader":
        """``reader()`` yields lists of samples (one list per batch)."""
        self._num_places = _count_places(places)

        def make() -> Iterator[Any]:
            if self._dygraph:
                for i, batch in enumerate(reader()):
                    yield _stack_samples(batch, i)
                return
            conv = _Converter(self.feed_list)
            for batch in reader():
                yield conv.samples(batch)
        self._make = make
        return self

    def set_batch_generator(self, reader: Callable[[], Iterable[Any]],
                            places: Any = None) -> "GeneratorLoader":
        """``reader()`` yields batches: one array (or LoDTensor) per variable."""
        self._num_places = _count_places(places)

        def make() -> Iterator[Any]:
            if self._dygraph:
                for i, fields in enumerate(reader()):
                    yield [_regular_array(f, i, j) for j, f in enumerate(fields)]
                return
            conv = _Converter(self.feed_list)
            for i, fields in enumerate(reader()):
                yield conv.batch(fields, i)
        self._make = make
        return self

    def _start_worker(self) -> _Prefetcher:
        if self._make is None:
            raise RuntimeError("DataLoader: set a data source first (set_sample_generator, "
                               "set_sample_list_generator or set_batch_generator)")
        if self.use_multiprocess:
            return _ProcessPrefetcher(self._make, self.capacity)   # type: ignore[return-value]
        return _Prefetcher(self._make, self.capacity)

    # -- iterable use ---------------------------------------------------------------------------
    def __call__(self) -> Iterator[Any]:
        return iter(self)

    def __iter__(self) -> Iterator[Any]:
        if not self.iterable:
            raise RuntimeError("DataLoader: this loader is not iterable (iterable=False): call "
                               "start(), run the program until fluid.core.EOFException, then "
                               "reset()")
        epoch = self._epoch()
        # fluid 1.8's next(loader) reads the epoch iter(loader) started: remember it weakly (a
        # ``for`` loop left early must still drop its iterator, which stops the worker) and
        # close one that next() itself started
        self._close_owned()
        self._current = weakref.ref(epoch)
        return epoch

    def __next__(self) -> Any:
        """The next batch of the current epoch (fluid 1.8's iterator protocol: ``iter(loader)``
        starts an epoch, ``next(loader)`` / ``loader.next()`` read it, ``StopIteration`` ends
        it). Without a current epoch, one is started (and held until it ends)."""
        current = getattr(self, "_current", None)
        epoch = current() if current is not None else None
        if epoch is None:
            epoch = iter(self)
            self._owned = epoch
        try:
            return next(epoch)
        except StopIteration:
            self._current = self._owned = None
            raise

    def next(self) -> Any:
        """fluid 1.8's Python-2 spelling of ``__next__``: the next batch of an iterable loader
        (``StopIteration`` at the end of the epoch).

        Args:
            None: this method takes no arguments.

        Returns:
            list: ``[feed_dict]`` (or, with ``return_list=True``, the arrays in ``feed_list``
                order).

        Raises:
            StopIteration: the epoch is over.
            RuntimeError: the loader is not iterable (``iterable=False``), no data source was set,
                or a worker process died.
            ValueError: a sample or batch does not fit its variable (the message names it).

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup):
            ...     x = fluid.data("x", [-1, 2])
            ...     s = fluid.layers.reduce_sum(x)
            ...     reader = fluid.io.PyReader(feed_list=[x], capacity=2, iterable=True)
            >>> reader.decorate_batch_generator(lambda: iter([[np.ones((1, 2), "float32")]] * 2),
            ...                                 places=fluid.CPUPlace())
            >>> it = iter(reader())
            >>> sorted(next(it)[0])              # one batch: a feed dict per place
            ['x']
        """
        return self.__next__()

    def _close_owned(self) -> None:
        owned, self._owned = getattr(self, "_owned", None), None
        if owned is not None:
            owned.close()                # runs the epoch's finally: its worker stops

    def _epoch(self) -> Iterator[Any]:
        worker = self._start_worker()
        group: List[Dict[str, Any]] = []    # feed dicts of several places (fluid 1.8)
        try:
            while True:
                item = worker.get()
                if item is _END:
                    if group and not self.drop_last:
                        yield group         # fewer dicts than places: inference runs on them
                    return
                if self._num_places > 1 and not (self._dygraph or self.return_list):
                    # one batch per place and step; a last incomplete step is dropped with
                    # drop_last, as fluid 1.8's multi-device reader
                    group.append(item)
                    if len(group) == self._num_places:
                        yield group
                        group = []
                elif self._dygraph:
                    to_variable = _mode.implementation("to_variable")
                    yield [to_variable(a) for a in item]
                elif self.return_list:
                    yield [np.asarray(item[n]) for n in self.feed_names]
                else:
                    yield [item]
        finally:
            worker.stop()

    # -- non-iterable use ---------------------------------------------------------------------
    def start(self) -> None:
        """Start prefetching; ``Executor.run`` on the program then takes one batch per run.

        Args:
            None: this method takes no arguments.

        Returns:
            None.

        Raises:
            RuntimeError: the loader is iterable, it is already started (call ``reset`` first), or
                no data source was set.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup):
            ...     x = fluid.data("x", [-1, 2])
            ...     s = fluid.layers.reduce_sum(x)
            ...     reader = fluid.io.PyReader(feed_list=[x], capacity=4, iterable=False)
            >>> reader.decorate_batch_generator(lambda: iter([[np.ones((1, 2), "float32")]] * 3))
            >>> exe = fluid.Executor(fluid.CPUPlace())
            >>> reader.start()                   # non-iterable: the program reads the queue itself
            >>> sums = []
            >>> try:
            ...     while True:
            ...         sums.append(exe.run(main, fetch_list=[s])[0].item())
            ... except fluid.core.EOFException:
            ...     reader.reset()               # ready for the next pass
            >>> sums
            [2.0, 2.0, 2.0]
        """
        if self.iterable:
            raise RuntimeError("DataLoader: start() is for non-iterable loaders "
                               "(iterable=False); iterate over an iterable loader instead")
        if self._running is not None:
            raise RuntimeError("DataLoader: already started; call reset() after "
                               "fluid.core.EOFException before starting again")
        self._running = self._start_worker()
        _readers.register(self._program, self)

    def reset(self) -> None:
        """Stop the worker (if any) and forget the epoch; ``start()`` may follow.

        Args:
            None: this method takes no arguments.

        Returns:
            None.

        Raises:
            None: this method does not raise.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup):
            ...     x = fluid.data("x", [-1, 2])
            ...     s = fluid.layers.reduce_sum(x)
            ...     reader = fluid.io.PyReader(feed_list=[x], capacity=2, iterable=False)
            >>> reader.decorate_batch_generator(lambda: iter([[np.ones((1, 2), "float32")]] * 2))
            >>> exe = fluid.Executor(fluid.CPUPlace())
            >>> for epoch in range(2):
            ...     reader.start()
            ...     n = 0
            ...     try:
            ...         while True:
            ...             _ = exe.run(main, fetch_list=[s])
            ...             n += 1
            ...     except fluid.core.EOFException:
            ...         reader.reset()
            ...     print(epoch, n)
            0 2
            1 2
        """
        _readers.unregister(self)
        running, self._running = self._running, None
        if running is not None:
            running.stop()

    def next_feed(self) -> Dict[str, Any]:
        """The next batch for ``Executor.run`` (``EOFException`` at the end of the epoch)."""
        if self._running is None:
            raise EOFException("DataLoader: not started (call start() before running)")
        try:
            item = self._running.get()
        except KeyboardInterrupt:
            self.reset()                     # Ctrl-C: no worker outlives the interrupted loop
            raise
        if item is _END:
            raise EOFException("There is no next data: the reader's epoch is over; call "
                               "reset() and start() for another epoch")
        return item

    def __del__(self) -> None:
        self._close_owned()
        running = getattr(self, "_running", None)
        if running is not None:
            running.stop()


class DataLoader:
    """``fluid.io.DataLoader``.

    Args:
        None: DataLoader is a namespace; build loaders with its static methods ``from_generator``
            and ``from_dataset``.

    Returns:
        DataLoader: an instance with nothing of its own (use the static methods).

    Raises:
        None: the constructor does not raise.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 1])
        ...     s = fluid.layers.reduce_sum(x)
        ...     loader = fluid.io.DataLoader.from_generator(feed_list=[x], capacity=2)
        >>> def samples():
        ...     for i in range(4):
        ...         yield [np.array([i], "float32")]
        >>> _ = loader.set_sample_list_generator(fluid.io.batch(samples, 2), places=fluid.CPUPlace())
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> [exe.run(main, feed=data, fetch_list=[s])[0].item() for data in loader()]
        [1.0, 5.0]
    """

    @staticmethod
    def from_generator(feed_list: Optional[Sequence[Variable]] = None, capacity: int = 64,
                       use_double_buffer: bool = True, iterable: bool = True,
                       return_list: bool = False, use_multiprocess: bool = False,
                       drop_last: bool = True) -> GeneratorLoader:
        """A loader fed by a Python generator (see the module docstring).

        Args:
            feed_list (list of Variable | None): the variables each batch feeds, in order.
                In dygraph mode (inside ``fluid.dygraph.guard()``) omitted: the loader then
                yields each batch as a list of dygraph tensors, one per field (fluid 1.8's
                DygraphGeneratorLoader; always iterable and ``return_list``).
            capacity (int, default 64): batches buffered ahead by the background thread.
            use_double_buffer (bool, default True): accepted (batches are prepared ahead anyway).
            iterable (bool, default True): iterate over the loader (else the program reads it
                after ``start()``).
            return_list (bool, default False): yield lists instead of feed dicts (dygraph).
            use_multiprocess (bool, default False): prepare batches in a child process.
            drop_last (bool, default True): with several places (a list of places given to
                the ``set_*_generator`` call), each step holds one batch per place; drop a
                last step with fewer batches than places (else it is yielded as a shorter
                list, which a data-parallel inference program runs on that many places).
        Returns:
            GeneratorLoader: set its data with ``set_sample_generator``,
            ``set_sample_list_generator`` or ``set_batch_generator``.

        Raises:
            ValueError: ``feed_list`` is empty or None outside dygraph mode (given in dygraph
                mode), or ``capacity`` is below 1 (or a non-integer string).
            TypeError: an entry of ``feed_list`` is not a Variable, or ``capacity`` is not a number.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup):
            ...     x = fluid.data("x", [-1, 2])
            ...     s = fluid.layers.reduce_sum(x)
            ...     loader = fluid.io.DataLoader.from_generator(feed_list=[x], capacity=4)
            >>> def batches():
            ...     for i in range(3):
            ...         yield [np.full((2, 2), i, "float32")]
            >>> _ = loader.set_batch_generator(batches, places=fluid.CPUPlace())
            >>> exe = fluid.Executor(fluid.CPUPlace())
            >>> [exe.run(main, feed=data, fetch_list=[s])[0].item() for data in loader()]
            [0.0, 4.0, 8.0]
        """
        return GeneratorLoader(feed_list, capacity, use_double_buffer, iterable, return_list,
                               use_multiprocess, drop_last)

    @staticmethod
    def from_dataset(dataset: Any, places: Any = None, drop_last: bool = True) -> Any:
        """An iterable over the batches of a ``fluid.dataset`` dataset (after
        ``load_into_memory`` for an InMemoryDataset).

        Args:
            dataset (DatasetBase): a ``fluid.dataset`` dataset (``load_into_memory`` first for an
                InMemoryDataset).
            places (list | None): accepted for fluid's signature.
            drop_last (bool, default True): drop a last batch smaller than the batch size.
        Returns:
            iterable: feed dicts, one per batch.

        Raises:
            AttributeError: ``dataset`` is not a ``fluid.dataset`` dataset (it has no loader).

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> import os, tempfile
            >>> path = os.path.join(tempfile.mkdtemp(), "part-0")
            >>> with open(path, "w") as f:
            ...     for line in ["1 1.0", "1 2.0", "1 3.0", "1 4.0"]:
            ...         print(line, file=f)
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup):
            ...     x = fluid.data("x", [-1, 1], "float32")
            ...     total = fluid.layers.reduce_sum(x)
            >>> dataset = fluid.dataset.DatasetFactory().create_dataset("InMemoryDataset")
            >>> dataset.set_use_var([x])
            >>> dataset.set_batch_size(2)
            >>> dataset.set_filelist([path])
            >>> dataset.load_into_memory()
            >>> loader = fluid.io.DataLoader.from_dataset(dataset, fluid.cpu_places(1))
            >>> exe = fluid.Executor(fluid.CPUPlace())
            >>> [exe.run(main, feed=batch, fetch_list=[total])[0].item() for batch in loader]
            [3.0, 7.0]
        """
        return dataset._loader(drop_last)


class PyReader(GeneratorLoader):
    """``fluid.io.PyReader``: the older spelling of ``DataLoader.from_generator``.

    Args:
        feed_list (list of Variable | None): the variables each batch feeds.
        capacity (int, default 64): batches buffered ahead.
        use_double_buffer (bool, default True): accepted (batches are prepared ahead anyway).
        iterable (bool, default True): iterate over the reader (else the program reads it after
            ``start()`` until ``EOFException``).
        return_list (bool, default False): yield lists instead of feed dicts (dygraph).

    Returns:
        PyReader: the reader; give it data with one of the ``decorate_*`` methods.

    Raises:
        ValueError: ``feed_list`` is empty or None, or ``capacity`` is below 1.
        TypeError: an entry of ``feed_list`` is not a Variable.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 2])
        ...     s = fluid.layers.reduce_sum(x)
        ...     reader = fluid.io.PyReader(feed_list=[x], capacity=4, iterable=True)
        >>> def batches():
        ...     for i in range(3):
        ...         yield [np.full((2, 2), i, "float32")]
        >>> reader.decorate_batch_generator(batches, places=fluid.CPUPlace())
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> [exe.run(main, feed=data, fetch_list=[s])[0].item() for data in reader()]
        [0.0, 4.0, 8.0]
    """

    def __init__(self, feed_list: Optional[Sequence[Variable]] = None, capacity: int = 64,
                 use_double_buffer: bool = True, iterable: bool = True,
                 return_list: bool = False) -> None:
        super().__init__(feed_list, capacity, use_double_buffer, iterable, return_list)

    def decorate_sample_generator(self, sample_generator: Callable[[], Iterable[Any]],
                                  batch_size: int, drop_last: bool = True,
                                  places: Any = None) -> None:
        """Read samples from ``sample_generator()`` (a tuple or list per sample, one value per
        feed variable) and group them into batches of ``batch_size`` (``drop_last``: drop a short
        last batch).

        Args:
            sample_generator (callable): returns an iterable of samples, each a tuple/list with one
                value per feed variable.
            batch_size (int): samples per batch, >= 1.
            drop_last (bool): drop a last batch smaller than ``batch_size``. Default True.
            places (list | None): fluid's places; accepted (everything runs on the CPU). Default
                None.

        Returns:
            None.

        Raises:
            ValueError: ``batch_size`` is below 1 (a sample that does not fit its variable raises
                ValueError naming it while reading).

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup):
            ...     x = fluid.data("x", [-1, 2])
            ...     s = fluid.layers.reduce_sum(x)
            ...     reader = fluid.io.PyReader(feed_list=[x], capacity=4, iterable=True)
            >>> def samples():
            ...     for i in range(4):
            ...         yield [np.full([2], i, "float32")]
            >>> reader.decorate_sample_generator(samples, batch_size=2, places=fluid.CPUPlace())
            >>> exe = fluid.Executor(fluid.CPUPlace())
            >>> [exe.run(main, feed=d, fetch_list=[s])[0].item() for d in reader()]
            [2.0, 10.0]
        """
        self.set_sample_generator(sample_generator, batch_size, drop_last, places)

    def decorate_sample_list_generator(self, reader: Callable[[], Iterable[Any]],
                                       places: Any = None) -> None:
        """Read batches from ``reader()`` yielding lists of samples (e.g. ``fluid.io.batch(...)``),
        each sample a tuple with one value per feed variable.

        Args:
            reader (callable): returns an iterable of batches, each a list of samples (tuples with
                one value per feed variable).
            places (list | None): fluid's places; accepted (everything runs on the CPU). Default
                None.

        Returns:
            None.

        Raises:
            None: this method does not raise; a sample that does not fit its variable raises
                ValueError while reading.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup):
            ...     x = fluid.data("x", [-1, 2])
            ...     s = fluid.layers.reduce_sum(x)
            ...     reader = fluid.io.PyReader(feed_list=[x], capacity=4, iterable=True)
            >>> def samples():
            ...     for i in range(4):
            ...         yield (np.full([2], i, "float32"),)
            >>> reader.decorate_sample_list_generator(fluid.io.batch(samples, 2), places=fluid.CPUPlace())
            >>> exe = fluid.Executor(fluid.CPUPlace())
            >>> [exe.run(main, feed=d, fetch_list=[s])[0].item() for d in reader()]
            [2.0, 10.0]
        """
        self.set_sample_list_generator(reader, places)

    def decorate_batch_generator(self, reader: Callable[[], Iterable[Any]],
                                 places: Any = None) -> None:
        """Read whole batches from ``reader()``: each item is a list (one array per feed
        variable) or a feed dict; ``places`` is required for an iterable reader.

        Args:
            reader (callable): returns an iterable of batches, each a list/tuple with one array (or
                LoDTensor) per feed variable, or a dict by variable name.
            places (list | None): fluid's places; fluid required them for an iterable reader,
                fluidlite accepts None (everything runs on the CPU). Default None.

        Returns:
            None.

        Raises:
            None: this method does not raise; a batch whose arrays do not fit the variables raises
                ValueError while reading.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup):
            ...     x = fluid.data("x", [-1, 2])
            ...     s = fluid.layers.reduce_sum(x)
            ...     reader = fluid.io.PyReader(feed_list=[x], capacity=4, iterable=True)
            >>> reader.decorate_batch_generator(lambda: iter([[np.ones((3, 2), "float32")]]),
            ...                                 places=fluid.CPUPlace())
            >>> exe = fluid.Executor(fluid.CPUPlace())
            >>> [exe.run(main, feed=d, fetch_list=[s])[0].item() for d in reader()]
            [6.0]
        """
        self.set_batch_generator(reader, places)

    # py_reader's spellings
    decorate_paddle_reader = decorate_sample_list_generator
    decorate_tensor_provider = decorate_batch_generator
