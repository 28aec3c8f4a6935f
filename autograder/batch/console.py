"""What a TA reads in the terminal: a batch run's first line (what it grades, why, where), the table at its end,
and its last line (the files to open).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Sequence

from autograder.batch.feedback import WITHHELD, fmt, withheld_text
from autograder.batch.inputs import NOTHING, Submission
from autograder.batch.summary import Row, problems
from autograder.engine import rubric, strings
from autograder.engine.escape import console, strip_controls


def print_report(rows: Sequence[Row], summary: dict[str, Any], out: Path, max_rows: int = 60) -> None:
    """The table a TA reads at the end of a run (every row when there are few)."""
    from rich.console import Console
    from rich.table import Table

    screen = Console(file=sys.stdout, width=120)
    top = rubric.max_points()
    rows = sorted(rows, key=lambda row: row[0].name)
    shown = rows if len(rows) <= max_rows else [r for r in rows if r[1].status != "graded" or problems(r[1])][:max_rows]
    title = strings.text("console.title", top=fmt(top))
    if len(shown) < len(rows):
        title += strings.text("console.title_some", shown=len(shown), total=len(rows))
    table = Table(title=title)
    for column in strings.columns("console.columns"):
        table.add_column(column, overflow="fold")
    for submission, entry in shown:
        failed = [t["number"] for t in entry.results.get("tests", [])
                  if t.get("status") == "failed" and entry.status == "graded"]  # ungraded: no row was run
        kinds = ", ".join(dict.fromkeys(strings.problem(kind) for kind, _ in problems(entry)))
        if entry.status == "errored":
            kinds = strings.text("console.not_graded", reason=entry.reason)
        if entry.status == WITHHELD:
            kinds = withheld_text(entry.reason)
        score = f"{fmt(entry.results.get('score', 0.0))} / {fmt(top)}" if entry.status == "graded" else "-"
        table.add_row(console(student_label(submission)), score,
                      console(", ".join(str(n) for n in failed) or "-"), console(kinds or "-"))
    if shown:
        screen.print(table)
    score = summary["score"]
    screen.print(strings.text("console.totals", submissions=summary["submissions"], graded=summary["graded"],
                              full=summary["full_marks"], errored=summary["errored"], limit=summary["hit_a_limit"])
                 + (strings.text("console.mean", mean=fmt(score["mean"]), median=fmt(score["median"]), top=fmt(top))
                    if score["mean"] is not None else "")
                 + (strings.text("console.withheld", nothing=len(summary["nothing_submitted"]),
                                 superseded=len(summary["superseded"]))
                    if summary["nothing_submitted"] or summary["superseded"] else ""), highlight=False)
    screen.print(strip_controls(written_line(out, len(rows))), highlight=False, soft_wrap=True, markup=False)


#: What a TA opens after a run, in the order to open them (the last line of a run names those written); those with
#: a word of why have a ``console.opened.<name>`` text.
OPENED = ("report.html", "similarity.html", "summary.md", "gradebook.csv", "changes.csv")


def written_line(out: Path, count: int) -> str:
    """The run's last line: every file a TA opens that this run left in ``out``, then the per-student files."""
    files = []
    for name in OPENED:
        if (out / name).is_file():
            why = strings.optional_text(f"console.opened.{name}")
            files.append(f"{name} ({why})" if why else name)
    return strings.text("console.wrote", out=out, files=", ".join(files), count=count, folder=out / "<submission>")


def plan_line(total: int, done: int, rescored: int, why: dict[str, int], where: str | int,
              withheld: Sequence[Submission]) -> str:
    """The run's first line: how many submissions, what is already graded, what is graded now and why, where, and
    what has nothing to grade (``where``: "" (nothing to grade), "slurm", or the number of local workers)."""
    reasons = ", ".join(strings.text("console.reason", count=count, why=strings.text("console.why." + reason))
                        for reason, count in why.items() if reason != "new" or len(why) > 1)
    line = strings.text("console.plan", total=total, done=done, todo=sum(why.values()),
                        rescored=strings.text("console.rescored", count=rescored) if rescored else "",
                        reasons=strings.text("console.reasons", reasons=reasons) if reasons else "",
                        where="" if where == "" else strings.text("console.slurm") if where == "slurm"
                        else strings.text("console.workers", jobs=where))
    nothing = sum(1 for s in withheld if s.withheld == NOTHING)
    if withheld:
        line += strings.text("console.withheld", nothing=nothing, superseded=len(withheld) - nothing)
    return line


def student_label(submission: Submission) -> str:
    """Who a console line is about: the students' names with the submission's id when known, else the id."""
    names = submission.identity()["name"]
    return f"{names} ({submission.name})" if names else submission.name
