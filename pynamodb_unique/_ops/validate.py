"""Validation before submit: ``validate_unique()`` reads the locks a write would take.

Advisory, as :meth:`~pynamodb_unique.UniqueMixin.unique_owner`: a form can show "taken" next to
each field before the user submits, but another writer may take a value between this read and
the write, which remains the authority.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from .._core.lockitem import OwnerKey, lock_owner, lock_owner_model, lock_reservation
from .._model.context import context_of
from .._model.locks import LockTable
from .._write.send import batch_read
from ..exceptions import InvalidUniqueValue, UniqueViolation, Violation

if TYPE_CHECKING:
    from pynamodb.models import Model

    from .._core.constraint import Constraint


def read_locks(locks: LockTable, lock_keys: Sequence[str], *, attempts: int) -> dict[str, dict[str, Any]]:
    """The lock items stored under ``lock_keys``, read strongly consistently, by lock key.

    Args:
        locks: the table holding the locks.
        lock_keys: distinct lock keys.
        attempts: requests per chunk before giving up.

    Returns:
        Each stored lock item (DynamoDB JSON) under its lock key; absent keys are free.

    Raises:
        TransientError: keys were still unprocessed, or requests throttled, after ``attempts``
            (:func:`_send.batch_read`).
    """
    table = locks.table_name
    keys = [(table, locks.key(k)) for k in lock_keys]
    items = batch_read(locks.connection.connection, keys, attempts=attempts).get(table, [])
    return {key: item for item in items if (key := locks.key_text(item)) is not None}


def _checked(instance: Model, exclude: Iterable[str], attributes: Iterable[str]) -> frozenset[str]:
    """The excluded attribute names, refused when not the model's (a typo would skip a check silently).

    Raises:
        InvalidUniqueValue: ``exclude`` is a string, or names an attribute the model lacks.
    """
    if isinstance(exclude, str):
        msg = f"exclude must be a collection of attribute names, not the string {exclude!r}"
        raise InvalidUniqueValue(msg)
    excluded = frozenset(exclude)
    unknown = sorted(excluded - set(attributes))
    if unknown:
        msg = f"{type(instance).__name__}: exclude names {unknown}, not attributes of the model"
        raise InvalidUniqueValue(msg)
    return excluded


def validate_unique(instance: Model, exclude: Iterable[str] = (), tokens: frozenset[str] = frozenset()) -> None:
    """Raise :class:`UniqueViolation` when a value the instance would lock is held by another record.

    Every lock the instance's write would take (values normalized, hashed constraints hashed, a
    partial constraint only while its condition holds, both forms of a constraint that declares
    ``former=``) is read with one strongly consistent BatchGetItem; locks the record itself owns
    are free. Each constraint is reported once. Nothing is written.

    Args:
        instance: a unique model's instance, as a form filled it in.
        exclude: attribute names to leave unchecked (fields that failed other validation): a
            constraint whose attributes or condition read one of them is skipped.
        tokens: the tokens of reservations the write will claim: their live locks are free too.

    Raises:
        UniqueViolation: every value held by another record, with its owner, message and code.
        InvalidUniqueValue: a checked value cannot be a key, or ``exclude`` names no attribute.
        TransientError: throttling outlasted the retries.
    """
    context = context_of(type(instance))
    if context is None:
        return
    excluded = _checked(instance, exclude, context.attributes)
    planner = context.planner
    values = context.values(instance)
    wanted: list[tuple[Constraint, str]] = []
    for constraint in planner.constraints:
        if not excluded.isdisjoint((*constraint.attributes, *constraint.condition_attributes)):
            continue
        # The write's own computation: normalize, encode, hash, the partial condition, and the
        # former form's key during a migration (the write takes both).
        wanted.extend((constraint, key) for key in planner.form_keys(constraint, values) if key is not None)
    if not wanted:
        return
    locks = context.locks()
    found = read_locks(locks, [key for _, key in wanted], attempts=context.read_retry_attempts())
    own: OwnerKey | None = None if context.key(instance)[0] is None else context.owner(instance)
    violations: list[Violation] = []
    reported: set[str] = set()
    now = time.time()
    for constraint, key in wanted:
        item = found.get(key)
        # An expired lock (its record expired, or its hold ended) is free: the write would take it.
        if item is None or constraint.name in reported or locks.expired(item, now):
            continue
        owner = lock_owner(item)
        if (owner is not None and owner == own) or lock_reservation(item) in tokens:
            continue
        reported.add(constraint.name)
        violations.append(
            constraint.violation(
                constraint.values(values),
                context.decode_owner(owner),
                instance,
                lock_owner_model(item),
                locks.held_until(item),
                reserved=lock_reservation(item) is not None,
            )
        )
    if violations:
        raise UniqueViolation(violations)
