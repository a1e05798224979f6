"""Tests of the test harness itself (conftest fixtures and tests/_backends.py helpers)."""

from __future__ import annotations

import threading

import boto3
import pytest
from _backends import Backend, RequestCounter, bind_model, unique_table_name
from pynamodb.attributes import NumberAttribute, UnicodeAttribute
from pynamodb.connection import Connection
from pynamodb.exceptions import TransactWriteError
from pynamodb.models import Model
from pynamodb.transactions import TransactWrite

# The harness itself is checked on both backends.
pytestmark = pytest.mark.backends("moto", "dynoxide")


class Thing(Model):
    class Meta:
        table_name = "unbound-thing"

    pk = UnicodeAttribute(hash_key=True)
    n = NumberAttribute(default=0)


def test_bind_model_creates_isolated_tables(backend: Backend) -> None:
    a = bind_model(Thing, backend)
    b = bind_model(Thing, backend)
    assert issubclass(a, Thing)
    assert a.Meta.table_name != b.Meta.table_name
    assert vars(a.Meta)["host"] == backend.host
    assert vars(a.Meta)["region"] == "us-east-1"
    assert a._get_connection() is not b._get_connection()
    a(pk="x", n=1).save()
    assert a.get("x").n == 1
    with pytest.raises(Thing.DoesNotExist):  # DoesNotExist is shared with the parent class
        b.get("x")
    assert Thing.Meta.table_name == "unbound-thing"  # parent untouched


@pytest.mark.integration
def test_dynoxide_table_reachable_with_boto3(dynoxide_endpoint: str) -> None:
    bound = bind_model(Thing, Backend("dynoxide", dynoxide_endpoint), unique_table_name("reach"))
    client = boto3.client("dynamodb", region_name="us-east-1", endpoint_url=dynoxide_endpoint)
    desc = client.describe_table(TableName=bound.Meta.table_name)["Table"]
    assert desc["TableStatus"] == "ACTIVE"
    assert desc["BillingModeSummary"]["BillingMode"] == "PAY_PER_REQUEST"


def test_request_counter_counts_one_put_item_per_save(backend: Backend) -> None:
    bound = bind_model(Thing, backend)
    with RequestCounter(bound) as rc:
        bound(pk="a", n=3).save()
    assert rc.operations == ["PutItem"]
    assert rc.attempts == 1
    (params,) = rc.params("PutItem")
    assert params["TableName"] == bound.Meta.table_name
    assert params["Item"]["pk"] == {"S": "a"}
    bound.get("a")  # after exit: not counted
    assert rc.count() == 1


def test_request_counter_records_transaction_params(backend: Backend) -> None:
    bound = bind_model(Thing, backend)
    with RequestCounter(bound) as rc, TransactWrite(connection=bound._get_connection().connection) as tx:
        tx.save(bound(pk="t1"))
        tx.save(bound(pk="t2"))
    assert rc.operations == ["TransactWriteItems"]
    (params,) = rc.params("TransactWriteItems")
    assert [item["Put"]["Item"]["pk"]["S"] for item in params["TransactItems"]] == ["t1", "t2"]
    assert params["ClientRequestToken"]  # botocore fills in an idempotency token itself


def test_request_counter_sees_other_threads(backend: Backend) -> None:
    bound = bind_model(Thing, backend)
    with RequestCounter(bound) as rc:
        workers = [threading.Thread(target=bound(pk=f"w{i}").save) for i in range(3)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
    assert rc.operations == ["PutItem"] * 3


def test_request_counter_without_target_sees_any_connection(backend: Backend) -> None:
    bound = bind_model(Thing, backend)
    with RequestCounter() as rc:
        Connection(region="us-east-1", host=backend.host).describe_table(bound.Meta.table_name)
        bound(pk="g").save()
    assert rc.operations == ["DescribeTable", "PutItem"]
    Connection(region="us-east-1", host=backend.host).describe_table(bound.Meta.table_name)
    assert rc.count() == 2


def test_cancellation_reasons_in_order_with_old_item(backend: Backend) -> None:
    """The backend contract the library relies on (see tests/BACKENDS.md)."""
    bound = bind_model(Thing, backend)
    bound(pk="taken", n=7).save()
    connection = bound._get_connection().connection
    with pytest.raises(TransactWriteError) as info, TransactWrite(connection=connection) as tx:  # noqa: PT012
        tx.save(bound(pk="free"), condition=bound.pk.does_not_exist())
        tx.save(bound(pk="taken"), condition=bound.pk.does_not_exist(), return_values="ALL_OLD")
    assert info.value.cause_response_code == "TransactionCanceledException"
    free, taken = info.value.cancellation_reasons
    assert free is None
    assert taken is not None
    assert taken.code == "ConditionalCheckFailed"
    assert taken.raw_item == {"pk": {"S": "taken"}, "n": {"N": "7"}}
