"""Reading a lock item's fields: who owns it and which model says so."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .constraint import OWNER_HASH, OWNER_MODEL, OWNER_RANGE, RESERVATION

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


def lock_reservation(item: Mapping[str, Any] | None) -> str | None:
    """The token of the reservation a lock item is (``Model.reserve()``); None for a record's lock or none."""
    value = (item or {}).get(RESERVATION, {}).get("S")
    return value if isinstance(value, str) else None
