"""Keeping locks in step with DynamoDB Streams: ``handle(Model, event)`` in a Lambda function.

Writers that bypass the library (TTL expiry, the console, another service's ``PutItem``) leave
locks behind or records without locks. A Lambda function on the table's stream sees each such
change and makes, for that one record, the fixes :func:`~pynamodb_unique.repair` would make:

- a lock the record no longer holds (its record was removed, or its value changed) is deleted,
  on condition that it still names the record as its owner;
- a lock the record's values call for and that is free is created, owned by the record;
- a lock naming another record that, read consistently, no longer holds the value (its change
  away from it comes from another shard, later) is given to the record, on condition that the
  lock and that record are still as read;
- a value another record's lock holds, and that record still holds, is never taken: it is
  reported in ``left``.

The stream's images only say *which* locks to look at and *whether* to look: the decision is
made from the record and its locks as stored now, read in one strongly consistent BatchGetItem,
and each write is one TransactWriteItems whose ConditionCheck says the record is still as read.
So events arriving late, out of order or twice change nothing that is right, and the library's
own writes (whose locks are already in place) cost one read and no write.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from pynamodb.expressions.condition import Condition
from pynamodb.expressions.operand import Path

from ._core.keys import LOCK_PREFIX
from ._core.lockitem import OwnerKey, is_held, lock_namespace, lock_owner, lock_owner_model, stored_owner_fields
from ._core.plan import MAX_TRANSACTION_ACTIONS, SentGroup
from ._model.context import ModelContext, context_of
from ._model.locks import ABSENT, LockTable, is_lock_item
from ._model.registry import lock_sharers, lock_table_id, namespaces_of, table_id
from ._model.seam import connection, operation_kwargs
from ._ops.collect import Scope
from ._ops.repair import Fixer, _Write
from ._write.send import batch_read

if TYPE_CHECKING:
    from ._mixin import UniqueMixin

__all__ = ["Left", "StreamReport", "handle"]

#: Reads and transactions of one stream record before it is left for a person: a record whose
#: state keeps changing between the read and the write is being written to; its later stream
#: records carry the state that follows.
ATTEMPTS: Final = 4


@dataclass(frozen=True)
class Left:
    """A stream record, or one of its locks, the handler would not fix.

    Attributes:
        event_id: the stream record's ``eventID``.
        event: its ``eventName`` (``INSERT``, ``MODIFY`` or ``REMOVE``).
        key: the record's key as lock items store it, serialized: ``(hash,)`` or ``(hash, range)``.
        lock_key: the lock concerned, or None when the whole stream record was left.
        owner: the key of the record that owns the lock, when another record owns it.
        reason: why, for a person.
    """

    event_id: str
    event: str
    key: OwnerKey
    lock_key: str | None
    reason: str
    owner: OwnerKey | None = None

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (binary keys as base64 text)."""
        return {
            "event_id": self.event_id,
            "event": self.event,
            "key": [_jsonable(v) for v in self.key],
            "lock_key": self.lock_key,
            "owner": None if self.owner is None else [_jsonable(v) for v in self.owner],
            "reason": self.reason,
        }


@dataclass(frozen=True)
class StreamReport:
    """What :func:`handle` did with one batch of stream records.

    Attributes:
        records: stream records of the model's records looked at (others are ignored: other
            tables', lock items, other models' records).
        released: locks deleted (their record no longer holds the value).
        created: locks created (a free value the record holds had none), or taken over from a
            record that no longer holds the value.
        renewed: locks of the record put again as its plain lock: its own release hold (a record
            restored behind the library's back), or a lock whose expiry is not the record's.
        left: what it would not do, and why: a value another record's lock holds (a duplicate
            value: a person decides, as for the audit's ``DuplicateValue``), a lock naming no
            owner, a stream record without the images it needs, an item that cannot be read as
            a record.
    """

    records: int
    released: int
    created: int
    left: tuple[Left, ...]
    renewed: int = 0

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict, e.g. for the Lambda function's log."""
        return {
            "records": self.records,
            "released": self.released,
            "created": self.created,
            "renewed": self.renewed,
            "left": [left.to_json() for left in self.left],
        }


def _jsonable(value: Any) -> Any:
    return base64.b64encode(value).decode() if isinstance(value, (bytes, bytearray)) else value


# --- the Lambda event --------------------------------------------------------------------------


def decode(value: Mapping[str, Any]) -> dict[str, Any]:
    """One attribute value of a Lambda event (DynamoDB JSON, binary as base64 text) as boto gives it.

    Lambda serializes ``B`` and ``BS`` values as base64 strings; a read through PynamoDB gives
    bytes. Maps and lists are decoded all the way down.
    """
    (kind, inner), *_ = value.items()
    if kind == "B":
        return {kind: _bytes(inner)}
    if kind == "BS":
        return {kind: [_bytes(v) for v in inner]}
    if kind == "M":
        return {kind: decode_image(inner)}
    if kind == "L":
        return {kind: [decode(v) for v in inner]}
    return {kind: inner}


def _bytes(value: Any) -> bytes:
    return bytes(value) if isinstance(value, (bytes, bytearray)) else base64.b64decode(value)


def decode_image(image: Mapping[str, Any]) -> dict[str, Any]:
    """An image (or ``Keys``) of a Lambda stream record, binary values decoded."""
    return {name: decode(value) for name, value in image.items()}


def table_of(arn: str) -> str | None:
    """The table name in a stream's ARN (``arn:aws:dynamodb:REGION:ACCOUNT:table/NAME/stream/LABEL``)."""
    _, found, rest = arn.partition(":table/")
    return rest.split("/", 1)[0] if found else None


# --- one model's view of the stream ------------------------------------------------------------

#: Lock key -> (the namespace it is kept under, the class name of the record's model).
Wanted = dict[str, tuple[str, str]]


class _Handler:
    """Reads, decides and writes for the stream records of one model."""

    def __init__(self, model: type[UniqueMixin]) -> None:
        self.model = model
        self.scope = Scope(model)  # Raises UniqueConfigError: not a unique model.
        self.locks: LockTable = self.scope_context().write_locks()
        self.table = table_id(model)
        self.table_name = connection(model).table_name
        self.fixer = Fixer(model)
        meta = connection(model).get_meta_table()
        self.hash_name: str = meta.hash_keyname
        self.key_names = tuple(n for n in (meta.hash_keyname, meta.range_keyname) if n)
        # A table whose records cannot be told apart from another model's is refused, as audit
        # refuses it: nothing is written.
        self.scope.check_shared(set(), lock_table_id(model))

    def scope_context(self) -> ModelContext:
        """The handled model's context."""
        context = context_of(self.model)
        assert context is not None  # noqa: S101 - Scope refused a model without constraints.
        return context

    def owner(self, keys: Mapping[str, Any]) -> OwnerKey:
        """The record's key as lock items store it, from the stream record's ``Keys``."""
        return tuple(next(iter(keys[name].values())) for name in self.key_names)

    def mine(self, item: Mapping[str, Any] | None) -> type[UniqueMixin] | None:
        """The model class of ``item`` when it is one of the model's records (a subclass, when polymorphic)."""
        if not item or is_lock_item(item):
            return None
        hash_value = self.locks.key_text(item)
        if self.locks.shared and isinstance(hash_value, str) and hash_value.startswith(LOCK_PREFIX):
            return None  # A lock item that lost its owner fields: not a record.
        cls = self.scope.owner(self.table, item)
        return cls if cls is not None and issubclass(cls, self.model) else None

    @staticmethod
    def wanted(model: type[UniqueMixin] | None, item: Mapping[str, Any] | None) -> Wanted:
        """Every lock a record holds (both forms during a migration), with its namespace and model."""
        if model is None or item is None:
            return {}
        context = context_of(model)
        if context is None:
            return {}
        _, values = context.read_record(item)
        return {
            key: (c.form(former=former).name, model.__name__)
            for key, (c, former) in context.planner.locks(values).items()
        }

    # --- reading ------------------------------------------------------------------------------

    def read(
        self, record_key: dict[str, Any], lock_keys: Sequence[str]
    ) -> tuple[dict[str, Any] | None, dict[str, Any]]:
        """The record (None: gone) and its lock items, in strongly consistent BatchGetItems.

        One request when a record has at most 99 locks (BatchGetItem reads at most 100 keys);
        unprocessed keys are read again with bounded, jittered backoff.
        """
        keys = [(self.table_name, record_key)] + [(self.locks.table_name, self.locks.key(k)) for k in lock_keys]
        found = batch_read(connection(self.model).connection, keys, attempts=self.scope_context().read_retry_attempts())
        record = next((i for i in found.get(self.table_name, []) if _same_key(i, record_key)), None)
        locks = found.get(self.locks.table_name, [])
        return record, {
            key: item for item in locks if item is not record and (key := self.locks.key_text(item)) is not None
        }

    # --- deciding and writing -----------------------------------------------------------------

    def record_check(
        self, cls: type[UniqueMixin] | None, owner: OwnerKey, stored: dict[str, Any] | None
    ) -> dict[str, Any]:
        """ConditionCheck: the record is as read (gone, or holding the same unique values and class)."""
        context = context_of(cls) if cls is not None else None
        condition: Condition
        if stored is None or context is None:
            condition = Path(self.hash_name).does_not_exist()
        else:
            cas = context.planner.cas(context.item_view(stored))
            condition = Path(self.hash_name).exists() if cas is None else cas
        return operation_kwargs(self.model, owner, condition)

    def fix(self, event_id: str, name: str, owner: OwnerKey, record_key: dict[str, Any], looked: set[str]) -> _Tally:
        """Bring one record's locks in step with it as stored now; re-read when it changed meanwhile.

        Args:
            event_id: the stream record's ``eventID``, for ``left``.
            name: its ``eventName``.
            owner: the record's key as lock items store it.
            record_key: the record's key (DynamoDB JSON).
            looked: the lock keys the images' values imply: those to keep, create or release.
        """
        for _ in range(ATTEMPTS):
            tally = _Tally()
            stored, cls = None, None
            record, found = self.read(record_key, sorted(set(looked)))
            if record is not None:
                cls = self.mine(record)
                if cls is None:
                    reason = f"the item under the key is no longer a {self.model.__name__} record: run audit"
                    return _Tally(left=[Left(event_id, name, owner, None, reason)])
                stored = record
            wanted = self.wanted(cls, stored)
            # The record's values changed again since the event: read the locks it holds now too
            # (one more read), then decide on all of them.
            if not wanted.keys() <= looked:
                looked = {*looked, *wanted}
                continue
            expires = self.expires(cls, stored)
            write = _Write()
            self.keep(event_id, name, owner, wanted, found, expires, write, tally)
            for key in sorted(looked - wanted.keys()):
                lock = found.get(key)
                # A hold is already released (the library made it when the value was given up).
                if lock is not None and lock_owner(lock) == owner and not is_held(lock):
                    # Exactly the owner fields the lock holds: a lock since given to another record stays.
                    expected = stored_owner_fields(lock)
                    write.add(*self.release(key, lock, expected), "the lock changed")
                    tally.released += 1
            if tally.created + tally.released + tally.renewed == 0:
                return tally
            if self.send(write, self.record_check(cls, owner, stored)):
                return tally
        tally = _Tally()
        tally.left.append(Left(event_id, name, owner, None, f"the record or its locks changed {ATTEMPTS} times"))
        return tally

    def keep(
        self,
        event_id: str,
        name: str,
        owner: OwnerKey,
        wanted: Wanted,
        found: Mapping[str, dict[str, Any]],
        expires: dict[str, Any] | None,
        write: _Write,
        tally: _Tally,
    ) -> None:
        """The writes giving the record each lock it holds: create a free one, renew its own, report another's."""
        fields = self.scope_context().fields_of(owner)
        checked: set[OwnerKey] = set()
        for key, (namespace, model_name) in wanted.items():
            lock = found.get(key)
            holder = lock_owner(lock)
            if lock is None or (holder != owner and self.locks.expired(lock)):
                # Free: absent, or expired (its record expired, its hold ended): anyone may take it.
                put = self.locks.codec.put_if(key, fields, namespace, model_name, ABSENT, expires)
                write.add("put", put, "a lock was created meanwhile")
                tally.created += 1
            elif holder is not None and holder != owner and not is_held(lock) and (gone := self.gave_up(holder, key)):
                # The lock names a record that no longer holds the value (its own change away from
                # it is still on its way, from another shard): the value is this record's, taken
                # on condition that the lock and that record are still as read.
                put = self.locks.codec.put_if(key, fields, namespace, model_name, stored_owner_fields(lock), expires)
                write.add("put", put, "the lock changed")
                if holder not in checked:
                    checked.add(holder)
                    write.add("check", self.record_check(gone[0], holder, gone[1]), "the other record changed")
                tally.created += 1
            elif holder == owner:
                if is_held(lock) or self.locks.expiry(lock) != _epoch(expires):
                    # The record's own hold (restored behind the library's back), or a lock
                    # whose expiry is not the record's: made the record's plain lock again.
                    expected = stored_owner_fields(lock)
                    put = self.locks.codec.put_if(key, fields, namespace, model_name, expected, expires)
                    write.add("put", put, "the lock changed")
                    tally.renewed += 1
            else:
                reason = (
                    "held by another record: a duplicate value, a person decides"
                    if holder is not None
                    else "the lock names no owner: run repair"
                )
                tally.left.append(Left(event_id, name, owner, key, reason, holder))

    def gave_up(self, holder: OwnerKey, key: str) -> tuple[type[UniqueMixin] | None, dict[str, Any] | None] | None:
        """How the record a lock names is stored when, read consistently, it no longer holds the value.

        Returns:
            (its model, its item), (None, None) when it is gone, or None when it still holds
            the value, or is not one of the model's records (a person decides).
        """
        record, _ = self.read(self.scope_context().key_of(holder), [])
        if record is None:
            return None, None
        cls = self.mine(record)
        if cls is None or key in self.wanted(cls, record):
            return None
        return cls, record

    @staticmethod
    def expires(model: type[UniqueMixin] | None, item: Mapping[str, Any] | None) -> dict[str, Any] | None:
        """The stored record's expiry, serialized, which the locks it is given carry (None: none)."""
        context = context_of(model) if model is not None and item is not None else None
        if context is None or item is None:
            return None
        return context.planner.expires(context.read_record(item)[1])

    def release(self, key: str, lock: Mapping[str, Any], expected: dict[str, Any]) -> tuple[SentGroup, dict[str, Any]]:
        """The write releasing a lock that names exactly ``expected``: a delete, or a hold (``hold=``).

        A lock that expired with its record (TTL) is deleted: its value has been free since then.
        """
        namespace = lock_namespace(lock)
        # The lock's namespace may be a subclass's or another model's in the same lock table.
        forms = (c for m in lock_sharers(self.model) for c in namespaces_of(m))
        hold = next((form.hold for form in forms if form.name == namespace), None)
        if hold is None or namespace is None or self.locks.expired(lock):
            return "delete", self.locks.codec.delete_if(key, expected)
        model = lock_owner_model(lock) or self.model.__name__
        until = int(time.time() + hold.total_seconds())
        return "put", self.locks.codec.hold_if(key, expected, namespace, model, until)

    def send(self, write: _Write, check: dict[str, Any]) -> bool:
        """Send the lock writes with the record's check, in transactions of at most 100 actions.

        Returns:
            False when a condition failed (the record or a lock changed since the read).
        """
        groups: tuple[SentGroup, ...] = ("delete", "put")
        writes = [(g, item, m) for g in groups for item, m in zip(write.items[g], write.meanings[g], strict=True)]
        # The checks of other records (whose given-up values are taken) guard every part too.
        checks = [(check, "the record changed"), *zip(write.items["check"], write.meanings["check"], strict=True)]
        step = MAX_TRANSACTION_ACTIONS - len(checks)  # Each transaction repeats the checks.
        for start in range(0, len(writes), step):
            part = _Write()
            for item, meaning in checks:
                part.add("check", item, meaning)
            for group, item, meaning in writes[start : start + step]:
                part.add(group, item, meaning)
            outcome, _ = self.fixer.send(part)
            if outcome != "applied":
                return False
        return True


@dataclass
class _Tally:
    """What the fixes of one stream record did."""

    released: int = 0
    created: int = 0
    left: list[Left] = field(default_factory=list)
    renewed: int = 0


def _epoch(expires: Mapping[str, Any] | None) -> int | None:
    """A serialized expiry (``{"N": ...}``) in epoch seconds; None for none."""
    return None if expires is None else int(float(expires["N"]))


def _same_key(item: Mapping[str, Any], key: Mapping[str, Any]) -> bool:
    return all(item.get(name) == value for name, value in key.items())


def handle(model: type[UniqueMixin], event: Mapping[str, Any]) -> StreamReport:
    """Keep ``model``'s locks in step with the changes of one Lambda DynamoDB Streams event.

    For each stream record of ``model``'s table whose item is one of ``model``'s records (its
    ``unique_item_filter``, or its discriminator for a polymorphic model; lock items and other
    models' records are ignored):

    - ``REMOVE`` (TTL, the console, a writer that bypassed the library): the locks the old
      image's values imply (both forms during a migration) are deleted, each on condition that it
      still names the record as its owner; a lock another record owns now is that record's and
      is left alone (not reported);
    - ``INSERT`` / ``MODIFY`` where the locks the images' values imply differ (a unique value
      changed): the record's locks are checked; a free missing lock is created for it
      (``attribute_not_exists``), a lock it no longer holds is deleted (owner-conditioned), a
      lock naming another record that no longer holds the value (read consistently: its own
      event, from another shard, may come later) is taken over, and a lock another record
      owns and still holds is reported in ``left`` and never taken. A ``MODIFY`` that
      changes no unique value costs no request.

    Each decision is made from the record and its locks as stored now (one strongly consistent
    BatchGetItem), and each fix is one TransactWriteItems with a ConditionCheck that the record
    is still as read, re-read when it changed. Replaying a batch changes nothing; the
    library's own writes, whose locks are in place, are found in step with no write.

    ``INSERT`` / ``MODIFY`` records without a ``NewImage`` (a stream of ``OLD_IMAGE`` or
    ``KEYS_ONLY`` view type), and ``REMOVE`` records without an ``OldImage``, are reported in
    ``left``: set the stream's view type to ``NEW_AND_OLD_IMAGES``.

    Args:
        model: the ``UniqueMixin`` model whose table the stream belongs to.
        event: the event Lambda passes to the function (``{"Records": [...]}``); images in
            DynamoDB JSON, binary values as base64 text.

    Returns:
        What was released, created and left.

    Raises:
        UniqueConfigError: ``model`` is not a unique model.
        UniqueError: ``model``'s table holds other models' records and nothing tells them apart
            (set ``Meta.unique_item_filter``).
        TransientError: throttling or conflicts outlasted the retries (Lambda retries the batch).
    """
    handler = _Handler(model)
    records = released = created = renewed = 0
    left: list[Left] = []
    for record in event.get("Records", ()):
        arn = record.get("eventSourceARN")
        if arn is not None and table_of(arn) != handler.table_name:
            continue  # Another table's stream (one function may serve several).
        stream = record.get("dynamodb", {})
        name = str(record.get("eventName", ""))
        keys = decode_image(stream.get("Keys", {}))
        old = {**keys, **decode_image(stream["OldImage"])} if "OldImage" in stream else None
        new = {**keys, **decode_image(stream["NewImage"])} if "NewImage" in stream else None
        old_cls, new_cls = handler.mine(old), handler.mine(new)
        if old_cls is None and new_cls is None and (old or new or handler.mine(keys) is None):
            continue  # A lock item, another model's record, or no record of the model on either side.
        records += 1
        event_id = str(record.get("eventID", ""))
        try:
            owner = handler.owner(keys)
            held = handler.wanted(old_cls, old)
            wanted = handler.wanted(new_cls, new)
        except Exception as exc:  # noqa: BLE001 - one unreadable stream record must not block the shard.
            left.append(Left(event_id, name, (), None, f"cannot read the stream record as a record: {exc!r}"))
            continue
        if name == "REMOVE":
            if old is None:
                left.append(Left(event_id, name, owner, None, "no OldImage: set the stream to NEW_AND_OLD_IMAGES"))
                continue
            looked: set[str] = set(held)
        elif name in ("INSERT", "MODIFY"):
            if new is None:
                reason = "no NewImage: set the stream to NEW_AND_OLD_IMAGES, or run audit"
                left.append(Left(event_id, name, owner, None, reason))
                continue
            if old is not None and held == wanted and handler.expires(old_cls, old) == handler.expires(new_cls, new):
                continue  # No unique value nor the expiry changed: nothing to check, no request.
            looked = {*held, *wanted}
        else:
            continue
        if not looked:
            continue  # The record held and holds no value: no lock to look at.
        tally = handler.fix(event_id, name, owner, keys, looked)
        released += tally.released
        created += tally.created
        renewed += tally.renewed
        left.extend(tally.left)
    return StreamReport(records, released, created, tuple(left), renewed)
