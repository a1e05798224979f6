"""Contention: 8 threads signing up (then deleting) on 1, 10 and 100 hot values, over HTTP.

Run from the repository root (dynoxide installed by ``bash scripts/test``, or ``DYNOXIDE_BIN``)::

    python benchmarks/contention.py                  # 100 signups per thread
    python benchmarks/contention.py --signups 15     # a smoke run

It starts its own dynoxide server on a free port and stops it (by PID) when done. Each winner
deletes its record to free the value again. It prints the outcomes (successes, violations, other
errors, the library's retries), the latency's median and 99th percentile, and what is left in the
table afterwards: 0 means nothing orphaned. Counted outcomes, not a comparison: ``run.py`` times.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # This checkout's package.

import contenders as bench
from contenders import THREADS, UniqueAccount

import pynamodb_unique._write.send as unique_send
from pynamodb_unique import UniqueError, UniqueViolation

HOT: Final = (1, 10, 100)


@dataclass
class Contention:
    """Outcomes of signups on a few hot values."""

    hot: int
    successes: int = 0
    violations: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    retries: int = 0
    latencies: list[float] = field(default_factory=list)
    left: int = 0

    def percentiles(self) -> tuple[float, float]:
        """The median and the 99th percentile of the signups' latencies, in milliseconds."""
        cuts = statistics.quantiles(self.latencies, n=100)
        return cuts[49] * 1000, cuts[98] * 1000


def contention(hot: int, per_thread: int) -> Contention:
    """8 threads sign up on ``hot`` values, each winner deletes its record to free the value again."""
    result = Contention(hot)
    lock = threading.Lock()
    real_sleep = unique_send.sleep

    def counting_sleep(delay: float) -> None:
        with lock:
            result.retries += 1
        real_sleep(delay)

    def work(index: int) -> None:
        rng = random.Random(index)
        for i in range(per_thread):
            value = rng.randrange(hot)
            account = UniqueAccount(pk=f"ACCT#c{hot}-{index}-{i}", email=f"hot{value}@example.com")
            start = time.perf_counter()
            outcome = "success"
            try:
                account.save()
            except UniqueViolation:
                outcome = "violation"
            except UniqueError as exc:
                outcome = type(exc).__name__
            elapsed = time.perf_counter() - start
            if outcome == "success":
                try:
                    account.delete()
                except UniqueError as exc:
                    outcome = f"delete: {type(exc).__name__}"
            with lock:
                result.latencies.append(elapsed)
                if outcome == "success":
                    result.successes += 1
                elif outcome == "violation":
                    result.violations += 1
                else:
                    result.errors[outcome] = result.errors.get(outcome, 0) + 1

    unique_send.sleep = counting_sleep
    try:
        bench.run_threads(THREADS, work)
    finally:
        unique_send.sleep = real_sleep
    items = bench.botocore_client(UniqueAccount).scan(TableName=UniqueAccount.Meta.table_name, ConsistentRead=True)[
        "Items"
    ]
    result.left = sum(1 for item in items if item["PK"]["S"].startswith(("UNIQ#EMAIL#hot", "ACCT#c")))
    return result


def main(argv: Sequence[str] | None = None) -> int:
    """Start dynoxide, run the three cases, print the outcomes."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--signups", type=int, default=100, help="signups per thread and case (default 100)")
    args = parser.parse_args(argv)
    # Fake credentials: dynoxide accepts any; nothing is read from the developer's AWS config.
    os.environ.update(AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench", AWS_DEFAULT_REGION=bench.REGION)  # noqa: S106
    os.environ["AWS_CONFIG_FILE"] = os.environ["AWS_SHARED_CREDENTIALS_FILE"] = os.devnull
    print(f"contention: {THREADS} threads x {args.signups} signups, winners delete to free the value")
    print("| hot values | successes | violations | other errors | retries | p50 ms | p99 ms | left |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    with bench.dynoxide() as host:
        bench.bind(host, "contention")
        for hot in HOT:
            c = contention(hot, args.signups)
            errors = ", ".join(f"{k} {v}" for k, v in sorted(c.errors.items())) or "0"
            p50, p99 = c.percentiles()
            cells = (hot, c.successes, c.violations, errors, c.retries, f"{p50:.1f}", f"{p99:.1f}", c.left)
            print("| " + " | ".join(map(str, cells)) + " |")
    print("(left: records and hot locks still in the table afterwards; 0 means nothing orphaned)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
