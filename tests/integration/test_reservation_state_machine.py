"""Model-based test of reservations: random sequences of reserve, claim, save, release, end and delete.

Each outcome is predicted by a plain-Python model of the lock items; after every step the table's
locks must be exactly the records' values (owned by their records) plus the reservations not yet
claimed, released or taken (naming their tokens).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from _backends import Backend, bind_model
from _invariant import locks_and_records, raw_items
from _reservations import Signup, end
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule, run_state_machine_as_test

from pynamodb_unique import Reservation, ReservationLost, UniqueViolation

PKS = ("A", "B", "C")
VALUES = ("u1", "u2", "u3")
# As tests/integration/test_state_machine.py: against the real server.
pytestmark = pytest.mark.backends("dynoxide")

EXAMPLES = {"moto": 30, "dynoxide": 40}
STEPS = 20


@dataclass
class _Res:
    """A reservation as the model sees it: its value, and whether its end passed."""

    reservation: Reservation
    value: str
    ended: bool = False


class ReservationMachine(RuleBasedStateMachine):
    """Predicts every outcome from who holds each value: a record (its pk) or a reservation (its token)."""

    model: type[Signup]

    def __init__(self) -> None:
        super().__init__()
        client = self.model._get_connection().connection.client
        for item in raw_items(self.model):  # A fresh table for each example.
            client.delete_item(TableName=self.model.Meta.table_name, Key={"PK": item["PK"], "SK": item["SK"]})
        self.records: dict[str, str] = {}
        #: value -> ("record", pk) or ("reserved", index into self.handles)
        self.holders: dict[str, tuple[str, Any]] = {}
        self.handles: list[_Res] = []

    def _free_for_anyone(self, value: str) -> bool:
        holder = self.holders.get(value)
        return holder is None or (holder[0] == "reserved" and self.handles[holder[1]].ended)

    def _take(self, pk: str, value: str) -> None:
        old = self.records.get(pk)
        if old is not None and old != value:
            del self.holders[old]
        self.records[pk] = value
        self.holders[value] = ("record", pk)

    def _write(self, pk: str, value: str, reservations: list[Reservation]) -> object:
        found = list(self.model.query(pk))
        record = found[0] if found else self.model(pk=pk)
        record.username = value
        try:
            return record.save(reservations=reservations)
        except (UniqueViolation, ReservationLost) as exc:
            return exc

    @rule(value=st.sampled_from(VALUES))
    def reserve(self, value: str) -> None:
        try:
            outcome: object = self.model.reserve(username=value)
        except UniqueViolation as exc:
            outcome = exc
        if self._free_for_anyone(value):
            assert isinstance(outcome, Reservation), outcome
            self.handles.append(_Res(outcome, value))
            self.holders[value] = ("reserved", len(self.handles) - 1)
        else:
            assert isinstance(outcome, UniqueViolation), outcome
            assert outcome.violations[0].reserved == (self.holders[value][0] == "reserved")

    @rule(pk=st.sampled_from(PKS), value=st.sampled_from(VALUES))
    def save(self, pk: str, value: str) -> None:
        outcome = self._write(pk, value, [])
        if self.records.get(pk) == value or self._free_for_anyone(value):
            assert not isinstance(outcome, Exception), outcome
            self._take(pk, value)
        else:
            assert isinstance(outcome, UniqueViolation), outcome

    @precondition(lambda self: self.handles)
    @rule(pk=st.sampled_from(PKS), data=st.data())
    def claim(self, pk: str, data: st.DataObject) -> None:
        index = data.draw(st.integers(0, len(self.handles) - 1))
        handle = self.handles[index]
        outcome = self._write(pk, handle.value, [handle.reservation])
        if self.holders.get(handle.value) == ("reserved", index) and not handle.ended:
            assert not isinstance(outcome, Exception), outcome
            self._take(pk, handle.value)
        elif self.records.get(pk) == handle.value:
            assert not isinstance(outcome, Exception), outcome  # Its own lock already: nothing to claim.
        else:
            assert isinstance(outcome, ReservationLost), outcome

    @precondition(lambda self: self.handles)
    @rule(data=st.data())
    def release(self, data: st.DataObject) -> None:
        index = data.draw(st.integers(0, len(self.handles) - 1))
        handle = self.handles[index]
        mine = self.holders.get(handle.value) == ("reserved", index)
        assert handle.reservation.release() is mine
        if mine:
            del self.holders[handle.value]

    @precondition(lambda self: self.handles)
    @rule(data=st.data())
    def end_one(self, data: st.DataObject) -> None:
        index = data.draw(st.integers(0, len(self.handles) - 1))
        handle = self.handles[index]
        if self.holders.get(handle.value) == ("reserved", index) and not handle.ended:
            end(self.model, handle.reservation)
            handle.ended = True

    @rule(pk=st.sampled_from(PKS))
    def delete(self, pk: str) -> None:
        for record in self.model.query(pk):
            record.delete()
        value = self.records.pop(pk, None)
        if value is not None:
            del self.holders[value]

    @invariant()
    def locks_match(self) -> None:
        stored = locks_and_records(self.model)[0]
        actual = {
            key.rsplit("#", 1)[1]: ("record", item["uniq_owner_hash"]["S"])
            if "uniq_owner_hash" in item
            else ("reserved", item["uniq_reservation"]["S"])
            for key, item in stored.items()
        }
        expected = {
            value: holder if holder[0] == "record" else ("reserved", self.handles[holder[1]].reservation.token)
            for value, holder in self.holders.items()
        }
        assert actual == expected


def test_reservations__random_sequences(backend: Backend) -> None:
    """Random sequences keep lock items equal to the records' values plus the reservations still held."""
    model = bind_model(Signup, backend)

    class Machine(ReservationMachine):
        pass

    Machine.model = model
    run_state_machine_as_test(
        Machine,
        settings=settings(
            max_examples=EXAMPLES[backend.name],
            stateful_step_count=STEPS,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )
