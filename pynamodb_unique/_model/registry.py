"""The registry of unique models: which models keep locks in which table, and their namespaces.

A constraint's name is a namespace of the table that holds its locks. Two models may share a
name only when it is one constraint inherited from a common base, or when both name it
explicitly (``name=``) with compatible shapes. A name both derived from an attribute name is a
clash, refused when the second class is defined.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from pynamodb.attributes import DiscriminatorAttribute

from ..exceptions import UniqueConfigError

if TYPE_CHECKING:
    from pynamodb.models import Model

    from .._core.constraint import Constraint
    from .._core.plan import Planner

_M = TypeVar("_M", bound="Model")


class Table(NamedTuple):
    """A table as a model's requests reach it: its name, endpoint (``Meta.host``) and Region.

    Tables of one name on two endpoints or in two Regions are two tables. ``str()`` gives the
    name, as a table is named to people and in an export mapping.
    """

    name: str
    host: str | None
    region: str | None

    def __str__(self) -> str:
        return self.name

    def where(self) -> str:
        """The endpoint and Region, for a message."""
        return f"{self.host or 'the AWS endpoint'}, region {self.region or 'unset'}"


#: A table: what Meta says now (tables and hosts set after class definition count); None for a
#: model whose Meta names no table yet.
TableId = Table | None

_mutex = threading.Lock()
# (module, qualified name, table at definition) -> model. A class defined again under the same
# module and qualified name for the same table (a reload, a test) replaces its earlier registration.
# Held weakly: a model class nothing else uses any more (a test's, a reloaded module's) goes, and
# with it its connection and botocore client.
_models: dict[tuple[str, str, TableId], weakref.ref[type[Model]]] = {}
# Answers of holds_locks and maintains_locks per model, dropped whenever a model registers.
_cache: dict[tuple[str, int], tuple[TableId, TableId, bool]] = {}
#: How many times a model has registered: what was derived from the registry (a model's lock
#: table, which it may share with models registered since) is stale once it changes.
registrations = 0


def table_id(model: type[Model], table_name: str | None = None) -> TableId:
    """The identity of ``model``'s table (or of ``table_name``, on the same endpoint and in the same Region)."""
    meta = getattr(model, "Meta", None)
    name = table_name or getattr(meta, "table_name", None)
    if not name:
        return None
    return Table(str(name), getattr(meta, "host", None), getattr(meta, "region", None))


def identity(model: type[Model]) -> tuple[str, str, TableId]:
    """What tells a model class apart: its module, qualified name and table.

    A class made again under the same identity (a class factory, a reload, a test helper) is the
    same model to the registry and the tools, its latest definition registered.
    """
    return model.__module__, model.__qualname__, table_id(model)


def same_model(a: type[Model], b: type[Model]) -> bool:
    """Whether two classes are one model (:func:`identity`): the same class, or one defined again."""
    return a is b or identity(a) == identity(b)


def _shape(model: type[Model]) -> tuple[Any, ...]:
    """What a model's constraints are, as far as its locks show: names, attributes, hashing, forms."""
    forms = [(c.name, tuple(c.attributes), c.hashed, c.former and c.former.name) for c in constraints_of(model)]
    return (*forms, lock_table_id(model))


def check_twins(model: type[Model]) -> None:
    """Refuse an older definition of a model (same :func:`identity`) whose constraints the registered one changed.

    The registered class is the latest definition: the tools read the table as its model. An
    older class still alive with the same constraints is that model; with others (a class
    factory given other arguments, a test defining the model again) the tools cannot tell
    whose locks are whose.

    Raises:
        UniqueConfigError: the registered class of ``model``'s identity keeps other locks
            (constraints, their former forms, or lock table).
    """
    for other in _registered():
        if other is model or not same_model(model, other) or _shape(other) == _shape(model):
            continue
        table = table_id(model)
        where = table.where() if table is not None else "no table"
        msg = (
            f"two classes {model.__module__}.{model.__qualname__} use table {str(table)!r} ({where}) "
            f"with different constraints: {_forms(model)} (this one) and {_forms(other)} (the one "
            f"defined later, also of module {other.__module__}, which the tools read as the model); "
            "use the later class, or give the classes different names (or __qualname__) or tables"
        )
        raise UniqueConfigError(msg)


def _forms(model: type[Model]) -> list[str]:
    """A model's constraint names for a message, each with its former form's name (a migration)."""
    return [c.name if c.former is None else f"{c.name} (former form {c.former.name})" for c in constraints_of(model)]


def separate_lock_table(model: type[Model]) -> str | None:
    """The name of the table of its own that holds ``model``'s locks (``Meta.unique_lock_table``), or None."""
    name = getattr(getattr(model, "Meta", None), "unique_lock_table", None)
    return str(name) if name else None


def lock_table_id(model: type[Model]) -> TableId:
    """The identity of the table that holds ``model``'s locks."""
    return table_id(model, separate_lock_table(model))


def _registered() -> list[type[Model]]:
    with _mutex:
        return [model for _, model in _live()]


def _live() -> list[tuple[tuple[str, str, TableId], type[Model]]]:
    """The registered models still alive, by registration key (the mutex held); forget the others."""
    alive = []
    for key, ref in list(_models.items()):
        model = ref()
        if model is None:
            del _models[key]
        else:
            alive.append((key, model))
    return alive


def _cached(question: str, model: type[Model], answer: Any) -> bool:
    """A registry answer about ``model``, kept until a model registers or its Meta's tables change."""
    key = (question, id(model))
    tables = (table_id(model), lock_table_id(model))
    found = _cache.get(key)
    if found is not None and found[:2] == tables:
        return found[2]
    value = bool(answer())
    _cache[key] = (*tables, value)
    return value


class Pending:
    """A unique model's context until its first use, when PynamoDB's metaclass has finished the class.

    The mixin has no metaclass of its own, so that it composes with an application's (an
    abstract base's ``class Meta(MetaModel, ABCMeta)``): its ``__init_subclass__`` runs before
    PynamoDB's metaclass collects the attributes, and leaves this in the class's ``_uniq``.
    """

    _lock = threading.RLock()

    def __init__(self, build: Callable[[type[Model]], Any]) -> None:
        self._build = build

    def settle(self, model: type[Model]) -> Any:
        """Build ``model``'s context (None: an abstract model) once, and keep it in its ``_uniq``."""
        with self._lock:
            current = vars(model).get("_uniq")
            if current is not self:  # Built meanwhile by another thread.
                return current
            built = self._build(model)
            model._uniq = built  # type: ignore[attr-defined]  # noqa: SLF001 - the mixin's own class attribute.
            return built


def settled(model: type[Model]) -> Any:
    """``model``'s ``_uniq``: its context, built on first use (None: abstract, or no unique model)."""
    context = getattr(model, "_uniq", None)
    return context.settle(model) if isinstance(context, Pending) else context


def planner_of(model: type[Model]) -> Planner | None:
    """The planner of ``model``'s context (None: an abstract or non-unique model)."""
    planner: Planner | None = getattr(settled(model), "planner", None)
    return planner


def constraints_of(model: type[Model]) -> tuple[Constraint, ...]:
    """The constraints a model declares or inherits (empty for models without any)."""
    planner = planner_of(model)
    return planner.constraints if planner is not None else ()


def namespaces_of(model: type[Model]) -> tuple[Constraint, ...]:
    """Every form whose locks a model's writes keep: its constraints, then their former forms (a migration)."""
    constraints = constraints_of(model)
    return (*constraints, *(c.former for c in constraints if c.former is not None))


def _related(a: type[Model], b: type[Model]) -> bool:
    return issubclass(a, b) or issubclass(b, a)


def _check(model: type[Model], other: type[Model], mine: Constraint, theirs: Constraint) -> None:
    """Refuse two constraints sharing a namespace unless they are one, or both name it explicitly."""
    if mine.origin is theirs.origin or _related(model, other):
        return
    where = f"{model.__name__} and {other.__name__} ({other.__module__}) both keep locks named {mine.name!r}"
    if table_id(model) != table_id(other):
        # A lock names its owner by record key, and keys are unique within one table only.
        msg = (
            f"{where} in one lock table, but their records live in different tables "
            f"({table_id(model)!r}, {table_id(other)!r}); a namespace can be shared only by models of one table"
        )
        raise UniqueConfigError(msg)
    if not (mine.explicit and theirs.explicit):
        msg = (
            f"{where} in one table, derived from attribute names; give each its own name= (or the same "
            "explicit name= on both to share one namespace)"
        )
        raise UniqueConfigError(msg)
    if len(mine.attributes) != len(theirs.attributes) or mine.hashed != theirs.hashed:
        msg = (
            f"{where}: a shared namespace needs the same number of parts ({len(mine.attributes)} vs "
            f"{len(theirs.attributes)}) and the same hashed flag ({mine.hashed} vs {theirs.hashed})"
        )
        raise UniqueConfigError(msg)
    if mine.nulls_distinct != theirs.nulls_distinct:
        # One model's missing value would be taken, the other's not: the namespace would mean two things.
        msg = (
            f"{where}: a shared namespace needs the same nulls_distinct ({mine.nulls_distinct} vs "
            f"{theirs.nulls_distinct})"
        )
        raise UniqueConfigError(msg)


def register(model: type[Model], constraints: Sequence[Constraint]) -> None:
    """Record a concrete unique model, after checking its namespaces against its neighbours'.

    Args:
        model: the model, while its class is being defined.
        constraints: its constraints, as checked at its definition.

    Raises:
        UniqueConfigError: a constraint name clashes with another model's in the same lock table.
    """
    ident = identity(model)
    locks = lock_table_id(model)
    mine = (*constraints, *(c.former for c in constraints if c.former is not None))
    global registrations  # noqa: PLW0603 - the registry is module state, guarded by the mutex.
    with _mutex:
        _cache.clear()
        registrations += 1
        for key, other in _live():
            if key == ident or locks is None or lock_table_id(other) != locks:
                continue
            theirs = {c.name: c for c in namespaces_of(other)}
            for constraint in mine:
                if constraint.name in theirs:
                    _check(model, other, constraint, theirs[constraint.name])
        _models[ident] = weakref.ref(model)


def lock_sharers(model: type[Model]) -> list[type[Model]]:
    """The registered models keeping locks in ``model``'s lock table, ``model`` first.

    Their locks may share namespaces (a polymorphic family, an explicit ``name=``), so how a lock
    expires is settled across all of them.
    """
    locks = lock_table_id(model)
    others = [m for m in _registered() if m is not model and constraints_of(m) and lock_table_id(m) == locks]
    return [model, *others] if locks is not None else [model]


def table_neighbours(model: type[Model]) -> list[type[Model]]:
    """The registered models whose records live in ``model``'s table, ``model`` included.

    A class defined again under ``model``'s identity stands for ``model`` (one model): ``model``
    is listed in its place.
    """
    table = table_id(model)
    if table is None:
        return []
    found = [m for m in _registered() if table_id(m) == table and not same_model(m, model)]
    return [model, *found]


def holds_locks(model: type[Model]) -> bool:
    """Whether lock items live among ``model``'s records: some registered model keeps its locks there."""
    table = table_id(model)
    return _cached("holds", model, lambda: any(constraints_of(m) and lock_table_id(m) == table for m in _registered()))


def holds_reservations(model: type[Model]) -> bool:
    """Whether reservations' lock items may live among ``model``'s records (``Meta.unique_reservations``)."""
    table = table_id(model)
    return _cached(
        "reservations",
        model,
        lambda: any(
            constraints_of(m) and getattr(m.Meta, "unique_reservations", False) and lock_table_id(m) == table
            for m in _registered()
        ),
    )


def family(model: type[Model]) -> list[type[Model]]:
    """The registered models sharing ``model``'s discriminator attribute (polymorphism), or just ``model``."""
    attribute = discriminator(model)
    if attribute is None:
        return [model]
    return [m for m in table_neighbours(model) if discriminator(m) is attribute]


def discriminator(model: type[Model]) -> Any:
    """``model``'s DiscriminatorAttribute, or None."""
    return next((a for a in model.get_attributes().values() if isinstance(a, DiscriminatorAttribute)), None)


def maintains_locks(model: type[Model]) -> bool:
    """Whether ``model``'s writes must move locks: it has constraints, or a polymorphic relative has.

    A model of a family in which some subclass keeps locks may find that subclass's item stored
    under its key, and must release those locks when it replaces it.
    """
    if constraints_of(model):
        return True
    if discriminator(model) is None:
        return False
    return _cached("maintains", model, lambda: any(constraints_of(m) for m in family(model)))


def stored_class(model: type[_M], item: Mapping[str, Any]) -> type[_M]:
    """The class a stored item belongs to: another class of ``model``'s polymorphic family, or ``model``.

    Raises:
        ValueError: the item's discriminator value is unknown.
    """
    attribute = discriminator(model)
    if attribute is None:
        return model
    value = item.get(attribute.attr_name)
    if not value:
        return model
    found: type[_M] = attribute.deserialize(next(iter(value.values())))
    return found


def declaring(model: type[Model], names: set[str]) -> list[type[Model]]:
    """The registered models keeping locks in ``model``'s lock table under any of ``names`` (former forms too)."""
    locks = lock_table_id(model)
    return [m for m in _registered() if lock_table_id(m) == locks and any(c.name in names for c in namespaces_of(m))]


def item_filter(model: type[Model]) -> Any:
    """``Meta.unique_item_filter(model)``: the condition its records meet in a shared table, or None."""
    make = getattr(model.Meta, "unique_item_filter", None)
    return None if make is None else make(model)
