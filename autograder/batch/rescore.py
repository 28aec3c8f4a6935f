"""Rescoring: a change of the rubric's points alone gives new scores from the stored verdicts, running no code.

Points decide what a row is worth, not which of its cases pass: a verdict holds each row's passed and
total cases (``extra_data`` :data:`~autograder.engine.rubric.CASES`), so the new score of a row is
``points * passed / total``, rounded as the judge rounds it: the same number a new grading would give.  The batch
rescores a submission when its files are unchanged and the grader fingerprint differs in its points part only
(:func:`autograder.batch.run.grader_fingerprint`); a verdict that cannot be rescored exactly (one that could not
be graded, one stored before the cases were kept, a row the rubric no longer has) is graded again instead.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from autograder.batch.ledger import Entry
from autograder.engine import rubric, strings

#: A grader fingerprint's separator between what decides which cases pass and what the rows are worth.
SEPARATOR = "."
GPU_ROW = "4"  # the GPU part's informational row (0 of 0 points here; its title names the part's points)


def points_only(old: str, new: str) -> bool:
    """Whether two grader fingerprints differ in their points part alone."""
    old_scoring, found, old_points = old.partition(SEPARATOR)
    new_scoring, _, new_points = new.partition(SEPARATOR)
    return bool(found) and old_scoring == new_scoring and old_points != new_points


def rescored(entry: Entry, grader: str) -> Entry | None:
    """``entry`` with today's points (recorded under ``grader``); None when it cannot be rescored exactly."""
    cases = entry.results.get("extra_data", {}).get(rubric.CASES)
    if entry.status != "graded" or not isinstance(cases, dict):
        return None
    items = {item.number: item for item in rubric.ITEMS}
    tests: list[dict[str, Any]] = []
    for row in entry.results.get("tests", []):
        number = str(row.get("number", ""))
        if number == GPU_ROW and not row.get("max_score"):
            gpu_points = rubric.max_points(rubric.GPU_ITEMS) or rubric.GPU_PART_POINTS
            tests.append({**row, "name": strings.text("gpu_row_name", points=gpu_points)})
            continue
        item, counted = items.get(number), cases.get(number)
        if item is None or not isinstance(counted, list) or len(counted) != 2:
            return None
        passed, total = (int(value) for value in counted)
        tests.append({**row, "score": round(item.points * passed / total, 4) if total else 0.0,
                      "max_score": item.points})
    if not set(items) <= {str(row.get("number")) for row in tests}:
        return None  # a row the verdict does not have: only a grading can score it
    score = round(sum(row["score"] for row in tests if str(row.get("number")) in items), 4)
    return dataclasses.replace(entry, grader=grader, score=score, max_score=float(rubric.max_points()),
                               results={**entry.results, "score": score, "tests": tests})
