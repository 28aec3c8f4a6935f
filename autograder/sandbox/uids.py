"""Sandbox uids claimed machine-wide: no two graders on one machine ever share a student uid.

The sandbox runs each student process as an unprivileged uid of its own (when the grader is root): a
grader holds a *block* of :data:`BLOCK` uids, the first of which is the group that may read the staged
submission, the others one per student process alive at once (:func:`process_uid`), so that the
kernel itself keeps two processes of one submission apart (files, signals, ``/proc``).  Cleaning up
after a submission kills everything those uids own (:func:`kill_uid`).  Two grading runs on one node (a batch and a
``grade-gpu`` job, two Slurm array tasks) must therefore never use the same block: each claims one
here, with a lock held as long as it grades.
"""

from __future__ import annotations

import fcntl
import os
import signal
import tempfile
from pathlib import Path
from typing import IO, Callable, Sequence

#: uids in one grader's block: the submission's group, then one per student process alive at once (a
#: submission has at most one process per file set and kind of test, public or hidden: 4 x 2, with room to spare).
BLOCK = 16
#: Blocks claimed by batch workers machine-wide, each with a lock: 63000-64535, below nobody (65534), in
#: the range Debian leaves to no user.  (An unclaimed runner's default block lies in 61000-62999.)
UID_BASE, BLOCKS = 63000, 96
DEFAULT_BASE, DEFAULT_BLOCKS = 61000, 125


def process_uid(base: int, slot: int) -> int:
    """The uid of the student process in ``slot`` (0 .. BLOCK-2) of the block starting at ``base``."""
    if not 0 <= slot < BLOCK - 1:
        raise ValueError(f"a block has {BLOCK - 1} process slots, not {slot + 1}")
    return base + 1 + slot


def block(base: int) -> range:
    """Every uid of the block starting at ``base``."""
    return range(base, base + BLOCK)


def default_base(pid: int) -> int:
    """The block of a runner that was handed none (one grader per process: picked by its pid)."""
    return DEFAULT_BASE + (pid % DEFAULT_BLOCKS) * BLOCK


def claim_uid(hint: int = 0) -> tuple[int, IO[str]] | None:
    """A block of sandbox uids nobody else on this machine is using (its first uid), and the lock that
    holds it (root only).

    The block stays ours while the returned file stays open; close it only once every
    process of its uids is dead.
    """
    if os.geteuid() != 0:
        return None
    folder = lock_folder()
    folder.mkdir(mode=0o700, exist_ok=True)
    for k in range(BLOCKS):
        uid = UID_BASE + ((hint + k) % BLOCKS) * BLOCK
        handle = _take_lock(folder, uid)
        if handle is not None:
            return uid, handle
    raise RuntimeError(f"all {BLOCKS} blocks of sandbox uids from {UID_BASE} are in use")


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


def kill_uid(*uids: int) -> None:
    """Kill every process owned by each of ``uids`` (root only).

    Catches escapes from a process group.  SysV IPC objects need no removal: seccomp refuses the calls that make
    them at every level that has it (``syscalls.ALLOWED_SYSCALLS``), and under namespaces they die with the
    process's IPC namespace (at level ``none``, which seals nothing, one may outlive its process).  One
    short-lived child sends ``kill(-1)`` as each uid in turn, with that uid as its real and effective one:
    then no capability is in effect and the signal reaches exactly the processes whose real or saved uid is
    that uid (a child that kept root as its real or effective uid would reach the grader's own).  It keeps
    root only as its saved uid, to take the next uid.  One fork for the lot: forking the judge, which holds
    torch, costs milliseconds each time.  Where that child cannot do it, one child per uid takes the uid for good.
    """
    if os.geteuid() != 0:
        return
    if uids and not _exited_cleanly(_fork(lambda: _kill_each(uids))):
        for uid in uids:
            _exited_cleanly(_fork(lambda uid=uid: _kill_as(uid)))


def _kill_each(uids: Sequence[int]) -> None:
    for uid in uids:
        os.setresuid(uid, uid, 0)
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            pass  # none left
        os.setresuid(0, 0, 0)


def _kill_as(uid: int) -> None:
    os.setgid(uid)
    os.setuid(uid)
    os.kill(-1, signal.SIGKILL)


def _fork(body: Callable[[], None]) -> int:
    """The pid of a child that runs ``body``, then exits: 0 when it returned, 1 when it raised."""
    pid = os.fork()
    if pid == 0:
        status = 1
        try:
            body()
            status = 0
        finally:
            os._exit(status)
    return pid


def _exited_cleanly(pid: int) -> bool:
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0
