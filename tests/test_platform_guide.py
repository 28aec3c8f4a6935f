"""docs/changing.md's "Add a platform" steps, walked on a copy of the project: its worked example, Autolab.

The hand edits are the guide's own code blocks: a fence whose info string names a file
(```` ```python autograder/platforms/autolab.py ````) holds that file's whole text when the file is new, else what
is added to it.  Only where an addition goes is said here (:data:`PLACES`: an anchor that must occur once, as the
row guide's patches; a step that no longer applies breaks loudly), so the code walked is the code a reader copies.

The walk: the copy gets the edits; the Makefile's new target (``make -n autolab``) is run with this checkout's
Python; ``autograde.tar``, ``autograde-Makefile`` and a handin go into a fresh folder each, where ``make`` runs as
Autolab runs it (stderr read with stdout).  ``solutions/`` zipped gets 90 (scaler 50, amp_step 30, quick_check 10),
the skeleton 0, an empty and a corrupt handin the guide's not-graded line after their reason; then the copy's own
tests that the guide names (the platform agreement, slow, is only collected: it grades on every platform).

The files edited by hand are counted and the count is the guide's ("**8 files by hand**").
"""

from __future__ import annotations

import ast
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conftest import ROOT
from test_changing_guide import Edit, apply, copy_project, run_in

GUIDE = ROOT / "docs" / "changing.md"
HEADING = "## Add a platform"
#: A code block that names its file: ```LANGUAGE FILE, its text, the closing fence.
BLOCK = re.compile(r"^```[\w-]+ (\S+)\n(.*?)^```$", re.MULTILINE | re.DOTALL)


@dataclass(frozen=True)
class Place:
    """Where one of the guide's additions to an existing file goes: after ``anchor`` (or before it), a blank line
    between them when ``gap``."""

    file: str
    anchor: str
    before: bool = False
    gap: bool = False


#: Where each of the guide's additions to an existing file goes, in the guide's order (a new file has none).
PLACES = (
    Place("Makefile", "\t$(PY) -m autograder.packaging.classroom --out dist/classroom --language $(AMP_LANGUAGE)\n",
          gap=True),
    Place("tests/README.md", "| PrairieLearn (`prairielearn_results.schema.json`) | `test_prairielearn.py`, "
                             "`test_prairielearn_image.py` |\n"),
    Place("tests/test_platform_agreement.py", "from test_prairielearn import lay_out, run_entrypoint\n"),
    Place("tests/test_platform_agreement.py",
          "    assert run.points == sum(batch[number] for number in public)\n", gap=True),
    Place("README.md", "**otter-grader** (optional, for courses that run on it).", before=True, gap=True),
    Place("docs/platforms.md", "## The GPU points in a gradebook\n", before=True, gap=True),
)
#: The files the example edits by hand now (the guide says the number): lower it when a step's file drops out.
HAND_EDITED_NOW = 8
#: The copy's own tests that the guide names (the agreement, slow, collected only; see the module's doc).
PROOFS = ("tests/test_autolab.py", "tests/test_import_graph.py", "tests/test_readme.py",
          "tests/test_one_door.py::test_every_entry_point_grades_through_the_door",
          "tests/test_one_door.py::test_no_entry_point_imports_pytest_before_the_door_opens")
HANDIN = "handin.zip"
NOT_GRADED = '{"scores": {}}'
PROBLEMS = {"scaler": 50, "amp_step": 30, "quick_check": 10}
WITHHELD = "are not shown here (they would show the hidden inputs)"


def section() -> str:
    """The guide's "Add a platform": up to the next heading outside a code block (its blocks hold headings)."""
    lines = GUIDE.read_text(encoding="utf-8").split("\n")
    start, fenced = lines.index(HEADING), False
    for end in range(start + 1, len(lines)):
        if lines[end].startswith("```"):
            fenced = not fenced
        elif not fenced and lines[end].startswith("## "):
            return "\n".join(lines[start:end])
    return "\n".join(lines[start:])


def blocks() -> list[tuple[str, str]]:
    """(file, text) of each code block of the section that names a file, in the guide's order."""
    return BLOCK.findall(section())


def new_files() -> list[str]:
    return [name for name in dict.fromkeys(name for name, _ in blocks()) if name not in {p.file for p in PLACES}]


def steps() -> tuple[Edit, ...]:
    """The guide's additions to existing files as the row guide's patches, each block at its place."""
    additions = [(name, text) for name, text in blocks() if name not in new_files()]
    assert [name for name, _ in additions] == [place.file for place in PLACES], "the guide's blocks and PLACES differ"
    edits = []
    for (_, text), place in zip(additions, PLACES):
        gap = "\n" if place.gap else ""
        new = text + gap + place.anchor if place.before else place.anchor + gap + text
        edits.append(Edit(place.file, place.anchor, new))
    return tuple(edits)


def hand_edited() -> list[str]:
    return sorted({name for name, _ in blocks()})


def walk(root: Path) -> None:
    """The guide's hand edits on the project at ``root``: its new files written, its additions placed."""
    for name in new_files():
        (text,) = [text for file, text in blocks() if file == name]
        assert not (root / name).exists(), f"{name} is new in the guide but exists"
        (root / name).write_text(text, encoding="utf-8")
    apply(root, steps())


def prose() -> str:
    return BLOCK.sub("", section())


def test_the_guide_states_the_files_it_edits_by_hand() -> None:
    assert len(hand_edited()) == HAND_EDITED_NOW, hand_edited()
    assert f"**{HAND_EDITED_NOW} files by hand**, {len(new_files())} of them new" in prose()
    missing = [name for name in hand_edited() if f"`{name}`" not in prose()]
    assert not missing, f"the steps of 'Add a platform' do not name {missing}"


def test_the_example_adds_a_runtime_a_packaging_and_its_test() -> None:
    assert new_files() == ["autograder/platforms/autolab.py", "autograder/packaging/autolab.py",
                           "tests/test_autolab.py"]


def test_every_step_applies_to_the_project_and_its_python_parses(tmp_path: Path) -> None:
    """The cheap half of the walk (make test): every anchor still occurs once, every Python file edited parses."""
    for name in hand_edited():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        if (ROOT / name).exists():
            shutil.copy(ROOT / name, tmp_path / name)
    walk(tmp_path)
    for name in hand_edited():
        if name.endswith(".py"):
            ast.parse((tmp_path / name).read_text(encoding="utf-8"), name)


def zipped(folder: Path) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as bundle:
        for name in ("loss_scaler.py", "amp_step.py", "answers.py"):
            bundle.write(folder / name, name)
    return buffer.getvalue()


def corrupt(data: bytes) -> bytes:
    """A zip whose directory still reads and whose members do not (their compressed bytes overwritten)."""
    return data[:40] + b"\xff" * 400 + data[440:]


def autolab_reads(line: str) -> dict[str, Any]:
    """The scores Autolab reads from the last line (``parseAutoresult`` of Autolab's
    ``app/helpers/assessment_autograde_core.rb``: every ``word:`` quoted, then JSON)."""
    return json.loads(re.sub(r"([a-zA-Z0-9]+):", r'"\1":', line))["scores"]


def run_job(dist: Path, job: Path, handin: bytes) -> list[str]:
    """An Autolab job: the Makefile, the tar and the handin in an empty folder, ``make``; every line it printed."""
    job.mkdir()
    shutil.copy(dist / "autograde-Makefile", job / "Makefile")
    shutil.copy(dist / "autograde.tar", job / "autograde.tar")
    (job / HANDIN).write_bytes(handin)
    # Autolab's driver runs this make at the top level: a make of ours above it (make test-all) must not show, or
    # the sub-make prints "Leaving directory" after the score line Autolab reads.
    env = {key: value for key, value in os.environ.items()
           if key not in ("PYTHONPATH", "MAKELEVEL", "MAKEFLAGS", "MFLAGS")
           and (not key.startswith("AMP_") or key == "AMP_PLAN_CACHE")}
    done = subprocess.run(["make", f"PYTHON={sys.executable}"], cwd=job, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:]
    return done.stdout.rstrip("\n").split("\n")


# One to three minutes (a copy, its packaging, four jobs, the copy's test_autolab): slow, in conftest's SLOW.
def test_walking_the_guide_adds_autolab_and_make_grades_its_handins(tmp_path: Path) -> None:
    root = copy_project(tmp_path / "project")
    walk(root)

    plan = subprocess.run(["make", "-n", "autolab", f"PY={sys.executable}"], cwd=root, capture_output=True, text=True,
                          env={key: value for key, value in os.environ.items() if not key.startswith("AMP_")})
    assert plan.returncode == 0, plan.stderr[-2000:]
    (command,) = [line for line in plan.stdout.splitlines() if "autograder.packaging.autolab" in line]
    done = run_in(root, shlex.split(command))
    assert done.returncode == 0, done.stderr[-3000:]
    dist = root / "dist" / "autolab"
    assert sorted(path.name for path in dist.iterdir()) == ["autograde-Makefile", "autograde.tar", "requirements.txt"]

    solution = run_job(dist, tmp_path / "solutions", zipped(ROOT / "solutions"))
    assert autolab_reads(solution[-1]) == PROBLEMS and sum(autolab_reads(solution[-1]).values()) == 90
    assert "CPU part: 90 of 90 points (the GPU part is graded by staff)." in solution
    assert sum(WITHHELD in line for line in solution) == 24  # every hidden row's text withheld, no public one's

    skeleton = run_job(dist, tmp_path / "skeleton", zipped(ROOT / "assignment"))
    assert autolab_reads(skeleton[-1]) == dict.fromkeys(PROBLEMS, 0)
    assert "CPU part: 0 of 90 points (the GPU part is graded by staff)." in skeleton

    empty = run_job(dist, tmp_path / "empty", b"")
    assert empty[-2:] == [f"{HANDIN} is not a readable zip archive.", NOT_GRADED]
    assert autolab_reads(empty[-1]) == {}  # Autolab: "Empty autoresult string", an autograder error, not a grade
    broken = run_job(dist, tmp_path / "corrupt", corrupt(zipped(ROOT / "solutions")))
    assert broken[-1] == NOT_GRADED and broken[-2].startswith(f"{HANDIN} is not a readable zip archive ("), broken[-2:]

    done = run_in(root, [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider",
                         "-o", "addopts=", *PROOFS])
    assert done.returncode == 0, done.stdout[-4000:]
    done = run_in(root, [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
                         "--collect-only", "tests/test_platform_agreement.py"])
    assert done.returncode == 0, done.stdout[-4000:]
