"""What uniqueness costs: requests per operation, client CPU, HTTP throughput, contention, audit.

Run from the repository root (dynoxide installed by ``bash scripts/test``, or ``DYNOXIDE_BIN``)::

    python benchmarks/run.py                 # about 140 s on 2 cores
    python benchmarks/run.py --quick         # a smoke run (about 35 s): small, still 5 repetitions
    python benchmarks/run.py --audit-items 50000 --repeats 9

It starts its own dynoxide server on a free port and stops it (by PID) when done. Nothing here is
a test: it prints figures, and at the end a markdown block for the README with a ``targets:`` line.

Every comparison runs its contenders side by side in one process, alternating within each
repetition (the order rotates from one repetition to the next), and reports the median with the
spread (min-max) over the repetitions. In the CPU section the library and one baseline at a time
take turns operation by operation, each operation timed alone, and a repetition's figure is the
median operation (a pair, not all contenders at once: see :func:`paired`). A ratio is the median
of the per-repetition ratios (each taken between neighbouring runs), with their min-max.

Sections:

1. Requests, HTTP attempts and transaction items per lifecycle operation (over HTTP).
2. Client CPU per operation, transport stubbed (the botocore client's ``_make_api_call`` answers in
   this process, nothing serialized or sent), so only client work is timed, against:

   - *minimal by hand*: what a user of the seed writes with PynamoDB's ``TransactWrite``: the
     record Put with ``attribute_not_exists``, each lock Put with ``attribute_not_exists`` holding
     only its key and the owner's key, a fixed ClientRequestToken, no ReturnValues; an old lock's
     Delete and the record's write unconditioned; a delete without conditions; after a unique
     change by ``update()``, the re-read that gives ``update()``'s result (the stored item,
     loaded), which a transaction does not return. For a write that
     changes no unique value: PynamoDB's own ``save()``/``update()`` with the condition the
     library sends (its compare-and-swap on the stored unique values, none for an update);
   - *same request by hand*: the library's own request written with PynamoDB (owner-or-free
     conditions, the compare-and-swap, ALL_OLD on every item, all lock attributes, a uuid4
     token, the re-read after a transactional update); checked against the library's request;
   - *plain PynamoDB*: the record alone, without uniqueness, for reference.

   And a non-unique ``update()`` three ways: the library's, PynamoDB's own ``update()`` called on
   the library's model (the library's load hook kept, its write path left out) and PynamoDB's on
   the plain model, each of the first two timed as a pair with the last: what the write path
   adds, and what it cannot remove.

3. Signups over HTTP, 8 threads, distinct values: the library vs boto3 ``transact_write_items``
   sending the minimal items (the seed's three Puts, built as a user writes them: the target's
   baseline), vs boto3 sending the library's own request (captured once from the wire, fresh
   values per signup), and vs the seed's transaction written with PynamoDB (the minimal create, a
   token per signup): the same signup by hand on PynamoDB's models.
4. Contention: 8 threads signing up (then deleting) on 1, 10 and 100 hot values.
5. Audit vs a raw boto3 Scan that only counts the items of the same table (both strongly
   consistent), and the audit's memory per record (``scan_throughput.py``).
6. Bulk import: ``bulk_save`` vs a loop of ``save()`` of new records (``bulk.py``).
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import difflib
import gc
import io
import json
import os
import platform
import pstats
import random
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import Any, Final

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

import pynamodb_unique._write.send as unique_send
from pynamodb_unique import UniqueAttribute, UniqueConstraint, UniqueError, UniqueMixin, UniqueViolation

sys.path.insert(0, str(Path(__file__).resolve().parent))  # scan_throughput and bulk, when imported from elsewhere.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # The tests' dynoxide helper.

import _dynoxide
import bulk
import scan_throughput

REGION: Final = "us-east-1"
REPO: Final = Path(__file__).resolve().parent.parent
THREADS: Final = 8
CPU_TARGET: Final = 1.00
HTTP_TARGET: Final = 0.95
AUDIT_TARGET: Final = 0.90
MIN_REPEATS: Final = 5
#: The seed's fixed ClientRequestToken (stubbed transport only: DynamoDB would refuse its reuse).
MINIMAL_TOKEN: Final = "signup-1"  # noqa: S105 - a request token, not a password.

LIB: Final = "library"
MINIMAL: Final = "minimal by hand"
SAME: Final = "same request by hand"
PLAIN: Final = "plain PynamoDB"


# --- statistics ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Spread:
    """Samples of one figure over the repetitions: median and min-max."""

    samples: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    def show(self, scale: float = 1.0, digits: int = 0) -> str:
        """``median (min-max)``, each multiplied by ``scale``."""
        lo, mid, hi = (x * scale for x in (min(self.samples), self.median, max(self.samples)))
        return f"{mid:,.{digits}f} ({lo:,.{digits}f}-{hi:,.{digits}f})"


def ratio(top: Spread, bottom: Spread) -> Spread:
    """Per-repetition ratios ``top / bottom`` (the two were measured side by side)."""
    return Spread(tuple(a / b for a, b in zip(top.samples, bottom.samples, strict=True)))


def rotated(names: Sequence[str], repetition: int) -> list[str]:
    """``names`` starting at a different one each repetition: no contender always runs first."""
    shift = repetition % len(names)
    return [*names[shift:], *names[:shift]]


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


def _stored_as(email: str, username: str | None) -> Condition:
    """The compare-and-swap the library puts on a record write: its unique values as stored."""
    cas: Condition = PlainAccount.email == email
    cas &= _absent(PlainAccount.username) if username is None else PlainAccount.username == username
    cas &= _absent(PlainAccount.tenant)
    cas &= _absent(PlainAccount.slug)
    return cas


# --- dynoxide --------------------------------------------------------------------------------


def dynoxide() -> contextlib.AbstractContextManager[str]:
    """An in-memory dynoxide on a free port, stopped by PID on exit (the test suite's helper)."""
    return _dynoxide.server()


def bind(host: str, run: str) -> None:
    """Point the models at ``host``, on fresh tables (the locks by hand share the plain one), and create them."""
    for model, kind in ((UniqueAccount, "unique"), (PlainAccount, "plain"), (MinimalLock, "plain"), (Lock, "plain")):
        model.Meta.host = host
        model.Meta.table_name = f"bench-{kind}-{run}"
        model._connection = None
    UniqueAccount.create_table(wait=True, billing_mode="PAY_PER_REQUEST")
    PlainAccount.create_table(wait=True, billing_mode="PAY_PER_REQUEST")


def botocore_client(model: type[Model]) -> Any:
    """The botocore client PynamoDB sends ``model``'s requests with."""
    return model._get_connection().connection.client


# --- machine ---------------------------------------------------------------------------------


def machine() -> list[str]:
    """nproc, CPU model, Python and library versions."""
    model = "unknown"
    with contextlib.suppress(OSError), open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
        for line in cpuinfo:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    nproc = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return [
        f"cpu: {model}, {nproc} cores available",
        f"python: {platform.python_version()} ({platform.python_implementation()}, {sys.platform})",
        f"pynamodb {version('pynamodb')}, botocore {version('botocore')}, boto3 {version('boto3')}, "
        f"pynamodb-unique {version('pynamodb-unique')}; dynoxide in memory, localhost HTTP",
    ]


# --- 1. requests per operation ---------------------------------------------------------------


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


# --- 2. client CPU, transport stubbed ---------------------------------------------------------

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


def _minimal_tx(token: str = MINIMAL_TOKEN) -> TransactWrite:
    connection: Connection = PlainAccount._get_connection().connection
    return TransactWrite(connection=connection, client_request_token=token)


def _minimal_lock(account: PlainAccount, name: str, value: str) -> MinimalLock:
    return MinimalLock(pk=f"UNIQ#{name}#{value}", owner_hash=account.pk, owner_range=account.sk)


def _minimal_create(account: PlainAccount, token: str = MINIMAL_TOKEN) -> None:
    with _minimal_tx(token) as tx:
        tx.save(account, condition=PlainAccount.pk.does_not_exist())
        for name, value in _lock_values(account):
            tx.save(_minimal_lock(account, name, value), condition=MinimalLock.pk.does_not_exist())


def _minimal_change_save(account: PlainAccount) -> None:
    old = _text(account.email)
    account.email = new = "x" + old
    with _minimal_tx() as tx:
        tx.save(_minimal_lock(account, "EMAIL", new.casefold()), condition=MinimalLock.pk.does_not_exist())
        tx.delete(MinimalLock(pk=f"UNIQ#EMAIL#{old.casefold()}"))
        tx.save(account)


def _minimal_change_update(account: PlainAccount) -> None:
    old = _text(account.email)
    new = "x" + old
    with _minimal_tx() as tx:
        tx.save(_minimal_lock(account, "EMAIL", new.casefold()), condition=MinimalLock.pk.does_not_exist())
        tx.delete(MinimalLock(pk=f"UNIQ#EMAIL#{old.casefold()}"))
        tx.update(account, actions=[PlainAccount.email.set(new)])
    # update() returns the stored item and loads it (ALL_NEW); a transaction returns nothing, so
    # the hand-written equivalent reads it back, as the library does.
    account.refresh(consistent_read=True)


def _minimal_delete(account: PlainAccount) -> None:
    with _minimal_tx() as tx:
        tx.delete(account)
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
        SAME: Variant(_plain_loaded, _same_change_save),
        PLAIN: Variant(_plain_loaded, _change_save),
    },
    "unique change (update)": {
        LIB: Variant(_unique_loaded, _change_update),
        MINIMAL: Variant(_plain_loaded, _minimal_change_update),
        SAME: Variant(_plain_loaded, _same_change_update),
        PLAIN: Variant(_plain_loaded, _plain_change_update),
    },
    "delete": {
        LIB: Variant(_unique_loaded, lambda a: a.delete()),
        MINIMAL: Variant(_plain_loaded, _minimal_delete),
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


def interleaved(variants: Mapping[str, Variant], iterations: int, repetition: int) -> dict[str, float]:
    """Seconds per operation of each contender: the median over ``iterations`` operations, run in turn.

    Each contender's inputs are prepared first; then the contenders take turns operation by
    operation (the order rotating with ``repetition``), each operation timed alone. Taking turns
    puts every contender under the same conditions at the same moment, and the median leaves out
    the operations a preemption or a page fault stretched: on a shared machine, medians of whole
    timed loops run one after another moved by 20-50 % from run to run; these by about 10 %.
    """
    names = rotated(list(variants), repetition)
    runs = [variants[name].run for name in names]
    inputs = [variants[name].prepare(iterations) for name in names]
    times: list[list[int]] = [[] for _ in names]
    clock = time.perf_counter_ns
    gc.collect()
    for turn in zip(*inputs, strict=True):
        for run, item, spent in zip(runs, turn, times, strict=True):
            start = clock()
            run(item)
            spent.append(clock() - start)
    return {name: statistics.median(spent) / 1e9 for name, spent in zip(names, times, strict=True)}


def timed(variants: Mapping[str, Variant], iterations: int, repeats: int) -> dict[str, Spread]:
    """Seconds per operation of each contender, over ``repeats`` repetitions of :func:`interleaved`."""
    interleaved(variants, 50, 0)  # Warm up: imports, caches, first connections.
    samples: dict[str, list[float]] = {name: [] for name in variants}
    for r in range(repeats):
        for name, seconds in interleaved(variants, iterations, r).items():
            samples[name].append(seconds)
    return {name: Spread(tuple(s)) for name, s in samples.items()}


#: The contenders the library is timed against, each alone with it (:func:`paired`).
BASELINES: Final = (MINIMAL, SAME, PLAIN)


def paired(first: Variant, other: Variant, iterations: int, repeats: int) -> tuple[Spread, Spread]:
    """Seconds per operation of two contenders taking turns alone together: (first, other).

    Two, not all: with four taking turns, the three written with PynamoDB run much of the same
    PynamoDB code and keep it in the caches for one another, while the library's own code is
    evicted between its turns. Measured side by side on the same code (``--cpu-together`` times
    the four together), four at once put a non-unique update at 1.02x the minimal one where the
    pair gave 0.99x, and a delete at 0.95x where the pair gave 0.81x. Both are warm-cache figures:
    ``instructions.py --cold`` counts what an operation fetches from a cold cache.
    """
    spreads = timed({"first": first, "other": other}, iterations, repeats)
    return spreads["first"], spreads["other"]


def client_cpu(iterations: int, repeats: int, *, together: bool = False) -> dict[str, dict[str, tuple[Spread, Spread]]]:
    """For each operation and baseline: (library, baseline) seconds per operation, timed as a pair.

    With ``together``, the four contenders of an operation take turns at once instead.
    """
    cpu: dict[str, dict[str, tuple[Spread, Spread]]] = {}
    with stubbed_transport():
        for op, variants in CPU_OPERATIONS.items():
            if together:
                spreads = timed(variants, iterations, repeats)
                cpu[op] = {name: (spreads[LIB], spreads[name]) for name in BASELINES}
                continue
            cpu[op] = {}
            for name in BASELINES:
                # A baseline that is another's variant (the non-unique update's minimal one is
                # plain PynamoDB's) is timed once.
                same = next((cpu[op][b] for b in cpu[op] if variants[b] == variants[name]), None)
                cpu[op][name] = same or paired(variants[LIB], variants[name], iterations, repeats)
    return cpu


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


def update_floor(iterations: int, repeats: int) -> tuple[Spread, Spread]:
    """A non-unique update: (PynamoDB's own on the library's model, plain PynamoDB's), timed as a pair."""
    with stubbed_transport():
        return paired(UPDATE_FLOOR[PYNAMODB_ON_UNIQUE], UPDATE_FLOOR[PLAIN], iterations, repeats)


def profile_library(operation: str, iterations: int, top: int = 18) -> str:
    """Where the library's client time goes for ``operation`` (cProfile, by own time)."""
    variant = CPU_OPERATIONS[operation][LIB]
    with stubbed_transport():
        inputs = variant.prepare(iterations)
        profiler = cProfile.Profile()
        profiler.enable()
        for item in inputs:
            variant.run(item)
        profiler.disable()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.strip_dirs().sort_stats("tottime").print_stats(top)
    return out.getvalue()


# --- 3. throughput over HTTP -----------------------------------------------------------------


def _threads(count: int, work: Callable[[int], None]) -> float:
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


def _boto3_client(host: str) -> Any:
    # As PynamoDB configures its client: no parameter validation, standard retries, 4 attempts.
    config = Config(
        parameter_validation=False,
        max_pool_connections=THREADS * 2,
        retries={"total_max_attempts": 4, "mode": "standard"},
    )
    return boto3.session.Session().client("dynamodb", region_name=REGION, endpoint_url=host, config=config)


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


@dataclass(frozen=True)
class Rates:
    """Signups per second (wall) and this process's CPU seconds per signup, over the repetitions."""

    per_second: Spread
    cpu_per_op: Spread


def throughput(host: str, per_thread: int, repeats: int, threads: int = THREADS) -> dict[str, Rates]:
    """Signups on ``threads`` threads, distinct values, by each of ``HTTP_CONTENDERS``."""
    client = _boto3_client(host)
    table = UniqueAccount.Meta.table_name
    # Every contender writes to the same table, the seed's models too: tables of one size.
    for model in (PlainAccount, MinimalLock):
        model.Meta.table_name = table
        model._connection = None
    template = captured_signup()

    def library(run: str) -> Callable[[int], None]:
        def work(index: int) -> None:
            for i in range(per_thread):
                signup(f"{run}-{index}-{i}").save()

        return work

    def same(run: str) -> Callable[[int], None]:
        def work(index: int) -> None:
            for i in range(per_thread):
                boto3_same_signup(client, template, f"{run}-{index}-{i}")

        return work

    def minimal(run: str) -> Callable[[int], None]:
        def work(index: int) -> None:
            for i in range(per_thread):
                boto3_minimal_signup(client, table, f"{run}-{index}-{i}")

        return work

    def seed(run: str) -> Callable[[int], None]:
        def work(index: int) -> None:
            for i in range(per_thread):
                seed_signup(f"{run}-{index}-{i}")

        return work

    makers = {LIB: library, BOTO3_SAME: same, BOTO3_MINIMAL: minimal, PYNAMODB_SEED: seed}
    keys = {LIB: "lib", BOTO3_SAME: "same", BOTO3_MINIMAL: "min", PYNAMODB_SEED: "seed"}
    total = threads * per_thread
    for name, make in makers.items():
        _threads(threads, make(f"warm{keys[name]}"))
    rates: dict[str, list[float]] = {name: [] for name in HTTP_CONTENDERS}
    cpu: dict[str, list[float]] = {name: [] for name in HTTP_CONTENDERS}
    for r in range(repeats):
        for name in rotated(HTTP_CONTENDERS, r):
            gc.collect()
            started = time.process_time()
            wall = _threads(threads, makers[name](f"{keys[name]}{r}"))
            rates[name].append(total / wall)
            cpu[name].append((time.process_time() - started) / total)
    return {name: Rates(Spread(tuple(rates[name])), Spread(tuple(cpu[name]))) for name in HTTP_CONTENDERS}


# --- 4. contention ---------------------------------------------------------------------------


@dataclass
class Contention:
    """Outcomes of signups on a few hot values."""

    hot: int
    successes: int = 0
    violations: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    retries: int = 0
    latencies: list[float] = field(default_factory=list)
    left: int = 0

    def percentile(self, p: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(p * len(ordered)))] * 1000


def contention(hot: int, per_thread: int) -> Contention:
    """8 threads sign up on ``hot`` values, each winner deletes its record to free the value again."""
    result = Contention(hot)
    lock = threading.Lock()
    real_sleep = unique_send.sleep

    def counting_sleep(delay: float) -> None:
        with lock:
            result.retries += 1
        real_sleep(delay)

    def work(index: int) -> None:
        rng = random.Random(index)
        for i in range(per_thread):
            value = rng.randrange(hot)
            account = UniqueAccount(pk=f"ACCT#c{hot}-{index}-{i}", email=f"hot{value}@example.com")
            start = time.perf_counter()
            outcome = "success"
            try:
                account.save()
            except UniqueViolation:
                outcome = "violation"
            except UniqueError as exc:
                outcome = type(exc).__name__
            elapsed = time.perf_counter() - start
            if outcome == "success":
                try:
                    account.delete()
                except UniqueError as exc:
                    outcome = f"delete: {type(exc).__name__}"
            with lock:
                result.latencies.append(elapsed)
                if outcome == "success":
                    result.successes += 1
                elif outcome == "violation":
                    result.violations += 1
                else:
                    result.errors[outcome] = result.errors.get(outcome, 0) + 1

    unique_send.sleep = counting_sleep
    try:
        _threads(THREADS, work)
    finally:
        unique_send.sleep = real_sleep
    items = botocore_client(UniqueAccount).scan(TableName=UniqueAccount.Meta.table_name, ConsistentRead=True)["Items"]
    result.left = sum(1 for item in items if item["PK"]["S"].startswith(("UNIQ#EMAIL#hot", "ACCT#c")))
    return result


# --- report ----------------------------------------------------------------------------------


def _table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    cells = [[str(c) for c in header], *[[str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return lines


def _markdown(header: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return lines


@dataclass
class Report:
    """The README's markdown and the verdict on each target, gathered section by section."""

    markdown: list[str] = field(default_factory=list)
    targets: list[str] = field(default_factory=list)

    def target(self, label: str, value: float, limit: float, *, at_most: bool) -> str:
        met = value <= limit if at_most else value >= limit
        verdict = f"{label} {value:.2f} (target {'<=' if at_most else '>='} {limit:.2f}: {'met' if met else 'MISSED'})"
        self.targets.append(verdict)
        return verdict


def report_requests(report: Report) -> None:
    """Section 1."""
    print("\n== 1. requests per operation (over HTTP)")
    rows = requests_per_operation()
    print("\n".join(_table(["operation", "API calls", "HTTP attempts", "transaction items"], rows)))
    report.markdown += [
        "",
        *_markdown(["operation", "requests", "transaction items"], [(r[0], r[1], r[3]) for r in rows]),
    ]


def report_cpu(report: Report, iterations: int, repeats: int, *, profile: bool, together: bool = False) -> None:
    """Section 2, with a cProfile of the library on request (``together``: see :func:`client_cpu`)."""
    how = "the four contenders taking turns at once" if together else "the library and each baseline taking turns"
    print(
        f"\n== 2. client CPU per operation, transport stubbed "
        f"({iterations} operations per contender, {how}, {repeats} repetitions)"
    )
    problems = check_requests()
    for problem in problems:
        print(f"WARNING: {problem}")
    if not problems:
        print("checked: the same request by hand sends the library's requests (token and table name aside);")
        print("         PynamoDB's own save()/update() send the library's single writes (but ReturnValuesOn...)")
    cpu = client_cpu(iterations, repeats, together=together)
    rows = []
    for op, by in cpu.items():
        lib, minimal = by[MINIMAL]
        ratios = [ratio(*by[name]) for name in BASELINES]
        rows.append((op, lib.show(1e6), minimal.show(1e6), *(r.show(digits=2) for r in ratios)))
        report.target(f"CPU {op}: library / minimal", ratios[0].median, CPU_TARGET, at_most=True)
    header = [
        "operation",
        "library µs",
        "minimal by hand µs",
        "library / minimal",
        "library / same request",
        "library / plain PynamoDB",
    ]
    print("\n".join(_table(header, rows)))
    source = "the same turns" if together else "their pair"
    print(
        f"(the median operation, median (min-max) over the repetitions, the library's and the minimal one's from"
        f" {source}; a ratio is the median (min-max) of the per-repetition ratios of the library and that baseline,"
        f" {how})"
    )
    on_unique, plain = update_floor(iterations, repeats)
    line = (
        f"non-unique update, {PYNAMODB_ON_UNIQUE} (the library's load hook, not its write path): "
        f"{on_unique.show(1e6)} µs, / plain PynamoDB {ratio(on_unique, plain).show(digits=2)}"
    )
    print(line)
    if profile:
        for op in cpu:
            print(f"\n-- cProfile of the library, {op} ({iterations} operations, stubbed transport)")
            print(profile_library(op, iterations))
    report.markdown += [
        "",
        f"Client CPU per operation, transport stubbed: the median of {iterations:,} operations per contender, "
        f"{how}, operation by operation; median (min-max) of {repeats} repetitions:",
        "",
        *_markdown(header, rows),
        "",
        f"- {line}",
    ]


def report_throughput(report: Report, host: str, per_thread: int, repeats: int, threads: int = THREADS) -> None:
    """Section 3; the target is judged at 8 threads only."""
    print(
        f"\n== 3. signups over HTTP, {threads} threads, distinct values "
        f"({threads * per_thread} signups per run, {repeats} repetitions)"
    )
    rates = throughput(host, per_thread, repeats, threads)
    lib = rates[LIB].per_second
    rows = [
        (
            name,
            rates[name].per_second.show(),
            rates[name].cpu_per_op.show(1e6),
            ratio(lib, rates[name].per_second).show(digits=2),
        )
        for name in HTTP_CONTENDERS
    ]
    header = [f"client, {threads} threads", "signups/s", "client CPU µs/signup", "library / this"]
    print("\n".join(_table(header, rows)))
    # Judged against the simplest correct signup by hand (the seed's three Puts), not a copy of the
    # library's own request, which is printed beside it.
    minimal = ratio(lib, rates[BOTO3_MINIMAL].per_second)
    if threads == THREADS:
        print(report.target("HTTP signups: library / boto3 minimal items", minimal.median, HTTP_TARGET, at_most=False))
    else:
        judged = f"(the target is judged at {THREADS} threads)"
        print(f"HTTP signups: library / boto3 minimal items: {minimal.show(digits=2)} {judged}")
    print(f"HTTP signups: library / boto3 same request: {ratio(lib, rates[BOTO3_SAME].per_second).show(digits=2)}")
    seed = rates[PYNAMODB_SEED].per_second
    print(
        f"HTTP signups: PynamoDB's seed transaction / boto3 same request: "
        f"{ratio(seed, rates[BOTO3_SAME].per_second).show(digits=2)}, / boto3 minimal items: "
        f"{ratio(seed, rates[BOTO3_MINIMAL].per_second).show(digits=2)}"
    )
    report.markdown += [
        "",
        f"Signups over HTTP, {threads} threads on distinct values, median (min-max) of {repeats} alternating "
        f"repetitions x {threads * per_thread:,} signups:",
        "",
        *_markdown(header, rows),
    ]


def report_contention(report: Report, per_thread: int) -> None:
    """Section 4."""
    print(f"\n== 4. contention: {THREADS} threads x {per_thread} signups, winners delete to free the value")
    rows = []
    for hot in (1, 10, 100):
        c = contention(hot, per_thread)
        errors = ", ".join(f"{k} {v}" for k, v in sorted(c.errors.items())) or "0"
        p50, p99 = f"{c.percentile(0.5):.1f}", f"{c.percentile(0.99):.1f}"
        rows.append((hot, c.successes, c.violations, errors, c.retries, p50, p99, c.left))
    header = ["hot values", "successes", "violations", "other errors", "retries", "p50 ms", "p99 ms", "left"]
    print("\n".join(_table(header, rows)))
    print("(left: records and hot locks still in the table afterwards; 0 means nothing orphaned)")
    report.markdown += ["", *_markdown(header, rows)]


def report_audit(report: Report, host: str, items: int, repeats: int) -> None:
    """Section 5."""
    accounts = scan_throughput.accounts_for(items)
    print(f"\n== 5. audit vs a raw boto3 Scan that only counts items ({accounts * 3:,} items, {repeats} repetitions)")
    model = scan_throughput.fresh_table(host)
    figures = scan_throughput.measure_audit(model, host, accounts, repeats)
    lines = figures.lines()
    print("\n".join(lines))
    print(report.target("audit: audit / raw Scan", statistics.median(figures.ratios), AUDIT_TARGET, at_most=False))
    report.markdown += ["", *(f"- {line}" for line in lines)]


def report_bulk(report: Report, host: str, records: int, repeats: int) -> None:
    """Section 6."""
    print(f"\n== 6. bulk import vs a loop of save() ({records:,} records, {repeats} repetitions)")
    lines, ratio = bulk.report_bulk(host, records, repeats)
    print("\n".join(lines[:-1]))
    print(report.target("bulk: bulk_save / save() loop", ratio, bulk.TARGET, at_most=False))
    report.markdown += ["", *(f"- {line.strip()}" for line in lines[:-1])]


def main(argv: Sequence[str] | None = None) -> int:
    """Run every section and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="a smoke run: small sizes, still 5 repetitions")
    parser.add_argument("--repeats", type=int, help=f"alternating repetitions (at least {MIN_REPEATS}; default 7)")
    parser.add_argument("--audit-items", type=int, help="items in the audited table (default 20,000)")
    parser.add_argument("--profile", action="store_true", help="print a cProfile of the library per operation")
    parser.add_argument(
        "--http-threads", type=int, default=THREADS, help=f"client threads of the HTTP section (default {THREADS})"
    )
    parser.add_argument(
        "--cpu-together",
        action="store_true",
        help="time the CPU section's four contenders taking turns at once (the method before pairs), for comparison",
    )
    args = parser.parse_args(argv)
    if args.quick:
        iterations, repeats, per_thread, contended, audit_items, bulk_records = 150, MIN_REPEATS, 15, 15, 3_000, 300
    else:
        iterations, repeats, per_thread, contended, audit_items, bulk_records = 1_000, 7, 100, 100, 20_000, 2_000
    repeats = max(MIN_REPEATS, args.repeats or repeats)
    audit_items = args.audit_items or audit_items
    started = time.perf_counter()

    # Fake credentials: dynoxide accepts any; nothing is read from the developer's AWS config.
    fake = "bench"
    os.environ.update(AWS_ACCESS_KEY_ID=fake, AWS_SECRET_ACCESS_KEY=fake, AWS_DEFAULT_REGION=REGION)
    os.environ["AWS_CONFIG_FILE"] = os.environ["AWS_SHARED_CREDENTIALS_FILE"] = os.devnull

    print("== machine")
    for line in machine():
        print(line)
    report = Report()
    with dynoxide() as host:
        bind(host, "requests")
        report_requests(report)
        bind(host, "cpu")
        report_cpu(report, iterations, repeats, profile=args.profile, together=args.cpu_together)
        bind(host, "http")
        report_throughput(report, host, per_thread, repeats, args.http_threads)
        bind(host, "contention")
        report_contention(report, contended)
        report_audit(report, host, audit_items, repeats)
        report_bulk(report, host, bulk_records, max(bulk.MIN_REPEATS, repeats // 2))
    elapsed = time.perf_counter() - started

    print("\n== markdown for the README")
    print(f"Measured with `python benchmarks/run.py{' --quick' if args.quick else ''}` ({elapsed:.0f} s) on:")
    for line in machine():
        print(f"- {line}")
    print("\n".join(report.markdown))
    print("")
    print("targets: " + "; ".join(report.targets))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
