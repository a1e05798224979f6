"""The moto tests under every supported Python, on demand (CI runs ``bash scripts/test`` on one).

    python -m pip install nox        # or the dev extra: pip install -e '.[dev]'
    python -m nox                    # tests-3.11, tests-3.12, tests-3.13
    python -m nox -s tests-3.13 -- -x -k lifecycle   # after --: pytest's arguments

Each session installs the package (a wheel built from this tree, not the tree itself, so the
packaging is tested too) with its ``test`` and ``cli`` extras into a fresh virtualenv, and runs
the tests not marked ``integration``: no dynoxide server or npm needed.

Nox looks for ``python3.11``, ``python3.12`` and ``python3.13`` on ``PATH``. pyenv's shims answer
only for the versions pyenv has enabled, so the interpreters pyenv installed
(``$PYENV_ROOT/versions/3.1x.y/bin``, newest patch release of each) are put first on ``PATH``
when they exist. Elsewhere, put the interpreters on ``PATH`` yourself.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import nox

PYTHONS = ["3.11", "3.12", "3.13"]

nox.options.sessions = ["tests"]
# Interpreters come from the machine (PATH, pyenv); nox must not try to download one.
nox.options.download_python = "never"


def _pyenv_bins() -> list[str]:
    """The ``bin`` folder of pyenv's newest installed patch release of each of ``PYTHONS``."""
    versions = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    found = []
    for python in PYTHONS:
        releases = [p for p in versions.glob(f"{python}.*") if re.fullmatch(rf"{re.escape(python)}\.\d+", p.name)]
        if releases:
            newest = max(releases, key=lambda p: int(p.name.rsplit(".", 1)[1]))
            found.append(str(newest / "bin"))
    return found


os.environ["PATH"] = os.pathsep.join([*_pyenv_bins(), os.environ.get("PATH", "")])


@nox.session(python=PYTHONS)
def tests(session: nox.Session) -> None:
    """The suite's moto tests (``-m "not integration"``), PynamoDB's own unit tests included."""
    session.install(".[test,cli]")
    session.run("pytest", "-m", "not integration", *session.posargs)
