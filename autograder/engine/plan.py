"""The call plan: grade a correct submission once, then grade the rest by comparing their answers.

Grading is derandomized, so a test's hypothesis examples, and with them every call
it makes to the student process, depend only on the answers it gets back.  Grading
the reference solution once therefore records, per test case, the exact calls a
*passing* run makes and the exact answers that make it pass.  For every further
submission, :func:`grade_in_phases`:

1. sends each case's recorded calls to the student process in one batch
   (:meth:`autograder.sandbox.runner.SandboxRunner.prefetch`: one round trip per case and
   kind of process, not per call, which is what dominates grading time on a loaded machine);
2. a case whose answers are byte-identical to the recorded ones passes without
   running its test: given the same answers, the same deterministic test code would
   take the same path and pass, as it did for the solution;
3. every other test runs in pytest as before; its first calls are served from the
   answers already fetched (each used once, in order), later ones (hypothesis
   shrinking a failure) are made live.

It goes phase by phase (:data:`autograder.sandbox.phases.KINDS`): one kind's calls for every case, then the
tests of that kind that must run in pytest, then the next kind; so each kind's processes start once, none is
alive beside another kind's, and the public checks' tests (their live calls included) are over before any hidden
input is served.  A hidden row's test and its public example share a case's name: the public example's calls
are compared, and its test run, in the public phases; the hidden test's in the hidden ones.

Only cases whose verdict is a function of the answers alone are skipped: a case that
reads the submission's source or the runner's state is always run.
A crash or hang inside a batch stops that batch where it happened and is charged when
(and only if) the test reaches that call, as a live call would be.

The plan holds hidden inputs and the reference's answers: it is as secret as the hidden
tests.  It is shipped next to the hidden tests (the Gradescope zip), or kept on disk by
:func:`current_plan` in the grading user's own cache (:mod:`autograder.engine.plan_cache`),
keyed by a hash of the engine, the public and hidden tests, the reference solution's
files, the switches and the library versions: any change to one of them records a new plan.
Recording is per process and per reference, so a runner that spreads a submission over
several student processes (hidden and public tests apart) records and replays the same way:
the plan holds calls per test case, each marked with whether a public test made it, never which
process answered them.
"""

from __future__ import annotations

import functools
import json
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Generator

from autograder import locations
from autograder.engine import plan_cache, rubric
from autograder.sandbox import phases
from autograder.sandbox.runner import call_key, canonical  # the one text answers are compared by
from autograder import settings

if TYPE_CHECKING:  # the judge imports pytest: only after the grader started (python -m of this module)
    from autograder.engine import judge

SHIPPED = locations.SHIPPED_PLAN


@dataclass
class Call:
    scenario: str
    args: dict[str, Any]
    timeout: float | None
    answer: str  # canonical({"ok": ...}) or canonical({"fault": ...}) of the solution's reply
    #: Made by a test of the public checks: sent to processes that serve nothing hidden.  (A hidden row's test has
    #: its public example's name, so one case holds the calls of both.)
    public: bool = False

    @functools.cached_property
    def key(self) -> str:
        """:func:`call_key` of the call, once per process: a worker sends the plan's calls for every submission."""
        return call_key(self.scenario, self.args)


@dataclass
class Case:
    test: str  # the test function
    name: str  # the pytest case name (test function plus parameters)
    calls: list[Call] = field(default_factory=list)
    answers_only: bool = True  # False when the test also read the source or the runner's state


@dataclass
class Plan:
    cases: list[Case]
    origin: str = "recorded now"  # or "shipped" (the Gradescope zip), "cached" (plan_cache): for staff logs

    def to_json(self) -> str:
        return json.dumps({"cases": [{"test": c.test, "name": c.name, "answers_only": c.answers_only,
                                      "calls": [asdict(c2) for c2 in c.calls]} for c in self.cases]})

    @classmethod
    def from_json(cls, text: str) -> "Plan":
        data = json.loads(text)
        return cls([Case(c["test"], c["name"], [Call(**call) for call in c["calls"]], c["answers_only"])
                    for c in data["cases"]])


#: Runner attributes whose use makes a test's verdict depend on more than the answers it got.
STATE_READERS = frozenset({"source", "import_faults", "hangs", "needs", "limits", "submission"})


class RecordingRunner:
    """Wraps a runner over the reference solution and records every call per test case."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.cases: dict[str, Case] = {}
        self.current: Case | None = None
        self.public = False

    def begin_test(self, name: str, *, public: bool = False) -> None:
        self.inner.begin_test(name, public=public)
        self.current = self.cases.setdefault(name, Case(name.split("[", 1)[0], name))
        self.public = public

    def run(self, scenario: str, args: dict[str, Any], *, timeout: float | None = None) -> Any:
        args = json.loads(json.dumps(args))  # what the student process receives
        try:
            value = self.inner.run(scenario, args, timeout=timeout)
            answer = canonical({"ok": value})
        except Exception as exc:
            answer = canonical({"fault": str(exc)})
            raise
        finally:
            if self.current is not None:
                self.current.calls.append(Call(scenario, args, timeout, answer, self.public))
        return value

    def output_by_test(self) -> dict[str, str]:
        return self.inner.output_by_test()

    def close(self) -> None:
        self.inner.close()

    def __getattr__(self, name: str) -> Any:
        # source(), rule_fault(), import_faults...: the verdict then depends on more than the answers.
        # (hypothesis probes a test's first argument for hooks such as ``execute_example``: not those.)
        if self.current is not None and name in STATE_READERS:
            self.current.answers_only = False
        return getattr(self.inner, name)


class ReferenceFails(Exception):
    """The reference solution does not get full marks here: this machine cannot grade fairly.

    Recording the plan doubles as a canary.  When correct code loses points, the cause is the
    machine (a sandbox layer that breaks Python, an unreachable interpreter, ...), and every
    submission graded there would lose the same points: better no grades than wrong ones.
    """


def record(solution: Path = locations.REFERENCE_SOLUTION, runner_factory: Any = None) -> Plan:
    """Grade ``solution`` once and return its plan.

    Raises:
        ReferenceFails: a row of the reference solution failed (its message says which and why).
    """
    staged, inner = _staged_runner(solution, runner_factory)
    recorder = RecordingRunner(inner)
    try:
        from autograder.engine import judge

        started = time.monotonic()
        outcomes, pytest_output = judge.run_suites(recorder, rubric.ITEMS)
        # Once every test has run, what the report reads (import faults, missing files) is no test's: charged to the
        # last test run, it would make that test run in pytest in every later grading instead of passing on its answers.
        recorder.current = None
        report = judge.build_report(recorder, rubric.ITEMS, outcomes, pytest_output, None, started)
    finally:
        _close(staged, inner)
    failed = [row for row in report.rows if not row.passed]
    if failed:
        first = failed[0]
        detail = " ".join(first.message.split())[:300]
        if first.internal:  # the student's words say only "internal": staff need the judge's own (a misdeclared row)
            why = next((block for block in report.staff_log.split("\n\n") if block.startswith(first.item.test)), "")
            detail += f" ({' '.join(why.split())[:300]})" if why else ""
        raise ReferenceFails(f"the reference solution ({solution}) loses points on this machine, so grading here "
                             f"would not be fair: {len(failed)} row(s) fail, the first {first.item.number} "
                             f"'{first.item.title}': {detail}")
    return Plan(list(recorder.cases.values()))


_PLANS: dict[Path, Plan | None] = {}  # this process's plan per reference folder


def shipped_plan() -> Plan | None:
    """The plan built with the autograder zip (``make autograder``), if any and not switched off."""
    if settings.plan_off() or not SHIPPED.is_file():
        return None
    return _parsed(SHIPPED.read_text(), "shipped")


def _parsed(text: str | None, origin: str) -> Plan | None:
    try:
        found = None if text is None else Plan.from_json(text)
    except (ValueError, KeyError, TypeError, AttributeError):
        return None  # a damaged plan only costs speed
    if found is not None:
        found.origin = origin
    return found


def fetch_phase(runner: Any, cases: list[Case], answered: dict[str, list[str | None]], kind: int) -> None:
    """Every case's recorded calls that run in processes of ``kind`` (:data:`phases.KINDS`), sent through ``runner``
    ahead of their tests (``prefetch``), so that the runner starts that kind's processes once.  Each answer lands
    in ``answered[case.name]`` at its call's place."""
    public = phases.KINDS[kind].public
    for case in cases:
        indices = [index for index, call in enumerate(case.calls)
                   if call.public == public and phases.phase_of(call.scenario, call.args, public) == kind]
        if indices:
            runner.begin_test(case.name, public=public)
            fetched = runner.prefetch([(case.calls[i].scenario, case.calls[i].args, case.calls[i].timeout)
                                       for i in indices], keys=[case.calls[i].key for i in indices])
            answers = answered.setdefault(case.name, [None] * len(case.calls))
            for index, answer in zip(indices, fetched):
                answers[index] = answer


def fetch_ahead(runner: Any, cases: list[Case]) -> dict[str, list[str | None]]:
    """Every call of ``cases`` sent ahead through ``runner``, phase by phase (:func:`fetch_phase`); the answers by
    case name, in call order."""
    answered: dict[str, list[str | None]] = {case.name: [None] * len(case.calls) for case in cases}
    for kind in range(len(phases.KINDS)):
        fetch_phase(runner, cases, answered, kind)
    return answered


def _matches(case: Case, answers: list[str | None], public: bool | None = None) -> bool:
    """Whether ``case`` passes on ``answers`` without running its test: its verdict depends on the answers alone
    and they equal the reference's.  With ``public`` (True or False): the case of that suite's test alone, which
    must have made calls of its own.  A case with no call of its own got its data from a shared fixture (the
    Quick Check answers): never."""
    own = [(call, answer) for call, answer in zip(case.calls, answers) if public is None or call.public == public]
    return case.answers_only and bool(own) and all(answer == call.answer for call, answer in own)


def reference_agrees(found: Plan, runner: Any) -> bool:
    """Whether the reference, run through ``runner``, still gives every answer ``found`` recorded.

    The canary for a plan taken from the cache: one batched round trip per case (about a
    third of a recording).  A disagreement means the plan or this machine changed since.
    """
    cases = [case for case in found.cases if case.calls]
    answered = fetch_ahead(runner, cases)
    return all(answered[case.name] == [c.answer for c in case.calls] for case in cases)


def current_plan(runner_factory: Any = None, solution: Path = locations.REFERENCE_SOLUTION, check: bool = False,
                 key: str | None = None) -> Plan | None:
    """This process's plan: the shipped one, else the cached one, else recorded from ``solution`` (and cached).

    None when switched off (``AMP_PLAN=off``) or when there is neither a shipped plan nor a
    reference solution.  With ``check`` a cached plan is first replayed against the reference
    (:func:`reference_agrees`), and recorded anew if they disagree: the canary a recording is.
    ``key`` is :func:`plan_cache.plan_key` of ``solution`` when the caller has it already.

    Raises:
        ReferenceFails: from :func:`record`.
    """
    if settings.plan_off():
        return None
    if solution not in _PLANS:
        found = shipped_plan()
        if found is None and (solution / "loss_scaler.py").is_file():
            key = key or plan_cache.plan_key(solution)
            kept = plan_cache.read(key)
            found = _parsed(kept, "cached")
            if found is not None and check and not _agrees(found, solution, runner_factory):
                found = None
            if found is None:
                with plan_cache.recording(key):  # one recording per key at a time, not one per worker
                    again = plan_cache.read(key)  # another process may have recorded it while we waited
                    found = _parsed(again, "cached") if again != kept else None
                    if found is None:
                        found = record(solution, runner_factory=runner_factory)
                        plan_cache.write(key, found.to_json())
        _PLANS[solution] = found
    return _PLANS[solution]


def _staged_runner(solution: Path, runner_factory: Any) -> tuple[Path, Any]:
    """A runner on a staged copy of ``solution``, as every submission is graded: the student processes read the
    copy, never the checkout (which their uid may not be able to enter: a clone in a folder of mode 0700)."""
    from autograder.engine import intake
    from autograder.sandbox.runner import SandboxRunner

    try:
        staged = intake.stage(solution).folder
    except intake.IntakeError as exc:
        raise ReferenceFails(f"the reference solution ({solution}) cannot be read: {exc}") from exc
    try:
        return staged, (runner_factory or SandboxRunner)(staged)
    except BaseException:
        shutil.rmtree(staged, ignore_errors=True)
        raise


def _close(staged: Path, runner: Any) -> None:
    try:
        runner.close()
    finally:
        shutil.rmtree(staged, ignore_errors=True)


def _agrees(found: Plan, solution: Path, runner_factory: Any) -> bool:
    staged, runner = _staged_runner(solution, runner_factory)
    try:
        return reference_agrees(found, runner)
    finally:
        _close(staged, runner)


def grade_in_phases(runner: Any, plan: Plan | None, items: tuple[rubric.Item, ...] = rubric.ITEMS,
                    notes: list[str] | None = None) -> Generator[int, None, judge.Report]:
    """Grade through ``runner``: cases that answer exactly like the solution pass at once, the rest run in pytest.
    One phase per ``next``, which runs that phase's student processes and yields its index in :data:`phases.KINDS`;
    the report is the generator's return value.  Between two steps this grading has no student process alive (the
    caller releases the runner), so the gradings of one wave take turns phase by phase; the report's ``seconds`` are
    the caller's to set (its own time is what the caller measures, never the other gradings' turns).  Without a plan
    the whole grading is one step, which yields nothing."""
    from autograder.engine import judge

    if plan is None or not hasattr(runner, "prefetch"):
        return judge.grade_staged(runner, items, notes)
    wanted = {item.test for item in items}
    cases = [case for case in plan.cases if case.test in wanted]
    answered: dict[str, list[str | None]] = {case.name: [None] * len(case.calls) for case in cases}
    by_test: dict[str, list[Case]] = {}
    for case in cases:
        by_test.setdefault(case.test, []).append(case)
    passes: dict[bool, set[str]] = {True: set(), False: set()}  # cases whose own calls matched, by suite
    again: set[str] = set()  # public checks' cases whose calls did not match: run in pytest
    ran: set[str] = set()  # tests run in pytest (a test passes as a whole only if it never was)
    outcomes: list[judge.Outcome] = []
    printed: list[str] = []
    # Phase by phase: a kind's calls fetched, then its tests that must run in pytest, live calls included.
    for kind, phase in enumerate(phases.KINDS):
        fetch_phase(runner, cases, answered, kind)
        public = phase.public
        passes[public] = {case.name for case in cases if _matches(case, answered[case.name], public=public)}
        if public:
            again = {case.name for case in cases if any(c.public for c in case.calls) and case.name not in passes[True]}
            due = {case.test for case in cases if case.name in again} | (wanted - set(by_test))
            select = _retry_public(again, by_test)
        else:
            # A test not passed as a whole runs in pytest; each of its cases whose own calls matched passes as it
            # would there, without running (the public checks' cases that ran before keep those outcomes).
            due = wanted - {test for test, found in by_test.items()
                            if all(_matches(case, answered[case.name]) for case in found)}
            select = _finish(passes, again, by_test)
        rows = tuple(item for item in items if item.test in due and judge.phase(item, public) == kind)
        if rows:
            found, output = judge.run_suites(runner, rows, select=select)
            outcomes += found
            printed.append(output)
            ran |= {item.test for item in rows}
        yield kind
    done = {test for test, found in by_test.items()
            if test not in ran and all(_matches(case, answered[case.name]) for case in found)}
    outcomes = [judge.Outcome(case.test, case.name, True) for case in cases if case.test in done] + outcomes
    report = judge.build_report(runner, items, outcomes, "\n".join(printed).strip(), notes, time.monotonic())
    report.plan, report.answers = plan, answered
    report.staff_log = (f"call plan ({plan.origin}): {len(done)} of {len({i.test for i in items})} tests passed by "
                        f"matching the reference's answers; {len(wanted - done)} run in pytest\n\n"
                        + report.staff_log).strip()
    return report


def _retry_public(again: set[str], by_test: dict[str, list[Case]]) -> Callable[[str, str, bool], str]:
    """A public phase's ``select``: the public checks' cases whose answers differed (or that the plan lacks) run."""
    from autograder.engine import judge

    return lambda test, name, public: judge.RUN if public and (name in again or test not in by_test) else judge.DROP


def _finish(passes: dict[bool, set[str]], again: set[str], by_test: dict[str, list[Case]]
            ) -> Callable[[str, str, bool], str]:
    """A hidden phase's ``select``: a case whose own calls matched passes, a public one that ran already is left
    out, the rest runs."""
    from autograder.engine import judge

    return lambda test, name, public: (judge.PASS if name in passes[public] else
                                       judge.DROP if public and (name in again or test not in by_test) else judge.RUN)
