"""``paddle.dataset.wmt14``: Paddle's shrunk WMT14 French-English set (``wmt14.tgz``), as
fluid 1.8's reader gave it. The archive holds the dictionaries (members ending in
``src.dict`` and ``trg.dict``: one word a line, the line number is the id, ``<s>``, ``<e>``,
``<unk>`` first) and members ending in ``train/train``, ``test/test``, ``gen/gen`` with one
``source<TAB>target`` pair of tokenized sentences per line. A dictionary of ``dict_size`` keeps
the first ``dict_size`` lines; other words are ``<unk>`` (id 2). Pairs whose source (with
``<s>`` and ``<e>``) or target has more than 80 ids are dropped, as in Paddle.
"""
from __future__ import annotations

import tarfile
from typing import Callable, Dict, Iterator, List, Tuple

from . import common

__all__ = ["train", "test", "gen", "get_dict"]

URL_TRAIN = "http://paddlemodels.bj.bcebos.com/wmt/wmt14.tgz"
MD5_TRAIN = "0791583d57d5beb693b9414c5b36798c"
START, END, UNK = "<s>", "<e>", "<unk>"
UNK_IDX = 2
Sample = Tuple[List[int], List[int], List[int]]


def _only_member(tf: tarfile.TarFile, suffix: str, path: str) -> tarfile.TarInfo:
    found = [m for m in tf.getmembers() if m.name.endswith(suffix)]
    if len(found) != 1:
        raise common.DatasetFileError(f"{path}: expected one member ending in {suffix!r}, "
                                      f"found {[m.name for m in found]}")
    return found[0]


def _read_dicts(path: str, dict_size: int) -> Tuple[Dict[str, int], Dict[str, int]]:
    """The first ``dict_size`` words of ``src.dict`` and ``trg.dict`` -> their line numbers."""
    dicts = []
    with tarfile.open(path) as tf:
        for suffix in ("src.dict", "trg.dict"):
            f = tf.extractfile(_only_member(tf, suffix, path))
            assert f is not None
            words: Dict[str, int] = {}
            for i, line in enumerate(f):
                if i >= dict_size:
                    break
                words[line.strip().decode("utf-8")] = i
            dicts.append(words)
    return dicts[0], dicts[1]


def _creator(member: str, dict_size: int) -> Callable[[], Iterator[Sample]]:
    path = common.download(URL_TRAIN, "wmt14", MD5_TRAIN)

    def reader() -> Iterator[Sample]:
        src_dict, trg_dict = _read_dicts(path, dict_size)
        with tarfile.open(path) as tf:
            for m in [m for m in tf.getmembers() if m.name.endswith(member)]:
                f = tf.extractfile(m)
                assert f is not None
                for line in f:
                    cols = line.decode("utf-8").strip().split("\t")
                    if len(cols) != 2:
                        continue
                    src = [src_dict.get(w, UNK_IDX) for w in [START, *cols[0].split(), END]]
                    trg = [trg_dict.get(w, UNK_IDX) for w in cols[1].split()]
                    if len(src) > 80 or len(trg) > 80:
                        continue
                    yield src, [trg_dict[START], *trg], [*trg, trg_dict[END]]
    return reader


def train(dict_size: int) -> Callable[[], Iterator[Sample]]:
    """Pairs of the ``train/train`` members as ``(source ids with <s> and <e>, <s> + target
    ids, target ids + <e>)``.

    Args:
        dict_size (int): how many dictionary lines (marks included) to keep per language.

    Returns:
        A reader of ``(src_ids, trg_ids, trg_ids_next)`` lists.

    Raises:
        FileNotFoundError: ``DATA_HOME/wmt14/wmt14.tgz`` is missing; says what to fetch.

    Example:
        >>> import tempfile
        >>> from fluidlite.paddle_compat.dataset import common, wmt14
        >>> common.DATA_HOME, saved = tempfile.mkdtemp(), common.DATA_HOME
        >>> try:
        ...     wmt14.train(30000)
        ... except FileNotFoundError as e:
        ...     print("wmt14.tgz is missing" in str(e))
        True
        >>> common.DATA_HOME = saved
    """
    return _creator("train/train", dict_size)


def test(dict_size: int) -> Callable[[], Iterator[Sample]]:
    """Pairs of the ``test/test`` members, laid out as :func:`train`'s.

    Args:
        dict_size (int): dictionary lines kept per language.

    Returns:
        A reader of ``(src_ids, trg_ids, trg_ids_next)`` lists.

    Raises:
        FileNotFoundError: the archive is missing.

    Example:
        >>> from fluidlite.paddle_compat.dataset import wmt14
        >>> callable(wmt14.test)
        True
    """
    return _creator("test/test", dict_size)


def gen(dict_size: int) -> Callable[[], Iterator[Sample]]:
    """Pairs of the ``gen/gen`` members (for generation), laid out as :func:`train`'s.

    Args:
        dict_size (int): dictionary lines kept per language.

    Returns:
        A reader of ``(src_ids, trg_ids, trg_ids_next)`` lists.

    Raises:
        FileNotFoundError: the archive is missing.

    Example:
        >>> from fluidlite.paddle_compat.dataset import wmt14
        >>> callable(wmt14.gen)
        True
    """
    return _creator("gen/gen", dict_size)


def get_dict(dict_size: int, reverse: bool = True) -> Tuple[dict, dict]:
    """The source and target dictionaries; id -> word when ``reverse`` (Paddle's default).

    Args:
        dict_size (int): dictionary lines kept per language.
        reverse (bool): map ids to words (True) or words to ids.

    Returns:
        ``(src_dict, trg_dict)``

    Raises:
        FileNotFoundError: the archive is missing.

    Example:
        >>> from fluidlite.paddle_compat.dataset import wmt14
        >>> callable(wmt14.get_dict)
        True
    """
    src, trg = _read_dicts(common.download(URL_TRAIN, "wmt14", MD5_TRAIN), dict_size)
    if reverse:
        return {i: w for w, i in src.items()}, {i: w for w, i in trg.items()}
    return src, trg
