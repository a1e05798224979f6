"""``TransactWrite``: PynamoDB's transaction, with the lock items of unique models added."""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pynamodb.connection import Connection
from pynamodb.exceptions import TransactWriteError
from pynamodb.expressions.condition import Condition
from pynamodb.expressions.update import Action
from pynamodb.models import Model
from pynamodb.transactions import TransactWrite as _PynamoTransactWrite

from ._core.limits import MAX_PLANS
from ._core.lockitem import OwnerKey
from ._core.outcome import ClaimLost, LocksMoved, Unexplained, Violated, decide, interpret
from ._core.plan import MAX_TRANSACTION_ACTIONS, SENT_ORDER, LockPut, LockRelease, Plan, PlanAction, RecordWrite, Stored
from ._core.reservation import claimed
from ._model import records, snapshot, updates
from ._model.context import ModelContext, context_of
from ._model.seam import connection as model_connection
from ._model.seam import (
    set_transaction_connection,
    set_transaction_token,
    transaction_committed,
    transaction_lists,
    transaction_settings,
)
from ._write import telemetry as _telemetry
from ._write.engine import Intent, after_success
from ._write.requests import lock_kwargs, record_kwargs
from ._write.reserve import Reservation, claims_for, lost
from ._write.send import check_token, commit_grouped, derive_token, new_token, raise_missing_table, request_clock
from .exceptions import InvalidUniqueValue, StaleWrite, UniqueViolation


@dataclass
class _Entry:
    """One unique model's write in the transaction, planned at commit.

    ``sent`` is the record as it was when added, which the requests write (PynamoDB's
    ``TransactWrite`` serializes a record when it is added, too): a change made to ``instance``
    before the commit is not written, and its locks are not taken.
    """

    context: ModelContext
    instance: Model
    op: Literal["put", "update", "delete"]
    assumed: Stored
    desired: dict[str, Any]
    condition: Condition | None
    actions: list[Action] | None
    add_version_condition: bool
    plan: Plan | None = None
    transfers: dict[str, Model] = field(default_factory=dict)
    #: The reservations a save claims, and their claims: lock key -> token.
    reservations: tuple[Reservation, ...] = ()
    claims: dict[str, str] = field(default_factory=dict)
    sent: Model = field(init=False)

    def __post_init__(self) -> None:
        sent = copy.copy(self.instance)
        sent.attribute_values = copy.deepcopy(self.instance.attribute_values)
        self.sent = sent


class TransactWrite(_PynamoTransactWrite):
    """PynamoDB's ``TransactWrite`` that also moves the locks of unique models.

    ``tx.save(account)``, ``tx.update(account, actions=[...])`` and ``tx.delete(account)`` add the
    record and its lock items next to the caller's other items (other models, condition checks),
    all under one ClientRequestToken; without a unique model in it, the request is PynamoDB's own.
    A lock Put that fails because another record holds the value raises :class:`UniqueViolation`;
    a failed compare-and-swap or lock release raises :class:`StaleWrite`; a failure of the
    caller's own items raises PynamoDB's ``TransactWriteError`` as before. Without
    ``connection``, the transaction uses the connection of the first model added (all its tables
    must share a region and account).
    """

    def __init__(
        self,
        client_request_token: str | None = None,
        return_item_collection_metrics: str | None = None,
        connection: Connection | None = None,
        **kwargs: Any,
    ) -> None:
        given = check_token(client_request_token)
        #: The token the first commit with locks sends; a re-planned commit sends one derived from it.
        self._uniq_base_token = given or new_token()
        # The caller's token only: without unique models the request is PynamoDB's own, byte for byte.
        super().__init__(
            client_request_token=given,
            return_item_collection_metrics=return_item_collection_metrics,
            connection=connection or Connection(),
            **kwargs,
        )
        self._uniq_connection_given = connection is not None
        #: The caller's token, whose resend keeps its first request's clock (None: the library's own).
        self._uniq_token = given
        self._uniq_entries: list[_Entry] = []

    def _adopt_connection(self, model: Any) -> None:
        """Without a connection given, send with the first model's (its region, host and credentials)."""
        if not self._uniq_connection_given and isinstance(model, Model):
            set_transaction_connection(self, model_connection(type(model)).connection)
            self._uniq_connection_given = True

    def _add(self, context: ModelContext, entry: _Entry) -> None:
        context.check_key(entry.sent)
        context.planner.keys(entry.desired)  # Refuse a bad value now, before anything is sent.
        self._uniq_entries.append(entry)

    @staticmethod
    def _stored(context: ModelContext, instance: Model) -> Stored:
        """What is stored: known, or read once, consistently, now (the compare-and-swap guards it)."""
        known = snapshot.known(context, instance)
        if known is not None:
            return known
        return context.stored_from_item(records.read_stored(context, instance))

    def save(
        self,
        model: Any,
        condition: Condition | None = None,
        return_values: str | None = None,
        *,
        reservations: Iterable[Reservation] = (),
    ) -> None:
        """Add a save; for a unique model, its locks too (unknown stored state: a create).

        ``reservations``: reservations of the record's values (``Model.reserve()``) it claims in
        this transaction; a claim that fails raises :class:`~pynamodb_unique.ReservationLost`.
        """
        self._adopt_connection(model)
        context = _active(model)
        claiming = tuple(reservations)
        if context is None:
            if claiming:
                msg = f"{type(model).__name__} keeps no unique locks: it has no reservations to claim"
                raise InvalidUniqueValue(msg)
            super().save(model, condition=condition, return_values=return_values)
            return
        assumed = snapshot.known(context, model) or Stored(exists=False)
        desired = context.values(model)
        entry = _Entry(context, model, "put", assumed, desired, condition, None, add_version_condition=True)
        if claiming:
            context.planner.keys(desired)  # A bad value is refused first, as for any save.
            entry.reservations = claiming
            entry.claims = claims_for(context, context.locks(), desired, claiming)
        self._add(context, entry)

    def update(
        self,
        model: Any,
        actions: list[Action],
        condition: Condition | None = None,
        return_values: str | None = None,
        *,
        add_version_condition: bool = True,
    ) -> None:
        """Add an update; for a unique model, the lock moves its literal actions call for."""
        self._adopt_connection(model)
        context = _active(model)
        if context is None:
            super().update(
                model,
                actions,
                condition=condition,
                return_values=return_values,
                add_version_condition=add_version_condition,
            )
            return
        changes = updates.update_changes(context, actions)
        assumed = self._stored(context, model)
        desired = context.planner.updated(assumed, changes)
        entry = _Entry(context, model, "update", assumed, desired, condition, list(actions), add_version_condition)
        self._add(context, entry)

    def delete(self, model: Any, condition: Condition | None = None, *, add_version_condition: bool = True) -> None:
        """Add a delete; for a unique model, the release of its locks."""
        self._adopt_connection(model)
        context = _active(model)
        if context is None:
            super().delete(model, condition=condition, add_version_condition=add_version_condition)
            return
        assumed = self._stored(context, model)
        self._add(context, _Entry(context, model, "delete", assumed, {}, condition, None, add_version_condition))

    def condition_check(self, model_cls: Any, hash_key: Any, range_key: Any = None, condition: Any = None) -> None:
        """Add a ConditionCheck, as PynamoDB's (the first model given also lends its connection)."""
        if not self._uniq_connection_given and isinstance(model_cls, type) and issubclass(model_cls, Model):
            set_transaction_connection(self, model_connection(model_cls).connection)
            self._uniq_connection_given = True
        super().condition_check(model_cls, hash_key, range_key=range_key, condition=condition)

    # Commit.

    def _plan_entries(self, not_ours: Mapping[int, frozenset[str]] | None = None) -> None:
        """Plan every entry, merging a release and a take of one value into one transfer.

        Args:
            not_ours: by entry index, lock keys found to be another record's: checked, not released.
        """
        keys = [(*e.context.owner(e.sent), type(e.sent).Meta.table_name) for e in self._uniq_entries]
        if len(set(keys)) != len(keys):
            msg = "a transaction may not write one record twice"
            raise InvalidUniqueValue(msg)
        for index, entry in enumerate(self._uniq_entries):
            planner = entry.context.planner
            foreign = (not_ours or {}).get(index, frozenset())
            entry.transfers.clear()
            if entry.op == "delete":
                entry.plan = planner.delete(entry.assumed, not_ours=foreign)
            else:
                planned = planner.write(entry.op, entry.assumed, entry.desired, not_ours=foreign)
                entry.plan = claimed(planned, entry.claims)
        # A lock is one item of one lock table: the same key in another table is another lock.
        releases = {
            (e.context.locks().table_name, r.key): e
            for e in self._uniq_entries
            for r in (e.plan.releases if e.plan else ())
        }
        taken: set[tuple[str, str]] = set()
        for entry in self._uniq_entries:
            table = entry.context.locks().table_name
            for put in entry.plan.puts if entry.plan else ():
                if (table, put.key) in taken:
                    msg = f"two records in this transaction take the same value ({put.constraint.name})"
                    raise InvalidUniqueValue(msg)
                taken.add((table, put.key))
                previous = releases.get((table, put.key))
                if previous is not None and previous.plan is not None:
                    entry.transfers[put.key] = previous.sent
                    kept = tuple(r for r in previous.plan.releases if r.key != put.key)
                    previous.plan = previous.plan._replace(releases=kept)

    def _materialize(self) -> list[tuple[_Entry, PlanAction, frozenset[OwnerKey]] | None]:
        """Append every planned item to PynamoDB's lists; return what each sent position is."""
        lists = transaction_lists(self)
        # The caller's own items, already in PynamoDB's lists, are not the library's.
        slots: dict[str, list[tuple[_Entry, PlanAction, frozenset[OwnerKey]] | None]] = {
            group: [None] * len(lists[group]) for group in SENT_ORDER
        }
        # Expiring locks carry the time: a resend with the same token keeps the first one's.
        now = request_clock(self._uniq_token)
        for entry in self._uniq_entries:
            assert entry.plan is not None  # noqa: S101 - planned by _plan_entries.
            context, instance = entry.context, entry.sent
            locks = context.write_locks()
            me = context.owner(instance)
            for action in entry.plan.sent():
                ours = frozenset({me})
                if isinstance(action, RecordWrite):
                    item = record_kwargs(instance, action, entry.condition, entry.actions, entry.add_version_condition)
                else:
                    previous = entry.transfers.get(action.key) if isinstance(action, LockPut) else None
                    item = lock_kwargs(
                        context, instance, locks, action, previous_owner=previous, expires=entry.plan.expires, now=now
                    )
                    if previous is not None:
                        ours = frozenset({me, context_of_instance(previous).owner(previous)})
                lists[action.op].append(item)
                slots[action.op].append((entry, action, ours))
        count = sum(len(v) for v in lists.values())
        if count > MAX_TRANSACTION_ACTIONS:
            msg = f"the transaction has {count} actions; DynamoDB allows at most {MAX_TRANSACTION_ACTIONS}"
            raise InvalidUniqueValue(msg)
        return [slot for group in SENT_ORDER for slot in slots[group]]

    def _commit(self) -> Any:
        # Traced under the names of its unique models (the caller's other items have no library model).
        models = {type(e.instance) for e in self._uniq_entries}
        what = ",".join(sorted({m.__name__ for m in models})) or "TransactWrite"
        watched = _telemetry.watch("transact_write", what, models)
        if watched is None:
            return self._commit_watched(what, None)
        with watched:
            return self._commit_watched(what, watched)

    def _commit_watched(self, what: str, watched: _telemetry.Write | None) -> Any:
        self._plan_entries()
        if self._uniq_entries and self._uniq_token is None:
            # Lock moves are resent on conflicts: under one token, a resend never writes twice.
            set_transaction_token(self, self._uniq_base_token)
        lists = transaction_lists(self)
        callers = {group: list(items) for group, items in lists.items()}
        # By entry index, the locks found another record's so far: each re-plan checks them all.
        not_ours: dict[int, frozenset[str]] = {}
        for step in range(MAX_PLANS):
            slots = self._materialize()
            if step > 0:
                # A re-planned request is another request: its token folds in the items it sends.
                sent = [item for group in SENT_ORDER for item in lists[group]]
                set_transaction_token(self, derive_token(self._uniq_base_token, step, sent))
            if watched is not None:
                watched.sending("TransactWriteItems", len(slots), step + 1)
            connection, token, consumed, metrics = transaction_settings(self)
            try:
                # The same request, and so the same token, on every resend.
                response = commit_grouped(
                    connection,
                    lists,
                    token,
                    return_consumed_capacity=consumed,
                    return_item_collection_metrics=metrics,
                )
                break
            except TransactWriteError as exc:
                raise_missing_table(connection, [item for group in SENT_ORDER for item in lists[group]], exc)
                foreign = self._settle(exc, slots, last=step + 1 == MAX_PLANS)
                # A lock to release is another record's (its record expired and the value was
                # taken, or it was moved by repair): planned again, checked instead of released.
                _telemetry.replanned(what, "transact_write", step + 2, MAX_PLANS)
                not_ours = {
                    i: not_ours.get(i, frozenset()) | foreign.get(i, frozenset()) for i in {*not_ours, *foreign}
                }
                self._plan_entries(not_ours)
                for group, items in lists.items():
                    items[:] = callers[group]
        transaction_committed(self)
        if watched is not None:
            watched.consumed(response)
        for entry in self._uniq_entries:
            assert entry.plan is not None  # noqa: S101 - planned by _plan_entries.
            intent = Intent(entry.op, entry.condition, entry.actions, entry.add_version_condition, None)
            key = entry.context.key(entry.sent)  # The key written, though the instance's may have changed since.
            after_success(entry.context, entry.instance, intent, entry.plan, entry.desired, {}, key=key, load=False)
        return response

    @staticmethod
    def _record_problem(entry: _Entry, item: dict[str, Any] | None) -> str | None:
        """Why a record write failed: a conflict message, or None when the caller's condition did."""
        context, instance = entry.context, entry.sent
        stored = context.stored_from_item(item)
        if stored.same_as(entry.assumed, context.planner):
            return None
        who = f"{type(instance).__name__} {context.owner(instance)}"
        return (
            f"{who} exists; load it before saving" if not entry.assumed.exists else f"{who} changed since it was read"
        )

    def _settle(
        self,
        exc: TransactWriteError,
        slots: list[tuple[_Entry, PlanAction, frozenset[OwnerKey]] | None],
        *,
        last: bool,
    ) -> dict[int, frozenset[str]]:
        """Raise what the caller must see for a cancelled transaction, or return what to re-plan with.

        Args:
            exc: the cancellation.
            slots: what each sent position is (None: the caller's own item).
            last: no re-plan is left.

        Returns:
            By entry index, the locks to release found another record's: checked, not released, next.

        Raises:
            UniqueViolation: a value is held by another record.
            ReservationLost: a claimed reservation no longer holds its values.
            StaleWrite: a record or a lock changed since it was planned.
            TransactWriteError: the caller's own items or conditions failed (``exc``).
        """
        findings = interpret([(s[1], s[2]) if s is not None else None for s in slots], exc.cancellation_reasons)
        by_action = {id(slot[1]): slot[0] for slot in slots if slot is not None}
        outcome = decide(findings, frozenset())
        if isinstance(outcome, ClaimLost):
            raise lost(outcome.lost, [r for e in self._uniq_entries for r in e.reservations], exc)
        if isinstance(outcome, Violated):
            violations = [
                by_action[id(f.action)].context.violation(f, by_action[id(f.action)].instance) for f in outcome.taken
            ]
            _telemetry.violated(violations)
            raise UniqueViolation(violations, exc)
        if isinstance(outcome, Unexplained):
            raise exc
        foreign = [f.action for f in findings if f.kind == "foreign" and isinstance(f.action, LockRelease)]
        if isinstance(outcome, LocksMoved) and foreign and not last:
            index = {id(entry): i for i, entry in enumerate(self._uniq_entries)}
            keys: dict[int, set[str]] = {}
            for release in foreign:
                keys.setdefault(index[id(by_action[id(release)])], set()).add(release.key)
            return {i: frozenset(k) for i, k in keys.items()}
        stale: list[str] = []
        for finding in findings:
            if finding.kind == "record":
                problem = self._record_problem(by_action[id(finding.action)], finding.item)
                if problem is None:
                    raise exc  # The caller's condition failed.
                stale.append(problem)
            elif isinstance(finding.action, LockRelease) and finding.kind == "foreign":
                stale.append(f"the lock {finding.action.key} belongs to another record")
        if not stale:
            raise exc
        # The problems name record keys and lock keys, which may hold values: the log says how many.
        _telemetry.stale("TransactWrite", "transact_write", f"{len(stale)} records or locks changed since planned")
        msg = "; ".join(stale)
        raise StaleWrite(msg, exc)


def _active(model: Any) -> ModelContext | None:
    """The context of a model instance whose writes move locks; None: PynamoDB's own."""
    context = context_of(type(model))
    return context if context is not None and context.active() is not None else None


def context_of_instance(instance: Model) -> ModelContext:
    """The context of a unique model instance."""
    context = context_of(type(instance))
    assert context is not None  # noqa: S101 - only unique models' instances reach here.
    return context
