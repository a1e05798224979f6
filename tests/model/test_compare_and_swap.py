"""What is stored, as PynamoDB loads it: the record's compare-and-swap and "did the caller's condition fail?".

The library's view of a stored record is the one PynamoDB's
load gives (an absent attribute holds its fixed default), so the compare-and-swap accepts an
absent attribute where the view holds its default; values are compared as DynamoDB stores them
(a ``MapAttribute`` compares by identity in Python), copied when they can change in place (a
``JSONAttribute``'s dict), and an empty set is no value (PynamoDB stores it as no attribute).
The request builders and key serializers on numeric, binary and hash-only keys, versions,
polymorphism and tokens complete it.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from _backends import Backend, RequestCounter, bind_model
from _damage import _context
from _invariant import assert_invariant
from _scaffold import bind_with_lock_table, with_locks
from models import BinKeyed, Defaulted, Dog, Flagged, JsonConditioned, NumKeyed, Pet, Versioned
from pynamodb.attributes import TTLAttribute, UnicodeAttribute, UnicodeSetAttribute
from pynamodb.constants import ALL_OLD
from pynamodb.exceptions import TransactWriteError
from pynamodb.models import Model

from pynamodb_unique import (
    ConditionFailed,
    StaleWrite,
    TransactWrite,
    UniqueAttribute,
    UniqueConstraint,
    UniqueMixin,
    UniqueViolation,
    audit,
    repair,
)
from pynamodb_unique._core.plan import Stored, fixed_default
from pynamodb_unique._model import snapshot, updates
from pynamodb_unique._write.requests import record_kwargs

MOTO = Backend("moto", None)


# --- models ----------------------------------------------------------------------------------


class TaggedView(UniqueMixin, Model):
    """A partial constraint whose condition reads a string set (an empty set is stored as nothing)."""

    class Meta:
        table_name = "stored-view-tagged"
        region = "us-east-1"
        unique_constraints = [
            UniqueConstraint(
                "email",
                name="TAGGED_EMAIL",
                condition=lambda r: not r.tags or "banned" not in r.tags,
                condition_attributes=("tags",),
            )
        ]

    pk = UnicodeAttribute(hash_key=True)
    email = UnicodeAttribute(null=True)
    tags = UnicodeSetAttribute(null=True)
    bio = UnicodeAttribute(null=True)


# --- a defaulted condition attribute: the load applies the default, the item lacks it -------


def _defaulted_without_status() -> type[Defaulted]:
    """A record whose ``status`` was removed through the library: the item lacks it, a load says "live"."""
    model = bind_model(Defaulted, MOTO)
    model(pk="r1", email="e@x.io").save()
    model.get("r1").update(actions=[model.status.remove()])
    loaded = model.get("r1")
    assert loaded.status == "live"  # PynamoDB applied the default on load.
    return model


def test_defaulted_condition_attribute_removed__loaded_record_saves(moto_backend: None) -> None:
    """a loaded record whose item lacks a defaulted attribute cannot be saved (ConditionFailed).

    PynamoDB's load fills in ``status="live"``; the snapshot keeps that, so the guard sends
    ``status = :live``, which the stored item (no ``status``) fails. The re-read applies the default
    again, looks "the same", and the library raises ConditionFailed for a save with no condition.
    PynamoDB's own save() succeeds.
    """
    model = _defaulted_without_status()
    loaded = model.get("r1")
    loaded.bio = "hello"
    loaded.save()
    assert model.get("r1").bio == "hello"
    assert model.unique_owner(email="e@x.io") == ("r1",)  # The record as saved is live again.


def test_defaulted_condition_attribute_removed__delete_succeeds(moto_backend: None) -> None:
    """delete() of that record raises ConditionFailed; PynamoDB's delete() with no condition succeeds."""
    model = _defaulted_without_status()
    model.get("r1").delete()
    assert model.count() == 0


def test_defaulted_condition_attribute_removed__new_instance_saves(moto_backend: None) -> None:
    """even a new instance of the record cannot overwrite it (ConditionFailed after the re-plan)."""
    model = _defaulted_without_status()
    model(pk="r1", email="e@x.io", bio="again").save()
    assert model.get("r1").bio == "again"


def test_defaulted_condition_attribute_removed__invariant_holds(moto_backend: None) -> None:
    """``update(status.remove())`` releases the lock, yet the record reads back as live.

    The suite's invariant reads records as PynamoDB loads them (defaults applied): ``status`` is
    "live", so its email must be locked. The update planned the removal as ``None`` (the
    condition false) and released the lock, so a second record can take a value this one holds.
    """
    model = _defaulted_without_status()
    assert_invariant(model)


# --- a MapAttribute compares by identity: "the same stored state" is never the same ---------


@pytest.mark.parametrize("op", ["save", "delete"])
def test_map_condition_attribute__caller_condition_fails__condition_failed(moto_backend: None, op: str) -> None:
    """a failed caller condition raises StaleWrite after 4 plans, not ConditionFailed after 1.

    ``Stored.same_as`` compares values with ``==``; a ``MapAttribute`` value compares by identity
    (``AttributeContainer.__eq__``), and the snapshot holds a deep copy, so the stored item never
    looks the same as the snapshot and each failure re-plans. PynamoDB raises PutError/DeleteError
    for the failed condition at once.
    """
    model = bind_model(Flagged, MOTO)
    model(pk="a", email="a@x.io", flags={"active": True}).save()
    loaded = model.get("a")
    write = loaded.save if op == "save" else loaded.delete
    with RequestCounter(model) as counter, pytest.raises(ConditionFailed) as info:
        write(condition=model.bio == "nope")
    assert info.value.cause_response_code == "ConditionalCheckFailedException"
    assert len(counter.operations) == 1
    assert model.unique_owner(email="a@x.io") == ("a",)


def test_map_condition_attribute__transact_write_caller_condition__transact_write_error(moto_backend: None) -> None:
    """in a TransactWrite, a caller's failed condition raises StaleWrite ("changed since it was read").

    The class docstring (and PynamoDB) promise TransactWriteError for the caller's own condition;
    ``_record_problem`` compares the re-read item with the snapshot by ``==``, false for a map.
    """
    model = bind_model(Flagged, MOTO)
    model(pk="a", email="a@x.io", flags={"active": True}).save()
    loaded = model.get("a")
    with pytest.raises(TransactWriteError) as info, TransactWrite() as tx:
        tx.save(loaded, condition=model.bio == "nope")
    assert not isinstance(info.value, StaleWrite)


# --- a JSONAttribute (type S, a dict) is shared with the instance -----------------------------


def test_json_condition_attribute_changed_in_place_after_save__one_request(moto_backend: None) -> None:
    """the snapshot shares the instance's JSON dict, so it changes with it: a failed guard, a re-plan.

    ``ModelContext.values`` copies only values whose DynamoDB type is not S/N/B; a JSONAttribute
    is stored as S but holds a dict. After an in-place change the next save() plans "no change",
    its compare-and-swap fails, and it is sent again (PutItem, then TransactWriteItems), where the
    same change of a MapAttribute goes in one request (tests/model/test_requests_equal_pynamodb.py).
    """
    model = bind_model(JsonConditioned, MOTO)
    record = model(pk="a", email="a@x.io", meta={"active": True})
    record.save()
    assert model.unique_owner(email="a@x.io") == ("a",)
    assert record.meta is not None
    record.meta["active"] = False
    with RequestCounter(model) as counter:
        record.save()
    assert counter.operations == ["TransactWriteItems"]
    assert model.unique_owner(email="a@x.io") is None


# --- an empty set: PynamoDB serializes it as nothing -----------------------------------------


@pytest.mark.parametrize("second", ["save", "update"])
def test_empty_set_condition_attribute__second_write_succeeds(moto_backend: None, second: str) -> None:
    """after saving ``tags=set()``, the next write sends ``tags = {"SS": None}`` and botocore raises TypeError.

    PynamoDB stores an empty set as no attribute (``SetAttribute.serialize`` returns None); the
    snapshot keeps ``set()``, not None, so the compare-and-swap compares with a null value instead
    of ``attribute_not_exists``. The error is a bare TypeError, not even a PynamoDB error.
    PynamoDB's own second save()/update() succeeds.
    """
    model = bind_model(TaggedView, MOTO)
    record = model(pk="a", email="a@x.io", tags=set())
    record.save()
    if second == "save":
        record.bio = "x"
        record.save()
    else:
        record.update(actions=[model.email.set("b@x.io")])
    assert model.unique_owner(email="b@x.io" if second == "update" else "a@x.io") == ("a",)


# --- keys, versions, polymorphism, tokens ---------------------------------------------------


def test_binary_hash_key__lifecycle_and_violation_owner(moto_backend: None) -> None:
    """a binary hash key with an attr_name: save, violation (owner decoded as bytes), move, delete."""
    model = with_locks(bind_model(BinKeyed, MOTO))
    model(id=b"\x00\xff", email="a@x.io").save()
    with pytest.raises(UniqueViolation) as info:
        model(id=b"\x01", email="a@x.io").save()
    assert info.value.violations[0].owner == (b"\x00\xff",)
    loaded = model.get(b"\x00\xff")
    loaded.email = "b@x.io"
    loaded.save()
    assert model.unique_owner(email="b@x.io") == (b"\x00\xff",)
    assert model.unique_owner(email="a@x.io") is None
    loaded.delete()
    assert model.unique_owner(email="b@x.io") is None


def test_numeric_keys__fractional_range__violation_and_delete(moto_backend: None) -> None:
    """numeric keys (a fractional range) name the owner in lock items and release on delete."""
    model = with_locks(bind_model(NumKeyed, MOTO))
    model(id=7, rev=2.5, email="n@x.io").save()
    with pytest.raises(UniqueViolation) as info:
        model(id=8, rev=0, email="n@x.io").save()
    assert info.value.violations[0].owner == (7, 2.5)
    model(id=8, rev=0, email="m@x.io").save()  # A zero range key is a value, not "no range key".
    assert model.unique_owner(email="m@x.io") == (8, 0)
    model.get(7, 2.5).delete()
    assert model.unique_owner(email="n@x.io") is None


def test_versioned__stale_version_move__condition_failed_then_last_write_wins(moto_backend: None) -> None:
    """a stale versioned move raises ConditionFailed (CCF cause); add_version_condition=False writes it."""
    model = bind_model(Versioned, MOTO)
    model(id="v1", handle="h1").save()
    stale = model.get("v1")
    fresh = model.get("v1")
    fresh.note = "bumped"
    fresh.save()
    stale.handle = "h2"
    with pytest.raises(ConditionFailed) as info:
        stale.save()
    assert info.value.cause_response_code == "ConditionalCheckFailedException"
    assert model.unique_owner(handle="h1") == ("v1",)
    stale.save(add_version_condition=False)
    assert model.unique_owner(handle="h2") == ("v1",)
    assert model.unique_owner(handle="h1") is None
    assert model.get("v1").version == 2  # PynamoDB's last write wins: the stale local version plus one.
    stale.delete(add_version_condition=False)
    assert model.unique_owner(handle="h2") is None


def test_polymorphic__caller_condition_fails__condition_failed_in_one_request(moto_backend: None) -> None:
    """a loaded subclass record (scalar values) raises ConditionFailed for its caller's condition at once."""
    Pet.create_table(wait=True, billing_mode="PAY_PER_REQUEST")
    Dog(pk="d1", name="rex").save()
    loaded: Any = Pet.get("d1")
    assert type(loaded) is Dog
    with RequestCounter(Pet) as counter, pytest.raises(ConditionFailed):
        loaded.save(condition=Pet.note == "nope")
    assert len(counter.operations) == 1


def test_map_condition_attribute__set_by_update__condition_sees_a_map(moto_backend: None) -> None:
    """``update(flags.set({...}))`` runs the partial condition on a dict: AttributeError.

    ``ModelContext.update_changes`` turns the literal into ``attribute.deserialize(...)``, which
    for a raw MapAttribute is a plain dict, and ``instantiate`` stores it as is (no ``__set__``),
    so ``r.flags.active`` fails. save() with the same map, and a loaded record, give the condition
    a MapAttribute (what PynamoDB's ``__set__`` and load make of it), as a condition expects.
    """
    model = bind_model(Flagged, MOTO)
    record = model(pk="a", email="a@x.io", flags={"active": True})
    record.save()
    record.update(actions=[model.flags.set({"active": False})])
    assert model.unique_owner(email="a@x.io") is None
    record.update(actions=[model.flags.set({"active": True})])
    assert model.unique_owner(email="a@x.io") == ("a",)
    assert_invariant(model)


def test_defaulted_condition_attribute__snapshot_after_save_is_the_stored_view(moto_backend: None) -> None:
    """a record saved with its default, loaded again, saves in one PutItem (the item holds the default)."""
    model = bind_model(Defaulted, MOTO)
    model(pk="r1", email="e@x.io").save()
    loaded = model.get("r1")
    loaded.bio = "x"
    with RequestCounter(model) as counter:
        loaded.save()
    assert counter.operations == ["PutItem"]
    assert snapshot.known(_context(model), loaded) is not None


@pytest.fixture
def dynoxide_numkeyed(dynoxide_endpoint: str) -> type[NumKeyed]:
    """NumKeyed on dynoxide, with its own record and lock tables."""
    return bind_with_lock_table(NumKeyed, Backend("dynoxide", dynoxide_endpoint), "stored-view-locks")


@pytest.mark.integration
def test_dynoxide_token_replay__numeric_keys__idempotent(dynoxide_numkeyed: type[NumKeyed]) -> None:
    """the same save with the same caller token, resent from a fresh instance, is one write.

    The request's bytes must not change between the two sends (owner fields typed N, the key
    serialized by ``owner()``), or DynamoDB would refuse the token (IdempotentParameterMismatch).
    """
    model = dynoxide_numkeyed
    with RequestCounter(model) as counter:
        model(id=7, rev=2, email="n@x.io").save(client_request_token="stored-view-replay")
        model(id=7, rev=2, email="n@x.io").save(client_request_token="stored-view-replay")
    sent = counter.params("TransactWriteItems")
    assert len(sent) == 2
    assert sent[0] == sent[1]
    assert model.unique_owner(email="n@x.io") == (7, 2)
    with pytest.raises(UniqueViolation):
        model(id=9, rev=1, email="n@x.io").save()


# --- a default made on each load (a callable) is no stored value -------------------------------


class Coded(UniqueMixin, Model):
    """A unique attribute whose default is made anew by each load."""

    class Meta:
        table_name = "stored-view-coded"
        region = "us-east-1"

    pk = UnicodeAttribute(hash_key=True)
    code = UniqueAttribute(UnicodeAttribute(default=lambda: f"C{next(_CODES)}"))
    bio = UnicodeAttribute(null=True)


_CODES = iter(range(1_000_000))


def test_callable_default_absent_in_item__save_takes_its_lock(moto_backend: None) -> None:
    """An item without a callable-default unique attribute holds no value, though the loaded instance shows one.

    PynamoDB's load calls the default (a new code each load); the item has none, so no lock is
    held for it. Saving the loaded instance writes that code: the save must take its lock, as it
    would for any value the record did not hold (a snapshot taking the instance's code as stored
    would plan no change and leave the code written without a lock).
    """
    model = bind_model(Coded, MOTO)
    model._get_connection().put_item("r1", attributes={"bio": {"S": "written elsewhere"}})
    loaded = model.get("r1")
    code = loaded.code
    assert code is not None
    loaded.save()
    assert model.get("r1").code == code
    assert model.unique_owner(code=code) == ("r1",)
    assert_invariant(model)


# --- the audit reads records as the write path does ------------------------------------------


def test_audit__defaulted_condition_attribute_absent__lock_expected(moto_backend: None) -> None:
    """A record without its defaulted condition attribute loads as live: the audit expects its lock.

    The write path keeps that record's lock (a removal of ``status`` plans its default); the
    audit must judge the item as PynamoDB loads it too, so a record written without the
    attribute by another writer is reported as missing its lock, and repair creates it.
    """
    model = bind_model(Defaulted, MOTO)
    model._get_connection().put_item("r1", attributes={"email": {"S": "e@x.io"}})
    report = audit(model)
    assert [(type(p).__name__, p.lock_key) for p in report.problems] == [("MissingLock", "UNIQ#LIVE_EMAIL#e@x.io")]
    assert repair(model, apply=True).applied == 1
    assert model.unique_owner(email="e@x.io") == ("r1",)
    assert audit(model).problems == ()


# --- the compare-and-swap of a defaulted attribute, as sent ------------------------------------


def test_guard__defaulted_value__absent_or_equal__as_pynamodb_serializes_it(moto_backend: None) -> None:
    """A value equal to its attribute's default is checked as "absent (or NULL) or equal"; any other as equal.

    The guard's text is compiled once per shape and its values numbered apart from PynamoDB's
    serializer: both must give PynamoDB's own request for the same condition.
    """
    model = bind_model(Defaulted, MOTO)
    context = _context(model)
    planner = context.planner
    instance = model(pk="r1", email="n@x.io")
    actions = [model.email.set("n@x.io")]
    absent_or_live = "((attribute_not_exists (#1) OR attribute_type (#1, :1)) OR #1 = :2)"
    for status, expected in (("live", absent_or_live), ("gone", "#1 = :1")):
        stored = Stored(exists=True, values={"email": "e@x.io", "status": status})
        plan = planner.write("update", stored, {**stored.values, **updates.update_changes(context, actions)})
        condition = plan.record.condition
        built = record_kwargs(instance, plan.record, None, actions, add_version_condition=True)
        pynamodb: dict[str, Any] = Model.get_update_kwargs_from_instance(
            instance, actions=list(actions), condition=condition, return_values_on_condition_failure=ALL_OLD
        )
        assert built == pynamodb
        assert expected in built["ConditionExpression"]


def test_fixed_default__only_a_value_every_load_gives() -> None:
    """A fixed default is a plain value; a callable or a ``timedelta`` (a TTL counted from the load) is none."""
    assert fixed_default(UnicodeAttribute(default="live")) == "live"
    assert fixed_default(UnicodeAttribute(default=lambda: "made")) is None
    assert fixed_default(TTLAttribute(default=timedelta(days=1))) is None
    assert fixed_default(UnicodeAttribute(null=True)) is None
