"""The class report of a batch: ``report.html``, ``items.csv`` and ``mistakes.csv`` in the output folder.

Computed only from what the batch already wrote (``gradebook.csv``, each ``<submission>/results.json``,
and ``similarity.csv`` / ``changes.csv`` where present), so it can be rebuilt at any time:
``python -m autograder.diagnosis report OUT``.

* **Items** (``items.csv``: ``test, max_score, pass_rate, discrimination``): a row *passes* when it got
  its full points (a 0-point row: when its status is "passed").  The discrimination is the
  classic upper-lower index: the pass rate among the top 27% of submissions by total score minus
  the pass rate among the bottom 27% (ties broken by name; the total includes the row itself).  It
  lies in [-1, 1]; near 0 the row does not separate strong from weak submissions, negative values
  deserve a look.  Empty when fewer than 4 submissions were graded.
* **Mistakes** (``mistakes.csv``: ``mistake, test, count, submissions``): the diagnoses in
  ``extra_data.diagnosis`` (:mod:`autograder.diagnosis.match`), counted per catalogued mistake and row,
  most common first; ``submissions`` lists every one, ``;``-separated.
* **report.html**: one self-contained page (inline CSS and images, no script, no network): the
  batch's score histogram (its ``score_histogram.png``, drawn once by :mod:`autograder.batch.summary`
  and inlined here as a ``data:`` URL, not drawn a second time), the items, the mistakes with their student-facing words and up to
  :data:`EXAMPLES` example submissions, then the similarity pairs and regrade changes where present.

Everything a submission controls (names, metadata) is escaped with :mod:`autograder.engine.escape`.
Imports neither torch nor pytest (the batch's main process calls it).
"""

from __future__ import annotations

import base64
import csv
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from autograder.diagnosis import words
from autograder.engine.escape import html_text
from autograder.engine.files import csv_text, write_bytes_atomic
from autograder.engine import strings

HTML_NAME, ITEMS_NAME, MISTAKES_NAME = "report.html", "items.csv", "mistakes.csv"
ITEMS_HEADER = ["test", "max_score", "pass_rate", "discrimination"]
MISTAKES_HEADER = ["mistake", "test", "count", "submissions"]
GROUP_SHARE = 0.27  # Kelley's upper and lower groups
EXAMPLES = 5  # example submissions per mistake on the page
SHOWN_PAIRS = 20  # similarity rows and regrade changes on the page, at most
HISTOGRAM_NAME = "score_histogram.png"  # drawn by autograder.batch.summary, inlined in the page
#: Fewer scores than this draw no histogram (one bar says nothing, and matplotlib costs about a second).
HISTOGRAM_MIN_SUBMISSIONS = 2


@dataclass
class Graded:
    name: str
    score: float
    rows: dict[str, dict[str, Any]]  # rubric number -> the results.json test row
    diagnosis: dict[str, list[str]] = field(default_factory=dict)  # rubric number -> bugs


@dataclass
class ItemStats:
    number: str
    title: str
    max_score: float
    pass_rate: float
    discrimination: float | None


@dataclass
class Mistake:
    bugs: tuple[str, ...]
    number: str
    submissions: list[str]

    @property
    def name(self) -> str:
        return "+".join(self.bugs)


def _passed(row: dict[str, Any] | None) -> bool:
    return row is not None and row.get("score", 0.0) >= row.get("max_score", 0.0) and row.get("status") != "failed"


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
        graded.append(Graded(name, float(line["score"] or 0.0), rows,
                             {str(k): [str(b) for b in v] for k, v in diagnosis.items() if isinstance(v, list)}))
    return columns, graded


def item_stats(columns: Sequence[str], graded: Sequence[Graded]) -> list[ItemStats]:
    """Pass rate and upper-lower discrimination index of every rubric column."""
    ranked = sorted(graded, key=lambda g: (-g.score, g.name))
    size = max(1, round(GROUP_SHARE * len(ranked)))
    upper, lower = ranked[:size], ranked[-size:]
    stats = []
    for column in columns:
        number = column.split(" ", 1)[0]
        first = next((g.rows[number] for g in graded if number in g.rows), {})
        rate = sum(_passed(g.rows.get(number)) for g in graded) / len(graded) if graded else 0.0
        discrimination = None
        if len(ranked) >= 4:
            discrimination = (sum(_passed(g.rows.get(number)) for g in upper)
                              - sum(_passed(g.rows.get(number)) for g in lower)) / size
        title = str(first.get("name", column)).removeprefix(number + " ")
        stats.append(ItemStats(number, title, float(first.get("max_score", 0.0)),
                               rate, discrimination))
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
    return csv_text(ITEMS_HEADER, [[s.number, f"{s.max_score:g}", round(s.pass_rate, 4),
                                    "" if s.discrimination is None else round(s.discrimination, 4)] for s in stats])


def mistakes_csv(found: Sequence[Mistake]) -> str:
    return csv_text(MISTAKES_HEADER, [[m.name, m.number, len(m.submissions), ";".join(m.submissions)]
                                      for m in found])


def histogram_img(out: Path) -> str:
    """The batch's score histogram inline (a ``data:`` URL: the page's policy allows no other image).

    The batch summary draws it (matplotlib costs about a second, paid once); a batch of one
    submission has none, and the page says so.
    """
    try:
        png = (out / HISTOGRAM_NAME).read_bytes()
    except OSError:
        return f"<p>{html_text(strings.text('report.no_histogram', count=HISTOGRAM_MIN_SUBMISSIONS))}</p>"
    if not png.startswith(b"\x89PNG\r\n\x1a\n"):
        return f"<p>{html_text(strings.text('report.not_png'))}</p>"
    return (f'<img alt="{html_text(strings.text("report.histogram"))}" '
            f'src="data:image/png;base64,{base64.b64encode(png).decode("ascii")}">')


def _read_csv(path: Path) -> list[dict[str, str]]:
    if not path.is_file():
        return []
    with path.open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    head = "".join(f"<th>{html_text(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html_text(cell)}</td>" for cell in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


#: No script, no request: whatever a submission's name smuggled in could neither run nor reach the network.
POLICY = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
STYLE = """body{font-family:sans-serif;margin:2em;max-width:72em}table{border-collapse:collapse;margin:1em 0}
td,th{border:1px solid #bbb;padding:.25em .6em;text-align:left;vertical-align:top}th{background:#eee}
.low{background:#fde2e2}section{margin-bottom:2em}img{max-width:100%;height:auto}"""


def _mistakes_body(mistake_rows: Sequence[Sequence[Any]], diagnosis_off: str) -> str:
    """The mistakes table; else why it is empty: diagnosis off is never shown as "no mistakes"."""
    if mistake_rows:
        return _table(strings.columns("report.mistakes_head"), mistake_rows)
    if diagnosis_off:
        return f"<p>{html_text(strings.text('report.diagnosis_off', why=diagnosis_off))}</p>"
    return f"<p>{html_text(strings.text('report.no_mistakes'))}</p>"


def render(out: Path, columns: Sequence[str], graded: Sequence[Graded], stats: Sequence[ItemStats],
           found: Sequence[Mistake], diagnosis_off: str = "") -> str:
    """The self-contained page (``diagnosis_off``: why no row was compared with the catalogue, "" if it was)."""
    top = sum(s.max_score for s in stats)
    low = ' class="low"'
    item_rows = "".join(
        f"<tr{low if s.discrimination is not None and s.discrimination < 0.1 and 0 < s.pass_rate < 1 else ''}>"
        f"<td>{html_text(s.number)}</td><td>{html_text(s.title)}</td><td>{s.max_score:g}</td>"
        f"<td>{s.pass_rate:.0%}</td><td>{'' if s.discrimination is None else f'{s.discrimination:+.2f}'}</td></tr>"
        for s in stats)
    head = "".join(f"<th>{html_text(name)}</th>" for name in strings.columns("report.rows_head"))
    items_table = f"<table><thead><tr>{head}</tr></thead><tbody>{item_rows}</tbody></table>"
    mistake_rows = [[m.number, words.described(list(m.bugs)), m.name, len(m.submissions),
                     ", ".join(m.submissions[:EXAMPLES]) + (" …" if len(m.submissions) > EXAMPLES else "")]
                    for m in found]
    sections = [
        f"<section><h2>{html_text(strings.text('report.scores'))}</h2>"
        f"<p>{html_text(strings.text('report.scores_text', count=len(graded), top=f'{top:g}'))}</p>"
        f"{histogram_img(out)}</section>",
        f"<section><h2>{html_text(strings.text('report.rows'))}</h2><p>{html_text(strings.text('report.rows_text'))}"
        f"</p>{items_table}</section>",
        f"<section><h2>{html_text(strings.text('report.mistakes'))}</h2>{_mistakes_body(mistake_rows, diagnosis_off)}</section>",
    ]
    pairs = sorted(_read_csv(out / "similarity.csv"), key=lambda r: -float(r.get("similarity") or 0))[:SHOWN_PAIRS]
    if pairs:
        sections.append(f"<section><h2>{html_text(strings.text('report.similar'))}</h2>"
                        f"<p>{html_text(strings.text('report.similar_text'))}</p>"
                        + _table(strings.columns("report.similar_head"),
                                 [[p.get("submission_a"), p.get("submission_b"), p.get("file"), p.get("similarity")]
                                  for p in pairs]) + "</section>")
    changes = _read_csv(out / "changes.csv")[:SHOWN_PAIRS]
    if changes:
        sections.append(f"<section><h2>{html_text(strings.text('report.regrade'))}</h2>"
                        + _table(strings.columns("report.regrade_head"),
                                 [[c.get("submission"), c.get("old_score"), c.get("new_score"), c.get("change"),
                                   c.get("test")] for c in changes]) + "</section>")
    title = html_text(strings.text("report.title"))
    return (f"<!DOCTYPE html>\n<html lang=\"{strings.text('report.lang')}\"><head><meta charset=\"utf-8\">"
            f"<meta http-equiv=\"Content-Security-Policy\" content=\"{POLICY}\"><title>{title}</title>"
            f"<style>{STYLE}</style></head><body><h1>{title}</h1>{''.join(sections)}</body></html>\n")


def write(out: Path) -> None:
    """Write report.html, items.csv and mistakes.csv into the batch folder ``out`` (atomically).

    Whether diagnosis is on is this process's view (:func:`autograder.diagnosis.table.state`): the batch's
    main process, which saw what its workers see.
    """
    from autograder.diagnosis.table import state

    columns, graded = read_batch(out)
    stats = item_stats(columns, graded)
    found = mistakes(graded)
    write_bytes_atomic(out / ITEMS_NAME, items_csv(stats).encode("utf-8"))
    write_bytes_atomic(out / MISTAKES_NAME, mistakes_csv(found).encode("utf-8"))
    page = render(out, columns, graded, stats, found, state().off)
    write_bytes_atomic(out / HTML_NAME, page.encode("utf-8"))


def write_for_batch(out: Path) -> None:
    """Batch hook: the class report; a failure here costs the report, never the grades."""
    import sys

    try:
        write(out)
    except Exception as exc:  # noqa: BLE001 - the gradebook is already written
        print(f"warning: the class report failed: {type(exc).__name__}: {exc}", file=sys.stderr)
