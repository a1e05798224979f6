"""What a failed write reports back to the engine, before it becomes an outcome."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pynamodb.exceptions import CancellationReason, PynamoDBException


class WriteFailed(Exception):
    """Internal: a condition failed; ``reasons[i]`` belongs to the ``i``-th item sent (``Plan.sent()[i]``)."""

    def __init__(self, reasons: list[CancellationReason | None], cause: PynamoDBException) -> None:
        super().__init__("write failed")
        self.reasons = reasons
        self.cause = cause
