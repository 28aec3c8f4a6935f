"""The diagnosis (autograder/diagnosis): a failing row that answers exactly like one catalogued bug names it.

Built once per session for a handful of bugs and correct variants, not the whole catalogue (building
it answers the call plan once per entry: ~10 s each on a loaded machine; ``python -m autograder.diagnosis
build`` does all of them for the Gradescope zip):

* from the table alone: a bug's own answers on each row it fails are diagnosed as that bug (or a listed
  twin) and never as another one; no correct variant answers any row like a bug;
* end to end: each bug graded alone by ``python -m autograder grade`` gets the line on its failing row
  and ``extra_data.diagnosis``, naming itself (or a twin) and nothing else; the correct variant gets
  none; a bug only the delegation gate catches (its answers are the reference's) gets none;
* the matching rules by hand: an ambiguous match, a passing row, a missing case: no diagnosis.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from autograder.diagnosis import match, words
from autograder.diagnosis.table import CaseDigests, Table, load_catalogue
from autograder.engine import rubric
from conftest import ROOT, grade, load_results

catalogue = load_catalogue()
BY_NAME = {entry.name: entry for entry in catalogue.ENTRIES}
#: Two bugs per row on 1.5 and 1.6 (told apart only by their answers), detection, Task 2, Task 3, and one the
#: gate alone catches.
BUGS = ["growth_off_by_one", "tracker_not_reset_after_growth", "tracker_not_reset_on_backoff", "backoff_divides",
        "nan_ignored", "no_zero_grad", "returns_scaled_loss", "quick_check_backward_inside", "delegate_subclass"]
VARIANTS = ["plain_style", "tracker_increment_then_compare", "isinf_or_isnan", "amp_style", "answers_lowercase"]
GRADED_VARIANT = "plain_style"
NUMBER_OF = {item.test: item.number for item in rubric.ITEMS}


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


def own_digests(table: Table, entry: str, number: str) -> dict[str, str]:
    """What ``entry`` answered on every case of row ``number`` (case -> digest)."""
    return {name: case.bugs.get(entry, case.reference) for name, case in table.cases.items()
            if NUMBER_OF.get(case.test) == number}


def differs(table: Table, entry: str, number: str) -> bool:
    return any(entry in case.bugs for case in table.cases.values() if NUMBER_OF.get(case.test) == number)


def test_the_table_holds_digests_only(table_path: Path, table: Table) -> None:
    text = table_path.read_text()
    assert '"scenario"' not in text and '"args"' not in text  # no recorded inputs, no answers
    assert set(table.rows) == set(BUGS) | set(VARIANTS)
    assert all(table.rows[name] == [] for name in VARIANTS)
    assert {NUMBER_OF[case.test] for case in table.cases.values()} == {item.number for item in rubric.ITEMS}


def test_each_bug_is_diagnosed_as_itself_or_a_twin_never_as_another(table: Table) -> None:
    diagnosable = set()
    for bug in BUGS:
        for number in table.rows[bug]:
            got = match.match_row(table, number, own_digests(table, bug, number))
            assert set(got) <= words.twins_of(bug), f"{bug} on {number} diagnosed as {got}"
            if differs(table, bug, number):
                assert bug in got, f"{bug} answers {number} differently from the reference but is not diagnosed " \
                                   f"(an unlisted twin?)"
                diagnosable.add(bug)
    # the gate's bug answers like the reference: nothing to diagnose; every other one is diagnosable
    assert diagnosable == set(BUGS) - {"delegate_subclass"}


def test_no_correct_variant_answers_a_row_like_a_bug(table: Table) -> None:
    for variant in VARIANTS:
        for item in rubric.ITEMS:
            got = match.match_row(table, item.number, own_digests(table, variant, item.number))
            assert got == (), f"the correct variant {variant} would be diagnosed as {got} on {item.number}"


@pytest.fixture(scope="session")
def graded(tmp_path_factory: pytest.TempPathFactory, table_path: Path) -> dict[str, dict[str, Any]]:
    """results.json of each bug (and one correct variant) graded alone, with the table."""
    base = tmp_path_factory.mktemp("diagnosed")
    names = BUGS + [GRADED_VARIANT]
    paths = [catalogue.materialize(BY_NAME[name], base / "submissions" / name) for name in names]
    done = grade(paths, base / "out", env={"AMP_DIAGNOSIS": str(table_path)})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return {name: load_results(base / "out", name) for name in names}


def test_graded_bugs_are_diagnosed_as_themselves_on_their_failing_rows(graded: dict[str, dict[str, Any]]) -> None:
    for bug in BUGS:
        results = graded[bug]
        diagnosis = results["extra_data"].get("diagnosis", {})
        rows = {test["number"]: test for test in results["tests"]}
        if bug == "delegate_subclass":
            assert diagnosis == {}, diagnosis
            continue
        assert diagnosis, f"{bug} got no diagnosis: {results['extra_data']}"
        for number, bugs in diagnosis.items():
            assert set(bugs) <= words.twins_of(bug), f"{bug} diagnosed as {bugs} on {number}"
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


def _table() -> Table:
    cases = {"t[a]": CaseDigests("test_update_rule_properties", "ref-a", {"x": "bad-a", "y": "bad-a"}),
             "t[b]": CaseDigests("test_update_rule_properties", "ref-b", {"y": "bad-b"})}
    return Table(cases, {"x": ["1.6"], "y": ["1.6"], "z": ["1.5"]})


def test_a_match_must_cover_every_case_of_the_row_and_be_unambiguous() -> None:
    table = _table()
    assert match.match_row(table, "1.6", {"t[a]": "bad-a", "t[b]": "ref-b"}) == ("x",)
    assert match.match_row(table, "1.6", {"t[a]": "bad-a", "t[b]": "bad-b"}) == ("y",)
    assert match.match_row(table, "1.6", {"t[a]": "bad-a", "t[b]": "other"}) == ()  # one case differs
    assert match.match_row(table, "1.6", {"t[a]": "bad-a"}) == ()  # a case of the row without answers
    assert match.match_row(table, "1.5", {"t[a]": "bad-a", "t[b]": "ref-b"}) == ()  # x does not fail 1.5
    assert match.match_row(table, "1.6", {"t[a]": "bad-a", "unknown": "?"}) == ()  # a case the table lacks
    ambiguous = Table({"t[a]": CaseDigests("test_update_rule_properties", "ref", {"x": "bad", "y": "bad"})},
                      {"x": ["1.6"], "y": ["1.6"]})
    assert match.match_row(ambiguous, "1.6", {"t[a]": "bad"}) == ()  # two bugs, not twins: say nothing


def test_twins_are_named_together(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(words, "TWINS", (frozenset({"x", "y"}),))
    ambiguous = Table({"t[a]": CaseDigests("test_update_rule_properties", "ref", {"x": "bad", "y": "bad"})},
                      {"x": ["1.6"], "y": ["1.6"]})
    assert match.match_row(ambiguous, "1.6", {"t[a]": "bad"}) == ("x", "y")
    assert ", or when " in words.sentence(["x", "y"])


def test_annotate_adds_one_line_to_failing_diagnosed_rows_only() -> None:
    plan = SimpleNamespace(cases=[SimpleNamespace(test="test_update_rule_properties", name=name, calls=[])
                                  for name in ("t[a]", "t[b]")])
    from autograder.diagnosis import table as table_module

    digest_of = {answer: table_module.digest([], [answer]) for answer in ("A", "B", "ref")}
    table = Table({"t[a]": CaseDigests("test_update_rule_properties", digest_of["ref"], {"x": digest_of["A"]}),
                   "t[b]": CaseDigests("test_update_rule_properties", digest_of["ref"], {})}, {"x": ["1.6"]})
    item = rubric.BY_TEST["test_update_rule_properties"]
    failing = SimpleNamespace(item=item, passed=False, message="saw 2.0, expected 4.0")
    report = SimpleNamespace(rows=[failing], plan=plan, answers={"t[a]": ["A"], "t[b]": ["ref"]})
    assert match.annotate(report, table) == {"diagnosis": {"1.6": ["x"]}}
    assert failing.message.endswith(words.sentence(["x"])) and failing.message.startswith("saw 2.0")
    match.annotate(report, table)
    assert failing.message.count("Likely mistake") == 1  # idempotent
    passing = SimpleNamespace(item=item, passed=True, message="")
    assert match.annotate(SimpleNamespace(rows=[passing], plan=plan, answers=report.answers), table) == {}
    assert match.annotate(SimpleNamespace(rows=[failing], plan=None, answers={}), table) == {}
