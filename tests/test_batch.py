"""Batch grading (``python -m autograder grade DIR --out OUT --jobs N``): inputs, gradebook,
identity columns, summary, resume after ``kill -9``, worker deaths, content hashes, Slurm.

The end-to-end tests start the CLI as a subprocess, as a TA would.  They grade few
submissions (grading a correct one takes a few seconds) and share one graded batch.

Why one file: the tests share one graded batch (a session fixture) that is expensive
to build.
"""

from __future__ import annotations

import csv
import fcntl
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path

import pytest

from autograder import settings
from autograder.batch import feedback, inputs, metadata, pools, run, summary
from autograder.batch.digest import content_digest
from autograder.engine import grader, rubric
from autograder.batch.ledger import Entry, Ledger
from conftest import gone_within, skip_unless_ci

ROOT = Path(__file__).resolve().parents[1]
SOLUTIONS = ROOT / "solutions"
ASSIGNMENT = ROOT / "assignment"
CONTRACT = ("loss_scaler.py", "amp_step.py", "answers.py")
TOP = rubric.max_points()
SCALER_POINTS = sum(item.points for item in rubric.ITEMS if item.task == "scaler")
QUICK_POINTS = sum(item.points for item in rubric.ITEMS if item.task == "quick_check")
METADATA = """\
submission_101:
  :submitters:
  - :name: Ada Lovelace
    :sid: '1815'
    :email: ada@example.edu
  :created_at: 2024-03-01 10:00:00.000000000 -08:00
  :score: !ruby/object:BigDecimal 18:0.0
  :status: processed
submission_102:
  :submitters:
  - :name: Alan Turing
    :sid: '1912'
    :email: alan@example.edu
  - :name: Grace Hopper
    :sid: 1906
    :email: grace@example.edu
  :created_at: 2024-03-01 11:00:00.000000000 -08:00
"""


def copy_contract(source: Path, target: Path, files: tuple[str, ...] = CONTRACT) -> Path:
    target.mkdir(parents=True, exist_ok=True)
    for name in files:
        shutil.copy(source / name, target / name)
    return target


def grade(*args: object, env: dict[str, str] | None = None, timeout: float = 400) -> subprocess.CompletedProcess[str]:
    """Run ``python -m autograder grade ARGS`` like a TA would (stdout not a terminal)."""
    return subprocess.run([sys.executable, "-m", "autograder", "grade", *map(str, args)], cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}, capture_output=True,
                          text=True, timeout=timeout)


def read_gradebook(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as stream:
        return list(csv.DictReader(stream))


def ledger_count(path: Path) -> int:
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5) as db:
            return int(db.execute("SELECT COUNT(*) FROM graded").fetchone()[0])
    except sqlite3.Error:
        return 0


# --------------------------------------------------------------------------- the mixed batch


@pytest.fixture(scope="module")
def batch_inputs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A folder of assorted submissions, and a Gradescope export zip."""
    root = tmp_path_factory.mktemp("batch-inputs")
    mixed = root / "mixed"
    copy_contract(SOLUTIONS, mixed / "correct")
    copy_contract(ASSIGNMENT, mixed / "skeleton")
    broken = copy_contract(SOLUTIONS, mixed / "broken", ("amp_step.py", "answers.py"))
    (broken / "loss_scaler.py").write_text("class ToyLossScaler(:\n    pass\n")
    # A process that exits and one that hangs.  answers.py is never run (it is parsed).
    hostile = copy_contract(SOLUTIONS, mixed / "hostile", ("answers.py",))
    (hostile / "loss_scaler.py").write_text("import os\nprint('bye')\nos._exit(3)\n")
    (hostile / "amp_step.py").write_text("while True:\n    pass\n")
    copy_contract(SOLUTIONS, mixed / "nested" / "homework" / "src")
    (mixed / "nested" / "notes.txt").write_text("not a submission file\n")
    with zipfile.ZipFile(mixed / "zipped.zip", "w") as bundle:
        for name in CONTRACT:
            bundle.write(SOLUTIONS / name, f"hw3/{name}")
    (mixed / "garbage.zip").write_bytes(b"this is not a zip archive")
    export = root / "export.zip"
    with zipfile.ZipFile(export, "w") as bundle:
        bundle.writestr("assignment_42_export/submission_metadata.yml", METADATA)
        for name in CONTRACT:
            bundle.write(ASSIGNMENT / name, f"assignment_42_export/submission_101/{name}")
        bundle.write(SOLUTIONS / "answers.py", "assignment_42_export/submission_102/answers.py")
    return mixed, export


BATCH_FLAGS = ("--jobs", "2", "--import-timeout", "3")


@pytest.fixture(scope="module")
def graded(batch_inputs: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The mixed batch graded once, uninterrupted: (OUT, stdout)."""
    out = tmp_path_factory.mktemp("batch-out") / "out"
    done = grade(*batch_inputs, "--out", out, *BATCH_FLAGS)
    assert done.returncode == 0, done.stdout + done.stderr
    return out, done.stdout


def test_mixed_folder_gives_the_expected_gradebook(graded: tuple[Path, str]) -> None:
    out, stdout = graded
    rows = read_gradebook(out / "gradebook.csv")
    names = [row["submission"] for row in rows]
    assert names == ["broken", "correct", "garbage", "hostile", "nested", "skeleton", "submission_101",
                     "submission_102", "zipped"]
    header = list(rows[0])
    assert header[:7] == ["submission", "name", "sid", "email", "score", "max_score", "status"]
    assert header[7:-1] == [f"{item.number} {item.test}" for item in rubric.ITEMS]
    assert header[-1] == "source"  # where each came from (a renamed duplicate is found by it)
    assert {row["submission"]: row["source"] for row in rows}["zipped"].endswith("/mixed/zipped.zip")
    score = {row["submission"]: float(row["score"]) if row["score"] else None for row in rows}
    assert {name: score[name] for name in ("correct", "nested", "zipped")} == {n: TOP for n in ("correct", "nested", "zipped")}
    assert score["skeleton"] == score["submission_101"] == 0
    garbage = next(row for row in rows if row["submission"] == "garbage")  # could not be graded: no score, not 0
    assert score["garbage"] is None and garbage["status"].startswith("could not be graded: ")
    assert all(garbage[f"{item.number} {item.test}"] == "" for item in rubric.ITEMS)
    assert {row["status"] for row in rows if row["submission"] != "garbage"} == {"graded"}
    assert score["submission_102"] == QUICK_POINTS  # only answers.py, all right
    assert score["hostile"] == QUICK_POINTS  # its exiting loss_scaler and hanging amp_step cost only their tests
    broken = next(row for row in rows if row["submission"] == "broken")
    assert QUICK_POINTS <= score["broken"] < TOP
    for item in rubric.ITEMS:
        if item.task == "scaler":
            assert float(broken[f"{item.number} {item.test}"]) == 0, item.number
        if item.task == "quick_check":
            assert float(broken[f"{item.number} {item.test}"]) == item.points
    for row in rows:
        assert float(row["max_score"]) == TOP
        if not row["score"]:
            continue
        tests = [float(row[f"{item.number} {item.test}"]) for item in rubric.ITEMS]
        assert sum(tests) == pytest.approx(float(row["score"]))
    # every submission has its results.json (Gradescope format) and a feedback file
    for name in names:
        data = json.loads((out / name / "results.json").read_text())
        assert data["score"] == (score[name] or 0.0)
        assert {"score", "tests", "output", "visibility"} <= set(data)
        feedback = (out / name / "feedback.md").read_text()
        assert feedback.startswith(f"# Feedback: {name}\n")
    assert "not a readable zip" in (out / "garbage" / "feedback.md").read_text()
    assert "did not finish within" in (out / "hostile" / "feedback.md").read_text()
    assert "9 submission(s): 0 already graded, 9 to grade with 2 worker(s)." in stdout
    assert "Grades (CPU part" in stdout  # the summary table


def test_identity_columns_come_from_submission_metadata(graded: tuple[Path, str]) -> None:
    rows = {row["submission"]: row for row in read_gradebook(graded[0] / "gradebook.csv")}
    assert (rows["submission_101"]["name"], rows["submission_101"]["sid"], rows["submission_101"]["email"]) == (
        "Ada Lovelace", "1815", "ada@example.edu")
    assert rows["submission_102"]["name"] == "Alan Turing; Grace Hopper"
    assert rows["submission_102"]["sid"] == "1912; 1906"
    assert rows["submission_102"]["email"] == "alan@example.edu; grace@example.edu"
    assert rows["correct"]["name"] == rows["correct"]["sid"] == rows["correct"]["email"] == ""
    assert "Submitted by: Alan Turing, Grace Hopper" in (graded[0] / "submission_102" / "feedback.md").read_text()


def test_summary_files_agree_with_the_gradebook(graded: tuple[Path, str]) -> None:
    out = graded[0]
    rows = read_gradebook(out / "gradebook.csv")
    data = json.loads((out / "summary.json").read_text())
    scores = [float(row["score"]) for row in rows if row["status"] == "graded"]  # the one not graded has none
    assert data["submissions"] == len(rows) == 9
    assert data["errored"] == 1 and data["not_graded"][0]["submission"] == "garbage"
    assert "not a readable zip" in data["not_graded"][0]["reason"]
    assert data["graded"] == 8 and data["full_marks"] == sum(s == TOP for s in scores) == 3
    assert data["score"]["mean"] == pytest.approx(sum(scores) / len(scores), abs=1e-3)
    assert data["score"]["min"] == min(scores) and data["score"]["max"] == max(scores)
    assert sum(data["histogram"]["counts"]) == len(scores) == 8
    assert data["histogram"]["counts"][-1] == 3 and data["histogram"]["counts"][0] == 2  # 90s; 0s (not garbage)
    by_number = {test["number"]: test for test in data["tests"]}
    assert set(by_number) == {item.number for item in rubric.ITEMS}
    for item in rubric.ITEMS:
        if item.points:
            passed = sum(float(row[f"{item.number} {item.test}"]) >= item.points for row in rows if row["score"])
            assert by_number[item.number]["passed"] == passed, item.number
    rates = [test["pass_rate"] for test in data["tests"]]
    assert rates == sorted(rates)  # most failed first
    problems = {problem["kind"]: problem["submissions"] for problem in data["problems"]}
    assert "hostile" in problems["time limit"]
    assert "hostile" in problems["crash, exit or memory limit"]
    assert problems["not graded"] == ["garbage"]
    assert "broken" in problems["import error"]
    assert data["hit_a_limit"] == 1
    text = (out / "summary.md").read_text()
    assert "## Tests, most failed first" in text and "garbage" in text and "score_histogram.png" in text
    assert (out / "score_histogram.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_run_ends_with_names_and_every_file_a_ta_opens(graded: tuple[Path, str]) -> None:
    out, stdout = graded
    table = stdout.split("Grades (CPU part", 1)[1]
    assert "Ada Lovelace (submission_101)" in table  # the export's names, with the id to find the folder
    assert "Alan Turing; Grace Hopper" in table and "(submission_102)" in table
    assert "│ correct " in table  # no name known: the submission's own name
    last = stdout.strip().splitlines()[-1]
    for name in ("report.html", "similarity.html", "summary.md", "gradebook.csv", "feedback.md", "results.json"):
        assert name in last, (name, last)
        if "." in name and name not in ("feedback.md", "results.json"):
            assert (out / name).is_file(), name


def test_report_html_lists_each_student_with_problems_and_a_link(graded: tuple[Path, str]) -> None:
    from autograder.engine.escape import html_text

    out = graded[0]
    page = (out / "report.html").read_text()
    table = page.split('<table id="student-table">', 1)[1].split("</table>", 1)[0]
    lines = {line.split("</td>", 1)[0]: line for line in table.split("<tr><td>")[1:]}
    rows = read_gradebook(out / "gradebook.csv")
    assert len(lines) == len(rows) - 1 == 8  # garbage, not graded, is listed apart
    for row in rows:
        name = row["submission"]
        if name == "garbage":
            continue
        line = lines[f'<a href="{name}/feedback.md">{name}</a>']
        assert f"<td>{float(row['score']):g} / {TOP:g}</td>" in line
        assert f"<td>{html_text(row['name']) or '-'}</td><td>{html_text(row['sid']) or '-'}</td>" in line
    apart = page.split('<table id="not-graded-table">', 1)[1].split("</table>", 1)[0]
    assert '<a href="garbage/feedback.md">garbage</a>' in apart and "not a readable zip" in apart
    hostile = lines['<a href="hostile/feedback.md">hostile</a>']
    assert "time limit" in hostile and "crash, exit or memory limit" in hostile
    broken = lines['<a href="broken/feedback.md">broken</a>']
    assert "import error" in broken and "loss_scaler.py" in broken  # the limit kind and the grader's note
    assert "has a syntax error on line 1" in broken  # the note's cause, not only its announcing line
    assert "Ada Lovelace" in lines['<a href="submission_101/feedback.md">submission_101</a>']


def test_rerun_grades_nothing_and_gives_identical_files(graded: tuple[Path, str], batch_inputs: tuple[Path, Path]) -> None:
    out = graded[0]
    before = {name: (out / name).read_bytes() for name in ("gradebook.csv", "summary.json", "summary.md",
                                                          "score_histogram.png")}
    again = grade(*batch_inputs, "--out", out, *BATCH_FLAGS, timeout=120)
    assert again.returncode == 0, again.stderr
    assert "9 submission(s): 9 already graded, 0 to grade." in again.stdout
    assert {name: (out / name).read_bytes() for name in before} == before


def test_kill_9_mid_run_then_resume_gives_the_same_gradebook(graded: tuple[Path, str], batch_inputs: tuple[Path, Path],
                                                             tmp_path: Path) -> None:
    out = tmp_path / "out"
    process = subprocess.Popen([sys.executable, "-m", "autograder", "grade", *map(str, batch_inputs), "--out", str(out),
                                *BATCH_FLAGS], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while ledger_count(out / "ledger.sqlite") < 1:
        assert process.poll() is None, "the run ended before it could be killed"
        assert time.monotonic() < deadline
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    recorded = ledger_count(out / "ledger.sqlite")
    assert 1 <= recorded < 9
    assert not (out / "gradebook.csv").exists()  # never a partial gradebook
    # its workers die with it (and their student processes with them)
    assert not gone_within(str(out), 20)

    resumed = grade(*batch_inputs, "--out", out, *BATCH_FLAGS)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    first_line = resumed.stdout.splitlines()[0]
    already = int(first_line.split(": ")[1].split(" already")[0])
    assert already >= recorded and f"{9 - already} to grade" in first_line
    assert (out / "gradebook.csv").read_bytes() == (graded[0] / "gradebook.csv").read_bytes()
    assert ledger_count(out / "ledger.sqlite") == 9
    with sqlite3.connect(out / "ledger.sqlite") as db:
        names = [name for (name,) in db.execute("SELECT name FROM graded")]
    assert len(names) == len(set(names)) == 9


# --------------------------------------------------------------------------- smaller runs


@pytest.fixture()
def small_batch(tmp_path: Path) -> Path:
    folder = tmp_path / "subs"
    copy_contract(ASSIGNMENT, folder / "skeleton")
    copy_contract(SOLUTIONS, folder / "answers_only", ("answers.py",))
    return folder


def test_changed_files_are_regraded_and_force_regrades_all(small_batch: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    first = grade(small_batch, "--out", out, "--jobs", "2")
    assert first.returncode == 0, first.stderr
    assert {r["submission"]: float(r["score"]) for r in read_gradebook(out / "gradebook.csv")} == {
        "answers_only": QUICK_POINTS, "skeleton": 0}
    shutil.copy(ASSIGNMENT / "answers.py", small_batch / "answers_only" / "answers.py")  # a late resubmission
    second = grade(small_batch, "--out", out, "--jobs", "2")
    assert second.returncode == 0, second.stderr
    assert "1 changed since their last grading" in second.stdout.splitlines()[0]
    if "another version of the grader" not in second.stdout:  # files of the grader edited meanwhile
        assert second.stdout.startswith("2 submission(s): 1 already graded, 1 to grade (1 changed")
    assert {r["submission"]: float(r["score"]) for r in read_gradebook(out / "gradebook.csv")} == {
        "answers_only": 0, "skeleton": 0}
    third = grade(small_batch, "--out", out, "--jobs", "2", "--force")
    assert third.stdout.startswith("2 submission(s): 0 already graded, 2 to grade (2 forced) with 2 worker(s).")


def test_a_worker_that_dies_is_replaced_and_its_wave_regraded_one_by_one(small_batch: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = grade(small_batch, "--out", out, "--jobs", "1", env=settings.test_hooks_env(die_on="skeleton"))
    assert done.returncode == 0, done.stdout + done.stderr
    rows = {r["submission"]: (r["score"], r["status"]) for r in read_gradebook(out / "gradebook.csv")}
    assert float(rows["answers_only"][0]) == QUICK_POINTS
    assert rows["skeleton"] == ("", "could not be graded: the grading worker died twice while grading it "
                                    "(exit status 70)")  # ungraded, never a zero
    data = json.loads((out / "summary.json").read_text())
    assert data["not_graded"] == [{"submission": "skeleton",
                                   "reason": "the grading worker died twice while grading it (exit status 70)"}]
    with sqlite3.connect(out / "ledger.sqlite") as db:
        assert db.execute("SELECT attempts FROM graded WHERE name = 'skeleton'").fetchone() == (2,)
        # its wave-mate was in the wave the worker died in, then graded alone: never taken down a second time
        assert db.execute("SELECT attempts, status FROM graded WHERE name = 'answers_only'").fetchone() == (2, "graded")


def test_a_machine_where_the_reference_loses_points_grades_nobody(small_batch: Path, tmp_path: Path) -> None:
    """The plan's recording is a canary: when the reference loses points, the batch stops and says why.

    What breaks correct code on a real machine (a memory limit, a sandbox layer) does so unevenly; here the
    "reference" is a solution with one bug, which fails one row the same way every time."""
    copy_contract(SOLUTIONS, small_batch / "reference")  # three submissions for one worker: the plan is recorded
    broken = copy_contract(SOLUTIONS, tmp_path / "broken_reference")
    source = (broken / "amp_step.py").read_text()
    (broken / "amp_step.py").write_text(source.replace("return loss.detach()", "return loss"))
    out = tmp_path / "out"
    done = grade(small_batch, "--out", out, "--jobs", "1", env=settings.test_hooks_env(reference=str(broken)))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "refusing to grade: the reference solution" in done.stderr and "loses points on this machine" in done.stderr
    assert "1 row(s) fail, the first 2.8" in done.stderr  # the failing row, with its own message
    assert not (out / "gradebook.csv").exists() and ledger_count(out / "ledger.sqlite") == 0


def test_slurm_executor_with_submitits_local_cluster(small_batch: Path, tmp_path: Path) -> None:
    pytest.importorskip("submitit")
    out = tmp_path / "out"
    done = grade(small_batch, "--out", out, "--executor", "slurm", "--slurm-cluster", "local", "--slurm-chunk", "1",
                 "--slurm-poll", "0.5")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 to grade on Slurm" in done.stdout
    assert {r["submission"]: float(r["score"]) for r in read_gradebook(out / "gradebook.csv")} == {
        "answers_only": QUICK_POINTS, "skeleton": 0}
    assert len(list((out / ".submitit").rglob("*_result.pkl"))) == 2  # two array tasks, one per chunk
    assert not list((out / ".inbox").glob("*.json"))  # all gathered into the ledger


def test_the_similarity_report_is_written_while_the_submissions_are_graded(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """It reads no grade, so the batch computes it beside the grading (from the cores the graders leave idle) and
    the summary still has its section: the pool below answers only once the report is written, which would
    never happen while it waits if the report came after it."""
    for name in ("alice", "bob"):
        (tmp_path / "class" / name).mkdir(parents=True)
        for file in CONTRACT:
            shutil.copy(SOLUTIONS / file, tmp_path / "class" / name / file)
    written = threading.Event()
    section = run._similarity_section

    def similarity_section(*args: object) -> str:
        try:
            return section(*args)
        finally:
            written.set()

    class PoolAfterTheReport:
        def __init__(self, *args: object) -> None:
            pass

        def run(self, todo: list, finish: object) -> None:
            assert written.wait(120), "the similarity report was not written while the pool graded"
            for submission, digest in todo:
                finish(submission, digest, pools.error_outcome("not graded in this test"), 1)

    monkeypatch.setattr(run, "_similarity_section", similarity_section)
    monkeypatch.setattr(run, "LocalPool", PoolAfterTheReport)
    out = tmp_path / "out"
    assert run.run([tmp_path / "class"], run.Options(out=out, jobs=1, progress=False)) == 0
    assert "## Similarity" in (out / "summary.md").read_text(encoding="utf-8")
    assert {(row["submission_a"], row["submission_b"]) for row in read_gradebook(out / "similarity.csv")} >= {
        ("alice", "bob")}  # the same files: a pair


def test_bad_arguments_exit_2(tmp_path: Path) -> None:
    missing = grade(tmp_path / "nope", "--out", tmp_path / "out")
    assert missing.returncode == 2 and "no such file or folder" in missing.stderr
    zero_jobs = grade(ASSIGNMENT, "--out", tmp_path / "out", "--jobs", "0")
    assert zero_jobs.returncode == 2
    (tmp_path / "file").write_text("x")
    out_is_file = grade(ASSIGNMENT, "--out", tmp_path / "file")
    assert out_is_file.returncode == 2 and "is a file" in out_is_file.stderr
    busy = tmp_path / "busy"
    busy.mkdir()
    with open(busy / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another run holds this output folder
        second = grade(ASSIGNMENT, "--out", busy)
    assert second.returncode == 2 and "another grading run is using" in second.stderr


# --------------------------------------------------------------------------- units (no grading)


def test_contract_names_and_internal_message_match_the_grader() -> None:
    from checks.runners.harness import CONTRACT_FILES

    from autograder.engine import judge

    assert set(inputs.CONTRACT_FILES) == set(CONTRACT_FILES.values())
    assert judge.INTERNAL.startswith(summary.INTERNAL_PREFIX)


def test_parse_metadata_reads_gradescope_yaml() -> None:
    people = metadata.parse_metadata(METADATA)
    assert people["submission_101"] == (metadata.Submitter("Ada Lovelace", "1815", "ada@example.edu"),)
    assert [p.sid for p in people["submission_102"]] == ["1912", "1906"]
    with pytest.raises(ValueError):
        metadata.parse_metadata("- just\n- a list\n")
    with pytest.raises(ValueError):
        metadata.parse_metadata("a: [unclosed\n")
    assert metadata.parse_metadata("submission_1:\n  :submitters: !ruby/object:Weird\n    x: 1\n") == {}


def _zip(path: Path, members: dict[str, str]) -> Path:
    with zipfile.ZipFile(path, "w") as bundle:
        for name, text in members.items():
            bundle.writestr(name, text)
    return path


def test_discover_tells_one_submission_from_a_batch(tmp_path: Path) -> None:
    scratch = tmp_path / "scratch"
    single = copy_contract(ASSIGNMENT, tmp_path / "alice")
    wrapped = copy_contract(ASSIGNMENT, tmp_path / "bob" / "hw" / "src")
    batch = tmp_path / "batch"
    copy_contract(ASSIGNMENT, batch / "carol")
    copy_contract(ASSIGNMENT, batch / "dave" / "deep")
    _zip(batch / "erin.zip", {"erin/loss_scaler.py": "x = 1\n"})
    (batch / ".hidden").mkdir()
    (batch / "__MACOSX").mkdir()
    (batch / "notes.txt").write_text("ignored")
    one_zip = _zip(tmp_path / "frank.zip", {"frank/hw/loss_scaler.py": "x = 1\n", "frank/hw/amp_step.py": ""})
    batch_zip = _zip(tmp_path / "many.zip", {"many/gina/loss_scaler.py": "", "many/hank.zip": "not really",
                                              "__MACOSX/many/._gina": ""})
    found = inputs.discover([single, wrapped.parent.parent, batch, one_zip, batch_zip], scratch,
                            reserved=summary.RESERVED)
    names = [s.name for s in found.submissions]
    assert names == ["alice", "bob", "carol", "dave", "erin", "frank", "gina", "hank"]
    by_name = {s.name: s for s in found.submissions}
    assert by_name["bob"].path == (tmp_path / "bob").resolve()
    assert by_name["frank"].path == one_zip.resolve()
    assert by_name["gina"].path.is_relative_to(scratch.resolve())
    assert by_name["gina"].source == f"{batch_zip}:many/gina"
    assert by_name["carol"].source == f"{batch}/carol"
    again = inputs.discover([batch_zip], scratch)  # unpacked once, reused
    assert [s.path for s in again.submissions] == [by_name["gina"].path, by_name["hank"].path]


def test_discover_names_are_unique_and_never_clash_with_outputs(tmp_path: Path) -> None:
    batch = tmp_path / "batch"
    copy_contract(ASSIGNMENT, batch / "gradebook.csv")
    copy_contract(ASSIGNMENT, batch / "x")
    _zip(batch / "x.zip", {"loss_scaler.py": ""})
    found = inputs.discover([batch, batch], tmp_path / "scratch", reserved=summary.RESERVED)
    assert [s.name for s in found.submissions] == ["gradebook.csv-2", "x", "x-2"]
    assert any("given twice" in note for note in found.notes)


def test_discover_skips_the_output_folder(tmp_path: Path) -> None:
    batch = tmp_path / "batch"
    copy_contract(ASSIGNMENT, batch / "a")
    copy_contract(ASSIGNMENT, batch / "b")
    (batch / "out").mkdir()
    found = inputs.discover([batch], tmp_path / "scratch", exclude=[batch / "out"])
    assert [s.name for s in found.submissions] == ["a", "b"]


def test_batch_zip_extraction_is_safe(tmp_path: Path) -> None:
    archive = tmp_path / "evil.zip"
    with zipfile.ZipFile(archive, "w") as bundle:
        bundle.writestr("a/loss_scaler.py", "ok")
        bundle.writestr("../escape.py", "no")
        bundle.writestr("/abs.py", "no")
        link = zipfile.ZipInfo("b/link")
        link.external_attr = (0o120777 << 16)
        bundle.writestr(link, "/etc/passwd")
        bundle.writestr("b/amp_step.py", "ok")
    target = inputs.extract_batch_zip(archive, tmp_path / "x" / "evil")
    files = sorted(p.relative_to(target).as_posix() for p in target.rglob("*") if p.is_file())
    assert files == [".complete", "a/loss_scaler.py", "b/amp_step.py"]
    assert not (tmp_path / "x" / "escape.py").exists() and not (tmp_path / "escape.py").exists()


def test_content_digest_follows_content(tmp_path: Path) -> None:
    folder = copy_contract(ASSIGNMENT, tmp_path / "s")
    first = content_digest(folder)
    assert content_digest(folder) == first
    shutil.copytree(folder, tmp_path / "copy")
    assert content_digest(tmp_path / "copy") == first  # names and bytes, not paths or times
    (folder / "answers.py").write_text("Q1 = 'changed'\n")
    assert content_digest(folder) != first
    (folder / "__pycache__").mkdir()
    second = content_digest(folder)
    (folder / "__pycache__" / "x.pyc").write_bytes(b"junk")
    assert content_digest(folder) == second


def test_ledger_records_once_per_name_and_survives_reopening(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    results = {"score": 1.0, "tests": []}
    with Ledger(path) as ledger:
        ledger.record(Entry("a", "d1", "g", "graded", 1.0, 90.0, results))
        ledger.record(Entry("a", "d2", "g", "graded", 2.0, 90.0, {**results, "score": 2.0}))
        ledger.record(Entry("b", "d3", "g", "errored", 0.0, 90.0, results, reason="bad zip"))
    with Ledger(path) as ledger:
        assert len(ledger) == 2
        assert ledger.keys() == {"a": ("d2", "g"), "b": ("d3", "g")}
        assert ledger.get("a").results["score"] == 2.0  # type: ignore[union-attr]
        assert ledger.get("b").reason == "bad zip"  # type: ignore[union-attr]
        assert ledger.get("c") is None
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)


def test_summary_of_synthetic_entries() -> None:
    def entry(name: str, score: float, failed: dict[str, str], status: str = "graded",
              limits_hit: dict[str, str] | None = None) -> tuple[inputs.Submission, Entry]:
        tests = [{"number": item.number, "score": 0.0 if item.number in failed else float(item.points),
                  "max_score": item.points, "status": "failed" if item.number in failed else "passed",
                  "output": failed.get(item.number, "Passed.")} for item in rubric.ITEMS]
        results = {"score": score, "tests": tests,
                   "extra_data": {"isolation": "namespaces", "limits_hit": limits_hit or {}}}
        return (inputs.Submission(name, Path(name), name), Entry(name, "d", "g", status, score, TOP, results,
                                                                 reason="why"))

    first = rubric.ITEMS[0]
    slow = "your code did not finish within 20 s"
    rows = [entry("a", TOP, {}), entry("b", TOP - first.points, {first.number: slow}, limits_hit={first.number: "time limit"}),
            entry("c", 0.0, {item.number: "x" for item in rubric.ITEMS}, "errored"),
            # the same words raised by student code: no record of the sandbox, so no limit
            entry("d", TOP - first.points, {first.number: "AssertionError: " + slow})]
    data = summary.summarize(rows)
    assert data["tests"][0]["number"] == first.number and data["tests"][0]["passed"] == 1
    assert data["histogram"]["counts"][0] == 0 and data["histogram"]["counts"][-1] == 3  # c, not graded: in none
    assert all(test["passed"] + test["failed"] == 3 for test in data["tests"])
    assert data["hit_a_limit"] == 1 and data["errored"] == 1 and data["full_marks"] == 1
    assert {p["kind"]: p["submissions"] for p in data["problems"]} == {"time limit": ["b"], "not graded": ["c"]}
    assert data["isolation"] == {"namespaces": 4}
    assert "- namespaces: 4 submission(s)" in summary.summary_markdown(data)
    text = feedback.feedback_markdown(rows[1][0], rows[1][1])
    assert "did not finish within" in text and "**failed**" in text
    assert feedback._fence("a ```` b") == "`````"


def test_a_private_path_the_grader_may_not_look_at_is_skipped(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Someone else's cache named by $AMP_PLAN_CACHE (stat says "permission denied") is no reason to crash: the
    student processes, with no more rights than the grader, cannot reach it either."""
    locked = tmp_path / "someone-else" / "plan-cache"
    exists = Path.exists

    def exists_or_denied(path: Path, *args: object, **kwargs: object) -> bool:
        if path == locked:
            raise PermissionError(13, "Permission denied", str(path))
        return exists(path, *args, **kwargs)

    monkeypatch.setattr(Path, "exists", exists_or_denied)
    hidden = grader.private_paths(tmp_path / "out", extra=(locked,))
    assert str(locked) not in hidden
    assert str((run.ROOT / "solutions").resolve()) in hidden  # the rest is still hidden


def test_a_claimed_uid_is_seen_as_claimed_until_released() -> None:
    if os.geteuid() != 0:
        skip_unless_ci("uids are claimed by root only")
    from autograder.sandbox.uids import claim_uid, claimed

    found = claim_uid(123)
    assert found is not None
    uid, lock = found
    assert claimed(uid)
    lock.close()
    assert not claimed(uid)


@pytest.mark.parametrize("note", ["amp_step.py was skipped: larger than 1 MiB.",
                                  "amp_step.py는 1 MiB보다 커서 건너뛰었습니다."])
def test_a_file_skipped_for_its_size_is_that_problem_not_a_missing_file(note: str) -> None:
    """Intake skipped the file, so its rows say "missing": the problem told is the skip (in either language)."""
    tests = [{"number": "2.1", "status": "failed", "score": 0.0, "max_score": 4.0,
              "output": "Not run: amp_step.py is missing (see the top of this feedback)."}]
    entry = Entry("s", "d", "g", "graded", 0.0, TOP, {"score": 0.0, "tests": tests, "extra_data": {"notes": [note]}})
    assert summary.problems(entry) == [("file too large", "")]
    del entry.results["extra_data"]
    assert summary.problems(entry) == [("missing file", "2.1")]


#: A failing row's output for each kind of problem recognised by its words, as the grader writes it in each language.
PROBLEM_OUTPUTS = {
    "en": [
        ("import error", "Not run: loss_scaler.py could not be imported (see the top of this feedback)."),
        ("import error", "loss_scaler.py has a syntax error on line 3: invalid syntax"),
        ("import error", "importing amp_step.py raised an exception:\n  File \"amp_step.py\", line 1\nZeroDivisionError"),
        ("import error", "answers.py is not valid UTF-8 text (byte 17): save it as UTF-8."),
        ("import error", "loss_scaler.py does not define `ToyLossScaler`."),
        ("missing file", "Not run: amp_step.py is missing (see the top of this feedback)."),
        ("missing file", "amp_step.py is missing: upload it at the top level of your submission."),
        ("grader fault", "The grader hit an internal problem in this test (not your fault); staff can see the details."),
    ],
    "ko": [
        ("import error", "실행하지 않음: loss_scaler.py를 import할 수 없습니다(이 피드백의 맨 위 참고)."),
        ("import error", "loss_scaler.py의 3번째 줄에 문법 오류가 있습니다: invalid syntax"),
        ("import error", "amp_step.py를 import하는 중에 예외가 발생했습니다:\n  File \"amp_step.py\", line 1\nZeroDivisionError"),
        ("import error", "answers.py는 올바른 UTF-8 텍스트가 아닙니다(바이트 17). UTF-8로 저장하세요."),
        ("import error", "loss_scaler.py에 `ToyLossScaler`의 정의가 없습니다."),
        ("missing file", "실행하지 않음: amp_step.py 파일이 없습니다(이 피드백의 맨 위 참고)."),
        ("missing file", "amp_step.py 파일이 없습니다. 제출물의 최상위에 올리세요."),
        ("grader fault", "이 테스트에서 채점기에 내부 문제가 생겼습니다(여러분의 잘못이 아닙니다). 조교가 자세한 내용을 볼 수 "
                         "있습니다."),
    ],
}


@pytest.mark.parametrize("language", sorted(PROBLEM_OUTPUTS))
def test_every_problem_kind_is_recognised_in_every_language(language: str) -> None:
    """summary.PROBLEMS's phrases come from the messages' tables, so a Korean row is counted as an English one is."""
    samples = [*PROBLEM_OUTPUTS[language], ("", "the last line should: print 1.0 0\nbut with your code it prints inf 0"),
               ("", "마지막 줄은 1.0 0 출력해야 합니다")]
    tests = [{"number": f"9.{k}", "status": "failed", "score": 0.0, "max_score": 1.0, "output": output}
             for k, (_, output) in enumerate(samples)]
    entry = Entry("s", "d", "g", "graded", 0.0, TOP, {"score": 0.0, "tests": tests})
    expected = [(kind, f"9.{k}") for k, (kind, _) in enumerate(samples) if kind]
    assert summary.problems(entry) == expected
    kinds = {kind for kind, limit, phrases in summary.PROBLEMS if phrases}
    assert kinds <= {kind for kind, _ in PROBLEM_OUTPUTS["ko"]}  # every kind told in Korean
