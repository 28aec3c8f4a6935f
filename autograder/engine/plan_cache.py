"""Recorded call plans kept on disk, so that any grading run after the first reuses one.

A plan (:mod:`autograder.engine.plan`) holds hidden inputs and the reference's answers: it is
as secret as the hidden tests, and it decides grades (a case whose answers match it passes).
So it is kept where only the grading user reads and writes: ``$AMP_PLAN_CACHE``, else
``$XDG_CACHE_HOME/amp-homework``, else ``~/.cache/amp-homework`` (folder 0700, files 0600,
written atomically; the batch also hides the folder from student processes).  A file is
used only if it is a regular file of this user's that nobody else may read, starts with
this format's header and names the key asked for; anything else is ignored and recorded anew.

The key (:func:`plan_key`) hashes the engine, the public and hidden tests, the reference
solution's files, the switches that change grades and the libraries' versions
(:mod:`autograder.engine.fingerprint`).  This module imports neither torch nor pytest: the
batch's main process uses :func:`cache_dir`.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sys
from pathlib import Path
from typing import Iterator

from autograder import settings as grader_settings
from autograder.engine import fingerprint
from autograder.engine.files import read_private, write_bytes_atomic

#: Bumped when the file's layout or the meaning of a recorded call changes (older files are then ignored).
FORMAT = 1


def cache_dir() -> Path:
    """``$AMP_PLAN_CACHE``, else ``$XDG_CACHE_HOME/amp-homework``, else ``~/.cache/amp-homework``."""
    return grader_settings.plan_cache()


def plan_key(reference: Path) -> str:
    """What a plan recorded from ``reference`` depends on, hashed.

    The sandbox's limits are left out: a plan holds the answers of a reference that passed every
    test, which no limit changes (a limit that made it fail would have stopped the recording).
    """
    settings = fingerprint.settings()
    settings["env"].pop(grader_settings.SANDBOX_LIMITS.env, None)
    return fingerprint.digest(fingerprint.grader_files() + sorted(reference.glob("*.py")),
                              {**settings, "plan_format": FORMAT})


def _file(key: str) -> Path:
    return cache_dir() / f"plan-{key[:32]}.json"


def _header(key: str) -> str:
    return f"amp-homework call plan {FORMAT} {key}\n"


def read(key: str) -> str | None:
    """The plan's JSON kept under ``key``; None when missing, stale, or not this user's alone."""
    data = read_private(_file(key))
    text = "" if data is None else data.decode("utf-8", errors="replace")
    header = _header(key)
    return text[len(header):] if text.startswith(header) else None


@contextlib.contextmanager
def recording(key: str) -> Iterator[None]:
    """Held while one process records the plan for ``key``: the others wait, then read what it kept.

    Without a usable cache folder nothing is held (each process records its own, as it would anyway).
    """
    folder = cache_dir()
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        handle = os.open(folder / f".plan-{key[:32]}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    except OSError:
        yield
        return
    try:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield
    finally:
        os.close(handle)


def write(key: str, plan_json: str) -> Path | None:
    """Keep ``plan_json`` under ``key`` (atomically, mode 0600); None when it cannot be written (costs speed only)."""
    try:
        write_bytes_atomic(_file(key), (_header(key) + plan_json).encode("utf-8"), private=True)
    except OSError as exc:
        print(f"note: the call plan could not be kept in {cache_dir()} ({exc}); it will be recorded again next run",
              file=sys.stderr)
        return None
    return _file(key)
