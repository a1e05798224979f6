"""Helpers the model tests share: items written and read behind the library's back, lock tables made.

The models they share live in ``tests/models.py``.
"""

from __future__ import annotations

from typing import Any, TypeVar

from _backends import Backend, bind_model, unique_table_name
from _damage import client
from pynamodb.models import Model

from pynamodb_unique import UniqueConstraint, create_lock_table
from pynamodb_unique._core.keys import LOCK_PREFIX

M = TypeVar("M", bound=Model)


def put_raw(model: type[Model], item: dict[str, Any], table: str | None = None) -> None:
    """Write an item behind the library's back (another writer)."""
    client(model).put_item(TableName=table or model.Meta.table_name, Item=item)


def lock_items(model: type[Model], table: str | None = None) -> list[dict[str, Any]]:
    """The lock items of the model's table (or of ``table``): those with a value starting with the lock prefix."""
    name = table or model.Meta.table_name
    items = client(model).scan(TableName=name, ConsistentRead=True)["Items"]
    return [i for i in items if any(isinstance(v.get("S"), str) and v["S"].startswith(LOCK_PREFIX) for v in i.values())]


def drop_locks(model: type[Model], table: str | None = None) -> None:
    """Delete every lock item behind the library's back: each record is then missing its lock."""
    name = table or model.Meta.table_name
    schema = client(model).describe_table(TableName=name)["Table"]["KeySchema"]
    for item in lock_items(model, table):
        client(model).delete_item(TableName=name, Key={k["AttributeName"]: item[k["AttributeName"]] for k in schema})


def with_locks(model: type[M]) -> type[M]:
    """The bound model with the lock table its Meta names created (moto starts empty)."""
    create_lock_table(model, wait=True)
    return model


def bind_with_lock_table(model_cls: type[M], backend: Backend, prefix: str) -> type[M]:
    """``model_cls`` bound to ``backend`` with a lock table of its own (named after ``prefix``), both created.

    A fresh lock table name, since dynoxide is shared by the whole session.
    """
    model = bind_model(model_cls, backend, create=False)
    model.Meta.unique_lock_table = unique_table_name(prefix)  # type: ignore[attr-defined]
    model.create_table(wait=True, billing_mode="PAY_PER_REQUEST")
    create_lock_table(model, wait=True)
    return model


def while_on(name: str, attribute: str = "email", document: str = "doc") -> UniqueConstraint:
    """A partial constraint on ``attribute``, held while the JSONAttribute ``document`` has a true "on"."""
    return UniqueConstraint(
        attribute,
        name=name,
        condition=lambda r: bool(getattr(r, document) and getattr(r, document).get("on")),
        condition_attributes=(document,),
    )
