"""Helpers of the expiry tests: raw reads and writes, time made to pass, audits and repairs, stream events.

Time passing is simulated by writing an expiry in the past into a stored item, as DynamoDB's
clock would reach it; TTL's deletion itself lags and is never relied upon.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from _backends import unique_table_name
from _export import export_tables
from _invariant import locks_and_records
from pynamodb.attributes import DiscriminatorAttribute, TTLAttribute, UnicodeAttribute
from pynamodb.models import Model

from pynamodb_unique import UniqueAttribute, UniqueMixin, audit, backfill, migrate, repair

#: The release hold of :class:`Member`'s email.
HOLD = timedelta(days=30)


class Session(UniqueMixin, Model):
    """A record that expires: its locks carry its expiry."""

    class Meta:
        table_name = "expiry-sessions"
        region = "us-east-1"

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    sk = UnicodeAttribute(range_key=True, attr_name="SK", default="PROFILE")
    email = UniqueAttribute(UnicodeAttribute(null=True))
    note = UnicodeAttribute(null=True)
    expires = TTLAttribute(null=True, attr_name="ttl")


#: A fixed default expiry (a far-future "until further notice") and its epoch.
DEFAULT_EXPIRY = datetime(2100, 1, 1, tzinfo=UTC)
DEFAULT_EPOCH = 4102444800


class DefaultedSession(UniqueMixin, Model):
    """An expiring record whose plain TTLAttribute has a fixed default."""

    class Meta:
        table_name = "expiry-defaulted-sessions"
        region = "us-east-1"

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    sk = UnicodeAttribute(range_key=True, attr_name="SK", default="PROFILE")
    email = UniqueAttribute(UnicodeAttribute(null=True))
    note = UnicodeAttribute(null=True)
    expires = TTLAttribute(default=DEFAULT_EXPIRY, attr_name="ttl")


class Member(UniqueMixin, Model):
    """A released email stays reserved for its former owner for 30 days."""

    class Meta:
        table_name = "expiry-members"
        region = "us-east-1"

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    sk = UnicodeAttribute(range_key=True, attr_name="SK", default="PROFILE")
    email = UniqueAttribute(UnicodeAttribute(null=True), hold=HOLD)
    note = UnicodeAttribute(null=True)


def locks(model: type[Any]) -> dict[str, dict[str, Any]]:
    """Lock items of the model's table, by lock key."""
    return locks_and_records(model)[0]


def client(model: type[Any]) -> Any:
    """The botocore client behind the model."""
    return model._get_connection().connection.client


def set_expiry(model: type[Any], key: dict[str, Any], name: str, epoch: int) -> None:
    """Move a stored item's expiry, as the passing of time would make it due."""
    client(model).update_item(
        TableName=model.Meta.table_name,
        Key=key,
        UpdateExpression="SET #e = :e",
        ExpressionAttributeNames={"#e": name},
        ExpressionAttributeValues={":e": {"N": str(epoch)}},
    )


def lock_item_key(lock_key: str) -> dict[str, Any]:
    """The key of a lock item in a shared table (``PK``/``SK``)."""
    return {"PK": {"S": lock_key}, "SK": {"S": "LOCK"}}


def record_key(pk: str, sk: str = "PROFILE") -> dict[str, Any]:
    """The key of a record in a ``PK``/``SK`` table."""
    return {"PK": {"S": pk}, "SK": {"S": sk}}


def raw(model: type[Any], key: dict[str, Any]) -> dict[str, Any] | None:
    """The item stored under ``key``, read consistently with the raw client."""
    found = client(model).get_item(TableName=model.Meta.table_name, Key=key, ConsistentRead=True)
    item: dict[str, Any] | None = found.get("Item")
    return item


def epoch_in_days(days: int) -> int:
    """A whole second ``days`` from now, in epoch seconds."""
    return int(time.time()) + days * 86400


def put_record(model: type[Any], pk: str, attributes: dict[str, Any], sk: str = "PROFILE") -> dict[str, Any]:
    """A record another writer stores (raw attributes beside its ``PK``/``SK`` key), without its locks: the item."""
    item = {**record_key(pk, sk), **attributes}
    client(model).put_item(TableName=model.Meta.table_name, Item=item)
    return item


def set_attribute(model: type[Any], key: dict[str, Any], name: str, value: dict[str, Any] | None) -> None:
    """Store one attribute of an item behind the library's back (None: remove it)."""
    if value is None:
        client(model).update_item(
            TableName=model.Meta.table_name,
            Key=key,
            UpdateExpression="REMOVE #e",
            ExpressionAttributeNames={"#e": name},
        )
        return
    client(model).update_item(
        TableName=model.Meta.table_name,
        Key=key,
        UpdateExpression="SET #e = :e",
        ExpressionAttributeNames={"#e": name},
        ExpressionAttributeValues={":e": value},
    )


def expired_ttl() -> dict[str, Any]:
    """A stored expiry an hour past: the record is due, though TTL has not deleted it yet."""
    return {"N": str(int(time.time()) - 3600)}


def expire_record(model: type[Any], pk: str, sk: str = "PROFILE") -> None:
    """Another writer (or time) moves the record's ``ttl`` into the past; its lock keeps its own expiry."""
    set_attribute(model, record_key(pk, sk), "ttl", expired_ttl())


def save_expired(model: type[Any], pk: str, email: str) -> int:
    """Save a record expiring in two days, then expire it (its lock keeps the two days): the epoch it was saved with."""
    epoch = epoch_in_days(2)
    record = model(pk=pk, email=email, expires=datetime.fromtimestamp(epoch, tz=UTC))
    record.save()
    expire_record(model, pk, record.sk)
    return epoch


def audited(model: type[Any], *kinds: str, **options: Any) -> Any:
    """A fresh audit of ``model`` (``options`` as ``audit`` takes them) finding problems of ``kinds``, in any order."""
    report = audit(model, **options)
    assert sorted(p.kind for p in report.problems) == sorted(kinds), report.problems
    return report


def repaired(model: type[Any], report: Any, *outcomes: str) -> None:
    """Repair ``report``, applied: its fixes end as ``outcomes``, in order (each fix described when not)."""
    done = repair(model, report, apply=True)
    assert [f.outcome for f in done.fixes] == list(outcomes), [f.describe() for f in done.fixes]


def table_export(model: type[Any], directory: Path) -> Path:
    """An export of the model's one table (locks in it too), written under ``directory``, as ``audit`` reads it."""
    exports = export_tables(client(model), [model.Meta.table_name], directory)
    return next(iter(exports.values()))


def fix_outcomes(model: type[Any], run: str) -> list[str]:
    """The outcome of each fix ``run`` makes: ``backfill``, ``repair`` (of a fresh audit, applied) or ``migrate``."""
    if run == "backfill":
        return [f.outcome for f in backfill(model).fixes]
    if run == "repair":
        return [f.outcome for f in repair(model, audit(model), apply=True).fixes]
    return [f.outcome for f in migrate(model, apply=True).fixes]


def family_base(
    prefix: str, *, host: str | None = None, hold: timedelta | None = None, with_ttl: bool = False
) -> type[Any]:
    """The base of a polymorphic family (``kind``) in a table of its own, named from ``prefix``: a unique email.

    ``hold`` is the email's release hold; ``with_ttl`` gives the base (so every class) the TTLAttribute ``ttl``.
    The caller declares the subclasses, then creates the table.
    """
    table = unique_table_name(prefix)

    class FamilyBase(UniqueMixin, Model):
        class Meta:
            table_name = table
            region = "us-east-1"

        pk = UnicodeAttribute(hash_key=True, attr_name="PK")
        sk = UnicodeAttribute(range_key=True, attr_name="SK", default="PROFILE")
        kind = DiscriminatorAttribute()
        email = UniqueAttribute(UnicodeAttribute(null=True), hold=hold)
        if with_ttl:
            expires = TTLAttribute(null=True, attr_name="ttl")

    FamilyBase.Meta.host = host  # type: ignore[attr-defined]
    return FamilyBase


def account_family(prefix: str, *, host: str | None = None, hold: timedelta | None = None) -> dict[str, Any]:
    """A polymorphic family in a table of its own (named from ``prefix``): only Trial has a TTLAttribute (``ttl``).

    Account (the base, no expiry) and Paid (none either) share the EMAIL namespace with Trial;
    ``hold`` is the email's release hold, declared on the base.
    """
    account = family_base(prefix, host=host, hold=hold)
    paid = type("Paid", (account,), {}, discriminator="paid")
    trial = type("Trial", (account,), {"expires": TTLAttribute(null=True, attr_name="ttl")}, discriminator="trial")
    account.create_table(wait=True, billing_mode="PAY_PER_REQUEST")
    return {"Account": account, "Paid": paid, "Trial": trial}


def in_days(days: int) -> datetime:
    """A whole second ``days`` from now, as a TTLAttribute stores it."""
    return datetime.fromtimestamp(int(time.time()) + days * 86400, tz=UTC)


def stream_record(
    model: type[Any], name: str, old: dict[str, Any] | None, new: dict[str, Any] | None
) -> dict[str, Any]:
    """One stream record in Lambda's format (string-only items here: no base64 to apply)."""
    image = new if new is not None else old
    assert image is not None
    stream: dict[str, Any] = {"Keys": {k: image[k] for k in ("PK", "SK")}, "StreamViewType": "NEW_AND_OLD_IMAGES"}
    if old is not None:
        stream["OldImage"] = old
    if new is not None:
        stream["NewImage"] = new
    arn = f"arn:aws:dynamodb:us-east-1:123456789012:table/{model.Meta.table_name}/stream/2026-12-01T00:00:00.000"
    record = {"eventID": name + str(time.time()), "eventName": name, "eventSource": "aws:dynamodb"}
    return {**record, "dynamodb": stream, "eventSourceARN": arn}
