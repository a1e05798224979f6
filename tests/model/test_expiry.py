"""Locks that follow a record's life: TTL-aware locks and release holds, on moto; races on dynoxide.

Time passing is simulated by writing an expiry in the past into a stored item (the record's TTL
attribute, or a hold's), as DynamoDB's clock would reach it; DynamoDB's TTL deletion itself lags
and is never relied upon. The edge cases (polymorphic families whose classes differ in TTL or
hold, the Streams handler and repair on restored or expired records, tokens and the clock) each
say in their docstring what went wrong before they passed.
"""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from _backends import Backend, RequestCounter, bind_model, unique_table_name
from _backends import race as _race
from _expiry import HOLD, Member, Session, account_family, put_record, set_attribute
from _expiry import client as _client
from _expiry import in_days as _in
from _expiry import lock_item_key as _lock_key
from _expiry import locks as _locks
from _expiry import raw as _raw
from _expiry import record_key as _record_key
from _expiry import set_expiry as _set_expiry
from _expiry import stream_record as _stream_record
from pynamodb.attributes import DiscriminatorAttribute, TTLAttribute, UnicodeAttribute
from pynamodb.models import Model

from pynamodb_unique import (
    TransactWrite,
    UniqueAttribute,
    UniqueConfigError,
    UniqueMixin,
    UniqueViolation,
    _transact,
    audit,
    backfill,
    bulk_save,
    create_lock_table,
    inspect,
    repair,
    streams,
)
from pynamodb_unique._core.constraint import HELD, LOCK_EXPIRES, OWNER_HASH
from pynamodb_unique._write import bulk as _bulk
from pynamodb_unique._write import send as _send

# --- TTL-aware locks and release holds --------------------------------------------------------


EMAIL = "UNIQ#EMAIL#ada@lovelace.io"
OTHER = "UNIQ#EMAIL#ada@babbage.io"


class SeparateSession(Session):
    """Locks in a table of their own, whose TTL attribute is ``uniq_expires``."""

    class Meta(Session.Meta):
        unique_lock_table = "expiry-session-locks"


def _bind(model: type[Any], backend: Backend) -> Any:
    bound = bind_model(model, backend)
    bound.describe_table()  # The shared botocore client exists before any thread uses it.
    return bound


def _expire(model: type[Any], pk: str, lock: str = EMAIL) -> int:
    """Time passes: the record and its lock are due (TTL has not deleted them yet): the epoch now past."""
    past = int(time.time()) - 60
    _set_expiry(model, _record_key(pk), "ttl", past)
    _set_expiry(model, _lock_key(lock), "ttl", past)
    return past


def _end_hold(model: type[Any], name: str = LOCK_EXPIRES) -> None:
    """Time passes: EMAIL's hold, its end under ``name``, ended a second ago."""
    _set_expiry(model, _lock_key(EMAIL), name, int(time.time()) - 1)


def _event(model: type[Any], name: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> dict[str, Any]:
    """A Streams event of one record."""
    return {"Records": [_stream_record(model, name, old, new)]}


# --- TTL-aware locks -------------------------------------------------------------------------


@pytest.fixture
def sessions(backend: Backend) -> type[Session]:
    model: type[Session] = _bind(Session, backend)
    return model


def test_ttl__locks_carry_the_record_expiry(sessions: type[Session]) -> None:
    """Each lock carries its record's expiry under the record's own TTL attribute; none without one."""
    expiry = _in(3)
    with RequestCounter(sessions) as counter:
        sessions(pk="S#1", email="ada@lovelace.io", expires=expiry).save()
        sessions(pk="S#2", email="ada@babbage.io").save()
    assert counter.operations == ["TransactWriteItems", "TransactWriteItems"]
    locks = _locks(sessions)
    assert locks[EMAIL]["ttl"] == {"N": str(int(expiry.timestamp()))}
    assert "ttl" not in locks[OTHER]
    # The lock put also takes a lock whose expiry passed.
    (params, _) = counter.params("TransactWriteItems")
    puts = [i["Put"] for i in params["TransactItems"] if i["Put"]["Item"]["PK"]["S"] == EMAIL]
    assert puts[0]["ConditionExpression"].endswith("OR #exp < :now)")
    assert puts[0]["ExpressionAttributeNames"]["#exp"] == "ttl"


def test_ttl__save_moves_a_new_expiry_onto_the_locks(sessions: type[Session]) -> None:
    """A save that changes the expiry puts each kept lock again with it, in the same transaction."""
    session = sessions(pk="S#1", email="ada@lovelace.io", expires=_in(1))
    session.save()
    later = _in(5)
    session.expires = later
    with RequestCounter(sessions) as counter:
        session.save()
    (params,) = counter.params("TransactWriteItems")
    assert len(params["TransactItems"]) == 2  # The record and its one lock.
    assert _locks(sessions)[EMAIL]["ttl"] == {"N": str(int(later.timestamp()))}
    # Another field only: a plain PutItem, the lock is not touched.
    session.note = "hello"
    with RequestCounter(sessions) as counter:
        session.save()
    assert counter.operations == ["PutItem"]


def test_ttl__update_moves_and_removes_the_expiry(sessions: type[Session]) -> None:
    """update() of the expiry moves it onto the locks; removing it removes it from them."""
    session = sessions(pk="S#1", email="ada@lovelace.io", expires=_in(1))
    session.save()
    later = _in(7)
    with RequestCounter(sessions) as counter:
        session.update(actions=[Session.expires.set(later)])
    assert counter.count("TransactWriteItems") == 1
    assert _locks(sessions)[EMAIL]["ttl"] == {"N": str(int(later.timestamp()))}
    assert session.expires == later
    session.update(actions=[Session.expires.remove()])
    assert "ttl" not in _locks(sessions)[EMAIL]
    assert session.expires is None


def test_ttl__expired_owner_value_taken(sessions: type[Session]) -> None:
    """A value whose owner expired is taken in one transaction; a live owner's value is refused."""
    sessions(pk="S#1", email="ada@lovelace.io", expires=_in(1)).save()
    with pytest.raises(UniqueViolation) as caught:
        sessions(pk="S#2", email="ada@lovelace.io").save()
    assert caught.value.violations[0].held_until is None
    _expire(sessions, "S#1")  # Time passes: the record and its lock are due (TTL has not deleted them yet).
    taker = sessions(pk="S#2", email="ada@lovelace.io")
    with RequestCounter(sessions) as counter:
        taker.save()
    assert counter.operations == ["TransactWriteItems"]
    lock = _locks(sessions)[EMAIL]
    assert lock[OWNER_HASH] == {"S": "S#2"}
    assert "ttl" not in lock
    assert sessions.unique_owner(email="ada@lovelace.io") == ("S#2", "PROFILE")


def test_ttl__expired_owner_cannot_come_back_to_a_taken_value(sessions: type[Session]) -> None:
    """The expired record renewing its expiry learns its value was taken: UniqueViolation."""
    old = sessions(pk="S#1", email="ada@lovelace.io", expires=_in(1))
    old.save()
    _expire(sessions, "S#1")
    sessions(pk="S#2", email="ada@lovelace.io").save()
    old.refresh()
    old.expires = _in(2)
    with pytest.raises(UniqueViolation) as caught:
        old.save()
    assert caught.value.violations[0].owner == ("S#2", "PROFILE")
    assert _locks(sessions)[EMAIL][OWNER_HASH] == {"S": "S#2"}


def test_ttl__validate_unique_and_unique_owner_see_expired_locks_as_free(sessions: type[Session]) -> None:
    sessions(pk="S#1", email="ada@lovelace.io", expires=_in(1)).save()
    with pytest.raises(UniqueViolation):
        sessions(pk="S#2", email="ada@lovelace.io").validate_unique()
    _set_expiry(sessions, _lock_key(EMAIL), "ttl", int(time.time()) - 60)
    sessions(pk="S#2", email="ada@lovelace.io").validate_unique()
    assert sessions.unique_owner(email="ada@lovelace.io") is None


@pytest.mark.integration
def test_ttl__race_of_two_takers_of_an_expired_value(dynoxide_endpoint: str) -> None:
    """Two records take an expired owner's value at once: exactly one wins."""
    model: type[Session] = _bind(Session, Backend("dynoxide", dynoxide_endpoint))
    model(pk="S#0", email="ada@lovelace.io", expires=_in(1)).save()
    _expire(model, "S#0")
    outcomes = _race([model(pk=f"S#{i}", email="ada@lovelace.io").save for i in (1, 2)])
    winners = [o for o in outcomes if not isinstance(o, BaseException)]
    losers = [o for o in outcomes if isinstance(o, UniqueViolation)]
    assert (len(winners), len(losers)) == (1, 1), outcomes
    winner = ("S#1", "PROFILE") if isinstance(outcomes[1], UniqueViolation) else ("S#2", "PROFILE")
    assert losers[0].violations[0].owner == winner
    assert _locks(model)[EMAIL][OWNER_HASH] == {"S": winner[0]}


def test_ttl__separate_lock_table_has_ttl_enabled_and_locks_carry_uniq_expires(backend: Backend) -> None:
    model = bind_model(SeparateSession, backend)
    create_lock_table(model, wait=True)
    client = _client(model)
    described = client.describe_time_to_live(TableName="expiry-session-locks")["TimeToLiveDescription"]
    assert described["AttributeName"] == LOCK_EXPIRES
    assert described["TimeToLiveStatus"] in {"ENABLED", "ENABLING"}
    expiry = _in(2)
    model(pk="S#1", email="ada@lovelace.io", expires=expiry).save()
    item = client.get_item(TableName="expiry-session-locks", Key=_lock_key(EMAIL), ConsistentRead=True)["Item"]
    assert item[LOCK_EXPIRES] == {"N": str(int(expiry.timestamp()))}
    client.delete_table(TableName="expiry-session-locks")


# --- release holds ---------------------------------------------------------------------------


@pytest.fixture
def members(backend: Backend) -> type[Member]:
    model: type[Member] = _bind(Member, backend)
    return model


def _held_until(lock: dict[str, Any]) -> int:
    assert lock[HELD] == {"BOOL": True}
    return int(lock[LOCK_EXPIRES]["N"])


def _changed_email(members: type[Member]) -> Member:
    """M#1 saved with EMAIL's value, then changed to OTHER's: EMAIL's value is held for it."""
    ada = members(pk="M#1", email="ada@lovelace.io")
    ada.save()
    ada.email = "ada@babbage.io"
    ada.save()
    return ada


def test_hold__delete_turns_the_lock_into_a_hold(members: type[Member]) -> None:
    """Deleting keeps the value reserved for 30 days, in the same one transaction."""
    ada = members(pk="M#1", email="ada@lovelace.io")
    ada.save()
    before = int(time.time())
    with RequestCounter(members) as counter:
        ada.delete()
    (params,) = counter.params("TransactWriteItems")
    assert [next(iter(i)) for i in params["TransactItems"]] == ["Delete", "Put"]
    lock = _locks(members)[EMAIL]
    assert lock[OWNER_HASH] == {"S": "M#1"}
    assert before + HOLD.total_seconds() <= _held_until(lock) <= int(time.time()) + HOLD.total_seconds()


def test_hold__others_refused_with_held_until(members: type[Member]) -> None:
    _changed_email(members)
    until = _held_until(_locks(members)[EMAIL])
    with pytest.raises(UniqueViolation) as caught:
        members(pk="M#2", email="ada@lovelace.io").save()
    (violation,) = caught.value.violations
    assert violation.owner == ("M#1", "PROFILE")
    assert violation.held_until == datetime.fromtimestamp(until, tz=UTC)
    assert "held until" in violation.message
    # validate_unique says the same before any write.
    with pytest.raises(UniqueViolation) as checked:
        members(pk="M#2", email="ada@lovelace.io").validate_unique()
    assert checked.value.violations[0].held_until == violation.held_until
    assert members.unique_owner(email="ada@lovelace.io") == ("M#1", "PROFILE")


def test_hold__former_owner_takes_it_back_and_it_no_longer_expires(members: type[Member]) -> None:
    ada = _changed_email(members)
    ada.email = "ada@lovelace.io"
    ada.save()
    locks = _locks(members)
    assert HELD not in locks[EMAIL]
    assert LOCK_EXPIRES not in locks[EMAIL]
    assert _held_until(locks[OTHER]) > time.time()  # Now the other value is held.
    # A deleted record recreated under the same key takes its held value back too.
    ada.delete()
    members(pk="M#1", email="ada@lovelace.io").save()
    assert HELD not in _locks(members)[EMAIL]


def test_hold__after_expiry_anyone_takes_it(members: type[Member]) -> None:
    members(pk="M#1", email="ada@lovelace.io").save()
    members.get("M#1", "PROFILE").delete()
    _end_hold(members)
    assert members.unique_owner(email="ada@lovelace.io") is None
    with RequestCounter(members) as counter:
        members(pk="M#2", email="ada@lovelace.io").save()
    assert counter.operations == ["TransactWriteItems"]
    lock = _locks(members)[EMAIL]
    assert lock[OWNER_HASH] == {"S": "M#2"}
    assert HELD not in lock


def test_hold__composed_transaction_holds_too(members: type[Member]) -> None:
    ada = members(pk="M#1", email="ada@lovelace.io")
    ada.save()
    with TransactWrite() as tx:
        tx.delete(ada)
    assert _held_until(_locks(members)[EMAIL]) > time.time()
    with pytest.raises(UniqueViolation):
        members(pk="M#2", email="ada@lovelace.io").save()


@pytest.mark.integration
def test_hold__race_after_expiry_one_wins(dynoxide_endpoint: str) -> None:
    model: type[Member] = _bind(Member, Backend("dynoxide", dynoxide_endpoint))
    model(pk="M#0", email="ada@lovelace.io").save()
    model.get("M#0", "PROFILE").delete()
    _end_hold(model)
    outcomes = _race([model(pk=f"M#{i}", email="ada@lovelace.io").save for i in (1, 2)])
    assert sum(isinstance(o, UniqueViolation) for o in outcomes) == 1, outcomes
    assert sum(not isinstance(o, BaseException) for o in outcomes) == 1, outcomes
    assert _locks(model)[EMAIL][OWNER_HASH]["S"] in {"M#1", "M#2"}


@pytest.mark.integration
def test_hold__race_owner_retakes_while_another_tries(dynoxide_endpoint: str) -> None:
    """During the hold, the former owner and a stranger race: the owner always wins."""
    model: type[Member] = _bind(Member, Backend("dynoxide", dynoxide_endpoint))
    ada = _changed_email(model)
    ada.email = "ada@lovelace.io"
    outcomes = _race([ada.save, model(pk="M#2", email="ada@lovelace.io").save])
    assert not isinstance(outcomes[0], BaseException), outcomes
    assert isinstance(outcomes[1], UniqueViolation)
    assert _locks(model)[EMAIL][OWNER_HASH] == {"S": "M#1"}


# --- Streams ---------------------------------------------------------------------------------


def test_streams__the_librarys_own_hold_is_left_alone(members: type[Member]) -> None:
    """A change with hold=: its MODIFY reads the hold and writes nothing."""
    ada = members(pk="M#1", email="ada@lovelace.io")
    ada.save()
    old = _raw(members, _record_key("M#1"))
    ada.email = "ada@babbage.io"
    ada.save()
    new = _raw(members, _record_key("M#1"))
    with RequestCounter(members) as counter:
        report = streams.handle(members, _event(members, "MODIFY", old, new))
    assert (report.released, report.created, report.left) == (0, 0, ())
    assert counter.count("TransactWriteItems") == 0
    assert _held_until(_locks(members)[EMAIL]) > time.time()


def test_streams__a_bypassing_delete_leaves_a_hold(members: type[Member]) -> None:
    """A record removed behind the library's back (the console): its values are held, not freed."""
    members(pk="M#1", email="ada@lovelace.io").save()
    old = _raw(members, _record_key("M#1"))
    _client(members).delete_item(TableName=members.Meta.table_name, Key=_record_key("M#1"))
    report = streams.handle(members, _event(members, "REMOVE", old, None))
    assert (report.released, report.left) == (1, ())
    lock = _locks(members)[EMAIL]
    assert lock[OWNER_HASH] == {"S": "M#1"}
    assert _held_until(lock) > time.time() + HOLD.total_seconds() - 60
    # Replayed: the hold is already there; nothing is written.
    with RequestCounter(members) as counter:
        again = streams.handle(members, _event(members, "REMOVE", old, None))
    assert again.released == 0
    assert counter.count("TransactWriteItems") == 0


def test_streams__a_created_lock_carries_the_record_expiry(sessions: type[Session]) -> None:
    expiry = int(_in(4).timestamp())
    item = put_record(sessions, "S#1", {"email": {"S": "ada@lovelace.io"}, "ttl": {"N": str(expiry)}})
    report = streams.handle(sessions, _event(sessions, "INSERT", None, item))
    assert report.created == 1
    assert _locks(sessions)[EMAIL]["ttl"] == {"N": str(expiry)}


# --- audit and inspect -----------------------------------------------------------------------


def test_audit__holds_are_valid_and_expired_locks_removable(members: type[Member]) -> None:
    _changed_email(members)
    report = audit(members)
    assert report.clean, report.problems
    # Two lock items, one of them a hold (valid: no record holds its value).
    assert (report.records, report.locks, report.held, report.expired) == (1, 2, 1, 0)
    assert report.to_json()["held"] == 1
    _end_hold(members)
    report = audit(members)
    assert report.clean, report.problems
    assert (report.held, report.expired) == (0, 1)


def test_audit__an_expired_record_is_gone(sessions: type[Session]) -> None:
    sessions(pk="S#1", email="ada@lovelace.io", expires=_in(1)).save()
    sessions(pk="S#2", email="ada@babbage.io", expires=_in(1)).save()
    past = _expire(sessions, "S#1")
    report = audit(sessions)
    assert report.clean, report.problems
    assert (report.records, report.locks, report.expired) == (1, 1, 1)
    # A live record whose lock expired (its expiry moved behind the library's back): unprotected.
    _set_expiry(sessions, _lock_key(OTHER), "ttl", past)
    report = audit(sessions)
    assert [(type(p).__name__, p.lock_key) for p in report.problems] == [("MissingLock", OTHER)]


def test_inspect__shows_holds_expiry_and_expired_locks(sessions: type[Session], members: type[Member]) -> None:
    expiry = _in(2)
    sessions(pk="S#1", email="ada@lovelace.io", expires=expiry).save()
    info = inspect(sessions, email="ada@lovelace.io")
    assert (info.owner_holds, info.held, info.expired, info.expires) == (True, False, False, expiry)
    assert f"expires:    {expiry.isoformat()} (with its record)" in info.describe()
    assert info.healthy
    ada = members(pk="M#1", email="ada@lovelace.io")
    ada.save()
    ada.delete()
    held = inspect(members, email="ada@lovelace.io")
    assert (held.held, held.expired, held.owner) == (True, False, ("M#1", "PROFILE"))
    assert held.expires is not None
    assert "a release hold until" in held.describe()
    assert held.to_json()["held"] is True
    assert held.healthy
    _end_hold(members)
    expired = inspect(members, email="ada@lovelace.io")
    assert expired.expired
    assert "any record may take the value" in expired.describe()


def test_repair__a_live_record_whose_lock_expired_gets_it_back(sessions: type[Session]) -> None:
    """Repair gives a live record its expired lock again, with the record's expiry."""
    expiry = _in(3)
    sessions(pk="S#1", email="ada@lovelace.io", expires=expiry).save()
    _set_expiry(sessions, _lock_key(EMAIL), "ttl", int(time.time()) - 60)
    report = audit(sessions)
    assert [type(p).__name__ for p in report.problems] == ["MissingLock"]
    repair(sessions, report, apply=True)
    lock = _locks(sessions)[EMAIL]
    assert lock[OWNER_HASH] == {"S": "S#1"}
    assert lock["ttl"] == {"N": str(int(expiry.timestamp()))}
    assert audit(sessions).clean


class Shared(UniqueMixin, Model):
    """Holds in a single table whose TTL attribute is another model's: named by Meta."""

    class Meta:
        table_name = "expiry-shared"
        region = "us-east-1"
        unique_ttl_attribute = "ttl"

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    sk = UnicodeAttribute(range_key=True, attr_name="SK", default="PROFILE")
    handle = UniqueAttribute(UnicodeAttribute(null=True), hold=timedelta(hours=1))


def test_hold__meta_unique_ttl_attribute_names_the_expiry(backend: Backend) -> None:
    model = _bind(Shared, backend)
    record = model(pk="X#1", handle="ada")
    record.save()
    record.delete()
    lock = _locks(model)["UNIQ#HANDLE#ada"]
    assert lock[HELD] == {"BOOL": True}
    assert int(lock["ttl"]["N"]) > time.time() + 3000
    assert LOCK_EXPIRES not in lock


def _assert_locks_expire(sessions: type[Session], expiry: datetime) -> None:
    """The two values' locks (EMAIL's, OTHER's) carry ``expiry`` under the records' TTL attribute ``ttl``."""
    expected = {"N": str(int(expiry.timestamp()))}
    assert {k: v["ttl"] for k, v in _locks(sessions).items()} == {EMAIL: expected, OTHER: expected}


def test_backfill__created_locks_carry_the_record_expiry(sessions: type[Session]) -> None:
    """Records written before the constraint (no locks): backfill gives them locks with their expiry."""
    expiry = _in(6)
    for pk, email in (("S#1", "ada@lovelace.io"), ("S#2", "ada@babbage.io")):
        put_record(sessions, pk, {"email": {"S": email}, "ttl": {"N": str(int(expiry.timestamp()))}})
    backfill(sessions)
    _assert_locks_expire(sessions, expiry)
    assert audit(sessions).clean


def test_bulk_save_and_transact_write__locks_carry_the_expiry(sessions: type[Session]) -> None:
    expiry = _in(2)
    result = bulk_save([sessions(pk="S#1", email="ada@lovelace.io", expires=expiry)])
    assert len(result.saved) == 1
    with TransactWrite() as tx:
        tx.save(sessions(pk="S#2", email="ada@babbage.io", expires=expiry))
    _assert_locks_expire(sessions, expiry)


@pytest.mark.parametrize("hold", [timedelta(0), timedelta(seconds=-5), 30, "30d"])
def test_hold__must_be_a_positive_timedelta(hold: object) -> None:
    with pytest.raises(UniqueConfigError, match="hold= must be a timedelta"):

        class Bad(UniqueMixin, Model):
            class Meta:
                table_name = "expiry-bad"
                region = "us-east-1"

            pk = UnicodeAttribute(hash_key=True)
            email = UniqueAttribute(UnicodeAttribute(), hold=hold)  # type: ignore[arg-type]


# --- idempotency -----------------------------------------------------------------------------


class _Later:
    """``time`` as seen by the library, some seconds later: a resend after a lost response."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.sleep = time.sleep

    def time(self) -> float:
        return time.time() + self.seconds


@pytest.mark.integration
@pytest.mark.parametrize("operation", ["save", "delete"])
def test_token__a_resend_later_is_the_same_request(
    dynoxide_endpoint: str, monkeypatch: pytest.MonkeyPatch, operation: str
) -> None:
    """Expiring locks carry the time; a resend with the caller's token keeps the first request's.

    dynoxide honours tokens: were the resend's ``:now`` (or the hold's end) different, it would
    answer IdempotentParameterMismatch instead of replaying the first request.
    """
    model: type[Member] = _bind(Member, Backend("dynoxide", dynoxide_endpoint))
    if operation == "delete":
        model(pk="M#1", email="ada@lovelace.io").save()
    token = f"resend-{uuid.uuid4().hex[:12]}"
    # The first request, then the same one from a hand-built instance 5 seconds later.
    getattr(model(pk="M#1", email="ada@lovelace.io"), operation)(client_request_token=token)
    first = _locks(model)[EMAIL]
    monkeypatch.setattr(_send, "time", _Later(5))
    getattr(model(pk="M#1", email="ada@lovelace.io"), operation)(client_request_token=token)
    assert _locks(model)[EMAIL] == first
    assert (HELD in first) == (operation == "delete")


# --- Edge cases: families, restored and expired records, the request clock --------------------


MOTO = Backend("moto", None)


# --- polymorphic families whose classes differ in TTL / hold ----------------------------------


def _family(hold: timedelta | None = None) -> dict[str, Any]:
    """A polymorphic family in one table: only Trial has a TTLAttribute (the table's TTL is on ``ttl``)."""
    return account_family("expiry-accounts", hold=hold)


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
    _expire(trial, "T#1")
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
    _end_hold(paid, "ttl")
    assert paid.unique_owner(email="ada@lovelace.io") is None
    trial(pk="T#1", email="ada@lovelace.io", expires=_in(3)).save()
    assert _locks(trial)[EMAIL][OWNER_HASH] == {"S": "T#1"}


# --- Streams ---------------------------------------------------------------------------------


def _restored_over_its_hold(members: type[Member]) -> dict[str, Any]:
    """M#1 deleted by the library (its value held for it), then restored behind its back: the restored item."""
    members(pk="M#1", email="ada@lovelace.io").save()
    item = _raw(members, _record_key("M#1"))
    assert item is not None
    members.get("M#1", "PROFILE").delete()  # The library's delete: a hold.
    _client(members).put_item(TableName=members.Meta.table_name, Item=item)  # Restored (PITR, import).
    return item


def test_streams__restored_record_keeps_its_own_hold(members: type[Member]) -> None:
    """Regression: a record restored behind the library's back (INSERT) whose value is its own hold.

    The handler sees the lock names the record and leaves it: the live record's lock stays a
    hold that ends in 30 days, after which any record takes the value from under it (a
    duplicate). The docs promise the former owner "(e.g. a deleted account restored) takes it
    back, and a retaken lock no longer expires".
    """
    item = _restored_over_its_hold(members)
    streams.handle(members, _event(members, "INSERT", None, item))
    lock = _locks(members)[EMAIL]
    assert HELD not in lock
    assert LOCK_EXPIRES not in lock


def test_repair__restored_record_with_its_own_hold(members: type[Member]) -> None:
    """Regression: audit reports the restored record's held value as MissingLock and repair cannot fix it.

    repair's put_if(ABSENT) is conditioned ``attribute_not_exists OR #exp < :now``; the record's
    own unexpired hold fails it, so the problem stays (the lock is not turned back into a lock).
    """
    _restored_over_its_hold(members)
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
    _expire(sessions, "S#1")
    item = put_record(sessions, "S#2", {"email": {"S": "ada@lovelace.io"}})
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
    _set_expiry(sessions, _record_key("S#1"), "ttl", later)
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
    _expire(trial, "T#1")
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
    put_record(members, "M#2", {"email": {"S": "ada@lovelace.io"}})  # A bypassing writer.
    (problem,) = audit(members).problems
    assert problem.owner == ("M#1", "PROFILE"), problem


# --- TransactWrite and the expired record whose value was taken ------------------------------


def _expired_and_taken(sessions: type[Session]) -> Session:
    sessions(pk="S#1", email="ada@lovelace.io", expires=_in(1)).save()
    _expire(sessions, "S#1")
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
    _expire(sessions, "S#3", "UNIQ#EMAIL#bob@lovelace.io")
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


class SeparateLocksMember(UniqueMixin, Model):
    class Meta:
        table_name = "expiry-separate"
        region = "us-east-1"
        unique_lock_table = "expiry-separate-locks"

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    email = UniqueAttribute(UnicodeAttribute(null=True), hold=HOLD)


class SharedLocksMember(UniqueMixin, Model):
    class Meta:
        table_name = "expiry-shared-locks"
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
    SeparateLocksMember.create_table(wait=True, billing_mode="PAY_PER_REQUEST")
    create_lock_table(SeparateLocksMember, wait=True)
    SharedLocksMember.create_table(wait=True, billing_mode="PAY_PER_REQUEST")
    x = SeparateLocksMember(pk="X", email="ada@lovelace.io")
    x.save()
    x.email = "ada@babbage.io"
    with TransactWrite() as tx:
        tx.save(x)
        tx.save(SharedLocksMember(pk="Y", email="ada@lovelace.io"))
    client = _client(SeparateLocksMember)
    old = client.get_item(TableName="expiry-separate-locks", Key=_lock_key(EMAIL), ConsistentRead=True).get("Item")
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
    set_attribute(sessions, _lock_key(EMAIL), "ttl", None)  # As a lock written by the previous version is.
    assert not audit(sessions).clean


def test_streams__hold_of_a_subclass_constraint_handled_through_the_base(moto_backend: None) -> None:
    """Regression: Streams looks up ``hold=`` among the handled model's constraints only.

    ``streams.handle(Animal, ...)`` for a family whose subclass Cat declares ``CHIP`` with hold=:
    a Cat removed behind the library's back has its CHIP lock deleted (the value freed at once)
    instead of turned into a hold, as Cat.delete() would.
    """
    table = unique_table_name("expiry-animals")

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


class HeldSession(UniqueMixin, Model):
    """Both: the record expires, and a released value is held."""

    class Meta:
        table_name = "expiry-held-sessions"
        region = "us-east-1"

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    sk = UnicodeAttribute(range_key=True, attr_name="SK", default="PROFILE")
    email = UniqueAttribute(UnicodeAttribute(null=True), hold=HOLD)
    expires = TTLAttribute(null=True, attr_name="ttl")


def test_streams__ttl_deletion_of_an_expired_record_frees_its_value(moto_backend: None) -> None:
    """A REMOVE by TTL: the lock expired with the record, so it is deleted, not turned into a hold."""
    model = bind_model(HeldSession, MOTO)
    model(pk="S#1", email="ada@lovelace.io", expires=_in(1)).save()
    _expire(model, "S#1")
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
    set_attribute(sessions, _lock_key(EMAIL), "ttl", None)
    _set_expiry(sessions, _record_key("S#1"), "ttl", int(time.time()) - 60)
    report = audit(sessions)
    assert [type(p).__name__ for p in report.problems] == ["OrphanedLock"]
    fixed = repair(sessions, report, apply=True)
    assert [f.outcome for f in fixed.fixes] == ["applied"]
    assert EMAIL not in _locks(sessions)
    assert audit(sessions).clean
