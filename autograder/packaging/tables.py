"""The diagnosis tables rebuilt in proportion: only when what they are built from changed in behaviour.

Shared by ``make student`` (:mod:`autograder.packaging.student`) and ``python -m autograder.packaging.release``
(the students' table); a table's ``source`` is compared with :func:`autograder.diagnosis.table.source_fingerprint`,
the same function grading uses to say "the table is older than the code".
"""

from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from autograder import ROOT
from autograder.packaging.built import shown


@dataclass
class Outcome:
    """What one run did: lines for the closing summary."""

    rebuilt: list[str] = field(default_factory=list)
    left: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)


def since(path: Path) -> str:
    """When ``path`` was last written, for a message."""
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(path.stat().st_mtime))


def table_is_current(path: Path, public: bool) -> bool:
    """Whether the table at ``path`` was built from code that behaves as this checkout's does."""
    from autograder.diagnosis.table import Table, source_fingerprint

    try:
        found = Table.from_json(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return found.source == source_fingerprint(public)


def _build_table(path: Path, public: bool) -> bool:
    """Build a table in a fresh process (it starts the sandbox; it prints one line when done); False when it failed."""
    command = [sys.executable, "-m", "autograder.diagnosis", "build", "--quiet", "--out", str(path)]
    return subprocess.run(command + (["--public"] if public else []), cwd=ROOT).returncode == 0


def refresh_table(path: Path, public: bool, outcome: Outcome, always: bool = False, dry_run: bool = False) -> None:
    """Rebuild the table at ``path`` when its inputs' behaviour changed (or ``always``); say which and why."""
    name = "the students' diagnosis table" if public else "the grader's diagnosis table"
    if not always and table_is_current(path, public):
        outcome.left.append(f"{shown(path)} ({name}): what it is built from behaves as it did when it was built, "
                            f"unchanged since {since(path)} (docstrings and comments do not count)")
        return
    why = "rebuilt on request" if always else "what it is built from changed"
    if dry_run:
        outcome.rebuilt.append(f"{shown(path)} ({name}): {why} (minutes)")
        return
    print(f"building {shown(path)} ({name}): {why}; this takes minutes", flush=True)
    started = time.monotonic()
    if _build_table(path, public):
        outcome.rebuilt.append(f"{shown(path)} ({name}): {why} ({time.monotonic() - started:.0f} s)")
    else:
        outcome.failed.append(f"{shown(path)} ({name}): the build failed (the file there was kept)")
