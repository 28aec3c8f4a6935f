"""The grader's side of the diagnosis: match each failing row, add its line, report it to staff.

The matching rule is :func:`checks.judge.diagnose.match_test` (shared with the public checks): a failing
row is diagnosed as a catalogued bug only when its answers on every case of the row are exactly that
bug's (or one group of listed twins'), every call was answered, and the bug is known to fail the row.
Anything less gives no diagnosis: a wrong diagnosis is worse than none.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from autograder.diagnosis.table import Table, case_digest, current_table
from autograder.engine import results
from checks.judge.diagnose import match_test


@dataclass(frozen=True)
class Diagnosis:
    number: str  # the rubric row
    test: str
    bugs: tuple[str, ...]  # one bug, or one group of twins
    line: str  # what the student reads


def row_digests(plan_cases: Sequence[Any], answers: Mapping[str, Sequence[str | None]], test: str) -> dict[str, str]:
    """The submission's digest of every plan case of ``test`` that it answered (case name -> digest)."""
    return {case.name: case_digest(case, answers[case.name]) for case in plan_cases
            if case.test == test and case.name in answers}


def diagnose(report: Any, table: Table | None) -> list[Diagnosis]:
    """The diagnoses of a graded report's failing rows (``report.plan`` and ``report.answers`` from grading)."""
    plan = getattr(report, "plan", None)
    answers = getattr(report, "answers", None)
    if table is None or plan is None or not answers:
        return []
    found = []
    for row in report.rows:
        if row.passed:
            continue
        bugs = match_test(table, row.item.test, row_digests(plan.cases, answers, row.item.test))
        if bugs:
            found.append(Diagnosis(row.item.number, row.item.test, bugs, table.sentence(bugs)))
    return found


def row_lines(found: Sequence[Diagnosis]) -> dict[str, str]:
    """Where the diagnosis lines go: rubric number -> the line that row's output gets."""
    return {d.number: d.line for d in found}


def staff_data(found: Sequence[Diagnosis]) -> dict[str, Any]:
    """results.json's staff-only ``extra_data`` entry: the bugs diagnosed, by rubric number (nothing if none)."""
    return {"diagnosis": {d.number: list(d.bugs) for d in found}} if found else {}


def diagnosed_results(report: Any, name: str = "", table: Table | None = None) -> dict[str, Any]:
    """results.json of a graded report, its failing rows diagnosed.

    The diagnosis is found here and placed by the engine's formatter (the engine never imports this
    package).  ``table`` defaults to :func:`autograder.diagnosis.table.current_table`.
    """
    found = diagnose(report, table if table is not None else current_table())
    return results.gradescope_results(report, name, lines=row_lines(found), extra_data=staff_data(found))
