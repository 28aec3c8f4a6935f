"""Where a batch's submissions are graded on a cluster: chunks of submissions as a Slurm job array (submitit).

Results come back through an inbox folder; Slurm's refusals become one line for the TA.  The pool answers the batch
through the same ``finish`` contract as the local workers (:mod:`autograder.batch.pools`).  This module never
imports torch, pytest or hypothesis.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Sequence

from autograder.batch.inputs import Submission
from autograder.batch.pools import Finish, UsageError, error_outcome, worker_env


class SlurmPool:
    """Chunks of submissions as a Slurm job array (submitit); results come back through an inbox.

    Each array task writes one JSON file per graded submission into ``OUT/.inbox`` as it
    goes; the batch moves them into the ledger.  A run killed while jobs are running
    gathers their results when it is resumed.  Submissions whose job failed are sent
    again once, then recorded as not graded.
    """

    def __init__(self, out: Path, hide: tuple[str, ...], limits: dict[str, Any], grader: str,
                 settings: dict[str, Any]) -> None:
        self.out = out
        self.inbox = out / ".inbox"
        self.hide = list(hide)
        self.limits = limits
        self.grader = grader
        self.cluster = settings.get("cluster") or "slurm"
        self.chunk = max(1, int(settings.get("chunk") or 20))
        self.poll = float(settings.get("poll") or 5.0)
        self.parameters = {
            "name": "amp-grade",
            "timeout_min": int(settings.get("time_min") or 60),
            "cpus_per_task": int(settings.get("cpus") or 2),
            "mem_gb": float(settings.get("mem_gb") or 8),
            "slurm_partition": settings.get("partition"),
            "slurm_array_parallelism": int(settings.get("parallelism") or 64),
        }

    def _ingest(self, pending: dict[str, tuple[Submission, str]], finish: Finish, rounds: int) -> None:
        for file in sorted(self.inbox.glob("*.json")):
            try:
                data = json.loads(file.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue  # not complete yet? written atomically, so: not ours
            name = data.get("name")
            if name in pending and data.get("digest") == pending[name][1] and data.get("grader") == self.grader:
                submission, digest = pending.pop(name)
                finish(submission, digest, data, rounds)
            file.unlink(missing_ok=True)

    def run(self, todo: Sequence[tuple[Submission, str]], finish: Finish) -> None:
        try:
            import submitit
        except ImportError:
            raise UsageError("--executor slurm needs submitit: pip install -e '.[slurm]'") from None
        from autograder.batch import slurm_chunk

        self.inbox.mkdir(parents=True, exist_ok=True)
        for stale in self.inbox.glob(".*"):
            stale.unlink(missing_ok=True)
        pending = {s.name: (s, d) for s, d in todo}
        self._ingest(pending, finish, 1)
        os.environ["PYTHONPATH"] = worker_env()["PYTHONPATH"]  # the jobs import autograder
        reasons: dict[str, str] = {}
        for round_ in (1, 2):
            if not pending:
                break
            try:
                executor = submitit.AutoExecutor(folder=self.out / ".submitit", cluster=self.cluster)
            except Exception as exc:  # noqa: BLE001 - e.g. no sbatch on this machine
                raise UsageError(f"cannot use the {self.cluster!r} executor here: {exc}") from None
            executor.update_parameters(**{k: v for k, v in self.parameters.items() if v is not None})
            items = sorted(pending.values(), key=lambda sd: sd[0].name)
            chunks = [items[i:i + self.chunk] for i in range(0, len(items), self.chunk)]
            payloads = [[{"name": s.name, "path": str(s.path), "digest": d, "grader": self.grader} for s, d in chunk]
                        for chunk in chunks]
            uids = [k for k in range(len(chunks))]  # hints: each task claims a free uid where it runs
            from autograder.batch.slurm_errors import rejection_message, sbatch_chatter

            with sbatch_chatter():  # submitit echoes sbatch's stderr; the one-line message below says it
                try:
                    jobs = executor.map_array(slurm_chunk.grade_chunk, payloads, [str(self.inbox)] * len(chunks),
                                              [self.hide] * len(chunks), [self.limits] * len(chunks), uids)
                except submitit.core.utils.FailedJobError as exc:  # sbatch refused the array
                    raise UsageError(rejection_message(exc, self.parameters)) from None
            job_of = {task["name"]: job for job, payload in zip(jobs, payloads) for task in payload}
            try:
                while not all(job.done() for job in jobs):
                    self._ingest(pending, finish, round_)
                    time.sleep(self.poll)
            except KeyboardInterrupt:
                print(f"\nThe Slurm jobs ({jobs[0].job_id.split('_')[0]}...) keep running; the same command gathers "
                      "their results later.", file=sys.stderr)
                raise
            self._ingest(pending, finish, round_)
            for name in pending:
                job = job_of[name]
                try:
                    problem = job.exception()
                except Exception as exc:  # noqa: BLE001 - submitit's own failure to read the result
                    problem = exc
                last = (str(problem).strip().splitlines() or [""])[-1] if problem else ""
                reasons[name] = (f"Slurm job {job.job_id} ended without a result for it"
                                 + (f" ({type(problem).__name__}: {last})"[:300] if problem else ""))
        for name, (submission, digest) in sorted(pending.items()):
            finish(submission, digest, error_outcome(reasons.get(name, "its Slurm job failed twice")), 2)
