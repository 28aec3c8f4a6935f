"""Diagnosis wherever grading runs: a checkout grades with the committed grader's table, or says it cannot.

The grader's table (``autograder/hidden/diagnosis.json``) is committed so that ``make grade`` and ``python -m
autograder grade`` diagnose from a fresh clone's first run; ``make diagnosis`` rebuilds it, and the first test
fails when it is stale.  It holds digests of hidden answers: it stays beside the hidden tests, never in
``assignment/``.  Without a table the run says so in one line and report.html says diagnosis is off.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from autograder import settings
from autograder.engine import rubric
from autograder.diagnosis.report import HTML_NAME, MISTAKES_NAME
from autograder.diagnosis.table import RELEASED_TABLE, SHIPPED, UNANSWERED, Table, load_catalogue, source_fingerprint
from checks.judge.diagnose import LINE_START
from conftest import ROOT, grade, load_results

catalogue = load_catalogue()
BY_NAME = {entry.name: entry for entry in catalogue.ENTRIES}
#: Single-bug submissions the whole table diagnoses (one per task: update rule, detection, amp_step).
BUGS = ["backoff_divides", "nan_ignored", "no_zero_grad"]
#: What grading in a checkout sees by default: the tests' conftest turns diagnosis off for everything else.
CHECKOUT_DEFAULT = {"AMP_DIAGNOSIS": ""}


def test_the_graders_table_is_committed_and_current() -> None:
    assert SHIPPED.is_file(), "autograder/hidden/diagnosis.json is missing: run `make diagnosis` and commit it"
    text = SHIPPED.read_text(encoding="utf-8")
    table = Table.from_json(text)
    assert not table.public_only and set(table.rows) >= set(BUGS)
    assert '"scenario"' not in text and '"args"' not in text  # digests only: no recorded inputs, no answers
    assert all(case.calls is None for case in table.cases.values())  # the grader's table: no calls either
    assert table.source == source_fingerprint(public=False), \
        "autograder/hidden/diagnosis.json is stale: run `make diagnosis` and commit the result"


def test_the_graders_table_never_reaches_students() -> None:
    table = Table.from_json(SHIPPED.read_text(encoding="utf-8"))
    students = Table.from_json(RELEASED_TABLE.read_text(encoding="utf-8"))
    public = {digest for case in students.cases.values() for digest in [case.reference, *case.bugs.values()]}
    hidden = {digest for case in table.cases.values()
              for digest in [case.reference, *case.bugs.values()] if digest != UNANSWERED and digest not in public}
    assert len(hidden) > 100
    for path in (ROOT / "assignment").rglob("*"):
        if path.is_file() and path.suffix in (".py", ".json", ".ipynb", ".md"):
            text = path.read_text(encoding="utf-8", errors="replace")
            assert not [digest for digest in hidden if digest in text], f"{path} holds the grader's table"


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("checkout-diagnosis")
    paths = [catalogue.materialize(BY_NAME[name], base / "submissions" / name) for name in BUGS]
    done = grade(paths, base / "out", "--jobs", "2", env=CHECKOUT_DEFAULT)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert "diagnosis:" not in done.stderr  # neither off nor stale
    return base / "out"


def test_a_checkout_diagnoses_single_bug_submissions_by_default(graded: Path) -> None:
    for bug in BUGS:
        results = load_results(graded, bug)
        diagnosis = results["extra_data"].get("diagnosis", {})
        assert diagnosis, f"{bug} got no diagnosis"
        assert all(bug in bugs for bugs in diagnosis.values()), (bug, diagnosis)
        lines = [t["output"] for t in results["tests"] if t["number"] in diagnosis]
        assert all(LINE_START in line for line in lines)
    with (graded / MISTAKES_NAME).open(encoding="utf-8", newline="") as handle:
        named = {row["mistake"] for row in csv.DictReader(handle)}
    assert set(BUGS) <= {bug for name in named for bug in name.split("+")}


def test_without_a_table_the_run_and_the_report_say_diagnosis_is_off(tmp_path: Path) -> None:
    submission = catalogue.materialize(BY_NAME[BUGS[0]], tmp_path / "submissions" / BUGS[0])
    done = grade([submission], tmp_path / "out", env={"AMP_DIAGNOSIS": str(tmp_path / "no-table.json")})
    assert done.returncode == 0, done.stderr[-3000:]
    off = [line for line in done.stderr.splitlines() if line.startswith("diagnosis:")]
    assert off == [f"diagnosis: off (no readable table at {tmp_path / 'no-table.json'}; make diagnosis builds it): "
                   "no 'Likely mistake' lines; report.html lists no mistakes"]
    page = (tmp_path / "out" / HTML_NAME).read_text(encoding="utf-8")
    assert "Diagnosis is off (no readable table at" in page
    assert "No failing row matched a catalogued mistake" not in page


def test_a_stale_table_is_used_and_said_so(monkeypatch: pytest.MonkeyPatch) -> None:
    from autograder.diagnosis import table

    monkeypatch.setenv(settings.DIAGNOSIS.env, "")
    monkeypatch.setattr(table, "source_fingerprint", lambda public=True: "other code")
    found = table.state()
    assert found.table is not None and found.stale
    assert found.line() == ("diagnosis: the table is older than the code (make diagnosis rebuilds it): rows whose "
                            "cases changed are not diagnosed")


def test_without_a_call_plan_diagnosis_is_off(monkeypatch: pytest.MonkeyPatch) -> None:
    from autograder.diagnosis import table

    monkeypatch.setenv(settings.DIAGNOSIS.env, "")
    monkeypatch.setenv(settings.PLAN.env, "off")
    found = table.state()
    assert found.table is None
    assert found.off == "no call plan here, and the table compares answers to the plan's calls"


def test_public_checks_and_grader_name_the_same_mistake_on_every_public_case() -> None:
    """The students' table (assignment/checks) and the grader's hold the same answers for every public case, and
    the same mistakes for every public test: a failing public case gets the same "Likely mistake" line locally, in
    the notebook and from the grader (both match with checks.judge.diagnose.match_test)."""
    students = Table.from_json(RELEASED_TABLE.read_text(encoding="utf-8"))
    grader = Table.from_json(SHIPPED.read_text(encoding="utf-8"))
    assert len(students.cases) >= 25
    whole = {item.test for item in rubric.ITEMS if item.test_suite == rubric.PUBLIC}  # rows with no hidden cases
    for name, case in students.cases.items():
        theirs = grader.cases.get(name)
        assert theirs is not None, f"public case {name} missing from the grader's table"
        assert case.test == theirs.test, name
        if case.test in whole:  # a hidden row's case holds hidden calls too in the grader's (the students': public only)
            assert (case.reference, case.bugs) == (theirs.reference, theirs.bugs), name
    public = {case.test for case in students.cases.values()}
    for bug in set(students.rows) | set(grader.rows):
        assert set(students.rows.get(bug, [])) == set(grader.rows.get(bug, [])) & public, bug
    assert students.twins == grader.twins
    # no words in either: both render a bug's from checks/words.py when the line is shown (a reword rebuilds neither)
    assert "words" not in json.loads(RELEASED_TABLE.read_text(encoding="utf-8"))
    assert "words" not in json.loads(SHIPPED.read_text(encoding="utf-8"))
