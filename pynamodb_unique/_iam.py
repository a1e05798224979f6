"""The IAM policy a unique model's code needs: each DynamoDB action the library sends, on the table it names.

A TransactWriteItems is authorized item by item: each ``Put``, ``Update``, ``Delete`` and
``ConditionCheck`` it holds needs ``PutItem``, ``UpdateItem``, ``DeleteItem`` and
``ConditionCheckItem`` on the item's table (``TransactWriteItems`` is no IAM action). The tables
below say what each path sends to a model's records table and to its lock table;
tests/ops/test_iam_policy.py records every path's requests and checks them against the policy.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any, Final

from botocore.exceptions import UnknownRegionError
from botocore.session import get_session
from pynamodb.models import Model

from ._mixin import UniqueMixin
from ._model.registry import lock_table_id, table_id
from .exceptions import UniqueConfigError

#: The roles a table plays for a model: it holds the model's records, its locks, or both.
RECORDS: Final = "records"
LOCKS: Final = "locks"

#: What the application's writes and reads through the library send, by table role.
RUNTIME: Final[dict[str, frozenset[str]]] = {
    RECORDS: frozenset(
        {
            # save(), update(), delete(): the record's own write, alone or in a transaction.
            "PutItem",
            "UpdateItem",
            "DeleteItem",
            # The stored record: a re-plan without an ALL_OLD item, the load after a lock-moving
            # update(), the owner inspect() reads.
            "GetItem",
            # bulk_save()'s check of a record found stored as given; TransactWrite.condition_check().
            "ConditionCheckItem",
            # Once per table in a process, before the first write: a global table in multi-Region
            # strong consistency takes no transaction and is refused.
            "DescribeTable",
        }
    ),
    LOCKS: frozenset(
        {
            # A value taken or reserved (a hold of a released value is a Put too), and given back
            # (a reservation released too).
            "PutItem",
            "DeleteItem",
            # A re-plan's check that a lock another record owns is still not this record's.
            "ConditionCheckItem",
            # unique_owner() and inspect() read one lock; validate_unique() all of a record's at once.
            "GetItem",
            "BatchGetItem",
            # Once per table in a process, before the first write (see the records table).
            "DescribeTable",
        }
    ),
}

#: What audit, repair, backfill and migrate (and the command running them) send, by table role.
TOOLS: Final[dict[str, frozenset[str]]] = {
    RECORDS: frozenset(
        {
            "Scan",
            # The command's progress bar: the table's ItemCount (optional: refused, no bar total).
            "DescribeTable",
            # migrate() reads a foreign lock's owner; repair() a record whose stored text it checks.
            "GetItem",
            # Every fix checks that its records are still as audited.
            "ConditionCheckItem",
        }
    ),
    LOCKS: frozenset({"Scan", "DescribeTable", "PutItem", "DeleteItem"}),
}

#: What ``streams.handle()`` sends, by table role: one consistent read, then repair's fixes.
STREAMS: Final[dict[str, frozenset[str]]] = {
    RECORDS: frozenset({"BatchGetItem", "ConditionCheckItem"}),
    LOCKS: frozenset({"BatchGetItem", "PutItem", "DeleteItem"}),
}

#: What a Lambda function's event source mapping reads from the records table's stream.
STREAM_READ: Final = frozenset({"DescribeStream", "GetRecords", "GetShardIterator"})
#: ListStreams takes no resource-level permission: IAM authorizes it on ``*`` only.
LIST_STREAMS: Final = frozenset({"ListStreams"})

#: Statement ids, in the order the statements are listed, by the roles of their tables.
_SIDS: Final = {
    frozenset({RECORDS, LOCKS}): "UniqueRecordsAndLocks",
    frozenset({RECORDS}): "UniqueRecords",
    frozenset({LOCKS}): "UniqueLocks",
}

_ACCOUNT: Final = re.compile(r"\d{12}")


def _checked(models: tuple[Any, ...], account: str) -> None:
    """Refuse what is not a unique model class with a table, and an account that is not one.

    Raises:
        TypeError: no model, or one that is not a ``UniqueMixin`` PynamoDB model class.
        UniqueConfigError: a model's Meta names no table.
        ValueError: ``account`` is neither ``*`` nor a 12-digit AWS account ID.
    """
    if not models:
        msg = "iam_policy() needs at least one UniqueMixin model class"
        raise TypeError(msg)
    for model in models:
        if not (isinstance(model, type) and issubclass(model, UniqueMixin) and issubclass(model, Model)):
            msg = f"iam_policy() takes UniqueMixin model classes, got {model!r}"
            raise TypeError(msg)
        if table_id(model) is None:
            msg = f"{model.__name__} names no table (Meta.table_name): an abstract model has no policy"
            raise UniqueConfigError(msg)
    if account != "*" and not _ACCOUNT.fullmatch(account):
        msg = f"account must be a 12-digit AWS account ID or '*', got {account!r}"
        raise ValueError(msg)


@cache
def _partition(region: str) -> str:
    """The region's partition (``aws``, ``aws-cn``, ``aws-us-gov``...), as botocore knows it."""
    if region == "*":
        return "aws"
    try:
        partition: str = get_session().get_partition_for_region(region)
    except UnknownRegionError:
        return "aws"  # A region botocore does not know yet (or a local endpoint's): the commercial one.
    return partition


def _table_arn(model: type[Model], table: str, account: str) -> str:
    """The ARN of ``table`` in ``model``'s region (``*`` when Meta sets none) and ``account``."""
    region = getattr(model.Meta, "region", None) or "*"
    return f"arn:{_partition(region)}:dynamodb:{region}:{account}:table/{table}"


def _statement(sid: str, actions: frozenset[str], resources: list[str]) -> dict[str, Any]:
    return {
        "Sid": sid,
        "Effect": "Allow",
        "Action": sorted(f"dynamodb:{action}" for action in actions),
        "Resource": sorted(resources),
    }


def iam_policy(
    *models: type[UniqueMixin], tools: bool = False, streams: bool = False, account: str = "*"
) -> dict[str, Any]:
    """The IAM policy document granting what the library sends for ``models``, and nothing more.

    Each model's records table and lock table (``Meta.unique_lock_table``, else its own table)
    get the actions the library sends there, as ``arn:PARTITION:dynamodb:REGION:ACCOUNT:table/NAME``
    with the region of ``Meta.region`` (which PynamoDB fills from its settings file when a Meta
    sets none). Unset there too, botocore picks the region where the application runs, so the
    ARN says ``*``. Tables with the same actions share one statement; actions and resources are
    sorted, so the same models give the same document. The application's own reads (``Query``,
    ``Scan``, indexes) are not included: add them as for any PynamoDB model.

    Args:
        models: ``UniqueMixin`` model classes.
        tools: add what ``audit``, ``repair``, ``backfill`` and ``migrate`` send (and the
            command's ``DescribeTable`` for its progress bar).
        streams: add what ``streams.handle`` sends, and what a Lambda function reading the
            records table's stream needs (``DescribeStream``, ``GetRecords``,
            ``GetShardIterator`` on ``table/NAME/stream/*``, and ``ListStreams``, which IAM
            authorizes on ``*`` only).
        account: the AWS account ID in the ARNs, or ``*``.

    Returns:
        A policy document: ``{"Version": "2012-10-17", "Statement": [...]}``.

    Raises:
        TypeError: no model, or one that is not a ``UniqueMixin`` model class.
        UniqueConfigError: a model's Meta names no table.
        ValueError: ``account`` is neither ``*`` nor a 12-digit account ID.
    """
    _checked(models, account)
    kinds = [RUNTIME, *([TOOLS] if tools else []), *([STREAMS] if streams else [])]
    roles: dict[str, set[str]] = {}
    for model in models:
        for role, table in ((RECORDS, table_id(model)), (LOCKS, lock_table_id(model))):
            roles.setdefault(_table_arn(model, str(table), account), set()).add(role)
    # Tables needing the same actions share a statement, named by the roles its tables play.
    grouped: dict[frozenset[str], tuple[set[str], list[str]]] = {}
    for arn, played in roles.items():
        actions = frozenset(action for kind in kinds for role in played for action in kind[role])
        named, arns = grouped.setdefault(actions, (set(), []))
        named.update(played)
        arns.append(arn)
    order = list(_SIDS.values())
    statements = sorted(
        (_statement(_SIDS[frozenset(named)], actions, arns) for actions, (named, arns) in grouped.items()),
        key=lambda statement: order.index(statement["Sid"]),
    )
    if streams:
        streamed = [f"{arn}/stream/*" for arn, played in roles.items() if RECORDS in played]
        statements.append(_statement("UniqueStreamRead", STREAM_READ, streamed))
        statements.append(_statement("UniqueListStreams", LIST_STREAMS, ["*"]))
    return {"Version": "2012-10-17", "Statement": statements}
