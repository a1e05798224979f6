"""Reading a whole table: DynamoDB's parallel scan on threads, with a cap on read capacity."""

from __future__ import annotations

import json
import threading
import zlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final

from pynamodb.connection import TableConnection
from pynamodb.pagination import PageIterator

HTTP_OK: Final = 200

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

    def fetch(pages: PageIterator[dict[str, Any]]) -> dict[str, Any] | None:
        _raw_items.active = True
        return next(pages, None)

    def read(segment: int) -> None:
        kwargs: dict[str, Any] = {"consistent_read": True}
        if segments > 1:
            kwargs.update(segment=segment, total_segments=segments)
        pages: PageIterator[dict[str, Any]] = PageIterator(connection.scan, (), kwargs, rate_limit=rate)
        # The next page is requested while this one is read: the wait for DynamoDB overlaps the
        # work on the items (the fetching thread waits on the network without holding the GIL).
        try:
            with ThreadPoolExecutor(max_workers=1, thread_name_prefix="uniq-scan-fetch") as fetcher:
                fetching = fetcher.submit(fetch, pages)
                while (page := fetching.result()) is not None:
                    if stop.is_set():
                        return
                    fetching = fetcher.submit(fetch, pages)
                    on_page(page.get("Items", []))
        except BaseException:
            stop.set()
            raise

    events = connection.connection.client.meta.events
    events.register(_PARSE_EVENT, _take_raw_items, unique_id=_HANDLER_ID)
    try:
        if segments == 1:
            read(0)
            return
        with ThreadPoolExecutor(max_workers=segments, thread_name_prefix="uniq-scan") as pool:
            futures = [pool.submit(read, segment) for segment in range(segments)]
            for future in futures:
                future.result()
    finally:
        events.unregister(_PARSE_EVENT, unique_id=_HANDLER_ID)


# botocore reads a Scan's response by walking its JSON against the operation's model, value by
# value: most of the client's time in a scan. Its items are DynamoDB JSON already, which is what
# the scan's readers take, so the fetching threads take them as json.loads gives them and let
# botocore read the rest of the page. A page with binary values is left to botocore (it decodes
# their base64), and so is every other thread's request on the same client. So is a damaged page
# (cut short, or not matching its x-amz-crc32 header): botocore's CRC32 check then resends it.
_PARSE_EVENT: Final = "before-parse.dynamodb.Scan"
_HANDLER_ID: Final = "pynamodb-unique-scan-items"
_BINARY: Final = (b'"B"', b'"BS"')
#: DynamoDB's checksum of a response body, which botocore checks (and resends on a mismatch).
_CHECKSUM_HEADER: Final = "x-amz-crc32"
_raw_items = threading.local()


def _take_raw_items(response_dict: dict[str, Any], customized_response_dict: dict[str, Any], **_: Any) -> None:
    """The ``before-parse`` hook: a scan page's items straight from its JSON (see above)."""
    body = response_dict.get("body")
    if (
        not getattr(_raw_items, "active", False)
        or response_dict.get("status_code") != HTTP_OK
        or not isinstance(body, bytes)
        or any(marker in body for marker in _BINARY)
    ):
        return
    checksum = response_dict.get("headers", {}).get(_CHECKSUM_HEADER)
    if checksum is not None and str(zlib.crc32(body)) != checksum:
        return
    try:
        page = json.loads(body)
    except ValueError:
        return
    items = page.pop("Items", None)
    if items is None:
        return
    customized_response_dict["Items"] = items
    response_dict["body"] = json.dumps(page).encode()
