"""Time limits count what the student's code computes, not how busy the machine is.

A student process's import and call limits are CPU time (:mod:`autograder.sandbox.student_processes`):
a correct submission graded while every core runs another one waits for the processor without being
charged.  A process that waits instead of computing (sleep, a lock, a child) is stopped by a wall-clock
bound of ``WALL_FACTOR`` times the limit, and says so in its own words.  Starvation is simulated
exactly by stopping the process (SIGSTOP): a stopped process, like a starved one, gets no processor.

The grader's own set-up of a new student process (namespaces, Landlock, seccomp) ends with a
"started" message before any student code runs; the import limit counts from there.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest

from autograder.engine import intake
from autograder.sandbox import budget, runner as sandbox
from autograder.sandbox.budget import WALL_FACTOR
from autograder.sandbox.student_processes import StudentProcess
from checks.runners.harness import SubmissionFault
from conftest import skip_unless_ci

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux /proc and pidfds")

#: Computes about 0.3 s of CPU time, then replies.
COMPUTE_THEN_REPLY = '''
import os, time
start = time.process_time()
while time.process_time() - start < 0.3:
    pass
os.write({fd}, b'{{"id": 1, "ok": "done"}}\\n')
time.sleep(60)
'''
LOOP = "while True:\n    pass\n"
SLEEP = "import time\ntime.sleep(3600)\n"


def _ignore(_process: StudentProcess) -> None:
    pass


@pytest.fixture()
def student() -> Iterator[object]:
    """Starts a Python running ``code`` (``{fd}``: its reply pipe) as a StudentProcess; ends it after the test."""
    started: list[tuple[StudentProcess, subprocess.Popen[bytes]]] = []

    def start(code: str) -> tuple[StudentProcess, subprocess.Popen[bytes]]:
        reply_r, reply_w = os.pipe()
        request_r, request_w = os.pipe()
        output_r, output_w = os.pipe()
        child = subprocess.Popen([sys.executable, "-c", code.format(fd=reply_w)], pass_fds=(reply_w,),
                                 stdin=request_r, stdout=output_w, stderr=output_w,
                                 start_new_session=True)  # its own group: gone() kills that group, never ours
        for fd in (reply_w, request_r, output_w):
            os.close(fd)
        started.append((StudentProcess(child.pid, request_w, reply_r, output_r, "test"), child))
        return started[-1]

    yield start
    for process, child in started:
        process.close()
        child.wait()


def test_a_starved_process_is_not_charged_for_the_wait(student) -> None:  # type: ignore[no-untyped-def]
    """Stopped for 2.5 s in the middle of 0.3 s of work, with a 1 s limit: the reply is taken (on the wall
    clock the 1 s limit would have cut it)."""
    process, child = student(COMPUTE_THEN_REPLY)
    os.kill(child.pid, signal.SIGSTOP)
    resume = subprocess.Popen(["sh", "-c", f"sleep 2.5; kill -CONT {child.pid}"])
    started = time.monotonic()
    reply = process.read(1.0, _ignore, wall=30.0)
    waited = time.monotonic() - started
    resume.wait()
    assert reply == {"id": 1, "ok": "done"}
    assert waited > 2.0, waited


def test_a_process_that_computes_without_end_is_stopped_at_its_limit(student) -> None:  # type: ignore[no-untyped-def]
    process, _child = student(LOOP)
    started = time.monotonic()
    assert process.read(0.5, _ignore, wall=60) is None  # a wall bound that a loaded machine cannot reach first
    assert process.stopped_by == "limit" and process.pid is not None
    assert time.monotonic() - started > 0.45


def test_a_process_that_waits_without_end_is_stopped_by_the_wall_clock(student) -> None:  # type: ignore[no-untyped-def]
    process, _child = student(SLEEP)
    started = time.monotonic()
    assert process.read(0.5, _ignore) is None
    assert process.stopped_by == "wall" and not process.computing and process.pid is not None
    assert 0.5 * WALL_FACTOR - 0.05 < time.monotonic() - started < 0.5 * WALL_FACTOR + 1.0


def test_a_loop_on_a_throttled_processor_is_told_as_computing(student) -> None:  # type: ignore[no-untyped-def]
    """Half a processor (Gradescope's default, here: stopped and continued every 0.1 s): a loop reaches the wall
    bound before its limit, and is still told as a loop, not as a wait."""
    process, child = student(LOOP)
    throttle = subprocess.Popen(["sh", "-c", f"while kill -STOP {child.pid} 2>/dev/null; do sleep 0.1; "
                                             f"kill -CONT {child.pid}; sleep 0.1; done"])
    try:
        assert process.read(10.0, _ignore, wall=2.0) is None
    finally:
        throttle.kill()
        throttle.wait()
        os.kill(child.pid, signal.SIGCONT)
    assert process.stopped_by == "wall" and process.computing


def test_without_a_readable_cpu_time_the_limit_is_wall_time(student) -> None:  # type: ignore[no-untyped-def]
    process, _child = student(SLEEP)
    os.close(process.stat_fd)
    process.stat_fd = -1
    started = time.monotonic()
    assert process.read(0.5, _ignore) is None
    assert process.stopped_by == "limit"  # the limit itself, not the wall bound of twice it
    assert time.monotonic() - started > 0.45


def test_a_process_name_with_parentheses_does_not_fool_the_cpu_clock(student) -> None:  # type: ignore[no-untyped-def]
    """The command name sits between parentheses in /proc/PID/stat, and a process may rename itself."""
    process, child = student('import ctypes\nctypes.CDLL(None).prctl(15, b"x) R 1 1 1 (", 0, 0, 0)\n' + LOOP)
    comm, since = Path(f"/proc/{child.pid}/comm"), time.monotonic()
    while not comm.read_text().startswith("x) R 1") and time.monotonic() - since < 10:  # renamed: now it loops
        time.sleep(0.01)
    first, since = process.cpu_seconds(), time.monotonic()
    second = first
    while second == first and time.monotonic() - since < 10:  # a loaded machine may give it little at first
        time.sleep(0.2)
        second = process.cpu_seconds()
    assert comm.read_text().startswith("x) R 1")
    assert first is not None and second is not None
    assert 0 < second - first <= time.monotonic() - since + 0.02  # one thread: no faster than the clock


def test_the_cpu_clock_stops_reading_once_the_process_is_gone(student) -> None:  # type: ignore[no-untyped-def]
    """The stat file is held open: a new process that reuses the pid is never measured in its place."""
    process, child = student(SLEEP)
    process.gone()
    child.wait()
    assert process.cpu_seconds() is None


# -- through the sandbox: the students' words for each way an import or a call does not finish

@pytest.fixture()
def grading(tmp_path: Path) -> Iterator[object]:
    runners: list[tuple[sandbox.SandboxRunner, Path]] = []

    def runner_for(scaler: str, call_seconds: float = 1) -> sandbox.SandboxRunner:
        folder = tmp_path / f"submission{len(runners)}"
        folder.mkdir()
        (folder / "loss_scaler.py").write_text(scaler)
        staged = intake.stage(folder)
        runner = sandbox.SandboxRunner(staged.folder, limits=sandbox.Limits(call_seconds=call_seconds,
                                                                                       import_seconds=1))
        runners.append((runner, staged.folder))
        runner.begin_test("test_scale_returns_float32_without_overflow")
        return runner

    yield runner_for
    for runner, folder in runners:
        runner.close()
        shutil.rmtree(folder, ignore_errors=True)


CONSTRUCT = {"world": {"optimizers": [{"groups": [[1]]}]}, "ops": [{"op": "new", "kwargs": {}}, {"op": "observe"}]}
SCALER = '''
class ToyLossScaler:
    def __init__(self, *args, **kwargs):
        {body}
'''


def _loops_may_take_their_time(monkeypatch: pytest.MonkeyPatch, code: str) -> None:
    """A loop on a loaded machine may get less than half a processor: a wall bound it cannot reach first."""
    if "while True" in code:
        monkeypatch.setattr(budget, "WALL_FACTOR", 60.0)


@pytest.mark.parametrize("code, words", [
    (LOOP, "importing loss_scaler.py did not finish within 1 s (an infinite loop at module level?)"),
    (SLEEP, f"importing loss_scaler.py did not finish within {WALL_FACTOR:.0f} s (waiting for something: sleep"),
])
def test_an_import_that_does_not_finish_is_told_apart(grading, code: str, words: str,  # type: ignore[no-untyped-def]
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    _loops_may_take_their_time(monkeypatch, code)
    runner = grading(code)
    with pytest.raises(SubmissionFault) as failure:
        runner.run("scaler_ops", CONSTRUCT)
    assert str(failure.value).startswith(words), str(failure.value)


@pytest.mark.parametrize("body, words", [
    ("while True: pass", "your code did not finish within 1 s (an infinite loop?); it was stopped"),
    ("import time; time.sleep(3600)",
     f"your code did not finish within {WALL_FACTOR:.0f} s (waiting for something: sleep, input(), a lock, "
     "a child process?); it was stopped"),
])
def test_a_call_that_does_not_finish_is_told_apart(grading, body: str, words: str,  # type: ignore[no-untyped-def]
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    _loops_may_take_their_time(monkeypatch, body)
    runner = grading(SCALER.format(body=body))
    with pytest.raises(SubmissionFault) as failure:
        runner.run("scaler_ops", CONSTRUCT)
    assert str(failure.value) == words
    assert runner.limits_hit == {"test_scale_returns_float32_without_overflow": "time limit"}


WORKS_SLOWLY = '''
import time


class ToyLossScaler:
    def __init__(self, init_scale=2.0**16, *args, **kwargs):
        start = time.process_time()
        while init_scale == 2.0 and time.process_time() - start < 0.3:
            pass
        self.value = init_scale

    def get_scale(self):
        return float(self.value)

    def get_growth_tracker(self):
        return 0
'''


def test_a_correct_call_on_a_starved_machine_keeps_its_result(grading) -> None:  # type: ignore[no-untyped-def]
    """The student process is stopped for 4.5 s when a call that computes 0.3 s comes, under a 4 s limit (its
    wall bound: 8 s)."""
    runner = grading(WORKS_SLOWLY, call_seconds=4)
    warm = {**CONSTRUCT, "ops": [{"op": "new", "kwargs": {"init_scale": 1.0}}, {"op": "observe"}]}
    runner.run("scaler_ops", warm)  # the process is started and has imported the file
    (process,) = runner._processes.values()
    assert process.pid is not None
    os.killpg(process.pid, signal.SIGSTOP)
    stopper = subprocess.Popen(["sh", "-c", f"sleep 4.5; kill -CONT -{process.pid}"])
    started = time.monotonic()
    slow = {**CONSTRUCT, "ops": [{"op": "new", "kwargs": {"init_scale": 2.0}}, {"op": "observe"}]}
    replies = runner.run("scaler_ops", slow)
    stopper.wait()
    assert replies[-1]["ok"]["scale"] == 2.0
    assert time.monotonic() - started > 4.0 and not runner.limits_hit  # on the wall clock, the limit was spent


def test_a_set_up_that_does_not_finish_is_the_graders_failure(grading, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    """No "started" in time: the grader's own failure (the submission is not graded), nothing charged to the file."""
    monkeypatch.setattr(sandbox, "SETUP_SECONDS", 0.0)
    runner = grading(WORKS_SLOWLY)
    with pytest.raises(sandbox.SetupFailed):
        runner.run("scaler_ops", CONSTRUCT)
    assert not runner.import_faults and not runner.limits_hit and not runner.hangs


TOLD_FIRST = """
import ctypes, os, sys, time
from autograder.sandbox import confine
read_fd, write_fd = os.pipe()
pid = os.fork()
if pid == 0:
    def tell(child):
        time.sleep(0.5)  # a slow parent: the child must not run ahead of what it tells the judge
        os.write(write_fd, b"measure %d\\n" % child)
    if confine.enter_namespaces(ctypes.CDLL(None, use_errno=True), os.geteuid() == 0, tell=tell):
        os.write(write_fd, b"child %d\\n" % os.getpid())
    else:
        os.write(write_fd, b"no namespaces\\n")
    os._exit(0)
os.close(write_fd)
text = b""
while True:
    chunk = os.read(read_fd, 4096)
    if not chunk:
        break
    text += chunk
print(text.decode(), end="")
"""


def test_the_process_to_measure_is_told_before_it_runs_anything() -> None:
    """Namespaces fork the process that runs the student's code; its pid reaches the judge before that process
    can send a word (else a late "measure" would be read as an import's reply)."""
    done = subprocess.run([sys.executable, "-c", TOLD_FIRST], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    if lines == ["no namespaces"]:
        skip_unless_ci("no namespaces on this machine (not root, no unprivileged user namespaces)")
    assert [line.split()[0] for line in lines] == ["measure", "child"], lines
    assert lines[1] == "child 1"  # PID 1 of its namespace, which the outside knows by the pid it was told
