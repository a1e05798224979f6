"""An expiry stored with a fraction of a second, compared within its whole second.

A ``TTLAttribute`` may be stored with a fraction of a second by another writer; PynamoDB loads it
(through a float, to the microsecond) and writes it in whole seconds, so an equality on the whole
seconds would fail for it. Repair, backfill and migrate build a record's compare-and-swap from
the values an audit's scan read: their check accepts exactly the numbers PynamoDB loads as that
second (``Stored.ranged``, ``second_bounds``) without reading the record. An instance's own
expiry is compared as stored, or by equality. The tests cover the bounds themselves (at half a
microsecond, at the last second a datetime holds, negative epochs), fixed defaults, attributes
that load their own way, polymorphic families, a separate lock table, former forms, export
audits and expired owners.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime
from decimal import Context, Decimal
from pathlib import Path
from typing import Any

import pytest
from _backends import Backend, RequestCounter, bind_model, unique_table_name
from _expiry import (
    DEFAULT_EPOCH,
    DEFAULT_EXPIRY,
    DefaultedSession,
    Session,
    account_family,
    audited,
    client,
    epoch_in_days,
    fix_outcomes,
    lock_item_key,
    locks,
    put_record,
    raw,
    record_key,
    repaired,
    save_expired,
    set_attribute,
    table_export,
)
from _invariant import actual_locks, expected_locks
from pynamodb.attributes import DiscriminatorAttribute, JSONAttribute, TTLAttribute, UnicodeAttribute
from pynamodb.models import Model

from pynamodb_unique import (
    Former,
    StaleWrite,
    TransactWrite,
    UniqueAttribute,
    UniqueConstraint,
    UniqueMixin,
    audit,
    backfill,
    bulk_save,
    create_lock_table,
    migrate,
)
from pynamodb_unique._core.plan import Guard, Planner, Stored
from pynamodb_unique._core.seconds import second_bounds
from pynamodb_unique._model.context import context_of
from pynamodb_unique._model.registry import planner_of
from pynamodb_unique._write.requests import guard_condition

# --- The check, and the fixes that read no record ---------------------------------------------


class WholeSecondsTTL(TTLAttribute):
    """A TTLAttribute that loads its own way: its stored text is read, not ranged."""

    def deserialize(self, value: Any) -> datetime:
        loaded: datetime = super().deserialize(value)  # type: ignore[no-untyped-call] # unannotated in PynamoDB.
        return loaded


class Pass(UniqueMixin, Model):
    """An expiring record whose expiry attribute is a subclass loading its own way."""

    class Meta:
        table_name = "expiry-range-passes"
        region = "us-east-1"

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    sk = UnicodeAttribute(range_key=True, attr_name="SK", default="PROFILE")
    code = UniqueAttribute(UnicodeAttribute(null=True))
    expires = WholeSecondsTTL(null=True, attr_name="ttl")


def _planner(model: type[Any]) -> Planner:
    context = context_of(model)
    assert context is not None
    return context.planner


def _put_raw(model: type[Any], pk: str, email: str, expiry: str) -> None:
    """A record written by another writer: its expiry spelled ``expiry``, no lock."""
    put_record(model, pk, {"email": {"S": email}, "ttl": {"N": expiry}})


def _fixed(model: type[Any], run: str, expiry: dict[str, Any]) -> None:
    """Another writer stores ACCT#1 (``a@x.io``, its ``ttl`` as ``expiry``) without its lock: ``run`` creates it."""
    put_record(model, "ACCT#1", {"email": {"S": "a@x.io"}, "ttl": expiry})
    assert fix_outcomes(model, run) == ["applied"]
    assert "UNIQ#EMAIL#a@x.io" in locks(model)


def _assert_saved(model: type[Any], email: str) -> None:
    """ACCT#1 is stored with ``email``, and the table holds exactly the locks its records need."""
    stored = raw(model, record_key("ACCT#1"))
    assert stored is not None
    assert stored["email"] == {"S": email}
    assert actual_locks(model) == expected_locks(model)


def _assert_deleted(model: type[Any]) -> None:
    """ACCT#1 and its lock are gone."""
    assert raw(model, record_key("ACCT#1")) is None
    assert locks(model) == {}


def _sent_as_serialized(guard: Guard) -> bool:
    """Whether ``guard`` has a condition: the text cache (``guard_condition``) sends PynamoDB's serialization of it.

    Without a condition it sends nothing.
    """
    condition = guard.condition()
    if condition is None:
        assert guard_condition(guard) == {}
        return False
    names: dict[str, str] = {}
    values: dict[str, Any] = {}
    expression = condition.serialize(names, values)
    sent = guard_condition(guard)
    assert sent["ConditionExpression"] == expression
    assert sent.get("ExpressionAttributeValues", {}) == values
    assert sent["ExpressionAttributeNames"] == {v: k for k, v in names.items()}
    return True


def _loads_as(text: str) -> int:
    """The whole second PynamoDB's TTLAttribute loads a stored number as (and writes back)."""
    attribute = Session.expires
    loaded = attribute.deserialize(text)  # type: ignore[no-untyped-call] # unannotated in PynamoDB.
    return int(attribute.serialize(loaded))  # type: ignore[no-untyped-call]


def _assert_bounds_exact(epoch: int) -> None:
    """Each bound of the second loads as its second; the number of 38 digits just below it, as the second before."""
    bounds = second_bounds(datetime.fromtimestamp(epoch, tz=UTC))
    assert bounds is not None, epoch
    for bound, second in zip(bounds, (epoch, epoch + 1), strict=True):
        number = Decimal(bound["N"])
        assert len(number.as_tuple().digits) <= 38
        below = Context(prec=80).subtract(number, Decimal(1).scaleb(number.adjusted() - 37))
        assert (_loads_as(f"{number:f}"), _loads_as(f"{below:f}")) == (second, second - 1), (epoch, bound)


# --- the check itself -----------------------------------------------------------------------


def test_planner_ranged__plain_ttl_only() -> None:
    assert _planner(Session).ranged == frozenset({"expires"})
    assert _planner(Pass).ranged == frozenset()


@pytest.mark.parametrize("fraction", [0, 500_000], ids=["whole", "fraction"])
def test_guard__scanned_expiry__within_its_second(fraction: int) -> None:
    """The compiled values are the condition's, in PynamoDB's numbering: the numbers that load as the second."""
    epoch = epoch_in_days(3)
    expires = datetime.fromtimestamp(epoch, tz=UTC).replace(microsecond=fraction)
    stored = Stored(exists=True, values={"email": "a@x.io", "expires": expires}, ranged=True)
    guard = Guard(_planner(Session), stored)
    condition = guard.condition()
    assert condition is not None
    names: dict[str, str] = {}
    values: dict[str, Any] = {}
    expression = condition.serialize(names, values)
    sent = guard_condition(guard)
    assert sent["ConditionExpression"] == expression
    assert sent["ExpressionAttributeValues"] == values
    bounds = second_bounds(expires)
    assert bounds is not None
    assert [v for v in values.values() if "N" in v] == list(bounds)
    assert " >= " in expression
    assert " < " in expression


def test_guard__instance_expiry__by_equality() -> None:
    """Values an instance holds (not a scan's) keep the equality: its save wrote them in whole seconds."""
    epoch = epoch_in_days(3)
    stored = Stored(exists=True, values={"email": "a@x.io", "expires": datetime.fromtimestamp(epoch, tz=UTC)})
    sent = guard_condition(Guard(_planner(Session), stored))
    assert {"N": str(epoch)} in sent["ExpressionAttributeValues"].values()
    assert " >= " not in sent["ConditionExpression"]


def test_guard__expiry_with_text__compared_as_stored() -> None:
    """A text known from a load is still compared as stored (equality on the text)."""
    epoch = epoch_in_days(3)
    expires = datetime.fromtimestamp(epoch, tz=UTC)
    text = {"N": f"{epoch}.25"}
    stored = Stored(
        exists=True, values={"email": "a@x.io", "expires": expires}, verbatim={"expires": text}, ranged=True
    )
    sent = guard_condition(Guard(_planner(Session), stored))
    assert text in sent["ExpressionAttributeValues"].values()
    assert " >= " not in sent["ConditionExpression"]


# --- repair, backfill and migrate read no record ---------------------------------------------


@pytest.mark.parametrize("run", ["backfill", "repair", "migrate"])
def test_fixes_of_an_expiring_model__read_no_record(moto_backend: None, run: str) -> None:
    """Before: one GetItem per fixed record of a model with a TTLAttribute (its stored text)."""
    model = bind_model(Session, Backend("moto", None))
    for i in range(3):
        _put_raw(model, f"ACCT#{i}", f"a{i}@x.io", str(epoch_in_days(1 + i)))
    with RequestCounter(model) as counter:
        outcomes = fix_outcomes(model, run)
    assert outcomes == ["applied"] * 3
    assert counter.count("GetItem") == 0, counter.operations
    assert sorted(locks(model)) == [f"UNIQ#EMAIL#a{i}@x.io" for i in range(3)]


def test_fixes_of_an_expiry_loading_its_own_way__read_the_record(moto_backend: None) -> None:
    """A subclass that loads its own way keeps the read of its stored text."""
    model = bind_model(Pass, Backend("moto", None))
    put_record(model, "ACCT#1", {"code": {"S": "c1"}, "ttl": {"N": str(epoch_in_days(1))}})
    with RequestCounter(model) as counter:
        outcomes = fix_outcomes(model, "backfill")
    assert outcomes == ["applied"]
    assert counter.count("GetItem") == 1, counter.operations


# --- against a server evaluating the conditions ----------------------------------------------


@pytest.mark.integration
def test_backfill__another_writers_fraction__applied(dynoxide_endpoint: str) -> None:
    """An expiry stored with a fraction passes the check of its whole seconds: the lock is created."""
    model = bind_model(Session, Backend("dynoxide", dynoxide_endpoint))
    epoch = epoch_in_days(2)
    _put_raw(model, "ACCT#1", "a@x.io", f"{epoch}.75")
    done = backfill(model)
    assert [f.outcome for f in done.fixes] == ["applied"]
    lock = locks(model)["UNIQ#EMAIL#a@x.io"]
    assert lock["uniq_owner_hash"] == {"S": "ACCT#1"}


@pytest.mark.integration
@pytest.mark.parametrize(
    ("moved_to", "outcome"),
    [
        (lambda epoch: {"N": f"{epoch}.5"}, "applied"),  # The same second respelled: the same expiry.
        (lambda epoch: {"N": str(epoch + 1)}, "skipped"),  # The next second: the record changed.
        (lambda epoch: {"N": str(epoch - 1)}, "skipped"),
        (lambda epoch: {"S": str(epoch)}, "skipped"),  # Plain TTL: re-stored as a string by another writer.
        (lambda epoch: None, "skipped"),  # Removed: a missing attribute fails ``>=``.
    ],
    ids=["same-second", "next-second", "previous-second", "restored-as-a-string", "removed"],
)
def test_repair__expiry_moved_after_the_audit(dynoxide_endpoint: str, moved_to: Any, outcome: str) -> None:
    """The check fails only for another second: a record changed since the audit gets no lock."""
    model = bind_model(Session, Backend("dynoxide", dynoxide_endpoint))
    epoch = epoch_in_days(2)
    _put_raw(model, "ACCT#1", "a@x.io", str(epoch))
    report = audit(model)
    assert len(report.problems) == 1
    set_attribute(model, record_key("ACCT#1"), "ttl", moved_to(epoch))
    with RequestCounter(model) as counter:
        repaired(model, report, outcome)
    assert counter.count("GetItem") == 0, counter.operations
    assert sorted(locks(model)) == (["UNIQ#EMAIL#a@x.io"] if outcome == "applied" else [])
    stored = raw(model, record_key("ACCT#1"))
    assert stored is not None
    assert stored.get("ttl") == moved_to(epoch)


@pytest.mark.parametrize("epoch", [1_796_400_000, 2_200_000_000, 4_102_444_800, 253_402_300_798])
def test_second_bounds__exactly_what_pynamodb_loads_as_the_second(epoch: int) -> None:
    """Each bound loads as its second; the number of 38 digits just below it, as the second before.

    PynamoDB loads through a float, whose spacing grows with the epoch (2**-22 s today, 2**-21 s
    after 2038, about 3e-5 s near year 9999): the limit is where the float's rounding puts it.
    """
    _assert_bounds_exact(epoch)


@pytest.mark.parametrize("epoch", [0, -5, 100, 253_402_300_799])
def test_second_bounds__none_where_they_cannot_be_stated(epoch: int) -> None:
    """Near 1970 a bound needs more than DynamoDB's 38 digits; past the last second Python holds none."""
    assert second_bounds(datetime.fromtimestamp(epoch, tz=UTC)) is None


@pytest.mark.integration
def test_backfill__last_second__reads_its_text(dynoxide_endpoint: str) -> None:
    """An expiry without bounds is read for its text, as before: the lock is created."""
    model = bind_model(Session, Backend("dynoxide", dynoxide_endpoint))
    _put_raw(model, "ACCT#1", "a@x.io", "253402300799")
    with RequestCounter(model) as counter:
        done = backfill(model)
    assert [f.outcome for f in done.fixes] == ["applied"]
    assert counter.count("GetItem") == 1, counter.operations


# --- Edges: the last second, a never-expiring record, fixed defaults, own loading -------------


#: "Never expires": what TTLAttribute makes of datetime.max (9999-12-31 23:59:59 UTC).
NEVER = datetime.max.replace(tzinfo=UTC)
NEVER_EPOCH = 253402300799


class LenientTTL(TTLAttribute):
    """A TTLAttribute that also loads an expiry another writer stored as a string."""

    def get_value(self, value: dict[str, Any]) -> Any:
        if "S" in value:
            return value["S"]
        return super().get_value(value)


class Lenient(UniqueMixin, Model):
    """An expiring record whose expiry attribute reads a string too (its own get_value)."""

    class Meta:
        table_name = "within-second-lenient"
        region = "us-east-1"

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    sk = UnicodeAttribute(range_key=True, attr_name="SK", default="PROFILE")
    email = UniqueAttribute(UnicodeAttribute(null=True))
    expires = LenientTTL(null=True, attr_name="ttl")


class ExpiryKey(UniqueMixin, Model):
    """The expiry is itself a unique attribute (one record per expiry second)."""

    class Meta:
        table_name = "within-second-expiry-key"
        region = "us-east-1"

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    sk = UnicodeAttribute(range_key=True, attr_name="SK", default="PROFILE")
    expires = UniqueAttribute(TTLAttribute(null=True, attr_name="ttl"))


def _bind(model: type[Any], backend: Backend, **meta: Any) -> Any:
    """``model`` on a table of its own, created once ``meta`` (more Meta settings) is set."""
    bound = bind_model(model, backend, unique_table_name("within-second-" + model.__name__.lower()), create=not meta)
    for name, value in meta.items():
        setattr(bound.Meta, name, value)
    if meta:
        bound.create_table(wait=True, billing_mode="PAY_PER_REQUEST")
    return bound


# --- fixed: a never-expiring record, a fraction loading as the next second, fixed defaults ---------


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
    _assert_saved(model, "b@x.io")


def test_delete_unloaded__never_expiring_record__deleted(moto_backend: None) -> None:
    """A delete of an instance never loaded, with a "never" expiry, raises OverflowError.

    The guessed values are checked within their second; the upper bound ``datetime.max + 1 s``
    does not exist. The record and its lock stay; before the change the delete succeeded.
    """
    model = _bind(Session, Backend("moto", None))
    model(pk="ACCT#1", email="a@x.io", expires=NEVER).save()
    model(pk="ACCT#1", email="a@x.io", expires=NEVER).delete()
    _assert_deleted(model)


@pytest.mark.integration
def test_backfill__never_expiring_record__fixed(dynoxide_endpoint: str) -> None:
    """Backfill of a record another writer stored with expiry 253402300799 (9999-12-31 23:59:59).

    The audited value is datetime.max's second; the range check adds a second to it and
    overflows, so the fix is not applied (or backfill raises). Before the change the record was
    read for its text and the lock created.
    """
    _fixed(_bind(Session, Backend("dynoxide", dynoxide_endpoint)), "backfill", {"N": str(NEVER_EPOCH)})


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
    _fixed(model, run, {"N": f"{epoch_in_days(2)}.9999996"})


@pytest.mark.integration
def test_backfill__fixed_default_expiry_stored_with_a_fraction__applied(dynoxide_endpoint: str) -> None:
    """A TTLAttribute with a fixed default: another writer's ``default + 0.5`` fails the check.

    The audited value loads as the default's second, so ``cas_state`` gives DEFAULT_STATE, which
    is checked by equality (``absent OR NULL OR = default``), not within the second. Since the
    change no longer reads the stored text for a plain TTLAttribute, the fix is skipped on
    every run and the record never gets its lock. Before, the text was read (VERBATIM) and the
    lock created.
    """
    _fixed(_bind(DefaultedSession, Backend("dynoxide", dynoxide_endpoint)), "backfill", {"N": f"{DEFAULT_EPOCH}.5"})


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
    _assert_deleted(model)


@pytest.mark.integration
def test_transact_write__respelled_expiry__stale_write(dynoxide_endpoint: str) -> None:
    """An instance's own check compares its expiry by equality: a respelling since its save is a change.

    An earlier version compared it within the second here too, which made ``same_as``
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
    _fixed(_bind(Lenient, Backend("dynoxide", dynoxide_endpoint)), "backfill", {"S": str(epoch_in_days(2))})


# --- negative epochs, far-future and null expiries, changes since the audit, bulk_save then save ---


@pytest.mark.integration
@pytest.mark.parametrize(
    ("saved", "respelled"), [(-1, "-0.5"), (-2, "-1.25"), (0, "0.25")], ids=["-0.5", "-1.25", "0.25"]
)
def test_delete_unloaded__negative_epochs__deleted(dynoxide_endpoint: str, saved: int, respelled: str) -> None:
    """Negative epochs: a load gives the floor second; a delete of an unloaded instance guessing it deletes."""
    model = _bind(Session, Backend("dynoxide", dynoxide_endpoint))
    model(pk="ACCT#1", email="a@x.io", expires=datetime.fromtimestamp(saved, tz=UTC)).save()
    set_attribute(model, record_key("ACCT#1"), "ttl", {"N": respelled})
    loaded = model.get("ACCT#1", "PROFILE")
    assert loaded.expires == datetime.fromtimestamp(saved, tz=UTC)
    model(pk="ACCT#1", email="a@x.io", expires=datetime.fromtimestamp(saved, tz=UTC)).delete()
    _assert_deleted(model)


@pytest.mark.integration
def test_backfill__far_future_fraction_below_the_last_second__applied(dynoxide_endpoint: str) -> None:
    """A far-future expiry short of the last second: range check applied."""
    _fixed(_bind(Session, Backend("dynoxide", dynoxide_endpoint)), "backfill", {"N": f"{NEVER_EPOCH - 1}.5"})


@pytest.mark.integration
def test_backfill__null_expiry__applied_as_absent(dynoxide_endpoint: str) -> None:
    """A NULL expiry loads as absent: the check is absent-or-NULL, applied."""
    _fixed(_bind(Session, Backend("dynoxide", dynoxide_endpoint)), "backfill", {"NULL": True})


@pytest.mark.integration
def test_unique_expiry__fraction__same_lock_key_applied(dynoxide_endpoint: str) -> None:
    """The expiry as a unique attribute: a fraction loads as the same second, same lock key; applied."""
    model = _bind(ExpiryKey, Backend("dynoxide", dynoxide_endpoint))
    epoch = epoch_in_days(2)
    put_record(model, "ACCT#1", {"ttl": {"N": f"{epoch}.5"}})
    done = backfill(model)
    assert [f.outcome for f in done.fixes] == ["applied"]
    assert actual_locks(model) == expected_locks(model)
    # The unloaded instance's delete (its guess re-planned from the stored text) frees the value.
    model(pk="ACCT#1", expires=datetime.fromtimestamp(epoch, tz=UTC)).delete()
    assert locks(model) == {}


def test_guard_text_cache__range_absent_verbatim__as_pynamodb_serializes(moto_backend: None) -> None:
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
            assert _sent_as_serialized(Guard(planner, stored, gone_ok=gone_ok))


def test_bulk_save__then_save__ordinary_expiry_saved(moto_backend: None) -> None:
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


# --- Families, separate lock tables, former forms, exports, expired owners --------------------


# --- models ----------------------------------------------------------------------------------


def _family(host: str) -> dict[str, Any]:
    """A polymorphic family in one table on ``host``: only Trial has a TTLAttribute."""
    return account_family("within-second-accounts", host=host)


class Profile(UniqueMixin, Model):
    """An expiring record whose partial constraint reads an inexact attribute (a JSONAttribute)."""

    class Meta:
        table_name = "within-second-profiles"
        region = "us-east-1"
        unique_constraints = [
            UniqueConstraint(
                "email",
                condition=lambda r: r.meta is not None and bool(r.meta.get("active")),
                condition_attributes=("meta",),
            )
        ]

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    sk = UnicodeAttribute(range_key=True, attr_name="SK", default="PROFILE")
    email = UnicodeAttribute(null=True)
    meta = JSONAttribute(null=True)
    expires = TTLAttribute(null=True, attr_name="ttl")


class Migrating(UniqueMixin, Model):
    """An expiring record whose email constraint changed form (casefolded now)."""

    class Meta:
        table_name = "within-second-migrating"
        region = "us-east-1"

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    sk = UnicodeAttribute(range_key=True, attr_name="SK", default="PROFILE")
    email = UniqueAttribute(UnicodeAttribute(null=True), normalize=str.casefold, former=Former(normalize=None))
    expires = TTLAttribute(null=True, attr_name="ttl")


# --- polymorphic families --------------------------------------------------------------------


@pytest.mark.integration
def test_family_backfill__fraction_on_the_ttl_class__applied_without_a_read(dynoxide_endpoint: str) -> None:
    """Only Trial has the TTL: its record with ``X.5`` gets its lock, a Paid one too; no GetItem."""
    family = _family(dynoxide_endpoint)
    account = family["Account"]
    epoch = epoch_in_days(2)
    put_record(account, "T#1", {"kind": {"S": "trial"}, "email": {"S": "t@x.io"}, "ttl": {"N": f"{epoch}.5"}})
    put_record(account, "P#1", {"kind": {"S": "paid"}, "email": {"S": "p@x.io"}, "ttl": {"N": f"{epoch}.5"}})
    with RequestCounter(account) as counter:
        done = backfill(account)
    assert sorted(f.outcome for f in done.fixes) == ["applied", "applied"]
    assert counter.count("GetItem") == 0, counter.operations
    assert audit(account).clean


@pytest.mark.integration
def test_family_repair__stale_and_foreign_locks__fixed(dynoxide_endpoint: str) -> None:
    """Stale (lock expiry respelled) and foreign (Paid owner, Trial holder with a fraction) are fixed."""
    family = _family(dynoxide_endpoint)
    account, trial, paid = family["Account"], family["Trial"], family["Paid"]
    epoch = epoch_in_days(2)
    trial(pk="T#1", email="t@x.io", expires=datetime.fromtimestamp(epoch, tz=UTC)).save()
    set_attribute(account, record_key("T#1"), "ttl", {"N": f"{epoch}.25"})
    set_attribute(account, lock_item_key("UNIQ#EMAIL#t@x.io"), "ttl", {"N": str(epoch + 100)})
    paid(pk="P#1", email="q@x.io").save()
    # Trial T#2 holds q2, whose lock names P#1 (which holds q@x.io).
    put_record(account, "T#2", {"kind": {"S": "trial"}, "email": {"S": "q2@x.io"}, "ttl": {"N": f"{epoch}.75"}})
    lock = dict(locks(account)["UNIQ#EMAIL#q@x.io"])
    lock["PK"] = {"S": "UNIQ#EMAIL#q2@x.io"}
    client(account).put_item(TableName=account.Meta.table_name, Item=lock)
    repaired(account, audited(account, "foreign", "stale"), "applied", "applied")
    assert audit(account).clean


# --- JSONAttribute read while the expiry is ranged ------------------------------------------------


@pytest.mark.integration
@pytest.mark.parametrize("run", ["backfill", "repair", "migrate"])
def test_fix__json_text_read__expiry_ranged(dynoxide_endpoint: str, run: str) -> None:
    """Another writer's JSON spacing and expiry fraction: one GetItem (the JSON's text), the expiry ranged."""
    model = _bind(Profile, Backend("dynoxide", dynoxide_endpoint))
    epoch = epoch_in_days(2)
    put_record(
        model, "ACCT#1", {"email": {"S": "a@x.io"}, "meta": {"S": '{"active":  true}'}, "ttl": {"N": f"{epoch}.5"}}
    )
    with RequestCounter(model) as counter:
        outcomes = fix_outcomes(model, run)
    assert outcomes == ["applied"]
    assert counter.count("GetItem") == 1, counter.operations
    assert actual_locks(model) == expected_locks(model)


# --- a separate lock table, a former form --------------------------------------------------------


@pytest.mark.integration
def test_backfill__separate_lock_table__record_check_ranged(dynoxide_endpoint: str) -> None:
    """A separate lock table: the record check (record table) is ranged, the lock goes to the lock table."""
    locks_name = unique_table_name("within-second-locks")
    model = _bind(Session, Backend("dynoxide", dynoxide_endpoint), unique_lock_table=locks_name)
    create_lock_table(model)
    epoch = epoch_in_days(2)
    put_record(model, "ACCT#1", {"email": {"S": "a@x.io"}, "ttl": {"N": f"{epoch}.9999996"}})
    done = backfill(model)
    assert [f.outcome for f in done.fixes] == ["applied"]
    assert audit(model).clean


@pytest.mark.integration
def test_migrate__former_form_and_fraction__new_lock(dynoxide_endpoint: str) -> None:
    """Migrate to a casefolded form: a record with the former-form lock and an expiry fraction gets the new lock."""
    model = _bind(Migrating, Backend("dynoxide", dynoxide_endpoint))
    epoch = epoch_in_days(2)
    former = "UNIQ#EMAIL#Ada@X.io"
    put_record(model, "ACCT#1", {"email": {"S": "Ada@X.io"}, "ttl": {"N": f"{epoch}.5"}})
    done = migrate(model, apply=True)
    assert [f.outcome for f in done.fixes] == ["applied"]
    assert "UNIQ#EMAIL#ada@x.io" in locks(model)
    assert former not in locks(model)  # The former form's lock was never there: only the current one is created.


# --- export audit then repair -----------------------------------------------------------------


@pytest.mark.integration
def test_export_audit__then_repair_of_a_fraction__applied(dynoxide_endpoint: str, tmp_path: Path) -> None:
    """An export audit's values (pickled through DuckDB) build the same ranged check: applied."""
    model = _bind(Session, Backend("dynoxide", dynoxide_endpoint))
    epoch = epoch_in_days(2)
    _put_raw(model, "ACCT#1", "a@x.io", f"{epoch}.9999996")
    report = audit(model, export=table_export(model, tmp_path))
    with RequestCounter(model) as counter:
        repaired(model, report, "applied")
    assert counter.count("GetItem") == 0


# --- expired owners -----------------------------------------------------------------------------


@pytest.mark.integration
def test_repair__orphaned_lock_of_an_expired_record__deleted(dynoxide_endpoint: str) -> None:
    """Plain model: the owner expired (not yet deleted by TTL): its live lock is orphaned, and deleted."""
    model = _bind(Session, Backend("dynoxide", dynoxide_endpoint))
    save_expired(model, "ACCT#1", "a@x.io")
    repaired(model, audited(model, "orphaned"), "applied")
    assert locks(model) == {}


@pytest.mark.integration
def test_repair_family__orphaned_lock_of_an_expired_ttl_class_record__deleted(dynoxide_endpoint: str) -> None:
    """A family audited from its base: an expired Trial's orphaned lock is skipped, run after run.

    The audit judges the Trial record gone (its TTLAttribute passed) and reports its live lock as
    orphaned. Repair's check of the owner is "gone, or its expiry passed", but the expiry clause
    is taken from the planner of ``Fixer.model_of`` (``problem.models.get(owner, self.model)``):
    an expired record is not among the audit's records, so that is the audited base class, which
    has no TTLAttribute. The check becomes ``attribute_not_exists(PK)`` alone and fails while
    DynamoDB's TTL has not deleted the item (up to days): the value stays blocked, and the same
    record audited as a plain model (the test above) or from ``Trial`` is fixed.
    """
    family = _family(dynoxide_endpoint)
    account, trial = family["Account"], family["Trial"]
    save_expired(trial, "T#1", "t@x.io")
    repaired(account, audited(account, "orphaned"), "applied")
    assert locks(account) == {}


@pytest.mark.integration
def test_family_repair__audited_from_the_ttl_class__orphaned_lock_deleted(dynoxide_endpoint: str) -> None:
    """The same lock, audited and repaired from Trial itself: deleted."""
    trial = _family(dynoxide_endpoint)["Trial"]
    save_expired(trial, "T#1", "t@x.io")
    repaired(trial, audited(trial, "orphaned"), "applied")


@pytest.mark.integration
def test_migrate__foreign_lock_of_an_expired_owner__left_for_repair(dynoxide_endpoint: str) -> None:
    """Migrate calls a lock whose owner record expired a conflict, though the audit judged that record gone.

    ``owner_holds`` reads the owner with GetItem and asks whether it holds the value, without
    the expiry the audit applies (an expired record is gone, whatever TTL's lag). The foreign
    lock (owner ACCT#1 expired, holder ACCT#2) is reported as a conflict "a record the scan passed
    before it was written", for a person to decide, instead of being left for repair, which moves it
    (its check of the owner accepts an expired record).
    """
    model = _bind(Session, Backend("dynoxide", dynoxide_endpoint))
    epoch = save_expired(model, "ACCT#1", "a@x.io")
    _put_raw(model, "ACCT#2", "a@x.io", f"{epoch}.5")
    audited(model, "foreign")
    done = migrate(model, apply=True)
    assert done.conflicts == []
    assert [p.kind for p in done.left] == ["foreign"]
    repaired(model, audit(model), "applied")


# --- Meta.unique_ttl_attribute, a fixed default stored as NULL -------------------------------


@pytest.mark.integration
@pytest.mark.parametrize("stored", [{"NULL": True}, None, {"N": "4102444800.75"}], ids=["null", "absent", "fraction"])
def test_fixed_default_expiry__null_absent_or_fraction__passes(
    dynoxide_endpoint: str, stored: dict[str, Any] | None
) -> None:
    """DEFAULT_RANGE: NULL, absent or a fraction of the default's second all pass; the lock carries the default."""
    model = _bind(DefaultedSession, Backend("dynoxide", dynoxide_endpoint))
    put_record(model, "ACCT#1", {"email": {"S": "a@x.io"}, **({"ttl": stored} if stored is not None else {})})
    with RequestCounter(model) as counter:
        done = backfill(model)
    assert [f.outcome for f in done.fixes] == ["applied"]
    assert counter.count("GetItem") == 0
    assert locks(model)["UNIQ#EMAIL#a@x.io"]["ttl"] == {"N": "4102444800"}
    assert audit(model).clean


@pytest.mark.integration
def test_meta_unique_ttl_attribute__stale_lock__renewed_ranged(dynoxide_endpoint: str) -> None:
    """Locks expiring under Meta.unique_ttl_attribute (not the record's ``ttl``): a stale lock is renewed, ranged."""
    model = _bind(Session, Backend("dynoxide", dynoxide_endpoint), unique_ttl_attribute="lock_ttl")
    epoch = epoch_in_days(2)
    model(pk="ACCT#1", email="a@x.io", expires=datetime.fromtimestamp(epoch, tz=UTC)).save()
    lock = locks(model)["UNIQ#EMAIL#a@x.io"]
    assert lock["lock_ttl"] == {"N": str(epoch)}
    set_attribute(model, record_key("ACCT#1"), "ttl", {"N": f"{epoch + 60}.5"})
    report = audited(model, "stale")
    with RequestCounter(model) as counter:
        repaired(model, report, "applied")
    assert counter.count("GetItem") == 0
    assert locks(model)["UNIQ#EMAIL#a@x.io"]["lock_ttl"] == {"N": str(epoch + 60)}
    assert audit(model).clean


# --- the text cache and the bounds, swept ---------------------------------------------------------


def test_guard_text_cache__fuzzed_across_a_family__as_guard_condition() -> None:
    """Random guards (any class's planner, any stored class as source, ranged or not, gone_ok, texts
    of a JSONAttribute and of the expiry, defaults, bounds or none) always send PynamoDB's own text and
    values for their condition, whatever the cache held before."""

    class Base(UniqueMixin, Model):
        class Meta:
            table_name = "within-second-fuzz"
            region = "us-east-1"
            unique_constraints = [
                UniqueConstraint(
                    "email",
                    condition=lambda r: r.meta is not None and bool(r.meta.get("x")),
                    condition_attributes=("meta",),
                )
            ]

        pk = UnicodeAttribute(hash_key=True, attr_name="PK")
        kind = DiscriminatorAttribute()
        email = UnicodeAttribute(null=True)
        code = UniqueAttribute(UnicodeAttribute(null=True, default="none"))
        meta = JSONAttribute(null=True)

    class DefaultedFuzz(Base, discriminator="d"):
        expires = TTLAttribute(default=datetime(2100, 1, 1, tzinfo=UTC), attr_name="ttl")

    class PlainFuzz(Base, discriminator="p"):
        expires = TTLAttribute(null=True, attr_name="ttl")

    planners = [planner_of(m) for m in (Base, DefaultedFuzz, PlainFuzz)]
    expiries = [
        None,
        datetime(2100, 1, 1, tzinfo=UTC),
        *(datetime.fromtimestamp(e, tz=UTC) for e in (5, 1_800_000_000, 1_800_000_123, 253_402_300_799)),
    ]
    rnd = random.Random(3)
    for _ in range(5000):
        planner = rnd.choice(planners)
        values: dict[str, Any] = {}
        for name in planner.unique_names:
            choices: list[Any] = {
                "expires": expiries,
                "meta": [None, {"x": 1}, {"x": 0}],
                "code": [None, "none", "c1"],
            }.get(name, [None, "a@x", "b@x"])
            values[name] = rnd.choice(choices)
        texts: dict[str, Any] = {}
        if rnd.random() < 0.3:
            if "expires" in values and rnd.random() < 0.5:
                texts["expires"] = {"N": "1800000000.5"}
            if rnd.random() < 0.5:
                texts["meta"] = {"S": '{"x":  1}'}
        exists = rnd.random() < 0.85
        stored = Stored(
            exists=exists,
            values=values if exists else {},
            verbatim=(texts or None) if exists else None,
            ranged=rnd.random() < 0.5,
            source=rnd.choice([None, *planners]),
        )
        _sent_as_serialized(Guard(planner, stored, gone_ok=rnd.random() < 0.3))


def test_second_bounds__swept_across_epochs__what_pynamodb_loads() -> None:
    """Bounds over 5000 seconds from 1906 to 9999, near 1970 and at each power of two (where a double's
    spacing halves below the bound): each bound loads as its second, the 38-digit number below it as
    the second before; None only within 2**22 s (48.5 days) of 1970."""
    rnd = random.Random(7)
    epochs = [rnd.randint(-2_000_000_000, 253_402_300_797) for _ in range(3000)]
    epochs += [rnd.randint(-60_000_000, 60_000_000) for _ in range(2000)]
    epochs += [sign * 2**k + d for k in range(21, 38) for d in (-1, 0, 1) for sign in (1, -1) if sign * 2**k > -(2**31)]
    for epoch in epochs:
        if second_bounds(datetime.fromtimestamp(epoch, tz=UTC)) is None:
            assert abs(epoch) <= 2**22, epoch
            continue
        _assert_bounds_exact(epoch)


# --- Where the float load puts a second's limit; an instance's own check ----------------------


#: An expiry after 2038-01-19 (past 2**31 seconds): a float there has 2**-21 s steps.
AFTER_2038 = 2_200_000_000


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


# --- save, delete and fixes of a same-second respelling -----------------------------------------


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
    _assert_saved(model, "b@x.io")


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
    _assert_deleted(model)


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
    _fixed(model, run, {"N": text})


def _loaded_with_default_text(endpoint: str) -> tuple[Any, Any]:
    """A DefaultedSession another writer stored with its default's second as ``D.5``, given its lock, and loaded."""
    model = _bind(DefaultedSession, Backend("dynoxide", endpoint))
    _put_raw(model, "ACCT#1", "a@x.io", f"{DEFAULT_EPOCH}.5")
    backfill(model)
    return model, model.get("ACCT#1", "PROFILE")


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
    model, record = _loaded_with_default_text(dynoxide_endpoint)
    assert record.expires == DEFAULT_EXPIRY
    set_attribute(model, record_key("ACCT#1"), "ttl", None if how == "removed" else {"NULL": True})
    record.email = "b@x.io"
    record.save()
    _assert_saved(model, "b@x.io")


@pytest.mark.integration
def test_transact_write__default_expiry_text_removed__stale_write(dynoxide_endpoint: str) -> None:
    """TransactWrite raises PynamoDB's bare TransactWriteError, not StaleWrite, for a changed record.

    As above: the loaded snapshot's text ``D.5`` fails on an item whose expiry another writer
    removed. ``_record_problem`` asks same_as, which says "the same", so the record's failure is
    taken for the caller's condition (there is none): the caller cannot tell it must reload.
    """
    model, record = _loaded_with_default_text(dynoxide_endpoint)
    set_attribute(model, record_key("ACCT#1"), "ttl", None)
    record.email = "b@x.io"
    connection = model._get_connection().connection
    with pytest.raises(StaleWrite), TransactWrite(connection=connection) as tx:
        tx.save(record)


# --- microseconds dropped on set, the guard cache, seven-decimal texts, a replan without a read ---


def test_ttl_set__caller_microseconds__dropped_and_bounded() -> None:
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


def test_guard_text_cache__default_gone_ok_verbatim__as_guard_condition() -> None:
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
            _sent_as_serialized(Guard(planner, stored, gone_ok=gone_ok))


@pytest.mark.integration
def test_seven_decimals__before_2038__load_as_the_range_says(dynoxide_endpoint: str) -> None:
    """Before 2038 a 7-decimal number loads on the side of the bound the range puts it (S.9999994 / .9999995)."""
    second = epoch_in_days(2)
    assert _loads_as(f"{second}.9999994") == second
    assert _loads_as(f"{second}.9999995") == second + 1
    _fixed(_bind(Session, Backend("dynoxide", dynoxide_endpoint)), "backfill", {"N": f"{second}.9999995"})


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
    _assert_saved(model, "b@x.io")
