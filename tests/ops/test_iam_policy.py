"""iam_policy() and ``pynamodb-unique iam``: real IAM actions, granting every request each path sends.

Every action of every generated policy is checked against AWS's published catalogue of IAM
actions and their resource types (policy_sentry ships it). Each path (writes, re-plans, reads,
transactions, bulk imports, the tools, the Streams handler) runs with every DynamoDB request
recorded; each request is mapped to the IAM actions AWS authorizes it by (a TransactWriteItems
item by item) and must be granted on the table it names.
"""

from __future__ import annotations

import fnmatch
import itertools
import json
import re
from collections.abc import Callable, Iterator
from functools import cache
from typing import Any

import pytest
from _backends import Backend, Call, RequestCounter, undescribed
from _damage import ADA, ADA_TWIN, GHOST, GRACE, bind_accounts, client, damage, lock_table_name, put_lock, put_record
from click.testing import CliRunner
from models import Account, Versioned
from policy_sentry.querying.actions import get_action_data, get_actions_for_service
from pynamodb.attributes import UnicodeAttribute
from pynamodb.models import Model

from pynamodb_unique import (
    TransactWrite,
    UniqueAttribute,
    UniqueConfigError,
    UniqueMixin,
    UniqueViolation,
    audit,
    backfill,
    bulk_save,
    iam_policy,
    inspect,
    migrate,
    repair,
    streams,
)
from pynamodb_unique._iam import LOCKS, RECORDS, RUNTIME, STREAMS, TOOLS
from pynamodb_unique.cli import cli
from pynamodb_unique.cli._progress import scan_estimate

ACCOUNT = "123456789012"
FLAGS = list(itertools.product([False, True], repeat=2))


class Ticket(UniqueMixin, Model):
    """Locks in a table of their own, in another region (tables named for this module: the registry is per process)."""

    class Meta:
        table_name = "iam-tickets"
        region = "eu-west-1"
        unique_lock_table = "iam-ticket-locks"

    id = UnicodeAttribute(hash_key=True)
    code = UniqueAttribute(UnicodeAttribute())


class Regionless(UniqueMixin, Model):
    """No Meta.region: botocore picks it where the application runs."""

    class Meta:
        table_name = "iam-regionless"

    id = UnicodeAttribute(hash_key=True)
    code = UniqueAttribute(UnicodeAttribute())


class Beijing(UniqueMixin, Model):
    """In the China partition."""

    class Meta:
        table_name = "iam-beijing"
        region = "cn-north-1"
        unique_lock_table = "iam-beijing-locks"

    id = UnicodeAttribute(hash_key=True)
    code = UniqueAttribute(UnicodeAttribute())


class Abstract(UniqueMixin, Model):
    """No table."""

    id = UnicodeAttribute(hash_key=True)


# --- (a) the catalogue ---------------------------------------------------------------------


@cache
def _catalogue() -> dict[str, list[re.Pattern[str]]]:
    """Each DynamoDB IAM action AWS publishes, with the resource ARNs it can be granted on."""
    formats: dict[str, list[re.Pattern[str]]] = {}
    for action in get_actions_for_service("dynamodb"):
        rows = get_action_data("dynamodb", action.split(":", 1)[1])["dynamodb"]
        formats[action] = [
            re.compile("".join(r"[^:/]+" if part.startswith("${") else re.escape(part) for part in _parts(arn)))
            for arn in (row["resource_arn_format"] for row in rows)
        ]
    return formats


def _parts(arn: str) -> list[str]:
    """An ARN format split into literals and ``${Placeholder}``s."""
    return [part for part in re.split(r"(\$\{[^}]+\})", arn) if part]


def _statements(policy: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(action, resource) of every statement of ``policy``."""
    for statement in policy["Statement"]:
        assert statement["Effect"] == "Allow"
        for action in statement["Action"]:
            for resource in statement["Resource"]:
                yield action, resource


@pytest.mark.parametrize(("tools", "streams"), FLAGS)
@pytest.mark.parametrize(
    "models",
    [(Account,), (Versioned,), (Ticket,), (Regionless,), (Beijing,), (Account, Ticket, Versioned)],
    ids=lambda models: "+".join(m.__name__ for m in models),
)
def test_iam_policy__every_action_is_in_the_iam_catalogue_on_its_resource_type(
    models: tuple[type[UniqueMixin], ...], tools: bool, streams: bool
) -> None:
    """Each action exists in AWS's list of IAM actions, granted on a resource type it takes."""
    catalogue = _catalogue()
    for account in ("*", ACCOUNT):
        policy = iam_policy(*models, tools=tools, streams=streams, account=account)
        assert policy["Version"] == "2012-10-17"
        for action, resource in _statements(policy):
            assert action in catalogue, f"{action} is not an IAM action"
            assert any(f.fullmatch(resource) for f in catalogue[action]), f"{action} cannot be granted on {resource}"


def test_iam_policy__runtime_only__no_scan_no_stream_reads() -> None:
    """Without tools and streams: no Scan, nothing on a stream; DescribeTable (the MRSC check) on every table."""
    policy = iam_policy(Account, Ticket)
    actions = {action for action, _ in _statements(policy)}
    assert "dynamodb:Scan" not in actions
    assert all("dynamodb:DescribeTable" in statement["Action"] for statement in policy["Statement"])
    assert not actions & {"dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:ListStreams"}
    assert "dynamodb:Scan" in {action for action, _ in _statements(iam_policy(Account, tools=True))}


def test_iam_policy__separate_lock_table__each_table_its_own_actions() -> None:
    """Records and locks in two tables: UpdateItem on the records only, BatchGetItem on the locks only."""
    policy = iam_policy(Ticket, account=ACCOUNT)
    records = "arn:aws:dynamodb:eu-west-1:123456789012:table/iam-tickets"
    locks = "arn:aws:dynamodb:eu-west-1:123456789012:table/iam-ticket-locks"
    assert policy["Statement"] == [
        {
            "Sid": "UniqueRecords",
            "Effect": "Allow",
            "Action": [f"dynamodb:{a}" for a in sorted(RUNTIME[RECORDS])],
            "Resource": [records],
        },
        {
            "Sid": "UniqueLocks",
            "Effect": "Allow",
            "Action": [f"dynamodb:{a}" for a in sorted(RUNTIME[LOCKS])],
            "Resource": [locks],
        },
    ]
    assert "dynamodb:UpdateItem" not in policy["Statement"][1]["Action"]
    assert "dynamodb:BatchGetItem" not in policy["Statement"][0]["Action"]


def test_iam_policy__streams__stream_arn_of_the_records_table_and_list_streams_on_any() -> None:
    """The stream read actions on the records table's streams; ListStreams on ``*``, the only resource it takes."""
    statements = {s["Sid"]: s for s in iam_policy(Ticket, streams=True)["Statement"]}
    assert statements["UniqueStreamRead"]["Resource"] == ["arn:aws:dynamodb:eu-west-1:*:table/iam-tickets/stream/*"]
    assert statements["UniqueStreamRead"]["Action"] == [
        "dynamodb:DescribeStream",
        "dynamodb:GetRecords",
        "dynamodb:GetShardIterator",
    ]
    assert statements["UniqueListStreams"]["Resource"] == ["*"]


def test_iam_policy__region_and_partition() -> None:
    """The region of Meta; ``*`` without one; the partition of the region (China, GovCloud)."""
    assert iam_policy(Regionless)["Statement"][0]["Resource"] == ["arn:aws:dynamodb:*:*:table/iam-regionless"]
    arns = [r for s in iam_policy(Beijing)["Statement"] for r in s["Resource"]]
    assert arns == [
        "arn:aws-cn:dynamodb:cn-north-1:*:table/iam-beijing",
        "arn:aws-cn:dynamodb:cn-north-1:*:table/iam-beijing-locks",
    ]


def test_iam_policy__deterministic__sorted_and_independent_of_model_order() -> None:
    """The same models in any order give the same document, actions and resources sorted."""
    first = iam_policy(Account, Ticket, Versioned, tools=True, streams=True)
    assert json.dumps(first) == json.dumps(iam_policy(Versioned, Ticket, Account, tools=True, streams=True))
    for statement in first["Statement"]:
        assert statement["Action"] == sorted(set(statement["Action"]))
        assert statement["Resource"] == sorted(set(statement["Resource"]))
    sids = [s["Sid"] for s in first["Statement"]]
    assert len(set(sids)) == len(sids)
    assert all(re.fullmatch("[A-Za-z0-9]+", sid) for sid in sids)


@pytest.mark.parametrize(
    ("models", "error", "match"),
    [
        ((), TypeError, "at least one"),
        ((Account(pk="a"),), TypeError, "UniqueMixin model classes"),
        ((Model,), TypeError, "UniqueMixin model classes"),
        ((UniqueMixin,), UniqueConfigError, "names no table"),
        (("myapp.models:Account",), TypeError, "UniqueMixin model classes"),
        ((Abstract,), UniqueConfigError, "names no table"),
    ],
)
def test_iam_policy__not_a_unique_model_class__refused(
    models: tuple[Any, ...], error: type[Exception], match: str
) -> None:
    """Anything but a unique model class with a table is refused, naming what was given."""
    with pytest.raises(error, match=match):
        iam_policy(*models)


@pytest.mark.parametrize("account", ["12345678901", "1234567890123", "acct", "", "12345678901*"])
def test_iam_policy__bad_account__refused(account: str) -> None:
    """An account ID is 12 digits, or ``*``."""
    with pytest.raises(ValueError, match="12-digit"):
        iam_policy(Account, account=account)


def test_cli_iam__prints_the_policy_as_json() -> None:
    """``pynamodb-unique iam MODEL... --tools --streams --account ID`` prints iam_policy()'s document."""
    runner = CliRunner()
    result = runner.invoke(
        cli, ["iam", "models:Account", "test_iam_policy:Ticket", "--tools", "--streams", "--account", ACCOUNT]
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == iam_policy(Account, Ticket, tools=True, streams=True, account=ACCOUNT)
    assert result.output == json.dumps(json.loads(result.output), indent=2) + "\n"
    refused = runner.invoke(cli, ["iam", "models:Account", "--account", "12"])
    assert refused.exit_code == 2
    assert "12-digit" in refused.output
    assert runner.invoke(cli, ["iam", "models:Nothing"]).exit_code == 2


# --- (b) what each path sends, granted ------------------------------------------------------

#: The IAM action of each kind of TransactWriteItems item.
_ITEM_ACTIONS = {
    "Put": "PutItem",
    "Update": "UpdateItem",
    "Delete": "DeleteItem",
    "ConditionCheck": "ConditionCheckItem",
}


def _needed(calls: list[Call]) -> set[tuple[str, str]]:
    """(IAM action, table name) of every request, as AWS authorizes it."""
    needed = set()
    for call in calls:
        params = call.params
        if call.operation == "TransactWriteItems":
            for item in params["TransactItems"]:
                ((kind, body),) = item.items()
                needed.add((_ITEM_ACTIONS[kind], body["TableName"]))
        elif call.operation in ("BatchGetItem", "BatchWriteItem"):
            needed.update((call.operation, table) for table in params["RequestItems"])
        else:
            needed.add((call.operation, params["TableName"]))
    return needed


def _granted(policy: dict[str, Any], action: str, arn: str) -> bool:
    """Whether ``policy`` allows ``action`` on ``arn`` (``*`` and ``?`` match as IAM matches them)."""
    return any(a == f"dynamodb:{action}" and fnmatch.fnmatchcase(arn, r) for a, r in _statements(policy))


# Each path: set up (not recorded), then the returned call is what runs with its requests recorded.
Act = Callable[[], object]


def _create(model: type[Account]) -> Act:
    return lambda: model(pk=ADA[0], email="ada@lovelace.io", username="ada", tenant="acme", slug="ada").save()


def _saved(model: type[Account]) -> Account:
    ada = model(pk=ADA[0], email="ada@lovelace.io", username="ada", tenant="acme", slug="ada")
    ada.save()
    return ada


def _change(model: type[Account]) -> Act:
    ada = _saved(model)

    def act() -> None:
        ada.email = "countess@lovelace.io"
        ada.save()
        ada.update(actions=[model.username.set("countess")])  # Moves a lock: a transaction, then a read.
        ada.update(actions=[model.bio.set("poet")])  # Moves none: PynamoDB's UpdateItem.

    return act


def _delete(model: type[Account]) -> Act:
    return _saved(model).delete


def _replan_stale(model: type[Account]) -> Act:
    _saved(model)
    stale = model.get(*ADA)
    fresh = model.get(*ADA)
    fresh.email = "countess@lovelace.io"
    fresh.save()

    def act() -> None:
        stale.email = "lovelace@analytical.engine"
        stale.save()

    return act


def _replan_foreign(model: type[Account]) -> Act:
    ada = _saved(model)
    # Another record's lock on Ada's email (a bypassing writer): her release fails, the re-plan checks it.
    put_lock(model, "UNIQ#EMAIL#ada@lovelace.io", GHOST, "EMAIL")

    def act() -> None:
        ada.email = "countess@lovelace.io"
        ada.save()

    return act


def _validate_unique(model: type[Account]) -> Act:
    _saved(model)

    def act() -> None:
        with pytest.raises(UniqueViolation):
            model(pk=GRACE[0], email="ADA@lovelace.io", username="ada").validate_unique()

    return act


def _unique_owner(model: type[Account]) -> Act:
    _saved(model)
    return lambda: model.unique_owner(email="ada@lovelace.io")


def _inspect(model: type[Account]) -> Act:
    _saved(model)
    return lambda: inspect(model, email="ada@lovelace.io")


def _transact(model: type[Account]) -> Act:
    ada = _saved(model)
    grace = model(pk=GRACE[0], email="grace@hopper.dev", username="grace")
    grace.save()

    def act() -> None:
        with TransactWrite() as tx:
            tx.save(model(pk=ADA_TWIN[0], email="twin@lovelace.io", username="twin"))
            tx.update(ada, actions=[model.email.set("countess@lovelace.io")])
            tx.delete(grace)
            tx.condition_check(model, *GHOST, condition=model.pk.does_not_exist())

    return act


def _bulk_save(model: type[Account]) -> Act:
    people = [model(pk=f"P{i}", email=f"p{i}@x.io", username=f"p{i}") for i in range(3)]
    # One record stored as given without its locks: bulk_save() checks it, then puts its locks.
    client(model).put_item(TableName=model.Meta.table_name, Item=people[1].serialize())
    return lambda: bulk_save([model(pk=f"P{i}", email=f"p{i}@x.io", username=f"p{i}") for i in range(3)])


def _audit(model: type[Account]) -> Act:
    damage(model)

    def act() -> None:
        audit(model)
        scan_estimate(model)  # The command's progress bar: DescribeTable.

    return act


def _repair(model: type[Account]) -> Act:
    damage(model)
    report = audit(model)
    return lambda: repair(model, report, apply=True)


def _backfill(model: type[Account]) -> Act:
    damage(model)
    report = audit(model)
    return lambda: backfill(model, report)


def _migrate(model: type[Account]) -> Act:
    damage(model)
    return lambda: migrate(model, apply=True)


def _stream_record(model: type[Account], name: str, old: Any = None, new: Any = None) -> dict[str, Any]:
    """One stream record in Lambda's format (string attributes only: no base64 to apply)."""
    image = new if new is not None else old
    images = {"OldImage": old, "NewImage": new}
    return {
        "eventID": f"{name}-{image['PK']['S']}",
        "eventName": name,
        "eventSource": "aws:dynamodb",
        "dynamodb": {
            "Keys": {k: image[k] for k in ("PK", "SK")},
            "StreamViewType": "NEW_AND_OLD_IMAGES",
            **{k: v for k, v in images.items() if v is not None},
        },
        "eventSourceARN": f"arn:aws:dynamodb:us-east-1:{ACCOUNT}:table/{model.Meta.table_name}/stream/x",
    }


def _stored(model: type[Account], key: tuple[str, str]) -> dict[str, Any]:
    found = client(model).get_item(
        TableName=model.Meta.table_name, Key={"PK": {"S": key[0]}, "SK": {"S": key[1]}}, ConsistentRead=True
    )
    item: dict[str, Any] = found["Item"]
    return item


def _streams(model: type[Account]) -> Act:
    _saved(model)
    gone = _stored(model, ADA)
    client(model).delete_item(TableName=model.Meta.table_name, Key={"PK": {"S": ADA[0]}, "SK": {"S": ADA[1]}})
    put_record(model, GRACE, email="grace@hopper.dev", username="grace")
    inserted = _stored(model, GRACE)
    event = {"Records": [_stream_record(model, "REMOVE", old=gone), _stream_record(model, "INSERT", new=inserted)]}
    return lambda: streams.handle(model, event)


#: name -> (which policy covers it, set-up, the IAM actions it must send: proof it ran the path).
PATHS: dict[str, tuple[str, Callable[[type[Account]], Act], set[str]]] = {
    "create": ("runtime", _create, {"PutItem"}),
    "change": ("runtime", _change, {"PutItem", "DeleteItem", "UpdateItem", "GetItem"}),
    "delete": ("runtime", _delete, {"DeleteItem"}),
    "replan-stale": ("runtime", _replan_stale, {"PutItem", "DeleteItem"}),
    "replan-foreign": ("runtime", _replan_foreign, {"ConditionCheckItem", "DeleteItem", "PutItem"}),
    "validate_unique": ("runtime", _validate_unique, {"BatchGetItem"}),
    "unique_owner": ("runtime", _unique_owner, {"GetItem"}),
    "inspect": ("runtime", _inspect, {"GetItem"}),
    "TransactWrite": ("runtime", _transact, set(_ITEM_ACTIONS.values())),
    "bulk_save": ("runtime", _bulk_save, {"ConditionCheckItem", "PutItem"}),
    "audit": ("tools", _audit, {"Scan", "DescribeTable"}),
    "repair": ("tools", _repair, {"ConditionCheckItem", "PutItem", "DeleteItem"}),
    "backfill": ("tools", _backfill, {"ConditionCheckItem", "PutItem"}),
    "migrate": ("tools", _migrate, {"Scan", "GetItem", "ConditionCheckItem", "PutItem"}),
    "streams.handle": ("streams", _streams, {"BatchGetItem", "ConditionCheckItem", "PutItem", "DeleteItem"}),
}


def _run(path: str, model: type[Account]) -> tuple[set[tuple[str, str]], int]:
    """Set up ``path`` on ``model``, run it recorded: (IAM action, table) of each request, transactions sent."""
    act = PATHS[path][1](model)
    if PATHS[path][0] == "runtime":
        undescribed(model)  # A process's first write: the once-per-table DescribeTable is recorded too.
    with RequestCounter() as counter:
        act()
    return _needed(counter.calls), counter.count("TransactWriteItems")


def _policy_for(kind: str, model: type[Account]) -> dict[str, Any]:
    """The narrowest policy meant to cover a path of ``kind``."""
    return iam_policy(model, tools=kind == "tools", streams=kind == "streams", account=ACCOUNT)


@pytest.mark.parametrize("separate", [False, True], ids=["shared", "separate"])
@pytest.mark.parametrize("path", list(PATHS))
def test_path__every_request_is_granted_on_its_table(backend: Backend, path: str, separate: bool) -> None:
    """Each request the path sends maps to IAM actions the policy of its kind grants on the table it names."""
    model = bind_accounts(backend, separate=separate)
    kind, _, proof = PATHS[path]
    needed, transactions = _run(path, model)
    assert proof <= {action for action, _ in needed}, f"{path} did not send {proof}: {sorted(needed)}"
    if path.startswith("replan"):
        assert transactions == 2  # The first plan, cancelled; the re-plan.
    tables = {model.Meta.table_name, lock_table_name(model)}
    policy = _policy_for(kind, model)
    for action, table in sorted(needed):
        assert table in tables
        arn = f"arn:aws:dynamodb:{model.Meta.region}:{ACCOUNT}:table/{table}"
        assert _granted(policy, action, arn), f"{path}: {action} on {table} is not granted"


def test_paths__policy_grants_exactly_what_the_paths_send(moto_backend: None) -> None:
    """With records and locks apart, each kind's paths together send every action granted to each table, no more."""
    sent: dict[str, dict[str, set[str]]] = {
        kind: {RECORDS: set(), LOCKS: set()} for kind in ("runtime", "tools", "streams")
    }
    for path, (kind, _, _) in PATHS.items():
        model = bind_accounts(Backend("moto", None), separate=True)
        roles = {model.Meta.table_name: RECORDS, lock_table_name(model): LOCKS}
        for action, table in _run(path, model)[0]:
            sent[kind][roles[table]].add(action)
    assert sent == {
        "runtime": {role: set(actions) for role, actions in RUNTIME.items()},
        "tools": {role: set(actions) for role, actions in TOOLS.items()},
        "streams": {role: set(actions) for role, actions in STREAMS.items()},
    }
