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

The students' table (``--public``: :data:`checks.judge.diagnose.STUDENT_TABLE`) keeps the public tests only and
also their recorded calls (public inputs), so the public checks can replay them (:mod:`checks.judge.diagnose`).

Both tables are committed, so that every checkout diagnoses from its first grading: the grader's at
``autograder/hidden/diagnosis.json`` (``make diagnosis``, also run by ``make student``; it holds digests of
hidden answers, as secret as the hidden tests committed beside it and, like them, never released to
students), the students' in ``assignment/checks/`` (``make student``: a student's clone has no catalogue to
build it from).  Each records :func:`source_fingerprint` of what it was built from, so a test says when it
is stale, and grading says so in one line (:func:`state`).  The Gradescope zip still builds its own.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

from autograder import ROOT, settings
from autograder.diagnosis import words
from autograder import locations
from checks.judge.diagnose import UNANSWERED, CaseDigests, Table, digest  # noqa: F401 - this module's API too

if TYPE_CHECKING:  # importing the plan imports pytest: the build starts the sandbox's zygote first
    from autograder.engine import plan as call_plan

SHIPPED = locations.SHIPPED_TABLE
CATALOGUE = locations.CATALOGUE
#: The students' table as released: where ``make student`` writes it, committed (``checks.judge.diagnose.STUDENT_TABLE``
#: is where the checks read it, ``$AMP_STUDENT_DIAGNOSIS`` honoured).
RELEASED_TABLE = ROOT / "assignment" / "checks" / "diagnosis.json"


def source_files() -> list[Path]:
    """What a table's digests depend on: the checks' scenarios, the reference, the catalogue, the twin groups
    (``diagnosis/words.py``) and the reference amp_step that judges Task 2, kept in the grader.  Not the mistakes'
    words: a table holds none (they are looked up when a line is rendered), and the fingerprint leaves them out
    (:data:`autograder.engine.fingerprint.WORDS_ONLY`)."""
    return sorted([*(ROOT / "assignment" / "checks").rglob("*.py"), *(ROOT / "solutions").glob("*.py"),
                   locations.ENGINE / "amp_reference.py",
                   *(ROOT / "tests" / "catalogue").rglob("*.py"), ROOT / "autograder" / "diagnosis" / "words.py"])


def grader_source_files() -> list[Path]:
    """What the grader's table depends on too: the hidden tests and the judge's settings choose its cases."""
    return sorted([*source_files(), *locations.HIDDEN_TESTS.glob("test_*.py"), locations.ENGINE / "judge.ini"])


def source_fingerprint(public: bool = True) -> str:
    """What a table's digests depend on, hashed: equal fingerprints, same table.

    The behaviour of :func:`source_files` (``public=False``: :func:`grader_source_files`), docstrings and
    comments left out (:func:`autograder.engine.fingerprint.behaviour_digest`), and the rubric's rows as the
    build reads them (number, test, suite: which tests a table covers; not points, not titles); the grader's
    table, also the examples each hidden property test explores (they choose its cases' answers).  The one
    function both the staleness check of grading (:func:`state`) and the release's rebuild decision use.
    """
    from autograder.engine import examples, fingerprint, rubric

    files = source_files() if public else grader_source_files()
    rows = [[item.number, item.test, item.suite] for item in rubric.ITEMS]
    extra = {} if public else {"examples": examples.COUNTS}
    # the digest hashes names, not paths: the catalogue has several loss_scaler.py
    return fingerprint.behaviour_digest(files, {"paths": [path.relative_to(ROOT).as_posix() for path in files],
                                                "rows": rows, **extra})


def public_tests() -> set[str]:
    """The rows' test functions that the public checks define (the rows the students' table may cover): every
    row of a public suite, and every hidden row with a public example of the same name (2.7's, 1.12's...)."""
    import re

    from autograder.engine import rubric

    defined = {name for path in settings.public_tests().glob("test_*.py")
               for name in re.findall(r"^def (test_\w+)\(", path.read_text(encoding="utf-8"), re.MULTILINE)}
    return {item.test for item in rubric.ITEMS if item.test in defined}


def hidden_data(table: Table) -> list[str]:
    """What in a students' table is not public (empty when it is safe to hand out): one line per problem."""
    public = public_tests()
    problems = [] if table.public_only else ["not built with --public"]
    problems += [f"case {name} of the hidden test {case.test}" for name, case in table.cases.items()
                 if case.test not in public]
    problems += [f"{bug} is known to fail hidden tests {sorted(set(tests) - public)}"
                 for bug, tests in table.rows.items() if set(tests) - public]
    return problems


def case_digest(case: "call_plan.Case", answers: Sequence[str | None]) -> str:
    """A plan case's answers bound to its calls (:data:`UNANSWERED` when a call got no answer)."""
    if None in answers:
        return UNANSWERED
    return digest([(c.scenario, c.args, c.timeout) for c in case.calls], answers)


def load_catalogue() -> Any:
    """``tests/catalogue/catalogue.py``, loaded by path (tests/ is not a package)."""
    spec = importlib.util.spec_from_file_location("amp_catalogue", CATALOGUE)
    assert spec is not None and spec.loader is not None
    module = sys.modules.setdefault(spec.name, importlib.util.module_from_spec(spec))
    if not hasattr(module, "ENTRIES"):
        spec.loader.exec_module(module)
    return module


def public_part(case: "call_plan.Case") -> "call_plan.Case":
    """``case`` with its public calls only: a hidden row's test has its public example's name, so the plan's case
    holds the calls of both, and a student runs only the public example (its digests are over those calls)."""
    from dataclasses import replace

    return replace(case, calls=[call for call in case.calls if call.public])


def answers_of(runner: Any, cases: Iterable[call_plan.Case]) -> dict[str, list[str | None]]:
    """Send the cases' recorded calls through ``runner`` (as grading does, phase by phase); the canonical answers,
    by case."""
    from autograder.engine.plan import fetch_ahead  # the judge's module: loaded only when a table is built

    return fetch_ahead(runner, list(cases))


def build(plan: call_plan.Plan, entries: Sequence[Any], runner_factory: Callable[[Path], Any] | None = None,
          tests: set[str] | None = None, progress: Callable[[str], None] | None = None) -> Table:
    """Answer ``plan``'s calls with every catalogued bug in ``entries``; the table of their digests.

    ``tests`` restricts the table to those test functions; given, the table is the students': each case keeps its
    public calls only (:func:`public_part`).
    A correct variant in ``entries`` is recorded with no rows (so it is never diagnosed): the tests use it
    to check that no correct style answers any row like a bug.
    """
    from autograder.engine import rubric
    from autograder.sandbox.runner import SandboxRunner

    make_runner = runner_factory or SandboxRunner
    test_of = {item.number: item.test for item in rubric.ITEMS}
    public = tests is not None
    cases = [public_part(case) if public else case for case in plan.cases if tests is None or case.test in tests]
    cases = [case for case in cases if case.calls or not public]  # a hidden test with no public example: none
    table = Table({case.name: CaseDigests(case.test, case_digest(case, [c.answer for c in case.calls]),
                                          calls=[[c.scenario, c.args, c.timeout] for c in case.calls] if public else None)
                   for case in cases}, {}, twins=[sorted(group) for group in words.TWINS], public_only=public,
                  source=source_fingerprint(public))
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
                mine = case_digest(case, found[case.name])
                if mine != table.cases[case.name].reference:
                    table.cases[case.name].bugs[entry.name] = mine
            failing = sorted(test_of[n] for n in entry.must_fail) if entry.kind == "bug" else []
            table.rows[entry.name] = [test for test in failing if not public or test in tests]
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
    setting = settings.diagnosis_table()
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


@dataclass(frozen=True)
class TableState:
    """The table grading uses, or why there is none."""

    table: Table | None
    off: str = ""  # why nothing is diagnosed ("" when a table is there)
    stale: bool = False  # older than the code: rows whose cases changed are not diagnosed

    def line(self) -> str:
        """One line for the console, "" when the table is there and current."""
        if self.table is None:
            return f"diagnosis: off ({self.off}): no 'Likely mistake' lines; report.html lists no mistakes"
        if self.stale:
            return ("diagnosis: the table is older than the code (make diagnosis rebuilds it): rows whose cases "
                    "changed are not diagnosed")
        return ""


def state() -> TableState:
    """The table grading uses (:func:`current_table`), with why there is none or whether it is stale.

    A checkout's table is committed (``make diagnosis`` rebuilds it): one older than the code still diagnoses
    the rows whose cases did not change (a digest binds answers to their calls), so it is used, and said so.
    Staleness is judged only in a checkout (elsewhere the sources it hashes are not there).
    """
    setting = settings.diagnosis_table()
    found = current_table()
    if found is None:
        return TableState(None, f"${settings.DIAGNOSIS.env}=off" if settings.diagnosis_off()
                          else f"no readable table at {setting or SHIPPED}; make diagnosis builds it")
    if not plan_possible():
        return TableState(None, "no call plan here, and the table compares answers to the plan's calls")
    stale = not setting and CATALOGUE.is_file() and found.source != source_fingerprint(public=False)
    return TableState(found, stale=stale)


def plan_possible() -> bool:
    """Whether grading here has a call plan (:func:`autograder.engine.plan.current_plan`, which imports pytest):
    shipped, or recorded from a checkout's reference solution, and not switched off."""
    if settings.plan_off():
        return False
    return locations.SHIPPED_PLAN.is_file() or (locations.REFERENCE_SOLUTION / "loss_scaler.py").is_file()


def table_for_zip() -> str | None:
    """The grader's table for the Gradescope zip: the committed one when current, else one built now (or None)."""
    current = state()
    if current.table is not None and not current.stale and not settings.diagnosis_table():
        return SHIPPED.read_text(encoding="utf-8")
    return recorded_table()


def recorded_table(public: bool = False) -> str | None:
    """A table built in a fresh process (for the Gradescope zip or the student release), or None.

    The Gradescope zip holds it at ``autograder/hidden/diagnosis.json`` (:data:`SHIPPED`, beside the
    plan); the student release at ``checks/diagnosis.json`` (``public=True``).  A failed build only
    costs the diagnosis lines, so it warns instead of failing the packaging.
    """
    import subprocess

    if settings.diagnosis_off() or not CATALOGUE.is_file():
        return None
    with tempfile.TemporaryDirectory() as folder:
        target = Path(folder) / "diagnosis.json"
        done = subprocess.run([sys.executable, "-m", "autograder.diagnosis", "build", "--quiet", "--out", str(target),
                               *(["--public"] if public else [])], cwd=ROOT, capture_output=True, text=True)
        if done.returncode != 0:
            print(f"warning: no diagnosis table (no 'Likely mistake' lines):\n{done.stderr[-1500:]}", file=sys.stderr)
            return None
        return target.read_text(encoding="utf-8")
