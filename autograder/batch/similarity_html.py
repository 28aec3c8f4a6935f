"""``similarity.html``: the flagged pairs side by side, matched regions highlighted.

One self-contained page (no script, no external file); unmatched code far from any match
is cut to "..." so that the matches are what a TA sees.  The matched regions come from
copydetect's ``compare_files`` (slices mapped back to the unfiltered source) and its
``highlight_overlap``, which HTML-escapes the code; every name is escaped here.  Its words are the TA's pages'
table (:mod:`autograder.diagnosis.page_words`, keys ``sim.*``), in the feedback's language.
"""

from __future__ import annotations

from autograder.batch.similarity_data import FILES, Pair, Report, copied_slices, copydetect_utils
from autograder.diagnosis.page_words import heads, word
from autograder.engine.escape import html_text

STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; word-break: keep-all; }
table.pairs { border-collapse: collapse; }
table.pairs td, table.pairs th { border: 1px solid #ccc; padding: 0.2em 0.6em; }
.nowrap { white-space: nowrap; }
section.pair { margin-top: 2em; border-top: 2px solid #888; }
div.side-by-side { display: flex; gap: 1em; }
div.side-by-side > div { flex: 1; min-width: 0; }
pre.code { background: #f6f6f6; padding: 0.5em; font-size: 12px; line-height: 1.35;
           white-space: pre-wrap; overflow-wrap: anywhere; }
mark.match { background: #ffb3b3; }
.flag { color: #a00000; font-weight: bold; }
"""
#: unmatched lines kept around each match (the rest is shown as "...")
CONTEXT_LINES = 6


def _sides(pair: Pair, file: str, report: Report) -> tuple[str, str]:
    highlight_overlap = copydetect_utils().highlight_overlap

    first, second = report.prints[(pair.a.key, file)], report.prints[(pair.b.key, file)]
    slices_a, slices_b = copied_slices(first, second)
    shown = []
    for fingerprint, slices in ((first, slices_a), (second, slices_b)):
        if slices.size == 0 or not fingerprint.raw_code:
            shown.append(html_text(fingerprint.raw_code))
        else:
            code, _ = highlight_overlap(fingerprint.raw_code, slices.astype(int), "<mark class='match'>", "</mark>",
                                        truncate=CONTEXT_LINES, escape_html=True)
            shown.append(code)
    return shown[0], shown[1]


def _overview(report: Report) -> str:
    flagged, shown = report.flagged, report.listed
    current = sum(1 for party in report.parties if not party.reference and not party.solution)
    references = sum(1 for party in report.parties if party.reference and not party.solution)
    cut = (word("sim.cut", shown=len(shown), flagged=len(flagged)) if flagged and len(shown) < len(flagged) else "")
    return (f"<p id='overview'>{word('sim.submissions', count=current)}"
            + (word("sim.references", count=references) if references else "")
            + ("" if report.solution_note else word("sim.with_solution"))
            + word("sim.threshold", threshold=f"{report.threshold:g}", reason=html_text(report.threshold_reason))
            + word("sim.flagged", count=len(flagged)) + cut
            + ("" if flagged else word("sim.none", count=len(shown)))
            + word("sim.highlighted") + "</p>" + f"<p>{html_text(word('score_text'))}</p>")


def _flags(report: Report) -> list[str]:
    """Clusters of identical submissions, matches with the reference solution or torch's scaler, leaked markers."""
    parts = []
    for rank, cluster in enumerate(report.clusters, 1):
        names = "".join(f"<li>{html_text(member.label)}</li>" for member in cluster.members)
        heading = word("sim.cluster", count=len(cluster.members))
        parts.append(f"<section class='cluster' id='cluster-{rank}'><h2>{heading}</h2><p>{word('sim.cluster_text')}</p>"
                     f"<ul>{names}</ul></section>")
    for source in ("solution", "torch"):  # the reference solution, torch's own scaler: a section each
        items = "".join("<li>" + word(f"sim.matches_{source}", score=f"{pair.score:.2f}", label=html_text(
            pair.copier_and_source[0].label)) + "</li>" for pair in report.matches_solution()
            if pair.copier_and_source[1].source == source)
        if items:
            parts.append(f"<section id='{source}'><h2>{word(f'sim.{source}')}</h2><ul>{items}</ul></section>")
    if report.markers:
        labels = {party.key: party.label for party in report.parties}
        items = "".join(f"<li>{html_text(labels.get(key, key))}: {html_text(', '.join(files))}</li>"
                        for key, files in sorted(report.markers.items()))
        parts.append(f"<section id='markers'><h2>{word('sim.markers')}</h2><p>{word('sim.markers_text')}</p>"
                     f"<ul>{items}</ul></section>")
    return parts


def render(report: Report) -> str:
    """The whole page in the feedback's language (same report, same bytes: no timestamps)."""
    shown = report.listed
    title = word("sim.title")
    parts = ["<!DOCTYPE html>", f"<html lang='{word('lang')}'><head><meta charset='utf-8'>",
             f"<title>{title}</title>", f"<style>{STYLE}</style></head><body>",
             f"<h1>{title}</h1>", _overview(report), *_flags(report)]
    if shown:
        head = "".join(f"<th>{html_text(name)}</th>" for name in [*heads("sim.pairs_head"), *FILES])
        parts += [f"<table class='pairs'><tr>{head}</tr>"]
        for rank, pair in enumerate(shown, 1):
            files = "".join(f"<td class='nowrap'>{pair.files[file].similarity:.2f} "
                            f"({word('tokens', count=pair.files[file].overlap)})</td>" if file in pair.files
                            else "<td>-</td>" for file in FILES)
            parts.append(f"<tr><td><a href='#pair-{rank}'>{rank}</a></td><td>{html_text(pair.a.label)}</td>"
                         f"<td>{html_text(pair.b.label)}</td><td>{pair.score:.2f}</td>{files}</tr>")
        parts.append("</table>")
    for rank, pair in enumerate(shown, 1):
        parts.append(f"<section class='pair' id='pair-{rank}'><h2>{rank}. {html_text(pair.a.label)} ~ "
                     f"{html_text(pair.b.label)}: {pair.score:.2f}</h2>")
        for file, entry in pair.files.items():
            left, right = _sides(pair, file, report)
            heading = word("sim.file", file=html_text(file), score=f"{entry.similarity:.2f}", overlap=entry.overlap)
            parts.append(f"<h3>{heading}</h3>"
                         "<div class='side-by-side'>"
                         f"<div><h4>{html_text(pair.a.label)} ({entry.similarity_a:.2f})</h4>"
                         f"<pre class='code'>{left}</pre></div>"
                         f"<div><h4>{html_text(pair.b.label)} ({entry.similarity_b:.2f})</h4>"
                         f"<pre class='code'>{right}</pre></div></div>")
        parts.append("</section>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
