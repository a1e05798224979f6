"""Races of reservations on a real server process (dynoxide over HTTP): one winner, every time.

moto is not atomic under concurrent requests (see BACKENDS.md), so these run on dynoxide only.
Each test prints its figures (rounds, outcomes); ``pytest -s`` shows them.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections import Counter
from collections.abc import Callable
from datetime import timedelta

import pytest
from _backends import Backend, bind_model
from _backends import race as _race
from _invariant import assert_invariant
from _reservations import Signup, locks

from pynamodb_unique import Reservation, ReservationLost, UniqueViolation

pytestmark = pytest.mark.integration

THREADS = 12
ROUNDS = 10


class RaceSignup(Signup):
    """Signup with a connection pool big enough for every racing thread."""

    class Meta(Signup.Meta):
        max_pool_connections = THREADS + 8


@pytest.fixture
def signups(dynoxide_endpoint: str) -> type[RaceSignup]:
    model = bind_model(RaceSignup, Backend("dynoxide", dynoxide_endpoint))
    model.describe_table()  # Create the shared botocore client before threads race for it.
    return model


def _kind(outcome: object) -> str:
    """Name an outcome: ok (a Reservation or a save's response), or the exception's class name."""
    return type(outcome).__name__ if isinstance(outcome, BaseException) else "ok"


def _claim(model: type[RaceSignup], pk: str, username: str, reservation: Reservation) -> Callable[[], object]:
    return lambda: model(pk=pk, username=username).save(reservations=[reservation])


def _save(model: type[RaceSignup], pk: str, username: str) -> Callable[[], object]:
    return lambda: model(pk=pk, username=username).save()


def _owner(model: type[RaceSignup], username: str) -> str | None:
    """The record key the value's lock names (None: no record's lock)."""
    lock = locks(model).get(f"UNIQ#USERNAME#{username}", {})
    owner: str | None = lock.get("uniq_owner_hash", {}).get("S")
    return owner


def test_race__two_reserve_of_one_value(signups: type[RaceSignup]) -> None:
    """Threads reserving one value at once: exactly one gets the reservation, the others a reserved violation."""
    tally: Counter[str] = Counter()
    for round_ in range(ROUNDS):
        name = f"r{round_}"
        outcomes = _race([functools.partial(signups.reserve, username=name) for _ in range(THREADS)])
        tally.update(_kind(o) for o in outcomes)
        won = [o for o in outcomes if isinstance(o, Reservation)]
        assert len(won) == 1, outcomes
        for outcome in outcomes:
            if not isinstance(outcome, Reservation):
                assert isinstance(outcome, UniqueViolation), outcome
                assert outcome.violations[0].reserved
        assert locks(signups)[f"UNIQ#USERNAME#{name}"]["uniq_reservation"] == {"S": won[0].token}
        assert won[0].release()
    print(f"\nreserve x{THREADS}, {ROUNDS} rounds: {dict(tally)}")
    assert_invariant(signups)


def test_race__two_claimers_of_one_reservation(signups: type[RaceSignup]) -> None:
    """Records claiming one reservation at once: exactly one is saved, the others get ReservationLost."""
    tally: Counter[str] = Counter()
    for round_ in range(ROUNDS):
        name = f"c{round_}"
        reservation = signups.reserve(username=name)
        outcomes = _race([_claim(signups, f"{name}-{i}", name, reservation) for i in range(THREADS)])
        tally.update(_kind(o) for o in outcomes)
        winners = [i for i, o in enumerate(outcomes) if not isinstance(o, BaseException)]
        assert len(winners) == 1, outcomes
        assert all(isinstance(o, ReservationLost) for o in outcomes if isinstance(o, BaseException)), outcomes
        assert _owner(signups, name) == f"{name}-{winners[0]}"
    print(f"\nclaimers x{THREADS}, {ROUNDS} rounds: {dict(tally)}")
    assert_invariant(signups)


def test_race__stranger_vs_owner(signups: type[RaceSignup]) -> None:
    """The owner's claim against strangers (forged tokens, plain saves) of a live reservation: the owner wins."""
    tally: Counter[str] = Counter()
    for round_ in range(ROUNDS):
        name = f"s{round_}"
        reservation = signups.reserve(username=name)
        forged = dataclasses.replace(reservation, token=f"{round_:032x}")
        strangers = [_claim(signups, f"{name}-f{i}", name, forged) for i in range(THREADS // 2)]
        strangers += [_save(signups, f"{name}-p{i}", name) for i in range(THREADS // 2 - 1)]
        outcomes = _race([_claim(signups, f"{name}-owner", name, reservation), *strangers])
        tally.update(_kind(o) for o in outcomes)
        assert _kind(outcomes[0]) == "ok", outcomes[0]
        assert [_kind(o) for o in outcomes[1 : THREADS // 2 + 1]] == ["ReservationLost"] * (THREADS // 2)
        assert {_kind(o) for o in outcomes[THREADS // 2 + 1 :]} == {"UniqueViolation"}
        assert _owner(signups, name) == f"{name}-owner"
    print(f"\nowner vs {THREADS - 1} strangers, {ROUNDS} rounds: {dict(tally)}")
    assert_invariant(signups)


def test_race__claim_vs_expiry(signups: type[RaceSignup]) -> None:
    """The owner's claim and strangers' saves across the reservation's end: at most one holds the value.

    A reservation of one second is raced at its end: a claim up to ``held_until`` wins over the
    strangers; after it, one stranger takes the value and the claim is lost. When the claim is judged
    after the end and every save before it, nobody wins and the next writer takes the value. One
    record at most holds the value, and its lock names it.
    """
    sides: Counter[str] = Counter()
    for round_ in range(ROUNDS // 2):
        name = f"e{round_}"
        reservation = signups.reserve(ttl=timedelta(seconds=1), username=name)
        # The end is judged in whole seconds: free once the clock passes held_until + 1.
        boundary = reservation.held_until.timestamp() + 1
        time.sleep(max(0.0, boundary - time.time() - 0.02 * (round_ % 3)))
        calls = [_claim(signups, f"{name}-owner", name, reservation)]
        calls += [_save(signups, f"{name}-p{i}", name) for i in range(THREADS - 1)]
        outcomes = _race(calls)
        winners = [i for i, o in enumerate(outcomes) if not isinstance(o, BaseException)]
        assert len(winners) <= 1, outcomes
        if not winners:
            # Each request is judged by its own clock: the claim after the end, every stranger's
            # save before it. Nobody holds the value, and the next writer takes the ended reservation.
            sides["nobody, then the next writer"] += 1
            assert isinstance(outcomes[0], ReservationLost), outcomes[0]
            assert {_kind(o) for o in outcomes[1:]} == {"UniqueViolation"}
            signups(pk=f"{name}-next", username=name).save()
            assert _owner(signups, name) == f"{name}-next"
            continue
        if winners == [0]:
            sides["owner claimed"] += 1
            assert {_kind(o) for o in outcomes[1:]} == {"UniqueViolation"}
        else:
            sides["stranger took it"] += 1
            assert isinstance(outcomes[0], ReservationLost), outcomes[0]
        assert _owner(signups, name) == (f"{name}-owner" if winners == [0] else f"{name}-p{winners[0] - 1}")
    print(f"\nclaim vs end, {ROUNDS // 2} rounds: {dict(sides)}")
    assert_invariant(signups)
