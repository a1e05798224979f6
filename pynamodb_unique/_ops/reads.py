"""Reads of a unique model: lock items are never records, and what is loaded is remembered."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar

from pynamodb.expressions.condition import Condition
from pynamodb.expressions.operand import Path
from pynamodb.models import BatchWrite, Model
from pynamodb.pagination import ResultIterator

from .._core.constraint import OWNER_HASH, RESERVATION
from .._model import snapshot
from .._model.context import context_of
from .._model.locks import is_lock_item
from .._model.registry import holds_locks, holds_reservations, maintains_locks
from ..exceptions import UniqueError

_T = TypeVar("_T", bound=Model)


def _refuse_lock(model: type[Model], item: Mapping[str, Any] | None) -> None:
    """A lock item read as a record (``get()``/``refresh()`` of a lock key) is no record.

    Raises:
        DoesNotExist: ``item`` is a lock item in a table where some model keeps locks.
    """
    if item is not None and is_lock_item(item) and holds_locks(model):
        msg = "the item is a lock item of pynamodb_unique, not a record"
        raise model.DoesNotExist(msg)


def _hide_locks(model: type[Model], filter_condition: Condition | None) -> Condition | None:
    """Add "not a lock item" to a scan or query of a table where some model keeps locks."""
    if not holds_locks(model):
        return filter_condition
    no_lock = Path(OWNER_HASH).does_not_exist()
    if holds_reservations(model):
        # A reservation's lock names no owner record, only its token.
        no_lock &= Path(RESERVATION).does_not_exist()
    return no_lock if filter_condition is None else filter_condition & no_lock


class UniqueReads(Model):
    """PynamoDB's reads of a unique model: lock items are never records, and loads are remembered."""

    @classmethod
    def from_raw_data(cls: type[_T], data: dict[str, Any]) -> _T:
        """Build an instance from a stored item (get, query, scan) and remember its unique values.

        Raises:
            DoesNotExist: ``data`` is a lock item (``get()`` of a lock key finds no record).
        """
        _refuse_lock(cls, data)
        instance = super().from_raw_data(data)
        context = context_of(type(instance))
        if context is not None:
            snapshot.remember_loaded(context, instance, data)
        return instance

    def deserialize(self, attribute_values: dict[str, dict[str, Any]]) -> None:
        """Load a stored item (refresh, update) and remember its unique values.

        Raises:
            DoesNotExist: the item is a lock item (``refresh()`` of a lock key finds no record).
        """
        _refuse_lock(type(self), attribute_values)
        super().deserialize(attribute_values)
        context = context_of(type(self))
        if context is not None:
            snapshot.remember_loaded(context, self, attribute_values)

    @classmethod
    def query(
        cls: type[_T],
        hash_key: Any,
        range_key_condition: Condition | None = None,
        filter_condition: Condition | None = None,
        consistent_read: bool = False,
        index_name: str | None = None,
        scan_index_forward: bool | None = None,
        limit: int | None = None,
        last_evaluated_key: dict[str, dict[str, Any]] | None = None,
        attributes_to_get: Iterable[str] | None = None,
        page_size: int | None = None,
        rate_limit: float | None = None,
    ) -> ResultIterator[_T]:
        """PynamoDB's query, never yielding lock items."""
        return super().query(
            hash_key,
            range_key_condition=range_key_condition,
            filter_condition=_hide_locks(cls, filter_condition),
            consistent_read=consistent_read,
            index_name=index_name,
            scan_index_forward=scan_index_forward,
            limit=limit,
            last_evaluated_key=last_evaluated_key,
            attributes_to_get=attributes_to_get,
            page_size=page_size,
            rate_limit=rate_limit,
        )

    @classmethod
    def scan(
        cls: type[_T],
        filter_condition: Condition | None = None,
        segment: int | None = None,
        total_segments: int | None = None,
        limit: int | None = None,
        last_evaluated_key: dict[str, dict[str, Any]] | None = None,
        page_size: int | None = None,
        consistent_read: bool | None = None,
        index_name: str | None = None,
        rate_limit: float | None = None,
        attributes_to_get: Sequence[str] | None = None,
    ) -> ResultIterator[_T]:
        """PynamoDB's scan, never yielding lock items."""
        return super().scan(
            filter_condition=_hide_locks(cls, filter_condition),
            segment=segment,
            total_segments=total_segments,
            limit=limit,
            last_evaluated_key=last_evaluated_key,
            page_size=page_size,
            consistent_read=consistent_read,
            index_name=index_name,
            rate_limit=rate_limit,
            attributes_to_get=attributes_to_get,
        )

    @classmethod
    def _batch_get_page(
        cls, keys_to_get: Any, consistent_read: bool | None, attributes_to_get: Any
    ) -> tuple[list[dict[str, Any]], Any]:
        """PynamoDB's page of BatchGetItem without lock items: ``batch_get()`` of a lock key finds nothing."""
        items, unprocessed = super()._batch_get_page(keys_to_get, consistent_read, attributes_to_get)  # type: ignore[no-untyped-call] # PynamoDB's private page reader.
        if items and holds_locks(cls):
            items = [item for item in items if not is_lock_item(item)]
        return items, unprocessed

    @classmethod
    def batch_write(cls: type[_T], auto_commit: bool = True) -> BatchWrite[_T]:
        """Refused when the model keeps locks: BatchWriteItem carries no conditions."""
        if not maintains_locks(cls):
            return super().batch_write(auto_commit)
        msg = (
            f"{cls.__name__}.batch_write() is refused: BatchWriteItem carries no conditions and "
            "cannot keep unique locks in step; use pynamodb_unique.bulk_save(records) instead (records "
            "with their locks, packed into TransactWriteItems)"
        )
        raise UniqueError(msg)
