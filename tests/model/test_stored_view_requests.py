"""The stored-view fixes' requests: the believed-gone delete, stored texts read once, explain of an empty set.

From a review: each test says what it checks and why a failure is a bug; ``test_probe_*`` tests pin behaviour the
review checked and found right.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from _backends import REGION, Backend, RequestCounter, bind_model, unique_table_name
from _invariant import assert_invariant
from pynamodb.attributes import DiscriminatorAttribute, JSONAttribute, UnicodeAttribute, UnicodeSetAttribute
from pynamodb.models import Model

from pynamodb_unique import (
    UniqueAttribute,
    UniqueConstraint,
    UniqueMixin,
    audit,
    backfill,
    explain,
    migrate,
    repair,
    streams,
)
from pynamodb_unique._core.keys import LOCK_PREFIX
from pynamodb_unique._model.context import ModelContext
from pynamodb_unique._ops.migrate import complete

MOTO = Backend("moto", None)


# --- models ----------------------------------------------------------------------------------


class PetR7(UniqueMixin, Model):
    """A polymorphic family: every pet has a unique name; cats also a unique chip."""

    class Meta:
        table_name = "review-seventh-pets"
        region = "us-east-1"

    pk = UnicodeAttribute(hash_key=True)
    kind = DiscriminatorAttribute()
    name = UniqueAttribute(UnicodeAttribute(null=True))
    note = UnicodeAttribute(null=True)


class DogR7(PetR7, discriminator="dog"):
    pass


class CatR7(PetR7, discriminator="cat"):
    chip = UniqueAttribute(UnicodeAttribute(null=True))


def _doc_on(key: str) -> Any:
    return lambda r: bool(r.doc and r.doc.get(key))


class MultiDocR7(UniqueMixin, Model):
    """Three partial constraints reading one JSONAttribute: a record misses three locks at once."""

    class Meta:
        table_name = "review-seventh-multidoc"
        region = "us-east-1"
        unique_constraints = [
            UniqueConstraint("a", name="DOC_AR7", condition=_doc_on("on"), condition_attributes=("doc",)),
            UniqueConstraint("b", name="DOC_BR7", condition=_doc_on("on"), condition_attributes=("doc",)),
            UniqueConstraint("c", name="DOC_CR7", condition=_doc_on("on"), condition_attributes=("doc",)),
        ]

    pk = UnicodeAttribute(hash_key=True)
    a = UnicodeAttribute(null=True)
    b = UnicodeAttribute(null=True)
    c = UnicodeAttribute(null=True)
    doc = JSONAttribute(null=True)


class TagsR7(UniqueMixin, Model):
    """A partial constraint reading a string set with a fixed default {"vip"} (an empty set loads as it)."""

    class Meta:
        table_name = "review-seventh-tags"
        region = "us-east-1"
        unique_constraints = [
            UniqueConstraint(
                "email",
                name="VIP_EMAILR7",
                condition=lambda r: "vip" in (r.tags or ()),
                condition_attributes=("tags",),
            )
        ]

    pk = UnicodeAttribute(hash_key=True)
    email = UnicodeAttribute(null=True)
    tags = UnicodeSetAttribute(null=True, default=frozenset({"vip"}))


class StatusR7(UniqueMixin, Model):
    """A partial constraint whose condition reads a defaulted attribute."""

    class Meta:
        table_name = "review-seventh-status"
        region = "us-east-1"
        unique_constraints = [
            UniqueConstraint(
                "email", name="LIVE_EMAILR7", condition=lambda r: r.status == "live", condition_attributes=("status",)
            )
        ]

    pk = UnicodeAttribute(hash_key=True)
    email = UnicodeAttribute(null=True)
    status = UnicodeAttribute(null=True, default="live")


# --- helpers ---------------------------------------------------------------------------------


def _client(model: type[Model]) -> Any:
    return model._get_connection().connection.client


def _put_raw(model: type[Model], item: dict[str, Any]) -> None:
    """Write an item behind the library's back (another writer)."""
    _client(model).put_item(TableName=model.Meta.table_name, Item=item)


def _lock_items(model: type[Model]) -> list[dict[str, Any]]:
    items = _client(model).scan(TableName=model.Meta.table_name, ConsistentRead=True)["Items"]
    return [i for i in items if any(isinstance(v.get("S"), str) and v["S"].startswith(LOCK_PREFIX) for v in i.values())]


def _drop_locks(model: type[Model]) -> None:
    client = _client(model)
    schema = client.describe_table(TableName=model.Meta.table_name)["Table"]["KeySchema"]
    for item in _lock_items(model):
        client.delete_item(
            TableName=model.Meta.table_name, Key={k["AttributeName"]: item[k["AttributeName"]] for k in schema}
        )


def _insert_event(model: type[Model], item: dict[str, Any]) -> dict[str, Any]:
    arn = f"arn:aws:dynamodb:{REGION}:123456789012:table/{model.Meta.table_name}/stream/2024"
    record = {
        "eventID": "1",
        "eventName": "INSERT",
        "eventSourceARN": arn,
        "dynamodb": {"Keys": {"pk": item["pk"]}, "NewImage": item},
    }
    return {"Records": [record]}


# --- the believed-gone delete of a polymorphic record -----------------------------------------


def test_delete__believed_gone__polymorphic_record_recreated_without_values__one_request(moto_backend: None) -> None:
    """A believed-gone Dog delete of a Dog recreated with no unique value must still be one DeleteItem.

    ``d`` is saved and deleted (it remembers "nothing stored"); another instance saves a Dog under
    the key with ``name=None``: an item holding no lock. Before the fix, every polymorphic planner's
    believed-gone guard was "gone" alone: the delete fails its
    condition, re-reads (or takes ALL_OLD) and sends a second DeleteItem. Before 26f7f41 this was one
    request, and PynamoDB's delete is one request; "gone, or of my class with every unique attribute
    absent" holds no lock either and keeps it at one.
    """
    PetR7.create_table(wait=True, billing_mode="PAY_PER_REQUEST")
    d = DogR7(pk="a")
    d.save()
    d.delete()
    DogR7(pk="a", note="again").save()
    with RequestCounter(DogR7) as counter:
        d.delete()
    assert list(PetR7.scan(consistent_read=True)) == []
    assert counter.count() == 1, counter.operations


def test_delete__believed_gone__polymorphic_record_recreated_without_values__succeeds(moto_backend: None) -> None:
    """The same delete succeeds (PynamoDB's delete of an existing record does) and leaves the invariant."""
    PetR7.create_table(wait=True, billing_mode="PAY_PER_REQUEST")
    d = DogR7(pk="b")
    d.save()
    d.delete()
    CatR7(pk="b", note="again").save()
    d.delete()
    assert list(PetR7.scan(consistent_read=True)) == []
    assert_invariant(PetR7)


# --- Fixer._texts: read once per record, with backfill workers --------------------------------


@pytest.mark.integration
def test_backfill__workers__stored_texts_read_once_per_record(dynoxide_endpoint: str, monkeypatch: Any) -> None:
    """backfill(segments=3): a record missing three locks has its stored texts read once, as ``_stored_texts`` says.

    Before the fix, ``Fixer._stored_texts`` checked ``(model, key) not in self._texts`` then read, with no lock: the
    three fixes of one record run on three workers, all miss the cache and each sends its own
    consistent GetItem (three reads billed where one was promised). Guard the cache with a lock
    (or a per-key future) so concurrent fixes of one record share a read.
    """
    model = bind_model(MultiDocR7, Backend("dynoxide", dynoxide_endpoint))
    _put_raw(model, {"pk": {"S": "r"}, "a": {"S": "a"}, "b": {"S": "b"}, "c": {"S": "c"}, "doc": {"S": '{ "on": 1 }'}})
    report = audit(model)
    assert len(report.problems) == 3
    calls: list[Any] = []
    original = ModelContext.stored_texts
    guard = threading.Lock()

    def counted(self: ModelContext, owner: Any, values: Any) -> Any:
        with guard:
            calls.append(owner)
        time.sleep(0.2)  # A slow read: the other workers ask meanwhile.
        return original(self, owner, values)

    monkeypatch.setattr(ModelContext, "stored_texts", counted)
    done = backfill(model, report, segments=3)
    assert sorted(f.outcome for f in done.fixes) == ["applied"] * 3
    assert len(calls) == 1, calls


# --- a repair whose record is gone between the audit and the fix ------------------------------


def test_repair__record_gone_since_audit__skipped_no_orphan(moto_backend: None) -> None:
    """A record with a JSON text deleted after the audit: stored_texts finds none, its fix is skipped."""
    model = bind_model(MultiDocR7, MOTO)
    _put_raw(model, {"pk": {"S": "g"}, "a": {"S": "a"}, "doc": {"S": '{ "on": 1 }'}})
    report = audit(model)
    _client(model).delete_item(TableName=model.Meta.table_name, Key={"pk": {"S": "g"}})
    done = repair(model, report, apply=True)
    assert [f.outcome for f in done.fixes] == ["skipped"]
    assert_invariant(model)


def test_migrate__segments__record_gone_since_audit__skipped(moto_backend: None) -> None:
    """migrate(segments=2): a deleted record's lock is skipped, the others created; all texts checked as stored."""
    model = bind_model(MultiDocR7, MOTO)
    for pk in ("m1", "m2", "m3"):
        _put_raw(model, {"pk": {"S": pk}, "a": {"S": pk}, "doc": {"S": '{ "on" : 1 }'}})
    report = audit(model, segments=2)
    _client(model).delete_item(TableName=model.Meta.table_name, Key={"pk": {"S": "m2"}})
    done = complete(model, report, apply=True, workers=1)
    outcomes = sorted(f.outcome for f in done.fixes)
    assert outcomes == ["applied", "applied", "skipped"]
    assert_invariant(model)
    again = migrate(model, apply=True, segments=2)
    assert again.done


# --- streams use Fixer only to send ----------------------------------------------------------


def test_streams__json_record__no_get_item(moto_backend: None) -> None:
    """streams.handle builds its own checks from a BatchGetItem: Fixer's default read=True costs no GetItem."""
    model = bind_model(MultiDocR7, MOTO)
    item = {"pk": {"S": "s"}, "a": {"S": "sa"}, "doc": {"S": '{ "on" : 1 }'}}
    _put_raw(model, item)
    with RequestCounter(model) as counter:
        report = streams.handle(model, _insert_event(model, item))
    assert report.created == 1
    assert report.left == ()
    assert counter.count("GetItem") == 0, counter.operations
    assert_invariant(model)


# --- as_loaded: an empty set reads as the fixed default too ------------------------------------


def test_explain__stored_empty_set_with_fixed_default__delete_releases_the_lock(moto_backend: None) -> None:
    """``explain(stored={..., "tags": set()})`` of a delete releases the email lock the record holds.

    A record saved with ``tags=set()`` stores no ``tags``, loads as {"vip"} and (``values()``
    maps an empty set to the fixed default) holds its email lock; the real delete releases it.
    Before the fix, ``Planner.as_loaded`` (behind ``explain``) mapped only None to the
    default: the empty set stays, the condition fails, and the explained delete releases nothing,
    unlike ``stored={"tags": None}``, the same stored item. ``as_loaded`` should map an empty set too.
    """
    model = bind_model(TagsR7, MOTO)
    model(pk="a", email="e@x.io", tags=set()).save()
    assert_invariant(model)
    with_none = explain(model(pk="a"), "delete", stored={"email": "e@x.io", "tags": None})
    with_empty = explain(model(pk="a"), "delete", stored={"email": "e@x.io", "tags": set()})
    assert "VIP_EMAILR7" in str(with_none)
    assert "'SS': None" not in str(with_empty)  # Now: a DeleteItem comparing tags with a malformed {"SS": None}.
    assert str(with_empty) == str(with_none)


# --- unique_owner with a partial constraint reading a defaulted attribute ----------------------


def test_unique_owner__partial_condition_reads_defaulted_attribute(moto_backend: None) -> None:
    """A live record (status defaulted) is named; the value of a record whose condition fails is free."""
    model = bind_model(StatusR7, MOTO)
    model(pk="a", email="a@x.io", status=None).save()
    model(pk="b", email="b@x.io", status="gone").save()
    assert_invariant(model)
    assert model.unique_owner(email="a@x.io") == ("a",)
    assert model.unique_owner(email="b@x.io") is None


@pytest.mark.parametrize("status", [None, "live"])
def test_delete__believed_gone__defaulted_condition__releases(moto_backend: None, status: str | None) -> None:
    """A believed-gone delete of a record recreated live (status absent or stored) releases its lock."""
    model = bind_model(StatusR7, MOTO, table_name=unique_table_name("review-seventh-status"))
    a = model(pk="a", email="a@x.io")
    a.save()
    a.delete()
    model(pk="a", email="a@x.io", status=status).save()
    a.delete()
    assert_invariant(model)
    model(pk="b", email="a@x.io").save()
