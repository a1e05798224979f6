"""Races around a migration on dynoxide (moto is not atomic under concurrency): the window, then none.

Emails become case-insensitive (``normalize=str.casefold``, ``former=Former(normalize=None)``).
Before ``migrate`` is done, a signup may collide under the current form with a record not yet
migrated: migrate reports every such pair. Once it is done, no duplicate can be written under
either form, whatever races. ``pytest -s`` shows the figures.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from _backends import REGION, unique_table_name
from _backends import race as _race
from _invariant import assert_invariant
from pynamodb.attributes import UnicodeAttribute
from pynamodb.models import Model

from pynamodb_unique import Former, StaleWrite, UniqueAttribute, UniqueMixin, UniqueViolation, migrate

pytestmark = pytest.mark.integration

THREADS = 8
ROUNDS = 6
WINDOW_ROUNDS = 3
SEEDS = 12


def _deploy(endpoint: str, table: str, *, expand: bool) -> type[Any]:
    """The model before the migration (case-sensitive emails), or the expand deploy; each replaces the last."""
    email = (
        UniqueAttribute(UnicodeAttribute(null=True), normalize=str.casefold, former=Former(normalize=None))
        if expand
        else UniqueAttribute(UnicodeAttribute(null=True))
    )
    meta = type(
        "Meta",
        (),
        {"table_name": table, "region": REGION, "host": endpoint, "max_pool_connections": THREADS + 8},
    )
    namespace = {
        "__module__": __name__,
        "__qualname__": "Racer",
        "Meta": meta,
        "pk": UnicodeAttribute(hash_key=True, attr_name="PK"),
        "sk": UnicodeAttribute(range_key=True, attr_name="SK", default="PROFILE"),
        "email": email,
    }
    model: type[Any] = type("Racer", (UniqueMixin, Model), namespace)
    return model


def _seeded(dynoxide_endpoint: str, emails: dict[str, str]) -> type[Any]:
    """A table whose records were written before the migration, and the expand deploy over it."""
    table = unique_table_name("migrate-race")
    before = _deploy(dynoxide_endpoint, table, expand=False)
    before.create_table(wait=True, billing_mode="PAY_PER_REQUEST")
    for pk, email in emails.items():
        before(pk=pk, email=email).save()
    expand = _deploy(dynoxide_endpoint, table, expand=True)
    expand.describe_table()  # Create the shared botocore client before threads race for it.
    return expand


def _no_duplicate_under_either_form(model: type[Any]) -> None:
    emails = [r.email for r in model.scan(consistent_read=True) if r.email is not None]
    assert [e for e, n in Counter(emails).items() if n > 1] == []
    assert [e for e, n in Counter(e.casefold() for e in emails).items() if n > 1] == []


def _change(model: type[Any], pk: str, email: str) -> Callable[[], object]:
    def call() -> object:
        record = model.get(pk, "PROFILE", consistent_read=True)
        record.email = email
        return record.save()

    return call


def test_migrate_done__no_duplicate_under_either_form(dynoxide_endpoint: str) -> None:
    """After migrate reports done, racing signups and changes never write a value held under either form."""
    # Each round's taken value, the record moving to it and the one racing for a fresh value are
    # seeds no other round touches.
    seeds = {f"ACCT#s{k}": f"Seed{k}@Example.COM" for k in range(3 * ROUNDS)}
    model = _seeded(dynoxide_endpoint, seeds)
    report = migrate(model, apply=True, segments=2)
    assert (report.created, report.done) == (len(seeds), True)
    kinds: Counter[str] = Counter()
    fresh_winners = []
    for round_no in range(ROUNDS):
        taken = round_no
        value = f"Seed{taken}@Example.COM"
        fresh = f"Fresh{round_no}@Example.ORG"
        spellings = [value, value.casefold(), value.upper()]
        calls: list[Callable[[], object]] = []
        # Signups and changes of another seed to the taken value, under each form.
        calls += [model(pk=f"ACCT#r{round_no}t{i}", email=spellings[i % 3]).save for i in range(3)]
        mover = f"ACCT#s{ROUNDS + round_no}"
        calls.append(_change(model, mover, spellings[round_no % 3]))
        # A fresh value in several spellings: signups and a change race for it.
        fresh_spellings = [fresh, fresh.casefold(), fresh.upper(), fresh.swapcase()]
        calls += [model(pk=f"ACCT#r{round_no}f{i}", email=s).save for i, s in enumerate(fresh_spellings)]
        calls.append(_change(model, f"ACCT#s{2 * ROUNDS + round_no}", fresh.lower()))
        outcomes = _race(calls)
        kinds.update("ok" if not isinstance(o, BaseException) else type(o).__name__ for o in outcomes)
        for outcome in outcomes[:4]:
            assert isinstance(outcome, UniqueViolation), repr(outcome)
            ((violation),) = outcome.violations
            assert (violation.constraint, violation.owner) == ("EMAIL", (f"ACCT#s{taken}", "PROFILE"))
        winners = [o for o in outcomes[4:] if not isinstance(o, BaseException)]
        assert len(winners) == 1, [repr(o) for o in outcomes[4:]]
        assert all(isinstance(o, (UniqueViolation, StaleWrite)) for o in outcomes[4:] if o not in winners)
        fresh_winners.append(len(winners))
        _no_duplicate_under_either_form(model)
        assert_invariant(model)
    print(f"\n[migrate race] after done: rounds={ROUNDS}, threads={len(calls)} per round, outcomes={dict(kinds)}")
    assert migrate(model).done


def _migrate_during_signups(model: type[Any], delays: list[float]) -> tuple[Any, list[Any]]:
    """migrate(apply=True) while signup ``k`` (after ``delays[k]`` s) takes ``window{k}@example.com``."""
    outcomes: list[Any] = [None] * len(delays)

    def signup(k: int) -> None:
        time.sleep(delays[k])
        try:
            outcomes[k] = model(pk=f"ACCT#late{k}", email=f"window{k}@example.com").save()
        except Exception as exc:  # noqa: BLE001 - every outcome is asserted on.
            outcomes[k] = exc

    threads = [threading.Thread(target=signup, args=(k,)) for k in range(len(delays))]
    for thread in threads:
        thread.start()
    report = migrate(model, apply=True, segments=2)
    for thread in threads:
        thread.join()
    return report, outcomes


def test_migrate__signups_racing_it__every_collision_reported(dynoxide_endpoint: str) -> None:
    """Signups colliding with records not yet migrated, racing migrate: each one that wins is a reported conflict."""
    rng = random.Random(11)
    totals: Counter[str] = Counter()
    for _ in range(WINDOW_ROUNDS):
        seeds = {f"ACCT#s{k}": f"Window{k}@Example.COM" for k in range(SEEDS)}
        model = _seeded(dynoxide_endpoint, seeds)
        delays = [rng.uniform(0, 0.12) for _ in range(SEEDS)]
        result, outcomes = _migrate_during_signups(model, delays)
        won = {k for k, o in enumerate(outcomes) if not isinstance(o, BaseException)}
        for k, outcome in enumerate(outcomes):
            if k not in won:
                assert isinstance(outcome, UniqueViolation), repr(outcome)
                assert outcome.violations[0].owner == (f"ACCT#s{k}", "PROFILE")
        assert {c.lock_key: set(c.records) for c in result.conflicts} == {
            f"UNIQ#EMAIL#window{k}@example.com": {(f"ACCT#s{k}", "PROFILE"), (f"ACCT#late{k}", "PROFILE")} for k in won
        }
        assert result.done == (not won)
        totals.update(won=len(won), refused=SEEDS - len(won))
        # A person decides: the later signups go; then migrate finishes and the table is whole.
        for k in won:
            model.get(f"ACCT#late{k}", "PROFILE").delete()
        assert migrate(model, apply=True).done
        assert_invariant(model)
        _no_duplicate_under_either_form(model)
    print(f"\n[migrate race] window: rounds={WINDOW_ROUNDS}, signups={dict(totals)}")
