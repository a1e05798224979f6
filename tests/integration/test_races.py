"""Races on a real server process (dynoxide over HTTP): uniqueness holds when writers collide.

moto is not atomic under concurrent requests (see BACKENDS.md), so these run on dynoxide only.
Each test prints its figures (rounds, winners per round, outcomes); ``pytest -s`` shows them.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from _backends import Backend, bind_model
from _backends import race as _race
from _invariant import actual_locks, assert_invariant, raw_items
from models import Account

from pynamodb_unique import StaleWrite, UniqueViolation

pytestmark = pytest.mark.integration

THREADS = 24
SIGNUP_ROUNDS = 30
CHANGE_ROUNDS = 20
OWNER_SUFFIX = "PROFILE"


class RaceAccount(Account):
    """Account with a connection pool big enough for every racing thread."""

    class Meta(Account.Meta):
        max_pool_connections = THREADS + 8


@pytest.fixture
def race_accounts(dynoxide_endpoint: str) -> type[RaceAccount]:
    model = bind_model(RaceAccount, Backend("dynoxide", dynoxide_endpoint))
    model.describe_table()  # Create the shared botocore client before threads race for it.
    return model


def _kind(outcome: object) -> str:
    """Name an outcome: ok, or the exception's class name."""
    return type(outcome).__name__ if isinstance(outcome, BaseException) else "ok"


def _email_owner(outcome: object) -> tuple[Any, ...] | None:
    """The owner named by a UniqueViolation that names only ``email``."""
    assert isinstance(outcome, UniqueViolation), f"unexpected outcome {outcome!r}"
    (violation,) = outcome.violations
    assert (violation.constraint, violation.attributes) == ("EMAIL", ("email",))
    return violation.owner


def _stored(model: type[RaceAccount]) -> dict[str, str | None]:
    """pk -> email of every record."""
    return {a.pk: a.email for a in model.scan(consistent_read=True)}


def _report(name: str, **figures: object) -> None:
    print(f"\n[race] {name}: " + ", ".join(f"{k}={v}" for k, v in figures.items()))


def test_signup__same_email_many_threads__one_winner_per_round(race_accounts: type[RaceAccount]) -> None:
    """24 threads sign up with one email: one wins, each other gets UniqueViolation naming email."""
    winners_per_round: list[int] = []
    kinds: Counter[str] = Counter()
    for round_no in range(SIGNUP_ROUNDS):
        # Differently cased spellings of one value, each with a username of its own.
        email = f"race{round_no}@lovelace.io"
        spellings = [email.upper() if i % 2 else email for i in range(THREADS)]
        signups = [
            race_accounts(pk=f"R{round_no}T{i}", email=spellings[i], username=f"r{round_no}u{i}")
            for i in range(THREADS)
        ]
        outcomes = _race([account.save for account in signups])
        kinds.update(_kind(o) for o in outcomes)
        winners = [i for i, o in enumerate(outcomes) if _kind(o) == "ok"]
        winners_per_round.append(len(winners))
        assert len(winners) == 1, [repr(o) for o in outcomes]
        winner = (f"R{round_no}T{winners[0]}", OWNER_SUFFIX)
        for i, outcome in enumerate(outcomes):
            if i != winners[0]:
                assert _email_owner(outcome) == winner
                assert outcome.violations[0].values == (spellings[i],)
        # No loser left a record or a username lock behind.
        assert {pk: e for pk, e in _stored(race_accounts).items() if pk.startswith(f"R{round_no}T")} == {
            winner[0]: spellings[winners[0]]
        }
        assert_invariant(race_accounts)
    assert len(raw_items(race_accounts)) == 3 * SIGNUP_ROUNDS
    _report(
        "same email signup",
        threads=THREADS,
        rounds=SIGNUP_ROUNDS,
        winners_per_round=dict(Counter(winners_per_round)),
        outcomes=dict(kinds),
    )
    assert winners_per_round == [1] * SIGNUP_ROUNDS


def test_signup__value_freed_and_retaken__one_winner_per_round(race_accounts: type[RaceAccount]) -> None:
    """The same email raced again after each winner is deleted: the freed lock is retaken once."""
    email = "contested@lovelace.io"
    winners_per_round: list[int] = []
    for round_no in range(SIGNUP_ROUNDS // 3):
        signups = [race_accounts(pk=f"F{round_no}T{i}", email=email) for i in range(THREADS)]
        outcomes = _race([account.save for account in signups])
        winners = [signups[i] for i, o in enumerate(outcomes) if _kind(o) == "ok"]
        winners_per_round.append(len(winners))
        assert len(winners) == 1, [repr(o) for o in outcomes]
        assert {_email_owner(o) for o in outcomes if _kind(o) != "ok"} == {(winners[0].pk, OWNER_SUFFIX)}
        assert_invariant(race_accounts)
        winners[0].delete()
        assert raw_items(race_accounts) == []
    _report("freed email retaken", threads=THREADS, rounds=len(winners_per_round), winners_per_round=winners_per_round)
    assert winners_per_round == [1] * (SIGNUP_ROUNDS // 3)


def _pair(model: type[RaceAccount], round_no: int, first: str, second: str) -> tuple[RaceAccount, RaceAccount]:
    a = model(pk=f"A{round_no}", email=first)
    b = model(pk=f"B{round_no}", email=second)
    a.save()
    b.save()
    return a, b


def test_change__two_records_swap_emails__both_refused(race_accounts: type[RaceAccount]) -> None:
    """Two records swapping emails at once: each value is held by the other, so both are refused."""
    kinds: Counter[str] = Counter()
    for n in range(CHANGE_ROUNDS):
        a, b = _pair(race_accounts, n, f"a{n}@x.io", f"b{n}@x.io")
        a.email, b.email = b.email, a.email
        outcomes = _race([a.save, b.save])
        kinds.update(_kind(o) for o in outcomes)
        assert [_email_owner(o) for o in outcomes] == [(f"B{n}", OWNER_SUFFIX), (f"A{n}", OWNER_SUFFIX)]
        assert {k: v for k, v in _stored(race_accounts).items() if k in (a.pk, b.pk)} == {
            a.pk: f"a{n}@x.io",
            b.pk: f"b{n}@x.io",
        }
        assert_invariant(race_accounts)
    _report("swap emails", rounds=CHANGE_ROUNDS, outcomes=dict(kinds))
    assert kinds == {"UniqueViolation": 2 * CHANGE_ROUNDS}


def test_change__rotate_into_value_being_vacated__order_decides(race_accounts: type[RaceAccount]) -> None:
    """A takes B's email while B moves to a fresh one: B always succeeds; A only if B went first."""
    kinds: Counter[str] = Counter()
    for n in range(CHANGE_ROUNDS):
        a, b = _pair(race_accounts, n, f"a{n}@x.io", f"b{n}@x.io")
        a.email, b.email = f"b{n}@x.io", f"c{n}@x.io"
        out_a, out_b = _race([a.save, b.save])
        kinds[f"A:{_kind(out_a)}"] += 1
        kinds[f"B:{_kind(out_b)}"] += 1
        assert _kind(out_b) == "ok"
        expected_a = f"b{n}@x.io" if _kind(out_a) == "ok" else f"a{n}@x.io"
        if _kind(out_a) != "ok":
            assert _email_owner(out_a) == (b.pk, OWNER_SUFFIX)
        stored = _stored(race_accounts)
        assert (stored[a.pk], stored[b.pk]) == (expected_a, f"c{n}@x.io")
        assert_invariant(race_accounts)
    _report("rotate into vacated email", rounds=CHANGE_ROUNDS, outcomes=dict(sorted(kinds.items())))
    assert kinds["B:ok"] == CHANGE_ROUNDS
    assert kinds["A:ok"] + kinds["A:UniqueViolation"] == CHANGE_ROUNDS


def test_change__signup_takes_old_value__either_order(race_accounts: type[RaceAccount]) -> None:
    """A moves to a new email while C signs up with A's old one: A wins; C only if A went first."""
    kinds: Counter[str] = Counter()
    for n in range(CHANGE_ROUNDS):
        a = race_accounts(pk=f"A{n}", email=f"old{n}@x.io")
        a.save()
        a.email = f"new{n}@x.io"
        c = race_accounts(pk=f"C{n}", email=f"old{n}@x.io")
        out_a, out_c = _race([a.save, c.save])
        kinds[f"move:{_kind(out_a)}"] += 1
        kinds[f"signup:{_kind(out_c)}"] += 1
        assert _kind(out_a) == "ok"
        if _kind(out_c) != "ok":
            assert _email_owner(out_c) == (a.pk, OWNER_SUFFIX)
        stored = _stored(race_accounts)
        assert stored[a.pk] == f"new{n}@x.io"
        assert (c.pk in stored) == (_kind(out_c) == "ok")
        assert_invariant(race_accounts)
    _report("move vs signup with old value", rounds=CHANGE_ROUNDS, outcomes=dict(sorted(kinds.items())))
    assert kinds["move:ok"] == CHANGE_ROUNDS
    assert kinds["signup:ok"] + kinds["signup:UniqueViolation"] == CHANGE_ROUNDS


def test_change__signup_takes_new_value__exactly_one_wins(race_accounts: type[RaceAccount]) -> None:
    """A moves to an email that C signs up with at the same moment: exactly one of them gets it."""
    kinds: Counter[str] = Counter()
    for n in range(CHANGE_ROUNDS):
        a = race_accounts(pk=f"A{n}", email=f"old{n}@x.io")
        a.save()
        a.email = f"new{n}@x.io"
        c = race_accounts(pk=f"C{n}", email=f"new{n}@x.io")
        out_a, out_c = _race([a.save, c.save])
        kinds[f"move:{_kind(out_a)}"] += 1
        kinds[f"signup:{_kind(out_c)}"] += 1
        assert sorted([_kind(out_a), _kind(out_c)]) == ["UniqueViolation", "ok"]
        stored = _stored(race_accounts)
        if _kind(out_a) == "ok":
            assert _email_owner(out_c) == (a.pk, OWNER_SUFFIX)
            assert (stored[a.pk], c.pk in stored) == (f"new{n}@x.io", False)
        else:
            assert _email_owner(out_a) == (c.pk, OWNER_SUFFIX)
            assert (stored[a.pk], stored[c.pk]) == (f"old{n}@x.io", f"new{n}@x.io")
        assert_invariant(race_accounts)
    _report("move vs signup with new value", rounds=CHANGE_ROUNDS, outcomes=dict(sorted(kinds.items())))
    assert kinds["move:ok"] + kinds["signup:ok"] == CHANGE_ROUNDS


def test_delete__signup_of_freed_value__signup_wins_only_after(race_accounts: type[RaceAccount]) -> None:
    """A deletes its record while C signs up with A's email: the delete wins; C only if it came after."""
    kinds: Counter[str] = Counter()
    for n in range(CHANGE_ROUNDS):
        a = race_accounts(pk=f"A{n}", email=f"freed{n}@x.io", username=f"freed{n}")
        a.save()
        c = race_accounts(pk=f"C{n}", email=f"freed{n}@x.io", username=f"freed{n}")
        out_a, out_c = _race([a.delete, c.save])
        kinds[f"delete:{_kind(out_a)}"] += 1
        kinds[f"signup:{_kind(out_c)}"] += 1
        assert _kind(out_a) == "ok"
        if _kind(out_c) != "ok":
            assert isinstance(out_c, UniqueViolation)
            assert out_c.attributes == ("email", "username")
            assert {v.owner for v in out_c.violations} == {(a.pk, OWNER_SUFFIX)}
        stored = _stored(race_accounts)
        assert a.pk not in stored
        assert (c.pk in stored) == (_kind(out_c) == "ok")
        assert_invariant(race_accounts)
    _report("delete vs signup of freed value", rounds=CHANGE_ROUNDS, outcomes=dict(sorted(kinds.items())))
    assert kinds["delete:ok"] == CHANGE_ROUNDS
    assert kinds["signup:ok"] + kinds["signup:UniqueViolation"] == CHANGE_ROUNDS


def test_stale_pair__concurrent_saves_of_one_record__last_writer_wins(race_accounts: type[RaceAccount]) -> None:
    """Two instances loaded before either writes save different emails at once: one value remains."""
    kinds: Counter[str] = Counter()
    for n in range(CHANGE_ROUNDS):
        race_accounts(pk=f"S{n}", email=f"s{n}@x.io", username=f"s{n}").save()
        first = race_accounts.get(f"S{n}", OWNER_SUFFIX, consistent_read=True)
        second = race_accounts.get(f"S{n}", OWNER_SUFFIX, consistent_read=True)
        first.email, first.username = f"p{n}@x.io", f"p{n}"
        second.email, second.bio = f"q{n}@x.io", "second"
        outcomes = _race([first.save, second.save])
        kinds.update(_kind(o) for o in outcomes)
        assert all(_kind(o) == "ok" or isinstance(o, StaleWrite) for o in outcomes), outcomes
        assert any(_kind(o) == "ok" for o in outcomes)
        stored = race_accounts.get(f"S{n}", OWNER_SUFFIX, consistent_read=True)
        assert (stored.email, stored.username, stored.bio) in {
            (f"p{n}@x.io", f"p{n}", None),
            (f"q{n}@x.io", f"s{n}", "second"),
        }
        locks = {k for k, owner in actual_locks(race_accounts).items() if owner == (f"S{n}", OWNER_SUFFIX)}
        assert locks == {f"UNIQ#EMAIL#{stored.email}", f"UNIQ#HANDLE#{stored.username}"}
        assert_invariant(race_accounts)
    _report("stale pair saves", rounds=CHANGE_ROUNDS, outcomes=dict(kinds))
    assert kinds["ok"] + kinds["StaleWrite"] == 2 * CHANGE_ROUNDS


def test_stale_crowd__eight_stale_instances_of_one_record__one_value_remains(race_accounts: type[RaceAccount]) -> None:
    """Eight instances of one record save eight emails at once: each succeeds or is StaleWrite."""
    kinds: Counter[str] = Counter()
    crowd = 8
    for n in range(CHANGE_ROUNDS // 2):
        race_accounts(pk=f"K{n}", email=f"k{n}@x.io").save()
        views = [race_accounts.get(f"K{n}", OWNER_SUFFIX, consistent_read=True) for _ in range(crowd)]
        for i, view in enumerate(views):
            view.email = f"k{n}v{i}@x.io"
        outcomes = _race([view.save for view in views])
        kinds.update(_kind(o) for o in outcomes)
        assert all(_kind(o) == "ok" or isinstance(o, StaleWrite) for o in outcomes), outcomes
        stored = race_accounts.get(f"K{n}", OWNER_SUFFIX, consistent_read=True).email
        assert stored in {views[i].email for i, o in enumerate(outcomes) if _kind(o) == "ok"}
        assert {k for k, owner in actual_locks(race_accounts).items() if owner == (f"K{n}", OWNER_SUFFIX)} == {
            f"UNIQ#EMAIL#{stored}"
        }
        assert_invariant(race_accounts)
    _report("stale crowd saves", instances=crowd, rounds=CHANGE_ROUNDS // 2, outcomes=dict(kinds))
    assert kinds["ok"] + kinds["StaleWrite"] == crowd * (CHANGE_ROUNDS // 2)


def _churn_call(model: type[RaceAccount], rng: random.Random) -> Callable[[], object]:
    """One random write over three records and a tiny alphabet, so writers collide often."""
    pk = rng.choice(["X", "Y", "Z"])
    email = rng.choice(["e1@x.io", "E1@X.IO", "e2@x.io", "e3@x.io"])
    username = rng.choice(["u1", "u2", None])
    kind = rng.choice(["create", "save", "update", "delete"])
    if kind == "create":
        return model(pk=pk, email=email, username=username).save

    def loaded() -> object:
        try:
            view = model.get(pk, OWNER_SUFFIX, consistent_read=True)
        except model.DoesNotExist:
            return "missing"
        if kind == "delete":
            return view.delete()
        if kind == "update":
            return view.update(actions=[model.email.set(email), model.username.set(username or "u3")])
        view.email, view.username = email, username
        return view.save()

    return loaded


def test_churn__random_writers_on_three_records__invariant_holds(race_accounts: type[RaceAccount]) -> None:
    """24 threads create, save, update and delete three records over four emails, round after round."""
    rng = random.Random(20240601)
    kinds: Counter[str] = Counter()
    rounds = CHANGE_ROUNDS // 2
    for _ in range(rounds):
        outcomes = _race([_churn_call(race_accounts, rng) for _ in range(THREADS)])
        kinds.update("missing" if o == "missing" else _kind(o) for o in outcomes)
        unexpected = [
            o for o in outcomes if isinstance(o, Exception) and not isinstance(o, UniqueViolation | StaleWrite)
        ]
        assert unexpected == []
        assert_invariant(race_accounts)
    _report("churn", threads=THREADS, rounds=rounds, outcomes=dict(sorted(kinds.items())))
    assert sum(kinds.values()) == THREADS * rounds
    assert kinds["ok"] > 0
    assert kinds["UniqueViolation"] > 0
