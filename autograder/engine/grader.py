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

import contextlib
import dataclasses
import gc
import json
import os
import shutil
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

#: Modules the zygote must never hold: importing any of them before :func:`start` is refused.
#: (The reference amp_step among them: a student process that could reach it would have Task 2's answer.)
JUDGE_ONLY_MODULES = ("pytest", "hypothesis", "autograder.engine.judge", "autograder.engine.amp_reference",
                      "autograder.hidden")

#: The most submissions a batch grades in one wave (:func:`grade_submissions`): their student processes wait for
#: the machine's rooms four times a wave instead of four times a submission, and a wave's copies and runners are
#: a few megabytes each.
WAVE = 4

_STARTED: dict[str, Any] = {}
#: The wave being graded (its gradings' runners and staging folders), for a worker's SIGTERM handler.
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
    :data:`levels.SEALED`); a level below SEALED allowed by name is warned about on stderr.

    Raises:
        IsolationRefused: the level reached is below the one required.
        ValueError: ``required`` (or the variable) names no level.
    """
    from autograder.sandbox import confine, levels

    wanted = levels.required_level(required)
    reached = confine.probe_level()
    refused = levels.refusal(reached, wanted)
    if refused:
        raise IsolationRefused(refused, reached)
    warning = levels.unsealed_warning(reached)
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
    from autograder.sandbox import runner as sandbox

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
    from autograder.sandbox import runner as sandbox

    known = sandbox.Limits.__dataclass_fields__
    chosen = {key: value for key, value in (fields or {}).items() if key in known and value is not None}
    return dataclasses.replace(sandbox.default_limits(), **chosen)


def runner_factory(hide: Sequence[str] = (), limits_: Any = None, uid: int | None = None) -> Any:
    """A function that opens a sandboxed runner on a folder (for recording or replaying the call plan)."""
    from autograder.sandbox.runner import SandboxRunner

    start()
    chosen = limits_ or limits()
    return lambda folder: SandboxRunner(Path(folder), limits=chosen, hide=tuple(hide), uid=uid)


def grade_submission(name: str, path: Path, **options: Any) -> dict[str, Any]:
    """Grade one folder or zip: a wave of one (:func:`grade_submissions`, which says what ``options`` are); its
    outcome."""
    return grade_submissions([(name, path)], **options)[0]


def grade_submissions(tasks: Sequence[tuple[str, Path]], *, hide: Sequence[str] = (), limits_: Any = None,
                      uid: int | None = None, call_plan: Any = None,
                      describe: Callable[[Any, str], dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Grade a wave of folders or zips (name, path) in sandboxed student processes, phase by phase: every
    submission's processes of the first kind (:data:`autograder.sandbox.phases.KINDS`) in turn, then the next kind's,
    inside one room of the machine's the whole time, so that the gradings of other workers wait for a room four times
    a wave rather than four times a submission.  Each submission is graded exactly as alone (its own runner, budget,
    messages and time); between two of its steps it has no student process alive.  Never raises for a submission's
    faults.

    Args:
        tasks: each submission's name (shown in results.json's output when nothing else is) and folder or zip
            (staged into a scratch folder first; the original is never touched).
        hide: paths no student process may read (the output folder, the grader's sources).
        limits_: the sandbox's :class:`~autograder.sandbox.runner.Limits` (default: :func:`limits`).
        uid: the uid student processes run as (as root), or None.
        call_plan: the reference's :class:`~autograder.engine.plan.Plan`: tests whose answers match it pass
            without running; grades are the same with or without it.
        describe: turns the judge's report into results.json (default: the plain rows,
            :func:`autograder.engine.results.gradescope_results`); the entry points pass
            :func:`autograder.diagnosis.match.diagnosed_results`, which adds the "Likely mistake" lines: the
            diagnosis sits above the engine, so it comes in as a value, never as an import.

    Returns:
        One outcome per task, in order: ``status`` ("graded" or "errored"), ``reason`` (why it could not be
        graded), ``results`` (results.json), ``staff_log`` and ``seconds`` (its own time, intake included).
    """
    start()
    from autograder.sandbox import phases

    chosen = limits_ or limits()
    rooms = phases.Rooms(keep=True)
    wave = [_Grading(name, Path(path), chosen) for name, path in tasks]
    CURRENT["wave"] = wave
    try:
        for grading in wave:
            grading.open(hide, uid, rooms, call_plan)
        for _kind in phases.KINDS:
            for grading in wave:
                grading.step()
        rooms.vacate()  # every process ended: the room is free while the results are written
        return [grading.finish(describe) for grading in wave]
    finally:
        CURRENT.clear()
        for grading in wave:
            grading.close()
        rooms.vacate()
        first = not _STARTED.get("graded")
        _STARTED["graded"] = _STARTED.get("graded", 0) + len(wave)
        if first:
            gc.freeze()  # the test modules, imported by the first grading, stay for good too


class _Grading:
    """One submission of a wave: staged, its runner opened, graded a phase per :meth:`step`, then described.

    Each call is its turn (:meth:`_turn`): the time between two turns (the other submissions') is neither charged to
    its budget nor counted as its time.
    A grader fault ends it as "errored" (:attr:`outcome`) and never stops the others.
    """

    def __init__(self, name: str, path: Path, chosen: Any) -> None:
        self.name, self.path, self.limits = name, path, chosen
        self.outcome: dict[str, Any] | None = None  # set once it cannot go on (intake refused it, a grader fault)
        self.report: Any = None
        self.staged: Any = None
        self.runner: Any = None
        self.steps: Any = None
        self.seconds = 0.0  # its own time in earlier turns
        self._turn_began = self._paused = time.monotonic()

    @contextlib.contextmanager
    def _turn(self) -> Iterator[None]:
        self._turn_began = began = time.monotonic()
        if self.runner is not None:
            self.runner.started += began - self._paused  # the other submissions' turns are never its budget
        try:
            yield
        except Exception as exc:  # noqa: BLE001 - a grader fault must not stop the batch
            from autograder.engine import results, strings

            self.outcome = {"status": "errored", "reason": f"grader fault ({type(exc).__name__}: {exc})"[:500],
                            "results": results.error_results(strings.fallback_text("fault")),
                            "staff_log": traceback.format_exc(), "seconds": round(self._own(), 3)}
            self.close()
        finally:
            self._paused = time.monotonic()
            self.seconds += self._paused - began

    def _own(self) -> float:
        """Its own time so far, this turn's included: once its runner exists, what its budget was charged (the
        runner's clock leaves out the other submissions' turns and its waits for a room), intake included."""
        if self.runner is not None:
            return time.monotonic() - self.runner.started
        return self.seconds + time.monotonic() - self._turn_began

    def open(self, hide: Sequence[str], uid: int | None, rooms: Any, call_plan: Any) -> None:
        from autograder.engine import intake, plan, results
        from autograder.sandbox.runner import SandboxRunner

        with self._turn():
            try:  # the budget (submission_seconds) counts intake too
                self.staged = intake.stage(self.path, deadline=self._turn_began + self.limits.submission_seconds)
            except intake.IntakeError as exc:
                data = results.error_results(str(exc))
                data["execution_time"] = round(self._own(), 1)
                self.outcome = {"status": "errored", "reason": str(exc), "results": data, "staff_log": "",
                                "seconds": round(self._own(), 3)}
                return
            self.runner = SandboxRunner(self.staged.folder, limits=self.limits, hide=tuple(hide), uid=uid, rooms=rooms)
            self.runner.started = self._turn_began
            self.steps = plan.grade_in_phases(self.runner, call_plan, notes=self.staged.notes)

    def step(self) -> None:
        """Its next phase (or, once every phase is done, its report); then no process of it is alive."""
        if self.outcome is not None or self.report is not None:
            return
        with self._turn():
            try:
                next(self.steps)
            except StopIteration as done:
                self.report = done.value
            finally:
                self.runner.release()
            if self.runner.phase_fault is not None:  # caught as a test's failure: the grading is the grader's fault
                raise self.runner.phase_fault

    def finish(self, describe: Callable[[Any, str], dict[str, Any]] | None) -> dict[str, Any]:
        from autograder.engine import results

        while self.outcome is None and self.report is None:
            self.step()
        if self.outcome is not None:
            return self.outcome
        with self._turn():
            report = self.report
            report.seconds = self._own()  # its own turns, intake included: never the other submissions'
            data = (describe or results.gradescope_results)(report, self.name)
            data["extra_data"] = {**data.get("extra_data", {}), **sandbox_records(self.runner)}
            if report.notes:  # what the top of the feedback tells (intake, broken files), for the TAs' class report
                data["extra_data"]["notes"] = list(report.notes)
            json.dumps(data, allow_nan=False)  # what the ledger will store
            staff_log = f"isolation level: {data['extra_data']['isolation']}\n\n{report.staff_log}".strip()
            return {"status": "graded", "reason": "", "results": data, "staff_log": staff_log,
                    "seconds": round(self._own(), 3)}
        return self.outcome  # describing it was the grader's fault

    def close(self) -> None:
        """End its student processes and remove its staged copy (again: harmless)."""
        runner, staged, self.runner = self.runner, self.staged, None
        self.staged = None
        try:
            if runner is not None:
                runner.close()
        finally:
            if staged is not None:
                shutil.rmtree(staged.folder, ignore_errors=True)


def stop_current() -> None:
    """Stop the submissions being graded (their student processes) and remove their staging folders."""
    for grading in CURRENT.get("wave", ()):
        grading.close()


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
