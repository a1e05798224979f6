"""Starting and stopping a dynoxide server (a DynamoDB-compatible binary from npm).

One helper for the test suite's fixture, the conformance harness and the benchmarks: a fresh
in-memory server on a free port of 127.0.0.1, stopped by its PID.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Final

REPO_ROOT: Final = Path(__file__).resolve().parent.parent
VERSION: Final = "1.2.1"
INSTALL: Final = f"npm install --prefix .tools @dynoxide/linux-x64@{VERSION}"
DEFAULT_BIN: Final = REPO_ROOT / ".tools" / "node_modules" / "@dynoxide" / "linux-x64" / "dynoxide"
START_TIMEOUT: Final = 10.0


class DynoxideError(RuntimeError):
    """The server could not be started."""


def binary() -> Path:
    """The dynoxide binary: ``$DYNOXIDE_BIN``, else the one ``npm install --prefix .tools`` put in the repo."""
    return Path(os.environ.get("DYNOXIDE_BIN") or DEFAULT_BIN)


def installed(path: Path | None = None) -> bool:
    """Whether the binary exists and is executable."""
    path = path or binary()
    return path.is_file() and os.access(path, os.X_OK)


def free_port() -> int:
    """A port of 127.0.0.1 free now (it may be taken before it is bound: callers retry)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _accepts_connections(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)


@contextlib.contextmanager
def server(path: Path | None = None, *, log: IO[bytes] | None = None, tries: int = 3) -> Iterator[str]:
    """Run an in-memory dynoxide on a free port; yield ``http://127.0.0.1:PORT``; stop it by PID.

    Raises:
        DynoxideError: the binary is missing, or the server did not accept connections in ``tries``
            attempts of ``START_TIMEOUT`` seconds each.
    """
    path = path or binary()
    if not installed(path):
        msg = f"dynoxide binary not found at {path}: run `{INSTALL}` from the repository root or set DYNOXIDE_BIN"
        raise DynoxideError(msg)
    problem = ""
    for _ in range(tries):
        port = free_port()
        process = subprocess.Popen(  # noqa: S603 - our own binary, fixed arguments.
            [str(path), "serve", "--host", "127.0.0.1", "--port", str(port)],
            stdin=subprocess.DEVNULL,
            stdout=log if log is not None else subprocess.DEVNULL,
            stderr=subprocess.STDOUT if log is not None else subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + START_TIMEOUT
            while process.poll() is None and time.monotonic() < deadline and not _accepts_connections(port):
                time.sleep(0.02)
            if process.poll() is None and _accepts_connections(port):
                yield f"http://127.0.0.1:{port}"
                return
            code = process.poll()
            problem = f"exited with code {code}" if code is not None else f"no connection within {START_TIMEOUT:.0f}s"
        finally:
            _stop(process)
    msg = f"dynoxide ({path}) {problem} ({tries} tries)"
    raise DynoxideError(msg)
