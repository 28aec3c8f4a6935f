"""Runtime of the generated otter test files in a student's notebook: ``grader.check`` runs the public checks.

The public edition of :mod:`otter_bridge`: it ships, byte for byte, as ``amp_otter_bridge.py`` next to the notebook
in the student's ``assignment/`` folder, where the student's copy of the test files (public rows only) loads it after
checking its SHA-256, as the staff's edition is loaded in otter's grading run.  Each public row's case runs its
public check when called: the checks next to the notebook (``checks/``) run with pytest in a subprocess, on the
files the notebook's ``%%writefile`` cells wrote, as ``python -m pytest`` would, in the test file's language
(``texts``).  Nothing of the judge is here.

Only the standard library is used, and nothing is imported from the folder being checked.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

CONTRACT = ("loss_scaler.py", "amp_step.py", "answers.py")
#: The junit property of a failed public check that names its likely mistake (``checks.judge.diagnose.JUNIT_PROPERTY``).
LIKELY_MISTAKE_PROPERTY = "likely_mistake"
#: A row, a case's verdict, a case and a test file's words, as in :mod:`otter_bridge` (``submission``: the variable
#: that names the folder the public checks grade).
Row, Verdict, Texts = Sequence[Any], Callable[[], None], Mapping[str, str]
Case = tuple[str, float, bool, Verdict]

_CACHE: dict[str, Any] = {}  # public outcomes, shared by the test files of this process


def _public_outcomes(node_ids: list[str], texts: Texts) -> dict[str, tuple[bool, str, str]]:
    """Run the public checks ``node_ids`` next to the notebook; map test name -> :func:`_outcome`."""
    here = Path.cwd()
    if not (here / "checks").is_dir():
        raise AssertionError(texts["no_checks"].format(folder=here))
    digest = hashlib.sha256(repr((sorted(node_ids), texts["language"])).encode())
    for name in CONTRACT:
        path = here / name
        digest.update(name.encode() + b"\0" + (path.read_bytes() if path.is_file() else b"<missing>") + b"\0")
    key = digest.hexdigest()
    if key not in _CACHE:
        with tempfile.TemporaryDirectory(prefix="amp-checks-") as tmp:
            report = Path(tmp) / "junit.xml"
            env = {**os.environ, texts["setting"]: texts["language"], texts["submission"]: str(here),
                   "PYTHONDONTWRITEBYTECODE": "1"}
            proc = subprocess.run(
                [sys.executable, "-m", "pytest", *node_ids, f"--junitxml={report}", "-q",
                 "-p", "checks.plugin", "-p", "no:cacheprovider"],
                cwd=here, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT, check=False)
            if not report.is_file():
                raise AssertionError(texts["pytest_failed"].format(log=proc.stdout.decode("utf-8", "replace")[-3000:]))
            _CACHE[key] = {case.get("name"): _outcome(case, texts) for case in ET.parse(report).iter("testcase")}
    return _CACHE[key]


def _outcome(case: ET.Element, texts: Texts) -> tuple[bool, str, str]:
    """(passed, failure message, "Likely mistake" line or "") of one junit ``<testcase>``."""
    hint = next((p.get("value", "") for p in case.iter("property") if p.get("name") == LIKELY_MISTAKE_PROPERTY), "")
    problem = next((child for child in case if child.tag in ("failure", "error")), None)
    if problem is None:
        return True, "", ""
    message = problem.get("message") or problem.text or texts["check_failed"]
    if message.startswith("AssertionError: "):
        message = message[len("AssertionError: "):]
    return False, message, hint


def _public_check(node: str, every: list[str], texts: Texts) -> Verdict:
    def verdict() -> None:
        outcomes = _public_outcomes(every, texts)
        base = node.split("::", 1)[1]
        found = [o for name, o in outcomes.items() if name == base or name.startswith(base + "[")]
        if not found:
            raise AssertionError(texts["did_not_run"].format(node=node))
        problems = [message for passed, message, _ in found if not passed]
        hints = dict.fromkeys(hint for passed, _, hint in found if hint)  # once, however many cases failed
        if problems:
            raise AssertionError("\n\n".join([*problems, *hints]))
    return verdict


def cases(rows: Sequence[Row], grading: bool, texts: Texts) -> list[Case]:
    """A test file's otter cases for its ``rows`` (``(number, title, points, hidden, public node or "")``), in the
    words ``texts`` of its language: each public row's case runs its public check when called, and a row without
    one has no case.  ``grading`` is the loader's; this edition checks either way (only the staff's grades)."""
    every = sorted({row[4] for row in rows if row[4]})
    return [(f"{number} {title}", points, hidden, _public_check(node, every, texts))
            for number, title, points, hidden, node in rows if node]
