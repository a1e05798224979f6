"""A constraint's former form (``Former``): declaration checks, planning both forms, reading reasons."""

from __future__ import annotations

from typing import Any

import pytest
from _backends import Backend, bind_model
from _invariant import assert_invariant
from pynamodb.attributes import UnicodeAttribute
from pynamodb.connection import TableConnection
from pynamodb.exceptions import CancellationReason
from pynamodb.models import Model

from pynamodb_unique import (
    Former,
    TransactWrite,
    UniqueAttribute,
    UniqueConfigError,
    UniqueConstraint,
    UniqueMixin,
    UniqueViolation,
)
from pynamodb_unique._core.outcome import interpret
from pynamodb_unique._core.plan import LockPut, Planner, RecordWrite, Stored, former_slot
from pynamodb_unique._model.context import context_of
from pynamodb_unique._model.locks import LockTable
from pynamodb_unique._model.registry import planner_of
from pynamodb_unique._write.requests import build_request

OLD_SECRET = b"old-secret"
NEW_SECRET = b"new-secret"


class Migrating(UniqueMixin, Model):
    """Every kind of migration at once: a re-normalize, a rename, a secret rotation, a compound rename."""

    class Meta:
        table_name = "migrating-forms"
        region = "us-east-1"
        unique_secret = NEW_SECRET
        unique_constraints = [
            UniqueConstraint("tenant", "slug", name="TENANT_SLUG", former=Former(name="TS", normalize={"slug": None}))
        ]

    pk = UnicodeAttribute(hash_key=True)
    email = UniqueAttribute(UnicodeAttribute(null=True), normalize=str.casefold, former=Former(normalize=None))
    handle = UniqueAttribute(UnicodeAttribute(null=True), name="LOGIN", former=Former(name="HANDLE"))
    phone = UniqueAttribute(UnicodeAttribute(null=True), hashed=True, former=Former(secret=OLD_SECRET))
    tenant = UnicodeAttribute(null=True)
    slug = UnicodeAttribute(null=True)


PLANNER = planner_of(Migrating)
assert isinstance(PLANNER, Planner)

ADA = {"email": "Ada@X.io", "handle": "ada", "phone": None, "tenant": None, "slug": None}


def _summary(actions: list[Any]) -> list[tuple[str, str]]:
    out = []
    for action in actions:
        if isinstance(action, RecordWrite):
            out.append((action.op, "record"))
        else:
            out.append((action.op, action.key))
    return out


def _define(**attrs: Any) -> type[Model]:
    meta = type("Meta", (), {"table_name": "forms-define", "unique_constraints": attrs.pop("constraints", None)})
    meta.unique_secret = attrs.pop("secret", None)  # type: ignore[attr-defined]
    return type("M", (UniqueMixin, Model), {"Meta": meta, "pk": UnicodeAttribute(hash_key=True), **attrs})


def test_former__resolved_as_its_own_form() -> None:
    """Each former form keeps the constraint's attributes and message, with its own name, normalizers, secret."""
    by_name = {c.name: c for c in PLANNER.constraints}
    assert set(by_name) == {"EMAIL", "LOGIN", "PHONE", "TENANT_SLUG"}
    email, login, phone, compound = by_name["EMAIL"], by_name["LOGIN"], by_name["PHONE"], by_name["TENANT_SLUG"]
    assert email.former is not None
    assert (email.former.name, email.former.normalizers) == ("EMAIL", (None,))
    assert login.former is not None
    assert login.former.name == "HANDLE"
    assert phone.former is not None
    assert phone.former.hashed
    assert compound.former is not None
    assert compound.former.normalizers == (None, None)
    assert phone.former.key(("1",)) != phone.key(("1",))


def test_keys__former_slots_beside_current() -> None:
    """keys() gives each constraint's current key and, under former_slot(name), a different former key."""
    keys = PLANNER.keys({**ADA, "tenant": "Acme", "slug": "Home"})
    assert keys["EMAIL"] == "UNIQ#EMAIL#ada@x.io"
    assert keys[former_slot("EMAIL")] == "UNIQ#EMAIL#Ada@X.io"
    assert (keys["LOGIN"], keys[former_slot("LOGIN")]) == ("UNIQ#LOGIN#ada", "UNIQ#HANDLE#ada")
    assert (keys["PHONE"], keys[former_slot("PHONE")]) == (None, None)
    assert (keys["TENANT_SLUG"], keys[former_slot("TENANT_SLUG")]) == (
        "UNIQ#TENANT_SLUG#Acme#Home",
        "UNIQ#TS#Acme#Home",
    )
    # A value whose former key equals its current key holds one lock.
    assert PLANNER.keys({**ADA, "email": "ada@x.io"})[former_slot("EMAIL")] is None


@pytest.mark.parametrize(
    ("stored", "desired", "expected"),
    [
        pytest.param(
            Stored(exists=False),
            ADA,
            [
                ("put", "record"),
                ("put", "UNIQ#EMAIL#ada@x.io"),
                ("put", "UNIQ#EMAIL#Ada@X.io"),
                ("put", "UNIQ#LOGIN#ada"),
                ("put", "UNIQ#HANDLE#ada"),
            ],
            id="create-takes-both-forms",
        ),
        pytest.param(
            Stored(exists=False),
            {**ADA, "email": "ada@x.io", "handle": None},
            [("put", "record"), ("put", "UNIQ#EMAIL#ada@x.io")],
            id="equal-forms-one-lock",
        ),
        pytest.param(
            Stored(exists=True, values=ADA),
            {**ADA, "email": "bob@y.io"},
            [
                ("delete", "UNIQ#EMAIL#ada@x.io"),
                ("delete", "UNIQ#EMAIL#Ada@X.io"),
                ("put", "record"),
                ("put", "UNIQ#EMAIL#bob@y.io"),
            ],
            id="change-moves-both-forms",
        ),
        pytest.param(
            Stored(exists=True, values=ADA),
            {**ADA, "email": "ADA@x.io"},
            [("delete", "UNIQ#EMAIL#Ada@X.io"), ("put", "record"), ("put", "UNIQ#EMAIL#ADA@x.io")],
            id="same-current-key-former-moves",
        ),
        pytest.param(
            Stored(exists=True, values=ADA),
            {**ADA, "email": "ada@x.io"},
            [("delete", "UNIQ#EMAIL#Ada@X.io"), ("put", "record")],
            id="former-merges-into-current",
        ),
        pytest.param(
            Stored(exists=True, values={**ADA, "email": "ada@x.io"}),
            ADA,
            [("put", "record"), ("put", "UNIQ#EMAIL#Ada@X.io")],
            id="former-splits-from-current",
        ),
    ],
)
def test_write__both_forms__actions(stored: Stored, desired: dict[str, Any], expected: list[tuple[str, str]]) -> None:
    """Each form's lock moves on its own; a key held before and after stays; no key is touched twice."""
    plan = PLANNER.write("put", stored, desired)
    assert _summary(plan.sent()) == expected
    keys = [a.key for a in plan.sent() if not isinstance(a, RecordWrite)]
    assert len(keys) == len(set(keys))


def test_write__former_flag_and_namespace() -> None:
    """A former-form action says so, and names the former namespace (written into the lock item)."""
    plan = PLANNER.write("put", Stored(exists=False), ADA)
    assert [(p.key, p.former, p.namespace) for p in plan.puts if p.constraint.name == "LOGIN"] == [
        ("UNIQ#LOGIN#ada", False, "LOGIN"),
        ("UNIQ#HANDLE#ada", True, "HANDLE"),
    ]
    # Current-form puts come first, so a violation names the current form's lock when both are taken.
    assert [p.former for p in plan.puts] == [False, True, False, True]


def test_delete__releases_both_forms() -> None:
    """Deleting releases the locks of both forms, from known keys or computed ones alike."""
    expected = [
        ("delete", "record"),
        ("delete", "UNIQ#EMAIL#ada@x.io"),
        ("delete", "UNIQ#EMAIL#Ada@X.io"),
        ("delete", "UNIQ#LOGIN#ada"),
        ("delete", "UNIQ#HANDLE#ada"),
    ]
    assert _summary(PLANNER.delete(Stored(exists=True, values=ADA)).sent()) == expected
    created = PLANNER.write("put", Stored(exists=False), ADA)
    assert created.keys is not None
    assert created.keys[former_slot("LOGIN")] == "UNIQ#HANDLE#ada"
    known = Stored(exists=True, values=ADA, keys=created.keys)
    assert _summary(PLANNER.delete(known).sent()) == expected


def test_write__unchanged_constraint__keeps_known_former_keys() -> None:
    """A write that leaves a constraint alone hands its known former key on to the next write."""
    created = PLANNER.write("put", Stored(exists=False), ADA)
    change = PLANNER.write("put", Stored(exists=True, values=ADA, keys=created.keys), {**ADA, "phone": "1"})
    assert change.keys is not None
    assert change.keys[former_slot("EMAIL")] == "UNIQ#EMAIL#Ada@X.io"
    assert [p.constraint.name for p in change.puts] == ["PHONE", "PHONE"]


def test_request__former_lock_records_former_name() -> None:
    """A former-form lock item records the former constraint name; a current one the current name."""
    context = context_of(Migrating)
    assert context is not None
    instance = Migrating(pk="ACCT#1", **ADA)
    plan = PLANNER.write("put", Stored(exists=False), ADA)
    locks = LockTable(TableConnection("migrating-forms"), "pk", None, shared=True)
    request = build_request(context, instance, plan, None, None, add_version_condition=True, locks=locks)
    recorded = {item["Item"]["pk"]["S"]: item["Item"]["uniq_constraint"]["S"] for item in request.arguments()[1:]}
    assert recorded == {
        "UNIQ#EMAIL#ada@x.io": "EMAIL",
        "UNIQ#EMAIL#Ada@X.io": "EMAIL",
        "UNIQ#LOGIN#ada": "LOGIN",
        "UNIQ#HANDLE#ada": "HANDLE",
    }


def _taken_by(owner: str) -> CancellationReason:
    return CancellationReason("ConditionalCheckFailed", raw_item={"uniq_owner_hash": {"S": owner}})


def test_interpret__both_forms_taken__one_finding_per_record() -> None:
    """Both forms of a value taken: one finding for the writer; another writer in the request gets its own."""
    plan = PLANNER.write("put", Stored(exists=False), {**ADA, "handle": None})
    email = [p for p in plan.puts if p.constraint.name == "EMAIL"]
    assert len(email) == 2
    mine, theirs = frozenset({("ACCT#1",)}), frozenset({("ACCT#2",)})
    reasons = [_taken_by("ACCT#9"), _taken_by("ACCT#9")]
    findings = interpret([(email[0], mine), (email[1], mine)], reasons)
    assert [(f.kind, f.action) for f in findings] == [("taken", email[0])]
    assert len(interpret([(email[0], mine), (email[1], theirs)], reasons)) == 2
    # Only the former form taken: it is the finding, reported as the constraint's.
    (only,) = interpret([(email[0], mine), (email[1], mine)], [None, _taken_by("ACCT#9")])
    assert isinstance(only.action, LockPut)
    assert only.action.former
    assert only.action.constraint.name == "EMAIL"


@pytest.mark.parametrize(
    ("attrs", "message"),
    [
        ({"e": UniqueAttribute(UnicodeAttribute(), former=Former())}, "changes nothing"),
        ({"e": UniqueAttribute(UnicodeAttribute(), former="EMAIL")}, "must be a pynamodb_unique.Former"),
        ({"e": UniqueAttribute(UnicodeAttribute(), former=Former(name="A#B"))}, "letters, digits"),
        ({"e": UniqueAttribute(UnicodeAttribute(), former=Former(name=3))}, "must be a string"),  # type: ignore[arg-type]
        ({"e": UniqueAttribute(UnicodeAttribute(), former=Former(secret=b"k"))}, "was not hashed"),
        ({"e": UniqueAttribute(UnicodeAttribute(), former=Former(hashed=True))}, "needs Meta.unique_secret"),
        (
            {
                "e": UniqueAttribute(UnicodeAttribute(), former=Former(name="F")),
                "f": UniqueAttribute(UnicodeAttribute()),
            },
            "another constraint's namespace",
        ),
        (
            {
                "e": UniqueAttribute(UnicodeAttribute(), former=Former(name="X")),
                "f": UniqueAttribute(UnicodeAttribute(), former=Former(name="X")),
            },
            "another constraint's namespace",
        ),
        (
            {
                "constraints": [UniqueConstraint("a", "b", former=Former(normalize={"c": str.lower}))],
                "a": UnicodeAttribute(),
                "b": UnicodeAttribute(),
            },
            "normalize names",
        ),
        (
            {
                "constraints": [UniqueConstraint("a", former=Former(normalize=["x"]))],  # type: ignore[arg-type]
                "a": UnicodeAttribute(),
            },
            "callable or a mapping",
        ),
    ],
)
def test_define__bad_former__refused(attrs: dict[str, Any], message: str) -> None:
    """A former form that changes nothing, or names a bad name, normalizer or secret, is refused at definition."""
    with pytest.raises(UniqueConfigError, match=message):
        _define(**attrs)


def test_define__former_counts_against_the_transaction_limit() -> None:
    """A constraint keeping its former form holds two locks: 1 + 2 x 50 actions would pass 100."""
    attrs = {f"a{i}": UniqueAttribute(UnicodeAttribute(null=True), former=Former(name=f"OLD{i}")) for i in range(25)}
    with pytest.raises(UniqueConfigError, match="50 locks with their former forms"):
        _define(**attrs)
    del attrs["a24"]
    assert len(planner_of(_define(**attrs)).constraints) == 24


def test_define__hashed_former_keeps_the_current_secret() -> None:
    """Former(hashed=False) of a hashed constraint: its former keys are plain; Former(normalize=) keeps the secret."""
    model = _define(
        secret=b"k",
        e=UniqueAttribute(UnicodeAttribute(), hashed=True, former=Former(hashed=False)),
        f=UniqueAttribute(UnicodeAttribute(), hashed=True, normalize=str.lower, former=Former(normalize=None)),
    )
    keys = planner_of(model).keys({"e": "v", "f": "V"})
    assert keys[former_slot("E")] == "UNIQ#E#v"
    assert keys["E"].startswith("UNIQ#E#%K")
    assert keys[former_slot("F")].startswith("UNIQ#F#%K")
    assert keys[former_slot("F")] != keys["F"]


def test_define__partial_constraint__former_shares_its_condition() -> None:
    """A partial constraint's former form follows the same condition, traced once."""
    model = _define(
        constraints=[
            UniqueConstraint("handle", condition=lambda item: item.status != "deleted", former=Former(name="OLD"))
        ],
        handle=UnicodeAttribute(null=True),
        status=UnicodeAttribute(null=True),
    )
    (constraint,) = planner_of(model).constraints
    assert constraint.condition_attributes == ("status",)
    assert constraint.former is not None
    assert constraint.former.condition_attributes == ("status",)
    planner = planner_of(model)
    assert planner.keys({"handle": "h", "status": "deleted"}) == {"HANDLE": None, former_slot("HANDLE"): None}
    assert planner.keys({"handle": "h", "status": "live"})[former_slot("HANDLE")] == "UNIQ#OLD#h"


def test_define__former_name_clashing_with_a_neighbour__refused() -> None:
    """A former namespace is a namespace of the lock table: a neighbour's derived name clashes with it."""
    kept = _define(e=UniqueAttribute(UnicodeAttribute(), name="MAIL", former=Former(name="SHARED_CLASH")))
    with pytest.raises(UniqueConfigError, match="SHARED_CLASH"):
        type(
            "Other",
            (UniqueMixin, Model),
            {
                "Meta": type("Meta", (), {"table_name": "forms-define"}),
                "pk": UnicodeAttribute(hash_key=True),
                "shared_clash": UniqueAttribute(UnicodeAttribute()),
            },
        )
    assert planner_of(kept) is not None  # Held until here: the registry holds models weakly.


def test_unique_owner_and_validate__look_at_both_forms(backend: Backend) -> None:
    """A value held only under its former form is found by unique_owner() and refused by validate_unique()."""
    model = bind_model(Migrating, backend)
    model(pk="ACCT#1", email="ada@x.io", handle="ada").save()
    context = context_of(model)
    assert context is not None
    # A record written before the migration holds only its former-form locks.
    client = model._get_connection().connection.client
    client.delete_item(TableName=model.Meta.table_name, Key={"pk": {"S": "UNIQ#LOGIN#ada"}})
    assert model.unique_owner(handle="ada") == ("ACCT#1",)
    assert model.unique_owner(email="ADA@x.io") == ("ACCT#1",)
    assert model.unique_owner(handle="bob") is None
    candidate = model(pk="ACCT#2", email="ADA@X.IO", handle="ada")
    with pytest.raises(UniqueViolation) as caught:
        candidate.validate_unique()
    assert sorted((v.constraint, v.owner) for v in caught.value.violations) == [
        ("EMAIL", ("ACCT#1",)),
        ("LOGIN", ("ACCT#1",)),
    ]
    with pytest.raises(UniqueViolation) as saved:
        candidate.save()
    assert sorted(v.constraint for v in saved.value.violations) == ["EMAIL", "LOGIN"]
    model(pk="ACCT#1", email="ada@x.io", handle="ada").validate_unique()  # Its own locks are free.


def test_transact_write__both_forms__transfer_and_violation(backend: Backend) -> None:
    """In a composed transaction both forms move too: a value handed between records, a value refused once."""
    model = bind_model(Migrating, backend)
    ada = model(pk="ACCT#1", email="Ada@X.io", handle="ada")
    ada.save()
    bob = model(pk="ACCT#2", email="bob@y.io")
    bob.save()
    with TransactWrite() as tx:
        ada.email = "ada.new@x.io"
        tx.save(ada)
        bob.email = "ADA@x.io"  # Ada's current-form key, another former-form key.
        tx.save(bob)
    assert_invariant(model)
    assert model.unique_owner(email="ada@x.io") == ("ACCT#2",)
    carol = model(pk="ACCT#3", handle="ada")
    with pytest.raises(UniqueViolation) as caught, TransactWrite() as tx:
        tx.save(carol)
    assert [(v.constraint, v.owner) for v in caught.value.violations] == [("LOGIN", ("ACCT#1",))]
    assert_invariant(model)
