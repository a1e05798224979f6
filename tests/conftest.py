"""Pytest fixtures for running tests on two DynamoDB backends: moto (in-process) and dynoxide.

- ``backend``: moto, or the backends a ``backends("moto", "dynoxide")`` marker names (dynoxide's
  runs are marked ``integration``); yields :class:`_backends.Backend`. Bind models to it with
  :func:`_backends.bind_model`.
- ``dynoxide_endpoint`` (session): URL of a dynoxide server started for the session.
- ``moto_backend``: ``moto.mock_aws()`` active for the test.
- ``aws_env`` (autouse): fake credentials/region, no profile, no endpoint overrides.
- ``accounts``: ``models.Account`` bound to ``backend``; ``tickets``: ``models.Ticket`` with its lock table.

Shared models live in ``tests/models.py``.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

TESTS_DIR = Path(__file__).resolve().parent
REPO_ROOT = TESTS_DIR.parent
if str(TESTS_DIR) not in sys.path:  # make `import _backends` work in any pytest import mode
    sys.path.insert(0, str(TESTS_DIR))

import _dynoxide  # noqa: E402
import botocore.session  # noqa: E402
import moto  # noqa: E402  (import early: moto hooks botocore clients created after its import)
from _backends import AWS_ENV_REMOVED, Backend, bind_model  # noqa: E402
from models import Account, Ticket  # noqa: E402

from pynamodb_unique import create_lock_table  # noqa: E402

# Each model a test binds gets its own PynamoDB Connection, hence its own botocore session, whose
# new loader parses botocore's JSON data again (about 0.2 s a model); one loader serves them all.
botocore.session.create_loader = functools.cache(botocore.session.create_loader)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "integration: runs against a dynoxide server (DynamoDB-compatible binary from npm)",
    )
    config.addinivalue_line(
        "markers",
        "backends(*names): the backends ('moto', 'dynoxide') a test taking the backend fixture runs on",
    )


# --- environment ---------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fake credentials and region; nothing from the developer's AWS config leaks in."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", os.devnull)
    for name in AWS_ENV_REMOVED:
        monkeypatch.delenv(name, raising=False)


# --- moto ----------------------------------------------------------------------------------


@pytest.fixture
def moto_backend(aws_env: None) -> Iterator[None]:
    """moto's in-process AWS mock, active for the whole test."""
    with moto.mock_aws():
        yield


# --- dynoxide ------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def dynoxide_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Start one in-memory dynoxide server for the session; yield ``http://127.0.0.1:PORT``."""
    binary = _dynoxide.binary()
    if not _dynoxide.installed(binary):
        where = "DYNOXIDE_BIN" if os.environ.get("DYNOXIDE_BIN") else "the default path"
        if os.environ.get("CI"):
            pytest.fail(
                f"dynoxide binary not found at {binary} ({where}); CI must install it before "
                f"running tests: `{_dynoxide.INSTALL}` from the repository root.",
                pytrace=False,
            )
        pytest.fail(
            f"dynoxide binary not found at {binary} ({where}). Install it from the repository "
            f"root with `{_dynoxide.INSTALL}` (or set DYNOXIDE_BIN), or deselect these tests "
            "with `-m 'not integration'`.",
            pytrace=False,
        )
    log_path = tmp_path_factory.mktemp("dynoxide") / "dynoxide.log"
    with open(log_path, "wb") as log, contextlib.ExitStack() as stack:
        try:
            url = stack.enter_context(_dynoxide.server(binary, log=log))
        except _dynoxide.DynoxideError as exc:
            pytest.fail(f"{exc}; its output:\n" + log_path.read_text(errors="replace"), pytrace=False)
        yield url


# --- moto, dynoxide or both ----------------------------------------------------------------

#: Where a test taking ``backend`` runs unless marked ``backends(...)``: single-process behaviour
#: on moto; a test where a real server matters (atomicity, tokens, HTTP, concurrency, server
#: errors) names dynoxide too, or only.
DEFAULT_BACKENDS = ("moto",)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize ``backend`` over the backends the test's ``backends`` marker names (default moto)."""
    if "backend" not in metafunc.fixturenames:
        return
    marker = metafunc.definition.get_closest_marker("backends")
    names = marker.args if marker is not None else DEFAULT_BACKENDS
    unknown = set(names) - {"moto", "dynoxide"}
    if not names or unknown:
        msg = f"backends(...) takes 'moto' and/or 'dynoxide', got {names!r}"
        raise pytest.UsageError(msg)
    params = [
        pytest.param(name, id=name, marks=[pytest.mark.integration] if name == "dynoxide" else []) for name in names
    ]
    metafunc.parametrize("backend", params, indirect=True)


@pytest.fixture
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    """The DynamoDB to test against; bind models with ``bind_model(Model, backend)``.

    Moto unless the test (or its module, with ``pytestmark``) is marked
    ``@pytest.mark.backends("moto", "dynoxide")`` or ``@pytest.mark.backends("dynoxide")``.
    """
    if request.param == "moto":
        request.getfixturevalue("moto_backend")
        yield Backend(name="moto", host=None)
    else:
        yield Backend(name="dynoxide", host=request.getfixturevalue("dynoxide_endpoint"))


# --- shared model fixtures -------------------------------------------------------------------


@pytest.fixture
def accounts(backend: Backend) -> type[Account]:
    """``models.Account`` (the issue's example) in a table of its own on the test's backend."""
    return bind_model(Account, backend)


@pytest.fixture
def tickets(backend: Backend) -> type[Ticket]:
    """``models.Ticket`` on the test's backend, with its lock table (``<table>-locks``) created."""
    model = bind_model(Ticket, backend, create=False)
    model.Meta.unique_lock_table = f"{model.Meta.table_name}-locks"  # type: ignore[attr-defined]
    model.create_table(wait=True, billing_mode="PAY_PER_REQUEST")
    create_lock_table(model, wait=True)
    return model
