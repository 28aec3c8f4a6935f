"""Layered confinement of a student process, strongest available first, and the level it reached.

Graders run in very different places: a root shell on a lab machine (namespaces work), a
Gradescope container (root, but Docker's default capabilities: no ``CAP_SYS_ADMIN``, so
``unshare()`` fails), a TA's laptop as an ordinary user.  :func:`confine` applies, inside a
student process and before any student code is imported, every layer the platform allows:

* **namespaces** (``unshare``): mount, network, IPC and PID namespaces (and a user
  namespace when not root).  The process then sees no network, no other process, no
  SysV IPC object of anyone else, and none of its IPC objects or daemons outlive it (the
  PID namespace's init is the student process: when it dies the kernel kills the rest).
  Its root is built from an allow-list (:mod:`autograder.sandbox.view`), read-only
  (:func:`read_only_rest`) but its scratch folder, a size-capped tmpfs (:data:`SCRATCH_BYTES`).
* **Landlock** (unprivileged; allowed by Docker's default seccomp profile): reads only
  from the interpreter, the system folders, the submission and the scratch folder;
  writes only to the scratch folder (and ``/dev/null``).  Binding: ``landlock`` (PyPI).
* **seccomp** (``pyseccomp`` over libseccomp; sets no-new-privs): an allow-list, measured
  (:data:`~autograder.sandbox.syscalls.ALLOWED_SYSCALLS`); every other call is refused.  Among what is not on it: ``socket()``
  (so no network and no abstract socket between two student processes), ``execve`` (no other
  program: a fresh interpreter would have torch's scaler kernels), ``ptrace``, ``mount``, SysV IPC,
  ``flock``, the ``chmod`` and ``chown`` families (a folder opened to a sibling).  ``fcntl``,
  ``ioctl`` and ``prctl`` only with the commands listed (no lock, no ``F_SETOWN``/``F_SETSIG``/
  ``O_ASYNC``), signals only to the process itself, ``clone`` without namespace flags.  A GPU
  process keeps every ``ioctl`` and ``AF_UNIX`` sockets (CUDA), :data:`~autograder.sandbox.syscalls.GPU_SYSCALLS`.
* a **built environment**: only the variables in :func:`clean_environment`; the zygote erased the
  grader's command line and environment before forking (:func:`forget_command_line_and_environment`),
  and the process is non-dumpable.

A GPU student process gets no Landlock (CUDA does not start under it): its built view is its file seal, so it is
sealed only at ``namespaces``.

The level reached is one of :data:`~autograder.sandbox.levels.LEVELS`, weakest first: ``"none"``, ``"seccomp"``,
``"landlock+seccomp"``, ``"namespaces"``.  :func:`probe_level` measures it without
grading anything (a throwaway child process), so a run can refuse to start below
``--min-isolation`` / ``$AMP_MIN_ISOLATION``.

This module needs only the standard library at import; the bindings load lazily.

Each layer's own tables are in its module (the mounts: :mod:`autograder.sandbox.mounts`; the system calls:
:mod:`autograder.sandbox.syscalls`); this one applies them in order and names the level they add up to, so that a
level's name cannot claim a layer the code does not apply (the policy on levels: :mod:`autograder.sandbox.levels`).
"""

from __future__ import annotations

import ctypes
import functools
import os
import signal
import sys
import sysconfig
import tempfile
from pathlib import Path
from typing import Any, Callable, Sequence

from autograder.sandbox import reach
from autograder.sandbox.levels import LEVELS
from autograder.sandbox.mounts import MS_NODEV, MS_NOEXEC, MS_NOSUID, MS_PRIVATE, MS_REC
from autograder.sandbox.syscalls import (CLONE_NEWIPC, CLONE_NEWNET, CLONE_NEWNS, CLONE_NEWPID, CLONE_NEWUSER,
                                       apply_seccomp)
from checks import arithmetic

# Imported now, not in the student process: after the uid switch the interpreter's own files may be
# unreadable (a pyenv under /root) where no mount namespace re-exposes them.
try:
    import landlock
    from landlock import FSAccess
except ImportError:  # the binding is missing: no Landlock layer
    landlock = None  # type: ignore[assignment]

SCRATCH_BYTES = 256 * 2**20  # all files in one submission's scratch folder together
SCRATCH_ENTRIES = 20_000  # files and folders in it (the fallback guard must be able to count them)

_PR_SET_DUMPABLE = 4
# --------------------------------------------------------------------------- namespaces


_PR_SET_PDEATHSIG = 1


def die_with_parent(signum: int = signal.SIGKILL, parent: int | None = None) -> None:
    """Have the kernel send ``signum`` when this process's parent dies, so nothing outlives its grader.

    The kernel forgets this setting on ``fork`` and whenever the process's credentials change
    (``setuid``, a new user namespace): call it again after each.  ``parent``: the parent expected;
    if it died before the call (this process was already handed to another), exit at once.
    """
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(signum), 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the pipes' end-of-file still stops an idle process
        return
    if parent is not None and os.getppid() != parent:
        os._exit(1)


def enter_namespaces(libc: Any, is_root: bool, tell: Callable[[int], None] | None = None) -> bool:
    """Unshare mount, network, IPC and PID namespaces (plus user when not root); True if it worked.

    On success the caller continues as PID 1 of a new PID namespace with a fresh ``/proc``
    (unless it is that already, the zygote forked it so, a fork happens here: the original process waits for it and
    exits with its status, after calling ``tell`` with the new process's pid as seen from outside, the one whose CPU
    time the judge then measures), and ``/`` is a private mount tree, so nothing mounted later leaks out.
    """
    uid, gid, parent = os.geteuid(), os.getegid(), os.getppid()
    init = os.getpid() == 1  # the zygote made it the init of a PID namespace of its own (zygote.fork_as_init)
    flags = (CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | (0 if init else CLONE_NEWPID)
             | (0 if is_root else CLONE_NEWUSER))
    if libc.unshare(flags) != 0:
        return False
    die_with_parent(parent=parent)  # a new user namespace is a change of credentials: armed again
    if not is_root:
        for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
            try:
                Path(f"/proc/self/{name}").write_text(text)
            except OSError:
                pass
    libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None)
    if not init:
        _fork_init(tell)
    libc.mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None)  # best effort (Docker masks)
    return True


def _fork_init(tell: Callable[[int], None] | None) -> None:
    """Continue in a child, the init of the PID namespace just unshared: this process waits for it and ends alike,
    after calling ``tell`` with its pid as seen from outside."""
    told_r, told_w = os.pipe()
    child = os.fork()
    if child:  # the original process: stay until the namespace's init ends, then end alike
        if tell is not None:
            tell(child)
        os.write(told_w, b".")  # only now may the child go on: the judge reads "measure" before anything it sends
        for fd in range(3, 1024):  # hold none of the pipes: the judge must see EOF when the child ends
            try:
                os.close(fd)
            except OSError:
                pass
        _, status = os.waitpid(child, 0)
        os._exit(os.waitstatus_to_exitcode(status) & 0xFF)
    os.close(told_w)
    os.read(told_r, 1)  # empty if the original process died first: then die_with_parent ends this one too
    os.close(told_r)


def cap_scratch(libc: Any, scratch: str, uid: int | None) -> None:
    """Replace the scratch folder by a tmpfs of :data:`SCRATCH_BYTES`, and ``/dev/shm`` by one of its own (POSIX
    semaphores, torch's shared tensors), inside our mount namespace: writable, and gone with the process."""
    owner = f",uid={uid},gid={uid}" if uid is not None else ""
    options = f"size={SCRATCH_BYTES},nr_inodes={SCRATCH_ENTRIES},mode=0700{owner}".encode()
    libc.mount(b"tmpfs", scratch.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, options)
    libc.mount(b"tmpfs", b"/dev/shm", b"tmpfs", MS_NOSUID | MS_NODEV, b"mode=1777,size=64m")


# --------------------------------------------------------------------------- Landlock and seccomp


def _interpreter_roots() -> set[str]:
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix}
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        paths.add(sysconfig.get_paths().get(key, "/usr"))
    return paths


#: Computed at import (as the grader): after the uid switch sysconfig's lazy imports may be unreadable.
_INTERPRETER_ROOTS = _interpreter_roots()


def interpreter_folders() -> list[str]:
    """The folders a student process reads Python and torch from (every rule below reads them)."""
    folders = set(_INTERPRETER_ROOTS)
    torch = sys.modules.get("torch")  # loaded by the zygote: its site-packages holds native libraries
    if torch is not None and getattr(torch, "__file__", None):
        folders.add(os.path.dirname(os.path.dirname(torch.__file__)))
    return sorted(folders)


def _readable_roots(submission: str) -> list[str]:
    # Not all of /proc: other processes' command lines would show (without a PID namespace).
    paths = {"/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/etc", f"/proc/{os.getpid()}", "/proc/cpuinfo",
             "/proc/meminfo", "/proc/stat", "/sys/devices/system/cpu", "/dev/urandom", "/dev/random", "/dev/zero",
             submission, *interpreter_folders()}
    return sorted(p for p in {os.path.realpath(p) for p in paths} | paths if os.path.exists(reach.alias(p)))


@functools.lru_cache(maxsize=64)
def read_rules(path: str, hidden: tuple[str, ...]) -> tuple[tuple[str, Any], ...]:
    """:func:`_read_rules` for reading, remembered: a process that runs ``loss_scaler.py`` needs a few thousand
    rules around torch's scaler sources, the same each time (the zygote computes them once, before forking)."""
    read = FSAccess.READ_FILE | FSAccess.READ_DIR | FSAccess.EXECUTE
    return tuple(dict.fromkeys(_read_rules(path, hidden, read)))


def remember_read_rules(hidden: Sequence[str]) -> None:
    """Compute, in the zygote, the rules its children will need around ``hidden`` (see :func:`read_rules`)."""
    if landlock is not None and hidden:
        for root in _readable_roots(""):
            read_rules(root, tuple(hidden))


def _read_rules(path: str, hidden: Sequence[str], read: Any) -> list[tuple[str, Any]]:
    """Landlock rules to read ``path`` and everything below it but the files of ``hidden``.

    Landlock only allows, so a folder that holds a hidden file is not allowed whole: it gets the right
    to be listed, and each entry in it its own rule (recursively, only along the way to a hidden file).
    """
    # a rule follows links: a linked folder (a venv's lib64) is its target
    return _resolved_rules(os.path.realpath(path), hidden, read)


def _resolved_rules(real: str, hidden: Sequence[str], read: Any, folder: bool | None = None) -> list[tuple[str, Any]]:
    """:func:`_read_rules` of a path with no link in it (``folder``: whether it is one, when the caller knows).

    An entry of such a folder that is no link has no link in it either: only links are resolved again.  (Resolving
    each of the few hundred entries of a site-packages on the way to torch's scaler took a twentieth of a second
    in every grading process.)
    """
    below = [h for h in hidden if h.startswith(real.rstrip("/") + "/")]
    if real in hidden:
        return []
    if folder is None:
        folder = os.path.isdir(reach.alias(real))
    if not below or not folder:
        return [(real, read if folder else FSAccess.READ_FILE)]
    rules: list[tuple[str, Any]] = [(real, FSAccess.READ_DIR)]
    with os.scandir(real) as found:
        entries = sorted(found, key=lambda entry: entry.name)
    for entry in entries:
        if entry.is_symlink():
            rules += _resolved_rules(os.path.realpath(entry.path), below, read)
        else:
            rules += _resolved_rules(entry.path, below, read, _is_folder(entry))
    return rules


def _is_folder(entry: os.DirEntry[str]) -> bool:
    """``os.path.isdir`` of an entry that is no link, without a system call where the listing says."""
    try:
        return entry.is_dir(follow_symlinks=False)
    except OSError:
        return False


def landlock_abi() -> int:
    """The kernel's Landlock ABI version, 0 where there is none (or no binding)."""
    if landlock is None:
        return 0
    try:
        ctypes.set_errno(0)  # the binding reads errno to detect failures: a stale one from earlier code reads as one
        return int(landlock.landlock_abi_version())
    except OSError:
        return 0


def apply_landlock(submission: str, scratch: str, hidden: Sequence[str] = ()) -> bool:
    """Restrict file access to reading the system, interpreter and submission, and writing scratch.

    The files of ``hidden`` (real paths) stay unreadable even where their folder is readable.  Never in a GPU
    process: CUDA does not start under Landlock (its built view seals it: :mod:`autograder.sandbox.view`).
    """
    abi = landlock_abi()
    if abi < 1:
        return False
    try:
        ruleset = landlock.Ruleset()
        for path, rules in dict.fromkeys(rule for root in _readable_roots(submission)
                                         for rule in read_rules(root, tuple(hidden))):
            ctypes.set_errno(0)
            ruleset.allow(reach.alias(path), rules=rules)
        ctypes.set_errno(0)
        ruleset.allow(scratch)  # every right, below scratch only
        ctypes.set_errno(0)
        null_rights = FSAccess.READ_FILE | FSAccess.WRITE_FILE
        if abi >= 3:
            null_rights |= FSAccess.TRUNCATE
        ruleset.allow("/dev/null", rules=null_rights)
        ctypes.set_errno(0)
        ruleset.apply()
        return True
    except Exception:  # noqa: BLE001 - no binding, kernel without Landlock, or disabled: a weaker level
        return False


# --------------------------------------------------------------------------- environment


def clean_environment(scratch: str) -> dict[str, str]:
    """The only environment variables a student process gets: built, never what is left of the grader's."""
    return {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": scratch, "TMPDIR": scratch, "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
            **arithmetic.PORTABLE}


def forget_command_line_and_environment(marker: str = "") -> None:
    """Erase this process's argument and environment blocks, what the kernel shows as ``/proc/<pid>/cmdline`` and
    ``/proc/<pid>/environ`` (the graded folder's name, the grader's variables), and ``sys.argv``.

    For the zygote, before it forks any student process: its children inherit the erased blocks.  The blocks'
    addresses are fields 48 to 51 of ``/proc/self/stat``; libc's ``environ`` points into the environment block,
    so every variable is first copied to the heap (``os.putenv``), where the zygote's own code still reads it.
    Copies on the heap remain (``os.environ``, libc's): :func:`confine` replaces ``os.environ`` by
    :func:`clean_environment`, and only a scan of the process's raw memory could find what is left
    (docs/security.md).  Does nothing where ``/proc`` cannot tell the addresses.
    """
    try:
        fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        arg_start, arg_end, env_start, env_end = (int(fields[number - 3]) for number in (48, 49, 50, 51))
    except (OSError, IndexError, ValueError):
        return
    if not 0 < arg_start <= arg_end <= env_start <= env_end:  # fields a kernel hides read as 0
        return
    for key, value in os.environ.items():
        os.putenv(key, value)
    ctypes.memset(arg_start, 0, arg_end - arg_start)
    shown = marker.encode()[: max(0, arg_end - arg_start - 1)]  # what ``ps`` shows instead: the marker alone
    ctypes.memmove(arg_start, shown, len(shown))
    ctypes.memset(env_start, 0, env_end - env_start)
    sys.argv[:] = [""]
    sys.orig_argv[:] = [sys.executable]


def confine(submission: str, scratch: str, namespaces: bool, gpu: bool = False, hidden: Sequence[str] = ()) -> str:
    """Apply Landlock and seccomp, build the environment and make the process non-dumpable; return the level.

    ``namespaces`` says whether :func:`enter_namespaces` worked for this process, with its built, read-only view
    (both earlier, before the uid switch).  A GPU process gets no Landlock (see :func:`apply_landlock`) and keeps
    every ``ioctl`` and ``AF_UNIX`` sockets (:data:`~autograder.sandbox.syscalls.GPU_SYSCALLS`): below ``namespaces`` it reaches ``seccomp``.
    Non-dumpable, its ``/proc/<pid>`` files are root's: another process of the same uid reads none of them.  Call
    after the uid switch, before student code.
    """
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux
        pass
    landlocked = False if gpu else apply_landlock(submission, scratch, hidden)
    filtered = apply_seccomp(gpu=gpu)
    os.environ.clear()
    os.environ.update(clean_environment(scratch))
    tempfile.tempdir = scratch  # what the parent cached (its /tmp) is not this process's: the built TMPDIR is
    if namespaces:
        return "namespaces"
    if filtered:
        return "landlock+seccomp" if landlocked else "seccomp"
    return "none"


def probe_level() -> str:
    """The level a student process would reach here (measured in a throwaway child, as root drops to nobody)."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        level = "none"
        try:
            os.close(read_fd)
            os.setsid()
            libc = ctypes.CDLL(None, use_errno=True)
            is_root = os.geteuid() == 0
            spaced = enter_namespaces(libc, is_root)  # on success we are the child; write_fd is still ours
            scratch = os.path.realpath(os.environ.get("TMPDIR") or "/tmp")
            if is_root:
                os.setgroups([])
                os.setgid(65534)
                os.setuid(65534)
            level = confine(scratch, scratch, spaced)
        except BaseException:  # noqa: BLE001 - whatever failed is a level not reached
            pass
        finally:
            try:
                os.write(write_fd, level.encode())
            finally:
                os._exit(0)
    os.close(write_fd)
    data = b""
    with os.fdopen(read_fd, "rb") as stream:
        data = stream.read()
    os.waitpid(pid, 0)
    text = data.decode(errors="replace").strip()
    return text if text in LEVELS else "none"


