"""Pytest plugin for the peer suite: records each test's outcome and DynamoDB requests.

Loaded in the peer suite's pytest process with ``-p conformance.plugin --conformance-record PATH``.
It wraps ``pynamodb.connection.base.Connection.dispatch``, the one method every PynamoDB request
goes through (the peer unit tests mock botocore below it), and records, per test node id, each
request's operation name and a deep copy of its arguments as passed to ``dispatch`` (without
``ClientRequestToken``, which is random). At the end of the session it writes a JSON file::

    {"outcomes": {nodeid: "passed" | "failed" | "error" | "skipped" | "xfailed" | "xpassed"},
     "messages": {nodeid: crash message of a failed test},
     "requests": {nodeid: [{"operation": str, "kwargs": {...}}, ...]},
     "collect_errors": {nodeid: message},
     "exitstatus": int}

Values JSON cannot hold are tagged: ``{"$bytes": base64}``, ``{"$set": [...]}``,
``{"$decimal": str}``, ``{"$object": type name}``.
"""

from __future__ import annotations

import base64
import copy
import decimal
import functools
import json
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest
from pynamodb.connection.base import Connection

OPTION = "--conformance-record"
#: How much of a failure's message is kept.
MESSAGE_LIMIT = 2000


def to_json(value: Any) -> Any:
    """``value`` as plain JSON data, tagging bytes, sets, decimals and other objects."""
    result: Any
    if value is None or isinstance(value, bool | int | float | str):
        result = value
    elif isinstance(value, dict):
        result = {str(k): to_json(v) for k, v in value.items()}
    elif isinstance(value, list | tuple):
        result = [to_json(v) for v in value]
    elif isinstance(value, bytes | bytearray):
        result = {"$bytes": base64.b64encode(value).decode("ascii")}
    elif isinstance(value, set | frozenset):
        items = [to_json(v) for v in value]
        result = {"$set": sorted(items, key=lambda v: json.dumps(v, sort_keys=True))}
    elif isinstance(value, decimal.Decimal):
        result = {"$decimal": str(value)}
    else:
        # A mock or another object: its type only, as a repr may hold an id that changes every run.
        result = {"$object": f"{type(value).__module__}.{type(value).__qualname__}"}
    return result


class Recorder:
    """Outcomes and requests of the tests run so far."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.current: str | None = None
        self.outcomes: dict[str, str] = {}
        self.messages: dict[str, str] = {}
        self.requests: dict[str, list[dict[str, Any]]] = {}
        self.collect_errors: dict[str, str] = {}

    def record_request(self, operation_name: str, operation_kwargs: dict[str, Any]) -> None:
        """Keep one request of the current test (none outside a test)."""
        if self.current is None:
            return
        kwargs = copy.deepcopy(operation_kwargs)
        kwargs.pop("ClientRequestToken", None)
        self.requests[self.current].append({"operation": operation_name, "kwargs": to_json(kwargs)})

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Generator[None, object, object]:
        """Attribute requests sent during setup, call and teardown to ``item``."""
        self.current = item.nodeid
        self.requests[item.nodeid] = []
        try:
            return (yield)
        finally:
            self.current = None

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Fold the report of one phase into the test's outcome (a failure in any phase wins)."""
        nodeid = report.nodeid
        if report.failed:
            outcome = "failed" if report.when == "call" else "error"
            self.messages.setdefault(nodeid, _message(report))
        elif report.skipped:
            outcome = "xfailed" if hasattr(report, "wasxfail") else "skipped"
        elif report.when == "call":
            outcome = "xpassed" if hasattr(report, "wasxfail") else "passed"
        else:
            return
        if self.outcomes.get(nodeid) not in {"failed", "error"}:
            self.outcomes[nodeid] = outcome

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        """Keep collection errors: a module that fails to import hides all its tests."""
        if report.failed:
            self.collect_errors[report.nodeid] = _message(report)

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        """Write everything recorded to the JSON file."""
        data = {
            "outcomes": self.outcomes,
            "messages": self.messages,
            "requests": self.requests,
            "collect_errors": self.collect_errors,
            "exitstatus": int(exitstatus),
        }
        self.path.write_text(json.dumps(data, indent=1))


def _message(report: pytest.TestReport | pytest.CollectReport) -> str:
    """The short crash message of a failed report (the whole text when there is none)."""
    crash = getattr(report.longrepr, "reprcrash", None)
    text = str(crash.message) if crash is not None else report.longreprtext
    return text[:MESSAGE_LIMIT]


def pytest_addoption(parser: pytest.Parser) -> None:
    """Add ``--conformance-record PATH``."""
    parser.addoption(OPTION, metavar="PATH", help="write each test's outcome and DynamoDB requests here (JSON)")


def pytest_configure(config: pytest.Config) -> None:
    """Wrap ``Connection.dispatch`` and register the recorder, when ``--conformance-record`` is given."""
    path = config.getoption(OPTION)
    if not path:
        return
    recorder = Recorder(Path(path))
    original = Connection.dispatch

    @functools.wraps(original)
    def dispatch(self: Connection, operation_name: str, operation_kwargs: dict[str, Any]) -> dict[str, Any]:
        recorder.record_request(operation_name, operation_kwargs)
        return original(self, operation_name, operation_kwargs)

    Connection.dispatch = dispatch  # type: ignore[method-assign]  # the recording wrapper
    config.pluginmanager.register(recorder, "conformance-recorder")
