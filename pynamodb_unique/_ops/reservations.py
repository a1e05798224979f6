"""Removing ended reservations: what ``repair(..., expired_reservations=True)`` does besides its fixes.

An ended reservation holds nothing (any write takes its value) and DynamoDB's TTL deletes it
within days; deleting it sooner only tidies the table. Each is one DeleteItem conditioned on the
lock being still that reservation and ended, so a value taken or reserved again since the audit
is left alone.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from .._core.outcome import WriteFailed
from .._model.context import context_of
from .._write.send import Request, send

if TYPE_CHECKING:
    from .._mixin import UniqueMixin
    from .collect import AuditReport


def remove_ended(model: type[UniqueMixin], report: AuditReport, *, apply: bool) -> int:
    """Delete the reservations the audit found ended; return how many were deleted (or would be, unless ``apply``)."""
    if not apply:
        return len(report.expired_reservations)
    context = context_of(model)
    assert context is not None  # noqa: S101 - an audited model keeps locks.
    locks = context.write_locks()
    now = int(time.time())
    removed = 0
    for lock_key, token in report.expired_reservations:
        request = Request([locks.codec.unreserve(lock_key, token, ended_before=now)], "DeleteItem")
        try:
            send(locks.connection.connection, request, None, attempts=context.read_retry_attempts)
        except WriteFailed:
            continue  # Claimed, released or taken since the audit: not an ended reservation any more.
        removed += 1
    return removed
