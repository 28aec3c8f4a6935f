"""The Korean edition end to end, and the English one unchanged.

* Korean (``--language ko``): every failing row's prose is at least half Hangul, and so are summary.md,
  report.html (``lang="ko"``), similarity.html (its code aside) and the console table; a submission with nothing to say about it has no "about
  your submission" section.  "Prose" leaves out what stays as it is in every language: code (a snippet, a
  traceback, the call made), inline code, values, identifiers and exceptions quoted from torch or the student's
  code.  ``make test`` grades three catalogue bugs that reach the three kinds of explanation (a scaler snippet, an
  amp_step's effects, torch's scaler refused in the student process) and the solution; the whole catalogue is
  left to ``make test-all``.
* English: the bundled examples' feedback.md are byte for byte the golden files in ``tests/golden/en/``,
  written by the grader as it was before the Korean edition (regenerate them only for an intended English change:
  ``make golden``, which grades them as the tests do, and review the diff).
* The checks' words table (``checks/words.py``): Korean mistake words name catalogued mistakes; the tables' fields,
  what is untranslated and the student processes' messages are ``tests/test_words_catalogue.py``'s.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from autograder.engine import strings
from checks import words
from conftest import EXAMPLES, ROOT, built_once, grade

GOLDEN = ROOT / "tests" / "golden" / "en"
HANGUL = re.compile(r"[\uac00-\ud7a3]")
#: A word holding any of these is code or a value (``scale()``, ``1.5``, ``torch.float16``, ``'C'``), not prose.
CODE_CHARACTERS = re.compile(r"[._()\[\]{}=<>/'\"`:0-9*+\-#|\\,;!?@$%^&~]")
#: Values written as words (Python's and the tensors').
VALUE_WORDS = frozenset({"inf", "nan", "NaN", "None", "True", "False"})
#: An exception quoted from torch or the student's code, with its message (to the end of the clause).
QUOTED_EXCEPTION = re.compile(r"\b\w+(?:Error|Exception|Warning|Task1): [^)\n]*")
#: Three bugs whose rows explain with a scaler snippet, an amp_step's effects and torch's scaler refused.
REPRESENTATIVE_BUGS = ("growth_to_inf", "model_half", "delegate_wrapper")


def prose(text: str) -> str:
    """``text`` without code, inline code and quoted exceptions (see the module docstring)."""
    kept = []
    for line in text.splitlines():
        if line[:1] == " " and not HANGUL.search(line):  # an indented line with no Hangul: a snippet, a traceback
            continue
        if line[:1] == " " and "  # " in line:  # a snippet's line with a comment: only the comment is prose
            line = line.split("  # ", 1)[1]
        line = QUOTED_EXCEPTION.sub(" ", re.sub(r"`[^`]*`", " ", line))
        kept.append(line)
    return " ".join(kept)


def hangul_share(text: str) -> float:
    """Hangul syllables among the letters of ``text``'s prose words (1.0 when it has none)."""
    words_ = prose(text).split()
    hangul = sum(len(HANGUL.findall(word)) for word in words_)
    latin = sum(len(re.findall(r"[A-Za-z]", word)) for word in words_
                if not HANGUL.search(word) and not CODE_CHARACTERS.search(word) and word not in VALUE_WORDS)
    return hangul / (hangul + latin) if hangul + latin else 1.0


def html_text(page: str) -> str:
    """What a reader of ``page`` sees: no style, tags or inlined images."""
    return re.sub(r"<style>.*?</style>|<[^>]+>|data:[^\"]*", " ", page, flags=re.DOTALL)


def _catalogue() -> Any:
    spec = importlib.util.spec_from_file_location("amp_catalogue_ko", ROOT / "tests" / "catalogue" / "catalogue.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules[spec.name] = module  # type: ignore[union-attr]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def _grade_korean(factory: pytest.TempPathFactory, name: str, entries: list[Any]) -> Path:
    """The Korean batch of ``entries`` and the solution (graded once per run): its output folder."""
    catalogue = _catalogue()

    def build(out: Path) -> None:
        paths = [catalogue.materialize(entry, out / "submissions" / entry.folder_name) for entry in entries]
        done = grade([*paths, EXAMPLES["solutions"]], out / "grades", "--language", "ko", timeout=3600,
                     env={"AMP_DIAGNOSIS": ""})  # the committed table: the "Likely mistake" lines in Korean
        assert done.returncode == 0, done.stderr[-3000:]
        (out / "console.txt").write_text(done.stdout, encoding="utf-8")

    return built_once(factory, name, build)


def korean_problems(out: Path) -> list[str]:
    """Every file or failing row of the Korean batch in ``out`` whose prose is less than half Hangul."""
    grades, problems = out / "grades", []
    for results in sorted(grades.glob("*/results.json")):
        data = json.loads(results.read_text(encoding="utf-8"))
        texts = {f"row {test['number']}": test["output"] for test in data["tests"] if test.get("status") == "failed"}
        if not strings.is_graded_note(data["output"]):  # "NAME 채점을 마쳤습니다.", which feedback.md leaves out
            texts["top of the feedback"] = data["output"]
        for where, text in texts.items():
            if text and hangul_share(text) < 0.5:
                problems.append(f"{results.parent.name}, {where} ({hangul_share(text):.0%} Hangul):\n{text[:1500]}")
    similar = re.sub(r"<pre.*?</pre>", " ", (grades / "similarity.html").read_text(encoding="utf-8"), flags=re.DOTALL)
    for name, text in (("summary.md", (grades / "summary.md").read_text(encoding="utf-8")),
                       ("report.html", html_text((grades / "report.html").read_text(encoding="utf-8"))),
                       ("similarity.html", html_text(similar)),  # its code aside
                       ("the console table", (out / "console.txt").read_text(encoding="utf-8"))):
        if hangul_share(text) < 0.5:
            problems.append(f"{name} ({hangul_share(text):.0%} Hangul)")
    return problems


@pytest.fixture(scope="module")
def korean_batch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    entries = [entry for entry in _catalogue().BUGS if entry.name in REPRESENTATIVE_BUGS]
    assert len(entries) == len(REPRESENTATIVE_BUGS)
    return _grade_korean(tmp_path_factory, "korean-batch", entries)


# --------------------------------------------------------------------------- the prose measure itself


def test_the_measure_leaves_code_values_and_quoted_exceptions_aside() -> None:
    assert hangul_share("스케일은 그대로 남습니다.\n    scaler = ToyLossScaler(init_scale=2.0)\n`scale()` inf 0") == 1.0
    assert hangul_share("여러분의 코드의 결과: ValueError: Attempting to unscale FP16 gradients.") == 1.0
    assert hangul_share("A growth that would overflow float32 must be skipped.") == 0.0
    assert hangul_share("the last line should: print 1.0 0") == 0.0
    assert 0.4 < hangul_share("스케일 스케일 the the") < 0.6


# --------------------------------------------------------------------------- Korean


def test_korean_batch_speaks_korean(korean_batch: Path) -> None:
    problems = korean_problems(korean_batch)
    assert not problems, "\n\n".join(problems)


def test_korean_batch_frames_and_pointers(korean_batch: Path) -> None:
    grades = korean_batch / "grades"
    page = (grades / "report.html").read_text(encoding="utf-8")
    assert '<html lang="ko">' in page and "가로축은 점수(90점 만점), 세로축은 제출물 수(모두 4개)입니다." in page
    assert "<html lang='ko'>" in (grades / "similarity.html").read_text(encoding="utf-8")
    clean = (grades / "solutions" / "feedback.md").read_text(encoding="utf-8")
    assert clean.startswith("# 피드백: solutions\n")
    assert "## 제출물에 대한 안내" not in clean and "채점을 마쳤습니다" not in clean  # nothing to say: no section
    refused = (grades / "bug-delegate_wrapper" / "feedback.md").read_text(encoding="utf-8")
    assert '"코드에서 쓸 수 없는 것"' in refused and "What your code may not use" not in refused
    handout = (ROOT / "assignment" / "README.ko.md").read_text(encoding="utf-8")
    assert "\n## 코드에서 쓸 수 없는 것\n" in handout  # the heading the refusal names
    assert "예상되는 실수:" in refused and "Likely mistake" not in refused  # diagnosed in Korean
    summary = (grades / "summary.md").read_text(encoding="utf-8")
    assert "| 1.8 | update(): inf로 성장하지 않음 |" in summary  # the language's row titles, as in report.html


def test_every_catalogue_bug_speaks_korean(tmp_path_factory: pytest.TempPathFactory) -> None:
    out = _grade_korean(tmp_path_factory, "korean-catalogue", list(_catalogue().BUGS))
    problems = korean_problems(out)
    assert not problems, "\n\n".join(problems)


# --------------------------------------------------------------------------- English, unchanged


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_english_feedback_is_unchanged(graded_examples: dict[str, Any], tmp_path_factory: pytest.TempPathFactory,
                                       name: str) -> None:
    out = built_once(tmp_path_factory, "graded-examples", lambda _: None)  # graded by the fixture
    feedback = (out / name / "feedback.md").read_text(encoding="utf-8")
    assert feedback == (GOLDEN / f"{name}.feedback.md").read_text(encoding="utf-8")


# --------------------------------------------------------------------------- the words table (test_words_catalogue.py)


def test_mistake_words_name_catalogued_mistakes() -> None:
    """Every catalogued mistake has English words; one without Korean words reads as its English ones
    (test_words_catalogue.py lists it); no words outlive their mistake."""
    bugs = {entry.name for entry in _catalogue().BUGS}
    assert set(words.MISTAKES["en"]) == bugs
    assert set(words.MISTAKES["ko"]) <= bugs


def test_a_built_graders_language_reaches_the_checks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Gradescope zip names its language only in language.json: the grader exports it before its student
    processes start, so the checks' messages (which read $AMP_LANGUAGE) speak it too."""
    from autograder.engine import grader

    monkeypatch.setenv(words.ENV, "en")  # recorded, so that what export_language sets is undone afterwards
    monkeypatch.delenv(words.ENV)
    monkeypatch.setattr(strings, "LANGUAGE_FILE", tmp_path / "language.json")
    grader.export_language()
    assert words.ENV not in os.environ  # no file: English, nothing exported
    (tmp_path / "language.json").write_text('{"language": "ko"}', encoding="utf-8")
    grader.export_language()
    assert words.language() == "ko" and words.say("do.run") == "오류 없이 실행"
    monkeypatch.setenv(words.ENV, "en")  # a setting wins over the file
    grader.export_language()
    assert words.language() == "en"


def test_an_unknown_language_reads_as_english_in_the_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(words.ENV, "fr")
    assert words.say("do.raise", error="ValueError") == "raise ValueError"
    monkeypatch.setenv(words.ENV, " ko ")
    assert words.say("do.raise", error="ValueError") == "ValueError 발생"


# --------------------------------------------------------------------------- the console, and a page rebuilt


def test_the_runs_console_lines_speak_the_batchs_language(monkeypatch: pytest.MonkeyPatch) -> None:
    from autograder.batch import console

    monkeypatch.setenv("AMP_LANGUAGE", "ko")
    assert console.plan_line(3, 1, 0, {"new": 1, "changed": 1}, 2, []) == (
        "제출물 3개: 이미 채점됨 1개, 채점할 것 2개(새 제출물 1개, 지난 채점 뒤 파일이 바뀜 1개), 작업자 2개로.")
    assert strings.text("console.isolation", level="sealed") == "이 기계에서 학생 코드의 격리 수준: sealed"
    monkeypatch.setenv("AMP_LANGUAGE", "en")
    assert console.plan_line(3, 1, 0, {"new": 1, "changed": 1}, 2, []) == (
        "3 submission(s): 1 already graded, 2 to grade (1 new, 1 changed since their last grading) with 2 worker(s).")


@pytest.mark.parametrize("batch, page, said", [
    ("ko", "en", "This page is in English, its batch was graded in Korean: the row titles, notes and feedback it "
                 "quotes are in Korean. For one language, rebuild it with AMP_LANGUAGE=ko python -m autograder report "
                 "OUT."),
    ("en", "ko", "이 페이지는 한국어로 썼지만 일괄 채점은 영어로 했습니다."),
    ("en", "en", None), ("", "ko", None)])  # a summary.json written before it said its language: nothing to say
def test_a_report_rebuilt_in_another_language_says_so_at_the_top(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 batch: str, page: str, said: str | None) -> None:
    from autograder.diagnosis import report_html

    (tmp_path / "gradebook.csv").write_text("submission,score,max_score,status\nalice,90,90,graded\n")
    (tmp_path / "summary.json").write_text(json.dumps({"submissions": 1, "graded": 1, "max_score": 90,
                                                       **({"language": batch} if batch else {})}))
    monkeypatch.setenv("AMP_LANGUAGE", page)
    report_html.write(tmp_path)
    html = (tmp_path / "report.html").read_text(encoding="utf-8")
    top = html.split("</h1>", 1)[1].split("<section", 1)[0]
    if said is None:
        assert top == ""
    else:
        assert top.startswith('<p class="flag" id="other-language">') and said in top
