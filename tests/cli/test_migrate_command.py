"""``pynamodb-unique migrate`` and the retired locks in ``audit``'s output.

On moto; migrate runs on dynoxide too, reached through ``--endpoint``.
"""

from __future__ import annotations

import importlib
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from _backends import Backend, unique_table_name
from _damage import all_items, client, delete_record, put_record
from _invariant import assert_invariant
from click.testing import CliRunner, Result

from pynamodb_unique.cli import cli

MODEL_SOURCE = '''
"""A user's model module during a migration: emails became case-insensitive, HANDLE is now LOGIN."""

from pynamodb.attributes import UnicodeAttribute
from pynamodb.models import Model

from pynamodb_unique import Former, UniqueAttribute, UniqueMixin


class Account(UniqueMixin, Model):
    class Meta:
        table_name = {table!r}
        region = "us-east-1"

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    sk = UnicodeAttribute(range_key=True, attr_name="SK", default="PROFILE")
    email = UniqueAttribute(UnicodeAttribute(null=True), normalize=str.casefold{email_former})
    username = UniqueAttribute(UnicodeAttribute(null=True), name="LOGIN"{username_former})
'''

#: Records written before the migration (values only; their old locks do not matter to migrate).
LEGACY = 25


def _deploy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, backend: Backend, *, contract: bool) -> Any:
    """The model module (the expand deploy, or with ``contract`` the one after it), its table, and the CLI target."""
    name = f"migrating_{uuid.uuid4().hex[:8]}"
    source = MODEL_SOURCE.format(
        table=unique_table_name("cli-migrate"),
        email_former="" if contract else ", former=Former(normalize=None)",
        username_former="" if contract else ', former=Former(name="HANDLE")',
    )
    (tmp_path / f"{name}.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    model = importlib.import_module(name).Account
    model.Meta.host = backend.host
    model.create_table(wait=True, billing_mode="PAY_PER_REQUEST")
    endpoint = ["--endpoint", backend.host] if backend.host else []
    return model, [f"{name}:Account", *endpoint]


@pytest.fixture
def account(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, backend: Backend) -> Any:
    """The expand deploy's model module and the CLI target."""
    return _deploy(tmp_path, monkeypatch, backend, contract=False)


@pytest.fixture
def contracted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, backend: Backend) -> Any:
    """The contract deploy's model module (no former forms) and the CLI target."""
    return _deploy(tmp_path, monkeypatch, backend, contract=True)


def _run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


@pytest.mark.backends("moto", "dynoxide")
def test_migrate_command__dry_run_apply_resolve_done(account: Any) -> None:
    """Dry run (nothing written, exit 1), --apply (conflict left, exit 1), then done once resolved (exit 0)."""
    model, target = account
    for n in range(LEGACY):
        put_record(model, (f"ACCT#legacy{n:03d}", "PROFILE"), email=f"User{n}@Example.COM", username=f"user{n}")
    put_record(model, ("ACCT#twin", "PROFILE"), email="user0@example.com")
    before = all_items(model)
    dry = _run("migrate", *target)
    assert dry.exit_code == 1
    assert all_items(model) == before
    lines = dry.stdout.splitlines()
    assert lines[0] == f"Account in {model.Meta.table_name}: {LEGACY + 1} records, {LEGACY + 1} items scanned"
    assert lines[1] == f"current-form locks missing: {2 * LEGACY - 1}, created: 0"
    assert lines[2] == (
        "  conflict UNIQ#EMAIL#user0@example.com: held by ACCT#legacy000/PROFILE, ACCT#twin/PROFILE; "
        "no lock (a person decides)"
    )
    assert lines[-1] == (
        f"dry run, nothing written: {2 * LEGACY - 1} locks to create, 1 conflict; run again with --apply to write"
    )
    applied = _run("migrate", *target, "--apply", "--segments", "2")
    assert applied.exit_code == 1
    assert applied.stdout.splitlines()[-1] == (
        f"not done: {2 * LEGACY - 1} created, 1 conflict; resolve them, then run migrate again"
    )
    delete_record(model, ("ACCT#twin", "PROFILE"))
    document = json.loads(_run("migrate", *target, "--apply", "--json").stdout)
    assert (document["done"], document["counts"]["created"], document["conflicts"]) == (True, 1, [])
    quiet = _run("migrate", *target, "--quiet")
    assert (quiet.exit_code, quiet.stdout) == (0, "done: 0 created; every record holds its current-form locks\n")


def test_migrate_command__left_for_repair_listed(account: Any) -> None:
    """A current-form lock naming a record that does not hold the value is left for repair, and said so."""
    model, target = account
    put_record(model, ("ACCT#ada", "PROFILE"), email="ada@x.io")
    locks = {"PK": {"S": "UNIQ#EMAIL#ada@x.io"}, "SK": {"S": "LOCK"}, "uniq_owner_hash": {"S": "ACCT#gone"}}
    locks |= {"uniq_owner_range": {"S": "PROFILE"}, "uniq_constraint": {"S": "EMAIL"}}
    client(model).put_item(TableName=model.Meta.table_name, Item=locks)
    result = _run("migrate", *target, "--apply")
    assert result.exit_code == 1
    assert (
        "  left: foreign lock UNIQ#EMAIL#ada@x.io: owned by ACCT#gone/PROFILE, held by ACCT#ada/PROFILE (run repair)"
    ) in result.stdout.splitlines()
    last = "not done: 0 created, 1 left for repair; resolve them, then run migrate again"
    assert result.stdout.splitlines()[-1] == last
    assert _run("repair", *target, "--apply", "--quiet").exit_code == 0
    assert _run("migrate", *target, "--quiet").exit_code == 0
    assert_invariant(model)


def test_audit_command__retired_column_after_a_rename(contracted: Any) -> None:
    """After the contract deploy, audit counts the old name's locks as retired, in a column of their own."""
    model, target = contracted
    model(pk="ACCT#ada", email="ada@x.io", username="ada").save()
    retired = {"PK": {"S": "UNIQ#HANDLE#ada"}, "SK": {"S": "LOCK"}, "uniq_owner_hash": {"S": "ACCT#ada"}}
    retired |= {"uniq_owner_range": {"S": "PROFILE"}, "uniq_constraint": {"S": "HANDLE"}}
    retired |= {"uniq_owner_model": {"S": "Account"}}
    client(model).put_item(TableName=model.Meta.table_name, Item=retired)
    result = _run("audit", *target)
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert lines[1].split() == ["constraint", "orphaned", "missing", "foreign", "duplicate", "retired"]
    assert lines[4].split() == ["HANDLE", "0", "0", "0", "0", "1"]
    assert "  retired lock UNIQ#HANDLE#ada: HANDLE is no longer declared (owner ACCT#ada/PROFILE)" in lines
    repaired = _run("repair", *target, "--apply")
    assert repaired.stdout.splitlines()[-1] == "done: 1 applied"
    assert _run("audit", *target).exit_code == 0
    assert_invariant(model)
