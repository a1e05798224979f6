"""The lock codec: ready request JSON equal to what PynamoDB builds from the same conditions."""

from __future__ import annotations

from typing import Any

import pytest
from pynamodb.connection import TableConnection
from pynamodb.connection.base import MetaTable
from pynamodb.constants import ALL_OLD, ITEM, KEY
from pynamodb.expressions.condition import Condition
from pynamodb.expressions.operand import Path

from pynamodb_unique._core.constraint import CONSTRAINT, OWNER_HASH, OWNER_MODEL, OWNER_RANGE
from pynamodb_unique._model.locks import ABSENT, LockCodec

HASH_RANGE = (
    {OWNER_HASH: {"S": "ACCT#1"}, OWNER_RANGE: {"S": "PROFILE"}},
    {OWNER_HASH: {"S": "ACCT#2"}, OWNER_RANGE: {"S": "PROFILE"}},
)
NUMERIC = ({OWNER_HASH: {"N": "7"}}, {OWNER_HASH: {"N": "8"}})


def _connection(range_name: str | None) -> TableConnection:
    schema: dict[str, Any] = {
        "TableName": "t",
        "KeySchema": [{"AttributeName": "PK", "KeyType": "HASH"}],
        "AttributeDefinitions": [{"AttributeName": "PK", "AttributeType": "S"}],
    }
    if range_name is not None:
        schema["KeySchema"].append({"AttributeName": range_name, "KeyType": "RANGE"})
        schema["AttributeDefinitions"].append({"AttributeName": range_name, "AttributeType": "S"})
    return TableConnection("t", region="us-east-1", meta_table=MetaTable(schema))


def _owned(owner: dict[str, Any]) -> Condition:
    condition: Condition | None = None
    for field, value in owner.items():
        part = Path(field) == value
        condition = part if condition is None else condition & part
    assert condition is not None
    return condition


@pytest.mark.parametrize("range_name", ["SK", None], ids=["range-key", "hash-only"])
@pytest.mark.parametrize("owners", [HASH_RANGE, NUMERIC], ids=["string-owner", "number-owner"])
def test_codec__equals_pynamodb_builder(range_name: str | None, owners: tuple[dict[str, Any], ...]) -> None:
    """Put, transfer, release and check are exactly what PynamoDB builds from the conditions."""
    connection = _connection(range_name)
    codec = LockCodec("t", "PK", range_name)
    owner, previous = owners
    lock_range = "LOCK" if range_name else None
    free_or_mine = Path("PK").does_not_exist() | _owned(owner)
    attributes = {**owner, CONSTRAINT: {"S": "EMAIL"}, OWNER_MODEL: {"S": "Account"}}

    def build(key: str, condition: Condition, **kwargs: Any) -> dict[str, Any]:
        built: dict[str, Any] = connection.get_operation_kwargs(
            "UNIQ#EMAIL#a", lock_range, key=key, condition=condition, **kwargs
        )
        return built

    put = build(ITEM, free_or_mine, attributes=attributes, return_values_on_condition_failure=ALL_OLD)
    assert codec.put("UNIQ#EMAIL#a", owner, "EMAIL", "Account") == put
    transfer = build(
        ITEM, free_or_mine | _owned(previous), attributes=attributes, return_values_on_condition_failure=ALL_OLD
    )
    assert codec.put("UNIQ#EMAIL#a", owner, "EMAIL", "Account", previous) == transfer
    release = build(KEY, free_or_mine, return_values_on_condition_failure=ALL_OLD)
    assert codec.release("UNIQ#EMAIL#a", owner) == release
    check = build(KEY, Path("PK").does_not_exist() | ~_owned(owner))
    assert codec.not_ours("UNIQ#EMAIL#a", owner) == check


@pytest.mark.parametrize("range_name", ["SK", None], ids=["range-key", "hash-only"])
@pytest.mark.parametrize(
    "expected", [HASH_RANGE[1], NUMERIC[1], None], ids=["string-owner", "number-owner", "no-owner"]
)
def test_codec__repair_writes_equal_pynamodb_builder(range_name: str | None, expected: dict[str, Any] | None) -> None:
    """Repair's exact-owner conditions (and absence) are what PynamoDB builds from the conditions."""
    connection = _connection(range_name)
    codec = LockCodec("t", "PK", range_name)
    lock_range = "LOCK" if range_name else None
    condition: Condition
    if expected is None:
        condition = Path("PK").exists() & Path(OWNER_HASH).does_not_exist()
    else:
        condition = Path(OWNER_HASH) == expected[OWNER_HASH]
        condition &= (
            Path(OWNER_RANGE) == expected[OWNER_RANGE]
            if OWNER_RANGE in expected
            else Path(OWNER_RANGE).does_not_exist()
        )
    holder = HASH_RANGE[0]
    attributes = {**holder, CONSTRAINT: {"S": "EMAIL"}, OWNER_MODEL: {"S": "Account"}}
    delete = connection.get_operation_kwargs("UNIQ#EMAIL#a", lock_range, key=KEY, condition=condition)
    assert codec.delete_if("UNIQ#EMAIL#a", expected) == delete
    move = connection.get_operation_kwargs(
        "UNIQ#EMAIL#a", lock_range, key=ITEM, attributes=attributes, condition=condition
    )
    assert codec.put_if("UNIQ#EMAIL#a", holder, "EMAIL", "Account", expected) == move
    absent = Path("PK").does_not_exist()
    create = connection.get_operation_kwargs(
        "UNIQ#EMAIL#a", lock_range, key=ITEM, attributes=attributes, condition=absent
    )
    assert codec.put_if("UNIQ#EMAIL#a", holder, "EMAIL", "Account", ABSENT) == create
