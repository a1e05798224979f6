"""Unique and compound-unique attributes for PynamoDB models, enforced in one transaction."""

from importlib.metadata import PackageNotFoundError, version

from . import streams as streams
from ._audit import AuditReport as AuditReport
from ._audit import DuplicateValue as DuplicateValue
from ._audit import ForeignLock as ForeignLock
from ._audit import MissingLock as MissingLock
from ._audit import OrphanedLock as OrphanedLock
from ._audit import Problem as Problem
from ._audit import RetiredLock as RetiredLock
from ._audit import StaleLock as StaleLock
from ._audit import audit as audit
from ._bulk import BulkResult as BulkResult
from ._bulk import bulk_save as bulk_save
from ._constraint import Former as Former
from ._constraint import UniqueAttribute as UniqueAttribute
from ._constraint import UniqueConstraint as UniqueConstraint
from ._explain import Explanation as Explanation
from ._explain import LockInfo as LockInfo
from ._explain import explain as explain
from ._explain import inspect as inspect
from ._iam import iam_policy as iam_policy
from ._locks import create_lock_table as create_lock_table
from ._locks import is_lock_item as is_lock_item
from ._migrate import Conflict as Conflict
from ._migrate import MigrationReport as MigrationReport
from ._migrate import migrate as migrate
from ._mixin import UniqueMixin as UniqueMixin
from ._repair import Fix as Fix
from ._repair import RepairReport as RepairReport
from ._repair import backfill as backfill
from ._repair import repair as repair
from ._transact import TransactWrite as TransactWrite
from .exceptions import ConditionFailed as ConditionFailed
from .exceptions import IdempotencyMismatch as IdempotencyMismatch
from .exceptions import InvalidUniqueValue as InvalidUniqueValue
from .exceptions import StaleWrite as StaleWrite
from .exceptions import TransientError as TransientError
from .exceptions import UniqueConfigError as UniqueConfigError
from .exceptions import UniqueError as UniqueError
from .exceptions import UniqueViolation as UniqueViolation
from .exceptions import Violation as Violation

try:
    __version__ = version("pynamodb-unique")
except PackageNotFoundError:  # pragma: no cover - running from a checkout without installing.
    __version__ = "0.0.0"

__all__ = [
    "AuditReport",
    "BulkResult",
    "ConditionFailed",
    "Conflict",
    "DuplicateValue",
    "Explanation",
    "Fix",
    "ForeignLock",
    "Former",
    "IdempotencyMismatch",
    "InvalidUniqueValue",
    "LockInfo",
    "MigrationReport",
    "MissingLock",
    "OrphanedLock",
    "Problem",
    "RepairReport",
    "RetiredLock",
    "StaleLock",
    "StaleWrite",
    "TransactWrite",
    "TransientError",
    "UniqueAttribute",
    "UniqueConfigError",
    "UniqueConstraint",
    "UniqueError",
    "UniqueMixin",
    "UniqueViolation",
    "Violation",
    "__version__",
    "audit",
    "backfill",
    "bulk_save",
    "create_lock_table",
    "explain",
    "iam_policy",
    "inspect",
    "is_lock_item",
    "migrate",
    "repair",
    "streams",
]
