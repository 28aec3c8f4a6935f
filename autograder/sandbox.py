"""The student process: forked from a pre-warmed zygote, unprivileged, limited, spoken to in JSON.

Design
------
* **Zygote.**  The judge imports torch and the scenario harness once, then forks a
  *zygote* before it imports pytest, hypothesis or any hidden test.  Each student
  process is forked from the zygote, so it starts in milliseconds with torch
  already loaded, and its memory holds nothing of the judge's.
* **Isolation.**  A student process runs in its own session, with rlimits (address
  space, CPU seconds, processes, file size, open files), no network and, where the
  kernel allows it (root, or unprivileged user namespaces), a private mount
  namespace in which the grader's private folders are covered by empty tmpfs
  mounts.  As root it drops to a dedicated unprivileged uid.  The grader's repository and
  the world-writable folders (``/tmp``, ``/var/tmp``, ``/dev/shm``, ``/run/lock``) are covered too (the
  paths the process needs, like its own folders and the interpreter, are bound back), so
  hidden tests cannot be read from ``.git`` and nothing written there outlives the process.
  :mod:`autograder.confine` adds IPC and PID namespaces, Landlock, seccomp and a clean
  environment, falls back to what the platform allows, and reports the level reached
  (the ``ready`` message's ``isolation``; :attr:`SandboxRunner.isolation`).
* **Protocol.**  Requests and replies are single JSON lines on two pipes; the
  student's stdout/stderr go to a third pipe that a thread drains into a bounded
  buffer.  Nothing from the student process is ever unpickled or executed.
* **Faults.**  A crash, ``os._exit``, segfault or hang costs only the current call:
  the process is killed (its whole process group, and as root everything its uid
  owns) and the next call gets a fresh one.  Import faults are remembered per
  module, so tests that do not need a broken module still run.  The zygote is a child
  subreaper that ignores SIGCHLD, so orphans of killed processes never linger as zombies.
* **Limits.**  :class:`Limits` holds the defaults; the environment variable
  ``AMP_SANDBOX_LIMITS`` (a JSON object such as ``{"call_seconds": 3}``) overrides fields
  of the limits a :class:`SandboxRunner` gets when none are passed (tests, slow machines).
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import select
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import torch

from checks import gpu_scenarios, probes  # noqa: F401 - preloaded into the zygote; no CUDA at import
from checks import harness

from autograder import budget, confine
from autograder.files import kill_uid

IMPORT_ORDER = ("answers", "loss_scaler", "amp_step")
SCENARIO_NEEDS = {
    "scaler_ops": ("loss_scaler",),
    "answers": ("answers",),
    "amp_probe": ("amp_step",),
    "underflow": ("amp_step", "loss_scaler"),
    "delegation": ("loss_scaler",),
    "gpu_speed": ("amp_step",),
    "gpu_underflow": ("amp_step",),
    "gpu_scaler_ops": ("loss_scaler",),
}
MAX_REPLY_BYTES = 16 * 2**20
LIMITS_ENV = "AMP_SANDBOX_LIMITS"
REPO_ROOT = Path(__file__).resolve().parent.parent  # covered when it is a checkout (not site-packages)
_COVER_REPO = (REPO_ROOT / "pyproject.toml").is_file() or (REPO_ROOT / ".git").exists()
SHARED_TMP = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock")  # the usual world-writable folders
#: Where other copies of the grader (another checkout, a CI clone, /autograder/source) may sit readable
#: by anyone: covered too, keeping only the interpreter, the submission and the scratch folder.
PRIVATE_TOPS = ("/work", "/home", "/root", "/srv", "/mnt", "/opt", "/autograder", "/workspace", "/data", "/media",
                str(REPO_ROOT.parent))
OUTPUT_KEEP_BYTES = 7 * 1024  # with the "more bytes not shown" notice, within results.OUTPUT_LIMIT

_MS_REC, _MS_PRIVATE, _MS_RDONLY, _MS_BIND = 0x4000, 0x40000, 0x1, 0x1000
_PR_SET_CHILD_SUBREAPER = 36


@dataclass(frozen=True)
class Limits:
    """Resource limits for one student process (seconds and bytes)."""

    call_seconds: float = budget.CALL_SECONDS  # one call, unless the test asks for longer (up to max_call_seconds)
    import_seconds: float = budget.IMPORT_SECONDS
    submission_seconds: float = budget.SUBMISSION_SECONDS  # wall time for everything, intake included
    hangs_per_module: int = 3  # after this many hangs, tests needing that file fail at once (deterministic)
    memory_bytes: int | None = 4 * 2**30
    cpu_seconds: int = 600
    processes: int = 64
    file_bytes: int = 16 * 2**20
    open_files: int = 256
    max_call_seconds: float = budget.MAX_CALL_SECONDS


def default_limits() -> Limits:
    """``Limits()`` with the fields given in ``$AMP_SANDBOX_LIMITS`` (a JSON object) overridden."""
    text = os.environ.get(LIMITS_ENV, "").strip()
    return Limits(**json.loads(text)) if text else Limits()


@dataclass(frozen=True)
class SpawnRequest:
    """What the zygote needs to start one student process (plain data)."""

    submission: str
    scratch: str
    skip: tuple[str, ...]
    uid: int | None
    hide: tuple[str, ...]
    limits: Limits = field(default_factory=Limits)


# --------------------------------------------------------------------------- inside the child


def _libc() -> Any:
    return ctypes.CDLL(None, use_errno=True)


def _closed_ancestor(path: Path) -> tuple[Path, Path] | None:
    """(closed folder, its child on the way to ``path``) for the first folder others cannot enter."""
    parts = path.resolve().parts
    for depth in range(1, len(parts)):
        folder = Path(*parts[:depth])
        if not os.stat(folder).st_mode & 0o001:
            return folder, Path(*parts[: depth + 1])
    return None


def _expose_interpreter(libc: Any, scratch: str) -> None:
    """Let the unprivileged uid reach Python's files when they sit under a closed folder.

    A pyenv under ``/root`` (mode 700) is common.  In our private mount namespace the
    closed folder is covered by a tmpfs that others may traverse, and only the way to
    the interpreter is bind-mounted back into it; the rest of the folder stays hidden.
    """
    for prefix in {sys.base_prefix, sys.prefix, os.path.dirname(torch.__file__)}:
        found = _closed_ancestor(Path(prefix))
        if found is None:
            continue
        closed, child = found
        holder = Path(scratch) / f".mnt-{abs(hash(str(child)))}"
        holder.mkdir(exist_ok=True)
        if libc.mount(str(child).encode(), str(holder).encode(), None, _MS_BIND | _MS_REC, None) != 0:
            continue
        libc.mount(b"tmpfs", str(closed).encode(), b"tmpfs", 0, b"mode=0711,size=64k")
        child.mkdir(exist_ok=True)
        libc.mount(str(holder).encode(), str(child).encode(), None, _MS_BIND | _MS_REC, None)


def _cover(libc: Any, folder: str, keep: list[str], options: bytes) -> None:
    """Mount an empty tmpfs over ``folder``, then bind the paths of ``keep`` below it back in place."""
    if not os.path.isdir(folder) or os.path.islink(folder) or folder in keep:
        return
    inside = [k for k in keep if k.startswith(folder.rstrip("/") + "/") and os.path.isdir(k)]
    inside = [k for k in inside if not any(k.startswith(other + "/") for other in inside)]
    handles = [(path, os.open(path, os.O_PATH | os.O_DIRECTORY)) for path in inside]
    try:
        if libc.mount(b"tmpfs", folder.encode(), b"tmpfs", 0, options) != 0:
            return
        for path, fd in handles:
            os.makedirs(path, exist_ok=True)
            libc.mount(f"/proc/self/fd/{fd}".encode(), path.encode(), None, _MS_BIND | _MS_REC, None)
    finally:
        for _, fd in handles:
            os.close(fd)


def _isolate(request: SpawnRequest) -> bool:
    """Namespaces, hidden folders, rlimits and the unprivileged uid (best effort); True if namespaces worked."""
    libc = _libc()
    is_root = os.geteuid() == 0
    namespaces = confine.enter_namespaces(libc, is_root)  # mount, net, IPC, PID (+user); see autograder.confine
    if namespaces:
        keep = [os.path.realpath(p) for p in (request.submission, request.scratch, sys.prefix, sys.base_prefix,
                                              os.path.dirname(torch.__file__))]
        for path in PRIVATE_TOPS:
            if os.path.realpath(path) != "/":
                _cover(libc, os.path.realpath(path), keep, b"mode=0755,size=64k")
        for path in SHARED_TMP:
            _cover(libc, os.path.realpath(path), keep, b"mode=1777,size=64m")
        for path in (str(REPO_ROOT),) * _COVER_REPO + request.hide:
            _cover(libc, os.path.realpath(path), keep, b"mode=0755,size=64k")
        if request.uid is not None:
            _expose_interpreter(libc, request.scratch)
        confine.cap_scratch(libc, request.scratch, request.uid)
    limits = request.limits
    for name, value in (
        (resource.RLIMIT_AS, limits.memory_bytes),
        (resource.RLIMIT_CPU, limits.cpu_seconds),
        (resource.RLIMIT_FSIZE, limits.file_bytes),
        (resource.RLIMIT_NOFILE, limits.open_files),
        (resource.RLIMIT_CORE, 0),
        (resource.RLIMIT_NPROC, limits.processes if request.uid is not None else None),
    ):
        if value is not None:
            resource.setrlimit(name, (value, value))
    if request.uid is not None:
        os.setgroups([])
        os.setgid(request.uid)
        os.setuid(request.uid)
    return namespaces


def _send(fd: int, message: dict[str, Any]) -> None:
    data = (json.dumps(message, allow_nan=True) + "\n").encode()
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _child_main(request: SpawnRequest, fds: list[int]) -> None:
    """Body of a student process; never returns."""
    request_fd, reply_fd, output_fd = fds
    try:
        os.setsid()
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(output_fd, 1)
        os.dup2(output_fd, 2)
        os.close(output_fd)
        namespaces = _isolate(request)
        os.chdir(request.scratch)
        isolation = confine.confine(request.submission, request.scratch, namespaces)  # also a clean environment
        sys.dont_write_bytecode = True
        sys.stdout = open(1, "w", buffering=1, closefd=False)
        sys.stderr = open(2, "w", buffering=1, closefd=False)
        torch.set_num_threads(1)
        for name in [name for name in sys.modules if name.split(".")[0] in ("checks", "autograder")]:
            del sys.modules[name]  # student code cannot simply import and patch the harness we run
        submission = harness.Submission(Path(request.submission))
        for name in IMPORT_ORDER:
            if name in request.skip:
                continue
            try:
                submission.module(name)
                fault = None
            except harness.SubmissionFault as exc:
                fault = str(exc)
            _send(reply_fd, {"imported": name, "fault": fault})
        _send(reply_fd, {"ready": True, "isolation": isolation})
        with open(request_fd, "rb", closefd=False) as requests:
            for line in requests:
                message = json.loads(line)
                try:
                    harness.seed_cpu(0)
                    reply = {"ok": harness.run_scenario(message["scenario"], message["args"], submission)}
                except harness.SubmissionFault as exc:
                    reply = {"fault": str(exc)}
                except BaseException as exc:  # noqa: BLE001 - e.g. SystemExit from student code
                    reply = {"fault": f"the scenario stopped with {type(exc).__name__}: {exc}"[:2000]}
                _send(reply_fd, {"id": message["id"], **reply})
    finally:
        os._exit(0)


class Zygote:
    """A pre-warmed process (torch and the harness imported) that forks student processes.

    Start it before importing anything the student process must not see.
    """

    def __init__(self) -> None:
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        pid = os.fork()
        if pid == 0:  # the zygote
            parent.close()
            self._serve(child)
        child.close()
        self.pid = pid
        self._socket = parent
        self._lock = threading.Lock()

    @staticmethod
    def _serve(sock: socket.socket) -> None:
        _libc().prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)  # orphans of student processes become ours...
        signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # ...and children are reaped automatically
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the judge decides when we stop
        try:
            while True:
                data, fds, _flags, _addr = socket.recv_fds(sock, 1 << 16, 3)
                if not data:
                    break
                fields = json.loads(data)
                fields["limits"] = Limits(**fields["limits"])
                fields["skip"], fields["hide"] = tuple(fields["skip"]), tuple(fields["hide"])
                request = SpawnRequest(**fields)
                pid = os.fork()
                if pid == 0:
                    sock.close()
                    _child_main(request, list(fds))
                for fd in fds:
                    os.close(fd)
                sock.send(json.dumps({"pid": pid}).encode())
        finally:
            os._exit(0)

    def spawn(self, request: SpawnRequest, fds: list[int]) -> int:
        fields = {**request.__dict__, "limits": request.limits.__dict__}
        with self._lock:
            socket.send_fds(self._socket, [json.dumps(fields).encode()], fds)
            return int(json.loads(self._socket.recv(1 << 16))["pid"])

    def close(self) -> None:
        try:
            self._socket.close()
            os.waitpid(self.pid, 0)
        except (OSError, ChildProcessError):
            pass


_ZYGOTE: Zygote | None = None


def start_zygote() -> Zygote:
    """Start (once per process) the zygote that forks student processes."""
    global _ZYGOTE
    if _ZYGOTE is None:
        torch.set_num_threads(1)
        # The first optimizer imports torch._dynamo (1-4 s): do it once here, not in every student process.
        torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)
        _ZYGOTE = Zygote()
    return _ZYGOTE


# --------------------------------------------------------------------------- the judge's side


class _OutputDrain(threading.Thread):
    """Reads a student process's stdout/stderr, keeping only the first few KiB."""

    def __init__(self, fd: int, sink: bytearray, counter: list[int]) -> None:
        super().__init__(daemon=True)
        self.fd, self.sink, self.counter = fd, sink, counter

    def run(self) -> None:
        while True:
            try:
                chunk = os.read(self.fd, 1 << 16)
            except OSError:
                break
            if not chunk:
                break
            self.counter[0] += len(chunk)
            room = OUTPUT_KEEP_BYTES - len(self.sink)
            if room > 0:
                self.sink.extend(chunk[:room])
        os.close(self.fd)


class SandboxRunner:
    """Runs scenarios against one submission in isolated student processes.

    This is the grader's implementation of the ``student`` fixture used by the tests.
    """

    def __init__(self, submission: Path, *, limits: Limits | None = None, hide: tuple[str, ...] = (),
                 uid: int | None = None, zygote: Zygote | None = None) -> None:
        self.submission = submission
        self.limits = limits or default_limits()
        self.hide = hide
        self.zygote = zygote or start_zygote()
        self.uid = uid if uid is not None or os.geteuid() != 0 else 61000 + os.getpid() % 4000
        self.import_faults: dict[str, str] = {}
        self.output = bytearray()
        self.output_total = [0]
        self.started = time.monotonic()
        self._scratch = Path(tempfile.mkdtemp(prefix="amp-scratch-"))
        self._pid: int | None = None
        self._request_fd = self._reply_fd = self._pidfd = -1
        self._reply_buffer = b""
        self._next_id = 0
        self._test_fault: str | None = None
        self.hangs: dict[str, int] = {}  # contract module -> calls that timed out while needing it
        self.isolation: str | None = None  # the level the last student process reached (autograder.confine)
        self._scratch_guard: confine.ScratchGuard | None = None
        #: The sandbox's own record of the limits hit: test node id -> kind (budget.LIMIT_KINDS); reports
        #: classify by this, never by message text (which student code can imitate).
        self.limits_hit: dict[str, str] = {}
        self._test = ""
        self._import_limit: dict[str, str] = {}  # contract module -> kind, for imports that hit a limit
        self._test_fault_kind = ""

    def begin_test(self, name: str) -> None:
        """A new test starts: forget the previous test's hang or crash (see :meth:`run`)."""
        self._test_fault, self._test_fault_kind = None, ""
        self._test = name

    def _budget_left(self) -> float:
        return self.limits.submission_seconds - (time.monotonic() - self.started)

    def _limit(self, kind: str, message: str) -> NoReturn:
        """Record that the current test hit a limit of ``kind``, then fail it with ``message``."""
        self.limits_hit.setdefault(self._test, kind)
        self._fault(message)

    # -- lifecycle

    def _start(self) -> None:
        if self.uid is not None:
            os.chown(self._scratch, self.uid, self.uid)
        confine.grant_submission(self.submission, self.uid)
        request_r, request_w = os.pipe()
        reply_r, reply_w = os.pipe()
        output_r, output_w = os.pipe()
        request = SpawnRequest(str(self.submission), str(self._scratch), tuple(self.import_faults), self.uid,
                               self.hide, self.limits)
        self._pid = self.zygote.spawn(request, [request_r, reply_w, output_w])
        for fd in (request_r, reply_w, output_w):
            os.close(fd)
        self._request_fd, self._reply_fd, self._reply_buffer = request_w, reply_r, b""
        try:  # readable once the process ends, even while a child of it still holds the reply pipe open
            self._pidfd = os.pidfd_open(self._pid)
        except (AttributeError, OSError):  # before Linux 5.3, or the process is gone already
            self._pidfd = -1
        _OutputDrain(output_r, self.output, self.output_total).start()
        for name in IMPORT_ORDER:
            if name in self.import_faults:
                continue
            message = self._read(max(0.1, min(self.limits.import_seconds, self._budget_left())))
            if message is None:
                alive = self._pid is not None
                self._import_limit[name] = budget.TIME_LIMIT if alive else budget.CRASH_LIMIT
                self.import_faults[name] = (
                    f"importing {harness.CONTRACT_FILES[name]} did not finish within "
                    f"{self.limits.import_seconds:.0f} s (an infinite loop at module level?)"
                    if alive else
                    f"importing {harness.CONTRACT_FILES[name]} ended the process "
                    "(sys.exit/os._exit/a crash at module level?)"
                )
                self._kill()
                return self._start()
            if message.get("imported") == name and message.get("fault"):
                self.import_faults[name] = message["fault"]
        ready = self._read(max(0.1, min(self.limits.import_seconds, self._budget_left())))
        if not (ready and ready.get("ready")):
            self._kill()
            raise harness.SubmissionFault("the submission's process did not start properly")
        self.isolation = str(ready.get("isolation") or "none")
        if self.isolation != "namespaces" and self._scratch_guard is None:  # no size-capped tmpfs there
            self._scratch_guard = confine.ScratchGuard(self._scratch, self._stop_process)
            self._scratch_guard.start()

    def _stop_process(self) -> None:
        pid = self._pid
        if pid is not None:
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def _kill(self) -> None:
        if self._pid is not None:
            try:
                os.killpg(self._pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self.uid is not None and os.geteuid() == 0:  # even when the process ended by itself: its
            kill_uid(self.uid)  # daemons (setsid, double fork) outlive it
        for fd in (self._request_fd, self._reply_fd, self._pidfd):
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self._pid, self._request_fd, self._reply_fd, self._pidfd = None, -1, -1, -1

    def close(self) -> None:
        if self._scratch_guard is not None:
            self._scratch_guard.cancel()
        self._kill()
        shutil.rmtree(self._scratch, ignore_errors=True)

    # -- protocol

    def _read(self, timeout: float) -> dict[str, Any] | None:
        """Next reply line, or None on timeout / end of stream (then ``_pid`` tells which)."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self._reply_buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            ready, _, _ = select.select([self._reply_fd] + [self._pidfd] * (self._pidfd >= 0), [], [], remaining)
            if not ready:
                return None
            if self._reply_fd not in ready:  # it ended; what it wrote before would be readable
                self._pid_gone()
                return None
            chunk = os.read(self._reply_fd, 1 << 20)
            if not chunk:
                self._pid_gone()
                return None
            self._reply_buffer += chunk
            if len(self._reply_buffer) > MAX_REPLY_BYTES:
                return {"fault": "the submission's process sent an oversized reply"}
        line, self._reply_buffer = self._reply_buffer.split(b"\n", 1)
        try:
            message = json.loads(line)
        except (ValueError, RecursionError):
            return {"fault": "the submission's process sent an unreadable reply (did it write to the grader's pipe?)"}
        return message if isinstance(message, dict) else {"fault": "the submission's process sent a malformed reply"}

    def _pid_gone(self) -> None:
        pid, self._pid = self._pid, None
        if pid is not None:
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self._pid = None

    # -- the runner API used by the tests

    @staticmethod
    def _fault(message: str) -> NoReturn:
        """Raise SubmissionFault(message), always from this line: hypothesis tells failures apart by where
        they were raised, and would call a hang reported from two places a flaky test."""
        raise harness.SubmissionFault(message)

    def needs(self, scenario: str, args: dict[str, Any]) -> tuple[str, ...]:
        needed = SCENARIO_NEEDS[scenario]
        if scenario == "amp_probe" and args.get("scaler") != "torch":
            needed += ("loss_scaler",)
        return needed

    def run(self, scenario: str, args: dict[str, Any], *, timeout: float | None = None) -> Any:
        """Run ``scenario`` in the student process; raise SubmissionFault if it cannot."""
        if self._test_fault:  # one hang or crash per test: hypothesis must not wait for every example to time out
            if self._test_fault_kind:
                self._limit(self._test_fault_kind, self._test_fault)
            self._fault(self._test_fault)
        if self._budget_left() <= 0:
            self._limit(budget.TIME_LIMIT, budget.used_up_message(self.limits.submission_seconds))
        for name in self.needs(scenario, args):
            if name in self._import_limit:
                self._limit(self._import_limit[name], self.import_faults[name])
            if name in self.import_faults:
                self._fault(self.import_faults[name])
            if self.hangs.get(name, 0) >= self.limits.hangs_per_module:
                self._limit(budget.TIME_LIMIT, f"your code hung {self.hangs[name]} times in earlier tests that use "
                            f"{harness.CONTRACT_FILES[name]}; the remaining ones are not run (they score 0)")
        if self._pid is None:
            try:
                self._start()
            except harness.SubmissionFault as exc:
                self._test_fault, self._test_fault_kind = str(exc), budget.CRASH_LIMIT
                self._limit(budget.CRASH_LIMIT, self._test_fault)
            return self.run(scenario, args, timeout=timeout)
        self._next_id += 1
        payload = (json.dumps({"id": self._next_id, "scenario": scenario, "args": args}) + "\n").encode()
        try:
            os.write(self._request_fd, payload)
            written = True
        except OSError:
            written = False
        if not written:
            self._kill()
            self._limit(budget.CRASH_LIMIT, "the submission's process ended unexpectedly")
        limit = min(timeout, self.limits.max_call_seconds) if timeout else self.limits.call_seconds
        cut_by_budget = self._budget_left() < limit  # the call may use only what is left of the budget
        limit = max(0.1, min(limit, self._budget_left()))
        reply = self._read(limit)
        if reply is None:
            hung = self._pid is not None
            self._kill()
            if hung and cut_by_budget:
                self._test_fault = budget.used_up_message(self.limits.submission_seconds)
            elif hung:
                for name in self.needs(scenario, args):
                    self.hangs[name] = self.hangs.get(name, 0) + 1
            self._test_fault = self._test_fault if hung and cut_by_budget else (
                # the rest of this test fails at once: no restart per hypothesis example
                f"your code did not finish within {limit:.0f} s (an infinite loop?); it was stopped" if hung else
                "your code ended the process while it ran (sys.exit, os._exit, a crash or a memory limit)")
            if not hung and self._scratch_guard is not None and self._scratch_guard.exceeded:
                self._test_fault = (f"your code wrote more than {confine.SCRATCH_BYTES // 2**20} MiB (or "
                                    f"{confine.SCRATCH_ENTRIES} files) to its scratch folder; it was stopped")
            self._test_fault_kind = budget.TIME_LIMIT if hung else budget.CRASH_LIMIT
            self._limit(self._test_fault_kind, self._test_fault)
        if reply.get("id") != self._next_id or ("ok" not in reply and "fault" not in reply):
            self._kill()
            self._test_fault = str(reply.get("fault") or "the submission's process sent an unexpected reply")
            self._test_fault_kind = budget.INTERFERED
            self._limit(budget.INTERFERED, self._test_fault)
        if "fault" in reply:
            self._fault(str(reply["fault"]))
        return reply["ok"]

    def source(self, module: str) -> str | None:
        """The text of one contract file (read by the judge, never executed), or None."""
        path = self.submission / harness.CONTRACT_FILES[module]
        try:
            return path.read_bytes()[: 2**20].decode("utf-8", errors="replace")
        except OSError:
            return None

    def captured_output(self) -> str:
        text = bytes(self.output).decode("utf-8", errors="replace")
        extra = self.output_total[0] - len(self.output)
        return text + (f"\n… ({extra} more bytes of output not shown)" if extra > 0 else "")
