"""The seam to PynamoDB: every PynamoDB internal this package uses, and nothing else.

Each function says why the internal is needed and what public API would replace it, so an
upgrade of PynamoDB (6.x, 7) is checked here and nowhere else. Two internals cannot move here
because they are overrides on the model class itself: ``_batch_get_page`` (``_reads``: the page
reader of ``batch_get()``, filtered of lock items) and ``TransactWrite._commit`` (``_transact``:
the hook a ``with`` block commits through, which sends via ``_write.send``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError
from pynamodb.connection.base import MetaTable
from pynamodb.constants import ALL_NEW, ALL_OLD, ITEM, KEY
from pynamodb.expressions.operand import Path, _Size
from pynamodb.models import Model

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pynamodb.connection import Connection, TableConnection
    from pynamodb.exceptions import PynamoDBException
    from pynamodb.expressions.condition import Condition
    from pynamodb.expressions.update import Action
    from pynamodb.transactions import TransactWrite


def connection(model: type[Model]) -> TableConnection:
    """The model's cached TableConnection, built from its Meta.

    Why: PynamoDB builds it from Meta (region, host, timeouts, credentials) and caches it; no
    public accessor exists. Replacement: a public ``Model.get_connection()``.
    """
    return model._get_connection()


def built_connection(model: type[Model]) -> TableConnection | None:
    """The model's TableConnection as PynamoDB caches it, without building one (None: not built).

    Why: a cache derived from the connection (the lock table of a model keeping locks in its own
    table) is renewed when the connection is, at the cost of an attribute read instead of
    :func:`connection`'s checks of Meta on every write. Replacement: none public.
    """
    built: TableConnection | None = model._connection
    return built


def forget_connection(model: type[Model]) -> None:
    """Drop the model's cached connection, so a changed ``Meta.host`` takes effect (the CLI's ``--endpoint``).

    Why: the cache lives in ``Model._connection``. Replacement: none public; a Meta change before
    first use needs nothing.
    """
    model._connection = None


def serialized_key(instance: Model) -> tuple[Any, Any]:
    """The record's hash and range key values, serialized (range None without one).

    Why: the same serialization PynamoDB uses for its own requests, without serializing the
    whole item. Replacement: ``instance.serialize()`` and picking the key attributes (slower).
    """
    hash_key, range_key = instance._get_hash_range_key_serialized_values()
    return hash_key, range_key


def blank_instance(model: type[Model]) -> Model:
    """An instance without defaults applied, as PynamoDB builds one to load a stored item.

    Why: partial constraints' conditions receive an instance holding exactly the values being
    written; ``Model()`` would fill in defaults. Replacement: a public way to build an instance
    from Python values without defaults.
    """
    return model(_user_instantiated=False)


def put_kwargs(instance: Model, condition: Condition | None, *, add_version_condition: bool) -> dict[str, Any]:
    """A PutItem's arguments with ALL_OLD on failure, honouring ``add_version_condition``.

    Why: the public ``get_save_kwargs_from_instance`` always adds the version check, while
    ``save(add_version_condition=False)`` must not. Replacement: that flag on the public builder.
    """
    if add_version_condition:
        # PynamoDB's own builder: the mixin refuses the instance's (PynamoDB's TransactWrite calls it).
        kwargs: dict[str, Any] = Model.get_save_kwargs_from_instance(
            instance, condition=condition, return_values_on_condition_failure=ALL_OLD
        )
        return kwargs
    args, save = instance._get_save_args(condition=condition, add_version_condition=False)
    (hash_key,) = args
    built: dict[str, Any] = connection(type(instance)).get_operation_kwargs(
        hash_key,
        range_key=save.get("range_key"),
        key=ITEM,
        attributes=save["attributes"],
        condition=save["condition"],
        return_values_on_condition_failure=ALL_OLD,
    )
    return built


def update_kwargs(
    instance: Model,
    actions: Sequence[Action],
    condition: Condition | None,
    *,
    add_version_condition: bool,
    table: TableConnection | None = None,
) -> dict[str, Any]:
    """PynamoDB's ``update()`` request: UpdateItem's arguments with ``ReturnValues`` ALL_NEW, in its order.

    Why: the public ``get_update_kwargs_from_instance`` takes no ``return_values``, and ``update()``
    places it before the update expression. Replacement: that parameter on the public builder.
    ``table``: the model's connection, when at hand.
    """
    # PynamoDB appends the version action to the list it is given: a copy keeps the caller's.
    actions = list(actions)
    hash_key, range_key = instance._get_hash_range_key_serialized_values()
    version_condition = instance._handle_version_attribute(actions=actions)
    if add_version_condition and version_condition is not None:
        condition &= version_condition
    built: dict[str, Any] = (table or connection(type(instance))).get_operation_kwargs(
        hash_key, range_key=range_key, key=KEY, actions=actions, condition=condition, return_values=ALL_NEW
    )
    return built


def client_error(exc: PynamoDBException) -> ClientError | None:
    """The botocore error behind a failed single-item write, which carries its ALL_OLD item.

    Why: PynamoDB wraps botocore's ``ClientError`` in its ``VerboseClientError``, which keeps only
    the error code and message; the item DynamoDB returned stays on the original error, chained as
    ``__cause__``. Replacement: PynamoDB exposing the response's ``Item`` on its exceptions.
    """
    original = exc.cause.__cause__ if exc.cause is not None else None
    return original if isinstance(original, ClientError) else None


def transaction_lists(tx: TransactWrite) -> dict[str, list[dict[str, Any]]]:
    """A PynamoDB transaction's pending items, by the group they are sent in.

    Why: the library adds lock items next to the caller's own and must know the position each is
    sent at (PynamoDB groups them: condition checks, deletes, puts, updates). Replacement: a public
    way to add raw items to a ``TransactWrite``.
    """
    return {
        "check": tx._condition_check_items,
        "delete": tx._delete_items,
        "put": tx._put_items,
        "update": tx._update_items,
    }


def transaction_settings(tx: TransactWrite) -> tuple[Connection, str | None, str | None, str | None]:
    """A PynamoDB transaction's connection, token, ``return_consumed_capacity`` and ``return_item_collection_metrics``.

    Why: the library sends a ``TransactWrite``'s items itself (resent on conflicts, read on
    cancellation) with the settings it was made with. Replacement: public accessors on ``TransactWrite``.
    """
    return (
        tx._connection,
        tx._client_request_token,
        tx._return_consumed_capacity,
        tx._return_item_collection_metrics,
    )


def transaction_committed(tx: TransactWrite) -> None:
    """PynamoDB's own step after a transaction's commit: each saved or updated model's local version advanced.

    Why: ``TransactWrite._commit`` does this after sending, and the library sends instead of it.
    Replacement: a public post-commit hook on ``TransactWrite``.
    """
    for model in tx._models_for_version_attribute_update:
        model.update_local_version_attribute()


def set_transaction_token(tx: TransactWrite, token: str) -> None:
    """Give a PynamoDB transaction the ClientRequestToken its next commit sends.

    Why: a transaction re-planned after a cancellation (a lock to release found to be another
    record's) is another request, which DynamoDB refuses under the first one's token. Replacement:
    a public way to set a ``TransactWrite``'s token before committing.
    """
    tx._client_request_token = token


def size_path(operand: Any) -> Path | None:
    """The path inside a ``size(path)`` operand of a condition (None: another operand).

    Why: ``unique_item_filter`` conditions are evaluated on scanned items; PynamoDB's ``size()``
    operand class and its ``values`` are private. Replacement: a public operand type.
    """
    if not isinstance(operand, _Size):
        return None
    path: Path = operand.values[0]
    return path


def lock_table_schema(description: dict[str, Any]) -> MetaTable:
    """PynamoDB's table description of a lock table the library defines itself, without a DescribeTable.

    Why: a ``TableConnection`` given ``meta_table`` builds keys without asking DynamoDB; its class
    lives in ``pynamodb.connection.base``. Replacement: a public ``MetaTable``.
    """
    return MetaTable(description)


def set_transaction_connection(tx: TransactWrite, connection: Connection) -> None:
    """Have a PynamoDB transaction commit on ``connection``.

    Why: ``TransactWrite`` takes its connection when made; the library's, made without one, sends
    with the first model's (its region, host and credentials). Replacement: none public.
    """
    tx._connection = connection


def operation_kwargs(model: type[Model], owner: tuple[Any, ...], condition: Condition) -> dict[str, Any]:
    """A ConditionCheck's arguments for a record key, as PynamoDB's connection builds them.

    Why: ``get_operation_kwargs_from_class`` takes Python key values; the Streams handler has the
    serialized key of a lock's owner. Replacement: a public builder taking serialized keys.
    """
    range_key = owner[1] if len(owner) > 1 else None
    built: dict[str, Any] = connection(model).get_operation_kwargs(owner[0], range_key, key=KEY, condition=condition)
    return built
