"""Where PynamoDB's float load puts a second's limit, and what an instance's own check compares (a second review).

The second review of the expiry compared within its whole second (aa2acd5, 85dcb22) found the
failures the tests' docstrings describe, as they were then: bounds at half a microsecond, where
the float's rounding does not put the limit, and ``Stored.same_as`` calling a changed record
unchanged. The fix computes the bounds from the floats themselves and keeps the range to checks
built from a scan's values (``Stored.ranged``). Each ``test_*`` failed before it;
``test_probe_*`` pin behaviour checked and found right.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from _backends import Backend, RequestCounter, bind_model, unique_table_name
from _expiry import (
    DEFAULT_EPOCH,
    DEFAULT_EXPIRY,
    DefaultedSession,
    Session,
    epoch_in_days,
    fix_outcomes,
    locks,
    put_record,
    raw,
    record_key,
    set_attribute,
)
from _invariant import actual_locks, expected_locks

from pynamodb_unique import StaleWrite, TransactWrite, backfill
from pynamodb_unique._core.plan import Guard, Stored
from pynamodb_unique._core.seconds import second_bounds
from pynamodb_unique._model.context import context_of
from pynamodb_unique._write.requests import guard_condition

#: An expiry after 2038-01-19 (past 2**31 seconds): a float there has 2**-21 s steps.
AFTER_2038 = 2_200_000_000


def _bind(model: type[Any], backend: Backend) -> Any:
    return bind_model(model, backend, unique_table_name("review-range2-" + model.__name__.lower()))


def _loads_as(text: str) -> int:
    """The whole second PynamoDB's TTLAttribute loads a stored number as (and writes back)."""
    attribute = Session.expires
    loaded = attribute.deserialize(text)  # type: ignore[no-untyped-call]
    return int(attribute.serialize(loaded))  # type: ignore[no-untyped-call]


def _near_second(second: int, fraction: str) -> tuple[int, str]:
    """(the second PynamoDB loads it as, the text) of ``second.fraction``."""
    text = f"{second}.{fraction}"
    return _loads_as(text), text


#: Numbers that PynamoDB's float load rounds up to the next second although they are below
#: ``next - 0.0000005``: now + 2 days with 8 decimals; after 2038 with Python's 7 (repr of a float).
_UP = [
    pytest.param(lambda: epoch_in_days(2), "99999949", id="8-decimals"),
    pytest.param(lambda: AFTER_2038, "9999994", id="after-2038-7-decimals"),
]


# === bugs =======================================================================================


@pytest.mark.integration
@pytest.mark.parametrize(("second", "fraction"), _UP)
def test_save_again__other_writer_respelled_same_second__saved(
    dynoxide_endpoint: str, second: Any, fraction: str
) -> None:
    """save() with no condition raises ConditionFailed after another writer respelled the expiry.

    The record is saved with expiry S + 1; another writer stores ``S.99999949`` (after 2038:
    ``S.9999994``, what ``repr(float)`` gives), which PynamoDB loads as S + 1: the same expiry.
    The next save's check is ``>= S.9999995 AND < S+1.9999995``, which DynamoDB, comparing
    exact decimals, fails. The engine then compares the stored item (S + 1, its text) with the
    snapshot (S + 1, no text): ``same_as`` now says "the same" (one side has no text: values
    compared), so it raises ConditionFailed "the caller's condition or the version check" to a
    caller who gave none; nothing is saved. Before the change same_as compared texts and the
    save re-planned from the stored item and succeeded.
    """
    model = _bind(Session, Backend("dynoxide", dynoxide_endpoint))
    loaded_as, text = _near_second(second(), fraction)
    record = model(pk="ACCT#1", email="a@x.io", expires=datetime.fromtimestamp(loaded_as, tz=UTC))
    record.save()
    set_attribute(model, record_key("ACCT#1"), "ttl", {"N": text})
    assert model.get("ACCT#1", "PROFILE").expires == record.expires  # PynamoDB: unchanged.
    record.email = "b@x.io"
    record.save()
    stored = raw(model, record_key("ACCT#1"))
    assert stored is not None
    assert stored["email"] == {"S": "b@x.io"}
    assert actual_locks(model) == expected_locks(model)


@pytest.mark.integration
@pytest.mark.parametrize(("second", "fraction"), _UP)
def test_delete_unloaded__same_second_respelled__deleted(dynoxide_endpoint: str, second: Any, fraction: str) -> None:
    """delete() of an unloaded instance with the right values raises ConditionFailed.

    The guess (expiry S + 1, as PynamoDB loads the stored ``S.99999949``) is checked within
    [S.9999995, S+1.9999995), which the stored number is not in; the stored item read back
    holds the same values, so same_as says "the caller's condition failed". The record and
    its lock stay. Before the change the delete re-planned from the stored item and succeeded.
    """
    model = _bind(Session, Backend("dynoxide", dynoxide_endpoint))
    loaded_as, text = _near_second(second(), fraction)
    model(pk="ACCT#1", email="a@x.io", expires=datetime.fromtimestamp(loaded_as, tz=UTC)).save()
    set_attribute(model, record_key("ACCT#1"), "ttl", {"N": text})
    model(pk="ACCT#1", email="a@x.io", expires=datetime.fromtimestamp(loaded_as, tz=UTC)).delete()
    assert raw(model, record_key("ACCT#1")) is None
    assert locks(model) == {}


@pytest.mark.integration
@pytest.mark.parametrize("run", ["backfill", "repair", "migrate"])
@pytest.mark.parametrize(("second", "fraction"), _UP)
def test_fix__number_the_float_load_rounds_up__applied(
    dynoxide_endpoint: str, second: Any, fraction: str, run: str
) -> None:
    """A record stored with ``S.99999949`` never gets its lock from backfill, repair or migrate.

    The audit loads it (through a float) as S + 1; the fix's check is "within S + 1's second",
    bounded at ``S.9999995`` in exact decimals, which the stored number is below: skipped on
    every run. ``second_bounds`` assumes a load rounds at exactly half a microsecond; the float
    (steps of 2**-22 s now, 2**-21 s after 2038) moves that point. Before the change the stored
    text was read and compared as stored (applied).
    """
    model = _bind(Session, Backend("dynoxide", dynoxide_endpoint))
    loaded_as, text = _near_second(second(), fraction)
    assert loaded_as == second() + 1
    put_record(model, "ACCT#1", {"email": {"S": "a@x.io"}, "ttl": {"N": text}})
    outcomes = fix_outcomes(model, run)
    assert outcomes == ["applied"]
    assert "UNIQ#EMAIL#a@x.io" in locks(model)


@pytest.mark.integration
@pytest.mark.parametrize("how", ["removed", "null"])
def test_save_loaded__default_expiry_text_removed__saved(dynoxide_endpoint: str, how: str) -> None:
    """save() with no condition raises ConditionFailed after another writer removed the expiry.

    A loaded record holds its fixed default's second spelled ``D.5``: the snapshot keeps that
    text and the save checks ``#ttl = D.5``. Another writer removes the attribute (or stores
    NULL), which PynamoDB loads as the default D. The check fails; the item read back has value
    D and no text, so same_as, now comparing values whenever one side lacks a text, says "the
    same" although the check the write sent (a text) can never pass on it: ConditionFailed, and
    every retry by the caller fails the same way until it reloads. Before the change the texts
    differed and the save re-planned and succeeded.
    """
    model = _bind(DefaultedSession, Backend("dynoxide", dynoxide_endpoint))
    put_record(model, "ACCT#1", {"email": {"S": "a@x.io"}, "ttl": {"N": f"{DEFAULT_EPOCH}.5"}})
    backfill(model)
    record = model.get("ACCT#1", "PROFILE")
    assert record.expires == DEFAULT_EXPIRY
    set_attribute(model, record_key("ACCT#1"), "ttl", None if how == "removed" else {"NULL": True})
    record.email = "b@x.io"
    record.save()
    stored = raw(model, record_key("ACCT#1"))
    assert stored is not None
    assert stored["email"] == {"S": "b@x.io"}
    assert actual_locks(model) == expected_locks(model)


@pytest.mark.integration
def test_transact_write__default_expiry_text_removed__stale_write(dynoxide_endpoint: str) -> None:
    """TransactWrite raises PynamoDB's bare TransactWriteError, not StaleWrite, for a changed record.

    As above: the loaded snapshot's text ``D.5`` fails on an item whose expiry another writer
    removed. ``_record_problem`` asks same_as, which says "the same", so the record's failure is
    taken for the caller's condition (there is none): the caller cannot tell it must reload.
    """
    model = _bind(DefaultedSession, Backend("dynoxide", dynoxide_endpoint))
    put_record(model, "ACCT#1", {"email": {"S": "a@x.io"}, "ttl": {"N": f"{DEFAULT_EPOCH}.5"}})
    backfill(model)
    record = model.get("ACCT#1", "PROFILE")
    set_attribute(model, record_key("ACCT#1"), "ttl", None)
    record.email = "b@x.io"
    connection = model._get_connection().connection
    with pytest.raises(StaleWrite), TransactWrite(connection=connection) as tx:
        tx.save(record)


# === probes =====================================================================================


def test_caller_microseconds_dropped_on_set() -> None:
    """TTLAttribute.__set__ truncates a caller's microseconds (999999 too): a scan's check bounds the second."""
    epoch = epoch_in_days(3)
    late = datetime.fromtimestamp(epoch, tz=UTC).replace(microsecond=999_999)
    record = Session(pk="A", email="a@x.io", expires=late)
    assert record.expires == datetime.fromtimestamp(epoch, tz=UTC)
    context = context_of(Session)
    assert context is not None
    guard = Guard(context.planner, Stored(exists=True, values=context.values(record), ranged=True))
    values = guard_condition(guard)["ExpressionAttributeValues"]
    assert [v for v in values.values() if "N" in v] == list(second_bounds(late) or ())
    assert second_bounds(late) == second_bounds(datetime.fromtimestamp(epoch, tz=UTC))


def test_guard_cache_default_state_and_gone_ok() -> None:
    """The text cache agrees with Guard.condition(): DEFAULT (ranged), a bare gone_ok delete, a verbatim default."""
    context = context_of(DefaultedSession)
    assert context is not None
    planner = context.planner
    shapes = [
        Stored(exists=True, values={"email": "a@x.io", "expires": DEFAULT_EXPIRY}),
        Stored(exists=True, values={"email": None, "expires": DEFAULT_EXPIRY}),
        Stored(exists=True, values={"email": "a@x.io", "expires": datetime.fromtimestamp(DEFAULT_EPOCH + 9, tz=UTC)}),
        Stored(
            exists=True,
            values={"email": "a@x.io", "expires": DEFAULT_EXPIRY},
            verbatim={"expires": {"N": f"{DEFAULT_EPOCH}.5"}},
        ),
        Stored(exists=False),
    ]
    for gone_ok in (False, True):
        for stored in shapes * 2:
            guard = Guard(planner, stored, gone_ok=gone_ok)
            condition = guard.condition()
            if condition is None:
                assert guard_condition(guard) == {}
                continue
            values: dict[str, Any] = {}
            expression = condition.serialize({}, values)
            sent = guard_condition(guard)
            assert sent["ConditionExpression"] == expression
            assert sent.get("ExpressionAttributeValues", {}) == values


@pytest.mark.integration
def test_seven_decimals_before_2038_load_as_ranged(dynoxide_endpoint: str) -> None:
    """Before 2038 a 7-decimal number loads on the side of the bound the range puts it (S.9999994 / .9999995)."""
    second = epoch_in_days(2)
    assert _loads_as(f"{second}.9999994") == second
    assert _loads_as(f"{second}.9999995") == second + 1
    model = _bind(Session, Backend("dynoxide", dynoxide_endpoint))
    put_record(model, "ACCT#1", {"email": {"S": "a@x.io"}, "ttl": {"N": f"{second}.9999995"}})
    assert [f.outcome for f in backfill(model).fixes] == ["applied"]


def test_same_second_respelled__replanned_without_a_read(moto_backend: None) -> None:
    """A save after the expiry was respelled within the same second (``S.5``): its own check compares by equality.

    It fails once and re-plans from the item the failure returns (no read), as before the range.
    """
    model = _bind(Session, Backend("moto", None))
    epoch = epoch_in_days(2)
    record = model(pk="ACCT#1", email="a@x.io", expires=datetime.fromtimestamp(epoch, tz=UTC))
    record.save()
    set_attribute(model, record_key("ACCT#1"), "ttl", {"N": f"{epoch}.5"})
    record.email = "b@x.io"
    with RequestCounter(model) as counter:
        record.save()
    assert counter.operations == ["TransactWriteItems", "TransactWriteItems"]
    assert actual_locks(model) == expected_locks(model)
