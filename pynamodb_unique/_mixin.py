"""``UniqueMixin``: save, update and delete that keep lock items and unique values in step."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar, Final, Literal, TypeVar

from pynamodb.expressions.condition import Condition
from pynamodb.expressions.operand import Path, Value
from pynamodb.expressions.update import Action, RemoveAction, SetAction
from pynamodb.models import BatchWrite, MetaModel, Model
from pynamodb.pagination import ResultIterator

from ._configure import configure
from ._constraint import OWNER_HASH
from ._keys import LOCK_PREFIX
from ._locks import LockTable, lock_owner, lock_table
from ._plan import LockPut, LockRelease, Plan, Planner, RecordWrite, Stored
from ._requests import build_request, owner_key
from ._send import RETRY_ATTEMPTS, WriteFailed, check_token, derive_token, new_token, send
from .exceptions import (
    ConditionFailed,
    InvalidUniqueValue,
    StaleWrite,
    UniqueError,
    UniqueViolation,
    Violation,
)

_T = TypeVar("_T", bound=Model)

#: How many plans one operation may send: the first, then re-plans from the stored item.
MAX_PLANS: Final = 4


class _UniqueModelMeta(MetaModel):
    """Runs the constraint checks once PynamoDB has collected the model's attributes."""

    def __init__(cls, name: str, bases: Any, namespace: Any, discriminator: Any = None) -> None:  # noqa: N805 - a metaclass.
        super().__init__(name, bases, namespace, discriminator)
        cls._uniq_planner = configure(cls)  # type: ignore[arg-type] # cls is a Model class here.


class UniqueMixin(Model, metaclass=_UniqueModelMeta):
    """Adds unique constraints to a PynamoDB model; place it before ``Model``.

    ``save``, ``update`` and ``delete`` write the record and its lock items in one
    TransactWriteItems when a unique value changes, and raise :class:`UniqueViolation` when a
    value is taken. ``scan`` and ``query`` never yield lock items.
    """

    _uniq_planner: ClassVar[Planner | None] = None
    _uniq_snapshot: tuple[tuple[str, ...], Stored] | None = None
    _uniq_lock_table: ClassVar[LockTable | None] = None

    # Reading: remember what is stored.

    @classmethod
    def from_raw_data(cls: type[_T], data: dict[str, Any]) -> _T:
        """Build an instance from a stored item (get, query, scan) and remember its unique values."""
        instance = super().from_raw_data(data)
        if isinstance(instance, UniqueMixin):
            instance._uniq_remember_loaded()  # noqa: SLF001 - the same class.
        return instance

    def deserialize(self, attribute_values: dict[str, dict[str, Any]]) -> None:
        """Load a stored item (refresh, update) and remember its unique values."""
        super().deserialize(attribute_values)
        self._uniq_remember_loaded()

    def _uniq_values(self) -> dict[str, Any]:
        planner = self._uniq_planner
        names = planner.unique_names if planner is not None else ()
        return {name: getattr(self, name) for name in names}

    def _uniq_remember(self, stored: Stored) -> None:
        self._uniq_snapshot = (owner_key(self), stored)

    def _uniq_remember_loaded(self) -> None:
        if self._uniq_planner is not None and self._hash_keyname is not None:
            self._uniq_remember(Stored(exists=True, values=self._uniq_values()))

    def _uniq_known(self) -> Stored | None:
        """What is stored, if this instance knows it (it was loaded or written, same key)."""
        if self._uniq_snapshot is None:
            return None
        key, stored = self._uniq_snapshot
        return stored if key == owner_key(self) else None

    def _uniq_stored_from_item(self, item: Mapping[str, Any] | None) -> Stored:
        if not item:
            return Stored(exists=False)
        loaded = type(self).from_raw_data(dict(item))
        return Stored(exists=True, values=loaded._uniq_values())  # noqa: SLF001 - the same class.

    def _uniq_check_key(self) -> None:
        hash_key = owner_key(self)[0]
        shared = not getattr(self.Meta, "unique_lock_table", None)
        if shared and isinstance(hash_key, str) and hash_key.startswith(LOCK_PREFIX):
            msg = f"{type(self).__name__}: hash key {hash_key!r} starts with {LOCK_PREFIX!r}, reserved for lock items"
            raise InvalidUniqueValue(msg)

    @classmethod
    def _uniq_owner_key(cls, owner: tuple[Any, ...] | None) -> tuple[Any, ...] | None:
        """A lock's serialized owner key in the Python types of this model's key attributes."""
        if owner is None:
            return None
        attributes = cls.get_attributes()
        names = [cls._hash_keyname, cls._range_keyname]
        return tuple(
            attributes[name].deserialize(value) for name, value in zip(names, owner, strict=False) if name is not None
        )

    @classmethod
    def unique_owner(cls, **values: Any) -> tuple[Any, ...] | None:
        """Who holds a value: the owner's key, or None, with one strongly consistent GetItem.

        Advisory, for forms that say "taken" before submit: the write remains the authority.
        Keyword arguments are the Python attribute names of one constraint, all its parts;
        values are normalized as on write (a partial constraint's condition is not applied).

        Raises:
            InvalidUniqueValue: the names match no constraint, or a value cannot be keyed.
        """
        planner = cls._uniq_planner
        names = set(values)
        constraint = next((c for c in (planner.constraints if planner else ()) if set(c.attributes) == names), None)
        if constraint is None:
            msg = f"{cls.__name__}: no unique constraint covers exactly {sorted(names)}"
            raise InvalidUniqueValue(msg)
        key = constraint.key(constraint.values(values))
        if key is None:
            return None
        locks = cls._uniq_locks()
        data = locks.connection.get_item(key, range_key=locks.range_value, consistent_read=True)
        return cls._uniq_owner_key(lock_owner(data.get("Item")))

    @classmethod
    def _uniq_locks(cls) -> LockTable:
        """Where this model's lock items live (cached per class, renewed with its connection)."""
        cached = cls.__dict__.get("_uniq_lock_table")
        if not isinstance(cached, LockTable) or (cached.shared and cached.connection is not cls._get_connection()):
            cached = lock_table(cls)
            cls._uniq_lock_table = cached
        return cached

    def _uniq_lock_keys(self) -> dict[str, str | None]:
        """The lock key each constraint calls for with this instance's values (None: no lock)."""
        planner = self._uniq_planner
        return planner.keys(self._uniq_values()) if planner is not None else {}

    # Writing.

    def save(
        self,
        condition: Condition | None = None,
        *,
        add_version_condition: bool = True,
        client_request_token: str | None = None,
    ) -> dict[str, Any]:
        """Save this record and move its locks in the same request.

        Args:
            condition: the caller's condition on the record, as in PynamoDB.
            add_version_condition: PynamoDB's optimistic-locking switch.
            client_request_token: makes a resent transaction idempotent (1-36 characters);
                one is generated when omitted.

        Raises:
            UniqueViolation: a unique value is held by another record.
            ConditionFailed: ``condition`` or the version check failed.
            StaleWrite: the record kept changing concurrently.
            InvalidUniqueValue: a value or the token is refused; nothing was sent.
        """
        planner = self._uniq_planner
        if planner is None:
            return super().save(condition, add_version_condition=add_version_condition)
        token = check_token(client_request_token)
        self._uniq_check_key()
        desired = self._uniq_values()
        # A bad value is refused while planning, before any request.
        assumed = self._uniq_known() or Stored(exists=False)
        response: dict[str, Any] = self._uniq_run(
            "put", planner, assumed, lambda _: desired, condition, None, add_version_condition, token
        )
        return response

    def update(
        self,
        actions: list[Action],
        condition: Condition | None = None,
        *,
        add_version_condition: bool = True,
        client_request_token: str | None = None,
    ) -> Any:
        """Update this record; a change of unique value moves its locks in the same request.

        Unique attributes accept only ``.set(literal)`` and ``.remove()``.

        Raises:
            UniqueViolation: a unique value is held by another record.
            ConditionFailed: ``condition`` or the version check failed.
            StaleWrite: the record kept changing concurrently.
            InvalidUniqueValue: an action or the token is refused; nothing was sent.
        """
        planner = self._uniq_planner
        if planner is None:
            return super().update(actions, condition, add_version_condition=add_version_condition)
        if not isinstance(actions, list) or not actions:
            msg = "the value of `actions` is expected to be a non-empty list"
            raise TypeError(msg)
        token = check_token(client_request_token)
        self._uniq_check_key()
        changes = self._uniq_update_changes(planner, actions)
        if not changes:
            # No unique attribute is touched: the stored values stay as they are.
            return super().update(actions, condition, add_version_condition=add_version_condition)
        assumed = self._uniq_known() or Stored(exists=True, values=self._uniq_values())
        return self._uniq_run(
            "update",
            planner,
            assumed,
            lambda stored: {**stored.values, **changes},
            condition,
            actions,
            add_version_condition,
            token,
        )

    def delete(
        self,
        condition: Condition | None = None,
        *,
        add_version_condition: bool = True,
        client_request_token: str | None = None,
    ) -> Any:
        """Delete this record and release its locks in the same request.

        Deleting a record that is already gone succeeds, as in PynamoDB.

        Raises:
            ConditionFailed: ``condition`` or the version check failed.
            StaleWrite: the record kept changing concurrently.
        """
        planner = self._uniq_planner
        if planner is None:
            return super().delete(condition, add_version_condition=add_version_condition)
        token = check_token(client_request_token)
        self._uniq_check_key()
        # Unknown state: guess the instance's own values; the compare-and-swap checks the guess.
        assumed = self._uniq_known() or Stored(exists=True, values=self._uniq_values())
        return self._uniq_run("delete", planner, assumed, lambda _: {}, condition, None, add_version_condition, token)

    def _uniq_update_changes(self, planner: Planner, actions: Sequence[Action]) -> dict[str, Any]:
        """New values of the unique attributes the actions touch; refuse what cannot be known."""
        unique = set(planner.unique_names)
        changes: dict[str, Any] = {}
        for action in actions:
            path = action.values[0]
            if not isinstance(path, Path):
                continue
            name = self._dynamo_to_python_attr(path.path[0])
            if name not in unique:
                continue
            attribute = self.get_attributes()[name]
            if len(path.path) == 1 and isinstance(action, RemoveAction):
                changes[name] = None
            elif len(path.path) == 1 and isinstance(action, SetAction) and isinstance(action.values[1], Value):
                changes[name] = attribute.deserialize(attribute.get_value(action.values[1].value))
            else:
                msg = f"update() may only .set(<literal>) or .remove() the unique attribute {name!r}, got {action}"
                raise InvalidUniqueValue(msg)
        return changes

    def _uniq_run(
        self,
        op: Literal["put", "update", "delete"],
        planner: Planner,
        assumed: Stored,
        desire: Any,
        condition: Condition | None,
        actions: list[Action] | None,
        add_version_condition: bool,
        token: str | None,
    ) -> Any:
        """Plan, send, and re-plan from the stored item when the view was stale."""
        base_token = token or new_token()
        not_ours: set[str] = set()
        connection = self._get_connection().connection
        attempts = getattr(self.Meta, "unique_retry_attempts", RETRY_ATTEMPTS)
        for step in range(MAX_PLANS):
            desired: dict[str, Any] = desire(assumed)
            if op == "delete":
                plan = planner.delete(assumed, not_ours=frozenset(not_ours))
            else:
                plan = planner.write(op, assumed, desired, not_ours=frozenset(not_ours))
            request = build_request(
                self, plan, condition, actions, add_version_condition=add_version_condition, locks=self._uniq_locks()
            )
            step_token = base_token if step == 0 else derive_token(base_token, step, request.items)
            try:
                response = send(connection, request, step_token, attempts=attempts)
            except WriteFailed as failure:
                assumed = self._uniq_after_failure(planner, plan, failure, not_ours)
                continue
            self._uniq_after_success(op, plan, desired, actions, response)
            return response
        msg = f"{type(self).__name__} {owner_key(self)}: {StaleWrite.msg} ({MAX_PLANS} plans)"
        raise StaleWrite(msg)

    def _uniq_after_failure(self, planner: Planner, plan: Plan, failure: WriteFailed, not_ours: set[str]) -> Stored:
        """Read a failure: raise what the caller must see, or return the stored state to re-plan from."""
        me = owner_key(self)
        violations: list[Violation] = []
        record_failed = False
        record_item: dict[str, Any] | None = None
        foreign_releases: list[str] = []
        for action, reason in zip(plan.sent(), failure.reasons, strict=False):
            if reason is None or reason.code != "ConditionalCheckFailed":
                continue
            if isinstance(action, RecordWrite):
                record_failed, record_item = True, reason.raw_item
                continue
            owner = lock_owner(reason.raw_item)
            if isinstance(action, LockPut) and owner != me:
                violation = Violation(
                    action.constraint.name,
                    action.constraint.attributes,
                    action.values,
                    self._uniq_owner_key(owner),
                    instance=self,
                )
                violations.append(violation)
            elif isinstance(action, LockRelease):
                foreign_releases.append(action.key)
        if violations:
            raise UniqueViolation(violations, failure.cause)
        if not record_failed:
            if not foreign_releases:
                raise failure.cause
            # The record is as assumed but a lock it would release belongs to another record.
            not_ours.update(foreign_releases)
            return plan.assumed
        if record_item is None and (plan.record.op == "delete" or not plan.assumed.exists):
            # The failed condition implies the record exists; this backend sent no ALL_OLD item.
            record_item = self._uniq_read_stored()
        stored = self._uniq_stored_from_item(record_item)
        if stored.same_as(plan.assumed, planner.unique_names):
            msg = f"{type(self).__name__} {me}: {ConditionFailed.msg} (the caller's condition or the version check)"
            raise ConditionFailed(msg, failure.cause)
        return stored

    def _uniq_read_stored(self) -> dict[str, Any] | None:
        hash_key, range_key = self._get_hash_range_key_serialized_values()
        data = self._get_connection().get_item(hash_key, range_key=range_key, consistent_read=True)
        item: dict[str, Any] | None = data.get("Item")
        return item

    def _uniq_after_success(
        self,
        op: str,
        plan: Plan,
        desired: dict[str, Any],
        actions: list[Action] | None,
        response: dict[str, Any],
    ) -> None:
        """Make the instance reflect what is stored, as PynamoDB does after a write."""
        if op == "delete":
            self._uniq_remember(Stored(exists=False))
            return
        if op == "put":
            self.update_local_version_attribute()  # type: ignore[no-untyped-call] # unannotated in PynamoDB.
            self._uniq_remember(Stored(exists=True, values=desired))
            return
        if "Attributes" in response:
            # UpdateItem returned the stored item: load it, as PynamoDB's update() does.
            self.deserialize(response["Attributes"])
            return
        # A transaction returns no item: apply literal actions here, or read once after the commit.
        needs_read = False
        for action in actions or ():
            path = action.values[0]
            if not isinstance(path, Path) or len(path.path) != 1:
                needs_read = True
                continue
            name = self._dynamo_to_python_attr(path.path[0])
            attribute = self.get_attributes().get(name)
            if attribute is None:
                needs_read = True
            elif isinstance(action, RemoveAction):
                setattr(self, name, None)
            elif isinstance(action, SetAction) and isinstance(action.values[1], Value):
                setattr(self, name, attribute.deserialize(attribute.get_value(action.values[1].value)))
            else:
                needs_read = True
        self.update_local_version_attribute()  # type: ignore[no-untyped-call] # unannotated in PynamoDB.
        self._uniq_remember(Stored(exists=True, values=desired))
        if needs_read:
            self.refresh(consistent_read=True)

    # Reading without lock items.

    @classmethod
    def _uniq_hide_locks(cls, filter_condition: Condition | None) -> Condition | None:
        if cls._uniq_planner is None or getattr(cls.Meta, "unique_lock_table", None):
            return filter_condition
        no_lock = Path(OWNER_HASH).does_not_exist()
        return no_lock if filter_condition is None else filter_condition & no_lock

    @classmethod
    def query(
        cls: type[_T],
        hash_key: Any,
        range_key_condition: Condition | None = None,
        filter_condition: Condition | None = None,
        consistent_read: bool = False,
        index_name: str | None = None,
        scan_index_forward: bool | None = None,
        limit: int | None = None,
        last_evaluated_key: dict[str, dict[str, Any]] | None = None,
        attributes_to_get: Iterable[str] | None = None,
        page_size: int | None = None,
        rate_limit: float | None = None,
    ) -> ResultIterator[_T]:
        """PynamoDB's query, never yielding lock items."""
        return super().query(
            hash_key,
            range_key_condition=range_key_condition,
            filter_condition=cls._uniq_hide_locks(filter_condition),  # type: ignore[attr-defined] # cls is bound to Model.
            consistent_read=consistent_read,
            index_name=index_name,
            scan_index_forward=scan_index_forward,
            limit=limit,
            last_evaluated_key=last_evaluated_key,
            attributes_to_get=attributes_to_get,
            page_size=page_size,
            rate_limit=rate_limit,
        )

    @classmethod
    def scan(
        cls: type[_T],
        filter_condition: Condition | None = None,
        segment: int | None = None,
        total_segments: int | None = None,
        limit: int | None = None,
        last_evaluated_key: dict[str, dict[str, Any]] | None = None,
        page_size: int | None = None,
        consistent_read: bool | None = None,
        index_name: str | None = None,
        rate_limit: float | None = None,
        attributes_to_get: Sequence[str] | None = None,
    ) -> ResultIterator[_T]:
        """PynamoDB's scan, never yielding lock items."""
        return super().scan(
            filter_condition=cls._uniq_hide_locks(filter_condition),  # type: ignore[attr-defined] # cls is bound to Model.
            segment=segment,
            total_segments=total_segments,
            limit=limit,
            last_evaluated_key=last_evaluated_key,
            page_size=page_size,
            consistent_read=consistent_read,
            index_name=index_name,
            rate_limit=rate_limit,
            attributes_to_get=attributes_to_get,
        )

    @classmethod
    def batch_write(cls: type[_T], auto_commit: bool = True) -> BatchWrite[_T]:
        """Refused: BatchWriteItem carries no conditions, so it cannot keep locks in step."""
        if getattr(cls, "_uniq_planner", None) is None:
            return super().batch_write(auto_commit)
        msg = (
            f"{cls.__name__}.batch_write() is refused: BatchWriteItem carries no conditions and "
            "cannot keep unique locks in step; save() each record instead"
        )
        raise UniqueError(msg)
