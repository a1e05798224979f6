"""Exceptions raised by pynamodb_unique.

Every exception derives from :class:`UniqueError`, itself a PynamoDB
:class:`~pynamodb.exceptions.PynamoDBException`, so the ``msg`` / ``cause`` convention and
existing handlers keep working.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pynamodb.exceptions import DeleteError, PutError, PynamoDBException, UpdateError


class UniqueError(PynamoDBException):
    """Root of every exception this library raises."""

    msg = "pynamodb_unique error"


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
    """

    constraint: str
    attributes: tuple[str, ...]
    values: tuple[Any, ...]
    owner: tuple[Any, ...] | None
    instance: Any = field(default=None, compare=False, repr=False)
    owner_model: str | None = field(default=None, compare=False)

    def __str__(self) -> str:
        if len(self.attributes) == 1:
            return f"{self.attributes[0]} {self.values[0]!r} is already taken"
        return f"{', '.join(self.attributes)} {self.values!r} is already taken"


class UniqueViolation(UniqueError):
    """A value that must be unique is already held by another record.

    Attributes:
        violations: every violated constraint of the request, in declaration order.
    """

    msg = "a unique value is already taken"

    def __init__(self, violations: Sequence[Violation], cause: Exception | None = None) -> None:
        self.violations: tuple[Violation, ...] = tuple(violations)
        super().__init__("; ".join(str(v) for v in self.violations) or self.msg, cause)

    @property
    def attributes(self) -> tuple[str, ...]:
        """Every attribute named by a violation, in order, without repeats."""
        return tuple(dict.fromkeys(a for v in self.violations for a in v.attributes))


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
