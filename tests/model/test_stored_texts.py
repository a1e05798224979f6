"""Stored texts: the compare-and-swap checks a value as stored where its Python value may not
give it back (an expiry stored with a fraction of a second, an attribute whose ``__set__``
changes values), and a snapshot forgets a text its own write replaced.

Found by a review of the verbatim expiry; each test marked "Before the fix" failed then.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from _backends import Backend, RequestCounter, bind_model
from _damage import _context
from pynamodb.attributes import TTLAttribute, UnicodeAttribute
from pynamodb.models import Model

from pynamodb_unique import TransactWrite, UniqueAttribute, UniqueMixin, audit, backfill, migrate, repair, streams
from pynamodb_unique._model import snapshot

MOTO = Backend("moto", None)
FRACTION = "1924992000.5"
WHOLE = datetime.fromtimestamp(1924992000, tz=UTC)


class SessionTt(UniqueMixin, Model):
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


class LowerTt(UniqueMixin, Model):
    """A unique string attribute with a ``__set__`` hook; lock keys case-folded (one lock either way)."""

    class Meta:
        table_name = "stored-texts-lower"
        region = "us-east-1"

    pk = UnicodeAttribute(hash_key=True)
    email = UniqueAttribute(LowerUnicode(null=True), normalize=str.casefold)
    note = UnicodeAttribute(null=True)


def _client(model: Any) -> Any:
    return model._get_connection().connection.client


def _owner(model: Any, email: str) -> Any:
    return model.unique_owner(email=email)


def _insert_event(model: Any, record: dict[str, Any]) -> dict[str, Any]:
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
    _client(model).update_item(
        TableName=model.Meta.table_name,
        Key={"pk": {"S": "p1"}},
        UpdateExpression="SET email = :e",
        ExpressionAttributeValues={":e": {"S": "A@X.io"}},
    )
    if drop_lock:
        _client(model).delete_item(TableName=model.Meta.table_name, Key={"pk": {"S": "UNIQ#EMAIL#a@x.io"}})


def test_set_hook_string__save_after_get__writes(moto_backend: None) -> None:
    """A record another writer stored as ``A@X.io``, loaded as ``a@x.io`` (the attribute's
    ``__set__`` lower-cases), saves in one request: its text is checked as stored.

    Before the fix, the compare-and-swap checked ``email = "a@x.io"`` against the stored
    ``A@X.io`` and the save raised ConditionFailed, though the caller gave no condition.
    """
    model: Any = bind_model(LowerTt, MOTO)
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
    model: Any = bind_model(LowerTt, MOTO)
    _lower_stored_by_other_writer(model, drop_lock=True)
    report = backfill(model)
    assert report.clean, report.fixes
    assert audit(model).clean


def test_set_hook_string__streams_creates_the_missing_lock(moto_backend: None) -> None:
    """The Streams handler gives such a record its missing lock.

    Before the fix, the record was left ("the record or its locks changed 4 times").
    """
    model: Any = bind_model(LowerTt, MOTO)
    _lower_stored_by_other_writer(model, drop_lock=True)
    record = _client(model).get_item(TableName=model.Meta.table_name, Key={"pk": {"S": "p1"}})["Item"]
    report = streams.handle(model, _insert_event(model, record))
    assert report.created == 1, report.left
    assert audit(model).clean


# --- an expiry stored with a fraction, then set through a TransactWrite ------------------------


def _fractional_session(model: Any) -> None:
    model(pk="s1", email="a@x.io", expires=WHOLE).save()
    _client(model).update_item(
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
    model: Any = bind_model(SessionTt, MOTO)
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
    model: Any = bind_model(SessionTt, MOTO)
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
    model: Any = bind_model(SessionTt, MOTO)
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
    _client(model).update_item(
        TableName=model.Meta.table_name,
        Key={"pk": {"S": "s1"}},
        UpdateExpression="SET expires = :t",
        ExpressionAttributeValues={":t": {"N": FRACTION}},
    )
    for fix in (lambda: repair(model, apply=True), lambda: migrate(model, apply=True)):
        _client(model).delete_item(TableName=model.Meta.table_name, Key=lock)
        with RequestCounter(model) as counter:
            report = fix()
        assert counter.count("TransactWriteItems") == 1, report
        assert audit(model).clean
    _client(model).delete_item(TableName=model.Meta.table_name, Key=lock)
    record = _client(model).get_item(TableName=model.Meta.table_name, Key={"pk": {"S": "s1"}})["Item"]
    assert streams.handle(model, _insert_event(model, record)).created == 1
    assert audit(model).clean
    stored_lock = _client(model).get_item(TableName=model.Meta.table_name, Key=lock)["Item"]
    assert stored_lock["expires"] == {"N": "1924992000"}

    loaded = model.get("s1")
    with RequestCounter(model) as counter:
        loaded.delete()
    assert counter.operations == ["TransactWriteItems"]
    assert _owner(model, "c@x.io") is None
