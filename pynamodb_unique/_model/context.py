"""One object per unique model: its facts, read once from its class.

The mixin builds a :class:`ModelContext` for each concrete model on its first use and keeps it as the
class attribute ``_uniq``; an instance's knowledge of its stored record lives in the instance
(``snapshot``). Those two names are all the library adds to a user's model besides PynamoDB's own
methods, overridden. Update actions are read in ``updates``, records read in ``records``.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime
import decimal
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from pynamodb.attributes import Attribute, NumberAttribute, UnicodeAttribute
from pynamodb.constants import NULL, NUMBER, STRING

from .._core.keys import LOCK_PREFIX
from .._core.limits import RETRY_ATTEMPTS
from .._core.lockitem import OwnerKey, lock_owner, lock_owner_model, lock_reservation, owner_fields
from .._core.plan import LockPut, Planner, Stored, fixed_default
from .._core.seconds import second_bounds
from ..exceptions import InvalidUniqueValue
from . import registry as _registry
from .global_tables import refuse_strong_consistency
from .locks import LockTable, lock_table
from .records import read_item
from .registry import maintains_locks, separate_lock_table, stored_class
from .seam import blank_instance, built_connection, connection
from .snapshot import loaded_stored

if TYPE_CHECKING:
    from pynamodb.connection import TableConnection
    from pynamodb.models import Model

    from .._core.outcome import Finding
    from ..exceptions import Violation

#: Python types whose values cannot change in place: a snapshot may share them with the instance.
_IMMUTABLE: Final = frozenset(
    {str, int, float, bool, bytes, decimal.Decimal, datetime.datetime, datetime.date, datetime.timedelta}
)


def context_of(model: type[Any]) -> ModelContext | None:
    """``model``'s context, built on its first use (None: not a concrete unique model)."""
    context = _registry.settled(model)
    return context if isinstance(context, ModelContext) else None


class ModelContext:
    """A unique model's facts, read once from its class, and the operations on its instances.

    Attributes:
        model: the model class.
        planner: plans its writes.
        hash_name: the Python name of its hash key attribute.
        range_name: the Python name of its range key attribute, or None.
    """

    def __init__(self, model: type[Model], planner: Planner) -> None:
        self.model = model
        self.planner = planner
        attributes = model.get_attributes()
        self.attributes = attributes
        self.hash_name = next(name for name, a in attributes.items() if a.is_hash_key)
        self.range_name = next((name for name, a in attributes.items() if a.is_range_key), None)
        self.python_names = {a.attr_name: name for name, a in attributes.items()}
        self.unique_set = frozenset(planner.unique_names)
        # Attributes whose default is made anew on each load (a callable): an item without them
        # holds no value, whatever the loaded instance shows.
        self.made_on_load = tuple(
            (name, attributes[name].attr_name)
            for name in planner.unique_names
            if attributes[name].default is not None and fixed_default(attributes[name]) is None
        )
        # Attributes whose Python value may not give back the stored text (a JSONAttribute, a date,
        # a TTLAttribute's fraction of a second, a custom attribute): the compare-and-swap checks
        # the text as stored.
        self._verbatim = tuple(
            (name, attributes[name].attr_name) for name in planner.unique_names if _inexact(attributes[name])
        )
        # The expiry a check built from values a scan read compares within its second instead
        # (Stored.ranged), when its bounds can be stated.
        self._ranged = planner.ranged
        # Attributes that change a value as it is set (a TTLAttribute drops fractions of a
        # second): a stored value is read as a load sets it.
        self._set_hooks = frozenset(name for name in planner.unique_names if _changes_on_set(attributes[name]))
        # Where the unique attributes are stored: what a load keeps of the item (remember_loaded).
        self.stored_names = tuple(attributes[name].attr_name for name in planner.unique_names)
        # Per unique attribute: its name, where it is stored, and whether it is a plain
        # UnicodeAttribute, whose stored "S" text is its Python value as a load gives it.
        self._unique_stored = tuple(
            (name, attr_name, type(attributes[name]) is UnicodeAttribute)
            for name, attr_name in zip(planner.unique_names, self.stored_names, strict=True)
        )
        # What a load gives each attribute an item lacks (fixed_default), read once.
        self._fixed_defaults = {name: fixed_default(a) for name, a in attributes.items()}
        self.hash_attribute = attributes[self.hash_name]
        self.range_attribute = attributes[self.range_name] if self.range_name is not None else None
        # A key attribute whose class overrides __get__ computes the key it gives: read through
        # it, as PynamoDB reads the key for its requests; any other gives what attribute_values holds.
        # Why not getattr always: 0.35 µs against 0.03 a read; a delete took 9% longer (run in turns).
        key_attributes = (self.hash_attribute, self.range_attribute)
        self._key_computed = any(type(a).__get__ is not Attribute.__get__ for a in key_attributes if a is not None)
        # The key attributes' stored names and DynamoDB types, read once (attr_name is a property).
        self._hash_field = (self.hash_attribute.attr_name, self.hash_attribute.attr_type)
        ranged = self.range_attribute
        self._range_field = (ranged.attr_name, ranged.attr_type) if ranged is not None else None
        # The DynamoDB types of the record key, hash first: what a lock's owner fields are typed as.
        self._key_types = (self.hash_attribute.attr_type,) + ((ranged.attr_type,) if ranged is not None else ())
        self._locks: LockTable | None = None
        self._locks_registrations = -1
        #: The lock table last found to take transactions (:meth:`write_locks`).
        self._writable: LockTable | None = None

    # Settings, read when used: tests and the CLI change Meta after the class is defined.

    def read_retry_attempts(self) -> int:
        """``Meta.unique_retry_attempts``: sends of one request before ``TransientError``.

        A write reads it only when a request is to be resent (:func:`~pynamodb_unique._write.send.send`):
        reading a Meta setting costs more than the rest of a write's handling of its attempts.
        """
        attempts: int = getattr(self.model.Meta, "unique_retry_attempts", RETRY_ATTEMPTS)
        return attempts

    @property
    def table_name(self) -> str:
        """The table the model's requests name, as its PynamoDB connection does.

        ``Meta.table_name``: PynamoDB builds the connection anew whenever the two differ, so
        reading Meta gives the same name without looking the connection up.
        """
        name: str = self.model.Meta.table_name
        return name

    def active(self) -> Planner | None:
        """The planner when the model's writes move locks; None: its writes are PynamoDB's own."""
        # The metaclass gave the model this planner: its own constraints answer without the registry.
        return self.planner if self.planner.constraints or maintains_locks(self.model) else None

    def locks(self, table: TableConnection | None = None) -> LockTable:
        """Where the model's lock items live (cached, renewed with the model's connection).

        Args:
            table: the model's connection, when at hand (default: as PynamoDB caches it).
        """
        cached = self._locks
        if (
            cached is None
            or self._locks_registrations != _registry.registrations
            or (cached.shared and cached.connection is not (table or built_connection(self.model)))
        ):
            # A model registered since may share the lock table, and with it how locks expire. The
            # count is read before the table is derived: a model registering meanwhile renews it.
            self._locks_registrations = _registry.registrations
            cached = self._locks = lock_table(self.model)
        return cached

    def write_locks(self, table: TableConnection | None = None) -> LockTable:
        """:meth:`locks`, for a write or a tool: the first time, check that the tables take transactions.

        Checked again only when the lock table is renewed (a new connection or registration),
        and then answered from what was described before (once per table, endpoint and Region).

        Args:
            table: the model's connection, when at hand (default: as PynamoDB caches it).

        Raises:
            UniqueConfigError: the records table or the lock table is a global table with
                multi-Region strong consistency (no transactions there).
        """
        locks = self.locks(table)
        if locks is not self._writable:
            refuse_strong_consistency(self.model.__name__, table or connection(self.model), locks)
            self._writable = locks
        return locks

    def forget_locks(self) -> None:
        """Drop the cached lock table (after the model's host or lock table changed)."""
        self._locks = None

    # An instance's values and keys.

    def values(self, instance: Model) -> dict[str, Any]:
        """The values of the attributes the constraints read, by Python name (None when unset).

        A value that can change in place (a map, a list, a set, a ``JSONAttribute``'s dict that
        a partial constraint's condition reads) is copied: a snapshot must not change with the
        instance. An empty set is None: PynamoDB stores it as no attribute. An attribute without a
        value holds its fixed default, as the stored item loads.
        """
        # None or an empty set is stored as no attribute, which loads as the fixed default.
        found = self.planner.as_loaded(instance.attribute_values)
        for name, value in found.items():
            if value is not None and type(value) not in _IMMUTABLE:
                found[name] = copy.deepcopy(value)
        return found

    def key(self, instance: Model) -> tuple[Any, Any]:
        """The record's key as Python values, as PynamoDB reads it: what a snapshot is remembered under."""
        if self._key_computed:
            return getattr(instance, self.hash_name), getattr(instance, self.range_name) if self.range_name else None
        values = instance.attribute_values
        return values.get(self.hash_name), values.get(self.range_name) if self.range_name else None

    def owner(self, instance: Model) -> OwnerKey:
        """The record's key as lock items store it, serialized (as PynamoDB serializes it for its requests)."""
        hash_value, range_value = self.key(instance)
        hash_key = self.hash_attribute.serialize(hash_value)
        if self.range_attribute is None or range_value is None:
            return (hash_key,)
        return (hash_key, self.range_attribute.serialize(range_value))

    def owner_fields(self, instance: Model, owner: OwnerKey | None = None) -> dict[str, dict[str, Any]]:
        """The owner fields of a lock item, typed as the record's key attributes are.

        Args:
            instance: the record.
            owner: its owner key, when already computed (:meth:`owner`).
        """
        return self.fields_of(owner if owner is not None else self.owner(instance))

    def fields_of(self, owner: OwnerKey) -> dict[str, dict[str, Any]]:
        """The owner fields of a lock item for one of this model's record keys, as lock items store it."""
        return owner_fields(owner[: len(self._key_types)], self._key_types)

    def decode_owner(self, owner: OwnerKey | None) -> tuple[Any, ...] | None:
        """A lock's serialized owner key in the Python types of this model's key attributes."""
        if owner is None:
            return None
        names = [self.hash_name, self.range_name]
        try:
            return tuple(
                self.attributes[name].deserialize(value)
                for name, value in zip(names, owner, strict=False)
                if name is not None
            )
        except (TypeError, ValueError):
            # Another model's record owns the lock and its key types differ: its key as stored.
            return tuple(owner)

    def violation(self, finding: Finding, instance: Model | None = None) -> Violation:
        """The violation a ``taken`` finding means, its owner (or reservation) read from the lock item.

        Args:
            finding: a lock put that met a value held by another record, a hold or a reservation.
            instance: the record that wanted the value (None for a reservation).
        """
        action = finding.action
        assert isinstance(action, LockPut)  # noqa: S101 - only taken findings come here.
        item = finding.item
        owner = self.decode_owner(lock_owner(item))
        reserved = lock_reservation(item) is not None
        held_until = self.locks().held_until(item)
        return action.constraint.violation(
            action.values, owner, instance, lock_owner_model(item), held_until, reserved=reserved
        )

    def read_record(self, item: Mapping[str, Any]) -> tuple[OwnerKey, dict[str, Any]]:
        """A stored record's owner key and unique values, read from its item without building an instance.

        What ``from_raw_data`` and :meth:`values` would give, for the audit's scans: each unique
        attribute deserialized as PynamoDB's ``deserialize`` does, the key as stored.
        """
        values = self.unique_values(item)
        hash_raw = item[self.attributes[self.hash_name].attr_name]
        owner: OwnerKey = (next(iter(hash_raw.values())),)
        if self.range_name is not None:
            owner = (*owner, next(iter(item[self.attributes[self.range_name].attr_name].values())))
        return owner, values

    def key_item(self, instance: Model, owner: OwnerKey | None = None) -> dict[str, Any]:
        """The record's key as DynamoDB JSON: the item an update creates before its actions apply.

        Args:
            instance: the record.
            owner: its owner key, when already computed (:meth:`owner`).
        """
        return self.key_of(owner if owner is not None else self.owner(instance))

    def key_of(self, owner: OwnerKey) -> dict[str, Any]:
        """One of this model's record keys (as lock items store it) as DynamoDB JSON."""
        name, kind = self._hash_field
        item = {name: {kind: owner[0]}}
        # A range key of None is left out, as PynamoDB's builders leave it (DynamoDB refuses the key).
        if self._range_field is not None and len(owner) > 1:
            name, kind = self._range_field
            item[name] = {kind: owner[1]}
        return item

    def lock_keys(self, instance: Model) -> dict[str, str | None]:
        """The lock key each constraint calls for with the instance's values (None: no lock)."""
        return self.planner.keys(self.values(instance))

    def check_key(self, instance: Model) -> None:
        """Refuse a record hash key that could be taken for a lock key (:meth:`checked_owner`).

        Raises:
            InvalidUniqueValue: the serialized hash key starts with ``UNIQ#`` (shared lock layout).
        """
        self.checked_owner(instance)

    def checked_owner(self, instance: Model) -> OwnerKey:
        """The record's owner key (:meth:`owner`), its hash key refused when it could be taken for a lock key.

        Every write checks, and keys its request with the owner key: serialized once for both.

        Raises:
            InvalidUniqueValue: the serialized hash key starts with ``UNIQ#`` (shared lock layout).
        """
        owner = self.owner(instance)
        hash_key = owner[0]
        # With locks in a table of their own (``unique_lock_table``), any hash key is the record's.
        if isinstance(hash_key, str) and hash_key.startswith(LOCK_PREFIX) and separate_lock_table(self.model) is None:
            msg = f"{self.model.__name__}: hash key {hash_key!r} starts with {LOCK_PREFIX!r}, reserved for lock items"
            raise InvalidUniqueValue(msg)
        return owner

    # What is stored.

    def stored_from_item(self, item: Mapping[str, Any] | None) -> Stored:
        """What a stored item holds, read by its own class (polymorphic models: maybe another one)."""
        if not item:
            return Stored(exists=False)
        stored_cls = stored_class(self.model, item)
        loaded = stored_cls.from_raw_data(dict(item))
        context = context_of(stored_cls)
        if context is None:
            return Stored(exists=True)
        stored = loaded_stored(context, loaded, item)
        if stored_cls is not self.model:
            return dataclasses.replace(stored, source=context.planner)
        return stored

    def item_view(self, item: Mapping[str, Any]) -> Stored:
        """What a stored item of this model holds, read without building an instance (the audit's reading)."""
        verbatim = self.verbatim_of(item) if self._verbatim else None
        return Stored(exists=True, values=self.unique_values(item), verbatim=verbatim)

    def verbatim_of(self, item: Mapping[str, Any]) -> dict[str, dict[str, Any]] | None:
        """The stored text of the attributes checked verbatim (:attr:`Stored.verbatim`), or None."""
        if not self._verbatim:
            return None
        found = {name: raw for name, attr_name in self._verbatim if (raw := item.get(attr_name)) and NULL not in raw}
        return found or None

    def stored_texts(self, owner: OwnerKey, values: Mapping[str, Any]) -> dict[str, dict[str, Any]] | None:
        """The stored text of the attributes checked verbatim, read now, for a check built from ``values`` read earlier.

        A text is taken only where the stored value is still the one in ``values``, so a check
        built from them still fails for a record changed since. None, with no request, when the
        model has no such attribute, or only an expiry whose second the check can bound
        (:attr:`Stored.verbatim`, :attr:`Stored.ranged`): build that check with ``ranged=True``.
        """
        wanted = [(name, attr_name) for name, attr_name in self._verbatim if not self._bounded(name, values.get(name))]
        if not wanted:
            return None
        item = read_item(self, owner)
        if not item:
            return None
        texts = {
            name: raw
            for name, attr_name in wanted
            if (raw := item.get(attr_name)) and NULL not in raw and self._still(name, raw, values.get(name))
        }
        return texts or None

    def _bounded(self, name: str, value: Any) -> bool:
        """Whether a check built from a scan's ``value`` compares attribute ``name`` without its text."""
        return name in self._ranged and (value is None or second_bounds(value) is not None)

    def _still(self, name: str, raw: dict[str, Any], value: Any) -> bool:
        """Whether a stored text still holds ``value`` (False when it no longer reads as a value)."""
        try:
            return bool(self.python_value(name, raw) == value)
        except Exception:  # noqa: BLE001 - another writer's text this attribute cannot read: changed.
            return False

    def unique_values(self, item: Mapping[str, Any]) -> dict[str, Any]:
        """The unique attributes' Python values in a stored item (None: absent), as ``deserialize`` gives them."""
        values = {}
        defaults = self._fixed_defaults
        for name, attr_name, plain in self._unique_stored:
            serialized = item.get(attr_name)
            if serialized is None:  # Absent: its fixed default, as a load gives it.
                values[name] = defaults[name]
                continue
            text = serialized.get(STRING) if plain else None
            values[name] = text if type(text) is str else self.python_value(name, serialized)
        return values

    def python_value(self, name: str, serialized: dict[str, Any] | None) -> Any:
        """The value a load gives attribute ``name`` stored as ``serialized`` (None: absent or removed).

        An attribute absent or NULL has its fixed default (None without one); a value is set as
        a load sets it.
        """
        if not serialized or NULL in serialized:
            return self._fixed_defaults[name]
        attribute = self.attributes[name]
        value = attribute.deserialize(attribute.get_value(serialized))
        if type(value) in _IMMUTABLE and name not in self._set_hooks:
            return value
        # As a load sets it (a raw MapAttribute's dict becomes a MapAttribute, for instance).
        blank = blank_instance(self.model)
        setattr(blank, name, value)
        return blank.attribute_values.get(name)


def _changes_on_set(attribute: Attribute[Any]) -> bool:
    """Whether an attribute's class overrides ``__set__`` (it may change a value as it is set)."""
    return type(attribute).__set__ is not Attribute.__set__


def _inexact(attribute: Attribute[Any]) -> bool:
    """Whether an attribute's value may not give back its stored text.

    A string or number attribute other than PynamoDB's plain ones (JSON, dates, TTLs, custom
    attributes), or one whose ``__set__`` changes a value as it is set (a load then shows
    another value than the one stored).
    """
    if attribute.attr_type not in (STRING, NUMBER):
        return False
    if _changes_on_set(attribute):
        return True
    if attribute.attr_type == STRING:
        return not isinstance(attribute, UnicodeAttribute)
    return not isinstance(attribute, NumberAttribute)
