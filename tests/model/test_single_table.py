"""Single-table designs and polymorphic models: audit, repair and backfill read only each model's records."""

from __future__ import annotations

import gc
import weakref
from datetime import timedelta
from typing import Any

import pytest
from _backends import Backend, bind_model, unique_table_name
from _damage import client
from models import Customer, Employee
from pynamodb.attributes import DiscriminatorAttribute, UnicodeAttribute
from pynamodb.expressions.operand import Path
from pynamodb.models import Model

from pynamodb_unique import (
    MissingLock,
    OrphanedLock,
    UniqueAttribute,
    UniqueError,
    UniqueMixin,
    audit,
    backfill,
    is_lock_item,
    repair,
)
from pynamodb_unique._model import context as _context
from pynamodb_unique._model.context import context_of
from pynamodb_unique._model.locks import lock_table
from pynamodb_unique._model.registry import _registered


def _locks(model: type[Model]) -> dict[str, tuple[str, str]]:
    """Lock key -> (owner hash key, owner model) of every lock item in the model's table."""
    items = client(model).scan(TableName=model.Meta.table_name, ConsistentRead=True)["Items"]
    return {
        i["PK"]["S"]: (i["uniq_owner_hash"]["S"], i.get("uniq_owner_model", {}).get("S"))
        for i in items
        if is_lock_item(i)
    }


def _delete_raw(model: type[Model], pk: str, sk: str) -> None:
    client(model).delete_item(TableName=model.Meta.table_name, Key={"PK": {"S": pk}, "SK": {"S": sk}})


def _shop(backend: Backend, *, filters: bool) -> tuple[type[Customer], type[Employee]]:
    table = unique_table_name("shop")
    customers = bind_model(Customer, backend, table)
    employees = bind_model(Employee, backend, table, create=False)
    if filters:
        customers.Meta.unique_item_filter = lambda m: m.sk == "CUSTOMER"  # type: ignore[attr-defined]
        employees.Meta.unique_item_filter = lambda m: m.sk == "EMPLOYEE"  # type: ignore[attr-defined]
    customers(pk="C#1", email="ada@x.io").save()
    customers(pk="C#2", email="bob@x.io").save()
    employees(pk="E#1", badge="B1", email="eve@x.io").save()
    employees(pk="E#2", badge="B2", email="eve@x.io").save()
    return customers, employees


def test_single_table__no_filter__audit_repair_backfill_refuse(backend: Backend) -> None:
    """Without unique_item_filter, a table shared with another model is never guessed at; nothing is written."""
    customers, employees = _shop(backend, filters=False)
    _delete_raw(customers, "UNIQ#CUSTOMER_EMAIL#ada@x.io", "LOCK")
    before = _locks(customers)
    for tool in (audit, repair, backfill):
        with pytest.raises(UniqueError, match="unique_item_filter"):
            tool(customers)  # type: ignore[operator]
    with pytest.raises(UniqueError, match="unique_item_filter"):
        repair(employees, apply=True)
    assert _locks(customers) == before


def test_single_table__filters__each_model_audits_only_its_records(backend: Backend) -> None:
    """With filters, each model's audit is clean and sees only its own records and namespaces."""
    customers, employees = _shop(backend, filters=True)
    customer_report, employee_report = audit(customers), audit(employees)
    assert customer_report.clean
    assert employee_report.clean
    assert (customer_report.records, customer_report.locks) == (2, 2)
    assert (employee_report.records, employee_report.locks) == (2, 2)


def test_single_table__filters__repair_and_backfill_touch_only_the_model(backend: Backend) -> None:
    """Repair and backfill recreate a customer's lock, owned by the customer, and nothing for employees."""
    customers, employees = _shop(backend, filters=True)
    _delete_raw(customers, "UNIQ#CUSTOMER_EMAIL#ada@x.io", "LOCK")
    _delete_raw(customers, "UNIQ#BADGE#B2", "LOCK")
    report = audit(customers)
    assert [(type(p), p.lock_key) for p in report.problems] == [(MissingLock, "UNIQ#CUSTOMER_EMAIL#ada@x.io")]
    assert repair(customers, apply=True).clean
    assert _locks(customers)["UNIQ#CUSTOMER_EMAIL#ada@x.io"] == ("C#1", "Customer")
    assert "UNIQ#BADGE#B2" not in _locks(customers)
    assert backfill(employees).clean
    assert _locks(customers)["UNIQ#BADGE#B2"] == ("E#2", "Employee")
    # Employees' emails never became customer locks: a customer may still sign up with one.
    assert not any(key.endswith("eve@x.io") for key in _locks(customers))
    customers(pk="C#3", email="eve@x.io").save()
    assert audit(customers).clean
    assert audit(employees).clean


def _members(backend: Backend) -> tuple[type[Model], type[Model]]:
    """Two models sharing one explicit namespace (a handle unique across users and orgs)."""
    table = unique_table_name("handles")

    class User(UniqueMixin, Model):
        class Meta:
            table_name = table
            region = "us-east-1"
            host = backend.host
            unique_item_filter = staticmethod(lambda m: m.sk == "USER")

        pk = UnicodeAttribute(hash_key=True, attr_name="PK")
        sk = UnicodeAttribute(range_key=True, attr_name="SK", default="USER")
        handle = UniqueAttribute(UnicodeAttribute(null=True), name="HANDLE")

    class Org(UniqueMixin, Model):
        class Meta:
            table_name = table
            region = "us-east-1"
            host = backend.host
            unique_item_filter = staticmethod(lambda m: m.sk == "ORG")

        pk = UnicodeAttribute(hash_key=True, attr_name="PK")
        sk = UnicodeAttribute(range_key=True, attr_name="SK", default="ORG")
        slug = UniqueAttribute(UnicodeAttribute(null=True), name="HANDLE")

    User.create_table(wait=True, billing_mode="PAY_PER_REQUEST")
    return User, Org


def test_shared_namespace__audited_across_models(backend: Backend) -> None:
    """A namespace two models share is audited across both: the other model's locks are no orphans."""
    users, orgs = _members(backend)
    users(pk="U#1", handle="ada").save()
    orgs(pk="O#1", slug="acme").save()
    assert audit(users).clean
    assert audit(orgs).clean
    assert audit(users).records == 2
    _delete_raw(orgs, "O#1", "ORG")
    problems = audit(users).problems
    assert [(type(p), p.lock_key, p.owner) for p in problems] == [(OrphanedLock, "UNIQ#HANDLE#acme", ("O#1", "ORG"))]
    assert repair(users, apply=True).clean
    users(pk="U#2", handle="acme").save()
    assert _locks(users)["UNIQ#HANDLE#acme"] == ("U#2", "User")


def _animals(backend: Backend) -> dict[str, Any]:
    """A polymorphic family in one table; built fresh (PynamoDB's discriminator map refuses redefinitions)."""
    table = unique_table_name("animals")

    class Animal(UniqueMixin, Model):
        class Meta:
            table_name = table
            region = "us-east-1"
            host = backend.host

        pk = UnicodeAttribute(hash_key=True, attr_name="PK")
        sk = UnicodeAttribute(range_key=True, attr_name="SK", default="ANIMAL")
        kind = DiscriminatorAttribute()
        name = UniqueAttribute(UnicodeAttribute(null=True))

    class Cat(Animal, discriminator="cat"):
        chip = UniqueAttribute(UnicodeAttribute(null=True), name="CAT_CHIP")

    class Dog(Animal, discriminator="dog"):
        tag = UniqueAttribute(UnicodeAttribute(null=True), name="DOG_TAG")

    Animal.create_table(wait=True, billing_mode="PAY_PER_REQUEST")
    return {"Animal": Animal, "Cat": Cat, "Dog": Dog}


def test_polymorphic__audit_base_and_each_subclass(backend: Backend) -> None:
    """audit() works on the base (every subclass's constraints) and on each subclass beside the others."""
    zoo = _animals(backend)
    zoo["Cat"](pk="A#1", name="tom", chip="c1").save()
    zoo["Dog"](pk="A#2", name="rex", tag="t1").save()
    base = audit(zoo["Animal"])
    assert base.clean
    assert set(base.constraints) == {"NAME", "CAT_CHIP", "DOG_TAG"}
    assert (base.records, base.locks) == (2, 4)
    dog = audit(zoo["Dog"])
    assert dog.clean
    assert set(dog.constraints) == {"NAME", "DOG_TAG"}
    assert audit(zoo["Cat"]).clean


def test_polymorphic__repair_creates_locks_owned_by_the_subclass(backend: Backend) -> None:
    """A missing subclass lock is reported by base and subclass audits, and recreated for its owner."""
    zoo = _animals(backend)
    animal = zoo["Animal"]
    zoo["Cat"](pk="A#1", name="tom", chip="c1").save()
    zoo["Dog"](pk="A#2", name="rex", tag="t1").save()
    _delete_raw(animal, "UNIQ#CAT_CHIP#c1", "LOCK")
    _delete_raw(animal, "UNIQ#NAME#rex", "LOCK")
    expected = {"UNIQ#CAT_CHIP#c1", "UNIQ#NAME#rex"}
    assert {p.lock_key for p in audit(animal).problems} == expected
    assert {p.lock_key for p in audit(zoo["Dog"]).problems} == {"UNIQ#NAME#rex"}
    assert repair(animal, apply=True).clean
    locks = _locks(animal)
    assert locks["UNIQ#CAT_CHIP#c1"] == ("A#1", "Cat")
    assert locks["UNIQ#NAME#rex"] == ("A#2", "Dog")
    assert audit(animal).clean


def _families(backend: Backend, *, filters: bool) -> dict[str, Any]:
    """Two polymorphic families and a plain model in one table, roots storing no class of their own."""
    table = unique_table_name("families")

    def meta(condition: Any) -> type:
        options = {"table_name": table, "region": "us-east-1", "host": backend.host}
        if filters:
            options["unique_item_filter"] = staticmethod(condition)
        return type("Meta", (), options)

    class Animal(UniqueMixin, Model):
        Meta = meta(lambda m: Path("kind").is_in("dog"))
        pk = UnicodeAttribute(hash_key=True, attr_name="PK")
        sk = UnicodeAttribute(range_key=True, attr_name="SK", default="ANIMAL")
        kind = DiscriminatorAttribute()
        name = UniqueAttribute(UnicodeAttribute(null=True))

    class Dog(Animal, discriminator="dog"):
        pass

    class Vehicle(UniqueMixin, Model):
        Meta = meta(lambda m: Path("kind").is_in("car"))
        pk = UnicodeAttribute(hash_key=True, attr_name="PK")
        sk = UnicodeAttribute(range_key=True, attr_name="SK", default="VEHICLE")
        kind = DiscriminatorAttribute()
        plate = UniqueAttribute(UnicodeAttribute(null=True))

    class Car(Vehicle, discriminator="car"):
        pass

    class Person(UniqueMixin, Model):
        Meta = meta(lambda m: m.sk == "PERSON")
        pk = UnicodeAttribute(hash_key=True, attr_name="PK")
        sk = UnicodeAttribute(range_key=True, attr_name="SK", default="PERSON")
        handle = UniqueAttribute(UnicodeAttribute(null=True))

    Animal.create_table(wait=True, billing_mode="PAY_PER_REQUEST")
    Dog(pk="D1", name="rex").save()
    Car(pk="C1", plate="AB-1").save()
    Person(pk="P1", handle="rex").save()
    return {"Animal": Animal, "Dog": Dog, "Vehicle": Vehicle, "Car": Car, "Person": Person}


def test_families__no_filters__refused_instead_of_claiming_others(backend: Backend) -> None:
    """A family whose root stores no class, beside other models, needs a filter; nothing is written."""
    models = _families(backend, filters=False)
    before = _locks(models["Animal"])
    _delete_raw(models["Animal"], "UNIQ#NAME#rex", "LOCK")
    with pytest.raises(UniqueError, match="unique_item_filter"):
        backfill(models["Animal"])
    with pytest.raises(UniqueError, match="unique_item_filter"):
        audit(models["Dog"])
    assert set(_locks(models["Animal"])) == set(before) - {"UNIQ#NAME#rex"}


def test_families__filters__each_audited_apart(backend: Backend) -> None:
    """Two families and a plain model in one table: each audit reads only its own records."""
    models = _families(backend, filters=True)
    for name in ("Animal", "Dog", "Vehicle", "Car", "Person"):
        report = audit(models[name])
        assert report.clean, (name, report.problems)
        assert report.records == 1
    _delete_raw(models["Animal"], "UNIQ#NAME#rex", "LOCK")
    assert backfill(models["Dog"]).clean
    assert _locks(models["Animal"])["UNIQ#NAME#rex"] == ("D1", "Dog")


def test_registry__a_model_nothing_uses__is_forgotten() -> None:
    """The registry holds models weakly: a class defined and dropped (a test's) takes its client with it."""

    def define() -> type[Model]:
        class Passing(UniqueMixin, Model):
            class Meta:
                table_name = "passing-by"
                region = "us-east-1"

            pk = UnicodeAttribute(hash_key=True)
            email = UniqueAttribute(UnicodeAttribute())

        return Passing

    model = define()
    assert model in _registered()
    gone = weakref.ref(model)
    del model
    gc.collect()
    assert gone() is None
    # An abstract model (no Meta, as tests/test_iam.py defines one) is registered too.
    assert all(getattr(getattr(m, "Meta", None), "table_name", None) != "passing-by" for m in _registered())


def _sharing(locks: str, name: str, *, hold: timedelta | None = None) -> type[Model]:
    """A model keeping its locks in the table ``locks``, its one constraint named ``name``."""

    class Sharing(UniqueMixin, Model):
        class Meta:
            table_name = unique_table_name("records")
            region = "us-east-1"
            unique_lock_table = locks

        pk = UnicodeAttribute(hash_key=True)
        value = UniqueAttribute(UnicodeAttribute(), name=name, hold=hold)

    return Sharing


def test_lock_table__model_registered_later_with_a_hold__locks_of_both_expire() -> None:
    """A lock table derived before another model keeping locks there registers is derived again:
    that model's ``hold=`` makes every lock there expiring (a Put then takes an ended hold)."""
    locks = unique_table_name("locks")
    first = _sharing(locks, "FIRST")
    context = context_of(first)
    assert context is not None
    assert not context.locks().expiring
    later = _sharing(locks, "LATER", hold=timedelta(hours=1))
    assert context.locks().expiring
    assert later is not None


def test_lock_table__model_registering_while_derived__derived_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """A model that registers while another derives its lock table (a class defined in another
    thread meanwhile) makes the next write derive it again, not keep the table derived before."""
    locks = unique_table_name("locks")
    first = _sharing(locks, "FIRST")
    context = context_of(first)
    assert context is not None
    derive = lock_table
    late: list[type[Model]] = []

    def registering_meanwhile(model: type[Model]) -> Any:
        table = derive(model)
        if not late:
            late.append(_sharing(locks, "LATE", hold=timedelta(hours=1)))
        return table

    monkeypatch.setattr(_context, "lock_table", registering_meanwhile)
    assert not context.locks().expiring  # Derived before the late model registered.
    assert late
    assert context.locks().expiring
