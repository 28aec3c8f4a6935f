"""A grading worker: torch imported and the zygote started once, then many submissions.

``python -m autograder.batch.worker --slot K ...`` is started by :mod:`autograder.batch.run`.  It
imports torch, starts the sandbox's zygote, and only then imports pytest, hypothesis
and the hidden tests (the zygote must never hold them).  It then reads one task per
line on stdin and answers one JSON line per task on its stdout:

    -> {"task": 7, "name": "alice", "path": "/abs/alice.zip"}
    <- {"kind": "result", "task": 7, "name": "alice", "status": "graded", "results": {...}, ...}

Every submission still runs in its own sandboxed student process (forked from the
zygote, limited, unprivileged: uid ``--uid``, claimed by the batch for this worker
only, see :func:`autograder.engine.uids.claim_uid`).  Nothing but
fds 0-2 is open when the zygote forks, and student processes replace those, so no
student process holds the worker's channel to the batch.

:func:`grade_chunk` is the same thing for one Slurm array task (via submitit): it
writes each result into an inbox folder that the batch gathers into its ledger.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import os
import shutil
import signal
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Sequence

from autograder import settings  # stdlib only
from autograder.engine import confine  # stdlib only: no torch before the zygote
from autograder.engine.uids import claim_uid  # stdlib only

FAULT_MESSAGE = ("The grader could not grade this submission because of an internal problem (not your fault); "
                 "staff have the details and will regrade it.")
#: A worker whose reference solution loses points exits with this status, after one log line that
#: starts with CANARY_MARK: the batch stops and shows that line (no grades rather than wrong ones).
CANARY_EXIT = 3
CANARY_MARK = "refusing to grade: "

_CURRENT: dict[str, Any] = {}
_TERMINATING = False


def limits_from(fields: dict[str, Any] | None) -> Any:
    """The sandbox's default limits (``$AMP_SANDBOX_LIMITS`` included) with ``fields`` overridden."""
    from autograder.engine import sandbox

    base = sandbox.default_limits()
    known = sandbox.Limits.__dataclass_fields__
    return dataclasses.replace(base, **{k: v for k, v in (fields or {}).items() if k in known and v is not None})


def grade_submission(name: str, path: Path, hide: Sequence[str], limits: Any, uid: int | None,
                     call_plan: Any = None) -> dict[str, Any]:
    """Grade one folder/zip in a sandboxed student process; never raises for the submission's faults.

    With ``call_plan`` (:mod:`autograder.engine.plan`) the tests whose answers match the reference's pass
    without running; grades are the same either way.

    Returns ``status`` ("graded" or "errored"), ``reason`` (why it could not be graded),
    ``results`` (results.json), ``staff_log`` and ``seconds``.
    """
    from autograder.diagnosis.match import diagnosed_results
    from autograder.engine import intake, plan, results
    from autograder.engine.sandbox import SandboxRunner

    started = time.monotonic()  # the budget (limits.submission_seconds) counts intake too
    staged = runner = None
    try:
        try:
            staged = intake.stage(path, deadline=started + limits.submission_seconds)
        except intake.IntakeError as exc:
            data = results.error_results(str(exc))
            data["execution_time"] = round(time.monotonic() - started, 1)
            return {"status": "errored", "reason": str(exc), "results": data,
                    "staff_log": "", "seconds": round(time.monotonic() - started, 3)}
        _CURRENT["staged"] = staged.folder
        runner = SandboxRunner(staged.folder, limits=limits, hide=tuple(hide), uid=uid)
        runner.started = started
        _CURRENT["runner"] = runner
        report = plan.grade_with_plan(runner, call_plan, notes=staged.notes)
        data = diagnosed_results(report, name)
        data["execution_time"] = round(time.monotonic() - started, 1)  # everything, intake included
        data["extra_data"] = {**data.get("extra_data", {}), **sandbox_records(runner)}
        json.dumps(data, allow_nan=False)  # what the ledger will store
        staff_log = f"isolation level: {data['extra_data']['isolation']}\n\n{report.staff_log}".strip()
        return {"status": "graded", "reason": "", "results": data, "staff_log": staff_log,
                "seconds": round(time.monotonic() - started, 3)}
    except Exception as exc:  # noqa: BLE001 - a grader fault must not stop the batch
        trace = traceback.format_exc()
        return {"status": "errored", "reason": f"grader fault ({type(exc).__name__}: {exc})"[:500],
                "results": results.error_results(FAULT_MESSAGE), "staff_log": trace,
                "seconds": round(time.monotonic() - started, 3)}
    finally:
        _CURRENT.clear()
        if runner is not None:
            runner.close()
        if staged is not None:
            shutil.rmtree(staged.folder, ignore_errors=True)


def sandbox_records(runner: Any) -> dict[str, Any]:
    """results.json's ``extra_data``: the isolation level reached and the limits hit, per rubric number.

    Taken from the sandbox's own records, never from message text (see budget.LIMIT_KINDS).
    """
    from autograder.engine import rubric

    number_of = {item.test: item.number for item in rubric.ITEMS}
    hit: dict[str, str] = {}
    for node, kind in sorted(getattr(runner, "limits_hit", {}).items()):
        test = node.split("::")[-1].split("[")[0]
        if test in number_of:
            hit.setdefault(number_of[test], kind)
    return {"isolation": getattr(runner, "isolation", None) or "not measured (no student process started)",
            "limits_hit": hit}


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
    runner = _CURRENT.get("runner")
    try:
        if runner is not None:
            runner.close()
        staged = _CURRENT.get("staged")
        if staged is not None:
            shutil.rmtree(staged, ignore_errors=True)
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

    from autograder.engine import files, sandbox  # torch, the harness: what student processes may hold

    if args.uid is not None and os.geteuid() == 0:
        files.kill_uid(args.uid)  # leftovers of a killed run that held this uid before us
    sandbox.start_zygote()
    channel = os.dup(1)  # created after the zygote forked: no student process can inherit it
    os.dup2(2, 1)  # stray prints go to the worker's log, never into the channel
    from autograder.engine import intake, judge, results  # noqa: F401 - pytest, hypothesis, hidden tests: after the fork

    intake.sweep_stale()  # staging folders of grading processes killed before they could clean up
    limits = limits_from(config.get("limits"))
    hide = tuple(config.get("hide", ()))
    from autograder.engine import plan
    from autograder.engine.sandbox import SandboxRunner

    # The reference solution passes every test: a short per-submission budget (a TA's --submission-timeout)
    # must not cut its recording short, or the whole batch would go without a plan.
    roomy = dataclasses.replace(limits, submission_seconds=max(limits.submission_seconds, 600.0))
    try:  # cached from an earlier run, else recorded now (about one grading) and cached for the next
        call_plan = plan.current_plan(lambda folder: SandboxRunner(folder, limits=roomy, hide=hide, uid=args.uid),
                                      reference_folder(), check=bool(config.get("canary")), key=config.get("plan_key"))
    except plan.ReferenceFails as exc:
        print(f"{CANARY_MARK}{exc}", file=sys.stderr, flush=True)  # the batch shows this line and stops
        return CANARY_EXIT
    _freeze_heap()
    _send(channel, {"kind": "ready", "pid": os.getpid(), "slot": args.slot})
    graded = 0
    die_on = settings.die_on()
    for line in sys.stdin.buffer:
        task = json.loads(line)
        if task.get("kind") == "stop":
            break
        if die_on is not None and die_on == task["name"]:  # a test hook: a worker crash
            os._exit(70)
        if graded == 1:
            _freeze_heap()  # the test modules, imported by the first grading, stay for good too
        outcome = grade_submission(task["name"], Path(task["path"]), hide, limits, args.uid, call_plan)
        _send(channel, {"kind": "result", "task": task["task"], "name": task["name"], **outcome})
        graded += 1
    return 0


def reference_folder() -> Path:
    """The reference solution a worker records its plan (and its canary) from."""
    from autograder import ROOT

    return settings.reference_override() or ROOT / "solutions"


def _freeze_heap() -> None:
    """Move what is alive now (torch, pytest, hypothesis, the tests) out of the garbage collector's sight.

    pytest runs full collections after every session (for unraisable exceptions); with
    torch's objects in the heap each one takes a good fraction of a second.  Objects
    created while grading are still collected as usual.  No collection first: it would cost that
    same fraction of a second, for the few cycles that imports leave behind.
    """
    gc.freeze()


# --------------------------------------------------------------------------- one Slurm array task


def inbox_file(inbox: Path, name: str, digest: str) -> Path:
    return inbox / f"{name}.{digest[:20]}.json"


def grade_chunk(tasks: list[dict[str, Any]], inbox: str, hide: list[str], limits: dict[str, Any],
                uid: int | None) -> list[str]:
    """Grade ``tasks`` (name, path, digest, grader) one by one; each result lands in ``inbox``.

    Runs inside a submitit job: the zygote is started before pytest is imported.
    """
    from autograder.engine import sandbox

    sandbox.start_zygote()
    from autograder.engine import judge  # noqa: F401 - after the fork, as in a local worker
    from autograder.engine.files import write_json_atomic

    claim = claim_uid(uid or 0)  # several array tasks may share a node
    uid = claim[0] if claim else None
    folder = Path(inbox)
    done = []
    _freeze_heap()
    for task in tasks:
        target = inbox_file(folder, task["name"], task["digest"])
        if target.exists():
            done.append(task["name"])
            continue
        outcome = grade_submission(task["name"], Path(task["path"]), hide, limits_from(limits), uid)
        write_json_atomic(target, {"name": task["name"], "digest": task["digest"], "grader": task["grader"],
                                   **outcome})
        done.append(task["name"])
        if len(done) == 1:
            _freeze_heap()
    return done


if __name__ == "__main__":
    sys.exit(serve())
