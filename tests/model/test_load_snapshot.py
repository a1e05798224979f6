"""A load keeps the unique attributes' stored values and reads them when a write first asks.

What that lazy view must keep of the view read at load time, and what the load hook and a plain
update must keep of PynamoDB's behaviour (errors for bad input, before any request). Each
docstring says what went wrong without it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from _backends import Backend, RequestCounter, bind_model
from _damage import _context
from pynamodb.attributes import (
    BooleanAttribute,
    JSONAttribute,
    ListAttribute,
    MapAttribute,
    NumberAttribute,
    NumberSetAttribute,
    TTLAttribute,
    UnicodeAttribute,
    UnicodeSetAttribute,
    UTCDateTimeAttribute,
)
from pynamodb.models import Model

from pynamodb_unique import UniqueAttribute, UniqueConstraint, UniqueMixin, create_lock_table
from pynamodb_unique._model import snapshot

MOTO = Backend("moto", None)


class Plain(UniqueMixin, Model):
    """One unique attribute, locks in the record table."""

    class Meta:
        table_name = "lazy-plain"
        region = "us-east-1"

    pk = UnicodeAttribute(hash_key=True)
    email = UniqueAttribute(UnicodeAttribute(null=True, attr_name="Email"))
    bio = UnicodeAttribute(null=True)


class Separate(UniqueMixin, Model):
    """One unique attribute, locks in a separate table."""

    class Meta:
        table_name = "lazy-separate"
        region = "us-east-1"
        unique_lock_table = "lazy-separate-locks"

    pk = UnicodeAttribute(hash_key=True)
    email = UniqueAttribute(UnicodeAttribute(null=True, attr_name="Email"))
    bio = UnicodeAttribute(null=True)


class Session(UniqueMixin, Model):
    """A record that expires: its TTL is part of the record's compare-and-swap."""

    class Meta:
        table_name = "lazy-sessions"
        region = "us-east-1"

    pk = UnicodeAttribute(hash_key=True)
    email = UniqueAttribute(UnicodeAttribute(null=True))
    note = UnicodeAttribute(null=True)
    expires = TTLAttribute(null=True)


def _owner(model: Any, email: str) -> Any:
    return model.unique_owner(email=email)


class Shapes(UniqueMixin, Model):
    """Unique parts and condition attributes of many shapes: defaults fixed and made on load, maps, sets, JSON."""

    class Meta:
        table_name = "lazy-shapes"
        region = "us-east-1"
        unique_constraints = [
            UniqueConstraint(
                "code",
                name="LIVE_CODE",
                condition=lambda r: (
                    r.status == "live"
                    and r.flags is not None
                    and bool(r.flags.as_dict().get("on"))
                    and r.doc != {"off": True}
                    and not (r.tags and "off" in r.tags)
                    and not (r.nums and 0 in r.nums)
                    and r.flag is not False
                    and r.items != ["off"]
                ),
                condition_attributes=("status", "flags", "doc", "tags", "nums", "flag", "items"),
            ),
            UniqueConstraint("when", name="WHEN"),
            UniqueConstraint("made", name="MADE"),
        ]

    pk = UnicodeAttribute(hash_key=True)
    code = NumberAttribute(null=True, attr_name="Code")
    status = UnicodeAttribute(default="live")
    flags = MapAttribute(null=True)  # type: ignore[var-annotated,no-untyped-call]
    doc = JSONAttribute(null=True)  # type: ignore[no-untyped-call]
    tags = UnicodeSetAttribute(null=True)
    nums = NumberSetAttribute(null=True)
    when = UTCDateTimeAttribute(null=True)
    made = UnicodeAttribute(default=lambda: "made-on-load")
    flag = BooleanAttribute(null=True)
    items = ListAttribute(null=True)  # type: ignore[var-annotated]
    expires = TTLAttribute(null=True)


_SHAPES_ITEMS: list[dict[str, Any]] = [
    {"pk": {"S": "k"}},
    {"pk": {"S": "k"}, "Code": {"NULL": True}, "status": {"NULL": True}, "made": {"NULL": True}},
    {
        "pk": {"S": "k"},
        "Code": {"N": "1.50"},
        "status": {"S": "draft"},
        "flags": {"M": {"on": {"BOOL": True}, "n": {"N": "2"}}},
        "doc": {"S": '{ "b": 1,  "a": [1, 2] }'},
        "tags": {"SS": ["b", "a"]},
        "nums": {"NS": ["2", "1.0"]},
        "when": {"S": "2030-01-02T03:04:05.000006+0000"},
        "made": {"S": "stored"},
        "flag": {"BOOL": False},
        "expires": {"N": "1924992000"},
    },
    {"pk": {"S": "k"}, "Code": {"N": "-7e2"}, "flags": {"M": {}}, "doc": {"S": "null"}, "made": {"S": ""}},
]


@pytest.mark.parametrize("item", _SHAPES_ITEMS)
def test_lazy_snapshot__equals_the_load(moto_backend: None, item: dict[str, Any]) -> None:
    """Absent, NULL, fixed and callable defaults, maps, sets, JSON, dates, numbers, TTL, condition
    attributes: the lazy view equals the one read from the instance as loaded."""
    model: Any = bind_model(Shapes, MOTO, create=False)
    context = _context(model)
    loaded = model.from_raw_data(dict(item))
    eager = snapshot.loaded_stored(context, loaded, item)
    lazy = snapshot.known(context, loaded)
    assert lazy is not None
    assert lazy.same_as(eager, context.planner)
    assert lazy.values.keys() == eager.values.keys()
    for name, value in eager.values.items():
        # Equal values, or (a map compares by identity) the same text; a set's text lists its
        # members in the order the set iterates, which two equal sets need not share.
        same = lazy.values[name] == value
        assert same or context.planner.text(name, lazy.values[name]) == context.planner.text(name, value), name
    assert lazy.verbatim == eager.verbatim
    assert context.planner.keys(lazy.values) == context.planner.keys(eager.values)


# --- the kept values share nothing with the caller's item ------------------------------------


@pytest.mark.parametrize("model_cls", [Plain, Separate])
def test_lazy_snapshot__nested_change_of_update_response__plans_right_first_time(
    moto_backend: None, model_cls: type[Model]
) -> None:
    """A caller that changes its ``update()`` response in place (say, encoding values for JSON
    output) does not change what the instance knows is stored.

    Before the fix, the load kept a shallow copy of the item, sharing each value's dict
    (``{"S": "a@x.io"}``) with the response: the next write planned from the changed view, its
    compare-and-swap failed, and it was sent again.
    """
    model: Any = bind_model(model_cls, MOTO)
    if model_cls is Separate:
        create_lock_table(model, wait=True)
    model(pk="p1", email="a@x.io").save()
    loaded = model.get("p1")
    response = loaded.update(actions=[model.bio.set("x")])
    # The caller rewrites a value of its response in place (its own copy, as far as it knows).
    response["Attributes"]["Email"]["S"] = "rewritten-for-display"
    loaded.email = "b@x.io"
    with RequestCounter(model) as counter:
        loaded.save()
    assert counter.operations == ["TransactWriteItems"]  # Before the fix: two (a re-plan).
    assert _owner(model, "b@x.io") == ("p1",)
    assert _owner(model, "a@x.io") is None


def test_lazy_snapshot__nested_change_of_raw_item__known_is_what_was_loaded(moto_backend: None) -> None:
    """The same through ``from_raw_data``: the instance loaded ``a@x.io``; changing the caller's item
    afterwards (one level down) must not change what the instance knows is stored."""
    model: Any = bind_model(Plain, MOTO, create=False)
    item = {"pk": {"S": "p1"}, "Email": {"S": "a@x.io"}}
    loaded = model.from_raw_data(item)
    item["Email"]["S"] = "other@x.io"
    known = snapshot.known(_context(model), loaded)
    assert known is not None
    assert known.values == {"email": "a@x.io"}
    assert loaded.email == "a@x.io"


# --- the load hook's lock-item shortcut keeps PynamoDB's errors ---------------------------------


def test_from_raw_data_none__pynamodb_value_error(moto_backend: None) -> None:
    """``from_raw_data(None)`` raises PynamoDB's ValueError ("Received no data to construct
    object"). Before the fix, the lock-item shortcut (``OWNER_HASH in data``) raised TypeError."""
    model: Any = bind_model(Plain, MOTO, create=False)
    with pytest.raises(ValueError, match="Received no data") as pynamodb:
        Model.from_raw_data.__func__(model, None)  # type: ignore[attr-defined] # PynamoDB's own.
    with pytest.raises(ValueError, match="Received no data") as ours:
        model.from_raw_data(None)
    assert str(ours.value) == str(pynamodb.value)


def test_deserialize_none__pynamodb_error(moto_backend: None) -> None:
    """``deserialize(None)`` raises what PynamoDB's raises (AttributeError: None has no ``get``).
    Before the fix, the lock-item shortcut raised TypeError first."""
    model: Any = bind_model(Plain, MOTO, create=False)
    with pytest.raises(Exception) as pynamodb:  # noqa: PT011 - whatever PynamoDB raises.
        Model.deserialize(model(pk="p1"), None)  # type: ignore[arg-type]
    with pytest.raises(type(pynamodb.value)):
        model(pk="p1").deserialize(None)


# --- an expiry stored with a fraction of a second ----------------------------------------------


def test_fractional_ttl_from_another_writer__save_moves_the_lock(moto_backend: None) -> None:
    """Another writer stored the expiry with a fraction of a second (``1924992000.5``, say
    ``time.time() + 3600`` through boto3): the record saves, its compare-and-swap checking the
    expiry's text as stored.

    Before the fix, PynamoDB's load dropped the fraction (``TTLAttribute.__set__``) and the
    compare-and-swap checked ``expires = 1924992000``, which never holds: every save, update and
    delete of the record raised ConditionFailed, though the caller gave no condition.
    """
    model: Any = bind_model(Session, MOTO)
    model(pk="s1", email="a@x.io", expires=datetime(2031, 1, 1, tzinfo=UTC)).save()
    client = model._get_connection().connection.client
    client.update_item(
        TableName=model.Meta.table_name,
        Key={"pk": {"S": "s1"}},
        UpdateExpression="SET expires = :t",
        ExpressionAttributeValues={":t": {"N": "1924992000.5"}},
    )
    loaded = model.get("s1")
    loaded.email = "b@x.io"
    loaded.save()
    assert _owner(model, "b@x.io") == ("s1",)
    assert _owner(model, "a@x.io") is None


# --- update() of something that is no action ---------------------------------------------------


@pytest.mark.parametrize("bad", ["bio = :x", None])
def test_update_with_non_action__pynamodb_value_error(moto_backend: None, bad: Any) -> None:
    """An item that is no update action gets PynamoDB's ``ValueError: unsupported action type:
    'str'``, before any request. Before the fix, reading the unique changes raised AttributeError."""
    model: Any = bind_model(Plain, MOTO)
    instance = model(pk="p1", email="a@x.io")
    messages = []
    for update in (type(instance).update, Model.update):
        with RequestCounter(model) as counter, pytest.raises(ValueError, match="unsupported action type") as raised:
            update(instance, actions=[model.bio.set("x"), bad])
        assert counter.operations == []
        messages.append(str(raised.value))
    assert messages[0] == messages[1]


def test_fractional_ttl__lazy_view_is_the_load__no_lock_moves_for_it(moto_backend: None) -> None:
    """The view of an expiry stored with a fraction is what the load gives (whole seconds), so a
    change of another unique value moves that value's lock alone.

    Before the fix, the lazy view read the stored number without ``TTLAttribute.__set__``: it kept
    the fraction, the expiry looked changed, and every lock was put again with the new expiry.
    """
    model: Any = bind_model(Session, MOTO)
    model(pk="s1", email="a@x.io", expires=datetime(2031, 1, 1, tzinfo=UTC)).save()
    client = model._get_connection().connection.client
    client.update_item(
        TableName=model.Meta.table_name,
        Key={"pk": {"S": "s1"}},
        UpdateExpression="SET expires = :t",
        ExpressionAttributeValues={":t": {"N": "1924992000.5"}},
    )
    loaded = model.get("s1")
    known = snapshot.known(_context(model), loaded)
    assert known is not None
    assert known.values["expires"] == loaded.expires == datetime.fromtimestamp(1924992000, tz=UTC)
    loaded.note = "x"
    with RequestCounter(model) as counter:
        loaded.save()
    assert counter.operations == ["PutItem"]  # No unique value moved: no lock is put again.


# --- the snapshot stays out of the model's own attribute hooks ----------------------------------


class Strict(UniqueMixin, Model):
    """A model whose own ``__setattr__`` refuses names that are not its attributes (a guard against typos)."""

    class Meta:
        table_name = "lazy-strict"
        region = "us-east-1"

    pk = UnicodeAttribute(hash_key=True)
    email = UniqueAttribute(UnicodeAttribute(null=True, attr_name="Email"))
    bio = UnicodeAttribute(null=True)

    def __setattr__(self, name: str, value: Any) -> None:
        if name != "attribute_values" and name not in self.get_attributes():
            msg = f"{type(self).__name__} has no attribute {name!r}"
            raise AttributeError(msg)
        super().__setattr__(name, value)


def test_snapshot__model_with_own_setattr__writes_and_loads_work(moto_backend: None) -> None:
    """The snapshot is the library's plumbing: a model's own ``__setattr__`` never sees it.

    With ``setattr`` the guard above refused ``_uniq_snapshot`` after the first save and every
    load; ``vars(instance)`` bypassed it but cost every later attribute read of the record.
    """
    model: Any = bind_model(Strict, MOTO)
    record = model(pk="p1", email="a@x.io")
    record.save()
    loaded = model.get("p1")
    loaded.update(actions=[model.email.set("b@x.io")])
    loaded.email = "c@x.io"
    loaded.save()
    assert _owner(model, "c@x.io") == ("p1",)
    assert _owner(model, "a@x.io") is None
    assert _owner(model, "b@x.io") is None
    with pytest.raises(AttributeError, match="emial"):
        loaded.emial = "typo@x.io"  # The model's own guard still works.
    assert "_uniq_snapshot" not in model.get_attributes()
