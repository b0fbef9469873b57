"""``paddle.dataset.imikolov``: the Penn Treebank text of Mikolov's ``simple-examples.tgz``
(Paddle's reader): n-grams of word ids, or (source, target) id sequences. Words are bytes and
the markers ``'<s>'``, ``'<e>'``, ``'<unk>'`` strings, exactly as Paddle's dictionary has them."""
from __future__ import annotations

import collections
import tarfile
from typing import Callable, Dict, Iterable, Iterator, Optional, Tuple

from . import common

__all__ = ["train", "test", "build_dict", "DataType"]

URL = "https://dataset.bj.bcebos.com/imikolov%2Fsimple-examples.tgz"
MD5 = "30177ea32e27c525793142b6bf2c8e2d"
_TRAIN = "./simple-examples/data/ptb.train.txt"
_VALID = "./simple-examples/data/ptb.valid.txt"


class DataType:
    """What a sample is: ``NGRAM`` (a tuple of n ids) or ``SEQ`` (source and target ids)."""
    NGRAM = 1
    SEQ = 2


def _member(tf: tarfile.TarFile, name: str, path: str) -> Iterable[bytes]:
    try:
        f = tf.extractfile(name)
    except KeyError:
        f = None
    if f is None:
        raise common.DatasetFileError(f"{path}: has no member {name!r}")
    return f


def _count(lines: Iterable[bytes], freq: Optional[Dict[object, int]] = None) -> Dict[object, int]:
    freq = collections.defaultdict(int) if freq is None else freq
    for line in lines:
        for w in line.strip().split():
            freq[w] += 1
        freq["<s>"] += 1
        freq["<e>"] += 1
    return freq


def build_dict(min_word_freq: int = 50) -> Dict[object, int]:
    """Words of the train and valid text seen more than ``min_word_freq`` times -> ids by
    descending frequency (ties by the word), ``'<unk>'`` last."""
    path = common.download(URL, "imikolov", MD5)
    with tarfile.open(path) as tf:
        freq = _count(_member(tf, _VALID, path), _count(_member(tf, _TRAIN, path)))
    # Paddle 1.8 deleted the key '<unk>' here, a str that Python 3's bytes words never equal:
    # the corpus's own b'<unk>' tokens keep an id of their own. Kept as Paddle built it, so
    # saved models trained on Paddle's dictionary see the same ids.
    kept = sorted(((w, c) for w, c in freq.items() if c > min_word_freq),
                  key=lambda x: (-x[1], str(x[0]) if isinstance(x[0], str) else x[0].decode(
                      "latin-1")))
    word_idx: Dict[object, int] = {w: i for i, (w, _) in enumerate(kept)}
    word_idx["<unk>"] = len(kept)
    return word_idx


def _reader(name: str, word_idx: Dict[object, int], n: int,
            data_type: int) -> Callable[[], Iterator[Tuple[int, ...]]]:
    if data_type not in (DataType.NGRAM, DataType.SEQ):
        raise ValueError(f"imikolov: unknown data_type {data_type}; use DataType.NGRAM or SEQ")
    if data_type == DataType.NGRAM and n < 0:
        raise ValueError(f"imikolov: an n-gram length must be >= 0, got {n}")

    def reader() -> Iterator[Tuple[int, ...]]:
        path = common.download(URL, "imikolov", MD5)
        unk = word_idx["<unk>"]
        with tarfile.open(path) as tf:
            for line in _member(tf, name, path):
                words = line.strip().split()
                if data_type == DataType.NGRAM:
                    seq = [word_idx.get(w, unk) for w in ["<s>", *words, "<e>"]]
                    if len(seq) >= n:
                        for i in range(n, len(seq) + 1):
                            yield tuple(seq[i - n:i])
                else:
                    ids = [word_idx.get(w, unk) for w in words]
                    src, trg = [word_idx["<s>"], *ids], [*ids, word_idx["<e>"]]
                    if n > 0 and len(src) > n:
                        continue
                    yield src, trg                       # type: ignore[misc]
    return reader


def train(word_idx: Dict[object, int], n: int,
          data_type: int = DataType.NGRAM) -> Callable[[], Iterator[Tuple[int, ...]]]:
    """Samples of ``ptb.train.txt``: n-grams, or (source, target) of at most n ids."""
    return _reader(_TRAIN, word_idx, n, data_type)


def test(word_idx: Dict[object, int], n: int,
         data_type: int = DataType.NGRAM) -> Callable[[], Iterator[Tuple[int, ...]]]:
    """Samples of ``ptb.valid.txt`` (Paddle's test set)."""
    return _reader(_VALID, word_idx, n, data_type)
