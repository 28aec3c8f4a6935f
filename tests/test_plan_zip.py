"""The call plan travels in the Gradescope zip and is used there; every results.json counts its scenarios.

docs/speed.md ("The call plan"): the Gradescope zip carries ``autograder/hidden/plan.json``, recorded
from solutions/ at build time, beside the hidden tests; a Gradescope run grades with it (the staff
output says how many tests it passed by matching the reference's answers); and
``extra_data.scenarios_run`` tells staff how many scenarios graded a submission.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from autograder import settings
from autograder.engine import plan, rubric
from autograder.packaging.gradescope import build
from conftest import ROOT

PLAN_NAME = "autograder/hidden/plan.json"
PLAN_LINE = re.compile(r"call plan \(shipped\): (\d+) of (\d+) tests passed by matching the reference's answers")


@pytest.fixture(scope="module")
def autograder_zip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.mktemp("dist") / "autograder.zip")


def gradescope_run(autograder_zip: Path, root: Path, submission: Path) -> tuple[dict[str, Any], str]:
    """Lay out /autograder under ``root`` as Gradescope does, run run_autograder; (results.json, staff output)."""
    with zipfile.ZipFile(autograder_zip) as bundle:
        bundle.extractall(root / "source")
    shutil.copytree(submission, root / "submission", ignore=shutil.ignore_patterns("__pycache__"))
    (root / "results").mkdir()
    (root / "venv").symlink_to(sys.prefix)  # what setup.sh makes: run_autograder runs the grader from it
    script = root / "source" / "run_autograder"
    script.chmod(0o755)
    env = {**os.environ, "AUTOGRADER_ROOT": str(root), "PYTHONPATH": "",
           "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    env.pop("AMP_PLAN", None)
    done = subprocess.run([str(script)], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads((root / "results" / "results.json").read_text()), done.stdout


def test_the_zip_carries_a_plan_for_the_hidden_tests(autograder_zip: Path) -> None:
    with zipfile.ZipFile(autograder_zip) as bundle:
        assert PLAN_NAME in bundle.namelist()
        shipped = plan.Plan.from_json(bundle.read(PLAN_NAME).decode())
    graded_tests = {item.test for item in rubric.ITEMS}
    planned = {case.test for case in shipped.cases}
    assert planned and planned <= graded_tests
    assert sum(len(case.calls) for case in shipped.cases) > 100  # the recorded calls, not an empty shell
    assert any(case.answers_only and case.calls for case in shipped.cases)  # cases the plan can pass


def test_a_gradescope_run_grades_with_the_shipped_plan(autograder_zip: Path, tmp_path: Path) -> None:
    results, staff = gradescope_run(autograder_zip, tmp_path, ROOT / "solutions")
    assert results["score"] == rubric.max_points()
    found = PLAN_LINE.search(staff)
    assert found, f"the staff output does not say the plan was used:\n{staff[-2000:]}"
    assert 0 < int(found.group(1)) <= int(found.group(2)) == len({item.test for item in rubric.ITEMS})
    scenarios = results["extra_data"]["scenarios_run"]
    assert type(scenarios) is int and scenarios > 100, results["extra_data"]


def test_the_diagnosis_table_ships_beside_the_plan(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The catalogue's answers (the diagnosis table) are built at packaging time and shipped as hidden data; a failed or
    switched-off build ships none (the zip still grades, without "Likely mistake" lines)."""
    from autograder.diagnosis import table
    from autograder.packaging import gradescope

    monkeypatch.setattr(gradescope, "recorded_plan", lambda: None)  # not what this test is about (and slow)
    monkeypatch.setattr(table, "recorded_table", lambda public=False: '{"table": "stand-in"}')
    with zipfile.ZipFile(build(tmp_path / "with.zip")) as bundle:
        assert bundle.read(str(table.SHIPPED.relative_to(ROOT))) == b'{"table": "stand-in"}'
    monkeypatch.setattr(table, "recorded_table", lambda public=False: None)
    with zipfile.ZipFile(build(tmp_path / "without.zip")) as bundle:
        assert str(table.SHIPPED.relative_to(ROOT)) not in bundle.namelist()
    monkeypatch.setenv(settings.DIAGNOSIS.env, "")  # a checkout's default: the committed table, current, is shipped as it is
    with zipfile.ZipFile(build(tmp_path / "committed.zip")) as bundle:
        assert bundle.read(str(table.SHIPPED.relative_to(ROOT))) == table.SHIPPED.read_bytes()
