"""The write engine: plan, send, interpret the cancellation reasons, re-plan from the stored item.

Every write of a unique model goes through :func:`write` (``save``, ``update``, ``delete``);
composed transactions read their reasons with the same :func:`interpret`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final, NamedTuple, NoReturn

from pynamodb.models import Model

from .._core.limits import MAX_PLANS
from .._core.lockitem import OwnerKey
from .._core.outcome import ClaimLost, LocksMoved, Unexplained, Violated, WriteFailed, decide, interpret
from .._core.plan import (
    ABSENT,
    Plan,
    Planner,
    RecordOp,
    RecordWrite,
    Stored,
)
from .._core.reservation import claimed
from .._model import records, snapshot, updates
from .._model.context import ModelContext
from .._model.registry import stored_class
from .._model.seam import connection, update_kwargs
from ..exceptions import ConditionFailed, StaleWrite, UniqueViolation
from . import telemetry as _telemetry
from .requests import OPERATIONS, and_conditions, build_request
from .reserve import Reservation, lost
from .send import (
    Request,
    conditional_check_error,
    derive_token,
    new_token,
    request_clock,
    send,
)

if TYPE_CHECKING:
    from pynamodb.connection import TableConnection
    from pynamodb.expressions.condition import Condition
    from pynamodb.expressions.update import Action

#: The method a caller called, by record operation: spans and logs name the method.
METHODS: Final[dict[RecordOp, str]] = {"put": "save", "update": "update", "delete": "delete"}

#: No lock keys (the first plan's ``not_ours``).
_NONE: Final[frozenset[str]] = frozenset()


#: The unique values a write wants: fixed (a save's, a delete's none), or computed from what is
#: stored (an update's, whose actions apply to the stored values).
Desire = dict[str, Any] | Callable[[Stored], dict[str, Any]]


class Intent(NamedTuple):
    """One write as the caller asked for it.

    A named tuple: made by every write, cheaper to make than a frozen dataclass (docs/architecture.md, Speed).
    """

    op: RecordOp
    condition: Condition | None
    actions: list[Action] | None
    add_version_condition: bool
    token: str | None
    #: The record's owner key, serialized, when already computed (checking the key computes it).
    owner: OwnerKey | None = None
    #: The reservations the write claims (``save(reservations=...)``), and their claims: lock key -> token.
    reservations: tuple[Reservation, ...] = ()
    claims: Mapping[str, str] = MappingProxyType({})


def intent_plan(
    context: ModelContext,
    instance: Model,
    op: RecordOp,
    actions: Sequence[Action] | None,
    known: Stored | None,
    changes: dict[str, Any] | None = None,
) -> tuple[Stored, Desire | None]:
    """What a write assumes is stored, and the values it wants given what is stored.

    None as the second item: an ``update`` that touches no unique attribute (a plain UpdateItem).
    ``changes``: an update's :meth:`~ModelContext.update_changes`, when already read.
    """
    if op == "put":
        return known or ABSENT, context.values(instance)
    # Unknown state: guess the instance's own values; the compare-and-swap checks the guess.
    guess = known or Stored(exists=True, values=context.values(instance))
    if op == "delete":
        return guess, {}
    if changes is None:
        changes = updates.update_changes(context, actions or ())
    # An update may create the record: where a record without unique values holds locks (its
    # defaults, or nulls_distinct=False), even one changing none of them is planned.
    if not changes and not context.planner.defaults_hold_locks:
        return Stored(exists=True), None
    return guess, _updating(context.planner, changes)


def _updating(planner: Planner, changes: dict[str, Any]) -> Callable[[Stored], dict[str, Any]]:
    """An update's desire: its changes applied to what is stored."""
    return lambda stored: planner.updated(stored, changes)


def plan_once(
    context: ModelContext, op: RecordOp, assumed: Stored, desire: Desire, not_ours: frozenset[str] = frozenset()
) -> tuple[Plan, dict[str, Any]]:
    """The plan of one request, and the values it writes."""
    desired = desire if isinstance(desire, dict) else desire(assumed)
    if op == "delete":
        return context.planner.delete(assumed, not_ours=not_ours), desired
    return context.planner.write(op, assumed, desired, not_ours=not_ours), desired


def write(context: ModelContext, instance: Model, intent: Intent, assumed: Stored, desire: Desire) -> Any:
    """Plan, send, and re-plan from the stored item when the view was stale (at most ``MAX_PLANS``).

    Traced as one span when a tracer provider is configured (:mod:`pynamodb_unique._write.telemetry`);
    a watched write counts and logs its requests.

    Raises:
        UniqueViolation: a value is held by another record.
        ConditionFailed: the caller's condition or the version check failed.
        StaleWrite: the record kept changing.
    """
    watched = _telemetry.watch(METHODS[intent.op], context.model.__name__, context.model)
    if watched is not None:
        watched.start()
    try:
        base_token = intent.token
        not_ours = _NONE
        # The connection first: PynamoDB builds it anew after a change of table, and the lock
        # table of a model keeping locks in its own table is renewed with it.
        table = connection(context.model)
        sender, attempts = table.connection, context.read_retry_attempts
        locks = context.write_locks(table)
        # A caller's token resent keeps its first request's clock (expiring locks carry the time).
        now = request_clock(base_token) if locks.expiring else None
        step = 0
        while True:
            if step == MAX_PLANS:
                _stale(context, instance, intent.op)
            plan, desired = plan_once(context, intent.op, assumed, desire, not_ours)
            plan = claimed(plan, intent.claims)
            request = build_request(
                context,
                instance,
                plan,
                intent.condition,
                intent.actions,
                add_version_condition=intent.add_version_condition,
                locks=locks,
                now=now,
                owner=intent.owner,
            )
            step_token: str | None = None
            if request.transactional:
                # Made once per operation, and only when a request carries it.
                base_token = base_token or new_token()
                step_token = base_token if step == 0 else derive_token(base_token, step, request.arguments())
            if watched is not None:
                watched.sending(request.operation, len(request.items), step + 1)
            try:
                response = send(sender, request, step_token, attempts=attempts)
            except WriteFailed as failure:
                assumed, not_ours = _after_failure(context, instance, plan, failure, not_ours, intent.reservations)
                if step + 1 < MAX_PLANS:
                    _telemetry.replanned(context.model.__name__, METHODS[intent.op], step + 2, MAX_PLANS)
                step += 1
                continue
            if watched is not None:
                watched.consumed(response)
            response = after_success(context, instance, intent, plan, desired, response)
            break
    except BaseException as exc:
        if watched is not None:
            watched.end(exc)
        raise
    return response if watched is None else watched.ended(response)


def _stale(context: ModelContext, instance: Model, op: RecordOp) -> NoReturn:
    """Give up a write whose record kept changing: every plan met another stored state.

    Raises:
        StaleWrite: always.
    """
    _telemetry.stale(context.model.__name__, METHODS[op], f"the record kept changing ({MAX_PLANS} plans)")
    msg = f"{type(instance).__name__} {context.owner(instance)}: {StaleWrite.msg} ({MAX_PLANS} plans)"
    raise StaleWrite(msg)


#: The plan of every update that moves no unique value (shared: a plan is never changed once made).
_PLAIN_UPDATE: Final = Plan(RecordWrite("update", None), (), (), Stored(exists=True))


def plain_update_request(
    context: ModelContext,
    instance: Model,
    actions: Sequence[Action],
    condition: Condition | None,
    add_version_condition: bool,
    table: TableConnection | None = None,
) -> Request:
    """The UpdateItem of an update that changes no unique value: no lock moves, nothing to swap.

    A model that is not polymorphic sends PynamoDB's own UpdateItem; a polymorphic one adds a
    check of the stored class and asks for the item when it fails. ``table``: the model's
    connection, when at hand.
    """
    if context.planner.discriminator is None:
        kwargs = update_kwargs(instance, actions, condition, add_version_condition=add_version_condition, table=table)
        return Request([kwargs], "UpdateItem")
    # A polymorphic record may hold another class's item: its locks follow that class's
    # constraints, which this update cannot plan; the class check refuses it before writing.
    checked = and_conditions(condition, context.planner.class_check())
    return build_request(
        context,
        instance,
        _PLAIN_UPDATE,
        checked,
        actions,
        add_version_condition=add_version_condition,
        locks=context.locks(),
    )


def plain_update(
    context: ModelContext,
    instance: Model,
    actions: list[Action],
    condition: Condition | None,
    add_version_condition: bool,
) -> Any:
    """PynamoDB's UpdateItem (no unique value changes), with the library's retries of conflicts.

    The request is PynamoDB's ``update()``'s, built by its public builder and loaded into the
    instance as ``update()`` loads it; a failed condition raises ``ConditionFailed`` (an
    ``UpdateError`` whose cause is the ``ConditionalCheckFailedException``). No token: it is
    no transaction.

    Traced as one span, as :func:`write` is.
    """
    # In one function, as write() is: run by every update that moves no unique value.
    watched = _telemetry.watch("update", context.model.__name__, context.model)
    if watched is not None:
        watched.start()
    try:
        if watched is not None:
            watched.sending("UpdateItem", 1, 1)
        table = connection(context.model)
        request = plain_update_request(context, instance, actions, condition, add_version_condition, table)
        try:
            response = send(table.connection, request, None, attempts=context.read_retry_attempts)
        except WriteFailed as failure:
            refuse_other_class(context, failure.reasons[0].raw_item if failure.reasons[0] is not None else None)
            msg = f"{type(instance).__name__} {context.owner(instance)}: {ConditionFailed.msg}"
            error = conditional_check_error(failure.cause, "UpdateItem")
            raise ConditionFailed(msg, error) from error
        if watched is not None:
            watched.consumed(response)
        instance.deserialize(response["Attributes"])
    except BaseException as exc:
        if watched is not None:
            watched.end(exc)
        raise
    return response if watched is None else watched.ended(response)


def refuse_other_class(context: ModelContext, item: dict[str, Any] | None) -> None:
    """Refuse an update of a stored item of another class, as PynamoDB's update() refuses to load it.

    PynamoDB applies the update, then raises; this refuses before anything is written, since the
    item's locks follow its own class's constraints.
    """
    if item:
        stored_cls = stored_class(context.model, item)
        if stored_cls is not context.model:
            msg = f"Cannot update this item from the returned class: {stored_cls.__name__}"
            raise ValueError(msg)


def _after_failure(
    context: ModelContext,
    instance: Model,
    plan: Plan,
    failure: WriteFailed,
    not_ours: frozenset[str],
    reservations: tuple[Reservation, ...] = (),
) -> tuple[Stored, frozenset[str]]:
    """Read a failure: raise what the caller must see, or return what to re-plan from.

    Returns:
        The stored state to plan from, and the lock keys the next plan checks are not ours.

    Raises:
        ReservationLost: a claimed reservation no longer holds its values.
    """
    ours = frozenset({context.owner(instance)})
    outcome = decide(interpret([(action, ours) for action in plan.sent()], failure.reasons), not_ours)
    if isinstance(outcome, ClaimLost):
        raise lost(outcome.lost, reservations, failure.cause)
    if isinstance(outcome, Violated):
        violations = [context.violation(f, instance) for f in outcome.taken]
        _telemetry.violated(violations)
        raise UniqueViolation(violations, failure.cause)
    if isinstance(outcome, Unexplained):
        raise failure.cause
    if isinstance(outcome, LocksMoved):
        return plan.assumed, outcome.not_ours
    # What other records owned was learnt for a record state that is gone: forget it.
    item = outcome.item
    if item is None and (plan.record.op == "delete" or not plan.assumed.exists):
        # The failed condition implies the record exists; this backend sent no ALL_OLD item.
        item = records.read_stored(context, instance)
    if plan.record.op == "update":
        refuse_other_class(context, item)
    stored = context.stored_from_item(item)
    if stored.same_as(plan.assumed, context.planner):
        who = f"{type(instance).__name__} {context.owner(instance)}"
        msg = f"{who}: {ConditionFailed.msg} (the caller's condition or the version check)"
        error = conditional_check_error(failure.cause, OPERATIONS[plan.record.op], item)
        raise ConditionFailed(msg, error) from error
    return stored, _NONE


def after_success(
    context: ModelContext,
    instance: Model,
    intent: Intent,
    plan: Plan,
    desired: dict[str, Any],
    response: dict[str, Any],
    *,
    key: tuple[Any, ...] | None = None,
    load: bool = True,
) -> dict[str, Any]:
    """Make the instance reflect what is stored, as PynamoDB does after a write; return the response.

    Args:
        context: the model's context.
        instance: the record written.
        intent: the write as asked.
        plan: the plan that succeeded.
        desired: the unique values written.
        response: DynamoDB's response.
        key: the record key the write was planned under.
        load: load the stored item after a transactional update, as PynamoDB's ``update()``
            does (PynamoDB's ``TransactWrite`` does not: only literal actions are applied).
    """
    op, actions = intent.op, intent.actions or []
    if op == "delete":
        snapshot.remember(context, instance, ABSENT, key)
        return response
    if op == "put":
        instance.update_local_version_attribute()  # type: ignore[no-untyped-call] # unannotated in PynamoDB.
        snapshot.remember(context, instance, Stored(exists=True, values=desired, keys=plan.keys), key)
        return response
    if "Attributes" in response:
        # UpdateItem returned the stored item: load it, as PynamoDB's update() does.
        instance.deserialize(response["Attributes"])
        return response
    # A transaction returns no item, while PynamoDB's update() returns the item after the
    # write (ALL_NEW) and loads it. When the record did not exist, the condition proves that
    # item is the key with the literal actions applied; otherwise it is read once, consistently,
    # after the commit (what was read before may have changed in attributes no condition covers).
    instance.update_local_version_attribute()  # type: ignore[no-untyped-call] # unannotated in PynamoDB.
    if not load:
        updates.apply_literals(context, instance, actions)
        touched = updates.update_changes(context, actions)
        snapshot.remember(context, instance, _after_update(plan.assumed, desired, touched), key)
        return response
    image = None
    if not plan.assumed.exists:
        image = updates.updated_image(context, instance, context.key_item(instance), actions)
    if image is None:
        image = records.read_stored(context, instance)
    if image is None:
        # Deleted by another writer since the commit: the write succeeded all the same.
        updates.apply_literals(context, instance, actions)
        snapshot.remember(context, instance, Stored(exists=True, values=desired), key)
        return response
    instance.deserialize(image)
    return {**response, "Attributes": image}


def _after_update(assumed: Stored, desired: dict[str, Any], touched: Mapping[str, Any]) -> Stored:
    """What is stored after an update of ``assumed`` to ``desired``.

    The stored item keeps its class, and the stored texts of the values the update neither
    changed nor wrote (``touched``: the unique attributes its actions set or remove; a value set
    again is stored in the library's spelling).
    """
    verbatim = assumed.verbatim
    if verbatim:
        kept = {
            name: text
            for name, text in verbatim.items()
            if name not in touched and desired.get(name) == assumed.values.get(name)
        }
        verbatim = kept or None
    return Stored(exists=True, values=desired, source=assumed.source, verbatim=verbatim)
