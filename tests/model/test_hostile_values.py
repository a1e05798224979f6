"""Hostile values, table-driven: each one is stored and locked, or refused before any request.

A value that is accepted must be stored and locked under its constraint, collide with every value
listed as equal to it (``UniqueViolation`` naming that constraint and the first record as owner)
and with nothing listed as distinct. A refused value must raise ``InvalidUniqueValue`` before
anything is sent, through ``save()`` and through ``update()``. Attribute types that cannot be
unique are refused when the class is defined (``UniqueConfigError``).
"""

from __future__ import annotations

import functools
import unicodedata
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pytest
from _backends import Backend, RequestCounter, bind_model
from _invariant import actual_locks, assert_invariant, raw_items
from pynamodb.attributes import (
    Attribute,
    BinaryAttribute,
    BinarySetAttribute,
    BooleanAttribute,
    JSONAttribute,
    ListAttribute,
    MapAttribute,
    NumberAttribute,
    NumberSetAttribute,
    UnicodeAttribute,
    UnicodeSetAttribute,
)
from pynamodb.models import Model

from pynamodb_unique import (
    InvalidUniqueValue,
    UniqueAttribute,
    UniqueConfigError,
    UniqueConstraint,
    UniqueMixin,
    UniqueViolation,
)
from pynamodb_unique._model.context import context_of
from pynamodb_unique._model.registry import planner_of


def nfkc_casefold(value: str) -> str:
    """Compatibility-normalize, then case-fold: the usual key for user-visible identifiers."""
    return unicodedata.normalize("NFKC", value).casefold()


class Hostile(UniqueMixin, Model):
    """One unique attribute per kind of value, and two compound constraints."""

    class Meta:
        table_name = "hostile"
        region = "us-east-1"
        unique_constraints = [
            UniqueConstraint("part_a", "part_b", name="PAIR"),
            UniqueConstraint("part_a", "amount", name="MIXED"),
        ]

    pk = UnicodeAttribute(hash_key=True)
    text = UniqueAttribute(UnicodeAttribute(null=True))
    folded = UniqueAttribute(UnicodeAttribute(null=True), normalize=nfkc_casefold)
    number = UniqueAttribute(NumberAttribute(null=True))
    blob = UniqueAttribute(BinaryAttribute(null=True, legacy_encoding=False))
    legacy_blob = UniqueAttribute(BinaryAttribute(null=True, legacy_encoding=True))
    part_a = UnicodeAttribute(null=True)
    part_b = UnicodeAttribute(null=True)
    amount = NumberAttribute(null=True)


# --- summary ---------------------------------------------------------------------------------


class _Summary:
    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.counts:
            return
        terminalreporter.write_sep("-", "test_hostile: hostile values tried")
        for name, count in sorted(self.counts.items()):
            terminalreporter.write_line(f"  {name}: {count}")


SUMMARY = _Summary()


@pytest.fixture(scope="module", autouse=True)
def _print_summary(request: pytest.FixtureRequest) -> None:
    plugins = request.config.pluginmanager
    if not plugins.is_registered(SUMMARY):
        plugins.register(SUMMARY, "pynamodb-unique-hostile-summary")


# --- the table -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """A hostile value for one constraint, and what must happen to it.

    Attributes:
        constraint: the constraint's name.
        value: the value (a tuple for a compound constraint).
        equals: values that must collide with it.
        distinct: values that must not collide with it (nor with each other).
        refused: the error raised before any request, or None when the value is accepted.
        locked: whether an accepted value takes a lock (False when a compound part is None).
        action_refused: PynamoDB itself cannot serialize the value into an update action
            (``NumberAttribute`` and ``Decimal``: ``json.dumps`` refuses it with a TypeError).
    """

    constraint: str
    value: Any
    equals: tuple[Any, ...] = ()
    distinct: tuple[Any, ...] = ()
    refused: type[Exception] | None = None
    locked: bool = True
    action_refused: bool = False


def _key(values: dict[str, Any], constraint: str) -> str | None:
    planner = planner_of(Hostile)
    assert planner is not None
    return planner.keys(values)[constraint]


_LONG = "x" * 3000
#: The lock key of the 3,000-character value is a digest; a string may spell that digest form.
_LONG_DIGEST = str(_key({"text": _LONG}, "TEXT")).rpartition("#")[2]
_PREFIX = "p" * 2040
_BYTES = bytes(range(256)) * 12
_REFUSED = InvalidUniqueValue

CASES: dict[str, Case] = {
    # Separators and escapes, alone and inside values.
    "hash": Case("TEXT", "#", ("#",), ("%23", "##", "%", "")),
    "percent": Case("TEXT", "%", ("%",), ("%25", "%%", "%2")),
    "backslash": Case("TEXT", "\\", ("\\",), ("\\\\", "/", "%5C")),
    "pipe": Case("TEXT", "|", ("|",), ("||", "%7C", "\u00a6")),
    "separators-inside": Case("TEXT", "a#b%c|d\\e", ("a#b%c|d\\e",), ("a%23b%25c|d\\e", "a#b%c|d\\e#", "a#b")),
    "lock-key-lookalike": Case("TEXT", "UNIQ#TEXT#x", (), ("x", "UNIQ%23TEXT%23x", "UNIQ#TEXT#")),
    "digest-lookalike": Case("TEXT", "%H" + _LONG_DIGEST, (), (_LONG, "%h" + _LONG_DIGEST)),
    "number-lookalike": Case("TEXT", "%N1", (), ("1", "%n1")),
    # Empty, blank and control characters.
    "empty": Case("TEXT", "", ("",), (" ", "\x00", "#")),
    "whitespace-only": Case("TEXT", " ", (" ",), ("  ", "\t", "\u00a0", "\u3000")),
    "nul-inside": Case("TEXT", "a\x00b", ("a\x00b",), ("ab", "a", "a\x00")),
    # Length: DynamoDB's 2048-byte partition key, and the digest form past it.
    "3000-chars": Case("TEXT", _LONG, (_LONG,), ("x" * 2999, "x" * 3001, "y" + _LONG[1:])),
    "shared-2040-prefix": Case("TEXT", _PREFIX + "a" * 960, (_PREFIX + "a" * 960,), (_PREFIX + "b" * 960, _PREFIX)),
    "key-at-2048-bytes": Case("TEXT", "k" * 2038, ("k" * 2038,), ("k" * 2039, "k" * 2037)),
    "multibyte-at-2048-bytes": Case("TEXT", "\u00e9" * 1019, (), ("\u00e9" * 1020, "e\u0301" * 1019)),
    "escapes-past-limit": Case("TEXT", "#" * 700, ("#" * 700,), ("%23" * 700, "#" * 699)),
    # Characters outside the Basic Multilingual Plane.
    "emoji": Case("TEXT", "\U0001f984", ("\U0001f984",), ("\U0001f984" * 2, "\U0001f984\ufe0f", "?")),
    "emoji-at-limit": Case("TEXT", "\U0001f984" * 509, (), ("\U0001f984" * 510, "\U0001f984" * 508)),
    "nfc-vs-nfd-unnormalized": Case("TEXT", "caf\u00e9", (), ("cafe\u0301", "cafe")),
    "lone-surrogate": Case("TEXT", "\ud83e", refused=_REFUSED),
    # NFKC + casefold.
    "nfc-nfd-folded": Case(
        "FOLDED", "Caf\u00e9", ("CAFE\u0301", "caf\u00e9", "\uff23\uff21\uff26\uff25\u0301"), ("cafe",)
    ),
    "ligature": Case("FOLDED", "\ufb01le", ("FILE", "file"), ("fiie",)),
    "sharp-s": Case("FOLDED", "Stra\u00dfe", ("STRASSE", "strasse"), ("strase",)),
    "math-bold-non-bmp": Case("FOLDED", "\U0001d400\U0001d403\U0001d400", ("ada", "ADA"), ("ad",)),
    "kelvin-sign": Case("FOLDED", "\u212a", ("k", "K"), ("\u03ba",)),
    "dotless-i": Case("FOLDED", "\u0131", (), ("i", "\u0130")),
    "ideographic-space": Case("FOLDED", "\u3000", (" ",), ("  ", "")),
    "folded-emoji": Case("FOLDED", "\U0001f984", ("\U0001f984",), ()),
    "folded-not-a-string": Case("FOLDED", 42, refused=_REFUSED),
    # Numbers: one number, one lock, whatever its spelling.
    "one": Case("NUMBER", 1, (1.0,), (1.5, -1, 10, 0.1)),
    "negative-zero": Case("NUMBER", -0.0, (0, 0.0), (1e-130, -1)),
    "decimal-1.00": Case("NUMBER", Decimal("1.00"), refused=_REFUSED, action_refused=True),
    "int-10**40": Case("NUMBER", 10**40, (1e40,), (10**39, 10**41)),
    "float-sum": Case("NUMBER", 0.1 + 0.2, (), (0.3,)),
    "dynamodb-max-exponent": Case("NUMBER", 1e125, (10**125,), (2e125,)),
    "dynamodb-min-exponent": Case("NUMBER", 1e-130, (), (2e-130, 1e-129)),
    "30-significant-digits": Case("NUMBER", 10**29 + 1, (), (10**29 + 2, 10**29)),
    "41-significant-digits": Case("NUMBER", 10**40 + 1, refused=_REFUSED),
    "1e308": Case("NUMBER", 1e308, refused=_REFUSED),
    "1e-300": Case("NUMBER", 1e-300, refused=_REFUSED),
    "1e126": Case("NUMBER", 1e126, refused=_REFUSED),
    "nan": Case("NUMBER", float("nan"), refused=_REFUSED),
    "infinity": Case("NUMBER", float("inf"), refused=_REFUSED),
    "bool": Case("NUMBER", True, refused=_REFUSED),
    "numeric-string": Case("NUMBER", "1", refused=_REFUSED),
    # Binary.
    "bytes-with-separators": Case("BLOB", b"\x00\xff#%", (b"\x00\xff#%",), (b"\x00\xff#", b"\x00\xff#%\x00")),
    "empty-bytes": Case("BLOB", b"", (b"",), (b"\x00", b" ")),
    "3072-bytes": Case("BLOB", _BYTES, (_BYTES,), (_BYTES + b"\x00", _BYTES[:-1])),
    "string-in-binary": Case("BLOB", "text", refused=_REFUSED),
    "legacy-encoded-bytes": Case("LEGACY_BLOB", b"\x00\xff", (b"\x00\xff",), (b"\x00", b"\xff\x00")),
    # Compound values: separators in parts, empty parts, None in each position.
    "separator-moves-between-parts": Case(
        "PAIR", ("a#b", "c"), (("a#b", "c"),), (("a", "b#c"), ("a#b#c", ""), ("a%23b", "c"), ("a", "b%23c"))
    ),
    "percent-parts": Case("PAIR", ("%", "%"), (("%", "%"),), (("%%", ""), ("%", "%%"), ("%25", "%"))),
    "empty-parts": Case("PAIR", ("", ""), (("", ""),), (("", " "), (" ", ""), ("#", ""))),
    "long-parts": Case("PAIR", (_LONG, "y"), ((_LONG, "y"),), ((_LONG, "z"), ("y", _LONG))),
    "none-first": Case("PAIR", (None, "b"), (), ((None, "b"),), locked=False),
    "none-second": Case("PAIR", ("a", None), (), (("a", None),), locked=False),
    "none-both": Case("PAIR", (None, None), (), ((None, None),), locked=False),
    "string-and-number": Case("MIXED", ("1", 1), (("1", 1.0),), (("1", 10), ("%N1", 1), ("1#", 1), ("", 11))),
    "number-part-none": Case("MIXED", ("x", None), (), (("x", None),), locked=False),
    "string-part-none": Case("MIXED", (None, 1), (), ((None, 1),), locked=False),
    "number-part-decimal": Case("MIXED", ("x", Decimal("1.00")), refused=_REFUSED, action_refused=True),
}


def _names(constraint: str) -> tuple[str, ...]:
    planner = planner_of(Hostile)
    assert planner is not None
    (found,) = (c for c in planner.constraints if c.name == constraint)
    return found.attributes


def _assign(constraint: str, value: Any) -> dict[str, Any]:
    names = _names(constraint)
    values = value if len(names) > 1 else (value,)
    return dict(zip(names, values, strict=True))


@pytest.fixture
def hostile(backend: Backend) -> type[Hostile]:
    return bind_model(Hostile, backend)


def _set(model: type[Hostile], values: dict[str, Any]) -> list[Any]:
    return [getattr(model, name).set(value) for name, value in values.items() if value is not None]


def _expect_violation(case: Case, write: Callable[[], object]) -> None:
    with pytest.raises(UniqueViolation) as info:
        write()
    assert [v.constraint for v in info.value.violations] == [case.constraint]
    assert info.value.violations[0].owner == ("first",)


#: Accepted values whose storage is the server's business: keys near DynamoDB's 2048-byte limit
#: (moto accepts a longer GetItem key), numbers and bytes as the server stores and returns them,
#: empty strings and bytes. They run on dynoxide too; the rest (refused before any request, or
#: plain text the library encodes) on moto.
SERVER_CASES = frozenset(
    name
    for name, case in CASES.items()
    if case.refused is None
    and (
        case.constraint in {"NUMBER", "BLOB", "LEGACY_BLOB", "MIXED"}
        or name in {"3000-chars", "shared-2040-prefix", "key-at-2048-bytes", "multibyte-at-2048-bytes"}
        or name in {"escapes-past-limit", "emoji-at-limit", "long-parts", "empty", "nul-inside", "empty-parts"}
    )
)


@pytest.mark.parametrize("case", [pytest.param(c, id=n) for n, c in CASES.items() if n not in SERVER_CASES])
def test_hostile_value__stored_and_locked_or_refused_before_request(hostile: type[Hostile], case: Case) -> None:
    """A hostile value is locked and collides exactly with its equals, or is refused before any request."""
    _stored_and_locked_or_refused(hostile, case)


@pytest.mark.backends("moto", "dynoxide")
@pytest.mark.parametrize("case", [pytest.param(c, id=n) for n, c in CASES.items() if n in SERVER_CASES])
def test_hostile_value__at_key_limits_numbers_and_bytes__same_on_a_real_server(
    hostile: type[Hostile], case: Case
) -> None:
    """A value near the key limit, a number or bytes: locked, colliding exactly with its equals, on both backends."""
    _stored_and_locked_or_refused(hostile, case)


def _stored_and_locked_or_refused(hostile: type[Hostile], case: Case) -> None:
    tried = 1 + len(case.equals) + len(case.distinct)
    if case.refused is not None:
        existing = hostile(pk="existing")
        existing.save()
        values = _assign(case.constraint, case.value)
        with RequestCounter(hostile) as counter:
            with pytest.raises(case.refused, match="|".join(values)):
                hostile(pk="first", **values).save()
            if case.action_refused:
                with pytest.raises(TypeError, match="not JSON serializable"):
                    _set(hostile, values)
            else:
                with pytest.raises(case.refused, match="|".join(values)):
                    existing.update(actions=_set(hostile, values))
        assert counter.operations == []
        assert len(raw_items(hostile)) == 1
        SUMMARY.counts["refused before any request"] += tried
        return

    first = hostile(pk="first", **_assign(case.constraint, case.value))
    first.save()
    key = context_of(type(first)).lock_keys(first)[case.constraint]
    if case.locked:
        assert key is not None
        assert actual_locks(hostile) == {key: ("first",)}
        assert context_of(hostile).lock_keys(hostile.get("first"))[case.constraint] == key
    else:
        assert key is None
        assert actual_locks(hostile) == {}
    for i, equal in enumerate(case.equals):
        values = _assign(case.constraint, equal)
        _expect_violation(case, hostile(pk=f"equal-{i}", **values).save)
        other = hostile(pk=f"updated-{i}")
        other.save()
        _expect_violation(case, functools.partial(other.update, actions=_set(hostile, values)))
    for i, other_value in enumerate(case.distinct):
        hostile(pk=f"distinct-{i}", **_assign(case.constraint, other_value)).save()
    assert len(actual_locks(hostile)) == (1 + len(case.distinct) if case.locked else 0)
    assert_invariant(hostile)
    SUMMARY.counts["stored and locked, collided exactly with their equals"] += tried


_UNSUPPORTED: dict[str, Callable[[], Attribute[Any]]] = {
    "unicode-set": UnicodeSetAttribute,
    "number-set": NumberSetAttribute,
    "binary-set": lambda: BinarySetAttribute(legacy_encoding=False),
    "map": lambda: MapAttribute(null=True),
    "list": lambda: ListAttribute(null=True),
    "json": lambda: JSONAttribute(null=True),
    "bool": lambda: BooleanAttribute(null=True),
}


def _define_with_unique_attribute(make: Callable[[], Attribute[Any]]) -> type[Model]:
    class Tagged(UniqueMixin, Model):
        class Meta:
            table_name = "tagged"

        pk = UnicodeAttribute(hash_key=True)
        tags = UniqueAttribute(make())

    return Tagged


def _define_with_unique_constraint(make: Callable[[], Attribute[Any]]) -> type[Model]:
    class TaggedPair(UniqueMixin, Model):
        class Meta:
            table_name = "tagged"
            unique_constraints = [UniqueConstraint("name", "tags")]

        pk = UnicodeAttribute(hash_key=True)
        name = UnicodeAttribute(null=True)
        tags = make()

    return TaggedPair


@pytest.mark.parametrize(
    "define", [_define_with_unique_attribute, _define_with_unique_constraint], ids=["attribute", "constraint"]
)
@pytest.mark.parametrize("make", list(_UNSUPPORTED.values()), ids=list(_UNSUPPORTED))
def test_unsupported_type__refused_at_class_definition(
    make: Callable[[], Attribute[Any]], define: Callable[[Callable[[], Attribute[Any]]], type[Model]]
) -> None:
    """Sets, maps, lists, JSON and booleans cannot be unique: the class definition fails and says why."""
    with pytest.raises(UniqueConfigError, match="tags"):
        define(make)
    SUMMARY.counts["unsupported attribute types refused at class definition"] += 1
