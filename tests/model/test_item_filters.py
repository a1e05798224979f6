"""unique_item_filter conditions evaluated on scanned items, as DynamoDB's FilterExpression would."""

from __future__ import annotations

from typing import Any

import pytest
from pynamodb.attributes import ListAttribute, MapAttribute, NumberAttribute, UnicodeAttribute, UnicodeSetAttribute
from pynamodb.expressions.condition import Condition
from pynamodb.models import Model

from pynamodb_unique import UniqueConfigError
from pynamodb_unique._model.filters import matches


class Address(MapAttribute[str, Any]):
    city = UnicodeAttribute(null=True)


class Item(Model):
    class Meta:
        table_name = "filters"

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    sk = UnicodeAttribute(range_key=True, attr_name="SK")
    n = NumberAttribute(null=True)
    tags = UnicodeSetAttribute(null=True)
    address = Address(null=True)
    names = ListAttribute(of=UnicodeAttribute, null=True)


ITEM = {
    "PK": {"S": "CUST#1"},
    "SK": {"S": "CUSTOMER"},
    "n": {"N": "10"},
    "tags": {"SS": ["a", "b"]},
    "address": {"M": {"city": {"S": "Paris"}}},
    "names": {"L": [{"S": "ada"}, {"S": "bob"}]},
}


@pytest.mark.parametrize(
    ("condition", "expected"),
    [
        (Item.sk == "CUSTOMER", True),
        (Item.sk == "EMPLOYEE", False),
        (Item.sk != "EMPLOYEE", True),
        (Item.n == 10, True),
        (Item.n > 9, True),
        (Item.n < 9, False),
        (Item.n >= 10, True),
        (Item.n <= 9, False),
        (Item.n.between(5, 10), True),
        (Item.sk > 1, False),  # Different types never compare.
        (Item.pk.startswith("CUST#"), True),
        (Item.pk.startswith("EMP#"), False),
        (Item.sk.is_in("CUSTOMER", "LEAD"), True),
        (Item.sk.is_in("LEAD"), False),
        (Item.tags.contains("a"), True),
        (Item.tags.contains("z"), False),
        (Item.pk.contains("ST#"), True),
        (Item.address.city == "Paris", True),
        (Item.names[1] == "bob", True),
        (Item.names[5] == "bob", False),
        (Item.n.exists(), True),
        (Item.address.city.does_not_exist(), False),
        (Item.sk.is_type(), True),
        ((Item.sk == "CUSTOMER") & (Item.n > 100), False),
        ((Item.sk == "EMPLOYEE") | (Item.n > 1), True),
        (~(Item.sk == "CUSTOMER"), False),
        (Item.n == None, False),  # noqa: E711 - PynamoDB's comparison with a missing value.
    ],
)
def test_matches__as_a_filter_expression(condition: Condition, expected: bool) -> None:
    """Each operator decides as DynamoDB does on the same item."""
    assert matches(condition, ITEM) is expected


def test_matches__missing_attribute__only_not_equal_holds() -> None:
    """On an attribute the item lacks, <> holds (as DynamoDB's filter keeps the item) and the rest fail."""
    item = {"PK": {"S": "X"}, "SK": {"S": "Y"}}
    assert matches(Item.n == 1, item) is False
    assert matches(Item.n > 1, item) is False
    assert matches(Item.n != 1, item) is True
    assert matches(Item.n.does_not_exist(), item) is True


def test_matches__unsupported_operand__clear_error() -> None:
    """An operand it cannot evaluate is refused by name."""

    class Odd(Condition):
        def __init__(self) -> None:
            super().__init__("odd", object())

    with pytest.raises(UniqueConfigError, match="unique_item_filter"):
        matches(Odd(), ITEM)
