"""``bulk_save``: many new records with their locks, packed into concurrent TransactWriteItems.

BatchWriteItem carries no conditions, so it cannot keep locks in step (``batch_write()`` is
refused). A bulk import instead packs whole records (the record's Put and its lock Puts, never
split) into transactions of at most 100 actions, each under a ClientRequestToken derived from its
content: re-running the same import after a crash replays the chunks already committed instead of
writing them twice. A cancelled chunk is read through the engine's ``interpret``; the records it
settles (a taken value, an existing record) leave, the rest are packed again and re-sent.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any, Final, Generic, TypeVar

from pynamodb.attributes import VersionAttribute
from pynamodb.connection import Connection
from pynamodb.constants import ALL_OLD
from pynamodb.models import Model

from .._core.limits import MAX_TOKEN_LENGTH, RETRY_ATTEMPTS
from .._core.lockitem import OwnerKey
from .._core.outcome import ClaimLost, Finding, RecordFailed, Unexplained, Violated, WriteFailed, decide, interpret
from .._core.plan import MAX_TRANSACTION_ACTIONS, LockPut, Plan, PlanAction, RecordWrite, Stored
from .._core.reservation import claimed
from .._model.context import ModelContext, context_of
from .._model.seam import connection as model_connection
from .._model.seam import serialized_key
from ..exceptions import InvalidUniqueValue, Violation
from . import telemetry as _telemetry
from .engine import Intent, after_success, plan_once
from .requests import build_request
from .reserve import Reservation, claims_for
from .send import request_clock, send_transaction

_M = TypeVar("_M", bound=Model)

#: DynamoDB's limit on the aggregate size of one TransactWriteItems is 4 MB; a chunk's request
#: JSON (larger than the items it carries) is kept under this many bytes.
MAX_TRANSACTION_BYTES: Final = 4_000_000
#: Folded into every chunk's token, so a bulk chunk never shares a token with another operation.
TOKEN_BASE: Final = "pynamodb-unique-bulk"  # noqa: S105 - a request token prefix, not a password.


@dataclass(frozen=True)
class BulkResult(Generic[_M]):
    """What :func:`bulk_save` did with each instance: every one is in exactly one place.

    Attributes:
        saved: instances written with their locks (or found already written exactly so, as by an
            earlier run of the same import), in input order.
        violations: one :class:`Violation` per constraint an unsaved instance could not take
            (``.instance`` is the instance, ``.owner`` the holder's key), in input order.
        existing: instances whose key already held another record, left untouched, in input order.
        lost: instances not written because a reservation they claimed (``reservations=``) no
            longer held its values (it ended, was released or was claimed), in input order.
    """

    saved: tuple[_M, ...] = ()
    violations: tuple[Violation, ...] = ()
    existing: tuple[_M, ...] = ()
    lost: tuple[_M, ...] = ()


@dataclass
class _Record:
    """One input instance: its transaction Puts (the record's first) and what each one is."""

    index: int
    instance: Model
    context: ModelContext | None
    owner: OwnerKey
    actions: list[PlanAction]
    items: list[dict[str, Any]]
    plan: Plan | None = None
    desired: dict[str, Any] = field(default_factory=dict)
    #: Set when the record was found stored exactly as it would be written: its next send checks
    #: it still holds its unique values (this ConditionCheck) instead of putting it, and puts its locks.
    check: dict[str, Any] | None = None
    #: Its next send's items as canonical JSON: the chunk's size and token are computed from it.
    body: str = ""

    def __post_init__(self) -> None:
        self.refresh()

    def refresh(self) -> None:
        """Recompute :attr:`body` after the record's next send changed."""
        checks, puts = self.sent()
        sent = [*(("check", item) for _, item in checks), *(("put", item) for _, item in puts)]
        self.body = json.dumps(sent, sort_keys=True, default=repr)

    def sent(self) -> tuple[list[tuple[PlanAction, dict[str, Any]]], list[tuple[PlanAction, dict[str, Any]]]]:
        """(ConditionChecks, Puts) of this record's next send, each with the action it stands for."""
        pairs = list(zip(self.actions, self.items, strict=True))
        if self.check is None:
            return [], pairs
        return [(self.actions[0], self.check)], pairs[1:]

    @property
    def size(self) -> int:
        """Actions of its next send (at most 1 + 49 locks: a model has at most 49 constraints)."""
        return len(self.items)


#: One item of a chunk: its record, the action it stands for, the request item.
_Sent = tuple[_Record, PlanAction, dict[str, Any]]


@dataclass
class _Chunk:
    """One TransactWriteItems of whole records."""

    records: list[_Record]
    #: Folded into the token with the records: the caller's ``run_id``, or none.
    run_id: str = ""

    def sent(self) -> tuple[list[_Sent], list[_Sent]]:
        """Its ConditionChecks and its Puts, each with its record and the action it stands for.

        PynamoDB sends every ConditionCheck, then every Put: ``CancellationReasons`` follow the two
        lists one after the other.
        """
        records = [(r, r.sent()) for r in self.records]
        checks = [(r, action, item) for r, (sent, _) in records for action, item in sent]
        return checks, [(r, action, item) for r, (_, sent) in records for action, item in sent]

    @property
    def token(self) -> str:
        """The ClientRequestToken: a digest of the records as sent (36 characters, DynamoDB's limit).

        The request is a function of its records' items in order, so the same records give the
        same token, and any other request another one.
        """
        digest = hashlib.sha256("\x1e".join([TOKEN_BASE, self.run_id, *(r.body for r in self.records)]).encode())
        return digest.hexdigest()[:MAX_TOKEN_LENGTH]


_SET_TYPES: Final = frozenset({"SS", "NS", "BS"})
#: The attribute types that are sets or may hold one.
_NESTED: Final = _SET_TYPES | {"M", "L"}


def _canonical(value: Any) -> Any:
    """DynamoDB JSON with the members of every set sorted.

    PynamoDB serializes a set in iteration order, which changes with string hashing from one
    process to the next: sorted, the same record gives the same request, and the same token,
    when the import runs again.
    """
    if isinstance(value, dict):
        if all(isinstance(v, dict) and v.keys().isdisjoint(_NESTED) for v in value.values()):
            return value  # An item of scalar attributes (the usual record): nothing to sort.
        return {
            k: sorted(v, key=repr) if k in _SET_TYPES and isinstance(v, list) else _canonical(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_canonical(v) for v in value]
    return value


def _hash_attribute(model: type[Model]) -> Any:
    return next(a for a in model.get_attributes().values() if a.is_hash_key)


def _version(instance: Model) -> Any:
    """The instance's version, when its model has a VersionAttribute (None: none, or unset)."""
    for name, attribute in instance.get_attributes().items():
        if isinstance(attribute, VersionAttribute):
            return getattr(instance, name)
    return None


def _record(index: int, instance: object, reserved: Mapping[str, Reservation] | None = None) -> _Record:
    """Plan one create as ``save()`` of a new record would, refusing bad input before any request.

    ``reserved``: the reservations of the input by lock key; the record claims those of its values.

    Raises:
        InvalidUniqueValue: a value cannot be keyed, the hash key is reserved, or the instance
            holds a version (a record already saved: ``save()`` it instead).
        TypeError: ``instance`` is not a PynamoDB model instance.
    """
    if not isinstance(instance, Model):
        msg = f"bulk_save() takes PynamoDB model instances, got {type(instance).__name__}"
        raise TypeError(msg)
    model = type(instance)
    context = context_of(model)
    if context is not None and context.active() is None:
        context = None
    version = _version(instance)
    if version is not None:
        who = f"{model.__name__} {serialized_key(instance)}"
        msg = f"bulk_save() creates records: {who} has version {version} (a saved record): save() it instead"
        raise InvalidUniqueValue(msg)
    if context is None:
        # PynamoDB's own Put (the version condition included), refused when the key is taken.
        item = instance.get_save_kwargs_from_instance(
            condition=_hash_attribute(model).does_not_exist(), return_values_on_condition_failure=ALL_OLD
        )
        item["Item"] = _canonical(item["Item"])
        hash_key, range_key = serialized_key(instance)
        owner = (hash_key,) if range_key is None else (hash_key, range_key)
        return _Record(index, instance, None, owner, [RecordWrite("put", None)], [item])
    context.check_key(instance)
    desired = context.values(instance)
    plan, desired = plan_once(context, "put", Stored(exists=False), desired)
    locks = context.locks()
    if reserved:
        mine = {id(r): r for put in plan.puts if (r := reserved.get(put.key)) is not None}
        plan = claimed(plan, claims_for(context, locks, desired, mine.values()))
    now = None
    if locks.expiring:
        # Its lock Puts carry the time (expired locks are free): the same record (its key and the
        # values its locks depend on) keeps the time of its first request in this process, so its
        # chunk's request, and token, stay the same.
        record = json.dumps([context.owner(instance), sorted(desired.items())], default=repr)
        pin = hashlib.sha256(f"{TOKEN_BASE}\x1e{record}".encode()).hexdigest()[:MAX_TOKEN_LENGTH]
        now = request_clock(pin)
    request = build_request(context, instance, plan, None, None, add_version_condition=True, locks=locks, now=now)
    actions = plan.sent()
    items = request.arguments()
    items[0] = {**items[0], "Item": _canonical(items[0]["Item"])}
    return _Record(index, instance, context, context.owner(instance), actions, items, plan, desired)


def _check(record: _Record) -> dict[str, Any]:
    """A ConditionCheck that the stored record holds the unique values its locks are for."""
    assert record.context is not None  # noqa: S101 - only records with locks are confirmed.
    condition = record.context.planner.cas(Stored(exists=True, values=record.desired))
    key = record.context.key(record.instance)
    return type(record.instance).get_operation_kwargs_from_class(*key, condition=condition)


def _lock_table(record: _Record) -> str:
    assert record.context is not None  # noqa: S101 - only records with locks.
    return record.context.locks().table_name


def _prepare(instances: Sequence[object], reservations: Sequence[Reservation] = ()) -> list[_Record]:
    """Plan every record, each claiming the reservations of its values.

    Raises:
        InvalidUniqueValue: bad input (see :func:`_record`), two instances with one key, models
            on different endpoints (one transaction spans one region and account), or a
            reservation no instance holds all the values of.
    """
    records: list[_Record] = []
    keys: set[tuple[str, OwnerKey]] = set()
    where = {(m.Meta.region, m.Meta.host) for m in {type(i) for i in instances if isinstance(i, Model)}}
    if len(where) > 1:
        msg = f"bulk_save() sends one transaction per chunk: every model must share region and host, got {where}"
        raise InvalidUniqueValue(msg)
    reserved = {key: r for r in reservations for key in getattr(r, "lock_keys", ())}
    for index, instance in enumerate(instances):
        record = _record(index, instance, reserved)
        key = (type(record.instance).Meta.table_name, record.owner)
        if key in keys:
            msg = f"bulk_save() got two instances with the key {record.owner} in {key[0]}"
            raise InvalidUniqueValue(msg)
        keys.add(key)
        records.append(record)
    claimed_tokens = {put.claim for r in records if r.plan is not None for put in r.plan.puts}
    unclaimed = [r for r in reservations if not isinstance(r, Reservation) or r.token not in claimed_tokens]
    if unclaimed:
        msg = f"bulk_save(): no instance holds every value of {len(unclaimed)} of the reservations given"
        raise InvalidUniqueValue(msg)
    return records


def _lock_puts(record: _Record) -> list[tuple[LockPut, dict[str, Any]]]:
    """The record's lock Puts, each with its request item."""
    return [(a, item) for a, item in zip(record.actions, record.items, strict=True) if isinstance(a, LockPut)]


#: A value claimed by a record of the input, by (lock table, lock key): the record and its lock item.
_Claims = dict[tuple[str, str], tuple[_Record, dict[str, Any]]]


def _select(records: list[_Record], claims: _Claims) -> tuple[list[_Record], list[_Record]]:
    """Split records into those to send now and those claiming a value an earlier one claims.

    The first record to claim a value is sent; a later one waits until it is settled: saved, the
    value is its and the later one a violation; refused, the value is still free (see :func:`_waited`).

    Args:
        records: records not settled yet, in input order.
        claims: filled with the values the records sent now claim.
    """
    now: list[_Record] = []
    waiting: list[_Record] = []
    for record in records:
        puts = _lock_puts(record)
        table = _lock_table(record) if puts else ""
        if any((table, action.key) in claims for action, _ in puts):
            waiting.append(record)
            continue
        for action, item in puts:
            claims[table, action.key] = (record, item["Item"])
        now.append(record)
    return now, waiting


def _waited(waiting: list[_Record], claims: _Claims, outcomes: _Outcomes) -> list[_Record]:
    """Settle the records that waited for earlier claimers of their values; return those to send.

    A value an earlier record of the input was saved with makes a violation naming that record, as
    ``save()`` would report it; the values of an earlier record refused stay free.
    """
    again = []
    for record in waiting:
        table = _lock_table(record)
        taken = [
            (action, claims[table, action.key][1])
            for action, _ in _lock_puts(record)
            if (table, action.key) in claims and claims[table, action.key][0].index in outcomes.saved
        ]
        if not taken:
            again.append(record)
            continue
        assert record.context is not None  # noqa: S101 - only records with locks take values.
        # Each constraint once (during a migration a value may be taken under both forms).
        first = {id(action.constraint): (action, lock) for action, lock in reversed(taken)}
        found = [Finding("taken", action, lock) for action, lock in reversed(first.values())]
        outcomes.violations[record.index] = [record.context.violation(f, record.instance) for f in found]
        _telemetry.violated(outcomes.violations[record.index])
    return again


def _pack(records: Iterable[_Record], run_id: str) -> list[_Chunk]:
    """Whole records, in order, into chunks of at most 100 actions and under 4 MB."""
    chunks: list[_Chunk] = []
    actions = size = 0
    for record in records:
        body = len(record.body)  # JSON escapes what is not ASCII: characters are bytes, at least.
        if not chunks or actions + record.size > MAX_TRANSACTION_ACTIONS or size + body > MAX_TRANSACTION_BYTES:
            chunks.append(_Chunk([], run_id))
            actions = size = 0
        chunks[-1].records.append(record)
        actions += record.size
        size += body
    return chunks


def _send_chunk(connection: Connection, chunk: _Chunk, attempts: int) -> None:
    """Send one chunk, retrying conflicts and throttling with the same token, as ``send`` does.

    Raises:
        WriteFailed: a condition failed; the reasons follow the chunk's checks, then its Puts.
        IdempotencyMismatch: the token was used for a different request.
        TransientError: conflicts or throttling outlasted ``attempts``.
    """
    checks, puts = ([item for _, _, item in group] for group in chunk.sent())
    models = {type(r.instance) for r in chunk.records}
    what = ",".join(sorted({m.__name__ for m in models}))
    watched = _telemetry.watch("bulk_save", what, models)
    if watched is None:
        send_transaction(connection, {"check": checks, "put": puts}, chunk.token, attempts=attempts)
        return
    with watched:
        watched.sending("TransactWriteItems", len(checks) + len(puts), 1)
        try:
            response = send_transaction(connection, {"check": checks, "put": puts}, chunk.token, attempts=attempts)
        except WriteFailed as cancelled:
            # Its records are settled after the span ends: the span names what they violated now.
            found = _findings(chunk, cancelled)
            taken = [f.action for fs in found.values() for f in fs if f.kind == "taken"]
            watched.violated = [a.constraint.name for a in taken if isinstance(a, LockPut)]
            raise
        watched.consumed(response)


def _findings(chunk: _Chunk, cancelled: WriteFailed) -> dict[int, list[Finding]]:
    """A cancelled chunk's findings, by the ``id`` of the record each belongs to."""
    checks, puts = chunk.sent()
    sent = checks + puts
    ours = {id(r): frozenset({r.owner}) for r in chunk.records}
    findings = interpret([(action, ours[id(r)]) for r, action, _ in sent], cancelled.reasons)
    owners = {id(action): r for r, action, _ in sent}
    found: dict[int, list[Finding]] = {}
    for finding in findings:
        found.setdefault(id(owners[id(finding.action)]), []).append(finding)
    return found


@dataclass
class _Outcomes:
    """Where each settled instance went, by input index."""

    saved: dict[int, _Record] = field(default_factory=dict)
    violations: dict[int, list[Violation]] = field(default_factory=dict)
    existing: dict[int, Model] = field(default_factory=dict)
    lost: dict[int, Model] = field(default_factory=dict)

    def finish(self, chunk: _Chunk, sent: Future[None]) -> list[_Record]:
        """Read a chunk's send: its records are saved, or settled by its cancellation; return those to resend.

        Raises:
            Exception: the send's error, other than a failed condition of the chunk's own records.
        """
        try:
            sent.result()
        except WriteFailed as cancelled:
            return self.settle(chunk, cancelled)
        self.saved.update((r.index, r) for r in chunk.records)
        return []

    def settle(self, chunk: _Chunk, cancelled: WriteFailed) -> list[_Record]:
        """Read a cancelled chunk: settle the records it refused; return those to send again.

        Raises:
            TransactWriteError: the chunk failed, and no record of it is why.
        """
        found = _findings(chunk, cancelled)
        if isinstance(decide([f for fs in found.values() for f in fs], frozenset(), create_only=True), Unexplained):
            raise cancelled.cause
        again = []
        for record in chunk.records:
            outcome = decide(found.get(id(record), []), frozenset(), create_only=True)
            if isinstance(outcome, ClaimLost):
                self.lost[record.index] = record.instance  # Its reservation no longer holds the value.
            elif isinstance(outcome, RecordFailed):
                stored_as_sent = _canonical(outcome.item) == record.items[0].get("Item")
                if record.check is not None or outcome.locks or not stored_as_sent:
                    self.existing[record.index] = record.instance
                elif record.size == 1:
                    self.saved[record.index] = record  # Stored exactly so, and it takes no lock.
                else:
                    record.check = _check(record)
                    record.refresh()
                    again.append(record)
            elif isinstance(outcome, Violated):
                assert record.context is not None  # noqa: S101 - only lock puts are taken.
                self.violations[record.index] = [record.context.violation(f, record.instance) for f in outcome.taken]
                _telemetry.violated(self.violations[record.index])
            else:
                again.append(record)
        return again


def _done(outcomes: _Outcomes) -> None:
    """Leave each saved instance as ``save()`` does: its version set, what is stored remembered."""
    for record in outcomes.saved.values():
        if record.context is None or record.plan is None:
            record.instance.update_local_version_attribute()  # type: ignore[no-untyped-call] # unannotated in PynamoDB.
            continue
        intent = Intent("put", None, None, add_version_condition=True, token=None)
        after_success(record.context, record.instance, intent, record.plan, record.desired, {}, load=False)


def bulk_save(
    instances: Iterable[_M],
    *,
    max_workers: int = 4,
    progress: Callable[[int], object] | None = None,
    run_id: str | None = None,
    reservations: Iterable[Reservation] = (),
) -> BulkResult[_M]:
    """Create many new records with their locks, in concurrent TransactWriteItems.

    Values repeated inside the input are found before any request: the first instance to claim one
    is sent, later ones wait for it; once it is saved they become violations naming it as the
    owner (never sent), and if it is refused the value is still free for the next. Each record travels with its
    locks in one transaction of at most 100 actions (and under 4 MB); chunks are sent by up to
    ``max_workers`` threads, each with a ClientRequestToken derived from its content, so running
    the same import again within DynamoDB's 10-minute window replays committed chunks instead of
    writing them twice (and a record found stored exactly as given counts as saved after a check
    that it still holds its values, its locks put if missing). A chunk cancelled by a taken value
    or an existing record is sent again without them. Records may be of several models (one
    region and host); models without constraints are written with ``attribute_not_exists`` too.

    Args:
        instances: new records, of one or several models.
        max_workers: threads sending chunks at once (at least 1).
        progress: called with the number of records each finished chunk settled (records refused
            as repeating a value an instance saved before them count once it is); the calls add
            up to the number of instances.
        run_id: folded into every chunk's token. The same records always give the same tokens,
            so importing records again within 10 minutes after deleting them would replay the
            first import (DynamoDB answers success and writes nothing): give each import of
            the same data its own ``run_id`` (and a rerun after a crash the same one).
        reservations: reservations (``Model.reserve()``) to claim: each by the instance holding
            all its values, in that record's transaction; one whose reservation no longer holds
            its values is not written (``lost``).

    Returns:
        Where each instance went: saved, a violation, or an existing record left untouched. Saved
        instances are in the state ``save()`` leaves them in (version set, stored values known).

    Raises:
        InvalidUniqueValue: bad input (a value that cannot be keyed, a reserved hash key, two
            instances with one key, an instance with a version set, models on different
            endpoints): nothing was sent. PynamoDB's own checks (``ValueError`` for a missing
            required value) and ``TypeError`` for what is not a model instance also come first.
        TransientError: conflicts or throttling outlasted the retries of a chunk. On this or any
            other error (``IdempotencyMismatch``, PynamoDB's ``TransactWriteError``), the chunks
            in flight finish, no further chunk is sent, committed chunks stay and no instance is
            changed: run the same import again.
    """
    if not isinstance(max_workers, int) or max_workers < 1:
        msg = f"max_workers must be a positive integer, got {max_workers!r}"
        raise ValueError(msg)
    given = list(instances)
    records = _prepare(given, tuple(reservations))
    outcomes = _Outcomes()
    # In waves: a record claiming a value an earlier record of the input claims waits for it.
    while records:
        claims: _Claims = {}
        now, waiting = _select(records, claims)
        _run(now, outcomes, max_workers, progress, run_id or "")
        records = _waited(waiting, claims, outcomes)
        if progress is not None and len(waiting) > len(records):
            progress(len(waiting) - len(records))
    _done(outcomes)
    return BulkResult(
        saved=tuple(given[i] for i in sorted(outcomes.saved)),
        violations=tuple(v for i in sorted(outcomes.violations) for v in outcomes.violations[i]),
        existing=tuple(given[i] for i in sorted(outcomes.existing)),
        lost=tuple(given[i] for i in sorted(outcomes.lost)),
    )


def _run(
    records: list[_Record],
    outcomes: _Outcomes,
    max_workers: int,
    progress: Callable[[int], object] | None,
    run_id: str,
) -> None:
    """Send every chunk, re-packing what a cancelled chunk did not settle, until all are settled.

    Raises:
        Exception: the first error a chunk met (after the chunks in flight finish), with a note.
    """
    first = records[0].instance
    connection = model_connection(type(first)).connection
    connection.client  # noqa: B018 - create the shared botocore client before threads race for it.
    contexts = [r.context for r in records if r.context is not None]
    attempts = max((c.read_retry_attempts() for c in contexts), default=RETRY_ATTEMPTS)
    for context in dict.fromkeys(contexts):
        context.write_locks()  # Raises before any chunk is sent: a table that takes no transactions.
    error: BaseException | None = None
    with ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="bulk_save") as pool:
        pending: dict[Future[None], _Chunk] = {}

        def submit(chunks: list[_Chunk]) -> None:
            for chunk in chunks:
                pending[pool.submit(_send_chunk, connection, chunk, attempts)] = chunk

        submit(_pack(records, run_id))
        while pending:
            finished, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in finished:
                chunk = pending.pop(future)
                if future.cancelled():
                    continue
                try:
                    again = outcomes.finish(chunk, future)
                    if progress is not None:
                        progress(len(chunk.records) - len(again))
                except Exception as exc:  # noqa: BLE001 - re-raised once the chunks in flight finish.
                    error = error or exc
                    for queued in pending:
                        queued.cancel()
                    continue
                if error is None:
                    submit(_pack(again, run_id))
    if error is not None:
        error.add_note(
            f"bulk_save: {len(outcomes.saved)} records were committed before this error; no instance was "
            "changed. Run the same bulk_save again: committed chunks are replayed, not written twice."
        )
        raise error
