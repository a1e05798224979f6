"""The stored view: what the library takes as stored for a record, and every reader that uses it.

A record's compare-and-swap, the delete guard, the tools (backfill, repair, migrate), the Streams
handler, ``explain`` and ``unique_owner`` read a stored record as PynamoDB loads it: an absent or
``NULL`` attribute holds its fixed default, a callable default gives no value, an empty set is no
value. Where a value's Python form may not give its stored text back (a ``JSONAttribute`` spelled
by another writer, an expiry stored with a fraction of a second, an attribute whose ``__set__``
changes values) the check compares the text as stored, read once per record.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from _backends import REGION, Backend, RequestCounter, bind_model, unique_table_name
from _damage import _context, client
from _invariant import assert_invariant
from _scaffold import put_raw, while_on
from models import Cat, Contact, Defaulted, Dog, JsonConditioned, NullDefaulted, Pet, Tagged
from pynamodb.attributes import JSONAttribute, TTLAttribute, UnicodeAttribute
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
    explain,
    inspect,
    migrate,
    repair,
    streams,
)
from pynamodb_unique._core.plan import Guard, Stored
from pynamodb_unique._model import snapshot
from pynamodb_unique._model.context import ModelContext, context_of
from pynamodb_unique._ops.migrate import complete
from pynamodb_unique._write.requests import guard_condition

# --- Requests: the believed-gone delete, stored texts read once, records gone since the audit ----


MOTO = Backend("moto", None)


# --- models ----------------------------------------------------------------------------------


class MultiDoc(UniqueMixin, Model):
    """Three partial constraints reading one JSONAttribute: a record misses three locks at once."""

    class Meta:
        table_name = "view-multidoc"
        region = "us-east-1"
        unique_constraints = [while_on("DOC_A", "a"), while_on("DOC_B", "b"), while_on("DOC_C", "c")]

    pk = UnicodeAttribute(hash_key=True)
    a = UnicodeAttribute(null=True)
    b = UnicodeAttribute(null=True)
    c = UnicodeAttribute(null=True)
    doc = JSONAttribute(null=True)


# --- helpers ---------------------------------------------------------------------------------


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
    Pet.create_table(wait=True, billing_mode="PAY_PER_REQUEST")
    d = Dog(pk="a")
    d.save()
    d.delete()
    Dog(pk="a", note="again").save()
    with RequestCounter(Dog) as counter:
        d.delete()
    assert list(Pet.scan(consistent_read=True)) == []
    assert counter.count() == 1, counter.operations


def test_delete__believed_gone__polymorphic_record_recreated_without_values__succeeds(moto_backend: None) -> None:
    """The same delete succeeds (PynamoDB's delete of an existing record does) and leaves the invariant."""
    Pet.create_table(wait=True, billing_mode="PAY_PER_REQUEST")
    d = Dog(pk="b")
    d.save()
    d.delete()
    Cat(pk="b", note="again").save()
    d.delete()
    assert list(Pet.scan(consistent_read=True)) == []
    assert_invariant(Pet)


# --- Fixer._texts: read once per record, with backfill workers --------------------------------


@pytest.mark.integration
def test_backfill__workers__stored_texts_read_once_per_record(dynoxide_endpoint: str, monkeypatch: Any) -> None:
    """backfill(segments=3): a record missing three locks has its stored texts read once, as ``_stored_texts`` says.

    Before the fix, ``Fixer._stored_texts`` checked ``(model, key) not in self._texts`` then read, with no lock: the
    three fixes of one record run on three workers, all miss the cache and each sends its own
    consistent GetItem (three reads billed where one was promised). Guard the cache with a lock
    (or a per-key future) so concurrent fixes of one record share a read.
    """
    model = bind_model(MultiDoc, Backend("dynoxide", dynoxide_endpoint))
    put_raw(model, {"pk": {"S": "r"}, "a": {"S": "a"}, "b": {"S": "b"}, "c": {"S": "c"}, "doc": {"S": '{ "on": 1 }'}})
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
    model = bind_model(MultiDoc, MOTO)
    put_raw(model, {"pk": {"S": "g"}, "a": {"S": "a"}, "doc": {"S": '{ "on": 1 }'}})
    report = audit(model)
    client(model).delete_item(TableName=model.Meta.table_name, Key={"pk": {"S": "g"}})
    done = repair(model, report, apply=True)
    assert [f.outcome for f in done.fixes] == ["skipped"]
    assert_invariant(model)


def test_migrate__segments__record_gone_since_audit__skipped(moto_backend: None) -> None:
    """migrate(segments=2): a deleted record's lock is skipped, the others created; all texts checked as stored."""
    model = bind_model(MultiDoc, MOTO)
    for pk in ("m1", "m2", "m3"):
        put_raw(model, {"pk": {"S": pk}, "a": {"S": pk}, "doc": {"S": '{ "on" : 1 }'}})
    report = audit(model, segments=2)
    client(model).delete_item(TableName=model.Meta.table_name, Key={"pk": {"S": "m2"}})
    done = complete(model, report, apply=True, workers=1)
    outcomes = sorted(f.outcome for f in done.fixes)
    assert outcomes == ["applied", "applied", "skipped"]
    assert_invariant(model)
    again = migrate(model, apply=True, segments=2)
    assert again.done


# --- streams use Fixer only to send ----------------------------------------------------------


def test_streams__json_record__no_get_item(moto_backend: None) -> None:
    """streams.handle builds its own checks from a BatchGetItem: Fixer's default read=True costs no GetItem."""
    model = bind_model(MultiDoc, MOTO)
    item = {"pk": {"S": "s"}, "a": {"S": "sa"}, "doc": {"S": '{ "on" : 1 }'}}
    put_raw(model, item)
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
    model = bind_model(Tagged, MOTO)
    model(pk="a", email="e@x.io", tags=set()).save()
    assert_invariant(model)
    with_none = explain(model(pk="a"), "delete", stored={"email": "e@x.io", "tags": None})
    with_empty = explain(model(pk="a"), "delete", stored={"email": "e@x.io", "tags": set()})
    assert "VIP_EMAIL" in str(with_none)
    assert "'SS': None" not in str(with_empty)  # Now: a DeleteItem comparing tags with a malformed {"SS": None}.
    assert str(with_empty) == str(with_none)


# --- unique_owner with a partial constraint reading a defaulted attribute ----------------------


def test_unique_owner__partial_condition_reads_defaulted_attribute(moto_backend: None) -> None:
    """A live record (status defaulted) is named; the value of a record whose condition fails is free."""
    model = bind_model(NullDefaulted, MOTO)
    model(pk="a", email="a@x.io", status=None).save()
    model(pk="b", email="b@x.io", status="gone").save()
    assert_invariant(model)
    assert model.unique_owner(email="a@x.io") == ("a",)
    assert model.unique_owner(email="b@x.io") is None


@pytest.mark.parametrize("status", [None, "live"])
def test_delete__believed_gone__defaulted_condition__releases(moto_backend: None, status: str | None) -> None:
    """A believed-gone delete of a record recreated live (status absent or stored) releases its lock."""
    model = bind_model(NullDefaulted, MOTO, table_name=unique_table_name("view-status"))
    a = model(pk="a", email="a@x.io")
    a.save()
    a.delete()
    model(pk="a", email="a@x.io", status=status).save()
    a.delete()
    assert_invariant(model)
    model(pk="b", email="a@x.io").save()


# --- With migrations, hashed constraints and TTL ----------------------------------------------


class JsonFormer(UniqueMixin, Model):
    """A migrating constraint (former form: not case-folded) whose condition reads a JSONAttribute."""

    class Meta:
        table_name = "view-json-former"
        region = "us-east-1"
        unique_constraints = [
            UniqueConstraint(
                "email",
                name="JF_EMAIL",
                normalize=str.casefold,
                former=Former(normalize=None),
                condition=lambda r: r.meta is not None and bool(r.meta.get("active")),
                condition_attributes=("meta",),
            )
        ]

    pk = UnicodeAttribute(hash_key=True)
    email = UnicodeAttribute(null=True)
    meta = JSONAttribute(null=True)


class HashedTtl(UniqueMixin, Model):
    """A hashed unique email on a record that expires, with a defaulted condition attribute."""

    class Meta:
        table_name = "view-hashed-ttl"
        region = "us-east-1"
        unique_secret = b"view-secret-0123456789ab"
        unique_constraints = [
            UniqueConstraint(
                "email",
                name="H_EMAIL",
                hashed=True,
                condition=lambda r: r.status == "live",
                condition_attributes=("status",),
            )
        ]

    pk = UnicodeAttribute(hash_key=True)
    email = UnicodeAttribute(null=True)
    status = UnicodeAttribute(default="live")
    expires = TTLAttribute(null=True)


def test_save__defaulted_condition_attribute_set_none__lock_taken(moto_backend: None) -> None:
    """A record saved with None in a nullable attribute with a fixed default holds the default's lock.

    PynamoDB stores no attribute for None and loads the item with the default ("live"), so the live
    record satisfies the partial constraint and must hold the email's lock. Before the fix, a put
    was planned from the instance's None, not from the value as loaded: no lock was taken, and a
    duplicate email could be saved.
    """
    model = bind_model(NullDefaulted, MOTO)
    model(pk="a", email="a@x.io", status=None).save()
    assert model.get("a").status == "live"  # What PynamoDB loads.
    assert_invariant(model)


def test_migrate__json_condition_attribute_written_compactly__creates_lock(moto_backend: None) -> None:
    """``migrate(apply=True)`` gives a record whose JSON another writer spelled compactly its current-form lock.

    The loaded record (``meta`` = {"active": true}) satisfies the constraint, so it must hold the
    case-folded lock. Before the fix, ``_migrate`` checked the record with Python values only, so
    its ConditionCheck compared ``meta`` with ``'{"active": true}'`` while the item stores
    ``'{"active":true}'``: the fix was "skipped" on every run and the migration never completed.
    """
    model = bind_model(JsonFormer, MOTO)
    put_raw(model, {"pk": {"S": "m1"}, "email": {"S": "Ann@x.io"}, "meta": {"S": '{"active":true}'}})
    report = migrate(model, apply=True)
    assert report.missing >= 1
    assert [f.outcome for f in report.fixes] == ["applied"] * report.missing, [f.reason for f in report.fixes]
    assert report.done


def test_hashed_ttl__defaulted_attribute_removed_by_other_writer__update_moves_expiry(
    moto_backend: None,
) -> None:
    """A hashed, expiring record whose defaulted attribute another writer removed updates cleanly.

    The loaded snapshot holds the default ("live") for the absent attribute; the update's
    compare-and-swap must accept it absent, and the new expiry must move onto the hashed lock.
    """
    model = bind_model(HashedTtl, MOTO)
    model(pk="h1", email="h@x.io", expires=datetime.now(UTC) + timedelta(days=1)).save()
    client = model._get_connection().connection.client
    client.update_item(
        TableName=model.Meta.table_name,
        Key={"pk": {"S": "h1"}},
        UpdateExpression="REMOVE #s",
        ExpressionAttributeNames={"#s": "status"},
    )
    record = model.get("h1")
    later = datetime.now(UTC) + timedelta(days=5)
    record.update(actions=[model.expires.set(later)])
    assert audit(model).clean
    locks = [i for i in client.scan(TableName=model.Meta.table_name)["Items"] if i["pk"]["S"] != "h1"]
    assert [int(lock["expires"]["N"]) for lock in locks if "expires" in lock] == [int(later.timestamp())]


# --- Stored texts: values whose Python form does not give the stored text back ----------------


FRACTION = "1924992000.5"
WHOLE = datetime.fromtimestamp(1924992000, tz=UTC)


class ExpiringSession(UniqueMixin, Model):
    """A record that expires: its TTL is in the compare-and-swap, and its locks carry it."""

    class Meta:
        table_name = "stored-texts-sessions"
        region = "us-east-1"

    pk = UnicodeAttribute(hash_key=True)
    email = UniqueAttribute(UnicodeAttribute(null=True))
    note = UnicodeAttribute(null=True)
    expires = TTLAttribute(null=True)


class LowerUnicode(UnicodeAttribute):
    """A string attribute that lower-cases what it is set to (PynamoDB's load sets it so too)."""

    def __set__(self, instance: Any, value: Any) -> None:
        super().__set__(instance, value.lower() if isinstance(value, str) else value)


class Lowered(UniqueMixin, Model):
    """A unique string attribute with a ``__set__`` hook; lock keys case-folded (one lock either way)."""

    class Meta:
        table_name = "stored-texts-lower"
        region = "us-east-1"

    pk = UnicodeAttribute(hash_key=True)
    email = UniqueAttribute(LowerUnicode(null=True), normalize=str.casefold)
    note = UnicodeAttribute(null=True)


def _owner(model: Any, email: str) -> Any:
    return model.unique_owner(email=email)


def _insert_event_with_view_type(model: Any, record: dict[str, Any]) -> dict[str, Any]:
    arn = f"arn:aws:dynamodb:us-east-1:123456789012:table/{model.Meta.table_name}/stream/2026-12-01T00:00:00.000"
    stream = {"Keys": {"pk": record["pk"]}, "NewImage": record, "StreamViewType": "NEW_AND_OLD_IMAGES"}
    return {
        "Records": [
            {
                "eventID": "1",
                "eventName": "INSERT",
                "eventSource": "aws:dynamodb",
                "dynamodb": stream,
                "eventSourceARN": arn,
            }
        ]
    }


# --- a string attribute whose __set__ changes the value --------------------------------------


def _lower_stored_by_other_writer(model: Any, *, drop_lock: bool = False) -> None:
    """The library wrote ``a@x.io``; another writer then stored ``A@X.io`` (same case-folded lock)."""
    model(pk="p1", email="a@x.io").save()
    client(model).update_item(
        TableName=model.Meta.table_name,
        Key={"pk": {"S": "p1"}},
        UpdateExpression="SET email = :e",
        ExpressionAttributeValues={":e": {"S": "A@X.io"}},
    )
    if drop_lock:
        client(model).delete_item(TableName=model.Meta.table_name, Key={"pk": {"S": "UNIQ#EMAIL#a@x.io"}})


def test_set_hook_string__save_after_get__writes(moto_backend: None) -> None:
    """A record another writer stored as ``A@X.io``, loaded as ``a@x.io`` (the attribute's
    ``__set__`` lower-cases), saves in one request: its text is checked as stored.

    Before the fix, the compare-and-swap checked ``email = "a@x.io"`` against the stored
    ``A@X.io`` and the save raised ConditionFailed, though the caller gave no condition.
    """
    model: Any = bind_model(Lowered, MOTO)
    _lower_stored_by_other_writer(model)
    loaded = model.get("p1")
    assert loaded.email == "a@x.io"
    loaded.note = "x"
    with RequestCounter(model) as counter:
        loaded.save()
    assert counter.operations == ["PutItem"]
    assert model.get("p1").note == "x"
    assert _owner(model, "a@x.io") == ("p1",)


def test_set_hook_string__backfill_creates_the_missing_lock(moto_backend: None) -> None:
    """Backfill gives such a record its missing lock.

    Before the fix, its check of the record compared the value as loaded with the stored text,
    and the fix was skipped ("the record changed").
    """
    model: Any = bind_model(Lowered, MOTO)
    _lower_stored_by_other_writer(model, drop_lock=True)
    report = backfill(model)
    assert report.clean, report.fixes
    assert audit(model).clean


def test_set_hook_string__streams_creates_the_missing_lock(moto_backend: None) -> None:
    """The Streams handler gives such a record its missing lock.

    Before the fix, the record was left ("the record or its locks changed 4 times").
    """
    model: Any = bind_model(Lowered, MOTO)
    _lower_stored_by_other_writer(model, drop_lock=True)
    record = client(model).get_item(TableName=model.Meta.table_name, Key={"pk": {"S": "p1"}})["Item"]
    report = streams.handle(model, _insert_event_with_view_type(model, record))
    assert report.created == 1, report.left
    assert audit(model).clean


# --- an expiry stored with a fraction, then set through a TransactWrite ------------------------


def _fractional_session(model: Any) -> None:
    model(pk="s1", email="a@x.io", expires=WHOLE).save()
    client(model).update_item(
        TableName=model.Meta.table_name,
        Key={"pk": {"S": "s1"}},
        UpdateExpression="SET expires = :t",
        ExpressionAttributeValues={":t": {"N": FRACTION}},
    )


def test_transact_update_sets_loaded_expiry__next_transaction_writes(moto_backend: None) -> None:
    """A transactional update that sets the expiry to its loaded whole second stores it whole:
    the instance forgets the ``1924992000.5`` text, and its next transaction writes.

    Before the fix, the snapshot kept the text, since the value had not changed, and the next
    TransactWrite raised StaleWrite though nobody else wrote.
    """
    model: Any = bind_model(ExpiringSession, MOTO)
    _fractional_session(model)
    loaded = model.get("s1")
    with TransactWrite() as tx:
        tx.update(loaded, actions=[model.email.set("b@x.io"), model.expires.set(loaded.expires)])
    known = snapshot.known(_context(model), loaded)
    assert known is not None
    assert known.verbatim in (None, {}) or known.verbatim.get("expires") == {"N": "1924992000"}
    with TransactWrite() as tx:
        tx.update(loaded, actions=[model.email.set("c@x.io")])
    assert _owner(model, "c@x.io") == ("s1",)
    assert _owner(model, "b@x.io") is None


def test_transact_update_sets_loaded_expiry__next_save_is_one_request(moto_backend: None) -> None:
    """The same, then a save: one TransactWriteItems (before the fix, two: a re-plan)."""
    model: Any = bind_model(ExpiringSession, MOTO)
    _fractional_session(model)
    loaded = model.get("s1")
    with TransactWrite() as tx:
        tx.update(loaded, actions=[model.email.set("b@x.io"), model.expires.set(loaded.expires)])
    loaded.email = "c@x.io"
    with RequestCounter(model) as counter:
        loaded.save()
    assert counter.operations == ["TransactWriteItems"]
    assert _owner(model, "c@x.io") == ("s1",)


# --- an expiry stored with a fraction, end to end ---------------------------------------------


def test_fractional_expiry__update_save_delete_and_tools(moto_backend: None) -> None:
    """A fractional expiry: update, save and delete write in one transaction each; repair, migrate
    and the Streams handler give a missing lock back, carrying the record's whole-second expiry."""
    model: Any = bind_model(ExpiringSession, MOTO)
    _fractional_session(model)
    loaded = model.get("s1")
    with RequestCounter(model) as counter:
        loaded.update(actions=[model.email.set("b@x.io")])
    assert counter.operations == ["TransactWriteItems", "GetItem"]  # The transactional update's read-back.
    loaded.email = "c@x.io"
    with RequestCounter(model) as counter:
        loaded.save()
    assert counter.operations == ["TransactWriteItems"]
    assert _owner(model, "c@x.io") == ("s1",)

    lock = {"pk": {"S": "UNIQ#EMAIL#c@x.io"}}
    client(model).update_item(
        TableName=model.Meta.table_name,
        Key={"pk": {"S": "s1"}},
        UpdateExpression="SET expires = :t",
        ExpressionAttributeValues={":t": {"N": FRACTION}},
    )
    for fix in (lambda: repair(model, apply=True), lambda: migrate(model, apply=True)):
        client(model).delete_item(TableName=model.Meta.table_name, Key=lock)
        with RequestCounter(model) as counter:
            report = fix()
        assert counter.count("TransactWriteItems") == 1, report
        assert audit(model).clean
    client(model).delete_item(TableName=model.Meta.table_name, Key=lock)
    record = client(model).get_item(TableName=model.Meta.table_name, Key={"pk": {"S": "s1"}})["Item"]
    assert streams.handle(model, _insert_event_with_view_type(model, record)).created == 1
    assert audit(model).clean
    stored_lock = client(model).get_item(TableName=model.Meta.table_name, Key=lock)["Item"]
    assert stored_lock["expires"] == {"N": "1924992000"}

    loaded = model.get("s1")
    with RequestCounter(model) as counter:
        loaded.delete()
    assert counter.operations == ["TransactWriteItems"]
    assert _owner(model, "c@x.io") is None


# --- Callable defaults and JSON texts spelled by another writer -------------------------------


# --- models ----------------------------------------------------------------------------------


def _flag_default() -> str:
    return "on"


class CallableDefaulted(UniqueMixin, Model):
    """A partial constraint whose condition attribute has a callable default (no stored value when absent)."""

    class Meta:
        table_name = "view-callable"
        region = "us-east-1"
        unique_constraints = [
            UniqueConstraint(
                "email",
                name="FLAG_EMAIL",
                condition=lambda r: r.flag == "on",
                condition_attributes=("flag",),
            )
        ]

    pk = UnicodeAttribute(hash_key=True)
    email = UnicodeAttribute(null=True)
    flag = UnicodeAttribute(null=True, default=_flag_default)


# --- helpers ---------------------------------------------------------------------------------


def _compact_rewrite(model: type[JsonConditioned]) -> None:
    """Another writer rewrites record ``j1`` with the same values, its JSON spelled compactly."""
    put_raw(model, {"pk": {"S": "j1"}, "email": {"S": "j@x.io"}, "meta": {"S": '{"active":true}'}})


# --- Stored.same_as ignores the stored text the compare-and-swap checks --------------------


def test_save__snapshot_then_json_respelled_by_other_writer__saves(moto_backend: None) -> None:
    """A record saved by the library, whose JSON another writer then re-spelled (same value), saves again.

    The snapshot after ``save()`` holds the dict, checked as ``meta = '{"active": true}'``; the
    stored text is ``{"active":true}``, so the compare-and-swap fails. ``_engine._after_failure``
    re-reads the item and asks ``Stored.same_as``, which compares Python values only (it ignores
    ``Stored.verbatim``): "unchanged", so it raises ``ConditionFailed`` ("the caller's condition or
    the version check") for a save with neither. PynamoDB's own save succeeds.
    """
    model = bind_model(JsonConditioned, MOTO)
    record = model(pk="j1", email="j@x.io", meta={"active": True})
    record.save()
    _compact_rewrite(model)
    record.bio = "hello"
    record.save()
    assert model.get("j1").bio == "hello"


def test_delete__unloaded_instance_json_spelled_compactly__deletes(moto_backend: None) -> None:
    """``delete()`` of an instance not loaded (its own values guessed) deletes a record whose JSON is compact.

    The guess ``Stored(values=context.values(instance))`` carries no stored text; the check
    ``meta = '{"active": true}'`` fails, the re-read item has the same Python values, and
    ``Stored.same_as`` calls that the caller's condition failing: ``ConditionFailed`` for a
    delete with no condition (PynamoDB's delete succeeds, the lock must be released).
    """
    model = bind_model(JsonConditioned, MOTO)
    model(pk="j1", email="j@x.io", meta={"active": True}).save()
    _compact_rewrite(model)
    model(pk="j1", email="j@x.io", meta={"active": True}).delete()
    assert model.count() == 0
    assert model.unique_owner(email="j@x.io") is None


def test_transact__snapshot_then_json_respelled__save_is_stale_not_callers_condition(moto_backend: None) -> None:
    """A TransactWrite save whose compare-and-swap fails on re-spelled JSON is not the caller's condition.

    ``TransactWrite._record_problem`` asks ``Stored.same_as`` (values only, not the stored text):
    "unchanged", so PynamoDB's ``TransactWriteError`` is raised as if the caller's own condition had
    failed, though the transaction has none. The record changed under the snapshot: ``StaleWrite``
    (the library's answer to "changed since it was read") is the right error.
    """
    model = bind_model(JsonConditioned, MOTO)
    record = model(pk="j1", email="j@x.io", meta={"active": True})
    record.save()
    _compact_rewrite(model)
    record.bio = "hello"
    try:
        with TransactWrite() as tx:
            tx.save(record)
    except StaleWrite:
        return
    # Committed is acceptable too (nothing the library checks changed); a TransactWriteError is not.
    assert model.get("j1").bio == "hello"


# --- TransactWrite's update snapshot drops the stored text ---------------------------------


def test_transact_update__loaded_compact_json__next_save_one_put(moto_backend: None) -> None:
    """After ``tx.update(loaded, ...)`` of a record whose JSON is compact, the next ``save()`` is one PutItem.

    The update leaves ``meta`` as stored, but ``after_success(load=False)`` remembers
    ``Stored(values=desired)`` without the ``verbatim`` the loaded snapshot had: the next save
    checks ``meta = '{"active": true}'`` against ``{"active":true}``, fails, and (see
    ``Stored.same_as``) raises ``ConditionFailed``. PynamoDB's save succeeds, in one request.
    """
    model = bind_model(JsonConditioned, MOTO)
    _compact_rewrite(model)
    loaded = model.get("j1")
    with TransactWrite() as tx:
        tx.update(loaded, [model.bio.set("one")])
    loaded.bio = "two"
    with RequestCounter(model) as counter:
        loaded.save()
    assert counter.operations == ["PutItem"]
    assert model.get("j1").bio == "two"


# --- inspect reads a record with PynamoDB's callable defaults --------------------------------


def test_inspect__callable_default_absent__agrees_with_audit(moto_backend: None) -> None:
    """``inspect`` and ``audit`` agree on a lock whose record lacks its callable-defaulted condition attribute.

    The library takes an attribute with a callable default that the item lacks as no value
    (``ModelContext.loaded_values``): the record's condition ``flag == "on"`` is false, its email
    lock orphaned, as ``audit`` reports. ``inspect`` computes the held keys with
    ``context.lock_keys(model.from_raw_data(record))``, i.e. ``values()``, where PynamoDB's load has
    called the default ("on"): it says the owner holds the value and the lock is healthy.
    """
    model = bind_model(CallableDefaulted, MOTO)
    model(pk="c1", email="c@x.io").save()  # flag "on" (made at construction): the lock is taken.
    put_raw(model, {"pk": {"S": "c1"}, "email": {"S": "c@x.io"}})  # Rewritten without flag.
    report = audit(model)
    assert [(p.kind, p.lock_key) for p in report.problems] == [("orphaned", "UNIQ#FLAG_EMAIL#c@x.io")]
    info = inspect(model, email="c@x.io")
    assert info.owner_holds is False
    assert not info.healthy


# --- an update that creates the record forgets the defaults its load gives -------------------


def test_transact_update__creates_record__takes_lock_of_defaulted_condition(moto_backend: None) -> None:
    """``tx.update`` of a key with no record creates it; its lock follows the record as PynamoDB loads it.

    The created item is the key and ``email``; PynamoDB loads ``status`` as its default "live", so
    the email is live and needs its lock. ``TransactWrite.update`` plans
    ``desired = {**assumed.values, **changes}`` with ``assumed = Stored(exists=False)`` (values
    ``{}``): ``status`` is None, the condition false, no lock is taken and the record holds an
    unlocked unique value.
    """
    model = bind_model(Defaulted, MOTO)
    record = model(pk="u1")
    with TransactWrite() as tx:
        tx.update(record, [model.email.set("u@x.io")])
    assert model.get("u1").status == "live"
    assert model.unique_owner(email="u@x.io") == ("u1",)
    assert_invariant(model)


def test_update__guess_wrong_record_absent__takes_lock_of_defaulted_condition(moto_backend: None) -> None:
    """``update()`` of an instance whose guessed values miss, on a key with no record, locks the value it creates.

    The first plan guesses the instance's own values (``email`` "old"); its check fails, the re-read
    finds no item, and ``_engine.intent_plan``'s desire gives ``{**Stored(exists=False).values,
    **changes}``: ``status`` is None, so no lock is taken for the email of a record that loads as
    "live". The snapshot remembered from the created item then says the lock is held.
    """
    model = bind_model(Defaulted, MOTO)
    record = model(pk="u2", email="old@x.io")
    record.update([model.email.set("new@x.io")])
    assert model.get("u2").status == "live"
    assert model.unique_owner(email="new@x.io") == ("u2",)
    assert_invariant(model)


# --- the guard's text cache and transfers between instances ---------------------------------------


@pytest.mark.parametrize(
    "item",
    [
        {"pk": {"S": "g1"}, "email": {"S": "g@x.io"}, "meta": {"S": '{"active":true}'}},  # verbatim
        {"pk": {"S": "g1"}, "email": {"S": "g@x.io"}, "meta": {"S": '{"active": true}'}},  # verbatim, canonical
        {"pk": {"S": "g1"}, "email": {"NULL": True}},  # absent, stored as NULL
        {"pk": {"S": "g1"}},  # absent
    ],
)
def test_guard_text_cache__matches_pynamodb_serialization(item: dict[str, Any]) -> None:
    """A guard's cached text and numbered values equal PynamoDB's serialization of ``Guard.condition()``.

    Each state is compiled after the cache is warmed by another state of the same shape, so a
    text cached for one state and reused for another would show here (a resend with the
    caller's token must be byte-identical).
    """
    context = context_of(JsonConditioned)
    assert context is not None
    planner = context.planner
    for gone_ok in (False, True):
        for stored in (context.item_view(item), Stored(exists=False)):
            guard = Guard(planner, stored, gone_ok=gone_ok)
            got = guard_condition(guard)
            condition = guard.condition()
            names: dict[str, str] = {}
            values: dict[str, Any] = {}
            expected = {} if condition is None else {"ConditionExpression": condition.serialize(names, values)}
            if names:
                expected["ExpressionAttributeNames"] = {v: k for k, v in names.items()}
            if values:
                expected["ExpressionAttributeValues"] = values
            assert got == expected


def test_transact__transfer_after_instances_changed__invariant_holds(moto_backend: None) -> None:
    """A value moved between two records in one TransactWrite follows the records as added.

    Both instances change after being added; the requests write them as added (``_Entry.sent``),
    the transfer names the giver as added, and each snapshot holds what was written.
    """
    model = bind_model(Contact, MOTO)
    giver, taker = model(pk="a", email="x@x.io"), model(pk="b", email="y@x.io")
    giver.save()
    taker.save()
    giver.email, taker.email = "z@x.io", "x@x.io"
    with TransactWrite() as tx:
        tx.save(giver)
        tx.save(taker)
        giver.email = "late@x.io"
        taker.bio = "late"
    assert model.unique_owner(email="x@x.io") == ("b",)
    assert model.unique_owner(email="z@x.io") == ("a",)
    assert_invariant(model)
    giver.save()  # Its snapshot holds "z@x.io": the lock moves to "late@x.io".
    assert model.unique_owner(email="late@x.io") == ("a",)
    assert model.unique_owner(email="z@x.io") is None
    assert_invariant(model)
