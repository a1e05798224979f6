"""The ``pynamodb-unique`` command: audit, repair, backfill, explain and inspect a model's locks.

A thin shell over :func:`audit`, :func:`repair`, :func:`backfill`, :func:`explain` and
:func:`inspect`; it needs the ``cli`` extra (``pip install 'pynamodb-unique[cli]'``).
Exit status: 0 when nothing is wrong (or nothing is left to fix), 1 when problems are found or
remain, 2 for usage and configuration errors.
"""

from __future__ import annotations

import base64
import binascii
import importlib
import json
import os
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Final, NoReturn

try:
    import click
    from tqdm import tqdm
except ImportError as exc:  # pragma: no cover - only without the extra.
    sys.stderr.write(f"pynamodb-unique needs the cli extra: pip install 'pynamodb-unique[cli]' ({exc})\n")
    raise SystemExit(2) from None

from botocore.exceptions import BotoCoreError, EndpointConnectionError
from pynamodb.attributes import Attribute
from pynamodb.constants import BINARY, NUMBER, STRING
from pynamodb.exceptions import PynamoDBException

from ._audit import PROBLEM_TYPES, AuditReport, audit
from ._context import context_of
from ._explain import explain, inspect
from ._mixin import UniqueMixin
from ._pynamodb import forget_connection
from ._repair import RepairReport, backfill, repair
from .exceptions import UniqueError

EXIT_OK: Final = 0
EXIT_PROBLEMS: Final = 1
EXIT_ERROR: Final = 2

Model = type[UniqueMixin]


class _Failure(click.ClickException):
    """A usage or configuration error: one line, exit status 2."""

    exit_code = EXIT_ERROR


def _fail(message: str) -> NoReturn:
    raise _Failure(message)


def load_model(path: str, endpoint: str | None = None) -> Model:
    """Import ``package.module:ClassName`` and point it at ``endpoint`` when given.

    Raises:
        click.ClickException: the path names no unique model (exit status 2).
    """
    module_name, _, class_name = path.partition(":")
    if not module_name or not class_name:
        _fail(f"expected a model as package.module:ClassName, got {path!r}")
    # As alembic, flask and celery: the project folder the command runs in is importable.
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001 - any import failure is the user's model path.
        _fail(f"cannot import {module_name!r}: {exc}")
    model = getattr(module, class_name, None)
    if not (isinstance(model, type) and issubclass(model, UniqueMixin)):
        _fail(f"{path!r} is not a UniqueMixin model class")
    if endpoint:
        model.Meta.host = endpoint
        # Connections are cached on first use: drop any made with the model's own host.
        forget_connection(model)
        context = context_of(model)
        if context is not None:
            context.forget_locks()
    return model


@contextmanager
def _errors(model: Model | None = None) -> Iterator[None]:
    """Turn what DynamoDB or the library refuses into one line and exit status 2."""
    try:
        yield
    except (UniqueError, ValueError) as exc:
        _fail(str(exc))
    except (PynamoDBException, BotoCoreError) as exc:
        cause = exc.cause if isinstance(exc, PynamoDBException) and exc.cause is not None else exc
        meta = model.Meta if model is not None else None
        where = (meta.host or f"AWS region {meta.region}") if meta is not None else "DynamoDB"
        if isinstance(exc, PynamoDBException) and exc.cause_response_code == "ResourceNotFoundException":
            tables = {meta.table_name, getattr(meta, "unique_lock_table", None) or meta.table_name} if meta else set()
            _fail(f"table not found at {where}: {' or '.join(sorted(t for t in tables if t))}")
        if isinstance(cause, EndpointConnectionError):
            _fail(f"cannot reach DynamoDB at {where}: {cause}")
        _fail(f"{getattr(exc, 'msg', type(exc).__name__)}: {cause}")


def _progress(label: str, total: int | None = None) -> tuple[Callable[[int], None], Callable[[], None]]:
    """A thread-safe progress bar on a terminal (stderr), nothing otherwise: (update, close)."""
    bar = tqdm(total=total, desc=label, unit=" items", file=sys.stderr, disable=not sys.stderr.isatty())
    lock = threading.Lock()

    def update(count: int) -> None:
        with lock:
            bar.update(count)

    return update, bar.close


def _audit(model: Model, segments: int, max_rate: float | None) -> AuditReport:
    update, close = _progress("scan")
    try:
        with _errors(model):
            return audit(model, segments=segments, max_rate=max_rate, progress=update)
    finally:
        close()


def _print_audit(report: AuditReport) -> None:
    where = report.table if report.lock_table == report.table else f"{report.table} (locks in {report.lock_table})"
    click.echo(
        f"{report.model} in {where}: {report.records} records, {report.locks} locks, {report.scanned} items scanned"
    )
    width = max(len("constraint"), *(len(name) for name in report.constraints))
    click.echo(f"{'constraint':<{width}}  " + "  ".join(f"{kind.kind:>9}" for kind in PROBLEM_TYPES))
    for name in report.constraints:
        counts = "  ".join(f"{report.count(name, kind):>9}" for kind in PROBLEM_TYPES)
        click.echo(f"{name:<{width}}  {counts}")
    for problem in report.problems:
        click.echo(f"  {problem.describe()}")
    count = len(report.problems)
    click.echo("clean: every lock matches a live value" if report.clean else f"{count} problem{'s' * (count != 1)}")


def _print_fixes(result: RepairReport) -> None:
    for fix in result.fixes:
        click.echo(f"  {fix.describe()}")
    outcomes = [fix.outcome for fix in result.fixes]
    counts = ", ".join(f"{outcomes.count(o)} {o}" for o in ("applied", "planned", "skipped", "left") if o in outcomes)
    if not result.applied and "planned" in outcomes:
        click.echo(f"dry run, nothing written: {counts}; run again with --apply to write")
    else:
        click.echo(f"done: {counts or 'nothing to do'}")


def _fix(
    label: str, model: Model, report: AuditReport, run: Callable[[Callable[[int], None]], RepairReport]
) -> NoReturn:
    """Run a repair or backfill with a progress bar, print what it did, and exit with its status."""
    update, close = _progress(label, total=len(report.problems))
    try:
        with _errors(model):
            result = run(update)
    finally:
        close()
    _print_fixes(result)
    _exit(result.clean)


def _exit(clean: bool) -> NoReturn:
    raise click.exceptions.Exit(EXIT_OK if clean else EXIT_PROBLEMS)


_model_arg = click.argument("model_path", metavar="MODEL")
_endpoint = click.option("--endpoint", metavar="URL", help="DynamoDB endpoint; overrides the model's Meta.host.")
_segments = click.option(
    "--segments", type=click.IntRange(1, 1_000_000), default=1, show_default=True, help="Parallel scan segments."
)
_max_rate = click.option(
    "--max-rate",
    type=click.FloatRange(min=0, min_open=True),
    metavar="RCU",
    help="Cap on read capacity units consumed per second by the scan.",
)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="pynamodb-unique")
def cli() -> None:
    """Audit and repair the lock items of a pynamodb_unique model.

    MODEL is package.module:ClassName; its Meta gives table, region and host.
    Exit status: 0 nothing wrong, 1 problems found or left, 2 usage or configuration error.
    """


@cli.command("audit")
@_model_arg
@_endpoint
@_segments
@_max_rate
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document listing only the problems.")
def audit_command(model_path: str, endpoint: str | None, segments: int, max_rate: float | None, as_json: bool) -> None:
    """Scan the table once and report lock problems per constraint.

    Kinds: orphaned (the owner is gone or holds another value), missing (a live value without
    its lock), foreign (the lock names another record than the holder), duplicate (records share
    a normalized value). Exit status 1 when any is found.

    \b
    Example:
      pynamodb-unique audit myapp.models:Account --segments 4 --max-rate 100
    """  # noqa: D301 - "\b" keeps click from rewrapping the example.
    model = load_model(model_path, endpoint)
    report = _audit(model, segments, max_rate)
    if as_json:
        click.echo(json.dumps(report.to_json(), indent=2))
    else:
        _print_audit(report)
    _exit(report.clean)


@cli.command("repair")
@_model_arg
@_endpoint
@_segments
@_max_rate
@click.option("--apply", is_flag=True, help="Write the fixes (without it: a dry run that writes nothing).")
def repair_command(model_path: str, endpoint: str | None, segments: int, max_rate: float | None, apply: bool) -> None:
    """Audit, then fix what is safely fixable: a dry run unless --apply.

    Each fix is one small transaction whose conditions check that the records and the lock are
    still as audited, so it cannot undo a concurrent change. Values held by several records are
    left for a person. Exit status 0 when nothing is left to fix.

    \b
    Example:
      pynamodb-unique repair myapp.models:Account            # what would change
      pynamodb-unique repair myapp.models:Account --apply    # change it
    """  # noqa: D301 - "\b" keeps click from rewrapping the example.
    model = load_model(model_path, endpoint)
    report = _audit(model, segments, max_rate)
    _print_audit(report)
    _fix("fix", model, report, lambda update: repair(model, report, apply=apply, progress=update))


@cli.command("backfill")
@_model_arg
@_endpoint
@_segments
@_max_rate
def backfill_command(model_path: str, endpoint: str | None, segments: int, max_rate: float | None) -> None:
    """Create every missing lock, e.g. after adding a constraint to a table with records.

    Each lock is a conditional put checked against its record: safe to interrupt and re-run.
    Values held by several records get no lock and are listed. Exit status 0 when nothing is
    left to fix.

    \b
    Example:
      pynamodb-unique backfill myapp.models:Account --segments 8 --max-rate 500
    """  # noqa: D301 - "\b" keeps click from rewrapping the example.
    model = load_model(model_path, endpoint)
    report = _audit(model, segments, max_rate)
    _fix("backfill", model, report, lambda update: backfill(model, report, segments=segments, progress=update))


def _python_value(attribute: Attribute[Any], value: Any) -> Any:
    """A JSON or command-line value as the attribute's Python value (binary as base64 text)."""
    if not isinstance(value, str):
        return value
    if attribute.attr_type == BINARY:
        try:
            return base64.b64decode(value, validate=True)
        except binascii.Error:
            _fail(f"{attribute.attr_name}: {value!r} is not base64")
    if attribute.attr_type not in (STRING, NUMBER):
        return value
    try:
        # A string or number attribute reads its own serialized form (numbers, dates, ...).
        return attribute.deserialize(value)
    except Exception as exc:  # noqa: BLE001 - any parse failure is the user's input.
        _fail(f"{attribute.attr_name}: cannot read {value!r}: {exc}")


def _values(model: Model, raw: dict[str, Any], option: str) -> dict[str, Any]:
    attributes = model.get_attributes()
    unknown = sorted(set(raw) - set(attributes))
    if unknown:
        _fail(f"{option}: {model.__name__} has no attribute {', '.join(unknown)}")
    return {name: _python_value(attributes[name], value) for name, value in raw.items()}


def _json_object(text: str | None, option: str) -> dict[str, Any] | None:
    if text is None:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        _fail(f"{option} is not JSON: {exc}")
    if not isinstance(value, dict):
        _fail(f"{option} must be a JSON object keyed by Python attribute names")
    return value


@cli.command("explain")
@_model_arg
@click.option("--op", type=click.Choice(["save", "update", "delete"]), required=True, help="The write to explain.")
@click.option("--item", "item_json", required=True, metavar="JSON", help="The record, keyed by Python attribute names.")
@click.option("--stored", "stored_json", metavar="JSON", help="The stored record, where the write depends on it.")
def explain_command(model_path: str, op: str, item_json: str, stored_json: str | None) -> None:
    """Print the exact request a write would send, as DynamoDB JSON; reads and writes nothing.

    For update, --item holds the key and the attributes to set (null removes one). The
    operation's name goes to stderr, the request to stdout.

    \b
    Example:
      pynamodb-unique explain myapp.models:Account --op save \\
        --item '{"pk": "ACCT#a1f9c3", "email": "ada@lovelace.io", "username": "ada"}'
    """  # noqa: D301 - "\b" keeps click from rewrapping the example.
    model = load_model(model_path)
    item = _values(model, _json_object(item_json, "--item") or {}, "--item")
    stored = _json_object(stored_json, "--stored")
    stored = _values(model, stored, "--stored") if stored is not None else None
    with _errors(model):
        if op == "update":
            keys = {n for n in item if model.get_attributes()[n].is_hash_key or model.get_attributes()[n].is_range_key}
            actions = [
                getattr(model, name).remove() if value is None else getattr(model, name).set(value)
                for name, value in item.items()
                if name not in keys
            ]
            instance = model(**{**(stored or {}), **{n: item[n] for n in keys}})
            explanation = explain(instance, "update", stored=stored, actions=actions)
        else:
            explanation = explain(model(**item), "save" if op == "save" else "delete", stored=stored)
    click.echo(f"{explanation.operation} request:", err=True)
    click.echo(explanation.to_json())


@cli.command("inspect")
@_model_arg
@click.argument("values", nargs=-1, required=True, metavar="NAME=VALUE...")
@_endpoint
@click.option("--json", "as_json", is_flag=True, help="Print the lock as JSON.")
def inspect_command(model_path: str, values: tuple[str, ...], endpoint: str | None, as_json: bool) -> None:
    """Show one value's lock (owner, constraint) with strongly consistent reads.

    Name every attribute of one constraint. Exit status 1 when the lock is orphaned (its owner
    does not hold the value) or names no owner.

    \b
    Example:
      pynamodb-unique inspect myapp.models:Account email=ada@lovelace.io
      pynamodb-unique inspect myapp.models:Account tenant=acme slug=home
    """  # noqa: D301 - "\b" keeps click from rewrapping the example.
    model = load_model(model_path, endpoint)
    pairs = {}
    for pair in values:
        name, sep, value = pair.partition("=")
        if not sep:
            _fail(f"expected NAME=VALUE, got {pair!r}")
        pairs[name] = value
    parsed = _values(model, pairs, "values")
    with _errors(model):
        info = inspect(model, **parsed)
    click.echo(json.dumps(info.to_json(), indent=2) if as_json else info.describe())
    _exit(not info.exists or bool(info.owner_holds))


def main() -> None:
    """Run the command (the ``pynamodb-unique`` entry point)."""
    cli(prog_name="pynamodb-unique")


if __name__ == "__main__":
    main()
