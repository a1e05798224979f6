"""bulk_save: new records with their locks, packed into TransactWriteItems, on dynoxide.

moto is not atomic under concurrent requests and ignores ClientRequestToken (BACKENDS.md), and
``bulk_save`` sends its chunks from worker threads and resends them with their tokens.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections import Counter
from typing import Any

import pytest
from _backends import REGION, Backend, RequestCounter, bind_model, unique_table_name
from _invariant import actual_locks, assert_invariant, locks_and_records, raw_items
from botocore.awsrequest import AWSResponse
from botocore.exceptions import EndpointConnectionError
from models import Account, Versioned
from pynamodb.attributes import UnicodeAttribute
from pynamodb.exceptions import TransactWriteError
from pynamodb.models import Model

from pynamodb_unique import (
    BulkResult,
    Former,
    InvalidUniqueValue,
    UniqueAttribute,
    UniqueError,
    UniqueMixin,
    UniqueViolation,
    Violation,
    bulk_save,
)
from pynamodb_unique._model import snapshot
from pynamodb_unique._model.context import context_of

# bulk_save sends chunks from worker threads: moto takes one request at a time (BACKENDS.md).
pytestmark = pytest.mark.backends("dynoxide")

#: Threads sending chunks.
WORKERS = 4


class Customer(UniqueMixin, Model):
    """Customers of a single-table design (SK = CUSTOMER)."""

    class Meta:
        table_name = "bulk-shop"
        region = "us-east-1"

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    sk = UnicodeAttribute(range_key=True, attr_name="SK", default="CUSTOMER")
    email = UniqueAttribute(UnicodeAttribute(null=True), normalize=str.casefold)


class Employee(UniqueMixin, Model):
    """Employees in the same table (SK = EMPLOYEE): a unique badge."""

    class Meta:
        table_name = "bulk-shop"
        region = "us-east-1"

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    sk = UnicodeAttribute(range_key=True, attr_name="SK", default="EMPLOYEE")
    badge = UniqueAttribute(UnicodeAttribute(null=True))


class Note(Model):
    """A plain PynamoDB model in the same table (SK = NOTE): no constraints, no mixin."""

    class Meta:
        table_name = "bulk-shop"
        region = "us-east-1"

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    sk = UnicodeAttribute(range_key=True, attr_name="SK", default="NOTE")
    text = UnicodeAttribute(null=True)


class RaceAccount(Account):
    """Account with a connection pool for the bulk's workers and the racing signups."""

    class Meta(Account.Meta):
        max_pool_connections = 16


def _people(model: type[Account], count: int, prefix: str = "P", **extra: Any) -> list[Account]:
    return [
        model(pk=f"{prefix}{i:04d}", email=f"{prefix.lower()}{i}@x.io", username=f"{prefix.lower()}{i}", **extra)
        for i in range(count)
    ]


def _transactions(counter: RequestCounter) -> list[list[dict[str, Any]]]:
    """The TransactItems of every TransactWriteItems sent, in order."""
    return [params["TransactItems"] for params in counter.params("TransactWriteItems")]


def _tokens(counter: RequestCounter) -> list[str]:
    return [params["ClientRequestToken"] for params in counter.params("TransactWriteItems")]


def _record_keys(items: list[dict[str, Any]]) -> list[str]:
    """The hash keys of the records (not locks) a transaction puts or checks."""
    keys = []
    for entry in items:
        body = entry.get("Put", {}).get("Item") or entry.get("ConditionCheck", {}).get("Key") or {}
        key = body.get("PK", body.get("id", {})).get("S")
        if key is not None and not key.startswith("UNIQ#"):
            keys.append(key)
    return keys


def _outcome_of(result: BulkResult[Any]) -> dict[str, Any]:
    """Which instance ended where, by record key, for comparing two runs."""
    return {
        "saved": [i.pk for i in result.saved],
        "violations": [(v.instance.pk, v.constraint, v.owner) for v in result.violations],
        "existing": [i.pk for i in result.existing],
    }


@pytest.mark.integration
def test_bulk__150_records__chunks_of_at_most_100_actions(dynoxide_endpoint: str) -> None:
    """150 records with 2 locks each: 5 transactions of at most 100 actions, no record split from its locks."""
    accounts = bind_model(Account, Backend("dynoxide", dynoxide_endpoint))
    people = _people(accounts, 150)
    settled: list[int] = []
    with RequestCounter(accounts) as counter:
        result = bulk_save(people, max_workers=4, progress=settled.append)
    assert result.saved == tuple(people)
    assert (result.violations, result.existing) == ((), ())
    assert counter.operations == ["TransactWriteItems"] * 5
    transactions = _transactions(counter)
    assert all(len(items) <= 100 for items in transactions)
    assert sorted(len(items) for items in transactions) == [54, 99, 99, 99, 99]
    for items in transactions:
        records = set(_record_keys(items))
        owners = {e["Put"]["Item"]["uniq_owner_hash"]["S"] for e in items if "uniq_owner_hash" in e["Put"]["Item"]}
        assert owners == records  # Each record's locks travel in its own transaction.
    tokens = _tokens(counter)
    assert len(set(tokens)) == 5
    assert all(len(t) == 36 for t in tokens)
    assert sum(settled) == 150
    assert len(raw_items(accounts)) == 450
    assert_invariant(accounts)


def test_bulk__records_in_input_order__packed_whole(backend: Backend, accounts: type[Account]) -> None:
    """Chunks fill up to exactly 100 actions, in input order; a record that does not fit starts the next one."""
    people = _people(accounts, 35)
    people[0].username = people[1].username = None  # 2 actions each, 3 for the others: 34 records make 100
    with RequestCounter(accounts) as counter:
        result = bulk_save(people, max_workers=WORKERS)
    assert result.saved == tuple(people)
    first, second = sorted(_transactions(counter), key=len, reverse=True)  # Sent concurrently on dynoxide.
    assert (len(first), len(second)) == (100, 3)
    assert _record_keys(first) == [f"P{i:04d}" for i in range(34)]
    assert _record_keys(second) == ["P0034"]
    assert_invariant(accounts)


def test_bulk__same_value_twice_in_input__first_wins_no_request_for_the_loser(
    backend: Backend, accounts: type[Account]
) -> None:
    """A value repeated in the input: the first instance keeps it, later ones are violations, never sent.

    A later instance waits for the first to claim its value; meanwhile its other values are free
    for instances after it.
    """
    ann = accounts(pk="A", email="ann@x.io", username="ann")
    ann_again = accounts(pk="B", email="ANN@x.io", username="bob")  # email of A, in other case
    handle_again = accounts(pk="C", email="c@x.io", username="ann")  # username of A
    bob = accounts(pk="D", email="d@x.io", username="bob")  # B waits for A, so bob is free for D
    settled: list[int] = []
    with RequestCounter(accounts) as counter:
        result = bulk_save([ann, ann_again, handle_again, bob], max_workers=WORKERS, progress=settled.append)
    assert result.saved == (ann, bob)
    assert result.existing == ()
    assert [(v.instance, v.constraint, v.values, v.owner, v.owner_model) for v in result.violations] == [
        (ann_again, "EMAIL", ("ANN@x.io",), ("A", "PROFILE"), "Account"),
        (ann_again, "HANDLE", ("bob",), ("D", "PROFILE"), "Account"),
        (handle_again, "HANDLE", ("ann",), ("A", "PROFILE"), "Account"),
    ]
    sent = [key for items in _transactions(counter) for key in _record_keys(items)]
    assert sent == ["A", "D"]
    assert settled[0] == 2
    assert sum(settled) == 4
    assert_invariant(accounts)


def test_bulk__first_claimer_refused__the_next_one_takes_the_value(backend: Backend, accounts: type[Account]) -> None:
    """A value's first claimer in the input, itself refused, never holds it: a later claimer takes it."""
    accounts(pk="A", email="old@x.io").save()
    accounts(pk="H", email="h@x.io", username="taken").save()
    existing = accounts(pk="A", email="ann@x.io")  # Its key holds another record.
    ann = accounts(pk="B", email="ANN@x.io")
    refused = accounts(pk="C", email="c@x.io", username="taken")  # Its username is H's.
    cee = accounts(pk="D", email="C@x.io")
    settled: list[int] = []
    result = bulk_save([existing, ann, refused, cee], max_workers=WORKERS, progress=settled.append)
    assert result.existing == (existing,)
    assert [(v.instance, v.constraint, v.owner) for v in result.violations] == [(refused, "HANDLE", ("H", "PROFILE"))]
    assert result.saved == (ann, cee)
    assert sum(settled) == 4
    locks = actual_locks(accounts)
    assert (locks["UNIQ#EMAIL#ann@x.io"], locks["UNIQ#EMAIL#c@x.io"]) == (("B", "PROFILE"), ("D", "PROFILE"))
    assert_invariant(accounts)


class MigratingPerson(UniqueMixin, Model):
    """Emails being made case-insensitive: locks of both forms while ``former=`` is declared."""

    class Meta:
        table_name = "bulk-migrating"
        region = "us-east-1"

    pk = UnicodeAttribute(hash_key=True)
    email = UniqueAttribute(UnicodeAttribute(), normalize=str.casefold, former=Former(normalize=None))


def test_bulk__same_value_twice_during_a_migration__one_violation(backend: Backend) -> None:
    """A value repeated in the input is taken under both forms: the loser gets its constraint once."""
    people = bind_model(MigratingPerson, backend)
    first, second = people(pk="A", email="Ann@x.io"), people(pk="B", email="Ann@x.io")
    result = bulk_save([first, second], max_workers=1)
    assert result.saved == (first,)
    assert [(v.instance, v.constraint, v.owner) for v in result.violations] == [(second, "EMAIL", ("A",))]


def test_bulk__value_taken_in_the_table__violation_and_the_rest_resent(
    backend: Backend, accounts: type[Account]
) -> None:
    """A chunk cancelled by a taken value is sent again without the loser, under a new token."""
    holder = accounts(pk="H", email="taken@x.io")
    holder.save()
    people = _people(accounts, 5)
    loser = people[2]
    loser.email = "Taken@X.io"
    with RequestCounter(accounts) as counter:
        result = bulk_save(people, max_workers=WORKERS)
    assert result.saved == (people[0], people[1], people[3], people[4])
    (violation,) = result.violations
    assert isinstance(violation, Violation)
    assert (violation.instance, violation.constraint, violation.values, violation.owner) == (
        loser,
        "EMAIL",
        ("Taken@X.io",),
        ("H", "PROFILE"),
    )
    first, second = _transactions(counter)
    assert _record_keys(first) == ["P0000", "P0001", "P0002", "P0003", "P0004"]
    assert [e for e in first if e not in second] == first[6:9]  # The loser's record and two locks.
    assert second == first[:6] + first[9:]
    assert len(set(_tokens(counter))) == 2
    assert actual_locks(accounts)["UNIQ#EMAIL#taken@x.io"] == ("H", "PROFILE")
    assert_invariant(accounts)


def test_bulk__existing_record__left_untouched(backend: Backend, accounts: type[Account]) -> None:
    """An instance whose key holds another record is reported existing; that record and its locks stay."""
    accounts(pk="P0001", email="first@x.io", username="first", bio="original").save()
    people = _people(accounts, 3, bio="imported")
    result = bulk_save(people, max_workers=WORKERS)
    assert result.saved == (people[0], people[2])
    assert (result.existing, result.violations) == ((people[1],), ())
    stored = accounts.get("P0001", "PROFILE")
    assert (stored.email, stored.username, stored.bio) == ("first@x.io", "first", "original")
    assert "UNIQ#EMAIL#p1@x.io" not in actual_locks(accounts)
    assert snapshot.known(context_of(accounts), people[1]) is None  # type: ignore[union-attr]
    assert_invariant(accounts)


def test_bulk__record_already_stored_as_given__saved_once_its_locks_are_checked(
    backend: Backend, accounts: type[Account]
) -> None:
    """A record stored exactly as given but without locks (loaded by hand) gets them: a check, then the Puts."""
    people = _people(accounts, 3)
    client = accounts._get_connection().connection.client
    client.put_item(TableName=accounts.Meta.table_name, Item=people[1].serialize())
    with RequestCounter(accounts) as counter:
        result = bulk_save(_people(accounts, 3), max_workers=WORKERS)
    assert [a.pk for a in result.saved] == ["P0000", "P0001", "P0002"]
    assert (result.existing, result.violations) == ((), ())
    first, second = _transactions(counter)
    assert len(first) == len(second) == 9
    # P0001's Put became a check that it holds the values its locks are for; sent first.
    assert [next(iter(e)) for e in second] == ["ConditionCheck"] + ["Put"] * 8
    assert _record_keys(second) == ["P0001", "P0000", "P0002"]
    assert actual_locks(accounts)["UNIQ#EMAIL#p1@x.io"] == ("P0001", "PROFILE")
    assert_invariant(accounts)


def test_bulk__stored_record_changes_before_its_check__existing(backend: Backend, accounts: type[Account]) -> None:
    """A record found stored as given, then changed before the check of its values: existing, its locks its own."""
    accounts(pk="P0001", email="p1@x.io", username="p1").save()
    events = accounts._get_connection().connection.client.meta.events
    sends = [0]

    def change_first(model: Any, **_: Any) -> None:
        sends[0] += 1
        if model.name == "TransactWriteItems" and sends[0] == 2:
            # The resend that checks P0001 is about to leave: another writer changes its email.
            stored = accounts.get("P0001", "PROFILE")
            stored.email = "moved@x.io"
            stored.save()

    with RequestCounter(accounts) as counter:
        events.register_last("before-call.dynamodb", change_first, unique_id="bulk-change")
        try:
            people = _people(accounts, 3)
            result = bulk_save(people, max_workers=1)
        finally:
            events.unregister("before-call.dynamodb", unique_id="bulk-change")
    assert (result.saved, result.existing, result.violations) == ((people[0], people[2]), (people[1],), ())
    transactions = _transactions(counter)
    # The first chunk, the resend checking P0001 (recorded before the change it let in), the change, the rest.
    assert len(transactions) == 4
    assert [next(iter(e)) for e in transactions[1]] == ["ConditionCheck"] + ["Put"] * 8
    assert _record_keys(transactions[3]) == ["P0000", "P0002"]
    assert accounts.get("P0001", "PROFILE").email == "moved@x.io"
    assert_invariant(accounts)


def test_bulk__run_again__same_result_nothing_written_twice(backend: Backend, accounts: type[Account]) -> None:
    """The same import run twice: the same outcome for every instance, and the table as after the first run."""
    accounts(pk="H", email="taken@x.io").save()
    accounts(pk="P0003", email="other@x.io").save()

    def batch() -> list[Account]:
        people = _people(accounts, 12)
        people[5].email = "taken@x.io"
        return people

    first = bulk_save(batch(), max_workers=WORKERS)
    table = sorted(json.dumps(i, sort_keys=True) for i in raw_items(accounts))
    again = bulk_save(batch(), max_workers=WORKERS)
    assert _outcome_of(again) == _outcome_of(first)
    assert _outcome_of(first)["violations"] == [("P0005", "EMAIL", ("H", "PROFILE"))]
    assert _outcome_of(first)["existing"] == ["P0003"]
    assert len(first.saved) == 10
    assert sorted(json.dumps(i, sort_keys=True) for i in raw_items(accounts)) == table
    assert_invariant(accounts)


def _assert_shop_invariant(customers: type[Customer], employees: type[Employee]) -> None:
    """Locks of a table shared by two unique models (and plain records) match their records one to one."""
    _, records = locks_and_records(customers)
    models: dict[str, type[Model]] = {"CUSTOMER": customers, "EMPLOYEE": employees}
    expected: dict[str, tuple[str, ...]] = {}
    for item in records:
        model = models.get(item["SK"]["S"])
        context = context_of(model) if model is not None else None
        if model is None or context is None:
            continue  # A plain record: it holds no lock.
        instance = model.from_raw_data(item)
        for key in context.lock_keys(instance).values():
            if key is not None:
                assert key not in expected, f"two records hold {key}"
                expected[key] = (item["PK"]["S"], item["SK"]["S"])
    assert actual_locks(customers) == expected


def test_bulk__several_models__one_import(backend: Backend) -> None:
    """Customers, employees and plain notes in one table, versioned records in another: one bulk_save."""
    table = unique_table_name("bulk-shop")
    customers = bind_model(Customer, backend, table)
    employees = bind_model(Employee, backend, table, create=False)
    notes = bind_model(Note, backend, table, create=False)
    versioned = bind_model(Versioned, backend)
    customers(pk="C#0", email="taken@x.io").save()
    records: list[Model] = [
        customers(pk="C#1", email="ada@x.io"),
        employees(pk="E#1", badge="B1"),
        notes(pk="N#1", text="hello"),
        versioned(id="V1", handle="ada"),
        customers(pk="C#2", email="TAKEN@x.io"),  # held in the table
        employees(pk="E#2", badge="B1"),  # held by E#1 in the input
        notes(pk="C#0", sk="CUSTOMER", text="clobber"),  # the key of a stored customer
        versioned(id="V2", handle=None),
    ]
    result = bulk_save(records, max_workers=WORKERS)
    assert result.saved == (records[0], records[1], records[2], records[3], records[7])
    assert [(v.instance, v.constraint, v.owner, v.owner_model) for v in result.violations] == [
        (records[4], "EMAIL", ("C#0", "CUSTOMER"), "Customer"),
        (records[5], "BADGE", ("E#1", "EMPLOYEE"), "Employee"),
    ]
    assert result.existing == (records[6],)
    assert customers.get("C#0", "CUSTOMER").email == "taken@x.io"
    assert notes.get("N#1", "NOTE").text == "hello"
    assert [v.version for v in versioned.scan()] == [1, 1]
    _assert_shop_invariant(customers, employees)
    assert_invariant(versioned)


def test_bulk__saved_instances__next_save_plans_a_change_as_after_save(
    backend: Backend, accounts: type[Account]
) -> None:
    """A bulk-saved instance is in the state save() leaves: its next save() is the same change request."""
    versioned = bind_model(Versioned, backend)
    by_bulk, by_save = accounts(pk="B", email="b@x.io", username="b"), accounts(pk="S", email="s@x.io", username="s")
    handle = versioned(id="V", handle="v")
    bulk_save([by_bulk, handle], max_workers=WORKERS)
    by_save.save()
    assert handle.version == 1
    shapes = []
    for account, email in ((by_bulk, "b2@x.io"), (by_save, "s2@x.io")):
        account.email = email
        with RequestCounter(accounts) as counter:
            account.save()
        assert counter.operations == ["TransactWriteItems"]
        (items,) = _transactions(counter)
        shapes.append([(next(iter(e)), e[next(iter(e))].get("ConditionExpression")) for e in items])
    assert shapes[0] == shapes[1]
    handle.handle = "w"
    handle.save()  # The version bump of the bulk save is known: no version conflict.
    assert versioned.get("V").version == 2
    assert_invariant(accounts)
    assert_invariant(versioned)


@pytest.mark.parametrize(
    ("bad", "error", "match"),
    [
        (lambda m: m(pk="UNIQ#EMAIL#x", email="x@x.io"), InvalidUniqueValue, "reserved for lock items"),
        (lambda m: m(pk="Z", email="\ud83e"), InvalidUniqueValue, "lone surrogate"),
        (lambda m: m(pk="Z", email=None), ValueError, "email"),
        (lambda m: m(pk="P0000", email="z@x.io"), InvalidUniqueValue, "two instances with the key"),
        (lambda m: "not a record", TypeError, "model instances"),
    ],
    ids=["reserved-key", "lone-surrogate", "missing-value", "same-key-twice", "not-a-model"],
)
def test_bulk__bad_input__refused_before_any_request(
    backend: Backend, accounts: type[Account], bad: Any, error: type[Exception], match: str
) -> None:
    """Bad input anywhere in the import raises before anything is sent."""
    records = [*_people(accounts, 2), bad(accounts)]
    with RequestCounter() as counter, pytest.raises(error, match=match):
        bulk_save(records, max_workers=WORKERS)
    assert counter.operations == []
    assert raw_items(accounts) == []


def test_bulk__versioned_instance_with_a_version__refused(backend: Backend) -> None:
    """An instance already holding a version is no new record: refused before any request."""
    versioned = bind_model(Versioned, backend)
    with RequestCounter() as counter, pytest.raises(InvalidUniqueValue, match="has version 3"):
        bulk_save([versioned(id="V1", handle="a"), versioned(id="V2", handle="b", version=3)])
    assert counter.operations == []
    with pytest.raises(ValueError, match="max_workers"):
        bulk_save([versioned(id="V1")], max_workers=0)


def test_bulk__nothing_given__no_request(accounts: type[Account]) -> None:
    """An empty import sends nothing."""
    with RequestCounter() as counter:
        result = bulk_save([])
    assert result == BulkResult()
    assert counter.operations == []


def test_bulk__transaction_conflict__resent_with_the_same_token(backend: Backend, accounts: type[Account]) -> None:
    """A chunk answered TransactionConflict is resent unchanged, with its token."""
    answered = [0]

    def conflict(model: Any, params: dict[str, Any], **_: Any) -> tuple[AWSResponse, dict[str, Any]] | None:
        if model.name != "TransactWriteItems" or answered[0]:
            return None
        answered[0] += 1
        count = len(json.loads(params["body"])["TransactItems"])
        body = {
            "Error": {"Code": "TransactionCanceledException", "Message": "Transaction cancelled"},
            "CancellationReasons": [{"Code": "TransactionConflict"}] + [{"Code": "None"}] * (count - 1),
            "ResponseMetadata": {"HTTPStatusCode": 400, "HTTPHeaders": {}},
        }
        return AWSResponse("https://dynamodb.invalid", 400, {}, None), body

    events = accounts._get_connection().connection.client.meta.events
    with RequestCounter(accounts) as counter:
        events.register_last("before-call.dynamodb", conflict, unique_id="bulk-conflict")
        try:
            result = bulk_save(_people(accounts, 4), max_workers=WORKERS)
        finally:
            events.unregister("before-call.dynamodb", unique_id="bulk-conflict")
    assert len(result.saved) == 4
    first, second = _tokens(counter)
    assert first == second
    assert_invariant(accounts)


_SET_SCRIPT = """
from pynamodb.attributes import UnicodeAttribute, UnicodeSetAttribute
from pynamodb.models import Model
from pynamodb_unique import UniqueAttribute, UniqueMixin
from pynamodb_unique._write import bulk as _bulk

class Tagged(UniqueMixin, Model):
    class Meta:
        table_name = "tagged"
        region = "{region}"
    pk = UnicodeAttribute(hash_key=True)
    handle = UniqueAttribute(UnicodeAttribute())
    tags = UnicodeSetAttribute()

tags = {{f"tag-{{n}}" for n in range(12)}}
records = _bulk._prepare([Tagged(pk="T", handle="t", tags=tags)])
print(list(tags), _bulk._pack(records, "")[0].token)
"""


def test_bulk__set_attribute__same_token_in_every_process() -> None:
    """A set serializes in hash order, which differs between processes: the chunk's token does not."""
    script = _SET_SCRIPT.format(region=REGION)
    runs = []
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run(  # noqa: S603 - this interpreter, a script of this file.
            [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
        )
        order, token = out.stdout.rsplit(" ", 1)
        runs.append((order, token.strip()))
    (order_1, token_1), (order_2, token_2) = runs
    assert order_1 != order_2  # PynamoDB would send the set's members in two orders.
    assert token_1 == token_2


def test_bulk__batch_write__still_refused__points_to_bulk_save(accounts: type[Account]) -> None:
    """batch_write() stays refused, and its message names bulk_save."""
    with pytest.raises(UniqueError, match=r"batch_write\(\) is refused.*bulk_save"):
        accounts.batch_write()


# --- dynoxide: tokens and races --------------------------------------------------------------


@pytest.mark.integration
def test_bulk__crash_after_first_chunk__rerun_replays_it(dynoxide_endpoint: str) -> None:
    """The send of chunk 2 fails after chunk 1 committed; the same import again replays chunk 1 by its token."""
    accounts = bind_model(Account, Backend("dynoxide", dynoxide_endpoint))
    events = accounts._get_connection().connection.client.meta.events
    sends = [0]

    def crash(model: Any, **_: Any) -> None:
        if model.name == "TransactWriteItems":
            sends[0] += 1
            if sends[0] == 2:
                raise EndpointConnectionError(endpoint_url="http://crashed.invalid")

    with RequestCounter(accounts) as first_run:
        events.register_last("before-call.dynamodb", crash, unique_id="bulk-crash")
        try:
            with pytest.raises(TransactWriteError) as info:
                bulk_save(_people(accounts, 100, bio="imported"), max_workers=1)
        finally:
            events.unregister("before-call.dynamodb", unique_id="bulk-crash")
    assert "Run the same bulk_save again" in "".join(info.value.__notes__)
    committed = {item["PK"]["S"] for item in locks_and_records(accounts)[1]}
    assert {f"P{i:04d}" for i in range(33)} <= committed
    # Changed after the crash: a replayed chunk leaves it, a re-executed one would fail on it.
    accounts.get("P0000", "PROFILE").update(actions=[accounts.bio.set("edited after the crash")])

    people = _people(accounts, 100, bio="imported")
    with RequestCounter(accounts) as second_run:
        result = bulk_save(people, max_workers=1)
    assert result.saved == tuple(people)
    assert (result.violations, result.existing) == ((), ())
    first_tokens, tokens = _tokens(first_run), _tokens(second_run)
    assert len(tokens) == 4  # One send per chunk: nothing cancelled, nothing re-sent.
    assert tokens[: len(first_tokens)] == first_tokens
    assert accounts.get("P0000", "PROFILE").bio == "edited after the crash"
    assert len(raw_items(accounts)) == 300
    assert_invariant(accounts)


@pytest.mark.integration
def test_bulk__same_records_after_a_delete__a_new_run_id_writes_them(dynoxide_endpoint: str) -> None:
    """Tokens follow the records: a second import of deleted records needs its own run_id to be written."""
    accounts = bind_model(Account, Backend("dynoxide", dynoxide_endpoint))
    with RequestCounter(accounts) as first_run:
        bulk_save(_people(accounts, 5, bio="imported"), max_workers=1)
    for person in _people(accounts, 5, bio="imported"):
        person.delete()
    assert raw_items(accounts) == []

    people = _people(accounts, 5, bio="imported")
    with RequestCounter(accounts) as second_run:
        result = bulk_save(people, max_workers=1, run_id="import-2")
    assert result.saved == tuple(people)
    assert not set(_tokens(second_run)) & set(_tokens(first_run))
    assert len(locks_and_records(accounts)[1]) == 5
    assert_invariant(accounts)


@pytest.mark.integration
def test_bulk__signups_race_the_import__one_holder_per_value(dynoxide_endpoint: str) -> None:
    """Threads sign up with a third of the import's emails while it runs: each value ends with one holder."""
    accounts = bind_model(RaceAccount, Backend("dynoxide", dynoxide_endpoint))
    people = _people(accounts, 300, prefix="B")
    contested = list(range(0, 300, 3))
    # Signups start at the import's end, the import at its start: they meet in the middle.
    signups = {i: accounts(pk=f"S{i:04d}", email=f"B{i}@X.io", username=f"s{i}") for i in reversed(contested)}
    outcomes: dict[int, BaseException | None] = {}
    start = threading.Barrier(5)

    def sign_up(numbers: list[int]) -> None:
        start.wait()
        for i in numbers:
            try:
                signups[i].save()
                outcomes[i] = None
            except UniqueViolation as exc:
                outcomes[i] = exc

    order = list(signups)
    threads = [threading.Thread(target=sign_up, args=(order[k::4],)) for k in range(4)]
    for thread in threads:
        thread.start()
    start.wait()
    result = bulk_save(people, max_workers=4)
    for thread in threads:
        thread.join()

    violated = {id(v.instance): v.instance for v in result.violations}
    placed = Counter(id(a) for a in (*result.saved, *result.existing, *violated.values()))
    assert placed == Counter(id(a) for a in people)
    assert result.existing == ()
    saved = {a.pk for a in result.saved}
    lost = {v.instance.pk: v for v in result.violations}
    for i in contested:
        bulk_won, signup_won = f"B{i:04d}" in saved, outcomes[i] is None
        assert bulk_won != signup_won, i
        if signup_won:
            assert (lost[f"B{i:04d}"].constraint, lost[f"B{i:04d}"].owner) == ("EMAIL", (f"S{i:04d}", "PROFILE"))
        else:
            error = outcomes[i]
            assert isinstance(error, UniqueViolation)
            assert error.violations[0].owner == (f"B{i:04d}", "PROFILE")
    assert set(lost) <= {f"B{i:04d}" for i in contested}
    print(
        f"\n[bulk race] contested={len(contested)} import won={len(contested) - len(lost)} "
        f"signups won={len(lost)} saved={len(result.saved)}"
    )
    assert_invariant(accounts)
