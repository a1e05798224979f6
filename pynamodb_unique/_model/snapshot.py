"""What an instance knows of its stored record: the snapshot a load or a write leaves on it.

The snapshot lives in the instance attribute ``_uniq_snapshot``, the one name besides the class's
``_uniq`` that the library adds to a user's model.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from pynamodb.constants import NULL

from .._core.plan import Stored

if TYPE_CHECKING:
    from pynamodb.models import Model

    from .context import ModelContext

#: The instance attribute holding what an instance knows of its stored record: (key, Stored).
#: Set with ``object.__setattr__``: a model's own ``__setattr__`` (one refusing names that are not
#: its attributes, one marking the record changed) never sees it.
SNAPSHOT: Final = "_uniq_snapshot"

#: The kinds of DynamoDB JSON values that cannot change in place.
_SCALAR_KINDS: Final = frozenset({"S", "N", "B", "BOOL", "NULL"})


def remember(context: ModelContext, instance: Model, stored: Stored, key: tuple[Any, ...] | None = None) -> None:
    """Remember what is stored under the instance's key (after a read or a write)."""
    if key is None:
        key = context.key(instance)
    object.__setattr__(instance, SNAPSHOT, (key, stored))


def loaded_values(context: ModelContext, instance: Model, item: Mapping[str, Any]) -> dict[str, Any]:
    """The values an instance just loaded from ``item`` holds, as ``ModelContext.values``, as stored.

    Read from the instance, so exactly as PynamoDB loaded it (fixed defaults applied, maps
    as ``MapAttribute``); an attribute whose default is made on each load (a callable) and
    that the item lacks (or holds as NULL) has no value.
    """
    values = context.values(instance)
    for name, attr_name in context.made_on_load:
        raw = item.get(attr_name)
        if not raw or NULL in raw:
            values[name] = None
    return values


def loaded_stored(context: ModelContext, instance: Model, item: Mapping[str, Any]) -> Stored:
    """What is stored, for an instance just loaded from ``item``."""
    return Stored(exists=True, values=loaded_values(context, instance, item), verbatim=context.verbatim_of(item))


def remember_loaded(context: ModelContext, instance: Model, item: Mapping[str, Any]) -> None:
    """Remember what a load (get, query, scan, refresh, update's item) of ``item`` gave the instance.

    Only when the model's writes move locks. The unique attributes' stored values are kept (a
    copy: the caller may change the item, ``update()``'s response for one) and read when a
    write first asks (:func:`known`), as ``ModelContext.item_view`` reads them: what the load
    gave, whatever the instance holds since. A record loaded and never written costs no reading.
    """
    if context.active():
        kept = {}
        for name in context.stored_names:
            raw = item.get(name)
            if raw is not None:
                # A value that cannot change in place (a string or a number, most often) is
                # copied flat; any other (a map, list or set) deeply.
                flat = len(raw) == 1 and ("S" in raw or "N" in raw or raw.keys() <= _SCALAR_KINDS)
                kept[name] = raw.copy() if flat else copy.deepcopy(raw)
        # A dict, not yet a Stored: known() reads it when first asked.
        object.__setattr__(instance, SNAPSHOT, (context.key(instance), kept))


def known(context: ModelContext, instance: Model, key: tuple[Any, ...] | None = None) -> Stored | None:
    """What is stored, if the instance knows it (it was loaded or written under the same key)."""
    snapshot: tuple[tuple[Any, ...], Stored | dict[str, Any]] | None = getattr(instance, SNAPSHOT, None)
    if snapshot is None:
        return None
    remembered, stored = snapshot
    if key is None:
        key = context.key(instance)
    if remembered != key:
        return None
    if isinstance(stored, dict):  # A loaded item, not read yet: read as item_view() reads it.
        stored = context.item_view(stored)
        object.__setattr__(instance, SNAPSHOT, (remembered, stored))
    return stored
