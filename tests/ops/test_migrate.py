"""Changing a constraint on a live table, end to end on dynoxide: expand, migrate, contract.

Each deploy of the model is a class defined again under the same module and name on the same
table (as a process restarted with new code), so it replaces the previous one in the registry.
Writers create, change and delete records while ``migrate`` runs.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from _backends import REGION, Backend, unique_table_name
from _damage import all_items, client
from _invariant import actual_locks, assert_invariant
from pynamodb.attributes import Attribute, UnicodeAttribute
from pynamodb.models import Model

import pynamodb_unique._ops.migrate
from pynamodb_unique import (
    Former,
    MigrationReport,
    OrphanedLock,
    RetiredLock,
    UniqueAttribute,
    UniqueError,
    UniqueMixin,
    UniqueViolation,
    audit,
    inspect,
    migrate,
    repair,
)
from pynamodb_unique._ops.migrate import CHANGED, complete

# Writers run beside migrate in threads (moto takes one request at a time), and moto copies the
# whole table for every item of a transaction: seven times slower here.
pytestmark = pytest.mark.backends("dynoxide")

#: Records written before the migration, besides each test's named ones.
SEEDS = 12
#: Writers running while migrate does (dynoxide), and the writes each makes at least.
WRITERS = 3
MIN_WRITES = 6
OLD_SECRET = b"secret-of-2023"
NEW_SECRET = b"secret-of-2024"


def _deploy(
    backend: Backend,
    table: str,
    *,
    email: Attribute[Any] | None = None,
    username: Attribute[Any] | None = None,
    secret: bytes | None = None,
) -> type[Any]:
    """The Account model as one deploy declares it, on ``table``; it replaces the previous deploy's."""
    meta = type("Meta", (), {"table_name": table, "region": REGION, "host": backend.host, "unique_secret": secret})
    namespace = {
        "__module__": __name__,
        "__qualname__": "Account",
        "Meta": meta,
        "pk": UnicodeAttribute(hash_key=True, attr_name="PK"),
        "sk": UnicodeAttribute(range_key=True, attr_name="SK", default="PROFILE"),
        "email": email if email is not None else UnicodeAttribute(null=True),
        "username": username if username is not None else UnicodeAttribute(null=True),
    }
    return type("Account", (UniqueMixin, Model), namespace)


def _create(model: type[Any]) -> None:
    model.create_table(wait=True, billing_mode="PAY_PER_REQUEST")


def _key(pk: str) -> tuple[str, str]:
    return (pk, "PROFILE")


def _change(model: type[Any], pk: str, **values: Any) -> None:
    """Change a stored record's values through the model, as the application does."""
    record = model.get(pk, "PROFILE", consistent_read=True)
    for name, value in values.items():
        setattr(record, name, value)
    record.save()


def _refused(model: type[Any], pk: str, **values: Any) -> UniqueViolation:
    with pytest.raises(UniqueViolation) as caught:
        model(pk=pk, **values).save()
    return caught.value


def _while_writing(model: type[Any], fresh: Callable[[str], dict[str, Any]], churn: list[str]) -> MigrationReport:
    """migrate(apply=True) while writers create, change and delete records with ``fresh`` values.

    Writer ``i`` also changes the seeded record ``churn[i]``. The writers run in threads during
    the migration, which scans two segments.
    """
    model.describe_table()  # Create the shared botocore client before threads race for it.
    stop = threading.Event()
    errors: list[BaseException] = []
    writes = [0] * WRITERS

    def writer(i: int) -> None:
        made: list[Any] = []
        try:
            while writes[i] < MIN_WRITES or not stop.is_set():
                n = writes[i]
                record = model(pk=f"ACCT#w{i}-{n}", **fresh(f"{i}-{n}"))
                record.save()
                made.append(record)
                if n == 1 and i < len(churn):
                    _change(model, churn[i], **fresh(f"{i}-churn"))
                if n % 2 == 1:
                    for name, value in fresh(f"{i}-{n}-moved").items():
                        setattr(made[-2], name, value)
                    made[-2].save()
                if n % 3 == 2:
                    made.pop(0).delete()
                writes[i] += 1
        except BaseException as exc:  # noqa: BLE001 - reported by the test.
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(WRITERS)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 10
    while sum(writes) < WRITERS and not errors and time.monotonic() < deadline:
        time.sleep(0.001)  # The writers under way before the scan starts.
    first = sum(writes)
    report = migrate(model, apply=True, segments=2)
    during = sum(writes) - first
    stop.set()
    for thread in threads:
        thread.join()
    print(f"\n[migrate] {during} writes completed while migrate ran ({report.created} locks created)")
    assert during > 0
    assert errors == []
    assert sum(writes) >= WRITERS * MIN_WRITES
    return report


def _settled(model: type[Any]) -> MigrationReport:
    """Run migrate again until no lock is left uncreated for a record changed during a run (at most 3 runs)."""
    for _ in range(3):
        report = migrate(model, apply=True)
        if not any(f.outcome == "skipped" for f in report.fixes):
            return report
    pytest.fail(f"migrate kept skipping: {[f.describe() for f in report.fixes if f.outcome == 'skipped']}")


def _conflicts(report: MigrationReport) -> dict[str, set[tuple[Any, ...]]]:
    return {c.lock_key: set(c.records) for c in report.conflicts}


def test_lookups__value_held_under_former_form_only__unique_owner_and_inspect_agree(backend: Backend) -> None:
    """During expand, a value only an unmigrated record holds (its former-form lock) is taken for both lookups."""
    table = unique_table_name("lookups")
    v1 = _deploy(backend, table, email=UniqueAttribute(UnicodeAttribute(null=True)))
    _create(v1)
    v1(pk="ACCT#ada", email="Ada@Lovelace.io").save()
    expand = _deploy(
        backend,
        table,
        email=UniqueAttribute(UnicodeAttribute(null=True), normalize=str.casefold, former=Former(normalize=None)),
    )
    assert expand.unique_owner(email="Ada@Lovelace.io") == _key("ACCT#ada")
    info = inspect(expand, email="Ada@Lovelace.io")
    assert (info.lock_key, info.exists, info.owner, info.owner_holds, info.former) == (
        "UNIQ#EMAIL#Ada@Lovelace.io",
        True,
        _key("ACCT#ada"),
        True,
        True,
    )
    assert info.healthy
    # A value no form holds: both lookups say free, under the current form's key.
    assert expand.unique_owner(email="Bob@X.io") is None
    free = inspect(expand, email="Bob@X.io")
    assert (free.lock_key, free.exists, free.former) == ("UNIQ#EMAIL#bob@x.io", False, False)


def test_migrate__renormalize__expand_migrate_contract(backend: Backend) -> None:
    """Emails become case-insensitive: both forms during expand, the window's pairs reported, then only casefold."""
    table = unique_table_name("renormalize")
    v1 = _deploy(backend, table, email=UniqueAttribute(UnicodeAttribute(null=True)))
    _create(v1)
    seeds = {f"ACCT#s{n}": f"User{n}@Example.COM" for n in range(SEEDS)}
    named = {"ACCT#ada": "Ada@Lovelace.io", "ACCT#bob1": "Bob@X.io", "ACCT#bob2": "bob@x.io", "ACCT#grace": "g@h.dev"}
    for pk, email in {**named, **seeds}.items():
        v1(pk=pk, email=email).save()
    assert_invariant(v1)

    expand = _deploy(
        backend,
        table,
        email=UniqueAttribute(UnicodeAttribute(null=True), normalize=str.casefold, former=Former(normalize=None)),
    )
    # A value held under its former form is refused, reported once, naming its holder.
    refused = _refused(expand, "ACCT#copy", email="Ada@Lovelace.io")
    assert [(v.constraint, v.owner) for v in refused.violations] == [("EMAIL", _key("ACCT#ada"))]
    expand(pk="ACCT#linus", email="Linus@Kernel.org").save()
    assert {"UNIQ#EMAIL#linus@kernel.org", "UNIQ#EMAIL#Linus@Kernel.org"} <= set(actual_locks(expand))
    # The window: before migrate, a value colliding with an unmigrated record under the current form only.
    expand(pk="ACCT#ada2", email="ADA@lovelace.io").save()
    # Audit counts both forms' locks as valid: only the migration's work shows.
    assert {(p.kind, p.former) for p in audit(expand).problems} == {("missing", False), ("duplicate", False)}

    before = all_items(expand)
    dry = migrate(expand)
    assert all_items(expand) == before
    assert (dry.applied, dry.missing, dry.created, dry.done) == (False, SEEDS, 0, False)
    expected_conflicts = {
        "UNIQ#EMAIL#ada@lovelace.io": {_key("ACCT#ada"), _key("ACCT#ada2")},
        "UNIQ#EMAIL#bob@x.io": {_key("ACCT#bob1"), _key("ACCT#bob2")},
    }
    assert _conflicts(dry) == expected_conflicts
    assert {c.lock_key: c.owner for c in dry.conflicts} == {
        "UNIQ#EMAIL#ada@lovelace.io": _key("ACCT#ada2"),
        "UNIQ#EMAIL#bob@x.io": _key("ACCT#bob2"),
    }

    def fresh(tag: str) -> dict[str, Any]:
        return {"email": f"Writer-{tag}@Example.ORG"}

    during = _while_writing(expand, fresh, churn=list(seeds)[:WRITERS])
    assert _conflicts(during) == expected_conflicts
    assert not during.done
    again = _settled(expand)
    assert (again.missing, _conflicts(again)) == (0, expected_conflicts)

    # A person decides: the later signup and one of the twins change their emails.
    _change(expand, "ACCT#ada2", email="ada.two@lovelace.io")
    _change(expand, "ACCT#bob1", email="robert@x.io")
    final = migrate(expand, apply=True)
    assert (final.created, final.conflicts, final.left, final.done) == (1, [], (), True)
    assert audit(expand).clean
    assert_invariant(expand)
    # After done, no duplicate under either form.
    for n, email in enumerate(["ada@lovelace.io", "Ada@Lovelace.io", "BOB@x.io", "user3@example.com"]):
        assert [v.constraint for v in _refused(expand, f"ACCT#late{n}", email=email).violations] == ["EMAIL"]

    contract = _deploy(backend, table, email=UniqueAttribute(UnicodeAttribute(null=True), normalize=str.casefold))
    report = audit(contract)
    assert {type(p) for p in report.problems} == {OrphanedLock}
    assert "UNIQ#EMAIL#Ada@Lovelace.io" in {p.lock_key for p in report.problems}
    assert len(report.problems) == sum(1 for r in contract.scan() if r.email != r.email.casefold())
    fixed = repair(contract, apply=True)
    assert fixed.clean
    assert audit(contract).clean
    assert_invariant(contract)
    contract(pk="ACCT#new", email="New@Example.io").save()
    assert "UNIQ#EMAIL#New@Example.io" not in actual_locks(contract)
    assert_invariant(contract)


def test_migrate__rename__retired_locks_deleted_after_contract(backend: Backend) -> None:
    """HANDLE becomes LOGIN: both namespaces during expand, then the HANDLE locks are retired and deleted."""
    table = unique_table_name("rename")
    v1 = _deploy(backend, table, username=UniqueAttribute(UnicodeAttribute(null=True), name="HANDLE"))
    _create(v1)
    seeds = {f"ACCT#s{n}": f"user{n}" for n in range(SEEDS)}
    for pk, username in seeds.items():
        v1(pk=pk, username=username).save()

    expand = _deploy(
        backend,
        table,
        username=UniqueAttribute(UnicodeAttribute(null=True), name="LOGIN", former=Former(name="HANDLE")),
    )
    refused = _refused(expand, "ACCT#copy", username="user0")
    assert [(v.constraint, v.attributes, v.owner) for v in refused.violations] == [
        ("LOGIN", ("username",), _key("ACCT#s0"))
    ]
    assert expand.unique_owner(username="user1") == _key("ACCT#s1")
    during = _while_writing(expand, lambda tag: {"username": f"writer{tag}"}, churn=list(seeds)[:WRITERS])
    assert during.conflicts == []
    assert during.created >= SEEDS - WRITERS
    assert _settled(expand).done
    assert audit(expand).clean
    assert_invariant(expand)
    assert [v.constraint for v in _refused(expand, "ACCT#late", username="user5").violations] == ["LOGIN"]

    contract = _deploy(backend, table, username=UniqueAttribute(UnicodeAttribute(null=True), name="LOGIN"))
    # No unique_item_filter needed: each lock records its owner's model.
    report = audit(contract)
    retired = {p.lock_key for p in report.problems}
    assert {type(p) for p in report.problems} == {RetiredLock}
    assert retired == {k for k in actual_locks(contract) if k.startswith("UNIQ#HANDLE#")}
    assert report.constraints == ("LOGIN", "HANDLE")
    # Another model's lock in the same namespace is not this model's to retire.
    stranger = {"PK": {"S": "UNIQ#HANDLE#zed"}, "SK": {"S": "LOCK"}, "uniq_owner_hash": {"S": "CUST#1"}}
    stranger |= {"uniq_owner_range": {"S": "CUSTOMER"}, "uniq_constraint": {"S": "HANDLE"}}
    stranger |= {"uniq_owner_model": {"S": "Customer"}}
    client(contract).put_item(TableName=table, Item=stranger)
    with pytest.raises(UniqueError, match="unique_item_filter"):
        audit(contract)
    contract.Meta.unique_item_filter = lambda model: model.sk == "PROFILE"
    assert {p.lock_key for p in audit(contract).problems} == retired
    fixed = repair(contract, apply=True)
    assert fixed.clean
    assert {f.action for f in fixed.fixes} == {"delete"}
    assert audit(contract).clean
    assert "UNIQ#HANDLE#zed" in actual_locks(contract)
    client(contract).delete_item(TableName=table, Key={"PK": {"S": "UNIQ#HANDLE#zed"}, "SK": {"S": "LOCK"}})
    assert_invariant(contract)


def test_migrate__secret_rotation__old_keys_orphaned_after_contract(backend: Backend) -> None:
    """A hashed constraint's secret rotates: locks under both secrets during expand, then only the new one."""
    table = unique_table_name("rotation")
    v1 = _deploy(backend, table, email=UniqueAttribute(UnicodeAttribute(null=True), hashed=True), secret=OLD_SECRET)
    _create(v1)
    seeds = {f"ACCT#s{n}": f"user{n}@example.com" for n in range(SEEDS)}
    for pk, email in seeds.items():
        v1(pk=pk, email=email).save()
    old_keys = set(actual_locks(v1))

    expand = _deploy(
        backend,
        table,
        email=UniqueAttribute(UnicodeAttribute(null=True), hashed=True, former=Former(secret=OLD_SECRET)),
        secret=NEW_SECRET,
    )
    refused = _refused(expand, "ACCT#copy", email="user0@example.com")
    assert [(v.constraint, v.owner) for v in refused.violations] == [("EMAIL", _key("ACCT#s0"))]
    during = _while_writing(expand, lambda tag: {"email": f"w{tag}@example.org"}, churn=list(seeds)[:2])
    assert during.conflicts == []
    assert _settled(expand).done
    assert audit(expand).clean
    assert_invariant(expand)
    assert [v.constraint for v in _refused(expand, "ACCT#late", email="user7@example.com").violations] == ["EMAIL"]

    contract = _deploy(
        backend, table, email=UniqueAttribute(UnicodeAttribute(null=True), hashed=True), secret=NEW_SECRET
    )
    report = audit(contract)
    assert {type(p) for p in report.problems} == {OrphanedLock}
    orphans = {p.lock_key for p in report.problems}
    # The old secret's keys of records still holding their seeded values are among the orphans.
    assert orphans & old_keys
    assert all(k.startswith("UNIQ#EMAIL#%K") for k in orphans)
    assert repair(contract, apply=True).clean
    assert audit(contract).clean
    assert_invariant(contract)
    assert not (set(actual_locks(contract)) & old_keys)


def test_migrate__adding_a_constraint__backfills_and_reports_duplicates(backend: Backend) -> None:
    """A username constraint added to a table with data: migrate backfills, the duplicates wait for a person."""
    table = unique_table_name("added")
    v1 = _deploy(backend, table, email=UniqueAttribute(UnicodeAttribute(null=True)))
    _create(v1)
    seeds = {f"ACCT#s{n}": f"user{n}" for n in range(SEEDS)}
    for pk, username in {**seeds, "ACCT#twin1": "twin", "ACCT#twin2": "twin"}.items():
        v1(pk=pk, email=f"{pk}@example.com", username=username).save()

    v2 = _deploy(
        backend,
        table,
        email=UniqueAttribute(UnicodeAttribute(null=True)),
        username=UniqueAttribute(UnicodeAttribute(null=True), name="HANDLE"),
    )
    # The window: a value an existing record holds is accepted until migrate has given it its lock.
    v2(pk="ACCT#early", email="early@example.com", username="user0").save()
    dry = migrate(v2)
    assert (dry.missing, dry.created) == (SEEDS - 1, 0)

    def fresh(tag: str) -> dict[str, Any]:
        return {"email": f"w{tag}@example.org", "username": f"writer{tag}"}

    during = _while_writing(v2, fresh, churn=list(seeds)[1 : 1 + WRITERS])
    expected = {
        "UNIQ#HANDLE#twin": {_key("ACCT#twin1"), _key("ACCT#twin2")},
        "UNIQ#HANDLE#user0": {_key("ACCT#s0"), _key("ACCT#early")},
    }
    assert _conflicts(during) == expected
    assert _conflicts(_settled(v2)) == expected
    _change(v2, "ACCT#twin2", username="twin2")
    v2.get("ACCT#early", "PROFILE").delete()
    final = migrate(v2, apply=True)
    assert (final.created, final.done) == (2, True)
    assert repair(v2).clean
    assert audit(v2).clean
    assert_invariant(v2)
    assert [v.constraint for v in _refused(v2, "ACCT#late", username="twin").violations] == ["HANDLE"]


def _renormalizing(backend: Backend) -> tuple[type[Any], type[Any]]:
    """A table of case-sensitive emails (seeded) and the expand deploy making them case-insensitive."""
    table = unique_table_name("migrate")
    v1 = _deploy(backend, table, email=UniqueAttribute(UnicodeAttribute(null=True)))
    _create(v1)
    for n in range(4):
        v1(pk=f"ACCT#s{n}", email=f"User{n}@Example.COM").save()
    expand = _deploy(
        backend,
        table,
        email=UniqueAttribute(UnicodeAttribute(null=True), normalize=str.casefold, former=Former(normalize=None)),
    )
    return v1, expand


def test_migrate__writer_takes_the_value_after_the_scan__conflict(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer that takes a value between the scan and migrate's put wins; migrate reports the pair."""
    _, expand = _renormalizing(backend)
    scanned = audit

    def scan_then_signup(model: type[Any], **kwargs: Any) -> Any:
        report = scanned(model, **kwargs)
        expand(pk="ACCT#late", email="user1@example.com").save()
        _change(expand, "ACCT#s2", email="Moved@Example.COM")
        return report

    monkeypatch.setattr(pynamodb_unique._ops.migrate, "audit", scan_then_signup)
    report = migrate(expand, apply=True)
    monkeypatch.undo()
    assert report.created == 2
    (conflict,) = report.conflicts
    assert (conflict.lock_key, conflict.records, conflict.owner) == (
        "UNIQ#EMAIL#user1@example.com",
        (_key("ACCT#s1"), _key("ACCT#late")),
        _key("ACCT#late"),
    )
    reasons = {f.problem.lock_key: f.reason for f in report.fixes if f.outcome == "skipped"}
    assert reasons == {
        "UNIQ#EMAIL#user1@example.com": "ACCT#late/PROFILE took the value since the scan: a conflict",
        "UNIQ#EMAIL#user2@example.com": CHANGED,
    }
    assert not report.done
    # The next run: the changed record's write took its own lock; the conflict remains.
    again = migrate(expand, apply=True)
    assert (again.missing, [c.lock_key for c in again.conflicts]) == (0, ["UNIQ#EMAIL#user1@example.com"])
    expand.get("ACCT#late", "PROFILE").delete()
    assert migrate(expand, apply=True).done
    assert_invariant(expand)


def test_migrate__lock_seen_before_its_record__conflict_or_left(backend: Backend) -> None:
    """A scan that saw a new record's lock but not the record: the pair is a conflict; an ownerless lock is left."""
    _, expand = _renormalizing(backend)
    table = expand.Meta.table_name
    lock = {"PK": {"S": "UNIQ#EMAIL#user1@example.com"}, "SK": {"S": "LOCK"}, "uniq_owner_hash": {"S": "ACCT#late"}}
    lock |= {"uniq_owner_range": {"S": "PROFILE"}, "uniq_constraint": {"S": "EMAIL"}}
    client(expand).put_item(TableName=table, Item=lock)
    report = audit(expand)
    # The record was written after the scan passed its place, with the lock it already held.
    client(expand).put_item(
        TableName=table, Item={"PK": {"S": "ACCT#late"}, "SK": {"S": "PROFILE"}, "email": {"S": "user1@example.com"}}
    )
    migrated = complete(expand, report, apply=True)
    assert [(c.lock_key, c.records, c.owner) for c in migrated.conflicts] == [
        ("UNIQ#EMAIL#user1@example.com", (_key("ACCT#s1"), _key("ACCT#late")), _key("ACCT#late"))
    ]
    assert migrated.left == ()
    # Without that record, the lock's owner holds nothing: left for repair, which moves it.
    client(expand).delete_item(TableName=table, Key={"PK": {"S": "ACCT#late"}, "SK": {"S": "PROFILE"}})
    left = migrate(expand, apply=True)
    assert ([p.kind for p in left.left], left.conflicts, left.done) == (["foreign"], [], False)
    assert repair(expand, apply=True).clean
    assert migrate(expand).done
    assert_invariant(expand)


def test_migrate__report_json_and_checks(backend: Backend) -> None:
    """The report as JSON (counts, conflicts, what was not created); a report of another model is refused."""
    v1, expand = _renormalizing(backend)
    v1(pk="ACCT#twin", email="user0@example.com").save()
    document = migrate(expand).to_json()
    assert document["counts"] == {
        "missing": 3,
        "created": 0,
        "planned": 3,
        "skipped": 0,
        "conflicts": 1,
        "left": 0,
    }
    assert document["conflicts"] == [
        {
            "constraint": "EMAIL",
            "lock_key": "UNIQ#EMAIL#user0@example.com",
            "records": [["ACCT#s0", "PROFILE"], ["ACCT#twin", "PROFILE"]],
            "owner": ["ACCT#twin", "PROFILE"],
        }
    ]
    assert (document["applied"], document["done"], document["records"]) == (False, False, 5)
    other = _deploy(backend, unique_table_name("other"), email=UniqueAttribute(UnicodeAttribute(null=True)))
    with pytest.raises(ValueError, match="the report audits"):
        complete(other, audit(expand), apply=False)
    with pytest.raises(ValueError, match="segments"):
        migrate(expand, segments=0)
