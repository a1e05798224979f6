"""Fixed defaults read as loaded, the believed-gone delete in families, stored texts in repair and migrate.

Each test says what it checks and why a failure would be a bug.
"""

from __future__ import annotations

from _backends import Backend, RequestCounter, bind_model
from _invariant import assert_invariant
from _scaffold import bind_with_lock_table, drop_locks, lock_items, put_raw, while_on
from models import Cat, Dog, Pet, Tagged
from pynamodb.attributes import (
    BinaryAttribute,
    DiscriminatorAttribute,
    JSONAttribute,
    NumberAttribute,
    UnicodeAttribute,
)
from pynamodb.models import Model

from pynamodb_unique import UniqueMixin, audit, migrate, repair

MOTO = Backend("moto", None)


# --- models ----------------------------------------------------------------------------------


class Doc(UniqueMixin, Model):
    """A unique JSONAttribute: its stored text is checked verbatim by repair and migrate."""

    class Meta:
        table_name = "family-docs"
        region = "us-east-1"
        unique_constraints = [while_on("DOC")]

    pk = UnicodeAttribute(hash_key=True)
    email = UnicodeAttribute(null=True)
    doc = JSONAttribute(null=True)


class NumDoc(UniqueMixin, Model):
    """Numeric keys and a unique JSONAttribute."""

    class Meta:
        table_name = "family-numdocs"
        region = "us-east-1"
        unique_lock_table = "family-numdocs-locks"
        unique_constraints = [while_on("NUMDOC")]

    id = NumberAttribute(hash_key=True)
    rev = NumberAttribute(range_key=True)
    email = UnicodeAttribute(null=True)
    doc = JSONAttribute(null=True)


class BinDoc(UniqueMixin, Model):
    """A binary hash key and a unique JSONAttribute (locks live in their own table)."""

    class Meta:
        table_name = "family-bindocs"
        region = "us-east-1"
        unique_lock_table = "family-bindocs-locks"
        unique_constraints = [while_on("BINDOC")]

    key = BinaryAttribute(hash_key=True, legacy_encoding=False)
    email = UnicodeAttribute(null=True)
    doc = JSONAttribute(null=True)


class Shape(UniqueMixin, Model):
    """A polymorphic family whose subclass holds a unique JSONAttribute."""

    class Meta:
        table_name = "family-shapes"
        region = "us-east-1"

    pk = UnicodeAttribute(hash_key=True)
    kind = DiscriminatorAttribute()


class Box(Shape, discriminator="box"):
    class Meta:
        table_name = "family-shapes"
        region = "us-east-1"
        unique_constraints = [while_on("BOX", "label", "spec")]

    label = UnicodeAttribute(null=True)
    spec = JSONAttribute(null=True)


# --- a believed-gone delete over another class of the family ---------------------------------


def test_delete__believed_gone__another_class_recreated__keeps_its_locks(moto_backend: None) -> None:
    """A Dog's delete, believing its record gone, must not delete a Cat stored since under the key.

    Before the fix: ``d`` is saved and deleted (it remembers "nothing stored"); a Cat is then saved under the same
    key holding chip "C1" and no name. ``d.delete()`` is planned with the Dog's planner from "nothing
    stored": ``Guard.condition`` (``not stored.exists``, ``gone_ok``) sends "gone, or the *Dog's*
    unique attributes absent" - no class check, and only the writer's defaults checked - so
    the Cat item passes and is deleted without releasing "C1": an orphaned lock, "C1" taken forever.
    A polymorphic believed-gone guard must also require the writer's class (or be "gone" alone).
    """
    Pet.create_table(wait=True, billing_mode="PAY_PER_REQUEST")
    dogs, cats = Dog, Cat
    d = dogs(pk="a")
    d.save()
    d.delete()
    cats(pk="a", chip="C1").save()
    d.delete()
    stored = list(cats.scan(consistent_read=True))
    chips = [i for i in lock_items(cats) if "C1" in str(i)]
    # Either the Cat survives with its lock, or it is gone and so is its lock.
    assert bool(stored) == bool(chips), f"records {stored}, chip locks {chips}"


# --- values(): an empty set with a fixed default -------------------------------------------


def test_save__empty_set_with_fixed_default__takes_the_default_lock(moto_backend: None) -> None:
    """``tags=set()`` is stored as no attribute and loads as the fixed default {"vip"}: the email is locked.

    Before the fix: ``ModelContext.values`` applied ``Planner.as_loaded`` (None -> default) *before* it turns an
    empty set into None, so the empty set ends as None with no default filled: the partial
    condition sees no "vip" and the save takes no lock, while the record loads with tags {"vip"}
    and so holds its email. The invariant breaks and a second record may take the same email.
    The empty set must become None before the defaults are filled (in ``values``).
    """
    model = bind_model(Tagged, MOTO)
    model(pk="a", email="e@x.io", tags=set()).save()
    assert model.get("a").tags == {"vip"}  # What PynamoDB loads.
    assert_invariant(model)


def test_save__none_set_with_fixed_default__takes_the_default_lock(moto_backend: None) -> None:
    """``tags=None`` loads as {"vip"}: the save takes the email's lock."""
    model = bind_model(Tagged, MOTO)
    model(pk="a", email="e@x.io", tags=None).save()
    assert_invariant(model)
    assert model.unique_owner(email="e@x.io") == ("a",)


# --- stored texts in repair and migrate -------------------------------------------------------


def test_repair__record_changed_to_unreadable_text__skipped_not_raised(moto_backend: None) -> None:
    """A record changed after the audit to a text its attribute cannot read is skipped, not a crash.

    Before the fix: ``ModelContext.stored_texts`` (called by ``Fixer.record_check``) deserialized the stored text
    to compare it with the audited value; another writer's text that is not JSON raises
    ``JSONDecodeError`` out of ``repair()``, so no fix at all is applied. The contract is that a
    record changed since the audit makes its fix fail ("skipped"); a text that cannot be read is
    not the audited value and must simply not be taken.
    """
    model = bind_model(Doc, MOTO)
    model(pk="a", email="a@x.io", doc={"on": 1}).save()
    model(pk="b", email="b@x.io", doc={"on": 2}).save()
    drop_locks(model)
    report = audit(model)
    assert len(report.problems) == 2
    put_raw(model, {"pk": {"S": "a"}, "email": {"S": "a@x.io"}, "doc": {"S": "{not json"}})
    done = repair(model, report, apply=True)
    outcomes = sorted(f.outcome for f in done.fixes)
    assert outcomes == ["applied", "skipped"]


def test_repair__dry_run__reads_no_record(moto_backend: None) -> None:
    """``repair(apply=False)`` sends no GetItem: the stored text is only needed by a fix that is sent.

    Before the fix: the IAM table (docs/adopting.md, README) listed for repair and backfill only Scan,
    DescribeTable and TransactWriteItems (GetItem for migrate alone). ``Fixer.record_check`` now
    calls ``stored_texts`` while *planning*, so even a dry run reads each involved record: a
    least-privilege role that ran repair before now fails with AccessDenied, and a dry run costs
    a read per problem. Read the texts only when a fix is sent (or document GetItem).
    """
    model = bind_model(Doc, MOTO)
    model(pk="a", email="a@x.io", doc={"on": 1}).save()
    drop_locks(model)
    report = audit(model)
    with RequestCounter(model) as counter:
        planned = repair(model, report, apply=False)
    assert [f.outcome for f in planned.fixes] == ["planned"]
    assert counter.count("GetItem") == 0, counter.operations


def test_repair_and_migrate__respelled_json_text__fixed(moto_backend: None) -> None:
    """Another writer's spelling of the JSON text: repair and migrate check it as stored and create the lock."""
    model = bind_model(Doc, MOTO)
    put_raw(model, {"pk": {"S": "a"}, "email": {"S": "a@x.io"}, "doc": {"S": '{ "on" : 1 }'}})
    put_raw(model, {"pk": {"S": "b"}, "email": {"S": "b@x.io"}, "doc": {"S": '{ "on" : 2 }'}})
    done = repair(model, audit(model), apply=True)
    assert [f.outcome for f in done.fixes] == ["applied", "applied"]
    drop_locks(model)
    report = migrate(model, apply=True)
    assert [f.outcome for f in report.fixes] == ["applied", "applied"]
    assert not audit(model).problems


def test_repair_and_migrate__numeric_keys__owner_read_and_fixed(moto_backend: None) -> None:
    """Numeric keys: the owner key passed to get_item is the serialized number; the locks are created."""
    model = bind_with_lock_table(NumDoc, MOTO, "family-locks")
    put_raw(model, {"id": {"N": "5"}, "rev": {"N": "2"}, "email": {"S": "a@x.io"}, "doc": {"S": '{"on":  1}'}})
    done = repair(model, audit(model), apply=True)
    assert [f.outcome for f in done.fixes] == ["applied"]
    assert model.unique_owner(email="a@x.io") == (5, 2)
    drop_locks(model, model.Meta.unique_lock_table)
    assert [f.outcome for f in migrate(model, apply=True).fixes] == ["applied"]
    assert not audit(model).problems


def test_repair_and_migrate__binary_key__owner_read_and_fixed(moto_backend: None) -> None:
    """A binary hash key: stored_texts reads the record by its bytes; repair and migrate create the lock."""
    model = bind_with_lock_table(BinDoc, MOTO, "family-locks")
    put_raw(model, {"key": {"B": b"\x00\xffk"}, "email": {"S": "a@x.io"}, "doc": {"S": '{"on":  1}'}})
    done = repair(model, audit(model), apply=True)
    assert [f.outcome for f in done.fixes] == ["applied"]
    drop_locks(model, model.Meta.unique_lock_table)
    assert [f.outcome for f in migrate(model, apply=True).fixes] == ["applied"]
    assert not audit(model).problems


def test_repair_and_migrate__polymorphic_subclass_text__fixed(moto_backend: None) -> None:
    """A Box record audited through the family: its own model's stored text is read and checked."""
    Shape.create_table(wait=True, billing_mode="PAY_PER_REQUEST")
    boxes = Box
    put_raw(boxes, {"pk": {"S": "a"}, "kind": {"S": "box"}, "label": {"S": "L"}, "spec": {"S": '{ "on": 3 }'}})
    done = repair(boxes, audit(boxes), apply=True)
    assert [f.outcome for f in done.fixes] == ["applied"]
    drop_locks(boxes)
    assert [f.outcome for f in migrate(boxes, apply=True).fixes] == ["applied"]
    assert not audit(boxes).problems


def test_repair__value_changed_since_audit__skipped(moto_backend: None) -> None:
    """A record whose JSON value changed after the audit gets no stored text, so its check fails: skipped."""
    model = bind_model(Doc, MOTO)
    put_raw(model, {"pk": {"S": "a"}, "email": {"S": "a@x.io"}, "doc": {"S": '{ "on" : 1 }'}})
    report = audit(model)
    put_raw(model, {"pk": {"S": "a"}, "email": {"S": "a@x.io"}, "doc": {"S": '{ "on" : 9 }'}})
    done = repair(model, report, apply=True)
    assert [f.outcome for f in done.fixes] == ["skipped"]
