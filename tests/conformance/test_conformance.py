"""PynamoDB's own test suite (``tests/peer``) passes, and sends the same requests, with ``UniqueMixin`` models.

A model that subclasses ``UniqueMixin`` but declares no unique constraint must behave exactly like
PynamoDB. See ``tests/conformance`` for the harness; run it by hand with
``python -m tests.conformance [--integration]`` to see every difference.
"""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import pytest

from conformance.harness import EXPECTED_REWRITES, Comparison, compare, compare_integration, dynoxide_binary, extract

#: PynamoDB 6.1.0's unit tests (everything but ``tests/integration``).
EXPECTED_UNIT_TESTS = 386


def _without_extraction_filters(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``tarfile`` look like Python 3.11.2's (Debian 12), which has no extraction filters."""
    if hasattr(tarfile, "data_filter"):
        monkeypatch.delattr(tarfile, "data_filter")


def _archive(path: Path, member: tarfile.TarInfo, data: bytes = b"") -> Path:
    with tarfile.open(path, "w:gz") as tar:
        tar.addfile(member, io.BytesIO(data) if member.isfile() else None)
    return path


@pytest.mark.parametrize("filters", ["present", "absent"])
def test_extract__peer_archive__gives_the_peer_suite(
    filters: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The peer archive extracts with and without ``tarfile``'s filters (Python 3.11.4+ and 3.11.2)."""
    if filters == "absent":
        _without_extraction_filters(monkeypatch)
    root = extract(tmp_path / "peer")
    assert (root / "pytest.ini").is_file()
    assert (root / "tests" / "test_model.py").is_file()


@pytest.mark.parametrize("filters", ["present", "absent"])
@pytest.mark.parametrize(
    "member",
    [
        tarfile.TarInfo("../outside.py"),
        tarfile.TarInfo("link"),
    ],
    ids=["parent", "symlink"],
)
def test_extract__hostile_member__refused(
    filters: str, member: tarfile.TarInfo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A member outside the destination, or a link, is refused whichever Python extracts it."""
    if member.name == "link":
        member.type = tarfile.SYMTYPE
        member.linkname = "/etc/passwd"
    archive = _archive(tmp_path / "hostile.tar.gz", member)
    if filters == "absent":
        _without_extraction_filters(monkeypatch)
    with pytest.raises(tarfile.TarError):
        extract(tmp_path / "out", archive)
    assert not (tmp_path / "outside.py").exists()


@pytest.fixture(scope="module")
def unit() -> Comparison:
    """The peer unit tests, run plain and with ``UniqueMixin`` models (two subprocesses at once)."""
    return compare("unit")


@pytest.fixture(scope="module")
def integration() -> Comparison:
    """The peer integration tests, run plain and with ``UniqueMixin`` models, each on a fresh dynoxide."""
    binary = dynoxide_binary()
    if not (binary.is_file() and os.access(binary, os.X_OK)):
        pytest.fail(f"dynoxide binary not found at {binary}: install it as tests/conftest.py says", pytrace=False)
    return compare_integration()


def test_peer_suite__every_model_import_is_rewritten(unit: Comparison) -> None:
    """Mixin mode rewrites ``from pynamodb.models import Model`` in all the peer files that have it."""
    assert len(unit.rewritten) == EXPECTED_REWRITES, [p.name for p in unit.rewritten]


def test_peer_unit_tests__pass_without_mixin(unit: Comparison) -> None:
    """Every peer unit test passes with PynamoDB's own ``Model`` (the harness itself works)."""
    all_ran = len(unit.plain.outcomes) == EXPECTED_UNIT_TESTS and not unit.plain.collect_errors
    assert all_ran, unit.report()
    assert not unit.plain.not_passed, unit.report()


def test_peer_unit_tests__pass_with_mixin(unit: Comparison) -> None:
    """Every peer unit test passes when its models are ``UniqueMixin`` models."""
    assert not unit.mixin.collect_errors, unit.report()
    assert not unit.mixin.not_passed, unit.report()


def test_peer_unit_tests__same_tests_run_with_mixin(unit: Comparison) -> None:
    """Mixin mode runs the same tests as plain mode, none more and none fewer."""
    same_count = len(unit.mixin.outcomes) == len(unit.plain.outcomes)
    assert same_count, unit.report()
    same_tests = unit.mixin.outcomes.keys() == unit.plain.outcomes.keys()
    assert same_tests, unit.report()


def test_peer_unit_tests__same_requests_with_mixin(unit: Comparison) -> None:
    """Every peer unit test sends the same requests, in the same order, in both modes."""
    assert not unit.request_differences, unit.report()


@pytest.mark.integration
def test_peer_integration_tests__same_pass_with_mixin(integration: Comparison) -> None:
    """The peer integration tests that pass on dynoxide with PynamoDB's ``Model`` pass with the mixin too."""
    reached_dynoxide = bool(integration.plain.passed)
    assert reached_dynoxide, integration.report()
    same_tests = integration.mixin.outcomes.keys() == integration.plain.outcomes.keys()
    assert same_tests, integration.report()
    same_passing = integration.mixin.passed == integration.plain.passed
    assert same_passing, integration.report()
