"""What a unique model instance knows of its stored record, and the locks it calls for."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, TypeVar

from pynamodb.expressions.operand import Path, Value
from pynamodb.expressions.update import Action, RemoveAction, SetAction
from pynamodb.models import Model

from ._keys import LOCK_PREFIX
from ._locks import LockTable, is_lock_item, lock_owner, lock_table
from ._plan import Planner, Stored
from ._registry import holds_locks, maintains_locks, planner_of, stored_class
from .exceptions import InvalidUniqueValue

_T = TypeVar("_T", bound=Model)


class UniqueState(Model):
    """The instance state and lookups behind :class:`~pynamodb_unique.UniqueMixin`."""

    _uniq_planner: ClassVar[Planner | None] = None
    _uniq_snapshot: tuple[tuple[str, ...], Stored] | None = None
    _uniq_lock_table: ClassVar[LockTable | None] = None

    # Reading: remember what is stored.

    @classmethod
    def from_raw_data(cls: type[_T], data: dict[str, Any]) -> _T:
        """Build an instance from a stored item (get, query, scan) and remember its unique values.

        Raises:
            DoesNotExist: ``data`` is a lock item (``get()`` of a lock key finds no record).
        """
        if data is not None and is_lock_item(data) and holds_locks(cls):
            msg = "the item is a lock item of pynamodb_unique, not a record"
            raise cls.DoesNotExist(msg)
        instance = super().from_raw_data(data)
        if isinstance(instance, UniqueState):
            instance._uniq_remember_loaded(data)  # noqa: SLF001 - the same class.
        return instance

    def deserialize(self, attribute_values: dict[str, dict[str, Any]]) -> None:
        """Load a stored item (refresh, update) and remember its unique values.

        Raises:
            DoesNotExist: the item is a lock item (``refresh()`` of a lock key finds no record).
        """
        if is_lock_item(attribute_values) and holds_locks(type(self)):
            msg = "the item is a lock item of pynamodb_unique, not a record"
            raise self.DoesNotExist(msg)
        super().deserialize(attribute_values)
        self._uniq_remember_loaded(attribute_values)

    @classmethod
    def _uniq_active(cls) -> Planner | None:
        """The planner when this model's writes move locks; None: its writes are PynamoDB's own."""
        planner = cls._uniq_planner
        return planner if planner is not None and maintains_locks(cls) else None

    def _uniq_values(self) -> dict[str, Any]:
        """The values of the attributes the constraints read, by Python name (None when unset)."""
        planner = self._uniq_planner
        names = planner.unique_names if planner is not None else ()
        # PynamoDB keeps instance values by Python name; reading the dict skips the descriptors.
        values = self.attribute_values
        return {name: values.get(name) for name in names}

    def _uniq_key(self) -> tuple[Any, ...]:
        """The record's key as Python values: what a snapshot is remembered under."""
        values = self.attribute_values
        hash_name, range_name = self._hash_keyname, self._range_keyname
        return (values.get(hash_name) if hash_name else None, values.get(range_name) if range_name else None)

    def _uniq_remember(self, stored: Stored, key: tuple[Any, ...] | None = None) -> None:
        self._uniq_snapshot = (key or self._uniq_key(), stored)

    def _uniq_remember_loaded(self, item: Mapping[str, Any] | None = None) -> None:
        if self._hash_keyname is not None and self._uniq_active() is not None:
            self._uniq_remember(Stored(exists=True, values=self._uniq_values(), item=item))

    def _uniq_known(self, key: tuple[Any, ...] | None = None) -> Stored | None:
        """What is stored, if this instance knows it (it was loaded or written, same key)."""
        if self._uniq_snapshot is None:
            return None
        remembered, stored = self._uniq_snapshot
        return stored if remembered == (key or self._uniq_key()) else None

    def _uniq_stored_from_item(self, item: Mapping[str, Any] | None) -> Stored:
        """What a stored item holds, read by its own class (polymorphic models: maybe another one)."""
        if not item:
            return Stored(exists=False)
        cls = type(self)
        stored_cls = stored_class(cls, item)
        loaded = stored_cls.from_raw_data(dict(item))
        source = None if stored_cls is cls else planner_of(stored_cls)
        return Stored(exists=True, values=loaded._uniq_values(), source=source, item=item)  # noqa: SLF001

    def _uniq_prepare(self) -> tuple[tuple[Any, ...], Stored | None]:
        """The record's key, checked, and what is known to be stored under it."""
        key = self._uniq_key()
        self._uniq_check_key()
        return key, self._uniq_known(key)

    def _uniq_check_key(self) -> None:
        if getattr(self.Meta, "unique_lock_table", None):
            return  # Locks live elsewhere: any hash key is the record's own.
        hash_name = self._hash_keyname
        raw = self.attribute_values.get(hash_name) if hash_name is not None else None
        hash_key = self.get_attributes()[hash_name].serialize(raw) if raw is not None and hash_name else None
        if isinstance(hash_key, str) and hash_key.startswith(LOCK_PREFIX):
            msg = f"{type(self).__name__}: hash key {hash_key!r} starts with {LOCK_PREFIX!r}, reserved for lock items"
            raise InvalidUniqueValue(msg)

    @classmethod
    def _uniq_owner_key(cls, owner: tuple[Any, ...] | None) -> tuple[Any, ...] | None:
        """A lock's serialized owner key in the Python types of this model's key attributes."""
        if owner is None:
            return None
        attributes = cls.get_attributes()
        names = [cls._hash_keyname, cls._range_keyname]
        try:
            return tuple(
                attributes[name].deserialize(value)
                for name, value in zip(names, owner, strict=False)
                if name is not None
            )
        except (TypeError, ValueError):
            # Another model's record owns the lock and its key types differ: its key as stored.
            return tuple(owner)

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

    def _uniq_key_item(self) -> dict[str, Any]:
        """The record's key as DynamoDB JSON: the item an update creates before its actions apply."""
        hash_key, range_key = self._get_hash_range_key_serialized_values()
        attributes = self.get_attributes()
        hash_attribute = attributes[str(self._hash_keyname)]
        item = {hash_attribute.attr_name: {hash_attribute.attr_type: hash_key}}
        if self._range_keyname is not None:
            attribute = attributes[self._range_keyname]
            item[attribute.attr_name] = {attribute.attr_type: range_key}
        return item

    def _uniq_read_stored(self) -> dict[str, Any] | None:
        hash_key, range_key = self._get_hash_range_key_serialized_values()
        data = self._get_connection().get_item(hash_key, range_key=range_key, consistent_read=True)
        item: dict[str, Any] | None = data.get("Item")
        return item

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

    def _uniq_apply_literals(self, actions: Sequence[Action]) -> None:
        """Apply the top-level literal set/remove actions to this instance (others need a read)."""
        for action in actions:
            path = action.values[0]
            if not isinstance(path, Path) or len(path.path) != 1:
                continue
            name = self._dynamo_to_python_attr(path.path[0])
            attribute = self.get_attributes().get(name)
            if attribute is None:
                continue
            if isinstance(action, RemoveAction):
                setattr(self, name, None)
            elif isinstance(action, SetAction) and isinstance(action.values[1], Value):
                setattr(self, name, attribute.deserialize(attribute.get_value(action.values[1].value)))
