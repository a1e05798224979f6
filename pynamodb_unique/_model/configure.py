"""A unique model's configuration: checked when the class is defined, its planner built on first use."""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
from collections.abc import Callable, Mapping
from typing import Any

from pynamodb.attributes import Attribute, TTLAttribute, VersionAttribute
from pynamodb.constants import STRING
from pynamodb.models import Model

from .._core.constraint import LOCK_ATTRIBUTES, Constraint, resolve_constraints
from .._core.limits import RETRY_ATTEMPTS
from .._core.plan import MAX_TRANSACTION_ACTIONS, Planner
from ..exceptions import UniqueConfigError
from .registry import discriminator as discriminator_of
from .seam import blank_instance


class _ReadRecorder(dict[str, Any]):
    """An instance's ``attribute_values`` that records which attributes are read."""

    def __init__(self, values: Mapping[str, Any], read: set[str]) -> None:
        super().__init__(values)
        self.read = read

    def get(self, key: str, default: Any = None) -> Any:
        self.read.add(key)
        return super().get(key, default)

    def __getitem__(self, key: str) -> Any:
        self.read.add(key)
        return super().__getitem__(key)


def instantiator(cls: type[Model]) -> Callable[[Mapping[str, Any], set[str]], Model]:
    """Build instances of ``cls`` holding given values, recording the attributes read from them."""

    def instantiate(values: Mapping[str, Any], read: set[str]) -> Model:
        instance = blank_instance(cls)
        instance.attribute_values = _ReadRecorder({k: v for k, v in values.items() if v is not None}, read)
        return instance

    return instantiate


def _traced(cls: type[Model], constraint: Constraint) -> Constraint:
    """Fill in the attributes a partial constraint's condition reads, unless declared."""
    if constraint.condition is None or constraint.condition_attributes:
        return constraint
    read: set[str] = set()
    # A condition may fail on an empty instance; what it read until then still counts.
    with contextlib.suppress(Exception):
        constraint.condition(instantiator(cls)({}, read))
    traced = tuple(sorted(read))
    former = constraint.former
    if former is not None:
        former = dataclasses.replace(former, condition_attributes=traced)
    return dataclasses.replace(constraint, condition_attributes=traced, former=former)


def defined_attributes(cls: type[Model]) -> dict[str, Attribute[Any]]:
    """``cls``'s attributes by Python name, collected as PynamoDB's metaclass will collect them.

    For checks while the class is defined (``__init_subclass__``), before PynamoDB's metaclass
    has filled in ``get_attributes()``.
    """
    return dict(inspect.getmembers(cls, lambda member: isinstance(member, Attribute)))


def declared(cls: type[Model], attributes: Mapping[str, Attribute[Any]]) -> tuple[Constraint, ...] | None:
    """Check ``cls``'s unique constraints; return them, or None for a model without keys (abstract).

    Raises:
        UniqueConfigError: the model cannot keep its constraints (see the messages).
    """
    model = cls.__name__
    meta = getattr(cls, "Meta", None)
    constraints = resolve_constraints(
        model, attributes, getattr(meta, "unique_constraints", None), getattr(meta, "unique_secret", None)
    )
    hash_attribute = next((a for a in attributes.values() if a.is_hash_key), None)
    if hash_attribute is None:
        return None  # An abstract base: its concrete subclasses are checked.
    if not constraints:
        # No lock of its own: PynamoDB's key types, and its writes stay PynamoDB's own unless a
        # polymorphic relative keeps locks (see _registry.maintains_locks).
        return constraints
    range_attribute = next((a for a in attributes.values() if a.is_range_key), None)
    # Read by a write only when it resends (see ModelContext.read_retry_attempts): refused here,
    # for a model with constraints of its own (without, its writes are most often PynamoDB's).
    reservations = getattr(meta, "unique_reservations", False)
    if not isinstance(reservations, bool):
        msg = f"{model}: Meta.unique_reservations must be True or False, got {reservations!r}"
        raise UniqueConfigError(msg)
    attempts = getattr(meta, "unique_retry_attempts", RETRY_ATTEMPTS)
    if not isinstance(attempts, int) or attempts < 1:
        msg = f"{model}: Meta.unique_retry_attempts must be an integer of at least 1, got {attempts!r}"
        raise UniqueConfigError(msg)
    if not getattr(meta, "unique_lock_table", None):
        for role, attribute in (("hash", hash_attribute), ("range", range_attribute)):
            if attribute is not None and attribute.attr_type != STRING:
                msg = (
                    f"{model}: the {role} key {attribute.attr_name!r} must be a string attribute to share "
                    "its table with lock items (or set Meta.unique_lock_table)"
                )
                raise UniqueConfigError(msg)
    clash = sorted(a.attr_name for a in attributes.values() if a.attr_name in LOCK_ATTRIBUTES)
    if clash:
        msg = f"{model}: attribute names {clash} are reserved for lock items"
        raise UniqueConfigError(msg)
    # The largest write releases one lock and takes one per lock a record holds, besides the
    # record: one per constraint, two for a constraint that keeps its former form (a migration).
    forms = len(constraints) + sum(1 for c in constraints if c.former is not None)
    if 1 + 2 * forms > MAX_TRANSACTION_ACTIONS:
        limit = (MAX_TRANSACTION_ACTIONS - 1) // 2
        former = f" ({forms} locks with their former forms)" if forms > len(constraints) else ""
        msg = (
            f"{model}: {len(constraints)} unique constraints{former}; at most {limit} locks per record fit "
            "one TransactWriteItems"
        )
        raise UniqueConfigError(msg)
    return constraints


def configure(cls: type[Model], constraints: tuple[Constraint, ...]) -> Planner:
    """``cls``'s planner, from the constraints :func:`declared` returned when it was defined.

    Run on the model's first use, once PynamoDB's metaclass has finished the class: a partial
    constraint's condition is traced on an instance, and a polymorphic class's kind is known.
    """
    attributes = cls.get_attributes()
    hash_attribute = next(a for a in attributes.values() if a.is_hash_key)
    discriminator = discriminator_of(cls)
    versioned = any(isinstance(a, VersionAttribute) for a in attributes.values())
    kind = cls if discriminator is not None and discriminator.get_discriminator(cls) is not None else None
    if not constraints:
        return Planner((), attributes, hash_attribute, instantiator(cls), discriminator, kind, versioned)
    traced = tuple(_traced(cls, c) for c in constraints)
    ttl = next((name for name, a in attributes.items() if isinstance(a, TTLAttribute)), None)
    reservable = getattr(cls.Meta, "unique_reservations", False)
    instantiate = instantiator(cls)
    return Planner(traced, attributes, hash_attribute, instantiate, discriminator, kind, versioned, ttl, reservable)
