"""``nulls_distinct=False``: a missing part is a value of its own, as PostgreSQL's NULLS NOT DISTINCT.

Every writer and reader of lock keys agrees on it: save, update, delete, ``TransactWrite``,
``bulk_save``, the lookups, audit (live and from an export), repair, backfill and the Streams
handler.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from _backends import Backend, RequestCounter, bind_model, unique_table_name
from _damage import client, lock_table_name
from _export import export_tables
from _invariant import actual_locks, assert_invariant, raw_items
from pynamodb.attributes import UnicodeAttribute
from pynamodb.models import Model

from pynamodb_unique import (
    MissingLock,
    TransactWrite,
    UniqueAttribute,
    UniqueConfigError,
    UniqueConstraint,
    UniqueMixin,
    UniqueViolation,
    audit,
    backfill,
    bulk_save,
    inspect,
    migrate,
    repair,
)
from pynamodb_unique.streams import handle

#: The issue asks each feature on moto and on the real server (dynoxide).
pytestmark = pytest.mark.backends("moto", "dynoxide")

HOME = "UNIQ#TENANT_SLUG#%0#home"


class Page(UniqueMixin, Model):
    """A page's slug is unique per tenant, and among pages of no tenant."""

    class Meta:
        table_name = "pages"
        region = "us-east-1"
        unique_constraints = [UniqueConstraint("tenant", "slug", nulls_distinct=False)]

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    sk = UnicodeAttribute(range_key=True, attr_name="SK", default="PAGE")
    tenant = UnicodeAttribute(null=True)
    slug = UnicodeAttribute(null=True)


class LoosePage(UniqueMixin, Model):
    """The same pair with the default: a page of no tenant takes no lock."""

    class Meta:
        table_name = "loose-pages"
        region = "us-east-1"
        unique_constraints = [UniqueConstraint("tenant", "slug")]

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    sk = UnicodeAttribute(range_key=True, attr_name="SK", default="PAGE")
    tenant = UnicodeAttribute(null=True)
    slug = UnicodeAttribute(null=True)


class Seat(UniqueMixin, Model):
    """At most one seat without a holder: one attribute, its absence a value."""

    class Meta:
        table_name = "seats"
        region = "us-east-1"

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    sk = UnicodeAttribute(range_key=True, attr_name="SK", default="SEAT")
    holder = UniqueAttribute(UnicodeAttribute(null=True), nulls_distinct=False)
    title = UnicodeAttribute(null=True)


def _pk() -> str:
    return f"PAGE#{uuid.uuid4().hex[:8]}"


def _raw_put(model: type[Model], pk: str, sk: str, **values: str) -> dict[str, Any]:
    """Put a record behind the library's back (no locks); return the item."""
    item = {"PK": {"S": pk}, "SK": {"S": sk}, **{k: {"S": v} for k, v in values.items()}}
    client(model).put_item(TableName=model.Meta.table_name, Item=item)
    return item


def test_save__second_record_with_the_same_missing_part__violation(backend: Backend) -> None:
    """Two pages (tenant=None, slug="home"): the second is refused, naming the first."""
    pages = bind_model(Page, backend)
    first = pages(pk=_pk(), slug="home")
    first.save()
    with pytest.raises(UniqueViolation) as caught:
        pages(pk=_pk(), slug="home").save()
    (violation,) = caught.value.violations
    assert (violation.constraint, violation.values, violation.owner) == (
        "TENANT_SLUG",
        (None, "home"),
        (first.pk, "PAGE"),
    )
    assert actual_locks(pages) == {HOME: (first.pk, "PAGE")}
    assert_invariant(pages)


def test_save__a_missing_part_and_real_values_are_different_values(backend: Backend) -> None:
    """(None, home), (acme, home), (None, about) and the string "%0" as tenant all coexist."""
    pages = bind_model(Page, backend)
    for tenant, slug in ((None, "home"), ("acme", "home"), (None, "about"), ("%0", "home"), ("home", None)):
        pages(pk=_pk(), tenant=tenant, slug=slug).save()
    assert set(actual_locks(pages)) == {
        HOME,
        "UNIQ#TENANT_SLUG#acme#home",
        "UNIQ#TENANT_SLUG#%0#about",
        "UNIQ#TENANT_SLUG#%250#home",
        "UNIQ#TENANT_SLUG#home#%0",
    }
    assert_invariant(pages)


def test_save__every_part_missing_is_one_value(backend: Backend) -> None:
    """As PostgreSQL's NULLS NOT DISTINCT: one record may lack every part, a second may not."""
    pages = bind_model(Page, backend)
    pages(pk=_pk()).save()
    with pytest.raises(UniqueViolation):
        pages(pk=_pk()).save()
    assert set(actual_locks(pages)) == {"UNIQ#TENANT_SLUG#%0#%0"}


def test_unique_attribute__at_most_one_record_without_the_value(backend: Backend) -> None:
    """``UniqueAttribute(..., nulls_distinct=False)``: one seat may have no holder; a second may not."""
    seats = bind_model(Seat, backend)
    empty = seats(pk="SEAT#1")
    empty.save()
    with pytest.raises(UniqueViolation):
        seats(pk="SEAT#2").save()
    seats(pk="SEAT#2", holder="ada").save()
    empty.update(actions=[Seat.holder.set("grace")])  # The empty seat's lock moves to "grace".
    seats(pk="SEAT#3").save()
    assert actual_locks(seats) == {
        "UNIQ#HOLDER#ada": ("SEAT#2", "SEAT"),
        "UNIQ#HOLDER#grace": ("SEAT#1", "SEAT"),
        "UNIQ#HOLDER#%0": ("SEAT#3", "SEAT"),
    }
    assert_invariant(seats)


def test_update__that_creates_the_record__takes_the_missing_value_lock(backend: Backend) -> None:
    """An update of another attribute on a key with no record creates one without a holder: it takes %0."""
    seats = bind_model(Seat, backend)
    seats(pk="SEAT#1").update(actions=[Seat.title.set("aisle")])
    assert actual_locks(seats) == {"UNIQ#HOLDER#%0": ("SEAT#1", "SEAT")}
    with pytest.raises(UniqueViolation):
        seats(pk="SEAT#2").update(actions=[Seat.title.set("window")])
    assert [i["PK"]["S"] for i in raw_items(seats) if "title" in i] == ["SEAT#1"]
    assert audit(seats).clean


def test_update__of_another_attribute_of_a_loaded_record__one_request(backend: Backend) -> None:
    """A loaded record's update of an attribute no constraint reads moves no lock: one UpdateItem."""
    seats = bind_model(Seat, backend)
    seats(pk="SEAT#1").save()
    loaded = seats.get("SEAT#1", "SEAT")
    with RequestCounter(seats) as counter:
        loaded.update(actions=[Seat.title.set("aisle")])
    assert counter.operations == ["UpdateItem"]
    assert_invariant(seats)


def test_save_and_update__a_part_from_none_to_a_value_moves_the_lock(backend: Backend) -> None:
    """save() and update() that fill or remove the missing part move the lock in the same request."""
    pages = bind_model(Page, backend)
    first = pages(pk=_pk(), slug="home")
    first.save()
    first.tenant = "acme"
    first.save()
    assert actual_locks(pages) == {"UNIQ#TENANT_SLUG#acme#home": (first.pk, "PAGE")}
    second = pages(pk=_pk(), slug="home")
    second.save()  # Free again.
    second.update(actions=[Page.tenant.set("beta")])
    third = pages(pk=_pk(), tenant="gamma", slug="home")
    third.save()
    third.update(actions=[Page.tenant.remove()])  # Back to (None, home), free since second moved.
    assert actual_locks(pages)[HOME] == (third.pk, "PAGE")
    with pytest.raises(UniqueViolation):
        second.update(actions=[Page.tenant.remove()])
    assert pages.get(second.pk, "PAGE").tenant == "beta"
    assert_invariant(pages)


def test_delete__releases_the_missing_part_lock(backend: Backend) -> None:
    """Deleting the holder of (None, home) frees it; a record loaded fresh deletes its lock too."""
    pages = bind_model(Page, backend)
    first = pages(pk=_pk(), slug="home")
    first.save()
    first.delete()
    assert actual_locks(pages) == {}
    second = pages(pk=_pk(), slug="home")
    second.save()
    pages(pk=second.pk).delete()  # Unknown stored state: the guess (no tenant, no slug) is re-planned.
    assert actual_locks(pages) == {}
    pages(pk=_pk(), slug="home").save()
    assert_invariant(pages)


def test_transact_write_and_bulk_save__the_missing_part_is_a_value(backend: Backend) -> None:
    """TransactWrite and bulk_save take the same lock: a second (None, home) is a violation in each."""
    pages = bind_model(Page, backend)
    first, second = pages(pk=_pk(), slug="home"), pages(pk=_pk(), slug="home")
    result = bulk_save([first, second])
    assert list(result.saved) == [first]
    assert [(v.instance, v.owner) for v in result.violations] == [(second, (first.pk, "PAGE"))]
    with TransactWrite() as tx:
        tx.save(pages(pk=_pk(), slug="about"))
    with pytest.raises(UniqueViolation), TransactWrite() as tx:
        tx.save(pages(pk=_pk(), slug="about"))
    assert set(actual_locks(pages)) == {HOME, "UNIQ#TENANT_SLUG#%0#about"}
    assert_invariant(pages)


def test_lookups__unique_owner_inspect_and_validate_unique(backend: Backend) -> None:
    """unique_owner, inspect and validate_unique read the lock of (None, home) as writes take it."""
    pages = bind_model(Page, backend)
    first = pages(pk=_pk(), slug="home")
    first.save()
    assert pages.unique_owner(tenant=None, slug="home") == (first.pk, "PAGE")
    assert pages.unique_owner(tenant="acme", slug="home") is None
    info = inspect(pages, tenant=None, slug="home")
    assert (info.lock_key, info.owner, info.owner_holds) == (HOME, (first.pk, "PAGE"), True)
    first.validate_unique()  # Its own value is free to it.
    with pytest.raises(UniqueViolation):
        pages(pk=_pk(), slug="home").validate_unique()


def test_default__a_missing_part_takes_no_lock(backend: Backend) -> None:
    """Without nulls_distinct=False, any number of (None, home) pages exist and none holds a lock."""
    pages = bind_model(LoosePage, backend)
    pages(pk=_pk(), slug="home").save()
    pages(pk=_pk(), slug="home").save()
    assert actual_locks(pages) == {}
    assert pages.unique_owner(tenant=None, slug="home") is None
    assert audit(pages).clean


def test_audit__clean_after_writes_and_finds_a_raw_records_missing_lock(backend: Backend, tmp_path: Path) -> None:
    """A raw boto3 (None, home) record lacks its lock: the live and the export audit say so; backfill fixes it."""
    pages = bind_model(Page, backend)
    pages(pk=_pk(), tenant="acme", slug="home").save()
    pages(pk=_pk(), slug="about").save()
    assert audit(pages).clean
    bypass = _pk()
    _raw_put(pages, bypass, "PAGE", slug="home")
    report = audit(pages)
    assert [(type(p), p.lock_key, p.values, p.holders) for p in report.problems] == [
        (MissingLock, HOME, (None, "home"), ((bypass, "PAGE"),))
    ]
    exports = export_tables(client(pages), [pages.Meta.table_name, lock_table_name(pages)], tmp_path)
    assert audit(pages, export=next(iter(exports.values()))) == report
    backfill(pages, report)
    assert actual_locks(pages)[HOME] == (bypass, "PAGE")
    assert audit(pages).clean
    assert_invariant(pages)


def test_audit__two_raw_records_with_the_missing_part_are_a_duplicate(backend: Backend) -> None:
    """Two bypassing writes of (None, home) hold one value: a duplicate, left for a person."""
    pages = bind_model(Page, backend)
    _raw_put(pages, "PAGE#1", "PAGE", slug="home")
    _raw_put(pages, "PAGE#2", "PAGE", slug="home")
    report = audit(pages)
    assert [(p.kind, p.lock_key, sorted(p.holders)) for p in report.problems] == [
        ("duplicate", HOME, [("PAGE#1", "PAGE"), ("PAGE#2", "PAGE")])
    ]


def _deploy(backend: Backend, table: str, *, nulls_distinct: bool) -> type[Any]:
    """The page model as one deploy declares it, on ``table``; it replaces the previous deploy's in the registry."""
    meta = type(
        "Meta",
        (),
        {
            "table_name": table,
            "region": "us-east-1",
            "host": backend.host,
            "unique_constraints": [UniqueConstraint("tenant", "slug", nulls_distinct=nulls_distinct)],
        },
    )
    namespace = {
        "__module__": __name__,
        "__qualname__": "DeployedPage",
        "Meta": meta,
        "pk": UnicodeAttribute(hash_key=True, attr_name="PK"),
        "sk": UnicodeAttribute(range_key=True, attr_name="SK", default="PAGE"),
        "tenant": UnicodeAttribute(null=True),
        "slug": UnicodeAttribute(null=True),
    }
    return type("DeployedPage", (UniqueMixin, Model), namespace)


def test_turning_nulls_distinct_on_and_off__migrate_then_repair(backend: Backend) -> None:
    """Turning it on is adding locks (migrate, as for a new constraint); turning it off leaves orphans (repair)."""
    table = unique_table_name("deployed")
    loose = _deploy(backend, table, nulls_distinct=True)
    loose.create_table(wait=True, billing_mode="PAY_PER_REQUEST")
    loose(pk="PAGE#1", slug="home").save()
    loose(pk="PAGE#2", tenant="acme", slug="home").save()
    loose(pk="PAGE#3", slug="about").save()
    loose(pk="PAGE#4", slug="about").save()

    strict = _deploy(backend, table, nulls_distinct=False)
    report = migrate(strict, apply=True)
    assert report.created == 1
    assert [(c.lock_key, sorted(c.records)) for c in report.conflicts] == [
        ("UNIQ#TENANT_SLUG#%0#about", [("PAGE#3", "PAGE"), ("PAGE#4", "PAGE")])
    ]
    strict.get("PAGE#4", "PAGE").update(actions=[strict.tenant.set("acme")])  # A person resolves the conflict.
    assert migrate(strict, apply=True).done
    assert audit(strict).clean
    with pytest.raises(UniqueViolation):
        strict(pk="PAGE#9", slug="home").save()

    loose = _deploy(backend, table, nulls_distinct=True)  # Turned off again: the %0 lock is no record's value.
    back = audit(loose)
    assert sorted((type(p).__name__, p.lock_key) for p in back.problems) == [
        ("OrphanedLock", "UNIQ#TENANT_SLUG#%0#about"),
        ("OrphanedLock", HOME),
    ]
    repair(loose, back, apply=True)
    assert audit(loose).clean
    assert set(actual_locks(loose)) == {"UNIQ#TENANT_SLUG#acme#home", "UNIQ#TENANT_SLUG#acme#about"}


def test_streams__a_raw_insert_gets_its_missing_part_lock(backend: Backend) -> None:
    """The Streams handler creates the %0 lock of a record a bypassing writer put, and releases it on REMOVE."""
    pages = bind_model(Page, backend)
    item = _raw_put(pages, "PAGE#9", "PAGE", slug="home")
    keys = {"PK": item["PK"], "SK": item["SK"]}
    arn = f"arn:aws:dynamodb:us-east-1:123456789012:table/{pages.Meta.table_name}/stream/2026-12-01T00:00:00.000"

    def event(name: str, **images: dict[str, Any]) -> dict[str, Any]:
        stream = {"Keys": keys, "StreamViewType": "NEW_AND_OLD_IMAGES", **images}
        return {
            "Records": [{"eventID": uuid.uuid4().hex, "eventName": name, "dynamodb": stream, "eventSourceARN": arn}]
        }

    report = handle(pages, event("INSERT", NewImage=item))
    assert (report.created, report.left) == (1, ())
    assert actual_locks(pages) == {HOME: ("PAGE#9", "PAGE")}
    client(pages).delete_item(TableName=pages.Meta.table_name, Key=keys)
    report = handle(pages, event("REMOVE", OldImage=item))
    assert (report.released, report.left) == (1, ())
    assert raw_items(pages) == []


@pytest.mark.parametrize("given", ["no", 0, None])
def test_declaration__nulls_distinct_must_be_a_bool(given: object) -> None:
    """A non-bool ``nulls_distinct`` is refused when the class is defined."""
    with pytest.raises(UniqueConfigError, match="nulls_distinct"):

        class Bad(UniqueMixin, Model):
            class Meta:
                table_name = "bad"
                region = "us-east-1"
                unique_constraints = [UniqueConstraint("a", "b", nulls_distinct=given)]  # type: ignore[arg-type]

            pk = UnicodeAttribute(hash_key=True)
            a = UnicodeAttribute(null=True)
            b = UnicodeAttribute(null=True)


def test_declaration__a_shared_namespace_needs_one_nulls_distinct() -> None:
    """Two models sharing a namespace on purpose must agree on whether a missing value is a value."""

    class Shared(UniqueMixin, Model):
        class Meta:
            table_name = "shared-handles"
            region = "us-east-1"

        pk = UnicodeAttribute(hash_key=True)
        handle = UniqueAttribute(UnicodeAttribute(null=True), name="HANDLE", nulls_distinct=False)

    with pytest.raises(UniqueConfigError, match="same nulls_distinct"):

        class Other(UniqueMixin, Model):
            class Meta:
                table_name = "shared-handles"
                region = "us-east-1"

            pk = UnicodeAttribute(hash_key=True)
            handle = UniqueAttribute(UnicodeAttribute(null=True), name="HANDLE")
