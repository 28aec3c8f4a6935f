"""A grading worker: the grader started once (:func:`autograder.engine.grader.start`), then many submissions.

``python -m autograder.batch.worker --slot K ...`` is started by :mod:`autograder.batch.run`.  It
starts the grader (the zygote before pytest, in the order the engine owns), records or loads the
call plan, then reads one wave of submissions per line on stdin, grades it with
:func:`autograder.engine.grader.grade_submissions` (phase by phase) and answers one JSON line per submission on
its stdout:

    -> {"kind": "grade", "tasks": [{"task": 7, "name": "alice", "path": "/abs/alice.zip"}, ...]}
    <- {"kind": "result", "task": 7, "name": "alice", "status": "graded", "results": {...}, ...}

Every submission still runs in its own sandboxed student process (forked from the
zygote, limited, unprivileged: uid ``--uid``, claimed by the batch for this worker
only, see :func:`autograder.sandbox.uids.claim_uid`).  Nothing but
fds 0-2 is open when the zygote forks, and student processes replace those, so no
student process holds the worker's channel to the batch.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any, Sequence

from autograder import settings  # stdlib only
from autograder.engine import grader  # stdlib only: no torch before the zygote
from autograder.sandbox import confine
#: A worker whose reference solution loses points exits with this status, after one log line that
#: starts with CANARY_MARK: the batch stops and shows that line (no grades rather than wrong ones).
CANARY_EXIT = 3
CANARY_MARK = "refusing to grade: "

_TERMINATING = False


# --------------------------------------------------------------------------- the worker process


def _on_terminate(signum: int, _frame: Any) -> None:
    """Stop the current student process (and everything its uid owns), then leave at once.

    Runs once: a batch process killed with -9 sends SIGTERM again for each of its threads (the kernel
    hands the worker from one dying thread to the next), and a second cleanup started inside the first
    one's ``fork`` waits forever on a lock the first one holds.
    """
    global _TERMINATING
    if _TERMINATING:
        return
    _TERMINATING = True
    try:
        grader.stop_current()
    finally:
        os._exit(128 + signum)


def _send(fd: int, message: dict[str, Any]) -> None:
    data = (json.dumps(message, allow_nan=False) + "\n").encode()
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def serve(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder.batch.worker")
    parser.add_argument("--slot", type=int, required=True)
    parser.add_argument("--parent", type=int, required=True)
    parser.add_argument("--uid", type=int, default=None)
    parser.add_argument("--config", required=True, help="JSON: hide (list of paths) and limits")
    args = parser.parse_args(argv)
    config = json.loads(args.config)
    confine.die_with_parent(signal.SIGTERM, args.parent)  # SIGTERM even when the batch is killed with -9
    signal.signal(signal.SIGTERM, _on_terminate)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the batch decides when workers stop

    from autograder.sandbox import uids

    if args.uid is not None and os.geteuid() == 0:
        uids.kill_uid(*uids.block(args.uid))  # leftovers of a killed run that held this block before us
    grader.start()
    channel = os.dup(1)  # created after the zygote forked: no student process can inherit it
    os.dup2(2, 1)  # stray prints go to the worker's log, never into the channel
    from autograder.diagnosis.match import diagnosed_results
    from autograder.engine import intake, plan

    intake.sweep_stale()  # staging folders of grading processes killed before they could clean up
    limits = grader.limits(config.get("limits"))
    hide = tuple(config.get("hide", ()))
    # The reference solution passes every test: a short per-submission budget (a TA's --submission-timeout)
    # must not cut its recording short, or the whole batch would go without a plan.
    roomy = dataclasses.replace(limits, submission_seconds=max(limits.submission_seconds, 600.0))
    try:  # cached from an earlier run, else recorded now (about one grading) and cached for the next
        call_plan = plan.current_plan(grader.runner_factory(hide, roomy, args.uid), reference_folder(),
                                      check=bool(config.get("canary")), key=config.get("plan_key"))
    except plan.ReferenceFails as exc:
        print(f"{CANARY_MARK}{exc}", file=sys.stderr, flush=True)  # the batch shows this line and stops
        return CANARY_EXIT
    _send(channel, {"kind": "ready", "pid": os.getpid(), "slot": args.slot})
    die_on = settings.die_on()
    for line in sys.stdin.buffer:
        message = json.loads(line)
        if message.get("kind") == "stop":
            break
        tasks = message["tasks"]
        if die_on is not None and any(die_on == task["name"] for task in tasks):  # a test hook: a worker crash
            os._exit(70)
        outcomes = grader.grade_submissions([(task["name"], Path(task["path"])) for task in tasks], hide=hide,
                                            limits_=limits, uid=args.uid, call_plan=call_plan,
                                            describe=diagnosed_results)
        for task, outcome in zip(tasks, outcomes):
            _send(channel, {"kind": "result", "task": task["task"], "name": task["name"], **outcome})
    return 0


def reference_folder() -> Path:
    """The reference solution a worker records its plan (and its canary) from."""
    from autograder import locations

    return settings.reference_override() or locations.REFERENCE_SOLUTION


if __name__ == "__main__":
    status = serve()
    sys.stdout.flush()  # both go to the log; every answer went out through os.write, every student process is stopped
    sys.stderr.flush()
    os._exit(status)  # no interpreter shutdown of a process holding torch: it costs CPU the batch's own work wants
