"""Where a batch's submissions are graded: local worker processes (here), or a Slurm job array
(:mod:`autograder.batch.slurm_pool`).

* :class:`LocalPool`: ``jobs`` long-lived worker processes (:mod:`autograder.batch.worker`) fed
  from one queue a wave at a time (up to :data:`autograder.engine.grader.WAVE`
  submissions, graded phase by phase), each with a uid of its
  own and a watchdog (the submission budget plus a margin, per submission of the wave); a worker that dies or
  overruns is replaced and the submissions of its wave not yet answered are requeued once, each alone.

Both pools call ``finish(submission, digest, outcome, attempts)`` (:data:`Finish`) once per submission; the
batch (:mod:`autograder.batch.run`) records it in the ledger.  This module never imports torch, pytest or
hypothesis.
"""

from __future__ import annotations

import collections
import json
import os
import selectors
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from autograder.engine import grader, plan_cache
from autograder.sandbox import budget
import autograder
from autograder import ROOT, settings
from autograder.batch.inputs import Submission
from autograder.batch.worker import CANARY_EXIT, CANARY_MARK, reference_folder
from autograder.sandbox.uids import block, claim_uid, kill_uid

#: A worker that will grade at least this many submissions replays a cached call plan (autograder/engine/plan.py)
#: against the reference before its first (the canary a fresh recording is; about a third of a grading).
CANARY_MIN_PER_WORKER = 3

Finish = Callable[[Submission, str, dict[str, Any], int], None]


class GraderFault(Exception):
    """The batch itself cannot go on (not a submission's fault)."""


class UsageError(Exception):
    """Bad arguments or an unusable output folder (message for the TA)."""


def worker_env() -> dict[str, str]:
    env = dict(os.environ)
    # Workers import the very packages this process did, from wherever they are (a checkout, site-packages).
    import checks

    roots = list(dict.fromkeys(str(Path(module.__file__).resolve().parent.parent) for module in (autograder, checks)))
    env["PYTHONPATH"] = os.pathsep.join(roots + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    return env


def error_outcome(reason: str) -> dict[str, Any]:
    from autograder.engine import results  # imports the judge (pytest, torch): only on this rare path

    message = f"Your submission could not be graded: {reason}. Staff have been told."
    return {"status": "errored", "reason": reason, "results": results.error_results(message), "staff_log": "",
            "seconds": 0.0}



# --------------------------------------------------------------------------- local workers


def _canary_line(log: Path) -> str | None:
    """The last reason to refuse grading (``worker.CANARY_MARK``) in a worker's log (appended to across runs)."""
    try:
        lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    return next((line for line in reversed(lines) if line.startswith(CANARY_MARK)), None)


@dataclass
class _Job:
    submission: Submission
    digest: str
    task_id: int


class _Worker:
    def __init__(self, slot: int, config: str, logs: Path) -> None:
        self.slot = slot
        claim = claim_uid(slot)  # its student processes' block of uids: this worker's alone, machine-wide
        self.uid, self._uid_lock = claim if claim else (None, None)
        logs.mkdir(parents=True, exist_ok=True)
        log = open(logs / f"worker-{slot}.log", "ab")
        command = [sys.executable, "-m", "autograder.batch.worker", "--slot", str(slot), "--parent", str(os.getpid()),
                   "--config", config] + (["--uid", str(self.uid)] if self.uid is not None else [])
        try:
            self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                                         env=worker_env(), cwd=str(ROOT), start_new_session=True)
        finally:
            log.close()
        assert self.proc.stdout is not None and self.proc.stdin is not None
        self.fd = self.proc.stdout.fileno()
        os.set_blocking(self.fd, False)
        self.buffer = b""
        self.ready = False
        self.eof = False
        self.retiring = False
        self.jobs: list[_Job] = []  # its wave: the submissions sent and not yet answered
        self.budget = 0.0  # the watchdog's seconds for its wave...
        self.deadline = 0.0  # ...and when it stops it
        self.count = 0

    def send(self, message: dict[str, Any]) -> bool:
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write((json.dumps(message) + "\n").encode())
            self.proc.stdin.flush()
            return True
        except (BrokenPipeError, OSError, ValueError):
            return False

    def read_messages(self) -> list[dict[str, Any]]:
        try:
            while True:
                chunk = os.read(self.fd, 1 << 20)
                if not chunk:
                    self.eof = True
                    break
                self.buffer += chunk
        except BlockingIOError:
            pass
        except OSError:
            self.eof = True
        messages = []
        while b"\n" in self.buffer:
            line, self.buffer = self.buffer.split(b"\n", 1)
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if isinstance(message, dict):
                messages.append(message)
        return messages

    def retire(self) -> None:
        self.retiring = True
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
        except OSError:
            pass

    def stop(self, grace: float = 3.0) -> None:
        """SIGTERM (the worker stops its student process), then SIGKILL; kill its uid's leftovers."""
        if self.proc.poll() is None:
            for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
                try:
                    os.killpg(self.proc.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    self.proc.wait(wait)
                    break
                except subprocess.TimeoutExpired:
                    continue
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # the zygote, should it linger
        except (ProcessLookupError, PermissionError):
            pass
        if self.uid is not None:
            kill_uid(*block(self.uid))
        if self._uid_lock is not None:
            self._uid_lock.close()  # every process of the uid is gone: another worker may have it
            self._uid_lock = None
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            pass


class LocalPool:
    """``jobs`` worker processes on this machine, fed from one queue."""

    STARTUP_FAILURES = 3

    def __init__(self, out: Path, jobs: int, hide: tuple[str, ...], limits: dict[str, Any],
                 max_per_worker: int = 200) -> None:
        self.jobs = max(1, jobs)
        self.logs = out / ".logs"
        self.config = json.dumps({"hide": list(hide), "limits": limits})
        self.max_per_worker = max(1, max_per_worker)
        # the sandbox's budget (one number, autograder.sandbox.budget), $AMP_SANDBOX_LIMITS, then ours
        merged: dict[str, Any] = {"submission_seconds": budget.SUBMISSION_SECONDS}
        try:
            merged.update(settings.sandbox_limits())
        except ValueError:
            pass
        merged.update({k: v for k, v in limits.items() if v})
        #: a worker busy longer than this on one submission is stopped (its limits failed to): the
        #: sandbox cuts every call to what is left of the budget, so only the judge's bookkeeping runs past it
        self.watchdog = budget.watchdog_seconds(float(merged["submission_seconds"]))

    def run(self, todo: Sequence[tuple[Submission, str]], finish: Finish) -> None:
        config = json.loads(self.config)
        config["plan_key"] = plan_cache.plan_key(reference_folder())  # so that workers need not compute it
        if len(todo) >= CANARY_MIN_PER_WORKER * self.jobs:
            config["canary"] = True
        self.config = json.dumps(config)
        queue = collections.deque(todo)
        attempts: collections.Counter[str] = collections.Counter()
        failures: collections.Counter[int] = collections.Counter()
        workers: dict[int, _Worker] = {}
        selector = selectors.DefaultSelector()
        next_id = 0

        def start(slot: int) -> None:
            worker = _Worker(slot, self.config, self.logs)
            workers[slot] = worker
            selector.register(worker.fd, selectors.EVENT_READ, worker)

        def feed(worker: _Worker) -> None:
            """Send an idle worker the next wave, or retire it when there is none.  A wave is at most WAVE and at
            most its share of what is left (so that the last waves end together); a submission already tried once
            goes alone (a wave that killed its worker never takes a classmate down twice)."""
            nonlocal next_id
            if not queue:
                worker.retire()
                return
            size = min(grader.WAVE, -(-len(queue) // self.jobs))
            while queue and len(worker.jobs) < size:
                if worker.jobs and attempts[queue[0][0].name]:
                    break
                submission, digest = queue.popleft()
                next_id += 1
                worker.jobs.append(_Job(submission, digest, next_id))
                if attempts[submission.name]:
                    break
            worker.budget = self.watchdog * len(worker.jobs)
            worker.deadline = time.monotonic() + worker.budget
            tasks = [{"task": job.task_id, "name": job.submission.name, "path": str(job.submission.path)}
                     for job in worker.jobs]
            if not worker.send({"kind": "grade", "tasks": tasks}):
                died(worker, "its input closed")

        def drop(worker: _Worker) -> None:
            try:
                selector.unregister(worker.fd)
            except (KeyError, ValueError):
                pass
            worker.stop()
            workers.pop(worker.slot, None)

        def died(worker: _Worker, why: str) -> None:
            wave, worker.jobs = worker.jobs, []
            drop(worker)
            if not wave:
                if not worker.ready and worker.proc.poll() == CANARY_EXIT:
                    log = self.logs / f"worker-{worker.slot}.log"
                    raise GraderFault(_canary_line(log) or f"the reference solution loses points here; see {log}")
                if not worker.ready and not worker.retiring:
                    failures[worker.slot] += 1
                    if failures[worker.slot] >= self.STARTUP_FAILURES:
                        raise GraderFault(f"a grading worker could not start ({why}); see "
                                          f"{self.logs / f'worker-{worker.slot}.log'}")
            for job in reversed(wave):  # requeued in their order, at the front
                name = job.submission.name
                attempts[name] += 1
                if attempts[name] >= 2:
                    finish(job.submission, job.digest,
                           error_outcome(f"the grading worker died twice while grading it ({why})"), attempts[name])
                else:
                    queue.appendleft((job.submission, job.digest))
            if queue and len(workers) < self.jobs:
                start(worker.slot)

        try:
            for slot in range(min(self.jobs, len(queue))):
                start(slot)
            while queue or any(w.jobs for w in workers.values()):
                if not workers:
                    start(0)
                for worker in list(workers.values()):
                    if worker.ready and not worker.jobs and not worker.retiring:
                        feed(worker)
                for key, _ in selector.select(timeout=0.5):
                    worker = key.data
                    for message in worker.read_messages():
                        if message.get("kind") == "ready":
                            worker.ready = True
                            failures[worker.slot] = 0
                        elif message.get("kind") == "result" and (job := next(
                                (job for job in worker.jobs if job.task_id == message.get("task")), None)):
                            worker.jobs.remove(job)
                            worker.count += 1
                            if not worker.jobs and worker.count >= self.max_per_worker and queue:
                                worker.retire()  # a fresh worker replaces it (bounded memory growth)
                            elif not worker.jobs:  # its next wave first: it grades while this one is recorded
                                feed(worker)
                            finish(job.submission, job.digest, message, attempts[job.submission.name] + 1)
                now = time.monotonic()
                for worker in list(workers.values()):
                    code = worker.proc.poll()
                    if worker.eof or code is not None:
                        if worker.retiring and not worker.jobs:
                            drop(worker)
                            if queue and len(workers) < self.jobs:
                                start(worker.slot)
                        else:
                            died(worker, f"exit status {worker.proc.wait()}")
                    elif worker.jobs and now > worker.deadline:
                        died(worker, f"still busy after {worker.budget:.0f} s; stopped")
        finally:
            for worker in list(workers.values()):
                drop(worker)
            selector.close()
