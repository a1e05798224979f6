"""Audit throughput against a raw boto3 Scan of the same table, audit memory per record, backfill.

Loads accounts (each with an email and a username lock: 3 items per account) into a fresh table
on a dynoxide server, then prints figures. Starts dynoxide from ``.tools`` (or ``DYNOXIDE_BIN``)
unless ``--endpoint`` names a running DynamoDB-compatible server::

    python benchmarks/scan_throughput.py                  # 20,000 items, under a minute on 2 cores
    python benchmarks/scan_throughput.py --items 100000 --repeats 7

The audit and a raw boto3 Scan loop that only counts the items (both strongly consistent, one
segment, 1 MB pages) alternate in each repetition, the order swapping from one repetition to the
next; the median and the min-max of items/s are printed, and their ratio. ``benchmarks/run.py``
times the same comparison with pyperf.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import gc
import os
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # This checkout's package, not another installed one.

import boto3
from botocore.config import Config

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # The tests' models and bulk loader.

import _dynoxide  # noqa: E402
from _backends import Backend  # noqa: E402
from _damage import all_items, bind_accounts, client, load_healthy  # noqa: E402
from models import Account  # noqa: E402

from pynamodb_unique import audit, backfill  # noqa: E402

REGION: Final = "us-east-1"
#: Items per account: the record, its email lock and its username lock.
ITEMS_PER_ACCOUNT: Final = 3
AUDIT: Final = "audit"
RAW: Final = "raw boto3 Scan"


def dynoxide() -> contextlib.AbstractContextManager[str]:
    """A dynoxide server on a free port, stopped afterwards (the test suite's helper)."""
    return _dynoxide.server()


def _show(samples: Sequence[float], digits: int = 0) -> str:
    """``median (min-max)``."""
    return f"{statistics.median(samples):,.{digits}f} ({min(samples):,.{digits}f}-{max(samples):,.{digits}f})"


@dataclasses.dataclass(frozen=True)
class AuditFigures:
    """Audit vs raw Scan over the repetitions, and the audit's memory."""

    items: int
    records: int
    audit: tuple[float, ...]  # items/s, one per repetition
    raw: tuple[float, ...]  # items/s, one per repetition, measured next to the audit's
    peak_bytes: int
    bytes_per_record: float

    @property
    def ratios(self) -> tuple[float, ...]:
        """audit / raw, per repetition."""
        return tuple(a / r for a, r in zip(self.audit, self.raw, strict=True))

    def lines(self) -> list[str]:
        """The figures, for people."""
        return [
            f"{AUDIT}: {_show(self.audit)} items/s; {RAW} counting items: {_show(self.raw)} items/s "
            f"({self.items:,} items, {len(self.audit)} alternating repetitions, median (min-max))",
            f"audit / raw Scan: {_show(self.ratios, 2)}",
            f"audit memory: peak {self.peak_bytes / 2**20:.1f} MiB for {self.records:,} records; "
            f"{self.bytes_per_record:,.0f} bytes per record (a record and its 2 locks), tracemalloc",
        ]


def raw_client(endpoint: str) -> Any:
    """A boto3 client configured as PynamoDB configures its own (no parameter validation)."""
    config = Config(parameter_validation=False, retries={"total_max_attempts": 4, "mode": "standard"})
    return boto3.session.Session().client("dynamodb", region_name=REGION, endpoint_url=endpoint, config=config)


def raw_scan_count(raw: Any, table: str) -> int:
    """Read every item of ``table`` once, strongly consistent, and only count them."""
    kwargs: dict[str, Any] = {"TableName": table, "ConsistentRead": True}
    count = 0
    while True:
        page = raw.scan(**kwargs)
        count += len(page["Items"])
        last = page.get("LastEvaluatedKey")
        if last is None:
            return count
        kwargs["ExclusiveStartKey"] = last


def audit_peak(model: type[Account]) -> int:
    """The peak of memory allocated during one audit, in bytes."""
    gc.collect()
    tracemalloc.start()
    try:
        audit(model)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _load(model: type[Account], count: int, start: int = 0) -> float:
    started = time.perf_counter()
    load_healthy(model, count, start=start)
    return time.perf_counter() - started


def fresh_table(endpoint: str) -> type[Account]:
    """The tests' Account model bound to a new table on ``endpoint``."""
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "bench")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "bench")
    return bind_accounts(Backend("dynoxide", endpoint))


def measure_audit(
    model: type[Account], endpoint: str, accounts: int, repeats: int, *, out: Callable[[str], None] = print
) -> AuditFigures:
    """Load ``model``'s empty table with ``accounts`` healthy accounts, then time the audit against a raw Scan."""
    # Memory: the audit's peak with half the accounts, then with all; the difference is what the
    # audit keeps per account (the page in flight and the fixed costs cancel out).
    half = accounts // 2
    loading = _load(model, half)
    half_peak = audit_peak(model)
    loading += _load(model, accounts - half, start=half)
    items = accounts * ITEMS_PER_ACCOUNT
    out(f"loaded {items:,} items ({accounts:,} accounts) in {loading:.1f} s")
    peak = audit_peak(model)
    per_record = (peak - half_peak) / (accounts - half)

    raw = raw_client(endpoint)
    table = model.Meta.table_name

    def run_audit() -> int:
        report = audit(model)
        if not report.clean or report.scanned != items:
            msg = f"the audit of a healthy table of {items} items found {report}"
            raise AssertionError(msg)
        return report.scanned

    def run_raw() -> int:
        count = raw_scan_count(raw, table)
        if count != items:
            msg = f"the raw Scan counted {count} items, not {items}"
            raise AssertionError(msg)
        return count

    contenders: dict[str, Callable[[], int]] = {AUDIT: run_audit, RAW: run_raw}
    for run in contenders.values():  # Warm up: connections, the server's pages.
        run()
    rates: dict[str, list[float]] = {name: [] for name in contenders}
    names = list(contenders)
    for r in range(repeats):
        for name in names[r % 2 :] + names[: r % 2]:
            gc.collect()
            started = time.perf_counter()
            count = contenders[name]()
            rates[name].append(count / (time.perf_counter() - started))
    return AuditFigures(items, accounts, tuple(rates[AUDIT]), tuple(rates[RAW]), peak, per_record)


def measure_backfill(model: type[Account]) -> None:
    """Drop every EMAIL lock, as if the constraint had just been added, then backfill them."""
    raw = client(model)
    table = model.Meta.table_name
    for item in all_items(model):
        if item["PK"]["S"].startswith("UNIQ#EMAIL#"):
            raw.delete_item(TableName=table, Key={"PK": item["PK"], "SK": item["SK"]})
    for workers in (1, 4):
        report = audit(model, segments=workers)
        if workers == 1:  # Half the locks with one thread, the other half with four.
            report = dataclasses.replace(report, problems=report.problems[: len(report.problems) // 2])
        started = time.perf_counter()
        result = backfill(model, report, segments=workers)
        elapsed = time.perf_counter() - started
        created = sum(1 for fix in result.fixes if fix.outcome == "applied")
        print(f"backfill, {workers} thread(s): {created / elapsed:,.0f} locks/s ({created:,} in {elapsed:.1f} s)")
    if not audit(model).clean:
        msg = "the backfill left locks missing"
        raise AssertionError(msg)


def measure(endpoint: str, accounts: int, repeats: int, *, with_backfill: bool) -> None:
    """Print the audit figures, then the backfill's (on the same table)."""
    model = fresh_table(endpoint)
    figures = measure_audit(model, endpoint, accounts, repeats)
    for line in figures.lines():
        print(line)
    if with_backfill:
        measure_backfill(model)


def accounts_for(items: int) -> int:
    """Accounts giving about ``items`` items (3 per account), at least 2."""
    return max(2, round(items / ITEMS_PER_ACCOUNT))


def main() -> None:
    """Parse the options and run."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--items", type=int, default=20_000, help="table size in items (3 per account)")
    size.add_argument("--accounts", type=int, help="table size in accounts (3 items each)")
    parser.add_argument("--repeats", type=int, default=5, help="alternating repetitions (at least 5)")
    parser.add_argument("--no-backfill", action="store_true", help="skip the backfill figures")
    parser.add_argument("--endpoint", help="a running DynamoDB-compatible server (default: start dynoxide)")
    args = parser.parse_args()
    accounts = args.accounts or accounts_for(args.items)
    repeats = max(5, args.repeats)
    started = time.perf_counter()
    if args.endpoint:
        measure(args.endpoint, accounts, repeats, with_backfill=not args.no_backfill)
    else:
        with dynoxide() as endpoint:
            measure(endpoint, accounts, repeats, with_backfill=not args.no_backfill)
    print(f"done in {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
