"""streams.handle(): Lambda DynamoDB Streams events keep the locks in step with bypassing writers."""

from __future__ import annotations

import base64
import uuid
from typing import Any

import pytest
from _backends import Backend, RequestCounter, bind_model, unique_table_name
from _damage import (
    ADA,
    ADA_TWIN,
    GRACE,
    all_items,
    bind_accounts,
    client,
    delete_record,
    lock_table_name,
    put_record,
)
from _invariant import assert_invariant
from models import Customer, Employee
from pynamodb.attributes import BinaryAttribute, DiscriminatorAttribute, UnicodeAttribute
from pynamodb.models import Model

from pynamodb_unique import UniqueAttribute, UniqueMixin, audit, is_lock_item, streams
from pynamodb_unique._model.context import context_of
from pynamodb_unique.streams import StreamReport, decode, handle

ARN = "arn:aws:dynamodb:us-east-1:123456789012:table/{}/stream/2026-12-01T00:00:00.000"


def _lambda(value: Any) -> Any:
    """A value of DynamoDB JSON as Lambda serializes it: binary as base64 text, all the way down."""
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, dict):
        return {k: _lambda(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_lambda(v) for v in value]
    return value


def raw(model: type[Model], key: tuple[str, str], table: str | None = None) -> dict[str, Any]:
    """The item stored under ``key``, read with the raw client."""
    found = client(model).get_item(
        TableName=table or model.Meta.table_name, Key={"PK": {"S": key[0]}, "SK": {"S": key[1]}}, ConsistentRead=True
    )
    item: dict[str, Any] = found["Item"]
    return item


def record(
    model: type[Model],
    name: str,
    old: dict[str, Any] | None = None,
    new: dict[str, Any] | None = None,
    *,
    view: str = "NEW_AND_OLD_IMAGES",
    table: str | None = None,
) -> dict[str, Any]:
    """One stream record in Lambda's format, from items read with the raw client."""
    image = new if new is not None else old
    assert image is not None
    stream: dict[str, Any] = {"Keys": _lambda({k: image[k] for k in ("PK", "SK")}), "StreamViewType": view}
    if old is not None and view in ("NEW_AND_OLD_IMAGES", "OLD_IMAGE"):
        stream["OldImage"] = _lambda(old)
    if new is not None and view in ("NEW_AND_OLD_IMAGES", "NEW_IMAGE"):
        stream["NewImage"] = _lambda(new)
    return {
        "eventID": uuid.uuid4().hex,
        "eventName": name,
        "eventSource": "aws:dynamodb",
        "awsRegion": "us-east-1",
        "dynamodb": stream,
        "eventSourceARN": ARN.format(table or model.Meta.table_name),
    }


def event(*records: dict[str, Any]) -> dict[str, Any]:
    return {"Records": list(records)}


def lock_owners(model: type[Model]) -> dict[str, str]:
    """Lock key -> owner hash key of every lock item of the model."""
    table = lock_table_name(model)
    items = client(model).scan(TableName=table, ConsistentRead=True)["Items"]
    return {i["PK"]["S"]: i["uniq_owner_hash"]["S"] for i in items if is_lock_item(i)}


def test_handle__remove_behind_the_librarys_back_releases_the_locks(backend: Backend) -> None:
    """A record deleted with the raw client (TTL, the console): its REMOVE releases its three locks."""
    accounts = bind_accounts(backend)
    accounts(pk=ADA[0], email="ada@lovelace.io", username="ada", tenant="acme", slug="ada").save()
    accounts(pk=GRACE[0], email="grace@hopper.dev").save()
    old = raw(accounts, ADA)
    delete_record(accounts, ADA)
    report = handle(accounts, event(record(accounts, "REMOVE", old=old)))
    assert (report.records, report.released, report.created, report.left) == (1, 3, 0, ())
    assert lock_owners(accounts) == {"UNIQ#EMAIL#grace@hopper.dev": GRACE[0]}
    assert_invariant(accounts)


def test_handle__remove_with_a_separate_lock_table(backend: Backend) -> None:
    """Locks in their own table are read and released there."""
    accounts = bind_accounts(backend, separate=True)
    accounts(pk=ADA[0], email="ada@lovelace.io", username="ada").save()
    old = raw(accounts, ADA)
    delete_record(accounts, ADA)
    report = handle(accounts, event(record(accounts, "REMOVE", old=old)))
    assert (report.released, report.left) == (2, ())
    assert lock_owners(accounts) == {}
    assert audit(accounts).clean


def test_handle__insert_by_a_bypassing_writer_creates_the_locks(backend: Backend) -> None:
    """A record put with the raw client gets its free locks, owned by it."""
    accounts = bind_accounts(backend)
    put_record(accounts, ADA, email="Ada@Lovelace.io", username="ada")
    report = handle(accounts, event(record(accounts, "INSERT", new=raw(accounts, ADA))))
    assert (report.released, report.created, report.left) == (0, 2, ())
    assert lock_owners(accounts) == {"UNIQ#EMAIL#ada@lovelace.io": ADA[0], "UNIQ#HANDLE#ada": ADA[0]}
    assert_invariant(accounts)


def test_handle__modify_of_a_unique_value_moves_its_lock(backend: Backend) -> None:
    """A raw update of the email: the old lock is released and the new one created; the others stay."""
    accounts = bind_accounts(backend)
    accounts(pk=ADA[0], email="ada@lovelace.io", username="ada").save()
    old = raw(accounts, ADA)
    client(accounts).update_item(
        TableName=accounts.Meta.table_name,
        Key={"PK": {"S": ADA[0]}, "SK": {"S": ADA[1]}},
        UpdateExpression="SET email = :e",
        ExpressionAttributeValues={":e": {"S": "ada@babbage.uk"}},
    )
    report = handle(accounts, event(record(accounts, "MODIFY", old=old, new=raw(accounts, ADA))))
    assert (report.released, report.created, report.left) == (1, 1, ())
    assert lock_owners(accounts) == {"UNIQ#EMAIL#ada@babbage.uk": ADA[0], "UNIQ#HANDLE#ada": ADA[0]}
    assert_invariant(accounts)


def test_handle__a_value_another_record_owns_is_left(backend: Backend) -> None:
    """A record put holding Ada's email gets no lock for it: reported with the owner, nothing taken."""
    accounts = bind_accounts(backend)
    accounts(pk=ADA[0], email="ada@lovelace.io").save()
    put_record(accounts, ADA_TWIN, email="ADA@lovelace.io", username="twin")
    report = handle(accounts, event(record(accounts, "INSERT", new=raw(accounts, ADA_TWIN))))
    assert (report.released, report.created) == (0, 1)
    (left,) = report.left
    assert (left.lock_key, left.key, left.owner) == ("UNIQ#EMAIL#ada@lovelace.io", ADA_TWIN, ADA)
    assert "duplicate" in left.reason
    assert left.to_json()["owner"] == list(ADA)
    assert lock_owners(accounts) == {"UNIQ#EMAIL#ada@lovelace.io": ADA[0], "UNIQ#HANDLE#twin": ADA_TWIN[0]}
    # The twin's own change away from the value releases nothing of Ada's.
    old = raw(accounts, ADA_TWIN)
    put_record(accounts, ADA_TWIN, email="twin@lovelace.io", username="twin")
    report = handle(accounts, event(record(accounts, "MODIFY", old=old, new=raw(accounts, ADA_TWIN))))
    assert (report.released, report.created, report.left) == (0, 1, ())
    assert lock_owners(accounts)["UNIQ#EMAIL#ada@lovelace.io"] == ADA[0]
    assert_invariant(accounts)


def test_handle__shards_out_of_order__a_value_its_owner_gave_up_is_taken_over(backend: Backend) -> None:
    """A moves from x to y and B takes x, both bypassing the library; B's INSERT is handled before A's MODIFY.

    The lock of x still names A, which no longer holds x: it is B's now, not a duplicate left for a
    person, and after both events every value has its lock.
    """
    accounts = bind_accounts(backend)
    accounts(pk=ADA[0], email="x@lovelace.io").save()
    before = raw(accounts, ADA)
    put_record(accounts, ADA, email="y@lovelace.io")
    after = raw(accounts, ADA)
    put_record(accounts, GRACE, email="x@lovelace.io")
    first = handle(accounts, event(record(accounts, "INSERT", new=raw(accounts, GRACE))))
    assert (first.released, first.created, first.left) == (0, 1, ())
    assert lock_owners(accounts) == {"UNIQ#EMAIL#x@lovelace.io": GRACE[0]}
    second = handle(accounts, event(record(accounts, "MODIFY", old=before, new=after)))
    assert (second.released, second.created, second.left) == (0, 1, ())
    assert lock_owners(accounts) == {"UNIQ#EMAIL#x@lovelace.io": GRACE[0], "UNIQ#EMAIL#y@lovelace.io": ADA[0]}
    assert_invariant(accounts)


def test_handle__the_other_record_still_holds_the_value__left(backend: Backend) -> None:
    """A lock naming a record that, read consistently, still holds the value is that record's: left, not taken."""
    accounts = bind_accounts(backend)
    accounts(pk=ADA[0], email="x@lovelace.io").save()
    put_record(accounts, ADA, email="x@lovelace.io", username="ada")  # Changed, still holding x.
    put_record(accounts, GRACE, email="x@lovelace.io")
    report = handle(accounts, event(record(accounts, "INSERT", new=raw(accounts, GRACE))))
    assert (report.created, [(left.lock_key, left.owner) for left in report.left]) == (
        0,
        [("UNIQ#EMAIL#x@lovelace.io", ADA)],
    )
    assert lock_owners(accounts) == {"UNIQ#EMAIL#x@lovelace.io": ADA[0]}


def test_handle__replaying_a_batch_changes_nothing(backend: Backend) -> None:
    """The same batch twice: the second finds everything in step, writes nothing, raises nothing."""
    accounts = bind_accounts(backend)
    accounts(pk=ADA[0], email="ada@lovelace.io", username="ada").save()
    gone = raw(accounts, ADA)
    delete_record(accounts, ADA)
    put_record(accounts, GRACE, email="grace@hopper.dev", username="grace")
    inserted = raw(accounts, GRACE)
    old = dict(inserted)
    put_record(accounts, GRACE, email="grace@navy.mil", username="grace")
    batch = event(
        record(accounts, "REMOVE", old=gone),
        record(accounts, "INSERT", new=inserted),
        record(accounts, "MODIFY", old=old, new=raw(accounts, GRACE)),
    )
    first = handle(accounts, batch)
    assert (first.released, first.created, first.left) == (2, 2, ())
    assert_invariant(accounts)
    before = all_items(accounts)
    with RequestCounter(accounts) as counter:
        second = handle(accounts, batch)
    assert (second.released, second.created, second.left) == (0, 0, ())
    assert counter.count("TransactWriteItems") == 0
    assert all_items(accounts) == before


def test_handle__a_late_event_is_decided_on_the_record_as_stored(backend: Backend) -> None:
    """An INSERT read after the record changed again creates the locks of its present values only."""
    accounts = bind_accounts(backend)
    put_record(accounts, ADA, email="ada@lovelace.io")
    first = raw(accounts, ADA)
    put_record(accounts, ADA, email="ada@babbage.uk")
    report = handle(accounts, event(record(accounts, "INSERT", new=first)))
    assert (report.released, report.created, report.left) == (0, 1, ())
    assert lock_owners(accounts) == {"UNIQ#EMAIL#ada@babbage.uk": ADA[0]}
    assert_invariant(accounts)


def test_handle__ignores_lock_items_other_tables_and_records_the_model_does_not_hold(backend: Backend) -> None:
    """Lock items' events, another table's records and events without unique changes: no request at all."""
    accounts = bind_accounts(backend)
    accounts(pk=ADA[0], email="ada@lovelace.io", username="ada").save()
    lock = raw(accounts, ("UNIQ#EMAIL#ada@lovelace.io", "LOCK"))
    old = raw(accounts, ADA)
    delete_record(accounts, ADA)
    batch = event(
        record(accounts, "REMOVE", old=lock),
        record(accounts, "INSERT", new=lock),
        record(accounts, "REMOVE", old=old, table="another-table"),
    )
    with RequestCounter() as counter:
        report = handle(accounts, batch)
    assert (report.records, report.released, report.created, report.left) == (0, 0, 0, ())
    assert counter.count() == 0
    assert len(lock_owners(accounts)) == 2
    # The same REMOVE from the model's own table is handled.
    assert handle(accounts, event(record(accounts, "REMOVE", old=old))).released == 2


def test_handle__the_librarys_own_writes_need_one_read_and_no_write(backend: Backend) -> None:
    """save, update of a unique value, save of another field and delete: found in step with at most one read."""
    accounts = bind_accounts(backend)
    ada = accounts(pk=ADA[0], email="ada@lovelace.io", username="ada")
    ada.save()
    inserted = raw(accounts, ADA)
    ada.email = "ada@babbage.uk"
    ada.save()
    moved = raw(accounts, ADA)
    ada.bio = "analyst"
    ada.save()
    with_bio = raw(accounts, ADA)
    ada.delete()
    cases = [
        (record(accounts, "INSERT", new=inserted), ["BatchGetItem"]),
        (record(accounts, "MODIFY", old=inserted, new=moved), ["BatchGetItem"]),
        (record(accounts, "MODIFY", old=moved, new=with_bio), []),
        (record(accounts, "REMOVE", old=with_bio), ["BatchGetItem"]),
    ]
    for one, expected in cases:
        with RequestCounter() as counter:
            report = handle(accounts, event(one))
        assert counter.operations == expected, one["eventName"]
        assert (report.records, report.released, report.created, report.left) == (1, 0, 0, ())
    assert lock_owners(accounts) == {}


def test_handle__old_image_only_stream(backend: Backend) -> None:
    """With OLD_IMAGE records REMOVE still releases; INSERT and MODIFY are left, saying why."""
    accounts = bind_accounts(backend)
    put_record(accounts, GRACE, email="grace@hopper.dev")
    accounts(pk=ADA[0], email="ada@lovelace.io").save()
    old = raw(accounts, ADA)
    delete_record(accounts, ADA)
    report = handle(
        accounts,
        event(
            record(accounts, "REMOVE", old=old, view="OLD_IMAGE"),
            record(accounts, "INSERT", new=raw(accounts, GRACE), view="OLD_IMAGE"),
        ),
    )
    assert (report.released, report.created) == (1, 0)
    (left,) = report.left
    assert (left.event, left.key, left.lock_key) == ("INSERT", GRACE, None)
    assert "NewImage" in left.reason
    assert lock_owners(accounts) == {}


def test_handle__single_table_reads_only_the_models_records(backend: Backend) -> None:
    """In a shared table the item filter decides: an employee's REMOVE is the Employee handler's only."""
    table = unique_table_name("shop")
    customers = bind_model(Customer, backend, table)
    employees = bind_model(Employee, backend, table, create=False)
    customers.Meta.unique_item_filter = lambda m: m.sk == "CUSTOMER"  # type: ignore[attr-defined]
    employees.Meta.unique_item_filter = lambda m: m.sk == "EMPLOYEE"  # type: ignore[attr-defined]
    customers(pk="P#1", email="ada@x.io").save()
    employees(pk="P#1", badge="B1").save()
    old = raw(employees, ("P#1", "EMPLOYEE"))
    client(employees).delete_item(TableName=table, Key={"PK": {"S": "P#1"}, "SK": {"S": "EMPLOYEE"}})
    batch = event(record(employees, "REMOVE", old=old))
    assert handle(customers, batch).records == 0
    assert "UNIQ#BADGE#B1" in lock_owners(customers)
    assert handle(employees, batch).released == 1
    assert lock_owners(customers) == {"UNIQ#CUSTOMER_EMAIL#ada@x.io": "P#1"}


def test_handle__polymorphic_records_by_their_stored_class(backend: Backend) -> None:
    """A Dog put behind the library's back gets its NAME and DOG_TAG locks, owned by Dog; a Cat handler ignores it."""
    table = unique_table_name("animals")

    class Animal(UniqueMixin, Model):
        class Meta:
            table_name = table
            region = "us-east-1"
            host = backend.host

        pk = UnicodeAttribute(hash_key=True, attr_name="PK")
        sk = UnicodeAttribute(range_key=True, attr_name="SK", default="ANIMAL")
        kind = DiscriminatorAttribute()
        name = UniqueAttribute(UnicodeAttribute(null=True))

    class Cat(Animal, discriminator="cat"):
        chip = UniqueAttribute(UnicodeAttribute(null=True), name="CAT_CHIP")

    class Dog(Animal, discriminator="dog"):
        tag = UniqueAttribute(UnicodeAttribute(null=True), name="DOG_TAG")

    Animal.create_table(wait=True, billing_mode="PAY_PER_REQUEST")
    item = {"PK": {"S": "A#1"}, "SK": {"S": "ANIMAL"}, "kind": {"S": "dog"}, "name": {"S": "rex"}, "tag": {"S": "t1"}}
    client(Animal).put_item(TableName=table, Item=item)
    batch = event(record(Animal, "INSERT", new=raw(Animal, ("A#1", "ANIMAL"))))
    assert handle(Cat, batch).records == 0
    report = handle(Animal, batch)
    assert (report.created, report.left) == (2, ())
    items = client(Animal).scan(TableName=table, ConsistentRead=True)["Items"]
    locks = {i["PK"]["S"]: i["uniq_owner_model"]["S"] for i in items if is_lock_item(i)}
    assert locks == {"UNIQ#NAME#rex": "Dog", "UNIQ#DOG_TAG#t1": "Dog"}
    assert audit(Animal).clean
    # A Cat put over the Dog: not the Dog handler's record any more (left); the family's handler moves the locks.
    dog = raw(Animal, ("A#1", "ANIMAL"))
    client(Animal).put_item(
        TableName=table, Item={**item, "kind": {"S": "cat"}, "name": {"S": "tom"}, "chip": {"S": "c1"}}
    )
    batch = event(record(Animal, "MODIFY", old=dog, new=raw(Animal, ("A#1", "ANIMAL"))))
    report = handle(Dog, batch)
    assert (report.released, report.created) == (0, 0)
    assert [left.reason for left in report.left] == ["the item under the key is no longer a Dog record: run audit"]
    report = handle(Animal, batch)
    assert (report.released, report.created, report.left) == (2, 2, ())
    assert audit(Animal).clean


class Keyed(UniqueMixin, Model):
    """A unique binary attribute."""

    class Meta:
        table_name = "stream-keyed"
        region = "us-east-1"

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    sk = UnicodeAttribute(range_key=True, attr_name="SK", default="KEY")
    fingerprint = UniqueAttribute(BinaryAttribute(null=True, legacy_encoding=False))


def test_handle__binary_values_are_decoded_from_base64(backend: Backend) -> None:
    """A binary unique value arrives base64-encoded: its lock is the one the library computes from the bytes."""
    keyed = bind_model(Keyed, backend)
    table = keyed.Meta.table_name
    client(keyed).put_item(
        TableName=table, Item={"PK": {"S": "K#1"}, "SK": {"S": "KEY"}, "fingerprint": {"B": b"\x00\xff\x10"}}
    )
    new = raw(keyed, ("K#1", "KEY"))
    report = handle(keyed, event(record(keyed, "INSERT", new=new)))
    assert (report.created, report.left) == (1, ())
    assert audit(keyed).clean
    expected = keyed(pk="K#1", fingerprint=b"\x00\xff\x10")
    context = context_of(keyed)
    assert context is not None
    assert set(lock_owners(keyed)) == {k for k in context.lock_keys(expected).values() if k}
    client(keyed).delete_item(TableName=table, Key={"PK": {"S": "K#1"}, "SK": {"S": "KEY"}})
    assert handle(keyed, event(record(keyed, "REMOVE", old=new))).released == 1
    assert lock_owners(keyed) == {}


def test_decode__binary_in_maps_lists_and_sets() -> None:
    """B and BS values are decoded wherever they sit; other types pass through."""
    value = {"M": {"b": {"B": "AP8="}, "l": {"L": [{"BS": ["AA==", "AQ=="]}, {"N": "1"}]}, "s": {"S": "AP8="}}}
    assert decode(value) == {
        "M": {"b": {"B": b"\x00\xff"}, "l": {"L": [{"BS": [b"\x00", b"\x01"]}, {"N": "1"}]}, "s": {"S": "AP8="}}
    }


def test_stream_report__to_json() -> None:
    """The report as JSON, binary keys as base64."""
    left = streams.Left("e1", "INSERT", (b"\x01",), "UNIQ#X#y", "held by another record", (b"\x02",))
    report = StreamReport(records=1, released=0, created=0, left=(left,))
    assert report.to_json() == {
        "records": 1,
        "released": 0,
        "created": 0,
        "renewed": 0,
        "left": [
            {
                "event_id": "e1",
                "event": "INSERT",
                "key": ["AQ=="],
                "lock_key": "UNIQ#X#y",
                "owner": ["Ag=="],
                "reason": "held by another record",
            }
        ],
    }


def test_handle__not_a_unique_model() -> None:
    """A model without constraints is refused."""

    class Plain(Model):
        class Meta:
            table_name = "plain"

        pk = UnicodeAttribute(hash_key=True)

    with pytest.raises(Exception, match="not a UniqueMixin model"):
        handle(Plain, event())  # type: ignore[arg-type]
