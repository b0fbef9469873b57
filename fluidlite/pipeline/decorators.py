"""The reader decorators of ``fluid.io`` / ``paddle.reader``.

A *reader* is a zero-argument callable returning an iterable of samples. Each decorator takes
readers and returns a new reader; nothing is read until the returned reader is called.
``buffered``, ``xmap_readers`` and ``multiprocess_reader`` read in background threads through
bounded queues; their threads end with the epoch, and an exception raised by a source reader is
re-raised to the consumer.
"""
from __future__ import annotations

import itertools
import queue
import random
import threading
from typing import Any, Callable, Iterable, Iterator, List, Optional, Sequence

import numpy as np

__all__ = ["batch", "shuffle", "buffered", "chain", "compose", "map_readers", "xmap_readers",
           "firstn", "cache", "multiprocess_reader", "ComposeNotAligned"]

Reader = Callable[[], Iterable[Any]]
_END = object()


class ComposeNotAligned(ValueError):
    """``compose(check_alignment=True)`` readers yielded different numbers of samples.

    Args:
        *args: the message, as for any ValueError.

    Returns:
        ComposeNotAligned: the exception (a ValueError subclass) a composed reader raises.

    Raises:
        None: constructing the exception does not raise.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> r = fluid.io.compose(lambda: iter([1, 2]), lambda: iter([3]))
        >>> try:
        ...     list(r())
        ... except fluid.io.ComposeNotAligned as e:
        ...     print("not aligned")
        not aligned
    """


def batch(reader: Reader, batch_size: int, drop_last: bool = False) -> Reader:
    """Lists of ``batch_size`` samples (the last shorter one dropped when ``drop_last``).

    Args:
        reader (callable): a sample reader (a function returning an iterator).
        batch_size (int): samples per batch.
        drop_last (bool, default False): drop a last batch smaller than ``batch_size``.
    Returns:
        callable: a reader of lists of samples.

    Raises:
        ValueError: ``batch_size`` is below 1 or a string that is not an integer (raised at once,
            not when reading).
        TypeError: ``batch_size`` is not a number.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> def reader():
        ...     for i in range(5):
        ...         yield i
        >>> list(fluid.io.batch(reader, batch_size=2)())
        [[0, 1], [2, 3], [4]]
        >>> list(fluid.io.batch(reader, batch_size=2, drop_last=True)())
        [[0, 1], [2, 3]]
    """
    if int(batch_size) < 1:
        raise ValueError(f"batch_size should be a positive integer, got {batch_size}")

    def batched() -> Iterator[List[Any]]:
        buf: List[Any] = []
        for sample in reader():
            buf.append(sample)
            if len(buf) == batch_size:
                yield buf
                buf = []
        if buf and not drop_last:
            yield buf
    return batched


def shuffle(reader: Reader, buf_size: int, seed: Optional[int] = None) -> Reader:
    """Shuffle within windows of ``buf_size`` samples (``buf_size`` >= 1: a window of 0 would
    return the samples unshuffled, silently)."""
    if isinstance(buf_size, bool) or not isinstance(buf_size, (int, np.integer)):
        raise TypeError(f"shuffle: buf_size must be an int, but received "
                        f"{type(buf_size).__name__} {buf_size!r}")
    if buf_size < 1:
        raise ValueError(f"shuffle: buf_size must be >= 1 (how many samples are shuffled "
                         f"together), but received {buf_size}")

    def shuffled() -> Iterator[Any]:
        rng = random.Random(seed)
        buf: List[Any] = []
        for sample in reader():
            buf.append(sample)
            if len(buf) >= buf_size:
                rng.shuffle(buf)
                yield from buf
                buf = []
        rng.shuffle(buf)
        yield from buf
    return shuffled


def chain(*readers: Reader) -> Reader:
    """The samples of each reader, one reader after the other.

    Args:
        readers (callable): readers whose items follow one another.
    Returns:
        callable: a new reader.

    Raises:
        None: this function does not raise; calling a non-callable reader raises TypeError when the
            returned reader is called.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> a = lambda: iter([1, 2])
        >>> b = lambda: iter([3])
        >>> list(fluid.io.chain(a, b)())
        [1, 2, 3]
    """
    return lambda: itertools.chain.from_iterable(r() for r in readers)


def compose(*readers: Reader, check_alignment: bool = True) -> Reader:
    """Zip readers: each output sample is the concatenation of their samples (tuples are
    flattened one level).

    Args:
        readers (callable): readers read in step; their items are joined into one tuple.
        check_alignment (bool, default True): raise ``ComposeNotAligned`` when one ends first.
    Returns:
        callable: a new reader.

    Raises:
        ComposeNotAligned: (while reading) ``check_alignment`` is True and one reader ends before
            the others.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> a = lambda: iter([1, 2])
        >>> b = lambda: iter(["x", "y"])
        >>> list(fluid.io.compose(a, b)())
        [(1, 'x'), (2, 'y')]
    """
    def as_tuple(x: Any) -> tuple:
        return tuple(x) if isinstance(x, tuple) else (x,)

    def composed() -> Iterator[tuple]:
        its = [iter(r()) for r in readers]
        for items in itertools.zip_longest(*its, fillvalue=_END):
            if any(i is _END for i in items):
                if check_alignment:
                    raise ComposeNotAligned("outputs of readers are not aligned")
                return
            yield sum((as_tuple(i) for i in items), ())
    return composed


def map_readers(func: Callable[..., Any], *readers: Reader) -> Reader:
    """``func`` applied to the zipped samples of ``readers``.

    Args:
        func (callable): applied to one item of each reader.
        readers (callable): readers read in step.
    Returns:
        callable: a new reader.

    Raises:
        None: this function does not raise; errors of ``func`` or a reader surface while reading.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> list(fluid.io.map_readers(lambda a, b: a + b, lambda: iter([1, 2]), lambda: iter([10, 20]))())
        [11, 22]
    """
    return lambda: map(func, *[r() for r in readers])


def firstn(reader: Reader, n: int) -> Reader:
    """At most the first ``n`` samples.

    Args:
        reader (callable): the reader.
        n (int): how many items to keep.
    Returns:
        callable: a new reader.

    Raises:
        ValueError: (while reading) ``n`` is negative or not an integer (``itertools.islice``).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> list(fluid.io.firstn(lambda: iter(range(10)), 3)())
        [0, 1, 2]
    """
    return lambda: itertools.islice(reader(), n)


def cache(reader: Reader) -> Reader:
    """Read ``reader`` once, on the first call; later calls replay the samples.

    Args:
        reader (callable): read once; its items are replayed afterwards.
    Returns:
        callable: a new reader.

    Raises:
        None: this function does not raise; an error of ``reader`` surfaces on the first read,
            and the next call reads ``reader`` again.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> calls = []
        >>> def reader():
        ...     calls.append(1)
        ...     yield from range(3)
        >>> cached = fluid.io.cache(reader)
        >>> list(cached()), list(cached()), len(calls)
        ([0, 1, 2], [0, 1, 2], 1)
    """
    samples: List[Any] = []
    filled = [False]

    def cached() -> Iterator[Any]:
        if not filled[0]:
            fresh = list(reader())          # all or nothing: a failed read caches no sample
            samples[:] = fresh
            filled[0] = True
        return iter(samples)
    return cached


def _put(out: "queue.Queue[Any]", entry: Any, stop: threading.Event) -> bool:
    while not stop.is_set():
        try:
            out.put(entry, timeout=0.05)
            return True
        except queue.Full:
            continue
    return False


def _pump(source: Iterable[Any], out: "queue.Queue[Any]", stop: threading.Event) -> None:
    try:
        for item in source:
            if not _put(out, ("item", item), stop):
                return
        _put(out, ("end", None), stop)
    except BaseException as e:          # noqa: BLE001 -- re-raised by the consumer
        _put(out, ("error", e), stop)


def _drain(q: "queue.Queue[Any]", workers: int, threads: Sequence[threading.Thread],
           stop: threading.Event) -> Iterator[Any]:
    ended = 0
    try:
        while ended < workers:
            kind, item = q.get()
            if kind == "item":
                yield item
            elif kind == "end":
                ended += 1
            else:
                raise item
    finally:
        stop.set()
        while True:
            try:
                q.get_nowait()
            except queue.Empty:
                break
        for t in threads:
            t.join()


def buffered(reader: Reader, size: int) -> Reader:
    """Read ahead up to ``size`` samples in a background thread.

    Args:
        reader (callable): the reader.
        size (int): items read ahead in a background thread.
    Returns:
        callable: a new reader.

    Raises:
        None: this function does not raise; an exception of ``reader`` is re-raised to the consumer
            while reading.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> list(fluid.io.buffered(lambda: iter(range(4)), size=2)())
        [0, 1, 2, 3]
    """
    def reading() -> Iterator[Any]:
        q: "queue.Queue[Any]" = queue.Queue(maxsize=max(1, size))
        stop = threading.Event()
        t = threading.Thread(target=_pump, args=(reader(), q, stop), daemon=True,
                             name="fluidlite-buffered")
        t.start()
        return _drain(q, 1, [t], stop)
    return reading


def xmap_readers(mapper: Callable[[Any], Any], reader: Reader, process_num: int,
                 buffer_size: int, order: bool = False) -> Reader:
    """``mapper`` over the samples in ``process_num`` threads (in order when ``order``).

    Args:
        mapper (callable): applied to every item by worker threads.
        reader (callable): the reader.
        process_num (int): the number of workers.
        buffer_size (int): the queue size.
        order (bool, default False): keep the input order.
    Returns:
        callable: a new reader.

    Raises:
        None: this function does not raise; an exception of ``mapper`` or ``reader`` is re-raised to
            the consumer while reading.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> r = fluid.io.xmap_readers(lambda v: v * 10, lambda: iter(range(4)), process_num=2,
        ...                          buffer_size=4, order=True)
        >>> list(r())
        [0, 10, 20, 30]
    """
    def mapped() -> Iterator[Any]:
        if order:
            # ordered: map in chunks of process_num, results kept in input order
            src = iter(reader())
            while True:
                chunk = list(itertools.islice(src, max(1, process_num)))
                if not chunk:
                    return
                results: List[Any] = [None] * len(chunk)
                errors: List[BaseException] = []

                def work(i: int, s: Any) -> None:
                    try:
                        results[i] = mapper(s)
                    except BaseException as e:   # noqa: BLE001
                        errors.append(e)
                ts = [threading.Thread(target=work, args=(i, s), daemon=True)
                      for i, s in enumerate(chunk)]
                for t in ts:
                    t.start()
                for t in ts:
                    t.join()
                if errors:
                    raise errors[0]
                yield from results
        src_lock = threading.Lock()
        source = iter(reader())

        def one_worker() -> Iterator[Any]:
            while True:
                with src_lock:
                    try:
                        s = next(source)
                    except StopIteration:
                        return
                yield mapper(s)

        q: "queue.Queue[Any]" = queue.Queue(maxsize=max(1, buffer_size))
        stop = threading.Event()
        threads = [threading.Thread(target=_pump, args=(one_worker(), q, stop), daemon=True,
                                    name="fluidlite-xmap") for _ in range(max(1, process_num))]
        for t in threads:
            t.start()
        yield from _drain(q, len(threads), threads, stop)
    return mapped


def multiprocess_reader(readers: Sequence[Reader], use_pipe: bool = True,
                        queue_size: int = 1000) -> Reader:
    """The samples of all ``readers``, read concurrently (threads in fluidlite), interleaved.

    Args:
        readers (list of callable): read concurrently, one thread each.
        use_pipe (bool, default True): accepted for fluid's signature (fluid chose pipes or
            a queue between processes).
        queue_size (int, default 1000): the queue size.
    Returns:
        callable: a new reader.

    Raises:
        None: this function does not raise; an exception of a reader is re-raised to the consumer
            while reading.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> def part(start):
        ...     return lambda: iter(range(start, start + 2))
        >>> sorted(fluid.io.multiprocess_reader([part(0), part(10)], use_pipe=False)())
        [0, 1, 10, 11]
    """
    def reading() -> Iterator[Any]:
        q: "queue.Queue[Any]" = queue.Queue(maxsize=max(1, queue_size))
        stop = threading.Event()
        threads = [threading.Thread(target=_pump, args=(r(), q, stop), daemon=True,
                                    name="fluidlite-multireader") for r in readers]
        for t in threads:
            t.start()
        return _drain(q, len(threads), threads, stop)
    return reading
