"""The planner: before/after -> actions, without any backend."""

from __future__ import annotations

from typing import Any

import pytest
from models import Account

from pynamodb_unique._core.plan import LockNotOurs, LockPut, LockRelease, Planner, RecordWrite, Stored
from pynamodb_unique._model.registry import planner_of

PLANNER = planner_of(Account)
assert isinstance(PLANNER, Planner)

ADA = {"email": "ada@lovelace.io", "username": "ada", "tenant": None, "slug": None}


def _summary(actions: list[Any]) -> list[tuple[str, str]]:
    out = []
    for action in actions:
        if isinstance(action, RecordWrite):
            out.append((action.op, "record"))
        elif isinstance(action, LockPut):
            out.append(("put", action.key))
        else:
            assert isinstance(action, LockRelease)
            out.append(("delete", action.key))
    return out


@pytest.mark.parametrize(
    ("stored", "desired", "expected"),
    [
        pytest.param(
            Stored(exists=False),
            ADA,
            [("put", "record"), ("put", "UNIQ#EMAIL#ada@lovelace.io"), ("put", "UNIQ#HANDLE#ada")],
            id="create",
        ),
        pytest.param(
            Stored(exists=True, values=ADA),
            {**ADA, "email": "ADA@Lovelace.io"},
            [("put", "record")],
            id="same-normalized-value",
        ),
        pytest.param(
            Stored(exists=True, values=ADA),
            {**ADA, "email": "new@x.io"},
            [("delete", "UNIQ#EMAIL#ada@lovelace.io"), ("put", "record"), ("put", "UNIQ#EMAIL#new@x.io")],
            id="email-change",
        ),
        pytest.param(
            Stored(exists=True, values=ADA),
            {**ADA, "username": None},
            [("delete", "UNIQ#HANDLE#ada"), ("put", "record")],
            id="set-to-none",
        ),
        pytest.param(
            Stored(exists=True, values=ADA),
            {**ADA, "tenant": "acme"},
            [("put", "record")],
            id="compound-half-set",
        ),
        pytest.param(
            Stored(exists=True, values={**ADA, "tenant": "acme"}),
            {**ADA, "tenant": "acme", "slug": "home"},
            [("put", "record"), ("put", "UNIQ#TENANT_SLUG#acme#home")],
            id="compound-completed",
        ),
    ],
)
def test_write__put__actions(stored: Stored, desired: dict[str, Any], expected: list[tuple[str, str]]) -> None:
    """Each change adds exactly its lock moves; unchanged constraints add nothing."""
    plan = PLANNER.write("put", stored, desired)
    assert _summary(plan.sent()) == expected
    assert plan.transactional == (len(expected) > 1)


def test_write__update__record_last() -> None:
    """An update is sent after the lock deletes and puts, as PynamoDB groups them."""
    plan = PLANNER.write("update", Stored(exists=True, values=ADA), {**ADA, "email": "b@x.io"})
    assert _summary(plan.sent()) == [
        ("delete", "UNIQ#EMAIL#ada@lovelace.io"),
        ("put", "UNIQ#EMAIL#b@x.io"),
        ("update", "record"),
    ]


def test_write__not_ours__checked_instead_of_released() -> None:
    """A lock known to belong to another record is never released: the plan checks it instead."""
    plan = PLANNER.write(
        "put",
        Stored(exists=True, values=ADA),
        {**ADA, "email": "b@x.io"},
        not_ours=frozenset({"UNIQ#EMAIL#ada@lovelace.io"}),
    )
    assert _summary(plan.sent()[1:]) == [("put", "record"), ("put", "UNIQ#EMAIL#b@x.io")]
    assert [(type(a).__name__, a.key) for a in plan.checks] == [("LockNotOurs", "UNIQ#EMAIL#ada@lovelace.io")]


def test_delete__releases_every_lock() -> None:
    """Deleting releases every lock of the stored values, and nothing else."""
    plan = PLANNER.delete(Stored(exists=True, values={**ADA, "tenant": "acme", "slug": "home"}))
    assert _summary(plan.sent()) == [
        ("delete", "record"),
        ("delete", "UNIQ#EMAIL#ada@lovelace.io"),
        ("delete", "UNIQ#HANDLE#ada"),
        ("delete", "UNIQ#TENANT_SLUG#acme#home"),
    ]


def test_delete__condition_accepts_missing_record() -> None:
    """A delete's record condition passes when the record is already gone."""
    plan = PLANNER.delete(Stored(exists=True, values=ADA))
    condition = plan.record.condition
    assert condition is not None
    names: dict[str, str] = {}
    values: dict[str, Any] = {}
    expression = condition.serialize(names, values)
    assert expression.startswith("(attribute_not_exists (")
    assert " OR " in expression
    assert set(names) >= {"PK", "email", "username"}


def test_write__create__condition_is_not_exists() -> None:
    """A create is conditioned on the record not existing."""
    plan = PLANNER.write("put", Stored(exists=False), ADA)
    names: dict[str, str] = {}
    assert plan.record.condition is not None
    assert plan.record.condition.serialize(names, {}) == "attribute_not_exists (#0)"
    assert names == {"PK": "#0"}


def test_stored__same_as__compares_unique_values() -> None:
    """Two views are the same when existence and every unique value match."""
    assert Stored(exists=True, values=ADA).same_as(Stored(exists=True, values=dict(ADA)), PLANNER)
    assert not Stored(exists=True, values=ADA).same_as(Stored(exists=False), PLANNER)
    assert not Stored(exists=True, values=ADA).same_as(Stored(exists=True, values={**ADA, "slug": "x"}), PLANNER)
    assert not Stored(exists=True, values=ADA).same_as(Stored(exists=True, values={**ADA, "email": None}), PLANNER)


def test_delete__not_ours__checked_not_released() -> None:
    """A lock found owned by another record is checked (still not ours), sent first, never deleted."""
    plan = PLANNER.delete(Stored(exists=True, values=ADA), not_ours=frozenset({"UNIQ#HANDLE#ada"}))
    sent = plan.sent()
    assert isinstance(sent[0], LockNotOurs)
    assert sent[0].key == "UNIQ#HANDLE#ada"
    assert _summary(sent[1:]) == [("delete", "record"), ("delete", "UNIQ#EMAIL#ada@lovelace.io")]
    assert plan.transactional


def test_plan__create__learns_every_key_after_the_write() -> None:
    """A create computes every constraint's key; the plan hands them on for the next write."""
    plan = PLANNER.write("put", Stored(exists=False), ADA)
    assert plan.keys == {"EMAIL": "UNIQ#EMAIL#ada@lovelace.io", "HANDLE": "UNIQ#HANDLE#ada", "TENANT_SLUG": None}


def test_plan__known_keys__used_instead_of_recomputed() -> None:
    """The keys a snapshot carries are the locks released (they are what was written, e.g. under an old secret)."""
    keys = {"EMAIL": "UNIQ#EMAIL#as-written", "HANDLE": "UNIQ#HANDLE#ada", "TENANT_SLUG": None}
    stored = Stored(exists=True, values=ADA, keys=keys)
    assert _summary(PLANNER.delete(stored).sent()) == [
        ("delete", "record"),
        ("delete", "UNIQ#EMAIL#as-written"),
        ("delete", "UNIQ#HANDLE#ada"),
    ]
    change = PLANNER.write("put", stored, {**ADA, "email": "new@x.io"})
    assert _summary(change.sent()) == [
        ("delete", "UNIQ#EMAIL#as-written"),
        ("put", "record"),
        ("put", "UNIQ#EMAIL#new@x.io"),
    ]
    assert change.keys == {**keys, "EMAIL": "UNIQ#EMAIL#new@x.io"}
