"""Violation messages and codes: defaults, templates checked at class definition, field errors."""

from __future__ import annotations

from typing import Any

import pytest
from _backends import Backend, bind_model
from models import Account
from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.models import Model

from pynamodb_unique import (
    TransactWrite,
    UniqueAttribute,
    UniqueConfigError,
    UniqueConstraint,
    UniqueMixin,
    UniqueViolation,
    Violation,
)
from pynamodb_unique._model.registry import planner_of


class Signup(UniqueMixin, Model):
    """Constraints with their own messages and codes, and hashed ones with the default."""

    class Meta:
        table_name = "signups"
        region = "us-east-1"
        unique_secret = b"k" * 32
        unique_constraints = [
            UniqueConstraint(
                "tenant", "slug", name="SITE", message="{attributes} {values} belong to another site", code="site_taken"
            ),
            UniqueConstraint("org", "phone", hashed=True),
        ]

    pk = UnicodeAttribute(hash_key=True)
    email = UniqueAttribute(
        UnicodeAttribute(null=True),
        normalize=str.casefold,
        message="{value} is already registered ({constraint})",
        code="email_taken",
    )
    ssn = UniqueAttribute(UnicodeAttribute(null=True), hashed=True)
    tenant = UnicodeAttribute(null=True)
    slug = UnicodeAttribute(null=True)
    org = UnicodeAttribute(null=True)
    phone = UnicodeAttribute(null=True)


@pytest.fixture
def signups(backend: Backend) -> type[Signup]:
    return bind_model(Signup, backend)


def _define(*, constraints: Any = None, **attrs: Any) -> type[Model]:
    meta = type("Meta", (), {"table_name": "t", "unique_constraints": constraints})
    namespace = {"Meta": meta, "pk": UnicodeAttribute(hash_key=True), **attrs}
    return type("M", (UniqueMixin, Model), namespace)


def test_message__default__a_sentence_without_reprs(accounts: type[Account]) -> None:
    """Without a template each violation says which value is taken, in words; code "unique"."""
    accounts(pk="A", email="ada@x.io", username="ada", tenant="acme", slug="home").save()
    with pytest.raises(UniqueViolation) as info:
        accounts(pk="B", email="ADA@X.io", username="ada", tenant="acme", slug="home").save()
    messages = [v.message for v in info.value.violations]
    assert messages == [
        "email 'ADA@X.io' is already taken",
        "username 'ada' is already taken",
        "the combination of tenant 'acme' and slug 'home' is already taken",
    ]
    assert [v.code for v in info.value.violations] == ["unique", "unique", "unique"]
    assert [str(v) for v in info.value.violations] == messages
    assert str(info.value) == "; ".join(messages)


def test_message__template__filled_with_the_values_as_given(signups: type[Signup]) -> None:
    """A template gets the values before normalize, the attributes and the constraint's name."""
    signups(pk="A", email="ada@x.io", tenant="acme", slug="home").save()
    with pytest.raises(UniqueViolation) as info:
        signups(pk="B", email="ADA@X.io", tenant="acme", slug="home").save()
    assert [(v.constraint, v.message, v.code) for v in info.value.violations] == [
        ("EMAIL", "ADA@X.io is already registered (EMAIL)", "email_taken"),
        ("SITE", "tenant, slug acme, home belong to another site", "site_taken"),
    ]
    assert str(info.value) == "ADA@X.io is already registered (EMAIL); tenant, slug acme, home belong to another site"


def test_message__hashed__value_left_out(signups: type[Signup]) -> None:
    """A hashed constraint keeps its values out of keys, so its default message names only the attributes."""
    signups(pk="A", ssn="078-05-1120", org="acme", phone="555").save()
    with pytest.raises(UniqueViolation) as info:
        signups(pk="B", ssn="078-05-1120", org="acme", phone="555").save()
    assert [v.message for v in info.value.violations] == [
        "ssn is already taken",
        "the combination of org and phone is already taken",
    ]
    assert "078-05-1120" not in str(info.value)
    assert info.value.violations[0].values == ("078-05-1120",)


def test_message__composed_transaction__message_and_code(signups: type[Signup]) -> None:
    """A violation raised by TransactWrite carries the constraint's message and code too."""
    signups(pk="A", email="ada@x.io").save()
    with pytest.raises(UniqueViolation) as info, TransactWrite(connection=signups._get_connection().connection) as tx:
        tx.save(signups(pk="B", email="Ada@x.io"))
    (violation,) = info.value.violations
    assert (violation.message, violation.code, violation.owner) == (
        "Ada@x.io is already registered (EMAIL)",
        "email_taken",
        ("A",),
    )


def test_field_errors__single_by_attribute_compound_under_non_field_key(accounts: type[Account]) -> None:
    """As Django's message_dict: a field's own errors under its name, a compound's under "__all__"."""
    accounts(pk="A", email="ada@x.io", username="ada", tenant="acme", slug="home").save()
    with pytest.raises(UniqueViolation) as info:
        accounts(pk="B", email="ada@x.io", username="ada", tenant="acme", slug="home").save()
    assert info.value.field_errors() == {
        "email": ["email 'ada@x.io' is already taken"],
        "username": ["username 'ada' is already taken"],
        "__all__": ["the combination of tenant 'acme' and slug 'home' is already taken"],
    }
    assert list(info.value.field_errors(non_field_key="non_field_errors")) == ["email", "username", "non_field_errors"]


def test_field_errors__two_violations_of_one_field__both_listed() -> None:
    """Two constraints on one attribute (or two compounds) add to the same list, in order."""
    error = UniqueViolation(
        [
            Violation("EMAIL", ("email",), ("a@x",), ("A",), message="first"),
            Violation("WORK_EMAIL", ("email",), ("a@x",), ("B",), message="second"),
            Violation("A_B", ("a", "b"), (1, 2), ("C",)),
            Violation("C_D", ("c", "d"), ("x", "y"), ("D",)),
        ]
    )
    assert error.field_errors() == {
        "email": ["first", "second"],
        "__all__": [
            "the combination of a 1 and b 2 is already taken",
            "the combination of c 'x' and d 'y' is already taken",
        ],
    }


def test_violation__hand_built__default_message_and_code() -> None:
    """A Violation built without message or code gets the default sentence and "unique"."""
    violation = Violation("EMAIL", ("email",), ("e",), ("p",))
    assert (violation.message, violation.code, str(violation)) == (
        "email 'e' is already taken",
        "unique",
        violation.message,
    )
    assert Violation("B", ("b",), (b"\x00",), None).message == "b is already taken"


def test_violation__message_and_code__not_compared() -> None:
    """Equality stays on constraint, attributes, values and owner: the wording does not matter."""
    plain = Violation("EMAIL", ("email",), ("e",), ("p",))
    worded = Violation("EMAIL", ("email",), ("e",), ("p",), message="taken!", code="email_taken")
    assert plain == worded
    assert plain != Violation("EMAIL", ("email",), ("f",), ("p",), message=plain.message)


def test_message__number_format_spec__accepted_and_applied() -> None:
    """A format specification that suits the attribute's type is accepted; a value it does not suit falls back."""
    model = _define(ticket=UniqueAttribute(NumberAttribute(null=True), message="ticket {value:05d} is sold"))
    (constraint,) = planner_of(model).constraints
    assert constraint.violation((42,), ("A",)).message == "ticket 00042 is sold"
    assert constraint.violation((4.5,), ("A",)).message == "ticket 4.5 is already taken"


def test_message__escaped_braces__literal() -> None:
    """Doubled braces are text, not fields."""
    model = _define(e=UniqueAttribute(UnicodeAttribute(null=True), message="{{value}} {value} taken"))
    (constraint,) = planner_of(model).constraints
    assert constraint.violation(("x",), None).message == "{value} x taken"


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"e": UniqueAttribute(UnicodeAttribute(), message="{email} is taken")}, r"\{email\} is not one of"),
        (
            {"constraints": [UniqueConstraint("a", "b", message="{value} is taken")]},
            r"\{value\} is only for single-attribute constraints",
        ),
        ({"e": UniqueAttribute(UnicodeAttribute(), message="{} is taken")}, r"\{\} is not one of"),
        ({"e": UniqueAttribute(UnicodeAttribute(), message="{0} is taken")}, r"\{0\} is not one of"),
        ({"e": UniqueAttribute(UnicodeAttribute(), message="{value.upper} is taken")}, r"\{value.upper\}"),
        ({"e": UniqueAttribute(UnicodeAttribute(), message="{value[0]} is taken")}, r"\{value\[0\]\}"),
        ({"e": UniqueAttribute(UnicodeAttribute(), message="{value:{width}}")}, r"\{width\} is not one of"),
        ({"e": UniqueAttribute(UnicodeAttribute(), message="{value is taken")}, "not a valid str.format template"),
        ({"e": UniqueAttribute(UnicodeAttribute(), message="{value:d} is taken")}, "cannot be formatted"),
        ({"e": UniqueAttribute(UnicodeAttribute(), message="{value!x}")}, "cannot be formatted"),
        ({"e": UniqueAttribute(UnicodeAttribute(), message=42)}, "must be a str.format template"),
        ({"e": UniqueAttribute(UnicodeAttribute(), code="")}, "code must be a non-empty string"),
        ({"constraints": [UniqueConstraint("a", "b", code=None)]}, "code must be a non-empty string"),
    ],
)
def test_define__bad_message_or_code__refused(kwargs: dict[str, Any], match: str) -> None:
    """A template that cannot be filled in, or a bad code, fails when the class is defined."""
    attrs = {"a": UnicodeAttribute(null=True), "b": UnicodeAttribute(null=True), **kwargs}
    with pytest.raises(UniqueConfigError, match=match):
        _define(**attrs)
