"""Models shared by the tests; bind them to a backend with ``_backends.bind_model``.

The polymorphic family (:class:`Pet`) is used as defined: a test creates its table on its own moto.
"""

from __future__ import annotations

from pynamodb.attributes import (
    BinaryAttribute,
    DiscriminatorAttribute,
    JSONAttribute,
    MapAttribute,
    NumberAttribute,
    UnicodeAttribute,
    UnicodeSetAttribute,
    VersionAttribute,
)
from pynamodb.models import Model

from pynamodb_unique import UniqueAttribute, UniqueConstraint, UniqueMixin

#: The HMAC key of the hashed constraints below.
SECRET = b"test-secret-32-bytes-long-000000"


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


class Member(UniqueMixin, Model):
    """Soft-deleted members give their handle back (partial); phones and emails never appear in keys (hashed)."""

    class Meta:
        table_name = "members"
        region = "us-east-1"
        unique_secret = SECRET
        unique_constraints = [
            UniqueConstraint("handle", name="ACTIVE_HANDLE", condition=lambda item: item.status != "deleted"),
            UniqueConstraint("org", "phone", name="ORG_PHONE", hashed=True),
        ]

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    sk = UnicodeAttribute(range_key=True, attr_name="SK", default="MEMBER")
    handle = UnicodeAttribute(null=True)
    status = UnicodeAttribute(null=True, default="active")
    org = UnicodeAttribute(null=True)
    phone = UnicodeAttribute(null=True)
    email = UniqueAttribute(UnicodeAttribute(null=True), hashed=True)


class Customer(UniqueMixin, Model):
    """Customers of a single-table design: their records have SK = CUSTOMER.

    Shares its table with :class:`Employee`; a test sets each model's ``Meta.unique_item_filter``
    (or leaves it out, to see the tools refuse to guess).
    """

    class Meta:
        table_name = "shop"
        region = "us-east-1"

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    sk = UnicodeAttribute(range_key=True, attr_name="SK", default="CUSTOMER")
    email = UniqueAttribute(UnicodeAttribute(null=True), name="CUSTOMER_EMAIL")


class Employee(UniqueMixin, Model):
    """Employees in the same table as :class:`Customer`: a unique badge; their email is not unique among employees."""

    class Meta:
        table_name = "shop"
        region = "us-east-1"

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    sk = UnicodeAttribute(range_key=True, attr_name="SK", default="EMPLOYEE")
    badge = UniqueAttribute(UnicodeAttribute(null=True))
    email = UnicodeAttribute(null=True)


class Ticket(UniqueMixin, Model):
    """A numeric hash key: its locks live in a table of their own, their owners typed N."""

    class Meta:
        table_name = "tickets"
        region = "us-east-1"
        unique_lock_table = "ticket-locks"  # Named after the records' table when bound (the tickets fixture).

    id = NumberAttribute(hash_key=True)
    code = UniqueAttribute(UnicodeAttribute(), normalize=str.upper)


class Contact(UniqueMixin, Model):
    """One unique attribute (email), nothing else special."""

    class Meta:
        table_name = "contacts"
        region = "us-east-1"

    pk = UnicodeAttribute(hash_key=True)
    email = UniqueAttribute(UnicodeAttribute(null=True), name="EMAIL")
    bio = UnicodeAttribute(null=True)


class Defaulted(UniqueMixin, Model):
    """A partial constraint whose condition attribute has a fixed default (applied by PynamoDB's load).

    ``status`` defaults to "live": a stored item without it loads as live, so its email takes a
    lock.
    """

    class Meta:
        table_name = "defaulted"
        region = "us-east-1"
        unique_constraints = [
            UniqueConstraint(
                "email", name="LIVE_EMAIL", condition=lambda r: r.status == "live", condition_attributes=("status",)
            )
        ]

    pk = UnicodeAttribute(hash_key=True)
    email = UnicodeAttribute(null=True)
    status = UnicodeAttribute(default="live")
    bio = UnicodeAttribute(null=True)


class Flagged(UniqueMixin, Model):
    """A partial constraint whose condition reads a raw MapAttribute (``r.flags.active``), as users read one."""

    class Meta:
        table_name = "flagged"
        region = "us-east-1"
        unique_constraints = [
            UniqueConstraint(
                "email",
                name="ACTIVE_EMAIL",
                condition=lambda r: r.flags is not None and bool(r.flags.active),
                condition_attributes=("flags",),
            )
        ]

    pk = UnicodeAttribute(hash_key=True)
    email = UnicodeAttribute(null=True)
    flags = MapAttribute(null=True)  # type: ignore[var-annotated,no-untyped-call]
    bio = UnicodeAttribute(null=True)


class JsonConditioned(UniqueMixin, Model):
    """A partial constraint whose condition reads a JSONAttribute: DynamoDB type S, a dict in Python."""

    class Meta:
        table_name = "json-conditioned"
        region = "us-east-1"
        unique_constraints = [
            UniqueConstraint(
                "email",
                name="JSON_EMAIL",
                condition=lambda r: r.meta is not None and bool(r.meta.get("active")),
                condition_attributes=("meta",),
            )
        ]

    pk = UnicodeAttribute(hash_key=True)
    email = UnicodeAttribute(null=True)
    meta = JSONAttribute(null=True)
    bio = UnicodeAttribute(null=True)


class NullDefaulted(Defaulted):
    """:class:`Defaulted` whose ``status`` may be None: saved so, it is stored as no attribute and loads as "live"."""

    class Meta(Defaulted.Meta):
        table_name = "null-defaulted"

    status = UnicodeAttribute(null=True, default="live")


class Tagged(UniqueMixin, Model):
    """A partial constraint reading a string set with a fixed default {"vip"}.

    An empty set is stored as no attribute, so it loads as the default: its email is locked.
    """

    class Meta:
        table_name = "vip-tagged"
        region = "us-east-1"
        unique_constraints = [
            UniqueConstraint(
                "email",
                name="VIP_EMAIL",
                condition=lambda r: "vip" in (r.tags or ()),
                condition_attributes=("tags",),
            )
        ]

    pk = UnicodeAttribute(hash_key=True)
    email = UnicodeAttribute(null=True)
    # A fixed default, immutable: shared by every instance (the stubs ask for a set or a callable).
    tags = UnicodeSetAttribute(null=True, default=frozenset({"vip"}))  # type: ignore[arg-type]


class NumKeyed(UniqueMixin, Model):
    """Numeric hash and range keys with attr_names; its locks in a table of their own."""

    class Meta:
        table_name = "numkeyed"
        region = "us-east-1"
        unique_lock_table = "numkeyed-locks"

    id = NumberAttribute(hash_key=True, attr_name="Id")
    rev = NumberAttribute(range_key=True, attr_name="Rev")
    email = UniqueAttribute(UnicodeAttribute(null=True, attr_name="Mail"))
    bio = UnicodeAttribute(null=True)


class BinKeyed(UniqueMixin, Model):
    """A binary hash key with an attr_name; its locks in a table of their own."""

    class Meta:
        table_name = "binkeyed"
        region = "us-east-1"
        unique_lock_table = "binkeyed-locks"

    id = BinaryAttribute(hash_key=True, legacy_encoding=False, attr_name="Id")
    email = UniqueAttribute(UnicodeAttribute(null=True, attr_name="Mail"))


class Pet(UniqueMixin, Model):
    """A polymorphic family, its attributes stored under other names: every pet has a unique name.

    Used as defined, not bound: a test creates the table on its own moto.
    """

    class Meta:
        table_name = "pets"
        region = "us-east-1"

    pk = UnicodeAttribute(hash_key=True, attr_name="PK")
    kind = DiscriminatorAttribute(attr_name="Kind")
    name = UniqueAttribute(UnicodeAttribute(null=True, attr_name="Name"))
    note = UnicodeAttribute(null=True)
    age = NumberAttribute(null=True)


class Dog(Pet, discriminator="dog"):
    """A pet with no unique attribute of its own."""


class Cat(Pet, discriminator="cat"):
    """A pet with a unique chip of its own."""

    chip = UniqueAttribute(UnicodeAttribute(null=True))
