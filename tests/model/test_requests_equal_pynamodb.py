"""The write path's shortcuts keep what they replace: PynamoDB's builders, its loads and the order sent.

Requests built without PynamoDB's builders equal theirs,
a snapshot holds what PynamoDB's load gave the instance (defaults, maps), keys without a range
value are left out as PynamoDB leaves them, and the guard text cache belongs to its planner.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import pytest
from _backends import Backend, RequestCounter, bind_model
from _damage import _context
from _scaffold import with_locks
from models import Account, BinKeyed, Defaulted, Dog, Flagged, NumKeyed, Pet
from pynamodb.attributes import (
    DiscriminatorAttribute,
    ListAttribute,
    MapAttribute,
    NumberAttribute,
    NumberSetAttribute,
    UnicodeAttribute,
    UnicodeSetAttribute,
    VersionAttribute,
)
from pynamodb.constants import ALL_OLD
from pynamodb.exceptions import PynamoDBException, TransactWriteError, UpdateError
from pynamodb.expressions.update import Action
from pynamodb.models import Model

from pynamodb_unique import (
    ConditionFailed,
    InvalidUniqueValue,
    TableNotFound,
    UniqueAttribute,
    UniqueConfigError,
    UniqueMixin,
    audit,
)
from pynamodb_unique._core import plan as _plan
from pynamodb_unique._core.plan import (
    SENT_ORDER,
    Guard,
    LockNotOurs,
    LockPut,
    LockRelease,
    Plan,
    PlanAction,
    Planner,
    RecordWrite,
    Stored,
)
from pynamodb_unique._model import snapshot, updates
from pynamodb_unique._model.registry import planner_of
from pynamodb_unique._write.requests import guard_condition, record_kwargs
from pynamodb_unique._write.send import WriteFailed, derive_token, new_token, send_transaction

MOTO = Backend("moto", None)
ABSENT: Stored = _plan.ABSENT


# --- models ----------------------------------------------------------------------------------


class Profile(MapAttribute[str, Any]):
    """A typed map, for nested update paths."""

    city = UnicodeAttribute(null=True, attr_name="City")
    zip = UnicodeAttribute(null=True)


class LowerKey(UnicodeAttribute):
    """A key computed when read (a subclass overriding ``__get__``): PynamoDB keys its requests with it."""

    def __get__(self, instance: Any, owner: Any) -> Any:
        value = super().__get__(instance, owner)
        return value.lower() if instance is not None and isinstance(value, str) else value


class ComputedKey(UniqueMixin, Model):
    """A hash key read in lower case, whatever was set."""

    class Meta:
        table_name = "write-path-computed-key"
        region = "us-east-1"

    pk = LowerKey(hash_key=True)
    email = UniqueAttribute(UnicodeAttribute(null=True))
    bio = UnicodeAttribute(null=True)


class Shapes(UniqueMixin, Model):
    """Attributes of many shapes, with attr_names that differ from the Python names."""

    class Meta:
        table_name = "write-path-shapes"
        region = "us-east-1"
        unique_lock_table = "write-path-shapes-locks"

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    rev = NumberAttribute(range_key=True, attr_name="Rev")
    email = UniqueAttribute(UnicodeAttribute(null=True, attr_name="Email"), normalize=str.casefold)
    handle = UniqueAttribute(UnicodeAttribute(null=True, attr_name="#handle"))
    code = UniqueAttribute(NumberAttribute(null=True, attr_name="Code"))
    profile = Profile(null=True, attr_name="Prof")  # type: ignore[no-untyped-call]
    tags = ListAttribute(null=True, attr_name="Tags")  # type: ignore[var-annotated]
    labels = UnicodeSetAttribute(null=True)
    counts = NumberSetAttribute(null=True)
    visits = NumberAttribute(null=True, attr_name="Visits")
    bio = UnicodeAttribute(null=True)


class Held(UniqueMixin, Model):
    """Releases that are holds (puts) next to releases that are deletes."""

    class Meta:
        table_name = "write-path-held"
        region = "us-east-1"

    pk = UnicodeAttribute(hash_key=True)
    a = UniqueAttribute(UnicodeAttribute(null=True), hold=timedelta(hours=1))
    b = UniqueAttribute(UnicodeAttribute(null=True))
    c = UniqueAttribute(UnicodeAttribute(null=True), hold=timedelta(hours=1))
    d = UniqueAttribute(UnicodeAttribute(null=True))


class OneA(UniqueMixin, Model):
    """One unique attribute named ``alpha``."""

    class Meta:
        table_name = "write-path-one-a"
        region = "us-east-1"

    pk = UnicodeAttribute(hash_key=True)
    alpha = UniqueAttribute(UnicodeAttribute(null=True))


class OneB(UniqueMixin, Model):
    """One unique attribute named ``beta``: a guard of the same shape as OneA's, other names."""

    class Meta:
        table_name = "write-path-one-b"
        region = "us-east-1"

    pk = UnicodeAttribute(hash_key=True)
    beta = UniqueAttribute(UnicodeAttribute(null=True))


def _planner(model: type[Model]) -> Planner:
    planner = planner_of(model)
    assert isinstance(planner, Planner)
    return planner


def _pynamodb_update(instance: Any, condition: Any, actions: Sequence[Action]) -> dict[str, Any]:
    """PynamoDB's own builder for the same update."""
    built: dict[str, Any] = Model.get_update_kwargs_from_instance(
        instance, actions=list(actions), condition=condition, return_values_on_condition_failure=ALL_OLD
    )
    return built


# --- a snapshot holds what PynamoDB's load gave the instance --------------------------------


def test_snapshot__raw_map_condition_attribute__save_after_get(moto_backend: None) -> None:
    """A raw MapAttribute read by a partial constraint's condition: get() then save() and update().

    PynamoDB loads a raw map as a MapAttribute (``MapAttribute.__set__`` wraps the dict its
    ``deserialize`` returns), so ``r.flags.active`` works on a loaded record; the planner runs the
    condition on the snapshot's value, which must be that MapAttribute too (a snapshot read from
    the raw item held a dict, and the condition raised AttributeError).
    """
    flagged = bind_model(Flagged, MOTO)
    flagged(pk="a", email="a@x.io", flags={"active": True}).save()
    loaded = flagged.get("a")
    assert loaded.flags is not None
    assert loaded.flags.active is True  # PynamoDB's own load: a MapAttribute.
    loaded.bio = "hello"
    loaded.save()
    again = flagged.get("a")
    again.update(actions=[flagged.email.set("b@x.io")])
    assert flagged.unique_owner(email="b@x.io") == ("a",)
    assert flagged.unique_owner(email="a@x.io") is None


def test_snapshot__raw_map_value_is_what_the_load_gave(moto_backend: None) -> None:
    """The snapshot's value of a raw map is a MapAttribute, as the instance's is (not deserialize's dict)."""
    flagged = bind_model(Flagged, MOTO)
    flagged(pk="a", email="a@x.io", flags={"active": True}).save()
    loaded = flagged.get("a")
    known = snapshot.known(_context(flagged), loaded)
    assert known is not None
    assert type(known.values["flags"]) is type(loaded.flags)


def test_snapshot__defaulted_attribute__equals_stored_from_item(moto_backend: None) -> None:
    """An attribute absent (or NULL) in the item gets its default on load, in the snapshot too.

    PynamoDB's load applies ``default`` to attributes missing from the item
    (``_container_deserialize`` -> ``_set_defaults(_user_instantiated=False)``); the snapshot reads
    the instance, so it sees the default, as ``stored_from_item`` (the re-plan's read) does: both
    views of one item agree.
    """
    defaulted = bind_model(Defaulted, MOTO)
    connection = defaulted._get_connection()
    item = {"pk": {"S": "r1"}, "email": {"S": "e@x.io"}}  # Written by another writer: no status.
    connection.put_item("r1", attributes={"email": {"S": "e@x.io"}})
    loaded = defaulted.get("r1")
    assert loaded.status == "live"  # PynamoDB applied the default.
    context = _context(defaulted)
    eager = context.stored_from_item(item)
    assert snapshot.known(context, loaded) == eager


def test_snapshot__map_changed_in_place_after_save__lock_released(moto_backend: None) -> None:
    """A condition attribute changed in place after save(): the next save() sees it and releases the lock.

    The snapshot keeps a copy of a value that can change in place (here a MapAttribute the partial
    constraint reads); sharing the instance's object, it would change with it.
    """
    flagged = bind_model(Flagged, MOTO)
    record = flagged(pk="a", email="a@x.io", flags={"active": True})
    record.save()
    assert flagged.unique_owner(email="a@x.io") == ("a",)
    assert record.flags is not None
    record.flags.active = False  # In place: the same MapAttribute object.
    with RequestCounter(flagged) as counter:
        record.save()
    # One request: the snapshot still says active, so the plan releases the lock at once (a
    # snapshot changed with the instance would plan no change, and its compare-and-swap would
    # fail and send the write again from the stored item).
    assert counter.operations == ["TransactWriteItems"]
    assert flagged.unique_owner(email="a@x.io") is None
    flagged(pk="b", email="a@x.io", flags={"active": True}).save()  # The value is free again.
    assert flagged.unique_owner(email="a@x.io") == ("b",)


def test_versioned_writer_over_unversioned_item__version_checked(moto_backend: None) -> None:
    """A versioned class replacing another class's item sends its own version check.

    The re-plan over the stored item guards with the stored class's planner; whether the write is
    versioned is the writer's (a versioned save() whose version is not the stored one fails).
    """

    class Creature(UniqueMixin, Model):
        class Meta:
            table_name = "write-path-creatures"
            region = "us-east-1"

        pk = UnicodeAttribute(hash_key=True)
        kind = DiscriminatorAttribute()
        name = UniqueAttribute(UnicodeAttribute(null=True))

    class Plain(Creature, discriminator="plain"):
        pass

    class Versioned(Creature, discriminator="versioned"):
        version = VersionAttribute()

    Creature.create_table(wait=True, billing_mode="PAY_PER_REQUEST")
    Plain(pk="c1", name="tom").save()
    stale = Versioned(pk="c1", name="tom")
    stale.version = 3  # It believes version 3 is stored; the item has no version.
    with pytest.raises(ConditionFailed):
        stale.save()
    assert type(Creature.get("c1")) is Plain


# --- a record whose range key is None: the key left out, as PynamoDB leaves it -------------


def test_guarded_update__range_key_none__equals_pynamodb_builder(moto_backend: None) -> None:
    """PynamoDB's builder leaves the range key out when its value is None (DynamoDB then answers
    ValidationException, raised as ``UpdateError``); the guarded update's key does the same.
    """
    accounts = bind_model(Account, MOTO)
    instance = accounts(pk="ACCT#1", email="e@x.io")
    instance.sk = None
    actions = [accounts.email.set("e@x.io")]
    assumed = Stored(exists=True, values={"email": "e@x.io"})
    plan = _planner(accounts).write("update", assumed, {"email": "e@x.io"})
    assert not plan.transactional
    built = record_kwargs(instance, plan.record, None, actions, add_version_condition=True)
    assert built == _pynamodb_update(instance, plan.record.condition, actions)


def test_update__range_key_none__raises_pynamodb_error(moto_backend: None) -> None:
    """End to end: update() of such a record raises PynamoDB's UpdateError (not an IndexError)."""
    accounts = bind_model(Account, MOTO)
    instance = accounts(pk="ACCT#1", email="e@x.io")
    instance.sk = None
    with pytest.raises(UpdateError):
        instance.update(actions=[accounts.email.set("e@x.io")])


def test_delete__range_key_none__raises_pynamodb_error(moto_backend: None) -> None:
    """delete() of a lock-less record whose range key is None raises PynamoDB's error, not an IndexError."""
    accounts = bind_model(Account, MOTO)
    instance = accounts(pk="ACCT#1", email=None)
    instance.email = None
    instance.sk = None
    with pytest.raises(Exception) as info:  # noqa: PT011 - PynamoDB's DeleteError expected.
        instance.delete()
    assert not isinstance(info.value, IndexError)


# --- the guard text cache belongs to its planner ---------------------------------------------


def test_guard_text_cache__per_planner() -> None:
    """Two planners, guards of the same shape: each gets its own attribute names.

    The cache was once keyed by ``id(planner)``: a planner collected with its model class (the
    registry holds models weakly) left its text under an address a new planner could get.
    """
    first, second = dataclasses.replace(_planner(OneA)), dataclasses.replace(_planner(OneB))
    built_first = guard_condition(Guard(first, Stored(exists=True, values={"alpha": "x"})))
    built_second = guard_condition(Guard(second, Stored(exists=True, values={"beta": "y"})))
    assert built_first["ExpressionAttributeNames"] == {"#0": "alpha"}
    assert built_second["ExpressionAttributeNames"] == {"#0": "beta"}


# --- sent() order ---------------------------------------------------------------------


def _reference_sent(plan: Plan) -> list[PlanAction]:
    """The order by grouping, as PynamoDB's transact_write_items groups: by op, the record first in its group."""
    groups: dict[str, list[PlanAction]] = {group: [] for group in SENT_ORDER}
    groups["check"].extend(plan.checks)
    groups[plan.record.op].append(plan.record)
    for release in plan.releases:
        groups[release.op].append(release)
    groups["put"].extend(plan.puts)
    return [action for group in SENT_ORDER for action in groups[group]]


def _held_plans() -> list[Plan]:
    planner = _planner(Held)
    full = {"a": "a1", "b": "b1", "c": "c1", "d": "d1"}
    other = {"a": "a2", "b": "b2", "c": "c2", "d": "d2"}
    stored = Stored(exists=True, values=full)
    keys = {name: str(key) for name, key in planner.keys(full).items()}
    plans = []
    for op in ("put", "update"):
        plans.append(planner.write(op, ABSENT if op == "put" else Stored(exists=True), other))
        plans.append(planner.write(op, stored, other))
        plans.append(planner.write(op, stored, {**full, "b": "b2", "c": "c2"}))
        plans.append(planner.write(op, stored, other, not_ours=frozenset({keys["B"], keys["A"]})))
        plans.append(planner.write(op, stored, {**full, "a": None, "d": None}))
    plans.append(planner.delete(stored))
    plans.append(planner.delete(stored, not_ours=frozenset({keys["C"], keys["D"]})))
    plans.append(planner.delete(ABSENT))
    # Hand-made plans: every interleaving of hold and plain releases, with checks.
    constraints = {c.name: c for c in planner.constraints}
    hold_a, plain_b, hold_c, plain_d = (constraints[n] for n in ("A", "B", "C", "D"))
    releases = (
        LockRelease(plain_b, "kb"),
        LockRelease(hold_a, "ka"),
        LockRelease(plain_d, "kd"),
        LockRelease(hold_c, "kc"),
    )
    checks = (LockNotOurs(plain_d, "kd2"), LockNotOurs(hold_a, "ka2"))
    puts = (LockPut(hold_c, ("x",), "kx"), LockPut(plain_b, ("y",), "ky"))
    for op in ("put", "update", "delete"):
        record = RecordWrite(op, None)  # type: ignore[arg-type]
        for rel in (releases, releases[::-1], releases[:2], releases[1::2], ()):
            plans.append(Plan(record, rel, puts if op != "delete" else (), ABSENT, checks))
            plans.append(Plan(record, rel, (), ABSENT, ()))
    return plans


def test_sent__equals_the_sorted_order_of_before() -> None:
    """Checks, deletes, puts, updates; each group in its previous order; holds are puts; the record first."""
    plans = _held_plans()
    assert any(isinstance(a, LockRelease) and a.op == "put" for p in plans for a in p.releases)
    for plan in plans:
        sent = plan.sent()
        assert [id(a) for a in sent] == [id(a) for a in _reference_sent(plan)], plan
        ops = [a.op for a in sent]
        assert ops == sorted(ops, key=SENT_ORDER.index)


# --- the guarded update equals PynamoDB's builder -------------------------------------


def _shape_actions(shapes: Any, email: str) -> list[list[Action]]:
    return [
        [shapes.email.set(email)],
        [shapes.email.set(email), shapes.handle.remove()],
        [shapes.email.set(email), shapes.bio.set("poet"), shapes.visits.add(1)],
        [shapes.email.set(email), shapes.profile.city.set("Paris"), shapes.profile.zip.remove()],
        [shapes.email.set(email), shapes.tags[0].set("first"), shapes.tags[2].remove()],
        [shapes.email.set(email), shapes.tags.set(shapes.tags.append(["z"]))],
        [shapes.email.set(email), shapes.tags.set(shapes.tags.prepend(["a"]))],
        [shapes.email.set(email), shapes.labels.add({"x", "y"}), shapes.counts.delete({1, 2})],
        [shapes.email.set(email), shapes.visits.set(shapes.visits + 1), shapes.bio.set(shapes.bio | "none")],
        [shapes.email.set(email), shapes.handle.set("h"), shapes.code.set(7)],
        [shapes.code.set(8), shapes.handle.set("hh"), shapes.email.set(email), shapes.bio.remove()],
        [shapes.email.set(email), shapes.profile.set({"city": "Rome"}), shapes.labels.remove()],
        [shapes.email.set(email), shapes.visits.set(shapes.visits - 2), shapes.counts.add({3})],
    ]


@pytest.mark.parametrize(
    "stored",
    [
        pytest.param(Stored(exists=False), id="absent"),
        pytest.param(Stored(exists=True, values={"email": "old@x.io"}), id="one"),
        pytest.param(Stored(exists=True, values={"email": "old@x.io", "handle": "h0", "code": 3}), id="all"),
        pytest.param(Stored(exists=True, values={"handle": "h0"}), id="other"),
    ],
)
def test_guarded_update__action_shapes__equal_pynamodb_builder(moto_backend: None, stored: Stored) -> None:
    """Nested map paths, list indexes, add/delete/remove, functions, attr_names, the guarded attributes themselves."""
    shapes = bind_model(Shapes, MOTO)
    planner = _planner(shapes)
    context = _context(shapes)
    for email in ("new@x.io", "NEWER@x.io"):
        for actions in _shape_actions(shapes, email):
            instance = shapes(pk="S#1", rev=3, email=email)
            changes = updates.update_changes(context, actions)
            desired = {**stored.values, **changes}
            plan = planner.write("update", stored, desired)
            built = record_kwargs(instance, plan.record, None, actions, add_version_condition=True)
            assert built == _pynamodb_update(instance, plan.record.condition, actions), actions


def test_guarded_update__polymorphic__equals_pynamodb_builder(moto_backend: None) -> None:
    """The guard's class check takes the first value placeholders; the actions' follow."""
    Pet.create_table(wait=True, billing_mode="PAY_PER_REQUEST")
    dog = Dog(pk="c1", name="tom", age=3)
    planner = _planner(Dog)
    for stored in (Stored(exists=False), Stored(exists=True, values={"name": "tom"})):
        actions = [Dog.name.set("felix"), Dog.age.add(1), Dog.kind.set(Dog)]
        plan = planner.write("update", stored, {"name": "felix"})
        built = record_kwargs(dog, plan.record, None, actions, add_version_condition=True)
        assert built == _pynamodb_update(dog, plan.record.condition, actions)


def test_guarded_update__numeric_keys__equal_pynamodb_builder(moto_backend: None) -> None:
    """A numeric hash and range key with attr_names, locks elsewhere."""
    model = bind_model(NumKeyed, MOTO)
    instance = model(id=7, rev=2, email="n@x.io")
    plan = _planner(model).write("update", Stored(exists=True, values={"email": "m@x.io"}), {"email": "n@x.io"})
    actions = [model.email.set("n@x.io")]
    built = record_kwargs(instance, plan.record, None, actions, add_version_condition=True)
    assert built == _pynamodb_update(instance, plan.record.condition, actions)


# --- owner() serializes the key as PynamoDB does ---------------------------------------


@pytest.mark.parametrize(
    ("model", "values"),
    [
        pytest.param(Account, {"pk": "ACCT#1", "sk": "X"}, id="strings"),
        pytest.param(Account, {"pk": "ACCT#1", "sk": None}, id="range-none"),
        pytest.param(NumKeyed, {"id": 7, "rev": 2.5}, id="numbers"),
        pytest.param(NumKeyed, {"id": 7, "rev": None}, id="number-range-none"),
        pytest.param(BinKeyed, {"id": b"\x00\xff"}, id="binary"),
        pytest.param(Shapes, {"pk": "S", "rev": 0}, id="zero-range"),
        pytest.param(ComputedKey, {"pk": "Alice"}, id="key-computed-on-read"),
    ],
)
def test_owner__equals_pynamodb_serialized_key(model: type[Model], values: dict[str, Any]) -> None:
    """``owner()`` equals ``_get_hash_range_key_serialized_values`` (range None: left out)."""
    instance = model()
    for name, value in values.items():
        setattr(instance, name, value)
    hash_key, range_key = instance._get_hash_range_key_serialized_values()
    expected = (hash_key,) if range_key is None else (hash_key, range_key)
    assert _context(model).owner(instance) == expected


def test_owner__key_computed_on_read__locks_name_the_key_pynamodb_stores(moto_backend: None) -> None:
    """A key attribute overriding ``__get__``: each lock names the record as PynamoDB keys it, so the
    audit finds no foreign lock, and a change and a delete release the locks the save took."""
    model = bind_model(ComputedKey, MOTO)
    record = model(pk="Alice", email="a@x.io")
    record.save()
    table = model._get_connection().connection.client
    items = table.scan(TableName=model.Meta.table_name, ConsistentRead=True)["Items"]
    (lock,) = [item for item in items if item["pk"]["S"].startswith("UNIQ#")]
    assert sorted(item["pk"]["S"] for item in items) == ["UNIQ#EMAIL#a@x.io", "alice"]
    assert lock["uniq_owner_hash"] == {"S": "alice"}
    assert audit(model).clean
    record.email = "b@x.io"
    record.save()
    record.update(actions=[model.bio.set("poet")])
    assert audit(model).clean
    record.delete()
    assert table.scan(TableName=model.Meta.table_name, ConsistentRead=True)["Items"] == []


# --- a snapshot equals the read of the stored item --------------------------------------------


def _shapes_items() -> list[dict[str, Any]]:
    return [
        {"PK": {"S": "S#1"}, "Rev": {"N": "3"}},
        {"PK": {"S": "S#1"}, "Rev": {"N": "3"}, "Email": {"S": "a@x.io"}, "#handle": {"S": "h"}, "Code": {"N": "7"}},
        {"PK": {"S": "S#1"}, "Rev": {"N": "3.5"}, "Email": {"NULL": True}, "Code": {"N": "-0.25"}},
        {"PK": {"S": "S#1"}, "Rev": {"N": "3"}, "email": {"S": "python-name-is-not-stored@x.io"}},
    ]


@pytest.mark.parametrize("item", _shapes_items())
def test_snapshot__equals_stored_from_item(moto_backend: None, item: dict[str, Any]) -> None:
    """attr_names, a numeric range key, NULL and absent values: a load's snapshot equals stored_from_item."""
    shapes = bind_model(Shapes, MOTO)
    context = _context(shapes)
    loaded = shapes.from_raw_data(dict(item))
    known = snapshot.known(context, loaded)
    assert known == context.stored_from_item(item)
    assert known is not None
    assert known.values == context.values(loaded)
    assert vars(loaded)["_uniq_snapshot"] == (context.key(loaded), known)


def test_snapshot__key_changed_after_load__unknown(moto_backend: None) -> None:
    """A loaded instance whose key changed knows nothing of the record under its new key."""
    shapes = bind_model(Shapes, MOTO)
    context = _context(shapes)
    loaded = shapes.from_raw_data({"PK": {"S": "S#1"}, "Rev": {"N": "3"}, "Email": {"S": "a@x.io"}})
    loaded.rev = 4
    assert snapshot.known(context, loaded) is None
    loaded.rev = 3
    assert snapshot.known(context, loaded) == Stored(
        exists=True, values={"email": "a@x.io", "handle": None, "code": None}
    )


def test_snapshot__polymorphic_load(moto_backend: None) -> None:
    """A base-class query yields the stored class; its snapshot is read by that class's context."""
    Pet.create_table(wait=True, billing_mode="PAY_PER_REQUEST")
    Dog(pk="c1", name="tom").save()
    loaded: Any = Pet.get("c1")
    assert type(loaded) is Dog
    assert snapshot.known(_context(Dog), loaded) == Stored(exists=True, values={"name": "tom"})
    loaded.name = "felix"
    loaded.save()
    assert Dog.unique_owner(name="felix") == ("c1",)
    assert Dog.unique_owner(name="tom") is None


def test_snapshot__get_then_move__one_transaction_no_read(moto_backend: None) -> None:
    """A loaded record moves its value in one TransactWriteItems, read from the remembered item."""
    shapes = with_locks(bind_model(Shapes, MOTO))
    shapes(pk="S#1", rev=3, email="a@x.io", code=7).save()
    loaded = shapes.get("S#1", 3)
    with RequestCounter(shapes) as counter:
        loaded.update(actions=[shapes.email.set("b@x.io"), shapes.visits.add(1)])
    assert counter.operations == ["TransactWriteItems", "GetItem"]  # The GetItem: loading ALL_NEW after.
    assert shapes.unique_owner(email="b@x.io") == ("S#1", 3)
    assert shapes.unique_owner(email="a@x.io") is None
    with RequestCounter(shapes) as counter:
        loaded.update(actions=[shapes.bio.set("x")])
    assert counter.operations == ["UpdateItem"]


def test_snapshot__loaded_item_read_when_a_write_asks(moto_backend: None) -> None:
    """A load keeps its item and reads it at the first write: the values it loaded, whatever the
    instance or the caller's copy of the response hold since."""
    shapes = with_locks(bind_model(Shapes, MOTO))
    shapes(pk="S#1", rev=3, email="a@x.io", code=7).save()
    loaded = shapes.get("S#1", 3)
    response = loaded.update(actions=[shapes.bio.set("x")])
    # The caller changes the response and the instance: what is stored is still what was loaded.
    response["Attributes"].pop("Email")
    response["Attributes"]["Code"] = {"N": "8"}
    loaded.email = "b@x.io"
    assert snapshot.known(_context(shapes), loaded) == Stored(
        exists=True, values={"email": "a@x.io", "handle": None, "code": 7}
    )
    with RequestCounter(shapes) as counter:
        loaded.save()
    assert counter.operations == ["TransactWriteItems"]  # Planned right the first time.
    assert shapes.unique_owner(email="b@x.io") == ("S#1", 3)
    assert shapes.unique_owner(email="a@x.io") is None
    assert shapes.unique_owner(code=7) == ("S#1", 3)


def test_numeric_keys_in_lock_table__lifecycle(moto_backend: None) -> None:
    """Numeric keys, attr_names and a separate lock table: save, load, move, delete."""
    model = with_locks(bind_model(NumKeyed, MOTO))
    model(id=7, rev=2, email="n@x.io").save()
    loaded = model.get(7, 2)
    loaded.email = "m@x.io"
    loaded.save()
    assert model.unique_owner(email="m@x.io") == (7, 2)
    assert model.unique_owner(email="n@x.io") is None
    loaded.delete()
    assert model.unique_owner(email="m@x.io") is None


# --- TransactWriteItems sent as PynamoDB sends it ---------------------------------------


def _grouped(table: str) -> dict[str, list[dict[str, Any]]]:
    def key(pk: str) -> dict[str, Any]:
        return {"PK": {"S": pk}, "SK": {"S": "PROFILE"}}

    return {
        "check": [{"TableName": table, "Key": key("c"), "ConditionExpression": "attribute_not_exists (PK)"}],
        "delete": [{"TableName": table, "Key": key("d")}],
        "put": [{"TableName": table, "Item": {**key("p"), "email": {"S": "x"}}}],
        "update": [
            {
                "TableName": table,
                "Key": key("u"),
                "UpdateExpression": "SET #0 = :0",
                "ExpressionAttributeNames": {"#0": "bio"},
                "ExpressionAttributeValues": {":0": {"S": "b"}},
            }
        ],
    }


def test_transact__same_request_as_pynamodb(moto_backend: None) -> None:
    """The same operation arguments as ``Connection.transact_write_items``, token and capacity included."""
    accounts = bind_model(Account, MOTO)
    connection = accounts._get_connection().connection
    grouped = _grouped(accounts.Meta.table_name)
    with RequestCounter(accounts) as counter:
        connection.transact_write_items(
            condition_check_items=grouped["check"],
            delete_items=grouped["delete"],
            put_items=grouped["put"],
            update_items=grouped["update"],
            client_request_token="tok-a",
        )
        send_transaction(connection, grouped, "tok-b")
        connection.transact_write_items([], [], grouped["put"], [])
        send_transaction(connection, {"put": grouped["put"]}, None)
    theirs, ours, theirs_plain, ours_plain = counter.params("TransactWriteItems")
    assert theirs.pop("ClientRequestToken") == "tok-a"
    assert ours.pop("ClientRequestToken") == "tok-b"
    assert ours == theirs
    # botocore fills in a token left out (an idempotency token): a random one on both.
    assert ours_plain.pop("ClientRequestToken") != theirs_plain.pop("ClientRequestToken")
    assert ours_plain == theirs_plain


@pytest.mark.parametrize("failure", ["no-table", "cancelled"])
def test_transact__errors_wrapped_as_pynamodb(moto_backend: None, failure: str) -> None:
    """TransactWriteError, its message, its cause, its context and its cancellation reasons, as PynamoDB's."""
    accounts = bind_model(Account, MOTO)
    connection = accounts._get_connection().connection
    table = "missing-table" if failure == "no-table" else accounts.Meta.table_name
    grouped = _grouped(table)
    if failure == "cancelled":
        accounts(pk="c", email="c@x.io").save()  # The ConditionCheck fails.
    with pytest.raises(TransactWriteError) as theirs_raised:
        connection.transact_write_items(grouped["check"], grouped["delete"], grouped["put"], grouped["update"])
    # A failed condition comes back as the library's WriteFailed, PynamoDB's error its cause.
    with pytest.raises(TransactWriteError if failure == "no-table" else WriteFailed) as ours_raised:
        send_transaction(connection, grouped, None, attempts=1)
    theirs = theirs_raised.value
    ours = ours_raised.value.cause if isinstance(ours_raised.value, WriteFailed) else ours_raised.value
    if failure == "no-table":
        # The library names the missing table (TableNotFound, a TransactWriteError with the same
        # cause); the error wrapped as PynamoDB wraps it is its __cause__.
        assert isinstance(ours, TableNotFound)
        assert ours.tables == ("missing-table",)
        assert ours.cause_response_code == theirs.cause_response_code
        assert isinstance(ours.__cause__, TransactWriteError)
        assert ours.cause is ours.__cause__.cause
        ours = ours.__cause__
    assert isinstance(ours, TransactWriteError)
    assert type(ours) is type(theirs)
    assert str(ours) == str(theirs)
    assert type(ours.cause) is type(theirs.cause)
    assert ours.cause_response_code == theirs.cause_response_code
    assert ours.__cause__ is None
    assert theirs.__cause__ is None
    assert ours.__context__ is ours.cause
    assert theirs.__context__ is theirs.cause
    assert [r and r.code for r in ours.cancellation_reasons] == [r and r.code for r in theirs.cancellation_reasons]


# --- tokens ----------------------------------------------------------------------------


def test_new_token__format_and_uniqueness() -> None:
    """32 hex characters, never repeated; a forked child draws its own (no state shared with the parent)."""
    tokens = [new_token() for _ in range(10_000)]
    assert len(set(tokens)) == len(tokens)
    assert all(re.fullmatch(r"[0-9a-f]{32}", t) for t in tokens)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child.
        try:
            os.write(write, new_token().encode())
        finally:
            os._exit(0)
    os.close(write)
    child = os.read(read, 64).decode()
    os.close(read)
    os.waitpid(pid, 0)
    parent = new_token()
    assert re.fullmatch(r"[0-9a-f]{32}", child)
    assert child[:16] != parent[:16]
    assert child not in tokens


# --- the shared ABSENT is never changed ----------------------------------------------


def test_absent__unchanged_by_writes(moto_backend: None) -> None:
    """Saves of new records (assumed ABSENT), deletes (remembered as ABSENT), re-plans: ABSENT stays empty."""
    accounts = bind_model(Account, MOTO)
    first = accounts(pk="ACCT#1", email="a@x.io", username="a")
    first.save()
    second = accounts(pk="ACCT#2", email="b@x.io", username="a")
    with pytest.raises(Exception):  # noqa: B017, PT011 - UniqueViolation; only ABSENT matters here.
        second.save()
    first.delete()
    assert vars(first)["_uniq_snapshot"][1] is ABSENT
    first.save()  # Planned from the remembered ABSENT.
    first.email = "c@x.io"
    first.save()
    first.delete()
    assert Stored(exists=False) == ABSENT
    assert dict(ABSENT.values) == {}
    assert ABSENT.keys is None
    assert ABSENT.source is None


def test_update_without_unique_change__plain_update(moto_backend: None) -> None:
    """update() reads the unique changes first: a plain UpdateItem, whatever the snapshot holds."""
    accounts = bind_model(Account, MOTO)
    accounts(pk="ACCT#1", email="a@x.io").save()
    loaded = accounts.get("ACCT#1", "PROFILE")
    with RequestCounter(accounts) as counter:
        response = loaded.update(actions=[accounts.bio.set("x")])
    assert counter.operations == ["UpdateItem"]
    assert response["Attributes"]["bio"] == {"S": "x"}
    assert loaded.bio == "x"


# --- an update that moves no lock sends PynamoDB's own UpdateItem ----------------------------


def _non_unique_actions(shapes: Any) -> list[list[Action]]:
    return [
        [shapes.bio.set("poet")],
        [shapes.visits.add(1)],
        [shapes.profile.city.set("Paris"), shapes.profile.zip.remove()],
        [shapes.tags.set(shapes.tags.append(["z"])), shapes.bio.remove()],
        [shapes.labels.add({"x", "y"}), shapes.counts.delete({1, 2})],
        [shapes.visits.set(shapes.visits + 1), shapes.bio.set(shapes.bio | "none")],
        [shapes.profile.set({"city": "Rome"}), shapes.labels.remove()],
    ]


def _sent_update(instance: Any, update: Any, actions: list[Action], condition: Any) -> list[tuple[str, Any]]:
    """The UpdateItem bodies ``update`` sends, as (key, value) pairs in the order sent."""
    # A refused update is sent all the same: the request is what is compared.
    with RequestCounter(type(instance)) as counter, contextlib.suppress(PynamoDBException):
        update(instance, actions=actions, condition=condition)
    assert counter.operations == ["UpdateItem"]
    return list(counter.calls[0].params.items())


@pytest.mark.parametrize("with_condition", [False, True])
def test_update_without_unique_change__sends_pynamodb_request(moto_backend: None, with_condition: bool) -> None:
    """Nested paths, sets, functions and attr_names, with and without the caller's condition: the
    library's UpdateItem equals PynamoDB's ``update()``'s, key order included."""
    shapes = with_locks(bind_model(Shapes, MOTO))
    shapes.create_table(wait=True, billing_mode="PAY_PER_REQUEST")
    for i, actions in enumerate(_non_unique_actions(shapes)):
        condition = (shapes.visits.does_not_exist() | (shapes.visits < 100)) if with_condition else None
        instance = shapes(pk=f"S#{i}", rev=3, email=f"e{i}@x.io", visits=1, tags=["a"])
        instance.save()
        ours = _sent_update(instance, type(instance).update, list(actions), condition)
        pynamodb = _sent_update(instance, Model.update, list(actions), condition)
        assert ours == pynamodb, actions


def test_update_without_unique_change__bad_condition__pynamodb_error(moto_backend: None) -> None:
    """A condition that is no Condition gets PynamoDB's ValueError, before any request."""
    shapes = with_locks(bind_model(Shapes, MOTO))
    shapes.create_table(wait=True, billing_mode="PAY_PER_REQUEST")
    instance = shapes(pk="S#1", rev=3, email="e@x.io")
    errors = []
    for update in (type(instance).update, Model.update):
        with (
            RequestCounter(shapes) as counter,
            pytest.raises(ValueError, match="must be an instance of Condition") as raised,
        ):
            update(instance, actions=[shapes.bio.set("x")], condition="bio = :x")
        assert counter.operations == []
        errors.append(str(raised.value))
    assert errors[0] == errors[1]


def test_replan__token_derived_from_the_base_and_the_actions_arguments(moto_backend: None) -> None:
    """A re-planned request's token folds the caller's token, the step and each action's own
    arguments (as sent inside TransactItems): the same token as the last release derived, so a
    resend after an upgrade is still the same request."""
    accounts = bind_model(Account, MOTO)
    accounts(pk="a1", email="ada@x.io", username="ada").save()
    stale = accounts.get("a1", "PROFILE")
    fresh = accounts.get("a1", "PROFILE")
    fresh.email = "countess@x.io"
    fresh.save()
    stale.email = "lovelace@x.io"
    with RequestCounter(accounts) as counter:
        stale.save(client_request_token="tok-base")
    first, second = counter.params("TransactWriteItems")
    assert first["ClientRequestToken"] == "tok-base"
    arguments = [kwargs for item in second["TransactItems"] for kwargs in item.values()]
    assert second["ClientRequestToken"] == derive_token("tok-base", 1, arguments)
    assert accounts.get("a1", "PROFILE").email == "lovelace@x.io"


@pytest.mark.parametrize(
    "key",
    [
        "UNIQ#",
        "UNIQ#EMAIL#x",
        "UNIQ$",
        "UNIQ",
        'UNIQ"x',
        "UNIQ#\U0001f600",
        "uniq#x",
        "XUNIQ#",
        "UNIQ%23x",
        "",
        "\U0001f600",
    ],
)
def test_check_key__refused_exactly_when_the_hash_key_starts_with_the_lock_prefix(key: str) -> None:
    """A record hash key is refused when, and only when, it starts with ``UNIQ#`` (tested by
    ordering, without ``startswith``): keys around the prefix in sort order pass."""
    context = _context(Account)
    record = Account(pk=key, email="a@x.io")
    if key.startswith("UNIQ#"):
        with pytest.raises(InvalidUniqueValue, match="reserved for lock items"):
            context.check_key(record)
    else:
        context.check_key(record)


# --- a separate lock table that does not exist ------------------------------------------------


@pytest.mark.backends("moto", "dynoxide")
def test_save__lock_table_missing__names_it_and_create_lock_table(backend: Backend) -> None:
    """A save whose lock table was never created names it and create_lock_table(), still a TransactWriteError."""
    model = bind_model(Account, backend, create=False)
    locks = f"{model.Meta.table_name}-locks"
    model.Meta.unique_lock_table = locks  # type: ignore[attr-defined]
    model.create_table(wait=True, billing_mode="PAY_PER_REQUEST")
    with pytest.raises(TableNotFound) as caught:
        model(pk="ACCT#1", email="ada@lovelace.io").save()
    error = caught.value
    # Handlers written for PynamoDB, and for the library's configuration errors, both catch it.
    assert isinstance(error, TransactWriteError)
    assert isinstance(error, UniqueConfigError)
    assert error.cause_response_code == "ResourceNotFoundException"
    assert error.tables == (locks,)
    assert str(error) == (
        f"lock table {locks!r} does not exist (Meta.unique_lock_table): create it with "
        "pynamodb_unique.create_lock_table(Model)"
    )
