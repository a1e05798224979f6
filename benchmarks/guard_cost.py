"""What the compare-and-swap costs a delete and a change by ``update()``: timed in one process, taking turns.

Run from the repository root (dynoxide installed, as for ``run.py``)::

    python benchmarks/guard_cost.py            # about 3 seconds
    python benchmarks/guard_cost.py --quick    # a smoke run, seconds

The minimal contender of ``run.py`` (the seed's transaction by hand) checks nothing of the record
it deletes or changes; the library's record write carries a compare-and-swap of its stored unique
values. For a delete and a unique change by ``update()``, this script times loops of operations
taking turns: the library's operation and the minimal one (``run.py``'s contenders, the transport
stubbed), and the record's own request item, built by the library (PynamoDB's builder with the
compare-and-swap) and by PynamoDB's builder without a condition, as the minimal transaction builds
it. It prints the medians, the library / minimal ratio, and that ratio with the difference of the
two record items taken away (the difference also holds ``record_kwargs``' own call), and what
drawing a ClientRequestToken costs alone (both contenders draw one per transaction). Each turn starts
with another of the four timings; every timing is warmed up first. Nothing here is a test: it
prints figures.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

sys.path.insert(0, str(Path(__file__).resolve().parent))

import contenders as bench
import instructions
from pynamodb.constants import ALL_OLD
from pynamodb.models import Model

from pynamodb_unique._core.plan import RecordOp
from pynamodb_unique._model import snapshot
from pynamodb_unique._model.context import context_of
from pynamodb_unique._write.engine import intent_plan, plan_once
from pynamodb_unique._write.requests import record_kwargs
from pynamodb_unique._write.send import new_token

OPERATIONS: Final = ("delete", "unique change (update)")
#: What is timed for each operation, in turns: the two contenders, then the record item two ways.
LIBRARY, MINIMAL, ITEM, BARE = "library", "minimal", "record item: library", "builder alone"
#: Operations each timing runs once before it is timed.
WARM_UP: Final = 30
#: One prepared record write: the instance, its actions (None for a delete) and the planned record write.
Prepared = tuple[Model, list[Any] | None, Any]


def _prepared(operation: str, n: int) -> list[Prepared]:
    """``n`` loaded records and the record write the library plans for ``operation`` on each."""
    context = context_of(bench.UniqueAccount)
    assert context is not None  # noqa: S101 - the benchmark's model keeps locks.
    op: RecordOp = "delete" if operation == "delete" else "update"
    out: list[Prepared] = []
    for account in bench.CPU_OPERATIONS[operation][bench.LIB].prepare(n):
        actions = None if op == "delete" else [bench.UniqueAccount.email.set("x" + account.email)]
        assumed, desire = intent_plan(context, account, op, actions, snapshot.known(context, account))
        plan, _ = plan_once(context, op, assumed, desire or {})
        out.append((account, actions, plan.record))
    return out


def _library_item(prepared: Prepared) -> object:
    account, actions, record = prepared
    return record_kwargs(account, record, None, actions, add_version_condition=True)


def _bare_item(prepared: Prepared) -> object:
    account, actions, _ = prepared
    if actions is None:
        return Model.get_delete_kwargs_from_instance(account, return_values_on_condition_failure=ALL_OLD)
    return Model.get_update_kwargs_from_instance(
        account, actions=list(actions), return_values_on_condition_failure=ALL_OLD
    )


def _per_op(prepare: Callable[[int], Sequence[Any]], run: Callable[[Any], object], n: int) -> float:
    """µs per call of ``run`` over ``n`` inputs prepared beforehand."""
    inputs = prepare(n)
    started = time.perf_counter()
    for item in inputs:
        run(item)
    return (time.perf_counter() - started) / n * 1e6


def measure(operation: str, turns: int, n: int, template: str) -> dict[str, float]:
    """Medians (µs) of the four timings of ``operation``, each loop of ``n`` taking its turn ``turns`` times."""
    lib, minimal = (instructions.warmed(operation, who, template) for who in (bench.LIB, bench.MINIMAL))
    prepared = functools.partial(_prepared, operation)
    timed: dict[str, tuple[Callable[[int], Sequence[Any]], Callable[[Any], object]]] = {
        LIBRARY: (lib.prepare, lib.run),
        MINIMAL: (minimal.prepare, minimal.run),
        ITEM: (prepared, _library_item),
        BARE: (prepared, _bare_item),
    }
    for prepare, run in timed.values():
        _per_op(prepare, run, WARM_UP)
    names = list(timed)
    values: dict[str, list[float]] = {name: [] for name in names}
    for turn in range(turns):
        for name in names[turn % 4 :] + names[: turn % 4]:
            values[name].append(_per_op(*timed[name], n))
    return {name: statistics.median(found) for name, found in values.items()}


def token_cost(turns: int, n: int) -> float:
    """Median µs of drawing one ClientRequestToken as every library write does (``new_token()``)."""
    return statistics.median(_per_op(range, lambda _: new_token(), n) for _ in range(turns))


def main(argv: Sequence[str] | None = None) -> int:
    """Time and print."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--turns", type=int, default=21, help="loops of each timing, taking turns (default 21)")
    parser.add_argument("--ops", type=int, default=200, help="operations per loop (default 200)")
    parser.add_argument("--quick", action="store_true", help="3 turns of 20 operations")
    args = parser.parse_args(argv)
    turns, n = (3, 20) if args.quick else (args.turns, args.ops)
    with instructions.served("guard-cost") as template:
        rows = [(op, measure(op, turns, n, template)) for op in OPERATIONS]
    print(f"Medians of {turns} loops of {n} operations each, taking turns, µs per operation:\n")
    head = ["operation", LIBRARY, MINIMAL, "library / minimal", ITEM, BARE]
    print("| " + " | ".join([*head, "library / minimal without the difference"]) + " |")
    print("|" + " --- |" * (len(head) + 1))
    for op, m in rows:
        without = (m[LIBRARY] - (m[ITEM] - m[BARE])) / m[MINIMAL]
        cells = [f"{m[LIBRARY]:.1f}", f"{m[MINIMAL]:.1f}", f"{m[LIBRARY] / m[MINIMAL]:.2f}"]
        cells += [f"{m[ITEM]:.1f}", f"{m[BARE]:.1f}", f"{without:.2f}"]
        print(f"| {op} | " + " | ".join(cells) + " |")
    print(f"\nA ClientRequestToken drawn from the operating system (new_token()): {token_cost(turns, n):.2f} µs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
