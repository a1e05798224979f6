"""A pytest plugin for apps: audit the tables of the unique models each test wrote.

Installed with the library (the ``pytest11`` entry point, named ``pynamodb_unique.pytest_plugin``)
and idle unless asked: ``--unique-audit`` (or ``unique_audit = true`` in the ini file) audits,
after each test that passed, the tables of every unique model the library wrote during it (its
fixtures' setup included), and fails the test with the problems found: a writer that bypassed
the library (raw boto3, another model's ``batch_write``, a migration script) leaves a record
without its lock. The ``unique_audit`` fixture runs the same audit on demand.

The audit runs after the test function returns and before its fixtures are torn down, so the
DynamoDB it reads (``moto.mock_aws()``, a local server) must be a fixture's, not a decorator's.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any, cast

import pytest

from ._model.registry import constraints_of
from ._ops.audit import audit
from ._write.telemetry import listening

if TYPE_CHECKING:
    from pynamodb.models import Model

    from ._mixin import UniqueMixin
    from ._ops.collect import AuditReport

#: The unique models written during a test (insertion-ordered), and what stops listening.
_WRITTEN = pytest.StashKey[tuple[dict[type["Model"], None], ExitStack]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    """``--unique-audit`` and the ``unique_audit`` ini option."""
    parser.getgroup("pynamodb-unique").addoption(
        "--unique-audit",
        action="store_true",
        default=False,
        help="After each test, audit the tables of the unique models it wrote; fail it with the problems found.",
    )
    parser.addini(
        "unique_audit",
        type="bool",
        default=False,
        help="Audit after each test the tables of the unique models it wrote (as --unique-audit).",
    )


def pytest_configure(config: pytest.Config) -> None:
    """Register the marker that exempts a test from the audit after it."""
    config.addinivalue_line(
        "markers", "no_unique_audit: do not audit after this test (it leaves the tables damaged on purpose)"
    )


def _enabled(config: pytest.Config) -> bool:
    return bool(config.getoption("unique_audit") or config.getini("unique_audit"))


def _start(item: pytest.Item) -> dict[type[Model], None]:
    """Listen to the library's writes for the rest of ``item``'s run; the models written."""
    found = item.stash.get(_WRITTEN, None)
    if found is not None:
        return found[0]
    written: dict[type[Model], None] = {}
    stack = ExitStack()
    stack.enter_context(listening(lambda models: written.update(dict.fromkeys(models))))
    item.stash[_WRITTEN] = (written, stack)
    return written


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, None, None]:
    """Start listening before the test's fixtures are set up, when an audit is asked for."""
    if _enabled(item.config) or "unique_audit" in getattr(item, "fixturenames", ()):
        _start(item)
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    """Audit after a passed test (fixtures still set up) with ``--unique-audit``, unless marked ``no_unique_audit``."""
    result = yield  # A failed test raises here: its own failure is the one to show.
    found = item.stash.get(_WRITTEN, None)
    if found is not None and _enabled(item.config) and item.get_closest_marker("no_unique_audit") is None:
        check(found[0])
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Generator[None, None, None]:
    """Stop listening once the test is torn down."""
    try:
        return (yield)
    finally:
        found = item.stash.get(_WRITTEN, None)
        if found is not None:
            del item.stash[_WRITTEN]
            found[1].close()


def check(models: Iterable[type[Model]]) -> list[AuditReport]:
    """Audit each unique model of ``models``; fail the running test when any audit finds a problem.

    Args:
        models: models written (those without unique constraints are skipped).

    Returns:
        The reports, one per audited model, all clean.

    Raises:
        pytest.fail.Exception: a problem was found; its message lists each problem's ``describe()``.
    """
    unique = [cast("type[UniqueMixin]", model) for model in dict.fromkeys(models) if constraints_of(model)]
    reports = [audit(model) for model in unique]
    dirty = [report for report in reports if not report.clean]
    if dirty:
        count = sum(len(report.problems) for report in dirty)
        lines = [f"pynamodb-unique audit: {count} problem{'s' if count != 1 else ''} in the tables this test wrote"]
        for report in dirty:
            lines.append(f"{report.model} (table {report.table!r}, locks in {report.lock_table!r}):")
            lines.extend(f"  - {problem.describe()}" for problem in report.problems)
        pytest.fail("\n".join(lines), pytrace=False)
    return reports


class UniqueAudit:
    """The ``unique_audit`` fixture: call it to audit now, failing the test on any problem."""

    def __init__(self, written: dict[type[Model], None]) -> None:
        self._written = written

    @property
    def written(self) -> list[type[Model]]:
        """The unique models the library has written so far during the test."""
        return list(self._written)

    def __call__(self, *models: type[Any]) -> list[AuditReport]:
        """Audit ``models``, or with none every unique model written so far in the test.

        Returns:
            The reports, one per audited model, all clean.

        Raises:
            pytest.fail.Exception: a problem was found; its message lists each one.
        """
        return check(models or self.written)


@pytest.fixture
def unique_audit(request: pytest.FixtureRequest) -> UniqueAudit:
    """Audit on demand: ``unique_audit(Account)``, or ``unique_audit()`` for every unique model written so far."""
    node: Any = request.node
    return UniqueAudit(_start(node))
