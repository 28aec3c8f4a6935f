"""Which student processes may be alive together: four kinds, one phase each, and the machine's rooms.

A student process has one of four kinds, by what it may learn and what it holds:

* whether its output is shown at once (a test of the public checks) or it serves hidden inputs;
* whether it runs ``loss_scaler.py`` and so has torch's scaler taken out (*absent*) or keeps torch's real
  ``GradScaler`` (*holding*: ``amp_step.py`` alone, or no student file).

:data:`KINDS` is their order within one grading, declared here once: what is shown at once for Task 1, then
for Task 2, then Task 1's hidden cases, then Task 2's.  Information can then flow only forward in time: nothing
shown at once runs after a hidden input was served, and no holding process is alive beside an absent one.

The runner (:class:`autograder.sandbox.runner.SandboxRunner`) keeps processes of one kind alive at a time,
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


def held(fd: int) -> bool:
    """Whether another open file description holds a lock on ``fd``'s file (a non-blocking try fails; one that
    succeeds is released when ``fd`` is closed)."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True


class Rooms:
    """One grading's way into the machine's rooms (``flock`` locks in :func:`default_folder`).

    Each room has a lock, held shared by everyone inside, and a *want* lock, held shared by everyone waiting for
    it; a *gate* lock guards each decision and a *turn* file (the room last chosen, and whether anyone entered it
    since).  :meth:`enter` K, registered as waiting for K, repeats under the gate: when K alone is occupied, join
    it; when another room is occupied, wait (gate released) until it is empty; when none is, the turn goes to the
    chosen room if nobody entered it yet, else to the next room after it, in the order of :data:`KINDS`, that
    someone waits for: that is K (enter) or another room (wait, gate released, until its waiters are in).  So a
    grading behind the others in its phases goes first and the next phase finds them together, and every waiter
    gets its turn.  :meth:`leave`: release K's lock.

    Nobody waits while holding the gate, and nobody inside a room waits for one (a grading leaves its room
    before it asks for another), so no wait can close a circle.  A grading that dies (even by SIGKILL) closes its
    descriptors, and with them its room and its wish.  Student processes never have these descriptors: they are
    forked by the zygote, which was started before any room was entered, and each descriptor is opened
    close-on-exec and closed when its room is left.
    """

    def __init__(self, folder: Path | None = None, *, keep: bool = False) -> None:
        self.folder = folder or default_folder()
        #: With ``keep``, :meth:`leave` keeps the room until another is entered or :meth:`vacate` is called: the
        #: gradings of one wave (:func:`autograder.engine.grader.grade_submissions`) share this object and take
        #: their turns in one room without letting another grading's kind in between.
        self.keep = keep
        self.inside: int | None = None
        self._fd = -1
        self._counts: dict[int, int] = {}  # the entering thread's rooms (see _INSIDE)

    def _open(self, name: str) -> int:
        return os.open(_safe_folder(self.folder) / name, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)

    def _held(self, name: str) -> bool:
        """Whether anyone (this process's other descriptors too) holds a lock on ``name``."""
        fd = self._open(name)
        try:
            return held(fd)
        finally:
            os.close(fd)

    def _wait_empty(self, name: str) -> None:
        fd = self._open(name)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # until everyone holding it has let go
        finally:
            os.close(fd)

    def _choose(self, turn: int) -> int:
        """The turn file's descriptor ``turn``: the room whose turn it is now (under the gate, nobody inside)."""
        os.lseek(turn, 0, os.SEEK_SET)
        last, used = (os.read(turn, 16).decode().split() + ["0", "1"])[:2]
        last_room = int(last) % len(KINDS) if last.isdigit() else 0
        waiting = [room for room in range(len(KINDS)) if self._held("want-" + KINDS[room].name)]
        if last_room in waiting and used == "0":
            return last_room
        return next(room for step in range(1, len(KINDS) + 1)
                    if (room := (last_room + step) % len(KINDS)) in waiting)

    @staticmethod
    def _note(turn: int, room: int, used: bool) -> None:
        os.ftruncate(turn, 0)
        os.pwrite(turn, f"{room} {int(used)}".encode(), 0)

    def enter(self, kind: int) -> None:
        if self.inside == kind:
            return
        self.vacate()
        inside = _inside()
        others = [k for k, count in inside.items() if count and k != kind]
        if others:
            raise PhaseOrderError(f"this thread is already inside room {KINDS[others[0]].name}: entering "
                                  f"{KINDS[kind].name} would wait for itself")
        inside[kind] = inside.get(kind, 0) + 1
        self._counts = inside
        want = -1
        try:
            want = self._open("want-" + KINDS[kind].name)
            fcntl.flock(want, fcntl.LOCK_SH)
            while self._fd < 0:
                gate, turn = self._open("gate"), self._open("turn")
                try:
                    fcntl.flock(gate, fcntl.LOCK_EX)
                    occupied = [room for room in range(len(KINDS)) if self._held(KINDS[room].name)]
                    wait_for = next((KINDS[room].name for room in occupied if room != kind), "")
                    if not occupied:
                        chosen = self._choose(turn)
                        wait_for = "" if chosen == kind else "want-" + KINDS[chosen].name
                        self._note(turn, chosen, chosen == kind)
                    if not wait_for:
                        self._fd = self._open(KINDS[kind].name)
                        fcntl.flock(self._fd, fcntl.LOCK_SH)
                finally:
                    os.close(turn)
                    os.close(gate)
                if wait_for:
                    self._wait_empty(wait_for)
        except BaseException:
            inside[kind] -= 1
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1
            raise
        finally:
            if want >= 0:
                os.close(want)
        self.inside = kind

    def leave(self) -> None:
        """Leave the room (kept, with ``keep``, until another is entered or :meth:`vacate`): the caller has no
        student process alive any more."""
        if not self.keep:
            self.vacate()

    def vacate(self) -> None:
        """Leave the room now."""
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
