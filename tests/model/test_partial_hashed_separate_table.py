"""Issue 5's constraints: partial, hashed, separate lock table, and the advisory lookup."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from _backends import Backend, RequestCounter, bind_model
from _invariant import actual_locks, raw_items
from models import Member, Ticket
from pynamodb.attributes import UnicodeAttribute
from pynamodb.models import Model

from pynamodb_unique import (
    InvalidUniqueValue,
    UniqueAttribute,
    UniqueConfigError,
    UniqueConstraint,
    UniqueMixin,
    UniqueViolation,
    create_lock_table,
)
from pynamodb_unique._model.registry import planner_of


@pytest.fixture
def members(backend: Backend) -> Iterator[type[Member]]:
    return bind_model(Member, backend)


def _lock_keys(model: type[Model]) -> set[str]:
    return set(actual_locks(model))


def test_partial__condition_traced() -> None:
    """The attributes a condition reads are found without being declared."""
    planner = planner_of(Member)
    assert planner is not None
    by_name = {c.name: c for c in planner.constraints}
    assert by_name["ACTIVE_HANDLE"].condition_attributes == ("status",)
    assert "status" in planner.unique_names


def test_partial__soft_delete_releases_and_undelete_takes(members: type[Member]) -> None:
    """A handle is locked only while its member is not deleted."""
    ada = members(pk="M1", handle="ada")
    ada.save()
    assert "UNIQ#ACTIVE_HANDLE#ada" in _lock_keys(members)
    ada.update(actions=[members.status.set("deleted")])
    assert "UNIQ#ACTIVE_HANDLE#ada" not in _lock_keys(members)
    members(pk="M2", handle="ada").save()  # The soft-deleted handle is free again.
    with pytest.raises(UniqueViolation) as info:
        ada.update(actions=[members.status.set("active")])
    assert info.value.violations[0].constraint == "ACTIVE_HANDLE"
    assert info.value.violations[0].owner == ("M2", "MEMBER")
    assert members.get("M1", "MEMBER").status == "deleted"


def test_partial__save_with_status_change__one_transaction(members: type[Member]) -> None:
    """save() that makes the condition stop holding releases the lock in the same request."""
    ada = members(pk="M1", handle="ada")
    ada.save()
    ada.status = "deleted"
    with RequestCounter(members) as counter:
        ada.save()
    assert counter.operations == ["TransactWriteItems"]
    assert _lock_keys(members) == set()


def test_partial__stale_status__cas_covers_condition_attributes(members: type[Member]) -> None:
    """A concurrent status change makes a stale write re-plan instead of orphaning a lock."""
    ada = members(pk="M1", handle="ada")
    ada.save()
    stale = members.get("M1", "MEMBER")
    ada.status = "deleted"
    ada.save()
    stale.handle = "ada2"  # Stale: it believes status is active and ada is locked.
    stale.save()  # Last writer wins: status active again, handle ada2 locked, ada free.
    assert _lock_keys(members) == {"UNIQ#ACTIVE_HANDLE#ada2"}


def test_partial__non_literal_action_on_condition_attribute__refused(members: type[Member]) -> None:
    """Only literal set/remove may touch an attribute a condition reads."""
    ada = members(pk="M1", handle="ada")
    ada.save()
    with pytest.raises(InvalidUniqueValue, match="status"):
        ada.update(actions=[members.status.set(members.status | "x")])


def test_partial__undeclared_read__clear_error() -> None:
    """A condition that reads an attribute it did not read when traced is refused clearly."""

    class Flaky(UniqueMixin, Model):
        class Meta:
            table_name = "flaky"
            unique_constraints = [
                UniqueConstraint("handle", condition=lambda item: item.status == "x" and item.note == "y"),
            ]

        pk = UnicodeAttribute(hash_key=True)
        handle = UnicodeAttribute(null=True)
        status = UnicodeAttribute(null=True)
        note = UnicodeAttribute(null=True)

    with pytest.raises(UniqueConfigError, match="condition_attributes"):
        planner_of(Flaky).keys({"handle": "h", "status": "x"})  # type: ignore[union-attr]


def test_hashed__keys_hide_values_and_collide(members: type[Member]) -> None:
    """Hashed constraints key on an HMAC: the value is absent from keys, collisions still work."""
    members(pk="M1", org="acme", phone="+44 20 7946 0000", email="ada@x.io").save()
    keys = _lock_keys(members)
    assert not any("7946" in k or "ada@x.io" in k for k in keys)
    assert {k.split("#")[1] for k in keys} == {"ORG_PHONE", "EMAIL"}
    assert all(k.split("#", 2)[2].startswith("%K") for k in keys)
    with pytest.raises(UniqueViolation) as info:
        members(pk="M2", org="acme", phone="+44 20 7946 0000").save()
    assert info.value.violations[0].values == ("acme", "+44 20 7946 0000")
    members(pk="M3", org="other", phone="+44 20 7946 0000").save()


def test_hashed__without_secret__refused_at_definition() -> None:
    """A hashed constraint needs Meta.unique_secret."""
    with pytest.raises(UniqueConfigError, match="unique_secret"):

        class NoSecret(UniqueMixin, Model):
            class Meta:
                table_name = "x"

            pk = UnicodeAttribute(hash_key=True)
            phone = UniqueAttribute(UnicodeAttribute(), hashed=True)


def test_hashed__secret_callable_and_rotation_changes_keys() -> None:
    """The secret may come from a callable; another secret gives other keys."""
    secrets = [b"one"]

    class Rotating(UniqueMixin, Model):
        class Meta:
            table_name = "x"
            unique_secret = staticmethod(lambda: secrets[0])

        pk = UnicodeAttribute(hash_key=True)
        phone = UniqueAttribute(UnicodeAttribute(), hashed=True)

    planner = planner_of(Rotating)
    assert planner is not None
    first = planner.keys({"phone": "1"})["PHONE"]
    secrets[0] = b"two"
    assert planner.keys({"phone": "1"})["PHONE"] != first


def test_lock_table__numeric_key_model_works(tickets: type[Ticket]) -> None:
    """Locks live in their own table; a numeric hash key is fine and owners keep their type."""
    tickets(id=7, code="abc").save()
    lock_client = tickets._get_connection().connection.client
    locks = lock_client.scan(TableName=tickets.Meta.unique_lock_table)["Items"]  # type: ignore[attr-defined]
    assert [(i["PK"]["S"], i["SK"]["S"], i["uniq_owner_hash"]) for i in locks] == [
        ("UNIQ#CODE#ABC", "LOCK", {"N": "7"})
    ]
    assert [t.id for t in tickets.scan()] == [7]
    with pytest.raises(UniqueViolation) as info:
        tickets(id=8, code="ABC").save()
    assert info.value.violations[0].owner == (7,)
    assert tickets.unique_owner(code="abc") == (7,)
    ticket = tickets.get(7)
    ticket.code = "xyz"
    ticket.save()
    tickets(id=8, code="abc").save()
    tickets.get(8).delete()
    ticket.delete()
    assert lock_client.scan(TableName=tickets.Meta.unique_lock_table)["Items"] == []  # type: ignore[attr-defined]
    assert raw_items(tickets) == []


def test_lock_table__create_lock_table_without_setting__refused() -> None:
    """create_lock_table needs Meta.unique_lock_table."""
    with pytest.raises(UniqueConfigError, match="unique_lock_table"):
        create_lock_table(Member)


def test_unique_owner__advisory_lookup(members: type[Member]) -> None:
    """unique_owner() names the holder with one consistent GetItem, or None."""
    members(pk="M1", handle="ada", org="acme", phone="1").save()
    with RequestCounter(members) as counter:
        assert members.unique_owner(handle="ada") == ("M1", "MEMBER")
    assert counter.operations == ["GetItem"]
    assert counter.params("GetItem")[0]["ConsistentRead"] is True
    assert members.unique_owner(handle="bob") is None
    assert members.unique_owner(org="acme", phone="1") == ("M1", "MEMBER")
    with pytest.raises(InvalidUniqueValue, match="no unique constraint"):
        members.unique_owner(org="acme")


@pytest.mark.integration
def test_partial__race_two_undeletes__one_wins(dynoxide_endpoint: str) -> None:
    """Two soft-deleted members undelete the same handle at once: exactly one wins."""
    members = bind_model(Member, Backend("dynoxide", dynoxide_endpoint))
    wins = []
    for round_no in range(10):
        handle = f"h{round_no}"
        one, two = (
            members(pk=f"A{round_no}", handle=handle),
            members(pk=f"B{round_no}", handle=handle, status="deleted"),
        )
        one.save()
        one.update(actions=[members.status.set("deleted")])
        two.save()
        results: list[Any] = []
        barrier = threading.Barrier(2)

        def undelete(member: Member, results: list[Any] = results, barrier: threading.Barrier = barrier) -> None:
            barrier.wait()
            try:
                member.update(actions=[members.status.set("active")])
                results.append("ok")
            except UniqueViolation:
                results.append("taken")

        threads = [threading.Thread(target=undelete, args=(m,)) for m in (one, two)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(results) == ["ok", "taken"]
        wins.append(results.count("ok"))
    assert wins == [1] * 10


def _race(*writers: Any) -> list[str]:
    """Run the writers at once; each result is "ok" or "taken"."""
    barrier = threading.Barrier(len(writers))
    results: list[str] = []

    def run(write: Any) -> None:
        barrier.wait()
        try:
            write()
            results.append("ok")
        except UniqueViolation:
            results.append("taken")

    threads = [threading.Thread(target=run, args=(w,)) for w in writers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sorted(results)


@pytest.mark.integration
def test_hashed__race_same_phone__one_wins(dynoxide_endpoint: str) -> None:
    """Four signups with one hashed phone at once: exactly one wins, every round."""
    members = bind_model(Member, Backend("dynoxide", dynoxide_endpoint))
    for round_no in range(10):
        writers = [members(pk=f"M{round_no}-{i}", org="acme", phone=f"+1 555 {round_no}").save for i in range(4)]
        assert _race(*writers) == ["ok", "taken", "taken", "taken"]
    assert len(_lock_keys(members)) == 10


@pytest.mark.integration
def test_lock_table__race_same_code__one_wins(dynoxide_endpoint: str) -> None:
    """Signups racing for one code, with locks in a separate table: exactly one wins."""
    tickets = bind_model(Ticket, Backend("dynoxide", dynoxide_endpoint), create=False)
    tickets.Meta.unique_lock_table = f"{tickets.Meta.table_name}-locks"  # type: ignore[attr-defined]
    tickets.create_table(wait=True, billing_mode="PAY_PER_REQUEST")
    create_lock_table(tickets, wait=True)
    for round_no in range(10):
        writers = [tickets(id=round_no * 10 + i, code=f"code{round_no}").save for i in range(4)]
        assert _race(*writers) == ["ok", "taken", "taken", "taken"]
    assert len(list(tickets.scan())) == 10
    client = tickets._get_connection().connection.client
    locks = client.scan(TableName=tickets.Meta.unique_lock_table)["Items"]  # type: ignore[attr-defined]
    assert sorted(i["PK"]["S"] for i in locks) == sorted(f"UNIQ#CODE#CODE{n}" for n in range(10))


@pytest.mark.integration
def test_unique_owner__during_signup_race__never_a_wrong_owner(dynoxide_endpoint: str) -> None:
    """A lookup racing signups sees no owner or the winner, never anyone else."""
    members = bind_model(Member, Backend("dynoxide", dynoxide_endpoint))
    for round_no in range(10):
        seen: list[Any] = []
        writers = [members(pk=f"M{round_no}-{i}", handle=f"h{round_no}").save for i in range(3)]
        _race(*writers, lambda round_no=round_no, seen=seen: seen.append(members.unique_owner(handle=f"h{round_no}")))
        winner = members.unique_owner(handle=f"h{round_no}")
        assert winner is not None
        assert seen[0] in (None, winner)
