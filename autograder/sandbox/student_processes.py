"""One student process as the judge sees it (three pipes and a pid), and the output it printed, per test.

:class:`StudentProcess` reads reply lines with a deadline and notices a process that ended
(through a pidfd, even while a child of it still holds the reply pipe open).  A deadline counts
the **CPU time** the process spends (all its threads, and the children it waited for), not the
wall clock: a correct submission graded on a busy machine (a batch on every core, a loaded CI
runner, a laptop swapping) waits for the processor without being charged for it.  A process that
waits instead of computing (a sleep, a lock, a child it waits on) is stopped by a wall-clock bound
of :data:`WALL_FACTOR` times the limit.  :class:`OutputLog`
files every byte a process prints under the test that process last served (its ``owner``),
whoever drains it and whenever: output a process serving a hidden test prints late cannot reach a
visible row.  :class:`autograder.sandbox.runner.SandboxRunner` starts the processes and speaks the
protocol through these two.
"""

from __future__ import annotations

import json
import os
import select
import signal
import sysconfig
import time
from pathlib import Path
from typing import Any, Callable

import checks
from autograder.sandbox.budget import WALL_FACTOR

MAX_REPLY_BYTES = 16 * 2**20
#: A process stopped at the wall bound that had the processor, or was ready for it (state R: a busy machine
#: gives it no core), for at least this share of the wait was computing (a loop on a throttled or shared
#: processor: Gradescope gives half a CPU), not waiting (state S or D: a sleep, a lock, a child at work).
COMPUTING_SHARE = 0.25
_POLL_SECONDS = 0.05  # the shortest wait between two looks at the CPU time of a starved process
_SAMPLE_SECONDS = 0.25  # the longest: the process's state is sampled this often while it has not answered
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
OUTPUT_KEEP_BYTES = 7 * 1024  # with the "more bytes not shown" notice, within results.OUTPUT_LIMIT


class StudentProcess:
    """One live student process that imported a fixed set of contract modules: pipes, pid, replies."""

    def __init__(self, pid: int, request_fd: int, reply_fd: int, output_fd: int, owner: str) -> None:
        self.pid: int | None = pid
        #: The test whose output this process's output is filed under: the last one it served (set before each
        #: request), so what it prints late, or what is drained when another test ends it, stays with that test.
        self.owner = owner
        self.slot = -1  # its place in the runner's block of uids and scratch folders (SandboxRunner._spawn)
        self.uid: int | None = None  # the uid it runs the student's code as (SandboxRunner._spawn), and whether no
        self.uid_is_its_own = False  # earlier process of the submission had that uid since the last cleanup
        self.kind = 0  # its kind, an index in autograder.sandbox.phases.KINDS (SandboxRunner._spawn)
        self.born = time.monotonic()  # when the runner asked the zygote for it (SandboxRunner._spawn)
        self.request_fd, self.reply_fd, self.output_fd = request_fd, reply_fd, output_fd
        os.set_blocking(output_fd, False)
        try:  # readable once the process ends, even while a child of it still holds the reply pipe open
            self.pidfd = os.pidfd_open(pid)
        except (AttributeError, OSError):  # before Linux 5.3, or the process is gone already
            self.pidfd = -1
        self.buffer = b""
        self.stat_fd = -1
        #: The pidfd of the init of the PID namespace the process entered (:meth:`measure`), or -1.  The kernel lets
        #: a namespace's init exit only after every other process of the namespace has: readable, it says all are gone.
        self.init_pidfd = -1
        self.measure(pid)
        #: Why the last :meth:`read` returned None with the process alive: "limit" (it computed for the whole
        #: limit; wall time where CPU time cannot be read) or "wall" (it reached the wall-clock bound first)...
        self.stopped_by = ""
        #: ...and whether it was computing all along (limit), or for at least COMPUTING_SHARE of the wait.
        self.computing = False

    def close(self, wait: float = 0.0) -> bool:
        """Kill the process group and release the pipes; with ``wait``, first wait up to that many seconds until
        the process has ended (its pidfd readable: its files closed, its locks released) and, where it entered a PID
        namespace, until that namespace's init has (then no process of the namespace is left).  True only in that
        last case: every process the student's code could have started is gone."""
        self.gone()
        waited = [fd for fd in (self.pidfd, self.init_pidfd) if fd >= 0]
        deadline = time.monotonic() + wait
        while wait and waited:
            ready, _, _ = select.select(waited, [], [], max(deadline - time.monotonic(), 0.0))
            waited = [fd for fd in waited if fd not in ready]
            if not ready:
                break
        namespace_gone = self.init_pidfd >= 0 and self.init_pidfd not in waited
        for fd in (self.request_fd, self.reply_fd, self.pidfd, self.output_fd, self.stat_fd, self.init_pidfd):
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self.request_fd, self.reply_fd, self.pidfd, self.output_fd, self.stat_fd = -1, -1, -1, -1, -1
        self.init_pidfd = -1
        return namespace_gone

    def measure(self, pid: int, namespace_init: bool = False) -> None:
        """Count the CPU time of ``pid`` from now on (the process that runs the student's code); ``namespace_init``:
        it is the init of its own PID namespace (watched until it ends, see :meth:`close`)."""
        if namespace_init and self.init_pidfd < 0:
            try:
                self.init_pidfd = os.pidfd_open(pid)
            except OSError:  # gone already, or no pidfds: its uid is then cleaned as any other
                self.init_pidfd = -1
        if self.stat_fd >= 0:
            os.close(self.stat_fd)
        try:  # kept open: once the process ends, reads fail instead of reaching a process that reused its pid
            self.stat_fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY)
        except OSError:  # no /proc: limits fall back to the wall clock
            self.stat_fd = -1

    def cpu_seconds(self) -> float | None:
        """CPU time the process used so far (user + system, every thread, children it waited for), or None."""
        return self.sample()[0]

    def sample(self) -> tuple[float | None, bytes]:
        """(:meth:`cpu_seconds`, the process's state letter: b"R" running or ready, b"S" sleeping, ...); (None, b"")
        where /proc cannot be read."""
        if self.stat_fd < 0:
            return None, b""
        try:
            data = os.pread(self.stat_fd, 4096, 0)
            # after the command name, which may hold spaces and parentheses: state is field 3, utime 14 ... cstime 17
            fields = data[data.rindex(b")") + 2:].split()
            return sum(int(field) for field in fields[11:15]) / _TICKS, fields[0]
        except (OSError, ValueError, IndexError):
            return None, b""

    def gone(self) -> None:
        """Kill the process group (if not done yet) and forget the pid: ``pid is None`` means it ended."""
        pid, self.pid = self.pid, None
        if pid is not None:
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def read(self, timeout: float, drain: Callable[["StudentProcess"], None], *,
             wall: float | None = None) -> dict[str, Any] | None:
        """Next reply line, or None on timeout / end of stream (then :attr:`pid` tells which, and
        :attr:`stopped_by` why a live process was given up on).

        ``timeout`` is CPU time the process may spend from now; ``wall`` bounds the wall time
        (default ``WALL_FACTOR * timeout``).  Where the CPU time cannot be read, ``timeout`` is
        wall time.  ``drain`` moves the process's output away at every wake-up: the process
        flushes it before each reply, so what a call printed is filed under the test that made
        the call.
        """
        started = time.monotonic()
        deadline = started + (WALL_FACTOR * timeout if wall is None else wall)
        self.stopped_by, self.computing = "", False
        samples = ready_samples = 0
        # A reply already buffered (a batch's replies arrive together) is taken without reading /proc.
        cpu_start = self.cpu_seconds() if b"\n" not in self.buffer else None
        while b"\n" not in self.buffer:
            now = time.monotonic()
            cpu_now, state = (None, b"") if cpu_start is None else self.sample()
            samples, ready_samples = samples + 1, ready_samples + (state == b"R")
            used = now - started if cpu_start is None or cpu_now is None else cpu_now - cpu_start
            if used >= timeout or now >= deadline:
                self.stopped_by = "limit" if used >= timeout else "wall"
                self.computing = (used >= timeout or used >= COMPUTING_SHARE * (now - started)
                                  or ready_samples >= COMPUTING_SHARE * samples > 0)
                return None
            # one thread's CPU time grows no faster than the clock: no look is needed before timeout - used; the
            # state is looked at every _SAMPLE_SECONDS all the same (a reply ends the wait at once)
            wait = min(deadline - now, max(timeout - used, _POLL_SECONDS), _SAMPLE_SECONDS)
            watched = [self.reply_fd] + [fd for fd in (self.pidfd, self.output_fd) if fd >= 0]
            ready, _, _ = select.select(watched, [], [], wait)
            drain(self)
            if not ready or ready == [self.output_fd]:
                continue
            if self.reply_fd not in ready:  # it ended; what it wrote before would be readable
                self.gone()
                return None
            chunk = os.read(self.reply_fd, 1 << 20)
            if not chunk:
                self.gone()
                return None
            self.buffer += chunk
            if len(self.buffer) > MAX_REPLY_BYTES:
                return {"fault": "the submission's process sent an oversized reply"}
        line, self.buffer = self.buffer.split(b"\n", 1)
        try:
            message = json.loads(line)
        except (ValueError, RecursionError):
            return {"fault": "the submission's process sent an unreadable reply (did it write to the grader's pipe?)"}
        return message if isinstance(message, dict) else {"fault": "the submission's process sent a malformed reply"}


class OutputLog:
    """What the student's code printed, per test (bounded per test; the rest is counted, not kept)."""

    def __init__(self) -> None:
        self.kept: dict[str, bytearray] = {}
        self.dropped: dict[str, int] = {}  # test case -> bytes printed beyond what is kept

    def drain(self, process: StudentProcess) -> None:
        """Move what ``process`` printed so far into its owner's output (bounded): never into another test's,
        so output a hidden-keyed process prints late cannot reach a visible row, whoever ends the process."""
        owner = process.owner
        sink = self.kept.setdefault(owner, bytearray())
        while process.output_fd >= 0:
            try:
                chunk = os.read(process.output_fd, 1 << 16)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                chunk = b""
            if not chunk:
                os.close(process.output_fd)
                process.output_fd = -1
                return
            room = OUTPUT_KEEP_BYTES - len(sink)
            if room > 0:
                sink.extend(chunk[:room])
            if len(chunk) > room:
                self.dropped[owner] = self.dropped.get(owner, 0) + len(chunk) - max(room, 0)

    def by_test(self, submission: Path) -> dict[str, str]:
        """Each test's output as text (node id -> text; "" before any test), with the folders that differ from run to
        run and machine to machine named the same everywhere (a warning names the file it came from): the staged
        copy (a temporary folder) as ``<your submission>``, the checks' and the installed packages' by their own
        paths from there (``checks/runners/probes.py``, ``torch/...``)."""
        shown_as = [(str(Path(submission).resolve()), "<your submission>")]
        packages = sorted({sysconfig.get_path(kind) for kind in ("purelib", "platlib")})
        for folder in (Path(checks.__file__).parent.parent, *packages):
            shown_as.append((str(Path(folder).resolve()) + os.sep, ""))
        texts = {}
        for test, data in self.kept.items():
            if data:
                text = bytes(data).decode("utf-8", errors="replace")
                for folder, name in shown_as:
                    text = text.replace(folder, name)
                texts[test] = text + (f"\n… ({self.dropped[test]} more bytes of output not shown)"
                                      if test in self.dropped else "")
        return texts
