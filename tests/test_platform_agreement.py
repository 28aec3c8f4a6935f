"""One submission, every platform: the same CPU points row by row, and the classroom total of the public rows.

A catalogued single-bug submission (it loses public row 1.5 and hidden rows besides) is graded by the TA batch
(``python -m autograder grade``), by Gradescope's runtime (the zip's ``run_autograder`` under a simulated
``/autograder``), by PrairieLearn's (the question's entrypoint under a simulated ``/grade``; its score × 90) and
by the GitHub Classroom workflow run on a push of its files (the public rows only).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from autograder.engine import rubric
from autograder.packaging import classroom, gradescope, prairielearn
from classroom_runner import run_workflow
from conftest import grade, load_results
from test_catalogue import catalogue
from test_classroom import push
from test_gradescope import simulate
from test_prairielearn import lay_out, run_entrypoint

pytestmark = pytest.mark.slow
BUG = "tracker_not_reset_on_backoff"


def test_the_same_submission_gets_the_same_points_on_every_platform(tmp_path: Path) -> None:
    entry = next(e for e in catalogue.BUGS if e.name == BUG)
    submission = catalogue.materialize(entry, tmp_path / BUG)

    done = grade([submission], tmp_path / "batch")
    assert done.returncode == 0, done.stderr[-3000:]
    batch = {t["number"]: t["score"] for t in load_results(tmp_path / "batch", BUG)["tests"] if t["max_score"] > 0}
    maxima = {item.number: item.points for item in rubric.ITEMS}
    assert set(batch) == set(maxima) and entry.must_fail <= {n for n, points in batch.items() if points < maxima[n]}

    on_gradescope = simulate(gradescope.build(tmp_path / "dist" / "autograder.zip"), tmp_path / "autograder", submission)
    assert {t["number"]: t["score"] for t in on_gradescope["tests"] if t["max_score"] > 0} == batch
    assert on_gradescope["score"] == sum(batch.values())

    question = prairielearn.build(tmp_path / "dist" / "prairielearn") / "questions" / prairielearn.QUESTION
    on_prairielearn = run_entrypoint(lay_out(question, tmp_path / "grade", submission))
    assert {t["name"].split()[0]: t["points"] for t in on_prairielearn["tests"] if t["max_points"] > 0} == batch
    assert on_prairielearn["score"] * 90 == pytest.approx(sum(batch.values()), abs=1e-3)

    template = classroom.build(tmp_path / "dist" / "classroom")
    repository = push(template, submission, tmp_path / "repo")
    run = run_workflow(repository / ".github/workflows/classroom.yml", repository, tmp_path / "runner")
    public = [item.number for item in rubric.ITEMS if item.suite == rubric.PUBLIC]
    assert 0 < run.points < run.max_points == 26
    assert run.points == sum(batch[number] for number in public)
