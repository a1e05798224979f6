"""Model-based test: random operation sequences, each outcome predicted by a plain-Python model.

Three records, three emails (two equal once case-folded), two usernames, two (tenant, slug)
pairs: collisions are frequent. Instances are kept between steps, so writes through instances
loaded before another change (stale writes) are frequent too. After every step the table must
hold exactly the model's records, and lock items must match live values one to one.

The same machine runs against the model during a migration (``Former``): emails case-folded with
their former case-sensitive form, and the username constraint renamed from HANDLE to LOGIN. Every
write then keeps the locks of both forms, and a value is taken when either form is held.

``PYNAMODB_UNIQUE_EXAMPLES=1000`` raises the number of examples for long runs.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar
from unittest import mock

import _invariant
import pytest
from _backends import Backend, bind_model
from _invariant import assert_invariant, raw_items
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule, run_state_machine_as_test
from models import Account
from pynamodb.attributes import UnicodeAttribute
from pynamodb.expressions.update import Action

from pynamodb_unique import ConditionFailed, Former, StaleWrite, UniqueAttribute, UniqueViolation
from pynamodb_unique._model.registry import planner_of

# The state machine runs against the real server (on moto it took three times as long).
pytestmark = pytest.mark.backends("dynoxide")

PKS = ("A", "B", "C")
EMAILS = ("a@x", "b@x", "B@X")
USERNAMES = ("u1", "u2", None)
TENANTS = ("t1", "t2", None)
SLUGS = ("s", None)
BIOS = ("x", "y", None)
KEEP = "<keep>"
REMOVE = "<remove>"

FIELDS = ("email", "username", "tenant", "slug", "bio")
UNIQUE = ("email", "username", "tenant", "slug")
RANGE = "PROFILE"
#: Plans the library sends before giving up with StaleWrite (the mixin's MAX_PLANS).
MAX_PLANS = 4
MAX_HANDLES = 6

EXAMPLES = 160
#: During a migration: fewer examples (the same rules; the forms add keys, not paths).
MIGRATING_EXAMPLES = 80
STEPS = 25


def _examples(examples: int) -> int:
    raised = os.environ.get("PYNAMODB_UNIQUE_EXAMPLES")
    return int(raised) if raised else examples


class MigratingAccount(Account):
    """Account during a migration: emails case-folded (were case-sensitive), HANDLE renamed LOGIN."""

    class Meta(Account.Meta):
        table_name = "migrating-accounts"  # Its own namespaces: its email constraint is not Account's.

    email = UniqueAttribute(UnicodeAttribute(), normalize=str.casefold, former=Former(normalize=None))
    username = UniqueAttribute(UnicodeAttribute(null=True), name="LOGIN", former=Former(name="HANDLE"))


# The model: what a user of the library is promised.

#: A lock as the model sees it: its namespace and the normalized value(s) it locks.
Key = tuple[str, tuple[Any, ...]]


@dataclass(frozen=True)
class Form:
    """One form of a constraint: its namespace and whether its emails are case-folded."""

    namespace: str
    casefold: bool


@dataclass(frozen=True)
class Constraint:
    """A constraint as the model sees it: reported name, attributes, its forms (current first)."""

    name: str
    attributes: tuple[str, ...]
    forms: tuple[Form, ...]


#: Account's constraints, in the order their locks are sent (and violations reported).
PLAIN = (
    Constraint("EMAIL", ("email",), (Form("EMAIL", casefold=True),)),
    Constraint("HANDLE", ("username",), (Form("HANDLE", casefold=False),)),
    Constraint("TENANT_SLUG", ("tenant", "slug"), (Form("TENANT_SLUG", casefold=False),)),
)
#: MigratingAccount's: the current form, then the former one.
MIGRATING = (
    Constraint("EMAIL", ("email",), (Form("EMAIL", casefold=True), Form("EMAIL", casefold=False))),
    Constraint("LOGIN", ("username",), (Form("LOGIN", casefold=False), Form("HANDLE", casefold=False))),
    Constraint("TENANT_SLUG", ("tenant", "slug"), (Form("TENANT_SLUG", casefold=False),)),
)


def lock_keys(constraints: tuple[Constraint, ...], values: Mapping[str, Any]) -> dict[Key, Constraint]:
    """Every lock a record holding ``values`` holds, in the order sent; a key two forms share is one lock."""
    out: dict[Key, Constraint] = {}
    for constraint in constraints:
        parts = tuple(values.get(a) for a in constraint.attributes)
        if any(p is None for p in parts):
            continue
        for form in constraint.forms:
            normalized = tuple(
                p.casefold() if a == "email" and form.casefold else p
                for a, p in zip(constraint.attributes, parts, strict=True)
            )
            out.setdefault((form.namespace, normalized), constraint)
    return out


def unique_part(values: Mapping[str, Any]) -> dict[str, Any]:
    return {n: values.get(n) for n in UNIQUE}


@dataclass(frozen=True)
class Belief:
    """What an instance believes is stored: whether the record exists, and its unique values."""

    exists: bool
    values: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "values", unique_part(self.values))


@dataclass
class Handle:
    """A live instance and the model's prediction of its attributes and belief (None: unknown)."""

    instance: Account
    attrs: dict[str, Any]
    belief: Belief | None


@dataclass(frozen=True)
class Outcome:
    """A predicted result: ``ok``, ``violation`` (with its violations), ``condition`` or ``stale``."""

    kind: str
    violations: tuple[tuple[str, tuple[Any, ...], str], ...] = ()
    desired: Mapping[str, Any] = field(default_factory=dict)
    transactional: bool = False
    plans: int = 1


class TableModel:
    """The records a table should hold, and how a write through an instance turns out.

    A write plans from what its instance believes is stored: it releases the lock of each value
    it gives up and takes the lock of each value it gains; the record is written only if its
    unique values are still what was believed. Taken locks are reported at once, every one
    of the request; a stale belief re-plans from the stored record (last writer wins).
    """

    def __init__(self, constraints: tuple[Constraint, ...]) -> None:
        self.constraints = constraints
        self.records: dict[str, dict[str, Any]] = {}

    def stored(self, pk: str) -> Belief:
        record = self.records.get(pk)
        return Belief(record is not None, record or {})

    def owner(self, key: Key) -> str | None:
        for pk, record in self.records.items():
            if key in lock_keys(self.constraints, record):
                return pk
        return None

    def unique_values_are(self, pk: str, values: Mapping[str, Any]) -> bool:
        """The record's compare-and-swap: each unique attribute equals the value, or is absent for None."""
        record = self.records.get(pk, {})
        return all(record.get(n) == values.get(n) for n in UNIQUE)

    def write(self, pk: str, op: str, assumed: Belief, desire: Callable[[Belief], dict[str, Any]]) -> Outcome:
        not_ours: set[Key] = set()
        for plans in range(1, MAX_PLANS + 1):
            desired = desire(assumed)
            before = lock_keys(self.constraints, assumed.values) if assumed.exists else {}
            after = lock_keys(self.constraints, desired) if op != "delete" else {}
            releases = {k: c for k, c in before.items() if k not in after and k not in not_ours}
            puts = {k: c for k, c in after.items() if k not in before}
            # Each constraint is reported once, by the first of its taken locks as sent.
            taken: dict[str, tuple[Constraint, str]] = {}
            for k, c in puts.items():
                if (owner := self.owner(k)) not in (None, pk):
                    taken.setdefault(c.name, (c, owner))
            if taken:
                violations = tuple((c.name, tuple(desired.get(a) for a in c.attributes), o) for c, o in taken.values())
                return Outcome("violation", violations, plans=plans)
            exists = pk in self.records
            if op == "delete":
                record_ok = not exists or self.unique_values_are(pk, assumed.values if assumed.exists else {})
            elif assumed.exists:
                record_ok = self.unique_values_are(pk, assumed.values)
            else:
                record_ok = not exists
            foreign = {k for k in releases if self.owner(k) not in (None, pk)}
            if record_ok and not foreign:
                return Outcome("ok", desired=desired, transactional=bool(puts or releases), plans=plans)
            if record_ok:
                not_ours |= foreign
                continue
            if self.stored(pk) == assumed:
                return Outcome("condition", plans=plans)
            assumed = self.stored(pk)
        return Outcome("stale", plans=MAX_PLANS)


def _apply(values: Mapping[str, Any], changes: Mapping[str, Any]) -> dict[str, Any]:
    merged = {**values, **changes}
    return {k: v for k, v in merged.items() if v is not None}


def _full(record: Mapping[str, Any]) -> dict[str, Any]:
    return {n: record.get(n) for n in FIELDS}


# The machine.

STATS: Counter[str] = Counter()


def _choice(values: tuple[Any, ...], *extra: str) -> st.SearchStrategy[Any]:
    return st.sampled_from((*extra, *values))


class AccountMachine(RuleBasedStateMachine):
    """Drives one bound Account model; ``model`` and its ``constraints`` are set by the test."""

    model: ClassVar[type[Account]]
    constraints: ClassVar[tuple[Constraint, ...]]

    def __init__(self) -> None:
        super().__init__()
        client = self.model._get_connection().connection.client
        for item in raw_items(self.model):
            client.delete_item(TableName=self.model.Meta.table_name, Key={"PK": item["PK"], "SK": item["SK"]})
        self.table = TableModel(self.constraints)
        self.handles: list[Handle] = []
        STATS["examples"] += 1

    # Helpers.

    def _keep(self, handle: Handle) -> None:
        self.handles.append(handle)
        if len(self.handles) > MAX_HANDLES:
            self.handles.pop(0)

    def _pick(self, index: int) -> Handle:
        return self.handles[index % len(self.handles)]

    def _note(self, rule: str, handle: Handle, outcome: Outcome) -> None:
        pk = handle.instance.pk
        STATS[f"{rule}:{outcome.kind}"] += 1
        STATS["steps"] += 1
        STATS[f"plans {outcome.plans}"] += 1
        if handle.belief is not None and handle.belief != self.table.stored(pk):
            STATS["stale writes"] += 1

    def _check(self, predicted: Outcome, call: Callable[[], object]) -> None:
        """Run the call and compare what the user sees with the prediction."""
        try:
            call()
        except (UniqueViolation, ConditionFailed, StaleWrite) as exc:
            error: Exception | None = exc
        else:
            error = None
        kinds = {UniqueViolation: "violation", ConditionFailed: "condition", StaleWrite: "stale"}
        seen = "ok" if error is None else kinds[type(error)]
        assert seen == predicted.kind, f"{error!r}, but the model predicted {predicted}"
        if isinstance(error, UniqueViolation):
            got = tuple((v.constraint, v.values, v.owner) for v in error.violations)
            assert got == tuple((c, values, (owner, RANGE)) for c, values, owner in predicted.violations)
            attributes = {c.name: c.attributes for c in self.constraints}
            named = tuple(dict.fromkeys(a for c, _, _ in predicted.violations for a in attributes[c]))
            assert error.attributes == named

    def _instance_as_predicted(self, handle: Handle) -> None:
        seen = {n: getattr(handle.instance, n) for n in FIELDS}
        assert seen == handle.attrs

    def _save(self, rule: str, handle: Handle) -> None:
        pk = handle.instance.pk
        assumed = handle.belief or Belief(exists=False)
        desired = unique_part(handle.attrs)
        predicted = self.table.write(pk, "put", assumed, lambda _: desired)
        self._note(rule, handle, predicted)
        self._check(predicted, handle.instance.save)
        if predicted.kind == "ok":
            self.table.records[pk] = _apply({}, handle.attrs)
            handle.belief = Belief(exists=True, values=desired)
        self._instance_as_predicted(handle)

    # Rules.

    @rule(
        pk=st.sampled_from(PKS),
        email=_choice(EMAILS),
        username=_choice(USERNAMES),
        tenant=_choice(TENANTS),
        slug=_choice(SLUGS),
        bio=_choice(BIOS),
    )
    def save_new_instance(self, pk: str, email: str, username: str, tenant: str, slug: str, bio: str) -> None:
        """Account(pk=..., ...).save(): a create, or an overwrite when the record exists (unknown state)."""
        attrs = {"email": email, "username": username, "tenant": tenant, "slug": slug, "bio": bio}
        handle = Handle(self.model(pk=pk, **attrs), attrs, belief=None)
        self._save("overwrite" if pk in self.table.records else "create", handle)
        self._keep(handle)

    @rule(pk=st.sampled_from(PKS))
    def load(self, pk: str) -> None:
        """get() a record and keep the instance; writes through it later may be stale."""
        try:
            instance = self.model.get(pk, RANGE, consistent_read=True)
        except self.model.DoesNotExist:
            assert pk not in self.table.records
            return
        record = self.table.records[pk]
        handle = Handle(instance, _full(record), Belief(exists=True, values=record))
        self._instance_as_predicted(handle)
        self._keep(handle)

    @precondition(lambda self: self.handles)
    @rule(
        index=st.integers(0, MAX_HANDLES - 1),
        email=_choice(EMAILS, KEEP),
        username=_choice(USERNAMES, KEEP),
        tenant=_choice(TENANTS, KEEP),
        slug=_choice(SLUGS, KEEP),
        bio=_choice(BIOS, KEEP),
    )
    def save_changes(self, index: int, email: str, username: str, tenant: str, slug: str, bio: str) -> None:
        """Change attributes of a kept instance and save() it (last writer wins)."""
        handle = self._pick(index)
        changes = {"email": email, "username": username, "tenant": tenant, "slug": slug, "bio": bio}
        changes = {n: v for n, v in changes.items() if v != KEEP}
        if changes.get("email", handle.attrs["email"]) is None:
            changes["email"] = EMAILS[0]  # email is not nullable: PynamoDB refuses None before sending.
        for name, value in changes.items():
            setattr(handle.instance, name, value)
            handle.attrs[name] = value
        self._save("save", handle)

    @precondition(lambda self: self.handles)
    @rule(index=st.integers(0, MAX_HANDLES - 1), name=st.sampled_from(("username", "tenant", "slug")))
    def set_to_none(self, index: int, name: str) -> None:
        """Set a nullable unique attribute to None and save(): its lock is released."""
        handle = self._pick(index)
        if handle.attrs["email"] is None:
            handle.instance.email = handle.attrs["email"] = EMAILS[0]
        setattr(handle.instance, name, None)
        handle.attrs[name] = None
        self._save("set_none", handle)

    @precondition(lambda self: self.handles)
    @rule(
        index=st.integers(0, MAX_HANDLES - 1),
        email=_choice(EMAILS[:2], KEEP, REMOVE),
        username=_choice(USERNAMES[:2], KEEP, REMOVE),
        tenant=_choice(TENANTS[:2], KEEP, REMOVE),
        slug=_choice(SLUGS[:1], KEEP, REMOVE),
        bio=_choice(BIOS[:2], KEEP, REMOVE),
    )
    def update(self, index: int, email: str, username: str, tenant: str, slug: str, bio: str) -> None:
        """update(actions) with literal set() and remove() through a kept instance."""
        handle = self._pick(index)
        pk = handle.instance.pk
        chosen = {"email": email, "username": username, "tenant": tenant, "slug": slug, "bio": bio}
        changes = {n: None if v == REMOVE else v for n, v in chosen.items() if v != KEEP} or {"bio": "y"}
        actions: list[Action] = [
            getattr(self.model, n).remove() if v is None else getattr(self.model, n).set(v) for n, v in changes.items()
        ]
        unique_changes = {n: v for n, v in changes.items() if n in UNIQUE}
        if unique_changes:
            assumed = handle.belief or Belief(exists=True, values=handle.attrs)
            predicted = self.table.write(pk, "update", assumed, lambda a: {**a.values, **unique_changes})
        else:
            predicted = Outcome("ok")  # PynamoDB's own UpdateItem: no condition, an upsert.
        self._note("update", handle, predicted)
        self._check(predicted, lambda: handle.instance.update(actions=actions))
        if predicted.kind == "ok":
            record = self.table.records[pk] = _apply(self.table.records.get(pk, {}), changes)
            # As PynamoDB's update(): the instance loads the stored item after the write (ALL_NEW),
            # whether it went as an UpdateItem or as a transaction.
            handle.attrs = _full(record)
            handle.belief = Belief(exists=True, values=record)
        self._instance_as_predicted(handle)

    @precondition(lambda self: self.handles)
    @rule(index=st.integers(0, MAX_HANDLES - 1))
    def delete(self, index: int) -> None:
        """delete() through a kept instance: removes the stored record and releases its values."""
        handle = self._pick(index)
        pk = handle.instance.pk
        assumed = handle.belief or Belief(exists=True, values=handle.attrs)
        predicted = self.table.write(pk, "delete", assumed, lambda _: {})
        self._note("delete", handle, predicted)
        self._check(predicted, handle.instance.delete)
        if predicted.kind == "ok":
            self.table.records.pop(pk, None)
            handle.belief = Belief(exists=False)
        self._instance_as_predicted(handle)

    @invariant()
    def table_matches_model(self) -> None:
        """The table holds the model's records, and locks match live values one to one."""
        items = raw_items(self.model)
        records = {}
        for item in items:
            if not item["PK"]["S"].startswith("UNIQ#"):
                instance = self.model.from_raw_data(item)
                records[instance.pk] = {n: v for n in FIELDS if (v := getattr(instance, n)) is not None}
        assert records == self.table.records
        # One scan per step serves both checks (each scan costs about 10 ms on moto).
        with mock.patch.object(_invariant, "raw_items", return_value=items):
            assert_invariant(self.model)


def _run(model: type[Account], constraints: tuple[Constraint, ...], examples: int, label: str) -> None:
    machine = type("AccountMachine", (AccountMachine,), {"model": model, "constraints": constraints})
    STATS.clear()
    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=examples,
            stateful_step_count=STEPS,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        ),
    )
    figures = ", ".join(f"{k}={v}" for k, v in sorted(STATS.items()))
    print(f"\n[state machine] {label}: {figures}")
    assert STATS["examples"] >= examples
    assert STATS["save:violation"] + STATS["create:violation"] + STATS["overwrite:violation"] > 0


def test_state_machine__model_predicts_every_outcome(backend: Backend) -> None:
    """Random create/save/update/delete/overwrite/stale sequences: each outcome is as the model says."""
    assert [c.name for c in planner_of(Account).constraints] == [c.name for c in PLAIN]
    _run(bind_model(Account, backend), PLAIN, _examples(EXAMPLES), backend.name)


def test_state_machine__during_a_migration__both_forms_kept(backend: Backend) -> None:
    """The same sequences while two constraints keep their former forms: both forms' locks, one violation each."""
    model = bind_model(MigratingAccount, backend)
    assert [c.name for c in planner_of(model).constraints] == [c.name for c in MIGRATING]
    _run(model, MIGRATING, _examples(MIGRATING_EXAMPLES), f"{backend.name}, migrating")
