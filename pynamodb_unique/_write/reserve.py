"""Reservations: hold unique values for a while before any record exists, then claim them in a write.

``Model.reserve()`` puts one lock item per reserved value, naming no owner record but a random
token, ending at ``held_until`` (the lock table's expiry attribute, so DynamoDB's TTL deletes it
later). A record's write claims it in its own transaction: the record's plain lock is put on
condition that the lock is still that live reservation (:meth:`LockCodec.claim`), so a stranger, a
second claim, or a claim after the end fails. An ended reservation is free for anyone: every lock
put of a model taking reservations also takes an expired lock.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from .._core.outcome import Finding, WriteFailed, interpret
from .._core.plan import LockPut
from .._core.reservation import reserved_locks
from .._model.context import ModelContext, context_of
from ..exceptions import InvalidUniqueValue, ReservationLost, UniqueConfigError, UniqueViolation
from . import telemetry as _telemetry
from .send import TRANSACT_KINDS, Request, new_token, send

if TYPE_CHECKING:
    from .._model.locks import LockTable

#: How long a reservation lasts unless ``reserve(ttl=...)`` says otherwise.
DEFAULT_TTL = timedelta(minutes=15)


@dataclass(frozen=True)
class Reservation:
    """Unique values held for a record not yet written (``Model.reserve()``).

    Pass it to the record's write (``save(reservations=[r])``, ``TransactWrite.save(...,
    reservations=[r])``, ``bulk_save(..., reservations=[r])``) to claim it in the same transaction,
    or :meth:`release` it. Until ``held_until`` any other write of these values raises
    :class:`~pynamodb_unique.UniqueViolation` (``Violation.reserved``); after it, the values are free
    for anyone. The token is the reservation's secret: whoever holds it may claim the values, so
    keep it server-side (a signed session, not a URL).

    Attributes:
        model: the model class that reserved the values.
        values: the reserved values by Python attribute name, as given.
        token: the reservation's random token (32 hex characters; left out of its repr).
        held_until: when the reservation ends (an aware UTC datetime, whole seconds).
        lock_keys: the lock key of each reserved value (both forms during a migration).
        constraints: the name of the constraint of each lock key, in the same order.
        lock_table: the table holding the locks.
    """

    model: type[Any]
    values: Mapping[str, Any] = field(hash=False)  # A dict: hashed by the other fields.
    token: str = field(repr=False)
    held_until: datetime
    lock_keys: tuple[str, ...]
    constraints: tuple[str, ...] = field(repr=False)
    lock_table: str = field(repr=False)

    def release(self) -> bool:
        """Free the values now, before ``held_until``.

        Each lock is deleted on condition that it is still this reservation's (ended or not): a
        lock already claimed by a record, or taken by another writer after the end, is left alone.

        Returns:
            Whether any lock was still this reservation's and was deleted; False when it was
            already claimed, released, or ended and taken.
        """
        context = _context(self.model)
        locks = context.write_locks()
        codec = locks.codec
        attempts = context.read_retry_attempts
        freed = False
        for key in self.lock_keys:
            request = Request([codec.unreserve(key, self.token)], "DeleteItem")
            try:
                send(locks.connection.connection, request, None, attempts=attempts)
            except WriteFailed:
                continue  # No longer this reservation's lock: nothing of ours to free.
            freed = True
        return freed


def _context(model: type[Any]) -> ModelContext:
    """The context of a model taking reservations.

    Raises:
        UniqueConfigError: the model has no unique constraints, or does not take reservations.
    """
    context = context_of(model)
    if context is None or not context.planner.constraints:
        msg = f"{getattr(model, '__name__', model)!r} is not a UniqueMixin model with unique constraints"
        raise UniqueConfigError(msg)
    if not context.planner.reservable:
        msg = (
            f"{model.__name__} does not take reservations: set Meta.unique_reservations = True (its lock "
            "writes then also take a lock whose reservation ended)"
        )
        raise UniqueConfigError(msg)
    return context


def reserve(model: type[Any], ttl: timedelta, values: Mapping[str, Any]) -> Reservation:
    """Reserve ``values`` of ``model`` for ``ttl``: one request (a PutItem, or one TransactWriteItems).

    Raises:
        UniqueViolation: a value is held by a record or another reservation (``held_until`` says
            until when a reservation or hold lasts); nothing was reserved.
        InvalidUniqueValue: ``ttl`` is not a positive timedelta, or the values cover no constraint.
        UniqueConfigError: the model does not take reservations.
    """
    context = _context(model)
    if not isinstance(ttl, timedelta) or ttl.total_seconds() < 1:
        msg = f"reserve(ttl=...) takes a timedelta of at least one second, got {ttl!r}"
        raise InvalidUniqueValue(msg)
    wanted = reserved_locks(context.planner, model.__name__, values)
    locks = context.write_locks()
    token = new_token()
    now = int(time.time())
    # Whole seconds: DynamoDB's TTL format. Rounded up, so a reservation lasts at least ``ttl``.
    until = now + math.ceil(ttl.total_seconds())
    puts = [LockPut(c, c.values(values), key, former) for key, (c, former) in wanted.items()]
    items = [locks.codec.reserve(put.key, token, put.namespace, model.__name__, until, now) for put in puts]
    if len(items) == 1:
        request = Request(items, "PutItem")
    else:
        request = Request([{TRANSACT_KINDS["put"]: item} for item in items], "TransactWriteItems", transactional=True)
    try:
        # The token makes the transaction idempotent; a resent PutItem finds its own token (LockCodec.reserve).
        send(
            locks.connection.connection,
            request,
            token if request.transactional else None,
            attempts=context.read_retry_attempts,
        )
    except WriteFailed as failure:
        # No record is ours: every lock found held is taken (both forms of a value: one finding).
        findings = interpret([(put, frozenset()) for put in puts], failure.reasons)
        violations = [context.violation(f) for f in findings if f.kind == "taken"]
        _telemetry.violated(violations)
        raise UniqueViolation(violations, failure.cause) from None
    return Reservation(
        model,
        dict(values),
        token,
        datetime.fromtimestamp(until, tz=UTC),
        tuple(wanted),
        tuple(c.name for c, _ in wanted.values()),
        locks.table_name,
    )


def claims_for(
    context: ModelContext, locks: LockTable, desired: Mapping[str, Any], reservations: Iterable[object]
) -> dict[str, str]:
    """The claims of ``reservations`` by a record holding ``desired``: lock key -> reservation token.

    Raises:
        InvalidUniqueValue: a reservation is not one (of this lock table), or the record does not
            hold every value it reserved (nothing is sent).
    """
    claims: dict[str, str] = {}
    held: set[str] | None = None
    for reservation in reservations:
        if not isinstance(reservation, Reservation):
            msg = f"reservations= takes Reservation objects (from Model.reserve()), got {type(reservation).__name__}"
            raise InvalidUniqueValue(msg)
        if reservation.lock_table != locks.table_name:
            model = reservation.model.__name__
            msg = f"the reservation of {model} keeps its locks in another table than {context.model.__name__}'s"
            raise InvalidUniqueValue(msg)
        if held is None:
            held = set(context.planner.locks(desired))
        missing = [c for key, c in zip(reservation.lock_keys, reservation.constraints, strict=True) if key not in held]
        if missing:
            msg = (
                f"{context.model.__name__}: the record does not hold the values reserved for "
                f"{', '.join(dict.fromkeys(missing))}: a reservation is claimed by a record holding all its values"
            )
            raise InvalidUniqueValue(msg)
        for key in reservation.lock_keys:
            if claims.setdefault(key, reservation.token) != reservation.token:
                msg = f"two reservations of one value ({key}) in one write"
                raise InvalidUniqueValue(msg)
    return claims


def lost(findings: Sequence[Finding], reservations: Sequence[Reservation], cause: Exception) -> ReservationLost:
    """The error of claims that failed (``lost`` findings): their reservations no longer hold the values."""
    puts = [f.action for f in findings if isinstance(f.action, LockPut)]
    tokens = {put.claim for put in puts}
    which = [r for r in reservations if r.token in tokens]
    names = list(dict.fromkeys(put.constraint.name for put in puts))
    # Attribute names, not values: a hashed constraint's values stay out of messages and logs.
    shown = " and ".join(dict.fromkeys(", ".join(put.constraint.attributes) for put in puts))
    msg = (
        f"the reservation of {shown} no longer holds it: it ended, was released or was already claimed "
        "(reserve again, or save without it)"
    )
    return ReservationLost(which, names, msg, cause)
