"""audit(export=..., workers=N): the export's data files sorted by N processes, the report of one.

The reports of two workers and of one are compared on every shape of tests/test_export.py (its
``assert_same``) and by the command (``--workers``, spawned workers); here: the values refused
before anything is read, a worker's failure, progress, S3, and how the files are shared out.
"""

from __future__ import annotations

import importlib
import uuid
from pathlib import Path
from typing import Any

import boto3
import pytest
from _backends import REGION, Backend, bind_model
from _damage import bind_accounts, damage, load_healthy, put_lock
from models import Account
from test_export_audit import _export, _location, _upload

import pynamodb_unique._ops.export
import pynamodb_unique._ops.parallel
from pynamodb_unique import UniqueError, audit
from pynamodb_unique._ops.export import DataFile
from pynamodb_unique._ops.parallel import _split


@pytest.fixture
def forked(monkeypatch: pytest.MonkeyPatch) -> None:
    """Workers forked: they inherit the test's models, made at run time."""
    monkeypatch.setattr(pynamodb_unique._ops.parallel, "START_METHOD", "fork")


@pytest.mark.parametrize("workers", [0, -1, True, 1.5, "2", None])
def test_audit_workers__not_a_whole_number_at_least_1__refused_before_anything(tmp_path: Path, workers: Any) -> None:
    """A bad ``workers`` is a ValueError before any export is looked for (this one does not exist)."""
    with pytest.raises(ValueError, match="workers must be a whole number of processes, at least 1"):
        audit(Account, export=tmp_path / "nowhere", workers=workers)


def test_audit_workers__without_export__refused(moto_backend: None) -> None:
    """Workers split an export: a scan (of a table that does not even exist) is refused first."""
    with pytest.raises(ValueError, match="a scan runs in parallel with segments="):
        audit(Account, workers=2)


def test_audit_workers__spawn_and_a_model_made_at_run_time__refused_before_anything(
    moto_backend: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Spawned workers import the model by name: a class made at run time is refused before reading."""
    monkeypatch.setattr(pynamodb_unique._ops.parallel, "START_METHOD", "spawn")
    model = bind_model(Account, Backend("moto", None), create=False)
    with pytest.raises(ValueError, match="define it at module level, or pass workers=1"):
        audit(model, export=tmp_path / "nowhere", workers=2)


MODEL_SOURCE = """
from models import Account


class Moved(Account):
    class Meta(Account.Meta):
        table_name = {table!r}
"""


def test_audit_workers__spawned_worker_sees_another_table__refused(
    moto_backend: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Meta changed at run time: the spawned worker's model keeps locks elsewhere, and says so."""
    name = f"moved_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(MODEL_SOURCE.format(table="declared-table"))
    monkeypatch.syspath_prepend(str(tmp_path))
    model = importlib.import_module(name).Moved
    monkeypatch.setattr(model.Meta, "table_name", f"moved-{uuid.uuid4().hex[:8]}")
    model.create_table(wait=True, billing_mode="PAY_PER_REQUEST")
    load_healthy(model, 3)
    export = _location(_export(model, tmp_path / "export"))
    assert audit(model, export=export).clean
    monkeypatch.setattr(pynamodb_unique._ops.parallel, "START_METHOD", "spawn")
    with pytest.raises(UniqueError, match="with other tables or namespaces than the audit's"):
        audit(model, export=export, workers=2)


def test_audit_workers__a_worker_fails__its_error_raised(moto_backend: None, tmp_path: Path, forked: None) -> None:
    """A data file cut short in one worker's share: the audit raises that worker's UniqueError."""
    model = bind_accounts(Backend("moto", None))
    load_healthy(model, 30)
    export = _export(model, tmp_path)[model.Meta.table_name]
    data = max((export / "data").iterdir(), key=lambda p: p.stat().st_size)
    data.write_bytes(data.read_bytes()[:-12])
    with pytest.raises(UniqueError, match=rf"{data.name} of the export at .* cannot be read after \d+ items"):
        audit(model, export=export, workers=2)


def test_audit_workers__another_constraints_lock__refused_as_by_one_process(
    moto_backend: None, tmp_path: Path, forked: None
) -> None:
    """A lock of a constraint no audited model declares, read by a worker, reaches the parent: the
    audit refuses to guess whose items are whose, as one process does."""
    model = bind_accounts(Backend("moto", None))
    load_healthy(model, 6)
    put_lock(model, "UNIQ#SKU#a-1", ("ORDER#1", "ORDER"), "SKU")
    export = _location(_export(model, tmp_path))
    for workers in (1, 2):
        with pytest.raises(UniqueError, match=r"also holds locks of constraints \['SKU'\]"):
            audit(model, export=export, workers=workers)


def test_audit_workers__progress__every_item_counted(
    moto_backend: None, tmp_path: Path, forked: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The workers' batches reach ``progress`` in the parent: their sum is every item read."""
    monkeypatch.setattr(pynamodb_unique._ops.export, "BATCH", 7)
    model = bind_accounts(Backend("moto", None))
    load_healthy(model, 40)
    damage(model)
    seen: list[int] = []
    report = audit(model, export=_export(model, tmp_path)[model.Meta.table_name], workers=3, progress=seen.append)
    assert sum(seen) == report.scanned
    assert len(seen) > 3
    assert max(seen) <= 7


@pytest.mark.parametrize("separate", [False, True], ids=["shared", "separate"])
def test_audit_workers__export_in_s3__same_report(
    moto_backend: None, tmp_path: Path, forked: None, separate: bool
) -> None:
    """An export read from (moto's) S3 by two workers: the report of one process reading it."""
    model = bind_accounts(Backend("moto", None), separate=separate)
    damage(model)
    boto3.client("s3", region_name=REGION).create_bucket(Bucket="audit-exports")
    urls = {table: _upload(folder, "audit-exports") for table, folder in _export(model, tmp_path).items()}
    one = audit(model, export=_location(urls))  # type: ignore[arg-type]
    assert not one.clean
    assert audit(model, export=_location(urls), workers=2) == one  # type: ignore[arg-type]


def test_split__shares_of_about_as_many_items() -> None:
    """Largest files first, each to the share with fewest items; never more shares than files."""
    files = [DataFile(f"data/{n}.json.gz", items) for n, items in enumerate([10, 1, 1, 1, 7])]
    plans: Any = [("t", type("Source", (), {"location": "/x"})(), files)]
    shares = _split(plans, 2)
    assert sorted(sum(f.items for _, _, f in share) for share in shares) == [10, 10]
    assert len(_split(plans, 8)) == 5
    assert sorted(f.key for share in _split(plans, 3) for _, _, f in share) == sorted(f.key for f in files)
