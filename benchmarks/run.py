"""What uniqueness costs: the library against the same work by hand, timed with pyperf.

Run from the repository root (dynoxide installed by ``bash scripts/test``, or ``DYNOXIDE_BIN``)::

    python benchmarks/run.py -o bench.json          # every benchmark (about 10 min on 2 cores)
    python benchmarks/run.py --fast                 # rough figures: half the worker processes
    python benchmarks/run.py --show bench.json      # the comparisons of a saved run, again
    python benchmarks/run.py --only signup --rounds 10 -p 20    # one family, more values: a sharper ratio
    python -m pyperf compare_to main.json bench.json --table   # two saved runs, benchmark by benchmark
    python benchmarks/run.py --quick --debug-single-value --in-process   # a smoke run (seconds)

pyperf (CPython's benchmark harness) runs each benchmark below in fresh worker processes
(``--processes``, ``--values``, ``--rigorous``, ``--fast``: ``--help``), calibrates its loops,
saves every value with the machine's metadata (``-o``), and prints the mean of each; this script
then prints each comparison as medians with their interquartile range. It starts its own dynoxide
server and stops it when done; the workers reach it by ``--endpoint``. The contenders' code is in
``contenders.py``; ``contention.py``, ``scan_throughput.py`` (the audit's memory, backfill) and
``instructions.py`` (counted, not timed) and ``guard_cost.py`` (what the compare-and-swap costs a
delete and a change by ``update()``) are separate scripts.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from importlib.metadata import version
from pathlib import Path
from typing import Final

import pyperf

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # This checkout's package, in every worker.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # The tests' models and loaders.

import bulk
import contenders as c
import scan_throughput
from _backends import Backend, bind_model
from _damage import load_healthy
from models import Account

from pynamodb_unique import audit

Timer = Callable[[int], float]

CPU: Final = (c.LIB, c.MINIMAL, c.SAME, c.PLAIN)
SIGNUP: Final = f"signup over HTTP, {c.THREADS} threads"
#: Signups per thread in one loop: a loop of 80 takes about 0.1 s, pyperf's least time per value.
PER_THREAD: Final = 10
HTTP: Final = (c.LIB, c.PYNAMODB_SEED, c.BOTO3_SAME, c.BOTO3_MINIMAL)
#: The single writes over HTTP, one after another on one thread, and their contenders: this process's
#: CPU time per write (the minimal by hand: PynamoDB's save() with the library's condition).
SINGLE_HTTP: Final[dict[str, tuple[str, ...]]] = {
    "non-unique save": (c.LIB, c.MINIMAL, c.PLAIN),
    "non-unique update": (c.LIB, c.PLAIN),  # PynamoDB's own update() is its minimal by hand.
}
AUDIT: Final = "read of a healthy table"
BULK: Final = "bulk import"


def baseline(op: str) -> str:
    """The simplest correct contender by hand for an operation.

    The seed's transaction as written where it is correct (a create); for the single writes,
    PynamoDB's own (a ``save()`` with the library's condition); where the seed's transaction
    releases locks without checking that the record still holds their values (a change, a
    delete), the same transaction with that check.
    """
    return c.CORRECT if c.CORRECT in c.CPU_OPERATIONS[op] else c.MINIMAL


def readings(op: str) -> list[str]:
    """The contenders an operation's client CPU is judged against: issue 28's baseline read literally
    (the seed's transaction as written, plain PynamoDB for the single writes), then :func:`baseline`
    where it is another (docs/cost-and-guarantees.md says why)."""
    literal = c.PLAIN if op in c.SINGLE_WRITES else c.MINIMAL
    variants = c.CPU_OPERATIONS[op]
    return [literal] if variants[baseline(op)] == variants[literal] else [literal, baseline(op)]


#: (what, time of the baseline or the library, time of the other, limit, at most): ratios of medians judged.
#: Issue 28's: client CPU <= 1.10x by hand, read both ways (:func:`readings`); signups over HTTP
#: >= 0.97x the seed's transaction by hand.
TARGETS: Final = [
    *(
        (f"CPU {op}: library / {who}", f"{op}: {c.LIB}", f"{op}: {who}", 1.10, True)
        for op in c.CPU_OPERATIONS
        for who in readings(op)
    ),
    (
        "signups/s: library / seed's PynamoDB transaction",
        f"{SIGNUP}: {c.PYNAMODB_SEED}",
        f"{SIGNUP}: {c.LIB}",
        0.97,
        False,
    ),
    ("signups/s: library / boto3 minimal items", f"{SIGNUP}: {c.BOTO3_MINIMAL}", f"{SIGNUP}: {c.LIB}", 0.95, False),
    ("items/s: audit / raw Scan", f"{AUDIT}: {scan_throughput.RAW}", f"{AUDIT}: {scan_throughput.AUDIT}", 0.90, False),
    ("records/s: bulk_save / save() loop", f"{BULK}: {bulk.LOOP}", f"{BULK}: {bulk.BULK}", bulk.TARGET, False),
]


def cpu(variant: c.Variant) -> Timer:
    """Seconds for ``loops`` operations of ``variant``, its inputs prepared beforehand, the transport stubbed."""

    def timer(loops: int) -> float:
        inputs = variant.prepare(loops)
        with c.stubbed_transport():
            started = time.perf_counter()
            for item in inputs:
                variant.run(item)
            return time.perf_counter() - started

    return timer


@functools.cache
def bound(endpoint: str) -> None:
    """The contenders' models on the HTTP benchmarks' tables, all on the library's table (once per process)."""
    c.bind(endpoint, "http", create=False)
    c.share_table()


@functools.cache
def signups(endpoint: str, request: str) -> dict[str, Callable[[str], object]]:
    """Signup ``n`` by each contender over HTTP, every one into the library's table."""
    bound(endpoint)
    client, table = c.boto3_client(endpoint), c.UniqueAccount.Meta.table_name
    return {
        c.LIB: lambda n: c.signup(n).save(),
        c.PYNAMODB_SEED: c.seed_signup,
        c.BOTO3_SAME: functools.partial(c.boto3_same_signup, client, request),
        c.BOTO3_MINIMAL: functools.partial(c.boto3_minimal_signup, client, table),
    }


def http(args: argparse.Namespace, contender: str) -> Timer:
    """Wall seconds for ``loops`` x ``PER_THREAD`` signups on each of the threads, distinct values."""

    def timer(loops: int) -> float:
        sign, prefix = signups(args.endpoint, args.signup_request)[contender], os.urandom(4).hex()

        def work(thread: int) -> None:
            for i in range(loops * PER_THREAD):
                sign(f"{prefix}{thread}-{i}")

        return c.run_threads(c.THREADS, work)

    return timer


def over_http(op: str) -> str:
    """The name of a single write's benchmark over HTTP."""
    return f"{op} over HTTP, client CPU"


def http_single(args: argparse.Namespace, op: str, contender: str) -> Timer:
    """This process's CPU seconds for ``loops`` writes ``op`` (a single write) of one stored record over HTTP.

    The client's work per write with the network and the server left out (dynoxide runs in a
    process of its own): what a user's process spends. The write is the stubbed benchmark's
    (``contender``'s in ``CPU_OPERATIONS``), repeated on one record saved before the clock starts
    (new for each call), one write after another on this thread.
    """

    def timer(loops: int) -> float:
        bound(args.endpoint)
        model = c.UniqueAccount if contender == c.LIB else c.PlainAccount
        n = os.urandom(4).hex()
        account = model(pk=f"ACCT#u{n}", email=f"u{n}@example.com", username=f"u{n}")
        account.save()
        write = c.CPU_OPERATIONS[op][contender].run
        started = time.process_time()
        for _ in range(loops):
            write(account)
        return time.process_time() - started

    return timer


def audit_model(endpoint: str) -> type[Account]:
    """The tests' Account model on the audited table."""
    return bind_model(Account, Backend("dynoxide", endpoint), "bench-audit", create=False)


def scan(args: argparse.Namespace, contender: str) -> Timer:
    """Seconds for ``loops`` reads of the whole audited table: the audit, or a raw Scan that only counts."""

    def timer(loops: int) -> float:
        model = audit_model(args.endpoint)
        raw = scan_throughput.raw_client(args.endpoint)
        started = time.perf_counter()
        for _ in range(loops):
            if contender == scan_throughput.AUDIT:
                report = audit(model)
                scanned = report.scanned if report.clean else -1
            else:
                scanned = scan_throughput.raw_scan_count(raw, model.Meta.table_name)
            if scanned != items(args):
                msg = f"{contender} read {scanned} items of a healthy table of {items(args)}"
                raise AssertionError(msg)
        return time.perf_counter() - started

    return timer


def bulk_import(args: argparse.Namespace, contender: str) -> Timer:
    """Seconds to write ``loops`` batches of new records by ``contender``, each batch built beforehand."""

    def timer(loops: int) -> float:
        bulk.BulkAccount.Meta.host, bulk.BulkAccount.Meta.table_name = args.endpoint, "bench-bulk"
        spent = 0.0
        for _ in range(loops):
            accounts = bulk.new_accounts(os.urandom(4).hex(), records(args))
            started = time.perf_counter()
            bulk.RUNS[contender](accounts)
            spent += time.perf_counter() - started
        return spent

    return timer


def accounts(args: argparse.Namespace) -> int:
    """Accounts in the audited table, each with two locks: 20,001 items (3,000 with ``--quick``)."""
    return scan_throughput.accounts_for(3_000 if args.quick else 20_000)


def items(args: argparse.Namespace) -> int:
    """Items in the audited table."""
    return accounts(args) * scan_throughput.ITEMS_PER_ACCOUNT


def records(args: argparse.Namespace) -> int:
    """New records per bulk batch."""
    return 20 if args.quick else 250


def chosen(args: argparse.Namespace, name: str) -> bool:
    """Whether ``--only`` keeps the benchmark ``name``: it contains any of the texts given (all kept, none given)."""
    return not args.only or any(text in name for text in args.only)


def timers(args: argparse.Namespace) -> dict[str, tuple[Timer, int]]:
    """Every benchmark ``--only`` keeps, by name: its timer and its operations per loop."""
    found: dict[str, tuple[Timer, int]] = {}
    for op, variants in c.CPU_OPERATIONS.items():
        found |= {f"{op}: {who}": (cpu(variants[who]), 1) for who in (*CPU, c.CORRECT) if who in variants}
    found[f"non-unique update: {c.PYNAMODB_ON_UNIQUE}"] = (cpu(c.UPDATE_FLOOR[c.PYNAMODB_ON_UNIQUE]), 1)
    found |= {f"{SIGNUP}: {who}": (http(args, who), c.THREADS * PER_THREAD) for who in HTTP}
    for op, contenders in SINGLE_HTTP.items():
        found |= {f"{over_http(op)}: {who}": (http_single(args, op, who), 1) for who in contenders}
    audited = (scan_throughput.AUDIT, scan_throughput.RAW)
    found |= {f"{AUDIT}: {who}": (scan(args, who), items(args)) for who in audited}
    found |= {f"{BULK}: {who}": (bulk_import(args, who), records(args)) for who in bulk.CONTENDERS}
    return {name: timed for name, timed in found.items() if chosen(args, name)}


def benchmarks(runner: pyperf.Runner, kept: dict[str, tuple[Timer, int]]) -> dict[str, pyperf.Benchmark]:
    """The benchmarks ``--only`` kept (:func:`timers`; in a worker process, only the one it was started for)."""
    done = {name: runner.bench_time_func(name, timer, inner_loops=inner) for name, (timer, inner) in kept.items()}
    return {name: bench for name, bench in done.items() if bench is not None}


def prepare(endpoint: str, args: argparse.Namespace, names: Iterable[str]) -> None:
    """In the main process: the tables, the contenders checked, the requests counted, the signup request captured.

    The audited table (60,003 items to write) only when an audit benchmark is among ``names``.
    """
    c.bind(endpoint, "requests")
    rows = [list(map(str, row)) for row in c.requests_per_operation()]
    table(["requests per operation", "API calls", "HTTP attempts", "transaction items"], rows)
    checked = "checked: the same request by hand is the library's; PynamoDB's own save()/update() its single writes"
    print("\n".join(f"WARNING: {problem}" for problem in c.check_requests()) or checked)
    c.bind(endpoint, "http")
    args.signup_request = c.captured_signup()
    if any(name.startswith(f"{AUDIT}: ") for name in names):
        load_healthy(bind_model(Account, Backend("dynoxide", endpoint), "bench-audit"), accounts(args))
    bulk.bind(endpoint, "bench-bulk")


def show(benches: dict[str, pyperf.Benchmark], name: str, scale: float = 1e6, *, rate: bool = False) -> str:
    """A benchmark's median (interquartile range), in µs per operation, or per second with ``rate``; "-": not run."""
    if name not in benches:
        return "-"
    q1, mid, q3 = (benches[name].percentile(p) for p in (25, 50, 75))
    low, mid, high = (1 / q3, 1 / mid, 1 / q1) if rate else (q1 * scale, mid * scale, q3 * scale)
    return f"{mid:,.0f} ({low:,.0f}-{high:,.0f})"


def relative(benches: dict[str, pyperf.Benchmark], top: str, bottom: str) -> str:
    """:func:`ratio`'s text, or "-" where either benchmark was not run (``--only``)."""
    return ratio(benches, top, bottom)[1] if top in benches and bottom in benches else "-"


def ratio(benches: dict[str, pyperf.Benchmark], top: str, bottom: str) -> tuple[float, str]:
    """``top`` / ``bottom`` of the medians, and the range the interquartile ranges allow."""
    (t1, t, t3), (b1, b, b3) = ([benches[n].percentile(p) for p in (25, 50, 75)] for n in (top, bottom))
    return t / b, f"{t / b:.2f} ({t1 / b3:.2f}-{t3 / b1:.2f})"


def table(header: list[str], rows: list[list[str]]) -> None:
    print("\n| " + " | ".join(header) + " |\n|" + " --- |" * len(header))
    print("\n".join("| " + " | ".join(row) + " |" for row in rows))


def comparisons(benches: dict[str, pyperf.Benchmark]) -> None:
    """The side-by-side tables of docs/cost-and-guarantees.md, from a run's benchmarks."""
    meta = next(iter(benches.values())).get_metadata()
    machine = [f"{meta.get('cpu_model_name')}, {meta.get('cpu_count')} CPUs", f"Python {meta.get('python_version')}"]
    print("\n" + "; ".join(machine + [f"{n} {meta.get(n)}" for n in ("pynamodb", "botocore", "pynamodb-unique")]))
    print("median (interquartile range) of each benchmark's values; a ratio is of the medians (range: the IQRs')")
    ops = [op for op in c.CPU_OPERATIONS if f"{op}: {c.LIB}" in benches]
    rows: list[list[str]] = []
    for op in ops:
        correct = f"{op}: {c.CORRECT}"
        row = [op, *(show(benches, f"{op}: {who}") for who in (c.LIB, c.MINIMAL))]
        row.append(show(benches, correct) if correct in benches else "(minimal)")
        # A run saved before the correct contender existed has none: its minimal stands in.
        judged = baseline(op) if f"{op}: {baseline(op)}" in benches else c.MINIMAL
        row += [relative(benches, f"{op}: {c.LIB}", f"{op}: {who}") for who in (c.MINIMAL, judged, *CPU[2:])]
        rows.append(row)
    head = ["client CPU, transport stubbed", "library µs", "minimal µs", "minimal correct µs"]
    if rows:
        table([*head, *(f"library / {w}" for w in (c.MINIMAL, c.CORRECT, *CPU[2:]))], rows)
    floor = f"non-unique update: {c.PYNAMODB_ON_UNIQUE}"
    if floor in benches:
        plain = relative(benches, floor, f"non-unique update: {c.PLAIN}")
        print(f"\n{c.PYNAMODB_ON_UNIQUE}, non-unique update: {show(benches, floor)} µs, / plain PynamoDB {plain}")
    rows = []
    for op, contenders in SINGLE_HTTP.items():
        lib, by_hand, plain = (f"{over_http(op)}: {who}" for who in (c.LIB, c.MINIMAL, c.PLAIN))
        if lib in benches:
            # A non-unique update by hand is plain PynamoDB's own: no contender of its own.
            hand = (
                [show(benches, by_hand), relative(benches, lib, by_hand)]
                if c.MINIMAL in contenders
                else ["(plain)"] * 2
            )
            rows.append([op, show(benches, lib), hand[0], show(benches, plain), hand[1], relative(benches, lib, plain)])
    if rows:
        columns = ["over HTTP, client CPU (µs)", c.LIB, c.MINIMAL, c.PLAIN]
        table([*columns, f"{c.LIB} / {c.MINIMAL}", f"{c.LIB} / {c.PLAIN}"], rows)
    rates = [
        (SIGNUP, HTTP, "signups/s"),
        (AUDIT, (scan_throughput.AUDIT, scan_throughput.RAW), "items/s"),
        (BULK, bulk.CONTENDERS, "records/s"),
    ]
    for what, who, unit in rates:
        first = f"{what}: {who[0]}"
        if any(f"{what}: {w}" in benches for w in who):
            rows = [
                [w, show(benches, f"{what}: {w}", rate=True), relative(benches, f"{what}: {w}", first)] for w in who
            ]
            table([what, unit, f"{who[0]} / this"], rows)
    print()
    for label, top, bottom, limit, at_most in TARGETS:
        if top in benches and bottom in benches:
            value = ratio(benches, top, bottom)[0]
            verdict = "met" if (value <= limit if at_most else value >= limit) else "MISSED"
            print(f"target: {label} {value:.2f} ({'<=' if at_most else '>='} {limit:.2f}: {verdict})")


def round_command(args: argparse.Namespace, out: str, processes: int) -> list[str]:
    """This script's command line for one round of ``--rounds``: ``processes`` workers per benchmark, into ``out``.

    Built from the parsed options, as pyperf resolved them (``--fast`` and ``--rigorous`` set the
    processes and values, and would reset a round's processes if passed on).
    """
    command = [sys.executable, __file__, f"--processes={processes}", f"--values={args.values}"]
    command += [
        f"--{name.replace('_', '-')}={value}"
        for name in ("warmups", "loops", "min_time", "affinity")
        if (value := getattr(args, name))
    ]
    command += [
        flag
        for flag, given in (
            ("--quick", args.quick),
            ("--in-process", args.in_process),
            ("--quiet", args.quiet),
            ("--verbose", args.verbose),
        )
        if given
    ]
    command += [f"--only={text}" for text in args.only]
    return [*command, f"--append={out}", "--in-round"]


def shares(processes: int, rounds: int) -> list[int]:
    """The worker processes of each round: ``processes`` shared out as evenly as they go.

    Raises:
        SystemExit: fewer processes than rounds.
    """
    if processes < rounds:
        sys.exit(f"--rounds {rounds} needs at least as many worker processes (--processes {processes})")
    return [processes // rounds + (number < processes % rounds) for number in range(rounds)]


def alternate(args: argparse.Namespace) -> None:
    """Run the suite ``args.rounds`` times, the worker processes shared out among the rounds; print the comparisons.

    pyperf runs one benchmark's worker processes one after another, then the next benchmark's:
    a machine that slows down for a minute slows one contender. In rounds, every contender's values
    come from every round, alternating with the others'.
    """
    out = args.output or args.append or str(Path(tempfile.mkdtemp()) / "bench.json")
    for number, processes in enumerate(shares(args.processes, args.rounds), start=1):
        print(f"round {number} of {args.rounds}: {processes} worker processes per benchmark", flush=True)
        subprocess.run(round_command(args, out, processes), check=True)  # noqa: S603 - this script, again.
    print(f"every value: {out}")
    compare_saved(out)


def compare_saved(path: str) -> None:
    """Print the comparisons of a saved run (``-o``)."""
    suite = pyperf.BenchmarkSuite.load(path)
    comparisons({bench.get_name(): bench for bench in suite.get_benchmarks()})


def main() -> None:
    """Run every benchmark in pyperf's workers, or show a saved run; print the comparisons."""

    def worker_args(cmd: list[str], args: argparse.Namespace) -> None:
        # The workers reach the main process's dynoxide, sign up with its captured request, at its sizes.
        cmd.extend(
            [f"--endpoint={args.endpoint}", f"--signup-request={args.signup_request}", *["--quick"] * args.quick]
        )
        # pyperf picks a worker's benchmark by its place in the list: the worker's list is the same.
        cmd.extend(f"--only={text}" for text in args.only)

    versions = {name: version(name) for name in ("pynamodb", "botocore", "boto3", "pynamodb-unique")}
    runner = pyperf.Runner(processes=6, metadata=versions, add_cmdline_args=worker_args)
    runner.argparser.allow_abbrev = False  # Options in full: "--round 3" is no "--rounds 3".
    runner.argparser.add_argument("--show", metavar="FILE", help="print the comparisons of a saved run (-o) and exit")
    runner.argparser.add_argument("--quick", action="store_true", help="a small audited table and bulk batches")
    runner.argparser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="TEXT",
        help="run only the benchmarks whose name contains TEXT (repeatable: any of them), e.g. 'signup'",
    )
    runner.argparser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="run every benchmark in ROUNDS rounds of its worker processes, so contenders alternate",
    )
    runner.argparser.add_argument("--in-round", action="store_true", help=argparse.SUPPRESS)
    runner.argparser.add_argument("--endpoint", help=argparse.SUPPRESS)
    runner.argparser.add_argument("--signup-request", help=argparse.SUPPRESS)
    args = runner.parse_args()
    kept = timers(args)
    if not (args.show or kept):
        sys.exit(f"--only {' / '.join(args.only)}: no benchmark's name contains it")
    if args.rounds > 1 and not (args.worker or args.show or args.in_round):
        alternate(args)
        return
    if args.show:
        compare_saved(args.show)
        return
    # Fake credentials: dynoxide accepts any; nothing is read from the developer's AWS config.
    os.environ.update(AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench", AWS_DEFAULT_REGION=c.REGION)  # noqa: S106
    os.environ["AWS_CONFIG_FILE"] = os.environ["AWS_SHARED_CREDENTIALS_FILE"] = os.devnull
    with contextlib.ExitStack() as stack:
        if not args.worker:
            args.endpoint = stack.enter_context(c.dynoxide())
            prepare(args.endpoint, args, kept)
        benches = benchmarks(runner, kept)
    if not args.worker and not args.in_round:  # A round's figures are compared once all rounds ran.
        comparisons(benches)


if __name__ == "__main__":
    main()
