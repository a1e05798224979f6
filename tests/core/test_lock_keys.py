"""Lock keys: the seed's layout, escaping, canonical numbers and the digest form."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pynamodb.attributes import BinaryAttribute, NumberAttribute, UnicodeAttribute

from pynamodb_unique._core.constraint import Constraint
from pynamodb_unique._core.keys import MAX_PARTITION_KEY_BYTES, canonical_number, lock_key
from pynamodb_unique.exceptions import InvalidUniqueValue


def _constraint(name: str, *attributes: object, normalize: object = None) -> Constraint:
    n = len(attributes)
    return Constraint(name, tuple(f"a{i}" for i in range(n)), (normalize,) * n, attributes)  # type: ignore[arg-type]


EMAIL = _constraint("EMAIL", UnicodeAttribute(), normalize=str.casefold)
PAIR = _constraint("TENANT_SLUG", UnicodeAttribute(), UnicodeAttribute())
NUMBER = _constraint("N", NumberAttribute())


def test_key__seed_layout() -> None:
    """The seed's example key comes out exactly."""
    assert EMAIL.key(("Ada@Lovelace.io",)) == "UNIQ#EMAIL#ada@lovelace.io"


@pytest.mark.parametrize(
    ("left", "right"),
    [
        (("a#b", "c"), ("a", "b#c")),
        (("a%23", "b"), ("a#", "b")),
        (("%", "x"), ("%25", "x")),
        (("", "a#"), ("#", "a")),
    ],
)
def test_key__compound_parts_never_merge(left: tuple[str, str], right: tuple[str, str]) -> None:
    """Separators and escapes inside parts cannot make two tuples share a key."""
    assert PAIR.key(left) != PAIR.key(right)


@pytest.mark.parametrize("value", [1, 1.0])
def test_key__equal_numbers_share_a_key(value: float) -> None:
    """1, 1.0 and other spellings of one number give one key."""
    assert NUMBER.key((value,)) == NUMBER.key((1,)) == "UNIQ#N#%N1"


@pytest.mark.parametrize(
    ("spelling", "canonical"),
    [("1.00", "1"), ("-0", "0"), ("0E+5", "0"), ("100", "1E+2"), ("1e-130", "1E-130"), ("-2.50", "-2.5")],
)
def test_canonical_number__spellings(spelling: str, canonical: str) -> None:
    """Decimal spellings of one number become one string; Decimal('1.00') included."""
    assert canonical_number(spelling) == canonical
    assert canonical_number(str(Decimal(spelling))) == canonical


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_key__non_finite_number__refused(value: float) -> None:
    """NaN and infinity cannot be stored by DynamoDB; they are refused before any request."""
    with pytest.raises(InvalidUniqueValue):
        NUMBER.key((value,))


def test_key__none_part__no_lock() -> None:
    """A compound with any None part takes no lock, as NULLs are distinct in SQL."""
    assert PAIR.key(("acme", None)) is None
    assert PAIR.key((None, None)) is None


def test_key__long_value__digest_form_within_limit() -> None:
    """A value too long for a 2048-byte partition key gets a digest key, still distinct."""
    prefix = "x" * 2040
    first, second = EMAIL.key((prefix + "a" * 960,)), EMAIL.key((prefix + "b" * 960,))
    assert first is not None
    assert second is not None
    assert first != second
    assert first.startswith("UNIQ#EMAIL#%H")
    assert len(first.encode()) <= MAX_PARTITION_KEY_BYTES


def test_key__value_spelling_a_digest__stays_plain() -> None:
    """A string that spells the digest marker is escaped, so it never equals a digest key."""
    key = EMAIL.key(("%h" + "0" * 64,))
    assert key == "UNIQ#EMAIL#%25h" + "0" * 64


def test_key__binary__encoded() -> None:
    """Binary values are keyed by their base64 form."""
    binary = _constraint("B", BinaryAttribute(legacy_encoding=False))
    assert binary.key((b"\x00\xff",)) == "UNIQ#B#%BAP8="


@pytest.mark.parametrize("value", ["1E+126", "1E-131", "1" * 39, "-9.9E+126"])
def test_canonical_number__outside_dynamodb__refused(value: str) -> None:
    """Numbers DynamoDB cannot store are refused before any request."""
    with pytest.raises(InvalidUniqueValue, match="38 significant digits"):
        canonical_number(value)


def test_canonical_number__exact_beyond_28_digits() -> None:
    """Numbers differing only past Decimal's default 28 digits keep distinct keys."""
    assert canonical_number(str(10**29 + 1)) != canonical_number(str(10**29 + 2))
    assert canonical_number("9" * 38) == "9" * 38


def test_key__lone_surrogate__refused() -> None:
    """A string DynamoDB cannot store is refused with a clear error."""
    with pytest.raises(InvalidUniqueValue, match="surrogate"):
        PAIR.key(("\ud800", "x"))


def test_lock_key__boundary_2048_bytes() -> None:
    """A key of exactly 2048 bytes stays plain; one byte more becomes a digest."""
    prefix = "UNIQ#N#"
    assert lock_key("N", ["a" * (2048 - len(prefix))]) == prefix + "a" * (2048 - len(prefix))
    assert lock_key("N", ["a" * (2049 - len(prefix))]).startswith(prefix + "%H")


@pytest.mark.parametrize("char", ["a", "é", "€", "😀"])
def test_lock_key__boundary_2048_bytes_multibyte(char: str) -> None:
    """Measured in bytes of UTF-8 for 1- to 4-byte characters, past the short-key shortcut (512 characters)."""
    prefix = "UNIQ#N#"
    width = len(char.encode())
    fits = (MAX_PARTITION_KEY_BYTES - len(prefix)) // width
    assert lock_key("N", [char * fits]) == prefix + char * fits
    assert lock_key("N", [char * (fits + 1)]).startswith(prefix + "%H")


@given(st.text(alphabet=st.sampled_from("aé€😀"), min_size=400, max_size=2100))
def test_lock_key__digest_iff_over_2048_bytes(value: str) -> None:
    """A key is a digest exactly when its plain form exceeds 2048 bytes (Hypothesis)."""
    plain = "UNIQ#N#" + value
    key = lock_key("N", [value])
    assert (key == plain) == (len(plain.encode()) <= MAX_PARTITION_KEY_BYTES)


def test_key__wrong_number_of_values__refused() -> None:
    """One value per attribute of the constraint, or a ValueError (never a key of some of them)."""
    with pytest.raises(ValueError, match="takes 2 values, got 1"):
        PAIR.key(("acme",))
    with pytest.raises(ValueError, match="takes 1 values, got 2"):
        EMAIL.key(("a@x.io", "b@x.io"))


class _Upper(UnicodeAttribute):
    """A string attribute whose own ``serialize`` changes the value."""

    def serialize(self, value: str) -> str:
        return value.upper()


def test_key__attribute_serialize__used_when_overridden() -> None:
    """A key is built from what the attribute serializes (an override of PynamoDB's ``serialize`` runs)."""
    assert _constraint("U", _Upper()).key(("ab",)) == "UNIQ#U#AB"
    assert _constraint("U", UnicodeAttribute()).key(("ab",)) == "UNIQ#U#ab"


_text = st.text(alphabet=st.sampled_from("ab#%\\|23HNB:é😀"), max_size=6)


@given(st.tuples(_text, _text), st.tuples(_text, _text))
def test_key__distinct_tuples_distinct_keys(left: tuple[str, str], right: tuple[str, str]) -> None:
    """Distinct compound values never share a key (Hypothesis)."""
    if left != right:
        assert PAIR.key(left) != PAIR.key(right)


# Within DynamoDB's numbers: 38 significant digits, magnitude below 1E+126.
_numbers = st.integers(-(10**38) + 1, 10**38 - 1) | st.decimals(
    min_value=-(10**30), max_value=10**30, allow_nan=False, allow_infinity=False, places=3
)


@given(_numbers, _numbers)
def test_key__numbers_equal_iff_keys_equal(left: object, right: object) -> None:
    """Two numbers share a key exactly when they are equal (Hypothesis)."""
    same_key = canonical_number(str(left)) == canonical_number(str(right))
    assert same_key == (Decimal(str(left)) == Decimal(str(right)))


_maybe_text = st.one_of(st.none(), st.text(alphabet=st.sampled_from("aB#%é😀\ud800"), max_size=4))


@given(_maybe_text, _maybe_text)
def test_key_of__same_as_key_of_the_values(first: str | None, second: str | None) -> None:
    """``key_of(mapping)`` (one attribute: no tuple built) gives ``key(values(mapping))``, or its error (Hypothesis)."""

    def outcome(compute: Callable[[], str | None]) -> str | None:
        try:
            return compute()
        except InvalidUniqueValue as error:
            return f"refused: {error.msg}"

    for constraint, source in ((EMAIL, {"a0": first}), (PAIR, {"a0": first, "a1": second}), (EMAIL, {})):
        expected = outcome(lambda: constraint.key(constraint.values(source)))  # noqa: B023 - called at once.
        assert outcome(lambda: constraint.key_of(source)) == expected  # noqa: B023 - called at once.
