"""Runtime of the generated otter test files: how an otter test case gets its verdict.

``autograder/packaging/otter_build.py`` pastes this module's source (below the marker line)
into every otter test file it generates, so the test files are self-contained;
it is a module of its own so that it can be read, linted and unit-tested.

Two modes, chosen per call:

* **Grading** (otter's grading kernel: ``otter.Notebook._grading_mode`` is set by
  ``otter run`` / otter on Gradescope).  The folder otter grades in is copied,
  minus what otter and this autograder added to it, to a fresh folder, and the
  isolated judge grades that copy in a subprocess::

      python -m autograder grade <copy> --out <tmp>

  using the grader shipped in the autograder zip as ``amp_grader.zip``.  Each
  case then reads its rubric row from ``results.json``: the same verdicts,
  messages (with hypothesis's counterexamples) and determinism as
  ``python -m autograder grade``.  The judge runs once per submission: the three
  test files share a cache in the kernel process.
* **Student** (``grader.check(...)`` in the student's notebook).  The public checks
  next to the notebook (``checks/``) run with pytest in a subprocess, on the files
  the notebook's ``%%writefile`` cells wrote, as ``python -m pytest`` would.
  Hidden cases do not exist in the student's copy of the tests.

Only the standard library is used, and nothing is imported from the folder being
graded.
"""

# ---- otter bridge: everything below this line is pasted into the otter test files ----
import hashlib as _amp_hashlib
import json as _amp_json
import os as _amp_os
import shutil as _amp_shutil
import subprocess as _amp_subprocess
import sys as _amp_sys
import tempfile as _amp_tempfile
import types as _amp_types
import xml.etree.ElementTree as _amp_ET
import zipfile as _amp_zipfile
from pathlib import Path as _AmpPath

AMP_GRADER_ZIP = "amp_grader.zip"
AMP_DRIVER_NOTEBOOK = "amp_homework.ipynb"
#: Where the otter plugin (autograder/packaging/otter_plugin.py) moved the submitted files.
AMP_QUARANTINE = "amp_submitted"
#: What otter and this autograder add to the folder otter grades in (left out of the copy).
AMP_ADDED = ("tests", "__init__.py", AMP_GRADER_ZIP, AMP_DRIVER_NOTEBOOK, AMP_QUARANTINE)
AMP_CONTRACT = ("loss_scaler.py", "amp_step.py", "answers.py")
AMP_JUDGE_TIMEOUT = 1800
AMP_MISSING_HINT = ("If you worked in the notebook: submit the zip its last cell makes (it holds the .py files "
                    "that the %%writefile cells wrote), or upload those .py files.")


def _amp_cache():
    """A dict shared by every test file loaded in this Python process."""
    module = _amp_sys.modules.get("_amp_otter_cache")
    if module is None:
        module = _amp_types.ModuleType("_amp_otter_cache")
        module.entries = {}
        _amp_sys.modules["_amp_otter_cache"] = module
    return module.entries


def _amp_grading_mode():
    try:
        from otter import Notebook
    except ImportError:
        return False
    return bool(getattr(Notebook, "_grading_mode", False))


def _amp_digest(folder):
    """SHA-256 of every file's relative path and bytes under ``folder``."""
    digest = _amp_hashlib.sha256()
    for path in sorted(p for p in _AmpPath(folder).rglob("*") if p.is_file() and not p.is_symlink()):
        digest.update(str(path.relative_to(folder)).encode("utf-8", "surrogateescape") + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def _amp_copy_submission(source, dest):
    """Copy what the student submitted (``source`` minus otter's additions) to ``dest``."""
    dest.mkdir(parents=True)
    for entry in sorted(_AmpPath(source).iterdir()):
        if entry.name in AMP_ADDED:
            if entry.name != "__init__.py" or entry.stat().st_size == 0:  # otter creates it empty
                continue
        target = dest / entry.name
        if entry.is_symlink():
            continue
        if entry.is_dir():
            _amp_shutil.copytree(entry, target, symlinks=True)
        else:
            _amp_shutil.copy2(entry, target)


def _amp_protect(path):
    """As root, make ``path`` readable by root only: student processes run as another user."""
    if hasattr(_amp_os, "geteuid") and _amp_os.geteuid() == 0 and path.exists() and not path.is_symlink():
        path.chmod(0o700 if path.is_dir() else 0o600)


def amp_judge_results():
    """Grade the submission in the current folder with the isolated judge (once per submission)."""
    here = _AmpPath.cwd()
    grader_zip = here / AMP_GRADER_ZIP
    if not grader_zip.is_file():
        raise AssertionError(f"Autograder setup error: {AMP_GRADER_ZIP} is missing from {here} "
                             "(it ships in the files/ folder of the otter autograder zip). Please tell the staff.")
    for private in (grader_zip, here.parent / "source" / "files" / AMP_GRADER_ZIP):
        _amp_protect(private)  # the hidden tests are inside
    work = _AmpPath(_amp_tempfile.mkdtemp(prefix="amp-otter-"))
    try:
        submission = work / "submission"
        moved = here / AMP_QUARANTINE
        if moved.is_dir() and not moved.is_symlink():
            _amp_shutil.copytree(moved, submission, symlinks=True)
        else:
            _amp_copy_submission(here, submission)
        key = "judge:" + _amp_digest(submission) + ":" + _amp_hashlib.sha256(grader_zip.read_bytes()).hexdigest()
        cache = _amp_cache()
        if key not in cache:
            work.chmod(0o755)
            with _amp_zipfile.ZipFile(grader_zip) as bundle:
                bundle.extractall(work / "grader")
            env = {k: v for k, v in _amp_os.environ.items() if not k.startswith("PYTHON")}
            env.update(PYTHONDONTWRITEBYTECODE="1", PYTHONNOUSERSITE="1")
            out = work / "out"
            proc = _amp_subprocess.run(
                [_amp_sys.executable, "-m", "autograder", "grade", str(submission), "--out", str(out)],
                cwd=work / "grader", env=env, stdin=_amp_subprocess.DEVNULL, stdout=_amp_subprocess.PIPE,
                stderr=_amp_subprocess.STDOUT, timeout=AMP_JUDGE_TIMEOUT, check=False)
            results = out / "submission" / "results.json"
            if not results.is_file():
                log = proc.stdout.decode("utf-8", "replace")[-4000:]
                raise AssertionError(f"Autograder error: the judge exited with status {proc.returncode} and wrote "
                                     f"no results. Please tell the staff.\n{log}")
            cache[key] = _amp_json.loads(results.read_text(encoding="utf-8"))
        return cache[key]
    finally:
        _amp_shutil.rmtree(work, ignore_errors=True)


def _amp_public_outcomes(node_ids):
    """Run the public checks ``node_ids`` next to the notebook; map test name -> (passed, message)."""
    here = _AmpPath.cwd()
    if not (here / "checks").is_dir():
        raise AssertionError("The public checks (the checks/ folder of the assignment) are not next to this "
                             f"notebook ({here}). Open the notebook in the assignment folder.")
    digest = _amp_hashlib.sha256(repr(sorted(node_ids)).encode())
    for name in AMP_CONTRACT:
        path = here / name
        digest.update(name.encode() + b"\0" + (path.read_bytes() if path.is_file() else b"<missing>") + b"\0")
    key = "public:" + digest.hexdigest()
    cache = _amp_cache()
    if key not in cache:
        with _amp_tempfile.TemporaryDirectory(prefix="amp-checks-") as tmp:
            report = _AmpPath(tmp) / "junit.xml"
            env = dict(_amp_os.environ, AMP_SUBMISSION=str(here), PYTHONDONTWRITEBYTECODE="1")
            proc = _amp_subprocess.run(
                [_amp_sys.executable, "-m", "pytest", *node_ids, f"--junitxml={report}", "-q",
                 "-p", "checks.plugin", "-p", "no:cacheprovider"],
                cwd=here, env=env, stdin=_amp_subprocess.DEVNULL, stdout=_amp_subprocess.PIPE,
                stderr=_amp_subprocess.STDOUT, check=False)
            if not report.is_file():
                raise AssertionError("pytest could not run the public checks:\n"
                                     + proc.stdout.decode("utf-8", "replace")[-3000:])
            outcomes = {}
            for case in _amp_ET.parse(report).iter("testcase"):
                problem = next((child for child in case if child.tag in ("failure", "error")), None)
                if problem is None:
                    outcomes[case.get("name")] = (True, "")
                    continue
                message = problem.get("message") or problem.text or "failed"
                if message.startswith("AssertionError: "):
                    message = message[len("AssertionError: "):]
                outcomes[case.get("name")] = (False, message)
            cache[key] = outcomes
    return cache[key]


def _amp_fail(message):
    def case():
        raise AssertionError(message)
    return case


def _amp_pass():
    def case():
        return None
    return case


def _amp_public_check(node, every):
    def case():
        outcomes = _amp_public_outcomes(every)
        base = node.split("::", 1)[1]
        found = [o for name, o in outcomes.items() if name == base or name.startswith(base + "[")]
        if not found:
            raise AssertionError(f"The public check {node} did not run (see the output of python -m pytest).")
        problems = [message for passed, message in found if not passed]
        if problems:
            raise AssertionError("\n\n".join(problems))
    return case


def _amp_judge_cases(rows):
    """(name, points, hidden, function) per row from the judge's results; a partly passed row gives two."""
    try:
        data = amp_judge_results()
    except Exception as exc:  # no verdicts: every row fails with the reason
        reason = str(exc) or repr(exc)
        return [(f"{number} {title}", points, hidden, _amp_fail(reason)) for number, title, points, hidden, _ in rows]
    by_number = {t.get("number"): t for t in data.get("tests", [])}
    notes = data.get("output", "")
    told = False
    cases = []
    for number, title, points, hidden, _ in rows:
        name, row = f"{number} {title}", by_number.get(number)
        if row is None:
            cases.append((name, points, hidden, _amp_fail(f"Autograder error: no result for test {number}. "
                                                          "Please tell the staff.")))
            continue
        if row.get("status") == "passed":
            cases.append((name, points, hidden, _amp_pass()))
            continue
        message = row.get("output", "") or "Failed."
        if notes.startswith("About your submission") and "Missing:" in notes and not told:
            told = True  # once per question
            message = f"{message}\n\n{notes.split(chr(10) + chr(10))[0]}\n{AMP_MISSING_HINT}"
        score = float(row.get("score", 0.0))
        if 0.0 < score < points:  # partial credit (some cases of the row failed): keep the judge's score
            cases.append((f"{name} (passed part: {score:g} of {points:g} points)", score, hidden, _amp_pass()))
            cases.append((f"{name} (failed part: {points - score:g} of {points:g} points)", points - score, hidden,
                          _amp_fail(message)))
        else:
            cases.append((name, points, hidden, _amp_fail(message)))
    return cases


def amp_define_cases(namespace, test_case, rows):
    """Define this test file's otter cases in ``namespace`` for ``rows``.

    ``rows``: ``(number, title, points, hidden, public check node id or "")`` per rubric row.
    In otter's grading kernel the cases carry the judge's verdicts (computed now, once per
    submission); elsewhere (``grader.check`` in a student's notebook) each public row's case
    runs its public check, and a hidden row has no case.
    """
    if _amp_grading_mode():
        cases = _amp_judge_cases(rows)
    else:
        every = sorted({row[4] for row in rows if row[4]})
        cases = [(f"{number} {title}", points, hidden, _amp_public_check(node, every))
                 for number, title, points, hidden, node in rows if node]
    for index, (name, points, hidden, function) in enumerate(cases):
        namespace[f"amp_case_{index:02d}"] = test_case(name=name, points=points, hidden=hidden)(function)
