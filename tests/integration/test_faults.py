"""Faults injected at the botocore layer: lost connections, lost responses, conflicts, throttling.

Every fault is injected through the model's own botocore client (``client.meta.events``), never by
patching PynamoDB or the library:

- ``before-send``: the request never leaves (``EndpointConnectionError``), or the server answers
  an HTTP-level error that botocore itself retries.
- ``after-call``: the server applied the write, then the response is lost (``ReadTimeoutError``).
- ``needs-retry``: botocore resends a request whose response it got (a lost response it retries
  itself, with the same body and so the same ClientRequestToken). Also used to make botocore retry
  injected faults at once instead of sleeping, the way it would otherwise retry them.
- ``before-call`` (last handler): answer an error without any HTTP send, above botocore's own
  retries, so only the library's retries are seen.

A summary of the faults injected and the outcomes seen is printed at the end of the run.
"""

from __future__ import annotations

import copy
import json
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from _backends import Backend, RequestCounter, bind_model
from _invariant import actual_locks, assert_invariant, raw_items
from botocore.awsrequest import AWSResponse
from botocore.exceptions import ClientError, EndpointConnectionError, ReadTimeoutError
from models import Account
from pynamodb.attributes import UnicodeAttribute
from pynamodb.exceptions import PutError, PynamoDBException, TransactWriteError
from pynamodb.models import Model

from pynamodb_unique import (
    IdempotencyMismatch,
    TransientError,
    UniqueAttribute,
    UniqueConfigError,
    UniqueMixin,
    UniqueViolation,
)
from pynamodb_unique._model.context import ModelContext
from pynamodb_unique._write import send as _send

# Faults reach botocore's HTTP layer: against the real server only.
pytestmark = pytest.mark.backends("dynoxide")

PK = "ACCT#a1f9c3"
ADA = "ada@lovelace.io"
NEW = "countess@lovelace.io"
OTHER = "other@x.io"
ADA_LOCKS = frozenset({f"UNIQ#EMAIL#{ADA}", "UNIQ#HANDLE#ada"})

# --- summary ---------------------------------------------------------------------------------


class _Summary:
    """Counts faults and outcomes; pytest prints them in its terminal summary."""

    def __init__(self) -> None:
        self.faults: Counter[str] = Counter()
        self.outcomes: Counter[str] = Counter()

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.faults and not self.outcomes:
            return
        terminalreporter.write_sep("-", "test_faults: faults injected and outcomes")
        terminalreporter.write_line(f"faults injected: {sum(self.faults.values())}")
        for name, count in sorted(self.faults.items()):
            terminalreporter.write_line(f"  {name}: {count}")
        terminalreporter.write_line(f"outcomes checked: {sum(self.outcomes.values())}")
        for name, count in sorted(self.outcomes.items()):
            terminalreporter.write_line(f"  {name}: {count}")


SUMMARY = _Summary()


@pytest.fixture(scope="module", autouse=True)
def _print_summary(request: pytest.FixtureRequest) -> None:
    plugins = request.config.pluginmanager
    if not plugins.is_registered(SUMMARY):
        plugins.register(SUMMARY, "pynamodb-unique-fault-summary")


# --- injection -------------------------------------------------------------------------------


class _InjectedConnectionError(EndpointConnectionError):
    """A connection failure this file injected (botocore retries it like a real one)."""


class _InjectedReadTimeout(ReadTimeoutError):
    """A lost response this file injected, raised after the server applied the write."""


@dataclass
class Faults:
    """Faults injected into one model's botocore client while the context is active."""

    model: type[Any]
    injected: Counter[str] = field(default_factory=Counter)
    _handlers: list[tuple[str, str]] = field(default_factory=list)
    _forced_resends: int = 0
    _http_errors: set[int] = field(default_factory=set)

    @property
    def client(self) -> Any:
        return self.model._get_connection().connection.client

    @property
    def max_attempts(self) -> int:
        """HTTP attempts botocore makes per API call (PynamoDB configures it)."""
        attempts: int = self.client.meta.config.retries["total_max_attempts"]
        return attempts

    def __enter__(self) -> Faults:
        # Retry injected connection failures at once, as botocore would, but without its backoff sleep.
        self._register("needs-retry.dynamodb", self._retry_now, first=True)
        return self

    def __exit__(self, *exc: object) -> None:
        for event, unique_id in self._handlers:
            self.client.meta.events.unregister(event, unique_id=unique_id)
        self._handlers.clear()
        SUMMARY.faults.update(self.injected)

    def _register(self, event: str, handler: Callable[..., Any], *, first: bool = False, last: bool = False) -> None:
        unique_id = f"faults-{id(self)}-{len(self._handlers)}"
        events = self.client.meta.events
        if first:
            events.register_first(event, handler, unique_id=unique_id)
        elif last:
            events.register_last(event, handler, unique_id=unique_id)
        else:
            events.register(event, handler, unique_id=unique_id)
        self._handlers.append((event, unique_id))

    def _retry_now(
        self, attempts: int, response: Any = None, caught_exception: Exception | None = None, **_: Any
    ) -> int | None:
        if self._forced_resends:
            self._forced_resends -= 1
            return 0
        injected = isinstance(caught_exception, _InjectedConnectionError) or (
            response is not None and id(response[0]) in self._http_errors
        )
        if injected and attempts < self.max_attempts:
            return 0
        return None

    def refuse_connection(self, operation: str) -> None:
        """Every HTTP attempt of ``operation`` fails before the request leaves."""

        def handler(request: Any, **_: Any) -> None:
            self.injected[f"{operation}: connection refused before send (per HTTP attempt)"] += 1
            raise _InjectedConnectionError(endpoint_url=request.url)

        self._register(f"before-send.dynamodb.{operation}", handler, first=True)

    def lose_responses(self, operation: str, times: int = 1) -> None:
        """The next ``times`` successful ``operation`` calls are applied, then their response is lost."""
        left = [times]

        def handler(http_response: Any, **_: Any) -> None:
            if http_response.status_code < 300 and left[0] > 0:
                left[0] -= 1
                self.injected[f"{operation}: response lost after the write applied"] += 1
                raise _InjectedReadTimeout(endpoint_url="https://dynamodb.invalid")

        self._register(f"after-call.dynamodb.{operation}", handler)

    def resend_after_success(self, operation: str) -> None:
        """botocore resends the next successful ``operation`` request (same body, same token)."""
        armed = [True]

        def handler(response: Any = None, **_: Any) -> None:
            if armed[0] and response is not None and response[0].status_code < 300:
                armed[0] = False
                self._forced_resends += 1
                self.injected[f"{operation}: response lost, botocore resent it"] += 1

        # Runs before _retry_now, which answers botocore's question.
        self._register(f"needs-retry.dynamodb.{operation}", handler, first=True)

    def answer_error(self, operation: str, code: str, times: int) -> None:
        """The next ``times`` ``operation`` calls get ``code`` without any HTTP send.

        ``code`` is an error code, or ``TransactionConflict`` for a TransactionCanceledException
        whose first reason is a TransactionConflict. Injected above botocore's retries, so each
        injected error reaches the library once.
        """
        left = [times]

        def handler(model: Any, params: dict[str, Any], **_: Any) -> tuple[AWSResponse, dict[str, Any]] | None:
            if model.name != operation or left[0] <= 0:
                return None
            left[0] -= 1
            self.injected[f"{operation}: {code} answered above botocore's retries"] += 1
            return AWSResponse("https://dynamodb.invalid", 400, {}, None), _error_body(code, params)

        # Last, on the event RequestCounter listens to: it still records the call.
        self._register("before-call.dynamodb", handler, last=True)

    def throttle_over_http(self, operation: str) -> None:
        """Every HTTP attempt of ``operation`` is answered 400 ProvisionedThroughputExceeded.

        botocore retries it as it would a real one. moto would still apply the request (its
        handler runs after this one), so this runs on dynoxide only.
        """

        def handler(request: Any, **_: Any) -> AWSResponse:
            self.injected[f"{operation}: throttled over HTTP (per HTTP attempt)"] += 1
            response = AWSResponse(request.url, 400, {"x-amzn-requestid": "injected"}, None)
            response._content = b'{"__type":"com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException"}'
            self._http_errors.add(id(response))
            return response

        self._register(f"before-send.dynamodb.{operation}", handler, first=True)


def _error_body(code: str, params: dict[str, Any]) -> dict[str, Any]:
    body: dict[str, Any] = {"ResponseMetadata": {"HTTPStatusCode": 400, "HTTPHeaders": {}}}
    if code != "TransactionConflict":
        body["Error"] = {"Code": code, "Message": f"injected {code}"}
        return body
    count = len(json.loads(params.get("body") or b"{}").get("TransactItems", [])) or 1
    reasons = [{"Code": "TransactionConflict", "Message": "Transaction is ongoing for the item"}]
    reasons += [{"Code": "None"}] * (count - 1)
    body["Error"] = {
        "Code": "TransactionCanceledException",
        "Message": "Transaction cancelled, please refer cancellation reasons for specific reasons",
    }
    body["CancellationReasons"] = reasons
    return body


# --- scenarios -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Scenario:
    """One lifecycle operation: how to prepare it, how to run it, what it leaves when it succeeds."""

    name: str
    operation: str
    prepare: Callable[[type[Account]], Account]
    write: Callable[[Account, str | None], object]
    locks_after: frozenset[str]
    record_after: dict[str, Any] | None

    def __str__(self) -> str:
        return self.name


def _stored_ada(model: type[Account], **extra: Any) -> Account:
    account = model(pk=PK, email=ADA, username="ada", **extra)
    account.save()
    return account


def _changed(model: type[Account], **changes: Any) -> Account:
    account = _stored_ada(model)
    for name, value in changes.items():
        setattr(account, name, value)
    return account


def _save(account: Account, token: str | None) -> object:
    return account.save(client_request_token=token)


CREATE = Scenario(
    "create",
    "TransactWriteItems",
    lambda m: m(pk=PK, email=ADA, username="ada"),
    _save,
    ADA_LOCKS,
    {"email": ADA, "username": "ada"},
)
CHANGE = Scenario(
    "unique-change",
    "TransactWriteItems",
    lambda m: _changed(m, email=NEW),
    _save,
    frozenset({f"UNIQ#EMAIL#{NEW}", "UNIQ#HANDLE#ada"}),
    {"email": NEW, "username": "ada"},
)
UPDATE_CHANGE = Scenario(
    "unique-change-by-update",
    "TransactWriteItems",
    _stored_ada,
    lambda a, t: a.update([type(a).email.set(NEW), type(a).username.remove()], client_request_token=t),
    frozenset({f"UNIQ#EMAIL#{NEW}"}),
    {"email": NEW, "username": None},
)
NON_UNIQUE_SAVE = Scenario(
    "non-unique-save",
    "PutItem",
    lambda m: _changed(m, bio="poet"),
    _save,
    ADA_LOCKS,
    {"email": ADA, "bio": "poet"},
)
NON_UNIQUE_UPDATE = Scenario(
    "non-unique-update",
    "UpdateItem",
    _stored_ada,
    lambda a, t: a.update([type(a).bio.set("poet")], client_request_token=t),
    ADA_LOCKS,
    {"email": ADA, "bio": "poet"},
)
DELETE = Scenario(
    "delete", "TransactWriteItems", _stored_ada, lambda a, t: a.delete(client_request_token=t), frozenset(), None
)
OVERWRITE = Scenario(
    "overwrite-unknown",
    "TransactWriteItems",
    lambda m: (_stored_ada(m, tenant="acme", slug="home"), m(pk=PK, email=OTHER))[1],
    _save,
    frozenset({f"UNIQ#EMAIL#{OTHER}"}),
    {"email": OTHER, "username": None, "tenant": None},
)
SCENARIOS = [CREATE, CHANGE, UPDATE_CHANGE, NON_UNIQUE_SAVE, NON_UNIQUE_UPDATE, DELETE, OVERWRITE]
#: Operations whose writes the library sends itself (with its token and retries).
LIBRARY_SENT = [CREATE, CHANGE, UPDATE_CHANGE, NON_UNIQUE_SAVE, DELETE, OVERWRITE]
TRANSACTIONAL = [CREATE, CHANGE, UPDATE_CHANGE, DELETE, OVERWRITE]


@pytest.fixture
def dynoxide(dynoxide_endpoint: str) -> Backend:
    return Backend(name="dynoxide", host=dynoxide_endpoint)


def _table(model: type[Account]) -> list[dict[str, Any]]:
    """The raw table, in a stable order (dynoxide returns attributes and items in any order)."""
    return sorted(raw_items(model), key=lambda item: (item["PK"]["S"], item["SK"]["S"]))


def _instance_state(account: Account) -> tuple[dict[str, Any], Any]:
    return copy.deepcopy(account.attribute_values), vars(account).get("_uniq_snapshot")


def _assert_done(model: type[Account], scenario: Scenario) -> None:
    """The table holds exactly what the successful operation leaves, and the invariant holds."""
    assert set(actual_locks(model)) == scenario.locks_after
    records = [item for item in raw_items(model) if not item["PK"]["S"].startswith("UNIQ#")]
    if scenario.record_after is None:
        assert records == []
    else:
        (item,) = records
        stored = model.from_raw_data(item)
        assert {name: getattr(stored, name) for name in scenario.record_after} == scenario.record_after
    assert_invariant(model)


def _lose_response(run: Callable[[], object]) -> None:
    """Run a write whose response is lost; any error may surface (its type is tested on its own)."""
    with pytest.raises(Exception):  # noqa: B017, PT011 - the error's type has its own tests below.
        run()


def _token(purpose: str) -> str:
    """A token no other test uses: dynoxide, shared by the session, remembers tokens for 10 minutes."""
    return f"{purpose}-{uuid.uuid4().hex[:16]}"


def _sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    delays: list[float] = []
    monkeypatch.setattr(_send, "sleep", delays.append)
    return delays


# --- failure before the request leaves ------------------------------------------------------


@pytest.mark.parametrize("scenario", SCENARIOS, ids=str)
def test_connection_refused__nothing_written_instance_unchanged_retry_succeeds(
    accounts: type[Account], scenario: Scenario
) -> None:
    """A request that never leaves writes nothing and leaves the instance as it was; a retry succeeds."""
    account = scenario.prepare(accounts)
    table, state = _table(accounts), _instance_state(account)
    with Faults(accounts) as faults:
        faults.refuse_connection(scenario.operation)
        with pytest.raises((EndpointConnectionError, PynamoDBException)):
            scenario.write(account, None)
    # botocore retried the refused connection itself, every attempt refused.
    assert sum(faults.injected.values()) == faults.max_attempts
    assert _table(accounts) == table
    assert _instance_state(account) == state
    scenario.write(account, None)
    _assert_done(accounts, scenario)
    SUMMARY.outcomes["connection refused: nothing written, instance unchanged, retry succeeded"] += 1


# --- response lost after the server applied the write ---------------------------------------


@pytest.mark.parametrize("same_token", [True, False], ids=["same-token", "new-token"])
@pytest.mark.parametrize("scenario", SCENARIOS, ids=str)
def test_lost_response__caller_retry__no_self_collision(
    accounts: type[Account], scenario: Scenario, same_token: bool
) -> None:
    """The write applied but its response was lost: the caller's retry succeeds, with or without its token."""
    account = scenario.prepare(accounts)
    token = _token("lost")
    with Faults(accounts) as faults:
        faults.lose_responses(scenario.operation)
        _lose_response(lambda: scenario.write(account, token))
    assert sum(faults.injected.values()) == 1
    with RequestCounter(accounts) as counter:
        scenario.write(account, token if same_token else None)
    assert counter.operations, "the retry sent nothing"
    _assert_done(accounts, scenario)
    # The retried instance knows what is stored: saving it again moves no lock.
    if scenario.record_after is not None:
        with RequestCounter(accounts) as again:
            account.save()
        assert again.operations == ["PutItem"]
        _assert_done(accounts, scenario)
    SUMMARY.outcomes[f"lost response, caller retry ({'same' if same_token else 'new'} token) succeeded"] += 1


@pytest.mark.parametrize("scenario", LIBRARY_SENT, ids=str)
def test_lost_response__botocore_resends__consistent(accounts: type[Account], scenario: Scenario) -> None:
    """botocore resends a write whose response it lost (same token): the write succeeds once, consistently."""
    account = scenario.prepare(accounts)
    with Faults(accounts) as faults, RequestCounter(accounts) as counter:
        faults.resend_after_success(scenario.operation)
        scenario.write(account, None)
    assert sum(faults.injected.values()) == 1
    # One more HTTP attempt than API calls: the resend.
    assert counter.attempts == len(counter.operations) + 1
    _assert_done(accounts, scenario)
    SUMMARY.outcomes["lost response resent by botocore: consistent"] += 1


def test_lost_response__duplicate_signup_after_lost_create__still_refused(accounts: type[Account]) -> None:
    """After a lost create and its retry, another record asking for the same email is refused."""
    account = CREATE.prepare(accounts)
    with Faults(accounts) as faults:
        faults.lose_responses("TransactWriteItems")
        _lose_response(account.save)
    account.save()
    with pytest.raises(UniqueViolation) as info:
        accounts(pk="ACCT#0b7e", email=ADA.upper()).save()
    assert info.value.attributes == ("email",)
    assert info.value.violations[0].owner == (PK, "PROFILE")
    assert_invariant(accounts)
    SUMMARY.outcomes["lost response: a later duplicate still refused"] += 1


def test_lost_response__transaction__caller_sees_pynamodb_error(accounts: type[Account]) -> None:
    """A lost TransactWriteItems response surfaces as PynamoDB's TransactWriteError, as in PynamoDB."""
    account = CREATE.prepare(accounts)
    with Faults(accounts) as faults:
        faults.lose_responses("TransactWriteItems")
        with pytest.raises(TransactWriteError) as info:
            account.save()
    assert isinstance(info.value.cause, ReadTimeoutError)
    SUMMARY.outcomes["lost response: TransactWriteError with the timeout as cause"] += 1


def test_lost_response__single_item_save__caller_sees_put_error(accounts: type[Account]) -> None:
    """A lost PutItem response surfaces as PynamoDB's PutError, as Model.save() raises it."""
    account = NON_UNIQUE_SAVE.prepare(accounts)
    with Faults(accounts) as faults:
        faults.lose_responses("PutItem")
        with pytest.raises(PutError) as info:
            account.save()
    assert isinstance(info.value.cause, ReadTimeoutError)
    SUMMARY.outcomes["lost response: PutError with the timeout as cause"] += 1


# --- conflicts and throttling ---------------------------------------------------------------

_TRANSACTION_CODES = ["TransactionConflict", "TransactionInProgressException", "ProvisionedThroughputExceededException"]
_RETRY_CASES = [
    pytest.param(s, code, id=f"{s.name}-{code}")
    for s in LIBRARY_SENT
    for code in (_TRANSACTION_CODES if s in TRANSACTIONAL else ["ProvisionedThroughputExceededException"])
]


@pytest.mark.parametrize(("scenario", "code"), _RETRY_CASES)
def test_retryable_error__retried_with_same_token_then_success(
    accounts: type[Account], scenario: Scenario, code: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Conflicts and throttling are retried with the same token and growing, bounded delays."""
    delays = _sleeps(monkeypatch)
    account = scenario.prepare(accounts)
    times = _send.RETRY_ATTEMPTS - 1
    with Faults(accounts) as faults, RequestCounter(accounts) as counter:
        faults.answer_error(scenario.operation, code, times)
        scenario.write(account, None)
    assert sum(faults.injected.values()) == times
    sent = counter.params(scenario.operation)
    assert len(sent) >= times + 1
    tokens = {params.get("ClientRequestToken") for params in sent[: times + 1]}
    assert len(tokens) == 1, "every retry of one request carries the same token"
    assert len(delays) == times
    assert delays == sorted(delays), "delays never shrink"
    assert delays[-1] > delays[0], "delays grow"
    assert all(0 < d <= _send.RETRY_MAX_DELAY for d in delays)
    _assert_done(accounts, scenario)
    SUMMARY.outcomes[f"{code} x{times}: retried with one token, then succeeded"] += 1


@pytest.mark.parametrize(("scenario", "code"), _RETRY_CASES)
def test_retryable_error__attempts_run_out__transient_error_nothing_written(
    accounts: type[Account], scenario: Scenario, code: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """More conflicts than RETRY_ATTEMPTS: a TransientError, nothing written, the instance unchanged."""
    delays = _sleeps(monkeypatch)
    account = scenario.prepare(accounts)
    table, state = _table(accounts), _instance_state(account)
    with Faults(accounts) as faults, RequestCounter(accounts) as counter:
        faults.answer_error(scenario.operation, code, _send.RETRY_ATTEMPTS + 1)
        with pytest.raises(TransientError) as info:
            scenario.write(account, None)
    assert counter.count(scenario.operation) == _send.RETRY_ATTEMPTS
    assert counter.attempts == 0
    assert len(delays) == _send.RETRY_ATTEMPTS - 1
    assert "retries ran out" in str(info.value)
    assert _table(accounts) == table
    assert _instance_state(account) == state
    scenario.write(account, None)
    _assert_done(accounts, scenario)
    SUMMARY.outcomes[f"{code} x{_send.RETRY_ATTEMPTS}+: TransientError, nothing written"] += 1


def test_retryable_error__many_attempts__delays_capped(
    accounts: type[Account], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With Meta.unique_retry_attempts raised, the backoff stops growing at RETRY_MAX_DELAY."""
    delays = _sleeps(monkeypatch)
    monkeypatch.setattr(accounts.Meta, "unique_retry_attempts", 12, raising=False)
    account = CREATE.prepare(accounts)
    with Faults(accounts) as faults:
        faults.answer_error("TransactWriteItems", "TransactionConflict", 11)
        account.save()
    assert len(delays) == 11
    assert max(delays) <= _send.RETRY_MAX_DELAY
    assert sum(delays) <= 11 * _send.RETRY_MAX_DELAY
    assert delays[-1] >= _send.RETRY_MAX_DELAY / 2, "the cap is reached"
    _assert_done(accounts, CREATE)
    SUMMARY.outcomes["TransactionConflict x11 with 12 attempts: delays capped, then succeeded"] += 1


def test_retry_attempts__inherited_meta_setting__honoured(
    accounts: type[Account], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``unique_retry_attempts`` set on a class the Meta inherits from counts, as ``getattr`` finds it.

    The setting is read on every write without ``getattr`` (a miss raises inside it); a Meta
    whose base holds the setting must still be read through.
    """
    _sleeps(monkeypatch)

    class BaseMeta:
        unique_retry_attempts = 2

    own = {name: value for name, value in vars(accounts.Meta).items() if not name.startswith("__")}
    monkeypatch.setattr(accounts, "Meta", type("Meta", (BaseMeta,), own))
    assert _save_under_conflicts(accounts, 5, TransientError, "after 2 attempts") == 2


def _save_under_conflicts(accounts: type[Account], conflicts: int, error: type[Exception], match: str) -> int:
    """Save a new record while its transactions meet ``conflicts`` conflicts, expecting ``error``;
    return how many TransactWriteItems were sent."""
    account = CREATE.prepare(accounts)
    with Faults(accounts) as faults, RequestCounter(accounts) as counter:
        faults.answer_error("TransactWriteItems", "TransactionConflict", conflicts)
        with pytest.raises(error, match=match):
            account.save()
    return counter.count("TransactWriteItems")


def test_retry_attempts__read_only_when_a_request_is_resent(
    accounts: type[Account], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write that succeeds at once never reads ``Meta.unique_retry_attempts``; one that meets a
    conflict reads it once, when the first resend is considered."""
    _sleeps(monkeypatch)
    reads: list[str] = []
    real = ModelContext.read_retry_attempts

    def counted(self: ModelContext) -> int:
        reads.append(self.model.__name__)
        return real(self)

    monkeypatch.setattr(ModelContext, "read_retry_attempts", counted)
    account = CREATE.prepare(accounts)
    account.save()
    account.update(actions=[accounts.bio.set("poet")])
    assert reads == []
    with Faults(accounts) as faults:
        faults.answer_error("UpdateItem", "TransactionConflictException", 2)
        account.update(actions=[accounts.bio.set("painter")])
    assert reads == [accounts.__name__]


@pytest.mark.parametrize("attempts", [0, -1, 2.5, "3", None])
def test_retry_attempts__bad_setting__refused_when_the_model_is_defined(attempts: Any) -> None:
    """A ``Meta.unique_retry_attempts`` that is no integer of at least 1 fails the class definition."""
    with pytest.raises(UniqueConfigError, match="unique_retry_attempts must be an integer of at least 1"):

        class Retried(UniqueMixin, Model):
            class Meta:
                table_name = "retried"
                unique_retry_attempts = attempts

            pk = UnicodeAttribute(hash_key=True)
            email = UniqueAttribute(UnicodeAttribute())


def test_retry_attempts__model_without_constraints__bad_setting_not_refused() -> None:
    """A model with no constraint of its own is defined whatever its setting says: its writes are
    PynamoDB's own unless a polymorphic relative keeps locks (then the setting is read when a
    resend is first considered)."""

    class Plain(UniqueMixin, Model):
        class Meta:
            table_name = "plain-retried"
            unique_retry_attempts = 0

        pk = UnicodeAttribute(hash_key=True)

    assert Plain.Meta.unique_retry_attempts == 0


def test_send__setting_read_only_after_a_conflict_or_throttling(monkeypatch: pytest.MonkeyPatch) -> None:
    """``send()`` reads a lazily given number of attempts only when a resend is considered: an
    error not worth resending is raised as PynamoDB raised it, the setting unread."""
    _sleeps(monkeypatch)

    class Connection:
        def __init__(self, codes: list[str]) -> None:
            self.codes = codes
            self.sent = 0

        def dispatch(self, operation: str, kwargs: dict[str, Any]) -> dict[str, Any]:
            self.sent += 1
            if self.codes:
                raise ClientError({"Error": {"Code": self.codes.pop(0), "Message": "no"}}, operation)
            return {}

    reads: list[int] = []

    def attempts() -> int:
        reads.append(0)
        return 0  # A bad setting: refused when read.

    request = _send.Request([{"TableName": "t"}], "PutItem")
    refused = Connection(["ValidationException"])
    with pytest.raises(PutError) as raised:
        _send.send(refused, request, None, attempts=attempts)  # type: ignore[arg-type] # a stand-in.
    assert raised.value.cause_response_code == "ValidationException"
    assert (reads, refused.sent) == ([], 1)
    throttled = Connection(["ThrottlingException"])
    with pytest.raises(ValueError, match="at least 1"):
        _send.send(throttled, request, None, attempts=attempts)  # type: ignore[arg-type]
    assert (reads, throttled.sent) == ([0], 1)


def test_retry_attempts__bad_setting_after_definition__refused_before_a_resend(
    accounts: type[Account], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bad setting made after the class was defined is refused when first read: before a resend."""
    _sleeps(monkeypatch)
    monkeypatch.setattr(accounts.Meta, "unique_retry_attempts", 0, raising=False)
    assert _save_under_conflicts(accounts, 1, ValueError, "at least 1") == 1


def test_retrying__no_attempt__refused_before_any_call() -> None:
    """Fewer than one attempt is a programming error, raised before anything is sent."""
    calls: list[tuple[Any, ...]] = []
    with pytest.raises(ValueError, match="at least 1"):
        _send.retrying(lambda *args: calls.append(args), "a", attempts=0)
    assert calls == []


@pytest.mark.parametrize("attempts", [2.5, "3", None])
def test_retrying__attempts_not_an_integer__refused_before_any_call(attempts: Any) -> None:
    """A count of attempts that is no integer is refused before anything is sent (a float could
    otherwise never equal the attempt number and resend without end)."""
    calls: list[tuple[Any, ...]] = []
    with pytest.raises(ValueError, match="an integer of at least 1"):
        _send.retrying(lambda *args: calls.append(args), attempts=attempts)
    assert calls == []


def test_retrying__resent__same_arguments_each_attempt(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every attempt gets the arguments built once: a resend is the same request."""
    _sleeps(monkeypatch)
    throttled = ClientError({"Error": {"Code": "ThrottlingException", "Message": "slow down"}}, "PutItem")
    conflict = PynamoDBException("throttled", cause=throttled)
    seen: list[tuple[Any, ...]] = []

    def attempt(*args: Any) -> str:
        seen.append(args)
        if len(seen) < 3:
            raise conflict
        return "sent"

    items = [{"Put": {}}]
    assert _send.retrying(attempt, "connection", items, "token", attempts=3) == "sent"
    assert seen == [("connection", items, "token")] * 3
    assert all(args[1] is items for args in seen)


def test_retryable_error__single_item_transaction_conflict__retried(
    accounts: type[Account], monkeypatch: pytest.MonkeyPatch
) -> None:
    """PutItem answered TransactionConflictException (an ongoing transaction on the item) is retried."""
    delays = _sleeps(monkeypatch)
    account = NON_UNIQUE_SAVE.prepare(accounts)
    with Faults(accounts) as faults:
        faults.answer_error("PutItem", "TransactionConflictException", 2)
        account.save()
    assert len(delays) == 2
    _assert_done(accounts, NON_UNIQUE_SAVE)
    SUMMARY.outcomes["TransactionConflictException on PutItem: retried"] += 1


@pytest.mark.parametrize("code", ["TransactionConflictException", "ProvisionedThroughputExceededException"])
def test_retryable_error__non_unique_update__retried_like_save(
    accounts: type[Account], code: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """update() of non-unique attributes gets the same bounded retries as save()."""
    delays = _sleeps(monkeypatch)
    account = NON_UNIQUE_UPDATE.prepare(accounts)
    with Faults(accounts) as faults:
        faults.answer_error("UpdateItem", code, 2)
        NON_UNIQUE_UPDATE.write(account, None)
    assert len(delays) == 2
    _assert_done(accounts, NON_UNIQUE_UPDATE)
    SUMMARY.outcomes[f"{code} on UpdateItem: retried"] += 1


@pytest.mark.integration
def test_throttling_at_http_layer__botocore_and_library_retries_multiply(
    dynoxide: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Throttling answered over HTTP is retried by botocore inside each library attempt: counted here."""
    delays = _sleeps(monkeypatch)
    model = bind_model(Account, dynoxide)
    account = CREATE.prepare(model)
    with Faults(model) as faults, RequestCounter(model) as counter:
        faults.throttle_over_http("TransactWriteItems")
        with pytest.raises(TransientError):
            account.save()
    sends = sum(faults.injected.values())
    assert counter.count("TransactWriteItems") == _send.RETRY_ATTEMPTS
    assert sends == _send.RETRY_ATTEMPTS * faults.max_attempts
    assert len(delays) == _send.RETRY_ATTEMPTS - 1
    assert raw_items(model) == []
    SUMMARY.outcomes[f"HTTP throttling: {sends} HTTP sends in {_send.RETRY_ATTEMPTS} library attempts"] += 1


# --- replays --------------------------------------------------------------------------------


@pytest.mark.parametrize("scenario", LIBRARY_SENT, ids=str)
def test_replay__same_token_same_request__success(accounts: type[Account], scenario: Scenario) -> None:
    """Resending the same request with the same token succeeds and leaves the same state."""
    account = scenario.prepare(accounts)
    replay = copy.deepcopy(account)
    token = _token("replay")
    scenario.write(account, token)
    scenario.write(replay, token)
    _assert_done(accounts, scenario)
    SUMMARY.outcomes["replay with the same token: success"] += 1


@pytest.mark.integration
def test_replay__dynoxide__not_executed_again(dynoxide: Backend) -> None:
    """dynoxide honours the token: a replay does not overwrite a change made since."""
    model = bind_model(Account, dynoxide)
    account = CREATE.prepare(model)
    replay = copy.deepcopy(account)
    token = _token("replay")
    account.save(client_request_token=token)
    stored = model.get(PK, "PROFILE")
    stored.update([model.bio.set("changed since")])
    with RequestCounter(model) as counter:
        replay.save(client_request_token=token)
    assert counter.operations == ["TransactWriteItems"]
    assert model.get(PK, "PROFILE").bio == "changed since"
    _assert_done(model, CREATE)
    SUMMARY.outcomes["replay on dynoxide: not re-executed"] += 1


@pytest.mark.integration
@pytest.mark.parametrize("scenario", [CREATE, CHANGE, DELETE], ids=str)
def test_replay__dynoxide__same_token_other_request__idempotency_mismatch(
    dynoxide: Backend, scenario: Scenario
) -> None:
    """The same token for a different request is refused with IdempotencyMismatch; nothing written."""
    model = bind_model(Account, dynoxide)
    token = _token("reused")
    scenario.write(scenario.prepare(model), token)
    table = _table(model)
    other = model(pk="ACCT#0b7e", email="someone@else.io", username="else")
    with pytest.raises(IdempotencyMismatch) as info:
        other.save(client_request_token=token)
    assert "client_request_token" in str(info.value)
    assert _table(model) == table
    assert_invariant(model)
    other.save()
    assert_invariant(model)
    SUMMARY.outcomes["same token, different request: IdempotencyMismatch"] += 1
