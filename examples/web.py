"""A Flask API for accounts: unique emails and usernames, taken values answered as form errors.

POST /accounts signs up, PATCH /accounts/<id> changes an email or username, GET /check says
before submit whether values are free. A taken value is a 409 with ``{"errors": {field:
[message]}}``; a value that cannot be stored is a 400.

``python examples/web.py`` runs a short session through Flask's test client on an embedded moto
backend; ``--serve`` serves the API on http://127.0.0.1:5000 instead, and ``--endpoint URL`` uses
a real DynamoDB-compatible server.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import uuid
from collections.abc import Iterator
from http import HTTPStatus
from typing import Any

from flask import Flask, Response, jsonify, request
from pynamodb.attributes import UnicodeAttribute
from pynamodb.models import Model
from werkzeug.exceptions import BadRequest, NotFound

from pynamodb_unique import InvalidUniqueValue, UniqueAttribute, UniqueMixin, UniqueViolation

FIELDS = ("email", "username")


class User(UniqueMixin, Model):
    """An account: its key is a generated id, never the email, so the email can change."""

    class Meta:
        table_name = "web-users"
        region = "us-east-1"

    id = UnicodeAttribute(hash_key=True)
    email = UniqueAttribute(UnicodeAttribute(), normalize=str.casefold, message="{value} is already registered")
    username = UniqueAttribute(UnicodeAttribute(null=True), name="USERNAME")


def create_app(users: type[User] = User) -> Flask:
    """The API over ``users`` (a subclass bound to another table, in tests)."""
    app = Flask(__name__)

    # The glue: the library's errors become HTTP answers a form can show field by field.
    @app.errorhandler(UniqueViolation)
    def taken(exc: UniqueViolation) -> tuple[Response, int]:
        return jsonify(errors=exc.field_errors()), HTTPStatus.CONFLICT

    @app.errorhandler(InvalidUniqueValue)
    def invalid(exc: InvalidUniqueValue) -> tuple[Response, int]:
        return jsonify(errors={"__all__": [exc.msg]}), HTTPStatus.BAD_REQUEST

    # The app's own checks, answered in the same shape.
    @app.errorhandler(BadRequest)
    @app.errorhandler(NotFound)
    def refused(exc: BadRequest | NotFound) -> tuple[Response, int]:
        return jsonify(errors={"__all__": [exc.description]}), exc.code or HTTPStatus.BAD_REQUEST

    def form(*required: str) -> dict[str, Any]:
        data = request.get_json(silent=True)
        if not isinstance(data, dict):
            raise BadRequest("expected a JSON object")
        given = {f: data[f] for f in FIELDS if f in data}
        for name in FIELDS:
            value = given.get(name, None if name in required else "")
            if not isinstance(value, str) and not (name == "username" and value is None):
                raise BadRequest(f"{name} must be a string")
        return given

    def shown(user: User) -> dict[str, Any]:
        return {"id": user.id, "email": user.email, "username": user.username}

    @app.post("/accounts")
    def signup() -> tuple[Response, int]:
        user = users(id=uuid.uuid4().hex, **form("email"))
        user.save()
        return jsonify(shown(user)), HTTPStatus.CREATED

    @app.patch("/accounts/<account_id>")
    def change(account_id: str) -> Response:
        try:
            user = users.get(account_id)
        except users.DoesNotExist:
            raise NotFound(f"no account {account_id}") from None
        for name, value in form().items():
            setattr(user, name, value)
        user.save()
        return jsonify(shown(user))

    @app.get("/check")
    def check() -> Response:
        # Advisory, before submit: GET /check?email=...&id=<own account, when editing>.
        given = {f: request.args[f] for f in FIELDS if f in request.args}
        users(id=request.args.get("id"), **given).validate_unique(exclude=set(FIELDS) - set(given))
        return jsonify(errors={})

    return app


def session(app: Flask) -> None:
    """Sign up, collide, change an email and take the old one: what a browser would send."""
    client = app.test_client()

    def send(method: str, url: str, body: dict[str, str] | None, expected: HTTPStatus) -> Any:
        answer = client.open(url, method=method, json=body)
        print(f"  {method} {url} {body or ''} -> {answer.status_code} {answer.get_json()}")
        assert answer.status_code == expected
        return answer.get_json()

    ada = send("POST", "/accounts", {"email": "ada@lovelace.io", "username": "ada"}, HTTPStatus.CREATED)
    send("GET", "/check?email=ADA@Lovelace.io", None, HTTPStatus.CONFLICT)
    send("POST", "/accounts", {"email": "ADA@Lovelace.io", "username": "ada"}, HTTPStatus.CONFLICT)
    grace = send("POST", "/accounts", {"email": "grace@hopper.mil", "username": "grace"}, HTTPStatus.CREATED)
    send("PATCH", f"/accounts/{grace['id']}", {"email": "ada@lovelace.io"}, HTTPStatus.CONFLICT)
    send("PATCH", f"/accounts/{ada['id']}", {"email": "countess@lovelace.io"}, HTTPStatus.OK)
    send("POST", "/accounts", {"email": "ada@lovelace.io", "username": "byron"}, HTTPStatus.CREATED)
    send("POST", "/accounts", {"email": "\ud800@x.io"}, HTTPStatus.BAD_REQUEST)


@contextlib.contextmanager
def backend(endpoint: str | None) -> Iterator[None]:
    """Moto in-process by default; a real server when an endpoint is given."""
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "example")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "example")
    if endpoint is not None:
        User.Meta.host = endpoint
        yield
        return
    from moto import mock_aws  # noqa: PLC0415 - only needed without a server.

    with mock_aws():
        yield


def main(argv: list[str] | None = None) -> None:
    """Run the session, or serve the API."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--endpoint", help="URL of a DynamoDB-compatible server (default: embedded moto)")
    parser.add_argument("--serve", action="store_true", help="serve the API on http://127.0.0.1:5000")
    args = parser.parse_args(argv)
    with backend(args.endpoint):
        if args.endpoint is not None:
            User.Meta.table_name = f"web-users-{uuid.uuid4().hex[:8]}"
        if not User.exists():
            User.create_table(billing_mode="PAY_PER_REQUEST", wait=True)
        app = create_app()
        try:
            if args.serve:
                app.run()
            else:
                session(app)
        finally:
            if args.endpoint is not None:
                User.delete_table()


if __name__ == "__main__":
    main()
