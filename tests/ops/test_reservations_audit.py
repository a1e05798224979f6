"""Reservations seen by the tools: audit, repair, inspect, validate_unique and the CLI, on moto and dynoxide."""

from __future__ import annotations

import importlib
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from _backends import Backend, bind_model
from _expiry import client, record_key
from _export import export_tables
from _reservations import Signup, end, locks
from click.testing import CliRunner

import pynamodb_unique._ops.parallel
from pynamodb_unique import DuplicateValue, UniqueViolation, audit, inspect, repair
from pynamodb_unique._core.constraint import RESERVATION
from pynamodb_unique.cli import cli

#: The issue asks each feature on moto and on the real server (dynoxide).
pytestmark = pytest.mark.backends("moto", "dynoxide")

ADA = "UNIQ#USERNAME#ada"


@pytest.fixture
def signups(backend: Backend) -> type[Signup]:
    model: type[Signup] = bind_model(Signup, backend)
    return model


def test_audit__live_reservation_counted_apart(signups: type[Signup]) -> None:
    """A live reservation is valid with no record: counted in ``reserved``, no problem."""
    signups.reserve(username="ada", tenant="acme", slug="home")
    signups(pk="A", username="bob").save()
    report = audit(signups)
    assert report.clean
    assert report.reserved == 2
    assert report.locks == 3
    assert report.expired == 0
    assert report.to_json()["reserved"] == 2


def test_audit__ended_reservation_is_expired(signups: type[Signup]) -> None:
    """An ended reservation counts as expired (free), and is listed for repair."""
    reservation = signups.reserve(username="ada")
    end(signups, reservation)
    report = audit(signups)
    assert report.clean
    assert report.reserved == 0
    assert report.expired == 1
    assert report.expired_reservations == ((ADA, reservation.token),)


def test_audit__claimed_reservation_is_a_plain_lock(signups: type[Signup]) -> None:
    """After a claim the value's lock is its record's plain lock: nothing reserved, nothing wrong."""
    reservation = signups.reserve(username="ada")
    signups(pk="A", username="ada").save(reservations=[reservation])
    report = audit(signups)
    assert report.clean
    assert (report.reserved, report.locks, report.records) == (0, 1, 1)


def test_audit__record_written_over_a_reservation_is_a_duplicate(signups: type[Signup]) -> None:
    """A record holding a reserved value (written behind the library's back) is a duplicate: a person decides."""
    signups.reserve(username="ada")
    item = {**record_key("A"), "username": {"S": "ada"}}
    client(signups).put_item(TableName=signups.Meta.table_name, Item=item)
    report = audit(signups)
    (problem,) = report.problems
    assert isinstance(problem, DuplicateValue)
    assert problem.lock_key == ADA
    assert problem.owner is None
    assert repair(signups, report, apply=True).fixes[0].outcome == "left"
    assert RESERVATION in locks(signups)[ADA]


def test_export_audit__reservations_as_live(signups: type[Signup], tmp_path: Path) -> None:
    """An export's audit (one process, then two) counts live and ended reservations as the live audit does."""
    signups.reserve(username="ada", tenant="acme", slug="home")
    end(signups, signups.reserve(username="bob"))
    signups.reserve(username="carl")
    client(signups).put_item(TableName=signups.Meta.table_name, Item={**record_key("C"), "username": {"S": "carl"}})
    live = audit(signups)
    assert (live.reserved, live.expired, len(live.expired_reservations)) == (3, 1, 1)
    assert [p.kind for p in live.problems] == ["duplicate"]
    (location,) = export_tables(client(signups), [signups.Meta.table_name], tmp_path).values()
    assert audit(signups, export=location) == live
    with pytest.MonkeyPatch.context() as patch:
        # Forked workers inherit the test's models, which are made at run time (bind_model).
        patch.setattr(pynamodb_unique._ops.parallel, "START_METHOD", "fork")
        assert audit(signups, export=location, workers=2) == live


def test_repair__removes_ended_reservations_on_request(signups: type[Signup]) -> None:
    """repair(expired_reservations=True) deletes ended reservations; a dry run and the default leave them."""
    ended = signups.reserve(username="ada")
    live = signups.reserve(username="bob")
    end(signups, ended)
    report = audit(signups)
    assert repair(signups, report, apply=True).reservations_removed == 0
    dry = repair(signups, report, expired_reservations=True)
    assert dry.reservations_removed == 1
    assert ADA in locks(signups)
    done = repair(signups, report, apply=True, expired_reservations=True)
    assert done.reservations_removed == 1
    assert set(locks(signups)) == {"UNIQ#USERNAME#bob"}
    assert live.release() is True


def test_repair__leaves_a_value_reserved_again_since_the_audit(signups: type[Signup]) -> None:
    """An ended reservation whose value was reserved or taken again after the audit is left alone."""
    first = signups.reserve(username="ada")
    ended = signups.reserve(username="bob")
    end(signups, first)
    end(signups, ended)
    report = audit(signups)
    again = signups.reserve(username="ada")
    signups(pk="B", username="bob").save()
    assert repair(signups, report, apply=True, expired_reservations=True).reservations_removed == 0
    assert locks(signups)[ADA][RESERVATION] == {"S": again.token}
    assert locks(signups)["UNIQ#USERNAME#bob"]["uniq_owner_hash"] == {"S": "B"}


def test_inspect__shows_a_reservation(signups: type[Signup]) -> None:
    """inspect() names a live reservation, its model and its end; an ended one as expired."""
    reservation = signups.reserve(username="ada")
    info = inspect(signups, username="ADA")
    assert info.reserved
    assert info.reserved_by == "Signup"
    assert info.owner is None
    assert not info.held
    assert info.expires == reservation.held_until
    assert info.healthy
    assert f"reserved by Signup until {reservation.held_until.isoformat()}" in info.describe()
    assert info.to_json()["reserved"] is True
    end(signups, reservation)
    ended = inspect(signups, username="ada")
    assert ended.expired
    assert "expired at" in ended.describe()


def test_validate_unique__names_the_reservation(signups: type[Signup]) -> None:
    """validate_unique() reports a reserved value as reserved; an ended one as free."""
    reservation = signups.reserve(username="ada")
    with pytest.raises(UniqueViolation) as caught:
        signups(pk="A", username="ada").validate_unique()
    (violation,) = caught.value.violations
    assert violation.reserved
    assert violation.held_until == reservation.held_until
    # Free for the record that will claim it.
    signups(pk="A", username="ada").validate_unique(reservations=[reservation])
    end(signups, reservation)
    signups(pk="A", username="ada").validate_unique()


MODEL_SOURCE = """
from pynamodb.attributes import UnicodeAttribute
from pynamodb.models import Model

from pynamodb_unique import UniqueAttribute, UniqueMixin


class Signup(UniqueMixin, Model):
    class Meta:
        table_name = {table!r}
        region = "us-east-1"
        unique_reservations = True

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    sk = UnicodeAttribute(range_key=True, attr_name="SK", default="PROFILE")
    username = UniqueAttribute(UnicodeAttribute(null=True))
"""


def test_repair_command__expired_reservations(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, backend: Backend
) -> None:
    """``audit`` counts live reservations; ``repair --expired-reservations --apply`` deletes ended ones."""
    monkeypatch.syspath_prepend(str(tmp_path))
    name = f"signups_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(MODEL_SOURCE.format(table=f"cli-{uuid.uuid4().hex[:12]}"))
    model: Any = importlib.import_module(name).Signup
    model.Meta.host = backend.host
    model.create_table(wait=True, billing_mode="PAY_PER_REQUEST")
    target = [f"{name}:Signup", *(["--endpoint", backend.host] if backend.host else [])]
    model.reserve(username="bob")
    end(model, model.reserve(username="ada"))
    audited = CliRunner().invoke(cli, ["audit", *target], catch_exceptions=False)
    assert "1 live reservations" in audited.output
    dry = CliRunner().invoke(cli, ["repair", *target, "--expired-reservations", "--json"], catch_exceptions=False)
    assert json.loads(dry.output)["reservations_removed"] == 1
    applied = CliRunner().invoke(cli, ["repair", *target, "--expired-reservations", "--apply"], catch_exceptions=False)
    assert "1 ended reservations removed" in applied.output
    assert applied.exit_code == 0
    assert set(locks(model)) == {"UNIQ#USERNAME#bob"}
