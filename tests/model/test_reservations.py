"""Reservations: values held before any record exists, claimed in the record's transaction, on moto and dynoxide.

Time passing is simulated by writing an end in the past into a stored reservation (``_reservations.end``).
"""

from __future__ import annotations

import dataclasses
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from _backends import Backend, RequestCounter, bind_model
from _reservations import Signup, end, locks
from pynamodb.attributes import UnicodeAttribute
from pynamodb.models import Model

from pynamodb_unique import (
    InvalidUniqueValue,
    Reservation,
    ReservationLost,
    TransactWrite,
    UniqueAttribute,
    UniqueConfigError,
    UniqueMixin,
    UniqueViolation,
    bulk_save,
    is_lock_item,
)
from pynamodb_unique._core.constraint import LOCK_EXPIRES, RESERVATION

#: The issue asks each feature on moto and on the real server (dynoxide).
pytestmark = pytest.mark.backends("moto", "dynoxide")

ADA = "UNIQ#USERNAME#ada"
SLUG = "UNIQ#TENANT_SLUG#acme#home"


@pytest.fixture
def signups(backend: Backend) -> type[Signup]:
    model: type[Signup] = bind_model(Signup, backend)
    return model


def _plain_lock(model: type[Any], pk: str, username: str) -> dict[str, Any]:
    """The lock a record ``pk`` saved without any reservation holds for ``username`` (another value), as stored."""
    other = model(pk=pk, username=username)
    other.save()
    lock = locks(model)[f"UNIQ#USERNAME#{username}"]
    other.delete()
    return lock


def test_reserve__holds_the_value_against_other_writes(signups: type[Signup]) -> None:
    """While a reservation lasts, a save of its value raises UniqueViolation naming it as reserved."""
    reservation = signups.reserve(ttl=timedelta(minutes=15), username="Ada")
    assert reservation.lock_keys == (ADA,)
    assert reservation.values == {"username": "Ada"}
    assert len(reservation.token) == 32
    assert reservation.token not in repr(reservation)
    assert timedelta(minutes=14) < reservation.held_until - datetime.now(UTC) <= timedelta(minutes=15, seconds=1)
    with pytest.raises(UniqueViolation) as caught:
        signups(pk="B", username="ada").save()
    (violation,) = caught.value.violations
    assert violation.reserved
    assert violation.owner is None
    assert violation.held_until == reservation.held_until
    assert violation.message == f"username 'ada' is reserved until {reservation.held_until.isoformat()}"
    assert signups.count("B") == 0


def test_reserve__lock_item_names_the_token_and_its_end(signups: type[Signup]) -> None:
    """The lock names the reservation's token and model, with its end in the lock table's expiry attribute."""
    reservation = signups.reserve(username="ada")
    lock = locks(signups)[ADA]
    assert lock[RESERVATION] == {"S": reservation.token}
    assert lock[LOCK_EXPIRES] == {"N": str(int(reservation.held_until.timestamp()))}
    assert lock["uniq_owner_model"] == {"S": "Signup"}
    assert "uniq_owner_hash" not in lock
    assert is_lock_item(lock)
    assert list(signups.scan()) == []  # Never yielded as a record.


def test_reserve__several_constraints_in_one_request(signups: type[Signup]) -> None:
    """Values of several constraints are reserved in one transaction, all or none."""
    with RequestCounter(signups) as counter:
        reservation = signups.reserve(username="ada", tenant="acme", slug="home")
    assert counter.operations == ["TransactWriteItems"]
    assert set(reservation.lock_keys) == {ADA, SLUG}
    assert reservation.constraints == ("USERNAME", "TENANT_SLUG")
    # One value taken: nothing is reserved.
    signups(pk="A", username="bob").save()
    with pytest.raises(UniqueViolation) as caught:
        signups.reserve(username="bob", tenant="acme", slug="other")
    assert [v.constraint for v in caught.value.violations] == ["USERNAME"]
    assert caught.value.violations[0].owner == ("A", "PROFILE")
    assert "UNIQ#TENANT_SLUG#acme#other" not in locks(signups)


def test_reserve__one_value_is_one_put_item(signups: type[Signup]) -> None:
    """A reservation of one value is one PutItem."""
    with RequestCounter(signups) as counter:
        signups.reserve(username="ada")
    assert counter.operations == ["PutItem"]


def test_reserve__taken_or_reserved_value_refused(signups: type[Signup]) -> None:
    """reserve() of a record's value or of a live reservation raises UniqueViolation; the first stays."""
    first = signups.reserve(username="ada")
    with pytest.raises(UniqueViolation) as caught:
        signups.reserve(username="ADA")
    assert caught.value.violations[0].reserved
    assert caught.value.violations[0].held_until == first.held_until
    assert locks(signups)[ADA][RESERVATION] == {"S": first.token}
    signups(pk="A", username="bob").save()
    with pytest.raises(UniqueViolation) as caught:
        signups.reserve(username="bob")
    assert not caught.value.violations[0].reserved
    assert caught.value.violations[0].owner == ("A", "PROFILE")


def test_claim__save_turns_the_reservation_into_the_record_lock(signups: type[Signup]) -> None:
    """save(reservations=[r]) writes the record and makes the reserved lock exactly its plain lock."""
    reservation = signups.reserve(username="Ada", tenant="acme", slug="home")
    account = signups(pk="A", username="ada", tenant="acme", slug="home")
    with RequestCounter(signups) as counter:
        account.save(reservations=[reservation])
    assert counter.operations == ["TransactWriteItems"]
    stored = locks(signups)
    plain = _plain_lock(signups, "A2", "zed")
    assert stored[ADA] == plain | {"PK": {"S": ADA}, "uniq_owner_hash": {"S": "A"}}
    assert RESERVATION not in stored[SLUG]
    assert stored[SLUG]["uniq_owner_hash"] == {"S": "A"}
    assert signups.unique_owner(username="ada") == ("A", "PROFILE")
    # The record owns its values as any other: a change releases them.
    account.username = "ada2"
    account.save()
    assert ADA not in locks(signups)


def test_claim__a_second_claim_fails(signups: type[Signup]) -> None:
    """A reservation claimed once cannot be claimed by another record; the claimer may save again."""
    reservation = signups.reserve(username="ada")
    first = signups(pk="A", username="ada")
    first.save(reservations=[reservation])
    with pytest.raises(ReservationLost) as caught:
        signups(pk="B", username="ada").save(reservations=[reservation])
    assert caught.value.reservations == (reservation,)
    assert caught.value.constraints == ("USERNAME",)
    assert "no longer holds" in str(caught.value)
    assert signups.count("B") == 0
    # The claimer's own save again: its lock is already its own.
    first.save(reservations=[reservation])
    assert locks(signups)[ADA]["uniq_owner_hash"] == {"S": "A"}


def test_claim__a_stranger_token_fails(signups: type[Signup]) -> None:
    """A claim with another token than the reservation's fails; the reservation stays its owner's."""
    reservation = signups.reserve(username="ada")
    forged = dataclasses.replace(reservation, token="0" * 32)
    with pytest.raises(ReservationLost):
        signups(pk="B", username="ada").save(reservations=[forged])
    assert locks(signups)[ADA][RESERVATION] == {"S": reservation.token}
    signups(pk="A", username="ada").save(reservations=[reservation])
    assert locks(signups)[ADA]["uniq_owner_hash"] == {"S": "A"}


def test_claim__after_the_end_fails_even_untaken(signups: type[Signup]) -> None:
    """A reservation claimed after it ended fails, though nobody took the value; a plain save takes it."""
    reservation = signups.reserve(username="ada")
    end(signups, reservation)
    account = signups(pk="A", username="ada")
    with pytest.raises(ReservationLost):
        account.save(reservations=[reservation])
    account.save()
    assert locks(signups)[ADA]["uniq_owner_hash"] == {"S": "A"}


def test_claim__ended_reservation_is_free_for_anyone(signups: type[Signup]) -> None:
    """After its end, anyone takes the value in one transaction; the owner's late claim is lost."""
    reservation = signups.reserve(username="ada")
    end(signups, reservation)
    with RequestCounter(signups) as counter:
        signups(pk="B", username="ada").save()
    assert counter.operations == ["TransactWriteItems"]
    with pytest.raises(ReservationLost):
        signups(pk="A", username="ada").save(reservations=[reservation])
    assert locks(signups)[ADA]["uniq_owner_hash"] == {"S": "B"}
    # And another reservation of an ended one's value succeeds.
    other = signups.reserve(username="carl")
    end(signups, other)
    again = signups.reserve(username="carl")
    assert locks(signups)["UNIQ#USERNAME#carl"][RESERVATION] == {"S": again.token}


def test_claim__values_must_match_the_record(signups: type[Signup]) -> None:
    """A reservation whose values the record does not hold is refused before any request."""
    reservation = signups.reserve(username="ada", tenant="acme", slug="home")
    with RequestCounter(signups) as counter, pytest.raises(InvalidUniqueValue, match="TENANT_SLUG"):
        signups(pk="A", username="ada", tenant="acme", slug="other").save(reservations=[reservation])
    with pytest.raises(InvalidUniqueValue, match="Reservation"):
        signups(pk="A", username="ada").save(reservations=["token"])  # type: ignore[list-item]
    assert counter.count() == 0
    assert locks(signups)[ADA][RESERVATION] == {"S": reservation.token}


def test_release__frees_the_values_early(signups: type[Signup]) -> None:
    """release() deletes the reservation's locks; a second release, or one after a claim, does nothing."""
    reservation = signups.reserve(username="ada", tenant="acme", slug="home")
    assert reservation.release() is True
    assert locks(signups) == {}
    assert reservation.release() is False
    with pytest.raises(ReservationLost):
        signups(pk="A", username="ada", tenant="acme", slug="home").save(reservations=[reservation])
    claimed = signups.reserve(username="bob")
    signups(pk="B", username="bob").save(reservations=[claimed])
    assert claimed.release() is False
    assert locks(signups)["UNIQ#USERNAME#bob"]["uniq_owner_hash"] == {"S": "B"}


def test_release__after_the_end_and_a_taker_leaves_the_taker(signups: type[Signup]) -> None:
    """A release after the end and another writer's take leaves that writer's lock alone."""
    reservation = signups.reserve(username="ada")
    end(signups, reservation)
    signups(pk="B", username="ada").save()
    assert reservation.release() is False
    assert locks(signups)[ADA]["uniq_owner_hash"] == {"S": "B"}


def test_transact_write__claims_in_the_transaction(signups: type[Signup]) -> None:
    """TransactWrite.save(reservations=...) claims in the composed transaction; a lost claim raises."""
    reservation = signups.reserve(username="ada")
    with TransactWrite() as tx:
        tx.save(signups(pk="A", username="ada"), reservations=[reservation])
    assert locks(signups)[ADA]["uniq_owner_hash"] == {"S": "A"}
    with pytest.raises(ReservationLost) as caught, TransactWrite() as tx:
        tx.save(signups(pk="B", username="ada"), reservations=[reservation])
    assert caught.value.reservations == (reservation,)
    assert signups.count("B") == 0


def test_bulk_save__claims_each_record_reservations(signups: type[Signup]) -> None:
    """bulk_save(reservations=...) claims each with the record holding its values; a lost claim is reported."""
    ada = signups.reserve(username="ada")
    bob = signups.reserve(username="bob")
    end(signups, bob)
    signups(pk="X", username="bob").save()  # Bob's reservation ended and was taken.
    records = [signups(pk="A", username="ada"), signups(pk="B", username="bob"), signups(pk="C", username="carl")]
    result = bulk_save(records, reservations=[ada, bob])
    assert result.saved == (records[0], records[2])
    assert result.lost == (records[1],)
    assert locks(signups)[ADA]["uniq_owner_hash"] == {"S": "A"}
    with pytest.raises(InvalidUniqueValue, match="no instance holds"):
        bulk_save([signups(pk="D", username="dan")], reservations=[signups.reserve(username="eve")])


def test_reserve__refused_arguments(signups: type[Signup]) -> None:
    """Names that complete no constraint, values that take no lock, and a bad ttl are refused before any request."""
    with RequestCounter(signups) as counter:
        with pytest.raises(InvalidUniqueValue, match="slug completes none"):
            signups.reserve(username="ada", slug="home")
        with pytest.raises(InvalidUniqueValue):
            signups.reserve()
        with pytest.raises(InvalidUniqueValue, match="take no lock"):
            signups.reserve(username=None)
        with pytest.raises(InvalidUniqueValue, match="ttl"):
            signups.reserve(ttl=timedelta(0), username="ada")
    assert counter.count() == 0


class Plain(UniqueMixin, Model):
    """A model that does not take reservations."""

    class Meta:
        table_name = "reservation-plain"
        region = "us-east-1"

    pk = UnicodeAttribute(hash_key=True)
    email = UniqueAttribute(UnicodeAttribute())


def test_reserve__needs_the_meta_option(backend: Backend) -> None:
    """A model without Meta.unique_reservations refuses reserve(); its requests carry no expiry clause."""
    model = bind_model(Plain, backend)
    with pytest.raises(UniqueConfigError, match="unique_reservations"):
        model.reserve(email="ada@x.io")
    with RequestCounter(model) as counter:
        model(pk="A", email="ada@x.io").save()
    (params,) = counter.params("TransactWriteItems")
    assert all(":now" not in str(item) for item in params["TransactItems"])


def test_reserve__meta_option_must_be_a_bool() -> None:
    """Meta.unique_reservations other than True or False is refused when the class is defined."""
    with pytest.raises(UniqueConfigError, match="unique_reservations"):

        class Bad(UniqueMixin, Model):
            class Meta:
                table_name = "bad"
                unique_reservations = "yes"

            pk = UnicodeAttribute(hash_key=True)
            email = UniqueAttribute(UnicodeAttribute())


def test_reservation__is_frozen(signups: type[Signup]) -> None:
    """A Reservation is a frozen, hashable value object."""
    reservation = signups.reserve(username="ada")
    assert isinstance(reservation, Reservation)
    assert {reservation, dataclasses.replace(reservation)} == {reservation}
    with pytest.raises(dataclasses.FrozenInstanceError):
        reservation.held_until = datetime.now(UTC)  # type: ignore[misc]
    assert reservation.held_until.timestamp() > time.time()
