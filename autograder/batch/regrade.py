"""Regrade impact: whose scores moved when the grader changed or a student resubmitted, and on which rubric rows.

When a batch regrades submissions that the ledger holds with another grader fingerprint
(a fixed hidden test, a changed point value, other limits), nothing is lost:

* the ledger keeps every replaced verdict (:meth:`autograder.batch.ledger.Ledger.replaced`);
* before the first submission is regraded, ``gradebook.csv`` is copied to
  ``gradebook.previous.csv`` (once per new grader: a resumed regrade keeps the first copy);
* ``changes.csv`` and a ``summary.md`` section compare each submission's current verdict
  with its latest earlier verdict under another grader or of other files (a resubmission, the
  ``cause`` column says which): old score -> new score and the rubric rows that moved, biggest
  change first, with counts raised / lowered / unchanged.

The comparison is rebuilt from the ledger on every run, so it survives interrupted and
resumed runs and works the same with ``--executor slurm``.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from autograder.engine import rubric
from autograder.engine.files import csv_text
from autograder.batch.inputs import Submission
from autograder.batch.ledger import Entry, Ledger
from autograder.engine.escape import csv_cell, markdown_inline

CHANGES, PREVIOUS_GRADEBOOK = "changes.csv", "gradebook.previous.csv"
#: which grader the kept previous gradebook was saved for (a resumed regrade must not overwrite it)
MARKER = ".previous-gradebook-grader"
MAX_IN_SUMMARY = 20
CSV_HEADER = ["submission", "name", "old_score", "new_score", "change", "test", "title", "old_points", "new_points",
              "cause", "old_max", "new_max"]
#: Why a verdict was replaced: the student's files changed, or the grader did (tests, rubric, limits).
RESUBMITTED, GRADER = "resubmitted", "grader changed"
#: Why a row moved, where the rubric itself says so (else the verdict's cause): a row the rubric gained or lost,
#: a row now worth other points.
ROW_ADDED, ROW_REMOVED, ROW_POINTS = "row added", "row removed", "row's points {old}→{new}"


@dataclass
class RowChange:
    number: str
    title: str
    old: float
    new: float
    cause: str = ""  # ROW_ADDED, ROW_REMOVED or ROW_POINTS; "" when the row's cases did (the verdict's cause)


@dataclass
class Change:
    submission: Submission
    old: Entry
    new: Entry
    rows: list[RowChange] = field(default_factory=list)

    @property
    def delta(self) -> float:
        return round(self.new.score - self.old.score, 6)

    @property
    def shown(self) -> tuple[float | str, float | str, float | str]:
        """(old score, new score, change) as a TA reads them: a side that could not be graded has no score, so
        neither has the change (never a zero)."""
        old, new = (entry.score if entry.status == "graded" else "" for entry in (self.old, self.new))
        return old, new, (self.delta if "" not in (old, new) else "")

    @property
    def cause(self) -> str:
        return RESUBMITTED if self.old.digest != self.new.digest else GRADER

    @property
    def max_moved(self) -> bool:
        """Whether the maximum score differs between the two verdicts (the rubric gained, lost or moved points)."""
        return abs(self.old.max_score - self.new.max_score) > 1e-9


def keep_previous_gradebook(out: Path, regrading: bool, grader: str) -> None:
    """Before a regrade starts: copy gradebook.csv to gradebook.previous.csv, once per grader."""
    from autograder.engine.files import write_text_atomic

    gradebook, marker = out / "gradebook.csv", out / MARKER
    if not regrading or not gradebook.is_file():
        return
    try:
        if marker.read_text(encoding="utf-8").strip() == grader:
            return  # a resumed regrade: the copy already holds the gradebook from before it
    except OSError:
        pass
    partial = out / f".{PREVIOUS_GRADEBOOK}.copy"
    shutil.copyfile(gradebook, partial)
    partial.replace(out / PREVIOUS_GRADEBOOK)
    write_text_atomic(marker, grader + "\n")


def _row_scores(entry: Entry) -> dict[str, tuple[float, float | None]]:
    """Each rubric row of a verdict: (its score, its maximum; None where the verdict does not say)."""
    return {str(t.get("number")): (float(t.get("score", 0.0)),
                                   float(t["max_score"]) if isinstance(t.get("max_score"), (int, float)) else None)
            for t in entry.results.get("tests", []) if t.get("number")}


def compare(old: Entry, new: Entry) -> list[RowChange]:
    """The rubric rows whose points differ between two verdicts, and the rows one of them lacks (a row the rubric
    gained or lost, whatever its points: its cause named), rubric order, then others."""
    before, after = _row_scores(old), _row_scores(new)
    both = old.status == new.status == "graded"  # else a side graded no row: none was added or removed
    titles = {item.number: item.title for item in rubric.ITEMS}
    order = {item.number: k for k, item in enumerate(rubric.ITEMS)}
    changes = []
    for n in sorted(set(before) | set(after), key=lambda n: (order.get(n, len(order)), n)):
        (was, was_max), (now, now_max) = before.get(n, (0.0, None)), after.get(n, (0.0, None))
        cause = ("" if not both else ROW_ADDED if n not in before else ROW_REMOVED if n not in after
                 else ROW_POINTS.format(old=f"{was_max:g}", new=f"{now_max:g}")
                 if was_max is not None and now_max is not None and abs(was_max - now_max) > 1e-9 else "")
        if cause in (ROW_ADDED, ROW_REMOVED) or abs(was - now) > 1e-9:
            changes.append(RowChange(n, titles.get(n, ""), was, now, cause))
    return changes


def impact(ledger: Ledger, rows: Sequence[tuple[Submission, Entry]]) -> list[Change]:
    """Every submission graded before by another grader or with other files: its latest such verdict vs the current.

    A verdict recorded again for the same files and grader (a retried submission) is no change and is passed over.
    """
    changes = []
    for submission, entry in rows:
        previous = next((old for old in ledger.replaced(submission.name)
                         if (old.digest, old.grader) != (entry.digest, entry.grader)), None)
        if previous is not None:
            changes.append(Change(submission, previous, entry, compare(previous, entry)))
    changes.sort(key=lambda c: (-abs(c.delta), -len(c.rows), c.submission.name))
    return changes


def counts(changes: Sequence[Change]) -> dict[str, int]:
    return {"raised": sum(1 for c in changes if c.delta > 0), "lowered": sum(1 for c in changes if c.delta < 0),
            "unchanged": sum(1 for c in changes if c.delta == 0)}


def _name(submission: Submission) -> str:
    return submission.identity()["name"]


def changes_csv(changes: Sequence[Change]) -> str:
    """One row per (submission, rubric row) that moved; a status change without row changes gets one row."""
    table: list[list[Any]] = []
    for change in changes:
        head = [change.submission.name, _name(change.submission), *change.shown]
        tail = [change.old.max_score, change.new.max_score]
        for row in change.rows:
            table.append(head + [row.number, row.title, row.old, row.new, row.cause or change.cause] + tail)
        if not change.rows and (change.delta or change.old.status != change.new.status or change.max_moved):
            table.append(head + ["", f"status {change.old.status} -> {change.new.status}", "", "", change.cause]
                         + tail)
    return csv_text(CSV_HEADER, [[csv_cell(cell) for cell in row] for row in table])


def _fmt(value: float) -> str:
    return f"{value:g}"


def markdown_section(changes: Sequence[Change]) -> str:
    tally = counts(changes)
    resubmitted = sum(1 for c in changes if c.cause == RESUBMITTED)
    maxima = sorted({(c.old.max_score, c.new.max_score) for c in changes if c.max_moved})
    lines = ["", "## Regrade impact", ""]
    if maxima:  # first: every number below is read against it
        lines += [f"**The maximum moved: {_fmt(old)} → {_fmt(new)}** (the rubric changed): every new score is out of "
                  f"{_fmt(new)}, so a raised score may be a lower share of the maximum." for old, new in maxima] + [""]
    lines += [f"{len(changes)} submission(s) were graded before: {len(changes) - resubmitted} by another version of "
              f"the grader (tests, rubric or limits), {resubmitted} with other files (resubmitted). Raised: "
              f"**{tally['raised']}**, lowered: **{tally['lowered']}**, unchanged: "
              f"**{tally['unchanged']}**. Every moved row is in [{CHANGES}]({CHANGES}); the gradebook from before is "
              f"kept as [{PREVIOUS_GRADEBOOK}]({PREVIOUS_GRADEBOOK}).", ""]
    moved = [c for c in changes if c.delta or c.rows or c.old.status != c.new.status]
    if not moved:
        return "\n".join(lines + ["No score moved."]) + "\n"
    lines += ["| Submission | Old → new | Change | Rows that moved | Cause |", "| --- | ---: | ---: | --- | --- |"]
    for change in moved[:MAX_IN_SUMMARY]:
        rows = ", ".join(f"{r.number} {_fmt(r.old)}→{_fmt(r.new)}" + (f" ({r.cause})" if r.cause else "")
                         for r in change.rows) or "-"
        who = markdown_inline(change.submission.name) + (f" ({markdown_inline(_name(change.submission))})"
                                                       if _name(change.submission) else "")
        old, new, delta = change.shown
        old, new = ("not graded" if value == "" else _fmt(float(value)) for value in (old, new))
        moved_by = "-" if delta == "" else f"{float(delta):+g}"
        lines.append(f"| {who} | {old} → {new} | {moved_by} | {rows} | {change.cause} |")
    if len(moved) > MAX_IN_SUMMARY:
        lines.append(f"\n… and {len(moved) - MAX_IN_SUMMARY} more in {CHANGES}.")
    return "\n".join(lines) + "\n"


def report_for_batch(out: Path, ledger: Ledger, rows: Sequence[tuple[Submission, Entry]]) -> str:
    """Batch hook: write changes.csv and return the summary.md section ("" when nothing was regraded)."""
    from autograder.engine.files import write_if_changed

    changes = impact(ledger, rows)
    if not changes:
        (out / CHANGES).unlink(missing_ok=True)
        return ""
    write_if_changed(out / CHANGES, changes_csv(changes))
    return markdown_section(changes)
