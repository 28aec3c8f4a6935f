"""What a batch leaves for each submission: ``<submission>/results.json``, ``feedback.md`` (for the student, the same
content as results.json, readable) and ``staff.log`` (grader details, when any), rendered from its ledger entry.

A submission with nothing to grade (*withheld*: nothing submitted, or superseded by another of the same SID) gets
the same files with its reason and no score; one that could not be graded, its reason and no score either.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

from autograder.batch.inputs import SUPERSEDED, Submission
from autograder.batch.ledger import Entry
from autograder.engine import rubric, strings
from autograder.engine.escape import markdown_inline, strip_controls
from autograder.engine.files import write_if_changed


#: The status of an entry the run never graded (:attr:`Submission.withheld` says why: nothing submitted, or
#: superseded by another submission of the same SID); it lives in no ledger and has no score.
WITHHELD = "withheld"


def withheld_entry(submission: Submission) -> Entry:
    """What a withheld submission's files and rows are rendered from: no test, no score, its reason."""
    results = {"tests": [], "output": withheld_text(submission.withheld), "visibility": "visible",
               "extra_data": {"withheld": submission.withheld}}
    return Entry(submission.name, "", "", WITHHELD, 0.0, float(rubric.max_points()), results, submission.withheld,
                 source=submission.source)


def withheld_text(reason: str) -> str:
    """A withheld submission's reason in the current language (its status column keeps the English words)."""
    if reason.startswith(SUPERSEDED):
        return strings.text("withheld.superseded", reason=reason.removeprefix(SUPERSEDED).strip())
    return strings.text("withheld.nothing")


def fmt(value: float) -> str:
    return f"{value:g}"


def _fence(text: str) -> str:
    """A Markdown code fence longer than any run of backticks in ``text``."""
    longest = run = 0
    for char in text:
        run = run + 1 if char == "`" else 0
        longest = max(longest, run)
    return "`" * max(3, longest + 1)


def feedback_markdown(submission: Submission, entry: Entry) -> str:
    """A readable report for the student (the same content as results.json)."""
    data = entry.results
    tests = [t for t in data.get("tests", []) if t.get("max_score", 0) or t.get("status")]
    lines = [strings.text("feedback.title", name=markdown_inline(submission.name)), ""]
    people = ", ".join(s.name or s.email or s.sid for s in submission.submitters)
    if people:
        lines += [strings.text("feedback.by", people=markdown_inline(people)), ""]
    if submission.renamed_from:
        lines += [renamed_note(submission, markdown_inline), ""]
    if entry.status == WITHHELD:  # nothing was graded: no score, no row
        return "\n".join(lines + [f"**{markdown_inline(withheld_text(entry.reason))}**"]) + "\n"
    if entry.status == "graded":  # one that could not be graded has no score, not a zero
        lines += [strings.text("feedback.score", score=fmt(data.get("score", 0.0)), top=fmt(rubric.max_points()),
                               gpu=fmt(rubric.GPU_PART_POINTS)), ""]
    if entry.status == "errored":
        reason = markdown_inline(entry.reason or strings.text("feedback.see_below"))
        lines += [strings.text("feedback.not_graded", reason=reason), ""]
    output = strip_controls(str(data.get("output", "")), keep_newlines=True).strip()  # fenced: no escape codes
    if output and not strings.is_graded_note(output):
        fence = _fence(output)
        lines += [strings.text("feedback.about"), "", fence + "text", output, fence, ""]
    if entry.status != "graded":  # no row was graded: a table of zeros would read as a grade
        return "\n".join(lines).rstrip() + "\n"
    lines += [strings.text("feedback.tests"), "", strings.text("feedback.tests_head"), "| --- | ---: | --- |"]
    for test in tests:
        mark = strings.text("feedback.passed") if test.get("status") == "passed" else strings.text("feedback.failed")
        lines.append(f"| {markdown_inline(test.get('name', ''))} | {fmt(test.get('score', 0.0))} / "
                     f"{fmt(test.get('max_score', 0.0))} | {mark} |")
    failing = [t for t in tests if t.get("status") == "failed"]
    if failing:
        lines += ["", strings.text("feedback.wrong"), ""]
        for group, text in _same_output_groups(failing):
            fence = _fence(text)
            heading = (markdown_inline(group[0].get("name", "")) if len(group) == 1 else strings.text(
                "feedback.group", numbers=", ".join(markdown_inline(str(t.get("number", ""))) for t in group),
                count=len(group)))
            lines += [f"### {heading}", "", fence + "text", text, fence, ""]
    informational = [t for t in data.get("tests", []) if not t.get("max_score", 0) and not t.get("status")]
    for test in informational:
        lines += ["", f"*{markdown_inline(test.get('name', ''))}*: {markdown_inline(test.get('output', ''))}"]
    return "\n".join(lines).rstrip() + "\n"


def _same_output_groups(failing: Sequence[dict[str, Any]]) -> list[tuple[list[dict[str, Any]], str]]:
    """Consecutive failed rows that say the same thing (one cause told once), each with that text."""
    groups: list[tuple[list[dict[str, Any]], str]] = []
    for test in failing:
        text = strip_controls(str(test.get("output", "")), keep_newlines=True).strip()
        if groups and groups[-1][1] == text:
            groups[-1][0].append(test)
        else:
            groups.append(([test], text))
    return groups


def renamed_note(submission: Submission, escape: Any = str) -> str:
    """What the student and the TA's report are told of a submission renamed for a name another one took."""
    return strings.text("feedback.renamed", name=escape(submission.name), source=escape(submission.source),
                        base=escape(submission.renamed_from))


def write_submission_files(out: Path, submission: Submission, entry: Entry) -> None:
    folder = out / submission.name
    results = entry.results
    if submission.renamed_from:  # the class report reads the notes: the rename is told there too
        extra = results.get("extra_data") if isinstance(results.get("extra_data"), dict) else {}
        notes = [*(extra.get("notes") or []), renamed_note(submission).replace("**", "")]
        results = {**results, "extra_data": {**extra, "notes": notes}}
    write_if_changed(folder / "results.json", json.dumps(results, indent=2, allow_nan=False) + "\n")
    write_if_changed(folder / "feedback.md", feedback_markdown(submission, entry))
    if entry.staff_log:
        write_if_changed(folder / "staff.log", entry.staff_log)
    else:
        (folder / "staff.log").unlink(missing_ok=True)
