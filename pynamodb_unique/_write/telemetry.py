"""Logging and OpenTelemetry: one span per library write, counters, and the library's logger.

Logs go to the ``pynamodb_unique`` logger: DEBUG each request sent, INFO re-plans and retries,
WARNING a :class:`StaleWrite` or :class:`TransientError` raised. No record carries a value: only
model, operation and constraint names, item counts and error codes (a hashed constraint's
plaintext, or a lock key holding a value, never reaches a log or a span).

OpenTelemetry (the ``otel`` extra: ``opentelemetry-api``) is imported on the first write. Without
it, or with neither a tracer nor a meter provider set, and with DEBUG logs off, a write costs one
check (:func:`watch`) and builds nothing. With a provider, spans and counters go through the API's
tracer and meter, as OpenTelemetry asks of a library; a provider set at any time is used from the
next write on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any, Final, TypeVar

from .._core.outcome import WriteFailed
from ..exceptions import ConditionFailed, StaleWrite, TransientError, UniqueViolation

if TYPE_CHECKING:
    from types import TracebackType

    from opentelemetry.metrics import Counter
    from opentelemetry.trace import Span, Tracer
    from pynamodb.models import Model

    from ..exceptions import Violation

logger: Final = logging.getLogger("pynamodb_unique")

_T = TypeVar("_T")

#: The instrumentation scope of spans and counters.
SCOPE: Final = "pynamodb_unique"
SPAN_PREFIX: Final = "pynamodb_unique."
VIOLATIONS: Final = "pynamodb_unique.violations"
STALE_WRITES: Final = "pynamodb_unique.stale_writes"
RETRIES: Final = "pynamodb_unique.retries"
CONSUMED_WCU: Final = "pynamodb_unique.consumed_wcu"


class _OTel:
    """The OpenTelemetry API, imported once: the library's tracer and counters.

    Both come from the API's global ``get_tracer`` / ``get_meter``, which answer proxies until a
    provider is set and the provider's own from then on: a provider set at any time, before or
    after the first write, gets the very next write, and nothing here is looked up again.
    """

    def __init__(self) -> None:
        from opentelemetry import metrics, trace  # noqa: PLC0415 - optional: the otel extra.
        from opentelemetry.metrics import _internal as metrics_api  # noqa: PLC0415 - as above.

        self.trace = trace
        self._metrics_api = metrics_api
        version = _version()
        self.tracer: Tracer = trace.get_tracer(SCOPE, version)
        meter = metrics.get_meter(SCOPE, version)
        self.violations: Counter = meter.create_counter(VIOLATIONS, unit="{violation}", description="Unique violations")
        self.stale_writes: Counter = meter.create_counter(STALE_WRITES, unit="{write}", description="StaleWrite raised")
        self.retries: Counter = meter.create_counter(RETRIES, unit="{retry}", description="Requests resent")
        self.consumed: Counter = meter.create_counter(
            CONSUMED_WCU, unit="{WCU}", description="Write capacity consumed by the library's writes"
        )

    def recording(self) -> bool:
        """Whether a tracer or meter provider is set (until one is, spans and counters record nothing).

        Read from the globals the API's proxy tracer and meter read on each call (``get_tracer``
        above loaded a provider named by the environment); ``get_tracer_provider()`` would look up
        an environment variable on every write. An API without them: assume a provider is set.
        """
        tracer_provider = getattr(self.trace, "_TRACER_PROVIDER", self)
        return tracer_provider is not None or getattr(self._metrics_api, "_METER_PROVIDER", self) is not None


def _version() -> str:
    """The library's version for the instrumentation scope ("" when it is not installed)."""
    try:
        return version("pynamodb-unique")
    except PackageNotFoundError:
        return ""


_UNSET: Final = object()
_otel_state: Any = _UNSET


def otel() -> _OTel | None:
    """The OpenTelemetry facade, or None when ``opentelemetry-api`` is not installed."""
    global _otel_state  # noqa: PLW0603 - imported once, on first use.
    if _otel_state is _UNSET:
        try:
            _otel_state = _OTel()
        except ImportError:
            _otel_state = None
    state: _OTel | None = _otel_state
    return state


#: The write being traced in this thread (or task), for the retries made inside it.
_current: ContextVar[Write | None] = ContextVar("pynamodb_unique_write", default=None)


class Write:
    """One observed library write: its span (when recorded), its DEBUG logs and what it consumed.

    Made by :func:`watch` when something may observe writes; enter it with ``with`` (or call
    :meth:`start`, then :meth:`end` or :meth:`ended`). The span's attributes, what the write did,
    are set when it ends.
    """

    __slots__ = (
        "_scope",
        "_token",
        "debug",
        "facade",
        "items",
        "model",
        "operation",
        "plans",
        "retries",
        "span",
        "violated",
        "wcu",
    )

    def __init__(self, facade: _OTel | None, operation: str, model: str, *, debug: bool) -> None:
        self.facade = facade
        self.operation = operation
        self.model = model
        self.debug = debug
        self.plans = 0
        self.retries = 0
        self.items = 0
        self.wcu: float | None = None
        #: Constraint names a cancelled request violated, when its error does not carry them.
        self.violated: list[str] = []
        self.span: Span | None = None
        self._scope: Any = None
        if facade is not None:
            span = facade.tracer.start_span(
                SPAN_PREFIX + operation,
                attributes={"pynamodb_unique.model": model, "pynamodb_unique.operation": operation},
            )
            # A tracer with no provider behind it answers a non-recording span: nothing to end.
            if span.is_recording():
                self.span = span
                # The exception is not recorded as an event: its message may hold a value.
                self._scope = facade.trace.use_span(
                    span, end_on_exit=False, record_exception=False, set_status_on_exception=False
                )
        self._token: Any = None

    def __enter__(self) -> Write:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.end(exc)

    def start(self) -> None:
        """Begin the write (what entering it with ``with`` does): its span becomes the current one."""
        if self._scope is not None:
            self._scope.__enter__()
        self._token = _current.set(self)

    def ended(self, result: _T) -> _T:
        """End the write, which returned ``result``; return it."""
        self.end(None)
        return result

    def end(self, exc: BaseException | None) -> None:
        """End the write (what leaving the ``with`` block does), with the exception it raised, if any."""
        _current.reset(self._token)
        span = self.span
        if span is None:
            return
        span.set_attribute("pynamodb_unique.items", self.items)
        span.set_attribute("pynamodb_unique.plans", self.plans)
        span.set_attribute("pynamodb_unique.retries", self.retries)
        if self.wcu is not None:
            span.set_attribute(CONSUMED_WCU, self.wcu)
        outcome = _outcome(exc)
        span.set_attribute("pynamodb_unique.outcome", outcome)
        names = _violated(exc) or sorted(set(self.violated))
        if names:
            span.set_attribute("pynamodb_unique.violated_constraints", names)
        if exc is not None:
            span.set_status(_error_status(exc))
            span.set_attribute("error.type", type(exc).__qualname__)
        self._scope.__exit__(
            type(exc) if exc is not None else None, exc, exc.__traceback__ if exc is not None else None
        )
        span.end()

    def sending(self, request: str, items: int, plan: int) -> None:
        """Count one request of ``items`` items (a plan, or a chunk) and log it at DEBUG."""
        self.plans += 1
        self.items = items
        if self.debug:
            logger.debug("%s %s: %s of %d items (plan %d)", self.model, self.operation, request, items, plan)

    def consumed(self, response: Mapping[str, Any] | None) -> None:
        """Record the write capacity DynamoDB reports consumed (``ConsumedCapacity``).

        PynamoDB asks every request for ``ReturnConsumedCapacity: TOTAL``; the answer is a dict for
        a single-item write and a list (one per table) for TransactWriteItems.
        """
        units = capacity_units(response.get("ConsumedCapacity")) if response is not None else None
        if units is None:
            return
        if self.span is not None:
            self.wcu = (self.wcu or 0.0) + units
        if self.facade is not None:
            self.facade.consumed.add(units, {"pynamodb_unique.operation": self.operation})


def _error_status(exc: BaseException) -> Any:
    """An ERROR status naming the exception's class only (its message may hold a value)."""
    from opentelemetry.trace import Status, StatusCode  # noqa: PLC0415 - optional: the otel extra.

    return Status(StatusCode.ERROR, type(exc).__name__)


def _outcome(exc: BaseException | None) -> str:

    if exc is None:
        return "ok"
    for kind, name in (
        (UniqueViolation, "violation"),
        (StaleWrite, "stale"),
        (TransientError, "transient"),
        (ConditionFailed, "condition_failed"),
        # A bulk_save chunk cancelled by a condition: its records are settled after the span ends.
        (WriteFailed, "condition_failed"),
    ):
        if isinstance(exc, kind):
            return name
    return "error"


def _violated(exc: BaseException | None) -> list[str]:
    violations: Iterable[Violation] = getattr(exc, "violations", None) or ()
    return sorted({v.constraint for v in violations})


#: Called with the models of each library write as it starts (:func:`listening`); empty unless
#: something listens (the pytest plugin's audit), so a write pays one check.
_listeners: list[Callable[[Iterable[type[Model]]], None]] = []


@contextmanager
def listening(callback: Callable[[Iterable[type[Model]]], None]) -> Iterator[None]:
    """Call ``callback`` with the models each library write writes, as it starts, until the block ends.

    Every write of a unique model (save, update, delete, ``TransactWrite``, ``bulk_save``) is
    reported, whether it then succeeds or not.
    """
    _listeners.append(callback)
    try:
        yield
    finally:
        _listeners.remove(callback)


def watch(operation: str, model: str, written: type[Model] | Iterable[type[Model]] = ()) -> Write | None:
    """The write to report to, or None when nothing can observe writes (one check per write).

    Without OpenTelemetry, or before a tracer or meter provider is set, only the library's logger
    enabled for DEBUG observes writes (each request logged). Once a provider is set (whenever that
    is), every write is reported to the API's tracer and meter. Listeners (:func:`listening`) are
    told the models ``written``.
    """
    if _listeners:
        models = (written,) if isinstance(written, type) else tuple(written)
        for listener in list(_listeners):
            listener(models)
    facade = _otel_state if _otel_state is not _UNSET else otel()
    debug = logger.isEnabledFor(logging.DEBUG)
    if facade is None or not facade.recording():
        return Write(None, operation, model, debug=True) if debug else None
    return Write(facade, operation, model, debug=debug)


def replanned(what: str, operation: str, plan: int, limit: int) -> None:
    """Log a re-plan at INFO: the stored record was not as assumed."""
    if logger.isEnabledFor(logging.INFO):
        logger.info("%s %s: the stored record differs; re-planning (plan %d of %d)", what, operation, plan, limit)


def retried(code: str | None, attempt: int, attempts: int) -> None:
    """Attempt ``attempt`` (from 1) met a conflict or throttling and is resent: log at INFO, count it."""
    if logger.isEnabledFor(logging.INFO):
        logger.info("attempt %d of %d failed with %s; resending", attempt, attempts, code)
    write = _current.get()
    if write is not None:
        write.retries += 1
    facade = otel()
    if facade is not None:
        facade.retries.add(1, {"pynamodb_unique.error_code": code or "unknown"})


def transient(code: str | None, attempts: int) -> None:
    """Conflicts or throttling outlasted the attempts: log at WARNING."""
    logger.warning("TransientError: %s after %d attempts", code, attempts)


def stale(what: str, operation: str, reason: str) -> None:
    """A StaleWrite is raised: log at WARNING, count it. ``reason`` must hold no value."""
    logger.warning("StaleWrite: %s %s: %s", what, operation, reason)
    facade = otel()
    if facade is not None:
        facade.stale_writes.add(1, {"pynamodb_unique.operation": operation})


def violated(violations: Iterable[Violation]) -> None:
    """Count violations per constraint name (never their values)."""
    facade = otel()
    if facade is None:
        return
    for v in violations:
        facade.violations.add(1, {"pynamodb_unique.constraint": v.constraint})


def capacity_units(capacity: Any) -> float | None:
    """The total ``CapacityUnits`` of a ``ConsumedCapacity`` answer (a dict or a list), or None."""
    entries = capacity if isinstance(capacity, list) else [capacity]
    units = [e["CapacityUnits"] for e in entries if isinstance(e, dict) and "CapacityUnits" in e]
    return float(sum(units)) if units else None
