"""Fixed defaults filled for None, the delete guard, resend bytes, explain and unique_owner.

Each test says what it checks and why a failure would be a bug. An attribute with a fixed
default loads as that default when the item lacks it: the guard, explain, unique_owner and
validate_unique take it so, and a request resent with its token is the same bytes.
"""

from __future__ import annotations

import json

import pytest
from _backends import Backend, RequestCounter, bind_model
from _invariant import assert_invariant
from _scaffold import bind_with_lock_table, put_raw
from click.testing import CliRunner
from models import NullDefaulted
from pynamodb.attributes import NumberAttribute, UnicodeAttribute, VersionAttribute
from pynamodb.models import Model

from pynamodb_unique import (
    UniqueConstraint,
    UniqueMixin,
    UniqueViolation,
    audit,
    explain,
)
from pynamodb_unique.cli import cli

MOTO = Backend("moto", None)


class Slot(UniqueMixin, Model):
    """One record at most may be in a slot; the slot has a fixed default and may be None."""

    class Meta:
        table_name = "defaults-slot"
        region = "us-east-1"
        unique_constraints = [UniqueConstraint("slot", name="SLOT")]

    pk = UnicodeAttribute(hash_key=True)
    slot = UnicodeAttribute(null=True, default="primary")


class Tier(UniqueMixin, Model):
    """A composite constraint whose second part has a fixed default and may be None."""

    class Meta:
        table_name = "defaults-tier"
        region = "us-east-1"
        unique_constraints = [UniqueConstraint("email", "tier", name="EMAIL_TIER")]

    pk = UnicodeAttribute(hash_key=True)
    email = UnicodeAttribute(null=True)
    tier = UnicodeAttribute(null=True, default="free")


class NumSlot(UniqueMixin, Model):
    """Numeric keys, a numeric unique attribute with a fixed default, a version, its own lock table."""

    class Meta:
        table_name = "defaults-numslot"
        region = "us-east-1"
        unique_lock_table = "defaults-numslot-locks"
        unique_constraints = [UniqueConstraint("rank", "status", name="RANK_STATUS")]

    id = NumberAttribute(hash_key=True)
    rev = NumberAttribute(range_key=True)
    rank = NumberAttribute(null=True, default=0)
    status = UnicodeAttribute(null=True, default="live")
    version = VersionAttribute()


# --- delete of a record the instance believes gone -----------------------------------------------


def test_delete__believed_gone__recreated_holding_a_defaulted_value__releases_its_lock(moto_backend: None) -> None:
    """A delete whose instance believes the record gone still releases the lock of a recreated record.

    ``a`` is saved and deleted (it remembers "nothing stored"). Another instance then saves the same
    key with ``slot=None``: PynamoDB stores no ``slot``, the item loads as "primary", and the record
    (rightly, since ``values()`` fills fixed defaults) takes the "primary" lock. ``a.delete()`` is
    planned from "nothing stored": its guard was "gone, or every unique attribute absent or NULL"
    (``Guard.condition``/``Guard.compiled`` for ``not stored.exists`` with ``gone_ok``), which the
    recreated item passed because its ``slot`` is absent, although it holds "primary" as loaded.
    The record was deleted with no release (before the fix): an orphaned lock, and "primary" can never be taken again.
    """
    model = bind_model(Slot, MOTO)
    a = model(pk="a")
    a.save()
    a.delete()
    model(pk="a", slot=None).save()
    assert model.get("a").slot == "primary"  # What PynamoDB loads.
    assert_invariant(model)
    a.delete()
    assert_invariant(model)  # The lock of "primary" must be gone with its record.
    model(pk="b").save()  # And the value free again.


def test_delete__believed_gone__recreated_with_stored_default__replans_and_releases(moto_backend: None) -> None:
    """The same delete when the recreated record stores the default as a value: the guard fails, re-plans, releases."""
    model = bind_model(Slot, MOTO)
    a = model(pk="a")
    a.save()
    a.delete()
    model(pk="a").save()
    a.delete()
    assert_invariant(model)
    model(pk="b").save()


# --- unique_owner / validate_unique with a defaulted part set to None ------------------------------


def test_unique_owner__defaulted_part_none__names_the_owner_save_collides_with(moto_backend: None) -> None:
    """``unique_owner(email=e, tier=None)`` names the record a save of (e, None) collides with.

    ``save()`` fills a fixed default for None (``ModelContext.values``): a record saved with
    ``tier=None`` holds the lock of (e, "free"), and a second save of (e, None) raises
    UniqueViolation. ``unique_owner`` keyed the values as given (before the fix) (``Constraint.values`` then
    ``key``), so None made no key and it answered None ("free"): a form would say the value is
    available and the save would then refuse it; it must agree with the write.
    """
    model = bind_model(Tier, MOTO)
    model(pk="a", email="e@x.io", tier=None).save()
    with pytest.raises(UniqueViolation):
        model(pk="b", email="e@x.io", tier=None).save()
    assert model.unique_owner(email="e@x.io", tier="free") == ("a",)
    assert model.unique_owner(email="e@x.io", tier=None) == ("a",)


def test_validate_unique__defaulted_part_none__agrees_with_save(moto_backend: None) -> None:
    """``validate_unique()`` fills the fixed default for None as save() does: it reports the collision."""
    model = bind_model(Tier, MOTO)
    model(pk="a", email="e@x.io", tier=None).save()
    with pytest.raises(UniqueViolation) as raised:
        model(pk="b", email="e@x.io", tier=None).validate_unique()
    assert [v.owner for v in raised.value.violations] == [("a",)]
    model(pk="a", email="e@x.io", tier=None).validate_unique()  # Its own lock is free to it.


def test_validate_unique__partial_condition_attribute_none__agrees_with_save(moto_backend: None) -> None:
    """A partial constraint whose defaulted condition attribute is None: validate_unique and save both see "live"."""
    model = bind_model(NullDefaulted, MOTO)
    model(pk="a", email="e@x.io", status=None).save()
    with pytest.raises(UniqueViolation):
        model(pk="b", email="e@x.io", status=None).validate_unique()
    with pytest.raises(UniqueViolation):
        model(pk="b", email="e@x.io", status=None).save()


# --- explain with --stored omitting a defaulted attribute --------------------------------------------


def test_explain__stored_omits_defaulted_condition_attribute__delete_releases_the_lock(moto_backend: None) -> None:
    """``explain(..., stored=)`` reads an omitted (or null) defaulted attribute as PynamoDB loads it.

    ``stored={"pk": "a", "email": "e@x.io"}`` describes an item without ``status``, which loads
    as "live": the record holds the LIVE email lock, and its real ``delete()`` (from the loaded
    instance) sends a TransactWriteItems that releases it. ``explain`` built (before the fix)
    ``Stored(values={name: stored.get(name)})`` without the fixed defaults (``_explain.explain``),
    so the partial constraint saw ``status`` None, no lock was released, and it explained a plain
    DeleteItem: not the request the write sends.
    """
    model = bind_model(NullDefaulted, MOTO)
    put_raw(model, {"pk": {"S": "a"}, "email": {"S": "e@x.io"}})
    loaded = model.get("a")
    assert loaded.status == "live"
    shown = explain(model(pk="a", email="e@x.io"), "delete", stored={"pk": "a", "email": "e@x.io"})
    with RequestCounter(model) as counter:
        loaded.delete()
    assert counter.operations == ["TransactWriteItems"]
    assert shown.operation == "TransactWriteItems"


def test_explain_command__stored_null_defaulted_condition_attribute__explains_the_release() -> None:
    """``pynamodb-unique explain --op delete --stored '{..., "status": null}'`` explains the lock's release.

    A stored ``status`` of null is an item without it (or NULL), which loads as "live": the
    record holds its email's lock, and a delete releases it. The command passes the stored values
    to ``explain``, which kept None instead of the fixed default (before the fix): a plain DeleteItem.
    """
    record = '{"pk": "a", "email": "e@x.io", "status": null}'
    target = f"{NullDefaulted.__module__}:NullDefaulted"
    args = ["explain", target, "--op", "delete", "--item", record, "--stored", record, "--json"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["operation"] == "TransactWriteItems"


def test_explain__stored_with_default_value__delete_releases_the_lock() -> None:
    """With the default given explicitly in ``stored``, explain plans the release (the TransactWriteItems)."""
    stored = {"pk": "a", "email": "e@x.io", "status": "live"}
    assert explain(NullDefaulted(pk="a", email="e@x.io"), "delete", stored=stored).operation == "TransactWriteItems"


# --- resend bytes with a caller's token (dynoxide) ---------------------------------------------------


@pytest.fixture
def dynoxide_live(dynoxide_endpoint: str) -> type[NullDefaulted]:
    """NullDefaulted on dynoxide, with its own lock table."""
    return bind_with_lock_table(NullDefaulted, Backend("dynoxide", dynoxide_endpoint), "defaults-locks")


@pytest.fixture
def dynoxide_numslot(dynoxide_endpoint: str) -> type[NumSlot]:
    """NumSlot on dynoxide, with its own lock table."""
    return bind_with_lock_table(NumSlot, Backend("dynoxide", dynoxide_endpoint), "defaults-numlocks")


@pytest.mark.integration
@pytest.mark.parametrize("status", [None, "live"])
def test_dynoxide_token_resend__save_defaulted_none_or_default__byte_identical(
    dynoxide_live: type[NullDefaulted], status: str | None
) -> None:
    """A save resent from a fresh instance with the same values and token sends the same bytes, and is one write."""
    model = dynoxide_live
    token = f"defaults-save-{status}"
    with RequestCounter(model) as counter:
        model(pk="a", email="e@x.io", status=status).save(client_request_token=token)
        model(pk="a", email="e@x.io", status=status).save(client_request_token=token)
    sent = counter.params("TransactWriteItems")
    assert len(sent) == 2
    assert json.dumps(sent[0]) == json.dumps(sent[1])  # Byte order too.
    assert not audit(model).problems


@pytest.mark.integration
def test_dynoxide_token_resend__update_and_delete_from_fresh_instances__byte_identical(
    dynoxide_live: type[NullDefaulted],
) -> None:
    """An update removing the defaulted attribute, and a delete, each resent from a fresh instance: same bytes."""
    model = dynoxide_live
    model(pk="a", email="e@x.io", status="dead").save()
    with RequestCounter(model) as counter:
        for _ in range(2):
            model(pk="a", email="e@x.io", status="dead").update(
                actions=[model.status.remove()], client_request_token="defaults-update"
            )
    sent = counter.params("TransactWriteItems")
    assert len(sent) == 2
    assert json.dumps(sent[0]) == json.dumps(sent[1])
    assert model.get("a").status == "live"
    assert not audit(model).problems
    with RequestCounter(model) as counter:
        for _ in range(2):
            model(pk="a", email="e@x.io").delete(client_request_token="defaults-delete")
    sent = counter.params("TransactWriteItems")
    assert len(sent) == 2
    assert json.dumps(sent[0]) == json.dumps(sent[1])
    assert not audit(model).problems


@pytest.mark.integration
def test_dynoxide_token_resend__numeric_versioned_defaults__byte_identical(
    dynoxide_numslot: type[NumSlot],
) -> None:
    """Numeric keys, a numeric defaulted unique part set to None, a version: the resend repeats the bytes."""
    model = dynoxide_numslot
    with RequestCounter(model) as counter:
        model(id=1, rev=2, rank=None, status=None).save(client_request_token="defaults-num")
        model(id=1, rev=2, rank=None, status=None).save(client_request_token="defaults-num")
    sent = counter.params("TransactWriteItems")
    assert len(sent) == 2
    assert json.dumps(sent[0]) == json.dumps(sent[1])
    assert model.unique_owner(rank=0, status="live") == (1, 2)
    assert not audit(model).problems
    with pytest.raises(UniqueViolation):
        model(id=3, rev=1).save()
