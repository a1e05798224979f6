"""migrate()'s rate on a table of records written before a constraint changed (dynoxide).

Emails become case-insensitive: records written with case-sensitive emails (and their locks, as
the library wrote them) are loaded into a fresh table; the expand deploy declares
``normalize=str.casefold, former=Former(normalize=None)``; ``migrate`` then creates one
current-form lock per record. Each repetition uses a fresh table and prints, in records per
second: the dry run (the scan alone), the migration (scan and writes), and a second run once
done (what resuming costs when nothing is left). Starts dynoxide from ``.tools`` (or
``DYNOXIDE_BIN``) unless ``--endpoint`` names a running DynamoDB-compatible server::

    python benchmarks/migrate.py                          # 30,000 records, 3 repetitions
    python benchmarks/migrate.py --records 100000 --segments 8

Not part of the test suite: run it on demand.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from pynamodb.attributes import Attribute, UnicodeAttribute
from pynamodb.models import Model

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # This checkout's package, not another installed one.
sys.path.insert(0, str(ROOT / "tests"))  # The tests' dynoxide helper.

import _dynoxide  # noqa: E402

from pynamodb_unique import Former, UniqueAttribute, UniqueMixin, migrate  # noqa: E402
from pynamodb_unique._model.context import context_of  # noqa: E402

REGION: Final = "us-east-1"
#: BatchWriteItem's limit on items per request.
BATCH: Final = 25


def _deploy(endpoint: str, table: str, *, expand: bool) -> type[Any]:
    """The Account model before the migration (case-sensitive emails), or the expand deploy."""
    email: Attribute[Any] = (
        UniqueAttribute(UnicodeAttribute(null=True), normalize=str.casefold, former=Former(normalize=None))
        if expand
        else UniqueAttribute(UnicodeAttribute(null=True))
    )
    meta = type("Meta", (), {"table_name": table, "region": REGION, "host": endpoint, "max_pool_connections": 32})
    namespace = {
        "__module__": __name__,
        "__qualname__": "Account",
        "Meta": meta,
        "pk": UnicodeAttribute(hash_key=True, attr_name="PK"),
        "sk": UnicodeAttribute(range_key=True, attr_name="SK", default="PROFILE"),
        "email": email,
    }
    model: type[Any] = type("Account", (UniqueMixin, Model), namespace)
    return model


def load(model: type[Any], records: int) -> None:
    """Write ``records`` accounts with their locks as the model before the migration wrote them (BatchWriteItem)."""
    context = context_of(model)
    assert context is not None  # noqa: S101 - a unique model.
    locks = context.locks()
    items: list[dict[str, Any]] = []
    for n in range(records):
        account = model(pk=f"ACCT#{n:08d}", email=f"User{n}@Example.COM")
        items.append(account.serialize())
        owner = context.owner_fields(account)
        for name, lock_key in context.lock_keys(account).items():
            if lock_key is not None:
                lock = {**locks.key(lock_key), **owner, "uniq_constraint": {"S": name}}
                items.append({**lock, "uniq_owner_model": {"S": model.__name__}})
    client = model._get_connection().connection.client
    table = model.Meta.table_name
    for first in range(0, len(items), BATCH):
        request = {table: [{"PutRequest": {"Item": item}} for item in items[first : first + BATCH]]}
        while request:
            request = client.batch_write_item(RequestItems=request).get("UnprocessedItems") or {}


def _show(samples: Sequence[float]) -> str:
    return f"{statistics.median(samples):,.0f} ({min(samples):,.0f}-{max(samples):,.0f})"


def run(endpoint: str, records: int, repeats: int, segments: int) -> None:
    """Load, then time the dry run, the migration and a rerun, ``repeats`` times on fresh tables."""
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "bench")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "bench")
    dry: list[float] = []
    applied: list[float] = []
    rerun: list[float] = []
    for repeat in range(repeats):
        table = f"migrate-bench-{uuid.uuid4().hex[:8]}"
        before = _deploy(endpoint, table, expand=False)
        before.create_table(wait=True, billing_mode="PAY_PER_REQUEST")
        started = time.perf_counter()
        load(before, records)
        loaded = time.perf_counter() - started
        expand = _deploy(endpoint, table, expand=True)

        started = time.perf_counter()
        planned = migrate(expand, segments=segments)
        dry.append(records / (time.perf_counter() - started))
        started = time.perf_counter()
        report = migrate(expand, apply=True, segments=segments)
        seconds = time.perf_counter() - started
        applied.append(records / seconds)
        started = time.perf_counter()
        again = migrate(expand, apply=True, segments=segments)
        rerun.append(records / (time.perf_counter() - started))
        assert (planned.missing, report.created, report.done, again.created, again.done) == (  # noqa: S101
            records,
            records,
            True,
            0,
            True,
        ), "the migration did not create every lock"
        print(
            f"repetition {repeat + 1}: loaded {records:,} records in {loaded:.1f} s; "
            f"migrate created {report.created:,} locks in {seconds:.1f} s"
        )
    print(f"migrate on {records:,} records, {segments} segments, median (min-max) of {repeats}, records/s:")
    print(f"  dry run (scan only):          {_show(dry)}")
    print(f"  migrate --apply (scan+write): {_show(applied)}")
    print(f"  rerun once done (scan only):  {_show(rerun)}")


def main() -> None:
    """Parse the options, start dynoxide unless given an endpoint, run."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=30_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--segments", type=int, default=4, help="scan segments and writing threads")
    parser.add_argument("--endpoint", help="a running DynamoDB-compatible server (default: start dynoxide)")
    options = parser.parse_args()
    with contextlib.ExitStack() as stack:
        endpoint = options.endpoint or stack.enter_context(_dynoxide.server())
        run(endpoint, options.records, options.repeats, options.segments)


if __name__ == "__main__":
    main()
