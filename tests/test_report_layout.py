"""report.html's students table as a TA sees it, laid out by headless chromium: a class fits a 1400-pixel window
one line per submission, sorts by any column, and keeps Korean words whole.

A batch folder is written here (no grading: a gradebook and each submission's results.json, a similarity.json),
with the worst lines a class has: every row failed, a long note, long names and flags.  A copy of its report.html
gets a measuring script after the page's own (allowed by its digest beside the page's in the page's own policy, so
the page's script runs under the policy it ships with) that reads the layout, clicks headings, and writes what it
found as JSON where --dump-dom shows it: one chromium launch per page.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from autograder.diagnosis import page_parts, report_html
from autograder.engine import rubric

NAMES = ["김민준", "이서연", "박지호", "최수아"]
NOTE = "loss_scaler.py를 가져올 수 없어서 그 파일이 필요한 테스트는 모두 0점입니다: SyntaxError (12번째 줄) " * 2
#: Reads the students table after the page's script ran: the window's and the table's widths, each row's height and
#: that of a row of short content, each cell's line boxes and whether it overflows (a heading: its button), then the
#: first column's order and the headings' aria-sort after clicking headings (``CLICKS``: column indices, in turn).
MEASURE = """(function () {
  var table = document.getElementById('student-table'), body = table.tBodies[0];
  var heads = table.tHead.rows[0].cells, range = document.createRange();
  function lines(cell) {  // the line boxes its text takes: its text's boxes, those starting below the last line's
    var walk = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT), boxes = [], count = 0, bottom = -Infinity;
    while (walk.nextNode()) {
      range.selectNodeContents(walk.currentNode);
      boxes.push.apply(boxes, Array.from(range.getClientRects()));
    }
    boxes.sort(function (a, b) { return a.top - b.top; }).forEach(function (box) {
      if (box.top >= bottom - 1) count += 1;
      bottom = Math.max(bottom, box.bottom);
    });
    return count;
  }
  function cut(cell) { var box = cell.querySelector('button') || cell; return box.scrollWidth > box.clientWidth; }
  function order() { return Array.from(body.rows, function (row) { return row.cells[0].textContent.trim(); }); }
  var found = {window: window.innerWidth, page: document.documentElement.scrollWidth, table: table.scrollWidth,
               right: table.getBoundingClientRect().right, heights: Array.from(body.rows, function (row) {
                 return row.getBoundingClientRect().height; }),
               lines: Array.from(table.rows, function (row) { return Array.from(row.cells, lines); }),
               cut: Array.from(table.rows, function (row) { return Array.from(row.cells, cut); }),
               buttons: Array.from(heads, function (head) { return !!head.querySelector('button'); }),
               hint: !document.getElementById('sort-hint').hidden, clicks: []};
  var probe = body.rows[0].cloneNode(true);
  Array.from(probe.cells, function (cell) { cell.textContent = 'x'; });
  body.appendChild(probe);
  found.short = probe.getBoundingClientRect().height;
  body.removeChild(probe);
  CLICKS.forEach(function (column) {
    heads[column].querySelector('button').click();
    found.clicks.push({column: column, order: order(),
                       sort: Array.from(heads, function (head) { return head.getAttribute('aria-sort'); })});
  });
  document.body.insertAdjacentHTML('beforeend', '<pre id="measured">' + JSON.stringify(found) + '</pre>');
})();"""


def measure(browser: str, page: Path, tmp_path: Path, width: int, clicks: list[int]) -> dict[str, Any]:
    """Lay ``page`` out at ``width`` x 900 in headless chromium, run :data:`MEASURE` after the page's script (under
    the page's own policy, which allows it by digest), and return what it found."""
    script = MEASURE.replace("CLICKS", json.dumps(clicks))
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")
    text = page.read_text(encoding="utf-8")
    assert text.count(page_parts.SCRIPT_SOURCE) == 1 and text.count("</body>") == 1
    measured = tmp_path / "measured.html"
    measured.write_text(text.replace(page_parts.SCRIPT_SOURCE, f"{page_parts.SCRIPT_SOURCE} 'sha256-{digest}'")
                        .replace("</body>", f"<script>{script}</script></body>"), encoding="utf-8")
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
             f"--window-size={width},900", f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run([browser, *flags, "--dump-dom", measured.as_uri()], capture_output=True, text=True,
                         timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    found = dom.stdout.rsplit('<pre id="measured">', 1)  # (the script's own text holds the tag too)
    assert len(found) == 2 and found[1].startswith("{"), dom.stdout[-2000:]
    return json.loads(found[1].split("</pre>", 1)[0].replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">"))


def write_batch(out: Path, students: list[dict[str, Any]], similarity: dict[str, Any] | None = None) -> None:
    """A batch folder as grading leaves it, for the report only: gradebook.csv, each submission's results.json
    (``failed``: the rubric numbers it failed; ``notes``, ``diagnosis``), similarity.json where given."""
    out.mkdir()
    items = [f"{item.number} {item.test}" for item in rubric.ITEMS]
    with (out / "gradebook.csv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["submission", "name", "sid", "email", "score", "max_score", "status", *items])
        for s in students:
            failed = set(s.get("failed", ()))
            writer.writerow([s["folder"], s.get("name", ""), s.get("sid", ""), "", s["score"], rubric.max_points(),
                             "graded", *[0 if item.number in failed else item.points for item in rubric.ITEMS]])
            (out / s["folder"]).mkdir()
            (out / s["folder"] / "feedback.md").write_text("# Feedback\n", encoding="utf-8")
            tests = [{"number": item.number, "name": f"{item.number} {item.title}", "max_score": item.points,
                      "score": 0.0 if item.number in failed else item.points,
                      "status": "failed" if item.number in failed else "passed"} for item in rubric.ITEMS]
            (out / s["folder"] / "results.json").write_text(json.dumps({"score": s["score"], "tests": tests,
                "extra_data": {"notes": s.get("notes", []), "diagnosis": s.get("diagnosis", {})}}), encoding="utf-8")
    if similarity:
        (out / "similarity.json").write_text(json.dumps(similarity), encoding="utf-8")


def _side(folder: str) -> dict[str, Any]:
    return {"key": folder, "label": folder, "members": [], "solution": False}


#: A class with the lines that grew tall: every row failed (with a long note and many mistakes), long names and
#: flags; scores whose text order is not their order (9 before 80, and 45.25 before 45.5, only as numbers), a tie
#: (77, kept in the gradebook's order), a student with no name ("-", last either way).
EVERY_ROW = [item.number for item in rubric.ITEMS if item.points]
HALF = len(EVERY_ROW) // 2  # hal and ivy fail as many rows, whatever the rubric's count
CLASS = [
    {"folder": "ada", "name": "Ada Lovelace", "sid": "1001", "score": 90},
    {"folder": "bo", "name": "Bo Svensson", "sid": "1002", "score": 9, "failed": EVERY_ROW[:-3],
     "notes": ["Not implemented yet: ToyLossScaler.__init__ (Task 1), amp_step (Task 2). The tests that use them "
               "score 0.\nThe rest of the note, on a second line."],
     "diagnosis": {number: ["growth_off_by_one", "no_zero_grad"] for number in EVERY_ROW[:8]}},
    {"folder": "cy", "name": "Cy Young", "sid": "1003", "score": 77, "failed": EVERY_ROW[3:6],
     "diagnosis": {EVERY_ROW[4]: ["growth_off_by_one"]}},
    {"folder": "submission_" + "1234567890" * 4, "name": "Dee " + "Longname" * 8, "sid": "20240000000001",
     "score": 89.8636, "failed": EVERY_ROW[:1]},
    {"folder": "eve", "name": "Eve Adams", "sid": "1005", "score": 80, "failed": EVERY_ROW[-2:]},
    {"folder": "fay", "name": "", "sid": "", "score": 77, "failed": EVERY_ROW[1:4]},
    {"folder": "gus", "name": "Gus Grissom", "sid": "1007", "score": 0, "failed": EVERY_ROW,
     "notes": ["x" * 400]},
    {"folder": "hal", "name": "Hal Abelson", "sid": "1008", "score": 45.5, "failed": EVERY_ROW[:HALF * 2:2]},
    {"folder": "ivy", "name": "Ivy Ito", "sid": "1009", "score": 45.25, "failed": EVERY_ROW[1:HALF * 2:2]},
]
SIMILAR = {"threshold": 0.5, "threshold_reason": "test", "compared": len(CLASS), "flagged": 4, "in_page": 4,
           "clusters": [{"anchor": "cluster-1", "keys": ["bo", "gus", "hal"], "labels": ["bo", "gus", "hal"]}],
           "pairs": [{"anchor": f"pair-{k}", "a": _side("bo"), "b": _side(other), "score": 0.9, "flagged": True,
                      "files": {}} for k, other in enumerate(["cy", "eve", "fay", "ada"], 1)]}


def test_the_students_table_fits_1400_pixels_one_line_per_submission_and_sorts(tmp_path: Path,
                                                                               headless_browser: str) -> None:
    out = tmp_path / "out"
    write_batch(out, CLASS, SIMILAR)
    report_html.write(out)
    page = (out / "report.html").read_text(encoding="utf-8")
    # the page's order without a script: the gradebook's, every line's whole failed list in its entry
    assert page.index(">ada</a>") < page.index(">bo</a>") < page.index(">hal</a>")
    entry = page.split('id="entry-2"', 1)[1].split('<div class="entry"', 1)[0]
    assert all(f"{number} " in entry for number in CLASS[1]["failed"]) and "The rest of the note" in entry
    score, student, failed = 3, 1, 4
    found = measure(headless_browser, out / "report.html", tmp_path, 1400, [score, score, student, failed])
    assert found["window"] == 1400
    assert found["page"] <= found["window"] and found["table"] <= found["window"] and found["right"] <= 1400, found
    # one line per submission: every cell one line box, every row as tall as a row of short content
    assert all(count == 1 for row in found["lines"] for count in row), found["lines"]
    assert len(found["heights"]) == len(CLASS)
    assert all(abs(height - found["short"]) <= 2 for height in found["heights"]), (found["heights"], found["short"])
    assert found["short"] < 40  # one text line, about 33 px, whatever the row holds
    # nothing that a TA scans for is cut: the headings, the scores and the failed rows' short form; the long texts
    # are (so the data did overflow, and the table did not widen for it)
    header, *rows = found["cut"]
    assert not any(header), header
    assert not any(row[score] or row[failed] for row in rows), rows
    assert rows[1][5] and rows[1][7] and rows[3][0] and rows[3][1], rows  # bo's note and mistakes, dee's names
    assert all(found["buttons"]) and found["hint"]
    # sorting: by score as numbers, up then down (ties in the gradebook's order), then by name as text ("-" last)
    folders = [s["folder"] for s in CLASS]
    up = sorted(folders, key=lambda f: next(s["score"] for s in CLASS if s["folder"] == f))
    down = sorted(folders, key=lambda f: -next(s["score"] for s in CLASS if s["folder"] == f))
    by_name = sorted((s for s in CLASS if s["name"]), key=lambda s: s["name"])
    assert [click["order"] for click in found["clicks"][:3]] == [up, down, [s["folder"] for s in by_name] + ["fay"]]
    assert up[:4] == ["gus", "bo", "ivy", "hal"] and down[:2] == ["ada", folders[3]]  # 9 < 45.25 < 45.5 < 89.8636
    assert [click["sort"][click["column"]] for click in found["clicks"]] == ["ascending", "descending", "ascending",
                                                                             "ascending"]
    assert all(sorted(filter(None, click["sort"])) == [click["sort"][click["column"]]] for click in found["clicks"])
    by_failed = found["clicks"][3]["order"]  # as counts: 0, 1, 2, 3, 3, 11, ...
    assert by_failed[0] == "ada" and by_failed[-3:] == ["ivy", "bo", "gus"], by_failed


def test_hangul_headers_names_and_scores_stay_whole(tmp_path: Path, headless_browser: str,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Hangul may break between any two syllables unless told otherwise: 학생, 학번 and 점수 came out one syllable per
    line and "77 / 90" over three lines beside the wide problems and similarity columns.  In a narrow window (1024
    pixels) every cell keeps one line, and the narrow columns keep their words whole: only the wide ones are cut."""
    monkeypatch.setenv("AMP_LANGUAGE", "ko")
    out = tmp_path / "out"
    write_batch(out, [{"folder": f"student_{k}", "name": name, "sid": f"20240{k:04d}", "score": 77,
                       "failed": [item.number for item in rubric.ITEMS[:8]], "notes": [NOTE],
                       "diagnosis": {"1.5": ["a_bug"] * 3}} for k, name in enumerate(NAMES)])
    report_html.write(out)
    page = (out / "report.html").read_text(encoding="utf-8")
    assert "<th>학생</th><th>학번</th><th>점수</th>" in page and "열 제목을 누르면" in page
    found = measure(headless_browser, out / "report.html", tmp_path, 1024, [])
    assert found["page"] <= found["window"] == 1024, found
    header, *rows = found["lines"]
    assert all(count == 1 for count in header) and all(count == 1 for cells in rows for count in cells), found["lines"]
    header, *rows = found["cut"]
    assert header[1:4] == [False] * 3, header  # 학생, 학번, 점수: whole
    for cells in rows:
        assert cells[1:5] == [False] * 4, cells  # the name, the SID, "77 / 90" and the failed rows' short form
        assert any(cells[5:])  # the wide columns were cut: the page was narrow enough to squeeze the others
    shot = tmp_path / "report-ko.png"  # kept for a human to look at: out/test-screenshots/report-ko.png
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1024,900",
             f"--user-data-dir={tmp_path / 'profile'}", "--hide-scrollbars", f"--screenshot={shot}"]
    done = subprocess.run([headless_browser, *flags, (out / "report.html").as_uri()], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and shot.is_file(), done.stderr[-2000:]
    keep = Path(__file__).resolve().parents[1] / "out" / "test-screenshots"
    keep.mkdir(parents=True, exist_ok=True)
    shutil.copy(shot, keep / "report-ko.png")
