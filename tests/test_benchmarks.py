"""The benchmark script runs end to end in its fastest mode (it starts its own dynoxide server)."""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyperf
import pytest
from pynamodb.exceptions import TransactWriteError

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.integration
def test_run_py__prints_every_comparison_in_its_fastest_mode(dynoxide_endpoint: str) -> None:
    """One value per benchmark, in process: the requests, the side-by-side tables and the targets are printed."""
    del dynoxide_endpoint  # Only the fixture's check that the binary is installed: the script starts its own.
    command = [sys.executable, "benchmarks/run.py", "--quick", "--debug-single-value", "--in-process", "--quiet"]
    done = subprocess.run(command, cwd=ROOT, env=os.environ, capture_output=True, text=True, timeout=300, check=False)  # noqa: S603 - our own script.
    assert done.returncode == 0, done.stderr
    for line in (
        "| duplicate signup refused | TransactWriteItems | 1 | 3 |",
        "checked: the same request by hand is the library's",
        "| client CPU, transport stubbed | library µs | minimal µs | minimal correct µs | library / minimal by hand "
        "| library / minimal correct by hand |",
        "target: CPU delete: library / minimal by hand",
        "target: CPU delete: library / minimal correct by hand",
        "target: CPU create: library / minimal by hand",
        "target: CPU non-unique save: library / plain PynamoDB",
        "target: CPU non-unique save: library / minimal by hand",
        "target: CPU non-unique update: library / plain PynamoDB",
        "| over HTTP, client CPU (µs) | library | minimal by hand | plain PynamoDB | library / minimal by hand "
        "| library / plain PynamoDB |",
        "| unique change (update) |",
        "| PynamoDB, the seed's transaction |",
        "| boto3, minimal items |",
        "| raw boto3 Scan |",
        "| save() loop |",
        "target: signups/s: library / boto3 minimal items",
    ):
        assert line in done.stdout, done.stdout
    over_http = done.stdout.split("| over HTTP, client CPU (µs) |")[1].split("\n\n")[0]
    assert "| non-unique save | " in over_http, over_http
    assert "| non-unique update | " in over_http, over_http
    assert "(plain)" in over_http, over_http


@pytest.mark.parametrize("script", sorted(path.name for path in (ROOT / "benchmarks").glob("*.py")))
def test_benchmark_scripts__import_the_package_beside_them__not_another_one_installed(
    script: str, tmp_path: Path
) -> None:
    """A script times and counts this checkout's code, whatever else is on the path (say, another
    checkout installed in editable mode): a package that refuses to load stands first on PYTHONPATH."""
    (tmp_path / "pynamodb_unique").mkdir()
    (tmp_path / "pynamodb_unique" / "__init__.py").write_text("raise ImportError('another pynamodb_unique')\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    command = [sys.executable, f"benchmarks/{script}", "--help"]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False)  # noqa: S603 - our own scripts.
    assert done.returncode == 0, done.stderr[-2000:]


def _benchmark(name: str) -> Any:
    """A script of benchmarks/ as a module (its imports are found beside it)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))


def test_round_command__gives_the_round_its_processes_and_the_shared_file__and_the_resolved_options() -> None:
    """``--rounds``: a round runs this script again with its share of the worker processes, the values
    and warmups pyperf resolved (``--fast`` is not passed on: it would reset the processes), and the
    script's own options, appending to one file."""
    run = _benchmark("run")
    parsed = argparse.Namespace(
        values=2,
        warmups=1,
        loops=0,
        min_time=0.1,
        affinity=None,
        quick=True,
        in_process=False,
        quiet=False,
        verbose=False,
        only=["signup", "audit"],
    )
    command = run.round_command(parsed, "all.json", 2)
    assert command[:2] == [sys.executable, run.__file__]
    assert command[2:] == [
        "--processes=2",
        "--values=2",
        "--warmups=1",
        "--min-time=0.1",
        "--quick",
        "--only=signup",
        "--only=audit",
        "--append=all.json",
        "--in-round",
    ]


@pytest.mark.integration
def test_run_py__only__times_and_compares_just_the_benchmarks_named(dynoxide_endpoint: str, tmp_path: Path) -> None:
    """``--only``, twice: the benchmarks either text names, in worker processes, and their targets; nothing else."""
    del dynoxide_endpoint
    saved = tmp_path / "only.json"
    # In worker processes (pyperf picks a worker's benchmark by its place in the list).
    command = [sys.executable, "benchmarks/run.py", "--quick", "-p", "1", "--values", "1", "--warmups", "0"]
    command += ["--loops", "1", "--min-time", "1e-9", "--quiet", "-o", str(saved)]
    command += ["--only", "non-unique update", "--only", "delete: "]
    done = subprocess.run(command, cwd=ROOT, env=os.environ, capture_output=True, text=True, timeout=300, check=False)  # noqa: S603 - our own script.
    assert done.returncode == 0, done.stderr
    names = {bench.get_name() for bench in pyperf.BenchmarkSuite.load(str(saved)).get_benchmarks()}
    assert {name for name in names if "non-unique update" not in name} == {
        f"delete: {who}"
        for who in ("library", "minimal by hand", "minimal correct by hand", "same request by hand", "plain PynamoDB")
    }, names
    assert "non-unique update: library" in names, names
    assert "target: CPU non-unique update: library / plain PynamoDB" in done.stdout, done.stdout
    assert "target: CPU delete: library / minimal correct by hand" in done.stdout, done.stdout
    for absent in ("target: CPU create", "target: signups/s", "target: items/s", "| raw boto3 Scan |"):
        assert absent not in done.stdout, done.stdout


@pytest.mark.integration
def test_run_py__only__part_of_a_family_and_the_audit__compared_with_what_ran(dynoxide_endpoint: str) -> None:
    """A family's contender alone is compared with what ran ("-" for the others); the audit alone gets its table."""
    del dynoxide_endpoint
    command = [sys.executable, "benchmarks/run.py", "--quick", "--debug-single-value", "--in-process", "--quiet"]
    command += [
        "--only",
        "create: library",
        "--only",
        "raw boto3 Scan",
        "--only",
        "save over HTTP, client CPU: library",
    ]
    done = subprocess.run(command, cwd=ROOT, env=os.environ, capture_output=True, text=True, timeout=300, check=False)  # noqa: S603 - our own script.
    assert done.returncode == 0, done.stderr
    rows = {line.split(" | ")[0]: line for line in done.stdout.splitlines() if line.startswith("| ")}
    assert rows["| create"].endswith("| - | - | - | - |"), rows
    assert rows["| non-unique save"].count("| - ") == 4, rows  # Its minimal by hand and plain PynamoDB not run.
    assert rows["| raw boto3 Scan"].split(" | ")[1] != "-", rows  # Read in full: its table was loaded.
    assert rows["| raw boto3 Scan"].endswith("| - |"), rows  # Its ratio is to the audit, not run.
    assert rows["| audit"].endswith("| - | - |"), rows
    assert "target:" not in done.stdout, done.stdout


def test_run_py__only__matching_no_benchmark__refused_before_any_work() -> None:
    command = [sys.executable, "benchmarks/run.py", "--only", "no such benchmark", "--only", "nor this"]
    done = subprocess.run(command, cwd=ROOT, env=os.environ, capture_output=True, text=True, timeout=60, check=False)  # noqa: S603 - our own script.
    assert done.returncode != 0
    assert "--only no such benchmark / nor this: no benchmark's name contains it" in done.stderr, done.stderr
    assert "requests per operation" not in done.stdout, done.stdout


@pytest.mark.parametrize(
    ("processes", "rounds", "expected"), [(6, 3, [2, 2, 2]), (7, 3, [3, 2, 2]), (6, 4, [2, 2, 1, 1])]
)
def test_shares__every_worker_process_in_some_round(processes: int, rounds: int, expected: list[int]) -> None:
    assert _benchmark("run").shares(processes, rounds) == expected


def test_shares__fewer_processes_than_rounds__refused() -> None:
    with pytest.raises(SystemExit, match="at least as many worker processes"):
        _benchmark("run").shares(2, 3)


@pytest.mark.integration
def test_run_py__rounds_in_their_fastest_mode__compared_once(dynoxide_endpoint: str) -> None:
    """Two rounds of one value per benchmark, in process: each round appends to the file, the comparisons come once."""
    del dynoxide_endpoint
    command = [sys.executable, "benchmarks/run.py", "--quick", "--rounds", "2", "-p", "2", "--values", "1"]
    command += ["--warmups", "0", "--loops", "1", "--min-time", "1e-9", "--in-process", "--quiet"]
    done = subprocess.run(command, cwd=ROOT, env=os.environ, capture_output=True, text=True, timeout=300, check=False)  # noqa: S603 - our own script.
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("round ") >= 2, done.stdout
    assert done.stdout.count("| client CPU, transport stubbed |") == 1, done.stdout


@pytest.mark.integration
def test_guard_cost_py__prints_both_operations_in_its_smoke_mode(dynoxide_endpoint: str) -> None:
    """The compare-and-swap's cost script runs end to end (3 turns of 20 operations) and prints its table."""
    del dynoxide_endpoint  # Only the fixture's check that the binary is installed: the script starts its own.
    command = [sys.executable, "benchmarks/guard_cost.py", "--quick"]
    done = subprocess.run(command, cwd=ROOT, env=os.environ, capture_output=True, text=True, timeout=120, check=False)  # noqa: S603 - our own script.
    assert done.returncode == 0, done.stderr
    assert "| operation | library | minimal | library / minimal |" in done.stdout, done.stdout
    for operation in ("delete", "unique change (update)"):
        assert f"| {operation} | " in done.stdout, done.stdout
    assert "A ClientRequestToken drawn from the operating system" in done.stdout, done.stdout


def test_minimal_contender__draws_a_fresh_token_for_each_transaction(monkeypatch: pytest.MonkeyPatch) -> None:
    """The seed's transaction by hand sends a token of its own each time, as the library does: DynamoDB
    refuses a token reused with other items, so a constant one would hold only against the stub."""
    contenders = _benchmark("contenders")
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(name, "bench")
    contenders.bind("http://localhost:9", "tokens", create=False)
    with contenders.stubbed_transport() as transport:
        transport.sent = []
        for account in contenders._plain_loaded(2):
            contenders._minimal_delete(account)
        contenders._minimal_create(contenders._plain(1)[0])
    tokens = [params["ClientRequestToken"] for operation, params in transport.sent if operation == "TransactWriteItems"]
    assert len(tokens) == 3
    assert len(set(tokens)) == 3
    assert all(len(token) == 32 and set(token) <= set("0123456789abcdef") for token in tokens)


def _locks_and_values(contenders: Any) -> tuple[set[str], set[str], list[str]]:
    """The minimal contenders' table: the lock keys stored, those its records' values need, and their emails."""
    items = contenders.PlainAccount._get_connection().scan(consistent_read=True)["Items"]
    locks = {item["PK"]["S"] for item in items if item["SK"]["S"] == "LOCK"}
    records = [contenders.PlainAccount.from_raw_data(item) for item in items if item["SK"]["S"] == "PROFILE"]
    needed = {f"UNIQ#EMAIL#{r.email.casefold()}" for r in records} | {f"UNIQ#HANDLE#{r.username}" for r in records}
    return locks, needed, sorted(r.email.casefold() for r in records)


@pytest.mark.integration
@pytest.mark.parametrize(
    # Where the record's item is in the transaction as sent: deletes, then puts, then updates.
    ("operation", "record_at"),
    [("unique change (save)", 2), ("unique change (update)", 2), ("delete", 0)],
)
def test_minimal_contenders__stale_record__the_seeds_transaction_lets_a_value_be_taken_twice__the_correct_one_refused(
    dynoxide_endpoint: str, operation: str, record_at: int
) -> None:
    """Why run.py judges changes and deletes against the minimal *correct* transaction by hand.

    The seed's transaction, as written, releases the locks of the values the instance read.
    When the record changed since and another record took a value it freed, it deletes that
    record's lock, so a third record takes the same value, and leaves the record's current lock
    behind. The same transaction with the record's check (it still holds the values it read) is
    refused then, and goes through from the record read afresh.
    """
    contenders = _benchmark("contenders")
    plain = contenders.PlainAccount
    for contender in (contenders.MINIMAL, contenders.CORRECT):
        contenders.bind(dynoxide_endpoint, f"race-{os.urandom(4).hex()}")
        contenders._minimal_create(plain(pk="ACCT#a", email="Ada@example.com", username="ada"))
        stale = plain.get("ACCT#a", "PROFILE")
        current = plain.get("ACCT#a", "PROFILE")
        for _ in range(2):  # Ada@ -> xAda@ -> xxAda@: the stale instance's own change is free again.
            contenders._minimal_change_update(current)
        contenders._minimal_create(plain(pk="ACCT#b", email="ada@example.com", username="bob"))  # The freed value.
        run = contenders.CPU_OPERATIONS[operation][contender].run
        if contender == contenders.MINIMAL:
            run(stale)
            locks, needed, _ = _locks_and_values(contenders)
            assert "UNIQ#EMAIL#ada@example.com" not in locks  # Bob's email, unprotected:
            contenders._minimal_create(plain(pk="ACCT#c", email="ADA@example.com", username="carol"))
            locks, needed, emails = _locks_and_values(contenders)
            assert emails.count("ada@example.com") == 2  # Bob's and Carol's.
            assert "UNIQ#EMAIL#xxada@example.com" in locks - needed  # Ada's current lock, left behind.
        else:
            with pytest.raises(TransactWriteError) as failed:
                run(stale)
            codes = [reason.code if reason else None for reason in failed.value.cancellation_reasons]
            assert codes[record_at] == "ConditionalCheckFailed"
            assert codes.count("ConditionalCheckFailed") == 1
            locks, needed, _ = _locks_and_values(contenders)
            assert locks == needed
            run(plain.get("ACCT#a", "PROFILE"))
            locks, needed, emails = _locks_and_values(contenders)
            assert locks == needed
            assert emails.count("ada@example.com") == 1


@pytest.mark.parametrize("cold", [False, True])
def test_instructions_py__no_gc__reaches_every_counted_child(monkeypatch: pytest.MonkeyPatch, cold: bool) -> None:
    """``--no-gc`` is passed on to the child processes callgrind counts (valgrind is not run here)."""
    instructions = _benchmark("instructions")
    commands: list[list[str]] = []

    class Refused:
        """A child that exits at once, after its command line is kept."""

        def __init__(self, command: list[str], **kwargs: Any) -> None:
            del kwargs
            commands.append(command)
            self.returncode, self.stdout, self.stderr = 1, "", "stopped by the test"

        def communicate(self) -> tuple[str, str]:
            return self.stdout, self.stderr

    monkeypatch.setattr(instructions.subprocess, "run", Refused)
    monkeypatch.setattr(instructions.subprocess, "Popen", Refused)
    args = ["--cold", "delete"] if cold else ["delete"]
    for collect in (True, False):
        with pytest.raises(RuntimeError, match="valgrind exited with 1"):
            instructions.main([*args, *([] if collect else ["--no-gc"])])
    assert commands, "no child was started"
    with_gc, without_gc = commands[: len(commands) // 2], commands[len(commands) // 2 :]
    assert all("--no-gc" not in command for command in with_gc)
    assert all("--no-gc" in command for command in without_gc)
    assert all(command[0] == "valgrind" and "delete" in command for command in commands)


def test_instructions_py__collecting_off__the_collector_stops_after_a_full_collection(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The counted children turn the collector off only when asked, after collecting what is there."""
    instructions = _benchmark("instructions")
    collected: list[int] = []
    monkeypatch.setattr(instructions.gc, "collect", lambda: collected.append(1) or 0)
    assert gc.isenabled()
    try:
        instructions._collecting(True)
        assert gc.isenabled()
        assert collected == []
        instructions._collecting(False)
        assert not gc.isenabled()
        assert collected == [1]
    finally:
        gc.enable()


@pytest.mark.parametrize("cold", [False, True])
def test_instructions_py__child_with_no_gc__counts_with_the_collector_off(
    monkeypatch: pytest.MonkeyPatch, cold: bool
) -> None:
    """A counted child given ``--no-gc`` turns the collector off after the warm-up, before counting."""
    instructions = _benchmark("instructions")
    states: list[bool] = []

    @contextlib.contextmanager
    def served(run: str) -> Iterator[str]:
        del run
        yield "template"

    def run(item: object) -> None:
        del item
        states.append(gc.isenabled())

    variant = instructions.bench.Variant(lambda n: list(range(n)), run)
    monkeypatch.setattr(instructions, "served", served)
    monkeypatch.setattr(instructions, "_variant", lambda operation, contender, template: variant)
    monkeypatch.setattr(instructions, "FLUSH_BYTES", 64)
    child = ["--cold-child", "delete", instructions.bench.LIB] if cold else ["--child", "delete"]
    # Each contender: its warm-up, then its 3 counted operations (a child counts each of delete's).
    warm_up = instructions.WARM_UP
    per = warm_up + 3
    contenders = 1 if cold else 3  # The library, the minimal and the minimal correct contenders.
    try:
        for collect in (True, False):
            states.clear()
            assert instructions.main([*child, "--ops", "3", *([] if collect else ["--no-gc"])]) == 0
            assert len(states) == per * contenders
            assert states[:warm_up] == [True] * warm_up
            counted = [states[start + warm_up : start + per] for start in range(0, len(states), per)]
            assert counted == [[collect] * 3] * len(counted)
    finally:
        gc.enable()
