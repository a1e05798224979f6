"""Test helpers shared by the test modules: backend description, model binding, request counting.

Import from test modules as ``from _backends import Backend, RequestCounter, bind_model``
(``tests/conftest.py`` puts this directory on ``sys.path``).
"""

from __future__ import annotations

import copy
import json
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

from pynamodb.connection.base import Connection
from pynamodb.connection.table import TableConnection
from pynamodb.models import Model

from pynamodb_unique._model import global_tables
from pynamodb_unique._model.context import context_of

REGION = "us-east-1"

#: Environment variables that would point a test at a real AWS account or endpoint.
AWS_ENV_REMOVED = (
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_SESSION_TOKEN",
    "AWS_SECURITY_TOKEN",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_DYNAMODB",
    "AWS_ROLE_ARN",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
)

M = TypeVar("M", bound=Model)


@dataclass(frozen=True)
class Backend:
    """Where a test's tables live. ``host`` is None for moto (in-process ``mock_aws``)."""

    name: str
    host: str | None


def unique_table_name(prefix: str = "t") -> str:
    """A table name that no other test uses (dynoxide is shared by the whole session)."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def bind_model(
    model_cls: type[M],
    backend: Backend,
    table_name: str | None = None,
    *,
    create: bool = True,
) -> type[M]:
    """Return a subclass of ``model_cls`` whose Meta points at ``table_name`` on ``backend``.

    The subclass keeps the parent's other Meta settings (its Meta inherits the parent's Meta),
    shares the parent's ``DoesNotExist`` (so ``except Parent.DoesNotExist`` still works), and
    gets its own cached PynamoDB connection. With ``create=True`` (default) the table, including
    the model's indexes, is created with ``billing_mode="PAY_PER_REQUEST"`` and waited for.
    """
    if table_name is None:
        table_name = unique_table_name(model_cls.__name__.lower())
    parent_meta = getattr(model_cls, "Meta", None)
    meta_bases = (parent_meta,) if isinstance(parent_meta, type) else ()
    meta = type(
        "Meta",
        meta_bases,
        {"table_name": table_name, "region": REGION, "host": backend.host},
    )
    namespace: dict[str, Any] = {
        "Meta": meta,
        "__module__": model_cls.__module__,
        "__qualname__": model_cls.__qualname__,
    }
    if "DoesNotExist" in vars(model_cls):
        namespace["DoesNotExist"] = model_cls.DoesNotExist
    bound = cast("type[M]", type(model_cls.__name__, (model_cls,), namespace))
    if create:
        bound.create_table(wait=True, billing_mode="PAY_PER_REQUEST")
        described(bound)
    return bound


def described(model: type[Model]) -> None:
    """Make the library's once-per-table DescribeTable (its MRSC check) now, as part of the set-up.

    A test counting a write's requests then counts what every write sends, not what only a
    process's first write to a table adds (tests/test_global_tables.py counts that).
    """
    context = context_of(model)
    if context is not None and context.planner.constraints:
        context.write_locks()


def undescribed(model: type[Model]) -> None:
    """Forget every table the library described, and ``model``'s check: its next write describes anew."""
    global_tables._described.clear()
    context = context_of(model)
    if context is not None:
        context.forget_locks()


@dataclass
class Call:
    """One DynamoDB API call as sent on the wire (``params`` is the decoded JSON body, ``body`` its bytes)."""

    operation: str
    params: dict[str, Any] = field(default_factory=dict)
    body: bytes = b""


def _client_of(target: Any) -> Any:
    """Botocore client behind a model class, TableConnection, Connection or a client itself."""
    if isinstance(target, type) and issubclass(target, Model):
        target = target._get_connection()
    if isinstance(target, TableConnection):
        target = target.connection
    if isinstance(target, Connection):
        return target.client
    if hasattr(target, "meta") and hasattr(target.meta, "events"):
        return target
    raise TypeError(f"RequestCounter cannot watch {target!r}")


class RequestCounter:
    """Context manager recording the DynamoDB API calls made through PynamoDB.

    ``RequestCounter(Model)`` (or several models / TableConnections / Connections / botocore
    clients) watches those connections' botocore clients. ``RequestCounter()`` with no target
    watches every PynamoDB ``Connection`` in the process while active (it hooks the
    ``Connection.client`` property), e.g. for connections the library creates itself.

    PynamoDB 6.1 creates a connection's botocore client lazily, once, and shares it between
    threads (only the botocore session is thread-local), so calls from any thread are seen.

    Recorded per logical API call (``before-call`` event, once per ``_make_api_call``):
    ``calls`` (list of :class:`Call`), ``operations`` (e.g. ``["TransactWriteItems"]``).
    ``attempts`` counts HTTP sends (``before-send`` event), so botocore retries show up there.
    """

    _BEFORE_CALL = "before-call.dynamodb"
    _BEFORE_SEND = "before-send.dynamodb"

    def __init__(self, *targets: Any) -> None:
        self._targets = targets
        self._lock = threading.Lock()
        self._key = f"request-counter-{uuid.uuid4().hex}"
        self._clients: list[Any] = []
        self._orig_client_prop: Any = None
        self.calls: list[Call] = []
        self.attempts = 0

    # --- recording -------------------------------------------------------------------------
    def _on_call(self, model: Any, params: dict[str, Any], **_: Any) -> None:
        body = params.get("body") or b"{}"
        try:
            decoded = json.loads(body)
        except (TypeError, ValueError):
            decoded = {}
        raw = body if isinstance(body, bytes) else str(body).encode()
        with self._lock:
            self.calls.append(Call(model.name, decoded, raw))

    def _on_send(self, **_: Any) -> None:
        with self._lock:
            self.attempts += 1

    def _attach(self, client: Any) -> None:
        with self._lock:
            if any(c is client for c in self._clients):
                return
            self._clients.append(client)
        client.meta.events.register(self._BEFORE_CALL, self._on_call, unique_id=self._key + "-call")
        # first: moto answers in the (middle-priority) before-send handler and stops the chain
        client.meta.events.register_first(self._BEFORE_SEND, self._on_send, unique_id=self._key + "-send")

    # --- context manager -------------------------------------------------------------------
    def __enter__(self) -> RequestCounter:
        if self._targets:
            for target in self._targets:
                self._attach(_client_of(target))
        else:
            orig = Connection.__dict__["client"]
            self._orig_client_prop = orig

            def client(conn: Connection) -> Any:
                c = orig.fget(conn)
                self._attach(c)
                return c

            Connection.client = property(client, doc=orig.__doc__)  # type: ignore[method-assign,assignment]
        return self

    def __exit__(self, *exc: object) -> None:
        if self._orig_client_prop is not None:
            Connection.client = self._orig_client_prop  # type: ignore[method-assign]
            self._orig_client_prop = None
        for client in self._clients:
            client.meta.events.unregister(self._BEFORE_CALL, unique_id=self._key + "-call")
            client.meta.events.unregister(self._BEFORE_SEND, unique_id=self._key + "-send")
        self._clients.clear()

    # --- queries ---------------------------------------------------------------------------
    @property
    def operations(self) -> list[str]:
        with self._lock:
            return [c.operation for c in self.calls]

    def count(self, operation: str | None = None) -> int:
        """Number of calls, optionally only of one operation (e.g. ``"TransactWriteItems"``)."""
        ops = self.operations
        return len(ops) if operation is None else ops.count(operation)

    def params(self, operation: str) -> list[dict[str, Any]]:
        """Deep copies of the request params of every call of ``operation``, in order."""
        with self._lock:
            return [copy.deepcopy(c.params) for c in self.calls if c.operation == operation]

    def reset(self) -> None:
        with self._lock:
            self.calls.clear()
            self.attempts = 0


def race(calls: list[Callable[[], object]]) -> list[Any]:
    """Run the calls in threads released together; return each call's result or exception."""
    barrier = threading.Barrier(len(calls))
    outcomes: list[Any] = [None] * len(calls)

    def run(i: int) -> None:
        barrier.wait()
        try:
            outcomes[i] = calls[i]()
        except Exception as exc:  # noqa: BLE001 - every outcome is asserted on.
            outcomes[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return outcomes
