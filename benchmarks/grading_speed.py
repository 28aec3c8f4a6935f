"""Grading time per submission against the floor of starting Python and importing torch.

Both are measured in the same run, pinned to one core, as the median of a few
repeats (machines here are shared and noisy: read the ratio, not the seconds).

    python benchmarks/grading_speed.py [--repeats 3] [--submission solutions]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def timed(command: list[str], core: int | None, env: dict[str, str] | None = None) -> float:
    def pin() -> None:
        if core is not None:
            os.sched_setaffinity(0, {core})

    started = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, preexec_fn=pin,
                          env={**os.environ, **(env or {})})
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"command failed: {' '.join(command)}\n{done.stderr[-2000:]}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--submission", type=Path, default=ROOT / "solutions")
    parser.add_argument("--all-cores", action="store_true", help="do not pin to one core")
    args = parser.parse_args()
    core = None if args.all_cores else min(os.sched_getaffinity(0))
    floor, gradescope, cli = [], [], []
    for _ in range(args.repeats):
        floor.append(timed([sys.executable, "-c", "import torch"], core))
        with tempfile.TemporaryDirectory() as root:  # a fresh /autograder layout, as on Gradescope
            shutil.copytree(args.submission, Path(root) / "submission",
                            ignore=shutil.ignore_patterns("__pycache__", "*.md", "checks", "*.ini", "*.ipynb"))
            gradescope.append(timed([sys.executable, "-m", "autograder.packaging.gradescope", "run"], core,
                                    {"AUTOGRADER_ROOT": root}))
        with tempfile.TemporaryDirectory() as out:  # fresh: the batch ledger would skip a graded submission
            cli.append(timed([sys.executable, "-m", "autograder", "grade", str(args.submission),
                              "--out", out, "--jobs", "1", "--no-progress"], core))
    f, g, c = statistics.median(floor), statistics.median(gradescope), statistics.median(cli)
    where = "all cores" if core is None else f"core {core}"
    print(f"pinned to: {where}; repeats: {args.repeats} (median)")
    print(f"floor       python -c 'import torch'                    {f:6.2f} s")
    print(f"gradescope  one submission, full suite, judge + sandbox {g:6.2f} s   ratio {g / f:4.2f}x  (goal <= 3x)")
    print(f"cli         python -m autograder grade (+ gradebook,    {c:6.2f} s   ratio {c / f:4.2f}x")
    print("            summary, histogram, worker process)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
