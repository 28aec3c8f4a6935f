"""Output belongs to the process that wrote it (autograder/sandbox/runner.py), whatever the timing.

A student process serves either tests of the public checks or hidden tests, never both (a hidden row's
public example is a public test: it has the hidden test's name, but not its process), and the public checks'
processes are all gone before a hidden one starts (autograder/sandbox/phases.py); every byte it
prints is filed under the test it last served, however and whenever it is read: with a reply, when
another process crashes, hangs or is killed, or when the runner closes.  So what a process that saw
hidden inputs prints late (a thread of its own, after its last reply) never reaches a visible row or
the output shown before the due date.  Each test drives a real sandbox (zygote, confinement) with a
submission whose scaler prints from a daemon thread, or answers with the first input its process saw.
"""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest

from autograder.engine import intake, plan
from autograder.sandbox import phases, runner as sandbox
from checks.runners.harness import SubmissionFault

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux sandbox")

HIDDEN_TEST = "test_update_rule_properties"  # row 1.6: hidden until the due date
OTHER_HIDDEN_TEST = "test_one_backoff_per_update"  # another hidden row's
VISIBLE_TEST = "test_scale_returns_float32_without_overflow"  # row 1.2: students see it at once
#: Row 1.16 (hidden): its hidden test and its public example (assignment/checks) share this name.
SHARED_NAME = "test_state_dict_round_trip"

#: A scaler whose constructor hands its arguments to a thread that prints them a little later, after the
#: reply has gone; ``growth_interval=7`` crashes the process, ``growth_interval=8`` hangs it.
LATE_PRINTER = '''
import os
import threading
import time

_seen = []


def _printer():
    while True:
        time.sleep(0.05)
        while _seen:
            print("LATE-SEES", _seen.pop(0), flush=True)


threading.Thread(target=_printer, daemon=True).start()


class ToyLossScaler:
    def __init__(self, init_scale=2.0**16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000):
        if growth_interval == 7:
            os._exit(3)
        while growth_interval == 8:
            pass
        _seen.append(init_scale)
        self.scale_value = init_scale

    def get_scale(self):
        return float(self.scale_value)

    def get_growth_tracker(self):
        return 0
'''


def construct(init_scale: float, growth_interval: int = 2000) -> dict[str, object]:
    return {"world": {"optimizers": [{"groups": [[1]]}]},
            "ops": [{"op": "new", "kwargs": {"init_scale": init_scale, "growth_interval": growth_interval}},
                    {"op": "observe"}]}


#: A scaler whose scale is the first ``init_scale`` its process was ever given: a reply that tells what the
#: process served before.
FIRST_SEEN = '''
_seen = []


class ToyLossScaler:
    def __init__(self, init_scale=2.0**16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000):
        _seen.append(init_scale)

    def get_scale(self):
        return float(_seen[0])

    def get_growth_tracker(self):
        return 0
'''


def _runner(folder: Path, code: str) -> Iterator[sandbox.SandboxRunner]:
    (folder / "loss_scaler.py").write_text(code)
    staged = intake.stage(folder)  # as the grader does: where the student process's uid may read
    runner = sandbox.SandboxRunner(staged.folder, limits=sandbox.Limits(call_seconds=3, import_seconds=60))
    yield runner
    runner.close()
    shutil.rmtree(staged.folder, ignore_errors=True)


@pytest.fixture()
def runner(tmp_path: Path) -> Iterator[sandbox.SandboxRunner]:
    yield from _runner(tmp_path, LATE_PRINTER)


@pytest.fixture()
def remembering(tmp_path: Path) -> Iterator[sandbox.SandboxRunner]:
    yield from _runner(tmp_path, FIRST_SEEN)


def serve_hidden_then_wait(runner: sandbox.SandboxRunner) -> None:
    """A hidden test's call whose input (init_scale=12345.0) is printed by the thread after the reply."""
    runner.begin_test(HIDDEN_TEST)
    assert runner.run("scaler_ops", construct(12345.0))[-1]["ok"]["scale"] == 12345.0
    time.sleep(0.5)  # the thread has printed by now: the text waits in the hidden process's pipe


def where_the_hidden_input_went(runner: sandbox.SandboxRunner) -> set[str]:
    return {test for test, text in runner.output_by_test().items() if "LATE-SEES 12345.0" in text}


@pytest.mark.parametrize("growth_interval, how", [(7, "the crash ends every process"),
                                                  (8, "killed at its time limit")])
def test_late_output_stays_with_the_hidden_test_when_another_test_ends_its_process(
        runner: sandbox.SandboxRunner, growth_interval: int, how: str) -> None:
    serve_hidden_then_wait(runner)
    runner.begin_test(OTHER_HIDDEN_TEST)
    with pytest.raises(SubmissionFault):
        runner.run("scaler_ops", construct(2.0, growth_interval=growth_interval))
    assert where_the_hidden_input_went(runner) == {HIDDEN_TEST}, how


def test_late_output_stays_with_the_hidden_test_when_the_processes_are_released(
        runner: sandbox.SandboxRunner) -> None:
    serve_hidden_then_wait(runner)
    runner.begin_test(OTHER_HIDDEN_TEST)
    runner.release()
    runner.close()
    assert where_the_hidden_input_went(runner) == {HIDDEN_TEST}


def test_a_visible_process_output_is_filed_under_its_own_test(runner: sandbox.SandboxRunner) -> None:
    """The other way round: a visible call's late output reaches its own row, not a hidden test that ends it."""
    runner.begin_test(VISIBLE_TEST, public=True)
    runner.run("scaler_ops", construct(777.0))
    time.sleep(0.5)
    runner.begin_test(HIDDEN_TEST)
    with pytest.raises(SubmissionFault):
        runner.run("scaler_ops", construct(2.0, growth_interval=7))
    shown = runner.output_by_test()
    assert "LATE-SEES 777.0" in shown.get(VISIBLE_TEST, "") and "777.0" not in shown.get(HIDDEN_TEST, "")


def first_seen(reply: list[dict[str, object]]) -> object:
    return reply[-1]["ok"]["scale"]  # type: ignore[index]


def test_a_public_example_of_a_hidden_row_never_runs_where_hidden_inputs_were_served(
        remembering: sandbox.SandboxRunner) -> None:
    """The public example of row 1.16 has its hidden test's name: it runs in a process of its own kind all the same,
    live, fetched ahead, and live again after the fetch (a call built from an answer the plan did not record); its
    hidden test gets a fresh process, and the public example may not run after it."""
    remembering.begin_test(SHARED_NAME, public=True)
    assert first_seen(remembering.run("scaler_ops", construct(2.0))) == 2.0
    remembering.begin_test(SHARED_NAME, public=True)
    (fetched,) = remembering.prefetch([("scaler_ops", construct(4.0), None)])
    assert '"scale": 2.0' in str(fetched) and first_seen(remembering.run("scaler_ops", construct(4.0))) == 2.0
    assert first_seen(remembering.run("scaler_ops", construct(8.0))) == 2.0  # live, after the fetch
    remembering.begin_test(SHARED_NAME)  # the hidden test: a process that never saw the public example
    assert first_seen(remembering.run("scaler_ops", construct(12345.0))) == 12345.0
    remembering.begin_test(SHARED_NAME, public=True)
    with pytest.raises(phases.PhaseOrderError):
        remembering.run("scaler_ops", construct(2.0))


def test_the_call_plan_sends_a_public_examples_calls_apart(remembering: sandbox.SandboxRunner) -> None:
    """A plan case holds the calls of a hidden test and of its public example (one name): each goes to its kind's
    processes, the public example's first, and the answers come back in the recorded order."""
    case = plan.Case(SHARED_NAME, SHARED_NAME, [plan.Call("scaler_ops", construct(3.0), None, "", public=False),
                                                plan.Call("scaler_ops", construct(2.0), None, "", public=True)])
    hidden, public = plan.fetch_ahead(remembering, [case])[SHARED_NAME]
    assert '"scale": 3.0' in str(hidden) and '"scale": 2.0' in str(public), (hidden, public)
    remembering.begin_test(SHARED_NAME)  # the hidden test, run after: served what was fetched for it
    assert first_seen(remembering.run("scaler_ops", construct(3.0))) == 3.0


def test_output_names_files_the_same_from_every_checkout_and_install(tmp_path: Path) -> None:
    """A warning names the file it came from: the checks', torch's and the staged copy's paths differ from checkout to
    checkout and machine to machine, so the feedback names them from their own folders."""
    import sysconfig

    import checks
    from autograder.sandbox.student_processes import OutputLog

    log = OutputLog()
    checks_folder = Path(checks.__file__).resolve().parent.parent
    packages = Path(sysconfig.get_path("purelib")).resolve()
    log.kept["t"] = bytearray(f"{checks_folder}/checks/runners/probes.py:469: UserWarning: Converting\n"
                              f"{packages}/torch/_tensor.py:7: UserWarning: x\n{tmp_path.resolve()}/amp_step.py:66\n"
                              .encode())
    assert log.by_test(tmp_path) == {"t": "checks/runners/probes.py:469: UserWarning: Converting\n"
                                          "torch/_tensor.py:7: UserWarning: x\n<your submission>/amp_step.py:66\n"}
