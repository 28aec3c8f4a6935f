"""make classroom: the template repository, its workflow run step by step, and the TA batch over cloned repositories.

The workflow's steps are read from ``.github/workflows/classroom.yml`` and executed in order on a checkout of the
template with a student's files pushed (``classroom_runner.py`` says what each kind of step does here).
"""

from __future__ import annotations

import base64
import csv
import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from autograder.batch import inputs, metadata, roster
from autograder.packaging import classroom
from classroom_runner import run_workflow
from conftest import ROOT, grade, load_results
from test_isolation import outside_code_fences

CONTRACT = ("loss_scaler.py", "amp_step.py", "answers.py")
#: The public rows students see on every push (rubric.py: 5 of Task 1, 3 of Task 2), with their points.
PUBLIC_ROWS = {"1.1": 3, "1.2": 3, "1.3": 3, "1.4": 3, "1.5": 4, "2.1": 4, "2.2": 3, "2.3": 3}
#: The public rows whose test is parametrized (22 bad constructor arguments; two autocast dtypes): each case its share.
SHARED_ROWS = {"1.1", "2.1"}
ROSTER = '''"identifier","github_username","github_id","name"
"ada@uni.example","AdaL","101","Ada Lovelace"
"s-2","grace-h","102",""
"s-3","","",""
"s-4","linus","104","Linus T"
'''


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return classroom.build(tmp_path_factory.mktemp("dist") / "classroom")


def push(template: Path, files: Path | None, into: Path) -> Path:
    """The student's repository after a push: the template with ``files``' three files committed over it."""
    shutil.copytree(template, into)
    for name in CONTRACT if files is not None else ():
        shutil.copy(files / name, into / name)
    return into


def test_template_holds_what_students_get_and_nothing_hidden(template: Path) -> None:
    names = {p.relative_to(template).as_posix() for p in template.rglob("*") if p.is_file()}
    assert {"README.md", *CONTRACT, "pytest.ini", "checks/test_public_scaler.py", "requirements.txt",
            ".github/workflows/classroom.yml", ".github/classroom/row.py"} <= names
    assert not any(name.startswith(("autograder/", "solutions/", "tests/")) or "hidden" in name for name in names)
    assert (template / "loss_scaler.py").read_text() == (ROOT / "assignment" / "loss_scaler.py").read_text()
    requirements = (template / "requirements.txt").read_text().splitlines()
    assert requirements[0] == "torch==2.13.0" and [r.split("==")[0] for r in requirements] == ["torch", "pytest", "hypothesis"]


def test_workflow_has_one_graded_step_per_public_row_and_runs_the_checks_once(template: Path) -> None:
    spec = yaml.safe_load((template / ".github/workflows/classroom.yml").read_text())
    assert set(spec["on"]) == {"push", "repository_dispatch"}
    steps = spec["jobs"]["run-autograding-tests"]["steps"]
    rows = [s for s in steps if s.get("id", "").startswith("row-")]
    graders = [s for s in rows if s.get("uses", "").startswith("classroom-resources/autograding-command-grader@")]
    shared = [s for s in rows if s not in graders]
    assert {s["with"]["test-name"].split()[0]: s["with"]["max-score"] for s in graders} == {
        number: points for number, points in PUBLIC_ROWS.items() if number not in SHARED_ROWS}
    assert {s["name"].split()[0]: int(s["run"].rsplit("--shares ", 1)[1]) for s in shared} == {
        number: points for number, points in PUBLIC_ROWS.items() if number in SHARED_ROWS}
    assert [s["name"].split()[0] for s in rows] == list(PUBLIC_ROWS)  # rubric order
    assert all(s.get("if") == "always()" and s["run"].startswith("python .github/classroom/row.py ") for s in shared)
    assert sum(PUBLIC_ROWS.values()) == 26
    assert rows[0]["name"] == "1.1 Constructor rejects bad arguments"
    assert classroom.shared_rows() == SHARED_ROWS
    korean = yaml.safe_load(classroom.workflow("ko"))["jobs"]["run-autograding-tests"]["steps"]
    assert [s["name"] for s in korean if s.get("id", "").startswith("row-")][0] == "1.1 생성자가 잘못된 인자를 거부함"
    assert not any("setup-command" in s["with"] for s in graders)  # nothing per row but reading the results
    assert all("pytest" not in s["with"]["command"] for s in graders)
    pytest_runs = [s for s in steps if "python -m pytest" in s.get("run", "")]
    assert len(pytest_runs) == 1  # the grader runs once per push
    reporter = steps[-1]
    assert reporter["uses"].startswith("classroom-resources/autograding-grading-reporter@")
    assert reporter["with"]["runners"].split(",") == [s["id"] for s in rows]
    assert set(reporter["env"]) == {f"{s['id'].upper()}_RESULTS" for s in rows}


def test_the_solution_gets_every_public_point_on_a_push(template: Path, tmp_path: Path) -> None:
    repository = push(template, ROOT / "solutions", tmp_path / "repo")
    run = run_workflow(repository / ".github/workflows/classroom.yml", repository, tmp_path / "runner")
    assert (run.points, run.max_points, run.failed, run.step_failed) == (26, 26, False, ""), run.logs
    assert [name.split()[0] for name in run.rows] == list(PUBLIC_ROWS)
    assert sum("python -m pytest" in log or "passed" in log for log in run.logs.values()) >= 1


def test_the_skeleton_gets_no_public_point_and_says_why(template: Path, tmp_path: Path) -> None:
    repository = push(template, None, tmp_path / "repo")
    run = run_workflow(repository / ".github/workflows/classroom.yml", repository, tmp_path / "runner")
    assert (run.points, run.max_points, run.failed) == (0, 26, True)
    log = run.logs["1.2 scale(): float32, no overflow"]
    assert "0 of" in log and "NotImplementedError" in log


def test_a_row_whose_cases_share_its_points_writes_each_cases_share(tmp_path: Path) -> None:
    """``row.py --shares``: the command grader's result format in ``$GITHUB_OUTPUT``, a passed case worth
    points / cases, a failed one 0 with the command that reruns it; the step itself succeeds."""
    row = ROOT / "autograder" / "packaging" / "classroom_row.py"
    (tmp_path / "r.xml").write_text(
        '<testsuites><testsuite>'
        '<testcase classname="checks.test_public_scaler" name="test_c[a]"/>'
        '<testcase classname="checks.test_public_scaler" name="test_c[b]"><failure message="no">trace</failure></testcase>'
        '<testcase classname="checks.test_public_scaler" name="test_c[c]"/>'
        '<testcase classname="checks.test_public_scaler" name="test_cx"/>'
        '<testcase classname="checks.test_public_scaler" name="test_c[d]"/>'
        '</testsuite></testsuites>')
    output = tmp_path / "github-output"
    done = subprocess.run([sys.executable, str(row), str(tmp_path / "r.xml"), "test_c", "--shares", "3"],
                          capture_output=True, text=True, env={"GITHUB_OUTPUT": str(output)})
    assert done.returncode == 0 and "3 of 4 case(s) of test_c passed." in done.stdout and "trace" in done.stdout
    (line,) = output.read_text().splitlines()
    assert line.startswith("result=")
    result = json.loads(base64.b64decode(line[len("result="):]))
    assert (result["version"], result["status"], result["max_score"]) == (1, "fail", 3.0)
    assert [(t["name"], t["status"], t["score"]) for t in result["tests"]] == [
        ("test_c[a]", "pass", 0.75), ("test_c[b]", "fail", 0), ("test_c[c]", "pass", 0.75), ("test_c[d]", "pass", 0.75)]
    assert result["tests"][1]["test_code"] == 'python -m pytest "checks/test_public_scaler.py::test_c[b]"'
    assert result["tests"][1]["message"] == "failure: no\ntrace"
    output.unlink()
    done = subprocess.run([sys.executable, str(row), str(tmp_path / "none.xml"), "test_c", "--shares", "3"],
                          capture_output=True, text=True, env={"GITHUB_OUTPUT": str(output)})
    result = json.loads(base64.b64decode(output.read_text().split("=", 1)[1]))
    assert done.returncode == 0 and "left no results" in done.stdout
    assert (result["status"], result["max_score"], sum(t["score"] for t in result["tests"])) == ("fail", 3.0, 0)


def test_row_script_fails_a_row_whose_checks_left_no_results(tmp_path: Path) -> None:
    row = ROOT / "autograder" / "packaging" / "classroom_row.py"
    done = subprocess.run([sys.executable, str(row), str(tmp_path / "none.xml"), "test_x"], capture_output=True, text=True)
    assert done.returncode == 1 and "left no results" in done.stdout
    (tmp_path / "r.xml").write_text('<testsuites><testsuite><testcase name="test_y"/></testsuite></testsuites>')
    done = subprocess.run([sys.executable, str(row), str(tmp_path / "r.xml"), "test_x"], capture_output=True, text=True)
    assert done.returncode == 1 and "did not run" in done.stdout
    done = subprocess.run([sys.executable, str(row), str(tmp_path / "r.xml"), "test_y"], capture_output=True, text=True)
    assert done.returncode == 0 and "1 of 1" in done.stdout


def test_roster_names_github_usernames() -> None:
    students = roster.parse_roster(ROSTER)
    assert students == {
        "adal": metadata.Submitter("Ada Lovelace", "ada@uni.example", "ada@uni.example"),
        "grace-h": metadata.Submitter("s-2", "s-2", ""),
        "linus": metadata.Submitter("Linus T", "s-4", ""),
    }
    assert roster.parse_roster("\ufeffgithub_username\nzed\n".lstrip("\ufeff")) == {"zed": metadata.Submitter("zed", "", "")}
    with pytest.raises(ValueError, match="no github_username column"):
        roster.parse_roster("name,email\nA,a@b\n")


def test_cloned_repositories_are_matched_to_the_roster(tmp_path: Path) -> None:
    students = roster.parse_roster(ROSTER)
    repos = tmp_path / "amp-homework-submissions"
    for name in ("amp-homework-adal", "amp-homework-grace-h", "amp-homework-stranger", "renamed"):
        (repos / name / ".git").mkdir(parents=True)
        (repos / name / "loss_scaler.py").write_text("x = 1\n")
    (repos / "renamed" / ".git" / "config").write_text(
        '[remote "origin"]\n\turl = https://github.com/course-org/amp-homework-linus.git\n')
    found = inputs.discover([repos], tmp_path / "scratch")
    roster.name_submissions(found, students)
    names = {s.name: s.identity()["name"] for s in found.submissions}
    assert names == {"amp-homework-adal": "Ada Lovelace", "amp-homework-grace-h": "s-2",
                     "amp-homework-stranger": "", "renamed": "Linus T"}
    assert any("amp-homework-stranger is not the repository of anyone" in note for note in found.notes)
    assert found.has_identity


def test_a_bad_roster_stops_the_batch_before_grading(tmp_path: Path) -> None:
    (tmp_path / "roster.csv").write_text("name,email\nA,a@b\n")
    done = grade([ROOT / "solutions"], tmp_path / "out", "--roster", str(tmp_path / "roster.csv"), timeout=300)
    assert done.returncode == 2 and "not a GitHub Classroom roster" in done.stderr
    assert not (tmp_path / "out" / "gradebook.csv").exists()


def test_the_batch_grades_cloned_repositories_with_their_students_names(template: Path, tmp_path: Path) -> None:
    repos = tmp_path / "amp-homework-submissions"
    push(template, ROOT / "solutions", repos / "amp-homework-adal")
    push(template, None, repos / "amp-homework-linus")
    hostile = '=HYPERLINK("http://x")<img src=x onerror=alert(1)>\x1b[2J'  # a roster is input too: escaped everywhere
    (tmp_path / "classroom_roster.csv").write_text(ROSTER.replace('"Linus T"', '"' + hostile.replace('"', '""') + '"'))
    done = grade([repos], tmp_path / "out", "--roster", str(tmp_path / "classroom_roster.csv"), "--jobs", "1")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "no repository for 1 student(s) of the roster: s-2" in done.stderr and "\x1b" not in done.stderr
    rows = {row["submission"]: row for row in csv.DictReader(io.StringIO((tmp_path / "out" / "gradebook.csv").read_text()))}
    assert rows["amp-homework-adal"]["name"] == "Ada Lovelace" and float(rows["amp-homework-adal"]["score"]) == 90
    assert "HYPERLINK" in rows["amp-homework-linus"]["name"] and float(rows["amp-homework-linus"]["score"]) == 0
    assert not rows["amp-homework-linus"]["name"].startswith("=")
    out = tmp_path / "out"
    for path in [out / "summary.md", out / "report.html", *out.glob("*/feedback.md")]:
        text = path.read_text()
        assert "\x1b" not in text and "<img src=x" not in outside_code_fences(text), path


def test_checks_cut_short_still_report_every_row_at_zero(template: Path, tmp_path: Path) -> None:
    """The checks' step hits its time limit: the job fails there, and the rows and the reporter still run."""
    repository = push(template, ROOT / "solutions", tmp_path / "repo")
    workflow = repository / ".github/workflows/classroom.yml"
    text = workflow.read_text()
    assert text.count(f"timeout-minutes: {classroom.CHECKS_TIMEOUT_MINUTES}\n") == 1
    workflow.write_text(text.replace(f"timeout-minutes: {classroom.CHECKS_TIMEOUT_MINUTES}\n", "timeout-minutes: 0.02\n"))
    run = run_workflow(workflow, repository, tmp_path / "runner")
    assert run.step_failed.startswith("Run the public checks")
    assert (run.points, run.max_points, run.failed) == (0, 26, True) and len(run.rows) == 8
    assert "left no results" in run.logs["1.1 Constructor rejects bad arguments"]


def test_a_row_whose_cases_partly_pass_gets_its_share_as_in_the_batch(template: Path, tmp_path: Path) -> None:
    """A constructor that accepts growth_factor == 1 fails 1 of row 1.1's 24 cases: 3 * 23 / 24 points on every
    push, as the TA batch gives it, instead of the command grader's all or nothing."""
    from autograder.diagnosis.table import load_catalogue

    entry = next(e for e in load_catalogue().BUGS if e.name == "constructor_accepts_growth_factor_one")
    submission = load_catalogue().materialize(entry, tmp_path / "bug")
    repository = push(template, submission, tmp_path / "repo")
    run = run_workflow(repository / ".github/workflows/classroom.yml", repository, tmp_path / "runner")
    assert run.points == pytest.approx(23 + 3 * 23 / 24) and run.max_points == 26 and run.failed
    row = run.rows["1.1 Constructor rejects bad arguments"]
    assert [t["status"] for t in row["tests"]].count("fail") == 1 and len(row["tests"]) == 24
    done = grade([submission], tmp_path / "batch")
    assert done.returncode == 0, done.stderr[-3000:]
    batch = {t["number"]: t["score"] for t in load_results(tmp_path / "batch", "bug")["tests"]
             if t.get("number") in PUBLIC_ROWS}
    assert batch["1.1"] == 2.875 and round(run.points, 4) == round(sum(batch.values()), 4)
