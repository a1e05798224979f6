"""Models told apart by endpoint, Region and table, and by module and qualified name.

A class factory, a test helper or one model pointed at two endpoints makes several classes of one
name in one process: the registry and the tools must not take them for neighbours sharing a table.
"""

from __future__ import annotations

import pytest
from _backends import Backend, unique_table_name
from pynamodb.attributes import UnicodeAttribute
from pynamodb.models import Model

from pynamodb_unique import UniqueAttribute, UniqueConfigError, UniqueConstraint, UniqueMixin, audit, repair
from pynamodb_unique._model.registry import table_neighbours

# Both: the error names the endpoint (a host, or the AWS endpoint for moto).
pytestmark = pytest.mark.backends("moto", "dynoxide")

#: An endpoint no request goes to: the models pointed there are only defined.
ELSEWHERE = "http://127.0.0.1:9"


def make_account(table: str, host: str | None, *, region: str = "us-east-1", slug: bool = False) -> type[Model]:
    """A class factory: each call makes a class ``Acct`` of this module and qualified name."""
    meta = type("Meta", (), {"table_name": table, "region": region, "host": host})
    if slug:
        meta.unique_constraints = [UniqueConstraint("slug", name="SLUG")]  # type: ignore[attr-defined]

    class Acct(UniqueMixin, Model):
        Meta = meta
        pk = UnicodeAttribute(hash_key=True)
        email = UniqueAttribute(UnicodeAttribute())
        slug = UnicodeAttribute(null=True)

    return Acct


def _created(model: type[Model]) -> type[Model]:
    model.create_table(wait=True, billing_mode="PAY_PER_REQUEST")
    return model


def test_factory_class_made_twice__audit_reads_one_model(backend: Backend) -> None:
    """Two live classes of one module, qualified name, table and endpoint are one model: audit of either is clean."""
    table = unique_table_name("acct")
    first = _created(make_account(table, backend.host))
    second = make_account(table, backend.host)
    first(pk="a1", email="ada@x.io").save()
    second(pk="a2", email="bob@x.io").save()
    for model in (first, second):
        report = audit(model)  # type: ignore[arg-type]
        assert report.problems == ()
        assert report.records == 2
    assert repair(first, apply=True).clean  # type: ignore[arg-type]


def test_same_table_name_other_endpoint__not_neighbours(backend: Backend) -> None:
    """The same model pointed at another endpoint (Meta.host) or Region: not a neighbour, no clash."""
    table = unique_table_name("acct")
    here = _created(make_account(table, backend.host))
    # Derived constraint names (EMAIL) in a table of the same name: a clash were they one table.
    there = make_account(table, ELSEWHERE)
    other_region = make_account(table, backend.host, region="eu-west-1")
    assert table_neighbours(here) == [here]
    assert table_neighbours(there) == [there]
    assert table_neighbours(other_region) == [other_region]
    here(pk="a1", email="ada@x.io").save()
    assert audit(here).problems == ()  # type: ignore[arg-type]


def test_other_class_same_table_name_other_endpoint__no_clash_at_definition(backend: Backend) -> None:
    """Another model deriving the same constraint name, on another endpoint: defined without a clash."""
    table = unique_table_name("acct")
    here = _created(make_account(table, backend.host))

    class Other(UniqueMixin, Model):
        class Meta:
            table_name = table
            region = "us-east-1"
            host = ELSEWHERE

        pk = UnicodeAttribute(hash_key=True)
        email = UniqueAttribute(UnicodeAttribute())

    assert Other not in table_neighbours(here)
    here(pk="a1", email="ada@x.io").save()
    assert audit(here).problems == ()  # type: ignore[arg-type]


def test_factory_class_made_twice_with_other_constraints__error_names_both(backend: Backend) -> None:
    """Two live classes of one identity with different constraints: the error names both, where, and what to do."""
    table = unique_table_name("acct")
    first = _created(make_account(table, backend.host))
    second = make_account(table, backend.host, slug=True)
    with pytest.raises(UniqueConfigError) as raised:
        audit(first)  # type: ignore[arg-type]
    message = str(raised.value)
    qualname = f"{__name__}.make_account.<locals>.Acct"
    assert f"two classes {qualname} use table {table!r}" in message
    assert f"({backend.host or 'the AWS endpoint'}, region us-east-1)" in message
    assert "['EMAIL'] (this one) and ['EMAIL', 'SLUG'] (the one defined later, also of module" in message
    assert f"also of module {__name__}, which the tools read as the model" in message
    assert "use the later class, or give the classes different names" in message
    # The later class is the model the tools read.
    assert audit(second).problems == ()  # type: ignore[arg-type]
