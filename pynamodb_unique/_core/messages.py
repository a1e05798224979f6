"""Violation messages: ``message=`` templates checked when the class is defined, filled in on violation."""

from __future__ import annotations

import string
from typing import Any, Final

from pynamodb.constants import BINARY, NUMBER, STRING

from ..exceptions import UniqueConfigError, default_message

#: The fields a ``message`` template may use; ``value`` only on a single-attribute constraint.
MESSAGE_FIELDS: Final = ("value", "values", "attributes", "constraint")
#: A value of each keyable type, to try a template on when the class is defined.
SAMPLES: Final[dict[str, Any]] = {STRING: "x", NUMBER: 1, BINARY: b"x"}


def message_fields(constraint: str, attributes: tuple[str, ...], values: tuple[Any, ...]) -> dict[str, Any]:
    """The fields a ``message`` template is formatted with: values as given, lists joined by ``", "``."""
    fields: dict[str, Any] = {
        "values": ", ".join(str(v) for v in values),
        "attributes": ", ".join(attributes),
        "constraint": constraint,
    }
    if len(attributes) == 1:
        fields["value"] = values[0]
    return fields


def describe(
    template: str | None, constraint: str, attributes: tuple[str, ...], values: tuple[Any, ...], *, hashed: bool
) -> str:
    """A violation's message: ``template`` filled in, or the default sentence.

    A template whose format specification does not suit a value (``{value:d}`` given 4.5) falls
    back to the default sentence: the violation, not a formatting error, is what the caller must
    see.
    """
    if template is not None:
        try:
            return template.format(**message_fields(constraint, attributes, values))
        except (ValueError, TypeError):
            pass
    return default_message(attributes, values, hashed=hashed)


def _template_fields(template: str) -> list[str]:
    """Every replacement field of a ``str.format`` template, nested ones included.

    Raises:
        ValueError: the template is malformed (an unmatched brace).
    """
    names = []
    for _, field_name, format_spec, _ in string.Formatter().parse(template):
        if field_name is not None:
            names.append(field_name)
        if format_spec:
            names.extend(_template_fields(format_spec))
    return names


def check_message(
    where: str, constraint: str, attributes: tuple[str, ...], template: object, code: object, samples: tuple[Any, ...]
) -> None:
    """Refuse a ``message`` template that would fail when filled in, or a bad ``code``.

    Args:
        where: the model and constraint, for messages.
        constraint: the constraint's name.
        attributes: its Python attribute names.
        template: ``message=`` as given (None: the default sentence).
        code: ``code=`` as given.
        samples: a value of each attribute's type, to format the template with once.

    Raises:
        UniqueConfigError: the template is not a string, is malformed, names a field other than
            :data:`MESSAGE_FIELDS` (positional, attribute or index access included), uses
            ``{value}`` on a compound constraint, or cannot format a sample value; or ``code`` is
            not a non-empty string.
    """
    if not isinstance(code, str) or not code:
        msg = f"{where}: code must be a non-empty string, got {code!r}"
        raise UniqueConfigError(msg)
    if template is None:
        return
    if not isinstance(template, str):
        msg = f"{where}: message must be a str.format template, got {type(template).__name__}"
        raise UniqueConfigError(msg)
    try:
        fields = _template_fields(template)
    except ValueError as exc:
        msg = f"{where}: message {template!r} is not a valid str.format template: {exc}"
        raise UniqueConfigError(msg) from None
    allowed = MESSAGE_FIELDS if len(attributes) == 1 else MESSAGE_FIELDS[1:]
    for field_name in fields:
        if field_name not in allowed:
            hint = " ({value} is only for single-attribute constraints; use {values})" if field_name == "value" else ""
            known = ", ".join(f"{{{f}}}" for f in allowed)
            msg = f"{where}: message field {{{field_name}}} is not one of {known}{hint}"
            raise UniqueConfigError(msg)
    # Formatting a sample value of each attribute's type catches what parsing cannot (a format
    # specification that does not suit the value) before the first violation needs the message.
    try:
        template.format(**message_fields(constraint, attributes, samples))
    except (ValueError, TypeError) as exc:
        msg = f"{where}: message {template!r} cannot be formatted: {exc}"
        raise UniqueConfigError(msg) from None
