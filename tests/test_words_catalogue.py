"""The message catalogues as data: what a student process says travels as an id and fields and is rendered by the
judge in the run's language; a message may land in English only.

* ``checks/words.py`` (the checks' messages and the catalogued mistakes' words) and ``autograder/engine/strings.py``
  (the grader's): a Korean entry has the English entry's fields (less those only English grammar needs); an entry
  missing in Korean reads as the English one, and :func:`test_what_is_untranslated` prints what is (it never fails on
  it).
* A "Likely mistake" line looks each bug's words up when it is rendered, in the current language: no table holds them.
* A student process's messages (``words.english``) are sent with its reply (``"said"``) and rendered from the table
  (``words.hear`` then ``words.rendered``); an English sentence the processes did not say stays as it is, whatever it
  looks like, and an entry a process forged is left out without an error.
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

REFUSED = "torch.amp.GradScaler: cannot be used while loss_scaler.py runs"  # the English opening of refused.task1
#: refused.task1 said of torch.amp.GradScaler, as the judge renders it in Korean.
REFUSED_KO = ("torch.amp.GradScaler: loss_scaler.py가 실행되는 동안에는 쓸 수 없습니다. 과제 1은 손실 스케일러를 직접 "
              "작성하는 과제입니다(과제 안내서의 \"코드에서 쓸 수 없는 것\" 참고)")


@pytest.fixture(autouse=True)
def nothing_heard(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts with nothing said or heard (they are per process)."""
    monkeypatch.setattr(words, "heard", {})
    words.take_said()


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
                     "said": [{"id": "file.missing", "fields": {"file": "loss_scaler.py"}}]}
    assert serve.said({"ok": 1}) == {"ok": 1}  # nothing said since: no "said"


def test_a_scenario_that_stops_outside_any_call_says_so_by_id(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What ends a scenario outside the student's calls (here arguments it cannot run) is a student process's message,
    sent as its id and fields, so a Korean student reads it in Korean."""
    (tmp_path / "loss_scaler.py").write_text("class ToyLossScaler:\n    pass\n")
    reply = serve.answer({"scenario": "scaler_ops", "args": {"ops": []}}, harness.Submission(tmp_path))
    assert reply == {"fault": "the scenario stopped with KeyError: 'world'",
                     "said": [{"id": "scenario.stopped", "fields": {"error": "KeyError", "message": "'world'"}}]}
    monkeypatch.setenv(words.ENV, "ko")
    words.hear(reply["said"])
    assert words.rendered(f"```text\n{reply['fault']}\n```") == "```text\nKeyError: 'world' 때문에 시나리오가 멈췄습니다\n```"


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


def test_the_judge_renders_what_was_said_in_its_language(monkeypatch: pytest.MonkeyPatch) -> None:
    refused = words.english("refused.task1", what="torch.amp.GradScaler")  # as the student process says it
    missing = words.english("file.missing", file="amp_step.py")
    said = words.take_said()
    assert said == [{"id": "refused.task1", "fields": {"what": "torch.amp.GradScaler"}},
                    {"id": "file.missing", "fields": {"file": "amp_step.py"}}]
    trace = f"  loss_scaler.py, line 3, in <module>\nNotAvailableInTask1: {refused}\n"
    monkeypatch.setenv(words.ENV, "ko")
    assert words.rendered(trace + missing) == trace + missing  # not heard: stays English
    words.hear(json.loads(json.dumps(said)))  # through the pipe
    assert words.rendered(trace + missing) == (
        "  loss_scaler.py, line 3, in <module>\nNotAvailableInTask1: " + REFUSED_KO
        + "\namp_step.py 파일이 없습니다. 제출물의 최상위에 올리세요.")
    monkeypatch.setenv(words.ENV, "en")
    assert words.rendered(trace + missing) == trace + missing  # English: byte for byte


def test_nothing_is_recognised_from_english_words(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same sentence with other fields than the ones said stays English: no pattern is made of the template."""
    words.hear([{"id": "file.missing", "fields": {"file": "amp_step.py"}}])
    monkeypatch.setenv(words.ENV, "ko")
    other = "loss_scaler.py is missing: upload it at the top level of your submission."
    assert words.rendered(other) == other
    assert words.rendered("amp_step.py is missing: upload it at the top level of your submission.") == \
        "amp_step.py 파일이 없습니다. 제출물의 최상위에 올리세요."


def test_refusals_inside_an_import_fault_are_rendered_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """A refusal quoted in an import's traceback: the outer message and the inner one."""
    inner = words.english("refused.task1", what="torch.amp.GradScaler")
    outer = words.english("file.import_raised", file="loss_scaler.py",
                          frames=f"  loss_scaler.py, line 1\nNotAvailableInTask1: {inner}")
    reply = serve.said({"imported": "loss_scaler", "fault": outer})
    monkeypatch.setenv(words.ENV, "ko")
    words.hear(reply["said"])
    assert words.rendered(outer) == (
        "loss_scaler.py를 import하는 중에 예외가 발생했습니다:\n  loss_scaler.py, line 1\nNotAvailableInTask1: "
        + REFUSED_KO)
    cut = outer.split("\n", 1)[0] + "\n  loss_scaler.py, li"  # cut short after its first line
    assert words.rendered(cut) == "loss_scaler.py를 import하는 중에 예외가 발생했습니다:\n  loss_scaler.py, li"


def test_a_message_with_a_very_long_field_has_its_first_line_rendered(monkeypatch: pytest.MonkeyPatch) -> None:
    frames = "  loss_scaler.py, line 2, in f\n    f()\n" * 200 + "RecursionError: maximum recursion depth exceeded"
    text = words.english("file.import_raised", file="loss_scaler.py", frames=frames)
    assert text == f"importing loss_scaler.py raised an exception:\n{frames}"  # what the process says is whole
    said = words.take_said()
    assert len(said[0]["fields"]["frames"]) == words.FIELD_LIMIT < len(frames)
    monkeypatch.setenv(words.ENV, "ko")
    words.hear(said)
    assert words.rendered(text) == f"loss_scaler.py를 import하는 중에 예외가 발생했습니다:\n{frames}"


@pytest.mark.parametrize("said", [
    [{"id": "internal", "fields": {}}],  # the grader's message
    [{"id": "do.run", "fields": {}}],  # the checks' message, but not a student process's
    [{"id": "file.missing", "fields": {"file": "x.py", "extra": "1"}}],
    [{"id": "file.missing", "fields": {}}],
    [{"id": "file.missing", "fields": {"file": 3}}],
    [{"id": "file.missing", "fields": {"file": "x" * (words.FIELD_LIMIT + 1)}}],
    [{"id": ["file.missing"], "fields": {"file": "x.py"}}],
    [{"id": "file.missing", "fields": ["x.py"]}],
    ["file.missing"], {"id": "file.missing"}, None, 7,
])
def test_a_forged_said_is_left_out(said: object, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(words.ENV, "ko")
    words.hear(said)
    text = "x.py is missing: upload it at the top level of your submission."
    assert words.rendered(text) == text and words.heard == {}


def test_a_new_submission_starts_with_nothing_heard(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What one submission's processes said is not rendered in the next one's feedback (the same worker grades both)."""
    from autograder.sandbox import runner as sandbox

    monkeypatch.setenv(words.ENV, "ko")
    words.hear([{"id": "file.missing", "fields": {"file": "amp_step.py"}}])
    forged = "amp_step.py is missing: upload it at the top level of your submission."  # the next submission's own text
    assert words.rendered(forged) != forged
    sandbox.SandboxRunner(tmp_path).close()
    assert words.rendered(forged) == forged


def test_what_is_heard_is_bounded() -> None:
    words.hear([{"id": "file.missing", "fields": {"file": f"{n}.py"}} for n in range(words.SAID_LIMIT + 5)])
    assert len(words.heard) == words.SAID_LIMIT  # a reply names at most SAID_LIMIT
    for start in range(0, words.HEARD_LIMIT + 40, words.SAID_LIMIT):
        words.hear([{"id": "refused.task1", "fields": {"what": f"c{start + n}"}} for n in range(words.SAID_LIMIT)])
    assert len(words.heard) == words.HEARD_LIMIT


def test_a_failed_check_renders_what_the_process_said(monkeypatch: pytest.MonkeyPatch) -> None:
    """``expect.fail`` (the judge's and the public checks') renders the quoted refusal in the student's language."""
    refused = words.english("refused.task1", what="torch.amp.GradScaler")
    words.hear(words.take_said())
    message = f"{words.EN['what.defaults']}\nbut your code raised NotAvailableInTask1: {refused}"
    monkeypatch.setenv(words.ENV, "en")
    with pytest.raises(AssertionError) as english:
        expect.fail(message)
    assert str(english.value) == message
    monkeypatch.setenv(words.ENV, "ko")
    with pytest.raises(AssertionError) as korean:
        expect.fail(message)
    assert str(korean.value).endswith("NotAvailableInTask1: " + REFUSED_KO)


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
