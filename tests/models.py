"""Models shared by the tests; bind them to a backend with ``_backends.bind_model``."""

from __future__ import annotations

from pynamodb.attributes import NumberAttribute, UnicodeAttribute, VersionAttribute
from pynamodb.models import Model

from pynamodb_unique import UniqueAttribute, UniqueConstraint, UniqueMixin


class Account(UniqueMixin, Model):
    """The issue's example: unique email (case-folded), username and (tenant, slug)."""

    class Meta:
        table_name = "accounts"
        region = "us-east-1"
        unique_constraints = [UniqueConstraint("tenant", "slug", name="TENANT_SLUG")]

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    sk = UnicodeAttribute(range_key=True, attr_name="SK", default="PROFILE")
    email = UniqueAttribute(UnicodeAttribute(), normalize=str.casefold)
    username = UniqueAttribute(UnicodeAttribute(null=True), name="HANDLE")
    tenant = UnicodeAttribute(null=True)
    slug = UnicodeAttribute(null=True)
    bio = UnicodeAttribute(null=True)
    visits = NumberAttribute(null=True)


class Versioned(UniqueMixin, Model):
    """A hash-key-only table with optimistic locking."""

    class Meta:
        table_name = "versioned"
        region = "us-east-1"

    id = UnicodeAttribute(hash_key=True)
    handle = UniqueAttribute(UnicodeAttribute(null=True))
    note = UnicodeAttribute(null=True)
    version = VersionAttribute()


def is_latest(plugin: Plugin) -> bool:
    """The condition of ``Plugin``'s partial constraint: only the latest version holds the name."""
    return plugin.latest == "yes"


class Plugin(UniqueMixin, Model):
    """Versions keyed by (name, version): one latest version per name, a constraint on the hash key."""

    class Meta:
        table_name = "plugins"
        region = "us-east-1"
        unique_constraints = [UniqueConstraint("name", name="LATEST", condition=is_latest)]

    name = UnicodeAttribute(hash_key=True)
    version = UnicodeAttribute(range_key=True)
    latest = UnicodeAttribute(null=True)
