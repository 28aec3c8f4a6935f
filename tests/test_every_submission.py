"""Every submission has exactly one row, and nothing is a number that was not graded.

A Gradescope export with an empty upload (a folder with no file: a directory entry of the zip), a metadata entry
with no folder at all and one SID submitted twice, graded beside a plain class folder holding an empty folder and an
empty zip: the empty ones are "nothing submitted" with no score in every output; the earlier of the two submissions
of one SID is superseded (no score), the later graded; the duplicate is said in the console, summary.md and
report.html.  One run of the command line, as a TA would; the graded uploads are the skeleton (quick to grade).
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from autograder.batch import inputs

ROOT = Path(__file__).resolve().parents[1]
SKELETON = ROOT / "assignment"
FILES = ("loss_scaler.py", "amp_step.py", "answers.py")
METADATA = """\
submission_201:
  :submitters:
  - :name: Ada Lovelace
    :sid: '1815'
    :email: ada@example.edu
  :created_at: 2024-03-01 10:00:00.000000000 -08:00
submission_202:
  :submitters:
  - :name: Ada Lovelace
    :sid: '1815'
    :email: ada@example.edu
  :created_at: 2024-03-02 09:00:00.000000000 -08:00
submission_203:
  :submitters:
  - :name: Bo Empty
    :sid: '2001'
    :email: bo@example.edu
  :created_at: 2024-03-01 12:00:00.000000000 -08:00
submission_204:
  :submitters:
  - :name: Cy Absent
    :sid: '2002'
    :email: cy@example.edu
  :created_at: 2024-03-01 13:00:00.000000000 -08:00
"""
#: submission -> gradebook status, every submission of the run once
EXPECTED = {
    "alice": "graded",
    "blank": "nothing submitted",
    "empty": "nothing submitted",
    "submission_201": "superseded by submission_202 (SID 1815)",
    "submission_202": "graded",
    "submission_203": "nothing submitted",
    "submission_204": "nothing submitted",
}


def _export(path: Path) -> Path:
    with zipfile.ZipFile(path, "w") as bundle:
        bundle.writestr("export/submission_metadata.yml", METADATA)
        for name in FILES:
            bundle.write(SKELETON / name, f"export/submission_201/{name}")
            bundle.write(SKELETON / name, f"export/submission_202/{name}")
        bundle.writestr(zipfile.ZipInfo("export/submission_203/"), "")  # an empty upload: a directory entry alone
    return path


def _plain_class(root: Path) -> Path:
    (root / "alice").mkdir(parents=True)
    for name in FILES:
        shutil.copy(SKELETON / name, root / "alice" / name)
    (root / "empty").mkdir()
    with zipfile.ZipFile(root / "blank.zip", "w"):
        pass
    return root


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    root = tmp_path_factory.mktemp("every")
    export, plain, out = _export(root / "export.zip"), _plain_class(root / "class"), root / "out"
    done = subprocess.run([sys.executable, "-m", "autograder", "grade", str(export), str(plain), "--out", str(out),
                           "--jobs", "1", "--no-similarity"], cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stdout + done.stderr
    return out, done


def test_every_submission_has_exactly_one_row_and_nothing_ungraded_is_a_number(run) -> None:
    out, _ = run
    with open(out / "gradebook.csv", newline="", encoding="utf-8") as stream:
        rows = list(csv.DictReader(stream))
    assert [row["submission"] for row in rows] == sorted(EXPECTED)
    assert {row["submission"]: row["status"] for row in rows} == EXPECTED
    for row in rows:
        if row["status"] != "graded":
            cells = [value for key, value in row.items() if key[:1].isdigit()]
            assert row["score"] == "" and set(cells) == {""}, row
    assert {row["submission"]: row["name"] for row in rows if row["submission"].startswith("submission_")} == {
        "submission_201": "Ada Lovelace", "submission_202": "Ada Lovelace", "submission_203": "Bo Empty",
        "submission_204": "Cy Absent"}
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["submissions"], summary["graded"], summary["errored"]) == (7, 2, 0)
    assert summary["nothing_submitted"] == ["blank", "empty", "submission_203", "submission_204"]
    assert summary["superseded"] == [{"submission": "submission_201",
                                      "reason": "superseded by submission_202 (SID 1815)"}]
    assert sum(summary["histogram"]["counts"]) == 2  # the two graded skeletons, no zero for the others
    assert all(problem["submissions"] != ["empty"] for problem in summary["problems"])  # not a "missing file"


def test_an_empty_upload_is_told_so_and_shown_no_table(run) -> None:
    out, _ = run
    for name in ("empty", "blank", "submission_203", "submission_204"):
        feedback = (out / name / "feedback.md").read_text()
        assert "Nothing submitted: the upload holds no file to grade (no score, not a zero)." in feedback
        assert "| Test |" not in feedback and "Score:" not in feedback
        assert "score" not in json.loads((out / name / "results.json").read_text())
    assert "Superseded by submission_202 (SID 1815)" in (out / "submission_201" / "feedback.md").read_text()


def test_the_duplicate_and_the_empty_are_said_in_the_console_the_summary_and_the_report(run) -> None:
    out, done = run
    said = ("SID 1815 submitted more than once: submission_201 (2024-03-01 10:00:00-08:00), "
            "submission_202 (2024-03-02 09:00:00-08:00); graded submission_202 (the latest: --same-sid "
            "chooses), the others are listed as superseded.")
    assert f"note: {said}" in done.stderr
    assert ("7 submission(s): 0 already graded, 2 to grade with 1 worker(s). Not graded, listed apart: 4 with nothing "
            "submitted, 1 superseded by another submission of the same SID.") in done.stdout
    markdown = (out / "summary.md").read_text()
    assert "## Nothing submitted" in markdown and "- submission_204" in markdown
    assert ("- SID 1815: submission_201 (2024-03-01 10:00:00-08:00), submission_202 (2024-03-02 "
            "09:00:00-08:00); graded: submission_202.") in markdown
    page = (out / "report.html").read_text()
    students = page.split('id="student-table"', 1)[1].split("</table>", 1)[0]
    assert "submission_203" not in students and "empty/feedback.md" not in students
    withheld = page.split('id="withheld"', 1)[1].split("</section>", 1)[0]
    for name, status in EXPECTED.items():
        assert (f">{name}</a>" in withheld) == (status != "graded"), name
    assert "SID <b>1815</b> submitted more than once" in withheld


def test_the_ta_chooses_which_submission_of_a_sid_is_graded(tmp_path: Path) -> None:
    export = _export(tmp_path / "export.zip")
    chosen = {choice: {s.name: s.withheld for s in inputs.discover([export], tmp_path / choice, same_sid=choice)
                       .submissions if s.name in ("submission_201", "submission_202")}
              for choice in inputs.SAME_SID_CHOICES}
    assert chosen == {"latest": {"submission_201": "superseded by submission_202 (SID 1815)", "submission_202": ""},
                      "earliest": {"submission_201": "", "submission_202": "superseded by submission_201 (SID 1815)"},
                      "all": {"submission_201": "", "submission_202": ""}}
