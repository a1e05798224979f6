"""The ``pynamodb-unique`` command: audit, repair, backfill, migrate, explain and inspect a model's locks.

A thin shell over :func:`audit`, :func:`repair`, :func:`backfill`, :func:`migrate`, :func:`explain`,
:func:`inspect` and :func:`iam_policy`; it needs the ``cli`` extra (``pip install 'pynamodb-unique[cli]'``).
Exit status: 0 when nothing is wrong (or nothing is left to fix), 1 when problems are found or
remain, 2 for usage and configuration errors.
"""

from __future__ import annotations

import functools
import json
import sys

try:
    import click
    import tqdm  # noqa: F401 - checked here, beside click: the progress bars need it.
except ImportError as exc:  # pragma: no cover - only without the extra.
    sys.stderr.write(f"pynamodb-unique needs the cli extra: pip install 'pynamodb-unique[cli]' ({exc})\n")
    raise SystemExit(2) from None

from .._iam import iam_policy
from .._ops.backfill import backfill
from .._ops.collect import MissingLock
from .._ops.explain import explain, inspect
from .._ops.migrate import complete
from .._ops.repair import repair
from ._common import (
    EXIT_ERROR,
    EXIT_OK,
    EXIT_PROBLEMS,
    Model,
    error_message,
    errors,
    exit_with,
    fail,
    load_model,
    point,
    use_profile,
    where,
)
from ._options import Scanned, conclude, connected, model_argument, scanning
from ._output import (
    DEFAULT_LIMIT,
    OUTCOMES,
    Output,
    audit_counts,
    audit_document,
    fix_document,
    print_audit,
    print_fixes,
    print_migration,
)
from ._progress import scan_estimate
from ._values import assumption, json_object, read_values

# The names this module had before its helpers moved out, still importable from it.
__all__ = [
    "DEFAULT_LIMIT",
    "EXIT_ERROR",
    "EXIT_OK",
    "EXIT_PROBLEMS",
    "OUTCOMES",
    "Model",
    "Output",
    "audit_counts",
    "audit_document",
    "cli",
    "error_message",
    "fix_document",
    "load_model",
    "main",
    "point",
    "scan_estimate",
    "use_profile",
    "where",
]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="pynamodb-unique")
def cli() -> None:
    """Audit and repair the lock items of a pynamodb_unique model.

    MODEL is package.module:ClassName; its Meta gives table, region and host, which
    --endpoint-url, --region and --profile override as in the AWS CLI.
    Exit status: 0 nothing wrong, 1 problems found or left, 2 usage or configuration error.
    """


@cli.command("audit")
@scanning
def audit_command(scanned: Scanned) -> None:
    """Scan the table once and report lock problems per constraint.

    Kinds: orphaned (the owner is gone or holds another value), missing (a live value without
    its lock), foreign (the lock names another record than the holder), duplicate (records share
    a normalized value). Those needing a person come first (duplicate, foreign, orphaned, then
    missing). Past 20 problems only the first 20 are listed after the counts (--limit, --all).
    Exit status 1 when any is found. With --from-export no table is read: a DynamoDB export
    (DynamoDB JSON) is audited in bounded memory (the export extra).

    \b
    Example:
      pynamodb-unique audit myapp.models:Account --segments 4 --max-rate 100
      pynamodb-unique audit myapp.models:Account --endpoint-url http://localhost:8000 --json
      pynamodb-unique audit myapp.models:Account --from-export s3://bucket/prefix/AWSDynamoDB/<id>/
    """  # noqa: D301 - "\b" keeps click from rewrapping the example.
    print_audit(scanned.report, scanned.output)
    exit_with(scanned.report.clean)


@cli.command("repair")
@scanning
@click.option("--apply", is_flag=True, help="Write the fixes (without it: a dry run that writes nothing).")
@click.option(
    "--expired-reservations", is_flag=True, help="Also delete ended reservations (TTL would delete them later)."
)
def repair_command(scanned: Scanned, apply: bool, expired_reservations: bool) -> None:
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
    model, report = scanned.model, scanned.report
    sends = [p for p in report.problems if p.fixable] if apply else []
    run = functools.partial(repair, model, report, apply=apply, expired_reservations=expired_reservations)
    conclude("fix", scanned, len(sends), lambda update: run(progress=update), print_fixes, lambda r: r.clean)


@cli.command("backfill")
@scanning
@click.option("--apply", is_flag=True, help="Create the missing locks (without it: a dry run that writes nothing).")
def backfill_command(scanned: Scanned, apply: bool) -> None:
    """Create every missing lock, e.g. after adding a constraint to a table with records: a dry run unless --apply.

    Each lock is a conditional put checked against its record, whole records in transactions of
    up to 100 actions: safe to interrupt and re-run. Values held by several records get no lock
    and are listed first. Exit status 0 when nothing is left to fix.

    \b
    Example:
      pynamodb-unique backfill myapp.models:Account                                # what would be created
      pynamodb-unique backfill myapp.models:Account --apply --segments 8 --max-rate 500
    """  # noqa: D301 - "\b" keeps click from rewrapping the example.
    model, report = scanned.model, scanned.report
    sends = [p for p in report.problems if isinstance(p, MissingLock)] if apply else []
    run = functools.partial(backfill, model, report, apply=apply, segments=scanned.segments)
    conclude("backfill", scanned, len(sends), lambda update: run(progress=update), print_fixes, lambda r: r.clean)


@cli.command("migrate")
@scanning
@click.option("--apply", is_flag=True, help="Create the missing locks (without it: a dry run that writes nothing).")
def migrate_command(scanned: Scanned, apply: bool) -> None:
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
    model, report = scanned.model, scanned.report
    missing = sum(1 for p in report.problems if isinstance(p, MissingLock) and not p.former) if apply else 0
    run = functools.partial(complete, model, report, apply=apply, workers=scanned.segments)
    conclude("migrate", scanned, missing, lambda update: run(progress=update), print_migration, lambda r: r.done)


@cli.command("explain")
@model_argument
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
    item = read_values(model, json_object(item_json, "--item") or {}, "--item")
    stored = json_object(stored_json, "--stored")
    stored = read_values(model, stored, "--stored") if stored is not None else None
    assumed: str | None = None
    with errors(model):
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
        assumed = assumption(model, op, instance)
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
@connected
@click.argument("values", nargs=-1, required=True, metavar="NAME=VALUE...")
@click.option("--json", "as_json", is_flag=True, help="Print the lock as JSON.")
def inspect_command(model: Model, values: tuple[str, ...], as_json: bool) -> None:
    """Show one value's lock (owner, constraint) with strongly consistent reads.

    Name every attribute of one constraint, or a one-attribute constraint by its name
    (HANDLE=ada). Shows a release hold and its end, and a lock's expiry. Exit status 1 when
    the lock is orphaned (its owner does not hold the value) or names no owner.

    \b
    Example:
      pynamodb-unique inspect myapp.models:Account email=ada@lovelace.io
      pynamodb-unique inspect myapp.models:Account tenant=acme slug=home
    """  # noqa: D301 - "\b" keeps click from rewrapping the example.
    pairs = {}
    for pair in values:
        name, sep, value = pair.partition("=")
        if not sep:
            fail(f"expected NAME=VALUE, got {pair!r}")
        pairs[name] = value
    parsed = read_values(model, pairs, "", constraints=True)
    with errors(model):
        info = inspect(model, **parsed)
    click.echo(json.dumps(info.to_json(), indent=2) if as_json else info.describe())
    exit_with(info.healthy)


@cli.command("iam")
@click.argument("models", nargs=-1, required=True, metavar="MODEL...")
@click.option("--tools", is_flag=True, help="Add what audit, repair, backfill and migrate send.")
@click.option("--streams", is_flag=True, help="Add what streams.handle sends and a Lambda's stream reads.")
@click.option("--account", default="*", show_default=True, help="The AWS account ID in the ARNs.")
def iam_command(models: tuple[str, ...], tools: bool, streams: bool, account: str) -> None:
    """Print the IAM policy the models' tables need for what the library sends, as JSON.

    \b
    Example:
      pynamodb-unique iam myapp.models:Account --account 123456789012
      pynamodb-unique iam myapp.models:Account myapp.models:Ticket --tools --streams
    """  # noqa: D301 - "\b" keeps click from rewrapping the example.
    loaded = [load_model(path) for path in models]
    with errors(loaded[0]):
        policy = iam_policy(*loaded, tools=tools, streams=streams, account=account)
    click.echo(json.dumps(policy, indent=2))


def main() -> None:
    """Run the command (the ``pynamodb-unique`` entry point)."""
    cli(prog_name="pynamodb-unique")


if __name__ == "__main__":
    main()
