"""One message per cause: a missing file, a file that does not import, a stub not implemented yet.

The cause is told once at the top of the feedback (results.json's "output"); each row it failed says so in
one short line; scores are what the tests decided.  Unit tests on the judge's rows, then one submission with
a syntax error and one empty folder graded by ``python -m autograder grade``.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from autograder.batch import feedback
from autograder.engine import intake, judge, rubric
from autograder.engine.results import gradescope_results
from conftest import ROOT, grade, load_results

SYNTAX = "loss_scaler.py has a syntax error on line 3: invalid syntax"
MISSING = "loss_scaler.py is missing: upload it at the top level of your submission."
STUB = ("ToyLossScaler(init_scale=0.0) must raise ValueError.\nbut with your code it raises NotImplementedError: "
        "ToyLossScaler.__init__ is not implemented yet: see Task 1 in README.md")
SCALER_ROWS = tuple(item for item in rubric.ITEMS if item.task == "scaler")
QUICK_ROWS = tuple(item for item in rubric.ITEMS if item.task == "quick_check")


def _runner(folder: Path, files: tuple[str, ...], faults: dict[str, str]) -> SimpleNamespace:
    folder.mkdir(parents=True, exist_ok=True)
    for name in files:
        (folder / name).write_text("# a submission file\n")
    return SimpleNamespace(submission=folder, import_faults=faults)


def _failing(items: tuple[rubric.Item, ...], message: str, cases: int = 3) -> list[judge.Outcome]:
    """Failed cases of ``items``' tests: the public checks' for a visible row, the hidden suite's otherwise."""
    return [judge.Outcome(item.test, f"{item.test}[{k}]", False, message, public=item.suite == rubric.PUBLIC)
            for item in items for k in range(cases)]


def test_a_file_that_does_not_import_is_told_once_at_the_top(tmp_path: Path) -> None:
    runner = _runner(tmp_path / "sub", ("loss_scaler.py", "amp_step.py", "answers.py"), {"loss_scaler": SYNTAX})
    report = judge.build_report(runner, SCALER_ROWS, _failing(SCALER_ROWS, SYNTAX), "", [], time.monotonic())
    assert {row.message for row in report.rows} == {
        "Not run: loss_scaler.py could not be imported (see the top of this feedback)."}
    assert report.score == 0
    assert report.notes == ["loss_scaler.py could not be imported, so every test that needs it scores 0:\n"
                            "  loss_scaler.py has a syntax error on line 3: invalid syntax"]
    assert gradescope_results(report)["output"] == (
        "About your submission:\n- loss_scaler.py could not be imported, so every test that needs it scores 0:\n"
        "  loss_scaler.py has a syntax error on line 3: invalid syntax")


def test_a_missing_file_is_named_by_intake_and_its_rows_say_so_in_one_line(tmp_path: Path) -> None:
    runner = _runner(tmp_path / "sub", ("amp_step.py",), {"loss_scaler": MISSING})
    items = SCALER_ROWS + QUICK_ROWS
    outcomes = _failing(SCALER_ROWS, MISSING) + _failing(QUICK_ROWS, "Q1 is unanswered in answers.py", cases=1)
    report = judge.build_report(runner, items, outcomes, "", ["Missing: x"], time.monotonic())
    messages = {row.item.task: row.message for row in report.rows}
    assert messages == {"scaler": "Not run: loss_scaler.py is missing (see the top of this feedback).",
                        "quick_check": "Not run: answers.py is missing (see the top of this feedback)."}
    assert report.notes == ["Missing: x"]  # intake's note names them; nothing told twice


def test_intake_names_every_missing_file_answers_included(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    staged = intake.stage(tmp_path / "empty", workdir=tmp_path)
    try:
        assert staged.notes == ["Missing: loss_scaler.py, amp_step.py, answers.py. The tests that need them score 0."]
    finally:
        shutil.rmtree(staged.folder, ignore_errors=True)


def test_a_stub_not_implemented_is_one_line_per_row_and_one_note(tmp_path: Path) -> None:
    runner = _runner(tmp_path / "sub", ("loss_scaler.py", "amp_step.py", "answers.py"), {})
    outcomes = _failing(SCALER_ROWS[:2], STUB) + [judge.Outcome(SCALER_ROWS[2].test, "x", True)]
    report = judge.build_report(runner, SCALER_ROWS[:3], outcomes, "", [], time.monotonic())
    assert [row.message for row in report.rows] == [
        "ToyLossScaler.__init__ is not implemented yet (see Task 1 in README.md)."] * 2 + [""]
    assert report.notes == ["Not implemented yet: ToyLossScaler.__init__ (Task 1). The tests that use them score 0."]


def test_the_note_is_built_from_public_tests_texts_only(tmp_path: Path) -> None:
    """The note is shown at once: a hidden test's failure text, which student code writes after it saw hidden inputs
    (here a "method" spelt from one), stays in its row, shown when the row is."""
    runner = _runner(tmp_path / "sub", ("loss_scaler.py", "amp_step.py", "answers.py"), {})
    (row,) = [item for item in SCALER_ROWS if item.number == "1.16"]  # hidden, with a public example
    told = STUB.replace("ToyLossScaler.__init__", "SECRET_1.5_0.3_3", 1)
    outcomes = _failing((row,), told, cases=1) + [judge.Outcome(row.test, row.test, False, STUB, public=True)]
    report = judge.build_report(runner, (row,), outcomes, "", [], time.monotonic())
    assert report.notes == ["Not implemented yet: ToyLossScaler.__init__ (Task 1). The tests that use them score 0."]
    assert "SECRET_1.5_0.3_3 is not implemented yet" in report.rows[0].message
    assert "SECRET" not in report.rows[0].public_failures


def test_the_short_lines_are_korean_in_korean(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from checks import words

    monkeypatch.setenv("AMP_LANGUAGE", "ko")
    # the student process sent the syntax error's record with the import's reply; the sandbox records it rendered
    record = {"id": "file.syntax", "fields": {"file": "loss_scaler.py", "line": "3", "message": "invalid syntax"}}
    fault = words.shown(SYNTAX, record)  # and so the failed rows' faults
    runner = _runner(tmp_path / "sub", ("loss_scaler.py",), {"loss_scaler": fault})
    report = judge.build_report(runner, SCALER_ROWS[:1], _failing(SCALER_ROWS[:1], fault), "", [], time.monotonic())
    assert report.rows[0].message == "실행하지 않음: loss_scaler.py를 import할 수 없습니다(이 피드백의 맨 위 참고)."
    assert report.notes[0] == ("loss_scaler.py를 import할 수 없어 이 파일이 필요한 테스트는 모두 0점입니다:\n"
                               "  loss_scaler.py의 3번째 줄에 문법 오류가 있습니다: invalid syntax")


def test_feedback_md_tells_rows_with_the_same_text_once() -> None:
    tests = [{"name": f"1.{k} Row {k}", "number": f"1.{k}", "score": 0, "max_score": 1, "status": "failed",
              "output": "Not run: loss_scaler.py is missing (see the top of this feedback)."} for k in (1, 2, 3)]
    tests.append({"name": "2.1 Other", "number": "2.1", "score": 0, "max_score": 1, "status": "failed",
                  "output": "something else"})
    entry = SimpleNamespace(results={"score": 0, "output": "Graded x.", "tests": tests}, status="graded", reason="")
    text = feedback.feedback_markdown(SimpleNamespace(name="x", submitters=[], renamed_from=""), entry)
    wrong = text.split("## What went wrong\n", 1)[1]
    assert wrong == ("\n### 1.1, 1.2, 1.3 (3 tests)\n\n```text\nNot run: loss_scaler.py is missing (see the top of "
                     "this feedback).\n```\n\n### 2.1 Other\n\n```text\nsomething else\n```\n")


def test_a_syntax_error_is_told_once_and_reads_in_a_minute(tmp_path: Path) -> None:
    broken = tmp_path / "subs" / "syntax"
    broken.mkdir(parents=True)
    for name in ("loss_scaler.py", "amp_step.py", "answers.py"):
        shutil.copy(ROOT / "solutions" / name, broken / name)
    (broken / "loss_scaler.py").write_text("class ToyLossScaler(:\n    pass\n")
    (tmp_path / "subs" / "empty").mkdir()  # a student folder with nothing in it, inside the batch (named alone on
    (tmp_path / "subs" / "partial").mkdir()  # the command line, it stops the run); one with amp_step.py alone
    shutil.copy(ROOT / "solutions" / "amp_step.py", tmp_path / "subs" / "partial" / "amp_step.py")
    done = grade([tmp_path / "subs"], tmp_path / "out", "--jobs", "1")
    assert done.returncode == 0, done.stderr[-3000:]
    results = load_results(tmp_path / "out", "syntax")
    assert results["score"] == 40  # Task 2 and the Quick Check do not need loss_scaler.py
    assert results["output"] == ("About your submission:\n- loss_scaler.py could not be imported, so every test that "
                                 "needs it scores 0:\n  loss_scaler.py has a syntax error on line 1: invalid syntax")
    feedback = (tmp_path / "out" / "syntax" / "feedback.md").read_text()
    assert feedback.count("syntax error") == 1 and len(feedback.encode()) < 4000  # was 6.2 KB, 38 repeats
    empty = load_results(tmp_path / "out", "empty")  # nothing to grade: said, no row, no score
    assert (empty["output"], empty["tests"]) == (
        "Nothing submitted: the upload holds no file to grade (no score, not a zero).", [])
    partial = load_results(tmp_path / "out", "partial")
    assert partial["output"] == ("About your submission:\n- Missing: loss_scaler.py, answers.py. "
                                 "The tests that need them score 0.")
    quick = [t["output"] for t in partial["tests"] if t["number"].startswith("3.")]
    assert quick == ["Not run: answers.py is missing (see the top of this feedback)."] * 5
    assert json.dumps(partial).count("upload it at the top level") == 0
