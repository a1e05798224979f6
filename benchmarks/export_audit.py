"""The audit of a DynamoDB export (DuckDB, bounded memory) beside the live audit (a Scan, a dict per record).

Writes an export of accounts in the real format (gzip JSON lines of ``{"Item": ...}``, manifests),
each account a record and its email and username locks (3 items), with a little damage (one
account in 100,000 without its email lock, and as many orphaned locks, so the item count stays 3
per account), then audits it in a child process and prints items/s, wall time and the child's
peak RSS (``ru_maxrss``: DuckDB's memory is the process's). Then the live audit of a dynoxide
table of ``--live-records`` accounts (``engine="memory"``, the default, then ``engine="duckdb"``),
and the export audit of an export of that same table, each in a child process too::

    python benchmarks/export_audit.py                        # 1,000,000 accounts: 3,000,000 items
    python benchmarks/export_audit.py --records 100000 --live-records 5000
    python benchmarks/export_audit.py --records 200000 --live-records 0 --workers 1 2   # the parallel audit

Starts dynoxide from ``.tools`` (or ``DYNOXIDE_BIN``); ``--live-records 0`` skips the live part,
``--records 0`` the generated export.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # This checkout's package, not another installed one.
sys.path.insert(0, str(ROOT / "tests"))  # The tests' models, loaders and export writer.

import _dynoxide  # noqa: E402
from _backends import Backend, bind_model  # noqa: E402
from _damage import bind_accounts, client, load_healthy, lock_table_name  # noqa: E402
from _export import export_tables, write_export  # noqa: E402
from models import Account  # noqa: E402

from pynamodb_unique import audit  # noqa: E402
from pynamodb_unique._model.context import context_of  # noqa: E402

#: Items per account: the record, its email lock and its username lock.
ITEMS_PER_ACCOUNT: Final = 3
#: One account in this many loses its email lock to an orphan: 2 problems each.
DAMAGE_EVERY: Final = 100_000


def accounts(count: int) -> Iterator[dict[str, Any]]:
    """The items of ``count`` accounts as the library writes them, damaged every :data:`DAMAGE_EVERY`."""
    context = context_of(Account)
    assert context is not None  # noqa: S101 - a unique model.
    locks = context.locks()
    for n in range(count):
        account = Account(pk=f"ACCT#bulk{n:08d}", email=f"user{n}@example.com", username=f"user{n}")
        yield account.serialize()
        owner = context.owner_fields(account)
        for name, lock_key in context.lock_keys(account).items():
            if lock_key is None:
                continue
            if name == "EMAIL" and n % DAMAGE_EVERY == 0:
                # A missing lock, and in its place an orphan: a lock whose owner is gone.
                ghost = {"uniq_owner_hash": {"S": f"ACCT#ghost{n:08d}"}, "uniq_owner_range": {"S": "PROFILE"}}
                yield {**locks.key(f"UNIQ#EMAIL#ghost{n}@example.com"), **ghost, "uniq_constraint": {"S": name}}
                continue
            yield {**locks.key(lock_key), **owner, "uniq_constraint": {"S": name}}


def child(arguments: list[str]) -> dict[str, Any]:
    """Run this script with ``arguments`` in a child process; what it printed (one JSON document)."""
    done = subprocess.run(  # noqa: S603 - this script, fixed arguments.
        [sys.executable, __file__, *arguments], check=False, capture_output=True, text=True
    )
    if done.returncode:
        msg = f"{' '.join(arguments)} failed:\n{done.stderr}"
        raise RuntimeError(msg)
    figures: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return figures


def measured(run: Any) -> None:
    """Run ``run()`` (an audit), then print its report's figures, wall time and peak RSS.

    ``peak`` is this process's; ``worker_peak`` the largest of its worker processes' (0 without
    workers): ``RUSAGE_CHILDREN`` gives the largest peak of the children waited for.
    """
    started = time.perf_counter()
    report = run()
    seconds = time.perf_counter() - started
    mine, workers = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    peak = mine.ru_maxrss * 1024  # Linux: KiB.
    worker_peak = workers.ru_maxrss * 1024
    # CPU seconds (user + system): on a machine shared with other work, wall time shows the load.
    cpu, worker_cpu = mine.ru_utime + mine.ru_stime, workers.ru_utime + workers.ru_stime
    kinds = sorted(p.kind for p in report.problems)
    figures = {"items": report.scanned, "seconds": seconds, "peak": peak, "worker_peak": worker_peak}
    figures |= {"cpu": cpu, "worker_cpu": worker_cpu}
    print(json.dumps({**figures, "problems": kinds}))


def show(name: str, figures: dict[str, Any]) -> str:
    """A markdown row."""
    rate = figures["items"] / figures["seconds"]
    workers = f"{figures['worker_peak'] / 2**20:,.0f} MiB" if figures.get("worker_peak") else "-"
    cpu = f"{figures['cpu']:.1f} s" + (f" + {figures['worker_cpu']:.1f} s" if figures.get("worker_cpu") else "")
    return (
        f"| {name} | {figures['items']:,} | {figures['seconds']:.1f} s | {rate:,.0f} | {cpu} | "
        f"{figures['peak'] / 2**20:,.0f} MiB | {workers} |"
    )


def export_rows(records: int, files: int, folder: Path, workers: list[int]) -> list[str]:
    """The export audit of a generated export of ``records`` accounts, damaged every :data:`DAMAGE_EVERY`.

    Audited once per number of ``workers``, each in a child process.
    """
    started = time.perf_counter()
    root = write_export(folder, Account.Meta.table_name, accounts(records), files=files)
    size = sum(p.stat().st_size for p in (root / "data").iterdir())
    print(
        f"wrote {records * ITEMS_PER_ACCOUNT:,} items ({records:,} accounts) in "
        f"{time.perf_counter() - started:.0f} s: {files} data files, {size / 2**20:,.0f} MiB gzip",
        flush=True,
    )
    plan = folder / "export.json"
    plan.write_text(json.dumps({Account.Meta.table_name: str(root)}))
    damaged = (records + DAMAGE_EVERY - 1) // DAMAGE_EVERY
    rows = []
    for count in workers:
        figures = child(["--audit-export", str(plan), "--workers", str(count)])
        if figures["problems"] != ["missing"] * damaged + ["orphaned"] * damaged:
            msg = f"expected {damaged} missing and {damaged} orphaned locks, found {figures['problems']}"
            raise AssertionError(msg)
        rows.append(show(f"export audit, {records:,} accounts, workers={count}", figures))
        print(rows[-1], f"({damaged} missing and {damaged} orphaned locks found, as damaged)", flush=True)
    return rows


def live_rows(records: int, folder: Path) -> list[str]:
    """The live audit of a dynoxide table of ``records`` healthy accounts (dict, then DuckDB), and of its export."""
    rows = []
    with _dynoxide.server() as endpoint:
        model = bind_accounts(Backend("dynoxide", endpoint))
        load_healthy(model, records)
        table = model.Meta.table_name
        for engine in ("memory", "duckdb"):
            figures = child(["--audit-live", endpoint, table, "--engine", engine])
            rows.append(show(f"live audit (engine={engine}), {records:,} accounts", figures))
            if figures["problems"]:
                msg = f"a healthy table audited with problems: {figures}"
                raise AssertionError(msg)
        exports = export_tables(client(model), [table, lock_table_name(model)], folder / "live")
        plan = folder / "live.json"
        plan.write_text(json.dumps({"endpoint": endpoint, "table": table, **{t: str(p) for t, p in exports.items()}}))
        figures = child(["--audit-export", str(plan)])
    if figures["problems"]:
        msg = f"the export of a healthy table audited with problems: {figures}"
        raise AssertionError(msg)
    rows.append(show(f"export audit, {records:,} accounts", figures))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000, help="accounts in the generated export")
    parser.add_argument("--files", type=int, default=16, help="data files of the generated export")
    parser.add_argument("--live-records", type=int, default=20_000, help="accounts on dynoxide; 0 skips it")
    parser.add_argument("--memory-limit", default="512MB", help="DuckDB's memory limit (per process)")
    parser.add_argument(
        "--workers", type=int, nargs="+", default=[1], help="worker processes of the export audit, each measured"
    )
    parser.add_argument("--folder", type=Path, help="where to write the exports (a temporary folder by default)")
    parser.add_argument("--audit-export", type=Path, help=argparse.SUPPRESS)  # The child's job.
    parser.add_argument("--audit-live", nargs=2, metavar=("ENDPOINT", "TABLE"), help=argparse.SUPPRESS)
    parser.add_argument("--engine", default="memory", help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "bench")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "bench")
    if args.audit_export is not None:
        exports = json.loads(args.audit_export.read_text())
        model = Account
        if "endpoint" in exports:
            model = bind_model(
                Account, Backend("dynoxide", exports.pop("endpoint")), exports.pop("table"), create=False
            )
        location = next(iter(exports.values())) if len(exports) == 1 else exports
        measured(lambda: audit(model, export=location, memory_limit=args.memory_limit, workers=args.workers[0]))
        return
    if args.audit_live is not None:
        endpoint, table = args.audit_live
        model = bind_model(Account, Backend("dynoxide", endpoint), table, create=False)
        measured(lambda: audit(model, engine=args.engine))
        return

    with tempfile.TemporaryDirectory(prefix="export-audit-", dir=args.folder) as scratch:
        folder = Path(scratch)
        rows = export_rows(args.records, args.files, folder, args.workers) if args.records else []
        if args.live_records:
            rows.extend(live_rows(args.live_records, folder))
        print(
            "\n| audit | items | wall time | items/s | CPU: parent + workers | peak RSS | largest worker's peak RSS |"
            "\n| --- | ---: | ---: | ---: | ---: | ---: | ---: |"
        )
        print("\n".join(rows))


if __name__ == "__main__":
    main()
