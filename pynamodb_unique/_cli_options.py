"""The options the commands share, and what the commands that scan have in common.

:func:`scanning` gives a command MODEL with the connection, scan and output options and hands it
the model's audit; :func:`connected` gives MODEL and the connection options and hands it the
loaded model; :func:`conclude` runs a repair, backfill or migration, prints it, and exits.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn, TypeVar

import click

from ._audit import AuditReport, audit
from ._cli_common import Model, exit_with, load_model
from ._cli_output import DEFAULT_LIMIT, Output, output_of
from ._cli_progress import scan_estimate, with_progress

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
        as_json: bool,
        quiet: bool,
        limit: int | None,
        show_all: bool,
        **options: Any,
    ) -> None:
        output = output_of(as_json, quiet, limit, show_all)
        model = load_model(model_path, endpoint_url, region=region, profile=profile)
        total = scan_estimate(model) if output.progress else None
        report = with_progress(
            "scan",
            model,
            lambda update: audit(model, segments=segments, max_rate=max_rate, progress=update),
            total=total,
            show=output.progress,
        )
        command(Scanned(model, output, segments, report), **options)

    return model_argument(_connection_options(_scan_options(_output_options(run))))


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
