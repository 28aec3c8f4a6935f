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


def annotate(report: Any, table: Table | None = None) -> dict[str, Any]:
    """Add the diagnosis line to each diagnosed row's message; return results.json's staff data.

    The line goes into the row's own output, so students see it exactly when they see the row.
    ``table`` defaults to :func:`autograder.diagnosis.table.current_table`.
    """
    found = diagnose(report, table if table is not None else current_table())
    by_number = {d.number: d for d in found}
    for row in report.rows:
        diagnosis = by_number.get(row.item.number)
        if diagnosis is not None and diagnosis.line not in row.message:
            row.message = f"{row.message}\n\n{diagnosis.line}".strip()
    return {"diagnosis": {d.number: list(d.bugs) for d in found}} if found else {}
