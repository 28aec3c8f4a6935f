"""A student process's seccomp allow-list: the system calls it may make, the commands and arguments a few more may
take, and the filter that refuses every other one (:func:`apply_seccomp`, a layer of
:mod:`autograder.sandbox.confine`; docs/security.md says how the list was measured).
"""

from __future__ import annotations

import errno
import functools
import operator
import os
import socket

# Imported now, not in the student process: after the uid switch the interpreter's own files may be
# unreadable (a pyenv under /root) where no mount namespace re-exposes them.
try:
    import pyseccomp as seccomp
except (ImportError, OSError):  # the binding or libseccomp.so.2 is missing: no seccomp layer
    seccomp = None  # type: ignore[assignment]

CLONE_NEWNS, CLONE_NEWNET, CLONE_NEWUSER = 0x00020000, 0x40000000, 0x10000000


CLONE_NEWIPC, CLONE_NEWPID, CLONE_NEWUTS, CLONE_NEWCGROUP = 0x08000000, 0x20000000, 0x04000000, 0x02000000


NAMESPACE_FLAGS = (CLONE_NEWNS, CLONE_NEWNET, CLONE_NEWUSER, CLONE_NEWIPC, CLONE_NEWPID, CLONE_NEWUTS,
                    CLONE_NEWCGROUP)


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


#: What a GPU process adds (not measured: no GPU where the list was measured; ``tests/syscall_census.py``
#: measures it on one): every ioctl and ``socket(AF_UNIX)`` with its calls (CUDA's MPS client), and the calls
#: CUDA's driver makes for its threads, events and memory.
GPU_SYSCALLS = (
    "ioctl", "connect", "sendmsg", "recvmsg", "sendto", "recvfrom", "getsockopt", "setsockopt", "getsockname",
    "getpeername", "shutdown", "poll", "ppoll", "select", "pselect6", "epoll_create1", "epoll_ctl", "epoll_wait",
    "epoll_pwait", "eventfd2", "memfd_create", "get_mempolicy", "set_mempolicy", "mbind", "sysinfo",
    "statx", "pread64", "pwrite64",
)


def _number(name: str) -> int | None:
    """``name``'s system call number on this architecture (through libseccomp), None where it has none."""
    number = seccomp.resolve_syscall(seccomp.Arch.NATIVE, name)
    return number if number >= 0 else None


def apply_seccomp(gpu: bool = False) -> bool:
    """Load the allow-list filter (:mod:`autograder.sandbox.confine` says what it refuses; also sets no-new-privs).

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
        namespaces = functools.reduce(operator.or_, NAMESPACE_FLAGS)  # no new namespace: threads and forks only
        rules.add_rule(allow, "clone", arg(0, seccomp.MASKED_EQ, namespaces, 0))
        rules.load()
        return True
    except Exception:  # noqa: BLE001 - no libseccomp / binding, or seccomp unavailable: a weaker level
        return False
