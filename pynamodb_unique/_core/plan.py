"""Planning: (what is stored, what the caller wants) -> the DynamoDB actions of one request.

Everything here is pure: no I/O, no model instances. The engine turns a :class:`Plan` into a
request; the order of :meth:`Plan.sent` is the order the engine sends, and the one PynamoDB's
``transact_write_items`` sends a composed transaction in (condition checks, deletes, puts, then
updates), so ``CancellationReasons[i]`` belongs to ``sent()[i]``.

Nothing changes a :class:`Stored`, a :class:`Plan` or a plan action once made
(``dataclasses.replace``, or ``_replace`` for a named tuple, makes another).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from functools import cached_property
from typing import Any, ClassVar, Final, Literal, NamedTuple

from pynamodb.attributes import Attribute, TTLAttribute
from pynamodb.constants import BINARY, NULL, NUMBER, STRING
from pynamodb.expressions.condition import Condition
from pynamodb.expressions.operand import Path, Value

from ..exceptions import UniqueConfigError
from .constraint import Constraint
from .seconds import second_bounds

#: DynamoDB's scalar types: their Python values cannot change in place.
SCALAR_TYPES: Final = frozenset({STRING, NUMBER, BINARY})

#: DynamoDB's limit on the number of actions in one TransactWriteItems.
MAX_TRANSACTION_ACTIONS: Final = 100

RecordOp = Literal["put", "update", "delete"]
#: How PynamoDB's ``transact_write_items`` groups what it sends.
SentGroup = Literal["check", "delete", "put", "update"]
#: The order PynamoDB sends those groups in (not the order items were added): the one place it is known.
SENT_ORDER: Final[tuple[SentGroup, ...]] = ("check", "delete", "put", "update")


@dataclass(frozen=True)
class Stored:
    """What the library believes is stored for one record.

    Attributes:
        exists: whether the record exists.
        values: the unique attributes' Python values (missing or None: no value).
        source: the planner of the stored item's own class, when it is another class of a
            polymorphic model than the writer's (its locks are the ones to release); None: the
            writer's class.
        keys: the lock key of each constraint for ``values``, when already computed.
        verbatim: the stored form (DynamoDB JSON) of values read from an item whose text their
            Python value may not give back (a ``JSONAttribute`` written by another writer with
            other spacing): the compare-and-swap checks that text.
        ranged: the values were read by a scan that kept no text (repair and migrate): an expiry
            without a text is compared within its whole second (:attr:`Planner.ranged`), which
            every number PynamoDB loads as that second passes, instead of read again for its text.
    """

    exists: bool
    values: Mapping[str, Any] = field(default_factory=dict)
    source: Planner | None = field(default=None, compare=False)
    keys: Mapping[str, str | None] | None = field(default=None, compare=False, repr=False)
    verbatim: Mapping[str, dict[str, Any]] | None = field(default=None, compare=False, repr=False)
    ranged: bool = field(default=False, compare=False, repr=False)

    def same_as(self, other: Stored, planner: Planner) -> bool:
        """Whether both describe the same unique state (what the compare-and-swap checks).

        Values are compared as DynamoDB stores them: a ``MapAttribute`` or another object
        compared by identity is the same when it serializes the same.
        """
        if self.exists != other.exists or self.source is not other.source:
            return False
        planner = self.source or planner
        for name in planner.unique_names:
            mine, theirs = self.values.get(name), other.values.get(name)
            mine_text = self.verbatim.get(name) if self.verbatim else None
            theirs_text = other.verbatim.get(name) if other.verbatim else None
            if mine_text is None and theirs_text is None and mine == theirs:
                continue
            # As stored: a stored text is what the compare-and-swap checked, else the value serialized.
            mine_stored, theirs_stored = (
                mine_text or planner.text(name, mine),
                theirs_text or planner.text(name, theirs),
            )
            if mine_stored != theirs_stored and _in_order(mine_stored) != _in_order(theirs_stored):
                return False
        return True


#: DynamoDB's set kinds: their members have no order (a Python set serializes in its own).
_SET_KINDS: Final = frozenset({"SS", "NS", "BS"})


def _in_order(value: Any) -> Any:
    """A serialized value (DynamoDB JSON: a type and its payload) with its sets' members, at any depth, in one order.

    A map's own keys are names, never types: only the payload of a ``M`` or ``L`` is walked.
    """
    if not isinstance(value, dict) or len(value) != 1:
        return value
    ((kind, payload),) = value.items()
    if kind in _SET_KINDS:
        return {kind: sorted(payload)}
    if kind == "M":
        return {kind: {name: _in_order(member) for name, member in payload.items()}}
    if kind == "L":
        return {kind: [_in_order(member) for member in payload]}
    return value


def _or_default(value: Any, default: Any) -> Any:
    """``value`` as a stored item loads it: None or an empty set (stored as no attribute) loads as ``default``."""
    if value is None or (isinstance(value, (set, frozenset)) and not value):
        return default
    return value


@dataclass(frozen=True)
class GuardTemplate:
    """A guard shape's request text as PynamoDB serialized it: its expression and attribute names.

    Its values are numbered ``:0``, ``:1``... in the order :meth:`Guard.compiled` gives them
    (checked against PynamoDB's numbering when the template is made).
    """

    expression: str
    #: Placeholder -> attribute name, as a request carries them.
    names: Mapping[str, str]
    count: int

    @cached_property
    def placeholders(self) -> dict[str, str]:
        """Attribute name -> placeholder, as a PynamoDB condition's ``serialize`` collects them."""
        return {name: placeholder for placeholder, name in self.names.items()}

    @cached_property
    def value_names(self) -> tuple[str, ...]:
        """The values' placeholders in order: ``:0``, ``:1``..."""
        return tuple(f":{i}" for i in range(self.count))

    def values(self, found: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
        """The request's ``ExpressionAttributeValues`` for the values of one guard of this shape."""
        return dict(zip(self.value_names, found, strict=True))


#: Nothing stored (shared: a Stored is never changed once made).
ABSENT: Final = Stored(exists=False)


class RecordWrite(NamedTuple):
    """The write of the record itself, with the library's part of its condition.

    A named tuple: made by every write, cheaper to make than a frozen dataclass (docs/architecture.md, Speed).
    """

    op: RecordOp
    guard: Guard | None

    @property
    def condition(self) -> Condition | None:
        """The library's condition on the record as a PynamoDB condition (None: none)."""
        return self.guard.condition() if self.guard is not None else None


class Guard(NamedTuple):
    """What a record write assumes is stored, as its condition checks it.

    A named tuple: made by every write, cheaper to make than a frozen dataclass (docs/architecture.md, Speed).

    Attributes:
        planner: the planner of the class assumed stored (its unique names and class), or of
            the writer when nothing is assumed stored.
        stored: what the write assumes.
        gone_ok: a delete's condition also passes when the record is already gone.
    """

    planner: Planner
    stored: Stored
    gone_ok: bool = False

    def condition(self) -> Condition | None:
        """The condition, built with PynamoDB's expressions (None: nothing to check)."""
        planner, stored = self.planner, self.stored
        gone = planner.hash_attribute.does_not_exist()
        if not stored.exists:
            if not self.gone_ok or planner.defaults_hold_locks:
                # An item without unique values holds its defaults' locks: only "gone" holds none.
                return gone
            # Or an item of this class holding no unique value but its defaults (a polymorphic
            # family's other classes hold locks of their own).
            bare = planner.cas(planner.bare)
            return gone if bare is None else gone | bare
        cas = planner.cas(stored)
        if not self.gone_ok and planner.defaults_hold_locks:
            # No item passes a check of default values but holds none of their locks: it must exist.
            exists = planner.hash_attribute.exists()
            return exists if cas is None else cas & exists
        if cas is None:
            return gone if self.gone_ok else None
        return gone | cas if self.gone_ok else cas

    def compiled(self) -> tuple[tuple[Any, ...], list[dict[str, Any]]]:
        """(shape, values) of the condition: what its text depends on, and its values in one pass.

        Only a fast path: the request builder (``pynamodb_unique._write.requests._filled``) checks,
        once per shape, that PynamoDB's serialization of :meth:`condition` numbers these values in
        this order, and serializes the condition itself for a shape where it does not.
        """
        planner, stored = self.planner, self.stored
        if not stored.exists:
            # A delete's "gone, or of this class holding no unique value": each attribute absent (or NULL).
            if not self.gone_ok or planner.defaults_hold_locks:
                return (False, self.gone_ok, ()), []
            _, found = Guard(planner, planner.bare).compiled()
            return (False, self.gone_ok, ()), found
        stored_values, defaults, verbatim = stored.values, planner.defaults, stored.verbatim
        ranged = planner.ranged if stored.ranged else _NO_NAMES
        states = []
        found = []
        for name in planner.unique_names:
            value = stored_values.get(name)
            state = cas_state(name, value, defaults, verbatim, ranged)
            states.append(state)
            if state in (ABSENT_STATE, DEFAULT_STATE):
                # attribute_type(x, NULL), as PynamoDB serializes it: PynamoDB loads NULL as absent.
                found.append({STRING: NULL})
            if state == VERBATIM_STATE:
                found.append(verbatim[name])  # type: ignore[index] # set in that state.
            elif state >= RANGE_STATE:  # Only a scan's values (Stored.ranged) are in these states.
                if state == DEFAULT_RANGE_STATE:
                    found.append({STRING: NULL})
                found += second_bounds(value)  # type: ignore[arg-type] # a value with bounds in these states.
            elif state != ABSENT_STATE:
                found.append(planner.serialize(name, value))
        kind = planner.kind_value
        if kind is not None:
            found.append(dict(kind))  # A new dict each time, as every value of a request.
        return (True, self.gone_ok, tuple(states)), found


def former_slot(name: str) -> str:
    """Where the former-form key of constraint ``name`` sits in a mapping of lock keys by constraint name.

    Constraint names never contain ``#``, so a slot is never mistaken for a name.
    """
    return f"{name}#former"


def slots(constraint: Constraint) -> tuple[tuple[str, bool], ...]:
    """The slots of a constraint's locks in a mapping of lock keys: (slot, whether the former form)."""
    if constraint.former is None:
        return ((constraint.name, False),)
    return (constraint.name, False), (former_slot(constraint.name), True)


def _forms(keys: tuple[str | None, str | None]) -> dict[str, bool]:
    """(current key, former key) as lock key -> whether the former form, without absent keys."""
    current, former = keys
    forms: dict[str, bool] = {}
    if current is not None:
        forms[current] = False
    if former is not None:
        forms[former] = True
    return forms


def _move_locks(
    c: Constraint,
    old: Mapping[str, bool],
    new: Mapping[str, bool],
    desired: Mapping[str, Any],
    moved: bool,
    not_ours: frozenset[str],
    into: tuple[list[LockRelease], list[LockNotOurs], list[LockPut]],
) -> None:
    """Plan one constraint's lock moves from the keys held (``old``) to the keys wanted (``new``).

    Each form's lock moves on its own (keys map to whether they are of the former form): a key
    held before and after (in either form) stays, unless ``moved`` (a new expiry: each wanted
    lock is put again). A lock to release that another record owns (``not_ours``) is checked.
    The actions are appended to ``into``: (releases, checks, puts).
    """
    releases, checks, puts = into
    for key, former in old.items():
        if key in new:
            continue
        if key in not_ours:
            checks.append(LockNotOurs(c, key, former))
        else:
            releases.append(LockRelease(c, key, former))
    for key, former in new.items():
        if moved or key not in old:
            puts.append(LockPut(c, c.values(desired), key, former))


class _LockAction:
    """What every lock action has: its constraint, its key, and whether the key is of the former form."""

    constraint: Constraint
    key: str
    former: bool

    @property
    def namespace(self) -> str:
        """The name the lock item's key holds and records (the former name for a former-form lock)."""
        return self.constraint.form(former=self.former).name


@dataclass(frozen=True)
class LockPut(_LockAction):
    """Take a value: put its lock on condition that no lock exists, or that this record owns it.

    Accepting a lock this record already owns makes a resent write (after a lost response, on a
    backend that ignores ClientRequestToken) succeed instead of colliding with itself. During a
    migration a record takes the lock of each form of the value (``former``: the previous form).

    ``claim``: the token of a reservation of the value (``Model.reserve()``) that this put claims:
    it is then conditioned on the lock being that live reservation (or this record's) instead.
    """

    op: ClassVar[SentGroup] = "put"

    constraint: Constraint
    values: tuple[Any, ...]
    key: str
    former: bool = False
    claim: str | None = None


@dataclass(frozen=True)
class LockRelease(_LockAction):
    """Give a value back: delete its lock on condition that this record owns it (or it is gone).

    A constraint with ``hold=`` keeps the value reserved instead: the lock is put again as a
    hold of this record, with an expiry (so it is sent with the puts).
    """

    constraint: Constraint
    key: str
    former: bool = False

    @property
    def op(self) -> SentGroup:
        """How it is sent: a delete, or a put for a hold."""
        return "delete" if self.constraint.hold is None else "put"


@dataclass(frozen=True)
class LockNotOurs(_LockAction):
    """Leave a value's lock alone, on condition that it is still not this record's.

    A release that failed because another record owns the lock is not retried; this check
    takes its place, so the fact it relies on holds in the very transaction that relies on it.
    """

    op: ClassVar[SentGroup] = "check"

    constraint: Constraint
    key: str
    former: bool = False


PlanAction = RecordWrite | LockPut | LockRelease | LockNotOurs


class Plan(NamedTuple):
    """The actions of one request, and what the record was assumed to hold when planned.

    A named tuple: made by every write, cheaper to make than a frozen dataclass (docs/architecture.md, Speed).
    """

    record: RecordWrite
    releases: tuple[LockRelease, ...]
    puts: tuple[LockPut, ...]
    assumed: Stored
    checks: tuple[LockNotOurs, ...] = ()
    #: The lock key of every constraint after the write, when planning learnt them all (else None).
    keys: Mapping[str, str | None] | None = None
    #: The record's expiry after the write, serialized (``{"N": ...}``), which its lock puts carry.
    expires: Mapping[str, Any] | None = None

    @property
    def transactional(self) -> bool:
        """Whether the request needs TransactWriteItems (any lock moves or is checked)."""
        return bool(self.releases or self.puts or self.checks)

    def sent(self) -> list[PlanAction]:
        """The actions in the order they are sent: condition checks, deletes, puts, updates."""
        record = self.record
        # Releases are deletes, or puts when they leave a hold; within a group the record comes first.
        deletes: list[PlanAction] = [record] if record.op == "delete" else []
        puts: list[PlanAction] = [record] if record.op == "put" else []
        for release in self.releases:
            if release.op == "delete":
                deletes.append(release)
            else:
                puts.append(release)
        updates: list[PlanAction] = [record] if record.op == "update" else []
        return [*self.checks, *deletes, *puts, *self.puts, *updates]


#: How the compare-and-swap checks one attribute: absent, equal to a value, or either when the
#: value is the attribute's default (PynamoDB's load gives the default for an absent attribute).
#: "Absent" includes NULL, which PynamoDB loads as absent (another writer may store it).
ABSENT_STATE: Final = 0
EQUAL_STATE: Final = 1
DEFAULT_STATE: Final = 2
#: Equal to the stored text itself (:attr:`Stored.verbatim`).
VERBATIM_STATE: Final = 3
#: Within the whole second of the value, or also absent for the default (:attr:`Stored.ranged`).
RANGE_STATE: Final = 4
DEFAULT_RANGE_STATE: Final = 5
_NO_NAMES: Final[frozenset[str]] = frozenset()


def cas_state(
    name: str,
    value: Any,
    defaults: Mapping[str, Any],
    verbatim: Mapping[str, Any] | None = None,
    ranged: frozenset[str] = _NO_NAMES,
) -> int:
    """How the compare-and-swap checks attribute ``name`` stored as ``value`` (as loaded).

    An expiry in ``ranged`` without a text is compared within its whole second, when its bounds
    can be stated (:func:`second_bounds`).
    """
    if verbatim and name in verbatim:
        return VERBATIM_STATE
    if value is None:
        return ABSENT_STATE
    if name in defaults and defaults[name] == value:
        return DEFAULT_RANGE_STATE if ranged and name in ranged and second_bounds(value) else DEFAULT_STATE
    return RANGE_STATE if ranged and name in ranged and second_bounds(value) else EQUAL_STATE


def fixed_default(attribute: Attribute[Any]) -> Any:
    """What PynamoDB's load gives an attribute an item lacks, when the same every time; else None.

    A callable default is made anew by each load, and a ``timedelta`` default (a ``TTLAttribute``'s)
    becomes a time counted from the load: neither is a stored value.
    """
    default = attribute.default
    if default is None or callable(default) or isinstance(default, timedelta):
        return None
    return default


def compare_and_swap(
    attributes: Mapping[str, Attribute[Any]],
    names: Sequence[str],
    stored: Mapping[str, Any],
    paths: Mapping[str, Path] | None = None,
    defaults: Mapping[str, Any] | None = None,
    verbatim: Mapping[str, dict[str, Any]] | None = None,
    ranged: frozenset[str] = _NO_NAMES,
) -> Condition | None:
    """Condition: the record's unique attributes still hold ``stored``, as PynamoDB loads them.

    Args:
        attributes: the model's attributes by Python name.
        names: the attributes to compare.
        stored: their values as loaded (None: absent).
        paths: prebuilt ``Path`` of each attribute, reused across conditions (they only serialize).
        defaults: the attributes' fixed defaults: an item without the attribute loads as holding
            it, so a value equal to its default is also held by an item without the attribute.
        verbatim: stored forms to compare as they are (:attr:`Stored.verbatim`).
        ranged: expiries compared within their whole second where no stored form is known
            (:attr:`Stored.ranged`).
    """
    condition: Condition | None = None
    for name in names:
        path = paths[name] if paths is not None else Path(attributes[name])
        value = stored.get(name)
        state = cas_state(name, value, defaults or {}, verbatim, ranged)
        part: Condition
        if state == VERBATIM_STATE:
            part = path == Value(verbatim[name])  # type: ignore[index] # set in that state.
        elif state == ABSENT_STATE:
            part = path.does_not_exist() | path.is_type(NULL)
        else:
            equal: Condition
            if state in (RANGE_STATE, DEFAULT_RANGE_STATE):
                low, high = second_bounds(value)  # type: ignore[arg-type,misc] # a value with bounds in these states.
                equal = (path >= Value(low)) & (path < Value(high))
            else:
                equal = path == value
            absent = state in (DEFAULT_STATE, DEFAULT_RANGE_STATE)
            part = path.does_not_exist() | path.is_type(NULL) | equal if absent else equal
        condition = part if condition is None else condition & part
    return condition


Instantiate = Callable[[Mapping[str, Any], set[str]], Any]


@dataclass(frozen=True)
class Planner:
    """Plans the writes of one model.

    Attributes:
        constraints: the model's resolved constraints.
        attributes: the model's attributes by Python name.
        hash_attribute: the model's hash key attribute.
        instantiate: builds a model instance holding a mapping of values and records, in the
            given set, the attributes read from it (for partial constraints' conditions).
        discriminator: a polymorphic model's DiscriminatorAttribute, else None.
        kind: the model class the discriminator stores for this planner's records (None: none).
        versioned: whether the model has a ``VersionAttribute``.
        ttl: the Python name of the model's ``TTLAttribute`` (None: none): its locks carry the
            record's expiry, and a write that changes the expiry moves it onto them.
        reservable: the model takes reservations (``Meta.unique_reservations``): a reservation's
            lock expires, so its lock puts also take an expired lock.
    """

    constraints: tuple[Constraint, ...]
    attributes: Mapping[str, Attribute[Any]]
    hash_attribute: Attribute[Any]
    instantiate: Instantiate | None = field(default=None, compare=False)
    discriminator: Attribute[Any] | None = field(default=None, compare=False)
    kind: type | None = field(default=None, compare=False)
    versioned: bool = field(default=False, compare=False)
    ttl: str | None = field(default=None, compare=False)
    reservable: bool = field(default=False, compare=False)

    @cached_property
    def unique_names(self) -> tuple[str, ...]:
        """Python names of every attribute the planner needs: constraint parts, condition reads, the expiry.

        The record's compare-and-swap covers exactly these.
        """
        names = [a for c in self.constraints for a in (*c.attributes, *c.condition_attributes)]
        if self.ttl is not None:
            names.append(self.ttl)
        return tuple(dict.fromkeys(names))

    @cached_property
    def kind_value(self) -> dict[str, Any] | None:
        """The serialized value of a polymorphic planner's class check (None: its class stores none)."""
        if self.discriminator is not None and self.kind is not None:
            value: dict[str, Any] = Value(self.kind, attribute=self.discriminator).value
            return value
        return None

    @cached_property
    def defaults(self) -> dict[str, Any]:
        """The fixed defaults of the attributes the planner reads (:func:`fixed_default`)."""
        return {name: d for name in self.unique_names if (d := fixed_default(self.attributes[name])) is not None}

    def as_loaded(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """The values of the attributes the planner reads as a stored item loads them.

        None or an empty set (no value, stored as no attribute) loads as the attribute's fixed default.
        """
        return {name: _or_default(values.get(name), self.defaults.get(name)) for name in self.unique_names}

    @cached_property
    def guard_texts(self) -> dict[tuple[Any, ...], GuardTemplate | None]:
        """Each guard shape's request text, made once from PynamoDB's serialization (by ``requests._filled``)."""
        return {}

    @cached_property
    def defaults_hold_locks(self) -> bool:
        """Whether an item of this class without unique values holds a lock: its fixed defaults call for one.

        Or a constraint is ``nulls_distinct=False``: missing values are a value of their own.

        A partial constraint's condition that fails on such an item counts as calling for one.
        """
        if not self.defaults and all(c.nulls_distinct for c in self.constraints):
            return False
        try:
            return any(key is not None for key in self.keys(self.defaults).values())
        except Exception:  # noqa: BLE001 - a user's condition on a bare item: assume the worst.
            return True

    @cached_property
    def bare(self) -> Stored:
        """An item of this class holding no unique value but its fixed defaults (as PynamoDB's save writes them)."""
        return Stored(exists=True, values=dict(self.defaults))

    def updated(self, stored: Stored, changes: Mapping[str, Any]) -> dict[str, Any]:
        """The values after an update of ``stored`` making ``changes``, as a load gives them.

        An update that creates the record starts from the key alone, which loads with the fixed
        defaults.
        """
        return {**self.defaults, **stored.values, **changes}

    def text(self, name: str, value: Any) -> dict[str, Any] | None:
        """A value of attribute ``name`` as stored (None: no value)."""
        return None if value is None else self.serialize(name, value)

    @cached_property
    def ranged(self) -> frozenset[str]:
        """The expiry, when compared within its whole second where its stored form is not known.

        PynamoDB writes a ``TTLAttribute`` in whole seconds and loads any number (another
        writer's ``1700000000.5``) to the microsecond; its locks carry the whole seconds. "Within
        the second" (:func:`second_bounds`) holds for every number that writes the same expiry,
        without reading the stored text first. Only PynamoDB's own ``TTLAttribute``: a subclass
        may read, set or write values its own way.
        """
        if self.ttl is None or type(self.attributes[self.ttl]) is not TTLAttribute:
            return frozenset()
        return frozenset({self.ttl})

    @cached_property
    def expiring(self) -> bool:
        """Whether the model's locks may expire: they carry its records' expiry, become holds, or are reservations."""
        return self.ttl is not None or self.reservable or any(c.hold is not None for c in self.constraints)

    def expires(self, values: Mapping[str, Any]) -> dict[str, Any] | None:
        """The record's expiry in ``values``, serialized as its lock items carry it (None: none)."""
        if self.ttl is None:
            return None
        value = values.get(self.ttl)
        return None if value is None else self.serialize(self.ttl, value)

    def applies(self, constraint: Constraint, values: Mapping[str, Any]) -> bool:
        """Whether a partial constraint's condition holds for ``values`` (always for others).

        Raises:
            UniqueConfigError: the condition read an attribute it did not declare.
        """
        if constraint.condition is None:
            return True
        if self.instantiate is None:
            msg = f"constraint {constraint.name} has a condition but the planner cannot build instances"
            raise UniqueConfigError(msg)
        read: set[str] = set()
        holds = bool(constraint.condition(self.instantiate(values, read)))
        undeclared = sorted(read - set(self.unique_names))
        if undeclared:
            msg = (
                f"the condition of unique constraint {constraint.name} read {undeclared}, which it did "
                "not read when traced; list every attribute it reads in condition_attributes=(...)"
            )
            raise UniqueConfigError(msg)
        return holds

    def key(self, constraint: Constraint, values: Mapping[str, Any]) -> str | None:
        """Lock key of one constraint's current form (None: no lock) for a mapping of attribute values."""
        key = constraint.key_of(values)
        return key if key is not None and self.applies(constraint, values) else None

    def form_keys(self, constraint: Constraint, values: Mapping[str, Any]) -> tuple[str | None, str | None]:
        """(current-form key, former-form key) of one constraint for a mapping of attribute values.

        The former key is None without a former form, and when it equals the current key: a
        transaction may not touch one item twice, and one lock serves both forms.
        """
        current = constraint.key_of(values)
        former = constraint.former.key_of(values) if constraint.former is not None else None
        if (current is None and former is None) or (
            constraint.condition is not None and not self.applies(constraint, values)
        ):
            return None, None
        return current, None if former == current else former

    def covering(self, names: set[str]) -> Constraint | None:
        """The constraint whose attributes are exactly ``names`` (a lookup by value), or None."""
        return next((c for c in self.constraints if set(c.attributes) == names), None)

    def held_keys(self, constraint: Constraint, stored: Stored) -> tuple[str | None, str | None]:
        """The (current, former) lock keys a stored record holds for one constraint (known keys first)."""
        if not stored.exists:
            return None, None
        if stored.keys is not None:
            return stored.keys.get(constraint.name), stored.keys.get(former_slot(constraint.name))
        return self.form_keys(constraint, stored.values)

    def keys(self, values: Mapping[str, Any]) -> dict[str, str | None]:
        """Lock key of each constraint (None: no lock) for a mapping of attribute values.

        A constraint that keeps its former form (a migration) has a second entry, under
        :func:`former_slot` of its name: the former-form key, None when it equals the current one.
        """
        keys: dict[str, str | None] = {}
        for c in self.constraints:
            current, former = self.form_keys(c, values)
            keys[c.name] = current
            if c.former is not None:
                keys[former_slot(c.name)] = former
        return keys

    def locks(self, values: Mapping[str, Any]) -> dict[str, tuple[Constraint, bool]]:
        """Every lock a record holding ``values`` holds: lock key -> (constraint, whether the former form)."""
        held: dict[str, tuple[Constraint, bool]] = {}
        for c in self.constraints:
            for key, former in _forms(self.form_keys(c, values)).items():
                held.setdefault(key, (c, former))
        return held

    @cached_property
    def reads(self) -> tuple[tuple[Constraint, frozenset[str], tuple[str, ...]], ...]:
        """Each constraint with the attributes its key depends on, and its slots in a mapping of lock keys."""
        return tuple(
            (c, frozenset((*c.attributes, *c.condition_attributes)), tuple(slot for slot, _ in slots(c)))
            for c in self.constraints
        )

    @cached_property
    def all_slots(self) -> tuple[tuple[Constraint, str, bool], ...]:
        """Every (constraint, slot, whether the former form) in a mapping of lock keys."""
        return tuple((c, slot, former) for c in self.constraints for slot, former in slots(c))

    @cached_property
    def paths(self) -> dict[str, Path]:
        return {name: Path(self.attributes[name]) for name in self.unique_names}

    def serialize(self, name: str, value: Any) -> dict[str, Any]:
        """A value of attribute ``name`` as a condition's value, as PynamoDB's ``Value`` serializes it."""
        attribute, scalar = self._serializers[name]
        if scalar is not None:
            # What Value(value, attribute) gives for a scalar attribute, without building it.
            return {scalar: attribute.serialize(value)}
        serialized: dict[str, Any] = Value(value, attribute=attribute).value
        return serialized

    @cached_property
    def _serializers(self) -> dict[str, tuple[Attribute[Any], str | None]]:
        """Each attribute, and its DynamoDB type when scalar (None: PynamoDB's ``Value`` serializes it)."""
        return {name: (a, a.attr_type if a.attr_type in SCALAR_TYPES else None) for name, a in self.attributes.items()}

    def class_check(self) -> Condition | None:
        """For a polymorphic model: the stored item, if any, is of this planner's class."""
        if self.discriminator is None:
            return None
        path = Path(self.discriminator)
        kind = path.does_not_exist() if self.kind is None else path == self.kind
        check: Condition = kind | self.hash_attribute.does_not_exist()
        return check

    def cas(self, stored: Stored) -> Condition | None:
        """The record still holds ``stored``: its unique values and, when polymorphic, its class."""
        cas = compare_and_swap(
            self.attributes,
            self.unique_names,
            stored.values,
            self.paths,
            self.defaults,
            stored.verbatim,
            self.ranged if stored.ranged else _NO_NAMES,
        )
        if self.discriminator is None:
            return cas
        path = Path(self.discriminator)
        kind = path.does_not_exist() if self.kind is None else path == self.kind
        return kind if cas is None else cas & kind

    def write(
        self,
        op: Literal["put", "update"],
        stored: Stored,
        desired: Mapping[str, Any],
        *,
        not_ours: frozenset[str] = frozenset(),
    ) -> Plan:
        """Plan a save (``put``) or ``update`` from ``stored`` to ``desired``.

        Args:
            op: the record write.
            stored: what the record is assumed to hold; the record's condition checks it.
            desired: the unique attributes' values after the write.
            not_ours: lock keys found owned by another record: checked, not released.
        """
        # The stored item may be of another class of a polymorphic model: its own constraints say
        # which locks it holds. A put replaces it with the writer's class; an update keeps its class.
        old_planner = stored.source or self
        new_planner = self if op == "put" else old_planner
        if old_planner is not new_planner:
            return self._replace(op, stored, desired, new_planner, not_ours)
        releases: list[LockRelease] = []
        checks: list[LockNotOurs] = []
        puts: list[LockPut] = []
        before, known = stored.values, stored.keys if stored.exists else {}
        # Keys are computed only for constraints whose attributes change: equal values, equal keys.
        changed: set[str] | None = None
        if stored.exists:
            changed = {name for name in old_planner.unique_names if before.get(name) != desired.get(name)}
        # A new expiry moves onto every lock the record keeps: each is put again (owner: this record).
        moved = old_planner.ttl is not None and changed is not None and old_planner.ttl in changed
        after: dict[str, str | None] | None = {}
        for c, reads, c_slots in old_planner.reads:
            if changed is not None and changed.isdisjoint(reads):
                # Unchanged: its keys after the write are the ones held, if known.
                if known is None or after is None:
                    after = None
                else:
                    for slot in c_slots:
                        after[slot] = known.get(slot)
                if moved:
                    held = _forms(old_planner.held_keys(c, stored))
                    _move_locks(c, {}, held, desired, moved, not_ours, (releases, checks, puts))
                continue
            old_keys = old_planner.held_keys(c, stored)
            new_keys = old_planner.form_keys(c, desired)
            if after is not None:
                # The current form's slot, and the former's when the constraint has one.
                after.update(zip(c_slots, new_keys, strict=False))
            _move_locks(c, _forms(old_keys), _forms(new_keys), desired, moved, not_ours, (releases, checks, puts))
        guard = Guard(old_planner if stored.exists else self, stored)
        expires = new_planner.expires(desired)
        return Plan(RecordWrite(op, guard), tuple(releases), tuple(puts), stored, tuple(checks), after, expires)

    def _replace(
        self, op: RecordOp, stored: Stored, desired: Mapping[str, Any], new: Planner, not_ours: frozenset[str]
    ) -> Plan:
        """Plan a write over a stored item of another class: its locks go, the new class's come."""
        old = stored.source or self
        held = old.locks(stored.values)
        wanted = new.locks(desired)
        kept = held.keys() & wanted.keys()
        gone = [(k, c, former) for k, (c, former) in held.items() if k not in kept]
        releases = tuple(LockRelease(c, k, former) for k, c, former in gone if k not in not_ours)
        checks = tuple(LockNotOurs(c, k, former) for k, c, former in gone if k in not_ours)
        # A new expiry moves onto the kept locks too: they are put again.
        expires = new.expires(desired)
        moved = expires != old.expires(stored.values)
        puts = tuple(LockPut(c, c.values(desired), k, f) for k, (c, f) in wanted.items() if k not in kept or moved)
        return Plan(RecordWrite(op, Guard(old, stored)), releases, puts, stored, checks, expires=expires)

    def delete(self, stored: Stored, *, not_ours: frozenset[str] = frozenset()) -> Plan:
        """Plan a delete of a record assumed to hold ``stored``.

        The record's condition also passes when it is already gone, so deleting twice succeeds.
        """
        old = stored.source or self
        if not stored.exists:
            before: Mapping[str, str | None] = {}
        else:
            before = stored.keys if stored.keys is not None else old.keys(stored.values)
        releases: list[LockRelease] = []
        checks: list[LockNotOurs] = []
        for c, slot, former in old.all_slots:
            key = before.get(slot)
            if not key:
                continue
            if key in not_ours:
                checks.append(LockNotOurs(c, key, former))
            else:
                releases.append(LockRelease(c, key, former))
        guard = Guard(old if stored.exists else self, stored, gone_ok=True)
        return Plan(RecordWrite("delete", guard), tuple(releases), (), stored, tuple(checks))
