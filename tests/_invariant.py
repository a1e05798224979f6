"""The library's invariant, checked against a table's raw items."""

from __future__ import annotations

from collections import Counter
from typing import Any

from pynamodb.models import Model

from pynamodb_unique._core.constraint import CONSTRAINT, OWNER_HASH, OWNER_MODEL, OWNER_RANGE
from pynamodb_unique._core.keys import LOCK_PREFIX
from pynamodb_unique._model.registry import planner_of


def raw_items(model: type[Model]) -> list[dict[str, Any]]:
    """Every item of the model's table, as DynamoDB JSON (consistent scan, all pages)."""
    client = model._get_connection().connection.client
    items: list[dict[str, Any]] = []
    kwargs: dict[str, Any] = {"TableName": model.Meta.table_name, "ConsistentRead": True}
    while True:
        page = client.scan(**kwargs)
        items.extend(page["Items"])
        if "LastEvaluatedKey" not in page:
            return items
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def locks_and_records(model: type[Model]) -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]]]:
    """Split the table into lock items (by lock key) and records."""
    hash_name = model._hash_key_attribute().attr_name
    locks: dict[str, dict[str, Any]] = {}
    records = []
    for item in raw_items(model):
        key = item[hash_name]["S"]
        if key.startswith(LOCK_PREFIX):
            locks[key] = item
        else:
            records.append(item)
    return locks, records


def expected_locks(model: type[Model]) -> dict[str, tuple[str, ...]]:
    """Lock key -> owner key that the live records' unique values call for."""
    planner = planner_of(model)
    expected: dict[str, tuple[str, ...]] = {}
    seen: Counter[str] = Counter()
    _, records = locks_and_records(model)
    for item in records:
        instance = model.from_raw_data(item)
        values = {name: getattr(instance, name) for name in planner.unique_names}
        hash_key, range_key = instance._get_hash_range_key_serialized_values()
        owner = (hash_key,) if range_key is None else (hash_key, range_key)
        for key in planner.keys(values).values():
            if key is not None:
                seen[key] += 1
                expected[key] = owner
    duplicated = sorted(k for k, n in seen.items() if n > 1)
    assert not duplicated, f"records share unique values: {duplicated}"
    return expected


def actual_locks(model: type[Model]) -> dict[str, tuple[str, ...]]:
    """Lock key -> owner key as stored in the lock items."""
    locks, _ = locks_and_records(model)
    out = {}
    for key, item in locks.items():
        owner = (item[OWNER_HASH]["S"],)
        if OWNER_RANGE in item:
            owner = (*owner, item[OWNER_RANGE]["S"])
        out[key] = owner
    return out


def assert_invariant(model: type[Model]) -> None:
    """Lock items and live unique values match one to one; locks carry no profile data."""
    assert actual_locks(model) == expected_locks(model)
    range_attr = model._range_key_attribute()
    allowed = {model._hash_key_attribute().attr_name, OWNER_HASH, OWNER_RANGE, CONSTRAINT, OWNER_MODEL}
    if range_attr is not None:
        allowed.add(range_attr.attr_name)
    for item in locks_and_records(model)[0].values():
        assert set(item) <= allowed, f"lock item carries more than its key and owner: {sorted(item)}"
