"""Exceptions raised by pynamodb_unique.

Every exception derives from :class:`UniqueError`, itself a PynamoDB
:class:`~pynamodb.exceptions.PynamoDBException`, so the ``msg`` / ``cause`` convention and
existing handlers keep working.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pynamodb.exceptions import DeleteError, PutError, PynamoDBException, TransactWriteError, UpdateError


class UniqueError(PynamoDBException):
    """Root of every exception this library raises."""

    msg = "pynamodb_unique error"


#: The code of a violation when its constraint gives none (``code=``), as Django's ``"unique"``.
DEFAULT_CODE = "unique"


def _shown(value: Any) -> str:
    """A value as a person reads it: text quoted, numbers as written."""
    return f"'{value}'" if isinstance(value, str) else str(value)


def default_message(attributes: Sequence[str], values: Sequence[Any], *, hashed: bool = False) -> str:
    """The sentence a violation says when its constraint has no ``message``.

    ``email 'ada@x.io' is already taken``; a compound: ``the combination of tenant 'acme' and
    slug 'home' is already taken``. The values of a hashed constraint, and binary values, are left
    out (``email is already taken``): they are kept out of keys, so out of messages and logs too.

    Args:
        attributes: the constraint's Python attribute names.
        values: the values as given to the write.
        hashed: whether the constraint keeps its values out of lock keys.
    """
    if hashed or any(isinstance(v, (bytes, bytearray)) for v in values):
        parts = list(attributes)
    else:
        parts = [f"{a} {_shown(v)}" for a, v in zip(attributes, values, strict=False)]
    if len(parts) == 1:
        return f"{parts[0]} is already taken"
    listed = f"{', '.join(parts[:-1])} and {parts[-1]}"
    return f"the combination of {listed} is already taken"


@dataclass(frozen=True)
class Violation:
    """One unique constraint that a write would have broken.

    Attributes:
        constraint: the constraint's name (``"EMAIL"``, ``"TENANT_SLUG"``).
        attributes: the Python attribute names it covers.
        values: the values as given to the write (before ``normalize``).
        owner: the key of the record holding the value, ``(hash, range)`` or ``(hash,)``;
            None when DynamoDB did not say.
        instance: the model instance whose write wanted the value.
        owner_model: the class name of the owner record's model (in a namespace shared by
            several models, it may be another model than the writer's); None when the lock does
            not say (locks written before 0.1).
        message: a sentence to show a user: the constraint's ``message`` template filled in, or
            :func:`default_message` (also when left empty here).
        code: the constraint's ``code`` (``"unique"`` unless it says otherwise), for clients that
            translate or branch on it.
        held_until: when the value is a release hold of its former owner (``hold=``) or a
            reservation (``reserved``), the time it ends (an aware UTC datetime); None for a value
            held by a live record.
        reserved: the value is reserved (``Model.reserve()``) for a record not yet written: no
            owner record, and the message says "reserved until ...".

    ``message`` and ``code`` take no part in equality: two violations of the same constraint,
    values and owner are equal however they are worded.
    """

    constraint: str
    attributes: tuple[str, ...]
    values: tuple[Any, ...]
    owner: tuple[Any, ...] | None
    instance: Any = field(default=None, compare=False, repr=False)
    owner_model: str | None = field(default=None, compare=False)
    message: str = field(default="", compare=False, repr=False)
    code: str = field(default=DEFAULT_CODE, compare=False)
    held_until: datetime | None = field(default=None, compare=False)
    reserved: bool = field(default=False, compare=False)

    def __post_init__(self) -> None:
        if not self.message:
            # A frozen dataclass: the derived default is set once, here.
            object.__setattr__(self, "message", default_message(self.attributes, self.values))

    def __str__(self) -> str:
        return self.message


class UniqueViolation(UniqueError):
    """A value that must be unique is already held by another record.

    ``str()`` joins the violations' messages with ``"; "``.

    Attributes:
        violations: every violated constraint of the request, in declaration order.
    """

    msg = "a unique value is already taken"

    def __init__(self, violations: Sequence[Violation], cause: Exception | None = None) -> None:
        self.violations: tuple[Violation, ...] = tuple(violations)
        super().__init__("; ".join(v.message for v in self.violations) or self.msg, cause)

    @property
    def attributes(self) -> tuple[str, ...]:
        """Every attribute named by a violation, in order, without repeats."""
        return tuple(dict.fromkeys(a for v in self.violations for a in v.attributes))

    def field_errors(self, non_field_key: str = "__all__") -> dict[str, list[str]]:
        """The messages by form field, as Django's ``ValidationError.message_dict``.

        A single-attribute violation is listed under its attribute's name; a compound one, which
        no single field can fix, under ``non_field_key``.

        Args:
            non_field_key: the key of compound violations (Django's ``NON_FIELD_ERRORS``).

        Returns:
            ``{"email": ["email 'ada@x.io' is already taken"], "__all__": [...]}``, keys in the
            order of the violations.
        """
        errors: dict[str, list[str]] = {}
        for v in self.violations:
            key = v.attributes[0] if len(v.attributes) == 1 else non_field_key
            errors.setdefault(key, []).append(v.message)
        return errors


class ReservationLost(UniqueError):
    """A write claimed a reservation that no longer holds its values; nothing was written.

    The reservation ended (its ``held_until`` passed), was released, or was already claimed by
    another record: reserve again, or save without it to take values that are free.

    Attributes:
        reservations: the reservations that were lost (:class:`pynamodb_unique.Reservation`).
        constraints: the names of the constraints whose reserved lock was not the reservation's.
    """

    msg = "the reservation no longer holds its values (it ended, was released or was already claimed)"

    def __init__(
        self,
        reservations: Sequence[Any],
        constraints: Sequence[str],
        msg: str | None = None,
        cause: Exception | None = None,
    ) -> None:
        self.reservations: tuple[Any, ...] = tuple(reservations)
        self.constraints: tuple[str, ...] = tuple(constraints)
        super().__init__(msg, cause)


class ConditionFailed(UniqueError, PutError, UpdateError, DeleteError):
    """The caller's condition or the model's version check failed.

    It is also a PynamoDB ``PutError``, ``UpdateError`` and ``DeleteError``, so handlers written
    for plain PynamoDB models (optimistic locking included) keep catching it.
    """

    msg = "the write's condition failed"


class StaleWrite(UniqueError):
    """The stored record kept changing under the write; it was not applied.

    Raised after a bounded number of re-plans from the stored item.
    """

    msg = "the record changed concurrently too many times; the write was not applied"


class TransientError(UniqueError):
    """DynamoDB kept answering with conflicts or throttling; retries ran out."""

    msg = "DynamoDB kept refusing the write (conflict or throttling); retries ran out"


class IdempotencyMismatch(UniqueError):
    """The ClientRequestToken was already used, within 10 minutes, for a different request."""

    msg = "this client_request_token was already used for a different request"


class InvalidUniqueValue(UniqueError, ValueError):
    """A value, argument or update action the library refuses before sending anything."""

    msg = "invalid value for a unique write"


class UniqueConfigError(UniqueError, TypeError):
    """A model's unique constraints are misconfigured (raised when the class is defined)."""

    msg = "invalid unique constraint configuration"


class TableNotFound(UniqueConfigError, TransactWriteError):
    """A transaction named a table that does not exist, most often a lock table never created.

    DynamoDB answers ``ResourceNotFoundException`` without saying which table; the library then
    asks (DescribeTable) and names it. It is also PynamoDB's ``TransactWriteError``, with the same
    ``cause`` (``cause_response_code == "ResourceNotFoundException"``), so handlers written for
    plain PynamoDB keep catching it.

    Attributes:
        tables: the missing tables; every table of the transaction when DescribeTable could not
            tell (no permission for it).
    """

    msg = "a table the write needs does not exist"

    def __init__(self, tables: Sequence[str], msg: str | None = None, cause: Exception | None = None) -> None:
        """Name the missing ``tables``."""
        self.tables = tuple(tables)
        super().__init__(msg, cause)
