"""Sending one planned request: tokens, bounded retries, and reading failures."""

from __future__ import annotations

import hashlib
import json
import os
import random
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, NamedTuple, TypeVar

from botocore.exceptions import BotoCoreError, ClientError
from pynamodb.connection import Connection
from pynamodb.exceptions import (
    CancellationReason,
    DeleteError,
    GetError,
    PutError,
    PynamoDBException,
    TableDoesNotExist,
    TransactWriteError,
    UpdateError,
)

from .._core.keys import LOCK_PREFIX
from .._core.limits import MAX_TOKEN_LENGTH, RETRY_ATTEMPTS
from .._core.outcome import WriteFailed
from .._core.plan import SENT_ORDER, SentGroup
from ..exceptions import IdempotencyMismatch, InvalidUniqueValue, TableNotFound, TransientError
from . import telemetry as _telemetry

_R = TypeVar("_R")

RETRY_BASE_DELAY: Final = 0.05
RETRY_MAX_DELAY: Final = 1.0

RETRYABLE_CODES: Final = frozenset(
    {
        "TransactionInProgressException",
        # A single-item write meets an item that a transaction is writing.
        "TransactionConflictException",
        "ProvisionedThroughputExceededException",
        "ThrottlingException",
        "RequestLimitExceeded",
    }
)
RETRYABLE_REASONS: Final = frozenset({"TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded"})
#: The error PynamoDB's put_item, update_item and delete_item raise, and its message.
_SINGLE_ERRORS: Final[dict[str, tuple[type[PynamoDBException], str]]] = {
    "PutItem": (PutError, "Failed to put item"),
    "UpdateItem": (UpdateError, "Failed to update item"),
    "DeleteItem": (DeleteError, "Failed to delete item"),
}

#: Replaced by tests that inject faults, so backoff does not slow them down.
sleep: Callable[[float], None] = time.sleep


def check_token(token: str | None) -> str | None:
    """Validate a caller's ClientRequestToken (1 to 36 characters) before any request.

    Raises:
        InvalidUniqueValue: the token is empty, too long or not a string.
    """
    if token is None:
        return None
    if not isinstance(token, str) or not 1 <= len(token) <= MAX_TOKEN_LENGTH:
        msg = f"client_request_token must be a string of 1 to {MAX_TOKEN_LENGTH} characters, got {token!r}"
        raise InvalidUniqueValue(msg)
    return token


def new_token() -> str:
    """A fresh token for one logical operation: 128 random bits as 32 hex characters.

    Drawn from the operating system each time: a counter would repeat in every copy of a restored
    process snapshot (Lambda SnapStart), and DynamoDB would take a copy's write for a replay.
    """
    return os.urandom(16).hex()  # What secrets.token_hex(16) returns, one call less.


#: How long DynamoDB honours a ClientRequestToken, in seconds.
TOKEN_LIFETIME: Final = 600
# A caller's token -> (the clock of its first request, when it was first used), oldest first.
_clocks: OrderedDict[str, tuple[int, float]] = OrderedDict()
_clocks_lock = threading.Lock()


def request_clock(token: str | None, *, keep: bool = True) -> int:
    """The time (epoch seconds) a request judges expired locks and ends holds by.

    A request that may take expired locks carries the time (``:now``), so a resend with the same
    token would differ from the first one a second later, and DynamoDB would refuse it
    (IdempotentParameterMismatch). A caller's token (None: the library's own, never resent by a
    caller) therefore keeps the time of its first request, in this process, for as long as
    DynamoDB honours the token.

    Args:
        token: the caller's ClientRequestToken, or None.
        keep: remember the time for ``token`` (False: only read it, as ``explain`` does).
    """
    now = time.time()
    if token is None:
        return int(now)
    with _clocks_lock:
        # Oldest first: drop the tokens DynamoDB no longer honours, stopping at the first it does.
        while _clocks and now - next(iter(_clocks.values()))[1] > TOKEN_LIFETIME:
            _clocks.popitem(last=False)
        found = _clocks.get(token)
        if found is None:
            found = (int(now), now)
            if keep:
                _clocks[token] = found
        return found[0]


def derive_token(base: str, step: int, items: Sequence[dict[str, Any]]) -> str:
    """Token of a re-planned request: the same inputs always give the same token.

    It folds in the request itself, so a re-plan that differs never reuses a token (which
    DynamoDB would refuse with IdempotentParameterMismatch), and a resend of the same re-plan
    does reuse it.
    """
    body = json.dumps(items, sort_keys=True, default=repr)
    digest = hashlib.sha256(f"{base}\x1f{step}\x1f{body}".encode()).hexdigest()
    return digest[:MAX_TOKEN_LENGTH]


#: How each group is named in TransactItems.
TRANSACT_KINDS: Final = {"check": "ConditionCheck", "delete": "Delete", "put": "Put", "update": "Update"}


class Request(NamedTuple):
    """A plan turned into DynamoDB operation arguments, one dict per sent action.

    A named tuple: made by every write, cheaper to make than a frozen dataclass (docs/architecture.md, Speed).

    Attributes:
        items: a single write's arguments (one dict); for a transaction, its ``TransactItems``
            (``{"Put": {...}}``...), one per action in the order :meth:`Plan.sent` gives.
        operation: the DynamoDB operation.
        transactional: whether the operation is TransactWriteItems.
    """

    items: list[dict[str, Any]]
    operation: str
    transactional: bool = False

    def arguments(self) -> list[dict[str, Any]]:
        """Each action's own arguments, as :attr:`items` holds them without TransactItems' wrapping."""
        if not self.transactional:
            return self.items
        return [arguments for item in self.items for arguments in item.values()]


def _wrapped(request: Request, exc: BotoCoreError | ClientError) -> PynamoDBException:
    """A botocore error of ``request``, wrapped as PynamoDB's own sending wraps it.

    As ``transact_write_items``, ``put_item``, ``update_item`` and ``delete_item`` do; raised in the
    ``except`` block, the botocore error is the ``cause`` and the implicit context.
    """
    if request.transactional:
        return TransactWriteError("Failed to write transaction items", exc)
    error, text = _SINGLE_ERRORS[request.operation]
    return error(f"{text}: {exc}", exc)


def error_code(exc: PynamoDBException) -> str | None:
    """The DynamoDB error code behind a PynamoDB error, or None (e.g. a lost response).

    PynamoDB's ``cause_response_code`` fails on causes whose ``response`` is None, such as
    botocore's ``ReadTimeoutError``; this reads the code defensively.
    """
    response = getattr(exc.cause, "response", None)
    if not isinstance(response, dict):
        return None
    code = response.get("Error", {}).get("Code")
    return code if isinstance(code, str) else None


def is_transient(exc: PynamoDBException) -> bool:
    """Whether resending the same request (same token) may succeed: conflicts and throttling."""
    code = error_code(exc)
    if code in RETRYABLE_CODES:
        return True
    if isinstance(exc, TransactWriteError) and code == "TransactionCanceledException":
        codes = {r.code for r in exc.cancellation_reasons if r is not None}
        return bool(codes) and codes <= RETRYABLE_REASONS
    return False


def backoff(attempt: int) -> None:
    """Wait before resend ``attempt + 1``: exponential from 50 ms, at most 1 s, with jitter."""
    delay = min(RETRY_MAX_DELAY, RETRY_BASE_DELAY * 2**attempt)
    sleep(delay * random.uniform(0.5, 1.0))  # noqa: S311 - jitter, not cryptography.


def retrying(
    call: Callable[..., _R],
    *args: Any,
    attempts: int | Callable[[], int] = RETRY_ATTEMPTS,
) -> _R:
    """Call ``call(*args)``, resending on conflicts and throttling with bounded, jittered backoff.

    The one retry loop of the package. The request is resent unchanged, so a transaction keeps
    its ClientRequestToken.

    Args:
        call: one attempt.
        args: its arguments, built once for every attempt.
        attempts: attempts in all, or how to read the number when a resend is first considered
            (a model's setting, read only when a write meets a conflict or throttling).

    Raises:
        TransientError: conflicts or throttling outlasted ``attempts``.
        ValueError: ``attempts`` is not an integer of at least 1.
    """
    if not callable(attempts):
        _check_attempts(attempts)
    attempt = 0
    while True:
        try:
            return call(*args)
        except PynamoDBException as exc:
            if not is_transient(exc):
                raise
            if callable(attempts):
                attempts = _check_attempts(attempts())
            _back_off(exc, attempt, attempts)
            attempt += 1


def _check_attempts(attempts: Any) -> int:
    """A count of attempts, refused unless it is an integer of at least 1.

    Raises:
        ValueError: it is not.
    """
    if not isinstance(attempts, int) or attempts < 1:
        msg = f"attempts must be an integer of at least 1, got {attempts!r}"
        raise ValueError(msg)
    return attempts


def _back_off(exc: PynamoDBException, attempt: int, attempts: int) -> None:
    """After ``attempt`` (counted from 0) met a conflict or throttling (``exc``): wait before resending.

    Raises:
        TransientError: conflicts or throttling outlasted ``attempts``.
    """
    if attempt + 1 >= attempts:
        _telemetry.transient(error_code(exc), attempts)
        msg = f"{TransientError.msg} after {attempts} attempts ({error_code(exc)})"
        raise TransientError(msg, exc) from exc
    _telemetry.retried(error_code(exc), attempt + 1, attempts)
    backoff(attempt)


def _condition_reasons(exc: PynamoDBException) -> list[CancellationReason | None] | None:
    """The reasons when a condition failed (ALL_OLD items included), else None."""
    code = error_code(exc)
    if code == "IdempotentParameterMismatchException":
        msg = f"{IdempotencyMismatch.msg}: {exc.cause}"
        raise IdempotencyMismatch(msg, exc)
    if isinstance(exc, TransactWriteError) and code == "TransactionCanceledException":
        reasons = exc.cancellation_reasons
        if any(r is not None and r.code == "ConditionalCheckFailed" for r in reasons):
            return reasons
        return None
    if code == "ConditionalCheckFailedException":
        # A single-item write: its ALL_OLD item travels on the original botocore error.
        original = exc.cause.__cause__ if exc.cause is not None else None
        item = original.response.get("Item") if isinstance(original, ClientError) else None
        return [CancellationReason(code="ConditionalCheckFailed", raw_item=item)]
    return None


def conditional_check_error(cause: PynamoDBException, operation: str, item: Any = None) -> ClientError:
    """The botocore error a plain PynamoDB write raises for a failed condition, for ``cause``.

    Handlers written for PynamoDB read ``e.cause_response_code == "ConditionalCheckFailedException"``
    (PynamoDB's optimistic-locking docs). A single-item write already carries that error; for a
    transaction the same error is built, its ``__cause__`` the transaction's own.

    Args:
        cause: the PynamoDB error of the request that failed.
        operation: the operation a plain PynamoDB model would have sent (``PutItem``, ...).
        item: the stored item DynamoDB returned (ALL_OLD), if any.
    """
    original = cause.cause
    if isinstance(original, ClientError) and error_code(cause) == "ConditionalCheckFailedException":
        return original
    response: dict[str, Any] = {
        "Error": {"Code": "ConditionalCheckFailedException", "Message": "The conditional request failed"},
    }
    if isinstance(original, ClientError):
        response["ResponseMetadata"] = original.response.get("ResponseMetadata", {})
    if item is not None:
        response["Item"] = dict(item)
    error = ClientError(response, operation)
    error.__cause__ = original
    return error


def _failed_condition(exc: PynamoDBException) -> None:
    """Raise :class:`WriteFailed` when a write's condition failed (the reasons say which)."""
    if isinstance(exc, (TransactWriteError, PutError, UpdateError, DeleteError)):
        reasons = _condition_reasons(exc)
        if reasons is not None:
            raise WriteFailed(reasons, exc) from exc


#: BatchGetItem reads at most 100 keys per request.
MAX_BATCH_GET: Final = 100


def _batch_get(connection: Connection, request: dict[str, Any]) -> dict[str, Any]:
    """One BatchGetItem of ``RequestItems``, errors wrapped as PynamoDB's ``batch_get_item`` wraps them."""
    try:
        data: dict[str, Any] = connection.dispatch("BatchGetItem", {"RequestItems": request})
    except (BotoCoreError, ClientError) as exc:
        msg = f"Failed to batch get items: {exc}"
        raise GetError(msg, exc) from exc
    return data


def batch_read(
    connection: Connection, keys: Sequence[tuple[str, dict[str, Any]]], *, attempts: int
) -> dict[str, list[dict[str, Any]]]:
    """The items stored under ``(table, key)`` pairs, read strongly consistently, by table.

    One BatchGetItem per 100 keys. Keys DynamoDB leaves unprocessed (throttling, the 16 MB
    response limit) are read again with :func:`backoff`; errors worth resending (throttling) are
    resent as the writes' are. Absent keys have no item.

    Raises:
        TransientError: keys were still unprocessed, or requests throttled, after ``attempts``.
    """
    found: dict[str, list[dict[str, Any]]] = {}
    pending = list(keys)
    while pending:
        chunk, pending = pending[:MAX_BATCH_GET], pending[MAX_BATCH_GET:]
        for attempt in range(attempts):
            request: dict[str, Any] = {}
            for table, key in chunk:
                request.setdefault(table, {"Keys": [], "ConsistentRead": True})["Keys"].append(key)
            data = retrying(_batch_get, connection, request, attempts=attempts)
            for table, items in data.get("Responses", {}).items():
                found.setdefault(table, []).extend(items)
            unprocessed = data.get("UnprocessedKeys") or {}
            chunk = [(table, key) for table, spec in unprocessed.items() for key in spec.get("Keys", [])]
            if not chunk:
                break
            if attempt + 1 < attempts:
                backoff(attempt)
        if chunk:
            msg = f"{TransientError.msg}: {len(chunk)} keys unprocessed after {attempts} BatchGetItem requests"
            raise TransientError(msg)
    return found


def send_transaction(
    connection: Connection,
    grouped: Mapping[SentGroup, list[dict[str, Any]]],
    token: str | None,
    *,
    attempts: int = RETRY_ATTEMPTS,
) -> dict[str, Any]:
    """Send items already grouped as PynamoDB sends them, retrying as :func:`send` does.

    For requests that are not one plan (``bulk_save``'s chunks): ``WriteFailed.reasons`` follow
    the groups in the order ``check``, ``delete``, ``put``, ``update``.

    Raises:
        WriteFailed: a condition failed.
        TransientError: conflicts or throttling outlasted ``attempts``.
        IdempotencyMismatch: ``token`` was used for a different request.
    """
    items = [{TRANSACT_KINDS[group]: item} for group in SENT_ORDER for item in grouped.get(group, ())]
    return send(connection, Request(items, "TransactWriteItems", transactional=True), token, attempts=attempts)


def commit_grouped(
    connection: Connection,
    grouped: Mapping[str, Sequence[dict[str, Any]]],
    token: str | None,
    *,
    return_consumed_capacity: str | None = None,
    return_item_collection_metrics: str | None = None,
    attempts: int = RETRY_ATTEMPTS,
) -> dict[str, Any]:
    """Send a ``TransactWrite``'s grouped items through PynamoDB's ``transact_write_items``, resent by :func:`retrying`.

    The request is PynamoDB's own, byte for byte, and so are its errors (``TransactWriteError``
    with the same cause): a cancellation is left to the caller to read.

    Args:
        connection: the transaction's connection.
        grouped: the items by the group they are sent in (``check``, ``delete``, ``put``, ``update``).
        token: the ClientRequestToken, or None.
        return_consumed_capacity: as PynamoDB's ``TransactWrite`` takes it.
        return_item_collection_metrics: as PynamoDB's ``TransactWrite`` takes it.
        attempts: sends in all, after a conflict or throttling.

    Raises:
        TransientError: conflicts or throttling outlasted ``attempts``.
        pynamodb.exceptions.TransactWriteError: any other failure, as PynamoDB raises it.
    """
    groups = [grouped.get(group, ()) for group in SENT_ORDER]
    response: dict[str, Any] = retrying(
        connection.transact_write_items,
        *groups,
        token,
        return_consumed_capacity,
        return_item_collection_metrics,
        attempts=attempts,
    )
    return response


def send(
    connection: Connection,
    request: Request,
    token: str | None,
    *,
    attempts: int | Callable[[], int] = RETRY_ATTEMPTS,
) -> dict[str, Any]:
    """Send ``request`` as PynamoDB sends it, resending conflicts and throttling with the same token.

    Through the connection's ``dispatch`` (its signals, its consumed-capacity default); a
    transaction's arguments in the order of PynamoDB's ``transact_write_items`` (the token, then
    the items); errors wrapped as PynamoDB wraps them; resent as :func:`retrying` resends.

    Args:
        connection: PynamoDB's connection.
        request: what to send.
        token: the transaction's ClientRequestToken (None: a single-item write, or no token).
        attempts: sends in all, or how to read the number when a resend is first considered
            (a model's setting: most writes never need it), after a conflict or throttling.

    Raises:
        WriteFailed: a condition failed (the reasons say which).
        TransientError: conflicts or throttling outlasted ``attempts``.
        IdempotencyMismatch: ``token`` was used for a different request.
        pynamodb.exceptions.PynamoDBException: any other error, as PynamoDB raises it.
        ValueError: ``attempts`` is not an integer of at least 1.
    """
    return retrying(_send_once, connection, request, token, attempts=attempts)


def _send_once(connection: Connection, request: Request, token: str | None) -> dict[str, Any]:
    """Send ``request`` once, as PynamoDB sends it; a failed condition raises :class:`WriteFailed`."""
    try:
        try:
            if request.transactional:
                kwargs: dict[str, Any] = {"ClientRequestToken": token} if token is not None else {}
                kwargs["TransactItems"] = request.items
                response: dict[str, Any] = connection.dispatch("TransactWriteItems", kwargs)
            else:
                response = connection.dispatch(request.operation, dict(request.items[0]))
        except (BotoCoreError, ClientError) as exc:
            # As PynamoDB raises it: the botocore error is the cause and the implicit context.
            raise _wrapped(request, exc)  # noqa: B904
    except PynamoDBException as exc:
        _failed_condition(exc)
        if request.transactional:
            raise_missing_table(connection, request.arguments(), exc)
        raise
    return response


def missing_tables(connection: Connection, names: Sequence[str]) -> tuple[str, ...] | None:
    """Which of ``names`` do not exist, asked with one DescribeTable each; None when it cannot be told.

    For errors only: DynamoDB's ResourceNotFoundException does not say which table it missed.
    """
    missing = []
    for name in names:
        try:
            connection.describe_table(name)
        except TableDoesNotExist:
            missing.append(name)
        except (PynamoDBException, BotoCoreError, ClientError):
            return None  # No DescribeTable permission, or no answer: which is missing is unknown.
    return tuple(missing)


def raise_missing_table(connection: Connection, actions: Sequence[Mapping[str, Any]], exc: PynamoDBException) -> None:
    """Raise :class:`TableNotFound` naming the table a transaction missed, when that is why it failed.

    Args:
        connection: the connection that sent the transaction (DescribeTable asks on it).
        actions: each action's own arguments (``TableName``, ``Key`` or ``Item``, ...).
        exc: the transaction's error.
    """
    if not isinstance(exc, TransactWriteError) or error_code(exc) != "ResourceNotFoundException":
        return
    names = list(dict.fromkeys(arguments["TableName"] for arguments in actions))
    found = missing_tables(connection, names)
    tables = found or tuple(names)
    # A table the transaction wrote only lock items to is a separate lock table.
    records = {arguments["TableName"] for arguments in actions if not _is_lock(arguments)}
    text = "; ".join(
        f"table {table!r} does not exist"
        if table in records
        else f"lock table {table!r} does not exist (Meta.unique_lock_table): create it with "
        "pynamodb_unique.create_lock_table(Model)"
        for table in tables
    )
    if not found and len(names) > 1:
        text = f"one of these: {text}"
    raise TableNotFound(tables, text, exc.cause) from exc


def _is_lock(arguments: Mapping[str, Any]) -> bool:
    """Whether a transaction's action addresses a lock item (its key names a lock key)."""
    key = arguments.get("Key") or arguments.get("Item") or {}
    return any(isinstance(value, dict) and str(value.get("S", "")).startswith(LOCK_PREFIX) for value in key.values())
