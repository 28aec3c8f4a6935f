"""``mount(2)`` and ``mount_setattr(2)`` in a student process's private mount namespace: the flags, and the read-only
remount of everything it sees (:func:`read_only_rest`).

:mod:`autograder.sandbox.view` builds the view from an allow-list; this makes all of it read-only, without
access-time updates where the kernel allows, so that no process writes or marks anything a later one could read.
"""

from __future__ import annotations

import ctypes
from pathlib import Path
from typing import Any

#: mount(2)'s flags, for the namespaces here and the zygote's covers.
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 0x1, 0x2, 0x4, 0x8, 0x20


MS_BIND, MS_REC, MS_PRIVATE = 0x1000, 0x4000, 0x40000


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
