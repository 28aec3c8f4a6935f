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
* **seccomp** (``pyseccomp`` over libseccomp; sets no-new-privs): no ``socket()`` at all (a GPU
  process keeps ``AF_UNIX`` for CUDA's MPS pipe), so no network and no abstract socket between two
  student processes; signals only to the process itself (``kill``/``tgkill``/``rt_*sigqueueinfo``
  with its own pid, no ``pidfd_*``); no ``execve``/``execveat`` (no other program), no
  ``ptrace``/``process_vm_*``/``kcmp``, ``mount``/``unshare``/``setns``/namespace flags of ``clone``,
  SysV IPC, POSIX message queues, ``keyctl``, ``bpf``, ``perf_event_open``, ``io_uring``,
  ``userfaultfd``, module loading.
* a **clean environment**: only the variables in :func:`clean_environment`.

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
import os
import signal
import socket
import sys
import sysconfig
from pathlib import Path
from typing import Any, Callable, Sequence

from autograder import settings

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

#: Syscalls a student process never needs; they fail with EPERM.
DENIED_SYSCALLS = (
    "ptrace", "process_vm_readv", "process_vm_writev", "mount", "umount2", "pivot_root", "chroot", "unshare",
    "setns", "shmget", "shmat", "shmctl", "shmdt", "msgget", "msgsnd", "msgrcv", "msgctl", "semget", "semop",
    "semtimedop", "semctl", "mq_open", "keyctl", "add_key", "request_key", "bpf", "perf_event_open",
    "io_uring_setup", "io_uring_enter", "io_uring_register", "userfaultfd", "init_module", "finit_module",
    "delete_module", "kexec_load", "kexec_file_load", "open_by_handle_at", "name_to_handle_at", "acct",
    "swapon", "swapoff", "reboot", "settimeofday", "clock_settime", "adjtimex", "fanotify_init",
    "move_mount", "open_tree", "fsopen", "fsmount", "fsconfig", "fspick", "mount_setattr",
    # No new program: a fresh interpreter would have torch's scaler kernels, which Task 1's processes lack.
    "execve", "execveat",
    # Nothing that reaches another process by pid (signals are allowed to the process itself below).
    "tkill", "pidfd_open", "pidfd_getfd", "pidfd_send_signal", "process_madvise", "kcmp",
)
#: Syscalls that send a signal to the pid in their first argument: allowed only with the process's own pid.
SIGNAL_SYSCALLS = ("kill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo")


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


def _readable_roots(submission: str) -> list[str]:
    # Not all of /proc: other processes' command lines would show (without a PID namespace).
    paths = {"/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/etc", f"/proc/{os.getpid()}", "/proc/cpuinfo",
             "/proc/meminfo", "/proc/stat", "/sys/devices/system/cpu", "/dev/urandom", "/dev/random", "/dev/zero",
             submission, *_INTERPRETER_ROOTS}
    torch = sys.modules.get("torch")  # loaded by the zygote: its site-packages holds native libraries
    if torch is not None and getattr(torch, "__file__", None):
        paths.add(os.path.dirname(os.path.dirname(torch.__file__)))
    return sorted(p for p in {os.path.realpath(p) for p in paths} | paths if os.path.exists(p))


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
        folder = os.path.isdir(real)
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
            ruleset.allow(path, rules=rules)
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


def apply_seccomp(unix_sockets: bool = False) -> bool:
    """Load the seccomp filter described in the module docstring (also sets no-new-privs).

    ``unix_sockets``: keep ``socket(AF_UNIX)`` (a GPU process: CUDA's MPS client); otherwise no socket at all.
    """
    if seccomp is None:
        return False
    try:
        rules = seccomp.SyscallFilter(seccomp.ALLOW)
        if unix_sockets:
            rules.add_rule(seccomp.ERRNO(errno.EACCES), "socket", seccomp.Arg(0, seccomp.NE, socket.AF_UNIX))
        else:
            rules.add_rule(seccomp.ERRNO(errno.EACCES), "socket")
        own = os.getpid()  # in a PID namespace, 1: the filter is loaded after entering it
        for name in SIGNAL_SYSCALLS:  # a signal is a byte too: none reaches another process
            rules.add_rule(seccomp.ERRNO(errno.EPERM), name, seccomp.Arg(0, seccomp.NE, own))
        for name in DENIED_SYSCALLS:
            try:
                rules.add_rule(seccomp.ERRNO(errno.EPERM), name)
            except (OSError, ValueError, RuntimeError):
                pass  # a syscall this architecture or libseccomp does not know
        rules.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")  # flags are behind a pointer: libc falls back to clone
        for flag in _NAMESPACE_FLAGS:
            rules.add_rule(seccomp.ERRNO(errno.EPERM), "clone", seccomp.Arg(0, seccomp.MASKED_EQ, flag, flag))
        rules.load()
        return True
    except Exception:  # noqa: BLE001 - no libseccomp / binding, or seccomp unavailable: a weaker level
        return False


# --------------------------------------------------------------------------- environment


def clean_environment(scratch: str) -> dict[str, str]:
    """The only environment variables a student process gets."""
    return {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": scratch, "TMPDIR": scratch, "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def confine(submission: str, scratch: str, namespaces: bool, gpu: bool = False, hidden: Sequence[str] = ()) -> str:
    """Apply Landlock and seccomp and clean the environment; return the level reached.

    ``namespaces`` says whether :func:`enter_namespaces` worked for this process, with its built, read-only view
    (both earlier, before the uid switch).  A GPU process gets no Landlock (see :func:`apply_landlock`) and keeps
    ``AF_UNIX`` sockets (CUDA's MPS client): below ``namespaces`` it reaches ``seccomp``.  Call after the uid
    switch, before student code.
    """
    landlocked = False if gpu else apply_landlock(submission, scratch, hidden)
    filtered = apply_seccomp(unix_sockets=gpu)
    os.environ.clear()
    os.environ.update(clean_environment(scratch))
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
