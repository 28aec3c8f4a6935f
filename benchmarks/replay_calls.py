"""The call plan's calls replayed in one process: the harness's cost around the student's code.

A grading's student processes spend nearly all their time answering the plan's recorded calls
(``scaler_ops`` above all).  This replays every call of the plan, in order, through the very
function a student process answers with (``checks.student.serve.answer``), here in one process
with no sandbox, and reports:

* the CPU time of the replay (this process's own: other work on a shared machine does not count), and
  under cProfile the share of the submission's own code (every call into a function defined in one of
  its files from a frame outside them, less the harness's code it calls back: the optimizer's ``step``);
* with ``--answers FILE``, every reply's canonical text, one line per call: replay the same folder
  before and after a change to the harness and compare the files (they must be byte-identical);
* with ``--check``, whether each reply equals the answer the plan recorded (true for the reference).

    python benchmarks/replay_calls.py [FOLDER] [--answers FILE] [--profile] [--check] [--repeats N]
                                      [--save-plan FILE | --plan FILE]

The plan is this checkout's cached one (recorded first if there is none).  Machines here are shared:
read the shares and CPU seconds, not wall time.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "assignment")]

import torch  # noqa: E402,F401

from autograder.engine import plan  # noqa: E402
from autograder.sandbox.runner import canonical  # noqa: E402
from checks.runners import gpu_runs, harness, probes  # noqa: E402,F401 - they register their scenarios
from checks.student import serve  # noqa: E402


def replay(calls: list[plan.Call], folder: Path) -> list[object]:
    """Every call answered as a student process answers it (one Submission for the whole replay)."""
    submission = harness.Submission(folder)
    return [serve.answer({"scenario": c.scenario, "args": c.args}, submission) for c in calls]


def student_seconds(stats: pstats.Stats, folder: Path) -> float:
    """Time inside the submission's functions, counted where a frame outside its files called one, less the
    harness's own code it called back: the harness's optimizer, whose ``step`` the submission's ``step`` calls
    (with torch's wrapper around it, where torch wraps it)."""
    root, harness_root = str(folder.resolve()), str(Path(harness.__file__).resolve().parent.parent)
    torch_wrapper = (str(Path(sys.modules[torch.optim.Optimizer.__module__].__file__).resolve()), "wrapper")

    def ours(key: tuple[str, int, str]) -> bool:
        return key[0].startswith(root)

    def called_back(key: tuple[str, int, str]) -> bool:
        return key[0].startswith(harness_root) or (str(Path(key[0]).resolve()), key[2]) == torch_wrapper

    total = 0.0
    for key, (_cc, _nc, _tt, _ct, callers) in stats.stats.items():  # type: ignore[attr-defined]
        if ours(key):
            total += sum(edge[3] for caller, edge in callers.items() if not ours(caller))
        elif called_back(key):
            total -= sum(edge[3] for caller, edge in callers.items() if ours(caller))
    return total


def profiled(calls: list[plan.Call], folder: Path) -> tuple[float, float, pstats.Stats]:
    """One replay under cProfile, in CPU time: its seconds, the submission's own seconds, the stats."""
    profiler = cProfile.Profile(time.process_time)  # CPU time: other work on the machine does not count
    begin = time.process_time()
    profiler.runcall(replay, calls, folder)
    total = time.process_time() - begin
    stats = pstats.Stats(profiler)
    return total, student_seconds(stats, folder), stats


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", type=Path, default=ROOT / "solutions")
    parser.add_argument("--answers", type=Path, help="write each reply's canonical text here, one per line")
    parser.add_argument("--profile", action="store_true", help="cProfile the replay: student share, top functions")
    parser.add_argument("--check", action="store_true", help="each reply must equal the plan's recorded answer")
    parser.add_argument("--repeats", type=int, default=3, help="timed replays (the median is printed)")
    parser.add_argument("--plan", type=Path, help="replay this plan (a file --save-plan wrote), not the current one")
    parser.add_argument("--save-plan", type=Path, help="write the plan replayed here (to replay it after a change)")
    args = parser.parse_args()
    torch.set_num_threads(1)  # as in a student process
    found = plan.Plan.from_json(args.plan.read_text()) if args.plan else plan.current_plan()
    if found is None:
        sys.exit("no call plan (AMP_PLAN=off?)")
    if args.save_plan:
        args.save_plan.write_text(found.to_json())
    calls = [call for case in found.cases for call in case.calls]
    answers = [canonical(reply) for reply in replay(calls, args.folder)]  # warm-up, and the answers
    if args.answers:
        args.answers.write_text("".join(answer + "\n" for answer in answers))
    wrong: list[int] = []
    if args.check:
        wrong = [i for i, (got, call) in enumerate(zip(answers, calls)) if got != call.answer]
        print(f"{len(calls) - len(wrong)} of {len(calls)} replies equal the recorded answers")
    times = []
    for _ in range(args.repeats):
        begin = time.process_time()
        replay(calls, args.folder)
        times.append(time.process_time() - begin)
    if times:
        print(f"{len(calls)} calls replayed: median {sorted(times)[len(times) // 2]:.2f} s CPU "
              f"(runs: {', '.join(f'{t:.2f}' for t in times)})")
    if args.profile:
        total, student, stats = profiled(calls, args.folder)
        print(f"profiled: {total:.2f} s, the submission's own code {student:.2f} s = {100 * student / total:.1f} %")
        out = io.StringIO()
        stats.stream = out  # type: ignore[attr-defined]
        stats.sort_stats("tottime").print_stats(25)
        print(out.getvalue())
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
