"""The isolation levels a student process can reach, weakest first, and the policy on them: the default minimum
(:data:`SEALED`), the refusal below the minimum asked for, the warning for a lower level allowed by name.

Which layers make each level is :mod:`autograder.sandbox.confine`'s (it applies them and measures the level a
student process reaches here, :func:`~autograder.sandbox.confine.probe_level`); docs/security.md says what each
level guarantees.
"""

from __future__ import annotations

from autograder import settings

LEVELS = ("none", "seccomp", "landlock+seccomp", "namespaces")


def level_rank(level: str) -> int:
    """Position of ``level`` in :data:`LEVELS` (higher is stronger)."""
    return LEVELS.index(level)


def parse_level(text: str) -> str:
    """``text`` if it names a level; raises ValueError with the valid names otherwise."""
    if text not in LEVELS:
        raise ValueError(f"unknown isolation level {text!r}; use one of: {', '.join(LEVELS)}")
    return text


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
