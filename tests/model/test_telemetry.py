"""Telemetry: the ``pynamodb_unique`` logger, a span per library write, counters, consumed capacity.

Spans and metrics are read with the OpenTelemetry SDK's in-memory exporter and reader, set once
for the session (the SDK refuses to replace a global provider); each test clears the spans and
reads the counters' change over the test.
"""

from __future__ import annotations

import importlib.metadata
import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from _backends import Backend, bind_model
from botocore.awsrequest import AWSResponse
from models import Account
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pynamodb.attributes import UnicodeAttribute
from pynamodb.models import Model

from pynamodb_unique import (
    StaleWrite,
    TransactWrite,
    TransientError,
    UniqueAttribute,
    UniqueMixin,
    UniqueViolation,
    bulk_save,
)
from pynamodb_unique._write import engine as _engine
from pynamodb_unique._write import send as _send
from pynamodb_unique._write import telemetry as _telemetry

ADA = "ada@lovelace.io"
SSN = "078-05-1120"


class Patient(UniqueMixin, Model):
    """A hashed constraint: its value must never reach a log or a span."""

    class Meta:
        table_name = "patients"
        region = "us-east-1"
        unique_secret = b"s" * 32

    pk = UnicodeAttribute(hash_key=True)
    ssn = UniqueAttribute(UnicodeAttribute(null=True), hashed=True)


@dataclass
class OTel:
    spans: InMemorySpanExporter
    reader: InMemoryMetricReader

    def finished(self, name: str) -> list[ReadableSpan]:
        return [s for s in self.spans.get_finished_spans() if s.name == name]

    def counts(self) -> dict[tuple[str, frozenset[tuple[str, Any]]], float]:
        data = self.reader.get_metrics_data()
        found: dict[tuple[str, frozenset[tuple[str, Any]]], float] = {}
        for resource in data.resource_metrics if data is not None else ():
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    for point in metric.data.data_points:
                        found[metric.name, frozenset((point.attributes or {}).items())] = point.value  # type: ignore[union-attr]
        return found


@pytest.fixture(scope="session")
def _otel_providers() -> OTel:
    """The process's OpenTelemetry providers, set once: spans and metrics kept in memory."""
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    trace.set_tracer_provider(tracer_provider)
    reader = InMemoryMetricReader()
    metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
    assert trace.get_tracer_provider() is tracer_provider, "another tracer provider was set first"
    return OTel(spans, reader)


@pytest.fixture
def otel(_otel_providers: OTel) -> OTel:
    _otel_providers.spans.clear()
    return _otel_providers


class Delta:
    """The change of every counter since it was made."""

    def __init__(self, otel: OTel) -> None:
        self._otel = otel
        self._before = otel.counts()

    def __call__(self, name: str, **attributes: Any) -> float:
        key = (name, frozenset(attributes.items()))
        return self._otel.counts().get(key, 0) - self._before.get(key, 0)


@pytest.fixture
def no_sleep(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_send, "sleep", lambda _: None)


@pytest.fixture
def logs(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    with caplog.at_level(logging.DEBUG, logger="pynamodb_unique"):
        yield caplog


def ours(caplog: pytest.LogCaptureFixture, level: int) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "pynamodb_unique" and r.levelno == level]


def answer_conflicts(model: type[Model], operation: str, times: int) -> None:
    """The next ``times`` ``operation`` calls are cancelled by a TransactionConflict, without any HTTP send."""
    left = [times]

    def handler(model: Any, params: dict[str, Any], **_: Any) -> tuple[AWSResponse, dict[str, Any]] | None:
        if model.name != operation or left[0] <= 0:
            return None
        left[0] -= 1
        count = len(json.loads(params.get("body") or b"{}").get("TransactItems", []))
        reasons = [{"Code": "TransactionConflict", "Message": "ongoing"}] + [{"Code": "None"}] * (count - 1)
        body = {
            "ResponseMetadata": {"HTTPStatusCode": 400, "HTTPHeaders": {}},
            "Error": {"Code": "TransactionCanceledException", "Message": "Transaction cancelled"},
            "CancellationReasons": reasons,
        }
        return AWSResponse("https://dynamodb.invalid", 400, {}, None), body

    model._get_connection().connection.client.meta.events.register_last("before-call.dynamodb", handler)


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


# --- spans -----------------------------------------------------------------------------------


@pytest.mark.backends("moto", "dynoxide")
def test_save__one_span_with_items_plans_and_capacity(backend: Backend, otel: OTel) -> None:
    """A create is one span: model, operation, its three items, one plan, no retry, ok."""
    model = bind_model(Account, backend)
    delta = Delta(otel)
    model(pk="a1", email=ADA, username="ada").save()
    (span,) = otel.finished("pynamodb_unique.save")
    got = attrs(span)
    assert {k: got[k] for k in got if k != "pynamodb_unique.consumed_wcu"} == {
        "pynamodb_unique.model": "Account",
        "pynamodb_unique.operation": "save",
        "pynamodb_unique.items": 3,
        "pynamodb_unique.plans": 1,
        "pynamodb_unique.retries": 0,
        "pynamodb_unique.outcome": "ok",
    }
    if backend.name == "dynoxide":
        # dynoxide reports a transaction's capacity (2 WCU per item); moto reports an empty list.
        assert got["pynamodb_unique.consumed_wcu"] == 6.0
        assert delta("pynamodb_unique.consumed_wcu", **{"pynamodb_unique.operation": "save"}) == 6.0
    else:
        assert "pynamodb_unique.consumed_wcu" not in got


def test_update_and_delete__spans_named_by_method(backend: Backend, otel: OTel) -> None:
    """A plain update (no unique value changes), a unique update and a delete: one span each, by method."""
    model = bind_model(Account, backend)
    account = model(pk="a1", email=ADA, username="ada")
    account.save()
    account.update(actions=[model.bio.set("hi")])
    account.update(actions=[model.username.set("countess")])
    account.delete()
    updates = otel.finished("pynamodb_unique.update")
    assert [attrs(s)["pynamodb_unique.items"] for s in updates] == [1, 3]
    (delete,) = otel.finished("pynamodb_unique.delete")
    assert attrs(delete)["pynamodb_unique.items"] == 3
    assert all(attrs(s)["pynamodb_unique.outcome"] == "ok" for s in [*updates, delete])
    # A single-item write reports its capacity on both backends.
    assert attrs(updates[0])["pynamodb_unique.consumed_wcu"] > 0


def test_save__violation_names_constraint_in_span_and_counter(backend: Backend, otel: OTel) -> None:
    """A taken value: outcome violation, the constraint's name on the span, counted per constraint."""
    model = bind_model(Account, backend)
    model(pk="a1", email=ADA, username="ada").save()
    delta = Delta(otel)
    otel.spans.clear()
    with pytest.raises(UniqueViolation):
        model(pk="a2", email=ADA, username="other").save()
    (span,) = otel.finished("pynamodb_unique.save")
    assert attrs(span)["pynamodb_unique.outcome"] == "violation"
    assert attrs(span)["pynamodb_unique.violated_constraints"] == ("EMAIL",)
    assert span.status.status_code == trace.StatusCode.ERROR
    assert delta("pynamodb_unique.violations", **{"pynamodb_unique.constraint": "EMAIL"}) == 1
    assert delta("pynamodb_unique.violations", **{"pynamodb_unique.constraint": "HANDLE"}) == 0


def test_stale_instance__replan_logged_and_counted(
    backend: Backend, otel: OTel, logs: pytest.LogCaptureFixture
) -> None:
    """A stale instance: two plans on the span, the re-plan at INFO, both requests at DEBUG."""
    model = bind_model(Account, backend)
    model(pk="a1", email=ADA, username="ada").save()
    stale = model.get("a1", "PROFILE")
    fresh = model.get("a1", "PROFILE")
    fresh.email = "fresh@x.io"
    fresh.save()
    otel.spans.clear()
    logs.clear()
    stale.username = "countess"
    stale.save()
    (span,) = otel.finished("pynamodb_unique.save")
    assert (attrs(span)["pynamodb_unique.plans"], attrs(span)["pynamodb_unique.outcome"]) == (2, "ok")
    assert ours(logs, logging.INFO) == ["Account save: the stored record differs; re-planning (plan 2 of 4)"]
    debug = ours(logs, logging.DEBUG)
    assert len(debug) == 2
    assert debug[0].startswith("Account save: TransactWriteItems of ")
    assert debug[1].endswith("(plan 2)")


def test_stale_write__warning_outcome_and_counter(
    backend: Backend, otel: OTel, logs: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """StaleWrite (one plan allowed): a WARNING, outcome stale, counted."""
    model = bind_model(Account, backend)
    model(pk="a1", email=ADA, username="ada").save()
    stale = model.get("a1", "PROFILE")
    fresh = model.get("a1", "PROFILE")
    fresh.email = "fresh@x.io"
    fresh.save()
    monkeypatch.setattr(_engine, "MAX_PLANS", 1)
    delta = Delta(otel)
    otel.spans.clear()
    stale.username = "countess"
    with pytest.raises(StaleWrite):
        stale.save()
    (span,) = otel.finished("pynamodb_unique.save")
    assert attrs(span)["pynamodb_unique.outcome"] == "stale"
    assert ours(logs, logging.WARNING) == ["StaleWrite: Account save: the record kept changing (1 plans)"]
    assert ours(logs, logging.INFO) == []
    assert delta("pynamodb_unique.stale_writes", **{"pynamodb_unique.operation": "save"}) == 1


def test_conflicts__retries_on_span_counter_and_info_logs(
    backend: Backend, otel: OTel, logs: pytest.LogCaptureFixture, no_sleep: None
) -> None:
    """Two injected TransactionConflicts: two retries on the span, counted, logged at INFO."""
    model = bind_model(Account, backend)
    answer_conflicts(model, "TransactWriteItems", 2)
    delta = Delta(otel)
    model(pk="a1", email=ADA, username="ada").save()
    (span,) = otel.finished("pynamodb_unique.save")
    assert (attrs(span)["pynamodb_unique.retries"], attrs(span)["pynamodb_unique.plans"]) == (2, 1)
    assert delta("pynamodb_unique.retries", **{"pynamodb_unique.error_code": "TransactionCanceledException"}) == 2
    assert ours(logs, logging.INFO) == [
        f"attempt {n} of {_send.RETRY_ATTEMPTS} failed with TransactionCanceledException; resending" for n in (1, 2)
    ]


def test_conflicts__transient_error_warning_and_outcome(
    backend: Backend, otel: OTel, logs: pytest.LogCaptureFixture, no_sleep: None
) -> None:
    """Conflicts outlasting the attempts: TransientError, a WARNING, outcome transient."""
    model = bind_model(Account, backend)
    answer_conflicts(model, "TransactWriteItems", _send.RETRY_ATTEMPTS)
    with pytest.raises(TransientError):
        model(pk="a1", email=ADA, username="ada").save()
    (span,) = otel.finished("pynamodb_unique.save")
    assert attrs(span)["pynamodb_unique.outcome"] == "transient"
    assert attrs(span)["pynamodb_unique.retries"] == _send.RETRY_ATTEMPTS - 1
    assert ours(logs, logging.WARNING) == [
        f"TransientError: TransactionCanceledException after {_send.RETRY_ATTEMPTS} attempts"
    ]


def test_transact_write__span_and_violation(backend: Backend, otel: OTel, logs: pytest.LogCaptureFixture) -> None:
    """A TransactWrite commit is one span with every item; a violation in it is counted."""
    model = bind_model(Account, backend)
    with TransactWrite() as tx:
        tx.save(model(pk="a1", email=ADA, username="ada"))
        tx.save(model(pk="a2", email="b@x.io", username="bob"))
    (span,) = otel.finished("pynamodb_unique.transact_write")
    assert attrs(span)["pynamodb_unique.items"] == 6
    assert attrs(span)["pynamodb_unique.outcome"] == "ok"
    assert ours(logs, logging.DEBUG) == ["Account transact_write: TransactWriteItems of 6 items (plan 1)"]
    delta = Delta(otel)
    otel.spans.clear()
    with pytest.raises(UniqueViolation), TransactWrite() as tx:
        tx.save(model(pk="a3", email="c@x.io", username="ada"))
    (span,) = otel.finished("pynamodb_unique.transact_write")
    assert attrs(span)["pynamodb_unique.violated_constraints"] == ("HANDLE",)
    assert delta("pynamodb_unique.violations", **{"pynamodb_unique.constraint": "HANDLE"}) == 1


def test_bulk_save__span_per_chunk_and_violations_counted(backend: Backend, otel: OTel) -> None:
    """bulk_save: a span per chunk sent; a value taken in the table is counted as a violation."""
    model = bind_model(Account, backend)
    model(pk="a0", email=ADA, username="ada").save()
    delta = Delta(otel)
    otel.spans.clear()
    result = bulk_save([model(pk="a1", email=ADA, username="x1"), model(pk="a2", email="b@x.io", username="x2")])
    assert len(result.saved) == 1
    chunks = otel.finished("pynamodb_unique.bulk_save")
    assert chunks
    assert {attrs(s)["pynamodb_unique.model"] for s in chunks} == {"Account"}
    assert delta("pynamodb_unique.violations", **{"pynamodb_unique.constraint": "EMAIL"}) == 1
    # The cancelled chunk's span names the constraint its records violated.
    cancelled = [attrs(s) for s in chunks if attrs(s)["pynamodb_unique.outcome"] == "condition_failed"]
    assert [a["pynamodb_unique.violated_constraints"] for a in cancelled] == [("EMAIL",)]


# --- values stay out ------------------------------------------------------------------------


def test_hashed_value__never_in_logs_or_spans(
    backend: Backend, otel: OTel, logs: pytest.LogCaptureFixture, no_sleep: None
) -> None:
    """A hashed constraint's value appears in no library log record and no span, whatever happens."""
    model = bind_model(Patient, backend)
    model(pk="p1", ssn=SSN).save()
    answer_conflicts(model, "TransactWriteItems", 1)
    with pytest.raises(UniqueViolation):
        model(pk="p2", ssn=SSN).save()
    stale = model.get("p1")
    fresh = model.get("p1")
    fresh.ssn = SSN + "-2"
    fresh.save()
    stale.ssn = SSN + "-3"
    stale.save()
    messages = ours(logs, logging.DEBUG) + ours(logs, logging.INFO) + ours(logs, logging.WARNING)
    assert any("re-planning" in m for m in messages)
    assert any("resending" in m for m in messages)
    assert not [m for m in messages if SSN in m]
    spans = otel.spans.get_finished_spans()
    assert {attrs(s)["pynamodb_unique.outcome"] for s in spans} == {"ok", "violation"}
    exported = json.dumps([json.loads(s.to_json()) for s in spans])
    assert "Patient" in exported
    assert SSN not in exported


# --- OpenTelemetry absent -------------------------------------------------------------------


def test_otel_absent__writes_work_and_record_nothing(
    backend: Backend, otel: OTel, logs: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without opentelemetry importable: no span, no counter, writes and logs as before."""
    monkeypatch.setattr(_telemetry, "_otel_state", _telemetry._UNSET)
    monkeypatch.setitem(sys.modules, "opentelemetry", None)  # `import opentelemetry` raises ImportError.
    model = bind_model(Account, backend)
    delta = Delta(otel)
    model(pk="a1", email=ADA, username="ada").save()
    with pytest.raises(UniqueViolation):
        model(pk="a2", email=ADA, username="other").save()
    assert _telemetry.otel() is None
    assert model.get("a1", "PROFILE").email == ADA
    assert otel.spans.get_finished_spans() == ()
    assert delta("pynamodb_unique.violations", **{"pynamodb_unique.constraint": "EMAIL"}) == 0
    assert len(ours(logs, logging.DEBUG)) == 2


def test_no_tracer_provider__no_span_built(monkeypatch: pytest.MonkeyPatch, otel: OTel) -> None:
    """With no tracer provider behind the API's tracer and DEBUG logs off, a write builds no span."""
    facade = _telemetry.otel()
    assert facade is not None
    with monkeypatch.context() as patched:
        # What the API's proxy tracer answers with until a provider is set.
        patched.setattr(facade, "tracer", trace.NoOpTracer())
        watched = _telemetry.watch("save", "Account")
        assert watched is not None
        assert watched.span is None
        with watched:
            pass
    assert otel.spans.get_finished_spans() == ()
    watched = _telemetry.watch("save", "Account")
    assert watched is not None
    with watched:
        pass
    assert [s.name for s in otel.spans.get_finished_spans()] == ["pynamodb_unique.save"]


def test_meter_provider_only__capacity_counted_without_span(
    backend: Backend, otel: OTel, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A meter provider without a tracer provider: counters, and no span."""
    facade = _telemetry.otel()
    assert facade is not None
    monkeypatch.setattr(facade, "tracer", trace.NoOpTracer())
    model = bind_model(Account, backend)
    delta = Delta(otel)
    account = model(pk="a1", email=ADA, username="ada")
    account.save()
    # A single-item write reports its capacity on both backends.
    account.update(actions=[model.bio.set("poet")])
    assert otel.spans.get_finished_spans() == ()
    assert delta("pynamodb_unique.consumed_wcu", **{"pynamodb_unique.operation": "update"}) > 0


def test_debug_logs_only__each_request_logged(
    backend: Backend, logs: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without OpenTelemetry, DEBUG logs alone make a write observed: each request is logged."""
    monkeypatch.setattr(_telemetry, "_otel_state", None)
    model = bind_model(Account, backend)
    account = model(pk="a1", email=ADA, username="ada")
    account.save()
    account.update(actions=[model.bio.set("poet")])
    account.delete()
    assert ours(logs, logging.DEBUG) == [
        "Account save: TransactWriteItems of 3 items (plan 1)",
        "Account update: UpdateItem of 1 items (plan 1)",
        "Account delete: TransactWriteItems of 3 items (plan 1)",
    ]
    logs.set_level(logging.INFO, logger="pynamodb_unique")
    assert _telemetry.watch("save", "Account") is None


def test_scope__named_and_versioned(otel: OTel, backend: Backend) -> None:
    """Spans carry the library's instrumentation scope: its name and installed version."""
    model = bind_model(Account, backend)
    model(pk="a1", email=ADA, username="ada").save()
    (span,) = otel.finished("pynamodb_unique.save")
    assert span.instrumentation_scope is not None
    assert span.instrumentation_scope.name == "pynamodb_unique"
    assert span.instrumentation_scope.version == importlib.metadata.version("pynamodb-unique")


#: Writes with no provider, then sets the SDK's providers and writes once more, at once (moto).
LATE_PROVIDER = """
import os, sys
sys.path.insert(0, sys.argv[1])
import moto
from models import Account
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pynamodb_unique._write import telemetry

with moto.mock_aws():
    Account.create_table(wait=True, billing_mode="PAY_PER_REQUEST")
    Account(pk="a1", email="a@x.io", username="a").save()
    unobserved = telemetry.watch("save", "Account") is None
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    trace.set_tracer_provider(tracer_provider)
    reader = InMemoryMetricReader()
    metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
    Account(pk="a2", email="b@x.io", username="b").update(actions=[Account.bio.set("late")])
    names = [s.name for s in spans.get_finished_spans()]
    data = reader.get_metrics_data()
    counters = sorted(
        m.name for r in (data.resource_metrics if data else ()) for s in r.scope_metrics for m in s.metrics
    )
    print(unobserved, names, counters)
"""


def test_provider_set_after_writes_began__used_by_the_very_next_write(tmp_path: Any) -> None:
    """In a fresh process, a write before any provider is set observes nothing, and a provider set
    after the first write gets the very next write's span and counters (no interval during which a
    new provider is ignored)."""
    env = {
        **os.environ,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
    }
    env.pop("OTEL_PYTHON_TRACER_PROVIDER", None)
    env.pop("OTEL_PYTHON_METER_PROVIDER", None)
    tests = str(Path(__file__).parents[1])
    done = subprocess.run(  # noqa: S603 - this interpreter, a fixed script.
        [sys.executable, "-c", LATE_PROVIDER, tests], capture_output=True, text=True, env=env, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True ['pynamodb_unique.update'] ['pynamodb_unique.consumed_wcu']"
