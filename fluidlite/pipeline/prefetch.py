"""The background producer shared by the data pipeline's loaders: ``_Prefetcher`` runs a
generator in one thread and hands its items (or its exception) to the consumer through a
bounded queue; ``_END`` marks the end of the stream."""
from __future__ import annotations

import queue
import threading
from typing import Any, Callable, Iterable

_END = object()


class _Failure:
    """An exception raised in the worker, handed to the consumer to re-raise."""

    def __init__(self, error: BaseException) -> None:
        self.error = error


class _Prefetcher:
    """One background thread putting ``make()``'s items into a queue of ``capacity``."""

    def __init__(self, make: Callable[[], Iterable[Any]], capacity: int) -> None:
        self._queue: "queue.Queue[Any]" = queue.Queue(maxsize=max(1, capacity))
        self._stop = threading.Event()
        self._done = False
        self._thread = threading.Thread(target=self._work, args=(make,), daemon=True,
                                        name="fluidlite-reader")
        self._thread.start()

    def _put(self, item: Any) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def _work(self, make: Callable[[], Iterable[Any]]) -> None:
        try:
            for item in make():
                if not self._put(item):
                    return
            self._put(_END)
        except BaseException as e:          # noqa: BLE001 -- handed to the consumer
            self._put(_Failure(e))

    def get(self) -> Any:
        """The next item; ``_END`` after the last. Re-raises the generator's exception."""
        if self._done:
            return _END
        item = self._queue.get()
        if item is _END or isinstance(item, _Failure):
            self._done = True
            self.stop()
            if isinstance(item, _Failure):
                raise item.error
        return item

    def stop(self) -> None:
        """Stop the worker and wait for it (it finishes at most the item it is preparing)."""
        self._stop.set()
        while True:                          # unblock a worker waiting on a full queue
            try:
                self._queue.get_nowait()
            except queue.Empty:
                break
        if self._thread is not threading.current_thread():
            self._thread.join()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()


