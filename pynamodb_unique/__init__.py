"""Unique and compound-unique attributes for PynamoDB models, enforced in one transaction."""

from importlib.metadata import PackageNotFoundError, version

from . import streams as streams
from ._core.constraint import Former as Former
from ._core.constraint import UniqueAttribute as UniqueAttribute
from ._core.constraint import UniqueConstraint as UniqueConstraint
from ._iam import iam_policy as iam_policy
from ._mixin import UniqueMixin as UniqueMixin
from ._model.locks import create_lock_table as create_lock_table
from ._model.locks import is_lock_item as is_lock_item
from ._ops.audit import audit as audit
from ._ops.backfill import backfill as backfill
from ._ops.collect import AuditReport as AuditReport
from ._ops.collect import DuplicateValue as DuplicateValue
from ._ops.collect import ForeignLock as ForeignLock
from ._ops.collect import MissingLock as MissingLock
from ._ops.collect import OrphanedLock as OrphanedLock
from ._ops.collect import Problem as Problem
from ._ops.collect import RetiredLock as RetiredLock
from ._ops.collect import StaleLock as StaleLock
from ._ops.explain import Explanation as Explanation
from ._ops.explain import LockInfo as LockInfo
from ._ops.explain import explain as explain
from ._ops.explain import inspect as inspect
from ._ops.migrate import Conflict as Conflict
from ._ops.migrate import MigrationReport as MigrationReport
from ._ops.migrate import migrate as migrate
from ._ops.repair import Fix as Fix
from ._ops.repair import RepairReport as RepairReport
from ._ops.repair import repair as repair
from ._transact import TransactWrite as TransactWrite
from ._write.bulk import BulkResult as BulkResult
from ._write.bulk import bulk_save as bulk_save
from ._write.reserve import Reservation as Reservation
from .exceptions import ConditionFailed as ConditionFailed
from .exceptions import IdempotencyMismatch as IdempotencyMismatch
from .exceptions import InvalidUniqueValue as InvalidUniqueValue
from .exceptions import ReservationLost as ReservationLost
from .exceptions import StaleWrite as StaleWrite
from .exceptions import TableNotFound as TableNotFound
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
    "Reservation",
    "ReservationLost",
    "RetiredLock",
    "StaleLock",
    "StaleWrite",
    "TableNotFound",
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

# Reprs, tracebacks and docs show the public name (pynamodb_unique.TransactWrite), as httpx does.
for _name in __all__:
    _public = globals()[_name]
    if getattr(_public, "__module__", "").startswith("pynamodb_unique._"):
        _public.__module__ = __name__
del _name, _public
