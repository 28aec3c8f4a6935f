"""The class report of a batch (autograder/diagnosis/report.py): report.html, items.csv, mistakes.csv.

One real batch (``python -m autograder grade`` with a diagnosis table of two bugs): the solution, a
correct variant, the same update-rule bug twice, one Task-2 bug and a bug the table does not hold.  The report's numbers are checked
against gradebook.csv and the results.json files; the page is opened in headless chromium (it renders,
logs nothing to the console, and its content security policy would report any request it tried).
A synthetic batch folder checks that submission names are escaped in the page and the CSV.
"""

from __future__ import annotations

import base64
import csv
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.diagnosis import report, words
from autograder.diagnosis.table import load_catalogue
from autograder.engine import rubric
from conftest import ROOT, find_browser, grade, skip_unless_ci

catalogue = load_catalogue()
BY_NAME = {entry.name: entry for entry in catalogue.ENTRIES}
TABLE_BUGS = ["growth_off_by_one", "no_zero_grad"]
#: submission folder -> catalogue entry ("solution": the reference itself)
#: (frank fails 1.6 with a bug the table does not hold: he must not be diagnosed as alice and bob are.)
BATCH = {"alice": "growth_off_by_one", "bob": "growth_off_by_one", "carol": "no_zero_grad",
         "dave": "plain_style", "erin": "solution", "frank": "tracker_not_reset_after_growth"}
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
    paths = []
    for folder, entry in BATCH.items():
        if entry == "solution":
            shutil.copytree(ROOT / "solutions", base / "submissions" / folder)
            paths.append(base / "submissions" / folder)
        else:
            paths.append(catalogue.materialize(BY_NAME[entry], base / "submissions" / folder))
    done = grade(paths, base / "out", *JOBS, env={"AMP_DIAGNOSIS": str(table)})
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


def _chromium() -> str:
    """The browser on ``PATH`` (not installed here: tests/test_similarity.py's fixture may); skipped without, failed in CI."""
    browser = find_browser()
    if browser is None:
        skip_unless_ci("no chromium here (Debian: apt-get install chromium)")
    return browser


def _open(browser: str, page: Path, profile: Path) -> subprocess.CompletedProcess[str]:
    """Load ``page`` headless; stdout is the parsed DOM, stderr holds every console message."""
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
             "--disable-background-networking", f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0"]
    return subprocess.run([browser, *flags, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120)


def test_the_page_renders_in_headless_chromium_without_console_messages(batch: Path, tmp_path: Path) -> None:
    browser = _chromium()
    page = batch / "report.html"
    done = _open(browser, page, tmp_path / "profile")
    assert done.returncode == 0, done.stderr[-2000:]
    consoled = [line for line in done.stderr.splitlines() if ":CONSOLE" in line]
    assert consoled == [], consoled  # an error, or a blocked request (the page's policy forbids them all)
    dom = done.stdout
    assert '<img alt="score histogram" src="data:image/png;base64,' in dom and "Class report" in dom
    assert words.STUDENT_WORDS["growth_off_by_one"] in dom
    assert "alice, bob" in dom
    # the check can fail: the same page asking for an external image logs the blocked request
    leaky = tmp_path / "leaky.html"
    leaky.write_text(page.read_text().replace("<h1>", "<img src=\"https://example.com/x.png\"><h1>", 1))
    done = _open(browser, leaky, tmp_path / "profile2")
    assert any(":CONSOLE" in line and "example.com" in line for line in done.stderr.splitlines()), done.stderr[-2000:]


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
    report.write(tmp_path)
    page = (tmp_path / "report.html").read_text()
    assert hostile not in page and "&lt;img src=x onerror=alert(1)&gt;" in page
    rows = {row["mistake"]: row for row in _csv(tmp_path / "mistakes.csv")}
    assert rows["growth_off_by_one"]["submissions"] == hostile
    assert rows["backoff_divides"]["submissions"] == "'" + formula  # never a spreadsheet formula


def test_report_command_needs_a_batch_folder(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "autograder", "report", str(tmp_path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "no gradebook.csv" in done.stderr and "Traceback" not in done.stderr


def test_the_page_inlines_the_batch_histogram_and_says_when_there_is_none(tmp_path: Path) -> None:
    assert "No histogram" in report.histogram_img(tmp_path)  # a batch of one: summary drew none
    (tmp_path / report.HISTOGRAM_NAME).write_text("<script>alert(1)</script>")  # not what the summary writes
    assert "not a PNG" in report.histogram_img(tmp_path) and "script" not in report.histogram_img(tmp_path)
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256))
    (tmp_path / report.HISTOGRAM_NAME).write_bytes(png)
    tag = report.histogram_img(tmp_path)
    assert tag.startswith('<img alt="score histogram" src="data:image/png;base64,')
    assert base64.b64decode(tag.split("base64,", 1)[1].rstrip('">')) == png
