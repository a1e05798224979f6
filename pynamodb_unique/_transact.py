"""``TransactWrite``: PynamoDB's transaction, with the lock items of unique models added."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from pynamodb.exceptions import TransactWriteError
from pynamodb.expressions.condition import Condition
from pynamodb.expressions.update import Action
from pynamodb.transactions import TransactWrite as _PynamoTransactWrite

from ._locks import lock_owner
from ._plan import MAX_TRANSACTION_ACTIONS, LockNotOurs, LockPut, LockRelease, Plan, RecordWrite, SentGroup, Stored
from ._requests import lock_kwargs, owner_key, record_kwargs
from ._send import check_token, new_token, retrying
from .exceptions import InvalidUniqueValue, StaleWrite, UniqueViolation, Violation

if TYPE_CHECKING:
    from pynamodb.models import Model

    from ._mixin import UniqueMixin

_GROUPS: tuple[SentGroup, ...] = ("check", "delete", "put", "update")


@dataclass
class _Entry:
    """One unique model's write in the transaction, planned at commit."""

    instance: UniqueMixin
    op: Literal["put", "update", "delete"]
    assumed: Stored
    desired: dict[str, Any]
    condition: Condition | None
    actions: list[Action] | None
    add_version_condition: bool
    plan: Plan | None = None
    transfers: dict[str, Model] = field(default_factory=dict)


@dataclass(frozen=True)
class _Meaning:
    """What a sent item is: None for the caller's own items."""

    entry: _Entry
    action: RecordWrite | LockPut | LockRelease | LockNotOurs


class TransactWrite(_PynamoTransactWrite):
    """PynamoDB's ``TransactWrite`` that also moves the locks of unique models.

    ``tx.save(account)``, ``tx.update(account, actions=[...])`` and ``tx.delete(account)`` add the
    record and its lock items next to the caller's other items (other models, condition checks),
    all under one ClientRequestToken. A lock Put that fails because another record holds the value
    raises :class:`UniqueViolation`; a failed compare-and-swap or lock release raises
    :class:`StaleWrite`; a failure of the caller's own items raises PynamoDB's
    ``TransactWriteError`` as before.
    """

    def __init__(
        self,
        client_request_token: str | None = None,
        return_item_collection_metrics: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            client_request_token=check_token(client_request_token) or new_token(),
            return_item_collection_metrics=return_item_collection_metrics,
            **kwargs,
        )
        self._uniq_entries: list[_Entry] = []

    @staticmethod
    def _unique(model: Any) -> UniqueMixin | None:
        from ._mixin import UniqueMixin  # noqa: PLC0415 - the mixin imports this module's names lazily.

        if isinstance(model, UniqueMixin) and model._uniq_active() is not None:  # noqa: SLF001
            return model
        return None

    def _add(self, entry: _Entry) -> None:
        instance = entry.instance
        instance._uniq_check_key()  # noqa: SLF001 - the library's own checks.
        planner = instance._uniq_planner  # noqa: SLF001
        assert planner is not None  # noqa: S101 - checked by _unique.
        planner.keys(entry.desired)  # Refuse a bad value now, before anything is sent.
        self._uniq_entries.append(entry)

    def _stored(self, instance: UniqueMixin) -> Stored:
        """What is stored: known, or read once, consistently, now (the compare-and-swap guards it)."""
        known = instance._uniq_known()  # noqa: SLF001
        if known is not None:
            return known
        return instance._uniq_stored_from_item(instance._uniq_read_stored())  # noqa: SLF001

    def save(self, model: Any, condition: Condition | None = None, return_values: str | None = None) -> None:
        """Add a save; for a unique model, its locks too (unknown stored state: a create)."""
        instance = self._unique(model)
        if instance is None:
            super().save(model, condition=condition, return_values=return_values)
            return
        values = instance._uniq_values()  # noqa: SLF001
        assumed = instance._uniq_known() or Stored(exists=False)  # noqa: SLF001
        self._add(_Entry(instance, "put", assumed, values, condition, None, add_version_condition=True))

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
        instance = self._unique(model)
        if instance is None:
            super().update(
                model,
                actions,
                condition=condition,
                return_values=return_values,
                add_version_condition=add_version_condition,
            )
            return
        planner = instance._uniq_planner  # noqa: SLF001
        assert planner is not None  # noqa: S101 - checked by _unique.
        changes = instance._uniq_update_changes(planner, actions)  # noqa: SLF001
        assumed = self._stored(instance)
        desired = {**assumed.values, **changes}
        self._add(_Entry(instance, "update", assumed, desired, condition, list(actions), add_version_condition))

    def delete(self, model: Any, condition: Condition | None = None, *, add_version_condition: bool = True) -> None:
        """Add a delete; for a unique model, the release of its locks."""
        instance = self._unique(model)
        if instance is None:
            super().delete(model, condition=condition, add_version_condition=add_version_condition)
            return
        assumed = self._stored(instance)
        self._add(_Entry(instance, "delete", assumed, {}, condition, None, add_version_condition))

    # Commit.

    def _plan_entries(self) -> None:
        """Plan every entry, merging a release and a take of one value into one transfer."""
        keys = [(*owner_key(e.instance), type(e.instance).Meta.table_name) for e in self._uniq_entries]
        if len(set(keys)) != len(keys):
            msg = "a transaction may not write one record twice"
            raise InvalidUniqueValue(msg)
        for entry in self._uniq_entries:
            planner = entry.instance._uniq_planner  # noqa: SLF001
            assert planner is not None  # noqa: S101 - checked by _unique.
            if entry.op == "delete":
                entry.plan = planner.delete(entry.assumed)
            else:
                entry.plan = planner.write(entry.op, entry.assumed, entry.desired)
        releases = {r.key: e for e in self._uniq_entries for r in (e.plan.releases if e.plan else ())}
        taken: set[str] = set()
        for entry in self._uniq_entries:
            for put in entry.plan.puts if entry.plan else ():
                if put.key in taken:
                    msg = f"two records in this transaction take the same value ({put.constraint.name})"
                    raise InvalidUniqueValue(msg)
                taken.add(put.key)
                previous = releases.get(put.key)
                if previous is not None:
                    entry.transfers[put.key] = previous.instance
                    assert previous.plan is not None  # noqa: S101 - planned above.
                    kept = tuple(r for r in previous.plan.releases if r.key != put.key)
                    previous.plan = Plan(previous.plan.record, kept, previous.plan.puts, previous.plan.assumed)

    def _materialize(self) -> list[_Meaning | None]:
        """Append every planned item to PynamoDB's lists; return what each sent position means."""
        lists: dict[SentGroup, list[dict[str, Any]]] = {
            "check": self._condition_check_items,
            "delete": self._delete_items,
            "put": self._put_items,
            "update": self._update_items,
        }
        # The caller's own items, already in PynamoDB's lists, mean nothing to the library.
        meanings: dict[SentGroup, list[_Meaning | None]] = {group: [None] * len(lists[group]) for group in _GROUPS}
        for entry in self._uniq_entries:
            assert entry.plan is not None  # noqa: S101 - planned by _plan_entries.
            instance = entry.instance
            locks = type(instance)._uniq_locks()  # noqa: SLF001
            for action in entry.plan.sent():
                if isinstance(action, RecordWrite):
                    item = record_kwargs(instance, action, entry.condition, entry.actions, entry.add_version_condition)
                else:
                    previous = entry.transfers.get(action.key) if isinstance(action, LockPut) else None
                    item = lock_kwargs(instance, locks, action, previous_owner=previous)
                lists[action.op].append(item)
                meanings[action.op].append(_Meaning(entry, action))
        count = sum(len(v) for v in lists.values())
        if count > MAX_TRANSACTION_ACTIONS:
            msg = f"the transaction has {count} actions; DynamoDB allows at most {MAX_TRANSACTION_ACTIONS}"
            raise InvalidUniqueValue(msg)
        return [m for group in _GROUPS for m in meanings[group]]

    def _commit(self) -> Any:
        self._plan_entries()
        meanings = self._materialize()
        try:
            # The same request, and so the same token, on every resend.
            response = retrying(super()._commit)
        except TransactWriteError as exc:
            self._raise_for(exc, meanings)
        for entry in self._uniq_entries:
            assert entry.plan is not None  # noqa: S101 - planned by _plan_entries.
            entry.instance._uniq_after_success(  # noqa: SLF001
                entry.op, entry.plan, entry.desired, entry.actions, {}, load=False
            )
        return response

    @staticmethod
    def _violation(meaning: _Meaning, action: LockPut, item: dict[str, Any] | None) -> Violation | None:
        """The violation a failed lock put means, or None when the lock was this write's own."""
        instance = meaning.entry.instance
        owner = lock_owner(item)
        allowed = {owner_key(instance)}
        if action.key in meaning.entry.transfers:
            allowed.add(owner_key(meaning.entry.transfers[action.key]))
        if owner in allowed:
            return None
        owner_value = type(instance)._uniq_owner_key(owner)  # noqa: SLF001
        c = action.constraint
        return Violation(c.name, c.attributes, action.values, owner_value, instance=instance)

    @staticmethod
    def _record_problem(meaning: _Meaning, item: dict[str, Any] | None) -> str | None:
        """Why a record write failed: a conflict message, or None when the caller's condition did."""
        instance, entry = meaning.entry.instance, meaning.entry
        stored = instance._uniq_stored_from_item(item)  # noqa: SLF001
        planner = instance._uniq_planner  # noqa: SLF001
        assert planner is not None  # noqa: S101 - checked by _unique.
        if stored.same_as(entry.assumed, planner.unique_names):
            return None
        if not entry.assumed.exists:
            return f"{type(instance).__name__} {owner_key(instance)} exists; load it before saving"
        return f"{type(instance).__name__} {owner_key(instance)} changed since it was read"

    def _raise_for(self, exc: TransactWriteError, meanings: list[_Meaning | None]) -> None:
        """Raise what the caller must see for a cancelled transaction."""
        violations: list[Violation] = []
        stale: list[str] = []
        caller_failed = False
        for meaning, reason in zip(meanings, exc.cancellation_reasons, strict=False):
            if reason is None or reason.code != "ConditionalCheckFailed":
                continue
            action = meaning.action if meaning is not None else None
            if meaning is None:
                caller_failed = True
            elif isinstance(action, LockPut):
                violation = self._violation(meaning, action, reason.raw_item)
                if violation is not None:
                    violations.append(violation)
            elif isinstance(action, RecordWrite):
                problem = self._record_problem(meaning, reason.raw_item)
                caller_failed = caller_failed or problem is None
                stale.extend([problem] if problem is not None else [])
            elif isinstance(action, LockRelease):
                stale.append(f"the lock {action.key} belongs to another record")
        if violations:
            raise UniqueViolation(violations, exc)
        if caller_failed or not stale:
            raise exc
        msg = "; ".join(stale)
        raise StaleWrite(msg, exc)
