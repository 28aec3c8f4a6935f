"""The class report of a batch (autograder/diagnosis/report.py, report_html.py): report.html, items.csv, mistakes.csv.

One real batch (``python -m autograder grade`` on a Gradescope-style export, with a diagnosis table of two bugs):
the solution, a correct variant, the same update-rule bug twice, one Task-2 bug and a bug the table does not
hold; one student's name and SID are hostile.  The report's numbers are checked against gradebook.csv,
summary.md and the results.json files; the page is opened in headless chromium (what a TA sees: the students
table, links that lead to files and anchors that exist, no console message, a screenshot).  Synthetic batch
folders check escaping and the counting rule shared with summary.md.
"""

from __future__ import annotations

import base64
import csv
import html
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from autograder.diagnosis import page_parts, report, report_html, words
from autograder.diagnosis.table import load_catalogue
from autograder.engine import rubric
from checks.words import MISTAKES
from conftest import ROOT, grade

catalogue = load_catalogue()
BY_NAME = {entry.name: entry for entry in catalogue.ENTRIES}
TABLE_BUGS = ["growth_off_by_one", "no_zero_grad"]
#: submission folder -> catalogue entry ("solution": the reference itself)
#: (frank fails 1.6 with a bug the table does not hold: he must not be diagnosed as alice and bob are.)
BATCH = {"alice": "growth_off_by_one", "bob": "growth_off_by_one", "carol": "no_zero_grad",
         "dave": "plain_style", "erin": "solution", "frank": "tracker_not_reset_after_growth"}
#: Gradescope metadata for the export (folder -> name, sid): one student's name and SID are hostile.
HOSTILE_NAME, HOSTILE_SID = '<script>alert(1)</script> "Bobby" **bold** [x](y)', '"><img src=x onerror=alert(2)>'
STUDENTS = {"alice": ("Alice Anders", "1001"), "bob": (HOSTILE_NAME, HOSTILE_SID), "carol": ("Carol Chen", "1003"),
            "dave": ("Dave Diaz", "1004"), "erin": ("Erin Ek", "1005"), "frank": ("Frank Fu", "1006")}
#: The diagnosis compares the answers the call plan fetches: a batch records one when each worker grades
#: at least 3 submissions (autograder.batch.pools.PLAN_MIN_PER_WORKER), so the workers are fixed at 2.
JOBS = ["--jobs", "2"]


def _csv(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


@pytest.fixture(scope="session")
def batch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("report")
    table = base / "diagnosis.json"
    done = subprocess.run([sys.executable, "-m", "autograder.diagnosis", "build", "--out", str(table), "--quiet",
                           "--bugs", ",".join(TABLE_BUGS)], cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    export = base / "export"
    for folder, entry in BATCH.items():
        if entry == "solution":
            shutil.copytree(ROOT / "solutions", export / folder)
        else:
            catalogue.materialize(BY_NAME[entry], export / folder)
    (export / "submission_metadata.yml").write_text(yaml.safe_dump(
        {folder: {":submitters": [{":name": name, ":sid": sid, ":email": f"{folder}@example.edu"}]}
         for folder, (name, sid) in STUDENTS.items()}))
    done = grade([export], base / "out", *JOBS, env={"AMP_DIAGNOSIS": str(table)})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return base / "out"


def test_items_agree_with_the_gradebook(batch: Path) -> None:
    gradebook = _csv(batch / "gradebook.csv")
    items = {row["test"]: row for row in _csv(batch / "items.csv")}
    assert list(items) == [item.number for item in rubric.ITEMS]
    ranked = sorted(gradebook, key=lambda line: (-float(line["score"]), line["submission"]))
    size = round(0.27 * len(ranked))
    for item in rubric.ITEMS:
        column = f"{item.number} {item.test}"
        row = items[item.number]
        assert float(row["max_score"]) == item.points
        if item.points == 0:
            continue  # a gate row: its status is in results.json, not in the gradebook
        full = [float(line[column]) == item.points for line in gradebook]
        assert float(row["pass_rate"]) == pytest.approx(sum(full) / len(gradebook), abs=1e-4)
        upper = sum(float(line[column]) == item.points for line in ranked[:size]) / size
        lower = sum(float(line[column]) == item.points for line in ranked[-size:]) / size
        assert float(row["discrimination"]) == pytest.approx(upper - lower, abs=1e-4)
    assert float(items["1.6"]["pass_rate"]) == pytest.approx(3 / 6)  # alice, bob and frank fail it


def test_mistakes_agree_with_the_results(batch: Path) -> None:
    found = {(row["mistake"], row["test"]): row for row in _csv(batch / "mistakes.csv")}
    counted: dict[tuple[str, str], list[str]] = {}
    for line in _csv(batch / "gradebook.csv"):
        results = json.loads((batch / line["submission"] / "results.json").read_text())
        for number, bugs in results["extra_data"].get("diagnosis", {}).items():
            counted.setdefault(("+".join(sorted(bugs)), number), []).append(line["submission"])
    assert set(found) == set(counted)
    for key, names in counted.items():
        assert int(found[key]["count"]) == len(names) and found[key]["submissions"].split(";") == sorted(names)
    assert found[("growth_off_by_one", "1.6")]["submissions"] == "alice;bob"  # not frank
    assert ("no_zero_grad", "2.4") in found
    first = next(iter(found))  # most common first
    assert first == ("growth_off_by_one", "1.6")


def _open(browser: str, page: Path, profile: Path) -> subprocess.CompletedProcess[str]:
    """Load ``page`` headless; stdout is the parsed DOM, stderr holds every console message."""
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
             "--disable-background-networking", f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0"]
    return subprocess.run([browser, *flags, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120)


def test_the_page_renders_in_headless_chromium_without_console_messages(batch: Path, tmp_path: Path,
                                                                        headless_browser: str) -> None:
    browser = headless_browser  # tests/conftest.py: installed where it may be, never skipped under CI
    page = batch / "report.html"
    done = _open(browser, page, tmp_path / "profile")
    assert done.returncode == 0, done.stderr[-2000:]
    consoled = [line for line in done.stderr.splitlines() if ":CONSOLE" in line]
    assert consoled == [], consoled  # an error, or a blocked request (the page's policy forbids them all)
    dom = done.stdout
    assert '<img alt="score histogram" src="data:image/png;base64,' in dom and "Class report" in dom
    assert MISTAKES["en"]["growth_off_by_one"] in dom
    assert "alice, bob" in dom
    # what a TA sees: one line per student, in gradebook order, with name, SID, score and a link to feedback.md
    table = dom.split('<table id="student-table">', 1)[1].split("</table>", 1)[0]
    lines = re.findall(r"<tr><td>(.*?)</td></tr>", table.split("<tbody>", 1)[1], re.S)
    assert len(lines) == len(BATCH)
    gradebook = _csv(batch / "gradebook.csv")
    for line, row in zip(lines, gradebook):
        cells = line.split("</td><td>")
        assert cells[0] == f'<a href="{row["submission"]}/feedback.md">{row["submission"]}</a>'
        assert html.unescape(cells[1]) == STUDENTS[row["submission"]][0]  # the name as typed, never as markup
        assert html.unescape(cells[2]) == STUDENTS[row["submission"]][1]
        assert cells[3] == f'{float(row["score"]):g} / {rubric.max_points():g}'
    # the page's one script is its own (sorting the table); the hostile name's is text
    assert re.findall(r"<script\b[^>]*>(.*?)</script>", dom, re.S) == [page_parts.SCRIPT]
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in dom and "<img src=\"x\"" not in dom
    assert dom.count('<th><button type="button">') == 8  # the script ran: each heading of the table sorts it
    bob = lines[list(BATCH).index("bob")]
    assert "1.6: growth_off_by_one" in bob and "identical" in bob  # alice and bob handed in the same files
    assert "matches the reference solution" in lines[list(BATCH).index("erin")]  # erin's is solutions/ itself
    # every link leads to a file of the batch, and every anchor to an element of that file
    links = re.findall(r'href="([^"]*)"', dom)
    assert len(links) >= len(BATCH) + 3
    for link in links:
        target, _, anchor = html.unescape(link).partition("#")
        target = target or page.name  # "#entry-2": an anchor of the page itself
        assert (batch / target).is_file(), link
        if anchor:
            assert re.search(rf"""id=['"]{re.escape(anchor)}['"]""", (batch / target).read_text()), link
    # what it looks like (kept for a human to look at: out/test-screenshots/report.png)
    shot = tmp_path / "report.png"
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars",
             f"--user-data-dir={tmp_path / 'profile3'}", "--window-size=1400,2200"]
    done = subprocess.run([browser, *flags, f"--screenshot={shot}", page.as_uri()], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and shot.is_file() and shot.stat().st_size > 20_000, done.stderr[-2000:]
    keep = ROOT / "out" / "test-screenshots"
    keep.mkdir(parents=True, exist_ok=True)
    shutil.copy(shot, keep / "report.png")
    # the check can fail: the same page asking for an external image logs the blocked request
    leaky = tmp_path / "leaky.html"
    leaky.write_text(page.read_text().replace("<h1>", "<img src=\"https://example.com/x.png\"><h1>", 1))
    done = _open(browser, leaky, tmp_path / "profile2")
    assert any(":CONSOLE" in line and "example.com" in line for line in done.stderr.splitlines()), done.stderr[-2000:]


def _summary_md_rows(text: str) -> dict[str, tuple[int, int]]:
    """summary.md's "Tests, most failed first" table: row number -> (passed, failed)."""
    part = text.split("## Tests, most failed first", 1)[1].split("\n## ", 1)[0]
    found = {}
    for line in part.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 6 and re.fullmatch(r"\d+\.\d+", cells[0]):
            found[cells[0]] = (int(cells[3]), int(cells[4]))
    return found


def _report_rows(page: str) -> dict[str, tuple[int, int]]:
    """report.html's rows table: row number -> (passed, failed)."""
    part = page.split('<section id="rows">', 1)[1].split("</section>", 1)[0]
    return {m[0]: (int(m[1]), int(m[2])) for m in
            re.findall(r"<tr(?: class=\"low\")?><td>(\d+\.\d+)</td><td>.*?</td><td>[^<]*</td><td>(\d+)</td><td>(\d+)</td>",
                       part)}


def test_every_count_agrees_across_summary_md_report_html_items_csv_and_the_gradebook(batch: Path) -> None:
    summary_rows = _summary_md_rows((batch / "summary.md").read_text())
    page = (batch / "report.html").read_text()
    page_rows = _report_rows(page)
    items = {row["test"]: (int(row["passed"]), int(row["failed"])) for row in _csv(batch / "items.csv")}
    gradebook = _csv(batch / "gradebook.csv")
    from_gradebook = {item.number: (sum(float(line[f"{item.number} {item.test}"]) == item.points for line in gradebook),
                                    sum(float(line[f"{item.number} {item.test}"]) != item.points for line in gradebook))
                      for item in rubric.ITEMS}
    assert set(summary_rows) == set(page_rows) == set(items) == set(from_gradebook) == {i.number for i in rubric.ITEMS}
    assert summary_rows == page_rows == items == from_gradebook
    assert from_gradebook["1.6"] == (3, 3)  # written here: alice, bob and frank fail it
    # the batch's counts: the page says what summary.md says
    first = (batch / "summary.md").read_text().split("\n- ", 1)[1].split("\n", 1)[0]
    counts = page.split('<p id="counts">', 1)[1].split("</p>", 1)[0].replace("<b>", "**").replace("</b>", "**")
    assert counts.startswith(first), (first, counts)
    assert "Submissions: **6**; graded: 6 (2 with full marks, 4 lost points)" in counts


def test_a_row_marked_failed_at_full_points_is_failed_everywhere(tmp_path: Path) -> None:
    """The rule summary.md and report.html share: a row with its points but status "failed" (a gate) failed."""
    from autograder.batch import inputs, summary
    from autograder.batch.ledger import Entry

    rows = []
    for name, gate_failed in (("a", False), ("b", True)):
        tests = [{"name": f"{i.number} {i.title}", "number": i.number, "score": i.points, "max_score": i.points,
                  "status": "failed" if gate_failed and i.number == "1.1" else "passed"} for i in rubric.ITEMS]
        results = {"score": rubric.max_points(), "tests": tests}
        rows.append((inputs.Submission(name, tmp_path / name, name),
                     Entry(name, "d", "g", "graded", rubric.max_points(), rubric.max_points(), results)))
    summary.write_outputs(tmp_path, rows, False)
    report_html.write(tmp_path)
    assert _summary_md_rows((tmp_path / "summary.md").read_text())["1.1"] == (1, 1)
    assert _report_rows((tmp_path / "report.html").read_text())["1.1"] == (1, 1)
    assert next(r for r in _csv(tmp_path / "items.csv") if r["test"] == "1.1")["pass_rate"] == "0.5"


def test_names_are_escaped_in_the_page_and_the_csv(tmp_path: Path) -> None:
    hostile, formula = "<img src=x onerror=alert(1)>", "=HYPERLINK(1)"
    columns = [f"{item.number} {item.test}" for item in rubric.ITEMS]
    lines = []
    for name, number, bug in ((hostile, "1.6", "growth_off_by_one"), (formula, "1.5", "backoff_divides"),
                              ("plain", None, None)):
        (tmp_path / name).mkdir()
        tests = [{"name": f"{item.number} {item.title}", "number": item.number, "max_score": item.points,
                  "score": 0.0 if item.number == number else item.points,
                  "status": "failed" if item.number == number else "passed"} for item in rubric.ITEMS]
        extra = {"diagnosis": {number: [bug]}} if bug else {}
        (tmp_path / name / "results.json").write_text(json.dumps({"score": 1.0, "tests": tests, "extra_data": extra}))
        lines.append([name, "1.0", str(rubric.max_points())] + ["0"] * len(columns))
    with (tmp_path / "gradebook.csv").open("w", newline="") as handle:
        csv.writer(handle).writerows([["submission", "score", "max_score", *columns], *lines])
    report_html.write(tmp_path)
    page = (tmp_path / "report.html").read_text()
    assert hostile not in page and "&lt;img src=x onerror=alert(1)&gt;" in page
    rows = {row["mistake"]: row for row in _csv(tmp_path / "mistakes.csv")}
    assert rows["growth_off_by_one"]["submissions"] == hostile
    assert rows["backoff_divides"]["submissions"] == "'" + formula  # never a spreadsheet formula


def test_hostile_names_sids_notes_and_labels_stay_text_in_the_page(tmp_path: Path) -> None:
    """Everything a student provides reaches the page as text: names, SIDs, folder names, notes, similarity labels."""
    folder = 'x" onmouseover="alert(3)'
    name, sid, note = "<script>alert(1)</script> 'Bo' \"Bobby\" **bold** [x](javascript:y)", '"><b>1</b>', "<i>note</i>\nmore"
    columns = [f"{item.number} {item.test}" for item in rubric.ITEMS]
    (tmp_path / folder).mkdir()
    tests = [{"name": f"{i.number} {i.title}", "number": i.number, "max_score": i.points, "score": i.points,
              "status": "passed"} for i in rubric.ITEMS]
    (tmp_path / folder / "results.json").write_text(json.dumps(
        {"score": rubric.max_points(), "tests": tests, "extra_data": {"notes": [note]}}))
    (tmp_path / folder / "feedback.md").write_text("# Feedback\n")
    with (tmp_path / "gradebook.csv").open("w", newline="") as handle:
        csv.writer(handle).writerows([["submission", "name", "sid", "email", "score", "max_score", *columns],
                                      [folder, name, sid, "", rubric.max_points(), rubric.max_points(),
                                       *[i.points for i in rubric.ITEMS]]])
    side = {"key": folder, "label": f"{name} ({folder})", "members": [], "solution": False}
    (tmp_path / "similarity.json").write_text(json.dumps({
        "threshold": 0.5, "threshold_reason": "<u>r</u>", "compared": 1, "solution_compared": True, "flagged": 1,
        "in_page": 1, "clusters": [{"anchor": "cluster-1", "keys": [folder], "labels": [name]}],
        "markers": [{"key": folder, "label": name, "files": ["<x>.py"]}],
        "pairs": [{"anchor": "pair-1", "a": side, "b": {"key": "solutions/", "label": "the reference solution",
                                                        "members": [], "solution": True},
                   "score": 1.0, "flagged": True, "files": {}}]}))
    report_html.write(tmp_path)
    page = (tmp_path / "report.html").read_text()
    body = page.split("<body>", 1)[1]
    assert re.findall(r"<script\b[^>]*>(.*?)</script>", body, re.S) == [page_parts.SCRIPT]  # the page's own only
    assert page_parts.SCRIPT_SOURCE in page.split("<body>", 1)[0]  # and the page's policy lets nothing else run
    assert "<i>" not in body and "<u>" not in body and "<b>1</b>" not in body
    assert "onmouseover=\"" not in body and "<x>" not in body
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &#x27;Bo&#x27; &quot;Bobby&quot; **bold**" in body
    assert "&quot;&gt;&lt;b&gt;1&lt;/b&gt;" in body and "&lt;i&gt;note&lt;/i&gt;" in body
    assert 'href="x%22%20onmouseover%3D%22alert%283%29/feedback.md"' in body  # the folder, quoted in the link
    assert set(re.findall(r'href="([^"#]*)', body)) == {"x%22%20onmouseover%3D%22alert%283%29/feedback.md",
                                                        "similarity.html", ""}  # "": the line's entry, and back


def test_the_batch_compares_every_submission_with_torchs_own_scaler(batch: Path) -> None:
    """torch's grad_scaler.py (of the installed torch) is a party of the batch's similarity report, as solutions/ is:
    erin's (the reference solution) shares some fingerprints with it, listed in similarity.csv, under the threshold."""
    rows = [row for row in _csv(batch / "similarity.csv") if row["submission_b"] == "torch/amp/grad_scaler.py"]
    assert {row["submission_a"] for row in rows} >= {"erin"}
    assert all(float(row["similarity"]) < 0.5 for row in rows)


def test_report_command_needs_a_batch_folder(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "autograder", "report", str(tmp_path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "no gradebook.csv" in done.stderr and "Traceback" not in done.stderr


def test_the_page_inlines_the_batch_histogram_and_says_when_there_is_none(tmp_path: Path) -> None:
    assert "No histogram" in report_html.histogram_img(tmp_path)  # a batch of one: summary drew none
    (tmp_path / report.HISTOGRAM_NAME).write_text("<script>alert(1)</script>")  # not what the summary writes
    assert "not a PNG" in report_html.histogram_img(tmp_path) and "script" not in report_html.histogram_img(tmp_path)
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256))
    (tmp_path / report.HISTOGRAM_NAME).write_bytes(png)
    tag = report_html.histogram_img(tmp_path)
    assert tag.startswith('<img alt="score histogram" src="data:image/png;base64,')
    assert base64.b64decode(tag.split("base64,", 1)[1].rstrip('">')) == png


def test_html_text_escapes_markup_and_drops_control_characters_but_keeps_code_layout() -> None:
    from autograder.engine.escape import html_text

    assert html_text('<b a="x">\x1b[2J\u202eok') == "&lt;b a=&quot;x&quot;&gt; [2J ok"
    assert html_text("def f():\n\treturn 1") == "def f():\n\treturn 1"


def test_a_korean_histogram_holds_numbers_only_and_the_page_says_what_its_axes_are(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No Hangul font can be counted on where matplotlib draws (its own DejaVu Sans has none): in a Korean build the
    picture has no words, and report.html says in Korean what its axes are."""
    from autograder.batch import summary as batch_summary

    data = {"max_score": 90.0, "submissions": 4, "histogram": {"edges": [0.0, 45.0, 90.0], "counts": [1, 3]}}
    drawn: dict[str, list[str]] = {}
    for language in ("en", "ko"):
        monkeypatch.setenv("AMP_LANGUAGE", language)
        texts: list[str] = []
        monkeypatch.setattr("matplotlib.axes.Axes.set_xlabel", lambda self, text, *a, **k: texts.append(text))
        monkeypatch.setattr("matplotlib.axes.Axes.set_ylabel", lambda self, text, *a, **k: texts.append(text))
        monkeypatch.setattr("matplotlib.axes.Axes.set_title", lambda self, text, *a, **k: texts.append(text))
        batch_summary.histogram_png(tmp_path / report.HISTOGRAM_NAME, data)
        drawn[language] = texts
        page = report_html.histogram_img(tmp_path, data)
        assert page.startswith('<img alt="' + ("score histogram" if language == "en" else "점수 히스토그램") + '"')
    assert drawn == {"en": ["score (out of 90)", "submissions", "4 submissions"], "ko": []}
    assert page.endswith('<p class="note" id="histogram-axes">가로축은 점수(90점 만점), 세로축은 제출물 수(모두 4개)입니다.</p>')
    monkeypatch.setenv("AMP_LANGUAGE", "en")
    assert "histogram-axes" not in report_html.histogram_img(tmp_path, data)  # the picture says it in English


def test_a_submission_that_reaches_for_raw_memory_is_flagged_for_review_not_graded_down(tmp_path: Path) -> None:
    """A batch of two correct submissions, one of which also names numpy's array interface, ctypes, a code object
    and /proc/self/maps (inert lines): both get 90; only that one is flagged for review, with the three reasons, in
    report.html's students table and in summary.md."""
    clean, peeker = tmp_path / "clean", tmp_path / "peeker"
    for folder in (clean, peeker):
        shutil.copytree(ROOT / "solutions", folder, ignore=shutil.ignore_patterns("__pycache__"))
    with (peeker / "loss_scaler.py").open("a") as handle:
        handle.write('\n_SEEN = ("__array_interface__", "ctypes", "/proc/self/maps")\n_MAKER = __import__("types").CodeType\n')
    out = tmp_path / "out"
    done = grade([clean, peeker], out, *JOBS)
    assert done.returncode == 0, done.stderr[-3000:]
    assert {row["submission"]: float(row["score"]) for row in _csv(out / "gradebook.csv")} == {"clean": 90.0,
                                                                                                "peeker": 90.0}
    page = (out / "report.html").read_text()
    table = page.split('<table id="student-table">', 1)[1].split("</table>", 1)[0]
    lines = {line.split("</td>", 1)[0]: line for line in table.split("<tr><td>")[1:]}
    flagged = lines['<a href="peeker/feedback.md">peeker</a>']
    assert '<span class="flag">for review</span>' in flagged
    assert "builds arrays over raw addresses" in flagged and "constructs code objects" in flagged
    assert "reads the process&#x27;s memory map or memory" in flagged
    assert "for review" not in lines['<a href="clean/feedback.md">clean</a>']
    summary = (out / "summary.md").read_text()
    review = [line for line in summary.splitlines() if line.startswith("- Flagged for review")]
    assert len(review) == 1 and "peeker" in review[0] and "clean" not in review[0]
