"""The similarity report's texts: similarity.csv's rows, summary.md's section and similarity.json (what report.html
shows of it), from a :class:`~autograder.batch.similarity_data.Report` (:mod:`autograder.batch.similarity` computes
it; :mod:`autograder.batch.similarity_html` draws similarity.html)."""

from __future__ import annotations

from typing import Any

from autograder.batch.similarity_data import FILES, Pair, Party, Report
from autograder.diagnosis.page_words import word
from autograder.engine import strings
from autograder.engine.escape import csv_cell, markdown_inline

MAX_IN_SUMMARY = 10
CSV_NAME, HTML_NAME, JSON_NAME = "similarity.csv", "similarity.html", "similarity.json"
NOT_ASKED = "not asked for"  # the reference solution's note when the caller left it out

CSV_HEADER = ["pair", "submission_a", "name_a", "submission_b", "name_b", "file", "similarity", "similarity_a",
              "similarity_b", "overlapping_tokens", "pair_score"]


def csv_rows(report: Report) -> list[list[Any]]:
    rows = []
    for pair in report.pairs:
        for file in FILES:
            if file in pair.files:
                entry = pair.files[file]
                rows.append([pair.title, pair.a.key, pair.a.label, pair.b.key, pair.b.label, file, entry.similarity,
                             entry.similarity_a, entry.similarity_b, entry.overlap, pair.score])
    rows.sort(key=lambda row: (-row[10], -row[6], row[0], row[5]))  # the pairs as ranked, then their files
    return [[*map(csv_cell, row[:5]), *row[5:]] for row in rows]


def markdown_section(report: Report, link: str = HTML_NAME) -> str:
    """The summary.md section: threshold, what was compared, clusters, solution markers and the top pairs."""
    flagged = report.flagged
    current = [p for p in report.parties if not p.reference]
    solution = (strings.text("sim.with_solution") if not report.solution_note
                else "" if report.solution_note == NOT_ASKED
                else strings.text("sim.without_solution", why=markdown_inline(report.solution_note)))
    lines = ["", f"## {strings.text('sim.heading')}", "",
             strings.text("sim.compared", count=len(current), files=strings.text("sim.joiner").join(FILES), solution=solution, csv=CSV_NAME,
                          link=link),
             "", strings.text("sim.threshold", threshold=f"{report.threshold:g}", reason=report.threshold_reason),
             "", word("score_text"), ""]
    for rank, cluster in enumerate(report.clusters, 1):
        lines.append(strings.text("sim.identical", link=f"{link}#cluster-{rank}", labels=markdown_inline(cluster.label)))
    for pair in report.matches_solution():
        who, source = pair.copier_and_source
        lines.append(strings.text(f"sim.matches_{source.source}", score=f"{pair.score:.2f}",
                                  label=markdown_inline(who.label)))
    if report.markers:
        lines.append(strings.text("sim.markers", link=f"{link}#markers", found="; ".join(
            f"{markdown_inline(label_for(report, key))} ({', '.join(files)})"
            for key, files in sorted(report.markers.items()))))
    if report.review:
        lines.append(word("review_summary", found="; ".join(
            f"{markdown_inline(label_for(report, key))} ({'; '.join(word('review.' + name) for name in names)})"
            for key, names in sorted(report.review.items()))))
    if lines[-1] != "":
        lines.append("")
    if not flagged:
        lines.append(strings.text("sim.no_pair"))
        return "\n".join(lines) + "\n"
    lines += [strings.text("sim.flagged", count=len(flagged))
              + (strings.text("sim.top", count=MAX_IN_SUMMARY, link=link) if len(flagged) > MAX_IN_SUMMARY else ":"),
              "", "| " + " | ".join(strings.columns("sim.columns")) + " | " + " | ".join(FILES) + " |",
              "| ---: | --- | ---: | " + " | ".join("---:" for _ in FILES) + " |"]
    tokens = strings.text("sim.tokens")
    for rank, pair in enumerate(flagged[:MAX_IN_SUMMARY], 1):
        cells = [f"{pair.files[f].similarity:.2f} ({pair.files[f].overlap} {tokens})" if f in pair.files else "-"
                 for f in FILES]
        lines.append(f"| {rank} | [{markdown_inline(pair.a.label)} ~ {markdown_inline(pair.b.label)}]({link}#pair-{rank}) "
                     f"| {pair.score:.2f} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def label_for(report: Report, key: str) -> str:
    return next((party.label for party in report.parties if party.key == key), key)


def report_json(report: Report) -> dict[str, Any]:
    """similarity.json: what the class report (report.html) shows of this report, with similarity.html's anchors."""
    def side(party: Party) -> dict[str, Any]:
        return {"key": party.key, "label": party.label, "members": [m.key for m in party.members],
                "solution": party.solution, **({"source": party.source} if party.solution else {})}

    def files(pair: Pair) -> dict[str, dict[str, Any]]:
        return {file: {"similarity": entry.similarity, "tokens": entry.overlap} for file, entry in pair.files.items()}

    listed = report.listed
    anchors = {id(pair): f"pair-{rank}" for rank, pair in enumerate(listed, 1)}
    return {
        "threshold": report.threshold, "threshold_reason": report.threshold_reason,
        "compared": sum(1 for party in report.parties if not party.reference), "files": list(FILES),
        "solution_compared": not report.solution_note, "solution_note": report.solution_note,
        "flagged": len(report.flagged), "in_page": len(listed) if report.flagged else 0,
        "pairs": [{"anchor": f"pair-{rank}", "a": side(pair.a), "b": side(pair.b), "score": pair.score,
                   "flagged": pair.score >= report.threshold, "files": files(pair)}
                  for rank, pair in enumerate(listed, 1)],
        # every flagged match with a source no submission may copy, however many pairs are flagged (the page's
        # pairs stop at MAX_REPORTED; a copy of solutions/ must never fall off the end)
        "sources": [{"anchor": anchors.get(id(pair), pair.copier_and_source[1].source),
                     "submission": side(pair.copier_and_source[0]), "source": pair.copier_and_source[1].source,
                     "score": pair.score, "files": files(pair)} for pair in report.matches_solution()],
        # every flagged pair of students, however many (report.html's students table flags each of its sides; the
        # pairs past similarity.html's list have no anchor: similarity.csv holds them)
        "flags": [{"anchor": anchors.get(id(pair), ""), "a": side(pair.a), "b": side(pair.b), "score": pair.score}
                  for pair in report.flagged if not (pair.a.solution or pair.b.solution)],
        "clusters": [{"anchor": f"cluster-{rank}", "keys": [m.key for m in cluster.members],
                      "labels": [m.label for m in cluster.members]} for rank, cluster in enumerate(report.clusters, 1)],
        "markers": [{"key": key, "label": label_for(report, key), "files": files}
                    for key, files in sorted(report.markers.items())],
        "review": [{"key": key, "label": label_for(report, key), "reasons": names}
                   for key, names in sorted(report.review.items())],
    }
