"""What telemetry costs a signup when no one collects it: client CPU of ``save()``, transport stubbed.

Run from the repository root::

    python benchmarks/telemetry.py                   # 9 repetitions of 1,000 signups per case
    python benchmarks/telemetry.py --signups 500 --repeats 5

Two cases take turns in one process, block by block (the order alternating), so the machine's
load falls on both alike:

- *API absent*: the library's telemetry as without ``opentelemetry-api`` (its import found
  missing: :func:`pynamodb_unique._write.telemetry.otel` answers None);
- *API, no provider*: ``opentelemetry-api`` imported and no tracer or meter provider set, so each
  write asks the API's proxy tracer for a span and gets the no-op one, and adds its capacity to a
  proxy counter that drops it.

A signup is ``save()`` of a new :class:`contenders.UniqueAccount` (three items in one transaction) with the
botocore client's ``_make_api_call`` answering at once (``contenders.stubbed_transport``): only client
work is timed, with ``time.process_time``. Printed: the median time per signup over the
repetitions with the min-max, the median of the per-repetition differences, and the telemetry
alone (``watch()`` and a write's calls on it, timed apart).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import timeit
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

# This checkout's package, not another installed one, then the CPU benchmark's helpers.
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import contenders as bench

from pynamodb_unique._write import telemetry

ABSENT: Final = "API absent"
NO_PROVIDER: Final = "API, no provider"


def observe() -> None:
    """What a write does with telemetry: the check, then (if observed) its span, request and capacity."""
    watched = telemetry.watch("save", "UniqueAccount")
    if watched is not None:
        with watched:
            watched.sending("TransactWriteItems", 3, 1)
            watched.consumed({"ConsumedCapacity": []})


def main(argv: Sequence[str] | None = None) -> int:
    """Time both cases, taking turns, and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--signups", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args(argv)
    # Credentials botocore accepts without looking further (a client without them is rebuilt per call).
    fake = "bench"
    os.environ.update(AWS_ACCESS_KEY_ID=fake, AWS_SECRET_ACCESS_KEY=fake, AWS_DEFAULT_REGION=bench.REGION)
    os.environ["AWS_CONFIG_FILE"] = os.environ["AWS_SHARED_CREDENTIALS_FILE"] = os.devnull
    from opentelemetry import trace  # noqa: PLC0415 - the API must be installed for this comparison.

    if type(trace.get_tracer_provider()).__module__.startswith("opentelemetry.sdk"):
        msg = "a tracer provider is set (OTEL_PYTHON_TRACER_PROVIDER?): nothing to compare"
        raise SystemExit(msg)
    facade = telemetry.otel()
    if facade is None:
        msg = "opentelemetry-api is not installed: nothing to compare"
        raise SystemExit(msg)
    states: dict[str, Any] = {ABSENT: None, NO_PROVIDER: facade}
    signup: dict[str, list[float]] = {case: [] for case in states}
    alone: dict[str, list[float]] = {case: [] for case in states}
    serial = iter(range(10**9))
    with bench.stubbed_transport():
        for account in [bench._account(next(serial)) for _ in range(200)]:  # Warm up: one-time work.
            account.save()
        for repetition in range(args.repeats):
            order = list(states) if repetition % 2 == 0 else list(reversed(states))
            for case in order:
                telemetry._otel_state = states[case]
                accounts = [bench._account(next(serial)) for _ in range(args.signups)]
                start = time.process_time()
                for account in accounts:
                    account.save()
                signup[case].append((time.process_time() - start) / args.signups * 1e6)
                calls = 20_000
                alone[case].append(timeit.timeit(observe, timer=time.process_time, number=calls) / calls * 1e6)
    telemetry._otel_state = facade
    differences = [b - a for a, b in zip(signup[ABSENT], signup[NO_PROVIDER], strict=True)]
    print(f"client CPU per signup (save() of 3 items, transport stubbed), {args.repeats} x {args.signups}:")
    for case, values in signup.items():
        print(
            f"  {case:17} {statistics.median(values):6.1f} us ({min(values):.1f}-{max(values):.1f});"
            f" telemetry alone {statistics.median(alone[case]):.2f} us"
        )
    print(f"  difference        {statistics.median(differences):+6.1f} us per signup (median of the repetitions)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
