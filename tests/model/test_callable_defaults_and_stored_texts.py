"""The stored view (``Stored.verbatim``, callable defaults) with the features around it.

From a review: each test says what it checks and why a failure is a bug; the ``test_probe_*``
tests pin behaviour the review checked and found right.
"""

from __future__ import annotations

from typing import Any

import pytest
from _backends import Backend, RequestCounter, bind_model
from _invariant import assert_invariant
from pynamodb.attributes import JSONAttribute, UnicodeAttribute
from pynamodb.models import Model

from pynamodb_unique import (
    StaleWrite,
    TransactWrite,
    UniqueAttribute,
    UniqueConstraint,
    UniqueMixin,
    audit,
    inspect,
)
from pynamodb_unique._core.plan import Guard, Stored
from pynamodb_unique._model.context import context_of
from pynamodb_unique._write.requests import guard_condition

MOTO = Backend("moto", None)


# --- models ----------------------------------------------------------------------------------


class JsonRm(UniqueMixin, Model):
    """A partial constraint whose condition reads a JSONAttribute (stored as text, checked verbatim)."""

    class Meta:
        table_name = "review-more-json"
        region = "us-east-1"
        unique_constraints = [
            UniqueConstraint(
                "email",
                name="JSON_EMAILRm",
                condition=lambda r: r.meta is not None and bool(r.meta.get("active")),
                condition_attributes=("meta",),
            )
        ]

    pk = UnicodeAttribute(hash_key=True)
    email = UnicodeAttribute(null=True)
    meta = JSONAttribute(null=True)
    bio = UnicodeAttribute(null=True)


def _flag_default() -> str:
    return "on"


class CallableRm(UniqueMixin, Model):
    """A partial constraint whose condition attribute has a callable default (no stored value when absent)."""

    class Meta:
        table_name = "review-more-callable"
        region = "us-east-1"
        unique_constraints = [
            UniqueConstraint(
                "email",
                name="FLAG_EMAILRm",
                condition=lambda r: r.flag == "on",
                condition_attributes=("flag",),
            )
        ]

    pk = UnicodeAttribute(hash_key=True)
    email = UnicodeAttribute(null=True)
    flag = UnicodeAttribute(null=True, default=_flag_default)


class DefaultedRm(UniqueMixin, Model):
    """A partial constraint whose condition attribute has a fixed default (applied by PynamoDB's load)."""

    class Meta:
        table_name = "review-more-defaulted"
        region = "us-east-1"
        unique_constraints = [
            UniqueConstraint(
                "email", name="LIVE_EMAILRm", condition=lambda r: r.status == "live", condition_attributes=("status",)
            )
        ]

    pk = UnicodeAttribute(hash_key=True)
    email = UnicodeAttribute(null=True)
    status = UnicodeAttribute(default="live")
    bio = UnicodeAttribute(null=True)


class PlainRm(UniqueMixin, Model):
    """One unique attribute."""

    class Meta:
        table_name = "review-more-plain"
        region = "us-east-1"

    pk = UnicodeAttribute(hash_key=True)
    email = UniqueAttribute(UnicodeAttribute(null=True), name="EMAILRm")
    bio = UnicodeAttribute(null=True)


# --- helpers ---------------------------------------------------------------------------------


def _put_raw(model: type[Model], item: dict[str, Any]) -> None:
    """Write an item behind the library's back (another writer)."""
    model._get_connection().connection.client.put_item(TableName=model.Meta.table_name, Item=item)


def _compact_rewrite(model: type[JsonRm]) -> None:
    """Another writer rewrites record ``j1`` with the same values, its JSON spelled compactly."""
    _put_raw(model, {"pk": {"S": "j1"}, "email": {"S": "j@x.io"}, "meta": {"S": '{"active":true}'}})


# --- 1. Stored.same_as ignores the stored text the compare-and-swap checks --------------------


def test_save__snapshot_then_json_respelled_by_other_writer__saves(moto_backend: None) -> None:
    """A record saved by the library, whose JSON another writer then re-spelled (same value), saves again.

    The snapshot after ``save()`` holds the dict, checked as ``meta = '{"active": true}'``; the
    stored text is ``{"active":true}``, so the compare-and-swap fails. ``_engine._after_failure``
    re-reads the item and asks ``Stored.same_as``, which compares Python values only (it ignores
    ``Stored.verbatim``): "unchanged", so it raises ``ConditionFailed`` ("the caller's condition or
    the version check") for a save with neither. PynamoDB's own save succeeds.
    """
    model = bind_model(JsonRm, MOTO)
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
    model = bind_model(JsonRm, MOTO)
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
    model = bind_model(JsonRm, MOTO)
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


# --- 2. TransactWrite's update snapshot drops the stored text ---------------------------------


def test_transact_update__loaded_compact_json__next_save_one_put(moto_backend: None) -> None:
    """After ``tx.update(loaded, ...)`` of a record whose JSON is compact, the next ``save()`` is one PutItem.

    The update leaves ``meta`` as stored, but ``after_success(load=False)`` remembers
    ``Stored(values=desired)`` without the ``verbatim`` the loaded snapshot had: the next save
    checks ``meta = '{"active": true}'`` against ``{"active":true}``, fails, and (see
    ``Stored.same_as``) raises ``ConditionFailed``. PynamoDB's save succeeds, in one request.
    """
    model = bind_model(JsonRm, MOTO)
    _compact_rewrite(model)
    loaded = model.get("j1")
    with TransactWrite() as tx:
        tx.update(loaded, [model.bio.set("one")])
    loaded.bio = "two"
    with RequestCounter(model) as counter:
        loaded.save()
    assert counter.operations == ["PutItem"]
    assert model.get("j1").bio == "two"


# --- 3. inspect reads a record with PynamoDB's callable defaults --------------------------------


def test_inspect__callable_default_absent__agrees_with_audit(moto_backend: None) -> None:
    """``inspect`` and ``audit`` agree on a lock whose record lacks its callable-defaulted condition attribute.

    The library takes an attribute with a callable default that the item lacks as no value
    (``ModelContext.loaded_values``): the record's condition ``flag == "on"`` is false, its email
    lock orphaned, as ``audit`` reports. ``inspect`` computes the held keys with
    ``context.lock_keys(model.from_raw_data(record))``, i.e. ``values()``, where PynamoDB's load has
    called the default ("on"): it says the owner holds the value and the lock is healthy.
    """
    model = bind_model(CallableRm, MOTO)
    model(pk="c1", email="c@x.io").save()  # flag "on" (made at construction): the lock is taken.
    _put_raw(model, {"pk": {"S": "c1"}, "email": {"S": "c@x.io"}})  # Rewritten without flag.
    report = audit(model)
    assert [(p.kind, p.lock_key) for p in report.problems] == [("orphaned", "UNIQ#FLAG_EMAILRm#c@x.io")]
    info = inspect(model, email="c@x.io")
    assert info.owner_holds is False
    assert not info.healthy


# --- 4. an update that creates the record forgets the defaults its load gives -------------------


def test_transact_update__creates_record__takes_lock_of_defaulted_condition(moto_backend: None) -> None:
    """``tx.update`` of a key with no record creates it; its lock follows the record as PynamoDB loads it.

    The created item is the key and ``email``; PynamoDB loads ``status`` as its default "live", so
    the email is live and needs its lock. ``TransactWrite.update`` plans
    ``desired = {**assumed.values, **changes}`` with ``assumed = Stored(exists=False)`` (values
    ``{}``): ``status`` is None, the condition false, no lock is taken and the record holds an
    unlocked unique value.
    """
    model = bind_model(DefaultedRm, MOTO)
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
    model = bind_model(DefaultedRm, MOTO)
    record = model(pk="u2", email="old@x.io")
    record.update([model.email.set("new@x.io")])
    assert model.get("u2").status == "live"
    assert model.unique_owner(email="new@x.io") == ("u2",)
    assert_invariant(model)


# --- probes (expected to pass) ------------------------------------------------------------------


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
    context = context_of(JsonRm)
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
    model = bind_model(PlainRm, MOTO)
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
