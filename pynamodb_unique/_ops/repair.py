"""Repair: fix what an audit found, each fix one small conditional transaction.

Every fix is a TransactWriteItems of at most three items: a ConditionCheck that each record
involved is still as the audit read it, plus one lock write conditioned on the lock's owner
fields (or on its absence). A legitimate change made after the audit fails a condition, so the
fix is skipped instead of undoing it.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final, Literal

from pynamodb.constants import KEY
from pynamodb.expressions.condition import Condition
from pynamodb.expressions.operand import Path

from .._core.lockitem import owner_fields
from .._core.outcome import WriteFailed, interpret
from .._core.plan import SENT_ORDER, SentGroup, Stored
from .._model.context import context_of
from .._model.locks import ABSENT
from .._model.registry import family, planner_of
from .._model.seam import connection
from .._write.send import send_transaction
from .audit import audit
from .collect import (
    AuditReport,
    DuplicateValue,
    ForeignLock,
    MissingLock,
    OrphanedLock,
    Problem,
    RecordKey,
    RetiredLock,
    StaleLock,
    unique_planner,
)
from .reservations import remove_ended

if TYPE_CHECKING:
    from pynamodb.exceptions import CancellationReason

    from .._mixin import UniqueMixin

FixAction = Literal["delete", "create", "move", "renew", "none"]
Outcome = Literal["planned", "applied", "skipped", "left"]

#: Why a value several records hold gets no fix.
DUPLICATE: Final = "held by more than one record: a person decides"

_VERBS: dict[FixAction, tuple[str, str, str]] = {
    # The verb when the fix is planned, applied, skipped.
    "delete": ("would delete", "deleted", "not deleted"),
    "create": ("would create", "created", "not created"),
    "move": ("would move", "moved", "not moved"),
    "renew": ("would renew", "renewed", "not renewed"),
}


@dataclass(frozen=True)
class Fix:
    """What repair did, or would do, about one problem.

    Attributes:
        problem: the problem as the audit reported it.
        action: the lock write that fixes it (``none``: nothing safe to do).
        outcome: ``planned`` (dry run), ``applied``, ``skipped`` (a condition failed: the
            table changed since the audit) or ``left`` (for a person, or not this tool's job).
        reason: why a fix was skipped or left.
    """

    problem: Problem
    action: FixAction
    outcome: Outcome
    reason: str = ""

    def describe(self) -> str:
        """One line for a person."""
        if self.outcome == "left":
            return f"left: {self.problem.describe()} ({self.reason})"
        planned, applied, skipped = _VERBS[self.action]
        verb = {"planned": planned, "applied": applied, "skipped": skipped}[self.outcome]
        line = f"{verb}: {self.problem.describe()}"
        return f"{line} ({self.reason})" if self.reason else line


@dataclass(frozen=True)
class RepairReport:
    """What repair or backfill did.

    Attributes:
        audit: the audit the fixes were planned from.
        fixes: one per problem, in the audit's order.
        applied: whether writes were allowed (False: a dry run, nothing was written).
        reservations_removed: ended reservations deleted (``expired_reservations=True``), or
            that would be in a dry run.
    """

    audit: AuditReport
    fixes: tuple[Fix, ...]
    applied: bool
    reservations_removed: int = 0

    @property
    def remaining(self) -> tuple[Fix, ...]:
        """The problems still there: planned in a dry run, skipped, or left for a person."""
        return tuple(f for f in self.fixes if f.outcome != "applied")

    @property
    def clean(self) -> bool:
        """Whether nothing is left to fix."""
        return not self.remaining


@dataclass
class _Write:
    """One fix's TransactWriteItems, and what each item's failure means, in the order sent."""

    items: dict[SentGroup, list[dict[str, Any]]] = field(default_factory=lambda: {g: [] for g in SENT_ORDER})
    meanings: dict[SentGroup, list[str]] = field(default_factory=lambda: {g: [] for g in SENT_ORDER})

    def add(self, group: SentGroup, item: dict[str, Any] | None, meaning: str) -> None:
        if item is not None:
            self.items[group].append(item)
            self.meanings[group].append(meaning)

    def failed(self, reasons: Sequence[CancellationReason | None]) -> str:
        """What changed, from the cancellation reasons (in PynamoDB's send order)."""
        meanings = [meaning for group in SENT_ORDER for meaning in self.meanings[group]]
        findings = interpret([None] * len(meanings), reasons)
        changed = [meanings[f.position] for f in findings if f.position is not None]
        return "; ".join(changed) or "a condition failed"


class Fixer:
    """Builds and sends the fixes of one model's problems (records of every model in its namespaces)."""

    def __init__(self, model: type[UniqueMixin], *, read: bool = True) -> None:
        """``read``: whether the fixes may read records (their stored texts); a dry run reads nothing."""
        self.model = model
        self.read = read
        self._texts: dict[tuple[type[Any], RecordKey], dict[str, dict[str, Any]] | None] = {}
        self._texts_lock = threading.Lock()  # Fixes run on worker threads: each record is read once.
        context = context_of(model)
        if context is None:
            unique_planner(model)  # Raises: not a unique model.
        assert context is not None  # noqa: S101 - unique_planner raised otherwise.
        # A fix is a transaction: refused before anything is sent on a table that takes none.
        self.locks = context.write_locks() if read else context.locks()
        self.table = connection(model)

    @staticmethod
    def _key_types(model: type[Any]) -> tuple[str, ...]:
        meta = connection(model).get_meta_table()
        types = meta.get_attribute_type
        return tuple(types(name) for name in (meta.hash_keyname, meta.range_keyname) if name)

    def model_of(self, problem: Problem, key: RecordKey) -> type[Any]:
        """The model of an involved record: as audited, else the audited model."""
        model: type[Any] = problem.models.get(key, self.model)
        return model

    def record_check(self, problem: Problem, key: RecordKey) -> dict[str, Any] | None:
        """ConditionCheck: the record is as audited (None: a key no record of the model can have)."""
        model = self.model_of(problem, key)
        if len(key) != len(self._key_types(model)):
            return None
        audited = problem.audited.get(key)
        planner = planner_of(model)
        condition: Condition | None
        if audited is None or planner is None:
            condition = Path(connection(model).get_meta_table().hash_keyname).does_not_exist()
            # An expired record is gone, as the audit judged it, though TTL has not deleted it yet:
            # by the expiry of its own class, which may be any of a polymorphic family's.
            now = datetime.fromtimestamp(int(time.time()), tz=UTC)
            for member in family(model):
                member_planner = planner_of(member)
                if member_planner is not None and member_planner.ttl is not None:
                    expired = Path(member_planner.attributes[member_planner.ttl]) < now
                    kind = member_planner.class_check()
                    condition = condition | (expired if kind is None else kind & expired)
        else:
            # The record's unique values and, for a polymorphic model, its class; a text another
            # writer spelled its own way (a JSONAttribute) is checked as stored.
            condition = planner.cas(
                Stored(exists=True, values=audited, verbatim=self._stored_texts(model, key, audited), ranged=True)
            )
        range_key = key[1] if len(key) > 1 else None
        check: dict[str, Any] = connection(model).get_operation_kwargs(key[0], range_key, key=KEY, condition=condition)
        return check

    def _stored_texts(
        self, model: type[Any], key: RecordKey, audited: Mapping[str, Any]
    ) -> dict[str, dict[str, Any]] | None:
        """A record's stored texts (:meth:`ModelContext.stored_texts`), read once per record; none on a dry run."""
        context = context_of(model)
        if context is None or not self.read:
            return None
        with self._texts_lock:
            if (model, key) not in self._texts:
                self._texts[model, key] = context.stored_texts(key, audited)
            return self._texts[model, key]

    def owner_fields(self, problem: Problem, owner: RecordKey | None) -> dict[str, dict[str, Any]] | None:
        """A record key as a lock item's owner fields, typed as its model's key attributes (None: no owner)."""
        if owner is None:
            return None
        return owner_fields(owner, self._key_types(self.model_of(problem, owner)))

    def lock_put(self, problem: Problem, holder: RecordKey, expected: Any) -> dict[str, Any]:
        """Give the lock to ``holder`` when it is absent (``ABSENT``) or names exactly ``expected``."""
        fields = self.owner_fields(problem, holder)
        assert fields is not None  # noqa: S101 - a holder is a record key.
        model = self.model_of(problem, holder)
        context = context_of(model)
        # The lock carries its record's expiry, as the library's own writes give it.
        expires = context.planner.expires(problem.audited.get(holder) or {}) if context is not None else None
        return self.locks.codec.put_if(problem.lock_key, fields, problem.constraint, model.__name__, expected, expires)

    def plan(self, problem: Problem) -> tuple[FixAction, _Write | None]:
        """The fix of one problem, or ``none``."""
        write = _Write()
        owner = problem.owner
        if isinstance(problem, RetiredLock):
            # The namespace is no longer declared: whatever its owner holds, the lock protects nothing.
            delete = self.locks.codec.delete_if(problem.lock_key, self.owner_fields(problem, owner))
            write.add("delete", delete, "the lock changed")
            return "delete", write
        if isinstance(problem, OrphanedLock):
            if owner is not None:
                write.add("check", self.record_check(problem, owner), "the owner record changed")
            delete = self.locks.codec.delete_if(problem.lock_key, self.owner_fields(problem, owner))
            write.add("delete", delete, "the lock changed")
            return "delete", write
        if isinstance(problem, MissingLock):
            (holder,) = problem.holders
            write.add("check", self.record_check(problem, holder), "the record changed")
            put = self.lock_put(problem, holder, ABSENT)
            write.add("put", put, "a lock was created meanwhile")
            return "create", write
        if isinstance(problem, StaleLock):
            # The record's own lock, put again as its record says: no hold, the record's expiry.
            (holder,) = problem.holders
            write.add("check", self.record_check(problem, holder), "the record changed")
            write.add("put", self.lock_put(problem, holder, self.owner_fields(problem, owner)), "the lock changed")
            return "renew", write
        if isinstance(problem, ForeignLock):
            (holder,) = problem.holders
            if owner is not None:
                write.add("check", self.record_check(problem, owner), "the owner record changed")
            write.add("check", self.record_check(problem, holder), "the holder changed")
            write.add("put", self.lock_put(problem, holder, self.owner_fields(problem, owner)), "the lock changed")
            return "move", write
        return "none", None

    def send(self, write: _Write) -> tuple[Outcome, str]:
        """Send one fix; retry conflicts and throttling (as the core does), report a failed condition."""
        try:
            send_transaction(self.table.connection, write.items, None)
        except WriteFailed as failed:
            return "skipped", write.failed(failed.reasons)
        return "applied", ""


def check_run(model: type[UniqueMixin], report: AuditReport, workers: int = 1) -> None:
    """Refuse to act on a report of another model or table, or with fewer than one worker.

    Raises:
        ValueError: ``report`` audits another model or table, or ``workers`` is below 1.
    """
    table = connection(model).table_name
    if (report.model, report.table) != (model.__name__, table):
        msg = f"the report audits {report.model} in table {report.table!r}, not {model.__name__} in {table!r}"
        raise ValueError(msg)
    if workers < 1:
        msg = f"workers must be at least 1, got {workers!r}"
        raise ValueError(msg)


def left(problem: Problem, reason: str = "") -> Fix:
    """A problem no fix is sent for: a value several records hold is a person's to decide, else ``reason``."""
    return Fix(problem, "none", "left", DUPLICATE if isinstance(problem, DuplicateValue) else reason)


def _fix(
    model: type[UniqueMixin], report: AuditReport, *, apply: bool, progress: Callable[[int], None] | None
) -> RepairReport:
    check_run(model, report)
    fixer = Fixer(model, read=apply)

    def fix(problem: Problem) -> Fix:
        action, write = fixer.plan(problem)
        if write is None:
            return left(problem)
        if not apply:
            return Fix(problem, action, "planned")
        outcome, reason = fixer.send(write)
        if progress is not None:
            progress(1)
        return Fix(problem, action, outcome, reason)

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="uniq-fix") as pool:
        fixes = tuple(pool.map(fix, report.problems))
    return RepairReport(report, fixes, applied=apply)


def repair(
    model: type[UniqueMixin],
    report: AuditReport | None = None,
    *,
    apply: bool = False,
    progress: Callable[[int], None] | None = None,
    expired_reservations: bool = False,
) -> RepairReport:
    """Fix what is safely fixable in an audit's findings; a dry run unless ``apply=True``.

    - an orphaned lock is deleted, on condition that its owner fields are unchanged and its
      owner record is still as audited;
    - a missing lock is created with ``attribute_not_exists``, on condition that the record
      still holds the value;
    - a foreign lock moves to the record holding the value, on condition that the lock's owner
      fields are unchanged and both records are still as audited;
    - a value held by more than one record is left for a person: no holder gets it;
    - a retired lock (of a constraint name the model no longer declares, after a rename) is
      deleted, on condition that its owner fields are unchanged;
    - a stale lock (the record's own release hold, or a lock not carrying its record's expiry)
      is put again as the record's plain lock with its expiry, on condition that its owner
      fields are unchanged and the record is still as audited.

    Args:
        model: the audited ``UniqueMixin`` model.
        report: an audit of ``model``; audited now (one segment) when omitted.
        apply: write the fixes; otherwise nothing at all is written.
        progress: called with 1 after each fix sent.
        expired_reservations: also delete the reservations the audit found ended (each on
            condition that it is still that reservation; TTL would delete them later anyway).

    Returns:
        One :class:`Fix` per problem; ``clean`` when nothing is left to fix.

    Raises:
        ValueError: ``report`` audits another model or table.
        TransientError: conflicts or throttling outlasted the retries of one fix.
        pynamodb.exceptions.TransactWriteError: DynamoDB refused a fix for another reason
            than a failed condition.
    """
    report = report if report is not None else audit(model)
    repaired = _fix(model, report, apply=apply, progress=progress)
    if not expired_reservations:
        return repaired
    return dataclasses.replace(repaired, reservations_removed=remove_ended(model, report, apply=apply))
