"""The audit of a DynamoDB export: items sorted by the live audit's code, joined by DuckDB in bounded memory.

An export to S3 (``ExportTableToPointInTime``, DynamoDB JSON format) is a folder holding
``manifest-summary.json``, ``manifest-files.json`` (one line per data file) and ``data/*.json.gz``
(one ``{"Item": {...}}`` per line), in S3 or copied to a local folder. Its items are read in
batches and sorted by :meth:`_audit.Collector.sort`, the live audit's own code (records read and
their lock keys computed by the library; locks, retired locks and other models' locks told
apart); what it finds is streamed to DuckDB, which groups the lock keys records hold and joins
them with the lock items, spilling to disk past its memory limit. Only what is not the usual case
(a value held by one record whose lock names it) comes back: it goes through
:meth:`_audit.Collector.merge` and :meth:`_audit.Collector.problems` as a scan's items would,
so the report is built by the same code as the live audit's.
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import pickle
import tempfile
import threading
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Final, Protocol
from urllib.parse import urlsplit

from .._model.registry import TableId, lock_table_id
from ..exceptions import UniqueError
from .collect import Collector, ExportLocation, RecordKey, Sorted, record_state
from .scan import Page

if TYPE_CHECKING:
    import duckdb

    from .._mixin import UniqueMixin

#: Items sorted and sent to DuckDB at a time: a few MB of Python objects.
BATCH: Final = 5_000
#: DuckDB's memory limit unless the caller sets one; the process stays well under 1 GiB with it.
DEFAULT_MEMORY_LIMIT: Final = "512MB"
#: The format of the exports read (``--export-format DYNAMODB_JSON``, the default).
DYNAMODB_JSON: Final = "DYNAMODB_JSON"
_BINARY: Final = (b'"B"', b'"BS"')


# Where an export lies: a local folder or an S3 prefix.


@dataclass(frozen=True)
class DataFile:
    """One data file of an export, as ``manifest-files.json`` lists it."""

    key: str
    items: int


class _Source:
    """An export's folder: its manifests and data files, local or in S3."""

    def __init__(self, location: ExportLocation) -> None:
        self.location = os.fspath(location)
        parts = urlsplit(self.location)
        self.s3 = parts.scheme == "s3"
        self.bucket = parts.netloc
        self.prefix = parts.path.strip("/")
        self.client: Any = None
        if self.s3:
            if not self.bucket:
                msg = f"export location {self.location!r}: expected s3://bucket/prefix/AWSDynamoDB/<export id>/"
                raise UniqueError(msg)
            try:
                import boto3  # noqa: PLC0415 - only an export in S3 needs it.
            except ImportError as exc:  # pragma: no cover - boto3 is in the export extra.
                msg = "reading an export from S3 needs boto3: pip install 'pynamodb-unique[export]'"
                raise UniqueError(msg) from exc
            self.client = boto3.client("s3")

    def _s3_key(self, name: str) -> str:
        return f"{self.prefix}/{name}" if self.prefix else name

    def open(self, name: str) -> IO[bytes]:
        """A file of the export, by its path inside the export's folder (``data/<name>.json.gz``), to read once."""
        try:
            if self.s3:
                body: IO[bytes] = self.client.get_object(Bucket=self.bucket, Key=self._s3_key(name))["Body"]
                return body
            return open(Path(self.location) / name, "rb")
        except Exception as exc:
            msg = f"cannot read {name} of the export at {self.location}: {exc}"
            raise UniqueError(msg) from exc

    def read_bytes(self, name: str) -> bytes:
        """A small file of the export (a manifest), whole."""
        with self.open(name) as stream:
            return stream.read()

    def data_name(self, key: str) -> str:
        """The path inside the export's folder of a data file named by its S3 key (``.../data/<name>.json.gz``)."""
        parent, _, name = key.rpartition("/")
        if parent.rpartition("/")[2] != "data" or not name:
            msg = f"manifest-files.json of the export at {self.location} names {key!r}, not a file of data/"
            raise UniqueError(msg)
        return f"data/{name}"

    def read_json(self, name: str) -> Any:
        try:
            return json.loads(self.read_bytes(name))
        except ValueError as exc:
            msg = f"{name} of the export at {self.location} is not JSON: {exc}"
            raise UniqueError(msg) from exc

    def data_files(self, table: str) -> list[DataFile]:
        """The data files of a full export of ``table`` in DynamoDB JSON format.

        Raises:
            UniqueError: no export there, an export of another table, in ION or incremental.
        """
        summary = self.read_json("manifest-summary.json")
        exported = str(summary.get("tableArn", "")).rpartition(":table/")[2].partition("/")[0]
        if exported and exported != table:
            msg = f"the export at {self.location} is of table {exported!r}, not {table!r}"
            raise UniqueError(msg)
        if summary.get("outputFormat", DYNAMODB_JSON) != DYNAMODB_JSON:
            msg = (
                f"the export at {self.location} is in {summary.get('outputFormat')} format; the audit reads "
                f"{DYNAMODB_JSON} (--export-format DYNAMODB_JSON)"
            )
            raise UniqueError(msg)
        if summary.get("exportType", "FULL_EXPORT") != "FULL_EXPORT":
            msg = f"the export at {self.location} is an {summary.get('exportType')}; the audit needs a full export"
            raise UniqueError(msg)
        files = []
        for line in self.read_bytes("manifest-files.json").splitlines():
            if line.strip():
                entry = json.loads(line)
                files.append(DataFile(self.data_name(entry["dataFileS3Key"]), int(entry["itemCount"])))
        return files

    def items(self, data: DataFile) -> Iterator[dict[str, Any]]:
        """The items of one data file, with binary values decoded as botocore decodes a scan's.

        Raises:
            UniqueError: the file holds another number of items than the manifest says.
        """
        count = 0
        try:
            with self.open(data.key) as raw, gzip.GzipFile(fileobj=raw) as unzipped:
                for line in unzipped:
                    if not line.strip():
                        continue
                    item: dict[str, Any] = json.loads(line)["Item"]
                    if _BINARY[0] in line or _BINARY[1] in line:
                        item = {name: _decoded(value) for name, value in item.items()}
                    count += 1
                    yield item
        except (OSError, EOFError, zlib.error, ValueError, KeyError, TypeError) as exc:
            # A truncated or corrupt download, or another format than gzip DynamoDB JSON lines.
            msg = f"{data.key} of the export at {self.location} cannot be read after {count} items: {exc!r}"
            raise UniqueError(msg) from exc
        if count != data.items:
            msg = f"{data.key} of the export at {self.location} holds {count} items, its manifest says {data.items}"
            raise UniqueError(msg)


def _decoded(value: dict[str, Any]) -> dict[str, Any]:
    """An attribute value of an export with its binary parts as bytes (exports keep them as base64 text)."""
    kind, inner = next(iter(value.items()))
    if kind == "B":
        return {"B": base64.b64decode(inner)}
    if kind == "BS":
        return {"BS": [base64.b64decode(v) for v in inner]}
    if kind == "M":
        return {"M": {k: _decoded(v) for k, v in inner.items()}}
    if kind == "L":
        return {"L": [_decoded(v) for v in inner]}
    return value


def _locations(
    export: ExportLocation | Mapping[str, ExportLocation], tables: list[TableId]
) -> dict[TableId, ExportLocation]:
    """Each table the audit reads, with its export's location.

    Raises:
        UniqueError: one location for several tables, or a mapping that misses or adds a table.
    """
    if not isinstance(export, Mapping):
        if len(tables) == 1:
            return {tables[0]: export}
        msg = (
            f"the audit reads the tables {[str(t) for t in tables]}: pass export= as a mapping of table name to export "
            "location (--from-export TABLE=LOCATION for each)"
        )
        raise UniqueError(msg)
    missing = [t for t in tables if str(t) not in export]
    extra = sorted(set(export) - {str(t) for t in tables})
    if missing or extra:
        msg = f"the audit reads the tables {[str(t) for t in tables]}; export= has {sorted(export)}"
        raise UniqueError(msg)
    return {t: export[str(t)] for t in tables}


# Record keys as DuckDB compares them: text two equal keys, and only they, share.

#: Joins the parts of a key of strings (the usual case); a part holding it makes the key JSON.
_SEPARATOR: Final = "\x1f"


def key_text(key: RecordKey | None) -> str | None:
    """A record key as text that two equal keys, and only they, share.

    Strings joined (``S`` first) when none holds the separator; else JSON, binary parts tagged.
    """
    if key is None:
        return None
    if all(isinstance(p, str) and _SEPARATOR not in p for p in key):
        return "S" + _SEPARATOR.join(key)
    return json.dumps([p if isinstance(p, str) else {"B": base64.b64encode(p).decode("ascii")} for p in key])


def key_of(text: str | None) -> RecordKey | None:
    """The record key :func:`key_text` gave ``text`` for."""
    return None if text is None else json_key(text)


def json_key(text: str) -> RecordKey:
    """The record key :func:`key_text` gave ``text`` for (never None)."""
    if text.startswith("S"):
        return tuple(text[1:].split(_SEPARATOR))
    return tuple(p if isinstance(p, str) else base64.b64decode(p["B"]) for p in json.loads(text))


# The join.

_SCHEMA: Final = """
CREATE TABLE locks (lock_key VARCHAR, owner VARCHAR, state VARCHAR, owner_model INTEGER);
CREATE TABLE retired (lock_key VARCHAR, owner VARCHAR, owner_model INTEGER);
CREATE TABLE records (key VARCHAR, model INTEGER, vals BLOB);
CREATE TABLE held (lock_key VARCHAR, holder VARCHAR, namespace VARCHAR, former BOOLEAN, state VARCHAR);
"""

# Lock keys that are not the usual case (exactly one record holds the value and its lock names
# that record, in the state the record says: no hold, the record's expiry): the collector
# decides what each of them is.
_CANDIDATES: Final = """
CREATE TEMP TABLE candidates AS
SELECT h.lock_key FROM (
    SELECT lock_key, count(DISTINCT holder) AS holders, any_value(holder) AS holder, any_value(state) AS state
    FROM held GROUP BY lock_key
) AS h
LEFT JOIN locks AS l ON l.lock_key = h.lock_key
WHERE h.holders > 1 OR l.lock_key IS NULL OR l.owner IS DISTINCT FROM h.holder OR l.state IS DISTINCT FROM h.state;

CREATE TEMP TABLE some_locks AS
SELECT lock_key, owner, state, owner_model FROM locks AS l
WHERE l.lock_key IN (SELECT lock_key FROM candidates)
   OR NOT EXISTS (SELECT 1 FROM held AS h WHERE h.lock_key = l.lock_key);

CREATE TEMP TABLE some_held AS
SELECT holder, namespace, lock_key, former FROM held WHERE lock_key IN (SELECT lock_key FROM candidates);

CREATE TEMP TABLE involved AS
SELECT holder AS key FROM some_held
UNION SELECT owner FROM some_locks WHERE owner IS NOT NULL
UNION SELECT owner FROM retired WHERE owner IS NOT NULL;
"""

_SOME_RECORDS: Final = """
SELECT r.key, r.model, r.vals, h.held FROM records AS r
JOIN involved AS i ON i.key = r.key
LEFT JOIN (
    SELECT holder, list((namespace, lock_key, former)) AS held FROM some_held GROUP BY holder
) AS h ON h.holder = r.key
"""


#: Rows for one table: (table, column types, one Python list per column).
_Insert = tuple[str, tuple[str, ...], list[list[Any]]]


_TABLES: Final = ("locks", "retired", "records", "held")


class _Join:
    """DuckDB tables of what the sorted items hold: locks, retired locks, records and the lock keys they hold.

    ``name`` is the database's file in ``folder``. With ``parts`` (databases other processes
    filled, closed), its tables are views of theirs, read together. ``models`` numbers the
    models in the ``model`` columns, as every part numbered them.
    """

    def __init__(
        self,
        folder: str,
        memory_limit: str,
        *,
        name: str = "audit.duckdb",
        models: Sequence[type[UniqueMixin]] = (),
        parts: Sequence[str] = (),
    ) -> None:
        try:
            import duckdb  # noqa: PLC0415 - the export extra; the live audit runs without it.
        except ImportError as exc:
            msg = "the audit of an export needs DuckDB: pip install 'pynamodb-unique[export]'"
            raise UniqueError(msg) from exc
        self.db: duckdb.DuckDBPyConnection = duckdb.connect(os.path.join(folder, name))
        self.db.execute(f"SET memory_limit = '{_setting(memory_limit)}'")
        self.db.execute(f"SET temp_directory = '{_setting(os.path.join(folder, name + '.spill'))}'")
        # Rows are grouped and joined, never read back in order: DuckDB may then stream them.
        self.db.execute("SET preserve_insertion_order = false")
        if parts:
            for n, part in enumerate(parts):
                self.db.execute(f"ATTACH '{_setting(part)}' AS part{n} (READ_ONLY)")
            for table in _TABLES:
                # Names of this module's own tables and attachments only: nothing from the caller.
                union = " UNION ALL ".join(f"SELECT * FROM part{n}.{table}" for n in range(len(parts)))  # noqa: S608
                self.db.execute(f"CREATE VIEW {table} AS {union}")
        else:
            self.db.execute(_SCHEMA)
        self.models: dict[type[UniqueMixin], int] = {model: n for n, model in enumerate(models)}
        self.writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="uniq-export-insert")
        self.pending: Future[None] | None = None

    def _insert(self, inserts: list[_Insert]) -> None:
        """Append rows to tables: (table, column types, one Python list per column), one statement each."""
        for table, types, columns in inserts:
            if columns[0]:
                unnest = ", ".join(f"unnest(${n + 1}::{t}[])" for n, t in enumerate(types))
                self.db.execute(f"INSERT INTO {table} SELECT {unnest}", columns)

    def add(self, found: Sorted) -> None:
        """Stream what :meth:`Collector.sort` found in one batch of items.

        The rows are inserted on the writer thread while the next batch is read and sorted
        (DuckDB releases the GIL); at most one batch waits, so memory stays bounded.
        """
        lock_rows, retired = found.locks, found.retired
        inserts: list[_Insert] = [
            (
                "locks",
                ("VARCHAR", "VARCHAR", "VARCHAR", "INTEGER"),
                [
                    [k for k, _, _ in lock_rows],
                    [key_text(o) for _, o, _ in lock_rows],
                    [s for _, _, s in lock_rows],
                    [self._owner_model(found, k) for k, _, _ in lock_rows],
                ],
            ),
            (
                "retired",
                ("VARCHAR", "VARCHAR", "INTEGER"),
                [
                    [k for k, _ in retired],
                    [key_text(o) for _, o in retired],
                    [self._owner_model(found, k) for k, _ in retired],
                ],
            ),
        ]
        keys: list[Any] = []
        models: list[Any] = []
        values: list[Any] = []
        held: list[list[Any]] = [[], [], [], [], []]
        for key, model, vals, locks in found.records:
            text = key_text(key)
            keys.append(text)
            models.append(self._index(model))
            values.append(pickle.dumps(vals, protocol=pickle.HIGHEST_PROTOCOL))
            # The state its locks should have, compared in the join with what they have.
            state = record_state(model, vals)
            for namespace, lock_key, former in locks:
                for column, value in zip(held, (lock_key, text, namespace, former, state), strict=True):
                    column.append(value)
        inserts.append(("records", ("VARCHAR", "INTEGER", "BLOB"), [keys, models, values]))
        inserts.append(("held", ("VARCHAR", "VARCHAR", "VARCHAR", "BOOLEAN", "VARCHAR"), held))
        self.flush()
        self.pending = self.writer.submit(self._insert, inserts)

    def _index(self, model: type[UniqueMixin]) -> int:
        """A model's number in ``records.model`` and the locks' ``owner_model`` columns."""
        return self.models.setdefault(model, len(self.models))

    def _owner_model(self, found: Sorted, lock_key: str) -> int | None:
        """The number of a lock's owner model (:attr:`Sorted.owner_models`), None when it is the audited one."""
        model = found.owner_models.get(lock_key)
        return None if model is None else self._index(model)

    def flush(self) -> None:
        """Wait for the rows being inserted (and raise what inserting them raised)."""
        if self.pending is not None:
            pending, self.pending = self.pending, None
            pending.result()

    def counts(self) -> tuple[int, int]:
        """(records, locks) read, each counted once."""
        self.flush()
        records = self.db.execute("SELECT count(DISTINCT key) FROM records").fetchone()
        locks = self.db.execute("SELECT count(DISTINCT lock_key) FROM locks").fetchone()
        return (records[0] if records else 0, locks[0] if locks else 0)

    def unusual(self) -> Iterator[Sorted]:
        """What is not the usual case, as :meth:`Collector.merge` takes it, in batches.

        The locks of the lock keys not in the usual case and the locks no record holds, every
        retired lock, and each record involved (holding one of those keys, or owning one of
        those locks) with the held locks among them.
        """
        self.db.execute(_CANDIDATES)
        models = {index: model for model, index in self.models.items()}
        cursor = self.db.execute("SELECT * FROM some_locks")
        while rows := cursor.fetchmany(BATCH):
            found = Sorted()
            found.locks.extend((lock_key, key_of(owner), state) for lock_key, owner, state, _ in rows)
            found.owner_models.update((lock_key, models[model]) for lock_key, _, _, model in rows if model is not None)
            yield found
        cursor = self.db.execute("SELECT * FROM retired")
        while rows := cursor.fetchmany(BATCH):
            found = Sorted()
            found.retired.extend((lock_key, key_of(owner)) for lock_key, owner, _ in rows)
            found.owner_models.update((lock_key, models[model]) for lock_key, _, model in rows if model is not None)
            yield found
        cursor = self.db.execute(_SOME_RECORDS)
        while rows := cursor.fetchmany(BATCH):
            found = Sorted()
            for text, model, vals, held in rows:
                key = json_key(text)
                # Values pickled by this process into its own temporary database.
                values = pickle.loads(vals)  # noqa: S301 - see above.
                locks = [(namespace, lock_key, former) for namespace, lock_key, former in held or ()]
                found.records.append((key, models[model], values, locks))
            yield found

    def close(self) -> None:
        try:
            self.flush()
        finally:
            self.writer.shutdown()
            self.db.close()


def _setting(value: str) -> str:
    """A value for a DuckDB SET statement (quotes doubled)."""
    return value.replace("'", "''")


class Joined:
    """An audit's items joined in DuckDB: pages sorted by the collector go in, the unusual cases come back.

    A context manager: DuckDB's database and spill files live in a temporary folder (inside
    ``temp_directory`` when given) removed on exit. :meth:`add_page` may be called from several
    threads (a parallel scan's segments); :meth:`finish` merges into the collector what is not
    the usual case, once every item is in.
    """

    def __init__(
        self,
        collector: Collector,
        *,
        memory_limit: str | None = None,
        temp_directory: str | os.PathLike[str] | None = None,
    ) -> None:
        self.collector = collector
        self.memory_limit = memory_limit or DEFAULT_MEMORY_LIMIT
        self.temp_directory = temp_directory
        self.mutex = threading.Lock()
        self.stack = ExitStack()

    def __enter__(self) -> Joined:
        if self.temp_directory is not None:
            Path(self.temp_directory).mkdir(parents=True, exist_ok=True)
        with ExitStack() as stack:
            folder = stack.enter_context(
                tempfile.TemporaryDirectory(prefix="pynamodb-unique-audit-", dir=self.temp_directory)
            )
            self.join = _Join(folder, self.memory_limit)
            stack.callback(self.join.close)
            self.stack = stack.pop_all()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stack.close()

    def add_page(self, items: Page, *, table: TableId | None, locks: bool) -> None:
        """Sort one page (or batch) of items as the live audit does, and stream what it holds to DuckDB."""
        found = self.collector.sort(items, table=table, locks=locks)
        with self.mutex:
            self.join.add(found)
        # The counts and other models' lock names go to the collector; the rows went to DuckDB.
        self.collector.merge(replace(found, locks=[], retired=[], records=[]))

    def finish(self) -> tuple[int, int]:
        """Merge what is not the usual case into the collector; (records, locks) read."""
        with self.mutex:
            counts = self.join.counts()
            for found in self.join.unusual():
                self.collector.merge(found)
        return counts


class AddPage(Protocol):
    """Takes one batch of items of a records ``table`` and/or of the lock table (``locks``)."""

    def __call__(self, items: Page, *, table: TableId | None, locks: bool) -> None: ...


#: What an export audit reads: each table, its export, its data files.
Plan = tuple[TableId, "_Source", list[DataFile]]


def export_plans(collector: Collector, export: ExportLocation | Mapping[str, ExportLocation]) -> list[Plan]:
    """The tables an audit reads, each with its export and that export's data files (from its manifests).

    Raises:
        UniqueError: an export is missing, of another table or not a full export in DynamoDB JSON format.
    """
    scope = collector.scope
    lock_id = lock_table_id(scope.model)
    tables: list[TableId] = list(scope.tables)
    if lock_id not in scope.tables:
        tables.append(lock_id)
    sources = {table: _Source(location) for table, location in _locations(export, tables).items()}
    return [(table, source, source.data_files(str(table))) for table, source in sources.items()]


def read_files(
    collector: Collector,
    plans: Sequence[Plan],
    add_page: AddPage,
    progress: Callable[[int], None] | None,
) -> None:
    """Read the data files of ``plans`` in batches of :data:`BATCH` items, each given to ``add_page``."""
    scope = collector.scope
    lock_id = lock_table_id(scope.model)
    for table, source, files in plans:
        records_table = table if table in scope.tables else None
        batch: Page = []
        for data in files:
            for item in source.items(data):
                batch.append(item)
                if len(batch) >= BATCH:
                    add_page(batch, table=records_table, locks=table == lock_id)
                    if progress is not None:
                        progress(len(batch))
                    batch = []
        if batch:
            add_page(batch, table=records_table, locks=table == lock_id)
            if progress is not None:
                progress(len(batch))


def read_export(
    collector: Collector,
    export: ExportLocation | Mapping[str, ExportLocation],
    *,
    memory_limit: str | None = None,
    temp_directory: str | os.PathLike[str] | None = None,
    progress: Callable[[int], None] | None = None,
) -> tuple[int, int]:
    """Read the exports of the tables an audit reads into ``collector``; (records, locks) read.

    Every item is sorted by ``collector``; DuckDB keeps what they hold, and only the lock keys
    and records of possible problems are merged into ``collector``, whose ``problems()`` then
    gives the report's.

    Raises:
        UniqueError: DuckDB is not installed; an export is missing, incomplete, of another table
            or not a full export in DynamoDB JSON format; an item cannot be read as a record.
    """
    plans = export_plans(collector, export)
    with Joined(collector, memory_limit=memory_limit, temp_directory=temp_directory) as joined:
        read_files(collector, plans, joined.add_page, progress)
        return joined.finish()
