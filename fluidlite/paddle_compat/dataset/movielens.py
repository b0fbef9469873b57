"""``paddle.dataset.movielens``: MovieLens 1M (``ml-1m.zip``: ``users.dat``, ``movies.dat``,
``ratings.dat``) as fluid 1.8's reader gave it. A sample is ``[user id, gender id (0 male,
1 female), age id (index in age_table), job id, movie id, [category ids], [title word ids],
[rating * 2 - 5]]``; a rating goes to the test set when a ``RandomState(rand_seed)`` draw is
below ``test_ratio`` (0.1), the same draws Paddle's ``np.random.seed(rand_seed)`` gave.

Deviation: Paddle numbered title words and categories in the iteration order of a Python
``set`` (which changes between interpreter runs for str); here they are numbered in sorted
order, so ids are stable from run to run.
"""
from __future__ import annotations

import re
import zipfile
from typing import Callable, Dict, Iterator, List, Optional

import numpy as np

from . import common

__all__ = ["train", "test", "get_movie_title_dict", "max_movie_id", "max_user_id",
           "max_job_id", "movie_categories", "user_info", "movie_info", "age_table",
           "MovieInfo", "UserInfo"]

URL = "https://dataset.bj.bcebos.com/movielens%2Fml-1m.zip"
MD5 = "c4d9eecfca2ab87c1945afe126590906"
age_table = [1, 18, 25, 35, 45, 50, 56]
_TITLE = re.compile(r"^(.*)\((\d+)\)$")      # "Toy Story (1995)" -> title without the year

MOVIE_INFO: Optional[Dict[int, "MovieInfo"]] = None
MOVIE_TITLE_DICT: Optional[Dict[str, int]] = None
CATEGORIES_DICT: Optional[Dict[str, int]] = None
USER_INFO: Optional[Dict[int, "UserInfo"]] = None


class MovieInfo:
    """A movie of ``movies.dat``: id, categories (genre names) and title (year removed)."""

    def __init__(self, index: object, categories: List[str], title: str) -> None:
        self.index = int(index)          # type: ignore[call-overload]
        self.categories = categories
        self.title = title

    def value(self) -> list:
        """``[movie id, [category ids], [ids of the lower-cased title words]]``."""
        assert CATEGORIES_DICT is not None and MOVIE_TITLE_DICT is not None
        return [self.index, [CATEGORIES_DICT[c] for c in self.categories],
                [MOVIE_TITLE_DICT[w.lower()] for w in self.title.split()]]

    def __repr__(self) -> str:
        return f"<MovieInfo id({self.index}), title({self.title}), categories({self.categories})>"


class UserInfo:
    """A user of ``users.dat``: id, gender, age (stored as its index in ``age_table``), job."""

    def __init__(self, index: object, gender: str, age: object, job_id: object) -> None:
        self.index = int(index)          # type: ignore[call-overload]
        self.is_male = gender == "M"
        self.age = age_table.index(int(age))     # type: ignore[call-overload]
        self.job_id = int(job_id)        # type: ignore[call-overload]

    def value(self) -> list:
        """``[user id, 0 if male else 1, age id, job id]``."""
        return [self.index, 0 if self.is_male else 1, self.age, self.job_id]

    def __repr__(self) -> str:
        return (f"<UserInfo id({self.index}), gender({'M' if self.is_male else 'F'}), "
                f"age({age_table[self.age]}), job({self.job_id})>")


def _fields(line: bytes, n: int, member: str, path: str) -> List[str]:
    parts = line.decode("latin-1").strip().split("::")
    if len(parts) != n:
        raise common.DatasetFileError(f"{path}: {member} line {line!r} has {len(parts)} "
                                      f"'::'-separated fields, expected {n}")
    return parts


def _initialize() -> str:
    """Parse movies and users once (Paddle's ``__initialize_meta_info__``); the zip's path."""
    global MOVIE_INFO, MOVIE_TITLE_DICT, CATEGORIES_DICT, USER_INFO
    path = common.download(URL, "movielens", MD5)
    if MOVIE_INFO is not None:
        return path
    movies: Dict[int, MovieInfo] = {}
    users: Dict[int, UserInfo] = {}
    with zipfile.ZipFile(path) as package:
        names = set(package.namelist())
        for member in ("ml-1m/movies.dat", "ml-1m/users.dat", "ml-1m/ratings.dat"):
            if member not in names:
                raise common.DatasetFileError(f"{path}: has no member {member!r}")
        with package.open("ml-1m/movies.dat") as f:
            for line in f:
                movie_id, title, cats = _fields(line, 3, "movies.dat", path)
                match = _TITLE.match(title)
                if match is None:
                    raise common.DatasetFileError(f"{path}: movies.dat title {title!r} does "
                                                  f"not end in '(year)'")
                movies[int(movie_id)] = MovieInfo(movie_id, cats.split("|"), match.group(1))
        with package.open("ml-1m/users.dat") as f:
            for line in f:
                uid, gender, age, job, _ = _fields(line, 5, "users.dat", path)
                users[int(uid)] = UserInfo(uid, gender, age, job)
    words = sorted({w.lower() for m in movies.values() for w in m.title.split()})
    cats_all = sorted({c for m in movies.values() for c in m.categories})
    MOVIE_TITLE_DICT = {w: i for i, w in enumerate(words)}
    CATEGORIES_DICT = {c: i for i, c in enumerate(cats_all)}
    MOVIE_INFO, USER_INFO = movies, users
    return path


def _reader(rand_seed: int, test_ratio: float, is_test: bool) -> Iterator[list]:
    path = _initialize()
    assert MOVIE_INFO is not None and USER_INFO is not None
    draws = np.random.RandomState(rand_seed)     # the MT19937 stream np.random.seed gave
    with zipfile.ZipFile(path) as package, package.open("ml-1m/ratings.dat") as f:
        for line in f:
            if (draws.random_sample() < test_ratio) != is_test:
                continue
            uid, mov_id, rating, _ = _fields(line, 4, "ratings.dat", path)
            yield (USER_INFO[int(uid)].value() + MOVIE_INFO[int(mov_id)].value()
                   + [[float(rating) * 2 - 5.0]])


def train(rand_seed: int = 0, test_ratio: float = 0.1) -> Callable[[], Iterator[list]]:
    """The ratings not drawn for the test set.

    Args:
        rand_seed (int): seed of the draws that split train and test (Paddle's default 0).
        test_ratio (float): share of the ratings drawn for the test set.

    Returns:
        A reader yielding ``[uid, gender, age, job, movie id, [cats], [title words], [r]]``.

    Raises:
        FileNotFoundError: ``DATA_HOME/movielens/movielens%2Fml-1m.zip`` is missing.

    Example:
        >>> from fluidlite.paddle_compat.dataset import movielens
        >>> callable(movielens.train())
        True
    """
    return lambda: _reader(rand_seed, test_ratio, False)


def test(rand_seed: int = 0, test_ratio: float = 0.1) -> Callable[[], Iterator[list]]:
    """The ratings drawn for the test set (same draws as :func:`train`).

    Args:
        rand_seed (int): seed of the split draws.
        test_ratio (float): share of the ratings drawn for the test set.

    Returns:
        A reader yielding samples laid out as :func:`train`'s.

    Raises:
        FileNotFoundError: the zip is missing (raised when the reader is iterated).

    Example:
        >>> from fluidlite.paddle_compat.dataset import movielens
        >>> callable(movielens.test())
        True
    """
    return lambda: _reader(rand_seed, test_ratio, True)


def get_movie_title_dict() -> Dict[str, int]:
    """Lower-cased title word -> id.

    Returns:
        The dictionary (words in sorted order; see the module note).

    Raises:
        FileNotFoundError: the zip is missing.

    Example:
        >>> from fluidlite.paddle_compat.dataset import movielens
        >>> movielens.get_movie_title_dict  # doctest: +ELLIPSIS
        <function get_movie_title_dict at ...>
    """
    _initialize()
    assert MOVIE_TITLE_DICT is not None
    return MOVIE_TITLE_DICT


def movie_categories() -> Dict[str, int]:
    """Category (genre) name -> id.

    Returns:
        The dictionary (names in sorted order).

    Raises:
        FileNotFoundError: the zip is missing.

    Example:
        >>> from fluidlite.paddle_compat.dataset import movielens
        >>> callable(movielens.movie_categories)
        True
    """
    _initialize()
    assert CATEGORIES_DICT is not None
    return CATEGORIES_DICT


def movie_info() -> Dict[int, MovieInfo]:
    """Movie id -> :class:`MovieInfo`.

    Returns:
        The dictionary of every movie in ``movies.dat``.

    Raises:
        FileNotFoundError: the zip is missing.

    Example:
        >>> from fluidlite.paddle_compat.dataset import movielens
        >>> callable(movielens.movie_info)
        True
    """
    _initialize()
    assert MOVIE_INFO is not None
    return MOVIE_INFO


def user_info() -> Dict[int, UserInfo]:
    """User id -> :class:`UserInfo`.

    Returns:
        The dictionary of every user in ``users.dat``.

    Raises:
        FileNotFoundError: the zip is missing.

    Example:
        >>> from fluidlite.paddle_compat.dataset import movielens
        >>> callable(movielens.user_info)
        True
    """
    _initialize()
    assert USER_INFO is not None
    return USER_INFO


def max_movie_id() -> int:
    """The largest movie id (size an embedding table with it + 1).

    Returns:
        int

    Raises:
        FileNotFoundError: the zip is missing.

    Example:
        >>> from fluidlite.paddle_compat.dataset import movielens
        >>> callable(movielens.max_movie_id)
        True
    """
    return max(movie_info())


def max_user_id() -> int:
    """The largest user id.

    Returns:
        int

    Raises:
        FileNotFoundError: the zip is missing.

    Example:
        >>> from fluidlite.paddle_compat.dataset import movielens
        >>> callable(movielens.max_user_id)
        True
    """
    return max(user_info())


def max_job_id() -> int:
    """The largest job id of any user.

    Returns:
        int

    Raises:
        FileNotFoundError: the zip is missing.

    Example:
        >>> from fluidlite.paddle_compat.dataset import movielens
        >>> callable(movielens.max_job_id)
        True
    """
    return max(u.job_id for u in user_info().values())
