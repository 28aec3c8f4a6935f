"""Feedback in the handout's languages: one table of strings (autograder/engine/strings.py).

* the table is complete: every language has every message with the same fields, and a Korean
  title for every rubric row; English titles are rubric.py's own;
* results.json in Korean differs from the English one only in its texts (names and outputs):
  scores, numbers, statuses and visibility are the same;
* a Gradescope zip built with ``--language ko`` grades the solution 90 with Korean row titles,
  and an English build carries no language file (English stays the default).
"""

from __future__ import annotations

import json
import string
import zipfile
from pathlib import Path
from typing import Any

import pytest

from autograder import settings
from autograder.engine import judge, results, rubric, strings
from autograder.packaging.gradescope import build
from test_gradescope import simulate
from conftest import ROOT

ALL_ITEMS = rubric.ITEMS + rubric.GPU_ITEMS


def _fields(template: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(template) if name}


def test_every_language_has_every_message_with_the_same_fields() -> None:
    english = strings.MESSAGES[strings.DEFAULT]
    for code, messages in strings.MESSAGES.items():
        assert messages.keys() == english.keys(), code
        for key, template in messages.items():
            assert _fields(template) == _fields(english[key]), f"{code}:{key}"


def test_every_rubric_row_has_a_title_in_every_language(monkeypatch: pytest.MonkeyPatch) -> None:
    for code in strings.LANGUAGES:
        monkeypatch.setenv(settings.LANGUAGE.env, code)
        titles = [strings.title(item) for item in ALL_ITEMS]
        if code == strings.DEFAULT:
            assert titles == [item.title for item in ALL_ITEMS]
        else:
            assert all(item.titles.get(code) for item in ALL_ITEMS), code  # declared with each row, none missing
            assert len(set(titles)) == len(titles)
        assert all(set(item.titles) == set(strings.LANGUAGES) for item in ALL_ITEMS)


def test_an_unknown_language_is_refused_with_the_choices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(settings.LANGUAGE.env, "kr")
    with pytest.raises(strings.UnknownLanguage, match="'kr': choose one of en, ko"):
        strings.text("passed")
    assert strings.fallback_text("grader_failed") == strings.MESSAGES["en"]["grader_failed"]


def _report() -> judge.Report:
    """A graded report in which row 1.5 failed and row 2.1 was not collected (an internal problem)."""
    outcomes = [judge.Outcome(item.test, item.test, item.number != "1.5",
                              "" if item.number != "1.5" else "the scale did not back off")
                for item in rubric.ITEMS if item.test != "test_amp_step_forward_under_autocast"]
    rows, _ = judge.score(outcomes, rubric.ITEMS)  # 2.1 not collected: an internal problem
    return judge.Report(rows, notes=["Used x.py as loss_scaler.py"], output="hello\n", seconds=1.0)


def _in(language: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    monkeypatch.setenv(settings.LANGUAGE.env, language)
    return results.gradescope_results(_report(), "alice")


def _without_texts(data: dict[str, Any]) -> dict[str, Any]:
    data = json.loads(json.dumps(data))
    data.pop("output")
    for test in data["tests"]:
        test.pop("name"), test.pop("output")
    return data


def test_korean_results_differ_from_english_only_in_texts(monkeypatch: pytest.MonkeyPatch) -> None:
    english, korean = _in("en", monkeypatch), _in("ko", monkeypatch)
    assert _without_texts(korean) == _without_texts(english)
    rows = {test["number"]: test for test in korean["tests"]}
    assert {test["number"]: test for test in english["tests"]}["1.1"]["output"] == "Passed."
    assert rows["1.1"]["output"] == strings.MESSAGES["ko"]["passed"] != "Passed."
    assert "the scale did not back off" in rows["1.5"]["output"]
    assert rows["2.1"]["output"].startswith(strings.MESSAGES["ko"]["internal"])
    assert korean["output"].startswith(strings.MESSAGES["ko"]["about_submission"])
    assert rows["1.1"]["name"] == "1.1 생성자가 잘못된 인자를 거부함"


def test_english_build_has_no_language_file(tmp_path: Path) -> None:
    names = zipfile.ZipFile(build(tmp_path / "en.zip")).namelist()
    assert "autograder/engine/language.json" not in names


def test_korean_zip_grades_the_solution_90_with_korean_titles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(settings.LANGUAGE.env, raising=False)  # the zip alone must carry the language
    bundle = build(tmp_path / "ko.zip", "ko")
    assert json.loads(zipfile.ZipFile(bundle).read("autograder/engine/language.json")) == {"language": "ko"}
    data = simulate(bundle, tmp_path / "root", ROOT / "solutions")
    assert data["score"] == 90
    graded = [test for test in data["tests"] if test["number"] in {item.number for item in rubric.ITEMS}]
    assert [test["number"] for test in graded] == [item.number for item in rubric.ITEMS]
    for test, item in zip(graded, rubric.ITEMS):
        assert test["name"] == f"{item.number} {item.ko}"
        assert (test["score"], test["status"], test["visibility"]) == (item.points, "passed", item.visibility)
        assert test["output"] == strings.MESSAGES["ko"]["passed"]
    [gpu] = [test for test in data["tests"] if test["number"] == "4"]
    assert gpu["name"].startswith("GPU 파트")
