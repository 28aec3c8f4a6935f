"""Matching a failing row's answers with the catalogued bugs, and the feedback line it earns.

A row (one rubric item: one test function, one or more cases) is diagnosed as bug ``B`` when

* the row failed;
* ``B`` is catalogued as failing that row (its ``must_fail``) and answers at least one of the row's
  cases differently from the reference (so ``B`` is really caught there);
* on **every** case of the row the submission's answers to the recorded calls are exactly ``B``'s;
* no other bug matches as well, unless every match is a listed twin of the others
  (:data:`autograder.diagnosis.words.TWINS`): then the line names the group.

Anything less (no match, an ambiguous one, a case without answers) gives no diagnosis: a wrong
diagnosis is worse than none.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from autograder.diagnosis import words
from autograder.diagnosis.table import Table, digest, current_table


@dataclass(frozen=True)
class Diagnosis:
    number: str  # the rubric row
    test: str
    bugs: tuple[str, ...]  # one bug, or one group of twins

    @property
    def line(self) -> str:
        return words.sentence(list(self.bugs))


def row_digests(plan_cases: Sequence[Any], answers: Mapping[str, Sequence[str | None]], test: str) -> dict[str, str] | None:
    """The submission's digest of every plan case of ``test``; None when a case has no answers."""
    found = {}
    for case in plan_cases:
        if case.test != test:
            continue
        if case.name not in answers:
            return None
        found[case.name] = digest(case.calls, answers[case.name])
    return found or None


def match_row(table: Table, number: str, mine: Mapping[str, str]) -> tuple[str, ...]:
    """The bugs whose answers equal ``mine`` (case -> digest) on row ``number``; () unless unambiguous."""
    if not mine or any(name not in table.cases for name in mine):
        return ()
    cases = [table.cases[name] for name in mine]
    test = cases[0].test
    if any(case.test != test for case in cases) or \
            sum(case.test == test for case in table.cases.values()) != len(cases):
        return ()  # every case of the row, and only those
    suspects = [bug for bug, rows in table.rows.items()
                if number in rows and any(bug in case.bugs for case in cases)]
    matches = [bug for bug in suspects
               if all(case.bugs.get(bug, case.reference) == mine[name] for name, case in zip(mine, cases))]
    if not matches:
        return ()
    group = words.twins_of(matches[0])
    return tuple(sorted(matches)) if all(bug in group for bug in matches) else ()


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
        mine = row_digests(plan.cases, answers, row.item.test)
        bugs = match_row(table, row.item.number, mine) if mine else ()
        if bugs:
            found.append(Diagnosis(row.item.number, row.item.test, bugs))
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
