"""Gradescope's results.json (https://gradescope-autograders.readthedocs.io/en/latest/specs/).

Written atomically: a reader sees either the previous file or the complete new one.
"""

from __future__ import annotations

from typing import Any

from autograder.engine import rubric, strings
from autograder.engine.judge import Report

OUTPUT_LIMIT = 8000


def gradescope_results(report: Report, name: str = "") -> dict[str, Any]:
    """The results.json object for one graded submission."""
    tests: list[dict[str, Any]] = [
        {
            "name": strings.row_name(row.item),
            "number": row.item.number,
            "score": row.score,
            "max_score": row.item.points,
            "status": row.status,
            "output": _row_output(row),
            "visibility": row.item.visibility,
            "tags": [row.item.task],
        }
        for row in report.rows
    ]
    tests += informational_rows()
    parts = []
    if report.notes:
        parts.append(strings.text("about_submission") + "\n- " + "\n- ".join(report.notes))
    if report.output.strip():
        parts.append(strings.text("printed") + "\n" + report.output[:OUTPUT_LIMIT])
    return {
        "score": report.score,
        "execution_time": round(report.seconds, 1),
        "output": "\n\n".join(parts) or strings.text("graded", name=name).strip(),
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "tests": tests,
        "extra_data": {"scenarios_run": report.scenarios},  # staff only: how many scenarios graded this
    }


def _row_output(row: Any) -> str:
    """The row's message, then (bounded) what the student's code printed during that test."""
    text = row.message or strings.text("passed")
    if row.output.strip():
        text += "\n\n" + strings.text("printed_in_test") + "\n" + row.output[: OUTPUT_LIMIT // 2]
    return text[:OUTPUT_LIMIT]


def informational_rows() -> list[dict[str, Any]]:
    """Rows for parts not graded here (the GPU part is graded by staff on a GPU)."""
    gpu_points = sum(item.points for item in rubric.GPU_ITEMS) or rubric.GPU_PART_POINTS
    return [{
        "name": strings.text("gpu_row_name", points=gpu_points),
        "number": "4",
        "score": 0.0,
        "max_score": 0.0,
        "output": strings.text("gpu_row_output"),
        "visibility": "visible",
    }]


def error_results(message: str) -> dict[str, Any]:
    """results.json for a submission that could not be graded at all."""
    rows = [{"name": strings.row_name(item), "number": item.number, "score": 0.0, "max_score": item.points,
             "status": "failed", "output": message, "visibility": item.visibility} for item in rubric.ITEMS]
    return {"score": 0.0, "execution_time": 0.0, "output": message, "visibility": "visible",
            "stdout_visibility": "hidden", "tests": rows + informational_rows()}


