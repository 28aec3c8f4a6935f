"""The similarity report on a class as a TA meets it: does it flag the copies, and only them?

The class: three independently written correct students (the catalogue's rewritten scalers, each with the
same ten-line amp_step.py every correct answer has), two catalogue bugs, two exact copies of one of the
independent students, a copy of another with every variable renamed, a verbatim copy of ``solutions/``, a
draft that wrote amp_step.py alone, and an untouched skeleton.  ``python -m autograder similarity`` and
``python -m autograder report`` run as a TA runs them (no grading: the report reads what the similarity command
wrote, beside a gradebook listing the class).
"""

from __future__ import annotations

import csv
import itertools
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.batch import similarity, similarity_data
from autograder.diagnosis import report_similarity
from autograder.diagnosis.table import load_catalogue
from code_transforms import rename_identifiers

ROOT = Path(__file__).resolve().parents[1]
CONTRACT = ("loss_scaler.py", "amp_step.py", "answers.py")
#: submission -> catalogue entry
FROM_CATALOGUE = {"plain": "plain_style", "lazy": "tensor_scale_lazy", "handout": "handout_only",
                  "bug_growth": "growth_off_by_one", "bug_zero": "no_zero_grad"}
INDEPENDENT = ("plain", "lazy", "handout")  # written independently, all correct
EXACT = ("lazy", "copy_a", "copy_b")
MARKERS = re.compile(r"^\s*# (BEGIN|END) SOLUTION\n|  # SOLUTION(?=\n)", re.MULTILINE)


def _build_class(root: Path) -> Path:
    catalogue = load_catalogue()
    entries = {entry.name: entry for entry in catalogue.ENTRIES}
    for name, entry in FROM_CATALOGUE.items():
        folder = catalogue.materialize(entries[entry], root / name)
        for path in folder.glob("*.py"):  # what a student hands in holds no solution markers
            path.write_text(MARKERS.sub("", path.read_text()))
    for name in EXACT[1:]:
        shutil.copytree(root / "lazy", root / name)
    (root / "renamed").mkdir()
    for file in CONTRACT:
        (root / "renamed" / file).write_text(rename_identifiers((root / "plain" / file).read_text()))
    (root / "leaked").mkdir()
    (root / "skeleton").mkdir()
    for file in CONTRACT:
        shutil.copy(ROOT / "solutions" / file, root / "leaked" / file)
        shutil.copy(ROOT / "assignment" / file, root / "skeleton" / file)
    shutil.copytree(root / "skeleton", root / "draft")
    shutil.copy(root / "plain" / "amp_step.py", root / "draft" / "amp_step.py")
    return root


@pytest.fixture(scope="module")
def reported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    base = tmp_path_factory.mktemp("similarity-class")
    klass = _build_class(base / "class")
    out = base / "out"
    done = subprocess.run([sys.executable, "-m", "autograder", "similarity", *sorted(map(str, klass.iterdir())),
                           "--out", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    names = sorted(path.name for path in klass.iterdir())
    with (out / "gradebook.csv").open("w", newline="") as handle:  # the class, as the report reads it
        csv.writer(handle).writerows([["submission", "score", "max_score"], *([name, "", "90"] for name in names)])
    done = subprocess.run([sys.executable, "-m", "autograder", "report", str(out)], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return out, json.loads((out / "similarity.json").read_text())


def _flagged_pairs(data: dict) -> set[frozenset[str]]:
    return {frozenset(member for side in (pair["a"], pair["b"]) for member in side["members"] or [side["key"]])
            for pair in data["pairs"] if pair["flagged"]}


def _students(out: Path) -> dict[str, str]:
    page = (out / "report.html").read_text()
    table = page.split('<table id="student-table">', 1)[1].split("</table>", 1)[0]
    return {re.sub(r"<[^>]+>", "", line.split("</td>", 1)[0]): line for line in table.split("<tr><td>")[1:]}


def test_the_renamed_copy_and_the_exact_copies_are_flagged(reported: tuple[Path, dict]) -> None:
    out, data = reported
    assert frozenset({"plain", "renamed"}) in _flagged_pairs(data)
    (cluster,) = data["clusters"]
    assert sorted(cluster["keys"]) == sorted(EXACT)
    students = _students(out)
    assert "similar to renamed" in students["plain"] and "similar to plain" in students["renamed"]
    for name in EXACT:
        assert "identical</span> to 2 other(s)" in students[name], students[name]


def test_independent_correct_students_and_a_draft_are_not_flagged(reported: tuple[Path, dict]) -> None:
    out, data = reported
    flagged = _flagged_pairs(data)
    with (out / similarity.CSV_NAME).open(newline="") as handle:  # every pair that shares code, with its score
        scores = {frozenset((row["submission_a"], row["submission_b"])): float(row["pair_score"])
                  for row in csv.DictReader(handle)}
    independent = [scores.get(frozenset(pair), 0.0) for pair in itertools.combinations(INDEPENDENT, 2)]
    assert max(independent) < 0.45, independent  # measured 0.42 at most: well below the floor (0.7)
    assert scores[frozenset(("plain", "renamed"))] == scores[frozenset(("leaked", "solutions/"))] == 1.0
    for first, second in itertools.combinations(INDEPENDENT, 2):
        assert not any({first, second} <= pair for pair in flagged), (first, second)
    assert not any("draft" in pair or "handout" in pair for pair in flagged), flagged
    students = _students(out)
    for name in ("handout", "draft", "skeleton"):
        assert students[name].count("<td>-</td>") >= 3 and "similar" not in students[name], students[name]
    # the threshold was not pushed to its ceiling by a class that all "matches"
    assert data["threshold"] < similarity.THRESHOLD_CEILING


def test_the_copy_of_solutions_is_flagged_on_its_own_line_in_report_html(reported: tuple[Path, dict]) -> None:
    out, data = reported
    assert "leaked" in {match["submission"]["key"] for match in data["sources"] if match["source"] == "solution"}
    page = (out / "report.html").read_text()
    part = page.split('<table id="sources">', 1)[1].split("</table>", 1)[0]
    (line,) = [row for row in part.split("<tr>") if "<td>" in row and ">leaked<" in row.replace("<td>", ">")]
    assert "matches the reference solution" in line and "1.00" in line
    assert not any(f"<td>{name}</td>" in part for name in INDEPENDENT + ("draft", "renamed"))
    assert "matches the reference solution" in _students(out)["leaked"]
    # the pairs are listed with each file's score and the tokens the two share
    pairs = page.split('<table id="pairs">', 1)[1].split("</table>", 1)[0]
    assert "<th>loss_scaler.py</th><th>amp_step.py</th>" in pairs and re.search(r"1\.00 \(\d+ tokens\)", pairs)


def test_a_copy_of_solutions_stays_flagged_when_the_pairs_are_cut(reported: tuple[Path, dict],
                                                                 monkeypatch: pytest.MonkeyPatch,
                                                                 tmp_path: Path) -> None:
    """similarity.html lists the first MAX_REPORTED flagged pairs; the match with solutions/ is told in
    report.html (its flag and its own part) wherever it ranks."""
    from autograder.batch import inputs

    klass = _build_class(tmp_path / "class")
    found = inputs.discover(sorted(klass.iterdir()), tmp_path / "scratch").submissions
    monkeypatch.setattr(similarity_data, "MAX_REPORTED", 1)
    report = similarity.analyse(found, solution=ROOT / "solutions")
    data = similarity.report_json(report)
    assert len(data["pairs"]) == 1 and "leaked" not in {data["pairs"][0]["a"]["key"], data["pairs"][0]["b"]["key"]}
    assert any(match["submission"]["key"] == "leaked" for match in data["sources"])
    flags = report_similarity.similarity_flags(data)
    assert any("matches the reference solution" in line for line in flags["leaked"]), flags.get("leaked")
    assert "<td>leaked</td>" in report_similarity.similarity_section(data)


def test_half_a_class_handing_in_the_reference_solution_does_not_make_it_common(tmp_path: Path) -> None:
    """Code half the class shares is discounted as what a correct answer looks like, but copies count once: seven
    of ten handing in solutions/ (six catalogue bugs, patched copies of it, and a verbatim one) are copies of one
    source, so its code is no idiom; each is still flagged against solutions/, the independent students are not."""
    from autograder.batch import inputs

    catalogue = load_catalogue()
    entries = {entry.name: entry for entry in catalogue.ENTRIES}
    bugs = ["tracker_not_reset_on_backoff", "backoff_divides", "growth_to_inf", "nan_ignored",
            "only_last_grad_checked", "unscale_not_in_place"]
    for name in [*bugs, *(FROM_CATALOGUE[k] for k in INDEPENDENT)]:
        catalogue.materialize(entries[name], tmp_path / "class" / name)
    (tmp_path / "class" / "leaked").mkdir()
    for file in CONTRACT:
        shutil.copy(ROOT / "solutions" / file, tmp_path / "class" / "leaked" / file)
    found = inputs.discover(sorted((tmp_path / "class").iterdir()), tmp_path / "scratch").submissions
    report = similarity.analyse(found, solution=ROOT / "solutions")
    matched = {pair.copier_and_source[0].key for pair in report.matches_solution()}
    assert matched == {*bugs, "leaked"}, matched
    independent = {FROM_CATALOGUE[k] for k in INDEPENDENT}
    assert not any({pair.a.key, pair.b.key} & independent for pair in report.flagged), report.flagged


def test_every_flagged_pair_reaches_the_students_table_past_the_listed_ones(tmp_path: Path) -> None:
    """Twelve students hand in one student's code, each with a comment of their own (so no two are identical files
    and none is a cluster): 66 flagged pairs, more than similarity.html lists (MAX_REPORTED).  Every student's line
    in report.html shows its flags, with the exact count of the pairs past the three it shows, and the pairs part
    says how many of how many it lists."""
    from autograder.batch import inputs

    catalogue = load_catalogue()
    entry = next(e for e in catalogue.ENTRIES if e.name == FROM_CATALOGUE["plain"])
    source = catalogue.materialize(entry, tmp_path / "source")
    names = [f"student_{k:02d}" for k in range(12)]
    for k, name in enumerate(names):
        for file in CONTRACT:
            text = MARKERS.sub("", (source / file).read_text())
            (tmp_path / "class" / name).mkdir(parents=True, exist_ok=True)
            (tmp_path / "class" / name / file).write_text(f"# written by student {k}\n{text}")
    found = inputs.discover(sorted((tmp_path / "class").iterdir()), tmp_path / "scratch").submissions
    data = similarity.report_json(similarity.analyse(found, solution=None))
    pairs = len(names) * (len(names) - 1) // 2
    assert data["flagged"] == len(data["flags"]) == pairs > similarity_data.MAX_REPORTED == len(data["pairs"])
    flags = report_similarity.similarity_flags(data)
    rest = len(names) - 1 - report_similarity.SIMILAR_SHOWN
    for name in names:
        lines = flags.get(name, [])
        assert sum(report_similarity.SIMILAR_MARK in line for line in lines) == report_similarity.SIMILAR_SHOWN, (name, lines)
        assert f"and {rest} more flagged pair(s)" in lines[-1], (name, lines)
    section = report_similarity.similarity_section(data)
    assert (f"{report_similarity.SHOWN_PAIRS} of {pairs} flagged pair(s) shown (the first {similarity_data.MAX_REPORTED} "
            "in similarity.html, all in similarity.csv)") in section
