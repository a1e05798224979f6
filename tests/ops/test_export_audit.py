"""audit(export=...): the audit of a DynamoDB export agrees with the live audit, on moto.

Each test damages tables as tests/ops/test_audit_repair.py does, writes an export of them in the real format
(tests/_export.py), and compares the two reports: the problems (kind, lock key, values, owner,
holders, former form), what each problem says of the records involved, and the counts.
"""

from __future__ import annotations

import gzip
import importlib
import json
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
from _backends import REGION, Backend, bind_model, unique_table_name
from _damage import (
    EXPECTED,
    bind_accounts,
    client,
    damage,
    load_healthy,
    lock_table_name,
    put_lock,
)
from _export import export_tables, write_export
from click.testing import CliRunner
from models import Customer, Employee, Member
from pynamodb.attributes import (
    BinaryAttribute,
    DiscriminatorAttribute,
    NumberAttribute,
    TTLAttribute,
    UnicodeAttribute,
)
from pynamodb.models import Model

import pynamodb_unique._ops.export
import pynamodb_unique._ops.parallel
from pynamodb_unique import (
    AuditReport,
    Former,
    UniqueAttribute,
    UniqueError,
    UniqueMixin,
    audit,
    create_lock_table,
    repair,
)
from pynamodb_unique.cli import cli

LAYOUTS = [pytest.param(False, id="shared"), pytest.param(True, id="separate")]


def _export(model: type[Model], folder: Path) -> dict[str, Path]:
    """An export of the model's table and of its lock table, by table name."""
    return export_tables(client(model), [model.Meta.table_name, lock_table_name(model)], folder)


def _location(exports: dict[str, Path]) -> Path | dict[str, Path]:
    """What export= takes: the one export, or the mapping when there are two tables."""
    return next(iter(exports.values())) if len(exports) == 1 else exports


def _facts(report: AuditReport) -> list[tuple[Any, ...]]:
    """Everything a report says of each problem, the records involved included."""
    return [(p, p.describe(), dict(p.audited), dict(p.models)) for p in report.problems]


def assert_same(model: type[Any], folder: Path, **kwargs: Any) -> AuditReport:
    """Export the model's tables, audit the export (one process, then two) and the live tables: equal reports."""
    live = audit(model)
    location = _location(_export(model, folder))
    exported = audit(model, export=location, **kwargs)
    assert exported == live
    assert _facts(exported) == _facts(live)
    # Forked workers inherit the test's models, which are made at run time (bind_model).
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pynamodb_unique._ops.parallel, "START_METHOD", "fork")
        split = audit(model, export=location, workers=2, **kwargs)
    assert split == exported
    assert _facts(split) == _facts(exported)
    return exported


@pytest.mark.parametrize("separate", LAYOUTS)
def test_export_audit__each_kind_of_damage__same_report_as_live(
    backend: Backend, tmp_path: Path, separate: bool
) -> None:
    """Orphaned, missing, foreign and duplicate: found in the export as in the tables, in both lock layouts."""
    model = bind_accounts(backend, separate=separate)
    damage(model)
    report = assert_same(model, tmp_path)
    assert {(p.kind, p.lock_key) for p in report.problems} == EXPECTED
    assert (report.records, report.locks) == (5, 9)


def test_export_audit__many_batches__same_report_as_live(
    backend: Backend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Items streamed in many small batches, problems read back in many: the same report."""
    monkeypatch.setattr(pynamodb_unique._ops.export, "BATCH", 7)
    model = bind_accounts(backend)
    load_healthy(model, 60)
    damage(model)
    put_lock(model, "UNIQ#EMAIL#nobody@x.io", None, "EMAIL")  # A lock naming no owner.
    report = assert_same(model, tmp_path, memory_limit="64MB", temp_directory=tmp_path / "spill")
    assert report.records == 65
    assert ("orphaned", "UNIQ#EMAIL#nobody@x.io") in {(p.kind, p.lock_key) for p in report.problems}
    assert list((tmp_path / "spill").iterdir()) == []  # DuckDB's files are gone.


def test_export_audit__hashed_and_partial_constraints(backend: Backend, tmp_path: Path) -> None:
    """Hashed lock keys recomputed, a condition that stopped holding, a hashed duplicate: as live."""
    model = bind_model(Member, backend)
    model(pk="M#1", handle="ada", org="acme", phone="+1 555", email="ada@x.io").save()
    model(pk="M#2", handle="bob", org="acme", phone="+1 556", email="bob@x.io").save()
    raw = client(model)
    table = model.Meta.table_name
    # M#1 soft-deleted behind the library's back: its handle lock is no longer held.
    raw.update_item(
        TableName=table,
        Key={"PK": {"S": "M#1"}, "SK": {"S": "MEMBER"}},
        UpdateExpression="SET #s = :d",
        ExpressionAttributeNames={"#s": "status"},
        ExpressionAttributeValues={":d": {"S": "deleted"}},
    )
    # M#3 written without locks, holding M#2's phone: a hashed duplicate and missing locks.
    item = {"PK": {"S": "M#3"}, "SK": {"S": "MEMBER"}, "status": {"S": "active"}, "handle": {"S": "cy"}}
    item |= {"org": {"S": "acme"}, "phone": {"S": "+1 556"}, "email": {"S": "cy@x.io"}}
    raw.put_item(TableName=table, Item=item)
    report = assert_same(model, tmp_path)
    kinds = sorted((p.constraint, p.kind) for p in report.problems)
    assert kinds == [
        ("ACTIVE_HANDLE", "missing"),
        ("ACTIVE_HANDLE", "orphaned"),
        ("EMAIL", "missing"),
        ("ORG_PHONE", "duplicate"),
    ]


def _animals(backend: Backend, table: str) -> dict[str, Any]:
    """A polymorphic family in the shop's table (built fresh: PynamoDB refuses a discriminator defined twice)."""

    class Animal(UniqueMixin, Model):
        class Meta:
            table_name = table
            region = REGION
            host = backend.host
            unique_item_filter = staticmethod(lambda m: m.sk == "ANIMAL")

        pk = UnicodeAttribute(hash_key=True, attr_name="PK")
        sk = UnicodeAttribute(range_key=True, attr_name="SK", default="ANIMAL")
        kind = DiscriminatorAttribute()
        name = UniqueAttribute(UnicodeAttribute(null=True))

    class Cat(Animal, discriminator="cat"):
        chip = UniqueAttribute(UnicodeAttribute(null=True), name="CAT_CHIP")

    class Dog(Animal, discriminator="dog"):
        tag = UniqueAttribute(UnicodeAttribute(null=True), name="DOG_TAG")

    return {"Animal": Animal, "Cat": Cat, "Dog": Dog}


def test_export_audit__single_table_design(backend: Backend, tmp_path: Path) -> None:
    """Customers, employees and a polymorphic family in one table: each model's export audit is its live one."""
    table = unique_table_name("shop")
    customers = bind_model(Customer, backend, table)
    employees = bind_model(Employee, backend, table, create=False)
    customers.Meta.unique_item_filter = lambda m: m.sk == "CUSTOMER"  # type: ignore[attr-defined]
    employees.Meta.unique_item_filter = lambda m: m.sk == "EMPLOYEE"  # type: ignore[attr-defined]
    zoo = _animals(backend, table)
    customers(pk="C#1", email="ada@x.io").save()
    customers(pk="C#2", email="bob@x.io").save()
    employees(pk="E#1", badge="B1").save()
    employees(pk="E#2", badge="B2").save()
    zoo["Cat"](pk="A#1", name="tom", chip="c1").save()
    zoo["Dog"](pk="A#2", name="rex", tag="t1").save()
    raw = client(customers)
    raw.delete_item(TableName=table, Key={"PK": {"S": "UNIQ#CUSTOMER_EMAIL#ada@x.io"}, "SK": {"S": "LOCK"}})
    raw.delete_item(TableName=table, Key={"PK": {"S": "E#2"}, "SK": {"S": "EMPLOYEE"}})
    raw.delete_item(TableName=table, Key={"PK": {"S": "UNIQ#DOG_TAG#t1"}, "SK": {"S": "LOCK"}})
    raw.put_item(
        TableName=table,
        Item={"PK": {"S": "A#3"}, "SK": {"S": "ANIMAL"}, "kind": {"S": "cat"}, "name": {"S": "tom"}},
    )
    found = {}
    for number, model in enumerate([customers, employees, zoo["Animal"], zoo["Cat"], zoo["Dog"]]):
        found[model.__name__] = {(p.kind, p.lock_key) for p in assert_same(model, tmp_path / str(number)).problems}
    assert found["Customer"] == {("missing", "UNIQ#CUSTOMER_EMAIL#ada@x.io")}
    assert found["Employee"] == {("orphaned", "UNIQ#BADGE#B2")}
    assert found["Animal"] == {("missing", "UNIQ#DOG_TAG#t1"), ("duplicate", "UNIQ#NAME#tom")}
    assert found["Cat"] == {("duplicate", "UNIQ#NAME#tom")}


def _deploy(backend: Backend, table: str, username: Any, email: Any = None) -> type[Any]:
    """An account model as one deploy declares it (a class defined again replaces the previous deploy's)."""
    meta = type("Meta", (), {"table_name": table, "region": REGION, "host": backend.host})
    namespace = {
        "__module__": __name__,
        "__qualname__": "Deployed",
        "Meta": meta,
        "pk": UnicodeAttribute(hash_key=True, attr_name="PK"),
        "sk": UnicodeAttribute(range_key=True, attr_name="SK", default="PROFILE"),
        "username": username,
        "email": email if email is not None else UnicodeAttribute(null=True),
    }
    return type("Deployed", (UniqueMixin, Model), namespace)


def test_export_audit__former_forms_and_retired_locks(backend: Backend, tmp_path: Path) -> None:
    """During a migration (former forms) and after it (retired locks): the export audit is the live one."""
    table = unique_table_name("forms")
    v1 = _deploy(
        backend,
        table,
        UniqueAttribute(UnicodeAttribute(null=True), name="HANDLE"),
        UniqueAttribute(UnicodeAttribute(null=True)),
    )
    v1.create_table(wait=True, billing_mode="PAY_PER_REQUEST")
    for n, name in enumerate(["Ada", "Bob", "Cy"]):
        v1(pk=f"ACCT#{n}", username=name.lower(), email=f"{name}@x.io").save()
    expand = _deploy(
        backend,
        table,
        UniqueAttribute(UnicodeAttribute(null=True), name="LOGIN", former=Former(name="HANDLE")),
        UniqueAttribute(UnicodeAttribute(null=True), normalize=str.casefold, former=Former(normalize=None)),
    )
    during = assert_same(expand, tmp_path / "expand")
    assert {p.former for p in during.problems} == {False}
    assert {p.kind for p in during.problems} == {"missing"}
    contract = _deploy(backend, table, UniqueAttribute(UnicodeAttribute(null=True), name="LOGIN"))
    after = assert_same(contract, tmp_path / "contract")
    assert {p.kind for p in after.problems} == {"retired", "missing"}
    assert after.constraints == ("LOGIN", "EMAIL", "HANDLE")


class Badge(UniqueMixin, Model):
    """Numeric keys and a binary unique value, locks in their own table: typed owners, base64 in the export."""

    class Meta:
        table_name = "export-badges"
        region = REGION
        unique_lock_table = "export-badge-locks"

    id = NumberAttribute(hash_key=True)
    code = UniqueAttribute(UnicodeAttribute(null=True), normalize=str.upper)
    chip = UniqueAttribute(BinaryAttribute(null=True, legacy_encoding=False))


def test_export_audit__typed_owners_and_binary_values(backend: Backend, tmp_path: Path) -> None:
    """Number owners and binary values (base64 text in an export) match as in a scan."""
    model = bind_model(Badge, backend, create=False)
    model.Meta.unique_lock_table = unique_table_name("badge-locks")  # type: ignore[attr-defined]
    model.create_table(wait=True, billing_mode="PAY_PER_REQUEST")
    create_lock_table(model, wait=True)
    model(id=1, code="abc", chip=b"\x00\x01").save()
    model(id=2, code="def", chip=b"\xff\xfe").save()
    raw = client(model)
    raw.delete_item(TableName=model.Meta.table_name, Key={"id": {"N": "1"}})
    raw.put_item(TableName=model.Meta.table_name, Item={"id": {"N": "3"}, "chip": {"B": b"\xff\xfe"}})
    report = assert_same(model, tmp_path)
    assert {(p.kind, p.constraint) for p in report.problems} == {
        ("orphaned", "CODE"),
        ("orphaned", "CHIP"),
        ("duplicate", "CHIP"),
    }
    assert next(p for p in report.problems if p.kind == "duplicate").values == (b"\xff\xfe",)


def _upload(folder: Path, bucket: str) -> str:
    """Copy an export folder to S3 under its own path; its s3:// URL."""
    s3 = boto3.client("s3", region_name=REGION)
    prefix = "/".join(folder.parts[-3:])
    for path in folder.rglob("*"):
        if path.is_file():
            s3.put_object(Bucket=bucket, Key=f"{prefix}/{path.relative_to(folder)}", Body=path.read_bytes())
    return f"s3://{bucket}/{prefix}/"


@pytest.mark.parametrize("separate", LAYOUTS)
def test_export_audit__from_s3(moto_backend: None, tmp_path: Path, separate: bool) -> None:
    """An export read from S3 (moto's) gives the report the same export gives from a folder."""
    model = bind_accounts(Backend("moto", None), separate=separate)
    damage(model)
    boto3.client("s3", region_name=REGION).create_bucket(Bucket="audit-exports")
    exports = _export(model, tmp_path)
    urls = {table: _upload(folder, "audit-exports") for table, folder in exports.items()}
    assert all(url.startswith("s3://audit-exports/exports/AWSDynamoDB/") for url in urls.values())
    assert audit(model, export=_location(urls)) == audit(model, export=_location(exports)) == audit(model)  # type: ignore[arg-type]
    with pytest.raises(UniqueError, match=r"cannot read manifest-summary\.json"):
        audit(
            model, export=dict.fromkeys(exports, "s3://audit-exports/nothing/") if separate else "s3://audit-exports/x"
        )


def test_export_audit__refuses_what_is_not_a_full_export_of_the_tables(moto_backend: None, tmp_path: Path) -> None:
    """A location for two tables, another table's export, ION, incremental, a miscounted or cut file: refused."""
    model = bind_accounts(Backend("moto", None), separate=True)
    damage(model)
    exports = _export(model, tmp_path)
    table, locks = model.Meta.table_name, lock_table_name(model)
    with pytest.raises(UniqueError, match="pass export= as a mapping"):
        audit(model, export=exports[table])
    with pytest.raises(UniqueError, match=f"is of table {locks!r}, not {table!r}"):
        audit(model, export={table: exports[locks], locks: exports[locks]})
    with pytest.raises(UniqueError, match="export= has"):
        audit(model, export={table: exports[table]})
    with pytest.raises(ValueError, match="segments and max_rate"):
        audit(model, export=exports, segments=2)  # type: ignore[arg-type]
    with pytest.raises(UniqueError, match=r"cannot read manifest-summary\.json"):
        audit(model, export={table: tmp_path / "nowhere", locks: exports[locks]})
    summary_path = exports[table] / "manifest-summary.json"
    summary = json.loads(summary_path.read_text())
    for change, message in [({"outputFormat": "ION"}, "ION format"), ({"exportType": "INCREMENTAL_EXPORT"}, "full")]:
        summary_path.write_text(json.dumps({**summary, **change}))
        with pytest.raises(UniqueError, match=message):
            audit(model, export=exports)  # type: ignore[arg-type]
    summary_path.write_text(json.dumps(summary))
    files = exports[table] / "manifest-files.json"
    entries = [json.loads(line) for line in files.read_text().splitlines()]
    entries[0]["itemCount"] += 1
    files.write_text("".join(json.dumps(e) + "\n" for e in entries))
    with pytest.raises(UniqueError, match=r"holds \d+ items, its manifest says"):
        audit(model, export=exports)  # type: ignore[arg-type]
    entries[0]["itemCount"] -= 1
    files.write_text("".join(json.dumps(e) + "\n" for e in entries))
    data = max((exports[table] / "data").iterdir(), key=lambda p: p.stat().st_size)
    data.write_bytes(data.read_bytes()[:-12])  # A download cut short.
    with pytest.raises(UniqueError, match=r"cannot be read after \d+ items"):
        audit(model, export=exports)  # type: ignore[arg-type]


def test_export_audit__without_duckdb__live_audit_works(
    moto_backend: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without DuckDB the live audit runs and the export audit says which extra to install."""
    model = bind_accounts(Backend("moto", None))
    damage(model)
    exports = _export(model, tmp_path)
    monkeypatch.setitem(sys.modules, "duckdb", None)
    assert {(p.kind, p.lock_key) for p in audit(model).problems} == EXPECTED
    with pytest.raises(UniqueError, match=r"pynamodb-unique\[export\]"):
        audit(model, export=exports[model.Meta.table_name])


def test_write_export__binary_values_as_base64_and_an_empty_file(moto_backend: None, tmp_path: Path) -> None:
    """The test exports are in the real format: gzip JSON lines of {"Item": ...}, binary as base64, an empty file."""
    root = write_export(tmp_path, "t", [{"id": {"N": "1"}, "b": {"B": b"\x00"}}], files=1)
    data = sorted((root / "data").iterdir(), key=lambda p: p.stat().st_size)
    assert gzip.decompress(data[0].read_bytes()) == b""
    assert json.loads(gzip.decompress(data[1].read_bytes())) == {"Item": {"id": {"N": "1"}, "b": {"B": "AA=="}}}
    assert {p.name for p in root.iterdir()} == {"data", "manifest-summary.json", "manifest-files.json", "_started"}


# The command.

MODEL_SOURCE = """
from models import Account


class Exported(Account):
    class Meta(Account.Meta):
        table_name = {table!r}
        unique_lock_table = {locks!r}
"""


@pytest.mark.parametrize("separate", LAYOUTS)
def test_audit_command__from_export__same_output_and_exit(
    moto_backend: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, separate: bool
) -> None:
    """audit --from-export prints what audit prints and exits 1; repair --from-export --apply fixes the damage."""
    table = unique_table_name("cli")
    locks = unique_table_name("cli-locks") if separate else None
    name = f"exported_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(MODEL_SOURCE.format(table=table, locks=locks))
    monkeypatch.syspath_prepend(str(tmp_path))
    model = importlib.import_module(name).Exported
    model.create_table(wait=True, billing_mode="PAY_PER_REQUEST")
    if separate:
        create_lock_table(model, wait=True)
    damage(model)
    exports = _export(model, tmp_path / "exports")
    options = [f"{t}={p}" for t, p in exports.items()] if separate else [str(exports[table])]
    from_export = [arg for option in options for arg in ("--from-export", option)]
    runner = CliRunner()
    live = runner.invoke(cli, ["audit", f"{name}:Exported", "--all"], catch_exceptions=False)
    exported = runner.invoke(cli, ["audit", f"{name}:Exported", "--all", *from_export], catch_exceptions=False)
    assert (exported.exit_code, exported.output) == (live.exit_code, live.output) == (1, live.output)
    as_json = runner.invoke(cli, ["audit", f"{name}:Exported", "--json", *from_export, "--memory-limit", "100MB"])
    assert as_json.exit_code == 1
    assert {(p["kind"], p["lock_key"]) for p in json.loads(as_json.stdout)["problems"]} == EXPECTED
    refused = runner.invoke(cli, ["audit", f"{name}:Exported", *from_export, "--max-rate", "5"])
    assert (refused.exit_code, "--max-rate paces a scan" in refused.output) == (2, True)
    # Spawned workers import the model by name, as the command did.
    monkeypatch.setattr(pynamodb_unique._ops.parallel, "START_METHOD", "spawn")
    split = runner.invoke(cli, ["audit", f"{name}:Exported", "--all", *from_export, "--workers", "2"])
    assert (split.exit_code, split.output) == (1, live.output)
    alone = runner.invoke(cli, ["audit", f"{name}:Exported", "--workers", "2"])
    assert (alone.exit_code, "--workers go with --from-export" in alone.output) == (2, True)
    zero = runner.invoke(cli, ["audit", f"{name}:Exported", *from_export, "--workers", "0"])
    assert zero.exit_code == 2
    fixed = runner.invoke(cli, ["repair", f"{name}:Exported", "--apply", *from_export], catch_exceptions=False)
    assert fixed.output.splitlines()[-1] == "done: 5 applied, 1 left"
    assert [(f.problem.kind, f.problem.lock_key) for f in repair(model).remaining] == [
        ("duplicate", "UNIQ#EMAIL#ada@lovelace.io")
    ]


@pytest.mark.parametrize("separate", LAYOUTS)
def test_live_audit__duckdb_engine__same_report(
    backend: Backend, tmp_path: Path, separate: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """engine="duckdb" joins a scan's pages in DuckDB (four segments: four threads) into the same report."""
    monkeypatch.setattr(pynamodb_unique._ops.export, "BATCH", 3)
    model = bind_accounts(backend, separate=separate)
    load_healthy(model, 20)
    damage(model)
    live = audit(model)
    joined = audit(model, engine="duckdb", segments=4, temp_directory=tmp_path / "spill")
    assert joined == live
    assert _facts(joined) == _facts(live)
    assert list((tmp_path / "spill").iterdir()) == []
    with pytest.raises(ValueError, match="engine must be"):
        audit(model, engine="sqlite")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="memory_limit and temp_directory are DuckDB's"):
        audit(model, memory_limit="1GB")


class Visit(UniqueMixin, Model):
    """A record that expires (TTL) and an email released into a 30-day hold."""

    class Meta:
        table_name = "export-visits"
        region = REGION

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    sk = UnicodeAttribute(range_key=True, attr_name="SK", default="VISIT")
    email = UniqueAttribute(UnicodeAttribute(null=True), hold=timedelta(days=30))
    expires = TTLAttribute(null=True, attr_name="ttl")


def test_export_audit__expired_records_holds_and_expired_locks(backend: Backend, tmp_path: Path) -> None:
    """Expiry is judged by the same code: expired records gone, holds valid, expired locks counted apart."""
    model = bind_model(Visit, backend)
    soon = datetime.fromtimestamp(int(time.time()) + 86400, tz=UTC)
    for n in range(4):
        model(pk=f"V#{n}", email=f"v{n}@x.io", expires=soon).save()
    moved = model.get("V#0", "VISIT")
    moved.email = "v0@elsewhere.io"
    moved.save()  # Its old email becomes a hold.
    past = {":e": {"N": str(int(time.time()) - 60)}}
    raw = client(model)
    for key in ({"PK": {"S": "V#1"}, "SK": {"S": "VISIT"}}, {"PK": {"S": "UNIQ#EMAIL#v1@x.io"}, "SK": {"S": "LOCK"}}):
        raw.update_item(
            TableName=model.Meta.table_name,
            Key=key,
            UpdateExpression="SET #e = :e",
            ExpressionAttributeNames={"#e": "ttl"},
            ExpressionAttributeValues=past,
        )
    raw.update_item(  # V#2's lock expired behind the library's back while V#2 lives: unprotected.
        TableName=model.Meta.table_name,
        Key={"PK": {"S": "UNIQ#EMAIL#v2@x.io"}, "SK": {"S": "LOCK"}},
        UpdateExpression="SET #e = :e",
        ExpressionAttributeNames={"#e": "ttl"},
        ExpressionAttributeValues=past,
    )
    report = assert_same(model, tmp_path)
    assert (report.held, report.expired) == (1, 2)
    assert [(p.kind, p.lock_key) for p in report.problems] == [("missing", "UNIQ#EMAIL#v2@x.io")]
