"""Runtime of the generated otter test files in otter's grading run: how an otter test case gets its verdict.

This file ships, byte for byte, as ``amp_otter_bridge.py`` (:data:`SHIPPED_NAME`) in the ``files/`` folder of the
otter autograder zip (otter copies it into the folder it grades, over any submitted file of that name).  The
student's ``assignment/`` folder has the public edition under that name instead (:mod:`otter_public`, for
``grader.check``): nothing of the judge ships to students.  Each test file that
``autograder/packaging/otter_build.py`` generates is a small loader: it reads its edition from the current
folder, checks its SHA-256 against the digest baked into the test file at build time, and only then runs it and
calls :func:`cases`; a missing or changed copy is never run, every case fails with a clear message instead.  It is
a module of its own, in the package, so that it can be read, linted and unit-tested.

In otter's grading kernel (``otter run`` / otter on Gradescope) the folder otter grades in is copied, minus what
otter and this autograder added to it (:data:`ADDED`, this module included), to a fresh folder, and the isolated
judge grades that copy in a subprocess::

    python -m autograder grade <copy> --out <tmp>

using the grader shipped in the autograder zip as ``amp_grader.zip``.  Each case then reads its rubric row from
``results.json``: the same verdicts, messages (with hypothesis's counterexamples) and determinism as
``python -m autograder grade``.  The judge runs once per submission: the three test files share this module (the
loader keeps it in ``sys.modules``) and so its cache.

What a case says is in the words the test file hands over (``texts``: its build's language, baked in by
``otter_build`` from the grader's words, keys ``otter.*`` without the prefix); the judge runs in that language too
(``$AMP_LANGUAGE``).

Only the standard library is used, and nothing is imported from the folder being graded.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

#: This module's file name wherever it ships (a name no submission would pick).
SHIPPED_NAME = "amp_otter_bridge.py"
GRADER_ZIP = "amp_grader.zip"
DRIVER_NOTEBOOK = "amp_homework.ipynb"
#: Where the otter plugin (autograder/packaging/otter_plugin.py) moved the submitted files.
QUARANTINE = "amp_submitted"
#: What otter and this autograder add to the folder otter grades in (left out of the judge's copy).
ADDED = ("tests", "__init__.py", GRADER_ZIP, DRIVER_NOTEBOOK, QUARANTINE, SHIPPED_NAME)
JUDGE_TIMEOUT = 1800

#: ``(number, title, points, hidden, public check node id or "")``: one rubric row of a test file.
Row = Sequence[Any]
#: A case's verdict: returns when the case passes, raises AssertionError with the message when not.
Verdict = Callable[[], None]
#: ``(case name, points, hidden, verdict)``: one otter test case.
Case = tuple[str, float, bool, Verdict]
#: A test file's words (``otter_build.bridge_texts``): message templates by name; ``language`` (its code) and
#: ``setting`` (the variable the judge reads it from); ``about`` and ``missing`` (how the judge's notes on a
#: submission open, and the words of its missing-files note).
Texts = Mapping[str, str]

_CACHE: dict[str, Any] = {}  # judge results, shared by the test files of this process


def _digest(folder: Path) -> str:
    """SHA-256 of every file's relative path and bytes under ``folder``."""
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and not p.is_symlink()):
        digest.update(str(path.relative_to(folder)).encode("utf-8", "surrogateescape") + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def copy_submission(source: Path, dest: Path) -> None:
    """Copy what the student submitted (``source`` minus otter's and our additions) to ``dest``."""
    dest.mkdir(parents=True)
    for entry in sorted(source.iterdir()):
        if entry.name in ADDED:
            if entry.name != "__init__.py" or entry.stat().st_size == 0:  # otter creates it empty
                continue
        target = dest / entry.name
        if entry.is_symlink():
            continue
        if entry.is_dir():
            shutil.copytree(entry, target, symlinks=True)
        else:
            shutil.copy2(entry, target)


def _protect(path: Path) -> None:
    """As root, make ``path`` readable by root only: student processes run as another user."""
    if hasattr(os, "geteuid") and os.geteuid() == 0 and path.exists() and not path.is_symlink():
        path.chmod(0o700 if path.is_dir() else 0o600)


def judge_results(texts: Texts) -> dict[str, Any]:
    """Grade the submission in the current folder with the isolated judge (once per submission and language)."""
    here = Path.cwd()
    grader_zip = here / GRADER_ZIP
    if not grader_zip.is_file():
        raise AssertionError(texts["no_grader"].format(grader=GRADER_ZIP, folder=here))
    for private in (grader_zip, here.parent / "source" / "files" / GRADER_ZIP):
        _protect(private)  # the hidden tests are inside
    work = Path(tempfile.mkdtemp(prefix="amp-otter-"))
    try:
        submission = work / "submission"
        moved = here / QUARANTINE
        if moved.is_dir() and not moved.is_symlink():
            shutil.copytree(moved, submission, symlinks=True)
        else:
            copy_submission(here, submission)
        key = ("judge:" + texts["language"] + ":" + _digest(submission) + ":"
               + hashlib.sha256(grader_zip.read_bytes()).hexdigest())
        if key not in _CACHE:
            work.chmod(0o755)
            with zipfile.ZipFile(grader_zip) as bundle:
                bundle.extractall(work / "grader")
            # this process's environment, in the test file's language, with none of its Python settings
            env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
            env.update({texts["setting"]: texts["language"], "PYTHONDONTWRITEBYTECODE": "1", "PYTHONNOUSERSITE": "1"})
            out = work / "out"
            proc = subprocess.run(
                [sys.executable, "-m", "autograder", "grade", str(submission), "--out", str(out)],
                cwd=work / "grader", env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT, timeout=JUDGE_TIMEOUT, check=False)
            results = out / "submission" / "results.json"
            if not results.is_file():
                log = proc.stdout.decode("utf-8", "replace")[-4000:]
                raise AssertionError(texts["judge_failed"].format(status=proc.returncode, log=log))
            _CACHE[key] = json.loads(results.read_text(encoding="utf-8"))
        return _CACHE[key]
    finally:
        shutil.rmtree(work, ignore_errors=True)


def fail(message: str) -> Verdict:
    def verdict() -> None:
        raise AssertionError(message)
    return verdict


def _pass() -> None:
    return None


def _judge_cases(rows: Sequence[Row], texts: Texts) -> list[Case]:
    """One case per row from the judge's results; a partly passed row gives two (its passed and failed part)."""
    try:
        data = judge_results(texts)
    except Exception as exc:  # no verdicts: every row fails with the reason
        reason = str(exc) or repr(exc)
        return [(f"{number} {title}", points, hidden, fail(reason)) for number, title, points, hidden, _ in rows]
    by_number = {t.get("number"): t for t in data.get("tests", [])}
    notes = data.get("output", "")
    told = False
    cases: list[Case] = []
    for number, title, points, hidden, _ in rows:
        name, row = f"{number} {title}", by_number.get(number)
        if row is None:
            cases.append((name, points, hidden, fail(texts["no_result"].format(number=number))))
            continue
        if row.get("status") == "passed":
            cases.append((name, points, hidden, _pass))
            continue
        message = row.get("output", "") or texts["row_failed"]
        if notes.startswith(texts["about"]) and texts["missing"] in notes and not told:
            told = True  # once per question
            message = f"{message}\n\n{notes.split(chr(10) + chr(10))[0]}\n{texts['missing_hint']}"
        score = float(row.get("score", 0.0))
        if 0.0 < score < points:  # partial credit (some cases of the row failed): keep the judge's score
            part = {"name": name, "points": f"{points:g}"}
            cases.append((texts["passed_part"].format(score=f"{score:g}", **part), score, hidden, _pass))
            cases.append((texts["failed_part"].format(score=f"{points - score:g}", **part), points - score, hidden,
                          fail(message)))
        else:
            cases.append((name, points, hidden, fail(message)))
    return cases


def cases(rows: Sequence[Row], grading: bool, texts: Texts) -> list[Case]:
    """A test file's otter cases for its ``rows`` (``(number, title, points, hidden, public node or "")``), in the
    words ``texts`` of its language: the judge's verdicts, computed now, once per submission.  ``grading`` is the
    loader's (otter's grading kernel or not); this edition grades either way (without ``amp_grader.zip`` every
    case says that it is missing)."""
    return _judge_cases(rows, texts)
