"""What a batch run leaves in its output folder, rendered from the ledger.

* ``gradebook.csv``: one row per submission, sorted by name: ``submission``, the
  students' ``name``/``sid``/``email`` when known (Gradescope export), ``score``,
  ``max_score``, ``status``, then one column per rubric test.  A submission that could not be
  graded (an unreadable upload, the grader's own fault) has empty score cells and ``status``
  "could not be graded: <why>": never a zero a TA would upload.  No timestamps: grading the same
  submissions twice gives the same bytes.
* ``<submission>/results.json`` (Gradescope's format), ``<submission>/feedback.md``
  (for the student) and ``<submission>/staff.log`` (grader details, when any): :mod:`autograder.batch.feedback`.
* ``summary.json`` / ``summary.md``: score statistics and histogram, pass rate of every
  test (the most failed first), submissions that hit a limit, and those that could not
  be graded, with the reason, apart: they are in no statistic; ``score_histogram.png``.

Every file is written atomically, and only when its content changes; :func:`write_outputs` writes them all from
the same rows, so the gradebook, the summaries and the per-submission files cannot disagree.  What the terminal
shows is :mod:`autograder.batch.console`.
"""

from __future__ import annotations

import io
import json
import statistics
from pathlib import Path
from typing import Any, Sequence

from checks import words

from autograder.diagnosis import report as class_report
from autograder.engine import rubric, strings
from autograder.sandbox import budget
from autograder.sandbox.levels import LEVELS, SEALED, level_rank
from autograder.engine.escape import markdown_inline, strip_controls
from autograder.engine.files import csv_text, write_if_changed
from autograder.batch.feedback import WITHHELD, fmt, write_submission_files
from autograder.batch.inputs import NOTHING, Submission
from autograder.batch.ledger import Entry

IDENTITY_COLUMNS = ("name", "sid", "email")
GRADED, UNGRADED = class_report.GRADED, class_report.UNGRADED  # gradebook.csv's status column
HISTOGRAM = class_report.HISTOGRAM_NAME  # report.html inlines this very file
HISTOGRAM_MIN_SUBMISSIONS = class_report.HISTOGRAM_MIN_SUBMISSIONS
RESERVED = frozenset({"gradebook.csv", "summary.md", "summary.json", HISTOGRAM, "ledger.sqlite", "ledger.sqlite-wal",
                      "ledger.sqlite-shm", "logs", "inputs", "inbox", "submitit", "lock",
                      # the similarity and regrade impact reports (autograder.batch.similarity, autograder.batch.regrade)
                      "similarity.csv", "similarity.html", "similarity.json", "changes.csv", "gradebook.previous.csv",
                      "report.html", "items.csv", "mistakes.csv"})  # the class report (autograder.diagnosis.report)
#: judge.INTERNAL starts with this (a test keeps them in step; judge itself imports pytest and torch).
INTERNAL_PREFIX = "The grader hit an internal problem"
#: A contract file intake skipped for its size: the rows say "missing", the cause is this (told instead of it).
TOO_LARGE = "file too large"

#: (kind, is a limit, phrases in a failing test's message that reveal it); first match wins.  Limits are
#: classified by the sandbox's own records (results.json's extra_data.limits_hit), never by message text,
#: which student code can imitate; only the other kinds are recognised by their phrases, which are the telling
#: words of the messages that report them, in every language: the checks' messages about a submission's files
#: (checks.words) and the lines engine.faults puts in a row instead (engine.strings).
PROBLEMS: tuple[tuple[str, bool, tuple[str, ...]], ...] = (
    (budget.TIME_LIMIT, True, ()),
    (budget.CRASH_LIMIT, True, ()),
    (budget.INTERFERED, True, ()),
    ("import error", False, (*words.phrases("file.syntax"), *words.phrases("file.import_raised"),
                             *words.phrases("file.not_utf8"), *words.phrases("file.undefined"),
                             *strings.phrases("row_file_broken"))),
    ("missing file", False, (*words.phrases("file.missing"), *strings.phrases("row_file_missing"))),
    (TOO_LARGE, False, ()),  # found by intake's note (results.json's extra_data.notes), not by a row's message
    ("grader fault", False, (INTERNAL_PREFIX, *strings.phrases("internal"))),
)

Row = tuple[Submission, Entry]
def problems(entry: Entry) -> list[tuple[str, str]]:
    """(kind, test number or "") of every limit hit / fault seen in one submission."""
    found: list[tuple[str, str]] = []
    if entry.status == "errored":
        found.append(("not graded", ""))
    extra = entry.results.get("extra_data")
    recorded = extra.get("limits_hit") if isinstance(extra, dict) else None
    recorded = recorded if isinstance(recorded, dict) else {}
    for test in entry.results.get("tests", []):
        if test.get("status") != "failed":
            continue
        number = str(test.get("number", ""))
        if recorded.get(number) in budget.LIMIT_KINDS:
            found.append((recorded[number], number))
            continue
        output = str(test.get("output", ""))
        for kind, _limit, phrases in PROBLEMS:
            if phrases and any(phrase in output for phrase in phrases):
                found.append((kind, str(test.get("number", ""))))
                break
    notes = extra.get("notes") if isinstance(extra, dict) and isinstance(extra.get("notes"), list) else []
    if any(phrase in str(note) for phrase in strings.phrases("intake.too_large") for note in notes):
        found = [(TOO_LARGE, "")] + [(kind, number) for kind, number in found if kind != "missing file"]
    return found


# --------------------------------------------------------------------------- gradebook


def gradebook_header(with_identity: bool) -> list[str]:
    return (["submission"] + (list(IDENTITY_COLUMNS) if with_identity else []) + ["score", "max_score", "status"]
            + [f"{item.number} {item.test}" for item in rubric.ITEMS] + ["source"])


def gradebook_rows(rows: Sequence[Row], with_identity: bool) -> list[list[Any]]:
    """One line per submission; one that could not be graded has empty score cells, never zeros."""
    table = []
    for submission, entry in sorted(rows, key=lambda row: row[0].name):
        identity = submission.identity()
        line = [submission.name] + ([identity[key] for key in IDENTITY_COLUMNS] if with_identity else [])
        if entry.status != "graded":
            status = entry.reason if entry.status == WITHHELD else f"{UNGRADED}: {entry.reason}"
            table.append(line + ["", rubric.max_points(), strip_controls(status)]
                         + [""] * len(rubric.ITEMS) + [submission.source])
            continue
        scores = {test.get("number"): test.get("score", 0.0) for test in entry.results.get("tests", [])}
        table.append(line + [entry.results.get("score", 0.0), rubric.max_points(), GRADED]
                     + [scores.get(item.number, 0.0) for item in rubric.ITEMS] + [submission.source])
    return table


# --------------------------------------------------------------------------- summary


def histogram(scores: Sequence[float], top: float, bins: int = 10) -> tuple[list[float], list[int]]:
    """Equal-width bins over [0, top] (the last one closed); edges and counts."""
    width = top / bins if top > 0 else 1.0
    edges = [round(width * k, 6) for k in range(bins + 1)]
    counts = [0] * bins
    for score in scores:
        counts[min(bins - 1, max(0, int(score // width)))] += 1
    return edges, counts


def summarize(rows: Sequence[Row]) -> dict[str, Any]:
    """Statistics of a batch (no timings: the same batch gives the same summary).  Scores, histogram and tests
    count the graded submissions only: one that could not be graded has no score (it is counted and listed apart)."""
    rows = sorted(rows, key=lambda row: row[0].name)
    top = rubric.max_points()
    graded = [(s, e) for s, e in rows if e.status == "graded"]
    scores = [float(entry.results.get("score", 0.0)) for _, entry in graded]
    full = [s.name for s, e in graded if float(e.results.get("score", 0.0)) >= top]
    edges, counts = histogram(scores, top)
    tests = []
    for order, item in enumerate(rubric.ITEMS):
        passed = 0
        for _, entry in graded:
            row = next((t for t in entry.results.get("tests", []) if t.get("number") == item.number), None)
            passed += rubric.row_passed(row)  # the class report counts with the same rule
        tests.append({"number": item.number, "test": item.test, "title": strings.title(item), "points": item.points,
                      "passed": passed, "failed": len(graded) - passed,
                      "pass_rate": round(passed / len(graded), 4) if graded else 0.0, "_order": order})
    tests.sort(key=lambda t: (t["pass_rate"], t["_order"]))
    for test in tests:
        del test["_order"]
    kinds: dict[str, list[str]] = {}
    for submission, entry in rows:
        for kind in dict.fromkeys(kind for kind, _ in problems(entry)):
            kinds.setdefault(kind, []).append(submission.name)
    limit_kinds = {kind for kind, limit, _ in PROBLEMS if limit}
    return {
        "submissions": len(rows),
        "graded": len(graded),
        "full_marks": len(full),
        "lost_points": len(graded) - len(full),
        "errored": sum(1 for _, e in rows if e.status == "errored"),
        "hit_a_limit": sum(1 for _, e in rows if any(kind in limit_kinds for kind, _ in problems(e))),
        "max_score": top,
        "score": {
            "mean": round(statistics.fmean(scores), 4) if scores else None,
            "median": round(statistics.median(scores), 4) if scores else None,
            "min": min(scores) if scores else None,
            "max": max(scores) if scores else None,
        },
        "histogram": {"edges": edges, "counts": counts},
        "tests": tests,
        "problems": [{"kind": kind, "limit": kind in limit_kinds, "count": len(names), "submissions": names}
                     for kind, names in sorted(kinds.items(), key=lambda kv: (-len(kv[1]), kv[0]))],
        "not_graded": [{"submission": s.name, "reason": e.reason} for s, e in rows if e.status == "errored"],
        "nothing_submitted": [s.name for s, e in rows if e.status == WITHHELD and e.reason == NOTHING],
        "superseded": [{"submission": s.name, "reason": e.reason} for s, e in rows
                       if e.status == WITHHELD and e.reason != NOTHING],
        "same_sid": same_sid(rows),
        "isolation": isolation_levels(rows),
        "language": strings.language(),  # of every text the batch wrote (a report rebuilt in another says so)
    }


def same_sid(rows: Sequence[Row]) -> list[dict[str, Any]]:
    """Every SID that several submissions carry (a student who submitted twice in an export): which they are,
    with when each was submitted, and which of them are graded."""
    by_sid: dict[str, list[Row]] = {}
    for row in rows:
        if row[1].status == WITHHELD and row[1].reason == NOTHING:
            continue
        for sid in dict.fromkeys(p.sid for p in row[0].submitters if p.sid):
            by_sid.setdefault(sid, []).append(row)
    return [{"sid": sid, "submissions": [{"submission": s.name, "created_at": s.created_at} for s, _ in found],
             "graded": [s.name for s, e in found if e.status != WITHHELD]}
            for sid, found in sorted(by_sid.items()) if len(found) > 1]


def isolation_levels(rows: Sequence[Row]) -> dict[str, int]:
    """How many submissions were graded at each isolation level (results.json's extra_data.isolation)."""
    levels: dict[str, int] = {}
    for _, entry in rows:
        extra = entry.results.get("extra_data")
        level = extra.get("isolation") if isinstance(extra, dict) else None
        if isinstance(level, str):
            levels[level] = levels.get(level, 0) + 1
    return dict(sorted(levels.items()))


def summary_markdown(summary: dict[str, Any]) -> str:
    top = summary["max_score"]
    score = summary["score"]
    lines = [strings.text("summary.title"), "",
             strings.text("summary.counts", submissions=summary["submissions"], graded=summary["graded"],
                          full=summary["full_marks"], lost=summary["lost_points"], errored=summary["errored"],
                          limit=summary["hit_a_limit"])]
    if score["mean"] is not None:
        lines.append(strings.text("summary.scores", top=fmt(top), mean=fmt(score["mean"]),
                                  median=fmt(score["median"]), min=fmt(score["min"]), max=fmt(score["max"])))
    if summary["graded"] >= HISTOGRAM_MIN_SUBMISSIONS:
        lines += ["", f"![{strings.text('summary.histogram')}]({HISTOGRAM})"]
    lines += ["", strings.text("summary.histogram_head"), "| --- | ---: |"]
    edges, counts = summary["histogram"]["edges"], summary["histogram"]["counts"]
    for k, count in enumerate(counts):
        closing = "]" if k == len(counts) - 1 else ")"
        lines.append(f"| [{fmt(edges[k])}, {fmt(edges[k + 1])}{closing} | {count} |")
    lines += ["", strings.text("summary.tests"), "", strings.text("summary.tests_head"),
              "| --- | --- | ---: | ---: | ---: | ---: |"]
    for test in summary["tests"]:
        lines.append(f"| {test['number']} | {markdown_inline(test['title'])} | {fmt(test['points'])} | "
                     f"{test['passed']} | {test['failed']} | {test['pass_rate'] * 100:.0f}% |")
    lines += ["", strings.text("summary.problems"), ""]
    if summary["problems"]:
        lines += [strings.text("summary.problems_head"), "| --- | ---: | --- |"]
        for problem in summary["problems"]:
            names = problem["submissions"]
            shown = ", ".join(markdown_inline(n) for n in names[:10]) + (
                strings.text("summary.more", count=len(names) - 10) if len(names) > 10 else "")
            lines.append(f"| {markdown_inline(strings.problem(problem['kind']))} | {problem['count']} | {shown} |")
    else:
        lines.append(strings.text("summary.none"))
    lines += ["", strings.text("summary.not_graded"), ""]
    if summary["not_graded"]:
        lines += [strings.text("summary.not_graded_text"), ""]
    lines += [f"- {markdown_inline(row['submission'])}: {markdown_inline(row['reason'])}"
              for row in summary["not_graded"]] or [strings.text("summary.none")]
    lines += withheld_markdown(summary)
    levels = summary.get("isolation") or {}
    lines += ["", strings.text("summary.isolation"), ""]
    lines += [strings.text("summary.isolation_line", level=markdown_inline(level), count=count)
              for level, count in sorted(levels.items())] or [strings.text("summary.not_recorded")]
    unsealed = [level for level in sorted(levels) if level in LEVELS and level_rank(level) < level_rank(SEALED)]
    if unsealed:
        lines += ["", strings.text("summary.unsealed", levels=", ".join(unsealed), sealed=SEALED)]
    return "\n".join(lines) + "\n"


def withheld_markdown(summary: dict[str, Any]) -> list[str]:
    """summary.md's sections on what was not graded for want of anything to grade, and on SIDs that submitted more
    than once (none when there is none: a class without them reads as before)."""
    lines: list[str] = []
    nothing, superseded = summary.get("nothing_submitted") or [], summary.get("superseded") or []
    if nothing:
        lines += ["", strings.text("summary.nothing"), "", strings.text("summary.nothing_text", count=len(nothing)), ""]
        lines += [f"- {markdown_inline(name)}" for name in nothing]
    if summary.get("same_sid"):
        lines += ["", strings.text("summary.same_sid"), ""]
        for group in summary["same_sid"]:
            said = ", ".join(f"{markdown_inline(s['submission'])} ({markdown_inline(s['created_at'] or '?')})"
                             for s in group["submissions"])
            lines.append(strings.text("summary.same_sid_line", sid=markdown_inline(group["sid"]), submissions=said,
                                      graded=", ".join(markdown_inline(n) for n in group["graded"])))
        lines += [f"- {markdown_inline(row['submission'])}: {markdown_inline(row['reason'])}" for row in superseded]
    return lines


def preload_plotting() -> None:
    """Import matplotlib (about a second) in a background thread while grading goes on."""
    import threading

    def load() -> None:
        try:
            from matplotlib.backends import backend_agg  # noqa: F401
            from matplotlib import figure  # noqa: F401
        except Exception:  # noqa: BLE001 - reported when the histogram is drawn
            pass

    threading.Thread(target=load, name="preload-matplotlib", daemon=True).start()


def histogram_png(path: Path, summary: dict[str, Any]) -> None:
    """The score histogram as a PNG (no timestamp or version inside: same data, same bytes); its labels in English
    only (:data:`autograder.diagnosis.report.HISTOGRAM_LABEL_LANGUAGES`)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    edges, counts = summary["histogram"]["edges"], summary["histogram"]["counts"]
    figure = Figure(figsize=(6.4, 3.6), dpi=100)
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    widths = [edges[k + 1] - edges[k] for k in range(len(counts))]
    axes.bar(edges[:-1], counts, width=widths, align="edge", edgecolor="black", color="#4c72b0")
    axes.set_xlim(0, edges[-1] or 1)
    if strings.language() in class_report.HISTOGRAM_LABEL_LANGUAGES:  # else numbers only: report.html says the rest
        axes.set_xlabel(f"score (out of {fmt(summary['max_score'])})")
        axes.set_ylabel("submissions")
        axes.set_title(f"{summary.get('graded', summary['submissions'])} submissions")  # those with a score
    axes.yaxis.get_major_locator().set_params(integer=True)
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", metadata={"Software": None})
    write_if_changed(path, buffer.getvalue())


# --------------------------------------------------------------------------- writing it all


def write_outputs(out: Path, rows: Sequence[Row], with_identity: bool, sections: Sequence[str] = ()) -> dict[str, Any]:
    """Every per-submission file, then the gradebook and the summary (``sections`` appended to
    summary.md: similarity, regrade impact); returns the summary."""
    for submission, entry in rows:
        write_submission_files(out, submission, entry)
    summary = summarize(rows)
    if summary["graded"] >= HISTOGRAM_MIN_SUBMISSIONS:
        histogram_png(out / HISTOGRAM, summary)
    else:
        (out / HISTOGRAM).unlink(missing_ok=True)  # an earlier run's, of other submissions
    write_if_changed(out / "summary.json", json.dumps(summary, indent=2) + "\n")
    write_if_changed(out / "summary.md", summary_markdown(summary) + "".join(sections))
    header = gradebook_header(with_identity)
    write_if_changed(out / "gradebook.csv", csv_text(header, gradebook_rows(rows, with_identity)))
    return summary


