"""The seed's story: unique emails and usernames for accounts, in one DynamoDB table.

Runs against an embedded moto backend (no AWS account needed), or against a real
DynamoDB-compatible server with ``--endpoint http://127.0.0.1:8000``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import uuid
from collections.abc import Iterator

from pynamodb.attributes import UnicodeAttribute
from pynamodb.models import Model

from pynamodb_unique import UniqueAttribute, UniqueConstraint, UniqueMixin, UniqueViolation


class Account(UniqueMixin, Model):
    """An account: its key is a generated id, never the email, so the email can change."""

    class Meta:
        table_name = "accounts"
        region = "us-east-1"
        unique_constraints = [UniqueConstraint("tenant", "slug", name="TENANT_SLUG")]

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    sk = UnicodeAttribute(range_key=True, attr_name="SK", default="PROFILE")
    email = UniqueAttribute(UnicodeAttribute(), normalize=str.casefold)
    username = UniqueAttribute(UnicodeAttribute(null=True), name="HANDLE")
    tenant = UnicodeAttribute(null=True)
    slug = UnicodeAttribute(null=True)


def signup(email: str, username: str | None = None) -> Account | None:
    """Create an account, or print field-level errors when a value is taken."""
    account = Account(pk=f"ACCT#{uuid.uuid4().hex[:6]}", email=email, username=username)
    try:
        account.save()
    except UniqueViolation as exc:
        for violation in exc.violations:
            owner = "/".join(violation.owner) if violation.owner else "someone"
            print(f"  refused: {violation} (held by {owner})")
        return None
    print(f"  signed up {account.pk}: email={account.email!r} username={account.username!r}")
    return account


def show_locks() -> None:
    """Print the lock items, the plumbing an app never shows."""
    client = Account._get_connection().connection.client  # noqa: SLF001 - raw view of the table.
    items = client.scan(TableName=Account.Meta.table_name)["Items"]
    locks = sorted(i["PK"]["S"] for i in items if i["PK"]["S"].startswith("UNIQ#"))
    print(f"  locks: {locks}")


def story() -> None:
    """Signup, duplicate email, username collision, email change, delete."""
    print("1. Ada signs up")
    ada = signup("ada@lovelace.io", "ada")
    assert ada is not None
    show_locks()
    print("2. Someone signs up with Ada's email, differently cased")
    assert signup("ADA@Lovelace.io", "countess") is None
    print("3. Someone else wants the username 'ada'")
    assert signup("augusta@byron.uk", "ada") is None
    print("4. Ada changes her email: the old one is free again, in the same transaction")
    ada.email = "countess@lovelace.io"
    ada.save()
    show_locks()
    byron = signup("ada@lovelace.io", "byron")
    assert byron is not None
    print("5. Ada deletes her account: her email and username are free")
    ada.delete()
    show_locks()
    assert signup("countess@lovelace.io", "ada") is not None
    show_locks()


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
            Account.Meta.table_name = f"accounts-{uuid.uuid4().hex[:8]}"
        if not Account.exists():
            Account.create_table(billing_mode="PAY_PER_REQUEST", wait=True)
        story()
        if args.endpoint is not None:
            Account.delete_table()


if __name__ == "__main__":
    main()
