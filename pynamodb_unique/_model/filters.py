"""Evaluating a PynamoDB condition on a stored item, as DynamoDB would, without a request.

Audit, repair and backfill read a shared table once and sort its items by model with each model's
``Meta.unique_item_filter``; this evaluates those conditions on the scanned items (DynamoDB
JSON). Comparisons follow DynamoDB: values of different types never compare; strings and binary
compare by bytes, numbers by value.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from decimal import Decimal
from typing import Any, Final

from pynamodb.expressions.condition import (
    And,
    BeginsWith,
    Between,
    Comparison,
    Condition,
    Contains,
    Exists,
    In,
    IsType,
    Not,
    NotExists,
    Or,
)
from pynamodb.expressions.operand import Path, Value

from ..exceptions import UniqueConfigError
from .seam import size_path

_INDEX: Final = re.compile(r"^(.*)\[(\d+)\]$")
_MISSING: Final = object()


def _resolve(item: Mapping[str, Any], path: Path) -> Any:
    """The typed value (``{"S": ...}``) at a document path, or ``_MISSING``."""
    current: Any = {"M": item}
    for element in path.path:
        name, indexes = element, list[int]()
        while (match := _INDEX.match(name)) is not None:
            name = match.group(1)
            indexes.insert(0, int(match.group(2)))
        if not isinstance(current, dict) or "M" not in current or name not in current["M"]:
            return _MISSING
        current = current["M"][name]
        for index in indexes:
            if not isinstance(current, dict) or "L" not in current or index >= len(current["L"]):
                return _MISSING
            current = current["L"][index]
    return current


def _operand(item: Mapping[str, Any], operand: Any) -> Any:
    if isinstance(operand, Path):
        return _resolve(item, operand)
    if isinstance(operand, Value):
        return operand.value
    sized = size_path(operand)
    if sized is not None:
        value = _resolve(item, sized)
        if value is _MISSING:
            return _MISSING
        (kind, inner), *_ = value.items()
        size = len(inner.encode("utf-8")) if kind == "S" else len(inner)
        return {"N": str(size)}
    msg = f"unique_item_filter: {type(operand).__name__} operands cannot be evaluated on scanned items"
    raise UniqueConfigError(msg)


def _comparable(value: Any) -> tuple[str, Any] | None:
    """A scalar typed value as (type, value ordered as DynamoDB orders it); None otherwise."""
    if not isinstance(value, dict) or len(value) != 1:
        return None
    (kind, inner), *_ = value.items()
    if kind == "S" and isinstance(inner, str):
        return kind, inner.encode("utf-8")
    if kind == "N" and isinstance(inner, (str, int, Decimal)):
        return kind, Decimal(inner)
    if kind == "B" and isinstance(inner, (bytes, bytearray)):
        return kind, bytes(inner)
    return None


def _compare(operator: str, left: Any, right: Any) -> bool:
    """A comparison; with a missing operand ``<>`` is true and every other comparison false."""
    if left is _MISSING or right is _MISSING:
        return operator == "<>"
    a, b = _comparable(left), _comparable(right)
    if operator in ("=", "<>"):
        equal = a == b if a is not None and b is not None else bool(left == right)
        return equal if operator == "=" else not equal
    if a is None or b is None or a[0] != b[0]:
        return False
    ordered: bool = {"<": a[1] < b[1], "<=": a[1] <= b[1], ">": a[1] > b[1], ">=": a[1] >= b[1]}[operator]
    return ordered


def _contains(container: Any, element: Any) -> bool:
    if container is _MISSING or element is _MISSING:
        return False
    (kind, inner), *_ = container.items()
    if kind == "S":
        return isinstance(element.get("S"), str) and element["S"] in inner
    if kind in ("SS", "NS", "BS"):
        return next(iter(element.values())) in inner
    if kind == "L":
        return element in inner
    return False


def matches(condition: Condition, item: Mapping[str, Any]) -> bool:  # noqa: PLR0911 - one return per operator.
    """Whether ``item`` (DynamoDB JSON) satisfies ``condition``, as a FilterExpression would decide.

    Raises:
        UniqueConfigError: the condition uses an operand this evaluator does not know.
    """
    values = condition.values
    if isinstance(condition, And):
        return matches(values[0], item) and matches(values[1], item)
    if isinstance(condition, Or):
        return matches(values[0], item) or matches(values[1], item)
    if isinstance(condition, Not):
        return not matches(values[0], item)
    if isinstance(condition, Exists):
        return _resolve(item, values[0]) is not _MISSING
    if isinstance(condition, NotExists):
        return _resolve(item, values[0]) is _MISSING
    operands = [_operand(item, v) for v in values]
    if isinstance(condition, Comparison):
        return _compare(condition.operator, operands[0], operands[1])
    if isinstance(condition, Between):
        return _compare(">=", operands[0], operands[1]) and _compare("<=", operands[0], operands[2])
    if isinstance(condition, In):
        return any(_compare("=", operands[0], candidate) for candidate in operands[1:])
    if isinstance(condition, BeginsWith):
        a, b = _comparable(operands[0]), _comparable(operands[1])
        return a is not None and b is not None and a[0] == b[0] != "N" and a[1].startswith(b[1])
    if isinstance(condition, Contains):
        return _contains(operands[0], operands[1])
    if isinstance(condition, IsType):
        value, kind = operands
        return value is not _MISSING and bool(next(iter(kind.values())) in value)
    msg = f"unique_item_filter: {type(condition).__name__} cannot be evaluated on scanned items"
    raise UniqueConfigError(msg)
