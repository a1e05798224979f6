"""Audit: one scan (or an export) that compares a model's lock items with the unique values its records hold."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from typing import TYPE_CHECKING, Literal

from .._model.context import context_of
from .._model.registry import TableId, lock_table_id
from .._model.seam import connection
from .collect import AuditReport, Collector, ExportLocation, Scope
from .scan import Page, scan_pages

if TYPE_CHECKING:
    from .._mixin import UniqueMixin
    from .export import Joined


def audit(
    model: type[UniqueMixin],
    *,
    segments: int = 1,
    max_rate: float | None = None,
    progress: Callable[[int], None] | None = None,
    export: ExportLocation | Mapping[str, ExportLocation] | None = None,
    memory_limit: str | None = None,
    temp_directory: str | os.PathLike[str] | None = None,
    engine: Literal["memory", "duckdb"] = "memory",
    workers: int = 1,
) -> AuditReport:
    """Scan a model's table (and its lock table) once, or read an export of them, and report every lock problem.

    Only locks of the model's own constraints count; other items sharing the tables are
    ignored. Reads are strongly consistent, but a scan is not a snapshot: on a table being
    written, a change made during the scan can show as a problem that is already gone.
    Repair's conditions make acting on such a report safe.

    With ``export``, no table is read: the items come from a DynamoDB export to S3
    (``ExportTableToPointInTime``, DynamoDB JSON format), a consistent snapshot, and DuckDB (the
    ``export`` extra) joins the lock keys records hold with the lock items in bounded memory,
    spilling to ``temp_directory``. The report is the one a scan of the same items gives.
    ``engine="duckdb"`` does the same with a scan's pages, so a live audit's memory is bounded too.

    Args:
        model: a ``UniqueMixin`` model; its Meta gives table, region and host.
        segments: parallel scan segments (threads).
        max_rate: a cap on read capacity units consumed per second.
        progress: called with the number of items of each page (or batch of an export) read.
        export: an export's folder (``.../AWSDynamoDB/<export id>/``) or its ``s3://`` URL; when
            the model's records and locks are in several tables, a mapping of table name to location.
        memory_limit: DuckDB's memory limit (``"512MB"`` by default).
        temp_directory: where DuckDB spills (a temporary folder by default).
        engine: for a scan, ``"memory"`` (a dict per record, no extra needed) or ``"duckdb"``
            (the ``export`` extra: bounded memory); an export is always joined by DuckDB.
        workers: processes sorting an export's data files (``export`` only): each sorts a share
            into a DuckDB database of its own, with ``memory_limit``; the parent joins them. The
            report is the one ``workers=1`` gives. Workers start with multiprocessing's start
            method; other than ``fork``, they import the model by module and name.

    Raises:
        UniqueConfigError: ``model`` has no unique constraints.
        UniqueError: an item of the table cannot be read as a record of ``model``; an export
            that is missing, incomplete, of another table or not in DynamoDB JSON format.
        ValueError: bad ``segments`` or ``max_rate``, or either given with ``export``; an unknown
            ``engine``; ``memory_limit`` or ``temp_directory`` without DuckDB; ``workers`` not a
            whole number at least 1, above 1 without ``export``, or for a model that worker
            processes started without ``fork`` cannot import.
        pynamodb.exceptions.ScanError: DynamoDB refused the scan (missing table, no access).
    """
    if engine not in ("memory", "duckdb"):
        msg = f"engine must be 'memory' or 'duckdb', got {engine!r}"
        raise ValueError(msg)
    if export is None and engine == "memory" and (memory_limit is not None or temp_directory is not None):
        msg = "memory_limit and temp_directory are DuckDB's: pass export= or engine='duckdb'"
        raise ValueError(msg)
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        msg = f"workers must be a whole number of processes, at least 1, got {workers!r}"
        raise ValueError(msg)
    if workers > 1 and export is None:
        msg = "workers split an export's files over processes; a scan runs in parallel with segments="
        raise ValueError(msg)
    scope = Scope(model)
    context = context_of(model)
    assert context is not None  # noqa: S101 - checked by Scope.
    # The tables a scan reads (not an export's) are checked to take the fixes' transactions.
    locks = context.write_locks() if export is None else context.locks()
    lock_id = lock_table_id(model)
    scope.check_shared(set(), lock_id)
    collector = Collector(scope, locks)
    if export is not None:
        if segments != 1 or max_rate is not None:
            msg = "segments and max_rate pace a scan; an audit of an export reads no table"
            raise ValueError(msg)
        if workers > 1:
            from .parallel import check_start, read_export_parallel  # noqa: PLC0415 - only a parallel audit.

            check_start(model)
            records, lock_count = read_export_parallel(
                collector,
                export,
                workers=workers,
                memory_limit=memory_limit,
                temp_directory=temp_directory,
                progress=progress,
            )
        else:
            # DuckDB is imported only here: the export extra is not needed for a live audit.
            from .export import read_export  # noqa: PLC0415 - keeps duckdb out of the live audit.

            records, lock_count = read_export(
                collector, export, memory_limit=memory_limit, temp_directory=temp_directory, progress=progress
            )
        scope.check_shared(collector.foreign_lock_names, lock_id)
        return collector.report(model, records=records, locks=lock_count)

    with ExitStack() as stack:
        joined: Joined | None = None
        if engine == "duckdb":
            from .export import Joined  # noqa: PLC0415 - keeps duckdb out of the default audit.

            joined = stack.enter_context(Joined(collector, memory_limit=memory_limit, temp_directory=temp_directory))
        add_page = collector.add_page if joined is None else joined.add_page

        def reader(table: TableId | None, *, locks: bool) -> Callable[[Page], None]:
            def on_page(items: Page) -> None:
                add_page(items, table=table, locks=locks)
                if progress is not None:
                    progress(len(items))

            return on_page

        for ident, groups in scope.tables.items():
            scan_pages(
                connection(groups[0].root), reader(ident, locks=ident == lock_id), segments=segments, max_rate=max_rate
            )
        if lock_id not in scope.tables:
            scan_pages(locks.connection, reader(None, locks=True), segments=segments, max_rate=max_rate)
        records, lock_count = (len(collector.records), len(collector.locks)) if joined is None else joined.finish()
    scope.check_shared(collector.foreign_lock_names, lock_id)
    return collector.report(model, records=records, locks=lock_count)
