"""Composable transactions: pynamodb_unique.TransactWrite with other models' items."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from _backends import Backend, RequestCounter, bind_model, unique_table_name
from _invariant import actual_locks, assert_invariant, raw_items
from models import Account
from pynamodb.attributes import UnicodeAttribute, VersionAttribute
from pynamodb.exceptions import TransactWriteError
from pynamodb.models import Model
from pynamodb.transactions import TransactWrite as PynamoTransactWrite

from pynamodb_unique import (
    InvalidUniqueValue,
    StaleWrite,
    TableNotFound,
    TransactWrite,
    UniqueError,
    UniqueViolation,
    is_lock_item,
)


class Event(Model):
    """A plain model sharing the transaction (no uniqueness)."""

    class Meta:
        table_name = "events"
        region = "us-east-1"

    id = UnicodeAttribute(hash_key=True)
    kind = UnicodeAttribute(null=True)


@pytest.fixture
def models(backend: Backend) -> tuple[type[Account], type[Event]]:
    return bind_model(Account, backend), bind_model(Event, backend)


def _tx(model: type[Model], **kwargs: Any) -> TransactWrite:
    return TransactWrite(connection=model._get_connection().connection, **kwargs)


def test_tx__unique_and_plain_items__one_request(models: tuple[type[Account], type[Event]]) -> None:
    """Locks ride next to the caller's other items, under the caller's one token."""
    accounts, events = models
    with RequestCounter(accounts) as counter, _tx(accounts, client_request_token="signup-1") as tx:
        tx.save(accounts(pk="A", email="a@x.io", username="ann"))
        tx.save(events(id="E1", kind="signup"))
    assert counter.operations == ["TransactWriteItems"]
    (params,) = counter.params("TransactWriteItems")
    assert params["ClientRequestToken"] == "signup-1"
    assert len(params["TransactItems"]) == 4
    assert set(actual_locks(accounts)) == {"UNIQ#EMAIL#a@x.io", "UNIQ#HANDLE#ann"}
    assert events.get("E1").kind == "signup"
    assert_invariant(accounts)


class Versioned(Model):
    """A plain model with a version attribute, which PynamoDB advances locally after a commit."""

    class Meta:
        table_name = "versioned"
        region = "us-east-1"

    id = UnicodeAttribute(hash_key=True)
    version = VersionAttribute()


def test_tx__with_locks__pynamodb_settings_and_version_step_kept(backend: Backend) -> None:
    """With lock items in it, the request keeps the caller's settings and plain models' versions advance."""
    accounts, versioned = bind_model(Account, backend), bind_model(Versioned, backend)
    record = versioned(id="V1")
    tx = _tx(accounts, return_consumed_capacity="TOTAL", return_item_collection_metrics="SIZE")
    with RequestCounter(accounts) as counter, tx:
        tx.save(accounts(pk="A", email="a@x.io", username="ann"))
        tx.save(record)
    (params,) = counter.params("TransactWriteItems")
    assert params["ReturnConsumedCapacity"] == "TOTAL"
    assert params["ReturnItemCollectionMetrics"] == "SIZE"
    assert record.version == 1
    assert versioned.get("V1").version == 1


def test_tx__no_connection_given__uses_the_first_models(models: tuple[type[Account], type[Event]]) -> None:
    """TransactWrite() without a connection sends with the first model's connection (no private API)."""
    accounts, events = models
    with RequestCounter(accounts) as counter, TransactWrite(client_request_token=unique_table_name("tok")) as tx:
        tx.save(accounts(pk="A", email="a@x.io", username="ann"))
        tx.save(events(id="E1", kind="signup"))
    assert counter.operations == ["TransactWriteItems"]
    assert set(actual_locks(accounts)) == {"UNIQ#EMAIL#a@x.io", "UNIQ#HANDLE#ann"}
    assert events.get("E1").kind == "signup"


def test_tx__taken_value__violation_names_instance(models: tuple[type[Account], type[Event]]) -> None:
    """A lock taken by another record raises UniqueViolation naming the constraint and instance."""
    accounts, events = models
    accounts(pk="A", email="a@x.io").save()
    bob = accounts(pk="B", email="A@X.io")
    with pytest.raises(UniqueViolation) as info, _tx(accounts) as tx:  # noqa: PT012 - the transaction raises as its block exits.
        tx.save(bob)
        tx.save(events(id="E1"))
    (violation,) = info.value.violations
    assert (violation.constraint, violation.owner, violation.instance) == ("EMAIL", ("A", "PROFILE"), bob)
    assert raw_items(events) == []
    assert_invariant(accounts)


def test_tx__caller_condition_fails__pynamodb_error(models: tuple[type[Account], type[Event]]) -> None:
    """A failure of the caller's own item is PynamoDB's TransactWriteError, not a violation."""
    accounts, events = models
    with pytest.raises(TransactWriteError) as info, _tx(accounts) as tx:  # noqa: PT012 - the transaction raises as its block exits.
        tx.save(accounts(pk="A", email="a@x.io"))
        tx.condition_check(events, "missing", condition=events.id.exists())
    assert not isinstance(info.value, (UniqueViolation, StaleWrite))
    assert raw_items(accounts) == []


def test_tx__stale_instance__stale_write(models: tuple[type[Account], type[Event]]) -> None:
    """A failed compare-and-swap raises the core's conflict error."""
    accounts, _ = models
    accounts(pk="A", email="a@x.io").save()
    stale = accounts.get("A", "PROFILE")
    fresh = accounts.get("A", "PROFILE")
    fresh.email = "moved@x.io"
    fresh.save()
    with pytest.raises(StaleWrite, match="changed since it was read"), _tx(accounts) as tx:
        tx.update(stale, actions=[accounts.email.set("third@x.io")])
    assert_invariant(accounts)


def test_tx__unknown_state_save_over_existing__clear_error(models: tuple[type[Account], type[Event]]) -> None:
    """tx.save() of a hand-built instance is a create: an existing record is a clear error."""
    accounts, _ = models
    accounts(pk="A", email="a@x.io").save()
    with pytest.raises(StaleWrite, match="exists; load it"), _tx(accounts) as tx:
        tx.save(accounts(pk="A", email="b@x.io"))
    assert_invariant(accounts)


def test_tx__unknown_state_update__one_read_when_added(models: tuple[type[Account], type[Event]]) -> None:
    """tx.update() of an instance of unknown state reads it once, consistently, when added."""
    accounts, _ = models
    accounts(pk="A", email="a@x.io", username="ann").save()
    with RequestCounter(accounts) as counter, _tx(accounts) as tx:
        tx.update(accounts(pk="A"), actions=[accounts.email.set("b@x.io")])
    assert counter.operations == ["GetItem", "TransactWriteItems"]
    assert set(actual_locks(accounts)) == {"UNIQ#EMAIL#b@x.io", "UNIQ#HANDLE#ann"}
    assert_invariant(accounts)


def test_tx__value_moves_between_records__merged_transfer(models: tuple[type[Account], type[Event]]) -> None:
    """A releasing a value that B takes in the same transaction becomes one lock action."""
    accounts, _ = models
    ann = accounts(pk="A", email="shared@x.io")
    ann.save()
    bob = accounts(pk="B", email="bob@x.io")
    bob.save()
    ann.email = "ann@x.io"
    bob.email = "shared@x.io"
    with RequestCounter(accounts) as counter, _tx(accounts) as tx:
        tx.save(ann)
        tx.save(bob)
    (params,) = counter.params("TransactWriteItems")
    lock_keys = [next(iter(i.values()))["Key" if "Delete" in i else "Item"]["PK"]["S"] for i in params["TransactItems"]]
    assert lock_keys.count("UNIQ#EMAIL#shared@x.io") == 1
    assert actual_locks(accounts)["UNIQ#EMAIL#shared@x.io"] == ("B", "PROFILE")
    assert_invariant(accounts)


def test_tx__delete_and_signup_of_freed_value(models: tuple[type[Account], type[Event]]) -> None:
    """Deleting a record and giving its value to a new one in one transaction works."""
    accounts, _ = models
    ann = accounts(pk="A", email="a@x.io")
    ann.save()
    with _tx(accounts) as tx:
        tx.delete(ann)
        tx.save(accounts(pk="B", email="a@x.io"))
    assert actual_locks(accounts) == {"UNIQ#EMAIL#a@x.io": ("B", "PROFILE")}
    assert_invariant(accounts)


def test_tx__same_record_twice__refused_before_request(models: tuple[type[Account], type[Event]]) -> None:
    """One record written twice in a transaction is refused before sending."""
    accounts, _ = models
    with RequestCounter(accounts) as counter, pytest.raises(InvalidUniqueValue, match="twice"), _tx(accounts) as tx:  # noqa: PT012 - the transaction raises as its block exits.
        tx.save(accounts(pk="A", email="a@x.io"))
        tx.save(accounts(pk="A", email="b@x.io"))
    assert counter.operations == []


def test_tx__over_100_actions__refused_before_request(models: tuple[type[Account], type[Event]]) -> None:
    """The 100-action limit is checked, counting the lock items, before sending."""
    accounts, _ = models
    with (  # noqa: PT012 - the transaction raises as its block exits.
        RequestCounter(accounts) as counter,
        pytest.raises(InvalidUniqueValue, match="at most 100"),
        _tx(accounts) as tx,
    ):
        for i in range(34):
            tx.save(accounts(pk=f"A{i}", email=f"{i}@x.io", username=f"u{i}"))
    assert counter.operations == []


def test_pynamodb_tx__unique_model_write__refused_before_request(models: tuple[type[Account], type[Event]]) -> None:
    """PynamoDB's own TransactWrite refuses a unique model's save, update and delete before sending.

    It would write the record without its locks: a duplicate would go through silently.
    """
    accounts, events = models
    accounts(pk="A", email="a@x.io").save()
    ann = accounts.get("A", "PROFILE")
    connection = accounts._get_connection().connection
    writes = [
        lambda tx: tx.save(accounts(pk="B", email="A@X.io")),
        lambda tx: tx.update(ann, actions=[accounts.email.set("b@x.io")]),
        lambda tx: tx.delete(ann),
    ]
    for write in writes:
        with (  # noqa: PT012 - the refusal comes from the write added.
            RequestCounter(accounts, events) as counter,
            pytest.raises(UniqueError, match=r"refused.*pynamodb_unique\.TransactWrite"),
            PynamoTransactWrite(connection=connection) as tx,
        ):
            tx.save(events(id="E1"))
            write(tx)
        assert counter.operations == []
    assert [item["PK"]["S"] for item in raw_items(accounts) if not is_lock_item(item)] == ["A"]
    assert raw_items(events) == []
    assert_invariant(accounts)


def test_pynamodb_tx__unique_model_condition_check_and_plain_models__sent(
    models: tuple[type[Account], type[Event]],
) -> None:
    """PynamoDB's own TransactWrite still takes a unique model's condition check (writing nothing) and plain models."""
    accounts, events = models
    accounts(pk="A", email="a@x.io").save()
    connection = accounts._get_connection().connection
    with RequestCounter(accounts) as counter, PynamoTransactWrite(connection=connection) as tx:
        tx.condition_check(accounts, "A", "PROFILE", condition=accounts.email.exists())
        tx.save(events(id="E1", kind="signup"))
    assert counter.operations == ["TransactWriteItems"]
    assert events.get("E1").kind == "signup"
    assert_invariant(accounts)


@pytest.mark.integration
def test_tx__race_two_transactions_one_value__one_wins(dynoxide_endpoint: str) -> None:
    """Two concurrent transactions taking one value: exactly one commits, each round."""
    accounts = bind_model(Account, Backend("dynoxide", dynoxide_endpoint))
    outcomes = []
    for round_no in range(10):
        barrier = threading.Barrier(2)
        results: list[str] = []

        def signup(
            pk: str, round_no: int = round_no, barrier: threading.Barrier = barrier, results: list[str] = results
        ) -> None:
            barrier.wait()
            try:
                with _tx(accounts) as tx:
                    tx.save(accounts(pk=pk, email=f"hot{round_no}@x.io"))
                results.append("ok")
            except UniqueViolation:
                results.append("taken")

        threads = [threading.Thread(target=signup, args=(f"{who}{round_no}",)) for who in "AB"]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        outcomes.append(sorted(results))
    assert outcomes == [["ok", "taken"]] * 10
    assert_invariant(accounts)


@pytest.mark.backends("moto", "dynoxide")
def test_tx__lock_table_missing__table_not_found_names_it(backend: Backend) -> None:
    """A transaction whose lock table was never created raises TableNotFound naming it, still a TransactWriteError."""
    model = bind_model(Account, backend, create=False)
    locks = f"{model.Meta.table_name}-locks"
    model.Meta.unique_lock_table = locks  # type: ignore[attr-defined]
    model.create_table(wait=True, billing_mode="PAY_PER_REQUEST")
    with pytest.raises(TableNotFound) as caught, _tx(model) as tx:
        tx.save(model(pk="ACCT#1", email="ada@lovelace.io"))
    assert isinstance(caught.value, TransactWriteError)
    assert caught.value.tables == (locks,)
    assert "create_lock_table(" in str(caught.value)
