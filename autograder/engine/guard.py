"""The audit hook of a student process: a fallback for the OS layers, where the machine lacks them.

No grade rests on anything inside the student process: the judge recomputes every effect, and
:mod:`checks.student.absence` takes torch's scaler out of the processes that run ``loss_scaler.py``.
What remains worth refusing there is what would leak, escape or undo that absence, and the OS
layers (:mod:`autograder.engine.confine`: namespaces, Landlock, seccomp) refuse it first where
the kernel allows them.  This PEP 578 hook, armed after the sandbox has dropped privileges and
before the first student line (audit hooks cannot be removed), refuses the same at the Python
level, for machines where those layers are missing (isolation levels ``seccomp`` and ``none``):

* ``ctypes`` (raw memory could rewrite torch's dispatcher and bring the real scaler kernels back);
* subprocesses, ``exec*``, ``posix_spawn`` and ``fork`` (a fresh interpreter has a working scaler);
* sockets (the network);
* opening files outside the submission, the scratch folder and the interpreter's own folders
  (the grader's hidden tests and other submissions), torch's scaler sources in Task 1's processes
  (:func:`checks.student.absence.scaler_sources`), and writing anywhere but scratch.

A refused call raises :class:`Refused`, whose message names the call; the scenario then fails
with that message like any other exception of the submission.  What this cannot stop (native
code torch itself runs, such as a C++ file read) is the OS layers' job; docs/security.md says which
level stops what.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import torch

from checks.words import english


class Refused(PermissionError):
    """A call the grader does not allow in a student process."""


#: Audit events refused outright (exact names), and by prefix.
REFUSED_EVENTS = frozenset({
    "subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty", "pty.spawn",
    "os.kill", "os.killpg", "sys.addaudithook", "sys.remote_exec",
})
REFUSED_PREFIXES = ("ctypes.", "socket.", "_posixsubprocess.")
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC


def _under(path: str, roots: tuple[str, ...]) -> bool:
    return any(path == root or path.startswith(root.rstrip("/") + "/") for root in roots)


def install(submission: str, scratch: str, extra_read: tuple[str, ...] = (), hidden: tuple[str, ...] = ()) -> None:
    """Arm the audit hook for the rest of this process; the files of ``hidden`` (real paths) are never opened."""
    readable = tuple(sorted({os.path.realpath(p) for p in (
        submission, scratch, sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(torch.__file__),
        "/proc/self", "/sys", "/dev", "/usr", "/lib", "/lib64", "/etc", *extra_read)}))
    writable = (os.path.realpath(scratch), "/dev/null")

    def refuse(key: str, **fields: str) -> None:
        raise Refused(english(key, **fields))  # the judge puts it in the feedback's language

    def check_open(args: tuple[Any, ...]) -> None:
        path, mode, flags = (tuple(args) + (None, None, None))[:3]
        if isinstance(path, int) or path is None:
            return  # an already open descriptor
        text = os.fsdecode(path)
        real = os.path.realpath(text)
        writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
            isinstance(flags, int) and bool(flags & _WRITE_FLAGS))
        if writing and not _under(real, writable):
            refuse("refused.write", path=repr(text))
        if not writing and (not _under(real, readable) or real in hidden):
            refuse("refused.open", path=repr(text))

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event in REFUSED_EVENTS or event.startswith(REFUSED_PREFIXES):
            refuse("refused.call", call=event)
        elif event == "open":
            check_open(args)

    sys.addaudithook(hook)
