"""Grading time per submission against the floor of starting Python and importing torch.

Measured in the same run, pinned to one core, as the median of a few repeats (machines
here are shared and noisy: read the ratios, not the seconds):

* **floor**: ``python -c "import torch"``;
* **Gradescope, correct**: the real entry point (``run_autograder``'s command) in a fresh
  ``/autograder`` layout built from ``dist``'s zip (call plan included) and byte-compiled as
  ``setup.sh`` does once per image, grading solutions/;
  goal <= 2x the floor;
* **Gradescope, buggy**: the same for three catalogue bugs (goal <= 3x);
* **CLI, one submission**: ``python -m autograder grade ONE --out DIR`` (what a TA or a student
  runs on one folder), correct (goal <= 2x) and buggy (goal <= 3x), after one untimed run that
  records the call plan into a fresh plan cache (``$AMP_PLAN_CACHE``; every later run reuses it)
  and writes the grader's bytecode, as any run after the first finds them;
* **student's loop**: ``python -m pytest`` in ``assignment/`` on the solution (goal <= 2.5x).

    python benchmarks/grading_speed.py [--repeats 3] [--bugs growth_off_by_one backoff_divides nan_ignored]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUGS = ("growth_off_by_one", "backoff_divides", "nan_ignored")
GOALS = {"gradescope, correct": 2.0, "gradescope, buggy": 3.0, "CLI one submission, correct": 2.0,
         "CLI one submission, buggy": 3.0, "student pytest": 2.5}


def timed(command: list[str], core: int | None, cwd: Path = ROOT, env: dict[str, str] | None = None) -> float:
    def pin() -> None:
        if core is not None:
            os.sched_setaffinity(0, {core})

    started = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, preexec_fn=pin,
                          env={**os.environ, **(env or {})})
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"command failed: {' '.join(command)}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    print(f"  {elapsed:6.2f} s  {' '.join(command[1:4])} ...", file=sys.stderr, flush=True)  # progress (noisy runs)
    return elapsed


def gradescope_layout(bundle: Path, submission: Path, root: Path) -> Path:
    """A fresh /autograder: source/ from the zip, submission/ with the contract files."""
    with zipfile.ZipFile(bundle) as archive:
        archive.extractall(root / "source")
    # as setup.sh does once per image (untimed): bytecode for the grader's modules
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(root / "source")], check=True)
    (root / "submission").mkdir(parents=True)
    for name in ("loss_scaler.py", "amp_step.py", "answers.py"):
        if (submission / name).is_file():
            (root / "submission" / name).write_bytes((submission / name).read_bytes())
    return root


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--bugs", nargs="*", default=list(BUGS))
    parser.add_argument("--all-cores", action="store_true", help="do not pin to one core")
    args = parser.parse_args()
    core = None if args.all_cores else min(os.sched_getaffinity(0))
    sys.path.insert(0, str(ROOT / "tests" / "catalogue"))
    import catalogue

    with tempfile.TemporaryDirectory() as work:
        work_path = Path(work)
        bundle = work_path / "autograder.zip"
        subprocess.run([sys.executable, "-m", "autograder.packaging.gradescope", "--out", str(bundle)], cwd=ROOT,
                       check=True, capture_output=True)
        bugs = [catalogue.materialize(next(e for e in catalogue.ENTRIES if e.name == name), work_path / name)
                for name in args.bugs]
        times: dict[str, list[float]] = {"floor": [], **{label: [] for label in GOALS}}
        cli_env = {"AMP_PLAN_CACHE": str(work_path / "plan-cache"), "PYTHONDONTWRITEBYTECODE": ""}
        cli = [sys.executable, "-m", "autograder", "grade", "--no-progress", "--force", "--out"]
        timed(cli + [str(work_path / "cli-warm-up"), str(ROOT / "solutions")], core, env=cli_env)  # records the plan
        for repeat in range(args.repeats):
            times["floor"].append(timed([sys.executable, "-c", "import torch"], core))
            for label, submission in [("gradescope, correct", ROOT / "solutions")] + [
                    ("gradescope, buggy", bug) for bug in bugs]:
                root = gradescope_layout(bundle, submission, work_path / f"gs-{repeat}-{submission.name}")
                times[label].append(timed([sys.executable, "-m", "autograder.platforms.gradescope"], core,
                                          cwd=root / "source", env={"AUTOGRADER_ROOT": str(root)}))
            for label, submission in [("CLI one submission, correct", ROOT / "solutions")] + [
                    ("CLI one submission, buggy", bug) for bug in bugs]:
                times[label].append(timed(cli + [str(work_path / f"cli-{repeat}-{submission.name}"), str(submission)],
                                          core, env=cli_env))
            times["student pytest"].append(timed([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"], core,
                                                 cwd=ROOT / "assignment",
                                                 env={"AMP_SUBMISSION": str(ROOT / "solutions")}))
    floor = statistics.median(times["floor"])
    where = "all cores" if core is None else f"core {core}"
    print(f"pinned to: {where}; repeats: {args.repeats} (median); buggy = {', '.join(args.bugs)}; "
          f"load average {os.getloadavg()[0]:.1f}")
    label = 'floor  python -c "import torch"'
    print(f"{label:48} {floor:6.2f} s")
    for label, goal in GOALS.items():
        value = statistics.median(times[label])
        verdict = "meets" if value / floor <= goal else "misses"
        print(f"{label:48} {value:6.2f} s   ratio {value / floor:4.2f}x  (goal <= {goal:g}x: {verdict})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
