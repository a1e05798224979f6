"""What the commands print: text (a summary past a screen), one final line (--quiet) or one JSON document (--json)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

import click

from .._ops.collect import PROBLEM_TYPES, AuditReport, RetiredLock, StaleLock
from .._ops.migrate import MigrationReport
from .._ops.repair import Fix, RepairReport
from ._common import fail

#: Problem kinds whose column the audit's table shows only when one was found.
OCCASIONAL: Final = (RetiredLock, StaleLock)

#: Problem or fix lines printed before a summary line takes over (about a screen).
DEFAULT_LIMIT: Final = 20


@dataclass(frozen=True)
class Output:
    """How a command prints its findings.

    Attributes:
        json: one JSON document on stdout.
        quiet: only the final line.
        limit: problem or fix lines printed before a summary line; None prints every one.
    """

    json: bool = False
    quiet: bool = False
    limit: int | None = DEFAULT_LIMIT

    @property
    def progress(self) -> bool:
        """Whether to draw a progress bar (on a terminal, and not when asked for quiet)."""
        return not self.quiet and sys.stderr.isatty()


def output_of(as_json: bool, quiet: bool, limit: int | None, show_all: bool) -> Output:
    """The options --json, --quiet, --limit and --all as an :class:`Output`.

    Raises:
        click.ClickException: two options that cannot be combined (exit status 2).
    """
    if as_json and quiet:
        fail("--json and --quiet cannot be combined: --json prints one document, --quiet one line")
    if show_all and limit is not None:
        fail("--all and --limit cannot be combined")
    return Output(json=as_json, quiet=quiet, limit=None if show_all else DEFAULT_LIMIT if limit is None else limit)


def _echo_limited(lines: Sequence[str], limit: int | None, what: tuple[str, str]) -> None:
    """Print ``lines``, or the first ``limit`` of them and how many more there are (``what``: singular, plural)."""
    shown = lines if limit is None else lines[:limit]
    for line in shown:
        click.echo(f"  {line}")
    hidden = len(lines) - len(shown)
    if hidden:
        click.echo(
            f"  ... and {hidden} more {what[hidden != 1]} (--limit N shows N, --all every one, --json all as JSON)"
        )


def _show(
    output: Output,
    document: Callable[[], dict[str, Any]],
    head: Callable[[], None],
    lines: Callable[[], Sequence[str]],
    what: tuple[str, str],
    last_line: str,
) -> None:
    """Print a report as ``output`` asks: its ``document`` as JSON, or ``head``, ``lines`` and ``last_line``.

    Past ``output.limit`` lines one line says how many more there are (``what``: singular, plural).
    """
    if output.json:
        click.echo(json.dumps(document(), indent=2))
        return
    if not output.quiet:
        head()
        _echo_limited(lines(), output.limit, what)
    click.echo(last_line)


# An audit: counts per constraint and kind, then the problems.


def audit_counts(report: AuditReport) -> dict[str, dict[str, int]]:
    """Problems per constraint and kind, every constraint and kind present (zeros included)."""
    return {name: {kind.kind: report.count(name, kind) for kind in PROBLEM_TYPES} for name in report.constraints}


def audit_document(report: AuditReport) -> dict[str, Any]:
    """``audit --json``: the report's numbers, the counts per constraint and kind, then every problem."""
    document = report.to_json()
    problems = document.pop("problems")
    return {
        **document,
        "constraints": list(report.constraints),
        "counts": audit_counts(report),
        "clean": report.clean,
        "problems": problems,
    }


def _audit_last_line(report: AuditReport) -> str:
    count = len(report.problems)
    return "clean: every lock matches a live value" if report.clean else f"{count} problem{'s' * (count != 1)}"


def _print_counts(report: AuditReport) -> None:
    """The audit's first line and its table of problems per constraint and kind."""
    where = report.table if report.lock_table == report.table else f"{report.table} (locks in {report.lock_table})"
    click.echo(
        f"{report.model} in {where}: {report.records} records, {report.locks} locks, {report.scanned} items scanned"
    )
    if report.held or report.expired:
        # Neither is a problem: holds are valid, expired locks are free and TTL deletes them.
        click.echo(f"{report.held} release holds, {report.expired} expired locks awaiting TTL deletion")
    if report.reserved:
        click.echo(f"{report.reserved} live reservations (values held for records not yet written)")
    counts = audit_counts(report)
    rows = dict(counts)
    if len(counts) > 1:
        rows["total"] = {kind.kind: sum(c[kind.kind] for c in counts.values()) for kind in PROBLEM_TYPES}
    # Retired locks exist only after a constraint was renamed or dropped, stale ones only with
    # expiring locks: their columns only then.
    kinds = [k for k in PROBLEM_TYPES if k not in OCCASIONAL or any(isinstance(p, k) for p in report.problems)]
    width = max(len("constraint"), *(len(name) for name in rows))
    click.echo(f"{'constraint':<{width}}  " + "  ".join(f"{kind.kind:>9}" for kind in kinds))
    for name, row in rows.items():
        click.echo(f"{name:<{width}}  " + "  ".join(f"{row[kind.kind]:>9}" for kind in kinds))


def print_audit(report: AuditReport, output: Output) -> None:
    """``audit``: the counts and the problems, then whether the locks are clean."""
    _show(
        output,
        lambda: audit_document(report),
        lambda: _print_counts(report),
        lambda: [p.describe() for p in report.problems],
        ("problem", "problems"),
        _audit_last_line(report),
    )


# A repair or backfill: the audit's counts, then each fix and its outcome.

OUTCOMES: Final = ("applied", "planned", "skipped", "left")
#: Fix lines needing a person come first, so a summary shows them.
_ATTENTION: Final = {"left": 0, "skipped": 1}


def fix_document(result: RepairReport) -> dict[str, Any]:
    """``repair --json`` and ``backfill --json``: the audit, then each fix and the counts of outcomes."""
    outcomes = [fix.outcome for fix in result.fixes]
    return {
        "audit": audit_document(result.audit),
        "applied": result.applied,
        "counts": {outcome: outcomes.count(outcome) for outcome in OUTCOMES},
        "clean": result.clean,
        "fixes": [_fix_json(fix) for fix in result.fixes],
        "reservations_removed": result.reservations_removed,
    }


def _fix_json(fix: Fix) -> dict[str, Any]:
    return {"problem": fix.problem.to_json(), "action": fix.action, "outcome": fix.outcome, "reason": fix.reason}


def _fix_last_line(result: RepairReport) -> str:
    outcomes = [fix.outcome for fix in result.fixes]
    counts = ", ".join(f"{outcomes.count(o)} {o}" for o in OUTCOMES if o in outcomes)
    if result.reservations_removed:
        verb = "removed" if result.applied else "to remove"
        counts = ", ".join(filter(None, (counts, f"{result.reservations_removed} ended reservations {verb}")))
    if not result.applied and ("planned" in outcomes or result.reservations_removed):
        return f"dry run, nothing written: {counts}; run again with --apply to write"
    return f"done: {counts or 'nothing to do'}"


def print_fixes(result: RepairReport, output: Output) -> None:
    """``repair`` and ``backfill``: the audit's counts and each fix (those needing a person first), then the tally."""
    _show(
        output,
        lambda: fix_document(result),
        lambda: _print_counts(result.audit),
        lambda: [fix.describe() for fix in sorted(result.fixes, key=lambda fix: _ATTENTION.get(fix.outcome, 2))],
        ("fix", "fixes"),
        _fix_last_line(result),
    )


# A migration: the current-form locks missing and created, conflicts and what is left.


def _migration_last_line(report: MigrationReport) -> str:
    outcomes = [fix.outcome for fix in report.fixes]
    conflicts = len(report.conflicts)
    parts = [f"{conflicts} conflict{'s' * (conflicts != 1)}"] if conflicts else []
    if outcomes.count("skipped"):
        parts.append(f"{outcomes.count('skipped')} not created")
    if report.left:
        parts.append(f"{len(report.left)} left for repair")
    if not report.applied and "planned" in outcomes:
        planned = outcomes.count("planned")
        todo = ", ".join([f"{planned} lock{'s' * (planned != 1)} to create", *parts])
        return f"dry run, nothing written: {todo}; run again with --apply to write"
    if report.done:
        return f"done: {report.created} created; every record holds its current-form locks"
    return f"not done: {', '.join([f'{report.created} created', *parts])}; resolve them, then run migrate again"


def _print_migration_head(report: MigrationReport) -> None:
    click.echo(f"{report.model} in {report.table}: {report.records} records, {report.scanned} items scanned")
    click.echo(f"current-form locks missing: {report.missing}, created: {report.created}")


def print_migration(report: MigrationReport, output: Output) -> None:
    """``migrate``: the locks missing and created, the conflicts and what is left, then whether it is done."""
    _show(
        output,
        report.to_json,
        lambda: _print_migration_head(report),
        lambda: [
            *(c.describe() for c in report.conflicts),
            *(fix.describe() for fix in report.fixes if fix.outcome == "skipped"),
            *(f"left: {p.describe()} (run repair)" for p in report.left),
        ],
        ("line", "lines"),
        _migration_last_line(report),
    )
