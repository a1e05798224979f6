"""Helpers of the reservation tests: a model taking reservations, and time made to pass.

Time passing is simulated by writing an end in the past into a stored reservation, as DynamoDB's
clock would reach it; TTL's deletion itself lags and is never relied upon.
"""

from __future__ import annotations

import time
from typing import Any

from _expiry import client, lock_item_key, locks, set_expiry
from pynamodb.attributes import UnicodeAttribute
from pynamodb.models import Model

from pynamodb_unique import Reservation, UniqueAttribute, UniqueConstraint, UniqueMixin
from pynamodb_unique._core.constraint import LOCK_EXPIRES

__all__ = ["Signup", "client", "end", "lock_item_key", "locks"]


class Signup(UniqueMixin, Model):
    """An account whose username and (tenant, slug) may be reserved before it is created."""

    class Meta:
        table_name = "reservation-signups"
        region = "us-east-1"
        unique_reservations = True
        unique_constraints = [UniqueConstraint("tenant", "slug", name="TENANT_SLUG")]

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    sk = UnicodeAttribute(range_key=True, attr_name="SK", default="PROFILE")
    username = UniqueAttribute(UnicodeAttribute(null=True), normalize=str.casefold)
    tenant = UnicodeAttribute(null=True)
    slug = UnicodeAttribute(null=True)


def end(model: type[Any], reservation: Reservation, seconds_ago: int = 60) -> None:
    """Make a reservation's locks end ``seconds_ago``, as the passing of time would."""
    for key in reservation.lock_keys:
        set_expiry(model, lock_item_key(key), LOCK_EXPIRES, int(time.time()) - seconds_ago)
