"""Run PynamoDB's own test suite plain and with ``UniqueMixin`` models, and compare the two runs.

The promise checked: a model that subclasses ``UniqueMixin`` but declares no unique constraint
behaves exactly like PynamoDB. The vendored suite (``tests/peer``) is extracted twice into a
temporary folder:

- ``plain``: unchanged;
- ``mixin``: ``from pynamodb.models import Model`` rewritten to import ``Model`` from
  :mod:`conformance.shim`, ``class Model(UniqueMixin, pynamodb.models.Model)``.

Each copy runs in its own pytest subprocess (both at once), with the peer ``pytest.ini`` and
:mod:`conformance.plugin`, which records every test's outcome and the requests it sends at
``Connection.dispatch``. :func:`compare` then lists the tests whose outcome or requests differ.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final, Literal

Mode = Literal["plain", "mixin"]
Suite = Literal["unit", "integration"]

MODES: Final[tuple[Mode, Mode]] = ("plain", "mixin")
TESTS_DIR: Final = Path(__file__).resolve().parent.parent
REPO_ROOT: Final = TESTS_DIR.parent
PEER_ARCHIVE: Final = TESTS_DIR / "peer" / "pynamodb-6.1.0-tests.tar.gz"
if str(TESTS_DIR) not in sys.path:  # The suite's helpers (_dynoxide), also when run as `python -m tests.conformance`.
    sys.path.insert(0, str(TESTS_DIR))

import _dynoxide  # noqa: E402
from _backends import AWS_ENV_REMOVED  # noqa: E402

SHIM_MODULE: Final = "conformance.shim"
PLUGIN_MODULE: Final = "conformance.plugin"
#: The peer files importing ``Model`` from ``pynamodb.models`` (5 unit, 4 integration).
EXPECTED_REWRITES: Final = 9
SUITE_ARGS: Final[Mapping[Suite, tuple[str, ...]]] = {
    "unit": ("tests", "--ignore=tests/integration"),
    "integration": ("tests/integration",),
}
RUN_TIMEOUT: Final = 600.0
#: Environment variables that would point the peer suite at a real AWS account or endpoint.
_ENV_REMOVED: Final = (*AWS_ENV_REMOVED, "PYNAMODB_CONFIG", "PYNAMODB_INTEGRATION_TEST_DDB_URL")


# --- preparing the suite ---------------------------------------------------------------------


def extract(destination: Path, archive: Path = PEER_ARCHIVE) -> Path:
    """Extract the peer archive into ``destination``; return the folder holding ``pytest.ini``."""
    destination.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive) as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(destination, filter="data")
        else:
            # Extraction filters came in Python 3.11.4; Debian 12's python3 is 3.11.2.
            _check_members(tar, destination)
            tar.extractall(destination)  # noqa: S202 - every member was checked just above.
    return destination


def _check_members(tar: tarfile.TarFile, destination: Path) -> None:
    """Refuse an archive holding anything but plain files and folders inside ``destination``.

    Raises:
        tarfile.TarError: a member is a link or a device, or its path leads outside ``destination``.
    """
    root = destination.resolve()
    for member in tar.getmembers():
        if not (member.isfile() or member.isdir()):
            msg = f"{member.name!r} is not a plain file or folder: refusing to extract it"
            raise tarfile.TarError(msg)
        if not (root / member.name).resolve().is_relative_to(root):
            msg = f"{member.name!r} would be extracted outside {root}"
            raise tarfile.TarError(msg)


def _alias(alias: ast.alias) -> str:
    return alias.name if alias.asname is None else f"{alias.name} as {alias.asname}"


def rewrite_model_import(source: str, shim: str = SHIM_MODULE) -> tuple[str, int]:
    """Make ``from pynamodb.models import ...`` take ``Model`` from ``shim``; other names stay.

    Returns the new source and how many import statements were rewritten. ``Model as X`` keeps
    its alias; ``import *`` is followed by an import of the shim's ``Model``.
    """
    tree = ast.parse(source)
    edits: list[tuple[int, int, int, int, str]] = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.ImportFrom) and node.module == "pynamodb.models" and node.level == 0):
            continue
        ours = [a for a in node.names if a.name == "Model"]
        others = [a for a in node.names if a.name != "Model"]
        star = any(a.name == "*" for a in node.names)
        if not ours and not star:
            continue
        statements = []
        if others:
            statements.append(f"from pynamodb.models import {', '.join(_alias(a) for a in others)}")
        statements.append(f"from {shim} import {', '.join(_alias(a) for a in ours) or 'Model'}")
        assert node.end_lineno is not None  # set by ast.parse
        assert node.end_col_offset is not None
        edits.append((node.lineno, node.col_offset, node.end_lineno, node.end_col_offset, "; ".join(statements)))
    if not edits:
        return source, 0
    # ast offsets are in UTF-8 bytes: edit the encoded lines, last statement first.
    lines = source.encode().splitlines(keepends=True)
    for line, col, end_line, end_col, text in sorted(edits, reverse=True):
        head, tail = lines[line - 1][:col], lines[end_line - 1][end_col:]
        lines[line - 1 : end_line] = [head + text.encode() + tail]
    return b"".join(lines).decode(), len(edits)


def make_mixin(root: Path) -> list[Path]:
    """Rewrite every peer test file under ``root`` to use the shim's ``Model``; return those changed."""
    changed = []
    for path in sorted((root / "tests").rglob("*.py")):
        new, count = rewrite_model_import(path.read_text())
        if count:
            path.write_text(new)
            changed.append(path)
    return changed


# --- running ---------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class RunResult:
    """What one pytest run of the peer suite recorded (see :mod:`conformance.plugin`)."""

    mode: Mode
    suite: Suite
    outcomes: dict[str, str]
    messages: dict[str, str]
    requests: dict[str, list[dict[str, Any]]]
    collect_errors: dict[str, str]
    returncode: int
    seconds: float
    output: str

    @property
    def passed(self) -> set[str]:
        """Node ids of the tests that passed."""
        return {t for t, o in self.outcomes.items() if o == "passed"}

    @property
    def not_passed(self) -> dict[str, str]:
        """Tests that did not pass, each with its outcome and failure message."""
        return {
            t: f"{o}: {self.messages.get(t, '')}".rstrip(": ")
            for t, o in sorted(self.outcomes.items())
            if o != "passed"
        }

    def counts(self) -> dict[str, int]:
        """How many tests ended with each outcome."""
        counts: dict[str, int] = {}
        for outcome in self.outcomes.values():
            counts[outcome] = counts.get(outcome, 0) + 1
        return dict(sorted(counts.items()))


def _environment(extra: Mapping[str, str]) -> dict[str, str]:
    """This process's environment, minus pytest and AWS overrides, with ``conformance`` importable."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_") and k not in _ENV_REMOVED}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(TESTS_DIR), os.environ.get("PYTHONPATH")) if p)
    env["AWS_CONFIG_FILE"] = os.devnull
    env["AWS_SHARED_CREDENTIALS_FILE"] = os.devnull
    # The same set iteration order in both runs: string and bytes sets are serialized in it.
    env["PYTHONHASHSEED"] = "0"
    env.update(extra)
    return env


@dataclasses.dataclass
class _Running:
    mode: Mode
    process: subprocess.Popen[bytes]
    record: Path
    log: Path
    started: float


def _start(mode: Mode, suite: Suite, root: Path, extra_env: Mapping[str, str]) -> _Running:
    record, log = root / "conformance-record.json", root / "conformance-output.txt"
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-c",
        str(root / "pytest.ini"),
        "--rootdir",
        str(root),
        "-p",
        "no:cacheprovider",
        "-p",
        PLUGIN_MODULE,
        "--conformance-record",
        str(record),
        "-q",
        "--tb=short",
        "--continue-on-collection-errors",  # a module that fails to import must not hide the others
        *SUITE_ARGS[suite],
    ]
    with log.open("wb") as out:
        process = subprocess.Popen(  # noqa: S603  (our own interpreter, fixed arguments)
            command,
            cwd=root,
            env=_environment(extra_env),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    return _Running(mode, process, record, log, time.monotonic())


def _finish(running: _Running, suite: Suite, timeout: float) -> RunResult:
    try:
        returncode = running.process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        running.process.kill()
        running.process.wait()
        raise
    seconds = time.monotonic() - running.started
    output = running.log.read_text(errors="replace")
    if not running.record.is_file():
        msg = f"the {running.mode} run wrote no record (exit code {returncode}); its output:\n{output[-5000:]}"
        raise RuntimeError(msg)
    data = json.loads(running.record.read_text())
    return RunResult(
        mode=running.mode,
        suite=suite,
        outcomes=data["outcomes"],
        messages=data["messages"],
        requests=data["requests"],
        collect_errors=data["collect_errors"],
        returncode=returncode,
        seconds=seconds,
        output=output,
    )


def run_modes(
    workdir: Path,
    suite: Suite = "unit",
    endpoints: Mapping[Mode, str] | None = None,
    modes: Sequence[Mode] = MODES,
    timeout: float = RUN_TIMEOUT,
) -> tuple[dict[Mode, RunResult], list[Path]]:
    """Extract the suite under ``workdir/<mode>`` and run ``suite`` in every mode at once.

    ``endpoints`` gives each mode's DynamoDB URL (``PYNAMODB_INTEGRATION_TEST_DDB_URL``), for the
    integration suite. Returns each mode's result and the files rewritten for the mixin mode.
    """
    rewritten: list[Path] = []
    running = []
    try:
        for mode in modes:
            root = extract(workdir / mode)
            if mode == "mixin":
                rewritten = make_mixin(root)
                if not rewritten:
                    msg = f"no `from pynamodb.models import Model` found under {root}"
                    raise RuntimeError(msg)
            extra = {"PYNAMODB_INTEGRATION_TEST_DDB_URL": endpoints[mode]} if endpoints else {}
            running.append(_start(mode, suite, root, extra))
        return {r.mode: _finish(r, suite, timeout) for r in running}, rewritten
    finally:
        for r in running:
            if r.process.poll() is None:
                r.process.kill()
                r.process.wait()


# --- comparing -------------------------------------------------------------------------------


def _short(value: Any, limit: int = 200) -> str:
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def first_difference(plain: Any, mixin: Any, path: str = "") -> str | None:
    """Where ``mixin`` first differs from ``plain`` (key order of dicts included); None if equal."""
    if isinstance(plain, dict) and isinstance(mixin, dict):
        return _dict_difference(plain, mixin, path)
    if isinstance(plain, list) and isinstance(mixin, list):
        return _list_difference(plain, mixin, path)
    if plain != mixin or type(plain) is not type(mixin):
        return f"{path or 'kwargs'}: plain {_short(plain)} != mixin {_short(mixin)}"
    return None


def _dict_difference(plain: dict[str, Any], mixin: dict[str, Any], path: str) -> str | None:
    """A key in one dict only, else the first differing value, else a different key order."""
    only_plain = [key for key in plain if key not in mixin]
    if only_plain:
        return f"{path}[{only_plain[0]!r}] only in plain: {_short(plain[only_plain[0]])}"
    only_mixin = [key for key in mixin if key not in plain]
    if only_mixin:
        return f"{path}[{only_mixin[0]!r}] only in mixin: {_short(mixin[only_mixin[0]])}"
    found = next((d for key in plain if (d := first_difference(plain[key], mixin[key], f"{path}[{key!r}]"))), None)
    if found is None and list(plain) != list(mixin):
        found = f"{path or 'kwargs'}: same keys in another order: plain {list(plain)}, mixin {list(mixin)}"
    return found


def _list_difference(plain: list[Any], mixin: list[Any], path: str) -> str | None:
    """The first differing item, else a different length."""
    pairs = zip(plain, mixin, strict=False)
    found = next((d for i, (a, b) in enumerate(pairs) if (d := first_difference(a, b, f"{path}[{i}]"))), None)
    if found is None and len(plain) != len(mixin):
        found = f"{path}: {len(plain)} items in plain, {len(mixin)} in mixin"
    return found


@dataclasses.dataclass(frozen=True)
class RequestDifference:
    """One test whose requests differ between the modes: which request, and its first differing key."""

    test: str
    index: int | None
    operation: str
    detail: str

    def __str__(self) -> str:
        where = "requests" if self.index is None else f"request #{self.index} {self.operation}"
        return f"{self.test}: {where}: {self.detail}"


def compare_requests(plain: RunResult, mixin: RunResult) -> list[RequestDifference]:
    """The first request difference of every test recorded in both runs."""
    differences = []
    for test in sorted(plain.requests.keys() & mixin.requests.keys()):
        ours, theirs = plain.requests[test], mixin.requests[test]
        for index, (a, b) in enumerate(zip(ours, theirs, strict=False)):
            if a["operation"] != b["operation"]:
                detail = f"operation: plain {a['operation']}, mixin {b['operation']}"
                differences.append(RequestDifference(test, index, a["operation"], detail))
                break
            found = first_difference(a["kwargs"], b["kwargs"])
            if found:
                differences.append(RequestDifference(test, index, a["operation"], found))
                break
        else:
            if len(ours) != len(theirs):
                detail = (
                    f"{len(ours)} in plain {[r['operation'] for r in ours]}, "
                    f"{len(theirs)} in mixin {[r['operation'] for r in theirs]}"
                )
                differences.append(RequestDifference(test, None, "", detail))
    return differences


@dataclasses.dataclass(frozen=True)
class Comparison:
    """The two runs of one suite and how they differ."""

    plain: RunResult
    mixin: RunResult
    rewritten: list[Path]
    request_differences: list[RequestDifference]

    @property
    def outcome_differences(self) -> dict[str, str]:
        """Tests whose outcome differs between the modes, ``plain -> mixin``."""
        tests = self.plain.outcomes.keys() | self.mixin.outcomes.keys()
        return {
            t: f"{self.plain.outcomes.get(t, 'not run')} -> {self.mixin.outcomes.get(t, 'not run')}"
            for t in sorted(tests)
            if self.plain.outcomes.get(t) != self.mixin.outcomes.get(t)
        }

    def report(self) -> str:
        """A readable account of both runs and every difference."""
        lines = [f"peer {self.plain.suite} tests; files rewritten for mixin mode: {len(self.rewritten)}"]
        for run in (self.plain, self.mixin):
            lines.append(
                f"{run.mode}: {len(run.outcomes)} tests {run.counts()} in {run.seconds:.1f}s (exit {run.returncode})"
            )
            lines.extend(f"  collection error {t}: {m}" for t, m in run.collect_errors.items())
            lines.extend(f"  {t}: {m}" for t, m in run.not_passed.items())
        differences = self.outcome_differences
        lines.append(f"outcome differences (plain -> mixin): {len(differences)}")
        # A module that failed to import in one mode: one line, not one per test.
        hidden: dict[str, int] = {}
        for test, difference in differences.items():
            module = test.split("::", 1)[0]
            if (
                "not run" in difference
                and module in self.plain.collect_errors.keys() | self.mixin.collect_errors.keys()
            ):
                hidden[module] = hidden.get(module, 0) + 1
            else:
                lines.append(f"  {test}: {difference}")
        lines.extend(f"  {module}: {n} tests not run in one mode (collection error)" for module, n in hidden.items())
        note = " (not checked: the integration tests write timestamps)" if self.plain.suite == "integration" else ""
        lines.append(f"request differences: {len(self.request_differences)}{note}")
        lines.extend(f"  {d}" for d in self.request_differences)
        return "\n".join(lines)


def compare(
    suite: Suite = "unit", endpoints: Mapping[Mode, str] | None = None, workdir: Path | None = None
) -> Comparison:
    """Run ``suite`` in both modes (in a temporary folder unless ``workdir``) and compare them."""
    with contextlib.ExitStack() as stack:
        if workdir is None:
            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="pynamodb-conformance-")))
        else:
            for mode in MODES:
                shutil.rmtree(workdir / mode, ignore_errors=True)
        results, rewritten = run_modes(workdir, suite, endpoints)
    plain, mixin = results["plain"], results["mixin"]
    return Comparison(plain, mixin, rewritten, compare_requests(plain, mixin))


# --- dynoxide --------------------------------------------------------------------------------


def dynoxide_binary() -> Path:
    """The dynoxide binary the test suite uses."""
    return _dynoxide.binary()


def dynoxide_server() -> contextlib.AbstractContextManager[str]:
    """A fresh in-memory dynoxide server (the test suite's helper)."""
    return _dynoxide.server()


def compare_integration(workdir: Path | None = None) -> Comparison:
    """Run the peer integration tests in both modes, each against its own fresh dynoxide server.

    The peer tests create tables with fixed names, so the two concurrent runs cannot share one.
    """
    with dynoxide_server() as plain_url, dynoxide_server() as mixin_url:
        return compare("integration", {"plain": plain_url, "mixin": mixin_url}, workdir)
