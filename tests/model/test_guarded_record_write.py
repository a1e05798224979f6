"""The record's guarded write: its condition compiled once per shape equals PynamoDB's builder."""

from __future__ import annotations

from typing import Any

import pytest
from _backends import Backend, bind_model
from models import Account
from pynamodb.attributes import DiscriminatorAttribute, UnicodeAttribute
from pynamodb.constants import ALL_OLD
from pynamodb.expressions.update import Action
from pynamodb.models import Model

from pynamodb_unique import UniqueAttribute, UniqueConstraint, UniqueMixin
from pynamodb_unique._core.plan import Stored
from pynamodb_unique._model.registry import planner_of
from pynamodb_unique._write.requests import record_kwargs

STATES = [
    pytest.param(Stored(exists=False), id="absent"),
    pytest.param(Stored(exists=True, values={"email": "a@x.io", "username": "ann"}), id="some-values"),
    pytest.param(
        Stored(exists=True, values={"email": "a@x.io", "username": "ann", "tenant": "t", "slug": "s"}), id="all-values"
    ),
]


def _slow(instance: Any, op: str, condition: Any, actions: list[Action] | None = None) -> dict[str, Any]:
    """What PynamoDB's own builder makes of the same condition (and update actions)."""
    if op == "put":
        built: dict[str, Any] = Model.get_save_kwargs_from_instance(
            instance, condition=condition, return_values_on_condition_failure=ALL_OLD
        )
    elif op == "update":
        built = Model.get_update_kwargs_from_instance(
            instance, actions=list(actions or ()), condition=condition, return_values_on_condition_failure=ALL_OLD
        )
    else:
        built = Model.get_delete_kwargs_from_instance(
            instance, condition=condition, return_values_on_condition_failure=ALL_OLD
        )
    return built


def _update_actions(accounts: Any, email: str) -> list[Action]:
    """A change of the unique email, an attribute the guard names too, and one it does not."""
    return [accounts.email.set(email), accounts.tenant.remove(), accounts.bio.set("poet")]


@pytest.mark.parametrize("stored", STATES)
@pytest.mark.parametrize("op", ["put", "delete"])
def test_guarded_write__equals_pynamodb_builder(moto_backend: None, stored: Stored, op: str) -> None:
    """Twice per shape (compiled, then cached), with other values the second time."""
    accounts = bind_model(Account, Backend("moto", None))
    planner = planner_of(accounts)
    for email in ("ada@x.io", "bob@y.io"):
        instance = accounts(pk=f"ACCT#{email}", email=email, username="ada")
        values = {**stored.values, "email": email} if stored.exists else {}
        assumed = Stored(exists=stored.exists, values=values)
        plan = planner.delete(assumed) if op == "delete" else planner.write("put", assumed, {"email": email})
        assert record_kwargs(instance, plan.record, None, None, add_version_condition=True) == _slow(
            instance, op, plan.record.condition
        )


@pytest.mark.parametrize("stored", STATES)
def test_guarded_update__equals_pynamodb_builder(moto_backend: None, stored: Stored) -> None:
    """An update's actions share the guard's placeholders as PynamoDB numbers them (compiled, then cached)."""
    accounts = bind_model(Account, Backend("moto", None))
    planner = planner_of(accounts)
    for email in ("ada@x.io", "bob@y.io"):
        instance = accounts(pk=f"ACCT#{email}", email=email, username="ada")
        assumed = Stored(exists=stored.exists, values=dict(stored.values))
        actions = _update_actions(accounts, email)
        plan = planner.write("update", assumed, {**assumed.values, "email": email, "tenant": None})
        built = record_kwargs(instance, plan.record, None, actions, add_version_condition=True)
        assert built == _slow(instance, "update", plan.record.condition, actions)
        assert "UpdateExpression" in built


def test_guarded_write__polymorphic_class_in_condition(moto_backend: None) -> None:
    """A polymorphic record's guard checks its class too, as PynamoDB would serialize it."""

    class Animal(UniqueMixin, Model):
        class Meta:
            table_name = "guard-animals"
            region = "us-east-1"

        pk = UnicodeAttribute(hash_key=True)
        kind = DiscriminatorAttribute()
        name = UniqueAttribute(UnicodeAttribute(null=True))

    class Cat(Animal, discriminator="cat"):
        pass

    Animal.create_table(wait=True, billing_mode="PAY_PER_REQUEST")
    planner = planner_of(Cat)
    cat = Cat(pk="c1", name="tom")
    for op in ("put", "delete"):
        assumed = Stored(exists=True, values={"name": "tom"})
        plan = planner.delete(assumed) if op == "delete" else planner.write("put", assumed, {"name": "tom"})
        built = record_kwargs(cat, plan.record, None, None, add_version_condition=True)
        assert built == _slow(cat, op, plan.record.condition)
        assert {"S": "cat"} in built["ExpressionAttributeValues"].values()


def test_guarded_delete__more_values_than_placeholder_table__equals_pynamodb_builder() -> None:
    """A guard of more values than the table of numbered placeholders still numbers them as PynamoDB does.

    Thirty-five compound constraints over seventy attributes, all absent: the delete's
    compare-and-swap holds one NULL check per attribute.
    """
    constraints = [UniqueConstraint(f"a{i}", f"b{i}") for i in range(35)]
    meta = {"table_name": "wide", "host": "http://localhost:1", "unique_constraints": constraints}
    names = [f"{side}{i}" for i in range(35) for side in "ab"]
    namespace: dict[str, Any] = {
        "Meta": type("Meta", (), meta),
        "pk": UnicodeAttribute(hash_key=True),
        **{name: UnicodeAttribute(null=True) for name in names},
    }
    wide: Any = type("Wide", (UniqueMixin, Model), namespace)
    instance = wide(pk="w1")
    plan = planner_of(wide).delete(Stored(exists=True, values=dict.fromkeys(names)))
    built = record_kwargs(instance, plan.record, None, None, add_version_condition=True)
    assert len(built["ExpressionAttributeValues"]) == 70
    assert built == _slow(instance, "delete", plan.record.condition)
