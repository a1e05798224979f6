"""A griffe extension for the API reference: Sphinx roles in docstrings become Markdown.

The package's docstrings write cross-references as Sphinx roles (``:class:`UniqueViolation```,
``:func:`repair```, ``:meth:`unique_owner```), which mkdocstrings would print as they are. Each
becomes a link to the API page's entry when it names a public name of ``pynamodb_unique``, and
inline code otherwise. Loaded by mkdocs.yml (mkdocstrings' ``extensions`` option).
"""

from __future__ import annotations

import re
from typing import Any

import griffe

import pynamodb_unique

#: ``:role:`target``` with an optional ``~`` (Sphinx's "show only the last component").
ROLE = re.compile(r":(?:py:)?(?:class|func|meth|attr|exc|obj|data|mod):`~?([\w.]+)`")
PUBLIC = frozenset(pynamodb_unique.__all__)


def markdown(match: re.Match[str]) -> str:
    """The Markdown for one role: a link to a public name's entry, or inline code."""
    target = match.group(1).removeprefix("pynamodb_unique.")
    if target in PUBLIC:
        return f"[`{target}`][pynamodb_unique.{target}]"
    return f"`{target.rsplit('.', 1)[-1]}`"


class SphinxRoles(griffe.Extension):
    """Rewrites the Sphinx roles of every docstring griffe loads."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        """Rewrite ``obj``'s docstring in place."""
        if obj.docstring is not None:
            obj.docstring.value = ROLE.sub(markdown, obj.docstring.value)
