"""The mixin as a drop-in for PynamoDB: what plain PynamoDB code sees, and the model shapes it meets.

Models are built inside factory functions (fresh classes per test): class definition is itself
under test here, and PynamoDB's discriminator map refuses registering a value twice.
"""

from __future__ import annotations

import json
import re
from abc import ABCMeta, abstractmethod
from typing import Any

import pytest
from _backends import REGION, Backend, RequestCounter, bind_model, unique_table_name
from _invariant import actual_locks, assert_invariant, raw_items
from botocore.exceptions import ClientError
from models import Account, Versioned
from pynamodb.attributes import (
    DiscriminatorAttribute,
    ListAttribute,
    MapAttribute,
    NumberAttribute,
    UnicodeAttribute,
    VersionAttribute,
)
from pynamodb.exceptions import DeleteError, PutError, UpdateError
from pynamodb.models import MetaModel, Model
from pynamodb.transactions import TransactWrite as PynamoTransactWrite

from pynamodb_unique import (
    ConditionFailed,
    TransactWrite,
    UniqueAttribute,
    UniqueConfigError,
    UniqueConstraint,
    UniqueMixin,
    UniqueViolation,
    is_lock_item,
)

ADA_KEY = "UNIQ#EMAIL#ada@lovelace.io"
CCF = "ConditionalCheckFailedException"


def _meta(table: str, backend: Backend | None = None) -> type:
    """A Meta class for ``table`` on ``backend`` (no backend: a table only named, never created)."""
    return type("Meta", (), {"table_name": table, "region": REGION, "host": backend.host if backend else None})


def _without_table(params: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in params.items() if k != "TableName"}


def _sent(counter: RequestCounter) -> list[tuple[str, dict[str, Any]]]:
    """The calls recorded, table names aside."""
    return [(call.operation, _without_table(call.params)) for call in counter.calls]


# --- 1. a mixin model without constraints writes as PynamoDB ------------------------------------


def _things(backend: Backend, *, versioned: bool = False) -> tuple[type[Model], type[Model]]:
    """A mixin model without constraints (number keys) and its plain twin, each in its own table."""

    def attributes() -> dict[str, Any]:
        attrs: dict[str, Any] = {
            "id": NumberAttribute(hash_key=True),
            "seq": NumberAttribute(range_key=True),
            "label": UnicodeAttribute(null=True),
            "count": NumberAttribute(null=True),
        }
        if versioned:
            attrs["version"] = VersionAttribute()
        return attrs

    thing = type("Thing", (UniqueMixin, Model), {"Meta": _meta(unique_table_name("thing"), backend), **attributes()})
    plain = type("PlainThing", (Model,), {"Meta": _meta(unique_table_name("plain"), backend), **attributes()})
    for model in (thing, plain):
        model.create_table(wait=True, billing_mode="PAY_PER_REQUEST")
    return thing, plain


def _run_on_both(thing: type[Model], plain: type[Model], scenario: Any) -> list[list[tuple[str, dict[str, Any]]]]:
    """Run ``scenario(model)`` on both models; return the calls each sent, table names aside."""
    sent = []
    for model in (thing, plain):
        with RequestCounter(model) as counter:
            scenario(model)
        sent.append(_sent(counter))
    return sent


def test_no_constraint__class_definition_accepted(backend: Backend) -> None:
    """A mixin model with number keys and no constraint is defined and its table created."""
    thing, _ = _things(backend)
    assert thing.exists()


def test_no_constraint__save_new__one_put_item_as_plain(backend: Backend) -> None:
    """save() of a new record sends PynamoDB's PutItem: no condition, no ReturnValuesOnConditionCheckFailure."""
    thing, plain = _things(backend)
    mine, theirs = _run_on_both(thing, plain, lambda m: m(id=1, seq=2, label="a").save())
    assert [op for op, _ in mine] == ["PutItem"]
    assert "ConditionExpression" not in mine[0][1]
    assert "ReturnValuesOnConditionCheckFailure" not in mine[0][1]
    assert mine == theirs
    assert thing.get(1, 2).label == "a"


def test_no_constraint__save_existing__one_put_item_as_plain(backend: Backend) -> None:
    """save() of a loaded record sends the same single PutItem as plain PynamoDB."""
    thing, plain = _things(backend)
    loaded = {}
    for model in (thing, plain):
        model(id=1, seq=2, label="a").save()
        loaded[model] = model.get(1, 2)

    def change(model: type[Model]) -> None:
        loaded[model].label = "b"
        loaded[model].save()

    mine, theirs = _run_on_both(thing, plain, change)
    assert [op for op, _ in mine] == ["PutItem"]
    assert "ConditionExpression" not in mine[0][1]
    assert "ReturnValuesOnConditionCheckFailure" not in mine[0][1]
    assert mine == theirs
    assert thing.get(1, 2).label == "b"


def test_no_constraint__delete__one_delete_item_as_plain(backend: Backend) -> None:
    """delete() of a stored record sends one DeleteItem, the same as plain PynamoDB, and deletes it."""
    thing, plain = _things(backend)
    loaded = {}
    for model in (thing, plain):
        model(id=1, seq=2, label="a").save()
        loaded[model] = model.get(1, 2)
    mine, theirs = _run_on_both(thing, plain, lambda m: loaded[m].delete())
    assert [op for op, _ in mine] == ["DeleteItem"]
    assert mine == theirs
    assert raw_items(thing) == []


def test_no_constraint__update__same_update_item_as_plain(backend: Backend) -> None:
    """update() sends the same UpdateItem as plain PynamoDB and loads the result."""
    thing, plain = _things(backend)
    loaded = {}
    for model in (thing, plain):
        model(id=1, seq=2, label="a", count=1).save()
        loaded[model] = model.get(1, 2)

    def update(model: type[Model]) -> None:
        loaded[model].update(actions=[model.count.add(2), model.label.set("b")])

    mine, theirs = _run_on_both(thing, plain, update)
    assert [op for op, _ in mine] == ["UpdateItem"]
    assert mine == theirs
    assert (loaded[thing].count, loaded[thing].label) == (3, "b")


def test_no_constraint__batch_write__writes(backend: Backend) -> None:
    """batch_write() of a model without constraints writes its records."""
    thing, _ = _things(backend)
    with thing.batch_write() as batch:
        for i in range(3):
            batch.save(thing(id=i, seq=0, label=f"n{i}"))
    assert sorted((t.id, t.label) for t in thing.scan()) == [(0, "n0"), (1, "n1"), (2, "n2")]


def test_no_constraint__scan_and_query__no_filter_expression(backend: Backend) -> None:
    """scan() and query() send what plain PynamoDB sends, with no FilterExpression added."""
    thing, plain = _things(backend)
    for model in (thing, plain):
        model(id=1, seq=2).save()
    mine, theirs = _run_on_both(thing, plain, lambda m: (list(m.scan()), list(m.query(1))))
    assert [op for op, _ in mine] == ["Scan", "Query"]
    assert all("FilterExpression" not in params for _, params in mine)
    assert mine == theirs


@pytest.mark.backends("moto", "dynoxide")
def test_no_constraint__version_conflict__put_error_conditional_check_failed(backend: Backend) -> None:
    """A stale VersionAttribute raises PynamoDB's PutError whose cause is ConditionalCheckFailedException."""
    thing, plain = _things(backend, versioned=True)
    thing(id=1, seq=2, label="a").save()
    first, stale = thing.get(1, 2), thing.get(1, 2)
    first.label = "b"
    first.save()
    stale.label = "c"
    with RequestCounter(thing) as counter, pytest.raises(PutError) as info:
        stale.save()
    assert info.value.cause_response_code == CCF
    assert thing.get(1, 2).label == "b"
    # The request is plain PynamoDB's.
    plain(id=1, seq=2, label="a").save()
    plain.get(1, 2).save()
    plain_stale = plain(id=1, seq=2, label="c", version=1)
    with RequestCounter(plain) as plain_counter, pytest.raises(PutError):
        plain_stale.save()
    assert _sent(counter) == _sent(plain_counter)


@pytest.mark.backends("moto", "dynoxide")
def test_no_constraint__caller_condition_fails__put_error_conditional_check_failed(backend: Backend) -> None:
    """The caller's failing condition raises PynamoDB's PutError with ConditionalCheckFailedException."""
    thing, _ = _things(backend)
    thing(id=1, seq=2, label="a").save()
    with pytest.raises(PutError) as info:
        thing(id=1, seq=2, label="b").save(condition=thing.label == "zzz")
    assert info.value.cause_response_code == CCF
    assert thing.get(1, 2).label == "a"


# --- 2. ConditionFailed is what PynamoDB's optimistic-locking handler expects -------------------


def _assert_plain_condition_failure(error: Exception) -> None:
    assert isinstance(error, ConditionFailed)
    assert error.cause_response_code == CCF
    assert isinstance(error.cause, ClientError)
    assert error.cause.response["Error"]["Code"] == CCF


def _stale_versioned(backend: Backend) -> tuple[type[Versioned], Versioned]:
    """A stored Versioned record at version 2, and an instance of it loaded at version 1."""
    model = bind_model(Versioned, backend)
    model(id="v1", handle="h1", note="n1").save()
    stale = model.get("v1", consistent_read=True)
    fresh = model.get("v1", consistent_read=True)
    fresh.note = "n2"
    fresh.save()
    return model, stale


@pytest.mark.backends("moto", "dynoxide")
@pytest.mark.parametrize(
    ("change", "transactional"),
    [
        pytest.param({"handle": "h2"}, True, id="unique-change-transaction"),
        pytest.param({"note": "n3"}, False, id="no-unique-change-single-item"),
    ],
)
def test_condition_failed__stale_version_save__put_error_with_ccf_cause(
    backend: Backend, change: dict[str, str], transactional: bool
) -> None:
    """A save() with a stale version raises a PutError whose cause is a ConditionalCheckFailedException."""
    model, stale = _stale_versioned(backend)
    for name, value in change.items():
        setattr(stale, name, value)
    with RequestCounter(model) as counter, pytest.raises(PutError) as info:
        stale.save()
    _assert_plain_condition_failure(info.value)
    assert ("TransactWriteItems" in counter.operations) is transactional
    stored = model.get("v1", consistent_read=True)
    assert (stored.handle, stored.note, stored.version) == ("h1", "n2", 2)


@pytest.mark.backends("moto", "dynoxide")
@pytest.mark.parametrize(
    ("field", "value", "transactional"),
    [
        pytest.param("handle", "h2", True, id="unique-change-transaction"),
        pytest.param("note", "n3", False, id="no-unique-change-single-item"),
    ],
)
def test_condition_failed__stale_version_update__update_error_with_ccf_cause(
    backend: Backend, field: str, value: str, transactional: bool
) -> None:
    """An update() with a stale version raises an UpdateError whose cause is a ConditionalCheckFailedException."""
    model, stale = _stale_versioned(backend)
    with RequestCounter(model) as counter, pytest.raises(UpdateError) as info:
        stale.update(actions=[getattr(model, field).set(value)])
    _assert_plain_condition_failure(info.value)
    assert ("TransactWriteItems" in counter.operations) is transactional
    assert model.get("v1", consistent_read=True).version == 2


@pytest.mark.backends("moto", "dynoxide")
def test_condition_failed__stale_version_delete__delete_error_with_ccf_cause(backend: Backend) -> None:
    """A delete() with a stale version (a transaction: it holds a lock) raises a DeleteError with CCF cause."""
    model, stale = _stale_versioned(backend)
    with RequestCounter(model) as counter, pytest.raises(DeleteError) as info:
        stale.delete()
    _assert_plain_condition_failure(info.value)
    assert "TransactWriteItems" in counter.operations
    assert model.get("v1", consistent_read=True).version == 2


@pytest.mark.backends("moto", "dynoxide")
@pytest.mark.parametrize(
    ("email", "transactional"),
    [
        pytest.param("new@lovelace.io", True, id="unique-change-transaction"),
        pytest.param("ada@lovelace.io", False, id="no-unique-change-single-item"),
    ],
)
def test_condition_failed__caller_condition__put_error_with_ccf_cause(
    backend: Backend, email: str, transactional: bool
) -> None:
    """A save() whose condition fails raises a PutError whose cause is a ConditionalCheckFailedException."""
    accounts = bind_model(Account, backend)
    accounts(pk="A", email="ada@lovelace.io", bio="old").save()
    account = accounts.get("A", "PROFILE", consistent_read=True)
    account.email = email
    account.bio = "new"
    with RequestCounter(accounts) as counter, pytest.raises(PutError) as info:
        account.save(condition=accounts.bio == "something else")
    _assert_plain_condition_failure(info.value)
    assert ("TransactWriteItems" in counter.operations) is transactional
    stored = accounts.get("A", "PROFILE", consistent_read=True)
    assert (stored.email, stored.bio) == ("ada@lovelace.io", "old")


# --- 3. update() moving a lock returns and loads the stored item (ALL_NEW) ----------------------


def _stored_item(model: type[Model], *key: str) -> dict[str, Any]:
    names = [model._hash_key_attribute().attr_name]
    if model._range_key_attribute() is not None:
        names.append(model._range_key_attribute().attr_name)
    client = model._get_connection().connection.client
    response = client.get_item(
        TableName=model.Meta.table_name,
        Key={name: {"S": value} for name, value in zip(names, key, strict=True)},
        ConsistentRead=True,
    )
    item: dict[str, Any] = response["Item"]
    return item


def test_update_unique_change__returns_attributes_and_loads_stored_item(backend: Backend) -> None:
    """update() changing a unique value returns {"Attributes": stored item} and the instance holds it."""
    accounts = bind_model(Account, backend)
    accounts(pk="A", email="ada@lovelace.io", username="ada", bio="old", visits=1).save()
    account = accounts.get("A", "PROFILE", consistent_read=True)
    # Another writer changes an attribute no unique constraint reads.
    accounts.get("A", "PROFILE", consistent_read=True).update(actions=[accounts.bio.set("by another")])
    with RequestCounter(accounts) as counter:
        response = account.update(actions=[accounts.email.set("new@lovelace.io")])
    assert "TransactWriteItems" in counter.operations
    stored = _stored_item(accounts, "A", "PROFILE")
    assert response["Attributes"] == stored
    assert (account.email, account.username, account.bio, account.visits) == (
        "new@lovelace.io",
        "ada",
        "by another",
        1,
    )


def test_update_unique_change__hand_built_instance__loads_other_stored_attributes(backend: Backend) -> None:
    """A hand-built Account(pk=...).update() setting email returns the stored item and holds its other attributes."""
    accounts = bind_model(Account, backend)
    accounts(pk="A", email="ada@lovelace.io", username="ada", tenant="t", slug="s", bio="hi", visits=7).save()
    account = accounts(pk="A")
    response = account.update(actions=[accounts.email.set("x@y.io")])
    stored = _stored_item(accounts, "A", "PROFILE")
    assert response["Attributes"] == stored
    assert stored["email"] == {"S": "x@y.io"}
    assert (account.email, account.username, account.tenant, account.slug, account.bio, account.visits) == (
        "x@y.io",
        "ada",
        "t",
        "s",
        "hi",
        7,
    )
    lock_keys = sorted(i["PK"]["S"] for i in raw_items(accounts) if i["PK"]["S"].startswith("UNIQ#"))
    assert lock_keys == ["UNIQ#EMAIL#x@y.io", "UNIQ#HANDLE#ada", "UNIQ#TENANT_SLUG#t#s"]


# --- 4. a committed update never raises because the record vanished before the read -------------


def test_update_unique_change_non_literal__record_deleted_before_read__no_error(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """update() with email.set and visits.add succeeds even when another writer deletes the record before the read."""
    accounts = bind_model(Account, backend)
    accounts(pk="A", email="ada@lovelace.io", visits=1).save()
    account = accounts.get("A", "PROFILE", consistent_read=True)
    connection = accounts._get_connection()
    original = connection.get_item
    deleted: list[bool] = []

    def get_item_after_another_delete(*args: Any, **kwargs: Any) -> Any:
        if not deleted:
            deleted.append(True)
            # Another writer (through the library: it releases the locks) deletes the record.
            accounts.get("A", "PROFILE", consistent_read=True).delete()
        return original(*args, **kwargs)

    monkeypatch.setattr(connection, "get_item", get_item_after_another_delete)
    with RequestCounter(accounts) as counter:
        account.update(actions=[accounts.email.set("new@lovelace.io"), accounts.visits.add(1)])
    monkeypatch.undo()
    assert deleted == [True]  # the read after the commit happened, and the record was gone
    assert counter.operations[0] == "TransactWriteItems"
    assert account.email == "new@lovelace.io"
    assert raw_items(accounts) == []


# --- 5. UniqueAttribute nested in a map is refused ----------------------------------------------


def test_nested_unique__in_map_attribute__config_error_names_path() -> None:
    """A UniqueAttribute inside a MapAttribute used on a model is refused, naming address.zip."""

    class Address(MapAttribute[str, Any]):
        street = UnicodeAttribute(null=True)
        zip = UniqueAttribute(UnicodeAttribute(null=True))

    with pytest.raises(UniqueConfigError, match=r"address\.zip"):
        type(
            "Person",
            (UniqueMixin, Model),
            {
                "Meta": _meta(unique_table_name("person")),
                "pk": UnicodeAttribute(hash_key=True),
                "address": Address(null=True),
            },
        )


def test_nested_unique__in_list_of_maps__config_error_names_path() -> None:
    """A UniqueAttribute inside the map of a ListAttribute(of=...) is refused, naming the list and zip."""

    class Address(MapAttribute[str, Any]):
        zip = UniqueAttribute(UnicodeAttribute(null=True))

    with pytest.raises(UniqueConfigError, match=r"addresses\W*\.zip"):
        type(
            "Person",
            (UniqueMixin, Model),
            {
                "Meta": _meta(unique_table_name("person")),
                "pk": UnicodeAttribute(hash_key=True),
                "email": UniqueAttribute(UnicodeAttribute(null=True)),
                "addresses": ListAttribute(of=Address, null=True),
            },
        )


# --- 6. reads never return a lock item as a record ----------------------------------------------


@pytest.fixture
def ada_accounts(backend: Backend) -> type[Account]:
    accounts = bind_model(Account, backend)
    accounts(pk="ACCT#1", email="ada@lovelace.io", username="ada").save()
    return accounts


def test_get__lock_key__does_not_exist(ada_accounts: type[Account]) -> None:
    """Model.get() of a lock item's key raises DoesNotExist."""
    with pytest.raises(Account.DoesNotExist):
        ada_accounts.get(ADA_KEY, "LOCK")
    with pytest.raises(Account.DoesNotExist):
        ada_accounts.get(ADA_KEY, "LOCK", consistent_read=True)


def test_batch_get__record_and_lock_key__yields_only_record(ada_accounts: type[Account]) -> None:
    """batch_get() of a record key and a lock key yields only the record."""
    got = list(ada_accounts.batch_get([("ACCT#1", "PROFILE"), (ADA_KEY, "LOCK")], consistent_read=True))
    assert [(a.pk, a.sk, a.email) for a in got] == [("ACCT#1", "PROFILE", "ada@lovelace.io")]


def test_refresh__lock_key__does_not_exist(ada_accounts: type[Account]) -> None:
    """refresh() of an instance whose key is a lock key raises DoesNotExist."""
    with pytest.raises(Account.DoesNotExist):
        ada_accounts(pk=ADA_KEY, sk="LOCK").refresh(consistent_read=True)


def test_is_lock_item__raw_lock_and_record(ada_accounts: type[Account]) -> None:
    """is_lock_item() tells a raw lock item from a raw record item."""
    items = {item["PK"]["S"]: item for item in raw_items(ada_accounts)}
    assert is_lock_item(items[ADA_KEY]) is True
    assert is_lock_item(items["UNIQ#HANDLE#ada"]) is True
    assert is_lock_item(items["ACCT#1"]) is False


# --- 7. polymorphic families ----------------------------------------------------------------------

_FAMILY_LOCKS = (("name", "NAME"), ("chip", "CAT_CHIP"), ("tag", "DOG_TAG"))


def _animals(backend: Backend, table: str) -> tuple[Any, Any, Any, Any]:
    """A fresh polymorphic family in ``table``: Animal (NAME), Cat (CAT_CHIP), Dog (DOG_TAG), Bird."""

    class Animal(UniqueMixin, Model):
        Meta = _meta(table, backend)
        pk = UnicodeAttribute(hash_key=True)
        cls = DiscriminatorAttribute()
        name = UniqueAttribute(UnicodeAttribute(null=True))

    class Cat(Animal, discriminator="cat"):
        chip = UniqueAttribute(UnicodeAttribute(null=True), name="CAT_CHIP")

    class Dog(Animal, discriminator="dog"):
        tag = UniqueAttribute(UnicodeAttribute(null=True), name="DOG_TAG")

    class Bird(Animal, discriminator="bird"):
        """No constraint of its own."""

    Animal.create_table(wait=True, billing_mode="PAY_PER_REQUEST")
    return Animal, Cat, Dog, Bird


@pytest.fixture
def animals(backend: Backend) -> tuple[Any, Any, Any, Any]:
    return _animals(backend, unique_table_name("animals"))


def _animal_locks(model: type[Model]) -> dict[str, str]:
    """Lock key -> owner hash key, as stored; asserts they match the records' values one to one."""
    locks: dict[str, str] = {}
    expected: dict[str, str] = {}
    for item in raw_items(model):
        pk = item["pk"]["S"]
        if pk.startswith("UNIQ#"):
            locks[pk] = item["uniq_owner_hash"]["S"]
            continue
        for attr, constraint in _FAMILY_LOCKS:
            if attr in item:
                key = f"UNIQ#{constraint}#{item[attr]['S']}"
                assert key not in expected, f"records share {key}"
                expected[key] = pk
    assert locks == expected
    return locks


def test_polymorphic__dog_over_stored_cat__replaces_and_moves_locks(animals: tuple[Any, Any, Any, Any]) -> None:
    """A hand-built Dog saved over a stored Cat replaces it: the Cat's locks released, the Dog's taken."""
    animal, cat, dog, _ = animals
    cat(pk="X1", name="tom", chip="c1").save()
    with RequestCounter() as counter:
        dog(pk="X1", name="rex", tag="t1").save()
    assert 1 <= counter.count() <= 2
    stored = animal.get("X1", consistent_read=True)
    assert type(stored).__name__ == "Dog"
    assert (stored.name, stored.tag) == ("rex", "t1")
    assert _animal_locks(animal) == {"UNIQ#NAME#rex": "X1", "UNIQ#DOG_TAG#t1": "X1"}
    # The freed values are free for another record.
    cat(pk="X2", name="tom", chip="c1").save()
    assert _animal_locks(animal) == {
        "UNIQ#NAME#rex": "X1",
        "UNIQ#DOG_TAG#t1": "X1",
        "UNIQ#NAME#tom": "X2",
        "UNIQ#CAT_CHIP#c1": "X2",
    }


def test_polymorphic__loaded_cat_delete__releases_its_locks(animals: tuple[Any, Any, Any, Any]) -> None:
    """A loaded Cat's delete() releases NAME and CAT_CHIP."""
    animal, cat, _, _ = animals
    cat(pk="X1", name="tom", chip="c1").save()
    loaded = animal.get("X1", consistent_read=True)
    assert type(loaded).__name__ == "Cat"
    loaded.delete()
    assert raw_items(animal) == []


def test_polymorphic__bird_over_stored_cat__releases_cat_locks(animals: tuple[Any, Any, Any, Any]) -> None:
    """A Bird (no constraint of its own) saved over a stored Cat releases the Cat's locks."""
    animal, cat, _, bird = animals
    cat(pk="X1", name="tom", chip="c1").save()
    bird(pk="X1").save()
    assert type(animal.get("X1", consistent_read=True)).__name__ == "Bird"
    assert _animal_locks(animal) == {}
    cat(pk="X2", name="tom", chip="c1").save()
    assert _animal_locks(animal) == {"UNIQ#NAME#tom": "X2", "UNIQ#CAT_CHIP#c1": "X2"}


def test_polymorphic__dog_takes_cat_name__violation(animals: tuple[Any, Any, Any, Any]) -> None:
    """A Dog may not take the name a Cat holds: the family shares the NAME constraint."""
    animal, cat, dog, _ = animals
    cat(pk="X1", name="tom", chip="c1").save()
    with pytest.raises(UniqueViolation) as info:
        dog(pk="X2", name="tom").save()
    assert [(v.constraint, v.owner) for v in info.value.violations] == [("NAME", ("X1",))]
    assert [i["pk"]["S"] for i in raw_items(animal) if not i["pk"]["S"].startswith("UNIQ#")] == ["X1"]
    _animal_locks(animal)


def test_polymorphic__scan__no_lock_items(animals: tuple[Any, Any, Any, Any]) -> None:
    """Animal.scan() yields the records of every class and no lock item."""
    animal, cat, dog, bird = animals
    cat(pk="X1", name="tom", chip="c1").save()
    dog(pk="X2", name="rex", tag="t1").save()
    bird(pk="X3", name="tweety").save()
    assert len(_animal_locks(animal)) == 5
    assert sorted((a.pk, type(a).__name__) for a in animal.scan()) == [("X1", "Cat"), ("X2", "Dog"), ("X3", "Bird")]


# --- 8. constraint names are namespaces of the lock table ---------------------------------------


def _email_model(model_name: str, table: str, backend: Backend | None = None, **email_options: Any) -> type[Model]:
    return type(
        model_name,
        (UniqueMixin, Model),
        {
            "Meta": _meta(table, backend),
            "pk": UnicodeAttribute(hash_key=True),
            "email": UniqueAttribute(UnicodeAttribute(null=True), **email_options),
        },
    )


def test_namespace__two_models_derive_same_name__config_error() -> None:
    """Two unrelated models deriving EMAIL in one table: the second is refused, naming both and name=."""
    table = unique_table_name("ns")
    _email_model("Author", table)
    with pytest.raises(UniqueConfigError) as info:
        _email_model("Reviewer", table)
    message = str(info.value)
    assert "Author" in message
    assert "Reviewer" in message
    assert "name=" in message


def test_namespace__derived_names_in_different_tables__accepted() -> None:
    """The same derived name in two different tables is no clash."""
    _email_model("Author", unique_table_name("ns"))
    _email_model("Reviewer", unique_table_name("ns"))


def test_namespace__same_explicit_name__shared_and_violation_names_owner_model(backend: Backend) -> None:
    """With the same explicit name=, an email held by an Author record is refused to a Reviewer."""
    table = unique_table_name("ns")
    author = _email_model("Author", table, backend, name="EMAIL")
    reviewer = _email_model("Reviewer", table, backend, name="EMAIL")
    author.create_table(wait=True, billing_mode="PAY_PER_REQUEST")
    author(pk="a1", email="x@y.io").save()
    with pytest.raises(UniqueViolation) as info:
        reviewer(pk="r1", email="x@y.io").save()
    (violation,) = info.value.violations
    assert (violation.constraint, violation.owner, violation.owner_model) == ("EMAIL", ("a1",), "Author")
    assert sorted(i["pk"]["S"] for i in raw_items(author)) == ["UNIQ#EMAIL#x@y.io", "a1"]
    reviewer(pk="r1", email="z@y.io").save()


def test_namespace__same_explicit_name_different_part_counts__config_error() -> None:
    """The same explicit name on a single and a compound constraint in one table is refused."""
    table = unique_table_name("ns")
    _email_model("Author", table, name="EMAIL")
    with pytest.raises(UniqueConfigError):
        type(
            "Reviewer",
            (UniqueMixin, Model),
            {
                "Meta": type(
                    "Meta",
                    (),
                    {
                        "table_name": table,
                        "region": REGION,
                        "host": None,
                        "unique_constraints": [UniqueConstraint("email", "domain", name="EMAIL")],
                    },
                ),
                "pk": UnicodeAttribute(hash_key=True),
                "email": UnicodeAttribute(null=True),
                "domain": UnicodeAttribute(null=True),
            },
        )


def _define_member(table: str) -> type[Model]:
    class Member(UniqueMixin, Model):
        Meta = _meta(table)
        pk = UnicodeAttribute(hash_key=True)
        email = UniqueAttribute(UnicodeAttribute(null=True))

    return Member


def test_namespace__class_redefined_same_qualname__accepted() -> None:
    """Defining the same class (same module and qualname) twice for one table is accepted."""
    table = unique_table_name("ns")
    first = _define_member(table)
    second = _define_member(table)
    assert first is not second


def test_namespace__sibling_subclasses_derive_same_name__config_error() -> None:
    """Two sibling subclasses of one base, each deriving EMAIL, are refused."""
    table = unique_table_name("ns")

    class Base(UniqueMixin, Model):
        Meta = _meta(table)
        pk = UnicodeAttribute(hash_key=True)

    class Left(Base):
        email = UniqueAttribute(UnicodeAttribute(null=True))

    with pytest.raises(UniqueConfigError, match="Left"):

        class Right(Base):
            email = UniqueAttribute(UnicodeAttribute(null=True))


# --- polymorphic updates, namespaces, late table names, transactions, app metaclasses ----------


def test_polymorphic__update_through_another_class__refused_before_writing(
    animals: tuple[Any, Any, Any, Any],
) -> None:
    """update() through a Dog over a stored Cat raises PynamoDB's ValueError and writes nothing."""
    animal, cat, dog, bird = animals
    cat(pk="X", name="tom", chip="c1").save()
    before = raw_items(animal)
    with pytest.raises(ValueError, match="returned class: Cat"):
        bird(pk="X").update(actions=[animal.name.set("felix")])  # no lock of Bird's own moves
    with pytest.raises(ValueError, match="returned class: Cat"):
        dog(pk="X").update(actions=[dog.tag.set("t9")])  # a Dog lock would move
    assert sorted(json.dumps(i, sort_keys=True) for i in raw_items(animal)) == sorted(
        json.dumps(i, sort_keys=True) for i in before
    )
    _animal_locks(animal)


def test_namespace__explicit_name_across_record_tables__config_error() -> None:
    """Models of different tables may not share a namespace (lock owners are record keys)."""

    class Ticket(UniqueMixin, Model):
        Meta = type("Meta", (), {"table_name": "tickets-y", "region": REGION, "unique_lock_table": "codes-y"})
        pk = UnicodeAttribute(hash_key=True)
        code = UniqueAttribute(UnicodeAttribute(null=True), name="CODE")

    with pytest.raises(UniqueConfigError, match="different tables"):

        class Order(UniqueMixin, Model):
            Meta = type("Meta", (), {"table_name": "orders-y", "region": REGION, "unique_lock_table": "codes-y"})
            pk = UnicodeAttribute(hash_key=True)
            code = UniqueAttribute(UnicodeAttribute(null=True), name="CODE")


def test_late_table_name__locks_still_hidden(backend: Backend) -> None:
    """A model whose Meta.table_name is set after the class is defined still hides its locks."""

    class Late(UniqueMixin, Model):
        class Meta:
            region = REGION

        pk = UnicodeAttribute(hash_key=True, attr_name="PK")
        email = UniqueAttribute(UnicodeAttribute(null=True))

    Late.Meta.table_name = unique_table_name("late")  # type: ignore[attr-defined]
    Late.Meta.host = backend.host  # type: ignore[attr-defined]
    Late.create_table(wait=True, billing_mode="PAY_PER_REQUEST")
    Late(pk="A1", email="ada@x.io").save()
    assert [item.pk for item in Late.scan()] == ["A1"]
    with pytest.raises(Late.DoesNotExist):
        Late.get("UNIQ#EMAIL#ada@x.io")


def test_no_constraint__transact_write__as_pynamodb(backend: Backend) -> None:
    """The library's TransactWrite sends PynamoDB's own items for a mixin model without constraints."""
    thing, plain = _things(backend)
    for model in (thing, plain):
        model(id=1, seq=1, count=1).save()
    sent = []
    for model in (thing, plain):
        connection = model._get_connection().connection
        token = unique_table_name("tx")  # dynoxide remembers tokens: one per model.
        with RequestCounter(model) as counter, TransactWrite(connection=connection, client_request_token=token) as tx:
            tx.update(model(id=1, seq=1), actions=[model.count.set(2)])  # type: ignore[attr-defined]
            tx.save(model(id=1, seq=2, count=3))
        (call,) = counter.calls
        items = [{kind: _without_table(item) for kind, item in entry.items()} for entry in call.params["TransactItems"]]
        sent.append((call.operation, items))
    assert sent[0] == sent[1]
    assert sent[0][0] == "TransactWriteItems"


@pytest.mark.backends("moto", "dynoxide")
def test_no_constraint__transact_write_without_token__same_bytes_as_pynamodb(backend: Backend) -> None:
    """Without constraints or a caller's token, the library's TransactWrite sends PynamoDB's exact body.

    PynamoDB sends no token of its own; botocore fills one in (a fresh UUID each time), which
    both bodies must carry in the same place.
    """
    thing, plain = _things(backend)
    botocore_token = re.compile(rb'"ClientRequestToken": "[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}"')
    for model in (thing, plain):
        model(id=1, seq=1, count=1).save()
        connection = model._get_connection().connection
        bodies = []
        for transaction in (PynamoTransactWrite, TransactWrite):
            with RequestCounter(model) as counter, transaction(connection=connection) as tx:
                tx.condition_check(model, 1, 4, condition=model.count.does_not_exist())  # type: ignore[attr-defined]
                tx.update(model(id=1, seq=1), actions=[model.count.set(2)])  # type: ignore[attr-defined]
                tx.save(model(id=1, seq=2, count=3))
                tx.delete(model(id=1, seq=3))
            (call,) = counter.calls
            assert call.operation == "TransactWriteItems"
            body, tokens = botocore_token.subn(b'"ClientRequestToken": "?"', call.body)
            assert tokens == 1
            bodies.append(body)
        assert bodies[1] == bodies[0]


class ABCModelMeta(MetaModel, ABCMeta):
    """An application's own PynamoDB metaclass, for abstract base models (a common pattern)."""


def test_app_metaclass__abstract_base__mixin_composes(backend: Backend) -> None:
    """An abstract base with the app's metaclass takes the mixin; its concrete subclass keeps its values unique."""

    class Base(UniqueMixin, Model, metaclass=ABCModelMeta):
        pk = UnicodeAttribute(hash_key=True, attr_name="PK")

        @abstractmethod
        def kind(self) -> str:
            """Each concrete model names its kind."""

    class Member(Base):
        Meta = _meta(unique_table_name("member"), backend)
        email = UniqueAttribute(UnicodeAttribute(null=True), normalize=str.casefold)

        def kind(self) -> str:
            return "member"

    assert isinstance(Member, ABCModelMeta)
    with pytest.raises(TypeError, match="abstract"):
        Base(pk="x")  # type: ignore[abstract]
    Member.create_table(wait=True, billing_mode="PAY_PER_REQUEST")
    ada = Member(pk="A", email="ada@x.io")
    ada.save()
    with pytest.raises(UniqueViolation) as info:
        Member(pk="B", email="ADA@x.io").save()
    assert [(v.constraint, v.owner) for v in info.value.violations] == [("EMAIL", ("A",))]
    assert_invariant(Member)
    ada.delete()
    Member(pk="B", email="ADA@x.io").save()
    assert actual_locks(Member) == {"UNIQ#EMAIL#ada@x.io": ("B",)}
    assert_invariant(Member)
