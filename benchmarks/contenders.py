"""The contenders of ``run.py``: the library, the same operations written by hand, and the stubbed transport.

For each operation ``run.py`` times (the list is there), the code of every contender:

- *library*: the README's account (``UniqueAccount``) with ``save()``, ``update()``, ``delete()``;
- *minimal by hand*: what a user of the seed writes with PynamoDB's ``TransactWrite``: the
  record Put with ``attribute_not_exists``, each lock Put with ``attribute_not_exists`` holding
  only its key and the owner's key, a fresh ClientRequestToken per transaction, no ReturnValues; an old lock's
  Delete and the record's write unconditioned; a delete without conditions; after a unique
  change by ``update()``, the re-read that gives ``update()``'s result (the stored item, loaded),
  which a transaction does not return. For a write that changes no unique value: PynamoDB's own
  ``save()``/``update()`` with the condition the library sends (its compare-and-swap on the
  stored unique values, none for an update);
- *minimal correct by hand*, for a change and a delete: the minimal transaction with the one
  check it needs under concurrency, a condition on the record that it still holds, as read, the
  values whose locks it releases or that it writes back (correct for the two constraints the
  seed's transaction keeps, email and username). Without it, a change or delete from a record
  changed since deletes the lock of a value another record took meanwhile, which a third record
  can then take too, and leaves the record's current lock behind (tests/test_benchmarks.py shows
  it against dynoxide). Where the minimal one is correct as it is (a create, the single writes),
  it is its own correct baseline;
- *same request by hand*: the library's own request written with PynamoDB (owner-or-free
  conditions, the compare-and-swap, ALL_OLD on every item, all lock attributes, a uuid4 token,
  the re-read after a transactional update); :func:`check_requests` checks it against the
  library's request;
- *plain PynamoDB*: the record alone, without uniqueness, for reference;
- for signups over HTTP: boto3 ``transact_write_items`` sending the seed's three Puts (built as
  a user writes them), boto3 sending the library's own request (captured once from the wire,
  fresh values per signup), and the seed's transaction written with PynamoDB's models.

:func:`stubbed_transport` makes the botocore client's ``_make_api_call`` answer in this process
(nothing serialized or sent), so that only client work is timed. ``instructions.py`` and
``telemetry.py`` count and time the same contenders.
"""

from __future__ import annotations

import contextlib
import difflib
import functools
import json
import os
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # This checkout's package, not another installed one.

import boto3
from botocore.config import Config
from pynamodb.attributes import UnicodeAttribute
from pynamodb.connection import Connection
from pynamodb.constants import ALL_NEW, ALL_OLD, NULL, PUT_ITEM, UPDATE_ITEM
from pynamodb.expressions.condition import Condition
from pynamodb.expressions.operand import Path as AttributePath
from pynamodb.expressions.update import Action
from pynamodb.models import Model
from pynamodb.transactions import TransactWrite

from pynamodb_unique import UniqueAttribute, UniqueConstraint, UniqueMixin, UniqueViolation

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # The tests' dynoxide helper.

import _dynoxide

REGION: Final = "us-east-1"
THREADS: Final = 8

LIB: Final = "library"
MINIMAL: Final = "minimal by hand"
CORRECT: Final = "minimal correct by hand"
SAME: Final = "same request by hand"
PLAIN: Final = "plain PynamoDB"


# --- models ----------------------------------------------------------------------------------


class UniqueAccount(UniqueMixin, Model):
    """The README's account: unique email (case-folded), username and (tenant, slug)."""

    class Meta:
        table_name = "bench-unique"
        region = REGION
        host: str | None = None
        unique_constraints: Final = [UniqueConstraint("tenant", "slug", name="TENANT_SLUG")]

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    sk = UnicodeAttribute(range_key=True, attr_name="SK", default="PROFILE")
    email = UniqueAttribute(UnicodeAttribute(), normalize=str.casefold)
    username = UniqueAttribute(UnicodeAttribute(null=True), name="HANDLE")
    tenant = UnicodeAttribute(null=True)
    slug = UnicodeAttribute(null=True)
    bio = UnicodeAttribute(null=True)


class PlainAccount(Model):
    """The same record without uniqueness."""

    class Meta:
        table_name = "bench-plain"
        region = REGION
        host: str | None = None

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    sk = UnicodeAttribute(range_key=True, attr_name="SK", default="PROFILE")
    email = UnicodeAttribute()
    username = UnicodeAttribute(null=True)
    tenant = UnicodeAttribute(null=True)
    slug = UnicodeAttribute(null=True)
    bio = UnicodeAttribute(null=True)


class MinimalLock(Model):
    """The seed's lock item, written by hand: its key and the owner's key, nothing else."""

    class Meta:
        table_name = "bench-plain"
        region = REGION
        host: str | None = None

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    sk = UnicodeAttribute(range_key=True, attr_name="SK", default="LOCK")
    owner_hash = UnicodeAttribute(attr_name="uniq_owner_hash")
    owner_range = UnicodeAttribute(attr_name="uniq_owner_range")


class Lock(MinimalLock):
    """The library's lock item, written by hand: owner key, constraint and owner model."""

    constraint = UnicodeAttribute(attr_name="uniq_constraint")
    owner_model = UnicodeAttribute(attr_name="uniq_owner_model")


MODELS: Final[tuple[type[Model], ...]] = (UniqueAccount, PlainAccount, MinimalLock, Lock)


def _escape(value: str) -> str:
    return value.replace("%", "%25").replace("#", "%23")


def _text(value: str | None) -> str:
    if value is None:
        msg = "a benchmark account lacks a value"
        raise ValueError(msg)
    return value


def _lock_for(account: PlainAccount, name: str, value: str) -> Lock:
    return Lock(
        pk=f"UNIQ#{name}#{_escape(value)}",
        owner_hash=account.pk,
        owner_range=account.sk,
        constraint=name,
        owner_model="UniqueAccount",
    )


def _owned_or_free(account: PlainAccount) -> Condition:
    owned: Condition = (Lock.owner_hash == account.pk) & (Lock.owner_range == account.sk)
    free: Condition = Lock.pk.does_not_exist() | owned
    return free


def _absent(attribute: UnicodeAttribute) -> Condition:
    """No value, as PynamoDB loads it: the attribute absent or NULL."""
    absent: Condition = attribute.does_not_exist() | AttributePath(attribute).is_type(NULL)
    return absent


def _holds(email: str, username: str | None) -> Condition:
    """The record still holds, as read, the values whose locks the transaction releases or that it writes back."""
    held: Condition = PlainAccount.email == email
    held &= _absent(PlainAccount.username) if username is None else PlainAccount.username == username
    return held


def _stored_as(email: str, username: str | None) -> Condition:
    """The compare-and-swap the library puts on a record write: its unique values as stored."""
    cas: Condition = _holds(email, username)
    cas &= _absent(PlainAccount.tenant)
    cas &= _absent(PlainAccount.slug)
    return cas


# --- dynoxide --------------------------------------------------------------------------------


def dynoxide() -> contextlib.AbstractContextManager[str]:
    """An in-memory dynoxide on a free port, stopped by PID on exit (the test suite's helper)."""
    return _dynoxide.server()


def bind(host: str, run: str, *, create: bool = True) -> None:
    """Point the models at ``host``, on the tables of ``run`` (the locks by hand share the plain one); create them."""
    for model, kind in ((UniqueAccount, "unique"), (PlainAccount, "plain"), (MinimalLock, "plain"), (Lock, "plain")):
        model.Meta.host = host
        model.Meta.table_name = f"bench-{kind}-{run}"
        model._connection = None
    if create:
        UniqueAccount.create_table(wait=True, billing_mode="PAY_PER_REQUEST")
        PlainAccount.create_table(wait=True, billing_mode="PAY_PER_REQUEST")


def share_table() -> None:
    """Point the models written by hand at the library's table: every signup contender fills one table."""
    for model in (PlainAccount, MinimalLock, Lock):
        model.Meta.table_name = UniqueAccount.Meta.table_name
        model._connection = None


def botocore_client(model: type[Model]) -> Any:
    """The botocore client PynamoDB sends ``model``'s requests with."""
    return model._get_connection().connection.client


# --- requests per operation, counted over HTTP --------------------------------------------------


@dataclass
class Wire:
    """API calls, HTTP attempts and transaction items seen on one botocore client."""

    calls: list[str] = field(default_factory=list)
    items: int = 0
    attempts: int = 0

    def on_call(self, model: Any, params: dict[str, Any], **_: Any) -> None:
        self.calls.append(model.name)
        if model.name == "TransactWriteItems":
            self.items += len(json.loads(params.get("body") or b"{}").get("TransactItems", []))

    def on_send(self, **_: Any) -> None:
        self.attempts += 1


@contextlib.contextmanager
def watch(model: type[Model]) -> Iterator[Wire]:
    """Record what ``model``'s client sends while active."""
    wire = Wire()
    events = botocore_client(model).meta.events
    events.register("before-call.dynamodb", wire.on_call, unique_id="bench-call")
    events.register_first("before-send.dynamodb", wire.on_send, unique_id="bench-send")
    try:
        yield wire
    finally:
        events.unregister("before-call.dynamodb", unique_id="bench-call")
        events.unregister("before-send.dynamodb", unique_id="bench-send")


def _account(n: int, **extra: Any) -> UniqueAccount:
    return UniqueAccount(pk=f"ACCT#{n}", email=f"user{n}@example.com", username=f"user{n}", **extra)


def requests_per_operation() -> list[tuple[str, str, int, int]]:
    """(operation, API calls, HTTP attempts, transaction items) for each lifecycle operation."""
    _account(3, tenant="acme", slug="home").save()
    known = _account(2)
    known.save()

    def change_email() -> None:
        known.email = "changed@example.com"
        known.save()

    def duplicate() -> None:
        try:
            UniqueAccount(pk="ACCT#4", email="USER1@example.com", username="user1").save()
        except UniqueViolation:
            return
        msg = "the duplicate signup was accepted"
        raise AssertionError(msg)

    operations: list[tuple[str, Callable[[], object]]] = [
        ("create", lambda: _account(1).save()),
        ("unique change (save)", change_email),
        ("unique change (update)", lambda: known.update(actions=[UniqueAccount.email.set("updated@example.com")])),
        ("non-unique update", lambda: known.update(actions=[UniqueAccount.bio.set("poet")])),
        ("non-unique save", lambda: _save_bio(known)),
        ("delete", known.delete),
        ("overwrite of an unknown record", lambda: UniqueAccount(pk="ACCT#3", email="fresh@example.com").save()),
        ("delete of an unknown record", lambda: UniqueAccount(pk="ACCT#3").delete()),
        ("duplicate signup refused", duplicate),
    ]
    rows = []
    for name, operation in operations:
        with watch(UniqueAccount) as wire:
            operation()
        rows.append((name, " + ".join(wire.calls), wire.attempts, wire.items))
    return rows


# --- client CPU: the operations, the transport stubbed ---------------------------------------

#: What the stubbed transport answers a GetItem or an UpdateItem (ALL_NEW) with: one stored record.
STORED_ITEM: Final = {
    "PK": {"S": "ACCT#0"},
    "SK": {"S": "PROFILE"},
    "email": {"S": "user0@example.com"},
    "username": {"S": "user0"},
    "bio": {"S": "poet"},
}


class Transport:
    """Stands for botocore's ``_make_api_call``: answers at once, recording the calls when asked."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, dict[str, Any]]] | None = None

    def __call__(self, operation_name: str, api_params: dict[str, Any]) -> dict[str, Any]:
        if self.sent is not None:
            self.sent.append((operation_name, json.loads(json.dumps(api_params))))
        if operation_name == "GetItem":
            return {"Item": STORED_ITEM}
        if operation_name == "UpdateItem":
            return {"Attributes": STORED_ITEM}
        return {}


@contextlib.contextmanager
def stubbed_transport() -> Iterator[Transport]:
    """Every model's botocore client answers in this process, without serializing or sending."""
    transport = Transport()
    clients = {id(c): c for c in (botocore_client(m) for m in MODELS)}
    for client in clients.values():
        client._make_api_call = transport
    try:
        yield transport
    finally:
        for client in clients.values():
            del client._make_api_call


@dataclass(frozen=True)
class Variant:
    """One way to perform an operation: prepare ``n`` inputs, then run them (timed)."""

    prepare: Callable[[int], Sequence[Any]]
    run: Callable[[Any], object]


def _unique_new(n: int) -> list[UniqueAccount]:
    return [_account(i) for i in range(n)]


def _plain(n: int) -> list[PlainAccount]:
    return [PlainAccount(pk=f"ACCT#{i}", email=f"user{i}@example.com", username=f"user{i}") for i in range(n)]


def stored_items(n: int) -> list[dict[str, Any]]:
    """``n`` stored records, as GetItem, Query or Scan return them."""
    return [
        {**STORED_ITEM, "PK": {"S": f"ACCT#{i}"}, "email": {"S": f"user{i}@example.com"}, "username": {"S": f"user{i}"}}
        for i in range(n)
    ]


def _unique_loaded(n: int) -> list[UniqueAccount]:
    """Records as get(), query() and scan() give them: what a write to a known record usually starts from.

    A record the same process saved costs the library less to change or delete (the save left
    its lock keys); a loaded one has its stored values decoded and its lock keys computed by
    its first write.
    """
    return [UniqueAccount.from_raw_data(item) for item in stored_items(n)]


def _plain_loaded(n: int) -> list[PlainAccount]:
    return [PlainAccount.from_raw_data(item) for item in stored_items(n)]


def _lock_values(account: PlainAccount) -> tuple[tuple[str, str], ...]:
    return ("EMAIL", _text(account.email).casefold()), ("HANDLE", _text(account.username))


# The library.


def _change_save(account: UniqueAccount | PlainAccount) -> None:
    account.email = "x" + _text(account.email)
    account.save()


def _change_update(account: UniqueAccount) -> None:
    account.update(actions=[UniqueAccount.email.set("x" + account.email)])


def _save_bio(account: UniqueAccount | PlainAccount) -> None:
    account.bio = "mathematician"
    account.save()


def _update_bio(account: UniqueAccount) -> None:
    account.update(actions=[UniqueAccount.bio.set("poet")])


# Minimal by hand: what a user of the seed writes with PynamoDB's TransactWrite.


def _minimal_tx(token: str | None = None) -> TransactWrite:
    """The seed's transaction, with ``token`` or a fresh one.

    A fresh token per transaction, as the seed's idempotent resend needs: DynamoDB refuses a token
    reused with other items for 10 minutes. Drawn as the library draws its own (16 random bytes
    from the operating system, as hex), so that the token costs both contenders the same. The
    signups over HTTP pass a token of their own per signup (:func:`seed_signup`).
    """
    connection: Connection = PlainAccount._get_connection().connection
    return TransactWrite(connection=connection, client_request_token=token or os.urandom(16).hex())


def _minimal_lock(account: PlainAccount, name: str, value: str) -> MinimalLock:
    return MinimalLock(pk=f"UNIQ#{name}#{value}", owner_hash=account.pk, owner_range=account.sk)


def _minimal_create(account: PlainAccount, token: str | None = None) -> None:
    with _minimal_tx(token) as tx:
        tx.save(account, condition=PlainAccount.pk.does_not_exist())
        for name, value in _lock_values(account):
            tx.save(_minimal_lock(account, name, value), condition=MinimalLock.pk.does_not_exist())


# With ``checked``, the minimal correct transaction: the record's write carries _holds() (a change by
# update(), which writes back no username, checks the email alone).


def _minimal_change_save(account: PlainAccount, *, checked: bool = False) -> None:
    old = _text(account.email)
    account.email = new = "x" + old
    with _minimal_tx() as tx:
        tx.save(_minimal_lock(account, "EMAIL", new.casefold()), condition=MinimalLock.pk.does_not_exist())
        tx.delete(MinimalLock(pk=f"UNIQ#EMAIL#{old.casefold()}"))
        tx.save(account, condition=_holds(old, account.username) if checked else None)


def _minimal_change_update(account: PlainAccount, *, checked: bool = False) -> None:
    old = _text(account.email)
    new = "x" + old
    with _minimal_tx() as tx:
        tx.save(_minimal_lock(account, "EMAIL", new.casefold()), condition=MinimalLock.pk.does_not_exist())
        tx.delete(MinimalLock(pk=f"UNIQ#EMAIL#{old.casefold()}"))
        tx.update(
            account, actions=[PlainAccount.email.set(new)], condition=PlainAccount.email == old if checked else None
        )
    # update() returns the stored item and loads it (ALL_NEW); a transaction returns nothing, so
    # the hand-written equivalent reads it back, as the library does.
    account.refresh(consistent_read=True)


def _minimal_delete(account: PlainAccount, *, checked: bool = False) -> None:
    with _minimal_tx() as tx:
        tx.delete(account, condition=_holds(_text(account.email), account.username) if checked else None)
        for name, value in _lock_values(account):
            tx.delete(MinimalLock(pk=f"UNIQ#{name}#{value}"))


def _save_bio_cas(account: PlainAccount) -> None:
    """PynamoDB's own save() with the library's condition: its unique values as stored."""
    account.bio = "mathematician"
    account.save(condition=_stored_as(_text(account.email), account.username))


def _plain_update_bio(account: PlainAccount) -> None:
    """PynamoDB's own update() with the library's condition: none (no unique value moves)."""
    account.update(actions=[PlainAccount.bio.set("poet")])


def _plain_change_update(account: PlainAccount) -> None:
    account.update(actions=[PlainAccount.email.set("x" + _text(account.email))])


# The same request by hand: the library's request, written with PynamoDB.


def _same_tx() -> TransactWrite:
    connection: Connection = PlainAccount._get_connection().connection
    return TransactWrite(connection=connection, client_request_token=str(uuid.uuid4()))


def _delete_all_old(tx: TransactWrite, model: Model, condition: Condition) -> None:
    """A Delete with ALL_OLD on failure, which ``TransactWrite.delete`` cannot ask for."""
    kwargs = model.get_delete_kwargs_from_instance(condition=condition, return_values_on_condition_failure=ALL_OLD)
    tx._delete_items.append(kwargs)


def _same_create(account: PlainAccount) -> None:
    with _same_tx() as tx:
        tx.save(account, condition=PlainAccount.pk.does_not_exist(), return_values=ALL_OLD)
        for name, value in _lock_values(account):
            tx.save(_lock_for(account, name, value), condition=_owned_or_free(account), return_values=ALL_OLD)


def _same_change_save(account: PlainAccount) -> None:
    old = _text(account.email)
    account.email = new = "x" + old
    with _same_tx() as tx:
        _delete_all_old(tx, Lock(pk=f"UNIQ#EMAIL#{_escape(old.casefold())}"), _owned_or_free(account))
        tx.save(_lock_for(account, "EMAIL", new.casefold()), condition=_owned_or_free(account), return_values=ALL_OLD)
        tx.save(account, condition=_stored_as(old, account.username), return_values=ALL_OLD)


def _same_change_update(account: PlainAccount) -> None:
    old = _text(account.email)
    new = "x" + old
    with _same_tx() as tx:
        _delete_all_old(tx, Lock(pk=f"UNIQ#EMAIL#{_escape(old.casefold())}"), _owned_or_free(account))
        tx.save(_lock_for(account, "EMAIL", new.casefold()), condition=_owned_or_free(account), return_values=ALL_OLD)
        cas = _stored_as(old, account.username)
        tx.update(account, actions=[PlainAccount.email.set(new)], condition=cas, return_values=ALL_OLD)
    account.refresh(consistent_read=True)  # update() returns the stored item; a transaction returns none.


def _same_delete(account: PlainAccount) -> None:
    email, username = _text(account.email), _text(account.username)
    with _same_tx() as tx:
        gone: Condition = PlainAccount.pk.does_not_exist() | _stored_as(email, username)
        _delete_all_old(tx, account, gone)
        for name, value in _lock_values(account):
            _delete_all_old(tx, Lock(pk=f"UNIQ#{name}#{_escape(value)}"), _owned_or_free(account))


def _same_save_bio(account: PlainAccount) -> None:
    account.bio = "mathematician"
    cas = _stored_as(_text(account.email), account.username)
    kwargs = account.get_save_kwargs_from_instance(condition=cas, return_values_on_condition_failure=ALL_OLD)
    PlainAccount._get_connection().connection.dispatch(PUT_ITEM, kwargs)


def _same_update_bio(account: PlainAccount) -> None:
    actions: list[Action] = [PlainAccount.bio.set("poet")]
    kwargs = account.get_update_kwargs_from_instance(actions=actions)
    kwargs["ReturnValues"] = ALL_NEW
    account.deserialize(PlainAccount._get_connection().connection.dispatch(UPDATE_ITEM, kwargs)["Attributes"])


CPU_OPERATIONS: Final[dict[str, dict[str, Variant]]] = {
    "create": {
        LIB: Variant(_unique_new, lambda a: a.save()),
        MINIMAL: Variant(_plain, _minimal_create),
        SAME: Variant(_plain, _same_create),
        PLAIN: Variant(_plain, lambda a: a.save()),
    },
    "unique change (save)": {
        LIB: Variant(_unique_loaded, _change_save),
        MINIMAL: Variant(_plain_loaded, _minimal_change_save),
        CORRECT: Variant(_plain_loaded, functools.partial(_minimal_change_save, checked=True)),
        SAME: Variant(_plain_loaded, _same_change_save),
        PLAIN: Variant(_plain_loaded, _change_save),
    },
    "unique change (update)": {
        LIB: Variant(_unique_loaded, _change_update),
        MINIMAL: Variant(_plain_loaded, _minimal_change_update),
        CORRECT: Variant(_plain_loaded, functools.partial(_minimal_change_update, checked=True)),
        SAME: Variant(_plain_loaded, _same_change_update),
        PLAIN: Variant(_plain_loaded, _plain_change_update),
    },
    "delete": {
        LIB: Variant(_unique_loaded, lambda a: a.delete()),
        MINIMAL: Variant(_plain_loaded, _minimal_delete),
        CORRECT: Variant(_plain_loaded, functools.partial(_minimal_delete, checked=True)),
        SAME: Variant(_plain_loaded, _same_delete),
        PLAIN: Variant(_plain_loaded, lambda a: a.delete()),
    },
    "non-unique save": {
        LIB: Variant(_unique_loaded, _save_bio),
        MINIMAL: Variant(_plain_loaded, _save_bio_cas),
        SAME: Variant(_plain_loaded, _same_save_bio),
        PLAIN: Variant(_plain_loaded, _save_bio),
    },
    "non-unique update": {
        LIB: Variant(_unique_loaded, _update_bio),
        MINIMAL: Variant(_plain_loaded, _plain_update_bio),
        SAME: Variant(_plain_loaded, _same_update_bio),
        PLAIN: Variant(_plain_loaded, _plain_update_bio),
    },
}

#: Operations whose minimal baseline is PynamoDB's own single write with the library's condition.
SINGLE_WRITES: Final = ("non-unique save", "non-unique update")


def _normalized(sent: Sequence[tuple[str, dict[str, Any]]], *, minimal: bool = False) -> list[Any]:
    """Requests with what may differ removed: token, table names, ReturnConsumedCapacity, item order.

    With ``minimal``, ReturnValuesOnConditionCheckFailure is removed too: PynamoDB's save() and
    update() cannot ask for it.
    """
    out: list[Any] = []
    for operation, params in sent:
        request = json.loads(json.dumps(params))
        for key in (
            "ClientRequestToken",
            "ReturnConsumedCapacity",
            *(["ReturnValuesOnConditionCheckFailure"] * minimal),
        ):
            request.pop(key, None)
        bodies = [body for item in request.get("TransactItems", []) for body in item.values()] or [request]
        for body in bodies:
            body["TableName"] = "*"
        if "TransactItems" in request:
            request["TransactItems"].sort(key=lambda item: json.dumps(item, sort_keys=True))
        out.append((operation, request))
    return out


def check_requests() -> list[str]:
    """Whether the baselines send what they claim; returns one line per mismatch.

    The same request by hand must send the library's requests (but for the token and the table
    name); for a write that moves no unique value, the minimal one must send the library's
    request but for ReturnValuesOnConditionCheckFailure.
    """
    problems: list[str] = []
    with stubbed_transport() as transport:
        for op, variants in CPU_OPERATIONS.items():
            sent: dict[str, list[tuple[str, dict[str, Any]]]] = {}
            for name in (LIB, SAME, MINIMAL):
                (item,) = variants[name].prepare(1)
                transport.sent = sent[name] = []
                variants[name].run(item)
                transport.sent = None
            if diff := _diff(_normalized(sent[LIB]), _normalized(sent[SAME])):
                problems.append(f"{op}: the same request by hand differs from the library's:\n{diff}")
            if op in SINGLE_WRITES and (
                diff := _diff(_normalized(sent[LIB], minimal=True), _normalized(sent[MINIMAL], minimal=True))
            ):
                problems.append(f"{op}: PynamoDB's own write differs from the library's:\n{diff}")
    return problems


def _diff(library: list[Any], other: list[Any], context: int = 2, limit: int = 30) -> str:
    """A unified diff of two requests as indented JSON, the library's first; empty when equal."""
    ours, theirs = (json.dumps(requests, indent=1, sort_keys=True).splitlines() for requests in (library, other))
    diff = list(difflib.unified_diff(ours, theirs, "library", "baseline", n=context, lineterm=""))
    return "\n".join(diff[:limit] + ["..."] * (len(diff) > limit))


#: PynamoDB's own ``update()`` called on the library's model: the library's write path left out,
#: its load hook (the snapshot of the item loaded) kept.
PYNAMODB_ON_UNIQUE: Final = "PynamoDB's update() on the unique model"

#: What a non-unique ``update()`` costs with the library's load hook but without its write path,
#: against PynamoDB's on a plain model: the part the hook takes, which no change to the write
#: path removes (the library's own against plain PynamoDB's is in the CPU table).
UPDATE_FLOOR: Final[dict[str, Variant]] = {
    PYNAMODB_ON_UNIQUE: Variant(_unique_loaded, lambda a: Model.update(a, actions=[UniqueAccount.bio.set("poet")])),
    PLAIN: CPU_OPERATIONS["non-unique update"][PLAIN],
}


# --- signups over HTTP ------------------------------------------------------------------------


def boto3_client(host: str) -> Any:
    # As PynamoDB configures its client: no parameter validation, standard retries, 4 attempts.
    config = Config(
        parameter_validation=False,
        max_pool_connections=THREADS * 2,
        retries={"total_max_attempts": 4, "mode": "standard"},
    )
    return boto3.session.Session().client("dynamodb", region_name=REGION, endpoint_url=host, config=config)


def run_threads(count: int, work: Callable[[int], None]) -> float:
    """Run ``work(thread_index)`` on ``count`` threads at once; return the wall time."""
    barrier = threading.Barrier(count + 1)
    errors: list[BaseException] = []

    def target(index: int) -> None:
        barrier.wait()
        try:
            work(index)
        except BaseException as exc:  # noqa: BLE001 - reported after the join.
            errors.append(exc)

    threads = [threading.Thread(target=target, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    barrier.wait()
    start = time.perf_counter()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - start
    if errors:
        raise errors[0]
    return elapsed


#: Stands for a signup's distinct part in the captured request (survives case-folding and escaping).
MARK: Final = "__n__"


def signup(n: str) -> UniqueAccount:
    """The library's signup ``n``: a new account with its email and username."""
    return UniqueAccount(pk=f"ACCT#{n}", email=f"{n}@example.com", username=f"u{n}")


def captured_signup() -> str:
    """The library's TransactWriteItems body for one signup, as sent on the wire, ``MARK`` for its values.

    Without the ClientRequestToken (a fresh uuid4 per signup, as the library makes).
    """
    bodies: list[bytes] = []

    def on_call(params: dict[str, Any], **_: Any) -> None:
        bodies.append(params["body"])

    events = botocore_client(UniqueAccount).meta.events
    events.register("before-call.dynamodb.TransactWriteItems", on_call, unique_id="bench-capture")
    try:
        signup(MARK).save()
    finally:
        events.unregister("before-call.dynamodb.TransactWriteItems", unique_id="bench-capture")
    (body,) = bodies
    request = json.loads(body)
    request.pop("ClientRequestToken")
    text = json.dumps(request)
    if text.count(MARK) < 6:  # noqa: PLR2004 - the record's key, email and username, two locks, two owners.
        msg = f"the captured signup does not carry its values where expected: {text}"
        raise AssertionError(msg)
    return text


def _minimal_items(table: str, n: str) -> list[dict[str, Any]]:
    """The seed's signup as DynamoDB JSON: three Puts, ``attribute_not_exists`` only."""
    email, handle = f"{n}@example.com", f"u{n}"
    record = {"PK": {"S": f"ACCT#{n}"}, "SK": {"S": "PROFILE"}, "email": {"S": email}, "username": {"S": handle}}
    owner = {"uniq_owner_hash": {"S": f"ACCT#{n}"}, "uniq_owner_range": {"S": "PROFILE"}}
    return [
        {"Put": {"TableName": table, "Item": record, "ConditionExpression": "attribute_not_exists(PK)"}},
        *(
            {
                "Put": {
                    "TableName": table,
                    "Item": {"PK": {"S": f"UNIQ#{name}#{value}"}, "SK": {"S": "LOCK"}, **owner},
                    "ConditionExpression": "attribute_not_exists(PK)",
                }
            }
            for name, value in (("EMAIL", email), ("HANDLE", handle))
        ),
    ]


BOTO3_SAME: Final = "boto3, the library's request"
BOTO3_MINIMAL: Final = "boto3, minimal items"
#: The seed's transaction written with PynamoDB (three model instances and a TransactWrite).
PYNAMODB_SEED: Final = "PynamoDB, the seed's transaction"
HTTP_CONTENDERS: Final = (LIB, BOTO3_SAME, BOTO3_MINIMAL, PYNAMODB_SEED)


def boto3_same_signup(client: Any, template: str, n: str) -> None:
    """Signup ``n`` with boto3: the library's request (``captured_signup()``), a fresh uuid4 token as the library's."""
    request = json.loads(template.replace(MARK, n))
    client.transact_write_items(**request, ClientRequestToken=str(uuid.uuid4()))


def boto3_minimal_signup(client: Any, table: str, n: str) -> None:
    """Signup ``n`` with boto3: the seed's three Puts, a token per signup (DynamoDB refuses one reused).

    ``n`` short enough for a token of at most 36 characters (DynamoDB's limit).
    """
    client.transact_write_items(TransactItems=_minimal_items(table, n), ClientRequestToken=f"boto3-{n}")


def seed_signup(n: str) -> None:
    """The seed's signup with PynamoDB, a token per signup (DynamoDB refuses a token reused for another request).

    ``n`` short enough for a token of at most 36 characters (DynamoDB's limit).
    """
    _minimal_create(PlainAccount(pk=f"ACCT#{n}", email=f"{n}@example.com", username=f"u{n}"), token=f"seed-{n}")
