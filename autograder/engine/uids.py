"""Sandbox uids claimed machine-wide: no two graders on one machine ever share a student uid.

The sandbox runs each student process as an unprivileged uid (when the grader is root);
cleaning up after a submission kills everything that uid owns.  Two grading runs on one
node (a batch and a ``grade-gpu`` job, two Slurm array tasks) must therefore never use the
same uid: each claims one here, with a lock held as long as it grades.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
from pathlib import Path
from typing import IO

#: Student processes of batch workers run as one of these uids, each claimed machine-wide with a lock
#: (concurrent batch runs never share one; the sandbox's own default range is 61000-64999).
UID_BASE, UID_COUNT = 65000, 500


def claim_uid(hint: int = 0) -> tuple[int, IO[str]] | None:
    """A sandbox uid nobody else on this machine is using, and the lock that holds it (root only).

    The uid stays ours while the returned file stays open; close it only once every
    process of that uid is dead.
    """
    if os.geteuid() != 0:
        return None
    folder = lock_folder()
    folder.mkdir(mode=0o700, exist_ok=True)
    for k in range(UID_COUNT):
        uid = UID_BASE + (hint + k) % UID_COUNT
        handle = _take_lock(folder, uid)
        if handle is not None:
            return uid, handle
    raise RuntimeError(f"all {UID_COUNT} sandbox uids from {UID_BASE} are in use")


def lock_folder() -> Path:
    """Where the uid locks live (machine-wide: /run where we may write, else the temporary folder)."""
    run = Path("/run")
    return run / "amp-autograder" if os.access(run, os.W_OK) else Path(tempfile.gettempdir()) / "amp-autograder-uids"


def _take_lock(folder: Path, uid: int) -> IO[str] | None:
    """The open lock file of ``uid``, now ours; None where another grader holds it."""
    handle = open(folder / f"{uid}.lock", "a")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        return None
    return handle


def claimed(uid: int) -> bool:
    """Whether some grader on this machine holds ``uid`` now (its lock is taken)."""
    try:
        handle = _take_lock(lock_folder(), uid)
    except OSError:  # no lock folder or file: nobody holds it
        return False
    if handle is None:
        return True
    handle.close()  # released at once: we only looked
    return False
