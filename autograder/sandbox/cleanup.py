"""The judge's side of a student process's confinement: what it cleans and grants around the processes.

Where a student process cannot have a size-capped tmpfs (below ``namespaces``), :class:`ScratchGuard` watches
its scratch folder; the scratch folders are wiped between processes; a staged submission is granted to its
processes' group.  The student process's own layers are in :mod:`autograder.sandbox.confine`.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Callable

from autograder.sandbox.confine import SCRATCH_BYTES, SCRATCH_ENTRIES

def scratch_usage(folder: Path, limit_entries: int = SCRATCH_ENTRIES) -> tuple[int, int]:
    """(bytes, entries) below ``folder``, counting at most ``limit_entries`` entries (then it stops)."""
    total = entries = 0
    stack = [str(folder)]
    while stack and entries <= limit_entries:
        try:
            with os.scandir(stack.pop()) as listing:
                for entry in listing:
                    entries += 1
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            stack.append(entry.path)
                        else:
                            total += entry.stat(follow_symlinks=False).st_blocks * 512
                    except OSError:
                        continue
        except OSError:
            continue
    return total, entries


def scratch_over(folder: Path) -> bool:
    """Whether ``folder`` holds more than :data:`SCRATCH_BYTES` or :data:`SCRATCH_ENTRIES`."""
    size, entries = scratch_usage(folder)
    return size > SCRATCH_BYTES or entries > SCRATCH_ENTRIES


class ScratchGuard(threading.Thread):
    """Where scratch cannot be a size-capped tmpfs: watch its size and call ``stop`` when over the cap."""

    def __init__(self, folder: Path, stop: Callable[[], None], interval: float = 0.25) -> None:
        super().__init__(daemon=True, name="scratch-guard")
        self.folder, self.stop, self.interval = folder, stop, interval
        self.exceeded = False
        self.fired = 0  # how often it stopped the processes: an import that it cut short is judged by this
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.wait(self.interval):
            if scratch_over(self.folder):
                self.exceeded = True
                self.fired += 1
                self.stop()
                wipe_scratch(self.folder)

    def cancel(self) -> None:
        self._done.set()


def wipe_scratch(folder: Path) -> None:
    """Empty every student process's scratch folder inside ``folder`` (one per process), keeping the folders:
    a process still importing keeps a working folder, and what it writes after this is still counted."""
    wipe_folder(folder, keep_folders=True)


def wipe_folder(folder: Path, keep_folders: bool = False) -> None:
    """Delete everything inside ``folder`` (kept itself); ``keep_folders``: empty the folders in it, keep them."""
    import shutil

    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        if entry.is_dir(follow_symlinks=False):
            if keep_folders:
                wipe_folder(Path(entry.path))
            else:
                shutil.rmtree(entry.path, ignore_errors=True)
        else:
            try:
                os.unlink(entry.path)
            except OSError:
                pass


def grant_submission(folder: Path, uid: int | None) -> None:
    """Make a staged submission readable by its student processes only (group ``uid``, the first of their block:
    0750/0640).

    Without a uid switch the folder stays 0700 (the student process runs as the grader).
    """
    if uid is None or os.geteuid() != 0 or not folder.name.startswith("amp-submission-"):
        return  # only intake's own staging copies are ever handed over, never a folder given directly
    for path in [folder, *folder.rglob("*")]:
        os.chown(path, 0, uid, follow_symlinks=False)
        os.chmod(path, 0o750 if path.is_dir() else 0o640)
