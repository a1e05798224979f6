"""Whole-table scans (audit, backfill): the items a page reader gets are the ones botocore reads."""

from __future__ import annotations

import json
import threading
import zlib
from typing import Any

import pytest
from _backends import Backend, bind_model
from _damage import client
from botocore.awsrequest import AWSResponse
from models import Account

from pynamodb_unique import audit
from pynamodb_unique._model.seam import connection
from pynamodb_unique._ops import scan as _scan
from pynamodb_unique._ops.scan import scan_pages

# Paging (1 MB pages, cut-short pages) is the server's: both backends.
pytestmark = pytest.mark.backends("moto", "dynoxide")

#: Every kind of DynamoDB value, nested too; a string that looks like a binary marker's name.
VARIED: list[dict[str, Any]] = [
    {
        "PK": {"S": f"RAW#{n}"},
        "SK": {"S": "X"},
        "s": {"S": 'quote " and "B" and ünïcode'},
        "n": {"N": str(n * 1.5)},
        "ss": {"SS": ["a", "b"]},
        "ns": {"NS": ["1", "2.5"]},
        "m": {"M": {"inner": {"L": [{"S": "x"}, {"N": "3"}, {"BOOL": True}, {"NULL": True}]}}},
        "flag": {"BOOL": False},
        "none": {"NULL": True},
    }
    for n in range(40)
]


def _scanned(model: type[Account], **options: Any) -> list[dict[str, Any]]:
    pages: list[list[dict[str, Any]]] = []
    mutex = threading.Lock()

    def on_page(items: list[dict[str, Any]]) -> None:
        with mutex:
            pages.append(items)

    scan_pages(connection(model), on_page, **options)
    return sorted((item for page in pages for item in page), key=lambda item: item["PK"]["S"])


def _botocore(model: type[Account]) -> list[dict[str, Any]]:
    """The same table read by botocore's own parser, page by page."""
    raw = client(model)
    items: list[dict[str, Any]] = []
    kwargs: dict[str, Any] = {"TableName": model.Meta.table_name, "ConsistentRead": True}
    while True:
        page = raw.scan(**kwargs)
        items.extend(page["Items"])
        if "LastEvaluatedKey" not in page:
            return sorted(items, key=lambda item: item["PK"]["S"])
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


@pytest.mark.parametrize("segments", [1, 3])
def test_scan__items_equal_botocores(backend: Backend, segments: int) -> None:
    """Pages read straight from their JSON give exactly the items botocore's parser gives."""
    accounts = bind_model(Account, backend)
    for item in VARIED:
        client(accounts).put_item(TableName=accounts.Meta.table_name, Item=item)
    for n in range(5):
        accounts(pk=f"ACCT#{n}", email=f"u{n}@x.io", username=f"u{n}").save()
    assert _scanned(accounts, segments=segments) == _botocore(accounts)
    assert len(_botocore(accounts)) == len(VARIED) + 15


def test_scan__binary_values__left_to_botocore(backend: Backend) -> None:
    """A page holding binary values is read by botocore, which decodes them to bytes."""
    accounts = bind_model(Account, backend)
    items = [
        {"PK": {"S": "BIN#1"}, "SK": {"S": "X"}, "b": {"B": b"\x00\xff"}},
        {"PK": {"S": "BIN#2"}, "SK": {"S": "X"}, "bs": {"BS": [b"\x01", b"\x02"]}},
        {"PK": {"S": "BIN#3"}, "SK": {"S": "X"}, "m": {"M": {"deep": {"B": b"\x03"}}}},
    ]
    for item in items:
        client(accounts).put_item(TableName=accounts.Meta.table_name, Item=item)
    scanned = _scanned(accounts)
    assert scanned == _botocore(accounts)
    assert scanned[0]["b"] == {"B": b"\x00\xff"}


def test_scan__hook_reads_only_the_scans_own_requests(backend: Backend, monkeypatch: pytest.MonkeyPatch) -> None:
    """The JSON reader acts on the scan's fetching threads only, and is gone once the scan ends."""
    accounts = bind_model(Account, backend)
    for item in VARIED[:3]:
        client(accounts).put_item(TableName=accounts.Meta.table_name, Item=item)
    taken: list[bool] = []
    real = _scan._take_raw_items

    def spy(response_dict: dict[str, Any], customized_response_dict: dict[str, Any], **kwargs: Any) -> None:
        real(response_dict, customized_response_dict, **kwargs)
        taken.append("Items" in customized_response_dict)

    monkeypatch.setattr(_scan, "_take_raw_items", spy)
    others: list[int] = []

    def on_page(items: list[dict[str, Any]]) -> None:
        # Mid-scan, from the reading thread: a plain PynamoDB scan on the same client.
        others.append(len(connection(accounts).scan(consistent_read=True)["Items"]))

    scan_pages(connection(accounts), on_page)
    assert others == [3]
    assert taken == [True, False]  # The scan's page read from its JSON; the other Scan by botocore.
    connection(accounts).scan(consistent_read=True)
    assert taken == [True, False]  # Unregistered: not called any more.


def test_scan__pages_past_one_megabyte__every_item_once(backend: Backend) -> None:
    """A page's LastEvaluatedKey survives the reading: the next page starts where it ended."""
    accounts = bind_model(Account, backend)
    big = "x" * 150_000
    for n in range(12):  # About 1.8 MB: at least two pages.
        item = {"PK": {"S": f"BIG#{n:02d}"}, "SK": {"S": "X"}, "blob": {"S": big}}
        client(accounts).put_item(TableName=accounts.Meta.table_name, Item=item)
    pages: list[int] = []

    def on_page(items: list[dict[str, Any]]) -> None:
        pages.append(len(items))

    scan_pages(connection(accounts), on_page)
    assert len(pages) >= 2
    assert sum(pages) == 12
    assert _scanned(accounts) == _botocore(accounts)


def test_scan__page_cut_short__resent_as_botocore_would(backend: Backend) -> None:
    """A Scan response cut short mid-body fails botocore's CRC32 check and is resent: audit() sees every record."""
    accounts = bind_model(Account, backend)
    for n in range(3):
        accounts(pk=f"ACCT#{n}", email=f"u{n}@x.io").save()
    whole = json.dumps({"Count": 1, "Items": [VARIED[0]], "ScannedCount": 1}).encode()
    cut: list[int] = []

    def cut_short(request: Any, **_: Any) -> AWSResponse | None:
        if cut:
            return None
        # The headers of the whole body, the connection dropped halfway through it.
        response = AWSResponse(request.url, 200, {"x-amz-crc32": str(zlib.crc32(whole))}, None)
        response._content = whole[: len(whole) // 2]
        cut.append(len(response._content))
        return response

    events = client(accounts).meta.events
    events.register_first("before-send.dynamodb.Scan", cut_short, unique_id="cut-short")
    try:
        report = audit(accounts)
    finally:
        events.unregister("before-send.dynamodb.Scan", unique_id="cut-short")
    assert cut
    assert report.clean
    assert (report.records, report.locks) == (3, 3)
