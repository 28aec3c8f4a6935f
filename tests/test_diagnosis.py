"""The diagnosis (autograder/diagnosis): a failing row that answers exactly like one catalogued bug names it.

Built once per session for a handful of bugs and correct variants, not the whole catalogue (building
it answers the call plan once per entry: ~10 s each on a loaded machine; ``python -m autograder.diagnosis
build`` does all of them for the Gradescope zip):

* from the table alone: a bug's own answers on each row it fails are diagnosed as that bug (or a listed
  twin) and never as another one; no correct variant answers any row like a bug;
* end to end: each bug graded alone by ``python -m autograder grade`` gets the line on its failing row
  and ``extra_data.diagnosis``, naming itself (or a twin) and nothing else; the correct variant gets
  none;
* the matching rules by hand: an ambiguous match, a passing row, a missing case: no diagnosis.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from autograder.diagnosis import match, words
from autograder.diagnosis.table import UNANSWERED, CaseDigests, Table, hidden_data, load_catalogue, source_fingerprint
from checks.judge import diagnose
from checks.judge.diagnose import match_test
from checks.words import MISTAKES
from autograder.engine import judge, rubric
from conftest import ROOT, grade, load_results

catalogue = load_catalogue()
BY_NAME = {entry.name: entry for entry in catalogue.ENTRIES}
#: Two bugs per row on 1.5 and 1.6 (told apart only by their answers), detection, Task 2, and a pair of listed
#: twins (2.1).  The table of the whole catalogue and every variant (``build --variants all``, by hand on
#: 2026-12-01, 8.5 min) diagnoses 59 of the 61 bugs as themselves or a listed twin and none as another; no
#: variant answers any row like a bug.  (Two Quick Check bugs are not diagnosed: the Quick Check rows share
#: one call, the first row's, so the others have no answers of their own.)
BUGS = ["growth_off_by_one", "tracker_not_reset_after_growth", "tracker_not_reset_on_backoff", "backoff_divides",
        "nan_ignored", "no_zero_grad", "returns_scaled_loss", "hardcoded_cuda", "no_autocast"]
VARIANTS = ["plain_style", "tracker_increment_then_compare", "isinf_or_isnan", "amp_style", "answers_lowercase"]
GRADED_VARIANT = "plain_style"


@pytest.fixture(scope="session")
def table_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("diagnosis") / "diagnosis.json"
    done = subprocess.run([sys.executable, "-m", "autograder.diagnosis", "build", "--out", str(path), "--quiet",
                           "--bugs", ",".join(BUGS), "--variants", ",".join(VARIANTS)],
                          cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return path


@pytest.fixture(scope="session")
def table(table_path: Path) -> Table:
    return Table.from_json(table_path.read_text())


def own_digests(table: Table, entry: str, test: str) -> dict[str, str]:
    """What ``entry`` answered on every case of ``test`` (case -> digest)."""
    return {name: case.bugs.get(entry, case.reference) for name, case in table.cases.items() if case.test == test}


def differs(table: Table, entry: str, test: str) -> bool:
    return any(entry in case.bugs for case in table.cases.values() if case.test == test)


def test_the_table_holds_digests_only(table_path: Path, table: Table) -> None:
    text = table_path.read_text()
    assert '"scenario"' not in text and '"args"' not in text  # no recorded inputs, no answers
    assert '"words"' not in text  # nor words: a line looks them up when it is shown (checks/words.py MISTAKES)
    assert set(table.rows) == set(BUGS) | set(VARIANTS)
    assert all(table.rows[name] == [] for name in VARIANTS)
    assert {case.test for case in table.cases.values()} == {item.test for item in rubric.ITEMS}
    assert all(case.calls is None for case in table.cases.values())  # the grader's table: no calls either


def test_each_bug_is_diagnosed_as_itself_or_a_twin_never_as_another(table: Table) -> None:
    diagnosable = set()
    for bug in BUGS:
        for test in table.rows[bug]:
            got = match_test(table, test, own_digests(table, bug, test))
            assert set(got) <= table.twins_of(bug), f"{bug} on {test} diagnosed as {got}"
            if differs(table, bug, test) and UNANSWERED not in own_digests(table, bug, test).values():
                assert bug in got, f"{bug} answers {test} differently from the reference but is not diagnosed " \
                                   f"(an unlisted twin?)"
                diagnosable.add(bug)
    assert diagnosable == set(BUGS)


def test_no_correct_variant_answers_a_row_like_a_bug(table: Table) -> None:
    for variant in VARIANTS:
        for item in rubric.ITEMS:
            got = match_test(table, item.test, own_digests(table, variant, item.test))
            assert got == (), f"the correct variant {variant} would be diagnosed as {got} on {item.number}"


@pytest.fixture(scope="session")
def graded(tmp_path_factory: pytest.TempPathFactory, table_path: Path) -> dict[str, dict[str, Any]]:
    """results.json of each bug (and one correct variant) graded alone, with the table."""
    base = tmp_path_factory.mktemp("diagnosed")
    names = BUGS + [GRADED_VARIANT]
    paths = [catalogue.materialize(BY_NAME[name], base / "submissions" / name) for name in names]
    # two workers: each grades enough submissions to record the call plan, whose answers the diagnosis compares
    done = grade(paths, base / "out", "--jobs", "2", env={"AMP_DIAGNOSIS": str(table_path)})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return {name: load_results(base / "out", name) for name in names}


def test_graded_bugs_are_diagnosed_as_themselves_on_their_failing_rows(graded: dict[str, dict[str, Any]],
                                                                        table: Table) -> None:
    for bug in BUGS:
        results = graded[bug]
        diagnosis = results["extra_data"].get("diagnosis", {})
        rows = {test["number"]: test for test in results["tests"]}
        assert diagnosis, f"{bug} got no diagnosis: {results['extra_data']}"
        for number, bugs in diagnosis.items():
            assert set(bugs) <= table.twins_of(bug), f"{bug} diagnosed as {bugs} on {number}"
            assert rows[number]["status"] == "failed"
            assert words.sentence(bugs) in rows[number]["output"]  # the student's line, in the row's own output
        for number, row in rows.items():  # no other row carries a diagnosis line
            if number not in diagnosis:
                assert "Likely mistake:" not in str(row.get("output", "")), (bug, number)


def test_a_correct_variant_gets_no_diagnosis(graded: dict[str, dict[str, Any]]) -> None:
    results = graded[GRADED_VARIANT]
    assert results["score"] == rubric.max_points()
    assert "diagnosis" not in results["extra_data"]


# --------------------------------------------------------------------------- the rules, by hand (fast)


T = "test_update_rule_properties"


def _table() -> Table:
    cases = {"t[a]": CaseDigests(T, "ref-a", {"x": "bad-a", "y": "bad-a"}), "t[b]": CaseDigests(T, "ref-b", {"y": "bad-b"})}
    return Table(cases, {"x": [T], "y": [T], "z": ["test_update_backs_off_after_inf_or_nan"]})


def test_a_match_must_cover_every_case_of_the_row_and_be_unambiguous() -> None:
    table = _table()
    assert match_test(table, T, {"t[a]": "bad-a", "t[b]": "ref-b"}) == ("x",)
    assert match_test(table, T, {"t[a]": "bad-a", "t[b]": "bad-b"}) == ("y",)
    assert match_test(table, T, {"t[a]": "bad-a", "t[b]": "other"}) == ()  # one case differs
    assert match_test(table, T, {"t[a]": "bad-a"}) == ()  # a case of the row without answers
    assert match_test(table, "test_update_backs_off_after_inf_or_nan", {"t[a]": "bad-a", "t[b]": "ref-b"}) == ()
    assert match_test(table, T, {"t[a]": "bad-a", "t[b]": "ref-b", "unknown": "?"}) == ()  # a case the table lacks
    ambiguous = Table({"t[a]": CaseDigests(T, "ref", {"x": "bad", "y": "bad"})}, {"x": [T], "y": [T]})
    assert match_test(ambiguous, T, {"t[a]": "bad"}) == ()  # two bugs, not twins: say nothing
    unanswered = Table({"t[a]": CaseDigests(T, "ref", {"x": UNANSWERED})}, {"x": [T]})
    assert match_test(unanswered, T, {"t[a]": UNANSWERED}) == ()  # two refusals are no shared mistake


def test_twins_are_named_together(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(MISTAKES["en"], "x", "one thing")
    monkeypatch.setitem(MISTAKES["en"], "y", "another")
    twins = Table({"t[a]": CaseDigests(T, "ref", {"x": "bad", "y": "bad"})}, {"x": [T], "y": [T]}, twins=[["x", "y"]])
    assert match_test(twins, T, {"t[a]": "bad"}) == ("x", "y")
    assert twins.sentence(["x", "y"]).endswith("when one thing, or when another.")


def _plan_and_report(answers: dict[str, list[str | None]], passed: bool = False) -> tuple[Any, Any, Table]:
    from autograder.diagnosis.table import case_digest

    plan = SimpleNamespace(cases=[SimpleNamespace(test=T, name=name, calls=[]) for name in ("t[a]", "t[b]")])
    table = Table({"t[a]": CaseDigests(T, case_digest(plan.cases[0], ["ref"]), {"x": case_digest(plan.cases[0], ["A"])}),
                   "t[b]": CaseDigests(T, case_digest(plan.cases[1], ["ref"]), {})}, {"x": [T]})
    row = SimpleNamespace(item=rubric.BY_TEST[T], passed=passed, message="saw 2.0, expected 4.0")
    return row, SimpleNamespace(rows=[row], plan=plan, answers=answers), table


def test_diagnosis_gives_each_failing_diagnosed_row_one_line_and_staff_data() -> None:
    row, report, table = _plan_and_report({"t[a]": ["A"], "t[b]": ["ref"]})
    found = match.diagnose(report, table)
    assert match.row_lines(found) == {"1.6": table.sentence(["x"])}
    assert match.staff_data(found) == {"diagnosis": {"1.6": ["x"]}}
    assert row.message == "saw 2.0, expected 4.0"  # data for the formatter: the report is left as it was
    row, report, table = _plan_and_report({"t[a]": ["A"], "t[b]": ["ref"]}, passed=True)
    assert match.diagnose(report, table) == [] and match.staff_data([]) == {}
    row, report, table = _plan_and_report({"t[a]": ["A"], "t[b]": [None]})  # a call not answered
    assert match.diagnose(report, table) == []
    row, report, table = _plan_and_report({"t[a]": ["A"]})  # a case not answered
    assert match.diagnose(report, table) == []
    report.plan = None
    assert match.diagnose(report, table) == []


def test_diagnosed_results_place_the_line_after_the_row_message_once() -> None:
    row, loose, table = _plan_and_report({"t[a]": ["A"], "t[b]": ["ref"]})
    report = judge.Report(rows=[judge.Row(row.item, 0.0, row.message, False)], plan=loose.plan, answers=loose.answers)
    line = table.sentence(["x"])
    data = match.diagnosed_results(report, "alice", table)
    (test,) = [t for t in data["tests"] if t["number"] == "1.6"]
    assert test["output"] == f"{line}\n\nsaw 2.0, expected 4.0"  # the likely mistake first
    assert data["extra_data"] == {"scenarios_run": 0, "diagnosis": {"1.6": ["x"]}, "cases": {"1.6": [0, 0]}}
    report.rows[0].message = f"saw 2.0\n\n{line}"  # already there: not added twice
    (test,) = [t for t in match.diagnosed_results(report, "alice", table)["tests"] if t["number"] == "1.6"]
    assert test["output"].count(line) == 1


# --------------------------------------------------------------------------- the students' side (public checks)

PUBLIC_BUGS = ["backoff_divides", "tracker_not_reset_on_backoff"]


@pytest.fixture(scope="session")
def student_table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("student-diagnosis") / "diagnosis.json"
    done = subprocess.run([sys.executable, "-m", "autograder.diagnosis", "build", "--public", "--out", str(path),
                           "--quiet", "--bugs", ",".join(PUBLIC_BUGS)], cwd=ROOT, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return path


def test_the_students_table_holds_public_cases_only(student_table: Path) -> None:
    table = Table.from_json(student_table.read_text())
    assert table.public_only and hidden_data(table) == []
    assert all(case.calls is not None for case in table.cases.values())
    assert table.source == source_fingerprint()
    leaky = Table(dict(table.cases), {"x": ["test_update_rule_properties", "test_hidden_whatever"]})
    assert len(hidden_data(leaky)) == 2  # not --public, and a row of a hidden test


@pytest.mark.parametrize("bug", PUBLIC_BUGS)
def test_a_failing_public_check_prints_the_same_line_locally(bug: str, student_table: Path, tmp_path: Path) -> None:
    folder = catalogue.materialize(BY_NAME[bug], tmp_path / bug)
    done = subprocess.run([sys.executable, "-m", "pytest", "checks/test_public_scaler.py", "-k",
                           "test_update_backs_off_after_inf_or_nan"], cwd=ROOT / "assignment", capture_output=True, text=True,
                          timeout=600, env={**os.environ, "AMP_SUBMISSION": str(folder),
                                            "AMP_STUDENT_DIAGNOSIS": str(student_table)})
    assert done.returncode == 1, done.stdout[-3000:]  # the check fails...
    assert words.sentence([bug]) in done.stdout, done.stdout[-3000:]  # ...and names this mistake, no other
    others = [words.sentence([other]) for other in PUBLIC_BUGS if other != bug]
    assert not any(line in done.stdout for line in others)


def test_the_notebooks_check_adds_the_same_line(student_table: Path, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """``grader.check`` (amp_otter_bridge.py) reads the line from pytest's junit XML into its failure message."""
    from autograder.packaging import otter_build, otter_public

    bug = "backoff_divides"
    folder = catalogue.materialize(BY_NAME[bug], tmp_path / "notebook")  # as the %%writefile cells leave it
    shutil.copytree(ROOT / "assignment" / "checks", folder / "checks",
                    ignore=shutil.ignore_patterns("__pycache__", "diagnosis.json"))
    shutil.copy(student_table, folder / "checks" / "diagnosis.json")  # where a student's copy has it
    monkeypatch.chdir(folder)
    monkeypatch.delenv("AMP_STUDENT_DIAGNOSIS", raising=False)
    item = rubric.BY_TEST["test_update_backs_off_after_inf_or_nan"]
    [(_, _, _, verdict)] = otter_public.cases([(item.number, item.title, item.points, False,
                                                otter_build.public_node(item))], grading=False,
                                              texts=otter_build.bridge_texts("en"))
    with pytest.raises(AssertionError) as failed:
        verdict()
    assert str(failed.value).count(words.sentence([bug])) == 1, str(failed.value)[-3000:]
    assert otter_public.LIKELY_MISTAKE_PROPERTY == diagnose.JUNIT_PROPERTY  # the bridge imports nothing from checks/


def test_listed_twins_are_named_together_when_graded(graded: dict[str, dict[str, Any]]) -> None:
    for bug in ("hardcoded_cuda", "no_autocast"):
        assert graded[bug]["extra_data"]["diagnosis"].get("2.1") == ["hardcoded_cuda", "no_autocast"]
