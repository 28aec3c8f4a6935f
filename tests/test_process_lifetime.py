"""Nothing a grading starts outlives it: student processes end with their grader, however it ends.

The chain, from the top: the batch process; its workers (``PR_SET_PDEATHSIG``: SIGTERM, whose handler
kills the current submission's processes); each worker's zygote (it ends when its socket to the worker
closes); the student processes the zygote forks (``PR_SET_PDEATHSIG``: SIGKILL, armed again after every
change of credentials).  As root, a worker also kills everything its uid owns; these tests run without
a uid, as a TA's laptop does, so only the chain itself can stop a student process.

The student file used here loops at import: it never reads its pipe, so end-of-file cannot stop it, and
``RLIMIT_CPU`` (ten minutes) is far away.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from conftest import ROOT, gone_within, processes_mentioning
import test_isolation
from test_isolation import MODES, needs, nobody_python, nobody_root  # noqa: F401 - fixtures

LOOPS_AT_IMPORT = "while True:\n    pass\n"

GRADING = '''
import dataclasses, sys
from pathlib import Path
sys.path[:0] = [{root!r}, {root!r} + "/assignment"]
from autograder.engine import intake
from autograder.sandbox import runner as sandbox
zygote = sandbox.start_zygote()
from checks.runners import harness
limits = dataclasses.replace(sandbox.default_limits(), import_seconds={import_seconds}, submission_seconds=900)
staged = intake.stage(Path({submission!r}))  # as the grader does: where the student process's uid may read
runner = sandbox.SandboxRunner(staged.folder, limits=limits)
runner.begin_test("t")
print("ZYGOTE", zygote.pid, staged.folder, flush=True)
try:
    runner.run("underflow", {{}})
except harness.SubmissionFault:
    pass
runner.close()
import shutil; shutil.rmtree(staged.folder, ignore_errors=True)
print("CLOSED", flush=True)
sys.stdin.read()  # until the test is done looking
'''


@pytest.fixture
def grading(request: pytest.FixtureRequest) -> Iterator[Callable[..., Any]]:
    """Starts, in the test's mode, a process grading a submission whose ``amp_step.py`` loops at import.

    It returns (process, token, zygote pid); ``token`` is in the command line of that process and of
    all its forks.  Whatever is left is killed after the test.
    """
    started: list[tuple[subprocess.Popen[str], str, Path]] = []
    folders: list[Path] = []

    def start(mode: str, import_seconds: float) -> tuple[subprocess.Popen[str], str, int]:
        needs(mode)
        python = request.getfixturevalue("nobody_python") if mode == "unprivileged" else sys.executable
        # as nobody, from a checkout nobody can read (a copy when this one sits in a folder only root may enter)
        root = request.getfixturevalue("nobody_root") if mode == "unprivileged" else ROOT
        submission = Path(tempfile.mkdtemp(prefix="amp-lifetime-", dir="/var/tmp"))  # /tmp/pytest-of-root: 0700
        folders.append(submission)  # removed after the test, even when the grading does not start
        for name in ("loss_scaler.py", "answers.py"):
            shutil.copy(ROOT / "solutions" / name, submission / name)
        (submission / "amp_step.py").write_text(LOOPS_AT_IMPORT)
        for item in [submission, *submission.iterdir()]:  # readable by nobody too
            item.chmod(0o755)
        token = f"lifetime-{uuid.uuid4().hex}"
        code = GRADING.format(root=str(root), submission=str(submission), import_seconds=import_seconds)
        process = subprocess.Popen(MODES[mode] + [python, "-c", code, token], stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, text=True, cwd=root)
        assert process.stdout is not None
        first = process.stdout.readline().split()
        assert first[:1] == ["ZYGOTE"], first
        started.append((process, token, Path(first[2])))
        return process, token, int(first[1])

    yield start
    for process, token, staged in started:
        process.kill()
        process.wait()
        for pid in _others(token, process.pid):
            os.kill(pid, signal.SIGKILL)
        shutil.rmtree(staged, ignore_errors=True)
    for folder in folders:
        shutil.rmtree(folder, ignore_errors=True)


def _others(token: str, *known: int) -> set[int]:
    """The processes of the grading ``token`` names but ``known``: by the token (the grader, and what it forked
    before its zygote), or by the grader's pid (what the zygote forked: their command line names only that)."""
    return set(processes_mentioning(token) + processes_mentioning(f"amp-student grader={known[0]}\0")) - set(known)


MODE_NAMES = ["root", "docker", "unprivileged"]


@pytest.mark.parametrize("mode", MODE_NAMES)
def test_a_grader_killed_mid_import_leaves_no_student_process(mode: str, grading: Callable[..., Any]) -> None:
    process, token, zygote = grading(mode, import_seconds=600)
    deadline = time.monotonic() + 60
    while not _others(token, process.pid, zygote):  # the student process has started and is looping
        assert time.monotonic() < deadline, "no student process started"
        time.sleep(0.1)
    process.kill()
    process.wait()
    deadline = time.monotonic() + 15
    while _others(token, process.pid) and time.monotonic() < deadline:  # the zygote and what it forked, too
        time.sleep(0.2)
    assert not _others(token, process.pid)


@pytest.mark.parametrize("mode", MODE_NAMES)
def test_an_import_that_times_out_is_stopped(mode: str, grading: Callable[..., Any]) -> None:
    """The process that hung importing is killed at the timeout, not left to loop once the call moved on.
    (As root a uid of its own is killed whole too; as nobody only the runner's own bookkeeping can.)"""
    process, token, zygote = grading(mode, import_seconds=1)
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "CLOSED"
    deadline = time.monotonic() + 5
    while _left(token, process.pid, zygote) and time.monotonic() < deadline:
        time.sleep(0.1)
    # the zygote alone is left, idle, with its grader (and its Task-1 zygote, which forked the process)
    assert not _left(token, process.pid, zygote)


def _parent(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError):
        return 0


def _left(token: str, grader: int, zygote: int) -> set[int]:
    """What is left besides the grader, its zygote and the zygote's Task-1 zygote (its one child that is no
    student process: a childless direct child of the zygote, the processes loss_scaler.py runs in are its children)."""
    others = _others(token, grader, zygote)
    helpers = {pid for pid in others if _parent(pid) == zygote and not any(_parent(o) == pid for o in others)}
    return others - set(sorted(helpers)[:1])


#: At import: a daemon (a double fork; seccomp refuses setsid) that outlives the process and lives on doing nothing.
DAEMON_AT_IMPORT = """
import os as _os, time as _time
if _os.fork() == 0:
    try:
        if _os.fork() == 0:
            while True:
                _time.sleep(1)
    finally:
        _os._exit(0)
_os.wait()
"""

RELEASING = '''
import os, sys
from pathlib import Path
sys.path[:0] = [{root!r}, {root!r} + "/assignment"]
from autograder.engine import intake
from autograder.sandbox import runner as sandbox, uids
sandbox.start_zygote()
staged = intake.stage(Path({submission!r}))
runner = sandbox.SandboxRunner(staged.folder)
block = set(uids.block(runner.uid))

def owned():
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            status = Path(f"/proc/{{pid}}/status").read_text()
        except OSError:
            continue
        real = int(next(line for line in status.splitlines() if line.startswith("Uid:")).split()[1])
        if real in block:
            found.append(pid)
    return found

runner.begin_test("t")
runner.run("amp_probe", {{"steps": 1}})
print("BEFORE", len(owned()), flush=True)
runner.release()  # what a phase's end does
print("AFTER", len(owned()), runner.isolation, flush=True)
runner.close()
import shutil; shutil.rmtree(staged.folder, ignore_errors=True)
'''


@pytest.mark.parametrize("mode", ["root", "docker"])
def test_a_phase_ends_with_every_process_its_uids_ran(mode: str, tmp_path: Path) -> None:
    """A daemon a student process left is gone when its phase ends, before the next phase may start: in a PID
    namespace of its own the kernel ends it with the namespace's init (the runner waits for that init); without
    one the runner kills what the process's uid runs."""
    needs(mode)
    submission = Path(tempfile.mkdtemp(prefix="amp-lifetime-", dir="/var/tmp"))
    try:
        for name in ("loss_scaler.py", "answers.py"):
            shutil.copy(ROOT / "solutions" / name, submission / name)
        (submission / "amp_step.py").write_text((ROOT / "solutions" / "amp_step.py").read_text() + DAEMON_AT_IMPORT)
        for item in [submission, *submission.iterdir()]:
            item.chmod(0o755)
        code = RELEASING.format(root=str(ROOT), submission=str(submission))
        done = subprocess.run(MODES[mode] + [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                              timeout=300)
    finally:
        shutil.rmtree(submission, ignore_errors=True)
    lines = dict(line.split(" ", 1) for line in done.stdout.splitlines() if line.startswith(("BEFORE", "AFTER")))
    assert done.returncode == 0 and "AFTER" in lines, done.stderr[-3000:]
    assert int(lines["BEFORE"]) >= 2, lines  # the process and its daemon, each under the process's uid
    left, level = lines["AFTER"].split()
    assert level == ("namespaces" if mode == "root" else "landlock+seccomp")
    assert left == "0", lines  # gone when release() returned: the next phase starts after it


TERMINATED_TWICE = '''
import os, signal, sys, time
sys.path[:0] = [{root!r}]
from autograder.batch import worker
from autograder.engine import grader

class Grading:  # stands for the wave being graded when the batch dies
    def close(self):
        with open({log!r}, "a") as stream:
            stream.write("close\\n")
        os.kill(os.getpid(), signal.SIGTERM)  # what the kernel sends for the dying batch's next thread
        time.sleep(0.5)
        with open({log!r}, "a") as stream:
            stream.write("closed\\n")

grader.CURRENT["wave"] = [Grading()]
signal.signal(signal.SIGTERM, worker._on_terminate)
os.kill(os.getpid(), signal.SIGTERM)
time.sleep(30)
'''


def test_a_worker_told_to_stop_twice_cleans_up_once_and_ends(tmp_path: Path) -> None:
    """A batch killed with -9 makes the kernel send the worker's death signal once per thread of the batch.
    A second cleanup nested in the first (inside its ``fork``) must not wait on the first one's lock: it would wait
    forever."""
    log = tmp_path / "log"
    done = subprocess.run([sys.executable, "-c", TERMINATED_TWICE.format(root=str(ROOT), log=str(log))],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 128 + signal.SIGTERM, done.stderr
    assert log.read_text() == "close\nclosed\n"


def test_a_checkout_only_its_owner_may_enter_is_copied_where_nobody_reads_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Cloned below a 0700 folder (``mktemp -d``, a private home) and run as root, the unprivileged tests above
    still reach the grader as nobody: through a copy nobody can read, without git's store or environments."""
    needs("unprivileged")
    private = Path(tempfile.mkdtemp(prefix="amp-private-"))  # 0700, as mktemp -d makes it
    public = Path(tempfile.mkdtemp(prefix="amp-reachable-", dir="/var/tmp"))
    try:
        checkout = private / "clone"
        for name in ("autograder/__init__.py", "assignment/checks/harness.py", ".git/HEAD", ".venv/bin/python"):
            (checkout / name).parent.mkdir(parents=True, exist_ok=True)
            (checkout / name).write_text("# " + name)
        monkeypatch.setattr(test_isolation, "ROOT", checkout)
        assert not test_isolation._nobody_reads(checkout / "autograder" / "__init__.py")
        copy = test_isolation.reachable_checkout(public)
        assert copy == public / "checkout"
        assert test_isolation._nobody_reads(copy / "assignment" / "checks" / "harness.py")
        assert (copy / "autograder" / "__init__.py").read_text() == "# autograder/__init__.py"
        assert not (copy / ".git").exists() and not (copy / ".venv").exists()
        private.chmod(0o755)  # a checkout every uid may enter is used where it is
        assert test_isolation.reachable_checkout(public / "unused") == checkout
    finally:
        shutil.rmtree(private, ignore_errors=True)
        shutil.rmtree(public, ignore_errors=True)
