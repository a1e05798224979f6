"""Turning a plan into DynamoDB request arguments with PynamoDB's own builders."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from pynamodb.attributes import VersionAttribute
from pynamodb.constants import ALL_OLD, ITEM, NUMBER
from pynamodb.expressions.condition import Condition
from pynamodb.expressions.operand import Path, Value
from pynamodb.expressions.update import Action, RemoveAction, SetAction

from ._constraint import OWNER_HASH, OWNER_RANGE
from ._locks import LockTable
from ._plan import Guard, LockNotOurs, LockPut, LockRelease, Plan, RecordOp, RecordWrite
from ._send import Request

if TYPE_CHECKING:
    from pynamodb.models import Model

#: The single-item operation of each record write.
OPERATIONS: Final = {"put": "PutItem", "update": "UpdateItem", "delete": "DeleteItem"}


def owner_key(instance: Model) -> tuple[Any, ...]:
    """The record's key as lock items store it: ``(hash,)`` or ``(hash, range)``, serialized."""
    hash_key, range_key = instance._get_hash_range_key_serialized_values()  # noqa: SLF001 - PynamoDB's key serializer.
    return (hash_key,) if range_key is None else (hash_key, range_key)


def owner_attributes(instance: Model) -> dict[str, dict[str, Any]]:
    """The owner fields of a lock item, typed as the record's key attributes are."""
    owner = owner_key(instance)
    attributes = instance.get_attributes()
    names = [instance._hash_keyname, instance._range_keyname]  # noqa: SLF001 - PynamoDB's key names.
    fields = (OWNER_HASH, OWNER_RANGE)
    return {
        field: {attributes[name].attr_type: value}
        for field, name, value in zip(fields, names, owner, strict=False)
        if name is not None
    }


def and_conditions(left: Condition | None, right: Condition | None) -> Condition | None:
    if left is None:
        return right
    if right is None:
        return left
    combined: Condition = left & right
    return combined


# The text of a guard's condition (expression and names) per shape; only its values change per write.
_GUARD_TEXT: dict[tuple[Any, ...], tuple[str, dict[str, str]]] = {}


def _guarded(instance: Model, op: RecordOp, guard: Guard) -> dict[str, Any]:
    """A put or delete whose only condition is the library's guard, its text compiled once per shape.

    Equal to PynamoDB's builder with the guard's condition (a unit test compares them); PynamoDB
    builds the request without a condition and the guard's expression is added to it.
    """
    if op == "put":
        kwargs = instance.get_save_kwargs_from_instance(return_values_on_condition_failure=ALL_OLD)
    else:
        kwargs = instance.get_delete_kwargs_from_instance(return_values_on_condition_failure=ALL_OLD)
    shape = (op, *guard.shape())
    text = _GUARD_TEXT.get(shape)
    if text is None:
        condition = guard.condition()
        if condition is None:
            return kwargs
        names: dict[str, str] = {}
        expression = condition.serialize(names, {})
        text = _GUARD_TEXT[shape] = (expression, {placeholder: name for name, placeholder in names.items()})
    expression, names = text
    kwargs["ConditionExpression"] = expression
    kwargs["ExpressionAttributeNames"] = dict(names)
    values = guard.values()
    if values:
        kwargs["ExpressionAttributeValues"] = {f":{i}": value for i, value in enumerate(values)}
    return kwargs


def record_kwargs(
    instance: Model,
    write: RecordWrite,
    condition: Condition | None,
    actions: Sequence[Action] | None,
    add_version_condition: bool,
) -> dict[str, Any]:
    """The request item for the record's own write, with the caller's and the library's conditions."""
    guard = write.guard
    if condition is None and write.op != "update" and guard is not None and not guard.planner.versioned:
        return _guarded(instance, write.op, guard)
    condition = and_conditions(condition, write.condition)
    if write.op == "put":
        if add_version_condition:
            return instance.get_save_kwargs_from_instance(
                condition=condition, return_values_on_condition_failure=ALL_OLD
            )
        # PynamoDB's public builder always adds the version check; this is the same builder without it.
        args, kwargs = instance._get_save_args(condition=condition, add_version_condition=False)  # noqa: SLF001
        (hash_key,) = args
        return instance._get_connection().get_operation_kwargs(  # noqa: SLF001
            hash_key,
            range_key=kwargs.get("range_key"),
            key=ITEM,
            attributes=kwargs["attributes"],
            condition=kwargs["condition"],
            return_values_on_condition_failure=ALL_OLD,
        )
    if write.op == "update":
        return instance.get_update_kwargs_from_instance(
            # The builder appends the version action to the list it is given: pass a copy.
            actions=list(actions or ()),
            condition=condition,
            return_values_on_condition_failure=ALL_OLD,
            add_version_condition=add_version_condition,
        )
    return instance.get_delete_kwargs_from_instance(
        condition=condition, return_values_on_condition_failure=ALL_OLD, add_version_condition=add_version_condition
    )


def lock_kwargs(
    instance: Model,
    locks: LockTable,
    action: LockPut | LockRelease | LockNotOurs,
    *,
    previous_owner: Model | None = None,
    owner: dict[str, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The request item for one lock action of ``instance``.

    Args:
        instance: the record taking or releasing the value.
        locks: where the lock items live.
        action: the lock action.
        previous_owner: for a put, a record releasing the same value in the same transaction;
            the put then also accepts a lock it owns (a transfer, as one action).
        owner: ``owner_attributes(instance)``, when already computed for this request.
    """
    codec = locks.codec
    if owner is None:
        owner = owner_attributes(instance)
    if isinstance(action, LockNotOurs):
        return codec.not_ours(action.key, owner)
    if isinstance(action, LockRelease):
        return codec.release(action.key, owner)
    previous = owner_attributes(previous_owner) if previous_owner is not None else None
    return codec.put(action.key, owner, action.constraint.name, type(instance).__name__, previous)


def build_request(
    instance: Model,
    plan: Plan,
    condition: Condition | None,
    actions: Sequence[Action] | None,
    *,
    add_version_condition: bool,
    locks: LockTable,
) -> Request:
    """The request for ``plan``: one item per action, in the order sent.

    Args:
        instance: the record being written (its key, attributes and version).
        plan: what to send.
        condition: the caller's own condition on the record.
        actions: the caller's update actions, for an ``update``.
        add_version_condition: PynamoDB's optimistic-locking switch.
        locks: where the lock items live.
    """
    sent = plan.sent()
    owner = owner_attributes(instance) if plan.transactional else None
    items = [
        record_kwargs(instance, action, condition, actions, add_version_condition)
        if isinstance(action, RecordWrite)
        else lock_kwargs(instance, locks, action, owner=owner)
        for action in sent
    ]
    if plan.transactional:
        return Request(plan, items, "TransactWriteItems")
    item = items[0]
    if plan.record.op == "update":
        item = {**item, "ReturnValues": "ALL_NEW"}
    return Request(plan, [item], OPERATIONS[plan.record.op])


def updated_image(instance: Model, item: Mapping[str, Any] | None, actions: Sequence[Action]) -> dict[str, Any] | None:
    """A stored item after literal update actions and the version bump: what ALL_NEW returns.

    Args:
        instance: the record updated, its local version already bumped.
        item: the item as stored before the update (DynamoDB JSON), if known.
        actions: the update's actions.

    Returns:
        The item after the update, or None when it cannot be known without reading it: the item
        is unknown, or an action is not a top-level ``set(literal)`` / ``remove()``.
    """
    if item is None:
        return None
    image = dict(item)
    for action in actions:
        path = action.values[0]
        if not isinstance(path, Path) or len(path.path) != 1:
            return None
        if isinstance(action, RemoveAction):
            image.pop(path.path[0], None)
        elif isinstance(action, SetAction) and isinstance(action.values[1], Value):
            image[path.path[0]] = action.values[1].value
        else:
            return None
    for name, attribute in instance.get_attributes().items():
        if isinstance(attribute, VersionAttribute):
            version = getattr(instance, name)
            if version is None:
                image.pop(attribute.attr_name, None)
            else:
                image[attribute.attr_name] = {NUMBER: attribute.serialize(version)}  # type: ignore[no-untyped-call] # unannotated in PynamoDB.
    return image
