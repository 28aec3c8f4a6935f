"""The runtime guard of a student process: refuses, for good, what no honest solution needs.

The static rules (:mod:`checks.rules`) are the first line: a file that names a
refused construct is not run at all.  This module is the second line, for what a
static reading cannot see.  It runs inside the student process, after the
sandbox has dropped privileges and before the first line of student code:

* :func:`install` adds a PEP 578 audit hook.  Audit hooks cannot be removed, so
  nothing imported later can turn it off.  It refuses object walks (``gc``),
  tracing and new audit hooks, ``ctypes``, sockets, subprocesses and ``fork``,
  the audited ways into a frame (``tb_frame``, ``gi_frame``, ``sys._getframe`` called by the
  submission's own code), ``compile``/``exec`` called by the submission's own code, swapping a
  function's ``__code__`` or an object's ``__class__``, and opening files outside the submission, the scratch
  folder and the interpreter's own folders (writes: scratch only).  A refused call
  raises :class:`Refused`, whose message names the call; the scenario then fails
  with that message like any other exception of the submission.
* :func:`refuse_reference_scaler` makes delegation impossible rather than
  detected: in a process that runs ``loss_scaler.py``, ``torch.amp.GradScaler``
  (every import path) and torch's private AMP kernels (``torch._amp_*`` and the
  ``torch.ops.aten`` kernels themselves, overridden in torch's dispatcher for the
  process) raise "not allowed in this task" and count the attempt.

What audit hooks cannot see (reading ``__globals__``, a frame's ``f_back`` reached
without an audited access, assigning a module attribute) is what the static rules
refuse; the README lists what remains.
"""

from __future__ import annotations

import contextlib
import os
import sys
import warnings
from typing import Any, Callable, Iterator

import torch

from checks import guards


class Refused(PermissionError):
    """A call the grader does not allow in a student process."""


#: Audit events refused outright (exact names), and by prefix.
REFUSED_EVENTS = frozenset({
    "gc.get_objects", "gc.get_referrers", "gc.get_referents", "sys._current_frames", "sys.settrace",
    "sys.setprofile", "sys.addaudithook", "subprocess.Popen", "os.system", "os.exec", "os.posix_spawn",
    "os.spawn", "os.fork", "os.forkpty", "os.kill", "os.killpg", "pty.spawn", "code.__new__", "function.__new__",
    "sys.remote_exec", "sys.monitoring.register_callback", "cpython.PyInterpreterState_New",
    "cpython.run_command", "cpython.run_file", "cpython.run_module", "cpython.run_startup",
})
REFUSED_PREFIXES = ("ctypes.", "socket.", "winreg.", "_posixsubprocess.")
#: Frame attributes whose reads are refused.  Of the ways into a frame only these (and ``f_code``, which
#: torch itself reads) raise an audit event; ``f_back``/``f_globals`` raise none, which is why the static
#: rules refuse them by name.
FRAME_ATTRIBUTES = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame"})
REFUSED_SETATTR = frozenset({"__code__", "__globals__", "__closure__", "__builtins__", "f_trace", "__class__"})
#: Events refused when the submission's own code raises them directly (library code, e.g. namedtuple taking its
#: caller's frame or dataclasses exec-ing a generated __init__, may): taking a frame, compiling, executing code.
REFUSED_FROM_SUBMISSION = frozenset({"sys._getframe", "sys._getframemodulename", "exec", "compile"})
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC



def _under(path: str, roots: tuple[str, ...]) -> bool:
    return any(path == root or path.startswith(root.rstrip("/") + "/") for root in roots)


def install(submission: str, scratch: str, extra_read: tuple[str, ...] = ()) -> Callable[[], Any]:
    """Arm the audit hook for the rest of this process; return a ``trusted()`` context manager.

    Inside ``with trusted():`` frame attributes may be read: the harness formats the
    submission's own tracebacks that way.  Only the harness holds the function (the
    static rules keep student code from reaching it).
    """
    scratch_real = os.path.realpath(scratch)
    readable = tuple(sorted({os.path.realpath(p) for p in (
        submission, scratch, sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(torch.__file__),
        "/proc/self", "/sys", "/dev", "/usr", "/lib", "/lib64", "/etc", *extra_read)}))
    writable = (scratch_real, "/dev/null")
    submission_real = os.path.realpath(submission)
    depth = [0]
    looking = [False]

    def from_submission() -> bool:
        """Whether the Python code that raised the current event is one of the submission's files."""
        looking[0] = True  # sys._getframe raises its own event: do not look again from inside
        try:
            caller = sys._getframe(2)  # 0: this function, 1: the hook, 2: the code that raised the event
        finally:
            looking[0] = False
        return _under(os.path.realpath(caller.f_code.co_filename), (submission_real,))

    def refuse(what: str) -> None:
        raise Refused(f"{what} is not allowed while the grader runs your code")

    def check_open(args: tuple[Any, ...]) -> None:
        path, mode, flags = (tuple(args) + (None, None, None))[:3]
        if isinstance(path, int) or path is None:
            return  # an already open descriptor
        text = os.fsdecode(path)
        real = os.path.realpath(text)
        writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
            isinstance(flags, int) and bool(flags & _WRITE_FLAGS))
        if writing and not _under(real, writable):
            refuse(f"writing {text!r} (only the current folder, a scratch folder, is writable)")
        if not writing and not _under(real, readable):
            refuse(f"opening {text!r}")

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event in REFUSED_EVENTS or event.startswith(REFUSED_PREFIXES):
            refuse(event)
        elif event == "object.__getattr__" and len(args) > 1 and args[1] in FRAME_ATTRIBUTES and not depth[0]:
            refuse(f"reading .{args[1]}")
        elif event in ("object.__setattr__", "object.__delattr__") and len(args) > 1 and args[1] in REFUSED_SETATTR:
            refuse(f"changing .{args[1]}")
        elif event == "open":
            check_open(args)
        elif event in REFUSED_FROM_SUBMISSION and not looking[0] and not depth[0] and from_submission():
            refuse(event)

    @contextlib.contextmanager
    def trusted() -> Iterator[None]:
        depth[0] += 1
        try:
            yield
        finally:
            depth[0] -= 1

    sys.addaudithook(hook)
    return trusted


def refuse_reference_scaler() -> None:
    """Disable torch's GradScaler and private AMP kernels in this whole process (a second line behind the
    policy's stand-ins, for code the policy does not compile, e.g. with ``AMP_STATIC_RULES=off``).

    The stand-ins are the policy's own (:mod:`checks.guards`): they count into the same
    ``DELEGATION_CALLS`` that gate 1.17 reads, and raise.
    """
    for module_name in ("torch.amp", "torch.amp.grad_scaler", "torch.cuda.amp", "torch.cuda.amp.grad_scaler",
                        "torch.cpu.amp", "torch.cpu.amp.grad_scaler"):
        module = sys.modules.get(module_name)
        if module is not None and hasattr(module, "GradScaler"):
            setattr(module, "GradScaler", guards.RefusedGradScaler)
    library = torch.library.Library("aten", "IMPL")  # noqa: TOR901 - overriding is the point
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in guards.PRIVATE_KERNELS:
            refuse = guards.refused_kernel(name)
            setattr(torch, name, refuse)
            for key in ("CPU", "CUDA"):
                library.impl(name, refuse, key)
    _KEEP.append(library)  # the overrides last as long as the library object


_KEEP: list[Any] = []
