"""The pynamodb-unique command on real tables: summaries, --quiet, --json, progress, AWS CLI options, messages."""

from __future__ import annotations

import importlib
import io
import json
import os
import socket
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from _backends import Backend, unique_table_name
from _damage import ADA_TWIN, EXPECTED, all_items, bind_accounts, damage, put_record
from click.testing import CliRunner, Result
from pynamodb.exceptions import ScanError
from test_commands import _run, _write_module, user_model  # noqa: F401 - user_model is a fixture used here.

from pynamodb_unique import cli as cli_module
from pynamodb_unique import explain
from pynamodb_unique._model.seam import connection
from pynamodb_unique.cli import _progress as _cli_progress
from pynamodb_unique.cli import cli

#: Records written without locks on top of :func:`damage`: 30 more missing locks per constraint.
LEGACY = 30
#: Problems of a legacy table: the damage's 6, plus a missing EMAIL and HANDLE lock per legacy record.
PROBLEMS = len(EXPECTED) + 2 * LEGACY
MORE = "(--limit N shows N, --all every one, --json all as JSON)"


@pytest.fixture
def legacy(user_model: tuple[Any, list[str]]) -> tuple[Any, list[str]]:  # noqa: F811 - the fixture imported above.
    """The damaged table with 30 records written behind the library's back: 66 problems."""
    model, target = user_model
    damage(model)
    for n in range(LEGACY):
        put_record(model, (f"ACCT#legacy{n:03d}", "PROFILE"), email=f"user{n}@example.com", username=f"user{n}")
    return model, target


def _problem_lines(result: Result) -> list[str]:
    kinds = ("orphaned lock ", "missing lock ", "foreign lock ", "duplicate value ")
    return [line for line in result.stdout.splitlines() if line.startswith(tuple(f"  {k}" for k in kinds))]


def _model_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, table: str | None = None, **kwargs: Any) -> str:
    """A model module in tmp_path, importable; returns ``module:Account``."""
    monkeypatch.syspath_prepend(str(tmp_path))
    return f"{_write_module(tmp_path, table or unique_table_name('accounts'), **kwargs)}:Account"


def _closed_port_url() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}"


# Summaries, --limit, --all, --quiet.


def test_audit_command__summary_past_a_screen(legacy: tuple[Any, list[str]]) -> None:
    """Past 20 problems audit prints the counts, the first 20 lines and how many more there are."""
    _, target = legacy
    result = _run("audit", *target)
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert lines[2].split() == ["EMAIL", "1", str(1 + LEGACY), "0", "1"]
    assert lines[3].split() == ["HANDLE", "1", str(1 + LEGACY), "1", "0"]
    assert lines[4].split() == ["TENANT_SLUG", "0", "0", "0", "0"]
    assert lines[5].split() == ["total", "2", str(2 + 2 * LEGACY), "1", "1"]
    shown = _problem_lines(result)
    assert len(shown) == 20
    # What needs a person first (the duplicate, then the foreign lock), not 20 of the 62 missing locks.
    assert [line.split()[0] for line in shown[:5]] == ["duplicate", "foreign", "orphaned", "orphaned", "missing"]
    assert shown[0].startswith("  duplicate value UNIQ#EMAIL#ada@lovelace.io")
    assert lines[-2] == f"  ... and {PROBLEMS - 20} more problems {MORE}"
    assert lines[-1] == f"{PROBLEMS} problems"
    assert len(lines) == 6 + 20 + 2


def test_audit_command__limit_all_and_quiet(legacy: tuple[Any, list[str]]) -> None:
    """--limit N prints N problem lines, --all every one, --quiet only the final line."""
    _, target = legacy
    limited = _run("audit", *target, "--limit", "3")
    assert len(_problem_lines(limited)) == 3
    assert limited.stdout.splitlines()[-2] == f"  ... and {PROBLEMS - 3} more problems {MORE}"
    everything = _run("audit", *target, "--all")
    assert len(_problem_lines(everything)) == PROBLEMS
    assert " more problems " not in everything.stdout
    assert everything.stdout.splitlines()[-1] == f"{PROBLEMS} problems"
    quiet = _run("audit", *target, "--quiet")
    assert (quiet.exit_code, quiet.stdout) == (1, f"{PROBLEMS} problems\n")
    counts_only = _run("audit", *target, "--limit", "0")
    assert _problem_lines(counts_only) == []
    assert f"  ... and {PROBLEMS} more problems" in counts_only.stdout


def test_audit_command__few_problems_all_listed(user_model: tuple[Any, list[str]]) -> None:  # noqa: F811
    """Up to 20 problems, every line is printed and no summary line."""
    model, target = user_model
    damage(model)
    result = _run("audit", *target)
    assert len(_problem_lines(result)) == len(EXPECTED)
    assert " more problem" not in result.stdout


def test_repair_command__summary_lists_what_is_left_first(legacy: tuple[Any, list[str]]) -> None:
    """repair prints the counts, then the fixes, those left for a person first, 20 at most by default."""
    model, target = legacy
    before = all_items(model)
    dry = _run("repair", *target)
    assert dry.exit_code == 1
    assert all_items(model) == before
    lines = dry.stdout.splitlines()
    assert lines[5].split() == ["total", "2", str(2 + 2 * LEGACY), "1", "1"]
    fixes = [line for line in lines if line.startswith(("  would ", "  left: "))]
    assert len(fixes) == 20
    assert fixes[0].startswith("  left: duplicate value UNIQ#EMAIL#ada@lovelace.io")
    assert lines[-2] == f"  ... and {PROBLEMS - 20} more fixes {MORE}"
    assert lines[-1] == f"dry run, nothing written: {PROBLEMS - 1} planned, 1 left; run again with --apply to write"
    quiet = _run("repair", *target, "--apply", "--quiet")
    assert (quiet.exit_code, quiet.stdout) == (1, f"done: {PROBLEMS - 1} applied, 1 left\n")
    assert [p["kind"] for p in json.loads(_run("audit", *target, "--json").stdout)["problems"]] == ["duplicate"]


def test_backfill_command__quiet_and_all(legacy: tuple[Any, list[str]]) -> None:
    """backfill --quiet prints one line; a second run with --all lists every fix left."""
    _, target = legacy
    quiet = _run("backfill", *target, "--apply", "-q")
    missing = 2 + 2 * LEGACY
    assert (quiet.exit_code, quiet.stdout) == (1, f"done: {missing} applied, {PROBLEMS - missing} left\n")
    again = _run("backfill", *target, "--apply", "--all")
    left = [line for line in again.stdout.splitlines() if line.startswith("  left: ")]
    assert len(left) == PROBLEMS - missing
    assert again.stdout.splitlines()[-1] == f"done: {PROBLEMS - missing} left"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(["--json", "--quiet"], "Error: --json and --quiet cannot be combined", id="json-quiet"),
        pytest.param(["--all", "--limit", "5"], "Error: --all and --limit cannot be combined", id="all-limit"),
        pytest.param(["--limit", "-1"], "Error: Invalid value for '--limit'", id="negative"),
    ],
)
@pytest.mark.parametrize("command", ["audit", "repair", "backfill"])
def test_output_options__conflicts_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str, args: list[str], message: str
) -> None:
    """Contradictory output options are refused before anything is read."""
    model = _model_module(tmp_path, monkeypatch)
    result = CliRunner().invoke(cli, [command, model, "--endpoint-url", _closed_port_url(), *args])
    assert result.exit_code == 2
    assert message in result.output


# --json documents.


def test_audit_command__json_document(legacy: tuple[Any, list[str]]) -> None:
    """audit --json: the report's numbers, constraints, counts per constraint and kind, clean, every problem."""
    _, target = legacy
    result = _run("audit", *target, "--json", "--limit", "1")
    assert result.exit_code == 1
    document = json.loads(result.stdout)
    assert set(document) == {
        "model",
        "table",
        "lock_table",
        "scanned",
        "records",
        "locks",
        "held",
        "reserved",
        "expired",
        "constraints",
        "counts",
        "clean",
        "problems",
    }
    assert document["constraints"] == ["EMAIL", "HANDLE", "TENANT_SLUG"]
    assert (document["held"], document["reserved"], document["expired"]) == (0, 0, 0)
    assert document["counts"]["EMAIL"] == {
        "orphaned": 1,
        "missing": 1 + LEGACY,
        "foreign": 0,
        "duplicate": 1,
        "retired": 0,
        "stale": 0,
    }
    assert document["counts"]["TENANT_SLUG"] == {
        "orphaned": 0,
        "missing": 0,
        "foreign": 0,
        "duplicate": 0,
        "retired": 0,
        "stale": 0,
    }
    assert document["clean"] is False
    assert len(document["problems"]) == PROBLEMS
    assert {(p["kind"], p["lock_key"]) for p in document["problems"]} >= EXPECTED


def test_repair_command__json_document(legacy: tuple[Any, list[str]]) -> None:
    """repair --json: the audit document, whether writes were applied, counts of outcomes, clean, each fix."""
    _, target = legacy
    dry = json.loads(_run("repair", *target, "--json").stdout)
    assert set(dry) == {"audit", "applied", "counts", "clean", "fixes", "reservations_removed"}
    assert dry["reservations_removed"] == 0
    assert dry["applied"] is False
    assert dry["counts"] == {"applied": 0, "planned": PROBLEMS - 1, "skipped": 0, "left": 1}
    assert dry["audit"]["counts"]["HANDLE"]["foreign"] == 1
    assert len(dry["fixes"]) == PROBLEMS
    by_key = {f["problem"]["lock_key"]: f for f in dry["fixes"]}
    assert by_key["UNIQ#HANDLE#grace"] == {
        "problem": {
            "kind": "foreign",
            "constraint": "HANDLE",
            "values": ["grace"],
            "lock_key": "UNIQ#HANDLE#grace",
            "owner": ["ACCT#dead00", "PROFILE"],
            "holders": [["ACCT#0b7e21", "PROFILE"]],
            "former": False,
        },
        "action": "move",
        "outcome": "planned",
        "reason": "",
    }
    assert by_key["UNIQ#EMAIL#ada@lovelace.io"]["outcome"] == "left"
    applied = _run("repair", *target, "--apply", "--json")
    assert applied.exit_code == 1
    document = json.loads(applied.stdout)
    assert (document["applied"], document["clean"]) == (True, False)
    assert document["counts"] == {"applied": PROBLEMS - 1, "planned": 0, "skipped": 0, "left": 1}
    assert {f["action"] for f in document["fixes"]} == {"delete", "create", "move", "none"}


def test_backfill_command__json_document(user_model: tuple[Any, list[str]]) -> None:  # noqa: F811
    """backfill --json has repair's shape: created locks applied, a duplicate left; then clean."""
    model, target = user_model
    put_record(model, ("ACCT#1", "PROFILE"), email="ada@lovelace.io", username="ada")
    put_record(model, ADA_TWIN, email="ADA@lovelace.io")
    first = _run("backfill", *target, "--apply", "--json")
    assert first.exit_code == 1
    document = json.loads(first.stdout)
    assert document["counts"] == {"applied": 1, "planned": 0, "skipped": 0, "left": 1}
    assert [(f["action"], f["outcome"], f["problem"]["lock_key"]) for f in document["fixes"]] == [
        ("none", "left", "UNIQ#EMAIL#ada@lovelace.io"),
        ("create", "applied", "UNIQ#HANDLE#ada"),
    ]
    second = _run("backfill", *target, "--apply", "--json")
    assert second.exit_code == 1
    assert json.loads(second.stdout)["counts"]["applied"] == 0


def test_explain_command__json_document(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """explain --json: the operation, the request as explain() builds it, and what was assumed stored."""
    path = _model_module(tmp_path, monkeypatch)
    model = importlib.import_module(path.partition(":")[0]).Account
    item = {"pk": "ACCT#a1f9c3", "email": "Ada@Lovelace.io", "username": "ada"}
    result = _run("explain", path, "--op", "save", "--item", json.dumps(item), "--json")
    assert result.exit_code == 0
    document = json.loads(result.stdout)
    assert document == {
        "operation": "TransactWriteItems",
        "request": explain(model(**item), "save").request,
        "assumed": (
            "assuming no record is stored under this key (a new record); pass --stored JSON to plan an overwrite"
        ),
    }
    stored = _run("explain", path, "--op", "delete", "--item", json.dumps(item), "--stored", json.dumps(item), "--json")
    assert json.loads(stored.stdout)["assumed"] is None
    assert stored.stderr == ""


# Progress.


def test_scan_estimate__item_counts_of_both_tables(backend: Backend) -> None:
    """The progress total is DescribeTable's ItemCount of the records table plus a separate lock table."""
    shared = bind_accounts(backend)
    damage(shared)
    assert cli_module.scan_estimate(shared) == len(all_items(shared))
    separate = bind_accounts(backend, separate=True)
    damage(separate)
    tables = {i["_table"] for i in all_items(separate)}
    assert len(tables) == 2
    assert cli_module.scan_estimate(separate) == len(all_items(separate))


def test_scan_estimate__unknown_without_a_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, backend: Backend
) -> None:
    """A missing table gives no estimate (the audit then says the table is missing)."""
    model = importlib.import_module(_model_module(tmp_path, monkeypatch, retries=0).partition(":")[0]).Account
    model.Meta.host = backend.host
    assert cli_module.scan_estimate(model) is None


def test_progress__total_and_eta_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """With a total the bar shows a percentage, count of total and time left; nothing when not shown."""

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    update, close = _cli_progress._progress("scan", total=3000)
    update(1200)
    close()
    drawn = terminal.getvalue()
    assert "scan:  40%" in drawn
    assert "1200/3000 [" in drawn
    assert "<" in drawn.rpartition("1200/3000 [")[2]  # elapsed<remaining: the ETA.
    hidden = Terminal()
    monkeypatch.setattr(sys, "stderr", hidden)
    update, close = _cli_progress._progress("scan", total=3000, show=False)
    update(1200)
    close()
    assert hidden.getvalue() == ""


def test_audit_command__progress_total_from_item_count(
    legacy: tuple[Any, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a terminal the audit's scan bar gets the table's ItemCount as total; --quiet draws none."""
    model, target = legacy
    bars: list[tuple[str, int | None, bool]] = []
    real = _cli_progress._progress

    def recording(label: str, total: int | None = None, *, show: bool = True) -> Any:
        bars.append((label, total, show))
        return real(label, total, show=False)

    monkeypatch.setattr(_cli_progress, "_progress", recording)
    monkeypatch.setattr(cli_module.Output, "progress", property(lambda self: not self.quiet))
    _run("audit", *target)
    assert bars == [("scan", len(all_items(model)), True)]
    bars.clear()
    _run("backfill", *target, "--apply")
    assert bars == [("scan", len(all_items(model)) - 2 - 2 * LEGACY, True), ("backfill", 2 + 2 * LEGACY, True)]
    bars.clear()
    _run("audit", *target, "--quiet")
    assert bars == [("scan", None, False)]


# --endpoint-url, --region, --profile.


@pytest.mark.integration
@pytest.mark.parametrize("flag", ["--endpoint-url", "--endpoint"])
def test_endpoint_url__both_spellings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dynoxide_endpoint: str, flag: str
) -> None:
    """--endpoint-url (and its alias --endpoint) points the model, whose Meta has no host, at a server."""
    path = _model_module(tmp_path, monkeypatch, f"cli-{uuid.uuid4().hex[:12]}")
    model = importlib.import_module(path.partition(":")[0]).Account
    model.Meta.host = dynoxide_endpoint
    model.create_table(wait=True, billing_mode="PAY_PER_REQUEST")
    damage(model)
    model.Meta.host = None
    result = _run("audit", path, flag, dynoxide_endpoint, "--json")
    assert result.exit_code == 1
    assert {(p["kind"], p["lock_key"]) for p in json.loads(result.stdout)["problems"]} == EXPECTED
    assert model.Meta.host == dynoxide_endpoint


def test_region__overrides_meta_region(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, moto_backend: None) -> None:
    """--region sends the requests to another region: moto keeps tables per region."""
    path = _model_module(tmp_path, monkeypatch, retries=0)
    model = importlib.import_module(path.partition(":")[0]).Account
    model.create_table(wait=True, billing_mode="PAY_PER_REQUEST")
    model(pk="ACCT#1", email="ada@lovelace.io").save()
    elsewhere = CliRunner().invoke(cli, ["audit", path, "--region", "eu-west-1"])
    assert (elsewhere.exit_code, elsewhere.output) == (
        2,
        f"Error: table not found in AWS region eu-west-1: {model.Meta.table_name}\n",
    )
    assert connection(model).connection.client.meta.region_name == "eu-west-1"
    home = CliRunner().invoke(cli, ["audit", path, "--region", "us-east-1", "-q"])
    assert (home.exit_code, home.output) == (0, "clean: every lock matches a live value\n")


def test_profile__credentials_of_a_named_profile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, moto_backend: None
) -> None:
    """--profile NAME uses that profile's credentials, over those in the environment, as the AWS CLI does."""
    credentials = tmp_path / "credentials"
    credentials.write_text("[ops]\naws_access_key_id = AKIDOPS\naws_secret_access_key = opssecret\n")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(credentials))
    path = _model_module(tmp_path, monkeypatch)
    model = importlib.import_module(path.partition(":")[0]).Account
    model.create_table(wait=True, billing_mode="PAY_PER_REQUEST")
    result = CliRunner().invoke(cli, ["audit", path, "--profile", "ops", "-q"])
    assert (result.exit_code, result.output) == (0, "clean: every lock matches a live value\n")
    assert connection(model).connection.session.get_credentials().access_key == "AKIDOPS"
    missing = CliRunner().invoke(cli, ["audit", path, "--profile", "nobody"])
    assert missing.exit_code == 2
    assert missing.output == f"Error: AWS profile 'nobody' not found in {os.devnull} or {credentials}\n"


def test_load_model__points_the_models_sharing_the_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The endpoint and region apply to every model whose records or locks share the table, not only MODEL."""
    monkeypatch.syspath_prepend(str(tmp_path))
    name = f"shared_{uuid.uuid4().hex[:8]}"
    table = unique_table_name("shared")
    (tmp_path / f"{name}.py").write_text(
        "from pynamodb.attributes import UnicodeAttribute\n"
        "from pynamodb.models import Model\n"
        "from pynamodb_unique import UniqueAttribute, UniqueMixin\n\n\n"
        "class Account(UniqueMixin, Model):\n"
        "    class Meta:\n"
        f"        table_name = {table!r}\n"
        "        region = 'us-east-1'\n\n"
        "    pk = UnicodeAttribute(hash_key=True)\n"
        "    email = UniqueAttribute(UnicodeAttribute())\n\n\n"
        "class Team(UniqueMixin, Model):\n"
        "    class Meta:\n"
        f"        table_name = {table!r}\n"
        "        region = 'us-east-1'\n\n"
        "    pk = UnicodeAttribute(hash_key=True)\n"
        "    slug = UniqueAttribute(UnicodeAttribute())\n"
    )
    model = cli_module.load_model(f"{name}:Account", "http://127.0.0.1:8000", region="eu-north-1")
    team = importlib.import_module(name).Team
    assert (model.Meta.host, model.Meta.region) == ("http://127.0.0.1:8000", "eu-north-1")
    assert (team.Meta.host, team.Meta.region) == ("http://127.0.0.1:8000", "eu-north-1")


# Messages a person understands.


def test_errors__no_credentials_said_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without credentials the message says so once, where the requests were going, and how to give some."""
    for variable in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    path = _model_module(tmp_path, monkeypatch, retries=0)
    endpoint = _closed_port_url()
    result = CliRunner().invoke(cli, ["audit", path, "--endpoint-url", endpoint])
    assert result.exit_code == 2
    assert result.output == (
        f"Error: no AWS credentials found for DynamoDB at {endpoint} (region us-east-1): set AWS_ACCESS_KEY_ID "
        "and AWS_SECRET_ACCESS_KEY, pass --profile NAME, or configure ~/.aws/credentials (a local endpoint "
        "accepts any values)\n"
    )


@pytest.mark.integration
def test_errors__missing_table_names_the_endpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dynoxide_endpoint: str
) -> None:
    """A missing table on a local endpoint names the endpoint, whether set by --endpoint-url or AWS_ENDPOINT_URL."""
    # A name no other test registers: models of one table must agree on their constraint names.
    table = unique_table_name("missing")
    path = _model_module(tmp_path, monkeypatch, table, retries=0)
    expected = f"Error: table not found at {dynoxide_endpoint} (region us-east-1): {table}\n"
    flag = CliRunner().invoke(cli, ["audit", path, "--endpoint-url", dynoxide_endpoint])
    assert (flag.exit_code, flag.output) == (2, expected)
    monkeypatch.setenv("AWS_ENDPOINT_URL", dynoxide_endpoint)
    importlib.import_module(path.partition(":")[0]).Account.Meta.host = None
    from_env = CliRunner().invoke(cli, ["audit", path])
    assert (from_env.exit_code, from_env.output) == (2, expected)


def test_inspect_command__constraint_names(user_model: tuple[Any, list[str]]) -> None:  # noqa: F811
    """inspect takes a one-attribute constraint by its name (HANDLE=ada) as well as by its attribute."""
    model, target = user_model
    model(pk="ACCT#a1f9c3", email="ada@lovelace.io", username="ada").save()
    by_name = _run("inspect", *target, "HANDLE=ada")
    by_attribute = _run("inspect", *target, "username=ada")
    assert by_name.exit_code == by_attribute.exit_code == 0
    assert by_name.stdout == by_attribute.stdout
    assert "owner:      ACCT#a1f9c3/PROFILE (holds the value)" in by_name.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(
            ["inspect", "{model}", "TENANT_SLUG=acme"],
            "TENANT_SLUG is the constraint on tenant, slug: name each of its attributes, as tenant=... slug=...",
            id="compound-constraint",
        ),
        pytest.param(
            ["inspect", "{model}", "nickname=x"],
            "Account has no unique attribute or constraint named nickname; name the attributes of one "
            "constraint, or a one-attribute constraint by its name (EMAIL: email; HANDLE: username; "
            "TENANT_SLUG: tenant, slug)",
            id="inspect-unknown",
        ),
        pytest.param(
            ["inspect", "{model}", "HANDLE=ada", "username=ada"], "username is given twice", id="inspect-twice"
        ),
        pytest.param(
            ["explain", "{model}", "--op", "save", "--item", '{"pk": "A", "email": "a@b.c", "HANDLE": "ada"}'],
            "--item: HANDLE is a constraint name, not an attribute: it constrains username",
            id="item-constraint",
        ),
        pytest.param(
            ["explain", "{model}", "--op", "save", "--item", '{"PK": "A", "email": "a@b.c"}'],
            "--item: PK is the stored name of pk: use Python attribute names, as pk",
            id="item-stored-name",
        ),
        pytest.param(
            ["explain", "{model}", "--op", "save", "--item", '{"pk": "A", "nickname": "x"}'],
            "--item: Account has no attribute nickname; its attributes: bio, email, pk, sk, slug, tenant, username",
            id="item-unknown",
        ),
    ],
)
def test_errors__names_a_person_typed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], message: str
) -> None:
    """A constraint name, a stored name or an unknown name is explained with what is accepted; exit 2."""
    model = _model_module(tmp_path, monkeypatch)
    result = CliRunner().invoke(cli, [model if a == "{model}" else a for a in args])
    assert (result.exit_code, result.stdout, result.stderr) == (2, "", f"Error: {message}\n")


# explain: types checked against the model, assumptions said.


@pytest.mark.parametrize(
    ("item", "message"),
    [
        pytest.param(
            {"pk": 1, "email": "a@b.c"},
            "--item: pk is a UnicodeAttribute (DynamoDB type S): expected a string, got 1",
            id="number-for-string-key",
        ),
        pytest.param(
            {"pk": "A", "email": ["a@b.c"]},
            '--item: email is a UnicodeAttribute (DynamoDB type S): expected a string, got ["a@b.c"]',
            id="list-for-string",
        ),
        pytest.param(
            {"pk": "A", "email": "a@b.c", "visits": True},
            "--item: visits is a NumberAttribute (DynamoDB type N): expected a number, got true",
            id="bool-for-number",
        ),
        pytest.param(
            {"pk": "A", "email": "a@b.c", "visits": "many"},
            "--item: visits is a NumberAttribute (DynamoDB type N): cannot read 'many'",
            id="text-for-number",
        ),
        pytest.param(
            {"pk": "A", "email": "a@b.c", "avatar": "not base64!"},
            "--item: avatar is a BinaryAttribute (DynamoDB type B): expected base64 text, got 'not base64!'",
            id="binary",
        ),
        pytest.param(
            {"pk": "A", "email": "a@b.c", "joined": 5},
            "--item: joined is a UTCDateTimeAttribute (DynamoDB type S): expected a string, got 5",
            id="date",
        ),
    ],
)
def test_explain_command__wrong_type_exits_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, item: dict[str, Any], message: str
) -> None:
    """A value the model's attribute cannot hold is refused on stderr with exit 2; no request is printed."""
    monkeypatch.syspath_prepend(str(tmp_path))
    name = f"typed_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(
        "from pynamodb.attributes import BinaryAttribute, NumberAttribute, UnicodeAttribute, UTCDateTimeAttribute\n"
        "from pynamodb.models import Model\n"
        "from pynamodb_unique import UniqueAttribute, UniqueMixin\n\n\n"
        "class Account(UniqueMixin, Model):\n"
        "    class Meta:\n"
        f"        table_name = {unique_table_name('typed')!r}\n"
        "        region = 'us-east-1'\n\n"
        "    pk = UnicodeAttribute(hash_key=True)\n"
        "    email = UniqueAttribute(UnicodeAttribute())\n"
        "    visits = NumberAttribute(null=True)\n"
        "    avatar = BinaryAttribute(null=True, legacy_encoding=False)\n"
        "    joined = UTCDateTimeAttribute(null=True)\n"
    )
    result = CliRunner().invoke(cli, ["explain", f"{name}:Account", "--op", "save", "--item", json.dumps(item)])
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr.startswith(f"Error: {message}")
    assert len(result.stderr.splitlines()) == 1
    good = {"pk": "A", "email": "a@b.c", "visits": 3, "avatar": "aGk=", "joined": "2024-01-02T03:04:05.000000+0000"}
    accepted = CliRunner().invoke(cli, ["explain", f"{name}:Account", "--op", "save", "--item", json.dumps(good)])
    assert accepted.exit_code == 0, accepted.output
    put = json.loads(accepted.stdout)["TransactItems"][0]["Put"]["Item"]
    assert put["visits"] == {"N": "3"}
    assert put["avatar"] == {"B": "aGk="}


def test_explain_command__says_what_it_assumed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without --stored, stderr says what the plan assumed is stored; with it, or for a plain update, nothing."""
    path = _model_module(tmp_path, monkeypatch)
    key = '{"pk": "ACCT#1"}'
    update = _run("explain", path, "--op", "update", "--item", '{"pk": "ACCT#1", "email": "new@x.io"}')
    assert update.exit_code == 0
    assert update.stderr == (
        "note: assuming the stored record holds no unique value (email, username, tenant, slug unset); "
        "pass --stored JSON to plan against the stored item\nTransactWriteItems request:\n"
    )
    delete = _run("explain", path, "--op", "delete", "--item", '{"pk": "ACCT#1", "email": "a@x.io", "username": "a"}')
    assert delete.stderr.splitlines()[0] == (
        "note: assuming the stored record holds email='a@x.io', username='a' and no other unique value "
        "(tenant, slug unset); pass --stored JSON to plan against the stored item"
    )
    stored = _run(
        "explain",
        path,
        "--op",
        "update",
        "--item",
        '{"pk": "ACCT#1", "email": "new@x.io"}',
        "--stored",
        '{"pk": "ACCT#1", "email": "old@x.io"}',
    )
    assert stored.stderr == "TransactWriteItems request:\n"
    items = json.loads(stored.stdout)["TransactItems"]
    assert [next(iter(i)) for i in items] == ["Delete", "Put", "Update"]
    plain = _run("explain", path, "--op", "update", "--item", '{"pk": "ACCT#1", "bio": "hi"}')
    assert plain.stderr == "UpdateItem request:\n"
    nothing = CliRunner().invoke(cli, ["explain", path, "--op", "update", "--item", key])
    assert (nothing.exit_code, nothing.stderr) == (2, "Error: explaining an update needs its actions\n")


def test_errors__no_region_and_unknown_profile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a region, or with AWS_PROFILE naming no profile, the message says what to set; exit 2."""
    path = _model_module(tmp_path, monkeypatch, retries=0)
    model = importlib.import_module(path.partition(":")[0]).Account
    endpoint = _closed_port_url()
    model.Meta.region = None
    monkeypatch.delenv("AWS_DEFAULT_REGION")
    no_region = CliRunner().invoke(cli, ["audit", path, "--endpoint-url", endpoint])
    assert (no_region.exit_code, no_region.output) == (
        2,
        "Error: no AWS region: pass --region, set the model's Meta.region, or set AWS_DEFAULT_REGION\n",
    )
    monkeypatch.setenv("AWS_PROFILE", "nope")
    no_profile = CliRunner().invoke(cli, ["audit", path, "--endpoint-url", endpoint, "--region", "us-east-1"])
    assert (no_profile.exit_code, no_profile.output) == (
        2,
        "Error: The config profile (nope) could not be found: pass an existing --profile, or unset AWS_PROFILE\n",
    )


def test_error_message__says_the_cause_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another refusal keeps PynamoDB's message, adds its cause only when the message lacks it, and says where."""
    model = importlib.import_module(_model_module(tmp_path, monkeypatch).partition(":")[0]).Account
    model.Meta.host = "http://127.0.0.1:9"
    where = "(DynamoDB at http://127.0.0.1:9 (region us-east-1))"
    repeated = ScanError("Failed to scan table: Rate exceeded", Exception("Rate exceeded"))
    assert cli_module.error_message(repeated, model) == f"Failed to scan table: Rate exceeded {where}"
    different = ScanError("Failed to scan table", Exception("Rate exceeded"))
    assert cli_module.error_message(different, model) == f"Failed to scan table: Rate exceeded {where}"
