"""Whether a model's tables take its transactions: a strongly consistent global table does not.

A global table in multi-Region strong consistency (MRSC) rejects TransactWriteItems and has no
TTL, so no write that moves a lock can succeed there. A ``DescribeTable`` of each table tells
(``Table.MultiRegionConsistency == "STRONG"``); it is made once per table, endpoint and Region in
a process, when a model's writes first use the table, and its answer kept.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Final

from botocore.exceptions import ClientError
from pynamodb.exceptions import TableDoesNotExist

from ..exceptions import UniqueConfigError

if TYPE_CHECKING:
    from pynamodb.connection import TableConnection

    from .locks import LockTable

logger: Final = logging.getLogger("pynamodb_unique")

#: ``Table.MultiRegionConsistency`` of a global table that takes no transaction.
STRONG: Final = "STRONG"

#: What DescribeTable answered, by (table name, endpoint, Region): the table's
#: ``MultiRegionConsistency`` ("" for a table that is not a global table, or not in MRSC).
_described: dict[tuple[str, str | None, str | None], str] = {}
_lock: Final = threading.Lock()


def refuse_strong_consistency(model_name: str, records: TableConnection, locks: LockTable) -> None:
    """Refuse a model whose records table or lock table is an MRSC global table.

    Each table is described once per process (per table, endpoint and Region); a table that does
    not exist yet is described again next time, and its write fails as it would have. A policy
    that denies ``dynamodb:DescribeTable`` leaves the table unchecked, with a WARNING.

    Args:
        model_name: the model's name, for the message.
        records: the model's connection (its records table).
        locks: where its lock items live (maybe the same table).

    Raises:
        UniqueConfigError: a table is in multi-Region strong consistency, where DynamoDB refuses
            transactions.
    """
    tables = [records] if locks.shared else [records, locks.connection]
    for table in tables:
        if _consistency(table) == STRONG:
            kind = "records" if table is records else "lock"
            msg = (
                f"{model_name}: its {kind} table {table.table_name!r} is a global table with multi-Region "
                "strong consistency (MRSC), where DynamoDB supports no transactions (and no TTL); "
                "unique constraints write each value's lock in one transaction with its record. "
                "Use a table in multi-Region eventual consistency (MREC) or a single-Region table, "
                "and send the writes of unique values to one Region (see docs/global-tables.md)"
            )
            raise UniqueConfigError(msg)


def _consistency(table: TableConnection) -> str:
    """The table's ``MultiRegionConsistency`` ("" when none), described once per process."""
    client = table.connection
    key = (table.table_name, client.host, client.region)
    found = _described.get(key)
    if found is not None:
        return found
    try:
        description = table.describe_table() or {}
    except TableDoesNotExist:
        # Described again by the next write: the table may be created meanwhile.
        return ""
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") != "AccessDeniedException":
            raise
        # A policy written before this check: the writes go on as they did, told once.
        logger.warning(
            "cannot tell whether table %r takes transactions (dynamodb:DescribeTable denied); "
            "grant it (pynamodb_unique.iam_policy) so that an MRSC global table is refused",
            table.table_name,
        )
        found = ""
    else:
        found = str(description.get("MultiRegionConsistency") or "")
    with _lock:
        _described[key] = found
    return found
