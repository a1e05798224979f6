"""Turn unique values into lock keys.

A lock key is ``UNIQ#<NAME>#<encoded value>``. The encoding is injective: two different
(normalized) values or tuples never share a key, and equal numbers share one.

- A string part is kept as it is, with ``%`` written ``%25`` and ``#`` written ``%23``, so the
  seed's ``UNIQ#EMAIL#ada@lovelace.io`` comes out unchanged and ``#`` can separate the parts of
  a compound value.
- A number part is ``%N`` followed by its canonical decimal form (``1``, ``1.0`` and
  ``Decimal("1.00")`` all give ``%N1``).
- A binary part is ``%B`` followed by its URL-safe base64 form.
- A missing part of a constraint declared ``nulls_distinct=False`` is ``%0`` (:data:`NULL_PART`).
- Escaped strings only ever contain ``%`` as ``%25`` or ``%23``, so a string part can never
  spell ``%N``, ``%B``, the missing-part marker ``%0``, the digest marker ``%H`` or the
  keyed-digest marker ``%K``; and no part contains ``#``, so the joined parts split back apart.

DynamoDB limits a partition key to 2048 bytes of UTF-8. A key that would exceed it is replaced
by ``UNIQ#<NAME>#%H<sha256 hex of the plain key>``, a form the plain encoding never produces.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Sequence
from decimal import Context, Decimal, InvalidOperation
from typing import Final

from pynamodb.constants import BINARY, NUMBER, STRING

from ..exceptions import InvalidUniqueValue

LOCK_PREFIX: Final = "UNIQ#"
#: The sort key value of every lock item, in tables that have a sort key.
LOCK_RANGE_KEY: Final = "LOCK"
#: DynamoDB's limit on the size of a partition key value, in bytes of UTF-8.
MAX_PARTITION_KEY_BYTES: Final = 2048
DIGEST_MARKER: Final = "%H"
#: DynamoDB numbers: at most 38 significant digits, magnitude from 1E-130 to below 1E+126.
MAX_NUMBER_DIGITS: Final = 38
MIN_EXPONENT: Final = -130
MAX_EXPONENT: Final = 125
#: Marks the keyed digest of a hashed constraint: ``UNIQ#<NAME>#%K<hmac-sha256 hex>``.
HMAC_MARKER: Final = "%K"
#: The part of a missing value (None) under ``nulls_distinct=False``: no encoded value is ``%0``
#: (a string's ``%`` is always ``%25`` or ``%23``; numbers start ``%N``, binary ``%B``).
NULL_PART: Final = "%0"


def lock_prefix(name: str) -> str:
    """Return the key prefix shared by every lock of the constraint called ``name``."""
    return f"{LOCK_PREFIX}{name}#"


def canonical_number(value: str) -> str:
    """Return one canonical decimal string for every spelling of the same number.

    Args:
        value: a number as DynamoDB's ``N`` type carries it (a decimal string).

    Raises:
        InvalidUniqueValue: ``value`` is not a finite decimal number.
    """
    try:
        number = Decimal(value)
    except InvalidOperation:
        msg = f"{value!r} is not a number"
        raise InvalidUniqueValue(msg) from None
    if not number.is_finite():
        msg = f"{value!r} is not a finite number; DynamoDB cannot store it"
        raise InvalidUniqueValue(msg)
    if number.is_zero():
        # Decimal keeps the sign and exponent of zero ("-0", "0E+3"); they are all one number.
        return "0"
    # Exact: the default 28-digit context would round 10**29 + 1 onto 10**29.
    exact = number.normalize(Context(prec=len(number.as_tuple().digits)))
    if len(exact.as_tuple().digits) > MAX_NUMBER_DIGITS or not MIN_EXPONENT <= exact.adjusted() <= MAX_EXPONENT:
        msg = f"{value!r} is outside DynamoDB's numbers (38 significant digits, magnitude 1E-130 to below 1E+126)"
        raise InvalidUniqueValue(msg)
    return str(exact)


def encode_part(attr_type: str, serialized: object) -> str:
    """Encode one serialized DynamoDB value (``S``, ``N`` or ``B``) as a key part.

    Raises:
        InvalidUniqueValue: the type cannot be part of a lock key.
    """
    if attr_type == STRING and isinstance(serialized, str):
        if not serialized.isascii():  # ASCII holds no surrogate: the encoding check is skipped.
            try:
                serialized.encode("utf-8")
            except UnicodeEncodeError:
                msg = f"{serialized!r} is not valid Unicode (lone surrogate); DynamoDB cannot store it"
                raise InvalidUniqueValue(msg) from None
        if "%" not in serialized and "#" not in serialized:  # Most values: nothing to escape, nothing copied.
            return serialized
        return serialized.replace("%", "%25").replace("#", "%23")
    if attr_type == NUMBER and isinstance(serialized, str):
        return "%N" + canonical_number(serialized)
    if attr_type == BINARY and isinstance(serialized, (bytes, bytearray)):
        return "%B" + base64.urlsafe_b64encode(bytes(serialized)).decode("ascii")
    msg = f"a value of DynamoDB type {attr_type!r} ({type(serialized).__name__}) cannot be unique"
    raise InvalidUniqueValue(msg)


def lock_key(name: str, parts: Sequence[str]) -> str:
    """Return the lock key of a constraint for already encoded parts.

    Keys longer than DynamoDB's 2048-byte partition-key limit become a digest form.
    """
    return prefixed_lock_key(lock_prefix(name), parts)


def prefixed_lock_key(prefix: str, parts: Sequence[str]) -> str:
    """:func:`lock_key` for the constraint whose :func:`lock_prefix` is ``prefix`` (computed once by the caller)."""
    key = prefix + "#".join(parts)
    # DynamoDB's limit: a partition key of at most 2048 bytes of UTF-8.
    if len(key.encode("utf-8")) <= MAX_PARTITION_KEY_BYTES:
        return key
    digest = hashlib.sha256(key.encode("utf-8")).hexdigest()
    return prefix + DIGEST_MARKER + digest


def hashed_lock_key(name: str, parts: Sequence[str], secret: bytes) -> str:
    """Return the lock key of a hashed constraint: an HMAC-SHA256 of the encoded value.

    The whole normalized, encoded value (compound parts joined as in a plain key) is digested,
    so the key reveals nothing of it; equal values still share the key.
    """
    digest = hmac.new(secret, "#".join(parts).encode("utf-8"), hashlib.sha256).hexdigest()
    return lock_prefix(name) + HMAC_MARKER + digest
