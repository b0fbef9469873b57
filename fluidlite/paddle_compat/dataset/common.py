"""Where the dataset files live and how they are checked (Paddle's ``paddle.dataset.common``)."""
from __future__ import annotations

import hashlib
import os
from typing import Optional

__all__ = ["DATA_HOME", "md5file", "download", "DatasetFileError"]

# Paddle's cache directory; scripts may set paddle.dataset.common.DATA_HOME as they did with Paddle
DATA_HOME = os.path.expanduser("~/.cache/paddle/dataset")


class DatasetFileError(ValueError):
    """A dataset file is there but is not the published file (its MD5 differs)."""


def md5file(fname: str) -> str:
    """The hex MD5 of the file ``fname``, read in 1 MiB pieces."""
    h = hashlib.md5()
    with open(fname, "rb") as f:
        for piece in iter(lambda: f.read(1 << 20), b""):
            h.update(piece)
    return h.hexdigest()


def download(url: str, module_name: str, md5sum: Optional[str],
             save_name: Optional[str] = None) -> str:
    """The path of the file ``url`` names, in ``DATA_HOME/module_name/`` (Paddle's layout),
    checked against ``md5sum`` (``FLUIDLITE_DATASET_CHECK_MD5=0`` skips the check, for files of
    the published format that are not the published files, e.g. a small sample). Nothing is
    downloaded (fluidlite works offline):

    Raises:
        FileNotFoundError: the file is missing; the message says which URL to fetch and the
            path to place it at.
        DatasetFileError: the file is there but its MD5 is not the published one.
    """
    directory = os.path.join(DATA_HOME, module_name)
    path = os.path.join(directory, save_name or url.split("/")[-1])
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"paddle.dataset.{module_name}: {path} is missing. fluidlite does not download: "
            f"fetch {url} (md5 {md5sum}) and place it at {path}, as Paddle's downloader would "
            f"have (set paddle.dataset.common.DATA_HOME to use another directory)")
    if md5sum is not None and os.environ.get("FLUIDLITE_DATASET_CHECK_MD5", "1") != "0":
        got = md5file(path)
        if got != md5sum:
            raise DatasetFileError(
                f"paddle.dataset.{module_name}: {path} has md5 {got}, but the published file "
                f"has {md5sum}: it is incomplete or another file; fetch {url} again")
    return path
