"""The class report of a batch: ``report.html``, ``items.csv`` and ``mistakes.csv`` in the output folder.

Computed only from what the batch already wrote (``gradebook.csv``, each ``<submission>/results.json``,
``summary.json``, and ``similarity.json`` / ``changes.csv`` where present), so it can be rebuilt at any time:
``python -m autograder report OUT`` (:func:`autograder.diagnosis.report_html.write` writes all three).  Every count comes from the same files and rules as summary.md's
(a row passes by :func:`autograder.engine.rubric.row_passed`; the batch's counts and problems from
summary.json), so the two never disagree.

* **Items** (``items.csv``: ``test, max_score, passed, failed, pass_rate, discrimination``): a row *passes* when it got
  its full points and is not marked failed.  The discrimination is the classic upper-lower index: the
  pass rate among the top 27% of submissions by total score minus the pass rate among the bottom 27%
  (ties broken by name; the total includes the row itself).  It lies in [-1, 1]; near 0 the row does not
  separate strong from weak submissions, negative values deserve a look.  Empty when fewer than 4
  submissions were graded; below :data:`DISCRIMINATION_MIN` the page says it is not meaningful.
* **Mistakes** (``mistakes.csv``: ``mistake, test, count, submissions``): the diagnoses in
  ``extra_data.diagnosis`` (:mod:`autograder.diagnosis.match`), counted per catalogued mistake and row,
  most common first; ``submissions`` lists every one, ``;``-separated.
* **report.html** (:mod:`autograder.diagnosis.report_html`): one self-contained page (inline CSS and
  images, one script of its own that sorts the students table, no network) for the TA: the batch's counts and
  histogram, one line per student (name and SID where known, score, problems, diagnosed mistakes, a link to
  their feedback.md, and one to the student's entry in full at the end), the items, the mistakes, the
  similarity flags and pairs (linked into similarity.html) and the regrade changes.

Everything a submission controls (names, metadata, notes) is escaped with :mod:`autograder.engine.escape`.
Imports neither torch nor pytest (the batch's main process calls it).
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from autograder.engine.files import csv_text
from autograder.engine.rubric import row_passed

HTML_NAME, ITEMS_NAME, MISTAKES_NAME = "report.html", "items.csv", "mistakes.csv"
ITEMS_HEADER = ["test", "max_score", "passed", "failed", "pass_rate", "discrimination"]
MISTAKES_HEADER = ["mistake", "test", "count", "submissions"]
GROUP_SHARE = 0.27  # Kelley's upper and lower groups
#: A row is called not discriminating below this index (shaded on the page).
LOW_DISCRIMINATION = 0.10
#: Below this many submissions the discrimination index is shown but called not meaningful: its groups (27%
#: each) hold fewer than 10 submissions, so one submission passing instead of failing moves the index by more
#: than LOW_DISCRIMINATION, and a "low" row cannot be told from chance.  (37: the least n with round(0.27 n) = 10.)
DISCRIMINATION_MIN = 37
SUMMARY_NAME, SIMILARITY_NAME, CHANGES_NAME = "summary.json", "similarity.json", "changes.csv"
#: gradebook.csv's status column (autograder.batch.summary writes it, the GPU gradebook's gpu_status says the same):
#: "graded", or UNGRADED and why (machine-read: the same words in every language)
GRADED, UNGRADED = "graded", "could not be graded"
#: the GPU part's gradebook and each submission's GPU rows (autograder.gpu writes them in grade-gpu; the page shows
#: them), and the gpu_status of a dry run's row: scores that are no grade (machine-read, the same words in every
#: language)
GPU_GRADEBOOK_NAME, GPU_RESULTS_NAME, DRY_STATUS = "gpu_gradebook.csv", "gpu_results.json", "dry run, not a grade"
HISTOGRAM_NAME = "score_histogram.png"  # drawn by autograder.batch.summary, inlined in the page
#: The languages the histogram's own labels are written in: matplotlib's bundled font (DejaVu Sans) has no Hangul,
#: and a TA's machine need not have a font that does, so in any other language the picture holds numbers only and
#: report.html says in words what its axes are.
HISTOGRAM_LABEL_LANGUAGES = ("en",)
#: Fewer scores than this draw no histogram (one bar says nothing, and matplotlib costs about a second).
HISTOGRAM_MIN_SUBMISSIONS = 2


@dataclass
class Graded:
    name: str
    score: float
    rows: dict[str, dict[str, Any]]  # rubric number -> the results.json test row
    diagnosis: dict[str, list[str]] = field(default_factory=dict)  # rubric number -> bugs
    student: str = ""  # the gradebook's name and sid columns (a Gradescope export's metadata), "" when unknown
    sid: str = ""
    notes: list[str] = field(default_factory=list)  # results.json's extra_data.notes: intake notes, broken files
    #: why it could not be graded (gradebook.csv's status), "" when it was: then it has no score and is in no statistic
    ungraded: str = ""


@dataclass
class ItemStats:
    number: str
    title: str
    max_score: float
    pass_rate: float
    discrimination: float | None
    passed: int = 0  # submissions that passed the row (the same count as summary.md's)
    count: int = 0  # submissions in the batch


@dataclass
class Mistake:
    bugs: tuple[str, ...]
    number: str
    submissions: list[str]

    @property
    def name(self) -> str:
        return "+".join(self.bugs)


def read_batch(out: Path) -> tuple[list[str], list[Graded]]:
    """The rubric columns of ``gradebook.csv`` ("1.1 test_name", ...) and one :class:`Graded` per line."""
    with (out / "gradebook.csv").open(encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle)
        columns = [c for c in reader.fieldnames or [] if c.split(" ", 1)[0].replace(".", "").isdigit()]
        lines = list(reader)
    graded = []
    for line in lines:
        name = line["submission"]
        try:
            data = json.loads((out / name / "results.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            data = {}
        rows = {str(t.get("number")): t for t in data.get("tests", []) if isinstance(t, dict)}
        extra = data.get("extra_data") if isinstance(data.get("extra_data"), dict) else {}
        diagnosis = extra.get("diagnosis") if isinstance(extra.get("diagnosis"), dict) else {}
        notes = extra.get("notes") if isinstance(extra.get("notes"), list) else []
        status = line.get("status") or GRADED  # a gradebook written before the column: every line was graded
        graded.append(Graded(name, float(line["score"] or 0.0), rows,
                             {str(k): [str(b) for b in v] for k, v in diagnosis.items() if isinstance(v, list)},
                             line.get("name") or "", line.get("sid") or "", [str(note) for note in notes],
                             "" if status == GRADED else status))
    return columns, graded


def read_json(path: Path) -> dict[str, Any]:
    """A JSON object the batch wrote (summary.json, similarity.json); empty when absent or unreadable."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def read_csv(path: Path) -> list[dict[str, str]]:
    if not path.is_file():
        return []
    with path.open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def item_stats(columns: Sequence[str], graded: Sequence[Graded]) -> list[ItemStats]:
    """Pass rate and upper-lower discrimination index of every rubric column, over the graded submissions."""
    graded = [g for g in graded if not g.ungraded]
    ranked = sorted(graded, key=lambda g: (-g.score, g.name))
    size = max(1, round(GROUP_SHARE * len(ranked)))
    upper, lower = ranked[:size], ranked[-size:]
    stats = []
    for column in columns:
        number = column.split(" ", 1)[0]
        first = next((g.rows[number] for g in graded if number in g.rows), {})
        passed = sum(row_passed(g.rows.get(number)) for g in graded)
        rate = passed / len(graded) if graded else 0.0
        discrimination = None
        if len(ranked) >= 4:
            discrimination = (sum(row_passed(g.rows.get(number)) for g in upper)
                              - sum(row_passed(g.rows.get(number)) for g in lower)) / size
        title = str(first.get("name", column)).removeprefix(number + " ")
        stats.append(ItemStats(number, title, float(first.get("max_score", 0.0)), rate, discrimination, passed,
                               len(graded)))
    return stats


def mistakes(graded: Sequence[Graded]) -> list[Mistake]:
    """Diagnosed mistakes per (bugs, row), most common first."""
    found: dict[tuple[tuple[str, ...], str], list[str]] = {}
    for g in graded:
        for number, bugs in g.diagnosis.items():
            found.setdefault((tuple(sorted(bugs)), number), []).append(g.name)
    ordered = sorted(found.items(), key=lambda kv: (-len(kv[1]), kv[0][1], kv[0][0]))
    return [Mistake(bugs, number, sorted(names)) for (bugs, number), names in ordered]


def items_csv(stats: Sequence[ItemStats]) -> str:
    return csv_text(ITEMS_HEADER, [[s.number, f"{s.max_score:g}", s.passed, s.count - s.passed, round(s.pass_rate, 4),
                                    "" if s.discrimination is None else round(s.discrimination, 4)] for s in stats])


def mistakes_csv(found: Sequence[Mistake]) -> str:
    return csv_text(MISTAKES_HEADER, [[m.name, m.number, len(m.submissions), ";".join(m.submissions)]
                                      for m in found])
