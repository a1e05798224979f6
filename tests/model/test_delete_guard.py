"""The believed-gone delete guard: its compiled values against PynamoDB's numbering, and what it releases."""

from __future__ import annotations

from typing import Any

import pytest
from _backends import RequestCounter
from _invariant import actual_locks, assert_invariant, locks_and_records
from pynamodb.attributes import DiscriminatorAttribute, UnicodeAttribute, UnicodeSetAttribute
from pynamodb.models import Model

from pynamodb_unique import UniqueAttribute, UniqueConstraint, UniqueMixin
from pynamodb_unique._core.plan import ABSENT, Guard, Planner, Stored
from pynamodb_unique._model.context import context_of
from pynamodb_unique._write.requests import guard_condition

# --- models ----------------------------------------------------------------------------------


class Pet(UniqueMixin, Model):
    """A polymorphic family whose root stores no discriminator value (kind None)."""

    class Meta:
        table_name = "guard-pets"
        region = "us-east-1"

    pk = UnicodeAttribute(hash_key=True)
    kind = DiscriminatorAttribute()
    name = UniqueAttribute(UnicodeAttribute(null=True))
    note = UnicodeAttribute(null=True)


class Dog(Pet, discriminator="dog"):
    pass


class Cat(Pet, discriminator="cat"):
    chip = UniqueAttribute(UnicodeAttribute(null=True))


class Bird(Pet, discriminator="bird"):
    """No constraint of its own: a relative keeps locks."""


class Thing(UniqueMixin, Model):
    """Polymorphic, fixed defaults: one holding a lock (``label``), one read by a partial condition."""

    class Meta:
        table_name = "guard-things"
        region = "us-east-1"

    pk = UnicodeAttribute(hash_key=True)
    cls = DiscriminatorAttribute()
    label = UniqueAttribute(UnicodeAttribute(null=True))


class Box(Thing, discriminator="box"):
    """A fixed default that holds a lock: the believed-gone guard is "gone" alone."""

    size = UniqueAttribute(UnicodeAttribute(null=True, default="small"))


class Tag(Thing, discriminator="tag"):
    """Fixed defaults that hold no lock (the partial condition fails on them): "gone, or bare"."""

    class Meta(Thing.Meta):
        unique_constraints = [
            UniqueConstraint(
                "email", name="VIP_EMAIL", condition=lambda r: "vip" in (r.tags or ()), condition_attributes=("tags",)
            )
        ]

    email = UnicodeAttribute(null=True)
    tags = UnicodeSetAttribute(null=True, default=frozenset({"plain"}))


class Flat(UniqueMixin, Model):
    """Not polymorphic, with a fixed default holding no lock (composite with an absent part)."""

    class Meta:
        table_name = "guard-flat"
        region = "us-east-1"
        unique_constraints = [UniqueConstraint("a", "b", name="AB")]

    pk = UnicodeAttribute(hash_key=True)
    a = UnicodeAttribute(null=True, default="x")
    b = UnicodeAttribute(null=True)


def _planner(model: type[Any]) -> Planner:
    context = context_of(model)
    assert context is not None
    return context.planner


def _family_invariant(model: type[Any]) -> None:
    """assert_invariant for a polymorphic family: each record's locks by its own class's planner."""
    expected: dict[str, tuple[str, ...]] = {}
    for item in locks_and_records(model)[1]:
        instance = model.from_raw_data(item)
        planner = _planner(type(instance))
        values = {name: getattr(instance, name) for name in planner.unique_names}
        for key in planner.keys(values).values():
            if key is not None:
                assert key not in expected
                expected[key] = (item["pk"]["S"],)
    assert actual_locks(model) == expected


PLANNERS = [Pet, Dog, Cat, Bird, Box, Tag, Flat]
STORED = [
    ABSENT,
    Stored(exists=True),
    Stored(exists=True, values={"name": "n", "chip": "c", "label": "l", "size": "small", "email": "e", "a": "x"}),
    Stored(exists=True, values={"name": "n", "size": "big", "tags": frozenset({"vip"}), "a": "y", "b": "b"}),
]


# --- a guard's condition is sent as PynamoDB serializes it ------------------------------------


@pytest.mark.parametrize("gone_ok", [True, False])
@pytest.mark.parametrize("stored", STORED, ids=["absent", "bare", "values", "others"])
@pytest.mark.parametrize("model", PLANNERS, ids=lambda m: m.__name__)
def test_guard_condition__matches_condition_serialize(model: type[Any], stored: Stored, gone_ok: bool) -> None:
    """The guard's request arguments are condition().serialize()'s, names inverted as PynamoDB's builders do."""
    planner = _planner(model)
    guard = Guard(planner, stored, gone_ok=gone_ok)
    condition = guard.condition()
    if condition is None:
        assert guard_condition(guard) == {}
        return
    names: dict[str, str] = {}
    expected_values: dict[str, Any] = {}
    expression = condition.serialize(names, expected_values)
    sent = guard_condition(guard)
    assert sent["ConditionExpression"] == expression
    assert sent.get("ExpressionAttributeValues", {}) == expected_values
    assert sent["ExpressionAttributeNames"] == {p: n for n, p in names.items()}


def test_guard_condition__believed_gone__per_planner() -> None:
    """The believed-gone guard of each class is its own text (kind check or none)."""
    for model in PLANNERS:
        guard_condition(Guard(_planner(model), ABSENT, gone_ok=True))
    for model in PLANNERS:
        guard = Guard(_planner(model), ABSENT, gone_ok=True)
        condition = guard.condition()
        assert condition is not None
        names: dict[str, str] = {}
        values: dict[str, Any] = {}
        assert guard_condition(guard)["ConditionExpression"] == condition.serialize(names, values)
    assert _planner(Box).defaults_hold_locks
    assert not _planner(Tag).defaults_hold_locks
    assert not _planner(Flat).defaults_hold_locks


# --- the believed-gone delete against DynamoDB (moto) -----------------------------------------


def _gone(model: type[Any], pk: str, **values: Any) -> Any:
    """An instance that saved and deleted its record: it believes nothing is stored."""
    d = model(pk=pk, **values)
    d.save()
    d.delete()
    return d


def test_delete__believed_gone__own_class_recreated_with_values__releases(moto_backend: None) -> None:
    """A Dog recreated under the key with a name: the believed-gone Dog delete releases its lock."""
    Pet.create_table(wait=True, billing_mode="PAY_PER_REQUEST")
    d = _gone(Dog, "a", name="rex")
    Dog(pk="a", name="fido").save()
    d.delete()
    assert list(Pet.scan(consistent_read=True)) == []
    _family_invariant(Pet)
    Dog(pk="b", name="fido").save()
    _family_invariant(Pet)


def test_delete__believed_gone__sibling_recreated_with_values__not_taken_as_bare(moto_backend: None) -> None:
    """A Cat with a chip under a believed-gone Dog's key: the bare Dog check must not pass; locks stay matched."""
    Pet.create_table(wait=True, billing_mode="PAY_PER_REQUEST")
    d = _gone(Dog, "s")
    Cat(pk="s", chip="c1").save()
    d.delete()
    # Whatever the delete did with the Cat, the locks match the live values.
    _family_invariant(Pet)
    remaining = list(Pet.scan(consistent_read=True))
    if not remaining:
        Cat(pk="t", chip="c1").save()
        _family_invariant(Pet)


def test_delete__believed_gone__sibling_bare_cat__dog_check_fails_first(moto_backend: None) -> None:
    """A bare Cat (chip and name absent) under a Dog's key: the Dog's bare check fails on the class (two requests)."""
    Pet.create_table(wait=True, billing_mode="PAY_PER_REQUEST")
    d = _gone(Dog, "u")
    Cat(pk="u").save()
    with RequestCounter(Pet) as counter:
        d.delete()
    assert counter.count() >= 2, counter.operations
    _family_invariant(Pet)


def test_delete__believed_gone__default_holding_lock__releases(moto_backend: None) -> None:
    """Box recreated bare holds its "small" lock: the "gone"-alone guard fails and the retry releases it."""
    Thing.create_table(wait=True, billing_mode="PAY_PER_REQUEST")
    d = _gone(Box, "b")
    Box(pk="b").save()
    _family_invariant(Thing)
    d.delete()
    assert list(Thing.scan(consistent_read=True)) == []
    _family_invariant(Thing)
    Box(pk="b2").save()
    _family_invariant(Thing)


@pytest.mark.parametrize("tags", [None, set(), {"vip"}])
def test_delete__believed_gone__partial_default__releases(moto_backend: None, tags: Any) -> None:
    """Tag recreated with an email (vip or not, tags empty): the believed-gone delete leaves the invariant."""
    Thing.create_table(wait=True, billing_mode="PAY_PER_REQUEST")
    d = _gone(Tag, "t")
    Tag(pk="t", email="e@x.io", tags=tags).save()
    _family_invariant(Thing)
    d.delete()
    assert list(Thing.scan(consistent_read=True)) == []
    _family_invariant(Thing)
    Tag(pk="t2", email="e@x.io", tags={"vip"}).save()
    _family_invariant(Thing)


def test_delete__believed_gone__recreated_holding_only_defaults__one_request(moto_backend: None) -> None:
    """Flat recreated with no value set: PynamoDB's save stores a="x" (its default), b absent, no lock.

    Before the fix, the "gone, or holding no unique value" guard required every attribute
    absent/NULL, so an item holding its fixed default (what every PynamoDB save writes) failed it:
    the delete read ALL_OLD and sent a second DeleteItem. The guard now checks "absent, NULL or
    equal to the fixed default".
    """
    Flat.create_table(wait=True, billing_mode="PAY_PER_REQUEST")
    d = _gone(Flat, "f", b="b")
    Flat(pk="f").save()
    with RequestCounter(Flat) as counter:
        d.delete()
    assert counter.count() == 1, counter.operations
    assert list(Flat.scan(consistent_read=True)) == []
    assert_invariant(Flat)
