"""The audit, repair, streams, migrations and TransactWrite read records as PynamoDB loads them.

The write path (tests/model/test_compare_and_swap.py) takes an absent attribute as its fixed default, a
callable default as no value, and compares values as DynamoDB stores them. These tests check
the other readers of stored items against that view, on the edge values the write path handles:
raw ``MapAttribute`` conditions, ``JSONAttribute`` text written by another writer, attributes
stored as ``NULL``, defaulted attributes an item lacks.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any, TypeVar

import pytest
from _backends import Backend, RequestCounter, bind_model
from _export import export_tables
from _invariant import assert_invariant
from models import Contact, Flagged, JsonConditioned
from models import Defaulted as _Defaulted
from pynamodb.attributes import UnicodeAttribute, VersionAttribute
from pynamodb.models import Model

from pynamodb_unique import (
    TransactWrite,
    UniqueAttribute,
    UniqueMixin,
    audit,
    migrate,
    repair,
    streams,
)

MOTO = Backend("moto", None)
M = TypeVar("M", bound=Model)


# --- models ----------------------------------------------------------------------------------


class Defaulted(_Defaulted):
    """``models.Defaulted`` with a second, plain unique attribute."""

    class Meta(_Defaulted.Meta):
        table_name = "defaulted-with-handle"

    handle = UniqueAttribute(UnicodeAttribute(null=True), name="HANDLE")


class Versioned(UniqueMixin, Model):
    """One unique attribute and optimistic locking."""

    class Meta:
        table_name = "stored-view-readers-versioned"
        region = "us-east-1"

    pk = UnicodeAttribute(hash_key=True)
    email = UniqueAttribute(UnicodeAttribute(null=True), name="VEMAIL")
    bio = UnicodeAttribute(null=True)
    version = VersionAttribute()


# --- helpers ---------------------------------------------------------------------------------


def _put_raw(model: type[Model], item: dict[str, Any]) -> None:
    """Write an item behind the library's back (another writer: the console, another service)."""
    model._get_connection().connection.client.put_item(TableName=model.Meta.table_name, Item=item)


def _stream_insert(model: type[Model], item: dict[str, Any]) -> dict[str, Any]:
    """A Lambda event with one INSERT stream record of ``item`` (string attributes only)."""
    hash_name = model._hash_key_attribute().attr_name
    return {
        "Records": [
            {
                "eventID": uuid.uuid4().hex,
                "eventName": "INSERT",
                "eventSource": "aws:dynamodb",
                "dynamodb": {
                    "Keys": {hash_name: item[hash_name]},
                    "NewImage": item,
                    "StreamViewType": "NEW_AND_OLD_IMAGES",
                },
                "eventSourceARN": (
                    f"arn:aws:dynamodb:us-east-1:123456789012:table/{model.Meta.table_name}/stream/2026-12-01T00:00:00.000"
                ),
            }
        ]
    }


def _facts(report: Any) -> list[tuple[str, str]]:
    return [(p.kind, p.lock_key) for p in report.problems]


# --- 1. the audit and a raw MapAttribute condition -------------------------------------------


@pytest.mark.parametrize("engine", ["memory", "duckdb"])
def test_audit__map_condition_attribute__clean_after_library_save(moto_backend: None, engine: str) -> None:
    """A record saved by the library with ``flags={"active": True}`` audits clean.

    The write path gives a partial constraint's condition a ``MapAttribute`` (as a load does), so
    ``r.flags.active`` works; before the fix, the audit read the item with ``ModelContext.read_record`` →
    ``_stored_value``, which gives the raw ``MapAttribute.deserialize`` result, a plain dict, so
    the same condition raises AttributeError and the audit fails ("cannot read the item").
    """
    model = bind_model(Flagged, MOTO)
    model(pk="a", email="a@x.io", flags={"active": True}).save()
    model(pk="b", email="b@x.io", flags={"active": False}).save()
    assert model.unique_owner(email="a@x.io") == ("a",)
    assert_invariant(model)
    report = audit(model, engine=engine)  # type: ignore[arg-type]
    assert report.problems == ()
    assert report.records == 2


def test_export_audit__map_condition_attribute__clean(moto_backend: None, tmp_path: Path) -> None:
    """The export audit reads the same items as the live one: a map condition must not fail it."""
    model = bind_model(Flagged, MOTO)
    model(pk="a", email="a@x.io", flags={"active": True}).save()
    client = model._get_connection().connection.client
    exports = export_tables(client, [model.Meta.table_name], tmp_path)
    report = audit(model, export=exports[model.Meta.table_name])
    assert report.problems == ()


def test_streams__map_condition_attribute__insert_by_other_writer_creates_lock(moto_backend: None) -> None:
    """An INSERT of a record with an active map flag, written behind the library's back, gets its lock.

    Before the fix, ``_Handler.wanted`` evaluated the condition on ``read_record`` values: a dict for a raw map,
    so ``r.flags.active`` fails and the record is left "cannot read the stream record".
    """
    model = bind_model(Flagged, MOTO)
    item = {"pk": {"S": "a"}, "email": {"S": "a@x.io"}, "flags": {"M": {"active": {"BOOL": True}}}}
    _put_raw(model, item)
    report = streams.handle(model, _stream_insert(model, item))
    assert report.left == ()
    assert report.created == 1
    assert model.unique_owner(email="a@x.io") == ("a",)


# --- 1/2. JSONAttribute text as another writer stores it -------------------------------------


def _compact_json_record(model: type[JsonConditioned]) -> dict[str, Any]:
    """A record whose JSON was written compactly by another writer (valid JSON, PynamoDB loads it)."""
    item = {"pk": {"S": "j1"}, "email": {"S": "j@x.io"}, "meta": {"S": '{"active":true}'}}
    _put_raw(model, item)
    assert model.get("j1").meta == {"active": True}
    return item


def test_repair__json_condition_attribute_written_compactly__creates_missing_lock(moto_backend: None) -> None:
    """repair creates the lock of a record whose JSON text is not ``json.dumps``' spelling.

    The audit reports the missing lock; repair's ConditionCheck (``Fixer.record_check`` →
    ``planner.cas``) compares the attribute with the value re-serialized by ``json.dumps``
    (``{"active": true}``), which the stored text ``{"active":true}`` never equals: before the
    fix, it was "skipped" every time, though nothing changed. Repair now reads the stored text.
    """
    model = bind_model(JsonConditioned, MOTO)
    _compact_json_record(model)
    report = audit(model)
    assert _facts(report) == [("missing", "UNIQ#JSON_EMAIL#j@x.io")]
    fixed = repair(model, report, apply=True)
    assert [f.outcome for f in fixed.fixes] == ["applied"]
    assert model.unique_owner(email="j@x.io") == ("j1",)


def test_repair__json_changed_since_the_audit__skipped(moto_backend: None) -> None:
    """Repair reads a JSON attribute's stored text only to check the value audited: a changed value is skipped.

    The audit saw the record active (its lock missing); another writer then made it inactive,
    spelled compactly again. Taking the text read now for the check would pass it and give an
    inactive record a lock: the text is taken only while its value is still the one audited.
    """
    model = bind_model(JsonConditioned, MOTO)
    _compact_json_record(model)
    report = audit(model)
    _put_raw(model, {"pk": {"S": "j1"}, "email": {"S": "j@x.io"}, "meta": {"S": '{"active":false}'}})
    fixed = repair(model, report, apply=True)
    assert [f.outcome for f in fixed.fixes] == ["skipped"]
    assert model.unique_owner(email="j@x.io") is None


def test_streams__json_condition_attribute_written_compactly__insert_creates_lock(moto_backend: None) -> None:
    """The stream handler's ConditionCheck (``record_check``) checks the JSON text as stored.

    Before the fix, each of its 4 attempts was cancelled by its own check, and the record was left with "the record
    or its locks changed 4 times" though it never changed.
    """
    model = bind_model(JsonConditioned, MOTO)
    item = _compact_json_record(model)
    report = streams.handle(model, _stream_insert(model, item))
    assert report.left == ()
    assert report.created == 1
    assert model.unique_owner(email="j@x.io") == ("j1",)


def test_save__json_condition_attribute_written_compactly__loaded_record_saves(moto_backend: None) -> None:
    """A loaded record whose JSON text another writer spelled compactly saves (PynamoDB's save does).

    The compare-and-swap checks the text as loaded (``Stored.verbatim``), not the value
    re-serialized by ``json.dumps``, which the stored text never equals.
    """
    model = bind_model(JsonConditioned, MOTO)
    _compact_json_record(model)
    loaded = model.get("j1")
    loaded.bio = "hello"
    with RequestCounter(model) as counter:
        loaded.save()
    assert counter.operations == ["PutItem"]  # Its compare-and-swap held: no re-plan.
    assert model.get("j1").bio == "hello"


# --- 1/2. attributes stored as NULL ----------------------------------------------------------


def _null_status_record(model: type[Defaulted]) -> dict[str, Any]:
    """A record with ``status`` stored as NULL: PynamoDB loads its default, "live"."""
    item = {"pk": {"S": "n1"}, "email": {"S": "n@x.io"}, "status": {"NULL": True}}
    _put_raw(model, item)
    assert model.get("n1").status == "live"
    return item


def test_repair__null_stored_defaulted_condition_attribute__creates_missing_lock(moto_backend: None) -> None:
    """repair creates the lock of a record whose defaulted condition attribute is stored as NULL.

    The audit takes NULL as the default "live" and reports the missing lock; before the fix,
    repair's check was ``attribute_not_exists(status) OR status = "live"``, false for an attribute
    that exists with a NULL value: the fix was skipped for ever.
    """
    model = bind_model(Defaulted, MOTO)
    _null_status_record(model)
    report = audit(model)
    assert _facts(report) == [("missing", "UNIQ#LIVE_EMAIL#n@x.io")]
    fixed = repair(model, report, apply=True)
    assert [f.outcome for f in fixed.fixes] == ["applied"]
    assert_invariant(model)


def test_repair__null_stored_unique_attribute__other_constraint_lock_created(moto_backend: None) -> None:
    """A NULL-stored unique attribute (no value) must not block the repair of the record's other lock.

    ``handle`` stored as NULL is no value (None), which ``compare_and_swap`` checked as
    ``attribute_not_exists(handle)``: false for the stored NULL, so the email lock is never created.
    """
    model = bind_model(Defaulted, MOTO)
    _put_raw(model, {"pk": {"S": "n2"}, "email": {"S": "m@x.io"}, "handle": {"NULL": True}})
    report = audit(model)
    assert _facts(report) == [("missing", "UNIQ#LIVE_EMAIL#m@x.io")]
    fixed = repair(model, report, apply=True)
    assert [f.outcome for f in fixed.fixes] == ["applied"]
    assert_invariant(model)


def test_streams__null_stored_defaulted_condition_attribute__insert_creates_lock(moto_backend: None) -> None:
    """The stream handler's check accepts NULL where the attribute is expected absent (it left the record)."""
    model = bind_model(Defaulted, MOTO)
    item = _null_status_record(model)
    report = streams.handle(model, _stream_insert(model, item))
    assert report.left == ()
    assert report.created == 1
    assert_invariant(model)


def test_save__null_stored_unique_attribute__loaded_record_saves(moto_backend: None) -> None:
    """A loaded record whose unique attribute is stored as NULL saves (PynamoDB's save does).

    The snapshot holds None; before the fix, checked as ``attribute_not_exists(handle)``, which the NULL-stored
    attribute fails; the re-read gives None again, so the library raises ConditionFailed.
    """
    model = bind_model(Defaulted, MOTO)
    _put_raw(model, {"pk": {"S": "n3"}, "handle": {"NULL": True}})
    loaded = model.get("n3")
    loaded.bio = "x"
    loaded.save()
    assert model.get("n3").bio == "x"


def test_migrate__null_stored_defaulted_condition_attribute__creates_lock(moto_backend: None) -> None:
    """migrate() creates the current-form lock of a record whose ``status`` is stored as NULL.

    ``_Migrator.records`` guards its ConditionCheck with ``Guard(planner, audited)``: before the fix, for the
    audited default "live" that is ``attribute_not_exists(status) OR status = "live"``, false for
    the stored NULL, so the record is counted as changed since the scan on every run.
    """
    model = bind_model(Defaulted, MOTO)
    _null_status_record(model)
    report = migrate(model, apply=True)
    assert [f.outcome for f in report.fixes] == ["applied"]
    assert model.unique_owner(email="n@x.io") == ("n1",)


def test_transact__null_stored_unique_attribute__loaded_record_saves(moto_backend: None) -> None:
    """``tx.save(loaded)`` of a record whose unique attribute is stored as NULL commits (PynamoDB's does).

    Before the fix, the guard checked ``attribute_not_exists(handle)``; the cancellation was read as
    the caller's own condition failing (``_record_problem``: the re-read looks the same), and
    TransactWriteError is raised for a transaction with no caller condition.
    """
    model = bind_model(Defaulted, MOTO)
    _put_raw(model, {"pk": {"S": "n4"}, "handle": {"NULL": True}})
    loaded = model.get("n4")
    loaded.bio = "x"
    with TransactWrite() as tx:
        tx.save(loaded)
    assert model.get("n4").bio == "x"


# --- a defaulted attribute the item lacks ----------------------------------------------------


def test_streams__defaulted_condition_attribute_absent__insert_creates_lock(moto_backend: None) -> None:
    """An INSERT image without ``status`` (loads as "live") gets its lock; the check accepts it absent."""
    model = bind_model(Defaulted, MOTO)
    item = {"pk": {"S": "d1"}, "email": {"S": "d@x.io"}}
    _put_raw(model, item)
    report = streams.handle(model, _stream_insert(model, item))
    assert (report.created, report.left) == (1, ())
    assert_invariant(model)


@pytest.mark.parametrize("engine", ["memory", "duckdb"])
def test_audit__defaulted_condition_attribute_absent__engines_agree(moto_backend: None, engine: str) -> None:
    """Both engines expect the lock of a record lacking its defaulted condition attribute."""
    model = bind_model(Defaulted, MOTO)
    _put_raw(model, {"pk": {"S": "d1"}, "email": {"S": "d@x.io"}})
    model(pk="d2", email="e@x.io", status="gone").save()
    report = audit(model, engine=engine)  # type: ignore[arg-type]
    assert _facts(report) == [("missing", "UNIQ#LIVE_EMAIL#d@x.io")]


# --- 3. TransactWrite ------------------------------------------------------------------------


def test_transact__instance_changed_after_save_before_commit__locks_match_record(moto_backend: None) -> None:
    """A change to an instance between ``tx.save(x)`` and the commit must not leave the record unlocked.

    PynamoDB's ``TransactWrite.save`` serializes the item when called. Before the fix, the library planned the locks
    from the values copied at ``tx.save`` (``desired = context.values(model)``) but builds the
    record's Put at commit (``_materialize`` → ``record_kwargs``): the record is written with the
    new value while the lock is taken for the old one.
    """
    model = bind_model(Contact, MOTO)
    record = model(pk="t1", email="old@x.io")
    with TransactWrite() as tx:
        tx.save(record)
        record.email = "new@x.io"
    assert_invariant(model)


def test_transact__versioned_save__local_version_bumped(moto_backend: None) -> None:
    """A unique versioned record saved in a TransactWrite gets its local version, as PynamoDB's does."""
    model = bind_model(Versioned, MOTO)
    record = model(pk="v1", email="v@x.io")
    with TransactWrite() as tx:
        tx.save(record)
    assert record.version == 1
    assert model.get("v1").version == 1
    record.bio = "again"
    record.save()
    assert model.get("v1").version == 2
    assert_invariant(model)
