"""The lifecycle on moto and on dynoxide: one request each, never a read first."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from _backends import Backend, RequestCounter, bind_model
from _invariant import actual_locks, assert_invariant, raw_items
from models import Account, Plugin, Versioned
from pynamodb.exceptions import PutError
from pynamodb.expressions.operand import Path

from pynamodb_unique import (
    ConditionFailed,
    InvalidUniqueValue,
    TransactWrite,
    UniqueError,
    UniqueViolation,
    audit,
)

ADA_KEY = "UNIQ#EMAIL#ada@lovelace.io"


@pytest.fixture
def versioned(backend: Backend) -> Iterator[type[Versioned]]:
    return bind_model(Versioned, backend)


def _ada(model: type[Account], **extra: Any) -> Account:
    account = model(pk="ACCT#a1f9c3", email="ada@lovelace.io", username="ada", **extra)
    account.save()
    return account


def _transact_items(counter: RequestCounter) -> list[dict[str, Any]]:
    (params,) = counter.params("TransactWriteItems")
    items: list[dict[str, Any]] = params["TransactItems"]
    return items


@pytest.mark.backends("moto", "dynoxide")
def test_create__one_transaction_with_guarded_puts(accounts: type[Account]) -> None:
    """Create sends one TransactWriteItems: the record and each lock, all attribute_not_exists."""
    with RequestCounter(accounts) as counter:
        _ada(accounts)
    assert counter.operations == ["TransactWriteItems"]
    items = _transact_items(counter)
    assert [list(i) for i in items] == [["Put"], ["Put"], ["Put"]]
    keys = [i["Put"]["Item"]["PK"]["S"] for i in items]
    assert keys == ["ACCT#a1f9c3", ADA_KEY, "UNIQ#HANDLE#ada"]
    assert items[0]["Put"]["ConditionExpression"] == "attribute_not_exists (#0)"
    for lock in items[1:]:
        # Free, or already this record's own (a resend after a lost response).
        assert lock["Put"]["ConditionExpression"] == "(attribute_not_exists (#0) OR (#1 = :0 AND #2 = :1))"
        assert lock["Put"]["ReturnValuesOnConditionCheckFailure"] == "ALL_OLD"
        assert set(lock["Put"]["Item"]) == {
            "PK",
            "SK",
            "uniq_owner_hash",
            "uniq_owner_range",
            "uniq_constraint",
            "uniq_owner_model",
        }
        assert lock["Put"]["Item"]["uniq_owner_model"] == {"S": "Account"}
    token = counter.params("TransactWriteItems")[0]["ClientRequestToken"]
    assert 1 <= len(token) <= 36
    assert actual_locks(accounts) == {
        ADA_KEY: ("ACCT#a1f9c3", "PROFILE"),
        "UNIQ#HANDLE#ada": ("ACCT#a1f9c3", "PROFILE"),
    }
    assert_invariant(accounts)


def test_create__duplicate__violation_with_owner(accounts: type[Account]) -> None:
    """A taken email (differently cased) is refused field by field, owner named, nothing written."""
    _ada(accounts)
    other = accounts(pk="ACCT#0b7e", email="ADA@Lovelace.IO", username="ada")
    with pytest.raises(UniqueViolation) as info:
        other.save()
    violations = info.value.violations
    assert [(v.constraint, v.attributes, v.values, v.owner) for v in violations] == [
        ("EMAIL", ("email",), ("ADA@Lovelace.IO",), ("ACCT#a1f9c3", "PROFILE")),
        ("HANDLE", ("username",), ("ada",), ("ACCT#a1f9c3", "PROFILE")),
    ]
    assert str(violations[0]) == "email 'ADA@Lovelace.IO' is already taken"
    assert info.value.attributes == ("email", "username")
    assert isinstance(info.value, UniqueError)
    assert len(raw_items(accounts)) == 3
    assert_invariant(accounts)


def test_create__compound__collides_only_when_all_parts_match(accounts: type[Account]) -> None:
    """(tenant, slug) is unique as a pair; None in any part takes no lock."""
    accounts(pk="A", email="a@x", tenant="acme", slug="home").save()
    accounts(pk="B", email="b@x", tenant="acme", slug="blog").save()
    accounts(pk="C", email="c@x", tenant="acme", slug=None).save()
    accounts(pk="D", email="d@x", tenant="acme", slug=None).save()
    with pytest.raises(UniqueViolation) as info:
        accounts(pk="E", email="e@x", tenant="acme", slug="home").save()
    (violation,) = info.value.violations
    assert (violation.constraint, violation.values, violation.owner) == (
        "TENANT_SLUG",
        ("acme", "home"),
        ("A", "PROFILE"),
    )
    assert str(violation) == "the combination of tenant 'acme' and slug 'home' is already taken"
    assert_invariant(accounts)


def test_change_email__one_transaction_frees_old_value(accounts: type[Account]) -> None:
    """Changing email moves the lock in one request; the old value is free again."""
    ada = _ada(accounts)
    ada.email = "countess@lovelace.io"
    with RequestCounter(accounts) as counter:
        ada.save()
    assert counter.operations == ["TransactWriteItems"]
    items = _transact_items(counter)
    assert [next(iter(i)) for i in items] == ["Delete", "Put", "Put"]
    assert items[0]["Delete"]["Key"]["PK"]["S"] == ADA_KEY
    assert "uniq_owner_hash" in str(items[0]["Delete"]["ExpressionAttributeNames"])
    assert items[2]["Put"]["Item"]["PK"]["S"] == "UNIQ#EMAIL#countess@lovelace.io"
    accounts(pk="ACCT#0b7e", email="ada@lovelace.io").save()
    assert_invariant(accounts)


def test_save__no_unique_change__single_conditioned_put(accounts: type[Account]) -> None:
    """A save that changes no unique value is one PutItem, conditioned on the stored values."""
    ada = _ada(accounts)
    ada.bio = "mathematician"
    ada.email = "ADA@lovelace.io"  # Same value once normalized: no lock moves.
    with RequestCounter(accounts) as counter:
        ada.save()
    assert counter.operations == ["PutItem"]
    assert "ConditionExpression" in counter.params("PutItem")[0]
    assert accounts.get("ACCT#a1f9c3", "PROFILE").email == "ADA@lovelace.io"
    assert_invariant(accounts)


def test_update__non_unique__plain_update_item(accounts: type[Account]) -> None:
    """update() of other attributes is PynamoDB's own UpdateItem, no transaction."""
    ada = _ada(accounts)
    with RequestCounter(accounts) as counter:
        ada.update(actions=[accounts.bio.set("poet"), accounts.visits.add(1)])
    assert counter.operations == ["UpdateItem"]
    assert (ada.bio, ada.visits) == ("poet", 1)
    assert_invariant(accounts)


def test_update__unique_change__transaction_and_local_state(accounts: type[Account]) -> None:
    """update(actions) changing a unique value is one transaction, then returns and loads the item as PynamoDB."""
    ada = _ada(accounts)
    with RequestCounter(accounts) as counter:
        response = ada.update(
            actions=[accounts.email.set("new@x.io"), accounts.username.remove(), accounts.bio.set("b")]
        )
    # PynamoDB's update() returns the item after the write (ALL_NEW); a transaction returns none,
    # so it is read once, consistently, after the commit.
    assert counter.operations == ["TransactWriteItems", "GetItem"]
    assert counter.params("GetItem")[0]["ConsistentRead"] is True
    assert response["Attributes"] == next(i for i in raw_items(accounts) if i["PK"] == {"S": "ACCT#a1f9c3"})
    assert (ada.email, ada.username, ada.bio) == ("new@x.io", None, "b")
    stored = accounts.get("ACCT#a1f9c3", "PROFILE")
    assert (stored.email, stored.username, stored.bio) == ("new@x.io", None, "b")
    accounts(pk="B", username="ada", email="ada@lovelace.io").save()
    assert_invariant(accounts)


def test_update__unique_change_with_add__one_read_after_commit(accounts: type[Account]) -> None:
    """A non-literal action riding along is read back once, after the commit, never before."""
    ada = _ada(accounts, visits=1)
    with RequestCounter(accounts) as counter:
        ada.update(actions=[accounts.email.set("n@x.io"), accounts.visits.add(2)])
    assert counter.operations == ["TransactWriteItems", "GetItem"]
    assert counter.params("GetItem")[0]["ConsistentRead"] is True
    assert (ada.email, ada.visits) == ("n@x.io", 3)
    assert_invariant(accounts)


@pytest.mark.parametrize(
    "action",
    [
        lambda m: m.email.set(m.email | "x@y"),
        lambda m: m.email.set(m.bio),
        lambda m: Path(["email", "nested"]).set("x"),
    ],
    ids=["if_not_exists", "copy-attribute", "nested-path"],
)
def test_update__non_literal_unique_action__refused_before_request(accounts: type[Account], action: Any) -> None:
    """Only .set(literal) and .remove() may touch a unique attribute."""
    ada = _ada(accounts)
    with RequestCounter(accounts) as counter, pytest.raises(InvalidUniqueValue, match="email"):
        ada.update(actions=[action(accounts)])
    assert counter.operations == []


def test_delete__releases_locks_in_same_transaction(accounts: type[Account]) -> None:
    """Delete removes the record and its locks in one request; the values are free again."""
    ada = _ada(accounts, tenant="acme", slug="home")
    with RequestCounter(accounts) as counter:
        ada.delete()
    assert counter.operations == ["TransactWriteItems"]
    assert len(_transact_items(counter)) == 4
    assert raw_items(accounts) == []
    _ada(accounts)
    assert_invariant(accounts)


def test_delete__twice__succeeds(accounts: type[Account]) -> None:
    """Deleting a record that is already gone succeeds, as in PynamoDB."""
    ada = _ada(accounts)
    ada.delete()
    ada.delete()
    assert raw_items(accounts) == []


def test_delete__gone_record__releases_locks_it_still_owns(accounts: type[Account]) -> None:
    """A record deleted behind the library's back: delete() still frees its locks."""
    ada = _ada(accounts)
    client = accounts._get_connection().connection.client
    client.delete_item(TableName=accounts.Meta.table_name, Key={"PK": {"S": "ACCT#a1f9c3"}, "SK": {"S": "PROFILE"}})
    ada.delete()
    assert raw_items(accounts) == []


def test_overwrite_unknown_state__two_requests_releases_old_locks(accounts: type[Account]) -> None:
    """save() of a hand-built instance over a stored record replaces it: two requests at most."""
    _ada(accounts, tenant="acme", slug="home")
    fresh = accounts(pk="ACCT#a1f9c3", email="other@x.io")
    with RequestCounter(accounts) as counter:
        fresh.save()
    assert counter.operations == ["TransactWriteItems", "TransactWriteItems"]
    first, second = counter.params("TransactWriteItems")
    assert first["ClientRequestToken"] != second["ClientRequestToken"]
    assert len(second["ClientRequestToken"]) <= 36
    assert set(actual_locks(accounts)) == {"UNIQ#EMAIL#other@x.io"}
    accounts(pk="B", email="ada@lovelace.io", username="ada", tenant="acme", slug="home").save()
    assert_invariant(accounts)


def test_delete_unknown_state__releases_every_lock(accounts: type[Account]) -> None:
    """Account(pk=...).delete() releases the stored record's locks."""
    _ada(accounts, tenant="acme", slug="home")
    with RequestCounter(accounts) as counter:
        accounts(pk="ACCT#a1f9c3").delete()
    assert len(counter.operations) == 2
    assert raw_items(accounts) == []


def test_stale_instance__last_writer_wins_without_orphans(accounts: type[Account]) -> None:
    """Two views of one record: the stale one re-plans from the stored item."""
    first = _ada(accounts)
    stale = accounts.get("ACCT#a1f9c3", "PROFILE")
    first.email = "one@x.io"
    first.save()
    stale.email = "two@x.io"
    stale.save()
    assert set(actual_locks(accounts)) == {"UNIQ#EMAIL#two@x.io", "UNIQ#HANDLE#ada"}
    assert_invariant(accounts)
    stale_bio = accounts.get("ACCT#a1f9c3", "PROFILE")
    stale.email = "three@x.io"
    stale.save()
    stale_bio.bio = "only the bio"
    stale_bio.save()  # Its email (two@) is stale: re-planned, the lock follows.
    assert set(actual_locks(accounts)) == {"UNIQ#EMAIL#two@x.io", "UNIQ#HANDLE#ada"}
    assert_invariant(accounts)


def test_stale_delete__releases_the_stored_values(accounts: type[Account]) -> None:
    """Deleting through a stale instance releases what is stored, not what it saw."""
    first = _ada(accounts)
    stale = accounts.get("ACCT#a1f9c3", "PROFILE")
    first.email = "moved@x.io"
    first.save()
    stale.delete()
    assert raw_items(accounts) == []


@pytest.mark.backends("moto", "dynoxide")
def test_condition_failed__caller_condition__instance_unchanged(accounts: type[Account]) -> None:
    """The caller's failing condition is ConditionFailed (also a PutError); nothing changes."""
    ada = _ada(accounts)
    ada.email = "n@x.io"
    with pytest.raises(ConditionFailed) as info:
        ada.save(condition=accounts.bio == "never")
    assert isinstance(info.value, PutError)
    assert not isinstance(info.value, UniqueViolation)
    assert ada.email == "n@x.io"
    assert set(actual_locks(accounts)) == {ADA_KEY, "UNIQ#HANDLE#ada"}
    ada.save()
    assert_invariant(accounts)


def test_version__stale_version_conflict__not_a_violation(versioned: type[Versioned]) -> None:
    """Models with a VersionAttribute keep PynamoDB's optimistic locking."""
    one = versioned(id="v1", handle="h1")
    one.save()
    assert one.version == 1
    two = versioned.get("v1")
    one.handle = "h2"
    one.save()
    assert one.version == 2
    two.handle = "h3"
    with pytest.raises(ConditionFailed):
        two.save()
    assert two.version == 1
    two.handle = "h1"
    two.note = "note only"
    with pytest.raises(ConditionFailed):
        two.save()
    assert set(actual_locks(versioned)) == {"UNIQ#HANDLE#h2"}
    two.save(add_version_condition=False)  # Last writer wins, and the lock follows.
    assert set(actual_locks(versioned)) == {"UNIQ#HANDLE#h1"}
    assert_invariant(versioned)


def test_scan_and_query__never_yield_locks(accounts: type[Account]) -> None:
    """scan() and query() return records only."""
    _ada(accounts)
    assert [a.pk for a in accounts.scan()] == ["ACCT#a1f9c3"]
    assert [a.pk for a in accounts.query("ACCT#a1f9c3")] == ["ACCT#a1f9c3"]
    assert list(accounts.query(ADA_KEY)) == []


def test_batch_write__refused(accounts: type[Account]) -> None:
    """batch_write() cannot carry conditions: refused before writing."""
    with pytest.raises(UniqueError, match="batch_write"):
        accounts.batch_write()


def test_hash_key_in_lock_space__refused(accounts: type[Account]) -> None:
    """A record whose hash key starts with UNIQ# would live among the locks: refused."""
    with RequestCounter(accounts) as counter, pytest.raises(InvalidUniqueValue, match="UNIQ#"):
        accounts(pk="UNIQ#EMAIL#x", email="x@y").save()
    assert counter.operations == []


@pytest.mark.parametrize("token", ["", "x" * 37])
def test_token__bad__refused_before_request(accounts: type[Account], token: str) -> None:
    """ClientRequestToken must have 1 to 36 characters."""
    with RequestCounter(accounts) as counter, pytest.raises(InvalidUniqueValue, match="client_request_token"):
        accounts(pk="A", email="a@x").save(client_request_token=token)
    assert counter.operations == []


@pytest.mark.backends("moto", "dynoxide")
def test_token__caller_token_sent_and_replay_is_noop(accounts: type[Account]) -> None:
    """A caller's token is sent as is; resending the same state with it does not collide."""
    with RequestCounter(accounts) as counter:
        accounts(pk="A", email="a@x", username="u").save(client_request_token="signup-42")
        accounts(pk="A", email="a@x", username="u").save(client_request_token="signup-42")
    assert counter.params("TransactWriteItems")[0]["ClientRequestToken"] == "signup-42"
    assert set(actual_locks(accounts)) == {"UNIQ#EMAIL#a@x", "UNIQ#HANDLE#u"}
    assert_invariant(accounts)


def test_bad_value__refused_before_request(accounts: type[Account]) -> None:
    """A value that cannot be keyed is refused with a clear error, nothing sent."""
    with RequestCounter(accounts) as counter, pytest.raises(InvalidUniqueValue, match="username"):
        accounts(pk="A", email="a@x", username="\ud800").save()
    assert counter.operations == []


@pytest.mark.backends("moto", "dynoxide")
def test_request__same_state_and_token__same_bytes(accounts: type[Account]) -> None:
    """The same instance state and token give the same request, byte for byte."""
    bodies = []
    for _ in range(2):
        with RequestCounter(accounts) as counter:
            accounts(pk="A", email="a@x.io", username="u", tenant="t", slug="s").save(client_request_token="tok-1")
        bodies.append(counter.params("TransactWriteItems")[0])
        accounts(pk="A").delete()
    # json.loads keeps the wire order of keys, so equal dumps mean equal request bodies.
    assert json.dumps(bodies[0]) == json.dumps(bodies[1])
    assert bodies[0]["ClientRequestToken"] == "tok-1"


@pytest.mark.backends("moto", "dynoxide")
def test_delete__foreign_lock__left_to_its_owner_checked_atomically(accounts: type[Account]) -> None:
    """A record whose value's lock belongs to another record: delete leaves that lock alone."""
    ada = _ada(accounts)
    client = accounts._get_connection().connection.client
    # Damage the table as a non-library writer would: the email lock now names another owner.
    client.put_item(
        TableName=accounts.Meta.table_name,
        Item={
            "PK": {"S": ADA_KEY},
            "SK": {"S": "LOCK"},
            "uniq_owner_hash": {"S": "ACCT#other"},
            "uniq_owner_range": {"S": "PROFILE"},
            "uniq_constraint": {"S": "EMAIL"},
        },
    )
    with RequestCounter(accounts) as counter:
        ada.delete()
    assert counter.operations == ["TransactWriteItems", "TransactWriteItems"]
    second = counter.params("TransactWriteItems")[1]["TransactItems"]
    assert "ConditionCheck" in second[0]
    assert second[0]["ConditionCheck"]["Key"]["PK"]["S"] == ADA_KEY
    assert actual_locks(accounts) == {ADA_KEY: ("ACCT#other", "PROFILE")}
    assert [i["PK"]["S"] for i in raw_items(accounts)] == [ADA_KEY]


def test_hash_key_constraint__one_latest_version_per_name__locks_follow(backend: Backend) -> None:
    """A partial constraint on the hash key of a (hash, range) table: one latest version per name."""
    plugins = bind_model(Plugin, backend)
    v1 = plugins(name="calc", version="1", latest="yes")
    v1.save()
    plugins(name="draw", version="1", latest="yes").save()
    assert actual_locks(plugins) == {"UNIQ#LATEST#calc": ("calc", "1"), "UNIQ#LATEST#draw": ("draw", "1")}
    with pytest.raises(UniqueViolation) as info:
        plugins(name="calc", version="2", latest="yes").save()
    assert [(v.constraint, v.owner) for v in info.value.violations] == [("LATEST", ("calc", "1"))]
    v2 = plugins(name="calc", version="2")
    v2.save()
    assert_invariant(plugins)
    # The latest version changes: v1 gives the name up and v2 takes it, in one transaction.
    with TransactWrite(connection=plugins._get_connection().connection) as tx:
        tx.update(v1, actions=[plugins.latest.remove()])
        tx.update(v2, actions=[plugins.latest.set("yes")])
    assert actual_locks(plugins) == {"UNIQ#LATEST#calc": ("calc", "2"), "UNIQ#LATEST#draw": ("draw", "1")}
    assert_invariant(plugins)
    v2.delete()
    assert actual_locks(plugins) == {"UNIQ#LATEST#draw": ("draw", "1")}
    v1.update(actions=[plugins.latest.set("yes")])
    assert actual_locks(plugins) == {"UNIQ#LATEST#calc": ("calc", "1"), "UNIQ#LATEST#draw": ("draw", "1")}
    assert_invariant(plugins)
    report = audit(plugins)
    assert report.clean
    assert (report.records, report.locks) == (2, 2)
