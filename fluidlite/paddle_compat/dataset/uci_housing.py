"""``paddle.dataset.uci_housing``: Boston housing, 13 features normalised as Paddle did
(``(x - mean) / (max - min)`` per column) and the price; the first 80% of the rows train."""
from __future__ import annotations

from typing import Callable, Iterator, Optional, Tuple

import numpy as np

from . import common

__all__ = ["train", "test", "feature_names", "load_data", "predict_reader"]

URL = "http://paddlemodels.bj.bcebos.com/uci_housing/housing.data"
MD5 = "d4accdce7a25600298819f8e28e8d593"
feature_names = ["CRIM", "ZN", "INDUS", "CHAS", "NOX", "RM", "AGE", "DIS", "RAD", "TAX",
                 "PTRATIO", "B", "LSTAT"]
_SPLIT: Optional[Tuple[np.ndarray, np.ndarray]] = None      # (train rows, test rows), as Paddle


def load_data(filename: str, feature_num: int = 14, ratio: float = 0.8) -> None:
    """Parse ``filename`` (whitespace-separated numbers) once into the train/test split."""
    global _SPLIT
    if _SPLIT is not None:
        return
    data = np.fromfile(filename, sep=" ")
    if data.size == 0 or data.size % feature_num:
        raise common.DatasetFileError(f"{filename}: {data.size} numbers, not rows of "
                                      f"{feature_num}")
    data = data.reshape(data.size // feature_num, feature_num)
    maximums, minimums = data.max(axis=0), data.min(axis=0)
    avgs = data.sum(axis=0) / data.shape[0]
    for i in range(feature_num - 1):
        data[:, i] = (data[:, i] - avgs[i]) / (maximums[i] - minimums[i])
    offset = int(data.shape[0] * ratio)
    _SPLIT = (data[:offset], data[offset:])


def _rows(which: int) -> Callable[[], Iterator[Tuple[np.ndarray, np.ndarray]]]:
    load_data(common.download(URL, "uci_housing", MD5))
    assert _SPLIT is not None
    rows = _SPLIT[which]

    def reader() -> Iterator[Tuple[np.ndarray, np.ndarray]]:
        for d in rows:
            yield d[:-1], d[-1:]
    return reader


def train() -> Callable[[], Iterator[Tuple[np.ndarray, np.ndarray]]]:
    """(13 normalised features, [price]) for the first 80% of the rows (float64, as Paddle)."""
    return _rows(0)


def test() -> Callable[[], Iterator[Tuple[np.ndarray, np.ndarray]]]:
    """The remaining 20% of the rows."""
    return _rows(1)


def predict_reader() -> Tuple[np.ndarray]:
    """One sample's features to run inference on: the first test row."""
    load_data(common.download(URL, "uci_housing", MD5))
    assert _SPLIT is not None
    return (_SPLIT[1][0][:-1],)
