"""What a cancelled write means: DynamoDB's reasons, position by position, turned into one outcome.

Pure: :func:`interpret` reads the reasons against the actions as sent, :func:`decide` turns the
findings into what the writer does next. No I/O, no model instances.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from .lockitem import OwnerKey, lock_owner
from .plan import LockNotOurs, LockPut, LockRelease, PlanAction, RecordWrite

if TYPE_CHECKING:
    from pynamodb.exceptions import CancellationReason, PynamoDBException


class WriteFailed(Exception):
    """Internal: a condition failed; ``reasons[i]`` belongs to the ``i``-th item sent (``Plan.sent()[i]``)."""

    def __init__(self, reasons: list[CancellationReason | None], cause: PynamoDBException) -> None:
        super().__init__("write failed")
        self.reasons = reasons
        self.cause = cause


FindingKind = Literal["taken", "lost", "record", "foreign", "ours-again", "other"]


@dataclass(frozen=True)
class Finding:
    """What one failed action of a cancelled request means.

    Attributes:
        kind: ``taken`` (a lock put met another record's lock), ``lost`` (a claim of a
            reservation met a lock that is no longer that live reservation), ``record`` (the record's
            condition failed), ``foreign`` (a lock to release is another record's), ``ours-again``
            (a lock checked not ours is ours), ``other`` (an item that is not the library's).
        action: the planned action, or None for another item.
        item: the stored item DynamoDB returned with the reason (ALL_OLD), if any.
        position: the failed item's position as sent (None: not read from a cancellation).
    """

    kind: FindingKind
    action: PlanAction | None
    item: dict[str, Any] | None
    position: int | None = None


def interpret(
    sent: Sequence[tuple[PlanAction, frozenset[OwnerKey]] | None], reasons: Sequence[CancellationReason | None]
) -> list[Finding]:
    """Turn the actions as sent and DynamoDB's reasons, position by position, into findings.

    A value taken under both forms of one constraint (during a migration) gives one ``taken``
    finding per writing record: the first as sent (puts of the current form come first).

    Args:
        sent: each sent item's action and the owner keys counted as the writer's own (a lock
            already owned by one of them is no violation); None for an item that is not a planned
            action (the caller's own, or a repair's or migration's raw item: an ``other`` finding).
        reasons: the cancellation reasons, in the order sent.
    """
    findings = []
    # A value held under both forms of a constraint (a migration) is one violation: each record's
    # constraint is reported once, by the first of its taken locks as sent.
    taken: set[tuple[int, frozenset[OwnerKey]]] = set()
    for position, (slot, reason) in enumerate(zip(sent, reasons, strict=False)):
        if reason is None or reason.code != "ConditionalCheckFailed":
            continue
        item = reason.raw_item
        if slot is None:
            findings.append(Finding("other", None, item, position))
            continue
        action, ours = slot
        if isinstance(action, RecordWrite):
            findings.append(Finding("record", action, item, position))
        elif isinstance(action, LockPut) and action.claim is not None:
            findings.append(Finding("lost", action, item, position))
        elif isinstance(action, LockPut):
            reported = (id(action.constraint), ours)
            if lock_owner(item) not in ours and reported not in taken:
                taken.add(reported)
                findings.append(Finding("taken", action, item, position))
        elif isinstance(action, LockRelease):
            findings.append(Finding("foreign", action, item, position))
        elif isinstance(action, LockNotOurs):
            findings.append(Finding("ours-again", action, item, position))
    return findings


@dataclass(frozen=True)
class Violated:
    """Values are held by other records: one ``taken`` finding per violated constraint."""

    taken: tuple[Finding, ...]


@dataclass(frozen=True)
class ClaimLost:
    """Reservations the write claimed no longer hold their values: one ``lost`` finding per lock."""

    lost: tuple[Finding, ...]


@dataclass(frozen=True)
class LocksMoved:
    """Only locks' owners were not as planned: re-plan from the same assumed state.

    Attributes:
        not_ours: the lock keys the next plan checks are another record's instead of releasing.
    """

    not_ours: frozenset[str]


@dataclass(frozen=True)
class RecordFailed:
    """A record's own condition failed: the caller's condition, or a stale view of the record.

    Attributes:
        records: the failed record writes' findings, as sent (a transaction may write several).
        locks: the same cancellation's lock findings (locks found another record's; for a
            create-only write, taken values too).
    """

    records: tuple[Finding, ...]
    locks: tuple[Finding, ...] = ()

    @property
    def item(self) -> dict[str, Any] | None:
        """The stored record DynamoDB returned (ALL_OLD) for the first failed record, or None when it sent none."""
        return self.records[0].item


@dataclass(frozen=True)
class Unexplained:
    """No action of the library's explains the cancellation: the caller's own items failed."""


Outcome = ClaimLost | Violated | LocksMoved | RecordFailed | Unexplained


def _refused(findings: Sequence[Finding]) -> ClaimLost | Violated | None:
    """What no re-plan can change: claims of reservations lost, else values taken; None: neither."""
    lost = tuple(f for f in findings if f.kind == "lost")
    if lost:
        return ClaimLost(lost)
    taken = tuple(f for f in findings if f.kind == "taken")
    return Violated(taken) if taken else None


def decide(findings: Sequence[Finding], not_ours: frozenset[str], *, create_only: bool = False) -> Outcome:
    """What a cancelled write means, from its findings (:func:`interpret`).

    Violations come first: a taken value is reported even when the record changed too, except for
    a create-only write (``bulk_save``), whose record found stored already exists whatever its
    locks say; a lost reservation (a claim that failed) before them, as it cannot succeed by
    re-planning either. The caller's own items come next (the library's findings are then beside
    the point), then a failed record condition (the record's state decides the locks). Otherwise a
    lock to release that proved another record's is checked instead, and one checked so that
    proved ours again is released, in a re-plan from the same assumed state.

    Args:
        findings: the failed actions' findings.
        not_ours: the lock keys the failed plan checked were another record's.
        create_only: the write only creates records (it never plans from a stored one).
    """
    records = tuple(f for f in findings if f.kind == "record")
    locks = tuple(f for f in findings if f.kind in ("taken", "lost", "foreign", "ours-again"))
    if create_only and records:
        return RecordFailed(records, locks)
    refused = _refused(findings)
    if refused is not None:
        return refused
    if any(f.kind == "other" for f in findings):
        return Unexplained()
    if records:
        return RecordFailed(records, locks)
    foreign = frozenset(f.action.key for f in findings if isinstance(f.action, LockRelease))
    back = frozenset(f.action.key for f in findings if isinstance(f.action, LockNotOurs))
    if not foreign and not back:
        return Unexplained()
    return LocksMoved((not_ours - back) | foreign)
