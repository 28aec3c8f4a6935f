"""``report.html``: the class report as the TA's page (data from :mod:`autograder.diagnosis.report`).

One self-contained page (inline CSS, images and one script of its own, no request), in this order: a warning when the
page is in another language than its batch; the batch's counts (the same sentence and numbers as summary.md, from
summary.json) and score histogram; one line per student (submission linked to its feedback.md, name and SID where
known, score, failed rows, problems, similarity flags, diagnosed mistakes); those that could not be graded, and
those with nothing to grade (an empty upload, one superseded by a submission of the same SID), apart; the GPU part
once grade-gpu has run; each row's pass counts and discrimination (with the small-class caveat); the most common
mistakes; the similarity flags and pairs, linked into similarity.html's anchors; the regrade changes; last, each
student's line in full.  Nothing is cut silently: every shortened list says how many it shows of how many, and where
the rest is.

The students table is for scanning (a class fits a 1400-pixel window, one line per submission): every cell stays on
one line and ends in "…" where it is too long for its column; its failed-rows cell says how many and the first of
them, and links to the student's entry at the end of the page, which holds all of it.  :data:`~autograder.diagnosis.page_parts.SCRIPT` sorts the
table by any column (the page's only script, allowed by its hash in the page's policy); without it the table reads
in the gradebook's order.

Every text from a submission (names, SIDs, notes, labels) passes :func:`html_text`; links are built from
the batch's own folder names, quoted.

The page's style, script and drawing helpers are :mod:`autograder.diagnosis.page_parts`; its similarity and regrade
sections, :mod:`autograder.diagnosis.report_similarity`.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence
from urllib.parse import quote

from autograder.diagnosis import words
from autograder.diagnosis.page_parts import POLICY, SCRIPT, STYLE, html_lines, html_link, html_table
from autograder.diagnosis.report_similarity import changes_section, similarity_flags, similarity_section
from autograder.diagnosis.page_words import WORDS, heads, word
from autograder.diagnosis.report import (CHANGES_NAME, DISCRIMINATION_MIN, GROUP_SHARE, HISTOGRAM_LABEL_LANGUAGES,
                                         HISTOGRAM_MIN_SUBMISSIONS, HISTOGRAM_NAME, HTML_NAME, ITEMS_NAME,
                                         LOW_DISCRIMINATION, MISTAKES_NAME, SIMILARITY_NAME, SUMMARY_NAME, Graded,
                                         ItemStats, Mistake, item_stats, items_csv, mistakes, mistakes_csv, read_batch,
                                         DRY_STATUS, GPU_GRADEBOOK_NAME, GPU_RESULTS_NAME, UNGRADED, read_csv, read_json)
from autograder.engine.files import write_bytes_atomic
from autograder.engine.escape import html_text
from autograder.engine import strings
from autograder.engine.rubric import row_passed

EXAMPLES = 5  # example submissions per mistake on the page
NOTE_CHARACTERS = 160  # a note's first line, at most, in the students table (the whole note: its entry, feedback.md)
FAILED_SHOWN = 3  # failed rows named in the students table's short form (all of them: in the student's entry)

def histogram_img(out: Path, summary: dict[str, Any] | None = None) -> str:
    """The batch's score histogram inline (a ``data:`` URL: the page's policy allows no other image).

    The batch summary draws it (matplotlib costs about a second, paid once); a batch of one
    submission has none, and the page says so.  In a language the picture's labels are not written in
    (:data:`HISTOGRAM_LABEL_LANGUAGES`), a caption below it says what its axes are (from ``summary``).
    """
    try:
        png = (out / HISTOGRAM_NAME).read_bytes()
    except OSError:
        return f"<p>{html_text(word('no_histogram', count=HISTOGRAM_MIN_SUBMISSIONS))}</p>"
    if not png.startswith(b"\x89PNG\r\n\x1a\n"):
        return f"<p>{html_text(word('not_png'))}</p>"
    image = (f'<img alt="{html_text(word("histogram"))}" '
             f'src="data:image/png;base64,{base64.b64encode(png).decode("ascii")}">')
    if strings.language() in HISTOGRAM_LABEL_LANGUAGES or not summary:
        return image
    axes = word("histogram_axes", top=f"{float(summary.get('max_score', 0)):g}", count=summary.get("graded", summary.get("submissions")))
    return f'{image}<p class="note" id="histogram-axes">{html_text(axes)}</p>'


# --------------------------------------------------------------------------- the batch's counts


def counts_sentence(summary: dict[str, Any], graded: Sequence[Graded], top: float) -> str:
    """summary.md's first lines, from the same summary.json (so the page and summary.md agree)."""
    if not summary:
        return f"<p>{html_text(word('no_summary', count=len(graded), top=f'{top:g}'))}</p>"
    score = summary.get("score") or {}
    value = {key: html_text(summary.get(key)) for key in ("submissions", "graded", "full_marks", "lost_points",
                                                           "errored", "hit_a_limit")}
    text = word("counts", submissions=value["submissions"], graded=value["graded"], full=value["full_marks"],
                lost=value["lost_points"], errored=value["errored"], limit=value["hit_a_limit"])
    if score.get("mean") is not None:
        text += word("counts_scores", top=f"{float(summary.get('max_score', top)):g}", mean=f"{score['mean']:g}",
                     median=f"{score['median']:g}", min=f"{score['min']:g}", max=f"{score['max']:g}")
    return f'<p id="counts">{text}</p>'


# --------------------------------------------------------------------------- the students


def _problems_by_submission(summary: dict[str, Any]) -> dict[str, list[str]]:
    """summary.json's problems (limits, faults) and could-not-be-graded reasons, per submission."""
    found: dict[str, list[str]] = {}
    for row in summary.get("not_graded") or []:
        found.setdefault(str(row.get("submission")), []).append(word("not_graded", reason=row.get("reason", "")))
    for problem in summary.get("problems") or []:
        if problem.get("kind") == "not graded":
            continue  # told with its reason above
        for name in problem.get("submissions") or []:
            found.setdefault(str(name), []).append(strings.problem(str(problem.get("kind"))))
    return found


def _first_line(note: str) -> str:
    """A note's first line, with the cause when the line only announces it ("… could not be imported …:")."""
    lines = [line.strip() for line in note.strip().splitlines() if line.strip()]
    line = lines[0] if lines else ""
    if line.endswith(":") and len(lines) > 1:
        line += " " + lines[1]
    return line if len(line) <= NOTE_CHARACTERS else line[:NOTE_CHARACTERS - 1] + "…"


@dataclass
class Line:
    """One graded submission as the students table and its entry show it (HTML fragments, escaped)."""
    graded: Graded
    name: str  # the submission, linked to its feedback.md where there is one
    failed: list[str]  # the rubric numbers of its failed rows
    problems: list[str]  # limits, faults, could-not-be-graded reasons
    notes: list[str]  # the grader's notes, as written (the table shows their first lines, the entry all of them)
    flags: list[str]  # similarity flags, linked into similarity.html


def student_lines(out: Path, graded: Sequence[Graded], summary: dict[str, Any], similar: dict[str, Any]) -> list[Line]:
    """The graded submissions in gradebook.csv's order (by submission name), as their lines show them."""
    problems = _problems_by_submission(summary)
    flags = similarity_flags(similar)
    return [Line(g, html_link(f"{quote(g.name)}/feedback.md", g.name) if (out / g.name / "feedback.md").is_file()
                 else html_text(g.name),
                 [number for number, row in g.rows.items() if row.get("max_score") and not row_passed(row)],
                 [html_text(p) for p in problems.get(g.name, [])], [note for note in g.notes if note.strip()],
                 flags.get(g.name, []))
            for g in graded if not g.ungraded]


def _short_failed(failed: Sequence[str]) -> str:
    """The failed-rows cell: how many, and the first :data:`FAILED_SHOWN` of them ("3: 1.5, 1.6, 2.4", "12: 1.1,
    1.2, 1.3, …", "0"); the entry lists them all."""
    shown = ", ".join(failed[:FAILED_SHOWN]) + (", …" if len(failed) > FAILED_SHOWN else "")
    return f"{len(failed)}: {shown}" if failed else "0"


def students_section(lines: Sequence[Line], top: float) -> str:
    """The students table: one line per submission (each cell one line, cut with "…" by the page's style; the lists
    in it joined with "; "), its failed-rows cell a link to the submission's entry (:func:`details_section`)."""
    rows = []
    for index, line in enumerate(lines, 1):
        g = line.graded
        said = line.problems + [f'<span class="note">{html_text(_first_line(note))}</span>' for note in line.notes]
        mistakes = [f"{html_text(number)}: {html_text('+'.join(bugs))}" for number, bugs in sorted(g.diagnosis.items())]
        failed = (f'<a id="line-{index}" href="#entry-{index}" title="{html_text(word("details_link"))}">'
                  f'{html_text(_short_failed(line.failed))}</a>')
        rows.append([line.name, html_text(g.student) or "-", html_text(g.sid) or "-", f"{g.score:g} / {top:g}",
                     failed, "; ".join(said) or "-", "; ".join(line.flags) or "-", "; ".join(mistakes) or "-"])
    return (f'<section id="students"><h2>{html_text(word("students"))}</h2><p>{html_text(word("students_text"))}'
            f'</p><p class="note" id="sort-hint" hidden>{html_text(word("sort_hint"))}</p>'
            + html_table(heads("students_head"), rows, "student-table") + "</section>")


def details_section(lines: Sequence[Line], top: float) -> str:
    """Each line of the students table in full, in the table's first order (its failed-rows cell links here, and each
    entry back): every failed row with its title and points, every problem, the whole of every note, every similarity
    flag and every mistake with what happens when it is made; "" when no submission was graded."""
    head = heads("students_head")
    entries = []
    for index, line in enumerate(lines, 1):
        g = line.graded
        failed = [html_text(f"{g.rows[number].get('name') or number} "
                            f"({float(g.rows[number].get('score') or 0):g} / {float(g.rows[number]['max_score']):g})")
                  for number in line.failed]
        said = line.problems + [f'<span class="note whole">{html_text(note.strip())}</span>' for note in line.notes]
        mistakes = [f"{html_text(number)}: {html_text('+'.join(bugs))}: {html_text(words.described(list(bugs)))}"
                    for number, bugs in sorted(g.diagnosis.items())]
        parts = [(head[4], failed, ' class="rows"'), (head[5], said, ""), (head[6], line.flags, ""),
                 (head[7], mistakes, "")]
        listed = "".join(f"<dt>{html_text(title)}</dt><dd{kind}>{html_lines(items)}</dd>" for title, items, kind in parts
                         if items)
        who = " · ".join([line.name, *(html_text(v) for v in (g.student, g.sid) if v), f"{g.score:g} / {top:g}"])
        back = html_text(word("back"))
        entries.append(f'<div class="entry" id="entry-{index}"><h3>{who} <a href="#line-{index}" title="{back}" '
                       f'aria-label="{back}">↑</a></h3>'
                       + (f"<dl>{listed}</dl>" if listed else f'<p class="note">{html_text(word("nothing_more"))}</p>')
                       + "</div>")
    if not entries:
        return ""
    return (f'<section id="details"><h2>{html_text(word("details"))}</h2><p>{html_text(word("details_text"))}</p>'
            + "".join(entries) + "</section>")


def not_graded_section(out: Path, graded: Sequence[Graded], summary: dict[str, Any]) -> str:
    """The submissions that could not be graded, apart from the students table: no score (not a zero), and in
    no statistic of the page; "" when there is none."""
    missing = [g for g in graded if g.ungraded.startswith(UNGRADED)]
    if not missing:
        return ""
    reasons = {str(row.get("submission")): str(row.get("reason", "")) for row in summary.get("not_graded") or []}
    rows = []
    for g in missing:
        feedback = out / g.name / "feedback.md"
        name = html_link(f"{quote(g.name)}/feedback.md", g.name) if feedback.is_file() else html_text(g.name)
        reason = reasons.get(g.name) or g.ungraded
        rows.append([name, html_text(g.student) or "-", html_text(g.sid) or "-", html_text(reason)])
    return (f'<section id="not-graded"><h2>{html_text(word("not_graded_heading"))}</h2>'
            f'<p>{html_text(word("not_graded_text", count=len(missing)))}</p>'
            + html_table(heads("not_graded_head"), rows, "not-graded-table") + "</section>")


def withheld_section(out: Path, graded: Sequence[Graded], summary: dict[str, Any]) -> str:
    """What was not graded for want of anything to grade (an empty upload; one superseded by a submission of the
    same SID) and every SID that submitted more than once, apart from the rest: no score, in no statistic; "" when
    there is none of either."""
    withheld = [g for g in graded if g.ungraded and not g.ungraded.startswith(UNGRADED)]
    twice = summary.get("same_sid") or []
    if not withheld and not twice:
        return ""
    rows = [[html_link(f"{quote(g.name)}/feedback.md", g.name) if (out / g.name / "feedback.md").is_file()
             else html_text(g.name), html_text(g.student) or "-", html_text(g.sid) or "-", html_text(g.ungraded)]
            for g in withheld]
    said = [word("same_sid_line", sid=html_text(group.get("sid")), submissions=html_text(", ".join(
        f"{s.get('submission')} ({s.get('created_at') or '?'})" for s in group.get("submissions") or [])),
        graded=html_text(", ".join(group.get("graded") or []))) for group in twice]
    return (f'<section id="withheld"><h2>{html_text(word("withheld_heading"))}</h2>'
            + (f'<p>{html_text(word("withheld_text", count=len(withheld)))}</p>'
               + html_table(heads("not_graded_head"), rows, "withheld-table") if withheld else "")
            + "".join(f'<p class="flag same-sid">{line}</p>' for line in said) + "</section>")


def gpu_section(out: Path, graded: Sequence[Graded]) -> str:
    """The GPU part once grade-gpu has run here (gpu_gradebook.csv): each submission's GPU score, the GPU rows it
    failed and its status; a dry run's rows say they are no grade.  "" before grade-gpu."""
    book = read_csv(out / GPU_GRADEBOOK_NAME)
    if not book:
        return ""
    who = {g.name: g for g in graded}
    rows, dry = [], 0
    for line in book:
        name, status = line.get("submission", ""), line.get("gpu_status", "")
        dry += status == DRY_STATUS
        failed = [column.split(" ", 1)[0] for column in line if column[:1].isdigit()
                  and line[column] not in ("", None) and _failed_gpu_row(out, name, column.split(" ", 1)[0])]
        score = f"{float(line['gpu_score']):g} / {float(line.get('gpu_max') or 0):g}" if line.get("gpu_score") else "-"
        person = who.get(name)
        rows.append([html_link(f"{quote(name)}/{GPU_RESULTS_NAME}", name)
                     if (out / name / GPU_RESULTS_NAME).is_file() else html_text(name),
                     html_text(person.student if person else "") or "-", html_text(person.sid if person else "") or "-",
                     score, html_text(", ".join(failed)) or "-", html_text(status) or "-"])
    said = word("gpu_text", count=len(rows)) + (word("gpu_dry", count=dry) if dry else "")
    flag = ' class="flag"' if dry else ""
    return (f'<section id="gpu"><h2>{html_text(word("gpu_heading"))}</h2><p{flag}>{html_text(said)}</p>'
            + html_table(heads("gpu_head"), rows, "gpu-table") + "</section>")


def _failed_gpu_row(out: Path, name: str, number: str) -> bool:
    """Whether row ``number`` of a submission's gpu_results.json failed."""
    data = read_json(out / name / GPU_RESULTS_NAME)
    return any(str(test.get("number")) == number and test.get("status") == "failed"
               for test in data.get("tests") or [] if isinstance(test, dict))


# --------------------------------------------------------------------------- rows and mistakes


def rows_section(stats: Sequence[ItemStats], count: int) -> str:
    meaningful = count >= DISCRIMINATION_MIN
    group = max(1, round(GROUP_SHARE * count))
    body = ""
    for s in stats:
        low = (meaningful and s.discrimination is not None and s.discrimination < LOW_DISCRIMINATION
               and 0 < s.pass_rate < 1)
        cells = [html_text(s.number), html_text(s.title), f"{s.max_score:g}", str(s.passed), str(s.count - s.passed),
                 f"{s.pass_rate:.0%}", "" if s.discrimination is None else f"{s.discrimination:+.2f}"]
        body += ('<tr class="low">' if low else "<tr>") + "".join(f"<td>{cell}</td>" for cell in cells) + "</tr>"
    caveat = ("" if meaningful else '<p class="flag" id="small-class">' + html_text(word(
        "small_class", count=count, needed=DISCRIMINATION_MIN, group=group, step=f"{1 / group:.2f}",
        low=f"{LOW_DISCRIMINATION:.2f}")) + "</p>")
    return (f'<section id="rows"><h2>{html_text(word("rows"))}</h2>'
            f'<p>{html_text(word("rows_text", low=f"{LOW_DISCRIMINATION:.2f}"))}</p>{caveat}'
            + "<table><thead><tr>" + "".join(f"<th>{html_text(h)}</th>" for h in heads("rows_head"))
            + f"</tr></thead><tbody>{body}</tbody></table></section>")


def mistakes_section(found: Sequence[Mistake], diagnosis_off: str) -> str:
    """The mistakes table; else why it is empty: diagnosis off is never shown as "no mistakes"."""
    if found:
        rows = [[html_text(m.number), html_text(words.described(list(m.bugs))),
                 html_text(m.name), str(len(m.submissions)),
                 html_text(", ".join(m.submissions[:EXAMPLES]))
                 + (html_text(word("more_examples", count=len(m.submissions) - EXAMPLES, file=MISTAKES_NAME))
                    if len(m.submissions) > EXAMPLES else "")]
                for m in found]
        body = html_table(heads("mistakes_head"), rows)
    elif diagnosis_off:
        body = f"<p>{html_text(word('diagnosis_off', why=diagnosis_off))}</p>"
    else:
        body = f"<p>{html_text(word('no_mistakes'))}</p>"
    return f'<section id="mistakes"><h2>{html_text(word("mistakes"))}</h2>{body}</section>'


# --------------------------------------------------------------------------- similarity and regrade


# --------------------------------------------------------------------------- the page


def render(out: Path, graded: Sequence[Graded], stats: Sequence[ItemStats], found: Sequence[Mistake],
           diagnosis_off: str = "") -> str:
    """The self-contained page (``diagnosis_off``: why no row was compared with the catalogue, "" if it was)."""
    summary = read_json(out / SUMMARY_NAME)
    similar = read_json(out / SIMILARITY_NAME)
    top = float(summary.get("max_score") or sum(s.max_score for s in stats))
    lines = student_lines(out, graded, summary, similar)
    sections = [
        f'<section id="scores"><h2>{html_text(word("scores"))}</h2>{counts_sentence(summary, graded, top)}'
        f"{histogram_img(out, summary)}</section>",
        students_section(lines, top),
        not_graded_section(out, graded, summary),
        withheld_section(out, graded, summary),
        gpu_section(out, graded),
        rows_section(stats, sum(1 for g in graded if not g.ungraded)),
        mistakes_section(found, diagnosis_off),
        similarity_section(similar),
        changes_section(read_csv(out / CHANGES_NAME)),
        details_section(lines, top),
    ]
    title = html_text(word("title"))
    return (f"<!DOCTYPE html>\n<html lang=\"{word('lang')}\"><head><meta charset=\"utf-8\">"
            f"<meta http-equiv=\"Content-Security-Policy\" content=\"{POLICY}\"><title>{title}</title>"
            f"<style>{STYLE}</style></head><body><h1>{title}</h1>{other_language(summary)}{''.join(sections)}"
            f"<script>{SCRIPT}</script></body></html>\n")


def other_language(summary: dict[str, Any]) -> str:
    """A warning at the top when the page is written in another language than its batch (``report OUT`` run with
    another $AMP_LANGUAGE): the row titles, notes and feedback it quotes stay in the batch's; "" otherwise."""
    batch, page = str(summary.get("language") or ""), strings.language()
    if not batch or batch == page:
        return ""
    named = {code: word(f"language.{code}") if f"language.{code}" in WORDS["en"] else code for code in (batch, page)}
    return (f'<p class="flag" id="other-language">'
            f"{html_text(word('other_language', batch=named[batch], page=named[page], code=batch))}</p>")


# --------------------------------------------------------------------------- writing it


def write(out: Path) -> None:
    """Write report.html, items.csv and mistakes.csv into the batch folder ``out`` (atomically).

    Whether diagnosis is on is this process's view (:func:`autograder.diagnosis.table.state`): the batch's
    main process, which saw what its workers see.
    """
    from autograder.diagnosis.table import state

    columns, graded = read_batch(out)
    stats = item_stats(columns, graded)  # the graded submissions only
    found = mistakes(graded)
    write_bytes_atomic(out / ITEMS_NAME, items_csv(stats).encode("utf-8"))
    write_bytes_atomic(out / MISTAKES_NAME, mistakes_csv(found).encode("utf-8"))
    page = render(out, graded, stats, found, state().off)
    write_bytes_atomic(out / HTML_NAME, page.encode("utf-8"))


def write_for_batch(out: Path) -> None:
    """Batch hook: the class report; a failure here costs the report, never the grades."""
    import sys

    try:
        write(out)
    except Exception as exc:  # noqa: BLE001 - the gradebook is already written
        print(f"warning: the class report failed: {type(exc).__name__}: {exc}", file=sys.stderr)
