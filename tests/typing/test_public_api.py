"""Static typing of the public API, checked by ``mypy --strict`` (and run by pytest)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, assert_type

from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.exceptions import TransactWriteError
from pynamodb.models import Model

import pynamodb_unique
from pynamodb_unique import (
    TransactWrite,
    UniqueAttribute,
    UniqueConstraint,
    UniqueError,
    UniqueMixin,
    UniqueViolation,
    Violation,
    normalizers,
)


class Typed(UniqueMixin, Model):
    """A model whose attributes keep their PynamoDB types once marked unique."""

    class Meta:
        table_name = "typed"
        unique_constraints = [UniqueConstraint("a", "b", name="AB", normalize={"a": str.lower})]

    pk = UnicodeAttribute(hash_key=True)
    email = UniqueAttribute(UnicodeAttribute(), normalize=str.casefold)
    score = UniqueAttribute(NumberAttribute(null=True), name="SCORE")
    a = UnicodeAttribute(null=True)
    b = UnicodeAttribute(null=True)


def test_types__unique_attribute_keeps_wrapped_type() -> None:
    """Class attributes are the wrapped attributes; instance values are plain values."""
    assert_type(Typed.email, UnicodeAttribute)
    assert_type(Typed.score, NumberAttribute)
    instance = Typed(pk="p", email="e")
    assert_type(instance.email, str)
    assert_type(instance.score, float)


def check_writes(instance: Typed) -> None:
    """Checked by mypy only: the overrides keep PynamoDB's signatures and return types."""
    assert_type(instance.save(client_request_token="idem-1"), dict[str, Any])
    assert_type(instance.save(Typed.a == "x", add_version_condition=False), dict[str, Any])
    assert_type(instance.update([Typed.email.set("x")], client_request_token="t"), Any)
    assert_type(instance.delete(Typed.a.exists()), Any)
    assert_type(Typed.unique_owner(email="x"), tuple[Any, ...] | None)
    assert_type(list(Typed.scan()), list[Typed])
    assert_type(next(Typed.query("p")), Typed)
    assert_type(instance.validate_unique(), None)
    assert_type(pynamodb_unique.bulk_save([instance]), pynamodb_unique.BulkResult[Typed])
    assert_type(pynamodb_unique.bulk_save([instance]).saved, tuple[Typed, ...])
    assert_type(instance.validate_unique(exclude=("email",)), None)
    with TransactWrite() as tx:
        tx.save(instance)
        tx.update(instance, actions=[Typed.email.set("y")])


def check_reservations(instance: Typed) -> None:
    """Checked by mypy only: a reservation is typed, and the writes take it."""
    reservation = Typed.reserve(ttl=timedelta(minutes=5), email="x")
    assert_type(reservation, pynamodb_unique.Reservation)
    assert_type(reservation.held_until, datetime)
    assert_type(reservation.lock_keys, tuple[str, ...])
    assert_type(reservation.token, str)
    assert_type(reservation.release(), bool)
    assert_type(instance.save(reservations=[reservation]), dict[str, Any])
    assert_type(pynamodb_unique.bulk_save([instance], reservations=[reservation]).lost, tuple[Typed, ...])
    with TransactWrite() as tx:
        tx.save(instance, reservations=[reservation])


def test_types__reservation_lost_names_its_reservations() -> None:
    """ReservationLost is a UniqueError carrying the reservations and constraint names it lost."""
    error = pynamodb_unique.ReservationLost([], ["EMAIL"], "lost")
    assert_type(error.reservations, tuple[Any, ...])
    assert_type(error.constraints, tuple[str, ...])
    assert isinstance(error, UniqueError)
    assert str(error) == "lost"
    violation = Violation("EMAIL", ("email",), ("e",), None, reserved=True)
    assert_type(violation.reserved, bool)


def test_types__iam_policy_is_a_json_document() -> None:
    """iam_policy() takes model classes and keyword flags, and returns a dict ready for json.dumps."""
    policy = pynamodb_unique.iam_policy(Typed, tools=True, streams=False, account="123456789012")
    assert_type(policy, dict[str, Any])
    assert policy["Version"] == "2012-10-17"


def test_types__errors_carry_typed_context() -> None:
    """Violations and errors expose typed fields."""
    violation = Violation("EMAIL", ("email",), ("e",), ("p",))
    assert_type(violation.owner, tuple[Any, ...] | None)
    assert_type(violation.owner_model, str | None)
    assert_type(pynamodb_unique.is_lock_item({"PK": {"S": "UNIQ#EMAIL#e"}}), bool)
    error = UniqueViolation([violation])
    assert_type(error.violations, tuple[Violation, ...])
    assert_type(error.attributes, tuple[str, ...])
    assert_type(violation.message, str)
    assert_type(violation.code, str)
    assert_type(error.field_errors(), dict[str, list[str]])
    assert error.field_errors() == {"email": ["email 'e' is already taken"]}
    assert isinstance(error, UniqueError)
    assert str(error) == "email 'e' is already taken"
    assert sorted(pynamodb_unique.__all__) == pynamodb_unique.__all__


class Migrating(UniqueMixin, Model):
    """A model during a migration: its former forms keep the attributes' PynamoDB types."""

    class Meta:
        table_name = "typed-migrating"
        unique_constraints = [UniqueConstraint("a", "b", name="AB", former=pynamodb_unique.Former(name="OLD_AB"))]

    pk = UnicodeAttribute(hash_key=True)
    email = UniqueAttribute(UnicodeAttribute(), normalize=str.casefold, former=pynamodb_unique.Former(normalize=None))
    a = UnicodeAttribute(null=True)
    b = UnicodeAttribute(null=True)


def test_types__former_keeps_wrapped_type() -> None:
    """former= changes nothing of the attribute's type; Former fields left out mean "as now"."""
    assert_type(Migrating.email, UnicodeAttribute)
    assert_type(pynamodb_unique.Former(secret=b"old"), pynamodb_unique.Former)


def check_migration() -> None:
    """Checked by mypy only: migrate's report and its conflicts are typed."""
    report = pynamodb_unique.migrate(Migrating, apply=True, segments=2, max_rate=10.0, progress=lambda n: None)
    assert_type(report, pynamodb_unique.MigrationReport)
    assert_type(report.created, int)
    assert_type(report.done, bool)
    assert_type(report.conflicts, list[pynamodb_unique.Conflict])
    assert_type(report.conflicts[0].records, tuple[tuple[Any, ...], ...])
    assert_type(report.to_json(), dict[str, Any])
    retired = pynamodb_unique.RetiredLock("HANDLE", "UNIQ#HANDLE#ada", None, ("p",), ())
    assert_type(retired.former, bool)


class Normalized(UniqueMixin, Model):
    """The shipped normalizers fit ``normalize=`` as they are, alone, chained and per part."""

    class Meta:
        table_name = "typed-normalized"
        unique_constraints = [UniqueConstraint("a", "b", name="AB", normalize={"b": normalizers.skeleton})]

    pk = UnicodeAttribute(hash_key=True)
    email = UniqueAttribute(UnicodeAttribute(), normalize=normalizers.email)
    handle = UniqueAttribute(
        UnicodeAttribute(),
        normalize=normalizers.chain(normalizers.username, normalizers.skeleton),
        former=pynamodb_unique.Former(normalize=normalizers.username),
    )
    a = UnicodeAttribute(null=True)
    b = UnicodeAttribute(null=True)


def test_types__normalizers() -> None:
    """Each normalizer takes and returns text; chain() returns one more."""
    assert_type(Normalized.handle, UnicodeAttribute)
    assert_type(normalizers.email("ada@lovelace.io"), str)
    assert_type(normalizers.chain(normalizers.username, normalizers.skeleton), Callable[[str], str])
    assert_type(normalizers.CONFUSABLES_UNICODE_VERSION, str)


def test_types__table_not_found__tables_and_pynamodb_base() -> None:
    """TableNotFound names its tables and is both a library error and PynamoDB's TransactWriteError."""
    error = pynamodb_unique.TableNotFound(["account-locks"], "lock table 'account-locks' does not exist")
    assert_type(error.tables, tuple[str, ...])
    assert isinstance(error, pynamodb_unique.UniqueConfigError)
    assert isinstance(error, TransactWriteError)
    assert error.tables == ("account-locks",)
