"""What uniqueness costs: requests per operation, client CPU, HTTP throughput and contention.

Run from the repository root (dynoxide installed by ``bash scripts/test``, or ``DYNOXIDE_BIN``)::

    python benchmarks/run.py            # about two minutes on 2 cores
    python benchmarks/run.py --quick    # fewer iterations, for a smoke run

It starts its own dynoxide server on a free port and stops it (by PID) when done. Nothing here is
a test: it prints figures, including a markdown table for the README.

Sections:

1. Requests, HTTP attempts and transaction items per lifecycle operation (over HTTP).
2. Client CPU per operation, transport stubbed (the botocore client's ``_make_api_call`` returns
   ``{}`` in this process), so only client work is timed: the library vs the same items written
   by hand with PynamoDB's ``TransactWrite`` vs plain PynamoDB without uniqueness.
   ``time.process_time`` over many iterations, repeated; the median is kept.
3. Throughput over HTTP, 8 threads on distinct values: library signups vs hand-written boto3
   ``transact_write_items`` of the same three Puts.
4. Contention: 8 threads signing up (then deleting) on 1, 10 and 100 hot values.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import json
import os
import platform
import pstats
import random
import socket
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import Any, Final

import boto3
from botocore.config import Config
from pynamodb.attributes import UnicodeAttribute
from pynamodb.connection import Connection
from pynamodb.constants import ALL_OLD
from pynamodb.expressions.condition import Condition
from pynamodb.models import Model
from pynamodb.transactions import TransactWrite

import pynamodb_unique._send as unique_send
from pynamodb_unique import UniqueAttribute, UniqueConstraint, UniqueError, UniqueMixin, UniqueViolation

REGION: Final = "us-east-1"
REPO: Final = Path(__file__).resolve().parent.parent
DYNOXIDE_DEFAULT: Final = REPO / ".tools" / "node_modules" / "@dynoxide" / "linux-x64" / "dynoxide"
THREADS: Final = 8
CPU_TARGET: Final = 1.10
THROUGHPUT_TARGET: Final = 0.90


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


class Lock(Model):
    """A lock item written by hand, in the plain table: the items the library writes."""

    class Meta:
        table_name = "bench-plain"
        region = REGION
        host: str | None = None

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    sk = UnicodeAttribute(range_key=True, attr_name="SK", default="LOCK")
    owner_hash = UnicodeAttribute(attr_name="uniq_owner_hash")
    owner_range = UnicodeAttribute(attr_name="uniq_owner_range")
    constraint = UnicodeAttribute(attr_name="uniq_constraint")


MODELS: Final[tuple[type[Model], ...]] = (UniqueAccount, PlainAccount, Lock)


def _escape(value: str) -> str:
    return value.replace("%", "%25").replace("#", "%23")


def _lock_for(account: PlainAccount, name: str, value: str) -> Lock:
    return Lock(pk=f"UNIQ#{name}#{_escape(value)}", owner_hash=account.pk, owner_range=account.sk, constraint=name)


def _owned_or_free(account: PlainAccount) -> Condition:
    owned: Condition = (Lock.owner_hash == account.pk) & (Lock.owner_range == account.sk)
    free: Condition = Lock.pk.does_not_exist() | owned
    return free


def _stored_as(email: str, username: str | None) -> Condition:
    """The compare-and-swap the library puts on a record write: its unique values as stored."""
    cas: Condition = PlainAccount.email == email
    cas &= PlainAccount.username.does_not_exist() if username is None else PlainAccount.username == username
    cas &= PlainAccount.tenant.does_not_exist() & PlainAccount.slug.does_not_exist()
    return cas


# --- dynoxide --------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def dynoxide() -> Iterator[str]:
    """Start an in-memory dynoxide on a free port; stop it by PID on exit."""
    binary = Path(os.environ.get("DYNOXIDE_BIN") or DYNOXIDE_DEFAULT)
    if not binary.is_file():
        msg = f"dynoxide not found at {binary}; run `bash scripts/test` once or set DYNOXIDE_BIN"
        raise SystemExit(msg)
    port = _free_port()
    proc = subprocess.Popen(  # noqa: S603 - our own binary, fixed arguments.
        [str(binary), "serve", "--host", "127.0.0.1", "--port", str(port)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise SystemExit("dynoxide did not start") from None
                time.sleep(0.02)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


def bind(host: str, run: str) -> None:
    """Point the models at ``host``, on fresh tables (``Lock`` shares the plain one), and create them."""
    for model, kind in ((UniqueAccount, "unique"), (PlainAccount, "plain"), (Lock, "plain")):
        model.Meta.host = host
        model.Meta.table_name = f"bench-{kind}-{run}"
        model._connection = None
    UniqueAccount.create_table(wait=True, billing_mode="PAY_PER_REQUEST")
    PlainAccount.create_table(wait=True, billing_mode="PAY_PER_REQUEST")


def _client(model: type[Model]) -> Any:
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
        f"nproc: {nproc}",
        f"cpu: {model}",
        f"python: {platform.python_version()} ({platform.python_implementation()}, {sys.platform})",
        f"pynamodb {version('pynamodb')}, botocore {version('botocore')}, "
        f"pynamodb-unique {version('pynamodb-unique')}, dynoxide (in-memory, localhost HTTP)",
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
    events = _client(model).meta.events
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


def _stub_response(operation_name: str, api_params: dict[str, Any]) -> dict[str, Any]:
    return {}


@contextlib.contextmanager
def stubbed_transport() -> Iterator[None]:
    """Every model's botocore client answers ``{}`` without serializing or sending anything."""
    clients = {id(c): c for c in (_client(m) for m in MODELS)}
    for client in clients.values():
        client._make_api_call = _stub_response
    try:
        yield
    finally:
        for client in clients.values():
            del client._make_api_call


@dataclass(frozen=True)
class Variant:
    """One way to perform an operation: prepare ``n`` inputs, then run them (timed)."""

    name: str
    prepare: Callable[[int], list[Any]]
    run: Callable[[Any], object]


def _unique_known(n: int) -> list[UniqueAccount]:
    accounts = [_account(i) for i in range(n)]
    for account in accounts:
        account.save()
    return accounts


def _plain(n: int) -> list[PlainAccount]:
    return [PlainAccount(pk=f"ACCT#{i}", email=f"user{i}@example.com", username=f"user{i}") for i in range(n)]


def _text(value: str | None) -> str:
    if value is None:
        msg = "a benchmark account lacks a value"
        raise ValueError(msg)
    return value


def _hand_tx() -> TransactWrite:
    connection: Connection = PlainAccount._get_connection().connection
    return TransactWrite(connection=connection, client_request_token=str(uuid.uuid4()))


def _hand_create(account: PlainAccount) -> None:
    with _hand_tx() as tx:
        tx.save(account, condition=PlainAccount.pk.does_not_exist(), return_values=ALL_OLD)
        for name, value in (("EMAIL", _text(account.email).casefold()), ("HANDLE", _text(account.username))):
            tx.save(_lock_for(account, name, value), condition=_owned_or_free(account), return_values=ALL_OLD)


def _hand_change(account: PlainAccount) -> None:
    old = _text(account.email)
    new = "x" + old
    account.email = new
    with _hand_tx() as tx:
        tx.delete(Lock(pk=f"UNIQ#EMAIL#{_escape(old.casefold())}"), condition=_owned_or_free(account))
        tx.save(_lock_for(account, "EMAIL", new.casefold()), condition=_owned_or_free(account), return_values=ALL_OLD)
        tx.save(account, condition=_stored_as(old, account.username), return_values=ALL_OLD)


def _hand_delete(account: PlainAccount) -> None:
    email, username = _text(account.email), _text(account.username)
    with _hand_tx() as tx:
        gone: Condition = PlainAccount.pk.does_not_exist() | _stored_as(email, username)
        tx.delete(account, condition=gone)
        for name, value in (("EMAIL", email.casefold()), ("HANDLE", username)):
            tx.delete(Lock(pk=f"UNIQ#{name}#{_escape(value)}"), condition=_owned_or_free(account))


def _change_unique(account: UniqueAccount) -> None:
    account.email = "x" + account.email
    account.save()


def _save_bio(account: UniqueAccount | PlainAccount) -> None:
    account.bio = "mathematician"
    account.save()


def _save_bio_cas(account: PlainAccount) -> None:
    account.bio = "mathematician"
    account.save(condition=_stored_as(_text(account.email), account.username))


CPU_OPERATIONS: Final[dict[str, tuple[Variant, Variant, Variant]]] = {
    "create": (
        Variant("library", lambda n: [_account(i) for i in range(n)], lambda a: a.save()),
        Variant("hand-written", _plain, _hand_create),
        Variant("plain PynamoDB", _plain, lambda a: a.save()),
    ),
    "unique change": (
        Variant("library", _unique_known, _change_unique),
        Variant("hand-written", _plain, _hand_change),
        Variant("plain PynamoDB", _plain, _save_bio),
    ),
    "non-unique save": (
        Variant("library", _unique_known, _save_bio),
        Variant("hand-written", _plain, _save_bio_cas),
        Variant("plain PynamoDB", _plain, _save_bio),
    ),
    "delete": (
        Variant("library", _unique_known, lambda a: a.delete()),
        Variant("hand-written", _plain, _hand_delete),
        Variant("plain PynamoDB", _plain, lambda a: a.delete()),
    ),
}


def _cpu_per_op(variant: Variant, iterations: int) -> float:
    inputs = variant.prepare(iterations)
    run = variant.run
    start = time.process_time()
    for item in inputs:
        run(item)
    return (time.process_time() - start) / iterations


def client_cpu(iterations: int, repeats: int) -> dict[str, dict[str, float]]:
    """Median CPU seconds per operation, for each operation and variant."""
    samples: dict[str, dict[str, list[float]]] = {op: {v.name: [] for v in vs} for op, vs in CPU_OPERATIONS.items()}
    with stubbed_transport():
        for variants in CPU_OPERATIONS.values():  # Warm up: imports, caches, first connections.
            for variant in variants:
                _cpu_per_op(variant, 50)
        for _ in range(repeats):
            for op, variants in CPU_OPERATIONS.items():
                for variant in variants:
                    samples[op][variant.name].append(_cpu_per_op(variant, iterations))
    return {op: {name: statistics.median(s) for name, s in by.items()} for op, by in samples.items()}


def profile_library(operation: str, iterations: int, top: int = 18) -> str:
    """Where the library's client time goes for ``operation`` (cProfile, by own time)."""
    variant = CPU_OPERATIONS[operation][0]
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


def _signup_items(table: str, n: str) -> list[dict[str, Any]]:
    """The three Puts of one signup, as DynamoDB JSON: what the library sends for ``create``."""
    owner = {"uniq_owner_hash": {"S": f"ACCT#{n}"}, "uniq_owner_range": {"S": "PROFILE"}}
    item = {"PK": {"S": f"ACCT#{n}"}, "SK": {"S": "PROFILE"}, "email": {"S": f"{n}@example.com"}}
    item["username"] = {"S": f"u{n}"}
    record = {
        "TableName": table,
        "Item": item,
        "ConditionExpression": "attribute_not_exists(#pk)",
        "ExpressionAttributeNames": {"#pk": "PK"},
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }
    items: list[dict[str, Any]] = [{"Put": record}]
    for name, value in (("EMAIL", f"{n}@example.com"), ("HANDLE", f"u{n}")):
        key = {"PK": {"S": f"UNIQ#{name}#{_escape(value)}"}, "SK": {"S": "LOCK"}}
        lock = {
            "TableName": table,
            "Item": {**key, **owner, "uniq_constraint": {"S": name}},
            "ConditionExpression": "attribute_not_exists(#pk) OR (#oh = :oh AND #or = :or)",
            "ExpressionAttributeNames": {"#pk": "PK", "#oh": "uniq_owner_hash", "#or": "uniq_owner_range"},
            "ExpressionAttributeValues": {":oh": owner["uniq_owner_hash"], ":or": owner["uniq_owner_range"]},
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
        items.append({"Put": lock})
    return items


@dataclass(frozen=True)
class Rate:
    """Signups per second (wall) and this process's CPU seconds per signup."""

    per_second: float
    cpu_per_op: float


def throughput(host: str, per_thread: int, repeats: int) -> dict[str, Rate]:
    """Median rates of signups, 8 threads, distinct values: library, boto3 and PynamoDB by hand."""
    client = _boto3_client(host)
    table = PlainAccount.Meta.table_name

    def library(run: str) -> Callable[[int], None]:
        def work(index: int) -> None:
            for i in range(per_thread):
                n = f"{run}-{index}-{i}"
                UniqueAccount(pk=f"ACCT#{n}", email=f"{n}@example.com", username=f"u{n}").save()

        return work

    def hand(run: str) -> Callable[[int], None]:
        def work(index: int) -> None:
            for i in range(per_thread):
                n = f"{run}-{index}-{i}"
                client.transact_write_items(TransactItems=_signup_items(table, n), ClientRequestToken=str(uuid.uuid4()))

        return work

    def pynamodb(run: str) -> Callable[[int], None]:
        def work(index: int) -> None:
            for i in range(per_thread):
                n = f"{run}-{index}-{i}"
                _hand_create(PlainAccount(pk=f"ACCT#{n}", email=f"{n}@example.com", username=f"u{n}"))

        return work

    total = THREADS * per_thread
    variants = (("library", library), ("boto3", hand), ("pynamodb", pynamodb))
    for name, make in variants:
        _threads(THREADS, make(f"warm-{name}"))
    runs: dict[str, list[tuple[float, float]]] = {name: [] for name, _ in variants}
    for r in range(repeats):
        for name, make in variants:
            cpu = time.process_time()
            wall = _threads(THREADS, make(f"{name}-{r}"))
            runs[name].append((total / wall, (time.process_time() - cpu) / total))
    return {name: Rate(*(statistics.median(x) for x in zip(*samples, strict=True))) for name, samples in runs.items()}


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
    items = _client(UniqueAccount).scan(TableName=UniqueAccount.Meta.table_name, ConsistentRead=True)["Items"]
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


def report_requests() -> list[str]:
    """Section 1; returns its markdown."""
    print("\n== 1. requests per operation (over HTTP)")
    rows = requests_per_operation()
    print("\n".join(_table(["operation", "API calls", "HTTP attempts", "transaction items"], rows)))
    return ["", *_markdown(["operation", "requests", "transaction items"], [(r[0], r[1], r[3]) for r in rows])]


def report_cpu(iterations: int, repeats: int, *, profile: bool) -> list[str]:
    """Section 2, with a profile of the library when it misses the target; returns its markdown."""
    print(f"\n== 2. client CPU per operation, transport stubbed ({iterations} iterations, median of {repeats})")
    cpu = client_cpu(iterations, repeats)
    rows = []
    worst = 0.0
    for op, by in cpu.items():
        lib, hand, plain = by["library"], by["hand-written"], by["plain PynamoDB"]
        worst = max(worst, lib / hand)
        micros = [f"{t * 1e6:.0f}" for t in (lib, hand, plain)]
        rows.append((op, *micros, f"{lib / hand:.2f}", f"{lib / plain:.2f}"))
    header = ["operation", "library us", "hand-written us", "plain us", "library/hand", "library/plain"]
    print("\n".join(_table(header, rows)))
    verdict = "meets" if worst <= CPU_TARGET else "MISSES"
    print(f"worst library/hand-written: {worst:.2f} ({verdict} the target <= {CPU_TARGET:.2f})")
    if worst > CPU_TARGET or profile:
        for op in cpu:
            print(f"\n-- cProfile of the library, {op} ({iterations} operations, stubbed transport)")
            print(profile_library(op, iterations))
    return ["", *_markdown(header, rows)]


def report_throughput(host: str, per_thread: int, repeats: int) -> list[str]:
    """Section 3; returns its markdown."""
    print(f"\n== 3. throughput over HTTP, {THREADS} threads, distinct values ({THREADS * per_thread} signups/run)")
    rates = throughput(host, per_thread, repeats)
    lib, hand, pynamodb = rates["library"], rates["boto3"], rates["pynamodb"]
    ratio = lib.per_second / hand.per_second
    verdict = "meets" if ratio >= THROUGHPUT_TARGET else "MISSES"
    clients = (
        ("library", lib),
        ("hand-written boto3 TransactWriteItems", hand),
        ("hand-written PynamoDB TransactWrite (same items)", pynamodb),
    )
    rows = [(name, f"{rate.per_second:.0f}", f"{rate.cpu_per_op * 1e6:.0f}") for name, rate in clients]
    print("\n".join(_table(["client", "signups/s", "client CPU us/signup (this process)"], rows)))
    print(f"library/hand-written boto3: {ratio:.2f} ({verdict} the target >= {THROUGHPUT_TARGET:.2f})")
    print(f"library/hand-written PynamoDB: {lib.per_second / pynamodb.per_second:.2f}")
    header = ["client, 8 threads", "signups/s", "client CPU us/signup", "library/this"]
    md_rows = [(*row, f"{lib.per_second / rate.per_second:.2f}") for row, (_, rate) in zip(rows, clients, strict=True)]
    return ["", *_markdown(header, md_rows)]


def report_contention(per_thread: int) -> list[str]:
    """Section 4; returns its markdown."""
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
    return ["", *_markdown(header, rows)]


def main(argv: Sequence[str] | None = None) -> int:
    """Run every section and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="fewer iterations: a smoke run, not figures")
    parser.add_argument("--profile", action="store_true", help="profile the library even when it meets the target")
    args = parser.parse_args(argv)
    iterations, repeats, per_thread, contended = (200, 3, 20, 20) if args.quick else (1500, 7, 150, 100)

    # Fake credentials: dynoxide accepts any; nothing is read from the developer's AWS config.
    fake = "bench"
    os.environ.update(AWS_ACCESS_KEY_ID=fake, AWS_SECRET_ACCESS_KEY=fake, AWS_DEFAULT_REGION=REGION)
    os.environ["AWS_CONFIG_FILE"] = os.environ["AWS_SHARED_CREDENTIALS_FILE"] = os.devnull

    print("== machine")
    for line in machine():
        print(line)
    markdown: list[str] = []
    with dynoxide() as host:
        bind(host, "requests")
        markdown += report_requests()
        bind(host, "cpu")
        markdown += report_cpu(iterations, repeats, profile=args.profile)
        bind(host, "http")
        markdown += report_throughput(host, per_thread, max(3, repeats // 2))
        markdown += report_contention(contended)

    print("\n== markdown for the README")
    for line in machine():
        print(f"- {line}")
    print("\n".join(markdown))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
