"""The lock item's fields: owner fields encoded once, and read back, with no backend."""

from __future__ import annotations

from typing import Any

import pytest

from pynamodb_unique._core.constraint import CONSTRAINT, HELD, OWNER_HASH, OWNER_MODEL, OWNER_RANGE
from pynamodb_unique._core.lockitem import (
    OwnerKey,
    is_held,
    lock_namespace,
    lock_owner,
    owner_fields,
    stored_owner_fields,
)


@pytest.mark.parametrize(
    ("owner", "types", "expected"),
    [
        pytest.param(("ACCT#1",), ("S",), {OWNER_HASH: {"S": "ACCT#1"}}, id="hash"),
        pytest.param(
            ("ACCT#1", "PROFILE"),
            ("S", "S"),
            {OWNER_HASH: {"S": "ACCT#1"}, OWNER_RANGE: {"S": "PROFILE"}},
            id="hash-range",
        ),
        pytest.param(("7", "2"), ("N", "N"), {OWNER_HASH: {"N": "7"}, OWNER_RANGE: {"N": "2"}}, id="numbers"),
        pytest.param((b"\x01",), ("B",), {OWNER_HASH: {"B": b"\x01"}}, id="binary"),
        pytest.param(("AQ==",), ("B",), {OWNER_HASH: {"S": "AQ=="}}, id="binary-as-text"),
        pytest.param(
            ("ACCT#1", "PROFILE"),
            ("S",),
            {OWNER_HASH: {"S": "ACCT#1"}, OWNER_RANGE: {"S": "PROFILE"}},
            id="another-models-key",
        ),
    ],
)
def test_owner_fields__record_key__typed_as_its_key_attributes(
    owner: OwnerKey, types: tuple[str, ...], expected: dict[str, Any]
) -> None:
    """A record key becomes owner fields typed as its model's key attributes, and reads back as the same key."""
    fields = owner_fields(owner, types)
    assert fields == expected
    assert lock_owner(fields) == tuple(bytes(v) if isinstance(v, bytes) else v for v in owner)


def test_stored_fields__lock_item__read_through_the_codec() -> None:
    """A stored lock's owner fields, namespace and hold are read by the codec's functions."""
    lock = {
        "PK": {"S": "UNIQ#EMAIL#a@x.io"},
        OWNER_HASH: {"S": "ACCT#1"},
        OWNER_RANGE: {"S": "PROFILE"},
        OWNER_MODEL: {"S": "Account"},
        CONSTRAINT: {"S": "EMAIL"},
    }
    assert stored_owner_fields(lock) == {OWNER_HASH: {"S": "ACCT#1"}, OWNER_RANGE: {"S": "PROFILE"}}
    assert lock_namespace(lock) == "EMAIL"
    assert not is_held(lock)
    assert is_held({**lock, HELD: {"BOOL": True}})
    assert (lock_namespace(None), is_held(None)) == (None, False)
