"""Bulk import: ``bulk_save`` against a loop of ``save()``, in records per second over HTTP.

Run from the repository root (dynoxide installed by ``bash scripts/test``, or ``DYNOXIDE_BIN``)::

    python benchmarks/bulk.py                       # 2,000 records, 5 repetitions
    python benchmarks/bulk.py --records 500 --repeats 3

It starts its own dynoxide server on a free port and stops it (by PID) when done. Each record has
two unique attributes (an email and a username: 3 items per record). In every repetition the
contenders run one after the other on fresh values in a fresh table, in an order that rotates
from one repetition to the next; the figures are the median and the min-max over the repetitions,
and the ratio is the median of the per-repetition ratios. ``benchmarks/run.py`` times the same
contenders with pyperf.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # This checkout's package, not another installed one.

from pynamodb.attributes import UnicodeAttribute
from pynamodb.models import Model

from pynamodb_unique import UniqueAttribute, UniqueMixin, bulk_save

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # The tests' dynoxide helper.

import _dynoxide

REGION: Final = "us-east-1"
RECORDS: Final = 2_000
REPEATS: Final = 5
MIN_REPEATS: Final = 3
WORKERS: Final = 4
TARGET: Final = 3.0

BULK: Final = f"bulk_save ({WORKERS} threads)"
BULK_ONE: Final = "bulk_save (1 thread)"
LOOP: Final = "save() loop"
CONTENDERS: Final = (BULK, BULK_ONE, LOOP)


class BulkAccount(UniqueMixin, Model):
    """An account with two unique attributes: the record and two locks per save."""

    class Meta:
        table_name = "bench-bulk"
        region = REGION
        host: str | None = None
        max_pool_connections = WORKERS + 4

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    sk = UnicodeAttribute(range_key=True, attr_name="SK", default="PROFILE")
    email = UniqueAttribute(UnicodeAttribute(), normalize=str.casefold)
    username = UniqueAttribute(UnicodeAttribute(null=True), name="HANDLE")
    bio = UnicodeAttribute(null=True)


def bind(host: str, table: str) -> None:
    """Point the model at a fresh table on ``host`` and create it."""
    BulkAccount.Meta.host = host
    BulkAccount.Meta.table_name = table
    BulkAccount._connection = None
    BulkAccount.create_table(wait=True, billing_mode="PAY_PER_REQUEST")


def new_accounts(prefix: str, count: int) -> list[BulkAccount]:
    return [
        BulkAccount(pk=f"{prefix}#{n:06d}", email=f"{prefix}.{n}@example.com", username=f"{prefix}-{n}", bio="imported")
        for n in range(count)
    ]


def _bulk(workers: int) -> Callable[[list[BulkAccount]], None]:
    def run(accounts: list[BulkAccount]) -> None:
        result = bulk_save(accounts, max_workers=workers)
        if len(result.saved) != len(accounts):
            msg = f"bulk_save saved {len(result.saved)} of {len(accounts)} records"
            raise RuntimeError(msg)

    return run


def _loop(accounts: list[BulkAccount]) -> None:
    for account in accounts:
        account.save()


RUNS: Final[dict[str, Callable[[list[BulkAccount]], None]]] = {
    BULK: _bulk(WORKERS),
    BULK_ONE: _bulk(1),
    LOOP: _loop,
}


def _show(samples: Sequence[float], digits: int = 0) -> str:
    """``median (min-max)``."""
    return f"{statistics.median(samples):,.{digits}f} ({min(samples):,.{digits}f}-{max(samples):,.{digits}f})"


def report_bulk(host: str, records: int = RECORDS, repeats: int = REPEATS) -> tuple[list[str], float]:
    """Measure ``bulk_save`` against a loop of ``save()`` on ``host``: the lines to print, and the median ratio.

    Args:
        host: a DynamoDB-compatible endpoint (``http://127.0.0.1:PORT``).
        records: records written by each contender in each repetition.
        repeats: repetitions (at least 3), the contenders' order rotating.
    """
    repeats = max(MIN_REPEATS, repeats)
    rates: dict[str, list[float]] = {name: [] for name in CONTENDERS}
    run_id = os.urandom(4).hex()
    for repetition in range(repeats):
        bind(host, f"bench-bulk-{run_id}-{repetition}")
        shift = repetition % len(CONTENDERS)
        for name in (*CONTENDERS[shift:], *CONTENDERS[:shift]):
            accounts = new_accounts(f"r{repetition}c{CONTENDERS.index(name)}", records)
            started = time.perf_counter()
            RUNS[name](accounts)
            rates[name].append(records / (time.perf_counter() - started))
    ratios = [b / s for b, s in zip(rates[BULK], rates[LOOP], strict=True)]
    ratio = statistics.median(ratios)
    verdict = "met" if ratio >= TARGET else "NOT met"
    lines = [
        f"bulk import: {records:,} new records with 2 unique attributes (3 items each), "
        f"{repeats} alternating repetitions, median (min-max)",
        *(f"  {name}: {_show(rates[name])} records/s" for name in CONTENDERS),
        f"  {BULK} / {LOOP}: {ratio:.1f}x ({min(ratios):.1f}-{max(ratios):.1f})",
        f"target: bulk_save / save() loop >= {TARGET:.0f}x: {verdict} ({ratio:.1f}x)",
    ]
    return lines, ratio


def main(argv: Sequence[str] | None = None) -> int:
    """Start dynoxide, run the comparison, print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--records", type=int, default=RECORDS, help=f"records per run (default {RECORDS:,})")
    parser.add_argument("--repeats", type=int, default=REPEATS, help=f"repetitions (at least {MIN_REPEATS})")
    args = parser.parse_args(argv)
    # Fake credentials: dynoxide accepts any; nothing is read from the developer's AWS config.
    os.environ.update(AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench", AWS_DEFAULT_REGION=REGION)  # noqa: S106
    os.environ["AWS_CONFIG_FILE"] = os.environ["AWS_SHARED_CREDENTIALS_FILE"] = os.devnull
    with _dynoxide.server() as host:
        lines, _ = report_bulk(host, args.records, args.repeats)
        print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
