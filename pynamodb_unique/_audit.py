"""Audit: one scan that compares a model's lock items with the unique values its records hold.

Memory: until the scan ends the audit keeps one entry per record (its key and unique values),
one per live value (lock key -> holder) and one per lock (lock key -> owner). Measured with
``benchmarks/scan_throughput.py``: 2-3.5 KB per record with two live values, so about 2-4 GB
per million records. Past what one machine holds, audit a copy of the table in parts.
"""

from __future__ import annotations

import base64
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any, ClassVar

from ._constraint import OWNER_HASH
from ._keys import LOCK_PREFIX
from ._locks import LockTable, lock_owner
from ._requests import owner_key
from ._scan import Page, scan_pages
from .exceptions import UniqueConfigError, UniqueError

if TYPE_CHECKING:
    from ._mixin import UniqueMixin
    from ._plan import Planner

#: A record's key as lock items store it, serialized: ``(hash,)`` or ``(hash, range)``.
RecordKey = tuple[Any, ...]
#: Unique values of one record as the audit read them (Python attribute name -> value).
Audited = Mapping[str, Any]


def jsonable(value: Any) -> Any:
    """A value as a plain JSON type: bytes as base64 text, numbers as int or float, sets as lists."""
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, (set, frozenset)):
        return sorted(jsonable(v) for v in value)
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    return value


def show_key(key: RecordKey) -> str:
    """A record key for people: its parts joined by ``/``."""
    return "/".join(str(jsonable(part)) for part in key)


def constraint_name(lock_key: str) -> str:
    """The constraint name in a lock key (names never contain ``#``, so it ends at the next one)."""
    return lock_key[len(LOCK_PREFIX) :].partition("#")[0]


@dataclass(frozen=True)
class Problem:
    """Something wrong with one value's lock; the base of the four problem types.

    Attributes:
        constraint: the constraint's name (``EMAIL``).
        lock_key: the value's lock key (``UNIQ#EMAIL#ada@lovelace.io``).
        values: the constraint's values as a record holds them; None for an orphaned lock
            (lock keys are never decoded: hashed and digest keys cannot be).
        owner: the record key the lock item names, serialized; None without a lock or when
            the lock names no owner.
        holders: the keys of the records holding the value.
        audited: each involved record's unique values as the audit read them (None: the
            record does not exist); repair's conditions check that they are unchanged.
    """

    kind: ClassVar[str] = "problem"
    fixable: ClassVar[bool] = False

    constraint: str
    lock_key: str
    values: tuple[Any, ...] | None
    owner: RecordKey | None
    holders: tuple[RecordKey, ...]
    audited: Mapping[RecordKey, Audited | None] = field(default_factory=dict, repr=False, compare=False)

    def describe(self) -> str:
        """One line for a person."""
        return f"{self.kind} {self.lock_key}"

    def to_json(self) -> dict[str, Any]:
        """The problem as plain JSON types."""
        return {
            "kind": self.kind,
            "constraint": self.constraint,
            "values": None if self.values is None else [jsonable(v) for v in self.values],
            "lock_key": self.lock_key,
            "owner": None if self.owner is None else [jsonable(p) for p in self.owner],
            "holders": [[jsonable(p) for p in holder] for holder in self.holders],
        }


@dataclass(frozen=True)
class OrphanedLock(Problem):
    """A lock whose owner is gone or no longer holds its value: the value is blocked for everyone."""

    kind: ClassVar[str] = "orphaned"
    fixable: ClassVar[bool] = True

    def describe(self) -> str:
        """One line for a person."""
        if self.owner is None:
            return f"orphaned lock {self.lock_key}: names no owner and no record holds the value"
        state = "is missing" if self.audited.get(self.owner) is None else "holds another value"
        return f"orphaned lock {self.lock_key}: owner {show_key(self.owner)} {state}"


@dataclass(frozen=True)
class MissingLock(Problem):
    """A record holds a value that has no lock: another record could take it."""

    kind: ClassVar[str] = "missing"
    fixable: ClassVar[bool] = True

    def describe(self) -> str:
        """One line for a person."""
        return f"missing lock {self.lock_key}: held by {show_key(self.holders[0])}"


@dataclass(frozen=True)
class ForeignLock(Problem):
    """The value's lock names another record than the one holding the value."""

    kind: ClassVar[str] = "foreign"
    fixable: ClassVar[bool] = True

    def describe(self) -> str:
        """One line for a person."""
        owner = "no owner" if self.owner is None else show_key(self.owner)
        return f"foreign lock {self.lock_key}: owned by {owner}, held by {show_key(self.holders[0])}"


@dataclass(frozen=True)
class DuplicateValue(Problem):
    """Several records hold the same normalized value; a person decides who keeps it."""

    kind: ClassVar[str] = "duplicate"

    def describe(self) -> str:
        """One line for a person."""
        holders = ", ".join(show_key(h) for h in self.holders)
        lock = "no lock" if self.owner is None else f"lock owned by {show_key(self.owner)}"
        return f"duplicate value {self.lock_key}: held by {holders}; {lock}"


PROBLEM_TYPES: tuple[type[Problem], ...] = (OrphanedLock, MissingLock, ForeignLock, DuplicateValue)


@dataclass(frozen=True)
class AuditReport:
    """What one audit found.

    Attributes:
        model: the model's class name.
        table: the model's table.
        lock_table: the table holding its locks (the same one unless ``Meta.unique_lock_table``).
        constraints: the model's constraint names, in declaration order.
        scanned: items read, in both tables.
        records: records of the model read.
        locks: lock items of the model's constraints read.
        problems: every problem, by constraint, kind and lock key.
    """

    model: str
    table: str
    lock_table: str
    constraints: tuple[str, ...]
    scanned: int
    records: int
    locks: int
    problems: tuple[Problem, ...]

    @property
    def clean(self) -> bool:
        """Whether the audit found nothing wrong."""
        return not self.problems

    def count(self, constraint: str, kind: type[Problem]) -> int:
        """How many problems of one kind a constraint has."""
        return sum(1 for p in self.problems if p.constraint == constraint and isinstance(p, kind))

    def to_json(self) -> dict[str, Any]:
        """The report as plain JSON types: the counts and only the problems."""
        return {
            "model": self.model,
            "table": self.table,
            "lock_table": self.lock_table,
            "scanned": self.scanned,
            "records": self.records,
            "locks": self.locks,
            "problems": [p.to_json() for p in self.problems],
        }


def unique_planner(model: type[UniqueMixin]) -> Planner:
    """The planner of a unique model.

    Raises:
        UniqueConfigError: ``model`` is not a ``UniqueMixin`` model with unique constraints.
    """
    planner: Planner | None = getattr(model, "_uniq_planner", None)
    if planner is None or not planner.constraints:
        msg = f"{getattr(model, '__name__', model)!r} is not a UniqueMixin model with unique constraints"
        raise UniqueConfigError(msg)
    return planner


class _Collector:
    """Sorts scanned items into records and locks; thread-safe (one merge per page)."""

    def __init__(self, model: type[UniqueMixin], planner: Planner, locks: LockTable) -> None:
        self.model = model
        self.planner = planner
        self.lock_table = locks
        self.by_name = {c.name: c for c in planner.constraints}
        self.mutex = threading.Lock()
        self.scanned = 0
        # Bounded by the table: one entry per record, per live value and per lock.
        self.records: dict[RecordKey, tuple[Any, ...]] = {}
        self.holders: dict[str, RecordKey] = {}
        self.more_holders: dict[str, list[RecordKey]] = {}
        self.locks: dict[str, RecordKey | None] = {}

    def _lock_entry(self, item: dict[str, Any]) -> tuple[str, RecordKey | None] | None:
        """(lock key, owner) when ``item`` is a lock of the model's constraints."""
        locks = self.lock_table
        lock_key = item.get(locks.hash_name, {}).get("S")
        if not isinstance(lock_key, str) or not lock_key.startswith(LOCK_PREFIX):
            return None
        if constraint_name(lock_key) not in self.by_name:
            return None  # Another model's lock.
        if locks.range_name is not None and item.get(locks.range_name, {}).get("S") != locks.range_value:
            return None
        return lock_key, lock_owner(item)

    def _record_entry(self, item: dict[str, Any]) -> tuple[RecordKey, tuple[Any, ...], dict[str, str | None]]:
        """(key, unique values, lock keys) of a record, as the library itself computes them."""
        try:
            instance = self.model.from_raw_data(item)
            values = instance._uniq_values()  # noqa: SLF001 - the core's reading of a record.
            return owner_key(instance), tuple(values.values()), instance._uniq_lock_keys()  # noqa: SLF001
        except Exception as exc:
            meta = self.model._get_connection().get_meta_table()  # noqa: SLF001 - the model's table schema.
            key = {name: item.get(name) for name in (meta.hash_keyname, meta.range_keyname) if name}
            msg = f"{self.model.__name__}: cannot read the item {key} as a record: {exc}"
            raise UniqueError(msg) from exc

    def add_page(self, items: Page, *, records: bool, locks: bool) -> None:
        """Sort one page of the model's table (``records``) and/or its lock table (``locks``)."""
        found_locks = []
        found_records = []
        for item in items:
            # In a shared table an item is a lock if it names an owner or has a lock key; in a
            # separate lock table every item is a candidate; a record never names an owner.
            hash_value = item.get(self.lock_table.hash_name, {}).get("S")
            lock_like = OWNER_HASH in item or (
                locks and isinstance(hash_value, str) and hash_value.startswith(LOCK_PREFIX)
            )
            if records and not lock_like:
                found_records.append(self._record_entry(item))
            elif locks and (entry := self._lock_entry(item)) is not None:
                found_locks.append(entry)
        with self.mutex:
            self.scanned += len(items)
            self.locks.update(found_locks)
            for key, values, lock_keys in found_records:
                self.records[key] = values
                for lock_key in lock_keys.values():
                    if lock_key is not None and self.holders.setdefault(lock_key, key) != key:
                        self.more_holders.setdefault(lock_key, []).append(key)

    def _audited(self, key: RecordKey) -> Audited | None:
        values = self.records.get(key)
        return None if values is None else dict(zip(self.planner.unique_names, values, strict=True))

    def problems(self) -> list[Problem]:
        """Compare live values with locks, once the scan is complete."""
        found: list[Problem] = []
        for lock_key, holder in self.holders.items():
            constraint = self.by_name[constraint_name(lock_key)]
            holders = tuple(sorted((holder, *self.more_holders.get(lock_key, ()))))
            owner = self.locks.get(lock_key)
            involved = holders if owner is None else (*holders, owner)
            audited = {key: self._audited(key) for key in involved}
            values = constraint.values(audited[holders[0]] or {})
            args = (constraint.name, lock_key, values, owner, holders, audited)
            if len(holders) > 1:
                found.append(DuplicateValue(*args))
            elif lock_key not in self.locks:
                found.append(MissingLock(*args))
            elif owner != holder:
                found.append(ForeignLock(*args))
        for lock_key, owner in self.locks.items():
            if lock_key not in self.holders:
                audited = {} if owner is None else {owner: self._audited(owner)}
                found.append(OrphanedLock(constraint_name(lock_key), lock_key, None, owner, (), audited))
        order = {name: i for i, name in enumerate(self.by_name)}
        kinds = {kind.kind: i for i, kind in enumerate(PROBLEM_TYPES)}
        found.sort(key=lambda p: (order[p.constraint], kinds[p.kind], p.lock_key))
        return found


def audit(
    model: type[UniqueMixin],
    *,
    segments: int = 1,
    max_rate: float | None = None,
    progress: Callable[[int], None] | None = None,
) -> AuditReport:
    """Scan a model's table (and its lock table) once and report every lock problem.

    Only locks of the model's own constraints count; other items sharing the tables are
    ignored. Reads are strongly consistent, but a scan is not a snapshot: on a table being
    written, a change made during the scan can show as a problem that is already gone.
    Repair's conditions make acting on such a report safe.

    Args:
        model: a ``UniqueMixin`` model; its Meta gives table, region and host.
        segments: parallel scan segments (threads).
        max_rate: a cap on read capacity units consumed per second.
        progress: called with the number of items of each page read.

    Raises:
        UniqueConfigError: ``model`` has no unique constraints.
        UniqueError: an item of the table cannot be read as a record of ``model``.
        pynamodb.exceptions.ScanError: DynamoDB refused the scan (missing table, no access).
    """
    planner = unique_planner(model)
    locks = model._uniq_locks()  # noqa: SLF001 - where the core keeps the model's locks.
    collector = _Collector(model, planner, locks)

    def reader(*, records: bool, locks: bool) -> Callable[[Page], None]:
        def on_page(items: Page) -> None:
            collector.add_page(items, records=records, locks=locks)
            if progress is not None:
                progress(len(items))

        return on_page

    table = model._get_connection()  # noqa: SLF001 - the model's own connection.
    scan_pages(table, reader(records=True, locks=locks.shared), segments=segments, max_rate=max_rate)
    if not locks.shared:
        scan_pages(locks.connection, reader(records=False, locks=True), segments=segments, max_rate=max_rate)
    return AuditReport(
        model=model.__name__,
        table=table.table_name,
        lock_table=locks.table_name,
        constraints=tuple(collector.by_name),
        scanned=collector.scanned,
        records=len(collector.records),
        locks=len(collector.locks),
        problems=tuple(collector.problems()),
    )
