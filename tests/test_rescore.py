"""A change of the rubric's points alone rescores stored verdicts without running student code; resubmissions'
score moves are listed in changes.csv.

The points-only regrade runs the batch in this process with the rubric's points patched and the worker pools
replaced by one that fails the test if asked to start: the pools are the only way a batch starts a worker, and
only workers start student processes (tests/test_one_door.py).
"""

from __future__ import annotations

import csv
import dataclasses
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from autograder.batch import rescore, run
from autograder.batch.ledger import Entry, Ledger
from autograder.engine import fingerprint, rubric
from conftest import ROOT

CONTRACT = ("loss_scaler.py", "amp_step.py", "answers.py")
#: the patched points: 2.4 worth 4 instead of 3, 2.5 worth 3 instead of 4 (the total stays 90)
PATCHED = {"2.4": 4.0, "2.5": 3.0}


def _entry(rows: dict[str, tuple[int, int]], status: str = "graded") -> Entry:
    items = {item.number: item for item in rubric.ITEMS}
    tests = [{"name": n, "number": n, "score": round(items[n].points * p / t, 4), "max_score": items[n].points,
              "status": "passed" if p == t else "failed"} for n, (p, t) in rows.items()]
    tests.append({"name": "GPU part (10 points)", "number": "4", "score": 0.0, "max_score": 0.0})
    results = {"score": round(sum(t["score"] for t in tests), 4), "tests": tests,
               "extra_data": {rubric.CASES: {n: [p, t] for n, (p, t) in rows.items()}}}
    return Entry("sam", "d1", "scoring.points1", status, results["score"], 90.0, results)


def _patched_items() -> tuple[rubric.Item, ...]:
    return tuple(dataclasses.replace(item, points=PATCHED.get(item.number, item.points)) for item in rubric.ITEMS)


def test_rescored_rows_are_the_new_points_times_the_passed_share(monkeypatch: pytest.MonkeyPatch) -> None:
    rows = {item.number: (1, 1) for item in rubric.ITEMS}
    rows["2.4"] = (1, 3)  # one of three cases: 1.0 of 3 points, then 4/3 of 4
    rows["2.5"] = (0, 2)
    rows["1.1"] = (21, 22)  # 3 * 21/22 = 2.8636
    entry = _entry(rows)
    assert entry.score == pytest.approx(90 - 2 - 4 - 0.1364, abs=1e-9)
    monkeypatch.setattr(rubric, "ITEMS", _patched_items())
    new = rescore.rescored(entry, "scoring.points2")
    assert new is not None and new.grader == "scoring.points2"
    scores = {t["number"]: (t["score"], t["max_score"]) for t in new.results["tests"]}
    assert scores["2.4"] == (1.3333, 4.0) and scores["2.5"] == (0.0, 3.0) and scores["1.1"] == (2.8636, 3.0)
    assert new.score == new.results["score"] == pytest.approx(90 - 2.6667 - 3 - 0.1364, abs=1e-9)
    assert scores["4"] == (0.0, 0.0)


def test_what_cannot_be_rescored_exactly_is_graded_again() -> None:
    rows = {item.number: (1, 1) for item in rubric.ITEMS}
    assert rescore.rescored(_entry(rows, status="errored"), "s.p2") is None  # never scored: grade it
    old = _entry(rows)
    del old.results["extra_data"][rubric.CASES]  # a verdict stored before the cases were kept
    assert rescore.rescored(old, "s.p2") is None
    del rows["3.5"]
    assert rescore.rescored(_entry(rows), "s.p2") is None  # a row the verdict lacks


def test_only_a_points_difference_is_points_only() -> None:
    assert rescore.points_only("abc.p1", "abc.p2")
    assert not rescore.points_only("abc.p1", "abd.p2")  # the tests or engine changed too
    assert not rescore.points_only("abc.p1", "abc.p1")
    assert not rescore.points_only("abc", "abc.p2")  # a fingerprint from before the split: grade again


def test_the_scoring_fingerprint_ignores_points_and_layout_but_not_titles(tmp_path: Path) -> None:
    source = (ROOT / "autograder" / "engine" / "rubric.py").read_text()
    line = '"Gradients zeroed every step", 3, '
    assert source.count(line) == 1
    variants = {"same": source, "points": source.replace(line, '"Gradients zeroed every step", 4, '),
                "comment": source.replace(line, line + "  # a comment\n    "),
                "title": source.replace(line, '"Gradients zeroed each step", 3, ')}
    dumps = {}
    for name, text in variants.items():
        path = tmp_path / name / "rubric.py"
        path.parent.mkdir()
        path.write_text(text)
        dumps[name] = fingerprint._without_points(path)
    assert dumps["same"] == dumps["points"] == dumps["comment"] and dumps["title"] != dumps["same"]
    assert fingerprint.points_digest() != _points_digest_with(_patched_items())


def _points_digest_with(items: tuple[rubric.Item, ...]) -> str:
    saved = rubric.ITEMS
    rubric.ITEMS = items
    try:
        return fingerprint.points_digest()
    finally:
        rubric.ITEMS = saved


def _grade(out: Path, *paths: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "autograder", "grade", *map(str, paths), "--out", str(out),
                           "--jobs", "1", "--no-similarity"], cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=900)


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as stream:
        return list(csv.DictReader(stream))


class NoWorkers:
    """Stands for the worker pools: asked to start, it fails the test (a student process would start)."""

    def __init__(self, *_args: Any, **_kwargs: Any) -> None:
        raise AssertionError("a worker pool was started: student code would run")


@pytest.mark.slow
def test_points_only_change_rescores_without_a_student_process_and_resubmissions_are_listed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    alice, sam = tmp_path / "class" / "alice", tmp_path / "class" / "sam"
    for folder, source in ((alice, ROOT / "solutions"), (sam, ROOT / "examples" / "partially_correct")):
        folder.mkdir(parents=True)
        for name in CONTRACT:
            shutil.copy(source / name, folder / name)
    out = tmp_path / "out"
    first = _grade(out, tmp_path / "class")
    assert first.returncode == 0, first.stderr[-3000:]
    before = {row["submission"]: row for row in _rows(out / "gradebook.csv")}
    assert float(before["alice"]["score"]) == 90

    # the points change: in this process, with no way to start a worker
    monkeypatch.setattr(rubric, "ITEMS", _patched_items())
    monkeypatch.setattr(run, "LocalPool", NoWorkers)
    monkeypatch.setattr(run, "SlurmPool", NoWorkers)
    status = run.run([tmp_path / "class"], run.Options(out=out, jobs=1, similarity=False, progress=False))
    said = capsys.readouterr().out
    assert status == 0 and "2 rescored (only the rubric points changed: no code run), 0 to grade" in said, said
    after = {row["submission"]: row for row in _rows(out / "gradebook.csv")}
    for name, row in before.items():
        expected = float(row["score"])
        for number, points in PATCHED.items():
            column = next(c for c in row if c.startswith(number + " "))
            was = float(row[column])
            now = float(after[name][column])
            assert now == pytest.approx(was * points / {"2.4": 3, "2.5": 4}[number], abs=1e-4), (name, number)
            expected += now - was
        assert float(after[name]["score"]) == pytest.approx(expected, abs=1e-4)
    # the cause a TA reads is the row's new worth (the rubric row, its points from before and now), not "grader changed"
    old_points = {"2.4": 3, "2.5": 4}
    expected_moves = {(name, number, f"row's points {old_points[number]}\u2192{points:g}")
                      for name, row in before.items() for number, points in PATCHED.items()
                      if float(next(v for c, v in row.items() if c.startswith(number + " ")))}
    assert ("alice", "2.4", "row's points 3\u21924") in expected_moves  # alice had every point: +1 on 2.4, -1 on 2.5
    changes = _rows(out / "changes.csv")
    assert {(c["submission"], c["test"], c["cause"]) for c in changes} == expected_moves
    kept = {row["submission"]: row["score"] for row in _rows(out / "gradebook.previous.csv")}
    assert kept == {name: row["score"] for name, row in before.items()}  # the gradebook from before is kept
    monkeypatch.undo()

    # sam resubmits the solution; the original points are back (alice is rescored back, no code run for her)
    for name in CONTRACT:
        shutil.copy(ROOT / "solutions" / name, sam / name)
    third = _grade(out, tmp_path / "class")
    assert third.returncode == 0, third.stderr[-3000:]
    assert "1 rescored (only the rubric points changed: no code run), 1 to grade" in third.stdout, third.stdout
    changes = _rows(out / "changes.csv")
    moved = {(c["submission"], c["cause"]) for c in changes}
    assert ("sam", "resubmitted") in moved  # the points back: alice's rows move by their worth, 4→3 and 3→4
    assert {("alice", "row's points 4\u21923"), ("alice", "row's points 3\u21924")} <= moved
    sam_rows = [c for c in changes if c["submission"] == "sam"]
    assert {float(c["old_score"]) for c in sam_rows} == {float(after["sam"]["score"])}
    assert {float(c["new_score"]) for c in sam_rows} == {90.0}
    assert "resubmitted" in (out / "summary.md").read_text()
