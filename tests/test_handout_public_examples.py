"""The handout's promise about the public checks: each one shows its behaviour's classic bugs.

The handout says every graded behaviour has a public example in ``checks/`` (the hidden test of
a row only tries other inputs).  So the public test of a row must, *on its own*, fail for the
catalogue's bugs of that row (``tests/catalogue``): a student whose code has the bug sees it
before submitting.  One Python process runs the public test functions of Task 1 directly (no
pytest per bug), each against each Task-1 bug of the catalogue that names its row (``make test`` tries fewer bugs
that still name every row between them; ``make test-all`` all of them).

One cause, one deduction: the off-by-one growth tracker (``growth_off_by_one``) breaks growth,
row 1.6, so it is the public example of 1.6 (``test_update_rule_properties``) that must catch
it; row 1.5's public check (``test_update_backs_off_after_inf_or_nan``) grades backoff only and must
pass it (otherwise the bug would cost two rows).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from autograder.engine import rubric
from conftest import ROOT
from test_catalogue import BUGS, CATCH_ALL, catalogue, materialize

ITEMS = {item.number: item for item in rubric.ITEMS}

#: Runs in a fresh process inside assignment/: argv[1] is a JSON list of [submission folder, [public test names]].
RUNNER = textwrap.dedent('''
    import json, sys, inspect
    from pathlib import Path
    from checks import plugin, test_public_scaler as public

    def cases(function):
        """The argument sets pytest would call ``function`` with (parametrize marks), besides ``student``."""
        marks = [m for m in getattr(function, "pytestmark", []) if m.name == "parametrize"]
        if not marks:
            return [{}]
        names, values = marks[0].args[0], marks[0].args[1]
        names = [n.strip() for n in names.split(",")] if isinstance(names, str) else list(names)
        return [dict(zip(names, v if len(names) > 1 else [v])) for v in values]

    verdicts = {}
    for folder, tests in json.loads(sys.argv[1]):
        student = plugin.LocalRunner(Path(folder))
        for name in tests:
            failed = False
            for kwargs in cases(getattr(public, name)):
                try:
                    getattr(public, name)(student=student, **kwargs)
                except BaseException as exc:  # AssertionError from the check, or a SubmissionFault
                    failed = True
                    break
            verdicts[f"{Path(folder).name}::{name}"] = failed
        student.close()
    print(json.dumps(verdicts))
''')


def _task1_bugs() -> list[Any]:
    return [entry for entry in BUGS if entry.touched == {"loss_scaler.py"} and not entry.known_gap
            and entry.must_fail != catalogue.TASK1]


def _public_test(number: str) -> str:
    return ITEMS[number].test


def _covering_bugs() -> frozenset[str]:
    """The bugs ``make test`` tries (the rest are left to ``make test-all``): the off-by-one growth tracker (its own
    test below needs it), then, in catalogue order, each bug that names a row none before it named, so that every
    Task-1 row's public example is still tried against one of its bugs."""
    chosen, covered = {"growth_off_by_one"}, set()
    for entry in _task1_bugs():
        if entry.name in chosen or not entry.must_fail <= covered:
            chosen.add(entry.name)
            covered |= entry.must_fail
    return frozenset(chosen)


COVERING_BUGS = _covering_bugs()


def _bug_param(entry: Any) -> Any:
    return pytest.param(entry, id=entry.name, marks=[] if entry.name in COVERING_BUGS else [pytest.mark.slow])


@pytest.fixture(scope="module")
def verdicts(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, bool]:
    """``bug-folder::public test`` -> whether that public test failed for the bug, for the bugs whose tests this run
    selected (one process runs them all: a few minutes for the whole catalogue)."""
    selected = {item.callspec.params["entry"].name for item in request.session.items
                if item.module is request.module and "entry" in getattr(getattr(item, "callspec", None), "params", {})}
    base = tmp_path_factory.mktemp("public-examples")
    task1 = [item.test for item in rubric.ITEMS if item.task == "scaler"]
    plan = [[str(ROOT / "solutions"), task1]]  # the runner's own check: the solution passes every one
    for entry in _task1_bugs():
        if entry.name not in selected | {"growth_off_by_one"}:
            continue
        folder = materialize(entry, base / entry.folder_name)
        rows = sorted(entry.must_fail)
        if entry.name == "growth_off_by_one":
            rows.append("1.5")  # must pass: see the module docstring
        plan.append([str(folder), [_public_test(number) for number in rows]])
    done = subprocess.run([sys.executable, "-c", RUNNER, json.dumps(plan)], cwd=ROOT / "assignment",
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.parametrize("entry", [_bug_param(entry) for entry in _task1_bugs()])
def test_public_example_of_each_row_shows_the_bug(verdicts: dict[str, bool], entry: Any) -> None:
    for number in sorted(entry.must_fail):
        test = _public_test(number)
        assert verdicts[f"{entry.folder_name}::{test}"], (
            f"{entry.name} ({entry.description}) loses row {number}, but that row's public example {test} "
            f"passes it: a student cannot see the bug before submitting")


def test_the_solution_passes_every_public_check_run_this_way(verdicts: dict[str, bool]) -> None:
    failed = [key for key, failed in verdicts.items() if key.startswith("solutions::") and failed]
    task1 = {number for number, item in ITEMS.items() if item.task == "scaler"}
    assert len([key for key in verdicts if key.startswith("solutions::")]) == len(task1)
    assert not failed, f"the runner itself is broken: the solution fails {failed}"


def test_growth_off_by_one_is_shown_by_the_growth_row_only(verdicts: dict[str, bool]) -> None:
    folder = "bug-growth_off_by_one"
    assert verdicts[f"{folder}::test_update_rule_properties"], "the public example of row 1.6 misses it"
    assert not verdicts[f"{folder}::test_update_backs_off_after_inf_or_nan"], \
        "row 1.5 (backoff) fails it too: two deductions for one cause"


def test_the_rows_checked_here_are_the_catalogue_rows() -> None:
    """Every Task-1 row has a public test, and the bugs here cover them all: all of them (make test-all), and the
    fewer that make test tries."""
    task1 = {number for number, item in ITEMS.items() if item.task == "scaler"} - {CATCH_ALL}
    for bugs in (_task1_bugs(), [entry for entry in _task1_bugs() if entry.name in COVERING_BUGS]):
        covered = set().union(*(entry.must_fail for entry in bugs)) - {CATCH_ALL}
        assert covered == task1, f"no Task-1 bug of the catalogue names: {sorted(task1 - covered)}"
    assert 10 <= len(COVERING_BUGS) < len(_task1_bugs()) - 10
