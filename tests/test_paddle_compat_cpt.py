"""paddle.compat (fluidlite/paddle_compat/compat.py): fluid 1.x's string and number helpers."""
import math

import pytest

import fluidlite.paddle_compat.compat as cpt


def test_to_text_and_to_bytes_convert_items_and_keep_none():
    assert cpt.to_text(b"abc") == "abc" and cpt.to_text(None) is None
    assert cpt.to_text([b"a", "b", 1.5]) == ["a", "b", 1.5]
    assert cpt.to_text({b"k": b"v"}) == {"k": "v"}
    items = [b"x"]
    assert cpt.to_text(items, inplace=True) is items and items == ["x"]
    assert cpt.to_bytes(["a", b"b", 3]) == [b"a", b"b", b"3"]
    assert cpt.to_bytes({"a"}) == {b"a"}


def test_round_is_half_away_from_zero_and_the_rest():
    assert (cpt.round(2.5), cpt.round(-2.5), cpt.round(0.5), cpt.round(1.25, 1)) == \
        (3.0, -3.0, 1.0, 1.3)
    assert math.copysign(1.0, cpt.round(-0.0)) == -1.0
    assert cpt.floor_division(7, 2) == 3 and cpt.long_type is int and cpt.int_type is int
    assert cpt.get_exception_message(ValueError("boom")) == "boom"
    with pytest.raises(TypeError, match="must be an exception"):
        cpt.get_exception_message(None)
