"""Unique and compound-unique attributes for PynamoDB models, enforced in one transaction."""

from importlib.metadata import PackageNotFoundError, version

from ._constraint import UniqueAttribute as UniqueAttribute
from ._constraint import UniqueConstraint as UniqueConstraint
from ._locks import create_lock_table as create_lock_table
from ._mixin import UniqueMixin as UniqueMixin
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
    "ConditionFailed",
    "IdempotencyMismatch",
    "InvalidUniqueValue",
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
    "create_lock_table",
]
