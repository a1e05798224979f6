"""Edge cases of TTL-aware locks and release holds, found in review; each test once failed.

Each docstring says what used to go wrong. Time passing is simulated as in
tests/model/test_expiry.py: an expiry in the past written into a stored item.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import pytest
from _backends import Backend, bind_model, unique_table_name
from _expiry import HOLD, Member, Session, stream_record
from _expiry import client as _client
from _expiry import in_days as _in
from _expiry import lock_item_key as _lock_key
from _expiry import locks as _locks
from _expiry import raw as _raw
from _expiry import record_key as _record_key
from _expiry import set_expiry as _set
from pynamodb.attributes import DiscriminatorAttribute, TTLAttribute, UnicodeAttribute
from pynamodb.models import Model

from pynamodb_unique import (
    TransactWrite,
    UniqueAttribute,
    UniqueMixin,
    _transact,
    audit,
    create_lock_table,
    repair,
    streams,
)
from pynamodb_unique._core.constraint import HELD, LOCK_EXPIRES, OWNER_HASH
from pynamodb_unique._write import bulk as _bulk
from pynamodb_unique._write import send as _send

EMAIL = "UNIQ#EMAIL#ada@lovelace.io"
MOTO = Backend("moto", None)


def _event(model: type[Any], name: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> dict[str, Any]:
    return {"Records": [stream_record(model, name, old, new)]}


@pytest.fixture
def sessions(moto_backend: None) -> type[Session]:
    model: type[Session] = bind_model(Session, MOTO)
    return model


@pytest.fixture
def members(moto_backend: None) -> type[Member]:
    model: type[Member] = bind_model(Member, MOTO)
    return model


# --- polymorphic families whose classes differ in TTL / hold ----------------------------------


def _family(hold: timedelta | None = None) -> dict[str, Any]:
    """A polymorphic family in one table: only Trial has a TTLAttribute (the table's TTL is on ``ttl``)."""
    table = unique_table_name("review-accounts")

    class Account(UniqueMixin, Model):
        class Meta:
            table_name = table
            region = "us-east-1"

        pk = UnicodeAttribute(hash_key=True, attr_name="PK")
        sk = UnicodeAttribute(range_key=True, attr_name="SK", default="PROFILE")
        kind = DiscriminatorAttribute()
        email = UniqueAttribute(UnicodeAttribute(null=True), hold=hold)

    class Paid(Account, discriminator="paid"):
        pass

    class Trial(Account, discriminator="trial"):
        expires = TTLAttribute(null=True, attr_name="ttl")

    Account.create_table(wait=True, billing_mode="PAY_PER_REQUEST")
    return {"Account": Account, "Paid": Paid, "Trial": Trial}


def test_polymorphic__expired_trial_value_taken_by_another_class(moto_backend: None) -> None:
    """Regression: an expired lock is free only for the classes of a family that have a TTLAttribute.

    Trial (TTL) and Paid (none) share the EMAIL namespace. Trial's record and lock expired; a Paid
    record taking the value is refused (its lock Put has no ``OR #exp < :now``, and its lock
    table reads the expiry under ``uniq_expires`` while Trial's locks carry ``ttl``), although
    ``validate_unique`` of a Trial says the value is free.
    """
    family = _family()
    trial, paid = family["Trial"], family["Paid"]
    trial(pk="T#1", email="ada@lovelace.io", expires=_in(1)).save()
    past = int(time.time()) - 60
    _set(trial, _record_key("T#1"), "ttl", past)
    _set(trial, _lock_key(EMAIL), "ttl", past)
    trial(pk="T#2", email="ada@lovelace.io").validate_unique()  # Free, says a Trial.
    paid(pk="P#1", email="ada@lovelace.io").save()
    assert _locks(paid)[EMAIL][OWNER_HASH] == {"S": "P#1"}


def test_polymorphic__ended_hold_of_one_class_taken_by_another(moto_backend: None) -> None:
    """Regression: holds of one class carry ``uniq_expires``, another class's put compares ``ttl``.

    With hold= on the base: a Paid record's hold carries its end under ``uniq_expires`` (Paid
    has no TTLAttribute) while Trial's puts compare ``ttl`` (Trial's TTLAttribute). After the
    hold ended a Trial cannot take the value, ever: the hold has no ``ttl``, so the table's TTL
    (on ``ttl``) never deletes it either.
    """
    family = _family(hold=timedelta(hours=1))
    trial, paid = family["Trial"], family["Paid"]
    paid(pk="P#1", email="ada@lovelace.io").save()
    paid.get("P#1", "PROFILE").delete()
    lock = _locks(paid)[EMAIL]
    # The family's one expiry attribute: Trial's TTL attribute, so the table's TTL deletes holds too.
    assert HELD in lock
    assert "ttl" in lock
    assert LOCK_EXPIRES not in lock
    _set(paid, _lock_key(EMAIL), "ttl", int(time.time()) - 1)  # The hold ended.
    assert paid.unique_owner(email="ada@lovelace.io") is None
    trial(pk="T#1", email="ada@lovelace.io", expires=_in(3)).save()
    assert _locks(trial)[EMAIL][OWNER_HASH] == {"S": "T#1"}


# --- Streams ---------------------------------------------------------------------------------


def test_streams__restored_record_keeps_its_own_hold(members: type[Member]) -> None:
    """Regression: a record restored behind the library's back (INSERT) whose value is its own hold.

    The handler sees the lock names the record and leaves it: the live record's lock stays a
    hold that ends in 30 days, after which any record takes the value from under it (a
    duplicate). The docs promise the former owner "(e.g. a deleted account restored) takes it
    back, and a retaken lock no longer expires".
    """
    members(pk="M#1", email="ada@lovelace.io").save()
    item = _raw(members, _record_key("M#1"))
    assert item is not None
    members.get("M#1", "PROFILE").delete()  # The library's delete: a hold.
    _client(members).put_item(TableName=members.Meta.table_name, Item=item)  # Restored (PITR, import).
    streams.handle(members, _event(members, "INSERT", None, item))
    lock = _locks(members)[EMAIL]
    assert HELD not in lock
    assert LOCK_EXPIRES not in lock


def test_repair__restored_record_with_its_own_hold(members: type[Member]) -> None:
    """Regression: audit reports the restored record's held value as MissingLock and repair cannot fix it.

    repair's put_if(ABSENT) is conditioned ``attribute_not_exists OR #exp < :now``; the record's
    own unexpired hold fails it, so the problem stays (the lock is not turned back into a lock).
    """
    members(pk="M#1", email="ada@lovelace.io").save()
    item = _raw(members, _record_key("M#1"))
    assert item is not None
    members.get("M#1", "PROFILE").delete()
    _client(members).put_item(TableName=members.Meta.table_name, Item=item)
    report = audit(members)
    repair(members, report, apply=True)
    assert audit(members).clean
    assert HELD not in _locks(members)[EMAIL]


def test_streams__value_of_an_expired_record_is_free(sessions: type[Session]) -> None:
    """Regression: Streams reports an expired record's lock as a duplicate instead of taking it.

    S#1 expired (record and lock past their expiry, TTL has not deleted them). A bypassing writer
    inserts S#2 with the same email: the value is free (a library save would take it, audit +
    repair create S#2's lock), but the handler leaves it in ``left`` as "held by another record:
    a duplicate value" and S#2 stays without a lock.
    """
    sessions(pk="S#1", email="ada@lovelace.io", expires=_in(1)).save()
    past = int(time.time()) - 60
    _set(sessions, _record_key("S#1"), "ttl", past)
    _set(sessions, _lock_key(EMAIL), "ttl", past)
    item = {"PK": {"S": "S#2"}, "SK": {"S": "PROFILE"}, "email": {"S": "ada@lovelace.io"}}
    _client(sessions).put_item(TableName=sessions.Meta.table_name, Item=item)
    report = streams.handle(sessions, _event(sessions, "INSERT", None, item))
    assert report.left == ()
    assert _locks(sessions)[EMAIL][OWNER_HASH] == {"S": "S#2"}


def test_streams__expiry_changed_behind_the_librarys_back(sessions: type[Session]) -> None:
    """GAP: a MODIFY that only moves the record's expiry is skipped (no unique *value* changed).

    The lock keeps the old expiry: when it passes, any record may take the value of a live
    record (and TTL deletes the lock). Audit then reports MissingLock.
    """
    sessions(pk="S#1", email="ada@lovelace.io", expires=_in(1)).save()
    old = _raw(sessions, _record_key("S#1"))
    later = int(_in(10).timestamp())
    _set(sessions, _record_key("S#1"), "ttl", later)
    new = _raw(sessions, _record_key("S#1"))
    streams.handle(sessions, _event(sessions, "MODIFY", old, new))
    assert _locks(sessions)[EMAIL]["ttl"] == {"N": str(later)}


def test_polymorphic__audit_of_the_base_sees_an_expired_trial_lock_as_orphaned(moto_backend: None) -> None:
    """Regression: audit(Account) reads lock expiry under ``uniq_expires``.

    The expired Trial record is gone (its class's TTL attribute), but its lock, whose expiry is
    under ``ttl``, is counted as a live lock without a record: OrphanedLock instead of
    ``expired``. audit(Trial) of the same table is clean.
    """
    family = _family()
    trial, account = family["Trial"], family["Account"]
    trial(pk="T#1", email="ada@lovelace.io", expires=_in(1)).save()
    past = int(time.time()) - 60
    _set(trial, _record_key("T#1"), "ttl", past)
    _set(trial, _lock_key(EMAIL), "ttl", past)
    assert audit(trial).clean
    report = audit(account)
    assert report.clean, report.problems
    assert report.expired == 1


def test_audit__value_under_another_records_hold_is_misreported(members: type[Member]) -> None:
    """Regression: audit drops holds from its lock map, so a live record whose value is under another
    record's hold is reported MissingLock with owner=None (not a conflict naming the hold's owner),
    and repair's create can only fail ("a lock was created meanwhile"): a problem that never clears.
    """
    members(pk="M#1", email="ada@lovelace.io").save()
    members.get("M#1", "PROFILE").delete()  # M#1's hold.
    item = {"PK": {"S": "M#2"}, "SK": {"S": "PROFILE"}, "email": {"S": "ada@lovelace.io"}}
    _client(members).put_item(TableName=members.Meta.table_name, Item=item)  # A bypassing writer.
    (problem,) = audit(members).problems
    assert problem.owner == ("M#1", "PROFILE"), problem


# --- TransactWrite and the expired record whose value was taken ------------------------------


def _expired_and_taken(sessions: type[Session]) -> Session:
    sessions(pk="S#1", email="ada@lovelace.io", expires=_in(1)).save()
    past = int(time.time()) - 60
    _set(sessions, _record_key("S#1"), "ttl", past)
    _set(sessions, _lock_key(EMAIL), "ttl", past)
    sessions(pk="S#2", email="ada@lovelace.io").save()  # Takes the expired value.
    return sessions.get("S#1", "PROFILE")


def test_transact_write__delete_of_an_expired_record_whose_value_was_taken(sessions: type[Session]) -> None:
    """Regression: TransactWrite cannot delete (or change the values of) an expired record whose value was taken.

    Its release (Delete, or a hold Put) is conditioned on the lock being the record's; another
    record took the expired value, so the condition fails and TransactWrite raises StaleWrite
    ("the lock ... belongs to another record") on every attempt: it never re-plans the release
    into a LockNotOurs check as save()/delete() do (x.delete() succeeds). With TTL this is the
    normal state of an expired record, not drift.
    """
    expired = _expired_and_taken(sessions)
    with TransactWrite() as tx:
        tx.delete(expired)
    assert _raw(sessions, _record_key("S#1")) is None
    assert _locks(sessions)[EMAIL][OWNER_HASH] == {"S": "S#2"}


def test_transact_write__locks_moving_twice__replans_until_every_foreign_lock_is_checked(
    sessions: type[Session], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each re-plan checks every lock found another record's so far, up to the engine's plan bound.

    The first request fails on S#1's lock (its expired value was taken); before the re-planned
    request is sent, S#3's expired value is taken too, so that one fails on S#3's lock; the third
    plan checks both and commits.
    """
    expired = _expired_and_taken(sessions)
    sessions(pk="S#3", email="bob@lovelace.io", expires=_in(1)).save()
    past = int(time.time()) - 60
    _set(sessions, _record_key("S#3"), "ttl", past)
    _set(sessions, _lock_key("UNIQ#EMAIL#bob@lovelace.io"), "ttl", past)
    other = sessions.get("S#3", "PROFILE")
    sent = []
    commit = _transact.commit_grouped

    def taking_between(*args: Any, **kwargs: Any) -> Any:
        sent.append(1)
        if len(sent) == 2:
            sessions(pk="S#4", email="bob@lovelace.io").save()  # Takes S#3's expired value.
        return commit(*args, **kwargs)

    monkeypatch.setattr(_transact, "commit_grouped", taking_between)
    with TransactWrite() as tx:
        tx.delete(expired)
        tx.delete(other)
    assert len(sent) == 3
    assert _raw(sessions, _record_key("S#1")) is None
    assert _raw(sessions, _record_key("S#3")) is None
    assert _locks(sessions)[EMAIL][OWNER_HASH] == {"S": "S#2"}
    assert _locks(sessions)["UNIQ#EMAIL#bob@lovelace.io"][OWNER_HASH] == {"S": "S#4"}


# --- request clock ---------------------------------------------------------------------------


def test_request_clock__library_tokens_are_not_kept(sessions: type[Session]) -> None:
    """Regression: every TransactWrite registers its own random token in ``_send._clocks``.

    Only a caller's token can be resent, yet each TransactWrite (token or not) adds an entry kept
    for 10 minutes; past 4096 entries every request_clock() call scans the whole dict under a
    global lock (~4 ms per call at 60k entries, i.e. 100 transactions/s for 10 minutes).
    """
    before = len(_send._clocks)
    for i in range(10):
        with TransactWrite() as tx:
            tx.save(sessions(pk=f"S#{i}", email=f"a{i}@lovelace.io"))
    assert len(_send._clocks) == before


def test_bulk_save__token_of_the_same_records_changes_with_the_clock(sessions: type[Session]) -> None:
    """Regression: for an expiring model bulk_save's chunk token is not stable.

    Each lock Put carries ``:now`` (plan time, in seconds), which is part of the record's body
    and so of the chunk's token: "the same records always give the same tokens" no longer holds
    and a rerun of an import after a crash is not replayed (it is cancelled and re-checked).
    """
    expiry = _in(1)
    first = _bulk._prepare([sessions(pk="S#1", email="ada@lovelace.io", expires=expiry)])
    time.sleep(1.1)
    again = _bulk._prepare([sessions(pk="S#1", email="ada@lovelace.io", expires=expiry)])
    assert _bulk._pack(first, "run")[0].token == _bulk._pack(again, "run")[0].token


# --- TransactWrite transfers across lock tables (pre-existing; hits holds too) ---------------


class RvSeparate(UniqueMixin, Model):
    class Meta:
        table_name = "review-separate"
        region = "us-east-1"
        unique_lock_table = "review-separate-locks"

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    email = UniqueAttribute(UnicodeAttribute(null=True), hold=HOLD)


class RvShared(UniqueMixin, Model):
    class Meta:
        table_name = "review-shared"
        region = "us-east-1"

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    sk = UnicodeAttribute(range_key=True, attr_name="SK", default="PROFILE")
    email = UniqueAttribute(UnicodeAttribute(null=True))


def test_transact_write__a_release_in_another_lock_table_is_not_a_transfer(moto_backend: None) -> None:
    """Regression: transfers are matched by lock key alone.

    X (locks in a separate table) releases EMAIL#v while Y (locks in its own table) takes EMAIL#v:
    different lock items, but the same key string, so X's release (here a hold) is dropped as
    if it were a transfer. X's old lock stays a live lock of X in its lock table: orphaned, and
    not a hold. (The ``taken`` set has the same flaw: two takers of one key string in two lock
    tables are refused as "two records take the same value".)
    """
    RvSeparate.create_table(wait=True, billing_mode="PAY_PER_REQUEST")
    create_lock_table(RvSeparate, wait=True)
    RvShared.create_table(wait=True, billing_mode="PAY_PER_REQUEST")
    x = RvSeparate(pk="X", email="ada@lovelace.io")
    x.save()
    x.email = "ada@babbage.io"
    with TransactWrite() as tx:
        tx.save(x)
        tx.save(RvShared(pk="Y", email="ada@lovelace.io"))
    client = _client(RvSeparate)
    old = client.get_item(TableName="review-separate-locks", Key=_lock_key(EMAIL), ConsistentRead=True).get("Item")
    assert old is not None
    assert HELD in old


def test_audit__a_lock_without_its_records_expiry_is_not_reported(sessions: type[Session]) -> None:
    """GAP: audit never compares a lock's expiry with its record's.

    Locks written before this version (an upgrade), or left behind by an expiry changed behind the
    library's back (see the Streams MODIFY test), carry no or another expiry: when the record
    expires and TTL deletes it, the lock stays and blocks the value (the onetable #543 problem
    this feature is for), or the lock expires first and the live record's value is free. Audit
    says clean and repair/backfill have no fix that stamps the record's expiry on its locks.
    """
    sessions(pk="S#1", email="ada@lovelace.io", expires=_in(1)).save()
    _client(sessions).update_item(
        TableName=sessions.Meta.table_name,
        Key=_lock_key(EMAIL),
        UpdateExpression="REMOVE #e",
        ExpressionAttributeNames={"#e": "ttl"},
    )  # As a lock written by the previous version is.
    assert not audit(sessions).clean


def test_streams__hold_of_a_subclass_constraint_handled_through_the_base(moto_backend: None) -> None:
    """Regression: Streams looks up ``hold=`` among the handled model's constraints only.

    ``streams.handle(Animal, ...)`` for a family whose subclass Cat declares ``CHIP`` with hold=:
    a Cat removed behind the library's back has its CHIP lock deleted (the value freed at once)
    instead of turned into a hold, as Cat.delete() would.
    """
    table = unique_table_name("review-animals")

    class Animal(UniqueMixin, Model):
        class Meta:
            table_name = table
            region = "us-east-1"

        pk = UnicodeAttribute(hash_key=True, attr_name="PK")
        sk = UnicodeAttribute(range_key=True, attr_name="SK", default="PROFILE")
        kind = DiscriminatorAttribute()
        name = UniqueAttribute(UnicodeAttribute(null=True))

    class Cat(Animal, discriminator="cat"):
        chip = UniqueAttribute(UnicodeAttribute(null=True), name="CHIP", hold=HOLD)

    Animal.create_table(wait=True, billing_mode="PAY_PER_REQUEST")
    Cat(pk="C#1", name="tom", chip="c1").save()
    old = _raw(Animal, _record_key("C#1"))
    _client(Animal).delete_item(TableName=table, Key=_record_key("C#1"))
    streams.handle(Animal, _event(Animal, "REMOVE", old, None))
    lock = _locks(Animal).get("UNIQ#CHIP#c1")
    assert lock is not None
    assert HELD in lock


class RvHeldSession(UniqueMixin, Model):
    """Both: the record expires, and a released value is held."""

    class Meta:
        table_name = "review-held-sessions"
        region = "us-east-1"

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    sk = UnicodeAttribute(range_key=True, attr_name="SK", default="PROFILE")
    email = UniqueAttribute(UnicodeAttribute(null=True), hold=HOLD)
    expires = TTLAttribute(null=True, attr_name="ttl")


def test_streams__ttl_deletion_of_an_expired_record_frees_its_value(moto_backend: None) -> None:
    """A REMOVE by TTL: the lock expired with the record, so it is deleted, not turned into a hold."""
    model = bind_model(RvHeldSession, MOTO)
    model(pk="S#1", email="ada@lovelace.io", expires=_in(1)).save()
    past = int(time.time()) - 60
    _set(model, _record_key("S#1"), "ttl", past)
    _set(model, _lock_key(EMAIL), "ttl", past)
    old = _raw(model, _record_key("S#1"))
    _client(model).delete_item(TableName=model.Meta.table_name, Key=_record_key("S#1"))  # TTL's deletion.
    report = streams.handle(model, _event(model, "REMOVE", old, None))
    assert (report.released, report.left) == (1, ())
    assert EMAIL not in _locks(model)


def test_repair__a_legacy_lock_of_an_expired_record_is_deleted(sessions: type[Session]) -> None:
    """A lock without expiry (written before the TTLAttribute) whose record expired, not yet deleted by TTL.

    The audit counts the expired record as gone, so the lock is orphaned; repair's check that the
    record is gone accepts an expired one, so the fix is applied instead of skipped until TTL runs.
    """
    sessions(pk="S#1", email="ada@lovelace.io", expires=_in(1)).save()
    _client(sessions).update_item(
        TableName=sessions.Meta.table_name,
        Key=_lock_key(EMAIL),
        UpdateExpression="REMOVE #e",
        ExpressionAttributeNames={"#e": "ttl"},
    )
    _set(sessions, _record_key("S#1"), "ttl", int(time.time()) - 60)
    report = audit(sessions)
    assert [type(p).__name__ for p in report.problems] == ["OrphanedLock"]
    fixed = repair(sessions, report, apply=True)
    assert [f.outcome for f in fixed.fixes] == ["applied"]
    assert EMAIL not in _locks(sessions)
    assert audit(sessions).clean
