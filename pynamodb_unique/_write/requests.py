"""Turning a plan into DynamoDB request arguments: PynamoDB's builders for the record, the lock codec for locks."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, cast

from pynamodb.constants import ALL_OLD
from pynamodb.expressions.condition import Condition
from pynamodb.expressions.update import Action
from pynamodb.models import Model

from .._core.lockitem import OwnerKey
from .._core.plan import Guard, GuardTemplate, LockNotOurs, LockPut, LockRelease, Plan, RecordWrite
from .._model.context import context_of
from .._model.locks import LockTable
from .._model.seam import put_kwargs
from .send import TRANSACT_KINDS, Request

if TYPE_CHECKING:
    from .._model.context import ModelContext

#: The single-item operation of each record write.
OPERATIONS: Final = {"put": "PutItem", "update": "UpdateItem", "delete": "DeleteItem"}


def and_conditions(left: Condition | None, right: Condition | None) -> Condition | None:
    """Both conditions (either may be None)."""
    if left is None:
        return right
    if right is None:
        return left
    combined: Condition = left & right
    return combined


def guard_condition(guard: Guard) -> dict[str, Any]:
    """A guard's condition as request arguments (none when it checks nothing), as PynamoDB serializes it.

    Returns:
        ``ConditionExpression``, ``ExpressionAttributeNames`` and, when it has values,
        ``ExpressionAttributeValues``.
    """
    return _arguments(guard, *_filled(guard))


def _filled(guard: Guard) -> tuple[GuardTemplate | None, list[dict[str, Any]]]:
    """The template of the guard's shape (None: PynamoDB numbers its values otherwise), and the guard's values.

    Fast path, measured in benchmarks/run.py (docs/architecture.md): each shape's text is
    PynamoDB's serialization, made once per planner; a write fills in its values.
    """
    shape, found = guard.compiled()
    texts = guard.planner.guard_texts
    if shape not in texts:
        texts[shape] = _template(guard, found)
    template = texts[shape]
    if template is None or template.count != len(found):
        return None, found
    return template, found


def _arguments(guard: Guard, template: GuardTemplate | None, found: list[dict[str, Any]]) -> dict[str, Any]:
    """:func:`guard_condition` for the guard's template and values (:func:`_filled`)."""
    if template is None:
        return _serialized(guard.condition())
    if not template.expression:  # The shape checks nothing.
        return {}
    kwargs: dict[str, Any] = {
        "ConditionExpression": template.expression,
        "ExpressionAttributeNames": dict(template.names),
    }
    if found:
        kwargs["ExpressionAttributeValues"] = template.values(found)
    return kwargs


def _template(guard: Guard, found: list[dict[str, Any]]) -> GuardTemplate | None:
    """A shape's template, or None when PynamoDB numbers its values otherwise (it is then serialized each time)."""
    kwargs = _serialized(guard.condition())
    if not kwargs:
        return GuardTemplate("", {}, 0) if not found else None
    template = GuardTemplate(kwargs["ConditionExpression"], kwargs["ExpressionAttributeNames"], len(found))
    return template if kwargs.get("ExpressionAttributeValues", {}) == template.values(found) else None


def _serialized(condition: Condition | None) -> dict[str, Any]:
    """A condition's request arguments, as PynamoDB's builders give them (none for None)."""
    if condition is None:
        return {}
    placeholders: dict[str, str] = {}
    values: dict[str, Any] = {}
    kwargs: dict[str, Any] = {
        "ConditionExpression": condition.serialize(placeholders, values),
        "ExpressionAttributeNames": {placeholder: name for name, placeholder in placeholders.items()},
    }
    if values:
        kwargs["ExpressionAttributeValues"] = values
    return kwargs


class _GuardCondition(Condition):
    """A guard's condition, serialized from its shape's template when it comes first.

    PynamoDB's builders serialize a request's condition before its update actions, into empty
    placeholders: a guard alone, or leading an ``And`` (the version check), is numbered as its
    template is. Serialized after another condition (the caller's), it is PynamoDB's own.
    """

    def __init__(self, guard: Guard, template: GuardTemplate, found: list[dict[str, Any]]) -> None:
        super().__init__("AND")
        self.guard = guard
        self.template = template
        self.found = found

    def serialize(self, placeholder_names: dict[str, str], expression_attribute_values: dict[str, Any]) -> str:
        """The condition's text; its names and values added to the request's (as every PynamoDB condition does)."""
        if placeholder_names or expression_attribute_values:
            # Made only for a guard that checks something: its condition is not None.
            condition = cast("Condition", self.guard.condition())
            text: str = condition.serialize(placeholder_names, expression_attribute_values)
            return text
        placeholder_names.update(self.template.placeholders)
        if self.found:
            expression_attribute_values.update(self.template.values(self.found))
        return self.template.expression

    def __repr__(self) -> str:
        return repr(self.guard.condition())


def record_kwargs(
    instance: Model,
    write: RecordWrite,
    condition: Condition | None,
    actions: Sequence[Action] | None,
    add_version_condition: bool,
) -> dict[str, Any]:
    """The record's own write, built by PynamoDB's builders with the caller's and the library's conditions."""
    guard = write.guard
    beside: dict[str, Any] = {}
    if guard is not None:
        template, found = _filled(guard)
        if condition is None and write.op != "update" and not _versioned(instance):
            # The library's guard alone: its text made once per shape, beside the rest.
            beside = _arguments(guard, template, found)
        elif template is None:
            # A shape PynamoDB numbers otherwise: its own condition (None: it checks nothing).
            condition = and_conditions(condition, guard.condition())
        elif template.expression:
            # The template's text, serialized by the builder before an update's actions and a version check.
            condition = and_conditions(condition, _GuardCondition(guard, template, found))
    item = _built(instance, write.op, condition, actions, add_version_condition)
    item.update(beside)  # The builder's dict is new: the guard's arguments go after its own.
    return item


def _built(
    instance: Model,
    op: str,
    condition: Condition | None,
    actions: Sequence[Action] | None,
    add_version_condition: bool,
) -> dict[str, Any]:
    """The record's write by PynamoDB's builder for ``op`` (ALL_OLD on failure)."""
    if op == "put":
        return put_kwargs(instance, condition, add_version_condition=add_version_condition)
    # PynamoDB's own builders: the mixin refuses the instance's (PynamoDB's TransactWrite calls them).
    if op == "update":
        return Model.get_update_kwargs_from_instance(
            instance,
            # The builder appends the version action to the list it is given: pass a copy.
            actions=list(actions or ()),
            condition=condition,
            return_values_on_condition_failure=ALL_OLD,
            add_version_condition=add_version_condition,
        )
    return Model.get_delete_kwargs_from_instance(
        instance,
        condition=condition,
        return_values_on_condition_failure=ALL_OLD,
        add_version_condition=add_version_condition,
    )


def lock_kwargs(
    context: ModelContext,
    instance: Model,
    locks: LockTable,
    action: LockPut | LockRelease | LockNotOurs,
    *,
    previous_owner: Model | None = None,
    owner: dict[str, dict[str, Any]] | None = None,
    expires: Mapping[str, Any] | None = None,
    now: int | None = None,
) -> dict[str, Any]:
    """The request item for one lock action of ``instance``.

    Args:
        context: the instance's model context.
        instance: the record taking or releasing the value.
        locks: where the lock items live.
        action: the lock action.
        previous_owner: for a put, a record releasing the same value in the same transaction;
            the put then also accepts a lock it owns (a transfer, as one action).
        owner: the instance's owner fields, when already computed for this request.
        expires: the record's expiry after the write (:attr:`Plan.expires`), which a put carries.
        now: the time of the request in epoch seconds (default: the clock's), for expired locks
            and the end of holds.
    """
    codec = locks.codec
    if owner is None:
        owner = context.owner_fields(instance)
    if isinstance(action, LockPut) and action.claim is not None:
        model = type(instance).__name__
        return codec.claim(action.key, owner, action.namespace, model, action.claim, expires=expires, now=now)
    if isinstance(action, LockPut):
        previous = None
        if previous_owner is not None:
            previous_context = context_of(type(previous_owner))
            assert previous_context is not None  # noqa: S101 - transfers are between unique records.
            previous = previous_context.owner_fields(previous_owner)
        model = type(instance).__name__
        return codec.put(action.key, owner, action.namespace, model, previous, expires=expires, now=now)
    if isinstance(action, LockNotOurs):
        return codec.not_ours(action.key, owner)
    hold = action.constraint.hold
    if hold is None:
        return codec.release(action.key, owner)
    until = (int(time.time()) if now is None else now) + int(hold.total_seconds())
    return codec.hold(action.key, owner, action.namespace, type(instance).__name__, until)


def build_request(
    context: ModelContext,
    instance: Model,
    plan: Plan,
    condition: Condition | None,
    actions: Sequence[Action] | None,
    *,
    add_version_condition: bool,
    locks: LockTable,
    now: int | None = None,
    owner: OwnerKey | None = None,
) -> Request:
    """The request for ``plan``: one item per action, in the order sent (TransactItems for a transaction).

    Args:
        context: the instance's model context.
        instance: the record being written (its key, attributes and version).
        plan: what to send.
        condition: the caller's own condition on the record.
        actions: the caller's update actions, for an ``update``.
        add_version_condition: PynamoDB's optimistic-locking switch.
        locks: where the lock items live.
        now: the request's clock (:func:`~pynamodb_unique._write.send.request_clock`) when its locks may
            expire; default: the clock's.
        owner: the record's owner key, when already computed (:meth:`ModelContext.checked_owner`).
    """
    record = plan.record
    if not plan.transactional:
        item = record_kwargs(instance, record, condition, actions, add_version_condition)
        if record.op == "update":
            item["ReturnValues"] = "ALL_NEW"
        return Request([item], OPERATIONS[record.op])
    fields = context.fields_of(owner if owner is not None else context.owner(instance))
    # One clock reading per request: expired locks and the end of holds are judged against it.
    if now is None and locks.expiring:
        now = int(time.time())
    items = []
    for action in plan.sent():
        if isinstance(action, RecordWrite):
            item = record_kwargs(instance, action, condition, actions, add_version_condition)
        else:
            item = lock_kwargs(context, instance, locks, action, owner=fields, expires=plan.expires, now=now)
        items.append({TRANSACT_KINDS[action.op]: item})
    return Request(items, "TransactWriteItems", transactional=True)


def _versioned(instance: Model) -> bool:
    """Whether the record's model has a version attribute (its builder adds a check of its own)."""
    context = context_of(type(instance))
    return context is None or context.planner.versioned
