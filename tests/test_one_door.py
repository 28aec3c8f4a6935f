"""One door: :func:`autograder.engine.grader.grade_submissions` (a wave; ``grade_submission``, one) is the only way
any entry point grades.

The start-up order (the zygote before pytest) is the engine's, not each caller's: these tests read
every module of the grader for the calls that would bypass the door, and try the wrong order.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from conftest import ROOT

#: Calls that grade or start the grading machinery, and the only modules allowed to make them.
GUARDED_CALLS = {
    "start_zygote": {"autograder/engine/grader.py", "autograder/sandbox/runner.py", "autograder/sandbox/zygote.py"},
    "grade_in_phases": {"autograder/engine/grader.py", "autograder/engine/plan.py"},
    # The GPU part (staff-run, on a GPU machine) judges its own rows with a device runner: its one function.
    "grade_staged": {"autograder/engine/plan.py", "autograder/gpu/grading.py"},
}


def _calls(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call):
            func = node.func
            names.add(func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", ""))
    return names


def test_only_the_door_grades_or_starts_the_zygote() -> None:
    offenders = []
    for path in sorted((ROOT / "autograder").rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        for call in _calls(path) & set(GUARDED_CALLS):
            if relative not in GUARDED_CALLS[call]:
                offenders.append(f"{relative} calls {call}()")
    assert offenders == []


def runtimes() -> list[str]:
    """Every platform's runtime: each module of ``autograder/platforms/`` (docs/changing.md, *Add a platform*)."""
    return sorted(path.relative_to(ROOT).as_posix() for path in (ROOT / "autograder" / "platforms").glob("*.py")
                  if path.name != "__init__.py")


def test_every_entry_point_grades_through_the_door() -> None:
    """The batch worker and a Slurm array task grade waves (grade_submissions), every platform's runtime (Gradescope's,
    PrairieLearn's, any added) one submission (grade_submission, a wave of one) through the platforms' one function,
    grade_upload."""
    for relative in ("autograder/batch/worker.py", "autograder/batch/slurm_chunk.py"):
        assert "grade_submissions" in _calls(ROOT / relative), relative
    assert "grade_submission" in _calls(ROOT / "autograder/platforms/__init__.py")
    assert {"autograder/platforms/gradescope.py", "autograder/platforms/prairielearn.py"} <= set(runtimes())
    for relative in runtimes():
        assert "grade_upload" in _calls(ROOT / relative), relative


def test_pytest_imported_before_the_start_is_refused() -> None:
    """A caller that imported pytest first would fork every student process holding it: refused, loudly."""
    code = ("import pytest\nfrom autograder.engine import grader\n"
            "try:\n    grader.start()\nexcept grader.StartOrderError as exc:\n    print('refused:', exc)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "refused: imported before the sandbox's zygote: pytest" in done.stdout


def test_the_door_starts_the_zygote_before_the_judge() -> None:
    """After start(), the zygote exists and was forked while pytest was not yet imported."""
    code = ("import sys\nfrom autograder.engine import grader\ngrader.start()\n"
            "from autograder.sandbox import zygote\n"
            "print('zygote' if zygote._ZYGOTE is not None else 'none', 'pytest' in sys.modules)\n"
            "grader.start()  # a second start does nothing\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["zygote", "True"]


def test_no_entry_point_imports_pytest_before_the_door_opens() -> None:
    """Importing an entry point, or the sandbox (what grader.start() imports before it forks the zygote), must leave
    the order to grader.start(): neither pytest nor the grader's own words (every student process would hold them)."""
    entries = ["autograder.cli", "autograder.batch.worker", "autograder.batch.slurm_chunk", "autograder.engine.plan",
               *(relative[:-3].replace("/", ".") for relative in runtimes()), "autograder.gpu.grading",
               "autograder.gpu.cli",
               "autograder.diagnosis.cli", "autograder.packaging.prairielearn", "autograder.packaging.classroom",
               "autograder.sandbox.runner"]
    held = ("pytest", "hypothesis", "autograder.engine.judge_words")
    code = (f"import importlib, sys\nfor name in {entries!r}:\n    importlib.import_module(name)\n"
            f"print(sorted(m for m in {held!r} if m in sys.modules))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"
