"""A student process's file system view at the namespaces level: built from an allow-list, nothing else in it.

In its private mount namespace the process gets a new root, an empty tmpfs into which only the system
(:data:`SYSTEM`, :data:`DEVICES`), the interpreter (its prefixes, torch's site-packages, the public checks), its
staged submission and what a GPU process needs (``DeviceAccess``) are bind-mounted, each at its own path, with the
links on the way recreated; then ``pivot_root``, and the old root is detached (``chroot`` where the grader itself
runs in a chroot, whose root pivot_root refuses).  Whatever path the process learns,
nothing else exists for it (``ENOENT``); a folder on the way to an allowed path holds only that way.  The one
deny-list is within the allow-list: the grader's own files where they lie inside an allowed folder (a pip-installed
package in site-packages).  What it holds and why: docs/security.md, *The built view*.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import stat
import sys
from typing import Any, Iterable, Sequence

import torch

import checks
from autograder.sandbox import mounts

SYSTEM = ("/usr", "/etc", "/lib", "/lib64", "/lib32", "/libx32", "/bin", "/sbin", "/proc", "/sys")
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")
#: What a process reaches through ``/dev/fd`` and ``/dev/std*`` (links into its own ``/proc``).
DEVICE_LINKS = (("/dev/fd", "/proc/self/fd"), ("/dev/stdin", "/proc/self/fd/0"), ("/dev/stdout", "/proc/self/fd/1"),
                ("/dev/stderr", "/proc/self/fd/2"))
#: pivot_root(2) has no libc wrapper; its number by architecture.
_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "riscv64": 41, "ppc64le": 203, "s390x": 217}
_MNT_DETACH = 2
_TMPFS_FLAGS = mounts.MS_NOSUID | mounts.MS_NODEV


def within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def resolve(paths: Iterable[str]) -> tuple[list[tuple[str, str]], list[str]]:
    """(each link on the way to ``paths``, with its text; the real paths, none inside another) of the paths that
    exist.  A path with a link in it is placed as the link plus the link's target."""
    links: dict[str, str] = {}
    real: set[str] = set()
    for path in paths:
        path = os.path.normpath(os.path.abspath(path))
        for _ in range(40):  # the kernel's own bound on links followed
            walked, parts = "/", path.split("/")[1:]
            for index, part in enumerate(parts):
                walked = os.path.join(walked, part)
                if os.path.islink(walked):
                    text = links.setdefault(walked, os.readlink(walked))
                    path = os.path.normpath(os.path.join(os.path.dirname(walked), text, *parts[index + 1:]))
                    break
            else:
                break
        if path != "/" and os.path.exists(path):
            real.add(path)
    return sorted(links.items()), sorted(p for p in real if not any(within(p, q) and p != q for q in real))


#: The part every student process shares: the system, the interpreter's folders, torch's site-packages, the checks.
STATIC = (*SYSTEM, *DEVICES, sys.prefix, sys.base_prefix, sys.exec_prefix,
          os.path.dirname(os.path.dirname(torch.__file__)), os.path.dirname(checks.__file__))


def build(libc: Any, allowed: Sequence[str], scratch: str, grader: Sequence[str]) -> bool:
    """Make the view of ``allowed`` (with :data:`STATIC`) this process's root; True if it did.

    ``scratch``: its path exists, empty, as does ``/dev/shm`` (the caller mounts the process's tmpfs there).
    ``grader``: the grader's folders, covered where they lie strictly inside an allowed folder (the reference
    solution, graded as the machine's check, is an allowed folder itself).  On False the process may be left in
    its old root.
    """
    links, binds = resolve([*STATIC, *allowed])
    try:
        return _pivot(libc, links, binds, scratch, grader)
    except OSError:  # a folder or link that cannot be made: not sealed, which the level reached says
        return False


def _pivot(libc: Any, links: list[tuple[str, str]], binds: list[str], scratch: str, grader: Sequence[str]) -> bool:
    new = scratch  # the new root's tmpfs is mounted over the scratch folder (ours alone in this namespace)
    os.umask(0o022)
    if libc.mount(b"tmpfs", new.encode(), b"tmpfs", _TMPFS_FLAGS, b"mode=0755,size=1m") != 0:
        return False
    for path in binds:
        target = new + path
        if os.path.isdir(path):
            os.makedirs(target, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            open(target, "a").close()
        if libc.mount(path.encode(), target.encode(), None, mounts.MS_BIND | mounts.MS_REC, None) != 0:
            return False
    for link, text in [*links, *DEVICE_LINKS]:
        if not os.path.lexists(new + link):
            os.makedirs(os.path.dirname(new + link), exist_ok=True)
            os.symlink(text, new + link)
    for folder in (scratch, "/dev/shm"):
        os.makedirs(new + folder, exist_ok=True)
    pivot = _PIVOT_ROOT.get(platform.machine())
    os.chdir(new)
    if pivot is not None and libc.syscall(pivot, b".", b".") == 0:
        if libc.umount2(b".", _MNT_DETACH) != 0:
            return False
    elif not _chroot_instead(libc):
        return False
    os.chdir("/")
    for folder in grader:  # strictly inside an allowed folder (never one the process was given)
        if any(within(folder, bound) and folder != bound for bound in binds) and os.path.isdir(folder):
            libc.mount(b"tmpfs", folder.encode(), b"tmpfs", _TMPFS_FLAGS, b"mode=0755,size=4k")
    return True


def _chroot_instead(libc: Any) -> bool:
    """In a chroot (its root is no mount point, so pivot_root(2) refuses with EINVAL), chroot(2) into the view.

    As sealed as pivot_root for a student process: the old tree stays in this mount namespace, but no path leads
    to it from the new root, no open folder does either (refused if one is open: its ``openat`` would), the
    process loses CAP_SYS_CHROOT with its uid, and the seccomp allow-list has no chroot, mount, setns or unshare.
    """
    if ctypes.get_errno() != errno.EINVAL or libc.chroot(b".") != 0:
        return False
    os.chdir("/")
    for fd in os.listdir("/proc/self/fd"):  # the fresh /proc of this PID namespace, inside the view
        try:
            if stat.S_ISDIR(os.fstat(int(fd)).st_mode):
                return False
        except OSError:  # the listing's own descriptor, closed by now
            pass
    return True
