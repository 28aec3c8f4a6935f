"""report.html as a Korean TA sees it: the narrow columns keep their words whole.

Hangul may break between any two syllables unless told otherwise: 학생, 학번 and 점수 came out one syllable per line
and "77 / 90" over three lines beside the wide problems and similarity columns.  A Korean page is laid out by
headless chromium (the page itself runs no script: a copy of it, without its policy, is measured by one), and the
number of lines each cell of those columns takes is read back.
"""

from __future__ import annotations

import csv
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from autograder.diagnosis import report_html
from autograder.engine import rubric

NAMES = ["김민준", "이서연", "박지호", "최수아"]
NOTE = "loss_scaler.py를 가져올 수 없어서 그 파일이 필요한 테스트는 모두 0점입니다: SyntaxError (12번째 줄) " * 2
#: counts the line boxes of every cell of the students table and writes them where --dump-dom shows them
MEASURE = """<script>
const lines = [];
for (const row of document.querySelectorAll('#student-table tr')) {
  const range = document.createRange();
  lines.push(Array.from(row.children, cell => {
    range.selectNodeContents(cell);
    return new Set(Array.from(range.getClientRects(), r => Math.round(r.top))).size;
  }));
}
document.body.insertAdjacentHTML('beforeend', '<pre id="lines">' + JSON.stringify(lines) + '</pre>');
</script>"""


def _korean_batch(out: Path) -> None:
    out.mkdir()
    items = [f"{item.number} {item.test}" for item in rubric.ITEMS]
    with (out / "gradebook.csv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["submission", "name", "sid", "email", "score", "max_score", "status", *items])
        for k, name in enumerate(NAMES):
            writer.writerow([f"student_{k}", name, f"20240{k:04d}", "", 77, 90, "graded", *[1] * len(items)])
            (out / f"student_{k}").mkdir()
            failed = [{"number": item.number, "name": f"{item.number} {item.test}", "score": 0.0,
                       "max_score": item.points, "status": "failed"} for item in rubric.ITEMS[:8]]
            (out / f"student_{k}" / "results.json").write_text(json.dumps(
                {"score": 77, "tests": failed, "extra_data": {"notes": [NOTE], "diagnosis": {"1.5": ["a_bug"] * 3}}}))


def test_hangul_headers_names_and_scores_are_not_broken_up(tmp_path: Path, headless_browser: str,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AMP_LANGUAGE", "ko")
    out = tmp_path / "out"
    _korean_batch(out)
    report_html.write(out)
    page = (out / "report.html").read_text(encoding="utf-8")
    assert "<th>학생</th><th>학번</th><th>점수</th>" in page
    measured = tmp_path / "measured.html"
    measured.write_text(re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", page)
                        .replace("</body>", MEASURE + "</body>"), encoding="utf-8")
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1024,900",
             f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run([headless_browser, *flags, "--dump-dom", measured.as_uri()], capture_output=True, text=True,
                         timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    found = re.findall(r'<pre id="lines">(\[.*?)</pre>', dom.stdout)  # (the script's own text holds the tag too)
    assert found, dom.stdout[-2000:]
    header, *rows = json.loads(found[-1])
    assert header[1:4] == [1, 1, 1], header  # 학생, 학번, 점수: one line each
    for cells in rows:
        assert cells[1:4] == [1, 1, 1], cells  # the name, the SID and "77 / 90"
        assert max(cells) > 1  # the wide columns did wrap: the page was narrow enough to squeeze the others
    shot = tmp_path / "report-ko.png"  # kept for a human to look at: out/test-screenshots/report-ko.png
    done = subprocess.run([headless_browser, *flags, "--hide-scrollbars", f"--screenshot={shot}",
                           (out / "report.html").as_uri()], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and shot.is_file(), done.stderr[-2000:]
    keep = Path(__file__).resolve().parents[1] / "out" / "test-screenshots"
    keep.mkdir(parents=True, exist_ok=True)
    shutil.copy(shot, keep / "report-ko.png")
