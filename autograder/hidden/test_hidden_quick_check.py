"""Hidden checks for Task 3 (Quick Check answers).  The answer key lives only here."""

from __future__ import annotations

from typing import Any

import pytest

from checks.judge import expect
from autograder.engine.judge_words import say

KEY = {"Q1": "B", "Q2": "B", "Q3": "B", "Q4": "A", "Q5": "B"}


@pytest.fixture
def answers(student: Any) -> dict[str, Any]:
    """Read by each test itself: its case then has a call of its own, and passes on the reference's answers without
    running (:mod:`autograder.engine.plan`)."""
    return student.run("answers", {})


def check(answers: dict[str, Any], question: str) -> None:
    given = answers.get(question)
    if given is None:
        expect.fail(say("quick.unanswered", question=question))
    if not isinstance(given, str) or given.strip().upper() not in "ABCD" or len(given.strip()) != 1:
        expect.fail(say("quick.not_letter", question=question, given=repr(given)))
    if given.strip().upper() != KEY[question]:
        expect.fail(say("quick.wrong", question=question, given=repr(given)))


def test_quick_check_q1(answers: dict[str, Any]) -> None:
    check(answers, "Q1")


def test_quick_check_q2(answers: dict[str, Any]) -> None:
    check(answers, "Q2")


def test_quick_check_q3(answers: dict[str, Any]) -> None:
    check(answers, "Q3")


def test_quick_check_q4(answers: dict[str, Any]) -> None:
    check(answers, "Q4")


def test_quick_check_q5(answers: dict[str, Any]) -> None:
    check(answers, "Q5")
