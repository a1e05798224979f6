"""Progress on a terminal: a bar on stderr while a scan or the fixes run, nothing elsewhere."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import TypeVar

from botocore.exceptions import BotoCoreError
from pynamodb.exceptions import PynamoDBException
from tqdm import tqdm

from .._model.context import context_of
from ._common import Model, errors

T = TypeVar("T")


def scan_estimate(model: Model) -> int | None:
    """About how many items an audit of ``model`` scans: DescribeTable's ItemCount of its table and lock table.

    DynamoDB refreshes ItemCount about every six hours, so this is an estimate for a progress
    bar. None when unknown (no DescribeTable permission, a missing table, a count of 0).
    """
    try:
        total = int(model.describe_table().get("ItemCount") or 0)
        context = context_of(model)
        locks = context.locks() if context is not None else None
        if locks is not None and not locks.shared:
            total += int(locks.connection.describe_table().get("ItemCount") or 0)
    except (PynamoDBException, BotoCoreError):
        return None
    return total or None


def _progress(
    label: str, total: int | None = None, *, show: bool = True
) -> tuple[Callable[[int], None], Callable[[], None]]:
    """A thread-safe progress bar on a terminal (stderr), nothing otherwise or without ``show``: (update, close).

    With a ``total`` the bar shows a percentage and an estimated time left.
    """
    disable = not (show and sys.stderr.isatty())
    bar = tqdm(total=total, desc=label, unit=" items", file=sys.stderr, disable=disable)
    lock = threading.Lock()

    def update(count: int) -> None:
        with lock:
            bar.update(count)

    return update, bar.close


def with_progress(
    label: str, model: Model, run: Callable[[Callable[[int], None]], T], *, total: int | None, show: bool
) -> T:
    """Run ``run(update)`` under a progress bar (see :func:`_progress`), closed however it ends.

    Raises:
        click.ClickException: what DynamoDB or the library refused, as one line (exit status 2).
    """
    update, close = _progress(label, total=total, show=show)
    try:
        with errors(model):
            return run(update)
    finally:
        close()
