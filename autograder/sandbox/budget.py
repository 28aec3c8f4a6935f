"""The one per-submission time budget and the names of the limits a submission can hit.

Light (standard library only): the CLI's help, the sandbox's :class:`~autograder.sandbox.runner.Limits`
and the batch's watchdog all read their numbers from here, so they cannot disagree.

* :data:`SUBMISSION_SECONDS` is the wall time for everything one submission costs: intake,
  every import and call, and the judge's own work in between.  The sandbox cuts each call
  to what is left of it; once it is spent, every remaining test fails at once with
  "time budget used up" and the submission is **graded** (its finished tests keep their
  points), never "errored".
* :data:`IMPORT_SECONDS` and :data:`CALL_SECONDS` are CPU time of the student's process, with a
  wall-clock bound of :data:`WALL_FACTOR` times as much for a process that waits instead of computing
  (measured in :mod:`autograder.sandbox.student_processes`): a busy machine is never charged to a
  submission.
* The batch watchdog (:func:`watchdog_seconds`) only catches a worker whose limits failed:
  the budget plus a fixed grace for the judge's bookkeeping after the budget is spent.
"""

from __future__ import annotations

from autograder.engine.strings import text

SUBMISSION_SECONDS = 300.0
CALL_SECONDS = 20.0
IMPORT_SECONDS = 10.0
MAX_CALL_SECONDS = 120.0  # a test may ask for a longer call, never past this (nor past the budget)
#: An import or call limit of N seconds of CPU time lets a process wait up to WALL_FACTOR * N seconds of wall time.
WALL_FACTOR = 2.0
WATCHDOG_GRACE_SECONDS = 90.0

#: Kinds of limits the sandbox records per test (summary.PROBLEMS uses the same names).
TIME_LIMIT = "time limit"
CRASH_LIMIT = "crash, exit or memory limit"
INTERFERED = "interfered with the grader"
LIMIT_KINDS = (TIME_LIMIT, CRASH_LIMIT, INTERFERED)


def watchdog_seconds(submission_seconds: float = SUBMISSION_SECONDS) -> float:
    """How long a batch worker may spend on one submission before it is stopped."""
    return float(submission_seconds) + WATCHDOG_GRACE_SECONDS


def used_up_message(submission_seconds: float) -> str:
    """The failure of every test that runs after the budget is spent."""
    return text("budget_used_up", seconds=submission_seconds)


def not_finished_message(step: str, computing: bool, limit: float, **fields: str) -> str:
    """Why an import or a call (``step``: "import" or "call") with a CPU-time ``limit`` was stopped: a process that was
    computing (a loop) by that limit, one that was waiting by its wall bound, WALL_FACTOR times it."""
    if computing:
        return text(f"{step}_timeout", seconds=limit, **fields)
    return text(f"{step}_waited", seconds=WALL_FACTOR * limit, **fields)
