"""examples/web.py through Flask's test client: taken values answered as field errors."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from _backends import Backend, RequestCounter, bind_model
from _invariant import actual_locks, raw_items
from flask.testing import FlaskClient

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "web.py"


def _load() -> ModuleType:
    """The example as a module (examples/ is no package), imported once per session."""
    name = "pynamodb_unique_web_example"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, EXAMPLE)
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


web = _load()


@pytest.fixture
def users(backend: Backend) -> Any:
    return bind_model(web.User, backend)


@pytest.fixture
def client(users: Any) -> FlaskClient:
    return web.create_app(users).test_client()


def _signup(client: FlaskClient, email: str, username: str | None = None) -> dict[str, Any]:
    answer = client.post("/accounts", json={"email": email, "username": username})
    assert answer.status_code == 201, answer.get_json()
    body: dict[str, Any] = answer.get_json()
    return body


def test_signup__free_values__201_and_stored(client: FlaskClient, users: Any) -> None:
    """A signup with free values is created: 201 with the account, its record and locks stored."""
    answer = client.post("/accounts", json={"email": "Ada@Lovelace.io", "username": "ada"})
    assert answer.status_code == 201
    body = answer.get_json()
    assert (body["email"], body["username"]) == ("Ada@Lovelace.io", "ada")
    assert users.get(body["id"]).email == "Ada@Lovelace.io"
    assert set(actual_locks(users)) == {"UNIQ#EMAIL#ada@lovelace.io", "UNIQ#USERNAME#ada"}


def test_signup__duplicate_email__409_with_field_errors(client: FlaskClient, users: Any) -> None:
    """A taken email (differently cased) and username answer 409, each message under its field."""
    _signup(client, "ada@lovelace.io", "ada")
    before = raw_items(users)
    answer = client.post("/accounts", json={"email": "ADA@Lovelace.io", "username": "ada"})
    assert answer.status_code == 409
    assert answer.get_json() == {
        "errors": {
            "email": ["ADA@Lovelace.io is already registered"],
            "username": ["username 'ada' is already taken"],
        }
    }
    assert raw_items(users) == before


def test_change_email__to_a_taken_one__409_and_unchanged(client: FlaskClient, users: Any) -> None:
    """Changing an email to another account's answers 409 and leaves the account as it was."""
    _signup(client, "ada@lovelace.io", "ada")
    grace = _signup(client, "grace@hopper.mil", "grace")
    answer = client.patch(f"/accounts/{grace['id']}", json={"email": "Ada@Lovelace.io"})
    assert answer.status_code == 409
    assert answer.get_json() == {"errors": {"email": ["Ada@Lovelace.io is already registered"]}}
    assert users.get(grace["id"]).email == "grace@hopper.mil"


def test_change_email__old_email_free_again(client: FlaskClient) -> None:
    """After an email change the old email can sign up, and the new one is taken."""
    ada = _signup(client, "ada@lovelace.io", "ada")
    answer = client.patch(f"/accounts/{ada['id']}", json={"email": "countess@lovelace.io"})
    assert answer.status_code == 200
    assert answer.get_json()["email"] == "countess@lovelace.io"
    _signup(client, "ada@lovelace.io", "byron")
    taken = client.post("/accounts", json={"email": "countess@lovelace.io"})
    assert taken.status_code == 409


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"email": "\ud800@x.io"}, "lone surrogate"),
        ({"email": "a@x.io", "username": 7}, "username must be a string"),
        ({"username": "ada"}, "email must be a string"),
        (["a@x.io"], "expected a JSON object"),
    ],
)
def test_signup__bad_value__400_nothing_written(client: FlaskClient, users: Any, body: Any, message: str) -> None:
    """A value DynamoDB cannot store as a key, or a malformed form, is a 400 and writes nothing."""
    with RequestCounter() as counter:
        answer = client.post("/accounts", json=body)
    assert answer.status_code == 400
    (error,) = answer.get_json()["errors"]["__all__"]
    assert message in error
    assert counter.operations == []
    assert raw_items(users) == []


def test_change__unknown_account__404(client: FlaskClient) -> None:
    """PATCH of an account that does not exist is a 404 in the same error shape."""
    answer = client.patch("/accounts/nope", json={"email": "a@x.io"})
    assert answer.status_code == 404
    assert answer.get_json() == {"errors": {"__all__": ["no account nope"]}}


def test_check__before_submit__taken_free_and_own(client: FlaskClient) -> None:
    """GET /check: 409 with field errors for taken values, 200 for free ones and for the account's own."""
    ada = _signup(client, "ada@lovelace.io", "ada")
    with RequestCounter() as counter:
        taken = client.get("/check", query_string={"email": "ADA@lovelace.io", "username": "ada"})
    assert taken.status_code == 409
    assert set(taken.get_json()["errors"]) == {"email", "username"}
    assert counter.operations == ["BatchGetItem"]
    assert client.get("/check", query_string={"email": "grace@hopper.mil"}).status_code == 200
    own = client.get("/check", query_string={"email": "ADA@lovelace.io", "id": ada["id"]})
    assert (own.status_code, own.get_json()) == (200, {"errors": {}})


def _run(*args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    done = subprocess.run(  # noqa: S603 - our own example, fixed arguments.
        [sys.executable, str(EXAMPLE), *args], capture_output=True, text=True, timeout=120, env=env, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "-> 409 {'errors': {'email': ['ADA@Lovelace.io is already registered']" in done.stdout
    assert done.stdout.count("-> 201") == 3
    return done.stdout


def test_example__runs_as_a_script_on_moto() -> None:
    """python examples/web.py runs its session on embedded moto, without any AWS account."""
    _run()


@pytest.mark.integration
def test_example__endpoint__runs_against_a_server(dynoxide_endpoint: str) -> None:
    """--endpoint points the example at a real DynamoDB-compatible server."""
    _run("--endpoint", dynoxide_endpoint)
