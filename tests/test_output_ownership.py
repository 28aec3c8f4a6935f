"""Output belongs to the process that wrote it (autograder/engine/sandbox.py), whatever the timing.

A student process serves tests of one visibility only; every byte it prints is filed under the
test it last served, however and whenever it is read: with a reply, when another process crashes,
hangs or is killed, or when the runner closes.  So what a process that saw hidden inputs prints
late (a thread of its own, after its last reply) never reaches a visible row or the output shown
before the due date.  Each test drives a real sandbox (zygote, confinement) with a submission whose
scaler prints from a daemon thread.
"""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest

from autograder.engine import intake, sandbox
from checks.runners.harness import SubmissionFault

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux sandbox")

HIDDEN_TEST = "test_update_rule_properties"  # row 1.6: hidden until the due date
VISIBLE_TEST = "test_scale_returns_float32_without_overflow"  # row 1.2: students see it at once

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


@pytest.fixture()
def runner(tmp_path: Path) -> Iterator[sandbox.SandboxRunner]:
    (tmp_path / "loss_scaler.py").write_text(LATE_PRINTER)
    staged = intake.stage(tmp_path)  # as the grader does: where the student process's uid may read
    runner = sandbox.SandboxRunner(staged.folder, limits=sandbox.Limits(call_seconds=3, import_seconds=60))
    yield runner
    runner.close()
    shutil.rmtree(staged.folder, ignore_errors=True)


def serve_hidden_then_wait(runner: sandbox.SandboxRunner) -> None:
    """A hidden test's call whose input (init_scale=12345.0) is printed by the thread after the reply."""
    runner.begin_test(HIDDEN_TEST)
    assert runner.run("scaler_ops", construct(12345.0))[-1]["ok"]["scale"] == 12345.0
    time.sleep(0.5)  # the thread has printed by now: the text waits in the hidden process's pipe


def where_the_hidden_input_went(runner: sandbox.SandboxRunner) -> set[str]:
    return {test for test, text in runner.output_by_test().items() if "LATE-SEES 12345.0" in text}


@pytest.mark.parametrize("growth_interval, how", [(7, "the crash ends every process"),
                                                  (8, "killed at its time limit")])
def test_late_output_stays_with_the_hidden_test_when_a_visible_process_ends(
        runner: sandbox.SandboxRunner, growth_interval: int, how: str) -> None:
    serve_hidden_then_wait(runner)
    runner.begin_test(VISIBLE_TEST)
    with pytest.raises(SubmissionFault):
        runner.run("scaler_ops", construct(2.0, growth_interval=growth_interval))
    assert where_the_hidden_input_went(runner) == {HIDDEN_TEST}, how


def test_late_output_stays_with_the_hidden_test_when_the_processes_are_released(
        runner: sandbox.SandboxRunner) -> None:
    serve_hidden_then_wait(runner)
    runner.begin_test(VISIBLE_TEST)
    runner.release()
    runner.close()
    assert where_the_hidden_input_went(runner) == {HIDDEN_TEST}


def test_a_visible_process_output_is_filed_under_its_own_test(runner: sandbox.SandboxRunner) -> None:
    """The other way round: a visible call's late output reaches its own row, not a hidden test that ends it."""
    runner.begin_test(VISIBLE_TEST)
    runner.run("scaler_ops", construct(777.0))
    time.sleep(0.5)
    runner.begin_test(HIDDEN_TEST)
    with pytest.raises(SubmissionFault):
        runner.run("scaler_ops", construct(2.0, growth_interval=7))
    shown = runner.output_by_test()
    assert "LATE-SEES 777.0" in shown.get(VISIBLE_TEST, "") and "777.0" not in shown.get(HIDDEN_TEST, "")
