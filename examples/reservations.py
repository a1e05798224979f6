"""A two-step signup with reservations: pick a username now, create the account after the email is confirmed.

Runs against an embedded moto backend (no AWS account needed), or against a real
DynamoDB-compatible server with ``--endpoint http://127.0.0.1:8000``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta

from pynamodb.attributes import UnicodeAttribute
from pynamodb.models import Model

from pynamodb_unique import ReservationLost, UniqueAttribute, UniqueMixin, UniqueViolation


class Account(UniqueMixin, Model):
    """An account whose username may be held for a while before the account exists."""

    class Meta:
        table_name = "accounts-reserved"
        region = "us-east-1"
        unique_reservations = True

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    sk = UnicodeAttribute(range_key=True, attr_name="SK", default="PROFILE")
    username = UniqueAttribute(UnicodeAttribute(), normalize=str.casefold)
    email = UnicodeAttribute()


def story() -> None:
    """Reserve, refuse others, claim, release, and an ended reservation taken by someone else."""
    print("1. Ada picks the username 'Ada': held for 15 minutes while she confirms her email")
    ada = Account.reserve(ttl=timedelta(minutes=15), username="Ada")
    print(f"  reserved until {ada.held_until:%H:%M:%S} UTC")
    print("2. Someone else wants 'ada' meanwhile")
    try:
        Account(pk="ACCT#2", username="ada", email="eve@x.io").save()
    except UniqueViolation as exc:
        print(f"  refused: {exc}")
    print("3. Ada confirms her email: the account is created and claims the reservation, in one transaction")
    Account(pk="ACCT#1", username="Ada", email="ada@lovelace.io").save(reservations=[ada])
    print(f"  signed up ACCT#1; 'ada' now belongs to {Account.unique_owner(username='ada')}")
    print("4. Bob reserves 'bob', then gives up: released at once")
    bob = Account.reserve(username="bob")
    print(f"  released: {bob.release()}")
    print("5. Carl reserves 'carl' for one second and is too slow: after the end, anyone takes it")
    carl = Account.reserve(ttl=timedelta(seconds=1), username="carl")
    time.sleep(2.1)
    Account(pk="ACCT#3", username="carl", email="other@x.io").save()
    try:
        Account(pk="ACCT#4", username="carl", email="carl@x.io").save(reservations=[carl])
    except ReservationLost as exc:
        print(f"  refused: {exc}")


@contextlib.contextmanager
def backend(endpoint: str | None) -> Iterator[None]:
    """Moto in-process by default; a real server when an endpoint is given."""
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "example")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "example")
    if endpoint is not None:
        Account.Meta.host = endpoint
        yield
        return
    from moto import mock_aws  # noqa: PLC0415 - only needed without a server.

    with mock_aws():
        yield


def main(argv: list[str] | None = None) -> None:
    """Run the story."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--endpoint", help="URL of a DynamoDB-compatible server (default: embedded moto)")
    args = parser.parse_args(argv)
    with backend(args.endpoint):
        if args.endpoint is not None:
            Account.Meta.table_name = f"accounts-reserved-{uuid.uuid4().hex[:8]}"
        if not Account.exists():
            Account.create_table(billing_mode="PAY_PER_REQUEST", wait=True)
        story()
        if args.endpoint is not None:
            Account.delete_table()


if __name__ == "__main__":
    main()
