"""``UniqueMixin``: PynamoDB's write methods, keeping lock items and unique values in step.

The mixin only overrides PynamoDB's public methods; a model's facts live in its
:class:`~pynamodb_unique._model.context.ModelContext` (``Model._uniq``) and every write runs through
:mod:`pynamodb_unique._write.engine`. A model without constraints (its own, inherited or a polymorphic
relative's) is PynamoDB's own.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from datetime import timedelta
from typing import Any, ClassVar

from pynamodb.expressions.condition import Condition
from pynamodb.expressions.update import Action
from pynamodb.models import Model

from ._core.constraint import Constraint
from ._core.lockitem import OwnerKey
from ._model import snapshot, updates
from ._model.configure import configure, declared, defined_attributes
from ._model.context import ModelContext, context_of
from ._model.registry import Pending, register
from ._ops.explain import value_lock
from ._ops.reads import UniqueReads
from ._ops.validate import validate_unique
from ._write.engine import Intent, intent_plan, plain_update, write
from ._write.reserve import DEFAULT_TTL, Reservation, claims_for
from ._write.reserve import reserve as _reserve
from ._write.send import check_token
from .exceptions import InvalidUniqueValue, UniqueError


def _refuse_builder(instance: Model, builder: str) -> None:
    """Refuse a per-instance request builder of a model that keeps locks: its request writes none.

    PynamoDB's ``TransactWrite`` builds its items with these builders; the library's own
    writes call PynamoDB's builders directly, with the locks beside them.

    Raises:
        UniqueError: the model's writes move locks.
    """
    context = context_of(type(instance))
    if context is None or context.active() is None:
        return
    msg = (
        f"{type(instance).__name__}.{builder}() is refused: the request it builds (as "
        "pynamodb.transactions.TransactWrite builds its items) writes the record without its unique "
        "locks; use pynamodb_unique.TransactWrite instead (the same methods, with the locks in the "
        "same transaction)"
    )
    raise UniqueError(msg)


def _build(model: type[Model], constraints: tuple[Constraint, ...]) -> ModelContext:
    """A model's context, on its first use, from the constraints checked when it was defined."""
    return ModelContext(model, configure(model, constraints))


class UniqueMixin(UniqueReads):
    """Adds unique constraints to a PynamoDB model; place it before ``Model``.

    ``save``, ``update`` and ``delete`` write the record and its lock items in one
    TransactWriteItems when a unique value changes, and raise :class:`UniqueViolation` when a
    value is taken. ``scan`` and ``query`` never yield lock items.

    The mixin has no metaclass of its own: a model may use any subclass of PynamoDB's
    ``MetaModel`` (``class ABCModelMeta(MetaModel, ABCMeta)`` for abstract base models).
    """

    #: The model's context (None for an abstract model): pending until first use.
    _uniq: ClassVar[ModelContext | Pending | None] = None
    #: What this instance knows of its stored record: (key, stored or the loaded item not yet read), or None.
    _uniq_snapshot: tuple[tuple[Any, ...], Any] | None = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Check the model's constraints and register it now; build its context on first use.

        This runs before PynamoDB's metaclass has finished the class: the checks read the
        attributes as it will collect them, and the context, which needs the finished class (an
        instance to trace a partial constraint's condition, a polymorphic class's kind), waits.

        Raises:
            UniqueConfigError: the model cannot keep its constraints.
        """
        super().__init_subclass__(**kwargs)
        constraints = declared(cls, defined_attributes(cls))
        # Every class's own: a subclass never reads its base's context.
        cls._uniq = None if constraints is None else Pending(functools.partial(_build, constraints=constraints))
        if constraints is not None:
            register(cls, constraints)

    def _uniq_begin(self, token: str | None) -> tuple[ModelContext, str | None, OwnerKey] | None:
        """The context, the checked token and the record's checked owner key; None: PynamoDB's own write."""
        # Every mixin class holds its own context (pending until first use); a model with
        # constraints of its own always moves locks (active() asks the registry only for one without).
        context = self._uniq
        if isinstance(context, Pending):
            context = context.settle(type(self))
        if context is None or not (context.planner.constraints or context.active()):
            return None
        if token is not None:
            check_token(token)
        return context, token, context.checked_owner(self)

    def save(
        self,
        condition: Condition | None = None,
        *,
        add_version_condition: bool = True,
        client_request_token: str | None = None,
        reservations: Iterable[Reservation] = (),
    ) -> dict[str, Any]:
        """Save this record and move its locks in the same request.

        Args:
            condition: the caller's condition on the record, as in PynamoDB.
            add_version_condition: PynamoDB's optimistic-locking switch.
            client_request_token: makes a resent transaction idempotent (1-36 characters);
                one is generated when omitted.
            reservations: reservations of this record's values (:meth:`reserve`) to claim in the
                same transaction: each reserved lock becomes this record's.

        Raises:
            UniqueViolation: a unique value is held by another record or reservation.
            ReservationLost: a reservation no longer holds its values (ended, released or
                claimed); nothing was written.
            ConditionFailed: ``condition`` or the version check failed.
            StaleWrite: the record kept changing concurrently.
            InvalidUniqueValue: a value, the token or a reservation is refused (the record does
                not hold its values); nothing was sent.
        """
        begun = self._uniq_begin(client_request_token)
        if begun is None:
            if reservations:
                msg = f"{type(self).__name__} keeps no unique locks: it has no reservations to claim"
                raise InvalidUniqueValue(msg)
            return super().save(condition, add_version_condition=add_version_condition)
        context, token, owner = begun
        # A bad value is refused while planning, before any request.
        assumed, desire = intent_plan(context, self, "put", None, snapshot.known(context, self))
        assert isinstance(desire, dict)  # noqa: S101 - a put always has values, fixed ones.
        claiming = tuple(reservations)
        claims = claims_for(context, context.locks(), desire, claiming) if claiming else {}
        intent = Intent("put", condition, None, add_version_condition, token, owner, claiming, claims)
        response: dict[str, Any] = write(context, self, intent, assumed, desire)
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

        Unique attributes accept only ``.set(literal)`` and ``.remove()``. Returns the stored item
        after the update (``"Attributes"``) and loads it, as PynamoDB's ``update()``.

        Raises:
            UniqueViolation: a unique value is held by another record.
            ConditionFailed: ``condition`` or the version check failed.
            StaleWrite: the record kept changing concurrently.
            InvalidUniqueValue: an action or the token is refused; nothing was sent.
        """
        begun = self._uniq_begin(client_request_token)
        if begun is None:
            return super().update(actions, condition, add_version_condition=add_version_condition)
        if not isinstance(actions, list) or not actions:
            msg = "the value of `actions` is expected to be a non-empty list"
            raise TypeError(msg)
        context, token, owner = begun
        # What is stored matters only when a unique value moves.
        changes = updates.update_changes(context, actions)
        # An update that creates a record holding locks without unique values (its defaults,
        # nulls_distinct=False) must take them: planned as any other (see intent_plan).
        if not changes and not context.planner.defaults_hold_locks:
            return plain_update(context, self, actions, condition, add_version_condition)
        assumed, desire = intent_plan(context, self, "update", actions, snapshot.known(context, self), changes)
        assert desire is not None  # noqa: S101 - an update with changes plans.
        intent = Intent("update", condition, actions, add_version_condition, token, owner)
        return write(context, self, intent, assumed, desire)

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
        begun = self._uniq_begin(client_request_token)
        if begun is None:
            return super().delete(condition, add_version_condition=add_version_condition)
        context, token, owner = begun
        assumed, desire = intent_plan(context, self, "delete", None, snapshot.known(context, self))
        intent = Intent("delete", condition, None, add_version_condition, token, owner)
        return write(context, self, intent, assumed, desire or {})

    def get_save_kwargs_from_instance(
        self,
        condition: Condition | None = None,
        return_values_on_condition_failure: str | None = None,
    ) -> dict[str, Any]:
        """PynamoDB's PutItem arguments for this record; refused when the model keeps locks.

        Raises:
            UniqueError: the model's writes move locks, which this request would not.
        """
        _refuse_builder(self, "get_save_kwargs_from_instance")
        return super().get_save_kwargs_from_instance(condition, return_values_on_condition_failure)

    def get_update_kwargs_from_instance(
        self,
        actions: list[Action],
        condition: Condition | None = None,
        return_values_on_condition_failure: str | None = None,
        *,
        add_version_condition: bool = True,
    ) -> dict[str, Any]:
        """PynamoDB's UpdateItem arguments for this record; refused when the model keeps locks.

        Raises:
            UniqueError: the model's writes move locks, which this request would not.
        """
        _refuse_builder(self, "get_update_kwargs_from_instance")
        return super().get_update_kwargs_from_instance(
            actions,
            condition,
            return_values_on_condition_failure,
            add_version_condition=add_version_condition,
        )

    def get_delete_kwargs_from_instance(
        self,
        condition: Condition | None = None,
        return_values_on_condition_failure: str | None = None,
        *,
        add_version_condition: bool = True,
    ) -> dict[str, Any]:
        """PynamoDB's DeleteItem arguments for this record; refused when the model keeps locks.

        Raises:
            UniqueError: the model's writes move locks, which this request would not release.
        """
        _refuse_builder(self, "get_delete_kwargs_from_instance")
        return super().get_delete_kwargs_from_instance(
            condition, return_values_on_condition_failure, add_version_condition=add_version_condition
        )

    def validate_unique(self, exclude: Iterable[str] = (), *, reservations: Iterable[Reservation] = ()) -> None:
        """Raise :class:`UniqueViolation` now when saving would, for a form to show before submit.

        Reads every lock this record's write would take (normalized, hashed, partial conditions
        applied) with one strongly consistent BatchGetItem; values this record holds already are
        free. Writes nothing. Advisory, as :meth:`unique_owner`: the write remains the authority.

        Args:
            exclude: attribute names left unchecked (fields that failed other validation); a
                constraint whose attributes or condition read one of them is skipped.
            reservations: reservations the save will claim (:meth:`reserve`): their values are free
                for this record while they last.

        Raises:
            UniqueViolation: every value held by another record (``field_errors()`` for a form).
            InvalidUniqueValue: a checked value cannot be a key, or ``exclude`` names no attribute.
        """
        validate_unique(self, exclude, frozenset(r.token for r in reservations))

    @classmethod
    def reserve(cls, ttl: timedelta = DEFAULT_TTL, **values: Any) -> Reservation:
        """Hold unique values for ``ttl`` before any record has them: ``Account.reserve(email="ada@x.io")``.

        Keyword arguments are the Python attribute names of one constraint, all its parts, or of
        several constraints at once (all reserved in one request, or none). Values are normalized
        as on write. Until the reservation ends, other writes of the values raise
        :class:`UniqueViolation` naming it as reserved; ``save(reservations=[r])`` claims it in the
        record's own transaction, ``r.release()`` frees it early, and after ``held_until`` the
        values are free for anyone (DynamoDB's TTL deletes the lock later). The model must set
        ``Meta.unique_reservations = True``.

        Args:
            ttl: how long the values stay reserved (at least one second; 15 minutes by default).
            **values: the values to reserve, by Python attribute name.

        Raises:
            UniqueViolation: a value is held by a record or another reservation
                (``Violation.held_until``); nothing was reserved.
            InvalidUniqueValue: the names complete no constraint, a value cannot be keyed, or
                ``ttl`` is refused.
            UniqueConfigError: the model does not take reservations.
        """
        return _reserve(cls, ttl, values)

    @classmethod
    def unique_owner(cls, **values: Any) -> tuple[Any, ...] | None:
        """Who holds a value: the owner's key, or None, with one strongly consistent GetItem.

        Advisory, for forms that say "taken" before submit: the write remains the authority.
        Keyword arguments are the Python attribute names of one constraint, all its parts;
        values are normalized as on write (a partial constraint's condition is not applied).
        While the constraint declares ``former=``, a value free under its current form is
        looked up under its former form too (a second GetItem). A release hold (``hold=``)
        names its former owner until it ends; an expired lock names no one.

        Raises:
            InvalidUniqueValue: the names match no constraint, or a value cannot be keyed.
        """
        found = value_lock(cls, values)
        return None if found.holder is None else found.context.decode_owner(found.holder)
