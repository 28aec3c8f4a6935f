"""Which student processes may be alive together: four kinds, one phase each, and the machine's rooms.

A student process has one of four kinds, by what it may learn and what it holds:

* whether its output is shown at once (a test of the public checks) or it serves hidden inputs;
* whether it runs ``loss_scaler.py`` and so has torch's scaler taken out (*absent*) or keeps torch's real
  ``GradScaler`` (*holding*: ``amp_step.py`` alone, or no student file).

:data:`KINDS` is their order within one grading, declared here once: what is shown at once for Task 1, then
for Task 2, then Task 1's hidden cases, then Task 2's.  Information can then flow only forward in time: nothing
shown at once runs after a hidden input was served, and no holding process is alive beside an absent one.

The runner (:class:`autograder.engine.sandbox.SandboxRunner`) keeps processes of one kind alive at a time,
ends them all before it starts one of another kind, and refuses a public kind after a hidden one
(:class:`PhaseOrderError`, the grader's fault).  Across the gradings of one machine the same holds through
:class:`Rooms`: a runner has student processes of kind K alive only while it is inside room K, and two rooms
never hold anyone at once machine-wide, while any number of gradings share a room.
"""

from __future__ import annotations

import fcntl
import os
import stat
import threading
from dataclasses import dataclass
from pathlib import Path

from checks.student import serve


@dataclass(frozen=True)
class Kind:
    name: str
    public: bool  # its output is shown at once
    absent: bool  # torch's scaler taken out (it runs loss_scaler.py)


#: The kinds in the order a grading goes through them (its phases).
KINDS = (Kind("public-absent", True, True), Kind("public-holding", True, False),
         Kind("hidden-absent", False, True), Kind("hidden-holding", False, False))


class PhaseOrderError(RuntimeError):
    """The judge asked for a process of a public kind after a hidden one had started: the grader's fault."""


def kind_of(modules: tuple[str, ...], public: bool) -> int:
    """The index in :data:`KINDS` of a process that imports ``modules`` and serves a public test or not."""
    absent = serve.loses_reference_scaler(modules)
    return next(index for index, kind in enumerate(KINDS) if kind.public == public and kind.absent == absent)


def phase_of(scenario: str, args: dict, public: bool) -> int:
    """The index in :data:`KINDS` of the process a call of ``scenario`` with ``args`` runs in (the Quick Check's
    answers, read in the judge and never run, are counted with the holding kind)."""
    return kind_of(serve.files_needed(scenario, args) if scenario in serve.SCENARIO_NEEDS else (), public)


def default_folder() -> Path:
    """The machine-wide folder of this user's rooms: every grading by this user on this machine shares it."""
    return Path("/tmp") / f"amp-rooms-{os.geteuid()}"


def _safe_folder(folder: Path) -> Path:
    """``folder``, created 0700 if missing; refused unless it is a real folder of ours that no one else may
    enter (another user's folder there could hold the locks and stop every grading)."""
    try:
        os.mkdir(folder, 0o700)
    except FileExistsError:
        pass
    found = os.lstat(folder)
    if not stat.S_ISDIR(found.st_mode) or found.st_uid != os.geteuid() or found.st_mode & 0o077:
        raise RuntimeError(f"{folder} is not a folder of this user's alone (mode 0700): the grader's rooms "
                           "cannot be kept there; remove it")
    return folder


#: Rooms entered by each thread of this process, by any :class:`Rooms`: kind -> how many are inside.  A thread
#: inside one room that asked for another would wait for itself for ever; that is refused instead.
_INSIDE = threading.local()


class Rooms:
    """One grading's way into the machine's rooms (``flock`` locks in :func:`default_folder`).

    :meth:`enter` K: take the gate exclusively; for every other kind J take J's lock exclusively (waiting until J
    is empty) and release it; take K's lock shared; release the gate.  :meth:`leave`: release K's lock.  A
    grading waits for a room only while it is inside none, so no two gradings wait for each other in a circle;
    the gate makes a waiting grading first in line, so a busy room cannot keep it out for ever.  A grading that
    dies (even by SIGKILL) closes its descriptors, and with them its room.  Student processes never have these
    descriptors: they are forked by the zygote, which was started before any room was entered, and each
    descriptor is opened close-on-exec and closed when its room is left.
    """

    def __init__(self, folder: Path | None = None) -> None:
        self.folder = folder or default_folder()
        self.inside: int | None = None
        self._fd = -1
        self._counts: dict[int, int] = {}  # the entering thread's rooms (see _INSIDE)

    def _open(self, name: str) -> int:
        return os.open(_safe_folder(self.folder) / name, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)

    def enter(self, kind: int) -> None:
        if self.inside == kind:
            return
        self.leave()
        inside = _inside()
        others = [k for k, count in inside.items() if count and k != kind]
        if others:
            raise PhaseOrderError(f"this thread is already inside room {KINDS[others[0]].name}: entering "
                                  f"{KINDS[kind].name} would wait for itself")
        inside[kind] = inside.get(kind, 0) + 1
        self._counts = inside
        try:
            gate = self._open("gate")
            try:
                fcntl.flock(gate, fcntl.LOCK_EX)
                for other in range(len(KINDS)):
                    if other != kind:
                        fd = self._open(KINDS[other].name)
                        try:
                            fcntl.flock(fd, fcntl.LOCK_EX)  # until everyone inside has left
                        finally:
                            os.close(fd)
                self._fd = self._open(KINDS[kind].name)
                fcntl.flock(self._fd, fcntl.LOCK_SH)
            finally:
                os.close(gate)
        except BaseException:
            inside[kind] -= 1
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1
            raise
        self.inside = kind

    def leave(self) -> None:
        if self.inside is None:
            return
        os.close(self._fd)  # releases the shared lock
        self._fd = -1
        self._counts[self.inside] -= 1
        self.inside = None


def _inside() -> dict[int, int]:
    if not hasattr(_INSIDE, "rooms"):
        _INSIDE.rooms = {}
    return _INSIDE.rooms
