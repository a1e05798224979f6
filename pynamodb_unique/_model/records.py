"""Reading one record of a unique model: its stored item, strongly consistent."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .seam import connection

if TYPE_CHECKING:
    from pynamodb.models import Model

    from .._core.lockitem import OwnerKey
    from .context import ModelContext


def read_item(context: ModelContext, owner: OwnerKey) -> dict[str, Any] | None:
    """The stored item under a record key (as lock items store it), read consistently (None: no record)."""
    range_key = owner[1] if len(owner) > 1 else None
    data = connection(context.model).get_item(owner[0], range_key=range_key, consistent_read=True)
    item: dict[str, Any] | None = data.get("Item")
    return item


def read_stored(context: ModelContext, instance: Model) -> dict[str, Any] | None:
    """The stored item under the instance's key, read consistently (None: no record)."""
    return read_item(context, context.owner(instance))
