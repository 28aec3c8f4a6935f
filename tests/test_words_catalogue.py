"""The message catalogues as data: what a student process says travels as an id and fields and is rendered by the
judge in the run's language; a message may land in English only.

* ``checks/words.py`` (the checks' messages and the catalogued mistakes' words) and ``autograder/engine/strings.py``
  (the grader's): a Korean entry has the English entry's fields (less those only English grammar needs); an entry
  missing in Korean reads as the English one, and :func:`test_what_is_untranslated` prints what is (it never fails on
  it).
* A "Likely mistake" line looks each bug's words up when it is rendered, in the current language: no table holds them.
* A student process's message (``words.english``) carries its record (id and fields), sent beside its text (a fault's
  ``"said"``, an error record's ``"said"``) and rendered from the table where the text stands (``words.shown``,
  ``words.quoted``); a text without a record stays as it is, whatever it looks like, and a record a process forged is
  left out without an error.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autograder.diagnosis import page_words
from autograder.engine import judge_words, rubric, strings
from checks import words
from checks.judge import cases, diagnose, expect
from checks.runners import harness
from checks.student import serve
from conftest import ROOT

REFUSED = "torch.amp.GradScaler is not available while loss_scaler.py runs"  # the English opening of refused.task1
#: refused.task1 said of torch.amp.GradScaler, as the judge renders it in Korean.
REFUSED_KO = ("torch.amp.GradScaler: loss_scaler.py가 실행되는 동안에는 쓸 수 없습니다. 과제 1은 손실 스케일러를 직접 "
              "작성하는 과제입니다(과제 안내서의 \"코드에서 쓸 수 없는 것\" 참고)")


def _tables() -> dict[str, tuple[dict[str, str], dict[str, str]]]:
    return {"checks/words.py": (words.EN, words.KO),
            "checks/words.py MISTAKES": (words.MISTAKES["en"], words.MISTAKES["ko"]),
            "engine/strings.py": (strings.MESSAGES["en"], strings.MESSAGES["ko"]),
            "engine/judge_words.py": (judge_words.EN, judge_words.KO),
            "diagnosis/page_words.py": (page_words.WORDS["en"], page_words.WORDS["ko"])}


# --------------------------------------------------------------------------- English only, and fields


def test_a_korean_entry_has_the_english_entrys_fields() -> None:
    wrong = []
    for where, (english, korean) in _tables().items():
        assert set(korean) <= set(english), f"{where}: Korean entries with no English one: {set(korean) - set(english)}"
        for key, text in korean.items():
            if words.placeholders(text) != words.placeholders(english[key]) - (
                    words.ENGLISH_ONLY_FIELDS & words.placeholders(english[key]) - words.placeholders(text)):
                wrong.append(f"{where} {key}: {sorted(words.placeholders(text))} against the English "
                             f"{sorted(words.placeholders(english[key]))}")
    assert not wrong, "\n".join(wrong)


def test_what_is_untranslated(capsys: pytest.CaptureFixture[str]) -> None:
    """Lists the messages with no Korean entry yet (they read as English in the Korean build); never fails on them."""
    missing = [f"{where}: {key}" for where, (english, korean) in _tables().items()
               for key in english if key not in korean]
    missing += [f"row title: {item.number}" for item in rubric.ITEMS if strings.title(item, "ko") == item.title]
    with capsys.disabled():
        print(f"\n{len(missing)} message(s) without Korean" + "".join(f"\n  {line}" for line in missing))


def test_a_message_missing_in_korean_reads_as_english(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(words.ENV, "ko")
    monkeypatch.delitem(words.KO, "do.raise")
    monkeypatch.delitem(strings.MESSAGES["ko"], "passed")
    monkeypatch.delitem(page_words.WORDS["ko"], "title")
    assert words.say("do.raise", error="ValueError") == "raise ValueError"
    assert words.say("do.run") == "오류 없이 실행"  # the others stay Korean
    assert strings.text("passed") == "Passed."
    assert strings.template("ko", "passed") == "Passed."
    assert page_words.word("title") == "Class report" and page_words.word("scores") != "Scores"
    assert "otter.check_failed" in judge_words.KO and judge_words.template("otter.check_failed", "ko") == "실패"


def test_a_mistake_is_worded_when_its_line_is_rendered(monkeypatch: pytest.MonkeyPatch) -> None:
    """The words are the catalogue's at render time, in the current language; a bug with no Korean words reads
    English inside the Korean line; one with no words at all, its name."""
    monkeypatch.setenv(words.ENV, "en")
    assert diagnose.sentence(["backoff_divides"]) == (
        "Likely mistake: this is what happens when the scale is divided by backoff_factor instead of multiplied by it.")
    monkeypatch.setitem(words.MISTAKES["en"], "backoff_divides", "the scale is divided")  # no table rebuilt
    assert diagnose.sentence(["backoff_divides"]) == "Likely mistake: this is what happens when the scale is divided."
    monkeypatch.setenv(words.ENV, "ko")
    assert diagnose.sentence(["backoff_divides"]) == "예상되는 실수: 스케일에 backoff_factor를 곱하지 않고 나눌 때 이런 결과가 나옵니다."
    monkeypatch.delitem(words.MISTAKES["ko"], "backoff_divides")
    assert diagnose.sentence(["backoff_divides"]) == "예상되는 실수: the scale is divided 때 이런 결과가 나옵니다."
    assert diagnose.described(["no_such_bug", "backoff_divides"]) == "the scale is divided, 또는 no such bug"


def test_a_korean_entry_with_a_field_english_lacks_fails_the_fields_test(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(words.KO, "do.raise", "{error} 발생 ({value})")
    with pytest.raises(AssertionError, match="do.raise"):
        test_a_korean_entry_has_the_english_entrys_fields()
    monkeypatch.setitem(words.KO, "do.raise", "발생")  # a field left out
    with pytest.raises(AssertionError, match="do.raise"):
        test_a_korean_entry_has_the_english_entrys_fields()


# --------------------------------------------------------------------------- what a student process says


def test_a_student_process_sends_its_messages_as_ids_and_fields(tmp_path: Path) -> None:
    reply = serve.answer({"scenario": "scaler_ops", "args": {"ops": []}}, harness.Submission(tmp_path))
    assert reply == {"fault": "loss_scaler.py is missing: upload it at the top level of your submission.",
                     "said": {"id": "file.missing", "fields": {"file": "loss_scaler.py"}}}
    assert serve.fault(harness.SubmissionFault("no message of theirs")) == {"fault": "no message of theirs"}


def test_a_scenario_that_stops_outside_any_call_says_so_by_id(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What ends a scenario outside the student's calls (here arguments it cannot run) is a student process's message,
    sent as its id and fields, so a Korean student reads it in Korean."""
    (tmp_path / "loss_scaler.py").write_text("class ToyLossScaler:\n    pass\n")
    reply = serve.answer({"scenario": "scaler_ops", "args": {"ops": []}}, harness.Submission(tmp_path))
    assert reply == {"fault": "the scenario stopped with KeyError: 'world'",
                     "said": {"id": "scenario.stopped", "fields": {"error": "KeyError", "message": "'world'"}}}
    monkeypatch.setenv(words.ENV, "ko")
    assert words.shown(reply["fault"], reply["said"]) == "KeyError: 'world' 때문에 시나리오가 멈췄습니다"


def test_sys_exit_in_a_students_method_is_that_calls_error(tmp_path: Path) -> None:
    """In a real training loop ``sys.exit`` in a scaler's method ends the program: the call raised, which torch's
    scaler never does; the scenario goes on and the row shows the call (not a scenario that merely stopped)."""
    (tmp_path / "loss_scaler.py").write_text(
        "import sys\n\nclass ToyLossScaler:\n    def __init__(self, *args, **kwargs):\n        sys.exit(3)\n")
    call = {"scenario": "scaler_ops", "args": {"world": cases.world([[[2]]]), "ops": [{"op": "new", "kwargs": {}}]}}
    reply = serve.answer(call, harness.Submission(tmp_path))
    assert list(reply) == ["ok"]
    [error] = [result["error"] for result in reply["ok"]]
    assert (error["type"], error["message"]) == ("SystemExit", "3") and "sys.exit(3)" in error["trace"]


REFUSING = "from checks.student import absence\n\nabsence.GradScaler()\n"  # what a refused use of torch's scaler raises


def _refused_call(tmp_path: Path) -> dict[str, object]:
    """The error record of a call that torch's (refused) scaler ended in Task 1, as it comes through the pipe."""
    (tmp_path / "loss_scaler.py").write_text(
        "from checks.student import absence\n\nclass ToyLossScaler:\n    def __init__(self, *args, **kwargs):\n"
        "        absence.GradScaler()\n")
    call = {"scenario": "scaler_ops", "args": {"world": cases.world([[[2]]]), "ops": [{"op": "new", "kwargs": {}}]}}
    [result] = json.loads(json.dumps(serve.answer(call, harness.Submission(tmp_path))))["ok"]
    return result["error"]


def test_the_judge_renders_what_was_said_in_its_language(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A refusal raised in a student's call: its error record carries the message's record, rendered as the message
    and where the traceback ends with it; in English every field is what the process sent, byte for byte."""
    error = _refused_call(tmp_path)
    assert error["said"] == {"id": "refused.task1", "fields": {"what": "torch.amp.GradScaler"}}
    assert error["message"].startswith(REFUSED) and error["trace"].endswith("NotAvailableInTask1: " + error["message"])
    monkeypatch.setenv(words.ENV, "en")
    assert words.quoted(error) == {"error": "NotAvailableInTask1", "message": error["message"], "trace": error["trace"]}
    monkeypatch.setenv(words.ENV, "ko")
    quoted = words.quoted(error)
    assert quoted["message"] == REFUSED_KO
    assert quoted["trace"] == error["trace"][:-len(error["message"])] + REFUSED_KO
    assert words.error_text(error) == "NotAvailableInTask1: " + REFUSED_KO


def test_nothing_is_recognised_from_english_words(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A text without a record stays English, the very words of a message included: nothing is looked up by them,
    and nothing rendered before is remembered."""
    monkeypatch.setenv(words.ENV, "ko")
    missing = words.english("file.missing", file="amp_step.py")
    assert words.shown(missing) == "amp_step.py 파일이 없습니다. 제출물의 최상위에 올리세요."
    assert words.shown(str(missing)) == str(missing)  # the same words, without their record
    error = {key: value for key, value in _refused_call(tmp_path).items() if key != "said"}
    assert words.quoted(error) == {"error": "NotAvailableInTask1", "message": error["message"], "trace": error["trace"]}


def test_refusals_inside_an_import_fault_are_rendered_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A refusal at the end of an import's traceback: the outer message and the inner one, each from its record."""
    (tmp_path / "loss_scaler.py").write_text(REFUSING)
    reply = json.loads(json.dumps(serve.answer({"scenario": "scaler_ops", "args": {"ops": []}},
                                               harness.Submission(tmp_path))))
    frames = "  loss_scaler.py, line 3, in <module>\n    absence.GradScaler()\nNotAvailableInTask1: "
    assert reply["fault"].startswith("importing loss_scaler.py raised an exception:\n" + frames + REFUSED)
    assert reply["said"]["fields"]["frames"]["text"] == frames
    monkeypatch.setenv(words.ENV, "ko")
    assert words.shown(reply["fault"], reply["said"]) == (
        "loss_scaler.py를 import하는 중에 예외가 발생했습니다:\n" + frames + REFUSED_KO)


def test_a_message_with_a_very_long_field_is_rendered_with_the_field_cut(monkeypatch: pytest.MonkeyPatch) -> None:
    frames = "  loss_scaler.py, line 2, in f\n    f()\n" * 200 + "RecursionError: maximum recursion depth exceeded"
    text = words.english("file.import_raised", file="loss_scaler.py", frames=frames)
    assert text == f"importing loss_scaler.py raised an exception:\n{frames}"  # what the process says is whole
    assert len(text.record["fields"]["frames"]) == words.FIELD_LIMIT < len(frames)
    monkeypatch.setenv(words.ENV, "ko")
    assert words.shown(text) == f"loss_scaler.py를 import하는 중에 예외가 발생했습니다:\n{frames[:words.FIELD_LIMIT]}"


def _nested(depth: int) -> dict[str, object]:
    record: dict[str, object] = {"id": "refused.task1", "fields": {"what": "x"}}
    for _ in range(depth):
        record = {"text": "t", "then": record}
    return record


@pytest.mark.parametrize("said", [
    {"id": "internal", "fields": {}},  # the grader's message
    {"id": "do.run", "fields": {}},  # the checks' message, but not a student process's
    {"id": "file.missing", "fields": {"file": "x.py", "extra": "1"}},
    {"id": "file.missing", "fields": {}},
    {"id": "file.missing", "fields": {"file": 3}},
    {"id": "file.missing", "fields": {"file": "x" * (words.FIELD_LIMIT + 1)}},
    {"id": ["file.missing"], "fields": {"file": "x.py"}},
    {"id": "file.missing", "fields": ["x.py"]},
    {"id": "file.missing", "fields": {"file": "x.py"}, "extra": 1},
    {"id": "file.missing", "fields": {"file": {"text": "x", "then": "y.py"}}},  # "then" names no message
    {"id": "file.missing", "fields": {"file": _nested(words.DEPTH_LIMIT)}},  # too deep
    "file.missing", ["file.missing"], {"id": "file.missing"}, 7,
])
def test_a_forged_said_is_left_out(said: object, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(words.ENV, "ko")
    text = "x.py is missing: upload it at the top level of your submission."
    assert words.shown(text, said) == text
    assert words.quoted({"type": "E", "message": text, "trace": text, "said": said}) == \
        {"error": "E", "message": text, "trace": text}


def test_a_failed_check_renders_what_the_process_said(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A check that quotes a refused call (the judge's and the public checks') quotes it in the student's language."""
    result = {"error": _refused_call(tmp_path)}
    what = words.EN["what.defaults"]
    monkeypatch.setenv(words.ENV, "en")
    with pytest.raises(AssertionError) as english:
        expect.ok_or_fail(result, what)
    error = result["error"]
    assert str(english.value) == f"{what}\nbut your code raised NotAvailableInTask1: {error['message']}\n{error['trace']}"
    monkeypatch.setenv(words.ENV, "ko")
    with pytest.raises(AssertionError) as korean:
        expect.ok_or_fail(result, what)
    assert str(korean.value).count(REFUSED_KO) == 2 and REFUSED not in str(korean.value)


def test_the_public_checks_render_a_fault_in_the_students_language(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from checks.plugin import LocalRunner

    monkeypatch.setenv(words.ENV, "ko")
    runner = LocalRunner(tmp_path)
    try:
        with pytest.raises(harness.SubmissionFault) as fault:
            runner.run("scaler_ops", {"ops": []})
    finally:
        runner.close()
    assert str(fault.value) == "loss_scaler.py 파일이 없습니다. 제출물의 최상위에 올리세요."


def test_the_messages_written_out_in_given_tests_are_the_tables(monkeypatch: pytest.MonkeyPatch) -> None:
    import ast

    root = Path(__file__).resolve().parent.parent / "assignment" / "checks"
    literals = {node.value for node in ast.walk(ast.parse((root / "test_public_scaler.py").read_text(encoding="utf-8")))
                if isinstance(node, ast.Constant)}
    assert words.EN["what.scale"] in literals and words.EN["what.unscale"] in literals
    monkeypatch.setenv(words.ENV, "ko")
    assert words.localised(words.EN["what.unscale"]) == words.KO["what.unscale"]
    written = words.EN["gpu.scaler"].format(kind=repr("cuda"))  # as test_gpu.py's f-string writes it
    assert words.localised(written) == words.KO["gpu.scaler"].format(kind=repr("cuda"))
    assert words.localised("some other text") == "some other text"


def test_what_only_the_grader_says_ships_nowhere() -> None:
    """The grader's own messages (a configuration in words, a masked Task-2 row, the underflow replay, the hidden
    Quick Check, otter's test files, the diagnosis report's column) are in its table alone: none is in the checks'
    table, which ships to students, nor named there; and no message of the checks' table is named by the grader
    alone (one named only by its id's parts, as ``amp.right.<key>``, is named by neither)."""
    assert not set(judge_words.EN) & set(words.EN)
    assert set(judge_words.KO) == set(judge_words.EN)
    shipped = _named_in(ROOT / "assignment")
    assert not [key for key in judge_words.EN if f'"{key}"' in shipped]
    said_by_checks = _named_in(ROOT / "assignment", but=ROOT / "assignment" / "checks" / "words.py")
    grader = _named_in(ROOT / "autograder")
    assert not [key for key in words.EN if f'"{key}"' not in said_by_checks and f'"{key}"' in grader]


def _named_in(folder: Path, but: Path | None = None) -> str:
    return "\n".join(path.read_text(encoding="utf-8") for path in sorted(folder.rglob("*.py")) if path != but)
