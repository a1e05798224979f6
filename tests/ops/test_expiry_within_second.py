"""Repair, backfill and migrate compare a scanned expiry within its whole second, without reading the record.

They build a record's compare-and-swap from values an audit's scan read. A ``TTLAttribute`` may
be stored with a fraction of a second by another writer, which PynamoDB loads (through a float,
to the microsecond) and writes in whole seconds; an equality on the whole seconds would fail for
it. Before, each fix therefore read the record (a GetItem) for its stored text; now the check
accepts exactly the numbers PynamoDB loads as that second (``Stored.ranged``, ``second_bounds``).
Other writes keep their checks: an instance's own expiry is compared as stored, or by equality.
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Context, Decimal
from typing import Any

import pytest
from _backends import Backend, RequestCounter, bind_model
from _expiry import Session, client, epoch_in_days, fix_outcomes, locks, put_record, raw, record_key
from pynamodb.attributes import TTLAttribute, UnicodeAttribute
from pynamodb.models import Model

from pynamodb_unique import UniqueAttribute, UniqueMixin, audit, backfill, repair
from pynamodb_unique._core.plan import Guard, Planner, Stored
from pynamodb_unique._core.seconds import second_bounds
from pynamodb_unique._model.context import context_of
from pynamodb_unique._write.requests import guard_condition


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
    item = {**record_key("ACCT#1"), "code": {"S": "c1"}, "ttl": {"N": str(epoch_in_days(1))}}
    client(model).put_item(TableName=model.Meta.table_name, Item=item)
    with RequestCounter(model) as counter:
        outcomes = [f.outcome for f in backfill(model).fixes]
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
        (lambda epoch: f"{epoch}.5", "applied"),  # The same second respelled: the same expiry.
        (lambda epoch: str(epoch + 1), "skipped"),  # The next second: the record changed.
        (lambda epoch: str(epoch - 1), "skipped"),
    ],
    ids=["same-second", "next-second", "previous-second"],
)
def test_repair__expiry_moved_after_the_audit(dynoxide_endpoint: str, moved_to: Any, outcome: str) -> None:
    """The check fails only for another second: a record changed since the audit gets no lock."""
    model = bind_model(Session, Backend("dynoxide", dynoxide_endpoint))
    epoch = epoch_in_days(2)
    _put_raw(model, "ACCT#1", "a@x.io", str(epoch))
    report = audit(model)
    assert len(report.problems) == 1
    client(model).update_item(
        TableName=model.Meta.table_name,
        Key=record_key("ACCT#1"),
        UpdateExpression="SET #e = :e",
        ExpressionAttributeNames={"#e": "ttl"},
        ExpressionAttributeValues={":e": {"N": moved_to(epoch)}},
    )
    with RequestCounter(model) as counter:
        done = repair(model, report, apply=True)
    assert [f.outcome for f in done.fixes] == [outcome]
    assert counter.count("GetItem") == 0, counter.operations
    assert ("UNIQ#EMAIL#a@x.io" in locks(model)) is (outcome == "applied")
    stored = raw(model, record_key("ACCT#1"))
    assert stored is not None
    assert stored["ttl"] == {"N": moved_to(epoch)}


@pytest.mark.parametrize("epoch", [1_796_400_000, 2_200_000_000, 4_102_444_800, 253_402_300_798])
def test_second_bounds__exactly_what_pynamodb_loads_as_the_second(epoch: int) -> None:
    """Each bound loads as its second; the number of 38 digits just below it, as the second before.

    PynamoDB loads through a float, whose spacing grows with the epoch (2**-22 s today, 2**-21 s
    after 2038, about 3e-5 s near year 9999): the limit is where the float's rounding puts it.
    """
    attribute = Session.expires
    bounds = second_bounds(datetime.fromtimestamp(epoch, tz=UTC))
    assert bounds is not None

    def loads_as(number: Decimal) -> int:
        loaded = attribute.deserialize(f"{number:f}")  # type: ignore[no-untyped-call] # unannotated in PynamoDB.
        return int(attribute.serialize(loaded))  # type: ignore[no-untyped-call]

    for bound, second in zip(bounds, (epoch, epoch + 1), strict=True):
        number = Decimal(bound["N"])
        assert len(number.as_tuple().digits) <= 38
        just_below = Context(prec=80).subtract(number, Decimal(1).scaleb(number.adjusted() - 37))
        assert loads_as(number) == second
        assert loads_as(just_below) == second - 1


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
