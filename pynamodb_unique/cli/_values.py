"""Values typed on the command line or given as JSON, read as the model's attributes read them.

``explain`` takes records as JSON (``--item``, ``--stored``), ``inspect`` a value as NAME=VALUE.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from typing import Any, Final, NoReturn

from pynamodb.attributes import Attribute
from pynamodb.constants import BINARY, BINARY_SET, BOOLEAN, LIST, MAP, NUMBER, NUMBER_SET, STRING, STRING_SET

from .._mixin import UniqueMixin
from .._model.context import context_of
from .._model.registry import constraints_of
from .._ops.collect import jsonable
from ._common import Model, fail

#: What a JSON value must look like for each DynamoDB type, for messages.
_EXPECTED: Final = {
    STRING: "a string",
    NUMBER: "a number",
    BINARY: "base64 text",
    BOOLEAN: "true or false",
    MAP: "a JSON object",
    LIST: "a JSON array",
    STRING_SET: "an array of strings",
    NUMBER_SET: "an array of numbers",
    BINARY_SET: "an array of base64 texts",
}


def _label(option: str) -> str:
    """The start of a message about a value of ``option`` (none for inspect's NAME=VALUE arguments)."""
    return f"{option}: " if option else ""


def _is_number(text: Any) -> bool:
    try:
        return isinstance(text, str) and Decimal(text).is_finite()
    except InvalidOperation:
        return False


def _serializes_as(attr_type: str, value: Any, serialized: Any) -> bool:
    """Whether ``serialized`` is what DynamoDB accepts for ``attr_type`` (PynamoDB passes some values unchecked)."""
    members = list(serialized) if isinstance(serialized, (list, set, frozenset)) else None
    checks: dict[str, Callable[[], bool]] = {
        STRING: lambda: isinstance(serialized, str),
        NUMBER: lambda: not isinstance(value, bool) and _is_number(serialized),
        BINARY: lambda: isinstance(serialized, bytes),
        BOOLEAN: lambda: isinstance(serialized, bool),
        MAP: lambda: isinstance(serialized, dict),
        LIST: lambda: isinstance(serialized, list),
        STRING_SET: lambda: members is not None and all(isinstance(m, str) for m in members),
        NUMBER_SET: lambda: members is not None and all(_is_number(m) for m in members),
        BINARY_SET: lambda: members is not None and all(isinstance(m, bytes) for m in members),
    }
    check = checks.get(attr_type)
    return check is None or check()


def _python_value(name: str, attribute: Attribute[Any], value: Any, option: str) -> Any:
    """A JSON or command-line value as the attribute's Python value (binary as base64 text).

    Raises:
        click.ClickException: the value cannot be the attribute's (exit status 2).
    """
    kind = f"{type(attribute).__name__} (DynamoDB type {attribute.attr_type})"
    expected = _EXPECTED.get(attribute.attr_type, "its type")
    if value is None:
        return None
    parsed = value
    if isinstance(value, str) and attribute.attr_type == BINARY:
        try:
            parsed = base64.b64decode(value, validate=True)
        except binascii.Error:
            fail(f"{_label(option)}{name} is a {kind}: expected base64 text, got {value!r}")
    elif isinstance(value, str) and attribute.attr_type in (STRING, NUMBER):
        try:
            # A string or number attribute reads its own serialized form (numbers, dates, ...).
            parsed = attribute.deserialize(value)
        except Exception as exc:  # noqa: BLE001 - any parse failure is the user's input.
            fail(f"{_label(option)}{name} is a {kind}: cannot read {value!r}: {exc}")
    try:
        serialized = attribute.serialize(parsed)
    except Exception:  # noqa: BLE001 - any refusal is the user's input.
        serialized = _NOT_SERIALIZED
    if serialized is _NOT_SERIALIZED or not _serializes_as(attribute.attr_type, parsed, serialized):
        fail(f"{_label(option)}{name} is a {kind}: expected {expected}, got {json.dumps(jsonable(value))}")
    return parsed


_NOT_SERIALIZED: Final = object()


def _accepted(model: Model) -> str:
    """The names ``inspect`` accepts, for messages."""
    return "; ".join(f"{c.name}: {', '.join(c.attributes)}" for c in constraints_of(model))


def _unknown_name(model: Model, name: str, option: str, *, constraints: bool) -> NoReturn:
    """Say why ``name`` is not an attribute, and what would be accepted."""
    attributes = model.get_attributes()
    constraint = next((c for c in constraints_of(model) if c.name == name), None)
    stored = next((n for n, a in attributes.items() if a.attr_name == name), None)
    if constraint is not None:
        parts = ", ".join(constraint.attributes)
        if constraints:
            example = " ".join(f"{a}=..." for a in constraint.attributes)
            fail(f"{_label(option)}{name} is the constraint on {parts}: name each of its attributes, as {example}")
        fail(f"{_label(option)}{name} is a constraint name, not an attribute: it constrains {parts}")
    if stored is not None:
        fail(f"{_label(option)}{name} is the stored name of {stored}: use Python attribute names, as {stored}")
    if constraints:
        fail(
            f"{_label(option)}{model.__name__} has no unique attribute or constraint named {name}; "
            f"name the attributes of one constraint, or a one-attribute constraint by its name ({_accepted(model)})"
        )
    fail(f"{_label(option)}{model.__name__} has no attribute {name}; its attributes: {', '.join(attributes)}")


def read_values(model: Model, raw: dict[str, Any], option: str, *, constraints: bool = False) -> dict[str, Any]:
    """Values keyed by Python attribute names (or, with ``constraints``, one-attribute constraint names), typed.

    Raises:
        click.ClickException: an unknown name or a value of the wrong type (exit status 2).
    """
    attributes = model.get_attributes()
    single = {c.name: c.attributes[0] for c in constraints_of(model) if len(c.attributes) == 1} if constraints else {}
    values: dict[str, Any] = {}
    for given, value in raw.items():
        name = given if given in attributes else single.get(given)
        if name is None:
            _unknown_name(model, given, option, constraints=constraints)
        if name in values:
            fail(f"{_label(option)}{name} is given twice")
        values[name] = _python_value(name, attributes[name], value, option)
    return values


def json_object(text: str | None, option: str) -> dict[str, Any] | None:
    """The JSON object given to ``option``; None when the option was not given.

    Raises:
        click.ClickException: the text is not JSON, or not a JSON object (exit status 2).
    """
    if text is None:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        fail(f"{option} is not JSON: {exc}")
    if not isinstance(value, dict):
        fail(f"{option} must be a JSON object keyed by Python attribute names")
    return value


def assumption(model: Model, op: str, instance: UniqueMixin) -> str:
    """What ``explain`` assumes is stored when not told (``--stored``), as the write itself would."""
    if op == "save":
        return "assuming no record is stored under this key (a new record); pass --stored JSON to plan an overwrite"
    context = context_of(model)
    held = context.values(instance) if context is not None else {}
    shown = ", ".join(f"{name}={value!r}" for name, value in held.items() if value is not None)
    unset = ", ".join(name for name, value in held.items() if value is None)
    holds = shown or f"no unique value ({unset} unset)"
    if shown and unset:
        holds = f"{shown} and no other unique value ({unset} unset)"
    return f"assuming the stored record holds {holds}; pass --stored JSON to plan against the stored item"
