"""Staging submissions: folders, zips, nesting, near-miss names and unsafe archives."""

from __future__ import annotations

import os
import shutil
import zipfile
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from autograder.engine.intake import STAGING_PREFIX, IntakeError, Staged
from autograder.engine.intake import stage as stage_into
from conftest import ROOT

FILES = ("loss_scaler.py", "amp_step.py", "answers.py")


@pytest.fixture
def stage(tmp_path: Path) -> Iterator[Callable[..., Staged]]:
    """``intake.stage`` into a work folder three levels below ``tmp_path`` (so a ``../../`` escape from the staging
    folder still lands inside ``tmp_path``, where the tests look); every staging folder is removed afterwards."""
    work = tmp_path / "a" / "b" / "work"
    work.mkdir(parents=True)
    made: list[Staged] = []

    def staging(submission: Path, **kwargs: Any) -> Staged:
        staged = stage_into(submission, workdir=work, **kwargs)
        made.append(staged)
        assert staged.folder.parent == work
        return staged

    yield staging
    for staged in made:
        shutil.rmtree(staged.folder, ignore_errors=True)
    assert not list(work.glob(STAGING_PREFIX + "*"))


def write_solution(folder: Path, names: dict[str, str] | None = None) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name in FILES:
        (folder / (names or {}).get(name, name)).write_bytes((ROOT / "solutions" / name).read_bytes())


def test_top_level_folder(tmp_path: Path, stage: Callable[..., Staged]) -> None:
    write_solution(tmp_path / "s")
    staged = stage(tmp_path / "s")
    assert sorted(staged.found) == sorted(FILES) and staged.notes == []
    assert (staged.folder / "loss_scaler.py").read_bytes() == (ROOT / "solutions" / "loss_scaler.py").read_bytes()


def test_nested_folder_and_near_miss_names_are_used_with_a_note(tmp_path: Path, stage: Callable[..., Staged]) -> None:
    write_solution(tmp_path / "s" / "hw" / "src", {"loss_scaler.py": "Loss_Scaler (1).py"})
    staged = stage(tmp_path / "s")
    assert sorted(staged.found) == sorted(FILES)
    assert any("Loss_Scaler (1).py" in note for note in staged.notes)
    assert any("inside a folder" in note for note in staged.notes)


def test_zip_with_nested_files_and_unsafe_paths(tmp_path: Path, stage: Callable[..., Staged]) -> None:
    archive = tmp_path / "sub.zip"
    with zipfile.ZipFile(archive, "w") as bundle:
        bundle.writestr("../../loss_scaler.py", (ROOT / "solutions" / "loss_scaler.py").read_text())
        bundle.writestr("deep/amp_step.py", (ROOT / "solutions" / "amp_step.py").read_text())
        bundle.writestr("__MACOSX/deep/._amp_step.py", "junk")
    staged = stage(archive)
    assert sorted(staged.found) == ["amp_step.py", "loss_scaler.py"]
    # The member resolved against the staging folder would be tmp_path/a/b/loss_scaler.py: nothing escaped there
    # (or anywhere else below tmp_path); the one copy is the staged one.
    escaped = staged.folder / ".." / ".." / "loss_scaler.py"
    assert escaped.resolve().is_relative_to(tmp_path) and not escaped.exists()
    assert sorted(tmp_path.rglob("loss_scaler.py")) == [staged.folder / "loss_scaler.py"]
    assert any("unsafe path" in note for note in staged.notes)


def test_symlinks_are_never_followed(tmp_path: Path, stage: Callable[..., Staged]) -> None:
    secret = tmp_path / "secret.py"
    secret.write_text("SECRET = 1\n")
    folder = tmp_path / "s"
    folder.mkdir()
    os.symlink(secret, folder / "loss_scaler.py")
    staged = stage(folder)
    assert "loss_scaler.py" not in staged.found
    assert any("symbolic link" in note for note in staged.notes)


def test_oversized_file_is_skipped(tmp_path: Path, stage: Callable[..., Staged]) -> None:
    folder = tmp_path / "s"
    write_solution(folder)
    (folder / "amp_step.py").write_bytes(b"#" * (2 * 2**20))
    staged = stage(folder)
    assert "amp_step.py" not in staged.found and any("larger than" in note for note in staged.notes)


@pytest.mark.parametrize("content", [b"PK\x03\x04 definitely not a zip", b""])
def test_corrupt_zip_is_a_clear_error(tmp_path: Path, content: bytes, stage: Callable[..., Staged]) -> None:
    archive = tmp_path / "broken.zip"
    archive.write_bytes(content)
    with pytest.raises(IntakeError, match="not a readable zip"):
        stage(archive)


def test_missing_path_is_a_clear_error(tmp_path: Path, stage: Callable[..., Staged]) -> None:
    with pytest.raises(IntakeError, match="does not exist"):
        stage(tmp_path / "nope")


def test_a_bare_notebook_upload_is_told_how_to_export(tmp_path: Path, stage: Callable[..., Staged]) -> None:
    """The notebook edition's students upload the .ipynb by mistake: the note says how to make the zip."""
    folder = tmp_path / "upload"
    folder.mkdir()
    (folder / "amp_homework.ipynb").write_text('{"cells": []}')
    staged = stage(folder)
    assert staged.found == [] and staged.notebooks == ["amp_homework.ipynb"]
    assert staged.notes[0] == "Missing: loss_scaler.py, amp_step.py, answers.py. The tests that need them score 0."
    assert "amp_homework.ipynb: the autograder grades the .py files, not the notebook" in staged.notes[1]
    assert "last cell" in staged.notes[1] and "Upload that zip" in staged.notes[1]
    archive = tmp_path / "nb.zip"
    with zipfile.ZipFile(archive, "w") as bundle:
        bundle.write(folder / "amp_homework.ipynb", "work/amp_homework.ipynb")
    assert "work/amp_homework.ipynb: the autograder" in stage(archive).notes[1]
    # with every file there, a notebook beside them is nobody's mistake: no note
    write_solution(folder)
    assert stage(folder).notes == []


@pytest.mark.parametrize("names", [
    {"loss_scaler.py": "LossScaler.py", "amp_step.py": "amp-step.py", "answers.py": "answer.py"},
    {"loss_scaler.py": "loss-scalers.py", "amp_step.py": "AmpStep.py", "answers.py": "ANSWERS.py"},
])
def test_case_hyphen_plural_and_camel_case_names_are_graded_with_a_note(
        tmp_path: Path, names: dict[str, str], stage: Callable[..., Staged]) -> None:
    write_solution(tmp_path / "s", names)
    staged = stage(tmp_path / "s")
    assert sorted(staged.found) == sorted(FILES)
    for contract, given in names.items():  # each note names the file found and the name to give it
        assert f"Used {given} as {contract}; please name the file exactly {contract}." in staged.notes


def test_a_missing_file_names_the_python_files_found_instead(tmp_path: Path, stage: Callable[..., Staged]) -> None:
    write_solution(tmp_path / "s", {"amp_step.py": "training_step.py"})
    staged = stage(tmp_path / "s")
    assert staged.notes == ["Missing: amp_step.py. The tests that need them score 0.",
                            "Found training_step.py, not graded: if one of them is your amp_step.py, rename it "
                            "amp_step.py."]


def test_an_oversized_file_is_told_as_skipped_not_missing(tmp_path: Path, stage: Callable[..., Staged]) -> None:
    folder = tmp_path / "s"
    write_solution(folder)
    (folder / "amp_step.py").write_bytes(b"#" * (2 * 2**20))
    assert stage(folder).notes == ["amp_step.py was skipped: larger than 1 MiB."]


def test_a_folder_with_no_submission_files_stops_the_batch_with_one_line(tmp_path: Path) -> None:
    from autograder.batch import inputs

    empty, notes_only, zipped = tmp_path / "empty", tmp_path / "notes", tmp_path / "notes.zip"
    empty.mkdir()
    notes_only.mkdir()
    (notes_only / "notes.txt").write_text("grade these next week\n")
    with zipfile.ZipFile(zipped, "w") as bundle:
        bundle.writestr("notes.txt", "nothing here")
    for path in (empty, notes_only, zipped):
        with pytest.raises(inputs.InputError) as raised:
            inputs.discover([path], tmp_path / "scratch")
        message = str(raised.value)
        assert message.startswith(f"no submission found in {path}: ") and "\n" not in message
    write_solution(tmp_path / "alice" / "hw", {"loss_scaler.py": "LossScaler.py"})  # a near miss is a submission
    assert [s.name for s in inputs.discover([tmp_path / "alice"], tmp_path / "scratch").submissions] == ["alice"]
    # beside a real submission, an upload of notes is a student who sent nothing gradeable: graded, not a stop
    beside = inputs.discover([tmp_path / "alice", zipped], tmp_path / "scratch").submissions
    assert [s.name for s in beside] == ["alice", "notes"]


def test_renamed_duplicates_are_said_and_keep_their_source(tmp_path: Path) -> None:
    from autograder.batch import inputs

    write_solution(tmp_path / "class" / "henry")
    shutil.make_archive(str(tmp_path / "class" / "henry"), "zip", tmp_path / "class" / "henry")
    write_solution(tmp_path / "class" / "zoe")
    write_solution(tmp_path / "late" / "sam")
    write_solution(tmp_path / "late" / "tom")
    write_solution(tmp_path / "other" / "sam")
    write_solution(tmp_path / "other" / "uma")
    found = inputs.discover([tmp_path / "class", tmp_path / "late", tmp_path / "other"], tmp_path / "scratch")
    named = {s.name: (s.source, s.renamed_from) for s in found.submissions}
    assert named["henry"] == (f"{tmp_path / 'class'}/henry", "")
    assert named["henry-2"] == (f"{tmp_path / 'class'}/henry.zip", "henry")
    assert named["sam-2"] == (f"{tmp_path / 'other'}/sam", "sam")
    assert found.notes == [f"{tmp_path / 'class'}/henry.zip is graded as henry-2: another submission is already "
                           "named henry.",
                           f"{tmp_path / 'other'}/sam is graded as sam-2: another submission is already named sam."]


def _grade_cli(*args: object) -> "subprocess.CompletedProcess[str]":
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "autograder", "grade", *map(str, args), "--no-similarity",
                           "--jobs", "1"], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=600)


def test_an_empty_batch_root_exits_non_zero_with_one_line_and_grades_nobody(tmp_path: Path) -> None:
    (tmp_path / "class").mkdir()
    (tmp_path / "class" / "notes.txt").write_text("to grade\n")
    done = _grade_cli(tmp_path / "class", "--out", tmp_path / "out")
    said = [line for line in done.stderr.splitlines() if line.startswith("error")]
    assert done.returncode == 2 and said == [f"error: no submission found in {tmp_path / 'class'}: it holds no .py "
                                             "file, notebook or zip (expected loss_scaler.py, amp_step.py and "
                                             "answers.py, or folders or zips of submissions)"], done.stderr
    assert not (tmp_path / "out" / "gradebook.csv").exists()


def test_a_renamed_duplicate_is_told_in_the_console_the_report_the_feedback_and_the_gradebook(tmp_path: Path) -> None:
    import csv

    henry = tmp_path / "class" / "henry"
    henry.mkdir(parents=True)
    for name in FILES:  # the skeleton: quick to grade
        shutil.copy(ROOT / "assignment" / name, henry / name)
    shutil.make_archive(str(henry), "zip", henry)
    out = tmp_path / "out"
    done = _grade_cli(tmp_path / "class", "--out", out)
    assert done.returncode == 0, done.stderr[-3000:]
    told = f"{tmp_path / 'class'}/henry.zip is graded as henry-2: another submission is already named henry."
    assert f"note: {told}" in done.stderr
    with open(out / "gradebook.csv", newline="", encoding="utf-8") as stream:
        sources = {row["submission"]: row["source"] for row in csv.DictReader(stream)}
    assert sources == {"henry": f"{tmp_path / 'class'}/henry", "henry-2": f"{tmp_path / 'class'}/henry.zip"}
    feedback = (out / "henry-2" / "feedback.md").read_text()
    assert ("Graded as **henry-2**: another submission in this batch is also named henry (this one is "
            f"{tmp_path / 'class'}/henry.zip).") in feedback
    assert "Graded as" not in (out / "henry" / "feedback.md").read_text()
    page = (out / "report.html").read_text()
    row = page.split('<a href="henry-2/feedback.md">henry-2</a>', 1)[1].split("</tr>", 1)[0]
    assert "Graded as henry-2: another submission in this batch is also named henry" in row
