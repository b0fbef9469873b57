"""``paddle.dataset.imdb``: the IMDB movie reviews (Paddle's reader): each sample is a list of
word ids and a label (0 positive, 1 negative). Words are lower-cased bytes with punctuation
removed; ``word_dict()`` keeps the words seen more than 150 times, most frequent first, with
``'<unk>'`` last -- all exactly as Paddle built them."""
from __future__ import annotations

import collections
import re
import string
import tarfile
from typing import Callable, Dict, Iterator, List, Pattern, Tuple

from . import common

__all__ = ["train", "test", "word_dict", "build_dict", "tokenize"]

URL = "https://dataset.bj.bcebos.com/imdb%2FaclImdb_v1.tar.gz"
MD5 = "7c2ac02c03563afcf9b574c7e56c153a"
_MAX_REVIEW = 1 << 20                     # one review is a few KB; a member far larger is refused
_PUNCTUATION = string.punctuation.encode()


def tokenize(pattern: Pattern[str]) -> Iterator[List[bytes]]:
    """The token lists of the archive members whose names match ``pattern``, in archive
    order (sequential reading, as Paddle)."""
    path = common.download(URL, "imdb", MD5)
    with tarfile.open(path) as tarf:
        for member in tarf:
            if not pattern.match(member.name):
                continue
            if not member.isfile() or member.size > _MAX_REVIEW:
                raise common.DatasetFileError(f"{path}: member {member.name!r} is not a review")
            text = tarf.extractfile(member).read()          # type: ignore[union-attr]
            yield text.rstrip(b"\n\r").translate(None, _PUNCTUATION).lower().split()


def build_dict(pattern: Pattern[str], cutoff: int) -> Dict[object, int]:
    """Words seen more than ``cutoff`` times -> ids by descending frequency (ties by the
    word), and ``'<unk>'`` -> the next id."""
    freq: Dict[bytes, int] = collections.defaultdict(int)
    for doc in tokenize(pattern):
        for word in doc:
            freq[word] += 1
    kept = sorted(((w, c) for w, c in freq.items() if c > cutoff), key=lambda x: (-x[1], x[0]))
    word_idx: Dict[object, int] = {w: i for i, (w, _) in enumerate(kept)}
    word_idx["<unk>"] = len(kept)
    return word_idx


def _reader(pos: Pattern[str], neg: Pattern[str],
            word_idx: Dict[object, int]) -> Callable[[], Iterator[Tuple[List[int], int]]]:
    unk = word_idx["<unk>"]
    samples = [([word_idx.get(w, unk) for w in doc], label)
               for pattern, label in ((pos, 0), (neg, 1)) for doc in tokenize(pattern)]

    def reader() -> Iterator[Tuple[List[int], int]]:
        yield from samples
    return reader


def train(word_idx: Dict[object, int]) -> Callable[[], Iterator[Tuple[List[int], int]]]:
    """The training reviews: positives (label 0), then negatives (label 1)."""
    return _reader(re.compile(r"aclImdb/train/pos/.*\.txt$"),
                   re.compile(r"aclImdb/train/neg/.*\.txt$"), word_idx)


def test(word_idx: Dict[object, int]) -> Callable[[], Iterator[Tuple[List[int], int]]]:
    """The test reviews."""
    return _reader(re.compile(r"aclImdb/test/pos/.*\.txt$"),
                   re.compile(r"aclImdb/test/neg/.*\.txt$"), word_idx)


def word_dict() -> Dict[object, int]:
    """The dictionary of the whole corpus (train and test), cutoff 150."""
    return build_dict(re.compile(r"aclImdb/((train)|(test))/((pos)|(neg))/.*\.txt$"), 150)
