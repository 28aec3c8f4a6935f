"""report.html's similarity and regrade sections: each student's "similar to" flags for the students table, the
flagged pairs and files linked into similarity.html's anchors, and the grades a regrade changed.
"""

from __future__ import annotations

from typing import Any, Sequence

from autograder.diagnosis.page_parts import html_link, html_table
from autograder.diagnosis.page_words import WORDS, heads, word
from autograder.diagnosis.report import CHANGES_NAME
from autograder.engine import strings
from autograder.engine.escape import html_text

SHOWN_PAIRS = 20  # similarity pairs and regrade changes on the page, at most
SIMILARITY_PAGE = "similarity.html"


CSV_NAME = "similarity.csv"  # every pair, those past similarity.html's list too


SIMILAR_SHOWN = 3  # "similar to ..." lines per student in the table (the rest: a count and a link)


SIMILAR_MARK = "<!--similar-->"  # marks the "similar to" lines, whatever the language, to cut their list


def similarity_flags(similar: dict[str, Any]) -> dict[str, list[str]]:
    """Per submission key: HTML fragments (escaped, linked into similarity.html) for the students table."""
    flags: dict[str, list[str]] = {}
    for cluster in similar.get("clusters") or []:
        keys = [str(k) for k in cluster.get("keys") or []]
        for key in keys:
            flags.setdefault(key, []).append(word("identical", others=len(keys) - 1, link=html_link(
                f"{SIMILARITY_PAGE}#{cluster.get('anchor')}", word("cluster"))))
    sources = _sources(similar)
    for match in sources:  # every one, not only those among the pairs the similarity page shows
        me = match.get("submission") or {}
        for key in me.get("members") or [me.get("key")]:
            flags.setdefault(str(key), []).append(
                f"{word('matches_' + str(match.get('source') or 'solution'))} <span class=\"nowrap\">("
                f"{float(match.get('score', 0)):.2f}, "
                + html_link(f"{SIMILARITY_PAGE}#{match.get('anchor')}", str(match.get("anchor"))) + ")</span>")
    # every flagged pair (similarity.json's ``flags``; a folder written before it had them: the listed pairs)
    for pair in similar["flags"] if "flags" in similar else similar.get("pairs") or []:
        sides = [pair.get("a") or {}, pair.get("b") or {}]
        if not pair.get("flagged", True) or any(side.get("solution") for side in sides):
            continue  # a match with a source: told above
        anchor = str(pair.get("anchor") or "")
        where = html_link(f"{SIMILARITY_PAGE}#{anchor}", anchor) if anchor else html_link(CSV_NAME, CSV_NAME)
        for me, other in (sides, sides[::-1]):
            what = SIMILAR_MARK + word("similar_to", label=html_text(other.get("label", "")))
            for key in me.get("members") or [me.get("key")]:
                flags.setdefault(str(key), []).append(
                    f"{what} <span class=\"nowrap\">({float(pair.get('score', 0)):.2f}, {where})</span>")
    for key, said in flags.items():  # the strongest flags first, then at most SIMILAR_SHOWN other pairs
        similar_to = [line for line in said if line.startswith(SIMILAR_MARK)]
        rest = len(similar_to) - SIMILAR_SHOWN
        where = CSV_NAME if any(CSV_NAME in line for line in similar_to[SIMILAR_SHOWN:]) else SIMILARITY_PAGE
        flags[key] = ([line for line in said if not line.startswith(SIMILAR_MARK)] + similar_to[:SIMILAR_SHOWN]
                      + ([word("more_pairs", count=rest, link=html_link(where, where))] if rest > 0 else []))
    for marker in similar.get("markers") or []:
        flags.setdefault(str(marker.get("key")), []).append(word(
            "markers_flag", files=html_text(", ".join(marker.get("files") or [])),
            link=html_link(f"{SIMILARITY_PAGE}#markers", word("markers"))))
    for flagged in similar.get("review") or []:
        reasons = [str(name) for name in flagged.get("reasons") or [] if f"review.{name}" in WORDS[strings.DEFAULT]]
        flags.setdefault(str(flagged.get("key")), []).append(word(
            "review_flag", reasons=html_text("; ".join(word(f"review.{name}") for name in reasons))))
    return flags


def _sources(similar: dict[str, Any]) -> list[dict[str, Any]]:
    """The flagged matches with a source no submission may copy (solutions/, torch's scaler): similarity.json's
    ``sources`` (every one); a folder written before it had them: those among the listed pairs."""
    if "sources" in similar:
        return [match for match in similar.get("sources") or [] if isinstance(match, dict)]
    found = []
    for pair in similar.get("pairs") or []:
        a, b = pair.get("a") or {}, pair.get("b") or {}
        if pair.get("flagged") and (a.get("solution") or b.get("solution")):
            me, source = (a, b) if b.get("solution") else (b, a)
            found.append({**pair, "submission": me, "source": source.get("source") or "solution"})
    return found


def _file_cells(files: Sequence[str], scores: dict[str, Any]) -> list[str]:
    """One cell per compared file: its similarity and the tokens the two share ("-" where they share none)."""
    cells = []
    for file in files:
        entry = scores.get(file)
        if isinstance(entry, dict):
            cells.append(f'<span class="nowrap">{float(entry.get("similarity", 0)):.2f} '
                         f'({html_text(word("tokens", count=entry.get("tokens", 0)))})</span>')
        else:
            cells.append(f"{float(entry):.2f}" if isinstance(entry, (int, float)) else "-")
    return cells


def similarity_section(similar: dict[str, Any]) -> str:
    if not similar:
        return (f'<section id="similarity"><h2>{html_text(word("similarity"))}</h2>'
                f'<p>{html_text(word("no_similarity"))}</p></section>')
    parts = ["<p>" + html_text(word("compared", count=similar.get("compared")))
             + (html_text(word("with_solution")) if similar.get("solution_compared") else "")
             + word("threshold", threshold=f"{float(similar.get('threshold', 0)):g}",
                    reason=html_text(similar.get("threshold_reason", "")), link=html_link(SIMILARITY_PAGE, SIMILARITY_PAGE))
             + "</p>", f'<p class="note">{html_text(word("score_text"))}</p>']
    for cluster in similar.get("clusters") or []:
        labels = [str(label) for label in cluster.get("labels") or []]
        parts.append("<p>" + word("identical_files", count=len(labels), labels=html_text(", ".join(labels)),
                                  link=html_link(f"{SIMILARITY_PAGE}#{cluster.get('anchor')}", word("see"))) + "</p>")
    markers = similar.get("markers") or []
    if markers:
        found = html_text("; ".join(f"{m.get('label')} ({', '.join(m.get('files') or [])})" for m in markers))
        parts.append("<p>" + word("markers_left", link=html_link(f"{SIMILARITY_PAGE}#markers", word("see")), found=found)
                     + "</p>")
    files = [str(f) for f in similar.get("files") or []]
    sources = _sources(similar)
    if sources:  # its own part, every match: a copy of solutions/ is told apart from the pairs of students
        rows = [[html_link(f"{SIMILARITY_PAGE}#{m.get('anchor')}", str(m.get("anchor"))),
                 html_text((m.get("submission") or {}).get("label", "")),
                 word("matches_" + str(m.get("source") or "solution")), f"{float(m.get('score', 0)):.2f}",
                 *_file_cells(files, m.get("files") or {})] for m in sources]
        parts.append(f'<h3 id="sources-heading">{html_text(word("sources"))}</h3>'
                     + html_table(heads("sources_head") + files, rows, "sources"))
    flagged = int(similar.get("flagged") or 0)
    pairs = [p for p in similar.get("pairs") or [] if p.get("flagged")]
    shown = pairs[:SHOWN_PAIRS]
    if not flagged:
        parts.append(f"<p>{html_text(word('no_pair'))}</p>")
    else:
        where = (word("pairs_where_some", count=similar.get("in_page"), page=SIMILARITY_PAGE)
                 if int(similar.get("in_page") or 0) < flagged else word("pairs_where_all", page=SIMILARITY_PAGE))
        parts.append('<p id="pairs-shown">' + html_text(word("pairs_shown", shown=len(shown), flagged=flagged,
                                                             where=where)) + "</p>")
        rows = [[html_link(f"{SIMILARITY_PAGE}#{p.get('anchor')}", str(p.get("anchor"))),
                 html_text((p.get("a") or {}).get("label", "")), html_text((p.get("b") or {}).get("label", "")),
                 f"{float(p.get('score', 0)):.2f}", *_file_cells(files, p.get("files") or {})] for p in shown]
        parts.append(html_table(heads("pairs_head") + files, rows, "pairs"))
    return f'<section id="similarity"><h2>{html_text(word("similarity"))}</h2>' + "".join(parts) + "</section>"


def changes_section(changes: Sequence[dict[str, str]]) -> str:
    if not changes:
        return ""
    shown = changes[:SHOWN_PAIRS]
    said = (word("changes_some", shown=len(shown), total=len(changes), file=CHANGES_NAME)
            if len(shown) < len(changes) else word("changes_all", total=len(changes), file=CHANGES_NAME))
    rows = [[html_text(c.get(key, "")) for key in ("submission", "old_score", "new_score", "change", "test",
                                                    "old_points", "new_points", "cause")] for c in shown]
    maxima = sorted({(c.get("old_max"), c.get("new_max")) for c in changes
                     if c.get("old_max") and c.get("new_max") and float(c["old_max"]) != float(c["new_max"])})
    moved = "".join(f'<p class="flag" id="max-moved">' + html_text(word(
        "changes_max", old=f"{float(old):g}", new=f"{float(new):g}")) + "</p>" for old, new in maxima)
    return (f'<section id="changes"><h2>{html_text(word("changes"))}</h2>{moved}<p>{html_text(said)}</p>'
            + html_table(heads("changes_head"), rows) + "</section>")
