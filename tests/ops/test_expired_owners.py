"""Repair and migrate with expired owners, and ``Stored.same_as`` with sets.

``Stored.same_as`` once took a map's own key named ``SS``,
``NS`` or ``BS`` for a set's type (two different values looked the same, and a plain ``save()``
reported ``ConditionFailed``), and ``migrate`` stopped with ``ValueError`` on a foreign lock whose
owner key held an item of an unknown class. Repair then skipped, run after run, the orphaned lock
of an expired record of another model sharing the namespace (fixed next: the audit passes the
owner model its lock records). The other tests pin families sharing a TTL name, renewals
after an audit, separate lock tables, exports and expired owners of subclasses.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from _backends import RequestCounter, unique_table_name
from _expiry import (
    audited,
    client,
    epoch_in_days,
    expire_record,
    expired_ttl,
    family_base,
    locks,
    put_record,
    record_key,
    repaired,
    save_expired,
    set_attribute,
    table_export,
)
from _export import export_tables
from pynamodb.attributes import (
    BinarySetAttribute,
    ListAttribute,
    MapAttribute,
    NumberSetAttribute,
    TTLAttribute,
    UnicodeAttribute,
    UnicodeSetAttribute,
)
from pynamodb.models import Model

from pynamodb_unique import (
    ConditionFailed,
    UniqueAttribute,
    UniqueConstraint,
    UniqueMixin,
    audit,
    create_lock_table,
    migrate,
)
from pynamodb_unique._core import plan as _plan
from pynamodb_unique._core.plan import Stored
from pynamodb_unique._model.context import context_of
from pynamodb_unique._ops.collect import ForeignLock
from pynamodb_unique._ops.migrate import _Migrator
from pynamodb_unique._ops.repair import Fixer

# --- models --------------------------------------------------------------------------------------


def _family(
    host: str, *, kinds: Sequence[str] = ("s0", "s1"), prefix: str = "expired-family", lock_table: str | None = None
) -> dict[str, Any]:
    """A family whose untagged base (kind None) has the TTL, inherited by a tagged subclass of each of ``kinds``.

    The classes by name: ``Base``, then each subclass by its kind.
    """
    base = family_base(prefix, host=host, with_ttl=True)
    if lock_table is not None:
        base.Meta.unique_lock_table = lock_table
    found: dict[str, Any] = {"Base": base}
    for kind in kinds:
        found[kind] = type(f"Tagged{kind.capitalize()}", (base,), {"__module__": __name__}, discriminator=kind)
    base.create_table(wait=True, billing_mode="PAY_PER_REQUEST")
    if lock_table is not None:
        create_lock_table(base)
    return found


def _shared_namespace(host: str) -> tuple[Any, Any]:
    """Two plain models of one table sharing the explicit namespace ``email``: only Guest expires."""
    table = unique_table_name("expired-shared")

    class User(UniqueMixin, Model):
        class Meta:
            table_name = table
            region = "us-east-1"

        pk = UnicodeAttribute(hash_key=True, attr_name="PK")
        sk = UnicodeAttribute(range_key=True, attr_name="SK", default="USER")
        email = UniqueAttribute(UnicodeAttribute(null=True), name="email")

    class Guest(UniqueMixin, Model):
        class Meta:
            table_name = table
            region = "us-east-1"

        pk = UnicodeAttribute(hash_key=True, attr_name="PK")
        sk = UnicodeAttribute(range_key=True, attr_name="SK", default="GUEST")
        email = UniqueAttribute(UnicodeAttribute(null=True), name="email")
        expires = TTLAttribute(null=True, attr_name="ttl")

    User.Meta.host = host  # type: ignore[attr-defined]
    Guest.Meta.host = host  # type: ignore[attr-defined]
    User.Meta.unique_item_filter = lambda model: model.sk == "USER"  # type: ignore[attr-defined]
    Guest.Meta.unique_item_filter = lambda model: model.sk == "GUEST"  # type: ignore[attr-defined]
    User.create_table(wait=True, billing_mode="PAY_PER_REQUEST")
    return User, Guest


def _session(host: str) -> tuple[Any, Any]:
    """A plain expiring model (the base of a family of one subclass, ``web``) and that subclass."""
    family = _family(host, kinds=("web",), prefix="expired-sessions")
    return family["Base"], family["web"]


def _active(record: Any) -> bool:
    return record.regions is not None


class RegionsMember(UniqueMixin, Model):
    """A partial constraint reading a raw map keyed by country codes (Bahamas: ``BS``)."""

    class Meta:
        table_name = "expired-regions"
        region = "us-east-1"
        unique_constraints = [UniqueConstraint("email", condition=_active, condition_attributes=("regions",))]

    pk = UnicodeAttribute(hash_key=True)
    email = UnicodeAttribute(null=True)
    note = UnicodeAttribute(null=True)
    regions = MapAttribute(null=True)  # type: ignore[var-annotated]


class Sets(MapAttribute[str, Any]):
    names = UnicodeSetAttribute(null=True)
    codes = NumberSetAttribute(null=True)
    blobs = BinarySetAttribute(null=True, legacy_encoding=False)


class SetsMember(UniqueMixin, Model):
    class Meta:
        table_name = "expired-sets"
        region = "us-east-1"
        unique_constraints = [
            UniqueConstraint("email", condition=lambda r: r.prefs is not None, condition_attributes=("prefs", "many"))
        ]

    pk = UnicodeAttribute(hash_key=True)
    email = UnicodeAttribute(null=True)
    prefs = Sets(null=True)
    many = ListAttribute(of=Sets, null=True)  # type: ignore[var-annotated]


def _bind_regions(host: str) -> Any:
    table = unique_table_name("expired-regions")

    class Regions(RegionsMember):
        class Meta(RegionsMember.Meta):
            table_name = table

    Regions.Meta.host = host  # type: ignore[attr-defined]
    Regions.create_table(wait=True, billing_mode="PAY_PER_REQUEST")
    return Regions


# --- 3. Stored.same_as: a map key named like a set type ------------------------------------------


def test_same_as__map_key_named_bs__different_values_same() -> None:
    """Two different maps ``{"BS": "Bahamas"}`` and ``{"BS": "Belize"}`` are judged the same value.

    ``_in_order`` sorts the value of every dict key named ``SS``/``NS``/``BS`` at any depth,
    without telling a type descriptor from a map's own key: inside ``{"M": {"BS": {"S": ...}}}``
    the map entry ``{"S": "Bahamas"}`` is "sorted" into its keys, ``["S"]``, for both maps. A
    changed unique (or condition) value then reads as unchanged.
    """
    context = context_of(RegionsMember)
    assert context is not None
    one = Stored(exists=True, values={"email": "a@x.io", "regions": MapAttribute(BS="Bahamas")})
    other = Stored(exists=True, values={"email": "a@x.io", "regions": MapAttribute(BS="Belize")})
    assert not one.same_as(other, context.planner)


@pytest.mark.integration
def test_save__map_key_named_bs_changed_by_another_writer__saved_not_condition_failed(
    dynoxide_endpoint: str,
) -> None:
    """``save()`` with no condition raises ConditionFailed after another writer changed a map entry ``BS``.

    The record's guard checks the stored ``regions`` map (a condition attribute); another writer
    changed its ``BS`` entry, so the guard fails, as it should, and the engine must re-plan from the
    item DynamoDB returned. ``same_as`` (via ``_in_order``) judges the returned map the same as the
    assumed one, so the engine blames "the caller's condition or the version check", which the
    caller never gave: a plain save fails with ConditionFailed for an ordinary concurrent edit.
    """
    model = _bind_regions(dynoxide_endpoint)
    record = model(pk="a", email="a@x.io", regions=MapAttribute(BS="Bahamas"))
    record.save()
    set_attribute(model, {"pk": {"S": "a"}}, "regions", {"M": {"BS": {"S": "Belize"}}})
    record.note = "changed"
    record.save()  # Raises ConditionFailed.
    assert model.get("a").note == "changed"


def test_same_as__sets_in_lists_binary_and_none__judged_right() -> None:
    """Sets inside a list of maps, binary sets (bytes sort), None and absent values: judged right."""
    context = context_of(SetsMember)
    assert context is not None
    planner = context.planner

    def stored(names: list[str], blobs: list[bytes], codes: list[int], second: list[str]) -> Stored:
        prefs = Sets(names=set(names), blobs=set(blobs), codes=set(codes))
        many = [Sets(names=set(second)), Sets(blobs=set(blobs))]
        return Stored(exists=True, values={"email": "a@x.io", "prefs": prefs, "many": many})

    a = stored(["x", "y", "z"], [b"\x00", b"\xff", b"a"], [1, 9, 10], ["p", "q"])
    b = stored(["z", "y", "x"], [b"a", b"\xff", b"\x00"], [10, 9, 1], ["q", "p"])
    assert a.same_as(b, planner)
    changed = stored(["z", "y", "x"], [b"a", b"\xff", b"\x01"], [10, 9, 1], ["q", "p"])
    assert not a.same_as(changed, planner)
    assert not a.same_as(stored(["x", "y", "z"], [b"\x00", b"\xff", b"a"], [1, 9, 10], ["p", "r"]), planner)
    none = Stored(exists=True, values={"email": "a@x.io", "prefs": None, "many": None})
    absent = Stored(exists=True, values={"email": "a@x.io"})
    assert none.same_as(absent, planner)
    assert not a.same_as(none, planner)
    assert _plan._in_order("text") == "text"
    assert _plan._in_order(None) is None
    # A list ("L") keeps its order: only set members are sorted.
    assert _plan._in_order({"L": [{"S": "b"}, {"S": "a"}]}) == {"L": [{"S": "b"}, {"S": "a"}]}


@pytest.mark.integration
def test_same_as__successful_write__not_called(dynoxide_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """same_as (and _in_order) run only after a failed record guard, never on a successful write."""
    model = _bind_regions(dynoxide_endpoint)
    calls: list[int] = []
    original = Stored.same_as

    def counting(self: Stored, other: Stored, planner: Any) -> bool:
        calls.append(1)
        return original(self, other, planner)

    monkeypatch.setattr(Stored, "same_as", counting)
    record = model(pk="a", email="a@x.io", regions=MapAttribute(US="x"))
    record.save()
    record.email = "b@x.io"
    record.save()
    record.update(actions=[model.note.set("n")])
    record.delete()
    assert calls == []
    record = model(pk="b", email="c@x.io", regions=MapAttribute(US="x"))
    record.save()
    with pytest.raises(ConditionFailed):
        record.save(condition=model.note == "other")
    assert calls == [1]


# --- 1. repair: the owner's expiry by any class of its family ---------------------------------


@pytest.mark.integration
@pytest.mark.parametrize("how", ["scan", "duckdb", "export"])
def test_repair_shared_namespace__orphaned_lock_of_an_expired_other_model__deleted(
    dynoxide_endpoint: str, tmp_path: Path, how: str
) -> None:
    """An expired Guest's orphaned lock, audited from User (one explicit namespace, one table), is deleted.

    The audit's scope takes every model declaring the namespace (``declaring``): it judges the
    Guest record gone by Guest's TTLAttribute and reports its live lock as orphaned. Repair's
    owner check took its expiry clauses from the audited User, a plain model without a TTL, as
    the expired owner is not among the audit's records: the check was ``attribute_not_exists(PK)``
    alone, which failed until DynamoDB's TTL deleted the item (up to days), run after run. The
    audit now passes the owner model the lock records (``uniq_owner_model``), through an export's
    DuckDB join too.
    """
    user, guest = _shared_namespace(dynoxide_endpoint)
    save_expired(guest, "G#1", "g@x.io")
    if how == "export":
        report = audited(user, "orphaned", export=table_export(user, tmp_path))
    else:
        report = audited(user, "orphaned", engine="memory" if how == "scan" else "duckdb")
    assert report.problems[0].models == {("G#1", "GUEST"): guest}
    repaired(user, report, "applied")
    assert locks(user) == {}


@pytest.mark.integration
def test_repair_shared_namespace__other_model_owner_renewed_before_repair__lock_kept(dynoxide_endpoint: str) -> None:
    """The expired Guest comes back live (another writer renews it) between audit and repair: its lock stays.

    Repair's check of the owner, as Guest (the lock's owner model): gone, or expired by
    Guest's TTL; a renewed record meets neither, and the lock of a live value is kept.
    """
    user, guest = _shared_namespace(dynoxide_endpoint)
    # One epoch for the save and the renewal: the renewed record's expiry is its lock's to the
    # second, or the audit after repair sees a stale lock (a clock tick between two calls did it).
    epoch = save_expired(guest, "G#1", "g@x.io")
    report = audited(user, "orphaned")
    set_attribute(guest, record_key("G#1", "GUEST"), "ttl", {"N": str(epoch)})
    repaired(user, report, "skipped")
    assert len(locks(user)) == 1
    assert audit(user).clean
    # Expired again, a fresh audit's repair deletes the lock.
    expire_record(guest, "G#1", "GUEST")
    repaired(user, audit(user), "applied")
    assert locks(user) == {}


@pytest.mark.integration
def test_repair_shared_namespace__foreign_lock_of_expired_other_model__given_to_holder(dynoxide_endpoint: str) -> None:
    """A User record holds a value whose lock names an expired Guest: repair gives the lock to the holder.

    The owner check is Guest's (gone, or expired by its TTL), as the lock records that model;
    checked as the audited User it would wait for DynamoDB's TTL to delete the guest.
    """
    user, guest = _shared_namespace(dynoxide_endpoint)
    save_expired(guest, "G#1", "g@x.io")
    # Another writer stores a User record holding the value, without its lock.
    put_record(user, "U#1", {"email": {"S": "g@x.io"}}, sk="USER")
    report = audited(user, "foreign")
    assert report.problems[0].models[("G#1", "GUEST")] is guest
    repaired(user, report, "applied")
    assert audit(user).clean
    (lock,) = locks(user).values()
    assert lock["uniq_owner_hash"] == {"S": "U#1"}


@pytest.mark.integration
def test_family_repair__shared_ttl_name_and_untagged_base__orphaned_locks_deleted(dynoxide_endpoint: str) -> None:
    """Base (kind None) and two subclasses share the TTL ``ttl``: orphaned locks of expired records of each, deleted.

    The owner check ORs three clauses on the same ``ttl`` and ``kind`` names (placeholders reused,
    values distinct): DynamoDB's grammar accepts it. An untagged expired record (the base's) and a
    tagged one are both judged gone.
    """
    fam = _family(dynoxide_endpoint)
    base, s0 = fam["Base"], fam["s0"]
    save_expired(s0, "B#1", "b@x.io")
    set_attribute(base, record_key("B#1"), "kind", None)  # Untagged: read as the base (kind None).
    save_expired(s0, "S#1", "s@x.io")
    report = audited(base, "orphaned", "orphaned")
    check = Fixer(base).record_check(report.problems[0], ("B#1", "PROFILE"))
    assert check is not None
    text = check["ConditionExpression"]
    assert text.count("attribute_not_exists") == 5, text  # the hash; each class's "or hash absent"; kind absent
    assert len(check["ExpressionAttributeValues"]) == 5, check  # two kinds, three expiries
    repaired(base, report, "applied", "applied")
    assert locks(base) == {}


@pytest.mark.integration
def test_family_repair__owner_renewed_after_the_audit__skipped(dynoxide_endpoint: str) -> None:
    """Time skew: the owner is renewed (expiry in the future again) between audit and repair: skipped, lock kept."""
    fam = _family(dynoxide_endpoint)
    base, s1 = fam["Base"], fam["s1"]
    save_expired(s1, "S#1", "s@x.io")
    report = audited(base, "orphaned")
    set_attribute(base, record_key("S#1"), "ttl", {"N": str(epoch_in_days(2))})
    repaired(base, report, "skipped")
    assert "UNIQ#EMAIL#s@x.io" in locks(base)
    # An item of another class now at the key with an expired ttl but no class of the family: kept too.
    set_attribute(base, record_key("S#1"), "kind", {"S": "ghost"})
    expire_record(base, "S#1")
    repaired(base, report, "skipped")


@pytest.mark.integration
def test_family_repair__forty_classes__condition_under_4_kb_applied(dynoxide_endpoint: str) -> None:
    """A family of 40 classes: one clause each, the condition stays under DynamoDB's 4 KB and is applied."""
    fam = _family(dynoxide_endpoint, kinds=[f"s{i}" for i in range(40)])
    base, last = fam["Base"], fam["s39"]
    save_expired(last, "S#1", "s@x.io")
    report = audit(base)
    check = Fixer(base).record_check(report.problems[0], ("S#1", "PROFILE"))
    assert check is not None
    text = check["ConditionExpression"]
    assert len(text) < 4096, len(text)
    assert len(check["ExpressionAttributeValues"]) == 81  # 40 kinds, 41 expiries (the untagged base has one too)
    repaired(base, report, "applied")


@pytest.mark.integration
def test_family_repair__separate_lock_table_and_export__expired_owner_lock_deleted(
    dynoxide_endpoint: str, tmp_path: Path
) -> None:
    """A separate lock table, then an export audit: the expired subclass owner's lock deleted both ways."""
    locks_name = unique_table_name("expired-locks")
    fam = _family(dynoxide_endpoint, lock_table=locks_name)
    base, s0 = fam["Base"], fam["s0"]
    save_expired(s0, "S#1", "s@x.io")
    save_expired(s0, "S#2", "t@x.io")
    audited(base, "orphaned", "orphaned")
    exports = export_tables(client(base), [base.Meta.table_name, locks_name], tmp_path)
    exported = audited(base, "orphaned", "orphaned", export=exports)
    repaired(base, exported, "applied", "applied")
    assert audit(base).clean


@pytest.mark.integration
def test_export_audit__plain_model_expired_owner__lock_deleted(dynoxide_endpoint: str, tmp_path: Path) -> None:
    """A plain expiring model (family = [model]) audited from an export: its expired owner's lock is deleted."""
    model, web = _session(dynoxide_endpoint)
    save_expired(web, "A#1", "a@x.io")
    report = audited(model, "orphaned", export=table_export(model, tmp_path))
    repaired(model, report, "applied")


# --- 2. migrate: the owner's stored class -------------------------------------------------------


def _foreign(model: Any, web: Any, owner_item: dict[str, Any]) -> None:
    """A lock owned by ``A#1`` (stored as ``owner_item``), held by ``A#2``'s record."""
    epoch = epoch_in_days(2)
    web(pk="A#1", email="a@x.io", expires=datetime.fromtimestamp(epoch, tz=UTC)).save()
    put_record(model, "A#1", owner_item)
    put_record(model, "A#2", {"kind": {"S": "web"}, "email": {"S": "a@x.io"}, "ttl": {"N": f"{epoch}.5"}})


@pytest.mark.integration
def test_migrate__foreign_lock_owner_of_an_unknown_class__left_not_raised(dynoxide_endpoint: str) -> None:
    """migrate() raises ValueError when a foreign lock's owner key holds an item of an unknown class.

    The audit reads such an item as no record of its family (``_Group.owner`` catches
    ``stored_class``'s ValueError: "a class another family, sharing the table, stores") and
    reports the lock as foreign. ``_Migrator.owner_holds`` calls ``stored_class(model, item)``
    (and, before the fix, ``stored_from_item``) without catching it: the whole migration, even a
    dry run, stops with "Unknown discriminator value" instead of leaving the lock for repair.
    """
    model, web = _session(dynoxide_endpoint)
    _foreign(model, web, {"kind": {"S": "other-family"}, "email": {"S": "a@x.io"}})
    audited(model, "foreign")
    done = migrate(model, apply=False)
    assert done.conflicts == []
    assert [p.kind for p in done.left] == ["foreign"]


@pytest.mark.integration
@pytest.mark.parametrize("expiry", [{"NULL": True}, None], ids=["null", "absent"])
def test_migrate__owner_expiry_null_or_absent__holds_a_conflict(
    dynoxide_endpoint: str, expiry: dict[str, Any] | None
) -> None:
    """An owner whose expiry is NULL or absent is not expired (as the audit judges): it holds; a past one: not."""
    model, web = _session(dynoxide_endpoint)
    epoch = epoch_in_days(2)
    web(pk="A#1", email="a@x.io", expires=datetime.fromtimestamp(epoch, tz=UTC)).save()
    set_attribute(model, record_key("A#1"), "ttl", expiry)
    # owner_holds directly, on a ForeignLock naming A#1 as a scan racing A#1's write reports it.
    problem = ForeignLock(
        constraint="email",
        lock_key="UNIQ#EMAIL#a@x.io",
        values=("a@x.io",),
        owner=("A#1", "PROFILE"),
        holders=(("A#2", "PROFILE"),),
    )
    assert _Migrator(model).owner_holds(problem)
    expire_record(model, "A#1")
    assert not _Migrator(model).owner_holds(problem)


@pytest.mark.integration
def test_migrate__expired_subclass_owner__left_for_repair(dynoxide_endpoint: str) -> None:
    """An owner stored as the subclass, expired by the TTL it inherits: left for repair, which moves the lock."""
    model, web = _session(dynoxide_endpoint)
    _foreign(model, web, {"kind": {"S": "web"}, "email": {"S": "a@x.io"}, "ttl": expired_ttl()})
    done = migrate(model, apply=True)
    assert done.conflicts == []
    assert [p.kind for p in done.left] == ["foreign"]
    repaired(model, audit(model), "applied")
    with RequestCounter(model):
        assert audit(model).clean
