"""Explain and inspect: the exact request a write would send, and one value's lock."""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from pynamodb.expressions.condition import Condition
from pynamodb.expressions.update import Action

from .._core.constraint import Constraint
from .._core.lockitem import OwnerKey, lock_owner, lock_owner_model, lock_reservation
from .._core.plan import RecordOp, Stored
from .._model import records, snapshot
from .._model.context import ModelContext, context_of
from .._model.seam import connection
from .._write.engine import Intent, intent_plan, plain_update_request, plan_once
from .._write.requests import build_request
from .._write.send import check_token, request_clock
from ..exceptions import InvalidUniqueValue
from .collect import RecordKey, jsonable, show_key, unique_planner

if TYPE_CHECKING:
    from .._mixin import UniqueMixin

ExplainOp = Literal["save", "update", "delete"]


def _bytes_as_base64(value: object) -> str:
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(bytes(value)).decode("ascii")
    msg = f"{type(value).__name__} is not JSON serializable"
    raise TypeError(msg)


@dataclass(frozen=True)
class Explanation:
    """The request one write of a unique model would send.

    Attributes:
        operation: ``TransactWriteItems``, ``PutItem``, ``UpdateItem`` or ``DeleteItem``.
        request: the operation's parameters as DynamoDB JSON, as PynamoDB would send them
            (``TransactItems`` in the order sent: deletes, puts, updates).
    """

    operation: str
    request: dict[str, Any]

    def to_json(self) -> str:
        """The request as indented JSON, binary values in base64, ready for an SDK call."""
        return json.dumps(self.request, indent=2, default=_bytes_as_base64)


def explain(
    instance: UniqueMixin,
    op: ExplainOp,
    *,
    stored: Mapping[str, Any] | None = None,
    actions: Sequence[Action] | None = None,
    condition: Condition | None = None,
    add_version_condition: bool = True,
    client_request_token: str | None = None,
) -> Explanation:
    """The request ``instance.save()``, ``.update(actions)`` or ``.delete()`` would send first.

    Nothing is read or written. What the record holds decides which locks move: give it as
    ``stored`` (Python attribute names to values); otherwise the instance's own knowledge is
    used, as the write itself would (a loaded instance knows; a new one is assumed absent for
    ``save`` and to hold its own values for ``update`` and ``delete``).

    Args:
        instance: the record to write.
        op: ``save``, ``update`` or ``delete``.
        stored: the stored record's values, for a write whose plan depends on them.
        actions: the update actions, for ``update``.
        condition: the caller's condition, as given to the write.
        add_version_condition: PynamoDB's optimistic-locking switch, as given to the write.
        client_request_token: included in a TransactWriteItems request when given.

    Raises:
        UniqueConfigError: the instance's model has no unique constraints.
        InvalidUniqueValue: a value, an action or the token would be refused by the write.
        ValueError: an unknown ``op``, or ``update`` without actions.
    """
    if op not in ("save", "update", "delete"):
        msg = f"op must be 'save', 'update' or 'delete', got {op!r}"
        raise ValueError(msg)
    model = type(instance)
    planner = unique_planner(model)
    context = context_of(model)
    assert context is not None  # noqa: S101 - a model with a planner has a context.
    token = check_token(client_request_token)
    context.check_key(instance)
    known = snapshot.known(context, instance)
    if stored is not None:
        known = Stored(exists=True, values=planner.as_loaded(stored))
    if op == "update" and not actions:
        msg = "explaining an update needs its actions"
        raise ValueError(msg)
    # The write's own first plan: the same intent and planner as save(), update() and delete().
    record_op: RecordOp = "put" if op == "save" else op
    intent = Intent(record_op, condition, list(actions) if actions else None, add_version_condition, token)
    assumed, desire = intent_plan(context, instance, record_op, actions, known)
    if desire is None:
        request = plain_update_request(context, instance, intent)
    else:
        plan, _ = plan_once(context, record_op, assumed, desire)
        locks = context.locks()
        request = build_request(
            context,
            instance,
            plan,
            condition,
            intent.actions,
            add_version_condition=add_version_condition,
            locks=locks,
            # The clock a write with the same token would use (expiring locks carry the time).
            now=request_clock(token, keep=False) if locks.expiring else None,
        )
    if not request.transactional:
        return Explanation(request.operation, dict(request.items[0]))
    body: dict[str, Any] = {"TransactItems": request.items}
    if token is not None:
        body["ClientRequestToken"] = token
    return Explanation(request.operation, body)


@dataclass(frozen=True)
class LockInfo:
    """One value's lock, read with strongly consistent reads.

    Attributes:
        constraint: the constraint's name.
        values: the values looked up, as given.
        lock_key: their lock key; None when a part is None (such values take no lock, unless the
            constraint is ``nulls_distinct=False``).
        lock_table: the table holding the lock.
        exists: whether the lock item exists.
        owner: the record key the lock names, serialized; None without one.
        owner_holds: whether that record holds the value now (False: an orphaned lock, or a
            release hold); None without an owner.
        expires: when the lock expires (its record's expiry, or a hold's end); None: never.
        held: whether the lock is a release hold (``hold=``): the value stays reserved for its
            former owner until ``expires``.
        expired: whether ``expires`` has passed: any record may take the value now.
        reserved: whether the lock is a reservation (``Model.reserve()``): it names no owner
            record, and holds the value until ``expires`` for whoever has its token.
        reserved_by: the model class name that reserved the value, for a reservation.
        former: whether ``lock_key`` is the constraint's former form's (during a migration, a
            value held only under its former form).
    """

    constraint: str
    values: tuple[Any, ...]
    lock_key: str | None
    lock_table: str
    exists: bool
    owner: RecordKey | None
    owner_holds: bool | None
    expires: datetime | None = None
    held: bool = False
    expired: bool = False
    reserved: bool = False
    reserved_by: str | None = None
    former: bool = False

    def describe(self) -> str:
        """Lines for a person."""
        lines = [f"constraint: {self.constraint}", f"values:     {self.values!r}"]
        if self.lock_key is None:
            return "\n".join([*lines, "lock:       none (a part is None: such values take no lock)"])
        form = " (the former form: a migration)" if self.former else ""
        lines += [f"lock key:   {self.lock_key}{form}", f"lock table: {self.lock_table}"]
        if not self.exists:
            return "\n".join([*lines, "lock:       free (no lock item)"])
        if self.expired and self.expires is not None:
            when = self.expires.isoformat()
            return "\n".join([*lines, f"lock:       expired at {when}: any record may take the value"])
        if self.reserved and self.expires is not None:
            state = f"reserved by {self.reserved_by} until {self.expires.isoformat()} (a reservation: no record yet)"
            return "\n".join([*lines, f"lock:       {state}"])
        if self.owner is None:
            return "\n".join([*lines, "owner:      none (the lock item names no owner)"])
        if self.held and self.expires is not None:
            state = f"a release hold until {self.expires.isoformat()}: only this record may take the value back"
        elif self.owner_holds:
            state = "holds the value"
        else:
            state = "does NOT hold the value: an orphaned lock"
        lines.append(f"owner:      {show_key(self.owner)} ({state})")
        if self.expires is not None and not self.held:
            lines.append(f"expires:    {self.expires.isoformat()} (with its record)")
        return "\n".join(lines)

    @property
    def healthy(self) -> bool:
        """Whether nothing is wrong: free; its owner's plain lock; a reservation; a hold or ended lock its owner lost.

        A live record's lock that is a hold or has expired is stale (audit: ``StaleLock``).
        """
        if not self.exists:
            return True
        if self.expired or self.held or self.reserved:
            return not self.owner_holds
        return bool(self.owner_holds)

    def to_json(self) -> dict[str, Any]:
        """The lock as plain JSON types."""
        return {
            "constraint": self.constraint,
            "values": jsonable(self.values),
            "lock_key": self.lock_key,
            "lock_table": self.lock_table,
            "exists": self.exists,
            "owner": None if self.owner is None else jsonable(self.owner),
            "owner_holds": self.owner_holds,
            "expires": None if self.expires is None else self.expires.isoformat(),
            "held": self.held,
            "expired": self.expired,
            "reserved": self.reserved,
            "reserved_by": self.reserved_by,
            "former": self.former,
        }


@dataclass(frozen=True)
class ValueLock:
    """One value's lock, as ``unique_owner()`` and :func:`inspect` look it up.

    Attributes:
        context: the model's context.
        constraint: the constraint whose attributes were given.
        key: the lock key holding the value: the former form's when only its lock holds it (a
            migration), else the current form's; None when the values take no lock.
        item: the lock item stored under ``key``, or None.
        former: whether ``key`` is the former form's.
        holder: the record key a live lock names (serialized); None when free or expired.
    """

    context: ModelContext
    constraint: Constraint
    key: str | None
    item: dict[str, Any] | None
    former: bool = False
    holder: OwnerKey | None = None


def value_lock(model: type[UniqueMixin], values: Mapping[str, Any]) -> ValueLock:
    """Read the lock of one constraint's values: its current form, then its former form while one is declared.

    Values are normalized as on write; None is stored as no attribute, which loads as the
    attribute's fixed default. A partial constraint's condition is not applied. Strongly
    consistent GetItems: the former form's is sent only when the current form's lock holds the
    value for no one (absent or expired).

    Args:
        model: a unique model.
        values: the Python attribute names of one constraint, all its parts, and their values.

    Raises:
        InvalidUniqueValue: the names match no constraint, or a value cannot be keyed.
    """
    context = context_of(model)
    names = set(values)
    constraint = context.planner.covering(names) if context is not None else None
    if context is None or constraint is None:
        known = (
            "; ".join(f"{c.name}: {', '.join(c.attributes)}" for c in context.planner.constraints) if context else ""
        )
        msg = f"{model.__name__}: no unique constraint covers exactly {', '.join(sorted(names))} ({known})"
        raise InvalidUniqueValue(msg)
    loaded = context.planner.as_loaded(values)
    current = constraint.key_of(loaded)
    former = constraint.former.key_of(loaded) if constraint.former is not None else None
    locks = context.locks()
    first: ValueLock | None = None
    for key, is_former in ((current, False), (former, True)):
        if key is None or (is_former and key == current):
            continue
        item = locks.connection.get_item(key, range_key=locks.range_value, consistent_read=True).get("Item")
        # An expired lock (its record expired, or its hold ended) holds the value for no one.
        holder = None if locks.expired(item) else lock_owner(item)
        found = ValueLock(context, constraint, key, item, is_former, holder)
        if holder is not None:
            return found
        first = first or found
    return first or ValueLock(context, constraint, current, None)


def inspect(model: type[UniqueMixin], **values: Any) -> LockInfo:
    """Show one value's lock: ``inspect(Account, email="ada@lovelace.io")``.

    Keyword arguments are the Python attribute names of one constraint, all its parts; values
    are normalized as on write. Reads the lock item, then its owner record, both strongly
    consistent.

    Raises:
        UniqueConfigError: ``model`` has no unique constraints.
        InvalidUniqueValue: the names match no constraint, or a value cannot be keyed.
    """
    unique_planner(model)
    found = value_lock(model, values)
    context, constraint, key, item = found.context, found.constraint, found.key, found.item
    parts = constraint.values(values)
    locks = context.locks()
    if key is None:
        return LockInfo(constraint.name, parts, None, locks.table_name, exists=False, owner=None, owner_holds=None)
    owner = lock_owner(item)
    holds: bool | None = None
    if owner is not None:
        holds = False
        table = connection(model)
        meta = table.get_meta_table()
        if len(owner) == (2 if meta.range_keyname else 1):
            record = records.read_item(context, owner)
            if record is not None:
                held = context.planner.locks(context.item_view(record).values).get(key)
                holds = held is not None and held[0] is constraint
    expiry = locks.expiry(item)
    expires = None if expiry is None else datetime.fromtimestamp(expiry, tz=UTC)
    reserved = lock_reservation(item) is not None
    return LockInfo(
        constraint.name,
        parts,
        key,
        locks.table_name,
        item is not None,
        owner,
        holds,
        expires=expires,
        held=locks.held_until(item) is not None and not reserved,
        expired=locks.expired(item),
        reserved=reserved,
        reserved_by=lock_owner_model(item) if reserved else None,
        former=found.former,
    )
