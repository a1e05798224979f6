"""``UniqueMixin``: save, update and delete that keep lock items and unique values in step."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final, Literal

from pynamodb.expressions.condition import Condition
from pynamodb.expressions.update import Action
from pynamodb.models import MetaModel

from ._configure import configure
from ._locks import lock_owner, lock_owner_model
from ._plan import LockNotOurs, LockPut, LockRelease, Plan, Planner, RecordOp, RecordWrite, Stored
from ._reads import UniqueReads
from ._registry import register, stored_class
from ._requests import OPERATIONS, and_conditions, build_request, owner_key, updated_image
from ._send import (
    RETRY_ATTEMPTS,
    WriteFailed,
    check_token,
    conditional_check_error,
    derive_token,
    new_token,
    send,
)
from .exceptions import ConditionFailed, StaleWrite, UniqueViolation, Violation

Desire = Callable[[Stored], dict[str, Any]]

#: How many plans one operation may send: the first, then re-plans from the stored item.
MAX_PLANS: Final = 4


class _UniqueModelMeta(MetaModel):
    """Runs the constraint checks once PynamoDB has collected the model's attributes."""

    def __init__(cls, name: str, bases: Any, namespace: Any, discriminator: Any = None) -> None:  # noqa: N805 - a metaclass.
        super().__init__(name, bases, namespace, discriminator)
        cls._uniq_planner = configure(cls)  # type: ignore[arg-type] # cls is a Model class here.
        if cls._uniq_planner is not None:
            register(cls)  # type: ignore[arg-type] # cls is a Model class here.


class UniqueMixin(UniqueReads, metaclass=_UniqueModelMeta):
    """Adds unique constraints to a PynamoDB model; place it before ``Model``.

    ``save``, ``update`` and ``delete`` write the record and its lock items in one
    TransactWriteItems when a unique value changes, and raise :class:`UniqueViolation` when a
    value is taken. ``scan`` and ``query`` never yield lock items.
    """

    # Writing.

    def save(
        self,
        condition: Condition | None = None,
        *,
        add_version_condition: bool = True,
        client_request_token: str | None = None,
    ) -> dict[str, Any]:
        """Save this record and move its locks in the same request.

        Args:
            condition: the caller's condition on the record, as in PynamoDB.
            add_version_condition: PynamoDB's optimistic-locking switch.
            client_request_token: makes a resent transaction idempotent (1-36 characters);
                one is generated when omitted.

        Raises:
            UniqueViolation: a unique value is held by another record.
            ConditionFailed: ``condition`` or the version check failed.
            StaleWrite: the record kept changing concurrently.
            InvalidUniqueValue: a value or the token is refused; nothing was sent.
        """
        planner = self._uniq_active()
        if planner is None:
            return super().save(condition, add_version_condition=add_version_condition)
        token = check_token(client_request_token)
        key, known = self._uniq_prepare()
        # A bad value is refused while planning, before any request.
        assumed, desire = self._uniq_intent(planner, "put", None, known)
        response: dict[str, Any] = self._uniq_run(
            "put", planner, assumed, desire, condition, None, add_version_condition, token, key=key
        )
        return response

    def update(
        self,
        actions: list[Action],
        condition: Condition | None = None,
        *,
        add_version_condition: bool = True,
        client_request_token: str | None = None,
    ) -> Any:
        """Update this record; a change of unique value moves its locks in the same request.

        Unique attributes accept only ``.set(literal)`` and ``.remove()``.

        Raises:
            UniqueViolation: a unique value is held by another record.
            ConditionFailed: ``condition`` or the version check failed.
            StaleWrite: the record kept changing concurrently.
            InvalidUniqueValue: an action or the token is refused; nothing was sent.
        """
        planner = self._uniq_active()
        if planner is None:
            return super().update(actions, condition, add_version_condition=add_version_condition)
        if not isinstance(actions, list) or not actions:
            msg = "the value of `actions` is expected to be a non-empty list"
            raise TypeError(msg)
        token = check_token(client_request_token)
        key, known = self._uniq_prepare()
        assumed, desire = self._uniq_intent(planner, "update", actions, known)
        if desire is None:
            return self._uniq_plain_update(planner, actions, condition, add_version_condition=add_version_condition)
        return self._uniq_run(
            "update",
            planner,
            assumed,
            desire,
            condition,
            actions,
            add_version_condition,
            token,
            key=key,
        )

    def delete(
        self,
        condition: Condition | None = None,
        *,
        add_version_condition: bool = True,
        client_request_token: str | None = None,
    ) -> Any:
        """Delete this record and release its locks in the same request.

        Deleting a record that is already gone succeeds, as in PynamoDB.

        Raises:
            ConditionFailed: ``condition`` or the version check failed.
            StaleWrite: the record kept changing concurrently.
        """
        planner = self._uniq_active()
        if planner is None:
            return super().delete(condition, add_version_condition=add_version_condition)
        token = check_token(client_request_token)
        key, known = self._uniq_prepare()
        assumed, desire = self._uniq_intent(planner, "delete", None, known)
        return self._uniq_run(
            "delete", planner, assumed, desire, condition, None, add_version_condition, token, key=key
        )

    def _uniq_intent(
        self, planner: Planner, op: RecordOp, actions: Sequence[Action] | None, known: Stored | None
    ) -> tuple[Stored, Desire | None]:
        """What a write assumes is stored, and the values it wants given what is stored.

        None as the second item: an ``update`` that touches no unique attribute (a plain UpdateItem).
        """
        if op == "put":
            desired = self._uniq_values()
            return known or Stored(exists=False), lambda _: desired
        # Unknown state: guess the instance's own values; the compare-and-swap checks the guess.
        guess = known or Stored(exists=True, values=self._uniq_values())
        if op == "delete":
            return guess, lambda _: {}
        changes = self._uniq_update_changes(planner, actions or ())
        if not changes:
            return Stored(exists=True), None
        return guess, lambda stored: {**stored.values, **changes}

    @staticmethod
    def _uniq_plan(
        planner: Planner,
        op: RecordOp,
        assumed: Stored,
        desire: Desire | None,
        not_ours: frozenset[str] = frozenset(),
    ) -> tuple[Plan, dict[str, Any]]:
        """The plan of one request, and the values it writes."""
        if desire is None:
            # A plain UpdateItem: no lock moves, and nothing to compare and swap.
            return Plan(RecordWrite("update", None), (), (), assumed), {}
        desired = desire(assumed)
        if op == "delete":
            return planner.delete(assumed, not_ours=not_ours), desired
        return planner.write(op, assumed, desired, not_ours=not_ours), desired

    def _uniq_plain_update(
        self, planner: Planner, actions: list[Action], condition: Condition | None, *, add_version_condition: bool
    ) -> Any:
        """PynamoDB's UpdateItem, sent with the library's retries of conflicts and throttling."""
        plan = Plan(RecordWrite("update", None), (), (), Stored(exists=True))
        # A polymorphic record may hold another class's item: its locks follow that class's
        # constraints, which this update cannot plan; the class check refuses it before writing.
        checked = and_conditions(condition, planner.class_check())
        request = build_request(
            self, plan, checked, actions, add_version_condition=add_version_condition, locks=self._uniq_locks()
        )
        attempts = getattr(self.Meta, "unique_retry_attempts", RETRY_ATTEMPTS)
        try:
            response = send(self._get_connection().connection, request, None, attempts=attempts)
        except WriteFailed as failure:
            item = failure.reasons[0].raw_item if failure.reasons[0] is not None else None
            self._uniq_refuse_other_class(item)
            msg = f"{type(self).__name__} {owner_key(self)}: {ConditionFailed.msg}"
            error = conditional_check_error(failure.cause, "UpdateItem")
            raise ConditionFailed(msg, error) from error
        self.deserialize(response["Attributes"])
        return response

    def _uniq_refuse_other_class(self, item: dict[str, Any] | None) -> None:
        """Refuse an update of a stored item of another class, as PynamoDB's update() refuses to load it.

        PynamoDB applies the update, then raises; this refuses before anything is written, since
        the item's locks follow its own class's constraints.
        """
        if item:
            stored_cls = stored_class(type(self), item)
            if stored_cls is not type(self):
                msg = f"Cannot update this item from the returned class: {stored_cls.__name__}"
                raise ValueError(msg)

    def _uniq_run(
        self,
        op: Literal["put", "update", "delete"],
        planner: Planner,
        assumed: Stored,
        desire: Desire | None,
        condition: Condition | None,
        actions: list[Action] | None,
        add_version_condition: bool,
        token: str | None,
        *,
        key: tuple[Any, ...],
    ) -> Any:
        """Plan, send, and re-plan from the stored item when the view was stale."""
        base_token = token
        not_ours: set[str] = set()
        connection = self._get_connection().connection
        attempts = getattr(self.Meta, "unique_retry_attempts", RETRY_ATTEMPTS)
        for step in range(MAX_PLANS):
            plan, desired = self._uniq_plan(planner, op, assumed, desire, frozenset(not_ours))
            request = build_request(
                self, plan, condition, actions, add_version_condition=add_version_condition, locks=self._uniq_locks()
            )
            step_token: str | None = None
            if request.transactional:
                # Made once per operation, and only when a request carries it.
                base_token = base_token or new_token()
                step_token = base_token if step == 0 else derive_token(base_token, step, request.items)
            try:
                response = send(connection, request, step_token, attempts=attempts)
            except WriteFailed as failure:
                assumed = self._uniq_after_failure(planner, plan, failure, not_ours)
                continue
            return self._uniq_after_success(op, plan, desired, actions, response, key=key, sent=request.record_item())
        msg = f"{type(self).__name__} {owner_key(self)}: {StaleWrite.msg} ({MAX_PLANS} plans)"
        raise StaleWrite(msg)

    def _uniq_after_failure(self, planner: Planner, plan: Plan, failure: WriteFailed, not_ours: set[str]) -> Stored:
        """Read a failure: raise what the caller must see, or return the stored state to re-plan from."""
        me = owner_key(self)
        violations: list[Violation] = []
        record_failed = False
        record_item: dict[str, Any] | None = None
        foreign_releases: list[str] = []
        became_ours: list[str] = []
        for action, reason in zip(plan.sent(), failure.reasons, strict=False):
            if reason is None or reason.code != "ConditionalCheckFailed":
                continue
            if isinstance(action, RecordWrite):
                record_failed, record_item = True, reason.raw_item
                continue
            owner = lock_owner(reason.raw_item)
            if isinstance(action, LockPut) and owner != me:
                violation = Violation(
                    action.constraint.name,
                    action.constraint.attributes,
                    action.values,
                    self._uniq_owner_key(owner),
                    instance=self,
                    owner_model=lock_owner_model(reason.raw_item),
                )
                violations.append(violation)
            elif isinstance(action, LockRelease):
                foreign_releases.append(action.key)
            elif isinstance(action, LockNotOurs):
                became_ours.append(action.key)
        if violations:
            raise UniqueViolation(violations, failure.cause)
        if not record_failed:
            if not foreign_releases and not became_ours:
                raise failure.cause
            # A lock to release belongs to another record (the record is gone, or the lock is
            # foreign: for audit and repair): the next plan checks it is still not ours instead.
            # A lock checked so has become ours again: the next plan releases it.
            not_ours.difference_update(became_ours)
            not_ours.update(foreign_releases)
            return plan.assumed
        # What other records owned was learnt for a record state that is gone: forget it.
        not_ours.clear()
        if record_item is None and (plan.record.op == "delete" or not plan.assumed.exists):
            # The failed condition implies the record exists; this backend sent no ALL_OLD item.
            record_item = self._uniq_read_stored()
        if plan.record.op == "update":
            self._uniq_refuse_other_class(record_item)
        stored = self._uniq_stored_from_item(record_item)
        if stored.same_as(plan.assumed, planner.unique_names):
            msg = f"{type(self).__name__} {me}: {ConditionFailed.msg} (the caller's condition or the version check)"
            error = conditional_check_error(failure.cause, OPERATIONS[plan.record.op], record_item)
            raise ConditionFailed(msg, error) from error
        return stored

    def _uniq_after_success(
        self,
        op: str,
        plan: Plan,
        desired: dict[str, Any],
        actions: list[Action] | None,
        response: dict[str, Any],
        *,
        key: tuple[Any, ...] | None = None,
        sent: dict[str, Any] | None = None,
        load: bool = True,
    ) -> dict[str, Any]:
        """Make the instance reflect what is stored, as PynamoDB does after a write; return the response.

        Args:
            op: the record's write.
            plan: the plan that succeeded.
            desired: the unique values written.
            actions: an update's actions.
            response: DynamoDB's response.
            key: the record key the write was planned under.
            sent: the record's request item, when known.
            load: load the stored item after a transactional update, as PynamoDB's ``update()``
                does (PynamoDB's ``TransactWrite`` does not: only literal actions are applied).
        """
        if op == "delete":
            self._uniq_remember(Stored(exists=False), key)
            return response
        if op == "put":
            self.update_local_version_attribute()  # type: ignore[no-untyped-call] # unannotated in PynamoDB.
            item = sent.get("Item") if sent is not None else None
            self._uniq_remember(Stored(exists=True, values=desired, item=item), key)
            return response
        if "Attributes" in response:
            # UpdateItem returned the stored item: load it, as PynamoDB's update() does.
            self.deserialize(response["Attributes"])
            return response
        # A transaction returns no item, while PynamoDB's update() returns the item after the
        # write (ALL_NEW) and loads it. When the record did not exist, the condition proves that
        # item is the key with the literal actions applied; otherwise it is read once, consistently,
        # after the commit (what was read before may have changed in attributes no condition covers).
        self.update_local_version_attribute()  # type: ignore[no-untyped-call] # unannotated in PynamoDB.
        if not load:
            self._uniq_apply_literals(actions or ())
            self._uniq_remember(Stored(exists=True, values=desired), key)
            return response
        image = None
        if not plan.assumed.exists:
            image = updated_image(self, self._uniq_key_item(), actions or ())
        if image is None:
            image = self._uniq_read_stored()
        if image is None:
            # Deleted by another writer since the commit: the write succeeded all the same.
            self._uniq_apply_literals(actions or ())
            self._uniq_remember(Stored(exists=True, values=desired), key)
            return response
        self.deserialize(image)
        return {**response, "Attributes": image}
