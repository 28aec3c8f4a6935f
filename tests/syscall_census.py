"""Measure the system calls student processes make, for ``syscalls.ALLOWED_SYSCALLS`` (docs/security.md).

Runs a command under ``strace -ff`` and lists every call made by a process after its seccomp filter was loaded
(and by the threads and children it started then), with the ``fcntl``, ``ioctl`` and ``prctl`` commands, and
compares them with the allow-list::

    .venv/bin/python tests/catalogue/catalogue.py materialize /tmp/catalogue
    .venv/bin/python tests/syscall_census.py -- .venv/bin/python -m autograder grade /tmp/catalogue/* --out /tmp/o
    .venv/bin/python tests/syscall_census.py -- .venv/bin/python -m pytest tests/test_allow_list.py -k habits -n 0
    .venv/bin/python tests/syscall_census.py -- .venv/bin/python -m autograder grade-gpu ...   # on a GPU machine

Under ``strace`` every call is slower: the command runs with generous limits on the student's time.  Run it
with the filter loaded either way: a refused call still shows, with its error.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from autograder.sandbox import syscalls  # noqa: E402

_CALL = re.compile(r"^(?:<\.\.\. )?([a-z0-9_]+)(?:\(| resumed>)(.*)$")
_CHILD = re.compile(r"^(?:<\.\.\. )?(?:clone3?|fork|vfork)\b.*= (\d+)$")
_LOADED = re.compile(r"^seccomp\(SECCOMP_SET_MODE_FILTER, .*\{len=.*= 0$")
_COMMANDS = {"fcntl": 1, "ioctl": 1, "prctl": 0}  # the argument that names the command


def census(folder: Path) -> tuple[collections.Counter[str], dict[str, collections.Counter[str]], int]:
    """(calls, commands of fcntl/ioctl/prctl, number of filtered processes) in a ``strace -ff -o`` folder."""
    lines = {int(path.name.rsplit(".", 1)[1]): path.read_text(errors="replace").splitlines()
             for path in folder.iterdir()}
    start = {pid: index + 1 for pid, text in lines.items() for index, line in enumerate(text) if _LOADED.match(line)}
    pending = list(start)
    while pending:  # threads and children started after the filter: filtered from their first call
        pid = pending.pop()
        for line in lines[pid][start[pid]:]:
            found = _CHILD.match(line)
            if found and int(found.group(1)) in lines and int(found.group(1)) not in start:
                start[int(found.group(1))] = 0
                pending.append(int(found.group(1)))
    calls: collections.Counter[str] = collections.Counter()
    commands: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for pid, first in start.items():
        for line in lines[pid][first:]:
            found = _CALL.match(line)
            if not found:
                continue
            name, rest = found.groups()
            calls[name] += 1
            if name in _COMMANDS:
                args = [arg.strip() for arg in rest.split(",")]
                if len(args) > _COMMANDS[name]:
                    commands[name][args[_COMMANDS[name]].split(")")[0]] += 1
    return calls, commands, len(start)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", nargs="+", help="the command to trace (after --)")
    command = parser.parse_args(argv).command
    with tempfile.TemporaryDirectory(prefix="amp-census-") as folder:
        limits = '{"call_seconds": 30, "import_seconds": 120, "submission_seconds": 3000, "max_call_seconds": 60}'
        subprocess.run(["strace", "-ff", "-qq", "-s", "0", "-o", os.path.join(folder, "t"), *command],
                       env={**os.environ, "AMP_SANDBOX_LIMITS": limits}, check=False)
        calls, commands, processes = census(Path(folder))
    allowed = {*syscalls.ALLOWED_SYSCALLS, *syscalls.FALLBACK_SYSCALLS, *syscalls.OWN_PID_SYSCALLS,
               *syscalls.SIGNAL_SYSCALLS, "fcntl", "ioctl", "prctl", "clone", "socket"}
    print(f"{processes} filtered processes")
    print("calls:", " ".join(f"{name}({count})" for name, count in sorted(calls.items())))
    for name, counts in sorted(commands.items()):
        print(f"{name} commands:", " ".join(f"{key}({count})" for key, count in sorted(counts.items())))
    print("made but not on the allow-list (refused):", " ".join(sorted(set(calls) - allowed)) or "none")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
