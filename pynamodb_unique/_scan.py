"""Reading a whole table: DynamoDB's parallel scan on threads, with a cap on read capacity."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final

from pynamodb.connection import TableConnection
from pynamodb.pagination import PageIterator

#: DynamoDB's limit on TotalSegments of a parallel scan.
MAX_SEGMENTS: Final = 1_000_000

Page = list[dict[str, Any]]


def check_scan_options(segments: int, max_rate: float | None) -> None:
    """Refuse scan options DynamoDB or the rate limiter would refuse, before any request.

    Raises:
        ValueError: ``segments`` is not 1 to 1,000,000, or ``max_rate`` is not positive.
    """
    if not isinstance(segments, int) or not 1 <= segments <= MAX_SEGMENTS:
        msg = f"segments must be an integer from 1 to {MAX_SEGMENTS:,}, got {segments!r}"
        raise ValueError(msg)
    if max_rate is not None and not max_rate > 0:
        msg = f"max_rate must be a positive number of read capacity units per second, got {max_rate!r}"
        raise ValueError(msg)


def scan_pages(
    connection: TableConnection,
    on_page: Callable[[Page], None],
    *,
    segments: int = 1,
    max_rate: float | None = None,
) -> None:
    """Read every item of a table once, strongly consistent, and hand each page to ``on_page``.

    With ``segments > 1`` each segment of DynamoDB's parallel scan runs on its own thread, so
    ``on_page`` is called from several threads and must be thread-safe. Each segment holds at
    most two pages at a time (at most 1 MB each, DynamoDB's page limit): the one being read and
    the next one, requested meanwhile.

    Args:
        connection: the table to read.
        on_page: receives the raw items (DynamoDB JSON) of each page.
        segments: the number of parallel scan segments (and threads).
        max_rate: a cap on read capacity units consumed per second, shared evenly between the
            segments; PynamoDB's rate limiter paces the pages (a backend that reports no
            consumed capacity is not slowed).

    Raises:
        ValueError: bad ``segments`` or ``max_rate``.
        pynamodb.exceptions.ScanError: DynamoDB refused a scan; the other segments stop at
            their next page.
    """
    check_scan_options(segments, max_rate)
    stop = threading.Event()
    rate = max_rate / segments if max_rate is not None else None

    def read(segment: int) -> None:
        kwargs: dict[str, Any] = {"consistent_read": True}
        if segments > 1:
            kwargs.update(segment=segment, total_segments=segments)
        pages: PageIterator[dict[str, Any]] = PageIterator(connection.scan, (), kwargs, rate_limit=rate)
        # The next page is requested while this one is read: the wait for DynamoDB overlaps the
        # work on the items (the fetching thread waits on the network without holding the GIL).
        try:
            with ThreadPoolExecutor(max_workers=1, thread_name_prefix="uniq-scan-fetch") as fetcher:
                fetching = fetcher.submit(next, pages, None)
                while (page := fetching.result()) is not None:
                    if stop.is_set():
                        return
                    fetching = fetcher.submit(next, pages, None)
                    on_page(page.get("Items", []))
        except BaseException:
            stop.set()
            raise

    if segments == 1:
        read(0)
        return
    with ThreadPoolExecutor(max_workers=segments, thread_name_prefix="uniq-scan") as pool:
        futures = [pool.submit(read, segment) for segment in range(segments)]
        for future in futures:
            future.result()
