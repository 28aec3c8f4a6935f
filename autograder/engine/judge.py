"""The judge: runs the public and hidden suites against one staged submission.

The judge is trusted: it runs hypothesis, the references and every assertion in
this process, and talks to the submission only through a runner (normally a
:class:`autograder.sandbox.runner.SandboxRunner`).  A pytest plugin registered as
``amp-judge`` hands that runner to the tests' ``student`` fixture and records one
outcome per test case; :func:`score` turns outcomes into rubric rows.

Student-facing messages are the failures' own texts (written for students by the
check helpers).  Any other exception is a grader fault: the student sees a short
notice, the staff log gets the traceback, and the row scores 0 only if it is a
fault of the submission's process.
"""

from __future__ import annotations

import contextlib
import io
import os
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import pytest
from hypothesis import settings

from autograder.engine import amp_reference, examples, faults, rubric, strings, underflow_steps
from autograder.sandbox import phases
from autograder import ROOT
from autograder import settings as grader_settings  # not hypothesis.settings

try:
    BaseExceptionGroup
except NameError:  # Python 3.10: hypothesis depends on the backport
    from exceptiongroup import BaseExceptionGroup
from checks import words
from checks.judge import recorded
from checks.runners.harness import SubmissionFault

# at import, as the rubric's: the zygote forks student processes from here
PUBLIC_DIR = grader_settings.public_tests()
HIDDEN_DIR = grader_settings.hidden_tests()
INI = Path(__file__).resolve().parent / "judge.ini"
#: The English text of an internal failure (rows carry the current language's, strings.text("internal")).
INTERNAL = strings.MESSAGES["en"]["internal"]
#: What :func:`run_suites`' ``select`` says of a collected test case: run it, count it passed without running it
#: (its answers matched the reference's: :mod:`autograder.engine.plan`), or leave it out.
RUN, PASS, DROP = "run", "pass", "drop"


@dataclass
class Outcome:
    test: str
    case: str
    passed: bool
    message: str = ""
    internal: str = ""
    public: bool = False  # a case of the public checks (students have its inputs)


@dataclass
class Row:
    item: rubric.Item
    score: float
    message: str
    passed: bool
    output: str = ""  # what the student's code printed during this test
    #: The judge's own code failed in one of its cases (an exception of the judge's, never a message's words)
    internal: bool = False
    #: The messages of its failed public cases alone: a hidden row's public part, which students may see at once
    public_failures: str = ""
    #: (passed, all) cases: what the score is a share of, so that new points rescore it exactly (batch.rescore)
    cases: tuple[int, int] = (0, 0)

    @property
    def status(self) -> str:
        return "passed" if self.passed else "failed"


@dataclass
class Report:
    rows: list[Row]
    notes: list[str] = field(default_factory=list)
    output: str = ""
    staff_log: str = ""
    seconds: float = 0.0
    scenarios: int = 0  # scenario calls the submission's code answered
    #: The call plan graded with, and the submission's answers to its recorded calls by case (autograder.diagnosis)
    plan: Any = None
    answers: dict[str, list[str | None]] = field(default_factory=dict)

    @property
    def score(self) -> float:
        return round(sum(row.score for row in self.rows), 4)

    @property
    def max_score(self) -> float:
        return sum(row.item.points for row in self.rows)


def _student_message(exc: BaseException) -> tuple[str, str]:
    """(message for the student, traceback for staff) of a failed test case."""
    if isinstance(exc, BaseExceptionGroup):  # hypothesis's Flaky: the code answered differently on a rerun
        inner = next((e for e in exc.exceptions if isinstance(e, (AssertionError, SubmissionFault))), None)
        text = words.shown(inner) if inner else ""
        return (strings.text("flaky") + "\n" + text).strip(), ""
    if isinstance(exc, SubmissionFault):
        return words.shown(exc), ""
    if isinstance(exc, AssertionError):
        return str(exc), ""
    return strings.text("internal"), "".join(traceback.format_exception(exc))


class JudgePlugin:
    """Collects one :class:`Outcome` per test case and tells the runner which test runs."""

    __name__ = "amp-judge"  # the name checks.plugin looks up

    def __init__(self, runner: Any, tests: set[str], rows: tuple[rubric.Item, ...] = (),
                 select: Callable[[str, str, bool], str] | None = None) -> None:
        self.runner = runner
        self.tests = tests
        self.rows = rows  # whose suites are checked against their declaration (rubric.suite_problem)
        self.select = select
        self.outcomes: list[Outcome] = []

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        items[:] = [item for item in items if getattr(item, "originalname", item.name) in self.tests]
        self._check_suites(items)
        if self.select is not None:
            kept = []
            for item in items:
                test, public = getattr(item, "originalname", item.name), _public(item)
                verdict = self.select(test, item.name, public)
                if verdict == PASS:
                    self.outcomes.append(Outcome(test, item.name, True, public=public))
                elif verdict == RUN:
                    kept.append(item)
            items[:] = kept
        items.sort(key=self._phase)
        for item in items:  # hidden property tests explore more examples than the public ones (25)
            function = getattr(item, "obj", None)
            current = getattr(function, "_hypothesis_internal_use_settings", None)
            # (a worker grades many submissions with the same test functions: decorate them once)
            wanted = examples.count_for(getattr(item, "originalname", item.name))
            if current is not None and current.max_examples != wanted and HIDDEN_DIR in Path(str(item.fspath)).parents:
                item.obj = settings(current, max_examples=wanted)(function)

    def _phase(self, item: pytest.Item) -> int:
        test = getattr(item, "originalname", item.name)
        return phase(next((row for row in self.rows if row.test == test), None), _public(item))

    def _check_suites(self, items: list[pytest.Item]) -> None:
        """A row whose test is not where the rubric says (a hidden test missing or misspelt, a copy where the row
        declares public inputs) fails as the grader's fault: recording the call plan refuses to grade with it."""
        found: dict[str, set[str]] = {}
        for item in items:
            found.setdefault(getattr(item, "originalname", item.name), set()).add(
                rubric.PUBLIC if _public(item) else rubric.HIDDEN)
        for row in self.rows:
            problem = rubric.suite_problem(row, found.get(row.test, set()))
            if problem:
                self.outcomes.append(Outcome(row.test, f"{row.test}[declared suites]", False, strings.text("internal"),
                                             problem))

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        begin = getattr(self.runner, "begin_test", None)
        if begin:
            begin(item.name, public=_public(item))

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
        outcome = yield
        report = outcome.get_result()
        test = getattr(item, "originalname", item.name)
        public = _public(item)
        if report.when == "call" or (report.failed and report.when == "setup"):
            if report.passed:
                self.outcomes.append(Outcome(test, item.name, True, public=public))
            elif call.excinfo is not None:
                message, internal = _student_message(call.excinfo.value)
                self.outcomes.append(Outcome(test, item.name, False, message, internal, public))


def phase(row: rubric.Item | None, public: bool) -> int:
    """The phase (:data:`phases.KINDS`) a test of ``row`` runs in: the public checks' first, then Task 1's before the
    rest (a whole file has one, so a test's cases keep their order).  A case whose calls need both kinds of
    process is served by the runner switching between them."""
    return phases.kind_of(("loss_scaler",) if row is not None and row.task == "scaler" else (), public)


def _public(item: pytest.Item) -> bool:
    """Whether ``item`` is a test of the public checks (by its file: a hidden row's public example has its name)."""
    return PUBLIC_DIR in Path(str(item.fspath)).parents


def run_suites(runner: Any, items: tuple[rubric.Item, ...], paths: tuple[Path, ...] | None = None,
               collect_only: bool = False, select: Callable[[str, str, bool], str] | None = None) -> Any:
    """Run the tests named by ``items`` with ``runner``, phase by phase (:meth:`JudgePlugin._phase`); return
    outcomes and pytest's own output.

    ``select(test function, case name, public?)``: whether each case runs (RUN), passes without running (PASS)
    or is left out (DROP); every case runs without it.  With ``collect_only`` return the set of test function names
    pytest collects instead.
    """
    plugin = JudgePlugin(runner, {item.test for item in items}, items, select)
    # Task 2's rows (2.10's every call too) replay the grader's reference, never recorded effects
    recorded.install(amp_reference.judge, underflow=underflow_steps.judge_calls)
    paths = paths or (PUBLIC_DIR, HIDDEN_DIR)
    # Only the plugins named below: one that the grading machine happens to hold (pytest-randomly reorders tests
    # and reseeds) must not change a grade, and finding them means reading every installed package's metadata.
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    # Nor options or plugins the caller's environment adds (a TA's PYTEST_ADDOPTS="-x" would end the suite early).
    for name in ("PYTEST_ADDOPTS", "PYTEST_PLUGINS"):
        os.environ.pop(name, None)
    args = [str(p) for p in paths] + ["-c", str(INI), "--rootdir", str(ROOT), "-p", "checks.plugin",
                                      "-p", "_hypothesis_pytestplugin",  # what hypothesis's entry point names
                                      "-p", "no:cacheprovider", "-p", "no:unraisableexception", "--capture=no", "-q", "--no-header",
                                      # the staff log's tracebacks: pytest's own style re-reads and parses every
                                      # frame's source (a quarter second per failure); feedback never uses them
                                      "--tb=native"]
    if collect_only:
        collector = _Collector()
        with contextlib.redirect_stdout(io.StringIO()):
            pytest.main(args + ["--collect-only"], plugins=[collector])
        return collector.names
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer):
        pytest.main(args, plugins=[plugin])
    return plugin.outcomes, buffer.getvalue()


class _Collector:
    """Records the test function names pytest collects."""

    def __init__(self) -> None:
        self.names: set[str] = set()

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        self.names = {getattr(item, "originalname", item.name) for item in items}


def _labelled(case: Outcome) -> str:
    """A failed case's message, prefixed with its parameters ("[float16] ...") unless it already names them."""
    if "[" not in case.case:
        return case.message
    label = case.case.split("[", 1)[1].rstrip("]")
    return case.message if case.message.startswith(label) else f"[{label}] {case.message}"


def _summarised(failures: list[tuple[str, Outcome]]) -> str:
    """A row's failures: the first case's message in full, each other case in one line, since the cases of a row
    fail for the same behaviour.  That line is whole sentences: what that case does differently (its first new line
    after the headline, so its own inputs, from the start of its sentence; the headline when nothing else is new)
    and what came of it (:func:`_outcome`), even where the first case's message said the same words."""
    if not failures:
        return ""
    first, case = failures[0]
    seen = {line.strip() for line in (first + "\n" + case.message).splitlines()}
    lines = [first]
    for text, case in failures[1:]:
        label = case.case.split("[", 1)[1].rstrip("]") if "[" in case.case else ""
        paragraph = [line for line in case.message.split("\n\n", 1)[0].splitlines() if line.strip()]
        outcome = _outcome(case.message)
        news = [k for k, line in enumerate(paragraph) if k and line.strip() not in seen
                and line.strip() not in outcome] or ([0] if paragraph and outcome not in seen else [])
        if not news:
            said = strings.text("same_failure")
        else:
            scenario = _sentence(paragraph, news[0])
            said = scenario if not outcome or outcome in scenario else f"{scenario} … {outcome}"
        lines.append(f"[{label}] {said}" if label and not said.startswith(label) else said)
    return "\n\n".join(lines)


def _code(line: str) -> str:
    """A message's line on one line: a snippet's line (indented) is code, quoted as such."""
    return f"`{line.strip()}`" if line.startswith("    ") else line.strip()


def _sentence(paragraph: list[str], index: int) -> str:
    """Line ``index`` of ``paragraph`` from the start of its sentence: a line of text that goes on from the one above
    it (it starts in lower case or with a digit) is joined to the lines above (code quoted between them), up to the
    sentence's first line; a line of code stands alone."""
    start = index
    while start > 0 and not paragraph[start].startswith("    ") and _goes_on(paragraph[start]):
        start -= 1
        while start > 0 and paragraph[start].startswith("    "):
            start -= 1
    return " ".join(_code(line) for line in paragraph[start:index + 1])


def _goes_on(line: str) -> bool:
    """Whether a line of text goes on from the line above it (it starts in lower case or with a digit)."""
    head = line.strip()[:1]
    return head.islower() or head.isdigit()


def _outcome(message: str) -> str:
    """What came of a case, as one line: the first difference a Task-2 message lists under its heading, else the
    snippet's verdict (what its last line should print and what it printed), else its first paragraph's last line."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    heads = [words.template(key).split("{", 1)[0].strip() for key in ("amp.differ_head", "amp.masked_head")]
    for k, line in enumerate(lines[:-1]):
        if any(head and line.startswith(head) for head in heads):
            return lines[k + 1]
    should, but = (words.template(key).split("{", 1)[0].strip() for key in ("snippet.should", "snippet.but"))
    for k, line in enumerate(lines):
        if but and line.startswith(but):
            return " ".join(filter(None, [lines[k - 1] if k and lines[k - 1].startswith(should) else "", line]))
    paragraph = [line for line in message.split("\n\n", 1)[0].splitlines() if line.strip()]
    return _code(paragraph[-1]) if paragraph else ""


def score(outcomes: list[Outcome], items: tuple[rubric.Item, ...], file_faults: Mapping[str, str] | None = None,
          missing: Sequence[str] = ()) -> tuple[list[Row], str]:
    """Rubric rows from outcomes: per-case partial credit; and the staff log.

    A case failed by a cause told once at the top (``file_faults``, ``missing``: :mod:`.faults`) gets that
    cause's short line instead of its message.
    """
    rows: list[Row] = []
    staff: list[str] = []
    for item in items:
        cases = [o for o in outcomes if o.test == item.test]
        if not cases:
            rows.append(Row(item, 0.0, strings.text("internal"), False, internal=True))
            staff.append(f"{item.test}: not collected")
            continue
        passed = sum(case.passed for case in cases)
        messages: list[tuple[str, Outcome]] = []
        public: list[tuple[str, Outcome]] = []
        for case in cases:
            if not case.passed:
                text = faults.short_line(case.message, item.task, file_faults or {}, missing) or _labelled(case)
                for kept in (messages, public) if case.public else (messages,):
                    if text not in [t for t, _ in kept]:
                        kept.append((text, case))
                if case.internal:
                    staff.append(f"{case.case}:\n{case.internal}")
        rows.append(Row(item, round(item.points * passed / len(cases), 4), _summarised(messages),
                        passed == len(cases), public_failures=_summarised(public), cases=(passed, len(cases)),
                        internal=any(case.internal for case in cases if not case.passed)))
    return rows, "\n\n".join(staff)


def grade_staged(runner: Any, items: tuple[rubric.Item, ...] = rubric.ITEMS, notes: list[str] | None = None) -> Report:
    """Grade one staged submission through ``runner``: every test in pytest."""
    started = time.monotonic()
    outcomes, pytest_output = run_suites(runner, items)
    return build_report(runner, items, outcomes, pytest_output, notes, started)


def build_report(runner: Any, items: tuple[rubric.Item, ...], outcomes: list[Outcome], pytest_output: str,
                 notes: list[str] | None, started: float) -> Report:
    """Rows, routed output and the staff log from the outcomes of one submission's tests."""
    file_faults, missing = faults.file_faults(runner), faults.missing_files(runner)
    rows, staff = score(outcomes, items, file_faults, missing)
    visible = route_output(rows, getattr(runner, "output_by_test", dict)())
    # Notes are shown at once: built from the public tests' texts alone (their processes served nothing hidden).
    told = faults.not_implemented(o.message for o in outcomes if o.public and not o.passed)
    causes = faults.top_notes(file_faults, missing, told)
    return Report(rows, list(notes or []) + causes, visible, (staff + "\n\n" + pytest_output).strip(), time.monotonic() - started,
                  getattr(runner, "scenarios_run", 0))


def route_output(rows: list[Row], printed: dict[str, str]) -> str:
    """Attach what each test printed to its row; return the output students may see at once.

    Output printed during a hidden test stays with that test's row, which shares the
    test's visibility (after the due date, by default): printing a hidden scenario's
    inputs or a comparison made in the student's process reveals nothing before then.
    Only output from visible tests (and from outside any test) goes to the top level.
    """
    by_test = {row.item.test: row for row in rows}
    visible: list[str] = []
    for case, text in printed.items():
        row = by_test.get(case.split("[", 1)[0])
        if row is None or row.item.visibility == "visible":
            visible.append(text)
        else:
            row.output += text
    return "".join(visible)
