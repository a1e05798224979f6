"""Migrate: give every record the current-form locks of its constraints after a constraint changed.

The middle step of an expand/contract migration (re-normalize, rename, secret rotation, a
constraint added to a table that holds records). Once every writer runs the model with
``former=``, writes keep the locks of both forms; :func:`migrate` then reads the table once (the
audit's scan) and creates the current-form locks that records written before are missing. Each
lock is put on condition that it is free or already the record's own, beside a ConditionCheck
that the record still holds the values scanned: a writer that took the value first wins and the
pair is reported as a conflict; a record changed since the scan is left for the next run. Running
it again creates only what is still missing.

Records whose values collide under the current form are never given the lock: a person decides,
as with the audit's duplicates.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from .._core.lockitem import lock_owner
from .._core.outcome import WriteFailed, interpret
from .._core.plan import MAX_TRANSACTION_ACTIONS, Guard, Stored
from .._model.context import context_of
from .._model.records import read_item
from .._model.registry import stored_class
from .._model.seam import connection
from .._write.requests import guard_condition
from .._write.send import send_transaction
from .audit import audit
from .collect import (
    AuditReport,
    DuplicateValue,
    ForeignLock,
    MissingLock,
    Problem,
    RecordKey,
    jsonable,
    record_expired,
    show_key,
)
from .repair import Fix, Fixer, check_run

if TYPE_CHECKING:
    from pynamodb.exceptions import CancellationReason

    from .._mixin import UniqueMixin

#: Why a lock was not created because its record changed after the scan.
CHANGED: Final = "the record changed since the scan: run the tool again"


@dataclass(frozen=True)
class Conflict:
    """Records holding one value under a constraint's current form: none of them is given its lock.

    Attributes:
        constraint: the constraint's name.
        lock_key: the current-form lock key the records share.
        records: the keys of the records holding the value, as ``Violation.owner`` gives them.
        owner: the record the lock names, when there is a lock (a record written since the expand
            deploy took the value), else None.
    """

    constraint: str
    lock_key: str
    records: tuple[tuple[Any, ...], ...]
    owner: tuple[Any, ...] | None = None

    def describe(self) -> str:
        """One line for a person."""
        held = ", ".join(show_key(r) for r in self.records)
        lock = "no lock" if self.owner is None else f"lock owned by {show_key(self.owner)}"
        return f"conflict {self.lock_key}: held by {held}; {lock} (a person decides)"

    def to_json(self) -> dict[str, Any]:
        """The conflict as plain JSON types."""
        return {
            "constraint": self.constraint,
            "lock_key": self.lock_key,
            "records": [[jsonable(p) for p in r] for r in self.records],
            "owner": None if self.owner is None else [jsonable(p) for p in self.owner],
        }


@dataclass(frozen=True)
class MigrationReport:
    """What one run of :func:`migrate` found and did.

    Attributes:
        model: the model's class name.
        table: the model's table.
        lock_table: the table holding its locks.
        scanned: items read, in both tables.
        records: records read.
        applied: whether writes were allowed (False: a dry run, nothing was written).
        fixes: one per current-form lock the scan found missing: ``planned`` (a dry run),
            ``applied`` (created), or ``skipped`` with its reason (the record changed since the
            scan, or another record took the value: then a conflict too).
        conflicts: records whose values collide under the current form, by constraint and key.
        left: current-form locks naming another record than the one holding the value, a
            record that does not hold it (``ForeignLock``): ``repair`` moves them.
    """

    model: str
    table: str
    lock_table: str
    scanned: int
    records: int
    applied: bool
    fixes: tuple[Fix, ...]
    conflicts: list[Conflict] = field(default_factory=list)
    left: tuple[Problem, ...] = ()

    @property
    def created(self) -> int:
        """The number of locks this run created."""
        return sum(1 for f in self.fixes if f.outcome == "applied")

    @property
    def missing(self) -> int:
        """The number of current-form locks the scan found missing."""
        return len(self.fixes)

    @property
    def done(self) -> bool:
        """Whether every record holds its current-form locks and no conflict is left."""
        return not self.conflicts and not self.left and all(f.outcome == "applied" for f in self.fixes)

    def to_json(self) -> dict[str, Any]:
        """The report as plain JSON types: counts, conflicts, and the locks not created."""
        outcomes = [f.outcome for f in self.fixes]
        return {
            "model": self.model,
            "table": self.table,
            "lock_table": self.lock_table,
            "scanned": self.scanned,
            "records": self.records,
            "applied": self.applied,
            "counts": {
                "missing": self.missing,
                "created": self.created,
                "planned": outcomes.count("planned"),
                "skipped": outcomes.count("skipped"),
                "conflicts": len(self.conflicts),
                "left": len(self.left),
            },
            "done": self.done,
            "conflicts": [c.to_json() for c in self.conflicts],
            "skipped": [
                {"problem": f.problem.to_json(), "reason": f.reason} for f in self.fixes if f.outcome == "skipped"
            ],
            "left": [p.to_json() for p in self.left],
        }


@dataclass
class _Record:
    """One record's missing locks: a ConditionCheck that it is as scanned, and a Put per lock."""

    holder: RecordKey
    check: dict[str, Any]
    puts: list[tuple[MissingLock, dict[str, Any]]]

    @property
    def size(self) -> int:
        return 1 + len(self.puts)


class _Migrator:
    """Creates the missing locks of one audit, in transactions of whole records (migrate's and backfill's)."""

    def __init__(self, model: type[UniqueMixin]) -> None:
        self.model = model
        self.fixer = Fixer(model)
        self.connection = connection(model).connection

    def decode(self, problem: Problem, key: RecordKey) -> tuple[Any, ...]:
        """A record key as ``Violation.owner`` gives it (typed as its model's key attributes)."""
        context = context_of(problem.models.get(key, self.model))
        decoded = context.decode_owner(key) if context is not None else None
        return decoded if decoded is not None else key

    def conflict(self, problem: Problem, holders: Sequence[RecordKey], owner: RecordKey | None) -> Conflict:
        records = tuple(self.decode(problem, key) for key in holders)
        return Conflict(
            problem.constraint, problem.lock_key, records, None if owner is None else self.decode(problem, owner)
        )

    def owner_holds(self, problem: ForeignLock) -> bool:
        """Whether a foreign lock's owner holds the value now: a record the scan passed before it was written.

        A scan is not a snapshot: a record written during it may be missed while its lock is seen.
        One strongly consistent GetItem of the owner tells such a record (a conflict) from a lock
        whose owner is gone, expired (as the audit judges it) or holds another value (left for
        repair).
        """
        owner = problem.owner
        model = self.fixer.model_of(problem, owner) if owner is not None else self.model
        context = context_of(model)
        if owner is None or context is None or len(owner) != (2 if context.range_name else 1):
            return False
        item = read_item(context, owner)
        if item is None:
            return False
        try:
            owner_class = stored_class(model, item)
        except ValueError:  # Of a class no registered model is, as the audit found it: not held.
            return False
        if record_expired(owner_class, item, time.time()):
            return False
        stored = context.stored_from_item(item)
        planner = stored.source or context.planner
        return stored.exists and problem.lock_key in planner.locks(stored.values)

    def records(self, missing: Sequence[MissingLock]) -> list[_Record]:
        """The missing locks grouped by their record: one ConditionCheck per record in a transaction.

        The check is the record's compare-and-swap on the values scanned (its expression text
        compiled once per shape, as the writes' guards are); each Put accepts a lock that is free
        or already the record's: a resend after a lost response, or a write that gave the record
        its lock meanwhile, is no conflict.
        """
        by_holder: dict[RecordKey, _Record] = {}
        codec = self.fixer.locks.codec
        for problem in missing:
            (holder,) = problem.holders
            model = self.fixer.model_of(problem, holder)
            context = context_of(model)
            assert context is not None  # noqa: S101 - audited records are of unique models.
            record = by_holder.get(holder)
            if record is None:
                values = problem.audited.get(holder) or {}
                # A text another writer spelled its own way (a JSONAttribute) is checked as stored.
                texts = context.stored_texts(holder, values)
                scanned = Stored(exists=True, values=values, verbatim=texts, ranged=True)
                condition = guard_condition(Guard(context.planner, scanned))
                check = {"TableName": context.table_name, "Key": context.key_of(holder), **condition}
                record = by_holder[holder] = _Record(holder, check, [])
            expires = context.planner.expires(problem.audited.get(holder) or {})
            fields = context.fields_of(holder)
            put = codec.put(problem.lock_key, fields, problem.constraint, model.__name__, expires=expires)
            record.puts.append((problem, put))
        return list(by_holder.values())

    @staticmethod
    def chunks(records: Sequence[_Record]) -> Iterator[list[_Record]]:
        """Whole records, in order, in transactions of at most 100 actions (DynamoDB's limit)."""
        chunk: list[_Record] = []
        size = 0
        for record in records:
            if chunk and size + record.size > MAX_TRANSACTION_ACTIONS:
                yield chunk
                chunk, size = [], 0
            chunk.append(record)
            size += record.size
        if chunk:
            yield chunk

    def send(self, chunk: list[_Record], progress: Callable[[int], None] | None) -> tuple[list[Fix], list[Conflict]]:
        """Send one chunk until every lock in it is created or settled otherwise.

        A cancelled transaction's reasons say which record changed (its ConditionCheck) and which
        lock another record holds (its Put, with the lock's ALL_OLD item); those leave, the rest is
        sent again.
        """
        fixes: list[Fix] = []
        conflicts: list[Conflict] = []
        pending = chunk
        while pending:
            try:
                self._transact(pending)
            except WriteFailed as failed:
                pending = self._settle(pending, failed.reasons, fixes, conflicts, progress)
                continue
            created = [Fix(problem, "create", "applied") for r in pending for problem, _ in r.puts]
            fixes.extend(created)
            if progress is not None:
                progress(len(created))
            pending = []
        return fixes, conflicts

    def _transact(self, records: list[_Record]) -> None:
        """One TransactWriteItems of the records' checks and puts, conflicts and throttling retried.

        No ClientRequestToken is needed: a resend finds its puts' locks already the records' own,
        which their conditions accept.
        """
        checks = [r.check for r in records]
        puts = [put for r in records for _, put in r.puts]
        send_transaction(self.connection, {"check": checks, "put": puts}, None)

    def _settle(
        self,
        pending: list[_Record],
        reasons: Sequence[CancellationReason | None],
        fixes: list[Fix],
        conflicts: list[Conflict],
        progress: Callable[[int], None] | None,
    ) -> list[_Record]:
        """Settle what a cancellation says failed; return the records to send again."""
        sent = len(pending) + sum(len(record.puts) for record in pending)
        # Each failed position's stored item (ALL_OLD): a lock's names its owner.
        failed = {f.position: f.item for f in interpret([None] * sent, reasons)}
        again: list[_Record] = []
        settled = 0
        # PynamoDB sends the ConditionChecks first, then the Puts: reasons follow that order.
        position = len(pending)
        for index, record in enumerate(pending):
            first = position
            position += len(record.puts)
            if index in failed:
                fixes.extend(Fix(problem, "create", "skipped", CHANGED) for problem, _ in record.puts)
                settled += len(record.puts)
                continue
            kept = []
            for offset, (problem, put) in enumerate(record.puts):
                if first + offset not in failed:
                    kept.append((problem, put))
                    continue
                owner = lock_owner(failed[first + offset])
                taken = self.conflict(problem, [record.holder, *([owner] if owner else [])], owner)
                conflicts.append(taken)
                who = "another record" if taken.owner is None else show_key(taken.owner)
                fixes.append(Fix(problem, "create", "skipped", f"{who} took the value since the scan: a conflict"))
                settled += 1
            if kept:
                again.append(_Record(record.holder, record.check, kept))
        if progress is not None and settled:
            progress(settled)
        return again


def create_locks(
    model: type[UniqueMixin],
    missing: Sequence[MissingLock],
    *,
    workers: int = 1,
    progress: Callable[[int], None] | None = None,
) -> tuple[list[Fix], list[Conflict]]:
    """Create an audit's missing locks: whole records in transactions of up to 100 actions, on ``workers`` threads.

    Each record's ConditionCheck (it still holds the values scanned) travels with the Puts of its
    missing locks, each on condition that the lock is free or already the record's own.

    Args:
        model: the audited model.
        missing: missing locks of an audit of ``model``.
        workers: threads sending transactions.
        progress: called with the number of locks each transaction settled.

    Returns:
        A :class:`Fix` per lock (``applied``, or ``skipped`` with why), and the values another
        record took since the scan.

    Raises:
        TransientError: conflicts or throttling outlasted the retries of one transaction.
    """
    migrator = _Migrator(model)
    fixes: list[Fix] = []
    conflicts: list[Conflict] = []
    chunks = list(migrator.chunks(migrator.records(missing)))
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="uniq-create") as pool:
        for sent, taken in pool.map(lambda chunk: migrator.send(chunk, progress), chunks):
            fixes.extend(sent)
            conflicts.extend(taken)
    return fixes, conflicts


def complete(
    model: type[UniqueMixin],
    report: AuditReport,
    *,
    apply: bool,
    workers: int = 1,
    progress: Callable[[int], None] | None = None,
) -> MigrationReport:
    """Migrate from an audit of ``model``: create its missing current-form locks, report conflicts.

    Args:
        model: the audited model.
        report: an audit of ``model`` (its scan is the migration's).
        apply: write; otherwise a dry run.
        workers: threads sending transactions.
        progress: called with the number of locks each transaction settled.

    Raises:
        ValueError: ``report`` audits another model or table, or ``workers`` is below 1.
    """
    check_run(model, report, workers)
    migrator = _Migrator(model)
    # Problems of a former form (a migration in progress) are not the migration's: audit shows them.
    current = [p for p in report.problems if not p.former]
    missing = [p for p in current if isinstance(p, MissingLock)]
    conflicts = [migrator.conflict(p, p.holders, p.owner) for p in current if isinstance(p, DuplicateValue)]
    left: list[Problem] = []
    for problem in current:
        if isinstance(problem, ForeignLock):
            if problem.owner is not None and migrator.owner_holds(problem):
                conflicts.append(migrator.conflict(problem, [*problem.holders, problem.owner], problem.owner))
            else:
                left.append(problem)
    fixes: list[Fix] = []
    if not apply:
        fixes = [Fix(p, "create", "planned") for p in missing]
    else:
        fixes, taken = create_locks(model, missing, workers=workers, progress=progress)
        conflicts.extend(taken)
    order = {name: i for i, name in enumerate(report.constraints)}
    conflicts.sort(key=lambda c: (order.get(c.constraint, len(order)), c.lock_key))
    return MigrationReport(
        model=report.model,
        table=report.table,
        lock_table=report.lock_table,
        scanned=report.scanned,
        records=report.records,
        applied=apply,
        fixes=tuple(fixes),
        conflicts=conflicts,
        left=tuple(left),
    )


def migrate(
    model: type[UniqueMixin],
    *,
    apply: bool = False,
    segments: int = 1,
    max_rate: float | None = None,
    progress: Callable[[int], None] | None = None,
) -> MigrationReport:
    """Create the current-form locks records are missing after a constraint changed or was added.

    Run it once every writer runs the model with ``former=`` (or, for a constraint added to a
    table that holds records, the model declaring it). One scan of the model's table (and its lock
    table), as :func:`audit` reads it; then, with ``apply``, one TransactWriteItems per up to 100
    actions: for each record a ConditionCheck that it still holds the values scanned, and for each
    lock it misses a Put on condition that the lock is free or already the record's. A writer that
    took the value first wins, and the pair is reported in ``conflicts``; a record changed since
    the scan is left for the next run. Safe to interrupt and run again: it creates only what is
    still missing.

    Records whose values collide under the current form are listed in ``conflicts`` and none of
    them is given the lock: a person decides (change the others' values through the model), then
    runs ``migrate`` again. ``done`` is true once every record holds its current-form locks and no
    conflict is left; from then on no duplicate can be written under either form.

    Args:
        model: a ``UniqueMixin`` model; its Meta gives table, region and host.
        apply: write the locks; otherwise a dry run that writes nothing.
        segments: parallel scan segments, and threads writing the locks.
        max_rate: a cap on read capacity units consumed per second by the scan.
        progress: called with the number of items of each page scanned, then (with ``apply``)
            with the number of locks each transaction settled.

    Raises:
        UniqueConfigError: ``model`` has no unique constraints.
        UniqueError: an item of the table cannot be read as a record of ``model``.
        ValueError: bad ``segments`` or ``max_rate``.
        TransientError: conflicts or throttling outlasted the retries of one transaction.
    """
    report = audit(model, segments=segments, max_rate=max_rate, progress=progress)
    return complete(model, report, apply=apply, workers=segments, progress=progress)
