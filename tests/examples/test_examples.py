"""The examples run as a newcomer runs them: on embedded moto, and against a server."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "signup.py"
README = Path(__file__).resolve().parents[2] / "README.md"
#: Runs the code on stdin as a script inside moto, as a reader wraps the README's example.
MOTO_RUNNER = (
    "import sys, moto\n"
    "with moto.mock_aws():\n"
    "    exec(compile(sys.stdin.read(), 'README.md', 'exec'), {'__name__': '__main__'})\n"
)


def _run(*args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    done = subprocess.run(  # noqa: S603 - our own example, fixed arguments.
        [sys.executable, str(EXAMPLE), *args], capture_output=True, text=True, timeout=120, env=env, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _readme_example() -> str:
    text = README.read_text()
    start = text.index("```python\n") + len("```python\n")
    return text[start : text.index("```", start)]


def _check_story(out: str) -> None:
    assert "refused: email 'ADA@Lovelace.io' is already taken" in out
    assert "refused: username 'ada' is already taken" in out
    assert out.count("signed up") == 3


def test_signup__embedded_moto__tells_the_story() -> None:
    """examples/signup.py runs without any AWS account and tells the seed's story."""
    _check_story(_run())


@pytest.mark.integration
def test_signup__endpoint__runs_against_a_server(dynoxide_endpoint: str) -> None:
    """--endpoint points the example at a real DynamoDB-compatible server."""
    _check_story(_run("--endpoint", dynoxide_endpoint))


def test_readme_example__runs_as_written_on_moto() -> None:
    """The README's minimal example runs as written (no AWS settings) and prints what its comments show."""
    example = _readme_example()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    done = subprocess.run(  # noqa: S603 - our own README's example, fixed arguments.
        [sys.executable, "-c", MOTO_RUNNER],
        input=example,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    shown = [line.removeprefix("# ") for line in example.splitlines() if line.startswith("# ")]
    assert len(shown) == 3
    assert done.stdout.splitlines() == shown
