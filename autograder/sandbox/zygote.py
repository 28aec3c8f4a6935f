"""The student process: forked from a pre-warmed zygote, confined, limited, before any student line runs.

* **Zygote.**  The judge imports torch and the scenario harness once, then forks a
  *zygote* before it imports pytest, hypothesis or any hidden test.  Each student
  process is forked from the zygote, so it starts in milliseconds with torch
  already loaded, and its memory holds nothing of the judge's.  The zygote is a child
  subreaper that ignores SIGCHLD, so orphans of killed processes never linger as zombies.
  Processes that run ``loss_scaler.py`` fork from a second zygote, forked from the first
  at its first such request, that took torch's scaler out once before any student file was read.
* **Isolation.**  A student process runs in its own session, with rlimits (address
  space, CPU seconds, processes, file size, open files), no network and, where the
  kernel allows it, private namespaces in which its root is built from an allow-list
  (:mod:`autograder.sandbox.view`: the system, the interpreter, its own submission and
  scratch; nothing else exists there), read-only but its scratch.  As root it drops
  to a dedicated unprivileged uid.  :mod:`autograder.sandbox.confine` adds IPC and PID
  namespaces, Landlock, seccomp and a clean environment, and reports the level reached.
* **What it runs.**  Only the contract files a :class:`SpawnRequest` names are imported
  (``answers.py`` never), then it answers scenario requests, one JSON line each, until
  its request pipe closes.  The judge's side is :mod:`autograder.sandbox.runner`.
* **Limits.**  :class:`Limits` holds the defaults; the environment variable
  ``AMP_SANDBOX_LIMITS`` (a JSON object such as ``{"call_seconds": 3}``) overrides fields
  of the limits a runner gets when none are passed (tests, slow machines).

One file past 400 lines: everything a student process does before its first student line, in the order it must
happen (the order is the isolation).
"""

from __future__ import annotations

import ctypes
import gc
import importlib
import json
import os
import resource
import signal
import socket
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from checks.runners import gpu_runs, probes  # noqa: F401 - preloaded into the zygote; no CUDA at import
from checks import arithmetic
from checks.student import absence, serve
from checks.runners import harness

from autograder.sandbox import budget, confine, mounts, reach, view
from autograder.sandbox.syscalls import CLONE_NEWPID
from autograder import PACKAGE, ROOT, is_checkout, settings

#: The grader's files: a checkout's whole tree, else (pip-installed, the Gradescope zip) the grader's own package,
#: which may sit inside the site-packages every student process reads (covered there: autograder.sandbox.view).
REPO_ROOT = ROOT if is_checkout() else PACKAGE

#: torch's scaler sources, hidden from the processes that run loss_scaler.py (found once, before any fork; the
#: Landlock rules around them too).
TASK1_HIDDEN = absence.scaler_sources()
#: Pip-installed, the grader's package sits in the site-packages every student process reads: Landlock
#: keeps it out too (a checkout's or the zip's lies outside every readable root).
INSTALLED_PACKAGE: tuple[str, ...] = () if is_checkout() else (os.path.realpath(PACKAGE),)
confine.remember_read_rules([*TASK1_HIDDEN, *INSTALLED_PACKAGE])
confine.remember_read_rules(INSTALLED_PACKAGE)
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
    return Limits(**settings.sandbox_limits())


@dataclass(frozen=True)
class DeviceAccess:
    """What a GPU student process needs beyond a CPU one (built by :mod:`autograder.gpu.access`).

    ``keep``: folders its view holds too (``LD_LIBRARY_PATH``, torch's CUDA libraries, the MPS pipe
    folder): CUDA loads libraries lazily, at the first CUDA call.  ``groups``: the supplementary gids
    the unprivileged uid keeps (those of ``/dev/nvidia*``).  ``nodes``: the ``/dev/nvidia*`` nodes in its view.  With a
    DeviceAccess no ``RLIMIT_AS`` is set, whatever the limits say: CUDA reserves far more
    address space than it uses, and fails to start under such a limit.
    """

    keep: tuple[str, ...] = ()
    groups: tuple[int, ...] = ()
    nodes: tuple[str, ...] = ()


@dataclass(frozen=True)
class SpawnRequest:
    """What the zygote needs to start one student process (plain data)."""

    submission: str
    scratch: str
    modules: tuple[str, ...]  # the contract modules this process imports, in order
    uid: int | None
    hide: tuple[str, ...]
    limits: Limits = field(default_factory=Limits)
    device: DeviceAccess | None = None  # a GPU student process (see DeviceAccess)
    group: int | None = None  # a supplementary group that may read the staged submission (the block's first uid)


# --------------------------------------------------------------------------- inside the child


def _libc() -> Any:
    return ctypes.CDLL(None, use_errno=True)


def _isolate(request: SpawnRequest, parent: int, hidden: list[str], reply_fd: int) -> bool:
    """Namespaces and the built file view (:mod:`autograder.sandbox.view`), hidden files, rlimits and the
    unprivileged uid (best effort); True if the process is in namespaces with its built, read-only view.  The
    judge is told on ``reply_fd`` which process to measure, when namespaces fork a new one."""
    libc = _libc()
    namespaces = confine.enter_namespaces(  # mount, net, IPC, PID (+user); see autograder.sandbox.confine
        libc, os.geteuid() == 0, tell=lambda child: serve.send(reply_fd, {"measure": child}))
    sealed = False
    if namespaces:
        device = request.device
        allowed = [request.submission, *(device.keep + device.nodes if device else ())]
        built = view.build(libc, allowed, request.scratch, [str(REPO_ROOT), *request.hide])
        for path in hidden:  # an empty file in its place
            libc.mount(b"/dev/null", path.encode(), None, mounts.MS_BIND, None)
        sealed = mounts.read_only_rest(libc) and built
        confine.cap_scratch(libc, request.scratch, request.uid)  # after read_only_rest: they stay writable
    limits = request.limits
    for name, value in (
        (resource.RLIMIT_AS, None if request.device else limits.memory_bytes),
        (resource.RLIMIT_CPU, limits.cpu_seconds),
        (resource.RLIMIT_FSIZE, limits.file_bytes),
        (resource.RLIMIT_NOFILE, limits.open_files),
        (resource.RLIMIT_CORE, 0),
        (resource.RLIMIT_NPROC, limits.processes if request.uid is not None else None),
    ):
        if value is not None:
            resource.setrlimit(name, (value, value))
    if request.uid is not None:
        # No view re-exposes the interpreter: folders the uid cannot enter are opened now, only where Landlock will
        # bound what the descriptors reach (``..`` from one leaves the folder; a GPU process gets no Landlock).
        if not namespaces and request.device is None and confine.landlock_abi() >= 1:
            reach.open_unreachable(confine.interpreter_folders())
        groups = [request.group] if request.group is not None else []  # reads the staged submission
        os.setgroups(groups + (list(request.device.groups) if request.device else []))  # GPU: /dev/nvidia*'s group
        os.setgid(request.uid)
        os.setuid(request.uid)
    # Armed again after the last change of credentials.  In a PID namespace the parent (outside it) reads as 0.
    confine.die_with_parent(parent=None if namespaces else parent)
    return sealed


def _child_main(request: SpawnRequest, fds: list[int], zygote: int) -> None:
    """Body of a student process; never returns.

    It imports only ``request.modules`` (one student file per process where the tests
    allow it); when ``loss_scaler.py`` is among them, torch's GradScaler and private AMP kernels are disabled first.
    """
    request_fd, reply_fd, output_fd = fds
    try:
        # Killed with the zygote (which ends with its worker): a process stuck in an import that nobody waits
        # for any more must not run on.  (The init of a PID namespace sees its parent, outside it, as 0.)
        confine.die_with_parent(parent=0 if os.getpid() == 1 else zygote)
        os.setsid()
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        os.dup2(output_fd, 1)
        os.dup2(output_fd, 2)
        os.close(output_fd)
        hidden = TASK1_HIDDEN if serve.loses_reference_scaler(request.modules) else []
        namespaces = _isolate(request, zygote, hidden, reply_fd)
        os.chdir(request.scratch)
        isolation = confine.confine(request.submission, request.scratch, namespaces,  # also a clean environment
                                    gpu=request.device is not None, hidden=[*hidden, *INSTALLED_PACKAGE])
        reach.reroute_imports()
        sys.dont_write_bytecode = True
        sys.stdout = open(1, "w", buffering=1, closefd=False)
        sys.stderr = open(2, "w", buffering=1, closefd=False)
        torch.set_num_threads(1)
        for name in [name for name in sys.modules if name.split(".")[0] in ("checks", "autograder")]:
            del sys.modules[name]  # student code cannot simply import and patch the harness we run
        serve.prepare(request.modules)  # before the first student line
        submission = harness.Submission(Path(request.submission))
        serve.send(reply_fd, {"started": True})  # the limits on the submission's time count from here
        for name in request.modules:
            try:
                submission.module(name)
                reply = {"fault": None}
            except harness.SubmissionFault as exc:
                reply = serve.fault(exc)
            serve.send(reply_fd, {"imported": name, **reply})
        serve.send(reply_fd, {"ready": True, "isolation": isolation})
        serve.answer_requests(request_fd, reply_fd, submission)
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
            # A student process holds its own pipes and nothing else: whatever this process inherited (a platform's
            # log or pipe, left open by the harness that started the grader) is closed before any is forked.
            os.closerange(3, child.fileno())
            os.closerange(child.fileno() + 1, resource.getrlimit(resource.RLIMIT_NOFILE)[0])
            # before any student process is forked; ``ps`` shows them as the grader's, by its pid alone
            confine.forget_command_line_and_environment(f"amp-student grader={os.getppid()}")
            self._serve(child)
        child.close()
        self.pid = pid
        self._socket = parent
        self._lock = threading.Lock()

    @staticmethod
    def _serve(sock: socket.socket, task1: bool = False) -> None:
        """Fork a student process for each request; those that run ``loss_scaler.py`` are forked by the Task-1
        zygote (:func:`_task1_zygote`) unless ``task1`` says this is it."""
        _libc().prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)  # orphans of student processes become ours...
        signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # ...and children are reaped automatically
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the judge decides when we stop
        zygote = os.getpid()
        # Every object this zygote holds out of the collector's sight in the processes it forks: a collection there
        # that walked torch's heap would write to every page of it (a private copy each, and a fifth of a second).
        gc.freeze()
        own_namespace = own_pid_namespace()
        helper: socket.socket | None = None  # to the Task-1 zygote, forked at the first request that needs it
        by_helper = not task1  # until the Task-1 zygote fails to start
        try:
            while True:
                data, fds, _flags, _addr = socket.recv_fds(sock, 1 << 16, 3)
                if not data:
                    break
                request = _request(data)
                reply = b""
                if by_helper and serve.loses_reference_scaler(request.modules):
                    helper = helper or _task1_zygote(sock, [*fds, *([own_namespace] if own_namespace >= 0 else [])])
                    try:
                        socket.send_fds(helper, [data], fds)
                        reply = helper.recv(1 << 16)
                    except OSError:
                        pass
                    by_helper = bool(reply)  # else it failed: children here take the scaler out themselves, as ever
                if not reply:
                    pid, init = fork_as_init(own_namespace)
                    if pid == 0:
                        sock.close()
                        for fd in (own_namespace, helper.fileno() if helper is not None else -1):
                            if fd >= 0:
                                os.close(fd)  # no student process may ask for processes, or hold a namespace
                        _child_main(request, list(fds), zygote)
                    reply = json.dumps({"pid": pid, "init": init}).encode()
                for fd in fds:
                    os.close(fd)
                sock.send(reply)
        finally:
            os._exit(0)

    def spawn(self, request: SpawnRequest, fds: list[int]) -> tuple[int, bool]:
        """A student process for ``request`` (``fds``: its request, reply and output pipes): its pid, and whether it
        is the init of a PID namespace of its own from the start (:func:`fork_as_init`)."""
        fields = {**request.__dict__, "limits": request.limits.__dict__,
                  "device": request.device.__dict__ if request.device else None}
        with self._lock:
            socket.send_fds(self._socket, [json.dumps(fields).encode()], fds)
            reply = json.loads(self._socket.recv(1 << 16))
            return int(reply["pid"]), bool(reply.get("init"))

    def close(self) -> None:
        try:
            self._socket.close()
            os.waitpid(self.pid, 0)
        except (OSError, ChildProcessError):
            pass


def own_pid_namespace() -> int:
    """A descriptor of this process's PID namespace where :func:`fork_as_init` may give children namespaces of their
    own (root), else -1."""
    if os.geteuid() != 0:
        return -1
    try:
        return os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return -1


def fork_as_init(own: int) -> tuple[int, bool]:
    """``os.fork()``, the child the init of a new PID namespace where ``own`` (:func:`own_pid_namespace`) is one:
    one fork per student process instead of two (``confine.enter_namespaces`` then unshares the rest).  Returns the
    pid and whether the child is that init (not where the unshare fails: the child then makes its own)."""
    libc = _libc()
    fresh = own >= 0 and libc.unshare(CLONE_NEWPID) == 0
    pid = -1
    try:
        pid = os.fork()
    finally:  # the zygote returns to its own namespace whether the fork worked or not (a second unshare would fail)
        if pid != 0 and fresh and libc.setns(own, CLONE_NEWPID) != 0:
            raise OSError(ctypes.get_errno(), "the zygote cannot return to its own PID namespace")
    return pid, fresh


def _request(data: bytes) -> SpawnRequest:
    fields = json.loads(data)
    fields["limits"] = Limits(**fields["limits"])
    fields["modules"], fields["hide"] = tuple(fields["modules"]), tuple(fields["hide"])
    device = fields.get("device")
    fields["device"] = DeviceAccess(**{name: tuple(value) for name, value in device.items()}) if device else None
    return SpawnRequest(**fields)


def _task1_zygote(judge: socket.socket, passing: list[int]) -> socket.socket:
    """Fork the zygote of the processes that run ``loss_scaler.py``: torch's scaler taken out of it once, before
    any student file is read there (:func:`checks.student.absence.remove_reference_scaler`, which then does
    nothing in its children), instead of once in each of them (a full collection over torch's heap, and a copy
    of every page it writes).  It serves the requests this zygote hands on, and dies with this zygote.  It keeps
    no descriptor of this zygote's (``judge``'s socket; ``passing``: a request's pipes, which it is sent anew, and
    this zygote's PID namespace)."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    parent = os.getpid()
    if os.fork() == 0:
        try:
            for fd in passing:
                os.close(fd)
            judge.close()
            ours.close()
            confine.die_with_parent(parent=parent)
            # The collection that frees torch's scaler once it is taken out must see the objects the zygote froze
            # (frozen, they are never freed); what survives it is frozen again when this zygote serves.
            gc.unfreeze()
            serve.prepare(("loss_scaler",))
            Zygote._serve(theirs, task1=True)
        finally:
            os._exit(0)
    theirs.close()
    return ours


_ZYGOTE: Zygote | None = None


def start_zygote(import_dynamo: bool = False) -> Zygote:
    """Start (once per process) the zygote that forks student processes.

    ``import_dynamo``: import ``torch._dynamo`` (about 1 s) here, once, instead of in every student
    process.  torch's own optimizers import it on their first step; the CPU scenarios use
    ``checks.runners.optimizers.PlainSGD``, which does not, so only the GPU part (real ``Adam``) asks for it.
    A student process that imports it anyway still can, at its own cost.
    """
    global _ZYGOTE
    if _ZYGOTE is None:
        torch.set_num_threads(1)
        # torch picks its CPU kernels once, at the first call that asks: asked here, every student process inherits
        # the judge's, which must be the portable ones (checks/arithmetic.py) or no recorded answer holds.
        if not arithmetic.pinned():
            raise RuntimeError(f"torch computed before the grader pinned its CPU kernels (it uses "
                               f"{torch.backends.cpu.get_cpu_capability()}): import autograder or checks first")
        if import_dynamo:
            importlib.import_module("torch._dynamo")
        _ZYGOTE = Zygote()
    return _ZYGOTE
