"""Where the command connects and what it says when that fails: MODEL, its endpoint, region and profile.

Loads ``package.module:ClassName``, points it (and the models sharing its tables) at
``--endpoint-url``, ``--region`` and ``--profile`` as the AWS CLI's options do, and turns what
DynamoDB, botocore or the library refuse into one line and exit status 2.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final, NoReturn
from urllib.parse import urlsplit

import click
from botocore.exceptions import (
    BotoCoreError,
    EndpointConnectionError,
    NoCredentialsError,
    NoRegionError,
    PartialCredentialsError,
    ProfileNotFound,
)
from botocore.session import get_session
from pynamodb.exceptions import PynamoDBException

from .._mixin import UniqueMixin
from .._model.context import context_of
from .._model.registry import constraints_of, declaring, table_neighbours
from .._model.seam import connection, forget_connection
from .._write.send import missing_tables
from ..exceptions import UniqueError

EXIT_OK: Final = 0
EXIT_PROBLEMS: Final = 1
EXIT_ERROR: Final = 2

Model = type[UniqueMixin]

#: Credentials in the environment, which an explicit --profile overrides (as in the AWS CLI).
_ENV_CREDENTIALS: Final = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN")


class _Failure(click.ClickException):
    """A usage or configuration error: one line, exit status 2."""

    exit_code = EXIT_ERROR


def fail(message: str) -> NoReturn:
    """Stop the command with ``message`` on stderr (after ``Error:``) and exit status 2."""
    raise _Failure(message)


# Where the command connects: the model's Meta, overridden as the AWS CLI's options do.


def use_profile(profile: str) -> None:
    """Make every connection the command creates use a named AWS profile, as the AWS CLI's ``--profile``.

    PynamoDB builds its botocore sessions from the environment when it first connects, so the
    profile is set there. As in the AWS CLI, an explicit profile wins over credentials in the
    environment, which are removed for this process.

    Raises:
        click.ClickException: no such profile in the AWS config or credentials files (exit status 2).
    """
    os.environ.pop("AWS_DEFAULT_PROFILE", None)  # botocore reads it before AWS_PROFILE.
    os.environ["AWS_PROFILE"] = profile
    for name in _ENV_CREDENTIALS:
        os.environ.pop(name, None)
    session = get_session()
    if profile not in session.available_profiles:
        files = " or ".join(
            os.path.expanduser(session.get_config_variable(v)) for v in ("config_file", "credentials_file")
        )
        fail(f"AWS profile {profile!r} not found in {files}")


def _namespace(model: Model) -> list[Model]:
    """The model and every registered model an audit or repair of it may read or write."""
    names = {c.name for c in constraints_of(model)}
    related = [model, *table_neighbours(model), *declaring(model, names)]
    return list(dict.fromkeys(m for m in related if issubclass(m, UniqueMixin)))


def point(model: Model, *, endpoint_url: str | None = None, region: str | None = None, renew: bool = False) -> None:
    """Point ``model`` (and the models sharing its tables) at an endpoint and a region.

    They override ``Meta.host`` and ``Meta.region``; cached connections are dropped so the next
    request uses them (with ``renew``, also when neither is given: a profile was chosen).
    """
    if not (endpoint_url or region or renew):
        return
    for member in _namespace(model):
        if endpoint_url:
            member.Meta.host = endpoint_url
        if region:
            member.Meta.region = region
        # Connections are cached on first use: drop any made with the model's own settings.
        forget_connection(member)
        context = context_of(member)
        if context is not None:
            context.forget_locks()


def load_model(
    path: str, endpoint: str | None = None, *, region: str | None = None, profile: str | None = None
) -> Model:
    """Import ``package.module:ClassName`` and point it at ``endpoint``, ``region`` and ``profile`` when given.

    Raises:
        click.ClickException: the path names no unique model (a name the module lacks is said so,
            with the module's UniqueMixin model classes), or no such profile (exit status 2).
    """
    module_name, _, class_name = path.partition(":")
    if not module_name or not class_name:
        fail(f"expected a model as package.module:ClassName, got {path!r}")
    if profile:
        use_profile(profile)
    # As alembic, flask and celery: the project folder the command runs in is importable.
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001 - any import failure is the user's model path.
        fail(f"cannot import {module_name!r}: {exc}")
    if not hasattr(module, class_name):
        # A misspelt name is told from a name that is no model, with the names that would do.
        models = sorted(
            name
            for name, value in vars(module).items()
            if isinstance(value, type) and issubclass(value, UniqueMixin) and value is not UniqueMixin
        )
        found = f"; its UniqueMixin model classes: {', '.join(models)}" if models else ""
        found = found or ", and no UniqueMixin model class"
        fail(f"module {module_name!r} has no name {class_name!r}{found}")
    model = getattr(module, class_name)
    if not (isinstance(model, type) and issubclass(model, UniqueMixin)):
        fail(f"{path!r} is not a UniqueMixin model class")
    point(model, endpoint_url=endpoint, region=region, renew=bool(profile))
    return model


def where(model: Model) -> str:
    """Where the model's requests go, for messages: ``at`` its endpoint URL, or ``in`` its AWS region.

    The endpoint is the one botocore resolved, so one set by ``AWS_ENDPOINT_URL`` or a profile
    is named too.
    """
    meta = model.Meta
    url, region = meta.host, meta.region
    try:
        client = connection(model).connection.client
        url, region = client.meta.endpoint_url, client.meta.region_name
    except Exception:  # noqa: BLE001, S110 - no client (no region, no profile): Meta says what it can.
        pass
    host = urlsplit(url).hostname or "" if url else ""
    if url and (meta.host or not host.endswith((".amazonaws.com", ".amazonaws.com.cn"))):
        return f"at {url} (region {region})" if region else f"at {url}"
    return f"in AWS region {region}" if region else "in AWS (no region set)"


def _causes(exc: BaseException) -> Iterator[BaseException]:
    """The exception, PynamoDB's ``cause`` and the chained exceptions behind it."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        cause = current.cause if isinstance(current, PynamoDBException) else None
        current = cause or current.__cause__ or current.__context__


def error_message(exc: PynamoDBException | BotoCoreError, model: Model) -> str:
    """One line a person understands for what DynamoDB or botocore refused, saying where it was sent."""
    place = where(model)
    causes = list(_causes(exc))
    if any(isinstance(c, PynamoDBException) and c.cause_response_code == "ResourceNotFoundException" for c in causes):
        meta = model.Meta
        locks = getattr(meta, "unique_lock_table", None)
        names = [name for name in dict.fromkeys((meta.table_name, locks)) if name]
        # DynamoDB does not say which table it missed: ask, and name only the missing one.
        tables = missing_tables(connection(model).connection, names) or names
        create = f"create it with pynamodb_unique.create_lock_table({model.__name__})"
        shown = [
            f"{name} (the lock table, Meta.unique_lock_table: {create})" if name == locks != meta.table_name else name
            for name in tables
        ]
        return f"table not found {place}: {' or '.join(shown)}"
    # botocore's own errors say it once: PynamoDB repeats them in its message, then as the cause.
    for error in causes:
        if isinstance(error, (NoCredentialsError, PartialCredentialsError)):
            return (
                f"no AWS credentials found for DynamoDB {place}: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "
                "pass --profile NAME, or configure ~/.aws/credentials (a local endpoint accepts any values)"
            )
        if isinstance(error, ProfileNotFound):
            return f"{error}: pass an existing --profile, or unset AWS_PROFILE"
        if isinstance(error, NoRegionError):
            return "no AWS region: pass --region, set the model's Meta.region, or set AWS_DEFAULT_REGION"
        if isinstance(error, EndpointConnectionError):
            return f"cannot connect to DynamoDB {place}: is a server listening there? (--endpoint-url sets it)"
    text = exc.msg if isinstance(exc, PynamoDBException) and exc.msg else str(exc) or type(exc).__name__
    cause = exc.cause if isinstance(exc, PynamoDBException) else None
    if cause is not None and str(cause) not in text:
        text = f"{text}: {cause}"
    return f"{text} (DynamoDB {place})"


@contextmanager
def errors(model: Model) -> Iterator[None]:
    """Turn what DynamoDB or the library refuses into one line and exit status 2."""
    try:
        yield
    except (UniqueError, ValueError) as exc:
        fail(str(exc))
    except (PynamoDBException, BotoCoreError) as exc:
        fail(error_message(exc, model))


def exit_with(clean: bool) -> NoReturn:
    """End the command: exit status 0 when ``clean``, 1 when problems were found or are left."""
    raise click.exceptions.Exit(EXIT_OK if clean else EXIT_PROBLEMS)
