"""A submission that could not be graded has no score, not a zero.

A TA uploads gradebook.csv: a damaged upload must leave empty cells (and say why in the status column), not a 0
the student never earned, and it must stay out of every statistic a TA reads (the mean, the histogram, the rows'
pass counts in summary.json, summary.md, items.csv and report.html).  One small batch through the CLI: the
reference solution (90), the untouched skeleton (0) and a corrupt zip.
"""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

from autograder.engine import rubric
from conftest import ROOT, grade

TOP = rubric.max_points()
CONTRACT = ("loss_scaler.py", "amp_step.py", "answers.py")


def _csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


@pytest.fixture(scope="module")
def batch(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    base = tmp_path_factory.mktemp("ungraded")
    inputs = base / "in"
    for name, source in (("solved", ROOT / "solutions"), ("skeleton", ROOT / "assignment")):
        (inputs / name).mkdir(parents=True)
        for file in CONTRACT:
            shutil.copy(source / file, inputs / name / file)
    (inputs / "damaged.zip").write_bytes(b"PK\x03\x04 this upload was cut short")
    done = grade([inputs], base / "out", "--jobs", "1")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return base / "out", done.stdout


def test_the_gradebook_leaves_the_cells_empty_and_says_why(batch: tuple[Path, str]) -> None:
    out, stdout = batch
    rows = {row["submission"]: row for row in _csv(out / "gradebook.csv")}
    assert sorted(rows) == ["damaged", "skeleton", "solved"]
    items = [f"{item.number} {item.test}" for item in rubric.ITEMS]
    damaged = rows["damaged"]
    assert damaged["score"] == "" and all(damaged[column] == "" for column in items), damaged
    assert damaged["status"].startswith("could not be graded: ") and "damaged.zip" in damaged["status"]
    assert float(damaged["max_score"]) == TOP
    assert (rows["solved"]["status"], float(rows["solved"]["score"])) == ("graded", TOP)
    assert (rows["skeleton"]["status"], float(rows["skeleton"]["score"])) == ("graded", 0.0)  # a graded zero stays
    feedback = (out / "damaged" / "feedback.md").read_text()
    assert "could not be graded" in feedback and f"/ {TOP:g}" not in feedback  # the student reads no 0 / 90 either
    line = next(line for line in stdout.splitlines() if "damaged" in line and "│" in line)
    assert f"/ {TOP:g}" not in line and "not graded" in line  # nor the TA's console


def test_every_statistic_leaves_it_out(batch: tuple[Path, str]) -> None:
    out, _ = batch
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["submissions"], summary["graded"], summary["errored"]) == (3, 2, 1)
    assert summary["score"] == {"mean": TOP / 2, "median": TOP / 2, "min": 0.0, "max": TOP}
    assert sum(summary["histogram"]["counts"]) == 2
    assert summary["histogram"]["counts"][0] == 1 and summary["histogram"]["counts"][-1] == 1
    for test in summary["tests"]:
        assert test["passed"] + test["failed"] == 2, test
    for row in _csv(out / "items.csv"):
        if float(row["max_score"]):
            assert (int(row["passed"]), int(row["failed"]), float(row["pass_rate"])) == (1, 1, 0.5), row
    text = (out / "summary.md").read_text()
    apart = text.split("## Could not be graded", 1)[1].split("\n## ", 1)[0]
    assert "- damaged: " in apart and "No score, not a zero" in apart
    assert f"mean {TOP / 2:g}, median {TOP / 2:g}, min 0, max {TOP:g}" in text


def test_report_html_lists_it_apart(batch: tuple[Path, str]) -> None:
    out, _ = batch
    page = (out / "report.html").read_text()
    students = page.split('<table id="student-table">', 1)[1].split("</table>", 1)[0]
    assert "solved" in students and "skeleton" in students and "damaged" not in students
    apart = page.split('<section id="not-graded">', 1)[1].split("</section>", 1)[0]
    assert '<a href="damaged/feedback.md">damaged</a>' in apart and "damaged.zip" in apart
    assert f"mean {TOP / 2:g}, median {TOP / 2:g}" in page


def test_the_merged_gradebook_gives_it_no_total(batch: tuple[Path, str], tmp_path: Path) -> None:
    """The CPU + GPU merge: a GPU score does not make a total of a CPU part that has none."""
    from autograder.gpu import gradebook

    out, _ = batch
    gpu = tmp_path / "gpu.csv"
    with gpu.open("w", newline="") as handle:
        csv.writer(handle).writerows([["submission", "gpu_score", "gpu_max", "gpu_status"],
                                      *([name, 5, 10, "graded"] for name in ("damaged", "skeleton", "solved"))])
    warnings = gradebook.merge_gradebooks(out / "gradebook.csv", gpu, tmp_path / "merged.csv")
    merged = {row["submission"]: row for row in _csv(tmp_path / "merged.csv")}
    assert merged["damaged"]["total"] == "" and merged["damaged"]["status"].startswith("could not be graded")
    assert float(merged["solved"]["total"]) == TOP + 5 and float(merged["skeleton"]["total"]) == 5
    assert any(line.startswith("damaged: CPU part could not be graded") for line in warnings), warnings


def test_a_resubmission_after_a_damaged_upload_moves_from_no_score_not_from_zero(tmp_path: Path) -> None:
    """changes.csv and summary.md's regrade section: the damaged upload had no score, so the move has none either."""
    from autograder.batch import inputs, regrade
    from autograder.batch.ledger import Entry

    before = Entry("dana", "old-files", "g", "errored", 0.0, TOP, {"score": 0.0, "tests": []}, reason="bad zip")
    after = Entry("dana", "new-files", "g", "graded", 77.0, TOP, {"score": 77.0, "tests": []})
    change = regrade.Change(inputs.Submission("dana", tmp_path, "dana"), before, after)
    (row,) = list(csv.DictReader(regrade.changes_csv([change]).splitlines()))
    assert (row["old_score"], row["new_score"], row["change"]) == ("", "77.0", "")
    assert row["title"] == "status errored -> graded" and row["cause"] == "resubmitted"
    assert "| dana | not graded → 77 | - |" in regrade.markdown_section([change])
