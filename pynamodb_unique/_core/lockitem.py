"""A lock item's fields: who owns it, which model says so, what it holds; encoded and read here only."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .constraint import CONSTRAINT, HELD, OWNER_HASH, OWNER_MODEL, OWNER_RANGE, RESERVATION

#: A record's key as lock items store it, serialized: ``(hash,)`` or ``(hash, range)``.
OwnerKey = tuple[Any, ...]


def lock_owner(item: Mapping[str, Any] | None) -> tuple[Any, ...] | None:
    """The owner key stored in a lock item, serialized: ``(hash,)`` or ``(hash, range)``; None without one."""
    if not item or OWNER_HASH not in item:
        return None
    # Owner fields are typed as the record's key attributes: {"S": ...}, {"N": ...} or {"B": ...}.
    owner_hash = next(iter(item[OWNER_HASH].values()))
    if OWNER_RANGE in item:
        return (owner_hash, next(iter(item[OWNER_RANGE].values())))
    return (owner_hash,)


def lock_owner_model(item: Mapping[str, Any] | None) -> str | None:
    """The class name of the model whose record owns a lock item; None when it does not say."""
    value = (item or {}).get(OWNER_MODEL, {}).get("S")
    return value if isinstance(value, str) else None


def owner_fields(owner: OwnerKey, types: Sequence[str]) -> dict[str, dict[str, Any]]:
    """A record key as a lock item's owner fields, each typed as the record's key attribute.

    Args:
        owner: the record key, serialized: ``(hash,)`` or ``(hash, range)``.
        types: the DynamoDB types of the record's key attributes (``S``, ``N`` or ``B``), hash
            first; a part beyond them is a string.
    """
    fields: dict[str, dict[str, Any]] = {}
    for name, position in ((OWNER_HASH, 0), (OWNER_RANGE, 1)):
        if position < len(owner):
            value = owner[position]
            kind = types[position] if position < len(types) else "S"
            if isinstance(value, (bytes, bytearray)):
                fields[name] = {"B": bytes(value)}
            else:
                # A binary key given as text (an export's) is kept as the text it was given.
                fields[name] = {"S" if kind == "B" else kind: value}
    return fields


def stored_owner_fields(item: Mapping[str, Any]) -> dict[str, Any]:
    """Exactly the owner fields a stored lock item holds: a condition that it is still that record's."""
    return {name: item[name] for name in (OWNER_HASH, OWNER_RANGE) if name in item}


def lock_namespace(item: Mapping[str, Any] | None) -> str | None:
    """The namespace (a constraint's form) a stored lock item was written for; None when it does not say."""
    value = (item or {}).get(CONSTRAINT, {}).get("S")
    return value if isinstance(value, str) else None


def is_held(item: Mapping[str, Any] | None) -> bool:
    """Whether a stored lock item is a release hold (``hold=``): its value kept for its former owner."""
    return item is not None and HELD in item


def lock_reservation(item: Mapping[str, Any] | None) -> str | None:
    """The token of the reservation a lock item is (``Model.reserve()``); None for a record's lock or none."""
    value = (item or {}).get(RESERVATION, {}).get("S")
    return value if isinstance(value, str) else None
