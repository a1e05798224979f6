"""Which stored numbers PynamoDB's ``TTLAttribute`` loads as a given whole second: a condition's bounds.

A check built from values a scan read (repair, migrate) compares an expiry within its whole
second instead of reading the record for its stored text (``Stored.ranged`` in :mod:`._plan`).
PynamoDB loads an expiry through a float, to the microsecond, and writes it back in whole
seconds; the bounds here are exactly the decimal numbers that load as the second, as DynamoDB
compares them (38 significant digits at most).
"""

from __future__ import annotations

import calendar
import functools
import math
import struct
from datetime import datetime
from decimal import Context, Decimal
from typing import Final

from pynamodb.attributes import TTLAttribute
from pynamodb.constants import NUMBER

#: The significant digits DynamoDB keeps of a number.
_DIGITS: Final = 38
#: Exact arithmetic on the decimal forms of doubles near an epoch (at most about 40 digits).
_EXACT: Final = Context(prec=80)


#: PynamoDB's own expiry attribute, whose load and write :func:`second_bounds` follows.
_TTL: Final = TTLAttribute()


def _loaded_second(number: float) -> int:
    """The whole second PynamoDB's ``TTLAttribute`` writes again for a stored number it reads as ``number``.

    Its load (6.1: through a float and ``datetime.fromtimestamp``, to the microsecond) and its
    write (the whole second), asked of PynamoDB itself; ``repr`` gives the float back exactly.
    """
    return int(_TTL.serialize(_TTL.deserialize(repr(number))))  # type: ignore[no-untyped-call] # unannotated.


@functools.lru_cache(maxsize=2048)
def _first_number_of(second: int) -> Decimal | None:
    """The least number, of at most 38 digits, that PynamoDB loads as ``second`` or later (None: none such).

    The first double that loads as ``second`` is found next to ``second - 0.0000005`` (the
    microsecond rounding, moved by the float's own rounding); a stored decimal reads as that
    double when it lies above the midpoint between it and the double below (at the midpoint, the
    double with the even last bit wins). Near zero the midpoint needs more digits than DynamoDB
    keeps: None.
    """
    try:
        first = float(second) - 0.0000005
        while _loaded_second(first) >= second:
            first = math.nextafter(first, -math.inf)
        while _loaded_second(first) < second:
            first = math.nextafter(first, math.inf)
    except (OverflowError, ValueError, OSError):  # Past the datetimes Python holds.
        return None
    below = math.nextafter(first, -math.inf)
    midpoint = _EXACT.divide(_EXACT.add(Decimal(below), Decimal(first)), 2)
    if struct.unpack("<q", struct.pack("<d", first))[0] & 1:
        # A decimal at the midpoint reads as the double below (its last bit is even): start just above.
        midpoint = _EXACT.add(midpoint, Decimal(1).scaleb(midpoint.adjusted() - _DIGITS + 1))
    if len(midpoint.normalize(_EXACT).as_tuple().digits) > _DIGITS:
        return None
    return midpoint.normalize(_EXACT)


def _second_bounds(second: int) -> tuple[dict[str, str], dict[str, str]] | None:
    low, high = _first_number_of(second), _first_number_of(second + 1)
    if low is None or high is None:
        return None
    return {NUMBER: _plain(low)}, {NUMBER: _plain(high)}


def _plain(number: Decimal) -> str:
    """A number as DynamoDB reads it, without an exponent."""
    return f"{number:f}"


def second_bounds(expiry: datetime) -> tuple[dict[str, str], dict[str, str]] | None:
    """The numbers a ``TTLAttribute`` loads as the whole second of ``expiry``: ``[low, high)`` as condition values.

    PynamoDB reads a stored expiry as a float, rounds it to the microsecond and writes the whole
    second of that, so the numbers that write a second again start about half a microsecond below
    it, where the float's own rounding puts the limit. None when a bound cannot be stated in
    DynamoDB's 38 digits (within about 48 days of 1970) or lies past the datetimes Python holds:
    such an expiry is read for its text instead.
    """
    return _second_bounds(calendar.timegm(expiry.utctimetuple()))
