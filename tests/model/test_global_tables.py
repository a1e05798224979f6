"""Global tables: a table in multi-Region strong consistency (MRSC) is refused before anything is sent.

moto and dynoxide do not report ``MultiRegionConsistency``: DescribeTable is answered here, at
botocore's ``before-call`` event, as DynamoDB describes an MRSC table. The check costs one
DescribeTable per table in a process, counted with :class:`RequestCounter`.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from _backends import Backend, RequestCounter, bind_model, undescribed
from _damage import bind_accounts
from botocore.awsrequest import AWSResponse
from models import Account
from pynamodb.attributes import UnicodeAttribute
from pynamodb.models import Model

from pynamodb_unique import (
    TransactWrite,
    UniqueConfigError,
    UniqueMixin,
    audit,
    backfill,
    bulk_save,
    migrate,
    repair,
    streams,
)
from pynamodb_unique._model.context import context_of

ADA = "ada@lovelace.io"
WRITES = ("TransactWriteItems", "PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem")


class Plain(UniqueMixin, Model):
    """The mixin without a constraint: PynamoDB's own writes, no check."""

    class Meta:
        table_name = "global-plain"
        region = "us-east-1"

    pk = UnicodeAttribute(hash_key=True)
    bio = UnicodeAttribute(null=True)


def _clients(model: type[Model]) -> list[Any]:
    """The botocore clients of the model's records table and lock table."""
    context = context_of(model)
    assert context is not None
    clients = (model._get_connection().connection.client, context.locks().connection.connection.client)
    return list({id(c): c for c in clients}.values())


def describe_as_strong(model: type[Model], table: str, *, code: str | None = None) -> None:
    """DescribeTable of ``table`` answered as DynamoDB describes an MRSC global table (or fails with ``code``)."""

    def handler(model: Any, params: dict[str, Any], **_: Any) -> tuple[AWSResponse, dict[str, Any]] | None:
        if model.name != "DescribeTable" or json.loads(params.get("body") or b"{}").get("TableName") != table:
            return None
        if code is not None:
            error = {"ResponseMetadata": {"HTTPStatusCode": 400, "HTTPHeaders": {}}, "Error": {"Code": code}}
            return AWSResponse("https://dynamodb.invalid", 400, {}, None), error
        body = {
            "ResponseMetadata": {"HTTPStatusCode": 200, "HTTPHeaders": {}},
            "Table": {
                "TableName": table,
                "TableStatus": "ACTIVE",
                "KeySchema": [{"AttributeName": "PK", "KeyType": "HASH"}, {"AttributeName": "SK", "KeyType": "RANGE"}],
                "AttributeDefinitions": [
                    {"AttributeName": "PK", "AttributeType": "S"},
                    {"AttributeName": "SK", "AttributeType": "S"},
                ],
                "Replicas": [{"RegionName": "us-east-2", "ReplicaStatus": "ACTIVE"}],
                "MultiRegionConsistency": "STRONG",
            },
        }
        return AWSResponse("https://dynamodb.invalid", 200, {}, None), body

    for client in _clients(model):
        client.meta.events.register_last("before-call.dynamodb", handler)


@pytest.mark.parametrize("separate", [False, True], ids=["shared", "separate"])
def test_mrsc_records_table__save_refused_before_sending(backend: Backend, separate: bool) -> None:
    """A save to an MRSC records table: UniqueConfigError naming the reason, and nothing written."""
    model = bind_accounts(backend, separate=separate)
    undescribed(model)
    describe_as_strong(model, model.Meta.table_name)
    with RequestCounter() as counter, pytest.raises(UniqueConfigError) as raised:
        model(pk="a1", email=ADA, username="ada").save()
    message = str(raised.value)
    assert f"records table {model.Meta.table_name!r}" in message
    assert "multi-Region strong consistency (MRSC)" in message
    assert "supports no transactions" in message
    assert counter.operations == ["DescribeTable"]


def test_mrsc_lock_table__refused_naming_the_lock_table(backend: Backend) -> None:
    """Locks in a table of their own, that one MRSC: refused, naming the lock table."""
    model = bind_accounts(backend, separate=True)
    locks = context_of(model).locks().table_name  # type: ignore[union-attr]
    undescribed(model)
    describe_as_strong(model, locks)
    with RequestCounter() as counter, pytest.raises(UniqueConfigError, match=f"its lock table {locks!r}"):
        model(pk="a1", email=ADA, username="ada").save()
    assert not set(counter.operations) & set(WRITES)


def test_mrsc__every_write_path_and_tool_refused(backend: Backend) -> None:
    """update, delete, TransactWrite, bulk_save, the tools and the Streams handler refuse an MRSC table too."""
    model = bind_accounts(backend)
    account = model(pk="a1", email=ADA, username="ada")
    account.save()
    describe_as_strong(model, model.Meta.table_name)
    undescribed(model)  # What a process starting after the table became MRSC sees: described anew.
    fresh = model
    loaded = fresh.get("a1", "PROFILE")

    def transact() -> None:
        with TransactWrite() as tx:
            tx.save(fresh(pk="a2", email="b@x.io", username="b"))

    attempts = {
        "update": lambda: loaded.update(actions=[fresh.username.set("countess")]),
        "delete": loaded.delete,
        "save": lambda: fresh(pk="a3", email="c@x.io", username="c").save(),
        "TransactWrite": transact,
        "bulk_save": lambda: bulk_save([fresh(pk="a4", email="d@x.io", username="d")]),
        "audit": lambda: audit(fresh),
        "repair": lambda: repair(fresh, apply=True),
        "backfill": lambda: backfill(fresh),
        "migrate": lambda: migrate(fresh, apply=True),
        "streams.handle": lambda: streams.handle(fresh, {"Records": []}),
    }
    with RequestCounter() as counter:
        for name, attempt in attempts.items():
            with pytest.raises(UniqueConfigError, match="MRSC"):
                attempt()
            assert not set(counter.operations) & {*WRITES, "Scan"}, name
    # Described once for all of them.
    assert counter.count("DescribeTable") == 1


@pytest.mark.parametrize("separate", [False, True], ids=["shared", "separate"])
def test_describe_table__once_per_table_not_per_write(backend: Backend, separate: bool) -> None:
    """The check costs one DescribeTable per table in the process: none per write, none for a second class."""
    model = bind_accounts(backend, separate=separate)
    undescribed(model)
    with RequestCounter() as counter:
        account = model(pk="a1", email=ADA, username="ada")
        account.save()
        account.update(actions=[model.username.set("countess")])
        model(pk="a2", email="b@x.io", username="b").save()
        account.delete()
        # Another class on the same table and endpoint (a new connection): already described.
        twin = bind_model(Account, backend, model.Meta.table_name, create=False)
        if separate:
            twin.Meta.unique_lock_table = model.Meta.unique_lock_table  # type: ignore[attr-defined]
        twin(pk="a3", email="c@x.io", username="c").save()
    tables = {model.Meta.table_name, context_of(model).locks().table_name}  # type: ignore[union-attr]
    described = [call.params["TableName"] for call in counter.calls if call.operation == "DescribeTable"]
    assert sorted(described) == sorted(tables)
    assert counter.operations.index("DescribeTable") == 0  # Before the first write is sent.


def test_model_without_constraints__never_described(backend: Backend) -> None:
    """A mixin model without a constraint writes as PynamoDB does: no DescribeTable."""
    model = bind_model(Plain, backend)
    with RequestCounter() as counter:
        record = model(pk="p1")
        record.save()
        record.update(actions=[model.bio.set("hi")])
        record.delete()
    assert counter.operations == ["PutItem", "UpdateItem", "DeleteItem"]


def test_describe_table_denied__writes_go_on_with_a_warning(backend: Backend, caplog: pytest.LogCaptureFixture) -> None:
    """A policy without DescribeTable (written before this check): a WARNING, and the write as before."""
    model = bind_accounts(backend)
    undescribed(model)
    describe_as_strong(model, model.Meta.table_name, code="AccessDeniedException")
    with caplog.at_level(logging.WARNING, logger="pynamodb_unique"):
        model(pk="a1", email=ADA, username="ada").save()
        model(pk="a2", email="b@x.io", username="b").save()
    warnings = [r.getMessage() for r in caplog.records if r.name == "pynamodb_unique"]
    assert len(warnings) == 1
    assert "dynamodb:DescribeTable denied" in warnings[0]
    assert model.get("a2", "PROFILE").email == "b@x.io"
