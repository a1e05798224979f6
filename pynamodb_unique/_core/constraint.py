"""Declaring unique constraints: ``UniqueAttribute``, ``UniqueConstraint`` and their checks."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Final, TypeVar

from pynamodb.attributes import Attribute, JSONAttribute, MapAttribute
from pynamodb.constants import BINARY, NUMBER, STRING

from ..exceptions import DEFAULT_CODE, InvalidUniqueValue, UniqueConfigError, Violation
from .keys import NULL_PART, encode_part, hashed_lock_key, lock_prefix, prefixed_lock_key
from .messages import SAMPLES, check_message, describe

_A = TypeVar("_A", bound=Attribute[Any])

Normalizer = Callable[[Any], Any]
#: One attribute of a constraint as :meth:`Constraint.key` encodes it (see ``Constraint._steps``).
_Step = tuple[str, str, Normalizer | None, Callable[[Any], Any] | None]

#: Attribute of a lock item naming the owner record's hash key value.
OWNER_HASH: Final = "uniq_owner_hash"
#: Attribute of a lock item naming the owner record's range key value.
OWNER_RANGE: Final = "uniq_owner_range"
#: Attribute of a lock item naming its constraint.
CONSTRAINT: Final = "uniq_constraint"
#: Attribute of a lock item naming the owner record's model class (shared namespaces, renames).
OWNER_MODEL: Final = "uniq_owner_model"
#: Attribute of a lock item that is a release hold: the value stays reserved for its former owner until it expires.
HELD: Final = "uniq_held"
#: The lock expiry attribute of models with neither a ``TTLAttribute`` nor a separate lock table.
LOCK_EXPIRES: Final = "uniq_expires"
#: Attribute of a lock item that is a reservation (``Model.reserve()``): its token, in place of an owner record.
RESERVATION: Final = "uniq_reservation"
LOCK_ATTRIBUTES: Final = (OWNER_HASH, OWNER_RANGE, CONSTRAINT, OWNER_MODEL, HELD, LOCK_EXPIRES, RESERVATION)

_SPEC_ATTR: Final = "_pynamodb_unique_spec"
_NAME_RE: Final = re.compile(r"[A-Za-z0-9_.\-]+")
_KEYABLE_TYPES: Final = (STRING, NUMBER, BINARY)


Condition = Callable[[Any], Any]
SecretSource = Callable[[], bytes]


class _Same:
    """The value of a :class:`Former` field left out: the former form is as the current one."""

    def __repr__(self) -> str:
        return "SAME"


#: A :class:`Former` field left out: "as now".
SAME: Final = _Same()


@dataclass(frozen=True, init=False)
class Former:
    """The previous form of a constraint, kept during a migration (expand, migrate, contract).

    While a constraint declares ``former=``, every write takes, moves and releases the locks of
    both forms in one transaction (the former form only where its key differs), a value held by
    another record under either form is refused, and ``audit`` counts the locks of both forms as
    valid. ``migrate()`` then creates the current-form locks records written before are missing.

    Every field left out is "as now".

    Args:
        name: the constraint's previous name in lock keys (a rename).
        normalize: the previous normalizer (``None``: values were used as they are), or for a
            compound constraint a mapping ``{attribute_name: callable}``.
        hashed: whether lock keys held an HMAC of the value.
        secret: the previous HMAC key of a hashed constraint (bytes, or a callable returning
            bytes): a rotation of ``Meta.unique_secret``.
    """

    name: str | _Same
    normalize: Normalizer | Mapping[str, Normalizer] | _Same | None
    hashed: bool | _Same
    secret: bytes | Callable[[], bytes] | _Same

    def __init__(
        self,
        *,
        name: str | _Same = SAME,
        normalize: Normalizer | Mapping[str, Normalizer] | _Same | None = SAME,
        hashed: bool | _Same = SAME,
        secret: bytes | Callable[[], bytes] | _Same = SAME,
    ) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "normalize", normalize)
        object.__setattr__(self, "hashed", hashed)
        object.__setattr__(self, "secret", secret)


@dataclass(frozen=True)
class _UniqueSpec:
    name: str | None
    normalize: Normalizer | None
    hashed: bool
    message: str | None = None
    code: str = DEFAULT_CODE
    former: Former | None = None
    hold: timedelta | None = None
    nulls_distinct: bool = True


def UniqueAttribute(  # noqa: N802 - a marker used like an attribute class, as the public API names it.
    attribute: _A,
    *,
    name: str | None = None,
    normalize: Normalizer | None = None,
    hashed: bool = False,
    message: str | None = None,
    code: str = DEFAULT_CODE,
    former: Former | None = None,
    hold: timedelta | None = None,
    nulls_distinct: bool = True,
) -> _A:
    """Mark a PynamoDB attribute unique and return it unchanged.

    The class attribute keeps behaving as the wrapped attribute (conditions, update actions,
    plain values on instances), and type checkers see the wrapped type.

    Args:
        attribute: the attribute to protect, e.g. ``UnicodeAttribute()``.
        name: the constraint's name in lock keys; defaults to the Python attribute name
            upper-cased (``email`` -> ``UNIQ#EMAIL#...``).
        normalize: applied to the value before it becomes a key, e.g. ``str.casefold``.
        hashed: keep the value out of the lock key: the key holds an HMAC-SHA256 of it, keyed
            by ``Meta.unique_secret``.
        message: the violation's message, a ``str.format`` template with the fields ``{value}``,
            ``{values}``, ``{attributes}`` and ``{constraint}`` (``"{value} is already
            registered"``); checked when the class is defined. Default: ``email 'ada@x.io' is
            already taken``.
        code: the violation's code, for clients that translate or branch on it.
        former: the constraint's previous form during a migration (``Former(normalize=None)``):
            writes keep the locks of both forms until it is removed.
        hold: keep a released value reserved for this long (``timedelta(days=30)``): a change or
            delete turns the lock into a hold owned by the former record, which only that record
            may take back until it expires.
        nulls_distinct: ``False`` makes a missing value (None) a value of its own, as
            PostgreSQL's ``UNIQUE NULLS NOT DISTINCT``: at most one record may lack the
            attribute. Default ``True``: a record without the value takes no lock, so any number
            of records may lack it.
    """
    # The type is checked when the class is defined, where the attribute's name is known.
    # object.__setattr__: a MapAttribute would store an ordinary attribute among its values.
    spec = _UniqueSpec(name, normalize, hashed, message, code, former, hold, nulls_distinct)
    object.__setattr__(attribute, _SPEC_ATTR, spec)
    return attribute


@dataclass(frozen=True, init=False)
class UniqueConstraint:
    """Uniqueness over one or more attributes, listed in ``Meta.unique_constraints``.

    Args:
        *attribute_names: the Python attribute names; together their values must be unique.
        name: the constraint's name in lock keys; defaults to the names upper-cased and joined
            by ``_``.
        normalize: applied to each part, or a mapping ``{attribute_name: callable}`` for
            single parts.
        condition: makes the constraint partial, as PostgreSQL's partial unique index: a
            callable receiving a model instance holding the state being written; the value
            takes a lock only while it returns true (``lambda item: item.status != "deleted"``).
        condition_attributes: the attributes ``condition`` reads; traced when omitted. The
            record's compare-and-swap covers them.
        hashed: keep values out of lock keys (HMAC-SHA256 keyed by ``Meta.unique_secret``).
        message: the violation's message, a ``str.format`` template with the fields ``{values}``
            and ``{attributes}`` (joined by ``", "``), ``{constraint}``, and ``{value}`` when the
            constraint has one attribute; checked when the class is defined. Default: ``the
            combination of tenant 'acme' and slug 'home' is already taken``.
        code: the violation's code, for clients that translate or branch on it.
        former: the constraint's previous form during a migration (``Former(name="OLD")``):
            writes keep the locks of both forms until it is removed.
        hold: keep a released value reserved for this long (``timedelta(days=30)``), as
            :func:`UniqueAttribute`'s ``hold``.
        nulls_distinct: ``False`` makes a missing part (None) a value of its own, as
            PostgreSQL 15's ``NULLS NOT DISTINCT`` and Django's ``nulls_distinct=False``: only
            one record may hold ``(tenant=None, slug="home")``, and only one may lack every part.
            Default ``True``: a record with any part missing takes no lock.
    """

    attribute_names: tuple[str, ...]
    name: str | None
    normalize: Normalizer | Mapping[str, Normalizer] | None
    condition: Condition | None
    condition_attributes: tuple[str, ...] | None
    hashed: bool
    message: str | None
    code: str
    former: Former | None
    hold: timedelta | None
    nulls_distinct: bool

    def __init__(
        self,
        *attribute_names: str,
        name: str | None = None,
        normalize: Normalizer | Mapping[str, Normalizer] | None = None,
        condition: Condition | None = None,
        condition_attributes: tuple[str, ...] | None = None,
        hashed: bool = False,
        message: str | None = None,
        code: str = DEFAULT_CODE,
        former: Former | None = None,
        hold: timedelta | None = None,
        nulls_distinct: bool = True,
    ) -> None:
        object.__setattr__(self, "attribute_names", tuple(attribute_names))
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "normalize", normalize)
        object.__setattr__(self, "condition", condition)
        object.__setattr__(
            self, "condition_attributes", None if condition_attributes is None else tuple(condition_attributes)
        )
        object.__setattr__(self, "hashed", hashed)
        object.__setattr__(self, "message", message)
        object.__setattr__(self, "code", code)
        object.__setattr__(self, "former", former)
        object.__setattr__(self, "hold", hold)
        object.__setattr__(self, "nulls_distinct", nulls_distinct)


@dataclass(frozen=True)
class Constraint:
    """A constraint resolved against its model: what the planner works with.

    Attributes:
        name: the name in lock keys.
        attributes: the Python attribute names, in order.
        normalizers: one per attribute (None: as is).
        model_attributes: the PynamoDB attributes, to serialize values.
        condition: the partial constraint's predicate, or None.
        condition_attributes: the attributes the predicate reads.
        secret: the HMAC key source of a hashed constraint, or None.
        message: the violation message template (checked), or None for the default sentence.
        code: the violation code.
        former: the constraint's previous form during a migration, resolved as a constraint of
            its own (its name, normalizers and secret compute the former-form keys), or None.
        hold: how long a released value stays reserved for its former owner (None: released at once).
        nulls_distinct: False: a missing part is a value of its own (:data:`NULL_PART` in the
            key); True: a record with a missing part takes no lock.
    """

    name: str
    attributes: tuple[str, ...]
    normalizers: tuple[Normalizer | None, ...]
    model_attributes: tuple[Attribute[Any], ...] = field(repr=False, compare=False)
    condition: Condition | None = field(default=None, repr=False, compare=False)
    condition_attributes: tuple[str, ...] = ()
    secret: SecretSource | None = field(default=None, repr=False, compare=False)
    explicit: bool = field(default=False, compare=False)
    origin: object = field(default=None, repr=False, compare=False)
    message: str | None = field(default=None, repr=False, compare=False)
    code: str = field(default=DEFAULT_CODE, compare=False)
    former: Constraint | None = field(default=None, repr=False, compare=False)
    hold: timedelta | None = field(default=None, compare=False)
    nulls_distinct: bool = True
    #: What :meth:`key` needs, computed once: the lock prefix, and per attribute its name, its
    #: DynamoDB type, the normalizer and the attribute's ``serialize`` (None: PynamoDB's own,
    #: which returns the value as it is).
    _prefix: str = field(init=False, repr=False, compare=False)
    _steps: tuple[_Step, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_prefix", lock_prefix(self.name))
        steps = (
            (name, a.attr_type, normalize, None if type(a).serialize is Attribute.serialize else a.serialize)
            for name, a, normalize in zip(self.attributes, self.model_attributes, self.normalizers, strict=True)
        )
        object.__setattr__(self, "_steps", tuple(steps))

    @property
    def hashed(self) -> bool:
        """Whether lock keys hold an HMAC of the value instead of the value."""
        return self.secret is not None

    def form(self, *, former: bool) -> Constraint:
        """The form a lock is of: this constraint, or its former form (whose name the lock's key holds)."""
        return self.former if former and self.former is not None else self

    def describe(self, values: tuple[Any, ...]) -> str:
        """The message of a violation of this constraint by ``values`` (as given, not normalized)."""
        return describe(self.message, self.name, self.attributes, values, hashed=self.hashed)

    def violation(
        self,
        values: tuple[Any, ...],
        owner: tuple[Any, ...] | None,
        instance: Any = None,
        owner_model: str | None = None,
        held_until: datetime | None = None,
        *,
        reserved: bool = False,
    ) -> Violation:
        """The violation of this constraint by ``values``, held by ``owner``, with its message and code.

        ``held_until``: the value is a release hold of ``owner`` until then, or a reservation
        (``reserved``, no owner record) until then.
        """
        message = self.describe(values)
        if held_until is not None and self.message is None:
            if reserved:
                message = f"{message.removesuffix(' is already taken')} is reserved until {held_until.isoformat()}"
            else:
                message = f"{message} (held until {held_until.isoformat()})"
        return Violation(
            self.name,
            self.attributes,
            values,
            owner,
            instance,
            owner_model,
            message=message,
            code=self.code,
            held_until=held_until,
            reserved=reserved,
        )

    def values(self, source: Mapping[str, Any]) -> tuple[Any, ...]:
        """Return this constraint's values, in order, from a mapping of attribute values."""
        return tuple(map(source.get, self.attributes))

    def key(self, values: tuple[Any, ...]) -> str | None:
        """Return the lock key for ``values`` (None: no lock).

        A part that is None, or that its attribute serializes to None, is missing: the values
        take no lock, unless the constraint is ``nulls_distinct=False``, where the part is
        :data:`NULL_PART`. Every reader of lock keys (writes, audit, repair, migrate, the
        Streams handler, lookups) comes here or to :meth:`key_of`.

        The partial condition is not applied here; the planner applies it.

        Raises:
            InvalidUniqueValue: a value cannot be normalized or encoded.
            ValueError: ``values`` is not one value per attribute of the constraint.
        """
        steps = self._steps
        if len(values) != len(steps):
            msg = f"constraint {self.name} takes {len(steps)} values, got {len(values)}"
            raise ValueError(msg)
        if self.nulls_distinct:
            for value in values:
                if value is None:
                    return None
        parts = []
        for step, value in zip(steps, values, strict=True):
            part = self._part(step, value)
            if part is None:
                return None
            parts.append(part)
        return self._joined(parts)

    def key_of(self, source: Mapping[str, Any]) -> str | None:
        """``key(values(source))``: the lock key of the values in a mapping of attribute values.

        A constraint of one attribute, the usual one, reads it without building a tuple.

        Raises:
            InvalidUniqueValue: a value cannot be normalized or encoded.
        """
        steps = self._steps
        if len(steps) != 1:
            if self.nulls_distinct:
                for step in steps:
                    if source.get(step[0]) is None:  # A part absent: no lock (an optional pair, most often).
                        return None
            return self.key(self.values(source))
        step = steps[0]
        part = self._part(step, source.get(step[0]))
        if part is None:
            return None
        # A constraint that is not hashed, the usual one, joins its key here (no _joined call).
        return prefixed_lock_key(self._prefix, (part,)) if self.secret is None else self._joined((part,))

    def _part(self, step: _Step, value: Any) -> str | None:
        """One value's part of the key: a missing value is :data:`NULL_PART`, or None (no lock) when nulls are distinct.

        Raises:
            InvalidUniqueValue: the value cannot be normalized or encoded.
        """
        part = None if value is None else _encoded(step, value)
        if part is None and not self.nulls_distinct:
            return NULL_PART
        return part

    def _joined(self, parts: Sequence[str]) -> str:
        """The key of the encoded parts: plain (or its digest form), or the keyed digest of a hashed constraint."""
        if self.secret is not None:
            return hashed_lock_key(self.name, parts, self.secret())
        return prefixed_lock_key(self._prefix, parts)


def _encoded(step: _Step, value: Any) -> str | None:
    """One value's part of a lock key (None: the attribute serializes it to None, a missing value).

    Raises:
        InvalidUniqueValue: the value cannot be normalized or encoded.
    """
    attr_name, attr_type, normalize, serialize = step
    try:
        normalized = value if normalize is None else normalize(value)
        serialized = normalized if serialize is None else serialize(normalized)
    except InvalidUniqueValue:
        raise
    except Exception as exc:
        msg = f"{attr_name} {value!r} cannot be made a unique key: {exc}"
        raise InvalidUniqueValue(msg) from exc
    if serialized is None:
        return None
    try:
        return encode_part(attr_type, serialized)
    except InvalidUniqueValue as exc:
        msg = f"{attr_name} {value!r}: {exc.msg}"
        raise InvalidUniqueValue(msg) from None


def _refuse_nested(model: str, path: str, attribute: Attribute[Any], seen: set[type]) -> None:
    """Refuse ``UniqueAttribute`` inside a map or list attribute: only top-level values take locks.

    Raises:
        UniqueConfigError: a nested attribute is marked unique.
    """
    container = type(attribute)
    element = getattr(attribute, "element_type", None)  # ListAttribute(of=...): the element class.
    for kind, inner_type in ((container, None), (element, "[]")):
        if not isinstance(kind, type) or not issubclass(kind, MapAttribute) or kind in seen:
            continue
        seen.add(kind)
        for name, inner in kind.get_attributes().items():
            inner_path = f"{path}{inner_type or ''}.{name}"
            if isinstance(getattr(inner, _SPEC_ATTR, None), _UniqueSpec):
                msg = (
                    f"{model}: UniqueAttribute {inner_path!r} is inside a {kind.__name__}; only top-level "
                    "attributes can be unique (declare it on the model itself)"
                )
                raise UniqueConfigError(msg)
            _refuse_nested(model, inner_path, inner, seen)


def _check_name(model: str, name: str) -> None:
    if not _NAME_RE.fullmatch(name):
        msg = f"{model}: unique constraint name {name!r} may only use letters, digits, '_', '.', '-'"
        raise UniqueConfigError(msg)


def _normalizers(
    model: str, names: tuple[str, ...], normalize: Normalizer | Mapping[str, Normalizer] | None
) -> tuple[Normalizer | None, ...]:
    if normalize is None or callable(normalize):
        return tuple(normalize for _ in names)
    given: object = normalize  # Checked: a user's declaration, whatever its annotation says.
    if not isinstance(given, Mapping):
        msg = f"{model}: normalize must be a callable or a mapping of attribute names to callables, got {given!r}"
        raise UniqueConfigError(msg)
    unknown = set(normalize) - set(names)
    if unknown:
        msg = f"{model}: normalize names {sorted(unknown)} not in constraint {names}"
        raise UniqueConfigError(msg)
    return tuple(normalize.get(a) for a in names)


def resolve_constraints(
    model: str, attributes: Mapping[str, Attribute[Any]], declared: object, secret: object = None
) -> tuple[Constraint, ...]:
    """Collect and check a model's constraints.

    Args:
        model: the model's name, for messages.
        attributes: the model's attributes by Python name.
        declared: ``Meta.unique_constraints`` (None or a sequence of ``UniqueConstraint``).
        secret: ``Meta.unique_secret`` (bytes, or a callable returning bytes), for hashed
            constraints.

    Raises:
        UniqueConfigError: a constraint names a missing or unsupported attribute, names repeat,
            or ``declared`` is not a sequence of ``UniqueConstraint``.
    """
    # Each constraint with where it was declared (its origin: a subclass inherits the same one).
    found: list[tuple[UniqueConstraint, str, object]] = []
    for attr_name, attribute in attributes.items():
        spec = getattr(attribute, _SPEC_ATTR, None)
        if isinstance(spec, _UniqueSpec):
            uc = UniqueConstraint(
                attr_name,
                name=spec.name,
                normalize=spec.normalize,
                hashed=spec.hashed,
                message=spec.message,
                code=spec.code,
                former=spec.former,
                hold=spec.hold,
                nulls_distinct=spec.nulls_distinct,
            )
            found.append((uc, f"UniqueAttribute {attr_name!r}", spec))
        _refuse_nested(model, attr_name, attribute, set())
    if declared is not None:
        if isinstance(declared, (str, bytes)) or not isinstance(declared, (list, tuple)):
            msg = f"{model}: Meta.unique_constraints must be a list of UniqueConstraint"
            raise UniqueConfigError(msg)
        for uc in declared:
            if not isinstance(uc, UniqueConstraint):
                msg = f"{model}: Meta.unique_constraints holds {uc!r}, not a UniqueConstraint"
                raise UniqueConfigError(msg)
            found.append((uc, f"UniqueConstraint{uc.attribute_names!r}", uc))

    resolved = []
    for uc, where, origin in found:
        current = _resolve_one(model, attributes, uc, where, _secret_source(model, secret, hashed=uc.hashed), origin)
        former = _resolve_former(model, where, uc, current, secret)
        resolved.append(current if former is None else dataclasses.replace(current, former=former))
    names = [c.name for c in resolved]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        msg = f"{model}: unique constraint names must be distinct; repeated: {duplicates}"
        raise UniqueConfigError(msg)
    # A former form keeps its own namespace, or its constraint's: never another constraint's.
    for c in resolved:
        others = {n for o in resolved if o is not c for n in (o.name, *((o.former.name,) if o.former else ()))}
        if c.former is not None and c.former.name in others:
            msg = f"{model}: the former name {c.former.name!r} of {c.name} is another constraint's namespace"
            raise UniqueConfigError(msg)
    return tuple(resolved)


def _resolve_former(
    model: str, where: str, uc: UniqueConstraint, current: Constraint, secret: object
) -> Constraint | None:
    """The former form of a constraint, resolved as a constraint of its own (None: none declared).

    Raises:
        UniqueConfigError: ``former`` is not a :class:`Former`, changes nothing, or names a bad
            name, normalizer or secret.
    """
    given: object = uc.former  # Checked: a user's declaration, whatever its annotation says.
    if given is None:
        return None
    if not isinstance(given, Former):
        msg = f"{model}: {where}: former= must be a pynamodb_unique.Former(...), got {given!r}"
        raise UniqueConfigError(msg)
    former = given
    if all(value is SAME for value in (former.name, former.normalize, former.hashed, former.secret)):
        msg = f"{model}: {where}: Former() changes nothing; say what differed (name=, normalize=, hashed=, secret=)"
        raise UniqueConfigError(msg)
    name = current.name
    given_name: object = former.name
    if not isinstance(given_name, _Same):
        if not isinstance(given_name, str):
            msg = f"{model}: {where}: Former(name=) must be a string, got {given_name!r}"
            raise UniqueConfigError(msg)
        name = given_name
        _check_name(model, name)
    normalizers = current.normalizers
    if not isinstance(former.normalize, _Same):
        normalizers = _normalizers(f"{model}: {where}: Former", current.attributes, former.normalize)
    hashed = current.hashed if isinstance(former.hashed, _Same) else bool(former.hashed)
    source: SecretSource | None = None
    if not isinstance(former.secret, _Same):
        if not hashed:
            msg = f"{model}: {where}: Former(secret=) is the key of a hashed former form; it was not hashed"
            raise UniqueConfigError(msg)
        source = _secret_source(model, former.secret, hashed=True)
    elif hashed:
        source = current.secret or _secret_source(model, secret, hashed=True)
    return Constraint(
        name,
        current.attributes,
        normalizers,
        current.model_attributes,
        condition=current.condition,
        condition_attributes=current.condition_attributes,
        secret=source,
        explicit=True,
        origin=current.origin,
        message=current.message,
        code=current.code,
        hold=current.hold,
        nulls_distinct=current.nulls_distinct,
    )


def _secret_source(model: str, secret: object, *, hashed: bool) -> SecretSource | None:
    if not hashed:
        return None
    if isinstance(secret, (bytes, bytearray)) and secret:
        key = bytes(secret)
        return lambda: key
    if callable(secret):

        def call() -> bytes:
            value = secret()
            if not isinstance(value, (bytes, bytearray)) or not value:
                msg = f"{model}: Meta.unique_secret() must return non-empty bytes, got {type(value).__name__}"
                raise UniqueConfigError(msg)
            return bytes(value)

        return call
    msg = f"{model}: a hashed unique constraint needs Meta.unique_secret (non-empty bytes or a callable)"
    raise UniqueConfigError(msg)


def _resolve_one(
    model: str,
    attributes: Mapping[str, Attribute[Any]],
    uc: UniqueConstraint,
    where: str,
    secret: SecretSource | None,
    origin: object,
) -> Constraint:
    if not uc.attribute_names:
        msg = f"{model}: {where} names no attribute"
        raise UniqueConfigError(msg)
    if len(set(uc.attribute_names)) != len(uc.attribute_names):
        msg = f"{model}: {where} names an attribute twice"
        raise UniqueConfigError(msg)
    model_attributes = []
    for attr_name in uc.attribute_names:
        found_attribute = attributes.get(attr_name)
        if found_attribute is None:
            msg = f"{model}: {where} names {attr_name!r}, which is not an attribute of the model"
            raise UniqueConfigError(msg)
        attribute = found_attribute
        if attribute.attr_type not in _KEYABLE_TYPES or isinstance(attribute, JSONAttribute):
            msg = (
                f"{model}: {where}: {attr_name!r} is a {type(attribute).__name__}; "
                "only string, number and binary attributes can be unique"
            )
            raise UniqueConfigError(msg)
        model_attributes.append(attribute)
    _refuse_primary_key(model, attributes, uc.attribute_names, where)
    name = uc.name if uc.name is not None else "_".join(a.upper() for a in uc.attribute_names)
    _check_name(model, name)
    samples = tuple(SAMPLES[a.attr_type] for a in model_attributes)
    check_message(f"{model}: {where}", name, uc.attribute_names, uc.message, uc.code, samples)
    if not callable(uc.condition if uc.condition is not None else len):
        msg = f"{model}: {where}: condition must be callable"
        raise UniqueConfigError(msg)
    for attr_name in uc.condition_attributes or ():
        if attr_name not in attributes:
            msg = f"{model}: {where}: condition_attributes names {attr_name!r}, not an attribute of the model"
            raise UniqueConfigError(msg)
    return Constraint(
        name,
        uc.attribute_names,
        _normalizers(model, uc.attribute_names, uc.normalize),
        tuple(model_attributes),
        condition=uc.condition,
        condition_attributes=uc.condition_attributes or (),
        secret=secret,
        explicit=uc.name is not None,
        origin=origin,
        message=uc.message,
        code=uc.code,
        hold=_hold(model, where, uc.hold),
        nulls_distinct=_nulls_distinct(model, where, uc.nulls_distinct),
    )


def _refuse_primary_key(model: str, attributes: Mapping[str, Attribute[Any]], names: Sequence[str], where: str) -> None:
    """Refuse a constraint over the whole primary key, which DynamoDB keeps unique already.

    The hash key alone of a table with a range key is no unique key ("one latest version per
    name" on a table keyed by name and version), and may be constrained.

    Raises:
        UniqueConfigError: ``names`` include the hash key and, if the table has one, the range key.
    """
    keys = [n for n, a in attributes.items() if a.is_hash_key] + [n for n, a in attributes.items() if a.is_range_key]
    if not keys or not set(keys) <= set(names):
        return
    what = f"the hash key {keys[0]!r}" if len(keys) == 1 else f"the table's key ({keys[0]!r}, {keys[1]!r})"
    msg = f"{model}: {where} names {what}, which DynamoDB already keeps unique"
    raise UniqueConfigError(msg)


def _hold(model: str, where: str, hold: object) -> timedelta | None:
    """A checked ``hold=``: None, or a positive ``timedelta`` of whole seconds or more."""
    if hold is None:
        return None
    if not isinstance(hold, timedelta) or hold < timedelta(seconds=1):
        msg = f"{model}: {where}: hold= must be a timedelta of at least one second, got {hold!r}"
        raise UniqueConfigError(msg)
    return hold


def _nulls_distinct(model: str, where: str, given: object) -> bool:
    """A checked ``nulls_distinct=``: a bool (a truthy string would silently keep the default).

    Raises:
        UniqueConfigError: ``nulls_distinct`` is not a bool.
    """
    if not isinstance(given, bool):
        msg = f"{model}: {where}: nulls_distinct= must be True or False, got {given!r}"
        raise UniqueConfigError(msg)
    return given
