"""interpret() and decide(): DynamoDB's cancellation reasons, position by position, into one outcome (no backend)."""

from __future__ import annotations

from typing import Any

import pytest
from models import Account
from pynamodb.exceptions import CancellationReason

from pynamodb_unique._core.constraint import OWNER_HASH
from pynamodb_unique._core.outcome import (
    Finding,
    LocksMoved,
    Outcome,
    RecordFailed,
    Unexplained,
    Violated,
    decide,
    interpret,
)
from pynamodb_unique._core.plan import LockNotOurs, LockPut, LockRelease, PlanAction, RecordWrite
from pynamodb_unique._model.registry import planner_of

EMAIL, HANDLE = planner_of(Account).constraints[:2]
ME, OTHER = ("ACCT#me",), ("ACCT#other",)

RECORD = RecordWrite("put", None)
PUT_EMAIL = LockPut(EMAIL, ("ada@x.io",), "UNIQ#EMAIL#ada@x.io")
PUT_FORMER_EMAIL = LockPut(EMAIL, ("ada@x.io",), "UNIQ#MAIL#ada@x.io", former=True)
PUT_HANDLE = LockPut(HANDLE, ("ada",), "UNIQ#HANDLE#ada")
RELEASE = LockRelease(EMAIL, "UNIQ#EMAIL#old@x.io")
CHECK = LockNotOurs(EMAIL, "UNIQ#EMAIL#gone@x.io")

PASSED = CancellationReason(code="None")
TAKEN_BY_OTHER = CancellationReason(code="ConditionalCheckFailed", raw_item={OWNER_HASH: {"S": OTHER[0]}})
TAKEN_BY_ME = CancellationReason(code="ConditionalCheckFailed", raw_item={OWNER_HASH: {"S": ME[0]}})
FAILED_NO_ITEM = CancellationReason(code="ConditionalCheckFailed")
CONFLICT = CancellationReason(code="TransactionConflict")
STORED = {"pk": {"S": ME[0]}, "email": {"S": "new@x.io"}}
RECORD_CHANGED = CancellationReason(code="ConditionalCheckFailed", raw_item=STORED)

Slot = tuple[PlanAction, frozenset[Any]] | None


def _sent(*actions: PlanAction | None) -> list[Slot]:
    return [None if a is None else (a, frozenset({ME})) for a in actions]


def _kinds(findings: list[Finding]) -> list[tuple[str, PlanAction | None]]:
    return [(f.kind, f.action) for f in findings]


@pytest.mark.parametrize(
    ("sent", "reasons", "expected"),
    [
        pytest.param(_sent(RECORD, PUT_EMAIL), [PASSED, PASSED], [], id="nothing-failed"),
        pytest.param(_sent(RECORD, PUT_EMAIL), [PASSED, CONFLICT], [], id="conflict-is-no-finding"),
        pytest.param(_sent(RECORD, PUT_EMAIL), [PASSED, TAKEN_BY_OTHER], [("taken", PUT_EMAIL)], id="taken"),
        pytest.param(_sent(RECORD, PUT_EMAIL), [PASSED, TAKEN_BY_ME], [], id="own-lock-is-no-violation"),
        pytest.param(
            _sent(RECORD, PUT_EMAIL, PUT_FORMER_EMAIL),
            [PASSED, TAKEN_BY_OTHER, TAKEN_BY_OTHER],
            [("taken", PUT_EMAIL)],
            id="both-forms-taken-one-violation",
        ),
        pytest.param(
            _sent(RECORD, PUT_EMAIL, PUT_HANDLE),
            [PASSED, TAKEN_BY_OTHER, TAKEN_BY_OTHER],
            [("taken", PUT_EMAIL), ("taken", PUT_HANDLE)],
            id="every-constraint-reported",
        ),
        pytest.param(_sent(RECORD), [RECORD_CHANGED], [("record", RECORD)], id="record"),
        pytest.param(_sent(RELEASE, RECORD), [TAKEN_BY_OTHER, PASSED], [("foreign", RELEASE)], id="foreign"),
        pytest.param(_sent(CHECK, RECORD), [TAKEN_BY_ME, PASSED], [("ours-again", CHECK)], id="ours-again"),
        pytest.param(_sent(None, RECORD), [FAILED_NO_ITEM, PASSED], [("other", None)], id="caller-item"),
        pytest.param(_sent(RECORD, PUT_EMAIL), [None, TAKEN_BY_OTHER], [("taken", PUT_EMAIL)], id="missing-reason"),
    ],
)
def test_interpret__reasons_by_position__findings(
    sent: list[Slot], reasons: list[CancellationReason | None], expected: list[tuple[str, PlanAction | None]]
) -> None:
    """Each failed condition becomes the finding of the action sent at its position."""
    assert _kinds(interpret(sent, reasons)) == expected


def _finding(kind: Any, action: PlanAction | None, item: dict[str, Any] | None = None) -> Finding:
    return Finding(kind, action, item)


TAKEN = _finding("taken", PUT_EMAIL, {OWNER_HASH: {"S": OTHER[0]}})
RECORD_FINDING = _finding("record", RECORD, STORED)
FOREIGN = _finding("foreign", RELEASE)
OURS_AGAIN = _finding("ours-again", CHECK)
OTHER_ITEM = _finding("other", None)
NO_ITEM = _finding("record", RECORD)
OTHER_RECORD = _finding("record", RecordWrite("update", None), STORED)


@pytest.mark.parametrize(
    ("findings", "not_ours", "expected"),
    [
        pytest.param([TAKEN], frozenset(), Violated((TAKEN,)), id="violation"),
        pytest.param([RECORD_FINDING, TAKEN], frozenset(), Violated((TAKEN,)), id="violation-before-stale-record"),
        pytest.param([RECORD_FINDING], frozenset(), RecordFailed((RECORD_FINDING,)), id="record-failed"),
        pytest.param([NO_ITEM], frozenset(), RecordFailed((NO_ITEM,)), id="record-failed-no-item"),
        pytest.param(
            [FOREIGN, RECORD_FINDING],
            frozenset(),
            RecordFailed((RECORD_FINDING,), (FOREIGN,)),
            id="record-before-locks",
        ),
        pytest.param(
            [RECORD_FINDING, OTHER_RECORD], frozenset(), RecordFailed((RECORD_FINDING, OTHER_RECORD)), id="records"
        ),
        pytest.param([OTHER_ITEM, RECORD_FINDING], frozenset(), Unexplained(), id="caller-item-before-record"),
        pytest.param([OTHER_ITEM, FOREIGN], frozenset(), Unexplained(), id="caller-item-before-locks"),
        pytest.param([OTHER_ITEM, TAKEN], frozenset(), Violated((TAKEN,)), id="violation-before-caller-item"),
        pytest.param([FOREIGN], frozenset(), LocksMoved(frozenset({RELEASE.key})), id="foreign-lock-checked-next"),
        pytest.param(
            [OURS_AGAIN], frozenset({CHECK.key, "UNIQ#X#y"}), LocksMoved(frozenset({"UNIQ#X#y"})), id="ours-again"
        ),
        pytest.param([OTHER_ITEM], frozenset(), Unexplained(), id="caller-item"),
        pytest.param([], frozenset(), Unexplained(), id="no-finding"),
    ],
)
def test_decide__findings__outcome(findings: list[Finding], not_ours: frozenset[str], expected: Outcome) -> None:
    """Violations first, then the record's own condition, then lock owners, else the caller's items."""
    assert decide(findings, not_ours) == expected


@pytest.mark.parametrize(
    ("findings", "expected"),
    [
        pytest.param(
            [TAKEN, RECORD_FINDING], RecordFailed((RECORD_FINDING,), (TAKEN,)), id="existing-before-violation"
        ),
        pytest.param([TAKEN], Violated((TAKEN,)), id="violation"),
        pytest.param([], Unexplained(), id="no-finding"),
    ],
)
def test_decide__create_only__record_found_first(findings: list[Finding], expected: Outcome) -> None:
    """A create-only write (bulk_save) whose record exists is told so, whatever its locks say."""
    assert decide(findings, frozenset(), create_only=True) == expected


def test_record_failed__item__first_records() -> None:
    """RecordFailed.item is the stored item of the first failed record."""
    assert RecordFailed((RECORD_FINDING, NO_ITEM)).item == STORED


def test_interpret__raw_items__positions_of_failed_conditions() -> None:
    """Items that are no planned action (a repair's, a migration's) are read by the position each was sent at."""
    findings = interpret(_sent(None, None, None), [PASSED, RECORD_CHANGED, CONFLICT])
    assert [(f.kind, f.position, f.item) for f in findings] == [("other", 1, STORED)]
