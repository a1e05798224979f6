"""The pytest plugin for apps: --unique-audit, the unique_audit ini option and fixture, run by pytester.

The inner runs name the plugin with ``-p``: the entry point needs the package installed with this
tree's metadata, and the shared install may be another checkout's.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from _backends import Backend, bind_model
from models import Account

from pynamodb_unique import TransactWrite, bulk_save
from pynamodb_unique._write.telemetry import listening

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[2]
# The inner runs load the plugin by name; a pytest-benchmark on the machine would warn there when
# the suite runs under xdist, and its warning breaks pytester's reading of the summary.
PLUGIN = ("-p", "pynamodb_unique.pytest_plugin", "-p", "no:benchmark")

# An app's models and fixtures: moto set up by a fixture, so the audit runs while it is active.
CONFTEST = """
import boto3
import moto
import pytest
from pynamodb.attributes import UnicodeAttribute
from pynamodb.models import Model

from pynamodb_unique import UniqueAttribute, UniqueMixin


class Member(UniqueMixin, Model):
    class Meta:
        table_name = "plugin-members"
        region = "us-east-1"

    pk = UnicodeAttribute(hash_key=True)
    email = UniqueAttribute(UnicodeAttribute(), normalize=str.casefold)


class Plain(Model):
    class Meta:
        table_name = "plugin-plain"
        region = "us-east-1"

    pk = UnicodeAttribute(hash_key=True)


@pytest.fixture
def dynamodb():
    with moto.mock_aws():
        Member.create_table(billing_mode="PAY_PER_REQUEST", wait=True)
        yield boto3.client("dynamodb", region_name="us-east-1")
"""

# A record written around the library: no lock item for its email.
BYPASS = """
from conftest import Member


def test_bypass(dynamodb):
    Member(pk="ada", email="ada@x.io").save()
    dynamodb.put_item(TableName="plugin-members", Item={"pk": {"S": "bob"}, "email": {"S": "bob@x.io"}})


def test_clean(dynamodb):
    Member(pk="ada", email="ada@x.io").save()
    Member(pk="ada", email="ada@y.io").save()
"""


@pytest.fixture
def app(pytester: pytest.Pytester) -> pytest.Pytester:
    """An app's test folder: its conftest and the tests above."""
    pytester.syspathinsert()
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_app=BYPASS)
    return pytester


def test_unique_audit__record_written_around_the_library__test_fails_with_missing_lock(app: pytest.Pytester) -> None:
    """With --unique-audit, a test that left a record without its lock fails, naming it; a clean test passes."""
    result = app.runpytest(*PLUGIN, "--unique-audit")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*test_bypass*",
            "*pynamodb-unique audit: 1 problem in the tables this test wrote",
            "*Member (table 'plugin-members', locks in 'plugin-members'):",
            "*  - missing lock UNIQ#EMAIL#bob@x.io: held by bob",
        ]
    )
    assert "test_clean" not in "\n".join(line for line in result.outlines if line.startswith("FAILED"))


def test_unique_audit__ini_option__audits(app: pytest.Pytester) -> None:
    """``unique_audit = true`` in the ini file does what --unique-audit does."""
    app.makeini("[pytest]\nunique_audit = true\n")
    result = app.runpytest(*PLUGIN)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*missing lock UNIQ#EMAIL#bob@x.io*"])


def test_unique_audit__not_enabled__nothing_audited(app: pytest.Pytester) -> None:
    """Without the option the plugin audits nothing: the bypassing test passes."""
    result = app.runpytest(*PLUGIN)
    result.assert_outcomes(passed=2)


def test_unique_audit__marked_no_unique_audit__not_audited(app: pytest.Pytester) -> None:
    """A test marked ``no_unique_audit`` (damage on purpose) is not audited, under --strict-markers too."""
    app.makepyfile(
        test_marked="""
        import pytest
        from conftest import Member

        @pytest.mark.no_unique_audit
        def test_damages_on_purpose(dynamodb):
            Member(pk="ada", email="ada@x.io").save()
            dynamodb.put_item(TableName="plugin-members", Item={"pk": {"S": "bob"}, "email": {"S": "bob@x.io"}})
        """
    )
    result = app.runpytest(*PLUGIN, "--unique-audit", "--strict-markers", "test_marked.py")
    result.assert_outcomes(passed=1)


def test_unique_audit__failing_test__its_own_failure_shown(app: pytest.Pytester) -> None:
    """A test that fails on its own is reported with its own error, not an audit."""
    app.makepyfile(
        test_own="""
        from conftest import Member

        def test_own(dynamodb):
            dynamodb.put_item(TableName="plugin-members", Item={"pk": {"S": "bob"}, "email": {"S": "bob@x.io"}})
            Member(pk="ada", email="ada@x.io").save()
            assert 1 == 2, "the test's own failure"
        """
    )
    result = app.runpytest(*PLUGIN, "--unique-audit", "test_own.py")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*the test's own failure*"])
    result.stdout.no_fnmatch_line("*pynamodb-unique audit*")


def test_unique_audit__only_models_written_by_the_library(app: pytest.Pytester) -> None:
    """A test whose only write bypassed the library audits nothing (no unique model was written)."""
    app.makepyfile(
        test_raw="""
        def test_raw_only(dynamodb):
            dynamodb.put_item(TableName="plugin-members", Item={"pk": {"S": "bob"}, "email": {"S": "bob@x.io"}})
        """
    )
    result = app.runpytest(*PLUGIN, "--unique-audit", "test_raw.py")
    result.assert_outcomes(passed=1)


def test_unique_audit_fixture__on_demand(app: pytest.Pytester) -> None:
    """The fixture audits a model, or every unique model written so far; it fails the test on a problem."""
    app.makepyfile(
        test_fixture="""
        from conftest import Member, Plain

        def test_named_model(dynamodb, unique_audit):
            dynamodb.put_item(TableName="plugin-members", Item={"pk": {"S": "bob"}, "email": {"S": "bob@x.io"}})
            unique_audit(Member)

        def test_written_so_far(dynamodb, unique_audit):
            Member(pk="ada", email="ada@x.io").save()
            [report] = unique_audit()
            assert (report.model, report.records, report.locks) == ("Member", 1, 1)
            assert unique_audit.written == [Member]
            dynamodb.put_item(TableName="plugin-members", Item={"pk": {"S": "bob"}, "email": {"S": "bob@x.io"}})
            unique_audit()

        def test_nothing_written(dynamodb, unique_audit):
            Plain(pk="x")  # Not a unique model: never audited.
            assert unique_audit() == []
        """
    )
    result = app.runpytest(*PLUGIN, "test_fixture.py")
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(
        [
            "*test_named_model*",
            "*missing lock UNIQ#EMAIL#bob@x.io: held by bob",
            "*test_written_so_far*",
            "*missing lock UNIQ#EMAIL#bob@x.io: held by bob",
        ]
    )


def test_listening__every_kind_of_library_write_reports_its_models(moto_backend: None) -> None:
    """save, update, delete, TransactWrite and bulk_save tell listeners which models they write."""
    model = bind_model(Account, Backend("moto", None))
    seen: list[tuple[Any, ...]] = []
    with listening(lambda models: seen.append(tuple(models))):
        record = model(pk="a", email="a@x.io")
        record.save()
        record.update(actions=[model.bio.set("hi")])
        with TransactWrite(connection=model._get_connection().connection) as tx:
            tx.save(model(pk="b", email="b@x.io"))
        bulk_save([model(pk="c", email="c@x.io")])
        record.delete()
    model(pk="d", email="d@x.io").save()  # After the block: not reported.
    assert seen == [(model,)] * 5


def test_entry_point__pytest11_names_the_plugin_module() -> None:
    """pyproject's pytest11 entry point loads pynamodb_unique.pytest_plugin, under the module's own name."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["entry-points"]["pytest11"] == {"pynamodb_unique.pytest_plugin": "pynamodb_unique.pytest_plugin"}


def test_import__library_does_not_import_pytest() -> None:
    """Importing the library imports neither pytest nor the plugin."""
    code = (
        "import sys, pynamodb_unique; "
        "print(sorted(m for m in ('pytest', 'pynamodb_unique.pytest_plugin') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, capture_output=True, text=True)  # noqa: S603
    assert done.stdout.strip() == "[]"
