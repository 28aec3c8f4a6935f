"""The similarity report (``python -m autograder similarity``; a section of every batch run).

Copies of a submission disguised by renaming, reordering, re-commenting and reformatting
must rank above every pair of independently written correct solutions (the reference
solution and the catalogue's rewritten variants); untouched skeletons must not match once
the skeleton is removed; the numbers are copydetect's; the HTML report is checked in a
real headless browser.
"""

from __future__ import annotations

import csv
import itertools
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from autograder.batch import inputs, similarity, similarity_html
from autograder.engine.escape import csv_cell, markdown_inline
from code_transforms import TRANSFORMS, disguise

ROOT = Path(__file__).resolve().parents[1]
SCALER = "loss_scaler.py"
#: independently written correct loss scalers: the reference solution and the catalogue's rewrites
INDEPENDENT = {
    "solution": ROOT / "solutions" / SCALER,
    "plain_style": ROOT / "tests" / "catalogue" / "variants" / "plain_style" / SCALER,
    "tensor_scale_lazy": ROOT / "tests" / "catalogue" / "variants" / "tensor_scale_lazy" / SCALER,
}


def _submission(folder: Path, files: dict[str, str]) -> inputs.Submission:
    folder.mkdir(parents=True)
    for name, text in files.items():
        (folder / name).write_text(text)
    return inputs.Submission(folder.name, folder, str(folder))


def _pair_scores(report: similarity.Report, file: str = SCALER) -> dict[frozenset[str], float]:
    return {frozenset((p.a.key, p.b.key)): p.files[file].similarity for p in report.pairs if file in p.files}


def test_disguised_copies_rank_above_every_pair_of_independent_solutions(tmp_path: Path) -> None:
    subs = []
    for base, path in INDEPENDENT.items():
        code = path.read_text()
        subs.append(_submission(tmp_path / base, {SCALER: code}))
        for name, transform in TRANSFORMS.items():
            changed = transform(code)
            assert changed != code
            subs.append(_submission(tmp_path / f"{base}--{name}", {SCALER: changed}))
        subs.append(_submission(tmp_path / f"{base}--all", {SCALER: disguise(code)}))
    report = similarity.analyse(subs)
    scores = _pair_scores(report)
    independent = [scores.get(frozenset(pair), 0.0) for pair in itertools.combinations(INDEPENDENT, 2)]
    copies = [scores.get(frozenset((base, s.name)), 0.0) for base in INDEPENDENT for s in subs
              if s.name.startswith(base + "--")]
    assert len(copies) == len(INDEPENDENT) * (len(TRANSFORMS) + 1)
    assert min(copies) > max(independent), (sorted(copies)[:3], independent)
    assert min(copies) >= 0.8 and max(independent) < 0.5  # not a near tie either


def test_untouched_skeletons_score_zero_after_removing_the_boilerplate(tmp_path: Path) -> None:
    skeleton = {name: (ROOT / "assignment" / name).read_text() for name in similarity.FILES}
    first = _submission(tmp_path / "first", skeleton)
    second = _submission(tmp_path / "second", {name: "# my homework\n\n" + text.replace("    ", "    ")
                                               for name, text in skeleton.items()})
    report = similarity.analyse([first, second])
    assert all(f.similarity <= 0.01 for p in report.pairs for f in p.files.values()), report.pairs
    # without removing it, the same two files are near-identical: the removal is what makes them 0
    raw = [similarity.fingerprint(skeleton[SCALER]) for _ in range(2)]
    assert similarity.all_pairs(raw)[1][0, 1] > 0.9


def test_all_pairs_gives_copydetects_numbers() -> None:
    from copydetect.detector import compare_files

    boilerplate = similarity.boilerplate_for(SCALER)
    codes = [p.read_text() for p in INDEPENDENT.values()]
    codes += [TRANSFORMS["reorder_methods"](codes[0]), (ROOT / "assignment" / SCALER).read_text(),
              (ROOT / "examples" / "partially_correct" / SCALER).read_text(), ""]
    prints = [similarity.fingerprint(code, boilerplate) for code in codes]
    overlap, score = similarity.all_pairs(prints)
    for i, j in itertools.permutations(range(len(prints)), 2):
        tokens, (mine, _), _ = compare_files(prints[i], prints[j])
        assert overlap[i, j] == tokens and score[i, j] == pytest.approx(float(mine)), (i, j)


def test_default_threshold_is_the_outlier_fence_within_bounds() -> None:
    size = similarity.FENCE_FROM
    scores = [0.1, 0.2, 0.2, 0.3, 0.3, 0.3, 0.4, 0.4, 0.5, 0.55, 0.6, 0.95, 1.0] * 4
    scores += [0.3] * (size * (size - 1) // 2 - len(scores))
    threshold, reason = similarity.default_threshold(scores, size)
    q1, _, q3 = np.percentile(scores, [25, 50, 75])
    fence = q3 + 1.5 * (q3 - q1)
    assert similarity.THRESHOLD_FLOOR < fence < similarity.THRESHOLD_CEILING
    assert threshold == pytest.approx(fence, abs=1e-4) and "Q3 + 1.5 IQR" in reason
    assert similarity.default_threshold([0.3] * len(scores), size)[0] == similarity.THRESHOLD_FLOOR
    assert similarity.default_threshold([0.5, 0.9] * 33, size + 1)[0] == similarity.THRESHOLD_CEILING
    # a smaller class gets the floor, however its scores spread: a few copies would lift its fence past them
    small = size - 1
    threshold, reason = similarity.default_threshold(scores[:small * (small - 1) // 2], small)
    assert threshold == similarity.THRESHOLD_FLOOR and f"a class of {small} submission(s)" in reason, reason
    assert similarity.default_threshold([0.0], 2)[0] == similarity.THRESHOLD_FLOOR


def test_escaping_helpers() -> None:
    assert csv_cell("=HYPERLINK(1)") == "'=HYPERLINK(1)" and csv_cell("@x") == "'@x" and csv_cell(-1.5) == -1.5
    assert csv_cell("Ada") == "Ada"
    assert markdown_inline("a|b *c*\n[x](y)") == r"a\|b \*c\* \[x\](y)"


EVIL = "=HYPERLINK(\"x\") <script>alert(1)</script> *Mallory* | Doe"


def _export_with_a_copy(root: Path) -> Path:
    """A Gradescope export: two students with a disguised copy, one independent, names with markup."""
    meta = "".join(f"submission_{n}:\n  :submitters:\n  - :name: '{name}'\n    :sid: '{n}'\n"
                   for n, name in ((1, EVIL), (2, "Bob Original"), (3, "Carol Independent")))
    export = root / "export"
    export.mkdir()
    (export / "submission_metadata.yml").write_text(meta)
    solution = {name: (ROOT / "solutions" / name).read_text() for name in similarity.FILES}
    for n, files in ((1, {k: disguise(v) for k, v in solution.items()}), (2, solution),
                     (3, {SCALER: INDEPENDENT["plain_style"].read_text()})):
        for name, text in files.items():
            (export / f"submission_{n}").mkdir(exist_ok=True)
            (export / f"submission_{n}" / name).write_text(text)
    return export


def test_cli_writes_csv_and_html_with_names_escaped(tmp_path: Path) -> None:
    export = _export_with_a_copy(tmp_path)
    reference = tmp_path / "last_year"
    shutil.copytree(export / "submission_2", reference / "old_bob")
    shutil.copytree(export / "submission_3", reference / "old_carol")
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "autograder", "similarity", str(export), "--out", str(out),
                           "--similarity-reference", str(reference)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    with open(out / "similarity.csv", newline="") as stream:
        rows = list(csv.DictReader(stream))
    assert list(rows[0]) == similarity.CSV_HEADER
    top = {(r["submission_a"], r["submission_b"]) for r in rows if float(r["similarity"]) > 0.8}
    assert ("submission_1", "submission_2") in top
    assert ("submission_2", "reference/old_bob") in top  # last year's copy of the same code
    evil = next(r for r in rows if r["submission_a"] == "submission_1")
    assert evil["name_a"].startswith("'=HYPERLINK") and "Mallory" in evil["name_a"]
    assert any(r["name_b"] == "Bob Original (submission_2)" for r in rows)
    html = (out / "similarity.html").read_text()
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "Bob Original" in html and "<mark class='match'>" in html
    assert r"\*Mallory\* \| Doe" in done.stdout  # the Markdown section escapes names


def test_bad_reference_path_exits_2(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "autograder", "similarity", str(ROOT / "solutions"), "--out",
                           str(tmp_path / "o"), "--similarity-reference", str(tmp_path / "missing")],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "no such file or folder" in done.stderr and "Traceback" not in done.stderr


def test_html_report_shows_matched_regions_in_headless_chromium(tmp_path: Path, headless_browser: str) -> None:
    browser = headless_browser  # tests/conftest.py: installed where it may be, never skipped under CI
    export = _export_with_a_copy(tmp_path)
    report = similarity.analyse(inputs.discover([export], tmp_path / "scratch").submissions)
    similarity.write_outputs(tmp_path, report)
    page = (tmp_path / "similarity.html").as_uri()
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars",
             f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run([browser, *flags, "--dump-dom", page], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    # the browser's parsed DOM: one flagged pair, both files side by side, highlighted matches, names as text
    assert "id=\"pair-1\"" in dom.stdout and "id=\"pair-2\"" not in dom.stdout
    assert dom.stdout.count("<mark class=\"match\">") >= 10
    assert "Bob Original" in dom.stdout and "&lt;script&gt;" in dom.stdout and "<script>" not in dom.stdout
    shot = tmp_path / "similarity.png"
    done = subprocess.run([browser, *flags, "--window-size=1400,1400", f"--screenshot={shot}", page],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and shot.is_file(), done.stderr[-2000:]
    from matplotlib import image

    pixels = image.imread(str(shot))[..., :3]
    highlight = np.all(np.abs(pixels - np.array([0xff, 0xb3, 0xb3]) / 255) < 0.03, axis=-1)
    assert highlight.mean() > 0.01  # the matched regions are visibly highlighted
    keep = ROOT / "out" / "test-screenshots"
    keep.mkdir(parents=True, exist_ok=True)
    shutil.copy(shot, keep / "similarity.png")  # for a human to look at


def test_verbatim_copies_form_one_cluster_that_matches_the_reference_solution(tmp_path: Path) -> None:
    solution = {name: (ROOT / "solutions" / name).read_text() for name in ("loss_scaler.py", "amp_step.py", "answers.py")}
    copies = [_submission(tmp_path / f"copy{k}", solution) for k in range(7)]
    own = _submission(tmp_path / "own", {SCALER: INDEPENDENT["plain_style"].read_text()})
    skeletons = [_submission(tmp_path / f"skeleton{k}", {name: (ROOT / "assignment" / name).read_text()
                                                         for name in similarity.FILES}) for k in range(2)]
    report = similarity.analyse([*copies, own, *skeletons], solution=ROOT / "solutions")
    assert len([p for p in report.pairs if p.a.key.startswith("copy") and p.b.key.startswith("copy")]) == 21
    (cluster,) = report.clusters  # seven copies: one cluster of seven, not 21 pairs; untouched skeletons: none
    assert sorted(m.key for m in cluster.members) == [f"copy{k}" for k in range(7)]
    assert all({p.a.key, p.b.key} - {"copy0"} for p in report.grouped)  # no pair inside the cluster
    assert sum(1 for p in report.grouped if "copy0" in (p.a.key, p.b.key)) == len(
        {p.b.key if p.a.key.startswith("copy") else p.a.key for p in report.pairs
         if p.a.key.startswith("copy") != p.b.key.startswith("copy")})  # one pair per outsider
    (match,) = report.matches_solution()
    assert {match.a.key, match.b.key} == {"copy0", similarity.SOLUTION_KEY} and match.score == 1.0
    assert report.markers == {f"copy{k}": ["amp_step.py", "answers.py", "loss_scaler.py"] for k in range(7)}
    section = similarity.markdown_section(report)
    assert "**Matches the reference solution** (1.00): 7 identical submissions: copy0, copy1" in section
    assert "[Identical files](similarity.html#cluster-1)" in section and "similarity.html#markers" in section
    page = similarity_html.render(report)
    assert "id='cluster-1'" in page and "id='markers'" in page and "matches the reference solution" in page
    assert page.count("<section class='pair'") == len(report.listed) == len(report.flagged)
    data = similarity.report_json(report)
    assert data["clusters"][0]["keys"] == [f"copy{k}" for k in range(7)] and data["solution_compared"]
    # the option off: no reference, no match; the markers and the cluster stay
    alone = similarity.analyse([*copies, own], solution=None)
    assert alone.matches_solution() == [] and len(alone.clusters) == 1 and len(alone.markers) == 7
    assert not any(p.a.solution or p.b.solution for p in alone.pairs)


def test_torch_scaler_pasted_in_is_flagged_like_a_copy_of_the_solution(tmp_path: Path) -> None:
    """torch's own GradScaler class (read from the installed torch), renamed and pasted into loss_scaler.py, is
    flagged in summary.md, similarity.html and report.html as a copy of solutions/ is; the reference solution and an
    independent scaler, graded beside it, are not (torch's file is no submission: no pair of its own is counted)."""
    from autograder.diagnosis import report_similarity

    source = similarity.torch_scaler_source()
    assert source is not None and source.parts[-3:] == ("torch", "amp", "grad_scaler.py")
    text = source.read_text()
    skeleton = (ROOT / "assignment" / SCALER).read_text()
    pasted = skeleton.split("class ToyLossScaler")[0] + text[text.index("class GradScaler:"):].replace(
        "class GradScaler:", "class ToyLossScaler:", 1)
    subs = [_submission(tmp_path / "pasted", {SCALER: pasted}),
            _submission(tmp_path / "solution", {SCALER: INDEPENDENT["solution"].read_text()}),
            _submission(tmp_path / "plain_style", {SCALER: INDEPENDENT["plain_style"].read_text()})]
    report = similarity.analyse(subs, torch_scaler=source)
    (match,) = report.matches_solution()
    assert (match.a.key, match.b.key) == ("pasted", similarity.TORCH_KEY) and match.score > 0.9
    others = {key: score for key, score in (((p.a.key, p.score) for p in report.pairs if p.b.key == similarity.TORCH_KEY))}
    assert others["solution"] < 0.3 and others["plain_style"] < 0.3  # measured 0.22 and 0.10
    section = similarity.markdown_section(report)
    assert f"**Matches torch's own GradScaler** ({match.score:.2f}): pasted." in section
    assert "Matches the reference solution" not in section
    page = similarity_html.render(report)
    assert "<section id='torch'>" in page and "<section id='solution'>" not in page
    assert "matches torch's own GradScaler</span> (" in page
    flags = report_similarity.similarity_flags(similarity.report_json(report))
    assert not any("matches" in line for key in ("solution", "plain_style") for line in flags.get(key, [])), flags
    assert flags["pasted"][0].startswith('<span class="flag">matches torch\'s own GradScaler</span> '
                                         '<span class="nowrap">('), flags


def test_solution_markers_are_the_releases_and_never_in_the_skeleton() -> None:
    from autograder.packaging import release

    for text in (release.BEGIN, release.END, 'Q1 = "B"  # SOLUTION', "    #BEGIN  SOLUTION"):
        assert similarity.SOLUTION_MARKER.search(text), text
    assert not similarity.SOLUTION_MARKER.search("# the solution is below\nx = 1  # SOLUTIONS")
    released = {name: (ROOT / "assignment" / name).read_text() for name in ("loss_scaler.py", "amp_step.py", "answers.py")}
    assert similarity.solution_markers(released) == []
    assert similarity.solution_markers({n: (ROOT / "solutions" / n).read_text() for n in released}) == sorted(released)


def test_long_lines_wrap_in_the_page() -> None:
    rules = similarity_html.STYLE.split("pre.code", 1)[1].split("}", 1)[0]
    assert "white-space: pre-wrap" in rules and "overflow-wrap: anywhere" in rules and "overflow-x" not in rules


def test_cli_compares_with_the_reference_solution_unless_told_not_to(tmp_path: Path) -> None:
    export = _export_with_a_copy(tmp_path)
    for extra, expected in (([], True), (["--no-similarity-solution"], False)):
        out = tmp_path / f"out{len(extra)}"
        done = subprocess.run([sys.executable, "-m", "autograder", "similarity", str(export), "--out", str(out), *extra],
                              cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        assert ("Matches the reference solution" in done.stdout) is expected, done.stdout
        data = json.loads((out / "similarity.json").read_text())
        assert data["solution_compared"] is expected
        assert similarity.TORCH_KEY in (out / similarity.CSV_NAME).read_text()  # torch's scaler: compared either way
        matched = {side["key"] for pair in data["pairs"] if pair["flagged"] for side in (pair["a"], pair["b"])
                   if any(s["solution"] for s in (pair["a"], pair["b"]))}
        assert matched == ({"submission_1", "submission_2", "solutions/"} if expected else set())


def test_a_missing_reference_solution_is_said_not_silently_skipped(tmp_path: Path) -> None:
    subs = [_submission(tmp_path / name, {SCALER: INDEPENDENT[name].read_text()}) for name in ("solution", "plain_style")]
    report = similarity.analyse(subs, solution=tmp_path / "nowhere")
    assert report.solution_note and not report.matches_solution()
    assert f"(not with the reference solution: {tmp_path / 'nowhere'} has none of" in similarity.markdown_section(report)


def test_a_korean_build_writes_a_korean_page(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """similarity.html speaks the feedback's language (the TA's pages' table, autograder/diagnosis/page_words.py)."""
    import re

    solution = {name: (ROOT / "solutions" / name).read_text() for name in ("loss_scaler.py", "amp_step.py", "answers.py")}
    copies = [_submission(tmp_path / f"copy{k}", solution) for k in range(2)]
    own = _submission(tmp_path / "own", {SCALER: INDEPENDENT["plain_style"].read_text()})
    earlier = _submission(tmp_path / "earlier" / "last_year", {SCALER: INDEPENDENT["tensor_scale_lazy"].read_text()})
    monkeypatch.setenv("AMP_LANGUAGE", "ko")
    report = similarity.analyse([*copies, own], [earlier], threshold=0.9, solution=ROOT / "solutions")
    page = similarity_html.render(report)
    assert "<html lang='ko'>" in page and "<h1>코드 유사도</h1>" in page
    for korean in ("제출물 3개와 참고용 제출물 1개를 비교했고, 각각 참조 답안(solutions/)과도 비교했습니다",
                   "기준값 <b>0.9</b>(--similarity-threshold로 정함)", "<h2>똑같은 파일: 제출물 2개</h2>",
                   "<h2>참조 답안과 일치</h2>", "<h2>답안 표시가 남은 제출물</h2>", "<th>첫째</th><th>둘째</th><th>점수</th>",
                   "참조 답안(solutions/)</td>", "겹치는 토큰"):
        assert korean in page, korean
    frame = re.sub(r"<pre.*?</pre>|<code>.*?</code>|<style>.*?</style>|<[^>]+>", " ", page, flags=re.DOTALL)
    english = {"similarity", "submission", "threshold", "identical", "matches", "reference", "solution", "markers",
               "first", "second", "score", "overlapping", "tokens", "highlighted", "pair"}
    assert not english & {word.lower().strip(".,:;()") for word in frame.split()}, frame
    monkeypatch.setenv("AMP_LANGUAGE", "en")  # the same report in English: the English frame (the words of the run)
    assert "<html lang='en'>" in similarity_html.render(similarity.analyse([*copies, own], solution=None))
