"""Every failing Task-2 row reproduces: its message's program, pasted into a fresh Python in the assignment folder,
prints the wrong value the message shows, and with a correct ``amp_step`` (solutions/amp_step.py) for the call the
message is about, the value the message says a correct step gives.

The module grades every Task-2 catalogue bug once (``--jobs 2``: minutes, so the module is slow); ``make test`` runs
the cheap case (:func:`test_a_public_checks_program_reproduces_locally`): one bug's public check run locally, its
program run with the bug and with a correct step.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from autograder.diagnosis.table import load_catalogue
from checks import arithmetic
from conftest import ROOT, grade, load_results

catalogue = load_catalogue()
#: The catalogued bugs of amp_step alone that fail some Task-2 row.
TASK2_BUGS = [entry for entry in catalogue.BUGS if entry.touched == {"amp_step.py"} and not entry.known_gap
              and any(number.startswith("2.") for number in entry.must_fail)]
#: A row's program, what its last line should do (a correct amp_step) and what it does with the submission's.
PROGRAM = re.compile(r"After running:\n(?P<program>(?:    .*\n)+)the last line should: (?P<want>.*)\n"
                     r"but with your code it (?P<kind>prints|raises|runs without error) ?(?P<value>.*)")
#: The line of the program that makes the call the message is about (checks.judge.amp_snippet.LAST_CALL).
LAST_CALL = "loss = amp_step("
#: Task 2's rows (2.10's program is the underflow run: a correct amp_step makes every call of it).
EFFECT_ROWS = {f"2.{i}" for i in range(1, 11)}


def assignment_copy(folder: Path, amp_step: Path) -> Path:
    """A copy of assignment/ whose amp_step.py is ``amp_step``, with the reference's beside it as correct_amp_step.py."""
    shutil.copytree(ROOT / "assignment", folder, ignore=shutil.ignore_patterns("__pycache__", "*.ipynb"))
    shutil.copyfile(amp_step, folder / "amp_step.py")
    shutil.copyfile(ROOT / "solutions" / "amp_step.py", folder / "correct_amp_step.py")
    return folder


def run(program: str, folder: Path, *, correct_step: bool = False) -> subprocess.CompletedProcess[str]:
    """``program`` in a fresh Python in ``folder``; ``correct_step``: its last call made by a correct amp_step."""
    if correct_step:
        assert program.count(LAST_CALL) == 1, program
        program = program.replace(LAST_CALL, "loss = correct_amp_step(")  # 2.10's: in the loop
        program = "from correct_amp_step import amp_step as correct_amp_step\n" + program
    (folder / "snippet.py").write_text(program, encoding="utf-8")
    # a student's fresh Python: the snippet's import of ``checks`` pins the grader's arithmetic, not this environment
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "AMP_SUBMISSION", *arithmetic.PORTABLE)}
    return subprocess.run([sys.executable, "snippet.py"], cwd=folder, capture_output=True, text=True, timeout=120,
                          env={**env, "OMP_NUM_THREADS": "1"})


def did(done: subprocess.CompletedProcess[str], text: str) -> bool:
    """Whether a run did what ``text`` says ("prints X", "raises T: message", "runs without error", or the same
    with "print"/"raise"/"run")."""
    verb, _, value = text.partition(" ")
    if verb in ("raises", "raise"):
        last = (done.stderr.strip().splitlines() or [""])[-1]
        # (Python's traceback may add a suggestion to the message: "... Did you mean: 'scale'?")
        return done.returncode != 0 and last.split(": ", 1)[0].split(".")[-1] == value.split(": ", 1)[0] \
            and last.split(": ", 1)[-1].startswith(value.split(": ", 1)[-1])
    if done.returncode != 0:
        return False
    if verb in ("runs", "run"):
        return True
    printed = done.stdout.strip().splitlines()
    if value.startswith("a loss below "):  # row 2.10: where a correct amp_step's training ends
        return bool(printed) and float(printed[-1]) < float(value.rsplit(" ", 1)[-1])
    return bool(printed) and printed[-1] == value.strip()


def programs(output: str) -> list[dict[str, str]]:
    """The programs in a failure text, each with its program, want and have ("prints X", ...)."""
    return [{"program": textwrap.dedent(m.group("program")), "want": m.group("want"),
             "have": f"{m.group('kind')} {m.group('value')}".strip()} for m in PROGRAM.finditer(output)]


def check_program(found: dict[str, str], folder: Path, where: str) -> None:
    buggy = run(found["program"], folder)
    assert did(buggy, found["have"]), (f"{where}: the program should do what the message says the submission does "
                                       f"({found['have']}), but printed {buggy.stdout[-500:]!r} {buggy.stderr[-800:]!r}"
                                       f"\n{found['program']}")
    correct = run(found["program"], folder, correct_step=True)
    assert did(correct, found["want"]), (f"{where}: with a correct step the program should {found['want']}, but it "
                                         f"printed {correct.stdout[-500:]!r} {correct.stderr[-800:]!r}\n"
                                         f"{found['program']}")


# --------------------------------------------------------------------------- make test: one public check, locally


def test_a_public_checks_program_reproduces_locally(tmp_path: Path) -> None:
    entry = next(entry for entry in TASK2_BUGS if entry.name == "clip_before_unscale")
    files = catalogue.materialize(entry, tmp_path / "files")
    done = subprocess.run([sys.executable, "-m", "pytest", "checks/test_public_amp_step.py", "-q", "-p", "no:randomly",
                           "-k", "test_amp_step_unscales_before_clipping"], cwd=ROOT / "assignment",
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "AMP_SUBMISSION": str(files), "AMP_LANGUAGE": "en"})
    assert done.returncode == 1, done.stdout[-3000:]
    # Only the failure section: under CI=true pytest repeats the whole message in its short summary.
    failures = done.stdout.split("short test summary info")[0]
    output = "\n".join(line[4:] if line.startswith("E   ") else line for line in failures.splitlines())
    (found,) = programs(output + "\n")
    assert "from checks.runners.probes import AmpProbe" in found["program"]
    assert "# run this in your assignment folder" in found["program"]
    assert found["want"].startswith("print ") and found["have"].startswith("prints ")
    check_program(found, assignment_copy(tmp_path / "assignment", files / "amp_step.py"), entry.name)


# --------------------------------------------------------------------------- test-all: every Task-2 bug, graded


#: Grade into this folder, or reuse the grades already there (a debugging aid, as test_catalogue.py's).
REUSE_ENV = "AMP_TASK2_GRADES"


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[dict[str, Any], Path]]:
    """Each Task-2 bug's results.json and files, graded once for the module."""
    reuse = os.environ.get(REUSE_ENV)
    base = Path(reuse) if reuse else tmp_path_factory.mktemp("task2-snippets")
    paths = [catalogue.materialize(entry, base / "submissions" / entry.folder_name) for entry in TASK2_BUGS]
    if not (reuse and (base / "out" / "gradebook.csv").is_file()):
        done = grade(paths, base / "out", "--jobs", "2", env={"AMP_DIAGNOSIS": "off"}, timeout=1800)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return {entry.name: (load_results(base / "out", entry.folder_name), path) for entry, path in zip(TASK2_BUGS, paths)}


def failing_rows(results: dict[str, Any]) -> dict[str, str]:
    return {test["number"]: str(test.get("output", "")) for test in results["tests"]
            if test.get("number") in EFFECT_ROWS and (test["score"] < test["max_score"] or test["status"] != "passed")}


@pytest.mark.slow
@pytest.mark.parametrize("entry", [pytest.param(entry, id=entry.name) for entry in TASK2_BUGS])
def test_every_failing_rows_program_reproduces(graded: dict[str, tuple[dict[str, Any], Path]], entry: Any,
                                               tmp_path: Path) -> None:
    """The first program of each failing row (its first failing case, shown in full): the wrong value with the bug,
    the expected value with a correct step on the message's inputs (the same calls before it)."""
    results, files = graded[entry.name]
    rows = failing_rows(results)
    assert rows, f"{entry.name} fails no Task-2 row judged on effects"
    folder = assignment_copy(tmp_path / "assignment", files / "amp_step.py")
    shown = 0
    for number, output in sorted(rows.items()):
        found = programs(output)
        if not found:
            # a row whose own behaviour another mistake hides says so, and has nothing to reproduce
            assert "We cannot see whether your amp_step gets this right" in output, f"{entry.name} {number}:\n{output}"
            continue
        check_program(found[0], folder, f"{entry.name}, row {number}")
        shown += 1
    assert shown, f"{entry.name}: no failing row has a program"
