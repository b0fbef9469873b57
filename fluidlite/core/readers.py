"""Readers the executor pulls feeds from: ``EOFException`` and the started non-iterable readers.

A non-iterable ``DataLoader`` / ``PyReader`` / ``py_reader`` registers itself here on
``start()`` for the program its variables belong to; ``Executor.run`` then takes the next batch
from it for the variables the caller did not feed, and the reader raises ``EOFException`` at
the end of the epoch (fluid's ``fluid.core.EOFException``) until ``reset()`` unregisters it.
"""
from __future__ import annotations

import threading
from typing import Any, Dict, List, Protocol

__all__ = ["EOFException", "FeedSource", "register", "unregister", "next_feed", "ACTIVE"]


class EOFException(Exception):
    """Raised by ``Executor.run`` when a started non-iterable reader has no more batches."""


class FeedSource(Protocol):
    feed_names: List[str]

    def next_feed(self) -> Dict[str, Any]: ...


# id(program) -> started sources feeding it; a plain dict so the executor's check is one test
ACTIVE: Dict[int, List[FeedSource]] = {}
_lock = threading.Lock()


def register(program: Any, source: FeedSource) -> None:
    with _lock:
        sources = ACTIVE.setdefault(id(program), [])
        if source not in sources:
            sources.append(source)


def unregister(source: FeedSource) -> None:
    with _lock:
        for key in [k for k, v in ACTIVE.items() if source in v]:
            ACTIVE[key].remove(source)
            if not ACTIVE[key]:
                del ACTIVE[key]


def next_feed(program: Any, feed: Dict[str, Any]) -> Dict[str, Any]:
    """``feed`` plus the next batch of every started reader of ``program`` (or, for a program
    with none, of the one started reader whose variables it declares and the caller does not
    feed, e.g. a ``clone(for_test=True)``)."""
    sources = ACTIVE.get(id(program))
    if not sources:
        block = program.global_block()
        candidates = [s for ss in ACTIVE.values() for s in ss
                      if all(n in block.vars and n not in feed for n in s.feed_names)]
        if len(candidates) != 1:
            return feed
        sources = candidates
    merged = dict(feed)
    for source in sources:
        if all(n in feed for n in source.feed_names):
            continue                         # the caller fed these variables itself
        merged.update(source.next_feed())
    return merged
