"""validate_unique(): the locks a write would take, read before submit with one BatchGetItem."""

from __future__ import annotations

from typing import Any

import pytest
from _backends import Backend, RequestCounter, bind_model
from _invariant import raw_items
from models import Account, Ticket
from pynamodb.attributes import UnicodeAttribute
from pynamodb.models import Model

from pynamodb_unique import (
    InvalidUniqueValue,
    TransientError,
    UniqueAttribute,
    UniqueConstraint,
    UniqueMixin,
    UniqueViolation,
)
from pynamodb_unique._model.context import context_of
from pynamodb_unique._ops import validate as _validate
from pynamodb_unique._write import send as _send


class Profile(UniqueMixin, Model):
    """A partial handle (soft delete) and a hashed email."""

    class Meta:
        table_name = "validate-profiles"
        region = "us-east-1"
        unique_secret = b"validate-secret-0123456789abcdef"
        unique_constraints = [
            UniqueConstraint("handle", name="LIVE_HANDLE", condition=lambda item: item.status != "deleted"),
        ]

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    handle = UnicodeAttribute(null=True)
    status = UnicodeAttribute(null=True, default="active")
    email = UniqueAttribute(UnicodeAttribute(null=True), hashed=True, name="PROFILE_EMAIL")


@pytest.fixture
def profiles(backend: Backend) -> type[Profile]:
    return bind_model(Profile, backend)


def _ada(accounts: type[Account]) -> Account:
    ada = accounts(pk="ACCT#ada", email="ada@x.io", username="ada", tenant="acme", slug="home")
    ada.save()
    return ada


def _batch_keys(counter: RequestCounter) -> list[str]:
    """The lock keys of every BatchGetItem sent, in order."""
    keys = []
    for params in counter.params("BatchGetItem"):
        (request,) = params["RequestItems"].values()
        assert request["ConsistentRead"] is True
        keys.extend(k["PK"]["S"] for k in request["Keys"])
    return keys


def test_validate__all_free__none_one_consistent_batch_get_no_write(accounts: type[Account]) -> None:
    """Free values: returns None after exactly one BatchGetItem (strongly consistent) and writes nothing."""
    _ada(accounts)
    before = raw_items(accounts)
    grace = accounts(pk="ACCT#grace", email="grace@x.io", username="grace", tenant="acme", slug="blog")
    with RequestCounter() as counter:
        assert grace.validate_unique() is None
    assert counter.operations == ["BatchGetItem"]
    assert sorted(_batch_keys(counter)) == [
        "UNIQ#EMAIL#grace@x.io",
        "UNIQ#HANDLE#grace",
        "UNIQ#TENANT_SLUG#acme#blog",
    ]
    assert raw_items(accounts) == before


def test_validate__one_taken__violation_with_owner(accounts: type[Account]) -> None:
    """A value held by another record is reported with its owner, model, message and code, as a write would."""
    _ada(accounts)
    other = accounts(pk="ACCT#b", email="ADA@X.io", username="countess")
    with RequestCounter() as counter, pytest.raises(UniqueViolation) as info:
        other.validate_unique()
    (violation,) = info.value.violations
    assert (violation.constraint, violation.attributes, violation.values, violation.owner) == (
        "EMAIL",
        ("email",),
        ("ADA@X.io",),
        ("ACCT#ada", "PROFILE"),
    )
    assert (violation.owner_model, violation.message, violation.code) == (
        "Account",
        "email 'ADA@X.io' is already taken",
        "unique",
    )
    assert violation.instance is other
    assert counter.operations == ["BatchGetItem"]
    with pytest.raises(UniqueViolation) as saved:
        other.save()
    assert saved.value.violations == info.value.violations


def test_validate__several_taken__all_listed_in_declaration_order(accounts: type[Account]) -> None:
    """Every taken value is listed, single and compound, for the form's field errors."""
    _ada(accounts)
    other = accounts(pk="ACCT#b", email="ada@x.io", username="ada", tenant="acme", slug="home")
    with pytest.raises(UniqueViolation) as info:
        other.validate_unique()
    assert [v.constraint for v in info.value.violations] == ["EMAIL", "HANDLE", "TENANT_SLUG"]
    assert info.value.field_errors() == {
        "email": ["email 'ada@x.io' is already taken"],
        "username": ["username 'ada' is already taken"],
        "__all__": ["the combination of tenant 'acme' and slug 'home' is already taken"],
    }


def test_validate__own_locks__free(accounts: type[Account]) -> None:
    """The record's own values are no violation: an edit form re-validates what it loaded."""
    ada = _ada(accounts)
    assert ada.validate_unique() is None
    loaded = accounts.get("ACCT#ada", "PROFILE")
    loaded.email = "ADA@x.io"  # Normalizes to the lock Ada holds.
    assert loaded.validate_unique() is None
    accounts(pk="ACCT#b", email="b@x.io", username="bee").save()
    loaded.username = "bee"
    with pytest.raises(UniqueViolation) as info:
        loaded.validate_unique()
    assert [(v.constraint, v.owner) for v in info.value.violations] == [("HANDLE", ("ACCT#b", "PROFILE"))]


def test_validate__no_key_yet__every_held_value_taken(accounts: type[Account]) -> None:
    """An instance whose key is not set yet owns nothing: any held value is taken."""
    _ada(accounts)
    with pytest.raises(UniqueViolation) as info:
        accounts(email="ada@x.io").validate_unique()
    assert [v.owner for v in info.value.violations] == [("ACCT#ada", "PROFILE")]


def test_validate__exclude__constraints_touching_it_skipped(accounts: type[Account]) -> None:
    """Excluded attributes are not checked, nor any compound that includes them; nor are their keys read."""
    _ada(accounts)
    other = accounts(pk="ACCT#b", email="ada@x.io", username="ada", tenant="acme", slug="home")
    with RequestCounter() as counter, pytest.raises(UniqueViolation) as info:
        other.validate_unique(exclude=("email", "slug"))
    assert [v.constraint for v in info.value.violations] == ["HANDLE"]
    assert _batch_keys(counter) == ["UNIQ#HANDLE#ada"]
    with RequestCounter() as counter:
        assert other.validate_unique(exclude=["email", "username", "tenant"]) is None
    assert counter.operations == []


def test_validate__exclude__a_value_that_cannot_be_a_key_is_not_read(accounts: type[Account]) -> None:
    """A field that failed other validation can be excluded; checked, its value is refused before any request."""
    bad = accounts(pk="ACCT#b", email="\ud800@x.io", username="bee")
    with RequestCounter() as counter:
        with pytest.raises(InvalidUniqueValue):
            bad.validate_unique()
        assert bad.validate_unique(exclude={"email"}) is None
    assert _batch_keys(counter) == ["UNIQ#HANDLE#bee"]


@pytest.mark.parametrize(("exclude", "match"), [("email", "not the string"), (("emial",), r"\['emial'\]")])
def test_validate__exclude__typo_refused(accounts: type[Account], exclude: Any, match: str) -> None:
    """A misspelt or bare-string exclude would silently skip a check: refused before any request."""
    with RequestCounter() as counter, pytest.raises(InvalidUniqueValue, match=match):
        accounts(pk="ACCT#b", email="b@x.io").validate_unique(exclude=exclude)
    assert counter.operations == []


def test_validate__hashed__reads_the_hmac_key(profiles: type[Profile]) -> None:
    """A hashed constraint's lock is read under its HMAC key, as written; the message leaves the value out."""
    profiles(pk="P#1", email="ada@x.io").save()
    other = profiles(pk="P#2", email="ada@x.io")
    with RequestCounter() as counter, pytest.raises(UniqueViolation) as info:
        other.validate_unique()
    (key,) = _batch_keys(counter)
    assert key.startswith("UNIQ#PROFILE_EMAIL#%K")
    assert "ada" not in key
    (violation,) = info.value.violations
    assert (violation.constraint, violation.owner, violation.message) == (
        "PROFILE_EMAIL",
        ("P#1",),
        "email is already taken",
    )
    assert profiles(pk="P#2", email="grace@x.io").validate_unique() is None


def test_validate__partial_condition_false__not_checked(profiles: type[Profile]) -> None:
    """A soft-deleted record takes no handle lock, so validating it does not read one; active, it is checked."""
    profiles(pk="P#1", handle="ada").save()
    deleted = profiles(pk="P#2", handle="ada", status="deleted")
    with RequestCounter() as counter:
        assert deleted.validate_unique() is None
    assert counter.operations == []
    deleted.status = "active"
    with pytest.raises(UniqueViolation) as info:
        deleted.validate_unique()
    assert [(v.constraint, v.owner) for v in info.value.violations] == [("LIVE_HANDLE", ("P#1",))]


def test_validate__separate_lock_table__owner_in_key_types(tickets: type[Ticket]) -> None:
    """Locks in their own table are read there; the owner comes back in the record's key types."""
    tickets(id=7, code="a1").save()
    with RequestCounter() as counter, pytest.raises(UniqueViolation) as info:
        tickets(id=8, code="A1").validate_unique()
    assert [(v.owner, v.values) for v in info.value.violations] == [((7,), ("A1",))]
    (params,) = counter.params("BatchGetItem")
    assert list(params["RequestItems"]) == [tickets.Meta.unique_lock_table]  # type: ignore[attr-defined]
    assert tickets(id=7, code="A1").validate_unique() is None
    assert tickets(id=9, code="b2").validate_unique() is None


def test_read_locks__past_100_keys__chunked(accounts: type[Account]) -> None:
    """More than 100 keys go in requests of at most 100 (BatchGetItem's limit), every lock found."""
    _ada(accounts)
    context = context_of(accounts)
    assert context is not None
    keys = [f"UNIQ#HANDLE#u{i}" for i in range(248)] + ["UNIQ#EMAIL#ada@x.io", "UNIQ#HANDLE#ada"]
    with RequestCounter() as counter:
        found = _validate.read_locks(context.locks(), keys, attempts=3)
    assert sorted(found) == ["UNIQ#EMAIL#ada@x.io", "UNIQ#HANDLE#ada"]
    sizes = [len(next(iter(p["RequestItems"].values()))["Keys"]) for p in counter.params("BatchGetItem")]
    assert sizes == [100, 100, 50]


def _leave_unprocessed(monkeypatch: pytest.MonkeyPatch, rounds: int, processed: int) -> list[int]:
    """Make the first ``rounds`` BatchGetItem answers process only ``processed`` keys; return the sizes sent."""
    real = _send._batch_get
    sent: list[int] = []

    def partial(connection: Any, request: dict[str, Any]) -> dict[str, Any]:
        ((table, spec),) = request.items()
        keys = spec["Keys"]
        sent.append(len(keys))
        if len(sent) > rounds:
            return real(connection, request)
        kept = {table: {**spec, "Keys": keys[:processed]}}
        data = real(connection, kept) if processed else {"Responses": {table: []}}
        data["UnprocessedKeys"] = {table: {"Keys": keys[processed:], "ConsistentRead": True}}
        return data

    monkeypatch.setattr(_send, "_batch_get", partial)
    monkeypatch.setattr(_send, "sleep", lambda _: None)
    return sent


def test_validate__unprocessed_keys__read_again(accounts: type[Account], monkeypatch: pytest.MonkeyPatch) -> None:
    """Keys DynamoDB leaves unprocessed are read again until every lock is known."""
    _ada(accounts)
    sent = _leave_unprocessed(monkeypatch, rounds=1, processed=1)
    with pytest.raises(UniqueViolation) as info:
        accounts(pk="ACCT#b", email="ada@x.io", username="ada", tenant="acme", slug="home").validate_unique()
    assert [v.constraint for v in info.value.violations] == ["EMAIL", "HANDLE", "TENANT_SLUG"]
    assert sent == [3, 2]


def test_validate__unprocessed_keys_persist__transient_error(
    accounts: type[Account], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Keys still unprocessed after the model's retry attempts raise TransientError, not a false "free"."""
    _ada(accounts)
    sent = _leave_unprocessed(monkeypatch, rounds=100, processed=0)
    with pytest.raises(TransientError, match="unprocessed"):
        accounts(pk="ACCT#b", email="b@x.io", username="bee", tenant="t", slug="s").validate_unique()
    assert sent == [3, 3, 3, 3, 3]


def test_validate__model_without_constraints__nothing_read(backend: Backend) -> None:
    """A mixin model with no constraint has nothing to check."""

    class Plain(UniqueMixin, Model):
        class Meta:
            table_name = "validate-plain"
            region = "us-east-1"

        pk = UnicodeAttribute(hash_key=True)

    plain = bind_model(Plain, backend)
    with RequestCounter() as counter:
        assert plain(pk="x").validate_unique() is None
    assert counter.operations == []
