"""Tables prepared with each kind of lock damage, written with the raw client (audit/repair tests)."""

from __future__ import annotations

from typing import Any

from _backends import Backend, bind_model, described, unique_table_name
from models import Account
from pynamodb.models import Model

from pynamodb_unique import create_lock_table
from pynamodb_unique._model.context import ModelContext, context_of

ADA = ("ACCT#a1f9c3", "PROFILE")
GRACE = ("ACCT#0b7e21", "PROFILE")
ALAN = ("ACCT#5d2c90", "PROFILE")
LINUS = ("ACCT#11c0de", "PROFILE")
EDSGER = ("ACCT#3f0d4e", "PROFILE")
ADA_TWIN = ("ACCT#77aa01", "PROFILE")
GHOST = ("ACCT#dead00", "PROFILE")

#: (kind, lock key) of every problem :func:`damage` leaves.
EXPECTED = {
    ("orphaned", "UNIQ#EMAIL#alan@turing.org"),
    ("orphaned", "UNIQ#HANDLE#alan"),
    ("missing", "UNIQ#EMAIL#edsger@dijkstra.nl"),
    ("missing", "UNIQ#HANDLE#edsger"),
    ("foreign", "UNIQ#HANDLE#grace"),
    ("duplicate", "UNIQ#EMAIL#ada@lovelace.io"),
}


def bind_accounts(backend: Backend, *, separate: bool = False) -> type[Account]:
    """A fresh Account table; with ``separate`` its locks live in their own table."""
    model = bind_model(Account, backend, create=not separate)
    if separate:
        model.Meta.unique_lock_table = unique_table_name("locks")  # type: ignore[attr-defined]
        model.create_table(wait=True, billing_mode="PAY_PER_REQUEST")
        create_lock_table(model, wait=True)
        described(model)
    return model


def _context(model: type[Model]) -> ModelContext:
    """The library's context of a unique model."""
    context = context_of(model)
    assert context is not None
    return context


def client(model: type[Model]) -> Any:
    """The botocore client behind a model."""
    return model._get_connection().connection.client


def lock_table_name(model: type[Model]) -> str:
    """Where the model's locks live."""
    return _context(model).locks().table_name


def put_record(model: type[Model], key: tuple[str, str], **values: str) -> None:
    """Write a record behind the library's back (no locks)."""
    item = {"PK": {"S": key[0]}, "SK": {"S": key[1]}, **{k: {"S": v} for k, v in values.items()}}
    client(model).put_item(TableName=model.Meta.table_name, Item=item)


def delete_record(model: type[Model], key: tuple[str, str]) -> None:
    """Delete a record behind the library's back, as DynamoDB TTL does (its locks stay)."""
    client(model).delete_item(TableName=model.Meta.table_name, Key={"PK": {"S": key[0]}, "SK": {"S": key[1]}})


def put_lock(model: type[Model], lock_key: str, owner: tuple[str, ...] | None, constraint: str) -> None:
    """Write a lock item behind the library's back."""
    locks = _context(model).locks()
    item: dict[str, Any] = {**locks.key(lock_key), "uniq_constraint": {"S": constraint}}
    if owner is not None:
        item["uniq_owner_hash"] = {"S": owner[0]}
        if len(owner) > 1:
            item["uniq_owner_range"] = {"S": owner[1]}
    client(model).put_item(TableName=locks.table_name, Item=item)


def damage(model: type[Account]) -> None:
    """Save five accounts with the library, then damage the table in each way :data:`EXPECTED` lists.

    - ALAN's record vanishes (TTL): his two locks are orphaned;
    - EDSGER is written without locks: both his values miss their locks;
    - GRACE's HANDLE lock is overwritten to name GHOST: a foreign lock;
    - ADA_TWIN is written holding ADA's email in other case: a duplicate.
    LINUS stays healthy.
    """
    model(pk=ADA[0], email="ada@lovelace.io", username="ada").save()
    model(pk=GRACE[0], email="grace@hopper.dev", username="grace").save()
    model(pk=ALAN[0], email="alan@turing.org", username="alan").save()
    model(pk=LINUS[0], email="linus@kernel.org", username="linus", tenant="acme", slug="linus").save()
    delete_record(model, ALAN)
    put_record(model, EDSGER, email="edsger@dijkstra.nl", username="edsger")
    put_lock(model, "UNIQ#HANDLE#grace", GHOST, "HANDLE")
    put_record(model, ADA_TWIN, email="Ada@Lovelace.io")


def all_items(model: type[Model]) -> list[dict[str, Any]]:
    """Every item of the model's table and of its lock table (when separate), sorted."""
    tables = dict.fromkeys([model.Meta.table_name, lock_table_name(model)])
    items: list[dict[str, Any]] = []
    for table in tables:
        kwargs: dict[str, Any] = {"TableName": table, "ConsistentRead": True}
        while True:
            page = client(model).scan(**kwargs)
            items.extend({"_table": table, **item} for item in page["Items"])
            if "LastEvaluatedKey" not in page:
                break
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
    return sorted(items, key=lambda i: repr(sorted(i.items())))


def load_healthy(model: type[Account], count: int, *, start: int = 0) -> None:
    """Write accounts ``start`` to ``start + count - 1`` and their locks as the library would.

    25 items go in one BatchWriteItem (its limit).
    """
    context = _context(model)
    locks = context.locks()
    items: list[tuple[str, dict[str, Any]]] = []
    for n in range(start, start + count):
        account = model(pk=f"ACCT#bulk{n:07d}", email=f"user{n}@example.com", username=f"user{n}")
        items.append((model.Meta.table_name, account.serialize()))
        owner = context.owner_fields(account)
        for name, lock_key in context.lock_keys(account).items():
            if lock_key is not None:
                items.append((locks.table_name, {**locks.key(lock_key), **owner, "uniq_constraint": {"S": name}}))
    for first in range(0, len(items), 25):
        request: dict[str, list[dict[str, Any]]] = {}
        for table, item in items[first : first + 25]:
            request.setdefault(table, []).append({"PutRequest": {"Item": item}})
        while request:
            request = client(model).batch_write_item(RequestItems=request).get("UnprocessedItems") or {}
