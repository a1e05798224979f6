"""The ``pynamodb-unique`` command: audit, repair, backfill, migrate, explain and inspect a model's locks.

A thin shell over :func:`audit`, :func:`repair`, :func:`backfill`, :func:`migrate`, :func:`explain`
and :func:`inspect`; it needs the ``cli`` extra (``pip install 'pynamodb-unique[cli]'``).
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
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any, Final, NoReturn
from urllib.parse import urlsplit

try:
    import click
    from tqdm import tqdm
except ImportError as exc:  # pragma: no cover - only without the extra.
    sys.stderr.write(f"pynamodb-unique needs the cli extra: pip install 'pynamodb-unique[cli]' ({exc})\n")
    raise SystemExit(2) from None

from botocore.exceptions import (
    BotoCoreError,
    EndpointConnectionError,
    NoCredentialsError,
    NoRegionError,
    PartialCredentialsError,
    ProfileNotFound,
)
from botocore.session import get_session
from pynamodb.attributes import Attribute
from pynamodb.constants import BINARY, BINARY_SET, BOOLEAN, LIST, MAP, NUMBER, NUMBER_SET, STRING, STRING_SET
from pynamodb.exceptions import PynamoDBException

from ._audit import PROBLEM_TYPES, AuditReport, MissingLock, Problem, RetiredLock, audit, jsonable
from ._context import context_of
from ._explain import explain, inspect
from ._migrate import MigrationReport, complete
from ._mixin import UniqueMixin
from ._pynamodb import connection, forget_connection
from ._registry import constraints_of, declaring, table_neighbours
from ._repair import Fix, RepairReport, backfill, repair
from .exceptions import UniqueError

EXIT_OK: Final = 0
EXIT_PROBLEMS: Final = 1
EXIT_ERROR: Final = 2

#: Problem or fix lines printed before a summary line takes over (about a screen).
DEFAULT_LIMIT: Final = 20

Model = type[UniqueMixin]

#: Credentials in the environment, which an explicit --profile overrides (as in the AWS CLI).
_ENV_CREDENTIALS: Final = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN")


class _Failure(click.ClickException):
    """A usage or configuration error: one line, exit status 2."""

    exit_code = EXIT_ERROR


def _fail(message: str) -> NoReturn:
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
        _fail(f"AWS profile {profile!r} not found in {files}")


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
        click.ClickException: the path names no unique model, or no such profile (exit status 2).
    """
    module_name, _, class_name = path.partition(":")
    if not module_name or not class_name:
        _fail(f"expected a model as package.module:ClassName, got {path!r}")
    if profile:
        use_profile(profile)
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
        tables = {meta.table_name, getattr(meta, "unique_lock_table", None) or meta.table_name}
        return f"table not found {place}: {' or '.join(sorted(t for t in tables if t))}"
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
def _errors(model: Model) -> Iterator[None]:
    """Turn what DynamoDB or the library refuses into one line and exit status 2."""
    try:
        yield
    except (UniqueError, ValueError) as exc:
        _fail(str(exc))
    except (PynamoDBException, BotoCoreError) as exc:
        _fail(error_message(exc, model))


# Progress on a terminal.


def scan_estimate(model: Model) -> int | None:
    """About how many items an audit of ``model`` scans: DescribeTable's ItemCount of its table and lock table.

    DynamoDB refreshes ItemCount about every six hours, so this is an estimate for a progress
    bar. None when unknown (no DescribeTable permission, a missing table, a count of 0).
    """
    try:
        total = int(model.describe_table().get("ItemCount") or 0)
        context = context_of(model)
        locks = context.locks() if context is not None else None
        if locks is not None and not locks.shared:
            total += int(locks.connection.describe_table().get("ItemCount") or 0)
    except (PynamoDBException, BotoCoreError):
        return None
    return total or None


def _progress(
    label: str, total: int | None = None, *, show: bool = True
) -> tuple[Callable[[int], None], Callable[[], None]]:
    """A thread-safe progress bar on a terminal (stderr), nothing otherwise or without ``show``: (update, close).

    With a ``total`` the bar shows a percentage and an estimated time left.
    """
    disable = not (show and sys.stderr.isatty())
    bar = tqdm(total=total, desc=label, unit=" items", file=sys.stderr, disable=disable)
    lock = threading.Lock()

    def update(count: int) -> None:
        with lock:
            bar.update(count)

    return update, bar.close


# Output: text (a summary past a screen), one final line (--quiet) or one JSON document (--json).


@dataclass(frozen=True)
class Output:
    """How a command prints its findings.

    Attributes:
        json: one JSON document on stdout.
        quiet: only the final line.
        limit: problem or fix lines printed before a summary line; None prints every one.
    """

    json: bool = False
    quiet: bool = False
    limit: int | None = DEFAULT_LIMIT

    @property
    def progress(self) -> bool:
        """Whether to draw a progress bar (on a terminal, and not when asked for quiet)."""
        return not self.quiet and sys.stderr.isatty()


def _output(as_json: bool, quiet: bool, limit: int | None, show_all: bool) -> Output:
    if as_json and quiet:
        _fail("--json and --quiet cannot be combined: --json prints one document, --quiet one line")
    if show_all and limit is not None:
        _fail("--all and --limit cannot be combined")
    return Output(json=as_json, quiet=quiet, limit=None if show_all else DEFAULT_LIMIT if limit is None else limit)


def _echo_limited(lines: Sequence[str], limit: int | None, what: tuple[str, str]) -> None:
    """Print ``lines``, or the first ``limit`` of them and how many more there are (``what``: singular, plural)."""
    shown = lines if limit is None else lines[:limit]
    for line in shown:
        click.echo(f"  {line}")
    hidden = len(lines) - len(shown)
    if hidden:
        click.echo(
            f"  ... and {hidden} more {what[hidden != 1]} (--limit N shows N, --all every one, --json all as JSON)"
        )


def audit_counts(report: AuditReport) -> dict[str, dict[str, int]]:
    """Problems per constraint and kind, every constraint and kind present (zeros included)."""
    return {name: {kind.kind: report.count(name, kind) for kind in PROBLEM_TYPES} for name in report.constraints}


def audit_document(report: AuditReport) -> dict[str, Any]:
    """``audit --json``: the report's numbers, the counts per constraint and kind, then every problem."""
    document = report.to_json()
    problems = document.pop("problems")
    return {
        **document,
        "constraints": list(report.constraints),
        "counts": audit_counts(report),
        "clean": report.clean,
        "problems": problems,
    }


def _audit_last_line(report: AuditReport) -> str:
    count = len(report.problems)
    return "clean: every lock matches a live value" if report.clean else f"{count} problem{'s' * (count != 1)}"


def _print_counts(report: AuditReport) -> None:
    """The audit's first line and its table of problems per constraint and kind."""
    where = report.table if report.lock_table == report.table else f"{report.table} (locks in {report.lock_table})"
    click.echo(
        f"{report.model} in {where}: {report.records} records, {report.locks} locks, {report.scanned} items scanned"
    )
    counts = audit_counts(report)
    rows = dict(counts)
    if len(counts) > 1:
        rows["total"] = {kind.kind: sum(c[kind.kind] for c in counts.values()) for kind in PROBLEM_TYPES}
    # Retired locks exist only after a constraint was renamed or dropped: their column only then.
    kinds = [k for k in PROBLEM_TYPES if k is not RetiredLock or any(isinstance(p, k) for p in report.problems)]
    width = max(len("constraint"), *(len(name) for name in rows))
    click.echo(f"{'constraint':<{width}}  " + "  ".join(f"{kind.kind:>9}" for kind in kinds))
    for name, row in rows.items():
        click.echo(f"{name:<{width}}  " + "  ".join(f"{row[kind.kind]:>9}" for kind in kinds))


def _print_audit(report: AuditReport, output: Output) -> None:
    if output.json:
        click.echo(json.dumps(audit_document(report), indent=2))
        return
    if not output.quiet:
        _print_counts(report)
        _echo_limited([p.describe() for p in report.problems], output.limit, ("problem", "problems"))
    click.echo(_audit_last_line(report))


OUTCOMES: Final = ("applied", "planned", "skipped", "left")
#: Fix lines needing a person come first, so a summary shows them.
_ATTENTION: Final = {"left": 0, "skipped": 1}


def fix_document(result: RepairReport) -> dict[str, Any]:
    """``repair --json`` and ``backfill --json``: the audit, then each fix and the counts of outcomes."""
    outcomes = [fix.outcome for fix in result.fixes]
    return {
        "audit": audit_document(result.audit),
        "applied": result.applied,
        "counts": {outcome: outcomes.count(outcome) for outcome in OUTCOMES},
        "clean": result.clean,
        "fixes": [_fix_json(fix) for fix in result.fixes],
    }


def _fix_json(fix: Fix) -> dict[str, Any]:
    return {"problem": fix.problem.to_json(), "action": fix.action, "outcome": fix.outcome, "reason": fix.reason}


def _fix_last_line(result: RepairReport) -> str:
    outcomes = [fix.outcome for fix in result.fixes]
    counts = ", ".join(f"{outcomes.count(o)} {o}" for o in OUTCOMES if o in outcomes)
    if not result.applied and "planned" in outcomes:
        return f"dry run, nothing written: {counts}; run again with --apply to write"
    return f"done: {counts or 'nothing to do'}"


def _print_fixes(result: RepairReport, output: Output) -> None:
    if output.json:
        click.echo(json.dumps(fix_document(result), indent=2))
        return
    if not output.quiet:
        _print_counts(result.audit)
        ordered = sorted(result.fixes, key=lambda fix: _ATTENTION.get(fix.outcome, 2))
        _echo_limited([fix.describe() for fix in ordered], output.limit, ("fix", "fixes"))
    click.echo(_fix_last_line(result))


# Commands.


def _audit(model: Model, segments: int, max_rate: float | None, output: Output) -> AuditReport:
    total = scan_estimate(model) if output.progress else None
    update, close = _progress("scan", total=total, show=output.progress)
    try:
        with _errors(model):
            return audit(model, segments=segments, max_rate=max_rate, progress=update)
    finally:
        close()


def _fix(
    label: str,
    model: Model,
    report: AuditReport,
    sends: Sequence[Problem],
    output: Output,
    run: Callable[[Callable[[int], None]], RepairReport],
) -> NoReturn:
    """Run a repair or backfill with a progress bar over the fixes it sends, print what it did, and exit."""
    update, close = _progress(label, total=len(sends), show=output.progress and bool(sends))
    try:
        with _errors(model):
            result = run(update)
    finally:
        close()
    _print_fixes(result, output)
    _exit(result.clean)


def _exit(clean: bool) -> NoReturn:
    raise click.exceptions.Exit(EXIT_OK if clean else EXIT_PROBLEMS)


def _connection_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """--endpoint-url (alias --endpoint), --region and --profile, as in the AWS CLI."""
    options = (
        click.option(
            "--endpoint-url",
            "--endpoint",
            "endpoint_url",
            metavar="URL",
            help="DynamoDB endpoint, e.g. http://localhost:8000; overrides the model's Meta.host.",
        ),
        click.option("--region", metavar="REGION", help="AWS region; overrides the model's Meta.region."),
        click.option(
            "--profile",
            metavar="NAME",
            help="AWS profile of ~/.aws/config and ~/.aws/credentials; wins over credentials in the environment.",
        ),
    )
    for option in reversed(options):
        command = option(command)
    return command


def _scan_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """--segments and --max-rate."""
    command = click.option(
        "--max-rate",
        type=click.FloatRange(min=0, min_open=True),
        metavar="RCU",
        help="Cap on read capacity units consumed per second by the scan.",
    )(command)
    return click.option(
        "--segments", type=click.IntRange(1, 1_000_000), default=1, show_default=True, help="Parallel scan segments."
    )(command)


def _output_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """--json, --quiet, --limit and --all."""
    options = (
        click.option("--json", "as_json", is_flag=True, help="Print one JSON document with every line (see README)."),
        click.option("--quiet", "-q", is_flag=True, help="Print only the final line; the exit status tells the rest."),
        click.option(
            "--limit",
            type=click.IntRange(min=0),
            metavar="N",
            help=f"Problem or fix lines to print before summing up the rest  [default: {DEFAULT_LIMIT}]",
        ),
        click.option("--all", "show_all", is_flag=True, help="Print every problem or fix line."),
    )
    for option in reversed(options):
        command = option(command)
    return command


_model_arg = click.argument("model_path", metavar="MODEL")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="pynamodb-unique")
def cli() -> None:
    """Audit and repair the lock items of a pynamodb_unique model.

    MODEL is package.module:ClassName; its Meta gives table, region and host, which
    --endpoint-url, --region and --profile override as in the AWS CLI.
    Exit status: 0 nothing wrong, 1 problems found or left, 2 usage or configuration error.
    """


@cli.command("audit")
@_model_arg
@_connection_options
@_scan_options
@_output_options
def audit_command(
    model_path: str,
    endpoint_url: str | None,
    region: str | None,
    profile: str | None,
    segments: int,
    max_rate: float | None,
    as_json: bool,
    quiet: bool,
    limit: int | None,
    show_all: bool,
) -> None:
    """Scan the table once and report lock problems per constraint.

    Kinds: orphaned (the owner is gone or holds another value), missing (a live value without
    its lock), foreign (the lock names another record than the holder), duplicate (records share
    a normalized value). Past 20 problems only the first 20 are listed after the counts (--limit,
    --all). Exit status 1 when any is found.

    \b
    Example:
      pynamodb-unique audit myapp.models:Account --segments 4 --max-rate 100
      pynamodb-unique audit myapp.models:Account --endpoint-url http://localhost:8000 --json
    """  # noqa: D301 - "\b" keeps click from rewrapping the example.
    output = _output(as_json, quiet, limit, show_all)
    model = load_model(model_path, endpoint_url, region=region, profile=profile)
    report = _audit(model, segments, max_rate, output)
    _print_audit(report, output)
    _exit(report.clean)


@cli.command("repair")
@_model_arg
@_connection_options
@_scan_options
@_output_options
@click.option("--apply", is_flag=True, help="Write the fixes (without it: a dry run that writes nothing).")
def repair_command(
    model_path: str,
    endpoint_url: str | None,
    region: str | None,
    profile: str | None,
    segments: int,
    max_rate: float | None,
    as_json: bool,
    quiet: bool,
    limit: int | None,
    show_all: bool,
    apply: bool,
) -> None:
    """Audit, then fix what is safely fixable: a dry run unless --apply.

    Each fix is one small transaction whose conditions check that the records and the lock are
    still as audited, so it cannot undo a concurrent change. Values held by several records are
    left for a person; fixes left or skipped are listed first. Exit status 0 when nothing is
    left to fix.

    \b
    Example:
      pynamodb-unique repair myapp.models:Account            # what would change
      pynamodb-unique repair myapp.models:Account --apply    # change it
    """  # noqa: D301 - "\b" keeps click from rewrapping the example.
    output = _output(as_json, quiet, limit, show_all)
    model = load_model(model_path, endpoint_url, region=region, profile=profile)
    report = _audit(model, segments, max_rate, output)
    sends = [p for p in report.problems if p.fixable] if apply else []
    _fix("fix", model, report, sends, output, lambda update: repair(model, report, apply=apply, progress=update))


@cli.command("backfill")
@_model_arg
@_connection_options
@_scan_options
@_output_options
def backfill_command(
    model_path: str,
    endpoint_url: str | None,
    region: str | None,
    profile: str | None,
    segments: int,
    max_rate: float | None,
    as_json: bool,
    quiet: bool,
    limit: int | None,
    show_all: bool,
) -> None:
    """Create every missing lock, e.g. after adding a constraint to a table with records.

    Each lock is a conditional put checked against its record: safe to interrupt and re-run.
    Values held by several records get no lock and are listed first. Exit status 0 when nothing
    is left to fix.

    \b
    Example:
      pynamodb-unique backfill myapp.models:Account --segments 8 --max-rate 500
    """  # noqa: D301 - "\b" keeps click from rewrapping the example.
    output = _output(as_json, quiet, limit, show_all)
    model = load_model(model_path, endpoint_url, region=region, profile=profile)
    report = _audit(model, segments, max_rate, output)
    sends = [p for p in report.problems if isinstance(p, MissingLock)]
    _fix(
        "backfill",
        model,
        report,
        sends,
        output,
        lambda update: backfill(model, report, segments=segments, progress=update),
    )


def _migration_last_line(report: MigrationReport) -> str:
    outcomes = [fix.outcome for fix in report.fixes]
    conflicts = len(report.conflicts)
    parts = [f"{conflicts} conflict{'s' * (conflicts != 1)}"] if conflicts else []
    if outcomes.count("skipped"):
        parts.append(f"{outcomes.count('skipped')} not created")
    if report.left:
        parts.append(f"{len(report.left)} left for repair")
    if not report.applied and "planned" in outcomes:
        planned = outcomes.count("planned")
        todo = ", ".join([f"{planned} lock{'s' * (planned != 1)} to create", *parts])
        return f"dry run, nothing written: {todo}; run again with --apply to write"
    if report.done:
        return f"done: {report.created} created; every record holds its current-form locks"
    return f"not done: {', '.join([f'{report.created} created', *parts])}; resolve them, then run migrate again"


def _print_migration(report: MigrationReport, output: Output) -> None:
    if output.json:
        click.echo(json.dumps(report.to_json(), indent=2))
        return
    if not output.quiet:
        click.echo(f"{report.model} in {report.table}: {report.records} records, {report.scanned} items scanned")
        click.echo(f"current-form locks missing: {report.missing}, created: {report.created}")
        lines = [c.describe() for c in report.conflicts]
        lines += [fix.describe() for fix in report.fixes if fix.outcome == "skipped"]
        lines += [f"left: {p.describe()} (run repair)" for p in report.left]
        _echo_limited(lines, output.limit, ("line", "lines"))
    click.echo(_migration_last_line(report))


@cli.command("migrate")
@_model_arg
@_connection_options
@_scan_options
@_output_options
@click.option("--apply", is_flag=True, help="Create the missing locks (without it: a dry run that writes nothing).")
def migrate_command(
    model_path: str,
    endpoint_url: str | None,
    region: str | None,
    profile: str | None,
    segments: int,
    max_rate: float | None,
    as_json: bool,
    quiet: bool,
    limit: int | None,
    show_all: bool,
    apply: bool,
) -> None:
    """Give every record its current-form locks after a constraint changed: a dry run unless --apply.

    Run it once every writer runs the model with former= (or declaring a constraint added to a
    table with records). One scan; each missing lock is put on condition that it is free or the
    record's own, checked against the record, so it is safe to interrupt and re-run while the
    application writes. Records whose values collide under the current form get no lock and are
    listed as conflicts: a person decides. Exit status 0 when every record holds its current-form
    locks and no conflict is left.

    \b
    Example:
      pynamodb-unique migrate myapp.models:Account                       # what would change
      pynamodb-unique migrate myapp.models:Account --apply --segments 8
    """  # noqa: D301 - "\b" keeps click from rewrapping the example.
    output = _output(as_json, quiet, limit, show_all)
    model = load_model(model_path, endpoint_url, region=region, profile=profile)
    report = _audit(model, segments, max_rate, output)
    missing = sum(1 for p in report.problems if isinstance(p, MissingLock) and not p.former) if apply else 0
    update, close = _progress("migrate", total=missing, show=output.progress and bool(missing))
    try:
        with _errors(model):
            result = complete(model, report, apply=apply, workers=segments, progress=update)
    finally:
        close()
    _print_migration(result, output)
    _exit(result.done)


# Values typed on the command line or given as JSON.

#: What a JSON value must look like for each DynamoDB type, for messages.
_EXPECTED: Final = {
    STRING: "a string",
    NUMBER: "a number",
    BINARY: "base64 text",
    BOOLEAN: "true or false",
    MAP: "a JSON object",
    LIST: "a JSON array",
    STRING_SET: "an array of strings",
    NUMBER_SET: "an array of numbers",
    BINARY_SET: "an array of base64 texts",
}


def _label(option: str) -> str:
    """The start of a message about a value of ``option`` (none for inspect's NAME=VALUE arguments)."""
    return f"{option}: " if option else ""


def _is_number(text: Any) -> bool:
    try:
        return isinstance(text, str) and Decimal(text).is_finite()
    except InvalidOperation:
        return False


def _serializes_as(attr_type: str, value: Any, serialized: Any) -> bool:
    """Whether ``serialized`` is what DynamoDB accepts for ``attr_type`` (PynamoDB passes some values unchecked)."""
    members = list(serialized) if isinstance(serialized, (list, set, frozenset)) else None
    checks: dict[str, Callable[[], bool]] = {
        STRING: lambda: isinstance(serialized, str),
        NUMBER: lambda: not isinstance(value, bool) and _is_number(serialized),
        BINARY: lambda: isinstance(serialized, bytes),
        BOOLEAN: lambda: isinstance(serialized, bool),
        MAP: lambda: isinstance(serialized, dict),
        LIST: lambda: isinstance(serialized, list),
        STRING_SET: lambda: members is not None and all(isinstance(m, str) for m in members),
        NUMBER_SET: lambda: members is not None and all(_is_number(m) for m in members),
        BINARY_SET: lambda: members is not None and all(isinstance(m, bytes) for m in members),
    }
    check = checks.get(attr_type)
    return check is None or check()


def _python_value(name: str, attribute: Attribute[Any], value: Any, option: str) -> Any:
    """A JSON or command-line value as the attribute's Python value (binary as base64 text).

    Raises:
        click.ClickException: the value cannot be the attribute's (exit status 2).
    """
    kind = f"{type(attribute).__name__} (DynamoDB type {attribute.attr_type})"
    expected = _EXPECTED.get(attribute.attr_type, "its type")
    if value is None:
        return None
    parsed = value
    if isinstance(value, str) and attribute.attr_type == BINARY:
        try:
            parsed = base64.b64decode(value, validate=True)
        except binascii.Error:
            _fail(f"{_label(option)}{name} is a {kind}: expected base64 text, got {value!r}")
    elif isinstance(value, str) and attribute.attr_type in (STRING, NUMBER):
        try:
            # A string or number attribute reads its own serialized form (numbers, dates, ...).
            parsed = attribute.deserialize(value)
        except Exception as exc:  # noqa: BLE001 - any parse failure is the user's input.
            _fail(f"{_label(option)}{name} is a {kind}: cannot read {value!r}: {exc}")
    try:
        serialized = attribute.serialize(parsed)
    except Exception:  # noqa: BLE001 - any refusal is the user's input.
        serialized = _NOT_SERIALIZED
    if serialized is _NOT_SERIALIZED or not _serializes_as(attribute.attr_type, parsed, serialized):
        _fail(f"{_label(option)}{name} is a {kind}: expected {expected}, got {json.dumps(jsonable(value))}")
    return parsed


_NOT_SERIALIZED: Final = object()


def _accepted(model: Model) -> str:
    """The names ``inspect`` accepts, for messages."""
    return "; ".join(f"{c.name}: {', '.join(c.attributes)}" for c in constraints_of(model))


def _unknown_name(model: Model, name: str, option: str, *, constraints: bool) -> NoReturn:
    """Say why ``name`` is not an attribute, and what would be accepted."""
    attributes = model.get_attributes()
    constraint = next((c for c in constraints_of(model) if c.name == name), None)
    stored = next((n for n, a in attributes.items() if a.attr_name == name), None)
    if constraint is not None:
        parts = ", ".join(constraint.attributes)
        if constraints:
            example = " ".join(f"{a}=..." for a in constraint.attributes)
            _fail(f"{_label(option)}{name} is the constraint on {parts}: name each of its attributes, as {example}")
        _fail(f"{_label(option)}{name} is a constraint name, not an attribute: it constrains {parts}")
    if stored is not None:
        _fail(f"{_label(option)}{name} is the stored name of {stored}: use Python attribute names, as {stored}")
    if constraints:
        _fail(
            f"{_label(option)}{model.__name__} has no unique attribute or constraint named {name}; "
            f"name the attributes of one constraint, or a one-attribute constraint by its name ({_accepted(model)})"
        )
    _fail(f"{_label(option)}{model.__name__} has no attribute {name}; its attributes: {', '.join(attributes)}")


def _values(model: Model, raw: dict[str, Any], option: str, *, constraints: bool = False) -> dict[str, Any]:
    """Values keyed by Python attribute names (or, with ``constraints``, one-attribute constraint names), typed.

    Raises:
        click.ClickException: an unknown name or a value of the wrong type (exit status 2).
    """
    attributes = model.get_attributes()
    single = {c.name: c.attributes[0] for c in constraints_of(model) if len(c.attributes) == 1} if constraints else {}
    values: dict[str, Any] = {}
    for given, value in raw.items():
        name = given if given in attributes else single.get(given)
        if name is None:
            _unknown_name(model, given, option, constraints=constraints)
        if name in values:
            _fail(f"{_label(option)}{name} is given twice")
        values[name] = _python_value(name, attributes[name], value, option)
    return values


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


def _assumption(model: Model, op: str, instance: UniqueMixin) -> str:
    """What ``explain`` assumes is stored when not told (``--stored``), as the write itself would."""
    if op == "save":
        return "assuming no record is stored under this key (a new record); pass --stored JSON to plan an overwrite"
    context = context_of(model)
    held = context.values(instance) if context is not None else {}
    shown = ", ".join(f"{name}={value!r}" for name, value in held.items() if value is not None)
    unset = ", ".join(name for name, value in held.items() if value is None)
    holds = shown or f"no unique value ({unset} unset)"
    if shown and unset:
        holds = f"{shown} and no other unique value ({unset} unset)"
    return f"assuming the stored record holds {holds}; pass --stored JSON to plan against the stored item"


@cli.command("explain")
@_model_arg
@click.option("--op", type=click.Choice(["save", "update", "delete"]), required=True, help="The write to explain.")
@click.option("--item", "item_json", required=True, metavar="JSON", help="The record, keyed by Python attribute names.")
@click.option("--stored", "stored_json", metavar="JSON", help="The stored record, where the write depends on it.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document: operation, request, assumption.")
def explain_command(model_path: str, op: str, item_json: str, stored_json: str | None, as_json: bool) -> None:
    """Print the exact request a write would send, as DynamoDB JSON; reads and writes nothing.

    For update, --item holds the key and the attributes to set (null removes one). Values are
    checked against the model's attribute types. Without --stored, what the write assumes is
    stored is said on stderr. The operation's name goes to stderr, the request to stdout.

    \b
    Example:
      pynamodb-unique explain myapp.models:Account --op save \\
        --item '{"pk": "ACCT#a1f9c3", "email": "ada@lovelace.io", "username": "ada"}'
    """  # noqa: D301 - "\b" keeps click from rewrapping the example.
    model = load_model(model_path)
    item = _values(model, _json_object(item_json, "--item") or {}, "--item")
    stored = _json_object(stored_json, "--stored")
    stored = _values(model, stored, "--stored") if stored is not None else None
    assumed: str | None = None
    with _errors(model):
        if op == "update":
            attributes = model.get_attributes()
            keys = {n for n in item if attributes[n].is_hash_key or attributes[n].is_range_key}
            actions = [
                getattr(model, name).remove() if value is None else getattr(model, name).set(value)
                for name, value in item.items()
                if name not in keys
            ]
            instance = model(**{**(stored or {}), **{n: item[n] for n in keys}})
            explanation = explain(instance, "update", stored=stored, actions=actions)
        else:
            instance = model(**item)
            explanation = explain(instance, "save" if op == "save" else "delete", stored=stored)
    # A plain UpdateItem touches no unique attribute: what is stored does not change it.
    if stored is None and explanation.operation != "UpdateItem":
        assumed = _assumption(model, op, instance)
        click.echo(f"note: {assumed}", err=True)
    if as_json:
        document = {
            "operation": explanation.operation,
            "request": json.loads(explanation.to_json()),
            "assumed": assumed,
        }
        click.echo(json.dumps(document, indent=2))
        return
    click.echo(f"{explanation.operation} request:", err=True)
    click.echo(explanation.to_json())


@cli.command("inspect")
@_model_arg
@click.argument("values", nargs=-1, required=True, metavar="NAME=VALUE...")
@_connection_options
@click.option("--json", "as_json", is_flag=True, help="Print the lock as JSON.")
def inspect_command(
    model_path: str,
    values: tuple[str, ...],
    endpoint_url: str | None,
    region: str | None,
    profile: str | None,
    as_json: bool,
) -> None:
    """Show one value's lock (owner, constraint) with strongly consistent reads.

    Name every attribute of one constraint, or a one-attribute constraint by its name
    (HANDLE=ada). Exit status 1 when the lock is orphaned (its owner does not hold the value)
    or names no owner.

    \b
    Example:
      pynamodb-unique inspect myapp.models:Account email=ada@lovelace.io
      pynamodb-unique inspect myapp.models:Account tenant=acme slug=home
    """  # noqa: D301 - "\b" keeps click from rewrapping the example.
    model = load_model(model_path, endpoint_url, region=region, profile=profile)
    pairs = {}
    for pair in values:
        name, sep, value = pair.partition("=")
        if not sep:
            _fail(f"expected NAME=VALUE, got {pair!r}")
        pairs[name] = value
    parsed = _values(model, pairs, "", constraints=True)
    with _errors(model):
        info = inspect(model, **parsed)
    click.echo(json.dumps(info.to_json(), indent=2) if as_json else info.describe())
    _exit(not info.exists or bool(info.owner_holds))


def main() -> None:
    """Run the command (the ``pynamodb-unique`` entry point)."""
    cli(prog_name="pynamodb-unique")


if __name__ == "__main__":
    main()
