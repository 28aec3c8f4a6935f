"""Layered confinement of a student process, strongest available first, and the level it reached.

Graders run in very different places: a root shell on a lab machine (namespaces work), a
Gradescope container (root, but Docker's default capabilities: no ``CAP_SYS_ADMIN``, so
``unshare()`` fails), a TA's laptop as an ordinary user.  :func:`confine` applies, inside a
student process and before any student code is imported, every layer the platform allows:

* **namespaces** (``unshare``): mount, network, IPC and PID namespaces (and a user
  namespace when not root).  The process then sees no network, no other process, no
  SysV IPC object of anyone else, and none of its IPC objects or daemons outlive it (the
  PID namespace's init is the student process: when it dies the kernel kills the rest).
  Its root is built from an allow-list (:mod:`autograder.engine.view`), read-only
  (:func:`read_only_rest`) but its scratch folder, a size-capped tmpfs (:data:`SCRATCH_BYTES`).
* **Landlock** (unprivileged; allowed by Docker's default seccomp profile): reads only
  from the interpreter, the system folders, the submission and the scratch folder;
  writes only to the scratch folder (and ``/dev/null``).  Binding: ``landlock`` (PyPI).
* **seccomp** (``pyseccomp`` over libseccomp; sets no-new-privs): an allow-list, measured
  (:data:`ALLOWED_SYSCALLS`); every other call is refused.  Among what is not on it: ``socket()``
  (so no network and no abstract socket between two student processes), ``execve`` (no other
  program: a fresh interpreter would have torch's scaler kernels), ``ptrace``, ``mount``, SysV IPC,
  ``flock``, the ``chmod`` and ``chown`` families (a folder opened to a sibling).  ``fcntl``,
  ``ioctl`` and ``prctl`` only with the commands listed (no lock, no ``F_SETOWN``/``F_SETSIG``/
  ``O_ASYNC``), signals only to the process itself, ``clone`` without namespace flags.  A GPU
  process keeps every ``ioctl`` and ``AF_UNIX`` sockets (CUDA), :data:`GPU_SYSCALLS`.
* a **built environment**: only the variables in :func:`clean_environment`; the zygote erased the
  grader's command line and environment before forking (:func:`forget_command_line_and_environment`),
  and the process is non-dumpable.

A GPU student process gets no Landlock (CUDA does not start under it): its built view is its file seal, so it is
sealed only at ``namespaces``.

The level reached is one of :data:`LEVELS`, weakest first: ``"none"``, ``"seccomp"``,
``"landlock+seccomp"``, ``"namespaces"``.  :func:`probe_level` measures it without
grading anything (a throwaway child process), so a run can refuse to start below
``--min-isolation`` / ``$AMP_MIN_ISOLATION``.

This module needs only the standard library at import; the bindings load lazily.

One file past 400 lines: every layer a student process gets and the level they add up to, side by side, so
that a level's name cannot claim a layer the code does not apply.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import operator
import os
import signal
import socket
import sys
import sysconfig
import tempfile
from pathlib import Path
from typing import Any, Callable, Sequence

from autograder import settings
from autograder.engine import reach
from checks import arithmetic

# Imported now, not in the student process: after the uid switch the interpreter's own files may be
# unreadable (a pyenv under /root) where no mount namespace re-exposes them.
try:
    import landlock
    from landlock import FSAccess
except ImportError:  # the binding is missing: no Landlock layer
    landlock = None  # type: ignore[assignment]
try:
    import pyseccomp as seccomp
except (ImportError, OSError):  # the binding or libseccomp.so.2 is missing: no seccomp layer
    seccomp = None  # type: ignore[assignment]

LEVELS = ("none", "seccomp", "landlock+seccomp", "namespaces")
SCRATCH_BYTES = 256 * 2**20  # all files in one submission's scratch folder together
SCRATCH_ENTRIES = 20_000  # files and folders in it (the fallback guard must be able to count them)

_CLONE_NEWNS, _CLONE_NEWNET, _CLONE_NEWUSER = 0x00020000, 0x40000000, 0x10000000
_CLONE_NEWIPC, _CLONE_NEWPID, _CLONE_NEWUTS, _CLONE_NEWCGROUP = 0x08000000, 0x20000000, 0x04000000, 0x02000000
_NAMESPACE_FLAGS = (_CLONE_NEWNS, _CLONE_NEWNET, _CLONE_NEWUSER, _CLONE_NEWIPC, _CLONE_NEWPID, _CLONE_NEWUTS,
                    _CLONE_NEWCGROUP)
#: mount(2)'s flags, for the namespaces here and the zygote's covers.
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 0x1, 0x2, 0x4, 0x8, 0x20
MS_BIND, MS_REC, MS_PRIVATE = 0x1000, 0x4000, 0x40000

#: The system calls a student process may make: the filter refuses every other one (EPERM; ENOSYS for
#: :data:`FALLBACK_SYSCALLS`); the tables after this one allow a few more, each only with the arguments they name.
#: Measured: every call a student process made after its filter was loaded, traced with ``strace -ff``
#: (``tests/syscall_census.py`` reads the traces), over a grading of the catalogue's submissions (tests/catalogue:
#: bugs and correct variants), the skeleton, the solution and examples/, and over the honest habits of
#: ``tests/test_allow_list.py::HABITS`` (threads, sleeps, files in scratch, torch.save, tracebacks...), and
#: ``grade-gpu --dry`` (a GPU student process's path on the CPU: its preflight asks for ``getgroups``).  Beyond
#: the measured: ``rt_sigreturn`` and ``restart_syscall`` (the kernel's, after a signal handler or an interrupted
#: sleep), ``getegid`` beside ``geteuid``, ``sched_yield`` (OpenMP's threads, should a student ask torch for
#: more), the ``*at`` forms aarch64 has instead of x86_64's older calls, and what older libcs call for the same
#: operations.  A name one architecture lacks is skipped there.
ALLOWED_SYSCALLS = (
    # files (Landlock and the mounts decide which)
    "read", "write", "writev", "openat", "close", "lseek", "newfstatat", "getdents64", "readlink", "readlinkat",
    "access", "faccessat", "getcwd", "mkdir", "mkdirat", "rmdir", "rename", "renameat", "renameat2", "unlink",
    "unlinkat", "ftruncate", "fsync", "sendfile", "pipe2", "dup2", "dup3", "close_range",
    # memory, threads (``clone``: below, without namespace flags), time, randomness
    "brk", "mmap", "munmap", "mremap", "mprotect", "madvise", "futex", "set_robust_list", "rseq", "gettid", "exit",
    "exit_group", "wait4", "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "restart_syscall", "clock_gettime",
    "clock_nanosleep", "getrandom",
    # what the process is
    "getpid", "getppid", "getuid", "geteuid", "getgid", "getegid", "getgroups", "uname", "times", "getrusage",
    "sched_yield",
    # the same operations as older libcs call them (glibc before 2.33 stats with these; 2.31 sleeps with nanosleep)
    "stat", "fstat", "lstat", "open", "getdents", "nanosleep",
)
#: Refused with ENOSYS rather than EPERM: libc then falls back to an older call (``clone3``'s flags are behind a
#: pointer no filter can read: glibc falls back to ``clone``, whose flags it can; ``faccessat2``: ``faccessat``).
FALLBACK_SYSCALLS = ("clone3", "faccessat2")
#: Calls allowed only about the process itself: a first argument of 0 (itself) or its own pid, never another's
#: (``prlimit64`` could lower a classmate's limits; either would tell which pids exist).
OWN_PID_SYSCALLS = ("prlimit64", "sched_getaffinity")
#: Syscalls that send a signal to the pid in their first argument: allowed only with the process's own pid.
SIGNAL_SYSCALLS = ("kill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo")
#: fcntl(2) commands allowed (the same numbers on x86_64 and aarch64): descriptors' flags only.  No lock
#: (``F_SETLK``, ``F_OFD_*``: a lock's offset is a number another process reads), no owner or signal
#: (``F_SETOWN``, ``F_SETSIG``: the kernel would signal another pid), no lease or notification; ``F_SETFL`` only
#: without ``O_ASYNC``.
F_DUPFD, F_GETFD, F_SETFD, F_GETFL, F_SETFL, F_DUPFD_CLOEXEC = 0, 1, 2, 3, 4, 1030
FCNTL_COMMANDS = (F_DUPFD, F_GETFD, F_SETFD, F_GETFL, F_DUPFD_CLOEXEC)
O_ASYNC = 0o20000
#: ioctl(2) commands allowed in a CPU process, measured: ``TCGETS`` (``open()`` asks whether a file is a
#: terminal), ``FIOCLEX``/``FIONCLEX`` (``os.set_inheritable``), ``FIONBIO`` (``os.set_blocking``), ``TIOCGWINSZ``
#: (``shutil.get_terminal_size``); and ``FIONREAD`` (bytes waiting on its own descriptor).  A GPU process keeps
#: every ioctl: CUDA drives ``/dev/nvidia*`` through them.
IOCTL_COMMANDS = (0x5401, 0x5451, 0x5450, 0x5421, 0x541B, 0x5413)
#: prctl(2) commands allowed: ``PR_CAPBSET_READ`` (measured: libcap, loaded when ``torch._dynamo`` looks up the
#: user) and a thread's name (``PR_SET_NAME``, ``PR_GET_NAME``: torch's pools, newer Pythons).  Not
#: ``PR_SET_DUMPABLE``: :func:`confine` makes the process non-dumpable, for good.
PRCTL_COMMANDS = (23, 15, 16)
_PR_SET_DUMPABLE = 4
#: What a GPU process adds (not measured: no GPU where the list was measured; ``tests/syscall_census.py``
#: measures it on one): every ioctl and ``socket(AF_UNIX)`` with its calls (CUDA's MPS client), and the calls
#: CUDA's driver makes for its threads, events and memory.
GPU_SYSCALLS = (
    "ioctl", "connect", "sendmsg", "recvmsg", "sendto", "recvfrom", "getsockopt", "setsockopt", "getsockname",
    "getpeername", "shutdown", "poll", "ppoll", "select", "pselect6", "epoll_create1", "epoll_ctl", "epoll_wait",
    "epoll_pwait", "eventfd2", "memfd_create", "get_mempolicy", "set_mempolicy", "mbind", "sysinfo",
    "statx", "pread64", "pwrite64",
)


def level_rank(level: str) -> int:
    """Position of ``level`` in :data:`LEVELS` (higher is stronger)."""
    return LEVELS.index(level)


def parse_level(text: str) -> str:
    """``text`` if it names a level; raises ValueError with the valid names otherwise."""
    if text not in LEVELS:
        raise ValueError(f"unknown isolation level {text!r}; use one of: {', '.join(LEVELS)}")
    return text


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
    (a fork happens here: the original process waits for it and exits with its status, after
    calling ``tell`` with the new process's pid as seen from outside, the one whose CPU time the
    judge then measures), and ``/`` is a private mount tree, so nothing mounted later leaks out.
    """
    uid, gid, parent = os.geteuid(), os.getegid(), os.getppid()
    flags = _CLONE_NEWNS | _CLONE_NEWNET | _CLONE_NEWIPC | _CLONE_NEWPID | (0 if is_root else _CLONE_NEWUSER)
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
    libc.mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None)  # best effort (Docker masks)
    return True


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
    process: CUDA does not start under Landlock (its built view seals it: :mod:`autograder.engine.view`).
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


class _MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64), ("propagation", ctypes.c_uint64),
                ("userns_fd", ctypes.c_uint64)]


_MOUNT_SETATTR = 442  # mount_setattr(2), Linux 5.12: one number on every architecture (the unified table)
_AT_FDCWD, _AT_RECURSIVE = -100, 0x8000
#: mount_setattr's attributes; ``_MOUNT_ATTR_ATIME`` is the mask of the access-time modes.
_MOUNT_ATTR_RDONLY, _MOUNT_ATTR_NOSUID, _MOUNT_ATTR_NOATIME, _MOUNT_ATTR_ATIME = 0x1, 0x2, 0x10, 0x70


def _set_attributes(libc: Any, path: str, set_: int, clear: int, recursive: bool = True) -> bool:
    attr = _MountAttr(set_, clear, 0, 0)
    flags = _AT_RECURSIVE if recursive else 0
    # syscall() is variadic: each argument typed, so the 64-bit size reaches the kernel whole on every ABI.
    return libc.syscall(ctypes.c_long(_MOUNT_SETATTR), ctypes.c_int(_AT_FDCWD), ctypes.c_char_p(path.encode()),
                        ctypes.c_uint(flags), ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr))) == 0


def read_only_rest(libc: Any) -> bool:
    """In a student process's private mount namespace: every mount read-only and ``nosuid``, and without access-time
    updates where the kernel allows (a mount locked by a user namespace keeps its own), but ``/proc``; True if every
    mount is read-only.

    Nothing in the view is then writable but what the caller mounts afterwards (the scratch tmpfs, ``/dev/shm``) and
    the process's own ``/proc/<pid>`` files (where cuInit names its threads); no read leaves an access time another
    process could see.  Device nodes stay writable on a read-only mount (it refuses writes to files and folders).
    """
    if not (_set_attributes(libc, "/", _MOUNT_ATTR_RDONLY | _MOUNT_ATTR_NOSUID | _MOUNT_ATTR_NOATIME, _MOUNT_ATTR_ATIME)
            or _set_attributes(libc, "/", _MOUNT_ATTR_RDONLY | _MOUNT_ATTR_NOSUID, 0)):
        return _remount_each_read_only(libc, {"/proc"})
    _set_attributes(libc, "/proc", 0, _MOUNT_ATTR_RDONLY, recursive=False)  # best effort: read-only is the safe failure
    return True


#: Per-mount flags a read-only remount must keep (dropping one that the mount is locked with fails).
_KEPT_FLAGS = {"nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": MS_NOEXEC, "noatime": 0x400,
               "nodiratime": 0x800, "relatime": 0x200000}


def _remount_each_read_only(libc: Any, skip: set[str]) -> bool:
    """:func:`read_only_rest` where ``mount_setattr`` is missing (Linux before 5.12) or refused (an older
    container seccomp profile): each mount of ``/proc/self/mountinfo`` but those at ``skip`` remounted read-only
    with its own flags; True only if every one was."""
    import re

    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return False
    for line in lines:
        fields = line.split()
        point = re.sub(r"\\([0-7]{3})", lambda found: chr(int(found.group(1), 8)), fields[4])  # \040: a space
        if point in skip:
            continue
        flags = MS_REMOUNT | MS_BIND | MS_RDONLY
        for option in fields[5].split(","):
            flags |= _KEPT_FLAGS.get(option, 0)
        if libc.mount(None, point.encode(), None, ctypes.c_ulong(flags), None) != 0:
            return False
    return True


def _number(name: str) -> int | None:
    """``name``'s system call number on this architecture (through libseccomp), None where it has none."""
    number = seccomp.resolve_syscall(seccomp.Arch.NATIVE, name)
    return number if number >= 0 else None


def apply_seccomp(gpu: bool = False) -> bool:
    """Load the allow-list filter described in the module docstring (also sets no-new-privs).

    ``gpu``: a GPU process keeps every ``ioctl`` and ``socket(AF_UNIX)`` (:data:`GPU_SYSCALLS`); otherwise no
    socket at all.  Every call not allowed is refused, never killed: a refusal is an ``OSError`` the feedback names.
    """
    if seccomp is None:
        return False
    try:
        rules = seccomp.SyscallFilter(seccomp.ERRNO(errno.EPERM))
        allow, arg = seccomp.ALLOW, seccomp.Arg
        for name in ALLOWED_SYSCALLS + (GPU_SYSCALLS if gpu else ()):
            if (number := _number(name)) is not None:
                rules.add_rule(allow, number)
        for name in FALLBACK_SYSCALLS:
            if (number := _number(name)) is not None:
                rules.add_rule(seccomp.ERRNO(errno.ENOSYS), number)
        if gpu:
            rules.add_rule(allow, "socket", arg(0, seccomp.EQ, socket.AF_UNIX))
            rules.add_rule(seccomp.ERRNO(errno.EACCES), "socket", arg(0, seccomp.NE, socket.AF_UNIX))
        else:
            rules.add_rule(seccomp.ERRNO(errno.EACCES), "socket")  # a socket's refusal, as a firewall's
            for command in IOCTL_COMMANDS:
                rules.add_rule(allow, "ioctl", arg(1, seccomp.EQ, command))
        own = os.getpid()  # in a PID namespace, 1: the filter is loaded after entering it
        for name in SIGNAL_SYSCALLS:  # a signal is a byte too: none reaches another process
            rules.add_rule(allow, name, arg(0, seccomp.EQ, own))
        for name in OWN_PID_SYSCALLS:
            for pid in {0, own}:
                rules.add_rule(allow, name, arg(0, seccomp.EQ, pid))
        for command in FCNTL_COMMANDS:
            rules.add_rule(allow, "fcntl", arg(1, seccomp.EQ, command))
        rules.add_rule(allow, "fcntl", arg(1, seccomp.EQ, F_SETFL), arg(2, seccomp.MASKED_EQ, O_ASYNC, 0))
        for command in PRCTL_COMMANDS:
            rules.add_rule(allow, "prctl", arg(0, seccomp.EQ, command))
        namespaces = functools.reduce(operator.or_, _NAMESPACE_FLAGS)  # no new namespace: threads and forks only
        rules.add_rule(allow, "clone", arg(0, seccomp.MASKED_EQ, namespaces, 0))
        rules.load()
        return True
    except Exception:  # noqa: BLE001 - no libseccomp / binding, or seccomp unavailable: a weaker level
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
    every ``ioctl`` and ``AF_UNIX`` sockets (:data:`GPU_SYSCALLS`): below ``namespaces`` it reaches ``seccomp``.
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


#: The weakest level at which the OS itself keeps every student process sealed from every other one (no file,
#: socket, IPC object or signal passes between them) and the grader's files unreadable, whatever the code does
#: in its own process (tests/test_seal.py measures it).  The default minimum: below it a run is refused unless
#: the operator asks for a lower level by name.
SEALED = "landlock+seccomp"
#: What a machine lacks to reach the next level up, for the refusal's one line.
_LACKS = {"none": "libseccomp and Landlock", "seccomp": "Landlock (Linux 5.13 or newer, enabled)",
          "landlock+seccomp": "namespaces (CAP_SYS_ADMIN, or unprivileged user namespaces)"}
#: What a machine lacks for a sealed GPU student process, at any level below namespaces.
_GPU_LACKS = ("namespaces with read-only mounts (root with CAP_SYS_ADMIN, Linux 5.12 or newer): a GPU student "
              "process gets no Landlock, since CUDA does not start under it")


def required_level(cli_value: str | None = None) -> str:
    """The minimum level asked for (the CLI's value first, then ``$AMP_MIN_ISOLATION``), else :data:`SEALED`."""
    value = cli_value or settings.min_isolation()
    return parse_level(value) if value else SEALED


def _lacks(reached: str, gpu: bool) -> str:
    return _GPU_LACKS if gpu and level_rank(reached) < level_rank("namespaces") else _LACKS[reached]


def refusal(reached: str, required: str, gpu: bool = False) -> str | None:
    """The one-line message refusing to grade when ``reached`` is below ``required``; None when it is enough.
    ``gpu``: ``reached`` is a GPU student process's level (see :func:`confine`)."""
    if level_rank(reached) >= level_rank(required):
        return None
    sealed = (" (where each student process is sealed from the others and from the grader's files)"
              if required == SEALED else "")
    where = ("Run it as root with CAP_SYS_ADMIN (not in a container with Docker's default capabilities),"
             if gpu else "Run as root, or in a container with Docker's default capabilities,")
    return (f"Refusing to grade: {'GPU ' if gpu else ''}student code would run at isolation level {reached!r} here, "
            f"below the required {required!r}{sealed}: this machine lacks {_lacks(reached, gpu)}. {where} or pass "
            f"--min-isolation {reached} (${settings.MIN_ISOLATION.env}) knowingly.")


def unsealed_warning(reached: str, gpu: bool = False) -> str | None:
    """The warning for a run allowed below :data:`SEALED` by name (for a ``gpu`` process: below ``namespaces``);
    None at or above it."""
    if level_rank(reached) >= level_rank("namespaces" if gpu else SEALED):
        return None
    return (f"WARNING: {'GPU ' if gpu else ''}student code runs at isolation level {reached!r}, below "
            f"{'the sealed namespaces' if gpu else repr(SEALED)}, because --min-isolation / "
            f"${settings.MIN_ISOLATION.env} allowed it: this machine lacks {_lacks(reached, gpu)}, so one student's "
            f"processes may pass data to another's and read files the grader's user can read.")
