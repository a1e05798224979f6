"""Reading an update's actions: the unique values they set, and the item they leave."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from pynamodb.attributes import VersionAttribute
from pynamodb.constants import NUMBER
from pynamodb.expressions.operand import Path, Value
from pynamodb.expressions.update import Action, AddAction, DeleteAction, RemoveAction, SetAction

from ..exceptions import InvalidUniqueValue

if TYPE_CHECKING:
    from pynamodb.models import Model

    from .context import ModelContext

#: The update actions PynamoDB's ``Update`` accepts.
_ACTIONS: Final = (SetAction, RemoveAction, AddAction, DeleteAction)


def update_changes(context: ModelContext, actions: Sequence[Action]) -> dict[str, Any]:
    """New values of the unique attributes the actions touch; refuse what cannot be known.

    Raises:
        InvalidUniqueValue: an action other than ``.set(literal)`` or ``.remove()`` touches a
            unique attribute.
        ValueError: an item is no update action (PynamoDB's error, before any request).
    """
    changes: dict[str, Any] = {}
    for action in actions:
        if not isinstance(action, _ACTIONS):
            msg = f"unsupported action type: '{action.__class__.__name__}'"  # PynamoDB's words.
            raise ValueError(msg)  # noqa: TRY004 - PynamoDB's exception type, for its handlers.
        path = action.values[0]
        if not isinstance(path, Path):
            continue
        first = path.path[0]
        name = context.python_names.get(first, first)
        if name not in context.unique_set:
            continue
        literal = _literal(action)
        if literal is None:
            what = "the expiry" if name == context.planner.ttl else "the unique attribute"
            msg = f"update() may only .set(<literal>) or .remove() {what} {name!r}, got {action}"
            raise InvalidUniqueValue(msg)
        changes[name] = context.python_value(name, literal[1])
    return changes


def apply_literals(context: ModelContext, instance: Model, actions: Sequence[Action]) -> None:
    """Apply the top-level literal set/remove actions to the instance (others need a read)."""
    for action in actions:
        literal = _literal(action)
        name = context.python_names.get(literal[0], literal[0]) if literal is not None else None
        if literal is not None and name in context.attributes:
            setattr(instance, name, context.python_value(name, literal[1]))


def _literal(action: Action) -> tuple[str, dict[str, Any] | None] | None:
    """(attribute name, serialized value; None for a removal) of a top-level literal action; else None."""
    path = action.values[0]
    if not isinstance(path, Path) or len(path.path) != 1:
        return None
    if isinstance(action, RemoveAction):
        return path.path[0], None
    if isinstance(action, SetAction) and isinstance(action.values[1], Value):
        value: dict[str, Any] = action.values[1].value
        return path.path[0], value
    return None


def updated_image(
    context: ModelContext, instance: Model, item: Mapping[str, Any], actions: Sequence[Action]
) -> dict[str, Any] | None:
    """A stored item after literal update actions and the version bump: what ALL_NEW returns.

    Args:
        context: the model's context.
        instance: the record updated, its local version already bumped.
        item: the item as stored before the update (DynamoDB JSON).
        actions: the update's actions.

    Returns:
        The item after the update, or None when an action is not a top-level literal.
    """
    image = dict(item)
    for action in actions:
        literal = _literal(action)
        if literal is None:
            return None
        name, value = literal
        if value is None:
            image.pop(name, None)
        else:
            image[name] = value
    for name, attribute in context.attributes.items():
        if isinstance(attribute, VersionAttribute):
            version = getattr(instance, name)
            if version is None:
                image.pop(attribute.attr_name, None)
            else:
                image[attribute.attr_name] = {NUMBER: attribute.serialize(version)}  # type: ignore[no-untyped-call] # unannotated in PynamoDB.
    return image
