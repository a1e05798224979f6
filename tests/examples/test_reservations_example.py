"""examples/reservations.py runs as a newcomer runs it: on embedded moto, and against a server."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "reservations.py"


def _run(*args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    done = subprocess.run(  # noqa: S603 - our own example, fixed arguments.
        [sys.executable, str(EXAMPLE), *args], capture_output=True, text=True, timeout=120, env=env, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _check_story(out: str) -> None:
    assert "refused: username 'ada' is reserved until" in out
    assert "'ada' now belongs to ('ACCT#1', 'PROFILE')" in out
    assert "released: True" in out
    assert "refused: the reservation of username no longer holds it" in out


def test_reservations_example__embedded_moto__tells_the_story() -> None:
    """examples/reservations.py runs without any AWS account: reserve, refuse, claim, release, end."""
    _check_story(_run())


@pytest.mark.integration
def test_reservations_example__endpoint__runs_against_a_server(dynoxide_endpoint: str) -> None:
    """--endpoint points the example at a real DynamoDB-compatible server."""
    _check_story(_run("--endpoint", dynoxide_endpoint))
