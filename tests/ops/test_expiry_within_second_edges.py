"""Edge cases of an expiry compared within its whole second (``tests/ops/test_expiry_within_second.py``), from a review.

The review of the commit that introduced the check (aa2acd5) found the failures each test's
docstring describes, as they were then: an overflow at the last second a datetime holds, the
rounding of a load to the microsecond, a fixed default, a subclass reading values its own way,
and ``Stored.same_as`` disagreeing with the check. Each ``test_*`` failed before its fix;
``test_probe_*`` pin behaviour checked and found right.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from _backends import Backend, bind_model, unique_table_name
from _expiry import (
    DEFAULT_EPOCH,
    DefaultedSession,
    Session,
    client,
    epoch_in_days,
    fix_outcomes,
    locks,
    put_record,
    raw,
    record_key,
    set_attribute,
)
from _invariant import actual_locks, expected_locks
from pynamodb.attributes import TTLAttribute, UnicodeAttribute
from pynamodb.models import Model

from pynamodb_unique import (
    StaleWrite,
    TransactWrite,
    UniqueAttribute,
    UniqueMixin,
    audit,
    backfill,
    bulk_save,
    repair,
)
from pynamodb_unique._core.plan import Guard, Stored
from pynamodb_unique._model.context import context_of
from pynamodb_unique._write.requests import guard_condition

#: "Never expires": what TTLAttribute makes of datetime.max (9999-12-31 23:59:59 UTC).
NEVER = datetime.max.replace(tzinfo=UTC)
NEVER_EPOCH = 253402300799


class LenientTTL(TTLAttribute):
    """A TTLAttribute that also loads an expiry another writer stored as a string."""

    def get_value(self, value: dict[str, Any]) -> Any:
        if "S" in value:
            return value["S"]
        return super().get_value(value)


class LenientRR(UniqueMixin, Model):
    """An expiring record whose expiry attribute reads a string too (its own get_value)."""

    class Meta:
        table_name = "review-range-lenient"
        region = "us-east-1"

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    sk = UnicodeAttribute(range_key=True, attr_name="SK", default="PROFILE")
    email = UniqueAttribute(UnicodeAttribute(null=True))
    expires = LenientTTL(null=True, attr_name="ttl")


class ExpiryKeyRR(UniqueMixin, Model):
    """The expiry is itself a unique attribute (one record per expiry second)."""

    class Meta:
        table_name = "review-range-expiry-key"
        region = "us-east-1"

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    sk = UnicodeAttribute(range_key=True, attr_name="SK", default="PROFILE")
    expires = UniqueAttribute(TTLAttribute(null=True, attr_name="ttl"))


def _bind(model: type[Any], backend: Backend) -> Any:
    return bind_model(model, backend, unique_table_name("review-range-" + model.__name__.lower()))


# === fixed ======================================================================================


def test_save_again__never_expiring_record__saved(moto_backend: None) -> None:
    """A record saved with "never expires" (datetime.max, 9999-12-31 23:59:59) cannot be saved again.

    After the first save the instance's snapshot holds the expiry without a stored text, so the
    next save's compare-and-swap is now the range ``>= v AND < v + 1 s``; ``v + 1 s`` is past
    ``datetime.max`` and raises OverflowError before any request. Before the change the check
    was an equality on the value and the second save worked. The same happens for a delete or
    update of an unloaded instance, ``TransactWrite`` with a known snapshot, and a repair or
    backfill of such a record.
    """
    model = _bind(Session, Backend("moto", None))
    record = model(pk="ACCT#1", email="a@x.io", expires=NEVER)
    record.save()
    record.email = "b@x.io"
    record.save()  # OverflowError: date value out of range
    stored = raw(model, record_key("ACCT#1"))
    assert stored is not None
    assert stored["email"] == {"S": "b@x.io"}
    assert actual_locks(model) == expected_locks(model)


def test_delete_unloaded__never_expiring_record__deleted(moto_backend: None) -> None:
    """A delete of an instance never loaded, with a "never" expiry, raises OverflowError.

    The guessed values are checked within their second; the upper bound ``datetime.max + 1 s``
    does not exist. The record and its lock stay; before the change the delete succeeded.
    """
    model = _bind(Session, Backend("moto", None))
    model(pk="ACCT#1", email="a@x.io", expires=NEVER).save()
    model(pk="ACCT#1", email="a@x.io", expires=NEVER).delete()
    assert raw(model, record_key("ACCT#1")) is None
    assert locks(model) == {}


@pytest.mark.integration
def test_backfill__never_expiring_record__fixed(dynoxide_endpoint: str) -> None:
    """Backfill of a record another writer stored with expiry 253402300799 (9999-12-31 23:59:59).

    The audited value is datetime.max's second; the range check adds a second to it and
    overflows, so the fix is not applied (or backfill raises). Before the change the record was
    read for its text and the lock created.
    """
    model = _bind(Session, Backend("dynoxide", dynoxide_endpoint))
    put_record(model, "ACCT#1", {"email": {"S": "a@x.io"}, "ttl": {"N": str(NEVER_EPOCH)}})
    done = backfill(model)
    assert [f.outcome for f in done.fixes] == ["applied"]
    assert "UNIQ#EMAIL#a@x.io" in locks(model)


@pytest.mark.integration
@pytest.mark.parametrize("run", ["backfill", "repair", "migrate"])
def test_fix__fraction_that_loads_as_the_next_second__applied(dynoxide_endpoint: str, run: str) -> None:
    """An expiry stored as ``X.9999996`` loads as ``X + 1`` and fails "within the second of X + 1".

    TTLAttribute.deserialize goes through a float and ``datetime.fromtimestamp``, which rounds
    to the microsecond: ``X.9999996`` loads as ``X + 1`` (and a set truncates nothing more).
    The range built from the loaded value is ``[X + 1, X + 2)``, which the stored number is not
    in, so every fix of such a record is skipped, on every run: the record never gets its lock,
    though nothing changed. The change's promise "every number that loads as the same whole
    second passes" does not hold. Before, the stored text was read and compared as stored
    (applied).
    """
    model = _bind(Session, Backend("dynoxide", dynoxide_endpoint))
    epoch = epoch_in_days(2)
    put_record(model, "ACCT#1", {"email": {"S": "a@x.io"}, "ttl": {"N": f"{epoch}.9999996"}})
    outcomes = fix_outcomes(model, run)
    assert outcomes == ["applied"]
    assert "UNIQ#EMAIL#a@x.io" in locks(model)


@pytest.mark.integration
def test_backfill__fixed_default_expiry_stored_with_a_fraction__applied(dynoxide_endpoint: str) -> None:
    """A TTLAttribute with a fixed default: another writer's ``default + 0.5`` fails the check.

    The audited value loads as the default's second, so ``cas_state`` gives DEFAULT_STATE, which
    is checked by equality (``absent OR NULL OR = default``), not within the second. Since the
    change no longer reads the stored text for a plain TTLAttribute, the fix is skipped on
    every run and the record never gets its lock. Before, the text was read (VERBATIM) and the
    lock created.
    """
    model = _bind(DefaultedSession, Backend("dynoxide", dynoxide_endpoint))
    put_record(model, "ACCT#1", {"email": {"S": "a@x.io"}, "ttl": {"N": f"{DEFAULT_EPOCH}.5"}})
    done = backfill(model)
    assert [f.outcome for f in done.fixes] == ["applied"]
    assert "UNIQ#EMAIL#a@x.io" in locks(model)


@pytest.mark.integration
def test_delete_unloaded__fixed_default_expiry_with_fraction__deleted(dynoxide_endpoint: str) -> None:
    """A delete of an unloaded instance whose expiry equals its fixed default, stored with a fraction.

    The guessed expiry is compared by equality (only checks built from a scan compare within the
    second): the delete fails once, re-plans from the stored item, and deletes record and lock.
    """
    model = _bind(DefaultedSession, Backend("dynoxide", dynoxide_endpoint))
    model(pk="ACCT#1", email="a@x.io").save()
    set_attribute(model, record_key("ACCT#1"), "ttl", {"N": f"{DEFAULT_EPOCH}.5"})
    model(pk="ACCT#1", email="a@x.io").delete()
    assert raw(model, record_key("ACCT#1")) is None
    assert locks(model) == {}


@pytest.mark.integration
def test_transact_write__respelled_expiry__stale_write(dynoxide_endpoint: str) -> None:
    """An instance's own check compares its expiry by equality: a respelling since its save is a change.

    The first review's version compared it within the second here too, which made ``same_as``
    disagree with the check; only checks built from a scan's values do now. TransactWrite cannot
    re-plan, so the caller gets StaleWrite, and nothing is written.
    """
    model = _bind(Session, Backend("dynoxide", dynoxide_endpoint))
    epoch = epoch_in_days(2)
    record = model(pk="ACCT#1", email="a@x.io", note="old", expires=datetime.fromtimestamp(epoch, tz=UTC))
    record.save()
    set_attribute(model, record_key("ACCT#1"), "ttl", {"N": f"{epoch}.5"})
    connection = model._get_connection().connection
    with pytest.raises(StaleWrite), TransactWrite(connection=connection) as tx:
        tx.delete(record, condition=model.note == "something else")
    assert raw(model, record_key("ACCT#1")) is not None
    assert "UNIQ#EMAIL#a@x.io" in locks(model)


@pytest.mark.integration
def test_repair__expiry_loading_its_own_way_via_get_value__applied(dynoxide_endpoint: str) -> None:
    """A TTLAttribute subclass with its own ``get_value`` (it also reads a string) is still ranged.

    ``Planner.ranged`` only looks at ``serialize`` and ``deserialize``; this subclass loads
    another writer's ``{"S": "X"}`` as X. Its text is no longer read, and ``#ttl >= :N`` on a
    string is false in DynamoDB, so the fix is skipped on every run. Before the change the text
    ``{"S": "X"}`` was read and checked as stored (applied). The docstring promises "a subclass
    that serializes or loads its own way is not ranged".
    """
    model = _bind(LenientRR, Backend("dynoxide", dynoxide_endpoint))
    epoch = epoch_in_days(2)
    put_record(model, "ACCT#1", {"email": {"S": "a@x.io"}, "ttl": {"S": str(epoch)}})
    done = backfill(model)
    assert [f.outcome for f in done.fixes] == ["applied"]
    assert "UNIQ#EMAIL#a@x.io" in locks(model)


# === probes ====================================================================================


@pytest.mark.integration
@pytest.mark.parametrize(
    ("saved", "respelled"), [(-1, "-0.5"), (-2, "-1.25"), (0, "0.25")], ids=["-0.5", "-1.25", "0.25"]
)
def test_delete_unloaded_negative_epochs(dynoxide_endpoint: str, saved: int, respelled: str) -> None:
    """Negative epochs: a load gives the floor second; a delete of an unloaded instance guessing it deletes."""
    model = _bind(Session, Backend("dynoxide", dynoxide_endpoint))
    model(pk="ACCT#1", email="a@x.io", expires=datetime.fromtimestamp(saved, tz=UTC)).save()
    set_attribute(model, record_key("ACCT#1"), "ttl", {"N": respelled})
    loaded = model.get("ACCT#1", "PROFILE")
    assert loaded.expires == datetime.fromtimestamp(saved, tz=UTC)
    model(pk="ACCT#1", email="a@x.io", expires=datetime.fromtimestamp(saved, tz=UTC)).delete()
    assert raw(model, record_key("ACCT#1")) is None
    assert locks(model) == {}


@pytest.mark.integration
def test_backfill_far_future_fraction_below_max(dynoxide_endpoint: str) -> None:
    """A far-future expiry short of the last second: range check applied."""
    model = _bind(Session, Backend("dynoxide", dynoxide_endpoint))
    put_record(model, "ACCT#1", {"email": {"S": "a@x.io"}, "ttl": {"N": f"{NEVER_EPOCH - 1}.5"}})
    done = backfill(model)
    assert [f.outcome for f in done.fixes] == ["applied"]


@pytest.mark.integration
def test_backfill_null_expiry(dynoxide_endpoint: str) -> None:
    """A NULL expiry loads as absent: the check is absent-or-NULL, applied."""
    model = _bind(Session, Backend("dynoxide", dynoxide_endpoint))
    put_record(model, "ACCT#1", {"email": {"S": "a@x.io"}, "ttl": {"NULL": True}})
    done = backfill(model)
    assert [f.outcome for f in done.fixes] == ["applied"]
    assert "UNIQ#EMAIL#a@x.io" in locks(model)


@pytest.mark.integration
def test_repair_expiry_changed_to_string_skipped(dynoxide_endpoint: str) -> None:
    """Plain TTL: a record whose expiry another writer re-stored as a string after the audit is skipped."""
    model = _bind(Session, Backend("dynoxide", dynoxide_endpoint))
    epoch = epoch_in_days(2)
    put_record(model, "ACCT#1", {"email": {"S": "a@x.io"}, "ttl": {"N": str(epoch)}})
    report = audit(model)
    set_attribute(model, record_key("ACCT#1"), "ttl", {"S": str(epoch)})
    done = repair(model, report, apply=True)
    assert [f.outcome for f in done.fixes] == ["skipped"]
    assert locks(model) == {}


@pytest.mark.integration
def test_repair_expiry_removed_after_audit_skipped(dynoxide_endpoint: str) -> None:
    """A missing attribute fails ``>=``: a record whose expiry was removed after the audit is skipped."""
    model = _bind(Session, Backend("dynoxide", dynoxide_endpoint))
    epoch = epoch_in_days(2)
    put_record(model, "ACCT#1", {"email": {"S": "a@x.io"}, "ttl": {"N": str(epoch)}})
    report = audit(model)
    client(model).update_item(
        TableName=model.Meta.table_name,
        Key=record_key("ACCT#1"),
        UpdateExpression="REMOVE #e",
        ExpressionAttributeNames={"#e": "ttl"},
    )
    done = repair(model, report, apply=True)
    assert [f.outcome for f in done.fixes] == ["skipped"]


@pytest.mark.integration
def test_expiry_as_unique_attribute_fraction(dynoxide_endpoint: str) -> None:
    """The expiry as a unique attribute: a fraction loads as the same second, same lock key; applied."""
    model = _bind(ExpiryKeyRR, Backend("dynoxide", dynoxide_endpoint))
    epoch = epoch_in_days(2)
    put_record(model, "ACCT#1", {"ttl": {"N": f"{epoch}.5"}})
    done = backfill(model)
    assert [f.outcome for f in done.fixes] == ["applied"]
    assert actual_locks(model) == expected_locks(model)
    # The unloaded instance's delete (its guess re-planned from the stored text) frees the value.
    model(pk="ACCT#1", expires=datetime.fromtimestamp(epoch, tz=UTC)).delete()
    assert locks(model) == {}


def test_guard_text_cache_range_vs_equal(moto_backend: None) -> None:
    """The guard text cache: RANGE, ABSENT and VERBATIM shapes each give PynamoDB's own serialization."""
    context = context_of(Session)
    assert context is not None
    planner = context.planner
    epoch = epoch_in_days(3)
    shapes = [
        Stored(exists=True, values={"email": "a@x.io", "expires": datetime.fromtimestamp(epoch, tz=UTC)}),
        Stored(exists=True, values={"email": "a@x.io", "expires": None}),
        Stored(
            exists=True,
            values={"email": "a@x.io", "expires": datetime.fromtimestamp(epoch, tz=UTC)},
            verbatim={"expires": {"N": f"{epoch}.5"}},
        ),
        Stored(exists=True, values={"email": None, "expires": datetime.fromtimestamp(epoch + 7, tz=UTC)}),
    ]
    for gone_ok in (False, True):
        for stored in shapes * 2:
            guard = Guard(planner, stored, gone_ok=gone_ok)
            condition = guard.condition()
            assert condition is not None
            values: dict[str, Any] = {}
            expression = condition.serialize({}, values)
            sent = guard_condition(guard)
            assert sent["ConditionExpression"] == expression
            assert sent.get("ExpressionAttributeValues", {}) == values


def test_bulk_save_then_save(moto_backend: None) -> None:
    """bulk_save and a later save of the same instances with an ordinary expiry."""
    model = _bind(Session, Backend("moto", None))
    epoch = epoch_in_days(3)
    records = [
        model(pk=f"ACCT#{i}", email=f"a{i}@x.io", expires=datetime.fromtimestamp(epoch, tz=UTC)) for i in range(3)
    ]
    bulk_save(records)
    records[0].email = "z@x.io"
    records[0].save()
    assert actual_locks(model) == expected_locks(model)
