"""The judge's side of the sandbox: runs scenarios in student processes and trusts nothing they answer.

* **One process per file set.**  A scenario runs in a process that imported only the
  contract files it needs (:data:`SCENARIO_NEEDS`); processes are started from the zygote
  (:mod:`autograder.sandbox.zygote`) on first need and kept for the next calls.
* **Protocol.**  Requests and replies are single JSON lines on two pipes (a request may
  hold a batch of calls, answered one line each); the student's stdout/stderr go to a
  third pipe, drained at every wake-up and attributed to the test that was running.
  Nothing from the student process is ever unpickled or executed, and every reply is
  validated (:mod:`checks.judge.replies`).
* **Faults.**  A crash, ``os._exit``, segfault or hang costs only the current call:
  the processes are killed (their process groups, and as root everything their uid
  owns) and the next call gets fresh ones.  Import faults are
  remembered per file, so tests that do not need a broken file still run; hangs are
  budgeted per file (deterministic) and the submission's wall budget bounds the rest.
* **Phases.**  Processes of one kind (:mod:`autograder.sandbox.phases`) are alive at a time: before it starts
  one of another kind the runner ends every live one and waits until they are gone, and it starts one of kind K
  only inside the machine's room K, so no other grading's process of another kind is alive either.  A public
  kind after a hidden one is refused (:class:`~autograder.sandbox.phases.PhaseOrderError`): the judge orders
  its calls so that it never asks.
* **Time.**  Import and call limits are CPU time of the process running the student's code
  (a busy machine is never charged), counted from its "started" message: the grader's own
  set-up of the process comes before it and is not the submission's (:class:`SetupFailed`).

:class:`SandboxRunner` holds the protocol (starting processes, faults, batches fetched ahead for the
call plan), which shares the process table and the per-test state; one process's pipes and the
output log are :mod:`autograder.sandbox.student_processes`.  The child side's names that callers use
with a runner (:class:`Limits`, :func:`start_zygote`...) are re-exported here, so that "the sandbox" is
one import for the rest of the grader.

One file past 400 lines: the judge's whole side of one student process (start, protocol, limits, faults) in
one place; the process itself is in zygote.py, its pipes in student_processes.py.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import tempfile
import time
from collections import deque
from pathlib import Path
from typing import Any, NoReturn

from checks import words
from checks.judge import replies
from checks.runners import harness
from checks.student import serve

from autograder import settings
from autograder.engine.strings import text
from autograder.sandbox import budget, cleanup, confine, phases, uids
from autograder.sandbox.file_faults import FileFaults
from autograder.sandbox.student_processes import OutputLog, StudentProcess
from autograder.sandbox.zygote import (REPO_ROOT, DeviceAccess, Limits,  # noqa: F401
                               SpawnRequest, Zygote, default_limits, start_zygote)

__all__ = ["SandboxRunner", "Limits", "DeviceAccess", "default_limits", "start_zygote", "SCENARIO_NEEDS",
           "REPO_ROOT"]

IMPORT_ORDER, SCENARIO_NEEDS = serve.IMPORT_ORDER, serve.SCENARIO_NEEDS
SCRATCH_FAULT = (f"wrote more than {confine.SCRATCH_BYTES // 2**20} MiB (or {confine.SCRATCH_ENTRIES} files) "
                 "to its scratch folder; it was stopped")


#: Wall seconds an ended student process may take to be gone (its files closed) before another kind starts: a
#: SIGKILLed process takes milliseconds; one stuck in the kernel longer is given up on after this.
GONE_SECONDS = 5.0

#: Wall seconds a new student process may take for the grader's own set-up (namespaces, covers, Landlock,
#: seccomp), before any student code runs: not charged to the submission; past it the grader is at fault.
SETUP_SECONDS = 60.0


class SetupFailed(RuntimeError):
    """A student process did not finish the grader's set-up: the grader's failure, never the submission's."""


def canonical(value: Any) -> str:
    """JSON text replies are compared by (NaN equals NaN; key order does not matter)."""
    return json.dumps(value, sort_keys=True, allow_nan=True)


def call_key(scenario: str, args: dict[str, Any]) -> str:
    """What a live call is matched to the replies fetched ahead by (:meth:`SandboxRunner.prefetch`)."""
    return canonical([scenario, args])


def _log_lifetimes(grading: str, ended: list[StudentProcess]) -> None:
    """One JSON line per ended process (kind, born, gone: this machine's monotonic clock) where a test asks."""
    path = settings.phase_log()
    if path is None or not ended:
        return
    gone = time.monotonic()
    lines = "".join(json.dumps({"grading": grading, "kind": phases.KINDS[p.kind].name, "born": p.born, "gone": gone})
                    + "\n" for p in ended)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, lines.encode())
    finally:
        os.close(fd)


class SandboxRunner:
    """Runs scenarios against one submission in isolated student processes.

    This is the grader's implementation of the ``student`` fixture used by the tests.
    Each scenario runs in a process that imported only the files it needs
    (:data:`SCENARIO_NEEDS`): ``loss_scaler.py`` alone for Task 1, ``amp_step.py``
    (with ``loss_scaler.py`` only when the student's scaler is used) for Task 2;
    ``answers.py`` is never run (its answers are parsed here).  Every reply is validated
    (:mod:`checks.judge.replies`) before a test sees it.  What the student's code prints
    is recorded per test (:meth:`output_by_test`), so the judge can keep the output of
    hidden tests out of what students see before the due date.
    """

    def __init__(self, submission: Path, *, limits: Limits | None = None, hide: tuple[str, ...] = (),
                 uid: int | None = None, zygote: Zygote | None = None,
                 device: DeviceAccess | None = None, rooms: phases.Rooms | None = None) -> None:
        self.submission = submission
        self.device_access = device  # not "device": the GPU tests read runner.device as a device string
        self.limits = limits or default_limits()
        self.hide = hide
        self.zygote = zygote or start_zygote()
        #: The first uid of this runner's block (autograder.sandbox.uids): the group that may read the submission;
        #: each student process runs as a uid of its own from the block (None: not root, no switch).
        self.uid = uid if uid is not None or os.geteuid() != 0 else uids.default_base(os.getpid())
        self._uids_dirty: set[int] = set()  # uids given to a process since the last _kill_all: what it must kill
        self._slots_used: set[int] = set()  # slots (uids) any process of this submission has had
        self.files = FileFaults(self.limits.import_seconds, self.limits.hangs_per_module)
        self.output = OutputLog()
        self.started = time.monotonic()
        #: Holds one private scratch folder per student process (``p<slot>``, 0700, the process's uid): no two
        #: processes share a writable folder.  Traversable by the sandbox uids, listable by the grader only.
        self._scratch = Path(tempfile.mkdtemp(prefix="amp-scratch-"))
        if self.uid is not None:
            self._scratch.chmod(0o711)
        #: (files imported, serves public tests?) -> process.  A test of the public checks (any row's: a hidden
        #: row's public example too) never runs in a process that served a hidden test, so whatever that process
        #: kept of hidden inputs never reaches a text students see at once (see :meth:`begin_test`).
        self._processes: dict[tuple[tuple[str, ...], bool], StudentProcess] = {}
        self._starting: StudentProcess | None = None  # spawned, still importing: not in _processes yet
        self._public = False
        self._next_id = 0
        self._test = ""
        self._test_fault: str | None = None
        #: (test case, public?) -> canonical [scenario, args] -> replies fetched ahead (see :meth:`prefetch`), used
        #: once each: a public test and a hidden one of the same name never share a reply
        self._prefetched: dict[tuple[str, bool], dict[str, deque[dict[str, Any]]]] = {}
        self._prefetch_off = False
        self.scenarios_run = 0  # scenario calls sent to student processes (reported to staff)
        self.isolation: str | None = None  # the level the last student process reached (autograder.sandbox.confine)
        self._scratch_guard: cleanup.ScratchGuard | None = None
        #: The sandbox's own record of the limits hit: test case -> kind (budget.LIMIT_KINDS); reports
        #: classify by this, never by message text (which student code can imitate).
        self.limits_hit: dict[str, str] = {}
        self._test_fault_kind = ""
        #: The kind (index in phases.KINDS) of every live process, None when none is alive; the room it holds.
        self._kind: int | None = None
        self._rooms = rooms or phases.Rooms()  # shared by the runners of one wave (grader.grade_submissions)
        self._hidden_started = False  # a process of a hidden kind has started: no public one may start any more
        self._grading = f"{os.getpid()}-{id(self)}-{time.monotonic()}"  # this runner, in the test hook's log
        #: The judge asked for a public kind after a hidden one: the grader's fault (grader.grade_submission raises)
        self.phase_fault: phases.PhaseOrderError | None = None

    @property
    def import_faults(self) -> dict[str, str]:
        """Contract module -> why tests needing it fail at once (read by the judge's feedback and the plan)."""
        return self.files.messages

    @property
    def hangs(self) -> dict[str, int]:
        """Contract module -> calls that timed out while needing it."""
        return self.files.hangs

    def begin_test(self, name: str, *, public: bool = False) -> None:
        """A new test case starts: forget the previous test's hang or crash (see :meth:`run`), and pick the
        processes of its kind (see :attr:`_processes`).

        ``public``: the test comes from the public checks (``assignment/checks``), whose texts students may see at
        once (a visible row, a hidden row's public-example companion, the notes).  Decided by the test's file,
        never by its row: a hidden row's test has the same name as its public example.
        """
        self._test, self._public = name, public
        self._test_fault, self._test_fault_kind = None, ""

    def _budget_left(self) -> float:
        return self.limits.submission_seconds - (time.monotonic() - self.started)

    def _limit(self, kind: str, message: str) -> NoReturn:
        """Record that the current test hit a limit of ``kind``, then fail it with ``message``."""
        self.limits_hit.setdefault(self._test, kind)
        self._fault(message)

    # -- lifecycle

    def _enter_phase(self, kind: int) -> None:
        """Make room for a process of ``kind``: end every live process of another kind (and wait until it is
        gone), then enter the machine's room of ``kind`` (waiting while another grading is in another room).

        Raises:
            PhaseOrderError: a public kind after a hidden one in this grading (the grader's fault).
        """
        if phases.KINDS[kind].public and self._hidden_started:
            self.phase_fault = self.phase_fault or phases.PhaseOrderError(
                f"test {self._test}: a process of kind {phases.KINDS[kind].name} was asked for after one of a hidden "
                "kind had started")
            raise self.phase_fault
        if self._kind is not None and self._kind != kind:
            self._kill_all()
        waited = time.monotonic()
        self._rooms.enter(kind)
        self.started += time.monotonic() - waited  # other gradings' turns: neither its budget nor its reported time
        self._kind = kind
        self._hidden_started = self._hidden_started or not phases.KINDS[kind].public

    def _spawn(self, modules: tuple[str, ...]) -> StudentProcess:
        """A new student process in a slot no earlier process of this submission had (while the block lasts; then
        the lowest free one): its own uid of the block and its own fresh scratch folder, so nothing another process
        of this submission left anywhere is within its reach."""
        self._enter_phase(phases.kind_of(modules, self._public))
        taken = {process.slot for process in self._live()}
        free = [k for k in range(uids.BLOCK - 1) if k not in taken]  # at most 4 file sets x public/hidden alive
        slot = next((k for k in free if k not in self._slots_used), free[0])
        self._slots_used.add(slot)
        uid = uids.process_uid(self.uid, slot) if self.uid is not None else None
        scratch = self._scratch / f"p{slot}"
        shutil.rmtree(scratch, ignore_errors=True)  # what the slot's previous process left
        scratch.mkdir(mode=0o700)
        uid_is_its_own = uid is not None and uid not in self._uids_dirty  # no earlier process's leftovers to kill
        if uid is not None:
            os.chown(scratch, uid, uid)
            self._uids_dirty.add(uid)
        cleanup.grant_submission(self.submission, self.uid)
        request_r, request_w = os.pipe()
        reply_r, reply_w = os.pipe()
        output_r, output_w = os.pipe()
        request = SpawnRequest(str(self.submission), str(scratch), modules, uid, self.hide, self.limits,
                               self.device_access, group=self.uid)
        born = time.monotonic()  # before the zygote forks it: a bound on when it was alive
        pid, init = self.zygote.spawn(request, [request_r, reply_w, output_w])
        for fd in (request_r, reply_w, output_w):
            os.close(fd)
        process = StudentProcess(pid, request_w, reply_r, output_r, self._test)
        if init:  # the init of its PID namespace already: no "measure" will name another process
            process.measure(pid, namespace_init=True)
        process.slot, process.kind, process.born = slot, self._kind, born
        process.uid, process.uid_is_its_own = uid, uid_is_its_own
        return process

    def _start(self, wanted: tuple[str, ...]) -> StudentProcess:
        """A process that imported ``wanted`` (minus faulty files); import faults are recorded per file.

        Raises:
            SetupFailed: the process did not finish the grader's own set-up (isolation), before any student code.
        """
        modules = tuple(name for name in IMPORT_ORDER if name in wanted and name not in self.import_faults)
        process = self._starting = self._spawn(modules)  # _kill_all reaches it from now on
        fired = self._scratch_guard.fired if self._scratch_guard is not None else 0
        started = process.read(SETUP_SECONDS, self.output.drain, wall=SETUP_SECONDS)
        if started and isinstance(started.get("measure"), int):  # namespaces forked: the new process computes
            process.measure(started["measure"], namespace_init=True)  # told by the grader's code, before the student's
            started = process.read(SETUP_SECONDS, self.output.drain, wall=SETUP_SECONDS)
        if not (started and started.get("started")):  # the grader's time, never charged to the submission
            self._kill_all()
            raise SetupFailed(f"a student process did not finish its set-up within {SETUP_SECONDS:g} s "
                              f"({'still running' if process.pid is not None else 'it ended'}): {started}")
        for name in modules:
            message = process.read(self.limits.import_seconds, self.output.drain, wall=self._wall_bound(
                self.limits.import_seconds))
            if message is None:
                self.files.import_stopped(name, process)
                self._kill_all()
                return self._start(wanted)
            if message.get("imported") == name and message.get("fault"):  # in the feedback's language
                self.files.import_failed(name, words.shown(message["fault"], message.get("said")))
            # Where scratch is no capped tmpfs, the guard's thread starts too late for an import that fills it.  (With
            # one, the student processes write to their own tmpfs and this side sees an empty folder.)
            elif cleanup.scratch_over(self._scratch) or (
                    self._scratch_guard is not None and self._scratch_guard.fired > fired):  # cut short by the guard
                self.files.import_failed(name, f"importing {harness.CONTRACT_FILES[name]} {SCRATCH_FAULT}",
                                         budget.CRASH_LIMIT)
                self._kill_all()
                cleanup.wipe_scratch(self._scratch)
                return self._start(wanted)
        ready = process.read(self.limits.import_seconds, self.output.drain,
                             wall=self._wall_bound(self.limits.import_seconds))
        if not (ready and ready.get("ready")):
            self._kill_all()
            # Deterministic, as an import fault: every later call needing these files fails at once (instead of
            # starting, and failing, a process per call).
            for name in modules:
                self.import_faults.setdefault(name, text("import_broke_protocol", file=harness.CONTRACT_FILES[name]))
            raise harness.SubmissionFault("the submission's process did not start properly")
        self.isolation = str(ready.get("isolation") or "none")
        if self.isolation != "namespaces" and self._scratch_guard is None:  # no size-capped tmpfs there
            self._scratch_guard = cleanup.ScratchGuard(self._scratch, self._stop_processes)
            self._scratch_guard.start()
        self._processes[(wanted, self._public)], self._starting = process, None
        return process

    def _stop_processes(self) -> None:
        """Called from the scratch guard's thread: stop the student processes (the reader notices)."""
        for process in list(self._processes.values()):  # one still importing is judged when its import ends
            pid = process.pid
            if pid is not None:
                try:
                    os.killpg(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass

    def _live(self) -> list[StudentProcess]:
        """Every student process of this submission: those ready, and the one still importing."""
        return [*self._processes.values(), *([self._starting] if self._starting is not None else [])]

    def _kill_all(self) -> None:
        """End every student process of this submission, and whatever their uids still run; wait until they
        are gone, then leave the room of their kind."""
        ended = self._live()
        for process in ended:
            self.output.drain(process)
            if process.close(wait=GONE_SECONDS) and process.uid_is_its_own:
                # Its uid ran nothing outside the PID namespace it entered before taking the uid, and the
                # namespace is gone: no daemon of that uid is left to kill.
                self._uids_dirty.discard(process.uid)
        self._processes.clear()
        self._starting = None
        if self._uids_dirty and os.geteuid() == 0:  # even when a process ended by itself: its
            uids.kill_uid(*sorted(self._uids_dirty))  # daemons (setsid, double fork) outlive it
        self._uids_dirty.clear()  # one short-lived child per uid: only those that ran something since
        _log_lifetimes(self._grading, ended)
        self._rooms.leave()
        self._kind = None

    def release(self) -> None:
        """End the student processes now (their CUDA contexts with them) and empty their scratch folders: nothing
        they wrote outlives them for the next runner of a wave, whose processes may have the same uids."""
        self._kill_all()
        cleanup.wipe_folder(self._scratch)

    def close(self) -> None:
        if self._scratch_guard is not None:
            self._scratch_guard.cancel()
        self._kill_all()
        shutil.rmtree(self._scratch, ignore_errors=True)

    # -- the runner API used by the tests

    @staticmethod
    def _fault(message: str) -> NoReturn:
        """Raise SubmissionFault(message), always from this line: hypothesis tells failures apart by where
        they were raised, and would call a hang reported from two places a flaky test."""
        raise harness.SubmissionFault(message)

    def needs(self, scenario: str, args: dict[str, Any]) -> tuple[str, ...]:
        return serve.files_needed(scenario, args)

    def _blocked(self, needed: tuple[str, ...]) -> tuple[str, str] | None:
        """(limit kind or "", message) when a call needing ``needed`` fails before it runs, else None:
        this test's earlier hang or crash, the budget used up, a file that may not run or hung too often."""
        if self._test_fault:  # one hang or crash per test: hypothesis must not wait for every example to time out
            return self._test_fault_kind, self._test_fault
        if self._budget_left() <= 0:
            return budget.TIME_LIMIT, budget.used_up_message(self.limits.submission_seconds)
        return self.files.blocking(needed)

    def _fail(self, kind: str, message: str) -> NoReturn:
        if kind:
            self._limit(kind, message)
        self._fault(message)

    def _process_for(self, needed: tuple[str, ...]) -> StudentProcess:
        """The live process that imported ``needed``, started if need be (a start failure fails the test)."""
        process = self._processes.get((needed, self._public))
        if process is None:
            try:
                process = self._start(needed)
            except harness.SubmissionFault as exc:
                self._test_fault, self._test_fault_kind = str(exc), budget.CRASH_LIMIT
                self._limit(budget.CRASH_LIMIT, self._test_fault)
            blocked = self._blocked(needed)  # its import hung or failed just now: the call would import it again
            if blocked:
                self._fail(*blocked)
        return process

    def _wall_bound(self, limit: float) -> float:
        """Wall seconds a wait with a CPU-time ``limit`` may last: WALL_FACTOR times it, within the budget left."""
        return max(0.1, min(budget.WALL_FACTOR * limit, self._budget_left()))

    def _call_limit(self, timeout: float | None) -> tuple[float, float, bool]:
        """CPU seconds one call may take, its wall-clock bound, and whether what is left of the budget cut that."""
        limit = min(timeout, self.limits.max_call_seconds) if timeout else self.limits.call_seconds
        wall = self._wall_bound(limit)
        return limit, wall, wall < budget.WALL_FACTOR * limit

    def _send_calls(self, process: StudentProcess, calls: list[dict[str, Any]]) -> int | None:
        """Send one request holding ``calls``; the id of the first reply, or None (then every process is gone)."""
        first = self._next_id + 1
        self._next_id += len(calls)
        self.scenarios_run += len(calls)
        message = {"id": first, "batch": calls} if len(calls) > 1 else {"id": first, **calls[0]}
        self.output.drain(process)  # what it printed before belongs to the test it served then
        process.owner = self._test
        try:
            os.write(process.request_fd, (json.dumps(message) + "\n").encode())
            return first
        except OSError:
            self._kill_all()
            return None

    def _receive(self, process: StudentProcess, expected_id: int, timeout: float | None) -> dict[str, Any]:
        """The reply with ``expected_id``, or a marker: ``{"lost": hung?, ...}`` or ``{"unexpected": why}``."""
        limit, wall, cut_by_budget = self._call_limit(timeout)  # a call may use only what is left of the budget
        reply = process.read(limit, self.output.drain, wall=wall)
        if reply is None:
            hung = process.pid is not None
            at_wall, computing = process.stopped_by == "wall", process.computing
            self._kill_all()
            scratch_full = bool(not hung and self._scratch_guard is not None and self._scratch_guard.exceeded)
            return {"lost": hung, "limit": limit, "cut": cut_by_budget and hung and at_wall,
                    "computing": computing, "scratch": scratch_full}
        if reply.get("id") != expected_id or ("ok" not in reply and "fault" not in reply):
            self._kill_all()
            return {"unexpected": str(reply.get("fault") or "the submission's process sent an unexpected reply")}
        return reply

    def _accept(self, scenario: str, args: dict[str, Any], needed: tuple[str, ...], reply: dict[str, Any]) -> Any:
        """What one call returned, validated; or the SubmissionFault it stands for (limits recorded by kind)."""
        if "lost" in reply:  # the rest of this test fails at once: no restart per hypothesis example
            hung = reply["lost"]
            if reply["cut"]:
                self._test_fault = budget.used_up_message(self.limits.submission_seconds)
            elif hung:
                self.files.hung(needed)
                self._test_fault = budget.not_finished_message("call", reply["computing"], reply["limit"])
            elif reply["scratch"]:
                self._test_fault = f"your code {SCRATCH_FAULT}"
            else:
                self._test_fault = text("call_crash")
            self._test_fault_kind = budget.TIME_LIMIT if hung else budget.CRASH_LIMIT
            self._limit(self._test_fault_kind, self._test_fault)
        if "unexpected" in reply:
            self._test_fault, self._test_fault_kind = reply["unexpected"], budget.INTERFERED
            self._limit(budget.INTERFERED, self._test_fault)
        if "fault" in reply:  # in the feedback's language
            self._fault(words.shown(reply["fault"], reply.get("said"))[:4000])
        problem = replies.problem(scenario, args, reply["ok"])
        if problem:
            self._fault(replies.malformed(problem))
        return reply["ok"]

    def run(self, scenario: str, args: dict[str, Any], *, timeout: float | None = None) -> Any:
        """Run ``scenario`` in a student process; raise SubmissionFault if it cannot, or if the reply is malformed."""
        if scenario == "answers":  # never run: read as literal data
            return harness.read_answers(harness.Submission(self.submission))
        needed = self.needs(scenario, args)
        blocked = self._blocked(needed)
        if blocked:
            self._fail(*blocked)
        waiting = self._prefetched.get((self._test, self._public), {}).get(call_key(scenario, args))
        if waiting:
            return self._accept(scenario, args, needed, waiting.popleft())
        process = self._process_for(needed)
        first = self._send_calls(process, [{"scenario": scenario, "args": args}])
        if first is None:
            self._limit(budget.CRASH_LIMIT, "the submission's process ended unexpectedly")
        return self._accept(scenario, args, needed, self._receive(process, first, timeout))

    def prefetch(self, calls: list[tuple[str, dict[str, Any], float | None]],
                 keys: list[str] | None = None) -> list[str | None]:
        """Run ``calls`` for the current test case ahead of time, one request per process.

        The calls go to the processes of the current test's kind (:meth:`begin_test`), as its live calls do.
        Each reply is kept for the first :meth:`run` of the same call in this test case
        (and used once); the canonical text of each reply is returned for comparison
        (None where a call was not made: a file that cannot run, a hang or crash before it).
        A hang or crash stops its process's batch there; it is charged only if the test
        reaches that call, exactly as a live call would be.  ``keys``: each call's :func:`call_key`, where the caller
        keeps them.
        """
        answers: list[str | None] = [None] * len(calls)
        if self._prefetch_off:
            return answers
        store = self._prefetched.setdefault((self._test, self._public), {})
        groups: dict[tuple[str, ...], list[int]] = {}
        for index, (scenario, args, _timeout) in enumerate(calls):
            if scenario == "answers":  # read here, not run: a fault (not UTF-8) is the test's to report
                try:
                    answers[index] = canonical({"ok": self.run(scenario, args)})
                except harness.SubmissionFault as exc:
                    answers[index] = canonical({"fault": str(exc)})
            else:
                groups.setdefault(self.needs(scenario, args), []).append(index)
        for needed, indices in groups.items():
            if self._blocked(needed):
                continue
            recorded = self._test in self.limits_hit
            try:
                process = self._process_for(needed)
            except harness.SubmissionFault:  # charged when (and if) the test itself reaches the call
                self._test_fault, self._test_fault_kind = None, ""
                if not recorded:
                    self.limits_hit.pop(self._test, None)
                continue
            first = self._send_calls(process, [{"scenario": calls[i][0], "args": calls[i][1]} for i in indices])
            if first is None:
                continue
            for offset, index in enumerate(indices):
                scenario, args, timeout = calls[index]
                reply = self._receive(process, first + offset, timeout)
                store.setdefault(keys[index] if keys else call_key(scenario, args), deque()).append(reply)
                if "lost" in reply or "unexpected" in reply:
                    # A hang costs its wait once: after one, every call is made live (and budgeted as such).
                    self._prefetch_off = self._prefetch_off or bool(reply.get("lost"))
                    break
                answers[index] = canonical({key: reply[key] for key in ("ok", "fault") if key in reply})
        return answers

    def source(self, module: str) -> str | None:
        """The text of one contract file (read by the judge, never executed), or None."""
        path = self.submission / harness.CONTRACT_FILES[module]
        try:
            return path.read_bytes()[: 2**20].decode("utf-8", errors="replace")
        except OSError:
            return None

    def output_by_test(self) -> dict[str, str]:
        """What the student's code printed during each test (node id -> text; "" before any test)."""
        return self.output.by_test(self.submission)
