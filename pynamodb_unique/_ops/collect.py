"""The audit's findings and the collector that sorts scanned or exported items into them.

Memory: until the scan ends the collector keeps one entry per record (its key and unique values),
one per live value (lock key -> holder) and one per lock (lock key -> owner). Measured with
``benchmarks/scan_throughput.py`` (tracemalloc): about 4.5 KB per record with two live values,
so about 4.5 GB per million records. Past what one machine holds, audit a DynamoDB export or
pass ``engine="duckdb"``: the same sorting of items (:meth:`Collector.sort`), joined by DuckDB
in bounded memory (``export.py``).
"""

from __future__ import annotations

import base64
import os
import threading
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any, ClassVar, Final

from .._core.keys import LOCK_PREFIX
from .._core.lockitem import is_held, lock_owner, lock_owner_model, lock_reservation
from .._model.context import context_of
from .._model.filters import matches
from .._model.locks import LockTable, is_lock_item, lock_expiry, ttl_attribute
from .._model.registry import (
    TableId,
    check_twins,
    constraints_of,
    declaring,
    discriminator,
    family,
    item_filter,
    planner_of,
    same_model,
    stored_class,
    table_id,
    table_neighbours,
)
from .._model.seam import connection
from ..exceptions import UniqueConfigError, UniqueError
from .scan import Page

if TYPE_CHECKING:
    from .._core.constraint import Constraint
    from .._core.plan import Planner
    from .._mixin import UniqueMixin

_NO_LOCK: Any = object()

#: Where an export lies: its folder, or its ``s3://bucket/prefix/AWSDynamoDB/<export id>/`` URL.
ExportLocation = str | os.PathLike[str]

#: A record's key as lock items store it, serialized: ``(hash,)`` or ``(hash, range)``.
RecordKey = tuple[Any, ...]
#: Unique values of one record as the audit read them (Python attribute name -> value).
Audited = Mapping[str, Any]


def jsonable(value: Any) -> Any:
    """A value as a plain JSON type: bytes as base64 text, numbers as int or float, sets as lists, times in ISO 8601."""
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
    return value.isoformat() if isinstance(value, datetime) else value


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
        models: the model class of each involved record that exists; for an owner that is no
            live record (gone, or expired), the model its lock records, when it is one of the
            models declaring the namespace.
        former: the value is held under a constraint's former form only (a migration in
            progress: ``Former``), not under its current form.
    """

    kind: ClassVar[str] = "problem"
    fixable: ClassVar[bool] = False

    constraint: str
    lock_key: str
    values: tuple[Any, ...] | None
    owner: RecordKey | None
    holders: tuple[RecordKey, ...]
    audited: Mapping[RecordKey, Audited | None] = field(default_factory=dict, repr=False, compare=False)
    models: Mapping[RecordKey, Any] = field(default_factory=dict, repr=False, compare=False)
    former: bool = False

    @property
    def _lock(self) -> str:
        """The lock key, marked when it is of a former form."""
        return f"{self.lock_key} (former form)" if self.former else self.lock_key

    def describe(self) -> str:
        """One line for a person."""
        return f"{self.kind} {self._lock}"

    def to_json(self) -> dict[str, Any]:
        """The problem as plain JSON types."""
        return {
            "kind": self.kind,
            "constraint": self.constraint,
            "values": None if self.values is None else [jsonable(v) for v in self.values],
            "lock_key": self.lock_key,
            "owner": None if self.owner is None else [jsonable(p) for p in self.owner],
            "holders": [[jsonable(p) for p in holder] for holder in self.holders],
            "former": self.former,
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
        return f"missing lock {self._lock}: held by {show_key(self.holders[0])}"


@dataclass(frozen=True)
class ForeignLock(Problem):
    """The value's lock names another record than the one holding the value."""

    kind: ClassVar[str] = "foreign"
    fixable: ClassVar[bool] = True

    def describe(self) -> str:
        """One line for a person."""
        owner = "no owner" if self.owner is None else show_key(self.owner)
        return f"foreign lock {self._lock}: owned by {owner}, held by {show_key(self.holders[0])}"


@dataclass(frozen=True)
class DuplicateValue(Problem):
    """Several records hold the same normalized value; a person decides who keeps it."""

    kind: ClassVar[str] = "duplicate"

    def describe(self) -> str:
        """One line for a person."""
        holders = ", ".join(show_key(h) for h in self.holders)
        lock = "no lock" if self.owner is None else f"lock owned by {show_key(self.owner)}"
        return f"duplicate value {self._lock}: held by {holders}; {lock}"


@dataclass(frozen=True)
class RetiredLock(Problem):
    """A lock of a constraint name the model no longer declares, owned by one of its records.

    What a rename leaves once its ``Former(name=...)`` is removed (or a constraint dropped):
    the lock protects nothing. Told apart from another model's locks by the owner model each
    lock records (``uniq_owner_model``), so no ``unique_item_filter`` is needed for it.
    """

    kind: ClassVar[str] = "retired"
    fixable: ClassVar[bool] = True

    def describe(self) -> str:
        """One line for a person."""
        owner = "no owner" if self.owner is None else f"owner {show_key(self.owner)}"
        return f"retired lock {self.lock_key}: {self.constraint} is no longer declared ({owner})"


@dataclass(frozen=True)
class StaleLock(Problem):
    """A record's own lock that does not protect it as its record says.

    It is a release hold (``hold=``) that will expire under a live record, restored behind the
    library's back; or its expiry is not its record's ``TTLAttribute`` (written before the model
    had one, or moved by a writer that bypassed the library), so TTL would delete it too early
    or leave it behind.
    """

    kind: ClassVar[str] = "stale"
    fixable: ClassVar[bool] = True

    def describe(self) -> str:
        """One line for a person."""
        return f"stale lock {self._lock}: {show_key(self.holders[0])}'s own lock, a hold or not carrying its expiry"


PROBLEM_TYPES: tuple[type[Problem], ...] = (
    OrphanedLock,
    MissingLock,
    ForeignLock,
    DuplicateValue,
    RetiredLock,
    StaleLock,
)

#: The order of an audit's problems: what needs a person first, then by the harm left unfixed.
#: A duplicate is never fixed by a tool; a foreign lock protects the wrong record (often a writer
#: bypassing the library); an orphaned lock blocks a free value for everyone; a missing lock lets
#: another record take a value (many at once after adding a constraint: backfill's work); a stale
#: lock expires too early or too late; a retired lock is clutter.
ATTENTION: tuple[type[Problem], ...] = (
    DuplicateValue,
    ForeignLock,
    OrphanedLock,
    MissingLock,
    StaleLock,
    RetiredLock,
)


@dataclass(frozen=True)
class AuditReport:
    """What one audit found.

    Attributes:
        model: the model's class name.
        table: the model's table.
        lock_table: the table holding its locks (the same one unless ``Meta.unique_lock_table``).
        constraints: the namespaces audited: the model's constraint names in declaration order,
            then the names of former forms still declared, then retired names found.
        scanned: items read, in both tables.
        records: records of the model read.
        locks: lock items of the model's constraints read.
        problems: every problem, by kind as :data:`ATTENTION` orders them (what needs a person
            first), then constraint (in ``constraints`` order), then lock key.
        held: release holds not yet ended (``hold=``): valid, counted apart from ``locks``.
        expired: locks and holds whose expiry passed (an expired record's, an ended hold or
            reservation): removable, and any record may take their values; DynamoDB's TTL deletes
            them. Not problems: an expired record counts as gone, so its locks are not orphans.
        reserved: reservations not yet ended (``Model.reserve()``): valid with no record, counted
            apart from ``locks`` as holds are.
        expired_reservations: the lock keys of reservations that ended (among ``expired``), which
            ``repair(..., expired_reservations=True)`` deletes.
    """

    model: str
    table: str
    lock_table: str
    constraints: tuple[str, ...]
    scanned: int
    records: int
    locks: int
    problems: tuple[Problem, ...]
    held: int = 0
    expired: int = 0
    reserved: int = 0
    expired_reservations: tuple[tuple[str, str], ...] = field(default=(), repr=False)

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
            "held": self.held,
            "reserved": self.reserved,
            "expired": self.expired,
            "problems": [p.to_json() for p in self.problems],
        }


#: The state of a lock that is a release hold.
HELD_STATE: Final = "held"
#: The state of a lock that is a reservation (it names no owner record).
RESERVED_STATE: Final = "reserved"
#: The states of a lock that is valid with no record holding its value, until it ends.
UNHELD_STATES: Final = frozenset({HELD_STATE, RESERVED_STATE})


def lock_state(locks: LockTable, item: Mapping[str, Any]) -> str:
    """What a lock item says besides its owner: ``held``, ``reserved``, its expiry (epoch seconds), or ``""``."""
    if is_held(item):
        return HELD_STATE
    if lock_reservation(item) is not None:
        return RESERVED_STATE
    expiry = locks.expiry(item)
    return "" if expiry is None else str(expiry)


def record_expired(model: type[Any], item: Mapping[str, Any] | None, now: float) -> bool:
    """Whether a stored record's ``TTLAttribute`` (its class ``model``'s) is before ``now``.

    Such a record is gone, as the audit judges it, whatever TTL's lag in deleting it.
    """
    return _expired(item, ttl_attribute(model), now)


def _expired(item: Mapping[str, Any] | None, name: str | None, now: float) -> bool:
    expiry = lock_expiry(item, name) if name is not None else None
    return expiry is not None and expiry < now


def record_state(model: type[UniqueMixin], values: tuple[Any, ...]) -> str:
    """The state a record's locks should have (:func:`lock_state`): its expiry, or ``""``.

    ``values`` are the record's unique values as the audit read them (``planner.unique_names``).
    """
    planner = planner_of(model)
    if planner is None or planner.ttl is None:
        return ""
    # The expiry as the record's lock items carry it: {"N": epoch seconds}.
    expires = planner.expires(dict(zip(planner.unique_names, values, strict=True)))
    return "" if expires is None else str(expires["N"])


def unique_planner(model: type[UniqueMixin]) -> Planner:
    """The planner of a unique model.

    Raises:
        UniqueConfigError: ``model`` is not a ``UniqueMixin`` model with unique constraints.
    """
    planner = planner_of(model)
    if planner is None or not planner.constraints:
        msg = f"{getattr(model, '__name__', model)!r} is not a UniqueMixin model with unique constraints"
        raise UniqueConfigError(msg)
    return planner


@dataclass(frozen=True)
class _Group:
    """Models whose records one scanned table holds, told apart by a filter or a discriminator.

    Attributes:
        root: the group's most general model.
        members: the audited models of the group.
        condition: the root's ``unique_item_filter`` condition, or None.
        polymorphic: whether the group is a discriminator family.
        untagged: whether items without a stored class are the root's records (a polymorphic
            root that stores no discriminator value, or any plain model).
    """

    root: type[UniqueMixin]
    members: tuple[type[UniqueMixin], ...]
    condition: Any
    polymorphic: bool
    untagged: bool

    @property
    def catch_all(self) -> bool:
        """Whether, without a filter, the group would take any untagged item of its table."""
        return self.condition is None and self.untagged

    def owns(self, model: type[Any]) -> bool:
        """Whether ``model`` belongs to this group (a family member, or the root itself)."""
        return model is self.root or (self.polymorphic and discriminator(model) is discriminator(self.root))

    def owner(self, item: Mapping[str, Any]) -> tuple[bool, type[UniqueMixin] | None]:
        """(whether the item is this group's, its class among the members or None)."""
        if self.condition is not None and not matches(self.condition, item):
            return False, None
        if not self.polymorphic:
            return True, self.root
        if not item.get(discriminator(self.root).attr_name):
            return self.untagged, (self.root if self.untagged and self.root in self.members else None)
        try:
            stored = stored_class(self.root, item)
        except ValueError:
            return False, None  # A class another family (sharing the table) stores.
        return True, stored if stored in self.members else None


class Scope:
    """What one audit reads: the namespaces of a model and every registered model sharing them."""

    def __init__(self, model: type[UniqueMixin]) -> None:
        self.model = model
        audited = [m for m in family(model) if issubclass(m, model)] or [model]
        ordered = [c for m in audited for c in constraints_of(m)]
        # Former forms' namespaces (a migration in progress) are audited as the constraints' own.
        formers = [c.former.name for c in ordered if c.former is not None]
        self.names = list(dict.fromkeys([*(c.name for c in ordered), *formers]))
        if not self.names:
            unique_planner(model)  # Raises: nothing to audit.
        #: Class names of the audited models: a lock recording one of them as its owner model is theirs.
        self.model_names = {m.__name__ for m in audited}
        names = set(self.names)
        for member in audited:
            check_twins(member)  # Raises: defined again with other constraints.
        members: set[type[Any]] = {m for m in audited if constraints_of(m)}
        # A registered class defined again under an audited one's identity is that model.
        members.update(
            m for m in declaring(model, names) if constraints_of(m) and not any(same_model(m, a) for a in audited)
        )
        self.members = members
        #: The members by the class name a lock records as its owner model (a name two share: neither).
        counts = Counter(m.__name__ for m in members)
        self.named = {m.__name__: m for m in members if counts[m.__name__] == 1}
        # Records tables (by identity) and the groups each holds, filtered groups first.
        self.tables: dict[TableId, list[_Group]] = {}
        roots: dict[Any, type[Any]] = {}
        # A polymorphic family is one group (its discriminator attribute is shared), rooted at its
        # most general member; any other model is a group of its own.
        for member in sorted(members, key=lambda m: len(m.__mro__)):
            attribute = discriminator(member)
            roots.setdefault(id(attribute) if attribute is not None else member, member)
        for root in roots.values():
            attribute = discriminator(root)
            polymorphic = attribute is not None
            group_members = tuple(m for m in members if m is root or (polymorphic and discriminator(m) is attribute))
            root_planner = planner_of(root)
            untagged = not polymorphic or (root_planner is not None and root_planner.kind is None)
            group = _Group(root, group_members, item_filter(root), polymorphic, untagged)
            self.tables.setdefault(table_id(root), []).append(group)
        for groups in self.tables.values():
            groups.sort(key=lambda g: (g.condition is None, g.untagged))

    def check_shared(self, foreign_lock_names: set[str], lock_table: TableId) -> None:
        """Refuse to guess which items are whose in a table that other models share.

        Raises:
            UniqueError: a model without ``unique_item_filter`` that would read untagged items
                as its records shares its table with another model's records or locks.
        """
        for table, groups in self.tables.items():
            for group in groups:
                if not group.catch_all:
                    continue
                root = group.root
                others = {
                    m.__name__
                    for m in table_neighbours(root)
                    if not (group.owns(m) or issubclass(m, root) or issubclass(root, m))
                }
                others |= {g.root.__name__ for g in groups if g is not group}
                family_names = {c.name for m in table_neighbours(root) if group.owns(m) for c in constraints_of(m)}
                own = family_names | {c.name for c in constraints_of(root)}
                strangers = sorted(foreign_lock_names - own) if table == lock_table else []
                if others or strangers:
                    seen = f"models {sorted(others)}" if others else f"locks of constraints {strangers}"
                    msg = (
                        f"{root.__name__}: its table {root.Meta.table_name!r} also holds {seen}; set "
                        f"{root.__name__}.Meta.unique_item_filter = lambda model: <a condition its records "
                        "meet> (or store a discriminator value for every class) so audit, repair and backfill "
                        "can tell its records apart; nothing was written"
                    )
                    raise UniqueError(msg)

    def owner(self, table: TableId, item: Mapping[str, Any]) -> type[UniqueMixin] | None:
        """The model of the scanned record ``item`` among the audited ones, or None."""
        for group in self.tables[table]:
            mine, cls = group.owner(item)
            if mine:
                return cls
        return None


#: A record as :meth:`Collector.sort` reads it: (key, model, unique values, held locks), each held
#: lock (namespace, lock key, whether of a former form).
SortedRecord = tuple[RecordKey, "type[UniqueMixin]", tuple[Any, ...], list[tuple[str, str, bool]]]


@dataclass
class Sorted:
    """What some scanned items hold for an audit, sorted item by item (:meth:`Collector.sort`).

    Attributes:
        scanned: items read.
        locks: (lock key, owner, state) of each lock of an audited namespace: its state is
            :func:`lock_state`.
        retired: (lock key, owner) of each lock of a namespace no model declares any more.
        records: each record of an audited model (:data:`SortedRecord`); an expired record
            (its TTL attribute passed) is gone, awaiting DynamoDB's TTL deletion.
        strangers: constraint names of other models' locks.
        owner_models: the owner model each lock of ``locks`` and ``retired`` records, when it is
            one of the scope's models other than the audited one: repair checks an owner that is
            no audited record (gone, or expired) as a record of that model.
        held: release holds not yet ended (``hold=``), among ``locks``: valid with no holder.
        reserved: reservations not yet ended, among ``locks``: valid with no holder.
        expired: locks and holds whose expiry passed: anyone may take them, DynamoDB's TTL
            removes them; not among ``locks``.
        expired_reservations: (lock key, token) of each reservation that ended, among ``expired``.
    """

    scanned: int = 0
    locks: list[tuple[str, RecordKey | None, str]] = field(default_factory=list)
    retired: list[tuple[str, RecordKey | None]] = field(default_factory=list)
    records: list[SortedRecord] = field(default_factory=list)
    strangers: set[str] = field(default_factory=set)
    owner_models: dict[str, type[UniqueMixin]] = field(default_factory=dict)
    held: int = 0
    expired: int = 0
    reserved: int = 0
    expired_reservations: list[tuple[str, str]] = field(default_factory=list)


class Collector:
    """Sorts scanned items into records and locks; thread-safe (one merge per page)."""

    def __init__(self, scope: Scope, locks: LockTable) -> None:
        self.scope = scope
        self.lock_table = locks
        self.names = set(scope.names)
        self.mutex = threading.Lock()
        self.scanned = 0
        self.held = 0
        self.reserved = 0
        self.expired = 0
        #: Reservations that ended: (lock key, token), for repair to delete on request.
        self.expired_reservations: list[tuple[str, str]] = []
        #: The audit's clock: a record or lock whose expiry is before it counts as gone.
        self.now = time.time()
        self._ttl_names: dict[type[UniqueMixin], str | None] = {}
        self.foreign_lock_names: set[str] = set()
        # Bounded by the table: one entry per record, per live value and per lock.
        self.records: dict[RecordKey, tuple[type[UniqueMixin], tuple[Any, ...]]] = {}
        self.holders: dict[str, RecordKey] = {}
        self.more_holders: dict[str, list[RecordKey]] = {}
        self.locks: dict[str, RecordKey | None] = {}
        #: The state of each lock that has one (:func:`lock_state`): a hold, or its expiry.
        self.states: dict[str, str] = {}
        #: Lock keys some record holds under a constraint's current form (the others: former only).
        self.current: set[str] = set()
        #: Locks of namespaces no audited model declares any more, owned by an audited model's records.
        self.retired: dict[str, RecordKey | None] = {}
        #: The owner model each lock records (:attr:`Sorted.owner_models`).
        self.owner_models: dict[str, type[UniqueMixin]] = {}
        self._alive: dict[str, bool] = {}

    def _declared(self, name: str) -> bool:
        """Whether a registered model keeps locks in this lock table under ``name`` (cached)."""
        alive = self._alive.get(name)
        if alive is None:
            alive = self._alive[name] = bool(declaring(self.scope.model, {name}))
        return alive

    def _lock_entry(self, item: dict[str, Any]) -> tuple[str, str, RecordKey | None] | str | None:
        """("lock" or "retired", lock key, owner) of a lock of this audit; another model's lock's constraint name.

        A lock of a namespace no registered model declares, whose owner model is an audited one,
        is retired (a renamed or dropped constraint); any other lock outside the audited
        namespaces is another model's.
        """
        locks = self.lock_table
        lock_key = locks.key_text(item)
        if not isinstance(lock_key, str) or not lock_key.startswith(LOCK_PREFIX):
            return None
        if locks.range_name is not None and item.get(locks.range_name, {}).get("S") != locks.range_value:
            return None
        name = constraint_name(lock_key)
        if name in self.names:
            return "lock", lock_key, lock_owner(item)
        if lock_owner_model(item) in self.scope.model_names and not self._declared(name):
            return "retired", lock_key, lock_owner(item)
        return name  # Another model's lock.

    def _record_entry(
        self, model: type[UniqueMixin], item: dict[str, Any]
    ) -> tuple[RecordKey, type[UniqueMixin], tuple[Any, ...], list[tuple[str, str, bool]]]:
        """(key, model, unique values, locks) of a record, as the library itself computes them.

        Each lock is (namespace, lock key, whether of a former form): during a migration a
        record holds the locks of both forms of a constraint.
        """
        try:
            context = context_of(model)
            assert context is not None  # noqa: S101 - audited models keep locks.
            owner, values = context.read_record(item)
            held = [
                (c.form(former=former).name, key, former) for key, (c, former) in context.planner.locks(values).items()
            ]
            return owner, model, tuple(values.values()), held
        except Exception as exc:
            meta = connection(model).get_meta_table()
            key = {name: item.get(name) for name in (meta.hash_keyname, meta.range_keyname) if name}
            msg = f"{model.__name__}: cannot read the item {key} as a record: {exc}"
            raise UniqueError(msg) from exc

    def sort(self, items: Page, *, table: TableId | None, locks: bool) -> Sorted:
        """Sort the items of a records ``table`` and/or of the lock table (``locks``), item by item.

        Keeps nothing: :meth:`merge` takes what it returns (the live audit), or the export
        audit streams it to DuckDB. A record's held locks are those of the audited namespaces.
        """
        found = Sorted(scanned=len(items))
        for item in items:
            # A record never carries a lock's owner fields; in a separate lock table every item
            # is a candidate lock.
            hash_value = self.lock_table.key_text(item)
            lock_like = is_lock_item(item) or (
                locks and isinstance(hash_value, str) and hash_value.startswith(LOCK_PREFIX)
            )
            if lock_like or (locks and table is None):
                entry = self._lock_entry(item) if locks else None
                if isinstance(entry, str):
                    found.strangers.add(entry)
                elif entry is not None:
                    kind, lock_key, owner = entry
                    owner_model = self.scope.named.get(lock_owner_model(item) or "")
                    if owner_model is not None and owner_model is not self.scope.model:  # The audited: the default.
                        found.owner_models[lock_key] = owner_model
                    if kind == "retired":
                        found.retired.append((lock_key, owner))
                    else:
                        self._sort_lock(found, item, lock_key, owner)
            elif table is not None and (model := self.scope.owner(table, item)) is not None:
                if self._expired_record(model, item):
                    continue
                key, model, values, held = self._record_entry(model, item)
                held = [entry for entry in held if entry[0] in self.names]
                found.records.append((key, model, values, held))
        return found

    def _sort_lock(self, found: Sorted, item: Mapping[str, Any], lock_key: str, owner: RecordKey | None) -> None:
        """Count a lock of an audited namespace: ended (expired), or live with its state."""
        if self.lock_table.expired(item, self.now):
            found.expired += 1
            if (token := lock_reservation(item)) is not None:
                found.expired_reservations.append((lock_key, token))
            return
        state = lock_state(self.lock_table, item)
        if state == HELD_STATE:
            found.held += 1
        elif state == RESERVED_STATE:
            found.reserved += 1
        found.locks.append((lock_key, owner, state))

    def merge(self, found: Sorted) -> None:
        """Take in what :meth:`sort` found (one merge per page, under the mutex)."""
        with self.mutex:
            self.scanned += found.scanned
            self.held += found.held
            self.reserved += found.reserved
            self.expired += found.expired
            self.expired_reservations += found.expired_reservations
            self.foreign_lock_names |= found.strangers
            for lock_key, owner, state in found.locks:
                self.locks[lock_key] = owner
                if state:
                    self.states[lock_key] = state
            self.retired.update(found.retired)
            self.owner_models.update(found.owner_models)
            for key, model, values, held in found.records:
                self.records[key] = (model, values)
                for _, lock_key, former in held:
                    if not former:
                        self.current.add(lock_key)
                    if self.holders.setdefault(lock_key, key) != key:
                        self.more_holders.setdefault(lock_key, []).append(key)

    def _expired_record(self, model: type[UniqueMixin], item: Mapping[str, Any]) -> bool:
        """:func:`record_expired`, the attribute's name looked up once per model."""
        if model not in self._ttl_names:
            self._ttl_names[model] = ttl_attribute(model)
        return _expired(item, self._ttl_names[model], self.now)

    def add_page(self, items: Page, *, table: TableId | None, locks: bool) -> None:
        """Sort one page of a records ``table`` and/or of the lock table (``locks``) and take it in."""
        self.merge(self.sort(items, table=table, locks=locks))

    def _audited(self, key: RecordKey) -> Audited | None:
        found = self.records.get(key)
        if found is None:
            return None
        model, values = found
        planner = planner_of(model)
        return dict(zip(planner.unique_names if planner is not None else (), values, strict=True))

    def _constraint(self, key: RecordKey, name: str) -> Constraint:
        """The constraint of a record's model whose current or former form is namespace ``name``."""
        model = self.records[key][0]
        return next(c for c in constraints_of(model) for former in (False, True) if c.form(former=former).name == name)

    def _problem(self, kind: type[Problem], lock_key: str, holder: RecordKey, owner: RecordKey | None) -> Problem:
        """One problem of a held value, with what repair needs of each record involved."""
        name = constraint_name(lock_key)
        holders = tuple(sorted((holder, *self.more_holders.get(lock_key, ()))))
        involved = holders if owner is None else (*holders, owner)
        audited = {key: self._audited(key) for key in involved}
        models = self._models(lock_key, involved, owner)
        values = self._constraint(holders[0], name).values(audited[holders[0]] or {})
        former = lock_key not in self.current
        return kind(name, lock_key, values, owner, holders, audited, models, former=former)

    def _unheld(self, kind: type[Problem], lock_key: str, owner: RecordKey | None) -> Problem:
        """A problem of a lock no record holds the value of (orphaned or retired), with its owner as audited."""
        audited = {} if owner is None else {owner: self._audited(owner)}
        models = self._models(lock_key, () if owner is None else (owner,), owner)
        return kind(constraint_name(lock_key), lock_key, None, owner, (), audited, models)

    def _models(self, lock_key: str, involved: Iterable[RecordKey], owner: RecordKey | None) -> dict[RecordKey, Any]:
        """Each involved record's model, as audited; an owner that is no audited record, as its lock records it.

        Such an owner is gone or expired (an audited record's class may not be the lock's: a
        namespace shared by several models). Its model's table and expiry are where repair
        checks that it is still gone.
        """
        models = {key: self.records[key][0] for key in involved if key in self.records}
        owner_model = self.owner_models.get(lock_key)
        if owner is not None and owner not in models and owner_model is not None:
            models[owner] = owner_model
        return models

    def report(self, model: type[UniqueMixin], *, records: int, locks: int) -> AuditReport:
        """The report of an audit whose items are all taken in (``records``, ``locks``: how many were read)."""
        return AuditReport(
            model=model.__name__,
            table=connection(model).table_name,
            lock_table=self.lock_table.table_name,
            constraints=tuple(self.names_found),
            scanned=self.scanned,
            records=records,
            locks=locks,
            problems=tuple(self.problems()),
            held=self.held,
            expired=self.expired,
            reserved=self.reserved,
            expired_reservations=tuple(sorted(self.expired_reservations)),
        )

    @property
    def names_found(self) -> list[str]:
        """The audited namespaces, then the retired ones found (sorted)."""
        retired = sorted({constraint_name(k) for k in self.retired} - self.names)
        return [*self.scope.names, *retired]

    def problems(self) -> list[Problem]:
        """Compare live values with locks, once the scan is complete."""
        found: list[Problem] = []
        locks, more = self.locks, self.more_holders
        states = self.states
        for lock_key, holder in self.holders.items():
            owner = locks.get(lock_key, _NO_LOCK)
            state = states.get(lock_key, "")
            kind: type[Problem]
            if lock_key in more:
                kind = DuplicateValue
            elif owner is _NO_LOCK:
                kind = MissingLock
            elif owner != holder:
                # Under another record's hold, or a reservation, the value is theirs until it ends.
                kind = DuplicateValue if state in UNHELD_STATES else ForeignLock
            elif state != record_state(*self.records[holder]):
                kind = StaleLock
            else:
                continue  # The usual case: the value's lock names its one holder, as its record says.
            found.append(self._problem(kind, lock_key, holder, None if owner is _NO_LOCK else owner))
        # A hold or a reservation no record holds is what it should be: the value stays reserved until it ends.
        unheld = (
            (k, owner) for k, owner in locks.items() if k not in self.holders and states.get(k) not in UNHELD_STATES
        )
        found.extend(self._unheld(OrphanedLock, k, owner) for k, owner in unheld)
        found.extend(self._unheld(RetiredLock, k, owner) for k, owner in self.retired.items())
        order = {name: i for i, name in enumerate(self.names_found)}
        kinds = {kind.kind: i for i, kind in enumerate(ATTENTION)}
        found.sort(key=lambda p: (kinds[p.kind], order[p.constraint], p.lock_key))
        return found
