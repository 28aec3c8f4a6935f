"""pytest plugin shared by the public checks and the hidden grading suite.

It provides the ``student`` fixture: an object with ``run(scenario, args)`` that
executes a scenario of :mod:`checks.runners.harness` against the submission and returns
plain data, plus ``source(module)`` for static checks.  The submission's files never run
in pytest's process: locally (a student running ``python -m pytest`` in ``assignment/``)
each set of files runs in a student process of its own (:mod:`checks.student.serve`); in
the autograder a judge plugin registered as ``amp-judge`` supplies a runner that executes
it in an isolated, confined student process.

It also fixes hypothesis's settings so that every run explores the same examples:
derandomized, no example database, no deadline, and no "local constants" collected from
whatever modules happen to be loaded (see :func:`_pin_local_constants`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, Verbosity, settings

from checks.judge import diagnose, replies
from checks.runners import harness
from checks.student import serve
from checks.words import say, shown

settings.register_profile(
    "grading",
    derandomize=True,
    database=None,
    deadline=None,
    max_examples=25,
    report_multiple_bugs=False,
    print_blob=False,
    verbosity=Verbosity.quiet,  # no "Falsifying example: test(student=<...>)": each failure prints its own snippet
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink],
    suppress_health_check=list(HealthCheck),
)
settings.load_profile("grading")


def _pin_local_constants() -> None:
    """Make hypothesis draw the same examples whatever else is loaded, and write nothing to disk.

    Since 6.131 hypothesis also draws "local constants": literals it collects from every
    module in ``sys.modules`` that looks like the user's own code, caching them under
    ``.hypothesis/constants/`` in the working directory.  The grader's entry points (CLI,
    batch worker, Gradescope, otter) load different modules, so the hidden suite explored
    different examples depending on which one ran it.  hypothesis has no setting for this;
    its collector (``providers._get_local_constants``, read on every draw) is replaced by an
    empty, fixed set.  Its own global constants (edge cases like 0, -1, inf, nan) still apply.
    """
    from hypothesis.internal.conjecture import providers
    from hypothesis.internal.constants_ast import Constants

    pinned = Constants()
    providers._get_local_constants = lambda: pinned
    providers.CONSTANTS_CACHE.cache.clear()


_pin_local_constants()

SUBMISSION_ENV = "AMP_SUBMISSION"


class LocalRunner:
    """Runs scenarios in student processes of its own (:mod:`checks.student.serve`), one per set of
    files, as the grader does (without its sandbox): this process is the judge and never imports the
    submission's files, and it refuses a malformed reply as the grader does (:mod:`checks.judge.replies`)."""

    def __init__(self, root: Path) -> None:
        self.submission = harness.Submission(root)
        self._processes: dict[tuple[str, ...], serve.LocalProcess] = {}

    def __repr__(self) -> str:
        return f"student({self.submission.root.name})"

    def run(self, scenario: str, args: dict[str, Any], *, timeout: float | None = None) -> Any:
        if scenario == "answers":  # parsed here, never run
            return harness.read_answers(self.submission)
        modules = serve.files_needed(scenario, args)
        process = self._processes.get(modules)
        if process is None:
            process = self._processes[modules] = serve.LocalProcess(self.submission.root, modules)
        reply = process.call(scenario, json.loads(json.dumps(args)))
        if reply is None:
            del self._processes[modules]
            raise harness.SubmissionFault(say("process.ended"))
        if "fault" in reply:  # in the student's language
            raise harness.SubmissionFault(shown(reply["fault"], reply.get("said")))
        problem = replies.problem(scenario, args, reply["ok"])  # the grader's own check (its sandbox calls it too)
        if problem:
            raise harness.SubmissionFault(replies.malformed(problem))
        return reply["ok"]

    def close(self) -> None:
        for process in self._processes.values():
            process.close()
        self._processes.clear()

    def source(self, module: str) -> str | None:
        path = self.submission.root / harness.CONTRACT_FILES[module]
        return path.read_text(encoding="utf-8", errors="replace") if path.is_file() else None


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "task(name): the assignment task a test grades")
    config.addinivalue_line("markers", "gpu: needs CUDA (skipped without it; AMP_GPU_DRY=1 runs it on the CPU)")


@pytest.fixture(scope="session")
def student(request: pytest.FixtureRequest) -> Any:
    judge = request.config.pluginmanager.get_plugin("amp-judge")
    if judge is not None:
        return judge.runner
    root = Path(os.environ.get(SUBMISSION_ENV, Path(__file__).resolve().parent.parent))
    runner = LocalRunner(root)
    request.addfinalizer(runner.close)
    return runner


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """A public check that fails locally the way a catalogued mistake does also names the mistake.

    The line is the grader's (:mod:`checks.judge.diagnose`); it is shown under the failure, and with
    ``--junitxml`` it is the test case's ``<property name="likely_mistake">`` (:data:`diagnose.JUNIT_PROPERTY`),
    which the notebook's ``grader.check`` adds to its message.  Only when run by a student (the grader adds
    its own line to the row's feedback).
    """
    outcome = yield
    report = outcome.get_result()
    if report.when != "call" or not report.failed or item.config.pluginmanager.get_plugin("amp-judge") is not None:
        return
    runner = getattr(item, "funcargs", {}).get("student")
    if isinstance(runner, LocalRunner):
        line = diagnose.explain_local_failure(getattr(item, "originalname", item.name), runner.run)
        if line:
            report.sections.append((say("mistake.section"), line))
            # the item's, not the report's: junitxml writes the teardown report's, copied from the item later
            item.user_properties.append((diagnose.JUNIT_PROPERTY, line))
