"""The export audit over several processes: each sorts a share of the data files into a DuckDB database of its own.

Sorting items (reading each record as the library does, computing its lock keys) is per-item
Python, bound to one core; the export's data files are independent. ``audit(..., workers=N)``
splits them into N shares of about as many items (``manifest-files.json`` counts them), and
each worker process sorts its share with :meth:`Collector.sort` into its own database, as
:class:`export.Joined` does in one process. The parent then attaches the N databases, read
together as one, and runs the same join (:meth:`export._Join.unusual`): the report is the one a
single process gives. Each process keeps DuckDB's memory limit, so memory is bounded per process.

Workers start with multiprocessing's start method (``multiprocessing.set_start_method``). With
``fork`` they inherit the audited model and the registry; with ``spawn`` or ``forkserver`` they
import the model by its module and name, with the modules of the models sharing its tables, and
refuse to go on when the model they see is not the one audited (another table, other namespaces).
"""

from __future__ import annotations

import contextlib
import importlib
import itertools
import multiprocessing
import os
import tempfile
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from .._model.context import context_of
from .._model.registry import TableId, lock_sharers, lock_table_id, table_neighbours
from ..exceptions import UniqueError
from .collect import Collector, ExportLocation, Scope, Sorted
from .export import DEFAULT_MEMORY_LIMIT, DataFile, Plan, _Join, _Source, export_plans, read_files
from .scan import Page

if TYPE_CHECKING:
    from .._mixin import UniqueMixin

#: The start method of worker processes; None: multiprocessing's (``set_start_method``, the platform's default).
START_METHOD: str | None = None
#: How often, in seconds, the parent passes the workers' progress on while it waits.
PROGRESS_SECONDS: Final = 0.2

# Collectors of running audits, by job number: a forked worker finds the parent's here.
_inherited: dict[int, Collector] = {}
_jobs = itertools.count()
# A worker's channel for progress (items read per batch), set by its initializer.
_progress: Any = None


def _qualified(model: type[Any]) -> str:
    return f"{model.__module__}:{model.__qualname__}"


def _imported(reference: str) -> Any:
    """The object ``module:qualified.name`` names, imported (None when there is none)."""
    module, _, name = reference.partition(":")
    found: Any = importlib.import_module(module)
    for part in name.split("."):
        found = getattr(found, part, None)
    return found


def check_start(model: type[UniqueMixin]) -> None:
    """Refuse, before anything is read, a model that workers started without ``fork`` cannot import.

    Raises:
        ValueError: the start method is not ``fork`` and the model is not what its module and
            qualified name import (defined in a function, made at run time).
    """
    method = multiprocessing.get_context(START_METHOD).get_start_method()
    if method == "fork":
        return
    try:
        found = _imported(_qualified(model))
    except ImportError:
        found = None
    if found is not model:
        msg = (
            f"workers > 1 start processes with the {method!r} method, which import the model by name; "
            f"{model.__name__} is not what {_qualified(model)} imports (a class defined in a function or "
            "made at run time): define it at module level, or pass workers=1"
        )
        raise ValueError(msg)


def _fingerprint(collector: Collector) -> tuple[Any, ...]:
    """What a worker must see as the parent does: the audited models, namespaces and tables."""
    scope = collector.scope
    return (
        _qualified(scope.model),
        sorted(_qualified(m) for m in scope.members),
        list(scope.names),
        sorted(str(t) for t in scope.tables),
        str(lock_table_id(scope.model)),
        (collector.lock_table.table_name, collector.lock_table.hash_name, collector.lock_table.range_name),
    )


def _ordered(collector: Collector) -> list[type[UniqueMixin]]:
    """The scope's models in one order every process agrees on (their numbers in the databases)."""
    return sorted(collector.scope.members, key=_qualified)


@dataclass(frozen=True)
class _Share:
    """One worker's job: its data files, where its database goes, and how to find the audited model."""

    job: int
    model: str
    modules: tuple[str, ...]
    fingerprint: tuple[Any, ...]
    now: float
    folder: str
    name: str
    memory_limit: str
    #: (table, export location, data files) of each table.
    files: tuple[tuple[TableId, str, tuple[DataFile, ...]], ...]


def _collector(share: _Share) -> Collector:
    """The audit's collector in a worker: the parent's when forked, else one built from the imported model.

    Raises:
        UniqueError: the imported model is not the one the parent audits.
    """
    inherited = _inherited.get(share.job)
    if inherited is not None:
        return Collector(inherited.scope, inherited.lock_table)
    for module in share.modules:
        # The models sharing the audited one's tables register as they are imported; one that
        # cannot be imported here shows in the check below if the audit needed it.
        with contextlib.suppress(ImportError):
            importlib.import_module(module)
    model = _imported(share.model)
    context = context_of(model)
    collector = Collector(Scope(model), context.locks()) if context is not None else None
    if collector is None or _fingerprint(collector) != share.fingerprint:
        msg = (
            f"a worker process imported {share.model} with other tables or namespaces than the audit's "
            "(a Meta changed at run time, or models registered elsewhere): pass workers=1"
        )
        raise UniqueError(msg)
    return collector


def _start_worker(channel: Any) -> None:
    global _progress  # noqa: PLW0603 - one channel per worker process, set as it starts.
    _progress = channel


def _sort_share(share: _Share) -> Sorted:
    """In a worker: sort the share's items into its own database (closed when done); what it counted.

    The counts come back as a :class:`Sorted` without items, for the parent's ``Collector.merge``.
    """
    collector = _collector(share)
    collector.now = share.now  # The parent's clock: an expiry is judged as one audit judges it.
    join = _Join(share.folder, share.memory_limit, name=share.name, models=_ordered(collector))
    try:

        def add_page(items: Page, *, table: TableId | None, locks: bool) -> None:
            found = collector.sort(items, table=table, locks=locks)
            join.add(found)
            collector.merge(replace(found, locks=[], retired=[], records=[]))

        plans: list[Plan] = [(table, _Source(location), list(files)) for table, location, files in share.files]
        channel = _progress
        read_files(collector, plans, add_page, channel.put if channel is not None else None)
    finally:
        join.close()
    return Sorted(
        scanned=collector.scanned,
        strangers=set(collector.foreign_lock_names),
        held=collector.held,
        expired=collector.expired,
        reserved=collector.reserved,
        expired_reservations=list(collector.expired_reservations),
    )


def _split(plans: Sequence[Plan], workers: int) -> list[list[tuple[TableId, str, DataFile]]]:
    """The data files in at most ``workers`` shares of about as many items, the largest files placed first."""
    files = [(table, source.location, data) for table, source, found in plans for data in found]
    shares: list[list[tuple[TableId, str, DataFile]]] = [[] for _ in range(min(workers, len(files)))]
    sizes = [0] * len(shares)
    for entry in sorted(files, key=lambda f: -f[2].items):
        smallest = sizes.index(min(sizes))
        shares[smallest].append(entry)
        sizes[smallest] += entry[2].items
    return shares


def _grouped(share: list[tuple[TableId, str, DataFile]]) -> tuple[tuple[TableId, str, tuple[DataFile, ...]], ...]:
    """A share's files, grouped by table (the order is free: every item goes to the worker's database)."""
    tables: dict[tuple[TableId, str], list[DataFile]] = {}
    for table, location, data in share:
        tables.setdefault((table, location), []).append(data)
    return tuple((table, location, tuple(files)) for (table, location), files in tables.items())


def read_export_parallel(
    collector: Collector,
    export: ExportLocation | Mapping[str, ExportLocation],
    *,
    workers: int,
    memory_limit: str | None = None,
    temp_directory: str | os.PathLike[str] | None = None,
    progress: Callable[[int], None] | None = None,
) -> tuple[int, int]:
    """:func:`export.read_export` with the data files sorted by ``workers`` processes; (records, locks) read.

    Raises:
        UniqueError: as :func:`export.read_export`; a worker saw another model than the audited one.
    """
    plans = export_plans(collector, export)
    shares = _split(plans, workers)
    limit = memory_limit or DEFAULT_MEMORY_LIMIT
    scope = collector.scope
    modules = {m.__module__ for m in lock_sharers(scope.model)}
    modules.update(m.__module__ for group in scope.tables.values() for m in table_neighbours(group[0].root))
    if temp_directory is not None:
        Path(temp_directory).mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="pynamodb-unique-audit-", dir=temp_directory) as folder:
        names = [f"part{n}.duckdb" for n in range(len(shares))]
        job = next(_jobs)
        template = _Share(
            job=job,
            model=_qualified(scope.model),
            modules=tuple(sorted(modules)),
            fingerprint=_fingerprint(collector),
            now=collector.now,
            folder=folder,
            name="",
            memory_limit=limit,
            files=(),
        )
        context = multiprocessing.get_context(START_METHOD)
        channel = context.SimpleQueue() if progress is not None else None
        _inherited[job] = collector
        try:
            with ProcessPoolExecutor(
                max_workers=max(len(shares), 1), mp_context=context, initializer=_start_worker, initargs=(channel,)
            ) as pool:
                futures = [
                    pool.submit(_sort_share, replace(template, name=name, files=_grouped(share)))
                    for name, share in zip(names, shares, strict=True)
                ]
                _wait(futures, channel, progress)
                counts = [future.result() for future in futures]
        finally:
            del _inherited[job]
        for found in counts:
            collector.merge(found)
        parts = [os.path.join(folder, name) for name in names]
        # No part (an export without data files): the join's own empty tables.
        join = _Join(folder, limit, models=_ordered(collector), parts=parts)
        try:
            totals = join.counts()
            for unusual in join.unusual():
                collector.merge(unusual)
        finally:
            join.close()
        return totals


def _wait(futures: list[Future[Sorted]], channel: Any, progress: Callable[[int], None] | None) -> None:
    """Wait for the workers (the first failure ends the wait), passing their progress on."""
    pending: set[Future[Sorted]] = set(futures)
    while pending:
        done, pending = wait(pending, timeout=PROGRESS_SECONDS, return_when=FIRST_EXCEPTION)
        if channel is not None and progress is not None:
            while not channel.empty():
                progress(channel.get())
        if any(f.exception() is not None for f in done):
            return
