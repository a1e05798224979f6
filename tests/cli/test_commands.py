"""The pynamodb-unique command end to end: click's runner, and the installed script.

The runner's commands run on moto; repair runs on dynoxide too, reached through ``--endpoint``.
"""

from __future__ import annotations

import importlib
import io
import json
import os
import shutil
import socket
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from _backends import Backend, unique_table_name
from _damage import ADA_TWIN, EXPECTED, all_items, damage, delete_record, put_record
from click.testing import CliRunner, Result

from pynamodb_unique import explain
from pynamodb_unique.cli import _progress as _cli_progress
from pynamodb_unique.cli import cli

MODEL_SOURCE = '''
"""A user's model module, as the command imports it."""

from pynamodb.attributes import UnicodeAttribute
from pynamodb.models import Model

from pynamodb_unique import UniqueAttribute, UniqueConstraint, UniqueMixin


class Account(UniqueMixin, Model):
    class Meta:
        table_name = {table!r}
        region = "us-east-1"
        unique_constraints = [UniqueConstraint("tenant", "slug", name="TENANT_SLUG")]
        max_retry_attempts = {retries}

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    sk = UnicodeAttribute(range_key=True, attr_name="SK", default="PROFILE")
    email = UniqueAttribute(UnicodeAttribute(), normalize=str.casefold)
    username = UniqueAttribute(UnicodeAttribute(null=True), name="HANDLE")
    tenant = UnicodeAttribute(null=True)
    slug = UnicodeAttribute(null=True)
    bio = UnicodeAttribute(null=True)
'''

SUBCOMMANDS = ["audit", "repair", "backfill", "migrate", "explain", "inspect"]


def _write_module(directory: Path, table: str, *, retries: int = 3) -> str:
    name = f"usermodels_{uuid.uuid4().hex[:8]}"
    (directory / f"{name}.py").write_text(MODEL_SOURCE.format(table=table, retries=retries))
    return name


@pytest.fixture
def user_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, backend: Backend) -> tuple[Any, list[str]]:
    """A model module written to tmp_path (its Meta has no host), its table, and the CLI's model arguments."""
    monkeypatch.syspath_prepend(str(tmp_path))
    name = _write_module(tmp_path, f"cli-{uuid.uuid4().hex[:12]}")
    model = importlib.import_module(name).Account
    model.Meta.host = backend.host  # For the test's own setup; the command gets --endpoint.
    model.create_table(wait=True, billing_mode="PAY_PER_REQUEST")
    endpoint = ["--endpoint", backend.host] if backend.host else []
    return model, [f"{name}:Account", *endpoint]


def _run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_audit_command__damaged_table_exits_1(user_model: tuple[Any, list[str]]) -> None:
    """audit prints a table per constraint and each problem, and exits 1; no progress bar off a terminal."""
    model, target = user_model
    damage(model)
    result = _run("audit", *target)
    assert result.exit_code == 1
    lines = result.output.splitlines()
    assert lines[1].split() == ["constraint", "orphaned", "missing", "foreign", "duplicate"]
    assert lines[2].split() == ["EMAIL", "1", "1", "0", "1"]
    assert lines[3].split() == ["HANDLE", "1", "1", "1", "0"]
    for _, lock_key in EXPECTED:
        assert lock_key in result.output
    assert lines[-1] == "6 problems"
    assert "\r" not in result.output


def test_audit_command__json_lists_the_problems(user_model: tuple[Any, list[str]]) -> None:
    """--json prints one document whose problems are exactly the damage."""
    model, target = user_model
    damage(model)
    result = _run("audit", *target, "--json", "--segments", "3", "--max-rate", "1000")
    assert result.exit_code == 1
    document = json.loads(result.stdout)
    assert {(p["kind"], p["lock_key"]) for p in document["problems"]} == EXPECTED


def test_audit_command__clean_table_exits_0(user_model: tuple[Any, list[str]]) -> None:
    """A table written only by the library audits clean."""
    model, target = user_model
    model(pk="ACCT#1", email="ada@lovelace.io", username="ada").save()
    result = _run("audit", *target)
    assert result.exit_code == 0
    assert result.output.splitlines()[-1] == "clean: every lock matches a live value"


@pytest.mark.backends("moto", "dynoxide")
def test_repair_command__dry_run_then_apply(user_model: tuple[Any, list[str]]) -> None:
    """The dry run writes nothing and exits 1; --apply fixes all but the duplicate; then exit 0."""
    model, target = user_model
    damage(model)
    before = all_items(model)
    dry = _run("repair", *target)
    assert dry.exit_code == 1
    assert all_items(model) == before
    assert dry.output.count("  would ") == 5
    assert dry.output.splitlines()[-1] == "dry run, nothing written: 5 planned, 1 left; run again with --apply to write"
    applied = _run("repair", *target, "--apply")
    assert applied.exit_code == 1
    assert applied.output.splitlines()[-1] == "done: 5 applied, 1 left"
    assert "left: duplicate value UNIQ#EMAIL#ada@lovelace.io" in applied.output
    delete_record(model, ADA_TWIN)
    again = _run("repair", *target, "--apply")
    assert again.exit_code == 0
    assert again.output.splitlines()[-1] == "done: nothing to do"


def test_backfill_command__dry_run_writes_nothing(user_model: tuple[Any, list[str]]) -> None:
    """Without --apply backfill says what it would create, writes nothing and exits 1, as repair does."""
    model, target = user_model
    put_record(model, ("ACCT#1", "PROFILE"), email="ada@lovelace.io", username="ada")
    put_record(model, ADA_TWIN, email="ADA@lovelace.io")
    before = all_items(model)
    dry = _run("backfill", *target)
    assert dry.exit_code == 1
    assert all_items(model) == before
    assert "would create: missing lock UNIQ#HANDLE#ada" in dry.output
    assert dry.output.splitlines()[-1] == "dry run, nothing written: 1 planned, 1 left; run again with --apply to write"


def test_backfill_command__creates_locks_and_lists_duplicates(user_model: tuple[Any, list[str]]) -> None:
    """backfill --apply creates the missing locks, exits 1 while a duplicate remains, 0 once none does."""
    model, target = user_model
    put_record(model, ("ACCT#1", "PROFILE"), email="ada@lovelace.io", username="ada")
    put_record(model, ADA_TWIN, email="ADA@lovelace.io")
    first = _run("backfill", *target, "--apply", "--segments", "2")
    assert first.exit_code == 1
    assert "created: missing lock UNIQ#HANDLE#ada" in first.output
    assert "left: duplicate value UNIQ#EMAIL#ada@lovelace.io" in first.output
    delete_record(model, ADA_TWIN)
    second = _run("backfill", *target, "--apply")
    assert second.exit_code == 0
    assert "created: missing lock UNIQ#EMAIL#ada@lovelace.io" in second.output
    assert _run("audit", *target).exit_code == 0


def test_inspect_command__owner_and_orphan(user_model: tuple[Any, list[str]]) -> None:
    """inspect shows the owner; exit 0 while it holds the value, 1 for an orphaned lock."""
    model, target = user_model
    damage(model)
    held = _run("inspect", *target, "email=ADA@lovelace.io")
    assert held.exit_code == 0
    assert "owner:      ACCT#a1f9c3/PROFILE (holds the value)" in held.output
    orphan = _run("inspect", *target, "username=alan", "--json")
    assert orphan.exit_code == 1
    assert json.loads(orphan.stdout)["owner_holds"] is False
    free = _run("inspect", *target, "tenant=acme", "slug=nobody")
    assert free.exit_code == 0
    assert "free (no lock item)" in free.output


def test_explain_command__prints_the_library_request(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """explain prints explain()'s request as JSON on stdout, the operation on stderr, with no backend at all."""
    monkeypatch.syspath_prepend(str(tmp_path))
    name = _write_module(tmp_path, unique_table_name("accounts"))
    model = importlib.import_module(name).Account
    model.Meta.host = "http://127.0.0.1:9"  # Nothing listens there: explain must not connect.
    item = {"pk": "ACCT#a1f9c3", "email": "Ada@Lovelace.io", "username": "ada"}
    result = _run("explain", f"{name}:Account", "--op", "save", "--item", json.dumps(item))
    assert result.exit_code == 0
    assert result.stderr == (
        "note: assuming no record is stored under this key (a new record); pass --stored JSON to plan an overwrite\n"
        "TransactWriteItems request:\n"
    )
    assert json.loads(result.stdout) == explain(model(**item), "save").request
    stored = {"pk": "ACCT#a1f9c3", "email": "ada@lovelace.io", "username": "ada"}
    update = _run(
        "explain",
        f"{name}:Account",
        "--op",
        "update",
        "--item",
        '{"pk": "ACCT#a1f9c3", "username": null, "bio": "hi"}',
        "--stored",
        json.dumps(stored),
    )
    assert update.exit_code == 0
    items = json.loads(update.stdout)["TransactItems"]
    assert [next(iter(i)) for i in items] == ["Delete", "Update"]
    assert items[0]["Delete"]["Key"]["PK"] == {"S": "UNIQ#HANDLE#ada"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(["audit", "no_such_module:Account"], "Error: cannot import 'no_such_module'", id="no-module"),
        pytest.param(
            ["audit", "json:JSONDecoder"], "Error: 'json:JSONDecoder' is not a UniqueMixin model", id="no-model"
        ),
        pytest.param(["audit", "json"], "Error: expected a model as package.module:ClassName", id="no-class"),
        pytest.param(
            ["audit", "{module}:Acount"],
            "Error: module '{module}' has no name 'Acount'; its UniqueMixin model classes: Account",
            id="misspelled",
        ),
        pytest.param(
            ["audit", "json:Account"],
            "Error: module 'json' has no name 'Account', and no UniqueMixin model class",
            id="no-name",
        ),
        pytest.param(
            ["explain", "{model}", "--op", "save", "--item", "[1]"], "Error: --item must be a JSON object", id="item"
        ),
        pytest.param(
            ["inspect", "{model}", "nickname=x"],
            "Error: Account has no unique attribute or constraint named nickname",
            id="attr",
        ),
        pytest.param(["inspect", "{model}", "email"], "Error: expected NAME=VALUE, got 'email'", id="pair"),
    ],
)
def test_errors__one_line_and_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], message: str
) -> None:
    """Usage and configuration errors print one line, no traceback, and exit 2."""
    monkeypatch.syspath_prepend(str(tmp_path))
    module = _write_module(tmp_path, unique_table_name("accounts"))
    result = CliRunner().invoke(cli, [a.format(model=f"{module}:Account", module=module) for a in args])
    assert result.exit_code == 2
    assert result.output.startswith(message.format(module=module))
    assert len(result.output.strip().splitlines()) == 1
    assert "Traceback" not in result.output


def test_errors__missing_lock_table__named_with_create_lock_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, moto_backend: None
) -> None:
    """A separate lock table that does not exist is named alone (its records table exists), with create_lock_table()."""
    monkeypatch.syspath_prepend(str(tmp_path))
    table = unique_table_name("accounts")
    name = _write_module(tmp_path, table, retries=0)
    source = (tmp_path / f"{name}.py").read_text()
    locks = f"{table}-locks-missing"
    (tmp_path / f"{name}.py").write_text(
        source.replace(
            "        unique_constraints", f"        unique_lock_table = {locks!r}\n        unique_constraints", 1
        )
    )
    importlib.import_module(name).Account.create_table(wait=True, billing_mode="PAY_PER_REQUEST")
    for command in ("audit", "repair", "backfill"):
        result = CliRunner().invoke(cli, [command, f"{name}:Account"])
        assert (result.exit_code, result.output) == (
            2,
            f"Error: table not found in AWS region us-east-1: {locks} (the lock table, Meta.unique_lock_table: "
            "create it with pynamodb_unique.create_lock_table(Account))\n",
        )


def test_errors__missing_table_and_unreachable_endpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, moto_backend: None
) -> None:
    """A missing table and an endpoint nobody listens on are one line each and exit 2."""
    monkeypatch.syspath_prepend(str(tmp_path))
    # No retries: botocore would back off for seconds before giving up on a refused connection.
    model = f"{_write_module(tmp_path, 'no-such-table', retries=0)}:Account"
    missing = CliRunner().invoke(cli, ["audit", model])
    assert (missing.exit_code, missing.output) == (2, "Error: table not found in AWS region us-east-1: no-such-table\n")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    endpoint = f"http://127.0.0.1:{port}"
    unreachable = CliRunner().invoke(cli, ["inspect", model, "email=a@b.c", "--endpoint", endpoint])
    assert unreachable.exit_code == 2
    assert unreachable.output == (
        f"Error: cannot connect to DynamoDB at {endpoint} (region us-east-1): is a server listening there? "
        "(--endpoint-url sets it)\n"
    )
    assert len(unreachable.output.splitlines()) == 1


@pytest.mark.parametrize("command", SUBCOMMANDS)
def test_help__every_subcommand_shows_an_example(command: str) -> None:
    """Each subcommand's --help ends with an example of its use."""
    result = _run(command, "--help")
    assert result.exit_code == 0
    assert f"    pynamodb-unique {command} myapp.models:Account" in result.output


def test_progress__drawn_on_a_terminal_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """The progress bar shows items scanned on a terminal and nothing elsewhere."""

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    for stream, drawn in ((Terminal(), True), (io.StringIO(), False)):
        monkeypatch.setattr(sys, "stderr", stream)
        update, close = _cli_progress._progress("scan")
        update(1200)
        close()
        assert ("scan: 1200 items" in stream.getvalue()) is drawn


def _installed_command() -> str:
    beside = Path(sys.executable).parent / "pynamodb-unique"
    found = str(beside) if beside.exists() else shutil.which("pynamodb-unique")
    if found is None:
        pytest.fail("the pynamodb-unique command is not installed: pip install -e '.[cli]'", pytrace=False)
    return found


@pytest.mark.integration
def test_installed_command__audit_and_repair_in_a_subprocess(tmp_path: Path, dynoxide_endpoint: str) -> None:
    """The installed script, run as a user would, audits and repairs a damaged table on dynoxide."""
    sys.path.insert(0, str(tmp_path))
    try:
        name = _write_module(tmp_path, f"cli-{uuid.uuid4().hex[:12]}")
        model = importlib.import_module(name).Account
    finally:
        sys.path.remove(str(tmp_path))
    model.Meta.host = dynoxide_endpoint
    model.create_table(wait=True, billing_mode="PAY_PER_REQUEST")
    damage(model)
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    command = [_installed_command()]
    target = [f"{name}:Account", "--endpoint", dynoxide_endpoint]

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*command, *args], env=env, capture_output=True, text=True, timeout=60, check=False)  # noqa: S603

    audited = run("audit", *target, "--json", "--segments", "2")
    assert audited.returncode == 1, audited.stderr
    assert {(p["kind"], p["lock_key"]) for p in json.loads(audited.stdout)["problems"]} == EXPECTED
    repaired = run("repair", *target, "--apply")
    assert repaired.returncode == 1, repaired.stderr
    assert repaired.stdout.splitlines()[-1] == "done: 5 applied, 1 left"
    after = run("audit", *target, "--json")
    assert [p["kind"] for p in json.loads(after.stdout)["problems"]] == ["duplicate"]
    broken = run("audit", "no_such_module:Account")
    assert (broken.returncode, broken.stdout) == (2, "")
    assert broken.stderr.startswith("Error: cannot import 'no_such_module'")
    assert "Traceback" not in broken.stderr
    # From the project folder, without PYTHONPATH: the folder is importable (as alembic, flask).
    bare = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    here = subprocess.run(  # noqa: S603
        [*command, "audit", *target, "--json"],
        env=bare,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert here.returncode == 1, here.stderr
    assert [p["kind"] for p in json.loads(here.stdout)["problems"]] == ["duplicate"]


def test_library__imports_without_the_cli_extra() -> None:
    """With click and tqdm missing, the library and its audit functions import; only the command needs them."""
    code = (
        "import sys\n"
        "sys.modules['click'] = sys.modules['tqdm'] = None\n"
        "import pynamodb_unique\n"
        "print(pynamodb_unique.audit.__name__, pynamodb_unique.repair.__name__)\n"
        "import pynamodb_unique.cli\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)  # noqa: S603
    assert result.stdout == "audit repair\n"
    assert result.returncode == 2
    assert result.stderr.startswith("pynamodb-unique needs the cli extra: pip install 'pynamodb-unique[cli]'")


def test_python_m__runs_the_command() -> None:
    """``python -m pynamodb_unique.cli`` runs the command, as ``python -m`` ran the module before it was a package."""
    repo = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-m", "pynamodb_unique.cli", "--help"], capture_output=True, text=True, check=False, cwd=repo
    )
    assert done.returncode == 0, done.stderr
    assert "iam" in done.stdout
