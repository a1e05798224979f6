"""explain() prints exactly the request the write then sends."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from _backends import Backend, RequestCounter, bind_model
from models import Account

from pynamodb_unique import explain


def _sent(counter: RequestCounter) -> tuple[str, dict[str, Any]]:
    # A transactional update is followed by a GetItem of the item it returns (as ALL_NEW).
    call, *after = counter.calls
    assert [c.operation for c in after] in ([], ["GetItem"])
    params = {k: v for k, v in call.params.items() if k != "ReturnConsumedCapacity"}
    return call.operation, params


@pytest.mark.parametrize(
    ("op", "write"),
    [
        ("save", lambda a, m, t: a.save(client_request_token=t)),
        ("update", lambda a, m, t: a.update([m.bio.set("poet")])),
        ("update", lambda a, m, t: a.update([m.email.set("new@x.io")], client_request_token=t)),
        ("delete", lambda a, m, t: a.delete(client_request_token=t)),
    ],
    ids=["create", "non-unique-update", "unique-update", "delete"],
)
def test_explain__equals_the_request_sent(backend: Backend, op: str, write: Callable[[Any, Any, str], Any]) -> None:
    """The explained request and the one on the wire are the same, field for field."""
    accounts = bind_model(Account, backend)
    token = uuid.uuid4().hex  # dynoxide remembers tokens for the whole session.
    account = accounts(pk="A", email="a@x.io", username="ann")
    if op != "save":
        account.save()
    actions = {"update": None}.get(op)
    if op == "update":
        probe: list[Any] = []
        write(type("Recorder", (), {"update": lambda self, a, **_: probe.append(a)})(), accounts, token)
        actions = probe[0]
    explained = explain(account, op, actions=actions, client_request_token=token)  # type: ignore[arg-type]
    with RequestCounter(accounts) as counter:
        write(account, accounts, token)
    operation, params = _sent(counter)
    assert explained.operation == operation
    assert explained.request == params
