"""Where one submission's grading time goes: start-up, student calls, reference, hypothesis, pytest, results.

Grades a correct submission and buggy ones (catalogue bugs) in this process, the way a batch
worker does, with light instrumentation:

* **start-up**: ``import torch`` and the sandbox zygote (paid once per worker);
* **batched calls**: the call plan's round trips (``SandboxRunner.prefetch``, one per test case);
* **student calls**: wall time inside ``SandboxRunner.run`` made live (round trips to the student
  process, including process starts and the student's own work);
* **reference**: wall time inside the judge's reference runs (``cases.torch_results``);
* **pytest**: collection and hook overhead (pytest's own time outside test bodies);
* **hypothesis + test bodies**: the rest of the test time (example generation, shrinking, assertions);
* **results**: building and serialising results.json;
* **inside the student process**: the plan's calls replayed in this process under cProfile, in CPU
  time (``benchmarks/replay_calls.py``): the share of the submission's own code, the rest being the
  harness around it (copying tensors out, building optimizers, the scenario loop).

Each submission is graded twice: every test live (the path before the call plan, and the one
``AMP_PLAN=off`` takes) and with the call plan (every other run: Gradescope, the CLI, batches).
Shares are what to read (machines here are shared and noisy).  ``make profile``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable, Iterator

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "assignment"), str(ROOT / "tests" / "catalogue")]

started = time.perf_counter()
import torch  # noqa: E402,F401 - timed: the floor every grading process pays

TORCH_IMPORT_S = time.perf_counter() - started

from autograder.sandbox import runner as sandbox  # noqa: E402

BUGS = ("growth_off_by_one", "backoff_divides", "no_float32_rounding")


class Clock:
    """Accumulates wall time per label; nested measurements of the same label are not double-counted."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self._depth: dict[str, int] = defaultdict(int)

    @contextlib.contextmanager
    def measure(self, label: str) -> Iterator[None]:
        self._depth[label] += 1
        begin = time.perf_counter()
        try:
            yield
        finally:
            self._depth[label] -= 1
            if not self._depth[label]:
                self.seconds[label] += time.perf_counter() - begin
                self.calls[label] += 1

    def wrap(self, owner: Any, name: str, label: str) -> None:
        original: Callable[..., Any] = getattr(owner, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            with self.measure(label):
                return original(*args, **kwargs)

        setattr(owner, name, timed)


def grade_profiled(folder: Path, clock: Clock, call_plan: object = None) -> dict[str, float]:
    from autograder.diagnosis.match import diagnosed_results
    from autograder.engine import plan

    test_time: list[float] = []

    import pytest

    class Timer:
        @pytest.hookimpl(hookwrapper=True)
        def pytest_runtest_call(self, item: Any) -> Iterator[None]:
            begin = time.perf_counter()
            yield
            test_time.append(time.perf_counter() - begin)

    runner = sandbox.SandboxRunner(folder)
    base = {label: clock.seconds[label] for label in ("student calls", "reference", "batched calls")}
    original_main = pytest.main
    pytest.main = lambda args, plugins=(): original_main(args, plugins=[*plugins, Timer()])  # type: ignore[assignment]
    begin = time.perf_counter()
    try:
        steps = plan.grade_in_phases(runner, call_plan)
        report = None
        while report is None:
            try:
                next(steps)
            except StopIteration as done:
                report = done.value
    finally:
        pytest.main = original_main  # type: ignore[assignment]
        runner.close()
    judged = time.perf_counter() - begin
    begin = time.perf_counter()
    json.dumps(diagnosed_results(report, folder.name))
    written = time.perf_counter() - begin
    batched = clock.seconds["batched calls"] - base["batched calls"]
    live = clock.seconds["student calls"] - base["student calls"]
    reference = clock.seconds["reference"] - base["reference"]
    tests = sum(test_time)
    return {"score": report.score, "batched calls": batched, "student calls": live, "reference": reference,
            "hypothesis + test bodies": max(tests - live - reference, 0.0), "pytest": max(judged - tests - batched, 0.0),
            "results": written, "total": judged + written}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bugs", nargs="*", default=list(BUGS), help="catalogue bugs to profile as 'buggy'")
    args = parser.parse_args()
    clock = Clock()
    begin = time.perf_counter()
    sandbox.start_zygote()
    zygote_s = time.perf_counter() - begin
    from checks.judge import cases

    clock.wrap(sandbox.SandboxRunner, "run", "student calls")
    clock.wrap(sandbox.SandboxRunner, "prefetch", "batched calls")
    clock.wrap(cases, "torch_results", "reference")
    import catalogue

    from autograder.engine import plan

    begin = time.perf_counter()
    call_plan = plan.record()
    record_s = time.perf_counter() - begin
    profiles: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folders = {"correct (solutions/)": ROOT / "solutions"}
        for name in args.bugs:
            entry = next((e for e in catalogue.ENTRIES if e.name == name), None)
            if entry is None:
                print(f"(no catalogue entry {name!r}; skipped)")
                continue
            folders[f"buggy ({name})"] = catalogue.materialize(entry, Path(tmp) / name)
        for label, folder in folders.items():
            profiles[f"{label}, every test live"] = grade_profiled(folder, clock)
            profiles[f"{label}, call plan"] = grade_profiled(folder, clock, call_plan)
    print(f"start-up (once per worker): import torch {TORCH_IMPORT_S:.2f} s, zygote {zygote_s:.2f} s, "
          f"recording the call plan {record_s:.2f} s")
    labels = ("batched calls", "student calls", "reference", "hypothesis + test bodies", "pytest", "results")
    print(f"{'submission':52} {'score':>6} {'total s':>8}  " + "  ".join(f"{label:>24}" for label in labels))
    for name, profile in profiles.items():
        total = profile["total"]
        shares = "  ".join(f"{profile[label]:7.2f} s {100 * profile[label] / total:5.1f} %{'':7}" for label in labels)
        print(f"{name:52} {profile['score']:6g} {total:8.2f}  {shares}")
    import replay_calls  # beside this file

    calls = [call for case in call_plan.cases for call in case.calls]
    replay_calls.replay(calls, ROOT / "solutions")  # warm-up
    total, student, _ = replay_calls.profiled(calls, ROOT / "solutions")
    print(f"inside the student process (solutions/, the plan's {len(calls)} calls replayed in one process, CPU under "
          f"cProfile): {total:.2f} s, the submission's own code {student:.2f} s = {100 * student / total:.1f} %, "
          f"the harness around it {100 * (total - student) / total:.1f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
