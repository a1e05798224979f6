"""The missing-part marker of ``nulls_distinct=False``: no encoded real value of any type is it."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pynamodb.attributes import BinaryAttribute, NumberAttribute, UnicodeAttribute
from pynamodb.constants import BINARY, NUMBER, STRING

from pynamodb_unique._core.constraint import Constraint
from pynamodb_unique._core.keys import NULL_PART, encode_part

SECRET = b"null-part-secret-32-bytes-000000"

#: Text DynamoDB can store: any code point but a lone surrogate.
TEXT = st.text(st.characters(codec="utf-8"))
#: Numbers DynamoDB can store, as ``NumberAttribute`` takes them: ints and floats.
NUMBERS = st.one_of(
    st.integers(min_value=-(10**37), max_value=10**37),
    st.floats(allow_nan=False, allow_infinity=False, min_value=-1e30, max_value=1e30).filter(
        lambda f: f == 0 or abs(f) > 1e-100  # DynamoDB's least magnitude is 1E-130.
    ),
)
#: Numbers as DynamoDB's ``N`` carries them: decimal strings.
DECIMALS = st.decimals(allow_nan=False, allow_infinity=False, min_value=-(10**30), max_value=10**30, places=6)


def _constraint(*attributes: Any, nulls_distinct: bool = False, hashed: bool = False) -> Constraint:
    """A resolved constraint over ``attributes`` (named a0, a1, ...)."""
    names = tuple(f"a{i}" for i in range(len(attributes)))
    secret = (lambda: SECRET) if hashed else None
    return Constraint("C", names, (None,) * len(names), tuple(attributes), secret=secret, nulls_distinct=nulls_distinct)


MIXED = _constraint(UnicodeAttribute(), NumberAttribute(), BinaryAttribute(legacy_encoding=False))
MIXED_HASHED = _constraint(UnicodeAttribute(), NumberAttribute(), BinaryAttribute(legacy_encoding=False), hashed=True)
SINGLE = _constraint(UnicodeAttribute())


def _same(left: tuple[Any, ...], right: tuple[Any, ...]) -> bool:
    """Whether two value tuples are one value: equal parts, numbers compared as numbers, None only to None."""
    for a, b in zip(left, right, strict=True):
        if a is None or b is None:
            if a is not b:
                return False
        elif isinstance(a, (int, float)):
            if Decimal(str(a)) != Decimal(str(b)):
                return False
        elif a != b:
            return False
    return True


@given(TEXT)
def test_encode_part__no_string_is_the_null_part(value: str) -> None:
    """An encoded string, whatever it holds (``%0`` itself included), is never the marker."""
    assert encode_part(STRING, value) != NULL_PART


@given(st.one_of(NUMBERS, DECIMALS))
def test_encode_part__no_number_is_the_null_part(value: float | Decimal) -> None:
    """An encoded number starts with ``%N``: never the marker."""
    assert encode_part(NUMBER, str(value)) != NULL_PART


@given(st.binary())
def test_encode_part__no_binary_is_the_null_part(value: bytes) -> None:
    """An encoded binary value starts with ``%B``: never the marker."""
    assert encode_part(BINARY, value) != NULL_PART


VALUES = st.tuples(st.none() | TEXT, st.none() | NUMBERS, st.none() | st.binary())


@given(VALUES, VALUES)
def test_key__missing_parts_collide_only_with_missing_parts(left: tuple[Any, ...], right: tuple[Any, ...]) -> None:
    """Two value tuples share a key exactly when they are one value, None counting as a value of its own."""
    assert (MIXED.key(left) == MIXED.key(right)) == _same(left, right)


@given(VALUES, VALUES)
def test_hashed_key__missing_parts_collide_only_with_missing_parts(
    left: tuple[Any, ...], right: tuple[Any, ...]
) -> None:
    """A hashed constraint digests the marker with the other parts: the same equality holds."""
    assert (MIXED_HASHED.key(left) == MIXED_HASHED.key(right)) == _same(left, right)


@given(VALUES)
def test_key_of__agrees_with_key(values: tuple[Any, ...]) -> None:
    """``key_of`` (the planner's reading) and ``key`` give one key for the same values."""
    assert MIXED.key_of(dict(zip(MIXED.attributes, values, strict=True))) == MIXED.key(values)


@pytest.mark.parametrize(
    ("values", "key"),
    [
        ((None, "home"), "UNIQ#C#%0#home"),
        (("%0", "home"), "UNIQ#C#%250#home"),
        (("home", None), "UNIQ#C#home#%0"),
        ((None, None), "UNIQ#C#%0#%0"),
    ],
)
def test_key__null_part_layout(values: tuple[Any, ...], key: str) -> None:
    """A missing part is ``%0`` in its place; the string ``"%0"`` is escaped away from it."""
    pair = _constraint(UnicodeAttribute(), UnicodeAttribute())
    assert pair.key(values) == key
    assert pair.key_of({"a0": values[0], "a1": values[1]}) == key


def test_key__single_attribute_missing_is_a_value() -> None:
    """One attribute, ``nulls_distinct=False``: a record without it holds ``UNIQ#C#%0``."""
    assert SINGLE.key((None,)) == SINGLE.key_of({}) == "UNIQ#C#%0"


def test_key__nulls_distinct_default__missing_part_takes_no_lock() -> None:
    """The default: a missing part means no lock, as before."""
    pair = _constraint(UnicodeAttribute(), UnicodeAttribute(), nulls_distinct=True)
    assert pair.key((None, "home")) is None
    assert pair.key_of({"a1": "home"}) is None
    assert _constraint(UnicodeAttribute(), nulls_distinct=True).key_of({}) is None
