"""The stored view (fixed defaults, stored texts) with migrations, hashed constraints and TTL.

From a review: each test says what it checks and why a failure is a bug; ``test_probe_*`` tests
pin behaviour the review checked and found right.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from _backends import Backend, bind_model
from _invariant import assert_invariant
from pynamodb.attributes import JSONAttribute, TTLAttribute, UnicodeAttribute
from pynamodb.models import Model

from pynamodb_unique import (
    Former,
    UniqueConstraint,
    UniqueMixin,
    audit,
    migrate,
)

MOTO = Backend("moto", None)


class DefaultNullRf(UniqueMixin, Model):
    """A partial constraint whose condition attribute has a fixed default and may be None."""

    class Meta:
        table_name = "review-fourth-default-null"
        region = "us-east-1"
        unique_constraints = [
            UniqueConstraint(
                "email", name="LIVE_EMAILRf", condition=lambda r: r.status == "live", condition_attributes=("status",)
            )
        ]

    pk = UnicodeAttribute(hash_key=True)
    email = UnicodeAttribute(null=True)
    status = UnicodeAttribute(null=True, default="live")


class JsonFormerRf(UniqueMixin, Model):
    """A migrating constraint (former form: not case-folded) whose condition reads a JSONAttribute."""

    class Meta:
        table_name = "review-fourth-json-former"
        region = "us-east-1"
        unique_constraints = [
            UniqueConstraint(
                "email",
                name="JF_EMAILRf",
                normalize=str.casefold,
                former=Former(normalize=None),
                condition=lambda r: r.meta is not None and bool(r.meta.get("active")),
                condition_attributes=("meta",),
            )
        ]

    pk = UnicodeAttribute(hash_key=True)
    email = UnicodeAttribute(null=True)
    meta = JSONAttribute(null=True)


class HashedTtlRf(UniqueMixin, Model):
    """A hashed unique email on a record that expires, with a defaulted condition attribute."""

    class Meta:
        table_name = "review-fourth-hashed-ttl"
        region = "us-east-1"
        unique_secret = b"review-fourth-secret-0123456789ab"
        unique_constraints = [
            UniqueConstraint(
                "email",
                name="H_EMAILRf",
                hashed=True,
                condition=lambda r: r.status == "live",
                condition_attributes=("status",),
            )
        ]

    pk = UnicodeAttribute(hash_key=True)
    email = UnicodeAttribute(null=True)
    status = UnicodeAttribute(default="live")
    expires = TTLAttribute(null=True)


def _put_raw(model: type[Model], item: dict[str, Any]) -> None:
    """Write an item behind the library's back (another writer)."""
    model._get_connection().connection.client.put_item(TableName=model.Meta.table_name, Item=item)


def test_save__defaulted_condition_attribute_set_none__lock_taken(moto_backend: None) -> None:
    """A record saved with None in a nullable attribute with a fixed default holds the default's lock.

    PynamoDB stores no attribute for None and loads the item with the default ("live"), so the live
    record satisfies the partial constraint and must hold the email's lock. Before the fix, a put
    was planned from the instance's None, not from the value as loaded: no lock was taken, and a
    duplicate email could be saved.
    """
    model = bind_model(DefaultNullRf, MOTO)
    model(pk="a", email="a@x.io", status=None).save()
    assert model.get("a").status == "live"  # What PynamoDB loads.
    assert_invariant(model)


def test_migrate__json_condition_attribute_written_compactly__creates_lock(moto_backend: None) -> None:
    """``migrate(apply=True)`` gives a record whose JSON another writer spelled compactly its current-form lock.

    The loaded record (``meta`` = {"active": true}) satisfies the constraint, so it must hold the
    case-folded lock. Before the fix, ``_migrate`` checked the record with Python values only, so
    its ConditionCheck compared ``meta`` with ``'{"active": true}'`` while the item stores
    ``'{"active":true}'``: the fix was "skipped" on every run and the migration never completed.
    """
    model = bind_model(JsonFormerRf, MOTO)
    _put_raw(model, {"pk": {"S": "m1"}, "email": {"S": "Ann@x.io"}, "meta": {"S": '{"active":true}'}})
    report = migrate(model, apply=True)
    assert report.missing >= 1
    assert [f.outcome for f in report.fixes] == ["applied"] * report.missing, [f.reason for f in report.fixes]
    assert report.done


def test_hashed_ttl__defaulted_attribute_removed_by_other_writer__update_moves_expiry(
    moto_backend: None,
) -> None:
    """Passing probe: a hashed, expiring record whose defaulted attribute another writer removed updates cleanly.

    The loaded snapshot holds the default ("live") for the absent attribute; the update's
    compare-and-swap must accept it absent, and the new expiry must move onto the hashed lock.
    """
    model = bind_model(HashedTtlRf, MOTO)
    model(pk="h1", email="h@x.io", expires=datetime.now(UTC) + timedelta(days=1)).save()
    client = model._get_connection().connection.client
    client.update_item(
        TableName=model.Meta.table_name,
        Key={"pk": {"S": "h1"}},
        UpdateExpression="REMOVE #s",
        ExpressionAttributeNames={"#s": "status"},
    )
    record = model.get("h1")
    later = datetime.now(UTC) + timedelta(days=5)
    record.update(actions=[model.expires.set(later)])
    assert audit(model).clean
    locks = [i for i in client.scan(TableName=model.Meta.table_name)["Items"] if i["pk"]["S"] != "h1"]
    assert [int(lock["expires"]["N"]) for lock in locks if "expires" in lock] == [int(later.timestamp())]
