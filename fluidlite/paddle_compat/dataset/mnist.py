"""``paddle.dataset.mnist``: the MNIST digits, 784 float32 pixels scaled to [-1, 1] and an int
label per sample (Paddle's reader; files ``mnist/{train,t10k}-{images-idx3,labels-idx1}-ubyte.gz``).
"""
from __future__ import annotations

import gzip
import struct
from typing import Callable, Iterator, Tuple

import numpy as np

from . import common

__all__ = ["train", "test", "reader_creator"]

URL_PREFIX = "https://dataset.bj.bcebos.com/mnist/"
TEST_IMAGE_URL = URL_PREFIX + "t10k-images-idx3-ubyte.gz"
TEST_IMAGE_MD5 = "9fb629c4189551a2d022fa330f9573f3"
TEST_LABEL_URL = URL_PREFIX + "t10k-labels-idx1-ubyte.gz"
TEST_LABEL_MD5 = "ec29112dd5afa0611ce80d1b7f02629c"
TRAIN_IMAGE_URL = URL_PREFIX + "train-images-idx3-ubyte.gz"
TRAIN_IMAGE_MD5 = "f68b3c2dcbeaaa9fbdd348bbdeb94873"
TRAIN_LABEL_URL = URL_PREFIX + "train-labels-idx1-ubyte.gz"
TRAIN_LABEL_MD5 = "d53e105ee54ea40749a09fcbcd1e9432"
_IMAGES_MAGIC, _LABELS_MAGIC = 2051, 2049          # the IDX headers' magic numbers
_MAX_BYTES = 1 << 30                                # a decompressed file larger is not MNIST


def _read_gz(path: str) -> bytes:
    with gzip.open(path, "rb") as f:
        data = f.read(_MAX_BYTES + 1)
    if len(data) > _MAX_BYTES:
        raise common.DatasetFileError(f"{path}: decompresses to more than 1 GiB; not MNIST")
    return data


def _parse(image_path: str, label_path: str) -> Tuple[np.ndarray, np.ndarray]:
    img, lab = _read_gz(image_path), _read_gz(label_path)
    if len(img) < 16 or len(lab) < 8:
        raise common.DatasetFileError(f"{image_path} / {label_path}: truncated IDX header")
    magic, n, rows, cols = struct.unpack_from(">IIII", img, 0)
    lmagic, ln = struct.unpack_from(">II", lab, 0)
    if magic != _IMAGES_MAGIC or lmagic != _LABELS_MAGIC:
        raise common.DatasetFileError(f"{image_path} / {label_path}: IDX magic {magic} / "
                                      f"{lmagic}, expected {_IMAGES_MAGIC} / {_LABELS_MAGIC}")
    if n != ln or len(img) != 16 + n * rows * cols or len(lab) != 8 + ln:
        raise common.DatasetFileError(f"{image_path} / {label_path}: the headers promise {n} "
                                      f"images of {rows}x{cols} and {ln} labels, but the files "
                                      f"hold {len(img) - 16} and {len(lab) - 8} bytes of data")
    images = np.frombuffer(img, np.uint8, n * rows * cols, 16).reshape(n, rows * cols)
    return images, np.frombuffer(lab, np.uint8, ln, 8)


def reader_creator(image_filename: str, label_filename: str,
                   buffer_size: int = 100) -> Callable[[], Iterator[Tuple[np.ndarray, int]]]:
    """A reader of (image, label) samples; pixels as Paddle computed them:
    ``x / 255 * 2 - 1`` in float32."""
    def reader() -> Iterator[Tuple[np.ndarray, int]]:
        images, labels = _parse(image_filename, label_filename)
        for start in range(0, len(labels), buffer_size):
            block = images[start:start + buffer_size].astype(np.float32)
            block = block / np.float32(255.0) * np.float32(2.0) - np.float32(1.0)
            for i, label in enumerate(labels[start:start + buffer_size]):
                yield block[i], int(label)
    return reader


def train() -> Callable[[], Iterator[Tuple[np.ndarray, int]]]:
    """The 60,000 training samples."""
    return reader_creator(common.download(TRAIN_IMAGE_URL, "mnist", TRAIN_IMAGE_MD5),
                          common.download(TRAIN_LABEL_URL, "mnist", TRAIN_LABEL_MD5), 100)


def test() -> Callable[[], Iterator[Tuple[np.ndarray, int]]]:
    """The 10,000 test samples."""
    return reader_creator(common.download(TEST_IMAGE_URL, "mnist", TEST_IMAGE_MD5),
                          common.download(TEST_LABEL_URL, "mnist", TEST_LABEL_MD5), 100)
