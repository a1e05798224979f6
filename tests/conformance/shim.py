"""The ``Model`` the peer suite imports in mixin mode: PynamoDB's model with ``UniqueMixin`` first.

The harness rewrites ``from pynamodb.models import Model`` in the peer test files to
``from conformance.shim import Model``, so every peer test model becomes a ``UniqueMixin`` model
without a unique constraint. This class plays the part ``pynamodb.models.Model`` plays in the
peer tests: it declares no ``Meta`` and no keys (an abstract base, like PynamoDB's ``Model``),
and the tests that patch or call a class method on ``Model`` itself (``test_delete_with_wait``
patches ``Model.exists`` and ``Model._get_connection`` and calls ``Model.delete_table``) do so on
this class, which is what a user's own abstract base would see. ``pynamodb.models.Model`` itself
is left untouched.
"""

from __future__ import annotations

import pynamodb.models

from pynamodb_unique import UniqueMixin

__all__ = ["Model"]


class Model(UniqueMixin, pynamodb.models.Model):
    """A ``UniqueMixin`` model with no unique constraint, standing in for PynamoDB's ``Model``."""
