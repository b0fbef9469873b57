"""``paddle.dataset``: fluid 1.x's dataset readers over the files Paddle downloaded.

Each module reads its files from ``common.DATA_HOME/<module>/`` (``~/.cache/paddle/dataset``,
Paddle's layout), checks their MD5 as Paddle did, and yields samples exactly as Paddle's reader
did. This package never downloads: a missing file raises ``FileNotFoundError`` saying which URL
to fetch and where to put it.
"""
from __future__ import annotations

from . import (cifar, common, imdb, imikolov, mnist, movielens, uci_housing, wmt14,
               wmt16)

__all__ = ["cifar", "common", "imdb", "imikolov", "mnist", "movielens", "uci_housing",
           "wmt14", "wmt16"]
