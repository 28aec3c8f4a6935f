"""What decides a grade, hashed: the key of a batch's ledger and of a recorded call plan.

A grade depends on the engine's code, the public and hidden tests, the switches read from
the environment (runtime guard, examples, visibility, ...) and the versions
of the libraries that run the tests (hypothesis's examples change between its versions).
:func:`digest` hashes files and settings into one hex string; callers add what else is
theirs (the batch its worker and limits, the call plan its reference solution).

A batch keeps the rubric's points apart (:func:`scoring_digest`, :func:`points_digest`): what a row is worth
does not change which cases pass, so a change of points alone rescores stored verdicts without running
student code (:mod:`autograder.batch.rescore`).
"""

from __future__ import annotations

import ast
import functools
import hashlib
import json
import sys
from pathlib import Path
from typing import Any, Iterable

from autograder import locations
from autograder import settings as grader_settings
from autograder.engine import rubric

#: Distributions whose version changes what the tests do.
LIBRARIES = ("torch", "hypothesis", "pytest")


def grader_files() -> list[Path]:
    """The engine's code and the public and hidden tests (``$AMP_PUBLIC_TESTS``/``$AMP_HIDDEN_TESTS`` honoured)."""
    public, hidden = grader_settings.public_tests(), grader_settings.hidden_tests()
    engine = locations.ENGINE
    files = [path for path in sorted(engine.rglob("*")) if path.suffix in (".py", ".ini")]
    return files + sorted(public.rglob("*.py")) + sorted(hidden.rglob("*.py"))


def settings() -> dict[str, Any]:
    """The settings that change grades (:data:`autograder.settings.GRADE_SETTINGS`), the library versions and
    Python's version."""
    return {"env": {setting.env: grader_settings.raw(setting) for setting in grader_settings.GRADE_SETTINGS}, "versions": dict(_versions()),
            "python": sys.version.split()[0]}


@functools.lru_cache(maxsize=1)
def _versions() -> tuple[tuple[str, str | None], ...]:
    from importlib import metadata  # a tenth of a second: once per process

    found = []
    for name in LIBRARIES:
        try:
            found.append((name, metadata.version(name)))
        except metadata.PackageNotFoundError:
            found.append((name, None))
    return tuple(found)


def digest(files: Iterable[Path], extra: dict[str, Any]) -> str:
    """sha256 over each file's name and bytes (a missing file hashes as such) and ``extra`` as sorted JSON."""
    hashed = hashlib.sha256()
    for file in files:
        hashed.update(b"\0" + file.name.encode() + b"\0")
        try:
            hashed.update(file.read_bytes())
        except OSError:
            hashed.update(b"missing")
    hashed.update(json.dumps(extra, sort_keys=True, default=str).encode())
    return hashed.hexdigest()


def _without_points(path: Path) -> bytes:
    """``rubric.py``'s code with every ``Item``'s points set to 0: what names and places the rows, not their worth.

    An AST dump, so comments and layout do not count either; any other change (a test, a title, a row's
    suite, the code below the table) still does.
    """
    try:
        tree = ast.parse(path.read_bytes())
    except (OSError, SyntaxError, ValueError):
        return b"unreadable"
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Item":
            if len(node.args) > 3:
                node.args[3] = ast.Constant(0)
            for keyword in node.keywords:
                if keyword.arg == "points":
                    keyword.value = ast.Constant(0)
    return ast.dump(tree).encode()


def scoring_digest(files: Iterable[Path], extra: dict[str, Any]) -> str:
    """:func:`digest` with the rubric's points left out (``rubric.py`` read by :func:`_without_points`, and
    ``$AMP_GPU_POINTS`` dropped from ``extra``'s settings): it changes when what passes may change."""
    files = list(files)
    rubric_file = Path(rubric.__file__).resolve()
    hashed = hashlib.sha256()
    for file in files:
        hashed.update(b"\0" + file.name.encode() + b"\0")
        if file.resolve() == rubric_file:
            hashed.update(_without_points(file))
            continue
        try:
            hashed.update(file.read_bytes())
        except OSError:
            hashed.update(b"missing")
    env = {k: v for k, v in extra.get("env", {}).items() if k != grader_settings.GPU_POINTS.env}
    hashed.update(json.dumps({**extra, "env": env}, sort_keys=True, default=str).encode())
    return hashed.hexdigest()


def points_digest() -> str:
    """Every row's points (``rubric.ITEMS`` and ``rubric.GPU_ITEMS`` as loaded, ``$AMP_GPU_POINTS`` applied)."""
    table = [(item.number, item.test, item.points) for item in rubric.ITEMS + rubric.GPU_ITEMS]
    return hashlib.sha256(json.dumps(table).encode()).hexdigest()[:16]
