"""The one door: every entry point grades a submission through :func:`grade_submission`.

The command line's workers, a Slurm array task, Gradescope's ``run_autograder`` and any later
platform call :func:`grade_submission`; the diagnosis build and the plan recorder, which answer
calls rather than grade, start the same way through :func:`start`.  Nothing else constructs
the grading sequence (intake, sandbox, call plan, judge, results.json).

Start-up order is part of the isolation, so it lives here and nowhere else.  The zygote that
forks every student process must be started while this process holds torch and the
scenario runners but not pytest, hypothesis or the hidden tests: whatever the zygote holds,
every student process inherits.  :func:`start` does that once per process (zygote first, then
the judge's imports, then torch's heap out of the garbage collector's sight), and
:func:`grade_submission` calls it, so no caller can get the order wrong: a caller that imported
pytest first gets :class:`StartOrderError` instead of a zygote holding the hidden tests.

This module imports only the standard library at import time, so importing it is never the
mistake this order guards against.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import os
import shutil
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable, Sequence

#: Modules the zygote must never hold: importing any of them before :func:`start` is refused.
#: (The reference amp_step among them: a student process that could reach it would have Task 2's answer.)
JUDGE_ONLY_MODULES = ("pytest", "hypothesis", "autograder.engine.judge", "autograder.engine.amp_reference",
                      "autograder.hidden")

_STARTED: dict[str, Any] = {}
#: The submission being graded (its runner and staging folder), for a worker's SIGTERM handler.
CURRENT: dict[str, Any] = {}


class StartOrderError(RuntimeError):
    """The process imported what the zygote must not hold before the zygote was started."""


class IsolationRefused(Exception):
    """Student code would run below the minimum isolation level asked for; ``str()`` says so for staff."""

    def __init__(self, message: str, reached: str) -> None:
        super().__init__(message)
        self.reached = reached


def check_isolation(required: str | None) -> str:
    """The isolation level a student process reaches here.

    ``required`` is the minimum asked for (a level's name, or None for ``$AMP_MIN_ISOLATION``'s, else
    :data:`confine.SEALED`); a level below SEALED allowed by name is warned about on stderr.

    Raises:
        IsolationRefused: the level reached is below the one required.
        ValueError: ``required`` (or the variable) names no level.
    """
    from autograder.engine import confine

    wanted = confine.required_level(required)
    reached = confine.probe_level()
    refused = confine.refusal(reached, wanted)
    if refused:
        raise IsolationRefused(refused, reached)
    warning = confine.unsealed_warning(reached)
    if warning:
        print(warning, file=sys.stderr)  # the console, or the platform's staff log
    return reached


def start(*, import_dynamo: bool = False) -> None:
    """Start this process's grading machinery in the only safe order; once per process, later calls do nothing.

    Raises:
        StartOrderError: pytest, hypothesis or the hidden tests were imported before the zygote.
    """
    if _STARTED:
        return
    early = [name for name in JUDGE_ONLY_MODULES if name in sys.modules]
    if early:
        raise StartOrderError(f"imported before the sandbox's zygote: {', '.join(early)}; every student process "
                              f"would hold them (start the grader before importing them)")
    from autograder.engine import sandbox

    export_language()
    _STARTED["zygote"] = sandbox.start_zygote(import_dynamo=import_dynamo)
    gc.freeze()  # torch's heap, now shared with the zygote, out of the sight of the collections pytest's import makes
    from autograder.engine import judge  # noqa: F401 - pytest, hypothesis: only now, after the fork

    # torch's, pytest's and hypothesis's objects out of the collector's sight: pytest collects after
    # every session, and with torch in the heap each collection takes a good fraction of a second.  No
    # collection first: it would cost that same fraction, for the few cycles imports leave behind.
    gc.freeze()


def export_language() -> None:
    """Put the feedback language in this process's environment when only a built grader's language.json names it,
    so that the checks' own messages (``checks.words`` reads ``$AMP_LANGUAGE``) speak it too.  Student processes
    get a clean environment and speak English whatever it says (``checks.words``' docstring)."""
    from autograder import settings
    from autograder.engine import strings
    from checks import words

    try:
        chosen = strings.language()
    except (ValueError, OSError):  # an unknown language: the grader's own texts refuse it where they are used
        return
    if not words.requested() and chosen != strings.DEFAULT:
        os.environ[settings.LANGUAGE.env] = chosen


def private_paths(out: Path, extra: Sequence[Path] = ()) -> tuple[str, ...]:
    """Folders a student process must not see (covered by empty mounts where possible): the grader's own
    package (hidden tests, call plan, diagnosis table), a checkout's solutions and tests, the output
    folder, the plan cache, and ``extra``."""
    from autograder import PACKAGE, ROOT
    from autograder.engine import plan_cache

    candidates = [PACKAGE, ROOT / "solutions", ROOT / "tests", out, Path("/autograder/results"),
                  Path("/autograder/source/autograder"), plan_cache.cache_dir(), *extra]
    return tuple(sorted({str(p.resolve()) for p in candidates if _reachable(p)}))


def _reachable(path: Path) -> bool:
    """Whether ``path`` exists for the grading user.  A path it may not even look at (someone else's cache named
    by ``$AMP_PLAN_CACHE``) needs no hiding: student processes run with no more rights than the grader."""
    try:
        return path.exists()
    except OSError:  # PermissionError above all (Path.exists only swallows "not found" before Python 3.12)
        return False


def limits(fields: dict[str, Any] | None = None) -> Any:
    """The sandbox's default limits (``$AMP_SANDBOX_LIMITS`` included) with the given ``fields`` overridden."""
    from autograder.engine import sandbox

    known = sandbox.Limits.__dataclass_fields__
    chosen = {key: value for key, value in (fields or {}).items() if key in known and value is not None}
    return dataclasses.replace(sandbox.default_limits(), **chosen)


def runner_factory(hide: Sequence[str] = (), limits_: Any = None, uid: int | None = None) -> Any:
    """A function that opens a sandboxed runner on a folder (for recording or replaying the call plan)."""
    from autograder.engine.sandbox import SandboxRunner

    start()
    chosen = limits_ or limits()
    return lambda folder: SandboxRunner(Path(folder), limits=chosen, hide=tuple(hide), uid=uid)


def grade_submission(name: str, path: Path, *, hide: Sequence[str] = (), limits_: Any = None,
                     uid: int | None = None, call_plan: Any = None,
                     describe: Callable[[Any, str], dict[str, Any]] | None = None) -> dict[str, Any]:
    """Grade one folder or zip in a sandboxed student process; never raises for the submission's faults.

    Args:
        name: the submission's name (shown in results.json's output when nothing else is).
        path: its folder or zip (staged into a scratch folder first; the original is never touched).
        hide: paths no student process may read (the output folder, the grader's sources).
        limits_: the sandbox's :class:`~autograder.engine.sandbox.Limits` (default: :func:`limits`).
        uid: the uid student processes run as (as root), or None.
        call_plan: the reference's :class:`~autograder.engine.plan.Plan`: tests whose answers match it pass
            without running; grades are the same with or without it.
        describe: turns the judge's report into results.json (default: the plain rows,
            :func:`autograder.engine.results.gradescope_results`); the entry points pass
            :func:`autograder.diagnosis.match.diagnosed_results`, which adds the "Likely mistake" lines: the
            diagnosis sits above the engine, so it comes in as a value, never as an import.

    Returns:
        ``status`` ("graded" or "errored"), ``reason`` (why it could not be graded), ``results``
        (results.json), ``staff_log`` and ``seconds``.
    """
    start()
    from autograder.engine import intake, plan, results, strings
    from autograder.engine.sandbox import SandboxRunner

    chosen = limits_ or limits()
    started = time.monotonic()  # the budget (submission_seconds) counts intake too
    staged = runner = None
    try:
        try:
            staged = intake.stage(path, deadline=started + chosen.submission_seconds)
        except intake.IntakeError as exc:
            data = results.error_results(str(exc))
            data["execution_time"] = round(time.monotonic() - started, 1)
            return {"status": "errored", "reason": str(exc), "results": data,
                    "staff_log": "", "seconds": round(time.monotonic() - started, 3)}
        CURRENT["staged"] = staged.folder
        runner = SandboxRunner(staged.folder, limits=chosen, hide=tuple(hide), uid=uid)
        runner.started = started
        CURRENT["runner"] = runner
        report = plan.grade_with_plan(runner, call_plan, notes=staged.notes)
        runner.release()  # the last phase's processes end now: its room is free while the results are written
        if runner.phase_fault is not None:  # caught as a test's failure: the grading is the grader's fault
            raise runner.phase_fault
        data = (describe or results.gradescope_results)(report, name)
        data["execution_time"] = round(time.monotonic() - started, 1)  # everything, intake included
        data["extra_data"] = {**data.get("extra_data", {}), **sandbox_records(runner)}
        if report.notes:  # what the top of the feedback tells (intake, broken files), for the TAs' class report
            data["extra_data"]["notes"] = list(report.notes)
        json.dumps(data, allow_nan=False)  # what the ledger will store
        staff_log = f"isolation level: {data['extra_data']['isolation']}\n\n{report.staff_log}".strip()
        return {"status": "graded", "reason": "", "results": data, "staff_log": staff_log,
                "seconds": round(time.monotonic() - started, 3)}
    except Exception as exc:  # noqa: BLE001 - a grader fault must not stop the batch
        return {"status": "errored", "reason": f"grader fault ({type(exc).__name__}: {exc})"[:500],
                "results": results.error_results(strings.fallback_text("fault")), "staff_log": traceback.format_exc(),
                "seconds": round(time.monotonic() - started, 3)}
    finally:
        CURRENT.clear()
        if runner is not None:
            runner.close()
        if staged is not None:
            shutil.rmtree(staged.folder, ignore_errors=True)
        _STARTED["graded"] = _STARTED.get("graded", 0) + 1
        if _STARTED["graded"] == 1:
            gc.freeze()  # the test modules, imported by the first grading, stay for good too


def stop_current() -> None:
    """Stop the submission being graded (its student processes) and remove its staging folder."""
    runner, staged = CURRENT.get("runner"), CURRENT.get("staged")
    try:
        if runner is not None:
            runner.close()
    finally:
        if staged is not None:
            shutil.rmtree(staged, ignore_errors=True)


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
