"""DynamoDB exports written as ExportTableToPointInTime writes them (DynamoDB JSON), from live tables or generated.

The layout of ``<prefix>/AWSDynamoDB/<export id>/``: ``manifest-summary.json``,
``manifest-files.json`` (one JSON line per data file: itemCount, md5Checksum, etag,
dataFileS3Key), ``data/<name>.json.gz`` (one ``{"Item": {...}}`` per line), and the empty
``_started`` marker. Every export has at least one empty data file, as an empty partition gives.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import uuid
from collections.abc import Iterable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

ACCOUNT = "123456789012"
REGION = "us-east-1"


def wire(value: dict[str, Any]) -> dict[str, Any]:
    """An attribute value as botocore parsed it, back in DynamoDB JSON (binary as base64 text)."""
    kind, inner = next(iter(value.items()))
    if kind == "B":
        return {"B": base64.b64encode(inner).decode("ascii")}
    if kind == "BS":
        return {"BS": [base64.b64encode(v).decode("ascii") for v in inner]}
    if kind == "M":
        return {"M": {k: wire(v) for k, v in inner.items()}}
    if kind == "L":
        return {"L": [wire(v) for v in inner]}
    return value


def write_export(
    folder: Path, table: str, items: Iterable[dict[str, Any]], *, files: int = 3, prefix: str = "exports"
) -> Path:
    """Write ``items`` of ``table`` as a full export under ``folder``; return the export's folder.

    Items go round-robin into ``files`` data files, plus one empty file (an empty partition).
    """
    export_id = f"{uuid.uuid4().int % 10**14:014d}-{uuid.uuid4().hex[:8]}"
    base = f"{prefix}/AWSDynamoDB/{export_id}"
    root = folder / base
    (root / "data").mkdir(parents=True)
    names = [f"{uuid.uuid4().hex[:26]}.json.gz" for _ in range(files + 1)]
    counts = [0] * len(names)
    with ExitStack() as stack:
        streams = [
            stack.enter_context(gzip.open(root / "data" / name, "wt", encoding="utf-8", compresslevel=1))
            for name in names
        ]
        for n, item in enumerate(items):
            slot = n % files
            streams[slot].write(json.dumps({"Item": {k: wire(v) for k, v in item.items()}}) + "\n")
            counts[slot] += 1
    with open(root / "manifest-files.json", "w", encoding="utf-8") as manifest:
        for name, count in zip(names, counts, strict=True):
            body = (root / "data" / name).read_bytes()
            entry = {
                "itemCount": count,
                "md5Checksum": base64.b64encode(hashlib.md5(body).digest()).decode("ascii"),  # noqa: S324 - as S3.
                "etag": hashlib.md5(body).hexdigest(),  # noqa: S324 - as S3.
                "dataFileS3Key": f"{base}/data/{name}",
            }
            manifest.write(json.dumps(entry) + "\n")
    table_arn = f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{table}"
    summary = {
        "version": "2020-06-30",
        "exportArn": f"{table_arn}/export/{export_id}",
        "startTime": "2026-12-01T06:00:00.000Z",
        "endTime": "2026-12-01T06:05:00.000Z",
        "tableArn": table_arn,
        "tableId": str(uuid.uuid4()),
        "exportTime": "2026-12-01T06:00:00.000Z",
        "s3Bucket": "audit-exports",
        "s3Prefix": prefix,
        "s3SseAlgorithm": "AES256",
        "s3SseKmsKeyId": None,
        "manifestFilesS3Key": f"{base}/manifest-files.json",
        "billedSizeBytes": sum((root / "data" / n).stat().st_size for n in names),
        "itemCount": sum(counts),
        "outputFormat": "DYNAMODB_JSON",
        "exportType": "FULL_EXPORT",
    }
    (root / "manifest-summary.json").write_text(json.dumps(summary), encoding="utf-8")
    (root / "_started").write_bytes(b"")
    return root


def scan_table(client: Any, table: str) -> Iterator[dict[str, Any]]:
    """Every item of a table, through a raw botocore client."""
    kwargs: dict[str, Any] = {"TableName": table, "ConsistentRead": True}
    while True:
        page = client.scan(**kwargs)
        yield from page["Items"]
        if "LastEvaluatedKey" not in page:
            return
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def export_tables(client: Any, tables: Iterable[str], folder: Path) -> dict[str, Path]:
    """An export of each table (read with ``client``), by table name."""
    return {table: write_export(folder / table, table, scan_table(client, table)) for table in dict.fromkeys(tables)}
