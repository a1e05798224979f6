"""Backfill: create every missing lock an audit found, as migrate does, and report it as repair does.

The locks are sent by migrate's sender (:func:`create_locks`): whole records in transactions of up
to 100 actions, each record's ConditionCheck beside the Puts of its missing locks. The result is a
:class:`RepairReport`, one :class:`Fix` per problem in the audit's order.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from .audit import audit
from .collect import AuditReport, MissingLock, Problem
from .migrate import create_locks
from .repair import Fix, RepairReport, check_run, left

if TYPE_CHECKING:
    from .._mixin import UniqueMixin


def backfill(
    model: type[UniqueMixin],
    report: AuditReport | None = None,
    *,
    apply: bool = True,
    segments: int = 1,
    max_rate: float | None = None,
    progress: Callable[[int], None] | None = None,
) -> RepairReport:
    """Create every missing lock, as after adding a constraint to a table that holds records.

    Each lock is a conditional put (the lock is free, or already its record's own) beside a
    ConditionCheck that its record still holds the values scanned, so backfill is safe to
    interrupt, re-run, and run while the application writes. The locks go out as migrate sends
    them: a record's check and its puts in one TransactWriteItems, whole records filling up to 100
    actions (DynamoDB's limit). A value held by more than one record gets no lock and is
    reported; other problems are left for :func:`repair`.

    Unlike :func:`repair` and :func:`migrate`, ``backfill()`` writes unless ``apply=False`` (a
    dry run): it always has, and existing calls keep doing what they did. The command line's
    ``backfill`` is a dry run unless ``--apply``, as every command.

    Args:
        model: a ``UniqueMixin`` model.
        report: an audit of ``model``; audited now when omitted.
        apply: write the locks (the default); False: a dry run that writes nothing.
        segments: parallel scan segments, and threads writing the locks.
        max_rate: a cap on read capacity units per second for the audit's scan.
        progress: called with the number of locks each transaction settled.

    Returns:
        One :class:`Fix` per problem, in the audit's order: a missing lock ``applied``, ``planned``
        (a dry run) or ``skipped`` (its record changed, or another record took the value, since
        the scan); every other problem ``left``.

    Raises:
        ValueError: ``report`` audits another model or table, or bad ``segments``.
        TransientError: conflicts or throttling outlasted the retries of one transaction.
    """
    report = report if report is not None else audit(model, segments=segments, max_rate=max_rate)
    check_run(model, report, segments)
    missing = [p for p in report.problems if isinstance(p, MissingLock)]
    sent: dict[int, Fix] = {}
    if apply:
        created, _ = create_locks(model, missing, workers=segments, progress=progress)
        # A conflict is reported on its lock's fix (skipped, naming the record that took the value).
        sent = {id(fix.problem): fix for fix in created}

    def fix(problem: Problem) -> Fix:
        if not isinstance(problem, MissingLock):
            return left(problem, "not a missing lock: run repair")
        return sent[id(problem)] if apply else Fix(problem, "create", "planned")

    return RepairReport(report, tuple(fix(p) for p in report.problems), applied=apply)
