"""The diagnosis table: each catalogued bug's answers to the call plan's recorded calls.

The call plan (:mod:`autograder.engine.plan`) records, per test case, the calls a passing run makes
and the reference's answers.  Grading sends those calls to every submission anyway.  This table
records what each bug of ``tests/catalogue/catalogue.py`` answers to the same calls, so a failing
submission's answers can be compared with every catalogued mistake at no extra cost
(:mod:`autograder.diagnosis.match`).

Only digests are stored: per case, ``sha256`` of the case's calls together with the answers.  A digest
binds an answer to the exact calls it answered (a table built from another plan matches nothing) and
reveals neither the hidden inputs nor the answers; the table is still kept beside the plan, with the
hidden tests.  Per case the table holds the reference's digest and the digest of every bug that
answers differently (a bug absent there answers like the reference).

The table is rebuilt from the code at build time (``python -m autograder.diagnosis build``), never
committed: scenario replies change with the checks.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

from autograder import ROOT

if TYPE_CHECKING:  # importing the plan imports pytest: the build starts the sandbox's zygote first
    from autograder.engine import plan as call_plan

TABLE_ENV = "AMP_DIAGNOSIS"  # a table's path, or "off"
SHIPPED = ROOT / "autograder" / "hidden" / "diagnosis.json"
CATALOGUE = ROOT / "tests" / "catalogue" / "catalogue.py"
VERSION = 1


def digest(calls: Sequence[call_plan.Call], answers: Sequence[str | None]) -> str:
    """One case's answers bound to the calls they answer (a short hex digest)."""
    text = json.dumps([[[c.scenario, c.args, c.timeout] for c in calls], list(answers)], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


@dataclass
class CaseDigests:
    test: str
    reference: str
    bugs: dict[str, str] = field(default_factory=dict)  # bug -> digest, only where it differs from the reference


@dataclass
class Table:
    """{case name -> digests}, and the rubric rows each bug is known to fail (its ``must_fail``)."""

    cases: dict[str, CaseDigests]
    rows: dict[str, list[str]]  # bug -> rubric numbers
    public_only: bool = False

    def to_json(self) -> str:
        return json.dumps({"version": VERSION, "public_only": self.public_only, "rows": self.rows,
                           "cases": {name: c.__dict__ for name, c in self.cases.items()}}, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "Table":
        data = json.loads(text)
        if data.get("version") != VERSION:
            raise ValueError(f"diagnosis table version {data.get('version')!r}, expected {VERSION}")
        return cls({name: CaseDigests(**c) for name, c in data["cases"].items()},
                   {bug: list(rows) for bug, rows in data["rows"].items()}, bool(data.get("public_only")))


def load_catalogue() -> Any:
    """``tests/catalogue/catalogue.py``, loaded by path (tests/ is not a package)."""
    spec = importlib.util.spec_from_file_location("amp_catalogue", CATALOGUE)
    assert spec is not None and spec.loader is not None
    module = sys.modules.setdefault(spec.name, importlib.util.module_from_spec(spec))
    if not hasattr(module, "ENTRIES"):
        spec.loader.exec_module(module)
    return module


def answers_of(runner: Any, cases: Iterable[call_plan.Case]) -> dict[str, list[str | None]]:
    """Send each case's recorded calls through ``runner`` (as grading does); the canonical answers, by case."""
    found = {}
    for case in cases:
        runner.begin_test(case.name)
        found[case.name] = runner.prefetch([(c.scenario, c.args, c.timeout) for c in case.calls])
        runner.forget_prefetched(case.name)
    return found


def build(plan: call_plan.Plan, entries: Sequence[Any], runner_factory: Callable[[Path], Any] | None = None,
          tests: set[str] | None = None, progress: Callable[[str], None] | None = None) -> Table:
    """Answer ``plan``'s calls with every catalogued bug in ``entries``; the table of their digests.

    ``tests`` restricts the table to those test functions (the student-side table: public tests only).
    A correct variant in ``entries`` is recorded with no rows (so it is never diagnosed): the tests use it
    to check that no correct style answers any row like a bug.
    """
    from autograder.engine.sandbox import SandboxRunner

    make_runner = runner_factory or SandboxRunner
    cases = [case for case in plan.cases if tests is None or case.test in tests]
    table = Table({case.name: CaseDigests(case.test, digest(case.calls, [c.answer for c in case.calls]))
                   for case in cases}, {}, public_only=tests is not None)
    scratch = Path(tempfile.mkdtemp(prefix="amp-diagnosis-"))
    catalogue = load_catalogue()
    try:
        for entry in entries:
            started = time.monotonic()
            folder = catalogue.materialize(entry, scratch / entry.folder_name)
            runner = make_runner(folder)
            try:
                found = answers_of(runner, cases)
            finally:
                runner.close()
            for case in cases:
                mine = digest(case.calls, found[case.name])
                if mine != table.cases[case.name].reference:
                    table.cases[case.name].bugs[entry.name] = mine
            table.rows[entry.name] = sorted(entry.must_fail) if entry.kind == "bug" else []
            if progress:
                progress(f"{entry.name}: {time.monotonic() - started:.1f} s")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return table


_LOADED: dict[str, Table | None] = {}


def current_table() -> Table | None:
    """The table grading uses: ``$AMP_DIAGNOSIS`` (a path, or "off"), else the shipped one; None if none.

    A missing or damaged table only costs the diagnosis lines, never a grade.
    """
    setting = os.environ.get(TABLE_ENV, "")
    if setting.lower() == "off":
        return None
    path = Path(setting) if setting else SHIPPED
    key = str(path)
    if key not in _LOADED:
        try:
            _LOADED[key] = Table.from_json(path.read_text(encoding="utf-8"))
        except (OSError, ValueError, KeyError, TypeError):
            _LOADED[key] = None
    return _LOADED[key]
