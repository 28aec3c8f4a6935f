"""Regrade impact: grade, change the grader (a rubric row's points and one hidden check), regrade.

The changed grader is a temporary copy of the repository (nothing here is edited), so the
batch sees another grader fingerprint exactly as after a mid-term fix.
"""

from __future__ import annotations

import csv
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.batch import regrade
from autograder.engine import rubric
from autograder.batch.inputs import Submission, Submitter
from autograder.batch.ledger import Entry, Ledger
from autograder.engine.escape import markdown_inline

ROOT = Path(__file__).resolve().parents[1]
SUBMISSIONS = {"solutions": ROOT / "solutions", "assignment": ROOT / "assignment",
               "partially_correct": ROOT / "examples" / "partially_correct"}
#: the changes made to the grader copy: 2.4 is worth 4 instead of 3, 2.5 3 instead of 4
#: (the total stays 90), and the hidden check of Quick Check Q1 now expects "C" (the reference's answer too)
POINTS = {"2.4": (3, 4), "2.5": (4, 3)}
#: The parts of the checkout that grading reads (the engine, the public and hidden tests, the reference).
GRADER_PARTS = ("autograder", "assignment", "solutions", "pyproject.toml")


def _grade(grader: Path, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "autograder", "grade", *map(str, SUBMISSIONS.values()), "--out",
                           str(out), "--jobs", "2", "--no-similarity", *extra],
                          cwd=grader, env={**__import__("os").environ, "PYTHONPATH": str(grader)},
                          capture_output=True, text=True, timeout=900)


def _changed_grader(where: Path) -> Path:
    copy = where / "grader"
    # What grading reads, by name: a copy of the whole checkout would also take whatever else lies in it (a
    # debootstrap root's /dev/zero, left by the image test, filled the disk once).
    for name in GRADER_PARTS:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, copy / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, copy / name)
    source = copy / "autograder" / "engine" / "rubric.py"
    text = source.read_text()
    for number, (old, new) in POINTS.items():
        item = rubric.ITEMS[[i.number for i in rubric.ITEMS].index(number)]
        line = f'"{item.title}", {old}, '
        assert text.count(line) == 1, line
        text = text.replace(line, f'"{item.title}", {new}, ')
    source.write_text(text)
    hidden = copy / "autograder" / "hidden" / "test_hidden_quick_check.py"
    key = hidden.read_text()
    assert key.count('"Q1": "B"') == 1
    hidden.write_text(key.replace('"Q1": "B"', '"Q1": "C"'))
    # the reference follows its key (a grader whose reference loses points refuses to grade: the canary)
    answers = copy / "solutions" / "answers.py"
    text = answers.read_text()
    assert text.count('\nQ1 = "B"') == 1
    answers.write_text(text.replace('\nQ1 = "B"', '\nQ1 = "C"'))
    return copy


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as stream:
        return list(csv.DictReader(stream))


@pytest.mark.slow
def test_regrade_lists_exactly_the_rows_that_moved_and_keeps_the_old_gradebook(tmp_path: Path) -> None:
    out = tmp_path / "out"
    first = _grade(ROOT, out)
    assert first.returncode == 0, first.stderr[-3000:]
    assert not (out / "changes.csv").exists() and "Regrade impact" not in (out / "summary.md").read_text()
    before = (out / "gradebook.csv").read_bytes()
    old = {row["submission"]: row for row in _rows(out / "gradebook.csv")}
    # the GPU part graded and merged into OUT (as grade-gpu leaves it): the merge must follow the regrade
    (out / "gpu_gradebook.csv").write_text("submission,gpu_score,gpu_max\n" + "".join(
        f"{name},{k + 2.5},10\n" for k, name in enumerate(sorted(SUBMISSIONS))))
    from autograder.gpu import gradebook as gpu_gradebook

    assert gpu_gradebook.merge_gradebooks(out / "gradebook.csv", out / "gpu_gradebook.csv",
                                          out / "merged_gradebook.csv") == []

    second = _grade(_changed_grader(tmp_path), out)
    assert second.returncode == 0, second.stderr[-3000:]
    assert "3 graded by another version of the grader" in second.stdout
    assert (out / "gradebook.previous.csv").read_bytes() == before
    new = {row["submission"]: row for row in _rows(out / "gradebook.csv")}
    assert f"Updated {out / 'merged_gradebook.csv'}" in second.stdout
    merged = {row["submission"]: row for row in _rows(out / "merged_gradebook.csv")}
    for k, name in enumerate(sorted(SUBMISSIONS)):
        assert float(merged[name]["score"]) == float(new[name]["score"])
        assert float(merged[name]["total"]) == pytest.approx(float(new[name]["score"]) + k + 2.5)

    # what must have moved, worked out from the first gradebook: 2.4 and 2.5 rescaled, Q1 lost if it was "B"
    expected = set()
    for name, row in old.items():
        for number, (was, now) in POINTS.items():
            column = next(c for c in row if c.startswith(number + " "))
            if float(row[column]) and was != now:
                expected.add((name, number))
        column = next(c for c in row if c.startswith("3.1 "))
        if float(row[column]):
            expected.add((name, "3.1"))
    assert expected, "the subset must exercise the change"
    changes = _rows(out / "changes.csv")
    assert {(c["submission"], c["test"]) for c in changes} == expected
    for change in changes:
        column = next(c for c in new[change["submission"]] if c.startswith(change["test"] + " "))
        assert float(change["new_points"]) == float(new[change["submission"]][column])
        assert float(change["old_points"]) == float(old[change["submission"]][column])
        assert float(change["old_score"]) == float(old[change["submission"]]["score"])
        assert float(change["new_score"]) == float(new[change["submission"]]["score"])
    deltas = [abs(float(c["change"])) for c in changes]
    assert deltas == sorted(deltas, reverse=True)

    summary = (out / "summary.md").read_text()
    moved = {name for name, _ in expected}
    lowered = sum(float(new[n]["score"]) < float(old[n]["score"]) for n in old)
    raised = sum(float(new[n]["score"]) > float(old[n]["score"]) for n in old)
    assert "## Regrade impact" in summary
    assert f"Raised: **{raised}**, lowered: **{lowered}**, unchanged: **{3 - raised - lowered}**" in summary
    assert all(markdown_inline(name) in summary for name in moved)
    with Ledger(out / "ledger.sqlite") as ledger:  # the previous verdicts are kept
        for name in SUBMISSIONS:
            kept = list(ledger.replaced(name))
            assert kept and kept[0].score == float(old[name]["score"]) and kept[0].grader != ledger.get(name).grader

    third = _grade(_changed_grader(tmp_path / "again"), out)  # same changed grader: nothing to regrade
    assert third.returncode == 0 and "3 already graded" in third.stdout
    assert (out / "gradebook.previous.csv").read_bytes() == before  # still the gradebook from before the change


def _entry(name: str, grader: str, rows: dict[str, float], status: str = "graded") -> Entry:
    tests = [{"number": n, "score": s} for n, s in rows.items()]
    return Entry(name, "digest", grader, status, sum(rows.values()), rubric.max_points(), {"tests": tests})


def test_impact_from_the_ledger_and_csv_escaping(tmp_path: Path) -> None:
    with Ledger(tmp_path / "ledger.sqlite") as ledger:
        ledger.record(_entry("a", "old", {"1.1": 3, "1.2": 3}))
        ledger.record(_entry("b", "old", {"1.1": 3, "1.2": 0}))
        ledger.record(_entry("c", "old", {"1.1": 3}))
        ledger.record(_entry("a", "new", {"1.1": 3, "1.2": 0}))
        ledger.record(_entry("b", "new", {"1.1": 3, "1.2": 3}))
        ledger.record(_entry("c", "new", {"1.1": 3}))
        people = (Submitter(name="=SUM(A1) *x*"),)
        rows = [(Submission(n, tmp_path, n, people if n == "a" else ()), ledger.get(n)) for n in "abc"]
        changes = regrade.impact(ledger, rows)
    assert [(c.submission.name, c.delta) for c in changes] == [("a", -3), ("b", 3), ("c", 0)]
    assert regrade.counts(changes) == {"raised": 1, "lowered": 1, "unchanged": 1}
    table = list(csv.DictReader(regrade.changes_csv(changes).splitlines()))
    assert [(r["submission"], r["test"], r["old_points"], r["new_points"]) for r in table] == [
        ("a", "1.2", "3.0", "0.0"), ("b", "1.2", "0.0", "3.0")]
    assert table[0]["name"] == "'=SUM(A1) *x*"
    assert r"\*x\*" in regrade.markdown_section(changes)


def test_previous_gradebook_is_copied_once_per_grader(tmp_path: Path) -> None:
    (tmp_path / "gradebook.csv").write_text("v1\n")
    regrade.keep_previous_gradebook(tmp_path, False, "g2")
    assert not (tmp_path / "gradebook.previous.csv").exists()
    regrade.keep_previous_gradebook(tmp_path, True, "g2")
    (tmp_path / "gradebook.csv").write_text("half-regraded\n")  # as if a resumed run found this
    regrade.keep_previous_gradebook(tmp_path, True, "g2")
    assert (tmp_path / "gradebook.previous.csv").read_text() == "v1\n"
    regrade.keep_previous_gradebook(tmp_path, True, "g3")  # another change later
    assert (tmp_path / "gradebook.previous.csv").read_text() == "half-regraded\n"


def test_merged_gradebook_follows_a_new_cpu_gradebook_or_is_called_stale(tmp_path: Path) -> None:
    from autograder.gpu.gradebook import merge_gradebooks, refresh_merged

    cpu, gpu, merged = tmp_path / "gradebook.csv", tmp_path / "gpu_gradebook.csv", tmp_path / "merged_gradebook.csv"
    assert refresh_merged(tmp_path) == []  # nothing merged: nothing to say
    cpu.write_text("submission,score,max_score\nbob,80,90\ncarol,70,90\n")
    gpu.write_text("submission,gpu_score,gpu_max\nbob,7.5,10\n")
    merge_gradebooks(cpu, gpu, merged)
    assert refresh_merged(tmp_path) == []  # already up to date
    cpu.write_text("submission,score,max_score\nbob,90,90\ncarol,70,90\n")  # a regrade raised bob
    said = refresh_merged(tmp_path)
    assert said[0].startswith(f"Updated {merged} from the new gradebook.csv and gpu_gradebook.csv")
    assert said[1:] == ["warning: carol: no GPU grade (total is the CPU score only)"]
    totals = {row["submission"]: float(row["total"]) for row in _rows(merged)}
    assert totals == {"bob": 97.5, "carol": 70.0}
    gpu.unlink()
    cpu.write_text("submission,score,max_score\nbob,60,90\n")
    (warning,) = refresh_merged(tmp_path)
    assert warning.startswith(f"warning: {merged} is stale") and "merge" in warning


def test_a_resubmission_is_a_change_and_a_retried_grading_is_not(tmp_path: Path) -> None:
    def entry(name: str, digest: str, rows: dict[str, float]) -> Entry:
        tests = [{"number": n, "score": s} for n, s in rows.items()]
        return Entry(name, digest, "g1", "graded", sum(rows.values()), rubric.max_points(), {"tests": tests})

    with Ledger(tmp_path / "ledger.sqlite") as ledger:
        ledger.record(entry("sam", "files-v1", {"1.1": 0, "1.2": 3}))
        ledger.record(entry("sam", "files-v2", {"1.1": 3, "1.2": 3}))  # resubmitted
        ledger.record(entry("sam", "files-v2", {"1.1": 3, "1.2": 3}))  # the same files graded again (a retry)
        ledger.record(entry("eve", "same", {"1.1": 3}))
        ledger.record(entry("eve", "same", {"1.1": 3}))  # retried only: no change
        rows = [(Submission(n, tmp_path, n), ledger.get(n)) for n in ("sam", "eve")]
        changes = regrade.impact(ledger, rows)
    assert [(c.submission.name, c.old.digest, c.delta, c.cause) for c in changes] == [
        ("sam", "files-v1", 3, "resubmitted")]
    table = list(csv.DictReader(regrade.changes_csv(changes).splitlines()))
    assert [(r["submission"], r["test"], r["old_points"], r["new_points"], r["cause"]) for r in table] == [
        ("sam", "1.1", "0.0", "3.0", "resubmitted")]
    section = regrade.markdown_section(changes)
    assert "0 by another version of the grader (tests, rubric or limits), 1 with other files (resubmitted)" in section
    assert "| sam | 3 → 6 | +3 | 1.1 0→3 | resubmitted |" in section


def _verdict(name: str, grader: str, rows: dict[str, tuple[float, float]], top: float) -> Entry:
    """A graded verdict whose rows say their points and maximum (as results.json's do)."""
    tests = [{"number": n, "score": s, "max_score": m} for n, (s, m) in rows.items()]
    return Entry(name, "digest", grader, "graded", sum(s for s, _ in rows.values()), top, {"tests": tests})


def test_a_row_added_and_a_moved_maximum_are_named_as_the_cause(tmp_path: Path) -> None:
    """Row 1.19 added with 2 points taken from 1.6, and (another rubric) a maximum moved from 90 to 92: the new row
    is named in changes.csv, summary.md and report.html, even where the student scores 0 on it, 1.6's change is
    called a change of its points, and the moved maximum comes first."""
    from autograder.diagnosis import report_similarity

    with Ledger(tmp_path / "ledger.sqlite") as ledger:
        ledger.record(_verdict("a", "old", {"1.5": (4, 4), "1.6": (5, 5)}, 90))
        ledger.record(_verdict("a", "new", {"1.5": (4, 4), "1.6": (3, 3), "1.19": (0, 2)}, 90))
        ledger.record(_verdict("b", "old", {"1.5": (4, 4)}, 90))
        ledger.record(_verdict("b", "new", {"1.5": (6, 6)}, 92))
        changes = regrade.impact(ledger, [(Submission(n, tmp_path, n), ledger.get(n)) for n in "ab"])
    table = list(csv.DictReader(regrade.changes_csv(changes).splitlines()))
    assert [(r["submission"], r["test"], r["old_points"], r["new_points"], r["cause"], r["old_max"], r["new_max"])
            for r in table] == [("a", "1.6", "5.0", "3.0", "row's points 5→3", "90.0", "90.0"),
                                ("a", "1.19", "0.0", "0.0", "row added", "90.0", "90.0"),
                                ("b", "1.5", "4.0", "6.0", "row's points 4→6", "90.0", "92.0")]
    section = regrade.markdown_section(changes)
    assert section.split("\n")[3].startswith("**The maximum moved: 90 → 92** (the rubric changed)")
    assert "1.6 5→3 (row's points 5→3), 1.19 0→0 (row added)" in section
    page = report_similarity.changes_section(table)
    assert page.index('id="max-moved"') < page.index("<table")
    assert "The maximum moved: 90 → 92 (the rubric changed): every new score is out of 92." in page
    assert "<th>old points</th><th>new points</th><th>cause</th>" in page
    assert "<td>1.19</td><td>0.0</td><td>0.0</td><td>row added</td>" in page


def test_a_points_only_regrade_keeps_an_unchanged_upload_that_could_not_be_graded(tmp_path: Path) -> None:
    """Nothing that decides whether a damaged upload can be graded changed: it is not retried (no code runs), its
    verdict stands under the new grader, and it is counted among the rescored, not as "graded by another version"."""
    from autograder.batch import run

    broken = Entry("z", "d", "SCORING.OLD", "errored", 0.0, rubric.max_points(), {"tests": [], "output": "bad zip"},
                   "not a readable zip")
    with Ledger(tmp_path / "ledger.sqlite") as ledger:
        ledger.record(broken)
        left, count = run._rescore([(Submission("z", tmp_path / "z.zip", "z.zip"), "d")], {"z": ("d", "SCORING.OLD")},
                                   "SCORING.NEW", ledger, tmp_path, set())
        kept = ledger.get("z")
    assert (left, count) == ([], 1)
    assert (kept.status, kept.grader, kept.reason) == ("errored", "SCORING.NEW", "not a readable zip")
