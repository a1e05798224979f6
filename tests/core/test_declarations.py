"""Checks made when a unique model's class is defined."""

from __future__ import annotations

from typing import Any

import pytest
from pynamodb.attributes import (
    JSONAttribute,
    NumberAttribute,
    NumberSetAttribute,
    UnicodeAttribute,
    UnicodeSetAttribute,
)
from pynamodb.models import Model

from pynamodb_unique import UniqueAttribute, UniqueConfigError, UniqueConstraint, UniqueError, UniqueMixin
from pynamodb_unique._model.registry import planner_of


def _define(*, constraints: Any = None, hash_attr: Any = None, **attrs: Any) -> type[Model]:
    meta = type("Meta", (), {"table_name": "t", "unique_constraints": constraints})
    namespace = {"Meta": meta, "pk": hash_attr or UnicodeAttribute(hash_key=True), **attrs}
    return type("M", (UniqueMixin, Model), namespace)


def test_define__valid_model__constraints_resolved() -> None:
    """UniqueAttribute and Meta.unique_constraints become named constraints."""
    model = _define(
        constraints=[UniqueConstraint("a", "b")],
        email=UniqueAttribute(UnicodeAttribute()),
        a=UnicodeAttribute(null=True),
        b=NumberAttribute(null=True),
    )
    planner = planner_of(model)
    assert [(c.name, c.attributes) for c in planner.constraints] == [("EMAIL", ("email",)), ("A_B", ("a", "b"))]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"constraints": [UniqueConstraint("nope")]}, "not an attribute"),
        ({"constraints": [UniqueConstraint("pk")]}, "hash key 'pk', which DynamoDB already keeps unique"),
        ({"constraints": [UniqueConstraint("pk", "x")], "x": UnicodeAttribute()}, "DynamoDB already keeps unique"),
        (
            {"constraints": [UniqueConstraint("sk", "pk")], "sk": UnicodeAttribute(range_key=True)},
            r"key \('pk', 'sk'\), which DynamoDB already keeps unique",
        ),
        ({"constraints": "email"}, "must be a list"),
        ({"constraints": ["email"]}, "not a UniqueConstraint"),
        ({"constraints": [UniqueConstraint()]}, "names no attribute"),
        ({"constraints": [UniqueConstraint("x", "x")], "x": UnicodeAttribute()}, "twice"),
        (
            {
                "constraints": [UniqueConstraint("x", name="EMAIL")],
                "x": UnicodeAttribute(),
                "email": UniqueAttribute(UnicodeAttribute()),
            },
            "distinct",
        ),
        ({"constraints": [UniqueConstraint("x", name="A#B")], "x": UnicodeAttribute()}, "letters, digits"),
        ({"hash_attr": NumberAttribute(hash_key=True), "e": UniqueAttribute(UnicodeAttribute())}, "must be a string"),
        ({"uniq_owner_hash": UnicodeAttribute(), "e": UniqueAttribute(UnicodeAttribute())}, "reserved for lock items"),
        (
            {"constraints": [UniqueConstraint("x", normalize={"y": str.lower})], "x": UnicodeAttribute()},
            "normalize names",
        ),
    ],
)
def test_define__bad_configuration__clear_error(kwargs: dict[str, Any], message: str) -> None:
    """Misconfiguration fails at class definition with a message naming the problem."""
    with pytest.raises(UniqueConfigError, match=message) as info:
        _define(**kwargs)
    assert isinstance(info.value, UniqueError)


def test_define__hash_key_of_a_table_with_range_key__accepted() -> None:
    """The hash key alone of a (hash, range) table is no unique key: a constraint may name it."""
    model = _define(
        constraints=[UniqueConstraint("pk", name="LATEST", condition=lambda r: r.latest)],
        sk=UnicodeAttribute(range_key=True),
        latest=UnicodeAttribute(null=True),
    )
    planner = planner_of(model)
    assert [(c.name, c.attributes) for c in planner.constraints] == [("LATEST", ("pk",))]
    marked = _define(hash_attr=UniqueAttribute(UnicodeAttribute(hash_key=True)), sk=UnicodeAttribute(range_key=True))
    assert [c.attributes for c in planner_of(marked).constraints] == [("pk",)]


def test_define__unique_hash_key_of_a_hash_only_table__refused() -> None:
    """The hash key of a table without range key is the primary key: marking it unique is refused."""
    with pytest.raises(UniqueConfigError, match="already keeps unique"):
        _define(hash_attr=UniqueAttribute(UnicodeAttribute(hash_key=True)))


@pytest.mark.parametrize("attribute", [UnicodeSetAttribute, NumberSetAttribute, JSONAttribute])
def test_unique_attribute__unsupported_type__refused(attribute: type[Any]) -> None:
    """Sets and documents cannot be keys: refused where they are marked, during class definition."""
    with pytest.raises(UniqueConfigError, match="only string, number and binary"):
        _define(x=UniqueAttribute(attribute()))


@pytest.mark.parametrize("attribute", [UnicodeSetAttribute, JSONAttribute])
def test_constraint__unsupported_type__refused(attribute: type[Any]) -> None:
    """A compound part of an unsupported type is refused at class definition."""
    with pytest.raises(UniqueConfigError, match="only string, number and binary"):
        _define(constraints=[UniqueConstraint("x")], x=attribute(null=True))


def test_define__too_many_constraints__refused() -> None:
    """Constraints whose worst write would pass 100 actions are refused."""
    attrs = {f"a{i}": UniqueAttribute(UnicodeAttribute(null=True)) for i in range(50)}
    with pytest.raises(UniqueConfigError, match="at most 49"):
        _define(**attrs)


def test_define__49_constraints__accepted() -> None:
    """49 constraints (1 + 2 x 49 = 99 actions) fit one TransactWriteItems."""
    attrs = {f"a{i}": UniqueAttribute(UnicodeAttribute(null=True)) for i in range(49)}
    assert len(planner_of(_define(**attrs)).constraints) == 49


def test_unique_attribute__behaves_as_wrapped() -> None:
    """The marked attribute is the PynamoDB attribute itself: conditions and actions work."""
    model = _define(email=UniqueAttribute(UnicodeAttribute(), normalize=str.casefold))
    names: dict[str, str] = {}
    values: dict[str, Any] = {}
    assert (model.email == "x").serialize(names, values) == "#0 = :0"  # type: ignore[attr-defined]
    assert values == {":0": {"S": "x"}}
    assert isinstance(model.email, UnicodeAttribute)  # type: ignore[attr-defined]
    instance = model(pk="p", email="Ada")
    assert instance.email == "Ada"  # type: ignore[attr-defined]


def test_abstract_base__checked_in_subclass() -> None:
    """A base without keys is not checked until a concrete subclass defines them."""

    class Base(UniqueMixin, Model):
        email = UniqueAttribute(UnicodeAttribute())

    class Concrete(Base):
        class Meta:
            table_name = "c"

        pk = UnicodeAttribute(hash_key=True)

    assert planner_of(Base) is None
    assert planner_of(Concrete) is not None
    assert [c.name for c in planner_of(Concrete).constraints] == ["EMAIL"]
