"""``paddle.dataset.wmt16``: the Multi30K English-German pairs of Paddle's ``wmt16.tar.gz``
(members ``wmt16/train``, ``wmt16/test``, ``wmt16/val``: one ``english<TAB>german`` pair of
tokenized sentences per line), as fluid 1.8's reader gave them.

A dictionary of ``dict_size`` entries is ``<s>``, ``<e>``, ``<unk>`` (ids 0, 1, 2) and then the
``dict_size - 3`` most frequent words of the language's side of ``wmt16/train`` (ties in order
of first appearance). Like Paddle, it is kept as ``DATA_HOME/wmt16/<lang>_<dict_size>.dict``
(one word a line, the line number is the id) and rebuilt when that file is absent or has
another number of lines, so dictionaries Paddle built are read unchanged.
"""
from __future__ import annotations

import collections
import os
import tarfile
from typing import Callable, Dict, Iterator, List, Tuple, Union

from . import common

__all__ = ["train", "test", "validation", "get_dict"]

DATA_URL = "http://paddlemodels.bj.bcebos.com/wmt/wmt16.tar.gz"
DATA_MD5 = "0c38be43600334966403524a40dcd81e"
TOTAL_EN_WORDS = 11250
TOTAL_DE_WORDS = 19220
START_MARK, END_MARK, UNK_MARK = "<s>", "<e>", "<unk>"
Sample = Tuple[List[int], List[int], List[int]]


def _check_lang(lang: str) -> None:
    if lang not in ("en", "de"):
        raise ValueError(f"wmt16: language {lang!r} is not one of 'en' (English), "
                         f"'de' (German)")


def _pairs(tar_path: str, member: str) -> Iterator[List[str]]:
    """The (english, german) columns of each well-formed line of ``member`` (others skipped,
    as Paddle skipped them)."""
    with tarfile.open(tar_path) as tf:
        try:
            f = tf.extractfile(member)
        except KeyError:
            f = None
        if f is None:
            raise common.DatasetFileError(f"{tar_path}: has no member {member!r}")
        for line in f:
            cols = line.decode("utf-8").strip().split("\t")
            if len(cols) == 2:
                yield cols


def _build_dict(tar_path: str, dict_size: int, save_path: str, lang: str) -> None:
    freq: Dict[str, int] = collections.defaultdict(int)
    col = 0 if lang == "en" else 1
    for cols in _pairs(tar_path, "wmt16/train"):
        for w in cols[col].split():
            freq[w] += 1
    # sorted() is stable: equal counts keep first-appearance order, as in Paddle's dictionary
    words = [w for w, _ in sorted(freq.items(), key=lambda x: x[1], reverse=True)]
    os.makedirs(os.path.dirname(save_path), exist_ok=True)
    with open(save_path, "w", encoding="utf-8") as out:
        for w in [START_MARK, END_MARK, UNK_MARK] + words[:max(dict_size - 3, 0)]:
            out.write(w + "\n")


def _dict_path(lang: str, dict_size: int) -> str:
    return os.path.join(common.DATA_HOME, "wmt16", f"{lang}_{dict_size}.dict")


def _load_dict(tar_path: str, dict_size: int, lang: str,
               reverse: bool = False) -> Dict[Union[str, int], Union[str, int]]:
    path = _dict_path(lang, dict_size)
    if not os.path.exists(path) or len(open(path, "rb").readlines()) != dict_size:
        _build_dict(tar_path, dict_size, path, lang)
    with open(path, "rb") as f:
        words = [line.strip().decode("utf-8") for line in f]
    if reverse:
        return dict(enumerate(words))
    return {w: i for i, w in enumerate(words)}


def _sizes(src_dict_size: int, trg_dict_size: int, src_lang: str) -> Tuple[int, int]:
    en, de = TOTAL_EN_WORDS, TOTAL_DE_WORDS
    return (min(src_dict_size, en if src_lang == "en" else de),
            min(trg_dict_size, de if src_lang == "en" else en))


def _creator(member: str, src_dict_size: int, trg_dict_size: int,
             src_lang: str) -> Callable[[], Iterator[Sample]]:
    _check_lang(src_lang)
    src_size, trg_size = _sizes(src_dict_size, trg_dict_size, src_lang)
    tar_path = common.download(DATA_URL, "wmt16", DATA_MD5, "wmt16.tar.gz")
    trg_lang = "de" if src_lang == "en" else "en"

    def reader() -> Iterator[Sample]:
        src_dict = _load_dict(tar_path, src_size, src_lang)
        trg_dict = _load_dict(tar_path, trg_size, trg_lang)
        # the marks have the same ids in both dictionaries; Paddle took them from the source
        start, end, unk = (int(src_dict[m]) for m in (START_MARK, END_MARK, UNK_MARK))
        src_col = 0 if src_lang == "en" else 1
        for cols in _pairs(tar_path, member):
            src = [start] + [int(src_dict.get(w, unk)) for w in cols[src_col].split()] + [end]
            trg = [int(trg_dict.get(w, unk)) for w in cols[1 - src_col].split()]
            yield src, [start] + trg, trg + [end]
    return reader


def train(src_dict_size: int, trg_dict_size: int,
          src_lang: str = "en") -> Callable[[], Iterator[Sample]]:
    """Pairs of ``wmt16/train`` as ``(source ids with <s> and <e>, <s> + target ids,
    target ids + <e>)``; words outside a dictionary are ``<unk>``.

    Args:
        src_dict_size (int): source dictionary size, marks included (at most 11250 English
            or 19220 German words are kept, as Paddle capped them).
        trg_dict_size (int): target dictionary size, marks included.
        src_lang (str): ``'en'`` (translate to German) or ``'de'``.

    Returns:
        A reader of ``(src_ids, trg_ids, trg_ids_next)`` lists.

    Raises:
        ValueError: ``src_lang`` is neither ``'en'`` nor ``'de'``.
        FileNotFoundError: ``DATA_HOME/wmt16/wmt16.tar.gz`` is missing; says what to fetch.

    Example:
        >>> import tempfile
        >>> from fluidlite.paddle_compat.dataset import common, wmt16
        >>> common.DATA_HOME, saved = tempfile.mkdtemp(), common.DATA_HOME
        >>> try:
        ...     wmt16.train(30000, 30000)
        ... except FileNotFoundError as e:
        ...     print("wmt16.tar.gz is missing" in str(e))
        True
        >>> common.DATA_HOME = saved
    """
    return _creator("wmt16/train", src_dict_size, trg_dict_size, src_lang)


def test(src_dict_size: int, trg_dict_size: int,
         src_lang: str = "en") -> Callable[[], Iterator[Sample]]:
    """Pairs of ``wmt16/test``, laid out as :func:`train`'s (dictionaries from the train set).

    Args:
        src_dict_size (int): source dictionary size, marks included.
        trg_dict_size (int): target dictionary size, marks included.
        src_lang (str): ``'en'`` or ``'de'``.

    Returns:
        A reader of ``(src_ids, trg_ids, trg_ids_next)`` lists.

    Raises:
        ValueError: an unknown ``src_lang``.
        FileNotFoundError: the archive is missing.

    Example:
        >>> from fluidlite.paddle_compat.dataset import wmt16
        >>> try:
        ...     wmt16.test(100, 100, src_lang="fr")
        ... except ValueError as e:
        ...     print(e)
        wmt16: language 'fr' is not one of 'en' (English), 'de' (German)
    """
    return _creator("wmt16/test", src_dict_size, trg_dict_size, src_lang)


def validation(src_dict_size: int, trg_dict_size: int,
               src_lang: str = "en") -> Callable[[], Iterator[Sample]]:
    """Pairs of ``wmt16/val``, laid out as :func:`train`'s.

    Args:
        src_dict_size (int): source dictionary size, marks included.
        trg_dict_size (int): target dictionary size, marks included.
        src_lang (str): ``'en'`` or ``'de'``.

    Returns:
        A reader of ``(src_ids, trg_ids, trg_ids_next)`` lists.

    Raises:
        ValueError: an unknown ``src_lang``.
        FileNotFoundError: the archive is missing.

    Example:
        >>> from fluidlite.paddle_compat.dataset import wmt16
        >>> callable(wmt16.validation)
        True
    """
    return _creator("wmt16/val", src_dict_size, trg_dict_size, src_lang)


def get_dict(lang: str, dict_size: int,
             reverse: bool = False) -> Dict[Union[str, int], Union[str, int]]:
    """The dictionary a reader built: word -> id, or id -> word when ``reverse``.

    Args:
        lang (str): ``'en'`` or ``'de'``.
        dict_size (int): its size (capped as in :func:`train`).
        reverse (bool): map ids to words instead.

    Returns:
        dict

    Raises:
        ValueError: an unknown ``lang``.
        FileNotFoundError: no reader has built this dictionary yet (as Paddle, which
            asserted it): iterate ``train``/``test``/``validation`` first.

    Example:
        >>> from fluidlite.paddle_compat.dataset import wmt16
        >>> callable(wmt16.get_dict)
        True
    """
    _check_lang(lang)
    dict_size = min(dict_size, TOTAL_EN_WORDS if lang == "en" else TOTAL_DE_WORDS)
    path = _dict_path(lang, dict_size)
    if not os.path.exists(path):
        raise FileNotFoundError(f"paddle.dataset.wmt16: {path} does not exist; iterate a "
                                f"wmt16.train/test/validation reader first to build it")
    tar_path = common.download(DATA_URL, "wmt16", DATA_MD5, "wmt16.tar.gz")
    return _load_dict(tar_path, dict_size, lang, reverse)
