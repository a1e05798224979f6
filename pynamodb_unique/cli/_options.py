"""The options the commands share, and what the commands that scan have in common.

:func:`scanning` gives a command MODEL with the connection, scan, export and output options and
hands it the model's audit (of a scan, or of an export with --from-export); :func:`connected`
gives MODEL and the connection options and hands it the loaded model; :func:`conclude` runs a
repair, backfill or migration, prints it, and exits.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, NoReturn, TypeVar

import click

from .._ops.audit import audit
from .._ops.collect import AuditReport
from ._common import Model, exit_with, fail, load_model
from ._output import DEFAULT_LIMIT, Output, output_of
from ._progress import scan_estimate, with_progress

R = TypeVar("R")


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


def _export_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """--from-export, --memory-limit and --temp-directory: the audit of a DynamoDB export instead of a scan."""
    options = (
        click.option(
            "--from-export",
            "exports",
            multiple=True,
            metavar="[TABLE=]PATH_OR_URL",
            help=(
                "Audit a DynamoDB export (DynamoDB JSON) instead of scanning: its folder or "
                "s3://bucket/prefix/AWSDynamoDB/<export id>/; TABLE=... once per table when the locks "
                "are in a table of their own. Needs the export extra."
            ),
        ),
        click.option(
            "--memory-limit",
            metavar="SIZE",
            help="DuckDB's memory limit for --from-export, e.g. 1GB  [default: 512MB]",
        ),
        click.option(
            "--temp-directory",
            type=click.Path(file_okay=False, dir_okay=True, writable=True),
            help="Where --from-export spills to disk  [default: a temporary folder]",
        ),
        click.option(
            "--workers",
            type=click.IntRange(1, 1024),
            metavar="N",
            help=(
                "Processes reading --from-export's data files, each with its own --memory-limit; "
                "the same report  [default: 1]"
            ),
        ),
    )
    for option in reversed(options):
        command = option(command)
    return command


#: A table name before "=" in --from-export (DynamoDB's table name characters, 3 to 255 of them).
_TABLE_PREFIX: Final = re.compile(r"^([A-Za-z0-9_.-]{3,255})=(.+)$")


def export_locations(values: tuple[str, ...]) -> str | dict[str, str] | None:
    """The --from-export values as ``audit(export=...)`` takes them: one location, or table name -> location.

    Raises:
        click.ClickException: a mix of TABLE=LOCATION and plain locations, or a table given twice (exit status 2).
    """
    if not values:
        return None
    pairs = [_TABLE_PREFIX.match(v) for v in values]
    if len(values) == 1 and pairs[0] is None:
        return values[0]
    if any(pair is None for pair in pairs):
        fail("with several --from-export options, give each as TABLE=PATH_OR_URL")
    mapping = {pair.group(1): pair.group(2) for pair in pairs if pair is not None}
    if len(mapping) != len(values):
        fail("--from-export names a table twice")
    return mapping


def _output_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """--json, --quiet, --limit and --all."""
    options = (
        click.option(
            "--json",
            "as_json",
            is_flag=True,
            help="Print one JSON document with every line (fields: docs/operating.md).",
        ),
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


#: MODEL, the first argument of every command.
model_argument = click.argument("model_path", metavar="MODEL")


@dataclass(frozen=True)
class Scanned:
    """What a command that scans starts from: the loaded model, how to print, the scan's segments and its audit."""

    model: Model
    output: Output
    segments: int
    report: AuditReport


def scanning(command: Callable[..., None]) -> Callable[..., None]:
    """MODEL, the connection, scan and output options; ``command`` gets the model's audit as an :class:`Scanned`.

    The output options are checked first, then the model is loaded, then scanned with a progress
    bar. ``command``'s own options (declared below this decorator) follow the common ones in --help.
    """

    @functools.wraps(command)
    def run(
        model_path: str,
        endpoint_url: str | None,
        region: str | None,
        profile: str | None,
        segments: int,
        max_rate: float | None,
        exports: tuple[str, ...],
        memory_limit: str | None,
        temp_directory: str | None,
        workers: int | None,
        as_json: bool,
        quiet: bool,
        limit: int | None,
        show_all: bool,
        **options: Any,
    ) -> None:
        output = output_of(as_json, quiet, limit, show_all)
        export = export_locations(exports)
        if export is None and (memory_limit or temp_directory or workers is not None):
            fail("--memory-limit, --temp-directory and --workers go with --from-export")
        if export is not None and max_rate is not None:
            fail("--max-rate paces a scan; --from-export reads no table")
        model = load_model(model_path, endpoint_url, region=region, profile=profile)

        def read(update: Callable[[int], None]) -> AuditReport:
            if export is None:
                return audit(model, segments=segments, max_rate=max_rate, progress=update)
            return audit(
                model,
                export=export,
                memory_limit=memory_limit,
                temp_directory=temp_directory,
                progress=update,
                workers=workers or 1,
            )

        total = scan_estimate(model) if output.progress and export is None else None
        report = with_progress("scan" if export is None else "export", model, read, total=total, show=output.progress)
        command(Scanned(model, output, segments, report), **options)

    return model_argument(_connection_options(_scan_options(_export_options(_output_options(run)))))


def connected(command: Callable[..., None]) -> Callable[..., None]:
    """MODEL and the connection options; ``command`` gets the loaded model (its own arguments and options follow)."""

    @functools.wraps(command)
    def run(model_path: str, endpoint_url: str | None, region: str | None, profile: str | None, **options: Any) -> None:
        command(load_model(model_path, endpoint_url, region=region, profile=profile), **options)

    return model_argument(_connection_options(run))


def conclude(
    label: str,
    scanned: Scanned,
    sends: int,
    run: Callable[[Callable[[int], None]], R],
    show: Callable[[R, Output], None],
    clean: Callable[[R], bool],
) -> NoReturn:
    """Run a repair, backfill or migration with a progress bar over the ``sends`` it writes, print it, and exit."""
    result = with_progress(label, scanned.model, run, total=sends, show=scanned.output.progress and bool(sends))
    show(result, scanned.output)
    exit_with(clean(result))
