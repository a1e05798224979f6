"""Reservations, the pure part: which locks a reservation takes, and a plan that claims them.

A reservation (``Model.reserve()``) is a lock item per reserved value that names no owner record
but a random token, and ends at ``held_until``. A record's write claims it by putting its own
plain lock conditioned on that token (:attr:`~pynamodb_unique._core.plan.LockPut.claim`), so the
claimed lock is exactly the record's ordinary lock.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from ..exceptions import InvalidUniqueValue
from .constraint import Constraint
from .plan import Plan, Planner


def reserved_locks(planner: Planner, model: str, values: Mapping[str, Any]) -> dict[str, tuple[Constraint, bool]]:
    """The locks reserving ``values``: lock key -> (constraint, whether of its former form).

    Every constraint whose attributes ``values`` all name is reserved (one constraint's values, or
    several constraints' at once); each given attribute must belong to one of them. Values are
    normalized as on write; a partial constraint's condition is not applied (a reservation holds
    no record to test), and during a migration both forms of a value are reserved.

    Raises:
        InvalidUniqueValue: no values, a name no reserved constraint covers, or values that take
            no lock (a part is None).
    """
    names = set(values)
    covered = [c for c in planner.constraints if names.issuperset(c.attributes)]
    left = sorted(names.difference(*(c.attributes for c in covered)))
    if not values or left:
        known = "; ".join(f"{c.name}: {', '.join(c.attributes)}" for c in planner.constraints)
        which = f" ({', '.join(left)} completes none)" if left else ""
        msg = f"{model}: reserve() takes all the attributes of one or more unique constraints{which} ({known})"
        raise InvalidUniqueValue(msg)
    # A value of None is stored as no attribute, which loads as the attribute's fixed default.
    loaded = planner.as_loaded(values)
    locks: dict[str, tuple[Constraint, bool]] = {}
    for c in covered:
        current = c.key_of(loaded)
        if current is None:
            msg = f"{model}: the values of {c.name} take no lock (a part is None): nothing to reserve"
            raise InvalidUniqueValue(msg)
        locks.setdefault(current, (c, False))
        former = c.former.key_of(loaded) if c.former is not None else None
        if former is not None:
            locks.setdefault(former, (c, True))
    return locks


def claimed(plan: Plan, claims: Mapping[str, str]) -> Plan:
    """``plan`` with each lock put of a reserved key claiming its reservation (``claims``: lock key -> token).

    A reserved key the plan does not put is already the record's (it holds the value): nothing to claim.
    """
    if not claims or not any(put.key in claims for put in plan.puts):
        return plan
    puts = tuple(dataclasses.replace(put, claim=claims[put.key]) if put.key in claims else put for put in plan.puts)
    return plan._replace(puts=puts)
