"""``paddle.dataset.cifar``: CIFAR-10/100 from Paddle's python-pickle archives, each sample 3072
float32 values ``x / 255`` and an int label. The pickles inside the archive are read with a
restricted unpickler (arrays and plain containers only): a file from elsewhere cannot run code.
"""
from __future__ import annotations

import io
import tarfile
from typing import Any, Callable, Iterator, Tuple

import numpy as np

from ...io.program_state import _ArrayUnpickler
from . import common

__all__ = ["train10", "test10", "train100", "test100"]

URL_PREFIX = "https://dataset.bj.bcebos.com/cifar/"
CIFAR10_URL = URL_PREFIX + "cifar-10-python.tar.gz"
CIFAR10_MD5 = "c58f30108f718f92721af3b95e74349a"
CIFAR100_URL = URL_PREFIX + "cifar-100-python.tar.gz"
CIFAR100_MD5 = "eb9058c3a382ffc7106e4002c42a8d85"
_MAX_MEMBER = 1 << 28          # a batch pickle is ~31 MB; anything far larger is refused


class _BatchUnpickler(_ArrayUnpickler):
    """The CIFAR batches were pickled by Python 2: strings come back as bytes."""

    def __init__(self, f: Any, source: str) -> None:
        super().__init__(f, source, encoding="bytes")


def reader_creator(filename: str, sub_name: str,
                   cycle: bool = False) -> Callable[[], Iterator[Tuple[np.ndarray, int]]]:
    """Samples of every archive member whose name contains ``sub_name`` (``cycle``: forever)."""
    def read_batch(f: tarfile.TarFile, member: tarfile.TarInfo) -> Iterator[Tuple[np.ndarray, int]]:
        if not member.isfile() or member.size > _MAX_MEMBER:
            raise common.DatasetFileError(f"{filename}: member {member.name!r} is not a batch")
        raw = f.extractfile(member).read()            # type: ignore[union-attr]
        batch = _BatchUnpickler(io.BytesIO(raw), f"{filename}:{member.name}").load()
        data = np.asarray(batch[b"data"])
        labels = batch.get(b"labels", batch.get(b"fine_labels"))
        if labels is None or len(labels) != len(data):
            raise common.DatasetFileError(f"{filename}: {member.name} has no labels for its "
                                          f"{len(data)} samples")
        for sample, label in zip(data, labels):
            yield (sample / 255.0).astype(np.float32), int(label)

    def reader() -> Iterator[Tuple[np.ndarray, int]]:
        while True:
            with tarfile.open(filename, mode="r") as f:
                for member in [m for m in f.getmembers() if sub_name in m.name]:
                    yield from read_batch(f, member)
            if not cycle:
                break
    return reader


def train10(cycle: bool = False) -> Callable[[], Iterator[Tuple[np.ndarray, int]]]:
    """CIFAR-10's 50,000 training samples."""
    return reader_creator(common.download(CIFAR10_URL, "cifar", CIFAR10_MD5), "data_batch",
                          cycle)


def test10(cycle: bool = False) -> Callable[[], Iterator[Tuple[np.ndarray, int]]]:
    """CIFAR-10's 10,000 test samples."""
    return reader_creator(common.download(CIFAR10_URL, "cifar", CIFAR10_MD5), "test_batch",
                          cycle)


def train100() -> Callable[[], Iterator[Tuple[np.ndarray, int]]]:
    """CIFAR-100's training samples (fine labels)."""
    return reader_creator(common.download(CIFAR100_URL, "cifar", CIFAR100_MD5), "train")


def test100() -> Callable[[], Iterator[Tuple[np.ndarray, int]]]:
    """CIFAR-100's test samples (fine labels)."""
    return reader_creator(common.download(CIFAR100_URL, "cifar", CIFAR100_MD5), "test")
