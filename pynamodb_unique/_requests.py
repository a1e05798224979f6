"""Turning a plan into DynamoDB request arguments: PynamoDB's builders for the record, the lock codec for locks."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from pynamodb.constants import ALL_OLD, RETURN_VALUES_ON_CONDITION_FAILURE
from pynamodb.expressions.condition import Condition
from pynamodb.expressions.update import Action, Update
from pynamodb.models import Model

from ._context import OwnerKey, context_of
from ._locks import LockTable
from ._plan import Guard, LockNotOurs, LockPut, LockRelease, Plan, RecordOp, RecordWrite
from ._pynamodb import put_kwargs
from ._send import TRANSACT_KINDS, Request

if TYPE_CHECKING:
    from ._context import ModelContext

#: Value placeholders ``:0``, ``:1``... of a guard's condition, numbered as its values come.
_PLACEHOLDERS: Final = tuple(f":{i}" for i in range(64))

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


def _guarded(
    context: ModelContext,
    instance: Model,
    op: RecordOp,
    guard: Guard,
    owner: OwnerKey | None,
    actions: Sequence[Action] | None,
) -> dict[str, Any]:
    """A record write whose only condition is the library's guard, its text compiled once per shape.

    Equal to PynamoDB's builder with the guard's condition (a unit test compares them). A put's
    item is PynamoDB's public ``serialize()`` (what ``save()`` sends: the key and every attribute,
    null-checked; a versioned model never comes here); a delete, being only the key, is built
    here; an update's actions are serialized by PynamoDB's ``Update`` after the guard, sharing its
    placeholders, as PynamoDB's builder numbers them.
    """
    parts = _guard_parts(guard)
    if op == "update":
        return update_item(context, instance, None, actions or (), guard=parts, transactional=True, owner=owner)
    if op == "put":
        body, value = "Item", instance.serialize()
    else:
        body, value = "Key", context.key_of(owner or context.owner(instance))
    # ModelContext.table_name's reading, without the property's call: every write comes here.
    table_name = context.model.Meta.table_name
    if parts is None:
        return {"TableName": table_name, body: value, RETURN_VALUES_ON_CONDITION_FAILURE: ALL_OLD}
    expression, names, values = parts
    # Every argument in one literal: a dict built key by key is resized on its sixth.
    kwargs = {
        "TableName": table_name,
        body: value,
        RETURN_VALUES_ON_CONDITION_FAILURE: ALL_OLD,
        "ConditionExpression": expression,
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": values,
    }
    if not values:
        del kwargs["ExpressionAttributeValues"]
    return kwargs


def update_item(
    context: ModelContext,
    instance: Model,
    condition: Condition | None,
    actions: Sequence[Action],
    *,
    guard: tuple[str, dict[str, str], dict[str, Any]] | None = None,
    transactional: bool = False,
    owner: OwnerKey | None = None,
) -> dict[str, Any]:
    """PynamoDB's ``update()`` request (``ReturnValues`` ALL_NEW), built without its table lookups.

    For a model without a version attribute; equal to PynamoDB's builder (a unit test compares
    them): the condition's placeholders first, then the actions'.

    Args:
        context: the instance's model context.
        instance: the record.
        condition: the caller's condition.
        actions: the update actions.
        guard: with ``transactional``, the library's guard as compiled (:func:`_guard_parts`),
            instead of ``condition`` (None: no condition).
        transactional: the update of a transaction, which asks for the stored item when its
            condition fails (ALL_OLD) instead of the item after the write.
        owner: the record's owner key, when already computed (its key is built from it).
    """
    # PynamoDB's placeholders map names to placeholders (the condition's first), inverted below.
    placeholders: dict[str, str] = {}
    values: dict[str, Any] = {}
    key = context.key_of(owner) if owner is not None else context.key_item(instance)
    # ModelContext.table_name's reading, without the property's call: every update comes here.
    kwargs: dict[str, Any] = {"TableName": context.model.Meta.table_name, "Key": key}
    if transactional:
        if guard is not None:
            kwargs["ConditionExpression"], names, values = guard
            for placeholder, name in names.items():
                placeholders[name] = placeholder
        kwargs[RETURN_VALUES_ON_CONDITION_FAILURE] = ALL_OLD
    else:
        if condition is not None:
            if not isinstance(condition, Condition):
                msg = "'condition' must be an instance of Condition"  # type: ignore[unreachable] # untyped callers; PynamoDB's words.
                raise ValueError(msg)
            kwargs["ConditionExpression"] = condition.serialize(placeholders, values)
        kwargs["ReturnValues"] = "ALL_NEW"
    kwargs["UpdateExpression"] = Update(*actions).serialize(placeholders, values)
    if placeholders:
        # Inverted with a loop: a comprehension is a function of its own (CPython 3.11), and
        # dict(zip()) C code no other part of a write runs (each costs more to fetch from a cold
        # cache than to run).
        names = {}
        for name, placeholder in placeholders.items():
            names[placeholder] = name
        kwargs["ExpressionAttributeNames"] = names
    if values:
        kwargs["ExpressionAttributeValues"] = values
    return kwargs


def guard_condition(guard: Guard) -> dict[str, Any]:
    """A guard's condition as request arguments (none when it checks nothing), its text compiled once per shape.

    Returns:
        ``ConditionExpression``, ``ExpressionAttributeNames`` and, when it has values,
        ``ExpressionAttributeValues``, as PynamoDB's builders give them for the same condition.
    """
    parts = _guard_parts(guard)
    if parts is None:
        return {}
    expression, names, values = parts
    kwargs: dict[str, Any] = {"ConditionExpression": expression, "ExpressionAttributeNames": names}
    if values:
        kwargs["ExpressionAttributeValues"] = values
    return kwargs


def _guard_parts(guard: Guard) -> tuple[str, dict[str, str], dict[str, Any]] | None:
    """:func:`guard_condition`'s expression, names and values (empty: none), or None: nothing to check."""
    shape, found = guard.compiled()
    texts = guard.planner.guard_texts
    text = texts.get(shape)
    if text is None:
        condition = guard.condition()
        if condition is None:
            return None
        names: dict[str, str] = {}
        expression = condition.serialize(names, {})
        text = texts[shape] = (expression, {placeholder: name for name, placeholder in names.items()})
    # Placeholders numbered in order, taken from a table (no number formatted per write); a loop,
    # not dict(zip()) (C code no other part of a write runs).
    numbered = _PLACEHOLDERS if len(found) <= len(_PLACEHOLDERS) else [f":{i}" for i in range(len(found))]
    values = {}
    i = 0
    for value in found:
        values[numbered[i]] = value
        i += 1  # noqa: SIM113 - enumerate() is C code no other part of a write runs.
    return text[0], {**text[1]}, values


def record_kwargs(
    instance: Model,
    write: RecordWrite,
    condition: Condition | None,
    actions: Sequence[Action] | None,
    add_version_condition: bool,
    owner: OwnerKey | None = None,
    context: ModelContext | None = None,
) -> dict[str, Any]:
    """The request item for the record's own write, with the caller's and the library's conditions.

    ``owner`` is the record's owner key, and ``context`` its model's, when already at hand.
    """
    guard = write.guard
    # The writer's own version check (a polymorphic write may guard another class's item).
    writer = context or context_of(type(instance))
    versioned = writer is None or writer.planner.versioned
    if (
        writer is not None
        and condition is None
        and guard is not None
        and not versioned
        and (write.op != "update" or actions)
    ):
        return _guarded(writer, instance, write.op, guard, owner, actions)
    condition = and_conditions(condition, write.condition)
    if write.op == "put":
        return put_kwargs(instance, condition, add_version_condition=add_version_condition)
    # PynamoDB's own builders: the mixin refuses the instance's (PynamoDB's TransactWrite calls them).
    if write.op == "update":
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
        now: the request's clock (:func:`~pynamodb_unique._send.request_clock`) when its locks may
            expire; default: the clock's.
        owner: the record's owner key, when already computed (:meth:`ModelContext.checked_owner`).
    """
    record = plan.record
    if not (plan.releases or plan.puts or plan.checks):  # Plan.transactional, without its call.
        # The record's own write alone: its key serialized once when it is all a delete sends.
        if owner is None and record.op == "delete":
            owner = context.owner(instance)
        item = record_kwargs(instance, record, condition, actions, add_version_condition, owner, context)
        if record.op == "update":
            item["ReturnValues"] = "ALL_NEW"
        return Request([item], OPERATIONS[record.op])
    # The owner key, serialized once: the lock items name it, a record delete is only the key.
    if owner is None:
        owner = context.owner(instance)
    fields = context.fields_of(owner)
    # One clock reading per request: expired locks and the end of holds are judged against it.
    if now is None and locks.expiring:
        now = int(time.time())
    items = []
    # A loop, not a comprehension (a function of its own on CPython 3.11). The record told by
    # identity, not isinstance(): the plan holds one record write, and its other actions are locks'.
    for action in plan.sent():
        if action is record:
            item = record_kwargs(instance, record, condition, actions, add_version_condition, owner, context)
        else:
            item = lock_kwargs(context, instance, locks, action, owner=fields, expires=plan.expires, now=now)  # type: ignore[arg-type] # a lock action: only the record is not (typing.cast would be a call).
        items.append({TRANSACT_KINDS[action.op]: item})
    return Request(items, "TransactWriteItems", transactional=True)
