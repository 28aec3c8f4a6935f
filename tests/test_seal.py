"""Sealed student processes: no byte passes from one student process to another, at every level the grader accepts.

Two submissions whose files each append :data:`seal_probe.CHANNEL_CODE` are graded in one batch on two workers,
as root (``namespaces``), as root with Docker's capabilities (``landlock+seccomp``: Gradescope) and as an
ordinary user.  Every student process of both (one per file set and kind of test) sends its own token through
every channel the probe knows and listens on all of them; none may hear another's, none may signal another (nor
name one to ``F_SETOWN``, nor arm a pipe to signal its owner), none may open its scratch folder to the others,
and no two may hold the same pipe or socket.  The weaker levels, which cannot seal (a world-writable ``/tmp`` is
shared), are refused unless asked for by name, with a line that says what the machine lacks.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import ROOT, shown, skip_unless_ci
from seal_probe import CHANNEL_CODE
from test_isolation import (MODES, _expected_level, grade_as, needs, nobody_python, nobody_root,  # noqa: F401
                            results_of, submission, workspace)

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux sandbox")


def _reports(results: dict[str, Any]) -> list[dict[str, Any]]:
    return [json.loads(line[len("SEAL "):]) for line in shown(results).splitlines() if line.startswith("SEAL {")]


def _inodes(report: dict[str, Any]) -> set[str]:
    """The pipes and sockets a process held (``pipe:[123]``), its standard output's aside (shared with stderr)."""
    fds = report.get("fds", {})
    return {link for fd, link in fds.items() if link.startswith(("pipe:", "socket:")) and fd not in ("1", "2")}


@pytest.mark.parametrize("mode", list(MODES))
def test_no_byte_passes_between_student_processes(mode: str, workspace: Path, request: pytest.FixtureRequest) -> None:
    needs(mode)
    python = request.getfixturevalue("nobody_python") if mode == "unprivileged" else sys.executable
    root = request.getfixturevalue("nobody_root") if mode == "unprivileged" else ROOT
    patches = {"loss_scaler.py": CHANNEL_CODE, "amp_step.py": CHANNEL_CODE}
    folders = [submission(workspace / name, patches) for name in ("alice", "bob")]
    done = grade_as(mode, folders, workspace / "out", "--jobs", "2", "--no-progress", python=python, root=root,
                    timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    first: list[dict[str, Any]] = []
    for name in ("alice", "bob"):
        results = results_of(workspace / "out", name)
        assert results["score"] == 90, results["output"][-2000:]  # the probe broke nothing graded
        assert results["extra_data"]["isolation"] == _expected_level(mode, python)
        reports = _reports(results)
        first += [report for report in reports if not report.get("late")]
        for report in reports:
            assert report["got"] == {}, f"{name}: a byte passed between student processes: {report}"
    tokens = {report["token"] for report in first}
    assert len(tokens) >= 8, first  # both submissions, each with a process per file set and kind of test
    for report in first:
        assert report["signalled"] == [], f"a student process may signal others: {report}"
        assert report["owned"] == [], f"F_SETOWN names other processes: {report}"
        assert report["armed"] == [], f"a pipe could signal its owner: {report}"
        assert "scratch opened" not in report["sent"], f"a scratch folder was opened to others: {report}"
    held: dict[str, str] = {}
    for report in first:
        for inode in _inodes(report):
            assert inode not in held, f"{inode} held by {held.get(inode)} and {report['token']}"
            held[inode] = report["token"]
    if os.geteuid() == 0 and mode != "unprivileged":  # a uid of its own for each process
        assert len({report["uid"] for report in first}) == len(first), first


FD_PROBE = """

import os as _os


def _held():
    links = []
    for fd in _os.listdir("/proc/self/fd"):
        try:
            links.append(_os.readlink("/proc/self/fd/" + fd))
        except OSError:  # the listing's own descriptor, closed by now
            pass
    return sorted(links)


print("FDS " + repr(_held()))
"""

IN_PROCESS = """
import json, sys
from pathlib import Path
sys.path[:0] = [{root!r}]
from autograder.engine import grader
grader.start()
print("OUTCOME " + json.dumps(grader.grade_submission("probe", Path({folder!r}), call_plan=None)))
"""


def test_a_descriptor_the_grader_inherited_is_no_student_process_s(tmp_path: Path) -> None:
    """What the harness that starts the grader left open (a platform's log or pipe) is closed in the zygote: a
    student process of a grading in the grader's own process (as on Gradescope) holds its own pipes, nothing else."""
    folder = submission(tmp_path / "probe", {"loss_scaler.py": FD_PROBE, "amp_step.py": FD_PROBE})
    read, write = os.pipe()
    try:
        left_open = os.readlink(f"/proc/self/fd/{read}")  # pipe:[inode], both ends
        done = subprocess.run([sys.executable, "-c", IN_PROCESS.format(root=str(ROOT), folder=str(folder))],
                              capture_output=True, text=True, timeout=600, pass_fds=(read, write))
    finally:
        os.close(read)
        os.close(write)
    assert done.returncode == 0, done.stderr[-3000:]
    outcome = next(line for line in done.stdout.splitlines() if line.startswith("OUTCOME "))
    # every line a student process printed (shown, or kept for staff); a link may hold brackets: pipe:[123]
    held = re.findall(r"FDS \[(?:[^][]|\[[^]]*\])*\]", outcome.replace('\\"', '"'))
    assert len(held) >= 4 and json.loads(outcome[8:])["results"]["score"] == 90, outcome[-2000:]
    assert not [line for line in held if left_open in line], held
    for line in held:  # its own pipes, stdin's /dev/null and its Landlock ruleset: nothing else (a namespace, a file)
        assert {link.split(":")[0] for link in ast.literal_eval(line[4:])} <= {"pipe", "/dev/null", "anon_inode"}, line


#: The zygote's fork of a student process fails once (the machine's process limit), then works.
FORK_REFUSED = """
import os, sys
sys.path[:0] = [{root!r}]
from autograder.sandbox import zygote

own = zygote.own_pid_namespace()
fork = os.fork
def refused():
    raise BlockingIOError(11, "Resource temporarily unavailable")
os.fork = refused
try:
    zygote.fork_as_init(own)
except BlockingIOError:
    pass
os.fork = fork
back = os.readlink("/proc/self/ns/pid_for_children") == os.readlink("/proc/self/ns/pid")
pid, init = zygote.fork_as_init(own)
if pid == 0:
    os._exit(0 if os.getpid() == 1 else 3)
print(back, init, os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
"""


def test_a_fork_the_machine_refuses_leaves_the_zygote_in_its_own_pid_namespace() -> None:
    """A refused fork (EAGAIN) must not leave the zygote's next children in the namespace it unshared for the one
    that failed: the next student process is again the init of a namespace of its own."""
    if os.geteuid() != 0:
        skip_unless_ci("needs root (a PID namespace per student process)")
    done = subprocess.run([sys.executable, "-c", FORK_REFUSED.format(root=str(ROOT))], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["True", "True", "0"], done.stdout


WEAKER = """
import sys
sys.path[:0] = [{root!r}]
from autograder.engine import grader
from autograder.sandbox import confine
confine.enter_namespaces = lambda libc, is_root, tell=None: False  # as without CAP_SYS_ADMIN
confine.landlock = None  # as on a kernel without Landlock: the level is seccomp
try:
    grader.check_isolation({asked!r})
    print("graded")
except grader.IsolationRefused as refused:
    print("REFUSED " + str(refused))
"""


def _check_weaker(asked: str | None) -> subprocess.CompletedProcess[str]:
    code = WEAKER.format(root=str(ROOT), asked=asked)
    env = {key: value for key, value in os.environ.items() if key != "AMP_MIN_ISOLATION"}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)


def test_a_level_that_cannot_seal_is_refused_unless_asked_for_by_name() -> None:
    """``seccomp`` (no Landlock) is below the sealed level: refused by default in one line naming what is missing
    and what to do; graded when asked for by name, with a warning on stderr."""
    if os.geteuid() != 0:
        skip_unless_ci("needs root (the probe drops to nobody)")
    done = _check_weaker(None)
    assert done.returncode == 0, done.stderr[-3000:]
    line = done.stdout.strip()
    assert line.startswith("REFUSED Refusing to grade") and "\n" not in line, line
    assert "'seccomp'" in line and "'landlock+seccomp'" in line and "lacks Landlock" in line, line
    assert "--min-isolation seccomp" in line and "Run as root" in line, line
    done = _check_weaker("seccomp")
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "graded"
    assert "WARNING" in done.stderr and "below 'landlock+seccomp'" in done.stderr


def test_the_sealed_level_is_the_default_minimum() -> None:
    from autograder.sandbox import levels

    env = os.environ.pop("AMP_MIN_ISOLATION", None)
    try:
        assert levels.SEALED == "landlock+seccomp"
        assert levels.required_level(None) == "landlock+seccomp"
        assert levels.required_level("none") == "none"
        assert levels.refusal("landlock+seccomp", levels.required_level(None)) is None
        assert levels.refusal("none", levels.required_level(None)) is not None
    finally:
        if env is not None:
            os.environ["AMP_MIN_ISOLATION"] = env


#: Appended to one classmate's loss_scaler.py: at import, it looks for its wave-mate's files (the staged copy, the
#: scratch folders) wherever the grader keeps them, and prints what it reads.  The other classmate's answers.py
#: carries MATE_MARK.
LOOKS_FOR_MATE = '''

import os as _os

MATE_MARK = "MATE" + "-SECRET-7f3a"


def _look_for_mate():
    mine = _os.path.dirname(_os.path.abspath(__file__))
    roots = ["/tmp", "/var/tmp", _os.path.dirname(mine), _os.path.dirname(_os.path.dirname(mine)),
             _os.environ.get("TMPDIR", "/tmp")]
    for root in roots:
        for folder, dirs, files in _os.walk(root):
            if folder.count(_os.sep) - root.count(_os.sep) >= 3:
                dirs[:] = []
            for name in files:
                path = _os.path.join(folder, name)
                if name.endswith(".py") and not path.startswith(mine):
                    try:
                        with open(path, encoding="utf-8", errors="replace") as stream:
                            if MATE_MARK in stream.read():
                                print("FOUND-MATE", path, flush=True)
                    except OSError:
                        pass


_look_for_mate()
'''


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["root", "docker"])
def test_a_wave_mate_finds_nothing_of_its_classmate(mode: str, workspace: Path) -> None:
    """One worker grades both in one wave (phase by phase, their staged copies side by side, processes under the same
    uids in turn): the one that looks for the other's files at every phase finds none, and both keep 90."""
    needs(mode)
    folders = [submission(workspace / "looker", {"loss_scaler.py": LOOKS_FOR_MATE}),
               submission(workspace / "mate", {"answers.py": '\n# MATE-SECRET-7f3a\n'})]
    done = grade_as(mode, folders, workspace / "out", "--jobs", "1", "--no-progress", timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    looker = results_of(workspace / "out", "looker")
    assert [results_of(workspace / "out", name)["score"] for name in ("looker", "mate")] == [90, 90]
    assert "FOUND-MATE" not in json.dumps(looker), shown(looker)[:2000]
