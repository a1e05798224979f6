"""Command line: ``python -m tests.conformance [--integration] [--workdir DIR]`` from the repository root.

Prints both runs' outcomes and every difference; exits 1 when the mixin run differs from the plain run.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .harness import compare, compare_integration


def main(argv: list[str] | None = None) -> int:
    """Run the comparison(s) asked for and print their reports."""
    parser = argparse.ArgumentParser(prog="python -m tests.conformance", description=__doc__)
    parser.add_argument("--integration", action="store_true", help="also run the peer integration tests on dynoxide")
    parser.add_argument(
        "--workdir", type=Path, help="extract and run here, and keep the files (default: a temp folder)"
    )
    args = parser.parse_args(argv)
    comparisons = [compare("unit", workdir=args.workdir and args.workdir / "unit")]
    if args.integration:
        comparisons.append(compare_integration(args.workdir and args.workdir / "integration"))
    conformant = True
    for comparison in comparisons:
        print(comparison.report())
        print()
        conformant &= not comparison.outcome_differences
        if comparison.plain.suite == "unit":  # the integration tests write timestamps: requests vary
            conformant &= not comparison.request_differences and not comparison.plain.not_passed
    return 0 if conformant else 1


if __name__ == "__main__":
    sys.exit(main())
