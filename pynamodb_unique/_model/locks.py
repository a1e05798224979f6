"""Where a model's lock items live, and what a lock item holds."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cached_property
from typing import TYPE_CHECKING, Any, Final

from pynamodb.attributes import TTLAttribute
from pynamodb.connection import TableConnection
from pynamodb.constants import ATTR_DEFINITIONS, ATTR_NAME, ATTR_TYPE, KEY_SCHEMA, KEY_TYPE, TABLE_NAME

from .._core.constraint import CONSTRAINT, HELD, LOCK_EXPIRES, OWNER_HASH, OWNER_MODEL, OWNER_RANGE, RESERVATION
from .._core.keys import LOCK_RANGE_KEY
from ..exceptions import UniqueConfigError
from .registry import lock_sharers, planner_of, separate_lock_table
from .seam import connection as model_connection
from .seam import lock_table_schema

if TYPE_CHECKING:
    from pynamodb.models import Model

#: Key attribute names of a separate lock table (``Meta.unique_lock_table``).
LOCK_TABLE_HASH: Final = "PK"
LOCK_TABLE_RANGE: Final = "SK"


@dataclass(frozen=True)
class LockTable:
    """The table holding a model's locks and the names of its key attributes.

    Attributes:
        connection: PynamoDB's connection to that table.
        hash_name: the lock key's attribute name.
        range_name: the sort key's attribute name, or None when the table has none.
        shared: whether the locks share the model's own table.
        expires_name: the attribute holding a lock's expiry (epoch seconds, DynamoDB's TTL
            format): in a shared table ``Meta.unique_ttl_attribute``, else the record's own TTL
            attribute, else ``uniq_expires``; ``uniq_expires`` in a separate lock table.
        expiring: whether the model's locks may expire (it has a ``TTLAttribute`` or a
            constraint with ``hold=``): its lock puts then also take a lock whose expiry passed.
    """

    connection: TableConnection
    hash_name: str
    range_name: str | None
    shared: bool
    expires_name: str = LOCK_EXPIRES
    expiring: bool = False

    @property
    def table_name(self) -> str:
        """The table's name."""
        return self.connection.table_name

    @property
    def range_value(self) -> str | None:
        """The sort key value of every lock item (``LOCK``), or None without a sort key."""
        return LOCK_RANGE_KEY if self.range_name is not None else None

    def key(self, lock_key: str) -> dict[str, dict[str, str]]:
        """The DynamoDB key of the lock item for ``lock_key``."""
        return self.codec.key(lock_key)

    def key_text(self, item: Mapping[str, Any] | None) -> str | None:
        """The text a stored item of this table is keyed by (a lock's lock key); None without a text hash key."""
        value = (item or {}).get(self.hash_name, {}).get("S")
        return value if isinstance(value, str) else None

    @cached_property
    def codec(self) -> LockCodec:
        """The lock item's requests in this table."""
        return LockCodec(self.table_name, self.hash_name, self.range_name, self.expires_name, expiring=self.expiring)

    def expiry(self, item: Mapping[str, Any] | None) -> int | None:
        """A stored lock item's expiry in epoch seconds (None: it does not expire)."""
        return lock_expiry(item, self.expires_name)

    def expired(self, item: Mapping[str, Any] | None, now: float | None = None) -> bool:
        """Whether a stored lock item's expiry has passed: any record may take its value."""
        expiry = self.expiry(item)
        return expiry is not None and expiry < (time.time() if now is None else now)

    def held_until(self, item: Mapping[str, Any] | None) -> datetime | None:
        """When a stored lock item is a release hold or a reservation, the time it ends; else None."""
        if not item or (HELD not in item and RESERVATION not in item):
            return None
        expiry = self.expiry(item)
        return None if expiry is None else datetime.fromtimestamp(expiry, tz=UTC)


def _owned_text(fields: int, first: int) -> str:
    parts = [f"#{i + 1} = :{first + i}" for i in range(fields)]
    return parts[0] if len(parts) == 1 else f"({' AND '.join(parts)})"


# The owner comparison for 1 or 2 owner fields, values numbered from 0 or after another owner's.
_OWNED: Final = {(n, first): _owned_text(n, first) for n in (1, 2) for first in (0, 1, 2)}

#: The placeholders of the owners' fields, in order: an owner has one or two, and a transfer names two owners.
_VALUE_NAMES: Final = (":0", ":1", ":2", ":3")

#: ``LockCodec.put_if``'s expectation that no lock exists.
ABSENT: Final = object()


class LockCodec:
    """The lock item's requests as ready DynamoDB JSON, for one lock table.

    The expressions are fixed per lock table and owner-key shape, so they are built once; a call
    only fills in the lock key and the owner's values. The result equals what PynamoDB's
    ``get_operation_kwargs`` builds from the same conditions (a unit test compares them).
    """

    def __init__(
        self,
        table_name: str,
        hash_name: str,
        range_name: str | None,
        expires_name: str = LOCK_EXPIRES,
        *,
        expiring: bool = False,
    ) -> None:
        self.table_name = table_name
        self.hash_name = hash_name
        self.range_name = range_name
        self.expires_name = expires_name
        self.expiring = expiring
        # Per owner-key shape (1 or 2 fields), built once: the names, and "free or owned".
        self._owner_names = {
            1: {"#0": hash_name, "#1": OWNER_HASH},
            2: {"#0": hash_name, "#1": OWNER_HASH, "#2": OWNER_RANGE},
        }
        self._free_or_owned = {n: f"(attribute_not_exists (#0) OR {_OWNED[n, 0]})" for n in (1, 2)}

    def key(self, lock_key: str) -> dict[str, dict[str, str]]:
        """The DynamoDB key of the lock item for ``lock_key``."""
        if self.range_name is None:
            return {self.hash_name: {"S": lock_key}}
        return {self.hash_name: {"S": lock_key}, self.range_name: {"S": LOCK_RANGE_KEY}}

    def _names(self, owner: Mapping[str, Any]) -> dict[str, str]:
        return dict(self._owner_names[len(owner)])

    @staticmethod
    def _owned(owner: Mapping[str, Any], first: int) -> str:
        """``owner_hash = :a AND owner_range = :b``, its values numbered from ``first``."""
        return _OWNED[len(owner), first]

    @staticmethod
    def _values(owner: Mapping[str, Any], previous: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The owner's fields, then ``previous``'s, as the values ``:0``, ``:1``..., in order."""
        fields = owner.values() if previous is None else [*owner.values(), *previous.values()]
        return dict(zip(_VALUE_NAMES[: len(fields)], fields, strict=True))

    def _lock_item(
        self,
        lock_key: str,
        owner: Mapping[str, Any],
        constraint: str,
        model: str,
        expires: Mapping[str, Any] | None,
    ) -> dict[str, Any]:
        """A record's lock item: its key, its owner fields and names, and the record's expiry, if any."""
        item = {**self.key(lock_key), **owner, CONSTRAINT: {"S": constraint}, OWNER_MODEL: {"S": model}}
        if expires is not None:
            item[self.expires_name] = dict(expires)
        return item

    def put(
        self,
        lock_key: str,
        owner: Mapping[str, Any],
        constraint: str,
        model: str,
        previous: Mapping[str, Any] | None = None,
        *,
        expires: Mapping[str, Any] | None = None,
        now: int | None = None,
    ) -> dict[str, Any]:
        """Put: take the value when the lock is free or already ``owner``'s (or ``previous``'s: a transfer).

        When the model's locks may expire, a lock whose expiry is before ``now`` is free too: its
        record expired (DynamoDB's TTL deletes it days later at most) or its hold ended.

        Args:
            lock_key: the value's lock key.
            owner: the owner fields (``uniq_owner_hash``, ``uniq_owner_range``), typed.
            constraint: the constraint's name.
            model: the owner record's model class name.
            previous: the owner fields of a record releasing the value in the same transaction.
            expires: the record's expiry (``{"N": epoch seconds}``), which the lock carries.
            now: the current time in epoch seconds (default: the clock's), for expired locks.
        """
        condition = self._free_or_owned[len(owner)]
        if previous is not None:
            condition = f"({condition} OR {self._owned(previous, len(owner))})"
        item = self._lock_item(lock_key, owner, constraint, model, expires)
        names = self._names(owner)
        values = self._values(owner, previous)
        if self.expiring:
            condition = f"({condition} OR #exp < :now)"
            names["#exp"] = self.expires_name
            values[":now"] = {"N": str(int(time.time()) if now is None else now)}
        return {
            "TableName": self.table_name,
            "Item": item,
            "ConditionExpression": condition,
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
        }

    def claim(
        self,
        lock_key: str,
        owner: Mapping[str, Any],
        constraint: str,
        model: str,
        token: str,
        *,
        expires: Mapping[str, Any] | None = None,
        now: int | None = None,
    ) -> dict[str, Any]:
        """Put: claim a reservation, making its lock ``owner``'s plain lock (the item :meth:`put` writes).

        Conditioned on the lock being the live reservation ``token`` (its end not before ``now``),
        or already ``owner``'s (a resent claim): a stranger's token, an ended, released or claimed
        reservation fails.
        """
        item = self._lock_item(lock_key, owner, constraint, model, expires)
        names = {**self._names(owner), "#res": RESERVATION, "#exp": self.expires_name}
        del names["#0"]  # The lock key's name: unused here, and DynamoDB refuses unused names.
        values = self._values(owner)
        values[":tok"] = {"S": token}
        values[":now"] = {"N": str(int(time.time()) if now is None else now)}
        return {
            "TableName": self.table_name,
            "Item": item,
            "ConditionExpression": f"((#res = :tok AND :now <= #exp) OR {self._owned(owner, 0)})",
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
        }

    def reserve(self, lock_key: str, token: str, constraint: str, model: str, until: int, now: int) -> dict[str, Any]:
        """Put: a reservation's lock, held by ``token`` until ``until`` (epoch seconds), when the value is free.

        Free: no lock, or an expired one (a reservation or hold that ended, an expired record's);
        or already this reservation's (a resent request). The lock names no owner record;
        ``uniq_owner_model`` says which model reserved it.
        """
        return {
            "TableName": self.table_name,
            "Item": {
                **self.key(lock_key),
                CONSTRAINT: {"S": constraint},
                OWNER_MODEL: {"S": model},
                RESERVATION: {"S": token},
                self.expires_name: {"N": str(until)},
            },
            "ConditionExpression": "(attribute_not_exists (#0) OR #exp < :now OR #res = :tok)",
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            "ExpressionAttributeNames": {"#0": self.hash_name, "#exp": self.expires_name, "#res": RESERVATION},
            "ExpressionAttributeValues": {":now": {"N": str(now)}, ":tok": {"S": token}},
        }

    def unreserve(self, lock_key: str, token: str, *, ended_before: int | None = None) -> dict[str, Any]:
        """Delete: a reservation's lock, when it is still reservation ``token`` (and ended before ``ended_before``)."""
        kwargs: dict[str, Any] = {
            "TableName": self.table_name,
            "Key": self.key(lock_key),
            "ConditionExpression": "#res = :tok",
            "ExpressionAttributeNames": {"#res": RESERVATION},
            "ExpressionAttributeValues": {":tok": {"S": token}},
        }
        if ended_before is not None:
            kwargs["ConditionExpression"] = "(#res = :tok AND #exp < :now)"
            kwargs["ExpressionAttributeNames"]["#exp"] = self.expires_name
            kwargs["ExpressionAttributeValues"][":now"] = {"N": str(ended_before)}
        return kwargs

    def _hold_item(
        self, lock_key: str, owner: Mapping[str, Any], constraint: str, model: str, until: int
    ) -> dict[str, Any]:
        return {
            **self.key(lock_key),
            **owner,
            CONSTRAINT: {"S": constraint},
            OWNER_MODEL: {"S": model},
            HELD: {"BOOL": True},
            self.expires_name: {"N": str(until)},
        }

    def hold(self, lock_key: str, owner: Mapping[str, Any], constraint: str, model: str, until: int) -> dict[str, Any]:
        """Put: turn ``owner``'s lock into a release hold ending at ``until`` (epoch seconds).

        The hold stays ``owner``'s, so only that record may take the value back before it ends; it
        carries the expiry attribute, so DynamoDB's TTL removes it afterwards. Its condition is a
        release's: the lock is ``owner``'s, or already gone (a resent request).
        """
        return {
            "TableName": self.table_name,
            "Item": self._hold_item(lock_key, owner, constraint, model, until),
            "ConditionExpression": self._free_or_owned[len(owner)],
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            "ExpressionAttributeNames": self._names(owner),
            "ExpressionAttributeValues": self._values(owner),
        }

    def hold_if(
        self, lock_key: str, owner: Mapping[str, Any], constraint: str, model: str, until: int
    ) -> dict[str, Any]:
        """Put (Streams, repair): turn the lock into ``owner``'s hold when it names exactly ``owner``."""
        item = self._hold_item(lock_key, owner, constraint, model, until)
        return {"TableName": self.table_name, "Item": item, **self._expect(owner)}

    def release(self, lock_key: str, owner: Mapping[str, Any]) -> dict[str, Any]:
        """Delete: give the value back when the lock is ``owner``'s (or already gone)."""
        return {
            "TableName": self.table_name,
            "Key": self.key(lock_key),
            "ConditionExpression": self._free_or_owned[len(owner)],
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            "ExpressionAttributeNames": self._names(owner),
            "ExpressionAttributeValues": self._values(owner),
        }

    def _expect(self, expected: Mapping[str, Any] | object | None) -> dict[str, Any]:
        """Condition parts: the lock is absent (``ABSENT``), names no owner (None), or names exactly ``expected``.

        When locks may expire, an expired lock counts as absent: any record may take it.
        """
        if expected is ABSENT:
            if self.expiring:
                return {
                    "ConditionExpression": "(attribute_not_exists (#0) OR #exp < :now)",
                    "ExpressionAttributeNames": {"#0": self.hash_name, "#exp": self.expires_name},
                    "ExpressionAttributeValues": {":now": {"N": str(int(time.time()))}},
                }
            return {
                "ConditionExpression": "attribute_not_exists (#0)",
                "ExpressionAttributeNames": {"#0": self.hash_name},
            }
        if expected is None:
            return {
                "ConditionExpression": "(attribute_exists (#0) AND attribute_not_exists (#1))",
                "ExpressionAttributeNames": {"#0": self.hash_name, "#1": OWNER_HASH},
            }
        assert isinstance(expected, Mapping)  # noqa: S101 - the three cases above.
        second = "#1 = :1" if OWNER_RANGE in expected else "attribute_not_exists (#1)"
        return {
            "ConditionExpression": f"(#0 = :0 AND {second})",
            "ExpressionAttributeNames": {"#0": OWNER_HASH, "#1": OWNER_RANGE},
            "ExpressionAttributeValues": self._values(expected),
        }

    def put_if(
        self,
        lock_key: str,
        owner: Mapping[str, Any],
        constraint: str,
        model: str,
        expected: Mapping[str, Any] | object | None,
        expires: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Put (repair): give the lock to ``owner`` when it is absent (``ABSENT``) or names exactly ``expected``.

        ``expires``: the record's expiry, which the lock carries.
        """
        item = self._lock_item(lock_key, owner, constraint, model, expires)
        return {"TableName": self.table_name, "Item": item, **self._expect(expected)}

    def delete_if(self, lock_key: str, expected: Mapping[str, Any] | None) -> dict[str, Any]:
        """Delete (repair): remove the lock when it names exactly ``expected`` (None: no owner)."""
        return {"TableName": self.table_name, "Key": self.key(lock_key), **self._expect(expected)}

    def not_ours(self, lock_key: str, owner: Mapping[str, Any]) -> dict[str, Any]:
        """ConditionCheck: the lock is still not ``owner``'s."""
        return {
            "TableName": self.table_name,
            "Key": self.key(lock_key),
            "ConditionExpression": f"(attribute_not_exists (#0) OR (NOT {self._owned(owner, 0)}))",
            "ExpressionAttributeNames": self._names(owner),
            "ExpressionAttributeValues": self._values(owner),
        }


def _separate_table(model: type[Model], table_name: str) -> TableConnection:
    meta = model.Meta
    schema = lock_table_schema(
        {
            TABLE_NAME: table_name,
            KEY_SCHEMA: [
                {ATTR_NAME: LOCK_TABLE_HASH, KEY_TYPE: "HASH"},
                {ATTR_NAME: LOCK_TABLE_RANGE, KEY_TYPE: "RANGE"},
            ],
            ATTR_DEFINITIONS: [
                {ATTR_NAME: LOCK_TABLE_HASH, ATTR_TYPE: "S"},
                {ATTR_NAME: LOCK_TABLE_RANGE, ATTR_TYPE: "S"},
            ],
        }
    )
    return TableConnection(
        table_name,
        region=meta.region,
        host=meta.host,
        connect_timeout_seconds=meta.connect_timeout_seconds,
        read_timeout_seconds=meta.read_timeout_seconds,
        max_retry_attempts=meta.max_retry_attempts,
        max_pool_connections=meta.max_pool_connections,
        extra_headers=meta.extra_headers,
        aws_access_key_id=meta.aws_access_key_id,
        aws_secret_access_key=meta.aws_secret_access_key,
        aws_session_token=meta.aws_session_token,
        meta_table=schema,
    )


def ttl_attribute(model: type[Model]) -> str | None:
    """The stored name of ``model``'s ``TTLAttribute``, or None without one."""
    return next((a.attr_name for a in model.get_attributes().values() if isinstance(a, TTLAttribute)), None)


def lock_table(model: type[Model]) -> LockTable:
    """Where ``model``'s locks live: ``Meta.unique_lock_table``, or the model's own table.

    How its locks expire is settled across every model keeping locks in that table
    (:func:`lock_expiry_settings`), as their namespaces may be shared.

    Raises:
        UniqueConfigError: models sharing the lock table expire under different attributes.
    """
    separate = separate_lock_table(model)
    expires_name, expiring = lock_expiry_settings(model, shared=not separate)
    if separate:
        connection = _separate_table(model, separate)
        return LockTable(connection, LOCK_TABLE_HASH, LOCK_TABLE_RANGE, shared=False, expiring=expiring)
    connection = model_connection(model)
    meta_table = connection.get_meta_table()
    return LockTable(
        connection,
        meta_table.hash_keyname,
        meta_table.range_keyname,
        shared=True,
        expires_name=expires_name,
        expiring=expiring,
    )


def lock_expiry_settings(model: type[Model], *, shared: bool) -> tuple[str, bool]:
    """(the lock expiry attribute, whether locks may expire) of ``model``'s lock table.

    Locks may expire when any model keeping locks there has a ``TTLAttribute`` or a constraint
    with ``hold=``: then every lock Put there also takes an expired lock. In a shared table the
    expiry attribute is ``Meta.unique_ttl_attribute``, else the models' ``TTLAttribute`` (so
    DynamoDB's TTL deletes locks with their records), else ``uniq_expires``; a separate lock table
    always uses ``uniq_expires``.

    Raises:
        UniqueConfigError: the models sharing the table name different expiry attributes.
    """
    sharers = lock_sharers(model)
    expiring = any(planner.expiring for m in sharers if (planner := planner_of(m)) is not None)
    if not shared:
        return LOCK_EXPIRES, expiring
    explicit = {name for m in sharers if (name := getattr(m.Meta, "unique_ttl_attribute", None))}
    names = explicit or {name for m in sharers if (name := ttl_attribute(m))}
    if len(names) > 1:
        which = ", ".join(sorted(m.__name__ for m in sharers))
        msg = (
            f"{which} keep locks in one table but expire under different attributes {sorted(names)}; a table "
            "has one TTL attribute: set the same Meta.unique_ttl_attribute on each"
        )
        raise UniqueConfigError(msg)
    return (names.pop() if names else LOCK_EXPIRES), expiring


def lock_expiry(item: Mapping[str, Any] | None, expires_name: str) -> int | None:
    """A stored lock item's expiry in epoch seconds, read from ``expires_name`` (None: none)."""
    raw = (item or {}).get(expires_name)
    number = raw.get("N") if isinstance(raw, Mapping) else None
    if number is None:
        return None
    try:
        return int(float(number))
    except ValueError:
        return None


def is_lock_item(image: Mapping[str, Any]) -> bool:
    """Whether a stored item (DynamoDB JSON, e.g. a Streams image) is a lock item of this library.

    Lock items carry their owner (or reservation) and constraint names in attributes no record may
    have (they are refused as attribute names of unique models), so a Streams consumer can skip them.
    """
    return (OWNER_HASH in image or RESERVATION in image) and CONSTRAINT in image


def create_lock_table(
    model: type[Model],
    *,
    wait: bool = False,
    billing_mode: str = "PAY_PER_REQUEST",
    read_capacity_units: int | None = None,
    write_capacity_units: int | None = None,
    tags: dict[str, str] | None = None,
    ttl: bool = True,
) -> None:
    """Create the separate lock table named by ``model.Meta.unique_lock_table``.

    It has string keys ``PK`` (hash) and ``SK`` (range), in the model's region and account, so
    one TransactWriteItems spans it and the model's table. DynamoDB's TTL is enabled on its
    ``uniq_expires`` attribute, so locks of expired records and ended holds are removed.

    Args:
        model: a unique model whose Meta sets ``unique_lock_table``.
        wait: poll until the table is ACTIVE.
        billing_mode: ``PAY_PER_REQUEST`` (default) or ``PROVISIONED``.
        read_capacity_units: for ``PROVISIONED``.
        write_capacity_units: for ``PROVISIONED``.
        tags: table tags.
        ttl: enable TTL on ``uniq_expires`` (it waits for the table to be ACTIVE first, as
            DynamoDB requires).

    Raises:
        UniqueConfigError: the model keeps its locks in its own table.
    """
    if separate_lock_table(model) is None:
        msg = f"{model.__name__} keeps its locks in its own table: set Meta.unique_lock_table first"
        raise UniqueConfigError(msg)
    connection = lock_table(model).connection
    connection.create_table(
        attribute_definitions=[
            {"attribute_name": LOCK_TABLE_HASH, "attribute_type": "S"},
            {"attribute_name": LOCK_TABLE_RANGE, "attribute_type": "S"},
        ],
        key_schema=[
            {"attribute_name": LOCK_TABLE_HASH, "key_type": "HASH"},
            {"attribute_name": LOCK_TABLE_RANGE, "key_type": "RANGE"},
        ],
        billing_mode=billing_mode,
        read_capacity_units=read_capacity_units,
        write_capacity_units=write_capacity_units,
        tags=tags,
    )
    while (wait or ttl) and connection.describe_table().get("TableStatus") != "ACTIVE":
        time.sleep(0.2)
    if ttl:
        connection.update_time_to_live(LOCK_EXPIRES)
