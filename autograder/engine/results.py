"""Gradescope's results.json (https://gradescope-autograders.readthedocs.io/en/latest/specs/).

Written atomically: a reader sees either the previous file or the complete new one.
"""

from __future__ import annotations

from typing import Any, Mapping

from autograder.engine import rubric, strings
from autograder.engine.judge import Report

OUTPUT_LIMIT = 8000


def gradescope_results(report: Report, name: str = "", lines: Mapping[str, str] | None = None,
                       extra_data: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The results.json object for one graded submission.

    Layers above the engine add to it without the engine knowing them: ``lines`` (rubric number -> a line
    for that row's message, e.g. :func:`autograder.diagnosis.match.diagnosed_results`'s diagnosis) and
    ``extra_data`` (staff-only data).
    """
    lines = lines or {}
    tests: list[dict[str, Any]] = [
        {
            "name": strings.row_name(row.item),
            "number": row.item.number,
            "score": row.score,
            "max_score": row.item.points,
            "status": row.status,
            "output": _row_output(row, lines.get(row.item.number)),
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
        # staff only: how many scenarios graded this, the public part of each hidden row that failed (for
        # with_public_parts) and what the layers above add
        "extra_data": {"scenarios_run": report.scenarios, rubric.CASES: {row.item.number: list(row.cases) for row in report.rows},
                       **_public_parts(report), **(extra_data or {})},
    }


PUBLIC_PARTS = "public_failures"


def _public_parts(report: Report) -> dict[str, dict[str, str]]:
    """{PUBLIC_PARTS: rubric number -> the messages of its failed public cases} for the rows students see only
    later; {} when there are none."""
    parts = {row.item.number: row.public_failures for row in report.rows
             if row.public_failures and row.item.visibility != "visible"}
    return {PUBLIC_PARTS: parts} if parts else {}


def with_public_parts(data: dict[str, Any]) -> dict[str, Any]:
    """results.json with a visible, pointless row after each hidden row whose public examples failed.

    A hidden row (shown after the due date) also runs the public checks' examples of its behaviour. Students
    have those inputs already (``assignment/checks``), so their failures may be shown at once: the companion
    row carries only their messages, scores nothing (the points stay in the hidden row) and has no ``number``
    (readers key rows by number). For platforms that hide rows until a date (Gradescope); the batch shows
    every row, so its results keep the parts in ``extra_data`` only.
    """
    parts = data.get("extra_data", {}).get(PUBLIC_PARTS) or {}
    if not parts:
        return data
    tests: list[dict[str, Any]] = []
    for test in data.get("tests", []):
        tests.append(test)
        part = parts.get(str(test.get("number")))
        if part:
            tests.append({"name": strings.text("public_part_name", title=test["name"]), "score": 0.0, "max_score": 0.0,
                          "status": "failed", "visibility": "visible", "tags": test.get("tags", []),
                          "output": (strings.text("public_part_output") + "\n\n" + part)[:OUTPUT_LIMIT]})
    return {**data, "tests": tests}


def _row_output(row: Any, line: str | None = None) -> str:
    """``line`` (once), the row's message, then (bounded) what the student's code printed during that test.

    The line goes into the row's own output, so students see it exactly when they see the row, and first: the
    likely mistake is what to read before the details.
    """
    message = row.message
    if line and line not in message:
        message = f"{line}\n\n{message}".strip()
    text = message or strings.text("passed")
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


def on_gradescope(data: dict[str, Any]) -> dict[str, Any]:
    """results.json as Gradescope's runtime writes it: the GPU row names Gradescope (the batch's and other
    platforms' feedback speaks of "this grader", which may be a machine with a GPU)."""
    tests = [{**row, "output": strings.text("gpu_row_output_gradescope")}
             if row.get("number") == "4" and not row.get("max_score") else row for row in data.get("tests", [])]
    return {**data, "tests": tests}


def error_results(message: str) -> dict[str, Any]:
    """results.json for a submission that could not be graded at all."""
    rows = [{"name": strings.row_name(item), "number": item.number, "score": 0.0, "max_score": item.points,
             "status": "failed", "output": message, "visibility": item.visibility} for item in rubric.ITEMS]
    return {"score": 0.0, "execution_time": 0.0, "output": message, "visibility": "visible",
            "stdout_visibility": "hidden", "tests": rows + informational_rows()}


