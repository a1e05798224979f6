"""The benchmark script runs end to end in its fastest mode (it starts its own dynoxide server)."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

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
        "| client CPU, transport stubbed | library µs | minimal µs | library / minimal by hand |",
        "| unique change (update) |",
        "| PynamoDB, the seed's transaction |",
        "| boto3, minimal items |",
        "| raw boto3 Scan |",
        "| save() loop |",
        "target: signups/s: library / boto3 minimal items",
    ):
        assert line in done.stdout, done.stdout


def test_round_command__gives_each_round_its_processes_and_the_shared_file__keeps_the_rest() -> None:
    """``--rounds``: every round runs this script again with the other options as given, its share of
    the worker processes, and appends to one file (the rounds' own options, in either spelling, dropped)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        run = importlib.import_module("run")
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    given = ["--fast", "--rounds", "3", "-o", "b.json", "-p=6", "--quick", "--output=c.json", "-p4", "-ob.json"]
    command = run.round_command(given, "all.json", 2)
    assert command[:2] == [sys.executable, run.__file__]
    assert command[2:] == ["--fast", "--quick", "--processes=2", "--append=all.json", "--in-round"]


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
