"""Scan throughput of audit (1 and 4 segments), backfill throughput, and audit memory per record.

Loads N accounts (each with an email and a username lock: 3 items per account) into a fresh table
on a dynoxide server, then prints figures. Starts dynoxide from ``.tools`` (or ``DYNOXIDE_BIN``)
unless ``--endpoint`` names a running DynamoDB-compatible server::

    python benchmarks/scan_throughput.py --accounts 10000
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import socket
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # The tests' models and bulk loader.

from _backends import Backend  # noqa: E402
from _damage import all_items, bind_accounts, client, load_healthy  # noqa: E402
from models import Account  # noqa: E402

from pynamodb_unique import audit, backfill  # noqa: E402

DYNOXIDE = ROOT / ".tools" / "node_modules" / "@dynoxide" / "linux-x64" / "dynoxide"


@contextlib.contextmanager
def dynoxide() -> Iterator[str]:
    """A dynoxide server on a free port, stopped afterwards."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    binary = os.environ.get("DYNOXIDE_BIN") or str(DYNOXIDE)
    command = [binary, "serve", "--host", "127.0.0.1", "--port", str(port)]
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # noqa: S603
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
                break
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(timeout=5)


def audit_peak(model: type[Account]) -> int:
    """The peak of memory allocated during one audit, in bytes."""
    tracemalloc.start()
    try:
        audit(model)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def measure(endpoint: str, accounts: int, repeats: int) -> None:
    """Load the table, then print the figures."""
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "bench")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "bench")
    model = bind_accounts(Backend("dynoxide", endpoint))
    # Memory: the audit's peak with half the accounts, then with all; the difference is what the
    # audit keeps per account (the page in flight cancels out).
    started = time.perf_counter()
    load_healthy(model, accounts // 2)
    loading = time.perf_counter() - started
    half_peak = audit_peak(model)
    started = time.perf_counter()
    load_healthy(model, accounts - accounts // 2, start=accounts // 2)
    loading += time.perf_counter() - started
    items = accounts * 3
    print(f"loaded {items:,} items ({accounts:,} accounts) in {loading:.1f} s")
    peak = audit_peak(model)
    per_account = (peak - half_peak) / (accounts - accounts // 2)
    print(f"audit memory: peak {peak / 2**20:.1f} MiB; {per_account:,.0f} bytes kept per account")
    for segments in (1, 4):
        best = float("inf")
        for _ in range(repeats):
            started = time.perf_counter()
            report = audit(model, segments=segments)
            best = min(best, time.perf_counter() - started)
            assert report.clean, report.problems  # noqa: S101 - a benchmark of a healthy table.
            assert report.scanned == items  # noqa: S101
        print(f"audit, {segments} segment(s): {items / best:,.0f} items/s (best of {repeats}: {best:.2f} s)")

    # Backfill: drop every EMAIL lock, as if the constraint had just been added.
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
    assert audit(model).clean  # noqa: S101 - the backfill left nothing missing.


def main() -> None:
    """Parse the options and run."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--accounts", type=int, default=10_000, help="accounts to load (3 items each)")
    parser.add_argument("--repeats", type=int, default=3, help="audits per segment count (best is kept)")
    parser.add_argument("--endpoint", help="a running DynamoDB-compatible server (default: start dynoxide)")
    args = parser.parse_args()
    if args.endpoint:
        measure(args.endpoint, args.accounts, args.repeats)
        return
    with dynoxide() as endpoint:
        measure(endpoint, args.accounts, args.repeats)


if __name__ == "__main__":
    main()
