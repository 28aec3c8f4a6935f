"""Batch grading for TAs: many submissions, parallel, resumable, with a gradebook and a summary.

``python -m autograder grade PATH... --out OUT [--jobs N] [--force] [--executor slurm]``

* **Inputs** (:mod:`autograder.batch.inputs`): submission folders and zips, folders or zips of
  them, Gradescope exports (students' names from ``submission_metadata.yml``), GitHub Classroom's
  cloned repositories (names from its roster: ``--roster``, :mod:`autograder.batch.roster`).
* **Parallel**: ``--jobs`` worker processes (:mod:`autograder.batch.worker`), each importing
  torch and starting its zygote once, then grading submission after submission, each
  in its own sandboxed student process under a uid that worker alone uses (claimed
  machine-wide, so concurrent batch runs never kill each other's student processes).
  ``--executor slurm`` sends chunks of submissions to a Slurm job array via submitit.
* **Resumable** (:mod:`autograder.batch.ledger`): every finished submission is committed to
  ``OUT/ledger.sqlite`` in one transaction; a rerun of the same command grades only
  what is missing or whose files (content hash) or grader changed (a change of the rubric's points alone
  rescores the stored verdicts, running no code: :mod:`autograder.batch.rescore`); ``--force`` regrades
  everything.  Outputs are rendered from the ledger, atomically.
* **Robust**: a hostile submission costs only its own tests; a worker that dies (or
  overruns its watchdog) is replaced and its submission requeued once, then recorded
  as not graded with the reason.
* **Outputs** (:mod:`autograder.batch.summary`): gradebook.csv, per-submission results.json,
  feedback.md and staff.log, summary.md/json and score_histogram.png.

The main process never imports torch, pytest or hypothesis (except to build an error
result in the rare case a worker dies twice on the same submission).
"""

from __future__ import annotations

import collections
import dataclasses
import fcntl
import os
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from autograder.batch import console, feedback, inputs, regrade, rescore, roster, summary
from autograder.batch.digest import content_digest
from autograder.diagnosis import report_html as class_report
from autograder.engine import fingerprint, grader, rubric, strings
from autograder import ROOT, settings
from autograder.engine.escape import strip_controls
from autograder.batch.inputs import Submission
from autograder.batch.ledger import Entry, Ledger
from autograder.batch.pools import GraderFault, LocalPool, UsageError
from autograder.batch.slurm_pool import SlurmPool

#: Besides the engine and the public and hidden tests (:mod:`autograder.engine.fingerprint`), what decides a grade.
GRADER_FILES = (ROOT / "autograder" / "batch" / "worker.py", ROOT / "autograder" / "batch" / "slurm_chunk.py")

@dataclass
class Options:
    out: Path
    jobs: int = 0  # 0: one per core
    force: bool = False
    retry_errored: bool = False
    executor: str = "local"
    progress: bool | None = None  # None: when stdout is a terminal
    limits: dict[str, float] = field(default_factory=dict)  # sandbox.Limits fields to override
    max_per_worker: int = 200
    slurm: dict[str, Any] = field(default_factory=dict)
    similarity: bool = True  # similarity.csv/.html and a summary section (autograder.batch.similarity)
    similarity_threshold: float | None = None  # None: chosen from the pair scores
    similarity_reference: Sequence[Path] = ()  # earlier submissions to compare against
    similarity_solution: bool = True  # also compare with the reference solution (solutions/), flagging matches
    min_isolation: str | None = None  # refuse below this isolation level (None: $AMP_MIN_ISOLATION, else levels.SEALED)
    roster: Path | None = None  # GitHub Classroom's roster CSV: names for cloned repositories (autograder.batch.roster)
    same_sid: str = "latest"  # which of several submissions of one SID is graded (inputs.SAME_SID_CHOICES)


def default_jobs() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)


def grader_fingerprint(limits: dict[str, Any]) -> str:
    """Hash of everything that decides a grade: tests, judge, rubric, the worker, limits, settings.

    Two parts, ``SCORING.POINTS``: a change of the rubric's points alone leaves the first part as it was, and
    the batch rescores the stored verdicts instead of running student code again (:mod:`.rescore`).
    """
    scoring = fingerprint.scoring_digest(fingerprint.grader_files() + list(GRADER_FILES),
                                         {**fingerprint.settings(), "limits": limits})
    return f"{scoring}.{fingerprint.points_digest()}"


# --------------------------------------------------------------------------- progress


class ProgressView:
    """A rich progress bar with ETA and live counts; silent when not on a terminal.

    Counts: *graded* (has a score), *failed* (graded, lost points), *errored* (could not be graded).
    """

    def __init__(self, total: int, enabled: bool) -> None:
        self.counts = {"graded": 0, "failed": 0, "errored": 0}
        self._progress = None
        if not enabled or total == 0:
            return
        from rich.console import Console
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                                   TimeRemainingColumn)

        self._progress = Progress(
            TextColumn("[bold]grading"), BarColumn(bar_width=24), MofNCompleteColumn(),
            TextColumn("[green]{task.fields[graded]} graded[/] [yellow]{task.fields[failed]} failed[/] "
                       "[red]{task.fields[errored]} errored[/]"),
            TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
            console=Console(file=sys.stdout), transient=False)
        self._task = self._progress.add_task("grading", total=total, **self.counts)
        self._progress.start()

    def finished(self, entry: Entry) -> None:
        if entry.status == "errored":
            self.counts["errored"] += 1
        else:
            self.counts["graded"] += 1
            if any(t.get("status") == "failed" for t in entry.results.get("tests", [])):
                self.counts["failed"] += 1
        if self._progress is not None:
            self._progress.update(self._task, advance=1, **self.counts)

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None


# --------------------------------------------------------------------------- the run


def _lock(out: Path) -> Any:
    handle = open(out / ".lock", "w")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        raise UsageError(f"another grading run is using {out}; wait for it or choose another --out") from None
    return handle


def _sweep_temporary_files(out: Path) -> None:
    """Temporary files of atomic writes interrupted by a kill."""
    for pattern in (".*.tmp", "*/.*.tmp", "*/.results.json.*"):
        for stale in out.glob(pattern):
            if stale.is_file():
                stale.unlink(missing_ok=True)


def _similarity_section(out: Path, submissions: Sequence[Submission], options: Options) -> str:
    """similarity.csv/.html and the summary section; a failure here costs the report, not the grades."""
    from autograder.batch import similarity

    try:
        references = inputs.discover(options.similarity_reference, out / ".inputs", exclude=[out]).submissions
        return similarity.run_for_batch(out, submissions, references, options.similarity_threshold,
                                        similarity.REFERENCE_SOLUTION if options.similarity_solution else None)
    except Exception as exc:  # noqa: BLE001 - reported in summary.md; the grades are written regardless
        print(f"warning: the similarity report failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return f"\n## Similarity\n\nThe similarity report failed: {type(exc).__name__}.\n"


class _Idle:
    """``job`` run in a thread of its own at the lowest CPU priority, beside the grading: it takes only what the
    graders leave idle (their waits for a room, the start), and what it returns is :meth:`result`."""

    def __init__(self, job: Callable[[], str]) -> None:
        self._job, self._result = job, ""
        self._thread = threading.Thread(target=self._run, name="similarity", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)  # this thread only (Linux)
        except (AttributeError, OSError):
            pass
        self._result = self._job()

    def result(self) -> str:
        self._thread.join()
        return self._result


def run(paths: Sequence[Path], options: Options) -> int:
    """Grade everything named by ``paths`` into ``options.out``; the process exit status."""
    missing = [str(path) for path in [*paths, *options.similarity_reference, *filter(None, [options.roster])]
               if not Path(path).exists()]
    if missing:
        raise UsageError(f"no such file or folder: {', '.join(missing)}")
    check_isolation(options.min_isolation)
    report_diagnosis()
    out = options.out.resolve()
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {options.out} is a file")
    out.mkdir(parents=True, exist_ok=True)
    lock = _lock(out)
    try:
        return _run_locked(paths, options, out)
    finally:
        lock.close()


def check_isolation(cli_value: str | None) -> str:
    """The isolation level student processes reach here; UsageError if below the minimum asked for."""

    try:
        reached = grader.check_isolation(cli_value)
    except ValueError as exc:
        raise UsageError(f"{exc} (from --min-isolation or ${settings.MIN_ISOLATION.env})") from None
    except grader.IsolationRefused as refused:
        raise UsageError(str(refused)) from None
    print(strings.text("console.isolation", level=reached), file=sys.stderr)
    return reached


def report_diagnosis() -> None:
    """One line when grading here diagnoses nothing, or from a stale table (never a silent "no mistakes")."""
    from autograder.diagnosis.table import state

    line = state().line()
    if line:
        print(line, file=sys.stderr)


def _rescore(todo: list[tuple[Submission, str]], known: dict[str, tuple[str, str]], version: str, ledger: Ledger,
             out: Path, errored: set[str]) -> tuple[list[tuple[Submission, str]], int]:
    """Rescore, without running code, what only the rubric's points would change; (what is left to grade, count).

    An unchanged submission that could not be graded keeps its verdict under the new grader: nothing that decides
    whether it can be graded changed (``--retry-errored`` grades it again)."""
    left, count = [], 0
    for submission, digest in todo:
        old = known.get(submission.name)
        entry = (ledger.get(submission.name) if old and old[0] == digest and submission.name not in errored
                 and rescore.points_only(old[1], version) else None)
        new = rescore.rescored(entry, version) if entry is not None else None
        if entry is not None and entry.status == "errored":  # the same files fail the same way: kept, not retried
            new = dataclasses.replace(entry, grader=version)
        if new is None:
            left.append((submission, digest))
            continue
        ledger.record(new)
        feedback.write_submission_files(out, submission, new)
        count += 1
    return left, count


def _run_locked(paths: Sequence[Path], options: Options, out: Path) -> int:
    _sweep_temporary_files(out)
    try:
        students = roster.read_roster(options.roster) if options.roster else None  # a bad roster stops before grading
        found = inputs.discover(paths, out / ".inputs", exclude=[out], reserved=summary.RESERVED,
                                same_sid=options.same_sid)
    except inputs.InputError as exc:
        raise UsageError(str(exc)) from None
    if students is not None:
        roster.name_submissions(found, students)
    for note in found.notes:
        print(f"note: {strip_controls(note)}", file=sys.stderr)  # names from the input: no escape codes
    version = grader_fingerprint(options.limits)  # of the grader: a change regrades
    withheld = [s for s in found.submissions if s.withheld]  # nothing to grade: a row each, no score, no ledger entry
    gradable = [s for s in found.submissions if not s.withheld]
    digests = {s.name: content_digest(s.path) for s in gradable}
    similar: _Idle | None = None
    ledger = Ledger(out / "ledger.sqlite")
    try:
        known = ledger.keys()
        errored = {e.name for e in ledger.entries() if e.status == "errored"} if options.retry_errored else set()
        todo = [(s, digests[s.name]) for s in gradable
                if options.force or known.get(s.name) != (digests[s.name], version) or s.name in errored]
        regrading = any(s.name in known and known[s.name][1] != version for s, _ in todo)
        regrade.keep_previous_gradebook(out, regrading, version)
        todo, rescored = (todo, 0) if options.force else _rescore(todo, known, version, ledger, out, errored)
        why = collections.Counter(
            "forced" if options.force else "new" if s.name not in known
            else "changed" if known[s.name][0] != d
            else "grader" if known[s.name][1] != version
            else "retry" for s, d in todo)
        jobs = min(options.jobs or default_jobs(), max(1, len(todo)))
        print(console.plan_line(len(found.submissions), len(gradable) - len(todo) - rescored, rescored, why,
                                "" if not todo else "slurm" if options.executor == "slurm" else jobs, withheld),
              flush=True)
        if len(found.submissions) >= summary.HISTOGRAM_MIN_SUBMISSIONS:
            summary.preload_plotting()  # overlaps with grading
        if options.similarity and (len(found.submissions) > 1 or options.similarity_reference
                                   or options.similarity_solution):  # else: no pair
            similar = _Idle(lambda: _similarity_section(out, gradable, options))  # reads no grade
        enabled = sys.stdout.isatty() if options.progress is None else options.progress
        view = ProgressView(len(todo), enabled)

        def finish(submission: Submission, digest: str, outcome: dict[str, Any], attempts: int) -> None:
            data = outcome["results"]
            entry = Entry(submission.name, digest, version, outcome["status"], float(data.get("score", 0.0)),
                          float(rubric.max_points()), data, str(outcome.get("reason") or ""),
                          str(outcome.get("staff_log") or ""), submission.source, float(outcome.get("seconds") or 0),
                          attempts)
            ledger.record(entry)  # the commit point: from here on, this submission is done
            feedback.write_submission_files(out, submission, entry)
            view.finished(entry)

        hide = grader.private_paths(out)
        try:
            if todo and options.executor == "slurm":
                SlurmPool(out, hide, options.limits, version, options.slurm).run(todo, finish)
            elif todo:
                LocalPool(out, jobs, hide, options.limits, options.max_per_worker).run(todo, finish)
        finally:
            view.close()
        rows = [(submission, feedback.withheld_entry(submission)) for submission in withheld]
        for submission in gradable:
            entry = ledger.get(submission.name)
            if entry is None or entry.digest != digests[submission.name]:
                raise GraderFault(f"{submission.name} was not recorded in the ledger")
            rows.append((submission, entry))
        sections = [regrade.report_for_batch(out, ledger, rows)]
    finally:
        ledger.close()
    if similar is not None:
        sections.append(similar.result())
    report = summary.write_outputs(out, rows, found.has_identity, sections)
    class_report.write_for_batch(out)  # the class report: report.html, items.csv, mistakes.csv
    console.print_report(rows, report, out)
    return 0
