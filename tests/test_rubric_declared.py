"""A rubric row is declared once (``autograder/engine/rubric.py``); what repeats it elsewhere is derived or checked.

* the README's points table is the one ``python -m autograder rubric --readme README.md`` writes (shipped
  defaults: every ``AMP_*`` variable removed);
* every row carries a title in every feedback language, and every Task-1 row says how far into a training step
  its scenarios go (what the hostile cases' bounds are derived from);
* every row's test is defined in the suites the row declares: a hidden row's in the hidden suite, unless it says
  ``inputs="public"`` (graded on its public example alone: no verbatim copy in the hidden suite), and the grader
  fails a row whose test is elsewhere as its own fault;
* the notes that give a file's size ("Why one file of ~N lines") are within a tenth of the truth.

docs/validation.md's bug counts are checked in ``tests/test_catalogue.py``, where they are measured.

What a row holds (numbers, points, visibility) and the README table's lines are pinned by hand in
``tests/test_rubric_pins.py``.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from autograder.engine import judge, rubric, rubric_readme, strings
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


def _defined(folder: Path) -> set[str]:
    """The test functions the files of ``folder`` define (read, not imported)."""
    return {node.name for path in folder.glob("test_*.py") for node in ast.parse(path.read_text(encoding="utf-8")).body
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")}


def test_every_rows_test_is_in_the_suites_it_declares() -> None:
    public, hidden = _defined(ROOT / "assignment" / "checks"), _defined(ROOT / "autograder" / "hidden")
    for item in rubric.ITEMS:
        found = {suite for suite, names in (("public", public), ("hidden", hidden)) if item.test in names}
        assert found, f"row {item.number}: {item.test} is defined in no suite"
        assert rubric.suite_problem(item, found) is None, rubric.suite_problem(item, found)
    assert "1.18" in [item.number for item in rubric.ITEMS if item.inputs == "public"]
    assert "test_defaults_and_restored_state" in public - hidden  # its hidden copy is gone, its public example stays
    assert next(i for i in rubric.ITEMS if i.number == "1.18").visibility == rubric.HIDDEN_VISIBILITY


def test_graded_on_public_inputs_is_declared_never_inferred() -> None:
    hidden = rubric.Item("9.1", "test_x", "x", 1, "scaler", reaches="__init__", ko="x")
    on_public = rubric.Item("9.2", "test_y", "y", 1, "scaler", reaches="__init__", ko="y", inputs="public")
    assert rubric.suite_problem(hidden, {"hidden"}) is None
    assert rubric.suite_problem(hidden, {"hidden", "public"}) is None  # a hidden test with its public example
    assert rubric.suite_problem(hidden, {"public"}) == (  # its hidden test misspelt, or never written
        "row 9.1: test_x is not in the hidden suite (a misspelt name? a hidden row graded on its public example "
        "alone says inputs='public')")
    assert rubric.suite_problem(on_public, {"public"}) is None
    assert rubric.suite_problem(on_public, {"public", "hidden"}) == (
        "row 9.2: the hidden suite defines test_y, which the row grades on public inputs alone")
    assert rubric.suite_problem(on_public, {"hidden"}) is not None
    public_row = rubric.Item("9.3", "test_z", "z", 1, "scaler", rubric.PUBLIC, reaches="__init__", ko="z")
    assert rubric.suite_problem(public_row, {"public", "hidden"}) is not None  # hidden inputs in a visible row
    for wrong in ({"inputs": "publik"}, {"inputs": "public", "suite": rubric.PUBLIC}):
        with pytest.raises(ValueError, match="inputs="):
            rubric.Item("9.4", "test_w", "w", 1, "scaler", **{"reaches": "__init__", "ko": "w", **wrong})


def test_the_grader_fails_a_row_whose_hidden_test_is_missing_as_its_own_fault() -> None:
    """The public example alone is collected for a hidden row that declares no public inputs: the row fails as
    an internal fault (the reference's recording then refuses to grade), never scored on the public case alone."""
    row = next(item for item in rubric.ITEMS if item.number == "1.16")
    public = SimpleNamespace(fspath=judge.PUBLIC_DIR / "test_public_scaler.py", name=row.test, originalname=row.test)
    plugin = judge.JudgePlugin(runner=None, tests={row.test}, rows=(row,))
    plugin.pytest_collection_modifyitems([public])
    [declared] = plugin.outcomes
    assert declared.internal.startswith("row 1.16: test_state_dict_round_trip is not in the hidden suite")
    passing = judge.Outcome(row.test, row.test, True, public=True)
    [scored], staff = judge.score([passing, declared], (row,))
    assert (scored.passed, scored.internal) == (False, True) and "is not in the hidden suite" in staff
    hidden = SimpleNamespace(fspath=judge.HIDDEN_DIR / "test_hidden_scaler.py", name=row.test, originalname=row.test)
    plugin = judge.JudgePlugin(runner=None, tests={row.test}, rows=(row,))
    plugin.pytest_collection_modifyitems([public, hidden])
    assert plugin.outcomes == []


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
