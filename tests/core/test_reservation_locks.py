"""Reservations, the pure parts: which locks a reservation takes, claims in a plan, failures read, lock requests."""

from __future__ import annotations

import re
from typing import Any

import pytest
from _reservations import Signup
from pynamodb.attributes import UnicodeAttribute
from pynamodb.exceptions import CancellationReason
from pynamodb.models import Model

from pynamodb_unique import Former, InvalidUniqueValue, UniqueAttribute, UniqueMixin
from pynamodb_unique._core.constraint import OWNER_HASH, OWNER_RANGE, RESERVATION
from pynamodb_unique._core.outcome import ClaimLost, RecordFailed, Violated, decide, interpret
from pynamodb_unique._core.plan import ABSENT, LockPut, Stored
from pynamodb_unique._core.reservation import claimed, reserved_locks
from pynamodb_unique._model.locks import LockCodec
from pynamodb_unique._model.registry import planner_of

_PLANNER = planner_of(Signup)
assert _PLANNER is not None
PLANNER = _PLANNER
ADA = "UNIQ#USERNAME#ada"
SLUG = "UNIQ#TENANT_SLUG#acme#home"
TOKEN = "f" * 32
ME = ("A", "PROFILE")


class Renaming(UniqueMixin, Model):
    """A constraint during a migration: its values are reserved under both forms."""

    class Meta:
        table_name = "reservation-renaming"
        unique_reservations = True

    pk = UnicodeAttribute(hash_key=True)
    username = UniqueAttribute(UnicodeAttribute(), name="HANDLE", former=Former(name="USERNAME"))


@pytest.mark.parametrize(
    ("values", "keys"),
    [
        ({"username": "Ada"}, [ADA]),
        ({"tenant": "acme", "slug": "home"}, [SLUG]),
        ({"username": "ADA", "tenant": "acme", "slug": "home"}, [ADA, SLUG]),
    ],
    ids=["one", "compound", "several"],
)
def test_reserved_locks__every_constraint_the_values_complete(values: dict[str, Any], keys: list[str]) -> None:
    """Each constraint whose attributes the values all name is reserved, its value normalized."""
    assert list(reserved_locks(PLANNER, "Signup", values)) == keys


def test_reserved_locks__both_forms_during_a_migration() -> None:
    """A constraint keeping its former form reserves the value under both names."""
    planner = planner_of(Renaming)
    assert planner is not None
    locks = reserved_locks(planner, "Renaming", {"username": "ada"})
    assert [(key, former) for key, (_, former) in locks.items()] == [
        ("UNIQ#HANDLE#ada", False),
        ("UNIQ#USERNAME#ada", True),
    ]


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({}, "one or more unique constraints"),
        ({"tenant": "acme"}, "tenant completes none"),
        ({"username": "ada", "slug": "home"}, "slug completes none"),
        ({"pk": "A"}, "pk completes none"),
        ({"username": None}, "take no lock"),
    ],
)
def test_reserved_locks__refused(values: dict[str, Any], message: str) -> None:
    """Names that complete no constraint, or values that take no lock, are refused."""
    with pytest.raises(InvalidUniqueValue, match=message):
        reserved_locks(PLANNER, "Signup", values)


def test_claimed__marks_the_reserved_puts() -> None:
    """The puts of reserved keys carry the token; others, and plans without claims, are unchanged."""
    plan = PLANNER.write("put", ABSENT, {"username": "ada", "tenant": "acme", "slug": "home"})
    assert claimed(plan, {}) is plan
    assert claimed(plan, {"UNIQ#USERNAME#other": TOKEN}) is plan
    marked = claimed(plan, {ADA: TOKEN})
    assert {put.key: put.claim for put in marked.puts} == {ADA: TOKEN, SLUG: None}
    assert marked.record == plan.record
    # A value the record already holds is not put again: already its own, nothing to claim.
    held = Stored(exists=True, values={"username": "ada"})
    assert (
        claimed(PLANNER.write("put", held, {"username": "ada", "tenant": "x", "slug": "y"}), {ADA: TOKEN}).puts[0].claim
        is None
    )


def _failed(item: dict[str, Any] | None) -> CancellationReason:
    return CancellationReason(code="ConditionalCheckFailed", raw_item=item)


@pytest.mark.parametrize(
    "item",
    [None, {OWNER_HASH: {"S": "B"}, OWNER_RANGE: {"S": "PROFILE"}}, {RESERVATION: {"S": "0" * 32}}],
    ids=["released", "claimed-by-another", "another-reservation"],
)
def test_decide__a_failed_claim_is_lost(item: dict[str, Any] | None) -> None:
    """A claim that failed is lost whatever holds the lock now, and comes before any violation."""
    plain = PLANNER.write("put", ABSENT, {"username": "ada", "tenant": "acme", "slug": "home"})
    plan = claimed(plain, {ADA: TOKEN})
    ours = frozenset({ME})
    taken_by_c = _failed({OWNER_HASH: {"S": "C"}, OWNER_RANGE: {"S": "PROFILE"}})

    def reason(action: object) -> CancellationReason:
        if not isinstance(action, LockPut):
            return CancellationReason(code="None")
        return _failed(item) if action.key == ADA else taken_by_c

    findings = interpret([(a, ours) for a in plan.sent()], [reason(a) for a in plan.sent()])
    assert sorted(f.kind for f in findings) == ["lost", "taken"]
    outcome = decide(findings, frozenset())
    assert isinstance(outcome, ClaimLost)
    assert [f.action.key for f in outcome.lost if isinstance(f.action, LockPut)] == [ADA]
    # Without the claim, the same reasons are two violations.
    unclaimed = interpret([(a, ours) for a in plain.sent()], [reason(a) for a in plain.sent()])
    violated = decide(unclaimed, frozenset())
    assert isinstance(violated, Violated)
    assert len(violated.taken) == 2


def _placeholders(request: dict[str, Any]) -> tuple[set[str], set[str]]:
    expression = request["ConditionExpression"]
    return set(re.findall(r"#\w+", expression)), set(re.findall(r":\w+", expression))


@pytest.mark.parametrize(
    "owner",
    [{OWNER_HASH: {"S": "A"}, OWNER_RANGE: {"S": "PROFILE"}}, {OWNER_HASH: {"N": "7"}}],
    ids=["hash-range", "hash-only"],
)
def test_codec__claim_is_the_record_lock_on_the_token(owner: dict[str, Any]) -> None:
    """A claim writes the record's plain lock, conditioned on the live reservation or the record itself."""
    codec = LockCodec("t", "PK", "SK", "uniq_expires", expiring=True)
    claim = codec.claim(ADA, owner, "USERNAME", "Signup", TOKEN, now=100)
    put = codec.put(ADA, owner, "USERNAME", "Signup", now=100)
    assert claim["Item"] == put["Item"]
    owned = " AND ".join(f"#{i + 1} = :{i}" for i in range(len(owner)))
    owned = owned if len(owner) == 1 else f"({owned})"
    assert claim["ConditionExpression"] == f"((#res = :tok AND :now <= #exp) OR {owned})"
    assert claim["ExpressionAttributeValues"][":tok"] == {"S": TOKEN}
    assert claim["ExpressionAttributeValues"][":now"] == {"N": "100"}
    # DynamoDB refuses names and values a request does not use.
    names, values = _placeholders(claim)
    assert names == set(claim["ExpressionAttributeNames"])
    assert values == set(claim["ExpressionAttributeValues"])


def test_codec__reserve_and_unreserve_use_every_placeholder() -> None:
    """The reservation's put and delete name exactly what their conditions use."""
    codec = LockCodec("t", "PK", None, "ttl", expiring=True)
    reserve = codec.reserve(ADA, TOKEN, "USERNAME", "Signup", until=200, now=100)
    assert reserve["Item"] == {
        "PK": {"S": ADA},
        "uniq_constraint": {"S": "USERNAME"},
        "uniq_owner_model": {"S": "Signup"},
        RESERVATION: {"S": TOKEN},
        "ttl": {"N": "200"},
    }
    assert reserve["ConditionExpression"] == "(attribute_not_exists (#0) OR #exp < :now OR #res = :tok)"
    for request in (reserve, codec.unreserve(ADA, TOKEN), codec.unreserve(ADA, TOKEN, ended_before=100)):
        names, values = _placeholders(request)
        assert names == set(request["ExpressionAttributeNames"])
        assert values == set(request["ExpressionAttributeValues"])
    assert codec.unreserve(ADA, TOKEN, ended_before=100)["ConditionExpression"] == "(#res = :tok AND #exp < :now)"


def test_decide__create_only__existing_record_outranks_a_lost_claim() -> None:
    """For a create-only write, a record found stored is reported with the lost claim among its locks."""
    plan = claimed(PLANNER.write("put", ABSENT, {"username": "ada"}), {ADA: TOKEN})
    sent = plan.sent()
    ours = frozenset({ME})
    lost_only = interpret([(a, ours) for a in sent], [_failed(None) if isinstance(a, LockPut) else None for a in sent])
    assert isinstance(decide(lost_only, frozenset(), create_only=True), ClaimLost)
    both = interpret([(a, ours) for a in sent], [_failed(None) for _ in sent])
    outcome = decide(both, frozenset(), create_only=True)
    assert isinstance(outcome, RecordFailed)
    assert [f.kind for f in outcome.locks] == ["lost"]
