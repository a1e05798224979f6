"""Helpers of the expiry tests: raw reads and writes, time made to pass, stream events, races.

Time passing is simulated by writing an expiry in the past into a stored item, as DynamoDB's
clock would reach it; TTL's deletion itself lags and is never relied upon.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

from _invariant import locks_and_records
from pynamodb.attributes import TTLAttribute, UnicodeAttribute
from pynamodb.models import Model

from pynamodb_unique import UniqueAttribute, UniqueMixin

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
