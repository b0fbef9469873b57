"""fluid 1.8's ``paddle.dataset.movielens`` (and the other readers added after the first
five) on small files written here in exactly the published format."""
import hashlib
import zipfile

import pytest

from fluidlite.paddle_compat.dataset import common, movielens


def _md5(path):
    return hashlib.md5(open(path, "rb").read()).hexdigest()


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setattr(common, "DATA_HOME", str(tmp_path))
    for name in ("MOVIE_INFO", "MOVIE_TITLE_DICT", "CATEGORIES_DICT", "USER_INFO"):
        monkeypatch.setattr(movielens, name, None)
    return tmp_path


def write_ml1m(home, monkeypatch):
    d = home / "movielens"
    d.mkdir()
    path = d / "movielens%2Fml-1m.zip"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("ml-1m/movies.dat", "1::Toy Story (1995)::Animation|Children's|Comedy\n"
                                       "2::Jumanji (1995)::Adventure|Children's|Fantasy\n")
        z.writestr("ml-1m/users.dat", "1::F::1::10::48067\n2::M::56::16::70072\n")
        z.writestr("ml-1m/ratings.dat", "1::1::5::978300760\n2::2::3::978300761\n"
                                        "1::2::4::978300762\n2::1::1::978300763\n")
    monkeypatch.setattr(movielens, "MD5", _md5(path))


def test_movielens_samples_dictionaries_and_split_as_paddle_did(home, monkeypatch):
    write_ml1m(home, monkeypatch)
    assert movielens.get_movie_title_dict() == {"jumanji": 0, "story": 1, "toy": 2}
    assert movielens.movie_categories() == {"Adventure": 0, "Animation": 1, "Children's": 2,
                                            "Comedy": 3, "Fantasy": 4}
    assert (movielens.max_movie_id(), movielens.max_user_id(), movielens.max_job_id()) == \
        (2, 2, 16)
    assert movielens.user_info()[2].value() == [2, 0, 6, 16]       # male, age 56 -> id 6
    assert movielens.movie_info()[1].title == "Toy Story "
    # RandomState(0) draws 0.549, 0.715, 0.603, 0.545: with ratio 0.55 rows 0 and 3 are test
    toy, jumanji = [1, [1, 2, 3], [2, 1]], [2, [0, 2, 4], [0]]
    assert list(movielens.train(test_ratio=0.55)()) == [
        [2, 0, 6, 16, *jumanji, [1.0]], [1, 1, 0, 10, *jumanji, [3.0]]]
    assert list(movielens.test(test_ratio=0.55)()) == [
        [1, 1, 0, 10, *toy, [5.0]], [2, 0, 6, 16, *toy, [-3.0]]]
    # default ratio 0.1: none of the four draws is below it
    assert len(list(movielens.train()())) == 4 and list(movielens.test()()) == []


def test_movielens_missing_and_damaged_files_say_what_to_do(home, monkeypatch):
    with pytest.raises(FileNotFoundError, match=r"fetch https://dataset.bj.bcebos.com/"
                       r"movielens%2Fml-1m.zip \(md5 c4d9eecfca2ab87c1945afe126590906\)"):
        movielens.max_user_id()
    write_ml1m(home, monkeypatch)
    monkeypatch.setattr(movielens, "MD5", "0" * 32)
    with pytest.raises(common.DatasetFileError, match="has md5"):
        list(movielens.train()())


def write_wmt16(home, monkeypatch):
    import io
    import tarfile
    from fluidlite.paddle_compat.dataset import wmt16
    d = home / "wmt16"
    d.mkdir()
    path = d / "wmt16.tar.gz"
    members = {"wmt16/train": "a cat sits\tdie katze sitzt\na dog runs\tder hund rennt\n"
                              "a cat\tdie katze\nno tab on this line\n",
               "wmt16/test": "a dog\tder hund\n", "wmt16/val": "cat\tkatze\n"}
    with tarfile.open(path, "w:gz") as tar:
        for name, text in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(text.encode())
            tar.addfile(info, io.BytesIO(text.encode()))
    monkeypatch.setattr(wmt16, "DATA_MD5", _md5(path))
    return wmt16


def test_wmt16_dictionaries_and_samples_as_paddle_built_them(home, monkeypatch):
    wmt16 = write_wmt16(home, monkeypatch)
    with pytest.raises(FileNotFoundError, match="iterate a wmt16.train"):
        wmt16.get_dict("en", 6)
    # en counts: a 3, cat 2, then sits/dog/runs 1 each in first-appearance order; 6 - 3 kept
    # de counts: die 2, katze 2, then sitzt, der, hund, rennt; 7 - 3 kept
    samples = list(wmt16.train(6, 7)())
    assert samples == [([0, 3, 4, 5, 1], [0, 3, 4, 5], [3, 4, 5, 1]),
                       ([0, 3, 2, 2, 1], [0, 6, 2, 2], [6, 2, 2, 1]),
                       ([0, 3, 4, 1], [0, 3, 4], [3, 4, 1])]
    assert wmt16.get_dict("en", 6) == {"<s>": 0, "<e>": 1, "<unk>": 2, "a": 3, "cat": 4,
                                       "sits": 5}
    assert wmt16.get_dict("de", 7, reverse=True) == {0: "<s>", 1: "<e>", 2: "<unk>", 3: "die",
                                                     4: "katze", 5: "sitzt", 6: "der"}
    assert (home / "wmt16" / "de_7.dict").read_text().split("\n")[3:7] == \
        ["die", "katze", "sitzt", "der"]
    assert list(wmt16.test(6, 7)()) == [([0, 3, 2, 1], [0, 6, 2], [6, 2, 1])]
    assert list(wmt16.test(7, 6, src_lang="de")()) == [([0, 6, 2, 1], [0, 3, 2], [3, 2, 1])]
    assert list(wmt16.validation(6, 7)()) == [([0, 4, 1], [0, 4], [4, 1])]
    with pytest.raises(ValueError, match="'fr' is not one of"):
        wmt16.train(6, 7, src_lang="fr")


def test_wmt16_missing_archive_says_what_to_fetch(home):
    from fluidlite.paddle_compat.dataset import wmt16
    with pytest.raises(FileNotFoundError, match=r"fetch http://paddlemodels.bj.bcebos.com/wmt/"
                       r"wmt16.tar.gz \(md5 0c38be43600334966403524a40dcd81e\) and place it at "
                       r".*wmt16/wmt16.tar.gz"):
        wmt16.train(100, 100)


def test_wmt14_reads_the_shipped_dictionaries_and_drops_long_pairs(home, monkeypatch):
    import io
    import tarfile
    from fluidlite.paddle_compat.dataset import wmt14
    with pytest.raises(FileNotFoundError, match=r"fetch http://paddlemodels.bj.bcebos.com/wmt/"
                       r"wmt14.tgz \(md5 0791583d57d5beb693b9414c5b36798c\)"):
        wmt14.train(10)
    d = home / "wmt14"
    d.mkdir()
    path = d / "wmt14.tgz"
    long_src = " ".join(["le"] * 79)             # 79 words + <s> + <e> = 81 ids: dropped
    members = {"wmt14/src.dict": "<s>\n<e>\n<unk>\nle\nchat\nchien\n",
               "wmt14/trg.dict": "<s>\n<e>\n<unk>\nthe\ncat\ndog\n",
               "wmt14/train/train": f"le chat\tthe cat\nle chien noir\tthe black dog\n"
                                    f"{long_src}\tthe\nno tab\n",
               "wmt14/test/test": "chat\tcat\n", "wmt14/gen/gen": "le\tthe\n"}
    with tarfile.open(path, "w:gz") as tar:
        for name, text in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(text.encode())
            tar.addfile(info, io.BytesIO(text.encode()))
    monkeypatch.setattr(wmt14, "MD5_TRAIN", _md5(path))
    # dict_size 5 keeps lines 0..4: 'chien' (5) and 'dog' (5) become <unk> (2)
    assert list(wmt14.train(5)()) == [([0, 3, 4, 1], [0, 3, 4], [3, 4, 1]),
                                      ([0, 3, 2, 2, 1], [0, 3, 2, 2], [3, 2, 2, 1])]
    assert list(wmt14.test(6)()) == [([0, 4, 1], [0, 4], [4, 1])]
    assert list(wmt14.gen(6)()) == [([0, 3, 1], [0, 3], [3, 1])]
    src, trg = wmt14.get_dict(4)
    assert src == {0: "<s>", 1: "<e>", 2: "<unk>", 3: "le"} and trg[3] == "the"
    assert wmt14.get_dict(6, reverse=False)[1]["dog"] == 5
