"""A set inside a map, stored by another writer with its members in another order, is the same value.

DynamoDB's sets have no order, and its conditions compare them so; a Python set serializes its
members in an order of its own. Before the fix, ``Stored.same_as`` compared the serialized texts
as they were: after a write whose own condition failed, a map holding a set that another writer
had respelled (``[9, 1]`` for ``[1, 9]``) looked changed, and the write re-planned (a second
request) before reporting ``ConditionFailed``.
"""

from __future__ import annotations

from typing import Any

import pytest
from _backends import Backend, RequestCounter, bind_model
from pynamodb.attributes import MapAttribute, NumberSetAttribute, UnicodeAttribute
from pynamodb.models import Model

from pynamodb_unique import ConditionFailed, UniqueConstraint, UniqueMixin
from pynamodb_unique._core.plan import Stored
from pynamodb_unique._model.context import context_of


class Prefs(MapAttribute[str, Any]):
    codes = NumberSetAttribute(null=True)


def _active(record: Any) -> bool:
    return record.prefs is not None and 1 in (record.prefs.codes or set())


class PrefsMember(UniqueMixin, Model):
    """A partial constraint whose condition reads a map holding a set."""

    class Meta:
        table_name = "stored-view-sets-members"
        region = "us-east-1"
        unique_constraints = [UniqueConstraint("email", condition=_active, condition_attributes=("prefs",))]

    pk = UnicodeAttribute(hash_key=True)
    email = UnicodeAttribute(null=True)
    note = UnicodeAttribute(null=True)
    prefs = Prefs(null=True)


def _codes(*members: int) -> set[int]:
    """A set built by adding ``members`` in this order (1 and 9 share a slot: the order shows)."""
    codes: set[int] = set()
    for member in members:
        codes.add(member)
    return codes


def test_same_as__sets_in_another_order__same() -> None:
    context = context_of(PrefsMember)
    assert context is not None
    planner = context.planner
    one = Stored(exists=True, values={"email": "a@x.io", "prefs": Prefs(codes=_codes(1, 9))})
    other = Stored(exists=True, values={"email": "a@x.io", "prefs": Prefs(codes=_codes(9, 1))})
    assert planner.text("prefs", one.values["prefs"]) != planner.text("prefs", other.values["prefs"])
    assert one.same_as(other, planner)
    changed = Stored(exists=True, values={"email": "a@x.io", "prefs": Prefs(codes=_codes(9, 2))})
    assert not one.same_as(changed, planner)


@pytest.mark.integration
def test_save__caller_condition_fails__one_request(dynoxide_endpoint: str) -> None:
    model = bind_model(PrefsMember, Backend("dynoxide", dynoxide_endpoint))
    record = model(pk="a", email="a@x.io", note="n", prefs=Prefs(codes=_codes(1, 9)))
    record.save()
    client = model._get_connection().connection.client
    client.update_item(
        TableName=model.Meta.table_name,
        Key={"pk": {"S": "a"}},
        UpdateExpression="SET prefs = :p",
        ExpressionAttributeValues={":p": {"M": {"codes": {"NS": ["9", "1"]}}}},
    )
    record.note = "changed"
    with RequestCounter(model) as counter, pytest.raises(ConditionFailed):
        record.save(condition=model.note == "other")
    assert counter.operations == ["PutItem"]
