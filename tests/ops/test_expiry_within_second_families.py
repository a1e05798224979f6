"""Expiries in polymorphic families, separate lock tables, migrations and export audits (a third review).

The third review of the expiry compared within its whole second (``Stored.ranged``,
``second_bounds``) found no fault in it; its probes pin what it checked: polymorphic families
where only some classes have the TTLAttribute, an inexact JSONAttribute read while the expiry is
ranged, a separate lock table, migrate with a former form, an export audit followed by repair,
stale, foreign and orphaned locks of expiring records, the guard text cache fuzzed, the bounds
swept across epochs. It found two older faults, in expired records of a family: each ``test_*``
failed before its fix.
"""

from __future__ import annotations

import random
import time
from datetime import UTC, datetime
from decimal import Context, Decimal
from pathlib import Path
from typing import Any

import pytest
from _backends import Backend, RequestCounter, bind_model, unique_table_name
from _expiry import DefaultedSession, client, epoch_in_days, fix_outcomes, put_record, record_key, set_attribute
from _export import export_tables
from _invariant import actual_locks, expected_locks, locks_and_records
from pynamodb.attributes import DiscriminatorAttribute, JSONAttribute, TTLAttribute, UnicodeAttribute
from pynamodb.models import Model

from pynamodb_unique import (
    Former,
    UniqueAttribute,
    UniqueConstraint,
    UniqueMixin,
    audit,
    backfill,
    create_lock_table,
    migrate,
    repair,
)
from pynamodb_unique._core.plan import Guard, Stored
from pynamodb_unique._core.seconds import second_bounds
from pynamodb_unique._model.registry import planner_of
from pynamodb_unique._write.requests import guard_condition


def _locks(model: type[Any]) -> dict[str, dict[str, Any]]:
    return locks_and_records(model)[0]


def _lock_key(lock: str) -> dict[str, Any]:
    return {"PK": {"S": lock}, "SK": {"S": "LOCK"}}


# --- models ----------------------------------------------------------------------------------


def _family(host: str | None) -> dict[str, Any]:
    """A polymorphic family in one table: only TrialR3 has a TTLAttribute."""
    table = unique_table_name("review-range3-accounts")

    class AccountR3(UniqueMixin, Model):
        class Meta:
            table_name = table
            region = "us-east-1"

        pk = UnicodeAttribute(hash_key=True, attr_name="PK")
        sk = UnicodeAttribute(range_key=True, attr_name="SK", default="PROFILE")
        kind = DiscriminatorAttribute()
        email = UniqueAttribute(UnicodeAttribute(null=True))

    AccountR3.Meta.host = host  # type: ignore[attr-defined]

    class PaidR3(AccountR3, discriminator="paid"):
        pass

    class TrialR3(AccountR3, discriminator="trial"):
        expires = TTLAttribute(null=True, attr_name="ttl")

    AccountR3.create_table(wait=True, billing_mode="PAY_PER_REQUEST")
    return {"Account": AccountR3, "Paid": PaidR3, "Trial": TrialR3}


class ProfileR3(UniqueMixin, Model):
    """An expiring record whose partial constraint reads an inexact attribute (a JSONAttribute)."""

    class Meta:
        table_name = "review-range3-profiles"
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


class SessionR3(UniqueMixin, Model):
    """An expiring record (as tests/_expiry.Session)."""

    class Meta:
        table_name = "review-range3-sessions"
        region = "us-east-1"

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    sk = UnicodeAttribute(range_key=True, attr_name="SK", default="PROFILE")
    email = UniqueAttribute(UnicodeAttribute(null=True))
    expires = TTLAttribute(null=True, attr_name="ttl")


class MigratingR3(UniqueMixin, Model):
    """An expiring record whose email constraint changed form (casefolded now)."""

    class Meta:
        table_name = "review-range3-migrating"
        region = "us-east-1"

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    sk = UnicodeAttribute(range_key=True, attr_name="SK", default="PROFILE")
    email = UniqueAttribute(UnicodeAttribute(null=True), normalize=str.casefold, former=Former(normalize=None))
    expires = TTLAttribute(null=True, attr_name="ttl")


def _bind(model: type[Any], endpoint: str, **meta: Any) -> Any:
    bound = bind_model(
        model,
        Backend("dynoxide", endpoint),
        unique_table_name("review-range3-" + model.__name__.lower()),
        create=not meta,
    )
    for name, value in meta.items():
        setattr(bound.Meta, name, value)
    if meta:
        bound.create_table(wait=True, billing_mode="PAY_PER_REQUEST")
    return bound


# --- polymorphic families --------------------------------------------------------------------


@pytest.mark.integration
def test_family_backfill_fraction_on_the_ttl_class(dynoxide_endpoint: str) -> None:
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
def test_family_repair_stale_and_foreign(dynoxide_endpoint: str) -> None:
    """Stale (lock expiry respelled) and foreign (Paid owner, Trial holder with a fraction) are fixed."""
    family = _family(dynoxide_endpoint)
    account, trial, paid = family["Account"], family["Trial"], family["Paid"]
    epoch = epoch_in_days(2)
    trial(pk="T#1", email="t@x.io", expires=datetime.fromtimestamp(epoch, tz=UTC)).save()
    set_attribute(account, record_key("T#1"), "ttl", {"N": f"{epoch}.25"})
    set_attribute(account, _lock_key("UNIQ#EMAIL#t@x.io"), "ttl", {"N": str(epoch + 100)})
    paid(pk="P#1", email="q@x.io").save()
    # Trial T#2 holds q2, whose lock names P#1 (which holds q@x.io).
    put_record(account, "T#2", {"kind": {"S": "trial"}, "email": {"S": "q2@x.io"}, "ttl": {"N": f"{epoch}.75"}})
    lock = dict(_locks(account)["UNIQ#EMAIL#q@x.io"])
    lock["PK"] = {"S": "UNIQ#EMAIL#q2@x.io"}
    client(account).put_item(TableName=account.Meta.table_name, Item=lock)
    report = audit(account)
    assert sorted(p.kind for p in report.problems) == ["foreign", "stale"]
    done = repair(account, report, apply=True)
    assert [f.outcome for f in done.fixes] == ["applied", "applied"], [f.describe() for f in done.fixes]
    assert audit(account).clean


# --- JSONAttribute read while the expiry is ranged ------------------------------------------------


@pytest.mark.integration
@pytest.mark.parametrize("run", ["backfill", "repair", "migrate"])
def test_json_text_read_expiry_ranged(dynoxide_endpoint: str, run: str) -> None:
    """Another writer's JSON spacing and expiry fraction: one GetItem (the JSON's text), the expiry ranged."""
    model = _bind(ProfileR3, dynoxide_endpoint)
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
def test_separate_lock_table_backfill_fraction(dynoxide_endpoint: str) -> None:
    """A separate lock table: the record check (record table) is ranged, the lock goes to the lock table."""
    locks_name = unique_table_name("review-range3-locks")
    model = _bind(SessionR3, dynoxide_endpoint, unique_lock_table=locks_name)
    create_lock_table(model)
    epoch = epoch_in_days(2)
    put_record(model, "ACCT#1", {"email": {"S": "a@x.io"}, "ttl": {"N": f"{epoch}.9999996"}})
    done = backfill(model)
    assert [f.outcome for f in done.fixes] == ["applied"]
    assert audit(model).clean


@pytest.mark.integration
def test_migrate_former_form_fraction(dynoxide_endpoint: str) -> None:
    """Migrate to a casefolded form: a record with the former-form lock and an expiry fraction gets the new lock."""
    model = _bind(MigratingR3, dynoxide_endpoint)
    epoch = epoch_in_days(2)
    former = "UNIQ#EMAIL#Ada@X.io"
    put_record(model, "ACCT#1", {"email": {"S": "Ada@X.io"}, "ttl": {"N": f"{epoch}.5"}})
    done = migrate(model, apply=True)
    assert [f.outcome for f in done.fixes] == ["applied"]
    assert "UNIQ#EMAIL#ada@x.io" in _locks(model)
    assert former not in _locks(model)  # The former form's lock was never there: only the current one is created.


# --- export audit then repair -----------------------------------------------------------------


@pytest.mark.integration
def test_export_audit_then_repair_fraction(dynoxide_endpoint: str, tmp_path: Path) -> None:
    """An export audit's values (pickled through DuckDB) build the same ranged check: applied."""
    model = _bind(SessionR3, dynoxide_endpoint)
    epoch = epoch_in_days(2)
    put_record(model, "ACCT#1", {"email": {"S": "a@x.io"}, "ttl": {"N": f"{epoch}.9999996"}})
    exports = export_tables(client(model), [model.Meta.table_name], tmp_path)
    report = audit(model, export=next(iter(exports.values())))
    with RequestCounter(model) as counter:
        done = repair(model, report, apply=True)
    assert [f.outcome for f in done.fixes] == ["applied"]
    assert counter.count("GetItem") == 0


# --- expired owners -----------------------------------------------------------------------------


def _expire_record_keep_lock(model: type[Any], pk: str) -> None:
    """Another writer moves the record's expiry into the past; its lock keeps its own (later) expiry."""
    set_attribute(model, record_key(pk), "ttl", {"N": str(int(time.time()) - 3600)})


@pytest.mark.integration
def test_orphaned_lock_of_an_expired_record_deleted(dynoxide_endpoint: str) -> None:
    """Plain model: the owner expired (not yet deleted by TTL): its live lock is orphaned, and deleted."""
    model = _bind(SessionR3, dynoxide_endpoint)
    model(pk="ACCT#1", email="a@x.io", expires=datetime.fromtimestamp(epoch_in_days(2), tz=UTC)).save()
    _expire_record_keep_lock(model, "ACCT#1")
    report = audit(model)
    assert [p.kind for p in report.problems] == ["orphaned"]
    done = repair(model, report, apply=True)
    assert [f.outcome for f in done.fixes] == ["applied"]
    assert _locks(model) == {}


@pytest.mark.integration
def test_repair_family__orphaned_lock_of_an_expired_ttl_class_record__deleted(dynoxide_endpoint: str) -> None:
    """A family audited from its base: an expired Trial's orphaned lock is skipped, run after run.

    The audit judges the Trial record gone (its TTLAttribute passed) and reports its live lock as
    orphaned. Repair's check of the owner is "gone, or its expiry passed", but the expiry clause
    is taken from the planner of ``Fixer.model_of`` (``problem.models.get(owner, self.model)``):
    an expired record is not among the audit's records, so that is the audited base class, which
    has no TTLAttribute. The check becomes ``attribute_not_exists(PK)`` alone and fails while
    DynamoDB's TTL has not deleted the item (up to days): the value stays blocked, and the same
    record audited as a plain model (previous probe) or from ``Trial`` is fixed.
    """
    family = _family(dynoxide_endpoint)
    account, trial = family["Account"], family["Trial"]
    trial(pk="T#1", email="t@x.io", expires=datetime.fromtimestamp(epoch_in_days(2), tz=UTC)).save()
    _expire_record_keep_lock(account, "T#1")
    report = audit(account)
    assert [p.kind for p in report.problems] == ["orphaned"]
    done = repair(account, report, apply=True)
    assert [f.outcome for f in done.fixes] == ["applied"], [f.describe() for f in done.fixes]
    assert _locks(account) == {}


@pytest.mark.integration
def test_family_orphaned_lock_of_an_expired_record_audited_from_ttl_class(dynoxide_endpoint: str) -> None:
    """The same lock, audited and repaired from Trial itself: deleted."""
    family = _family(dynoxide_endpoint)
    account, trial = family["Account"], family["Trial"]
    trial(pk="T#1", email="t@x.io", expires=datetime.fromtimestamp(epoch_in_days(2), tz=UTC)).save()
    _expire_record_keep_lock(account, "T#1")
    report = audit(trial)
    assert [p.kind for p in report.problems] == ["orphaned"]
    done = repair(trial, report, apply=True)
    assert [f.outcome for f in done.fixes] == ["applied"]


@pytest.mark.integration
def test_migrate__foreign_lock_of_an_expired_owner__left_for_repair(dynoxide_endpoint: str) -> None:
    """Migrate calls a lock whose owner record expired a conflict, though the audit judged that record gone.

    ``owner_holds`` reads the owner with GetItem and asks whether it holds the value, without
    the expiry the audit applies (an expired record is gone, whatever TTL's lag). The foreign
    lock (owner ACCT#1 expired, holder ACCT#2) is reported as a conflict "a record the scan passed
    before it was written", for a person to decide, instead of being left for repair, which moves it
    (its check of the owner accepts an expired record).
    """
    model = _bind(SessionR3, dynoxide_endpoint)
    epoch = epoch_in_days(2)
    model(pk="ACCT#1", email="a@x.io", expires=datetime.fromtimestamp(epoch, tz=UTC)).save()
    _expire_record_keep_lock(model, "ACCT#1")
    put_record(model, "ACCT#2", {"email": {"S": "a@x.io"}, "ttl": {"N": f"{epoch}.5"}})
    report = audit(model)
    assert [p.kind for p in report.problems] == ["foreign"]
    done = migrate(model, apply=True)
    assert done.conflicts == []
    assert [p.kind for p in done.left] == ["foreign"]
    fixed = repair(model, audit(model), apply=True)
    assert [f.outcome for f in fixed.fixes] == ["applied"]


# --- Meta.unique_ttl_attribute, a fixed default stored as NULL -------------------------------


@pytest.mark.integration
@pytest.mark.parametrize("stored", [{"NULL": True}, None, {"N": "4102444800.75"}], ids=["null", "absent", "fraction"])
def test_fixed_default_null_absent_or_fraction(dynoxide_endpoint: str, stored: dict[str, Any] | None) -> None:
    """DEFAULT_RANGE: NULL, absent or a fraction of the default's second all pass; the lock carries the default."""
    model = _bind(DefaultedSession, dynoxide_endpoint)
    put_record(model, "ACCT#1", {"email": {"S": "a@x.io"}, **({"ttl": stored} if stored is not None else {})})
    with RequestCounter(model) as counter:
        done = backfill(model)
    assert [f.outcome for f in done.fixes] == ["applied"]
    assert counter.count("GetItem") == 0
    assert _locks(model)["UNIQ#EMAIL#a@x.io"]["ttl"] == {"N": "4102444800"}
    assert audit(model).clean


@pytest.mark.integration
def test_unique_ttl_attribute_stale_lock_renewed(dynoxide_endpoint: str) -> None:
    """Locks expiring under Meta.unique_ttl_attribute (not the record's ``ttl``): a stale lock is renewed, ranged."""
    model = _bind(SessionR3, dynoxide_endpoint, unique_ttl_attribute="lock_ttl")
    epoch = epoch_in_days(2)
    model(pk="ACCT#1", email="a@x.io", expires=datetime.fromtimestamp(epoch, tz=UTC)).save()
    lock = _locks(model)["UNIQ#EMAIL#a@x.io"]
    assert lock["lock_ttl"] == {"N": str(epoch)}
    set_attribute(model, record_key("ACCT#1"), "ttl", {"N": f"{epoch + 60}.5"})
    report = audit(model)
    assert [p.kind for p in report.problems] == ["stale"]
    with RequestCounter(model) as counter:
        done = repair(model, report, apply=True)
    assert [f.outcome for f in done.fixes] == ["applied"]
    assert counter.count("GetItem") == 0
    assert _locks(model)["UNIQ#EMAIL#a@x.io"]["lock_ttl"] == {"N": str(epoch + 60)}
    assert audit(model).clean


# --- the text cache and the bounds, swept ---------------------------------------------------------


def test_guard_text_cache_fuzzed_across_a_family() -> None:
    """Random guards (any class's planner, any stored class as source, ranged or not, gone_ok, texts
    of a JSONAttribute and of the expiry, defaults, bounds or none) always send PynamoDB's own text and
    values for their condition, whatever the cache held before."""

    class BaseR3(UniqueMixin, Model):
        class Meta:
            table_name = "review-range3-fuzz"
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

    class DefaultedFuzzR3(BaseR3, discriminator="d"):
        expires = TTLAttribute(default=datetime(2100, 1, 1, tzinfo=UTC), attr_name="ttl")

    class PlainFuzzR3(BaseR3, discriminator="p"):
        expires = TTLAttribute(null=True, attr_name="ttl")

    planners = [planner_of(m) for m in (BaseR3, DefaultedFuzzR3, PlainFuzzR3)]
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
        guard = Guard(planner, stored, gone_ok=rnd.random() < 0.3)
        condition = guard.condition()
        if condition is None:
            assert guard_condition(guard) == {}
            continue
        names: dict[str, str] = {}
        serialized: dict[str, Any] = {}
        expression = condition.serialize(names, serialized)
        sent = guard_condition(guard)
        assert sent["ConditionExpression"] == expression
        assert sent.get("ExpressionAttributeValues", {}) == serialized
        assert sent["ExpressionAttributeNames"] == {v: k for k, v in names.items()}


def test_second_bounds_swept_across_epochs() -> None:
    """Bounds over 5000 seconds from 1906 to 9999, near 1970 and at each power of two (where a double's
    spacing halves below the bound): each bound loads as its second, the 38-digit number below it as
    the second before; None only within 2**22 s (48.5 days) of 1970."""
    attribute = TTLAttribute()

    def loads_as(number: Decimal) -> int:
        return int(attribute.serialize(attribute.deserialize(f"{number:f}")))  # type: ignore[no-untyped-call]

    rnd = random.Random(7)
    epochs = [rnd.randint(-2_000_000_000, 253_402_300_797) for _ in range(3000)]
    epochs += [rnd.randint(-60_000_000, 60_000_000) for _ in range(2000)]
    epochs += [sign * 2**k + d for k in range(21, 38) for d in (-1, 0, 1) for sign in (1, -1) if sign * 2**k > -(2**31)]
    for epoch in epochs:
        bounds = second_bounds(datetime.fromtimestamp(epoch, tz=UTC))
        if bounds is None:
            assert abs(epoch) <= 2**22, epoch
            continue
        for bound, second in zip(bounds, (epoch, epoch + 1), strict=True):
            number = Decimal(bound["N"])
            assert len(number.as_tuple().digits) <= 38
            below = Context(prec=80).subtract(number, Decimal(1).scaleb(number.adjusted() - 37))
            assert (loads_as(number), loads_as(below)) == (second, second - 1), (epoch, bound)
