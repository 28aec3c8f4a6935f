"""A rubric row is declared once (``autograder/engine/rubric.py``); what repeats it elsewhere is derived or checked.

* the README's points table is the one ``python -m autograder rubric --readme README.md`` writes (shipped
  defaults: every ``AMP_*`` variable removed);
* every row carries a title in every feedback language, and every Task-1 row says how far into a training step
  its scenarios go (what the hostile cases' bounds are derived from);
* the notes that give a file's size ("Why one file of ~N lines") are within a tenth of the truth.

docs/validation.md's bug counts are checked in ``tests/test_catalogue.py``, where they are measured.

What a row holds (numbers, points, visibility) and the README table's lines are pinned by hand in
``tests/test_rubric_pins.py``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from autograder.engine import rubric, rubric_readme, strings
from conftest import ROOT

SIZE_NOTE = re.compile(r"~\s?(\d+) lines")
#: Where a size note may be written (generated and vendored files are not notes).
NOTE_GLOBS = ("autograder/**/*.py", "assignment/**/*.py", "solutions/**/*.py", "tests/**/*.py", "docs/*.md",
              "README.md", "benchmarks/**/*.py", "mutation/**/*.py")


def _shipped_env() -> dict[str, str]:
    return {key: value for key, value in os.environ.items() if not key.startswith("AMP_")}


def test_the_readme_points_table_is_the_rubrics(tmp_path: Path) -> None:
    copy = tmp_path / "README.md"
    shutil.copyfile(ROOT / "README.md", copy)
    done = subprocess.run([sys.executable, "-m", "autograder", "rubric", "--readme", str(copy)], cwd=ROOT,
                          env=_shipped_env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert copy.read_text(encoding="utf-8") == (ROOT / "README.md").read_text(encoding="utf-8"), (
        "README.md's points table is not the rubric's: run `python -m autograder rubric --readme README.md`")
    assert "already up to date" in done.stdout


def test_the_readme_table_is_rewritten_between_its_markers() -> None:
    table = rubric_readme.table()
    assert table.startswith(rubric_readme.BEGIN + "\n") and table.endswith("\n" + rubric_readme.END)
    assert rubric_readme.rewrite(f"a\n{rubric_readme.BEGIN}\nold\n{rubric_readme.END}\nb\n") == f"a\n{table}\nb\n"


def test_every_row_is_titled_in_every_language() -> None:
    for item in rubric.ITEMS + rubric.GPU_ITEMS:
        assert set(item.titles) == set(strings.LANGUAGES), item.number
        assert all(item.titles.values()), f"row {item.number} lacks a title in some language"
        assert item.titles["ko"] != item.title, f"row {item.number}'s Korean title is its English one"


def test_every_task1_row_says_how_far_into_a_step_it_goes() -> None:
    for item in rubric.ITEMS:
        if item.runs_student_scaler:
            assert item.reaches in rubric.STAGES, f"row {item.number}: reaches={item.reaches!r}"
        else:
            assert item.reaches == "", f"row {item.number} runs no student scaler but says reaches={item.reaches!r}"


def _notes() -> list[tuple[Path, int]]:
    found = []
    for pattern in NOTE_GLOBS:
        for path in sorted(ROOT.glob(pattern)):
            if ".venv" in path.parts or not path.is_file():
                continue
            for match in SIZE_NOTE.finditer(path.read_text(encoding="utf-8", errors="replace")):
                found.append((path, int(match.group(1))))
    return found


def test_size_notes_are_true() -> None:
    wrong = []
    for path, said in _notes():
        if path == Path(__file__):
            continue  # this file names the pattern
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if abs(lines - said) > lines / 10:
            wrong.append(f"{path.relative_to(ROOT)} says ~{said} lines and has {lines}: correct the note or drop it")
    assert not wrong, "\n".join(wrong)
