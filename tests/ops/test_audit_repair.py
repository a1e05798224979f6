"""audit, repair, backfill, explain and inspect, in both lock layouts.

On moto; parallel and paced scans and the conditional fixes run on dynoxide too.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from _backends import Backend, RequestCounter
from _damage import (
    ADA,
    ADA_TWIN,
    ALAN,
    EDSGER,
    EXPECTED,
    GHOST,
    GRACE,
    LINUS,
    all_items,
    bind_accounts,
    client,
    damage,
    delete_record,
    load_healthy,
    put_lock,
    put_record,
)
from _invariant import assert_invariant
from models import Account, Ticket
from pynamodb.models import Model

from pynamodb_unique import (
    AuditReport,
    DuplicateValue,
    ForeignLock,
    InvalidUniqueValue,
    MissingLock,
    OrphanedLock,
    UniqueConfigError,
    UniqueError,
    UniqueViolation,
    audit,
    backfill,
    explain,
    inspect,
    repair,
)
from pynamodb_unique._model.context import context_of

LAYOUTS = [pytest.param(False, id="shared"), pytest.param(True, id="separate")]


def _found(report: AuditReport) -> set[tuple[str, str]]:
    return {(p.kind, p.lock_key) for p in report.problems}


@pytest.fixture(params=LAYOUTS)
def damaged(request: pytest.FixtureRequest, backend: Backend) -> type[Account]:
    model = bind_accounts(backend, separate=request.param)
    damage(model)
    return model


def test_audit__clean_table_reports_nothing(backend: Backend) -> None:
    """Records written by the library audit clean, with their counts."""
    model = bind_accounts(backend)
    model(pk=ADA[0], email="ada@lovelace.io", username="ada", tenant="acme", slug="ada").save()
    model(pk=GRACE[0], email="grace@hopper.dev").save()
    report = audit(model)
    assert report.clean
    assert (report.records, report.locks, report.scanned) == (2, 4, 6)
    assert report.constraints == ("EMAIL", "HANDLE", "TENANT_SLUG")


def test_audit__finds_each_kind_of_damage(damaged: type[Account]) -> None:
    """Orphaned, missing, foreign and duplicate: each found, with its owner and holders."""
    report = audit(damaged)
    assert _found(report) == EXPECTED
    by_key = {(p.kind, p.lock_key): p for p in report.problems}
    orphan = by_key["orphaned", "UNIQ#EMAIL#alan@turing.org"]
    assert isinstance(orphan, OrphanedLock)
    assert (orphan.owner, orphan.holders, orphan.values) == (ALAN, (), None)
    missing = by_key["missing", "UNIQ#EMAIL#edsger@dijkstra.nl"]
    assert isinstance(missing, MissingLock)
    assert (missing.owner, missing.holders, missing.values) == (None, (EDSGER,), ("edsger@dijkstra.nl",))
    foreign = by_key["foreign", "UNIQ#HANDLE#grace"]
    assert isinstance(foreign, ForeignLock)
    assert (foreign.owner, foreign.holders, foreign.values) == (GHOST, (GRACE,), ("grace",))
    duplicate = by_key["duplicate", "UNIQ#EMAIL#ada@lovelace.io"]
    assert isinstance(duplicate, DuplicateValue)
    assert (duplicate.owner, set(duplicate.holders)) == (ADA, {ADA, ADA_TWIN})
    assert report.count("EMAIL", OrphanedLock) == 1
    assert report.count("TENANT_SLUG", MissingLock) == 0


@pytest.mark.backends("moto", "dynoxide")
def test_audit__segments_give_the_same_report(damaged: type[Account]) -> None:
    """A parallel scan over four segments reports exactly what one segment does."""
    assert audit(damaged, segments=4) == audit(damaged)


def test_audit__json_lists_only_the_problems(damaged: type[Account]) -> None:
    """The JSON document carries each problem's constraint, values, lock key, owner, holders and form."""
    document = audit(damaged).to_json()
    problems = {(p["kind"], p["lock_key"]): p for p in document["problems"]}
    assert set(problems) == EXPECTED
    assert problems["foreign", "UNIQ#HANDLE#grace"] == {
        "kind": "foreign",
        "constraint": "HANDLE",
        "values": ["grace"],
        "lock_key": "UNIQ#HANDLE#grace",
        "owner": list(GHOST),
        "holders": [list(GRACE)],
        "former": False,
    }


def test_audit__ignores_other_models_items(backend: Backend) -> None:
    """With unique_item_filter, locks of other constraints and other models' items are left out."""
    model = bind_accounts(backend)
    model(pk=ADA[0], email="ada@lovelace.io").save()
    put_lock(model, "UNIQ#SKU#a-1", ("ORDER#1", "ORDER"), "SKU")
    put_lock(model, "UNIQ#EMAIL#x@y.z", ("ACCT#1", "PROFILE"), "EMAIL")
    client(model).put_item(
        TableName=model.Meta.table_name, Item={"PK": {"S": "UNIQ#EMAIL#x@y.z"}, "SK": {"S": "HISTORY"}}
    )
    client(model).put_item(TableName=model.Meta.table_name, Item={"PK": {"S": "ORDER#1"}, "SK": {"S": "ORDER"}})
    # Another model's locks in the table: without a filter, audit refuses to guess whose items are whose.
    with pytest.raises(UniqueError, match="unique_item_filter"):
        audit(model)
    model.Meta.unique_item_filter = lambda m: m.sk == "PROFILE"  # type: ignore[attr-defined]
    report = audit(model)
    assert _found(report) == {("orphaned", "UNIQ#EMAIL#x@y.z")}
    assert report.locks == 2


@pytest.mark.backends("moto", "dynoxide")
def test_audit__max_rate_asks_for_consumed_capacity(backend: Backend) -> None:
    """With max_rate each Scan asks for its consumed capacity, which paces the next page."""
    model = bind_accounts(backend)
    model(pk=ADA[0], email="ada@lovelace.io").save()
    with RequestCounter(model) as counter:
        audit(model, segments=2, max_rate=50)
    scans = counter.params("Scan")
    assert len(scans) == 2
    assert all(s["ReturnConsumedCapacity"] == "TOTAL" and s["ConsistentRead"] for s in scans)
    assert sorted(s["Segment"] for s in scans) == [0, 1]


def test_audit__bad_options_refused_before_any_request(backend: Backend) -> None:
    """Zero segments or a negative rate is refused without a request."""
    model = bind_accounts(backend)
    with RequestCounter(model) as counter:
        with pytest.raises(ValueError, match="segments"):
            audit(model, segments=0)
        with pytest.raises(ValueError, match="max_rate"):
            audit(model, max_rate=-1)
    assert counter.count() == 0


def test_audit__plain_model_refused() -> None:
    """A model without unique constraints is a configuration error."""
    with pytest.raises(UniqueConfigError, match="not a UniqueMixin model"):
        audit(Model)  # type: ignore[arg-type]


def test_repair__dry_run_writes_nothing(damaged: type[Account]) -> None:
    """Without apply, repair plans a fix per fixable problem and sends no request at all."""
    report = audit(damaged)
    before = all_items(damaged)
    with RequestCounter() as counter:
        result = repair(damaged, report)
    assert counter.count() == 0
    assert all_items(damaged) == before
    assert {(f.problem.kind, f.outcome) for f in result.fixes} == {
        ("orphaned", "planned"),
        ("missing", "planned"),
        ("foreign", "planned"),
        ("duplicate", "left"),
    }
    assert not result.clean


def test_repair__fixes_exactly_what_audit_reported(damaged: type[Account]) -> None:
    """Apply changes only the reported locks; the records and every other item stay as they were."""
    report = audit(damaged)
    before = {_item_key(i): i for i in all_items(damaged)}
    result = repair(damaged, report, apply=True)
    after = {_item_key(i): i for i in all_items(damaged)}
    assert [f.outcome for f in result.fixes if f.problem.kind != "duplicate"] == ["applied"] * 5
    assert [f.problem.lock_key for f in result.remaining] == ["UNIQ#EMAIL#ada@lovelace.io"]
    changed = {key for key in before.keys() | after.keys() if before.get(key) != after.get(key)}
    assert {key[1] for key in changed} == {
        "UNIQ#EMAIL#alan@turing.org",  # deleted
        "UNIQ#HANDLE#alan",  # deleted
        "UNIQ#EMAIL#edsger@dijkstra.nl",  # created
        "UNIQ#HANDLE#edsger",  # created
        "UNIQ#HANDLE#grace",  # moved
    }
    assert after[next(k for k in after if k[1] == "UNIQ#HANDLE#grace")]["uniq_owner_hash"] == {"S": GRACE[0]}
    assert _found(audit(damaged)) == {("duplicate", "UNIQ#EMAIL#ada@lovelace.io")}
    # Once a person resolves the duplicate, the table keeps the invariant.
    delete_record(damaged, ADA_TWIN)
    assert audit(damaged).clean
    if not getattr(damaged.Meta, "unique_lock_table", None):
        assert_invariant(damaged)


def _item_key(item: dict[str, Any]) -> tuple[str, str, str]:
    return item["_table"], item["PK"]["S"], item["SK"]["S"]


@pytest.mark.backends("moto", "dynoxide")
def test_repair__each_fix_is_one_conditional_transaction(backend: Backend) -> None:
    """Every fix is one TransactWriteItems: ConditionChecks on the records plus one conditional lock write."""
    model = bind_accounts(backend)
    damage(model)
    report = audit(model)
    with RequestCounter(model) as counter:
        repair(model, report, apply=True)
    assert counter.operations == ["TransactWriteItems"] * 5
    shapes = sorted(tuple(next(iter(i)) for i in p["TransactItems"]) for p in counter.params("TransactWriteItems"))
    assert shapes == sorted(
        [
            ("ConditionCheck", "Delete"),  # orphan: the owner is still gone
            ("ConditionCheck", "Delete"),
            ("ConditionCheck", "Put"),  # missing: the holder still holds the value
            ("ConditionCheck", "Put"),
            ("ConditionCheck", "ConditionCheck", "Put"),  # foreign: owner and holder as audited
        ]
    )
    for params in counter.params("TransactWriteItems"):
        assert all("ConditionExpression" in next(iter(i.values())) for i in params["TransactItems"])


def _relive_alan(model: type[Account]) -> None:
    model(pk=ALAN[0], email="alan@turing.org", username="alan").save()


def _edsger_changes_email(model: type[Account]) -> None:
    model.get(*EDSGER).update(actions=[Account.email.set("ewd@utexas.edu")])


def _grace_leaves(model: type[Account]) -> None:
    model.get(*GRACE).delete()


@pytest.mark.parametrize(
    ("change", "key"),
    [
        pytest.param(_relive_alan, "UNIQ#EMAIL#alan@turing.org", id="orphan-owner-returns"),
        pytest.param(_edsger_changes_email, "UNIQ#EMAIL#edsger@dijkstra.nl", id="missing-holder-moves-on"),
        pytest.param(_grace_leaves, "UNIQ#HANDLE#grace", id="foreign-holder-leaves"),
    ],
)
def test_repair__stale_report_does_not_undo_a_legitimate_change(backend: Backend, change: Any, key: str) -> None:
    """A change made through the library after the audit makes the fix's condition fail: it is skipped."""
    model = bind_accounts(backend)
    damage(model)
    report = audit(model)
    change(model)
    state = all_items(model)
    result = repair(model, report, apply=True)
    fix = next(f for f in result.fixes if f.problem.lock_key == key)
    assert fix.outcome == "skipped"
    assert "changed" in fix.reason
    after = all_items(model)
    assert [i for i in after if i["PK"]["S"] == key] == [i for i in state if i["PK"]["S"] == key]


def test_repair__after_the_change_a_new_audit_is_clean_for_it(backend: Backend) -> None:
    """When the owner of an orphaned lock legitimately comes back, the lock is his again: no problem remains."""
    model = bind_accounts(backend)
    damage(model)
    report = audit(model)
    _relive_alan(model)
    repair(model, report, apply=True)
    assert not {k for _, k in _found(audit(model)) if "alan" in k}


@pytest.mark.integration
def test_repair__concurrent_with_library_writes_undoes_nothing(dynoxide_endpoint: str) -> None:
    """Repair loops while threads move values through the library: it never touches their locks."""
    backend = Backend("dynoxide", dynoxide_endpoint)
    model = bind_accounts(backend)
    damage(model)
    delete_record(model, ADA_TWIN)  # Leave no duplicate: every injected problem is fixable.
    workers = [model(pk=f"ACCT#w{n}", email=f"w{n}-0@x.io") for n in range(6)]
    for account in workers:
        account.save()
    stop = threading.Event()

    def churn(account: Account) -> None:
        step = 0
        while not stop.is_set():
            step += 1
            account.update(actions=[Account.email.set(f"{account.pk[5:]}-{step % 3}@x.io")])

    threads = [threading.Thread(target=churn, args=(account,)) for account in workers]
    for thread in threads:
        thread.start()
    fixes = []
    try:
        for _ in range(10):
            # A scan is no snapshot: it sees some records before a move and some locks after, so
            # the audit reports problems with the workers' values that are not real.
            fixes.extend(repair(model, audit(model, segments=4), apply=True).fixes)
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    on_workers = [f for f in fixes if "#w" in f.problem.lock_key]
    assert [f.describe() for f in on_workers if f.outcome == "applied"] == []
    assert {f.problem.lock_key for f in fixes if f.outcome == "applied"} == {k for _, k in EXPECTED} - {
        "UNIQ#EMAIL#ada@lovelace.io"
    }
    report = audit(model)
    assert report.clean, [p.describe() for p in report.problems]
    assert_invariant(model)


def test_repair__refuses_a_report_of_another_table(backend: Backend) -> None:
    """A report audits one table; repairing another model with it is refused."""
    first, second = bind_accounts(backend), bind_accounts(backend)
    with pytest.raises(ValueError, match="the report audits"):
        repair(second, audit(first))


@pytest.mark.backends("moto", "dynoxide")
def test_backfill__creates_missing_locks_and_reports_duplicates(backend: Backend) -> None:
    """Records from before the constraint get their locks; a shared value gets none and is reported."""
    model = bind_accounts(backend)
    put_record(model, ADA, email="ada@lovelace.io", username="ada")
    put_record(model, GRACE, email="grace@hopper.dev")
    put_record(model, ADA_TWIN, email="ADA@lovelace.io")
    put_record(model, LINUS, email="linus@kernel.org", tenant="acme", slug="linus")
    # Segments are threads writing locks too: moto takes one write at a time (BACKENDS.md).
    result = backfill(model, segments=2 if backend.host else 1)
    created = {f.problem.lock_key for f in result.fixes if f.outcome == "applied"}
    assert created == {
        "UNIQ#HANDLE#ada",
        "UNIQ#EMAIL#grace@hopper.dev",
        "UNIQ#EMAIL#linus@kernel.org",
        "UNIQ#TENANT_SLUG#acme#linus",
    }
    assert [(f.problem.kind, f.outcome) for f in result.remaining] == [("duplicate", "left")]
    assert audit(model).problems == (result.remaining[0].problem,)
    with pytest.raises(UniqueViolation):
        model(pk="ACCT#new", email="Grace@Hopper.dev").save()


def test_backfill__interrupted_then_rerun_finishes(backend: Backend) -> None:
    """A backfill stopped halfway leaves only good locks; running it again creates the rest, once."""
    model = bind_accounts(backend)
    for n in range(6):
        put_record(model, (f"ACCT#{n}", "PROFILE"), email=f"u{n}@x.io")
    report = audit(model)
    half = AuditReport(**{**report.__dict__, "problems": report.problems[:3]})
    first = backfill(model, half)
    assert [f.outcome for f in first.fixes] == ["applied"] * 3
    second = backfill(model)
    assert [f.outcome for f in second.fixes] == ["applied"] * 3
    assert backfill(model).fixes == ()
    assert_invariant(model)


@pytest.mark.parametrize("separate", [False, True], ids=["shared", "separate"])
def test_backfill__sends_whole_records_in_transactions_of_up_to_100_actions(backend: Backend, separate: bool) -> None:
    """60 records missing two locks each: 2 transactions of whole records (as migrate sends), not one per lock."""
    model = bind_accounts(backend, separate=separate)
    for n in range(60):
        put_record(model, (f"ACCT#{n:02d}", "PROFILE"), email=f"u{n}@x.io", username=f"u{n}")
    report = audit(model)
    with RequestCounter(model) as counter:
        result = backfill(model, report)
    assert [f.outcome for f in result.fixes] == ["applied"] * 120
    sent = counter.params("TransactWriteItems")
    # A record's ConditionCheck and its two Puts travel together: 33 records fill 99 actions.
    assert [len(t["TransactItems"]) for t in sent] == [99, 81]
    assert audit(model).clean


def test_backfill__apply_false__dry_run_writes_nothing(damaged: type[Account]) -> None:
    """backfill(apply=False) plans the missing locks as repair's dry run does and writes nothing."""
    before = all_items(damaged)
    result = backfill(damaged, apply=False)
    assert not result.applied
    assert {(f.problem.kind, f.action, f.outcome) for f in result.fixes} == {
        ("missing", "create", "planned"),
        ("orphaned", "none", "left"),
        ("foreign", "none", "left"),
        ("duplicate", "none", "left"),
    }
    assert all_items(damaged) == before
    assert backfill(damaged).applied  # Without apply= the Python function writes, as it always has.


def test_backfill__leaves_other_problems_to_repair(damaged: type[Account]) -> None:
    """Backfill only creates missing locks; orphaned and foreign locks stay for repair."""
    result = backfill(damaged)
    assert {(f.problem.kind, f.outcome) for f in result.fixes} == {
        ("missing", "applied"),
        ("orphaned", "left"),
        ("foreign", "left"),
        ("duplicate", "left"),
    }
    assert _found(audit(damaged)) == EXPECTED - {k for k in EXPECTED if k[0] == "missing"}


def test_audit__problems_needing_a_person_first(damaged: type[Account]) -> None:
    """Problems come by kind (duplicate, foreign, orphaned, missing), then constraint, then lock key."""
    assert [(p.kind, p.lock_key) for p in audit(damaged).problems] == [
        ("duplicate", "UNIQ#EMAIL#ada@lovelace.io"),
        ("foreign", "UNIQ#HANDLE#grace"),
        ("orphaned", "UNIQ#EMAIL#alan@turing.org"),
        ("orphaned", "UNIQ#HANDLE#alan"),
        ("missing", "UNIQ#EMAIL#edsger@dijkstra.nl"),
        ("missing", "UNIQ#HANDLE#edsger"),
    ]


def test_audit__digest_keys_matched_by_recomputing(backend: Backend) -> None:
    """A value too long for a plain key is found by recomputing its digest key, and repaired."""
    model = bind_accounts(backend)
    long_email = "x" * 3000 + "@example.com"
    put_record(model, EDSGER, email=long_email)
    (problem,) = audit(model).problems
    assert isinstance(problem, MissingLock)
    assert problem.lock_key.startswith("UNIQ#EMAIL#%H")
    assert repair(model, apply=True).clean
    with pytest.raises(UniqueViolation):
        model(pk="ACCT#other", email=long_email.upper()).save()
    delete_record(model, EDSGER)
    (orphan,) = audit(model).problems
    assert (orphan.kind, orphan.lock_key) == ("orphaned", problem.lock_key)


def test_repair__typed_owners_in_a_separate_lock_table(tickets: type[Ticket]) -> None:
    """Owners of a numeric key are matched and written as numbers."""
    model = tickets
    model(id=1, code="abc").save()
    model(id=2, code="def").save()
    raw = client(model)
    raw.delete_item(TableName=model.Meta.table_name, Key={"id": {"N": "1"}})
    raw.put_item(TableName=model.Meta.table_name, Item={"id": {"N": "3"}, "code": {"S": "ghi"}})
    locks = context_of(model).locks().table_name  # type: ignore[union-attr]
    raw.put_item(
        TableName=locks,
        Item={"PK": {"S": "UNIQ#CODE#DEF"}, "SK": {"S": "LOCK"}, "uniq_owner_hash": {"N": "9"}},
    )
    report = audit(model)
    assert {(p.kind, p.lock_key, p.owner) for p in report.problems} == {
        ("orphaned", "UNIQ#CODE#ABC", ("1",)),
        ("missing", "UNIQ#CODE#GHI", None),
        ("foreign", "UNIQ#CODE#DEF", ("9",)),
    }
    assert repair(model, report, apply=True).clean
    assert audit(model).clean
    assert model.unique_owner(code="ghi") == (3,)  # type: ignore[attr-defined]
    assert model.unique_owner(code="def") == (2,)  # type: ignore[attr-defined]


def test_explain__save_is_the_request_save_sends(backend: Backend) -> None:
    """explain() prints, without any request, the TransactWriteItems that save() then sends."""
    model = bind_accounts(backend)
    account = model(pk=ADA[0], email="Ada@Lovelace.io", username="ada")
    with RequestCounter() as counter:
        explained = explain(account, "save")
    assert counter.count() == 0
    with RequestCounter(model) as counter:
        account.save()
    (sent,) = counter.params("TransactWriteItems")
    assert explained.operation == "TransactWriteItems"
    assert explained.request["TransactItems"] == sent["TransactItems"]


def test_explain__update_and_delete_follow_the_stored_item() -> None:
    """Given the stored values, an update releases the old lock and takes the new; delete releases both."""
    account = Account(pk=ADA[0], email="new@lovelace.io")
    stored = {"email": "ada@lovelace.io", "username": "ada"}
    update = explain(account, "update", stored=stored, actions=[Account.email.set("new@lovelace.io")])
    items = update.request["TransactItems"]
    assert [next(iter(i)) for i in items] == ["Delete", "Put", "Update"]
    assert items[0]["Delete"]["Key"]["PK"] == {"S": "UNIQ#EMAIL#ada@lovelace.io"}
    assert items[1]["Put"]["Item"]["PK"] == {"S": "UNIQ#EMAIL#new@lovelace.io"}
    assert items[2]["Update"]["Key"]["PK"] == {"S": ADA[0]}
    delete = explain(Account(pk=ADA[0]), "delete", stored=stored)
    released = [i["Delete"]["Key"]["PK"]["S"] for i in delete.request["TransactItems"]][1:]
    assert sorted(released) == ["UNIQ#EMAIL#ada@lovelace.io", "UNIQ#HANDLE#ada"]
    untouched = explain(account, "update", actions=[Account.bio.set("hi")], stored=stored)
    assert untouched.operation == "UpdateItem"
    assert '"UNIQ#' not in explain(Account(pk=ADA[0], email="a@b.c"), "save", stored={"email": "a@b.c"}).to_json()


def test_explain__bad_input_refused() -> None:
    """An unknown op, an update without actions and a lock-prefixed key are refused."""
    account = Account(pk=ADA[0], email="ada@lovelace.io")
    with pytest.raises(ValueError, match="op must be"):
        explain(account, "upsert")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="actions"):
        explain(account, "update")
    with pytest.raises(InvalidUniqueValue):
        explain(Account(pk="UNIQ#EMAIL#x", email="x@y.z"), "save")


def test_inspect__shows_owner_free_and_orphaned(damaged: type[Account]) -> None:
    """inspect reads one value's lock: its owner and whether the owner still holds it."""
    held = inspect(damaged, email="ADA@lovelace.io")
    assert (held.lock_key, held.exists, held.owner, held.owner_holds) == ("UNIQ#EMAIL#ada@lovelace.io", True, ADA, True)
    orphan = inspect(damaged, username="alan")
    assert (orphan.owner, orphan.owner_holds) == (ALAN, False)
    assert "orphaned" in orphan.describe()
    free = inspect(damaged, tenant="acme", slug="nobody")
    assert (free.lock_key, free.exists, free.owner) == ("UNIQ#TENANT_SLUG#acme#nobody", False, None)
    assert inspect(damaged, tenant="acme", slug=None).lock_key is None
    with pytest.raises(InvalidUniqueValue, match="no unique constraint covers exactly slug"):
        inspect(damaged, slug="x")


@pytest.mark.integration
def test_audit__ten_thousand_items_on_dynoxide(dynoxide_endpoint: str) -> None:
    """On 10,000+ items, 1 and 4 segments find exactly the damage; repair then leaves only the duplicate."""
    model = bind_accounts(Backend("dynoxide", dynoxide_endpoint))
    load_healthy(model, 3400)
    damage(model)
    with RequestCounter(model) as counter:
        report = audit(model, segments=4)
    assert report.scanned >= 10_000
    assert (report.records, _found(report)) == (3400 + 5, EXPECTED)
    assert {p["Segment"] for p in counter.params("Scan")} == {0, 1, 2, 3}
    assert audit(model) == report
    result = repair(model, report, apply=True)
    assert [f.problem.kind for f in result.remaining] == ["duplicate"]
    assert _found(audit(model, segments=4)) == {("duplicate", "UNIQ#EMAIL#ada@lovelace.io")}
