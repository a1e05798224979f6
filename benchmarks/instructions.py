"""Instructions per operation: the client work of ``run.py``'s CPU section, counted instead of timed.

Run from the repository root (needs valgrind: ``apt-get install valgrind``)::

    python benchmarks/instructions.py             # about 2 minutes on 2 cores
    python benchmarks/instructions.py --ops 500   # more operations per contender
    python benchmarks/instructions.py delete      # some operations only
    python benchmarks/instructions.py --cold      # cache lines fetched from a cold cache (10 min)
    python benchmarks/instructions.py --cold --no-gc   # the same, the garbage collector off

Besides the CPU section's operations, it counts a record's load (``from_raw_data``, what get,
query and scan do with each item) on the library's model and on the plain one, and a signup from
its values as the HTTP section's contenders make one (``signup (from values)``): the library's and
the seed's PynamoDB model instances built and saved, boto3's request built and handed to the
botocore client's method, the sending stubbed for all (what a client does before botocore sends).

Timed CPU figures on a shared machine move by 20-30 % from one run to the next, more than most
changes to the write path. This script runs the same contenders as ``run.py``'s CPU section
(stubbed transport, the same inputs) once, under valgrind's callgrind, and counts what each
executes per operation: instructions, and the branches mispredicted and first-level cache misses
callgrind simulates. The counts are the same from run to run (within a fraction of a percent) and
from machine to machine for one Python and set of packages, so a change can be judged by them
before it is timed. They are not a time: the same instructions run slower where branches are
mispredicted or code and data miss the caches, so ``cycles (est.)`` adds callgrind's usual
estimate (10 cycles per mispredicted branch or first-level miss, 100 per last-level miss). Time
stays what ``run.py`` measures and what its targets judge.

Every contender runs in one process, each in its own call of ``functools.reduce``, the only
function callgrind counts in (``--toggle-collect``) and after which it writes the counts
(``--dump-after``). Nothing here is a test: it prints figures and ratios.

``--cold`` counts what the same instructions cost when the caches hold nothing of them, as when
an application's own code ran between two writes: before each operation the child writes over
a buffer twice the size of a simulated 4 MiB last-level cache, and callgrind counts the cache
lines of 64 bytes the operation then fetches (``ILmr + DLmr + DLmw``): the code (the
interpreter's) and the data (bytecode, objects, the request) it touches, its footprint. Two
operations of equal instructions can differ there by half, and time follows it: timed with such
a flush before each operation, a delete's library / minimal ratio was 1.49 where these lines
gave 1.45 (the code before the cuts they pointed to). One child per contender, two at a time
(about 10 minutes for all).

``--no-gc`` turns the garbage collector off in the counted children (after the imports and the
warm-up): a full collection lands among an operation's counted runs, or not, depending on the
code's allocations, and adds hundreds of lines and tens of thousands of instructions to one
contender. Without it, counts of two versions of the code compare only when no collection
landed in either.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import gc
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

sys.path.insert(0, str(Path(__file__).resolve().parent))

import contenders as bench

#: A record loaded from a stored item (what get, query and scan do with each item): the
#: library's model against the plain one.
LOAD: Final = "load (from_raw_data)"
#: A signup from its values, as the HTTP section's contenders make one: the library's and the
#: seed's model instances built and saved, boto3's request built and handed to the botocore
#: client's method; the sending stubbed for all. What a client does before botocore sends.
SIGNUP: Final = "signup (from values)"
SIGNUP_CONTENDERS: Final = (bench.LIB, bench.PYNAMODB_SEED, bench.BOTO3_SAME, bench.BOTO3_MINIMAL)
#: (operation, contender) in the order the child runs them: run.py's CPU section, library, minimal
#: and minimal correct (where it differs) side by side; the non-unique update's floor; a record's
#: load; a signup from values.
MEASURED: Final = [
    *(
        (op, who)
        for op, variants in bench.CPU_OPERATIONS.items()
        for who in (bench.LIB, bench.MINIMAL, bench.CORRECT)
        if who in variants
    ),
    ("non-unique update", bench.PYNAMODB_ON_UNIQUE),
    ("non-unique update", bench.PLAIN),
    (LOAD, bench.LIB),
    (LOAD, bench.PLAIN),
    *((SIGNUP, who) for who in SIGNUP_CONTENDERS),
]
WARM_UP: Final = 30
#: ``--cold``: the simulated last-level cache (bytes, ways, line size) and what is written over
#: before each operation (twice its size, one byte per line).
COLD_CACHE: Final = (4 << 20, 16, 64)
FLUSH_BYTES: Final = 8 << 20
COLD_OPS: Final = 50
#: callgrind's cycle estimate: instructions, plus 10 per first-level miss or mispredicted branch,
#: 100 per last-level miss.
FIRST_LEVEL: Final = ("I1mr", "D1mr", "D1mw")
LAST_LEVEL: Final = ("ILmr", "DLmr", "DLmw")
MISPREDICTED: Final = ("Bcm", "Bim")


def _signup_variant(contender: str, template: str) -> bench.Variant:
    """A signup from its values (``SIGNUP``) by ``contender``; ``template``: the library's request as sent."""
    if contender == bench.LIB:
        return bench.Variant(_names, lambda n: bench.signup(n).save())
    if contender == bench.PYNAMODB_SEED:
        return bench.Variant(_names, bench.seed_signup)
    client = bench.botocore_client(bench.UniqueAccount)
    if contender == bench.BOTO3_SAME:
        return bench.Variant(_names, functools.partial(bench.boto3_same_signup, client, template))
    return bench.Variant(
        _names, functools.partial(bench.boto3_minimal_signup, client, bench.UniqueAccount.Meta.table_name)
    )


def _variant(operation: str, contender: str, template: str) -> bench.Variant:
    if operation == SIGNUP:
        return _signup_variant(contender, template)
    if operation == LOAD:
        model = bench.UniqueAccount if contender == bench.LIB else bench.PlainAccount
        return bench.Variant(bench.stored_items, model.from_raw_data)
    if contender == bench.PYNAMODB_ON_UNIQUE:
        return bench.UPDATE_FLOOR[contender]
    return bench.CPU_OPERATIONS[operation][contender]


def _selected(operations: Sequence[str]) -> list[tuple[str, str]]:
    """The measured (operation, contender) pairs of ``operations`` (all when empty), in order."""
    unknown = set(operations) - {*bench.CPU_OPERATIONS, LOAD, SIGNUP}
    if unknown:
        msg = f"unknown operations {sorted(unknown)}; choose from {[*bench.CPU_OPERATIONS, LOAD, SIGNUP]}"
        raise SystemExit(msg)
    return [(op, who) for op, who in MEASURED if not operations or op in operations]


def _names(n: int) -> list[str]:
    return [f"b{i}" for i in range(n)]


def _step(run: Callable[[Any], object], _: object, item: Any) -> None:
    run(item)


@contextlib.contextmanager
def served(run: str) -> Iterator[str]:
    """What a child counts in: fake credentials, a dynoxide server, the models on fresh tables, a stubbed transport.

    Yields the library's signup request as sent (``run.captured_signup()``, captured before the stub).
    """
    fake = "bench"
    os.environ.update(AWS_ACCESS_KEY_ID=fake, AWS_SECRET_ACCESS_KEY=fake, AWS_DEFAULT_REGION=bench.REGION)
    os.environ["AWS_CONFIG_FILE"] = os.environ["AWS_SHARED_CREDENTIALS_FILE"] = os.devnull
    with bench.dynoxide() as host:
        bench.bind(host, run)
        template = bench.captured_signup()
        with bench.stubbed_transport():
            yield template


def warmed(operation: str, contender: str, template: str) -> bench.Variant:
    """A contender's variant after its warm-up (imports, caches, first connections: not counted)."""
    variant = _variant(operation, contender, template)
    for item in variant.prepare(WARM_UP):
        variant.run(item)
    return variant


def child(ops: int, operations: Sequence[str], *, collect: bool = True) -> None:
    """Run every contender ``ops`` times, each loop in one ``functools.reduce`` (counted by callgrind).

    ``collect``: whether the garbage collector runs while the contenders are counted.
    """
    with served("instructions") as template:
        for operation, contender in _selected(operations):
            variant = warmed(operation, contender, template)
            inputs = variant.prepare(ops)
            _collecting(collect)
            functools.reduce(functools.partial(_step, variant.run), inputs, None)


def cold_child(ops: int, operation: str, contender: str, *, collect: bool = True) -> None:
    """Run one contender ``ops`` times, each operation alone in ``functools.reduce`` after a flush of the caches.

    ``collect``: whether the garbage collector runs while the contender is counted.
    """
    buffer = bytearray(FLUSH_BYTES)
    line = COLD_CACHE[2]
    zeros = bytes(FLUSH_BYTES // line)
    with served("cold") as template:
        variant = warmed(operation, contender, template)
        step = functools.partial(_step, variant.run)
        _collecting(collect)
        for item in variant.prepare(ops):
            buffer[::line] = zeros  # Not counted, but simulated: evicts every line.
            functools.reduce(step, [item], None)


def _collecting(collect: bool) -> None:
    """Turn the garbage collector off (``collect`` False) after a full collection, or leave it on."""
    if not collect:
        gc.collect()
        gc.disable()


def _callgrind(out: str, *options: str) -> list[str]:
    """valgrind's callgrind counting only in ``functools.reduce``, writing to ``out``, around this script's child."""
    return [
        "valgrind",
        "--tool=callgrind",
        "--cache-sim=yes",
        *options,
        "--toggle-collect=functools_reduce",
        f"--callgrind-out-file={out}",
        sys.executable,
        __file__,
    ]


def _succeeded(returncode: int, stderr: str) -> None:
    """Raise (showing the end of valgrind's output) unless it exited with 0."""
    if returncode != 0:
        sys.stderr.write(stderr[-3000:])
        msg = f"valgrind exited with {returncode}"
        raise RuntimeError(msg)


def measure_cold(ops: int, operations: Sequence[str], *, collect: bool = True) -> list[tuple[str, str, dict[str, int]]]:
    """Run each contender's cold child under callgrind (two at a time); their counts, in order.

    ``collect``: whether the garbage collector runs in the children while they are counted.
    """
    size, ways, line = COLD_CACHE
    with tempfile.TemporaryDirectory() as scratch:
        measured = _selected(operations)
        outs = [Path(scratch) / f"cold.{i}" for i in range(len(measured))]
        env = {**os.environ, "PYTHONHASHSEED": "0"}
        commands = [
            [
                *_callgrind(str(out), f"--LL={size},{ways},{line}"),
                *["--cold-child", op, who, "--ops", str(ops)],
                *([] if collect else ["--no-gc"]),
            ]
            for (op, who), out in zip(measured, outs, strict=True)
        ]
        for start in range(0, len(commands), 2):
            running = [
                subprocess.Popen(c, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)  # noqa: S603 - our own command line.
                for c in commands[start : start + 2]
            ]
            for process in running:
                _, err = process.communicate()
                _succeeded(process.returncode, err)
        return [(op, who, _counts(out)) for (op, who), out in zip(measured, outs, strict=True)]


def _table(title: str, columns: Sequence[str]) -> None:
    """Print a title (counted by callgrind, under this Python) and the head of an (operation, contender) table."""
    python = sys.version.split()[0]
    print(f"{title}, counted by valgrind's callgrind (Python {python}):\n")
    print("| " + " | ".join(["operation", "contender", *columns]) + " |")
    print("|" + " --- |" * (len(columns) + 2))


def report_cold(results: Sequence[tuple[str, str, dict[str, int]]], ops: int) -> None:
    """Print the cache lines each operation fetches from a cold cache, and the library's ratios."""
    per = {(op, who): counts for op, who, counts in results}
    _table(
        f"Per operation from a cold cache, {ops} operations per contender",
        ["instructions", "code lines", "data lines read", "data lines written", "lines"],
    )
    for op, who, counts in results:
        cells = [counts[name] / ops for name in ("Ir", *LAST_LEVEL)]
        cells.append(sum(cells[1:]))
        print(f"| {op} | {who} | " + " | ".join(f"{cell:,.0f}" for cell in cells) + " |")
    print("\n| operation | library / baseline: lines from a cold cache |")
    print("| --- | --- |")
    for op, baseline in _baselines(per):
        lib, base = (sum(per[op, who][name] for name in LAST_LEVEL) for who in (bench.LIB, baseline))
        print(f"| {op} / {baseline} | {lib / base:.2f} |")


def _baselines(per: Mapping[tuple[str, str], object]) -> list[tuple[str, str]]:
    """(operation, baseline) of each library ratio to print, where both were measured."""
    wanted: list[tuple[str, str]] = [
        (op, who)
        for op, variants in bench.CPU_OPERATIONS.items()
        for who in (bench.MINIMAL, bench.CORRECT)
        if who in variants
    ]
    wanted += [(LOAD, bench.PLAIN), *((SIGNUP, who) for who in SIGNUP_CONTENDERS if who != bench.LIB)]
    return [(op, who) for op, who in wanted if (op, bench.LIB) in per and (op, who) in per]


def _counts(path: Path) -> dict[str, int]:
    """The events of one callgrind dump, by name."""
    text = path.read_text()
    events = re.search(r"^events: (.+)$", text, re.MULTILINE)
    totals = re.search(r"^(?:summary|totals): (.+)$", text, re.MULTILINE)
    if events is None or totals is None:
        msg = f"{path}: no events or totals"
        raise RuntimeError(msg)
    return dict(zip(events.group(1).split(), map(int, totals.group(1).split()), strict=True))


def _estimate(counts: dict[str, int]) -> int:
    first = sum(counts.get(name, 0) for name in FIRST_LEVEL + MISPREDICTED)
    last = sum(counts.get(name, 0) for name in LAST_LEVEL)
    return counts["Ir"] + 10 * first + 100 * last


def measure(ops: int, operations: Sequence[str], *, collect: bool = True) -> list[tuple[str, str, dict[str, int]]]:
    """Run the child under callgrind; the counts of each (operation, contender), in order.

    ``collect``: whether the garbage collector runs in the child while it is counted.
    """
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "callgrind.out"
        options = ("--branch-sim=yes", "--dump-after=functools_reduce")
        command = [*_callgrind(f"{out}.%p", *options), "--child", "--ops", str(ops)]
        command += ([] if collect else ["--no-gc"]) + list(operations)
        env = {**os.environ, "PYTHONHASHSEED": "0"}
        done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)  # noqa: S603 - our own command line.
        _succeeded(done.returncode, done.stderr)
        # One dump per reduce, numbered in order (the last, at exit, holds nothing counted).
        dumps = sorted(Path(scratch).glob("callgrind.out.*.*"), key=lambda p: int(p.name.rsplit(".", 1)[1]))
        measured = _selected(operations)
        if len(dumps) < len(measured):
            msg = f"expected {len(measured)} dumps, found {len(dumps)}"
            raise RuntimeError(msg)
        return [(op, who, _counts(dump)) for (op, who), dump in zip(measured, dumps, strict=False)]


def _ratios(top: dict[str, int], bottom: dict[str, int]) -> str:
    return f"{top['Ir'] / bottom['Ir']:.2f} | {_estimate(top) / _estimate(bottom):.2f}"


def report(results: Sequence[tuple[str, str, dict[str, int]]], ops: int) -> None:
    """Print per-operation counts and the library's ratios."""
    per = {(op, who): counts for op, who, counts in results}
    _table(
        f"Per operation, {ops} operations per contender",
        ["instructions", "branches mispredicted", "L1 misses", "cycles (est.)"],
    )
    for op, who, counts in results:
        mispredicted = sum(counts.get(n, 0) for n in MISPREDICTED) / ops
        misses = sum(counts.get(n, 0) for n in FIRST_LEVEL) / ops
        cells = (counts["Ir"] / ops, mispredicted, misses, _estimate(counts) / ops)
        print(f"| {op} | {who} | " + " | ".join(f"{cell:,.0f}" for cell in cells) + " |")
    print("\n| operation | library / baseline: instructions | cycles (est.) |")
    print("| --- | --- | --- |")
    for op, baseline in _baselines(per):
        print(f"| {op} / {baseline} | {_ratios(per[op, bench.LIB], per[op, baseline])} |")
    if ("non-unique update", bench.PLAIN) not in per:
        return
    lib, floor, plain = (per["non-unique update", who] for who in (bench.LIB, bench.PYNAMODB_ON_UNIQUE, bench.PLAIN))
    print(f"| non-unique update / plain PynamoDB | {_ratios(lib, plain)} |")
    print(f"| PynamoDB's update() on the unique model / plain PynamoDB | {_ratios(floor, plain)} |")


def main(argv: Sequence[str] | None = None) -> int:
    """Count, or (``--child``) be counted."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--ops", type=int, help="operations per contender (default 200; --cold: 50)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--cold-child", nargs=2, metavar=("OPERATION", "CONTENDER"), help=argparse.SUPPRESS)
    parser.add_argument(
        "--cold", action="store_true", help=f"count the cache lines fetched from a cold cache (default {COLD_OPS} ops)"
    )
    parser.add_argument(
        "--no-gc", action="store_true", help="count with the garbage collector off (comparable across versions)"
    )
    parser.add_argument("operations", nargs="*", help="operations of run.py's CPU section (default: all)")
    args = parser.parse_args(argv)
    _selected(args.operations)
    collect = not args.no_gc
    if args.cold_child:
        cold_child(args.ops, *args.cold_child, collect=collect)
        return 0
    if args.child:
        child(args.ops, args.operations, collect=collect)
        return 0
    if args.cold:
        ops = COLD_OPS if args.ops is None else args.ops
        report_cold(measure_cold(ops, args.operations, collect=collect), ops)
        return 0
    ops = 200 if args.ops is None else args.ops
    report(measure(ops, args.operations, collect=collect), ops)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
